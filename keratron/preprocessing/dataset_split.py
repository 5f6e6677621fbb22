"""`keras.utils.split_dataset`: a dataset (arrays or a `keratron.data.Dataset`) cut into a
left and a right `Dataset`, as Keras cuts a `tf.data.Dataset`."""

from __future__ import annotations

import random

import numpy as np

from keratron import tree
from keratron.data import Dataset

__all__ = ["split_dataset"]


def _samples(dataset) -> list:
    if isinstance(dataset, (list, tuple)):
        kind = type(dataset).__name__
        if not dataset:
            raise ValueError(
                f"split_dataset: received an empty {kind} dataset. Please provide a non-empty "
                f"{kind} of arrays."
            )
        for i, array in enumerate(dataset):
            if not isinstance(array, np.ndarray):
                raise ValueError(
                    f"split_dataset: expected a {kind} of `numpy.ndarray` objects. Received: "
                    f"{type(array).__name__} at index {i}."
                )
            if len(array) != len(dataset[0]):
                raise ValueError(
                    f"split_dataset: received a {kind} of NumPy arrays with different lengths. "
                    f"Mismatch found at index {i}: expected length {len(dataset[0])}, received "
                    f"shape {array.shape}."
                )
        return list(zip(*dataset))
    if isinstance(dataset, np.ndarray):
        return list(dataset)
    if isinstance(dataset, Dataset):
        return list(dataset.as_numpy_iterator())
    raise TypeError(
        "split_dataset: the `dataset` argument must be either a `keratron.data.Dataset` object, "
        f"or a list/tuple of arrays. Received: dataset={dataset!r} of type {type(dataset)}"
    )


def _rescale_sizes(left_size, right_size, total):
    """Keras's rules: a float is a fraction in (0, 1), an int a count in (0, total)."""
    for name, size in (("left_size", left_size), ("right_size", right_size)):
        if size is not None and type(size) not in (int, float):
            raise TypeError(
                f"split_dataset: invalid `{name}` type. Expected int or float or None. "
                f"Received: type({name})={type(size)}"
            )
    if left_size == 0 and right_size == 0:
        raise ValueError(
            "Both `left_size` and `right_size` are zero. At least one of the split sizes must "
            "be non-zero."
        )
    for name, size in (("left_size", left_size), ("right_size", right_size)):
        if (type(size) is int and not 0 < size < total) or (
            type(size) is float and not 0 < size < 1
        ):
            raise ValueError(
                f"`{name}` should be either a positive integer smaller than {total}, or a float "
                f"within the range `[0, 1]`. Received: {name}={size}"
            )
    if type(left_size) is float and type(right_size) is float and left_size + right_size > 1:
        raise ValueError(
            "The sum of `left_size` and `right_size` is greater than 1. It must be less than "
            "or equal to 1."
        )
    left = round(left_size * total) if type(left_size) is float else left_size
    right = round(right_size * total) if type(right_size) is float else right_size
    if left is None:
        left = total - right
    elif right is None:
        right = total - left
    if left + right > total:
        raise ValueError(
            f"The sum of `left_size` and `right_size` should be smaller than the {total}. "
            f"Received: left_size + right_size = {left + right} and total_length = {total}"
        )
    for split, side in ((left, "left"), (right, "right")):
        if split == 0:
            raise ValueError(
                f"With `dataset` of length={total}, `left_size`={left} and `right_size`={right}. "
                f"Resulting {side} side dataset split will be empty. Adjust any of the "
                "aforementioned parameters"
            )
    return int(left), int(right)


def _restack(samples, structured: bool):
    if not structured:
        return np.array(samples)
    flat = [tree.flatten(s) for s in samples]
    columns = [np.array(column) for column in zip(*flat)]
    return tree.lists_to_tuples(tree.pack_sequence_as(samples[0], columns))


def split_dataset(
    dataset, left_size=None, right_size=None, shuffle=False, seed=None, preferred_backend=None
):
    """Splits a dataset into a left part and a right part (e.g. train and test).

    The samples are optionally shuffled (Python's `random` with `seed`, as Keras), then the
    left part takes the first `left_size` samples and the right part the last `right_size`.

    Args:
        dataset: a `keratron.data.Dataset` (split by its elements), a NumPy array, or a
            list / tuple of arrays of the same length.
        left_size: a fraction in (0, 1) or a number of samples; None: the rest.
        right_size: a fraction in (0, 1) or a number of samples; None: the rest.
        shuffle: shuffle the samples before splitting.
        seed: the shuffling seed.
        preferred_backend: Keras's choice between tf.data and torch datasets; keratron always
            returns `keratron.data.Dataset`s, so it is accepted and ignored.

    Returns:
        `(left, right)`, two `keratron.data.Dataset`s of single samples.

    Example:
        >>> left, right = keratron.utils.split_dataset(np.arange(10), left_size=0.8)
        >>> int(left.cardinality()), int(right.cardinality())
        (8, 2)
    """
    del preferred_backend
    samples = _samples(dataset)
    if left_size is None and right_size is None:
        raise ValueError(
            "At least one of the `left_size` or `right_size` must be specified. Received: "
            "left_size=None and right_size=None"
        )
    if shuffle:
        if seed is None:
            seed = random.randint(0, int(1e6))
        random.Random(seed).shuffle(samples)
    left, right = _rescale_sizes(left_size, right_size, len(samples))
    structured = not isinstance(dataset, np.ndarray)
    return (
        Dataset.from_tensor_slices(_restack(samples[:left], structured)),
        Dataset.from_tensor_slices(_restack(samples[-right:], structured)),
    )
