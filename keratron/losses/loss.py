"""The `Loss` base class and the weighting / reduction rules every loss shares (Keras 3's).

A loss computes per-sample values in `call`; `__call__` converts the inputs to the loss
dtype, applies `sample_weight` (and the mask a loss may attach to its values, as
`SparseCategoricalCrossentropy(ignore_class=...)` does) and reduces.
"""

from __future__ import annotations

import weakref

import numpy as np

from keratron import config, ops
from keratron.autodiff import tree
from keratron.autodiff.dtypes import standardize_dtype
from keratron.autodiff.tensor import Tensor, convert_to_tensor
from keratron.utils.naming import to_snake_case, unique_object_name

__all__ = [
    "Loss",
    "Reduction",
    "binary_or_sparse",
    "reduce_values",
    "reduce_weighted_values",
    "squeeze_or_expand_to_same_rank",
    "standardize_reduction",
]

REDUCTIONS = ("sum_over_batch_size", "sum", "mean", "mean_with_sample_weight", "none", None)

# ---------------------------------------------------------------------------- naming


def auto_name(class_name: str) -> str:
    """A unique snake-case name: "auc", then "auc_1", ... (shared with layers, as in Keras)."""
    return unique_object_name(to_snake_case(class_name))


def standardize_compute_dtype(dtype) -> str:
    """The compute dtype from None (floatx), a dtype name, or a Keras dtype policy."""
    if dtype is None:
        return config.floatx()
    compute = getattr(dtype, "compute_dtype", None)
    if compute is not None:
        return standardize_dtype(compute)
    if isinstance(dtype, str) and dtype.startswith("mixed_"):
        return standardize_dtype(dtype[len("mixed_") :])
    return standardize_dtype(dtype)


# ---------------------------------------------------------------------------- masks
# A loss function may mark some of its per-sample values as padding (Keras sets a
# `_keras_mask` attribute on the tensor). Tensors have fixed slots, so the mask is kept here,
# keyed by the tensor's id and dropped when the tensor is collected.
_masks: dict[int, tuple[weakref.ref, Tensor]] = {}


def set_loss_mask(values: Tensor, mask: Tensor) -> None:
    """Attaches a boolean `mask` (same shape as `values`) to a loss function's output."""
    key = id(values)
    _masks[key] = (weakref.ref(values, lambda _, k=key: _masks.pop(k, None)), mask)


def get_loss_mask(values) -> Tensor | None:
    """The mask attached by `set_loss_mask`, or None."""
    entry = _masks.get(id(values))
    if entry is None or entry[0]() is not values:
        return None
    return entry[1]


# ---------------------------------------------------------------------------- reduction


class Reduction:
    """tf.keras 2's reduction names (`keras.losses.Reduction.NONE`, ...), which tf.keras
    code passes as a loss's `reduction`; `AUTO` is "sum_over_batch_size" here, as it was in
    tf.keras 2 outside a distribution strategy.

    Example:
        >>> keratron.losses.MeanSquaredError(reduction=keratron.losses.Reduction.NONE)(
        ...     [[0.0], [1.0]], [[1.0], [1.0]]).numpy()
        array([1., 0.], dtype=float32)
    """

    AUTO = "auto"
    NONE = "none"
    SUM = "sum"
    SUM_OVER_BATCH_SIZE = "sum_over_batch_size"

    @classmethod
    def all(cls) -> tuple:
        return (cls.AUTO, cls.NONE, cls.SUM, cls.SUM_OVER_BATCH_SIZE)

    @classmethod
    def validate(cls, key) -> None:
        if key not in cls.all():
            raise ValueError(
                f"Invalid reduction key: expected one of {cls.all()}. Received: {key!r}"
            )


def standardize_reduction(reduction):
    """Validates a reduction name; None and "none" both mean no reduction, and tf.keras 2's
    "auto" is "sum_over_batch_size"."""
    if reduction == Reduction.AUTO:
        return "sum_over_batch_size"
    if reduction not in REDUCTIONS:
        raise ValueError(
            "Invalid value for argument `reduction`. Expected one of "
            f"{list(REDUCTIONS)}. Received: reduction={reduction!r}"
        )
    return reduction


def squeeze_or_expand_to_same_rank(x1, x2, expand_rank_1: bool = True):
    """Makes ranks equal when they differ by one trailing unit dimension, as Keras does.

    With `expand_rank_1`, a rank-1 operand is expanded rather than the other squeezed, so
    `(batch,)` labels against `(batch, 1)` predictions compare per sample.
    """
    r1, r2 = x1.ndim, x2.ndim
    if r1 == r2 + 1 and x1.shape[-1] == 1:
        if r2 == 1 and expand_rank_1:
            x2 = ops.expand_dims(x2, -1)
        else:
            x1 = ops.squeeze(x1, -1)
    elif r2 == r1 + 1 and x2.shape[-1] == 1:
        if r1 == 1 and expand_rank_1:
            x1 = ops.expand_dims(x1, -1)
        else:
            x2 = ops.squeeze(x2, -1)
    return x1, x2


def binary_or_sparse(y_true_shape, y_pred_shape) -> tuple[bool, bool]:
    """(is_binary, is_sparse) for labels and predictions of these shapes, as Keras's trainer
    reads them to resolve "crossentropy" and "accuracy".

    A last prediction dimension of 1 is binary; labels of lower rank, or with a last dimension
    of 1 against several classes, are sparse.

    Example:
        >>> binary_or_sparse((8,), (8, 10))
        (False, True)
    """
    y_true_shape, y_pred_shape = tuple(y_true_shape), tuple(y_pred_shape)
    t_last = y_true_shape[-1] if y_true_shape else None
    p_last = y_pred_shape[-1] if y_pred_shape else None
    is_binary = p_last == 1
    is_sparse = len(y_true_shape) < len(y_pred_shape) or (
        t_last == 1 and p_last is not None and p_last > 1
    )
    return is_binary, is_sparse


def _num_elements(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def reduce_values(values: Tensor, sample_weight=None, reduction="sum_over_batch_size"):
    """Sums `values`, then divides by their count ("sum_over_batch_size", "mean") or by the
    sum of the weights ("mean_with_sample_weight"); scalars and empty vectors pass through."""
    if reduction is None or reduction == "none" or values.shape in ((), (0,)):
        return values
    loss = ops.sum(values)
    if reduction == "sum":
        return loss
    if reduction == "mean_with_sample_weight" and sample_weight is not None:
        divisor = ops.cast(ops.sum(sample_weight), loss.dtype)
    else:
        divisor = float(_num_elements(values.shape))
    return ops.divide_no_nan(loss, divisor)


def apply_mask(sample_weight, mask, dtype, reduction):
    """Folds a boolean mask into the sample weights.

    For averaging reductions, valid entries get weight total/valid so that dividing by the
    full element count still averages over the valid entries only.
    """
    if mask is None:
        return sample_weight
    if reduction in ("mean", "sum_over_batch_size"):
        valid = ops.sum(ops.cast(mask, dtype))
        weight = ops.divide_no_nan(float(_num_elements(mask.shape)), valid)
        float_mask = ops.where(ops.cast(mask, "bool"), weight, 0.0)
    else:
        float_mask = ops.cast(mask, dtype)
    if sample_weight is None:
        return float_mask
    sample_weight = ops.cast(sample_weight, dtype)
    float_mask, sample_weight = squeeze_or_expand_to_same_rank(float_mask, sample_weight)
    return ops.multiply(sample_weight, float_mask)


def reduce_weighted_values(
    values, sample_weight=None, mask=None, reduction="sum_over_batch_size", dtype=None
):
    """Weights per-sample loss `values` by `sample_weight` (and `mask`) and reduces them."""
    reduction = standardize_reduction(reduction)
    values = convert_to_tensor(values, dtype=dtype)
    if sample_weight is not None:
        sample_weight = convert_to_tensor(sample_weight, dtype=dtype)
    sample_weight = apply_mask(sample_weight, mask, values.dtype, reduction)
    if sample_weight is not None:
        sample_weight = ops.cast(sample_weight, values.dtype)
        values, sample_weight = squeeze_or_expand_to_same_rank(values, sample_weight)
        values = ops.multiply(values, sample_weight)
    return reduce_values(values, sample_weight, reduction)


# ---------------------------------------------------------------------------- Loss


def _is_array_like_list(x) -> bool:
    # A (nested) list of numbers is one array, not a structure of scalar outputs.
    if isinstance(x, (list, tuple)):
        return all(_is_array_like_list(e) for e in x)
    return isinstance(x, (int, float, bool, np.number))


def _convert_structure(x, dtype):
    if _is_array_like_list(x):
        return convert_to_tensor(x, dtype=dtype)
    return tree.map_structure(lambda v: convert_to_tensor(v, dtype=dtype), x)


class Loss:
    """Base class of losses: subclasses implement `call(y_true, y_pred)` -> per-sample values.

    Args:
        name: the loss's name; defaults to the snake-case class name, made unique.
        reduction: "sum_over_batch_size" (default), "sum", "mean",
            "mean_with_sample_weight", "none" or None.
        dtype: dtype of the computation; defaults to `keratron.config.floatx()`.

    Example:
        >>> class MeanCube(keratron.losses.Loss):
        ...     def call(self, y_true, y_pred):
        ...         return keratron.ops.mean((y_pred - y_true) ** 3, axis=-1)
        >>> float(MeanCube()([[0.0, 0.0]], [[1.0, 2.0]]))
        4.5
    """

    def __init__(self, name=None, reduction="sum_over_batch_size", dtype=None):
        self.name = name or auto_name(self.__class__.__name__)
        self.reduction = standardize_reduction(reduction)
        self._dtype = standardize_compute_dtype(dtype)

    @property
    def dtype(self) -> str:
        return self._dtype

    def __call__(self, y_true, y_pred, sample_weight=None):
        """Returns the weighted, reduced loss."""
        y_pred = _convert_structure(y_pred, self.dtype)
        y_true = _convert_structure(y_true, self.dtype)
        losses = self.call(y_true, y_pred)
        return reduce_weighted_values(
            losses,
            sample_weight=sample_weight,
            mask=get_loss_mask(losses),
            reduction=self.reduction,
            dtype=self.dtype,
        )

    def call(self, y_true, y_pred):
        """Per-sample loss values; subclasses define it."""
        raise TypeError(
            f"{self.__class__.__name__} must define `call(y_true, y_pred)`: the Loss base "
            "class has no loss of its own."
        )

    def get_config(self) -> dict:
        return {"name": self.name, "reduction": self.reduction}

    @classmethod
    def from_config(cls, config: dict):
        return cls(**config)

    def __repr__(self):
        return f"<{self.__class__.__name__} name={self.name}>"
