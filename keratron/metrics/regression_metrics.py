"""Regression metrics: running means of error functions, RMSE, cosine similarity, R2."""

from __future__ import annotations

import warnings

from keratron import ops
from keratron.autodiff.function import is_tracing
from keratron.losses.loss import squeeze_or_expand_to_same_rank
from keratron.losses.losses import (
    l2_normalize,
    log_cosh,
    mean_absolute_error,
    mean_absolute_percentage_error,
    mean_squared_error,
    mean_squared_logarithmic_error,
)
from keratron.metrics.metric import Metric
from keratron.metrics.reduction_metrics import Mean, MeanMetricWrapper
from keratron.ops.utils import as_tensor

__all__ = [
    "MeanSquaredError",
    "MeanAbsoluteError",
    "MeanAbsolutePercentageError",
    "MeanSquaredLogarithmicError",
    "RootMeanSquaredError",
    "CosineSimilarity",
    "LogCoshError",
    "R2Score",
    "cosine_similarity",
]


def cosine_similarity(y_true, y_pred, axis=-1):
    """Cosine similarity along `axis` (1 for aligned vectors); the metric's sign, not the
    loss's.

    Example:
        >>> float(keratron.metrics.cosine_similarity([[1.0, 0.0]], [[2.0, 0.0]])[0])
        1.0
    """
    y_pred = as_tensor(y_pred)
    y_true = ops.cast(as_tensor(y_true), y_pred.dtype)
    y_true, y_pred = squeeze_or_expand_to_same_rank(y_true, y_pred)
    return ops.sum(ops.multiply(l2_normalize(y_true, axis), l2_normalize(y_pred, axis)), axis=axis)


class _ErrorMean(MeanMetricWrapper):
    def get_config(self):
        return {"name": self.name, "dtype": self.dtype}


class MeanSquaredError(_ErrorMean):
    """Running mean of squared errors.

    Example:
        >>> float(keratron.metrics.MeanSquaredError()([[0.0, 1.0]], [[1.0, 1.0]]))
        0.5
    """

    def __init__(self, name="mean_squared_error", dtype=None):
        super().__init__(fn=mean_squared_error, name=name, dtype=dtype)


class MeanAbsoluteError(_ErrorMean):
    """Running mean of absolute errors.

    Example:
        >>> float(keratron.metrics.MeanAbsoluteError()([[0.0, 1.0]], [[1.0, 1.0]]))
        0.5
    """

    def __init__(self, name="mean_absolute_error", dtype=None):
        super().__init__(fn=mean_absolute_error, name=name, dtype=dtype)


class MeanAbsolutePercentageError(_ErrorMean):
    """Running mean absolute percentage error.

    Example:
        >>> float(keratron.metrics.MeanAbsolutePercentageError()([[2.0]], [[1.0]]))
        50.0
    """

    def __init__(self, name="mean_absolute_percentage_error", dtype=None):
        super().__init__(fn=mean_absolute_percentage_error, name=name, dtype=dtype)


class MeanSquaredLogarithmicError(_ErrorMean):
    """Running mean squared logarithmic error.

    Example:
        >>> float(keratron.metrics.MeanSquaredLogarithmicError()([[1.0]], [[1.0]]))
        0.0
    """

    def __init__(self, name="mean_squared_logarithmic_error", dtype=None):
        super().__init__(fn=mean_squared_logarithmic_error, name=name, dtype=dtype)


class LogCoshError(_ErrorMean):
    """Running mean of log(cosh(error)).

    Example:
        >>> float(keratron.metrics.LogCoshError()([[1.0]], [[1.0]]))
        0.0
    """

    def __init__(self, name="logcosh", dtype=None):
        super().__init__(fn=log_cosh, name=name, dtype=dtype)


class CosineSimilarity(MeanMetricWrapper):
    """Running mean of the cosine similarity along `axis`.

    Example:
        >>> float(keratron.metrics.CosineSimilarity()([[1.0, 0.0]], [[1.0, 1.0]]))
        0.7071067690849304
    """

    def __init__(self, name="cosine_similarity", dtype=None, axis=-1):
        super().__init__(fn=cosine_similarity, name=name, dtype=dtype, axis=axis)
        self.axis = axis

    def get_config(self):
        # Keras leaves `axis` out, so its round trip loses it; kept here.
        return {"name": self.name, "dtype": self.dtype, "axis": self.axis}


class RootMeanSquaredError(Mean):
    """Square root of the running mean of squared errors.

    Example:
        >>> float(keratron.metrics.RootMeanSquaredError()([[0.0, 0.0]], [[3.0, 3.0]]))
        3.0
    """

    def __init__(self, name="root_mean_squared_error", dtype=None):
        super().__init__(name=name, dtype=dtype)

    def update_state(self, y_true, y_pred, sample_weight=None):
        y_true = ops.cast(as_tensor(y_true), self.dtype)
        y_pred = ops.cast(as_tensor(y_pred), self.dtype)
        y_true, y_pred = squeeze_or_expand_to_same_rank(y_true, y_pred)
        return super().update_state(ops.square(ops.subtract(y_pred, y_true)), sample_weight)

    def result(self):
        return ops.sqrt(super().result())


class R2Score(Metric):
    """Coefficient of determination, per output column then aggregated.

    Args:
        class_aggregation: "uniform_average" (default), "variance_weighted_average" or None
            (one score per column).
        num_regressors: for the adjusted R2 score; 0 gives the plain score.
        name, dtype: see `Metric`.

    Example:
        >>> m = keratron.metrics.R2Score()
        >>> float(m([[1.0], [2.0], [3.0]], [[1.0], [2.0], [4.0]]))
        0.5
    """

    def __init__(
        self, class_aggregation="uniform_average", num_regressors=0, name="r2_score", dtype=None
    ):
        super().__init__(name=name, dtype=dtype)
        allowed = (None, "uniform_average", "variance_weighted_average")
        if class_aggregation not in allowed:
            raise ValueError(
                f"R2Score: `class_aggregation` must be one of {allowed}. "
                f"Received: class_aggregation={class_aggregation!r}"
            )
        if num_regressors < 0:
            raise ValueError(
                f"R2Score: `num_regressors` must be >= 0. Received: num_regressors={num_regressors}"
            )
        self.class_aggregation = class_aggregation
        self.num_regressors = num_regressors
        self.num_samples = self.add_variable(shape=(), initializer="zeros", name="num_samples")
        self._built = False

    def _build(self, y_true_shape, y_pred_shape):
        if len(y_pred_shape) != 2 or len(y_true_shape) != 2:
            raise ValueError(
                "R2Score expects 2D inputs of shape (batch_size, output_dim). Received: "
                f"y_pred.shape={y_pred_shape} and y_true.shape={y_true_shape}."
            )
        n = y_pred_shape[-1]
        self.squared_sum = self.add_variable(shape=(n,), initializer="zeros", name="squared_sum")
        self.sum = self.add_variable(shape=(n,), initializer="zeros", name="sum")
        self.total_mse = self.add_variable(shape=(n,), initializer="zeros", name="residual")
        self.count = self.add_variable(shape=(n,), initializer="zeros", name="count")
        self._built = True

    def update_state(self, y_true, y_pred, sample_weight=None):
        y_true = ops.cast(as_tensor(y_true), self.dtype)
        y_pred = ops.cast(as_tensor(y_pred), self.dtype)
        y_true, y_pred = squeeze_or_expand_to_same_rank(y_true, y_pred)
        if not self._built:
            self._build(y_true.shape, y_pred.shape)
        sw = ops.cast(as_tensor(1.0 if sample_weight is None else sample_weight), self.dtype)
        if sw.ndim == 1:
            sw = ops.expand_dims(sw, 1)
        sw = ops.broadcast_to(sw, y_true.shape)
        weighted = ops.multiply(y_true, sw)
        self.sum.assign_add(ops.sum(weighted, axis=0))
        self.squared_sum.assign_add(ops.sum(ops.multiply(y_true, weighted), axis=0))
        residual = ops.multiply(ops.square(ops.subtract(y_true, y_pred)), sw)
        self.total_mse.assign_add(ops.sum(residual, axis=0))
        self.count.assign_add(ops.sum(sw, axis=0))
        self.num_samples.assign_add(float(y_true.size))

    def result(self):
        if not self._built:
            raise ValueError("R2Score.result: no data seen yet; call update_state first.")
        mean = ops.divide(self.sum, self.count)
        total = ops.subtract(self.squared_sum, ops.multiply(self.sum, mean))
        raw = ops.subtract(1.0, ops.divide(self.total_mse, total))
        raw = ops.where(ops.isinf(raw), 0.0, raw)
        if self.class_aggregation == "uniform_average":
            score = ops.mean(raw)
        elif self.class_aggregation == "variance_weighted_average":
            score = ops.divide(ops.sum(ops.multiply(total, raw)), ops.sum(total))
        else:
            score = raw
        if self.num_regressors:
            p = float(self.num_regressors)
            n_minus_1 = ops.subtract(self.num_samples, 1.0)
            adjusted = ops.subtract(
                1.0,
                ops.divide(
                    ops.multiply(ops.subtract(1.0, score), n_minus_1), ops.subtract(n_minus_1, p)
                ),
            )
            # With p >= n - 1 the adjustment is undefined and the plain score is kept, as in
            # Keras; a `where`, not a Python branch, so that a traced step stays correct.
            score = ops.where(ops.less(p, n_minus_1), adjusted, score)
            if not is_tracing() and p >= float(n_minus_1):
                warnings.warn(
                    f"R2Score: num_regressors={self.num_regressors} is not below the number of "
                    "data points - 1; the adjusted score is undefined, returning the plain R2.",
                    stacklevel=2,
                )
        return score

    def get_config(self):
        return {
            "name": self.name,
            "dtype": self.dtype,
            "class_aggregation": self.class_aggregation,
            "num_regressors": self.num_regressors,
        }
