"""`PyDataset` (alias `Sequence`): a dataset of batches written in Python, as in Keras 3."""

from __future__ import annotations

import collections
import itertools
import random
import warnings
from concurrent.futures import ThreadPoolExecutor


class PyDataset:
    """Base class for a dataset of batches computed by Python code.

    Subclasses define `__len__` (the number of batches) and `__getitem__(index)` (one whole
    batch, e.g. `(x, y)` or `(x, y, sample_weight)`), and may define `on_epoch_begin` /
    `on_epoch_end` (e.g. to reshuffle). Because batches are addressed by index, each sample
    is seen once per epoch even when several workers load batches at once.

    Args:
        workers: number of threads `fit` uses to load batches ahead of time.
        use_multiprocessing: accepted for Keras compatibility; batches are loaded in
            threads either way (worker processes would need a picklable dataset).
        max_queue_size: most batches loaded ahead of the one being consumed.

    Example:
        >>> class Batches(keratron.utils.PyDataset):
        ...     def __init__(self, x, batch_size, **kwargs):
        ...         super().__init__(**kwargs)
        ...         self.x, self.batch_size = x, batch_size
        ...     def __len__(self):
        ...         return -(-len(self.x) // self.batch_size)
        ...     def __getitem__(self, i):
        ...         return self.x[i * self.batch_size : (i + 1) * self.batch_size]
    """

    def __init__(self, workers=1, use_multiprocessing=False, max_queue_size=10):
        self._workers = workers
        self._use_multiprocessing = use_multiprocessing
        self._max_queue_size = max_queue_size

    def _warn_if_super_not_called(self):
        missing = [
            a
            for a in ("_workers", "_use_multiprocessing", "_max_queue_size")
            if not hasattr(self, a)
        ]
        if missing:
            self._workers = getattr(self, "_workers", 1)
            self._use_multiprocessing = getattr(self, "_use_multiprocessing", False)
            self._max_queue_size = getattr(self, "_max_queue_size", 10)
            warnings.warn(
                f"{type(self).__name__} should call `super().__init__(**kwargs)` in its "
                "constructor; `workers`, `use_multiprocessing` and `max_queue_size` are "
                "arguments of PyDataset, not of `fit()`.",
                stacklevel=3,
            )

    @property
    def workers(self):
        self._warn_if_super_not_called()
        return self._workers

    @workers.setter
    def workers(self, value):
        self._workers = value

    @property
    def use_multiprocessing(self):
        self._warn_if_super_not_called()
        return self._use_multiprocessing

    @use_multiprocessing.setter
    def use_multiprocessing(self, value):
        self._use_multiprocessing = value

    @property
    def max_queue_size(self):
        self._warn_if_super_not_called()
        return self._max_queue_size

    @max_queue_size.setter
    def max_queue_size(self, value):
        self._max_queue_size = value

    def __getitem__(self, index):
        raise TypeError(
            f"{type(self).__name__} must define `__getitem__(index)` returning batch `index`; "
            "PyDataset subclasses provide their batches."
        )

    @property
    def num_batches(self):
        """The number of batches (`len(self)`), or None for an endless dataset."""
        # A subclass without `__len__` is endless, as in Keras.
        return len(self) if hasattr(self, "__len__") else None

    def __iter__(self):
        n = self.num_batches
        for index in range(n) if n is not None else itertools.count():
            yield self[index]

    def on_epoch_begin(self):
        """Called at the start of every epoch."""

    def on_epoch_end(self):
        """Called at the end of every epoch."""


Sequence = PyDataset  # the tf.keras name


def iterate_epoch(dataset: PyDataset, shuffle: bool = False, seed=None):
    """Yields one epoch of `dataset`'s batches, loading ahead with its `workers` threads.

    Calls `on_epoch_begin` first and `on_epoch_end` after the last batch. Batches come in
    index order, or in a random order of whole batches when `shuffle` (as `fit` does).
    With `workers > 1`, at most `max_queue_size` batches are loaded ahead.

    Args:
        dataset: a PyDataset.
        shuffle: visit the batches in a random order (finite datasets only).
        seed: optional int seed for that order; without one the order comes from Python's
            global `random` (as in Keras), which `keratron.utils.set_random_seed` seeds.

    Example:
        >>> class Squares(keratron.utils.PyDataset):
        ...     def __len__(self):
        ...         return 3
        ...     def __getitem__(self, index):
        ...         return np.full((2,), index**2)
        >>> [batch.tolist() for batch in keratron.utils.py_dataset.iterate_epoch(Squares())]
        [[0, 0], [1, 1], [4, 4]]
    """
    if not isinstance(dataset, PyDataset):
        raise TypeError(f"iterate_epoch: expected a PyDataset. Received: {type(dataset).__name__}")
    dataset.on_epoch_begin()
    n = dataset.num_batches
    if n is None:
        if shuffle:
            raise ValueError("iterate_epoch: cannot shuffle an endless PyDataset (no __len__).")
        order = itertools.count()
    else:
        order = list(range(n))
        if shuffle:
            # Unseeded, Python's global `random` (as Keras's adapter): set_random_seed repeats it.
            (random if seed is None else random.Random(seed)).shuffle(order)
    workers = max(int(dataset.workers or 1), 1)
    if workers == 1:
        for i in order:
            yield dataset[i]
    else:
        ahead = max(int(dataset.max_queue_size or 1), 1)
        with ThreadPoolExecutor(max_workers=workers) as pool:
            pending: collections.deque = collections.deque()
            it = iter(order)
            for i in itertools.islice(it, ahead):
                pending.append(pool.submit(dataset.__getitem__, i))
            while pending:
                batch = pending.popleft().result()
                for i in itertools.islice(it, 1):
                    pending.append(pool.submit(dataset.__getitem__, i))
                yield batch
    dataset.on_epoch_end()
