"""GRU Triton kernels (interpreter) against the CPU fallback: forward outputs, residuals and
gradients w.r.t. x_proj, h0, the recurrent kernel and bias, on irregular shapes, both
reset_after modes, masks and `reverse`, through both plans (the recurrent kernel resident or
streamed)."""

import contextlib

import numpy as np
import pytest
import torch

import keratron as kt
from keratron.ops import rnn
from keratron.triton_kernels import gru as gru_kernels
from keratron.triton_kernels import load
from tests.triton_kernels.interpreter_fixes import widen_bf16_dots

R = np.random.default_rng(11)

# Max error relative to the reference's largest magnitude, per dtype.
TOLERANCE = {"float32": 2e-4, "float16": 2e-2, "bfloat16": 8e-2}


@pytest.fixture
def force_plan(monkeypatch):
    """force_plan(name) makes the routes run `name` whatever the size."""
    module = load("_gru")

    def force(name):
        monkeypatch.setattr(module, "plan", lambda units, dtype: name)

    return force


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


def assert_close(actual, expected, rel=TOLERANCE["float32"], what=""):
    actual, expected = (
        np.asarray(a.float().cpu() if isinstance(a, torch.Tensor) else a, np.float64)
        for a in (actual, expected)
    )
    assert actual.shape == expected.shape, what
    scale = max(np.abs(expected).max(initial=0.0), 1e-6)
    err = np.abs(actual - expected).max(initial=0.0)
    assert err <= rel * scale, f"{what}: max error {err:.3g} vs scale {scale:.3g}"


def make_case(batch, steps, units, masked, bias, dtype="float32"):
    arrays = dict(
        x_proj=R.normal(size=(batch, steps, 3 * units)),
        h0=R.normal(size=(batch, units)) * 0.5,
        recurrent_kernel=R.normal(size=(units, 3 * units)) / np.sqrt(units),
    )
    if bias:
        arrays["recurrent_bias"] = R.normal(size=(3 * units,)) * 0.5
    arrays = {k: v.astype(dtype) for k, v in arrays.items()}
    weights = [
        R.normal(size=(batch, steps, units)).astype(dtype),
        R.normal(size=(batch, units)).astype(dtype),
    ]
    mask = make_mask(batch, steps) if masked else None
    return arrays, weights, mask


def run_gru(arrays, weights, mask, **params):
    """Outputs and input gradients of a weighted sum of (all_h, last_h)."""
    inputs = {k: kt.convert_to_tensor(v) for k, v in arrays.items()}
    with kt.GradientTape() as tape:
        tape.watch(list(inputs.values()))
        outs = kt.ops.gru(**inputs, mask=mask, **params)
        loss = kt.ops.sum(kt.ops.stack([kt.ops.sum(o * w) for o, w in zip(outs, weights)]))
    grads = tape.gradient(loss, list(inputs.values()))
    return [o.numpy() for o in outs], dict(zip(inputs, (g.numpy() for g in grads)))


CASES = [
    # batch, steps, units, masked, reverse, zero_output_for_mask, reset_after
    (3, 1, 5, False, False, False, True),
    (3, 1, 1, True, False, False, False),
    (3, 37, 5, True, False, False, True),
    (3, 37, 5, True, True, False, False),
    (5, 20, 16, False, True, False, True),
    (3, 37, 1, True, True, True, False),
    (18, 4, 29, True, False, True, True),  # two programs, padded to 32
    (18, 4, 29, False, True, False, False),
    (3, 5, 45, True, True, False, True),  # padded to 64
    (3, 5, 45, True, False, False, False),
]


@pytest.mark.parametrize("batch,steps,units,masked,reverse,zero_output,reset_after", CASES)
def test_forward_and_gradients_match_fallback(
    triton_backend, batch, steps, units, masked, reverse, zero_output, reset_after
):
    arrays, weights, mask = make_case(batch, steps, units, masked, bias=reset_after)
    params = dict(reverse=reverse, zero_output_for_mask=zero_output, reset_after=reset_after)
    outs, grads = run_gru(arrays, weights, mask, **params)
    counts = triton_backend.launch_counts()
    assert (counts["gru"], counts["gru_grad"]) == (1, 2)  # the sequence; BPTT and dU
    with backend("fallback"):
        ref_outs, ref_grads = run_gru(arrays, weights, mask, **params)
    for name, a, b in zip(("all_h", "last_h"), outs, ref_outs):
        assert_close(a, b, what=name)
    for name in arrays:
        assert_close(grads[name], ref_grads[name], what=f"d{name}")


@pytest.mark.parametrize(
    "activation,recurrent_activation,masked,reset_after",
    [
        ("relu", "hard_sigmoid", True, True),
        ("linear", "tanh", False, False),
        ("sigmoid", "relu", True, False),
    ],
)
def test_other_activations_match_fallback(
    triton_backend, activation, recurrent_activation, masked, reset_after
):
    arrays, weights, mask = make_case(2, 6, 7, masked, bias=False)
    params = dict(
        activation=activation, recurrent_activation=recurrent_activation, reset_after=reset_after
    )
    outs, grads = run_gru(arrays, weights, mask, **params)
    assert triton_backend.launch_counts()["gru"] == 1
    assert triton_backend.launch_counts()["gru_grad"] == 2
    with backend("fallback"):
        ref_outs, ref_grads = run_gru(arrays, weights, mask, **params)
    for a, b in zip(outs, ref_outs):
        assert_close(a, b)
    for name in arrays:
        assert_close(grads[name], ref_grads[name], what=f"d{name}")


@pytest.mark.parametrize("reset_after,bias", [(True, True), (True, False), (False, False)])
def test_routes_return_the_fallback_residuals(triton_backend, reset_after, bias):
    """The saved gates and candidate terms are part of the contract: gru_grad reads them; and
    the bias gradient is returned (zeros with reset_after=False) as the reference does."""
    arrays, weights, mask = make_case(4, 7, 6, True, bias=bias)
    x, h0, k = (torch.as_tensor(arrays[n]) for n in ("x_proj", "h0", "recurrent_kernel"))
    b = torch.as_tensor(arrays["recurrent_bias"]) if bias else None
    m = torch.as_tensor(mask)
    params = dict(
        reverse=True, reset_after=reset_after, activation="tanh",
        recurrent_activation="sigmoid", zero_output_for_mask=False,
    )  # fmt: skip
    got = gru_kernels.forward_route(x, h0, k, b, m, **params)
    ref = rnn._gru_impl(x, h0, k, b, m, **params)
    assert triton_backend.launch_counts()["gru"] == 1
    for name, a, c in zip(("all_h", "last_h", "gates", "aux"), got, ref):
        assert a.shape == c.shape and a.dtype == c.dtype, name
        assert_close(a, c, what=name)
    g_all, g_h = (torch.as_tensor(w) for w in weights)
    residuals = (ref[0], ref[2], ref[3])
    got = gru_kernels.backward_route(g_all, g_h, h0, k, b, m, *residuals, **params)
    ref = rnn._gru_grad_impl(g_all, g_h, h0, k, b, m, *residuals, **params)
    assert triton_backend.launch_counts()["gru_grad"] == 2
    for name, a, c in zip(("dx_proj", "dh0", "dkernel", "dbias"), got, ref):
        assert a.shape == c.shape and a.dtype == c.dtype, name
        assert_close(a, c, what=name)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("reset_after", [True, False])
def test_half_types_match_fallback_loosely(triton_backend, monkeypatch, dtype, reset_after):
    widen_bf16_dots(monkeypatch)
    half_types_match_fallback(triton_backend, dtype, reset_after)


def half_types_match_fallback(triton_backend, dtype, reset_after):
    arrays, weights, mask = make_case(3, 5, 37, True, bias=reset_after, dtype="float32")
    tensors = {k: kt.ops.cast(kt.convert_to_tensor(v), dtype) for k, v in arrays.items()}
    w = [kt.ops.cast(kt.convert_to_tensor(v), dtype) for v in weights]

    def run():
        with kt.GradientTape() as tape:
            tape.watch(list(tensors.values()))
            outs = kt.ops.gru(**tensors, mask=mask, reset_after=reset_after)
            loss = kt.ops.sum(kt.ops.stack([kt.ops.sum(o * g) for o, g in zip(outs, w)]))
        return outs, tape.gradient(loss, list(tensors.values()))

    outs, grads = run()
    assert triton_backend.launch_counts()["gru"] == 1
    assert triton_backend.launch_counts()["gru_grad"] == 2
    with backend("fallback"):
        ref_outs, ref_grads = run()
    for a, b in zip(outs, ref_outs):
        assert a.dtype == dtype
        assert_close(a.value, b.value, rel=TOLERANCE[dtype])
    for name, a, b in zip(tensors, grads, ref_grads):
        assert_close(a.value, b.value, rel=TOLERANCE[dtype], what=f"d{name}")


def test_plan_follows_the_limits():
    plan = gru_kernels.plan
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        assert [plan(u, dtype) for u in (5, 64, 65, 1024, 1025)] == [
            "resident", "resident", "streamed", "streamed", None,
        ]  # fmt: skip


@pytest.mark.parametrize("units,width", [(5, 16), (29, 32), (45, 64)])
def test_ieee_resident_launches_run_a_config_compiled_for_their_width(triton_backend, units, width):
    # At IEEE precision (this suite's) no one warp count compiles the resident kernels
    # without spills at every width, so each width launches its own; each launched
    # (kernel, width, warps) is one the AOT suite compiles (tests/aot checks no spills).
    from keratron.triton_kernels._common import record_launches

    module = load("_gru")
    arrays, weights, mask = make_case(3, 4, units, True, True)
    with record_launches() as launches:
        run_gru(arrays, weights, mask)
    launched = {
        (k.name, meta["UNITS"], meta["num_warps"])
        for k, _, meta in launches
        if "resident" in k.name
    }
    assert {name for name, _, _ in launched} == {
        "_gru_fwd_resident_kernel", "_gru_bwd_resident_kernel"
    }  # fmt: skip
    compiled = {
        (fn.__name__, consts["UNITS"], warps)
        for _, fn, _, consts, warps, _ in module.aot_specs()
        if consts.get("PRECISION") == "ieee" and "UNITS" in consts
    }
    assert {w for _, w, _ in launched} == {width} and launched <= compiled


STREAMED_CASES = [
    # batch, steps, units, masked, reverse, zero_output_for_mask, reset_after, forced
    (3, 7, 5, True, True, False, True, True),
    (3, 7, 5, True, False, True, False, True),
    (18, 4, 37, True, False, False, True, True),  # two programs, two unit and K tiles
    (18, 4, 37, False, True, False, False, True),
    (5, 3, 129, True, True, False, True, False),  # the route's own plan: five tiles of 32
    (5, 3, 129, True, False, False, False, False),
]


@pytest.mark.parametrize(
    "batch,steps,units,masked,reverse,zero_output,reset_after,forced", STREAMED_CASES
)
def test_streamed_plan_matches_fallback(
    triton_backend, force_plan, batch, steps, units, masked, reverse, zero_output, reset_after,
    forced,
):  # fmt: skip
    if forced:
        force_plan("streamed")
    arrays, weights, mask = make_case(batch, steps, units, masked, bias=reset_after)
    params = dict(reverse=reverse, zero_output_for_mask=zero_output, reset_after=reset_after)
    outs, grads = run_gru(arrays, weights, mask, **params)
    counts = triton_backend.launch_counts()
    assert (counts["gru"], counts["gru_grad"]) == (1, 2)
    with backend("fallback"):
        ref_outs, ref_grads = run_gru(arrays, weights, mask, **params)
    for name, a, b in zip(("all_h", "last_h"), outs, ref_outs):
        assert_close(a, b, what=name)
    for name in arrays:
        assert_close(grads[name], ref_grads[name], what=f"d{name}")


@pytest.mark.parametrize("reset_after", [True, False])
def test_streamed_routes_return_the_fallback_residuals(triton_backend, force_plan, reset_after):
    force_plan("streamed")
    arrays, weights, mask = make_case(4, 6, 33, True, bias=reset_after)
    x, h0, k = (torch.as_tensor(arrays[n]) for n in ("x_proj", "h0", "recurrent_kernel"))
    b = torch.as_tensor(arrays["recurrent_bias"]) if reset_after else None
    m = torch.as_tensor(mask)
    params = dict(
        reverse=False, reset_after=reset_after, activation="tanh",
        recurrent_activation="sigmoid", zero_output_for_mask=True,
    )  # fmt: skip
    got = gru_kernels.forward_route(x, h0, k, b, m, **params)
    ref = rnn._gru_impl(x, h0, k, b, m, **params)
    for name, a, c in zip(("all_h", "last_h", "gates", "aux"), got, ref):
        assert a.shape == c.shape and a.dtype == c.dtype, name
        assert_close(a, c, what=name)
    g_all, g_h = (torch.as_tensor(w) for w in weights)
    residuals = (ref[0], ref[2], ref[3])
    got = gru_kernels.backward_route(g_all, g_h, h0, k, b, m, *residuals, **params)
    ref = rnn._gru_grad_impl(g_all, g_h, h0, k, b, m, *residuals, **params)
    assert triton_backend.launch_counts() == {"gru": 1, "gru_grad": 2}
    for name, a, c in zip(("dx_proj", "dh0", "dkernel", "dbias"), got, ref):
        assert a.shape == c.shape and a.dtype == c.dtype, name
        assert_close(a, c, what=name)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_streamed_half_types_match_fallback_loosely(triton_backend, force_plan, monkeypatch, dtype):
    widen_bf16_dots(monkeypatch)
    force_plan("streamed")
    half_types_match_fallback(triton_backend, dtype, reset_after=dtype == "float16")


def test_sizes_the_routes_decline_run_the_fallback(triton_backend):
    """Past 1024 units the routes decline (NotImplementedError): the forced backend reports
    it, "auto" runs the reference."""
    arrays, _, _ = make_case(2, 2, 1025, False, bias=False)
    with pytest.raises(ValueError, match="op 'gru'.*1025 units"):
        kt.ops.gru(**arrays)
    assert triton_backend.launch_counts() == {}
    with backend("auto"):
        all_h, _ = kt.ops.gru(**arrays)
    assert all_h.shape == (2, 2, 1025)


def test_empty_sequence_matches_fallback(triton_backend):
    arrays, weights, _ = make_case(2, 0, 5, False, bias=True)
    weights[0] = weights[0][:, :0]
    outs, grads = run_gru(arrays, weights, None)
    with backend("fallback"):
        ref_outs, ref_grads = run_gru(arrays, weights, None)
    for a, b in zip(outs, ref_outs):
        assert_close(a, b)
    for name in arrays:
        assert_close(grads[name], ref_grads[name], what=f"d{name}")


@pytest.mark.parametrize("batch,steps,units", [(5, 6, 7), (3, 4, 30)])
def test_routes_match_torch_nn_gru(triton_backend, batch, steps, units):
    """A second oracle: torch.nn.GRU differentiated by torch.autograd, with the same weights.
    torch's GRU is Keras's reset_after=True with gates in the order r, z, n; its candidate
    `tanh(x_n + b_in + r * (h @ W_hn + b_hn))` and new state `(1 - z) * n + z * h` are Keras's."""
    gen = torch.Generator(torch.get_default_device()).manual_seed(5)
    module = torch.nn.GRU(units, units, batch_first=True)
    x = torch.randn(batch, steps, units, generator=gen, requires_grad=True)
    h0 = torch.randn(1, batch, units, generator=gen, requires_grad=True)
    g_all = torch.randn(batch, steps, units, generator=gen)
    g_h = torch.randn(batch, units, generator=gen)
    out, h_n = module(x, h0)
    (out * g_all).sum().add((h_n[0] * g_h).sum()).backward()

    def keras_order(w):  # torch's (r, z, n) blocks -> Keras's (z, r, h)
        r, z, n = w.detach().chunk(3, 0)
        return torch.cat([z, r, n], 0)

    w_ih = keras_order(module.weight_ih_l0)
    recurrent = keras_order(module.weight_hh_l0).t().contiguous()
    proj = x.detach() @ w_ih.t() + keras_order(module.bias_ih_l0)
    bias = keras_order(module.bias_hh_l0)
    params = dict(
        reverse=False, reset_after=True, activation="tanh", recurrent_activation="sigmoid",
        zero_output_for_mask=False,
    )  # fmt: skip
    h = h0.detach()[0]
    all_h, last, gates, aux = gru_kernels.forward_route(proj, h, recurrent, bias, None, **params)
    dproj, dh0, drec, dbias = gru_kernels.backward_route(
        g_all, g_h, h, recurrent, bias, None, all_h, gates, aux, **params
    )
    assert triton_backend.launch_counts() == {"gru": 1, "gru_grad": 2}
    pairs = [
        ("all_h", all_h, out), ("h", last, h_n[0]), ("dh0", dh0, h0.grad[0]),
        ("dx", dproj @ w_ih, x.grad),
        ("drecurrent", drec, keras_order(module.weight_hh_l0.grad).t()),
        ("dbias", dbias, keras_order(module.bias_hh_l0.grad)),
        ("dbias_input", dproj.sum((0, 1)), keras_order(module.bias_ih_l0.grad)),
    ]  # fmt: skip
    for name, a, b in pairs:
        assert_close(a, b.detach(), what=name)


@pytest.mark.parametrize("plan", ["resident", "streamed"])
def test_strided_inputs_match_fallback(triton_backend, force_plan, plan):
    """x_proj, the recurrent kernel and g_all are read through their strides (a slice, a
    transpose), as the layers and the tape may hand them over."""
    force_plan(plan)
    batch, steps, units = 3, 6, 7
    arrays, weights, mask = make_case(batch, steps, units, True, bias=True)
    wide = torch.zeros((batch, steps, 6 * units))
    wide[..., ::2] = torch.as_tensor(arrays["x_proj"])
    x = wide[..., ::2]  # every other feature of a wider buffer
    k = torch.as_tensor(arrays["recurrent_kernel"]).t().contiguous().t()
    assert not x.is_contiguous() and not k.is_contiguous()
    h0, b = torch.as_tensor(arrays["h0"]), torch.as_tensor(arrays["recurrent_bias"])
    m = torch.as_tensor(mask)
    params = dict(
        reverse=True, reset_after=True, activation="tanh", recurrent_activation="sigmoid",
        zero_output_for_mask=False,
    )  # fmt: skip
    got = gru_kernels.forward_route(x, h0, k, b, m, **params)
    ref = rnn._gru_impl(x.contiguous(), h0, k.contiguous(), b, m, **params)
    for name, a, c in zip(("all_h", "last_h", "gates", "aux"), got, ref):
        assert_close(a, c, what=name)
    # Time-major storage.
    g_all = torch.as_tensor(weights[0]).transpose(0, 1).contiguous().transpose(0, 1)
    g_h = torch.as_tensor(weights[1])
    residuals = (ref[0], ref[2], ref[3])
    got = gru_kernels.backward_route(g_all, g_h, h0, k, b, m, *residuals, **params)
    ref = rnn._gru_grad_impl(g_all.contiguous(), g_h, h0, k.contiguous(), b, m, *residuals,
                             **params)  # fmt: skip
    assert triton_backend.launch_counts() == {"gru": 1, "gru_grad": 2}
    for name, a, c in zip(("dx_proj", "dh0", "dkernel", "dbias"), got, ref):
        assert_close(a, c, what=name)
