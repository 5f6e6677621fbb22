"""IMDB movie-review sentiment, downloaded and cached as Keras does (`keras.datasets.imdb`).

Reviews are ragged word-index sequences stored as object arrays in an `.npz`; they are read
with an unpickler that only rebuilds NumPy arrays.
"""

from __future__ import annotations

import io
import json
import zipfile

import numpy as np

from keratron.datasets.cifar10 import restricted_load
from keratron.utils.file_utils import get_file

__all__ = ["load_data", "get_word_index"]

ORIGIN_FOLDER = "https://storage.googleapis.com/tensorflow/tf-keras-datasets/"
FILE_HASH = "69664113be75683a8fe16e3ed0ab59fda8886cb3cd7ada244f7d9544e4676b9f"
WORD_INDEX_HASH = "bfafd718b763782e994055a2d397834f"


def _read_npy(raw: bytes):
    buffer = io.BytesIO(raw)
    try:
        return np.lib.format.read_array(buffer, allow_pickle=False)
    except ValueError:
        # An object array: skip the .npy header and unpickle with NumPy arrays only.
        buffer.seek(0)
        version = np.lib.format.read_magic(buffer)
        if version[0] == 1:
            np.lib.format.read_array_header_1_0(buffer)
        elif version[0] in (2, 3):
            np.lib.format.read_array_header_2_0(buffer)
        else:
            raise ValueError(f"Unsupported .npy format version {version}.") from None
        return restricted_load(buffer)


def load_npz(path) -> dict:
    """The arrays of an `.npz` file; object arrays are unpickled with NumPy arrays only."""
    out = {}
    with zipfile.ZipFile(path) as archive:
        for member in archive.namelist():
            if member.endswith(".npy"):
                out[member[: -len(".npy")]] = _read_npy(archive.read(member))
    return out


def remove_long_seq(maxlen, seq, label):
    """Keeps the sequences shorter than `maxlen` (and their labels)."""
    new_seq, new_label = [], []
    for x, y in zip(seq, label):
        if len(x) < maxlen:
            new_seq.append(x)
            new_label.append(y)
    return new_seq, new_label


def load_data(
    path="imdb.npz",
    num_words=None,
    skip_top=0,
    maxlen=None,
    seed=113,
    start_char=1,
    oov_char=2,
    index_from=3,
    **kwargs,
):
    """Loads the IMDB dataset: 25,000 training and 25,000 test reviews labelled by sentiment,
    each a list of word indices (by frequency rank, offset by `index_from`).

    Args:
        path: the file name in the cache.
        num_words: keep the `num_words` most frequent words; others become `oov_char`.
        skip_top: also replace the `skip_top` most frequent words by `oov_char`.
        maxlen: drop sequences of `maxlen` words or more.
        seed: the shuffling seed.
        start_char: index marking the start of each sequence (None: none).
        oov_char: index for dropped words (None: remove them).
        index_from: offset added to the word indices.
        **kwargs: `nb_words`, the old name of `num_words`.

    Returns:
        `(x_train, y_train), (x_test, y_test)`: object arrays of lists of ints, and int labels.

    Raises:
        ValueError: if no sequence is shorter than `maxlen`.

    Example:
        >>> from keratron.datasets import imdb
        >>> (x_train, y_train), _ = imdb.load_data(num_words=10000)  # doctest: +SKIP
    """
    if "nb_words" in kwargs:  # tf.keras 1 spelling
        num_words = kwargs.pop("nb_words")
    if kwargs:
        raise TypeError(f"imdb.load_data: unrecognized keyword arguments: {sorted(kwargs)}")
    path = get_file(fname=path, origin=f"{ORIGIN_FOLDER}imdb.npz", file_hash=FILE_HASH)
    f = load_npz(path)
    x_train, labels_train = f["x_train"], f["y_train"]
    x_test, labels_test = f["x_test"], f["y_test"]

    rng = np.random.RandomState(seed)
    indices = np.arange(len(x_train))
    rng.shuffle(indices)
    x_train, labels_train = x_train[indices], labels_train[indices]
    indices = np.arange(len(x_test))
    rng.shuffle(indices)
    x_test, labels_test = x_test[indices], labels_test[indices]

    if start_char is not None:
        x_train = [[start_char] + [w + index_from for w in x] for x in x_train]
        x_test = [[start_char] + [w + index_from for w in x] for x in x_test]
    elif index_from:
        x_train = [[w + index_from for w in x] for x in x_train]
        x_test = [[w + index_from for w in x] for x in x_test]
    else:
        x_train = [list(x) for x in x_train]
        x_test = [list(x) for x in x_test]

    if maxlen:
        x_train, labels_train = remove_long_seq(maxlen, x_train, labels_train)
        x_test, labels_test = remove_long_seq(maxlen, x_test, labels_test)
        if not x_train or not x_test:
            raise ValueError(
                f"After filtering for sequences shorter than maxlen={maxlen}, no sequence was "
                "kept. Increase maxlen."
            )

    xs = x_train + x_test
    labels = np.concatenate([labels_train, labels_test])
    if not num_words:
        num_words = max(max(x) for x in xs)
    if oov_char is not None:
        xs = [[w if skip_top <= w < num_words else oov_char for w in x] for x in xs]
    else:
        xs = [[w for w in x if skip_top <= w < num_words] for x in xs]

    idx = len(x_train)
    x_train, y_train = np.array(xs[:idx], dtype="object"), labels[:idx]
    x_test, y_test = np.array(xs[idx:], dtype="object"), labels[idx:]
    return (x_train, y_train), (x_test, y_test)


def get_word_index(path="imdb_word_index.json"):
    """The word -> index dictionary of the IMDB dataset.

    Example:
        >>> keratron.datasets.imdb.get_word_index()["good"]  # doctest: +SKIP
    """
    path = get_file(
        fname=path, origin=f"{ORIGIN_FOLDER}imdb_word_index.json", file_hash=WORD_INDEX_HASH
    )
    with open(path) as f:
        return json.load(f)
