"""Categorical preprocessing layers, as in Keras 3: `CategoryEncoding` and `Discretization`.

Both encode integer categories as Keras's `encode_categorical_inputs` does: "one_hot" drops a
trailing axis of size 1, "multi_hot" and "count" reduce over the last axis of a batch.
"""

from __future__ import annotations

import numpy as np

from keratron import ops
from keratron.autodiff.tensor import convert_to_tensor
from keratron.config import floatx
from keratron.layers.layer import Layer

__all__ = ["CategoryEncoding", "Discretization"]


def _encode(inputs, output_mode, depth, dtype, count_weights=None):
    if output_mode == "int":
        return ops.cast(inputs, dtype)
    if len(inputs.shape) == 0:
        inputs = ops.expand_dims(inputs, -1)
    if output_mode == "multi_hot":
        return ops.multi_hot(inputs, depth, dtype=dtype)
    if output_mode == "one_hot":
        if len(inputs.shape) > 1 and inputs.shape[-1] == 1:
            inputs = ops.reshape(inputs, tuple(inputs.shape[:-1]))
        return ops.one_hot(inputs, depth, dtype=dtype)
    # "count": a one-hot sum with a static depth, weighted per input when weights are given.
    axis = 1 if len(inputs.shape) > 1 else 0
    if count_weights is not None:
        count_weights = convert_to_tensor(count_weights)
        encoded = ops.one_hot(inputs, depth, dtype=count_weights.dtype)
        encoded = encoded * ops.expand_dims(count_weights, -1)
    else:
        encoded = ops.one_hot(inputs, depth, dtype=dtype)
    return ops.sum(encoded, axis=axis)


def _encoded_shape(input_shape, output_mode, depth):
    input_shape = tuple(input_shape)
    if output_mode == "int":
        return input_shape
    if len(input_shape) == 0:
        return (depth,)
    if output_mode == "one_hot":
        if input_shape[-1] != 1 or len(input_shape) == 1:
            return input_shape + (depth,)
        return input_shape[:-1] + (depth,)
    return input_shape[:-1] + (depth,) if len(input_shape) > 1 else (depth,)


class CategoryEncoding(Layer):
    """Encodes integer categories as one-hot, multi-hot or count vectors.

    Args:
        num_tokens: the number of categories; inputs must lie in `[0, num_tokens)`.
        output_mode: "multi_hot" (default; "binary" is its old name), "one_hot" or "count".
        sparse: sparse outputs are not supported; only False is accepted.

    Example:
        >>> layer = keratron.layers.CategoryEncoding(num_tokens=4, output_mode="one_hot")
        >>> layer(np.array([3, 0])).numpy()
        array([[0., 0., 0., 1.],
               [1., 0., 0., 0.]], dtype=float32)
    """

    def __init__(self, num_tokens=None, output_mode="multi_hot", sparse=False, **kwargs):
        super().__init__(**kwargs)
        if output_mode == "binary":
            output_mode = "multi_hot"
        if output_mode not in ("count", "one_hot", "multi_hot"):
            raise ValueError(f"Unknown arg for output_mode: {output_mode}")
        if num_tokens is None:
            raise ValueError(
                "num_tokens must be set to use this layer. If the number of tokens is not "
                "known beforehand, use the IntegerLookup layer instead."
            )
        if num_tokens < 1:
            raise ValueError(f"`num_tokens` must be >= 1. Received: num_tokens={num_tokens}.")
        if sparse:
            raise ValueError(
                "CategoryEncoding layer: keratron has no sparse tensors. Received: sparse=True"
            )
        self.num_tokens = num_tokens
        self.output_mode = output_mode
        self.sparse = sparse

    def call(self, inputs, count_weights=None):
        if count_weights is not None and self.output_mode != "count":
            raise ValueError(
                "`count_weights` is not used when `output_mode` is not `'count'`. "
                f"Received `count_weights={count_weights}`."
            )
        return _encode(
            convert_to_tensor(inputs),
            self.output_mode,
            self.num_tokens,
            self.compute_dtype,
            count_weights,
        )

    def compute_output_shape(self, input_shape):
        return _encoded_shape(input_shape, self.output_mode, self.num_tokens)

    def get_config(self):
        return {
            **super().get_config(),
            "num_tokens": self.num_tokens,
            "output_mode": self.output_mode,
            "sparse": self.sparse,
        }


class Discretization(Layer):
    """Buckets continuous features by ranges: bucket `i` holds `boundaries[i-1] <= x < b[i]`.

    Args:
        bin_boundaries: the sorted boundaries; `len(bin_boundaries) + 1` buckets.
        num_bins: the number of buckets to learn with `adapt` (quantile boundaries); keratron
            does not learn them yet, so `bin_boundaries` is required.
        epsilon: the quantile error tolerance of `adapt` (kept in the config).
        output_mode: "int" (default; int32 bucket indices), "one_hot", "multi_hot" or "count".
        sparse: only False is accepted.

    Example:
        >>> layer = keratron.layers.Discretization(bin_boundaries=[0.0, 1.0])
        >>> layer(np.array([[-1.0, 0.5, 2.0]])).numpy()
        array([[0, 1, 2]], dtype=int32)
    """

    def __init__(
        self,
        bin_boundaries=None,
        num_bins=None,
        epsilon=0.01,
        output_mode="int",
        sparse=False,
        dtype=None,
        name=None,
        **kwargs,
    ):
        if dtype is None:
            dtype = "int64" if output_mode == "int" else floatx()
        # The inputs are float features whatever the (integer) layer dtype: no cast on entry.
        kwargs.setdefault("autocast", False)
        super().__init__(name=name, dtype=dtype, **kwargs)
        if output_mode not in ("int", "one_hot", "multi_hot", "count"):
            raise ValueError(
                "Discretization layer: `output_mode` must be one of 'int', 'one_hot', "
                f"'multi_hot', 'count'. Received: output_mode={output_mode!r}"
            )
        if sparse:
            raise ValueError(
                "Discretization layer: keratron has no sparse tensors. Received: sparse=True"
            )
        if num_bins is not None and num_bins < 0:
            raise ValueError(
                f"`num_bins` must be greater than or equal to 0. Received: `num_bins={num_bins}`"
            )
        if num_bins is not None and bin_boundaries is not None:
            raise ValueError(
                "Both `num_bins` and `bin_boundaries` should not be set. "
                f"Received: `num_bins={num_bins}` and `bin_boundaries={bin_boundaries}`"
            )
        if bin_boundaries is None:
            raise NotImplementedError(
                "Discretization layer: learning bin boundaries with `adapt` (num_bins=...) is "
                "not available in keratron yet; pass `bin_boundaries`."
            )
        self.bin_boundaries = [float(b) for b in bin_boundaries]
        self.num_bins = num_bins
        self.epsilon = epsilon
        self.output_mode = output_mode
        self.sparse = sparse

    def call(self, inputs):
        inputs = convert_to_tensor(inputs)
        boundaries = np.asarray(self.bin_boundaries, dtype="float64")
        indices = ops.digitize(inputs, boundaries)
        # Keras gives int32 indices whatever the layer dtype ("int64" by default).
        dtype = "int32" if self.output_mode == "int" else self.compute_dtype
        return _encode(indices, self.output_mode, len(boundaries) + 1, dtype)

    def compute_output_shape(self, input_shape):
        return _encoded_shape(input_shape, self.output_mode, len(self.bin_boundaries) + 1)

    def get_config(self):
        return {
            **super().get_config(),
            "bin_boundaries": self.bin_boundaries,
            "num_bins": self.num_bins,
            "epsilon": self.epsilon,
            "output_mode": self.output_mode,
            "sparse": self.sparse,
        }
