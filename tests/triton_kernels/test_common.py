"""What the kernel modules share: one float32 precision setting, one activation encoding with
torch's NaN policy (checked in the interpreter process)."""

import pytest
import torch
import triton
import triton.language as tl

import keratron as kt
from keratron.ops import epilogue
from keratron.triton_kernels import _common, conv2d, matmul


def _recorded_precisions(run):
    with _common.record_launches() as launches:
        run()
    return {meta["PRECISION"] for _, _, meta in launches if "PRECISION" in meta}


def _dense_and_conv():
    matmul.matmul_route(torch.randn(5, 7), torch.randn(7, 3), None, "relu")
    params = dict(strides=(1, 1), padding=((1, 1), (1, 1)), dilation=(1, 1), groups=1)
    conv2d.conv_route(
        torch.randn(1, 5, 5, 3), torch.randn(3, 3, 3, 4), None, activation=None, **params
    )


def test_float32_precision_setting_reaches_the_kernels_and_restores_torch_flags(monkeypatch):
    cublas, cudnn = torch.backends.cuda.matmul, torch.backends.cudnn
    assert kt.config.float32_matmul_precision() == "ieee"
    assert _recorded_precisions(_dense_and_conv) == {"ieee"}
    kt.config.set_float32_matmul_precision("tf32")
    try:
        assert kt.config.tensor_float_32_execution_enabled()
        assert _recorded_precisions(_dense_and_conv) == {"tf32"}
        # The setter is the documented way to change torch's flags too.
        assert cublas.allow_tf32 and cudnn.allow_tf32
        # Half precision products are exact whatever the setting.
        half = torch.randn(5, 7, dtype=torch.float16), torch.randn(7, 3, dtype=torch.float16)
        assert _recorded_precisions(lambda: matmul.matmul_route(*half, None, None)) == {"ieee"}
    finally:
        kt.config.set_float32_matmul_precision("ieee")  # the fixture restores torch's flags
    assert (cublas.allow_tf32, cudnn.allow_tf32) == (False, False)
    kt.config.set_float32_matmul_precision(None)
    monkeypatch.setenv("KERATRON_FLOAT32_PRECISION", "tf32")
    assert _recorded_precisions(_dense_and_conv) == {"tf32"}
    # The environment variable leaves torch's flags alone; a scope applies them and restores.
    assert (cublas.allow_tf32, cudnn.allow_tf32) == (False, False)
    with kt.config.float32_precision_scope():
        assert cublas.allow_tf32 and cudnn.allow_tf32
    assert (cublas.allow_tf32, cudnn.allow_tf32) == (False, False)
    monkeypatch.setenv("KERATRON_FLOAT32_PRECISION", "fp8")
    with pytest.raises(ValueError, match="KERATRON_FLOAT32_PRECISION"):
        kt.config.float32_matmul_precision()
    with pytest.raises(ValueError, match="Received: precision='high'"):
        kt.config.set_float32_matmul_precision("high")


def test_one_encoding_is_ops_epilogue():
    for name in epilogue.ACTIVATIONS:
        assert _common.activation_code("matmul", name) == epilogue.code(name)
    with pytest.raises(NotImplementedError, match="swish"):
        _common.activation_code("conv", "swish")


@pytest.mark.parametrize("activation", ["relu", "relu6"])
def test_nan_propagates_through_relu_in_matmul_and_conv(activation):
    x = torch.randn(4, 6)
    x[1, 2] = float("nan")
    w = torch.randn(6, 5)
    got = matmul.matmul_route(x, w, None, activation)
    want = epilogue.apply(x @ w, activation)
    torch.testing.assert_close(got, want, equal_nan=True, rtol=2e-4, atol=2e-4)
    assert got[1].isnan().all() and not got[0].isnan().any()
    xi = torch.randn(1, 4, 4, 2)
    xi[0, 1, 1, 0] = float("nan")
    params = dict(strides=(1, 1), padding=((0, 0), (0, 0)), dilation=(1, 1), groups=1)
    got = conv2d.conv_route(xi, torch.randn(1, 1, 2, 3), None, activation=activation, **params)
    assert got[0, 1, 1].isnan().all() and got.isnan().sum() == 3


@triton.jit
def _store_block_kernel(x_ptr, out_ptr, PRECISION: tl.constexpr, BLOCK: tl.constexpr):
    tl.store(out_ptr, BLOCK)


def test_ieee_float32_launches_take_the_ieee_configs():
    # A float32 launch at IEEE precision runs `ieee_configs` (pinned: its first); TF32 and
    # half-type launches run `configs`. The data dtype is the most common of the tensors'
    # (the int32 out pointer, named in pointer_types, is not data).
    def cfg(block):
        return triton.Config({"BLOCK": block}, num_warps=4, num_stages=1)

    kernel = _common.Kernel(
        _store_block_kernel, [cfg(2)], [], "matmul", {"out_ptr": "i32"}, ieee_configs=[cfg(4)]
    )

    def block(dtype, precision):
        out = torch.zeros(1, dtype=torch.int32)
        kernel.launch(lambda meta: (1,), x_ptr=torch.zeros(1, dtype=dtype), out_ptr=out,
                      PRECISION=precision)  # fmt: skip
        return int(out[0])

    assert block(torch.float32, "ieee") == 4
    assert block(torch.float32, "tf32") == 2
    assert block(torch.bfloat16, "ieee") == 2
    assert kernel.configs_at(torch.float32, "ieee") == kernel.ieee_configs
    assert kernel.configs_at("fp32", "tf32") == kernel.configs == kernel.configs_at("bf16", "ieee")
    with pytest.raises(ValueError, match="trailing constexprs"):
        _common.Kernel(_store_block_kernel, [cfg(2)], [], "matmul",
                       ieee_configs=[triton.Config({}, num_warps=4)])  # fmt: skip
