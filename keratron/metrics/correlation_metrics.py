"""Correlation metrics: running means of the per-sample Pearson and concordance correlations."""

from __future__ import annotations

from keratron import config, ops
from keratron.losses.loss import squeeze_or_expand_to_same_rank
from keratron.metrics.reduction_metrics import MeanMetricWrapper
from keratron.ops.utils import as_tensor

__all__ = [
    "PearsonCorrelation",
    "ConcordanceCorrelation",
    "pearson_correlation",
    "concordance_correlation",
]


def _prepare(y_true, y_pred):
    y_pred = as_tensor(y_pred)
    y_true = ops.cast(as_tensor(y_true), y_pred.dtype)
    return squeeze_or_expand_to_same_rank(y_true, y_pred)


def pearson_correlation(y_true, y_pred, axis=-1):
    """Pearson correlation coefficient between `y_true` and `y_pred` along `axis`.

    Example:
        >>> r = keratron.metrics.pearson_correlation([[1.0, 2.0, 3.0]], [[1.0, 2.0, 4.0]])
        >>> round(float(r[0]), 4)
        0.982
    """
    y_true, y_pred = _prepare(y_true, y_pred)
    true_dev = ops.subtract(y_true, ops.mean(y_true, axis=axis, keepdims=True))
    pred_dev = ops.subtract(y_pred, ops.mean(y_pred, axis=axis, keepdims=True))
    true_dev = ops.divide(true_dev, ops.std(true_dev, axis=axis, keepdims=True))
    pred_dev = ops.divide(pred_dev, ops.std(pred_dev, axis=axis, keepdims=True))
    return ops.mean(ops.multiply(true_dev, pred_dev), axis=axis)


def concordance_correlation(y_true, y_pred, axis=-1):
    """Lin's concordance correlation coefficient along `axis`, as Keras 3 computes it.

    Keras centres `y_true` on the mean of `y_pred` in the covariance term; that is kept so
    that results match Keras.

    Example:
        >>> round(float(keratron.metrics.concordance_correlation([[1.0, 2.0]], [[1.0, 2.0]])[0]), 4)
        1.0
    """
    y_true, y_pred = _prepare(y_true, y_pred)
    true_mean = ops.mean(y_true, axis=axis, keepdims=True)
    pred_mean = ops.mean(y_pred, axis=axis, keepdims=True)
    true_var = ops.var(ops.subtract(y_true, true_mean), axis=axis, keepdims=True)
    pred_var = ops.var(ops.subtract(y_pred, pred_mean), axis=axis, keepdims=True)
    covar = ops.multiply(ops.subtract(y_true, pred_mean), ops.subtract(y_pred, pred_mean))
    norm = ops.add(ops.add(true_var, pred_var), ops.square(ops.subtract(true_mean, pred_mean)))
    ratio = ops.divide(ops.multiply(2.0, covar), ops.add(norm, config.epsilon()))
    return ops.mean(ratio, axis=axis)


class _CorrelationMean(MeanMetricWrapper):
    def __init__(self, fn, name, dtype, axis):
        super().__init__(fn=fn, name=name, dtype=dtype, axis=axis)
        self.axis = axis
        self._direction = "up"

    def get_config(self):
        return {"name": self.name, "dtype": self.dtype, "axis": self.axis}


class PearsonCorrelation(_CorrelationMean):
    """Running mean of the per-sample Pearson correlation along `axis`.

    Example:
        >>> m = keratron.metrics.PearsonCorrelation()
        >>> round(float(m([[1.0, 2.0, 3.0]], [[1.0, 2.0, 4.0]])), 4)
        0.982
    """

    def __init__(self, name: str = "pearson_correlation", dtype=None, axis: int = -1):
        super().__init__(pearson_correlation, name=name, dtype=dtype, axis=axis)


class ConcordanceCorrelation(_CorrelationMean):
    """Running mean of the per-sample concordance correlation along `axis`.

    Example:
        >>> m = keratron.metrics.ConcordanceCorrelation()
        >>> round(float(m([[1.0, 2.0]], [[1.0, 2.0]])), 4)
        1.0
    """

    def __init__(self, name: str = "concordance_correlation", dtype=None, axis: int = -1):
        super().__init__(concordance_correlation, name=name, dtype=dtype, axis=axis)
