"""Sequence helpers, as `keras.preprocessing.sequence` (the same function as `keratron.utils`).

Besides `pad_sequences`, the legacy helpers that tf.keras scripts use: `TimeseriesGenerator`,
and `make_sampling_table` / `skipgrams` for word2vec-style training pairs.
"""

from __future__ import annotations

import random

import numpy as np

from keratron.utils.py_dataset import PyDataset
from keratron.utils.sequence_utils import pad_sequences

__all__ = ["TimeseriesGenerator", "make_sampling_table", "pad_sequences", "skipgrams"]


class TimeseriesGenerator(PyDataset):
    """Batches of sliding windows over a time series, with the target that follows each.

    Sample `k` ends at step `row = start_index + length + k * stride`: it is
    `data[row - length : row : sampling_rate]`, and its target is `targets[row]`. Steps run
    up to `end_index` (inclusive). Prefer `keratron.utils.timeseries_dataset_from_array`
    in new code.

    Args:
        data: indexable series (list or array), time along the first axis.
        targets: targets, one per step of `data`.
        length: steps of history per sample, before subsampling.
        sampling_rate: keep every `sampling_rate`-th step of the history.
        stride: steps between the ends of consecutive samples.
        start_index: first step usable as history (the first sample ends at
            `start_index + length`).
        end_index: last step usable as a sample's end (default: the last step of `data`).
        shuffle: draw each batch's ends at random (with `np.random`) instead of in order.
        reverse: give each sample's steps in reverse order.
        batch_size: samples per batch (the last batch may be smaller).
        **kwargs: `PyDataset` arguments (`workers`, `use_multiprocessing`, `max_queue_size`).

    Raises:
        ValueError: if `data` and `targets` differ in length, or no sample fits between
            `start_index + length` and `end_index`.

    Example:
        >>> series = np.arange(10)
        >>> generator = keratron.preprocessing.sequence.TimeseriesGenerator(
        ...     series, series, length=3, batch_size=4)
        >>> x, y = generator[0]
        >>> len(generator), x.tolist(), y.tolist()
        (2, [[0, 1, 2], [1, 2, 3], [2, 3, 4], [3, 4, 5]], [3, 4, 5, 6])
    """

    def __init__(
        self,
        data,
        targets,
        length: int,
        sampling_rate: int = 1,
        stride: int = 1,
        start_index: int = 0,
        end_index: int | None = None,
        shuffle: bool = False,
        reverse: bool = False,
        batch_size: int = 128,
        **kwargs,
    ):
        super().__init__(**kwargs)
        if len(data) != len(targets):
            raise ValueError(
                "TimeseriesGenerator: `data` and `targets` must have the same length. "
                f"Received: len(data)={len(data)}, len(targets)={len(targets)}"
            )
        self.data = data
        self.targets = targets
        self.length = length
        self.sampling_rate = sampling_rate
        self.stride = stride
        # From here on, the first step a sample can end at.
        self.start_index = start_index + length
        self.end_index = len(data) - 1 if end_index is None else end_index
        self.shuffle = shuffle
        self.reverse = reverse
        self.batch_size = batch_size
        if self.start_index > self.end_index:
            raise ValueError(
                "TimeseriesGenerator: `start_index + length` must not exceed `end_index`, or no "
                f"step is left to end a sample. Received: start_index + length="
                f"{self.start_index}, end_index={self.end_index}"
            )

    def __len__(self) -> int:
        span = self.batch_size * self.stride
        return (self.end_index - self.start_index + span) // span

    def __getitem__(self, index: int):
        if self.shuffle:
            rows = np.random.randint(self.start_index, self.end_index + 1, size=self.batch_size)
        else:
            first = self.start_index + self.batch_size * self.stride * index
            last = min(first + self.batch_size * self.stride, self.end_index + 1)
            rows = np.arange(first, last, self.stride)
        samples = np.array(
            [self.data[row - self.length : row : self.sampling_rate] for row in rows]
        )
        targets = np.array([self.targets[row] for row in rows])
        if self.reverse:
            return samples[:, ::-1, ...], targets
        return samples, targets


def make_sampling_table(size: int, sampling_factor: float = 1e-5) -> np.ndarray:
    """The probability of keeping each word rank, for `skipgrams`' `sampling_table`.

    Word frequencies are taken as Zipf's law approximates them for rank `r` (1 = most
    frequent), and a word is kept with probability `min(1, sqrt(sampling_factor / f))`, the
    subsampling of word2vec. Index 0 (padding) gets the value of rank 1.

    Args:
        size: number of ranks (the vocabulary size).
        sampling_factor: word2vec's subsampling threshold.

    Returns:
        A float64 array of `size` probabilities.

    Example:
        >>> keratron.preprocessing.sequence.make_sampling_table(4).round(5)
        array([0.00315, 0.00315, 0.00548, 0.00742])
    """
    euler_gamma = 0.577
    rank = np.arange(size)
    rank[0] = 1
    # Asymptotic expansion of rank * H(rank), the inverse frequency of a Zipf-distributed word.
    inverse_frequency = rank * (np.log(rank) + euler_gamma) + 0.5 - 1.0 / (12.0 * rank)
    f = sampling_factor * inverse_frequency
    return np.minimum(1.0, f / np.sqrt(f))


def skipgrams(
    sequence,
    vocabulary_size: int,
    window_size: int = 4,
    negative_samples: float = 1.0,
    shuffle: bool = True,
    categorical: bool = False,
    sampling_table=None,
    seed: int | None = None,
) -> tuple[list, list]:
    """Word pairs for skip-gram training: neighbours labelled 1, random words labelled 0.

    Each nonzero word of `sequence` is paired with every nonzero word at most `window_size`
    away (label 1). Then `int(negative_samples * positives)` pairs of a shuffled first word and
    a random index in `[1, vocabulary_size)` are added (label 0). Randomness comes from
    Python's `random` module: `sampling_table` and the negative pairs use its global state;
    `seed` (one is drawn if None) reseeds it for the final shuffle.

    Args:
        sequence: word indices (0 is skipped as padding).
        vocabulary_size: one more than the largest word index.
        window_size: how far a neighbour may be.
        negative_samples: negative pairs per positive one (0 for none).
        shuffle: shuffle the pairs (and their labels alike).
        categorical: labels as `[0, 1]` / `[1, 0]` instead of `1` / `0`.
        sampling_table: optional per-index probability of keeping a word as the first of a
            pair (see `make_sampling_table`).
        seed: seed of the shuffle.

    Returns:
        `(couples, labels)`: a list of `[word, context]` pairs and a list of labels.

    Example:
        >>> couples, labels = keratron.preprocessing.sequence.skipgrams(
        ...     [1, 2, 3], 4, window_size=1, negative_samples=0, shuffle=False)
        >>> couples, labels
        ([[1, 2], [2, 1], [2, 3], [3, 2]], [1, 1, 1, 1])
    """
    couples = []
    labels = []
    for i, word in enumerate(sequence):
        if not word:
            continue
        if sampling_table is not None and sampling_table[word] < random.random():
            continue
        for j in range(max(0, i - window_size), min(len(sequence), i + window_size + 1)):
            if j != i and sequence[j]:
                couples.append([word, sequence[j]])
                labels.append([0, 1] if categorical else 1)

    if negative_samples > 0:
        num_negative = int(len(labels) * negative_samples)
        words = [couple[0] for couple in couples]
        random.shuffle(words)
        couples += [
            [words[i % len(words)], random.randint(1, vocabulary_size - 1)]
            for i in range(num_negative)
        ]
        labels += [[1, 0] if categorical else 0 for _ in range(num_negative)]

    if shuffle:
        if seed is None:
            seed = random.randint(0, 10_000_000)
        # The same seed for both shuffles keeps each label with its pair.
        random.seed(seed)
        random.shuffle(couples)
        random.seed(seed)
        random.shuffle(labels)
    return couples, labels
