"""ConvLSTM1D/2D/3D: layer-test helper, Keras parity on the same weights (outputs, states,
gradients of inputs and weights, masks, initial states, stateful runs), configs, errors."""

import numpy as np
import pytest

import keratron as kt
from tests.conftest import require
from tests.layers.layer_test import run_layer_test

L = kt.layers
R = np.random.default_rng(23)


@pytest.fixture(scope="module")
def keras():
    return require("keras")


def x32(*shape):
    return R.standard_normal(shape).astype("float32")


CASES = [
    # (class, init kwargs, input shape)
    ("ConvLSTM1D", {"filters": 3, "kernel_size": 3}, (2, 4, 7, 2)),
    (
        "ConvLSTM1D",
        {
            "filters": 2,
            "kernel_size": 2,
            "padding": "same",
            "return_sequences": True,
            "go_backwards": True,
            "data_format": "channels_first",
        },
        (2, 3, 2, 6),
    ),
    (
        "ConvLSTM2D",
        {
            "filters": 2,
            "kernel_size": (3, 2),
            "strides": (2, 1),
            "return_state": True,
            "activation": "relu",
            "unit_forget_bias": False,
        },
        (2, 3, 6, 5, 3),
    ),
    (
        "ConvLSTM2D",
        {
            "filters": 3,
            "kernel_size": 2,
            "dilation_rate": 2,
            "padding": "same",
            "return_sequences": True,
            "use_bias": False,
        },
        (1, 3, 5, 5, 2),
    ),
    ("ConvLSTM3D", {"filters": 2, "kernel_size": 2, "return_sequences": True}, (1, 2, 3, 4, 3, 2)),
]


@pytest.mark.parametrize("name,kwargs,in_shape", [CASES[1], CASES[2], CASES[4]])
def test_layer(keras, name, kwargs, in_shape):
    k_layer = getattr(keras.layers, name)(**kwargs)
    k_out = k_layer(x32(*in_shape))
    want = (
        tuple(tuple(o.shape) for o in k_out) if kwargs.get("return_state") else tuple(k_out.shape)
    )
    layer = run_layer_test(
        getattr(L, name),
        kwargs,
        input_shape=in_shape,
        expected_output_shape=want,
        expected_weight_shapes=[tuple(w.shape) for w in k_layer.weights],
    )
    got = layer.compute_output_shape(in_shape)
    assert got == tuple(k_layer.compute_output_shape(in_shape))


@pytest.mark.parametrize("name,kwargs,in_shape", CASES)
def test_matches_keras(keras, name, kwargs, in_shape):
    import torch

    x = x32(*in_shape)
    k_layer, o_layer = getattr(keras.layers, name)(**kwargs), getattr(L, name)(**kwargs)
    k_layer(x)
    o_layer(x)
    assert [w.path.split("/", 1)[1] for w in o_layer.weights] == [
        w.path.split("/", 1)[1] for w in k_layer.weights
    ]
    weights = [w + R.uniform(-0.2, 0.2, w.shape).astype("float32") for w in k_layer.get_weights()]
    k_layer.set_weights(weights)
    o_layer.set_weights(weights)
    xt = torch.tensor(x, requires_grad=True)
    k_out = k_layer(xt)
    k_out = list(k_out) if isinstance(k_out, (list, tuple)) else [k_out]
    xo = kt.ops.convert_to_tensor(x)
    with kt.GradientTape() as tape:
        tape.watch(xo)
        o_out = o_layer(xo)
        o_out = list(o_out) if isinstance(o_out, (list, tuple)) else [o_out]
        loss = sum(kt.ops.sum(kt.ops.square(o)) for o in o_out)
    for o, k in zip(o_out, k_out, strict=True):
        assert float(np.std(o.numpy())) > 1e-3  # not a degenerate comparison
        np.testing.assert_allclose(o.numpy(), k.detach().numpy(), atol=1e-5, rtol=1e-5)
    sum((k**2).sum() for k in k_out).backward()
    grads = tape.gradient(loss, [xo, *o_layer.trainable_weights])
    wants = [xt.grad.numpy()] + [w.value.grad.numpy() for w in k_layer.trainable_weights]
    for g, want in zip(grads, wants, strict=True):
        np.testing.assert_allclose(g.numpy(), want, atol=1e-4 * max(1, np.abs(want).max()))
    k_config, o_config = k_layer.get_config(), o_layer.get_config()
    assert o_config.keys() == k_config.keys()
    for key, value in k_config.items():
        if key not in ("name", "dtype"):
            assert o_config[key] == value, key


def _pair(keras, name, kwargs, in_shape):
    x = x32(*in_shape)
    k_layer, o_layer = getattr(keras.layers, name)(**kwargs), getattr(L, name)(**kwargs)
    k_layer(x)
    o_layer(x)
    weights = [w + R.uniform(-0.2, 0.2, w.shape).astype("float32") for w in k_layer.get_weights()]
    k_layer.set_weights(weights)
    o_layer.set_weights(weights)
    return x, k_layer, o_layer


def _close(o, k, atol=1e-5):
    o = o if isinstance(o, (list, tuple)) else [o]
    k = k if isinstance(k, (list, tuple)) else [k]
    for a, b in zip(o, k, strict=True):
        np.testing.assert_allclose(a.numpy(), np.asarray(b.detach()), atol=atol)


def test_mask_and_initial_state_match_keras(keras):
    import torch

    kwargs = {
        "filters": 2,
        "kernel_size": 3,
        "padding": "same",
        "return_sequences": True,
        "return_state": True,
    }
    x, k_layer, o_layer = _pair(keras, "ConvLSTM2D", kwargs, (2, 4, 4, 4, 1))
    mask = np.array([[True, True, False, True], [True, False, False, False]])
    h0, c0 = x32(2, 4, 4, 2), x32(2, 4, 4, 2)
    k_out = k_layer(
        torch.tensor(x), mask=torch.tensor(mask), initial_state=[torch.tensor(h0), torch.tensor(c0)]
    )
    _close(o_layer(x, mask=mask, initial_state=[h0, c0]), k_out)
    with pytest.raises(ValueError, match="initial states"):
        o_layer(x, initial_state=[h0[:, :3], c0])


def test_stateful_matches_keras(keras):
    kwargs = {"filters": 2, "kernel_size": 2, "stateful": True}
    x, k_layer, o_layer = _pair(keras, "ConvLSTM1D", kwargs, (2, 3, 5, 2))
    k_layer.reset_state()
    o_layer.reset_state()
    for _ in range(2):  # the second call starts from the first call's final states
        _close(o_layer(x), k_layer(x))


def test_dropout_in_training():
    layer = L.ConvLSTM2D(2, 2, dropout=0.5, recurrent_dropout=0.5, seed=1)
    x = x32(2, 3, 4, 4, 1)
    a, b = layer(x, training=True).numpy(), layer(x, training=True).numpy()
    assert not np.allclose(a, b)  # fresh masks per call
    np.testing.assert_array_equal(layer(x).numpy(), layer(x, training=False).numpy())
    config = {"filters": 2, "kernel_size": 2, "dropout": 0.3, "recurrent_dropout": 0.3, "seed": 0}
    # In training each call draws fresh masks, so one gradient step need not lower the loss of
    # the next call (it did not in ~1 run of 3): the step is checked with training=False.
    run_layer_test(
        L.ConvLSTM2D,
        config,
        input_shape=(2, 3, 4, 4, 1),
        expected_output_shape=(2, 3, 3, 2),
        training=True,
        run_training_check=False,
    )
    run_layer_test(
        L.ConvLSTM2D,
        config,
        input_shape=(2, 3, 4, 4, 1),
        call_kwargs={"training": False},
        expected_output_shape=(2, 3, 3, 2),
    )


def test_errors():
    with pytest.raises(ValueError, match="filters"):
        L.ConvLSTM2D(0, 3)
    with pytest.raises(ValueError, match="dilation_rate"):
        L.ConvLSTM2D(2, 3, strides=2, dilation_rate=2)
    with pytest.raises(ValueError, match="padding"):
        L.ConvLSTM1D(2, 3, padding="causal")
    with pytest.raises(ValueError, match="kernel_size"):
        L.ConvLSTM3D(2, (3, 3))
    with pytest.raises(ValueError, match="Input 0 of layer"):
        L.ConvLSTM2D(2, 3)(x32(2, 3, 4, 4))
