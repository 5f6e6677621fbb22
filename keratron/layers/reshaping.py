"""Spatial reshaping layers: ZeroPadding1D/2D, Cropping1D/2D, UpSampling1D/2D (Keras 3 names,
arguments and configs). Image layers honour `data_format` (default from
`keratron.config.image_data_format()`, "channels_last")."""

from __future__ import annotations

import numpy as np

from keratron import ops
from keratron.autodiff.tensor import convert_to_tensor
from keratron.config import standardize_data_format
from keratron.layers.layer import InputSpec, Layer
from keratron.layers.layer import int_tuple as _int_tuple
from keratron.layers.layer import who as _who

__all__ = [
    "ZeroPadding1D",
    "ZeroPadding2D",
    "Cropping1D",
    "Cropping2D",
    "UpSampling1D",
    "UpSampling2D",
]


def _pairs_2d(value, arg, who) -> tuple:
    """int | (sym_h, sym_w) | ((top, bottom), (left, right)) -> ((top, bottom), (left, right))."""
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        v = _int_tuple(value, 2, arg, who, allow_zero=True)
        return (v, v)
    if not hasattr(value, "__len__") or len(value) != 2:
        raise ValueError(
            f"{who}: argument `{arg}` must be an int, a tuple of 2 ints or a tuple of 2 tuples "
            f"of 2 ints ((top, bottom), (left, right)). Received: {arg}={value!r}"
        )
    return (
        _int_tuple(value[0], 2, f"{arg}[0]", who, allow_zero=True),
        _int_tuple(value[1], 2, f"{arg}[1]", who, allow_zero=True),
    )


def _spatial_axes(data_format, n):
    return tuple(range(2, 2 + n)) if data_format == "channels_first" else tuple(range(1, 1 + n))


# ------------------------------------------------------------------------------- ZeroPadding
class ZeroPadding1D(Layer):
    """Pads the steps axis of `(batch, steps, features)` inputs with zeros.

    Args:
        padding: int, or `(left, right)`.
        data_format: "channels_last" (steps on axis 1) or "channels_first" (axis 2).

    Example:
        >>> keratron.layers.ZeroPadding1D((1, 2))(np.ones((2, 3, 4), "float32")).shape
        (2, 6, 4)
    """

    def __init__(self, padding=1, data_format=None, **kwargs):
        padding = _int_tuple(padding, 2, "padding", _who("ZeroPadding1D", kwargs), allow_zero=True)
        super().__init__(**kwargs)
        self.data_format = standardize_data_format(data_format)
        self.padding = padding
        self.input_spec = InputSpec(ndim=3)

    def call(self, inputs):
        pads = [(0, 0)] * 3
        pads[_spatial_axes(self.data_format, 1)[0]] = self.padding
        return ops.pad(inputs, tuple(pads))

    def compute_output_shape(self, input_shape):
        out = list(input_shape)
        a = _spatial_axes(self.data_format, 1)[0]
        if out[a] is not None:
            out[a] += sum(self.padding)
        return tuple(out)

    def get_config(self):
        return {**super().get_config(), "padding": self.padding, "data_format": self.data_format}


class ZeroPadding2D(Layer):
    """Pads the rows and columns of 4D image inputs with zeros.

    Args:
        padding: int, `(sym_height, sym_width)`, or `((top, bottom), (left, right))`.
        data_format: "channels_last" or "channels_first".

    Example:
        >>> keratron.layers.ZeroPadding2D(1)(np.ones((2, 3, 3, 1), "float32")).shape
        (2, 5, 5, 1)
    """

    def __init__(self, padding=(1, 1), data_format=None, **kwargs):
        padding = _pairs_2d(padding, "padding", _who("ZeroPadding2D", kwargs))
        super().__init__(**kwargs)
        self.data_format = standardize_data_format(data_format)
        self.padding = padding
        self.input_spec = InputSpec(ndim=4)

    def call(self, inputs):
        pads = [(0, 0)] * 4
        for a, p in zip(_spatial_axes(self.data_format, 2), self.padding):
            pads[a] = p
        return ops.pad(inputs, tuple(pads))

    def compute_output_shape(self, input_shape):
        out = list(input_shape)
        for a, p in zip(_spatial_axes(self.data_format, 2), self.padding):
            if out[a] is not None:
                out[a] += sum(p)
        return tuple(out)

    def get_config(self):
        return {**super().get_config(), "padding": self.padding, "data_format": self.data_format}


# ---------------------------------------------------------------------------------- Cropping
def _crop(inputs, axes, crops, name):
    key = [slice(None)] * inputs.ndim
    for a, (lo, hi) in zip(axes, crops):
        size = inputs.shape[a]
        if size is not None and lo + hi >= size:
            raise ValueError(
                f"Layer '{name}': the cropping {crops} must leave at least one element along "
                f"axis {a} of the input. Received: inputs.shape={tuple(inputs.shape)}"
            )
        key[a] = slice(lo, size - hi)
    return inputs[tuple(key)]


def _cropped_shape(input_shape, axes, crops, name):
    out = list(input_shape)
    for a, (lo, hi) in zip(axes, crops):
        if out[a] is not None:
            if lo + hi >= out[a]:
                raise ValueError(
                    f"Layer '{name}': the cropping {crops} must leave at least one element along "
                    f"axis {a} of the input. Received: input_shape={tuple(input_shape)}"
                )
            out[a] -= lo + hi
    return tuple(out)


class Cropping1D(Layer):
    """Crops the steps axis of `(batch, steps, features)` inputs.

    Args:
        cropping: int, or `(start, end)`: how many steps to remove at each end.

    Example:
        >>> keratron.layers.Cropping1D((1, 2))(np.ones((2, 6, 4), "float32")).shape
        (2, 3, 4)
    """

    def __init__(self, cropping=(1, 1), **kwargs):
        cropping = _int_tuple(cropping, 2, "cropping", _who("Cropping1D", kwargs), allow_zero=True)
        super().__init__(**kwargs)
        self.cropping = cropping
        self.input_spec = InputSpec(ndim=3)

    def call(self, inputs):
        return _crop(inputs, (1,), (self.cropping,), self.name)

    def compute_output_shape(self, input_shape):
        return _cropped_shape(input_shape, (1,), (self.cropping,), self.name)

    def get_config(self):
        return {**super().get_config(), "cropping": self.cropping}


class Cropping2D(Layer):
    """Crops the rows and columns of 4D image inputs.

    Args:
        cropping: int, `(sym_height, sym_width)`, or `((top, bottom), (left, right))`.
        data_format: "channels_last" or "channels_first".

    Example:
        >>> keratron.layers.Cropping2D(((1, 0), (2, 2)))(np.ones((1, 5, 6, 3), "float32")).shape
        (1, 4, 2, 3)
    """

    def __init__(self, cropping=((0, 0), (0, 0)), data_format=None, **kwargs):
        cropping = _pairs_2d(cropping, "cropping", _who("Cropping2D", kwargs))
        super().__init__(**kwargs)
        self.data_format = standardize_data_format(data_format)
        self.cropping = cropping
        self.input_spec = InputSpec(ndim=4)

    def call(self, inputs):
        return _crop(inputs, _spatial_axes(self.data_format, 2), self.cropping, self.name)

    def compute_output_shape(self, input_shape):
        return _cropped_shape(
            input_shape, _spatial_axes(self.data_format, 2), self.cropping, self.name
        )

    def get_config(self):
        return {**super().get_config(), "cropping": self.cropping, "data_format": self.data_format}


# -------------------------------------------------------------------------------- UpSampling
def _bilinear_taps(n_in: int, factor: int):
    """Source indices and weights of bilinear upsampling by `factor` along one axis, with
    half-pixel centres and edge clamping (torch's `interpolate(align_corners=False)`, which
    Keras's UpSampling2D uses)."""
    dst = np.arange(n_in * factor, dtype=np.float64)
    src = np.maximum((dst + 0.5) / factor - 0.5, 0.0)
    lo = np.minimum(np.floor(src).astype(np.int64), n_in - 1)
    hi = np.minimum(lo + 1, n_in - 1)
    w_hi = src - lo
    return lo, hi, 1.0 - w_hi, w_hi


def _bilinear_axis(x, axis: int, factor: int):
    lo, hi, w_lo, w_hi = _bilinear_taps(x.shape[axis], factor)
    bshape = [1] * x.ndim
    bshape[axis] = -1
    # Constants follow x's device (including "meta" during shape inference).
    w_lo = convert_to_tensor(w_lo.reshape(bshape), dtype=x.dtype, device=x.device)
    w_hi = convert_to_tensor(w_hi.reshape(bshape), dtype=x.dtype, device=x.device)
    a = ops.take(x, convert_to_tensor(lo, device=x.device), axis=axis)
    b = ops.take(x, convert_to_tensor(hi, device=x.device), axis=axis)
    return ops.add(ops.multiply(a, w_lo), ops.multiply(b, w_hi))


class UpSampling1D(Layer):
    """Repeats each step of `(batch, steps, features)` inputs `size` times.

    Args:
        size: positive int.

    Example:
        >>> keratron.layers.UpSampling1D(2)(np.ones((1, 3, 4), "float32")).shape
        (1, 6, 4)
    """

    def __init__(self, size=2, **kwargs):
        who = _who("UpSampling1D", kwargs)
        if isinstance(size, bool) or not isinstance(size, (int, np.integer)):
            raise TypeError(f"{who}: argument `size` must be an integer. Received: size={size!r}")
        if size <= 0:
            raise ValueError(f"{who}: argument `size` must be positive. Received: size={size}")
        super().__init__(**kwargs)
        self.size = int(size)
        self.input_spec = InputSpec(ndim=3)

    def call(self, inputs):
        return ops.repeat(inputs, self.size, axis=1)

    def compute_output_shape(self, input_shape):
        steps = None if input_shape[1] is None else input_shape[1] * self.size
        return (input_shape[0], steps, input_shape[2])

    def get_config(self):
        return {**super().get_config(), "size": self.size}


class UpSampling2D(Layer):
    """Upsamples the rows and columns of 4D image inputs by integer factors.

    Args:
        size: int or `(rows, cols)` factors.
        data_format: "channels_last" or "channels_first".
        interpolation: "nearest" (repeat) or "bilinear" (half-pixel centres, as Keras).

    Example:
        >>> layer = keratron.layers.UpSampling2D((2, 3), interpolation="bilinear")
        >>> layer(np.ones((1, 4, 4, 2), "float32")).shape
        (1, 8, 12, 2)
    """

    def __init__(self, size=(2, 2), data_format=None, interpolation="nearest", **kwargs):
        who = _who("UpSampling2D", kwargs)
        size = _int_tuple(size, 2, "size", who)
        if not isinstance(interpolation, str) or interpolation.lower() not in (
            "nearest",
            "bilinear",
        ):
            raise ValueError(
                f"{who}: argument `interpolation` must be 'nearest' or 'bilinear'. "
                f"Received: interpolation={interpolation!r}"
            )
        super().__init__(**kwargs)
        self.data_format = standardize_data_format(data_format)
        self.size = size
        self.interpolation = interpolation.lower()
        self.input_spec = InputSpec(ndim=4)

    def call(self, inputs):
        x = inputs
        for a, f in zip(_spatial_axes(self.data_format, 2), self.size):
            if f == 1:
                continue
            if self.interpolation == "nearest":
                x = ops.repeat(x, f, axis=a)
            else:
                x = _bilinear_axis(x, a, f)
        return x

    def compute_output_shape(self, input_shape):
        out = list(input_shape)
        for a, f in zip(_spatial_axes(self.data_format, 2), self.size):
            if out[a] is not None:
                out[a] *= f
        return tuple(out)

    def get_config(self):
        return {
            **super().get_config(),
            "size": self.size,
            "data_format": self.data_format,
            "interpolation": self.interpolation,
        }
