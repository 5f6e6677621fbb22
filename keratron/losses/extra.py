"""CTC, Circle and categorical generalized cross-entropy losses, named, defaulted and computed
as in Keras 3. Written with keratron ops, so gradients come from the tape."""

from __future__ import annotations

from keratron import ops
from keratron.losses.loss import Loss, set_loss_mask
from keratron.losses.losses import LossFunctionWrapper
from keratron.ops.utils import as_tensor

__all__ = [
    "CTC",
    "Circle",
    "CategoricalGeneralizedCrossEntropy",
    "ctc",
    "circle",
    "categorical_generalized_cross_entropy",
]


def ctc(y_true, y_pred):
    """Connectionist temporal classification loss per sample.

    Label 0 is both the blank class and the padding of `y_true`; every time step of
    `y_pred` is used.

    Args:
        y_true: int labels `(batch, max_label_length)`, padded with 0.
        y_pred: logits `(batch, time_steps, num_classes)`.

    Returns:
        `(batch,)` negative log-likelihoods.

    Example:
        >>> y_pred = np.zeros((1, 2, 2), "float32")
        >>> keratron.losses.ctc(np.array([[1]]), y_pred).numpy().round(6)
        array([0.287682], dtype=float32)
    """
    y_true, y_pred = as_tensor(y_true), as_tensor(y_pred)
    if y_true.ndim != 2:
        raise ValueError(
            "ctc: targets `y_true` must be an int tensor of shape (batch_size, max_length). "
            f"Received: y_true.shape={tuple(y_true.shape)}"
        )
    if y_pred.ndim != 3:
        raise ValueError(
            "ctc: logits `y_pred` must have shape (batch_size, max_length, num_classes). "
            f"Received: y_pred.shape={tuple(y_pred.shape)}"
        )
    batch, steps = y_pred.shape[0], y_pred.shape[1]
    input_length = ops.full((batch,), steps, dtype="int32")
    label_length = ops.cast(ops.sum(ops.cast(ops.not_equal(y_true, 0), "int32"), axis=-1), "int32")
    return ops.ctc_loss(y_true, y_pred, label_length, input_length, mask_index=0)


def _pos_neg_masks(query_labels, key_labels, remove_diagonal):
    if query_labels.ndim == 1:
        query_labels = ops.reshape(query_labels, (-1, 1))
    if key_labels.ndim == 1:
        key_labels = ops.reshape(key_labels, (-1, 1))
    positive = ops.equal(query_labels, ops.transpose(key_labels))
    negative = ops.logical_not(positive)
    if remove_diagonal:
        n, m = positive.shape
        positive = ops.logical_and(positive, ops.logical_not(ops.eye(n, m, dtype="bool")))
    return positive, negative


def circle(
    y_true,
    y_pred,
    ref_labels=None,
    ref_embeddings=None,
    remove_diagonal=True,
    gamma=80,
    margin=0.4,
):
    """Circle loss (Sun et al., 2020) over the pairwise cosine distances of L2-normalized
    embeddings: pulls same-label pairs together and pushes different-label pairs apart,
    each pair weighted by how far it is from its optimum.

    Args:
        y_true: int labels `(batch,)`.
        y_pred: L2-normalized embeddings `(batch, dim)`.
        ref_labels: labels of the reference embeddings (default `y_true`).
        ref_embeddings: reference embeddings (default `y_pred`).
        remove_diagonal: whether each sample is excluded from its own positives.
        gamma: scale of the similarities.
        margin: relaxation margin.

    Returns:
        `(batch,)` losses; zero losses are masked out of the mean, as in Keras.

    Example:
        >>> emb = np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]], "float32")
        >>> keratron.losses.circle(np.array([0, 0, 1]), emb).shape
        (3,)
    """
    y_pred = as_tensor(y_pred)
    if not y_pred._value.dtype.is_floating_point:
        y_pred = ops.cast(y_pred, "float32")
    y_true = ops.cast(as_tensor(y_true), "int32")
    ref_embeddings = y_pred if ref_embeddings is None else ops.cast(ref_embeddings, y_pred.dtype)
    ref_labels = y_true if ref_labels is None else ops.cast(as_tensor(ref_labels), "int32")
    optim_pos, optim_neg = margin, 1 + margin
    delta_pos, delta_neg = margin, 1 - margin
    distances = ops.subtract(1.0, ops.matmul(y_pred, ops.transpose(ref_embeddings)))
    distances = ops.maximum(distances, 0.0)
    positive, negative = _pos_neg_masks(y_true, ref_labels, remove_diagonal)
    pos_weights = ops.maximum(
        ops.multiply(ops.add(optim_pos, distances), ops.cast(positive, distances.dtype)), 0.0
    )
    neg_weights = ops.maximum(
        ops.multiply(ops.subtract(optim_neg, distances), ops.cast(negative, distances.dtype)), 0.0
    )
    pos_terms = ops.multiply(-gamma, ops.multiply(pos_weights, ops.subtract(delta_pos, distances)))
    neg_terms = ops.multiply(gamma, ops.multiply(neg_weights, ops.subtract(delta_neg, distances)))
    p_loss = ops.logsumexp(ops.where(positive, pos_terms, float("-inf")), axis=1)
    n_loss = ops.logsumexp(ops.where(negative, neg_terms, float("-inf")), axis=1)
    loss = ops.softplus(ops.add(p_loss, n_loss))
    set_loss_mask(loss, ops.greater(loss, 0.0))
    return loss


def categorical_generalized_cross_entropy(y_true, y_pred, q):
    """Generalized cross-entropy (Zhang and Sabuncu, 2018), robust to noisy labels:
    `(1 - p ** q) / q` with `p` the predicted probability of the true class.

    Args:
        y_true: int class labels `(batch,)`.
        y_pred: probabilities `(batch, num_classes)`.
        q: float in (0, 1); towards 0 the loss tends to cross-entropy, at 1 to MAE.

    Example:
        >>> y_pred = np.array([[0.25, 0.75]], "float32")
        >>> loss = keratron.losses.categorical_generalized_cross_entropy(np.array([1]), y_pred, 0.5)
        >>> loss.numpy().round(4)
        array([0.2679], dtype=float32)
    """
    y_pred = as_tensor(y_pred)
    if not y_pred._value.dtype.is_floating_point:
        y_pred = ops.cast(y_pred, "float32")
    one_hot = ops.one_hot(
        ops.cast(as_tensor(y_true), "int64"), y_pred.shape[-1], dtype=y_pred.dtype
    )
    p = ops.sum(ops.multiply(y_pred, one_hot), axis=-1)
    return ops.divide(ops.subtract(1.0, ops.power(p, q)), q)


class CTC(LossFunctionWrapper):
    """CTC loss as a `Loss` (see `ctc`).

    Example:
        >>> loss = keratron.losses.CTC()
        >>> round(float(loss(np.array([[1]]), np.zeros((1, 2, 2), "float32"))), 4)
        0.2877
    """

    def __init__(self, reduction="sum_over_batch_size", name="ctc", dtype=None):
        super().__init__(ctc, reduction=reduction, name=name, dtype=dtype)

    def get_config(self):
        return Loss.get_config(self)

    def __repr__(self):
        return Loss.__repr__(self)


class Circle(LossFunctionWrapper):
    """Circle loss as a `Loss` (see `circle`).

    Args:
        gamma: scale of the similarities (default 80).
        margin: relaxation margin (default 0.4).
        remove_diagonal: whether each sample is excluded from its own positives.
        reduction, name, dtype: see `Loss`.

    Example:
        >>> emb = np.array([[1.0, 0.0], [0.6, 0.8], [0.0, 1.0]], "float32")
        >>> float(keratron.losses.Circle()(np.array([0, 0, 1]), emb)) > 0
        True
    """

    def __init__(
        self,
        gamma=80.0,
        margin=0.4,
        remove_diagonal=True,
        reduction="sum_over_batch_size",
        name="circle",
        dtype=None,
    ):
        super().__init__(
            circle,
            reduction=reduction,
            name=name,
            dtype=dtype,
            gamma=gamma,
            margin=margin,
            remove_diagonal=remove_diagonal,
        )
        self.gamma = gamma
        self.margin = margin
        self.remove_diagonal = remove_diagonal

    def get_config(self):
        return {
            **Loss.get_config(self),
            "gamma": self.gamma,
            "margin": self.margin,
            "remove_diagonal": self.remove_diagonal,
        }

    def __repr__(self):
        return Loss.__repr__(self)


class CategoricalGeneralizedCrossEntropy(LossFunctionWrapper):
    """Generalized cross-entropy as a `Loss` (see `categorical_generalized_cross_entropy`).

    Args:
        q: float in (0, 1) (default 0.5).
        reduction, name, dtype: see `Loss`.

    Example:
        >>> loss = keratron.losses.CategoricalGeneralizedCrossEntropy(q=0.5)
        >>> round(float(loss(np.array([1]), np.array([[0.25, 0.75]], "float32"))), 4)
        0.2679
    """

    def __init__(
        self,
        q=0.5,
        reduction="sum_over_batch_size",
        name="categorical_generalized_cross_entropy",
        dtype=None,
    ):
        if isinstance(q, bool) or not isinstance(q, (int, float)) or not 0 < q < 1:
            raise ValueError(
                f"CategoricalGeneralizedCrossEntropy: argument `q` must be a float in the "
                f"interval (0, 1). Received: q={q!r}"
            )
        super().__init__(
            categorical_generalized_cross_entropy,
            reduction=reduction,
            name=name,
            dtype=dtype,
            q=q,
        )
        self.q = q

    def get_config(self):
        return {**Loss.get_config(self), "q": self.q}

    def __repr__(self):
        return Loss.__repr__(self)
