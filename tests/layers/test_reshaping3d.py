"""ZeroPadding3D, Cropping3D, UpSampling3D: layer-test helper, Keras parity, errors."""

import numpy as np
import pytest

import keratron as kt
from tests.conftest import require
from tests.layers.layer_test import assert_matches_keras, run_layer_test

L = kt.layers
R = np.random.default_rng(5)


@pytest.fixture(scope="module")
def keras():
    return require("keras")


CASES = [
    # (class name, init kwargs, input shape, expected output shape)
    ("ZeroPadding3D", {}, (2, 2, 3, 4, 2), (2, 4, 5, 6, 2)),
    ("ZeroPadding3D", {"padding": (1, 0, 2)}, (1, 2, 3, 4, 2), (1, 4, 3, 8, 2)),
    (
        "ZeroPadding3D",
        {"padding": ((1, 0), (0, 2), (3, 1)), "data_format": "channels_first"},
        (1, 2, 2, 3, 4),
        (1, 2, 3, 5, 8),
    ),
    ("Cropping3D", {}, (2, 4, 5, 6, 2), (2, 2, 3, 4, 2)),
    ("Cropping3D", {"cropping": ((0, 1), (2, 0), (1, 2))}, (1, 4, 5, 6, 2), (1, 3, 3, 3, 2)),
    (
        "Cropping3D",
        {"cropping": 1, "data_format": "channels_first"},
        (1, 2, 3, 4, 5),
        (1, 2, 1, 2, 3),
    ),
    ("UpSampling3D", {}, (2, 2, 3, 1, 2), (2, 4, 6, 2, 2)),
    ("UpSampling3D", {"size": (1, 2, 3)}, (1, 2, 2, 2, 3), (1, 2, 4, 6, 3)),
    (
        "UpSampling3D",
        {"size": 2, "data_format": "channels_first"},
        (1, 2, 1, 2, 3),
        (1, 2, 2, 4, 6),
    ),
]


@pytest.mark.parametrize("name,kwargs,in_shape,out_shape", CASES)
def test_layer(name, kwargs, in_shape, out_shape):
    layer = run_layer_test(
        getattr(L, name),
        kwargs,
        input_shape=in_shape,
        expected_output_shape=out_shape,
        expected_num_trainable_weights=0,
        expected_num_non_trainable_weights=0,
    )
    assert layer.compute_output_shape(in_shape) == out_shape
    assert tuple(layer.compute_output_shape((None,) + in_shape[1:])) == (None,) + out_shape[1:]


@pytest.mark.parametrize("name,kwargs,in_shape,out_shape", CASES)
def test_matches_keras(keras, name, kwargs, in_shape, out_shape):
    x = R.standard_normal(in_shape).astype("float32")
    o_layer, k_layer = assert_matches_keras(name, kwargs, x, atol=0)
    assert o_layer.get_config().keys() == k_layer.get_config().keys()
    for key, value in k_layer.get_config().items():
        if key not in ("name", "dtype"):
            assert o_layer.get_config()[key] == value, key


def test_gradient_of_padding_and_upsampling():
    x = kt.ops.convert_to_tensor(R.standard_normal((1, 2, 2, 2, 1)).astype("float32"))
    with kt.GradientTape() as tape:
        tape.watch(x)
        y = L.UpSampling3D((2, 1, 3))(L.ZeroPadding3D(1)(x))
        loss = kt.ops.sum(y)
    # Each input voxel is repeated 2 * 1 * 3 = 6 times; padding adds no gradient.
    np.testing.assert_array_equal(tape.gradient(loss, x).numpy(), np.full((1, 2, 2, 2, 1), 6.0))


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda: L.ZeroPadding3D((1, 2)), "padding"),
        (lambda: L.ZeroPadding3D(-1), "padding"),
        (lambda: L.Cropping3D(((1, 1), (1, 1), "a")), "cropping"),
        (lambda: L.UpSampling3D(0), "size"),
    ],
)
def test_bad_arguments(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_cropping_too_large():
    with pytest.raises(ValueError, match="cropping"):
        L.Cropping3D(2)(np.ones((1, 4, 5, 6, 1), "float32"))
    with pytest.raises(ValueError, match="Input 0 of layer"):
        L.Cropping3D(1)(np.ones((1, 4, 5, 6), "float32"))
