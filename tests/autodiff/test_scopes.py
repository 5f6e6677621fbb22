"""StatelessScope and SymbolicScope, against Keras 3's behaviour."""

import numpy as np
import pytest

import keratron as kt
from keratron.autodiff.scopes import (
    get_stateless_scope,
    get_symbolic_scope,
    in_stateless_scope,
    in_symbolic_scope,
)
from tests.conftest import require

ops = kt.ops


def _stateless_story(keras, ops):
    """What a script sees of variables around a StatelessScope (run on Keras and keratron)."""
    v = keras.Variable([1.0, 2.0])
    u = keras.Variable([3.0, 4.0])
    untouched = keras.Variable([0.5])
    opt = keras.optimizers.SGD(0.1, momentum=0.9)
    opt.build([v])
    seen = {}
    with keras.StatelessScope(state_mapping=[(v, np.array([5.0, 5.0]))]) as scope:
        seen["read_op"] = np.asarray(ops.add(v, 0.0))
        seen["read_numpy"] = v.numpy()
        v.assign_add([1.0, 1.0])
        u.assign([7.0, 7.0])
        seen["after_assign"] = (v.numpy(), u.numpy())
        opt.apply([ops.convert_to_tensor([1.0, 2.0])], [v])
        seen["after_apply"] = v.numpy()
    seen["outside"] = (v.numpy(), u.numpy(), int(opt.iterations.numpy()))
    seen["current"] = tuple(np.asarray(scope.get_current_value(x)) for x in (v, u, opt.iterations))
    seen["untouched"] = scope.get_current_value(untouched)
    return seen


@pytest.mark.interop
def test_stateless_scope_matches_keras():
    keras = require("keras")
    if keras.backend.backend() != "torch":
        pytest.skip("needs Keras's torch backend")
    expected = _stateless_story(keras, keras.ops)
    got = _stateless_story(kt, kt.ops)
    assert expected.keys() == got.keys()
    for key in expected:
        if expected[key] is None:
            assert got[key] is None
            continue
        want = expected[key] if isinstance(expected[key], tuple) else (expected[key],)
        have = got[key] if isinstance(got[key], tuple) else (got[key],)
        assert len(want) == len(have)
        for a, b in zip(want, have):
            np.testing.assert_allclose(np.asarray(b, "float64"), np.asarray(a, "float64"))


def test_stateless_scope_values():
    # Expected values as Keras 3.15 (torch backend) gives them.
    seen = _stateless_story(kt, kt.ops)
    np.testing.assert_array_equal(seen["read_op"], [5.0, 5.0])
    np.testing.assert_array_equal(seen["after_assign"][0], [6.0, 6.0])
    np.testing.assert_allclose(seen["after_apply"], [5.9, 5.8], rtol=1e-6)
    np.testing.assert_array_equal(seen["outside"][0], [1.0, 2.0])
    np.testing.assert_array_equal(seen["outside"][1], [3.0, 4.0])
    assert seen["outside"][2] == 0
    np.testing.assert_allclose(seen["current"][0], [5.9, 5.8], rtol=1e-6)
    np.testing.assert_array_equal(seen["current"][1], [7.0, 7.0])
    assert int(seen["current"][2]) == 1
    assert seen["untouched"] is None


def test_stateless_scope_mapping_errors():
    v = kt.Variable([1.0, 2.0])
    with pytest.raises(ValueError, match="must be tensors with a shape that matches"):
        kt.StatelessScope(state_mapping=[(v, np.zeros(3))])
    with pytest.raises(ValueError, match="must be Variable instances"):
        kt.StatelessScope(state_mapping=[(np.zeros(2), np.zeros(2))])


def test_stateless_scope_mapped_gradients_and_layer_call():
    layer = kt.layers.Dense(2, kernel_initializer="ones", bias_initializer="zeros")
    x = np.array([[1.0, 2.0]], "float32")
    layer(x)
    mapping = [(layer.kernel, np.full((2, 2), 3.0)), (layer.bias, np.array([1.0, -1.0]))]
    with kt.StatelessScope(state_mapping=mapping):
        with kt.GradientTape() as tape:
            y = ops.sum(layer(x) ** 2)
        gk = tape.gradient(y, layer.kernel)
    np.testing.assert_allclose(float(y), 10.0**2 + 8.0**2)
    np.testing.assert_allclose(gk.numpy(), [[20.0, 16.0], [40.0, 32.0]])
    np.testing.assert_array_equal(layer.kernel.numpy(), np.ones((2, 2)))


def test_stateless_scope_state_and_nesting_flags():
    assert not in_stateless_scope()
    with kt.StatelessScope() as outer:
        assert get_stateless_scope() is outer
        with kt.StatelessScope() as inner:
            assert get_stateless_scope() is inner
        assert get_stateless_scope() is outer
    assert get_stateless_scope() is None


def test_stateless_scope_refused_inside_function_trace():
    @kt.function
    def f(x):
        with kt.StatelessScope():
            return x + 1.0

    with pytest.raises(RuntimeError, match="StatelessScope cannot be entered"):
        f(np.ones(2, "float32"))


def test_symbolic_scope_nesting():
    assert not in_symbolic_scope()
    with kt.SymbolicScope() as outer:
        assert in_symbolic_scope() and get_symbolic_scope() is outer
        with kt.SymbolicScope() as inner:
            assert get_symbolic_scope() is inner
        assert get_symbolic_scope() is outer
    assert not in_symbolic_scope()
