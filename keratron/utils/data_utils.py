"""`keras.utils.pack_x_y_sample_weight` / `unpack_x_y_sample_weight`: a batch as `x`, `(x,)`,
`(x, y)` or `(x, y, sample_weight)`, and back."""

from __future__ import annotations

__all__ = ["pack_x_y_sample_weight", "unpack_x_y_sample_weight"]


def unpack_x_y_sample_weight(data):
    """Returns `(x, y, sample_weight)` from a batch given as `x`, `(x,)`, `(x, y)` or
    `(x, y, sample_weight)` (a list counts as a tuple); missing parts are None.

    Raises:
        ValueError: for a tuple of more than three elements.

    Example:
        >>> keratron.utils.unpack_x_y_sample_weight((1, 2))
        (1, 2, None)
    """
    if isinstance(data, list):
        data = tuple(data)
    if not isinstance(data, tuple):
        return data, None, None
    if len(data) == 1:
        return data[0], None, None
    if len(data) == 2:
        return data[0], data[1], None
    if len(data) == 3:
        return data[0], data[1], data[2]
    raise ValueError(
        "unpack_x_y_sample_weight: data is expected to be in format `x`, `(x,)`, `(x, y)`, or "
        f"`(x, y, sample_weight)`, found: {data}"
    )


def pack_x_y_sample_weight(x, y=None, sample_weight=None):
    """Packs a batch as `unpack_x_y_sample_weight` reads it: `x` alone (wrapped as `(x,)`
    when it is itself a tuple or list, so that it is not read as `(x, y)`), `(x, y)` or
    `(x, y, sample_weight)`.

    Example:
        >>> keratron.utils.pack_x_y_sample_weight(1, 2)
        (1, 2)
    """
    if y is None:
        return (x,) if isinstance(x, (tuple, list)) else x
    if sample_weight is None:
        return (x, y)
    return (x, y, sample_weight)
