"""Local stand-ins for the datasets the keras-io guides download.

Numpy only, so that the same script runs under keratron and under Keras (to record the figure
Keras reaches). The digits are the UCI 8x8 digits that keratron ships
(`keratron/datasets/data/digits.csv.gz`), split exactly as `keratron.datasets.digits.load_data`
splits them; `load_mnist_like` scales them to MNIST's 28x28 uint8 format.
"""

import gzip
from pathlib import Path

import numpy as np

_DIGITS = Path(__file__).resolve().parents[2] / "keratron" / "datasets" / "data" / "digits.csv.gz"


def load_digits():
    """`(x_train, y_train), (x_test, y_test)`: uint8 8x8 images (0..16), uint8 labels."""
    with gzip.open(_DIGITS, "rt") as f:
        table = np.loadtxt(f, delimiter=",", dtype=np.int64, ndmin=2)
    x = table[:, :64].reshape(-1, 8, 8).astype(np.uint8)
    y = table[:, 64].astype(np.uint8)
    order = np.random.RandomState(1337).permutation(len(x))
    train, test = order[:1500], order[1500:]
    return (x[train], y[train]), (x[test], y[test])


def load_mnist_like():
    """The digits in MNIST's format: uint8 28x28 images with values 0..255 (3x upscale, 2px pad)."""
    (x_train, y_train), (x_test, y_test) = load_digits()

    def to_mnist(x):
        x = np.kron(x.astype(np.float32) * (255.0 / 16.0), np.ones((1, 3, 3), np.float32))
        return np.pad(x, ((0, 0), (2, 2), (2, 2))).round().astype(np.uint8)

    return (to_mnist(x_train), y_train), (to_mnist(x_test), y_test)
