"""What `Estimator.train` / `evaluate` call to run data-parallel under torchrun's environment.

An Estimator trains data-parallel when its `RunConfig` has `train_distribute` (a strategy),
or when the environment describes several workers (then a `MultiWorkerMirroredStrategy` over
that environment is used, as TF_CONFIG makes a TensorFlow Estimator multi-worker). Then:

* every worker reads the same `input_fn` and keeps its slice of each global batch (an
  `input_fn` that takes `input_context` gets an `InputContext` and returns its own share,
  which is not sliced again);
* after the variables are restored or initialised, worker 0's values are broadcast;
* gradients are averaged in the optimizer step (the loop runs in the strategy's scope);
* worker 0 alone writes checkpoints and summaries;
* evaluation metric states are summed over the workers before their results are read.

Every function is a no-op for an Estimator of one worker.
"""

from __future__ import annotations

import contextlib

from keratron.autodiff.tensor import mark_written
from keratron.distribute import collectives
from keratron.distribute.strategy import (
    InputContext,
    MultiWorkerMirroredStrategy,
    Strategy,
    batch_rows,
    slice_rows,
    split_sizes,
)
from keratron.estimator._tracing import current

__all__ = [
    "strategy_for",
    "scope",
    "input_context",
    "local_batches",
    "sync_variables",
    "is_chief",
    "summary_writer",
    "reduce_metrics",
]


def strategy_for(estimator, mode="train"):
    """The estimator's multi-worker strategy for `mode` ("train" or "eval"), or None."""
    config = estimator.config
    given = config.eval_distribute if mode == "eval" else None
    given = given or config.train_distribute
    if given is not None and not isinstance(given, Strategy):
        raise TypeError(
            "RunConfig: `train_distribute` / `eval_distribute` must be a keratron.distribute "
            f"strategy. Received: {type(given).__name__}"
        )
    s = given
    if s is None and config.num_worker_replicas > 1:
        s = estimator.__dict__.get("_distribute_strategy")
        if s is None:
            s = estimator.__dict__["_distribute_strategy"] = MultiWorkerMirroredStrategy()
    return s if s is not None and s._distributed else None


def scope(estimator, mode):
    """The strategy's scope (optimizer steps inside it average gradients), or a no-op."""
    s = strategy_for(estimator, mode)
    return s.scope() if s is not None else contextlib.nullcontext()


def input_context(estimator):
    """The `InputContext` passed to an `input_fn` that asks for one (None with one worker).
    Its batches are then taken as this worker's own."""
    s = strategy_for(estimator, "eval" if _mode(estimator) == "eval" else "train")
    if s is None:
        return None
    estimator.__dict__["_input_pre_split"] = True
    return InputContext(s.num_replicas_in_sync, s.worker_index, s.num_replicas_in_sync)


def _mode(estimator):
    del estimator
    return current.mode


def local_batches(estimator, batches, mode):
    """This worker's slices of the `(features, labels)` batches of `batches`.

    Batches with fewer rows than workers are skipped in training; in evaluation worker 0
    takes them whole.
    """
    s = strategy_for(estimator, mode)
    if s is None:
        yield from batches
        return
    estimator.__dict__["_input_pre_split"] = False
    world, rank = s.num_replicas_in_sync, s.worker_index
    for batch in batches:
        if estimator.__dict__.get("_input_pre_split"):
            s._step_weight = None  # equal shares, as InputContext asks for
            yield batch
            continue
        n = batch_rows(batch)
        if n is None:
            yield batch
            continue
        sizes = split_sizes(n, world)
        if min(sizes) == 0:
            if mode == "eval" and rank == 0:
                yield batch
            continue
        s._step_weight = sizes[rank] / n
        lo = sum(sizes[:rank])
        yield slice_rows(batch, lo, lo + sizes[rank], n)


def sync_variables(estimator, traced, mode) -> None:
    """Worker 0's values for every variable of the traced `model_fn`."""
    s = strategy_for(estimator, mode)
    if s is None:
        return
    variables = list(traced.variables.values())
    collectives.broadcast_([v._value for v in variables], src=0, what="estimator broadcast")
    mark_written(variables)


def is_chief(estimator) -> bool:
    """Whether this worker writes checkpoints and summaries."""
    return estimator.config.is_chief


class _NoSummaries:
    def scalars(self, step, values) -> None:
        del step, values

    def close(self) -> None:
        pass


def summary_writer(estimator, writer_cls, logdir):
    """`writer_cls(logdir)` on worker 0; a writer that drops everything elsewhere."""
    return writer_cls(logdir) if is_chief(estimator) else _NoSummaries()


def reduce_metrics(estimator, traced) -> None:
    """Sums the evaluation metrics' states over the workers (in place: they are reset before
    the next evaluation)."""
    s = strategy_for(estimator, "eval")
    if s is None:
        return
    metrics = list(traced.metrics.values())
    if traced.loss_metric is not None:
        metrics.append(traced.loss_metric)
    values = [v._value for m in metrics for v in m.variables]
    if values:
        for t, total in zip(values, collectives.all_reduce_sum(values, what="eval metrics")):
            t.copy_(total)
