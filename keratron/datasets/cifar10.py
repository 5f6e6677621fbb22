"""CIFAR-10 small images, downloaded and cached as Keras does (`keras.datasets.cifar10`).

The batches are Python pickles; they are read with an unpickler that only rebuilds NumPy
arrays, so a tampered file cannot run code.
"""

from __future__ import annotations

import os
import pickle

import numpy as np

from keratron import config
from keratron.utils.file_utils import get_file

__all__ = ["load_data", "load_batch"]

ORIGIN = "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz"
FILE_HASH = "6d958be074577803d12ecdefd02955f39262c83c16fe9348329d7fe0b5c001ce"

_ALLOWED_GLOBALS = {
    ("numpy", "ndarray"),
    ("numpy", "dtype"),
    ("numpy.core.multiarray", "_reconstruct"),
    ("numpy._core.multiarray", "_reconstruct"),
}


class _ArrayUnpickler(pickle.Unpickler):
    """Unpickles dicts, lists, numbers, strings and NumPy arrays, and nothing else."""

    def find_class(self, module, name):
        if (module, name) not in _ALLOWED_GLOBALS:
            raise pickle.UnpicklingError(
                f"Refusing to load `{module}.{name}` from a dataset file: only NumPy arrays "
                "may be stored there (the file may be corrupted or tampered with)."
            )
        if name == "_reconstruct":
            # numpy 2 moved `numpy.core` to `numpy._core`; older pickles name the old path.
            from numpy._core import multiarray

            return multiarray._reconstruct
        return getattr(np, name)


def restricted_load(file_obj, **kwargs):
    """`pickle.load` limited to NumPy array reconstruction."""
    return _ArrayUnpickler(file_obj, **kwargs).load()


def load_batch(fpath, label_key="labels"):
    """Reads one CIFAR batch file: `(data, labels)` with data shaped (n, 3, 32, 32).

    Example:
        >>> import os, pickle, shutil, tempfile
        >>> from keratron.datasets.cifar10 import load_batch
        >>> tmp = tempfile.mkdtemp()
        >>> batch = {b"data": np.zeros((2, 3072), np.uint8), b"labels": [3, 7]}
        >>> with open(os.path.join(tmp, "data_batch_1"), "wb") as f:
        ...     pickle.dump(batch, f, protocol=4)
        >>> data, labels = load_batch(os.path.join(tmp, "data_batch_1"))
        >>> data.shape, labels
        ((2, 3, 32, 32), [3, 7])
        >>> shutil.rmtree(tmp)
    """
    with open(fpath, "rb") as f:
        # The batches were pickled by Python 2: keys and strings are bytes.
        d = restricted_load(f, encoding="bytes")
    d = {(k.decode("utf8") if isinstance(k, bytes) else k): v for k, v in d.items()}
    data = np.asarray(d["data"])
    labels = d[label_key]
    return data.reshape(data.shape[0], 3, 32, 32), labels


def load_data():
    """Loads CIFAR-10: 50,000 training and 10,000 test 32x32 color images in 10 classes.

    Returns:
        `(x_train, y_train), (x_test, y_test)`: uint8 images of shape (n, 32, 32, 3) (or
        (n, 3, 32, 32) with `image_data_format() == "channels_first"`) and uint8 labels of
        shape (n, 1).

    Example:
        >>> from keratron.datasets import cifar10
        >>> (x_train, y_train), (x_test, y_test) = cifar10.load_data()  # doctest: +SKIP
    """
    path = get_file(
        fname="cifar-10-batches-py-target", origin=ORIGIN, extract=True, file_hash=FILE_HASH
    )
    path = os.path.join(path, "cifar-10-batches-py")
    xs, ys = [], []
    for i in range(1, 6):
        data, labels = load_batch(os.path.join(path, f"data_batch_{i}"))
        xs.append(data.astype("uint8"))
        ys.append(np.asarray(labels, dtype="uint8"))
    x_train = np.concatenate(xs)
    y_train = np.concatenate(ys)
    x_test, y_test = load_batch(os.path.join(path, "test_batch"))
    y_train = np.reshape(y_train, (len(y_train), 1))
    y_test = np.reshape(np.asarray(y_test), (len(y_test), 1))
    if config.image_data_format() == "channels_last":
        x_train = x_train.transpose(0, 2, 3, 1)
        x_test = x_test.transpose(0, 2, 3, 1)
    return (x_train, y_train), (x_test.astype(x_train.dtype), y_test.astype(y_train.dtype))
