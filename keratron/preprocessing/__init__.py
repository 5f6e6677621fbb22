"""Keras's `keras.preprocessing` namespace: `image`, `sequence` and the dataset builders.

Example:
    >>> keratron.preprocessing.sequence.pad_sequences([[1, 2], [3]], maxlen=3)
    array([[0, 1, 2],
           [0, 0, 3]], dtype=int32)
"""

from keratron.preprocessing import image, sequence
from keratron.preprocessing.dataset_utils import (
    image_dataset_from_directory,
    timeseries_dataset_from_array,
)

__all__ = [
    "image",
    "image_dataset_from_directory",
    "sequence",
    "timeseries_dataset_from_array",
]
