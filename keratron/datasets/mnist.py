"""MNIST handwritten digits, downloaded and cached as Keras does (`keras.datasets.mnist`)."""

from __future__ import annotations

import numpy as np

from keratron.utils.file_utils import get_file

__all__ = ["load_data"]

ORIGIN_FOLDER = "https://storage.googleapis.com/tensorflow/tf-keras-datasets/"
FILE_HASH = "731c5ac602752760c8e48fbffcf8c3b850d9dc2a2aedcf2cc48468fc17b673d1"


def load_data(path="mnist.npz"):
    """Loads MNIST: 60,000 training and 10,000 test 28x28 grayscale digit images.

    Args:
        path: the file name in the cache (`~/.keras/datasets`, or `$KERAS_HOME/datasets`).

    Returns:
        `(x_train, y_train), (x_test, y_test)`: uint8 arrays of shapes (60000, 28, 28),
        (60000,), (10000, 28, 28) and (10000,); labels are digits 0-9.

    Example:
        >>> from keratron.datasets import mnist
        >>> (x_train, y_train), (x_test, y_test) = mnist.load_data()  # doctest: +SKIP
    """
    path = get_file(fname=path, origin=f"{ORIGIN_FOLDER}mnist.npz", file_hash=FILE_HASH)
    with np.load(path, allow_pickle=False) as f:
        x_train, y_train = f["x_train"], f["y_train"]
        x_test, y_test = f["x_test"], f["y_test"]
    return (x_train, y_train), (x_test, y_test)
