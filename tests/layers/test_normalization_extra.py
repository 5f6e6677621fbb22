"""UnitNormalization, RMSNormalization, SpectralNormalization: layer-test helper, Keras parity
(outputs, gradients, one training step), errors."""

import numpy as np
import pytest

import keratron as kt
from tests.conftest import require
from tests.layers.layer_test import assert_matches_keras, run_layer_test

L = kt.layers
R = np.random.default_rng(7)


@pytest.fixture(scope="module")
def keras():
    return require("keras")


def x32(*shape):
    return R.standard_normal(shape).astype("float32")


def _same_config(o_layer, k_layer, skip=("name", "dtype")):
    k_config, o_config = k_layer.get_config(), o_layer.get_config()
    assert o_config.keys() == k_config.keys()
    for key, value in k_config.items():
        if key not in skip:
            assert o_config[key] == value, key


@pytest.mark.parametrize("axis", [-1, 1, (1, 2)])
def test_unit_normalization(keras, axis):
    run_layer_test(
        L.UnitNormalization,
        {"axis": axis},
        input_shape=(2, 3, 4),
        expected_output_shape=(2, 3, 4),
        expected_num_trainable_weights=0,
        supports_masking=True,
    )
    x = x32(2, 3, 4)
    x[0, 0] = 0.0  # a zero vector stays zero (the norm is at least 1e-12)
    o_layer, k_layer = assert_matches_keras("UnitNormalization", {"axis": axis}, x)
    _same_config(o_layer, k_layer)


@pytest.mark.parametrize("kwargs", [{}, {"axis": 1, "epsilon": 1e-3}, {"axis": [2, 1]}])
def test_rms_normalization(keras, kwargs):
    run_layer_test(
        L.RMSNormalization,
        kwargs,
        input_shape=(2, 3, 4),
        expected_output_shape=(2, 3, 4),
        expected_num_trainable_weights=1,
    )
    x = x32(2, 3, 4)
    if kwargs.get("axis", -1) == 1:
        # Keras's torch backend hands this case to torch.rms_norm, which normalizes trailing
        # axes only and raises; the expected value is the formula, in numpy.
        layer = L.RMSNormalization(**kwargs)
        layer(x)
        scale = R.uniform(0.5, 1.5, (3,)).astype("float32")
        layer.set_weights([scale])
        want = x / np.sqrt(np.mean(x**2, axis=1, keepdims=True) + 1e-3) * scale[:, None]
        np.testing.assert_allclose(layer(x).numpy(), want, rtol=1e-5, atol=1e-6)
        return
    o_layer, k_layer = assert_matches_keras("RMSNormalization", kwargs, x)
    _same_config(o_layer, k_layer)
    assert [w.path.split("/")[-1] for w in k_layer.weights] == ["scale"]
    assert [w.path.split("/")[-1] for w in o_layer.weights] == ["scale"]


def test_rms_normalization_gradients_match_keras(keras):
    import torch

    x = x32(3, 5)
    scale = R.uniform(0.5, 1.5, 5).astype("float32")
    k_layer, o_layer = keras.layers.RMSNormalization(), L.RMSNormalization()
    k_layer.build((3, 5))
    k_layer.set_weights([scale])
    o_layer.build((3, 5))
    o_layer.set_weights([scale])
    xt = torch.tensor(x, requires_grad=True)
    keras_out = k_layer(xt)
    (keras_out**2).sum().backward()
    k_grads = [xt.grad.numpy(), k_layer.scale.value.grad.numpy()]
    xo = kt.ops.convert_to_tensor(x)
    with kt.GradientTape() as tape:
        tape.watch(xo)
        loss = kt.ops.sum(kt.ops.square(o_layer(xo)))
    o_grads = tape.gradient(loss, [xo, o_layer.scale])
    for o, k in zip(o_grads, k_grads):
        np.testing.assert_allclose(o.numpy(), k, rtol=1e-5, atol=1e-5)


def test_spectral_normalization_layer():
    run_layer_test(
        L.SpectralNormalization,
        {"layer": L.Dense(3)},
        input_shape=(2, 4),
        expected_output_shape=(2, 3),
        expected_num_trainable_weights=2,
        expected_num_non_trainable_weights=1,
    )


@pytest.mark.parametrize(
    "make, in_shape",
    [
        (lambda m: m.layers.Dense(3), (2, 4)),
        (lambda m: m.layers.Conv2D(3, 2), (2, 5, 5, 2)),
        (lambda m: m.layers.Embedding(6, 3), None),
    ],
)
def test_spectral_normalization_matches_keras(keras, make, in_shape):
    x = R.integers(0, 6, (2, 4)) if in_shape is None else x32(*in_shape)
    k_layer = keras.layers.SpectralNormalization(make(keras), power_iterations=2)
    o_layer = L.SpectralNormalization(make(kt), power_iterations=2)
    k_layer(x)
    o_layer(x)
    weights = [w + R.uniform(0.1, 0.5, w.shape).astype("float32") for w in k_layer.get_weights()]
    k_layer.set_weights(weights)
    o_layer.set_weights(weights)
    assert [tuple(w.shape) for w in o_layer.weights] == [w.shape for w in weights]
    for training in (False, True, True):  # two training calls: vector_u carries over
        want = keras.ops.convert_to_numpy(k_layer(x, training=training))
        np.testing.assert_allclose(o_layer(x, training=training).numpy(), want, atol=1e-5)
        for o, k in zip(o_layer.get_weights(), k_layer.get_weights()):
            np.testing.assert_allclose(o, k, atol=1e-5)
    # After a training call the kernel's largest singular value is close to 1.
    kernel = o_layer.kernel.numpy().reshape(-1, o_layer.kernel.shape[-1])
    assert abs(np.linalg.svd(kernel, compute_uv=False)[0] - 1.0) < 0.3
    _same_config(o_layer, k_layer, skip=("name", "dtype", "layer"))
    assert (
        o_layer.get_config()["layer"]["class_name"] == k_layer.get_config()["layer"]["class_name"]
    )
    clone = L.SpectralNormalization.from_config(o_layer.get_config())
    assert clone.power_iterations == 2 and type(clone.layer) is type(o_layer.layer)


def test_spectral_normalization_zero_kernel_is_kept():
    layer = L.SpectralNormalization(L.Dense(2, kernel_initializer="zeros"))
    layer(x32(3, 4), training=True)
    assert not np.isnan(layer.get_weights()[0]).any()
    np.testing.assert_array_equal(layer.layer.kernel.numpy(), 0.0)


def test_errors():
    with pytest.raises(TypeError, match="axis"):
        L.UnitNormalization(axis="a")
    with pytest.raises(ValueError, match="epsilon"):
        L.RMSNormalization(epsilon=-1.0)
    with pytest.raises(ValueError, match="out of bounds"):
        L.RMSNormalization(axis=3)(x32(2, 3))
    with pytest.raises(ValueError, match="power_iterations"):
        L.SpectralNormalization(L.Dense(2), power_iterations=0)
    with pytest.raises(ValueError, match="kernel"):
        L.SpectralNormalization(L.Flatten())(x32(2, 3))
