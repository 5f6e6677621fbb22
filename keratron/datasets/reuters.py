"""Reuters newswire topics, downloaded and cached as Keras does (`keras.datasets.reuters`)."""

from __future__ import annotations

import json

import numpy as np

from keratron.datasets.imdb import load_npz, remove_long_seq
from keratron.utils.file_utils import get_file

__all__ = ["load_data", "get_word_index", "get_label_names"]

ORIGIN_FOLDER = "https://storage.googleapis.com/tensorflow/tf-keras-datasets/"
FILE_HASH = "d6586e694ee56d7a4e65172e12b3e987c03096cb01eab99753921ef915959916"
WORD_INDEX_HASH = "4d44cc38712099c9e383dc6e5f11a921"


def load_data(
    path="reuters.npz",
    num_words=None,
    skip_top=0,
    maxlen=None,
    test_split=0.2,
    seed=113,
    start_char=1,
    oov_char=2,
    index_from=3,
):
    """Loads the Reuters dataset: 11,228 newswires in 46 topics, as word-index lists.

    Args:
        path: the file name in the cache.
        num_words: keep the `num_words` most frequent words; others become `oov_char`.
        skip_top: also replace the `skip_top` most frequent words by `oov_char`.
        maxlen: drop sequences of `maxlen` words or more.
        test_split: fraction of the data held out for testing.
        seed: the shuffling seed.
        start_char: index marking the start of each sequence (None: none).
        oov_char: index for dropped words (None: remove them).
        index_from: offset added to the word indices.

    Returns:
        `(x_train, y_train), (x_test, y_test)`: object arrays of lists of ints, and int labels.

    Example:
        >>> from keratron.datasets import reuters
        >>> (x_train, y_train), _ = reuters.load_data(num_words=10000)  # doctest: +SKIP
    """
    path = get_file(fname=path, origin=f"{ORIGIN_FOLDER}reuters.npz", file_hash=FILE_HASH)
    f = load_npz(path)
    xs, labels = f["x"], f["y"]

    rng = np.random.RandomState(seed)
    indices = np.arange(len(xs))
    rng.shuffle(indices)
    xs, labels = xs[indices], labels[indices]

    if start_char is not None:
        xs = [[start_char] + [w + index_from for w in x] for x in xs]
    elif index_from:
        xs = [[w + index_from for w in x] for x in xs]

    if maxlen:
        xs, labels = remove_long_seq(maxlen, xs, labels)
    if not num_words:
        num_words = max(max(x) for x in xs)
    if oov_char is not None:
        xs = [[w if skip_top <= w < num_words else oov_char for w in x] for x in xs]
    else:
        xs = [[w for w in x if skip_top <= w < num_words] for x in xs]

    idx = int(len(xs) * (1 - test_split))
    x_train, y_train = np.array(xs[:idx], dtype="object"), np.array(labels[:idx])
    x_test, y_test = np.array(xs[idx:], dtype="object"), np.array(labels[idx:])
    return (x_train, y_train), (x_test, y_test)


def get_word_index(path="reuters_word_index.json"):
    """The word -> index dictionary of the Reuters dataset.

    Example:
        >>> keratron.datasets.reuters.get_word_index()["the"]  # doctest: +SKIP
    """
    path = get_file(
        path, origin=f"{ORIGIN_FOLDER}reuters_word_index.json", file_hash=WORD_INDEX_HASH
    )
    with open(path) as f:
        return json.load(f)


def get_label_names():
    """The 46 topic names, indexed by label.

    Example:
        >>> keratron.datasets.reuters.get_label_names()[3]
        'earn'
    """
    return (
        "cocoa", "grain", "veg-oil", "earn", "acq", "wheat", "copper", "housing",
        "money-supply", "coffee", "sugar", "trade", "reserves", "ship", "cotton", "carcass",
        "crude", "nat-gas", "cpi", "money-fx", "interest", "gnp", "meal-feed", "alum",
        "oilseed", "gold", "tin", "strategic-metal", "livestock", "retail", "ipi",
        "iron-steel", "rubber", "heat", "jobs", "lei", "bop", "zinc", "orange", "pet-chem",
        "dlr", "gas", "silver", "wpi", "hog", "lead",
    )  # fmt: skip
