"""Reductions over axes (int, tuple or None), with `keepdims`, named as in keras.ops."""

from __future__ import annotations

import torch

from keratron import config
from keratron.autodiff import passes
from keratron.autodiff.tensor import Tensor
from keratron.ops import _shape_rules as rules
from keratron.ops._core import (
    Primitive,
    _axis_list,
    _concrete,
    as_tensor,
    canonical_axis,
)
from keratron.ops.elementwise import (
    _float,
    add,
    cast,
    divide,
    equal,
    exp,
    floor,
    greater_equal,
    isclose,
    isnan,
    less_equal,
    logical_and,
    logical_not,
    maximum,
    minimum,
    multiply,
    sqrt,
    square,
    subtract,
    where,
)
from keratron.ops.shaping import (
    broadcast_to,
    gather_p,
    moveaxis,
    reshape,
    transpose,
)
from keratron.ops.sorting import (
    sort,
)

__all__ = [
    "sum",
    "mean",
    "max",
    "amax",
    "min",
    "amin",
    "prod",
    "var",
    "std",
    "argmax",
    "argmin",
    "logsumexp",
    "cumsum",
    "cumprod",
    "all",
    "any",
    "count_nonzero",
    "average",
]


def _axes(axis, ndim):
    if axis is None:
        return tuple(range(ndim))
    return tuple(sorted(axis)) if isinstance(axis, tuple) else (axis,)


def _keep_shape(shape, axes):
    return tuple(1 if i in axes else d for i, d in enumerate(shape))


def _expand_back(g, x, axis, keepdims):
    """Reshapes a reduced cotangent to keepdims form and broadcasts it to x's shape."""
    from keratron.ops.shaping import broadcast_to, reshape

    axes = _axes(axis, x.ndim)
    if not keepdims:
        g = reshape(g, _keep_shape(x.shape, axes))
    return broadcast_to(g, x.shape)


def _over_no_axis(x):
    """`x` with a leading axis of size 1 to reduce, for `axis=()`: torch reads an empty `dim`
    as every axis, numpy and Keras as none."""
    return x.unsqueeze(0)


def _sum_impl(x, axis, keepdims):
    # torch widens int32 sums to int64; Keras keeps the input's integer type.
    dtype = x.dtype if x.dtype is torch.int32 else None
    if axis == ():
        return torch.sum(_over_no_axis(x), dim=0, dtype=dtype)
    if axis is None:
        s = torch.sum(x, dtype=dtype)
        return s.reshape((1,) * x.dim()) if keepdims else s
    return torch.sum(x, dim=axis, keepdim=keepdims, dtype=dtype)


def _sum_shape(x, axis, keepdims):
    shape, dtype = x
    if dtype.is_complex:
        return None
    out = rules.reduced_shape(shape, axis, keepdims)
    if not (dtype.is_floating_point or dtype is torch.int32):
        dtype = torch.int64  # torch's integer sums (but int32's, see `_sum_impl`)
    return None if out is None else [(out, dtype)]


sum_p = Primitive(
    "sum",
    _sum_impl,
    lambda g, x, out, axis, keepdims: (_expand_back(g, x, axis, keepdims),),
    fresh=True,
    # A sum over nothing but size-1 axes, kept (or of a 0-d value, as a loss's reduction
    # chain ends) is its input; the compiler drops it (only -0.0 would have come out as 0.0).
    simplify=passes.identity_on_same_aval,
    shape_rule=_sum_shape,
)


def sum(x, axis=None, keepdims=False):
    """Sum over `axis` (int, tuple or None for all)."""
    x = as_tensor(x)
    if x.dtype == "bool":
        x = cast(x, "int32")
    return sum_p.bind(x, axis=canonical_axis(axis, x.ndim, "sum"), keepdims=bool(keepdims))


def _count(x, axis):
    n = 1
    for a in _axes(axis, x.ndim):
        n *= x.shape[a]
    return n


def mean(x, axis=None, keepdims=False):
    """Arithmetic mean; integer inputs give floatx."""
    x = as_tensor(x)
    if not x._value.dtype.is_floating_point:
        from keratron import config

        x = cast(x, config.floatx())
    axis = canonical_axis(axis, x.ndim, "mean")
    return divide(sum(x, axis, keepdims), _count(x, axis) or float("nan"))


def _extreme(name, fn):
    def impl(x, axis, keepdims):
        if axis == ():
            return fn(_over_no_axis(x), dim=0)
        if axis is None:
            r = fn(x)
            return r.reshape((1,) * x.dim()) if keepdims else r
        return fn(x, dim=axis, keepdim=keepdims)

    def vjp(g, x, out, axis, keepdims):
        o = _expand_back(out, x, axis, keepdims)
        mask = cast(equal(x, o), x.dtype)
        count = _expand_back(sum_p.bind(mask, axis=axis, keepdims=keepdims), x, axis, keepdims)
        return (divide(multiply(_expand_back(g, x, axis, keepdims), mask), count),)

    def shape_rule(x, axis, keepdims):
        # torch rejects an empty reduction; its error comes from the meta kernel.
        return None if 0 in x[0] else rules.reduction(x, axis, keepdims)

    p = Primitive(name, impl, vjp, fresh=True, shape_rule=shape_rule)

    def op(x, axis=None, keepdims=False, initial=None):
        x = as_tensor(x)
        if x.size == 0 and initial is None:
            raise ValueError(f"{name}: cannot reduce an empty tensor without `initial`.")
        r = p.bind(x, axis=canonical_axis(axis, x.ndim, name), keepdims=bool(keepdims))
        if initial is not None:
            from keratron.ops.elementwise import maximum, minimum

            r = (maximum if name == "max" else minimum)(r, initial)
        return r

    op.__name__ = name
    return p, op


max_p, max = _extreme("max", torch.amax)
min_p, min = _extreme("min", torch.amin)
amax, amin = max, min


def _prod_vjp(g, x, out, axis, keepdims):
    return (
        divide(
            multiply(_expand_back(g, x, axis, keepdims), _expand_back(out, x, axis, keepdims)), x
        ),
    )


def _prod_impl(x, axis, keepdims):
    # As in sum: int32 products stay int32 (torch widens them to int64).
    if x.dtype is torch.int32:
        return _prod_impl(x.to(torch.int64), axis, keepdims).to(torch.int32)
    if axis is None:
        r = torch.prod(x)
        return r.reshape((1,) * x.dim()) if keepdims else r
    for a in sorted(axis if isinstance(axis, tuple) else (axis,), reverse=True):
        x = torch.prod(x, dim=a, keepdim=True)
    if not keepdims:
        x = x.squeeze(axis if isinstance(axis, tuple) else (axis,))
    return x


prod_p = Primitive("prod", _prod_impl, _prod_vjp)


def prod(x, axis=None, keepdims=False, dtype=None):
    """Product over `axis` (int, tuple or None for all); bools multiply as int32."""
    x = as_tensor(x)
    if dtype is not None:
        x = cast(x, dtype)
    elif x.dtype == "bool":
        x = cast(x, "int32")
    return prod_p.bind(x, axis=canonical_axis(axis, x.ndim, "prod"), keepdims=bool(keepdims))


def var(x, axis=None, keepdims=False):
    """Population variance (ddof 0), as keras.ops.var."""
    x = as_tensor(x)
    if not x._value.dtype.is_floating_point:
        from keratron import config

        x = cast(x, config.floatx())
    m = mean(x, axis, keepdims=True)
    return mean(square(subtract(x, m)), axis, keepdims)


def std(x, axis=None, keepdims=False):
    return sqrt(var(x, axis, keepdims))


def _arg(name, fn):
    def impl(x, axis, keepdims):
        if axis is None:
            r = fn(x.reshape(-1))
            return r.reshape((1,) * x.dim()) if keepdims else r
        return fn(x, dim=axis, keepdim=keepdims)

    def shape_rule(x, axis, keepdims):
        # One axis or all; torch rejects an empty input and has no bool kernel.
        if 0 in x[0] or x[1] is torch.bool or isinstance(axis, tuple):
            return None
        shape = rules.reduced_shape(x[0], axis, keepdims)
        return None if shape is None else [(shape, torch.int32)]

    p = Primitive(
        name,
        lambda x, axis, keepdims: impl(x, axis, keepdims).to(torch.int32),
        shape_rule=shape_rule,
    )

    def op(x, axis=None, keepdims=False):
        x = as_tensor(x)
        if x.dtype == "bool":  # torch has no bool argmax; True > False as in numpy
            x = cast(x, "int32")
        return p.bind(x, axis=canonical_axis(axis, x.ndim, name), keepdims=bool(keepdims))

    op.__name__ = name
    return op


argmax = _arg("argmax", torch.argmax)
argmin = _arg("argmin", torch.argmin)


def _logsumexp_impl(x, axis, keepdims):
    if axis == ():
        return torch.logsumexp(_over_no_axis(x), dim=0)
    if axis is None:
        r = torch.logsumexp(x.reshape(-1), dim=0)
        return r.reshape((1,) * x.dim()) if keepdims else r
    return torch.logsumexp(x, dim=axis, keepdim=keepdims)


logsumexp_p = Primitive(
    "logsumexp",
    _logsumexp_impl,
    lambda g, x, out, axis, keepdims: (
        multiply(
            _expand_back(g, x, axis, keepdims),
            exp(subtract(x, _expand_back(out, x, axis, keepdims))),
        ),
    ),
    fresh=True,
    shape_rule=lambda x, axis, keepdims: (
        rules.reduction(x, axis, keepdims) if x[1].is_floating_point else None
    ),
)


def logsumexp(x, axis=None, keepdims=False):
    """log(sum(exp(x))), computed stably."""
    x = as_tensor(x)
    return logsumexp_p.bind(
        x, axis=canonical_axis(axis, x.ndim, "logsumexp"), keepdims=bool(keepdims)
    )


def _cumsum_impl(x, axis, reverse):
    # As in sum: int32 stays int32 (torch widens it to int64).
    dtype = x.dtype if x.dtype is torch.int32 else None
    if reverse:
        return torch.flip(torch.cumsum(torch.flip(x, (axis,)), dim=axis, dtype=dtype), (axis,))
    return torch.cumsum(x, dim=axis, dtype=dtype)


cumsum_p = Primitive(
    "cumsum",
    _cumsum_impl,
    lambda g, x, out, axis, reverse: (cumsum_p.bind(g, axis=axis, reverse=not reverse),),
)


def cumsum(x, axis=None, dtype=None):
    """Cumulative sum along `axis` (None flattens first)."""
    from keratron.ops.shaping import reshape

    x = as_tensor(x)
    if dtype is not None:
        x = cast(x, dtype)
    elif x.dtype == "bool":
        x = cast(x, "int32")
    if axis is None:
        x, axis = reshape(x, (-1,)), 0
    return cumsum_p.bind(x, axis=canonical_axis(axis, x.ndim, "cumsum"), reverse=False)


def _cumprod_vjp(g, x, out, axis):
    # d/dx_i sum_j g_j prod_{k<=j} x_k = sum_{j>=i} g_j out_j / x_i (x nonzero).
    return (divide(cumsum_p.bind(multiply(g, out), axis=axis, reverse=True), x),)


cumprod_p = Primitive(
    "cumprod",
    lambda x, axis: torch.cumprod(x, dim=axis, dtype=x.dtype if x.dtype is torch.int32 else None),
    _cumprod_vjp,
)


def cumprod(x, axis=None, dtype=None):
    """Cumulative product along `axis` (None flattens first); bools multiply as int32."""
    from keratron.ops.shaping import reshape

    x = as_tensor(x)
    if dtype is not None:
        x = cast(x, dtype)
    elif x.dtype == "bool":
        x = cast(x, "int32")
    if axis is None:
        x, axis = reshape(x, (-1,)), 0
    return cumprod_p.bind(x, axis=canonical_axis(axis, x.ndim, "cumprod"))


def _bool_reduce(name, fn):
    def impl(x, axis, keepdims):
        x = x.bool()
        if axis is None:
            r = fn(x)
            return r.reshape((1,) * x.dim()) if keepdims else r
        for a in sorted(axis if isinstance(axis, tuple) else (axis,), reverse=True):
            x = fn(x, dim=a, keepdim=True)
        if not keepdims:
            x = x.squeeze(axis if isinstance(axis, tuple) else (axis,))
        return x

    p = Primitive(name, impl)

    def op(x, axis=None, keepdims=False):
        x = as_tensor(x)
        return p.bind(x, axis=canonical_axis(axis, x.ndim, name), keepdims=bool(keepdims))

    op.__name__ = name
    return op


all = _bool_reduce("all", torch.all)
any = _bool_reduce("any", torch.any)


def count_nonzero(x, axis=None):
    from keratron.ops.elementwise import not_equal

    return sum(cast(not_equal(as_tensor(x), 0), "int32"), axis=axis)


def average(x, axis=None, weights=None):
    """Weighted mean along `axis`, as numpy.average."""
    x = as_tensor(x)
    if weights is None:
        return mean(x, axis)
    w = as_tensor(weights, dtype=x.dtype)
    if w.ndim == 1 and x.ndim > 1 and axis is not None:
        from keratron.ops.shaping import reshape

        shape = [1] * x.ndim
        shape[axis] = w.shape[0]
        w = reshape(w, shape)
    from keratron.ops.shaping import broadcast_to

    return divide(sum(multiply(x, w), axis), sum(broadcast_to(w, x.shape), axis))


def allclose(x1, x2, rtol=1e-5, atol=1e-8, equal_nan=False):
    """Whether every element of `x1` is close to `x2` (see `isclose`), as a bool scalar.

    Example:
        >>> bool(keratron.ops.allclose([1.0, 2.0], [1.0, 2.0 + 1e-7]))
        True
    """
    return all(isclose(x1, x2, rtol=rtol, atol=atol, equal_nan=equal_nan))


__all__ += ["allclose"]


# ------------------------------------------------------------------------ statistics
__all__ += [
    "nansum",
    "nanmean",
    "nanvar",
    "nanstd",
    "nanmax",
    "nanmin",
    "nanprod",
    "nanargmax",
    "nanargmin",
    "nancumsum",
    "nancumprod",
    "ptp",
    "quantile",
    "percentile",
    "median",
    "nanquantile",
    "nanpercentile",
    "nanmedian",
]


def _nan_filled(x: Tensor, value) -> Tensor:
    """`x` with NaNs replaced by `value` (integers cannot hold NaN and pass through)."""
    if not x._value.dtype.is_floating_point:
        return x
    return where(isnan(x), value, x)


def nansum(x, axis=None, keepdims=False):
    """Sum treating NaNs as zero.

    Example:
        >>> keratron.ops.nansum([1.0, float("nan"), 2.0]).numpy()
        array(3., dtype=float32)
    """
    return sum(_nan_filled(as_tensor(x), 0), axis=axis, keepdims=keepdims)


def _nan_count(x: Tensor, axis, keepdims) -> Tensor:
    return sum(cast(logical_not(isnan(x)), x.dtype), axis=axis, keepdims=keepdims)


def nanmean(x, axis=None, keepdims=False):
    """Mean over the non-NaN elements (NaN where there are none).

    Example:
        >>> keratron.ops.nanmean([1.0, float("nan"), 3.0]).numpy()
        array(2., dtype=float32)
    """
    x = _float(x)
    return divide(nansum(x, axis, keepdims), _nan_count(x, axis, keepdims))


def nanvar(x, axis=None, keepdims=False):
    """Population variance over the non-NaN elements.

    Example:
        >>> keratron.ops.nanvar([1.0, float("nan"), 3.0]).numpy()
        array(1., dtype=float32)
    """
    x = _float(x)
    m = nanmean(x, axis, keepdims=True)
    # NaN slots get a zero deviation (not NaN * 0), so no NaN reaches the gradient.
    nan = isnan(x)
    dev = square(where(nan, 0.0, subtract(where(nan, 0.0, x), m)))
    return divide(sum(dev, axis, keepdims), _nan_count(x, axis, keepdims))


def nanstd(x, axis=None, keepdims=False):
    """Population standard deviation over the non-NaN elements.

    Example:
        >>> keratron.ops.nanstd([1.0, float("nan"), 3.0]).numpy()
        array(1., dtype=float32)
    """
    return sqrt(nanvar(x, axis, keepdims))


def _nan_extreme(x, axis, keepdims, reduce, fill):
    x = as_tensor(x)
    if not x._value.dtype.is_floating_point:
        return reduce(x, axis=axis, keepdims=keepdims)
    nan = isnan(x)
    r = reduce(where(nan, fill, x), axis=axis, keepdims=keepdims)
    return where(all(nan, axis=axis, keepdims=keepdims), float("nan"), r)


def nanmax(x, axis=None, keepdims=False):
    """Maximum ignoring NaNs (NaN where every element is NaN).

    Example:
        >>> keratron.ops.nanmax([1.0, float("nan"), 3.0]).numpy()
        array(3., dtype=float32)
    """
    return _nan_extreme(x, axis, keepdims, max, float("-inf"))


def nanmin(x, axis=None, keepdims=False):
    """Minimum ignoring NaNs (NaN where every element is NaN).

    Example:
        >>> keratron.ops.nanmin([1.0, float("nan"), 3.0]).numpy()
        array(1., dtype=float32)
    """
    return _nan_extreme(x, axis, keepdims, min, float("inf"))


def nanprod(x, axis=None, keepdims=False):
    """Product treating NaNs as one.

    Example:
        >>> keratron.ops.nanprod([2.0, float("nan"), 3.0]).numpy()
        array(6., dtype=float32)
    """
    return prod(_nan_filled(as_tensor(x), 1), axis=axis, keepdims=keepdims)


def _nan_arg(x, axis, keepdims, reduce, fill):
    x = as_tensor(x)
    if not x._value.dtype.is_floating_point:
        return reduce(x, axis=axis, keepdims=keepdims)
    nan = isnan(x)
    r = reduce(where(nan, fill, x), axis=axis, keepdims=keepdims)
    all_nan = all(nan, axis=axis, keepdims=keepdims)
    return where(all_nan, -1, r)


def nanargmax(x, axis=None, keepdims=False):
    """Index of the maximum ignoring NaNs; -1 where every element is NaN.

    Example:
        >>> keratron.ops.nanargmax([1.0, float("nan"), 3.0]).numpy()
        array(2, dtype=int32)
    """
    return _nan_arg(x, axis, keepdims, argmax, float("-inf"))


def nanargmin(x, axis=None, keepdims=False):
    """Index of the minimum ignoring NaNs; -1 where every element is NaN.

    Example:
        >>> keratron.ops.nanargmin([4.0, float("nan"), 3.0]).numpy()
        array(2, dtype=int32)
    """
    return _nan_arg(x, axis, keepdims, argmin, float("inf"))


def nancumsum(x, axis=None, dtype=None):
    """Cumulative sum treating NaNs as zero.

    Example:
        >>> keratron.ops.nancumsum([1.0, float("nan"), 2.0]).numpy()
        array([1., 1., 3.], dtype=float32)
    """
    return cumsum(_nan_filled(as_tensor(x), 0), axis=axis, dtype=dtype)


def nancumprod(x, axis=None, dtype=None):
    """Cumulative product treating NaNs as one.

    Example:
        >>> keratron.ops.nancumprod([2.0, float("nan"), 3.0]).numpy()
        array([2., 2., 6.], dtype=float32)
    """
    return cumprod(_nan_filled(as_tensor(x), 1), axis=axis, dtype=dtype)


def ptp(x, axis=None, keepdims=False):
    """Peak to peak: `max - min` along `axis`.

    Example:
        >>> keratron.ops.ptp([[1, 5], [2, 9]], axis=1).numpy()
        array([4, 7], dtype=int32)
    """
    x = as_tensor(x)
    return subtract(max(x, axis=axis, keepdims=keepdims), min(x, axis=axis, keepdims=keepdims))


_QUANTILE_METHODS = ("linear", "lower", "higher", "midpoint", "nearest")


def _quantile(x, q, axis, method, keepdims, op, ignore_nan):
    """Sorts the reduced axes into one trailing axis and interpolates between order
    statistics; the sort and the gathers carry the gradient to the selected elements."""
    if method not in _QUANTILE_METHODS:
        raise ValueError(
            f"{op}: `method` must be one of {_QUANTILE_METHODS}. Received: method={method!r}"
        )
    x = as_tensor(x)
    out_dtype = x.dtype if x._value.dtype.is_floating_point else config.floatx()
    if x.dtype in ("float16", "bfloat16"):
        x = cast(x, "float32")
    x = _float(x)
    q = cast(as_tensor(q), x.dtype)
    if q.ndim > 1:
        raise ValueError(f"{op}: `q` must be a scalar or 1-D. Received shape {q.shape}.")
    if (
        _concrete(q)
        and q.size
        and not bool(all(logical_and(greater_equal(q, 0), less_equal(q, 1))))
    ):
        raise ValueError(f"{op}: quantiles must lie in [0, 1]. Received: q={q.numpy()}")
    axes = _axis_list(axis, x.ndim, op)
    other = [i for i in range(x.ndim) if i not in axes]
    n = 1
    for a in axes:
        n *= x.shape[a]
    if n == 0:
        raise ValueError(f"{op}: cannot take quantiles of an empty reduction.")
    keep_shape = tuple(1 if i in axes else d for i, d in enumerate(x.shape))
    y = transpose(x, other + list(axes)) if x.ndim else x
    y = reshape(y, tuple(x.shape[i] for i in other) + (n,))
    ys = sort(y, axis=-1)  # NaNs sort last
    qv = reshape(q, (1,) * (y.ndim - 1) + (-1,))  # (..., nq)
    if ignore_nan:
        count = sum(cast(logical_not(isnan(y)), y.dtype), axis=-1, keepdims=True)
    else:
        count = float(n)
    pos = multiply(qv, subtract(count, 1))
    lo = floor(pos)
    frac = subtract(pos, lo)
    hi_limit = subtract(count, 1)

    def at(idx):
        idx = cast(minimum(maximum(idx, 0), hi_limit), "int64")
        idx = broadcast_to(idx, ys.shape[:-1] + (idx.shape[-1],))
        return gather_p.bind(ys, idx, axis=ys.ndim - 1)

    if method == "lower":
        r = at(lo)
    elif method == "higher":
        r = at(_ceil(pos))
    elif method == "nearest":
        r = at(_round(pos))
    elif method == "midpoint":
        r = multiply(add(at(lo), at(_ceil(pos))), 0.5)
    else:
        a, b = at(lo), at(add(lo, 1))
        r = add(a, multiply(frac, subtract(b, a)))
    if not ignore_nan and x._value.dtype.is_floating_point:
        r = where(any(isnan(y), axis=-1, keepdims=True), float("nan"), r)
    # r: (*other, nq) -> numpy's layout: q's axis first, then the kept axes.
    shape = keep_shape if keepdims else tuple(x.shape[i] for i in other)
    if q.ndim == 0:
        r = reshape(r, shape)
    else:
        r = reshape(moveaxis(r, -1, 0), (q.shape[0],) + shape)
    return cast(r, out_dtype)


def _ceil(x):
    from keratron.ops.elementwise import ceil

    return ceil(x)


def _round(x):
    from keratron.ops.elementwise import round

    return round(x)


def quantile(x, q, axis=None, method="linear", keepdims=False):
    """The `q`-th quantiles (q in [0, 1], scalar or 1-D) of `x` along `axis`, as numpy.

    Args:
        x: input tensor.
        q: quantile(s) in [0, 1]; a 1-D `q` puts its axis first in the result.
        axis: int, tuple of ints, or None (all axes).
        method: "linear" (default), "lower", "higher", "midpoint" or "nearest".
        keepdims: keep the reduced axes with size 1.

    Example:
        >>> keratron.ops.quantile([1.0, 2.0, 3.0, 4.0], 0.5).numpy()
        array(2.5, dtype=float32)
    """
    return _quantile(x, q, axis, method, keepdims, "quantile", ignore_nan=False)


def percentile(x, q, axis=None, method="linear", keepdims=False):
    """The `q`-th percentiles (q in [0, 100]) of `x` along `axis`; see `quantile`.

    Example:
        >>> keratron.ops.percentile([1.0, 2.0, 3.0, 4.0], 50).numpy()
        array(2.5, dtype=float32)
    """
    return _quantile(
        x, divide(_float(q), 100.0), axis, method, keepdims, "percentile", ignore_nan=False
    )


def median(x, axis=None, keepdims=False):
    """Median along `axis` (the mean of the two middle values for even counts).

    Example:
        >>> keratron.ops.median([3.0, 1.0, 2.0]).numpy()
        array(2., dtype=float32)
    """
    return _quantile(x, 0.5, axis, "linear", keepdims, "median", ignore_nan=False)


def nanquantile(x, q, axis=None, method="linear", keepdims=False):
    """`quantile` over the non-NaN elements (NaN where there are none).

    Example:
        >>> keratron.ops.nanquantile([1.0, float("nan"), 3.0], 0.5).numpy()
        array(2., dtype=float32)
    """
    return _quantile(x, q, axis, method, keepdims, "nanquantile", ignore_nan=True)


def nanpercentile(x, q, axis=None, method="linear", keepdims=False):
    """`percentile` over the non-NaN elements.

    Example:
        >>> keratron.ops.nanpercentile([1.0, float("nan"), 3.0], 50).numpy()
        array(2., dtype=float32)
    """
    return _quantile(
        x, divide(_float(q), 100.0), axis, method, keepdims, "nanpercentile", ignore_nan=True
    )


def nanmedian(x, axis=None, keepdims=False):
    """`median` over the non-NaN elements.

    Example:
        >>> keratron.ops.nanmedian([1.0, float("nan"), 3.0]).numpy()
        array(2., dtype=float32)
    """
    return _quantile(x, 0.5, axis, "linear", keepdims, "nanmedian", ignore_nan=True)
