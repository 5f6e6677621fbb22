"""tf.keras 2's `keras.layers.experimental.preprocessing`: the preprocessing layers under
their tf.keras 2.3-2.5 path (the classes of `keratron.layers`)."""

from keratron.layers.hashed_crossing import HashedCrossing
from keratron.layers.hashing import Hashing
from keratron.layers.image_augmentation import (
    RandomContrast,
    RandomCrop,
    RandomFlip,
    RandomRotation,
    RandomTranslation,
    RandomZoom,
)
from keratron.layers.image_preprocessing import CenterCrop, Resizing
from keratron.layers.lookup import IntegerLookup, StringLookup
from keratron.layers.preprocessing import Normalization, Rescaling
from keratron.layers.preprocessing_categorical import CategoryEncoding, Discretization
from keratron.layers.text_vectorization import TextVectorization

__all__ = [
    "CategoryEncoding",
    "CenterCrop",
    "Discretization",
    "HashedCrossing",
    "Hashing",
    "IntegerLookup",
    "Normalization",
    "RandomContrast",
    "RandomCrop",
    "RandomFlip",
    "RandomRotation",
    "RandomTranslation",
    "RandomZoom",
    "Rescaling",
    "Resizing",
    "StringLookup",
    "TextVectorization",
]
