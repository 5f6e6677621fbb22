"""What the trainer and the optimizer call so that `fit` / `evaluate` / `predict` run
data-parallel under a strategy. Every function is the identity (or a no-op) for a model
without a multi-worker strategy, so the single-process paths stay as they were.

The call sites, in order of a `fit`:

* `Trainer.__init__` / `compile`: `strategy_in_scope`, `attach` (the model and its optimizer
  remember the strategy of the scope they were made in; synchronized BatchNormalization
  layers get their cross-replica moments);
* `fit`, after `on_train_begin` (and so after BackupAndRestore has restored): `sync_replicas`
  broadcasts worker 0's weights, optimizer state and random state;
* `_callback_list`: `worker_callbacks` keeps the progress bar and the writing callbacks on
  worker 0 only;
* each step: `local_batch` slices the global batch; `Optimizer.apply` calls
  `aggregate_gradients`; after the steps, `train_logs` / `test_logs` give the global metrics,
  and `gather_outputs` puts predictions back together;
* epoch logs: `metrics_result` (metric states summed over workers before `result()`).
"""

from __future__ import annotations

import random as python_random
import warnings

import numpy as np
import torch

from keratron.autodiff import tree
from keratron.autodiff.tensor import Tensor, mark_written
from keratron.distribute import collectives
from keratron.distribute.strategy import (
    _LocalBatch,
    batch_rows,
    slice_rows,
    split_sizes,
    strategy_in_scope,
)

__all__ = [
    "strategy_in_scope",
    "model_strategy",
    "attach",
    "sync_replicas",
    "worker_callbacks",
    "local_batch",
    "aggregate_gradients",
    "train_logs",
    "test_logs",
    "metrics_result",
    "gather_outputs",
]

# Callbacks whose only effect is writing (files, the console, a server): worker 0 runs them.
_CHIEF_ONLY = frozenset(
    {"ProgbarLogger", "ModelCheckpoint", "CSVLogger", "TensorBoard", "RemoteMonitor"}
)


def model_strategy(model):
    """The model's strategy when it has several workers, else None."""
    s = model.__dict__.get("_distribute_strategy")
    return s if s is not None and s._distributed else None


def attach(model) -> None:
    """At `compile`: the model (and its optimizer) take the strategy of the active scope, or
    keep the one of the scope the model was created in."""
    s = strategy_in_scope() or model.__dict__.get("_distribute_strategy")
    if s is None:
        return
    model._distribute_strategy = s
    if getattr(model, "optimizer", None) is not None:
        model.optimizer._distribute_strategy = s
    if s._distributed:
        _install_sync_batch_norm(model)


def _install_sync_batch_norm(model) -> set:
    """Serves `_cross_replica_moments` on the model's synchronized BatchNormalization layers
    (an instance attribute overriding the single-process method); returns the ids of their
    variables, which are identical on all workers by construction."""
    ids = set()
    for layer in model._flatten_layers():
        if getattr(layer, "synchronized", False) and hasattr(layer, "_cross_replica_moments"):
            object.__setattr__(layer, "_cross_replica_moments", collectives.cross_replica_moments)
            ids.update(id(v) for v in layer.weights)
    return ids


def _replicated_variables(model) -> list:
    out, seen = [], set()
    opt = getattr(model, "optimizer", None)
    for v in list(model.variables) + (list(opt.variables) if opt is not None else []):
        if id(v) not in seen:
            seen.add(id(v))
            out.append(v)
    return out


def _sync_rng() -> None:
    # Shuffling (numpy), initializer seeds (Python's random) and keratron's global seed
    # generator then draw the same values on every worker, so every worker walks the same
    # global batches and lazily built layers start equal.
    name, keys, pos, has_gauss, cached = np.random.get_state()
    version, py_ints, gauss_next = python_random.getstate()
    ints = torch.tensor(
        [int(k) for k in keys] + [pos, has_gauss] + list(py_ints) + [gauss_next is not None],
        dtype=torch.int64,
    )
    floats = torch.tensor([cached, gauss_next or 0.0], dtype=torch.float64)
    collectives.broadcast_([ints, floats], what="random state broadcast")
    ints, floats = ints.tolist(), floats.tolist()
    n = len(keys)
    np.random.set_state(
        (name, np.array(ints[:n], dtype=np.uint32), ints[n], ints[n + 1], floats[0])
    )
    py = ints[n + 2 : -1]
    python_random.setstate((version, tuple(py), floats[1] if ints[-1] else None))
    from keratron import random as keratron_random

    keratron_random.reset_global_seed_generator()


def _broadcast_variables(s, model, what) -> None:
    variables = _replicated_variables(model)
    local = [len(variables), sum(v._value.numel() for v in variables)]
    seen = collectives.all_gather_ints(local, what=what)
    if not (seen == seen[0]).all():
        detail = ", ".join(
            f"worker {r}: {int(c)} variables / {int(e)} values" for r, (c, e) in enumerate(seen)
        )
        raise ValueError(
            f"keratron.distribute: the workers' models differ ({detail}); every worker must "
            "build the same model."
        )
    collectives.broadcast_([v._value for v in variables], src=0, what=what)
    mark_written(variables)
    s._synced[id(model)] = len(variables)


def sync_replicas(model, training=True) -> None:
    """Makes every worker's model equal to worker 0's: weights, optimizer state and (for
    training) the random state. Called at the start of `fit`, and of `evaluate` / `predict`
    when the model was never synchronised."""
    s = model_strategy(model)
    if s is None or (not training and id(model) in s._synced):
        return
    _install_sync_batch_norm(model)
    if training:
        _sync_rng()
    _broadcast_variables(s, model, "weight broadcast from worker 0")


def worker_callbacks(model, callbacks, verbose):
    """On workers other than 0: no progress bar, no writing callbacks, and BackupAndRestore
    only restores. Returns `(callbacks, verbose)`."""
    s = model_strategy(model)
    if s is None or s.is_chief or type(callbacks).__name__ == "CallbackList":
        return callbacks, verbose
    kept = []
    for cb in callbacks or []:
        names = {k.__name__ for k in type(cb).__mro__}
        if names & _CHIEF_ONLY:
            continue
        kept.append(_RestoreOnly(cb) if "BackupAndRestore" in names else cb)
    return kept, 0


_restore_only_cls = None


def _RestoreOnly(inner):  # noqa: N802 - reads as the class it instantiates
    """Wraps a BackupAndRestore for a worker other than 0: it restores, worker 0 writes."""
    global _restore_only_cls
    if _restore_only_cls is None:
        from keratron.callbacks import Callback

        class RestoreOnly(Callback):
            def __init__(self, inner):
                super().__init__()
                self.inner = inner

            def set_params(self, params):
                super().set_params(params)
                self.inner.set_params(params)

            def set_model(self, model):
                super().set_model(model)
                self.inner.set_model(model)

            def on_train_begin(self, logs=None):
                self.inner.on_train_begin(logs)

        _restore_only_cls = RestoreOnly
    return _restore_only_cls(inner)


def local_batch(model, batch, mode: str):
    """This worker's slice of a global batch, or None when this worker skips the batch.

    Slices are contiguous, sizes differing by at most one; the worker's share (n_r / n)
    weights its gradients. A batch with fewer rows than workers is skipped in training (on
    every worker), evaluated by worker 0 alone, and predicted whole by every worker.
    """
    s = model_strategy(model)
    if s is None:
        return batch
    s._runtime.check()
    world, rank = s.num_replicas_in_sync, s._rank
    s._batch_split = s._step_weight = None
    if isinstance(batch, _LocalBatch):
        sizes = [int(v) for v in collectives.all_gather_ints([batch_rows(batch) or 0])[:, 0]]
        local = tuple(batch)
    else:
        n = batch_rows(batch)
        if n is None:
            return batch
        sizes = split_sizes(n, world)
        local = None
    if min(sizes) == 0:
        if mode == "train":
            if not getattr(s, "_warned_small_batch", False):
                s._warned_small_batch = True
                warnings.warn(
                    f"keratron.distribute: a batch of {sum(sizes)} samples cannot be split "
                    f"over {world} replicas; batches smaller than the number of replicas are "
                    "skipped in training.",
                    stacklevel=3,
                )
            return None
        if mode == "test":
            if local is not None:
                return local if sizes[rank] else None
            return batch if rank == 0 else None
        if local is not None:
            raise ValueError(
                "keratron.distribute: predict received a pre-split batch with no rows on "
                f"some worker (sizes {sizes}); pass the dataset of global batches instead."
            )
        return batch
    s._batch_split = sizes
    s._step_weight = sizes[rank] / sum(sizes)
    if local is not None:
        return local
    lo = sum(sizes[:rank])
    return slice_rows(batch, lo, lo + sizes[rank], sum(sizes))


def aggregate_gradients(optimizer, grads: list) -> list:
    """The optimizer's hook: under a multi-worker strategy, the weighted sum of every
    worker's gradients (the global batch's gradient); otherwise `grads` unchanged."""
    s = optimizer.__dict__.get("_distribute_strategy") or strategy_in_scope()
    if s is None or not s._distributed:
        return grads
    return s._aggregate_gradients(grads)


def _snapshot(value):
    if isinstance(value, Tensor):
        return Tensor(value._value.clone())
    if isinstance(value, dict):
        return {k: _snapshot(v) for k, v in value.items()}
    return value


def metrics_result(model) -> dict:
    """`model.get_metrics_result()` computed from metric states summed over the workers
    (each worker's own state is left as it was)."""
    s = model_strategy(model)
    if s is None:
        return model.get_metrics_result()
    values = [v._value for v in model.metrics_variables]
    if not values:
        return model.get_metrics_result()
    saved = [t.clone() for t in values]
    for t, total in zip(values, collectives.all_reduce_sum(values, what="metric reduction")):
        t.copy_(total)
    try:
        return {k: _snapshot(v) for k, v in model.get_metrics_result().items()}
    finally:
        for t, mine in zip(values, saved):
            t.copy_(mine)


def _average_replica_state(s, model) -> None:
    # Non-trainable float state that each replica updates from its own slice (moving
    # statistics of unsynchronized BatchNormalization) is averaged, as tf.distribute's MEAN
    # aggregation does; the moving average is linear, so this equals averaging at read time.
    skip = s.__dict__.setdefault("_identical_ids", {}).get(id(model))
    if skip is None:
        skip = s._identical_ids[id(model)] = _install_sync_batch_norm(model)
    state = [
        v
        for v in model.non_trainable_variables
        if id(v) not in skip and v._value.is_floating_point()
    ]
    if not state:
        return
    world = float(s.num_replicas_in_sync)
    summed = collectives.all_reduce_sum([v._value for v in state], what="replica state mean")
    for v, total in zip(state, summed):
        v._value.copy_(total / world)
    mark_written(state)


def train_logs(model, logs):
    """After a group of train steps: variables created during the steps (lazily built
    layers, optimizer slots) are broadcast once, replica state is averaged, and the logs
    are the global metrics (unless a custom `train_step` returned other logs)."""
    s = model_strategy(model)
    if s is None:
        return logs
    if s._synced.get(id(model)) != len(_replicated_variables(model)):
        _broadcast_variables(s, model, "broadcast of new variables")
    _average_replica_state(s, model)
    return test_logs(model, logs)


def test_logs(model, logs):
    """The global metrics as the logs of a group of test steps."""
    if model_strategy(model) is None:
        return logs
    if not logs:  # every batch of the group was skipped on this worker
        return metrics_result(model)
    return model._get_metrics_result_or_logs(logs)


def gather_outputs(model, outputs):
    """The outputs of the whole global batch, in order, on every worker."""
    s = model_strategy(model)
    if s is None or s._batch_split is None:
        return outputs
    sizes = s._batch_split

    def gather(t):
        if isinstance(t, Tensor):
            return Tensor(collectives.all_gather_rows(t._value, sizes, what="predict gather"))
        return t

    return tree.map_structure(gather, outputs)
