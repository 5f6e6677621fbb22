"""Layers that act on a residual branch before it is added back: a learned per-channel scale
(`LayerScale`) and stochastic depth (`StochasticDepth`), as Keras's ConvNeXt defines them.

Keras keeps both in `keras.applications.convnext` rather than `keras.layers`; keratron
defines them here and `keratron.applications.convnext` re-exports them under Keras's names.

Example:
    >>> layer = LayerScale(0.5, 3)
    >>> layer(np.ones((1, 3), "float32")).numpy().tolist()
    [[0.5, 0.5, 0.5]]
"""

from __future__ import annotations

import numbers

from keratron import ops
from keratron import random as kt_random
from keratron.layers import initializers
from keratron.layers.layer import Layer
from keratron.layers.serialization import register_keras_serializable

__all__ = ["LayerScale", "StochasticDepth"]


@register_keras_serializable(package="keratron")
class LayerScale(Layer):
    """Multiplies its input by a learned vector `gamma` along the last axis
    (https://arxiv.org/abs/2103.17239).

    Args:
        init_values: the initial value of every entry of `gamma` (small, e.g. 1e-6).
        projection_dim: the size of the last axis of the inputs, and of `gamma`.

    Raises:
        TypeError: if `init_values` is not a number.
        ValueError: if `projection_dim` is not a positive integer.

    Example:
        >>> layer = LayerScale(1e-6, 4)
        >>> layer(np.ones((2, 4), "float32")).shape
        (2, 4)
    """

    def __init__(self, init_values, projection_dim, **kwargs):
        super().__init__(**kwargs)
        if isinstance(init_values, bool) or not isinstance(init_values, numbers.Real):
            raise TypeError(
                f"LayerScale '{self.name}': `init_values` must be a number. "
                f"Received: init_values={init_values!r}"
            )
        if (
            isinstance(projection_dim, bool)
            or not isinstance(projection_dim, numbers.Integral)
            or projection_dim <= 0
        ):
            raise ValueError(
                f"LayerScale '{self.name}': `projection_dim` must be a positive integer. "
                f"Received: projection_dim={projection_dim!r}"
            )
        self.init_values = init_values
        self.projection_dim = int(projection_dim)

    def build(self, input_shape):
        if input_shape[-1] is not None and input_shape[-1] != self.projection_dim:
            raise ValueError(
                f"LayerScale '{self.name}': the last axis of the input must have size "
                f"projection_dim={self.projection_dim}. Received: input_shape={input_shape}"
            )
        self.gamma = self.add_weight(
            shape=(self.projection_dim,),
            initializer=initializers.Constant(self.init_values),
            trainable=True,
        )

    def call(self, x):
        return x * self.gamma

    def compute_output_shape(self, input_shape):
        return tuple(input_shape)

    def get_config(self):
        config = super().get_config()
        config.update({"init_values": self.init_values, "projection_dim": self.projection_dim})
        return config


@register_keras_serializable(package="keratron")
class StochasticDepth(Layer):
    """Drops its whole input for some samples of a batch while training, scaling the kept
    samples by 1 / (1 - rate); the identity at inference (https://arxiv.org/abs/1603.09382).

    Args:
        drop_path_rate: the probability of dropping a sample's branch, in [0, 1).

    Raises:
        ValueError: if `drop_path_rate` is not a number in [0, 1).

    Example:
        >>> layer = StochasticDepth(0.5)
        >>> y = layer(np.ones((4, 2), "float32"), training=True)  # rows of 0.0 or 2.0
        >>> sorted(set(y.numpy().ravel().tolist())) in ([0.0], [2.0], [0.0, 2.0])
        True
    """

    def __init__(self, drop_path_rate, **kwargs):
        super().__init__(**kwargs)
        if (
            isinstance(drop_path_rate, bool)
            or not isinstance(drop_path_rate, numbers.Real)
            or not 0 <= drop_path_rate < 1
        ):
            raise ValueError(
                f"StochasticDepth '{self.name}': `drop_path_rate` must be a number in [0, 1). "
                f"Received: drop_path_rate={drop_path_rate!r}"
            )
        self.drop_path_rate = drop_path_rate

    def call(self, x, training=None):
        if training:
            keep_prob = 1 - self.drop_path_rate
            # One draw per sample, broadcast over the other axes: floor(keep + U[0, 1)) is 1
            # with probability keep_prob.
            shape = (ops.shape(x)[0],) + (1,) * (len(x.shape) - 1)
            mask = ops.floor(keep_prob + kt_random.uniform(shape, 0, 1, dtype=x.dtype))
            return (x / keep_prob) * mask
        return x

    def compute_output_shape(self, input_shape):
        return tuple(input_shape)

    def get_config(self):
        config = super().get_config()
        config.update({"drop_path_rate": self.drop_path_rate})
        return config
