"""Shape rules shared by op families: output (shape, dtype) from input (shape, dtype) pairs.

A primitive's `shape_rule(*avals, **params)` (see `keratron.autodiff.primitive.Primitive`)
gives its outputs' shapes and dtypes without running a kernel, not even on torch's "meta"
device, whose Python meta kernels import torch._dynamo and sympy on first use. An aval is a
`(shape tuple, torch.dtype)` pair, None for an absent optional input. A rule returns a list of
pairs, one per output, or None for a case it does not cover (the meta kernel then decides, and
raises what torch raises for an invalid call). Each rule must give exactly what the
primitive's implementation gives; tests/autodiff/test_shape_rules.py checks every rule against
the meta kernels.
"""

from __future__ import annotations

import torch


def broadcast_shapes(*shapes) -> tuple | None:
    """numpy/torch broadcasting of `shapes`, or None when they do not broadcast."""
    ndim = max(len(s) for s in shapes)
    out = []
    for i in range(-ndim, 0):
        size = 1
        for s in shapes:
            if len(s) < -i:
                continue
            d = s[i]
            if d == size or d == 1:
                continue
            if size != 1:
                return None
            size = d
        out.append(size)
    return tuple(out)


def _combine(higher, lower):
    # torch's combine_categories (c10 ResultType): a lower-priority operand (0-d) changes the
    # result only when it is of a higher category (bool < int < float).
    if lower is None:
        return higher
    if higher is None:
        return lower
    if higher.is_floating_point:
        return higher
    if higher is torch.bool or lower.is_floating_point:
        return torch.promote_types(higher, lower)
    return higher


def result_type(*avals) -> torch.dtype | None:
    """The dtype torch's type promotion gives tensors of these avals (dimensioned tensors
    outrank 0-d ones of the same category, as in `torch.result_type`); None for complex or
    unsigned-wide dtypes, which this rule leaves to torch."""
    dims = zeros = None
    for shape, dtype in avals:
        if dtype.is_complex or dtype in (torch.uint16, torch.uint32, torch.uint64):
            return None
        if len(shape):
            dims = dtype if dims is None else torch.promote_types(dims, dtype)
        else:
            zeros = dtype if zeros is None else torch.promote_types(zeros, dtype)
    return _combine(dims, zeros)


def same(x, **_):
    """Unary, same shape and dtype (any dtype): copies, identities, `*_like` fills."""
    return [x]


def same_numeric(x, **_):
    """Unary arithmetic on int or float inputs: same shape and dtype (bool and complex inputs
    are left to torch, whose kernels reject some of them)."""
    dtype = x[1]
    if dtype is torch.bool or dtype.is_complex:
        return None
    return [x]


def same_float(x, **_):
    """Unary float function (exp, log, rsqrt, ...) on a floating input: same shape and dtype."""
    return [x] if x[1].is_floating_point else None


def binary(x, y, **_):
    """Broadcast shapes, promoted dtype (add, multiply, maximum, ...)."""
    shape = broadcast_shapes(x[0], y[0])
    dtype = result_type(x, y)
    if shape is None or dtype is None:
        return None
    return [(shape, dtype)]


def binary_no_bool(x, y, **_):
    """As `binary`, for ops torch rejects on two bools (subtract)."""
    if x[1] is torch.bool and y[1] is torch.bool:
        return None
    return binary(x, y)


def binary_to_float(x, y, **_):
    """As `binary`, with integer and bool results in torch's default float dtype (true
    division)."""
    out = binary(x, y)
    if out is None:
        return None
    shape, dtype = out[0]
    return [(shape, dtype if dtype.is_floating_point else torch.get_default_dtype())]


def compare(x, y, **_):
    """Broadcast shapes, bool dtype (comparisons and logical ops)."""
    out = binary(x, y)
    return None if out is None else [(out[0][0], torch.bool)]


def reduced_shape(shape, axis, keepdims) -> tuple | None:
    """The shape `shape` reduced over `axis` (an int, a tuple, None for all axes, () for none);
    None for repeated or out-of-range axes."""
    ndim = len(shape)
    if axis == ():
        return tuple(shape)
    if ndim == 0:
        return () if axis in (None, 0, -1) else None
    axes = range(ndim) if axis is None else axis if isinstance(axis, tuple) else (axis,)
    if any(not -ndim <= a < ndim for a in axes):
        return None
    axes = {a % ndim for a in axes}
    if isinstance(axis, tuple) and len(axes) != len(axis):
        return None
    if keepdims:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes)


def reduction(x, axis, keepdims, **_):
    """A reduction that keeps the input's dtype (max, min, mean of floats)."""
    shape = reduced_shape(x[0], axis, keepdims)
    return None if shape is None else [(shape, x[1])]


def window_out(size, k, stride, lo, hi, dilation=1) -> int:
    """The output length of a strided window over `size` padded by (lo, hi); < 1 when the
    window does not fit."""
    return (size + lo + hi - dilation * (k - 1) - 1) // stride + 1
