"""Activation layers: ReLU, LeakyReLU, PReLU, ELU, Softmax through the layer-test helper,
against real Keras, and their argument errors and masks."""

import warnings

import numpy as np
import pytest

import keratron as kt
import keratron.layers  # noqa: F401
from tests.conftest import require
from tests.layers.layer_test import assert_matches_keras, run_layer_test

L = kt.layers
R = np.random.default_rng(3)


def x32(*shape):
    # Spread around the thresholds and caps used below.
    return (R.standard_normal(shape) * 3).astype("float32")


@pytest.fixture(scope="module")
def keras():
    return require("keras")


CASES = [
    ("ReLU", {}),
    ("ReLU", {"max_value": 1.5}),
    ("ReLU", {"negative_slope": 0.2}),
    ("ReLU", {"threshold": 0.5}),
    ("ReLU", {"max_value": 6.0, "negative_slope": 0.1, "threshold": 1.0}),
    ("LeakyReLU", {}),
    ("LeakyReLU", {"negative_slope": 0.05}),
    ("ELU", {}),
    ("ELU", {"alpha": 0.5}),
    ("Softmax", {}),
    ("Softmax", {"axis": 1}),
    ("Softmax", {"axis": (1, 2)}),
]


@pytest.mark.parametrize("name,kwargs", CASES)
def test_layer(keras, name, kwargs):
    run_layer_test(
        getattr(L, name),
        kwargs,
        input_shape=(2, 3, 4),
        expected_output_shape=(2, 3, 4),
        expected_num_trainable_weights=0,
        supports_masking=True,
    )
    assert_matches_keras(name, kwargs, x32(2, 3, 4))


def test_leaky_relu_default_and_alpha():
    assert L.LeakyReLU().negative_slope == 0.3
    with pytest.warns(DeprecationWarning, match="alpha"):
        layer = L.LeakyReLU(alpha=0.1)
    assert layer.negative_slope == 0.1
    np.testing.assert_allclose(layer(np.array([[-2.0, 3.0]], "float32")).numpy(), [[-0.2, 3.0]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        L.LeakyReLU(negative_slope=0.1)


@pytest.mark.parametrize(
    "kwargs,arg",
    [
        ({"max_value": -1.0}, "max_value"),
        ({"negative_slope": -0.1}, "negative_slope"),
        ({"threshold": None}, "threshold"),
    ],
)
def test_relu_errors(kwargs, arg):
    with pytest.raises(ValueError, match=f"ReLU.*{arg}"):
        L.ReLU(**kwargs)


def test_leaky_relu_error():
    with pytest.raises(ValueError, match="LeakyReLU.*negative_slope"):
        L.LeakyReLU(-0.5)


@pytest.mark.parametrize(
    "kwargs,in_shape,w_shape",
    [
        # alpha = 0 (the default) is a stationary point of the helper's mean(out**2) loss,
        # so the training-step check needs another starting alpha.
        ({"alpha_initializer": "ones"}, (2, 3, 4), (3, 4)),
        ({"shared_axes": [1], "alpha_initializer": "ones"}, (2, 3, 4), (1, 4)),
        ({"shared_axes": [1, 2], "alpha_initializer": "ones"}, (2, 5, 5, 3), (1, 1, 3)),
        ({"alpha_initializer": "random_uniform", "shared_axes": 2}, (2, 3, 4), (3, 1)),
    ],
)
def test_prelu(keras, kwargs, in_shape, w_shape):
    layer = run_layer_test(
        L.PReLU,
        kwargs,
        input_shape=in_shape,
        expected_output_shape=in_shape,
        expected_num_trainable_weights=1,
        expected_weight_shapes=[w_shape],
    )
    assert layer.weights[0].name == "alpha"
    assert_matches_keras("PReLU", kwargs, x32(*in_shape))


def test_prelu_default(keras):
    layer = run_layer_test(
        L.PReLU, {}, input_shape=(2, 3), expected_weight_shapes=[(3,)], run_training_check=False
    )
    assert (layer.weights[0].numpy() == 0).all()
    assert layer.get_config()["alpha_initializer"]["class_name"] == "Zeros"
    assert_matches_keras("PReLU", {}, x32(2, 3))


def test_prelu_values_and_errors():
    layer = L.PReLU(alpha_initializer="ones")
    x = np.array([[-2.0, 3.0]], "float32")
    layer(x)
    layer.set_weights([np.array([0.25, 0.5], "float32")])
    np.testing.assert_allclose(layer(x).numpy(), [[-0.5, 3.0]])
    with pytest.raises(ValueError, match="PReLU.*shared_axes"):
        L.PReLU(shared_axes=[0])
    with pytest.raises(ValueError, match="shared axis 3"):
        L.PReLU(shared_axes=[3])(np.ones((1, 2), "float32"))


def test_softmax_values():
    x = x32(2, 5)
    np.testing.assert_allclose(
        L.Softmax()(x).numpy(), np.exp(x) / np.exp(x).sum(-1, keepdims=True), rtol=1e-5
    )


@pytest.mark.parametrize("mask_shape", [(2, 3, 4), (3, 4), (2, 1, 4)])
def test_softmax_mask_matches_keras(keras, mask_shape):
    x = x32(2, 3, 4)
    mask = R.random(mask_shape) > 0.3
    ours = L.Softmax()(x, mask=mask).numpy()
    theirs = keras.ops.convert_to_numpy(keras.layers.Softmax()(x, mask=mask))
    np.testing.assert_allclose(ours, theirs, atol=1e-6)
    assert (ours[np.broadcast_to(~mask, x.shape)] == 0).all()


def test_softmax_float_mask_and_mask_errors(keras):
    x = x32(2, 4)
    fmask = np.array([[1.0, 0.0, 1.0, 1.0], [0.0, 1.0, 1.0, 0.0]], "float32")
    np.testing.assert_allclose(
        L.Softmax()(x, mask=fmask).numpy(),
        keras.ops.convert_to_numpy(keras.layers.Softmax()(x, mask=fmask)),
        atol=1e-6,
    )
    with pytest.raises(ValueError, match="Softmax.*broadcast"):
        L.Softmax()(x, mask=np.ones((2, 3), bool))


def test_softmax_gets_mask_from_previous_layer(keras):
    # The (batch, steps) mask of an embedding is passed to Softmax's `mask` argument and
    # broadcast from the right, as Keras does; with batch == steps == output_dim it fits.
    ids = np.array([[1, 2, 0], [3, 0, 0], [2, 1, 3]])
    w = R.standard_normal((4, 3)).astype("float32")
    out = L.Softmax()(L.Embedding(4, 3, mask_zero=True, weights=[w])(ids)).numpy()
    k_emb = keras.layers.Embedding(4, 3, mask_zero=True, weights=[w])
    ref = keras.ops.convert_to_numpy(keras.layers.Softmax()(k_emb(ids), mask=ids != 0))
    np.testing.assert_allclose(out, ref, atol=1e-6)
    assert (out[np.broadcast_to(ids == 0, out.shape)] == 0).all()


@pytest.mark.parametrize("theta", [1.0, 0.0, 2.5])
def test_thresholded_relu_layer_test_and_tf_keras_values(theta):
    run_layer_test(
        L.ThresholdedReLU,
        {"theta": theta},
        input_shape=(2, 3, 4),
        expected_output_shape=(2, 3, 4),
        expected_num_trainable_weights=0,
        supports_masking=True,
    )
    keras2 = require("tf_keras")
    x = x32(4, 5)
    want = keras2.layers.ThresholdedReLU(theta)(x).numpy()
    np.testing.assert_array_equal(L.ThresholdedReLU(theta)(x).numpy(), want)
    config = keras2.layers.ThresholdedReLU(theta).get_config()
    assert L.ThresholdedReLU.from_config(config).theta == config["theta"]


@pytest.mark.parametrize("theta", [-1.0, None, "1"])
def test_thresholded_relu_rejects_a_bad_theta(theta):
    with pytest.raises(ValueError, match="theta"):
        L.ThresholdedReLU(theta)
