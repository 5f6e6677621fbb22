"""Elementwise math: arithmetic, transcendental functions, comparisons, logic, casts.

Each primitive is defined on adjacent lines: implementation (torch), VJP (keratron ops).
"""

from __future__ import annotations

import builtins
import collections
import math

import torch

from keratron import config
from keratron.autodiff import memory_plan, passes
from keratron.autodiff.dtypes import standardize_dtype
from keratron.autodiff.tracing import Node
from keratron.ops import _shape_rules as rules
from keratron.ops._core import (
    Primitive,
    Tensor,
    as_tensor,
    on_device,
    pair,
    to_torch_dtype,
)

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


def _promote(*xs) -> list[Tensor]:
    xs = [as_tensor(x) for x in xs]
    dt = xs[0]._value.dtype
    for x in xs[1:]:
        dt = torch.promote_types(dt, x._value.dtype)
    if dt is torch.bool:
        dt = torch.int32
    dev = next((x._value.device for x in xs if x._value.is_cuda), xs[0]._value.device)
    out = []
    for x in xs:
        x = cast(x, dt)
        x = on_device(x, dev)
        out.append(x)
    return out


def _float(x) -> Tensor:
    """`x` as a floating tensor: integers and bools become floatx."""
    x = as_tensor(x)
    return x if x._value.dtype.is_floating_point else cast(x, config.floatx())


def _unary(name, impl, vjp=None, to_float=False, bool_to=None, **fields):
    """A unary primitive and its op; `to_float` casts integer and bool inputs to floatx.

    `bool_to` is Keras's rule for bool inputs where torch has no bool kernel: "bool" for a
    function that is the identity on {0, 1} (the input comes back), else the dtype to cast to.
    `fields` are the primitive's compiler fields (`Primitive(..., inplace=, fresh=)`).
    """
    p = Primitive(name, impl, vjp, **fields)

    def op(x):
        x = _float(x) if to_float else as_tensor(x)
        if bool_to is not None and x._value.dtype is torch.bool:
            if bool_to == "bool":
                return x
            x = cast(x, config.floatx() if bool_to == "floatx" else bool_to)
        return p.bind(x)

    op.__name__ = name
    return p, op


def _binary(name, impl, vjp=None, promote=False, to_float=False, **fields):
    """A binary primitive and its op. `promote` casts both operands to their promoted dtype
    (for torch kernels that do not promote); `to_float` then casts integers to floatx.
    `fields` are the primitive's compiler fields (`Primitive(..., inplace=, fresh=)`)."""
    p = Primitive(name, impl, vjp, **fields)

    def op(x1, x2):
        a, b = pair(x1, x2)
        if promote:
            a, b = _promote(a, b)
        if to_float:
            a, b = _float(a), _float(b)
        return p.bind(a, b)

    op.__name__ = name
    return p, op


# ------------------------------------------------------------------------ arithmetic
# The compiler's algebra on these primitives (their `simplify` rules, see passes.simplify):
# every rewrite is exact in floating point.
def _identity_operand(graph, node, identity, operands):
    """The operand `a` of `node` (trying the (a, b) pairs in `operands`) whose partner `b` is
    a constant filled with `identity` and that already has the output's shape and dtype."""
    out_aval = graph.avals[node.outputs[0]]
    for a, b in operands:
        if passes.is_const_fill(graph, b, identity) and graph.avals[a] == out_aval:
            return a
    return None


def _simplify_add(graph, node, prod):
    x, y = node.inputs
    return _identity_operand(graph, node, 0, ((x, y), (y, x)))


def _simplify_subtract(graph, node, prod):
    return _identity_operand(graph, node, 0, (tuple(node.inputs),))


def _scaled_input(graph, prod, s):
    """(x, k) when slot s is `x * k` with k a uniform constant, else None."""
    node = prod.get(s)
    if node is None or node.prim is not multiply_p:
        return None
    for a, b in ((node.inputs[0], node.inputs[1]), (node.inputs[1], node.inputs[0])):
        k = passes.uniform_value(graph, b)
        if k is not None and graph.avals[a] == graph.avals[s]:
            return a, k
    return None


def _power_of_two(v: float) -> bool:
    return v != 0 and math.isfinite(v) and math.frexp(abs(v))[0] == 0.5


def _simplify_multiply(graph, node, prod):
    x, y = node.inputs
    one = _identity_operand(graph, node, 1, ((x, y), (y, x)))
    if one is not None:
        return one
    for a, b in ((x, y), (y, x)):
        k = passes.uniform_value(graph, b)
        inner = _scaled_input(graph, prod, a) if k is not None else None
        if inner is not None and (_power_of_two(k) or _power_of_two(inner[1])):
            # (x * k1) * k2 == x * (k1 * k2) exactly when one factor is a power of two
            # (scaling by it only shifts the exponent).
            dtype = graph.avals[node.outputs[0]][1]
            node.inputs = [inner[0], passes.new_const(graph, inner[1] * k, dtype)]
            break
    return None


def _simplify_negative(graph, node, prod):
    (x,) = node.inputs
    inner = prod.get(x)
    if inner is not None and inner.prim is negative_p:
        return inner.inputs[0]
    scaled = _scaled_input(graph, prod, x)
    if scaled is not None:
        # -(x * k) == x * -k exactly: one multiply instead of two kernels.
        dtype = graph.avals[node.outputs[0]][1]
        node.prim = multiply_p
        node.inputs = [scaled[0], passes.new_const(graph, -scaled[1], dtype)]
    return None


add_p, add = _binary(
    "add",
    torch.add,
    lambda g, x, y, out: (g, g),
    inplace="add_",
    commutative=True,
    fresh=True,
    simplify=_simplify_add,
    fuses_as="bias",
    shape_rule=rules.binary,
)
subtract_p, subtract = _binary(
    "subtract",
    torch.sub,
    lambda g, x, y, out: (g, negative(g)),
    inplace="sub_",
    fresh=True,
    simplify=_simplify_subtract,
    shape_rule=rules.binary_no_bool,
)
multiply_p, multiply = _binary(
    "multiply",
    torch.mul,
    lambda g, x, y, out: (multiply(g, y), multiply(g, x)),
    inplace="mul_",
    commutative=True,
    fresh=True,
    simplify=_simplify_multiply,
    fuses_as="scale",
    shape_rule=rules.binary,
)
divide_p, divide = _binary(
    "divide",
    torch.true_divide,
    lambda g, x, y, out: (divide(g, y), negative(divide(multiply(g, out), y))),
    inplace="div_",
    fresh=True,
    shape_rule=rules.binary_to_float,
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


power_p, power = _binary(
    "power", torch.pow, _power_vjp, fresh=True, shape_rule=rules.binary_no_bool
)
negative_p, negative = _unary(
    "negative",
    torch.neg,
    lambda g, x, out: (negative(g),),
    inplace="neg_",
    fresh=True,
    simplify=_simplify_negative,
    shape_rule=rules.same_numeric,
)
abs_p, abs = _unary(
    "abs",
    torch.abs,
    lambda g, x, out: (multiply(g, sign(x)),),
    bool_to="bool",
    inplace="abs_",
    fresh=True,
    shape_rule=rules.same_numeric,
)
absolute = abs
sign_p, sign = _unary("sign", torch.sign, None)
exp_p, exp = _unary(
    "exp",
    torch.exp,
    lambda g, x, out: (multiply(g, out),),
    inplace="exp_",
    fresh=True,
    shape_rule=rules.same_float,
)
exp2_p, exp2 = _unary(
    "exp2", torch.exp2, lambda g, x, out: (multiply(g, multiply(out, math.log(2.0))),)
)
log_p, log = _unary(
    "log",
    torch.log,
    lambda g, x, out: (divide(g, x),),
    inplace="log_",
    fresh=True,
    shape_rule=rules.same_float,
)
log1p_p, log1p = _unary(
    "log1p",
    torch.log1p,
    lambda g, x, out: (divide(g, add(x, 1)),),
    inplace="log1p_",
    fresh=True,
    shape_rule=rules.same_float,
)
log2_p, log2 = _unary(
    "log2", torch.log2, lambda g, x, out: (divide(g, multiply(x, math.log(2.0))),)
)
log10_p, log10 = _unary(
    "log10", torch.log10, lambda g, x, out: (divide(g, multiply(x, math.log(10.0))),)
)
expm1_p, expm1 = _unary(
    "expm1",
    torch.expm1,
    lambda g, x, out: (multiply(g, add(out, 1)),),
    inplace="expm1_",
    fresh=True,
    shape_rule=rules.same_float,
)
sqrt_p, sqrt = _unary(
    "sqrt",
    torch.sqrt,
    lambda g, x, out: (divide(multiply(g, 0.5), out),),
    inplace="sqrt_",
    fresh=True,
    shape_rule=rules.same_float,
)
rsqrt_p, rsqrt = _unary(
    "rsqrt",
    torch.rsqrt,
    lambda g, x, out: (multiply(g, multiply(-0.5, divide(out, x))),),
    inplace="rsqrt_",
    fresh=True,
    shape_rule=rules.same_float,
)
square_p, square = _unary(
    "square",
    torch.square,
    lambda g, x, out: (multiply(g, multiply(x, 2)),),
    bool_to="int32",
    inplace="square_",
    fresh=True,
    shape_rule=rules.same_numeric,
)
reciprocal_p, reciprocal = _unary(
    "reciprocal",
    torch.reciprocal,
    lambda g, x, out: (negative(multiply(g, square(out))),),
    inplace="reciprocal_",
    fresh=True,
    shape_rule=rules.same_float,
)
sin_p, sin = _unary(
    "sin", torch.sin, lambda g, x, out: (multiply(g, cos(x)),), inplace="sin_", fresh=True
)
cos_p, cos = _unary(
    "cos", torch.cos, lambda g, x, out: (negative(multiply(g, sin(x))),), inplace="cos_", fresh=True
)
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
    "tanh",
    torch.tanh,
    lambda g, x, out: (multiply(g, subtract(1, square(out))),),
    inplace="tanh_",
    fresh=True,
    fuses_as="tanh",
    shape_rule=rules.same_float,
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
    inplace="erf_",
    fresh=True,
    shape_rule=rules.same_float,
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
    inplace="sigmoid_",
    fresh=True,
    fuses_as="sigmoid",
    shape_rule=rules.same_float,
)


def _hypot_vjp(g, x, y, out):
    return multiply(g, divide(x, out)), multiply(g, divide(y, out))


hypot_p, hypot = _binary("hypot", torch.hypot, _hypot_vjp)


def _logaddexp_vjp(g, x, y, out):
    return multiply(g, exp(subtract(x, out))), multiply(g, exp(subtract(y, out)))


logaddexp_p, logaddexp = _binary("logaddexp", torch.logaddexp, _logaddexp_vjp)

# Piecewise-constant functions have zero derivative almost everywhere: no VJP, no record.
floor_p, floor = _unary("floor", torch.floor, None, bool_to="floatx")
ceil_p, ceil = _unary("ceil", torch.ceil, None, bool_to="floatx")
trunc_p, trunc = _unary("trunc", torch.trunc, None, bool_to="bool")


def _round_impl(x, decimals=0):
    if x.dtype.is_floating_point or x.dtype.is_complex:
        return torch.round(x, decimals=decimals)
    if decimals >= 0:
        return x.clone()
    # Integers round to a multiple of 10**-decimals, half to even, in float64: exact for
    # int32 and for int64 up to 2**53.
    f = 10.0**-decimals
    return (torch.round(x.double() / f) * f).to(x.dtype)


round_p = Primitive("round", _round_impl)


def round(x, decimals=0):
    """Rounds half to even, as numpy does: round([0.5, 1.5, 2.5]) -> [0, 2, 2].

    Integers stay integers; a negative `decimals` rounds them to tens, hundreds, ...

    Example:
        >>> keratron.ops.round([15, 25, 149], decimals=-1).numpy()
        array([ 20,  20, 150], dtype=int32)
    """
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


def _clip_shape(x, lo, hi):
    if x[1] is torch.bool:
        return None
    shape = rules.broadcast_shapes(x[0], lo[0], hi[0])
    dtype = rules.result_type(x, lo, hi)
    return None if shape is None or dtype is None else [(shape, dtype)]


clip_p = Primitive("clip", _clip_impl, _clip_vjp, fresh=True, shape_rule=_clip_shape)


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
    fresh=True,
    shape_rule=rules.binary,
)
minimum_p, minimum = _binary(
    "minimum",
    torch.minimum,
    lambda g, x, y, out: (
        where(less_equal(x, y), g, 0),
        where(less_equal(x, y), 0, g),
    ),
    fresh=True,
    shape_rule=rules.binary,
)


def _where_impl(c, x, y):
    return torch.where(c, x, y)


def _where_vjp(g, c, x, y, out):
    zero = zeros_like_p.bind(g)
    return None, _where_impl_t(c, g, zero), _where_impl_t(c, zero, g)


def _where_impl_t(c, a, b):
    return where_p.bind(c, a, b)


def _simplify_where(graph, node, prod):
    cond, x = node.inputs[0], node.inputs[1]
    if graph.avals[x] != graph.avals[node.outputs[0]]:
        return None
    c = graph.consts.get(cond)
    if c is not None and c.dtype == torch.bool and bool(c.all()):
        return x  # an all-true select
    return None


def _where_shape(c, x, y):
    if c[1] is not torch.bool:
        return None
    shape = rules.broadcast_shapes(c[0], x[0], y[0])
    dtype = rules.result_type(x, y)
    return None if shape is None or dtype is None else [(shape, dtype)]


where_p = Primitive(
    "where",
    _where_impl,
    _where_vjp,
    fresh=True,
    simplify=_simplify_where,
    shape_rule=_where_shape,
)


def where(condition, x1=None, x2=None):
    """`x1` where `condition` else `x2`; with one argument, the indices where it is true."""
    c = as_tensor(condition)
    if x1 is None and x2 is None:
        from keratron.ops.shaping import nonzero

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
equal_p, equal = _binary("equal", torch.eq, None, shape_rule=rules.compare)
not_equal_p, not_equal = _binary("not_equal", torch.ne, None, shape_rule=rules.compare)
less_p, less = _binary("less", torch.lt, None, shape_rule=rules.compare)
less_equal_p, less_equal = _binary("less_equal", torch.le, None, shape_rule=rules.compare)
greater_p, greater = _binary("greater", torch.gt, None, shape_rule=rules.compare)
greater_equal_p, greater_equal = _binary("greater_equal", torch.ge, None, shape_rule=rules.compare)
logical_and_p, logical_and = _binary(
    "logical_and", torch.logical_and, None, shape_rule=rules.compare
)
logical_or_p, logical_or = _binary("logical_or", torch.logical_or, None, shape_rule=rules.compare)
logical_xor_p, logical_xor = _binary(
    "logical_xor", torch.logical_xor, None, shape_rule=rules.compare
)
logical_not_p, logical_not = _unary(
    "logical_not", torch.logical_not, None, shape_rule=lambda x: [(x[0], torch.bool)]
)
bitwise_invert_p, bitwise_invert = _unary("bitwise_invert", torch.bitwise_not, None)
isnan_p, isnan = _unary("isnan", torch.isnan, None, shape_rule=lambda x: [(x[0], torch.bool)])
isinf_p, isinf = _unary("isinf", torch.isinf, None, shape_rule=lambda x: [(x[0], torch.bool)])
isfinite_p, isfinite = _unary(
    "isfinite", torch.isfinite, None, shape_rule=lambda x: [(x[0], torch.bool)]
)


def _cast_vjp(g, x, out, dtype):
    if not x._value.dtype.is_floating_point:
        return (None,)
    return (cast_p.bind(g, dtype=x._value.dtype),)


# (from, through) pairs where a cast from `from` to `through` keeps every value exactly, so
# casting back gives the original.
_EXACT_WIDENINGS = {
    (torch.bfloat16, torch.float32),
    (torch.bfloat16, torch.float64),
    (torch.float16, torch.float32),
    (torch.float16, torch.float64),
    (torch.float32, torch.float64),
}


def _simplify_cast(graph, node, prod):
    """A cast to what its input already is; and a cast back from an exact widening (the
    bfloat16 -> float32 -> bfloat16 a mixed-precision layer boundary makes) is the value
    before it."""
    same = passes.identity_on_same_aval(graph, node, prod)
    if same is not None:
        return same
    inner = prod.get(node.inputs[0])
    if inner is None or inner.kind != "prim" or inner.prim is not cast_p:
        return None
    source = inner.inputs[0]
    through = graph.avals[inner.outputs[0]][1]
    if graph.avals[source] == graph.avals[node.outputs[0]]:
        if (graph.avals[source][1], through) in _EXACT_WIDENINGS:
            return source
    return None


cast_p = Primitive(
    "cast",
    lambda x, dtype: x.to(dtype),
    _cast_vjp,
    simplify=_simplify_cast,
    shape_rule=lambda x, dtype: [(x[0], dtype)],
)


def _cast_group(*xs, dtype):
    """Several casts from one dtype to another at once: on CUDA one multi-tensor copy (a
    launch or a few, where each cast is otherwise its own kernel), elsewhere one `.to` each.
    Both convert as `cast` does (round to nearest even), into new buffers of the inputs'
    layout."""
    if xs[0].is_cuda:
        outs = [torch.empty_like(x, dtype=dtype) for x in xs]
        torch._foreach_copy_(outs, list(xs))
        return tuple(outs)
    return tuple(x.to(dtype) for x in xs)


def _variables_read(graph) -> dict:
    """{slot: the ids of the variables whose storage the slot may share}: a captured
    variable's own, and through every primitive not known to make new buffers (a reshape or a
    transpose may return a view), those of its inputs."""
    reads = {s: frozenset((id(var),)) for s, var in graph.captures.items()}
    none: frozenset = frozenset()
    for n in graph.nodes:
        if n.kind != "prim" or n.prim.fresh:
            continue
        shared = none.union(*(reads.get(s, none) for s in n.inputs if s is not None))
        for s in n.outputs:
            reads[s] = shared
    return collections.defaultdict(frozenset, reads)


def _writes_any(node, variables) -> bool:
    """Whether an effect node may write one of `variables` (ids): an assignment writes its
    variable, an opaque effect those it names; a primitive with an effect (a random draw) is
    taken as writing any."""
    if node.kind == "prim":
        return True
    written = node.var if node.kind == "effect" else (node.var,)
    return any(id(v) in variables for v in written or ())


# Made by the compiler only (`group_casts`), after differentiation: no VJP.
cast_group_p = Primitive(
    "cast_group",
    _cast_group,
    None,
    multiple_results=True,
    fresh=True,
    shape_rule=lambda *xs, dtype: [(x[0], dtype) for x in xs],
)


def group_casts(graph, outputs):
    """Casts between the same two floating dtypes that can run at one point of the plan become
    one `cast_group` node there. A mixed-precision training step casts every variable to the
    compute dtype and every gradient back: on CUDA each cast is a kernel launch (a node of
    the step's CUDA graph), and a group is one. The values are the casts' own, bit for bit.

    A cast may move later, up to its first reader, or earlier, down to its input's producer,
    but never across an effect that may write what its input holds (an assignment of the
    variable it reads, or of one it may be a view of). In a function without effects, casts
    of variable-only values are grouped apart from the rest, so its prelude still takes
    them. Of the casts of one kind, the one whose window closes first fixes the point: every
    cast whose input is ready by then joins it (the fewest groups). A cast of a cast's
    output stays where it is, so no group reads a value made later.
    """
    nodes = graph.nodes
    made_at = {s: i for i, n in enumerate(nodes) for s in n.outputs}
    first_use: dict = {}
    for i, n in enumerate(nodes):
        for s in n.inputs:
            if s is not None:
                first_use.setdefault(s, i)
    end = len(nodes)
    effects = [i for i, n in enumerate(nodes) if n.is_effect]
    fixed = passes.variable_only(graph)
    reads = _variables_read(graph)
    windows: dict = {}  # kind -> [(latest point, earliest point, node index)]
    for i, n in enumerate(nodes):
        if n.kind != "prim" or n.prim is not cast_p:
            continue
        (src,) = n.inputs
        source, target = graph.avals[src][1], n.params["dtype"]
        if source == target or not (source.is_floating_point and target.is_floating_point):
            continue  # float to float only: what mixed precision casts
        made_by = nodes[made_at[src]] if src in made_at else None
        if made_by is not None and made_by.prim is cast_p:
            continue  # a cast of a cast stays: its input's cast may move
        # The effects that may change what the input holds: writes of the variables it may
        # be (a view of), and effects whose writes are unknown.
        barriers = [k for k in effects if reads[src] and _writes_any(nodes[k], reads[src])]
        latest = min([first_use.get(n.outputs[0], end)] + [k for k in barriers if k > i])
        earliest = max([made_at.get(src, -1)] + [k for k in barriers if k < i])
        prelude = not effects and src in fixed
        windows.setdefault((source, target, prelude), []).append((latest, earliest, i))
    at: dict = {}  # node index -> the group nodes to run before it
    grouped = set()
    for (_, target, _), casts in windows.items():
        casts.sort()
        while casts:
            point = casts[0][0]
            members = [c for c in casts if c[1] < point]
            casts = [c for c in casts if c[1] >= point]
            if len(members) < 2:
                continue
            members.sort(key=lambda c: c[2])
            ins = [nodes[i].inputs[0] for _, _, i in members]
            outs = [nodes[i].outputs[0] for _, _, i in members]
            at.setdefault(point, []).append(
                Node("prim", ins, outs, cast_group_p, {"dtype": target})
            )
            grouped.update(i for _, _, i in members)
    if not grouped:
        return outputs
    out = []
    for i, n in enumerate(nodes):
        out.extend(at.get(i, ()))
        if i not in grouped:
            out.append(n)
    out.extend(at.get(end, ()))
    graph.nodes = out
    return outputs


passes.register_pass(group_casts, stage="late")


def cast(x, dtype):
    """Casts to a dtype ("float32", "int32", ...); returns `x` itself when it already is."""
    x = as_tensor(x)
    td = dtype if isinstance(dtype, torch.dtype) else to_torch_dtype(standardize_dtype(dtype))
    if x._value.dtype is td:
        return x
    return cast_p.bind(x, dtype=td)


copy_p, copy = _unary("copy", torch.clone, lambda g, x, out: (g,), shape_rule=rules.same)


def identity(x):
    return as_tensor(x)


def _nan_to_num_vjp(g, x, out, nan, posinf, neginf):
    return (where(isfinite(x), g, 0),)


nan_to_num_p = Primitive(
    "nan_to_num",
    lambda x, nan, posinf, neginf: torch.nan_to_num(x, nan=nan, posinf=posinf, neginf=neginf),
    _nan_to_num_vjp,
    shape_rule=rules.same_float,
)


def nan_to_num(x, nan=0.0, posinf=None, neginf=None):
    return nan_to_num_p.bind(as_tensor(x), nan=nan, posinf=posinf, neginf=neginf)


def _divide_no_nan_impl(x, y):
    # Where y is 0, x / y (inf or NaN) is overwritten: one kernel step of a compiled plan
    # where the where/divide/where composition took four (every Mean metric's result, a 0-d
    # total over a 0-d count, whose count a CPU step reads instead of comparing as a tensor).
    out = torch.true_divide(x, y)
    if y.dim() == 0 and y.device.type == "cpu":
        return out.zero_() if y.item() == 0 else out
    return out.masked_fill_(y == 0, 0)


divide_no_nan_p, divide_no_nan = _binary(
    "divide_no_nan",
    _divide_no_nan_impl,
    # Both pulled back through divide_no_nan itself: no NaN gradient where x2 == 0.
    lambda g, x, y, out: (
        divide_no_nan(g, y),
        negative(divide_no_nan(multiply(g, out), y)),
    ),
    fresh=True,
    shape_rule=rules.binary_to_float,
)
divide_no_nan.__doc__ = """x1 / x2, with 0 where x2 == 0 (and no NaN gradient there).

    Example:
        >>> x, y = np.array([1.0, 2.0], "float32"), np.array([4.0, 0.0], "float32")
        >>> keratron.ops.divide_no_nan(x, y).numpy()
        array([0.25, 0.  ], dtype=float32)
    """


# The complex parts. No VJPs: the tape differentiates real floating tensors only, and for those
# conj and real are the identity (the input itself comes back, so its gradient flows).
conj_p = Primitive("conj", lambda x: torch.conj(x).resolve_conj())
real_p = Primitive("real", lambda x: torch.real(x).clone())
imag_p = Primitive("imag", lambda x: torch.imag(x).clone())


def conj(x):
    """The complex conjugate; real tensors come back unchanged.

    Example:
        >>> keratron.ops.conj(np.array([1 + 2j], "complex64")).numpy()
        array([1.-2.j], dtype=complex64)
    """
    x = as_tensor(x)
    return conj_p.bind(x) if x._value.dtype.is_complex else x


def real(x):
    """The real part; real tensors come back unchanged.

    Example:
        >>> keratron.ops.real(np.array([1 + 2j], "complex64")).numpy()
        array([1.], dtype=float32)
    """
    x = as_tensor(x)
    return real_p.bind(x) if x._value.dtype.is_complex else x


def imag(x):
    """The imaginary part; zeros of the same dtype for real tensors.

    Example:
        >>> keratron.ops.imag(np.array([1 + 2j], "complex64")).numpy()
        array([2.], dtype=float32)
    """
    x = as_tensor(x)
    return imag_p.bind(x) if x._value.dtype.is_complex else zeros_like_p.bind(x)


# ------------------------------------------------------------------------ activations that
# need numerically careful primitives (the rest are composites in ops.nn)
# The derivatives of relu and relu6 as one pass each (torch's threshold / hardtanh backward):
# g where 0 < x (< 6), else 0. Read off the input or, equally, off the output.
def _activation_grad_shape(g, x):
    return [g] if g == x and g[1].is_floating_point else None


def _relu_grad_(g, x):
    return torch.ops.aten.threshold_backward.grad_input(g, x, 0, grad_input=g)


def _relu6_grad_(g, x):
    return torch.ops.aten.hardtanh_backward.grad_input(g, x, 0.0, 6.0, grad_input=g)


# In place (`_relu_grad_`, `_relu6_grad_`) where the incoming gradient is dead after it: the
# kernel then reads two tensors and writes over one of them, where a new output is a third
# tensor's traffic. MobileNet's 27 relu6 gradients at batch 8 took 8.4-10 ms a training step
# into new (kept) buffers, 6.3-6.6 in place (2 threads).
relu_grad_p = Primitive(
    "relu_grad",
    lambda g, x: torch.ops.aten.threshold_backward(g, x, 0),
    lambda gg, g, x, out: (relu_grad_p.bind(gg, x), None),
    inplace=_relu_grad_,
    fresh=True,
    shape_rule=_activation_grad_shape,
)
relu6_grad_p = Primitive(
    "relu6_grad",
    lambda g, x: torch.ops.aten.hardtanh_backward(g, x, 0.0, 6.0),
    lambda gg, g, x, out: (relu6_grad_p.bind(gg, x), None),
    inplace=_relu6_grad_,
    fresh=True,
    shape_rule=_activation_grad_shape,
)


@memory_plan.keeps_output(relu_grad_p)
def _relu_grad_into(buffers, out_avals, g, x):
    if g.shape != x.shape or not g.is_contiguous() or not x.is_contiguous():
        return None
    out = memory_plan.buffer(buffers, "out", out_avals[0])
    return torch.ops.aten.threshold_backward.grad_input(g, x, 0, grad_input=out)


@memory_plan.keeps_output(relu6_grad_p)
def _relu6_grad_into(buffers, out_avals, g, x):
    if g.shape != x.shape or not g.is_contiguous() or not x.is_contiguous():
        return None
    out = memory_plan.buffer(buffers, "out", out_avals[0])
    return torch.ops.aten.hardtanh_backward.grad_input(g, x, 0.0, 6.0, grad_input=out)


# relu and relu6 take their derivative off their output (the same mask as off the input, NaN
# included), so a compiled step need not keep the input alive for the backward pass: the
# activation can then overwrite it in place (a batch norm's output, in MobileNet's training
# step 27 full-size tensors a step that were each kept twice).
relu_p = Primitive(
    "relu",
    torch.relu,
    lambda g, x, out: (relu_grad_p.bind(g, out),),
    inplace="relu_",
    fresh=True,
    fuses_as="relu",
    shape_rule=rules.same_numeric,
)


def relu(x):
    return relu_p.bind(as_tensor(x))


def _relu6_(x):
    """relu6 written into `x` (the kernel of `relu6_p`'s implementation, in place)."""
    return x.clamp_(0.0, 6.0)


relu6_p = Primitive(
    "relu6",
    lambda x: torch.clamp(x, 0.0, 6.0),
    lambda g, x, out: (relu6_grad_p.bind(g, out),),
    inplace=_relu6_,
    fresh=True,
    fuses_as="relu6",
    # clamp's float bounds make an integer input's result float: left to torch.
    shape_rule=rules.same_float,
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
    fresh=True,
    shape_rule=rules.same_float,
)


def softplus(x):
    return softplus_p.bind(as_tensor(x))


def log_sigmoid(x):
    """log(sigmoid(x)) = -softplus(-x), stable for large |x|."""
    return negative(softplus(negative(as_tensor(x))))


def _stop_gradient_impl(x):
    return x


stop_gradient_p = Primitive("stop_gradient", _stop_gradient_impl, shape_rule=rules.same)
ones_like_p = Primitive("ones_like", torch.ones_like, fill_value=1, shape_rule=rules.same)
zeros_like_p = Primitive("zeros_like", torch.zeros_like, fill_value=0, shape_rule=rules.same)


# ------------------------------------------------------------------------ numpy extras
__all__ += [
    # elementwise
    "isclose",
    "erfc",
    "cbrt",
    "fmod",
    "fabs",
    "deg2rad",
    "rad2deg",
    "logaddexp2",
    "sinc",
    "signbit",
    "fmax",
    "fmin",
    "gcd",
    "lcm",
    "ldexp",
    "nextafter",
    "i0",
    "isneginf",
    "isposinf",
    "isreal",
    "angle",
    "conjugate",
    "bitwise_and",
    "bitwise_or",
    "bitwise_xor",
    "bitwise_not",
    "bitwise_left_shift",
    "bitwise_right_shift",
    "left_shift",
    "right_shift",
    "view",
    "view_as_real",
    "view_as_complex",
    "polar",
    "saturate_cast",
]


_isclose_p = Primitive(
    "isclose",
    lambda x, y, rtol, atol, equal_nan: torch.isclose(
        x, y, rtol=rtol, atol=atol, equal_nan=equal_nan
    ),
)


def isclose(x1, x2, rtol=1e-5, atol=1e-8, equal_nan=False):
    """Elementwise `|x1 - x2| <= atol + rtol * |x2|` (infinities equal only to themselves).

    Example:
        >>> keratron.ops.isclose([1.0, 2.0], [1.0 + 1e-9, 2.1]).numpy()
        array([ True, False])
    """
    a, b = _promote(*pair(x1, x2))
    return _isclose_p.bind(a, b, rtol=float(rtol), atol=float(atol), equal_nan=bool(equal_nan))


_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)
_erfc_p, erfc = _unary(
    "erfc",
    torch.erfc,
    lambda g, x, out: (multiply(g, multiply(-_TWO_OVER_SQRT_PI, exp(negative(square(x))))),),
    to_float=True,
)
erfc.__doc__ = """Complementary error function, `1 - erf(x)`, accurate for large x.

    Example:
        >>> keratron.ops.erfc([0.0]).numpy()
        array([1.], dtype=float32)
    """

# d cbrt / dx = 1 / (3 cbrt(x)^2): infinite at 0, as in numpy.
_cbrt_p, cbrt = _unary(
    "cbrt",
    lambda x: torch.sign(x) * torch.abs(x).pow(1.0 / 3.0),
    lambda g, x, out: (divide(g, multiply(square(out), 3.0)),),
    to_float=True,
)
cbrt.__doc__ = """Real cube root (negative for negative inputs).

    Example:
        >>> keratron.ops.cbrt([-8.0, 27.0]).numpy()
        array([-2.,  3.], dtype=float32)
    """

_fmod_p, fmod = _binary(
    "fmod",
    torch.fmod,
    lambda g, x, y, out: (g, negative(multiply(g, _trunc(divide(x, y))))),
    promote=True,
)
fmod.__doc__ = """C-style remainder `x1 - trunc(x1 / x2) * x2` (sign of the dividend).

    Example:
        >>> keratron.ops.fmod([-3, 3], 2).numpy()
        array([-1,  1], dtype=int32)
    """


def _trunc(x):
    from keratron.ops.elementwise import trunc

    return trunc(x)


def fabs(x):
    """Absolute value, always floating point.

    Example:
        >>> keratron.ops.fabs([-2]).numpy()
        array([2.], dtype=float32)
    """
    return abs(_float(x))


def deg2rad(x):
    """Degrees to radians.

    Example:
        >>> keratron.ops.deg2rad([180.0]).numpy()
        array([3.1415927], dtype=float32)
    """
    return multiply(_float(x), math.pi / 180.0)


def rad2deg(x):
    """Radians to degrees.

    Example:
        >>> keratron.ops.rad2deg([math.pi]).numpy()
        array([180.], dtype=float32)
    """
    return multiply(_float(x), 180.0 / math.pi)


_logaddexp2_p, logaddexp2 = _binary(
    "logaddexp2",
    torch.logaddexp2,
    lambda g, x, y, out: (multiply(g, exp2(subtract(x, out))), multiply(g, exp2(subtract(y, out)))),
    to_float=True,
    promote=True,
)
logaddexp2.__doc__ = """`log2(2**x1 + 2**x2)`, computed without overflow.

    Example:
        >>> keratron.ops.logaddexp2([1.0], [1.0]).numpy()
        array([2.], dtype=float32)
    """


def _sinc_vjp(g, x, out):
    # d sinc / dx = (cos(pi x) - sinc(x)) / x, which tends to 0 at x = 0.
    nz = not_equal(x, 0)
    safe = where(nz, x, 1)
    d = divide(subtract(cos(multiply(safe, math.pi)), out), safe)
    return (where(nz, multiply(g, d), 0),)


_sinc_p, sinc = _unary("sinc", torch.sinc, _sinc_vjp, to_float=True)
sinc.__doc__ = """Normalized sinc, `sin(pi x) / (pi x)`, with sinc(0) = 1.

    Example:
        >>> keratron.ops.sinc([0.0]).numpy()
        array([1.], dtype=float32)
    """

_signbit_p, signbit = _unary("signbit", torch.signbit, to_float=False)
signbit.__doc__ = """True where the sign bit is set (negative numbers and -0.0).

    Example:
        >>> keratron.ops.signbit([-0.0, 1.0]).numpy()
        array([ True, False])
    """


def _bools_stay(op, p):
    """`op`, except that two bool operands give a bool result (numpy's and Keras's rule)
    instead of promoting to int32."""

    def wrapped(x1, x2):
        a, b = pair(x1, x2)
        if a._value.dtype is torch.bool and b._value.dtype is torch.bool:
            return p.bind(a, b)
        return op(a, b)

    wrapped.__name__ = op.__name__
    return wrapped


def _fmax_vjp(g, x, y, out):
    # The non-NaN operand receives the gradient; ties go to x, as `maximum` does.
    to_x = logical_or(greater_equal(x, y), isnan(y))
    return where(to_x, g, 0), where(to_x, 0, g)


def _fmin_vjp(g, x, y, out):
    to_x = logical_or(less_equal(x, y), isnan(y))
    return where(to_x, g, 0), where(to_x, 0, g)


_fmax_p, fmax = _binary("fmax", torch.fmax, _fmax_vjp, promote=True)
fmax = _bools_stay(fmax, _fmax_p)
fmax.__doc__ = """Elementwise maximum that ignores NaNs (NaN only where both are NaN).

    Example:
        >>> keratron.ops.fmax([1.0, float("nan")], [2.0, 3.0]).numpy()
        array([2., 3.], dtype=float32)
    """
_fmin_p, fmin = _binary("fmin", torch.fmin, _fmin_vjp, promote=True)
fmin = _bools_stay(fmin, _fmin_p)
fmin.__doc__ = """Elementwise minimum that ignores NaNs (NaN only where both are NaN).

    Example:
        >>> keratron.ops.fmin([1.0, float("nan")], [2.0, 3.0]).numpy()
        array([1., 3.], dtype=float32)
    """


def _int_binary(name, fn):
    p = Primitive(name, fn)

    def op(x1, x2):
        a, b = pair(x1, x2)
        if a._value.dtype is not torch.bool or b._value.dtype is not torch.bool:
            a, b = _promote(a, b)  # two bools stay bool, as in numpy and Keras
        if a._value.dtype.is_floating_point or a._value.dtype.is_complex:
            raise TypeError(
                f"{name}: arguments must be integers or bools. Received dtypes "
                f"{as_tensor(x1).dtype} and {as_tensor(x2).dtype}."
            )
        return p.bind(a, b)

    op.__name__ = name
    return op


gcd = _int_binary("gcd", torch.gcd)
gcd.__doc__ = """Greatest common divisor of integer tensors.

    Example:
        >>> keratron.ops.gcd([12, 18], 8).numpy()
        array([4, 2], dtype=int32)
    """
lcm = _int_binary("lcm", torch.lcm)
lcm.__doc__ = """Least common multiple of integer tensors.

    Example:
        >>> keratron.ops.lcm([4, 6], 3).numpy()
        array([12,  6], dtype=int32)
    """
bitwise_and = _int_binary("bitwise_and", torch.bitwise_and)
bitwise_and.__doc__ = """Bitwise AND of integer (or bool) tensors.

    Example:
        >>> keratron.ops.bitwise_and([12], [10]).numpy()
        array([8], dtype=int32)
    """
bitwise_or = _int_binary("bitwise_or", torch.bitwise_or)
bitwise_or.__doc__ = """Bitwise OR of integer (or bool) tensors.

    Example:
        >>> keratron.ops.bitwise_or([12], [10]).numpy()
        array([14], dtype=int32)
    """
bitwise_xor = _int_binary("bitwise_xor", torch.bitwise_xor)
bitwise_xor.__doc__ = """Bitwise XOR of integer (or bool) tensors.

    Example:
        >>> keratron.ops.bitwise_xor([12], [10]).numpy()
        array([6], dtype=int32)
    """
bitwise_left_shift = _int_binary("bitwise_left_shift", torch.bitwise_left_shift)
bitwise_left_shift.__doc__ = """Shifts the bits of `x` left by `y`.

    Example:
        >>> keratron.ops.bitwise_left_shift([1, 3], 2).numpy()
        array([ 4, 12], dtype=int32)
    """
bitwise_right_shift = _int_binary("bitwise_right_shift", torch.bitwise_right_shift)
bitwise_right_shift.__doc__ = """Shifts the bits of `x` right by `y` (arithmetic shift).

    Example:
        >>> keratron.ops.bitwise_right_shift([8, -8], 2).numpy()
        array([ 2, -2], dtype=int32)
    """
left_shift = bitwise_left_shift
right_shift = bitwise_right_shift
_bitwise_not_p = Primitive("bitwise_not", torch.bitwise_not)


def bitwise_not(x):
    """Bitwise NOT (logical NOT for bools).

    Example:
        >>> keratron.ops.bitwise_not([0, 5]).numpy()
        array([-1, -6], dtype=int32)
    """
    x = as_tensor(x)
    if x._value.dtype.is_floating_point or x._value.dtype.is_complex:
        raise TypeError(f"bitwise_not: x must be an integer or bool tensor. Received {x.dtype}.")
    return _bitwise_not_p.bind(x)


def ldexp(x1, x2):
    """`x1 * 2**x2` with an integer exponent `x2`.

    Example:
        >>> keratron.ops.ldexp([3.0], [2]).numpy()
        array([12.], dtype=float32)
    """
    x2 = as_tensor(x2)
    if x2._value.dtype.is_floating_point or x2._value.dtype.is_complex:
        raise TypeError(f"ldexp: the exponent x2 must be an integer tensor. Received {x2.dtype}.")
    x1 = _float(x1)
    return multiply(x1, exp2(cast(x2, x1.dtype)))


_nextafter_p, nextafter = _binary("nextafter", torch.nextafter, to_float=True, promote=True)
nextafter.__doc__ = """The next representable float after `x1` in the direction of `x2`.

    Example:
        >>> float(keratron.ops.nextafter(1.0, 2.0)) > 1.0
        True
    """


def _i1_vjp(g, x, out):
    # I1'(x) = I0(x) - I1(x) / x, which is 1/2 at x = 0.
    nz = not_equal(x, 0)
    d = subtract(_i0_p.bind(x), divide(out, where(nz, x, 1)))
    return (multiply(g, where(nz, d, 0.5)),)


_i1_p = Primitive("i1", torch.special.i1, _i1_vjp)
_i0_p, i0 = _unary("i0", torch.i0, lambda g, x, out: (multiply(g, _i1_p.bind(x)),), to_float=True)
i0.__doc__ = """Modified Bessel function of the first kind, order 0.

    Example:
        >>> keratron.ops.i0([0.0, 1.0]).numpy().round(4)
        array([1.    , 1.2661], dtype=float32)
    """

_isneginf_p, isneginf = _unary("isneginf", torch.isneginf, to_float=False)
isneginf.__doc__ = """True where `x` is negative infinity.

    Example:
        >>> keratron.ops.isneginf([-float("inf"), 1.0]).numpy()
        array([ True, False])
    """
_isposinf_p, isposinf = _unary("isposinf", torch.isposinf, to_float=False)
isposinf.__doc__ = """True where `x` is positive infinity.

    Example:
        >>> keratron.ops.isposinf([float("inf"), 1.0]).numpy()
        array([ True, False])
    """
_isreal_p, isreal = _unary("isreal", torch.isreal, to_float=False)
isreal.__doc__ = """True where the imaginary part is zero (everywhere, for real tensors).

    Example:
        >>> keratron.ops.isreal([1.0, 2.0]).numpy()
        array([ True,  True])
    """
_angle_p = Primitive("angle", torch.angle)


def angle(x):
    """The argument of each element, in (-pi, pi]: 0 for non-negative reals, pi for negative
    ones. Integer and bool inputs give floatx.

    Example:
        >>> keratron.ops.angle([-1.0, 2.0]).numpy()
        array([3.1415927, 0.       ], dtype=float32)
    """
    x = as_tensor(x)
    return _angle_p.bind(x if x._value.dtype.is_complex else _float(x))


conjugate = conj

_view_p = Primitive("view", lambda x, dtype: x.view(dtype))


def view(x, dtype=None):
    """Reinterprets the bytes of `x` as `dtype` (the last axis scales with the item size).

    Example:
        >>> keratron.ops.view(keratron.ops.ones((2,), "float32"), "int32").numpy()
        array([1065353216, 1065353216], dtype=int32)
    """
    x = as_tensor(x)
    if dtype is None:
        return x
    td = to_torch_dtype(standardize_dtype(dtype))
    old, new = x._value.element_size(), torch.empty((), dtype=td).element_size()
    if old != new and (x.ndim == 0 or (x.shape[-1] * old) % new):
        raise ValueError(
            f"view: cannot view a tensor of shape {x.shape} and dtype {x.dtype} as {dtype}: "
            "the last axis must hold a whole number of the new items."
        )
    return _view_p.bind(x, dtype=td)


_view_as_real_p = Primitive("view_as_real", lambda x: torch.view_as_real(x).clone())
_view_as_complex_p = Primitive(
    "view_as_complex", lambda x: torch.view_as_complex(x.contiguous()).clone()
)


def view_as_real(x):
    """A complex tensor as a real one with a trailing axis of size 2 (real, imaginary).

    Example:
        >>> keratron.ops.view_as_real(np.array([1 + 2j], "complex64")).numpy()
        array([[1., 2.]], dtype=float32)
    """
    x = as_tensor(x)
    if not x._value.dtype.is_complex:
        raise ValueError(f"view_as_real: x must be a complex tensor. Received dtype {x.dtype}.")
    return _view_as_real_p.bind(x)


def view_as_complex(x):
    """A real tensor with a trailing axis of size 2 as a complex tensor.

    Example:
        >>> keratron.ops.view_as_complex([[1.0, 2.0]]).numpy()
        array([1.+2.j], dtype=complex64)
    """
    x = _float(x)
    if x.ndim == 0 or x.shape[-1] != 2:
        raise ValueError(
            f"view_as_complex: the last axis of x must have size 2. Received shape {x.shape}."
        )
    if x.dtype not in ("float32", "float64"):
        x = cast(x, "float32")
    return _view_as_complex_p.bind(x)


_polar_p = Primitive("polar", torch.polar)


def polar(abs_, angle):
    """The complex numbers `abs_ * exp(1j * angle)`.

    Example:
        >>> keratron.ops.polar([2.0], [0.0]).numpy()
        array([2.+0.j], dtype=complex64)
    """
    a, t = _promote(_float(abs_), _float(angle))
    if a.dtype not in ("float32", "float64"):
        a, t = cast(a, "float32"), cast(t, "float32")
    return _polar_p.bind(a, t)


def _dtype_limits(dtype: torch.dtype):
    if dtype is torch.bool:
        return 0, 1
    if dtype.is_floating_point:
        info = torch.finfo(dtype)
    else:
        info = torch.iinfo(dtype)
    return info.min, info.max


def saturate_cast(x, dtype):
    """Casts to `dtype`, first clipping values to the range that `dtype` can hold.

    Example:
        >>> keratron.ops.saturate_cast([-5.0, 300.0], "uint8").numpy()
        array([  0, 255], dtype=uint8)
    """
    x = as_tensor(x)
    td = to_torch_dtype(standardize_dtype(dtype))
    src = x._value.dtype
    in_min, in_max = _dtype_limits(src)
    out_min, out_max = _dtype_limits(td)
    lo, hi = builtins.max(in_min, out_min), builtins.min(in_max, out_max)
    if src.is_floating_point:
        # A limit that rounds outward in the source precision (float32 cannot hold
        # 2**31 - 1) is nudged inward, so the cast never overflows.
        lo_t = torch.tensor(lo, dtype=src)
        hi_t = torch.tensor(hi, dtype=src)
        if float(lo_t) < out_min:
            lo_t = torch.nextafter(lo_t, torch.tensor(0, dtype=src))
        if float(hi_t) > out_max:
            hi_t = torch.nextafter(hi_t, torch.tensor(0, dtype=src))
        lo, hi = float(lo_t), float(hi_t)
    elif src is torch.bool:
        return cast(x, td)
    else:
        lo, hi = int(lo), int(hi)
    return cast(clip(x, lo, hi), td)
