"""Adaptive average and max pooling layers: layer-test helper, Keras parity, gradients."""

import numpy as np
import pytest

import keratron as kt
from tests.conftest import require
from tests.layers.layer_test import assert_matches_keras, run_layer_test

L = kt.layers
R = np.random.default_rng(9)


@pytest.fixture(scope="module")
def keras():
    return require("keras")


CASES = [
    # (rank, init kwargs, input shape, expected output shape)
    (1, {"output_size": 3}, (2, 7, 4), (2, 3, 4)),
    (1, {"output_size": (4,), "data_format": "channels_first"}, (2, 3, 9), (2, 3, 4)),
    (2, {"output_size": (2, 3)}, (2, 7, 5, 3), (2, 2, 3, 3)),
    (2, {"output_size": 4, "data_format": "channels_first"}, (1, 2, 5, 9), (1, 2, 4, 4)),
    (3, {"output_size": 2}, (1, 5, 4, 3, 2), (1, 2, 2, 2, 2)),
    (
        3,
        {"output_size": (3, 1, 2), "data_format": "channels_first"},
        (1, 2, 7, 3, 5),
        (1, 2, 3, 1, 2),
    ),
]


@pytest.mark.parametrize("kind", ["Average", "Max"])
@pytest.mark.parametrize("rank,kwargs,in_shape,out_shape", CASES)
def test_layer_and_keras_parity(keras, kind, rank, kwargs, in_shape, out_shape):
    name = f"Adaptive{kind}Pooling{rank}D"
    layer = run_layer_test(
        getattr(L, name),
        kwargs,
        input_shape=in_shape,
        expected_output_shape=out_shape,
        expected_num_trainable_weights=0,
    )
    assert layer.compute_output_shape(in_shape) == out_shape
    x = R.standard_normal(in_shape).astype("float32")
    o_layer, k_layer = assert_matches_keras(name, kwargs, x, atol=1e-6)
    k_config, o_config = k_layer.get_config(), o_layer.get_config()
    assert o_config.keys() == k_config.keys()
    assert o_config["output_size"] == tuple(k_config["output_size"])
    assert o_config["data_format"] == k_config["data_format"]


@pytest.mark.parametrize("kind", ["Average", "Max"])
def test_gradient_matches_torch(kind):
    import torch

    x = R.standard_normal((2, 7, 5, 3))
    layer = getattr(L, f"Adaptive{kind}Pooling2D")((3, 2))
    xo = kt.ops.convert_to_tensor(x)
    with kt.GradientTape() as tape:
        tape.watch(xo)
        loss = kt.ops.sum(kt.ops.square(layer(xo)))
    xt = torch.tensor(x, requires_grad=True)
    fn = getattr(
        torch.nn.functional, {"Average": "adaptive_avg_pool2d"}.get(kind, "adaptive_max_pool2d")
    )
    (fn(xt.permute(0, 3, 1, 2), (3, 2)) ** 2).sum().backward()
    # The layer computes in float32 (its dtype policy), torch in float64.
    np.testing.assert_allclose(
        tape.gradient(loss, xo).numpy(), xt.grad.numpy(), rtol=1e-5, atol=1e-7
    )


@pytest.mark.parametrize("bad", [0, (2, 2), "3", (1.5,)])
def test_bad_output_size(bad):
    with pytest.raises(TypeError, match="output_size"):
        L.AdaptiveMaxPooling1D(bad)


def test_wrong_rank():
    with pytest.raises(ValueError, match="Input 0 of layer"):
        L.AdaptiveAveragePooling2D(2)(np.ones((2, 3, 4), "float32"))
