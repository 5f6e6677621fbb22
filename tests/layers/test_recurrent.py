"""Recurrent layers and wrappers: every layer through `run_layer_test`, outputs compared with
real Keras (same weights, inputs, masks, initial states and dropout masks), stateful
behaviour, generic cells, and errors."""

import re

import numpy as np
import pytest

import keratron as kt
from keratron.autodiff import tree
from keratron.layers import recurrent
from tests.conftest import require
from tests.layers.layer_test import _check_training_step, assert_matches_keras, run_layer_test

L = kt.layers
R = np.random.default_rng(5)


def x32(*shape):
    return R.standard_normal(shape).astype("float32")


def make_mask(batch, steps):
    """A mask with a leading masked step, a gap in the middle, and a full row."""
    m = np.ones((batch, steps), bool)
    m[0, 0] = False
    m[1 % batch, steps // 2] = False
    m[-1, -1] = False
    return m


@pytest.fixture(scope="module")
def keras():
    return require("keras")


def assert_pair_matches(k_layer, o_layer, inputs, call_kwargs=None, k_call_kwargs=None, atol=1e-5):
    """Like `assert_matches_keras`, for layers built outside it (wrappers, cells): runs both,
    copies randomised Keras weights into ours, and compares every output."""
    import keras

    call_kwargs = dict(call_kwargs or {})
    k_call_kwargs = dict(call_kwargs if k_call_kwargs is None else k_call_kwargs)
    k_layer(inputs, **k_call_kwargs)
    o_layer(inputs, **call_kwargs)
    rng = np.random.default_rng(0)
    kw = [w + rng.uniform(-0.3, 0.3, w.shape).astype(w.dtype) for w in k_layer.get_weights()]
    assert [w.shape for w in kw] == [tuple(w.shape) for w in o_layer.weights]
    k_layer.set_weights(kw)
    o_layer.set_weights(kw)
    k_out = k_layer(inputs, **k_call_kwargs)
    o_out = o_layer(inputs, **call_kwargs)
    k_flat, o_flat = tree.flatten(k_out), tree.flatten(o_out)
    assert len(k_flat) == len(o_flat)
    for k, o in zip(k_flat, o_flat):
        k = keras.ops.convert_to_numpy(k)
        assert k.shape == tuple(o.shape)
        np.testing.assert_allclose(o.numpy(), k, atol=atol * max(1.0, np.abs(k).max()), rtol=0)
    return o_out


# ------------------------------------------------------------------------ run_layer_test
UNITS = 4


@pytest.mark.parametrize(
    "cls, gates, bias_shape",
    [(L.SimpleRNN, 1, (4,)), (L.LSTM, 4, (16,)), (L.GRU, 3, (2, 12))],
)
@pytest.mark.parametrize(
    "options",
    [{}, {"return_sequences": True}, {"return_state": True, "go_backwards": True}],
)
def test_rnn_layer_test(cls, gates, bias_shape, options):
    n_states = {"SimpleRNN": 1, "LSTM": 2, "GRU": 1}[cls.__name__]
    out = (3, 6, UNITS) if options.get("return_sequences") else (3, UNITS)
    expected = (out,) + ((3, UNITS),) * n_states if options.get("return_state") else out
    layer = run_layer_test(
        cls,
        {"units": UNITS, **options},
        input_shape=(3, 6, 5),
        expected_output_shape=expected,
        expected_num_trainable_weights=3,
        expected_num_non_trainable_weights=0,
        expected_weight_shapes=[(5, gates * UNITS), (UNITS, gates * UNITS), bias_shape],
        supports_masking=True,
    )
    assert [w.name for w in layer.weights] == ["kernel", "recurrent_kernel", "bias"]
    cell_names = {"SimpleRNN": "simple_rnn_cell", "LSTM": "lstm_cell", "GRU": "gru_cell"}
    assert layer.cell.name == cell_names[cls.__name__]


@pytest.mark.parametrize(
    "cls, kwargs, shapes",
    [
        (L.GRU, {"reset_after": False}, [(5, 12), (4, 12), (12,)]),
        (L.GRU, {"use_bias": False}, [(5, 12), (4, 12)]),
        (L.LSTM, {"use_bias": False, "unit_forget_bias": False}, [(5, 16), (4, 16)]),
        (L.LSTM, {"activation": "relu", "recurrent_activation": "hard_sigmoid"}, None),
        (L.SimpleRNN, {"activation": "relu", "use_bias": False}, [(5, 4), (4, 4)]),
    ],
)
def test_rnn_layer_test_options(cls, kwargs, shapes):
    run_layer_test(
        cls,
        {"units": UNITS, "return_sequences": True, **kwargs},
        input_shape=(2, 4, 5),
        expected_output_shape=(2, 4, UNITS),
        expected_weight_shapes=shapes,
    )


@pytest.mark.parametrize("cls", [L.SimpleRNN, L.LSTM, L.GRU])
def test_rnn_layer_test_dropout_training(cls):
    layer = run_layer_test(
        cls,
        {"units": UNITS, "dropout": 0.3, "recurrent_dropout": 0.3, "seed": 1},
        input_shape=(3, 5, 4),
        expected_output_shape=(3, UNITS),
        training=True,
        run_training_check=False,  # fresh masks each call: losses are not comparable
    )
    # With the masks held fixed, one step of training through the recurrent-dropout step
    # loop (LSTM/GRU) or the projected loop (SimpleRNN) lowers the loss.
    rng = np.random.default_rng(0)
    count = getattr(layer.cell, "dropout_mask_count", 1)
    fixed = {}

    def create(step_input, rate):
        key = (tuple(step_input.shape), rate)
        if key not in fixed:
            keep = [(rng.random(step_input.shape) > rate) / (1 - rate) for _ in range(count)]
            keep = [kt.ops.convert_to_tensor(k.astype("float32")) for k in keep]
            fixed[key] = keep if count > 1 else keep[0]
        return fixed[key]

    layer.cell._create_dropout_mask = create
    _check_training_step(layer, x32(3, 5, 4), {"training": True})


def test_generic_rnn_and_stacked_cells_layer_test():
    cells = [L.LSTMCell(3), L.GRUCell(2)]
    layer = run_layer_test(
        L.RNN,
        {"cell": cells, "return_sequences": True, "return_state": True},
        input_shape=(2, 4, 5),
        expected_output_shape=((2, 4, 2), [(2, 3), (2, 3)], [(2, 2)]),
        expected_weight_shapes=[(5, 12), (3, 12), (12,), (3, 6), (2, 6), (2, 6)],
    )
    assert isinstance(layer.cell, L.StackedRNNCells)
    run_layer_test(
        L.RNN,
        {"cell": L.SimpleRNNCell(3), "go_backwards": True},
        input_shape=(2, 4, 5),
        expected_output_shape=(2, 3),
        expected_weight_shapes=[(5, 3), (3, 3), (3,)],
    )


def test_lstm_initial_bias_and_initializers():
    layer = L.LSTM(3)
    layer.build((None, 2, 4))
    np.testing.assert_array_equal(layer.cell.bias.numpy(), [0, 0, 0, 1, 1, 1, 0, 0, 0, 0, 0, 0])
    u = layer.cell.recurrent_kernel.numpy()
    # Orthogonal recurrent kernel: orthonormal rows.
    np.testing.assert_allclose(u @ u.T, np.eye(3), atol=1e-5)
    plain = L.LSTM(3, unit_forget_bias=False)
    plain.build((None, 2, 4))
    np.testing.assert_array_equal(plain.cell.bias.numpy(), np.zeros(12))


# --------------------------------------------------------------------------- Keras parity
RNN_OPTIONS = [
    {},
    {"return_sequences": True},
    {"return_state": True},
    {"go_backwards": True, "return_sequences": True, "return_state": True},
]


@pytest.mark.parametrize("options", RNN_OPTIONS)
@pytest.mark.parametrize(
    "name, extra",
    [
        ("LSTM", {}),
        ("GRU", {}),
        ("GRU", {"reset_after": False}),
        ("SimpleRNN", {}),
    ],
)
def test_rnn_matches_keras(keras, name, extra, options):
    assert_matches_keras(name, {"units": 5, **extra, **options}, x32(3, 6, 4))


@pytest.mark.parametrize("options", RNN_OPTIONS)
@pytest.mark.parametrize(
    "name, extra",
    [("LSTM", {}), ("GRU", {}), ("GRU", {"reset_after": False}), ("SimpleRNN", {})],
)
def test_rnn_with_mask_matches_keras(keras, name, extra, options):
    mask = make_mask(3, 6)
    assert_matches_keras(
        name, {"units": 5, **extra, **options}, x32(3, 6, 4), call_kwargs={"mask": mask}
    )


@pytest.mark.parametrize(
    "name, kwargs",
    [
        ("LSTM", {"activation": "relu", "recurrent_activation": "hard_sigmoid"}),
        ("LSTM", {"use_bias": False, "unit_forget_bias": False}),
        # Activations the fused primitive does not compute: the cell runs step by step.
        ("LSTM", {"activation": "softsign", "return_sequences": True}),
        ("GRU", {"activation": "elu", "reset_after": False, "return_sequences": True}),
        ("GRU", {"use_bias": False, "go_backwards": True}),
        ("SimpleRNN", {"activation": "relu", "use_bias": False}),
    ],
)
def test_rnn_options_match_keras(keras, name, kwargs):
    mask = make_mask(2, 5)
    assert_matches_keras(name, {"units": 3, **kwargs}, x32(2, 5, 4))
    assert_matches_keras(name, {"units": 3, **kwargs}, x32(2, 5, 4), call_kwargs={"mask": mask})


@pytest.mark.parametrize("name, n_states", [("LSTM", 2), ("GRU", 1), ("SimpleRNN", 1)])
def test_rnn_initial_state_matches_keras(keras, name, n_states):
    states = [x32(3, 4) for _ in range(n_states)]
    assert_matches_keras(
        name,
        {"units": 4, "return_sequences": True, "return_state": True},
        x32(3, 5, 2),
        call_kwargs={"initial_state": states, "mask": make_mask(3, 5)},
    )


def _fixed_masks(rng, count, shape, rate):
    keep = [(rng.random(shape) > rate).astype("float32") / (1 - rate) for _ in range(count)]
    return keep if count > 1 else keep[0]


@pytest.mark.parametrize(
    "name, kwargs",
    [
        ("LSTM", {"dropout": 0.4}),
        ("LSTM", {"dropout": 0.4, "recurrent_dropout": 0.3}),
        ("LSTM", {"recurrent_dropout": 0.3, "go_backwards": True}),
        ("GRU", {"dropout": 0.4}),
        ("GRU", {"dropout": 0.4, "recurrent_dropout": 0.3}),
        ("GRU", {"recurrent_dropout": 0.3, "reset_after": False}),
        ("SimpleRNN", {"dropout": 0.4, "recurrent_dropout": 0.3}),
    ],
)
def test_rnn_dropout_masks_match_keras(keras, name, kwargs):
    """With the same dropout masks (drawn once per call, reused at every step), training
    outputs equal Keras's: input dropout before the projection, recurrent dropout per gate."""
    batch, steps, feat, units = 3, 5, 4, 3
    k_layer = getattr(keras.layers, name)(units, return_sequences=True, **kwargs)
    o_layer = getattr(L, name)(units, return_sequences=True, **kwargs)
    x = x32(batch, steps, feat)
    k_layer(x)
    o_layer(x)
    count = getattr(o_layer.cell, "dropout_mask_count", 1)
    assert count == getattr(k_layer.cell, "dropout_mask_count", 1)
    rng = np.random.default_rng(3)
    masks = {
        "in": _fixed_masks(rng, count, (batch, feat), 0.4),
        "rec": _fixed_masks(rng, count, (batch, units), 0.3),
    }

    def patched(kind, convert):
        def create(step_input, rate):
            m = masks["in" if step_input.shape[-1] == feat else "rec"]
            return [convert(a) for a in m] if isinstance(m, list) else convert(m)

        return create

    k_layer.cell._create_dropout_mask = patched("k", keras.ops.convert_to_tensor)
    o_layer.cell._create_dropout_mask = patched("o", kt.ops.convert_to_tensor)
    o_layer.set_weights(k_layer.get_weights())
    k_out = keras.ops.convert_to_numpy(k_layer(x, training=True))
    o_out = o_layer(x, training=True).numpy()
    np.testing.assert_allclose(o_out, k_out, atol=1e-5)
    # And the dropout really acted: inference differs.
    assert not np.allclose(o_layer(x).numpy(), o_out, atol=1e-4)


def test_dropout_draws_fresh_masks_per_call():
    layer = L.LSTM(3, dropout=0.5, recurrent_dropout=0.5, seed=2)
    x = x32(4, 3, 6)
    a = layer(x, training=True).numpy()
    b = layer(x, training=True).numpy()
    assert not np.allclose(a, b)
    np.testing.assert_array_equal(layer(x).numpy(), layer(x, training=False).numpy())
    assert layer.cell._dropout_mask is None and layer.cell._recurrent_dropout_mask is None


def test_rnn_gradients_match_torch_autograd(keras):
    """Weight gradients of a masked, reversed LSTM/GRU equal torch.autograd's through Keras."""
    import torch

    mask = make_mask(3, 5)
    x = x32(3, 5, 4)
    for name in ("LSTM", "GRU"):
        k_layer = getattr(keras.layers, name)(3, go_backwards=True, return_sequences=True)
        o_layer = getattr(L, name)(3, go_backwards=True, return_sequences=True)
        k_layer(x, mask=mask)
        o_layer(x, mask=mask)
        o_layer.set_weights(k_layer.get_weights())
        target = x32(3, 5, 3)
        k_loss = ((k_layer(x, mask=mask) - torch.as_tensor(target)) ** 2).sum()
        k_grads = torch.autograd.grad(k_loss, [w.value for w in k_layer.trainable_weights])
        with kt.GradientTape() as tape:
            out = o_layer(x, mask=mask)
            o_loss = kt.ops.sum(kt.ops.square(out - target))
        o_grads = tape.gradient(o_loss, o_layer.trainable_weights)
        for g, kg in zip(o_grads, k_grads):
            np.testing.assert_allclose(g.numpy(), kg.numpy(), atol=1e-4, rtol=1e-4)


# ----------------------------------------------------------------------------------- masks
@pytest.mark.parametrize("cls", [L.LSTM, L.GRU, L.SimpleRNN])
def test_embedding_mask_reaches_rnn(keras, cls):
    ids = np.array([[3, 1, 0, 0], [2, 4, 5, 1], [0, 2, 3, 0]], "int32")
    emb = L.Embedding(6, 5, mask_zero=True)
    layer = cls(3, return_sequences=True)
    out = layer(emb(ids))
    expected = layer(emb(ids), mask=ids != 0)
    np.testing.assert_allclose(out.numpy(), expected.numpy(), atol=1e-6)
    unmasked = layer(kt.ops.convert_to_tensor(emb(ids).numpy()))
    assert not np.allclose(out.numpy(), unmasked.numpy())
    # With return_sequences the output carries the mask on; without, it does not.
    np.testing.assert_array_equal(out._keras_mask.numpy(), ids != 0)
    assert getattr(cls(3)(emb(ids)), "_keras_mask", None) is None
    # The same stack in Keras gives the same result.
    k_emb = keras.layers.Embedding(6, 5, mask_zero=True)
    k_rnn = getattr(keras.layers, cls.__name__)(3, return_sequences=True)
    k_rnn(k_emb(ids))
    k_emb.set_weights(emb.get_weights())
    k_rnn.set_weights(layer.get_weights())
    np.testing.assert_allclose(
        out.numpy(), keras.ops.convert_to_numpy(k_rnn(k_emb(ids))), atol=1e-5
    )


def test_return_state_masks_and_functional_model():
    inp = L.Input((4,), dtype="int32")
    h = L.Embedding(7, 5, mask_zero=True)(inp)
    seq, state_h, state_c = L.LSTM(3, return_sequences=True, return_state=True)(h)
    out = L.GRU(2)(seq)
    assert tuple(seq.shape) == (None, 4, 3) and tuple(state_c.shape) == (None, 3)
    model = kt.Model(inp, [out, state_h])
    ids = np.array([[1, 2, 0, 0], [3, 4, 5, 6]], "int32")
    y, hs = model(ids)
    assert tuple(y.shape) == (2, 2) and tuple(hs.shape) == (2, 3)
    layer = L.LSTM(3, return_sequences=True, return_state=True)
    outs = layer(x32(2, 4, 5), mask=make_mask(2, 4))
    assert getattr(outs[1], "_keras_mask", None) is None
    assert getattr(outs[2], "_keras_mask", None) is None
    assert tuple(outs[0]._keras_mask.shape) == (2, 4)


# -------------------------------------------------------------------------------- stateful
@pytest.mark.parametrize("cls", [L.LSTM, L.GRU, L.SimpleRNN])
def test_stateful_carries_states_across_calls(cls):
    x = x32(2, 6, 3)
    full = cls(4, return_sequences=True)
    stateful = cls(4, return_sequences=True, stateful=True)
    full(x)
    stateful(x[:, :3])
    stateful.set_weights(full.get_weights())
    stateful.reset_states()
    first = stateful(x[:, :3]).numpy()
    second = stateful(x[:, 3:]).numpy()
    np.testing.assert_allclose(np.concatenate([first, second], 1), full(x).numpy(), atol=1e-5)
    # States are not weights (Keras keeps them out of `weights` and weight files).
    assert len(stateful.weights) == 3
    assert all(not v.trainable for v in stateful.states)
    stateful.reset_states()
    np.testing.assert_array_equal(stateful.states[0].numpy(), 0)
    np.testing.assert_allclose(stateful(x[:, :3]).numpy(), first, atol=1e-6)
    values = [np.full((2, 4), 0.5, "float32") for _ in stateful.states]
    stateful.reset_states(values)
    np.testing.assert_array_equal(stateful.states[0].numpy(), 0.5)


def test_stateful_gradient_uses_the_starting_states():
    """The states are overwritten after the call; the gradient still uses the ones it
    started from (a snapshot, not the Variables)."""
    layer = L.LSTM(3, stateful=True)
    x = x32(2, 4, 3)
    layer(x)
    start = [kt.ops.convert_to_tensor(v.numpy().copy()) for v in layer.states]
    assert not np.allclose(start[0].numpy(), 0)
    with kt.GradientTape() as tape:
        loss = kt.ops.sum(layer(x))
    grads = tape.gradient(loss, layer.trainable_weights)
    assert not np.allclose(layer.states[0].numpy(), start[0].numpy())
    plain = L.LSTM(3)
    plain(x)
    plain.set_weights(layer.get_weights())
    with kt.GradientTape() as tape:
        ref = kt.ops.sum(plain(x, initial_state=start))
    np.testing.assert_allclose(float(loss), float(ref), rtol=1e-6)
    for g, e in zip(grads, tape.gradient(ref, plain.trainable_weights)):
        np.testing.assert_allclose(g.numpy(), e.numpy(), atol=1e-5)


def test_stateful_errors():
    layer = L.LSTM(3, stateful=True)
    layer(x32(2, 4, 3))
    with pytest.raises(ValueError, match="stateful with batch size 2"):
        layer(x32(3, 4, 3))
    with pytest.raises(ValueError, match="batch size must be static"):
        L.GRU(3, stateful=True)(L.Input((4, 3)))
    sym = L.SimpleRNN(3, stateful=True)(L.Input(batch_shape=(5, 4, 3)))
    assert tuple(sym.shape) == (5, 3)
    with pytest.raises(ValueError, match="expects 2 states"):
        layer.reset_states([np.zeros((2, 3))])


# ----------------------------------------------------------------------- RNN and cells
def test_generic_rnn_with_cells_matches_keras(keras):
    x = x32(3, 5, 4)
    mask = make_mask(3, 5)
    cells = [("LSTMCell", {}), ("GRUCell", {"reset_after": False}), ("SimpleRNNCell", {})]
    for name, kwargs in cells:
        k_cell = getattr(keras.layers, name)(3, **kwargs)
        k_layer = keras.layers.RNN(k_cell, return_sequences=True)
        o_layer = L.RNN(getattr(L, name)(3, **kwargs), return_sequences=True)
        assert_pair_matches(k_layer, o_layer, x, {"mask": mask})
    k_layer = keras.layers.RNN(
        [keras.layers.LSTMCell(3), keras.layers.GRUCell(2)], return_state=True, go_backwards=True
    )
    o_layer = L.RNN([L.LSTMCell(3), L.GRUCell(2)], return_state=True, go_backwards=True)
    assert_pair_matches(k_layer, o_layer, x, {"mask": mask})


@pytest.mark.parametrize("name", ["LSTMCell", "GRUCell", "SimpleRNNCell"])
def test_cell_single_step_matches_keras(keras, name):
    x = x32(3, 4)
    n = 2 if name == "LSTMCell" else 1
    states = [x32(3, 5) for _ in range(n)]
    k_cell = getattr(keras.layers, name)(5)
    o_cell = getattr(L, name)(5)
    k_cell(x, states)
    o_cell(x, states)
    o_cell.set_weights(k_cell.get_weights())
    k_out, k_states = k_cell(x, states)
    o_out, o_states = o_cell(x, states)
    np.testing.assert_allclose(o_out.numpy(), keras.ops.convert_to_numpy(k_out), atol=1e-5)
    for o, k in zip(o_states, k_states):
        np.testing.assert_allclose(o.numpy(), keras.ops.convert_to_numpy(k), atol=1e-5)


def test_custom_cell_in_rnn():
    class MinimalCell(L.Layer):
        def __init__(self, units, **kwargs):
            super().__init__(**kwargs)
            self.units = units
            self.state_size = units

        def build(self, input_shape):
            self.kernel = self.add_weight(shape=(input_shape[-1], self.units), name="kernel")
            self.recurrent = self.add_weight(shape=(self.units, self.units), name="recurrent")

        def call(self, inputs, states):
            out = kt.ops.matmul(inputs, self.kernel) + kt.ops.matmul(states[0], self.recurrent)
            return out, [out]

    layer = L.RNN(MinimalCell(3), return_sequences=True)
    x = x32(2, 4, 5)
    y = layer(x).numpy()
    k, u = (w.numpy() for w in layer.weights)
    h = np.zeros((2, 3), "float32")
    for t in range(4):
        h = x[:, t] @ k + h @ u
        np.testing.assert_allclose(y[:, t], h, atol=1e-5)


def test_empty_sequence_passes_states_through():
    h0 = x32(2, 3)
    for cls in (L.LSTM, L.GRU, L.SimpleRNN):
        n = 2 if cls is L.LSTM else 1
        out = cls(3, return_sequences=True, return_state=True)(
            np.zeros((2, 0, 4), "float32"), initial_state=[h0] * n
        )
        assert tuple(out[0].shape) == (2, 0, 3)
        np.testing.assert_allclose(out[1].numpy(), h0)


def test_fused_paths_are_used(monkeypatch):
    calls = []
    for name in ("lstm_sequence", "gru"):
        real = getattr(kt.ops, name)
        monkeypatch.setattr(
            kt.ops, name, lambda *a, _real=real, _n=name, **k: calls.append(_n) or _real(*a, **k)
        )
    x = x32(2, 5, 3)
    L.LSTM(3)(x)
    L.GRU(3, dropout=0.5)(x, training=True)
    L.GRU(3, recurrent_dropout=0.5)(x)  # inference: recurrent dropout is off, fused path
    assert calls == ["lstm_sequence", "gru", "gru"]
    L.LSTM(3, recurrent_dropout=0.5)(x, training=True)
    L.LSTM(3, activation="softsign")(x)
    assert calls == ["lstm_sequence", "gru", "gru"]


# ---------------------------------------------------------------------------------- configs
@pytest.mark.parametrize("name", ["LSTM", "GRU", "SimpleRNN"])
def test_config_keys_match_keras(keras, name):
    ours = set(getattr(L, name)(3).get_config())
    theirs = set(getattr(keras.layers, name)(3).get_config())
    # Keras's SimpleRNN forgets its seed; ours keeps it so the config round trip is complete.
    assert ours - theirs <= {"seed"} and theirs <= ours
    k_config = getattr(keras.layers, name)(3, return_sequences=True, go_backwards=True).get_config()
    k_config.pop("dtype")
    layer = getattr(L, name).from_config(k_config)
    assert layer.return_sequences and layer.go_backwards and layer.units == 3


def test_cell_and_wrapper_configs_round_trip():
    for layer in [
        L.RNN(L.LSTMCell(3, dropout=0.2), return_sequences=True),
        L.RNN([L.GRUCell(2), L.SimpleRNNCell(4)]),
        L.Bidirectional(L.GRU(3, return_sequences=True), merge_mode="sum"),
        L.Bidirectional(L.LSTM(2), backward_layer=L.LSTM(2, go_backwards=True, name="bw")),
        L.TimeDistributed(L.Dense(3, activation="relu")),
    ]:
        config = layer.get_config()
        clone = type(layer).from_config(config)
        assert clone.get_config() == config


def test_keras_written_wrapper_configs_load(keras):
    """Nested layer configs written by Keras (with DTypePolicy dicts) rebuild our layers."""
    cases = [
        keras.layers.Bidirectional(keras.layers.GRU(3, return_sequences=True), merge_mode="sum"),
        keras.layers.RNN([keras.layers.LSTMCell(3), keras.layers.GRUCell(2)]),
        keras.layers.TimeDistributed(keras.layers.Dense(3)),
    ]
    x = x32(2, 4, 5)
    for k_layer in cases:
        config = k_layer.get_config()
        config.pop("dtype")
        ours = getattr(L, type(k_layer).__name__).from_config(config)
        assert_pair_matches(k_layer, ours, x)
    assert ours.layer.name == cases[-1].layer.name


# ------------------------------------------------------------------------------- wrappers
def _unnumbered(path):
    return "/".join(re.sub(r"_\d+$", "", part) for part in path.split("/"))


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"return_sequences": True},
        {"return_sequences": True, "return_state": True},
        {"return_state": True},
    ],
)
@pytest.mark.parametrize("merge_mode", ["concat", "sum", "ave", "mul", None])
def test_bidirectional_lstm_matches_keras(keras, options, merge_mode):
    x = x32(3, 5, 4)
    k_layer = keras.layers.Bidirectional(keras.layers.LSTM(3, **options), merge_mode=merge_mode)
    o_layer = L.Bidirectional(L.LSTM(3, **options), merge_mode=merge_mode)
    assert_pair_matches(k_layer, o_layer, x)
    # Paths as Keras names them, up to the numbers that tell same-named layers apart:
    # "bidirectional/forward_lstm/lstm_cell/kernel", ...
    assert [_unnumbered(w.path) for w in o_layer.weights] == [
        _unnumbered(w.path) for w in k_layer.weights
    ]
    assert _unnumbered(o_layer.weights[0].path) == "bidirectional/forward_lstm/lstm_cell/kernel"
    assert o_layer.layers == [o_layer.forward_layer, o_layer.backward_layer]
    assert o_layer.forward_layer.name.startswith("forward_")
    assert o_layer.backward_layer.go_backwards


@pytest.mark.parametrize("name", ["LSTM", "GRU"])
def test_bidirectional_with_mask_and_initial_state_matches_keras(keras, name):
    x = x32(3, 5, 4)
    mask = make_mask(3, 5)
    n = 4 if name == "LSTM" else 2
    states = [x32(3, 3) for _ in range(n)]
    k_layer = keras.layers.Bidirectional(getattr(keras.layers, name)(3, return_sequences=True))
    o_layer = L.Bidirectional(getattr(L, name)(3, return_sequences=True))
    out = assert_pair_matches(k_layer, o_layer, x, {"mask": mask, "initial_state": states})
    np.testing.assert_array_equal(out._keras_mask.numpy(), mask)


def test_bidirectional_layer_test():
    run_layer_test(
        L.Bidirectional,
        {"layer": L.LSTM(3, return_sequences=True)},
        input_shape=(2, 4, 5),
        expected_output_shape=(2, 4, 6),
        expected_num_trainable_weights=6,
        expected_weight_shapes=[(5, 12), (3, 12), (12,)] * 2,
        supports_masking=True,
    )
    run_layer_test(
        L.Bidirectional,
        {"layer": L.GRU(3, return_state=True), "merge_mode": None},
        input_shape=(2, 4, 5),
        expected_output_shape=((2, 3), (2, 3), (2, 3), (2, 3)),
    )


def test_bidirectional_weights_argument_and_stateful():
    base = L.Bidirectional(L.SimpleRNN(2))
    x = x32(2, 3, 4)
    base(x)
    weights = base.get_weights()
    copy = L.Bidirectional(L.SimpleRNN(2), weights=weights)
    np.testing.assert_allclose(copy(x).numpy(), base(x).numpy(), atol=1e-6)
    stateful = L.Bidirectional(L.GRU(2, stateful=True))
    stateful(x)
    assert len(stateful.states) == 2
    stateful.reset_states()
    np.testing.assert_array_equal(stateful.states[0].numpy(), 0)
    with pytest.raises(AttributeError, match="must be stateful"):
        base.reset_states()


def test_bidirectional_errors():
    with pytest.raises(ValueError, match="`layer` must be a keratron Layer"):
        L.Bidirectional("lstm")
    with pytest.raises(ValueError, match="merge_mode"):
        L.Bidirectional(L.LSTM(2), merge_mode="max")
    with pytest.raises(ValueError, match="must be a recurrent layer"):
        L.Bidirectional(L.Dense(2))
    with pytest.raises(ValueError, match="same `return_sequences`"):
        backward = L.LSTM(2, go_backwards=True, return_sequences=True)
        L.Bidirectional(L.LSTM(2), backward_layer=backward)
    with pytest.raises(ValueError, match="different `go_backwards`"):
        L.Bidirectional(L.LSTM(2), backward_layer=L.LSTM(2))


@pytest.mark.parametrize("activation", [None, "relu"])
def test_time_distributed_dense_matches_keras(keras, activation):
    x = x32(3, 4, 5)
    k_layer = keras.layers.TimeDistributed(keras.layers.Dense(2, activation=activation))
    o_layer = L.TimeDistributed(L.Dense(2, activation=activation))
    assert_pair_matches(k_layer, o_layer, x)
    x4 = x32(2, 3, 4, 5)
    k_layer = keras.layers.TimeDistributed(keras.layers.Dense(3))
    o_layer = L.TimeDistributed(L.Dense(3))
    assert_pair_matches(k_layer, o_layer, x4)


def test_time_distributed_conv_matches_keras(keras):
    x = x32(2, 3, 6, 6, 2)
    k_layer = keras.layers.TimeDistributed(keras.layers.Conv2D(3, 3))
    o_layer = L.TimeDistributed(L.Conv2D(3, 3))
    assert_pair_matches(k_layer, o_layer, x)


def test_time_distributed_layer_test_and_masks():
    layer = run_layer_test(
        L.TimeDistributed,
        {"layer": L.Dense(3)},
        input_shape=(2, 4, 5),
        expected_output_shape=(2, 4, 3),
        expected_weight_shapes=[(5, 3), (3,)],
        supports_masking=True,
    )
    x = x32(2, 4, 5)
    mask = make_mask(2, 4)
    out = layer(x, mask=mask)
    np.testing.assert_array_equal(out._keras_mask.numpy(), mask)
    with pytest.raises(ValueError, match="rank >= 3"):
        L.TimeDistributed(L.Dense(2))(x32(2, 3))
    with pytest.raises(ValueError, match="mask must start"):
        layer(x, mask=np.ones((2, 3), bool))
    with pytest.raises(ValueError, match="`layer` must be a keratron Layer"):
        L.TimeDistributed(3)


def test_time_distributed_dropout_uses_training_flag():
    layer = L.TimeDistributed(L.Dropout(0.5, seed=1))
    x = np.ones((2, 3, 8), "float32")
    np.testing.assert_array_equal(layer(x).numpy(), x)
    dropped = layer(x, training=True).numpy()
    assert set(np.unique(dropped)) <= {0.0, 2.0} and (dropped == 0).any()


# ----------------------------------------------------------------------------------- errors
@pytest.mark.parametrize("cls", [L.LSTM, L.GRU, L.SimpleRNN, L.LSTMCell, L.GRUCell])
def test_bad_arguments_name_layer_and_argument(cls):
    with pytest.raises(ValueError, match=rf"{cls.__name__}.*`units`.*units=0"):
        cls(0)
    with pytest.raises(ValueError, match=r"`dropout`.*dropout=1.5"):
        cls(2, dropout=1.5)
    with pytest.raises(TypeError, match=r"`recurrent_dropout`"):
        cls(2, recurrent_dropout="high")


def test_call_errors():
    with pytest.raises(ValueError, match="use_cudnn"):
        L.LSTM(2, use_cudnn="yes")
    layer = L.LSTM(2)
    with pytest.raises(ValueError, match="expected ndim=3"):
        layer(x32(2, 3))
    with pytest.raises(ValueError, match=r"expects 2 initial state\(s\)"):
        L.LSTM(2)(x32(2, 3, 4), initial_state=[np.zeros((2, 2), "float32")])
    with pytest.raises(ValueError, match="shape \\(batch, size\\)"):
        L.GRU(2)(x32(2, 3, 4), initial_state=[np.zeros((2, 5), "float32")])
    with pytest.raises(ValueError, match="state_size"):
        L.RNN(L.Dense(2))
    with pytest.raises(ValueError, match="`cells`"):
        L.StackedRNNCells([])


def test_unroll_is_accepted_and_equivalent():
    x = x32(2, 4, 3)
    a = L.GRU(3, unroll=True)
    b = L.GRU(3)
    a(x)
    b(x)
    b.set_weights(a.get_weights())
    np.testing.assert_allclose(a(x).numpy(), b(x).numpy(), atol=1e-6)
    assert a.get_config()["unroll"] is True


def test_module_exports():
    assert set(recurrent.__all__) <= set(dir(L))
    for name in ("Bidirectional", "TimeDistributed", "Wrapper", "Attention", "MultiHeadAttention"):
        assert hasattr(L, name)
