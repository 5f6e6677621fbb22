"""Volumetric reshaping layers: ZeroPadding3D, Cropping3D, UpSampling3D (Keras 3 names,
arguments and configs). They honour `data_format` (default from
`keratron.config.image_data_format()`, "channels_last") on 5D inputs."""

from __future__ import annotations

import numpy as np

from keratron import ops
from keratron.config import standardize_data_format
from keratron.layers.layer import InputSpec, Layer
from keratron.layers.layer import int_tuple as _int_tuple
from keratron.layers.layer import who as _who

__all__ = ["ZeroPadding3D", "Cropping3D", "UpSampling3D"]


def _pairs_3d(value, arg, who) -> tuple:
    """int | (d, h, w) | ((d0, d1), (h0, h1), (w0, w1)) -> three (before, after) pairs."""
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        v = _int_tuple(value, 2, arg, who, allow_zero=True)
        return (v, v, v)
    if not hasattr(value, "__len__") or len(value) != 3:
        raise ValueError(
            f"{who}: argument `{arg}` must be an int, a tuple of 3 ints or a tuple of 3 tuples "
            f"of 2 ints ((d0, d1), (h0, h1), (w0, w1)). Received: {arg}={value!r}"
        )
    return tuple(_int_tuple(v, 2, f"{arg}[{i}]", who, allow_zero=True) for i, v in enumerate(value))


def _spatial_axes(data_format):
    return (2, 3, 4) if data_format == "channels_first" else (1, 2, 3)


class ZeroPadding3D(Layer):
    """Pads the three spatial axes of 5D inputs with zeros.

    Args:
        padding: int, `(d, h, w)` symmetric pads, or `((d0, d1), (h0, h1), (w0, w1))`.
        data_format: "channels_last" or "channels_first".

    Example:
        >>> keratron.layers.ZeroPadding3D(1)(np.ones((1, 2, 2, 2, 3), "float32")).shape
        (1, 4, 4, 4, 3)
    """

    def __init__(self, padding=((1, 1), (1, 1), (1, 1)), data_format=None, **kwargs):
        padding = _pairs_3d(padding, "padding", _who("ZeroPadding3D", kwargs))
        super().__init__(**kwargs)
        self.data_format = standardize_data_format(data_format)
        self.padding = padding
        self.input_spec = InputSpec(ndim=5)

    def call(self, inputs):
        pads = [(0, 0)] * 5
        for a, p in zip(_spatial_axes(self.data_format), self.padding):
            pads[a] = p
        return ops.pad(inputs, tuple(pads))

    def compute_output_shape(self, input_shape):
        out = list(input_shape)
        for a, p in zip(_spatial_axes(self.data_format), self.padding):
            if out[a] is not None:
                out[a] += sum(p)
        return tuple(out)

    def get_config(self):
        return {**super().get_config(), "padding": self.padding, "data_format": self.data_format}


class Cropping3D(Layer):
    """Crops the three spatial axes of 5D inputs.

    Args:
        cropping: int, `(d, h, w)` symmetric crops, or `((d0, d1), (h0, h1), (w0, w1))`.
        data_format: "channels_last" or "channels_first".

    Example:
        >>> keratron.layers.Cropping3D(1)(np.ones((1, 4, 5, 6, 2), "float32")).shape
        (1, 2, 3, 4, 2)
    """

    def __init__(self, cropping=((1, 1), (1, 1), (1, 1)), data_format=None, **kwargs):
        cropping = _pairs_3d(cropping, "cropping", _who("Cropping3D", kwargs))
        super().__init__(**kwargs)
        self.data_format = standardize_data_format(data_format)
        self.cropping = cropping
        self.input_spec = InputSpec(ndim=5)

    def _check(self, shape, what):
        for a, (lo, hi) in zip(_spatial_axes(self.data_format), self.cropping):
            if shape[a] is not None and lo + hi >= shape[a]:
                raise ValueError(
                    f"Layer '{self.name}': the cropping {self.cropping} must leave at least one "
                    f"element along axis {a} of the input. Received: {what}={tuple(shape)}"
                )

    def call(self, inputs):
        self._check(inputs.shape, "inputs.shape")
        key = [slice(None)] * 5
        for a, (lo, hi) in zip(_spatial_axes(self.data_format), self.cropping):
            key[a] = slice(lo, inputs.shape[a] - hi)
        return inputs[tuple(key)]

    def compute_output_shape(self, input_shape):
        self._check(input_shape, "input_shape")
        out = list(input_shape)
        for a, (lo, hi) in zip(_spatial_axes(self.data_format), self.cropping):
            if out[a] is not None:
                out[a] -= lo + hi
        return tuple(out)

    def get_config(self):
        return {**super().get_config(), "cropping": self.cropping, "data_format": self.data_format}


class UpSampling3D(Layer):
    """Repeats each voxel of 5D inputs `size` times along the three spatial axes.

    Args:
        size: int or `(d, h, w)` positive factors.
        data_format: "channels_last" or "channels_first".

    Example:
        >>> keratron.layers.UpSampling3D((1, 2, 3))(np.ones((1, 2, 2, 2, 3), "float32")).shape
        (1, 2, 4, 6, 3)
    """

    def __init__(self, size=(2, 2, 2), data_format=None, **kwargs):
        size = _int_tuple(size, 3, "size", _who("UpSampling3D", kwargs))
        super().__init__(**kwargs)
        self.data_format = standardize_data_format(data_format)
        self.size = size
        self.input_spec = InputSpec(ndim=5)

    def call(self, inputs):
        x = inputs
        for a, f in zip(_spatial_axes(self.data_format), self.size):
            if f != 1:
                x = ops.repeat(x, f, axis=a)
        return x

    def compute_output_shape(self, input_shape):
        out = list(input_shape)
        for a, f in zip(_spatial_axes(self.data_format), self.size):
            if out[a] is not None:
                out[a] *= f
        return tuple(out)

    def get_config(self):
        return {**super().get_config(), "size": self.size, "data_format": self.data_format}
