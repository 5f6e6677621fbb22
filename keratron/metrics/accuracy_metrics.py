"""Accuracy metrics: per-sample match functions and their running means, as in Keras 3."""

from __future__ import annotations

from keratron import config, ops
from keratron.losses.loss import squeeze_or_expand_to_same_rank
from keratron.metrics.reduction_metrics import MeanMetricWrapper
from keratron.ops.utils import as_tensor

__all__ = [
    "Accuracy",
    "BinaryAccuracy",
    "CategoricalAccuracy",
    "SparseCategoricalAccuracy",
    "TopKCategoricalAccuracy",
    "SparseTopKCategoricalAccuracy",
    "accuracy",
    "binary_accuracy",
    "categorical_accuracy",
    "sparse_categorical_accuracy",
    "top_k_categorical_accuracy",
    "sparse_top_k_categorical_accuracy",
    "in_top_k",
]


def _float_pred(y_pred):
    y_pred = as_tensor(y_pred)
    if not y_pred._value.dtype.is_floating_point:
        y_pred = ops.cast(y_pred, config.floatx())
    return y_pred


def _matches(a, b):
    return ops.cast(ops.equal(a, b), config.floatx())


def accuracy(y_true, y_pred):
    """1.0 where `y_true == y_pred` exactly, else 0.0.

    Example:
        >>> keratron.metrics.accuracy([1, 2], [1, 3]).numpy()
        array([1., 0.], dtype=float32)
    """
    y_pred = as_tensor(y_pred)
    y_true = ops.cast(as_tensor(y_true), y_pred.dtype)
    y_true, y_pred = squeeze_or_expand_to_same_rank(y_true, y_pred)
    return _matches(y_true, y_pred)


def binary_accuracy(y_true, y_pred, threshold=0.5):
    """1.0 where `(y_pred > threshold)` equals the 0/1 label.

    Example:
        >>> keratron.metrics.binary_accuracy([[1], [0]], [[0.7], [0.6]]).numpy()
        array([[1.],
               [0.]], dtype=float32)
    """
    y_pred = as_tensor(y_pred)
    y_true = as_tensor(y_true)
    y_true, y_pred = squeeze_or_expand_to_same_rank(y_true, y_pred)
    predicted = ops.cast(ops.greater(y_pred, threshold), y_true.dtype)
    return _matches(y_true, predicted)


def categorical_accuracy(y_true, y_pred):
    """1.0 where the arg-max of one-hot `y_true` equals the arg-max of `y_pred`.

    Example:
        >>> keratron.metrics.categorical_accuracy([[0, 1], [1, 0]], [[0.2, 0.8], [0.3, 0.7]])
        <Tensor shape=(2,), dtype=float32, numpy=
        array([1., 0.], dtype=float32)>
    """
    y_true = ops.argmax(as_tensor(y_true), axis=-1)
    y_pred = _float_pred(y_pred)
    y_true = ops.cast(y_true, y_pred.dtype)
    org_shape = y_true.shape
    reshape = False
    if y_true.ndim == y_pred.ndim and y_true.shape[-1] == 1:
        y_true = ops.squeeze(y_true, -1)
        reshape = True
    predicted = ops.cast(ops.argmax(y_pred, axis=-1), y_true.dtype)
    out = _matches(y_true, predicted)
    return ops.reshape(out, org_shape) if reshape else out


def sparse_categorical_accuracy(y_true, y_pred):
    """1.0 where the integer label equals the arg-max of `y_pred`.

    Example:
        >>> keratron.metrics.sparse_categorical_accuracy([1, 0], [[0.2, 0.8], [0.3, 0.7]])
        <Tensor shape=(2,), dtype=float32, numpy=
        array([1., 0.], dtype=float32)>
    """
    y_pred = _float_pred(y_pred)
    y_true = ops.cast(as_tensor(y_true), y_pred.dtype)
    org_shape = y_true.shape
    reshape = False
    if y_true.ndim == y_pred.ndim and y_true.shape[-1] == 1:
        y_true = ops.squeeze(y_true, -1)
        reshape = True
    predicted = ops.cast(ops.argmax(y_pred, axis=-1), y_true.dtype)
    out = _matches(y_true, predicted)
    if reshape:
        out = ops.reshape(out, org_shape)
    if out.ndim > 1 and out.shape[-1] == 1:
        out = ops.squeeze(out, -1)
    return out


def in_top_k(targets, predictions, k):
    """True where the score of class `targets[i]` is among the `k` largest of
    `predictions[i]` (ties with the k-th largest count as in).

    Example:
        >>> keratron.metrics.in_top_k([2, 0], [[0.1, 0.5, 0.4], [0.1, 0.5, 0.4]], k=2).numpy()
        array([ True, False])
    """
    targets = ops.cast(as_tensor(targets), "int32")
    predictions = as_tensor(predictions)
    if predictions.ndim != 2 or targets.ndim != 1:
        raise ValueError(
            "in_top_k: expected `targets` of shape (batch,) and `predictions` of shape "
            f"(batch, classes). Received: targets.shape={targets.shape}, "
            f"predictions.shape={predictions.shape}"
        )
    # target >= the k-th largest score <=> the target is in the top k (ties count as in).
    k = min(int(k), predictions.shape[-1])
    kth = ops.top_k(predictions, k)[0][:, k - 1 : k]
    chosen = ops.take_along_axis(predictions, ops.expand_dims(targets, 1), axis=1)
    return ops.squeeze(ops.greater_equal(chosen, kth), 1)


def _flatten_for_top_k(y_true, y_pred):
    org_shape = y_true.shape
    if y_pred.ndim > 2:
        y_pred = ops.reshape(y_pred, (-1, y_pred.shape[-1]))
    reshape = y_true.ndim > 1
    if reshape:
        y_true = ops.reshape(y_true, (-1,))
    return y_true, y_pred, org_shape, reshape


def top_k_categorical_accuracy(y_true, y_pred, k=5):
    """1.0 where the one-hot label's class is among the `k` highest-scoring predictions.

    Example:
        >>> keratron.metrics.top_k_categorical_accuracy([[0, 0, 1]], [[0.5, 0.3, 0.2]], k=2).numpy()
        array([0.], dtype=float32)
    """
    y_pred = _float_pred(y_pred)
    y_true = ops.argmax(as_tensor(y_true), axis=-1)
    y_true, y_pred, org_shape, reshape = _flatten_for_top_k(y_true, y_pred)
    out = ops.cast(in_top_k(y_true, y_pred, k), config.floatx())
    return ops.reshape(out, org_shape) if reshape else out


def sparse_top_k_categorical_accuracy(y_true, y_pred, k=5, from_sorted_ids=False):
    """1.0 where the integer label is among the `k` highest-scoring classes; with
    `from_sorted_ids`, `y_pred` already holds class ids sorted by score.

    Example:
        >>> keratron.metrics.sparse_top_k_categorical_accuracy([2], [[0.5, 0.3, 0.2]], k=2).numpy()
        array([0.], dtype=float32)
    """
    y_pred = _float_pred(y_pred) if not from_sorted_ids else as_tensor(y_pred)
    y_true = ops.cast(as_tensor(y_true), y_pred.dtype if from_sorted_ids else "int32")
    y_true, y_pred, org_shape, reshape = _flatten_for_top_k(y_true, y_pred)
    if from_sorted_ids:
        # A label counts once even if it appears several times among the first k ids.
        found = ops.equal(ops.expand_dims(y_true, 1), y_pred[:, :k])
        out = ops.any(found, axis=1)
    else:
        out = in_top_k(y_true, y_pred, k)
    out = ops.cast(out, config.floatx())
    return ops.reshape(out, org_shape) if reshape else out


class Accuracy(MeanMetricWrapper):
    """How often predictions equal labels exactly.

    Example:
        >>> float(keratron.metrics.Accuracy()([[1], [2], [3]], [[1], [2], [4]]))
        0.6666666865348816
    """

    def __init__(self, name="accuracy", dtype=None):
        super().__init__(fn=accuracy, name=name, dtype=dtype)

    def get_config(self):
        return {"name": self.name, "dtype": self.dtype}


class BinaryAccuracy(MeanMetricWrapper):
    """How often thresholded predictions match binary labels.

    Example:
        >>> float(keratron.metrics.BinaryAccuracy()([[1], [0]], [[0.9], [0.7]]))
        0.5
    """

    def __init__(self, name="binary_accuracy", dtype=None, threshold=0.5):
        super().__init__(fn=binary_accuracy, name=name, dtype=dtype, threshold=threshold)
        self.threshold = threshold

    def get_config(self):
        return {"name": self.name, "dtype": self.dtype, "threshold": self.threshold}


class CategoricalAccuracy(MeanMetricWrapper):
    """How often the predicted class matches the one-hot label.

    Example:
        >>> float(keratron.metrics.CategoricalAccuracy()([[0, 1]], [[0.4, 0.6]]))
        1.0
    """

    def __init__(self, name="categorical_accuracy", dtype=None):
        super().__init__(fn=categorical_accuracy, name=name, dtype=dtype)

    def get_config(self):
        return {"name": self.name, "dtype": self.dtype}


class SparseCategoricalAccuracy(MeanMetricWrapper):
    """How often the predicted class matches the integer label.

    Example:
        >>> float(keratron.metrics.SparseCategoricalAccuracy()([1], [[0.4, 0.6]]))
        1.0
    """

    def __init__(self, name="sparse_categorical_accuracy", dtype=None):
        super().__init__(fn=sparse_categorical_accuracy, name=name, dtype=dtype)

    def get_config(self):
        return {"name": self.name, "dtype": self.dtype}


class TopKCategoricalAccuracy(MeanMetricWrapper):
    """How often the one-hot label is among the top `k` predictions.

    Example:
        >>> m = keratron.metrics.TopKCategoricalAccuracy(k=1)
        >>> float(m([[0, 0, 1]], [[0.1, 0.2, 0.7]]))
        1.0
    """

    def __init__(self, k=5, name="top_k_categorical_accuracy", dtype=None):
        super().__init__(fn=top_k_categorical_accuracy, name=name, dtype=dtype, k=k)
        self.k = k

    def get_config(self):
        return {"name": self.name, "dtype": self.dtype, "k": self.k}


class SparseTopKCategoricalAccuracy(MeanMetricWrapper):
    """How often the integer label is among the top `k` predictions.

    Example:
        >>> m = keratron.metrics.SparseTopKCategoricalAccuracy(k=1)
        >>> float(m([2], [[0.1, 0.2, 0.7]]))
        1.0
    """

    def __init__(
        self, k=5, name="sparse_top_k_categorical_accuracy", dtype=None, from_sorted_ids=False
    ):
        super().__init__(
            fn=sparse_top_k_categorical_accuracy,
            name=name,
            dtype=dtype,
            k=k,
            from_sorted_ids=from_sorted_ids,
        )
        self.k = k
        self.from_sorted_ids = from_sorted_ids

    def get_config(self):
        config = {"name": self.name, "dtype": self.dtype, "k": self.k}
        if self.from_sorted_ids:
            config["from_sorted_ids"] = True
        return config
