"""`tf.losses` (TF1): weighted losses reduced as TF1 does, added to the LOSSES collection.

Each loss computes per-element losses with the `tf.nn` / math ops, multiplies them by
`weights` (a scalar, or a tensor that broadcasts to the losses) and reduces them by
`reduction`; the default, `SUM_BY_NONZERO_WEIGHTS`, is the weighted sum divided by the
number of non-zero weights (0 where there are none). The result is added to
`loss_collection` (`tf.GraphKeys.LOSSES`), which `get_total_loss` sums with the
regularization losses.

Example:
    >>> import keratron.compat.v1 as tf
    >>> with tf.Graph().as_default(), tf.Session() as sess:
    ...     loss = tf.losses.mean_squared_error([[1.0], [2.0]], [[1.5], [2.0]])
    ...     print(sess.run(loss), len(tf.losses.get_losses()))
    0.125 1
"""

from __future__ import annotations

from keratron import ops as kops
from keratron.compat.v1 import array_ops, math_ops, nn
from keratron.compat.v1.framework import (
    GraphKeys,
    add_to_collection,
    convert_to_tensor,
    get_collection,
    get_default_graph,
    make_op,
    name_scope,
)
from keratron.compat.v1.gradients import stop_gradient

__all__ = [
    "Reduction",
    "compute_weighted_loss",
    "softmax_cross_entropy",
    "sparse_softmax_cross_entropy",
    "sigmoid_cross_entropy",
    "mean_squared_error",
    "absolute_difference",
    "huber_loss",
    "log_loss",
    "hinge_loss",
    "cosine_distance",
    "add_loss",
    "get_losses",
    "get_regularization_losses",
    "get_regularization_loss",
    "get_total_loss",
]


class Reduction:
    """How a weighted loss is reduced (`tf.losses.Reduction`)."""

    NONE = "none"
    SUM = "weighted_sum"
    SUM_OVER_BATCH_SIZE = "weighted_sum_over_batch_size"
    MEAN = "weighted_mean"
    SUM_BY_NONZERO_WEIGHTS = "weighted_sum_by_nonzero_weights"
    SUM_OVER_NONZERO_WEIGHTS = SUM_BY_NONZERO_WEIGHTS

    @classmethod
    def all(cls) -> tuple:
        return (cls.NONE, cls.SUM, cls.MEAN, cls.SUM_OVER_BATCH_SIZE, cls.SUM_BY_NONZERO_WEIGHTS)

    @classmethod
    def validate(cls, key) -> None:
        if key not in cls.all():
            raise ValueError(f"Invalid Reduction Key {key}. Expected one of {cls.all()}.")


def _reduce(losses, weights, reduction):
    """The weighted sum of `losses` over the divisor `reduction` names (one op)."""

    def lower(ctx, x, w):
        weighted = x * w
        total = kops.sum(weighted)
        if reduction == Reduction.SUM:
            return total
        if reduction == Reduction.MEAN:
            return kops.divide_no_nan(total, kops.sum(kops.ones_like(x) * w))
        if reduction == Reduction.SUM_OVER_BATCH_SIZE:
            return kops.divide_no_nan(total, kops.cast(kops.size(x), x.dtype))
        present = kops.cast(kops.not_equal(kops.broadcast_to(w, x.shape), 0), x.dtype)
        return kops.divide_no_nan(total, kops.sum(present))

    g = get_default_graph()
    spec = [((), losses.dtype)]
    return make_op("WeightedLoss", g.unique_name("value"), [losses, weights], lower, spec).outputs[
        0
    ]


def compute_weighted_loss(losses, weights=1.0, scope=None, loss_collection=GraphKeys.LOSSES,
                          reduction=Reduction.SUM_BY_NONZERO_WEIGHTS):  # fmt: skip
    """`losses * weights`, reduced by `reduction` and added to `loss_collection`.

    Raises:
        ValueError: `reduction` is not a `Reduction`, or `weights` does not broadcast to
            `losses`' shape.
    """
    Reduction.validate(reduction)
    with name_scope(scope, "weighted_loss"):
        losses = convert_to_tensor(losses)
        dt = losses.dtype
        if not dt.is_floating:
            losses = math_ops.cast(losses, "float32")
        weights = math_ops.cast(convert_to_tensor(weights), losses.dtype)
        ws, ls = weights.shape, losses.shape
        if ws.dims is not None and ls.dims is not None and ws.ndims > 0:
            ok = ws.ndims <= ls.ndims and all(
                a in (1, None) or b is None or a == b for a, b in zip(ws.dims[::-1], ls.dims[::-1])
            )
            if not ok:
                raise ValueError(
                    f"compute_weighted_loss: `weights` can not be broadcast to `losses`: "
                    f"expected a shape that broadcasts to {ls}, received weights shape {ws}."
                )
        if reduction == Reduction.NONE:
            loss = math_ops.multiply(losses, weights)
        else:
            loss = _reduce(losses, weights, reduction)
        if loss.dtype != dt and dt.is_floating:
            loss = math_ops.cast(loss, dt)
    add_loss(loss, loss_collection)
    return loss


def _check_args(what, **args):
    for k, v in args.items():
        if v is None:
            raise ValueError(f"{what}: `{k}` must not be None.")


def _floats(labels, predictions):
    p = convert_to_tensor(predictions)
    if not p.dtype.is_floating:
        p = math_ops.cast(p, "float32")
    lab = math_ops.cast(convert_to_tensor(labels), p.dtype)
    if not lab.shape.is_compatible_with(p.shape):
        raise ValueError(
            f"Shapes {lab.shape} and {p.shape} are incompatible: labels and predictions must "
            "have the same shape."
        )
    return lab, p


def softmax_cross_entropy(onehot_labels, logits, weights=1.0, label_smoothing=0, scope=None,
                          loss_collection=GraphKeys.LOSSES,
                          reduction=Reduction.SUM_BY_NONZERO_WEIGHTS):  # fmt: skip
    """Softmax cross-entropy of `logits` against one-hot labels, smoothed toward
    `label_smoothing / num_classes` when `label_smoothing > 0`."""
    _check_args("softmax_cross_entropy", onehot_labels=onehot_labels, logits=logits)
    with name_scope(scope, "softmax_cross_entropy_loss") as sc:
        labels, logits = _floats(onehot_labels, logits)
        if label_smoothing > 0:
            n = labels.shape.dims[-1]
            labels = labels * (1.0 - label_smoothing) + label_smoothing / float(n)
        losses = nn.softmax_cross_entropy_with_logits_v2(
            labels=stop_gradient(labels), logits=logits, name="xentropy"
        )
        return compute_weighted_loss(losses, weights, sc, loss_collection, reduction)


def sparse_softmax_cross_entropy(labels, logits, weights=1.0, scope=None,
                                 loss_collection=GraphKeys.LOSSES,
                                 reduction=Reduction.SUM_BY_NONZERO_WEIGHTS):  # fmt: skip
    """Softmax cross-entropy of `logits` against integer class `labels`."""
    _check_args("sparse_softmax_cross_entropy", labels=labels, logits=logits)
    with name_scope(scope, "sparse_softmax_cross_entropy_loss") as sc:
        losses = nn.sparse_softmax_cross_entropy_with_logits(
            labels=labels, logits=logits, name="xentropy"
        )
        return compute_weighted_loss(losses, weights, sc, loss_collection, reduction)


def sigmoid_cross_entropy(multi_class_labels, logits, weights=1.0, label_smoothing=0,
                          scope=None, loss_collection=GraphKeys.LOSSES,
                          reduction=Reduction.SUM_BY_NONZERO_WEIGHTS):  # fmt: skip
    """Sigmoid cross-entropy; labels smoothed toward 1/2 by `label_smoothing`."""
    _check_args("sigmoid_cross_entropy", multi_class_labels=multi_class_labels, logits=logits)
    with name_scope(scope, "sigmoid_cross_entropy_loss") as sc:
        labels, logits = _floats(multi_class_labels, logits)
        if label_smoothing > 0:
            labels = labels * (1.0 - label_smoothing) + 0.5 * label_smoothing
        losses = nn.sigmoid_cross_entropy_with_logits(labels=labels, logits=logits, name="loss")
        return compute_weighted_loss(losses, weights, sc, loss_collection, reduction)


def _pointwise(default, fn):
    def loss(labels, predictions, weights=1.0, scope=None, loss_collection=GraphKeys.LOSSES,
             reduction=Reduction.SUM_BY_NONZERO_WEIGHTS):  # fmt: skip
        _check_args(default, labels=labels, predictions=predictions)
        with name_scope(scope, default) as sc:
            lab, pred = _floats(labels, predictions)
            return compute_weighted_loss(fn(lab, pred), weights, sc, loss_collection, reduction)

    loss.__name__ = default
    return loss


mean_squared_error = _pointwise(
    "mean_squared_error", lambda y, p: math_ops.squared_difference(p, y)
)
mean_squared_error.__doc__ = "`(predictions - labels) ** 2`, weighted and reduced."
absolute_difference = _pointwise("absolute_difference", lambda y, p: math_ops.abs(p - y))
absolute_difference.__doc__ = "`|predictions - labels|`, weighted and reduced."


def huber_loss(labels, predictions, weights=1.0, delta=1.0, scope=None,
               loss_collection=GraphKeys.LOSSES,
               reduction=Reduction.SUM_BY_NONZERO_WEIGHTS):  # fmt: skip
    """`0.5 * e**2` for `|e| <= delta`, `delta * (|e| - 0.5 * delta)` beyond."""
    _check_args("huber_loss", labels=labels, predictions=predictions)
    with name_scope(scope, "huber_loss") as sc:
        lab, pred = _floats(labels, predictions)
        abs_error = math_ops.abs(pred - lab)
        quadratic = math_ops.minimum(abs_error, delta)
        linear = abs_error - quadratic
        losses = 0.5 * quadratic * quadratic + delta * linear
        return compute_weighted_loss(losses, weights, sc, loss_collection, reduction)


def log_loss(labels, predictions, weights=1.0, epsilon=1e-7, scope=None,
             loss_collection=GraphKeys.LOSSES,
             reduction=Reduction.SUM_BY_NONZERO_WEIGHTS):  # fmt: skip
    """`-y log(p + eps) - (1 - y) log(1 - p + eps)`."""
    _check_args("log_loss", labels=labels, predictions=predictions)
    with name_scope(scope, "log_loss") as sc:
        y, p = _floats(labels, predictions)
        losses = -y * math_ops.log(p + epsilon) - (1.0 - y) * math_ops.log(1.0 - p + epsilon)
        return compute_weighted_loss(losses, weights, sc, loss_collection, reduction)


def hinge_loss(labels, logits, weights=1.0, scope=None, loss_collection=GraphKeys.LOSSES,
               reduction=Reduction.SUM_BY_NONZERO_WEIGHTS):  # fmt: skip
    """`relu(1 - (2 * labels - 1) * logits)` for labels in {0, 1}."""
    _check_args("hinge_loss", labels=labels, logits=logits)
    with name_scope(scope, "hinge_loss") as sc:
        y, x = _floats(labels, logits)
        losses = nn.relu(1.0 - (2.0 * y - 1.0) * x)
        return compute_weighted_loss(losses, weights, sc, loss_collection, reduction)


def cosine_distance(labels, predictions, axis=None, weights=1.0, scope=None,
                    loss_collection=GraphKeys.LOSSES,
                    reduction=Reduction.SUM_BY_NONZERO_WEIGHTS, dim=None):  # fmt: skip
    """`1 - sum(labels * predictions, axis)` for unit-normalized inputs."""
    axis = axis if axis is not None else dim
    if axis is None:
        raise ValueError("cosine_distance: you must specify `axis`.")
    with name_scope(scope, "cosine_distance_loss") as sc:
        y, p = _floats(labels, predictions)
        losses = 1.0 - math_ops.reduce_sum(y * p, axis=axis, keepdims=True)
        return compute_weighted_loss(losses, weights, sc, loss_collection, reduction)


# ---------------------------------------------------------------------------- collections
def add_loss(loss, loss_collection=GraphKeys.LOSSES) -> None:
    """Adds `loss` to `loss_collection` (nothing when it is None)."""
    if loss_collection:
        add_to_collection(loss_collection, loss)


def get_losses(scope=None, loss_collection=GraphKeys.LOSSES) -> list:
    return get_collection(loss_collection, scope)


def get_regularization_losses(scope=None) -> list:
    return get_collection(GraphKeys.REGULARIZATION_LOSSES, scope)


def get_regularization_loss(scope=None, name="total_regularization_loss"):
    """The sum of the REGULARIZATION_LOSSES collection (a 0.0 constant if it is empty)."""
    losses = get_regularization_losses(scope)
    if losses:
        return math_ops.add_n(losses, name=name)
    return array_ops.constant(0.0, name=name)


def get_total_loss(add_regularization_losses=True, name="total_loss", scope=None):
    """The sum of the LOSSES collection, plus the regularization losses by default.

    Raises:
        ValueError: there are no losses to sum.
    """
    losses = get_losses(scope)
    if add_regularization_losses:
        losses = losses + get_regularization_losses(scope)
    if not losses:
        raise ValueError("No losses found: the LOSSES collection is empty.")
    return math_ops.add_n(losses, name=name)
