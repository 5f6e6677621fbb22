"""Attention layers (Keras's `layers/attention`): dot-product `Attention` (Luong),
`AdditiveAttention` (Bahdanau) and `MultiHeadAttention` (Vaswani et al. 2017).

`MultiHeadAttention` projects query, key and value with `EinsumDense` sublayers named
"query", "key", "value" and "attention_output", whose kernel and bias shapes, creation order
and einsum equations are Keras 3's, so Keras weights load by order. Masks follow Keras:
masked score positions get -1e9 before the softmax and exactly zero weight after it.
"""

from __future__ import annotations

import math
import string

import numpy as np

from keratron import ops
from keratron import random as kt_random
from keratron.layers import constraints, initializers, regularizers
from keratron.layers.core import EinsumDense
from keratron.layers.layer import Layer

__all__ = ["Attention", "AdditiveAttention", "MultiHeadAttention"]

_LARGE_NEGATIVE = -1e9


def _serialize(module, obj):
    return None if obj is None else module.serialize(obj)


def _check_rate(value, arg, who):
    if isinstance(value, bool) or not isinstance(value, (int, float, np.number)):
        raise TypeError(
            f"{who}: argument `{arg}` must be a float in [0, 1]. Received: {arg}={value!r}"
        )
    if not 0.0 <= float(value) <= 1.0:
        raise ValueError(
            f"{who}: argument `{arg}` must be a float in [0, 1]. Received: {arg}={value}"
        )
    return float(value)


def _masked_softmax(scores, mask, axis, zero_masked=True):
    """Softmax over `axis` where False entries of `mask` get (almost) no weight.

    With `zero_masked` they get exactly zero, so a fully masked row is all zeros (Keras's
    Softmax layer); without, a fully masked row is uniform (Keras's fused attention path).
    """
    if mask is None:
        return ops.softmax(scores, axis=axis)
    mask = ops.cast(mask, "bool")
    weights = ops.softmax(ops.where(mask, scores, _LARGE_NEGATIVE), axis=axis)
    return ops.where(mask, weights, 0.0) if zero_masked else weights


def _combined_mask(
    query, value, query_mask, value_mask, key_mask, attention_mask, use_causal_mask, sliding_window
):
    """The (B, T, S) boolean mask of an attention call: the inputs' masks, the causal and
    sliding-window masks, and the explicit `attention_mask`, combined (None: no mask)."""
    auto = None

    def both(a, b):
        return b if a is None else ops.logical_and(a, b)

    if query_mask is not None:
        auto = ops.expand_dims(ops.cast(query_mask, "bool"), -1)  # (B, T, 1)
    for m in (value_mask, key_mask):
        if m is not None:
            auto = both(auto, ops.expand_dims(ops.cast(m, "bool"), -2))  # (B, 1, S)
    q_len, v_len = query.shape[1], value.shape[1]
    if use_causal_mask:
        auto = both(auto, _causal_mask(q_len, v_len))
    if sliding_window is not None:
        rows = ops.expand_dims(ops.arange(q_len, dtype="int32"), -1)
        cols = ops.expand_dims(ops.arange(v_len, dtype="int32"), 0)
        near = ops.less(ops.abs(ops.subtract(rows, cols)), sliding_window)
        auto = both(auto, ops.expand_dims(near, 0))
    if attention_mask is not None:
        attention_mask = ops.cast(ops.convert_to_tensor(attention_mask), "bool")
    if auto is None:
        return attention_mask
    return auto if attention_mask is None else ops.logical_and(attention_mask, auto)


def _causal_mask(q_len, v_len):
    """(1, q_len, v_len): query step i sees value steps 0..i."""
    rows = ops.expand_dims(ops.arange(q_len, dtype="int32"), -1)
    cols = ops.expand_dims(ops.arange(v_len, dtype="int32"), 0)
    return ops.expand_dims(ops.greater_equal(rows, cols), 0)


# ---------------------------------------------------------------------------------- Attention
class Attention(Layer):
    """Dot-product attention: `softmax(query @ key^T) @ value` (Luong-style).

    Called on `[query, value]` or `[query, value, key]` (key defaults to value), shapes
    (batch, Tq, dim) and (batch, Tv, dim).

    Args:
        use_scale: learn a scalar `scale` that multiplies the scores.
        score_mode: "dot" (query . key) or "concat" (sum(tanh(query + key)), times a learned
            scalar `concat_score_weight`).
        dropout: fraction of the attention weights dropped in training.
        seed: optional int seed for the dropout.

    Call arguments: `inputs`, `mask` ([query_mask, value_mask]), `training`,
    `return_attention_scores`, `use_causal_mask`.

    Example:
        >>> q, v = np.ones((2, 3, 4), "float32"), np.ones((2, 5, 4), "float32")
        >>> keratron.layers.Attention()([q, v]).shape
        (2, 3, 4)
    """

    def __init__(self, use_scale=False, score_mode="dot", dropout=0.0, seed=None, **kwargs):
        who = f"{type(self).__name__} layer"
        if score_mode not in ("dot", "concat"):
            raise ValueError(
                f"{who}: argument `score_mode` must be one of 'dot', 'concat'. "
                f"Received: score_mode={score_mode!r}"
            )
        dropout = _check_rate(dropout, "dropout", who)
        super().__init__(**kwargs)
        self.use_scale = bool(use_scale)
        self.score_mode = score_mode
        self.dropout = dropout
        self.seed = seed
        if dropout > 0:
            self.seed_generator = kt_random.SeedGenerator(seed)

    def _validate_inputs(self, inputs, mask=None):
        name = type(self).__name__
        if not isinstance(inputs, (list, tuple)) or not 2 <= len(inputs) <= 3:
            raise ValueError(
                f"Layer '{self.name}' ({name}) must be called on a list [query, value] or "
                f"[query, value, key]. Received: inputs={inputs!r}"
            )
        if mask is not None and (not isinstance(mask, (list, tuple)) or not 2 <= len(mask) <= 3):
            raise ValueError(
                f"Layer '{self.name}' ({name}): `mask` must be a list [query_mask, value_mask]. "
                f"Received: mask={mask!r}"
            )

    def build(self, input_shape):
        self._validate_inputs(input_shape)
        self.scale = None
        self.concat_score_weight = None
        if self.use_scale:
            self.scale = self.add_weight(name="scale", shape=(), initializer="ones")
        if self.score_mode == "concat":
            self.concat_score_weight = self.add_weight(
                name="concat_score_weight", shape=(), initializer="ones"
            )
        self.built = True

    def _calculate_scores(self, query, key):
        if self.score_mode == "dot":
            scores = ops.matmul(query, ops.swapaxes(key, -2, -1))
            return scores if self.scale is None else ops.multiply(scores, self.scale)
        pairs = ops.add(ops.expand_dims(query, -2), ops.expand_dims(key, -3))
        if self.scale is not None:
            pairs = ops.multiply(self.scale, pairs)
        return ops.multiply(self.concat_score_weight, ops.sum(ops.tanh(pairs), axis=-1))

    def call(
        self,
        inputs,
        mask=None,
        training=False,
        return_attention_scores=False,
        use_causal_mask=False,
    ):
        self._validate_inputs(inputs, mask)
        query, value = inputs[0], inputs[1]
        key = inputs[2] if len(inputs) > 2 else value
        q_mask = mask[0] if mask else None
        v_mask = mask[1] if mask else None
        scores = self._calculate_scores(query, key)
        score_mask = None if v_mask is None else ops.expand_dims(ops.cast(v_mask, "bool"), -2)
        if use_causal_mask:
            causal = _causal_mask(scores.shape[-2], scores.shape[-1])
            score_mask = causal if score_mask is None else ops.logical_and(score_mask, causal)
        if score_mask is not None:
            # Keras subtracts a large number (no exact zero), so a fully masked row is uniform.
            scores = ops.where(score_mask, scores, ops.subtract(scores, 1e9))
        weights = ops.softmax(scores, axis=-1)
        if training and self.dropout > 0:
            weights_used = kt_random.dropout(weights, self.dropout, seed=self.seed_generator)
        else:
            weights_used = weights
        output = ops.matmul(weights_used, value)
        if q_mask is not None:
            output = ops.where(ops.expand_dims(ops.cast(q_mask, "bool"), -1), output, 0.0)
        if return_attention_scores:
            return output, weights
        return output

    def compute_mask(self, inputs, mask=None):
        self._validate_inputs(inputs, mask)
        if mask is None or mask[0] is None:
            return None
        return ops.convert_to_tensor(mask[0])

    def compute_output_shape(self, input_shape):
        return (*input_shape[0][:-1], input_shape[1][-1])

    def get_config(self):
        return {
            **super().get_config(),
            "use_scale": self.use_scale,
            "score_mode": self.score_mode,
            "dropout": self.dropout,
            "seed": self.seed,
        }


class AdditiveAttention(Attention):
    """Additive (Bahdanau-style) attention: scores `sum(scale * tanh(query + key), -1)`.

    Args:
        use_scale: learn a per-feature `scale` vector (default True).
        dropout: fraction of the attention weights dropped in training.

    Example:
        >>> q, v = np.ones((2, 3, 4), "float32"), np.ones((2, 5, 4), "float32")
        >>> keratron.layers.AdditiveAttention()([q, v]).shape
        (2, 3, 4)
    """

    def __init__(self, use_scale=True, dropout=0.0, **kwargs):
        super().__init__(use_scale=use_scale, dropout=dropout, **kwargs)

    def build(self, input_shape):
        self._validate_inputs(input_shape)
        self.scale = None
        if self.use_scale:
            self.scale = self.add_weight(
                name="scale", shape=(input_shape[0][-1],), initializer="glorot_uniform"
            )
        self.built = True

    def _calculate_scores(self, query, key):
        pairs = ops.tanh(ops.add(ops.expand_dims(query, -2), ops.expand_dims(key, -3)))
        if self.scale is not None:
            pairs = ops.multiply(self.scale, pairs)
        return ops.sum(pairs, axis=-1)

    def get_config(self):
        config = super().get_config()
        del config["score_mode"]
        return config


# ------------------------------------------------------------------------- MultiHeadAttention
def _projection_equation(free_dims, bound_dims, output_dims):
    """Einsum equation of a projection that contracts the `bound_dims` last input axes and
    appends `output_dims` new ones; returns (equation, bias axes, output rank)."""
    letters = string.ascii_lowercase
    free = letters[:free_dims]
    bound = letters[free_dims : free_dims + bound_dims]
    new = letters[free_dims + bound_dims : free_dims + bound_dims + output_dims]
    return f"{free}{bound},{bound}{new}->{free}{new}", new, free_dims + output_dims


def _attention_equations(rank, attn_axes):
    """Equations of the scores (key, query -> scores) and of the weighted sum
    (scores, value -> output) for projected tensors of rank `rank`, heads at axis -2."""
    letters = string.ascii_lowercase
    target = letters[:rank]  # the query's axes
    batch_axes = [i for i in range(rank - 1) if i not in attn_axes]
    source, extra = list(target), iter(letters[rank:])
    for i in range(rank - 1):
        if i in attn_axes:
            source[i] = next(extra)  # key/value positions get their own letters
    source = "".join(source)
    scores = (
        "".join(target[i] for i in batch_axes)
        + "".join(target[i] for i in attn_axes)
        + "".join(source[i] for i in attn_axes)
    )
    return f"{source},{target}->{scores}", f"{scores},{source}->{target}", len(scores)


class MultiHeadAttention(Layer):
    """Multi-head attention (Vaswani et al. 2017) with `EinsumDense` projections.

    Query, key and value are projected to `num_heads` heads of size `key_dim` (`value_dim`
    for values), attention runs per head over `attention_axes`, and the heads are projected
    back to the query's last dimension (or `output_shape`).

    Args:
        num_heads: number of heads.
        key_dim: size of each head for query and key.
        value_dim: size of each head for value (default `key_dim`).
        dropout: fraction of the attention weights dropped in training.
        use_bias: whether the projections have biases.
        output_shape: last dimension(s) of the output (default: the query's last dimension).
        attention_axes: axes attention runs over (default: all but batch, heads, features).
        sliding_window: optional int; query step i only sees keys within that distance.
        flash_attention: accepted for Keras compatibility (Keras's restrictions apply: no
            dropout, no returned scores).
        kernel_initializer, bias_initializer, kernel_regularizer, bias_regularizer,
        activity_regularizer, kernel_constraint, bias_constraint: for the projections.
        use_gate: gate the heads with a sigmoid projection of the query before the output.
        seed: optional int seed for the dropout.

    Call arguments: `query`, `value`, `key` (default value), `query_mask`, `value_mask`,
    `key_mask`, `attention_mask` (batch, Tq, Tv) booleans, `return_attention_scores`,
    `training`, `use_causal_mask`.

    Example:
        >>> mha = keratron.layers.MultiHeadAttention(num_heads=2, key_dim=4)
        >>> x = np.ones((2, 5, 8), "float32")
        >>> mha(x, x).shape
        (2, 5, 8)
    """

    def __init__(
        self,
        num_heads,
        key_dim,
        value_dim=None,
        dropout=0.0,
        use_bias=True,
        output_shape=None,
        attention_axes=None,
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
        who = (
            f"MultiHeadAttention layer '{kwargs['name']}'"
            if kwargs.get("name")
            else ("MultiHeadAttention layer")
        )

        def positive(value, arg, optional=False):
            if optional and value is None:
                return None
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value <= 0:
                raise ValueError(
                    f"{who}: argument `{arg}` must be a positive integer"
                    f"{' or None' if optional else ''}. Received: {arg}={value!r}"
                )
            return int(value)

        num_heads = positive(num_heads, "num_heads")
        key_dim = positive(key_dim, "key_dim")
        value_dim = positive(value_dim, "value_dim", optional=True)
        sliding_window = positive(sliding_window, "sliding_window", optional=True)
        dropout = _check_rate(dropout, "dropout", who)
        if output_shape is not None:
            if isinstance(output_shape, (int, np.integer)):
                output_shape = (int(output_shape),)
            if not isinstance(output_shape, (list, tuple)) or not all(
                isinstance(d, (int, np.integer)) and d > 0 for d in output_shape
            ):
                raise ValueError(
                    f"{who}: argument `output_shape` must be an int or a tuple of positive "
                    f"ints. Received: output_shape={output_shape!r}"
                )
            output_shape = tuple(int(d) for d in output_shape) or None
        if isinstance(attention_axes, (int, np.integer)):
            attention_axes = (int(attention_axes),)
        elif attention_axes is not None:
            if not isinstance(attention_axes, (list, tuple)):
                raise ValueError(
                    f"{who}: argument `attention_axes` must be an int, list or tuple. "
                    f"Received: attention_axes={attention_axes!r}"
                )
            attention_axes = tuple(int(a) for a in attention_axes)
        if flash_attention and dropout > 0:
            raise ValueError(
                f"{who}: dropout is not supported with flash attention; set dropout=0.0 to "
                f"use flash attention. Received: dropout={dropout}"
            )
        super().__init__(**kwargs)
        self.supports_masking = True
        self._num_heads = num_heads
        self._key_dim = key_dim
        self._value_dim = value_dim or key_dim
        self._dropout = dropout
        self._use_bias = bool(use_bias)
        self._use_gate = bool(use_gate)
        self._output_shape = output_shape
        self._attention_axes = attention_axes
        self._sliding_window = sliding_window
        self._flash_attention = bool(flash_attention)
        self._kernel_initializer = initializers.get(kernel_initializer)
        self._bias_initializer = initializers.get(bias_initializer)
        self._kernel_regularizer = regularizers.get(kernel_regularizer)
        self._bias_regularizer = regularizers.get(bias_regularizer)
        self._activity_regularizer = regularizers.get(activity_regularizer)
        self._kernel_constraint = constraints.get(kernel_constraint)
        self._bias_constraint = constraints.get(bias_constraint)
        self.seed = seed
        self.seed_generator = kt_random.SeedGenerator(seed) if dropout > 0 else None
        self._inverse_sqrt_key_dim = 1.0 / math.sqrt(float(key_dim))

    num_heads = property(lambda self: self._num_heads)
    key_dim = property(lambda self: self._key_dim)
    value_dim = property(lambda self: self._value_dim)
    dropout = property(lambda self: self._dropout)
    use_bias = property(lambda self: self._use_bias)
    attention_axes = property(lambda self: self._attention_axes)
    query_dense = property(lambda self: self._query_dense)
    key_dense = property(lambda self: self._key_dense)
    value_dense = property(lambda self: self._value_dense)
    output_dense = property(lambda self: self._output_dense)

    def _sublayer_kwargs(self):
        # Each projection gets its own copy of the initializers, as in Keras.
        kernel_init = type(self._kernel_initializer).from_config(
            self._kernel_initializer.get_config()
        )
        bias_init = type(self._bias_initializer).from_config(self._bias_initializer.get_config())
        return dict(
            kernel_initializer=kernel_init,
            bias_initializer=bias_init,
            kernel_regularizer=self._kernel_regularizer,
            bias_regularizer=self._bias_regularizer,
            activity_regularizer=self._activity_regularizer,
            kernel_constraint=self._kernel_constraint,
            bias_constraint=self._bias_constraint,
            dtype=self._dtype,
        )

    def _projection(self, input_shape, heads_dim, name, activation=None):
        equation, bias_axes, out_rank = _projection_equation(len(input_shape) - 1, 1, 2)
        layer = EinsumDense(
            equation,
            output_shape=[None] * (out_rank - 3) + [self._num_heads, heads_dim],
            bias_axes=bias_axes if self._use_bias else None,
            activation=activation,
            name=name,
            **self._sublayer_kwargs(),
        )
        layer.build(tuple(input_shape))
        layer.built = True
        # Tracked in creation order, so `weights` lists them as Keras does.
        self._layers.append(layer)
        return layer

    def build(self, query_shape, value_shape, key_shape=None):
        query_shape, value_shape = tuple(query_shape), tuple(value_shape)
        key_shape = value_shape if key_shape is None else tuple(key_shape)
        if value_shape[1:-1] != key_shape[1:-1]:
            raise ValueError(
                f"Layer '{self.name}' (MultiHeadAttention): all dimensions of `value` and "
                f"`key` except the last must be equal. Received: value_shape={value_shape}, "
                f"key_shape={key_shape}"
            )
        self._query_dense = self._projection(query_shape, self._key_dim, "query")
        self._key_dense = self._projection(key_shape, self._key_dim, "key")
        self._gate_dense = None
        if self._use_gate:
            self._gate_dense = self._projection(
                query_shape, self._value_dim, "gate", activation="sigmoid"
            )
        self._value_dense = self._projection(value_shape, self._value_dim, "value")
        rank = len(value_shape) + 1
        axes = self._attention_axes
        if axes is None:
            axes = tuple(range(1, rank - 2))
        else:
            axes = tuple(a if a >= 0 else rank - 1 + a for a in axes)
            if any(not 0 < a < rank - 2 for a in axes):
                raise ValueError(
                    f"Layer '{self.name}' (MultiHeadAttention): `attention_axes` must name "
                    f"axes between 1 and {rank - 3} of the inputs. Received: "
                    f"attention_axes={self._attention_axes}"
                )
        self._resolved_axes = axes
        self._dot_product_equation, self._combine_equation, scores_rank = _attention_equations(
            rank, axes
        )
        self._norm_axes = tuple(range(scores_rank - len(axes), scores_rank))
        out_dims = self._output_shape or (query_shape[-1],)
        equation, bias_axes, out_rank = _projection_equation(len(query_shape) - 1, 2, len(out_dims))
        self._output_dense = EinsumDense(
            equation,
            output_shape=[None] * (out_rank - 1 - len(out_dims)) + list(out_dims),
            bias_axes=bias_axes if self._use_bias else None,
            name="attention_output",
            **self._sublayer_kwargs(),
        )
        self._output_dense.build(query_shape[:-1] + (self._num_heads, self._value_dim))
        self._output_dense.built = True
        self._layers.append(self._output_dense)
        self.built = True

    def _compute_attention_mask(
        self, query, value, query_mask, value_mask, key_mask, attention_mask, use_causal_mask
    ):
        return _combined_mask(
            query,
            value,
            query_mask,
            value_mask,
            key_mask,
            attention_mask,
            use_causal_mask,
            self._sliding_window,
        )

    def _compute_attention(
        self, query, key, value, attention_mask=None, training=None, return_scores=False
    ):
        query = ops.multiply(query, self._inverse_sqrt_key_dim)
        scores = ops.einsum(self._dot_product_equation, key, query)
        if attention_mask is not None:
            # (B, T, S) -> (B, 1, T, S): one axis per head/batch axis of the scores.
            axis = -len(self._resolved_axes) * 2 - 1
            while attention_mask.ndim < scores.ndim:
                attention_mask = ops.expand_dims(attention_mask, axis)
        # Keras runs rank-3 inputs without dropout or returned scores through its fused
        # dot-product attention, where a fully masked query row attends uniformly; its other
        # path zeroes masked weights. Which rule applies follows the same condition.
        fused_in_keras = self._dropout == 0 and not return_scores and query.ndim == 4
        scores = _masked_softmax(
            scores, attention_mask, self._norm_axes, zero_masked=not fused_in_keras
        )
        used = scores
        if training and self._dropout > 0:
            used = kt_random.dropout(scores, self._dropout, seed=self.seed_generator)
        return ops.einsum(self._combine_equation, used, value), scores

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
                f"Layer '{self.name}' (MultiHeadAttention): attention scores cannot be "
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
        attention_mask = self._compute_attention_mask(
            query, value, query_mask, value_mask, key_mask, attention_mask, use_causal_mask
        )
        gate = self._gate_dense(query) if self._gate_dense is not None else None
        q = self._query_dense(query)
        k = self._key_dense(key)
        v = self._value_dense(value)
        output, scores = self._compute_attention(
            q, k, v, attention_mask, training, return_attention_scores
        )
        if gate is not None:
            output = ops.multiply(output, gate)
        output = self._output_dense(output)
        if return_attention_scores:
            return output, scores
        return output

    def compute_output_shape(self, query_shape, value_shape, key_shape=None):
        query_shape = tuple(query_shape)
        if self._output_shape:
            return query_shape[:-1] + tuple(self._output_shape)
        return query_shape

    def get_config(self):
        return {
            **super().get_config(),
            "num_heads": self._num_heads,
            "key_dim": self._key_dim,
            "value_dim": self._value_dim,
            "dropout": self._dropout,
            "use_bias": self._use_bias,
            "use_gate": self._use_gate,
            "output_shape": self._output_shape,
            "attention_axes": self._attention_axes,
            "sliding_window": self._sliding_window,
            "kernel_initializer": _serialize(initializers, self._kernel_initializer),
            "bias_initializer": _serialize(initializers, self._bias_initializer),
            "kernel_regularizer": _serialize(regularizers, self._kernel_regularizer),
            "bias_regularizer": _serialize(regularizers, self._bias_regularizer),
            "activity_regularizer": _serialize(regularizers, self._activity_regularizer),
            "kernel_constraint": _serialize(constraints, self._kernel_constraint),
            "bias_constraint": _serialize(constraints, self._bias_constraint),
            "seed": self.seed,
        }
