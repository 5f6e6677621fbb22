"""Image helpers, as `keras.preprocessing.image` (the same functions as `keratron.utils`)."""

from keratron.utils.image_utils import array_to_img, img_to_array, load_img, save_img, smart_resize

__all__ = ["array_to_img", "img_to_array", "load_img", "save_img", "smart_resize"]
