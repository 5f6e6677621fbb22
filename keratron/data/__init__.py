"""`keratron.data`: a tf.data-style input pipeline (`Dataset`, readers, `TensorSpec`).

Example:
    >>> x_train, y_train = np.ones((64, 2)), np.zeros((64, 1))
    >>> ds = keratron.data.Dataset.from_tensor_slices((x_train, y_train))
    >>> ds = ds.shuffle(1024).batch(32).prefetch(keratron.data.AUTOTUNE)
    >>> model = keratron.Sequential([keratron.Input((2,)), keratron.layers.Dense(1)])
    >>> model.compile(optimizer="sgd", loss="mse")
    >>> history = model.fit(ds, epochs=3, verbose=0)
    >>> len(history.history["loss"])
    3
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
