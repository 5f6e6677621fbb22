"""Argument helpers for code built on ops (`keratron.random`, losses, metrics).

Not a Keras namespace: these are the conversions every op family applies to its arguments,
public so that the packages above ops convert the same way.

Example:
    >>> from keratron.ops.utils import as_tensor, canonical_axis
    >>> canonical_axis(-1, as_tensor([[1.0, 2.0]]).ndim)
    1
"""

from __future__ import annotations

from keratron.ops._core import as_tensor, canonical_axis, pair

__all__ = ["as_tensor", "canonical_axis", "pair"]
