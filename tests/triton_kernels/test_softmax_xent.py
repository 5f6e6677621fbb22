"""The fused softmax cross-entropy kernels (forward and backward) against the torch fallback.

Each case runs the same keratron code with the "triton" and the "fallback" kernel backends:
the loss and probabilities, and the gradients through a GradientTape (whose logits gradient is
the "softmax_cross_entropy_grad" primitive, i.e. the backward kernel). Agreement is within 2e-4
of the largest reference magnitude. Rows of up to 256 classes run the rows kernels (many rows
per program, one launch), with row counts that leave a partial last tile. 50,000 classes (the
chunked online-logsumexp path) runs with two rows only: the interpreter is slow.
"""

import numpy as np
import pytest
import torch

import keratron as kt
from keratron.ops import xent
from keratron.triton_kernels import softmax_xent as sx

R = np.random.default_rng(11)
FWD, BWD = "softmax_cross_entropy", "softmax_cross_entropy_grad"


def with_backend(name, fn):
    previous = kt.config.kernel_backend()
    kt.config.set_kernel_backend(name)
    try:
        return fn()
    finally:
        kt.config.set_kernel_backend(previous)


def assert_close(got, ref, rel=2e-4):
    got, ref = (np.asarray(a.cpu() if isinstance(a, torch.Tensor) else a) for a in (got, ref))
    assert got.shape == ref.shape and got.dtype == ref.dtype, (got.shape, ref.shape)
    scale = max(float(np.abs(ref).max()), 1e-6)
    np.testing.assert_allclose(got, ref, rtol=0, atol=rel * scale)


def make_case(shape, sparse, scale=3.0):
    x = (R.standard_normal(shape) * scale).astype("float32")
    if sparse:
        y = R.integers(0, shape[-1], shape[:-1])
    else:
        y = R.uniform(0.0, 1.0, shape).astype("float32")
        y /= y.sum(-1, keepdims=True)
    return x, y


def loss_probs_grads(x, y, sparse):
    """Loss, probs, and the gradients of sum(loss * w) w.r.t. logits (and dense labels)."""
    xt, yt = kt.convert_to_tensor(x), kt.convert_to_tensor(y)
    w = kt.convert_to_tensor(np.random.default_rng(0).uniform(0.5, 2.0, x.shape[:-1]), "float32")
    with kt.GradientTape() as tape:
        tape.watch(xt)
        if not sparse:
            tape.watch(yt)
        loss, probs = xent.softmax_cross_entropy(xt, yt, sparse=sparse)
        total = kt.ops.sum(kt.ops.multiply(loss, w))
    grads = tape.gradient(total, [xt] if sparse else [xt, yt])
    return [loss.numpy(), probs.numpy()] + [g.numpy() for g in grads]


def check(x, y, sparse, triton_backend):
    got = loss_probs_grads(x, y, sparse)
    counts = triton_backend.launch_counts()
    assert counts.get(FWD, 0) > 0 and counts.get(BWD, 0) > 0, counts
    ref = with_backend("fallback", lambda: loss_probs_grads(x, y, sparse))
    for g, r in zip(got, ref):
        assert_close(g, r)


@pytest.mark.parametrize("sparse", [True, False], ids=["sparse", "dense"])
@pytest.mark.parametrize("shape", [(3, 1), (5, 7), (1, 7), (2, 3, 7), (6, 1000), (2, 50000)])
def test_forward_and_backward(shape, sparse, triton_backend):
    check(*make_case(shape, sparse), sparse, triton_backend)


@pytest.mark.parametrize("sparse", [True, False], ids=["sparse", "dense"])
def test_large_logits(sparse, triton_backend):
    x = np.array([[1e4, 0.0, -1e4], [0.0, 1e4, 1e4], [-3e4, -3e4 + 1.0, -3e4]], "float32")
    y = np.array([0, 0, 2]) if sparse else np.eye(3, dtype="float32")[[0, 0, 2]]
    check(x, y, sparse, triton_backend)
    loss = xent.softmax_cross_entropy(x, y, sparse)[0].numpy()
    np.testing.assert_allclose(loss[:2], [0.0, 1e4 + np.log(2.0)], rtol=1e-6)


def test_large_logits_across_chunks(triton_backend):
    # The running max changes between chunks (a 1e3 spike in a late chunk, -1e3 elsewhere):
    # the online rescaling must carry the earlier chunks' sum over exactly.
    x, y = make_case((2, 9000), sparse=True, scale=1.0)
    x[0, 8500] = 1e3
    x[1, :4096] = -1e3
    check(x, y, True, triton_backend)


def test_keras_loss_with_class_axis_first(triton_backend):
    # axis=1 moves the class axis last: the kernel reads the logits through strides.
    x = (R.standard_normal((3, 11, 4)) * 2).astype("float32")
    y = R.integers(0, 11, (3, 4))

    def run():
        xt = kt.convert_to_tensor(x)
        with kt.GradientTape() as tape:
            tape.watch(xt)
            loss = kt.ops.sparse_categorical_crossentropy(y, xt, from_logits=True, axis=1)
            total = kt.ops.sum(loss)
        return loss.numpy(), tape.gradient(total, xt).numpy()

    got = run()
    assert triton_backend.launch_counts()[FWD] == 1
    ref = with_backend("fallback", run)
    for g, r in zip(got, ref):
        assert_close(g, r)


def test_second_order_through_the_grad_primitive(triton_backend):
    x, y = make_case((4, 9), sparse=False, scale=1.0)

    def run():
        xt, yt = kt.convert_to_tensor(x), kt.convert_to_tensor(y)
        with kt.GradientTape() as outer:
            outer.watch(xt)
            with kt.GradientTape() as inner:
                inner.watch(xt)
                loss = kt.ops.sum(xent.softmax_cross_entropy(xt, yt)[0])
            gx = inner.gradient(loss, xt)
            gsq = kt.ops.sum(kt.ops.square(gx))
        return outer.gradient(gsq, xt).numpy()

    got = run()
    assert triton_backend.launch_counts()[BWD] >= 1
    assert_close(got, with_backend("fallback", run))


def test_routes_directly_float16_and_strided_g(triton_backend):
    x = torch.randn(5, 300, dtype=torch.float16) * 4
    y = torch.randint(0, 300, (5,), dtype=torch.int32)
    loss, probs = sx.forward_route(x, y, True)
    ref_loss, ref_probs = xent._sce_impl(x.float(), y, True)
    assert loss.dtype == probs.dtype == torch.float16
    assert_close(loss.float().cpu().numpy(), ref_loss.cpu().numpy(), rel=2e-3)
    assert_close(probs.float().cpu().numpy(), ref_probs.cpu().numpy(), rel=2e-3)
    g = torch.randn(10)[::2]  # a strided cotangent
    got = sx.backward_route(g, ref_probs, y, True)
    assert_close(got.cpu().numpy(), xent._sce_grad_impl(g, ref_probs, y, True).cpu().numpy())
    assert triton_backend.launch_counts() == {FWD: 1, BWD: 1}


def test_out_of_range_label_gives_nan_loss_only_for_its_row():
    x = torch.randn(3, 5)
    loss, probs = sx.forward_route(x, torch.tensor([1, 5, -1]), True)
    assert np.isfinite(loss[0].item()) and np.isnan(loss[1:].cpu().numpy()).all()
    assert_close(probs.cpu().numpy(), torch.softmax(x, -1).cpu().numpy())


def test_empty_rows():
    loss, probs = sx.forward_route(torch.randn(0, 4), torch.zeros(0, dtype=torch.long), True)
    assert loss.shape == (0,) and probs.shape == (0, 4)


def test_unsupported_cases_raise_not_implemented():
    with pytest.raises(NotImplementedError, match="float64"):
        sx.forward_route(
            torch.randn(2, 3, dtype=torch.float64), torch.zeros(2, dtype=torch.long), True
        )
    with pytest.raises(NotImplementedError, match="dense labels"):
        sx.forward_route(torch.randn(2, 3), torch.rand(2, 3, dtype=torch.float64), False)
    with pytest.raises(NotImplementedError, match="g of shape"):
        sx.backward_route(torch.randn(3), torch.rand(2, 3), torch.zeros(2, dtype=torch.long), True)


def test_aot_specs_cover_every_config():
    specs = sx.aot_specs()
    names = {s[0] for s in specs}
    rows = [s for s in specs if "_rows_" in s[0]]
    assert len(specs) - len(rows) == 2 * 2 * 2 * 2 * len(sx.CONFIGS)
    # sparse and dense, forward and backward: 10 and 200 classes in float32, 10 in float16.
    assert len(rows) == 2 * 2 * (2 + 1) * len(sx.ROWS_CONFIGS)
    assert len(names) == len(specs)
    for _, fn, sig, constexprs, num_warps, _ in specs:
        assert set(sig) == set(fn.arg_names)
        assert all(sig[k] == "constexpr" for k in constexprs)
        assert constexprs["BLOCK"] & (constexprs["BLOCK"] - 1) == 0
        assert num_warps in (4, 8, 16)
        if "BLOCK_R" in constexprs:
            assert constexprs["BLOCK_R"] * constexprs["BLOCK"] == sx.ROW_TILE


@pytest.fixture
def programs(monkeypatch):
    """Records the grid size of each rows-kernel launch, by kernel name."""
    grids = {}
    for spec in (sx.FORWARD_ROWS, sx.BACKWARD_ROWS):
        original = spec.launch

        def launch(grid, *args, _name=spec.name, _original=original, **kwargs):
            grids.setdefault(_name, []).append(grid({})[0])
            return _original(grid, *args, **kwargs)

        monkeypatch.setattr(spec, "launch", launch)
    return grids


@pytest.mark.parametrize("sparse", [True, False], ids=["sparse", "dense"])
@pytest.mark.parametrize(
    "shape, per_program", [((128, 10), 128), ((300, 10), 128), ((37, 200), 8), ((5, 2, 129), 8)]
)
def test_many_short_rows_per_program(shape, per_program, sparse, triton_backend, programs):
    # Row counts that are not multiples of the rows per program leave a partial last tile.
    check(*make_case(shape, sparse), sparse, triton_backend)
    rows = int(np.prod(shape[:-1]))
    want = [-(-rows // per_program)]
    assert programs == {"_xent_fwd_rows_kernel": want, "_xent_bwd_rows_kernel": want}


def test_rows_kernels_float16_and_bad_labels(triton_backend, programs):
    x = torch.randn(70, 33, dtype=torch.float16) * 4
    y = torch.randint(0, 33, (70,))
    y[[3, 69]] = torch.tensor([33, -2])
    loss, probs = sx.forward_route(x, y, True)
    ref_loss, ref_probs = xent._sce_impl(x.float(), y.clamp(0, 32), True)
    assert loss.dtype == probs.dtype == torch.float16
    good = torch.ones(70, dtype=torch.bool)
    good[[3, 69]] = False
    assert torch.isnan(loss[~good]).all()
    assert_close(loss[good].float().cpu().numpy(), ref_loss[good].cpu().numpy(), rel=2e-3)
    assert_close(probs.float().cpu().numpy(), ref_probs.cpu().numpy(), rel=2e-3)
    g = torch.randn(140)[::2]  # a strided cotangent
    got = sx.backward_route(g, probs, y.clamp(0, 32), True)
    want = xent._sce_grad_impl(g, probs.float(), y.clamp(0, 32), True)
    assert_close(got.float().cpu().numpy(), want.cpu().numpy(), rel=2e-3)
    # 33 classes: 64 lanes, 32 rows per program.
    assert programs == {"_xent_fwd_rows_kernel": [3], "_xent_bwd_rows_kernel": [3]}
