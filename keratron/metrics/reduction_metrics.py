"""`Sum`, `Mean` and `MeanMetricWrapper` (a per-sample function averaged over batches)."""

from __future__ import annotations

from keratron import ops
from keratron.autodiff.tensor import Tensor  # noqa: F401  (annotation)
from keratron.losses.loss import apply_mask, get_loss_mask, squeeze_or_expand_to_same_rank
from keratron.metrics.metric import Metric
from keratron.ops.utils import as_tensor

__all__ = ["Sum", "Mean", "MeanMetricWrapper", "reduce_to_samplewise_values"]


def snapshot(variable) -> Tensor:
    """A copy of a state variable's current value: results must not change on later updates.
    (An op on the Variable itself, so that a traced step reads it at replay time.)"""
    return ops.copy(variable)


def reduce_to_samplewise_values(values, sample_weight, reduce_fn, dtype):
    """Brings `values` (and `sample_weight`) down to one value per sample, as Keras does.

    Weights are aligned with the values' rank, values are reduced to the weights' rank and
    weighted, and the weights are reduced to one per sample; remaining inner axes of the
    values are reduced with `reduce_fn`.
    """
    values = as_tensor(values)
    mask = get_loss_mask(values)
    values = ops.cast(values, dtype)
    if sample_weight is not None:
        sample_weight = ops.cast(as_tensor(sample_weight), dtype)
        if mask is not None:
            sample_weight = apply_mask(sample_weight, mask, dtype=dtype, reduction="sum")
        values, sample_weight = squeeze_or_expand_to_same_rank(values, sample_weight)
        w_ndim, v_ndim = sample_weight.ndim, values.ndim
        if v_ndim > w_ndim:
            values = reduce_fn(values, axis=tuple(range(w_ndim, v_ndim)))
        sample_weight = ops.broadcast_to(sample_weight, values.shape)
        values = ops.multiply(values, sample_weight)
        if w_ndim > 1:
            sample_weight = reduce_fn(sample_weight, axis=tuple(range(1, w_ndim)))
    if values.ndim > 1:
        values = reduce_fn(values, axis=tuple(range(1, values.ndim)))
    return values, sample_weight


class Sum(Metric):
    """The (weighted) sum of all values seen.

    Example:
        >>> m = keratron.metrics.Sum()
        >>> m.update_state([1.0, 3.0, 5.0, 7.0])
        >>> float(m.result())
        16.0
    """

    def __init__(self, name="sum", dtype=None):
        super().__init__(name=name, dtype=dtype)
        self.total = self.add_variable(shape=(), initializer="zeros", name="total")

    def update_state(self, values, sample_weight=None):
        values, _ = reduce_to_samplewise_values(values, sample_weight, ops.sum, self.dtype)
        self.total.assign_add(ops.sum(values))

    def reset_state(self):
        self.total.assign(0.0)

    def result(self):
        return snapshot(self.total)


class Mean(Metric):
    """The (weighted) mean of all values seen: total / count.

    Example:
        >>> m = keratron.metrics.Mean()
        >>> m.update_state([1.0, 3.0, 5.0, 7.0], sample_weight=[1, 1, 0, 0])
        >>> float(m.result())
        2.0
    """

    def __init__(self, name="mean", dtype=None):
        super().__init__(name=name, dtype=dtype)
        self.total = self.add_variable(shape=(), initializer="zeros", name="total")
        self.count = self.add_variable(shape=(), initializer="zeros", name="count")

    def update_state(self, values, sample_weight=None):
        values, sample_weight = reduce_to_samplewise_values(
            values, sample_weight, ops.mean, self.dtype
        )
        self.total.assign_add(ops.sum(values))
        if sample_weight is not None:
            self.count.assign_add(ops.sum(sample_weight))
        else:
            self.count.assign_add(float(values.shape[0]) if values.ndim >= 1 else 1.0)

    def reset_state(self):
        self.total.assign(0.0)
        self.count.assign(0.0)

    def result(self):
        return ops.divide_no_nan(self.total, self.count)


class MeanMetricWrapper(Mean):
    """Averages a per-sample function `fn(y_true, y_pred, **kwargs)` over all batches.

    Args:
        fn: the function, e.g. a loss function or `binary_accuracy`.
        name: the metric's name.
        dtype: the state dtype.
        **kwargs: keyword arguments passed to `fn`.

    Example:
        >>> m = keratron.metrics.MeanMetricWrapper(keratron.losses.mean_absolute_error)
        >>> float(m([[1.0, 2.0]], [[1.0, 4.0]]))
        1.0
    """

    def __init__(self, fn, name=None, dtype=None, **kwargs):
        if not callable(fn):
            raise TypeError(f"MeanMetricWrapper: `fn` must be callable. Received: fn={fn!r}")
        super().__init__(name=name, dtype=dtype)
        self._fn = fn
        self._fn_kwargs = kwargs

    def update_state(self, y_true, y_pred, sample_weight=None):
        values = self._fn(y_true, y_pred, **self._fn_kwargs)
        return super().update_state(values, sample_weight=sample_weight)

    def get_config(self):
        from keratron import metrics

        config = super().get_config()
        config["fn"] = metrics.serialize(self._fn)
        config.update(self._fn_kwargs)
        return config

    @classmethod
    def from_config(cls, config):
        from keratron import metrics

        config = dict(config)
        if "fn" in config:
            config["fn"] = metrics.deserialize(config["fn"])
        return cls(**config)
