"""Grouped-query attention (Ainslie et al., 2023), as Keras's `GroupQueryAttention`: query
heads share `num_key_value_heads` key/value heads. Projections are `EinsumDense` sublayers
named "query", "key", ("gate",) "value" and "attention_output" with Keras 3's equations,
shapes and creation order, so Keras weights load by order."""

from __future__ import annotations

import math

import numpy as np

from keratron import ops
from keratron import random as kt_random
from keratron.layers import constraints, initializers, regularizers
from keratron.layers.attention import (
    _check_rate,
    _combined_mask,
    _masked_softmax,
    _serialize,
)
from keratron.layers.core import EinsumDense
from keratron.layers.layer import Layer
from keratron.layers.layer import who as _who

__all__ = ["GroupQueryAttention", "GroupedQueryAttention"]


def _positive(value, arg, who, optional=False):
    if optional and value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value <= 0:
        raise ValueError(
            f"{who}: argument `{arg}` must be a positive integer"
            f"{' or None' if optional else ''}. Received: {arg}={value!r}"
        )
    return int(value)


class GroupedQueryAttention(Layer):
    """Grouped-query attention: `num_query_heads` query heads of size `head_dim` attend over
    `num_key_value_heads` key/value heads, each shared by `num_query_heads //
    num_key_value_heads` query heads.

    Args:
        head_dim: size of each attention head.
        num_query_heads: number of query heads.
        num_key_value_heads: number of key and value heads; must divide `num_query_heads`.
        dropout: fraction of the attention weights dropped in training.
        use_bias: whether the projections have biases.
        sliding_window: optional positive int; query step i only sees keys closer than it.
        flash_attention: accepted for Keras compatibility (Keras's restrictions apply: no
            dropout, no returned scores).
        kernel_initializer, bias_initializer, kernel_regularizer, bias_regularizer,
        activity_regularizer, kernel_constraint, bias_constraint: for the projections.
        use_gate: gate the heads with a sigmoid projection of the query before the output.
        seed: optional int seed for the dropout.

    Call arguments: `query` (B, T, dim), `value` (B, S, dim), `key` (default value),
    `query_mask`, `value_mask`, `key_mask`, `attention_mask` (B, T, S) booleans,
    `return_attention_scores`, `training`, `use_causal_mask`.

    Example:
        >>> gqa = keratron.layers.GroupQueryAttention(4, num_query_heads=4,
        ...                                           num_key_value_heads=2)
        >>> x = np.ones((2, 5, 8), "float32")
        >>> gqa(x, x).shape
        (2, 5, 8)
    """

    def __init__(
        self,
        head_dim,
        num_query_heads,
        num_key_value_heads,
        dropout=0.0,
        use_bias=True,
        sliding_window=None,
        flash_attention=None,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        kernel_regularizer=None,
        bias_regularizer=None,
        activity_regularizer=None,
        kernel_constraint=None,
        bias_constraint=None,
        use_gate=False,
        seed=None,
        **kwargs,
    ):
        who = _who("GroupQueryAttention", kwargs)
        head_dim = _positive(head_dim, "head_dim", who)
        num_query_heads = _positive(num_query_heads, "num_query_heads", who)
        num_key_value_heads = _positive(num_key_value_heads, "num_key_value_heads", who)
        if num_query_heads % num_key_value_heads:
            raise ValueError(
                f"{who}: `num_query_heads` must be divisible by `num_key_value_heads`. "
                f"Received: num_query_heads={num_query_heads}, "
                f"num_key_value_heads={num_key_value_heads}"
            )
        sliding_window = _positive(sliding_window, "sliding_window", who, optional=True)
        dropout = _check_rate(dropout, "dropout", who)
        if flash_attention and dropout > 0:
            raise ValueError(
                f"{who}: dropout is not supported with flash attention; set dropout=0.0 to "
                f"use flash attention. Received: dropout={dropout}"
            )
        super().__init__(**kwargs)
        self.supports_masking = True
        self.head_dim = head_dim
        self.num_query_heads = num_query_heads
        self.num_key_value_heads = num_key_value_heads
        self.num_repeats = num_query_heads // num_key_value_heads
        self.dropout = dropout
        self.use_bias = bool(use_bias)
        self.use_gate = bool(use_gate)
        self.sliding_window = sliding_window
        self._flash_attention = bool(flash_attention)
        self.kernel_initializer = initializers.get(kernel_initializer)
        self.bias_initializer = initializers.get(bias_initializer)
        self.kernel_regularizer = regularizers.get(kernel_regularizer)
        self.bias_regularizer = regularizers.get(bias_regularizer)
        self.activity_regularizer = regularizers.get(activity_regularizer)
        self.kernel_constraint = constraints.get(kernel_constraint)
        self.bias_constraint = constraints.get(bias_constraint)
        self.seed = seed
        self.seed_generator = kt_random.SeedGenerator(seed) if dropout > 0 else None
        self._inverse_sqrt_head_dim = 1.0 / math.sqrt(float(head_dim))

    def _dense(self, equation, output_shape, bias_axes, name, input_shape, activation=None):
        # Each projection gets its own copy of the initializers, as in Keras.
        layer = EinsumDense(
            equation,
            output_shape=output_shape,
            bias_axes=bias_axes if self.use_bias else None,
            activation=activation,
            name=name,
            kernel_initializer=type(self.kernel_initializer).from_config(
                self.kernel_initializer.get_config()
            ),
            bias_initializer=type(self.bias_initializer).from_config(
                self.bias_initializer.get_config()
            ),
            kernel_regularizer=self.kernel_regularizer,
            bias_regularizer=self.bias_regularizer,
            activity_regularizer=self.activity_regularizer,
            kernel_constraint=self.kernel_constraint,
            bias_constraint=self.bias_constraint,
            dtype=self._dtype,
        )
        layer.build(tuple(input_shape))
        layer.built = True
        # Tracked in creation order, so `weights` lists them as Keras does.
        self._layers.append(layer)
        return layer

    def build(self, query_shape, value_shape, key_shape=None):
        query_shape, value_shape = tuple(query_shape), tuple(value_shape)
        key_shape = value_shape if key_shape is None else tuple(key_shape)
        self._check_shapes(query_shape, value_shape, key_shape)
        self.feature_dim = query_shape[-1]
        u, v, h = self.num_query_heads, self.num_key_value_heads, self.head_dim
        self._query_dense = self._dense("bqm,muh->bquh", (None, u, h), "uh", "query", query_shape)
        self._key_dense = self._dense("bkm,mvh->bkvh", (None, v, h), "vh", "key", key_shape)
        self._gate_dense = None
        if self.use_gate:
            self._gate_dense = self._dense(
                "bqm,muh->bquh", (None, u, h), "uh", "gate", query_shape, activation="sigmoid"
            )
        self._value_dense = self._dense("bkm,mvh->bkvh", (None, v, h), "vh", "value", value_shape)
        self._output_dense = self._dense(
            "bquh,uhm->bqm",
            (None, self.feature_dim),
            "m",
            "attention_output",
            (None, None, u, h),
        )
        self.built = True

    def _check_shapes(self, query_shape, value_shape, key_shape):
        if len(query_shape) != 3 or len(value_shape) != 3 or len(key_shape) != 3:
            raise ValueError(
                f"Layer '{self.name}' (GroupQueryAttention): query, value and key must be "
                f"3D (batch, steps, features). Received: query_shape={query_shape}, "
                f"value_shape={value_shape}, key_shape={key_shape}"
            )
        if query_shape[-1] != value_shape[-1]:
            raise ValueError(
                f"Layer '{self.name}' (GroupQueryAttention): the last dimension of `query` "
                f"and `value` must be equal. Received: query_shape={query_shape}, "
                f"value_shape={value_shape}"
            )
        if value_shape[1:-1] != key_shape[1:-1]:
            raise ValueError(
                f"Layer '{self.name}' (GroupQueryAttention): all dimensions of `value` and "
                f"`key` except the last must be equal. Received: value_shape={value_shape}, "
                f"key_shape={key_shape}"
            )

    def call(
        self,
        query,
        value,
        key=None,
        query_mask=None,
        value_mask=None,
        key_mask=None,
        attention_mask=None,
        return_attention_scores=False,
        training=None,
        use_causal_mask=False,
    ):
        if self._flash_attention and return_attention_scores:
            raise ValueError(
                f"Layer '{self.name}' (GroupQueryAttention): attention scores cannot be "
                "returned with flash_attention=True. Received: return_attention_scores=True"
            )
        value = ops.convert_to_tensor(value)
        key = value if key is None else ops.convert_to_tensor(key)
        # As Keras, masks carried by the inputs (e.g. from Embedding(mask_zero=True)) apply.
        if query_mask is None:
            query_mask = getattr(query, "_keras_mask", None)
        if value_mask is None:
            value_mask = getattr(value, "_keras_mask", None)
        if key_mask is None and key is not value:
            key_mask = getattr(key, "_keras_mask", None)
        mask = _combined_mask(
            query,
            value,
            query_mask,
            value_mask,
            key_mask,
            attention_mask,
            use_causal_mask,
            self.sliding_window,
        )
        gate = self._gate_dense(query) if self._gate_dense is not None else None
        q = self._query_dense(query)
        k = ops.repeat(self._key_dense(key), self.num_repeats, axis=2)
        v = ops.repeat(self._value_dense(value), self.num_repeats, axis=2)
        q = ops.multiply(q, self._inverse_sqrt_head_dim)
        scores = ops.einsum("bquh,bkuh->buqk", q, k)
        if mask is not None:
            mask = ops.expand_dims(mask, 1)  # (B, T, S) -> (B, 1, T, S)
        # Keras runs the case without dropout or returned scores through its fused
        # dot-product attention, where a fully masked query row attends uniformly; its other
        # path zeroes masked weights. Which rule applies follows the same condition.
        fused_in_keras = self.dropout == 0 and not return_attention_scores
        scores = _masked_softmax(scores, mask, -1, zero_masked=not fused_in_keras)
        used = scores
        if training and self.dropout > 0:
            used = kt_random.dropout(scores, self.dropout, seed=self.seed_generator)
        output = ops.einsum("buqk,bkuh->bquh", used, v)
        if gate is not None:
            output = ops.multiply(output, gate)
        output = self._output_dense(output)
        if return_attention_scores:
            return output, scores
        return output

    def compute_output_shape(self, query_shape, value_shape, key_shape=None):
        query_shape, value_shape = tuple(query_shape), tuple(value_shape)
        key_shape = value_shape if key_shape is None else tuple(key_shape)
        self._check_shapes(query_shape, value_shape, key_shape)
        return query_shape

    def get_config(self):
        return {
            **super().get_config(),
            "head_dim": self.head_dim,
            "num_query_heads": self.num_query_heads,
            "num_key_value_heads": self.num_key_value_heads,
            "use_bias": self.use_bias,
            "use_gate": self.use_gate,
            "sliding_window": self.sliding_window,
            "dropout": self.dropout,
            "kernel_initializer": _serialize(initializers, self.kernel_initializer),
            "bias_initializer": _serialize(initializers, self.bias_initializer),
            "kernel_regularizer": _serialize(regularizers, self.kernel_regularizer),
            "bias_regularizer": _serialize(regularizers, self.bias_regularizer),
            "activity_regularizer": _serialize(regularizers, self.activity_regularizer),
            "kernel_constraint": _serialize(constraints, self.kernel_constraint),
            "bias_constraint": _serialize(constraints, self.bias_constraint),
            "seed": self.seed,
        }


# Keras exports the class as GroupQueryAttention; its configs name it GroupedQueryAttention,
# which is exported too so that they deserialize.
GroupQueryAttention = GroupedQueryAttention
