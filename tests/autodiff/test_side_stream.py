"""A compiled plan's second stream (autodiff/side_stream.py): which steps go there, that the
values do not change, and when `fit` opens one. Behaviour only, no timing."""

import threading

import numpy as np
import pytest

import keratron
from keratron.autodiff import memory_plan, side_stream
from keratron.autodiff.passes import CompiledFunction
from keratron.ops.convolution import conv_grad_filter_p
from keratron.ops.linalg import matmul_p
from keratron.utils import threads


@pytest.fixture
def one_thread(torch_threads):
    torch_threads(1)


def _convnet(seed=0):
    keratron.utils.set_random_seed(seed)
    return keratron.Sequential(
        [
            keratron.Input((12, 12, 3)),
            keratron.layers.Conv2D(8, 3, activation="relu"),
            keratron.layers.BatchNormalization(),
            keratron.layers.DepthwiseConv2D(3, padding="same"),
            keratron.layers.Conv2D(16, 1, activation="relu6"),
            keratron.layers.MaxPooling2D(2),
            keratron.layers.Flatten(),
            keratron.layers.Dense(10),
        ]
    )


def _train_plan():
    """A compiled training step (forward, gradients, Adam) and the plan's graph."""
    model = _convnet()
    opt = keratron.optimizers.Adam()

    @keratron.function
    def step(x, y):
        with keratron.GradientTape() as tape:
            loss = keratron.ops.mean(keratron.ops.square(model(x, training=True) - y))
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply(grads, model.trainable_variables)
        return loss

    x = np.ones((4, 12, 12, 3), "float32")
    y = np.zeros((4, 10), "float32")
    return step.get_concrete_graph(x, y)


def test_weight_gradients_are_handed_over_after_their_inputs_and_waited_for_before_a_read():
    plan = _train_plan()
    nodes = plan.graph.nodes
    start = plan.prelude.n_steps if plan.prelude is not None else 0
    order, submits = side_stream.schedule(nodes, start)
    assert sorted(map(id, order)) == sorted(map(id, nodes))  # the same nodes, reordered
    side = [n for n in nodes if id(n) in submits]
    # Every convolution's filter gradient, and the Dense kernel's (read by the update only);
    # no forward product.
    assert sum(n.prim is conv_grad_filter_p for n in side) == 3
    assert [n.prim for n in side if n.prim is not conv_grad_filter_p] == [matmul_p]
    forward = [n for n in nodes if n.kind == "prim" and n.prim is matmul_p][0]
    assert id(forward) not in submits
    made = {s: i for i, n in enumerate(order) for s in n.outputs}
    place = {id(n): i for i, n in enumerate(order)}
    for node in side:
        handed, waited = place[id(submits[id(node)])], place[id(node)]
        inputs = [made[s] for s in node.inputs if s in made]
        # Handed over right after the last of its inputs is made, waited for before anything
        # reads its result.
        assert handed == max(inputs) + 1 < waited
        readers = [i for i, n in enumerate(order) if set(n.inputs) & set(node.outputs)]
        assert all(waited < r for r in readers)
        # Between the hand-over and the wait, nothing writes into what the step reads: no
        # step there frees or overwrites its inputs (the compiler sees them read at the wait).
        assert all(not set(order[i].outputs) & set(node.inputs) for i in range(handed, waited))


def test_at_most_in_flight_steps_are_handed_over_and_not_waited_for():
    plan = _train_plan()
    start = plan.prelude.n_steps if plan.prelude is not None else 0
    order, submits = side_stream.schedule(plan.graph.nodes, start)
    place = {id(n): i for i, n in enumerate(order)}
    handed = sorted((place[id(b)], place[k]) for k, b in submits.items())
    for h, _ in handed:
        open_ = sum(1 for h2, w2 in handed if h2 <= h < w2)
        assert open_ <= side_stream.IN_FLIGHT


def test_a_plan_without_side_steps_has_no_second_schedule():
    f = keratron.function(lambda x: keratron.ops.relu(x) * 2.0)
    plan = f.get_concrete_graph(np.ones((3, 4), "float32"))
    assert side_stream.schedule(plan.graph.nodes) is None


def _fit(model, x, y, side: bool):
    model.compile(optimizer="adam", loss=keratron.losses.SparseCategoricalCrossentropy(True))
    if side:
        with side_stream.side_thread():
            model.fit(x, y, batch_size=16, epochs=2, verbose=0, shuffle=False)
    else:
        model.fit(x, y, batch_size=16, epochs=2, verbose=0, shuffle=False)
    return model.get_weights()


def test_training_with_a_second_stream_gives_the_one_stream_values(one_thread, monkeypatch):
    rng = np.random.default_rng(0)
    x = rng.random((64, 12, 12, 3), dtype=np.float32)
    y = rng.integers(0, 10, 64)
    ran = []
    run = side_stream._run

    def recorded(*args):
        ran.append(threading.current_thread().name)
        return run(*args)

    monkeypatch.setattr(side_stream, "_run", recorded)
    one = _fit(_convnet(), x, y, side=False)
    assert not ran
    two = _fit(_convnet(), x, y, side=True)
    assert ran and all(name.startswith("keratron-side") for name in ran)
    for a, b in zip(one, two):
        np.testing.assert_array_equal(a, b)


def _wide_dense():
    """A convnet whose Dense kernel gradient is 4,608 x 256 floats (4.7 MB): a kept buffer
    takes it."""
    keratron.utils.set_random_seed(3)
    return keratron.Sequential(
        [
            keratron.Input((26, 26, 4)),
            keratron.layers.Conv2D(32, 3, activation="relu"),
            keratron.layers.MaxPooling2D(2),
            keratron.layers.Flatten(),
            keratron.layers.Dense(256, activation="relu"),
            keratron.layers.Dense(10),
        ]
    )


def test_a_side_step_writes_its_kept_buffer_and_values_stay_exact(one_thread, monkeypatch):
    # The wide Dense kernel's gradient, in a kept buffer written on the second thread.
    built = []
    lower_side = CompiledFunction._lower_side

    def recorded(self, *args):
        built.append(lower_side(self, *args))
        return built[-1]

    monkeypatch.setattr(CompiledFunction, "_lower_side", recorded)
    rng = np.random.default_rng(1)
    x = rng.random((64, 26, 26, 4), dtype=np.float32)
    y = rng.integers(0, 10, 64)
    one = _fit(_wide_dense(), x, y, side=False)
    assert not built
    two = _fit(_wide_dense(), x, y, side=True)
    for a, b in zip(one, two):
        np.testing.assert_array_equal(a, b)
    written = [b for _, kept in built for b in kept if len(b)]
    assert any(b.need >= 4_608 * 256 * 4 for b in written)


def test_a_side_steps_kept_buffer_lives_from_its_hand_over(monkeypatch):
    # Written while the main stream runs the steps from the hand-over to the wait: memory
    # shared with a value of those steps would be overwritten under it.
    model = _wide_dense()
    opt = keratron.optimizers.Adam()

    @keratron.function
    def step(x):
        with keratron.GradientTape() as tape:
            loss = keratron.ops.mean(keratron.ops.square(model(x)))
        opt.apply(tape.gradient(loss, model.trainable_variables), model.trainable_variables)
        return loss

    plan = step.get_concrete_graph(np.ones((64, 26, 26, 4), "float32"))
    owners, ranges = {}, []
    kept_buffer_call = memory_plan.kept_buffer_call

    def recorded_call(graph, node, fallback, buffers_list):
        fn = kept_buffer_call(graph, node, fallback, buffers_list)
        if fn is not None:
            owners[id(buffers_list[-1])] = node
        return fn

    monkeypatch.setattr(memory_plan, "kept_buffer_call", recorded_call)
    monkeypatch.setattr(memory_plan, "share_memory", ranges.extend)
    start = plan.prelude.n_steps if plan.prelude is not None else 0
    order, submits = side_stream.schedule(plan.graph.nodes, start)
    plan._lower_side(*plan.lowering, order, submits)
    place = {id(n): i for i, n in enumerate(order)}
    side_ranges = [
        (first, place[id(submits[id(owners[id(b)])])], place[id(owners[id(b)])])
        for b, first, _ in ranges
        if id(owners[id(b)]) in submits
    ]
    assert side_ranges  # the Dense kernel's gradient (4.7 MB) takes a kept buffer
    for first, handed, waited in side_ranges:
        assert first == handed < waited


def test_a_full_second_stream_runs_the_step_in_line():
    gate = threading.Event()
    with side_stream.side_thread():
        first = side_stream.submit(gate.wait)
        queued = side_stream.submit(threading.current_thread)
        inline = side_stream.submit(threading.current_thread)
        assert inline.result() is threading.current_thread()  # ran here, at once
        gate.set()
        assert first.result() is True
        assert queued.result().name.startswith("keratron-side")


def test_an_error_in_a_side_step_is_raised_where_it_is_waited_for():
    def fail():
        raise ValueError("side step failed")

    with side_stream.side_thread():
        future = side_stream.submit(fail)
        with pytest.raises(ValueError, match="side step failed"):
            future.result()


@pytest.mark.parametrize("others, opens", [(2, True), (1, False), (0, False)])
def test_fit_opens_a_second_stream_only_when_every_core_is_busy(
    monkeypatch, torch_threads, others, opens
):
    monkeypatch.setattr(threads, "_allowed_cores", lambda: 2)
    monkeypatch.setattr(threads, "_cached_free_cores", lambda: max(1, 2 - others))
    monkeypatch.setattr(threads, "_cached_other_threads", lambda: others)
    torch_threads(2)
    with threads.matched_to_free_cores():
        inside = side_stream.active()
    assert not side_stream.active()
    assert inside is opens
    # The scope joined its thread: none is left behind.
    assert not [t for t in threading.enumerate() if t.name.startswith("keratron-side")]
