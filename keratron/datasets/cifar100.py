"""CIFAR-100 small images, downloaded and cached as Keras does (`keras.datasets.cifar100`)."""

from __future__ import annotations

import os

import numpy as np

from keratron import config
from keratron.datasets.cifar10 import load_batch
from keratron.utils.file_utils import get_file

__all__ = ["load_data"]

ORIGIN = "https://www.cs.toronto.edu/~kriz/cifar-100-python.tar.gz"
FILE_HASH = "85cd44d02ba6437773c5bbd22e183051d648de2e7d6b014e1ef29b855ba677a7"


def load_data(label_mode="fine"):
    """Loads CIFAR-100: 50,000 training and 10,000 test 32x32 color images in 100 classes
    (`label_mode="fine"`) or 20 superclasses (`"coarse"`).

    Returns:
        `(x_train, y_train), (x_test, y_test)`: uint8 images of shape (n, 32, 32, 3) (channels
        first with `image_data_format() == "channels_first"`) and labels of shape (n, 1).

    Raises:
        ValueError: if `label_mode` is not "fine" or "coarse".

    Example:
        >>> from keratron.datasets import cifar100
        >>> (x_train, y_train), _ = cifar100.load_data(label_mode="coarse")  # doctest: +SKIP
    """
    if label_mode not in ["fine", "coarse"]:
        raise ValueError(
            f'`label_mode` must be one of `"fine"`, `"coarse"`. Received: label_mode={label_mode}.'
        )
    path = get_file(
        fname="cifar-100-python-target", origin=ORIGIN, extract=True, file_hash=FILE_HASH
    )
    path = os.path.join(path, "cifar-100-python")
    x_train, y_train = load_batch(os.path.join(path, "train"), label_key=f"{label_mode}_labels")
    x_test, y_test = load_batch(os.path.join(path, "test"), label_key=f"{label_mode}_labels")
    y_train = np.reshape(np.asarray(y_train), (len(y_train), 1))
    y_test = np.reshape(np.asarray(y_test), (len(y_test), 1))
    if config.image_data_format() == "channels_last":
        x_train = x_train.transpose(0, 2, 3, 1)
        x_test = x_test.transpose(0, 2, 3, 1)
    return (x_train, y_train), (x_test, y_test)
