"""Keras's utilities: seeding, label encoding, sequence padding, `PyDataset`, `clear_session`."""

from keratron.autodiff.dtypes import standardize_dtype
from keratron.config import (
    disable_interactive_logging,
    enable_interactive_logging,
    is_interactive_logging_enabled,
)
from keratron.utils import bounding_boxes  # noqa: F401  (keras.utils.bounding_boxes)
from keratron.utils.config import Config
from keratron.utils.data_utils import pack_x_y_sample_weight, unpack_x_y_sample_weight
from keratron.utils.file_utils import get_file
from keratron.utils.graph_utils import get_source_inputs
from keratron.utils.image_utils import (
    array_to_img,
    img_to_array,
    load_img,
    save_img,
)
from keratron.utils.naming import clear_session
from keratron.utils.numerical_utils import normalize, to_categorical
from keratron.utils.progbar import Progbar
from keratron.utils.py_dataset import PyDataset, Sequence
from keratron.utils.rng_utils import get_random_seed, set_random_seed
from keratron.utils.sequence_utils import pad_sequences

__all__ = [
    "Config",
    "Progbar",
    "PyDataset",
    "Sequence",
    "array_to_img",
    "clear_session",
    "disable_interactive_logging",
    "enable_interactive_logging",
    "get_file",
    "get_random_seed",
    "get_source_inputs",
    "img_to_array",
    "is_interactive_logging_enabled",
    "load_img",
    "normalize",
    "pack_x_y_sample_weight",
    "pad_sequences",
    "save_img",
    "set_random_seed",
    "standardize_dtype",
    "to_categorical",
    "unpack_x_y_sample_weight",
]
