"""Segment reductions (`keras.ops.segment_sum` and friends): one primitive reduces the rows
of `data` into `num_segments` buckets by `segment_ids`.
"""

from __future__ import annotations

import math

import torch

from keratron.ops._core import (
    Primitive,
    _concrete,
    as_tensor,
    on_device_of,
)
from keratron.ops.creation import (
    zeros,
)
from keratron.ops.elementwise import (
    _dtype_limits,
    cast,
    divide,
    equal,
    greater_equal,
    less,
    logical_and,
    maximum,
    multiply,
    where,
)
from keratron.ops.shaping import (
    concatenate,
    take_p,
)

__all__ = ["segment_sum", "segment_max", "segment_min", "segment_prod"]

_SEGMENT_REDUCE = {"sum": "sum", "max": "amax", "min": "amin", "prod": "prod"}


def _segment_impl(data, ids, num_segments, reduction):
    # Row `num_segments` collects out-of-range ids and is dropped at the end.
    shape = (num_segments + 1,) + tuple(data.shape[1:])
    if reduction == "max":
        init = -math.inf if data.dtype.is_floating_point else _dtype_limits(data.dtype)[0]
    elif reduction == "min":
        init = math.inf if data.dtype.is_floating_point else _dtype_limits(data.dtype)[1]
    else:
        init = 1 if reduction == "prod" else 0
    out = torch.full(shape, init, dtype=data.dtype, device=data.device)
    index = ids.long().reshape((-1,) + (1,) * (data.dim() - 1)).expand(data.shape)
    out.scatter_reduce_(0, index, data, reduce=_SEGMENT_REDUCE[reduction], include_self=True)
    return out[:num_segments]


def _segment_vjp(g, data, ids, out, num_segments, reduction):
    # Gather each element's segment value; the padding row (id == num_segments) gets 0.
    def per_element(t):
        tail = zeros((1,) + tuple(t.shape[1:]), dtype=t.dtype)
        return take_p.bind(concatenate([t, on_device_of(tail, t)], axis=0), ids, axis=0)

    ge = per_element(g)
    if reduction == "sum":
        return ge, None
    if reduction == "prod":
        return divide(multiply(ge, per_element(out)), data), None
    hit = cast(equal(data, per_element(out)), data.dtype)
    count = _segment_p.bind(hit, ids, num_segments=num_segments, reduction="sum")
    return divide(multiply(ge, hit), maximum(per_element(count), 1)), None


_segment_p = Primitive("segment_reduce", _segment_impl, _segment_vjp)


def _segment(data, segment_ids, num_segments, reduction):
    op = f"segment_{reduction}"
    data = as_tensor(data)
    ids = as_tensor(segment_ids)
    if ids._value.dtype.is_floating_point or ids.dtype == "bool":
        raise TypeError(f"{op}: segment_ids must be integers. Received dtype {ids.dtype}.")
    if ids.ndim != 1 or data.ndim == 0 or ids.shape[0] != data.shape[0]:
        raise ValueError(
            f"{op}: segment_ids must be 1-D with one id per row of data. Received data of "
            f"shape {data.shape} and segment_ids of shape {ids.shape}."
        )
    if num_segments is None:
        if not _concrete(ids):
            raise ValueError(
                f"{op}: `num_segments` is required when tracing (the output length would "
                "depend on the values of segment_ids)."
            )
        num_segments = int(ids._value.max()) + 1 if ids.size else 0
    num_segments = int(num_segments)
    if num_segments < 0:
        raise ValueError(f"{op}: num_segments must be >= 0. Received {num_segments}.")
    if data.dtype == "bool":
        data = cast(data, "int32")
    ids = on_device_of(cast(ids, "int64"), data)
    # Out-of-range ids (negative, or >= num_segments) are dropped, as in TensorFlow.
    valid = logical_and(greater_equal(ids, 0), less(ids, num_segments))
    ids = where(valid, ids, num_segments)
    return _segment_p.bind(data, ids, num_segments=num_segments, reduction=reduction)


def segment_sum(data, segment_ids, num_segments=None, sorted=False):
    """Sums the rows of `data` that share a segment id (ids outside [0, num_segments) are
    dropped; `num_segments` defaults to max(id) + 1, eagerly). `sorted` is only a hint.

    Example:
        >>> keratron.ops.segment_sum([1.0, 2.0, 3.0], [0, 0, 1]).numpy()
        array([3., 3.], dtype=float32)
    """
    return _segment(data, segment_ids, num_segments, "sum")


def segment_max(data, segment_ids, num_segments=None, sorted=False):
    """Maximum of the rows of `data` per segment; empty segments hold -inf (or the dtype's
    lowest value for integers).

    Example:
        >>> keratron.ops.segment_max([1.0, 5.0, 3.0], [0, 0, 1]).numpy()
        array([5., 3.], dtype=float32)
    """
    return _segment(data, segment_ids, num_segments, "max")


def segment_min(data, segment_ids, num_segments=None, sorted=False):
    """Minimum of the rows of `data` per segment; empty segments hold +inf (or the dtype's
    highest value for integers).

    Example:
        >>> keratron.ops.segment_min([1.0, 5.0, 3.0], [0, 0, 1]).numpy()
        array([1., 3.], dtype=float32)
    """
    return _segment(data, segment_ids, num_segments, "min")


def segment_prod(data, segment_ids, num_segments=None, sorted=False):
    """Product of the rows of `data` per segment; empty segments hold 1.

    Example:
        >>> keratron.ops.segment_prod([2.0, 5.0, 3.0], [0, 0, 1]).numpy()
        array([10.,  3.], dtype=float32)
    """
    return _segment(data, segment_ids, num_segments, "prod")
