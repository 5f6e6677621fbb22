"""`keratron.data`: a tf.data-style input pipeline (`Dataset`, readers, `TensorSpec`).

Example:
    >>> ds = keratron.data.Dataset.from_tensor_slices((x_train, y_train))
    >>> ds = ds.shuffle(1024).batch(32).prefetch(keratron.data.AUTOTUNE)
    >>> model.fit(ds, epochs=3)
"""

from keratron.data import experimental
from keratron.data.dataset import (
    AUTOTUNE,
    INFINITE_CARDINALITY,
    UNKNOWN_CARDINALITY,
    Dataset,
    Iterator,
)
from keratron.data.readers import TextLineDataset
from keratron.data.structure import TensorSpec
from keratron.data.tfrecord import TFRecordDataset

__all__ = [
    "AUTOTUNE",
    "INFINITE_CARDINALITY",
    "UNKNOWN_CARDINALITY",
    "Dataset",
    "Iterator",
    "TensorSpec",
    "TextLineDataset",
    "TFRecordDataset",
    "experimental",
]
