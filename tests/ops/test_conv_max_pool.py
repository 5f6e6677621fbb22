"""The fused convolution + max pooling of CPU inference plans (`conv_max_pool`): its values
against torch in float64, a chunk of the batch at a time and whole, from the CPU route and
from kept buffers; its gradient; where the compiler uses it and where it must not."""

import importlib

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import keratron as kt
from keratron.autodiff import memory_plan
from keratron.autodiff.function import function
from tests.gradcheck import check_against_torch, check_grads

conv_module = importlib.import_module("keratron.ops.convolution")
ops = kt.ops
F32 = torch.float32
ACTIVATIONS = {
    "relu": torch.relu,
    "relu6": lambda v: v.clamp(0, 6),
    "tanh": torch.tanh,
    None: lambda v: v,
}


def reference(x, k, b, strides, padding, activation, pool, pool_strides):
    """torch, float64: the explicitly padded convolution, the activation, the max pool (NHWC)."""
    xt = torch.as_tensor(np.asarray(x, np.float64)).permute(0, 3, 1, 2)
    pads = [p for pair in reversed(padding) for p in pair]
    w = torch.as_tensor(np.asarray(k, np.float64)).permute(3, 2, 0, 1)
    y = F.conv2d(F.pad(xt, pads), w, torch.as_tensor(np.asarray(b, np.float64)), strides)
    return F.max_pool2d(ACTIVATIONS[activation](y), pool, pool_strides).permute(0, 2, 3, 1)


ROWS = [
    # x, kernel, strides, padding, activation, pool size, pool strides
    ((5, 12, 12, 3), (3, 3, 3, 8), (1, 1), ((0, 0), (0, 0)), "relu", (2, 2), (2, 2)),
    ((5, 15, 13, 4), (3, 3, 4, 6), (1, 1), ((1, 1), (1, 1)), "relu6", (3, 3), (2, 2)),
    ((5, 11, 11, 2), (3, 3, 2, 5), (2, 2), ((0, 0), (0, 0)), None, (2, 3), (1, 2)),
    ((5, 12, 12, 3), (3, 3, 3, 4), (1, 1), ((0, 0), (0, 0)), "tanh", (2, 2), (2, 2)),
]
ROW_IDS = ["relu-2x2", "relu6-same-3x3s2-overlapping", "plain-stride2-2x3s1x2", "tanh-2x2"]


def _params(strides, padding, activation, pool, pool_strides):
    return dict(
        strides=strides,
        padding=padding,
        dilation=(1, 1),
        groups=1,
        activation=activation,
        pool_size=pool,
        pool_strides=pool_strides,
    )


@pytest.mark.parametrize("chunk", [2, None], ids=["chunks-of-2", "whole-batch"])
@pytest.mark.parametrize("row", ROWS, ids=ROW_IDS)
def test_route_and_kept_writer_give_torchs_values(row, chunk, monkeypatch):
    xs, ks, strides, padding, activation, pool, pool_strides = row
    rng = np.random.default_rng(3)
    x = rng.standard_normal(xs).astype(np.float32) * 3
    x[1, 4, 5, 0] = np.nan  # NaN reaches the windows that read it, through relu and relu6
    k = rng.standard_normal(ks).astype(np.float32)
    b = rng.standard_normal(ks[-1]).astype(np.float32)
    want = reference(x, k, b, strides, padding, activation, pool, pool_strides)
    assert torch.isnan(want).any() and not torch.isnan(want).all()
    params = _params(strides, padding, activation, pool, pool_strides)
    conv_out = conv_module._conv_out_spatial(xs, ks[:2], strides, padding, (1, 1))
    image = conv_out[0] * conv_out[1] * ks[-1] * 4
    monkeypatch.setattr(conv_module, "_CHUNK_BYTES", image * (chunk or xs[0]))
    xt, kt_, bt = torch.from_numpy(x), torch.from_numpy(k), torch.from_numpy(b)
    layout = conv_module.kernel_layout_params((xs, F32), (ks, F32), strides, padding, (1, 1), 1)
    laid = conv_module.conv_kernel_layout_p.impl(kt_, **layout)
    avals = conv_module._conv_max_pool_shape((xs, F32), (ks, F32), ((ks[-1],), F32), **params)
    assert avals == [(tuple(want.shape), F32)]
    for kernel in (kt_, laid):  # the plain kernel, and the one inference plans prepack
        got = conv_module._conv_max_pool_cpu(xt, kernel, bt, **params)
        torch.testing.assert_close(got.double(), want, rtol=1e-5, atol=1e-5, equal_nan=True)
        # oneDNN runs the plain convolution and relu/relu6 ones (tanh follows the reference).
        onednn = kernel.is_mkldnn or activation in (None, "relu", "relu6")
        buffers = memory_plan.KeptBuffers()
        for _ in range(2):  # the second call writes over the first call's buffers
            kept = conv_module._conv_max_pool_into(buffers, avals, xt, kernel, bt, **params)
            assert (kept is not None) == onednn
            if kept is not None:
                torch.testing.assert_close(
                    kept.double(), want, rtol=1e-5, atol=1e-5, equal_nan=True
                )
        if onednn:
            assert buffers["conv"].shape[0] == (chunk or xs[0])
    torch.testing.assert_close(
        conv_module._conv_max_pool_impl(xt, kt_, bt, **params).double(),
        want,
        rtol=1e-5,
        atol=1e-5,
        equal_nan=True,
    )


def test_gradients_match_torch_and_central_differences():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 7, 6, 3))
    k = rng.standard_normal((3, 3, 3, 4))
    b = rng.standard_normal(4)
    params = _params((1, 1), ((1, 1), (1, 1)), "relu", (2, 2), (2, 2))

    def ours(x, k, b):
        return conv_module.conv_max_pool_p.bind(x, k, b, **params)

    def torch_fn(x, k, b):
        y = F.conv2d(x.permute(0, 3, 1, 2), k.permute(3, 2, 0, 1), b, 1, 1)
        return F.max_pool2d(torch.relu(y), 2).permute(0, 2, 3, 1)

    check_against_torch(ours, torch_fn, [x, k, b])
    check_grads(ours, [x, k, b])


def _layer_values(shape):
    rng = np.random.default_rng(7)
    x = rng.standard_normal(shape).astype(np.float32)
    k = kt.Variable(rng.standard_normal((3, 3, shape[-1], 8)).astype(np.float32))
    b = kt.Variable(rng.standard_normal(8).astype(np.float32))
    return kt.convert_to_tensor(x), k, b


def test_an_inference_function_fuses_the_convolution_into_its_max_pool():
    x, k, b = _layer_values((6, 10, 10, 3))

    @function
    def infer(x):
        return ops.max_pool(ops.fused_conv(x, k, b, "relu"), 2)

    plan = infer.get_concrete_graph(x).dump()
    assert "conv_max_pool(" in plan and " conv(" not in plan and " max_pool(" not in plan, plan
    want = reference(x.numpy(), k.numpy(), b.numpy(), (1, 1), ((0, 0), (0, 0)), "relu", 2, 2)
    np.testing.assert_allclose(infer(x).numpy(), want.numpy(), rtol=1e-5, atol=1e-5)
    k.assign(k.numpy() * 2)  # the prelude prepacks the kernel again after a write
    want = reference(x.numpy(), k.numpy(), b.numpy(), (1, 1), ((0, 0), (0, 0)), "relu", 2, 2)
    np.testing.assert_allclose(infer(x).numpy(), want.numpy(), rtol=1e-5, atol=1e-5)


def test_no_fusion_where_the_convolution_output_or_the_indices_are_read():
    x, k, b = _layer_values((2, 8, 8, 3))

    @function
    def both(x):  # the convolution's output is returned too
        y = ops.fused_conv(x, k, b, "relu")
        return y, ops.max_pool(y, 2)

    @function
    def train(x):  # the pool's gradient reads the indices and the convolution's output
        with kt.GradientTape() as tape:
            loss = ops.sum(ops.max_pool(ops.fused_conv(x, k, b, "relu"), 2))
        return tape.gradient(loss, k)

    for f in (both, train):
        plan = f.get_concrete_graph(x).dump()
        assert "conv_max_pool(" not in plan and " max_pool(" in plan, plan


def test_keras_predict_of_a_conv_pool_model_matches_torch():
    """The bench's convnet pattern (Conv2D relu -> MaxPooling2D -> Dense) through `predict`,
    with a last batch smaller than the others, against the same weights in torch."""
    model = kt.Sequential(
        [
            kt.Input((12, 12, 2)),
            kt.layers.Conv2D(4, 3, activation="relu"),
            kt.layers.MaxPooling2D(2),
            kt.layers.Flatten(),
            kt.layers.Dense(3),
        ]
    )
    x = np.random.default_rng(9).standard_normal((10, 12, 12, 2)).astype(np.float32)
    got = model.predict(x, batch_size=4, verbose=0)
    k, b, w, c = model.get_weights()
    pooled = reference(x, k, b, (1, 1), ((0, 0), (0, 0)), "relu", 2, 2)
    want = pooled.reshape(10, -1).numpy() @ w.astype(np.float64) + c
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
