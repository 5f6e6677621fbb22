"""keratron.quantizers' functions and quantizers against Keras 3 (torch backend): values,
dtypes and the gradients of fake quantization."""

import numpy as np
import pytest

import keratron as kt
from keratron import quantizers as q
from tests.conftest import require

pytestmark = pytest.mark.interop

DTYPES = ["float32", "float16", "bfloat16"]


def _keras():
    require("keras")
    import keras

    return keras


def _np(x):
    """A keratron or Keras (torch) tensor as float64 / int numpy, bfloat16 included."""
    if isinstance(x, kt.Tensor):
        x = kt.ops.cast(x, "float32") if x.dtype == "bfloat16" else x
        return x.numpy()
    import torch

    if isinstance(x, torch.Tensor):
        x = x.detach().cpu()
        return (x.float() if x.dtype == torch.bfloat16 else x).numpy()
    return np.asarray(x)


def _dtype(x):
    return str(x.dtype).replace("torch.", "")


def _data(shape, dtype, seed=0):
    x = np.random.default_rng(seed).normal(size=shape).astype("float32") * 3
    return x, kt.ops.cast(x, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,axis", [((4, 5), -1), ((4, 5), 0), ((2, 3, 4), (0, 2)), ((6,), 0)])
def test_abs_max_quantize_matches_keras(shape, axis, dtype):
    keras = _keras()
    x, _ = _data(shape, dtype)
    if dtype != "float16":  # float16's epsilon is too small: 127 / 1e-7 overflows to inf
        x[..., :1] = 0.0  # an all-zero slice: epsilon keeps its scale finite
    ours_in, theirs_in = kt.ops.cast(x, dtype), keras.ops.cast(x, dtype)
    for to_numpy in (False, True):
        if to_numpy and dtype == "bfloat16":
            continue  # numpy has no bfloat16 (Keras's torch tensors fail there too)
        ours = q.abs_max_quantize(ours_in, axis, to_numpy=to_numpy)
        theirs = keras.quantizers.abs_max_quantize(theirs_in, axis, to_numpy=to_numpy)
        np.testing.assert_array_equal(_np(ours[0]), _np(theirs[0]))
        np.testing.assert_allclose(_np(ours[1]), _np(theirs[1]), rtol=1e-6)
        assert [_dtype(t) for t in ours] == [_dtype(t) for t in theirs]
        assert ours[1].shape == tuple(theirs[1].shape)


def test_abs_max_quantize_value_range_and_dtype_match_keras():
    keras = _keras()
    x, ours_in = _data((3, 7), "float32", seed=1)
    kwargs = dict(value_range=(-8, 7), dtype="int32", epsilon=0.5)
    ours = q.abs_max_quantize(ours_in, -1, **kwargs)
    theirs = keras.quantizers.abs_max_quantize(x, -1, **kwargs)
    np.testing.assert_array_equal(_np(ours[0]), _np(theirs[0]))
    np.testing.assert_allclose(_np(ours[1]), _np(theirs[1]), rtol=1e-6)
    assert ours[0].dtype == "int32"


@pytest.mark.parametrize("shape,block_size", [((8, 4), 4), ((7, 6), 3), ((5, 3), 8), ((9, 2), 2)])
@pytest.mark.parametrize("to_numpy", [False, True])
def test_grouped_with_zero_point_matches_keras(shape, block_size, to_numpy):
    keras = _keras()
    x, _ = _data(shape, "float32", seed=2)
    x[:2, 0] = 0.5  # a constant group when block_size is 2: the tensor path widens its range
    x[:, 1] = np.abs(x[:, 1])  # all-positive columns: the zero point clips at qmin
    ours = q.abs_max_quantize_grouped_with_zero_point(
        kt.convert_to_tensor(x), block_size, to_numpy=to_numpy
    )
    theirs = keras.quantizers.abs_max_quantize_grouped_with_zero_point(
        keras.ops.convert_to_tensor(x), block_size, to_numpy=to_numpy
    )
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(_np(a), _np(b), rtol=1e-6)
        assert _dtype(a) == _dtype(b) and a.shape == tuple(b.shape)


def test_grouped_with_zero_point_unsigned_range_matches_keras():
    keras = _keras()
    x, _ = _data((6, 5), "float32", seed=3)
    ours = q.abs_max_quantize_grouped_with_zero_point(
        kt.convert_to_tensor(x), 4, value_range=(-128, 127)
    )
    theirs = keras.quantizers.abs_max_quantize_grouped_with_zero_point(
        keras.ops.convert_to_tensor(x), 4, value_range=(-128, 127)
    )
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(_np(a), _np(b), rtol=1e-6)


@pytest.mark.parametrize("axis", [None, 0, [0, 1]])
def test_abs_max_quantizer_call_and_config_match_keras(axis):
    keras = _keras()
    x, ours_in = _data((3, 4), "float32", seed=4)
    ours_q = q.AbsMaxQuantizer(axis=axis, value_range=(-100, 100), epsilon=1e-3)
    theirs_q = keras.quantizers.AbsMaxQuantizer(axis=axis, value_range=(-100, 100), epsilon=1e-3)
    assert ours_q.get_config() == theirs_q.get_config()
    for call_axis in (None, 0):
        ours, theirs = ours_q(ours_in, axis=call_axis), theirs_q(x, axis=call_axis)
        np.testing.assert_array_equal(_np(ours[0]), _np(theirs[0]))
        np.testing.assert_allclose(_np(ours[1]), _np(theirs[1]), rtol=1e-6)


def test_abs_max_quantizer_rejects_int8_range_overflow():
    with pytest.raises(ValueError, match="value_range"):
        q.AbsMaxQuantizer(value_range=(-129, 127))
    assert q.AbsMaxQuantizer(value_range=(0, 255), output_dtype="int16").value_range == (0, 255)


# ---------------------------------------------------------------------------- fake quantization
def _keras_fake_quant(keras, x, mn, mx, upstream, **kwargs):
    import torch

    tx, tmn, tmx = (torch.tensor(v, requires_grad=True) for v in (x, mn, mx))
    out = keras.quantizers.fake_quant_with_min_max_vars(tx, tmn, tmx, **kwargs)
    out.backward(torch.tensor(upstream, dtype=out.dtype))
    return out.detach().numpy(), tx.grad.numpy(), tmn.grad.numpy(), tmx.grad.numpy()


def _our_fake_quant(x, mn, mx, upstream, **kwargs):
    vx, vmn, vmx = (kt.Variable(v) for v in (x, mn, mx))
    with kt.GradientTape() as tape:
        out = q.fake_quant_with_min_max_vars(vx, vmn, vmx, **kwargs)
        loss = kt.ops.sum(out * upstream)
    grads = tape.gradient(loss, [vx, vmn, vmx])
    return (out.numpy(), *(g.numpy() for g in grads))


# Ranges that need nudging (0 not on the grid, all-positive, all-negative) and one that does not.
RANGES = [(-1.0, 1.0), (-0.37, 2.11), (0.25, 3.0), (-4.0, -0.5), (-6.0, 6.0)]


@pytest.mark.parametrize("num_bits,narrow_range", [(8, False), (8, True), (4, False), (2, True)])
@pytest.mark.parametrize("bounds", RANGES)
def test_fake_quant_per_tensor_values_and_gradients_match_keras(bounds, num_bits, narrow_range):
    keras = _keras()
    rng = np.random.default_rng(5)
    x = rng.uniform(-5, 5, size=(4, 6)).astype("float32")
    x[0, :2] = bounds  # exactly on the range's ends
    upstream = rng.normal(size=x.shape).astype("float32")
    mn, mx = (np.array(b, "float32") for b in bounds)
    kwargs = dict(num_bits=num_bits, narrow_range=narrow_range)
    ours = _our_fake_quant(x, mn, mx, upstream, **kwargs)
    theirs = _keras_fake_quant(keras, x, mn, mx, upstream, **kwargs)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)


def test_fake_quant_per_channel_last_axis_matches_keras():
    keras = _keras()
    rng = np.random.default_rng(6)
    x = rng.uniform(-4, 4, size=(3, 2, 5)).astype("float32")
    mn = np.array([-1.0, -0.3, 0.2, -3.0, -2.5], "float32")
    mx = np.array([1.0, 2.2, 3.0, -0.1, 2.5], "float32")
    upstream = rng.normal(size=x.shape).astype("float32")
    for axis in (-1, 2):
        ours = _our_fake_quant(x, mn, mx, upstream, axis=axis, num_bits=4)
        theirs = _keras_fake_quant(keras, x, mn, mx, upstream, axis=axis, num_bits=4)
        for a, b in zip(ours, theirs):
            np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)


def test_fake_quant_per_channel_inner_axis_is_keras_on_that_axis_moved_last():
    # Keras's TensorFlow backend quantizes channel `axis` by moving it last; its torch backend
    # broadcasts the channel values against the last axis only (a shape error here).
    keras = _keras()
    rng = np.random.default_rng(7)
    x = rng.uniform(-4, 4, size=(2, 3, 4)).astype("float32")
    mn = np.array([-1.0, -0.3, 0.2], "float32")
    mx = np.array([1.0, 2.2, 3.0], "float32")
    upstream = rng.normal(size=x.shape).astype("float32")
    ours = _our_fake_quant(x, mn, mx, upstream, axis=1)
    moved = _keras_fake_quant(
        keras, np.swapaxes(x, 1, 2), mn, mx, np.swapaxes(upstream, 1, 2), axis=-1
    )
    theirs = (np.swapaxes(moved[0], 1, 2), np.swapaxes(moved[1], 1, 2), moved[2], moved[3])
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float64"])
def test_fake_quant_keeps_the_input_dtype_like_keras(dtype):
    keras = _keras()
    x, ours_in = _data((5, 4), dtype, seed=8)
    ours = q.fake_quant_with_min_max_vars(ours_in, -2.0, 3.0)
    theirs = keras.quantizers.fake_quant_with_min_max_vars(keras.ops.cast(x, dtype), -2.0, 3.0)
    assert ours.dtype == _dtype(theirs) == dtype
    np.testing.assert_allclose(_np(ours), _np(theirs), rtol=1e-6)


def test_fake_quant_gradients_hold_in_a_traced_step():
    x = np.linspace(-3, 3, 12, dtype="float32").reshape(3, 4)
    mn, mx = kt.Variable(np.array(-1.0, "float32")), kt.Variable(np.array(1.5, "float32"))

    def step(x):
        with kt.GradientTape() as tape:
            tape.watch(x)
            loss = kt.ops.sum(q.fake_quant_with_min_max_vars(x, mn, mx) * 2.0)
        return tape.gradient(loss, [x, mn, mx])

    xt = kt.convert_to_tensor(x)
    for traced, eager in zip(kt.function(step)(xt), step(xt)):
        np.testing.assert_array_equal(traced.numpy(), eager.numpy())
    gx, gmn, gmx = (g.numpy() for g in step(xt))
    assert set(np.unique(gx)) == {0.0, 2.0}
    assert gmn == 2.0 * np.sum(x <= -1.0) and gmx > 0


def test_fake_quant_rejects_wrong_channel_count():
    with pytest.raises(ValueError, match="min_vals"):
        q.fake_quant_with_min_max_vars(np.ones((2, 3), "float32"), [0.0, 0.0], [1.0, 1.0], axis=1)


# ------------------------------------------------------------------------------------- float8
@pytest.mark.parametrize("quantized_dtype", ["float8_e4m3fn", "float8_e5m2"])
@pytest.mark.parametrize("compute_dtype", ["float32", "float16", "bfloat16"])
def test_quantize_and_dequantize_matches_keras(quantized_dtype, compute_dtype):
    keras = _keras()
    rng = np.random.default_rng(9)
    # Every magnitude class: subnormals, normals, ties between grid values, saturation.
    x = np.concatenate(
        [
            rng.normal(size=200) * 10.0 ** rng.integers(-4, 5, size=200),
            [0.0, -0.0, 1.0625, 1.1875, -3.25, 0.00146484375, 1e6, -1e6, 2.0**-10, 2.0**-17],
        ]
    ).astype("float32")
    for scale in (1.0, 0.37):
        ours = q.quantize_and_dequantize(
            kt.ops.cast(x, compute_dtype), scale, quantized_dtype, compute_dtype
        )
        theirs = keras.quantizers.quantize_and_dequantize(
            keras.ops.cast(x, compute_dtype), scale, quantized_dtype, compute_dtype
        )
        assert ours.dtype == _dtype(theirs) == compute_dtype
        np.testing.assert_array_equal(_np(ours), _np(theirs))


def test_quantize_and_dequantize_gradient_matches_keras():
    keras = _keras()
    import torch

    x = np.array([0.3, -1.7, 900.0, -5e3, 2.0], "float32")
    ours_x, ours_s = kt.Variable(x), kt.Variable(np.array(2.0, "float32"))
    with kt.GradientTape() as tape:
        loss = kt.ops.sum(q.quantize_and_dequantize(ours_x, ours_s, "float8_e4m3fn", "float32"))
    ours = [g.numpy() for g in tape.gradient(loss, [ours_x, ours_s])]
    tx, ts = torch.tensor(x, requires_grad=True), torch.tensor(2.0, requires_grad=True)
    keras.quantizers.quantize_and_dequantize(tx, ts, "float8_e4m3fn", "float32").sum().backward()
    np.testing.assert_allclose(ours[0], tx.grad.numpy(), rtol=1e-6)
    np.testing.assert_allclose(ours[1], ts.grad.numpy(), rtol=1e-6)


def test_quantize_and_dequantize_rejects_other_dtypes():
    with pytest.raises(ValueError, match="quantized_dtype"):
        q.quantize_and_dequantize(np.ones(2, "float32"), 1.0, "int8", "float32")


@pytest.mark.parametrize("amax", [3.0, 0.0, -1.0, np.inf, np.nan, 1e-3])
@pytest.mark.parametrize("margin", [0, 2])
def test_compute_float8_scale_matches_keras(amax, margin):
    keras = _keras()
    amax = np.float32(amax)
    ours = q.compute_float8_scale(amax, np.float32(0.5), 448.0, margin=margin)
    theirs = keras.quantizers.compute_float8_scale(
        keras.ops.convert_to_tensor(amax), np.float32(0.5), 448.0, margin=margin
    )
    np.testing.assert_allclose(_np(ours), _np(theirs), rtol=1e-6)


@pytest.mark.parametrize("history_dtype", ["float32", "float16"])
def test_compute_float8_amax_history_matches_keras(history_dtype):
    keras = _keras()
    x, _ = _data((3, 5), "float32", seed=10)
    history = np.arange(1, 7).astype(history_dtype)
    ours = q.compute_float8_amax_history(kt.convert_to_tensor(x), history)
    theirs = keras.quantizers.compute_float8_amax_history(
        keras.ops.convert_to_tensor(x), keras.ops.convert_to_tensor(history)
    )
    assert ours.dtype == _dtype(theirs) == history_dtype
    np.testing.assert_array_equal(_np(ours), _np(theirs))


# ------------------------------------------------------------------------------------------ int4
@pytest.mark.parametrize("dtype", ["int8", "uint8"])
@pytest.mark.parametrize("shape,axis", [((3, 2), 0), ((2, 3), 1), ((4, 5, 3), 1), ((5, 2, 3), -1)])
def test_pack_and_unpack_int4_match_keras(shape, axis, dtype):
    keras = _keras()
    rng = np.random.default_rng(11)
    low, high = (-8, 8) if dtype == "int8" else (0, 16)
    arr = rng.integers(low, high, size=shape).astype(dtype)
    ours = q.pack_int4(kt.convert_to_tensor(arr), axis=axis, dtype=dtype)
    theirs = keras.quantizers.pack_int4(keras.ops.convert_to_tensor(arr), axis=axis, dtype=dtype)
    np.testing.assert_array_equal(_np(ours[0]), _np(theirs[0]))
    assert ours[1:] == tuple(theirs[1:]) and ours[0].dtype == dtype
    unpacked = q.unpack_int4(ours[0], ours[2], axis=axis, dtype=dtype)
    keras_unpacked = keras.quantizers.unpack_int4(theirs[0], theirs[2], axis=axis, dtype=dtype)
    np.testing.assert_array_equal(_np(unpacked), _np(keras_unpacked))
    if dtype == "int8":
        np.testing.assert_array_equal(_np(unpacked), arr)


def test_int4_packing_rejects_wrong_dtypes():
    with pytest.raises(TypeError, match="int8"):
        q.pack_int4(np.zeros((2, 2), "int32"))
    with pytest.raises(ValueError, match="dtype"):
        q.pack_int4(np.zeros((2, 2), "int8"), dtype="int16")
    with pytest.raises(TypeError, match="int8 or uint8"):
        q.unpack_int4(np.zeros((2, 2), "int32"), 4)


_TF_FAKE_QUANT = """
import sys
import numpy as np
import tensorflow as tf

data = dict(np.load(sys.argv[1]))
out = {}
for name in ("tensor", "channel"):
    x, mn, mx, up = (tf.Variable(data[f"{name}_{k}"]) for k in ("x", "min", "max", "up"))
    with tf.GradientTape() as tape:
        if name == "tensor":
            y = tf.quantization.fake_quant_with_min_max_vars(x, mn, mx, num_bits=5)
        else:  # channel axis 1: moved last, as Keras's TensorFlow backend does
            y = tf.quantization.fake_quant_with_min_max_vars_per_channel(
                tf.transpose(x, [0, 2, 1]), mn, mx, num_bits=8, narrow_range=True
            )
            y = tf.transpose(y, [0, 2, 1])
        loss = tf.reduce_sum(y * up)
    grads = tape.gradient(loss, [x, mn, mx])
    for key, value in zip(("y", "gx", "gmin", "gmax"), [y, *grads]):
        out[f"{name}_{key}"] = value.numpy()
np.savez(sys.argv[2], **out)
"""


@pytest.mark.slow
def test_fake_quant_values_and_gradients_match_tensorflow(tmp_path):
    import os
    import subprocess
    import sys

    from tests.conftest import require_installed

    require_installed("tensorflow")
    rng = np.random.default_rng(12)
    data = {
        "tensor_x": rng.uniform(-3, 3, size=(4, 5)).astype("float32"),
        "tensor_min": np.array(-0.77, "float32"),
        "tensor_max": np.array(1.9, "float32"),
        "channel_x": rng.uniform(-3, 3, size=(2, 3, 4)).astype("float32"),
        "channel_min": np.array([-1.0, 0.4, -2.3], "float32"),
        "channel_max": np.array([1.5, 2.0, -0.2], "float32"),
    }
    data["tensor_up"] = rng.normal(size=(4, 5)).astype("float32")
    data["channel_up"] = rng.normal(size=(2, 3, 4)).astype("float32")
    np.savez(tmp_path / "in.npz", **data)
    proc = subprocess.run(
        [sys.executable, "-c", _TF_FAKE_QUANT, str(tmp_path / "in.npz"), str(tmp_path / "out.npz")],
        # TensorFlow loads Keras, which on the torch backend loads Triton: both bundle LLVM.
        env=dict(os.environ, KERAS_BACKEND="tensorflow", TF_CPP_MIN_LOG_LEVEL="3"),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    tf_out = np.load(tmp_path / "out.npz")
    cases = {
        "tensor": dict(num_bits=5),
        "channel": dict(num_bits=8, narrow_range=True, axis=1),
    }
    for name, kwargs in cases.items():
        ours = _our_fake_quant(*(data[f"{name}_{k}"] for k in ("x", "min", "max", "up")), **kwargs)
        for key, value in zip(("y", "gx", "gmin", "gmax"), ours):
            np.testing.assert_allclose(value, tf_out[f"{name}_{key}"], rtol=1e-5, atol=1e-6)
