"""Numeric preprocessing layers: Rescaling and Normalization (with `adapt`), as in Keras 3."""

from __future__ import annotations

import math

import numpy as np

from keratron import ops
from keratron.autodiff.tensor import Tensor, convert_to_tensor
from keratron.config import epsilon, image_data_format
from keratron.layers.layer import Layer

__all__ = ["Rescaling", "Normalization"]


def _to_config_value(v):
    """Numbers stay numbers; arrays and tensors become (nested) lists for JSON configs."""
    if isinstance(v, Tensor):
        v = v.numpy()
    if isinstance(v, np.ndarray):
        return v.tolist()
    if isinstance(v, np.generic):
        return v.item()
    return v


class Rescaling(Layer):
    """Computes `inputs * scale + offset`, e.g. `Rescaling(1 / 255)` for uint8 images.

    Args:
        scale: a number, or per-channel values.
        offset: a number, or per-channel values (default 0).

    Example:
        >>> keratron.layers.Rescaling(1 / 127.5, offset=-1)(np.full((1, 2), 255.0)).numpy()
        array([[1., 1.]], dtype=float32)
    """

    def __init__(self, scale, offset=0.0, **kwargs):
        for arg, v in (("scale", scale), ("offset", offset)):
            try:
                np.asarray(_to_config_value(v), dtype="float64")
            except (TypeError, ValueError) as e:
                raise TypeError(
                    f"Rescaling layer: argument `{arg}` must be a number or an array of "
                    f"numbers. Received: {arg}={v!r}"
                ) from e
        super().__init__(**kwargs)
        self.scale = _to_config_value(scale)
        self.offset = _to_config_value(offset)
        self.supports_masking = True

    def call(self, inputs):
        dtype = self.compute_dtype
        # A traced input is data-free: the constants then live on the default device.
        device = None if inputs.device == "meta" else inputs.device
        scale = convert_to_tensor(np.asarray(self.scale), dtype=dtype, device=device)
        offset = convert_to_tensor(np.asarray(self.offset), dtype=dtype, device=device)
        if scale.ndim > 0 and image_data_format() == "channels_first":
            # Per-channel scales of (batch, C, H, W) images sit on axis 1, not the last one.
            scale = ops.reshape(scale, scale.shape + (1,) * (3 - scale.ndim))
        return ops.add(ops.multiply(ops.cast(inputs, dtype), scale), offset)

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        return {**super().get_config(), "scale": self.scale, "offset": self.offset}


def _first(batch):
    """An `(x, y)` or `(x, y, sample_weight)` batch contributes its x."""
    return batch[0] if isinstance(batch, tuple) else batch


def _as_numpy(x):
    if isinstance(x, Tensor):
        return x.numpy()
    return np.asarray(x)


class Normalization(Layer):
    """Standardizes inputs feature-wise: `(inputs - mean) / sqrt(variance)`.

    The mean and variance are given, or learned from data with `adapt()`, which fills the
    non-trainable state `mean`, `variance` and `count` (Keras's weights, in that order).

    Args:
        axis: the axis or axes that keep separate statistics (default -1, the features);
            None means one mean and variance for everything.
        mean, variance: optional fixed statistics (both or neither); they broadcast along
            the kept axes.
        invert: if True, undo the normalization: `inputs * sqrt(variance) + mean`.

    Example:
        >>> layer = keratron.layers.Normalization()
        >>> layer.adapt(np.array([[0.0, 10.0], [2.0, 30.0]], "float32"))
        >>> layer(np.array([[1.0, 20.0]], "float32")).numpy()
        array([[0., 0.]], dtype=float32)
    """

    def __init__(self, axis=-1, mean=None, variance=None, invert=False, **kwargs):
        if axis is None:
            axis = ()
        elif isinstance(axis, int):
            axis = (axis,)
        else:
            axis = tuple(axis)
        if not all(isinstance(a, int) and not isinstance(a, bool) for a in axis):
            raise TypeError(
                f"Normalization layer: argument `axis` must be an int, a tuple of ints or "
                f"None. Received: axis={axis!r}"
            )
        if (mean is None) != (variance is None):
            raise ValueError(
                "Normalization layer: when setting values directly, both `mean` and "
                f"`variance` must be given. Received: mean={mean!r}, variance={variance!r}"
            )
        if mean is not None:
            if np.shape(_as_numpy(mean)) != np.shape(_as_numpy(variance)):
                raise ValueError(
                    "Normalization layer: `mean` and `variance` must have the same shape. "
                    f"Received: mean shape {np.shape(_as_numpy(mean))}, variance shape "
                    f"{np.shape(_as_numpy(variance))}"
                )
            if np.ndim(_as_numpy(mean)) > len(axis):
                raise ValueError(
                    f"Normalization layer: the rank of `mean` must be at most the number of "
                    f"axes ({len(axis)}). Received: mean shape {np.shape(_as_numpy(mean))} for "
                    f"axis={axis}"
                )
        super().__init__(**kwargs)
        self.axis = axis
        self.input_mean = _to_config_value(mean)
        self.input_variance = _to_config_value(variance)
        self.invert = bool(invert)
        self.supports_masking = True
        self._build_input_shape = None
        self.mean = None
        self.variance = None

    def build(self, input_shape):
        if input_shape is None:
            return
        input_shape = tuple(input_shape)
        ndim = len(input_shape)
        if any(not -ndim <= a < ndim for a in self.axis):
            raise ValueError(
                f"Layer '{self.name}' (Normalization): all `axis` values must be in "
                f"[-{ndim}, {ndim}) for inputs of rank {ndim}. Received: axis={self.axis}"
            )
        self._build_input_shape = input_shape
        self._keep_axis = tuple(sorted(a % ndim for a in self.axis))
        for a in self._keep_axis:
            if input_shape[a] is None:
                raise ValueError(
                    f"Layer '{self.name}' (Normalization): the kept axis {a} must have a known "
                    f"size. Received: axis={self.axis}, input_shape={input_shape}"
                )
        self._reduce_axis = tuple(d for d in range(ndim) if d not in self._keep_axis)
        self._broadcast_shape = tuple(
            input_shape[d] if d in self._keep_axis else 1 for d in range(ndim)
        )
        self._mean_and_var_shape = tuple(input_shape[d] for d in self._keep_axis)
        if self.input_mean is None:
            self.adapt_mean = self.add_weight(
                name="mean", shape=self._mean_and_var_shape, initializer="zeros", trainable=False
            )
            self.adapt_variance = self.add_weight(
                name="variance",
                shape=self._mean_and_var_shape,
                initializer="ones",
                trainable=False,
            )
            self.count = self.add_weight(
                name="count", shape=(), dtype="int32", initializer="zeros", trainable=False
            )
        else:
            self.mean = self._broadcast_given(self.input_mean)
            self.variance = self._broadcast_given(self.input_variance)
        self.built = True

    def _broadcast_given(self, value):
        """Places given statistics on the kept axes (trailing ones first) and broadcasts."""
        v = np.asarray(value, dtype="float64")
        if v.ndim:
            shape = [1] * len(self._broadcast_shape)
            for i in range(1, v.ndim + 1):
                shape[self._keep_axis[-i]] = v.shape[-i]
            v = v.reshape(shape)
        v = np.broadcast_to(v, self._broadcast_shape)
        return convert_to_tensor(v.copy(), dtype=self.compute_dtype)

    # --------------------------------------------------------------------------- adapt
    def adapt(self, data) -> None:
        """Computes the mean and variance of `data` along the non-kept axes.

        Args:
            data: a numpy array or Tensor, or an iterable of batches (arrays, Tensors or
                `(x, y)` tuples), e.g. a list of arrays, a generator or a PyDataset.

        Raises:
            ValueError: if the layer has fixed statistics, the iterable is empty, or the data
                does not match the shape the layer was built with.
        """
        if self.input_mean is not None:
            raise ValueError(
                f"Layer '{self.name}' (Normalization) was given a fixed `mean` and `variance`; "
                "it cannot be adapted."
            )
        if isinstance(data, (np.ndarray, Tensor)):
            batches, first = None, data
        elif (
            hasattr(data, "__len__")
            and hasattr(data, "__getitem__")
            and not isinstance(data, (list, tuple))
        ):
            # Sequence-style datasets (PyDataset) are read by index.
            batches = (_first(data[i]) for i in range(len(data)))
            first = _first(data[0])
        elif hasattr(data, "__iter__"):
            it = iter(data)
            first = next(it, None)
            if first is None:
                raise ValueError(
                    f"Layer '{self.name}' (Normalization): adapt() received an empty iterable; "
                    "expected at least one batch."
                )
            first = _first(first)
            batches = _chain(first, it)
        else:
            raise TypeError(
                f"Layer '{self.name}' (Normalization): adapt() expects a numpy array, a Tensor "
                f"or an iterable of batches. Received: {type(data).__name__}"
            )
        if not hasattr(first, "shape"):
            raise TypeError(
                f"Layer '{self.name}' (Normalization): adapt() batches must be arrays or "
                f"tensors. Received an element of type {type(first).__name__}"
            )
        input_shape = tuple(first.shape)
        if not self.built:
            self.build(input_shape)
        if batches is None:
            x = self._checked(_as_numpy(data).astype("float64"))
            mean, var, count = (
                x.mean(axis=self._reduce_axis),
                x.var(axis=self._reduce_axis),
                (math.prod(x.shape[d] for d in self._reduce_axis)),
            )
        else:
            mean = np.zeros(self._mean_and_var_shape)
            var = np.zeros(self._mean_and_var_shape)
            count = 0
            for batch in batches:
                x = self._checked(_as_numpy(_first(batch)).astype("float64"))
                n = math.prod(x.shape[d] for d in self._reduce_axis)
                if n == 0:
                    continue
                b_mean, b_var = x.mean(axis=self._reduce_axis), x.var(axis=self._reduce_axis)
                # Merge the running and batch moments (Chan et al.'s parallel variance).
                w = n / (count + n)
                new_mean = mean * (1 - w) + b_mean * w
                var = (var + (mean - new_mean) ** 2) * (1 - w) + (
                    b_var + (b_mean - new_mean) ** 2
                ) * w
                mean, count = new_mean, count + n
        self.adapt_mean.assign(np.asarray(mean, dtype=self.adapt_mean.dtype))
        self.adapt_variance.assign(np.asarray(var, dtype=self.adapt_variance.dtype))
        self.count.assign(np.asarray(count, dtype="int32"))

    def _checked(self, x):
        if x.ndim != len(self._build_input_shape) or any(
            x.shape[d] != self._build_input_shape[d] for d in self._keep_axis
        ):
            raise ValueError(
                f"Layer '{self.name}' (Normalization) was built with "
                f"input_shape={self._build_input_shape}, but adapt() received data of "
                f"incompatible shape {x.shape}."
            )
        return x

    # ---------------------------------------------------------------------------- call
    def _statistics(self):
        if self.input_mean is not None:
            return self.mean, self.variance
        # Read the variables on every call, so set_weights / weight loading take effect.
        mean = ops.reshape(ops.cast(self.adapt_mean, self.compute_dtype), self._broadcast_shape)
        var = ops.reshape(ops.cast(self.adapt_variance, self.compute_dtype), self._broadcast_shape)
        return mean, var

    def call(self, inputs):
        inputs = ops.cast(inputs, self.compute_dtype)
        mean, variance = self._statistics()
        if mean.device != inputs.device and inputs.device != "meta":
            mean, variance = (convert_to_tensor(t, device=inputs.device) for t in (mean, variance))
        std = ops.maximum(ops.sqrt(variance), epsilon())
        if self.invert:
            return ops.add(mean, ops.multiply(inputs, std))
        return ops.divide(ops.subtract(inputs, mean), std)

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        return {
            **super().get_config(),
            "axis": self.axis,
            "invert": self.invert,
            "mean": self.input_mean,
            "variance": self.input_variance,
        }

    def get_build_config(self):
        if self._build_input_shape is not None:
            return {"input_shape": self._build_input_shape}
        return None

    def build_from_config(self, config):
        if config:
            self.build(config["input_shape"])


def _chain(first, it):
    yield first
    yield from it
