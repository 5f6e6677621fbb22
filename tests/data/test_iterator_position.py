"""An Iterator counts the elements it gave out and can be put back to a position (what
`tf.train.Checkpoint` saves and restores for a dataset iterator, as TF's iterator state)."""

import keratron


def test_iterator_counts_and_seeks():
    ds = keratron.data.Dataset.range(10).repeat().batch(3)
    it = iter(ds)
    first = [next(it).numpy().tolist() for _ in range(4)]
    assert it._position == 4
    it.get_next()
    assert it._position == 5
    other = iter(ds)
    other._seek(2)
    assert other._position == 2
    assert next(other).numpy().tolist() == first[2] == [6, 7, 8]
    assert next(other).numpy().tolist() == first[3]
