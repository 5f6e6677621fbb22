"""Image helpers, as `keras.preprocessing.image` (the same functions as `keratron.utils`), and
tf.keras's `ImageDataGenerator` family (`image_generators`)."""

from keratron.preprocessing import image_generators
from keratron.preprocessing.image_generators import *  # noqa: F403
from keratron.utils.image_utils import array_to_img, img_to_array, load_img, save_img, smart_resize

__all__ = [
    *image_generators.__all__,
    "array_to_img",
    "img_to_array",
    "load_img",
    "save_img",
    "smart_resize",
]
