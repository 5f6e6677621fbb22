"""Image file and array helpers, as `keras.utils` / `keras.preprocessing.image` name them.

PIL (Pillow) reads and writes the files; it is imported when a file is read or written.

Example:
    >>> import os, shutil, tempfile
    >>> tmp = tempfile.mkdtemp()
    >>> keratron.utils.save_img(os.path.join(tmp, "cat.jpg"), np.zeros((32, 48, 3)))
    >>> img = keratron.utils.load_img(os.path.join(tmp, "cat.jpg"), target_size=(224, 224))
    >>> keratron.utils.img_to_array(img).shape
    (224, 224, 3)
    >>> shutil.rmtree(tmp)
"""

from __future__ import annotations

import io
import os
import pathlib

import numpy as np

from keratron import config, ops
from keratron.autodiff.tensor import Tensor

__all__ = ["array_to_img", "img_to_array", "load_img", "save_img", "smart_resize"]

_PIL_INTERPOLATION = {
    "nearest": "NEAREST",
    "bilinear": "BILINEAR",
    "bicubic": "BICUBIC",
    "hamming": "HAMMING",
    "box": "BOX",
    "lanczos": "LANCZOS",
}


def _pil():
    try:
        from PIL import Image
    except ImportError as e:
        raise ImportError(
            "Reading and writing images needs Pillow, which is not installed: `pip install pillow`."
        ) from e
    return Image


def _data_format(data_format):
    data_format = data_format or config.image_data_format()
    if data_format not in ("channels_last", "channels_first"):
        raise ValueError(
            "`data_format` must be 'channels_last' or 'channels_first'. "
            f"Received: data_format={data_format!r}"
        )
    return data_format


def array_to_img(x, data_format=None, scale=True, dtype=None):
    """A PIL image of a 3-D array (height, width, channels with 1, 3 or 4 channels).

    Args:
        x: array or Tensor of rank 3.
        data_format: "channels_last" (default from the config) or "channels_first".
        scale: stretch the values to [0, 255] (min to 0, max to 255).
        dtype: accepted for Keras compatibility (the array is read as floatx).

    Example:
        >>> keratron.utils.array_to_img(np.zeros((4, 5, 3))).size
        (5, 4)
    """
    data_format = _data_format(data_format)
    x = np.asarray(x.numpy() if isinstance(x, Tensor) else x, dtype=dtype or config.floatx())
    if x.ndim != 3:
        raise ValueError(
            f"array_to_img: expected an image array of rank 3. Received an array of shape {x.shape}"
        )
    if data_format == "channels_first":
        x = x.transpose(1, 2, 0)
    if scale:
        x = x - np.min(x)
        x_max = np.max(x)
        if x_max != 0:
            x = x / x_max
        x = x * 255
    channels = x.shape[2]
    modes = {1: "L", 3: "RGB", 4: "RGBA"}
    if channels not in modes:
        raise ValueError(
            f"array_to_img: unsupported number of channels {channels} (expected 1, 3 or 4)."
        )
    array = x.astype("uint8")
    if channels == 1:
        array = array[:, :, 0]
    return _pil().fromarray(array, modes[channels])


def img_to_array(img, data_format=None, dtype=None) -> np.ndarray:
    """A PIL image as a 3-D float array (height, width, channels).

    Example:
        >>> keratron.utils.img_to_array(keratron.utils.array_to_img(np.ones((2, 3, 1)))).shape
        (2, 3, 1)
    """
    data_format = _data_format(data_format)
    x = np.asarray(img, dtype=dtype or config.floatx())
    if x.ndim == 2:
        x = x.reshape((x.shape[0], x.shape[1], 1))
    elif x.ndim != 3:
        raise ValueError(f"img_to_array: unsupported image shape {x.shape}")
    if data_format == "channels_first":
        x = x.transpose(2, 0, 1)
    return x


def save_img(path, x, data_format=None, file_format=None, scale=True, **kwargs) -> None:
    """Writes an image array to `path` (format from `file_format` or the file extension)."""
    img = array_to_img(x, data_format=data_format, scale=scale)
    if img.mode == "RGBA" and (file_format == "jpg" or file_format == "jpeg"):
        img = img.convert("RGB")
    if file_format is None and isinstance(path, (str, os.PathLike)):
        suffix = pathlib.Path(path).suffix.lower()
        if suffix in (".jpg", ".jpeg") and img.mode == "RGBA":
            img = img.convert("RGB")
    img.save(path, format=file_format, **kwargs)


def load_img(
    path,
    color_mode="rgb",
    target_size=None,
    interpolation="nearest",
    keep_aspect_ratio=False,
):
    """Reads an image file (a path, or a file-like object of bytes) into a PIL image.

    Args:
        path: the file.
        color_mode: "grayscale", "rgb" or "rgba".
        target_size: optional `(height, width)` to resize to.
        interpolation: PIL resampling, "nearest" (default), "bilinear", "bicubic", ...
        keep_aspect_ratio: crop the centre to the target aspect ratio before resizing.

    Example:
        >>> import os, shutil, tempfile
        >>> tmp = tempfile.mkdtemp()
        >>> keratron.utils.save_img(os.path.join(tmp, "cat.png"), np.zeros((4, 4, 3)))
        >>> keratron.utils.load_img(os.path.join(tmp, "cat.png"), color_mode="grayscale").mode
        'L'
        >>> shutil.rmtree(tmp)
    """
    image_module = _pil()
    if isinstance(path, io.BytesIO):
        img = image_module.open(path)
    elif isinstance(path, (pathlib.Path, bytes, str)):
        if isinstance(path, pathlib.Path):
            path = str(path.resolve())
        with open(path, "rb") as f:
            img = image_module.open(io.BytesIO(f.read()))
    else:
        raise TypeError(f"load_img: path should be a path-like object. Received: {path!r}")
    modes = {"grayscale": "L", "rgb": "RGB", "rgba": "RGBA"}
    if color_mode not in modes:
        raise ValueError(
            "load_img: `color_mode` must be 'grayscale', 'rgb' or 'rgba'. "
            f"Received: color_mode={color_mode!r}"
        )
    if color_mode == "grayscale" and img.mode in ("L", "I;16", "I"):
        pass
    elif img.mode != modes[color_mode]:
        img = img.convert(modes[color_mode])
    if target_size is not None:
        width_height = (target_size[1], target_size[0])
        if img.size != width_height:
            if interpolation not in _PIL_INTERPOLATION:
                raise ValueError(
                    f"load_img: unknown interpolation {interpolation!r}; expected one of "
                    f"{sorted(_PIL_INTERPOLATION)}"
                )
            resample = getattr(image_module, _PIL_INTERPOLATION[interpolation])
            if keep_aspect_ratio:
                width, height = img.size
                target_width, target_height = width_height
                crop_height = (width * target_height) // target_width
                crop_width = (height * target_width) // target_height
                crop_height = min(height, crop_height)
                crop_width = min(width, crop_width)
                top = (height - crop_height) // 2
                left = (width - crop_width) // 2
                img = img.crop((left, top, left + crop_width, top + crop_height))
            img = img.resize(width_height, resample)
    return img


def smart_resize(
    x, size, interpolation="bilinear", data_format="channels_last", backend_module=None
):
    """Resizes an image (or a batch) to `size` without distorting it: the largest centred
    crop with the target aspect ratio is taken, then resized.

    Returns a numpy array for a numpy input, a Tensor otherwise.

    Example:
        >>> keratron.preprocessing.image.smart_resize(np.ones((20, 40, 3)), (10, 10)).shape
        (10, 10, 3)
    """
    if len(size) != 2:
        raise ValueError(f"smart_resize: `size` must be (height, width). Received: size={size}")
    rank = len(np.shape(x))
    if rank not in (3, 4):
        raise ValueError(
            f"smart_resize: expected an image of rank 3 or 4. Received shape {np.shape(x)}"
        )
    out = ops.image.resize(
        x,
        size=tuple(size),
        interpolation=interpolation,
        crop_to_aspect_ratio=True,
        data_format=data_format,
    )
    if isinstance(x, np.ndarray):
        return out.numpy()
    return out
