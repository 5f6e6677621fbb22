"""Elementwise math: arithmetic, transcendental functions, comparisons, logic, casts.

Each primitive is defined on adjacent lines: implementation (torch), VJP (keratron ops).
"""

from __future__ import annotations

import math

import torch

from keratron.autodiff.dtypes import standardize_dtype
from keratron.ops._core import Primitive, Tensor, as_tensor, pair, to_torch_dtype

__all__ = [
    "add",
    "subtract",
    "multiply",
    "divide",
    "true_divide",
    "floor_divide",
    "mod",
    "power",
    "negative",
    "abs",
    "absolute",
    "sign",
    "exp",
    "exp2",
    "log",
    "log1p",
    "log2",
    "log10",
    "expm1",
    "sqrt",
    "rsqrt",
    "square",
    "reciprocal",
    "sin",
    "cos",
    "tan",
    "arcsin",
    "arccos",
    "arctan",
    "arctan2",
    "sinh",
    "cosh",
    "tanh",
    "arcsinh",
    "arccosh",
    "arctanh",
    "erf",
    "erfinv",
    "floor",
    "ceil",
    "round",
    "trunc",
    "clip",
    "maximum",
    "minimum",
    "where",
    "equal",
    "not_equal",
    "less",
    "less_equal",
    "greater",
    "greater_equal",
    "logical_and",
    "logical_or",
    "logical_xor",
    "logical_not",
    "isnan",
    "isinf",
    "isfinite",
    "cast",
    "sigmoid_p",
    "hypot",
    "square",
    "bitwise_invert",
    "copy",
    "nan_to_num",
    "log_sigmoid",
    "softplus",
    "relu",
    "relu6",
    "stop_gradient_p",
    "ones_like_p",
    "zeros_like_p",
    "conj",
    "real",
    "imag",
    "divide_no_nan",
    "logaddexp",
    "heaviside",
]


def _unary(name, impl, vjp):
    p = Primitive(name, impl, vjp)

    def op(x):
        return p.bind(as_tensor(x))

    op.__name__ = name
    return p, op


def _binary(name, impl, vjp):
    p = Primitive(name, impl, vjp)

    def op(x1, x2):
        return p.bind(*pair(x1, x2))

    op.__name__ = name
    return p, op


# ------------------------------------------------------------------------ arithmetic
add_p, add = _binary("add", torch.add, lambda g, x, y, out: (g, g))
subtract_p, subtract = _binary("subtract", torch.sub, lambda g, x, y, out: (g, negative(g)))
multiply_p, multiply = _binary(
    "multiply", torch.mul, lambda g, x, y, out: (multiply(g, y), multiply(g, x))
)
divide_p, divide = _binary(
    "divide",
    torch.true_divide,
    lambda g, x, y, out: (divide(g, y), negative(divide(multiply(g, out), y))),
)
true_divide = divide


def _floor_divide_impl(x, y):
    return torch.floor_divide(x, y)


floor_divide_p, floor_divide = _binary("floor_divide", _floor_divide_impl, None)
mod_p, mod = _binary(
    "mod",
    torch.remainder,
    lambda g, x, y, out: (g, negative(multiply(g, floor(divide(x, y))))),
)


def _power_vjp(g, x, y, out):
    gx = multiply(g, multiply(y, power(x, subtract(y, 1))))
    pos = greater(x, 0)
    safe = where(pos, x, 1)
    gy = where(pos, multiply(g, multiply(out, log(safe))), 0)
    return gx, gy


power_p, power = _binary("power", torch.pow, _power_vjp)
negative_p, negative = _unary("negative", torch.neg, lambda g, x, out: (negative(g),))
abs_p, abs = _unary("abs", torch.abs, lambda g, x, out: (multiply(g, sign(x)),))
absolute = abs
sign_p, sign = _unary("sign", torch.sign, None)
exp_p, exp = _unary("exp", torch.exp, lambda g, x, out: (multiply(g, out),))
exp2_p, exp2 = _unary(
    "exp2", torch.exp2, lambda g, x, out: (multiply(g, multiply(out, math.log(2.0))),)
)
log_p, log = _unary("log", torch.log, lambda g, x, out: (divide(g, x),))
log1p_p, log1p = _unary("log1p", torch.log1p, lambda g, x, out: (divide(g, add(x, 1)),))
log2_p, log2 = _unary(
    "log2", torch.log2, lambda g, x, out: (divide(g, multiply(x, math.log(2.0))),)
)
log10_p, log10 = _unary(
    "log10", torch.log10, lambda g, x, out: (divide(g, multiply(x, math.log(10.0))),)
)
expm1_p, expm1 = _unary("expm1", torch.expm1, lambda g, x, out: (multiply(g, add(out, 1)),))
sqrt_p, sqrt = _unary("sqrt", torch.sqrt, lambda g, x, out: (divide(multiply(g, 0.5), out),))
rsqrt_p, rsqrt = _unary(
    "rsqrt",
    torch.rsqrt,
    lambda g, x, out: (multiply(g, multiply(-0.5, divide(out, x))),),
)
square_p, square = _unary("square", torch.square, lambda g, x, out: (multiply(g, multiply(x, 2)),))
reciprocal_p, reciprocal = _unary(
    "reciprocal",
    torch.reciprocal,
    lambda g, x, out: (negative(multiply(g, square(out))),),
)
sin_p, sin = _unary("sin", torch.sin, lambda g, x, out: (multiply(g, cos(x)),))
cos_p, cos = _unary("cos", torch.cos, lambda g, x, out: (negative(multiply(g, sin(x))),))
tan_p, tan = _unary("tan", torch.tan, lambda g, x, out: (multiply(g, add(1, square(out))),))
arcsin_p, arcsin = _unary(
    "arcsin", torch.asin, lambda g, x, out: (multiply(g, rsqrt(subtract(1, square(x)))),)
)
arccos_p, arccos = _unary(
    "arccos",
    torch.acos,
    lambda g, x, out: (negative(multiply(g, rsqrt(subtract(1, square(x))))),),
)
arctan_p, arctan = _unary("arctan", torch.atan, lambda g, x, out: (divide(g, add(1, square(x))),))


def _atan2_vjp(g, y, x, out):
    denom = add(square(x), square(y))
    return divide(multiply(g, x), denom), negative(divide(multiply(g, y), denom))


arctan2_p, arctan2 = _binary("arctan2", torch.atan2, _atan2_vjp)
sinh_p, sinh = _unary("sinh", torch.sinh, lambda g, x, out: (multiply(g, cosh(x)),))
cosh_p, cosh = _unary("cosh", torch.cosh, lambda g, x, out: (multiply(g, sinh(x)),))
tanh_p, tanh = _unary(
    "tanh", torch.tanh, lambda g, x, out: (multiply(g, subtract(1, square(out))),)
)
arcsinh_p, arcsinh = _unary(
    "arcsinh", torch.asinh, lambda g, x, out: (multiply(g, rsqrt(add(square(x), 1))),)
)
arccosh_p, arccosh = _unary(
    "arccosh", torch.acosh, lambda g, x, out: (multiply(g, rsqrt(subtract(square(x), 1))),)
)
arctanh_p, arctanh = _unary(
    "arctanh", torch.atanh, lambda g, x, out: (divide(g, subtract(1, square(x))),)
)
erf_p, erf = _unary(
    "erf",
    torch.erf,
    lambda g, x, out: (multiply(g, multiply(2.0 / math.sqrt(math.pi), exp(negative(square(x))))),),
)
erfinv_p, erfinv = _unary(
    "erfinv",
    torch.erfinv,
    lambda g, x, out: (multiply(g, multiply(math.sqrt(math.pi) / 2.0, exp(square(out)))),),
)
sigmoid_p = Primitive(
    "sigmoid",
    torch.sigmoid,
    lambda g, x, out: (multiply(g, multiply(out, subtract(1, out))),),
)


def _hypot_vjp(g, x, y, out):
    return multiply(g, divide(x, out)), multiply(g, divide(y, out))


hypot_p, hypot = _binary("hypot", torch.hypot, _hypot_vjp)


def _logaddexp_vjp(g, x, y, out):
    return multiply(g, exp(subtract(x, out))), multiply(g, exp(subtract(y, out)))


logaddexp_p, logaddexp = _binary("logaddexp", torch.logaddexp, _logaddexp_vjp)

# Piecewise-constant functions have zero derivative almost everywhere: no VJP, no record.
floor_p, floor = _unary("floor", torch.floor, None)
ceil_p, ceil = _unary("ceil", torch.ceil, None)
trunc_p, trunc = _unary("trunc", torch.trunc, None)
round_p = Primitive("round", lambda x, decimals=0: torch.round(x, decimals=decimals))


def round(x, decimals=0):
    """Rounds half to even, as numpy does: round([0.5, 1.5, 2.5]) -> [0, 2, 2]."""
    return round_p.bind(as_tensor(x), decimals=int(decimals))


def heaviside(x1, x2):
    x1, x2 = pair(x1, x2)
    return heaviside_p.bind(x1, x2)


heaviside_p = Primitive("heaviside", torch.heaviside)


def _clip_impl(x, lo, hi):
    return torch.clamp(x, lo, hi)


def _clip_vjp(g, x, lo, hi, out):
    inside = logical_and(greater_equal(x, lo), less_equal(x, hi))
    return where(inside, g, 0), None, None


clip_p = Primitive("clip", _clip_impl, _clip_vjp)


def clip(x, x_min, x_max):
    """Clips values to [x_min, x_max]; the gradient passes where x is inside (inclusive)."""
    x = as_tensor(x)
    if x.dtype == "bool":
        x = cast(x, "int32")
    _, lo = pair(x, x_min)
    _, hi = pair(x, x_max)
    return clip_p.bind(x, lo, hi)


# Ties send the whole gradient to the first argument, as TensorFlow does.
maximum_p, maximum = _binary(
    "maximum",
    torch.maximum,
    lambda g, x, y, out: (
        where(greater_equal(x, y), g, 0),
        where(greater_equal(x, y), 0, g),
    ),
)
minimum_p, minimum = _binary(
    "minimum",
    torch.minimum,
    lambda g, x, y, out: (
        where(less_equal(x, y), g, 0),
        where(less_equal(x, y), 0, g),
    ),
)


def _where_impl(c, x, y):
    return torch.where(c, x, y)


def _where_vjp(g, c, x, y, out):
    zero = zeros_like_p.bind(g)
    return None, _where_impl_t(c, g, zero), _where_impl_t(c, zero, g)


def _where_impl_t(c, a, b):
    return where_p.bind(c, a, b)


where_p = Primitive("where", _where_impl, _where_vjp)


def where(condition, x1=None, x2=None):
    """`x1` where `condition` else `x2`; with one argument, the indices where it is true."""
    c = as_tensor(condition)
    if x1 is None and x2 is None:
        from keratron.ops.shape import nonzero

        return nonzero(c)
    if x1 is None or x2 is None:
        raise ValueError("where: x1 and x2 must both be given, or neither.")
    if c.dtype != "bool":
        c = cast(c, "bool")
    x, y = pair(x1, x2)
    cv, xv = c._value, x._value
    if cv.device != xv.device and not (cv.is_meta or xv.is_meta):  # tracers stay on meta
        c = Tensor(cv.to(xv.device))
    return where_p.bind(c, x, y)


# ------------------------------------------------------------------------ comparisons, logic
equal_p, equal = _binary("equal", torch.eq, None)
not_equal_p, not_equal = _binary("not_equal", torch.ne, None)
less_p, less = _binary("less", torch.lt, None)
less_equal_p, less_equal = _binary("less_equal", torch.le, None)
greater_p, greater = _binary("greater", torch.gt, None)
greater_equal_p, greater_equal = _binary("greater_equal", torch.ge, None)
logical_and_p, logical_and = _binary("logical_and", torch.logical_and, None)
logical_or_p, logical_or = _binary("logical_or", torch.logical_or, None)
logical_xor_p, logical_xor = _binary("logical_xor", torch.logical_xor, None)
logical_not_p, logical_not = _unary("logical_not", torch.logical_not, None)
bitwise_invert_p, bitwise_invert = _unary("bitwise_invert", torch.bitwise_not, None)
isnan_p, isnan = _unary("isnan", torch.isnan, None)
isinf_p, isinf = _unary("isinf", torch.isinf, None)
isfinite_p, isfinite = _unary("isfinite", torch.isfinite, None)


def _cast_vjp(g, x, out, dtype):
    if not x._value.dtype.is_floating_point:
        return (None,)
    return (cast_p.bind(g, dtype=x._value.dtype),)


cast_p = Primitive("cast", lambda x, dtype: x.to(dtype), _cast_vjp)


def cast(x, dtype):
    """Casts to a dtype ("float32", "int32", ...); returns `x` itself when it already is."""
    x = as_tensor(x)
    td = dtype if isinstance(dtype, torch.dtype) else to_torch_dtype(standardize_dtype(dtype))
    if x._value.dtype is td:
        return x
    return cast_p.bind(x, dtype=td)


copy_p, copy = _unary("copy", torch.clone, lambda g, x, out: (g,))


def identity(x):
    return as_tensor(x)


def _nan_to_num_vjp(g, x, out, nan, posinf, neginf):
    return (where(isfinite(x), g, 0),)


nan_to_num_p = Primitive(
    "nan_to_num",
    lambda x, nan, posinf, neginf: torch.nan_to_num(x, nan=nan, posinf=posinf, neginf=neginf),
    _nan_to_num_vjp,
)


def nan_to_num(x, nan=0.0, posinf=None, neginf=None):
    return nan_to_num_p.bind(as_tensor(x), nan=nan, posinf=posinf, neginf=neginf)


def divide_no_nan(x1, x2):
    """x1 / x2, with 0 where x2 == 0 (and no NaN gradient there)."""
    x1, x2 = pair(x1, x2)
    nz = not_equal(x2, 0)
    safe = where(nz, x2, 1)
    return where(nz, divide(x1, safe), 0)


def conj(x):
    return as_tensor(x)


def real(x):
    return as_tensor(x)


def imag(x):
    return zeros_like_p.bind(as_tensor(x))


# ------------------------------------------------------------------------ activations that
# need numerically careful primitives (the rest are composites in ops.nn)
# The derivatives of relu and relu6 as one pass each (torch's threshold / hardtanh backward):
# g where 0 < x (< 6), else 0. Read off the input or, equally, off the output.
relu_grad_p = Primitive(
    "relu_grad",
    lambda g, x: torch.ops.aten.threshold_backward(g, x, 0),
    lambda gg, g, x, out: (relu_grad_p.bind(gg, x), None),
)
relu6_grad_p = Primitive(
    "relu6_grad",
    lambda g, x: torch.ops.aten.hardtanh_backward(g, x, 0.0, 6.0),
    lambda gg, g, x, out: (relu6_grad_p.bind(gg, x), None),
)
relu_p = Primitive("relu", torch.relu, lambda g, x, out: (relu_grad_p.bind(g, x),))


def relu(x):
    return relu_p.bind(as_tensor(x))


relu6_p = Primitive(
    "relu6",
    lambda x: torch.clamp(x, 0.0, 6.0),
    lambda g, x, out: (relu6_grad_p.bind(g, x),),
)


def relu6(x):
    return relu6_p.bind(as_tensor(x))


# softplus(x) = log1p(exp(-|x|)) + max(x, 0): finite for large |x|; its derivative is
# sigmoid(x), exactly 1.0 at x = 100 in float32 where the naive form gives NaN.
softplus_p = Primitive(
    "softplus",
    lambda x: (
        torch.nn.functional.softplus(x, beta=1.0, threshold=20.0)
        if x.dtype != torch.float64
        else torch.log1p(torch.exp(-x.abs())) + x.clamp_min(0)
    ),
    lambda g, x, out: (multiply(g, sigmoid_p.bind(x)),),
)


def softplus(x):
    return softplus_p.bind(as_tensor(x))


def log_sigmoid(x):
    """log(sigmoid(x)) = -softplus(-x), stable for large |x|."""
    return negative(softplus(negative(as_tensor(x))))


def _stop_gradient_impl(x):
    return x


stop_gradient_p = Primitive("stop_gradient", _stop_gradient_impl)
ones_like_p = Primitive("ones_like", torch.ones_like)
zeros_like_p = Primitive("zeros_like", torch.zeros_like)
