"""PyDataset (and its alias Sequence): the Keras 3 contract and epoch iteration."""

import threading
import time
import warnings

import numpy as np
import pytest

import keratron as kt
from keratron.utils.py_dataset import iterate_epoch


class Squares(kt.utils.PyDataset):
    def __init__(self, n, batch_size, delay=0.0, **kwargs):
        super().__init__(**kwargs)
        self.x = np.arange(n)
        self.batch_size = batch_size
        self.delay = delay
        self.events = []
        self.threads = set()
        self._lock = threading.Lock()
        self._loading = 0
        self.most_loading = 0  # the most __getitem__ calls seen running at once

    def __len__(self):
        return -(-len(self.x) // self.batch_size)

    def __getitem__(self, i):
        with self._lock:
            self._loading += 1
            self.most_loading = max(self.most_loading, self._loading)
        if self.delay:
            time.sleep(self.delay)
        with self._lock:
            self._loading -= 1
        self.threads.add(threading.get_ident())
        xb = self.x[i * self.batch_size : (i + 1) * self.batch_size]
        return xb, xb**2

    def on_epoch_begin(self):
        self.events.append("begin")

    def on_epoch_end(self):
        self.events.append("end")


def test_sequence_is_the_same_class():
    assert kt.utils.Sequence is kt.utils.PyDataset


def test_defaults_and_arguments():
    ds = Squares(10, 4)
    assert (ds.workers, ds.use_multiprocessing, ds.max_queue_size) == (1, False, 10)
    ds = Squares(10, 4, workers=3, use_multiprocessing=True, max_queue_size=2)
    assert (ds.workers, ds.use_multiprocessing, ds.max_queue_size) == (3, True, 2)
    ds.workers = 5
    assert ds.workers == 5


def test_len_getitem_iter():
    ds = Squares(10, 4)
    assert len(ds) == 3 and ds.num_batches == 3
    xb, yb = ds[2]
    np.testing.assert_array_equal(xb, [8, 9])
    np.testing.assert_array_equal(yb, [64, 81])
    batches = list(ds)
    assert len(batches) == 3
    np.testing.assert_array_equal(np.concatenate([b[0] for b in batches]), np.arange(10))


def test_iterate_epoch_calls_hooks_and_covers_every_sample():
    ds = Squares(10, 3)
    got = [b[0] for b in iterate_epoch(ds)]
    assert ds.events == ["begin", "end"]
    np.testing.assert_array_equal(np.concatenate(got), np.arange(10))


def test_iterate_epoch_shuffles_whole_batches():
    ds = Squares(40, 4)
    order = [int(b[0][0]) // 4 for b in iterate_epoch(ds, shuffle=True, seed=1)]
    assert sorted(order) == list(range(10)) and order != list(range(10))
    again = [int(b[0][0]) // 4 for b in iterate_epoch(ds, shuffle=True, seed=1)]
    assert again == order


def test_workers_load_in_parallel_and_keep_order():
    ds = Squares(16, 2, delay=0.05, workers=4, max_queue_size=4)
    got = [b[0] for b in iterate_epoch(ds)]
    np.testing.assert_array_equal(np.concatenate(got), np.arange(16))
    assert len(ds.threads) > 1
    # Batches overlap (measured, not timed: a busy machine stretches wall-clock time).
    assert ds.most_loading > 1


def test_endless_dataset():
    class Endless(kt.utils.PyDataset):
        def __getitem__(self, i):
            return np.full((2,), i)

    ds = Endless()
    assert ds.num_batches is None
    it = iterate_epoch(ds)
    assert [int(next(it)[0]) for _ in range(3)] == [0, 1, 2]
    with pytest.raises(ValueError, match="shuffle"):
        next(iterate_epoch(ds, shuffle=True))


def test_missing_getitem_and_missing_super_init():
    class NoItems(kt.utils.PyDataset):
        def __len__(self):
            return 1

    with pytest.raises(TypeError, match="__getitem__"):
        NoItems()[0]

    class NoSuper(kt.utils.PyDataset):
        def __init__(self):
            pass

        def __len__(self):
            return 1

        def __getitem__(self, i):
            return i

    ds = NoSuper()
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        assert ds.workers == 1
    assert any("super().__init__" in str(x.message) for x in w)


def test_iterate_epoch_rejects_other_types():
    with pytest.raises(TypeError, match="PyDataset"):
        next(iterate_epoch([1, 2, 3]))


def test_fit_shuffles_batches_reproducibly_after_set_random_seed():
    # The batch order comes from Python's global `random`, as in Keras, so a seeded script
    # repeats: it came from an unseeded generator, and two runs trained differently.
    rng = np.random.default_rng(0)
    x = rng.random((40, 3)).astype("float32")
    y = x.sum(1, keepdims=True)

    class Batches(kt.utils.PyDataset):
        def __len__(self):
            return 5

        def __getitem__(self, i):
            seen.append(i)
            return x[8 * i : 8 * i + 8], y[8 * i : 8 * i + 8]

    orders, losses = [], []
    for _ in range(2):
        seen = []
        kt.utils.set_random_seed(0)
        model = kt.Sequential([kt.Input((3,)), kt.layers.Dense(1)])
        model.compile(kt.optimizers.SGD(0.1), "mse")
        losses.append(model.fit(Batches(), epochs=3, verbose=0).history["loss"])
        orders.append(seen)
    assert orders[0] == orders[1] and sorted(orders[0]) == sorted(list(range(5)) * 3)
    assert orders[0] != list(range(5)) * 3  # shuffled
    assert losses[0] == losses[1]
