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


def test_tf_keras_2s_generator_methods_run_fit_evaluate_and_predict():
    rng = np.random.default_rng(0)
    x = rng.random((24, 3)).astype("float32")
    y = x.sum(1, keepdims=True)

    class Batches(kt.utils.Sequence):
        def __len__(self):
            return 3

        def __getitem__(self, i):
            return x[8 * i : 8 * i + 8], y[8 * i : 8 * i + 8]

    def run(old_names):
        kt.utils.set_random_seed(0)
        model = kt.Sequential([kt.Input((3,)), kt.layers.Dense(1)])
        model.compile(kt.optimizers.SGD(0.1), "mse")
        if old_names:
            with pytest.warns(DeprecationWarning, match="fit_generator"):
                history = model.fit_generator(
                    Batches(), epochs=2, verbose=0, validation_data=Batches(), workers=4
                ).history
            with pytest.warns(DeprecationWarning, match="evaluate_generator"):
                loss = model.evaluate_generator(Batches(), max_queue_size=5)
            with pytest.warns(DeprecationWarning, match="predict_generator"):
                out = model.predict_generator(Batches(), steps=2)
        else:
            history = model.fit(Batches(), epochs=2, verbose=0, validation_data=Batches()).history
            loss = model.evaluate(Batches(), verbose=0)
            out = model.predict(Batches(), steps=2, verbose=0)
        return history, loss, out

    (h_old, l_old, o_old), (h_new, l_new, o_new) = run(True), run(False)
    assert h_old == h_new and l_old == l_new and o_old.shape == (16, 1)
    np.testing.assert_array_equal(o_old, o_new)
