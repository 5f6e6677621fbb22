"""TF1 math ops: elementwise arithmetic, comparisons, reductions (with `reduction_indices` and
`keep_dims`), `matmul`, `cast`, `argmax`, `add_n`, clipping; and the symbolic Tensor's
operators."""

from __future__ import annotations

from keratron import ops as kops
from keratron.compat.v1 import array_ops
from keratron.compat.v1.framework import (
    _TENSOR_OPERATORS,
    Tensor,
    as_dtype,
    convert_to_tensor,
    make_op,
    op_scope,
)


def _is_symbolic(x) -> bool:
    return isinstance(x, Tensor) or hasattr(x, "_as_graph_tensor")


def _binary_args(x, y):
    # TF converts a Python operand to the other operand's dtype, inside the op's scope.
    if _is_symbolic(x) or not _is_symbolic(y):
        x = convert_to_tensor(x, name="x")
        y = convert_to_tensor(y, dtype=x.dtype, name="y")
    else:
        y = convert_to_tensor(y, name="y")
        x = convert_to_tensor(x, dtype=y.dtype, name="x")
    if x.dtype != y.dtype:
        raise TypeError(
            f"Input 'y' of '{x.op.type}' Op has type {y.dtype.name} that does not match type "
            f"{x.dtype.name} of argument 'x'."
        )
    return x, y


def _binary(op_type, default, fn):
    def op(x, y, name=None):
        with op_scope(name, default) as scope:
            x, y = _binary_args(x, y)
            return make_op(op_type, scope, [x, y], lambda ctx, a, b: fn(a, b)).outputs[0]

    op.__name__ = default
    op.__doc__ = f"`tf.{default}`: elementwise, with broadcasting (TF op `{op_type}`)."
    return op


def _unary(op_type, default, fn):
    def op(x, name=None):
        with op_scope(name, default) as scope:
            x = convert_to_tensor(x, name="x")
            return make_op(op_type, scope, [x], lambda ctx, a: fn(a)).outputs[0]

    op.__name__ = default
    op.__doc__ = f"`tf.{default}`: elementwise (TF op `{op_type}`)."
    return op


def _truediv(a, b):
    return kops.divide(a, b)


add = _binary("Add", "Add", kops.add)
subtract = _binary("Sub", "Sub", kops.subtract)
multiply = _binary("Mul", "Mul", kops.multiply)
divide = _binary("RealDiv", "truediv", _truediv)
truediv = divide
realdiv = _binary("RealDiv", "RealDiv", _truediv)
floordiv = _binary("FloorDiv", "floordiv", kops.floor_divide)
mod = _binary("FloorMod", "FloorMod", kops.mod)
floormod = mod
pow = _binary("Pow", "Pow", kops.power)  # noqa: A001
maximum = _binary("Maximum", "Maximum", kops.maximum)
minimum = _binary("Minimum", "Minimum", kops.minimum)
squared_difference = _binary(
    "SquaredDifference", "SquaredDifference", lambda a, b: kops.square(kops.subtract(a, b))
)
equal = _binary("Equal", "Equal", kops.equal)
not_equal = _binary("NotEqual", "NotEqual", kops.not_equal)
less = _binary("Less", "Less", kops.less)
less_equal = _binary("LessEqual", "LessEqual", kops.less_equal)
greater = _binary("Greater", "Greater", kops.greater)
greater_equal = _binary("GreaterEqual", "GreaterEqual", kops.greater_equal)
logical_and = _binary("LogicalAnd", "LogicalAnd", kops.logical_and)
logical_or = _binary("LogicalOr", "LogicalOr", kops.logical_or)
logical_xor = _binary("LogicalXor", "LogicalXor", kops.logical_xor)
# TF1's old names.
sub, mul, div = subtract, multiply, divide

negative = _unary("Neg", "Neg", kops.negative)
neg = negative
abs = _unary("Abs", "Abs", kops.abs)  # noqa: A001
square = _unary("Square", "Square", kops.square)
sqrt = _unary("Sqrt", "Sqrt", kops.sqrt)
rsqrt = _unary("Rsqrt", "Rsqrt", kops.rsqrt)
exp = _unary("Exp", "Exp", kops.exp)
log = _unary("Log", "Log", kops.log)
log1p = _unary("Log1p", "Log1p", kops.log1p)
sin = _unary("Sin", "Sin", kops.sin)
cos = _unary("Cos", "Cos", kops.cos)
tanh = _unary("Tanh", "Tanh", kops.tanh)
sigmoid = _unary("Sigmoid", "Sigmoid", kops.sigmoid)
sign = _unary("Sign", "Sign", kops.sign)
floor = _unary("Floor", "Floor", kops.floor)
ceil = _unary("Ceil", "Ceil", kops.ceil)
round = _unary("Round", "Round", kops.round)  # noqa: A001
reciprocal = _unary("Reciprocal", "Reciprocal", kops.reciprocal)
logical_not = _unary("LogicalNot", "LogicalNot", kops.logical_not)
is_nan = _unary("IsNan", "IsNan", kops.isnan)
is_finite = _unary("IsFinite", "IsFinite", kops.isfinite)


def cast(x, dtype, name=None):
    """`tf.cast`: `x` converted to `dtype`."""
    dt = as_dtype(dtype)
    with op_scope(name, "Cast") as scope:
        x = convert_to_tensor(x, name="x")
        if x.dtype == dt:
            return x
        return make_op("Cast", scope, [x], lambda ctx, a: kops.cast(a, dt.name)).outputs[0]


def to_float(x, name="ToFloat"):
    return cast(x, "float32", name=name)


def to_int32(x, name="ToInt32"):
    return cast(x, "int32", name=name)


def to_int64(x, name="ToInt64"):
    return cast(x, "int64", name=name)


def matmul(a, b, transpose_a=False, transpose_b=False, adjoint_a=False, adjoint_b=False,
           a_is_sparse=False, b_is_sparse=False, name=None):  # fmt: skip
    """`tf.matmul` of two (batched) matrices."""
    ta, tb = transpose_a or adjoint_a, transpose_b or adjoint_b

    def lower(ctx, x, y):
        if ta:
            x = kops.swapaxes(x, -1, -2)
        if tb:
            y = kops.swapaxes(y, -1, -2)
        return kops.matmul(x, y)

    with op_scope(name, "MatMul") as scope:
        a, b = _binary_args(a, b)
        return make_op("MatMul", scope, [a, b], lower).outputs[0]


def _reduction(op_type, default, fn):
    def op(input_tensor, axis=None, keepdims=None, name=None, reduction_indices=None,
           keep_dims=None):  # fmt: skip
        if axis is None:
            axis = reduction_indices
        if keepdims is None:
            keepdims = bool(keep_dims)
        ax = array_ops._axis_list(axis)
        ax = None if ax is None else tuple(ax)
        with op_scope(name, default) as scope:
            x = convert_to_tensor(input_tensor)
            return make_op(
                op_type, scope, [x], lambda ctx, v: fn(v, axis=ax, keepdims=keepdims)
            ).outputs[0]

    op.__name__ = "reduce_" + default.lower()
    op.__doc__ = (
        f"`tf.reduce_{default.lower()}` over `axis` (or `reduction_indices`), all axes if None; "
        "`keepdims` (or `keep_dims`) keeps reduced axes with size 1."
    )
    return op


reduce_sum = _reduction("Sum", "Sum", kops.sum)
reduce_mean = _reduction("Mean", "Mean", kops.mean)
reduce_max = _reduction("Max", "Max", kops.max)
reduce_min = _reduction("Min", "Min", kops.min)
reduce_prod = _reduction("Prod", "Prod", kops.prod)
reduce_all = _reduction("All", "All", kops.all)
reduce_any = _reduction("Any", "Any", kops.any)
reduce_logsumexp = _reduction("ReduceLogSumExp", "ReduceLogSumExp", kops.logsumexp)


def _arg(op_type, default, fn):
    def op(input, axis=None, name=None, dimension=None, output_type="int64"):  # noqa: A002
        if axis is None:
            axis = dimension if dimension is not None else 0
        ax = array_ops._axis_list(axis)[0]
        dt = as_dtype(output_type).name
        with op_scope(name, default) as scope:
            x = convert_to_tensor(input)
            return make_op(
                op_type, scope, [x], lambda ctx, v: kops.cast(fn(v, axis=ax), dt)
            ).outputs[0]

    op.__name__ = default.lower()
    return op


argmax = _arg("ArgMax", "ArgMax", kops.argmax)
argmin = _arg("ArgMin", "ArgMin", kops.argmin)
arg_max, arg_min = argmax, argmin


def add_n(inputs, name=None):
    """`tf.add_n`: the elementwise sum of a list of same-shaped tensors."""

    def lower(ctx, *xs):
        total = xs[0]
        for x in xs[1:]:
            total = kops.add(total, x)
        return total

    with op_scope(name, "AddN") as scope:
        xs = [convert_to_tensor(x) for x in inputs]
        return make_op("AddN", scope, xs, lower).outputs[0]


def clip_by_value(t, clip_value_min, clip_value_max, name=None):
    with op_scope(name, "clip_by_value") as scope:
        x = convert_to_tensor(t)
        lo = convert_to_tensor(clip_value_min, dtype=x.dtype)
        hi = convert_to_tensor(clip_value_max, dtype=x.dtype)
        return make_op(
            "ClipByValue",
            scope,
            [x, lo, hi],
            lambda ctx, v, a, b: kops.minimum(kops.maximum(v, a), b),
        ).outputs[0]


def clip_by_norm(t, clip_norm, axes=None, name=None):
    ax = None if axes is None else tuple(array_ops._axis_list(axes))

    def lower(ctx, v, c):
        norm = kops.sqrt(kops.sum(kops.square(v), axis=ax, keepdims=True))
        return v * c / kops.maximum(norm, c)

    with op_scope(name, "clip_by_norm") as scope:
        x = convert_to_tensor(t)
        c = convert_to_tensor(clip_norm, dtype=x.dtype)
        return make_op("ClipByNorm", scope, [x, c], lower).outputs[0]


def global_norm(t_list, name=None):
    def lower(ctx, *vs):
        total = None
        for v in vs:
            s = kops.sum(kops.square(v))
            total = s if total is None else total + s
        return kops.sqrt(total)

    with op_scope(name, "global_norm") as scope:
        xs = [convert_to_tensor(t) for t in t_list if t is not None]
        return make_op("GlobalNorm", scope, xs, lower).outputs[0]


def clip_by_global_norm(t_list, clip_norm, use_norm=None, name=None):
    """Scales every tensor of `t_list` by `clip_norm / max(global_norm, clip_norm)`."""
    with op_scope(name, "clip_by_global_norm"):
        norm = global_norm(t_list) if use_norm is None else use_norm
        scale = clip_norm / maximum(norm, clip_norm)
        out = [None if t is None else multiply(t, cast(scale, t.dtype)) for t in t_list]
    return out, norm


def count_nonzero(input_tensor, axis=None, keepdims=False, dtype="int64", name=None):
    return reduce_sum(
        cast(not_equal(input_tensor, 0), dtype), axis=axis, keepdims=keepdims, name=name
    )


# ---------------------------------------------------------------------------- Tensor operators
def _op_fn(fn, default, reverse=False):
    def method(self, other):
        with op_scope(None, default):
            pass
        a, b = (other, self) if reverse else (self, other)
        return fn(a, b, name=default)

    return method


def _named(fn, default):
    def call(a, b, name=None):
        return fn(a, b, name=name or default)

    return call


_ops = {
    "__add__": (add, "add"),
    "__sub__": (subtract, "sub"),
    "__mul__": (multiply, "mul"),
    "__truediv__": (divide, "truediv"),
    "__floordiv__": (floordiv, "floordiv"),
    "__mod__": (mod, "mod"),
    "__pow__": (pow, "pow"),
    "__matmul__": (matmul, "matmul"),
    "__lt__": (less, "Less"),
    "__le__": (less_equal, "LessEqual"),
    "__gt__": (greater, "Greater"),
    "__ge__": (greater_equal, "GreaterEqual"),
    "__and__": (logical_and, "and"),
    "__or__": (logical_or, "or"),
    "__xor__": (logical_xor, "xor"),
}
for _dunder, (_fn, _default) in _ops.items():
    _TENSOR_OPERATORS[_dunder] = (lambda f, d: lambda s, o: f(s, o, name=d))(_fn, _default)
    if _dunder not in ("__lt__", "__le__", "__gt__", "__ge__"):
        _TENSOR_OPERATORS["__r" + _dunder[2:]] = (lambda f, d: lambda s, o: f(o, s, name=d))(
            _fn, _default
        )
_TENSOR_OPERATORS["__neg__"] = lambda s: negative(s, name="Neg")
_TENSOR_OPERATORS["__abs__"] = lambda s: abs(s, name="Abs")
_TENSOR_OPERATORS["__invert__"] = lambda s: logical_not(s, name="LogicalNot")
_TENSOR_OPERATORS["__getitem__"] = lambda s, k: array_ops.strided_slice(s, k)
