"""Regularization layers beyond `core`'s dropouts (Keras's `layers/regularization`):
ActivityRegularization, AlphaDropout and SpatialDropout3D, with Keras 3's arguments, defaults
and `get_config` keys."""

from __future__ import annotations

import math

from keratron import ops
from keratron import random as kt_random
from keratron.config import standardize_data_format
from keratron.layers import regularizers
from keratron.layers.core import Dropout, _SpatialDropout
from keratron.layers.layer import InputSpec, Layer
from keratron.layers.layer import who as _who

__all__ = ["ActivityRegularization", "AlphaDropout", "SpatialDropout3D"]

# SELU's constants: alpha dropout sets dropped units to SELU's negative saturation value.
_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def _nonnegative(value, arg, who) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise ValueError(
            f"{who}: argument `{arg}` must be a non-negative float. Received: {arg}={value!r}"
        )
    return value


class ActivityRegularization(Layer):
    """Passes its input through unchanged and adds `l1 * sum(|x|) + l2 * sum(x**2)`, divided
    by the batch size, to the layer's losses.

    Args:
        l1: non-negative float, the L1 factor.
        l2: non-negative float, the L2 factor.

    Example:
        >>> layer = keratron.layers.ActivityRegularization(l2=0.5)
        >>> y = layer(np.ones((2, 3), "float32"))
        >>> float(layer.losses[0])
        1.5
    """

    def __init__(self, l1=0.0, l2=0.0, **kwargs):
        who = _who("ActivityRegularization", kwargs)
        l1, l2 = _nonnegative(l1, "l1", who), _nonnegative(l2, "l2", who)
        kwargs.pop("activity_regularizer", None)
        super().__init__(activity_regularizer=regularizers.L1L2(l1=l1, l2=l2), **kwargs)
        self.supports_masking = True
        self.l1 = l1
        self.l2 = l2
        self.built = True

    def call(self, inputs):
        return inputs

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.pop("activity_regularizer", None)
        return {**config, "l1": self.l1, "l2": self.l2}


class AlphaDropout(Dropout):
    """Dropout that keeps the mean and variance of its inputs, for SELU networks.

    While training, dropped units are set to SELU's negative saturation value
    `-alpha * scale` and the result is transformed by `a * x + b`, with `a` and `b` chosen so
    that zero-mean, unit-variance inputs keep that mean and variance. The identity at
    inference.

    Args:
        rate: float in [0, 1], the fraction of inputs to drop.
        noise_shape: optional shape of the keep mask (1 shares it along an axis; None takes
            the input's size).
        seed: optional int seed.

    Example:
        >>> layer = keratron.layers.AlphaDropout(0.2, seed=0)
        >>> y = layer(np.random.randn(4, 8).astype("float32"), training=True)
    """

    def call(self, inputs, training=False):
        if not (training and self.rate > 0):
            return inputs
        shape = self.noise_shape or (None,) * inputs.ndim
        if len(shape) != inputs.ndim:
            raise ValueError(
                f"Layer '{self.name}': `noise_shape` must have one entry per dimension of the "
                f"inputs {tuple(inputs.shape)}. Received: noise_shape={self.noise_shape}"
            )
        shape = tuple(d if n is None else n for n, d in zip(shape, inputs.shape))
        alpha_p = -_SELU_ALPHA * _SELU_SCALE
        uniform = kt_random.uniform(shape, dtype=inputs.dtype, seed=self.seed_generator)
        kept = ops.cast(ops.greater_equal(uniform, self.rate), inputs.dtype)
        a = 1.0 / math.sqrt((1.0 - self.rate) * (1.0 + self.rate * alpha_p**2))
        b = -a * alpha_p * self.rate
        x = ops.add(ops.multiply(inputs, kept), ops.multiply(alpha_p, ops.subtract(1.0, kept)))
        return ops.add(ops.multiply(a, x), b)


class SpatialDropout3D(_SpatialDropout):
    """Dropout of whole feature volumes of 5D inputs.

    Args:
        rate: float in [0, 1].
        data_format: "channels_last" (default from config) or "channels_first".
        seed: optional int seed.

    Example:
        >>> layer = keratron.layers.SpatialDropout3D(0.5, seed=0)
        >>> y = layer(np.ones((2, 3, 3, 3, 4), "float32"), training=True)
    """

    def __init__(self, rate, data_format=None, seed=None, name=None, dtype=None):
        super().__init__(rate, seed=seed, name=name, dtype=dtype)
        self.data_format = standardize_data_format(data_format)
        self.input_spec = InputSpec(ndim=5)

    def _noise_shape(self, inputs):
        s = inputs.shape
        if self.data_format == "channels_first":
            return (s[0], s[1], 1, 1, 1)
        return (s[0], 1, 1, 1, s[4])

    def get_config(self):
        return {**super().get_config(), "data_format": self.data_format}
