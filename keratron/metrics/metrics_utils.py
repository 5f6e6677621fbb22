"""Confusion-matrix accumulation for threshold metrics (Precision, Recall, AUC, counts).

These are state updates, not differentiable computations: they read the batch's torch
values and add into the metric Variables' storage in place, on whatever device the
Variables live, and are never seen by a tape (inside `keratron.function` the same update is
recorded as an effect node and runs at every replay). The rules (strict `pred > threshold`, the
bucketed fast path for evenly spaced thresholds, top-k filtering, `class_id` slicing,
weight broadcasting) are Keras 3's.
"""

from __future__ import annotations

from enum import Enum

import numpy as np
import torch

from keratron import config
from keratron.autodiff.function import is_tracing, record_effect
from keratron.autodiff.tensor import mark_written
from keratron.ops.utils import as_tensor

# Predictions outside the top k are pushed below every threshold.
NEG_INF = -1e10


class ConfusionMatrix(Enum):
    TRUE_POSITIVES = "tp"
    FALSE_POSITIVES = "fp"
    TRUE_NEGATIVES = "tn"
    FALSE_NEGATIVES = "fn"


class AUCCurve(Enum):
    ROC = "ROC"
    PR = "PR"
    PRGAIN = "PRGAIN"

    @staticmethod
    def from_str(key):
        for member in AUCCurve:
            if str(key).upper() == member.value:
                return member
        raise ValueError(f"Invalid AUC curve value: {key!r}. Expected one of ROC, PR, PRGAIN.")


class AUCSummationMethod(Enum):
    INTERPOLATION = "interpolation"
    MAJORING = "majoring"
    MINORING = "minoring"

    @staticmethod
    def from_str(key):
        for member in AUCSummationMethod:
            if str(key).lower() == member.value:
                return member
        raise ValueError(
            f"Invalid AUC summation method value: {key!r}. Expected one of interpolation, "
            "majoring, minoring."
        )


def to_list(x) -> list:
    if isinstance(x, (list, tuple)):
        return list(x)
    if isinstance(x, np.ndarray):
        return x.tolist()
    return [x]


def parse_init_thresholds(thresholds, default_threshold=0.5) -> list:
    """Validates user thresholds (each in [0, 1]) and returns them as a list."""
    if thresholds is not None:
        bad = [t for t in to_list(thresholds) if t is None or t < 0 or t > 1]
        if bad:
            raise ValueError(f"Threshold values must be in [0, 1]. Received: {bad}")
    return to_list(default_threshold if thresholds is None else thresholds)


def is_evenly_distributed_thresholds(thresholds) -> bool:
    """True for thresholds i / (n - 1), i = 0..n-1 (n >= 3): the bucketed path applies."""
    thresholds = np.asarray(thresholds, dtype=np.float64)
    n = len(thresholds)
    if n < 3:
        return False
    even = np.arange(n, dtype=np.float32) / (n - 1)
    return bool(np.allclose(thresholds, even, atol=config.epsilon()))


def _same_rank(x1, x2, expand_rank_1=True):
    # The torch twin of losses.loss.squeeze_or_expand_to_same_rank.
    r1, r2 = x1.dim(), x2.dim()
    if r1 == r2 + 1 and x1.shape[-1] == 1:
        if r2 == 1 and expand_rank_1:
            x2 = x2.unsqueeze(-1)
        else:
            x1 = x1.squeeze(-1)
    elif r2 == r1 + 1 and x2.shape[-1] == 1:
        if r1 == 1 and expand_rank_1:
            x1 = x1.unsqueeze(-1)
        else:
            x2 = x2.squeeze(-1)
    return x1, x2


def filter_top_k(x: torch.Tensor, k: int) -> torch.Tensor:
    """Keeps the top `k` entries of each row (last axis); the others become NEG_INF."""
    idx = torch.topk(x, k, dim=-1).indices
    mask = torch.zeros_like(x).scatter_(-1, idx, 1.0)
    return x * mask + NEG_INF * (1 - mask)


def update_confusion_matrix_variables(
    variables_to_update: dict,
    y_true,
    y_pred,
    thresholds,
    top_k=None,
    class_id=None,
    sample_weight=None,
    multi_label=False,
    label_weights=None,
    thresholds_distributed_evenly=False,
):
    """Adds one batch's true/false positive/negative counts (per threshold) to Variables.

    Args:
        variables_to_update: {ConfusionMatrix member: Variable of shape (num_thresholds,)
            or (num_thresholds, num_labels) when multi_label}.
        y_true, y_pred: labels (0/1) and scores in [0, 1], same shape up to a trailing 1.
        thresholds: the thresholds; a prediction is positive when strictly greater.
        top_k: keep only each row's top k predictions as candidates for positive.
        class_id: score only this class (last axis index).
        sample_weight: per-sample (or broadcastable) weights.
        multi_label: count each label (column) separately.
        label_weights: per-label weights (not with multi_label).
        thresholds_distributed_evenly: use the bucketed O(n + T) path.
    """
    if multi_label and label_weights is not None:
        raise ValueError(
            "update_confusion_matrix_variables: `label_weights` for multi-label data is "
            "applied by the metric, not here; pass label_weights=None with multi_label=True."
        )
    if not variables_to_update:
        return
    bad = [k for k in variables_to_update if k not in list(ConfusionMatrix)]
    if bad:
        raise ValueError(
            f"Invalid confusion matrix keys: {bad}. Expected members of {list(ConfusionMatrix)}."
        )
    variables = list(variables_to_update.values())
    inputs = [as_tensor(y_true), as_tensor(y_pred)]
    if sample_weight is not None:
        inputs.append(as_tensor(sample_weight))
    if label_weights is not None:
        label_weights = as_tensor(label_weights)._value

    def run(y_true, y_pred, sample_weight=None):
        counts = _counts(
            variables[0]._value,
            y_true,
            y_pred,
            thresholds,
            top_k,
            class_id,
            sample_weight,
            multi_label,
            label_weights,
            thresholds_distributed_evenly,
        )
        for key, var in variables_to_update.items():
            var._value.add_(counts[key].to(var._value.dtype))
            mark_written([var])

    if is_tracing():
        # Inside keratron.function the update becomes an effect node: it runs on the real
        # values at every replay and marks the variables as changed.
        record_effect(run, inputs, variables)
    else:
        run(*(t._value for t in inputs))


def _counts(
    like,
    y_true,
    y_pred,
    thresholds,
    top_k,
    class_id,
    sample_weight,
    multi_label,
    label_weights,
    evenly,
):
    dtype, device = like.dtype, like.device
    y_true = y_true.to(device=device, dtype=dtype)
    y_pred = y_pred.to(device=device, dtype=dtype)
    thresholds_list = [float(t) for t in to_list(thresholds)]
    with_eps = thresholds_list[0] < 0.0 or thresholds_list[-1] > 1.0
    thr = torch.tensor(thresholds_list, dtype=dtype, device=device)

    y_pred, y_true = _same_rank(y_pred, y_true)
    if sample_weight is not None:
        sample_weight = sample_weight.to(device=device, dtype=dtype).unsqueeze(-1)
        _, sample_weight = _same_rank(y_true, sample_weight, expand_rank_1=False)
    if top_k is not None:
        y_pred = filter_top_k(y_pred, int(top_k))
    if class_id is not None:
        if y_pred.dim() == 1:
            raise ValueError(
                "When class_id is provided, y_pred must be a 2D array of shape "
                f"(num_samples, num_classes). Received: y_pred.shape={tuple(y_pred.shape)}"
            )
        y_true = y_true[..., class_id, None]
        y_pred = y_pred[..., class_id, None]
    if label_weights is not None:
        label_weights = label_weights.to(device=device, dtype=dtype)
    if evenly:
        return _bucketed_counts(
            y_true,
            y_pred,
            len(thresholds_list),
            multi_label,
            sample_weight,
            label_weights,
            with_eps,
        )
    return _threshold_counts(y_true, y_pred, thr, multi_label, sample_weight, label_weights)


def _threshold_counts(y_true, y_pred, thr, multi_label, sample_weight, label_weights):
    # Compare every prediction with every threshold: (T, N) or (T, batch, labels).
    if multi_label:
        preds = y_pred.unsqueeze(0)
        labels = y_true.bool().unsqueeze(0)
        thr_b = thr.reshape((-1,) + (1,) * y_pred.dim())
    else:
        preds = y_pred.reshape(1, -1)
        labels = y_true.bool().reshape(1, -1)
        thr_b = thr.reshape(-1, 1)
    pred_pos = preds > thr_b
    weights = None
    if sample_weight is not None:
        w = torch.broadcast_to(sample_weight, y_pred.shape)
        weights = w.unsqueeze(0) if multi_label else w.reshape(1, -1)
    if label_weights is not None and not multi_label:
        lw = torch.broadcast_to(label_weights.unsqueeze(0), y_pred.shape).reshape(1, -1)
        weights = lw if weights is None else weights * lw

    def count(label, pred):
        hit = label & pred
        if weights is None:
            return hit.to(y_pred.dtype).sum(1)
        return torch.where(
            hit, weights, torch.zeros((), dtype=y_pred.dtype, device=y_pred.device)
        ).sum(1)

    pred_neg = ~pred_pos
    label_neg = ~labels
    return {
        ConfusionMatrix.TRUE_POSITIVES: count(labels, pred_pos),
        ConfusionMatrix.FALSE_POSITIVES: count(label_neg, pred_pos),
        ConfusionMatrix.TRUE_NEGATIVES: count(label_neg, pred_neg),
        ConfusionMatrix.FALSE_NEGATIVES: count(labels, pred_neg),
    }


def _bucketed_counts(
    y_true, y_pred, num_thresholds, multi_label, sample_weight, label_weights, with_eps
):
    # Evenly spaced thresholds: each prediction falls in one bucket (ceil(p * (T-1)) - 1;
    # a value equal to a threshold is not above it), and the count above threshold i is the
    # sum of buckets >= i: a reverse cumulative sum instead of a (T, N) comparison.
    weights = None
    if sample_weight is not None:
        weights = torch.broadcast_to(sample_weight, y_pred.shape)
        if not multi_label:
            weights = weights.reshape(-1)
    if label_weights is not None:
        lw = torch.broadcast_to(label_weights.unsqueeze(0), y_pred.shape)
        if not multi_label:
            lw = lw.reshape(-1)
        weights = lw if weights is None else weights * lw
    y_pred = y_pred.clamp(0.0, 1.0)
    y_true = y_true.bool().to(y_pred.dtype)
    if not multi_label:
        y_true = y_true.reshape(-1)
        y_pred = y_pred.reshape(-1)
    true_labels = y_true if weights is None else y_true * weights
    false_labels = (1.0 - y_true) if weights is None else (1.0 - y_true) * weights
    buckets = torch.ceil(y_pred * (num_thresholds - 1)) - 1
    if with_eps:
        # The first threshold lies below 0: every prediction is above it.
        buckets = buckets.clamp_min(0)
    buckets = buckets.long()
    # Out-of-range bucket ids are dropped, as a segment sum drops them.
    valid = (buckets >= 0) & (buckets < num_thresholds)
    idx = torch.where(valid, buckets, torch.full_like(buckets, num_thresholds))

    def bucket_sum(values):
        if multi_label:
            v, i = values.transpose(0, 1), idx.transpose(0, 1)  # (labels, batch)
            out = torch.zeros(v.shape[0], num_thresholds + 1, dtype=v.dtype, device=v.device)
            out.scatter_add_(1, i, v)
            return out[:, :num_thresholds]
        out = torch.zeros(num_thresholds + 1, dtype=values.dtype, device=values.device)
        out.scatter_add_(0, idx, values)
        return out[:num_thresholds]

    def reverse_cumsum(b):
        return torch.flip(torch.cumsum(torch.flip(b, (-1,)), dim=-1), (-1,))

    tp = reverse_cumsum(bucket_sum(true_labels))
    fp = reverse_cumsum(bucket_sum(false_labels))
    if multi_label:
        tp, fp = tp.transpose(0, 1), fp.transpose(0, 1)
        total_true, total_false = true_labels.sum(0), false_labels.sum(0)
    else:
        total_true, total_false = true_labels.sum(), false_labels.sum()
    return {
        ConfusionMatrix.TRUE_POSITIVES: tp,
        ConfusionMatrix.FALSE_POSITIVES: fp,
        ConfusionMatrix.TRUE_NEGATIVES: total_false - fp,
        ConfusionMatrix.FALSE_NEGATIVES: total_true - tp,
    }
