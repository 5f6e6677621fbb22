"""Gradient-check table for the nn ops: convolutions (with epilogues), pooling, activations,
softmax, moments and batch normalization.

Each row: (name, keratron fn, torch fn or None, float64 inputs[, check_grads options]). Every
row is checked by float64 central differences; rows with a torch fn also against
torch.autograd (a None torch fn marks ops whose torch counterpart pads differently, e.g. TF's
asymmetric SAME pooling; their values are checked in test_conv_values.py).
"""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import keratron as kt
from keratron.ops.batchnorm import fused_batch_normalization
from tests.gradcheck import check_against_torch, check_grads

ops = kt.ops
R = np.random.default_rng(1)


def nrm(*shape):
    return R.standard_normal(shape)


def pos(*shape):
    return R.uniform(0.5, 2.0, shape)


# ------------------------------------------------------------------------------ torch oracles
def t_conv(x, k, strides=1, pads=None, dilation=1, groups=1):
    """Channels_last conv with explicit (lo, hi) pads, in torch."""
    nd = x.dim() - 2
    xt = x.movedim(-1, 1)
    if pads:
        flat = []
        for lo, hi in reversed(pads):
            flat += [lo, hi]
        xt = F.pad(xt, flat)
    w = k.permute(nd + 1, nd, *range(nd))
    y = (F.conv1d, F.conv2d, F.conv3d)[nd - 1](xt, w, None, strides, 0, dilation, groups)
    return y.movedim(1, -1)


def t_depthwise(x, k, strides=1, pads=None):
    c, m = k.shape[-2:]
    return t_conv(x, k.reshape(*k.shape[:-2], 1, c * m), strides, pads, groups=c)


def t_conv_transpose(x, k, strides, padding, crop):
    """torch conv_transpose with Keras's kernel layout (k..., out, in), then an (lo, hi) crop."""
    nd = x.dim() - 2
    w = k.permute(nd + 1, nd, *range(nd))
    fn = (F.conv_transpose1d, F.conv_transpose2d)[nd - 1]
    y = fn(x.movedim(-1, 1), w, None, strides)
    for d, (lo, hi) in enumerate(crop):
        y = y.narrow(2 + d, lo, y.shape[2 + d] - lo - hi)
    return y.movedim(1, -1)


ACTS = {
    None: lambda y: y,
    "relu": torch.relu,
    "relu6": lambda y: torch.clamp(y, 0, 6),
    "gelu": F.gelu,
    "gelu_tanh": lambda y: F.gelu(y, approximate="tanh"),
    "sigmoid": torch.sigmoid,
    "tanh": torch.tanh,
}


def _fused_conv_row(act):
    # 6x7 input, k3 s2 SAME: H pads (0, 1), W pads (1, 1).
    return (
        f"fused_conv_{act}",
        lambda x, k, b: ops.fused_conv(x, k, b, act, strides=2, padding="same"),
        lambda x, k, b: ACTS[act](t_conv(x, k, 2, ((0, 1), (1, 1))) + b),
        [nrm(2, 6, 7, 3) * 2, nrm(3, 3, 3, 4), nrm(4)],
    )


CONV_ROWS = [
    (
        "conv2d_s2_same_even",
        lambda x, k: ops.conv(x, k, 2, "same"),
        lambda x, k: t_conv(x, k, 2, ((0, 1), (0, 1))),
        [nrm(2, 6, 6, 3), nrm(3, 3, 3, 4)],
    ),
    (
        "conv2d_s2_same_odd",
        lambda x, k: ops.conv(x, k, 2, "same"),
        lambda x, k: t_conv(x, k, 2, ((1, 1), (1, 1))),
        [nrm(1, 7, 5, 2), nrm(3, 3, 2, 3)],
    ),
    (
        "conv2d_valid_rect",
        lambda x, k: ops.conv(x, k, (1, 2), "valid"),
        lambda x, k: t_conv(x, k, (1, 2)),
        [nrm(2, 5, 6, 3), nrm(2, 3, 3, 2)],
    ),
    (
        "conv2d_dilation2_same",
        lambda x, k: ops.conv(x, k, 1, "same", dilation_rate=2),
        lambda x, k: t_conv(x, k, 1, ((2, 2), (2, 2)), dilation=2),
        [nrm(1, 6, 7, 2), nrm(3, 3, 2, 3)],
    ),
    (
        "conv2d_groups",
        lambda x, k: ops.conv(x, k),
        lambda x, k: t_conv(x, k, groups=2),
        [nrm(2, 5, 5, 4), nrm(3, 3, 2, 6)],
    ),
    (
        "conv2d_channels_first",
        lambda x, k: ops.conv(x, k, 2, "same", data_format="channels_first"),
        lambda x, k: t_conv(x.movedim(1, -1), k, 2, ((0, 1), (1, 1))).movedim(-1, 1),
        [nrm(2, 3, 6, 5), nrm(3, 3, 3, 4)],
    ),
    (
        "conv1d_s2_same",
        lambda x, k: ops.conv(x, k, 2, "same"),
        lambda x, k: t_conv(x, k, 2, ((1, 1),)),
        [nrm(2, 8, 3), nrm(4, 3, 5)],
    ),
    (
        "conv1d_dilation2",
        lambda x, k: ops.conv(x, k, 1, "valid", dilation_rate=2),
        lambda x, k: t_conv(x, k, 1, dilation=2),
        [nrm(2, 9, 3), nrm(3, 3, 2)],
    ),
    (
        "conv1d_causal_fused",
        lambda x, k, b: ops.fused_conv(x, k, b, "tanh", padding="causal", dilation_rate=2),
        lambda x, k, b: torch.tanh(t_conv(x, k, 1, ((4, 0),), dilation=2) + b),
        [nrm(2, 7, 3), nrm(3, 3, 2), nrm(2)],
    ),
    (
        "conv3d_same",
        lambda x, k: ops.conv(x, k, 2, "same"),
        lambda x, k: t_conv(x, k, 2, ((0, 1), (1, 1), (0, 1))),
        [nrm(1, 4, 5, 4, 2), nrm(3, 3, 3, 2, 2)],
    ),
    *[_fused_conv_row(act) for act in ACTS],
    (
        "fused_conv_depthwise_groups",
        lambda x, k, b: ops.fused_conv(x, k, b, "relu6", padding="same", groups=3),
        lambda x, k, b: torch.clamp(t_conv(x, k, 1, ((1, 1), (1, 1)), groups=3) + b, 0, 6),
        [nrm(2, 5, 4, 3) * 3, nrm(3, 3, 1, 6), nrm(6)],
    ),
    (
        "depthwise_s2_same",
        lambda x, k: ops.depthwise_conv(x, k, 2, "same"),
        lambda x, k: t_depthwise(x, k, 2, ((0, 1), (1, 1))),
        [nrm(2, 6, 5, 3), nrm(3, 3, 3, 2)],
    ),
    (
        "depthwise_1d",
        lambda x, k: ops.depthwise_conv(x, k, 1, "valid"),
        lambda x, k: t_depthwise(x, k),
        [nrm(2, 7, 3), nrm(3, 3, 2)],
    ),
    (
        "separable",
        lambda x, dk, pk: ops.separable_conv(x, dk, pk, 1, "same"),
        lambda x, dk, pk: t_conv(t_depthwise(x, dk, 1, ((1, 1), (1, 1))), pk),
        [nrm(1, 5, 6, 3), nrm(3, 3, 3, 2), nrm(1, 1, 6, 4)],
    ),
    (
        "conv_transpose_s2_same",
        lambda x, k: ops.conv_transpose(x, k, 2, "same"),
        # natural size (in-1)*2+3 = 2*in+1; Keras "same" gives 2*in, cropping the last row.
        lambda x, k: t_conv_transpose(x, k, 2, "same", ((0, 1), (0, 1))),
        [nrm(2, 3, 4, 3), nrm(3, 3, 5, 3)],
    ),
    (
        "conv_transpose_valid",
        lambda x, k: ops.conv_transpose(x, k, 2, "valid"),
        lambda x, k: t_conv_transpose(x, k, 2, "valid", ((0, 0), (0, 0))),
        [nrm(1, 3, 3, 2), nrm(3, 3, 4, 2)],
    ),
    (
        "conv_transpose_1d_same",
        lambda x, k: ops.conv_transpose(x, k, 3, "same"),
        # natural (in-1)*3+4 = 3*in+1; "same" gives 3*in, cropping the last step.
        lambda x, k: t_conv_transpose(x, k, 3, "same", ((0, 1),)),
        [nrm(2, 4, 3), nrm(4, 2, 3)],
    ),
    (
        "conv_transpose_channels_first",
        lambda x, k: ops.conv_transpose(x, k, 2, "same", data_format="channels_first"),
        lambda x, k: t_conv_transpose(x.movedim(1, -1), k, 2, "same", ((0, 1), (0, 1))).movedim(
            -1, 1
        ),
        [nrm(1, 3, 3, 4), nrm(3, 3, 2, 3)],
    ),
]

POOL_ROWS = [
    (
        "max_pool_valid",
        lambda x: ops.max_pool(x, 2),
        lambda x: F.max_pool2d(x.movedim(-1, 1), 2).movedim(1, -1),
        [nrm(2, 6, 7, 3)],
    ),
    (
        "max_pool_s1_same_sym",
        lambda x: ops.max_pool(x, 3, 1, "same"),
        lambda x: F.max_pool2d(x.movedim(-1, 1), 3, 1, 1).movedim(1, -1),
        [nrm(2, 5, 4, 3)],
    ),
    ("max_pool_s2_same_asym", lambda x: ops.max_pool(x, 3, 2, "same"), None, [nrm(2, 6, 7, 3)]),
    ("max_pool_1d_same", lambda x: ops.max_pool(x, 2, 2, "same"), None, [nrm(2, 7, 3)]),
    (
        "max_pool_channels_first",
        lambda x: ops.max_pool(x, (2, 3), (2, 1), data_format="channels_first"),
        lambda x: F.max_pool2d(x, (2, 3), (2, 1)),
        [nrm(2, 3, 6, 5)],
    ),
    ("max_pool_3d_same", lambda x: ops.max_pool(x, 2, 2, "same"), None, [nrm(1, 3, 4, 5, 2)]),
    (
        "avg_pool_valid",
        lambda x: ops.average_pool(x, (2, 3), 2),
        lambda x: F.avg_pool2d(x.movedim(-1, 1), (2, 3), 2).movedim(1, -1),
        [nrm(2, 6, 7, 3)],
    ),
    (
        "avg_pool_s1_same_sym",
        lambda x: ops.average_pool(x, 3, 1, "same"),
        lambda x: F.avg_pool2d(x.movedim(-1, 1), 3, 1, 1, count_include_pad=False).movedim(1, -1),
        [nrm(2, 5, 4, 3)],
    ),
    ("avg_pool_s2_same_asym", lambda x: ops.average_pool(x, 3, 2, "same"), None, [nrm(2, 6, 7, 3)]),
    ("avg_pool_1d_same", lambda x: ops.average_pool(x, 3, 2, "same"), None, [nrm(2, 8, 3)]),
    (
        "avg_pool_channels_first_same",
        lambda x: ops.average_pool(x, 2, 2, "same", data_format="channels_first"),
        None,
        [nrm(1, 2, 5, 5)],
    ),
]


ACT_ROWS = [
    ("relu", ops.relu, torch.relu, [nrm(3, 4)]),
    ("relu6", ops.relu6, F.relu6, [nrm(3, 4) * 5]),
    ("sigmoid", ops.sigmoid, torch.sigmoid, [nrm(3, 4) * 3]),
    ("tanh", ops.tanh, torch.tanh, [nrm(3, 4)]),
    ("softplus", ops.softplus, F.softplus, [nrm(3, 4) * 3]),
    ("log_sigmoid", ops.log_sigmoid, F.logsigmoid, [nrm(3, 4) * 3]),
    ("silu", ops.silu, F.silu, [nrm(3, 4) * 3]),
    ("swish", ops.swish, F.silu, [nrm(3, 4)]),
    ("gelu_approx", ops.gelu, lambda x: F.gelu(x, approximate="tanh"), [nrm(3, 4) * 2]),
    ("gelu_exact", lambda x: ops.gelu(x, approximate=False), F.gelu, [nrm(3, 4) * 2]),
    ("elu", ops.elu, F.elu, [nrm(3, 4) * 2]),
    ("elu_alpha", lambda x: ops.elu(x, alpha=0.5), lambda x: F.elu(x, 0.5), [nrm(3, 4) * 2]),
    ("selu", ops.selu, F.selu, [nrm(3, 4) * 2]),
    ("celu", lambda x: ops.celu(x, 1.5), lambda x: F.celu(x, 1.5), [nrm(3, 4) * 2]),
    ("softsign", ops.softsign, F.softsign, [nrm(3, 4) * 2]),
    ("hard_sigmoid", ops.hard_sigmoid, F.hardsigmoid, [nrm(3, 4) * 4]),
    ("hard_silu", ops.hard_silu, F.hardswish, [nrm(3, 4) * 4]),
    ("hard_swish", ops.hard_swish, F.hardswish, [nrm(3, 4) * 4]),
    ("leaky_relu", ops.leaky_relu, lambda x: F.leaky_relu(x, 0.2), [nrm(3, 4)]),
    (
        "leaky_relu_slope",
        lambda x: ops.leaky_relu(x, negative_slope=0.01),
        lambda x: F.leaky_relu(x, 0.01),
        [nrm(3, 4)],
    ),
    (
        "sparse_sigmoid",
        ops.sparse_sigmoid,
        lambda x: torch.clamp((x + 1) / 2, 0, 1),
        [nrm(3, 4) * 2],
    ),
    (
        "sparse_plus",
        ops.sparse_plus,
        lambda x: torch.where(x <= -1, 0 * x, torch.where(x < 1, (x + 1) ** 2 / 4, x)),
        [nrm(3, 4) * 2],
    ),
    ("squareplus", ops.squareplus, lambda x: (x + torch.sqrt(x * x + 4)) / 2, [nrm(3, 4)]),
    ("tanh_shrink", ops.tanh_shrink, F.tanhshrink, [nrm(3, 4)]),
    ("hard_tanh", ops.hard_tanh, F.hardtanh, [nrm(3, 4) * 2]),
    ("hard_shrink", ops.hard_shrink, F.hardshrink, [nrm(3, 4)]),
    ("soft_shrink", ops.soft_shrink, F.softshrink, [nrm(3, 4)]),
    (
        "threshold",
        lambda x: ops.threshold(x, 0.3, -2.0),
        lambda x: F.threshold(x, 0.3, -2.0),
        [nrm(3, 4)],
    ),
    ("glu", ops.glu, F.glu, [nrm(3, 4)]),
    ("glu_axis0", lambda x: ops.glu(x, axis=0), lambda x: F.glu(x, 0), [nrm(4, 3)]),
    ("softmax", ops.softmax, lambda x: torch.softmax(x, -1), [nrm(3, 5) * 3]),
    ("softmax_axis0", lambda x: ops.softmax(x, 0), lambda x: torch.softmax(x, 0), [nrm(3, 5)]),
    (
        "softmax_axes",
        lambda x: ops.softmax(x, (1, 2)),
        lambda x: torch.softmax(x.reshape(2, -1), -1).reshape(x.shape),
        [nrm(2, 3, 4)],
    ),
    (
        "softmax_none",
        lambda x: ops.softmax(x, None),
        lambda x: torch.softmax(x.reshape(-1), 0).reshape(x.shape),
        [nrm(2, 3)],
    ),
    ("log_softmax", ops.log_softmax, lambda x: torch.log_softmax(x, -1), [nrm(3, 5) * 3]),
    (
        "log_softmax_axes",
        lambda x: ops.log_softmax(x, (0, 2)),
        lambda x: (
            torch.log_softmax(x.movedim(1, 0).reshape(3, -1), -1).reshape(3, 2, 4).movedim(0, 1)
        ),
        [nrm(2, 3, 4)],
    ),
]


def t_bn(x, m, v, o, s, axis=-1, eps=1e-3):
    shape = [1] * x.dim()
    shape[axis] = -1
    m, v, o, s = (t.reshape(shape) for t in (m, v, o, s))
    return (x - m) / torch.sqrt(v + eps) * s + o


def t_bn_train(x, dims, axis, eps, o=None, s=None):
    """Batch normalization with the batch statistics over `dims`: (y, mean, variance)."""
    mean, var = x.mean(dims), x.var(dims, unbiased=False)
    o = torch.zeros_like(mean) if o is None else o
    s = torch.ones_like(mean) if s is None else s
    return t_bn(x, mean, var, o, s, axis, eps), mean, var


NORM_ROWS = [
    (
        "moments",
        lambda x: ops.moments(x, [0, 1]),
        lambda x: (x.mean((0, 1)), x.var((0, 1), unbiased=False)),
        [nrm(2, 3, 4)],
    ),
    (
        "moments_keepdims",
        lambda x: ops.moments(x, -1, keepdims=True),
        lambda x: (x.mean(-1, keepdim=True), x.var(-1, unbiased=False, keepdim=True)),
        [nrm(3, 5)],
    ),
    (
        "batch_normalization",
        lambda x, m, v, o, s: ops.batch_normalization(x, m, v, -1, o, s),
        t_bn,
        [nrm(2, 3, 4), nrm(4), pos(4), nrm(4), nrm(4)],
    ),
    (
        "batch_normalization_axis1",
        lambda x, m, v, o, s: ops.batch_normalization(x, m, v, 1, o, s, epsilon=1e-2),
        lambda x, m, v, o, s: t_bn(x, m, v, o, s, 1, 1e-2),
        [nrm(2, 3, 4), nrm(3), pos(3), nrm(3), nrm(3)],
    ),
    (
        "batch_normalization_no_affine",
        lambda x, m, v: ops.batch_normalization(x, m, v, -1),
        lambda x, m, v: (x - m) / torch.sqrt(v + 1e-3),
        [nrm(3, 4), nrm(4), pos(4)],
    ),
    (
        "batch_normalization_with_moments",
        lambda x, o, s: ops.batch_normalization(x, *ops.moments(x, [0, 1, 2]), 3, o, s),
        lambda x, o, s: t_bn(x, x.mean((0, 1, 2)), x.var((0, 1, 2), unbiased=False), o, s),
        [nrm(2, 3, 3, 4), nrm(4), nrm(4)],
    ),
    (
        "fused_batch_normalization",
        lambda x, o, s: fused_batch_normalization(x, 3, s, o),
        lambda x, o, s: t_bn_train(x, (0, 1, 2), 3, 1e-3, o, s),
        [nrm(2, 3, 3, 4), nrm(4), nrm(4)],
    ),
    (
        "fused_batch_normalization_axis1_no_affine",
        lambda x: fused_batch_normalization(x, 1, epsilon=1e-2),
        lambda x: t_bn_train(x, (0, 2), 1, 1e-2),
        [nrm(4, 3, 5)],
    ),
    ("normalize", ops.normalize, lambda x: F.normalize(x, dim=-1, eps=1e-7), [nrm(3, 4)]),
    (
        "normalize_l1",
        lambda x: ops.normalize(x, axis=0, order=1),
        lambda x: F.normalize(x, p=1, dim=0, eps=1e-7),
        [nrm(3, 4)],
    ),
]

ROWS = CONV_ROWS + POOL_ROWS + ACT_ROWS + NORM_ROWS


@pytest.mark.parametrize("row", ROWS, ids=[r[0] for r in ROWS])
def test_grad_finite_differences(row):
    _, fn, _, args, *opts = row
    check_grads(fn, args, **(opts[0] if opts else {}))


TORCH_ROWS = [r for r in ROWS if r[2] is not None]


@pytest.mark.parametrize("row", TORCH_ROWS, ids=[r[0] for r in TORCH_ROWS])
def test_grad_against_torch(row):
    _, fn, torch_fn, args, *_ = row
    check_against_torch(fn, torch_fn, args)


@pytest.mark.parametrize(
    "name, fn, args",
    [
        ("sigmoid", ops.sigmoid, [nrm(2, 3)]),
        ("softmax", ops.softmax, [nrm(2, 4)]),
        ("log_softmax", lambda x: ops.log_softmax(x, 0), [nrm(3, 2)]),
        ("gelu", ops.gelu, [nrm(5)]),
        ("silu", ops.silu, [nrm(5)]),
        ("moments", lambda x: ops.moments(x, 1), [nrm(2, 4)]),
        (
            "fused_batch_normalization",
            lambda x, s: fused_batch_normalization(x, -1, s, None)[0],
            [nrm(3, 2, 3), nrm(3)],
        ),
        ("conv2d_same", lambda x, k: ops.conv(x, k, 2, "same"), [nrm(1, 5, 4, 2), nrm(3, 3, 2, 2)]),
        (
            "fused_conv_tanh",
            lambda x, k, b: ops.fused_conv(x, k, b, "tanh", padding="same"),
            [nrm(1, 4, 3, 2), nrm(3, 3, 2, 2), nrm(2)],
        ),
        (
            "conv_transpose",
            lambda x, k: ops.conv_transpose(x, k, 2, "same"),
            [nrm(1, 3, 2, 2), nrm(3, 3, 2, 2)],
        ),
        # Squared so the second derivative (through max_pool_grad and its gather) is nonzero.
        ("max_pool_sq", lambda x: ops.square(ops.max_pool(x, 2, 1, "same")), [nrm(1, 4, 5, 2)]),
        ("avg_pool_sq", lambda x: ops.square(ops.average_pool(x, 3, 2, "same")), [nrm(1, 5, 4, 2)]),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_second_order(name, fn, args):
    check_grads(fn, args, order=2)


@pytest.mark.parametrize("shape", [(4, 5, 6, 3), (7, 2), (0, 3)])
@pytest.mark.parametrize("affine", [False, True])
def test_batch_norm_statistics_agree_on_both_devices_forms(shape, affine):
    """The CUDA form (torch's batch-norm kernel) and the CPU form (sums) of the fused batch
    normalization, both run here, against float64."""
    from keratron.ops import batchnorm

    rng = np.random.default_rng(5)
    x = torch.as_tensor(rng.standard_normal(shape) * 3 + 40, dtype=torch.float32)
    c = shape[-1]
    scale = torch.as_tensor(rng.uniform(0.5, 2, c), dtype=torch.float32) if affine else None
    offset = torch.as_tensor(rng.standard_normal(c), dtype=torch.float32) if affine else None
    x64 = x.double()
    mean = x64.mean(tuple(range(x.ndim - 1)))
    var = x64.var(tuple(range(x.ndim - 1)), unbiased=False)
    y = (x64 - mean) / torch.sqrt(var + 1e-3)
    if affine:
        y = y * scale.double() + offset.double()
    forms = [batchnorm._normalize_by_sums]
    if x.numel():  # the CUDA form takes the sums for an empty batch (torch's kernel refuses it)
        forms.append(batchnorm._normalize_native)
    for form in forms:
        got = form(x.clone(), scale, offset, 1e-3)
        for a, b in zip(got, (y, mean, var)):
            assert a.dtype == torch.float32 and a.shape == b.shape
            np.testing.assert_allclose(a.double(), b, rtol=2e-5, atol=2e-5, equal_nan=True)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_fused_batch_normalization_of_half_inputs_reduces_in_float32(dtype):
    rng = np.random.default_rng(6)
    x = (rng.standard_normal((64, 3)) * 2 + 300).astype("float32")
    scale, offset = rng.uniform(0.5, 2, 3).astype("float32"), rng.standard_normal(3)
    half = kt.ops.cast(x, dtype)
    y, mean, var = fused_batch_normalization(half, -1, scale, offset)
    assert (y.dtype, mean.dtype, var.dtype) == (dtype,) * 3
    x64 = kt.ops.cast(half, "float64").numpy()  # the values the half tensor holds
    m, v = x64.mean(0), x64.var(0)
    want = (x64 - m) / np.sqrt(v + 1e-3) * scale + offset
    tol = 1e-2 if dtype == "float16" else 5e-2
    np.testing.assert_allclose(kt.ops.cast(y, "float64").numpy(), want, rtol=tol, atol=tol)
    np.testing.assert_allclose(kt.ops.cast(var, "float64").numpy(), v, rtol=tol)


def test_fused_batch_normalization_rejects_what_it_cannot_normalize():
    with pytest.raises(TypeError, match="`x` must be a float tensor"):
        fused_batch_normalization(np.ones((2, 3), "int32"))
    with pytest.raises(ValueError, match="at least 2 dimensions"):
        fused_batch_normalization(np.ones(3, "float32"))
    with pytest.raises(ValueError, match=r"`scale` must have shape \(3,\)"):
        fused_batch_normalization(np.ones((2, 3), "float32"), scale=np.ones(4, "float32"))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("affine", [True, False])
def test_fused_batch_normalization_of_half_inputs_in_torchs_kernels(dtype, affine, monkeypatch):
    # A half x goes to the primitive as it is (no float32 copy): y in x's dtype, statistics
    # in float32 when asked; values and gradients against float64 from the same half values.
    from keratron.ops import batchnorm

    calls = []
    real = batchnorm._bn_half
    monkeypatch.setattr(batchnorm, "_bn_half", lambda *a: calls.append(a[0].dtype) or real(*a))
    rng = np.random.default_rng(7)
    x = (rng.standard_normal((6, 5, 4, 8)) * 2 + 3).astype("float32")
    scale = rng.uniform(0.5, 2, 8).astype("float32") if affine else None
    offset = rng.standard_normal(8).astype("float32") if affine else None
    g = rng.standard_normal(x.shape).astype("float32")
    half = kt.ops.cast(x, dtype)
    args = [half] + ([kt.Variable(scale), kt.Variable(offset)] if affine else [])
    with kt.GradientTape() as tape:
        tape.watch(half)
        y, mean, var = fused_batch_normalization(half, -1, *args[1:], statistics_dtype="float32")
        loss = kt.ops.sum(kt.ops.cast(y, "float32") * g)
    grads = tape.gradient(loss, args)
    assert calls and set(calls) == {getattr(torch, dtype)}
    assert (y.dtype, mean.dtype, var.dtype) == (dtype, "float32", "float32")
    x64 = kt.ops.cast(half, "float64").numpy()
    m, v = x64.mean((0, 1, 2)), x64.var((0, 1, 2))
    xhat = (x64 - m) / np.sqrt(v + 1e-3)
    s64 = scale.astype("float64") if affine else 1.0
    want = xhat * s64 + (offset if affine else 0.0)
    tol = 1e-2 if dtype == "float16" else 4e-2
    np.testing.assert_allclose(kt.ops.cast(y, "float64").numpy(), want, rtol=tol, atol=tol)
    np.testing.assert_allclose(mean.numpy(), m, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(var.numpy(), v, rtol=1e-4)
    # d/dx of sum(g * y): (s / std) * (g - mean(g) - xhat * mean(g * xhat)), with g as the
    # half-precision cotangent y receives.
    g = kt.ops.cast(kt.ops.cast(g, dtype), "float64").numpy()
    n = x64.size // 8
    gm, gx = g.sum((0, 1, 2)) / n, (g * xhat).sum((0, 1, 2)) / n
    dx = s64 / np.sqrt(v + 1e-3) * (g - gm - xhat * gx)
    got_dx = kt.ops.cast(grads[0], "float64").numpy()
    assert grads[0].dtype == dtype
    np.testing.assert_allclose(got_dx, dx, rtol=tol, atol=tol * np.abs(dx).max())
    if affine:
        np.testing.assert_allclose(grads[1].numpy(), (g * xhat).sum((0, 1, 2)), rtol=1e-3)
        np.testing.assert_allclose(grads[2].numpy(), g.sum((0, 1, 2)), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("shape", [(5, 7, 9, 6), (3, 40, 40, 16)])
@pytest.mark.parametrize("affine", [False, True])
def test_batch_norm_input_gradient_by_chunks_matches_float64(shape, affine, monkeypatch):
    """The CPU input gradient by chunks (dense channels-last float32 batches from 4 MiB on)
    and torch's kernel (the reference) against float64, with chunks of a few rows and a
    ragged last one."""
    from keratron.ops import batchnorm

    monkeypatch.setattr(batchnorm, "_CHUNK_BYTES", 1000)
    rng = np.random.default_rng(6)
    c = shape[-1]
    x = torch.as_tensor(rng.standard_normal(shape) * 3 + 40, dtype=torch.float32)
    gy = torch.as_tensor(rng.standard_normal(shape), dtype=torch.float32)
    scale = torch.as_tensor(rng.uniform(0.5, 2, c), dtype=torch.float32) if affine else None
    _, mean, var = batchnorm._normalize_by_sums(x, scale, None, 1e-3)
    x64, g64 = x.double().reshape(-1, c), gy.double().reshape(-1, c)
    invstd = torch.rsqrt(var.double() + 1e-3)
    xhat = (x64 - mean.double()) * invstd
    dscale, doffset = (g64 * xhat).sum(0), g64.sum(0)
    k = invstd if scale is None else invstd * scale.double()
    dx = k * (g64 - doffset / len(x64) - xhat * dscale / len(x64))
    want = (dx.reshape(shape), dscale, doffset)
    for form in (batchnorm._bn_grad_by_chunks, batchnorm._bn_grad_impl):
        args = (gy, x, scale, mean, var) + ((-1,) if form is batchnorm._bn_grad_impl else ())
        got = form(*args, epsilon=1e-3)
        for a, b in zip(got, want):
            assert a.dtype == torch.float32 and a.shape == b.shape
            np.testing.assert_allclose(a.double(), b, rtol=0, atol=2e-5 * b.abs().max().item())
