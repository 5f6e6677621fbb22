"""The activations Keras 3.15 added (celu, glu, sparsemax, ...) against real Keras, with
gradient checks for the smooth ones."""

import numpy as np
import pytest

import keratron as kt
from tests.conftest import require
from tests.gradcheck import check_grads

X = np.concatenate([np.linspace(-3.0, 3.0, 25), [-1.0, -0.5, 0.5, 1.0]]).astype("float32")
X2 = np.random.default_rng(0).standard_normal((3, 6)).astype("float32") * 2

# (name, input, kwargs)
ROWS = [
    ("celu", X, {}),
    ("celu", X, {"alpha": 0.5}),
    ("glu", X2, {}),
    ("glu", X2.T, {"axis": 0}),
    ("hard_shrink", X, {}),
    ("hard_shrink", X, {"threshold": 1.2}),
    ("hard_tanh", X, {}),
    ("soft_shrink", X, {}),
    ("soft_shrink", X, {"threshold": 1.2}),
    ("sparse_plus", X, {}),
    ("sparse_sigmoid", X, {}),
    ("squareplus", X, {}),
    ("squareplus", X, {"b": 1.0}),
    ("tanh_shrink", X, {}),
    ("threshold", X, {"threshold": 0.3, "default_value": -2.0}),
]


@pytest.mark.interop
@pytest.mark.parametrize("name,x,kwargs", ROWS, ids=[f"{r[0]}-{i}" for i, r in enumerate(ROWS)])
def test_matches_keras(name, x, kwargs):
    keras = require("keras")
    expected = keras.ops.convert_to_numpy(getattr(keras.activations, name)(x, **kwargs))
    got = getattr(kt.activations, name)(kt.ops.convert_to_tensor(x), **kwargs)
    np.testing.assert_allclose(kt.ops.convert_to_numpy(got), expected, rtol=1e-6, atol=1e-6)


def _sparsemax_reference(z, axis):
    """Martins & Astudillo (2016), Algorithm 1, row by row."""
    z = np.moveaxis(np.asarray(z, np.float64), axis, -1)
    out = np.empty_like(z)
    for idx in np.ndindex(z.shape[:-1]):
        row = z[idx]
        s = np.sort(row)[::-1]
        k = np.arange(1, row.size + 1)
        support = 1 + k * s > np.cumsum(s)
        kz = k[support][-1]
        tau = (np.cumsum(s)[kz - 1] - 1) / kz
        out[idx] = np.maximum(row - tau, 0)
    return np.moveaxis(out, -1, axis)


@pytest.mark.parametrize("axis", [-1, 0])
def test_sparsemax_is_the_simplex_projection(axis):
    # Keras 3.15's torch and numpy backends compute tau as (sum of the cumulative sums over
    # the support - 1) / k rather than (cumsum at k - 1) / k, so their rows do not sum to 1
    # once the support holds two or more entries; we follow the published algorithm.
    got = kt.ops.convert_to_numpy(kt.activations.sparsemax(X2, axis=axis))
    np.testing.assert_allclose(got, _sparsemax_reference(X2, axis), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got.sum(axis=axis), 1.0, rtol=1e-5)


@pytest.mark.interop
def test_sparsemax_matches_keras_when_support_is_one_entry():
    keras = require("keras")
    x = np.array([[3.0, 0.1, -1.0], [0.0, 2.5, 0.2]], "float32")
    expected = keras.ops.convert_to_numpy(keras.activations.sparsemax(x))
    got = kt.ops.convert_to_numpy(kt.activations.sparsemax(x))
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6)


def test_names_are_exported():
    for name in [r[0] for r in ROWS] + ["sparsemax"]:
        assert name in kt.activations.__all__
        assert callable(getattr(kt.activations, name))


SMOOTH = [
    ("celu", lambda x: kt.activations.celu(x, alpha=0.7), (7,)),
    ("glu", lambda x: kt.activations.glu(x, axis=-1), (3, 4)),
    ("squareplus", lambda x: kt.activations.squareplus(x, b=2.0), (7,)),
    ("tanh_shrink", kt.activations.tanh_shrink, (7,)),
]


@pytest.mark.parametrize("name,fn,shape", SMOOTH, ids=[r[0] for r in SMOOTH])
def test_gradients(name, fn, shape):
    x = np.random.default_rng(1).standard_normal(shape) * 1.5
    check_grads(fn, [x])


def test_piecewise_gradients_inside_pieces():
    # Away from the kinks the piecewise functions have closed-form slopes.
    x = kt.ops.convert_to_tensor(np.array([-2.0, -0.7, 0.3, 0.8, 2.0]))
    with kt.autodiff.tape.GradientTape() as tape:
        tape.watch(x)
        y = kt.ops.sum(kt.activations.soft_shrink(x) + kt.activations.sparse_plus(x))
    g = kt.ops.convert_to_numpy(tape.gradient(y, x))
    expected = np.array([1.0, 1.0, 0.0, 1.0, 1.0]) + np.array([0.0, 0.15, 0.65, 0.9, 1.0])
    np.testing.assert_allclose(g, expected, rtol=1e-6)
