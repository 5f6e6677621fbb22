"""ReversibleEmbedding (Keras's `layers/core/reversible_embedding`): an `Embedding` that can
also run backwards, projecting hidden states onto the vocabulary to give logits (with the
embedding matrix itself when `tie_weights`)."""

from __future__ import annotations

from keratron import ops
from keratron.layers.core import Embedding
from keratron.layers.layer import who as _who

__all__ = ["ReversibleEmbedding"]


class ReversibleEmbedding(Embedding):
    """An embedding that maps indices to vectors, or, with `reverse=True`, vectors
    `(..., output_dim)` to logits `(..., input_dim)` over the vocabulary.

    Args:
        input_dim: vocabulary size.
        output_dim: embedding size.
        tie_weights: if True the reverse projection is the transposed `embeddings`; else a
            separate trainable `reverse_embeddings` matrix `(output_dim, input_dim)`.
        embeddings_initializer, embeddings_regularizer, embeddings_constraint, mask_zero:
            as `Embedding`.
        reverse_dtype: optional dtype the reverse projection is computed in.
        logit_soft_cap: if set, reverse logits become `tanh(logits / cap) * cap`.

    Call arguments:
        inputs: indices, or vectors when `reverse`.
        reverse: whether to project vectors onto the vocabulary.

    Example:
        >>> layer = keratron.layers.ReversibleEmbedding(10, 4)
        >>> h = layer(np.array([[1, 2, 3]]))
        >>> layer(h, reverse=True).shape
        (1, 3, 10)
    """

    def __init__(
        self,
        input_dim,
        output_dim,
        tie_weights=True,
        embeddings_initializer="uniform",
        embeddings_regularizer=None,
        embeddings_constraint=None,
        mask_zero=False,
        reverse_dtype=None,
        logit_soft_cap=None,
        **kwargs,
    ):
        who = _who("ReversibleEmbedding", kwargs)
        if logit_soft_cap is not None and (
            isinstance(logit_soft_cap, bool)
            or not isinstance(logit_soft_cap, (int, float))
            or logit_soft_cap <= 0
        ):
            raise ValueError(
                f"{who}: argument `logit_soft_cap` must be None or a positive number. "
                f"Received: logit_soft_cap={logit_soft_cap!r}"
            )
        super().__init__(
            input_dim,
            output_dim,
            embeddings_initializer=embeddings_initializer,
            embeddings_regularizer=embeddings_regularizer,
            embeddings_constraint=embeddings_constraint,
            mask_zero=mask_zero,
            **kwargs,
        )
        self.tie_weights = bool(tie_weights)
        self.reverse_dtype = reverse_dtype
        self.logit_soft_cap = logit_soft_cap

    def build(self, input_shape=None):
        if self.built:
            return
        super().build(input_shape)
        if not self.tie_weights:
            self.reverse_embeddings = self.add_weight(
                name="reverse_embeddings",
                shape=(self.output_dim, self.input_dim),
                initializer=self.embeddings_initializer,
                trainable=True,
            )
        self.built = True

    def call(self, inputs, reverse=False):
        if not reverse:
            return super().call(inputs)
        if inputs.shape[-1] != self.output_dim:
            raise ValueError(
                f"Layer '{self.name}': reverse inputs must end in output_dim="
                f"{self.output_dim}. Received: inputs.shape={tuple(inputs.shape)}"
            )
        kernel = ops.transpose(self.embeddings) if self.tie_weights else self.reverse_embeddings
        if self.reverse_dtype is not None:
            inputs = ops.cast(inputs, self.reverse_dtype)
            kernel = ops.cast(kernel, self.reverse_dtype)
        else:
            kernel = ops.cast(kernel, inputs.dtype)
        logits = ops.matmul(inputs, kernel)
        if self.logit_soft_cap is not None:
            cap = self.logit_soft_cap
            logits = ops.multiply(ops.tanh(ops.divide(logits, cap)), cap)
        return logits

    def compute_mask(self, inputs, mask=None):
        # Only the forward (index) direction carries a mask; reverse inputs are float vectors.
        if not self.mask_zero or "int" not in str(inputs.dtype):
            return None
        return ops.not_equal(inputs, 0)

    def compute_output_shape(self, input_shape, reverse=False):
        if reverse:
            return (*tuple(input_shape)[:-1], self.input_dim)
        return (*tuple(input_shape), self.output_dim)

    def get_config(self):
        return {
            **super().get_config(),
            "tie_weights": self.tie_weights,
            "reverse_dtype": self.reverse_dtype,
            "logit_soft_cap": self.logit_soft_cap,
        }
