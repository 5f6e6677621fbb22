"""`tf.gradients` and `tf.stop_gradient`.

A `Gradients` op lowers to `Trace.gradients` over the session's trace: the same VJP rules that
`GradientTape` and `keratron.function` use. Which sources are connected to the targets is
decided when the graph is built, as TF does, so an unconnected source gets None.
"""

from __future__ import annotations

from keratron import ops as kops
from keratron.compat.v1.framework import Tensor, convert_to_tensor, make_op, op_scope

__all__ = ["gradients", "stop_gradient"]


def _upstream(targets) -> set:
    seen, stack = set(), [t.op for t in targets]
    tensors = set(targets)
    while stack:
        op = stack.pop()
        if op in seen:
            continue
        seen.add(op)
        for t in op.inputs:
            tensors.add(t)
            stack.append(t.op)
    return tensors


def gradients(ys, xs, grad_ys=None, name="gradients", colocate_gradients_with_ops=False,
              gate_gradients=False, aggregation_method=None, stop_gradients=None,
              unconnected_gradients="none"):  # fmt: skip
    """The symbolic gradients of `sum(ys)` with respect to each of `xs` (None where an `x` is
    not connected to `ys`).

    Example:
        >>> import keratron.compat.v1 as tf
        >>> with tf.Graph().as_default(), tf.Session() as sess:
        ...     x = tf.placeholder(tf.float32)
        ...     (dx,) = tf.gradients(x * x, [x])
        ...     print(sess.run(dx, {x: 3.0}))
        6.0
    """
    if stop_gradients:
        raise NotImplementedError(
            "gradients(stop_gradients=...) is not supported; use "
            "tf.stop_gradient on the tensors instead."
        )
    single = not isinstance(xs, (list, tuple))
    xs = [xs] if single else list(xs)
    ys = [ys] if not isinstance(ys, (list, tuple)) else list(ys)
    ys = [convert_to_tensor(y) for y in ys]
    if grad_ys is not None:
        grad_ys = [grad_ys] if not isinstance(grad_ys, (list, tuple)) else list(grad_ys)
    reach = _upstream(ys)
    variables, tensors = [], []
    for x in xs:
        if hasattr(x, "_as_graph_tensor"):
            variables.append(x)
            tensors.append(x._snapshot)
        elif isinstance(x, Tensor):
            variables.append(None)
            tensors.append(x)
        else:
            raise TypeError(f"gradients: xs must be Tensors or Variables. Received: {x!r}")
    connected = []
    for v, t in zip(variables, tensors):
        hit = t in reach or (v is not None and (v._ref in reach or _reads(v, reach)))
        connected.append(hit)
    want = [i for i, c in enumerate(connected) if c]
    result = [None] * len(xs)
    if not want:
        return result
    with op_scope(name, "gradients") as scope:
        gys = []
        if grad_ys is not None:
            gys = [ones_like_or(g, y) for g, y in zip(grad_ys, ys)]
        src_tensors = [tensors[i] for i in want if variables[i] is None]
        ny, ng = len(ys), len(gys)

        def lower(ctx, *vals):
            yv, gv, sv = vals[:ny], vals[ny : ny + ng], list(vals[ny + ng :])
            sources = []
            for i in want:
                if variables[i] is not None:
                    sources.append(ctx.read(variables[i]))
                else:
                    sources.append(sv.pop(0))
            grads = ctx.trace.gradients(list(yv), sources, list(gv) if gv else None)
            return tuple(kops.zeros_like(s) if g is None else g for g, s in zip(grads, sources))

        specs = [(tensors[i].shape, tensors[i].dtype) for i in want]
        op = make_op(
            "Gradients",
            scope,
            ys + gys + src_tensors,
            lower,
            out_specs=specs,
            attrs={"sources": src_tensors},
        )
    for i, out in zip(want, op.outputs):
        result[i] = out
    return result


def ones_like_or(g, y):
    from keratron.compat.v1 import array_ops

    return array_ops.ones_like(y) if g is None else convert_to_tensor(g, dtype=y.dtype)


def _reads(var, reach) -> bool:
    return any(t.op.inputs and t.op.inputs[0] is var._ref for t in reach if t.op.type == "Identity")


def stop_gradient(input, name=None):  # noqa: A002
    """Its input's value, through which no gradient flows."""
    with op_scope(name, "StopGradient") as scope:
        x = convert_to_tensor(input)
        return make_op("StopGradient", scope, [x], lambda ctx, v: kops.stop_gradient(v)).outputs[0]
