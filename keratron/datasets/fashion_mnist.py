"""Fashion-MNIST clothing images, downloaded and cached as Keras does
(`keras.datasets.fashion_mnist`)."""

from __future__ import annotations

import gzip
import os

import numpy as np

from keratron.utils.file_utils import get_file

__all__ = ["load_data"]

BASE = "https://storage.googleapis.com/tensorflow/tf-keras-datasets/"
FILES = [
    "train-labels-idx1-ubyte.gz",
    "train-images-idx3-ubyte.gz",
    "t10k-labels-idx1-ubyte.gz",
    "t10k-images-idx3-ubyte.gz",
]


def _read(path, offset) -> np.ndarray:
    with gzip.open(path, "rb") as f:
        return np.frombuffer(f.read(), np.uint8, offset=offset)


def load_data():
    """Loads Fashion-MNIST: 60,000 training and 10,000 test 28x28 grayscale images of 10
    clothing classes, from the IDX files Keras downloads.

    Returns:
        `(x_train, y_train), (x_test, y_test)`: uint8 arrays of shapes (60000, 28, 28),
        (60000,), (10000, 28, 28) and (10000,).

    Example:
        >>> from keratron.datasets import fashion_mnist
        >>> (x_train, y_train), _ = fashion_mnist.load_data()  # doctest: +SKIP
    """
    dirname = os.path.join("datasets", "fashion-mnist")
    paths = [get_file(fname, origin=BASE + fname, cache_subdir=dirname) for fname in FILES]
    # IDX files: 8-byte header for labels, 16-byte header for images.
    y_train = _read(paths[0], 8)
    x_train = _read(paths[1], 16).reshape(len(y_train), 28, 28)
    y_test = _read(paths[2], 8)
    x_test = _read(paths[3], 16).reshape(len(y_test), 28, 28)
    return (x_train, y_train), (x_test, y_test)
