"""Data-parallel strategies, named and used as `tf.distribute`'s.

One process per device, all running the same script (torchrun starts them). A model built
and compiled in `strategy.scope()` trains data-parallel in `fit`: every worker takes its
slice of each global batch, gradients are averaged with bucketed all-reduces inside the
optimizer step, and the weights stay identical because they start identical (broadcast from
worker 0 when `fit` starts) and receive identical updates.
"""

from __future__ import annotations

import contextlib
import enum
import threading

import numpy as np
import torch

from keratron.autodiff import tree
from keratron.autodiff.tensor import Tensor, convert_to_tensor
from keratron.distribute import _runtime, collectives

__all__ = [
    "Strategy",
    "MirroredStrategy",
    "MultiWorkerMirroredStrategy",
    "ReduceOp",
    "InputContext",
    "ReplicaContext",
    "CommunicationImplementation",
    "CommunicationOptions",
    "DistributedDataset",
    "ClusterResolver",
    "get_strategy",
    "has_strategy",
    "in_cross_replica_context",
    "get_replica_context",
]


class ReduceOp(enum.Enum):
    """How `Strategy.reduce` combines the workers' values."""

    SUM = "SUM"
    MEAN = "MEAN"


class CommunicationImplementation(enum.Enum):
    """Which transport carries the collectives: AUTO (NCCL for CUDA tensors, gloo for CPU
    ones), RING (gloo only) or NCCL (requires CUDA)."""

    AUTO = "AUTO"
    RING = "RING"
    NCCL = "NCCL"


class CommunicationOptions:
    """Collective options for `MultiWorkerMirroredStrategy` (tf.distribute's names).

    Args:
        bytes_per_pack: gradient bucket size in bytes; 0 picks 25 MiB.
        timeout_seconds: how long a collective waits for a peer before the job fails with
            `WorkerFailureError`; None picks 30 s.
        implementation: a `CommunicationImplementation` (or its name).

    Example:
        >>> opts = keratron.distribute.CommunicationOptions(
        ...     bytes_per_pack=4 << 20, timeout_seconds=60)
        >>> opts.bytes_per_pack, opts.timeout_seconds, opts.implementation.value
        (4194304, 60.0, 'AUTO')
    """

    def __init__(self, bytes_per_pack=0, timeout_seconds=None, implementation="AUTO"):
        if int(bytes_per_pack) < 0:
            raise ValueError(
                "CommunicationOptions: `bytes_per_pack` must be >= 0. "
                f"Received: bytes_per_pack={bytes_per_pack}"
            )
        if timeout_seconds is not None and float(timeout_seconds) <= 0:
            raise ValueError(
                "CommunicationOptions: `timeout_seconds` must be positive or None. "
                f"Received: timeout_seconds={timeout_seconds}"
            )
        try:
            impl = CommunicationImplementation(
                implementation.value
                if isinstance(implementation, CommunicationImplementation)
                else str(implementation).upper()
            )
        except ValueError:
            raise ValueError(
                "CommunicationOptions: `implementation` must be one of AUTO, RING, NCCL. "
                f"Received: implementation={implementation!r}"
            ) from None
        self.bytes_per_pack = int(bytes_per_pack)
        self.timeout_seconds = None if timeout_seconds is None else float(timeout_seconds)
        self.implementation = impl


class InputContext:
    """What an input function needs to know to read its share (tf.distribute's fields).

    Example:
        >>> keratron.distribute.InputContext(2, 0, 2).get_per_replica_batch_size(64)
        32
    """

    def __init__(self, num_input_pipelines=1, input_pipeline_id=0, num_replicas_in_sync=1):
        self.num_input_pipelines = int(num_input_pipelines)
        self.input_pipeline_id = int(input_pipeline_id)
        self.num_replicas_in_sync = int(num_replicas_in_sync)

    def get_per_replica_batch_size(self, global_batch_size: int) -> int:
        if global_batch_size % self.num_replicas_in_sync:
            raise ValueError(
                f"InputContext: the global batch size ({global_batch_size}) must be divisible "
                f"by the number of replicas ({self.num_replicas_in_sync})."
            )
        return global_batch_size // self.num_replicas_in_sync


class ClusterResolver:
    """This worker's place in the job, as TF's cluster resolvers report it."""

    def __init__(self, cluster: _runtime.Cluster):
        self._cluster = cluster
        self.task_type = "worker"
        self.task_id = cluster.rank
        self.rpc_layer = None

    @property
    def num_workers(self) -> int:
        return self._cluster.world_size

    def num_accelerators(self, task_type=None, task_id=None, config_proto=None) -> dict:
        del task_type, task_id, config_proto
        return {"GPU": 1} if torch.cuda.is_available() else {}

    def master(self, task_type=None, task_id=None, rpc_layer=None) -> str:
        del task_type, task_id, rpc_layer
        c = self._cluster
        return "" if c.master_addr is None else f"{c.master_addr}:{c.master_port}"


_scope_state = threading.local()


def _scope_stack() -> list:
    stack = getattr(_scope_state, "stack", None)
    if stack is None:
        stack = _scope_state.stack = []
    return stack


def _reduce_op(reduce_op) -> ReduceOp:
    if isinstance(reduce_op, ReduceOp):
        return reduce_op
    try:
        return ReduceOp(str(reduce_op).upper())
    except ValueError:
        raise ValueError(
            f"`reduce_op` must be ReduceOp.SUM, ReduceOp.MEAN or their names. "
            f"Received: reduce_op={reduce_op!r}"
        ) from None


def _leaf_tensor(value) -> torch.Tensor:
    return convert_to_tensor(value)._value


class _LocalBatch(tuple):
    """A batch that already is this worker's slice (from `experimental_distribute_dataset`):
    `fit` does not slice it again."""

    __slots__ = ()


def split_sizes(n: int, parts: int) -> list:
    """The row counts of each worker's slice of a batch of `n` rows split `parts` ways."""
    # Contiguous slices, sizes differing by at most one (the first ones take the remainder).
    base, extra = divmod(n, parts)
    return [base + (1 if r < extra else 0) for r in range(parts)]


def slice_rows(batch, lo: int, hi: int, n: int):
    """Rows `[lo, hi)` of every array of a (nested) batch of `n` rows."""

    def cut(t):
        if isinstance(t, Tensor):
            return Tensor(t._value[lo:hi])
        if isinstance(t, (np.ndarray, torch.Tensor)):
            return t[lo:hi]
        return t

    for t in tree.flatten(batch):
        if isinstance(t, (Tensor, np.ndarray, torch.Tensor)):
            if len(t.shape) == 0 or int(t.shape[0]) != n:
                raise ValueError(
                    "keratron.distribute: every array of a batch must have the batch size as "
                    f"its first dimension ({n}), to be split across replicas. Received an "
                    f"array of shape {tuple(t.shape)}."
                )
    return tree.map_structure(cut, batch)


def batch_rows(batch):
    """The first dimension of a (nested) batch's first array, or None."""
    for t in tree.flatten(batch):
        if isinstance(t, (Tensor, np.ndarray, torch.Tensor)) and len(t.shape):
            return int(t.shape[0])
    return None


class DistributedDataset:
    """Iterates a dataset of global batches, yielding this worker's slice of each.

    Made by `Strategy.experimental_distribute_dataset`. Every worker iterates the same
    global batches (give a shuffled dataset a seed, as with tf.distribute), and keeps rows
    `[lo, hi)` of each: contiguous slices whose sizes differ by at most one.
    """

    def __init__(self, dataset, strategy: Strategy):
        self._dataset = dataset
        self._strategy = strategy

    def __iter__(self):
        rank, world = self._strategy._rank, self._strategy.num_replicas_in_sync
        for batch in self._dataset:
            n = batch_rows(batch)
            if n is None or world == 1:
                yield batch
                continue
            sizes = split_sizes(n, world)
            lo = sum(sizes[:rank])
            local = slice_rows(batch, lo, lo + sizes[rank], n)
            yield _LocalBatch(local) if isinstance(local, (tuple, list)) else local


class ReplicaContext:
    """The per-replica view inside `Strategy.run` (tf.distribute's `ReplicaContext`)."""

    def __init__(self, strategy: Strategy):
        self.strategy = strategy

    @property
    def replica_id_in_sync_group(self) -> int:
        return self.strategy._rank

    @property
    def num_replicas_in_sync(self) -> int:
        return self.strategy.num_replicas_in_sync

    def all_reduce(self, reduce_op, value):
        """Combines `value` (a tensor or nested structure) over the replicas."""
        op = _reduce_op(reduce_op)
        return tree.map_structure(lambda v: self.strategy._reduce_leaf(op, v, None), value)


class Strategy:
    """Base class of the data-parallel strategies (see `MultiWorkerMirroredStrategy`)."""

    def __init__(self, communication_options=None):
        opts = communication_options or CommunicationOptions()
        if not isinstance(opts, CommunicationOptions):
            raise TypeError(
                f"{type(self).__name__}: `communication_options` must be a "
                f"CommunicationOptions. Received: {type(opts).__name__}"
            )
        implementation = {"AUTO": "auto", "RING": "ring", "NCCL": "nccl"}[opts.implementation.value]
        self._setup(
            _runtime.runtime(opts.timeout_seconds, implementation),
            opts.bytes_per_pack or collectives.DEFAULT_BUCKET_BYTES,
        )

    def _setup(self, rt: _runtime.Runtime, bucket_bytes: int) -> None:
        self._runtime = rt
        self._bucket_bytes = int(bucket_bytes)
        self._cluster = rt.cluster
        self._rank = self._cluster.rank
        self.cluster_resolver = ClusterResolver(self._cluster)
        # Per-step state the trainer sets (see keratron/distribute/hooks.py): this worker's
        # share of the global batch, and the sizes of all workers' slices.
        self._step_weight = None
        self._batch_split = None
        self._synced: dict = {}

    # ------------------------------------------------------------------ properties
    @property
    def num_replicas_in_sync(self) -> int:
        """The number of replicas (= worker processes) that train together."""
        return self._cluster.world_size

    @property
    def _distributed(self) -> bool:
        return self._cluster.world_size > 1

    @property
    def worker_index(self) -> int:
        """This worker's rank; 0 is the chief, which writes checkpoints and logs."""
        return self._rank

    @property
    def is_chief(self) -> bool:
        return self._rank == 0

    # ------------------------------------------------------------------ scope and run
    @contextlib.contextmanager
    def scope(self):
        """Models built and compiled in this scope train data-parallel under this strategy.

        Example:
            >>> strategy = keratron.distribute.MultiWorkerMirroredStrategy()
            >>> with strategy.scope():
            ...     model = keratron.Sequential([keratron.layers.Dense(1)])
            ...     model.compile(optimizer="sgd", loss="mse")
        """
        stack = _scope_stack()
        stack.append(self)
        try:
            yield self
        finally:
            stack.pop()

    def run(self, fn, args=(), kwargs=None, options=None):
        """Runs `fn(*args, **kwargs)` as this worker's replica (one per process): inside it,
        `optimizer.apply` averages gradients over the replicas and
        `get_replica_context()` is this replica's context.

        Example:
            >>> strategy = keratron.distribute.MirroredStrategy()
            >>> def train_step(batch):
            ...     return keratron.ops.mean(keratron.ops.square(batch))
            >>> loss = strategy.run(train_step, args=(np.array([1.0, 3.0]),))
            >>> float(strategy.reduce("MEAN", loss, axis=None))
            5.0
        """
        del options
        self._step_weight = None
        stack = _scope_stack()
        stack.append(self)
        _scope_state.replica = getattr(_scope_state, "replica", 0) + 1
        try:
            return fn(*args, **(kwargs or {}))
        finally:
            _scope_state.replica -= 1
            stack.pop()

    def experimental_local_results(self, value) -> tuple:
        """This worker's values of a `run` result: one replica per process, so `(value,)`."""
        return (value,)

    # ------------------------------------------------------------------ reductions
    def _reduce_leaf(self, op: ReduceOp, value, axis):
        t = _leaf_tensor(value)
        if axis is not None:
            axis = int(axis)
            count = torch.tensor(float(t.shape[axis]), dtype=torch.float64)
            t = t.sum(dim=axis)
        else:
            count = torch.tensor(1.0, dtype=torch.float64)
        if self._distributed:
            t, count = collectives.all_reduce_sum([t, count], what="Strategy.reduce")
        if op is ReduceOp.MEAN:
            dtype = t.dtype if t.is_floating_point() else torch.float32
            t = (t.to(torch.float64) / count).to(dtype)
        return Tensor(t)

    def reduce(self, reduce_op, value, axis=None):
        """Combines the replicas' `value`s (a tensor or nested structure) into one.

        With `axis`, each replica first reduces its value along that axis, and MEAN is then
        the mean over all elements of all replicas along it.

        Args:
            reduce_op: `ReduceOp.SUM` / `ReduceOp.MEAN` or "SUM" / "MEAN".
            value: this replica's value.
            axis: an axis to reduce across as well, or None.

        Example:
            >>> strategy = keratron.distribute.MirroredStrategy()  # N = 1 replica here
            >>> strategy.reduce("SUM", keratron.ops.ones((2,)), axis=None).numpy()  # N * [1, 1]
            array([1., 1.], dtype=float32)
            >>> float(strategy.reduce("MEAN", np.array([1.0, 2.0, 3.0, 6.0]), axis=0))
            3.0
        """
        op = _reduce_op(reduce_op)
        return tree.map_structure(lambda v: self._reduce_leaf(op, v, axis), value)

    def gather(self, value, axis=0):
        """Concatenates the replicas' `value`s along `axis`, replica 0 first.

        Example:
            >>> strategy = keratron.distribute.MirroredStrategy()  # N = 1 replica here
            >>> strategy.gather(keratron.ops.ones((2, 3)), axis=0).shape  # (2 * N, 3)
            (2, 3)
        """

        def one(v):
            t = _leaf_tensor(v)
            if not self._distributed:
                return Tensor(t)
            moved = t.movedim(axis, 0)
            sizes = collectives.all_gather_ints([moved.shape[0]], what="Strategy.gather")
            out = collectives.all_gather_rows(moved, [int(s) for s in sizes[:, 0]])
            return Tensor(out.movedim(0, axis))

        return tree.map_structure(one, value)

    # ------------------------------------------------------------------ input
    def experimental_distribute_dataset(self, dataset, options=None):
        """This worker's view of a dataset of global batches: each batch's slice for this
        worker (see `DistributedDataset`).

        Example:
            >>> strategy = keratron.distribute.MirroredStrategy()  # N = 1 replica here
            >>> ds = keratron.data.Dataset.from_tensor_slices((np.ones((128, 2)), np.zeros(128)))
            >>> dist_ds = strategy.experimental_distribute_dataset(ds.batch(64))
            >>> for x, y in dist_ds:  # 64 / N rows each
            ...     print(strategy.run(lambda x, y: tuple(x.shape), args=(x, y)))
            (64, 2)
            (64, 2)
        """
        del options
        if not hasattr(dataset, "__iter__"):
            raise TypeError(
                "experimental_distribute_dataset: `dataset` must be iterable (a "
                f"keratron.data.Dataset of batches). Received: {type(dataset).__name__}"
            )
        return DistributedDataset(dataset, self)

    def distribute_datasets_from_function(self, dataset_fn, options=None):
        """Calls `dataset_fn(InputContext)` on this worker; the dataset it returns must
        already be this worker's share, batched per replica."""
        del options
        ctx = InputContext(self.num_replicas_in_sync, self._rank, self.num_replicas_in_sync)
        return dataset_fn(ctx)

    # ------------------------------------------------------------------ helpers for fit
    def _aggregate_gradients(self, grads: list) -> list:
        weight = self._step_weight
        if weight is None:
            weight = 1.0 / self.num_replicas_in_sync
        return collectives.all_reduce_gradients(grads, weight, self._bucket_bytes)

    def __repr__(self):
        return f"{type(self).__name__}(num_replicas_in_sync={self.num_replicas_in_sync})"


class MultiWorkerMirroredStrategy(Strategy):
    """Synchronous data parallelism over worker processes (tf.distribute's name).

    The job is described by torchrun's environment (RANK, WORLD_SIZE, LOCAL_RANK,
    MASTER_ADDR, MASTER_PORT); without it this process is a job of one. Collectives run on
    gloo for CPU tensors and NCCL for CUDA tensors, with a timeout: a worker that dies makes
    the others stop with `WorkerFailureError` instead of hanging.

    Args:
        cluster_resolver: None (the environment describes the cluster).
        communication_options: a `CommunicationOptions` (bucket size, timeout, transport).

    Example:
        >>> strategy = keratron.distribute.MultiWorkerMirroredStrategy()
        >>> with strategy.scope():
        ...     model = keratron.Sequential([keratron.Input((3,)), keratron.layers.Dense(1)])
        ...     model.compile(optimizer="sgd", loss="mse")
        >>> x, y = np.ones((128, 3)), np.ones((128, 1))
        >>> history = model.fit(x, y, batch_size=64, verbose=0)  # 64 is the global batch
        >>> len(history.history["loss"])
        1
    """

    def __init__(self, cluster_resolver=None, communication_options=None):
        if cluster_resolver is not None and not isinstance(cluster_resolver, ClusterResolver):
            raise ValueError(
                "MultiWorkerMirroredStrategy: `cluster_resolver` must be None; the cluster is "
                "read from torchrun's environment (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT). "
                f"Received: {type(cluster_resolver).__name__}"
            )
        super().__init__(communication_options)


class MirroredStrategy(Strategy):
    """Synchronous data parallelism over the devices of one machine, one process per device
    (torchrun's `--nproc_per_node`); on a machine without GPUs, a single process.

    Args:
        devices: None, or the devices of the job (their number must match WORLD_SIZE).
        cross_device_ops: None (the collectives are torch.distributed's).

    Example:
        >>> strategy = keratron.distribute.MirroredStrategy()
        >>> strategy.num_replicas_in_sync
        1
    """

    def __init__(self, devices=None, cross_device_ops=None):
        if cross_device_ops is not None:
            raise ValueError(
                "MirroredStrategy: `cross_device_ops` must be None; gradients are all-reduced "
                f"with torch.distributed. Received: {cross_device_ops!r}"
            )
        super().__init__(None)
        if devices is not None:
            devices = [devices] if isinstance(devices, str) else list(devices)
            if len(devices) != self.num_replicas_in_sync:
                raise ValueError(
                    f"MirroredStrategy: {len(devices)} devices were given, but the job has "
                    f"{self.num_replicas_in_sync} worker process(es), one per device. Launch "
                    f"with `torchrun --nproc_per_node={len(devices)}`. Received: "
                    f"devices={devices}"
                )
        self.extended_devices = tuple(devices) if devices is not None else None


class _DefaultStrategy(Strategy):
    """The strategy outside any scope: one replica, no process group."""

    def __init__(self):  # no environment, no communication
        rt = _runtime.Runtime(_runtime.Cluster(), _runtime.DEFAULT_TIMEOUT_S, "auto")
        self._setup(rt, collectives.DEFAULT_BUCKET_BYTES)


_default_strategy = None


def get_strategy() -> Strategy:
    """The strategy of the innermost `scope()`, or the default one-replica strategy.

    Example:
        >>> keratron.distribute.get_strategy().num_replicas_in_sync
        1
    """
    global _default_strategy
    stack = _scope_stack()
    if stack:
        return stack[-1]
    if _default_strategy is None:
        _default_strategy = _DefaultStrategy()
    return _default_strategy


def has_strategy() -> bool:
    """Whether a strategy's `scope()` is active in this thread."""
    return bool(_scope_stack())


def in_cross_replica_context() -> bool:
    """True in a strategy's scope but outside `Strategy.run`."""
    return has_strategy() and not getattr(_scope_state, "replica", 0)


def get_replica_context() -> ReplicaContext | None:
    """The current replica's context: inside `Strategy.run`, or (one replica) outside any
    scope; None in cross-replica context (a scope, outside `run`)."""
    if in_cross_replica_context():
        return None
    return ReplicaContext(get_strategy())


def strategy_in_scope() -> Strategy | None:
    """The innermost scope's strategy, or None."""
    stack = _scope_stack()
    return stack[-1] if stack else None
