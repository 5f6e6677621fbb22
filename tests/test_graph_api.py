"""keratron.Operation, keratron.Function and keratron.name_scope against real Keras."""

import numpy as np
import pytest

import keratron
from tests.conftest import require


def _operation_graph(k):
    class Scale(k.Operation):
        def __init__(self, factor, name=None):
            super().__init__(name=name)
            self.factor = factor

        def call(self, x):
            return x * self.factor

    class Halves(k.Operation):
        def call(self, x):
            return k.ops.split(x, 2, axis=-1)

    x = k.Input((4,), name="x")
    scaled = Scale(3.0, name="scale")(x)
    left, right = Halves()(scaled)
    return x, scaled, left, right, Scale


def test_operation_matches_keras():
    keras = require("keras")
    data = np.arange(8, dtype="float32").reshape(2, 4)
    results = []
    for k in (keratron, keras):
        x, scaled, left, right, scale_cls = _operation_graph(k)
        assert (scaled.shape, left.shape, right.shape) == ((None, 4), (None, 2), (None, 2))
        model = k.Model(x, [left, right])
        results.append([k.ops.convert_to_numpy(o) for o in model(data)])
        op = scale_cls(2.0)
        np.testing.assert_allclose(k.ops.convert_to_numpy(op(k.ops.ones((2,)))), [2.0, 2.0])
        assert op.name.startswith("scale")
        assert isinstance(k.layers.Dense(1), k.Operation)
    for ours, theirs in zip(*results):
        np.testing.assert_allclose(ours, theirs)
    with pytest.raises(ValueError, match="cannot contain character"):
        keratron.Operation(name="a/b")


def test_function_matches_keras():
    keras = require("keras")
    a_val = np.array([[1.0, -2.0, 3.0]], "float32")
    b_val = np.array([[0.5, 0.5, -5.0]], "float32")
    results = []
    for k in (keratron, keras):
        a, b = k.Input((3,), name="a"), k.Input((3,), name="b")
        added = k.layers.Add()([a, b])
        out = k.layers.ReLU()(added)
        f = k.Function([a, b], [added, out], name="f")
        assert f.name == "f" and [x.name for x in f.inputs] == ["a", "b"]
        assert [type(o).__name__ for o in f.operations] == ["InputLayer", "InputLayer", "Add",
                                                             "ReLU"]  # fmt: skip
        specs = f.compute_output_spec([k.KerasTensor((None, 3)), k.KerasTensor((None, 3))])
        assert [s.shape for s in specs] == [(None, 3), (None, 3)]
        results.append([k.ops.convert_to_numpy(o) for o in f([a_val, b_val])])
        with pytest.raises(ValueError):
            k.Function([a], [out])
    for ours, theirs in zip(*results):
        np.testing.assert_allclose(ours, theirs)


def _scoped_paths(k):
    owner = object()
    with k.name_scope("outer"):
        dense = k.layers.Dense(2, name="d")
        dense.build((None, 3))
        with k.name_scope("inner"):
            inner = k.layers.Dense(2, name="e")
            inner.build((None, 3))
        with k.name_scope("block", caller=owner):
            with k.name_scope("block", caller=owner):  # the same caller: not reopened
                deduped = k.layers.Dense(1, name="g")
                deduped.build((None, 2))
        model = k.Sequential([k.Input((3,)), k.layers.Dense(2, name="f")], name="seq")
    after = k.layers.Dense(1, name="h")
    after.build((None, 1))
    return [dense.kernel.path, inner.kernel.path, inner.path, deduped.bias.path,
            after.kernel.path] + [w.path for w in model.weights]  # fmt: skip


def test_name_scope_matches_keras():
    keras = require("keras")
    ours = _scoped_paths(keratron)
    assert ours == _scoped_paths(keras)
    assert ours[3] == "outer/block/g/bias"
    with pytest.raises(ValueError, match="cannot contain character"):
        keratron.name_scope("a/b")
