"""The matmul launcher's plans (tile config by shape and compute capability, split-K for small
M) and each plan's kernels against torch, in the interpreter.

`plan` is checked as the rule its docstring states. The kernels run on irregular shapes (no
dimension a multiple of a tile) with the device limits patched, so that one CPU run takes
the sm_90 and the sm_80 tables and the split-K path, forward and through the matmul VJP
(whose products are this primitive again, on transposed strided views). float32 agrees with
torch within 2e-4 of the largest reference magnitude (IEEE dots); bfloat16 and float16 within
1e-2 and 2e-3 of it: the output is rounded once to 8 (11) significant bits, a relative error
of at most 2**-9 (2**-12) of each value, and the float32 accumulation adds far less.
"""

import numpy as np
import pytest
import torch

import keratron as kt
from keratron.triton_kernels import load
from tests.triton_kernels.interpreter_fixes import widen_bf16_dots

MM = load("_matmul")
TOL = {torch.float32: 2e-4, torch.bfloat16: 1e-2, torch.float16: 2e-3}


def assert_close(got, ref, tol):
    got, ref = got.detach().double().cpu(), ref.detach().double().cpu()
    assert got.shape == ref.shape, (got.shape, ref.shape)
    scale = max(float(ref.abs().max()), 1e-6)
    err = float((got - ref).abs().max())
    assert err <= tol * scale, f"max error {err:.3g} > {tol} * {scale:.3g}"


@pytest.fixture
def device(monkeypatch):
    """Patches the (capability, SMs) the launcher plans for; returns the setter."""

    def set_device(capability, sms):
        monkeypatch.setattr(MM, "device_limits", lambda dev: (capability, sms))

    return set_device


@pytest.fixture
def launched(monkeypatch):
    """Counts launches per kernel name, and lists the (BLOCK_M, BLOCK_N) of each under
    "tiles" (the launch path itself runs unchanged)."""
    counts = {}
    for spec in (MM.KERNEL, MM.SPLITK_KERNEL, MM.REDUCE_KERNEL):
        original = spec.launch

        def launch(grid, config, _name=spec.name, _original=original, **kwargs):
            counts[_name] = counts.get(_name, 0) + 1
            tiles = (config.kwargs["BLOCK_M"], config.kwargs["BLOCK_N"])
            counts.setdefault("tiles", []).append(tiles)
            return _original(grid, config, **kwargs)

        monkeypatch.setattr(spec, "launch", launch)
    return counts


@pytest.fixture
def bf16_dots(monkeypatch):
    widen_bf16_dots(monkeypatch)


def tiles(p):
    return p.config.kwargs["BLOCK_M"], p.config.kwargs["BLOCK_N"], p.config.kwargs["BLOCK_K"]


# ------------------------------------------------------------------------------ the rule
def test_plan_large_products_take_the_architectures_largest_tile():
    # 1024x4096 output: 128 tiles of 128x256 fill 132 SMs (>= 0.9 of a wave).
    p = MM.plan(1024, 4096, 4096, 1, torch.bfloat16, (9, 0), 132)
    assert tiles(p) == (128, 256, 32) and (p.tiles, p.split) == (128, 1)
    assert p.config.num_warps == 8 and p.config.num_stages == 4
    assert tiles(MM.plan(1024, 4096, 4096, 1, torch.float32, (9, 0), 132)) == (128, 256, 16)
    # sm_80 (A100, 108 SMs): no 128x256 float32 tile; 16-bit operands keep it, 3 stages.
    assert tiles(MM.plan(1024, 4096, 4096, 1, torch.float32, (8, 0), 108)) == (128, 128, 32)
    p = MM.plan(1024, 4096, 4096, 1, torch.float16, (8, 6), 108)
    assert tiles(p) == (128, 256, 32) and p.config.num_stages == 3
    # InceptionV3's 1x1 at batch 32, 17*17 positions x 768 -> 192: 128x256 overhangs N.
    assert tiles(MM.plan(32 * 17 * 17, 192, 768, 1, torch.float32, (9, 0), 132))[:2] == (128, 128)
    # A batch of matrices counts its tiles over the batch: 60 x 2 tiles of 128x256 fill 132
    # SMs, 40 x 2 do not (40 x 4 of 128x128 do).
    assert tiles(MM.plan(256, 256, 64, 60, torch.float32, (9, 0), 132))[:2] == (128, 256)
    assert tiles(MM.plan(256, 256, 64, 40, torch.float32, (9, 0), 132))[:2] == (128, 128)


@pytest.mark.parametrize(
    "m, n, k, split",
    [
        (64, 4096, 1024, 2),  # an LSTM's recurrent product at batch 64, 1024 units
        (128, 1024, 4096, 4),  # Dense 4096 -> 1024 at batch 128
        (128, 512, 784, 3),  # Dense 784 -> 512 at batch 128
        (64, 1024, 256, 1),  # K shorter than two SPLIT_MIN_K chunks
        (4096, 64, 4096, 2),  # 64 tiles of 64x64: half the SMs
        (8192, 64, 4096, 1),  # 128 tiles
    ],
)
def test_plan_splits_k_when_the_tiles_fill_under_half_the_gpu(m, n, k, split):
    p = MM.plan(m, n, k, 1, torch.float32, (9, 0), 132)
    assert p.split == split
    if split > 1:
        bk = p.config.kwargs["BLOCK_K"]
        assert p.k_chunk % bk == 0 and p.k_chunk >= MM.SPLIT_MIN_K
        assert (p.split - 1) * p.k_chunk < k <= p.split * p.k_chunk
        assert p.tiles * p.split <= 132
    # The same product in a batch of two is never split.
    assert MM.plan(m, n, k, 2, torch.float32, (9, 0), 132).split == 1


def test_every_planned_config_is_listed_and_compiled_ahead_of_time():
    def key(meta, warps, stages):
        names = ("BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M")
        return tuple(meta[k] for k in names), warps, stages

    listed = {key(c.kwargs, c.num_warps, c.num_stages) for c in MM.CONFIGS}
    compiled = {
        (sig["x_ptr"], consts["PRECISION"], fn.__name__, key(consts, warps, stages))
        for _, fn, sig, consts, warps, stages, *_ in MM.aot_specs()
        if "x_ptr" in sig
    }
    cases = [(torch.float32, "*fp32", "tf32"), (torch.float32, "*fp32", "ieee")]
    cases += [(torch.bfloat16, "*bf16", "ieee")]
    for cap, sms in (((9, 0), 132), ((8, 0), 108), ((9, 0), 4)):
        for dtype, tt, precision in cases:
            for m, n, k in [(1, 1, 1), (37, 10, 600), (300, 260, 40), (5000, 3000, 64)]:
                p = MM.plan(m, n, k, 1, dtype, cap, sms, precision=precision)
                cfg = key(p.config.kwargs, p.config.num_warps, p.config.num_stages)
                kernel = "_matmul_splitk_kernel" if p.split > 1 else "_matmul_kernel"
                spec = (tt, precision, kernel, cfg)
                assert cfg in listed and spec in compiled, (cap, dtype, precision, m, n, k)


def test_ieee_products_take_16_deep_tiles_and_no_wide_one():
    # IEEE dots run on the CUDA cores, which read the operand tiles through registers: the
    # 32-deep large tiles spill on sm_80 and the 128x256 one on sm_90 (the AOT suite).
    for cap, sms in (((9, 0), 132), ((8, 0), 108)):
        p = MM.plan(1024, 4096, 4096, 1, torch.float32, cap, sms, precision="ieee")
        assert tiles(p) == (128, 128, 16) and p.config.num_warps == 8
        p = MM.plan(32 * 17 * 17, 192, 768, 1, torch.float32, cap, sms, precision="ieee")
        assert tiles(p) == (128, 128, 16)
    # Small tiles and split-K as under TF32.
    for m, n, k in [(64, 4096, 1024), (150, 70, 70)]:
        ieee = MM.plan(m, n, k, 1, torch.float32, (9, 0), 132, precision="ieee")
        assert ieee == MM.plan(m, n, k, 1, torch.float32, (9, 0), 132)


def test_wide_tiles_only_for_aligned_operands(device):
    from keratron.triton_kernels._common import record_launches

    device((9, 0), 132)

    def planned(x, w):
        with record_launches() as launches:
            MM.matmul_route(x, w, None, "gelu")
        (_, _, meta), *_ = launches
        return meta["BLOCK_M"], meta["BLOCK_N"]

    def meta(*shape):
        return torch.empty(*shape, device="meta")

    kt.config.set_float32_matmul_precision("tf32")  # the wide tile is TF32's (and 16-bit's)
    assert planned(meta(1024, 4096), meta(4096, 4096)) == (128, 256)
    # A row stride of 4100 elements: 128x128 (a K-major w is test_tf32_products_read_w_...'s).
    assert planned(meta(1024, 4100)[:, :4096], meta(4096, 4096)) == (128, 128)
    assert tiles(MM.plan(1024, 4096, 4096, 1, torch.float32, (9, 0), 132, False))[:2] == (
        128,
        128,
    )


def test_tf32_products_read_w_k_major_on_sm_90(device):
    # wgmma reads 32-bit operands K-major: a TF32 product on a large tile copies a row-major
    # w K-major first (and takes the 128x256 tile with it), a K-major w is read as it is, and
    # IEEE dots, 16-bit operands, sm_80 and split-K products are launched as before.
    from keratron.triton_kernels._common import record_launches

    def launch(x, w, capability=(9, 0), sms=132):
        device(capability, sms)
        with record_launches() as launches:
            MM.matmul_route(x, w, None, None)
        (kernel, args, meta), *_ = launches
        values = dict(zip(kernel.fn.arg_names, args))
        return (meta["BLOCK_M"], meta["BLOCK_N"]), values["stride_wk"], values["stride_wn"]

    def meta(*shape, dtype=torch.float32):
        return torch.empty(*shape, device="meta", dtype=dtype)

    x, w = meta(1024, 4096), meta(4096, 4096)
    kt.config.set_float32_matmul_precision("tf32")
    assert launch(x, w) == ((128, 256), 1, 4096)  # copied: K contiguous
    assert launch(x, w.t()) == ((128, 256), 1, 4096)  # K-major already: read as it is
    assert launch(x, w, (8, 0), 108)[1:] == (4096, 1)
    assert launch(meta(64, 4096), meta(4096, 1024))[1:] == (1024, 1)  # split-K: no copy
    assert launch(meta(1024, 4096, dtype=torch.bfloat16), meta(4096, 4096, dtype=torch.bfloat16))[
        1:
    ] == (4096, 1)
    kt.config.set_float32_matmul_precision("ieee")  # no copy, and no wide tile
    assert launch(x, w) == ((128, 128), 4096, 1)
    assert launch(x, w.t()) == ((128, 128), 1, 4096)
    assert MM.k_major_copies(1024, 4096, 4096, "tf32", (9, 0), 132, False, False) == (True, True)
    # One tile-row reads each w tile once: no copy of w; one tile-column, none of x.
    assert MM.k_major_copies(100, 4096, 4096, "tf32", (9, 0), 8, False, False) == (True, False)
    assert MM.k_major_copies(1024, 200, 4096, "tf32", (9, 0), 8, False, False) == (False, True)


# ------------------------------------------------------------------------------ the kernels
def value_and_grads(x, w, b, activation):
    """fused_matmul's value and the gradients of sum(y * cot) w.r.t. x, w and b."""
    xs = [kt.convert_to_tensor(a) for a in (x, w, b)]
    with kt.GradientTape() as tape:
        tape.watch(xs)
        y = kt.ops.fused_matmul(*xs, activation)
        cot = np.random.default_rng(0).standard_normal(y.shape).astype("float32")
        loss = kt.ops.sum(kt.ops.multiply(y, cot))
    return [y.numpy(), *(g.numpy() for g in tape.gradient(loss, xs))]


def check_against_fallback(x, w, b, activation):
    got = value_and_grads(x, w, b, activation)
    kt.config.set_kernel_backend("fallback")
    want = value_and_grads(x, w, b, activation)
    kt.config.set_kernel_backend("triton")
    for g, r in zip(got, want):
        assert_close(torch.from_numpy(g), torch.from_numpy(r), TOL[torch.float32])


def arrays(seed, *shapes):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype("float32") for s in shapes]


@pytest.mark.parametrize(
    "capability, sms, m, k, n, tile",
    [
        ((9, 0), 2, 200, 48, 304, (128, 128)),  # sm_90, float32 at IEEE: 128x128x16
        ((8, 0), 4, 300, 40, 260, (128, 128)),  # sm_80
        ((9, 0), 6, 150, 70, 70, (64, 64)),  # no large tile fills 6 SMs
    ],
)
def test_large_tile_plans_forward_and_backward(
    capability, sms, m, k, n, tile, device, launched, triton_backend
):
    device(capability, sms)
    x, w, b = arrays(1, (m, k), (k, n), (n,))
    assert tiles(MM.plan(m, n, k, 1, torch.float32, capability, sms, precision="ieee"))[:2] == tile
    check_against_fallback(x, w, b, "gelu")
    assert launched.get("_matmul_kernel", 0) >= 3  # forward, dx, dw
    assert launched["tiles"][0] == tile


def test_tf32_large_tile_forward_and_backward_with_k_major_copies(
    device, launched, triton_backend, monkeypatch
):
    # TF32 on sm_90 (2 SMs, so 128-row tiles fill it): the forward copies w K-major, dw's
    # x^T @ g copies both operands; results as the fallback's, to TF32's precision on a GPU.
    device((9, 0), 2)
    copied = []
    column_major = MM._column_major
    monkeypatch.setattr(MM, "_column_major", lambda w: copied.append(w.shape) or column_major(w))
    kt.config.set_float32_matmul_precision("tf32")
    m, k, n = 300, 48, 304
    x, w, b = arrays(4, (m, k), (k, n), (n,))
    got = value_and_grads(x, w, b, "gelu")
    kt.config.set_kernel_backend("fallback")
    want = value_and_grads(x, w, b, "gelu")
    for g, r in zip(got, want):
        assert_close(torch.from_numpy(g), torch.from_numpy(r), 5e-3)
    assert (k, n) in copied  # the forward's w
    assert launched["tiles"][0] == (128, 256)


@pytest.mark.parametrize("m, k, n", [(5, 520, 530), (37, 1000, 45)])
def test_split_k_forward_and_backward(m, k, n, device, launched, triton_backend):
    # 132 SMs and a handful of tiles: the forward (and for 5x520 the dx product, K = 530)
    # split K into chunks whose last one is ragged.
    device((9, 0), 132)
    x, w, b = arrays(2, (m, k), (k, n), (n,))
    p = MM.plan(m, n, k, 1, torch.float32, (9, 0), 132)
    assert p.split >= 2 and k % p.k_chunk
    check_against_fallback(x, w, b, "relu6")
    splits = 2 if n >= 2 * MM.SPLIT_MIN_K else 1
    assert launched["_matmul_splitk_kernel"] == launched["_matmul_splitk_reduce_kernel"] == splits


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("m, k, n", [(6, 600, 70), (130, 48, 304)])
def test_16bit_operands_with_float32_accumulation(dtype, m, k, n, device, launched, bf16_dots):
    # (6, 600, 70) splits K; (130, 48, 304) takes a 128x256 tile on 2 SMs. The three products
    # of a forward and its VJP: x @ w, g @ w^T and x^T @ g on transposed views.
    device((9, 0), 2 if m > 64 else 132)
    gen = torch.Generator(torch.get_default_device()).manual_seed(5)
    x, w, b, g = (torch.randn(s, generator=gen).to(dtype) for s in [(m, k), (k, n), (n,), (m, n)])
    products = [(x, w, b, "tanh"), (g, w.t(), None, None), (x.t(), g, None, None)]
    for a, bmat, bias, act in products:
        got = MM.matmul_route(a, bmat, bias, act)
        assert got.dtype == dtype
        ref = a.double() @ bmat.double()
        if bias is not None:
            ref = torch.tanh(ref + bias.double())
        assert_close(got, ref, TOL[dtype])
    assert launched.get("_matmul_splitk_kernel", 0) == (1 if m < 64 else 0)
    assert launched["tiles"][0] == ((16, 64) if m < 64 else (128, 256))
