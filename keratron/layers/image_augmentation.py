"""Random image augmentation layers, as in Keras 3: `RandomFlip`, `RandomRotation`,
`RandomZoom`, `RandomTranslation`, `RandomContrast`, `RandomBrightness`, `RandomCrop`.

Each takes a batch (rank 4) or a single image (rank 3) in the configured image layout. Called
with `training=False` (as `predict` and `evaluate` do) a layer returns its input; called
directly or in `fit` it draws one transformation per image from its `SeedGenerator`, so a
seeded layer repeats its whole sequence of draws. The geometric layers build Keras's 3x3
matrices (about the image centre `((w - 1) / 2, (h - 1) / 2)`) and sample through
`ops.image.affine_transform`, so a fixed factor gives Keras's output.
"""

from __future__ import annotations

import math

from keratron import ops
from keratron import random as kt_random
from keratron.config import standardize_data_format
from keratron.layers.layer import Layer
from keratron.layers.node import KerasTensor

__all__ = [
    "RandomFlip",
    "RandomRotation",
    "RandomZoom",
    "RandomTranslation",
    "RandomContrast",
    "RandomBrightness",
    "RandomCrop",
]

_FILL_MODES = ("reflect", "wrap", "constant", "nearest")
_INTERPOLATIONS = ("nearest", "bilinear")


def _factor_pair(layer, factor, bounds, name="factor"):
    """Keras's `_set_factor`: a number f gives (max(-f, low), f); a pair is sorted."""
    msg = (
        f"{layer}: the `{name}` argument should be a number (or a list of two numbers) in the "
        f"range [{bounds[0]}, {bounds[1]}]. Received: {name}={factor}"
    )
    if isinstance(factor, (tuple, list)):
        if len(factor) != 2 or factor[0] > bounds[1] or factor[1] < bounds[0]:
            raise ValueError(msg)
        lower, upper = sorted(factor)
        return lower, upper
    if isinstance(factor, (int, float)) and not isinstance(factor, bool):
        if factor < bounds[0] or factor > bounds[1]:
            raise ValueError(msg)
        factor = abs(factor)
        return max(-factor, bounds[0]), factor
    raise ValueError(msg)


def _height_width_pair(layer, factor, name, open_low):
    """RandomZoom/RandomTranslation factors: each bound in [-1, 1] ((-1, 1] for zoom)."""
    msg = (
        f"{layer}: the `{name}` argument should be a number (or a list of two numbers) in the "
        f"range {'(' if open_low else '['}-1.0, 1.0]. Received: {name}={factor}"
    )
    values = factor if isinstance(factor, (tuple, list)) else [factor]
    if len(values) not in (1, 2) or not isinstance(factor, (tuple, list, int, float)):
        raise ValueError(msg)
    for v in values:
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise ValueError(msg)
        if v > 1.0 or v < -1.0 or (open_low and v == -1.0):
            raise ValueError(msg)
    if isinstance(factor, (tuple, list)):
        if len(factor) != 2:
            raise ValueError(msg)
        lower, upper = sorted(factor)
        return lower, upper
    return -abs(factor), abs(factor)


def _check_modes(layer, fill_mode, interpolation):
    # Keras raises NotImplementedError for these two.
    if fill_mode not in _FILL_MODES:
        raise NotImplementedError(
            f"{layer}: unknown `fill_mode` {fill_mode!r}. Expected one of {_FILL_MODES}."
        )
    if interpolation not in _INTERPOLATIONS:
        raise NotImplementedError(
            f"{layer}: unknown `interpolation` {interpolation!r}. Expected one of "
            f"{_INTERPOLATIONS}."
        )


def _column(x, batch):
    """A (batch, 1) float32 column of zeros (x=0.0) or ones (x=1.0)."""
    return ops.zeros((batch, 1), "float32") if x == 0.0 else ops.ones((batch, 1), "float32")


class _RandomImageLayer(Layer):
    """Shared by the augmentation layers: seed, data format, rank check, `training` switch.

    Subclasses implement `_augment(images)` on a batch (rank 4) of compute-dtype images.
    """

    # Contrast and brightness return their input untouched at inference (no cast), as Keras.
    _CAST_AT_INFERENCE = True

    def __init__(self, seed=None, data_format=None, **kwargs):
        super().__init__(**kwargs)
        self.seed = seed
        self.generator = kt_random.SeedGenerator(seed)
        self.data_format = standardize_data_format(data_format)

    def _hw_axes(self):
        return (2, 3) if self.data_format == "channels_first" else (1, 2)

    def call(self, inputs, training=True):
        x = ops.convert_to_tensor(inputs)
        if x.ndim not in (3, 4):
            raise ValueError(
                f"{type(self).__name__}: expected an image tensor of rank 3 (single image) or "
                f"4 (batch of images). Received: inputs.shape={tuple(x.shape)}"
            )
        if not training and not self._CAST_AT_INFERENCE:
            return x
        x = ops.cast(x, self.compute_dtype)
        fn = self._augment if training else self._inference
        if x.ndim == 3:
            return ops.squeeze(fn(ops.expand_dims(x, 0)), 0)
        return fn(x)

    def _inference(self, images):
        return images

    def compute_output_shape(self, input_shape):
        return tuple(input_shape)

    def compute_output_spec(self, inputs, training=None):
        # From the shape rule, as Keras does: building a model draws nothing from the seed.
        return KerasTensor(self.compute_output_shape(tuple(inputs.shape)), self.compute_dtype)

    def get_config(self):
        return {**super().get_config(), "data_format": self.data_format}


class RandomFlip(_RandomImageLayer):
    """Flips each image with probability 1/2, as in Keras.

    In "horizontal_and_vertical" mode one draw decides both flips: an image is either
    flipped on both axes or left as it is (Keras's behaviour).

    Args:
        mode: "horizontal", "vertical" or "horizontal_and_vertical" (default).
        seed: optional int seed.
        data_format: "channels_last" or "channels_first" (default from the config).

    Example:
        >>> layer = keratron.layers.RandomFlip("horizontal", seed=0)
        >>> layer(np.ones((2, 4, 4, 3)), training=True).shape
        (2, 4, 4, 3)
    """

    _MODES = ("horizontal", "vertical", "horizontal_and_vertical")

    def __init__(self, mode="horizontal_and_vertical", seed=None, data_format=None, **kwargs):
        if mode not in self._MODES:
            raise ValueError(
                f"RandomFlip: `mode` must be one of {self._MODES}. Received: mode={mode!r}"
            )
        super().__init__(seed=seed, data_format=data_format, **kwargs)
        self.mode = mode

    def _augment(self, images):
        flips = ops.less_equal(
            kt_random.uniform((images.shape[0], 1, 1, 1), seed=self.generator), 0.5
        )
        h_axis, w_axis = self._hw_axes()
        out = images
        if self.mode in ("horizontal", "horizontal_and_vertical"):
            out = ops.where(flips, ops.flip(out, axis=w_axis), out)
        if self.mode in ("vertical", "horizontal_and_vertical"):
            out = ops.where(flips, ops.flip(out, axis=h_axis), out)
        return out

    def get_config(self):
        return {**super().get_config(), "seed": self.seed, "mode": self.mode}


class _AffineLayer(_RandomImageLayer):
    """A random geometric layer: draws one 8-coefficient transform per image."""

    def __init__(self, fill_mode, interpolation, seed, fill_value, data_format, **kwargs):
        _check_modes(type(self).__name__, fill_mode, interpolation)
        super().__init__(seed=seed, data_format=data_format, **kwargs)
        self.fill_mode = fill_mode
        self.interpolation = interpolation
        self.fill_value = fill_value

    def _augment(self, images):
        h_axis, w_axis = self._hw_axes()
        transform = self._transform(images.shape[0], images.shape[h_axis], images.shape[w_axis])
        return ops.image.affine_transform(
            images,
            transform,
            interpolation=self.interpolation,
            fill_mode=self.fill_mode,
            fill_value=self.fill_value,
            data_format=self.data_format,
        )


class RandomRotation(_AffineLayer):
    """Rotates each image by a random angle of `factor` full turns about its centre.

    Args:
        factor: a number f (angles in [-f, f] turns) or a pair (lower, upper); 0.25 turns is
            90 degrees, positive angles turn counter-clockwise.
        fill_mode: how points outside the image are filled: "reflect" (default), "wrap",
            "constant" or "nearest".
        interpolation: "bilinear" (default) or "nearest".
        seed: optional int seed.
        fill_value: the value outside the image when `fill_mode="constant"`.
        data_format: "channels_last" or "channels_first" (default from the config).

    Example:
        >>> layer = keratron.layers.RandomRotation((0.25, 0.25))  # always 90 degrees
        >>> layer(np.ones((1, 4, 4, 1)), training=True).shape
        (1, 4, 4, 1)
    """

    def __init__(
        self,
        factor,
        fill_mode="reflect",
        interpolation="bilinear",
        seed=None,
        fill_value=0.0,
        data_format=None,
        **kwargs,
    ):
        self.factor = _factor_pair("RandomRotation", factor, (-1, 1))
        super().__init__(fill_mode, interpolation, seed, fill_value, data_format, **kwargs)

    def _transform(self, batch, height, width):
        angle = kt_random.uniform(
            (batch,),
            minval=self.factor[0] * 360.0,
            maxval=self.factor[1] * 360.0,
            dtype="float32",
            seed=self.generator,
        )
        angle = ops.reshape(angle * (math.pi / 180.0), (batch, 1))
        cx, cy = 0.5 * (width - 1), 0.5 * (height - 1)
        cos, sin = ops.cos(angle), ops.sin(angle)
        a0, a1 = cos, -sin
        b0, b1 = sin, cos
        a2 = cx - cx * a0 - cy * a1
        b2 = cy - cx * b0 - cy * b1
        zeros = _column(0.0, batch)
        return ops.concatenate([a0, a1, a2, b0, b1, b2, zeros, zeros], axis=1)

    def get_config(self):
        return {
            **super().get_config(),
            "factor": self.factor,
            "fill_mode": self.fill_mode,
            "fill_value": self.fill_value,
            "interpolation": self.interpolation,
            "seed": self.seed,
        }


class RandomZoom(_AffineLayer):
    """Zooms each image by a random factor about its centre, as in Keras.

    A factor f draws a scale in [1 - f, 1 + f] for the sampling grid: positive values zoom
    out, negative values zoom in.

    Args:
        height_factor: a number in (-1, 1] or a pair (lower, upper).
        width_factor: likewise; None (default) keeps the aspect ratio (the height's scale).
        fill_mode, interpolation, seed, fill_value, data_format: as in `RandomRotation`.

    Example:
        >>> layer = keratron.layers.RandomZoom((-0.5, -0.5))  # 2x zoom in
        >>> layer(np.ones((1, 4, 4, 1)), training=True).shape
        (1, 4, 4, 1)
    """

    def __init__(
        self,
        height_factor,
        width_factor=None,
        fill_mode="reflect",
        interpolation="bilinear",
        seed=None,
        fill_value=0.0,
        data_format=None,
        **kwargs,
    ):
        self.height_lower, self.height_upper = _height_width_pair(
            "RandomZoom", height_factor, "height_factor", open_low=True
        )
        if width_factor is not None:
            self.width_lower, self.width_upper = _height_width_pair(
                "RandomZoom", width_factor, "width_factor", open_low=True
            )
        super().__init__(fill_mode, interpolation, seed, fill_value, data_format, **kwargs)
        self.height_factor = height_factor
        self.width_factor = width_factor

    def _transform(self, batch, height, width):
        zy = kt_random.uniform(
            (batch, 1),
            minval=1.0 + self.height_lower,
            maxval=1.0 + self.height_upper,
            dtype="float32",
            seed=self.generator,
        )
        zx = zy
        if self.width_factor is not None:
            zx = kt_random.uniform(
                (batch, 1),
                minval=1.0 + self.width_lower,
                maxval=1.0 + self.width_upper,
                dtype="float32",
                seed=self.generator,
            )
        zeros = _column(0.0, batch)
        x_offset = ((width - 1.0) / 2.0) * (1.0 - zx)
        y_offset = ((height - 1.0) / 2.0) * (1.0 - zy)
        return ops.concatenate([zx, zeros, x_offset, zeros, zy, y_offset, zeros, zeros], axis=1)

    def get_config(self):
        return {
            **super().get_config(),
            "height_factor": self.height_factor,
            "width_factor": self.width_factor,
            "fill_mode": self.fill_mode,
            "interpolation": self.interpolation,
            "seed": self.seed,
            "fill_value": self.fill_value,
        }


class RandomTranslation(_AffineLayer):
    """Shifts each image by a random fraction of its height and width, as in Keras.

    Args:
        height_factor: a number f (shifts in [-f, f] of the height) or a pair (lower, upper),
            each in [-1, 1]; positive values shift down.
        width_factor: likewise for the width; positive values shift right.
        fill_mode, interpolation, seed, fill_value, data_format: as in `RandomRotation`.

    Example:
        >>> layer = keratron.layers.RandomTranslation((0.25, 0.25), 0.0, fill_mode="constant")
        >>> layer(np.ones((1, 4, 4, 1)), training=True).numpy()[0, :, 0, 0]
        array([0., 1., 1., 1.], dtype=float32)
    """

    def __init__(
        self,
        height_factor,
        width_factor,
        fill_mode="reflect",
        interpolation="bilinear",
        seed=None,
        fill_value=0.0,
        data_format=None,
        **kwargs,
    ):
        self.height_lower, self.height_upper = _height_width_pair(
            "RandomTranslation", height_factor, "height_factor", open_low=False
        )
        self.width_lower, self.width_upper = _height_width_pair(
            "RandomTranslation", width_factor, "width_factor", open_low=False
        )
        super().__init__(fill_mode, interpolation, seed, fill_value, data_format, **kwargs)
        self.height_factor = height_factor
        self.width_factor = width_factor

    def _transform(self, batch, height, width):
        dy = height * kt_random.uniform(
            (batch, 1),
            minval=self.height_lower,
            maxval=self.height_upper,
            dtype="float32",
            seed=self.generator,
        )
        dx = width * kt_random.uniform(
            (batch, 1),
            minval=self.width_lower,
            maxval=self.width_upper,
            dtype="float32",
            seed=self.generator,
        )
        zeros, ones = _column(0.0, batch), _column(1.0, batch)
        return ops.concatenate([ones, zeros, -dx, zeros, ones, -dy, zeros, zeros], axis=1)

    def get_config(self):
        return {
            **super().get_config(),
            "height_factor": self.height_factor,
            "width_factor": self.width_factor,
            "fill_mode": self.fill_mode,
            "interpolation": self.interpolation,
            "seed": self.seed,
            "fill_value": self.fill_value,
        }


class RandomContrast(_RandomImageLayer):
    """Scales each image's deviation from its per-channel mean by a random factor.

    The factor is drawn from `[1 - lower, 1 + upper]`; as in Keras 3, a number f gives
    `(lower, upper) = (0, f)`, so contrast only rises unless a pair is given. The result
    is clipped to `value_range`.

    Args:
        factor: a number in [0, 1] or a pair (lower, upper).
        value_range: the (min, max) range of the images (default (0, 255)).
        seed: optional int seed.

    Example:
        >>> layer = keratron.layers.RandomContrast((0.5, 0.5), seed=0)
        >>> layer(np.full((1, 2, 2, 1), 10.0), training=True).shape
        (1, 2, 2, 1)
    """

    _CAST_AT_INFERENCE = False

    def __init__(self, factor, value_range=(0, 255), seed=None, **kwargs):
        data_format = kwargs.pop("data_format", None)
        self.factor = _factor_pair("RandomContrast", factor, (0, 1))
        super().__init__(seed=seed, data_format=data_format, **kwargs)
        self.value_range = value_range

    def _augment(self, images):
        h_axis, w_axis = self._hw_axes()
        factor = kt_random.uniform(
            (images.shape[0], 1, 1, 1),
            minval=1.0 - self.factor[0],
            maxval=1.0 + self.factor[1],
            dtype=self.compute_dtype,
            seed=self.generator,
        )
        mean = ops.mean(ops.mean(images, axis=h_axis, keepdims=True), axis=w_axis, keepdims=True)
        out = (images - mean) * factor + mean
        return ops.clip(out, self.value_range[0], self.value_range[1])

    def get_config(self):
        return {
            **super().get_config(),
            "factor": self.factor,
            "value_range": self.value_range,
            "seed": self.seed,
        }


class RandomBrightness(_RandomImageLayer):
    """Adds a random offset, a fraction of `value_range`'s width, to each image.

    Args:
        factor: a number f in [-1, 1] (offsets in [-f, f]) or a pair (lower, upper).
        value_range: the (min, max) range of the images (default (0, 255)); outputs are
            clipped to it.
        seed: optional int seed.

    Example:
        >>> layer = keratron.layers.RandomBrightness((0.1, 0.1), value_range=(0, 1))
        >>> layer(np.zeros((1, 2, 2, 1)), training=True).numpy().max()  # doctest: +SKIP
        0.1
    """

    _CAST_AT_INFERENCE = False

    def __init__(self, factor, value_range=(0, 255), seed=None, **kwargs):
        data_format = kwargs.pop("data_format", None)
        self.factor = _factor_pair("RandomBrightness", factor, (-1, 1))
        if not isinstance(value_range, (tuple, list)) or len(value_range) != 2:
            raise ValueError(
                "RandomBrightness: the `value_range` argument should be a list of two numbers. "
                f"Received: value_range={value_range}"
            )
        super().__init__(seed=seed, data_format=data_format, **kwargs)
        self.value_range = sorted(value_range)

    def _augment(self, images):
        delta = kt_random.uniform(
            (images.shape[0], 1, 1, 1),
            minval=self.factor[0],
            maxval=self.factor[1],
            dtype="float32",
            seed=self.generator,
        )
        delta = ops.cast(delta * (self.value_range[1] - self.value_range[0]), images.dtype)
        return ops.clip(images + delta, self.value_range[0], self.value_range[1])

    def get_config(self):
        return {
            **super().get_config(),
            "factor": self.factor,
            "value_range": self.value_range,
            "seed": self.seed,
        }


class RandomCrop(_RandomImageLayer):
    """Crops a random `(height, width)` window of each batch, as in Keras 3.15.

    In training one window position is drawn per call (shared by the batch). At inference,
    and in training for an input not larger than the target on both axes, the largest centred
    window of the target aspect ratio is resized to the target, as Keras documents. (Keras
    3.15 itself returns the input unchanged at inference, so its output no longer has the
    layer's output shape and a model built on that shape fails in `predict`.)

    Args:
        height, width: the output size.
        seed: optional int seed (default: one drawn now, and kept in the config).
        data_format: "channels_last" or "channels_first" (default from the config).

    Example:
        >>> layer = keratron.layers.RandomCrop(2, 2, seed=0)
        >>> layer(np.ones((1, 4, 4, 3)), training=True).shape
        (1, 2, 2, 3)
    """

    def __init__(self, height, width, seed=None, data_format=None, name=None, **kwargs):
        for arg, v in (("height", height), ("width", width)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(
                    f"RandomCrop: `{arg}` must be a positive integer. Received: {arg}={v!r}"
                )
        # The drawn default seed goes into the config, so a rebuilt layer repeats the crops.
        seed = seed if seed is not None else kt_random.make_default_seed()
        super().__init__(seed=seed, data_format=data_format, name=name, **kwargs)
        self.height = height
        self.width = width

    def _augment(self, images):
        h_axis, w_axis = self._hw_axes()
        in_h, in_w = images.shape[h_axis], images.shape[w_axis]
        if in_h > self.height and in_w > self.width:
            # The window start stays a tensor (no host read), so a traced step draws anew.
            starts = []
            for n, size in ((in_h, self.height), (in_w, self.width)):
                u = kt_random.uniform((), 0, float(n - size + 1), seed=self.generator)
                # float32 rounding may reach the open upper bound: clamp to the last start.
                starts.append(ops.cast(ops.minimum(ops.floor(u), n - size), "int32"))
            out = ops.take(images, starts[0] + ops.arange(self.height, dtype="int32"), h_axis)
            return ops.take(out, starts[1] + ops.arange(self.width, dtype="int32"), w_axis)
        return self._crop(images, keras_window=True)

    def _inference(self, images):
        return self._crop(images, keras_window=False)

    def _crop(self, images, keras_window):
        """The largest centred window of the target aspect ratio, resized to the target.

        Keras's training fallback (`keras_window`) starts from that window's corner but
        slices `(height, width)` from there, as Keras 3.15 does, before resizing.
        """
        h_axis, w_axis = self._hw_axes()
        in_h, in_w = images.shape[h_axis], images.shape[w_axis]
        crop_h = max(min(in_h, int(float(in_w * self.height) / self.width)), 1)
        crop_w = max(min(in_w, int(float(in_h * self.width) / self.height)), 1)
        h0, w0 = int(float(in_h - crop_h) / 2), int(float(in_w - crop_w) / 2)
        if keras_window:
            crop_h, crop_w = min(self.height, in_h - h0), min(self.width, in_w - w0)
        index = [slice(None)] * 4
        index[h_axis] = slice(h0, h0 + crop_h)
        index[w_axis] = slice(w0, w0 + crop_w)
        out = images[tuple(index)]
        if (crop_h, crop_w) != (self.height, self.width):
            out = ops.image.resize(out, (self.height, self.width), data_format=self.data_format)
            out = ops.cast(out, self.compute_dtype)
        return out

    def compute_output_shape(self, input_shape):
        shape = list(input_shape)
        h_axis, w_axis = (-2, -1) if self.data_format == "channels_first" else (-3, -2)
        shape[h_axis], shape[w_axis] = self.height, self.width
        return tuple(shape)

    def get_config(self):
        return {
            **super().get_config(),
            "height": self.height,
            "width": self.width,
            "seed": self.seed,
        }
