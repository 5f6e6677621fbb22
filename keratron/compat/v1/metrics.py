"""`tf.metrics` (TF1): streaming metrics as `(value, update_op)` over local variables.

Each metric keeps its running sums in local variables (LOCAL_VARIABLES and METRIC_VARIABLES,
named `<metric>/total:0`, `<metric>/count:0`, ...), so a program runs
`tf.local_variables_initializer()` before the first update and again to reset. `update_op`
adds one batch and returns the metric after it; `value` reads the metric without updating.

Example:
    >>> import keratron.compat.v1 as tf
    >>> with tf.Graph().as_default(), tf.Session() as sess:
    ...     acc, update = tf.metrics.accuracy([1, 0, 1], [1, 1, 1])
    ...     sess.run(tf.local_variables_initializer())
    ...     print(round(float(sess.run(update)), 4))
    0.6667
"""

from __future__ import annotations

import numpy as np

from keratron import ops as kops
from keratron.compat.v1 import array_ops, math_ops
from keratron.compat.v1 import variables as variables_lib
from keratron.compat.v1.framework import (
    GraphKeys,
    add_to_collections,
    convert_to_tensor,
    make_op,
    op_scope,
)

__all__ = [
    "mean",
    "accuracy",
    "precision",
    "recall",
    "true_positives",
    "false_positives",
    "true_negatives",
    "false_negatives",
    "mean_squared_error",
    "mean_absolute_error",
    "root_mean_squared_error",
    "auc",
    "precision_at_thresholds",
    "recall_at_thresholds",
    "mean_per_class_accuracy",
    "mean_iou",
]

METRIC_VARIABLES = "metric_variables"


def _metric_variable(shape, name, dtype="float32"):
    return variables_lib.Variable(
        lambda: array_ops.zeros(shape, dtype),
        trainable=False,
        collections=[GraphKeys.LOCAL_VARIABLES, METRIC_VARIABLES],
        name=name,
    )


def _op(op_type, name, inputs, lower):
    with op_scope(name, op_type) as scope:
        return make_op(op_type, scope, [convert_to_tensor(x) for x in inputs], lower).outputs[0]


def _div_no_nan(a, b, name):
    return _op("DivNoNan", name, [a, b], lambda ctx, x, y: kops.divide_no_nan(x, y))


def _floats(x):
    x = convert_to_tensor(x)
    return x if x.dtype == "float32" else math_ops.cast(x, "float32")


def _broadcast_weights(weights, values):
    """`weights` as float32, broadcast to `values`' shape (one op)."""
    w = _floats(weights)
    return _op(
        "BroadcastWeights",
        "broadcast_weights",
        [w, values],
        lambda ctx, a, v: (
            kops.broadcast_to(a, tuple(v.shape)) if a.ndim else a + kops.zeros_like(v)
        ),
    )


def _check_compatible(metric, labels, predictions):
    if not labels.shape.is_compatible_with(predictions.shape):
        raise ValueError(
            f"{metric}: labels and predictions must have compatible shapes. Received: "
            f"labels.shape={labels.shape}, predictions.shape={predictions.shape}"
        )


def _collect(metrics_collections, updates_collections, value, update):
    if metrics_collections:
        add_to_collections(metrics_collections, value)
    if updates_collections:
        add_to_collections(updates_collections, update)
    return value, update


# ---------------------------------------------------------------------------- mean and kin
def mean(values, weights=None, metrics_collections=None, updates_collections=None, name=None):
    """The (weighted) mean of all `values` seen: `total / count`.

    Returns:
        `(mean, update_op)`.
    """
    with variables_lib.variable_scope(name, "mean"):
        values = _floats(values)
        total = _metric_variable([], "total")
        count = _metric_variable([], "count")
        if weights is None:
            num = math_ops.cast(array_ops.size(values), "float32")
        else:
            w = _broadcast_weights(weights, values)
            values = math_ops.multiply(values, w)
            num = math_ops.reduce_sum(w)
        update_total = total.assign_add(math_ops.reduce_sum(values))
        update_count = count.assign_add(num)
        value = _div_no_nan(total, math_ops.maximum(count, 0.0), "value")
        update = _div_no_nan(update_total, math_ops.maximum(update_count, 0.0), "update_op")
    return _collect(metrics_collections, updates_collections, value, update)


def accuracy(labels, predictions, weights=None, metrics_collections=None,
             updates_collections=None, name=None):  # fmt: skip
    """The (weighted) fraction of `predictions` equal to `labels`."""
    labels, predictions = convert_to_tensor(labels), convert_to_tensor(predictions)
    _check_compatible("accuracy", labels, predictions)
    if labels.dtype != predictions.dtype:
        predictions = math_ops.cast(predictions, labels.dtype)
    is_correct = math_ops.cast(math_ops.equal(predictions, labels), "float32")
    return mean(is_correct, weights, metrics_collections, updates_collections, name or "accuracy")


def mean_squared_error(labels, predictions, weights=None, metrics_collections=None,
                       updates_collections=None, name=None):  # fmt: skip
    """The (weighted) mean of `(labels - predictions) ** 2`."""
    labels, predictions = _floats(labels), _floats(predictions)
    _check_compatible("mean_squared_error", labels, predictions)
    err = math_ops.squared_difference(labels, predictions)
    name = name or "mean_squared_error"
    return mean(err, weights, metrics_collections, updates_collections, name)


def mean_absolute_error(labels, predictions, weights=None, metrics_collections=None,
                        updates_collections=None, name=None):  # fmt: skip
    """The (weighted) mean of `|predictions - labels|`."""
    labels, predictions = _floats(labels), _floats(predictions)
    _check_compatible("mean_absolute_error", labels, predictions)
    err = math_ops.abs(predictions - labels)
    name = name or "mean_absolute_error"
    return mean(err, weights, metrics_collections, updates_collections, name)


def root_mean_squared_error(labels, predictions, weights=None, metrics_collections=None,
                            updates_collections=None, name=None):  # fmt: skip
    """The square root of the streaming mean squared error."""
    labels, predictions = _floats(labels), _floats(predictions)
    _check_compatible("root_mean_squared_error", labels, predictions)
    err = math_ops.squared_difference(labels, predictions)
    mse, update_mse = mean(err, weights, None, None, name or "root_mean_squared_error")
    value, update = math_ops.sqrt(mse), math_ops.sqrt(update_mse)
    return _collect(metrics_collections, updates_collections, value, update)


# ---------------------------------------------------------------------------- counts
def _bools(labels, predictions, metric):
    labels = math_ops.cast(convert_to_tensor(labels), "bool")
    predictions = math_ops.cast(convert_to_tensor(predictions), "bool")
    _check_compatible(metric, labels, predictions)
    return labels, predictions


def _count(default, condition):
    def metric(labels, predictions, weights=None, metrics_collections=None,
               updates_collections=None, name=None):  # fmt: skip
        with variables_lib.variable_scope(name, default):
            lab, pred = _bools(labels, predictions, default)
            values = math_ops.cast(condition(lab, pred), "float32")
            count = _metric_variable([], "count")
            if weights is not None:
                values = math_ops.multiply(values, _broadcast_weights(weights, values))
            value = array_ops.identity(count)
            update = count.assign_add(math_ops.reduce_sum(values))
        return _collect(metrics_collections, updates_collections, value, update)

    metric.__name__ = default
    metric.__doc__ = f"The (weighted) number of {default.replace('_', ' ')} seen."
    return metric


true_positives = _count("true_positives", lambda y, p: math_ops.logical_and(y, p))
false_positives = _count(
    "false_positives", lambda y, p: math_ops.logical_and(math_ops.logical_not(y), p)
)
true_negatives = _count(
    "true_negatives",
    lambda y, p: math_ops.logical_and(math_ops.logical_not(y), math_ops.logical_not(p)),
)
false_negatives = _count(
    "false_negatives", lambda y, p: math_ops.logical_and(y, math_ops.logical_not(p))
)


def _ratio(default, first, second):
    def metric(labels, predictions, weights=None, metrics_collections=None,
               updates_collections=None, name=None):  # fmt: skip
        with variables_lib.variable_scope(name, default):
            lab, pred = _bools(labels, predictions, default)
            a, a_up = first(lab, pred, weights)
            b, b_up = second(lab, pred, weights)

            def lower(ctx, x, y):
                s = x + y
                return kops.where(s > 0, kops.divide_no_nan(x, s), kops.zeros_like(s))

            value = _op("Ratio", "value", [a, b], lower)
            update = _op("Ratio", "update_op", [a_up, b_up], lower)
        return _collect(metrics_collections, updates_collections, value, update)

    metric.__name__ = default
    return metric


precision = _ratio("precision", true_positives, false_positives)
precision.__doc__ = "`tp / (tp + fp)` over the batches seen (0 before any positive prediction)."
recall = _ratio("recall", true_positives, false_negatives)
recall.__doc__ = "`tp / (tp + fn)` over the batches seen (0 before any positive label)."


# ---------------------------------------------------------------------------- thresholds
_CELL_NAMES = {
    "tp": "true_positives",
    "fn": "false_negatives",
    "tn": "true_negatives",
    "fp": "false_positives",
}


def _confusion_at_thresholds(metric, labels, predictions, weights, thresholds, includes):
    """Local variables counting (weighted) tp / fn / tn / fp at each threshold (a prediction
    is positive when above it), and the ops adding one batch: `({key: variable},
    {key: update})` for the keys in `includes`."""
    lab = math_ops.cast(convert_to_tensor(labels), "bool")
    pred = _floats(predictions)
    _check_compatible(metric, lab, pred)
    ins = [lab, pred] + ([_broadcast_weights(weights, pred)] if weights is not None else [])
    counts = {k: _metric_variable([len(thresholds)], _CELL_NAMES[k]) for k in includes}

    def lower(ctx, y, p, *w):
        t = kops.reshape(kops.convert_to_tensor(thresholds), (-1, 1))
        pos = kops.reshape(p, (1, -1)) > t
        y = kops.reshape(y, (1, -1))
        weight = kops.reshape(w[0], (1, -1)) if w else 1.0
        cells = {
            "tp": kops.logical_and(y, pos),
            "fn": kops.logical_and(y, kops.logical_not(pos)),
            "tn": kops.logical_and(kops.logical_not(y), kops.logical_not(pos)),
            "fp": kops.logical_and(kops.logical_not(y), pos),
        }
        return tuple(kops.sum(kops.cast(cells[k], "float32") * weight, axis=1) for k in includes)

    with op_scope(None, "confusion_matrix") as scope:
        op = make_op("ConfusionMatrixAtThresholds", scope, ins, lower, n_out=len(includes))
    updates = {k: counts[k].assign_add(b) for k, b in zip(includes, op.outputs)}
    return counts, updates


def _at_thresholds(default, other):
    def metric(labels, predictions, thresholds, weights=None, metrics_collections=None,
               updates_collections=None, name=None):  # fmt: skip
        th = np.asarray(thresholds, np.float32).reshape(-1)
        with variables_lib.variable_scope(name, default):
            counts, updates = _confusion_at_thresholds(
                default, labels, predictions, weights, th, ("tp", other)
            )

            def ratio(ctx, tp, o):
                return tp / (1e-7 + tp + o)

            value = _op("Div", "value", [counts["tp"], counts[other]], ratio)
            update = _op("Div", "update_op", [updates["tp"], updates[other]], ratio)
        return _collect(metrics_collections, updates_collections, value, update)

    metric.__name__ = default
    return metric


precision_at_thresholds = _at_thresholds("precision_at_thresholds", "fp")
precision_at_thresholds.__doc__ = (
    "`tp / (tp + fp)` at each of `thresholds` (a prediction is positive above it)."
)
recall_at_thresholds = _at_thresholds("recall_at_thresholds", "fn")
recall_at_thresholds.__doc__ = (
    "`tp / (tp + fn)` at each of `thresholds` (a prediction is positive above it)."
)


# ---------------------------------------------------------------------------- per class
def _class_ids(x):
    x = convert_to_tensor(x)
    return x if x.dtype.is_integer else math_ops.cast(x, "int64")


def mean_per_class_accuracy(labels, predictions, num_classes, weights=None,
                            metrics_collections=None, updates_collections=None,
                            name=None):  # fmt: skip
    """The mean over classes of the fraction of each class's labels predicted right; the
    update op returns the per-class accuracies."""
    with variables_lib.variable_scope(name, "mean_accuracy"):
        lab, pred = _class_ids(labels), _class_ids(predictions)
        _check_compatible("mean_per_class_accuracy", lab, pred)
        total = _metric_variable([num_classes], "total")
        count = _metric_variable([num_classes], "count")
        ins = [lab, pred] + ([_broadcast_weights(weights, lab)] if weights is not None else [])

        def lower(ctx, y, p, *w):
            y = kops.reshape(kops.cast(y, "int32"), (-1,))
            p = kops.reshape(kops.cast(p, "int32"), (-1,))
            weight = kops.reshape(w[0], (-1,)) if w else kops.ones(y.shape, "float32")
            hot = kops.one_hot(y, num_classes, dtype="float32") * kops.reshape(weight, (-1, 1))
            right = kops.cast(kops.equal(y, p), "float32")
            return kops.sum(hot, axis=0), kops.sum(hot * kops.reshape(right, (-1, 1)), axis=0)

        with op_scope(None, "per_class") as scope:
            seen, correct = make_op("PerClassCounts", scope, ins, lower, n_out=2).outputs
        update_total, update_count = total.assign_add(seen), count.assign_add(correct)
        per_class = _div_no_nan(count, total, "per_class_accuracy")
        value = math_ops.reduce_mean(per_class, name="mean_accuracy")
        update = _div_no_nan(update_count, update_total, "update_op")
    return _collect(metrics_collections, updates_collections, value, update)


def mean_iou(labels, predictions, num_classes, weights=None, metrics_collections=None,
             updates_collections=None, name=None):  # fmt: skip
    """The mean over classes (those seen) of intersection over union, from a streaming
    confusion matrix (rows: labels, columns: predictions), which the update op returns."""
    with variables_lib.variable_scope(name, "mean_iou"):
        lab, pred = _class_ids(labels), _class_ids(predictions)
        _check_compatible("mean_iou", lab, pred)
        cm = _metric_variable([num_classes, num_classes], "total_confusion_matrix", "float64")
        ins = [lab, pred] + ([_broadcast_weights(weights, lab)] if weights is not None else [])

        def confusion(ctx, y, p, *w):
            y = kops.one_hot(
                kops.reshape(kops.cast(y, "int32"), (-1,)), num_classes, dtype="float64"
            )
            p = kops.one_hot(
                kops.reshape(kops.cast(p, "int32"), (-1,)), num_classes, dtype="float64"
            )
            if w:
                y = y * kops.reshape(kops.cast(w[0], "float64"), (-1, 1))
            return kops.matmul(kops.transpose(y), p)

        update = cm.assign_add(_op("ConfusionMatrix", "confusion_matrix", ins, confusion))

        def iou(ctx, m):
            m = kops.cast(m, "float32")
            diag = kops.diagonal(m)
            denominator = kops.sum(m, axis=0) + kops.sum(m, axis=1) - diag
            valid = kops.sum(kops.cast(denominator != 0, "float32"))
            safe = kops.where(denominator > 0, denominator, kops.ones_like(denominator))
            total = kops.sum(diag / safe)
            return kops.where(valid > 0, total / kops.maximum(valid, 1.0), 0.0)

        value = _op("MeanIoU", "mean_iou", [cm], iou)
    return _collect(metrics_collections, updates_collections, value, update)


# ---------------------------------------------------------------------------- AUC
def auc(labels, predictions, weights=None, num_thresholds=200, metrics_collections=None,
        updates_collections=None, curve="ROC", name=None, summation_method="trapezoidal",
        thresholds=None):  # fmt: skip
    """The area under the ROC or PR curve, from confusion counts at `num_thresholds`
    thresholds spread over [0, 1] (a Riemann sum by `summation_method`).

    Raises:
        ValueError: `curve`, `summation_method` or `num_thresholds` is not valid.
    """
    if curve not in ("ROC", "PR"):
        raise ValueError(f"auc: curve must be either ROC or PR, {curve} unknown")
    methods = ("trapezoidal", "minoring", "majoring")
    if summation_method not in methods:
        raise ValueError(
            f"auc: summation_method must be one of {methods}. Received: {summation_method!r}"
        )
    if thresholds is None:
        if num_thresholds < 2:
            raise ValueError(f"auc: num_thresholds must be > 1. Received: {num_thresholds}")
        eps = 1e-7
        inner = [(i + 1) * 1.0 / (num_thresholds - 1) for i in range(num_thresholds - 2)]
        thresholds = [0.0 - eps] + inner + [1.0 + eps]
    thresholds = np.asarray(thresholds, np.float32)
    n = len(thresholds)
    with variables_lib.variable_scope(name, "auc"):
        counts, updates = _confusion_at_thresholds(
            "auc", labels, predictions, weights, thresholds, ("tp", "fn", "tn", "fp")
        )

        def area(ctx, tp, fn, tn, fp):
            e = 1.0e-6
            rec = kops.divide(tp + e, tp + fn + e)
            if curve == "ROC":
                x, y = kops.divide(fp, fp + tn + e), rec
            else:
                x, y = rec, kops.divide(tp + e, tp + fp + e)
            if summation_method == "trapezoidal":
                height = (y[: n - 1] + y[1:]) / 2.0
            elif summation_method == "minoring":
                height = kops.minimum(y[: n - 1], y[1:])
            else:
                height = kops.maximum(y[: n - 1], y[1:])
            return kops.sum((x[: n - 1] - x[1:]) * height)

        keys = ("tp", "fn", "tn", "fp")
        value = _op("AUC", "value", [counts[k] for k in keys], area)
        update = _op("AUC", "update_op", [updates[k] for k in keys], area)
    return _collect(metrics_collections, updates_collections, value, update)
