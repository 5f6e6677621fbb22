"""The CPU routes of matmul and conv (oneDNN's inner product and convolution, torch's BLAS)
against float64 numpy, eagerly and in a compiled plan (where kept buffers serve some calls),
and their NaN policy: a relu/relu6 epilogue keeps NaN, as `ops.epilogue` says."""

import numpy as np
import pytest
import torch

import keratron
from keratron.ops import linalg
from keratron.ops.convolution import conv_p
from keratron.ops.linalg import matmul_p

RNG = np.random.default_rng(11)


def _np_epilogue(y, activation):
    if activation == "relu":
        return np.where(np.isnan(y), y, np.maximum(y, 0))
    if activation == "relu6":
        return np.where(np.isnan(y), y, np.clip(y, 0, 6))
    return y


def _matmul(x, w, b, activation):
    return matmul_p.bind(x, w, b, activation=activation)


# (x shape, w shape, whether x is given transposed, whether oneDNN serves the product)
MATMULS = [
    ((32, 32), (32, 10), False, False),
    ((128, 784), (784, 512), False, True),
    ((128, 512), (512, 10), False, False),
    ((4, 32, 256), (256, 256), False, True),  # leading axes folded into the rows
    ((784, 128), (128, 512), True, True),  # a weight gradient: x.T @ g
    ((512, 128), (128, 64), True, False),  # transposed and below its threshold
]


@pytest.mark.parametrize("xs,ws,transposed,onednn", MATMULS)
@pytest.mark.parametrize("activation", [None, "relu", "relu6"])
@pytest.mark.parametrize("compiled", [False, True])
def test_matmul_cpu_route_matches_float64(xs, ws, transposed, onednn, activation, compiled):
    x = RNG.standard_normal(xs[::-1] if transposed else xs).astype("float32")
    w = RNG.standard_normal(ws).astype("float32")
    b = RNG.standard_normal(ws[-1]).astype("float32")
    x[(0,) * x.ndim] = np.nan
    tx = keratron.convert_to_tensor(x)
    tx = keratron.ops.transpose(tx) if transposed else tx
    tw, tb = keratron.convert_to_tensor(w), keratron.convert_to_tensor(b)
    if transposed:
        x = x.T
    assert linalg.onednn_gemm(torch.from_numpy(x).reshape(-1, xs[-1]), tw._value, None) == onednn
    fn = keratron.function(_matmul) if compiled else _matmul
    for _ in range(2 if compiled else 1):  # the second replay writes the kept buffers
        got = np.asarray(fn(tx, tw, tb, activation))
    want = _np_epilogue(x.astype("float64") @ w.astype("float64") + b, activation)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    scale = np.nanmax(np.abs(want)) + 1.0
    np.testing.assert_allclose(got, want, rtol=0, atol=2e-5 * scale * np.sqrt(xs[-1]))


def _conv(x, k, activation, padding):
    return conv_p.bind(
        x,
        k,
        None,
        strides=(1, 1),
        padding=padding,
        dilation=(1, 1),
        groups=1,
        activation=activation,
    )


def _np_conv(x, k, padding):
    (pt, pb), (pl, pr) = padding
    x = np.pad(x.astype("float64"), ((0, 0), (pt, pb), (pl, pr), (0, 0)))
    kh, kw, _, cout = k.shape
    n, h, w, _ = x.shape
    out = np.zeros((n, h - kh + 1, w - kw + 1, cout))
    for i in range(kh):
        for j in range(kw):
            out += x[:, i : i + out.shape[1], j : j + out.shape[2], :] @ k[i, j].astype("float64")
    return out


# input shape, kernel shape, padding: a 3x3 (oneDNN with relu/relu6), a small 1x1 (a GEMM) and
# a large 1x1 (oneDNN's convolution; in a compiled plan written into a kept buffer)
CONVS = [
    ((2, 16, 16, 8), (3, 3, 8, 16), ((1, 1), (1, 1))),
    ((2, 8, 8, 16), (1, 1, 16, 32), ((0, 0), (0, 0))),
    ((2, 48, 48, 64), (1, 1, 64, 96), ((0, 0), (0, 0))),
]


@pytest.mark.parametrize("xs,ks,padding", CONVS)
@pytest.mark.parametrize("activation", [None, "relu", "relu6"])
@pytest.mark.parametrize("compiled", [False, True])
def test_conv_cpu_route_keeps_nan_through_relu(xs, ks, padding, activation, compiled):
    x = RNG.standard_normal(xs).astype("float32")
    k = (RNG.standard_normal(ks) / np.sqrt(np.prod(ks[:-1]))).astype("float32")
    x[0, 3, 4, 1] = np.nan
    fn = keratron.function(_conv) if compiled else _conv
    for _ in range(2 if compiled else 1):
        got = np.asarray(
            fn(keratron.convert_to_tensor(x), keratron.convert_to_tensor(k), activation, padding)
        )
    want = _np_epilogue(_np_conv(x, k, padding), activation)
    assert np.isnan(want).any()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-4 * (np.nanmax(np.abs(want)) + 1))


@pytest.mark.parametrize("compiled", [False, True])
def test_a_strided_bias_is_read_as_its_values(compiled):
    # oneDNN reads a bias as a dense vector; a slice of a longer vector must not be misread.
    x = RNG.standard_normal((128, 784)).astype("float32")
    w = RNG.standard_normal((784, 512)).astype("float32")
    long_bias = RNG.standard_normal(1024).astype("float32")
    b = keratron.convert_to_tensor(long_bias)[::2]
    fn = keratron.function(_matmul) if compiled else _matmul
    got = np.asarray(fn(keratron.convert_to_tensor(x), keratron.convert_to_tensor(w), b, "relu"))
    want = _np_epilogue(x.astype("float64") @ w + long_bias[::2], "relu")
    np.testing.assert_allclose(got, want, rtol=0, atol=2e-5 * np.abs(want).max() * 28)


@pytest.mark.parametrize("xs,ks,padding", CONVS)
@pytest.mark.parametrize("compiled", [False, True])
def test_conv_reads_a_strided_bias_as_its_values(xs, ks, padding, compiled):
    x = RNG.standard_normal(xs).astype("float32")
    k = (RNG.standard_normal(ks) / np.sqrt(np.prod(ks[:-1]))).astype("float32")
    long_bias = RNG.standard_normal(2 * ks[-1]).astype("float32")
    b = keratron.convert_to_tensor(long_bias)[::2]

    def conv_with_bias(x, k, b):
        return conv_p.bind(
            x, k, b, strides=(1, 1), padding=padding, dilation=(1, 1), groups=1, activation="relu"
        )

    fn = keratron.function(conv_with_bias) if compiled else conv_with_bias
    for _ in range(2 if compiled else 1):
        got = np.asarray(fn(keratron.convert_to_tensor(x), keratron.convert_to_tensor(k), b))
    want = _np_epilogue(_np_conv(x, k, padding) + long_bias[::2], "relu")
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-4 * (np.abs(want).max() + 1))
