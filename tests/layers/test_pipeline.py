"""Pipeline: layer-test helper, Keras parity (outputs, training flag, masks, configs both
ways), errors."""

import numpy as np
import pytest

import keratron as kt
from tests.conftest import require
from tests.layers.layer_test import run_layer_test

L = kt.layers
R = np.random.default_rng(29)


@pytest.fixture(scope="module")
def keras():
    return require("keras")


def _make(m):
    return [m.layers.Rescaling(0.5, offset=1.0), m.layers.Dense(3), m.layers.Activation("tanh")]


def test_layer():
    run_layer_test(
        L.Pipeline,
        {"layers": _make(kt)},
        input_shape=(2, 4),
        expected_output_shape=(2, 3),
        expected_num_trainable_weights=2,
    )


def test_matches_keras(keras):
    x = R.standard_normal((3, 4)).astype("float32")
    k_pipe, o_pipe = keras.layers.Pipeline(_make(keras)), L.Pipeline(_make(kt))
    k_pipe(x)
    o_pipe(x)
    o_pipe.set_weights(k_pipe.get_weights())
    want = keras.ops.convert_to_numpy(k_pipe(x))
    np.testing.assert_allclose(o_pipe(x).numpy(), want, atol=1e-6)
    # Keras's config rebuilds a keratron pipeline, and keratron's a Keras one.
    from_keras = L.Pipeline.from_config(k_pipe.get_config())
    assert [type(x).__name__ for x in from_keras.layers] == ["Rescaling", "Dense", "Activation"]
    from_ours = keras.layers.Pipeline.from_config(o_pipe.get_config())
    assert [type(x).__name__ for x in from_ours.layers] == ["Rescaling", "Dense", "Activation"]
    assert o_pipe.get_config().keys() == k_pipe.get_config().keys()


def test_training_defaults_to_true():
    x = np.ones((64, 8), "float32")
    pipe = L.Pipeline([L.Dropout(0.5, seed=1), L.Rescaling(2.0)])
    assert (pipe(x).numpy() == 0).any()  # training=True by default, as in Keras
    np.testing.assert_array_equal(pipe(x, training=False).numpy(), 2 * x)
    # Inside a model run in inference, the model's training flag wins.
    inp = kt.layers.Input((8,))
    model = kt.Model(inp, pipe(inp, training=None))
    np.testing.assert_array_equal(model.predict(x, verbose=0), 2 * x)


def test_masks_pass_from_layer_to_layer():
    tokens = np.array([[3, 1, 0], [2, 0, 0]])
    pipe = L.Pipeline([L.Embedding(5, 2, mask_zero=True), L.LSTM(3, return_sequences=True)])
    out = pipe(tokens)
    np.testing.assert_array_equal(out._keras_mask.numpy(), tokens != 0)


def test_errors():
    with pytest.raises(ValueError, match="layers"):
        L.Pipeline(L.Dense(2))
    with pytest.raises(ValueError, match="layers"):
        L.Pipeline.from_config({"name": "p"})
