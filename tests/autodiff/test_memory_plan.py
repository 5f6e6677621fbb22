"""Buffers a compiled plan keeps across replays (keratron/autodiff/memory_plan.py)."""

import numpy as np
import pytest

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


def test_a_kept_pad_fills_every_side_of_its_border():
    # The writer fills only the border (x overwrites the rest): uneven widths on every axis
    # and a non-zero value, which fresh (zeroed) pages would not hide.
    widths = ((1, 0), (0, 2), (3, 1), (0, 1))

    def padded(x):
        return ops.multiply(ops.pad(x, widths, constant_values=2.5), 2.0)  # exact

    f = keratron.function(padded)
    rng = np.random.default_rng(2)
    for _ in range(3):
        x = rng.uniform(0.0, 1.0, (16, 40, 40, 24)).astype("float32")
        want = np.pad(x, widths, constant_values=2.5) * 2.0
        assert np.array_equal(np.asarray(f(x)), want)
    assert f.get_concrete_graph(x).kept_buffers


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


def _skip_chain(x, w1, w2, w3, w4, w5):
    # Five kept matmul results a..e. Views of a and b are taken at once and read at the end
    # (a reshape, a slice), so a and b stay alive to the end though a and b themselves are
    # not read after their views are made; c is read by d only, so e (written after d) can
    # take c's memory.
    a = ops.matmul(x, w1)
    a_view = ops.reshape(a, (-1,))
    b = ops.matmul(ops.relu(a), w2)
    b_tail = ops.reshape(b, (-1,))[-5:]
    c = ops.matmul(ops.tanh(b), w3)
    d = ops.matmul(ops.tanh(c), w4)
    e = ops.matmul(ops.tanh(d), w5)
    return ops.sum(e) + ops.sum(a_view[:7]) + ops.sum(b_tail)


def test_buffers_with_disjoint_live_ranges_share_memory_and_overlapping_ones_do_not():
    rng = np.random.default_rng(3)
    # float64: the BLAS products, which write into kept buffers (large float32 ones run on
    # oneDNN's inner product, which allocates its result).
    ws = [rng.standard_normal((512, 512)) / 16 for _ in range(5)]
    f = keratron.function(_skip_chain)
    for _ in range(3):
        x = rng.standard_normal((512, 512))
        np.testing.assert_array_equal(np.asarray(f(x, *ws)), np.asarray(_skip_chain(x, *ws)))
    a, b, c, d, e = f.get_concrete_graph(x, *ws).kept_buffers
    assert c.pool is e.pool
    others = {id(p) for p in (b.pool, c.pool, d.pool)}
    assert id(a.pool) not in others and id(b.pool) not in {id(c.pool), id(d.pool)}
    assert d.pool is not c.pool  # d reads c
    for kept in (a, b, c, d, e):  # each buffer's tensors lie in its pool's storage
        for t in kept.values():
            assert t.untyped_storage().data_ptr() == kept.pool.storage().data_ptr()


def test_a_training_step_with_shared_kept_buffers_matches_the_eager_step():
    # Forward activations are read again by the backward pass: sharing must follow that.
    rng = np.random.default_rng(4)
    model = keratron.Sequential(
        [
            keratron.Input((24, 24, 3)),
            keratron.layers.Conv2D(16, 3, activation="relu"),
            keratron.layers.Conv2D(16, 3, activation="relu", padding="same"),
            keratron.layers.MaxPooling2D(2),
            keratron.layers.Conv2D(8, 3, activation="relu6"),
            keratron.layers.Flatten(),
            keratron.layers.Dense(10),
        ]
    )
    eager = keratron.models.clone_model(model)
    eager.set_weights(model.get_weights())
    for m, run_eagerly in ((model, False), (eager, True)):
        m.compile(optimizer="sgd", loss="mse", run_eagerly=run_eagerly)
    x = rng.random((64, 24, 24, 3), dtype=np.float32)
    y = rng.random((64, 10), dtype=np.float32)
    for _ in range(2):
        model.fit(x, y, batch_size=32, verbose=0, shuffle=False)
        eager.fit(x, y, batch_size=32, verbose=0, shuffle=False)
    for a, b in zip(model.get_weights(), eager.get_weights()):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(
        model.predict(x, verbose=0), eager.predict(x, verbose=0), rtol=1e-4, atol=1e-6
    )


def _pool_branch_block(x):
    # An Inception block's shape: a SAME 3x3 average pool (aten pads and averages over the
    # unpadded elements only) and a channel concatenation, each over MIN_BYTES.
    pooled = ops.average_pool(x, 3, strides=1, padding="same")
    joined = ops.concatenate([pooled, ops.relu(x)], axis=-1)
    return ops.sum(joined, axis=(1, 2))


def test_average_pool_and_concatenate_write_kept_buffers():
    rng = np.random.default_rng(1)
    f = keratron.function(_pool_branch_block)
    for _ in range(3):
        x = rng.standard_normal((8, 35, 35, 96)).astype("float32")
        assert np.array_equal(np.asarray(f(x)), np.asarray(_pool_branch_block(x)))
    # Two writers serve the plan: the pool's and the concatenation's (relu has none).
    plan = f.get_concrete_graph(x)
    assert [node.prim.name for node in plan.graph.nodes] == [
        "avg_pool",
        "relu",
        "concatenate",
        "sum",
    ]
    assert len(plan.kept_buffers) == 2


def _batch_norm_step(x, gamma, beta, g):
    # The fused batch norm forward and backward on a channels-last batch over MIN_BYTES; y
    # and dx are read inside (a function's outputs are never kept).
    from keratron.ops.batchnorm import fused_batch_normalization

    with keratron.GradientTape() as tape:
        tape.watch([x, gamma, beta])
        y, mean, var = fused_batch_normalization(x, -1, gamma, beta)
        loss = ops.sum(ops.sin(y) * g) + ops.sum(mean) + ops.sum(var)
    dx, dgamma, dbeta = tape.gradient(loss, [x, gamma, beta])
    # (dgamma and dbeta are read too: a node with any output returned keeps nothing.)
    return ops.sum(ops.square(y), axis=(0, 1, 2)), ops.sum(ops.cos(dx), axis=0), dgamma * 2, -dbeta


# Below batchnorm.GRAD_BY_CHUNKS_BYTES torch's kernel computes dx (fresh); from it on dx goes
# by chunks into a kept buffer too, the eager call taking the same chunks.
@pytest.mark.parametrize(
    "shape,kept", [((8, 40, 40, 24), [{"y"}]), ((8, 64, 64, 32), [{"y"}, {"dx"}])]
)
def test_batch_norm_writes_a_kept_buffer_with_the_eager_values(shape, kept):
    rng = np.random.default_rng(4)
    gamma = rng.uniform(0.5, 1.5, shape[-1]).astype("float32")
    beta = rng.standard_normal(shape[-1]).astype("float32")
    f = keratron.function(_batch_norm_step)
    for _ in range(3):
        x = (rng.standard_normal(shape) * 3 + 10).astype("float32")
        g = rng.standard_normal(x.shape).astype("float32")
        args = [keratron.ops.convert_to_tensor(a) for a in (x, gamma, beta, g)]
        got, want = f(*args), _batch_norm_step(*args)
        for a, b in zip(got, want):
            assert np.array_equal(np.asarray(a), np.asarray(b))
    names = [set(b) for b in f.get_concrete_graph(*args).kept_buffers]
    assert all(k in names for k in kept) and ({"dx"} in names) == ({"dx"} in kept)


def _batch_norm_relu6_step(x, gamma, beta, g):
    # MobileNet's block: batch norm, relu6, a loss; relu6's gradient reads its own output.
    from keratron.ops.batchnorm import fused_batch_normalization

    with keratron.GradientTape() as tape:
        tape.watch([x, gamma, beta])
        y, _, _ = fused_batch_normalization(x, -1, gamma, beta)
        a = ops.relu6(y)
        loss = ops.sum(a * g)
    dx, dgamma, dbeta = tape.gradient(loss, [x, gamma, beta])
    return ops.sum(ops.square(a), axis=(0, 1, 2)), ops.sum(dx, axis=0), dgamma, dbeta


def test_relu6_overwrites_the_batch_norm_output_in_a_training_step():
    rng = np.random.default_rng(5)
    gamma = rng.uniform(0.5, 3.0, 16).astype("float32")
    beta = rng.standard_normal(16).astype("float32") * 2
    x = (rng.standard_normal((8, 40, 40, 16)) * 3 + 1).astype("float32")
    g = rng.standard_normal(x.shape).astype("float32")
    args = [keratron.ops.convert_to_tensor(a) for a in (x, gamma, beta, g)]
    f = keratron.function(_batch_norm_relu6_step)
    for _ in range(2):
        got, want = f(*args), _batch_norm_relu6_step(*args)
        for a, b in zip(got, want):
            assert np.array_equal(np.asarray(a), np.asarray(b))
    dump = f.get_concrete_graph(*args).dump()
    assert any("_relu6_(" in line and "[in place]" in line for line in dump.splitlines()), dump
    # Against float64: y = gamma * (x - mean) / sqrt(var + eps) + beta, relu6 mask off y.
    x64 = x.astype("float64")
    mean, var = x64.mean(axis=(0, 1, 2)), x64.var(axis=(0, 1, 2))
    xhat = (x64 - mean) / np.sqrt(var + 1e-3)
    y = gamma * xhat + beta
    gy = g * ((y > 0) & (y < 6))
    np.testing.assert_allclose(np.asarray(got[2]), (gy * xhat).sum(axis=(0, 1, 2)), rtol=1e-3)
    np.testing.assert_allclose(np.asarray(got[3]), gy.sum(axis=(0, 1, 2)), rtol=1e-3)
