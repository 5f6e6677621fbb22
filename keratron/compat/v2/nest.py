"""`tf.nest`: TF's structure utilities over `keratron.tree` (same flattening order: dicts by
sorted key), with TF's `check_types` in `assert_same_structure`."""

from __future__ import annotations

from collections.abc import Mapping

from keratron import tree
from keratron.tree import flatten, is_nested, map_structure, pack_sequence_as

__all__ = ["assert_same_structure", "flatten", "is_nested", "map_structure", "pack_sequence_as"]


def assert_same_structure(nest1, nest2, check_types=True, expand_composites=False) -> None:
    """Raises unless `nest1` and `nest2` nest the same way.

    Raises:
        ValueError: the nesting or the number of elements differs.
        TypeError: `check_types` and a node's sequence type differs (a list against a tuple),
            as in TF; without `check_types` such nodes match.
    """
    if not check_types:
        tree.assert_same_structure(_as_lists(nest1), _as_lists(nest2))
        return
    tree.assert_same_structure(_as_lists(nest1), _as_lists(nest2))
    _check_types(nest1, nest2)


def _as_lists(x):
    """`x` with every non-mapping sequence node a list (namedtuples included)."""
    if isinstance(x, Mapping):
        return {k: _as_lists(v) for k, v in x.items()}
    if is_nested(x):
        return [_as_lists(v) for v in (x.values() if isinstance(x, Mapping) else x)]
    return x


def _check_types(a, b):
    if not is_nested(a):
        return
    if type(a) is not type(b) and not (isinstance(a, Mapping) and isinstance(b, Mapping)):
        raise TypeError(
            "The two structures don't have the same sequence type. Input structure has type "
            f"{type(a)!r}, while shallow structure has type {type(b)!r}."
        )
    if isinstance(a, Mapping):
        for k in a:
            _check_types(a[k], b[k])
    else:
        for x, y in zip(a, b):
            _check_types(x, y)
