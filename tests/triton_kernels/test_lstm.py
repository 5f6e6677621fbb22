"""LSTM Triton kernels (interpreter) against the CPU fallback: forward outputs, residuals and
gradients w.r.t. x_proj, h0, c0 and the recurrent kernel, on irregular shapes, through each
of the three plans (whole sequence with the recurrent kernel resident or streamed, and a
launch per step)."""

import contextlib

import numpy as np
import pytest
import torch

import keratron as kt
from keratron.ops import rnn
from keratron.triton_kernels import _common, load
from keratron.triton_kernels import lstm as lstm_kernels

R = np.random.default_rng(7)

# Launches per call of each plan: forward, backward (the sequence kernel and dU, or the carry,
# T steps, dh0 and dU).
LAUNCHES = {
    "resident": lambda steps: (1, 2),
    "streamed": lambda steps: (1, 2),
    "steps": lambda steps: (steps, steps + 3),
}


@pytest.fixture
def force_plan(monkeypatch):
    """force_plan(name) makes the routes run `name` whatever the size; returns the plan the
    routes would pick on their own otherwise."""
    module = load("_lstm")

    def forget_routes():
        # On a GPU the routes cache each signature's launches: a signature an earlier test
        # ran under the size's own plan must not replay that plan here.
        for cache in _common.ROUTE_CACHES:
            cache.clear()

    def force(name):
        monkeypatch.setattr(module, "plan", lambda units, dtype: name)
        forget_routes()

    yield force
    forget_routes()


@contextlib.contextmanager
def backend(name):
    previous = kt.config.kernel_backend()
    kt.config.set_kernel_backend(name)
    try:
        yield
    finally:
        kt.config.set_kernel_backend(previous)


def make_mask(batch, steps):
    """A leading masked step, gaps, a fully masked row (batch > 2) and a full row."""
    m = R.random((batch, steps)) > 0.35
    m[0, 0] = False
    m[-1] = True
    if batch > 2:
        m[1] = False
    return m


def assert_close(actual, expected, rel=2e-4, what=""):
    actual, expected = (
        np.asarray(a.cpu() if isinstance(a, torch.Tensor) else a, np.float64)
        for a in (actual, expected)
    )
    assert actual.shape == expected.shape, what
    scale = max(np.abs(expected).max(initial=0.0), 1e-6)
    err = np.abs(actual - expected).max(initial=0.0)
    assert err <= rel * scale, f"{what}: max error {err:.3g} vs scale {scale:.3g}"


def make_case(batch, steps, units, masked, dtype="float32"):
    arrays = dict(
        x_proj=R.normal(size=(batch, steps, 4 * units)),
        h0=R.normal(size=(batch, units)) * 0.5,
        c0=R.normal(size=(batch, units)),
        recurrent_kernel=R.normal(size=(units, 4 * units)) / np.sqrt(units),
    )
    arrays = {k: v.astype(dtype) for k, v in arrays.items()}
    weights = [
        R.normal(size=(batch, steps, units)).astype(dtype),
        R.normal(size=(batch, units)).astype(dtype),
        R.normal(size=(batch, units)).astype(dtype),
    ]
    mask = make_mask(batch, steps) if masked else None
    return arrays, weights, mask


def run_lstm(arrays, weights, mask, **params):
    """Outputs and input gradients of a weighted sum of (all_h, last_h, last_c)."""
    inputs = {k: kt.convert_to_tensor(v) for k, v in arrays.items()}
    with kt.GradientTape() as tape:
        tape.watch(list(inputs.values()))
        outs = kt.ops.lstm(**inputs, mask=mask, **params)
        loss = kt.ops.sum(kt.ops.stack([kt.ops.sum(o * w) for o, w in zip(outs, weights)]))
    grads = tape.gradient(loss, list(inputs.values()))
    return [o.numpy() for o in outs], dict(zip(inputs, (g.numpy() for g in grads)))


CASES = [
    # batch, steps, units, masked, reverse, zero_output_for_mask, plan (None: the route's own)
    (3, 1, 5, False, False, False, None),
    (3, 1, 1, True, False, False, None),
    (3, 37, 5, True, False, False, None),
    (5, 20, 16, False, True, False, None),
    (3, 37, 16, True, True, True, None),
    (1, 9, 5, True, True, False, None),
    (7, 3, 129, True, True, False, None),  # streamed: 5 unit and K tiles of 32
    (18, 4, 33, True, False, False, None),  # streamed: two programs, a ragged last tile
    (3, 37, 5, True, False, False, "streamed"),
    (5, 1, 1, True, True, False, "streamed"),
    (3, 11, 16, True, True, True, "streamed"),
    (3, 1, 5, False, False, False, "steps"),
    (3, 13, 5, True, True, False, "steps"),
    (18, 4, 33, True, False, False, "steps"),  # several batch and unit tiles, several K tiles
]


@pytest.mark.parametrize("batch,steps,units,masked,reverse,zero_output,forced", CASES)
def test_forward_and_gradients_match_fallback(
    triton_backend, force_plan, batch, steps, units, masked, reverse, zero_output, forced
):
    plan = forced or lstm_kernels.plan(units, torch.float32)
    if forced:
        force_plan(forced)
    arrays, weights, mask = make_case(batch, steps, units, masked)
    params = dict(reverse=reverse, zero_output_for_mask=zero_output)
    outs, grads = run_lstm(arrays, weights, mask, **params)
    counts = triton_backend.launch_counts()
    assert (counts["lstm"], counts["lstm_grad"]) == LAUNCHES[plan](steps)
    with backend("fallback"):
        ref_outs, ref_grads = run_lstm(arrays, weights, mask, **params)
    for name, a, b in zip(("all_h", "last_h", "last_c"), outs, ref_outs):
        assert_close(a, b, what=name)
    for name in arrays:
        assert_close(grads[name], ref_grads[name], what=f"d{name}")


def test_plan_follows_the_resident_limits():
    plan = lstm_kernels.plan
    # At IEEE precision (this suite's) the float32 resident kernels stop at 16 units: the
    # 32-wide ones abort or spill when compiled for sm_90 (tests/aot).
    assert [plan(u, torch.float32) for u in (1, 16, 17, 32, 256, 1024, 1025)] == [
        "resident", "resident", "streamed", "streamed", "streamed", "streamed", "steps",
    ]  # fmt: skip
    kt.config.set_float32_matmul_precision("tf32")
    try:
        assert [plan(u, torch.float32) for u in (1, 32, 33, 256, 1024, 1025)] == [
            "resident", "resident", "streamed", "streamed", "streamed", "steps",
        ]  # fmt: skip
        for dtype in (torch.float16, torch.bfloat16):  # whatever float32's precision
            assert [plan(u, dtype) for u in (5, 64, 65)] == ["resident", "resident", "streamed"]
    finally:
        kt.config.set_float32_matmul_precision("ieee")
    for dtype in (torch.float16, torch.bfloat16):
        assert [plan(u, dtype) for u in (5, 64, 65)] == ["resident", "resident", "streamed"]


@pytest.mark.parametrize(
    "activation,recurrent_activation,masked,plan",
    [
        ("relu", "hard_sigmoid", True, "resident"),
        ("linear", "tanh", False, "streamed"),
        ("sigmoid", "relu", True, "steps"),
        ("hard_sigmoid", "sigmoid", True, "streamed"),
    ],
)
def test_other_activations_match_fallback(
    triton_backend, force_plan, activation, recurrent_activation, masked, plan
):
    force_plan(plan)
    arrays, weights, mask = make_case(2, 6, 7, masked)
    params = dict(activation=activation, recurrent_activation=recurrent_activation)
    outs, grads = run_lstm(arrays, weights, mask, **params)
    assert triton_backend.launch_counts()["lstm"] > 0
    assert triton_backend.launch_counts()["lstm_grad"] > 0
    with backend("fallback"):
        ref_outs, ref_grads = run_lstm(arrays, weights, mask, **params)
    for a, b in zip(outs, ref_outs):
        assert_close(a, b)
    for name in arrays:
        assert_close(grads[name], ref_grads[name], what=f"d{name}")


@pytest.mark.parametrize("plan", ["resident", "streamed", "steps"])
def test_routes_return_the_fallback_residuals(triton_backend, force_plan, plan):
    """The saved gates and cells are part of the contract: lstm_grad reads them."""
    force_plan(plan)
    fwd_launches, bwd_launches = LAUNCHES[plan](7)
    arrays, weights, mask = make_case(4, 7, 6, True)
    vals = [torch.as_tensor(v) for v in arrays.values()]
    m = torch.as_tensor(mask)
    params = dict(
        reverse=True, activation="tanh", recurrent_activation="sigmoid", zero_output_for_mask=False
    )
    got = lstm_kernels.forward_route(*vals, m, **params)
    ref = rnn._lstm_impl(*vals, m, **params)
    assert triton_backend.launch_counts()["lstm"] == fwd_launches
    names = ("all_h", "last_h", "last_c", "gates", "cells")
    for name, a, b in zip(names, got, ref):
        assert a.shape == b.shape and a.dtype == b.dtype, name
        assert_close(a, b, what=name)
    cot = [torch.as_tensor(w) for w in weights]
    x, h0, c0, k = vals
    residuals = (ref[0], ref[3], ref[4])
    got = lstm_kernels.backward_route(*cot, h0, c0, k, m, *residuals, **params)
    ref = rnn._lstm_grad_impl(*cot, h0, c0, k, m, *residuals, **params)
    assert triton_backend.launch_counts()["lstm_grad"] == bwd_launches
    for name, a, b in zip(("dx_proj", "dh0", "dc0", "dkernel"), got, ref):
        assert a.shape == b.shape and a.dtype == b.dtype, name
        assert_close(a, b, what=name)


@pytest.mark.parametrize("plan", ["resident", "streamed", "steps"])
def test_float16_matches_fallback_loosely(triton_backend, force_plan, plan):
    force_plan(plan)
    arrays, weights, mask = make_case(3, 5, 9, True, dtype="float16")
    outs, grads = run_lstm(arrays, weights, mask)
    assert triton_backend.launch_counts()["lstm"] == LAUNCHES[plan](5)[0]
    assert triton_backend.launch_counts()["lstm_grad"] > 0
    with backend("fallback"):
        ref_outs, ref_grads = run_lstm(arrays, weights, mask)
    for a, b in zip(outs, ref_outs):
        assert a.dtype == np.float16
        assert_close(a, b, rel=2e-2)
    for name in arrays:
        assert_close(grads[name], ref_grads[name], rel=2e-2, what=f"d{name}")


def test_unsupported_dtype_is_a_clear_error_under_the_triton_backend(triton_backend):
    arrays, _, _ = make_case(2, 3, 4, False, dtype="float64")
    with pytest.raises(ValueError, match="op 'lstm'.*float64"):
        kt.ops.lstm(**arrays)
    assert "lstm" not in triton_backend.launch_counts()
    # The same call under "auto" on CPU tensors runs the fallback.
    with backend("auto"):
        all_h, _, _ = kt.ops.lstm(**arrays)
    assert all_h.shape == (2, 3, 4)


@pytest.mark.parametrize(
    "plan,batch,steps,units", [("resident", 5, 6, 7), ("streamed", 3, 4, 40), ("steps", 2, 3, 9)]
)
def test_routes_match_torch_nn_lstm(triton_backend, force_plan, plan, batch, steps, units):
    """A second oracle: torch.nn.LSTM differentiated by torch.autograd, with the same weights
    (torch's gate order i, f, g, o is Keras's i, f, c, o), for the outputs, the final states
    and the gradients of x, h0, c0, the recurrent kernel and the bias."""
    force_plan(plan)
    gen = torch.Generator(torch.get_default_device()).manual_seed(3)
    module = torch.nn.LSTM(units, units, batch_first=True)
    x = torch.randn(batch, steps, units, generator=gen, requires_grad=True)
    h0 = torch.randn(1, batch, units, generator=gen, requires_grad=True)
    c0 = torch.randn(1, batch, units, generator=gen, requires_grad=True)
    g_all = torch.randn(batch, steps, units, generator=gen)
    g_h, g_c = torch.randn(2, batch, units, generator=gen)
    out, (h_n, c_n) = module(x, (h0, c0))
    (out * g_all).sum().add((h_n[0] * g_h).sum()).add((c_n[0] * g_c).sum()).backward()

    w_ih = module.weight_ih_l0.detach()
    recurrent = module.weight_hh_l0.detach().t().contiguous()
    bias = (module.bias_ih_l0 + module.bias_hh_l0).detach()
    proj = x.detach() @ w_ih.t() + bias
    states = h0.detach()[0], c0.detach()[0]
    params = dict(
        reverse=False, activation="tanh", recurrent_activation="sigmoid", zero_output_for_mask=False
    )
    all_h, h, c, gates, cells = lstm_kernels.forward_route(proj, *states, recurrent, None, **params)
    dproj, dh0, dc0, drec = lstm_kernels.backward_route(
        g_all, g_h, g_c, *states, recurrent, None, all_h, gates, cells, **params
    )
    counts = triton_backend.launch_counts()
    assert (counts["lstm"], counts["lstm_grad"]) == LAUNCHES[plan](steps)
    pairs = [
        ("all_h", all_h, out), ("h", h, h_n[0]), ("c", c, c_n[0]), ("dh0", dh0, h0.grad[0]),
        ("dc0", dc0, c0.grad[0]), ("dx", dproj @ w_ih, x.grad),
        ("drecurrent", drec, module.weight_hh_l0.grad.t()),
        ("dbias", dproj.sum((0, 1)), module.bias_hh_l0.grad),
    ]  # fmt: skip
    for name, a, b in pairs:
        assert_close(a, b.detach(), what=name)


@pytest.mark.parametrize("fastest", ["streamed", "steps", "fallback"])
def test_auto_times_each_plan_and_keeps_the_fastest(fastest):
    """Backend "auto" times the route's plans (`forward_route.variants`) beside the fallback
    and replays the fastest; here a stand-in timer reads which ran from the launches made."""
    from keratron.autodiff.primitive import PRIMITIVES
    from keratron.ops import _dispatch
    from keratron.triton_kernels import launch_counts, reset_launch_counts

    steps = 5
    arrays, weights, mask = make_case(3, steps, 40, True)
    vals = [torch.as_tensor(v) for v in arrays.values()] + [torch.as_tensor(mask)]
    params = dict(
        reverse=False, activation="tanh", recurrent_activation="sigmoid", zero_output_for_mask=True
    )
    prim = PRIMITIVES["lstm"]
    assert lstm_kernels.forward_route.variants(*vals, **params) == ("streamed", "steps")
    ran = {0: "fallback", 1: "streamed", steps: "steps"}
    seconds = {"streamed": 2.0, "steps": 2.0, "fallback": 2.0, fastest: 1.0}

    def timer(run, runs):
        before = launch_counts().get("lstm", 0)
        run()
        return seconds[ran[launch_counts().get("lstm", 0) - before]]

    _dispatch.clear_kernel_choices()
    try:
        first = _dispatch._run_faster(prim, vals, params, timer=timer)
        ((key, choice),) = _dispatch.kernel_choices().items()
        assert choice == ("fallback" if fastest == "fallback" else f"kernel:{fastest}")
        reset_launch_counts()
        again = _dispatch._run_faster(prim, vals, params, timer=timer)
        want = {"fallback": 0, "streamed": 1, "steps": steps}[fastest]
        assert launch_counts().get("lstm", 0) == want
        ref = rnn._lstm_impl(*vals, **params)
        if fastest == "fallback":
            assert again is None
        else:
            for a, b, c in zip(first, again, ref):
                assert_close(a, c)
                assert_close(b, c)
    finally:
        _dispatch.clear_kernel_choices()


def test_a_plan_the_size_cannot_run_is_refused():
    arrays, _, _ = make_case(2, 3, 40, False)
    vals = [torch.as_tensor(v) for v in arrays.values()]
    params = dict(reverse=False, activation="tanh", recurrent_activation="sigmoid",
                  zero_output_for_mask=False)  # fmt: skip
    with pytest.raises(ValueError, match="plan 'resident' cannot run 40 units"):
        lstm_kernels.forward_route(*vals, None, variant="resident", **params)
    assert lstm_kernels.variants(1025, torch.float32) == ("steps",)
    assert lstm_kernels.variants(8, torch.bfloat16) == ("resident", "steps")


def test_a_usual_choice_whose_plan_cannot_run_a_new_size_falls_back_to_the_routes_own(
    monkeypatch,
):
    """Past `_MEASURED_PER_PRIMITIVE` signatures a new one takes the primitive's most frequent
    choice untimed; a plan chosen for other sizes that this size cannot run is replaced by
    the route's own pick, not raised."""
    from keratron.autodiff.primitive import PRIMITIVES
    from keratron.ops import _dispatch
    from keratron.triton_kernels import launch_counts, reset_launch_counts

    monkeypatch.setattr(load("_lstm"), "PERSISTENT_MAX_UNITS", 30)  # 40 units: "steps" only
    monkeypatch.setattr(_dispatch, "_MEASURED_PER_PRIMITIVE", 1)
    steps = 3
    arrays, _, _ = make_case(2, steps, 40, False)
    vals = [torch.as_tensor(v) for v in arrays.values()] + [None]
    params = dict(
        reverse=False, activation="tanh", recurrent_activation="sigmoid", zero_output_for_mask=False
    )
    assert lstm_kernels.forward_route.variants(*vals, **params) == ("steps",)
    _dispatch.clear_kernel_choices()
    try:
        _dispatch._choices[("lstm", "another size", "", False)] = "kernel:streamed"
        reset_launch_counts()
        out = _dispatch._run_faster(PRIMITIVES["lstm"], vals, params, timer=_dispatch._wall_time)
        assert launch_counts()["lstm"] == steps
        for a, b in zip(out, rnn._lstm_impl(*vals, **params)):
            assert_close(a, b)
    finally:
        _dispatch.clear_kernel_choices()
