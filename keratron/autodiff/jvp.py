"""Forward-mode products (`jvp`) built from two reverse-mode passes.

`J^T u` is linear in the cotangent `u`, so differentiating `<J^T u, t>` with respect to `u`
gives `J t`. Both passes are GradientTape passes over the primitives' VJP rules, so `jvp`
works for every differentiable op, eagerly and under tracing.
"""

from __future__ import annotations

from keratron import config
from keratron.autodiff import tree
from keratron.autodiff.dtypes import to_torch_dtype
from keratron.autodiff.tape import GradientTape, engine
from keratron.autodiff.tensor import Tensor, convert_to_tensor

__all__ = ["jvp"]


def _bind(name, *args, **params):
    # The engine's primitives are installed by keratron.ops (autodiff never imports it).
    return getattr(engine, name).bind(*args, **params)


def _as_float_primal(p) -> Tensor:
    if isinstance(p, Tensor):
        return p
    x = convert_to_tensor(p)
    if x._value.dtype.is_floating_point:
        return x
    return _bind("cast", x, dtype=to_torch_dtype(config.floatx()))


def jvp(fun, primals, tangents, has_aux=False):
    """Forward-mode product `J(primals) @ tangents` of `fun`, by differentiating the
    reverse-mode product (linear in its cotangent) a second time.

    Returns:
        `(outputs, output_tangents)`, plus `aux` when `has_aux=True` (then `fun` returns
        `(outputs, aux)`).

    Example:
        >>> out, t = keratron.ops.jvp(keratron.ops.square, (3.0,), (1.0,))
        >>> float(t)
        6.0
    """
    if not isinstance(primals, (list, tuple)) or not isinstance(tangents, (list, tuple)):
        raise ValueError("jvp: `primals` and `tangents` must be tuples or lists.")
    if len(primals) != len(tangents):
        raise ValueError(
            f"jvp: got {len(primals)} primals but {len(tangents)} tangents; they must pair up."
        )
    xs = [_as_float_primal(p) for p in primals]
    ts = [_bind("cast", convert_to_tensor(t), dtype=x._value.dtype) for t, x in zip(tangents, xs)]
    for x, t in zip(xs, ts):
        if x.shape != t.shape:
            raise ValueError(f"jvp: a tangent of shape {t.shape} pairs with a primal {x.shape}.")
    with GradientTape(persistent=True) as outer:
        with GradientTape(watch_accessed_variables=False) as inner:
            for x in xs:
                inner.watch(x)
            res = fun(*xs)
        out, aux = res if has_aux else (res, None)
        flat = [convert_to_tensor(o) if not isinstance(o, Tensor) else o for o in tree.flatten(out)]
        # Cotangent placeholders u: zeros, watched by `outer`, one per floating output.
        us = [_bind("zeros_like", o) if o._value.dtype.is_floating_point else None for o in flat]
        watched = [u for u in us if u is not None]
        outer.watch(watched)
        float_outs = [o for o, u in zip(flat, us) if u is not None]
        grads = inner.gradient(float_outs, xs, output_gradients=watched)
    # d<J^T u, t>/du = J t: the gradient of the J^T u terms with t as their cotangents.
    pairs = [(g, t) for g, t in zip(grads, ts) if g is not None]
    if pairs:
        jt = iter(
            outer.gradient(
                [g for g, _ in pairs],
                watched,
                output_gradients=[t for _, t in pairs],
                unconnected_gradients="zero",
            )
        )
    tangents_out = [
        _bind("zeros_like", o) if u is None or not pairs else next(jt) for o, u in zip(flat, us)
    ]
    tangents_out = tree.pack_sequence_as(out, tangents_out)
    return (out, tangents_out, aux) if has_aux else (out, tangents_out)
