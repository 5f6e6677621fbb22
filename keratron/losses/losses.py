"""Loss functions and their `Loss` classes, named, defaulted and computed as in Keras 3.

Each function maps `(y_true, y_pred)` to per-sample values (the last axis reduced); each
class wraps one function with its keyword arguments and adds weighting and reduction.
Everything is written with keratron ops, so gradients (of any order) come from the tape.
"""

from __future__ import annotations

import math
import warnings

from keratron import config, ops
from keratron.autodiff import tree
from keratron.losses.loss import (
    Loss,
    set_loss_mask,
    squeeze_or_expand_to_same_rank,
)
from keratron.ops.elementwise import sigmoid_p
from keratron.ops.utils import as_tensor, canonical_axis

__all__ = [
    "LossFunctionWrapper",
    "MeanSquaredError",
    "MeanAbsoluteError",
    "MeanAbsolutePercentageError",
    "MeanSquaredLogarithmicError",
    "CosineSimilarity",
    "Huber",
    "LogCosh",
    "Hinge",
    "SquaredHinge",
    "CategoricalHinge",
    "KLDivergence",
    "Poisson",
    "BinaryCrossentropy",
    "BinaryFocalCrossentropy",
    "CategoricalCrossentropy",
    "CategoricalFocalCrossentropy",
    "SparseCategoricalCrossentropy",
    "Dice",
    "Tversky",
    "mean_squared_error",
    "mean_absolute_error",
    "mean_absolute_percentage_error",
    "mean_squared_logarithmic_error",
    "cosine_similarity",
    "huber",
    "log_cosh",
    "hinge",
    "squared_hinge",
    "categorical_hinge",
    "kl_divergence",
    "poisson",
    "binary_crossentropy",
    "binary_focal_crossentropy",
    "categorical_crossentropy",
    "categorical_focal_crossentropy",
    "sparse_categorical_crossentropy",
    "dice",
    "tversky",
]


# ---------------------------------------------------------------------------- helpers


def _pred_true(y_true, y_pred, squeeze=True):
    """y_pred as a float tensor, y_true cast to its dtype, ranks aligned as Keras aligns them."""
    y_pred = as_tensor(y_pred)
    if not y_pred._value.dtype.is_floating_point:
        y_pred = ops.cast(y_pred, config.floatx())
    y_true = ops.cast(as_tensor(y_true), y_pred.dtype)
    if squeeze:
        y_true, y_pred = squeeze_or_expand_to_same_rank(y_true, y_pred)
    return y_true, y_pred


def l2_normalize(x, axis):
    """`x` divided by its L2 norm along `axis` (the norm floored at `keratron.config.epsilon()`).

    Shared by `cosine_similarity` and the `CosineSimilarity` metric.
    """
    # x * rsqrt(sum(x^2)) with the inverse norm capped at 1/epsilon: zero vectors map to zero
    # instead of NaN (Keras's normalize does the same).
    inv = ops.rsqrt(ops.sum(ops.square(x), axis=axis, keepdims=True))
    return ops.multiply(x, ops.minimum(inv, 1.0 / config.epsilon()))


def _sigmoid(x):
    return sigmoid_p.bind(x)


def _softmax(x, axis):
    return ops.exp(ops.subtract(x, ops.logsumexp(x, axis=axis, keepdims=True)))


def _check_axis(axis, fn_name):
    if isinstance(axis, bool) or not isinstance(axis, int):
        raise ValueError(
            f"{fn_name}: `axis` must be of type `int`. Received: axis={axis!r} of type "
            f"{type(axis).__name__}"
        )


def _warn_single_class(y_pred, fn_name):
    if y_pred.ndim and y_pred.shape[-1] == 1:
        warnings.warn(
            f"In loss {fn_name}, expected y_pred.shape to be (batch_size, num_classes) with "
            f"num_classes > 1. Received: y_pred.shape={y_pred.shape}. Consider using "
            "'binary_crossentropy' if you only have 2 classes.",
            SyntaxWarning,
            stacklevel=3,
        )


# ---------------------------------------------------------------------------- regression


def mean_squared_error(y_true, y_pred):
    """Mean over the last axis of `(y_true - y_pred) ** 2`.

    Example:
        >>> float(keratron.losses.mean_squared_error([1.0, 0.0], [0.0, 0.0]))
        0.5
    """
    y_true, y_pred = _pred_true(y_true, y_pred)
    return ops.mean(ops.square(ops.subtract(y_true, y_pred)), axis=-1)


def mean_absolute_error(y_true, y_pred):
    """Mean over the last axis of `|y_true - y_pred|`.

    Example:
        >>> float(keratron.losses.mean_absolute_error([1.0, 0.0], [0.0, 0.0]))
        0.5
    """
    y_true, y_pred = _pred_true(y_true, y_pred)
    return ops.mean(ops.abs(ops.subtract(y_true, y_pred)), axis=-1)


def mean_absolute_percentage_error(y_true, y_pred):
    """`100 * mean(|y_true - y_pred| / max(|y_true|, epsilon))` over the last axis.

    Example:
        >>> float(keratron.losses.mean_absolute_percentage_error([2.0], [1.0]))
        50.0
    """
    y_true, y_pred = _pred_true(y_true, y_pred)
    denom = ops.maximum(ops.abs(y_true), config.epsilon())
    diff = ops.abs(ops.divide(ops.subtract(y_true, y_pred), denom))
    return ops.multiply(ops.mean(diff, axis=-1), 100.0)


def mean_squared_logarithmic_error(y_true, y_pred):
    """Mean over the last axis of `(log(y_pred + 1) - log(y_true + 1)) ** 2`, inputs floored
    at epsilon.

    Example:
        >>> round(float(keratron.losses.mean_squared_logarithmic_error([0.0], [1.0])), 4)
        0.4805
    """
    y_true, y_pred = _pred_true(y_true, y_pred)
    eps = config.epsilon()
    first = ops.log(ops.add(ops.maximum(y_pred, eps), 1.0))
    second = ops.log(ops.add(ops.maximum(y_true, eps), 1.0))
    return ops.mean(ops.square(ops.subtract(first, second)), axis=-1)


def cosine_similarity(y_true, y_pred, axis=-1):
    """Negative cosine similarity along `axis` (-1 for aligned vectors, 0 for orthogonal).

    Example:
        >>> float(keratron.losses.cosine_similarity([[1.0, 0.0]], [[2.0, 0.0]])[0])
        -1.0
    """
    y_true, y_pred = _pred_true(y_true, y_pred)
    y_pred = l2_normalize(y_pred, axis)
    y_true = l2_normalize(y_true, axis)
    return ops.negative(ops.sum(ops.multiply(y_true, y_pred), axis=axis))


def huber(y_true, y_pred, delta=1.0):
    """Huber loss: quadratic for errors up to `delta`, linear beyond, averaged over the last
    axis.

    Example:
        >>> float(keratron.losses.huber([0.0, 0.0], [0.5, 3.0]))
        1.3125
    """
    y_true, y_pred = _pred_true(y_true, y_pred)
    error = ops.subtract(y_pred, y_true)
    abs_error = ops.abs(error)
    quadratic = ops.multiply(ops.square(error), 0.5)
    linear = ops.subtract(ops.multiply(abs_error, float(delta)), 0.5 * float(delta) ** 2)
    return ops.mean(ops.where(ops.less_equal(abs_error, float(delta)), quadratic, linear), axis=-1)


def log_cosh(y_true, y_pred):
    """Mean over the last axis of `log(cosh(y_pred - y_true))`, computed without overflow.

    Example:
        >>> round(float(keratron.losses.log_cosh([0.0], [1.0])), 4)
        0.4338
    """
    y_true, y_pred = _pred_true(y_true, y_pred)
    x = ops.subtract(y_pred, y_true)
    # log(cosh(x)) = x + softplus(-2x) - log(2): finite where cosh(x) overflows.
    values = ops.subtract(ops.add(x, ops.softplus(ops.multiply(x, -2.0))), math.log(2.0))
    return ops.mean(values, axis=-1)


# ---------------------------------------------------------------------------- hinge


def _hinge_labels(y_true):
    # 0/1 labels become -1/1; labels that are not all 0/1 are used as given. A `where` on the
    # reduced predicate (not a Python branch) keeps this traceable.
    binary = ops.all(ops.logical_or(ops.equal(y_true, 0.0), ops.equal(y_true, 1.0)))
    return ops.where(binary, ops.subtract(ops.multiply(y_true, 2.0), 1.0), y_true)


def hinge(y_true, y_pred):
    """Mean over the last axis of `max(1 - y_true * y_pred, 0)`; 0/1 labels become -1/1.

    Example:
        >>> float(keratron.losses.hinge([1.0, 0.0], [0.5, 0.5]))
        1.0
    """
    y_true, y_pred = _pred_true(y_true, y_pred, squeeze=False)
    y_true = _hinge_labels(y_true)
    return ops.mean(ops.maximum(ops.subtract(1.0, ops.multiply(y_true, y_pred)), 0.0), axis=-1)


def squared_hinge(y_true, y_pred):
    """Mean over the last axis of `max(1 - y_true * y_pred, 0) ** 2`; 0/1 labels become -1/1.

    Example:
        >>> float(keratron.losses.squared_hinge([1.0, 0.0], [0.5, 0.5]))
        1.25
    """
    y_true, y_pred = _pred_true(y_true, y_pred, squeeze=False)
    y_true = _hinge_labels(y_true)
    margin = ops.maximum(ops.subtract(1.0, ops.multiply(y_true, y_pred)), 0.0)
    return ops.mean(ops.square(margin), axis=-1)


def categorical_hinge(y_true, y_pred):
    """`max(max((1 - y_true) * y_pred) - sum(y_true * y_pred) + 1, 0)` over the last axis.

    Example:
        >>> round(float(keratron.losses.categorical_hinge([[0.0, 1.0]], [[0.3, 0.7]])[0]), 4)
        0.6
    """
    y_true, y_pred = _pred_true(y_true, y_pred, squeeze=False)
    pos = ops.sum(ops.multiply(y_true, y_pred), axis=-1)
    neg = ops.max(ops.multiply(ops.subtract(1.0, y_true), y_pred), axis=-1)
    return ops.maximum(ops.add(ops.subtract(neg, pos), 1.0), 0.0)


# ---------------------------------------------------------------------------- probabilistic


def kl_divergence(y_true, y_pred):
    """Kullback-Leibler divergence `sum(y_true * log(y_true / y_pred))` over the last axis,
    both clipped to [epsilon, 1].

    Example:
        >>> round(float(keratron.losses.kl_divergence([0.5, 0.5], [0.25, 0.75])), 4)
        0.1438
    """
    y_true, y_pred = _pred_true(y_true, y_pred, squeeze=False)
    eps = config.epsilon()
    y_true = ops.clip(y_true, eps, 1.0)
    y_pred = ops.clip(y_pred, eps, 1.0)
    return ops.sum(ops.multiply(y_true, ops.log(ops.divide(y_true, y_pred))), axis=-1)


def poisson(y_true, y_pred):
    """Mean over the last axis of `y_pred - y_true * log(y_pred + epsilon)`.

    Example:
        >>> round(float(keratron.losses.poisson([1.0], [1.0])), 4)
        1.0
    """
    y_true, y_pred = _pred_true(y_true, y_pred, squeeze=False)
    log_pred = ops.log(ops.add(y_pred, config.epsilon()))
    return ops.mean(ops.subtract(y_pred, ops.multiply(y_true, log_pred)), axis=-1)


def categorical_crossentropy(y_true, y_pred, from_logits=False, label_smoothing=0.0, axis=-1):
    """Cross-entropy between one-hot (or soft) labels and predicted class scores along `axis`.

    Args:
        y_true: labels, same shape as `y_pred`.
        y_pred: probabilities, or logits when `from_logits=True`.
        from_logits: whether `y_pred` holds unnormalised logits.
        label_smoothing: in [0, 1]; labels become `y * (1 - s) + s / num_classes`.
        axis: the class axis.

    Example:
        >>> round(float(keratron.losses.categorical_crossentropy([[0, 1]], [[0.2, 0.8]])[0]), 4)
        0.2231
    """
    _check_axis(axis, "categorical_crossentropy")
    y_pred = as_tensor(y_pred)
    y_true = ops.cast(as_tensor(y_true), y_pred.dtype)
    _warn_single_class(y_pred, "categorical_crossentropy")
    if label_smoothing:
        s = float(label_smoothing)
        y_true = ops.add(ops.multiply(y_true, 1.0 - s), s / y_true.shape[-1])
    return ops.categorical_crossentropy(y_true, y_pred, from_logits=from_logits, axis=axis)


def categorical_focal_crossentropy(
    y_true, y_pred, alpha=0.25, gamma=2.0, from_logits=False, label_smoothing=0.0, axis=-1
):
    """Categorical cross-entropy with each term scaled by `alpha * (1 - p) ** gamma`.

    Example:
        >>> loss = keratron.losses.categorical_focal_crossentropy([[0, 1]], [[0.2, 0.8]])
        >>> round(float(loss[0]), 5)
        0.00223
    """
    _check_axis(axis, "categorical_focal_crossentropy")
    y_pred = as_tensor(y_pred)
    y_true = ops.cast(as_tensor(y_true), y_pred.dtype)
    _warn_single_class(y_pred, "categorical_focal_crossentropy")
    if label_smoothing:
        s = float(label_smoothing)
        y_true = ops.add(ops.multiply(y_true, 1.0 - s), s / y_true.shape[-1])
    if from_logits:
        y_pred = _softmax(y_pred, axis)
    eps = config.epsilon()
    output = ops.divide(y_pred, ops.sum(y_pred, axis=axis, keepdims=True))
    output = ops.clip(output, eps, 1.0 - eps)
    cce = ops.negative(ops.multiply(y_true, ops.log(output)))
    weight = ops.multiply(ops.power(ops.subtract(1.0, output), float(gamma)), float(alpha))
    return ops.sum(ops.multiply(weight, cce), axis=axis)


def sparse_categorical_crossentropy(y_true, y_pred, from_logits=False, ignore_class=None, axis=-1):
    """Cross-entropy between integer class labels and predicted class scores along `axis`.

    Args:
        y_true: class ids, shape of `y_pred` without the class axis (or with it of size 1).
        y_pred: probabilities, or logits when `from_logits=True`.
        from_logits: whether `y_pred` holds unnormalised logits.
        ignore_class: a label value whose entries get zero loss and are left out of the
            average when reduced by a `Loss`.
        axis: the class axis.

    Example:
        >>> loss = keratron.losses.sparse_categorical_crossentropy([1], [[0.2, 0.8]])
        >>> round(float(loss[0]), 4)
        0.2231
    """
    y_true = as_tensor(y_true)
    y_pred = as_tensor(y_pred)
    if y_true.ndim == y_pred.ndim and y_true.ndim and y_true.shape[axis] == 1:
        y_true = ops.squeeze(y_true, axis=axis)
    valid = None
    if ignore_class is not None:
        class_axis = canonical_axis(axis, y_pred.ndim, "sparse_categorical_crossentropy")
        res_shape = tuple(d for i, d in enumerate(y_pred.shape) if i != class_axis)
        valid = ops.not_equal(y_true, ops.cast(as_tensor(ignore_class), y_true.dtype))
        y_true = ops.where(valid, y_true, 0)
        y_pred = ops.where(ops.expand_dims(valid, class_axis), y_pred, 0.0)
    res = ops.sparse_categorical_crossentropy(y_true, y_pred, from_logits=from_logits, axis=axis)
    if valid is not None:
        valid = ops.reshape(valid, res_shape)
        res = ops.where(valid, res, 0.0)
        set_loss_mask(res, valid)
    return res


def binary_crossentropy(y_true, y_pred, from_logits=False, label_smoothing=0.0, axis=-1):
    """Binary cross-entropy per element, averaged over `axis`.

    Args:
        y_true: 0/1 (or soft) labels, same shape as `y_pred`.
        y_pred: probabilities, or logits when `from_logits=True`.
        from_logits: whether `y_pred` holds logits.
        label_smoothing: in [0, 1]; labels become `y * (1 - s) + 0.5 * s`.
        axis: the axis averaged over.

    Example:
        >>> round(float(keratron.losses.binary_crossentropy([1.0, 0.0], [0.8, 0.2])), 4)
        0.2231
    """
    y_pred = as_tensor(y_pred)
    y_true = ops.cast(as_tensor(y_true), y_pred.dtype)
    if label_smoothing:
        s = float(label_smoothing)
        y_true = ops.add(ops.multiply(y_true, 1.0 - s), 0.5 * s)
    values = ops.binary_crossentropy(y_true, y_pred, from_logits=from_logits)
    return ops.mean(values, axis=axis)


def binary_focal_crossentropy(
    y_true,
    y_pred,
    apply_class_balancing=False,
    alpha=0.25,
    gamma=2.0,
    from_logits=False,
    label_smoothing=0.0,
    axis=-1,
):
    """Binary cross-entropy scaled by `(1 - p_t) ** gamma` (and by `alpha` / `1 - alpha`
    with class balancing), averaged over `axis`.

    Example:
        >>> loss = keratron.losses.binary_focal_crossentropy([1.0, 0.0], [0.8, 0.2])
        >>> round(float(loss), 5)
        0.00893
    """
    y_pred = as_tensor(y_pred)
    y_true = ops.cast(as_tensor(y_true), y_pred.dtype)
    if label_smoothing:
        s = float(label_smoothing)
        y_true = ops.add(ops.multiply(y_true, 1.0 - s), 0.5 * s)
    if from_logits:
        y_pred = _sigmoid(y_pred)
    bce = ops.binary_crossentropy(y_true, y_pred, from_logits=False)
    p_t = ops.add(
        ops.multiply(y_true, y_pred),
        ops.multiply(ops.subtract(1.0, y_true), ops.subtract(1.0, y_pred)),
    )
    focal = ops.multiply(ops.power(ops.subtract(1.0, p_t), float(gamma)), bce)
    if apply_class_balancing:
        weight = ops.add(
            ops.multiply(y_true, float(alpha)),
            ops.multiply(ops.subtract(1.0, y_true), 1.0 - float(alpha)),
        )
        focal = ops.multiply(weight, focal)
    return ops.mean(focal, axis=axis)


# ---------------------------------------------------------------------------- segmentation


def dice(y_true, y_pred, axis=None):
    """Dice loss `1 - 2 * sum(y_true * y_pred) / (sum(y_true) + sum(y_pred) + epsilon)`.

    Example:
        >>> round(float(keratron.losses.dice([1.0, 0.0], [1.0, 1.0])), 4)
        0.3333
    """
    y_true, y_pred = _pred_true(y_true, y_pred, squeeze=False)
    intersection = ops.sum(ops.multiply(y_true, y_pred), axis=axis)
    denom = ops.add(
        ops.add(ops.sum(y_true, axis=axis), ops.sum(y_pred, axis=axis)), config.epsilon()
    )
    return ops.subtract(1.0, ops.divide(ops.multiply(intersection, 2.0), denom))


def tversky(y_true, y_pred, alpha=0.5, beta=0.5, axis=None):
    """Tversky loss: Dice with false positives weighted by `alpha` and false negatives by
    `beta`.

    Example:
        >>> round(float(keratron.losses.tversky([1.0, 0.0], [1.0, 1.0])), 4)
        0.3333
    """
    y_true, y_pred = _pred_true(y_true, y_pred, squeeze=False)
    intersection = ops.sum(ops.multiply(y_true, y_pred), axis=axis)
    fp = ops.sum(ops.multiply(ops.subtract(1.0, y_pred), y_true), axis=axis)
    fn = ops.sum(ops.multiply(y_pred, ops.subtract(1.0, y_true)), axis=axis)
    denom = ops.add(
        ops.add(
            ops.add(intersection, ops.multiply(fp, float(alpha))), ops.multiply(fn, float(beta))
        ),
        config.epsilon(),
    )
    return ops.subtract(1.0, ops.divide(intersection, denom))


# ---------------------------------------------------------------------------- classes


class LossFunctionWrapper(Loss):
    """A `Loss` made from a function `fn(y_true, y_pred, **kwargs)`.

    Args:
        fn: the per-sample loss function.
        reduction: see `Loss`.
        name: the loss's name.
        dtype: the computation dtype.
        **kwargs: keyword arguments passed to `fn` on every call.

    Example:
        >>> loss = keratron.losses.LossFunctionWrapper(keratron.losses.huber, delta=2.0)
        >>> float(loss([[0.0]], [[3.0]]))
        4.0
    """

    def __init__(self, fn, reduction="sum_over_batch_size", name=None, dtype=None, **kwargs):
        if not callable(fn):
            raise TypeError(f"LossFunctionWrapper: `fn` must be callable. Received: fn={fn!r}")
        super().__init__(name=name, reduction=reduction, dtype=dtype)
        self.fn = fn
        self._fn_kwargs = kwargs

    def call(self, y_true, y_pred):
        if tree.is_nested(y_true) or tree.is_nested(y_pred):
            pairs = [
                squeeze_or_expand_to_same_rank(t, p)
                for t, p in zip(tree.flatten(y_true), tree.flatten(y_pred), strict=True)
            ]
            y_true = tree.pack_sequence_as(y_true, [t for t, _ in pairs])
            y_pred = tree.pack_sequence_as(y_pred, [p for _, p in pairs])
        else:
            y_true, y_pred = squeeze_or_expand_to_same_rank(y_true, y_pred)
        return self.fn(y_true, y_pred, **self._fn_kwargs)

    def get_config(self):
        from keratron import losses

        config = super().get_config()
        config["fn"] = losses.serialize(self.fn)
        config.update(self._fn_kwargs)
        return config

    @classmethod
    def from_config(cls, config):
        from keratron import losses

        config = dict(config)
        if "fn" in config:
            config["fn"] = losses.deserialize(config["fn"])
        return cls(**config)

    def __repr__(self):
        fn_name = getattr(self.fn, "__name__", type(self.fn).__name__)
        return f"<{self.__class__.__name__}({fn_name}, kwargs={self._fn_kwargs})>"


class _Wrapped(LossFunctionWrapper):
    """A loss class over one fixed function: its config holds only its own arguments."""

    _fn = None
    _config_keys: tuple = ()

    def __init__(self, reduction="sum_over_batch_size", name=None, dtype=None, **kwargs):
        super().__init__(
            type(self)._fn,
            reduction=reduction,
            name=name,
            dtype=dtype,
            **kwargs,
        )
        for k, v in kwargs.items():
            setattr(self, k, v)

    def get_config(self):
        config = Loss.get_config(self)
        config.update({k: getattr(self, k) for k in self._config_keys})
        return config

    def __repr__(self):
        return Loss.__repr__(self)

    @classmethod
    def from_config(cls, config):
        return cls(**config)


class MeanSquaredError(_Wrapped):
    """Mean of squares of errors, as a `Loss` ("mse").

    Example:
        >>> loss = keratron.losses.MeanSquaredError()
        >>> round(float(loss([[1.0, 0.0]], [[0.0, 0.0]])), 4)
        0.5
    """

    _fn = staticmethod(mean_squared_error)

    def __init__(self, reduction="sum_over_batch_size", name="mean_squared_error", dtype=None):
        super().__init__(reduction=reduction, name=name, dtype=dtype)


class MeanAbsoluteError(_Wrapped):
    """Mean of absolute errors, as a `Loss` ("mae").

    Example:
        >>> loss = keratron.losses.MeanAbsoluteError()
        >>> round(float(loss([[1.0, 0.0]], [[0.0, 0.0]])), 4)
        0.5
    """

    _fn = staticmethod(mean_absolute_error)

    def __init__(self, reduction="sum_over_batch_size", name="mean_absolute_error", dtype=None):
        super().__init__(reduction=reduction, name=name, dtype=dtype)


class MeanAbsolutePercentageError(_Wrapped):
    """Mean absolute percentage error, as a `Loss` ("mape").

    Example:
        >>> loss = keratron.losses.MeanAbsolutePercentageError()
        >>> round(float(loss([[2.0]], [[1.0]])), 4)
        50.0
    """

    _fn = staticmethod(mean_absolute_percentage_error)

    def __init__(
        self,
        reduction="sum_over_batch_size",
        name="mean_absolute_percentage_error",
        dtype=None,
    ):
        super().__init__(reduction=reduction, name=name, dtype=dtype)


class MeanSquaredLogarithmicError(_Wrapped):
    """Mean squared logarithmic error, as a `Loss` ("msle").

    Example:
        >>> loss = keratron.losses.MeanSquaredLogarithmicError(reduction="sum")
        >>> round(float(loss([[0.0]], [[0.0]])), 4)
        0.0
    """

    _fn = staticmethod(mean_squared_logarithmic_error)

    def __init__(
        self,
        reduction="sum_over_batch_size",
        name="mean_squared_logarithmic_error",
        dtype=None,
    ):
        super().__init__(reduction=reduction, name=name, dtype=dtype)


class CosineSimilarity(_Wrapped):
    """Negative cosine similarity along `axis`, as a `Loss`.

    Example:
        >>> loss = keratron.losses.CosineSimilarity(axis=-1)
        >>> round(float(loss([[1.0, 0.0]], [[3.0, 0.0]])), 4)
        -1.0
    """

    _fn = staticmethod(cosine_similarity)
    # Keras leaves `axis` out of the config, so a round trip loses it; kept here.
    _config_keys = ("axis",)

    def __init__(
        self, axis=-1, reduction="sum_over_batch_size", name="cosine_similarity", dtype=None
    ):
        super().__init__(reduction=reduction, name=name, dtype=dtype, axis=axis)


class Huber(_Wrapped):
    """Huber loss with threshold `delta`, as a `Loss`.

    Example:
        >>> loss = keratron.losses.Huber(delta=1.0)
        >>> round(float(loss([[0.0, 0.0]], [[0.5, 3.0]])), 4)
        1.3125
    """

    _fn = staticmethod(huber)
    # Keras leaves `delta` out of the config, so a round trip loses it; kept here.
    _config_keys = ("delta",)

    def __init__(self, delta=1.0, reduction="sum_over_batch_size", name="huber_loss", dtype=None):
        super().__init__(reduction=reduction, name=name, dtype=dtype, delta=delta)


class LogCosh(_Wrapped):
    """Logarithm of the hyperbolic cosine of the error, as a `Loss`.

    Example:
        >>> loss = keratron.losses.LogCosh()
        >>> round(float(loss([[0.0]], [[0.0]])), 4)
        0.0
    """

    _fn = staticmethod(log_cosh)

    def __init__(self, reduction="sum_over_batch_size", name="log_cosh", dtype=None):
        super().__init__(reduction=reduction, name=name, dtype=dtype)


class Hinge(_Wrapped):
    """Hinge loss (0/1 labels become -1/1), as a `Loss`.

    Example:
        >>> loss = keratron.losses.Hinge()
        >>> round(float(loss([[1.0, 0.0]], [[0.5, 0.5]])), 4)
        1.0
    """

    _fn = staticmethod(hinge)

    def __init__(self, reduction="sum_over_batch_size", name="hinge", dtype=None):
        super().__init__(reduction=reduction, name=name, dtype=dtype)


class SquaredHinge(_Wrapped):
    """Squared hinge loss (0/1 labels become -1/1), as a `Loss`.

    Example:
        >>> loss = keratron.losses.SquaredHinge()
        >>> round(float(loss([[1.0, 0.0]], [[0.5, 0.5]])), 4)
        1.25
    """

    _fn = staticmethod(squared_hinge)

    def __init__(self, reduction="sum_over_batch_size", name="squared_hinge", dtype=None):
        super().__init__(reduction=reduction, name=name, dtype=dtype)


class CategoricalHinge(_Wrapped):
    """Categorical hinge loss, as a `Loss`.

    Example:
        >>> loss = keratron.losses.CategoricalHinge()
        >>> round(float(loss([[0.0, 1.0]], [[0.5, 0.5]])), 4)
        1.0
    """

    _fn = staticmethod(categorical_hinge)

    def __init__(self, reduction="sum_over_batch_size", name="categorical_hinge", dtype=None):
        super().__init__(reduction=reduction, name=name, dtype=dtype)


class KLDivergence(_Wrapped):
    """Kullback-Leibler divergence, as a `Loss` ("kld").

    Example:
        >>> loss = keratron.losses.KLDivergence()
        >>> round(float(loss([[0.5, 0.5]], [[0.5, 0.5]])), 4)
        0.0
    """

    _fn = staticmethod(kl_divergence)

    def __init__(self, reduction="sum_over_batch_size", name="kl_divergence", dtype=None):
        super().__init__(reduction=reduction, name=name, dtype=dtype)


class Poisson(_Wrapped):
    """Poisson loss, as a `Loss`.

    Example:
        >>> loss = keratron.losses.Poisson()
        >>> round(float(loss([[1.0]], [[1.0]])), 4)
        1.0
    """

    _fn = staticmethod(poisson)

    def __init__(self, reduction="sum_over_batch_size", name="poisson", dtype=None):
        super().__init__(reduction=reduction, name=name, dtype=dtype)


class BinaryCrossentropy(_Wrapped):
    """Binary cross-entropy, as a `Loss`.

    Args:
        from_logits: whether predictions are logits (numerically stable path).
        label_smoothing: in [0, 1]; squeezes labels towards 0.5.
        axis: the axis averaged over.
        reduction, name, dtype: see `Loss`.

    Example:
        >>> loss = keratron.losses.BinaryCrossentropy(from_logits=True)
        >>> round(float(loss([[1.0, 0.0]], [[0.0, 0.0]])), 4)
        0.6931
    """

    _fn = staticmethod(binary_crossentropy)
    _config_keys = ("from_logits", "label_smoothing", "axis")

    def __init__(
        self,
        from_logits=False,
        label_smoothing=0.0,
        axis=-1,
        reduction="sum_over_batch_size",
        name="binary_crossentropy",
        dtype=None,
    ):
        super().__init__(
            reduction=reduction,
            name=name,
            dtype=dtype,
            from_logits=from_logits,
            label_smoothing=label_smoothing,
            axis=axis,
        )


class BinaryFocalCrossentropy(_Wrapped):
    """Binary focal cross-entropy, as a `Loss`.

    Args:
        apply_class_balancing: weight positives by `alpha` and negatives by `1 - alpha`.
        alpha: the class-balancing weight.
        gamma: the focusing exponent.
        from_logits, label_smoothing, axis: as in `BinaryCrossentropy`.
        reduction, name, dtype: see `Loss`.

    Example:
        >>> loss = keratron.losses.BinaryFocalCrossentropy(gamma=0.0)
        >>> round(float(loss([[1.0, 0.0]], [[0.5, 0.5]])), 4)
        0.6931
    """

    _fn = staticmethod(binary_focal_crossentropy)
    _config_keys = (
        "from_logits",
        "label_smoothing",
        "axis",
        "apply_class_balancing",
        "alpha",
        "gamma",
    )

    def __init__(
        self,
        apply_class_balancing=False,
        alpha=0.25,
        gamma=2.0,
        from_logits=False,
        label_smoothing=0.0,
        axis=-1,
        reduction="sum_over_batch_size",
        name="binary_focal_crossentropy",
        dtype=None,
    ):
        super().__init__(
            reduction=reduction,
            name=name,
            dtype=dtype,
            apply_class_balancing=apply_class_balancing,
            alpha=alpha,
            gamma=gamma,
            from_logits=from_logits,
            label_smoothing=label_smoothing,
            axis=axis,
        )


class CategoricalCrossentropy(_Wrapped):
    """Categorical cross-entropy with one-hot (or soft) labels, as a `Loss`.

    Args:
        from_logits: whether predictions are logits (fused, stable softmax path).
        label_smoothing: in [0, 1]; mixes labels with the uniform distribution.
        axis: the class axis.
        reduction, name, dtype: see `Loss`.

    Example:
        >>> loss = keratron.losses.CategoricalCrossentropy(from_logits=True)
        >>> round(float(loss([[0.0, 1.0]], [[0.0, 0.0]])), 4)
        0.6931
    """

    _fn = staticmethod(categorical_crossentropy)
    _config_keys = ("from_logits", "label_smoothing", "axis")

    def __init__(
        self,
        from_logits=False,
        label_smoothing=0.0,
        axis=-1,
        reduction="sum_over_batch_size",
        name="categorical_crossentropy",
        dtype=None,
    ):
        super().__init__(
            reduction=reduction,
            name=name,
            dtype=dtype,
            from_logits=from_logits,
            label_smoothing=label_smoothing,
            axis=axis,
        )


class CategoricalFocalCrossentropy(_Wrapped):
    """Categorical focal cross-entropy, as a `Loss`.

    Args:
        alpha: the weighting factor.
        gamma: the focusing exponent.
        from_logits, label_smoothing, axis: as in `CategoricalCrossentropy`.
        reduction, name, dtype: see `Loss`.

    Example:
        >>> loss = keratron.losses.CategoricalFocalCrossentropy(alpha=1.0, gamma=0.0)
        >>> round(float(loss([[0.0, 1.0]], [[0.5, 0.5]])), 4)
        0.6931
    """

    _fn = staticmethod(categorical_focal_crossentropy)
    _config_keys = ("from_logits", "label_smoothing", "axis", "alpha", "gamma")

    def __init__(
        self,
        alpha=0.25,
        gamma=2.0,
        from_logits=False,
        label_smoothing=0.0,
        axis=-1,
        reduction="sum_over_batch_size",
        name="categorical_focal_crossentropy",
        dtype=None,
    ):
        super().__init__(
            reduction=reduction,
            name=name,
            dtype=dtype,
            alpha=alpha,
            gamma=gamma,
            from_logits=from_logits,
            label_smoothing=label_smoothing,
            axis=axis,
        )


class SparseCategoricalCrossentropy(_Wrapped):
    """Categorical cross-entropy with integer labels, as a `Loss`.

    Args:
        from_logits: whether predictions are logits (fused, stable softmax path).
        ignore_class: a label value excluded from the loss and from the average.
        reduction, name, dtype: see `Loss`.
        axis: the class axis.

    Example:
        >>> loss = keratron.losses.SparseCategoricalCrossentropy(from_logits=True)
        >>> round(float(loss([1], [[0.0, 0.0]])), 4)
        0.6931
    """

    _fn = staticmethod(sparse_categorical_crossentropy)
    _config_keys = ("from_logits", "ignore_class")

    def __init__(
        self,
        from_logits=False,
        ignore_class=None,
        reduction="sum_over_batch_size",
        axis=-1,
        name="sparse_categorical_crossentropy",
        dtype=None,
    ):
        super().__init__(
            reduction=reduction,
            name=name,
            dtype=dtype,
            from_logits=from_logits,
            ignore_class=ignore_class,
            axis=axis,
        )


class Dice(_Wrapped):
    """Dice loss over `axis` (None: all axes), as a `Loss`.

    Example:
        >>> loss = keratron.losses.Dice()
        >>> round(float(loss([[1.0, 0.0]], [[1.0, 0.0]])), 4)
        0.0
    """

    _fn = staticmethod(dice)
    _config_keys = ("axis",)

    def __init__(self, reduction="sum_over_batch_size", name="dice", axis=None, dtype=None):
        super().__init__(reduction=reduction, name=name, dtype=dtype, axis=axis)


class Tversky(_Wrapped):
    """Tversky loss with false-positive weight `alpha` and false-negative weight `beta`.

    Example:
        >>> loss = keratron.losses.Tversky()
        >>> round(float(loss([[1.0, 0.0]], [[1.0, 0.0]])), 4)
        0.0
    """

    _fn = staticmethod(tversky)
    _config_keys = ("alpha", "beta", "axis")

    def __init__(
        self,
        alpha=0.5,
        beta=0.5,
        reduction="sum_over_batch_size",
        name="tversky",
        axis=None,
        dtype=None,
    ):
        super().__init__(
            reduction=reduction, name=name, dtype=dtype, alpha=alpha, beta=beta, axis=axis
        )
