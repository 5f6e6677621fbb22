"""Batches cut from in-memory arrays: torch views of the arrays, indexed per batch."""

import warnings

import numpy as np

from keratron.models.data_adapter import EpochIterator


def _batches(x, y=None, **kw):
    return [b for _, _, group in EpochIterator(x, y, batch_size=4, **kw) for b in group]


def test_shuffled_batches_are_the_seeded_permutations_rows():
    x = np.arange(40, dtype="float32").reshape(10, 4)
    y = np.arange(10, dtype="int64")
    np.random.seed(3)
    got = _batches(x, y, shuffle=True)
    np.random.seed(3)
    perm = np.random.permutation(10)
    for i, (bx, by) in enumerate(got):
        rows = perm[i * 4 : (i + 1) * 4]
        np.testing.assert_array_equal(bx.numpy(), x[rows])
        np.testing.assert_array_equal(by.numpy(), y[rows])
        assert bx.dtype == "float32" and by.dtype == "int64"


def test_unshuffled_batches_are_views_and_batch_shuffle_stays_within_batches():
    x = np.arange(10, dtype="int32").reshape(10, 1)
    first = _batches(x, shuffle=False)[0]  # x alone: each batch is the tensor
    x[0, 0] = 99  # a view of the array: no copy was made for a slice
    assert int(first.numpy()[0, 0]) == 99
    for i, bx in enumerate(_batches(x, shuffle="batch")):
        assert sorted(bx.numpy()[:, 0]) == sorted(x[i * 4 : (i + 1) * 4, 0])


def test_other_dtypes_and_read_only_arrays():
    x = np.linspace(0, 1, 12).reshape(6, 2)  # float64 arrives as floatx
    ro = np.arange(6, dtype="uint8")
    ro.flags.writeable = False
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # torch warns on a view of a read-only array
        batches = _batches((x, ro), shuffle=True)
    assert batches[0][0][0].dtype == "float32"
    rows = np.concatenate([b[0][1].numpy() for b in batches])
    assert sorted(rows) == list(range(6))
