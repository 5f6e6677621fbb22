"""Random geometric warps, as in Keras 3.15: `RandomShear`, `RandomPerspective`,
`RandomElasticTransform`.

Each takes a batch (rank 4) or a single image (rank 3) in the configured image layout, draws
one warp per image from its `SeedGenerator` (`_draw`, with Keras's
`get_random_transformation` keys) and samples through `ops.image` (`_apply`). They are the
identity when `training=False`.
"""

from __future__ import annotations

import numpy as np

from keratron import ops
from keratron import random as kt_random
from keratron.layers.image_augmentation import _check_modes, _factor_pair
from keratron.layers.image_color import _apply_where, _per_image, _TransformLayer, _value_range

__all__ = ["RandomShear", "RandomPerspective", "RandomElasticTransform"]


def _shear_pair(factor, name):
    msg = (
        "RandomShear: the `{name}` argument should be a number (or a list of two numbers) in "
        f"the range [0, 1.0]. Received: {name}={factor}"
    ).replace("{name}", name)
    values = factor if isinstance(factor, (tuple, list)) else [factor]
    if len(values) not in (1, 2) or not isinstance(factor, (tuple, list, int, float)):
        raise ValueError(msg)
    # A pair may hold negative bounds: the config stores a number f as (-f, f), and Keras
    # 3.15 (which checks each bound against [0, 1]) cannot rebuild the layer from it.
    low = -1.0 if isinstance(factor, (tuple, list)) else 0.0
    for v in values:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not low <= v <= 1.0:
            raise ValueError(msg)
    if isinstance(factor, (tuple, list)):
        if len(factor) != 2:
            raise ValueError(msg)
        lower, upper = sorted(factor)
        return lower, upper
    return -abs(factor), abs(factor)


class RandomShear(_TransformLayer):
    """Shears each image along x and y by random amounts, as in Keras.

    Per image a shear s_x is drawn from `x_factor` and s_y from `y_factor` (a number f means
    [-f, f]), and both take one random sign; output pixel (x, y) reads the input at
    (x + s_x y, s_y x + y), Keras's matrix `[1, s_x, 0; s_y, 1, 0]`.

    Args:
        x_factor: a number in [0, 1] or a pair of bounds in [-1, 1] (default 0.0).
        y_factor: a number in [0, 1] or a pair of bounds in [-1, 1] (default 0.0).
        interpolation: "bilinear" (default) or "nearest".
        fill_mode: "reflect" (default), "wrap", "constant" or "nearest".
        fill_value: the value outside the image when `fill_mode="constant"`.
        data_format: "channels_last" or "channels_first" (default from the config).
        seed: optional int seed.

    Example:
        >>> layer = keratron.layers.RandomShear(x_factor=0.3, seed=0)
        >>> layer(np.ones((2, 6, 6, 3)), training=True).shape
        (2, 6, 6, 3)
    """

    def __init__(
        self,
        x_factor=0.0,
        y_factor=0.0,
        interpolation="bilinear",
        fill_mode="reflect",
        fill_value=0.0,
        data_format=None,
        seed=None,
        **kwargs,
    ):
        self.x_factor = _shear_pair(x_factor, "x_factor")
        self.y_factor = _shear_pair(y_factor, "y_factor")
        _check_modes("RandomShear", fill_mode, interpolation)
        super().__init__(seed=seed, data_format=data_format, **kwargs)
        self.fill_mode = fill_mode
        self.fill_value = fill_value
        self.interpolation = interpolation

    def _draw(self, images):
        shape = (images.shape[0], 1)
        dtype = self.compute_dtype
        invert = kt_random.uniform(shape, 0.0, 1.0, dtype, self.generator)
        invert = ops.where(invert > 0.5, -1.0, 1.0)
        shear_y = kt_random.uniform(shape, *self.y_factor, dtype, self.generator)
        shear_x = kt_random.uniform(shape, *self.x_factor, dtype, self.generator)
        return {"shear_factor": ops.concatenate([shear_x, shear_y], axis=1) * invert}

    def _apply(self, images, params):
        shear = ops.cast(params["shear_factor"], "float32")
        b = shear.shape[0]
        ones, zeros = ops.ones((b,), "float32"), ops.zeros((b,), "float32")
        matrix = ops.stack(
            [ones, shear[:, 0], zeros, shear[:, 1], ones, zeros, zeros, zeros], axis=1
        )
        return ops.image.affine_transform(
            images,
            matrix,
            interpolation=self.interpolation,
            fill_mode=self.fill_mode,
            fill_value=self.fill_value,
            data_format=self.data_format,
        )

    def get_config(self):
        return {
            **super().get_config(),
            "x_factor": self.x_factor,
            "y_factor": self.y_factor,
            "fill_mode": self.fill_mode,
            "interpolation": self.interpolation,
            "seed": self.seed,
            "fill_value": self.fill_value,
        }


class RandomPerspective(_TransformLayer):
    """Applies a random perspective warp to each image with a random probability, as Keras.

    Per image the four corners move by up to `scale / 2` of their coordinates (each corner
    coordinate c goes to c + c u, u uniform in [-scale / 2, scale / 2]), and the warp is
    applied when a uniform draw falls below a probability drawn from `factor`. Points that
    leave the image are filled with `fill_value`.

    Args:
        factor: a number in [0, 1] (meaning [0, f]) or a pair (default 1.0).
        scale: the distortion scale in [0, 1] (default 1.0).
        interpolation: "bilinear" (default) or "nearest".
        fill_value: the value outside the image (default 0.0).
        seed: optional int seed.
        data_format: "channels_last" or "channels_first" (default from the config).

    Example:
        >>> layer = keratron.layers.RandomPerspective(scale=0.2, seed=0)
        >>> layer(np.ones((2, 6, 6, 3)), training=True).shape
        (2, 6, 6, 3)
    """

    def __init__(
        self,
        factor=1.0,
        scale=1.0,
        interpolation="bilinear",
        fill_value=0.0,
        seed=None,
        data_format=None,
        **kwargs,
    ):
        self.factor = _factor_pair("RandomPerspective", factor, (0, 1))
        if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not 0 <= scale <= 1:
            raise ValueError(
                "RandomPerspective: the `scale` argument should be a number in the range "
                f"[0, 1]. Received: scale={scale}"
            )
        _check_modes("RandomPerspective", "constant", interpolation)
        super().__init__(seed=seed, data_format=data_format, **kwargs)
        self.scale = scale
        self.fill_value = fill_value
        self.interpolation = interpolation

    def _draw(self, images):
        b = images.shape[0]
        h_axis, w_axis = self._hw_axes()
        h, w = images.shape[h_axis], images.shape[w_axis]
        probability = _per_image(self, images, self.factor[0], self.factor[1])
        apply = _per_image(self, images, 0.0, 1.0) < probability
        distortion = kt_random.uniform(
            (b, 4, 2), -0.5 * self.scale, 0.5 * self.scale, self.compute_dtype, self.generator
        )
        corners = [[0.0, 0.0], [w - 1.0, 0.0], [0.0, h - 1.0], [w - 1.0, h - 1.0]]
        start = ops.repeat(ops.convert_to_tensor([corners], dtype=self.compute_dtype), b, axis=0)
        return {
            "apply_perspective": apply,
            "start_points": start,
            "end_points": start + start * distortion,
        }

    def _apply(self, images, params):
        out = ops.image.perspective_transform(
            images,
            params["start_points"],
            params["end_points"],
            interpolation=self.interpolation,
            fill_value=self.fill_value,
            data_format=self.data_format,
        )
        return _apply_where(params["apply_perspective"], ops.cast(out, images.dtype), images)

    def get_config(self):
        return {
            **super().get_config(),
            "factor": self.factor,
            "scale": self.scale,
            "interpolation": self.interpolation,
            "fill_value": self.fill_value,
            "seed": self.seed,
        }


class RandomElasticTransform(_TransformLayer):
    """Warps each image by a smooth random displacement field with a random probability.

    Per call a distortion d is drawn from `scale` (a number s means [0, s]); as in
    `ops.image.elastic_transform`, each image's field is normal noise of standard deviation
    sigma = `0.05 d min(h, w)`, blurred (zero-padded) by a Gaussian of that sigma and scaled by
    `0.1 d max(h, w)` pixels, and output pixel (row, col) reads the input at (row + dy,
    col + dx). The blur kernel is sized for the largest distortion `scale` allows, so a
    compiled step draws a new d on every call. Per image the warp is applied when a uniform
    draw falls below a probability drawn from `factor`; the result is clipped to
    `value_range`. The noise comes from keratron's generator, so fields differ from Keras's.

    Args:
        factor: a number in [0, 1] (meaning [0, f]) or a pair (default 1.0).
        scale: a number in [0, 1] or a pair (default 1.0).
        interpolation: "bilinear" (default) or "nearest".
        fill_mode: "reflect" (default), "mirror", "wrap", "constant" or "nearest".
        fill_value: the value outside the image when `fill_mode="constant"`.
        value_range: the (low, high) range of the images (default (0, 255)).
        seed: optional int seed.
        data_format: "channels_last" or "channels_first" (default from the config).

    Example:
        >>> layer = keratron.layers.RandomElasticTransform(seed=0)
        >>> layer(np.ones((2, 16, 16, 3)), training=True).shape
        (2, 16, 16, 3)
    """

    _FILL_MODES = ("constant", "nearest", "wrap", "mirror", "reflect")

    def __init__(
        self,
        factor=1.0,
        scale=1.0,
        interpolation="bilinear",
        fill_mode="reflect",
        fill_value=0.0,
        value_range=(0, 255),
        seed=None,
        data_format=None,
        **kwargs,
    ):
        self.factor = _factor_pair("RandomElasticTransform", factor, (0, 1))
        self.scale = _factor_pair("RandomElasticTransform", scale, (0, 1), name="scale")
        if fill_mode not in self._FILL_MODES:
            raise NotImplementedError(
                f"RandomElasticTransform: unknown `fill_mode` {fill_mode!r}. Expected one of "
                f"{self._FILL_MODES}."
            )
        _check_modes("RandomElasticTransform", "constant", interpolation)
        super().__init__(seed=seed, data_format=data_format, **kwargs)
        self.interpolation = interpolation
        self.fill_mode = fill_mode
        self.fill_value = fill_value
        self.value_range = _value_range("RandomElasticTransform", value_range, sort=False)

    def _augment(self, images):
        if self.scale[1] == 0 or self.factor[1] == 0:
            return images
        return super()._augment(images)

    def _draw(self, images):
        probability = _per_image(self, images, self.factor[0], self.factor[1])
        apply = _per_image(self, images, 0.0, 1.0) < probability
        distortion = kt_random.uniform(
            (), self.scale[0], self.scale[1], self.compute_dtype, self.generator
        )
        return {"apply_transform": apply, "distortion_factor": distortion}

    @staticmethod
    def _gaussian(size, sigma):
        t = ops.convert_to_tensor(np.arange(size, dtype="float32") - (size - 1) / 2.0)
        g = ops.exp(-0.5 * ops.square(t / sigma))
        return g / ops.sum(g)

    def _apply(self, images, params):
        x = self._to_last(images)
        b, h, w, c = x.shape
        d = ops.cast(params["distortion_factor"], "float32")
        alpha = max(h, w) * 0.1 * d
        # A zero draw would divide by zero in the Gaussian; a tiny sigma is the identity.
        sigma = ops.maximum(min(h, w) * 0.05 * d, 1e-6)
        # The distortion stays a tensor (a compiled step draws it anew), so the blur kernel
        # is sized as ops.image.elastic_transform sizes it for the largest one `scale` allows.
        k = int(6 * min(h, w) * 0.05 * self.scale[1]) | 1
        noise = kt_random.normal((2 * b, h, w, 1), dtype="float32", seed=self.generator) * sigma
        rows_k = ops.reshape(self._gaussian(k, sigma), (k, 1, 1, 1))
        cols_k = ops.reshape(self._gaussian(k, sigma), (1, k, 1, 1))
        field = ops.depthwise_conv(noise, rows_k, strides=1, padding="same")
        field = ops.depthwise_conv(field, cols_k, strides=1, padding="same")
        field = ops.reshape(field, (2, b, h, w, 1)) * alpha
        grid = np.meshgrid(np.arange(b), np.arange(h), np.arange(w), np.arange(c), indexing="ij")
        grid = [ops.convert_to_tensor(g.astype("float32")) for g in grid]
        coords = [grid[0], grid[1] + field[1], grid[2] + field[0], grid[3]]
        order = 1 if self.interpolation == "bilinear" else 0
        warped = ops.image.map_coordinates(
            ops.cast(x, "float32"), coords, order, self.fill_mode, self.fill_value
        )
        warped = self._from_last(ops.cast(warped, self.compute_dtype))
        out = _apply_where(params["apply_transform"], warped, images)
        return ops.clip(out, *self.value_range)

    def get_config(self):
        return {
            **super().get_config(),
            "factor": self.factor,
            "scale": self.scale,
            "interpolation": self.interpolation,
            "fill_mode": self.fill_mode,
            "fill_value": self.fill_value,
            "value_range": self.value_range,
            "seed": self.seed,
        }
