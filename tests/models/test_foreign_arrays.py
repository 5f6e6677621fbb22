"""fit / evaluate / predict take other libraries' arrays (TensorFlow and JAX tensors) as Keras
does, as the numpy arrays they convert to: the same batches, so the same losses and weights."""

import numpy as np
import pytest

import keratron
from tests.conftest import require

rng = np.random.default_rng(0)
X = rng.random((40, 5)).astype("float32")
Y = (X @ rng.standard_normal((5, 1))).astype("float32")
SW = rng.random(40).astype("float32")


def _model():
    keratron.utils.set_random_seed(0)
    model = keratron.Sequential([keratron.Input((5,)), keratron.layers.Dense(1)])
    model.compile(keratron.optimizers.SGD(0.1), "mse")
    return model


def _run(convert):
    model = _model()
    fit = dict(epochs=2, batch_size=8, shuffle=False, verbose=0)
    history = model.fit(convert(X), convert(Y), sample_weight=convert(SW), **fit).history
    split = model.fit(convert(X), convert(Y), validation_split=0.25, **fit).history
    return (
        history["loss"] + split["loss"] + split["val_loss"],
        model.evaluate(convert(X), convert(Y), verbose=0),
        model.predict(convert(X), verbose=0),
        [w.numpy() for w in model.weights],
    )


@pytest.mark.parametrize("library", ["tensorflow", "jax"])
def test_tensors_of_other_libraries_train_as_their_numpy_arrays(library):
    module = require(library)
    convert = module.constant if library == "tensorflow" else module.numpy.asarray
    losses, loss, predicted, weights = _run(convert)
    want_losses, want_loss, want_predicted, want_weights = _run(lambda a: a)
    np.testing.assert_array_equal(losses, want_losses)
    assert loss == want_loss
    np.testing.assert_array_equal(predicted, want_predicted)
    for got, want in zip(weights, want_weights):
        np.testing.assert_array_equal(got, want)


def test_a_generator_is_still_an_iterable_of_batches():
    def batches():
        for i in range(0, 40, 8):
            yield X[i : i + 8], Y[i : i + 8]

    model = _model()
    assert len(model.fit(batches(), epochs=1, verbose=0).history["loss"]) == 1
    with pytest.raises(ValueError, match="`y` should not be passed"):
        model.fit(batches(), Y, epochs=1, verbose=0)


def test_nested_lists_of_numbers_are_arrays_as_in_tf_keras_2():
    # tf.keras 2 read them as arrays (Keras 3 refuses them); a list of arrays stays a list of
    # inputs.
    rows, targets = X[:8].tolist(), Y[:8, 0].tolist()
    runs = []
    for data in ((rows, targets), (X[:8], Y[:8, 0])):
        model = _model()
        history = model.fit(*data, epochs=2, batch_size=4, shuffle=False, verbose=0).history
        split = model.fit(*data, validation_split=0.5, shuffle=False, verbose=0).history
        runs.append((history["loss"], split["val_loss"], model.predict(data[0], verbose=0)))
    assert runs[0][0] == runs[1][0] and runs[0][1] == runs[1][1]
    np.testing.assert_array_equal(runs[0][2], runs[1][2])
    a, b = keratron.Input((5,)), keratron.Input((5,))
    two = keratron.Model([a, b], keratron.layers.Add()([a, b]))
    np.testing.assert_allclose(two.predict([X[:3], X[:3]], verbose=0), 2 * X[:3])
