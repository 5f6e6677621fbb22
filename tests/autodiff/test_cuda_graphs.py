"""Whole-step CUDA graphs: the capture plan (checked on CPU), the switch, the capture
bookkeeping with a stand-in for the CUDA graph, and the real capture on CUDA (skipped without
a GPU)."""

import warnings

import numpy as np
import pytest
import torch

import keratron
from keratron import config
from keratron.autodiff import cuda_graphs
from keratron.autodiff.cuda_graphs import GraphedStep, capture_plan
from keratron.autodiff.function import record_effect

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


def _model(units=3, loss="mse", optimizer=None, layers=(), metrics=None, inputs=4):
    model = keratron.Sequential(
        [keratron.Input(shape=(inputs,)), *layers, keratron.layers.Dense(units)]
    )
    model.compile(optimizer=optimizer or keratron.optimizers.Adam(1e-2), loss=loss, metrics=metrics)
    return model


def _batch(n=8, inputs=4, units=3, sparse=False, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, inputs)).astype("float32")
    y = rng.integers(0, units, n) if sparse else rng.standard_normal((n, units)).astype("float32")
    return keratron.convert_to_tensor(x), keratron.convert_to_tensor(y)


def _train_plan(model, batch):
    f = keratron.function(model.train_step, cuda_graphs=True)
    return capture_plan(f.get_concrete_graph(batch))


# ------------------------------------------------------------------------------ the plan
def test_pure_function_is_capturable():
    f = keratron.function(lambda x: keratron.ops.tanh(x) * 2.0, cuda_graphs=True)
    compiled = f.get_concrete_graph(np.ones((2, 3), "float32"))
    plan = capture_plan(compiled)
    assert plan.capturable and plan.reason is None and plan.reasons == []
    assert plan.static_inputs == compiled.in_slots == [0]
    assert plan.written == [] and plan.device_resident == []
    assert "tanh" in plan.nodes


def test_train_step_plan_keeps_optimizer_and_metric_state_on_the_device():
    model = _model()
    plan = _train_plan(model, _batch())
    assert plan.capturable, plan.reason
    opt = model.optimizer
    paths = set(plan.device_resident)
    # weights, optimizer iteration, learning rate and slots, loss tracker: all read in place
    for v in model.trainable_variables + opt.variables + model.metrics_variables:
        assert v.path in paths
    assert f"{opt.name}/iteration" in paths and f"{opt.name}/learning_rate" in paths
    written = {id(v) for v in plan.written}
    assert id(opt.iterations) in written
    assert all(id(v) in written for v in model.trainable_variables)
    assert f"optimizer '{opt.name}' update" in plan.nodes
    assert any(n.startswith("assign") for n in plan.nodes)  # the loss tracker's update
    assert len(plan.static_inputs) == 2  # x and y, each copied into a static buffer


def test_sparse_labels_are_capturable():
    # The label-range check folds each batch into persistent device buffers in place.
    model = _model(loss="sparse_categorical_crossentropy")
    plan = _train_plan(model, _batch(sparse=True))
    assert plan.capturable, plan.reason
    assert "check_class_ids" in plan.nodes


def test_seed_generator_draws_are_capturable_fixed_seeds_and_other_samplers_are_not():
    # Dropout draws from its SeedGenerator: a graph-registered generator replays it fresh.
    model = _model(layers=[keratron.layers.Dropout(0.5), keratron.layers.GaussianNoise(0.1)])
    plan = _train_plan(model, _batch())
    assert plan.capturable, plan.reason
    assert {"random_dropout_mask", "random_normal"} <= set(plan.nodes)
    x = np.ones((4, 4), "float32")
    fixed = keratron.function(lambda t: keratron.random.dropout(t, 0.5, seed=3))
    plan = capture_plan(fixed.get_concrete_graph(x))
    assert not plan.capturable
    assert "random_dropout_mask" in plan.reason and "fixed int seed" in plan.reason
    ints = keratron.function(
        lambda t: t + keratron.ops.cast(keratron.random.randint((4,), 0, 5), "float32")
    )
    plan = capture_plan(ints.get_concrete_graph(x))
    assert not plan.capturable
    assert "random_randint" in plan.reason and "host-side seed" in plan.reason


def test_draws_under_a_capture_use_the_graphs_generator_unseeded():
    from keratron import random as krandom

    graph_gen = torch.Generator().manual_seed(123)
    seeds = keratron.random.SeedGenerator(7)
    state = graph_gen.get_state()
    krandom._capturing.by_device = {0: graph_gen}
    try:
        assert krandom._generator(seeds, "cuda:0") is graph_gen
        assert krandom._generator(None, torch.device("cuda", 0)) is graph_gen
        # an int seed would bake one draw into the graph; a CPU draw is not captured at all
        with pytest.raises(RuntimeError, match="no graph-safe generator"):
            krandom._generator(5, "cuda:0")
        assert krandom._generator(seeds, "cpu") is not graph_gen
    finally:
        krandom._capturing.by_device = None
    assert torch.equal(graph_gen.get_state(), state)  # not re-seeded
    # The hook leaves a step without graph-safe draws alone (no generator, no seed consumed).
    before = krandom.global_seed_generator()._next_key()
    plan = cuda_graphs.CapturePlan(capturable=True, nodes=["matmul", "add"])
    with krandom._graph_generator(object(), "cuda:0", plan) as kept:
        assert kept is None and krandom._capturing.by_device is None
    assert krandom.global_seed_generator()._next_key() != before


class _Halving(keratron.optimizers.schedules.LearningRateSchedule):
    def __call__(self, step):
        return 0.1 * 0.5 ** keratron.ops.cast(step, "float32")


@pytest.mark.parametrize(
    "schedule",
    [
        lambda s: s.ExponentialDecay(0.1, 10, 0.9, staircase=True),
        lambda s: s.PiecewiseConstantDecay([3, 6], [0.1, 0.05, 0.01]),
        lambda s: s.PolynomialDecay(0.1, 10, cycle=True),
        lambda s: s.InverseTimeDecay(0.1, 10, 0.5),
        lambda s: s.CosineDecay(0.1, 10, warmup_target=0.2, warmup_steps=3),
        lambda s: s.CosineDecayRestarts(0.1, 4),
    ],
)
def test_builtin_learning_rate_schedules_are_capturable(schedule):
    opt = keratron.optimizers.Adam(schedule(keratron.optimizers.schedules))
    plan = _train_plan(_model(optimizer=opt), _batch())
    assert plan.capturable, plan.reason


@pytest.mark.parametrize(
    "optimizer, expected",
    [
        (
            lambda: keratron.optimizers.SGD(_Halving()),
            "learning-rate schedule _Halving is not one of Keras's built-in schedules",
        ),
        (lambda: keratron.optimizers.SGD(lambda: 0.1), "Python callable"),
        (lambda: keratron.optimizers.Adam(gradient_accumulation_steps=2), "accumulates"),
    ],
)
def test_optimizer_host_reads_block_capture(optimizer, expected):
    plan = _train_plan(_model(optimizer=optimizer()), _batch())
    assert not plan.capturable
    assert expected in plan.reason


def test_loss_scale_optimizer_is_as_capturable_as_its_inner_optimizer():
    lso = keratron.optimizers.LossScaleOptimizer
    plan = _train_plan(_model(optimizer=lso(keratron.optimizers.Adam(1e-2))), _batch())
    assert plan.capturable, plan.reason
    plan = _train_plan(_model(optimizer=lso(keratron.optimizers.SGD(lambda: 0.1))), _batch())
    assert not plan.capturable and "Python callable" in plan.reason


def test_unchecked_optimizer_subclass_is_not_capturable():
    class Halving(keratron.optimizers.Optimizer):
        def build(self, variables):
            super().build(variables)

        def update_step(self, gradient, variable, learning_rate):
            self.assign_sub(variable, gradient * 0.5)

    class MyAdam(keratron.optimizers.Adam):
        pass

    for opt, name in ((Halving(0.1), "Halving"), (MyAdam(), "MyAdam")):
        plan = _train_plan(_model(optimizer=opt), _batch())
        assert not plan.capturable
        assert f"({name}) has an update rule not checked" in plan.reason


def test_constraint_blocks_capture():
    model = keratron.Sequential(
        [keratron.Input(shape=(4,)), keratron.layers.Dense(3, kernel_constraint="non_neg")]
    )
    model.compile(optimizer="sgd", loss="mse")
    plan = _train_plan(model, _batch())
    assert not plan.capturable and "constraint" in plan.reason


def test_opaque_effects_need_a_declared_check():
    w = keratron.Variable(np.zeros(3, "float32"))

    def make(check):
        def update(x):
            w._value.add_(x)

        if check is not None:
            update.capture_check = check
            update.capture_name = "adder"

        def step(x):
            record_effect(update, [x], variables=[w])
            return x * 2.0

        return keratron.function(step, cuda_graphs=True)

    x = np.ones(3, "float32")
    plan = capture_plan(make(None).get_concrete_graph(x))
    assert not plan.capturable and "declares no graph-safe form" in plan.reason
    plan = capture_plan(make(lambda: None).get_concrete_graph(x))
    assert plan.capturable and plan.nodes[0] == "adder"
    assert [id(v) for v in plan.written] == [id(w)]
    plan = capture_plan(make(lambda: "it reads the host").get_concrete_graph(x))
    assert plan.reasons == ["it reads the host"]


def test_metric_effect_without_a_graph_safe_form_is_named():
    model = _model(loss="mse", metrics=[keratron.metrics.Precision()], units=1)
    plan = _train_plan(model, _batch(units=1))
    assert not plan.capturable
    assert "update_confusion_matrix_variables" in plan.reason


def test_state_on_another_device_is_not_capturable():
    model = _model()
    f = keratron.function(model.train_step, cuda_graphs=True)
    here = model.trainable_variables[0]._value.device
    other = "cpu" if here.type == "cuda" else "cuda"
    plan = capture_plan(f.get_concrete_graph(_batch()), device=other)
    assert not plan.capturable
    assert f"lives on {here}, not on the step's device {other}" in plan.reason


def test_register_capture_rule_checks_its_argument():
    with pytest.raises(TypeError, match="reason"):
        cuda_graphs.register_capture_rule(object(), 3)


# ------------------------------------------------------------------------------ the switch
def test_switch_and_environment(monkeypatch):
    monkeypatch.delenv("KERATRON_CUDA_GRAPHS", raising=False)
    assert config.cuda_graphs()
    monkeypatch.setenv("KERATRON_CUDA_GRAPHS", "0")
    assert not config.cuda_graphs()
    config.set_cuda_graphs(True)
    try:
        assert config.cuda_graphs()
        config.set_cuda_graphs(False)
        assert not config.cuda_graphs()
    finally:
        config.set_cuda_graphs(None)
    monkeypatch.setenv("KERATRON_CUDA_GRAPHS", "maybe")
    with pytest.raises(ValueError, match="KERATRON_CUDA_GRAPHS"):
        config.cuda_graphs()


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU path")
def test_cpu_never_captures():
    f = keratron.function(lambda x: x + 1.0, cuda_graphs=True)
    x = np.ones(3, "float32")
    f(x)
    assert f.get_concrete_graph(x).graphed is None
    model = _model()
    model.fit(*[t.numpy() for t in _batch()], epochs=1, verbose=0)  # no warning, no capture


def test_bound_methods_keep_the_request():
    class M:
        @keratron.function
        def plain(self, x):
            return x

    class N:
        def g(self, x):
            return x

    N.g = keratron.function(N.g, cuda_graphs=True)
    assert N().g.cuda_graphs and not M().plain.cuda_graphs


# ------------------------------------------------------------------------------ the capture
class _StandInGraph:
    """Records the captured callable; a replay reruns it into the static outputs (what a CUDA
    graph does for deterministic kernels, minus the launch savings)."""

    def __init__(self, fn, outs):
        self.fn, self.outs = fn, outs

    def replay(self):
        for static, new in zip(self.outs, self.fn()):
            if static is not None:
                static.copy_(new)


_state: list = []  # the variables of the step under test (a capture must leave them as found)


@pytest.fixture
def stand_in(monkeypatch):
    if torch.cuda.is_available():
        pytest.skip("the stand-in models a CUDA graph on CPU; CUDA runs the real capture below")
    captures = []

    def capture_into(device, fn, plan=None):
        # A capture records kernels without running them: the step's state is left as found.
        saved = [v._value.clone() for v in _state]
        outs = fn()
        for v, value in zip(_state, saved):
            v._value.copy_(value)
        captures.append(fn)
        return _StandInGraph(fn, outs), outs, []

    monkeypatch.setattr(cuda_graphs, "_capture_into", capture_into)
    monkeypatch.setattr(cuda_graphs, "_on_side_stream", lambda device, fn: fn())
    return captures


def _graphed(model, batch):
    f = keratron.function(model.train_step)
    compiled = f.get_concrete_graph(batch)
    compiled.graphed = GraphedStep(compiled, "train_step", set())
    _state[:] = model.variables + model.optimizer.variables + model.metrics_variables
    return f, compiled.graphed


def test_warm_up_capture_replay_matches_the_uncaptured_step(stand_in):
    keratron.utils.set_random_seed(1)
    a = _model()
    b = keratron.models.clone_model(a)
    b.compile(optimizer=keratron.optimizers.Adam(1e-2), loss="mse")
    b.set_weights(a.get_weights())
    fa, step = _graphed(a, _batch())
    fb = keratron.function(b.train_step)
    for i in range(5):
        batch = _batch(seed=i)
        la, lb = fa(batch), fb(batch)
        assert float(la["loss"]) == float(lb["loss"])
    assert len(stand_in) == 1 and step.captured and step.replays == 4
    for wa, wb in zip(a.get_weights() + a.optimizer.get_weights(), b.get_weights()):
        np.testing.assert_array_equal(wa, wb)
    assert int(a.optimizer.iterations.numpy()) == 5


def test_the_warm_up_call_and_the_capture_run_as_a_graphed_step(stand_in, monkeypatch):
    """Backend "auto" measures by GPU time inside the warm-up call and the capture
    (`in_graphed_step`), whose launches the replays repeat; nothing else runs in that scope."""
    model = _model()
    f, step = _graphed(model, _batch())
    seen = []  # for each run of the plan's steps: whether in the warm-up scope
    replay = step.compiled._replay

    def record_replay(*args):
        seen.append(cuda_graphs.in_graphed_step())
        return replay(*args)

    monkeypatch.setattr(step.compiled, "_replay", record_replay)
    for i in range(3):
        f(_batch(seed=i))
    # The warm-up call, then the capture; the stand-in graph reruns the captured steps to
    # model a replay, outside the scope (a real replay runs no Python).
    assert seen[:2] == [True, True] and not any(seen[2:])
    assert step.captured and not cuda_graphs.in_graphed_step()


def test_replays_bump_write_counts_so_cached_preludes_refresh(stand_in):
    model = _model()
    fa, step = _graphed(model, _batch())
    kernel = model.trainable_variables[0]
    fa(_batch())
    fa(_batch())  # capture + replay
    before = kernel._writes
    fa(_batch())
    assert kernel._writes > before
    # predict (a prelude-cached plan) sees the new weights
    pred = keratron.function(model.predict_step)
    x = _batch()[0]
    first = pred((x,)).numpy()
    fa(_batch())
    np.testing.assert_array_equal(pred((x,)).numpy(), model.predict_step((x,)).numpy())
    assert not np.array_equal(first, pred((x,)).numpy())


def test_rebinding_a_variable_recaptures(stand_in):
    model = _model()
    fa, step = _graphed(model, _batch())
    fa(_batch())
    fa(_batch())
    kernel = model.trainable_variables[0]
    kernel._value = kernel._value.clone()  # the storage moved: the graph would write the old one
    fa(_batch())
    assert len(stand_in) == 2


def test_outputs_are_copies(stand_in):
    model = _model()
    fa, step = _graphed(model, _batch())
    fa(_batch())
    logs = fa(_batch(seed=1))
    loss = float(logs["loss"])
    fa(_batch(seed=2))
    assert float(logs["loss"]) == loss


def test_failed_capture_warns_once_and_runs_uncaptured(monkeypatch):
    def fail(device, fn, plan=None):
        raise RuntimeError("operation not permitted when stream is capturing")

    monkeypatch.setattr(cuda_graphs, "_capture_into", fail)
    monkeypatch.setattr(cuda_graphs, "_on_side_stream", lambda device, fn: fn())
    model = _model()
    fa, step = _graphed(model, _batch())
    fa(_batch())
    with pytest.warns(UserWarning, match="capture failed .*not permitted"):
        fa(_batch())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fa(_batch())
    assert not step.captured and int(model.optimizer.iterations.numpy()) == 3


def test_not_capturable_plan_warns_once_naming_the_cause(stand_in):
    model = _model(optimizer=keratron.optimizers.SGD(lambda: 0.1))
    fa, step = _graphed(model, _batch())
    with pytest.warns(UserWarning, match="runs without a CUDA graph: .*Python callable"):
        fa(_batch())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fa(_batch())
    assert stand_in == []


def test_switched_off_runs_uncaptured(stand_in):
    model = _model()
    fa, step = _graphed(model, _batch())
    config.set_cuda_graphs(False)
    try:
        for _ in range(3):
            fa(_batch())
    finally:
        config.set_cuda_graphs(None)
    assert stand_in == [] and step.replays == 0


# ------------------------------------------------------------------------------ on CUDA
def _cuda_pair(make):
    keratron.utils.set_random_seed(3)
    with keratron.device("cuda"):
        a = make()
        b = keratron.models.clone_model(a)
        b.compile(optimizer=keratron.optimizers.Adam(1e-2), loss="mse")
        b.set_weights(a.get_weights())
    return a, b


@cuda
def test_cuda_train_step_replays_bitwise_equal():
    a, b = _cuda_pair(lambda: _model(units=16, inputs=64))
    fa = keratron.function(a.train_step, cuda_graphs=True)
    fb = keratron.function(b.train_step)
    for i in range(6):
        x, y = _batch(n=32, inputs=64, units=16, seed=i)
        batch = (keratron.Tensor(x._value.cuda()), keratron.Tensor(y._value.cuda()))
        la, lb = fa(batch), fb(batch)
        assert torch.equal(la["loss"]._value, lb["loss"]._value)
    step = fa.get_concrete_graph(batch).graphed
    # call 1 traces and warms up, call 2 captures and replays, calls 3-6 replay
    assert step is not None and step.captured and step.replays == 5
    for wa, wb in zip(a.get_weights() + a.optimizer.get_weights(), b.get_weights()):
        np.testing.assert_array_equal(wa, wb)


@cuda
def test_cuda_fit_and_predict_with_and_without_graphs_agree():
    x, y = (t.numpy() for t in _batch(n=256, inputs=64, units=16))
    a, b = _cuda_pair(lambda: _model(units=16, inputs=64))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a capturable step warns about nothing
        ha = a.fit(x, y, batch_size=32, epochs=2, verbose=0, shuffle=False)
        pa = a.predict(x, batch_size=64, verbose=0)
    config.set_cuda_graphs(False)
    try:
        hb = b.fit(x, y, batch_size=32, epochs=2, verbose=0, shuffle=False)
        pb = b.predict(x, batch_size=64, verbose=0)
    finally:
        config.set_cuda_graphs(None)
    assert ha.history["loss"] == hb.history["loss"]
    np.testing.assert_array_equal(pa, pb)
    for wa, wb in zip(a.get_weights(), b.get_weights()):
        np.testing.assert_array_equal(wa, wb)


@cuda
def test_cuda_dropout_replays_draw_fresh_masks():
    keratron.utils.set_random_seed(1)
    with keratron.device("cuda"):
        layer = keratron.layers.Dropout(0.5)
        f = keratron.function(lambda t: layer(t, training=True), cuda_graphs=True)
        x = keratron.Tensor(torch.ones(64, 256, device="cuda"))
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # captured: nothing to warn about
            outs = [f(x).numpy() for _ in range(5)]
    step = f.get_concrete_graph(x).graphed
    assert step is not None and step.captured and step.replays == 4
    for i, out in enumerate(outs):
        assert set(np.unique(out)) <= {0.0, 2.0}
        assert 0.45 < (out != 0).mean() < 0.55
        for earlier in outs[:i]:
            assert (out != earlier).mean() > 0.3  # independent masks differ in about half


@cuda
def test_cuda_fit_with_dropout_is_captured():
    keratron.utils.set_random_seed(2)
    with keratron.device("cuda"):
        model = _model(units=8, inputs=32, layers=[keratron.layers.Dropout(0.3)])
    x, y = (t.numpy() for t in _batch(n=256, inputs=32, units=8))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        hist = model.fit(x, y, batch_size=32, epochs=3, verbose=0)
    losses = hist.history["loss"]
    assert np.isfinite(losses).all() and losses[-1] < losses[0]


@cuda
def test_cuda_fit_with_a_schedule_is_captured_and_matches_uncaptured():
    # Each replay reads `iterations` on the device: the rates, hence the weights, follow the
    # uncaptured fit's bit for bit (PiecewiseConstantDecay switches mid-epoch).
    def make():
        sched = keratron.optimizers.schedules.PiecewiseConstantDecay([3, 9], [0.05, 0.01, 0.002])
        return _model(units=16, inputs=64, optimizer=keratron.optimizers.SGD(sched))

    keratron.utils.set_random_seed(4)
    with keratron.device("cuda"):
        a, b = make(), make()
    b.set_weights(a.get_weights())
    x, y = (t.numpy() for t in _batch(n=256, inputs=64, units=16))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # captured: nothing to warn about
        ha = a.fit(x, y, batch_size=32, epochs=2, verbose=0, shuffle=False)
    config.set_cuda_graphs(False)
    try:
        hb = b.fit(x, y, batch_size=32, epochs=2, verbose=0, shuffle=False)
    finally:
        config.set_cuda_graphs(None)
    assert ha.history["loss"] == hb.history["loss"]
    for wa, wb in zip(a.get_weights(), b.get_weights()):
        np.testing.assert_array_equal(wa, wb)


@cuda
def test_cuda_loss_scaling_is_captured_and_skips_as_the_uncaptured_step_does():
    def make():
        opt = keratron.optimizers.LossScaleOptimizer(
            keratron.optimizers.Adam(1e-2), initial_scale=2.0**8, dynamic_growth_steps=3
        )
        return _model(units=16, inputs=64, optimizer=opt)

    keratron.utils.set_random_seed(5)
    with keratron.device("cuda"):
        a, b = make(), make()
    b.set_weights(a.get_weights())
    x, y = (t.numpy() for t in _batch(n=256, inputs=64, units=16))
    x[100, 3] = np.inf  # batch 4 of 8 each epoch: its gradients are not finite, it is skipped
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # captured: no warning of the graphs
        a.fit(x, y, batch_size=32, epochs=2, verbose=0, shuffle=False)
    config.set_cuda_graphs(False)
    try:
        b.fit(x, y, batch_size=32, epochs=2, verbose=0, shuffle=False)
    finally:
        config.set_cuda_graphs(None)
    # 16 steps, 2 skipped (halvings), 4 growths after 3 finite steps in a row: 2**8 -> 2**10
    assert float(a.optimizer.dynamic_scale.numpy()) == 2.0**10
    for wa, wb in zip(a.get_weights(), b.get_weights()):
        np.testing.assert_array_equal(wa, wb)
    for va, vb in zip(a.optimizer.variables, b.optimizer.variables):
        np.testing.assert_array_equal(va.numpy(), vb.numpy())


@cuda
def test_cuda_not_capturable_step_warns_once():
    with keratron.device("cuda"):
        model = _model(optimizer=keratron.optimizers.SGD(lambda: 0.1))
    x, y = (t.numpy() for t in _batch(n=64))
    with pytest.warns(UserWarning, match="Python callable") as record:
        model.fit(x, y, batch_size=16, epochs=2, verbose=0)
    assert sum("CUDA graph" in str(w.message) for w in record) == 1
