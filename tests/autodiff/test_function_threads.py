"""keratron.function and Model.predict called from several threads at once."""

import threading

import numpy as np
import pytest

import keratron as kt

ops = kt.ops
# Twelve shapes retrace twelve times on purpose.
pytestmark = pytest.mark.filterwarnings("ignore:keratron.function .* was traced")


def _run_in_threads(n_threads, work):
    errors = []

    def guarded(k):
        try:
            work(k)
        except Exception as e:  # collected: an exception in a thread would otherwise vanish
            errors.append(e)

    threads = [threading.Thread(target=guarded, args=(k,)) for k in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors


def test_a_variable_made_by_another_thread_during_a_retrace_is_not_this_functions():
    # The check "no variables after the first trace" counted every Variable of the process,
    # so one made by another thread while this function retraced failed the call.
    w = kt.Variable(np.ones((3,), "float32"))
    in_trace, made = threading.Event(), threading.Event()

    @kt.function
    def f(x):
        if x.shape[0] == 2:  # the retrace: wait while another thread makes a Variable
            in_trace.set()
            assert made.wait(10)
        return x * w

    f(ops.ones((1, 3)))

    def make_variable():
        assert in_trace.wait(10)
        kt.Variable(0.0)
        made.set()

    other = threading.Thread(target=make_variable)
    other.start()
    out = f(ops.ones((2, 3)))
    other.join()
    np.testing.assert_array_equal(out.numpy(), np.ones((2, 3)))


def test_variables_made_on_a_retrace_are_still_an_error():
    @kt.function
    def f(x):
        if x.shape[0] == 2:
            kt.Variable(0.0)
        return x * 2.0

    f(ops.ones((1,)))
    with pytest.raises(ValueError, match="created variables on a call after its first trace"):
        f(ops.ones((2,)))


def _inputs(n_shapes, features, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.normal(size=(1 + i % n_shapes, features)).astype("float32") for i in range(48)]


def test_one_function_from_eight_threads_on_mixed_shapes_from_cold():
    w = kt.Variable(np.linspace(-1.0, 1.0, 12, dtype="float32").reshape(4, 3))

    def body(x):
        return ops.tanh(ops.matmul(x, w)) * 2.0 + 1.0

    xs = _inputs(12, 4)
    expected = [kt.function(body)(x).numpy() for x in xs]
    f = kt.function(body)
    got = [None] * len(xs)

    def work(k):
        for i in range(k, len(xs), 8):
            got[i] = f(xs[i]).numpy()

    assert _run_in_threads(8, work) == []
    for g, e in zip(got, expected):
        np.testing.assert_array_equal(g, e)
    assert f.trace_count == 12  # each shape traced once, however many threads asked for it


def test_predict_from_eight_threads_on_mixed_shapes_from_cold():
    kt.utils.set_random_seed(1)
    model = kt.Sequential(
        [kt.Input((6,)), kt.layers.Dense(5, activation="relu"), kt.layers.Dense(3)]
    )
    xs = _inputs(12, 6, seed=1)
    expected = [model(x, training=False).numpy() for x in xs]
    got = [None] * len(xs)

    def work(k):
        for i in range(k, len(xs), 8):
            got[i] = model.predict(xs[i], verbose=0)

    assert _run_in_threads(8, work) == []
    for g, e in zip(got, expected):
        np.testing.assert_allclose(g, e, rtol=1e-6, atol=1e-6)
