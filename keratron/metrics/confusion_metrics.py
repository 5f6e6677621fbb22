"""Threshold metrics: TP/FP/TN/FN counts, Precision, Recall, AUC, and the
sensitivity/specificity/precision/recall-at-a-constraint family, as in Keras 3."""

from __future__ import annotations

import numpy as np

from keratron import config, ops
from keratron.autodiff.tensor import convert_to_tensor
from keratron.metrics import metrics_utils
from keratron.metrics.metric import Metric
from keratron.metrics.metrics_utils import (
    AUCCurve,
    AUCSummationMethod,
    ConfusionMatrix,
    update_confusion_matrix_variables,
)
from keratron.metrics.reduction_metrics import snapshot
from keratron.ops.utils import as_tensor

__all__ = [
    "TruePositives",
    "FalsePositives",
    "TrueNegatives",
    "FalseNegatives",
    "Precision",
    "Recall",
    "AUC",
    "SensitivityAtSpecificity",
    "SpecificityAtSensitivity",
    "PrecisionAtRecall",
    "RecallAtPrecision",
]

TP, FP = ConfusionMatrix.TRUE_POSITIVES, ConfusionMatrix.FALSE_POSITIVES
TN, FN = ConfusionMatrix.TRUE_NEGATIVES, ConfusionMatrix.FALSE_NEGATIVES


def _ratio(a, b):
    # a / (a + b), 0 where both are 0.
    return ops.divide_no_nan(a, ops.add(a, b))


class _ConfusionMatrixConditionCount(Metric):
    _condition: ConfusionMatrix

    def __init__(self, thresholds=None, name=None, dtype=None):
        super().__init__(name=name, dtype=dtype)
        self.init_thresholds = thresholds
        self.thresholds = metrics_utils.parse_init_thresholds(thresholds, 0.5)
        self._evenly = metrics_utils.is_evenly_distributed_thresholds(self.thresholds)
        self.accumulator = self.add_variable(
            shape=(len(self.thresholds),), initializer="zeros", name="accumulator"
        )

    def update_state(self, y_true, y_pred, sample_weight=None):
        update_confusion_matrix_variables(
            {self._condition: self.accumulator},
            y_true,
            y_pred,
            thresholds=self.thresholds,
            thresholds_distributed_evenly=self._evenly,
            sample_weight=sample_weight,
        )

    def result(self):
        value = snapshot(self.accumulator)
        return value[0] if len(self.thresholds) == 1 else value

    def get_config(self):
        return {**super().get_config(), "thresholds": self.init_thresholds}


class TruePositives(_ConfusionMatrixConditionCount):
    """Weighted count of positives predicted positive (score > threshold).

    Args:
        thresholds: a float or list of floats in [0, 1]; default 0.5. One count per threshold.
        name, dtype: see `Metric`.

    Example:
        >>> float(keratron.metrics.TruePositives()([0, 1, 1, 1], [1, 0, 1, 1]))
        2.0
    """

    _condition = TP


class FalsePositives(_ConfusionMatrixConditionCount):
    """Weighted count of negatives predicted positive (score > threshold).

    Example:
        >>> float(keratron.metrics.FalsePositives()([0, 1, 0, 0], [0, 0, 1, 1]))
        2.0
    """

    _condition = FP


class TrueNegatives(_ConfusionMatrixConditionCount):
    """Weighted count of negatives predicted negative (score <= threshold).

    Example:
        >>> float(keratron.metrics.TrueNegatives()([0, 1, 0, 0], [1, 1, 0, 0]))
        2.0
    """

    _condition = TN


class FalseNegatives(_ConfusionMatrixConditionCount):
    """Weighted count of positives predicted negative (score <= threshold).

    Example:
        >>> float(keratron.metrics.FalseNegatives()([0, 1, 1, 1], [0, 1, 0, 0]))
        2.0
    """

    _condition = FN


class _PrecisionRecall(Metric):
    _other: ConfusionMatrix
    _other_name: str

    def __init__(self, thresholds=None, top_k=None, class_id=None, name=None, dtype=None):
        super().__init__(name=name, dtype=dtype)
        self.init_thresholds = thresholds
        self.top_k = top_k
        self.class_id = class_id
        # With top_k, every kept prediction is a positive: the threshold sits below all.
        default = 0.5 if top_k is None else metrics_utils.NEG_INF
        self.thresholds = metrics_utils.parse_init_thresholds(thresholds, default)
        self._evenly = metrics_utils.is_evenly_distributed_thresholds(self.thresholds)
        n = len(self.thresholds)
        self.true_positives = self.add_variable(
            shape=(n,), initializer="zeros", name="true_positives"
        )
        self._other_var = self.add_variable(shape=(n,), initializer="zeros", name=self._other_name)
        setattr(self, self._other_name, self._other_var)

    def update_state(self, y_true, y_pred, sample_weight=None):
        update_confusion_matrix_variables(
            {TP: self.true_positives, self._other: self._other_var},
            y_true,
            y_pred,
            thresholds=self.thresholds,
            thresholds_distributed_evenly=self._evenly,
            top_k=self.top_k,
            class_id=self.class_id,
            sample_weight=sample_weight,
        )

    def result(self):
        value = _ratio(self.true_positives, self._other_var)
        return value[0] if len(self.thresholds) == 1 else value

    def get_config(self):
        return {
            **super().get_config(),
            "thresholds": self.init_thresholds,
            "top_k": self.top_k,
            "class_id": self.class_id,
        }


class Precision(_PrecisionRecall):
    """TP / (TP + FP): how many predicted positives are positive.

    Args:
        thresholds: float or list of floats in [0, 1]; default 0.5 (or, with `top_k`, below
            every score). One value per threshold.
        top_k: only each row's top k scores can be positive.
        class_id: score only this class.
        name, dtype: see `Metric`.

    Example:
        >>> float(keratron.metrics.Precision()([0, 1, 1, 1], [1, 0, 1, 1]))
        0.6666666865348816
    """

    _other = FP
    _other_name = "false_positives"


class Recall(_PrecisionRecall):
    """TP / (TP + FN): how many positives are predicted positive.

    Args:
        thresholds, top_k, class_id, name, dtype: as in `Precision`.

    Example:
        >>> float(keratron.metrics.Recall()([0, 1, 1, 1], [1, 0, 1, 1]))
        0.6666666865348816
    """

    _other = FN
    _other_name = "false_negatives"


def _check_summation(curve, summation_method):
    curve = curve if isinstance(curve, AUCCurve) else AUCCurve.from_str(curve)
    if not isinstance(summation_method, AUCSummationMethod):
        summation_method = AUCSummationMethod.from_str(summation_method)
    return curve, summation_method


class AUC(Metric):
    """Area under the ROC or precision-recall curve, by a Riemann sum over thresholds.

    Args:
        num_thresholds: number of thresholds (> 1), evenly spaced in [0, 1]; default 200.
        curve: "ROC" (default), "PR" or "PRGAIN".
        summation_method: "interpolation" (default; for PR, the Davis & Goadrich
            interpolation), "minoring" or "majoring".
        name, dtype: see `Metric`.
        thresholds: explicit thresholds in [0, 1] (replaces `num_thresholds`).
        multi_label: one curve per label column, averaged.
        num_labels: number of labels when `multi_label`, to build the state eagerly.
        label_weights: per-label weights for the average (or for the counts without
            `multi_label`).
        from_logits: apply a sigmoid to predictions first.

    Example:
        >>> m = keratron.metrics.AUC(num_thresholds=3)
        >>> float(m([0, 0, 1, 1], [0, 0.5, 0.3, 0.9]))
        0.75
    """

    def __init__(
        self,
        num_thresholds=200,
        curve="ROC",
        summation_method="interpolation",
        name=None,
        dtype=None,
        thresholds=None,
        multi_label=False,
        num_labels=None,
        label_weights=None,
        from_logits=False,
    ):
        self.curve, self.summation_method = _check_summation(curve, summation_method)
        self._init_from_thresholds = thresholds is not None
        if thresholds is not None:
            self.num_thresholds = len(thresholds) + 2
            thresholds = sorted(thresholds)
            self._evenly = metrics_utils.is_evenly_distributed_thresholds(
                np.array([0.0] + thresholds + [1.0])
            )
        else:
            if num_thresholds <= 1:
                raise ValueError(
                    "AUC: `num_thresholds` must be an integer > 1. "
                    f"Received: num_thresholds={num_thresholds}"
                )
            self.num_thresholds = num_thresholds
            thresholds = [(i + 1) / (num_thresholds - 1) for i in range(num_thresholds - 2)]
            self._evenly = True
        # End points just outside [0, 1] so that 0 and 1 predictions land inside the range.
        eps = config.epsilon()
        self._thresholds = np.array([0.0 - eps] + list(thresholds) + [1.0 + eps])
        super().__init__(name=name, dtype=dtype)
        self.multi_label = multi_label
        self.num_labels = num_labels
        self.label_weights = (
            None if label_weights is None else convert_to_tensor(label_weights, self.dtype)
        )
        self._from_logits = from_logits
        self._built = False
        if multi_label:
            if num_labels:
                self._build((None, num_labels))
        else:
            if num_labels:
                raise ValueError("AUC: `num_labels` is needed only when `multi_label` is True.")
            self._build(None)

    @property
    def thresholds(self) -> list:
        return list(self._thresholds)

    def _build(self, shape):
        if self.multi_label:
            if len(shape) != 2:
                raise ValueError(
                    "AUC: `y_pred` must have rank 2 when `multi_label=True`. "
                    f"Received: y_pred.shape={tuple(shape)}"
                )
            self._num_labels = shape[1]
            var_shape = (self.num_thresholds, self._num_labels)
        else:
            var_shape = (self.num_thresholds,)
        self._build_input_shape = shape
        for name in ("true_positives", "false_positives", "true_negatives", "false_negatives"):
            setattr(self, name, self.add_variable(shape=var_shape, initializer="zeros", name=name))
        self._built = True

    def update_state(self, y_true, y_pred, sample_weight=None):
        y_pred = as_tensor(y_pred)
        if not self._built:
            self._build(y_pred.shape)
        if self._from_logits:
            y_pred = ops.sigmoid(y_pred)
        update_confusion_matrix_variables(
            {
                TP: self.true_positives,
                TN: self.true_negatives,
                FP: self.false_positives,
                FN: self.false_negatives,
            },
            y_true,
            y_pred,
            self._thresholds,
            thresholds_distributed_evenly=self._evenly,
            sample_weight=sample_weight,
            multi_label=self.multi_label,
            label_weights=None if self.multi_label else self.label_weights,
        )

    def _average(self, terms):
        if not self.multi_label:
            return ops.sum(terms)
        by_label = ops.sum(terms, axis=0)
        if self.label_weights is None:
            return ops.mean(by_label)
        return ops.divide_no_nan(
            ops.sum(ops.multiply(by_label, self.label_weights)), ops.sum(self.label_weights)
        )

    def interpolate_pr_auc(self):
        """PR AUC with precision interpolated between thresholds (Davis & Goadrich, 2006)."""
        n = self.num_thresholds
        tp, fp, fn = self.true_positives, self.false_positives, self.false_negatives
        dtp = ops.subtract(tp[: n - 1], tp[1:])
        p = ops.add(tp, fp)
        dp = ops.subtract(p[: n - 1], p[1:])
        slope = ops.divide_no_nan(dtp, ops.maximum(dp, 0.0))
        intercept = ops.subtract(tp[1:], ops.multiply(slope, p[1:]))
        both = ops.logical_and(ops.greater(p[: n - 1], 0.0), ops.greater(p[1:], 0.0))
        safe_ratio = ops.where(both, ops.divide_no_nan(p[: n - 1], ops.maximum(p[1:], 0.0)), 1.0)
        increment = ops.divide_no_nan(
            ops.multiply(slope, ops.add(dtp, ops.multiply(intercept, ops.log(safe_ratio)))),
            ops.maximum(ops.add(tp[1:], fn[1:]), 0.0),
        )
        return self._average(increment)

    def result(self):
        if not self._built:
            raise ValueError("AUC.result: no data seen yet; call update_state first.")
        if self.curve == AUCCurve.PR and self.summation_method == AUCSummationMethod.INTERPOLATION:
            return self.interpolate_pr_auc()
        tp, fp = self.true_positives, self.false_positives
        tn, fn = self.true_negatives, self.false_negatives
        recall = _ratio(tp, fn)
        if self.curve == AUCCurve.ROC:
            x, y = _ratio(fp, tn), recall
        elif self.curve == AUCCurve.PR:
            x, y = recall, _ratio(tp, fp)
        else:
            # Precision-recall gain (Flach & Kull, 2015), with Keras's conventions where it
            # diverges: no true positives -> recall gain 0, precision gain 1; negative recall
            # gain -> 0.
            scale = ops.divide_no_nan(ops.add(tp, fn), ops.add(tn, fp))
            recall_gain = ops.subtract(1.0, ops.multiply(scale, ops.divide_no_nan(fn, tp)))
            precision_gain = ops.subtract(1.0, ops.multiply(scale, ops.divide_no_nan(fp, tp)))
            no_tp = ops.equal(tp, 0.0)
            recall_gain = ops.maximum(ops.where(no_tp, 0.0, recall_gain), 0.0)
            precision_gain = ops.where(no_tp, 1.0, precision_gain)
            x, y = recall_gain, precision_gain
        n = self.num_thresholds
        if self.summation_method == AUCSummationMethod.INTERPOLATION:
            heights = ops.divide(ops.add(y[: n - 1], y[1:]), 2.0)
        elif self.summation_method == AUCSummationMethod.MINORING:
            heights = ops.minimum(y[: n - 1], y[1:])
        else:
            heights = ops.maximum(y[: n - 1], y[1:])
        return self._average(ops.multiply(ops.subtract(x[: n - 1], x[1:]), heights))

    def reset_state(self):
        if self._built:
            super().reset_state()

    def get_config(self):
        lw = self.label_weights
        config = {
            **super().get_config(),
            "num_thresholds": self.num_thresholds,
            "curve": self.curve.value,
            "summation_method": self.summation_method.value,
            "multi_label": self.multi_label,
            "num_labels": self.num_labels,
            "label_weights": None if lw is None else lw.numpy().tolist(),
            "from_logits": self._from_logits,
        }
        if self._init_from_thresholds:
            # Without the end points, so that from_config rebuilds the same thresholds.
            config["thresholds"] = [float(t) for t in self.thresholds[1:-1]]
        return config


class _SensitivitySpecificityBase(Metric):
    def __init__(self, value, num_thresholds=200, class_id=None, name=None, dtype=None):
        super().__init__(name=name, dtype=dtype)
        if num_thresholds <= 0:
            raise ValueError(
                f"{self.__class__.__name__}: `num_thresholds` must be an integer > 0. "
                f"Received: num_thresholds={num_thresholds}"
            )
        self.value = value
        self.class_id = class_id
        if num_thresholds == 1:
            self.thresholds = [0.5]
            self._evenly = False
        else:
            inner = [(i + 1) / (num_thresholds - 1) for i in range(num_thresholds - 2)]
            self.thresholds = [0.0] + inner + [1.0]
            self._evenly = True
        n = len(self.thresholds)
        for name in ("true_positives", "false_positives", "true_negatives", "false_negatives"):
            setattr(self, name, self.add_variable(shape=(n,), initializer="zeros", name=name))

    def update_state(self, y_true, y_pred, sample_weight=None):
        update_confusion_matrix_variables(
            {
                TP: self.true_positives,
                TN: self.true_negatives,
                FP: self.false_positives,
                FN: self.false_negatives,
            },
            y_true,
            y_pred,
            thresholds=self.thresholds,
            thresholds_distributed_evenly=self._evenly,
            class_id=self.class_id,
            sample_weight=sample_weight,
        )

    def _rates(self):
        tp, fp = self.true_positives, self.false_positives
        tn, fn = self.true_negatives, self.false_negatives
        return {
            "sensitivity": _ratio(tp, fn),
            "recall": _ratio(tp, fn),
            "specificity": _ratio(tn, fp),
            "precision": _ratio(tp, fp),
        }

    def _max_under_constraint(self, constrained, dependent):
        feasible = ops.greater_equal(constrained, float(self.value))
        return ops.max(ops.where(feasible, dependent, 0.0), initial=0.0)

    def get_config(self):
        return {**super().get_config(), "class_id": self.class_id}


class SensitivityAtSpecificity(_SensitivitySpecificityBase):
    """Best sensitivity (recall) among thresholds whose specificity is >= `specificity`.

    Example:
        >>> m = keratron.metrics.SensitivityAtSpecificity(0.5)
        >>> float(m([0, 0, 0, 1, 1], [0, 0.3, 0.8, 0.3, 0.8]))
        0.5
    """

    def __init__(self, specificity, num_thresholds=200, class_id=None, name=None, dtype=None):
        if not 0 <= specificity <= 1:
            raise ValueError(
                "SensitivityAtSpecificity: `specificity` must be in [0, 1]. "
                f"Received: specificity={specificity}"
            )
        self.specificity = specificity
        self.num_thresholds = num_thresholds
        super().__init__(specificity, num_thresholds, class_id, name, dtype)

    def result(self):
        r = self._rates()
        return self._max_under_constraint(r["specificity"], r["sensitivity"])

    def get_config(self):
        return {
            **super().get_config(),
            "num_thresholds": self.num_thresholds,
            "specificity": self.specificity,
        }


class SpecificityAtSensitivity(_SensitivitySpecificityBase):
    """Best specificity among thresholds whose sensitivity is >= `sensitivity`.

    Example:
        >>> m = keratron.metrics.SpecificityAtSensitivity(0.5)
        >>> float(m([0, 0, 0, 1, 1], [0, 0.3, 0.8, 0.3, 0.8]))
        0.6666666865348816
    """

    def __init__(self, sensitivity, num_thresholds=200, class_id=None, name=None, dtype=None):
        if not 0 <= sensitivity <= 1:
            raise ValueError(
                "SpecificityAtSensitivity: `sensitivity` must be in [0, 1]. "
                f"Received: sensitivity={sensitivity}"
            )
        self.sensitivity = sensitivity
        self.num_thresholds = num_thresholds
        super().__init__(sensitivity, num_thresholds, class_id, name, dtype)

    def result(self):
        r = self._rates()
        return self._max_under_constraint(r["sensitivity"], r["specificity"])

    def get_config(self):
        return {
            **super().get_config(),
            "num_thresholds": self.num_thresholds,
            "sensitivity": self.sensitivity,
        }


class PrecisionAtRecall(_SensitivitySpecificityBase):
    """Best precision among thresholds whose recall is >= `recall`.

    Example:
        >>> m = keratron.metrics.PrecisionAtRecall(0.5)
        >>> float(m([0, 0, 0, 1, 1], [0, 0.3, 0.8, 0.3, 0.8]))
        0.5
    """

    def __init__(self, recall, num_thresholds=200, class_id=None, name=None, dtype=None):
        if not 0 <= recall <= 1:
            raise ValueError(
                f"PrecisionAtRecall: `recall` must be in [0, 1]. Received: recall={recall}"
            )
        self.recall = recall
        self.num_thresholds = num_thresholds
        super().__init__(recall, num_thresholds, class_id, name, dtype)

    def result(self):
        r = self._rates()
        return self._max_under_constraint(r["recall"], r["precision"])

    def get_config(self):
        return {
            **super().get_config(),
            "num_thresholds": self.num_thresholds,
            "recall": self.recall,
        }


class RecallAtPrecision(_SensitivitySpecificityBase):
    """Best recall among thresholds whose precision is >= `precision`.

    Example:
        >>> m = keratron.metrics.RecallAtPrecision(0.8)
        >>> float(m([0, 0, 1, 1], [0, 0.5, 0.3, 0.9]))
        0.5
    """

    def __init__(self, precision, num_thresholds=200, class_id=None, name=None, dtype=None):
        if not 0 <= precision <= 1:
            raise ValueError(
                f"RecallAtPrecision: `precision` must be in [0, 1]. Received: precision={precision}"
            )
        self.precision = precision
        self.num_thresholds = num_thresholds
        super().__init__(precision, num_thresholds, class_id, name, dtype)

    def result(self):
        r = self._rates()
        return self._max_under_constraint(r["precision"], r["recall"])

    def get_config(self):
        return {
            **super().get_config(),
            "num_thresholds": self.num_thresholds,
            "precision": self.precision,
        }
