"""TF2's eager ops under TensorFlow's names and signatures, over `keratron.ops`.

Every op takes and returns keratron Tensors and calls `keratron.ops`, so it runs eagerly, is
recorded by a `GradientTape` and traces inside `keratron.function`. (The ops of
`keratron.compat.v1` build graph nodes instead; v2 shares their DTypes.)
"""

from __future__ import annotations

import builtins

import numpy as np

from keratron import ops as kops
from keratron.autodiff import Tensor
from keratron.autodiff import convert_to_tensor as _to_tensor
from keratron.autodiff.tensor import check_concrete
from keratron.compat.v1.framework import as_dtype


def _dt(dtype):
    """A keratron dtype name for a TF dtype (a DType, a name, a numpy dtype), or None."""
    return None if dtype is None else as_dtype(dtype).name


def _axis(axis):
    return tuple(axis) if isinstance(axis, list) else axis


def convert_to_tensor(value, dtype=None, dtype_hint=None, name=None) -> Tensor:
    """`tf.convert_to_tensor`: Python ints become int32 and floats float32, as in TF."""
    if dtype is None and dtype_hint is not None and not isinstance(value, Tensor):
        dtype = dtype_hint
    if isinstance(value, np.generic):  # np.float64(1.0) is a Python float too: keep float64
        value = np.asarray(value)
    return _to_tensor(value, dtype=_dt(dtype))


def constant(value, dtype=None, shape=None, name="Const") -> Tensor:
    """`tf.constant`: a tensor of `value`, broadcast to `shape` when given."""
    t = convert_to_tensor(value, dtype)
    if shape is not None and tuple(t.shape) != tuple(shape):
        t = kops.reshape(t, shape) if t.size == _numel(shape) else kops.broadcast_to(t, shape)
    return t


def _numel(shape):
    n = 1
    for d in shape:
        n *= int(d)
    return n


def zeros(shape, dtype="float32", name=None) -> Tensor:
    return kops.zeros(tuple(shape) if not isinstance(shape, int) else (shape,), _dt(dtype))


def ones(shape, dtype="float32", name=None) -> Tensor:
    return kops.ones(tuple(shape) if not isinstance(shape, int) else (shape,), _dt(dtype))


def fill(dims, value, name=None) -> Tensor:
    return kops.full(tuple(dims), convert_to_tensor(value))


def zeros_like(input, dtype=None, name=None) -> Tensor:  # noqa: A002
    return kops.zeros_like(convert_to_tensor(input), dtype=_dt(dtype))


def ones_like(input, dtype=None, name=None) -> Tensor:  # noqa: A002
    return kops.ones_like(convert_to_tensor(input), dtype=_dt(dtype))


def cast(x, dtype, name=None) -> Tensor:
    """`tf.cast`: float-to-int truncates toward zero, as in TF."""
    return kops.cast(convert_to_tensor(x), _dt(dtype))


def range(start, limit=None, delta=1, dtype=None, name="range") -> Tensor:  # noqa: A001
    if limit is None:
        start, limit = 0, start
    for v in (start, limit, delta):
        if isinstance(v, Tensor):
            # Under tf.function, a traced bound makes the length unknown (tf.function then
            # runs the body eagerly); eagerly the value is read.
            check_concrete(v, "a bound of tf.range")
    if dtype is None and builtins.any(isinstance(v, float) for v in (start, limit, delta)):
        dtype = "float32"
    return kops.arange(start, limit, delta, dtype=_dt(dtype) or "int32")


def reshape(tensor, shape, name=None) -> Tensor:
    return kops.reshape(convert_to_tensor(tensor), tuple(int(d) for d in shape))


def transpose(a, perm=None, conjugate=False, name="transpose") -> Tensor:
    return kops.transpose(convert_to_tensor(a), perm)


def expand_dims(input, axis, name=None) -> Tensor:  # noqa: A002
    return kops.expand_dims(convert_to_tensor(input), axis)


def squeeze(input, axis=None, name=None) -> Tensor:  # noqa: A002
    return kops.squeeze(convert_to_tensor(input), _axis(axis))


def concat(values, axis, name="concat") -> Tensor:
    return kops.concatenate([convert_to_tensor(v) for v in values], axis=axis)


def stack(values, axis=0, name="stack") -> Tensor:
    return kops.stack([convert_to_tensor(v) for v in values], axis=axis)


def unstack(value, num=None, axis=0, name="unstack") -> list:
    return list(kops.unstack(convert_to_tensor(value), num=num, axis=axis))


def split(value, num_or_size_splits, axis=0, num=None, name="split") -> list:
    """`tf.split`: into `num_or_size_splits` equal parts, or parts of the listed sizes."""
    value = convert_to_tensor(value)
    if isinstance(num_or_size_splits, int):
        return list(kops.split(value, num_or_size_splits, axis=axis))
    sizes = [int(s) for s in num_or_size_splits]
    if -1 in sizes:
        sizes[sizes.index(-1)] = value.shape[axis] - (sum(sizes) + 1)
    cuts, total = [], 0
    for s in sizes[:-1]:
        total += s
        cuts.append(total)
    return list(kops.split(value, cuts, axis=axis))


def tile(input, multiples, name=None) -> Tensor:  # noqa: A002
    return kops.tile(convert_to_tensor(input), tuple(int(m) for m in multiples))


def gather(params, indices, axis=None, batch_dims=0, name=None) -> Tensor:
    return kops.take(convert_to_tensor(params), convert_to_tensor(indices), axis=axis or 0)


def one_hot(indices, depth, on_value=None, off_value=None, axis=None, dtype=None, name=None):
    """`tf.one_hot`: float32 unless `dtype` (or the on/off values) say otherwise."""
    out = kops.one_hot(convert_to_tensor(indices), depth, axis=-1 if axis is None else axis)
    out = kops.cast(out, _dt(dtype) or "float32")
    if on_value is not None or off_value is not None:
        on = 1 if on_value is None else on_value
        off = 0 if off_value is None else off_value
        out = kops.where(kops.cast(out, "bool"), on, off)
        out = kops.cast(out, _dt(dtype) or "float32")
    return out


def where(condition, x=None, y=None, name=None) -> Tensor:
    condition = convert_to_tensor(condition)
    if x is None and y is None:
        return kops.cast(kops.transpose(kops.stack(kops.nonzero(condition))), "int64")
    return kops.where(condition, convert_to_tensor(x), convert_to_tensor(y))


def shape(input, out_type="int32", name=None) -> Tensor:  # noqa: A002
    return constant(list(convert_to_tensor(input).shape), dtype=out_type)


def size(input, out_type="int32", name=None) -> Tensor:  # noqa: A002
    return constant(convert_to_tensor(input).size, dtype=out_type)


def rank(input, name=None) -> Tensor:  # noqa: A002
    return constant(convert_to_tensor(input).ndim, dtype="int32")


def identity(input, name=None) -> Tensor:  # noqa: A002
    """`tf.identity`: a Tensor with `input`'s value (a Variable's value at this point)."""
    x = convert_to_tensor(input)
    return kops.copy(x)


def pad(tensor, paddings, mode="CONSTANT", constant_values=0, name=None) -> Tensor:
    mode = {"CONSTANT": "constant", "REFLECT": "reflect", "SYMMETRIC": "symmetric"}[mode.upper()]
    width = [tuple(int(p) for p in pair) for pair in paddings]
    kwargs = {"constant_values": constant_values} if mode == "constant" else {}
    return kops.pad(convert_to_tensor(tensor), width, mode=mode, **kwargs)


# ---------------------------------------------------------------------------- math
def _binary(fn, doc_name):
    def op(x, y, name=None):
        if isinstance(x, Tensor) or not isinstance(y, Tensor):
            x = convert_to_tensor(x)
            y = convert_to_tensor(y, dtype=x.dtype)
        else:
            x = convert_to_tensor(x, dtype=y.dtype)
        return fn(x, y)

    op.__name__ = doc_name
    op.__doc__ = f"`tf.{doc_name}`: elementwise, with broadcasting."
    return op


def _unary(fn, doc_name):
    def op(x, name=None):
        return fn(convert_to_tensor(x))

    op.__name__ = doc_name
    op.__doc__ = f"`tf.math.{doc_name}`: elementwise."
    return op


add = _binary(kops.add, "add")
subtract = _binary(kops.subtract, "subtract")
multiply = _binary(kops.multiply, "multiply")
divide = _binary(kops.divide, "divide")
truediv = divide
floordiv = _binary(kops.floor_divide, "floordiv")
floormod = _binary(kops.mod, "floormod")
mod = floormod
pow = _binary(kops.power, "pow")  # noqa: A001
maximum = _binary(kops.maximum, "maximum")
minimum = _binary(kops.minimum, "minimum")
squared_difference = _binary(lambda a, b: kops.square(kops.subtract(a, b)), "squared_difference")
equal = _binary(kops.equal, "equal")
not_equal = _binary(kops.not_equal, "not_equal")
less = _binary(kops.less, "less")
less_equal = _binary(kops.less_equal, "less_equal")
greater = _binary(kops.greater, "greater")
greater_equal = _binary(kops.greater_equal, "greater_equal")
logical_and = _binary(kops.logical_and, "logical_and")
logical_or = _binary(kops.logical_or, "logical_or")

abs = _unary(kops.abs, "abs")  # noqa: A001
negative = _unary(kops.negative, "negative")
square = _unary(kops.square, "square")
sqrt = _unary(kops.sqrt, "sqrt")
rsqrt = _unary(kops.rsqrt, "rsqrt")
exp = _unary(kops.exp, "exp")
log = _unary(kops.log, "log")
log1p = _unary(kops.log1p, "log1p")
sin = _unary(kops.sin, "sin")
cos = _unary(kops.cos, "cos")
tanh = _unary(kops.tanh, "tanh")
sigmoid = _unary(kops.sigmoid, "sigmoid")
sign = _unary(kops.sign, "sign")
floor = _unary(kops.floor, "floor")
ceil = _unary(kops.ceil, "ceil")
round = _unary(kops.round, "round")  # noqa: A001
reciprocal = _unary(kops.reciprocal, "reciprocal")
logical_not = _unary(kops.logical_not, "logical_not")
is_nan = _unary(kops.isnan, "is_nan")
is_finite = _unary(kops.isfinite, "is_finite")
erf = _unary(kops.erf, "erf")


def _reduce(fn, doc_name, to_float=False):
    def op(input_tensor, axis=None, keepdims=False, name=None):
        x = convert_to_tensor(input_tensor)
        return fn(x, axis=_axis(axis), keepdims=keepdims)

    op.__name__ = doc_name
    op.__doc__ = f"`tf.{doc_name}`: over `axis` (an int, a list, or None for all axes)."
    return op


reduce_sum = _reduce(kops.sum, "reduce_sum")
reduce_mean = _reduce(kops.mean, "reduce_mean")
reduce_max = _reduce(kops.max, "reduce_max")
reduce_min = _reduce(kops.min, "reduce_min")
reduce_prod = _reduce(kops.prod, "reduce_prod")
reduce_all = _reduce(kops.all, "reduce_all")
reduce_any = _reduce(kops.any, "reduce_any")
reduce_logsumexp = _reduce(kops.logsumexp, "reduce_logsumexp")
reduce_std = _reduce(kops.std, "reduce_std")
reduce_variance = _reduce(kops.var, "reduce_variance")


def argmax(input, axis=None, output_type="int64", name=None) -> Tensor:  # noqa: A002
    """`tf.math.argmax`: int64 indices along `axis` (0 when None), as in TF."""
    return kops.cast(kops.argmax(convert_to_tensor(input), axis=axis or 0), _dt(output_type))


def argmin(input, axis=None, output_type="int64", name=None) -> Tensor:  # noqa: A002
    return kops.cast(kops.argmin(convert_to_tensor(input), axis=axis or 0), _dt(output_type))


def matmul(a, b, transpose_a=False, transpose_b=False, name=None, **kwargs) -> Tensor:
    """`tf.matmul`: the product of the last two axes, optionally transposing either input."""
    a, b = convert_to_tensor(a), convert_to_tensor(b)
    if transpose_a:
        a = kops.swapaxes(a, -1, -2)
    if transpose_b:
        b = kops.swapaxes(b, -1, -2)
    return kops.matmul(a, b)


def add_n(inputs, name=None) -> Tensor:
    out = convert_to_tensor(inputs[0])
    for x in inputs[1:]:
        out = kops.add(out, convert_to_tensor(x))
    return out


def clip_by_value(t, clip_value_min, clip_value_max, name=None) -> Tensor:
    return kops.clip(convert_to_tensor(t), clip_value_min, clip_value_max)


def clip_by_norm(t, clip_norm, axes=None, name=None) -> Tensor:
    """`tf.clip_by_norm`: `t * clip_norm / max(l2norm(t), clip_norm)` (norm over `axes`)."""
    t = convert_to_tensor(t)
    l2sum = kops.sum(kops.square(t), axis=_axis(axes), keepdims=True)
    positive = kops.greater(l2sum, 0)
    # The norm's gradient at a zero tensor is 0, as in TF, not the NaN of sqrt'(0).
    l2norm = kops.where(positive, kops.sqrt(kops.where(positive, l2sum, 1.0)), l2sum)
    clip_norm = kops.cast(clip_norm, t.dtype)
    return kops.divide(kops.multiply(t, clip_norm), kops.maximum(l2norm, clip_norm))


def global_norm(t_list, name=None) -> Tensor:
    """`tf.linalg.global_norm`: the Euclidean norm of all the tensors together (None skipped)."""
    sums = [kops.sum(kops.square(convert_to_tensor(t))) for t in t_list if t is not None]
    return kops.sqrt(add_n(sums))


def clip_by_global_norm(t_list, clip_norm, use_norm=None, name=None):
    """`tf.clip_by_global_norm`: scales every tensor by `clip_norm / max(global_norm,
    clip_norm)`; returns `(clipped_list, global_norm)` (None entries stay None)."""
    if isinstance(t_list, Tensor) or not isinstance(t_list, (list, tuple)):
        raise TypeError(
            f"tf.clip_by_global_norm: `t_list` should be a sequence. Received: {t_list!r}"
        )
    use_norm = global_norm(t_list) if use_norm is None else convert_to_tensor(use_norm)
    clip_norm = kops.cast(clip_norm, use_norm.dtype)
    scale = kops.multiply(clip_norm, kops.minimum(kops.divide(1.0, use_norm),
                                                   kops.divide(1.0, clip_norm)))  # fmt: skip
    scale = kops.where(kops.isfinite(use_norm), scale, float("nan"))
    clipped = [
        None if t is None else kops.multiply(convert_to_tensor(t), kops.cast(scale, t.dtype))
        for t in t_list
    ]
    return clipped, use_norm


def norm(tensor, ord="euclidean", axis=None, keepdims=None, name=None) -> Tensor:  # noqa: A002
    """`tf.norm`: the Euclidean norm over all entries (or `axis`) by default."""
    x = convert_to_tensor(tensor)
    if ord in ("euclidean", 2) and axis is None:
        return kops.sqrt(kops.sum(kops.square(x), keepdims=bool(keepdims)))
    return kops.norm(x, ord=None if ord == "euclidean" else ord, axis=_axis(axis),
                     keepdims=bool(keepdims))  # fmt: skip


def l2_normalize(x, axis=None, epsilon=1e-12, name=None) -> Tensor:
    x = convert_to_tensor(x)
    sq = kops.sum(kops.square(x), axis=_axis(axis), keepdims=True)
    return kops.multiply(x, kops.rsqrt(kops.maximum(sq, epsilon)))


def count_nonzero(input, axis=None, keepdims=False, dtype="int64", name=None):  # noqa: A002
    x = kops.not_equal(convert_to_tensor(input), 0)
    return kops.cast(kops.sum(kops.cast(x, "int32"), axis=_axis(axis), keepdims=keepdims),
                     _dt(dtype))  # fmt: skip


def stop_gradient(input, name=None) -> Tensor:  # noqa: A002
    return kops.stop_gradient(convert_to_tensor(input))
