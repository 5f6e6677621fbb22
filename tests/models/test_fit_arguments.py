"""`fit` rejects batch sizes and validation splits that Keras would silently misuse."""

import numpy as np
import pytest

import keratron as kt


def _model():
    model = kt.Sequential([kt.Input((3,)), kt.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    return model


X = np.zeros((10, 3), "float32")
Y = np.zeros((10, 1), "float32")


@pytest.mark.parametrize("batch_size", [0, -4, 2.5, True])
def test_fit_rejects_a_batch_size_that_is_not_a_positive_integer(batch_size):
    # batch_size=0 used to train with the default 32.
    with pytest.raises(ValueError, match=rf"batch_size={batch_size!r}"):
        _model().fit(X, Y, batch_size=batch_size, verbose=0)


@pytest.mark.parametrize("split", [1.0, 1.5, -0.2])
def test_fit_rejects_a_validation_split_outside_zero_to_one(split):
    # validation_split=1.5 used to train on a negative split index.
    with pytest.raises(ValueError, match=rf"validation_split={split!r}"):
        _model().fit(X, Y, validation_split=split, verbose=0)


def test_fit_accepts_numpy_integer_batch_sizes_and_a_valid_split():
    history = _model().fit(X, Y, batch_size=np.int64(4), validation_split=0.2, verbose=0)
    assert set(history.history) == {"loss", "val_loss"}
