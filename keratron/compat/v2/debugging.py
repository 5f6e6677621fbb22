"""`tf.debugging`: eager assertions that raise TF's `InvalidArgumentError`."""

from __future__ import annotations

import numpy as np

from keratron.compat.v1.errors import InvalidArgumentError
from keratron.compat.v2.ops import convert_to_tensor

__all__ = ["assert_equal", "assert_greater", "assert_less", "check_numerics"]


def _assert(ok, message, summary, x, y):
    if not bool(np.all(ok)):
        raise InvalidArgumentError(
            None, None, f"{message or ''}{summary}: x = {np.asarray(x)!r}, y = {np.asarray(y)!r}"
        )


def assert_equal(x, y, message=None, summarize=None, name=None) -> None:
    """Raises `InvalidArgumentError` unless `x == y` everywhere (with broadcasting)."""
    x, y = convert_to_tensor(x).numpy(), convert_to_tensor(y).numpy()
    _assert(np.equal(x, y), message, "Condition x == y did not hold element-wise", x, y)


def assert_less(x, y, message=None, summarize=None, name=None) -> None:
    x, y = convert_to_tensor(x).numpy(), convert_to_tensor(y).numpy()
    _assert(np.less(x, y), message, "Condition x < y did not hold element-wise", x, y)


def assert_greater(x, y, message=None, summarize=None, name=None) -> None:
    x, y = convert_to_tensor(x).numpy(), convert_to_tensor(y).numpy()
    _assert(np.greater(x, y), message, "Condition x > y did not hold element-wise", x, y)


def check_numerics(tensor, message, name=None):
    """Returns `tensor`, or raises `InvalidArgumentError` if it holds a NaN or an Inf."""
    t = convert_to_tensor(tensor)
    a = t.numpy()
    if not np.all(np.isfinite(a)):
        kind = "NaN" if np.isnan(a).any() else "Inf"
        raise InvalidArgumentError(None, None, f"{message} : Tensor had {kind} values")
    return t
