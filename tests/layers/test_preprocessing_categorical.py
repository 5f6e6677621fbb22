"""CategoryEncoding and Discretization against Keras 3."""

import numpy as np
import pytest

import keratron
from tests.conftest import require

CATEGORIES = [np.array([3, 0, 1]), np.array([[3], [0]]), np.array([[1, 2, 2], [0, 3, 3]]), 2]


@pytest.mark.parametrize("mode", ["one_hot", "multi_hot", "count"])
@pytest.mark.parametrize("x", CATEGORIES, ids=range(len(CATEGORIES)))
def test_category_encoding_matches_keras(mode, x):
    keras = require("keras")
    ours = keratron.layers.CategoryEncoding(4, mode)
    theirs = keras.layers.CategoryEncoding(4, mode)
    got = np.asarray(ours(np.asarray(x)))
    want = keras.ops.convert_to_numpy(theirs(np.asarray(x)))
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    assert ours.compute_output_shape(np.shape(x)) == theirs.compute_output_shape(np.shape(x))
    assert ours.get_config()["output_mode"] == theirs.get_config()["output_mode"]


def test_category_encoding_count_weights_and_errors():
    keras = require("keras")
    x, w = np.array([[1, 2, 2], [0, 3, 3]]), np.array([[0.5, 1.0, 2.0], [1.0, 0.1, 0.2]], "float32")
    got = keratron.layers.CategoryEncoding(4, "count")(x, count_weights=w)
    want = keras.layers.CategoryEncoding(4, "count")(x, count_weights=w)
    np.testing.assert_allclose(np.asarray(got), keras.ops.convert_to_numpy(want), rtol=1e-6)
    with pytest.raises(ValueError, match="num_tokens"):
        keratron.layers.CategoryEncoding()
    with pytest.raises(ValueError, match="count_weights"):
        keratron.layers.CategoryEncoding(4, "one_hot")(x, count_weights=w)


@pytest.mark.parametrize("mode", ["int", "one_hot", "multi_hot", "count"])
def test_discretization_matches_keras(mode):
    keras = require("keras")
    x = np.array([[-1.0, 0.0, 0.5, 1.0, 2.0], [3.0, -0.5, 1.5, 0.9, 0.1]], "float32")
    got = np.asarray(keratron.layers.Discretization([0.0, 1.0, 1.5], output_mode=mode)(x))
    theirs = keras.layers.Discretization([0.0, 1.0, 1.5], output_mode=mode)
    want = keras.ops.convert_to_numpy(theirs(x))
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


def test_discretization_in_a_model_and_config_round_trip():
    layer = keratron.layers.Discretization([0.0, 1.0], output_mode="one_hot")
    clone = keratron.layers.Discretization.from_config(layer.get_config())
    x = np.array([[-1.0, 0.5, 2.0]], "float32")
    np.testing.assert_array_equal(np.asarray(clone(x)), np.asarray(layer(x)))
    inputs = keratron.Input((3,))
    model = keratron.Model(
        inputs, keratron.layers.Dense(2)(keratron.layers.Flatten()(layer(inputs)))
    )
    assert model.predict(x, verbose=0).shape == (1, 2)
    with pytest.raises(NotImplementedError, match="bin_boundaries"):
        keratron.layers.Discretization(num_bins=4)
