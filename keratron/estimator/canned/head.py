"""Heads of the premade estimators: from logits and labels to predictions, loss, metrics and
the EstimatorSpec, with TensorFlow's prediction keys, metric names and loss reductions.

- multi-class (n_classes > 2): softmax cross-entropy; predictions "logits",
  "probabilities", "class_ids", "classes", "all_class_ids", "all_classes"; metrics
  "accuracy", "average_loss", "loss".
- binary (n_classes == 2): one logit, sigmoid cross-entropy; adds "logistic"; metrics add
  "accuracy_baseline", "auc", "auc_precision_recall", "label/mean", "prediction/mean",
  "precision", "recall".
- regression: squared error; prediction "predictions"; metrics "average_loss",
  "label/mean", "prediction/mean", "loss".
"""

from __future__ import annotations

import numpy as np

from keratron import losses, metrics, ops
from keratron.estimator import export as export_lib
from keratron.estimator.mode_keys import ModeKeys
from keratron.estimator.model_fn import EstimatorSpec
from keratron.feature_column import NumericColumn, fingerprint

__all__ = ["Head", "SUM_OVER_BATCH_SIZE", "SUM", "check_loss_reduction"]

SUM_OVER_BATCH_SIZE = "sum_over_batch_size"
SUM = "sum"


def check_loss_reduction(loss_reduction, what):
    value = getattr(loss_reduction, "value", loss_reduction)
    if isinstance(value, str) and value.lower() in (SUM_OVER_BATCH_SIZE, SUM):
        return value.lower()
    raise ValueError(
        f"{what}: `loss_reduction` must be 'sum_over_batch_size' or 'sum'. Received: "
        f"loss_reduction={loss_reduction!r}"
    )


class _AccuracyBaseline(metrics.Metric):
    """max(label mean, 1 - label mean): the accuracy of always predicting the majority class."""

    def __init__(self, label_mean, name="accuracy_baseline"):
        super().__init__(name=name)
        self._label_mean = label_mean

    def update_state(self, *args, **kwargs):
        pass  # reads the label mean metric, which the head updates

    def reset_state(self):
        pass

    def result(self):
        m = self._label_mean.result()
        return ops.maximum(m, 1.0 - m)


class Head:
    """Turns logits into an EstimatorSpec for one kind of problem (see module docstring)."""

    def __init__(
        self,
        kind,
        n_classes=None,
        label_dimension=1,
        weight_column=None,
        label_vocabulary=None,
        loss_reduction=SUM_OVER_BATCH_SIZE,
        what="estimator",
    ):
        self.kind = kind
        self.what = what
        self.loss_reduction = check_loss_reduction(loss_reduction, what)
        if kind == "classification":
            if isinstance(n_classes, bool) or not isinstance(n_classes, int) or n_classes < 2:
                raise ValueError(f"{what}: `n_classes` must be > 1. Received: {n_classes!r}")
            self.n_classes = n_classes
            self.logits_dimension = 1 if n_classes == 2 else n_classes
            if label_vocabulary is not None:
                vocab = list(label_vocabulary)
                if not all(isinstance(v, str) for v in vocab):
                    raise ValueError(
                        f"{what}: `label_vocabulary` must be a list of strings. Received: "
                        f"{label_vocabulary!r}"
                    )
                if len(vocab) != n_classes or len(set(vocab)) != len(vocab):
                    raise ValueError(
                        f"{what}: `label_vocabulary` must hold {n_classes} distinct strings (one "
                        f"per class). Received: {vocab}"
                    )
                self.class_names = tuple(vocab)
                self._label_codes = fingerprint(vocab)
            else:
                self.class_names = tuple(str(i) for i in range(n_classes))
                self._label_codes = None
        else:
            if (
                isinstance(label_dimension, bool)
                or not isinstance(label_dimension, int)
                or label_dimension < 1
            ):
                raise ValueError(
                    f"{what}: `label_dimension` must be >= 1. Received: {label_dimension!r}"
                )
            if label_vocabulary is not None:
                raise ValueError(f"{what}: regression takes no `label_vocabulary`.")
            self.logits_dimension = label_dimension
        if weight_column is not None and not isinstance(weight_column, (str, NumericColumn)):
            raise ValueError(
                f"{what}: `weight_column` must be a feature key or a numeric_column. Received: "
                f"{weight_column!r}"
            )
        self.weight_column = weight_column

    # ------------------------------------------------------------------ pieces
    def _weights(self, features, batch):
        if self.weight_column is None:
            return ops.ones((batch, 1), dtype="float32")
        col = self.weight_column
        if isinstance(col, str):
            from keratron.feature_column import numeric_column

            col = numeric_column(col)
        return col.dense_tensor(features)

    def _class_labels(self, labels):
        labels = ops.convert_to_tensor(labels)
        if labels.ndim == 1:
            labels = ops.expand_dims(labels, -1)
        if labels.ndim != 2 or labels.shape[1] != 1:
            raise ValueError(
                f"{self.what}: labels must have shape (batch,) or (batch, 1). Received shape "
                f"{labels.shape}."
            )
        if self._label_codes is not None:
            match = ops.equal(ops.cast(labels, "int64"), ops.convert_to_tensor(self._label_codes))
            return ops.expand_dims(
                ops.cast(ops.argmax(ops.cast(match, "int32"), axis=-1), "int64"), -1
            )
        if labels.dtype.startswith("float"):
            labels = ops.round(labels)
        return ops.cast(labels, "int64")

    def _regression_labels(self, labels):
        labels = ops.cast(ops.convert_to_tensor(labels), "float32")
        if labels.ndim == 1:
            labels = ops.expand_dims(labels, -1)
        if labels.ndim != 2 or labels.shape[1] != self.logits_dimension:
            raise ValueError(
                f"{self.what}: labels must have shape (batch, {self.logits_dimension}). Received "
                f"shape {labels.shape}."
            )
        return labels

    def predictions(self, logits):
        if self.kind == "regression":
            return {"predictions": logits}
        batch = logits.shape[0]
        n = self.n_classes
        if n == 2:
            logistic = ops.sigmoid(logits)
            probabilities = ops.concatenate([1.0 - logistic, logistic], axis=-1)
            class_ids = ops.cast(ops.greater(logits, 0.0), "int64")
        else:
            probabilities = ops.softmax(logits, axis=-1)
            class_ids = ops.expand_dims(ops.argmax(logits, axis=-1), -1)
            class_ids = ops.cast(class_ids, "int64")
        all_ids = ops.convert_to_tensor(np.tile(np.arange(n, dtype=np.int32), (batch, 1)))
        out = {"logits": logits}
        if n == 2:
            out["logistic"] = logistic
        out.update(
            {
                "probabilities": probabilities,
                "class_ids": class_ids,
                "classes": export_lib._HostLookup(class_ids, self.class_names),
                "all_class_ids": all_ids,
                "all_classes": export_lib._HostLookup(all_ids, self.class_names),
            }
        )
        return out

    def _export_outputs(self, predictions):
        predict = export_lib.PredictOutput(predictions)
        if self.kind == "regression":
            out = export_lib.RegressionOutput(predictions["predictions"])
            if self.logits_dimension != 1:
                return {"serving_default": predict, "predict": predict}
            return {"serving_default": out, "regression": out, "predict": predict}
        out = export_lib.ClassificationOutput(
            scores=predictions["probabilities"], classes=predictions["all_classes"]
        )
        return {"serving_default": out, "classification": out, "predict": predict}

    def _unreduced_loss(self, logits, labels):
        if self.kind == "regression":
            return ops.square(logits - labels)
        if self.n_classes == 2:
            loss = losses.binary_crossentropy(ops.cast(labels, "float32"), logits, from_logits=True)
        else:
            loss = losses.sparse_categorical_crossentropy(labels, logits, from_logits=True)
        return ops.expand_dims(loss, -1)

    def _reduce(self, weighted):
        total = ops.sum(weighted)
        if self.loss_reduction == SUM:
            return total
        n = 1
        for d in weighted.shape:
            n *= d
        return total / float(n)

    def _eval_metrics(self, labels, predictions, unreduced, weights):
        avg = metrics.Mean(name="average_loss")
        avg.update_state(unreduced, sample_weight=ops.broadcast_to(weights, unreduced.shape))
        if self.kind == "regression":
            label_mean, pred_mean = (
                metrics.Mean(name="label_mean"),
                metrics.Mean(name="prediction_mean"),
            )
            w = ops.broadcast_to(weights, labels.shape)
            label_mean.update_state(labels, sample_weight=w)
            pred_mean.update_state(predictions["predictions"], sample_weight=w)
            return {"average_loss": avg, "label/mean": label_mean, "prediction/mean": pred_mean}
        class_ids = predictions["class_ids"]
        accuracy = metrics.Accuracy(name="accuracy")
        accuracy.update_state(labels, class_ids, sample_weight=weights)
        out = {"accuracy": accuracy, "average_loss": avg}
        if self.n_classes == 2:
            flabels = ops.cast(labels, "float32")
            logistic = predictions["logistic"]
            label_mean, pred_mean = (
                metrics.Mean(name="label_mean"),
                metrics.Mean(name="prediction_mean"),
            )
            label_mean.update_state(flabels, sample_weight=weights)
            pred_mean.update_state(logistic, sample_weight=weights)
            precision, recall = metrics.Precision(name="precision"), metrics.Recall(name="recall")
            precision.update_state(flabels, ops.cast(class_ids, "float32"), sample_weight=weights)
            recall.update_state(flabels, ops.cast(class_ids, "float32"), sample_weight=weights)
            auc = metrics.AUC(curve="ROC", name="auc")
            auc_pr = metrics.AUC(curve="PR", name="auc_precision_recall")
            auc.update_state(flabels, logistic, sample_weight=weights)
            auc_pr.update_state(flabels, logistic, sample_weight=weights)
            out.update(
                {
                    "accuracy_baseline": _AccuracyBaseline(label_mean),
                    "auc": auc,
                    "auc_precision_recall": auc_pr,
                    "label/mean": label_mean,
                    "prediction/mean": pred_mean,
                    "precision": precision,
                    "recall": recall,
                }
            )
        return out

    # ------------------------------------------------------------------ spec
    def create_estimator_spec(self, features, mode, logits, labels=None, train_op_fn=None):
        """The EstimatorSpec for `mode`; `train_op_fn(loss)` makes the training update."""
        predictions = self.predictions(logits)
        if mode == ModeKeys.PREDICT:
            return EstimatorSpec(
                mode, predictions=predictions, export_outputs=self._export_outputs(predictions)
            )
        if labels is None:
            raise ValueError(f"{self.what}: labels are required in mode {mode!r}.")
        if isinstance(labels, dict):
            if len(labels) != 1:
                raise ValueError(
                    f"{self.what}: expected one label tensor, received a dict with keys "
                    f"{sorted(labels)}."
                )
            labels = next(iter(labels.values()))
        if self.kind == "regression":
            labels = self._regression_labels(labels)
        else:
            labels = self._class_labels(labels)
        if labels.shape[0] != logits.shape[0]:
            raise ValueError(
                f"{self.what}: labels have batch size {labels.shape[0]}, the features "
                f"{logits.shape[0]}."
            )
        weights = self._weights(features, logits.shape[0])
        unreduced = self._unreduced_loss(logits, labels)
        loss = self._reduce(unreduced * weights)
        if mode == ModeKeys.EVAL:
            return EstimatorSpec(
                mode,
                predictions=predictions,
                loss=loss,
                eval_metric_ops=self._eval_metrics(labels, predictions, unreduced, weights),
            )
        return EstimatorSpec(mode, predictions=predictions, loss=loss, train_op=train_op_fn(loss))
