"""Buffers a compiled plan keeps across replays (keratron/autodiff/memory_plan.py)."""

import numpy as np

import keratron
from keratron import ops


def _pool_and_dense(x, w):
    # pad -> max_pool -> matmul, each result over memory_plan.MIN_BYTES and kept inside.
    y = ops.max_pool(ops.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0))), 2)
    return ops.sum(ops.matmul(ops.reshape(y, (y.shape[0], -1)), w))


def test_kept_buffers_give_the_eager_values_on_every_call():
    rng = np.random.default_rng(0)
    w = rng.standard_normal((33 * 33 * 16, 8)).astype("float32")
    f = keratron.function(_pool_and_dense)
    for _ in range(3):
        x = rng.standard_normal((64, 64, 64, 16)).astype("float32")
        assert np.array_equal(np.asarray(f(x, w)), np.asarray(_pool_and_dense(x, w)))
    assert f.get_concrete_graph(x, w).kept_buffers


def test_a_fetched_view_of_a_kept_buffer_is_not_overwritten_by_the_next_call():
    def pooled(x):
        return ops.reshape(ops.max_pool(x, 2), (-1,))

    def padded_sum(x):
        return ops.sum(ops.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0))), axis=0)

    f = keratron.function(lambda x: (pooled(x), padded_sum(x)))
    x1 = np.ones((32, 64, 64, 8), "float32")
    first = f(x1)[0]
    kept = np.asarray(first).copy()
    f(2 * x1)
    assert np.array_equal(np.asarray(first), kept)


def test_threads_replaying_one_plan_do_not_share_its_kept_buffers():
    # One thread at a time writes into a plan's kept buffers; the others allocate as usual.
    import threading

    rng = np.random.default_rng(1)
    w = rng.standard_normal((33 * 33 * 16, 8)).astype("float32")
    f = keratron.function(_pool_and_dense)
    xs = [rng.standard_normal((64, 64, 64, 16)).astype("float32") for _ in range(6)]
    expected = [np.asarray(_pool_and_dense(x, w)) for x in xs]
    f(xs[0], w)  # traced once, before the threads start
    errors = []
    barrier = threading.Barrier(6)

    def work(i):
        barrier.wait()
        for _ in range(4):
            got = np.asarray(f(xs[i], w))
            if not np.array_equal(got, expected[i]):
                errors.append(i)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def _conv_stack(x, k1, k2, k3):
    # relu (a oneDNN post-op after the add) and relu6 (clamped after it), each output over
    # memory_plan.MIN_BYTES; the last convolution, with no activation on a kernel the plan
    # does not prepack, runs the reference kernel and keeps nothing.
    y = ops.relu(ops.conv(x, k1, padding="same"))
    y = ops.relu6(ops.conv(y, k2))
    return ops.sum(ops.conv(y, k3, strides=2) ** 2)


def test_kept_convolution_outputs_equal_the_eager_convolutions_bit_for_bit():
    rng = np.random.default_rng(2)
    ks = [
        rng.standard_normal(s).astype("float32") * 0.2
        for s in [(3, 3, 8, 16), (3, 3, 16, 16), (3, 3, 16, 8)]
    ]
    f = keratron.function(_conv_stack)
    for _ in range(3):
        x = rng.standard_normal((16, 40, 40, 8)).astype("float32")
        assert np.array_equal(np.asarray(f(x, *ks)), np.asarray(_conv_stack(x, *ks)))
    plan = f.get_concrete_graph(x, *ks)
    assert sum(len(b) for b in plan.kept_buffers) == 2  # the first two convolutions' outputs
