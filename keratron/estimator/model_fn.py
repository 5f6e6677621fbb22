"""`EstimatorSpec`: what a `model_fn` returns for one mode."""

from __future__ import annotations

import collections

from keratron.autodiff.tensor import Tensor
from keratron.estimator.mode_keys import ModeKeys

__all__ = ["EstimatorSpec"]

_FIELDS = (
    "mode",
    "predictions",
    "loss",
    "train_op",
    "eval_metric_ops",
    "export_outputs",
    "training_chief_hooks",
    "training_hooks",
    "scaffold",
    "evaluation_hooks",
    "prediction_hooks",
)


def _is_tensor_like(x) -> bool:
    from keratron.estimator.export import _HostLookup

    return isinstance(x, (Tensor, _HostLookup))


def _check_hooks(hooks, name):
    from keratron.estimator.hooks import SessionRunHook

    hooks = tuple(hooks or ())
    for h in hooks:
        if not isinstance(h, SessionRunHook):
            raise TypeError(
                f"EstimatorSpec: every entry of `{name}` must be a SessionRunHook. "
                f"Received: {type(h).__name__}"
            )
    return hooks


class EstimatorSpec(collections.namedtuple("EstimatorSpec", _FIELDS)):
    """The ops and objects a `model_fn` returns, as TensorFlow's `tf.estimator.EstimatorSpec`.

    TRAIN needs `loss` and `train_op` (e.g. `optimizer.minimize(loss, variables)`), EVAL
    needs `loss`, PREDICT needs `predictions`.

    Args:
        mode: a `ModeKeys` value.
        predictions: a Tensor or a dict of Tensors (batch-major).
        loss: a scalar Tensor.
        train_op: the training update, e.g. the result of `optimizer.minimize(...)`; in a
            traced `model_fn` the update is recorded where it is called, so this only has to
            be non-None.
        eval_metric_ops: dict of metric name to a `keratron.metrics.Metric` that the
            `model_fn` updates, or to a `(value, update_op)` pair whose `value` after the
            last step is reported.
        export_outputs: dict of signature name to `keratron.estimator.export.ExportOutput`;
            defaults to a `PredictOutput` of `predictions` under "serving_default".
        training_chief_hooks, training_hooks, evaluation_hooks, prediction_hooks: extra
            `SessionRunHook`s for that mode; they may fetch Tensors of the `model_fn`.
        scaffold: accepted for TensorFlow compatibility; unused.

    Raises:
        ValueError: if a value the mode requires is missing, or the loss is not a scalar.

    Example:
        >>> mode, y = keratron.estimator.ModeKeys.PREDICT, keratron.ops.ones((2, 1))
        >>> spec = keratron.estimator.EstimatorSpec(mode, predictions={"y": y})
        >>> spec.mode, spec.loss
        ('infer', None)
    """

    def __new__(
        cls,
        mode,
        predictions=None,
        loss=None,
        train_op=None,
        eval_metric_ops=None,
        export_outputs=None,
        training_chief_hooks=None,
        training_hooks=None,
        scaffold=None,
        evaluation_hooks=None,
        prediction_hooks=None,
    ):
        ModeKeys.check(mode, "EstimatorSpec")
        if loss is not None:
            if not isinstance(loss, Tensor):
                raise TypeError(
                    f"EstimatorSpec: `loss` must be a Tensor. Received: {type(loss).__name__}"
                )
            if loss.shape not in ((), (1,)):
                raise ValueError(
                    f"EstimatorSpec: `loss` must be a scalar. Received a loss of shape "
                    f"{loss.shape}."
                )
        if predictions is not None:
            values = predictions.values() if isinstance(predictions, dict) else [predictions]
            for v in values:
                if not _is_tensor_like(v):
                    raise TypeError(
                        "EstimatorSpec: `predictions` must be a Tensor or a dict of Tensors. "
                        f"Received a value of type {type(v).__name__}."
                    )
        if mode == ModeKeys.TRAIN:
            if loss is None:
                raise ValueError("EstimatorSpec: missing `loss` in mode TRAIN.")
            if train_op is None:
                raise ValueError("EstimatorSpec: missing `train_op` in mode TRAIN.")
        elif mode == ModeKeys.EVAL and loss is None:
            raise ValueError("EstimatorSpec: missing `loss` in mode EVAL.")
        elif mode == ModeKeys.PREDICT and predictions is None:
            raise ValueError("EstimatorSpec: missing `predictions` in mode PREDICT.")
        eval_metric_ops = dict(eval_metric_ops or {})
        for key, op in eval_metric_ops.items():
            _check_metric_op(key, op)
        if export_outputs is not None:
            from keratron.estimator.export import ExportOutput

            for key, out in export_outputs.items():
                if not isinstance(out, ExportOutput):
                    raise TypeError(
                        f"EstimatorSpec: export_outputs[{key!r}] must be an ExportOutput "
                        f"(PredictOutput, ClassificationOutput, RegressionOutput). "
                        f"Received: {type(out).__name__}"
                    )
        return super().__new__(
            cls,
            mode,
            predictions,
            loss,
            train_op,
            eval_metric_ops,
            export_outputs,
            _check_hooks(training_chief_hooks, "training_chief_hooks"),
            _check_hooks(training_hooks, "training_hooks"),
            scaffold,
            _check_hooks(evaluation_hooks, "evaluation_hooks"),
            _check_hooks(prediction_hooks, "prediction_hooks"),
        )


def _check_metric_op(key, op):
    from keratron.metrics import Metric

    if isinstance(op, Metric):
        return
    if isinstance(op, tuple) and len(op) == 2 and isinstance(op[0], Tensor):
        return
    raise TypeError(
        f"EstimatorSpec: eval_metric_ops[{key!r}] must be a keratron.metrics.Metric or a "
        f"(value_tensor, update_op) pair. Received: {type(op).__name__}"
    )
