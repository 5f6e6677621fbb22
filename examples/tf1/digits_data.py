"""`input_data.read_data_sets` for the TF1 MNIST tutorials, over the bundled UCI digits.

The 8x8 digits (keratron.datasets.digits, 1,500 train / 297 test images) stand in for
MNIST: images are flattened to 64 floats in [0, 1], labels are one-hot. Batches come in a
fixed order (a NumPy RandomState(0) shuffle per epoch), so TF and keratron see the same data.
"""

import numpy as np

from keratron.datasets import digits


class DataSet:
    def __init__(self, images, labels, seed=0):
        self.images = images
        self.labels = labels
        self.num_examples = len(images)
        self._rng = np.random.RandomState(seed)
        self._order = self._rng.permutation(self.num_examples)
        self._pos = 0

    def next_batch(self, batch_size):
        if self._pos + batch_size > self.num_examples:
            self._order = self._rng.permutation(self.num_examples)
            self._pos = 0
        idx = self._order[self._pos : self._pos + batch_size]
        self._pos += batch_size
        return self.images[idx], self.labels[idx]


class Datasets:
    def __init__(self, train, test):
        self.train = train
        self.test = test


def read_data_sets(one_hot=True):
    (x_train, y_train), (x_test, y_test) = digits.load_data()

    def images(x):
        return (x.reshape(len(x), 64) / 16.0).astype(np.float32)

    def labels(y):
        return np.eye(10, dtype=np.float32)[y] if one_hot else y.astype(np.int64)

    return Datasets(
        DataSet(images(x_train), labels(y_train)), DataSet(images(x_test), labels(y_test))
    )
