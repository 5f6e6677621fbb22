"""keratron.tree against keras.tree (Keras 3, torch backend) on the same structures."""

import collections

import pytest

import keratron
from tests.conftest import require

Point = collections.namedtuple("Point", ["x", "y"])

STRUCTURES = [
    1,
    None,
    [],
    [[1, 2, 3], [4, [5], [[6]]]],
    {"b": [1, 2], "a": (3, None)},
    collections.OrderedDict([("z", 1), ("a", 2)]),
    Point(1, [2, 3]),
    (1, {"k": collections.deque([2, 3])}),
]


@pytest.mark.interop
@pytest.mark.parametrize("s", STRUCTURES, ids=range(len(STRUCTURES)))
def test_flatten_pack_map_match_keras(s):
    keras = require("keras")
    assert keratron.tree.is_nested(s) == keras.tree.is_nested(s)
    assert keratron.tree.flatten(s) == keras.tree.flatten(s)
    assert keratron.tree.flatten_with_path(s) == keras.tree.flatten_with_path(s)
    flat = list(range(len(keras.tree.flatten(s))))
    assert keratron.tree.pack_sequence_as(s, flat) == keras.tree.pack_sequence_as(s, flat)
    fn = lambda v: None if v is None else str(v)  # noqa: E731
    assert keratron.tree.map_structure(fn, s) == keras.tree.map_structure(fn, s)
    assert keratron.tree.lists_to_tuples(s) == keras.tree.lists_to_tuples(s)


@pytest.mark.interop
@pytest.mark.parametrize("top_down", [True, False])
def test_traverse_matches_keras(top_down):
    keras = require("keras")
    s = [(1, 2), [3], {"a": 4}]
    seen_ours, seen_keras = [], []
    ours = keratron.tree.traverse(seen_ours.append, s, top_down=top_down)
    theirs = keras.tree.traverse(seen_keras.append, s, top_down=top_down)
    assert ours == theirs and seen_ours == seen_keras

    def cut(x):
        if isinstance(x, tuple):
            return keratron.tree.MAP_TO_NONE
        return None

    def cut_keras(x):
        return keras.tree.MAP_TO_NONE if isinstance(x, tuple) else None

    assert keratron.tree.traverse(cut, s, top_down=top_down) == keras.tree.traverse(
        cut_keras, s, top_down=top_down
    )


@pytest.mark.interop
def test_structure_checks_and_up_to_match_keras():
    keras = require("keras")
    for a, b in [([(0, 1)], [(2, 3)]), ({"a": 1}, collections.OrderedDict(a=2))]:
        keratron.tree.assert_same_structure(a, b)
        keras.tree.assert_same_structure(a, b)
    for a, b in [([0, 1], (0, 1)), ([0], [0, 1]), ({"a": 1}, {"b": 1})]:
        with pytest.raises(ValueError):
            keras.tree.assert_same_structure(a, b)
        with pytest.raises(ValueError):
            keratron.tree.assert_same_structure(a, b)
    keratron.tree.assert_same_paths([0, 1], (2, 3))
    with pytest.raises(ValueError):
        keratron.tree.assert_same_paths([0, 1], [0])
    args = ([None, [None, None]], str, [[1, 1], [2, 2]])
    assert keratron.tree.map_structure_up_to(*args) == keras.tree.map_structure_up_to(*args)
    shapes = {"a": (None, 3), "b": [(2,), (4, 5)]}
    assert keratron.tree.map_shape_structure(len, shapes) == keras.tree.map_shape_structure(
        len, shapes
    )
    assert sorted(keratron.tree.__all__) == sorted(
        n for n in dir(keras.tree) if not n.startswith("_")
    )
