"""Keras's `keras.preprocessing` namespace: `image`, `sequence`, `text` and the dataset builders.

`text` and most of `sequence` are the legacy helpers of tf.keras's namespace.

Example:
    >>> keratron.preprocessing.sequence.pad_sequences([[1, 2], [3]], maxlen=3)
    array([[0, 1, 2],
           [0, 0, 3]], dtype=int32)
"""

from keratron.preprocessing import image, sequence, text
from keratron.preprocessing.dataset_split import split_dataset  # noqa: F401 (for keras.utils)
from keratron.preprocessing.dataset_utils import (
    image_dataset_from_directory,
    timeseries_dataset_from_array,
)
from keratron.preprocessing.feature_space import FeatureSpace  # noqa: F401 (for keras.utils)
from keratron.preprocessing.file_datasets import (
    audio_dataset_from_directory,  # noqa: F401 (keras.utils has it; the top level installs it)
    text_dataset_from_directory,
)

__all__ = [
    "image",
    "image_dataset_from_directory",
    "sequence",
    "text",
    "text_dataset_from_directory",
    "timeseries_dataset_from_array",
]
