"""The compiler's fold of a zero pad into the convolution that alone reads it
(`fold_pads_into_convs` in keratron/ops/convolution.py): which plans it rewrites, and that the
rewritten plans give the eager values, and torch's in float64."""

import numpy as np
import pytest
import torch

import keratron
from keratron import ops

RNG = np.random.default_rng(5)
UNEVEN = ((0, 0), (0, 1), (0, 1), (0, 0))  # MobileNet's pad before a stride-2 depthwise conv


def _depthwise(x, k):
    return ops.relu(ops.depthwise_conv(ops.pad(x, UNEVEN), k, strides=2))


def _dense(widths):
    def f(x, k):
        return ops.conv(ops.pad(x, widths), k, strides=2)

    return f


def _plan_lines(f, *args):
    return f.get_concrete_graph(*args).dump().splitlines()


def _torch_reference(x, k, widths, groups, strides):
    """float64 torch: explicit pad, then a VALID convolution (NCHW inside)."""
    xt = torch.from_numpy(x).double().permute(0, 3, 1, 2)
    (_, _), (pt, pb), (pl, pr), _ = widths
    xt = torch.nn.functional.pad(xt, (pl, pr, pt, pb))
    kt = torch.from_numpy(k).double()
    if groups > 1:  # Keras depthwise (kh, kw, C, 1) -> torch (C, 1, kh, kw)
        kt = kt.permute(2, 3, 0, 1)
    else:  # (kh, kw, cin, cout) -> (cout, cin, kh, kw)
        kt = kt.permute(3, 2, 0, 1)
    y = torch.nn.functional.conv2d(xt, kt, stride=strides, groups=groups)
    return y.permute(0, 2, 3, 1).numpy()


@pytest.mark.parametrize("size", [16, 17])
def test_an_uneven_pad_before_a_depthwise_conv_folds_into_its_padding(size):
    x = RNG.standard_normal((3, size, size, 8)).astype("float32")
    k = RNG.standard_normal((3, 3, 8, 1)).astype("float32")
    f = keratron.function(_depthwise)
    got = np.asarray(f(x, k))
    lines = _plan_lines(f, x, k)
    # No pad of the input remains; the kernel gains a leading zero row and column instead.
    pads = [line for line in lines if " = pad(" in line]
    assert len(pads) == 1 and "widths=((1, 0), (1, 0), (0, 0), (0, 0))" in pads[0]
    assert any("padding=((1, 1), (1, 1))" in line for line in lines if "conv(" in line)
    assert np.array_equal(got, np.asarray(_depthwise(x, k)))
    want = np.maximum(_torch_reference(x, k, UNEVEN, groups=8, strides=2), 0)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-5)


def test_a_symmetric_pad_folds_into_a_dense_conv():
    widths = ((0, 0), (3, 3), (3, 3), (0, 0))  # ResNet's ZeroPadding2D(3) before its 7x7
    x = RNG.standard_normal((2, 20, 20, 3)).astype("float32")
    k = RNG.standard_normal((7, 7, 3, 16)).astype("float32")
    f = keratron.function(_dense(widths))
    got = np.asarray(f(x, k))
    lines = _plan_lines(f, x, k)
    assert not any(" = pad(" in line for line in lines)
    assert any("padding=((3, 3), (3, 3))" in line for line in lines if "conv(" in line)
    assert np.array_equal(got, np.asarray(_dense(widths)(x, k)))
    want = _torch_reference(x, k, widths, groups=1, strides=2)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-4)


def test_an_uneven_pad_before_a_dense_conv_stays():
    # A dense kernel grown to 4x4 would cost more multiply-adds than the pad's copy.
    x = RNG.standard_normal((2, 16, 16, 4)).astype("float32")
    k = RNG.standard_normal((3, 3, 4, 8)).astype("float32")
    f = keratron.function(_dense(UNEVEN))
    f(x, k)
    lines = _plan_lines(f, x, k)
    assert any(" = pad(v0" in line for line in lines)
    assert all("padding=((0, 0), (0, 0))" in line for line in lines if "conv(" in line)


def test_a_pad_read_by_the_gradient_too_stays():
    # In training the kernel gradient reads the padded input as well: nothing folds.
    x = keratron.convert_to_tensor(RNG.standard_normal((2, 9, 9, 4)).astype("float32"))
    k = keratron.Variable(RNG.standard_normal((3, 3, 4, 1)).astype("float32"))

    def loss_and_grad(x):
        with keratron.GradientTape() as tape:
            y = ops.sum(ops.depthwise_conv(ops.pad(x, UNEVEN), k, strides=2))
        return y, tape.gradient(y, k)

    f = keratron.function(loss_and_grad)
    f(x)
    lines = _plan_lines(f, x)
    assert any(" = pad(v0" in line for line in lines)


def test_a_nan_input_reaches_at_least_the_windows_it_reaches_unfolded():
    # The grown kernel's zero taps meet real inputs: NaN spreads to one more window (as the
    # fold's docstring says), never to fewer.
    x = RNG.standard_normal((1, 12, 12, 4)).astype("float32")
    x[0, 5, 7, 2] = np.nan
    k = RNG.standard_normal((3, 3, 4, 1)).astype("float32")
    got = np.asarray(keratron.function(_depthwise)(x, k))
    want = np.asarray(_depthwise(x, k))
    assert np.isnan(want).any()
    assert np.all(np.isnan(got)[np.isnan(want)])
    finite = ~np.isnan(got)
    assert np.array_equal(got[finite], want[finite])


@pytest.mark.parametrize(
    "conv,kshape,folded",
    [(ops.depthwise_conv, (3, 3, 6, 1), True), (ops.conv, (3, 3, 6, 8), False)],
    ids=["depthwise", "dense"],
)
def test_a_convs_own_uneven_same_padding_folds_for_a_depthwise_kernel(conv, kshape, folded):
    # SAME at stride 2 on an even size pads (0, 1): the route would copy the input to pad it.
    def same(x, k):
        return conv(x, k, strides=2, padding="same")

    x = RNG.standard_normal((2, 14, 14, 6)).astype("float32")
    k = RNG.standard_normal(kshape).astype("float32")
    f = keratron.function(same)
    got = np.asarray(f(x, k))
    padding = "((1, 1), (1, 1))" if folded else "((0, 1), (0, 1))"
    assert any(f"padding={padding}" in line for line in _plan_lines(f, x, k) if "conv(" in line)
    assert np.array_equal(got, np.asarray(same(x, k)))
    want = _torch_reference(x, k, UNEVEN, groups=6 if folded else 1, strides=2)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-4)
