"""ActivityRegularization, AlphaDropout, SpatialDropout3D and `orthogonal_regularizer`:
layer-test helper, Keras parity, dropout statistics, errors."""

import numpy as np
import pytest

import keratron as kt
from tests.conftest import require
from tests.layers.layer_test import run_layer_test

L = kt.layers
R = np.random.default_rng(3)


@pytest.fixture(scope="module")
def keras():
    return require("keras")


def x32(*shape):
    return R.standard_normal(shape).astype("float32")


def _same_config(o_layer, k_layer):
    k_config, o_config = k_layer.get_config(), o_layer.get_config()
    assert o_config.keys() == k_config.keys()
    for key, value in k_config.items():
        if key not in ("name", "dtype"):
            assert o_config[key] == value, key


@pytest.mark.parametrize(
    "name,kwargs,in_shape",
    [
        ("ActivityRegularization", {"l1": 0.1, "l2": 0.2}, (3, 4)),
        ("AlphaDropout", {"rate": 0.3, "seed": 1}, (3, 4)),
        ("AlphaDropout", {"rate": 0.3, "noise_shape": (None, 1)}, (3, 4)),
        ("SpatialDropout3D", {"rate": 0.5}, (2, 2, 3, 2, 4)),
        ("SpatialDropout3D", {"rate": 0.5, "data_format": "channels_first"}, (2, 4, 2, 3, 2)),
    ],
)
def test_layer(name, kwargs, in_shape):
    for training in (None,) if name == "ActivityRegularization" else (False, True):
        run_layer_test(
            getattr(L, name),
            kwargs,
            input_shape=in_shape,
            expected_output_shape=in_shape,
            expected_num_trainable_weights=0,
            expected_num_non_trainable_weights=0,
            supports_masking=True,
            training=training,
        )


@pytest.mark.parametrize(
    "name,kwargs,in_shape",
    [
        ("ActivityRegularization", {"l1": 0.1, "l2": 0.2}, (3, 4)),
        ("AlphaDropout", {"rate": 0.3, "seed": 1, "noise_shape": (None, 1)}, (3, 4)),
        ("SpatialDropout3D", {"rate": 0.5, "data_format": "channels_first"}, (2, 4, 2, 3, 2)),
    ],
)
def test_config_and_inference_match_keras(keras, name, kwargs, in_shape):
    x = x32(*in_shape)
    k_layer, o_layer = getattr(keras.layers, name)(**kwargs), getattr(L, name)(**kwargs)
    np.testing.assert_array_equal(o_layer(x).numpy(), keras.ops.convert_to_numpy(k_layer(x)))
    _same_config(o_layer, k_layer)


def test_activity_regularization_loss_matches_keras(keras):
    x = x32(5, 3)
    k_layer = keras.layers.ActivityRegularization(l1=0.1, l2=0.2)
    k_layer(x)
    layer = L.ActivityRegularization(l1=0.1, l2=0.2)
    layer(x)
    assert len(layer.losses) == len(k_layer.losses) == 1
    k_loss = float(keras.ops.convert_to_numpy(k_layer.losses[0]))
    np.testing.assert_allclose(float(layer.losses[0]), k_loss, rtol=1e-6)
    # The loss reaches a model's total loss and its gradient reaches the input.
    inputs = kt.ops.convert_to_tensor(x)
    with kt.GradientTape() as tape:
        tape.watch(inputs)
        layer(inputs)
        loss = layer.losses[0]
    want = (0.1 * np.sign(x) + 0.4 * x) / 5
    np.testing.assert_allclose(tape.gradient(loss, inputs).numpy(), want, rtol=1e-5, atol=1e-7)


def test_alpha_dropout_training_values_and_statistics():
    rate = 0.2
    alpha_p = -1.6732632423543772 * 1.0507009873554805
    a = ((1 - rate) * (1 + rate * alpha_p**2)) ** -0.5
    b = -a * alpha_p * rate
    x = x32(200, 100)
    y = L.AlphaDropout(rate, seed=0)(x, training=True).numpy()
    dropped = np.isclose(y, a * alpha_p + b, atol=1e-6)
    np.testing.assert_allclose(y[~dropped], a * x[~dropped] + b, rtol=1e-5, atol=1e-5)
    assert abs(dropped.mean() - rate) < 0.02
    # Zero-mean, unit-variance inputs keep their mean and variance (the layer's purpose).
    assert abs(y.mean()) < 0.03 and abs(y.var() - 1.0) < 0.03
    # noise_shape shares the mask: with (None, 1) each row is all dropped or all kept.
    a = (0.5 * (1 + 0.5 * alpha_p**2)) ** -0.5
    b = -a * alpha_p * 0.5
    y = L.AlphaDropout(0.5, noise_shape=(None, 1), seed=0)(x[:40], training=True).numpy()
    all_dropped = np.isclose(y, a * alpha_p + b, atol=1e-6).all(axis=1)
    all_kept = np.isclose(y, a * x[:40] + b, atol=1e-5).all(axis=1)
    assert np.all(all_dropped ^ all_kept) and 0 < all_dropped.sum() < 40


def test_spatial_dropout3d_drops_whole_volumes():
    x = np.ones((4, 2, 3, 2, 6), "float32")
    y = L.SpatialDropout3D(0.5, seed=0)(x, training=True).numpy()
    per_channel = y.reshape(4, -1, 6)
    assert np.all(per_channel == per_channel[:, :1, :])
    assert set(np.unique(y)) <= {0.0, 2.0} and 0 < (y == 0).mean() < 1


def test_orthogonal_regularizer_matches_keras(keras):
    w = x32(5, 3)
    w[2] = 0.0  # a zero row (normalisation must not divide by zero)
    for mode in ("rows", "columns"):
        ours = kt.regularizers.orthogonal_regularizer(factor=0.3, mode=mode)
        theirs = keras.regularizers.orthogonal_regularizer(factor=0.3, mode=mode)
        want = float(keras.ops.convert_to_numpy(theirs(keras.ops.convert_to_tensor(w))))
        np.testing.assert_allclose(float(ours(kt.ops.convert_to_tensor(w))), want, rtol=1e-5)
        assert ours.get_config()["mode"] == theirs.get_config()["mode"]
        np.testing.assert_allclose(ours.get_config()["factor"], theirs.get_config()["factor"])
    assert isinstance(kt.regularizers.get("orthogonal_regularizer"), type(ours))


def test_orthogonal_regularizer_gradient():
    from tests.gradcheck import check_grads

    reg = kt.regularizers.OrthogonalRegularizer(factor=0.5, mode="columns")
    check_grads(lambda w: reg(w), [x32(4, 3).astype("float64")])


@pytest.mark.parametrize(
    "make",
    [
        lambda: L.ActivityRegularization(l1=-1.0),
        lambda: L.AlphaDropout(1.5),
        lambda: L.SpatialDropout3D(-0.1),
    ],
)
def test_bad_arguments(make):
    with pytest.raises(ValueError):
        make()


def test_spatial_dropout3d_rank():
    with pytest.raises(ValueError, match="Input 0 of layer"):
        L.SpatialDropout3D(0.5)(np.ones((2, 3, 4, 5), "float32"), training=True)
