"""Keras's utilities: seeding, label encoding, sequence padding, `PyDataset`, `clear_session`."""

from keratron.utils.file_utils import get_file
from keratron.utils.image_utils import (
    array_to_img,
    img_to_array,
    load_img,
    save_img,
)
from keratron.utils.naming import clear_session
from keratron.utils.numerical_utils import normalize, to_categorical
from keratron.utils.py_dataset import PyDataset, Sequence
from keratron.utils.rng_utils import get_random_seed, set_random_seed
from keratron.utils.sequence_utils import pad_sequences

__all__ = [
    "PyDataset",
    "Sequence",
    "array_to_img",
    "clear_session",
    "get_file",
    "get_random_seed",
    "img_to_array",
    "load_img",
    "normalize",
    "pad_sequences",
    "save_img",
    "set_random_seed",
    "to_categorical",
]
