"""Boston housing prices, downloaded and cached as Keras does
(`keras.datasets.boston_housing`)."""

from __future__ import annotations

import numpy as np

from keratron.utils.file_utils import get_file

__all__ = ["load_data"]

ORIGIN_FOLDER = "https://storage.googleapis.com/tensorflow/tf-keras-datasets/"
FILE_HASH = "f553886a1f8d56431e820c5b82552d9d95cfcb96d1e678153f8839538947dff5"


def load_data(path="boston_housing.npz", test_split=0.2, seed=113):
    """Loads the Boston housing data: 506 samples of 13 features with median home values.

    Args:
        path: the file name in the cache.
        test_split: fraction of the data held out for testing, in [0, 1).
        seed: the shuffling seed.

    Returns:
        `(x_train, y_train), (x_test, y_test)` as float arrays.

    Raises:
        ValueError: if `test_split` is outside [0, 1).

    Example:
        >>> from keratron.datasets import boston_housing
        >>> (x_train, y_train), (x_test, y_test) = boston_housing.load_data()  # doctest: +SKIP
    """
    if not 0 <= test_split < 1:
        raise ValueError(
            f"Invalid `test_split` argument: {test_split}. It must be between 0 and 1 "
            "(exclusive of 1)."
        )
    path = get_file(path, origin=f"{ORIGIN_FOLDER}boston_housing.npz", file_hash=FILE_HASH)
    with np.load(path, allow_pickle=False) as f:
        x, y = f["x"], f["y"]
    rng = np.random.RandomState(seed)
    indices = np.arange(len(x))
    rng.shuffle(indices)
    x, y = x[indices], y[indices]
    split = int(len(x) * (1 - test_split))
    return (np.array(x[:split]), np.array(y[:split])), (np.array(x[split:]), np.array(y[split:]))
