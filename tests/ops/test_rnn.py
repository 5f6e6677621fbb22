"""LSTM and GRU sequence primitives.

Gradients: float64 central differences (first and second order) and torch.autograd through
a plain torch loop written here (Keras 3's masking rule included). Values: real
keras.layers.LSTM / GRU (torch backend) with random weights, initial states, masks and
go_backwards.
"""

import numpy as np
import pytest
import torch

import keratron as kt
from keratron.ops import rnn
from tests.conftest import require
from tests.gradcheck import check_against_torch, check_grads

R = np.random.default_rng(11)

TORCH_ACT = {
    "tanh": torch.tanh,
    "sigmoid": torch.sigmoid,
    "relu": torch.relu,
    "hard_sigmoid": torch.nn.functional.hardsigmoid,
    "linear": lambda x: x,
}


def make_mask(batch, steps):
    """A mask with a leading masked step, a gap, a fully masked row and a full row."""
    m = R.random((batch, steps)) > 0.35
    m[0, 0] = False
    m[-1] = True
    if batch > 2:
        m[1] = False
    return m


# --------------------------------------------------------------------- torch reference loops
def _masked(mask, t, new, old):
    return new if mask is None else torch.where(torch.as_tensor(mask)[:, t, None], new, old)


def _output(mask, t, h_new, prev, zero_output):
    if mask is None:
        return h_new
    return _masked(mask, t, h_new, torch.zeros_like(h_new) if zero_output else prev)


def torch_lstm(
    x, h, c, kernel, mask=None, reverse=False, act="tanh", ract="sigmoid", zero_output=False
):
    act, ract = TORCH_ACT[act], TORCH_ACT[ract]
    steps = range(x.shape[1] - 1, -1, -1) if reverse else range(x.shape[1])
    outs, prev = [], torch.zeros_like(h)
    for t in steps:
        i, f, g, o = (x[:, t] + h @ kernel).chunk(4, dim=1)
        c_new = ract(f) * c + ract(i) * act(g)
        h_new = ract(o) * act(c_new)
        prev = _output(mask, t, h_new, prev, zero_output)
        outs.append(prev)
        h, c = _masked(mask, t, h_new, h), _masked(mask, t, c_new, c)
    return torch.stack(outs, 1), h, c


def torch_gru(
    x,
    h,
    kernel,
    bias=None,
    mask=None,
    reverse=False,
    reset_after=True,
    act="tanh",
    ract="sigmoid",
    zero_output=False,
):
    act, ract = TORCH_ACT[act], TORCH_ACT[ract]
    u = h.shape[1]
    steps = range(x.shape[1] - 1, -1, -1) if reverse else range(x.shape[1])
    outs, prev = [], torch.zeros_like(h)
    for t in steps:
        xz, xr, xh = x[:, t].chunk(3, dim=1)
        if reset_after:
            rec = h @ kernel + (0 if bias is None else bias)
            z, r = ract(xz + rec[:, :u]), ract(xr + rec[:, u : 2 * u])
            hh = act(xh + r * rec[:, 2 * u :])
        else:
            z = ract(xz + h @ kernel[:, :u])
            r = ract(xr + h @ kernel[:, u : 2 * u])
            hh = act(xh + (r * h) @ kernel[:, 2 * u :])
        h_new = z * h + (1 - z) * hh
        prev = _output(mask, t, h_new, prev, zero_output)
        outs.append(prev)
        h = _masked(mask, t, h_new, h)
    return torch.stack(outs, 1), h


# ---------------------------------------------------------------------------- gradient table
# (id, batch, steps, units, masked, reverse, zero_output_for_mask)
CASES = [
    ("T1", 2, 1, 3, False, False, False),
    ("T7", 3, 7, 5, False, False, False),
    ("T7_mask", 4, 7, 5, True, False, False),
    ("T7_reverse", 3, 7, 3, False, True, False),
    ("T7_mask_reverse", 4, 7, 3, True, True, False),
    ("T1_mask_reverse", 3, 1, 5, True, True, False),
    ("T7_mask_zero_output", 4, 7, 3, True, False, True),
]
IDS = [c[0] for c in CASES]


def lstm_args(b, t, u):
    return [
        R.standard_normal((b, t, 4 * u)),
        R.standard_normal((b, u)),
        R.standard_normal((b, u)),
        R.standard_normal((u, 4 * u)) * 0.6,
    ]


def gru_args(b, t, u):
    return [
        R.standard_normal((b, t, 3 * u)),
        R.standard_normal((b, u)),
        R.standard_normal((u, 3 * u)) * 0.6,
        R.standard_normal(3 * u) * 0.5,
    ]


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_lstm_grads(case):
    _, b, t, u, masked, reverse, zero = case
    mask = make_mask(b, t) if masked else None
    kw = dict(mask=mask, reverse=reverse, zero_output_for_mask=zero)
    fn = lambda x, h, c, k: rnn.lstm(x, h, c, k, **kw)  # noqa: E731
    args = lstm_args(b, t, u)
    check_grads(fn, args)
    check_against_torch(
        fn, lambda x, h, c, k: torch_lstm(x, h, c, k, mask, reverse, zero_output=zero), args
    )


@pytest.mark.parametrize("reset_after", [True, False], ids=["reset_after", "reset_before"])
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_gru_grads(case, reset_after):
    _, b, t, u, masked, reverse, zero = case
    mask = make_mask(b, t) if masked else None
    kw = dict(mask=mask, reverse=reverse, reset_after=reset_after, zero_output_for_mask=zero)
    args = gru_args(b, t, u)
    if reset_after:
        fn = lambda x, h, k, bias: rnn.gru(x, h, k, bias, **kw)  # noqa: E731
        ref = lambda x, h, k, bias: torch_gru(x, h, k, bias, mask, reverse, True, zero_output=zero)  # noqa: E731
    else:
        args = args[:3]
        fn = lambda x, h, k: rnn.gru(x, h, k, **kw)  # noqa: E731
        ref = lambda x, h, k: torch_gru(x, h, k, None, mask, reverse, False, zero_output=zero)  # noqa: E731
    check_grads(fn, args)
    check_against_torch(fn, ref, args)


def test_gru_reset_after_without_recurrent_bias():
    args = gru_args(2, 4, 3)[:3]
    fn = lambda x, h, k: rnn.gru(x, h, k)  # noqa: E731
    check_grads(fn, args)
    check_against_torch(fn, lambda x, h, k: torch_gru(x, h, k), args)


ACTIVATIONS = [("relu", "hard_sigmoid"), ("linear", "sigmoid"), ("sigmoid", "tanh")]


@pytest.mark.parametrize("acts", ACTIVATIONS, ids=["-".join(a) for a in ACTIVATIONS])
def test_lstm_other_activations_against_torch(acts):
    act, ract = acts
    mask = make_mask(3, 5)
    check_against_torch(
        lambda x, h, c, k: rnn.lstm(
            x, h, c, k, mask=mask, activation=act, recurrent_activation=ract
        ),
        lambda x, h, c, k: torch_lstm(x, h, c, k, mask, act=act, ract=ract),
        lstm_args(3, 5, 3),
    )


@pytest.mark.parametrize("reset_after", [True, False], ids=["reset_after", "reset_before"])
@pytest.mark.parametrize("acts", ACTIVATIONS, ids=["-".join(a) for a in ACTIVATIONS])
def test_gru_other_activations_against_torch(acts, reset_after):
    act, ract = acts
    mask = make_mask(3, 5)
    kw = dict(mask=mask, reset_after=reset_after, activation=act, recurrent_activation=ract)
    check_against_torch(
        lambda x, h, k: rnn.gru(x, h, k, **kw),
        lambda x, h, k: torch_gru(x, h, k, None, mask, False, reset_after, act, ract),
        gru_args(3, 5, 3)[:3],
    )


def test_gradient_through_each_lstm_output_alone():
    # Cotangents on only one of all_h / last_h / last_c must still reach every input.
    x, h, c, k = [kt.convert_to_tensor(a) for a in lstm_args(2, 4, 3)]
    for pick in range(3):
        with kt.GradientTape() as tape:
            tape.watch([x, h, c, k])
            out = rnn.lstm(x, h, c, k)[pick]
            loss = kt.ops.sum(out * out)
        grads = tape.gradient(loss, [x, h, c, k])
        tx, th, tc, tk = [torch.tensor(a.numpy(), requires_grad=True) for a in (x, h, c, k)]
        ref = torch_lstm(tx, th, tc, tk)[pick]
        want = torch.autograd.grad((ref * ref).sum(), [tx, th, tc, tk])
        for g, w in zip(grads, want):
            np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-9, atol=1e-12)


def test_float32_dtype_and_shapes():
    x, h, c, k = [a.astype("float32") for a in lstm_args(2, 6, 5)]
    all_h, last_h, last_c = rnn.lstm(x, h, c, k)
    assert all_h.shape == (2, 6, 5) and last_h.shape == (2, 5) and last_c.shape == (2, 5)
    assert all_h.dtype == last_h.dtype == last_c.dtype == "float32"
    np.testing.assert_allclose(all_h.numpy()[:, -1], last_h.numpy(), rtol=0, atol=0)
    gx, gh, gk, _ = gru_args(2, 6, 5)
    all_h, last_h = rnn.gru(gx.astype("float32"), gh.astype("float32"), gk.astype("float32"))
    assert all_h.dtype == last_h.dtype == "float32" and all_h.shape == (2, 6, 5)


def _avals(values):
    return [None if v is None else (tuple(v.shape), v.dtype) for v in values]


def _assert_abstract_matches(prim, values, params):
    got = prim.abstract_eval(_avals(values), params)
    outs = prim.impl(*values, **params)
    assert got == [(tuple(o.shape), o.dtype) for o in outs]
    return outs


@pytest.mark.parametrize("masked", [False, True])
def test_abstract_rules_match_the_implementations(masked):
    assert rnn.lstm_p.name == "lstm" and rnn.gru_p.name == "gru"
    b, t, u = 2, 5, 3
    mask = torch.as_tensor(make_mask(b, t)) if masked else None
    acts = dict(activation="tanh", recurrent_activation="sigmoid", zero_output_for_mask=False)
    x, h, c, k = (torch.tensor(a, dtype=torch.float32) for a in lstm_args(b, t, u))
    params = dict(reverse=True, **acts)
    all_h, _, _, gates, cells = _assert_abstract_matches(rnn.lstm_p, [x, h, c, k, mask], params)
    grad_in = [all_h, h, c, h, c, k, mask, all_h, gates, cells]
    _assert_abstract_matches(rnn.lstm_grad_p, grad_in, params)
    for reset_after in (True, False):
        x, h, k, bias = (torch.tensor(a, dtype=torch.float64) for a in gru_args(b, t, u))
        bias = bias if reset_after else None
        params = dict(reverse=False, reset_after=reset_after, **acts)
        all_h, _, gates, aux = _assert_abstract_matches(rnn.gru_p, [x, h, k, bias, mask], params)
        grad_in = [all_h, h, h, k, bias, mask, all_h, gates, aux]
        _assert_abstract_matches(rnn.gru_grad_p, grad_in, params)


def test_argument_errors():
    x, h, c, k = lstm_args(2, 3, 4)
    with pytest.raises(ValueError, match=r"lstm: `x_proj` must have shape"):
        rnn.lstm(x[..., :-1], h, c, k)
    with pytest.raises(ValueError, match=r"lstm: `c0` must have shape \(2, 4\)"):
        rnn.lstm(x, h, c[:, :3], k)
    with pytest.raises(ValueError, match=r"lstm: `recurrent_kernel` must have shape \(4, 16\)"):
        rnn.lstm(x, h, c, k[:, :12])
    with pytest.raises(ValueError, match=r"lstm: `mask` must have shape \(2, 3\)"):
        rnn.lstm(x, h, c, k, mask=np.ones((2, 4), bool))
    with pytest.raises(ValueError, match="lstm: `activation` must be one of"):
        rnn.lstm(x, h, c, k, activation="gelu")
    gx, gh, gk, gb = gru_args(2, 3, 4)
    with pytest.raises(ValueError, match="gru: `recurrent_bias` is only used with reset_after"):
        rnn.gru(gx, gh, gk, gb, reset_after=False)
    with pytest.raises(ValueError, match=r"gru: `recurrent_bias` must have shape \(12,\)"):
        rnn.gru(gx, gh, gk, gb[:-1])
    with pytest.raises(ValueError, match="gru: `recurrent_activation` must be one of"):
        rnn.gru(gx, gh, gk, recurrent_activation="softmax")


# -------------------------------------------------------------------- parity with real Keras
def _random_weights(layer, scale=0.5):
    for w in layer.weights:
        w.assign(R.standard_normal(tuple(w.shape)).astype("float32") * scale)
    return [np.asarray(w.numpy()) for w in layer.weights]


KERAS_CASES = [
    ("plain", False, False, False),
    ("mask", True, False, False),
    ("backwards", False, True, False),
    ("mask_backwards", True, True, False),
    ("mask_zero_output", True, False, True),
]


@pytest.mark.parametrize("case", KERAS_CASES, ids=[c[0] for c in KERAS_CASES])
def test_lstm_matches_keras(case):
    keras = require("keras")
    _, masked, backwards, zero = case
    b, t, d, u = 4, 7, 6, 5
    x = R.standard_normal((b, t, d)).astype("float32")
    h0, c0 = (R.standard_normal((b, u)).astype("float32") for _ in range(2))
    mask = make_mask(b, t) if masked else None
    layer = keras.layers.LSTM(
        u,
        return_sequences=True,
        return_state=True,
        go_backwards=backwards,
        zero_output_for_mask=zero,
    )
    layer.build((b, t, d))
    kernel, rec_kernel, bias = _random_weights(layer)
    want = [keras.ops.convert_to_numpy(o) for o in layer(x, initial_state=[h0, c0], mask=mask)]
    got = rnn.lstm(
        x @ kernel + bias,
        h0,
        c0,
        rec_kernel,
        mask=mask,
        reverse=backwards,
        zero_output_for_mask=zero,
    )
    for g, w in zip(got, want):
        assert g.shape == w.shape
        np.testing.assert_allclose(g.numpy(), w, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("reset_after", [True, False], ids=["reset_after", "reset_before"])
@pytest.mark.parametrize("case", KERAS_CASES, ids=[c[0] for c in KERAS_CASES])
def test_gru_matches_keras(case, reset_after):
    keras = require("keras")
    _, masked, backwards, zero = case
    b, t, d, u = 4, 7, 6, 3
    x = R.standard_normal((b, t, d)).astype("float32")
    h0 = R.standard_normal((b, u)).astype("float32")
    mask = make_mask(b, t) if masked else None
    layer = keras.layers.GRU(
        u,
        return_sequences=True,
        return_state=True,
        go_backwards=backwards,
        reset_after=reset_after,
        zero_output_for_mask=zero,
    )
    layer.build((b, t, d))
    kernel, rec_kernel, bias = _random_weights(layer)
    want = [keras.ops.convert_to_numpy(o) for o in layer(x, initial_state=[h0], mask=mask)]
    if reset_after:  # Keras stores the input and recurrent biases as two rows
        x_proj, rec_bias = x @ kernel + bias[0], bias[1]
    else:
        x_proj, rec_bias = x @ kernel + bias, None
    got = rnn.gru(
        x_proj,
        h0,
        rec_kernel,
        rec_bias,
        mask=mask,
        reverse=backwards,
        reset_after=reset_after,
        zero_output_for_mask=zero,
    )
    for g, w in zip(got, want):
        assert g.shape == w.shape
        np.testing.assert_allclose(g.numpy(), w, rtol=1e-5, atol=1e-5)


def test_lstm_matches_keras_with_hard_sigmoid_and_relu():
    keras = require("keras")
    b, t, d, u = 3, 5, 4, 3
    x = R.standard_normal((b, t, d)).astype("float32")
    layer = keras.layers.LSTM(
        u,
        return_sequences=True,
        return_state=True,
        activation="relu",
        recurrent_activation="hard_sigmoid",
    )
    layer.build((b, t, d))
    kernel, rec_kernel, bias = _random_weights(layer)
    want = [keras.ops.convert_to_numpy(o) for o in layer(x)]
    zeros = np.zeros((b, u), "float32")
    got = rnn.lstm(
        x @ kernel + bias,
        zeros,
        zeros,
        rec_kernel,
        activation="relu",
        recurrent_activation="hard_sigmoid",
    )
    for g, w in zip(got, want):
        np.testing.assert_allclose(g.numpy(), w, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("reverse", [False, True])
def test_traced_step_matches_eager(reverse):
    # Under keratron.function the primitives are recorded through abstract evaluation and
    # their VJPs replayed from the graph: loss and gradients must equal the eager ones.
    from keratron.autodiff.function import function

    b, t, u = 3, 5, 4
    x = kt.convert_to_tensor(R.standard_normal((b, t, 4 * u)).astype("float32"))
    h0 = kt.convert_to_tensor(R.standard_normal((b, u)).astype("float32"))
    mask = kt.convert_to_tensor(make_mask(b, t))
    k_lstm = kt.Variable(R.standard_normal((u, 4 * u)).astype("float32") * 0.5)
    k_gru = kt.Variable(R.standard_normal((u, 3 * u)).astype("float32") * 0.5)
    rec_bias = kt.Variable(R.standard_normal(3 * u).astype("float32"))

    def step(x, mask):
        with kt.GradientTape() as tape:
            all_h, last_h, last_c = rnn.lstm(x, h0, h0, k_lstm, mask=mask, reverse=reverse)
            g_all, g_last = rnn.gru(x[..., : 3 * u], last_h, k_gru, rec_bias, mask=mask)
            loss = kt.ops.sum(all_h * g_all) + kt.ops.sum(last_c * g_last)
        return loss, tape.gradient(loss, [k_lstm, k_gru, rec_bias])

    traced = function(step)
    for _ in range(2):  # trace, then replay
        loss, grads = traced(x, mask)
    want_loss, want_grads = step(x, mask)
    np.testing.assert_allclose(float(loss), float(want_loss), rtol=1e-6)
    for g, w in zip(grads, want_grads):
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("masked", [False, True])
def test_lstm_empty_sequence_passes_states_through(masked):
    b, u = 2, 3
    mask = np.zeros((b, 0), bool) if masked else None
    args = lstm_args(b, 0, u)
    check_grads(lambda x, h, c, k: rnn.lstm(x, h, c, k, mask=mask), args)
    all_h, last_h, last_c = rnn.lstm(*args, mask=mask)
    assert all_h.shape == (b, 0, u)
    np.testing.assert_array_equal(last_h.numpy(), args[1])
    np.testing.assert_array_equal(last_c.numpy(), args[2])


@pytest.mark.parametrize("reset_after", [True, False], ids=["reset_after", "reset_before"])
@pytest.mark.parametrize("masked", [False, True])
def test_gru_empty_sequence_passes_state_through(masked, reset_after):
    b, u = 2, 3
    mask = np.zeros((b, 0), bool) if masked else None
    x, h, k, bias = gru_args(b, 0, u)
    bias = bias if reset_after else None
    kw = dict(mask=mask, reset_after=reset_after)
    check_grads(lambda x, h, k: rnn.gru(x, h, k, bias, **kw), [x, h, k])
    all_h, last_h = rnn.gru(x, h, k, bias, **kw)
    assert all_h.shape == (b, 0, u)
    np.testing.assert_array_equal(last_h.numpy(), h)


SECOND_ORDER = [("plain", False, False), ("mask", True, False), ("mask_reverse", True, True)]


@pytest.mark.parametrize("case", SECOND_ORDER, ids=[c[0] for c in SECOND_ORDER])
def test_lstm_second_order(case):
    # A gradient taken under a recording outer tape goes through the differentiable
    # step-by-step form; its derivative must match central differences of the fused gradient.
    _, masked, reverse = case
    mask = make_mask(3, 4) if masked else None
    check_grads(
        lambda x, h, c, k: rnn.lstm(x, h, c, k, mask=mask, reverse=reverse),
        lstm_args(3, 4, 3),
        order=2,
    )


@pytest.mark.parametrize("reset_after", [True, False], ids=["reset_after", "reset_before"])
@pytest.mark.parametrize("case", SECOND_ORDER, ids=[c[0] for c in SECOND_ORDER])
def test_gru_second_order(case, reset_after):
    _, masked, reverse = case
    mask = make_mask(3, 4) if masked else None
    x, h, k, bias = gru_args(3, 4, 3)
    bias = bias if reset_after else None
    kw = dict(mask=mask, reverse=reverse, reset_after=reset_after)
    check_grads(lambda x, h, k: rnn.gru(x, h, k, bias, **kw), [x, h, k], order=2)


def test_first_order_gradient_is_the_same_under_an_outer_tape():
    args = [kt.convert_to_tensor(a) for a in lstm_args(2, 5, 3)]
    mask = make_mask(2, 5)

    def grads():
        with kt.GradientTape() as tape:
            tape.watch(args)
            loss = kt.ops.sum(rnn.lstm(*args, mask=mask, reverse=True)[0] ** 2)
        return tape.gradient(loss, args)

    fused = grads()
    with kt.GradientTape() as outer:
        outer.watch(args)
        composite = grads()
    for a, b in zip(fused, composite):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-10, atol=1e-12)


# ------------------------------------------------------------------ lstm_sequence (oneDNN)
# (id, batch, steps, features, units, reverse, bias)
SEQ_CASES = [
    ("T1_nobias", 1, 1, 2, 3, False, False),
    ("T7", 3, 7, 5, 6, False, True),
    ("T5_reverse", 2, 5, 9, 33, True, True),
    ("T6_reverse_nobias", 4, 6, 3, 8, True, False),
]
SEQ_IDS = [c[0] for c in SEQ_CASES]


def seq_args(b, t, f, u, bias, dtype="float64"):
    args = [
        R.standard_normal((b, t, f)),
        R.standard_normal((f, 4 * u)) * 0.5,
        R.standard_normal((u, 4 * u)) * 0.5,
        R.standard_normal((b, u)),
        R.standard_normal((b, u)),
    ]
    if bias:
        args.append(R.standard_normal(4 * u) * 0.5)
    return [a.astype(dtype) for a in args]


def seq_fn(reverse, **kw):
    def fn(x, k, rk, h, c, bias=None):
        return rnn.lstm_sequence(x, k, rk, bias, h, c, reverse=reverse, **kw)

    return fn


def torch_seq(reverse):
    def fn(x, k, rk, h, c, bias=None):
        proj = x @ k + (0 if bias is None else bias)
        return torch_lstm(proj, h, c, rk, reverse=reverse)

    return fn


@pytest.fixture
def onednn_calls(monkeypatch):
    """Counts calls of the oneDNN forward and backward (the CPU routes)."""
    calls = []
    for prim in (rnn.lstm_onednn_p, rnn.lstm_onednn_grad_p):
        real = prim.routes["cpu"]
        monkeypatch.setitem(
            prim.routes,
            "cpu",
            lambda *a, _r=real, _n=prim.name, **k: calls.append(_n) or _r(*a, **k),
        )
    return calls


@pytest.mark.parametrize("case", SEQ_CASES, ids=SEQ_IDS)
def test_lstm_sequence_float32_on_onednn_against_torch(case, onednn_calls):
    # Values and every input gradient against torch.autograd through the plain torch loop.
    _, b, t, f, u, reverse, bias = case
    args = seq_args(b, t, f, u, bias, "float32")
    check_against_torch(seq_fn(reverse), torch_seq(reverse), args, rtol=2e-5, atol=2e-5)
    assert "lstm_onednn" in onednn_calls and "lstm_onednn_grad" in onednn_calls


@pytest.mark.parametrize("case", SEQ_CASES, ids=SEQ_IDS)
def test_lstm_sequence_float64_grads(case, onednn_calls):
    # float64 runs as the projection and the `lstm` primitive: central differences.
    _, b, t, f, u, reverse, bias = case
    args = seq_args(b, t, f, u, bias)
    check_grads(seq_fn(reverse), args)
    check_against_torch(seq_fn(reverse), torch_seq(reverse), args)
    assert onednn_calls == []


@pytest.mark.parametrize("pick", [0, 1, 2], ids=["all_h", "last_h", "last_c"])
def test_lstm_sequence_one_output_alone(pick):
    # Cotangents on one output only: the others reach oneDNN's backward as zeros.
    args = [kt.convert_to_tensor(a) for a in seq_args(3, 4, 5, 6, True, "float32")]
    with kt.GradientTape() as tape:
        tape.watch(args)
        out = seq_fn(False)(*args)[pick]
        loss = kt.ops.sum(out * out)
    grads = tape.gradient(loss, args)
    targs = [torch.tensor(a.numpy(), requires_grad=True) for a in args]
    ref = torch_seq(False)(*targs)[pick]
    want = torch.autograd.grad((ref * ref).sum(), targs)
    for g, w in zip(grads, want):
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=2e-5, atol=2e-5)


def test_lstm_sequence_second_order_through_onednn(onednn_calls):
    # Under a recording outer tape the VJP is the differentiable step-by-step form: the
    # gradient of <u, grad> must equal torch's double backward of the same loop.
    args = seq_args(2, 4, 3, 5, True, "float32")
    us = [R.standard_normal(s).astype("float32") for s in [(2, 4, 5), (2, 5), (2, 5)]]
    xs = [kt.convert_to_tensor(a) for a in args]
    with kt.GradientTape() as outer:
        outer.watch(xs)
        with kt.GradientTape() as inner:
            inner.watch(xs)
            outs = seq_fn(False)(*xs)
            loss = sum(kt.ops.sum(o * u) for o, u in zip(outs, us))
        g_kernel = inner.gradient(loss, xs[1])
        second = kt.ops.sum(g_kernel * g_kernel)
    got = outer.gradient(second, xs)
    ts = [torch.tensor(a, requires_grad=True) for a in args]
    touts = torch_seq(False)(*ts)
    tloss = sum((o * torch.tensor(u)).sum() for o, u in zip(touts, us))
    (tg,) = torch.autograd.grad(tloss, ts[1], create_graph=True)
    want = torch.autograd.grad((tg * tg).sum(), ts)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-4, atol=1e-4)
    assert "lstm_onednn" in onednn_calls


def test_lstm_sequence_traced_matches_eager(onednn_calls):
    from keratron.autodiff.function import function

    x, k, rk, h, c, bias = seq_args(3, 6, 4, 5, True, "float32")
    x, h, c = (kt.convert_to_tensor(a) for a in (x, h, c))
    weights = [kt.Variable(a) for a in (k, rk, bias)]

    def step(x):
        with kt.GradientTape() as tape:
            tape.watch(x)
            all_h, last_h, _ = rnn.lstm_sequence(x, weights[0], weights[1], weights[2], h, c)
            loss = kt.ops.sum(all_h * all_h) + kt.ops.sum(last_h)
        return loss, tape.gradient(loss, [x, *weights])

    traced = function(step)
    for _ in range(2):  # trace, then replay
        loss, grads = traced(x)
    want_loss, want_grads = step(x)
    np.testing.assert_allclose(float(loss), float(want_loss), rtol=1e-6)
    for g, w in zip(grads, want_grads):
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-5, atol=1e-6)
    assert onednn_calls.count("lstm_onednn") == 3  # two traced calls and the eager one


def test_lstm_sequence_abstract_matches_onednn():
    x, k, rk, h, c, bias = (torch.tensor(a) for a in seq_args(2, 5, 3, 7, True, "float32"))
    outs = _assert_abstract_matches(rnn.lstm_onednn_p, [x, k, rk, bias, h, c], {"reverse": True})
    grad_in = [outs[0], outs[1], outs[2], x, k, rk, bias, h, c, *outs]
    _assert_abstract_matches(rnn.lstm_onednn_grad_p, grad_in, {"reverse": True})


def test_lstm_sequence_other_cases_use_the_lstm_primitive(onednn_calls):
    args = seq_args(3, 5, 4, 3, True, "float32")
    mask = make_mask(3, 5)
    ref = lambda x, k, rk, h, c, b: torch_lstm(x @ k + b, h, c, rk, mask)  # noqa: E731
    check_against_torch(seq_fn(False, mask=mask), ref, args, rtol=2e-5, atol=2e-5)
    act = seq_fn(False, activation="relu", recurrent_activation="hard_sigmoid")
    ref = lambda x, k, rk, h, c, b: torch_lstm(x @ k + b, h, c, rk, act="relu", ract="hard_sigmoid")  # noqa: E731
    check_against_torch(act, ref, args, rtol=2e-5, atol=2e-5)
    assert onednn_calls == []


def test_lstm_sequence_argument_errors():
    x, k, rk, h, c = seq_args(2, 3, 4, 5, False, "float32")
    with pytest.raises(ValueError, match=r"lstm_sequence: `x` must have shape \(batch, time"):
        rnn.lstm_sequence(x[0], k, rk, None, h, c)
    with pytest.raises(ValueError, match=r"lstm_sequence: `kernel` must have shape \(4, 20\)"):
        rnn.lstm_sequence(x, k[:-1], rk, None, h, c)
    with pytest.raises(ValueError, match=r"lstm_sequence: `c0` must have shape \(2, 5\)"):
        rnn.lstm_sequence(x, k, rk, None, h, c[:, :-1])
