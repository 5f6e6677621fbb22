"""California housing prices, downloaded and cached as Keras does
(`keras.datasets.california_housing`)."""

from __future__ import annotations

import numpy as np

from keratron.utils.file_utils import get_file

__all__ = ["load_data"]

ORIGIN_FOLDER = "https://storage.googleapis.com/tensorflow/tf-keras-datasets/"
FILE_HASH = "1a2e3a52e0398de6463aebe6f4a8da34fb21fbb6b934cf88c3425e766f2a1a6f"


def load_data(version="large", path="california_housing.npz", test_split=0.2, seed=113):
    """Loads the California housing data (1990 census block groups): 8 features (median
    income, house age, average rooms and bedrooms, population, average occupancy, latitude,
    longitude) and the median house value in dollars.

    Args:
        version: "large" (all 20,640 samples) or "small" (the first 600).
        path: the file name in the cache (`~/.keras/datasets`).
        test_split: fraction of the data held out for testing, in [0, 1).
        seed: the shuffling seed.

    Returns:
        `(x_train, y_train), (x_test, y_test)`: x of shape `(n, 8)`, y of shape `(n,)`.

    Raises:
        ValueError: if `test_split` is outside [0, 1) or `version` is unknown.

    Example:
        >>> from keratron.datasets import california_housing
        >>> (x_train, y_train), _ = california_housing.load_data("small")  # doctest: +SKIP
    """
    if not 0 <= test_split < 1:
        raise ValueError(
            f"Invalid `test_split` argument: {test_split}. It must be between 0 and 1 "
            "(exclusive of 1)."
        )
    path = get_file(path, origin=f"{ORIGIN_FOLDER}california_housing.npz", file_hash=FILE_HASH)
    with np.load(path, allow_pickle=False) as f:
        x, y = f["x"], f["y"]
    if version == "small":
        x, y = x[:600], y[:600]
    elif version != "large":
        raise ValueError(
            f"Argument `version` must be one of 'small', 'large'. Received: version={version}"
        )
    rng = np.random.RandomState(seed)
    indices = np.arange(len(x))
    rng.shuffle(indices)
    x, y = x[indices], y[indices]
    split = int(len(x) * (1 - test_split))
    return (np.array(x[:split]), np.array(y[:split])), (np.array(x[split:]), np.array(y[split:]))
