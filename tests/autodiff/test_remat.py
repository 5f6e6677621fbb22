"""remat and RematScope: the same values and gradients, with the forward recomputed in the
backward pass instead of its intermediates kept on the tape."""

import numpy as np
import pytest

import keratron as kt
from keratron.autodiff.remat import get_current_remat_mode
from tests.conftest import require

ops = kt.ops
RNG = np.random.default_rng(0)


def _block(counter, w):
    def f(x):
        counter[0] += 1
        h = ops.tanh(ops.matmul(x, w))
        return ops.sum(ops.sin(h) * h)

    return f


def test_remat_same_values_and_gradients_fewer_records():
    w = kt.Variable(RNG.normal(size=(3, 4)).astype("float32"))
    x = kt.Variable(RNG.normal(size=(2, 3)).astype("float32"))
    plain_calls, remat_calls = [0], [0]
    with kt.GradientTape() as tape:
        y = _block(plain_calls, w)(x)
    plain_records = len(tape._records)
    gx, gw = tape.gradient(y, [x, w])
    with kt.GradientTape() as tape:
        y2 = kt.remat(_block(remat_calls, w))(x)
    remat_records = len(tape._records)
    assert remat_calls == [1]  # the forward ran once, nothing kept but the block's node
    rx, rw = tape.gradient(y2, [x, w])
    assert remat_calls == [2]  # the backward recomputed it
    assert plain_records == 5 and remat_records == 1
    np.testing.assert_array_equal(y.numpy(), y2.numpy())
    np.testing.assert_allclose(rx.numpy(), gx.numpy(), rtol=1e-6)
    np.testing.assert_allclose(rw.numpy(), gw.numpy(), rtol=1e-6)


def test_remat_sees_tensors_captured_from_outside():
    x = kt.convert_to_tensor([1.0, 2.0])
    y = kt.convert_to_tensor([3.0, -1.0])
    with kt.GradientTape() as tape:
        tape.watch(y)
        z = kt.remat(lambda a: ops.sum(a * y * y))(x)
    np.testing.assert_allclose(tape.gradient(z, y).numpy(), [6.0, -4.0])


def test_remat_without_tape_just_calls():
    calls = [0]
    f = kt.remat(_block(calls, kt.Variable(np.ones((3, 4), "float32"))))
    f(kt.convert_to_tensor(np.ones((2, 3), "float32")))
    assert calls == [1]


def test_remat_under_function_matches_eager():
    w = kt.Variable(RNG.normal(size=(3, 4)).astype("float32"))
    x = RNG.normal(size=(2, 3)).astype("float32")
    f = kt.remat(_block([0], w))

    @kt.function
    def step(x):
        with kt.GradientTape() as tape:
            y = f(x)
        return y, tape.gradient(y, w)

    with kt.GradientTape() as tape:
        y = _block([0], w)(kt.convert_to_tensor(x))
    g = tape.gradient(y, w)
    y2, g2 = step(x)
    np.testing.assert_allclose(y2.numpy(), y.numpy(), rtol=1e-6)
    np.testing.assert_allclose(g2.numpy(), g.numpy(), rtol=1e-5)


class _Counting(kt.layers.Dense):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.calls = 0

    def call(self, inputs):
        if not inputs._value.is_meta:  # "larger_than" sizes the output on meta tensors
            self.calls += 1
        return super().call(inputs)


def _grad_and_calls(layer, x):
    with kt.GradientTape() as tape:
        y = ops.sum(layer(x) ** 2)
    g = tape.gradient(y, layer.trainable_weights)
    return g, layer.calls


@pytest.mark.parametrize(
    "scope_kwargs, name, recomputed",
    [
        ({"mode": "full"}, "d", True),
        ({"mode": "list_of_layers", "layer_names": ["d"]}, "d", True),
        ({"mode": "list_of_layers", "layer_names": ["other"]}, "d", False),
        ({"mode": "larger_than", "output_size_threshold": 7}, "d", True),  # 2 x 4 = 8 > 7
        ({"mode": "larger_than", "output_size_threshold": 8}, "d", False),
        ({"mode": None}, "d", False),
    ],
)
def test_remat_scope_modes_on_layer_calls(scope_kwargs, name, recomputed):
    x = RNG.normal(size=(2, 3)).astype("float32")
    with kt.RematScope(**scope_kwargs):
        layer = _Counting(4, activation="tanh", name=name)
    reference = _Counting(4, activation="tanh")
    reference.build((2, 3))
    layer.build((2, 3))
    layer.set_weights(reference.get_weights())
    g, calls = _grad_and_calls(layer, x)
    g_ref, _ = _grad_and_calls(reference, x)
    assert calls == (2 if recomputed else 1)
    for a, b in zip(g, g_ref):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6)


def test_remat_scope_activations_mode_recomputes_only_the_activation():
    seen = []

    def act(x):
        seen.append(1)
        return ops.tanh(x)

    with kt.RematScope(mode="activations"):
        layer = _Counting(4, activation=act)
    g, calls = _grad_and_calls(layer, RNG.normal(size=(2, 3)).astype("float32"))
    assert calls == 1 and len(seen) == 2
    assert layer.activation is act


def test_remat_recompute_does_not_update_state_twice():
    x = RNG.normal(size=(8, 3)).astype("float32")
    with kt.RematScope(mode="full"):
        bn = kt.layers.BatchNormalization()
    plain = kt.layers.BatchNormalization()
    for layer in (bn, plain):
        with kt.GradientTape() as tape:
            y = ops.sum(layer(x, training=True) ** 3)
        tape.gradient(y, layer.trainable_weights)
    np.testing.assert_allclose(bn.moving_mean.numpy(), plain.moving_mean.numpy(), rtol=1e-6)


def test_remat_scope_rejects_unknown_mode():
    with pytest.raises(ValueError, match="Invalid mode 'some'"):
        kt.RematScope(mode="some")


@pytest.mark.interop
def test_remat_scope_nesting_and_layer_gradients_match_keras():
    keras = require("keras")
    if keras.backend.backend() != "torch":
        pytest.skip("needs Keras's torch backend")
    import torch
    from keras.src.backend.common.remat import get_current_remat_mode as keras_mode

    observed = []
    for scope_cls, mode_fn in ((keras.RematScope, keras_mode), (kt.RematScope, None)):
        mode_fn = mode_fn or get_current_remat_mode
        seq = [mode_fn()]
        with scope_cls(mode="full"):
            seq.append(mode_fn())
            with scope_cls(mode="larger_than", output_size_threshold=5):
                seq.append(mode_fn())
            seq.append(mode_fn())
        seq.append(mode_fn())
        observed.append([None if m is None else tuple(m) for m in seq])
    assert observed[0] == observed[1]

    x = RNG.normal(size=(4, 3)).astype("float32")
    with keras.RematScope(mode="full"):
        kd = keras.layers.Dense(5, activation="relu")
    kd.build((4, 3))
    xt = torch.tensor(x)
    y = torch.sum(kd(xt) ** 2)
    y.backward()
    keras_grads = [v.value.grad.cpu().numpy() for v in kd.trainable_weights]
    with kt.RematScope(mode="full"):
        d = kt.layers.Dense(5, activation="relu")
    d.build((4, 3))
    d.set_weights([v.numpy() for v in kd.weights])
    with kt.GradientTape() as tape:
        y2 = ops.sum(d(x) ** 2)
    np.testing.assert_allclose(float(y2), float(y.detach()), rtol=1e-5)
    for a, b in zip(tape.gradient(y2, d.trainable_weights), keras_grads):
        np.testing.assert_allclose(a.numpy(), b, rtol=1e-5, atol=1e-6)


def test_remat_of_a_pass_through_function_keeps_the_gradient():
    x = kt.Variable([1.0, -2.0])
    with kt.GradientTape() as tape:
        y = ops.sum(kt.remat(kt.activations.linear)(x) * 3.0)
    np.testing.assert_array_equal(tape.gradient(y, x).numpy(), [3.0, 3.0])


def _fit(scope, run_eagerly):
    kt.utils.set_random_seed(3)

    def layers():
        return [
            kt.Input((4,)),
            kt.layers.Dense(8, activation="relu"),
            kt.layers.BatchNormalization(),
            kt.layers.Dense(1),
        ]

    if scope is None:
        model = kt.Sequential(layers())
    else:
        with kt.RematScope(scope, output_size_threshold=10):
            model = kt.Sequential(layers())
    model.compile("adam", "mse", run_eagerly=run_eagerly)
    data = np.random.default_rng(1)
    x, y = data.normal(size=(16, 4)).astype("float32"), data.normal(size=(16, 1))
    model.fit(x, y, epochs=1, batch_size=8, verbose=0, shuffle=False)
    return model.get_weights()


@pytest.mark.parametrize("run_eagerly", [False, True])
def test_fit_under_remat_scope_matches_plain_fit(run_eagerly):
    # Same weights and BatchNormalization statistics (updated once, not once per recompute),
    # compiled and eager.
    expected = _fit(None, run_eagerly)
    for scope in ("full", "activations", "larger_than"):
        for a, b in zip(_fit(scope, run_eagerly), expected):
            np.testing.assert_array_equal(a, b)


def _peak_live_bytes(plan):
    """The most bytes of values alive at once while the compiled plan runs its steps."""
    import math

    def nbytes(slot):
        shape, dtype = plan.graph.avals[slot]
        return math.prod(shape) * dtype.itemsize

    live = {s: nbytes(s) for s in plan.in_slots if s is not None}
    peak = current = sum(live.values())
    for _, _, outs, free in plan.steps:
        for s in outs:
            if s not in live:
                live[s] = nbytes(s)
                current += live[s]
        peak = max(peak, current)
        for s in free:
            current -= live.pop(s, 0)
    return peak


def test_compiled_remat_recomputes_in_the_backward_and_keeps_less_alive():
    # Under kt.function the recomputed forward must stay a separate computation (not
    # merged back into the forward) that runs in the backward: fewer values alive at once.
    rng = np.random.default_rng(0)
    ws = [kt.Variable(rng.random((256, 256), dtype=np.float32) / 16) for _ in range(4)]

    def block(x):
        for w in ws:
            x = kt.ops.tanh(kt.ops.matmul(x, w))
        return x

    def make(b):
        @kt.function
        def step(x):
            with kt.GradientTape() as tape:
                loss = kt.ops.sum(b(b(x)))
            return tape.gradient(loss, ws)

        return step

    x = rng.random((1024, 256), dtype=np.float32)
    plain, rematted = make(block), make(kt.remat(block))
    for a, b in zip(plain(x), rematted(x)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5)
    p, r = plain.get_concrete_graph(x), rematted.get_concrete_graph(x)
    assert r.num_nodes > p.num_nodes  # the recompute is there
    assert _peak_live_bytes(r) < _peak_live_bytes(p)
