"""The conv2d Triton kernels (implicit GEMM and depthwise) against the CPU fallback.

Each case runs the same keratron program twice, once on the fallback and once with every
conv primitive forced through its Triton route (in the interpreter), and compares the output
and the gradients w.r.t. every input, taken through GradientTape. Shapes are small and
irregular: batch 1 and 3, odd channel counts, 5x7 and 8x8 images, SAME with stride 2 on odd
and even sizes (TensorFlow's asymmetric pads), dilation, groups and depthwise multipliers.
"""

import numpy as np
import pytest
import torch

import keratron as kt
from keratron.triton_kernels import conv2d, load
from tests.triton_kernels.interpreter_fixes import widen_bf16_dots

ops = kt.ops
KERNELS = load("_conv2d")  # the kernel module: its globals are what the launchers read
TOL = 2e-4  # of the largest reference magnitude, per compared array
OPS = ("conv", "conv_grad_input", "conv_grad_filter")


def arrays(seed, *shapes, scale=1.0):
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal(s) * scale).astype("float32") for s in shapes]


def run(backend, fn, inputs, cotangent=None):
    """fn(*inputs) and the gradient of sum(fn(*inputs) * cotangent) w.r.t. every input."""
    kt.config.set_kernel_backend(backend)
    ts = [kt.convert_to_tensor(a) for a in inputs]
    with kt.GradientTape() as tape:
        tape.watch(ts)
        y = fn(*ts)
        if cotangent is None:
            cotangent = np.random.default_rng(99).standard_normal(y.shape).astype("float32")
        loss = ops.sum(ops.multiply(y, cotangent))
    grads = tape.gradient(loss, ts)
    return [y.numpy(), *(g.numpy() for g in grads)], cotangent


def assert_close(got, want, what):
    assert got.shape == want.shape, (what, got.shape, want.shape)
    scale = max(float(np.abs(want).max()), 1e-6)
    err = float(np.abs(got - want).max())
    assert err <= TOL * scale, f"{what}: max error {err:.3g} vs {TOL} * {scale:.3g}"


def check_against_fallback(backend, fn, inputs, ops_used=OPS):
    """Output and input gradients of `fn` on the Triton routes equal the fallback's."""
    want, cot = run("fallback", fn, inputs)
    backend.reset_launch_counts()
    kt.config.set_kernel_backend("triton")
    got, _ = run("triton", fn, inputs, cot)
    counts = backend.launch_counts()
    for op in ops_used:
        assert counts.get(op, 0) > 0, f"no Triton launch for {op}: {counts}"
    names = ["output"] + [f"grad of input {i}" for i in range(len(inputs))]
    for g, w, name in zip(got, want, names):
        assert_close(g, w, name)


# (id, x shape, kernel shape, strides, padding, dilation, groups, activation, bias)
CASES = [
    ("b3_3to5_5x7_k3_same_relu", (3, 5, 7, 3), (3, 3, 3, 5), 1, "same", 1, 1, "relu", True),
    ("b1_7to9_8x8_k3_s2_same_gelu", (1, 8, 8, 7), (3, 3, 7, 9), 2, "same", 1, 1, "gelu", True),
    ("b3_7to9_5x7_k3_s2_same_none", (3, 5, 7, 7), (3, 3, 7, 9), 2, "same", 1, 1, None, False),
    # 2x4 taps, stride 2, SAME on 5x7: pads (0, 1) and (1, 2).
    ("b1_5to6_5x7_k2x4_s2_same_sigm", (1, 5, 7, 5), (2, 4, 5, 6), 2, "same", 1, 1, "sigmoid", True),
    ("b1_6to4_5x7_k3_d2_g2_tanh", (1, 5, 7, 6), (3, 3, 3, 4), 1, "same", 2, 2, "tanh", True),
    ("b3_7to9_8x8_k1_gelu_tanh", (3, 8, 8, 7), (1, 1, 7, 9), 1, "valid", 1, 1, "gelu_tanh", True),
    ("b1_9to6_8x8_k3_s2_g3_valid", (1, 8, 8, 9), (3, 3, 3, 6), (2, 1), "valid", 1, 3, None, True),
    (
        "b1_5to7_5x7_k3_explicit_pads_relu6",
        (1, 5, 7, 5),
        (3, 3, 5, 7),
        (2, 1),
        ((2, 0), (0, 1)),
        1,
        1,
        "relu6",
        True,
    ),
    # Depthwise (groups == in_channels) takes the direct kernels.
    ("dw_b3_5x7_m1_same_relu6", (3, 5, 7, 5), (3, 3, 1, 5), 1, "same", 1, 5, "relu6", True),
    ("dw_b1_8x8_m2_s2_same", (1, 8, 8, 5), (3, 3, 1, 10), 2, "same", 1, 5, None, False),
    ("dw_b1_5x7_m2_d2_sigmoid", (1, 5, 7, 3), (3, 3, 1, 6), 1, "same", 2, 3, "sigmoid", True),
    # 25 taps (a 32-row accumulator in the grad-filter kernel) and 8 (exactly a power of two).
    ("dw_b2_9x8_k5_s21_valid", (2, 9, 8, 4), (5, 5, 1, 4), (2, 1), "valid", 1, 4, None, True),
    ("dw_b1_6x7_k2x4_m3_same_relu", (1, 6, 7, 2), (2, 4, 1, 6), 1, "same", 1, 2, "relu", False),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_fused_conv_forward_and_gradients_match_fallback(triton_backend, case):
    _, xs, ks, strides, padding, dilation, groups, act, has_bias = case
    x, k, b = arrays(len(xs) + ks[-1], xs, ks, (ks[-1],))
    if act == "relu6":
        x = x * 3.0  # so that some outputs pass 6 and the clamp matters

    def fn(x, k, *bias):
        return ops.fused_conv(
            x, k, bias[0] if bias else None, act, strides, padding, dilation_rate=dilation,
            groups=groups,
        )  # fmt: skip

    check_against_fallback(triton_backend, fn, [x, k, b] if has_bias else [x, k])


def test_depthwise_conv_op_with_multiplier_two(triton_backend):
    x, k = arrays(5, (3, 5, 7, 3), (3, 3, 3, 2))
    check_against_fallback(triton_backend, lambda x, k: ops.depthwise_conv(x, k, 2, "same"), [x, k])


def test_conv1d_runs_as_height_one_conv2d(triton_backend):
    x, k, b = arrays(6, (3, 11, 5), (3, 5, 7), (7,))
    check_against_fallback(
        triton_backend,
        lambda x, k, b: ops.fused_conv(x, k, b, "relu", 2, "same", dilation_rate=1),
        [x, k, b],
    )


def test_channels_first_input_reads_strided_nhwc_view(triton_backend):
    # channels_first inputs reach the primitive as a permuted (non-contiguous) NHWC view.
    x, k = arrays(7, (3, 5, 5, 7), (3, 3, 5, 4))
    check_against_fallback(
        triton_backend, lambda x, k: ops.conv(x, k, 2, "same", "channels_first"), [x, k]
    )


def test_conv_transpose_runs_grad_input_kernel_forward(triton_backend):
    # conv_transpose is conv_grad_input; its padding can be negative (a crop).
    x, k = arrays(8, (1, 4, 5, 7), (3, 3, 5, 7))
    check_against_fallback(
        triton_backend,
        lambda x, k: ops.conv_transpose(x, k, 2, "valid", output_padding=1),
        [x, k],
    )


def forced_splits(monkeypatch, n: int) -> list:
    """Makes the grad-filter launcher split its reduction `n` ways (the kernel module's
    `_num_splits`, which the launcher reads; the public module only forwards names); returns
    the list that each grad-filter launch appends its SPLIT to."""
    monkeypatch.setattr(KERNELS, "_num_splits", lambda positions, tiles, device, *rule: n)
    seen = []
    for spec in (KERNELS.CONV_GRAD_FILTER, KERNELS.DEPTHWISE_GRAD_FILTER):
        original = spec.launch

        def launch(grid, *args, _original=original, **values):
            seen.append(values["SPLIT"])
            return _original(grid, *args, **values)

        monkeypatch.setattr(spec, "launch", launch)
    return seen


@pytest.mark.parametrize("groups", [1, 5], ids=["gemm", "depthwise"])
def test_grad_filter_split_reduction(triton_backend, monkeypatch, groups):
    # Several programs share the positions of the grad-filter reduction; their float32
    # partials are summed. Forced here, as the interpreter machine has one "SM".
    splits = forced_splits(monkeypatch, 3)
    x, k = arrays(9, (3, 8, 8, 5), (3, 3, 5 // groups, 5))
    check_against_fallback(
        triton_backend,
        lambda x, k: ops.fused_conv(x, k, None, None, 1, "same", groups=groups),
        [x, k],
    )
    assert splits and set(splits) == {3}


def test_grad_filter_splits_fill_the_gpu():
    # Recorded on meta tensors for a 132-SM GPU (no kernel runs). The implicit GEMM asks for
    # two programs per SM, each split over at least SPLIT_MIN_POSITIONS positions; the
    # depthwise kernel (here a convolution of one input channel), whose programs are small,
    # for eight, over at least DEPTHWISE_SPLIT_MIN_POSITIONS.
    from keratron.triton_kernels._common import record_launches

    def meta(*shape):
        return torch.empty(*shape, device="meta")

    def splits(n, size, c, f):
        with record_launches(132) as launches:
            conv2d.grad_filter_route(
                meta(n, size, size, c), meta(n, size - 2, size - 2, f), (3, 3, c, f), (1, 1),
                ((0, 0), (0, 0)), (1, 1), 1,
            )  # fmt: skip
        ((kernel, args, _),) = launches
        return kernel.name, dict(zip(kernel.arg_names, args))["SPLIT"]

    # The cnn's first convolution at batch 128: 86,528 positions, 338 splits of 256 (1,056
    # wanted); at batch 512, the 1,056.
    assert splits(128, 28, 1, 32) == ("depthwise_grad_filter_kernel", 338)
    assert splits(512, 28, 1, 32) == ("depthwise_grad_filter_kernel", 1056)
    # Its second: 73,728 positions over 5 tiles of 64 (288 rows) by 1: 52 splits (2 * 132 / 5).
    assert splits(128, 26, 32, 64) == ("conv_grad_filter_kernel", 52)
    # A small implicit GEMM keeps 1,024 positions a split: 4,608 positions, 4 splits.
    assert splits(128, 8, 32, 64) == ("conv_grad_filter_kernel", 4)


def test_grad_input_with_stride_larger_than_kernel(triton_backend):
    # Stride 3 with 2x2 taps: some input rows are reached by no tap at all (zero gradient).
    x, k = arrays(10, (1, 8, 7, 5), (2, 2, 5, 7))
    check_against_fallback(triton_backend, lambda x, k: ops.conv(x, k, 3, "valid"), [x, k])


def test_second_order_gradient_through_the_kernels(triton_backend):
    # d/dk of |dL/dx|^2: the grad-input kernel runs forward, its VJP runs the conv and
    # grad-filter kernels.
    x, k, r = arrays(12, (1, 5, 7, 4), (3, 3, 4, 6), (1, 3, 4, 6))

    def second(backend):
        kt.config.set_kernel_backend(backend)
        xt, kk = kt.convert_to_tensor(x), kt.convert_to_tensor(k)
        with kt.GradientTape() as outer:
            outer.watch(kk)
            with kt.GradientTape() as inner:
                inner.watch(xt)
                loss = ops.sum(ops.multiply(ops.conv(xt, kk, 2, "same"), r))
            gx = inner.gradient(loss, xt)
            total = ops.sum(ops.square(gx))
        return outer.gradient(total, kk).numpy()

    want = second("fallback")
    triton_backend.reset_launch_counts()
    got = second("triton")
    assert_close(got, want, "second-order kernel gradient")
    counts = triton_backend.launch_counts()
    assert all(counts.get(op, 0) > 0 for op in OPS), counts


@pytest.mark.parametrize("depthwise", [False, True], ids=["gemm", "depthwise"])
def test_routes_in_float16_match_float32_fallback(triton_backend, depthwise):
    # Route-level: float16 storage, float32 accumulation, compared with the float32 impl.
    from keratron.autodiff.primitive import PRIMITIVES

    x, k, g = arrays(11, (1, 5, 7, 6), (3, 3, 1 if depthwise else 6, 6), (1, 3, 4, 6))
    groups = 6 if depthwise else 1
    params = dict(strides=(2, 2), padding=((1, 1), (1, 1)), dilation=(1, 1), groups=groups)
    xh, kh, gh = (torch.as_tensor(a).half() for a in (x, k, g))
    x, k, g = (torch.as_tensor(a) for a in (x, k, g))
    pairs = [
        (conv2d.conv_route(xh, kh, None, activation="gelu", **params),
         PRIMITIVES["conv"].impl(x, k, None, activation="gelu", **params)),
        (conv2d.grad_input_route(gh, kh, input_shape=tuple(x.shape), **params),
         PRIMITIVES["conv_grad_input"].impl(g, k, input_shape=tuple(x.shape), **params)),
        (conv2d.grad_filter_route(xh, gh, kernel_shape=tuple(k.shape), **params),
         PRIMITIVES["conv_grad_filter"].impl(x, g, kernel_shape=tuple(k.shape), **params)),
    ]  # fmt: skip
    for got, want in pairs:
        assert got.dtype == torch.float16 and got.shape == want.shape
        err = float((got.float() - want).abs().max())
        assert err <= 1e-2 * float(want.abs().max())
    counts = triton_backend.launch_counts()
    assert all(counts.get(op, 0) > 0 for op in OPS), counts


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize(
    "x_shape, k_shape, stride, groups",
    [
        ((2, 9, 7, 5), (3, 3, 5, 6), 2, 1),  # implicit GEMMs, stride 2
        ((1, 7, 9, 6), (3, 3, 1, 12), 2, 6),  # depthwise, multiplier 2, stride 2
        ((3, 6, 5, 4), (1, 3, 4, 7), 1, 1),  # 1x3 taps, the grad-filter split 3 ways
    ],
)
def test_16bit_routes_with_float32_accumulation(
    triton_backend, monkeypatch, dtype, x_shape, k_shape, stride, groups
):
    # Route-level, against the float32 impl on the same 16-bit-rounded operands: the kernels
    # accumulate in float32 and round once, a relative error of 2**-9 (bfloat16) or 2**-12
    # (float16) of each output, so 1e-2 and 2e-3 of the largest magnitude hold.
    from keratron.autodiff.primitive import PRIMITIVES

    widen_bf16_dots(monkeypatch)
    splits = forced_splits(monkeypatch, 3)
    tol = 1e-2 if dtype == torch.bfloat16 else 2e-3
    oh, ow = -(-x_shape[1] // stride), -(-x_shape[2] // stride)
    x, k, g = arrays(13, x_shape, k_shape, (x_shape[0], oh, ow, k_shape[3]))
    pads = []
    for size, taps, out in ((x_shape[1], k_shape[0], oh), (x_shape[2], k_shape[1], ow)):
        total = max((out - 1) * stride + taps - size, 0)
        pads.append((total // 2, total - total // 2))
    params = dict(strides=(stride, stride), padding=tuple(pads), dilation=(1, 1), groups=groups)
    xh, kh, gh = (torch.as_tensor(a).to(dtype) for a in (x, k, g))
    x, k, g = (t.float() for t in (xh, kh, gh))
    pairs = [
        (conv2d.conv_route(xh, kh, None, activation="relu", **params),
         PRIMITIVES["conv"].impl(x, k, None, activation="relu", **params)),
        (conv2d.grad_input_route(gh, kh, input_shape=tuple(x.shape), **params),
         PRIMITIVES["conv_grad_input"].impl(g, k, input_shape=tuple(x.shape), **params)),
        (conv2d.grad_filter_route(xh, gh, kernel_shape=tuple(k.shape), **params),
         PRIMITIVES["conv_grad_filter"].impl(x, g, kernel_shape=tuple(k.shape), **params)),
    ]  # fmt: skip
    for got, want in pairs:
        assert got.dtype == dtype and got.shape == want.shape
        err = float((got.float() - want).abs().max())
        assert err <= tol * float(want.abs().max()), (err, float(want.abs().max()))
    counts = triton_backend.launch_counts()
    assert all(counts.get(op, 0) > 0 for op in OPS), counts
    assert splits == [3]


def test_unsupported_dtype_is_a_clear_error_on_the_triton_backend(triton_backend):
    x = kt.convert_to_tensor(np.ones((1, 5, 5, 3)))  # float64
    k = kt.convert_to_tensor(np.ones((3, 3, 3, 2)))
    with pytest.raises(ValueError, match=r"op 'conv'.*float64"):
        ops.conv(x, k)
    assert triton_backend.launch_counts().get("conv", 0) == 0


@pytest.mark.parametrize("groups", [1, 2])
def test_tf32_forward_reads_the_kernel_k_major_on_sm_90(triton_backend, monkeypatch, groups):
    # wgmma takes 32-bit operands K-major: under TF32 on sm_90 the forward copies the kernel
    # as F rows of its reduction (zero-padded to a multiple of 16) and reads that; the values
    # are the fallback's to TF32's precision on a GPU. IEEE dots read the kernel as it is.
    copies = []
    k_major_weights = KERNELS.k_major_weights
    monkeypatch.setattr(
        KERNELS, "k_major_weights", lambda k: copies.append(tuple(k.shape)) or k_major_weights(k)
    )
    monkeypatch.setattr(KERNELS, "device_limits", lambda device: ((9, 0), 132))
    x, k, b = arrays(8, (2, 9, 11, 6), (3, 3, 6 // groups, 8), (8,))

    def fn(x, k, b):
        return ops.fused_conv(x, k, b, "relu", 1, "same", groups=groups)

    kt.config.set_float32_matmul_precision("tf32")
    want, cot = run("fallback", fn, [x, k, b])
    got, _ = run("triton", fn, [x, k, b], cot)
    for g, w in zip(got, want):
        scale = max(float(np.abs(w).max()), 1e-6)
        assert float(np.abs(g - w).max()) <= 5e-3 * scale
    assert copies and set(copies) == {k.shape}
    copies.clear()
    kt.config.set_float32_matmul_precision("ieee")
    run("triton", fn, [x, k, b], cot)
    assert copies == []
    w, wks = k_major_weights(torch.from_numpy(k))
    rows = k.size // 8
    assert wks % 16 == 0 and wks >= rows and tuple(w.shape) == (8, wks)
    np.testing.assert_array_equal(w[:, :rows].cpu().numpy(), k.reshape(rows, 8).T)
    assert not w[:, rows:].any()


def test_aot_specs_cover_every_kernel_and_config():
    specs = conv2d.aot_specs()
    assert len({id(s[1]) for s in specs}) == 6
    float32 = [s for s in specs if "_float32_" in s[0]]
    n_configs = (
        2 * len(conv2d.CONFIGS)  # the forward reading the kernel as it is and K-major
        + len(conv2d.GRAD_INPUT_CONFIGS)
        + len(conv2d.GRAD_FILTER_CONFIGS)
        + 2 * len(conv2d.DEPTHWISE_CONFIGS)
        + len(conv2d.DEPTHWISE_GRAD_FILTER_CONFIGS)
    )
    # The dot kernels also at IEEE precision, at their IEEE configs (the kernel as it is).
    n_ieee = sum(
        len(k.ieee_configs)
        for k in (conv2d.CONV_FWD, conv2d.CONV_GRAD_INPUT, conv2d.CONV_GRAD_FILTER)
    )
    assert len(float32) == n_configs + n_ieee
    ieee = [s for s in float32 if s[3].get("PRECISION") == "ieee"]
    assert len(ieee) == n_ieee and all(s[0].endswith("_ieee") for s in ieee)
    assert all(not s[3].get("W_K_MAJOR") for s in ieee)
    assert len({s[0] for s in specs}) == len(specs)
    for label, _, sig, consts, num_warps, num_stages in specs:
        assert all(sig[name] == "constexpr" for name in consts), label
        assert all(v in ("i32", "constexpr") or v.startswith("*") for v in sig.values()), label
        for key in ("BLOCK_M", "BLOCK_N", "BLOCK_K", "BLOCK_P", "BLOCK_C"):
            if key in consts:
                assert consts[key] & (consts[key] - 1) == 0 and consts[key] >= 16, label
        assert num_warps in (2, 4, 8) and num_stages >= 1


def test_docstring_examples_run(triton_backend):
    import doctest

    result = doctest.testmod(conv2d, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
    counts = triton_backend.launch_counts()
    assert all(counts.get(op, 0) > 0 for op in OPS), counts
