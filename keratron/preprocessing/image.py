"""Image helpers, as `keras.preprocessing.image` (the same functions as `keratron.utils`)."""

from keratron.preprocessing.image_generators import (
    DirectoryIterator,
    ImageDataGenerator,
    Iterator,
    NumpyArrayIterator,
    apply_affine_transform,
    apply_brightness_shift,
    apply_channel_shift,
    random_brightness,
    random_channel_shift,
    random_rotation,
    random_shear,
    random_shift,
    random_zoom,
)
from keratron.utils.image_utils import array_to_img, img_to_array, load_img, save_img, smart_resize

__all__ = [
    "DirectoryIterator",
    "ImageDataGenerator",
    "Iterator",
    "NumpyArrayIterator",
    "apply_affine_transform",
    "apply_brightness_shift",
    "apply_channel_shift",
    "array_to_img",
    "img_to_array",
    "load_img",
    "random_brightness",
    "random_channel_shift",
    "random_rotation",
    "random_shear",
    "random_shift",
    "random_zoom",
    "save_img",
    "smart_resize",
]
