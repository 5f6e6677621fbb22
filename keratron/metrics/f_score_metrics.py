"""F-beta and F1 scores from running per-class (or global) true/false positive counts."""

from __future__ import annotations

from keratron import config, ops
from keratron.metrics.metric import Metric
from keratron.ops.utils import as_tensor

__all__ = ["FBetaScore", "F1Score"]


class FBetaScore(Metric):
    """F-beta score: `(1 + beta^2) * P * R / (beta^2 * P + R)`, multi-class or multi-label.

    Args:
        average: None (one score per class), "micro" (global counts), "macro" (unweighted
            mean of the class scores) or "weighted" (mean weighted by class support).
        beta: a positive Python float, the weight of recall against precision.
        threshold: predictions above it count as positive; None marks the argmax of each row.
        name, dtype: see `Metric`.

    Example:
        >>> m = keratron.metrics.FBetaScore(average="micro", beta=2.0, threshold=0.5)
        >>> round(float(m([[1, 0], [0, 1]], [[0.9, 0.2], [0.6, 0.7]])), 4)
        0.9091
    """

    def __init__(
        self,
        average: str | None = None,
        beta: float = 1.0,
        threshold: float | None = None,
        name: str = "fbeta_score",
        dtype=None,
    ):
        super().__init__(name=name, dtype=dtype)
        self._direction = "up"
        cls = self.__class__.__name__
        if average not in (None, "micro", "macro", "weighted"):
            raise ValueError(
                f"{cls}: `average` must be one of None, 'micro', 'macro', 'weighted'. "
                f"Received: average={average!r}"
            )
        if not isinstance(beta, float):
            raise ValueError(f"{cls}: `beta` must be a Python float. Received: beta={beta!r}")
        if beta <= 0.0:
            raise ValueError(f"{cls}: `beta` must be > 0. Received: beta={beta}")
        if threshold is not None:
            if not isinstance(threshold, float):
                raise ValueError(
                    f"{cls}: `threshold` must be a Python float or None. "
                    f"Received: threshold={threshold!r}"
                )
            if threshold > 1.0 or threshold <= 0.0:
                raise ValueError(
                    f"{cls}: `threshold` must satisfy 0 < threshold <= 1. "
                    f"Received: threshold={threshold}"
                )
        self.average = average
        self.beta = beta
        self.threshold = threshold
        # "micro" sums over every element; the others keep one count per class.
        self.axis = None if average == "micro" else 0
        self._built = False

    def _build(self, y_true_shape, y_pred_shape):
        if len(y_pred_shape) != 2 or len(y_true_shape) != 2:
            raise ValueError(
                f"{self.__class__.__name__} expects 2D inputs of shape (batch_size, "
                f"output_dim). Received: y_pred.shape={tuple(y_pred_shape)} and "
                f"y_true.shape={tuple(y_true_shape)}."
            )
        shape = () if self.average == "micro" else (y_pred_shape[-1],)
        for name in ("true_positives", "false_positives", "false_negatives"):
            setattr(self, name, self.add_variable(shape=shape, initializer="zeros", name=name))
        self.intermediate_weights = self.add_variable(
            shape=shape, initializer="zeros", name="intermediate_weights"
        )
        self._built = True

    def update_state(self, y_true, y_pred, sample_weight=None):
        y_true = ops.cast(as_tensor(y_true), self.dtype)
        y_pred = ops.cast(as_tensor(y_pred), self.dtype)
        if not self._built:
            self._build(y_true.shape, y_pred.shape)
        if self.threshold is None:
            # Ties at the row maximum all count; an all-zero row predicts nothing.
            row_max = ops.max(y_pred, axis=-1, keepdims=True)
            y_pred = ops.logical_and(
                ops.greater_equal(y_pred, row_max), ops.greater(ops.abs(y_pred), 1e-9)
            )
        else:
            y_pred = ops.greater(y_pred, self.threshold)
        y_pred = ops.cast(y_pred, self.dtype)
        if sample_weight is not None:
            sample_weight = ops.expand_dims(ops.cast(as_tensor(sample_weight), self.dtype), 1)

        def weighted_sum(values):
            if sample_weight is not None:
                values = ops.multiply(values, sample_weight)
            return ops.sum(values, axis=self.axis)

        not_pred = ops.subtract(1.0, y_pred)
        not_true = ops.subtract(1.0, y_true)
        self.true_positives.assign_add(weighted_sum(ops.multiply(y_pred, y_true)))
        self.false_positives.assign_add(weighted_sum(ops.multiply(y_pred, not_true)))
        self.false_negatives.assign_add(weighted_sum(ops.multiply(not_pred, y_true)))
        self.intermediate_weights.assign_add(weighted_sum(y_true))

    def result(self):
        if not self._built:
            raise ValueError(
                f"{self.__class__.__name__}.result: no data seen yet; call update_state first."
            )
        eps = config.epsilon()
        tp = self.true_positives
        precision = ops.divide(tp, ops.add(ops.add(tp, self.false_positives), eps))
        recall = ops.divide(tp, ops.add(ops.add(tp, self.false_negatives), eps))
        beta2 = self.beta**2
        score = ops.divide(
            ops.multiply(precision, recall),
            ops.add(ops.add(ops.multiply(beta2, precision), recall), eps),
        )
        score = ops.multiply(score, 1.0 + beta2)
        if self.average == "weighted":
            support = self.intermediate_weights
            weights = ops.divide(support, ops.add(ops.sum(support), eps))
            return ops.sum(ops.multiply(score, weights))
        if self.average is not None:
            return ops.mean(score)
        return score

    def get_config(self):
        return {
            "name": self.name,
            "dtype": self.dtype,
            "average": self.average,
            "beta": self.beta,
            "threshold": self.threshold,
        }


class F1Score(FBetaScore):
    """F1 score: the harmonic mean of precision and recall (`FBetaScore` with beta=1).

    Example:
        >>> m = keratron.metrics.F1Score(threshold=0.5)
        >>> [round(float(v), 4) for v in m([[1, 0], [1, 1]], [[0.7, 0.6], [0.2, 0.8]])]
        [0.6667, 0.6667]
    """

    def __init__(
        self,
        average: str | None = None,
        threshold: float | None = None,
        name: str = "f1_score",
        dtype=None,
    ):
        super().__init__(average=average, beta=1.0, threshold=threshold, name=name, dtype=dtype)

    def get_config(self):
        config = super().get_config()
        del config["beta"]
        return config
