"""Image-resizing preprocessing layers, as in Keras 3: `Resizing` and `CenterCrop`.

Both take a batch (rank 4) or a single image (rank 3) in the configured image layout and
return floats of the layer's compute dtype.
"""

from __future__ import annotations

from keratron import ops
from keratron.config import image_data_format
from keratron.layers.layer import Layer
from keratron.utils.image_utils import smart_resize

__all__ = ["Resizing", "CenterCrop"]


def _check_size(layer, height, width):
    for arg, v in (("height", height), ("width", width)):
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise ValueError(
                f"{layer} layer: `{arg}` must be a positive integer. Received: {arg}={v!r}"
            )


def _spatial_axes(data_format, rank):
    return (rank - 2, rank - 1) if data_format == "channels_first" else (rank - 3, rank - 2)


class Resizing(Layer):
    """Resizes images to `(height, width)`.

    Args:
        height, width: the output size.
        interpolation: "bilinear" (default), "nearest", "bicubic", "lanczos3", "lanczos5",
            "area".
        crop_to_aspect_ratio: crop the centre to the target aspect ratio first (no
            distortion).
        pad_to_aspect_ratio: pad (with `fill_value`) to the target aspect ratio first.
        fill_mode, fill_value: how padding is filled ("constant" only).
        antialias: low-pass filter when downsampling.
        data_format: "channels_last" or "channels_first" (default from the config).

    Example:
        >>> keratron.layers.Resizing(2, 3)(np.ones((1, 4, 6, 3))).shape
        (1, 2, 3, 3)
    """

    def __init__(
        self,
        height,
        width,
        interpolation="bilinear",
        crop_to_aspect_ratio=False,
        pad_to_aspect_ratio=False,
        fill_mode="constant",
        fill_value=0.0,
        antialias=False,
        data_format=None,
        **kwargs,
    ):
        _check_size("Resizing", height, width)
        if crop_to_aspect_ratio and pad_to_aspect_ratio:
            raise ValueError(
                "Resizing layer: only one of `crop_to_aspect_ratio` and `pad_to_aspect_ratio` "
                "can be True."
            )
        super().__init__(**kwargs)
        self.height = height
        self.width = width
        self.interpolation = interpolation
        self.crop_to_aspect_ratio = crop_to_aspect_ratio
        self.pad_to_aspect_ratio = pad_to_aspect_ratio
        self.fill_mode = fill_mode
        self.fill_value = fill_value
        self.antialias = antialias
        self.data_format = data_format or image_data_format()

    def call(self, inputs):
        return ops.image.resize(
            ops.cast(inputs, self.compute_dtype),
            size=(self.height, self.width),
            interpolation=self.interpolation,
            antialias=self.antialias,
            crop_to_aspect_ratio=self.crop_to_aspect_ratio,
            pad_to_aspect_ratio=self.pad_to_aspect_ratio,
            fill_mode=self.fill_mode,
            fill_value=self.fill_value,
            data_format=self.data_format,
        )

    def compute_output_shape(self, input_shape):
        shape = list(input_shape)
        h, w = _spatial_axes(self.data_format, len(shape))
        shape[h], shape[w] = self.height, self.width
        return tuple(shape)

    def get_config(self):
        return {
            **super().get_config(),
            "height": self.height,
            "width": self.width,
            "interpolation": self.interpolation,
            "crop_to_aspect_ratio": self.crop_to_aspect_ratio,
            "pad_to_aspect_ratio": self.pad_to_aspect_ratio,
            "fill_mode": self.fill_mode,
            "fill_value": self.fill_value,
            "antialias": self.antialias,
            "data_format": self.data_format,
        }


class CenterCrop(Layer):
    """Crops the centre `(height, width)` of images; an image smaller than that is resized
    (largest centred crop of the target aspect ratio, then bilinear), as in Keras.

    Example:
        >>> keratron.layers.CenterCrop(2, 2)(np.arange(16.0).reshape(1, 4, 4, 1))[0, :, :, 0]
        ... # doctest: +SKIP
    """

    def __init__(self, height, width, data_format=None, **kwargs):
        _check_size("CenterCrop", height, width)
        super().__init__(**kwargs)
        self.height = height
        self.width = width
        self.data_format = data_format or image_data_format()

    def call(self, inputs):
        inputs = ops.cast(inputs, self.compute_dtype)
        h_axis, w_axis = _spatial_axes(self.data_format, inputs.ndim)
        h_diff = inputs.shape[h_axis] - self.height
        w_diff = inputs.shape[w_axis] - self.width
        if h_diff < 0 or w_diff < 0:
            return smart_resize(inputs, (self.height, self.width), data_format=self.data_format)
        index = [slice(None)] * inputs.ndim
        index[h_axis] = slice(h_diff // 2, h_diff // 2 + self.height)
        index[w_axis] = slice(w_diff // 2, w_diff // 2 + self.width)
        return inputs[tuple(index)]

    def compute_output_shape(self, input_shape):
        shape = list(input_shape)
        h, w = _spatial_axes(self.data_format, len(shape))
        shape[h], shape[w] = self.height, self.width
        return tuple(shape)

    def get_config(self):
        return {
            **super().get_config(),
            "height": self.height,
            "width": self.width,
            "data_format": self.data_format,
        }
