"""Values of convolutions and pooling on irregular shapes (odd channel counts, batch 1, SAME
with stride 2 on even and odd sizes, where TensorFlow pads asymmetrically), against
keras.ops on its torch backend and against a NumPy reference of TensorFlow's rules.
"""

import importlib
import itertools

import numpy as np
import pytest
import torch

import keratron as kt
from keratron.autodiff.primitive import PRIMITIVES
from keratron.ops.convolution import same_padding
from tests.conftest import require

ops = kt.ops
R = np.random.default_rng(2)


def f32(*shape):
    return R.standard_normal(shape).astype("float32")


def close(got, want, tol=1e-4):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


def kv(x):
    keras = require("keras")
    return keras.ops.convert_to_numpy(x)


# ------------------------------------------------------------------------------ TF references
def tf_same(size, k, s, d=1):
    """TensorFlow's SAME rule, written out independently of the library."""
    out = (size + s - 1) // s
    total = max((out - 1) * s + (k - 1) * d + 1 - size, 0)
    return out, total // 2, total - total // 2


def np_conv(x, k, strides, padding, dilation=1, groups=1):
    """Direct channels_last convolution in NumPy with TF's SAME rule."""
    nd = x.ndim - 2
    strides = (strides,) * nd if isinstance(strides, int) else strides
    dil = (dilation,) * nd if isinstance(dilation, int) else dilation
    spatial, ks = x.shape[1:-1], k.shape[:-2]
    pads = []
    for size, kk, s, d in zip(spatial, ks, strides, dil):
        if padding == "same":
            pads.append(tf_same(size, kk, s, d)[1:])
        else:
            pads.append((0, 0))
    xp = np.pad(x, [(0, 0), *pads, (0, 0)])
    outs = [(xp.shape[1 + i] - (ks[i] - 1) * dil[i] - 1) // strides[i] + 1 for i in range(nd)]
    cin, cout = x.shape[-1], k.shape[-1]
    cg, og = cin // groups, cout // groups
    y = np.zeros((x.shape[0], *outs, cout))
    for pos in itertools.product(*[range(o) for o in outs]):
        for tap in itertools.product(*[range(kk) for kk in ks]):
            idx = tuple(p * s + t * d for p, s, t, d in zip(pos, strides, tap, dil))
            patch = xp[(slice(None), *idx, slice(None))]
            for g in range(groups):
                y[(slice(None), *pos, slice(g * og, (g + 1) * og))] += (
                    patch[:, g * cg : (g + 1) * cg] @ k[tap][:, g * og : (g + 1) * og]
                )
    return y


def np_pool(x, pool, strides, padding, kind):
    """TF pooling: SAME windows only see unpadded elements (max ignores the pads, the average
    divides by the number of valid elements)."""
    nd = x.ndim - 2
    spatial = x.shape[1:-1]
    outs, los = [], []
    for size, k, s in zip(spatial, pool, strides):
        if padding == "same":
            out, lo, _ = tf_same(size, k, s)
        else:
            out, lo = (size - k) // s + 1, 0
        outs.append(out)
        los.append(lo)
    y = np.zeros((x.shape[0], *outs, x.shape[-1]))
    for pos in itertools.product(*[range(o) for o in outs]):
        sl = []
        for i, o in enumerate(pos):
            a = o * strides[i] - los[i]
            sl.append(slice(max(a, 0), min(a + pool[i], spatial[i])))
        w = x[(slice(None), *sl, slice(None))]
        axes = tuple(range(1, nd + 1))
        y[(slice(None), *pos, slice(None))] = w.max(axes) if kind == "max" else w.mean(axes)
    return y


# ------------------------------------------------------------------------------ SAME rule
@pytest.mark.parametrize(
    "size, k, s, d, want",
    [
        (6, 3, 2, 1, (0, 1)),  # even size, stride 2: the extra pixel goes after
        (7, 3, 2, 1, (1, 1)),
        (8, 4, 2, 1, (1, 1)),
        (5, 4, 3, 1, (1, 1)),
        (8, 5, 3, 1, (1, 2)),
        (5, 3, 1, 2, (2, 2)),
        (4, 1, 2, 1, (0, 0)),
        (9, 2, 1, 1, (0, 1)),
    ],
)
def test_same_padding_matches_tensorflow_rule(size, k, s, d, want):
    assert same_padding(size, k, s, d) == want
    assert tf_same(size, k, s, d)[1:] == want


# ------------------------------------------------------------------------------ convolutions
CONV_CASES = [
    # x shape, kernel shape, strides, padding, dilation
    ((2, 6, 6, 3), (3, 3, 3, 5), 2, "same", 1),
    ((1, 7, 7, 3), (3, 3, 3, 4), 2, "same", 1),
    ((2, 8, 5, 1), (4, 2, 1, 3), 2, "same", 1),
    ((1, 9, 6, 5), (3, 3, 5, 7), 1, "same", 2),
    ((2, 7, 6, 3), (5, 5, 3, 2), 1, "valid", 1),
    ((3, 8, 9, 6), (3, 3, 6, 4), (2, 1), "same", 1),
    ((2, 10, 3), (4, 3, 5), 3, "same", 1),
    ((1, 11, 2), (3, 2, 3), 2, "valid", 2),
    ((1, 4, 5, 3, 2), (3, 2, 3, 2, 3), 2, "same", 1),
]


@pytest.mark.parametrize("case", CONV_CASES, ids=str)
def test_conv_matches_numpy_tf_reference(case):
    xs, ks, st, pad, dil = case
    x, k = f32(*xs), f32(*ks)
    got = ops.conv(x, k, st, pad, dilation_rate=dil)
    assert got.dtype == "float32"
    close(got.numpy(), np_conv(x.astype("float64"), k.astype("float64"), st, pad, dil))


@pytest.mark.parametrize("case", CONV_CASES, ids=str)
def test_conv_matches_keras_both_layouts(case):
    keras = require("keras")
    xs, ks, st, pad, dil = case
    x, k = f32(*xs), f32(*ks)
    close(
        ops.conv(x, k, st, pad, dilation_rate=dil).numpy(),
        kv(keras.ops.conv(x, k, st, pad, dilation_rate=dil)),
    )
    xf = np.moveaxis(x, -1, 1)
    want = kv(keras.ops.conv(xf, k, st, pad, "channels_first", dil))
    close(ops.conv(xf, k, st, pad, "channels_first", dil).numpy(), want)


def test_grouped_conv_matches_reference():
    x, k = f32(2, 5, 6, 6), f32(3, 3, 2, 9)
    close(ops.conv(x, k, 2, "same").numpy(), np_conv(x, k, 2, "same", groups=3))


@pytest.mark.parametrize(
    "xs, ks, st, pad",
    [
        ((2, 7, 6, 3), (3, 3, 3, 2), 2, "same"),
        ((1, 8, 8, 5), (3, 3, 5, 1), 2, "same"),
        ((1, 6, 5, 3), (2, 2, 3, 3), 1, "valid"),
        ((2, 9, 3), (3, 3, 2), 2, "same"),
    ],
)
def test_depthwise_and_separable_match_keras(xs, ks, st, pad):
    keras = require("keras")
    x, k = f32(*xs), f32(*ks)
    close(ops.depthwise_conv(x, k, st, pad).numpy(), kv(keras.ops.depthwise_conv(x, k, st, pad)))
    pk = f32(*((1,) * (len(xs) - 2) + (ks[-2] * ks[-1], 4)))
    close(
        ops.separable_conv(x, k, pk, st, pad).numpy(),
        kv(keras.ops.separable_conv(x, k, pk, st, pad)),
    )
    xf = np.moveaxis(x, -1, 1)
    close(
        ops.depthwise_conv(xf, k, st, pad, "channels_first").numpy(),
        kv(keras.ops.depthwise_conv(xf, k, st, pad, "channels_first")),
    )


def test_depthwise_output_channels_have_multiplier_fastest():
    x = f32(1, 4, 4, 3)
    k = f32(1, 1, 3, 2)
    y = ops.depthwise_conv(x, k).numpy()
    for c in range(3):
        for m in range(2):
            close(y[..., c * 2 + m], x[..., c] * k[0, 0, c, m])


@pytest.mark.parametrize(
    "xs, ks, st, pad, out_pad, dil",
    [
        ((2, 4, 5, 3), (3, 3, 6, 3), 2, "same", None, 1),
        ((2, 4, 5, 3), (3, 3, 6, 3), 2, "valid", None, 1),
        ((2, 4, 5, 3), (4, 4, 6, 3), 2, "same", None, 1),
        ((2, 4, 5, 3), (3, 3, 6, 3), 2, "same", 1, 1),
        ((1, 3, 3, 3), (3, 3, 6, 3), 3, "valid", 1, 1),
        ((1, 3, 3, 3), (2, 2, 2, 3), 3, "valid", None, 1),
        ((2, 5, 3), (3, 2, 3), 2, "same", None, 1),
        ((1, 4, 4, 2), (1, 1, 3, 2), 2, "same", None, 1),
        ((1, 4, 4, 2), (3, 3, 3, 2), 1, "same", None, 2),
        ((1, 3, 4, 2), (3, 3, 1, 2), (2, 1), "valid", (1, 0), 1),
    ],
)
def test_conv_transpose_matches_keras(xs, ks, st, pad, out_pad, dil):
    keras = require("keras")
    x, k = f32(*xs), f32(*ks)
    got = ops.conv_transpose(x, k, st, pad, out_pad, dilation_rate=dil).numpy()
    close(got, kv(keras.ops.conv_transpose(x, k, st, pad, out_pad, dilation_rate=dil)))


def test_conv_transpose_is_the_adjoint_of_conv():
    # <conv(x, k), y> == <x, conv_transpose(y, k)> for a stride-2 SAME conv on an even size.
    x, k = f32(1, 6, 6, 2).astype("float64"), f32(3, 3, 2, 3).astype("float64")
    y = f32(1, 3, 3, 3).astype("float64")
    lhs = float(np.sum(ops.conv(x, k, 2, "same").numpy() * y))
    rhs = float(np.sum(x * ops.conv_transpose(y, k.transpose(0, 1, 2, 3), 2, "same").numpy()))
    np.testing.assert_allclose(lhs, rhs, rtol=1e-10)


def test_fused_conv_values_bias_activation_and_explicit_padding():
    x, k, b = f32(2, 6, 7, 3) * 2, f32(3, 3, 3, 5), f32(5)
    pre = np_conv(x, k, 2, "same") + b
    close(ops.fused_conv(x, k, b, "relu6", 2, "same").numpy(), np.clip(pre, 0, 6))
    close(ops.fused_conv(x, k, b, "tanh", 2, "same").numpy(), np.tanh(pre))
    explicit = ops.fused_conv(x, k, b, None, 2, ((0, 1), (1, 1)))
    close(explicit.numpy(), pre)
    cf = ops.fused_conv(np.moveaxis(x, -1, 1), k, b, "sigmoid", 2, "same", "channels_first")
    close(cf.numpy(), np.moveaxis(1 / (1 + np.exp(-pre)), -1, 1))


def test_fused_conv_depthwise_equals_depthwise_conv():
    x, k = f32(1, 7, 6, 4), f32(3, 3, 4, 2)
    via_groups = ops.fused_conv(x, k.reshape(3, 3, 1, 8), strides=2, padding="same", groups=4)
    close(via_groups.numpy(), ops.depthwise_conv(x, k, 2, "same").numpy())


def test_fused_conv_is_one_primitive_call(monkeypatch):
    calls = []
    prim = PRIMITIVES["conv"]
    orig = type(prim).bind

    def spy(self, *args, **params):
        calls.append(self.name)
        return orig(self, *args, **params)

    monkeypatch.setattr(type(prim), "bind", spy)
    ops.fused_conv(f32(1, 5, 5, 3), f32(3, 3, 3, 4), f32(4), "relu", 2, "same")
    assert calls == ["conv"]


def test_conv_float32_gradients_match_torch():
    x, k = f32(2, 6, 7, 3), f32(3, 3, 3, 4)
    xv, kvv = kt.Variable(x), kt.Variable(k)
    with kt.GradientTape() as tape:
        y = ops.fused_conv(xv, kvv, None, "relu", 2, "same")
        loss = ops.sum(ops.square(y))
    gx, gk = tape.gradient(loss, [xv, kvv])
    xt = torch.tensor(x, requires_grad=True)
    kt_ = torch.tensor(k, requires_grad=True)
    xp = torch.nn.functional.pad(xt.permute(0, 3, 1, 2), (1, 1, 0, 1))
    yt = torch.relu(torch.nn.functional.conv2d(xp, kt_.permute(3, 2, 0, 1), stride=2))
    (yt**2).sum().backward()
    close(gx.numpy(), xt.grad.numpy(), 1e-3)
    close(gk.numpy(), kt_.grad.numpy(), 1e-3)


# ------------------------------------------------------------------------------ pooling
POOL_CASES = [
    ((2, 7, 6, 3), 3, 2, "same"),
    ((2, 8, 8, 3), 2, None, "same"),
    ((1, 8, 8, 5), 3, 2, "same"),
    ((2, 8, 9, 3), 3, 2, "valid"),
    ((1, 6, 7, 2), (3, 2), (2, 3), "same"),
    ((2, 9, 3), 2, 2, "same"),
    ((2, 9, 3), 3, 2, "same"),
    ((1, 10, 1), 4, 3, "valid"),
    ((1, 5, 4, 5, 2), 2, 2, "same"),
    # Stride 1, odd windows: equal padding on both sides, which aten's pooling applies itself.
    ((2, 7, 5, 3), 3, 1, "same"),
    ((1, 6, 7, 2), (5, 3), 1, "same"),
    ((1, 4, 5, 3, 2), 3, 1, "same"),
]


@pytest.mark.parametrize("case", POOL_CASES, ids=str)
@pytest.mark.parametrize("kind", ["max", "avg"])
def test_pooling_matches_tensorflow_rule(case, kind):
    xs, ps, st, pad = case
    nd = len(xs) - 2
    pool = (ps,) * nd if isinstance(ps, int) else ps
    strides = pool if st is None else ((st,) * nd if isinstance(st, int) else st)
    x = f32(*xs)
    fn = ops.max_pool if kind == "max" else ops.average_pool
    want = np_pool(x.astype("float64"), pool, strides, pad, kind)
    close(fn(x, ps, st, pad).numpy(), want)
    xf = np.moveaxis(x, -1, 1)
    close(fn(xf, ps, st, pad, "channels_first").numpy(), np.moveaxis(want, -1, 1))


@pytest.mark.parametrize("case", POOL_CASES, ids=str)
def test_max_pool_matches_keras(case):
    keras = require("keras")
    xs, ps, st, pad = case
    x = f32(*xs)
    close(ops.max_pool(x, ps, st, pad).numpy(), kv(keras.ops.max_pool(x, ps, st, pad)))


def test_same_average_pool_corner_divides_by_valid_count():
    # 4x4 of ones except one corner, pool 3, stride 2, SAME: pads (0, 1) on both axes, so the
    # bottom-right window holds 2x2 valid elements and must average them only.
    x = np.ones((1, 4, 4, 1), "float32")
    x[0, 3, 3, 0] = 5.0
    y = ops.average_pool(x, 3, 2, "same").numpy()[0, :, :, 0]
    np.testing.assert_allclose(y, [[1.0, 1.0], [1.0, 2.0]])


def test_same_max_pool_pads_with_negative_infinity():
    x = -np.arange(1, 26, dtype="float32").reshape(1, 5, 5, 1)
    y = ops.max_pool(x, 2, 2, "same").numpy()[0, :, :, 0]
    assert np.isfinite(y).all()
    np.testing.assert_array_equal(y[-1], [-21.0, -23.0, -25.0])


def test_pool_gradients_route_to_the_right_pixels():
    x = kt.Variable(
        np.array([[1.0, 5.0, 2.0], [3.0, 4.0, 0.0], [7.0, 6.0, 8.0]]).reshape(1, 3, 3, 1)
    )
    with kt.GradientTape() as tape:
        y = ops.sum(ops.max_pool(x, 2, 2, "same"))
    g = tape.gradient(y, x).numpy()[0, :, :, 0]
    np.testing.assert_array_equal(g, [[0, 1, 1], [0, 0, 0], [1, 0, 1]])
    with kt.GradientTape() as tape:
        y = ops.sum(ops.average_pool(x, 2, 2, "same"))
    g = tape.gradient(y, x).numpy()[0, :, :, 0]
    np.testing.assert_allclose(g, [[0.25, 0.25, 0.5], [0.25, 0.25, 0.5], [0.5, 0.5, 1.0]])


# ------------------------------------------------------------------------------ errors, meta
@pytest.mark.parametrize(
    "fn, match",
    [
        (lambda: ops.conv(f32(1, 5, 5, 3), f32(3, 3, 2, 4)), "groups"),
        (lambda: ops.conv(f32(5, 5, 3), f32(3, 3, 3, 4)), "rank"),
        (lambda: ops.conv(f32(1, 5, 5, 3), f32(3, 3, 3, 4), padding="full"), "padding"),
        (lambda: ops.conv(f32(1, 5, 5, 3), f32(3, 3, 3, 4), strides=0), "strides"),
        (lambda: ops.conv(f32(1, 2, 2, 3), f32(3, 3, 3, 4)), "smaller"),
        (lambda: ops.fused_conv(f32(1, 5, 5, 3), f32(3, 3, 3, 4), f32(3)), "bias"),
        (lambda: ops.fused_conv(f32(1, 5, 5, 3), f32(3, 3, 3, 4), activation="elu"), "activation"),
        (lambda: ops.depthwise_conv(f32(1, 5, 5, 3), f32(3, 3, 2, 2)), "depthwise"),
        (lambda: ops.conv_transpose(f32(1, 5, 5, 3), f32(3, 3, 4, 2)), "kernel"),
        (lambda: ops.max_pool(f32(1, 5, 5, 3), 2, padding="causal"), "padding"),
        (lambda: ops.average_pool(f32(1, 5, 5, 3), (2, 2, 2)), "pool_size"),
    ],
)
def test_errors_name_op_and_argument(fn, match):
    with pytest.raises(ValueError, match=match):
        fn()


@pytest.mark.parametrize(
    "name, avals, params, want",
    [
        (
            "conv",
            [(2, 7, 6, 3), (3, 3, 3, 5), (5,)],
            dict(
                strides=(2, 2),
                padding=((1, 1), (0, 1)),
                dilation=(1, 1),
                groups=1,
                activation="gelu",
            ),
            (2, 4, 3, 5),
        ),
        (
            "conv_grad_input",
            [(2, 4, 3, 5), (3, 3, 3, 5)],
            dict(
                input_shape=(2, 7, 6, 3),
                strides=(2, 2),
                padding=((1, 1), (0, 1)),
                dilation=(1, 1),
                groups=1,
            ),
            (2, 7, 6, 3),
        ),
        (
            "conv_grad_filter",
            [(2, 7, 6, 3), (2, 4, 3, 5)],
            dict(
                kernel_shape=(3, 3, 3, 5),
                strides=(2, 2),
                padding=((1, 1), (0, 1)),
                dilation=(1, 1),
                groups=1,
            ),
            (3, 3, 3, 5),
        ),
        (
            "max_pool",
            [(2, 7, 6, 3)],
            dict(pool_size=(3, 3), strides=(2, 2), padding=((1, 1), (0, 1))),
            # The pooled values and, channels first, the argmax indices the backward reuses.
            [((2, 4, 3, 3), torch.float32), ((2, 3, 4, 3), torch.int64)],
        ),
        (
            "avg_pool",
            [(2, 7, 6, 3)],
            dict(pool_size=(3, 3), strides=(2, 2), padding=((1, 1), (0, 1))),
            (2, 4, 3, 3),
        ),
        (
            "avg_pool_grad",
            [(2, 4, 3, 3)],
            dict(
                input_shape=(2, 7, 6, 3), pool_size=(3, 3), strides=(2, 2), padding=((1, 1), (0, 1))
            ),
            (2, 7, 6, 3),
        ),
    ],
)
def test_abstract_eval_on_meta(name, avals, params, want):
    out = PRIMITIVES[name].abstract_eval([(s, torch.float32) for s in avals], params)
    assert out == (want if isinstance(want, list) else [(want, torch.float32)])


def test_pointwise_conv_gemm_path_matches_torch_and_differentiates():
    """1x1 stride-1 convs run as one GEMM over NHWC memory; values and both gradients."""
    import torch

    from tests.gradcheck import check_against_torch, check_grads

    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 5, 3, 7))
    k = rng.standard_normal((1, 1, 7, 4))
    b = rng.standard_normal(4)

    def ours(x, k, b):
        return kt.ops.fused_conv(x, k, b, activation="relu")

    def ref(x, k, b):
        y = torch.nn.functional.conv2d(x.permute(0, 3, 1, 2), k.permute(3, 2, 0, 1), b)
        return torch.relu(y).permute(0, 2, 3, 1)

    check_against_torch(ours, ref, [x, k, b])
    check_grads(ours, [x, k, b])


@pytest.mark.parametrize("activation", ["relu", "relu6", "sigmoid", None])
@pytest.mark.parametrize(
    "xs, ks, groups, strides, padding",
    [
        ((2, 9, 7, 3), (3, 3, 3, 5), 1, (1, 1), ((0, 0), (0, 0))),  # the post-op path
        ((2, 9, 8, 3), (3, 3, 3, 5), 1, (2, 2), ((0, 1), (1, 1))),  # SAME at stride 2
        ((1, 9, 7, 6), (3, 3, 1, 6), 6, (1, 1), ((1, 1), (1, 1))),  # depthwise
        ((1, 50, 45, 7), (1, 1, 7, 4), 1, (1, 1), ((0, 0), (0, 0))),  # 2,250 pixels: oneDNN
        ((1, 40, 50, 7), (1, 1, 7, 4), 1, (1, 1), ((0, 0), (0, 0))),  # 2,000 pixels: GEMM
    ],
    ids=["3x3", "3x3-s2-asymmetric", "depthwise", "1x1-large", "1x1-small"],
)
def test_float32_cpu_conv_paths_equal_conv_then_activation(
    xs, ks, groups, strides, padding, activation, monkeypatch
):
    """Every path of the CPU route (oneDNN with the clamp as a post-op, the 1x1 GEMM, oneDNN
    with a kernel prepacked by conv_kernel_layout) gives the values of torch's convolution
    followed by the activation, and the 1x1 path depends on size; the reference is plain."""
    conv_module = importlib.import_module("keratron.ops.convolution")
    x = torch.from_numpy(f32(*xs) * 4)
    k = torch.from_numpy(f32(*ks))
    b = torch.from_numpy(f32(ks[-1] if groups == 1 else xs[-1]))
    pads = [p for pair in reversed(padding) for p in pair]
    y = torch.nn.functional.conv2d(
        torch.nn.functional.pad(x.permute(0, 3, 1, 2), pads),
        k.permute(3, 2, 0, 1),
        b,
        strides,
        0,
        1,
        groups,
    )
    want = {"relu": y.relu(), "relu6": y.clamp(0, 6), "sigmoid": y.sigmoid(), None: y}
    want = want[activation].permute(0, 2, 3, 1)
    gemms, addmm = [], torch.addmm
    monkeypatch.setattr(torch, "addmm", lambda *a: gemms.append(1) or addmm(*a))
    args = (strides, padding, (1, 1), groups, activation)
    torch.testing.assert_close(conv_module._conv_impl(x, k, b, *args), want, rtol=1e-5, atol=1e-5)
    assert not gemms  # the reference is torch's convolution, whatever the shape
    got = conv_module._conv_cpu(x, k, b, *args)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    assert bool(gemms) == (xs[1] * xs[2] <= conv_module._POINTWISE_GEMM_PIXELS and ks[0] == 1)

    # The inference prelude's kernel: oneDNN's blocked format wherever oneDNN runs the conv.
    params = conv_module.kernel_layout_params(
        (xs, torch.float32), (ks, torch.float32), strides, padding, (1, 1), groups
    )
    assert bool(params) == (not gemms)
    laid = conv_module.conv_kernel_layout_p.impl(k, **params)
    assert laid.is_mkldnn == bool(params)
    torch.testing.assert_close(conv_module._conv_cpu(x, laid, b, *args), want, rtol=1e-5, atol=1e-5)
