"""keratron.distribute in one process: the environment, the API, and the pieces of the
multi-worker path that can be checked without peers (batch slicing, callback filtering,
bucketing, the differentiable cross-replica sum)."""

import contextlib
import warnings

import numpy as np
import pytest
import torch

import keratron as kt
from keratron import distribute
from keratron.distribute import _runtime, collectives, hooks
from keratron.distribute.strategy import Strategy, _LocalBatch, split_sizes
from tests.gradcheck import check_against_torch, check_grads


# ---------------------------------------------------------------------- environment
def test_environment_without_torchrun_is_a_job_of_one():
    c = _runtime.cluster_from_environment({})
    assert (c.rank, c.world_size, c.local_rank, c.is_chief) == (0, 1, 0, True)


def test_environment_from_torchrun_variables():
    env = {
        "RANK": "3",
        "WORLD_SIZE": "4",
        "LOCAL_RANK": "1",
        "MASTER_ADDR": "10.0.0.1",
        "MASTER_PORT": "29500",
    }
    c = _runtime.cluster_from_environment(env)
    assert (c.rank, c.world_size, c.local_rank) == (3, 4, 1)
    assert (c.master_addr, c.master_port, c.is_chief) == ("10.0.0.1", 29500, False)


@pytest.mark.parametrize(
    "env, match",
    [
        ({"WORLD_SIZE": "2", "MASTER_ADDR": "h", "MASTER_PORT": "1"}, "RANK is not"),
        ({"WORLD_SIZE": "2", "RANK": "2", "MASTER_ADDR": "h", "MASTER_PORT": "1"}, "RANK must"),
        ({"WORLD_SIZE": "2", "RANK": "1"}, "MASTER_ADDR and MASTER_PORT"),
        ({"WORLD_SIZE": "two"}, "WORLD_SIZE must be an integer"),
        ({"WORLD_SIZE": "0"}, "at least 1"),
    ],
)
def test_environment_errors(env, match):
    with pytest.raises(ValueError, match=match):
        _runtime.cluster_from_environment(env)


# ---------------------------------------------------------------------- API, one replica
def test_strategies_in_one_process(monkeypatch):
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    s = distribute.MultiWorkerMirroredStrategy()
    m = distribute.MirroredStrategy()
    assert s.num_replicas_in_sync == m.num_replicas_in_sync == 1
    assert s.cluster_resolver.task_type == "worker" and s.cluster_resolver.task_id == 0
    assert not distribute.has_strategy()
    assert distribute.get_strategy().num_replicas_in_sync == 1
    with s.scope():
        assert distribute.has_strategy() and distribute.get_strategy() is s
        assert distribute.in_cross_replica_context()
        assert distribute.get_replica_context() is None
        rid = s.run(
            lambda a, b: (distribute.get_replica_context().replica_id_in_sync_group, a + b), (1, 2)
        )
        assert rid == (0, 3)
    assert s.experimental_local_results(5) == (5,)


def test_reduce_and_gather_one_replica():
    s = distribute.MultiWorkerMirroredStrategy()
    np.testing.assert_allclose(s.reduce("SUM", np.array([1.0, 2.0])).numpy(), [1.0, 2.0])
    np.testing.assert_allclose(
        s.reduce(distribute.ReduceOp.MEAN, np.arange(6.0).reshape(2, 3), axis=0).numpy(),
        [1.5, 2.5, 3.5],
    )
    out = s.reduce("SUM", {"a": np.ones(2), "b": [np.ones(1)]}, axis=0)
    assert float(out["a"].numpy()) == 2.0 and float(out["b"][0].numpy()) == 1.0
    assert s.gather(np.ones((2, 3)), axis=1).shape == (2, 3)
    with pytest.raises(ValueError, match="reduce_op"):
        s.reduce("MAX", np.ones(2))


def test_datasets_one_replica():
    s = distribute.MirroredStrategy()
    ds = kt.data.Dataset.from_tensor_slices(np.arange(6.0)).batch(4)
    assert [b.numpy().tolist() for b in s.experimental_distribute_dataset(ds)] == [
        [0.0, 1.0, 2.0, 3.0],
        [4.0, 5.0],
    ]
    ctx = s.distribute_datasets_from_function(lambda c: c)
    assert isinstance(ctx, distribute.InputContext)
    assert (ctx.num_input_pipelines, ctx.input_pipeline_id, ctx.num_replicas_in_sync) == (1, 0, 1)
    assert distribute.InputContext(2, 1, 2).get_per_replica_batch_size(64) == 32
    with pytest.raises(ValueError, match="divisible"):
        distribute.InputContext(2, 1, 2).get_per_replica_batch_size(63)
    with pytest.raises(TypeError, match="iterable"):
        s.experimental_distribute_dataset(3)


def test_argument_errors():
    with pytest.raises(ValueError, match="cross_device_ops"):
        distribute.MirroredStrategy(cross_device_ops="nccl")
    with pytest.raises(ValueError, match="1 worker process"):
        distribute.MirroredStrategy(devices=["/gpu:0", "/gpu:1"])
    with pytest.raises(ValueError, match="cluster_resolver"):
        distribute.MultiWorkerMirroredStrategy(cluster_resolver="grpc://x")
    with pytest.raises(TypeError, match="CommunicationOptions"):
        distribute.MultiWorkerMirroredStrategy(communication_options={"timeout": 3})
    with pytest.raises(ValueError, match="implementation"):
        distribute.experimental.CommunicationOptions(implementation="mpi")
    with pytest.raises(ValueError, match="timeout_seconds"):
        distribute.experimental.CommunicationOptions(timeout_seconds=0)
    opts = distribute.experimental.CommunicationOptions(4096, 12, "ring")
    assert opts.implementation is distribute.CommunicationImplementation.RING


def test_fit_in_scope_with_one_replica_is_plain_fit():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(24, 5)).astype("float32")
    y = rng.normal(size=(24, 1)).astype("float32")

    def build():
        kt.utils.set_random_seed(3)
        model = kt.Sequential(
            [
                kt.Input((5,)),
                kt.layers.Dense(4),
                kt.layers.BatchNormalization(synchronized=True),
                kt.layers.Dense(1),
            ]
        )
        model.compile(optimizer="sgd", loss="mse")
        return model

    with distribute.MultiWorkerMirroredStrategy().scope():
        a = build()
    assert a.distribute_strategy.num_replicas_in_sync == 1
    b = build()
    ha = a.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0)
    hb = b.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0)
    assert ha.history["loss"] == hb.history["loss"]
    for wa, wb in zip(a.get_weights(), b.get_weights()):
        np.testing.assert_array_equal(wa, wb)


# ---------------------------------------------------------------------- cross-replica sum
def test_cross_replica_sum_one_replica_gradients():
    x = np.random.default_rng(1).normal(size=(3, 4))
    check_grads(lambda t: kt.ops.sin(distribute.cross_replica_sum(t)), [x])
    check_against_torch(lambda t: distribute.cross_replica_sum(t) * 2.0, lambda t: t * 2.0, [x])


def test_cross_replica_moments_match_batch_moments_and_trace():
    x = np.random.default_rng(2).normal(size=(10, 3)).astype("float32")
    t = kt.convert_to_tensor(x)
    mean, var = kt.ops.mean(t, axis=0), kt.ops.var(t, axis=0)
    gm, gv = collectives.cross_replica_moments(mean, var, 10)
    np.testing.assert_allclose(gm.numpy(), x.mean(0), atol=1e-6)
    np.testing.assert_allclose(gv.numpy(), x.var(0), atol=1e-5)

    @kt.function
    def traced(v):
        m, s = collectives.cross_replica_moments(
            kt.ops.mean(v, axis=0), kt.ops.var(v, axis=0), kt.ops.full((3,), 10.0)
        )
        return m + s

    np.testing.assert_allclose(traced(t).numpy(), x.mean(0) + x.var(0), atol=1e-5)


# ---------------------------------------------------------------------- bucketing
class _FakeRuntime:
    """A 'distributed' runtime whose collectives are recorded, not sent."""

    def __init__(self, world=2, rank=0):
        self.cluster = _runtime.Cluster(rank, world, rank, "127.0.0.1", 1)
        self.distributed = True
        self.failure = None

    @contextlib.contextmanager
    def collective(self, what):
        yield

    def check(self):
        pass


def test_gradient_buckets_fill_last_first_and_are_weighted(monkeypatch):
    launched = []

    class Work:
        def wait(self):
            pass

    def fake_all_reduce(t, async_op=False):
        launched.append(t.clone())
        t.mul_(2.0)  # as if the other worker sent the same weighted values
        return Work()

    monkeypatch.setattr(_runtime, "_runtime", _FakeRuntime())
    monkeypatch.setattr(collectives.dist, "all_reduce", fake_all_reduce)
    grads = [torch.full((n,), float(i + 1)) for i, n in enumerate([4, 2, 3, 8, 1])]
    grads.append(torch.ones(2, dtype=torch.float64))
    out = collectives.all_reduce_gradients(grads, weight=0.25, bucket_bytes=20)
    # float32, last first: [1] (4 B) + [8] (32 B) -> launched; [3] + [2] (20 B) -> launched;
    # then the unfilled buckets: the float64 gradient's own, and [4].
    sizes = [t.numel() for t in launched]
    assert sizes == [9, 5, 2, 4], sizes
    assert launched[2].dtype == torch.float64
    assert launched[0][:1].tolist() == [5 * 0.25]  # the last gradient leads its bucket
    for g, o in zip(grads, out):
        assert o.shape == g.shape and o.dtype == g.dtype
        torch.testing.assert_close(o, g * 0.5)


# ---------------------------------------------------------------------- the trainer hooks
def _fake_strategy(monkeypatch, rank, world=2):
    s = Strategy.__new__(Strategy)
    rt = _runtime.Runtime(_runtime.Cluster(), 30.0, "auto")
    rt.cluster = _runtime.Cluster(rank, world, rank, "127.0.0.1", 1)
    s._setup(rt, 1 << 20)
    model = kt.Sequential([kt.Input((2,)), kt.layers.Dense(1)])
    model._distribute_strategy = s
    return s, model


def test_local_batch_slices_contiguously(monkeypatch):
    s, model = _fake_strategy(monkeypatch, rank=1)
    x = kt.convert_to_tensor(np.arange(14.0).reshape(7, 2))
    y = kt.convert_to_tensor(np.arange(7.0))
    lx, ly = hooks.local_batch(model, (x, y), "train")
    assert ly.numpy().tolist() == [4.0, 5.0, 6.0]  # sizes [4, 3]: worker 1 takes rows 4..6
    assert s._batch_split == [4, 3] and s._step_weight == pytest.approx(3 / 7)
    assert lx.shape == (3, 2)
    assert split_sizes(10, 4) == [3, 3, 2, 2]
    with pytest.raises(ValueError, match="first dimension"):
        hooks.local_batch(model, (x, kt.convert_to_tensor(np.arange(6.0))), "train")


def test_local_batch_with_fewer_rows_than_workers(monkeypatch):
    s, model = _fake_strategy(monkeypatch, rank=1)
    one = (kt.convert_to_tensor(np.ones((1, 2))), kt.convert_to_tensor(np.ones(1)))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert hooks.local_batch(model, one, "train") is None
    assert any("skipped in training" in str(w.message) for w in caught)
    assert hooks.local_batch(model, one, "test") is None  # worker 0 evaluates it alone
    assert hooks.local_batch(model, one, "predict") is one  # everyone predicts it whole
    assert s._batch_split is None
    _, model0 = _fake_strategy(monkeypatch, rank=0)
    assert hooks.local_batch(model0, one, "test") is one


def test_pre_split_batches_are_not_split_again(monkeypatch):
    s, model = _fake_strategy(monkeypatch, rank=0)
    monkeypatch.setattr(
        collectives, "all_gather_ints", lambda values, what="": np.array([[3], [2]])
    )
    batch = _LocalBatch((kt.convert_to_tensor(np.ones((3, 2))),))
    local = hooks.local_batch(model, batch, "train")
    assert local[0].shape == (3, 2)
    assert s._batch_split == [3, 2] and s._step_weight == pytest.approx(3 / 5)


def test_worker_callbacks_keep_writers_on_worker_zero(monkeypatch, tmp_path):
    cbs = [
        kt.callbacks.CSVLogger(str(tmp_path / "log.csv")),
        kt.callbacks.ModelCheckpoint(str(tmp_path / "w.weights.h5"), save_weights_only=True),
        kt.callbacks.EarlyStopping(monitor="loss"),
        kt.callbacks.BackupAndRestore(str(tmp_path / "backup")),
        kt.callbacks.ProgbarLogger(),
    ]
    _, chief = _fake_strategy(monkeypatch, rank=0)
    assert hooks.worker_callbacks(chief, cbs, 1) == (cbs, 1)
    _, other = _fake_strategy(monkeypatch, rank=1)
    kept, verbose = hooks.worker_callbacks(other, cbs, 1)
    assert verbose == 0
    assert kept[0] is cbs[2]
    assert len(kept) == 2 and kept[1].inner is cbs[3]
    # The restore-only wrapper restores but never writes a backup.
    kept[1].set_model(other)
    kept[1].on_epoch_end(0, {"loss": 1.0})
    assert not (tmp_path / "backup").exists()


def test_watchdog_failure_is_raised_at_the_next_step(monkeypatch):
    s, model = _fake_strategy(monkeypatch, rank=0)
    s._runtime.failure = "worker 1 of 2 stopped sending heartbeats 31 s ago"
    with pytest.raises(distribute.WorkerFailureError, match="worker 0 of 2 is stopping: worker 1"):
        hooks.local_batch(model, (kt.convert_to_tensor(np.ones((4, 2))),), "train")


def test_transport_errors_become_worker_failures():
    rt = _runtime.Runtime(_runtime.Cluster(), 30.0, "auto")
    with pytest.raises(distribute.WorkerFailureError, match="during 'gradient all-reduce'"):
        with rt.collective("gradient all-reduce"):
            raise RuntimeError("[gloo] Connection closed by peer [127.0.0.1]:5000")
    with pytest.raises(RuntimeError, match="shape mismatch"):
        with rt.collective("gradient all-reduce"):
            raise RuntimeError("shape mismatch")
    assert rt.collective_started is None


def test_model_made_in_scope_keeps_its_strategy():
    s = distribute.MultiWorkerMirroredStrategy()
    with s.scope():
        model = kt.Sequential([kt.Input((2,)), kt.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")  # outside the scope, as Keras allows
    assert model.distribute_strategy is s and model.optimizer._distribute_strategy is s
    other = kt.Sequential([kt.Input((2,)), kt.layers.Dense(1)])
    other.compile(optimizer="sgd", loss="mse")
    assert other.distribute_strategy is distribute.get_strategy()
    assert "_distribute_strategy" not in other.optimizer.__dict__
