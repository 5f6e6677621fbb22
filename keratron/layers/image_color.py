"""Colour and intensity image layers, as in Keras 3.15: `AutoContrast`, `Equalization`,
`ContrastLimitedAdaptiveHistogramEqualization`, `Solarization`, `RandomGrayscale`,
`RandomInvert`, `RandomHue`, `RandomSaturation`, `RandomColorDegeneration`,
`RandomColorJitter`, `RandomPosterization`, `RandomSharpness`, `RandomGaussianBlur`.

Each takes a batch (rank 4) or a single image (rank 3) in the configured image layout and
works on pixel values in `value_range`. The random layers draw one transformation per image
from their `SeedGenerator` (`_draw`) and apply it (`_apply`, whose parameter names are
Keras's `get_random_transformation` keys); they are the identity when `training=False`.
`AutoContrast` and `ContrastLimitedAdaptiveHistogramEqualization` are active at inference
too, as in Keras.
"""

from __future__ import annotations

import numpy as np

from keratron import ops
from keratron import random as kt_random
from keratron.config import epsilon
from keratron.layers.image_augmentation import (
    RandomBrightness,
    RandomContrast,
    _factor_pair,
    _RandomImageLayer,
)

__all__ = [
    "AutoContrast",
    "Equalization",
    "ContrastLimitedAdaptiveHistogramEqualization",
    "Solarization",
    "RandomGrayscale",
    "RandomInvert",
    "RandomHue",
    "RandomSaturation",
    "RandomColorDegeneration",
    "RandomColorJitter",
    "RandomPosterization",
    "RandomSharpness",
    "RandomGaussianBlur",
]


def _value_range(layer, value_range, sort=True):
    """Keras's `_set_value_range`: a pair of numbers, kept sorted (a list) or as given."""
    if not isinstance(value_range, (tuple, list)) or len(value_range) != 2:
        raise ValueError(
            f"{layer}: the `value_range` argument should be a list of two numbers. "
            f"Received: value_range={value_range}"
        )
    return sorted(value_range) if sort else value_range


def _unit_pair(layer, factor, name, number_low=0.0):
    """A number f in [0, 1] gives (number_low or -f, f); a pair in [0, 1] is sorted."""
    msg = (
        f"{layer}: the `{name}` argument should be a number (or a list of two numbers) in the "
        f"range [0, 1]. Received: {name}={factor}"
    )
    values = factor if isinstance(factor, (tuple, list)) else [factor]
    if len(values) not in (1, 2) or not isinstance(factor, (tuple, list, int, float)):
        raise ValueError(msg)
    for v in values:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0.0 <= v <= 1.0:
            raise ValueError(msg)
    if isinstance(factor, (tuple, list)):
        if len(factor) != 2:
            raise ValueError(msg)
        lower, upper = sorted(factor)
        return lower, upper
    return (number_low if number_low is not None else -abs(factor)), factor


def _to_range(x, source, target):
    """Keras's `_transform_value_range`: maps `source` linearly onto `target`."""
    if source[0] == target[0] and source[1] == target[1]:
        return x
    x = (x - float(source[0])) / (float(source[1]) - float(source[0]))
    return x * (float(target[1]) - float(target[0])) + float(target[0])


def _histogram(ids, n):
    """Counts of each id in [0, n): a segment sum, whose shape (unlike bincount's) is known
    while a step is traced."""
    return ops.segment_sum(ops.ones(ids.shape, dtype="int32"), ids, num_segments=n)


def _apply_where(mask, new, old):
    """Per-image selection: `mask` is a (batch,) bool tensor."""
    return ops.where(ops.reshape(mask, (-1, 1, 1, 1)), new, old)


def _per_image(layer, images, minval, maxval, dtype="float32"):
    return kt_random.uniform(
        (images.shape[0],), minval=minval, maxval=maxval, dtype=dtype, seed=layer.generator
    )


class _TransformLayer(_RandomImageLayer):
    """A random layer whose draws (`_draw`) and their application (`_apply`) are apart."""

    def _augment(self, images):
        return self._apply(images, self._draw(images))

    def _to_last(self, images):
        return (
            ops.transpose(images, (0, 2, 3, 1)) if self.data_format == "channels_first" else images
        )

    def _from_last(self, images):
        return (
            ops.transpose(images, (0, 3, 1, 2)) if self.data_format == "channels_first" else images
        )


class AutoContrast(_TransformLayer):
    """Stretches each channel of each image over the whole `value_range`, as in Keras.

    Active at inference too. A constant channel (whose stretch divides by zero) is returned
    unchanged.

    Args:
        value_range: the (low, high) range of the images (default (0, 255)).
        data_format: "channels_last" or "channels_first" (default from the config).

    Example:
        >>> layer = keratron.layers.AutoContrast(value_range=(0, 1))
        >>> layer(np.array([[[[0.25], [0.5]]]])).numpy().ravel()
        array([0., 1.], dtype=float32)
    """

    def __init__(self, value_range=(0, 255), **kwargs):
        data_format = kwargs.pop("data_format", None)
        super().__init__(data_format=data_format, **kwargs)
        self.value_range = _value_range("AutoContrast", value_range)

    def _augment(self, images):
        x = _to_range(images, self.value_range, (0, 255))
        # Per image and channel (Keras reduces axes (1, 2), which is that for channels_last).
        h_axis, w_axis = self._hw_axes()
        low = ops.min(x, axis=(h_axis, w_axis), keepdims=True)
        high = ops.max(x, axis=(h_axis, w_axis), keepdims=True)
        scale = 255.0 / (high - low)
        out = ops.clip(x * scale - low * scale, 0.0, 255.0)
        out = _to_range(out, (0, 255), self.value_range)
        return ops.where(ops.isnan(out), images, out)

    _inference = _augment

    def get_config(self):
        return {**super().get_config(), "value_range": self.value_range}


class Equalization(_TransformLayer):
    """Histogram equalization of each channel, as in Keras 3.15.

    As in Keras, one histogram per channel is taken over the whole batch (a single image, or
    a batch of one, is equalized on its own); pixel values are binned into `bins` bins over
    `value_range` and mapped through the normalised cumulative histogram. A channel whose
    values fall in one bin is left unchanged. Identity at inference.

    Args:
        value_range: the (low, high) range of the images (default (0, 255)).
        bins: number of histogram bins (default 256).
        data_format: "channels_last" or "channels_first" (default from the config).

    Example:
        >>> layer = keratron.layers.Equalization()
        >>> layer(np.array([[[[0.0], [10.0]]]]), training=True).numpy().ravel()
        array([  0., 255.], dtype=float32)
    """

    def __init__(self, value_range=(0, 255), bins=256, data_format=None, **kwargs):
        if isinstance(bins, bool) or not isinstance(bins, int) or bins < 2:
            raise ValueError(
                f"Equalization: `bins` must be an integer >= 2. Received: bins={bins!r}"
            )
        super().__init__(data_format=data_format, **kwargs)
        self.bins = bins
        self.value_range = _value_range("Equalization", value_range)

    def _augment(self, images):
        x = self._to_last(images)
        channels = x.shape[-1]
        nb = self.bins
        x = _to_range(x, self.value_range, (0, 255))
        # Histogram bins as Keras computes them: truncation of value * (bins - 1) / 255.
        idx = ops.clip(ops.cast(x * float(nb - 1) / 255.0, "int32"), 0, nb - 1)
        offset = ops.arange(channels, dtype="int32") * nb
        flat = ops.reshape(idx + offset, (-1,))
        hist = ops.reshape(_histogram(flat, channels * nb), (channels, nb))
        cdf = ops.cast(ops.cumsum(hist, axis=-1), "float32")
        # The cdf is non-decreasing, so its first nonzero entry is its smallest positive one.
        big = float(np.finfo("float32").max)
        cdf_min = ops.min(ops.where(cdf > 0, cdf, big), axis=-1, keepdims=True)
        denom = cdf[:, -1:] - cdf_min
        denom = ops.where(denom == 0, 1.0, denom)
        lut = ops.clip(ops.round((cdf - cdf_min) * 255.0 / denom), 0, 255)
        lookup = ops.cast(ops.clip(x / 255.0 * float(nb - 1), 0, nb - 1), "int32")
        out = ops.take(ops.reshape(lut, (-1,)), lookup + offset)
        nonzero = ops.sum(ops.cast(hist > 0, "int32"), axis=-1)
        out = ops.where(nonzero <= 1, x, out)
        out = _to_range(out, (0, 255), self.value_range)
        return self._from_last(ops.cast(out, self.compute_dtype))

    def get_config(self):
        return {**super().get_config(), "bins": self.bins, "value_range": self.value_range}


class ContrastLimitedAdaptiveHistogramEqualization(_TransformLayer):
    """Contrast-limited adaptive histogram equalization (CLAHE), as in Keras 3.15.

    The image is cut into a `tile_grid_size` grid of tiles (padded symmetrically to a
    multiple of it); each tile's 256-bin histogram is clipped at `clip_limit` times the mean
    bin count, the excess spread evenly over the bins, and its normalised cumulative histogram
    becomes the tile's mapping. Pixels blend the mappings of the four nearest tile centres
    bilinearly. Active at inference too, as in Keras.

    Args:
        value_range: the (low, high) range of the images (default (0, 255)).
        clip_limit: the contrast limit (default 4.0; 0 or less disables clipping).
        tile_grid_size: (rows, cols) of the tile grid (default (8, 8)).
        data_format: "channels_last" or "channels_first" (default from the config).

    Example:
        >>> layer = keratron.layers.ContrastLimitedAdaptiveHistogramEqualization()
        >>> layer(np.random.uniform(0, 255, (1, 16, 16, 3))).shape
        (1, 16, 16, 3)
    """

    def __init__(
        self,
        value_range=(0, 255),
        clip_limit=4.0,
        tile_grid_size=(8, 8),
        data_format=None,
        **kwargs,
    ):
        name = "ContrastLimitedAdaptiveHistogramEqualization"
        value_range = _value_range(name, value_range, sort=False)
        if (
            not isinstance(tile_grid_size, (tuple, list))
            or len(tile_grid_size) != 2
            or not all(
                isinstance(g, int) and not isinstance(g, bool) and g > 0 for g in tile_grid_size
            )
        ):
            raise ValueError(
                f"{name}: `tile_grid_size` must be a pair of positive integers. "
                f"Received: tile_grid_size={tile_grid_size!r}"
            )
        if isinstance(clip_limit, bool) or not isinstance(clip_limit, (int, float)):
            raise ValueError(f"{name}: `clip_limit` must be a number. Received: {clip_limit!r}")
        super().__init__(data_format=data_format, **kwargs)
        self.value_range = value_range
        self.clip_limit = clip_limit
        self.tile_grid_size = tile_grid_size

    def _augment(self, images):
        x = _to_range(self._to_last(images), self.value_range, (0, 255))
        x = ops.cast(x, "float32")
        out = self._clahe(x)
        out = _to_range(out, (0, 255), self.value_range)
        return self._from_last(ops.cast(out, self.compute_dtype))

    _inference = _augment

    def _clahe(self, images):
        b, height, width, c = images.shape
        gh, gw = self.tile_grid_size
        th, tw = -(-height // gh), -(-width // gw)
        ph, pw = th * gh - height, tw * gw - width
        padded = images
        if ph or pw:
            padded = ops.pad(images, [(0, 0), (0, ph), (0, pw), (0, 0)], mode="symmetric")
        tiles = ops.reshape(padded, (b, gh, th, gw, tw, c))
        tiles = ops.transpose(tiles, (0, 1, 3, 5, 2, 4))
        vals = ops.clip(ops.cast(tiles, "int32"), 0, 255)
        n_tiles = b * gh * gw * c
        # One 256-bin histogram per (image, tile row, tile col, channel), by one count.
        base = ops.reshape(ops.arange(n_tiles, dtype="int32") * 256, (b, gh, gw, c, 1, 1))
        hists = _histogram(ops.reshape(vals + base, (-1,)), n_tiles * 256)
        hists = ops.reshape(ops.cast(hists, "float32"), (b, gh, gw, c, 256))
        if self.clip_limit > 0:
            limit = float(self.clip_limit * (th * tw) / 256.0)
            clipped = ops.clip(hists, 0.0, limit)
            excess = ops.sum(hists - clipped, axis=-1, keepdims=True)
            hists = clipped + excess / 256.0
        cdf = ops.cumsum(hists, axis=-1)
        cdf_min = ops.min(cdf, axis=-1, keepdims=True)
        denom = float(th * tw) - cdf_min
        denom = ops.where(denom == 0, 1.0, denom)
        cdf = ops.clip((cdf - cdf_min) * 255.0 / denom, 0, 255)
        # Edge tiles are repeated once on every side, so border pixels blend with themselves.
        cdf = ops.concatenate([cdf[:, :1], cdf, cdf[:, -1:]], axis=1)
        cdf = ops.concatenate([cdf[:, :, :1], cdf, cdf[:, :, -1:]], axis=2)
        cdf_flat = ops.reshape(cdf, (-1,))

        def grid(n, tile, g):
            pos = (np.arange(n * g, dtype="float32") - tile / 2.0) / tile + 1.0
            lo = np.floor(pos)
            w = (pos - lo).astype("float32")
            return (
                np.clip(lo, 0, g + 1).astype("int32"),
                np.clip(lo + 1, 0, g + 1).astype("int32"),
                w,
            )

        y0, y1, wy = grid(th, th, gh)
        x0, x1, wx = grid(tw, tw, gw)
        sc = 256
        sx = sc * c
        sy = sx * (gw + 2)
        sb = sy * (gh + 2)
        pixels = ops.cast(ops.clip(padded, 0, 255), "int32")
        b_idx = np.arange(b, dtype="int32")[:, None, None, None] * sb
        c_idx = np.arange(c, dtype="int32")[None, None, None, :] * sc
        base_idx = pixels + ops.convert_to_tensor(b_idx + c_idx)

        def at(yy, xx):
            off = yy[None, :, None, None] * sy + xx[None, None, :, None] * sx
            return ops.take(cdf_flat, base_idx + ops.convert_to_tensor(off.astype("int32")))

        wx_t = ops.convert_to_tensor(wx[None, None, :, None])
        wy_t = ops.convert_to_tensor(wy[None, :, None, None])
        top = at(y0, x0) * (1.0 - wx_t) + at(y0, x1) * wx_t
        bottom = at(y1, x0) * (1.0 - wx_t) + at(y1, x1) * wx_t
        out = top * (1.0 - wy_t) + bottom * wy_t
        return out[:, :height, :width, :]

    def get_config(self):
        return {
            **super().get_config(),
            "value_range": self.value_range,
            "clip_limit": self.clip_limit,
            "tile_grid_size": self.tile_grid_size,
        }


class Solarization(_TransformLayer):
    """Inverts pixels (`255 - x` on the 0-255 scale) at or above a random threshold.

    As in Keras, per image an addition in `[addition_factor[0], 255 * addition_factor[1]]`
    is added (and the sum clipped to [0, 255]) and a threshold in
    `[threshold_factor[0], 255 * threshold_factor[1]]` drawn; values below the threshold
    are kept, the others inverted. With the defaults every pixel is inverted.

    Args:
        addition_factor: a number f in [0, 1] (meaning (0, f)) or a pair (default 0).
        threshold_factor: a number f in [0, 1] (meaning (0, f)) or a pair (default 0).
        value_range: the (low, high) range of the images (default (0, 255)).
        seed: optional int seed.

    Example:
        >>> layer = keratron.layers.Solarization(value_range=(0, 1))
        >>> layer(np.array([[[0.25]]]), training=True).numpy().ravel()
        array([0.75], dtype=float32)
    """

    def __init__(
        self, addition_factor=0.0, threshold_factor=0.0, value_range=(0, 255), seed=None, **kwargs
    ):
        data_format = kwargs.pop("data_format", None)
        self.addition_factor = _unit_pair("Solarization", addition_factor, "addition_factor")
        self.threshold_factor = _unit_pair("Solarization", threshold_factor, "threshold_factor")
        super().__init__(seed=seed, data_format=data_format, **kwargs)
        self.value_range = _value_range("Solarization", value_range)

    def _draw(self, images):
        shape = (images.shape[0], 1, 1, 1)
        lo, hi = self.addition_factor
        additions = kt_random.uniform(shape, lo, hi * 255, self.compute_dtype, self.generator)
        lo, hi = self.threshold_factor
        thresholds = kt_random.uniform(shape, lo, hi * 255, self.compute_dtype, self.generator)
        return {"additions": additions, "thresholds": thresholds}

    def _apply(self, images, params):
        x = _to_range(images, self.value_range, (0, 255))
        x = ops.clip(x + params["additions"], 0, 255)
        x = ops.where(x < params["thresholds"], x, 255.0 - x)
        return _to_range(x, (0, 255), self.value_range)

    def get_config(self):
        return {
            **super().get_config(),
            "value_range": self.value_range,
            "addition_factor": self.addition_factor,
            "threshold_factor": self.threshold_factor,
            "seed": self.seed,
        }


class RandomGrayscale(_TransformLayer):
    """Turns each image to grayscale (luma, in every channel) with probability `factor`.

    Args:
        factor: the probability in [0, 1] (default 0.5).
        data_format: "channels_last" or "channels_first" (default from the config).
        seed: optional int seed.

    Example:
        >>> layer = keratron.layers.RandomGrayscale(factor=1.0)
        >>> layer(np.ones((1, 2, 2, 3)), training=True).shape
        (1, 2, 2, 3)
    """

    def __init__(self, factor=0.5, data_format=None, seed=None, **kwargs):
        if isinstance(factor, bool) or not isinstance(factor, (int, float)) or not 0 <= factor <= 1:
            raise ValueError(
                f"RandomGrayscale: `factor` should be between 0 and 1. Received: factor={factor}"
            )
        super().__init__(seed=seed, data_format=data_format, **kwargs)
        self.factor = factor

    def _draw(self, images):
        return {"should_apply": _per_image(self, images, 0.0, 1.0) < self.factor}

    def _apply(self, images, params):
        gray = ops.image.rgb_to_grayscale(images, data_format=self.data_format)
        return _apply_where(params["should_apply"], gray, images)

    def get_config(self):
        # Keras 3.15 keeps no seed in this layer's config.
        return {**super().get_config(), "factor": self.factor}


class RandomInvert(_TransformLayer):
    """Inverts each image (`value_range[1] - x`) with a random probability, as in Keras.

    Per image a probability is drawn from `factor` (a number f means [0, f]) and the image is
    inverted when a uniform draw falls below it: `factor=(1, 1)` inverts every image.

    Args:
        factor: a number in [0, 1] or a pair (default 1.0, i.e. probabilities in [0, 1]).
        value_range: the (low, high) range of the images (default (0, 255)).
        seed: optional int seed.
        data_format: "channels_last" or "channels_first" (default from the config).

    Example:
        >>> layer = keratron.layers.RandomInvert(factor=(1.0, 1.0))
        >>> layer(np.zeros((1, 1, 1, 1)), training=True).numpy().ravel()
        array([255.], dtype=float32)
    """

    _CAST_AT_INFERENCE = False

    def __init__(self, factor=1.0, value_range=(0, 255), seed=None, data_format=None, **kwargs):
        self.factor = _factor_pair("RandomInvert", factor, (0, 1))
        super().__init__(seed=seed, data_format=data_format, **kwargs)
        self.value_range = _value_range("RandomInvert", value_range, sort=False)

    def _draw(self, images):
        probability = _per_image(self, images, self.factor[0], self.factor[1])
        return {"apply_inversion": _per_image(self, images, 0.0, 1.0) < probability}

    def _apply(self, images, params):
        return _apply_where(params["apply_inversion"], float(self.value_range[1]) - images, images)

    def get_config(self):
        return {
            **super().get_config(),
            "factor": self.factor,
            "value_range": self.value_range,
            "seed": self.seed,
        }


def _hsv_channel(layer, images, index, fn):
    """Applies `fn` to channel `index` of the HSV form of (channels-last) `images`."""
    hsv = ops.image.rgb_to_hsv(images, data_format="channels_last")
    parts = [hsv[..., i] for i in range(3)]
    parts[index] = fn(parts[index])
    return ops.image.hsv_to_rgb(ops.stack(parts, axis=-1), data_format="channels_last")


class RandomHue(_TransformLayer):
    """Rotates each image's hue by a random amount, as in Keras.

    Per image a factor f is drawn from `factor` and a sign at random; the hue (in [0, 1])
    moves by `sign * f / 2`, wrapping around.

    Args:
        factor: a number in [0, 1] (meaning [0, f]) or a pair.
        value_range: the (low, high) range of the images (default (0, 255)).
        data_format: "channels_last" or "channels_first" (default from the config).
        seed: optional int seed.

    Example:
        >>> layer = keratron.layers.RandomHue(0.5, seed=0)
        >>> layer(np.random.uniform(0, 255, (2, 4, 4, 3)), training=True).shape
        (2, 4, 4, 3)
    """

    def __init__(self, factor, value_range=(0, 255), data_format=None, seed=None, **kwargs):
        self.factor = _factor_pair("RandomHue", factor, (0, 1))
        super().__init__(seed=seed, data_format=data_format, **kwargs)
        self.value_range = _value_range("RandomHue", value_range, sort=False)

    def _draw(self, images):
        invert = ops.where(_per_image(self, images, 0.0, 1.0) > 0.5, -1.0, 1.0)
        factor = _per_image(self, images, self.factor[0], self.factor[1])
        return {"factor": invert * factor * 0.5}

    def _apply(self, images, params):
        x = _to_range(self._to_last(images), self.value_range, (0, 1))
        shift = ops.reshape(ops.cast(params["factor"], x.dtype), (-1, 1, 1))

        def rotate(h):
            h = h + shift
            h = ops.where(h > 1.0, h - 1.0, h)
            return ops.where(h < 0.0, h + 1.0, h)

        x = ops.clip(_hsv_channel(self, x, 0, rotate), 0, 1)
        return self._from_last(_to_range(x, (0, 1), self.value_range))

    def get_config(self):
        return {
            **super().get_config(),
            "factor": self.factor,
            "value_range": self.value_range,
            "seed": self.seed,
        }


class RandomSaturation(_TransformLayer):
    """Scales each image's saturation by a random factor, as in Keras.

    Per image f is drawn from `factor` and the HSV saturation multiplied by
    `f / (1 - f + epsilon)` (f = 0.5 keeps it, f = 1 saturates fully, f = 0 gives gray),
    then clipped to `value_range`.

    Args:
        factor: a number f in [-1, 1] (meaning [-f, f]) or a pair.
        value_range: the (low, high) range of the images (default (0, 255)).
        data_format: "channels_last" or "channels_first" (default from the config).
        seed: optional int seed.

    Example:
        >>> layer = keratron.layers.RandomSaturation((0.5, 0.5))
        >>> layer(np.full((1, 2, 2, 3), 0.5), training=True).shape
        (1, 2, 2, 3)
    """

    def __init__(self, factor, value_range=(0, 255), data_format=None, seed=None, **kwargs):
        self.factor = _factor_pair("RandomSaturation", factor, (-1, 1))
        super().__init__(seed=seed, data_format=data_format, **kwargs)
        self.value_range = _value_range("RandomSaturation", value_range)

    def _draw(self, images):
        factor = _per_image(self, images, self.factor[0], self.factor[1])
        return {"factor": factor / (1.0 - factor + epsilon())}

    def _apply(self, images, params):
        scale = ops.reshape(ops.cast(params["factor"], self.compute_dtype), (-1, 1, 1))
        lo, hi = self.value_range

        def saturate(s):
            return ops.clip(s * scale, lo, hi)

        return self._from_last(_hsv_channel(self, self._to_last(images), 1, saturate))

    def get_config(self):
        return {
            **super().get_config(),
            "factor": self.factor,
            "value_range": self.value_range,
            "seed": self.seed,
        }


def _check_three_channels(layer, input_shape):
    channels = input_shape[-1 if layer.data_format == "channels_last" else -3]
    if channels is not None and channels != 3:
        raise ValueError(
            f"{type(layer).__name__}: input images must have 3 channels. Received: "
            f"input_shape={tuple(input_shape)}"
        )


class RandomColorDegeneration(_TransformLayer):
    """Blends each image towards its grayscale version by a random factor, as in Keras.

    Args:
        factor: a number f in [-1, 1] (meaning [-f, f]) or a pair; 0 keeps the image, 1 gives
            its grayscale version.
        value_range: the (low, high) range of the images (default (0, 255)).
        data_format: "channels_last" or "channels_first" (default from the config).
        seed: optional int seed.

    Example:
        >>> layer = keratron.layers.RandomColorDegeneration((1.0, 1.0))
        >>> layer(np.ones((1, 2, 2, 3)), training=True).shape
        (1, 2, 2, 3)
    """

    def __init__(self, factor, value_range=(0, 255), data_format=None, seed=None, **kwargs):
        self.factor = _factor_pair("RandomColorDegeneration", factor, (-1, 1))
        super().__init__(seed=seed, data_format=data_format, **kwargs)
        self.value_range = _value_range("RandomColorDegeneration", value_range)

    def _draw(self, images):
        shape = (images.shape[0], 1, 1, 1)
        return {
            "factor": kt_random.uniform(shape, self.factor[0], self.factor[1], seed=self.generator)
        }

    def _apply(self, images, params):
        factor = ops.cast(params["factor"], self.compute_dtype)
        gray = ops.image.rgb_to_grayscale(images, data_format=self.data_format)
        return ops.clip(images + factor * (gray - images), *self.value_range)

    def compute_output_shape(self, input_shape):
        _check_three_channels(self, input_shape)
        return tuple(input_shape)

    def get_config(self):
        return {
            **super().get_config(),
            "factor": self.factor,
            "value_range": self.value_range,
            "seed": self.seed,
        }


class RandomColorJitter(_TransformLayer):
    """Random brightness, contrast, saturation and hue, in that order, as in Keras.

    Each factor that is not None enables the matching layer (`RandomBrightness`,
    `RandomContrast`, `RandomSaturation`, `RandomHue`) with that factor, `value_range` and
    `seed`.

    Args:
        value_range: the (low, high) range of the images (default (0, 255)).
        brightness_factor, contrast_factor, saturation_factor, hue_factor: the factors of the
            four layers (default None: that step is skipped).
        seed: optional int seed.
        data_format: "channels_last" or "channels_first" (default from the config).

    Example:
        >>> layer = keratron.layers.RandomColorJitter(brightness_factor=0.2, seed=0)
        >>> layer(np.random.uniform(0, 255, (2, 4, 4, 3)), training=True).shape
        (2, 4, 4, 3)
    """

    def __init__(
        self,
        value_range=(0, 255),
        brightness_factor=None,
        contrast_factor=None,
        saturation_factor=None,
        hue_factor=None,
        seed=None,
        data_format=None,
        **kwargs,
    ):
        super().__init__(seed=seed, data_format=data_format, **kwargs)
        self.value_range = value_range
        self.brightness_factor = brightness_factor
        self.contrast_factor = contrast_factor
        self.saturation_factor = saturation_factor
        self.hue_factor = hue_factor
        # The steps see the jitter's data_format (Keras 3.15 leaves them at the default).
        fmt = {"data_format": self.data_format}
        common = {"value_range": value_range, "seed": seed}
        self._steps = []
        if brightness_factor is not None:
            self.random_brightness = RandomBrightness(brightness_factor, **common, **fmt)
            self._steps.append(self.random_brightness)
        if contrast_factor is not None:
            self.random_contrast = RandomContrast(contrast_factor, **common, **fmt)
            self._steps.append(self.random_contrast)
        if saturation_factor is not None:
            self.random_saturation = RandomSaturation(saturation_factor, **common, **fmt)
            self._steps.append(self.random_saturation)
        if hue_factor is not None:
            self.random_hue = RandomHue(hue_factor, **common, **fmt)
            self._steps.append(self.random_hue)

    def _augment(self, images):
        for step in self._steps:
            images = ops.cast(step._augment(images), self.compute_dtype)
        return images

    def get_config(self):
        return {
            **super().get_config(),
            "value_range": self.value_range,
            "brightness_factor": self.brightness_factor,
            "contrast_factor": self.contrast_factor,
            "saturation_factor": self.saturation_factor,
            "hue_factor": self.hue_factor,
            "seed": self.seed,
        }


class RandomPosterization(_TransformLayer):
    """Keeps only the top `bits` bits of each 8-bit pixel value, as in Keras.

    `bits` is drawn per image from `[factor[0], factor[1])` (a number f means (1, f); equal
    bounds fix it); pixel values are taken to 0-255, truncated to integers, and their low
    `8 - bits` bits cleared.

    Args:
        factor: a number in [1, 8] or a pair.
        value_range: the (low, high) range of the images (default (0, 255)).
        data_format: "channels_last" or "channels_first" (default from the config).
        seed: optional int seed.

    Example:
        >>> layer = keratron.layers.RandomPosterization(1)
        >>> layer(np.array([[[100.0], [200.0]]]), training=True).numpy().ravel()
        array([  0., 128.], dtype=float32)
    """

    def __init__(self, factor, value_range=(0, 255), data_format=None, seed=None, **kwargs):
        self.factor = _factor_pair("RandomPosterization", factor, (1, 8))
        super().__init__(seed=seed, data_format=data_format, **kwargs)
        self.value_range = _value_range("RandomPosterization", value_range)

    def _draw(self, images):
        b = images.shape[0]
        lo, hi = self.factor
        if lo != hi:
            bits = kt_random.randint((b,), int(lo), int(hi), dtype="int32", seed=self.generator)
        else:
            bits = ops.full((b,), int(lo), dtype="int32")
        return {"shift_factor": 8 - bits}

    def _apply(self, images, params):
        shift = ops.cast(ops.reshape(params["shift_factor"], (-1, 1, 1, 1)), "uint8")
        x = ops.cast(_to_range(images, self.value_range, (0, 255)), "uint8")
        x = ops.left_shift(ops.right_shift(x, shift), shift)
        return _to_range(ops.cast(x, self.compute_dtype), (0, 255), self.value_range)

    def get_config(self):
        return {
            **super().get_config(),
            "factor": self.factor,
            "value_range": self.value_range,
            "seed": self.seed,
        }


class RandomSharpness(_TransformLayer):
    """Sharpens or blurs each image by a random amount, as in Keras.

    Per image f is drawn from `factor` and the image moved from its 3x3 smoothed version
    (zero-padded) by `2 f`: f = 0.5 keeps it, f > 0.5 sharpens, f < 0.5 blurs. The result is
    clipped to `value_range`.

    Args:
        factor: a number in [0, 1] (meaning [0, f]) or a pair.
        value_range: the (low, high) range of the images (default (0, 255)).
        data_format: "channels_last" or "channels_first" (default from the config).
        seed: optional int seed.

    Example:
        >>> layer = keratron.layers.RandomSharpness((0.9, 0.9))
        >>> layer(np.random.uniform(0, 255, (1, 5, 5, 3)), training=True).shape
        (1, 5, 5, 3)
    """

    _KERNEL = np.array([[1, 1, 1], [1, 5, 1], [1, 1, 1]], dtype="float64") / 13.0

    def __init__(self, factor, value_range=(0, 255), data_format=None, seed=None, **kwargs):
        self.factor = _factor_pair("RandomSharpness", factor, (0, 1))
        super().__init__(seed=seed, data_format=data_format, **kwargs)
        self.value_range = _value_range("RandomSharpness", value_range)

    def _draw(self, images):
        return {"factor": _per_image(self, images, self.factor[0], self.factor[1])}

    def _apply(self, images, params):
        x = self._to_last(images)
        c = x.shape[-1]
        sharp = ops.reshape(ops.cast(params["factor"] * 2.0, self.compute_dtype), (-1, 1, 1, 1))
        kernel = np.tile(self._KERNEL.reshape(3, 3, 1, 1), (1, 1, c, 1))
        kernel = ops.convert_to_tensor(kernel.astype(self.compute_dtype))
        smooth = ops.depthwise_conv(x, kernel, strides=1, padding="same")
        out = ops.clip(x + (1.0 - sharp) * (smooth - x), *self.value_range)
        return self._from_last(out)

    def get_config(self):
        return {
            **super().get_config(),
            "factor": self.factor,
            "value_range": self.value_range,
            "seed": self.seed,
        }


class RandomGaussianBlur(_TransformLayer):
    """Blurs each image with probability drawn from `factor` by a Gaussian, as in Keras.

    One pair of standard deviations (width, height) is drawn per call from `sigma` and shared
    by the batch; per image a blur probability is drawn from `factor` (a number f means
    [0, f]) and the image is blurred when a uniform draw falls below it. The kernel is
    zero-padded and the result clipped to `value_range`.

    Args:
        factor: a number in [0, 1] or a pair (default 1.0).
        kernel_size: an odd int or a pair of odd ints (default 3).
        sigma: a number in [0, 1] (meaning [0, sigma]) or a pair (default 1.0).
        value_range: the (low, high) range of the images (default (0, 255)).
        data_format: "channels_last" or "channels_first" (default from the config).
        seed: optional int seed.

    Example:
        >>> layer = keratron.layers.RandomGaussianBlur(factor=(1, 1), sigma=(0.8, 0.8))
        >>> layer(np.random.uniform(0, 255, (1, 5, 5, 3)), training=True).shape
        (1, 5, 5, 3)
    """

    def __init__(
        self,
        factor=1.0,
        kernel_size=3,
        sigma=1.0,
        value_range=(0, 255),
        data_format=None,
        seed=None,
        **kwargs,
    ):
        self.factor = _factor_pair("RandomGaussianBlur", factor, (0, 1))
        self.kernel_size = self._kernel_size(kernel_size)
        self.sigma = _factor_pair("RandomGaussianBlur", sigma, (0, 1), name="sigma")
        super().__init__(seed=seed, data_format=data_format, **kwargs)
        self.value_range = _value_range("RandomGaussianBlur", value_range, sort=False)

    @staticmethod
    def _kernel_size(size):
        sizes = size if isinstance(size, (tuple, list)) else [size]
        if len(sizes) not in (1, 2) or not all(
            isinstance(s, int) and not isinstance(s, bool) and s > 0 and s % 2 == 1 for s in sizes
        ):
            raise ValueError(
                "RandomGaussianBlur: `kernel_size` must be an odd positive integer or a pair "
                f"of them. Received: kernel_size={size}"
            )
        return (sizes[0], sizes[-1])

    def _draw(self, images):
        probability = _per_image(self, images, self.factor[0], self.factor[1])
        apply = _per_image(self, images, 0.0, 1.0) < probability
        sigma = kt_random.uniform(
            (2,), self.sigma[0], self.sigma[1], self.compute_dtype, self.generator
        )
        return {"should_apply_blur": apply, "blur_factor": sigma + 1e-6}

    @staticmethod
    def _gaussian(size, sigma):
        t = ops.convert_to_tensor(np.arange(size, dtype="float32") - (size - 1) / 2.0)
        g = ops.exp(-0.5 * ops.square(t / ops.cast(sigma, "float32")))
        return g / ops.sum(g)

    def _apply(self, images, params):
        x = ops.cast(self._to_last(images), "float32")
        c = x.shape[-1]
        kh, kw = self.kernel_size
        sigma = params["blur_factor"]
        # Keras's torch kernel: outer(rows with sigma[1], columns with sigma[0]), zero-padded.
        rows = ops.reshape(self._gaussian(kh, sigma[1]), (kh, 1, 1, 1))
        cols = ops.reshape(self._gaussian(kw, sigma[0]), (1, kw, 1, 1))
        kernel = ops.tile(rows * cols, (1, 1, c, 1))
        blur = ops.depthwise_conv(x, kernel, strides=1, padding="same")
        blur = self._from_last(ops.cast(blur, self.compute_dtype))
        out = _apply_where(params["should_apply_blur"], blur, images)
        return ops.clip(out, *self.value_range)

    def get_config(self):
        return {
            **super().get_config(),
            "factor": self.factor,
            "kernel_size": self.kernel_size,
            "sigma": self.sigma,
            "value_range": self.value_range,
            "seed": self.seed,
        }
