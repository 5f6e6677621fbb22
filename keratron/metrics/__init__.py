"""Metrics, as `keras.metrics`: `Metric` classes, metric functions, `get`, `serialize`,
`deserialize`, and the shape-dependent resolution of "accuracy" used by `compile`."""

from __future__ import annotations

import inspect

from keratron.losses.loss import binary_or_sparse
from keratron.losses.losses import (
    binary_crossentropy,
    binary_focal_crossentropy,
    categorical_crossentropy,
    categorical_focal_crossentropy,
    categorical_hinge,
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
)
from keratron.losses.serialization import deserialize_object, serialize_object
from keratron.metrics.accuracy_metrics import (
    Accuracy,
    BinaryAccuracy,
    CategoricalAccuracy,
    SparseCategoricalAccuracy,
    SparseTopKCategoricalAccuracy,
    TopKCategoricalAccuracy,
    accuracy,
    binary_accuracy,
    categorical_accuracy,
    in_top_k,
    sparse_categorical_accuracy,
    sparse_top_k_categorical_accuracy,
    top_k_categorical_accuracy,
)
from keratron.metrics.confusion_metrics import (
    AUC,
    FalseNegatives,
    FalsePositives,
    Precision,
    PrecisionAtRecall,
    Recall,
    RecallAtPrecision,
    SensitivityAtSpecificity,
    SpecificityAtSensitivity,
    TrueNegatives,
    TruePositives,
)
from keratron.metrics.correlation_metrics import (
    ConcordanceCorrelation,
    PearsonCorrelation,
    concordance_correlation,
    pearson_correlation,
)
from keratron.metrics.f_score_metrics import F1Score, FBetaScore
from keratron.metrics.iou_metrics import BinaryIoU, IoU, MeanIoU, OneHotIoU, OneHotMeanIoU
from keratron.metrics.metric import Metric
from keratron.metrics.probabilistic_metrics import (
    BinaryCrossentropy,
    CategoricalCrossentropy,
    CategoricalHinge,
    Hinge,
    KLDivergence,
    Poisson,
    SparseCategoricalCrossentropy,
    SquaredHinge,
)
from keratron.metrics.reduction_metrics import Mean, MeanMetricWrapper, Sum
from keratron.metrics.regression_metrics import (
    CosineSimilarity,
    LogCoshError,
    MeanAbsoluteError,
    MeanAbsolutePercentageError,
    MeanSquaredError,
    MeanSquaredLogarithmicError,
    R2Score,
    RootMeanSquaredError,
    cosine_similarity,
)
from keratron.utils.naming import to_snake_case

# tf.keras 2 / Keras legacy short names of the metric functions.
mse = MSE = mean_squared_error
mae = MAE = mean_absolute_error
mape = MAPE = mean_absolute_percentage_error
msle = MSLE = mean_squared_logarithmic_error
kld = KLD = kullback_leibler_divergence = kl_divergence
logcosh = log_cosh

ALL_OBJECTS = (
    Metric,
    Mean,
    Sum,
    MeanMetricWrapper,
    MeanSquaredError,
    RootMeanSquaredError,
    MeanAbsoluteError,
    MeanAbsolutePercentageError,
    MeanSquaredLogarithmicError,
    CosineSimilarity,
    LogCoshError,
    R2Score,
    PearsonCorrelation,
    ConcordanceCorrelation,
    AUC,
    FalseNegatives,
    FalsePositives,
    Precision,
    PrecisionAtRecall,
    Recall,
    RecallAtPrecision,
    SensitivityAtSpecificity,
    SpecificityAtSensitivity,
    TrueNegatives,
    TruePositives,
    FBetaScore,
    F1Score,
    IoU,
    MeanIoU,
    BinaryIoU,
    OneHotIoU,
    OneHotMeanIoU,
    Hinge,
    SquaredHinge,
    CategoricalHinge,
    KLDivergence,
    Poisson,
    BinaryCrossentropy,
    CategoricalCrossentropy,
    SparseCategoricalCrossentropy,
    Accuracy,
    BinaryAccuracy,
    CategoricalAccuracy,
    SparseCategoricalAccuracy,
    TopKCategoricalAccuracy,
    SparseTopKCategoricalAccuracy,
)
# What `get` accepts, as Keras 3: class names and their snake-case spellings (all classes),
# plus the short aliases.
ALL_OBJECTS_DICT = {cls.__name__: cls for cls in ALL_OBJECTS}
ALL_OBJECTS_DICT.update({to_snake_case(cls.__name__): cls for cls in ALL_OBJECTS})
ALL_OBJECTS_DICT.update(
    {
        "bce": BinaryCrossentropy,
        "BCE": BinaryCrossentropy,
        "mse": MeanSquaredError,
        "MSE": MeanSquaredError,
        "mae": MeanAbsoluteError,
        "MAE": MeanAbsoluteError,
        "mape": MeanAbsolutePercentageError,
        "MAPE": MeanAbsolutePercentageError,
        "msle": MeanSquaredLogarithmicError,
        "MSLE": MeanSquaredLogarithmicError,
    }
)

METRIC_FUNCTIONS = (
    accuracy,
    binary_accuracy,
    categorical_accuracy,
    sparse_categorical_accuracy,
    top_k_categorical_accuracy,
    sparse_top_k_categorical_accuracy,
    mean_squared_error,
    mean_absolute_error,
    mean_absolute_percentage_error,
    mean_squared_logarithmic_error,
    log_cosh,
    huber,
    kl_divergence,
    poisson,
    binary_crossentropy,
    binary_focal_crossentropy,
    categorical_crossentropy,
    categorical_focal_crossentropy,
    sparse_categorical_crossentropy,
    hinge,
    squared_hinge,
    categorical_hinge,
    cosine_similarity,
    pearson_correlation,
    concordance_correlation,
)
# Names a config may use for a function (a MeanMetricWrapper's `fn`, a tf.keras 2 metric).
_FUNCTIONS_DICT = {fn.__name__: fn for fn in METRIC_FUNCTIONS}
_FUNCTIONS_DICT.update(
    {
        "kld": kl_divergence,
        "KLD": kl_divergence,
        "kullback_leibler_divergence": kl_divergence,
        "logcosh": log_cosh,
    }
)

__all__ = [
    *(cls.__name__ for cls in ALL_OBJECTS),
    *(fn.__name__ for fn in METRIC_FUNCTIONS),
    "in_top_k",
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
    "kullback_leibler_divergence",
    "logcosh",
    "get",
    "serialize",
    "deserialize",
    "resolve_accuracy",
    "get_metric",
]


def serialize(metric):
    """Returns the Keras 3 config dict of a `Metric` instance or a metric function.

    Example:
        >>> keratron.metrics.serialize(keratron.metrics.AUC())["config"]["num_thresholds"]
        200
    """
    from keratron import losses

    if isinstance(metric, losses.Loss):  # a loss instance used as a metric
        return losses.serialize(metric)
    return serialize_object(metric, "keras.metrics", ALL_OBJECTS_DICT)


def deserialize(config, custom_objects=None):
    """Rebuilds a metric from `serialize`'s output, a tf.keras 2 config dict, or a name.

    Example:
        >>> keratron.metrics.deserialize({"class_name": "AUC", "config": {"curve": "PR"}}).curve
        <AUCCurve.PR: 'PR'>
    """
    from keratron import losses

    if isinstance(config, dict) and config.get("module") == "keras.losses":
        return losses.deserialize(config, custom_objects)
    return deserialize_object(
        config, ALL_OBJECTS_DICT, custom_objects, kind="metric", functions=_FUNCTIONS_DICT
    )


def get(identifier):
    """Returns a metric from a name, config dict, function or `Metric` instance.

    Names resolve to a new instance of a metric class: "mse", "MeanSquaredError" and
    "mean_squared_error" all give `MeanSquaredError()`. "accuracy" gives `Accuracy()`; the
    shape-dependent choice that `compile(metrics=["accuracy"])` makes is
    `resolve_accuracy`.

    Example:
        >>> keratron.metrics.get("mse")
        <MeanSquaredError name=mean_squared_error>
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
    raise ValueError(f"Could not interpret metric identifier: {identifier!r}")


def _is_binary_crossentropy(loss) -> bool:
    from keratron import losses

    if isinstance(loss, str):
        loss = losses.ALL_OBJECTS_DICT.get(loss, loss)
    if loss in (binary_crossentropy, binary_focal_crossentropy):
        return True
    if inspect.isclass(loss):
        return issubclass(loss, (losses.BinaryCrossentropy, losses.BinaryFocalCrossentropy))
    if isinstance(loss, (losses.BinaryCrossentropy, losses.BinaryFocalCrossentropy)):
        return True
    return getattr(loss, "fn", None) in (binary_crossentropy, binary_focal_crossentropy)


def resolve_accuracy(identifier, loss=None, y_true_shape=None, y_pred_shape=None):
    """The metric that `compile(metrics=["accuracy"])` (or "acc") means for one output.

    Keras's rule: predictions with a last dimension of 1 -> `BinaryAccuracy`; labels of
    lower rank than the predictions, or with a last dimension of 1 against several
    classes -> `SparseCategoricalAccuracy`; otherwise `CategoricalAccuracy`. As tf.keras 2
    did, a binary cross-entropy `loss` also means `BinaryAccuracy` (multi-label outputs);
    Keras 3 ignores the loss and would pick `CategoricalAccuracy` there. The metric is named
    after `identifier` ("accuracy" or "acc").

    Args:
        identifier: "accuracy" or "acc" (any case).
        loss: the output's loss (name, function or `Loss`), or None.
        y_true_shape: shape of the labels.
        y_pred_shape: shape of the predictions.

    Example:
        >>> keratron.metrics.resolve_accuracy("acc", "mse", (32,), (32, 10))
        <SparseCategoricalAccuracy name=acc>
    """
    if str(identifier).lower() not in ("accuracy", "acc"):
        raise ValueError(
            f"resolve_accuracy: expected 'accuracy' or 'acc'. Received: {identifier!r}"
        )
    if y_true_shape is None or y_pred_shape is None:
        raise ValueError(
            "resolve_accuracy: `y_true_shape` and `y_pred_shape` are needed to choose the "
            f"accuracy. Received: y_true_shape={y_true_shape}, y_pred_shape={y_pred_shape}"
        )
    is_binary, is_sparse = binary_or_sparse(y_true_shape, y_pred_shape)
    name = str(identifier)
    if is_binary or (loss is not None and _is_binary_crossentropy(loss)):
        return BinaryAccuracy(name=name)
    if is_sparse:
        return SparseCategoricalAccuracy(name=name)
    return CategoricalAccuracy(name=name)


def get_metric(identifier, loss=None, y_true_shape=None, y_pred_shape=None):
    """Resolves one entry of `compile(metrics=...)` to a `Metric`, as Keras's trainer does.

    "accuracy"/"acc" go through `resolve_accuracy`; other names, dicts and instances through
    `get`; a plain function is wrapped in `MeanMetricWrapper`. The metric is named after a
    string identifier ("mse" stays "mse"), otherwise after the object.

    Example:
        >>> keratron.metrics.get_metric("mse").name
        'mse'
    """
    if identifier is None:
        raise ValueError("get_metric: expected a metric, received None.")
    if str(identifier).lower() in ("accuracy", "acc"):
        metric = resolve_accuracy(identifier, loss, y_true_shape, y_pred_shape)
    else:
        metric = get(identifier)
    if isinstance(identifier, str):
        name = identifier
    elif hasattr(metric, "name"):
        name = metric.name
    elif hasattr(metric, "__name__"):
        name = to_snake_case(metric.__name__)
    else:
        name = to_snake_case(type(metric).__name__)
    if not isinstance(metric, Metric):
        metric = MeanMetricWrapper(metric)
    metric.name = name
    return metric
