"""Adaptive pooling layers (Keras's `layers/pooling/adaptive_*`): average or max pooling of
1, 2 or 3 spatial axes to a fixed `output_size`, with torch's windows
`[floor(i * n / out), ceil((i + 1) * n / out))` along each axis."""

from __future__ import annotations

import numpy as np

from keratron import ops
from keratron.config import standardize_data_format
from keratron.layers.layer import InputSpec, Layer
from keratron.layers.layer import who as _who

__all__ = [
    "AdaptiveAveragePooling1D",
    "AdaptiveAveragePooling2D",
    "AdaptiveAveragePooling3D",
    "AdaptiveMaxPooling1D",
    "AdaptiveMaxPooling2D",
    "AdaptiveMaxPooling3D",
]


class _AdaptivePooling(Layer):
    """Pools each of `rank` spatial axes to `output_size` windows.

    Args:
        output_size: positive int (the same for every spatial axis) or a tuple of `rank`
            positive ints.
        data_format: "channels_last" (default `image_data_format()`) or "channels_first".
    """

    rank: int
    _op = None  # ops.adaptive_average_pool or ops.adaptive_max_pool, chosen by the subclass

    def __init__(self, output_size, data_format=None, **kwargs):
        who = _who(type(self).__name__, kwargs)
        if isinstance(output_size, (int, np.integer)) and not isinstance(output_size, bool):
            output_size = (int(output_size),) * self.rank
        if (
            not isinstance(output_size, (tuple, list))
            or len(output_size) != self.rank
            or not all(isinstance(v, (int, np.integer)) and v > 0 for v in output_size)
        ):
            raise TypeError(
                f"{who}: argument `output_size` must be a positive integer or a tuple of "
                f"{self.rank} positive integers. Received: output_size={output_size!r}"
            )
        super().__init__(**kwargs)
        self.output_size = tuple(int(v) for v in output_size)
        self.data_format = standardize_data_format(data_format)
        self.input_spec = InputSpec(ndim=self.rank + 2)
        self.built = True

    def call(self, inputs):
        return self._op(inputs, self.output_size, data_format=self.data_format)

    def compute_output_shape(self, input_shape):
        if self.data_format == "channels_last":
            return (input_shape[0], *self.output_size, input_shape[-1])
        return (input_shape[0], input_shape[1], *self.output_size)

    def get_config(self):
        return {
            **super().get_config(),
            "output_size": self.output_size,
            "data_format": self.data_format,
        }


class _AdaptiveAveragePooling(_AdaptivePooling):
    _op = staticmethod(ops.adaptive_average_pool)


class _AdaptiveMaxPooling(_AdaptivePooling):
    _op = staticmethod(ops.adaptive_max_pool)


class AdaptiveAveragePooling1D(_AdaptiveAveragePooling):
    """Average pooling of `(batch, steps, channels)` inputs to `output_size` steps.

    Example:
        >>> keratron.layers.AdaptiveAveragePooling1D(3)(np.ones((2, 7, 4), "float32")).shape
        (2, 3, 4)
    """

    rank = 1


class AdaptiveAveragePooling2D(_AdaptiveAveragePooling):
    """Average pooling of 4D image inputs to `output_size` rows and columns.

    Example:
        >>> layer = keratron.layers.AdaptiveAveragePooling2D((2, 3))
        >>> layer(np.ones((1, 7, 5, 3), "float32")).shape
        (1, 2, 3, 3)
    """

    rank = 2


class AdaptiveAveragePooling3D(_AdaptiveAveragePooling):
    """Average pooling of 5D volume inputs to `output_size` voxels per spatial axis.

    Example:
        >>> layer = keratron.layers.AdaptiveAveragePooling3D(2)
        >>> layer(np.ones((1, 5, 4, 3, 2), "float32")).shape
        (1, 2, 2, 2, 2)
    """

    rank = 3


class AdaptiveMaxPooling1D(_AdaptiveMaxPooling):
    """Max pooling of `(batch, steps, channels)` inputs to `output_size` steps.

    Example:
        >>> keratron.layers.AdaptiveMaxPooling1D(3)(np.ones((2, 7, 4), "float32")).shape
        (2, 3, 4)
    """

    rank = 1


class AdaptiveMaxPooling2D(_AdaptiveMaxPooling):
    """Max pooling of 4D image inputs to `output_size` rows and columns.

    Example:
        >>> layer = keratron.layers.AdaptiveMaxPooling2D((2, 3))
        >>> layer(np.ones((1, 7, 5, 3), "float32")).shape
        (1, 2, 3, 3)
    """

    rank = 2


class AdaptiveMaxPooling3D(_AdaptiveMaxPooling):
    """Max pooling of 5D volume inputs to `output_size` voxels per spatial axis.

    Example:
        >>> layer = keratron.layers.AdaptiveMaxPooling3D(2)
        >>> layer(np.ones((1, 5, 4, 3, 2), "float32")).shape
        (1, 2, 2, 2, 2)
    """

    rank = 3
