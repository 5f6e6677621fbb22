"""The CPU routes of matmul and conv (oneDNN's inner product and convolution, torch's BLAS)
against float64 numpy, eagerly and in a compiled plan (where kept buffers serve some calls),
and their NaN policy: a relu/relu6 epilogue keeps NaN, as `ops.epilogue` says."""

import numpy as np
import pytest
import torch

import keratron
from keratron.autodiff import memory_plan
from keratron.ops import convolution, linalg
from keratron.ops.convolution import conv_grad_input_p, conv_p
from keratron.ops.linalg import matmul_p

RNG = np.random.default_rng(11)


@pytest.fixture(autouse=True)
def _fast_blas(monkeypatch):
    """The choices below are the fixed rules (no timing: test_cpu_choice tests the measured
    choices) of a machine whose BLAS GEMM is fast (Intel's MKL on an Intel CPU), whatever
    this one is; `slow_blas` tests the others."""
    monkeypatch.setattr(keratron.config, "_cpu_kernel_benchmark", False)
    monkeypatch.setattr(linalg, "blas_is_slow", lambda: False)
    monkeypatch.setattr(convolution, "blas_is_slow", lambda: False)


@pytest.fixture
def slow_blas(monkeypatch):
    monkeypatch.setattr(linalg, "blas_is_slow", lambda: True)
    monkeypatch.setattr(convolution, "blas_is_slow", lambda: True)


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
    ((128, 512), (512, 10), False, True),  # narrow: BLAS's weak case
    ((128, 128), (128, 10), False, False),  # narrow but small
    ((4, 32, 256), (256, 256), False, True),  # leading axes folded into the rows
    ((784, 128), (128, 512), True, True),  # a weight gradient: x.T @ g
    ((512, 128), (128, 64), True, False),  # transposed and below its threshold
    ((9216, 128), (128, 128), True, False),  # a large transposed product: BLAS, kept in a plan
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


# (x shape as given, transposed, w shape): which narrow weight gradients take (g.T @ x).T
NARROW_TRANSPOSED = [
    ((128, 512), (128, 10), True),  # a classifier head's weight gradient
    ((128, 512), (128, 2), True),
    ((128, 512), (128, 12), False),  # from 12 columns BLAS is as fast
    ((64, 128), (64, 10), False),  # too small to gain
]


@pytest.mark.parametrize("xs,ws,narrow", NARROW_TRANSPOSED)
@pytest.mark.parametrize("compiled", [False, True])
def test_narrow_weight_gradient_matches_float64(xs, ws, narrow, compiled):
    x = RNG.standard_normal(xs).astype("float32")
    g = RNG.standard_normal(ws).astype("float32")
    x[3, 5] = np.nan
    tx = keratron.ops.transpose(keratron.convert_to_tensor(x))
    tg = keratron.convert_to_tensor(g)
    assert linalg.narrow_transposed(tx._value, tg._value, None) == narrow
    fn = keratron.function(_matmul) if compiled else _matmul
    for _ in range(2 if compiled else 1):  # the second replay writes the kept buffers
        got = fn(tx, tg, None, None)
    assert got._value.is_contiguous()
    got = np.asarray(got)
    want = x.T.astype("float64") @ g.astype("float64")
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    scale = np.nanmax(np.abs(want)) + 1.0
    np.testing.assert_allclose(got, want, rtol=0, atol=2e-5 * scale * np.sqrt(xs[0]))


def test_a_large_weight_gradient_is_written_into_a_kept_buffer():
    # cnn's flatten-to-dense weight gradient, x.T @ g with x (128, 9216): BLAS, into a buffer
    # the plan keeps, with the eager route's values.
    x = RNG.standard_normal((128, 9216)).astype("float32")
    g = RNG.standard_normal((128, 128)).astype("float32")
    tx, tg = keratron.convert_to_tensor(x), keratron.convert_to_tensor(g)
    assert not linalg.onednn_gemm(tx._value.t(), tg._value, None)

    def weight_gradient(x, g):  # the product inside the plan, as a weight gradient is
        return keratron.ops.sum(_matmul(keratron.ops.transpose(x), g, None, None), axis=1)

    f = keratron.function(weight_gradient)
    want = np.asarray(weight_gradient(tx, tg))
    for _ in range(3):
        assert np.array_equal(np.asarray(f(tx, tg)), want)
    assert f.get_concrete_graph(tx, tg).kept_buffers
    full = x.T.astype("float64") @ g
    np.testing.assert_allclose(want, full.sum(axis=1), rtol=0, atol=1e-2)


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


# output-gradient shape, kernel shape, padding, whether oneDNN's full convolution serves it:
# valid and same 3x3 (the cnn's; input gradients of 1 MiB, so that a compiled plan keeps their
# buffer), a 5x5 same, a 3x5 valid; asymmetric padding and a 1x1 go to the reference.
GRAD_INPUTS = [
    ((4, 30, 30, 16), (3, 3, 64, 16), ((0, 0), (0, 0)), True),
    ((4, 32, 32, 8), (3, 3, 64, 8), ((1, 1), (1, 1)), True),
    ((1, 7, 8, 4), (5, 5, 3, 4), ((2, 2), (2, 2)), True),
    ((2, 6, 5, 4), (3, 5, 3, 4), ((0, 0), (0, 0)), True),
    ((2, 8, 8, 4), (2, 2, 3, 4), ((0, 1), (0, 1)), False),
    ((2, 8, 8, 16), (1, 1, 32, 16), ((0, 0), (0, 0)), False),
]


def _grad_input_fn(input_shape, strides, padding, groups):
    """conv_grad_input of these parameters, plus 0.5: read inside the function, so a kept
    buffer serves the gradient when compiled."""

    def grad_input_plus_half(g, k):
        gi = conv_grad_input_p.bind(
            g, k, input_shape=input_shape, strides=strides, padding=padding, dilation=(1, 1),
            groups=groups,
        )  # fmt: skip
        return keratron.ops.add(gi, 0.5)

    return grad_input_plus_half


def _float64_grad_input(g, k, input_shape, padding, stride=1, groups=1):
    """torch's float64 input gradient of the same convolution (NCHW), cropped to the input
    inside the padding: the reference."""
    (pt, pb), (pl, pr) = padding
    x_like = torch.zeros(
        (g.shape[0], input_shape[3], input_shape[1] + pt + pb, input_shape[2] + pl + pr)
    )
    return (
        torch.nn.grad.conv2d_input(
            x_like.shape,
            torch.from_numpy(k.astype("float64")).permute(3, 2, 0, 1),
            torch.from_numpy(g.astype("float64")).permute(0, 3, 1, 2),
            stride=stride,
            groups=groups,
        )
        .permute(0, 2, 3, 1)[:, pt : pt + input_shape[1], pl : pl + input_shape[2]]
        .numpy()
    )


def _grad_input_plus_half(g, k, input_shape, padding):
    gi = conv_grad_input_p.bind(
        g, k, input_shape=input_shape, strides=(1, 1), padding=padding, dilation=(1, 1), groups=1
    )
    return keratron.ops.add(gi, 0.5)  # read inside the function: a kept buffer serves gi


@pytest.mark.parametrize("gs,ks,padding,onednn", GRAD_INPUTS)
@pytest.mark.parametrize("compiled", [False, True])
def test_conv_grad_input_cpu_route_matches_float64(gs, ks, padding, onednn, compiled):
    g = RNG.standard_normal(gs).astype("float32")
    k = (RNG.standard_normal(ks) / np.sqrt(np.prod(ks[:-1]))).astype("float32")
    g[1 % gs[0], 2, 3, 1] = np.nan
    n, h, w, _ = gs
    (pt, pb), (pl, pr) = padding
    input_shape = (n, h + ks[0] - 1 - pt - pb, w + ks[1] - 1 - pl - pr, ks[2])
    assert (
        convolution._full_conv_padding(ks, (1, 1), padding, (1, 1), 1, torch.float32, 4) is not None
    ) == onednn
    args = (keratron.convert_to_tensor(g), keratron.convert_to_tensor(k), input_shape, padding)
    fn = keratron.function(_grad_input_plus_half) if compiled else _grad_input_plus_half
    for _ in range(2 if compiled else 1):  # the second call replays with the kept buffer
        got = np.asarray(fn(*args)) - 0.5
    if compiled:
        kept = fn.get_concrete_graph(*args).kept_buffers
        assert bool(kept) == (onednn and 4 * np.prod(input_shape) >= memory_plan.MIN_BYTES)
    want = _float64_grad_input(g, k, input_shape, padding)
    assert np.isnan(want).any()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-4 * (np.nanmax(np.abs(want)) + 1))


@pytest.mark.parametrize("compiled", [False, True])
def test_conv_grad_input_cpu_route_reads_a_strided_gradient(compiled):
    # An NHWC gradient that is a view of NCHW memory (not dense in NHWC order), and one that
    # is a slice: the route (and, compiled, its kept-buffer writer) reads values, not a layout.
    g = RNG.standard_normal((4, 30, 30, 16)).astype("float32")
    k = (RNG.standard_normal((3, 3, 64, 16)) / 12).astype("float32")
    strided = [
        torch.from_numpy(np.ascontiguousarray(g.transpose(0, 3, 1, 2))).permute(0, 2, 3, 1),
        torch.from_numpy(np.stack([g, g], axis=-1).reshape(4, 30, 30, 32))[..., ::2],
    ]
    shape, pad, kt = (4, 32, 32, 64), ((0, 0),) * 2, keratron.convert_to_tensor(k)
    want = _grad_input_plus_half(keratron.convert_to_tensor(g), kt, shape, pad)
    fn = keratron.function(_grad_input_plus_half) if compiled else _grad_input_plus_half
    for view in strided:
        assert not view.is_contiguous()
        for _ in range(2 if compiled else 1):
            got = fn(keratron.Tensor(view), kt, shape, pad)
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


# Where BLAS is slow: (x shape as given, w shape, transposed, whether oneDNN serves it).
SLOW_BLAS_MATMULS = [
    ((64, 128), (128, 512), True, True),  # a 4M weight gradient
    ((128, 128), (128, 128), True, False),  # 2M: BLAS stays faster
    ((9216, 128), (128, 128), True, False),  # kept-size: BLAS, into a kept buffer
    ((128, 784), (784, 512), False, True),  # untransposed: as on any machine
]


@pytest.mark.parametrize("xs,ws,transposed,onednn", SLOW_BLAS_MATMULS)
@pytest.mark.parametrize("compiled", [False, True])
def test_matmul_choices_where_blas_is_slow(xs, ws, transposed, onednn, compiled, slow_blas):
    x = RNG.standard_normal(xs[::-1] if transposed else xs).astype("float32")
    w = RNG.standard_normal(ws).astype("float32")
    tx = keratron.convert_to_tensor(x)
    tx = keratron.ops.transpose(tx) if transposed else tx
    tw = keratron.convert_to_tensor(w)
    x = x.T if transposed else x
    assert linalg.onednn_gemm(tx._value, tw._value, None) == onednn
    fn = keratron.function(_matmul) if compiled else _matmul
    for _ in range(2 if compiled else 1):
        got = np.asarray(fn(tx, tw, None, None))
    want = x.astype("float64") @ w.astype("float64")
    np.testing.assert_allclose(got, want, rtol=0, atol=2e-5 * np.abs(want).max() * 4)


def _grad_filter(x, g, kernel_shape, strides=(1, 1), padding=((0, 0), (0, 0)), groups=1):
    return convolution.conv_grad_filter_p.bind(
        x, g, kernel_shape=kernel_shape, strides=strides, padding=padding, dilation=(1, 1),
        groups=groups,
    )  # fmt: skip


# x shape, output channels: pointwise weight gradients where BLAS is slow. Pixels (batch x
# spatial) at least twice the input channels go to oneDNN's weight-gradient convolution,
# fewer to the inner product; a float64 batch stays on the reference.
POINTWISE_FILTERS = [
    ((2, 16, 16, 24), 40, "convolution"),
    ((2, 3, 3, 64), 48, "inner product"),
]


@pytest.mark.parametrize("xs,cout,how", POINTWISE_FILTERS)
@pytest.mark.parametrize("slow", [False, True])
def test_pointwise_weight_gradient_matches_float64(xs, cout, how, slow, monkeypatch):
    monkeypatch.setattr(convolution, "blas_is_slow", lambda: slow)
    monkeypatch.setattr(linalg, "blas_is_slow", lambda: slow)
    x = RNG.standard_normal(xs).astype("float32")
    g = RNG.standard_normal((*xs[:-1], cout)).astype("float32")
    calls = []
    real = torch.ops.aten.convolution_backward
    monkeypatch.setattr(
        torch.ops.aten, "convolution_backward", lambda *a: calls.append(1) or real(*a)
    )
    kernel_shape = (1, 1, xs[-1], cout)
    got = np.asarray(
        _grad_filter(keratron.convert_to_tensor(x), keratron.convert_to_tensor(g), kernel_shape)
    )
    assert bool(calls) == (slow and how == "convolution")
    want = np.einsum("nhwi,nhwo->io", x.astype("float64"), g.astype("float64"))
    assert got.shape == kernel_shape
    np.testing.assert_allclose(got[0, 0], want, rtol=0, atol=1e-4 * np.abs(want).max())


def test_a_large_pointwise_weight_gradient_runs_on_the_inner_product(monkeypatch):
    # MobileNet's last pointwise gradient at batch 8 has a 1024x1024 product: a matmul keeps
    # one that size on BLAS (for its kept buffer), but nothing keeps a weight gradient's.
    monkeypatch.setattr(convolution, "blas_is_slow", lambda: True)
    monkeypatch.setattr(linalg, "blas_is_slow", lambda: True)
    calls = []
    real = linalg._onednn_linear
    monkeypatch.setattr(linalg, "_onednn_linear", lambda *a: calls.append(1) or real(*a))
    x = RNG.standard_normal((2, 7, 7, 1024)).astype("float32")
    g = RNG.standard_normal((2, 7, 7, 1024)).astype("float32")
    assert not linalg.onednn_gemm(
        torch.from_numpy(x).reshape(-1, 1024).t(), torch.from_numpy(g).reshape(-1, 1024), None
    )
    kernel_shape = (1, 1, 1024, 1024)
    got = np.asarray(
        _grad_filter(keratron.convert_to_tensor(x), keratron.convert_to_tensor(g), kernel_shape)
    )
    assert calls == [1]
    want = np.tensordot(x.astype("float64"), g.astype("float64"), axes=([0, 1, 2], [0, 1, 2]))
    np.testing.assert_allclose(got[0, 0], want, rtol=0, atol=1e-4 * np.abs(want).max())


@pytest.mark.parametrize("padding", [((1, 1), (1, 1)), ((0, 0), (0, 0))], ids=["same", "valid"])
@pytest.mark.parametrize("compiled", [False, True])
def test_depthwise_input_gradient_is_a_full_convolution(padding, compiled):
    # A depthwise 3x3 of channel multiplier 1 at stride 1: its input gradient is oneDNN's
    # depthwise convolution of the output gradient with the flipped kernel, in a kept buffer
    # when compiled.
    gs, c = (4, 32, 32, 96), 96  # 1.5 MB: a plan keeps it
    g = RNG.standard_normal(gs).astype("float32")
    k = (RNG.standard_normal((3, 3, 1, c)) / 3).astype("float32")
    (pt, pb), (pl, pr) = padding
    input_shape = (4, 32 + 2 - pt - pb, 32 + 2 - pl - pr, c)
    assert convolution._full_conv_padding(k.shape, (1, 1), padding, (1, 1), c, torch.float32, 4)

    step = _grad_input_fn(input_shape, (1, 1), padding, c)
    args = (keratron.convert_to_tensor(g), keratron.convert_to_tensor(k))
    fn = keratron.function(step) if compiled else step
    for _ in range(2 if compiled else 1):
        got = np.asarray(fn(*args)) - 0.5
    if compiled:
        assert fn.get_concrete_graph(*args).kept_buffers
    want = _float64_grad_input(g, k, input_shape, padding, groups=c)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-4 * (np.abs(want).max() + 1))


@pytest.mark.parametrize(
    "gs,ks,groups,padding",
    [
        ((5, 16, 16, 64), (3, 3, 1, 64), 64, ((0, 1), (0, 1))),  # MobileNet's stride-2 block
        ((3, 24, 24, 16), (3, 3, 64, 16), 1, ((1, 1), (1, 1))),
    ],
    ids=["depthwise", "dense"],
)
@pytest.mark.parametrize("compiled", [False, True])
def test_a_large_strided_input_gradient_runs_by_images(
    gs, ks, groups, padding, compiled, monkeypatch
):
    # No forward convolution computes a stride-2 input gradient: the reference kernel runs
    # on a few images at a time (here 2, the last chunk 1), into a kept buffer when compiled
    # (over 1 MiB: memory_plan.MIN_BYTES).
    n, h, w, cout = gs
    (pt, pb), (pl, pr) = padding
    input_shape = (n, 2 * h + ks[0] - 2 - pt - pb, 2 * w + ks[1] - 2 - pl - pr, ks[2] * groups)
    per_image = 4 * np.prod(input_shape[1:])
    monkeypatch.setattr(convolution, "_GRAD_INPUT_BY_IMAGES_BYTES", n * per_image)
    monkeypatch.setattr(convolution, "_IMAGES_CHUNK_BYTES", 2 * per_image)
    batches = []
    real = convolution._conv_grad_input_impl
    monkeypatch.setattr(
        convolution,
        "_conv_grad_input_impl",
        lambda g, *a: batches.append(g.shape[0]) or real(g, *a),
    )
    g = RNG.standard_normal(gs).astype("float32")
    k = (RNG.standard_normal(ks) / np.sqrt(np.prod(ks[:-1]))).astype("float32")

    step = _grad_input_fn(input_shape, (2, 2), padding, groups)
    args = (keratron.convert_to_tensor(g), keratron.convert_to_tensor(k))
    fn = keratron.function(step) if compiled else step
    for _ in range(2 if compiled else 1):  # the second call replays with the kept buffer
        batches.clear()
        got = np.asarray(fn(*args)) - 0.5
    assert batches == [2] * (n // 2) + [1] * (n % 2)
    if compiled:  # the writer took its buffer
        assert sum(len(b) for b in fn.get_concrete_graph(*args).kept_buffers) == 1
    want = _float64_grad_input(g, k, input_shape, padding, stride=2, groups=groups)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-4 * (np.abs(want).max() + 1))


@pytest.mark.parametrize("shape,channels", [((4, 17, 17), 24), ((2, 9, 9), 64)])
def test_bfloat16_strided_depthwise_input_gradient_runs_in_float32(shape, channels, monkeypatch):
    # oneDNN's bfloat16 kernel is slow for it: the route computes in float32 from the same
    # bfloat16 values and rounds once.
    n, h, w = shape
    x_shape = (n, h, w, channels)
    g = RNG.standard_normal((n, (h - 3) // 2 + 1, (w - 3) // 2 + 1, channels)).astype("float32")
    k = (RNG.standard_normal((3, 3, 1, channels)) / 3).astype("float32")
    gb = keratron.ops.cast(keratron.convert_to_tensor(g), "bfloat16")
    kb = keratron.ops.cast(keratron.convert_to_tensor(k), "bfloat16")
    seen = []
    real = torch.ops.aten.convolution_backward
    monkeypatch.setattr(
        torch.ops.aten, "convolution_backward", lambda *a: seen.append(a[0].dtype) or real(*a)
    )
    got = conv_grad_input_p.bind(
        gb, kb, input_shape=x_shape, strides=(2, 2), padding=((0, 0), (0, 0)),
        dilation=(1, 1), groups=channels,
    )  # fmt: skip
    assert got.dtype == "bfloat16" and tuple(got.shape) == x_shape
    assert seen == [torch.float32]
    g64 = keratron.ops.cast(gb, "float64").numpy()
    k64 = keratron.ops.cast(kb, "float64").numpy()
    want = (
        torch.nn.grad.conv2d_input(
            (n, channels, h, w),
            torch.from_numpy(k64).permute(3, 2, 0, 1),
            torch.from_numpy(g64).permute(0, 3, 1, 2),
            stride=2,
            groups=channels,
        )
        .permute(0, 2, 3, 1)
        .numpy()
    )
    got64 = keratron.ops.cast(got, "float64").numpy()
    np.testing.assert_allclose(got64, want, rtol=1e-2, atol=1e-2 * np.abs(want).max())


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("activation", [None, "relu"])
def test_a_small_product_is_bound_to_its_blas_call_in_a_plan(bias, activation):
    x = keratron.convert_to_tensor(RNG.standard_normal((32, 24)).astype("float32"))
    w = keratron.convert_to_tensor(RNG.standard_normal((24, 10)).astype("float32"))
    b = keratron.convert_to_tensor(RNG.standard_normal(10).astype("float32")) if bias else None
    plan = keratron.function(_matmul).get_concrete_graph(x, w, b, activation)
    (step,) = [fn for fn, *_ in plan.steps if "_matmul_cpu_step" in fn.__qualname__]
    eager = _matmul(x, w, b, activation)._value  # through the CPU route
    args = (x._value, w._value, None if b is None else b._value)
    torch.testing.assert_close(step(*args), eager, rtol=0, atol=0)
    # Values elsewhere than on the CPU go to the general executor (its meta kernel here).
    meta = step(*(None if a is None else a.to("meta") for a in args))
    assert meta.device.type == "meta" and tuple(meta.shape) == (32, 10)


def test_a_product_the_route_decides_at_run_time_keeps_the_general_step():
    x = keratron.convert_to_tensor(RNG.standard_normal((128, 784)).astype("float32"))
    w = keratron.convert_to_tensor(RNG.standard_normal((784, 512)).astype("float32"))
    plan = keratron.function(_matmul).get_concrete_graph(x, w, None, None)
    assert not [fn for fn, *_ in plan.steps if "_matmul_cpu_step" in fn.__qualname__]
