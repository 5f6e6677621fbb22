"""Nested structures (lists, tuples, namedtuples, dicts, deques), as `keras.tree`.

Leaves are everything that is not a list, tuple, dict (any `Mapping`) or deque; `None` is a
leaf. Dicts are visited in sorted key order, `OrderedDict`s in their own order, as in Keras.

Example:
    >>> keratron.tree.flatten({"b": [1, 2], "a": 3})
    [3, 1, 2]
    >>> keratron.tree.map_structure(lambda v: v * 2, (1, [2]))
    (2, [4])
"""

from __future__ import annotations

import collections
from collections.abc import Mapping

__all__ = [
    "MAP_TO_NONE",
    "assert_same_paths",
    "assert_same_structure",
    "flatten",
    "flatten_with_path",
    "is_nested",
    "lists_to_tuples",
    "map_shape_structure",
    "map_structure",
    "map_structure_up_to",
    "pack_sequence_as",
    "traverse",
]


class MAP_TO_NONE:  # noqa: N801 (Keras's name)
    """Returned by a `traverse` function to replace a sub-tree with None."""


def is_nested(structure) -> bool:
    """True for a list, tuple, namedtuple, dict (any Mapping) or deque."""
    return isinstance(structure, (list, tuple, Mapping, collections.deque))


def _is_namedtuple(x) -> bool:
    return isinstance(x, tuple) and hasattr(type(x), "_fields")


def _keys(structure) -> list:
    if isinstance(structure, collections.OrderedDict):
        return list(structure)
    try:
        return sorted(structure)
    except TypeError as e:
        raise TypeError(
            f"keras.tree: dict keys must be sortable. Received keys {list(structure)!r}"
        ) from e


def _children(structure) -> list:
    """(path entry, child) pairs of a nested node, in flattening order."""
    if isinstance(structure, Mapping):
        return [(k, structure[k]) for k in _keys(structure)]
    return list(enumerate(structure))


def _rebuild(structure, values: list):
    """A node of `structure`'s type holding `values` (in flattening order)."""
    if isinstance(structure, Mapping):
        by_key = dict(zip(_keys(structure), values))
        items = [(k, by_key[k]) for k in structure]
        if isinstance(structure, collections.defaultdict):
            return collections.defaultdict(structure.default_factory, items)
        return type(structure)(items)
    if _is_namedtuple(structure):
        return type(structure)(*values)
    if isinstance(structure, collections.deque):
        return collections.deque(values, maxlen=structure.maxlen)
    return type(structure)(values)


def flatten(structure) -> list:
    """The leaves of `structure`, in order.

    Example:
        >>> keratron.tree.flatten([[1, 2, 3], [4, [5], [[6]]]])
        [1, 2, 3, 4, 5, 6]
    """
    return [leaf for _, leaf in flatten_with_path(structure)]


def flatten_with_path(structure) -> list:
    """`(path, leaf)` pairs, where a path is the tuple of indices and keys to the leaf.

    Example:
        >>> keratron.tree.flatten_with_path([{"foo": 42}])
        [((0, 'foo'), 42)]
    """
    out = []

    def visit(s, path):
        if not is_nested(s):
            out.append((path, s))
            return
        for key, child in _children(s):
            visit(child, path + (key,))

    visit(structure, ())
    return out


def pack_sequence_as(structure, flat_sequence):
    """Fills `structure`'s layout with the leaves of `flat_sequence`, in flattening order.

    Raises:
        TypeError: if `flat_sequence` is not a sequence.
        ValueError: if the number of leaves differs.

    Example:
        >>> keratron.tree.pack_sequence_as((("a", "b"), "c"), [1, 2, 3])
        ((1, 2), 3)
    """
    if not isinstance(flat_sequence, (list, tuple, collections.deque)):
        raise TypeError(
            "pack_sequence_as: `flat_sequence` must be a list or tuple. "
            f"Received: {type(flat_sequence).__name__}"
        )
    flat = list(flat_sequence)
    pos = 0

    def build(s):
        nonlocal pos
        if not is_nested(s):
            pos += 1
            return flat[pos - 1]
        return _rebuild(s, [build(child) for _, child in _children(s)])

    n = len(flatten(structure))
    if n != len(flat):
        raise ValueError(
            f"pack_sequence_as: the structure has {n} leaves, but `flat_sequence` has "
            f"{len(flat)} elements. Received: structure={structure!r}"
        )
    return build(structure)


def assert_same_structure(a, b, check_types=None) -> None:
    """Raises ValueError unless `a` and `b` nest the same way (same node types and keys;
    any dict matches any dict). `check_types` is accepted for Keras compatibility only."""

    def check(x, y, path):
        if is_nested(x) != is_nested(y):
            raise ValueError(
                f"The two structures don't have the same nested structure at path {path}: "
                f"{x!r} and {y!r}."
            )
        if not is_nested(x):
            return
        same_kind = (isinstance(x, Mapping) and isinstance(y, Mapping)) or type(x) is type(y)
        if not same_kind:
            raise ValueError(
                f"The two structures don't have the same nested structure at path {path}: "
                f"type {type(x).__name__} and type {type(y).__name__}."
            )
        kx, ky = _children(x), _children(y)
        if [k for k, _ in kx] != [k for k, _ in ky]:
            raise ValueError(
                f"The two structures don't have the same nested structure at path {path}: "
                f"{x!r} and {y!r}."
            )
        for (k, cx), (_, cy) in zip(kx, ky):
            check(cx, cy, path + (k,))

    check(a, b, ())


def assert_same_paths(a, b) -> None:
    """Raises ValueError unless `a` and `b` have the same leaf paths (node types may differ)."""
    pa = {p for p, _ in flatten_with_path(a)}
    pb = {p for p, _ in flatten_with_path(b)}
    if pa != pb:
        raise ValueError(
            "The two structures don't have the same paths. "
            f"Paths only in the first: {sorted(pa - pb, key=str)}; "
            f"only in the second: {sorted(pb - pa, key=str)}."
        )


def map_structure(func, *structures, none_is_leaf=True):
    """Applies `func` leaf-wise over structures of the same layout.

    Example:
        >>> keratron.tree.map_structure(lambda x, y: x * y, [[1], [2]], [[3], [4]])
        [[3], [8]]
    """
    if not callable(func):
        raise TypeError(f"map_structure: `func` must be callable. Received: {func!r}")
    if not structures:
        raise TypeError("map_structure: at least one structure is required.")
    for other in structures[1:]:
        assert_same_structure(structures[0], other)
    flats = [flatten(s) for s in structures]

    def apply(*leaves):
        if not none_is_leaf and leaves[0] is None:
            return None
        return func(*leaves)

    return pack_sequence_as(structures[0], [apply(*leaves) for leaves in zip(*flats)])


def map_structure_up_to(shallow_structure, func, *structures):
    """Like `map_structure`, but `func` receives the sub-trees at `shallow_structure`'s leaves.

    Example:
        >>> keratron.tree.map_structure_up_to([None, None], len, [[1, 1], [2, 2, 2]])
        [2, 3]
    """

    def level(shallow, *subs):
        if not is_nested(shallow):
            return func(*subs)
        for s in subs:
            if not is_nested(s) or len(s) != len(shallow):
                raise ValueError(
                    "map_structure_up_to: a structure is shallower than, or differs from, "
                    f"`shallow_structure`. Received: {s!r} for {shallow!r}"
                )
        keys = [k for k, _ in _children(shallow)]
        values = [level(shallow[k], *(s[k] for s in subs)) for k in keys]
        return _rebuild(shallow, values)

    return level(shallow_structure, *structures)


def traverse(func, structure, top_down=True):
    """Visits every sub-tree depth-first and rebuilds the structure from `func`'s results.

    Top-down, a non-None result replaces the sub-tree and stops descending into it;
    bottom-up, a non-None result replaces the (already traversed) sub-tree. Return
    `MAP_TO_NONE` to put None in the result.

    Example:
        >>> v = []
        >>> keratron.tree.traverse(v.append, [(1, 2), [3]])
        [(1, 2), [3]]
        >>> v
        [[(1, 2), [3]], (1, 2), 1, 2, [3], 3]
    """
    if not callable(func):
        raise TypeError(f"traverse: `func` must be callable. Received: {func!r}")

    def resolve(value, default):
        if value is None:
            return default
        return None if value is MAP_TO_NONE else value

    def visit(s):
        if top_down:
            result = func(s)
            if result is not None:
                return resolve(result, s)
        if is_nested(s):
            s = _rebuild(s, [visit(child) for _, child in _children(s)])
        if top_down:
            return s
        return resolve(func(s), s)

    return visit(structure)


def lists_to_tuples(structure):
    """The same structure with every list turned into a tuple."""

    def convert(s):
        if isinstance(s, list):
            return tuple(convert(v) for v in s)
        if is_nested(s):
            return _rebuild(s, [convert(child) for _, child in _children(s)])
        return s

    return convert(structure)


def _is_shape(x) -> bool:
    return isinstance(x, (list, tuple)) and all(
        d is None or (isinstance(d, int) and not isinstance(d, bool)) for d in x
    )


def map_shape_structure(func, structure):
    """Applies `func` to every shape (a tuple or list of ints and None) in `structure`."""
    if _is_shape(structure):
        return func(tuple(structure))
    if is_nested(structure):
        return _rebuild(structure, [map_shape_structure(func, c) for _, c in _children(structure)])
    raise ValueError(f"map_shape_structure: expected shapes as leaves. Received: {structure!r}")
