"""TF1 array ops: constants, placeholders, shapes, reshaping, joining, slicing, random draws."""

from __future__ import annotations

import builtins

import numpy as np

from keratron import ops as kops
from keratron import random as krandom
from keratron.autodiff.tensor import Tensor as KTensor
from keratron.autodiff.tensor import convert_to_tensor as k_convert
from keratron.compat.v1 import errors
from keratron.compat.v1.framework import (
    Tensor,
    TensorShape,
    as_dtype,
    convert_to_tensor,
    get_default_graph,
    make_op,
    op_scope,
)


def _np_value(value, dtype):
    if isinstance(value, (list, tuple)) and any(isinstance(v, Tensor) for v in value):
        raise TypeError(
            "constant: a list holding symbolic Tensors cannot be a constant; use tf.stack."
        )
    if dtype is not None:
        return np.asarray(value, dtype=as_dtype(dtype).as_numpy_dtype)
    arr = np.asarray(value)
    if arr.dtype == np.float64 and not isinstance(value, np.ndarray):
        arr = arr.astype(np.float32)  # Python floats are float32 in TF
    elif arr.dtype == np.int64 and not isinstance(value, (np.ndarray, np.integer)):
        arr = arr.astype(np.int32)
    return arr


def constant(value, dtype=None, shape=None, name="Const", verify_shape=False):
    """`tf.constant`: a `Const` op holding `value` (broadcast to `shape` if given).

    Example:
        >>> import keratron.compat.v1 as tf
        >>> with tf.Graph().as_default():
        ...     c = tf.constant([[3.0, 3.0]])
        >>> c.shape.as_list()
        [1, 2]
    """
    arr = _np_value(value, dtype)
    if shape is not None:
        shape = tuple(int(d) for d in shape)
        if arr.size == 1:
            arr = np.full(shape, arr.reshape(()), dtype=arr.dtype)
        elif verify_shape and arr.shape != shape:
            raise TypeError(f"Expected Tensor's shape: {shape}, got {arr.shape}.")
        else:
            arr = arr.reshape(shape)
    value_t = k_convert(arr)
    g = get_default_graph()
    op = make_op(
        "Const",
        g.unique_name(name or "Const"),
        [],
        lambda ctx: value_t,
        out_specs=[(arr.shape, arr.dtype)],
        attrs={"value": arr},
    )
    return op.outputs[0]


def constant_value(t):
    """The value of `t` if it is known when the graph is built (a Const), else None."""
    if isinstance(t, Tensor) and t.op.type == "Const":
        return t.op.get_attr("value")
    if isinstance(t, Tensor) and t.op.type == "Shape" and t.op.inputs[0].shape.is_fully_defined():
        return np.array(t.op.inputs[0].shape.as_list(), dtype=t.dtype.as_numpy_dtype)
    if isinstance(t, Tensor):
        return None
    return np.asarray(t)


def placeholder(dtype, shape=None, name=None):
    """`tf.placeholder`: a graph input that every `Session.run` needing it must feed."""
    g = get_default_graph()
    op_name = g.unique_name(name or "Placeholder")
    dt = as_dtype(dtype)
    shape = TensorShape(shape)

    def lower(ctx):
        dims = "<unknown>"
        if shape.dims is not None:
            dims = "[" + ",".join("?" if d is None else str(d) for d in shape.dims) + "]"
        raise errors.InvalidArgumentError(
            None,
            None,
            f"You must feed a value for placeholder tensor '{op_name}' with dtype "
            f"{_tf_type_name(dt)} and shape {dims}",
        )

    return make_op("Placeholder", op_name, [], lower, out_specs=[(shape, dt)]).outputs[0]


def _tf_type_name(dt):
    return {"float32": "float", "float64": "double"}.get(dt.name, dt.name)


def placeholder_with_default(input, shape, name=None):  # noqa: A002
    """A placeholder that takes `input`'s value when it is not fed."""
    with op_scope(name, "PlaceholderWithDefault") as scope:
        x = convert_to_tensor(input)
        return make_op(
            "PlaceholderWithDefault", scope, [x], lambda ctx, v: v, out_specs=[(shape, x.dtype)]
        ).outputs[0]


def _simple(op_type, default, inputs, lower, name, **kw):
    with op_scope(name, default) as scope:
        ins = [convert_to_tensor(x) for x in inputs]
        return make_op(op_type, scope, ins, lower, **kw).outputs


def identity(input, name=None):  # noqa: A002
    return _simple("Identity", "Identity", [input], lambda ctx, x: x, name)[0]


def _static_ints(x, what):
    v = constant_value(x)
    if v is None:
        return None
    return [int(d) for d in np.asarray(v).reshape(-1)] if np.ndim(v) else int(v)


def shape(input, name=None, out_type="int32"):  # noqa: A002
    """`tf.shape`: the dynamic shape (known whenever the session lowers the graph)."""
    dt = as_dtype(out_type)

    def lower(ctx, x):
        return k_convert(np.array(x.shape, dtype=dt.as_numpy_dtype))

    with op_scope(name, "Shape") as scope:
        x = convert_to_tensor(input)
        n = x.shape.ndims
        return make_op("Shape", scope, [x], lower, out_specs=[((n,), dt)]).outputs[0]


def size(input, name=None, out_type="int32"):  # noqa: A002
    dt = as_dtype(out_type)
    return _simple(
        "Size",
        "Size",
        [input],
        lambda ctx, x: k_convert(np.array(int(np.prod(x.shape)), dtype=dt.as_numpy_dtype)),
        name,
        out_specs=[((), dt)],
    )[0]


def rank(input, name=None):  # noqa: A002
    return _simple(
        "Rank",
        "Rank",
        [input],
        lambda ctx, x: k_convert(np.array(len(x.shape), dtype=np.int32)),
        name,
        out_specs=[((), "int32")],
    )[0]


def _shape_arg(s):
    """A shape given as a list, a Const or a Shape op: its ints (lists may hold -1)."""
    if isinstance(s, Tensor):
        v = constant_value(s)
        return None if v is None else [int(d) for d in np.asarray(v).reshape(-1)]
    if isinstance(s, (list, tuple)) and any(isinstance(d, Tensor) for d in s):
        return None
    return [int(d) for d in np.asarray(s).reshape(-1)]


def _concrete_ints(v):
    if isinstance(v, KTensor) and v._value.is_meta:
        raise ValueError("a shape argument must be known when the graph is run")
    return [int(d) for d in np.asarray(v.numpy() if isinstance(v, KTensor) else v).reshape(-1)]


def reshape(tensor, shape, name=None):
    """`tf.reshape` (a `-1` entry takes the remaining size)."""
    static = _shape_arg(shape)
    with op_scope(name, "Reshape") as scope:
        x = convert_to_tensor(tensor)
        if static is not None:
            return make_op(
                "Reshape", scope, [x], lambda ctx, v: kops.reshape(v, tuple(static))
            ).outputs[0]
        s = stack(shape) if isinstance(shape, (list, tuple)) else convert_to_tensor(shape)
        n = s.shape.dims[0] if s.shape.dims else None
        out = [None] * n if n is not None else None
        return make_op(
            "Reshape",
            scope,
            [x, s],
            lambda ctx, v, sv: kops.reshape(v, tuple(_concrete_ints(sv))),
            out_specs=[(out, x.dtype)],
        ).outputs[0]


def _axis_list(axis):
    if axis is None:
        return None
    if isinstance(axis, Tensor):
        v = constant_value(axis)
        if v is None:
            raise ValueError(f"The axis {axis.name} must be known when the graph is built.")
        axis = v
    a = np.asarray(axis).reshape(-1).tolist()
    return [int(d) for d in a]


def expand_dims(input, axis=None, name=None, dim=None):  # noqa: A002
    axis = _axis_list(axis if axis is not None else dim)[0]
    return _simple(
        "ExpandDims", "ExpandDims", [input], lambda ctx, x: kops.expand_dims(x, axis), name
    )[0]


def squeeze(input, axis=None, name=None, squeeze_dims=None):  # noqa: A002
    axis = _axis_list(axis if axis is not None else squeeze_dims)
    ax = None if not axis else tuple(axis)
    return _simple("Squeeze", "Squeeze", [input], lambda ctx, x: kops.squeeze(x, ax), name)[0]


def transpose(a, perm=None, name="transpose", conjugate=False):
    perm = _axis_list(perm)
    return _simple("Transpose", "transpose", [a], lambda ctx, x: kops.transpose(x, perm), name)[0]


def concat(values, axis, name="concat"):
    axis = _axis_list(axis)[0]
    with op_scope(name, "concat") as scope:
        ins = [convert_to_tensor(v) for v in values]
        return make_op(
            "ConcatV2", scope, ins, lambda ctx, *xs: kops.concatenate(list(xs), axis=axis)
        ).outputs[0]


def stack(values, axis=0, name="stack"):
    with op_scope(name, "stack") as scope:
        ins = [convert_to_tensor(v) for v in values]
        if len({t.dtype for t in ins}) > 1:
            ins = [convert_to_tensor(v, dtype=ins[0].dtype) for v in values]

        return make_op(
            "Pack", scope, ins, lambda ctx, *xs: kops.stack(list(xs), axis=axis)
        ).outputs[0]


pack = stack


def unstack(value, num=None, axis=0, name="unstack"):
    with op_scope(name, "unstack") as scope:
        x = convert_to_tensor(value)
        n = num if num is not None else x.shape.dims[axis]
        op = make_op(
            "Unpack", scope, [x], lambda ctx, v: tuple(kops.unstack(v, axis=axis)), n_out=n
        )
        return list(op.outputs)


unpack = unstack


def split(value, num_or_size_splits, axis=0, num=None, name="split"):
    axis = _axis_list(axis)[0]
    with op_scope(name, "split") as scope:
        x = convert_to_tensor(value)
        if isinstance(num_or_size_splits, int):
            n = num_or_size_splits
            lower = lambda ctx, v: tuple(kops.split(v, n, axis=axis))  # noqa: E731
        else:
            sizes = [int(s) for s in num_or_size_splits]
            n = len(sizes)
            cuts = list(np.cumsum(sizes)[:-1])
            lower = lambda ctx, v: tuple(kops.split(v, cuts, axis=axis))  # noqa: E731
        return list(make_op("Split", scope, [x], lower, n_out=n).outputs)


def tile(input, multiples, name=None):  # noqa: A002
    m = _shape_arg(multiples)
    return _simple("Tile", "Tile", [input], lambda ctx, x: kops.tile(x, m), name)[0]


def pad(tensor, paddings, mode="CONSTANT", name=None, constant_values=0):
    p = [tuple(int(a) for a in row) for row in np.asarray(paddings)]
    mode_k = mode.lower()
    return _simple(
        "Pad",
        "Pad",
        [tensor],
        lambda ctx, x: (
            kops.pad(x, p, mode=mode_k, constant_values=constant_values)
            if mode_k == "constant"
            else kops.pad(x, p, mode=mode_k)
        ),
        name,
    )[0]


def gather(params, indices, axis=0, name=None, validate_indices=None):
    return _simple(
        "GatherV2",
        "GatherV2",
        [params, indices],
        lambda ctx, p, i: kops.take(p, i, axis=axis),
        name,
    )[0]


def one_hot(indices, depth, on_value=None, off_value=None, axis=None, dtype=None, name=None):
    """`tf.one_hot`, with `on_value`/`off_value` (1 and 0 by default)."""
    dt = as_dtype(dtype) if dtype is not None else None
    if dt is None:
        dt = as_dtype(type(on_value)) if on_value is not None else as_dtype("float32")
        if dt.name == "float64":
            dt = as_dtype("float32")
    on = 1 if on_value is None else on_value
    off = 0 if off_value is None else off_value

    def lower(ctx, i):
        h = kops.one_hot(i, int(depth), axis=-1 if axis is None else axis, dtype=dt.name)
        if on == 1 and off == 0:
            return h
        return h * (on - off) + kops.cast(off, dt.name)

    return _simple("OneHot", "one_hot", [indices], lower, name)[0]


def fill(dims, value, name=None):
    d = _shape_arg(dims)
    v = convert_to_tensor(value)
    return _simple("Fill", "Fill", [v], lambda ctx, x: kops.broadcast_to(x, tuple(d)), name)[0]


def _filled(default, shape, dtype, fill_value, name):
    dt = as_dtype(dtype)
    s = _shape_arg(shape)
    if s is None:
        raise ValueError(f"{default}: the shape must be known when the graph is built.")
    return constant(np.full(tuple(s), fill_value, dtype=dt.as_numpy_dtype), name=name or default)


def zeros(shape, dtype="float32", name=None):
    return _filled("zeros", shape, dtype, 0, name)


def ones(shape, dtype="float32", name=None):
    return _filled("ones", shape, dtype, 1, name)


def zeros_like(tensor, dtype=None, name=None, optimize=True):
    x = convert_to_tensor(tensor)
    dt = (as_dtype(dtype) if dtype is not None else x.dtype).name
    return _simple(
        "ZerosLike", "zeros_like", [x], lambda ctx, v: kops.zeros_like(v, dtype=dt), name
    )[0]


def ones_like(tensor, dtype=None, name=None, optimize=True):
    x = convert_to_tensor(tensor)
    dt = (as_dtype(dtype) if dtype is not None else x.dtype).name
    return _simple("OnesLike", "ones_like", [x], lambda ctx, v: kops.ones_like(v, dtype=dt), name)[
        0
    ]


def range(start, limit=None, delta=1, dtype=None, name="range"):  # noqa: A001
    if limit is None:
        start, limit = 0, start
    arr = np.arange(start, limit, delta)
    if dtype is not None:
        arr = arr.astype(as_dtype(dtype).as_numpy_dtype)
    elif arr.dtype == np.int64:
        arr = arr.astype(np.int32)
    elif arr.dtype == np.float64:
        arr = arr.astype(np.float32)
    return constant(arr, name=name)


def linspace(start, stop, num, name=None):
    return constant(np.linspace(start, stop, num, dtype=np.float32), name=name or "LinSpace")


def slice(input_, begin, size, name=None):  # noqa: A001
    b, s = _shape_arg(begin), _shape_arg(size)
    idx = tuple(builtins.slice(bi, None if si == -1 else bi + si) for bi, si in zip(b, s))
    return _simple("Slice", "Slice", [input_], lambda ctx, x: x[idx], name)[0]


def strided_slice(input_, begin, end=None, strides=None, begin_mask=0, end_mask=0,
                  ellipsis_mask=0, new_axis_mask=0, shrink_axis_mask=0, var=None,
                  name="strided_slice"):  # fmt: skip
    """`tf.strided_slice(input_, begin, end, strides)` with TF's begin / end / shrink-axis
    masks; `strided_slice(x, key)` (no `end`) is `x[key]` with Python indexing."""
    if end is None:
        return _getitem(input_, begin, name)
    if ellipsis_mask or new_axis_mask:
        raise ValueError(
            "strided_slice: ellipsis_mask and new_axis_mask are not supported. Received: "
            f"ellipsis_mask={ellipsis_mask}, new_axis_mask={new_axis_mask}"
        )
    b, e = _static_ints(begin, "begin"), _static_ints(end, "end")
    st = [1] * len(b) if strides is None else _static_ints(strides, "strides")
    if b is None or e is None or st is None or not len(b) == len(e) == len(st):
        raise ValueError(
            "strided_slice: begin, end and strides must be constant lists of one length. "
            f"Received: begin={begin}, end={end}, strides={strides}"
        )
    key = []
    for i, (bi, ei, si) in enumerate(zip(b, e, st)):
        if shrink_axis_mask >> i & 1:
            key.append(bi)
        else:
            lo, hi = None if begin_mask >> i & 1 else bi, None if end_mask >> i & 1 else ei
            key.append(builtins.slice(lo, hi, si))
    return _getitem(input_, tuple(key), name)


def _getitem(x, key, name):
    if isinstance(key, Tensor) or (
        isinstance(key, tuple) and any(isinstance(k, Tensor) for k in key)
    ):
        raise TypeError("Indexing with symbolic tensors is not supported; use tf.gather.")
    return _simple("StridedSlice", name, [x], lambda ctx, v: v[key], None)[0]


def where(condition, x=None, y=None, name=None):
    if x is None and y is None:
        raise NotImplementedError("where(condition) without x and y has a data-dependent shape.")
    return _simple(
        "Select", "Select", [condition, x, y], lambda c, a, b, d: kops.where(a, b, d), name
    )[0]


def boolean_mask(tensor, mask, name="boolean_mask", axis=None):
    raise NotImplementedError("boolean_mask has a data-dependent shape; it is not supported yet.")


# ---------------------------------------------------------------------------- random
def _seed(op_seed):
    """TF's seed rule: graph seed and op seed make a fixed stream; neither, a fresh one."""
    g = get_default_graph()
    if g.seed is None and op_seed is None:
        return None
    graph_seed = g.seed if g.seed is not None else 87654321
    op_seed = op_seed if op_seed is not None else g._next_uid()
    return krandom.SeedGenerator(seed=(int(graph_seed) * 1000003 + int(op_seed)) % (2**62))


def _random(op_type, default, shape, dtype, name, draw):
    s = _shape_arg(shape)
    if s is None:
        raise ValueError(f"{default}: the shape must be known when the graph is built.")
    dt = as_dtype(dtype)
    with op_scope(name, default) as scope:
        return make_op(
            op_type, scope, [], lambda ctx: draw(tuple(s), dt.name), out_specs=[(s, dt)]
        ).outputs[0]


def random_normal(shape, mean=0.0, stddev=1.0, dtype="float32", seed=None, name=None):
    gen = _seed(seed)
    return _random(
        "RandomStandardNormal",
        "random_normal",
        shape,
        dtype,
        name,
        lambda s, d: krandom.normal(s, mean=mean, stddev=stddev, dtype=d, seed=gen),
    )


def truncated_normal(shape, mean=0.0, stddev=1.0, dtype="float32", seed=None, name=None):
    gen = _seed(seed)
    return _random(
        "TruncatedNormal",
        "truncated_normal",
        shape,
        dtype,
        name,
        lambda s, d: krandom.truncated_normal(s, mean=mean, stddev=stddev, dtype=d, seed=gen),
    )


def random_uniform(shape, minval=0, maxval=None, dtype="float32", seed=None, name=None):
    gen = _seed(seed)
    dt = as_dtype(dtype)
    if maxval is None:
        if dt.is_integer:
            raise ValueError("Must specify maxval for integer dtype " + dt.name)
        maxval = 1.0
    if dt.is_integer:
        draw = lambda s, d: krandom.randint(s, minval, maxval, dtype=d, seed=gen)  # noqa: E731
    else:
        draw = lambda s, d: krandom.uniform(s, minval, maxval, dtype=d, seed=gen)  # noqa: E731
    return _random("RandomUniform", "random_uniform", shape, dtype, name, draw)


def set_random_seed(seed) -> None:
    """Sets the graph-level seed: ops created afterwards draw reproducible streams."""
    get_default_graph().seed = seed
