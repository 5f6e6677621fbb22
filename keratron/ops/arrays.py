"""Array manipulation and search in numpy's names: appending, differencing, rotating and
splitting arrays, counting (`bincount`, `histogram`, `unique`), membership and index
arithmetic, and products of arrays (`cross`, `kron`, `correlate`, `cdist`, `corrcoef`).

Ops whose output shape depends on the data (`unique`, `bincount` without `minlength`) run
eagerly only: their abstract rule raises a clear error under tracing.
"""

from __future__ import annotations

import builtins

import numpy as np
import torch

from keratron.autodiff.tensor import Tensor
from keratron.ops._core import (
    Primitive,
    _concrete,
    as_tensor,
    canonical_axis,
)
from keratron.ops.elementwise import (
    _float,
    _promote,
    add,
    cast,
    divide,
    greater_equal,
    less,
    logical_or,
    maximum,
    minimum,
    multiply,
    negative,
    not_equal,
    power,
    sqrt,
    square,
    subtract,
    where,
)
from keratron.ops.linalg import (
    _mT,
    _safe_sqrt,
    matmul,
)
from keratron.ops.reduction import (
    any as _any,
)
from keratron.ops.reduction import (
    mean,
    sum,
)
from keratron.ops.shaping import (
    _const,
    broadcast_to,
    concatenate,
    diag,
    expand_dims,
    flip,
    gather_p,
    get_item,
    moveaxis,
    pad,
    reshape,
    split,
    squeeze,
    stack,
    take_p,
    transpose,
)
from keratron.ops.sorting import (
    searchsorted,
    top_k,
)

__all__ = [
    "append",
    "diff",
    "cross",
    "kron",
    "rot90",
    "fliplr",
    "flipud",
    "hsplit",
    "vsplit",
    "dsplit",
    "dstack",
    "diagflat",
    "trapezoid",
    "vander",
    "select",
    "digitize",
    "bincount",
    "histogram",
    "unique",
    "isin",
    "unravel_index",
    "argpartition",
    "in_top_k",
    "cdist",
    "corrcoef",
    "correlate",
]


def append(x1, x2, axis=None):
    """Appends `x2` to `x1` along `axis`; with `axis=None` both are flattened first.

    Example:
        >>> keratron.ops.append([1, 2], [[3], [4]]).numpy()
        array([1, 2, 3, 4], dtype=int32)
    """
    x1, x2 = as_tensor(x1), as_tensor(x2)
    if axis is None:
        return concatenate([reshape(x1, (-1,)), reshape(x2, (-1,))], axis=0)
    return concatenate([x1, x2], axis=axis)


def _slice_along(x: Tensor, axis: int, start, stop) -> Tensor:
    return get_item(x, (slice(None),) * axis + (slice(start, stop),))


def diff(a, n=1, axis=-1):
    """The `n`-th discrete difference along `axis` (`a[i + 1] - a[i]`, applied n times).

    Example:
        >>> keratron.ops.diff([1, 4, 9, 16]).numpy()
        array([3, 5, 7], dtype=int32)
    """
    x = as_tensor(a)
    n = int(n)
    if n < 0:
        raise ValueError(f"diff: the order `n` must be non-negative. Received: n={n}")
    if x.ndim == 0:
        raise ValueError("diff: expected a tensor of rank >= 1. Received a scalar.")
    axis = canonical_axis(axis, x.ndim, "diff")
    for _ in range(n):
        hi, lo = _slice_along(x, axis, 1, None), _slice_along(x, axis, None, -1)
        x = not_equal(hi, lo) if x.dtype == "bool" else subtract(hi, lo)
    return x


def cross(x1, x2, axisa=-1, axisb=-1, axisc=-1, axis=None):
    """Cross product of 2- or 3-element vectors, as numpy.cross.

    Two 2-vectors give the scalar z-component; a 2-vector paired with a 3-vector is taken
    to have a zero z-component. `axis`, when given, sets `axisa`, `axisb` and `axisc`.

    Example:
        >>> keratron.ops.cross([1.0, 0.0, 0.0], [0.0, 1.0, 0.0]).numpy()
        array([0., 0., 1.], dtype=float32)
    """
    a, b = _promote(x1, x2)
    if axis is not None:
        axisa = axisb = axisc = axis
    if a.ndim == 0 or b.ndim == 0:
        raise ValueError("cross: both inputs must have rank >= 1.")
    a = moveaxis(a, canonical_axis(axisa, a.ndim, "cross"), -1)
    b = moveaxis(b, canonical_axis(axisb, b.ndim, "cross"), -1)
    if a.shape[-1] not in (2, 3) or b.shape[-1] not in (2, 3):
        raise ValueError(
            "cross: the vector axes must have length 2 or 3. Received lengths "
            f"{a.shape[-1]} and {b.shape[-1]}."
        )

    def comp(v, i):
        return get_item(v, (Ellipsis, i))

    a0, a1, b0, b1 = comp(a, 0), comp(a, 1), comp(b, 0), comp(b, 1)
    z = subtract(multiply(a0, b1), multiply(a1, b0))
    if a.shape[-1] == 2 and b.shape[-1] == 2:
        return z
    if a.shape[-1] == 3 and b.shape[-1] == 3:
        a2, b2 = comp(a, 2), comp(b, 2)
        x = subtract(multiply(a1, b2), multiply(a2, b1))
        y = subtract(multiply(a2, b0), multiply(a0, b2))
    elif a.shape[-1] == 2:
        b2 = comp(b, 2)
        x, y = multiply(a1, b2), negative(multiply(a0, b2))
    else:
        a2 = comp(a, 2)
        x, y = negative(multiply(a2, b1)), multiply(a2, b0)
    x, y, z = (broadcast_to(t, np.broadcast_shapes(x.shape, y.shape, z.shape)) for t in (x, y, z))
    out = stack([x, y, z], axis=-1)
    return moveaxis(out, -1, canonical_axis(axisc, out.ndim, "cross"))


def kron(x1, x2):
    """Kronecker product: blocks of `x2` scaled by each element of `x1`.

    Example:
        >>> keratron.ops.kron([1, 2], [1, 10]).numpy()
        array([ 1, 10,  2, 20], dtype=int32)
    """
    a, b = _promote(x1, x2)
    nd = builtins.max(a.ndim, b.ndim)
    a = reshape(a, (1,) * (nd - a.ndim) + a.shape)
    b = reshape(b, (1,) * (nd - b.ndim) + b.shape)
    ia = tuple(v for d in a.shape for v in (d, 1))
    ib = tuple(v for d in b.shape for v in (1, d))
    out = multiply(reshape(a, ia), reshape(b, ib))
    return reshape(out, tuple(p * r for p, r in zip(a.shape, b.shape)))


def rot90(array, k=1, axes=(0, 1)):
    """Rotates by 90 degrees `k` times in the plane of `axes` (from the first axis towards
    the second), as numpy.rot90.

    Example:
        >>> keratron.ops.rot90([[1, 2], [3, 4]]).numpy()
        array([[2, 4],
               [1, 3]], dtype=int32)
    """
    x = as_tensor(array)
    if x.ndim < 2:
        raise ValueError(f"rot90: expected a tensor of rank >= 2. Received shape {x.shape}.")
    if len(axes) != 2:
        raise ValueError(f"rot90: `axes` must be a pair of axes. Received: axes={axes!r}")
    a0, a1 = canonical_axis(tuple(axes), x.ndim, "rot90")
    if a0 == a1:
        raise ValueError(f"rot90: the two axes must differ. Received: axes={axes!r}")
    k = int(k) % 4
    if k == 0:
        return x
    if k == 2:
        return flip(flip(x, a0), a1)
    perm = list(range(x.ndim))
    perm[a0], perm[a1] = perm[a1], perm[a0]
    if k == 1:
        return transpose(flip(x, a1), perm)
    return flip(transpose(x, perm), a1)


def fliplr(x):
    """Reverses axis 1 (left/right).

    Example:
        >>> keratron.ops.fliplr([[1, 2]]).numpy()
        array([[2, 1]], dtype=int32)
    """
    x = as_tensor(x)
    if x.ndim < 2:
        raise ValueError(f"fliplr: expected a tensor of rank >= 2. Received shape {x.shape}.")
    return flip(x, 1)


def flipud(x):
    """Reverses axis 0 (up/down).

    Example:
        >>> keratron.ops.flipud([[1], [2]]).numpy()
        array([[2],
               [1]], dtype=int32)
    """
    x = as_tensor(x)
    if x.ndim < 1:
        raise ValueError("flipud: expected a tensor of rank >= 1. Received a scalar.")
    return flip(x, 0)


def _split_on(x, indices_or_sections, axis, min_rank, op):
    x = as_tensor(x)
    if x.ndim < min_rank:
        raise ValueError(f"{op}: expected a tensor of rank >= {min_rank}. Received {x.shape}.")
    return split(x, indices_or_sections, axis=axis)


def hsplit(x, indices_or_sections):
    """Splits along axis 1 (axis 0 for 1-D tensors).

    Example:
        >>> [t.shape for t in keratron.ops.hsplit(keratron.ops.ones((2, 4)), 2)]
        [(2, 2), (2, 2)]
    """
    x = as_tensor(x)
    return _split_on(x, indices_or_sections, 1 if x.ndim > 1 else 0, 1, "hsplit")


def vsplit(x, indices_or_sections):
    """Splits along axis 0 (tensors of rank >= 2).

    Example:
        >>> [t.shape for t in keratron.ops.vsplit(keratron.ops.ones((4, 2)), 2)]
        [(2, 2), (2, 2)]
    """
    return _split_on(x, indices_or_sections, 0, 2, "vsplit")


def dsplit(x, indices_or_sections):
    """Splits along axis 2 (tensors of rank >= 3).

    Example:
        >>> [t.shape for t in keratron.ops.dsplit(keratron.ops.ones((1, 2, 4)), 2)]
        [(1, 2, 2), (1, 2, 2)]
    """
    return _split_on(x, indices_or_sections, 2, 3, "dsplit")


def dstack(xs):
    """Stacks along a third axis (1-D `(N,)` becomes `(1, N, 1)`, 2-D `(M, N)` `(M, N, 1)`).

    Example:
        >>> keratron.ops.dstack([[1, 2], [3, 4]]).shape
        (1, 2, 2)
    """
    ts = []
    for x in xs:
        t = as_tensor(x)
        if t.ndim == 0:
            t = reshape(t, (1, 1, 1))
        elif t.ndim == 1:
            t = reshape(t, (1, t.shape[0], 1))
        elif t.ndim == 2:
            t = reshape(t, t.shape + (1,))
        ts.append(t)
    return concatenate(ts, axis=2)


def diagflat(x, k=0):
    """A 2-D tensor with the flattened `x` on its `k`-th diagonal.

    Example:
        >>> keratron.ops.diagflat([[1, 2]]).numpy()
        array([[1, 0],
               [0, 2]], dtype=int32)
    """
    return diag(reshape(as_tensor(x), (-1,)), k=k)


def trapezoid(y, x=None, dx=1.0, axis=-1):
    """Integral of `y` along `axis` by the trapezoidal rule, at sample points `x` (or a
    uniform spacing `dx`).

    Example:
        >>> keratron.ops.trapezoid([1.0, 2.0, 3.0]).numpy()
        array(4., dtype=float32)
    """
    y = _float(y)
    if y.ndim == 0:
        raise ValueError("trapezoid: `y` must have rank >= 1. Received a scalar.")
    axis = canonical_axis(axis, y.ndim, "trapezoid")
    mid = multiply(add(_slice_along(y, axis, 1, None), _slice_along(y, axis, None, -1)), 0.5)
    if x is None:
        return multiply(sum(mid, axis=axis), dx)
    x = _float(x)
    if x.ndim == 1:
        d = diff(x)
        shape = [1] * y.ndim
        shape[axis] = d.shape[0]
        d = reshape(d, shape)
    else:
        d = diff(x, axis=axis)
    return sum(multiply(mid, d), axis=axis)


def vander(x, N=None, increasing=False):
    """Vandermonde matrix: column j holds `x ** (N - 1 - j)` (or `x ** j` if increasing).

    Example:
        >>> keratron.ops.vander([1, 2, 3], 3).numpy()
        array([[1, 1, 1],
               [4, 2, 1],
               [9, 3, 1]], dtype=int32)
    """
    x = as_tensor(x)
    if x.ndim != 1:
        raise ValueError(f"vander: `x` must be 1-D. Received shape {x.shape}.")
    n = x.shape[0] if N is None else int(N)
    if n < 0:
        raise ValueError(f"vander: `N` must be non-negative. Received: N={N}")
    if x.dtype == "bool":
        x = cast(x, "int32")
    powers = np.arange(n) if increasing else np.arange(n - 1, -1, -1)
    e = cast(as_tensor(powers.astype(np.int64)), x.dtype)
    return power(reshape(x, (-1, 1)), reshape(e, (1, -1)))


def select(condlist, choicelist, default=0):
    """Takes from the first choice whose condition holds, else `default` (numpy.select).

    Example:
        >>> x = keratron.ops.arange(5)
        >>> keratron.ops.select([x < 2, x > 3], [x, x * 10], -1).numpy()
        array([ 0,  1, -1, -1, 40], dtype=int32)
    """
    if not isinstance(condlist, (list, tuple)) or not isinstance(choicelist, (list, tuple)):
        raise ValueError("select: `condlist` and `choicelist` must be lists.")
    if len(condlist) != len(choicelist):
        raise ValueError(
            f"select: condlist has {len(condlist)} entries but choicelist has {len(choicelist)}."
        )
    if not condlist:
        raise ValueError("select: condlist and choicelist must not be empty.")
    choices = [as_tensor(c) for c in choicelist]
    out = as_tensor(default)
    for c, v in reversed(list(zip(condlist, choices))):
        out = where(as_tensor(c), v, out)
    return out


def digitize(x, bins):
    """The bin index of each value: `i` such that `bins[i - 1] <= x < bins[i]` for
    increasing `bins` (0 below the first edge, `len(bins)` at or above the last).

    Example:
        >>> keratron.ops.digitize([0.5, 1.0, 2.5], [1.0, 2.0]).numpy()
        array([0, 1, 2], dtype=int32)
    """
    x, b = as_tensor(x), as_tensor(bins)
    if b.ndim != 1:
        raise ValueError(f"digitize: `bins` must be 1-D. Received shape {b.shape}.")
    x, b = _promote(x, b)
    return cast(searchsorted(b, x, side="right"), "int32")


def _data_dependent(name, hint):
    def abstract(*args, **params):
        raise ValueError(
            f"{name}: the output shape depends on the input values, so it cannot be traced "
            f"(keratron.function); {hint}"
        )

    return abstract


def _bincount_impl(x, w, length):
    x = x.long()
    dtype = torch.int32 if w is None else w.dtype
    if x.dim() == 1:
        out = torch.zeros(length, dtype=dtype, device=x.device)
        src = torch.ones_like(x, dtype=dtype) if w is None else w
        return out.scatter_add_(0, x, src)
    out = torch.zeros((x.shape[0], length), dtype=dtype, device=x.device)
    src = torch.ones_like(x, dtype=dtype) if w is None else w
    return out.scatter_add_(1, x, src)


def _bincount_vjp(g, x, w, out, length):
    if w is None:
        return None, None
    return None, gather_p.bind(g, cast(x, "int64"), axis=x.ndim - 1)


_bincount_p = Primitive("bincount", _bincount_impl, _bincount_vjp)


def bincount(x, weights=None, minlength=0, sparse=False):
    """Counts occurrences of each non-negative integer (per row for 2-D `x`), optionally
    summing `weights` instead of ones. The length is `max(max(x) + 1, minlength)`.

    Runs eagerly only: the output length depends on the values of `x`.

    Example:
        >>> keratron.ops.bincount([0, 1, 1, 3]).numpy()
        array([1, 2, 0, 1], dtype=int32)
    """
    if sparse:
        raise ValueError(f"bincount: sparse outputs are not supported. Received: sparse={sparse}")
    x = as_tensor(x)
    if x._value.dtype.is_floating_point or x.dtype == "bool" or x._value.dtype.is_complex:
        raise TypeError(f"bincount: `x` must hold integers. Received dtype {x.dtype}.")
    if x.ndim not in (1, 2):
        raise ValueError(f"bincount: `x` must be 1-D or 2-D. Received shape {x.shape}.")
    if not _concrete(x):
        _data_dependent("bincount", "the count depends on max(x).")()
    w = None
    if weights is not None:
        w = as_tensor(weights)
        if w.shape != x.shape:
            raise ValueError(
                f"bincount: `weights` must have the shape of x {x.shape}. Received {w.shape}."
            )
        if w.dtype == "bool":
            w = cast(w, "int32")
        w = on_device_of(w, x)
    v = x._value
    if v.numel() and int(v.min()) < 0:
        raise ValueError(f"bincount: `x` must be non-negative. Received min {int(v.min())}.")
    length = builtins.max(int(v.max()) + 1 if v.numel() else 0, int(minlength))
    return _bincount_p.bind(x, w, length=length)


def on_device_of(t: Tensor, ref: Tensor) -> Tensor:
    from keratron.ops._core import on_device

    return on_device(t, ref._value.device)


def _histogram_impl(x, bins, lo, hi):
    flat = x.reshape(-1)
    if lo is None:
        if flat.numel():
            lo_t, hi_t = flat.min(), flat.max()
        else:
            lo_t, hi_t = flat.new_zeros(()), flat.new_ones(())
        # numpy widens an empty range to [lo - 0.5, hi + 0.5].
        same = lo_t == hi_t
        lo_t = torch.where(same, lo_t - 0.5, lo_t)
        hi_t = torch.where(same, hi_t + 0.5, hi_t)
    else:
        lo_t = torch.tensor(lo, dtype=x.dtype, device=x.device)
        hi_t = torch.tensor(hi, dtype=x.dtype, device=x.device)
    steps = torch.arange(bins + 1, dtype=torch.float64, device=x.device) / bins
    edges = (lo_t.double() + steps * (hi_t.double() - lo_t.double())).to(x.dtype)
    idx = torch.bucketize(flat, edges, right=True) - 1
    # The last bin is closed on the right; values outside [lo, hi] are not counted.
    idx = torch.where(flat == edges[-1], bins - 1, idx)
    inside = (idx >= 0) & (idx < bins)
    counts = torch.zeros(bins + 1, dtype=x.dtype, device=x.device)
    counts.scatter_add_(0, torch.where(inside, idx, bins), torch.ones_like(flat))
    return counts[:bins], edges


def _histogram_abstract(x, bins, lo, hi):
    return (
        torch.empty((bins,), dtype=x.dtype, device="meta"),
        torch.empty((bins + 1,), dtype=x.dtype, device="meta"),
    )


_histogram_p = Primitive(
    "histogram", _histogram_impl, abstract=_histogram_abstract, multiple_results=True
)


def histogram(x, bins=10, range=None):
    """Counts of `x` in `bins` equal-width bins over `range` (default: min to max), and the
    `bins + 1` edges. Bins are half-open `[a, b)` except the last, which is closed.

    Returns:
        `(counts, edges)`, both in `x`'s float dtype.

    Example:
        >>> counts, edges = keratron.ops.histogram([0.0, 1.0, 1.0, 2.0], bins=2)
        >>> counts.numpy()
        array([1., 3.], dtype=float32)
    """
    x = _float(x)
    bins = int(bins)
    if bins < 1:
        raise ValueError(f"histogram: `bins` must be a positive int. Received: bins={bins}")
    lo = hi = None
    if range is not None:
        if len(range) != 2 or float(range[0]) > float(range[1]):
            raise ValueError(f"histogram: `range` must be (min, max). Received: range={range!r}")
        lo, hi = float(range[0]), float(range[1])
    return _histogram_p.bind(x, bins=bins, lo=lo, hi=hi)


def _unique_impl(x, sorted, axis, size, fill):
    # Always all four results (values, first indices, inverse, counts); `unique` picks.
    values, inverse, counts = torch.unique(
        x, sorted=True, return_inverse=True, return_counts=True, dim=axis
    )
    dim = 0 if axis is None else axis
    n = values.shape[dim]
    inv_flat = inverse.reshape(-1)
    pos = torch.arange(inv_flat.shape[0], device=x.device)
    first = torch.full((n,), inv_flat.shape[0], dtype=torch.int64, device=x.device)
    first.scatter_reduce_(0, inv_flat, pos, reduce="amin")
    if size is not None:
        values = _fit(values, dim, size, 0 if fill is None else fill)
        first, counts = _fit(first, 0, size, 0), _fit(counts, 0, size, 0)
    return values, first.to(torch.int32), inverse.to(torch.int32), counts.to(torch.int32)


def _fit(t, dim, size, fill):
    """Truncates or pads `t` along `dim` to `size` entries."""
    n = t.shape[dim]
    if n >= size:
        return t.narrow(dim, 0, size)
    shape = list(t.shape)
    shape[dim] = size - n
    return torch.cat([t, torch.full(shape, fill, dtype=t.dtype, device=t.device)], dim)


def _unique_abstract(x, sorted, axis, size, fill):
    if size is None:
        _data_dependent("unique", "pass `size=` to fix the number of unique values.")()
    dim = 0 if axis is None else axis
    vshape = [size] if axis is None else [size if i == dim else d for i, d in enumerate(x.shape)]
    ishape = tuple(x.shape) if axis is None else (x.shape[dim],)
    return (
        torch.empty(vshape, dtype=x.dtype, device="meta"),
        torch.empty((size,), dtype=torch.int32, device="meta"),
        torch.empty(ishape, dtype=torch.int32, device="meta"),
        torch.empty((size,), dtype=torch.int32, device="meta"),
    )


_unique_p = Primitive("unique", _unique_impl, abstract=_unique_abstract, multiple_results=True)


def unique(
    x,
    sorted=True,
    return_index=False,
    return_inverse=False,
    return_counts=False,
    axis=None,
    size=None,
    fill_value=None,
):
    """The sorted unique elements of `x` (or unique slices along `axis`), as numpy.unique.

    With `size`, the result is truncated or padded (with `fill_value`, default 0) to `size`
    values. Without `size` the output length depends on the data, so it runs eagerly only.

    Returns:
        The unique values, followed by the first-occurrence indices, the inverse indices and
        the counts when asked for (a tuple then).

    Example:
        >>> keratron.ops.unique([3, 1, 3, 2]).numpy()
        array([1, 2, 3], dtype=int32)
    """
    x = as_tensor(x)
    shape = x.shape
    ax = None
    if axis is not None:
        ax = canonical_axis(axis, x.ndim, "unique")
    elif x.ndim != 1:
        x = reshape(x, (-1,))
    values, first, inverse, counts = _unique_p.bind(
        x,
        sorted=bool(sorted),
        axis=ax,
        size=None if size is None else int(size),
        fill=fill_value,
    )
    outs = [values]
    outs += [first] if return_index else []
    if return_inverse:
        # Without `axis`, the inverse indexes the flattened values but has the input's shape
        # (numpy 2, Keras), so `values[inverse]` rebuilds `x`.
        outs.append(reshape(inverse, shape) if ax is None else inverse)
    outs += [counts] if return_counts else []
    return outs[0] if len(outs) == 1 else tuple(outs)


_isin_p = Primitive(
    "isin",
    lambda a, b, assume_unique, invert: torch.isin(
        a, b, assume_unique=assume_unique, invert=invert
    ),
)


def isin(x1, x2, assume_unique=False, invert=False):
    """True where an element of `x1` occurs anywhere in `x2` (False with `invert=True`).

    Example:
        >>> keratron.ops.isin([1, 2, 3], [2, 5]).numpy()
        array([False,  True, False])
    """
    a, b = _promote(x1, x2)
    return _isin_p.bind(a, b, assume_unique=bool(assume_unique), invert=bool(invert))


def unravel_index(indices, shape):
    """Converts flat indices into a tuple of coordinate tensors for an array of `shape`.

    Example:
        >>> [t.numpy() for t in keratron.ops.unravel_index([5, 7], (2, 4))]
        [array([1, 1], dtype=int32), array([1, 3], dtype=int32)]
    """
    idx = as_tensor(indices)
    if idx._value.dtype.is_floating_point or idx.dtype == "bool":
        raise TypeError(f"unravel_index: indices must be integers. Received {idx.dtype}.")
    dims = tuple(int(d) for d in shape)
    total = int(np.prod(dims)) if dims else 1
    if (
        _concrete(idx)
        and idx.size
        and bool(_any(logical_or(less(idx, 0), greater_equal(idx, total))))
    ):
        raise ValueError(
            f"unravel_index: indices must lie in [0, {total}) for shape {dims}. Received "
            f"indices in [{int(idx._value.min())}, {int(idx._value.max())}]."
        )
    from keratron.ops.elementwise import floor_divide, mod

    coords = []
    rem = idx
    for d in reversed(dims):
        coords.append(mod(rem, d))
        rem = floor_divide(rem, d)
    return tuple(reversed(coords))


def argpartition(x, kth, axis=-1):
    """Indices that partition `x` along `axis` around its `kth` element: the element at
    position `kth` is where a full sort would put it, smaller ones before, larger after.

    This implementation returns a stable full sort order, which is such a partition.

    Example:
        >>> keratron.ops.argpartition([3, 1, 2], 1).numpy()
        array([1, 2, 0], dtype=int32)
    """
    from keratron.ops.sorting import argsort

    x = as_tensor(x)
    if axis is None:
        x, axis = reshape(x, (-1,)), 0
    if x.ndim == 0:
        raise ValueError("argpartition: expected a tensor of rank >= 1. Received a scalar.")
    axis = canonical_axis(axis, x.ndim, "argpartition")
    n = x.shape[axis]
    for k in kth if isinstance(kth, (list, tuple)) else (kth,):
        if not -n <= int(k) < n:
            raise ValueError(f"argpartition: kth={kth} is out of bounds for length {n}.")
    return argsort(x, axis=axis)


def in_top_k(targets, predictions, k):
    """Whether each target class is among the `k` highest predictions of its row (a tie
    with the k-th value counts as inside, as in Keras).

    Example:
        >>> keratron.ops.in_top_k([1, 0], [[0.1, 0.9, 0.0], [0.2, 0.5, 0.3]], k=1).numpy()
        array([ True, False])
    """
    p = as_tensor(predictions)
    t = as_tensor(targets)
    if p.ndim != 2 or t.ndim != 1 or t.shape[0] != p.shape[0]:
        raise ValueError(
            "in_top_k: expected predictions (batch, classes) and targets (batch,). Received "
            f"shapes {p.shape} and {t.shape}."
        )
    k = int(k)
    if not 1 <= k <= p.shape[1]:
        raise ValueError(f"in_top_k: k must be in [1, {p.shape[1]}]. Received: k={k}")
    tv = gather_p.bind(p, reshape(cast(t, "int64"), (-1, 1)), axis=1)
    kth = get_item(top_k(p, k)[0], (slice(None), slice(k - 1, k)))
    return squeeze(greater_equal(tv, kth), axis=1)


def cdist(x, y):
    """Euclidean distances between the rows of `x` (..., P, M) and `y` (..., R, M).

    Example:
        >>> keratron.ops.cdist([[0.0, 0.0]], [[3.0, 4.0]]).numpy()
        array([[5.]], dtype=float32)
    """
    x, y = _promote(_float(x), _float(y))
    if x.ndim < 2 or y.ndim < 2:
        raise ValueError(f"cdist: inputs must have rank >= 2. Received {x.shape} and {y.shape}.")
    if x.shape[-1] != y.shape[-1]:
        raise ValueError(
            f"cdist: the last axes must match. Received shapes {x.shape} and {y.shape}."
        )
    d = subtract(expand_dims(x, -2), expand_dims(y, -3))
    return _safe_sqrt(sum(square(d), axis=-1))


def corrcoef(x):
    """Pearson correlation coefficients between the rows (variables) of `x`.

    Example:
        >>> keratron.ops.corrcoef([[1.0, 2.0, 3.0], [2.0, 4.0, 7.0]]).shape
        (2, 2)
    """
    x = _float(x)
    if x.ndim > 2:
        raise ValueError(f"corrcoef: `x` must be 1-D or 2-D. Received shape {x.shape}.")
    x2 = reshape(x, (1, -1)) if x.ndim == 1 else x
    xm = subtract(x2, mean(x2, axis=1, keepdims=True))
    c = matmul(xm, _mT(xm))
    d = sqrt(diag(c))
    r = divide(divide(c, expand_dims(d, 1)), expand_dims(d, 0))
    r = minimum(maximum(r, -1.0), 1.0)
    return reshape(r, ()) if x.ndim == 1 else r


def correlate(x1, x2, mode="valid"):
    """Cross-correlation of two 1-D sequences, `c[k] = sum_n x1[n + k] * x2[n]`, as
    numpy.correlate; `mode` is "valid", "same" or "full".

    Example:
        >>> keratron.ops.correlate([1.0, 2.0, 3.0], [0.0, 1.0, 0.5]).numpy()
        array([3.5], dtype=float32)
    """
    if mode not in ("valid", "same", "full"):
        raise ValueError(f"correlate: mode must be valid, same or full. Received: {mode!r}")
    a, v = _promote(_float(x1), _float(x2))
    if a.ndim != 1 or v.ndim != 1:
        raise ValueError(f"correlate: inputs must be 1-D. Received {a.shape} and {v.shape}.")
    m, n = a.shape[0], v.shape[0]
    if m == 0 or n == 0:
        raise ValueError("correlate: inputs must not be empty.")
    ap = pad(a, [(n - 1, n - 1)])
    # full[k] = sum_j ap[k + j] * v[j], k = 0 .. m + n - 2: one gather, one product.
    idx = np.arange(m + n - 1)[:, None] + np.arange(n)[None, :]
    windows = take_p.bind(ap, _const(idx, ap), axis=0)
    full = matmul(windows, v)
    if mode == "full":
        return full
    length = builtins.max(m, n) if mode == "same" else builtins.max(m, n) - builtins.min(m, n) + 1
    start = (m + n - 1 - length) // 2
    return get_item(full, slice(start, start + length))
