"""Intersection-over-union metrics from a running (num_classes, num_classes) confusion matrix.

The matrix has labels on rows and predictions on columns; as in Keras its dtype, and so the
dtype that sample weights are cast to, is int32 unless `dtype` says otherwise.
"""

from __future__ import annotations

import warnings

from keratron import config, ops
from keratron.metrics.metric import Metric
from keratron.ops.utils import as_tensor

__all__ = ["IoU", "MeanIoU", "BinaryIoU", "OneHotIoU", "OneHotMeanIoU"]


class _IoUBase(Metric):
    def __init__(
        self,
        num_classes,
        name=None,
        dtype=None,
        ignore_class=None,
        sparse_y_true=True,
        sparse_y_pred=True,
        axis=-1,
    ):
        super().__init__(name=name, dtype=dtype or "int32")
        self._direction = "up"
        self.num_classes = num_classes
        self.ignore_class = ignore_class
        self.sparse_y_true = sparse_y_true
        self.sparse_y_pred = sparse_y_pred
        self.axis = axis
        self.total_cm = self.add_variable(
            shape=(num_classes, num_classes), initializer="zeros", name="total_confusion_matrix"
        )

    def update_state(self, y_true, y_pred, sample_weight=None):
        y_true, y_pred = as_tensor(y_true), as_tensor(y_pred)
        if not self.sparse_y_true:
            y_true = ops.argmax(y_true, axis=self.axis)
        if not self.sparse_y_pred:
            y_pred = ops.argmax(y_pred, axis=self.axis)
        y_true = ops.reshape(ops.cast(y_true, self.dtype), (-1,))
        y_pred = ops.reshape(ops.cast(y_pred, self.dtype), (-1,))
        if sample_weight is None:
            sample_weight = 1
        else:
            sample_weight = as_tensor(sample_weight)
            if "float" in str(sample_weight.dtype) and "int" in self.dtype:
                warnings.warn(
                    f"{self.__class__.__name__}: float `sample_weight` is cast to the metric's "
                    f"dtype {self.dtype} (truncated); pass integer weights or a float dtype.",
                    stacklevel=2,
                )
        sample_weight = ops.cast(as_tensor(sample_weight), self.dtype)
        sample_weight = ops.broadcast_to(ops.reshape(sample_weight, (-1,)), y_true.shape)
        n = self.num_classes
        # Labels or predictions outside [0, num_classes), and the ignored class, get weight 0.
        valid = ops.logical_and(
            ops.logical_and(ops.greater_equal(y_true, 0), ops.less(y_true, n)),
            ops.logical_and(ops.greater_equal(y_pred, 0), ops.less(y_pred, n)),
        )
        if self.ignore_class is not None:
            valid = ops.logical_and(valid, ops.not_equal(y_true, self.ignore_class))
        sample_weight = ops.where(valid, sample_weight, 0)
        # one_hot(labels)^T @ (weights * one_hot(predictions)) rather than a bincount, whose
        # output shape cannot be traced in a compiled train step; float64 keeps integer counts
        # exact.
        true_onehot = ops.one_hot(ops.where(valid, y_true, 0), n, dtype="float64")
        pred_onehot = ops.one_hot(ops.where(valid, y_pred, 0), n, dtype="float64")
        weighted = ops.multiply(pred_onehot, ops.expand_dims(ops.cast(sample_weight, "float64"), 1))
        current = ops.matmul(ops.transpose(true_onehot), weighted)
        self.total_cm.assign_add(ops.cast(current, self.dtype))

    def reset_state(self):
        self.total_cm.assign(ops.zeros(self.total_cm.shape, dtype=self.total_cm.dtype))


class IoU(_IoUBase):
    """Intersection-over-union `TP / (TP + FP + FN)`, averaged over `target_class_ids`.

    Classes that never occur in labels or predictions are left out of the average.

    Args:
        num_classes: number of classes; the confusion matrix is (num_classes, num_classes).
        target_class_ids: the class ids whose IoU is averaged.
        name: the metric's name.
        dtype: the confusion matrix dtype (int32 by default).
        ignore_class: a label id left out of the counts (e.g. a "void" class), or None.
        sparse_y_true: whether labels are class ids (True) or one-hot/scores (argmax taken).
        sparse_y_pred: whether predictions are class ids (True) or scores (argmax taken).
        axis: the class axis for the argmax.

    Example:
        >>> m = keratron.metrics.IoU(num_classes=2, target_class_ids=[0])
        >>> round(float(m([0, 0, 1, 1], [0, 1, 0, 1])), 4)
        0.3333
    """

    def __init__(
        self,
        num_classes: int,
        target_class_ids,
        name: str | None = None,
        dtype=None,
        ignore_class: int | None = None,
        sparse_y_true: bool = True,
        sparse_y_pred: bool = True,
        axis: int = -1,
    ):
        super().__init__(
            num_classes=num_classes,
            name=name,
            dtype=dtype,
            ignore_class=ignore_class,
            sparse_y_true=sparse_y_true,
            sparse_y_pred=sparse_y_pred,
            axis=axis,
        )
        if max(target_class_ids) >= num_classes:
            raise ValueError(
                f"{self.__class__.__name__}: `target_class_ids` must lie in [0, {num_classes}). "
                f"Received: target_class_ids={list(target_class_ids)}"
            )
        self.target_class_ids = list(target_class_ids)

    def result(self):
        cm = ops.cast(self.total_cm, "float32")
        true_positives = ops.diag(cm)
        denominator = ops.subtract(
            ops.add(ops.sum(cm, axis=0), ops.sum(cm, axis=1)), true_positives
        )
        ids = ops.convert_to_tensor(self.target_class_ids, dtype="int32")
        true_positives = ops.take(true_positives, ids)
        denominator = ops.take(denominator, ids)
        valid = ops.greater(denominator, 1e-9)
        iou = ops.divide(true_positives, ops.add(denominator, config.epsilon()))
        iou = ops.where(valid, iou, 0.0)
        num_valid = ops.sum(ops.cast(valid, "float32"))
        return ops.divide(ops.sum(iou, axis=self.axis), ops.add(num_valid, config.epsilon()))

    def get_config(self):
        return {
            "name": self.name,
            "dtype": self.dtype,
            "num_classes": self.num_classes,
            "target_class_ids": self.target_class_ids,
            "ignore_class": self.ignore_class,
            "sparse_y_true": self.sparse_y_true,
            "sparse_y_pred": self.sparse_y_pred,
            "axis": self.axis,
        }


class BinaryIoU(IoU):
    """IoU of a binary task: predictions >= `threshold` are class 1, the rest class 0.

    Args:
        target_class_ids: which of (0, 1) to average over.
        threshold: the decision threshold on `y_pred`.
        name, dtype: see `IoU`.

    Example:
        >>> m = keratron.metrics.BinaryIoU(target_class_ids=[1], threshold=0.5)
        >>> round(float(m([0, 1, 0, 1], [0.1, 0.9, 0.6, 0.4])), 4)
        0.3333
    """

    def __init__(self, target_class_ids=(0, 1), threshold: float = 0.5, name=None, dtype=None):
        super().__init__(num_classes=2, target_class_ids=target_class_ids, name=name, dtype=dtype)
        self.threshold = threshold

    def update_state(self, y_true, y_pred, sample_weight=None):
        y_pred = ops.greater_equal(ops.cast(as_tensor(y_pred), "float32"), self.threshold)
        return super().update_state(y_true, ops.cast(y_pred, self.dtype), sample_weight)

    def get_config(self):
        return {
            "target_class_ids": self.target_class_ids,
            "threshold": self.threshold,
            "name": self.name,
            "dtype": self.dtype,
        }


class MeanIoU(IoU):
    """IoU averaged over all `num_classes` classes.

    Example:
        >>> m = keratron.metrics.MeanIoU(num_classes=2)
        >>> round(float(m([0, 0, 1, 1], [0, 1, 0, 1])), 4)
        0.3333
    """

    def __init__(
        self,
        num_classes: int,
        name: str | None = None,
        dtype=None,
        ignore_class: int | None = None,
        sparse_y_true: bool = True,
        sparse_y_pred: bool = True,
        axis: int = -1,
    ):
        super().__init__(
            num_classes=num_classes,
            target_class_ids=list(range(num_classes)),
            name=name,
            dtype=dtype,
            ignore_class=ignore_class,
            sparse_y_true=sparse_y_true,
            sparse_y_pred=sparse_y_pred,
            axis=axis,
        )

    def get_config(self):
        config = super().get_config()
        del config["target_class_ids"]
        return config


class OneHotIoU(IoU):
    """`IoU` for one-hot labels (and, by default, score predictions); argmax along `axis`.

    Example:
        >>> m = keratron.metrics.OneHotIoU(num_classes=2, target_class_ids=[1])
        >>> round(float(m([[1, 0], [0, 1]], [[0.8, 0.2], [0.4, 0.6]])), 4)
        1.0
    """

    def __init__(
        self,
        num_classes: int,
        target_class_ids,
        name: str | None = None,
        dtype=None,
        ignore_class: int | None = None,
        sparse_y_pred: bool = False,
        axis: int = -1,
    ):
        super().__init__(
            num_classes=num_classes,
            target_class_ids=target_class_ids,
            name=name,
            dtype=dtype,
            ignore_class=ignore_class,
            sparse_y_true=False,
            sparse_y_pred=sparse_y_pred,
            axis=axis,
        )

    def get_config(self):
        config = super().get_config()
        del config["sparse_y_true"]
        return config


class OneHotMeanIoU(MeanIoU):
    """`MeanIoU` for one-hot labels (and, by default, score predictions).

    Example:
        >>> m = keratron.metrics.OneHotMeanIoU(num_classes=2)
        >>> round(float(m([[1, 0], [0, 1]], [[0.8, 0.2], [0.4, 0.6]])), 4)
        1.0
    """

    def __init__(
        self,
        num_classes: int,
        name: str | None = None,
        dtype=None,
        ignore_class: int | None = None,
        sparse_y_pred: bool = False,
        axis: int = -1,
    ):
        super().__init__(
            num_classes=num_classes,
            name=name,
            dtype=dtype,
            ignore_class=ignore_class,
            sparse_y_true=False,
            sparse_y_pred=sparse_y_pred,
            axis=axis,
        )

    def get_config(self):
        config = super().get_config()
        del config["sparse_y_true"]
        return config
