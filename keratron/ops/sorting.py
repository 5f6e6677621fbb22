"""Sorting and search (keras.ops names): `sort`, `argsort`, `top_k`, `searchsorted`.

`sort` and `top_k` return their int32 indices beside the values; their VJP scatters the
cotangent back through those indices with the gathers' scatter-add primitive of
`ops.shaping`.
"""

from __future__ import annotations

import torch

from keratron.ops._core import Primitive, as_tensor, canonical_axis
from keratron.ops.elementwise import cast
from keratron.ops.shaping import _promote, gather_grad_p, reshape

__all__ = ["sort", "argsort", "top_k", "searchsorted"]


def _sort_impl(x, axis):
    values, indices = torch.sort(x, dim=axis, stable=True)
    return values, indices.to(torch.int32)


sort_p = Primitive(
    "sort",
    _sort_impl,
    lambda gs, x, out, axis: (gather_grad_p.bind(gs[0], out[1], shape=x.shape, axis=axis),),
    multiple_results=True,
)


def _sort_args(x, axis, op):
    x = as_tensor(x)
    if axis is None:
        return reshape(x, (-1,)), 0, False
    if x.ndim == 0:  # a scalar sorts as a 1-element vector and keeps its shape
        return reshape(x, (1,)), 0, True
    return x, canonical_axis(axis, x.ndim, op), False


def sort(x, axis=-1):
    """Sorts ascending along `axis` (None: the flattened tensor); differentiable in `x`.

    Example:
        >>> keratron.ops.sort([3, 1, 2]).numpy()
        array([1, 2, 3], dtype=int32)
    """
    x, axis, scalar = _sort_args(x, axis, "sort")
    if x.dtype == "bool":  # torch's CUDA sort has no bool kernel
        values = cast(sort_p.bind(cast(x, "uint8"), axis=axis)[0], "bool")
    else:
        values = sort_p.bind(x, axis=axis)[0]
    return reshape(values, ()) if scalar else values


def argsort(x, axis=-1):
    """The int32 indices that sort `x` along `axis` (ties keep their order).

    Example:
        >>> keratron.ops.argsort([3, 1, 2]).numpy()
        array([1, 2, 0], dtype=int32)
    """
    x, axis, scalar = _sort_args(x, axis, "argsort")
    if x.dtype == "bool":
        x = cast(x, "uint8")
    indices = sort_p.bind(x, axis=axis)[1]
    return reshape(indices, ()) if scalar else indices


def _top_k_impl(x, k, sorted):
    values, indices = torch.topk(x, k, dim=-1, largest=True, sorted=sorted)
    return values, indices.to(torch.int32)


top_k_p = Primitive(
    "top_k",
    _top_k_impl,
    lambda gs, x, out, k, sorted: (
        gather_grad_p.bind(gs[0], out[1], shape=x.shape, axis=x.ndim - 1),
    ),
    multiple_results=True,
)


def top_k(x, k, sorted=True):
    """The `k` largest values along the last axis and their int32 indices.

    Example:
        >>> values, indices = keratron.ops.top_k([5.0, 2.0, 7.0, 1.0], k=2)
        >>> indices.numpy()
        array([2, 0], dtype=int32)
    """
    x = as_tensor(x)
    if x.ndim == 0:
        raise ValueError("top_k: expected a tensor of rank >= 1. Received a scalar.")
    k = int(k)
    if not 0 <= k <= x.shape[-1]:
        raise ValueError(
            f"top_k: k must be in [0, {x.shape[-1]}] for a tensor of shape {x.shape}. "
            f"Received: k={k}"
        )
    values, indices = top_k_p.bind(x, k=k, sorted=bool(sorted))
    return values, indices


searchsorted_p = Primitive(
    "searchsorted",
    lambda seq, v, right: torch.searchsorted(
        seq, v.reshape(-1), right=right, out_int32=True
    ).reshape(v.shape),
)


def searchsorted(sorted_sequence, values, side="left"):
    """Int32 positions at which `values` would be inserted into the 1-D `sorted_sequence`
    to keep it sorted ("left": before equal entries, "right": after them).

    Example:
        >>> keratron.ops.searchsorted([1.0, 2.0, 3.0], [2.0, 2.5], side="right").numpy()
        array([2, 2], dtype=int32)
    """
    seq, v = _promote([sorted_sequence, values], "searchsorted")
    if seq.ndim != 1:
        raise ValueError(
            "searchsorted: sorted_sequence must be 1-D. "
            f"Received sorted_sequence of shape {seq.shape}."
        )
    if side not in ("left", "right"):
        raise ValueError(f"searchsorted: side must be 'left' or 'right'. Received: side={side!r}")
    if seq.dtype == "bool":
        seq, v = cast(seq, "uint8"), cast(v, "uint8")
    return searchsorted_p.bind(seq, v, right=side == "right")
