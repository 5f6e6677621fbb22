"""STFTSpectrogram, MelSpectrogram and the STFT initializer: layer-test helper, Keras parity
(outputs, gradients), configs, errors."""

import numpy as np
import pytest

import keratron as kt
from tests.conftest import require
from tests.layers.layer_test import run_layer_test

L = kt.layers
R = np.random.default_rng(13)


@pytest.fixture(scope="module")
def keras():
    return require("keras")


def _same_config(o_layer, k_layer):
    k_config, o_config = k_layer.get_config(), o_layer.get_config()
    assert o_config.keys() == k_config.keys()
    for key, value in k_config.items():
        if key not in ("name", "dtype"):
            assert o_config[key] == value, key


@pytest.mark.parametrize(
    "kwargs",
    [
        {"side": "real"},
        {"side": "imag", "window": "hamming", "scaling": "spectrum", "periodic": True},
        {"side": "real", "window": "blackman", "scaling": None},
        {"side": "imag", "window": "bartlett", "periodic": True},
        {"side": "real", "window": None},
    ],
)
def test_stft_initializer_matches_keras(keras, kwargs):
    ours = kt.initializers.STFT(**kwargs)((12, 1, 9))
    theirs = keras.initializers.STFT(**kwargs)((12, 1, 9))
    np.testing.assert_allclose(ours.numpy(), keras.ops.convert_to_numpy(theirs), atol=2e-6)
    assert (
        kt.initializers.STFT(**kwargs).get_config()
        == keras.initializers.STFT(**kwargs).get_config()
    )
    assert kt.initializers.STFTInitializer is kt.initializers.STFT is kt.initializers.stft
    assert isinstance(kt.initializers.get("stft"), kt.initializers.STFT)


STFT_CASES = [
    ({"frame_length": 8, "frame_step": 4}, (2, 40, 1)),
    ({"mode": "magnitude", "frame_length": 10, "fft_length": 16, "padding": "same"}, (2, 33, 2)),
    ({"mode": "psd", "frame_length": 8, "frame_step": 3, "window": "hamming"}, (1, 30, 1)),
    ({"mode": "real", "frame_length": 8, "expand_dims": True}, (2, 30, 3)),
    ({"mode": "imag", "frame_length": 8, "data_format": "channels_first"}, (2, 2, 30)),
    ({"mode": "angle", "frame_length": 6, "scaling": "spectrum", "periodic": True}, (1, 25, 1)),
    (
        {"mode": "stft", "frame_length": 8, "expand_dims": True, "data_format": "channels_first"},
        (2, 2, 30),
    ),
]


@pytest.mark.parametrize("kwargs,in_shape", STFT_CASES)
def test_stft_spectrogram_matches_keras(keras, kwargs, in_shape):
    import torch

    x = R.standard_normal(in_shape).astype("float32")
    k_layer = keras.layers.STFTSpectrogram(**kwargs)
    xt = torch.tensor(x, requires_grad=True)
    k_out = k_layer(xt)
    layer = run_layer_test(
        L.STFTSpectrogram,
        kwargs,
        input_data=x,
        expected_output_shape=tuple(k_out.shape),
        expected_num_trainable_weights=len(k_layer.trainable_weights),
        expected_weight_shapes=[tuple(w.shape) for w in k_layer.weights],
        run_training_check=kwargs.get("mode") != "angle",
    )
    assert layer.compute_output_shape(in_shape) == tuple(k_layer.compute_output_shape(in_shape))
    o_layer = L.STFTSpectrogram(**kwargs)
    o_layer.build(in_shape)
    # Keras's own kernels, so the comparison covers the transform, not the initializer.
    o_layer.set_weights(k_layer.get_weights())
    xo = kt.ops.convert_to_tensor(x)
    with kt.GradientTape() as tape:
        tape.watch(xo)
        out = o_layer(xo)
        loss = kt.ops.sum(kt.ops.square(out))
    np.testing.assert_allclose(out.numpy(), k_out.detach().numpy(), atol=2e-4, rtol=1e-4)
    (k_out**2).sum().backward()
    grad = tape.gradient(loss, xo).numpy()
    scale = np.abs(xt.grad.numpy()).max()
    np.testing.assert_allclose(grad, xt.grad.numpy(), atol=1e-4 * scale)
    _same_config(o_layer, k_layer)


MEL_CASES = [
    {"fft_length": 64, "sequence_stride": 16, "num_mel_bins": 10, "sampling_rate": 8000},
    {
        "fft_length": 128,
        "sequence_stride": 32,
        "sequence_length": 100,
        "window": "hamming",
        "num_mel_bins": 16,
        "min_freq": 100.0,
        "max_freq": 3000.0,
        "top_db": 40.0,
        "mag_exp": 1.0,
        "ref_power": 2.0,
    },
    {"fft_length": 32, "sequence_stride": 8, "num_mel_bins": 6, "power_to_db": False},
]


@pytest.mark.parametrize("kwargs", MEL_CASES)
def test_mel_spectrogram_matches_keras(keras, kwargs):
    x = R.standard_normal((2, 300)).astype("float32")
    k_layer = keras.layers.MelSpectrogram(**kwargs)
    want = keras.ops.convert_to_numpy(k_layer(x))
    layer = run_layer_test(
        L.MelSpectrogram,
        kwargs,
        input_data=x,
        expected_output_shape=want.shape,
        expected_num_trainable_weights=0,
    )
    got = layer(x).numpy()
    if kwargs.get("power_to_db", True):
        np.testing.assert_allclose(got, want, atol=2e-3)  # decibels
    else:
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())
    _same_config(layer, k_layer)
    # A single unbatched signal (the decibel floor is then that signal's own maximum).
    np.testing.assert_allclose(
        layer(x[0]).numpy(), keras.ops.convert_to_numpy(k_layer(x[0])), atol=2e-3
    )


def test_mel_spectrogram_gradient():
    from tests.gradcheck import check_grads

    layer = L.MelSpectrogram(
        fft_length=16, sequence_stride=4, num_mel_bins=4, power_to_db=False, dtype="float64"
    )
    check_grads(lambda s: layer(s), [R.standard_normal((1, 40))], rtol=1e-4)


def test_errors():
    with pytest.raises(ValueError, match="frame_step"):
        L.STFTSpectrogram(frame_length=8, frame_step=9)
    with pytest.raises(ValueError, match="fft_length"):
        L.STFTSpectrogram(frame_length=8, fft_length=4)
    with pytest.raises(ValueError, match="mode"):
        L.STFTSpectrogram(mode="power")
    with pytest.raises(ValueError, match="window"):
        L.STFTSpectrogram(window="kaiserish")
    with pytest.raises(ValueError, match="side"):
        kt.initializers.STFT(side="both")
    with pytest.raises(ValueError, match="sequence_length"):
        L.MelSpectrogram(fft_length=16, sequence_length=32)
    with pytest.raises(ValueError, match="window"):
        L.MelSpectrogram(window="blackman")
    with pytest.raises(TypeError, match="float"):
        L.STFTSpectrogram(frame_length=4)(np.ones((1, 8, 1), "int32"))
