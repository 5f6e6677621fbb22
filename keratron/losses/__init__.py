"""Losses, as `keras.losses`: `Loss` classes, loss functions, `get`, `serialize`,
`deserialize`."""

from __future__ import annotations

import inspect

from keratron.losses import extra as _extra
from keratron.losses import losses as _losses
from keratron.losses.extra import (
    CTC,
    CategoricalGeneralizedCrossEntropy,
    Circle,
    categorical_generalized_cross_entropy,
    circle,
    ctc,
)
from keratron.losses.loss import Loss, Reduction, binary_or_sparse, reduce_weighted_values
from keratron.losses.losses import *  # noqa: F403
from keratron.losses.losses import (
    BinaryCrossentropy,
    BinaryFocalCrossentropy,
    CategoricalCrossentropy,
    CategoricalFocalCrossentropy,
    CategoricalHinge,
    CosineSimilarity,
    Dice,
    Hinge,
    Huber,
    KLDivergence,
    LogCosh,
    LossFunctionWrapper,
    MeanAbsoluteError,
    MeanAbsolutePercentageError,
    MeanSquaredError,
    MeanSquaredLogarithmicError,
    Poisson,
    SparseCategoricalCrossentropy,
    SquaredHinge,
    Tversky,
    binary_crossentropy,
    binary_focal_crossentropy,
    categorical_crossentropy,
    categorical_focal_crossentropy,
    categorical_hinge,
    cosine_similarity,
    dice,
    hinge,
    huber,
    kl_divergence,
    log_cosh,
    mean_absolute_error,
    mean_absolute_percentage_error,
    mean_squared_error,
    mean_squared_logarithmic_error,
    poisson,
    sparse_categorical_crossentropy,
    squared_hinge,
    tversky,
)
from keratron.losses.serialization import deserialize_object, serialize_object

# Keras 3's short names, plus the tf.keras 2 spellings still found in saved training
# configs ("logcosh", "kullback_leibler_divergence").
mse = MSE = mean_squared_error
mae = MAE = mean_absolute_error
mape = MAPE = mean_absolute_percentage_error
msle = MSLE = mean_squared_logarithmic_error
kld = KLD = kullback_leibler_divergence = kl_divergence
bce = BCE = binary_crossentropy
logcosh = log_cosh

__all__ = [
    "Loss",
    "Reduction",
    "get",
    "serialize",
    "deserialize",
    "reduce_weighted_values",
    "resolve_loss",
    *_losses.__all__,
    *_extra.__all__,
    "mse",
    "MSE",
    "mae",
    "MAE",
    "mape",
    "MAPE",
    "msle",
    "MSLE",
    "kld",
    "KLD",
    "bce",
    "BCE",
    "kullback_leibler_divergence",
    "logcosh",
]

ALL_OBJECTS = (
    Loss,
    LossFunctionWrapper,
    KLDivergence,
    Poisson,
    BinaryCrossentropy,
    BinaryFocalCrossentropy,
    CategoricalCrossentropy,
    CategoricalFocalCrossentropy,
    SparseCategoricalCrossentropy,
    MeanSquaredError,
    MeanAbsoluteError,
    MeanAbsolutePercentageError,
    MeanSquaredLogarithmicError,
    CosineSimilarity,
    LogCosh,
    Huber,
    Hinge,
    SquaredHinge,
    CategoricalHinge,
    Dice,
    Tversky,
    kl_divergence,
    poisson,
    binary_crossentropy,
    binary_focal_crossentropy,
    categorical_crossentropy,
    categorical_focal_crossentropy,
    sparse_categorical_crossentropy,
    mean_squared_error,
    mean_absolute_error,
    mean_absolute_percentage_error,
    mean_squared_logarithmic_error,
    cosine_similarity,
    log_cosh,
    huber,
    hinge,
    squared_hinge,
    categorical_hinge,
    dice,
    tversky,
    CTC,
    Circle,
    CategoricalGeneralizedCrossEntropy,
    ctc,
    circle,
    categorical_generalized_cross_entropy,
)
ALL_OBJECTS_DICT = {obj.__name__: obj for obj in ALL_OBJECTS}
ALL_OBJECTS_DICT.update(
    {
        "bce": binary_crossentropy,
        "BCE": binary_crossentropy,
        "kld": kl_divergence,
        "KLD": kl_divergence,
        "mae": mean_absolute_error,
        "MAE": mean_absolute_error,
        "mse": mean_squared_error,
        "MSE": mean_squared_error,
        "mape": mean_absolute_percentage_error,
        "MAPE": mean_absolute_percentage_error,
        "msle": mean_squared_logarithmic_error,
        "MSLE": mean_squared_logarithmic_error,
        "kullback_leibler_divergence": kl_divergence,
        "logcosh": log_cosh,
    }
)


def serialize(loss):
    """Returns the Keras 3 config dict of a `Loss` instance or a loss function.

    Example:
        >>> keratron.losses.serialize(keratron.losses.Huber())["class_name"]
        'Huber'
    """
    return serialize_object(loss, "keras.losses", ALL_OBJECTS_DICT)


def deserialize(name, custom_objects=None):
    """Rebuilds a loss from `serialize`'s output, a tf.keras 2 config dict, or a name.

    Args:
        name: a config dict or a loss name.
        custom_objects: dict of extra names to classes / functions.

    Example:
        >>> keratron.losses.deserialize({"class_name": "Huber", "config": {"delta": 2.0}})
        <Huber name=huber_loss>
    """
    # tf.keras 2's reduction="auto" reads as "sum_over_batch_size" (`standardize_reduction`).
    return deserialize_object(name, ALL_OBJECTS_DICT, custom_objects, kind="loss")


def get(identifier):
    """Returns a loss function or `Loss` instance from a name, config dict or callable.

    Function names ("mse", "categorical_crossentropy") give the function; class names
    ("MeanSquaredError") give a new instance with default arguments.

    Example:
        >>> keratron.losses.get("mse") is keratron.losses.mean_squared_error
        True
        >>> keratron.losses.get("CategoricalCrossentropy")
        <CategoricalCrossentropy name=categorical_crossentropy>
    """
    if identifier is None:
        return None
    if isinstance(identifier, dict):
        obj = deserialize(identifier)
    elif isinstance(identifier, str):
        obj = ALL_OBJECTS_DICT.get(identifier)
    else:
        obj = identifier
    if callable(obj):
        return obj() if inspect.isclass(obj) else obj
    raise ValueError(f"Could not interpret loss identifier: {identifier!r}")


def resolve_loss(identifier, y_true_shape, y_pred_shape):
    """Resolves a loss for `compile`, including the shape-dependent "crossentropy" / "ce".

    As Keras's trainer does: a last prediction dimension of 1 means binary cross-entropy;
    labels of lower rank, or with a last dimension of 1 against several classes, mean
    sparse categorical cross-entropy; otherwise categorical cross-entropy.

    Example:
        >>> keratron.losses.resolve_loss("ce", (8,), (8, 10)).__name__
        'sparse_categorical_crossentropy'
    """
    if identifier is None:
        return None
    if str(identifier).lower() not in ("crossentropy", "ce"):
        return get(identifier)
    is_binary, is_sparse = binary_or_sparse(y_true_shape, y_pred_shape)
    if is_binary:
        return binary_crossentropy
    if is_sparse:
        return sparse_categorical_crossentropy
    return categorical_crossentropy
