"""The matmul kernel (tiled GEMM with bias + activation epilogue) against the torch fallback.

Every case runs the same keratron code twice, with the "triton" and the "fallback" kernel
backends, forward and through a GradientTape (the matmul VJP calls the primitive again, so the
backward pass exercises the kernel on transposed, strided operands). Agreement is within 2e-4
of the largest reference magnitude.
"""

import numpy as np
import pytest
import torch

import keratron as kt
from keratron import triton_kernels
from keratron.ops.linalg import _matmul_impl
from keratron.triton_kernels import matmul as mm

R = np.random.default_rng(3)
ACTIVATIONS = [None, "relu", "relu6", "gelu", "gelu_tanh", "sigmoid", "tanh"]


def arr(*shape, scale=1.0):
    return (R.standard_normal(shape) * scale).astype("float32")


def with_backend(name, fn):
    previous = kt.config.kernel_backend()
    kt.config.set_kernel_backend(name)
    try:
        return fn()
    finally:
        kt.config.set_kernel_backend(previous)


def assert_close(got, ref, rel=2e-4):
    got, ref = (np.asarray(a.cpu() if isinstance(a, torch.Tensor) else a) for a in (got, ref))
    assert got.shape == ref.shape, (got.shape, ref.shape)
    scale = max(float(np.abs(ref).max()) if ref.size else 0.0, 1e-6)
    np.testing.assert_allclose(got, ref, rtol=0, atol=rel * scale)


def value_and_grads(fn, arrays):
    """fn(*tensors) and the gradients of sum(fn * cot) w.r.t. every tensor, under the
    current kernel backend (cot: a fixed random cotangent, so each output entry counts)."""
    xs = [kt.convert_to_tensor(a) for a in arrays]
    with kt.GradientTape() as tape:
        for x in xs:
            tape.watch(x)
        y = fn(*xs)
        cot = kt.convert_to_tensor(np.random.default_rng(0).standard_normal(y.shape), "float32")
        loss = kt.ops.sum(kt.ops.multiply(y, cot))
    grads = tape.gradient(loss, xs)
    return [y.numpy()] + [g.numpy() for g in grads]


def check(fn, arrays, triton_backend, op="matmul"):
    got = value_and_grads(fn, arrays)
    assert triton_backend.launch_counts().get(op, 0) > 0
    ref = with_backend("fallback", lambda: value_and_grads(fn, arrays))
    for g, r in zip(got, ref):
        assert_close(g, r)


@pytest.mark.parametrize(
    "xs, ws",
    [
        ((1, 1), (1, 1)),
        ((37, 29), (29, 45)),
        ((1, 70), (70, 3)),
        ((5, 130, 70), (70, 33)),
        ((3,), (3, 17)),
    ],
)
def test_fused_matmul_bias_shapes(xs, ws, triton_backend):
    fn = lambda x, w, b: kt.ops.fused_matmul(x, w, b, "relu")  # noqa: E731
    check(fn, [arr(*xs), arr(*ws), arr(ws[1])], triton_backend)


@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_each_epilogue_activation(activation, triton_backend):
    # Pre-activations of standard deviation ~2: most where the activations bend (so a wrong
    # constant shows), some past relu6's 6 and in tanh/sigmoid's tails.
    x, w, b = arr(19, 21, scale=0.45), arr(21, 23), arr(23)
    fn = lambda x, w, b: kt.ops.fused_matmul(x, w, b, activation)  # noqa: E731
    check(fn, [x, w, b], triton_backend)


def test_no_bias_three_d_input(triton_backend):
    fn = lambda x, w: kt.ops.fused_matmul(x, w, None, "gelu")  # noqa: E731
    check(fn, [arr(2, 9, 40), arr(40, 18)], triton_backend)


@pytest.mark.parametrize(
    "xs, ws",
    [((5, 130, 70), (5, 70, 33)), ((17, 20), (3, 20, 9)), ((2, 1, 7, 5), (3, 5, 11))],
)
def test_batched_matmul_with_broadcast(xs, ws, triton_backend):
    check(kt.ops.matmul, [arr(*xs), arr(*ws)], triton_backend)


def test_dense_layer_gradient(triton_backend):
    layer = kt.layers.Dense(13, activation="tanh")
    x = kt.convert_to_tensor(arr(7, 30))
    layer.build((None, 30))
    r_kernel, r_bias = arr(30, 13, scale=0.3), arr(13)
    layer.kernel.assign(r_kernel)
    layer.bias.assign(r_bias)

    def run():
        with kt.GradientTape() as tape:
            y = layer(x)
            loss = kt.ops.sum(kt.ops.square(y))
        gk, gb = tape.gradient(loss, [layer.kernel, layer.bias])
        return y.numpy(), gk.numpy(), gb.numpy()

    got = run()
    # One forward product, then the input and kernel gradient products.
    assert triton_backend.launch_counts()["matmul"] >= 2
    ref = with_backend("fallback", run)
    for g, r in zip(got, ref):
        assert_close(g, r)


def test_second_order_through_the_gelu_epilogue(triton_backend):
    # The VJP recomputes gelu's pre-activation with the same primitive; differentiating the
    # gradient again runs the kernel on the backward pass's own products.
    x, w, b = arr(6, 11), arr(11, 9, scale=0.4), arr(9)

    def run():
        xt, wt, bt = (kt.convert_to_tensor(a) for a in (x, w, b))
        with kt.GradientTape() as outer:
            outer.watch(wt)
            with kt.GradientTape() as inner:
                inner.watch(wt)
                y = kt.ops.sum(kt.ops.fused_matmul(xt, wt, bt, "gelu"))
            gw = inner.gradient(y, wt)
            gsq = kt.ops.sum(kt.ops.square(gw))
        return outer.gradient(gsq, wt).numpy()

    got = run()
    assert triton_backend.launch_counts()["matmul"] >= 4
    assert_close(got, with_backend("fallback", run))


def test_route_reads_strided_operands_without_contiguity():
    # The VJP passes transposed views; the route reads them through their strides.
    x = torch.randn(29, 37).t()
    w = torch.randn(45, 29).t()[:, ::2]
    b = torch.randn(46)[::2]
    assert not x.is_contiguous() and not w.is_contiguous()
    got = mm.matmul_route(x, w, b, "sigmoid")
    assert_close(got, _matmul_impl(x, w, b, "sigmoid"))


def test_route_empty_and_zero_k():
    x, w, b = torch.randn(4, 0), torch.randn(0, 3), torch.randn(3)
    assert_close(mm.matmul_route(x, w, b, "relu6"), _matmul_impl(x, w, b, "relu6"))
    assert mm.matmul_route(torch.randn(0, 5), torch.randn(5, 3), None, None).shape == (0, 3)


def test_float16_operands(triton_backend):
    x = torch.randn(33, 40, dtype=torch.float16)
    w = torch.randn(40, 24, dtype=torch.float16)
    b = torch.randn(24, dtype=torch.float16)
    got = mm.matmul_route(x, w, b, "gelu_tanh")
    assert got.dtype == torch.float16
    ref = _matmul_impl(x.float(), w.float(), b.float(), "gelu_tanh")
    assert_close(got.float(), ref, rel=2e-3)
    assert triton_backend.launch_counts()["matmul"] == 1


def test_unsupported_dtype_is_a_clear_error(triton_backend):
    a = kt.convert_to_tensor(np.ones((3, 4), "int32"))
    with pytest.raises(ValueError, match="op 'matmul' does not support.*int32"):
        kt.ops.matmul(a, kt.ops.transpose(a))


def test_auto_backend_on_cpu_uses_the_fallback():
    kt.config.set_kernel_backend("auto")
    try:
        triton_kernels.reset_launch_counts()
        with kt.device("cpu"):
            x = kt.convert_to_tensor(arr(4, 5))
            kt.ops.fused_matmul(x, kt.ops.transpose(x), None, "relu")
        assert triton_kernels.launch_counts() == {}
    finally:
        kt.config.set_kernel_backend(None)


def test_aot_specs_cover_every_config():
    specs = mm.aot_specs()
    main = {
        (tuple(c[k] for k in ("BLOCK_M", "BLOCK_N", "BLOCK_K")), warps, stages)
        for _, fn, _, c, warps, stages, *_ in specs
        if fn.__name__ == "_matmul_kernel"
    }
    assert len(main) == len(mm.CONFIGS)
    for name, fn, sig, constexprs, num_warps, num_stages, *divisible in specs:
        if divisible:  # the wide tiles, planned for aligned operands only
            assert constexprs["BLOCK_N"] == 256 and set(divisible[0]) < set(sig)
        assert name.startswith("matmul_")
        assert set(sig) == set(fn.arg_names)
        assert all(sig[k] == "constexpr" for k in constexprs)
        assert num_warps in (4, 8) and num_stages >= 1
        for key in ("BLOCK_M", "BLOCK_N", "BLOCK_K"):
            v = constexprs.get(key, 16)
            assert v >= 16 and v & (v - 1) == 0
