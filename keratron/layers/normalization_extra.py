"""UnitNormalization, RMSNormalization and the SpectralNormalization wrapper (Keras's
`layers/normalization`), with Keras 3's arguments, defaults, weights and `get_config` keys."""

from __future__ import annotations

import numpy as np

from keratron import ops
from keratron.layers import initializers
from keratron.layers.layer import InputSpec, Layer
from keratron.layers.layer import who as _who
from keratron.layers.wrappers import Wrapper

__all__ = ["UnitNormalization", "RMSNormalization", "SpectralNormalization"]


def _is_int(value) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def _check_axis(axis, who):
    """int or list/tuple of ints -> int or list (as Keras stores it)."""
    if isinstance(axis, (list, tuple)) and all(_is_int(a) for a in axis):
        return [int(a) for a in axis]
    if _is_int(axis):
        return int(axis)
    raise TypeError(
        f"{who}: argument `axis` must be an int or a list/tuple of ints. Received: axis={axis!r}"
    )


def _check_axes_in_range(layer, axis, shape):
    for a in [axis] if _is_int(axis) else axis:
        if not -len(shape) <= a < len(shape):
            raise ValueError(
                f"Layer '{layer.name}': axis {a} is out of bounds for input shape "
                f"{tuple(shape)}. Received: axis={axis}"
            )


class UnitNormalization(Layer):
    """Scales inputs to unit L2 norm along `axis` (the norm is at least 1e-12).

    Args:
        axis: int or list of ints, the axes to normalize over (default -1).

    Example:
        >>> keratron.layers.UnitNormalization()(np.array([[3.0, 4.0]], "float32")).numpy()
        array([[0.6, 0.8]], dtype=float32)
    """

    def __init__(self, axis=-1, **kwargs):
        axis = _check_axis(axis, _who("UnitNormalization", kwargs))
        super().__init__(**kwargs)
        self.axis = axis
        self.supports_masking = True
        self.built = True

    def call(self, inputs):
        _check_axes_in_range(self, self.axis, inputs.shape)
        return ops.normalize(inputs, axis=self.axis, order=2, epsilon=1e-12)

    def compute_output_shape(self, input_shape):
        _check_axes_in_range(self, self.axis, input_shape)
        return input_shape

    def get_config(self):
        return {**super().get_config(), "axis": self.axis}


class RMSNormalization(Layer):
    """Root-mean-square normalization (Zhang and Sennrich, 2019):
    `x / sqrt(mean(x**2, axis) + epsilon) * scale`, with a learned `scale` (initialized to
    ones) shaped like the normalized axes.

    Args:
        axis: int or list of ints, the axes to normalize over (default -1). As in Keras it is
            stored as a sorted list once the layer is built.
        epsilon: small float added to the mean square (default 1e-6).

    Example:
        >>> layer = keratron.layers.RMSNormalization()
        >>> layer(np.ones((2, 3), "float32")).shape
        (2, 3)
    """

    def __init__(self, axis=-1, epsilon=1e-6, **kwargs):
        who = _who("RMSNormalization", kwargs)
        axis = _check_axis(axis, who)
        if isinstance(epsilon, bool) or not isinstance(epsilon, (int, float)) or epsilon < 0:
            raise ValueError(
                f"{who}: argument `epsilon` must be a non-negative float. Received: "
                f"epsilon={epsilon!r}"
            )
        super().__init__(**kwargs)
        self.axis = axis
        self.epsilon = epsilon

    def build(self, input_shape):
        _check_axes_in_range(self, self.axis, input_shape)
        if _is_int(self.axis):
            self.axis = [self.axis]
        else:
            self.axis = sorted(self.axis)
        self.scale = self.add_weight(
            name="scale", shape=tuple(input_shape[a] for a in self.axis), initializer="ones"
        )
        self.built = True

    def call(self, inputs):
        return ops.rms_normalization(inputs, scale=self.scale, axis=self.axis, epsilon=self.epsilon)

    def compute_output_shape(self, input_shape):
        _check_axes_in_range(self, self.axis, input_shape)
        return input_shape

    def get_config(self):
        return {**super().get_config(), "axis": self.axis, "epsilon": self.epsilon}


class SpectralNormalization(Wrapper):
    """Divides the kernel (or embeddings) of the wrapped layer by its spectral norm, estimated
    by power iteration (Miyato et al., 2018).

    While training, each call runs `power_iterations` steps of power iteration from the
    non-trainable `vector_u`, stores the new `vector_u`, and assigns the normalized kernel to
    the wrapped layer's kernel before calling it (an all-zero kernel is left as it is). At
    inference the wrapped layer runs on its kernel unchanged, as in Keras.

    Args:
        layer: a layer with a `kernel` or `embeddings` weight.
        power_iterations: positive int, iterations per training call (default 1).

    Example:
        >>> layer = keratron.layers.SpectralNormalization(keratron.layers.Dense(3))
        >>> layer(np.ones((2, 4), "float32"), training=True).shape
        (2, 3)
    """

    def __init__(self, layer, power_iterations=1, **kwargs):
        who = _who("SpectralNormalization", kwargs)
        if not _is_int(power_iterations) or power_iterations <= 0:
            raise ValueError(
                f"{who}: argument `power_iterations` must be a positive integer. Received: "
                f"power_iterations={power_iterations!r}"
            )
        super().__init__(layer, **kwargs)
        self.power_iterations = int(power_iterations)

    def build(self, input_shape):
        super().build(input_shape)
        self.input_spec = InputSpec(min_ndim=1, axes={-1: input_shape[-1]})
        if hasattr(self.layer, "kernel"):
            self.kernel = self.layer.kernel
        elif hasattr(self.layer, "embeddings"):
            self.kernel = self.layer.embeddings
        else:
            raise ValueError(
                f"Layer '{self.name}': the wrapped layer {type(self.layer).__name__} has no "
                f"`kernel` nor `embeddings` weight to normalize."
            )
        self.kernel_shape = tuple(self.kernel.shape)
        self.vector_u = self.add_weight(
            name="vector_u",
            shape=(1, self.kernel_shape[-1]),
            initializer=initializers.TruncatedNormal(stddev=0.02),
            trainable=False,
            dtype=self.kernel.dtype,
        )
        self.built = True

    def normalized_weights(self):
        """The power-iterated `vector_u` and the kernel divided by its spectral norm."""
        weights = ops.reshape(self.kernel, (-1, self.kernel_shape[-1]))
        vector_u = ops.convert_to_tensor(self.vector_u)
        for _ in range(self.power_iterations):
            vector_v = ops.normalize(ops.matmul(vector_u, ops.transpose(weights)), axis=None)
            vector_u = ops.normalize(ops.matmul(vector_v, weights), axis=None)
        vector_u = ops.stop_gradient(vector_u)
        vector_v = ops.stop_gradient(vector_v)
        sigma = ops.matmul(ops.matmul(vector_v, weights), ops.transpose(vector_u))
        kernel = ops.reshape(ops.divide(self.kernel, sigma), self.kernel_shape)
        return ops.cast(vector_u, self.vector_u.dtype), ops.cast(kernel, self.kernel.dtype)

    def call(self, inputs, training=False):
        if training:
            new_u, new_kernel = self.normalized_weights()
            all_zero = ops.all(ops.equal(self.kernel, 0))
            self.vector_u.assign(ops.where(all_zero, self.vector_u, new_u))
            self.kernel.assign(ops.where(all_zero, self.kernel, new_kernel))
        return ops.cast(self.layer(inputs), inputs.dtype)

    def compute_output_shape(self, input_shape):
        return self.layer.compute_output_shape(input_shape)

    def get_config(self):
        return {**super().get_config(), "power_iterations": self.power_iterations}
