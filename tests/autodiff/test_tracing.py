"""The public tracing API (keratron.autodiff.tracing.Trace): record, differentiate, compile."""

import numpy as np
import pytest

import keratron as kt
from keratron.autodiff.tracing import Trace

ops = kt.ops


def _mlp(x, w, b):
    return ops.sum(ops.tanh(ops.matmul(x, w) + b) ** 2)


def test_gradients_equal_the_eager_tapes():
    rng = np.random.default_rng(0)
    w = kt.Variable(rng.normal(size=(3, 2)).astype("float32"))
    b = kt.Variable(rng.normal(size=(2,)).astype("float32"))  # broadcast over the batch
    x_value = kt.convert_to_tensor(rng.normal(size=(5, 3)).astype("float32"))

    trace = Trace()
    x = trace.placeholder((5, 3), "float32")
    with trace:
        y = _mlp(x, w, b)
    grads = trace.gradients(y, [w, b, x])
    got = trace.compile([y] + grads).run([x_value])

    with kt.GradientTape() as tape:
        tape.watch(x_value)
        y_eager = _mlp(x_value, w, b)
    want = [y_eager] + tape.gradient(y_eager, [w, b, x_value])
    for g, e in zip(got, want):
        np.testing.assert_allclose(g.numpy(), e.numpy(), rtol=1e-5, atol=1e-6)


def test_gradients_of_an_unreached_source_are_none_and_sources_are_checked():
    w, unused = kt.Variable([1.0, 2.0]), kt.Variable([3.0])
    trace = Trace()
    x = trace.placeholder((2,), "float32")
    with trace:
        y = ops.sum(x * w)
        z = ops.sum(unused * 2.0)
    assert trace.gradients(y, [unused]) == [None]
    with pytest.raises(ValueError, match="source must be a placeholder"):
        trace.gradients(y, [kt.convert_to_tensor([1.0, 1.0])])
    assert z is not None


def test_one_trace_compiles_for_several_fetches_and_is_left_unchanged():
    w = kt.Variable([1.0, 2.0, 3.0])
    trace = Trace()
    x = trace.placeholder((3,), "float32")
    with trace:
        a = ops.exp(x) * w
        b = ops.sum(x * 2.0)
    n = len(trace.graph.nodes)
    only_b = trace.compile(b)
    both = trace.compile({"a": a, "b": b})
    assert len(trace.graph.nodes) == n
    assert only_b.num_nodes < both.num_nodes  # pruned to what the fetch needs
    x_value = kt.convert_to_tensor([0.0, 1.0, 2.0])
    np.testing.assert_allclose(only_b.run([x_value]).numpy(), 6.0)
    out = both.run([x_value])
    np.testing.assert_allclose(out["a"].numpy(), np.exp([0.0, 1.0, 2.0]) * [1, 2, 3], rtol=1e-6)


def test_trace_state_writes_and_replace_variable():
    counter = kt.Variable(0.0, trainable=False)
    scale = kt.Variable(2.0, trainable=False)
    trace = Trace()
    x = trace.placeholder((), "float32")
    with trace:
        counter.assign_add(1.0)
        y = x * scale
    assert trace.writes(counter) and not trace.writes(scale)
    assert {id(v) for v in trace.captured_variables()} == {id(counter), id(scale)}
    assert trace.owns(x) and trace.owns(y) and not trace.owns(scale)
    trace.replace_variable(scale, kt.Variable(5.0, trainable=False))
    step = trace.compile(y)
    assert float(step.run([kt.convert_to_tensor(1.0)])) == 5.0
    assert float(counter.numpy()) == 1.0  # the effect ran with the replay


def test_placeholder_needs_a_known_shape():
    with pytest.raises(ValueError, match="fully known"):
        Trace().placeholder((None, 3), "float32")


def test_keratron_function_builds_on_trace_and_nested_entries_restore_state():
    from keratron.autodiff.function import is_tracing

    outer, inner = Trace(), Trace()
    with outer:
        with inner:
            assert is_tracing()
        assert is_tracing()
    assert not is_tracing()
