"""A functional model's own `training` value overrides one recorded when its graph was built, as
in Keras 3: `base_model(x, training=False)` inside a model runs in training mode under `fit`
(the transfer-learning guide's fine-tuning: BatchNormalization then normalises by batch
statistics and updates its moving ones once the base is trainable again), and a
`Dropout(...)(x, training=True)` node is off under `predict`. A call with no `training` keeps
the recorded value. Checked against Keras on the torch backend with the same weights."""

import numpy as np
import pytest

import keratron
from tests.conftest import require

X = np.random.RandomState(0).rand(8, 4).astype("float32") * 3 + 1
Y = np.random.RandomState(1).rand(8, 1).astype("float32")


def _transfer_model(k, base_trainable):
    base = k.Sequential(
        [k.Input((4,)), k.layers.Dense(4), k.layers.BatchNormalization()], name="base"
    )
    inputs = k.Input((4,))
    outputs = k.layers.Dense(1)(base(inputs, training=False))
    model = k.Model(inputs, outputs)
    base.trainable = base_trainable
    return model, base


def _fit_one_step(k, model):
    model.compile(optimizer=k.optimizers.SGD(0.1), loss="mse")
    model.fit(X, Y, batch_size=8, epochs=1, verbose=0, shuffle=False)
    return [k.ops.convert_to_numpy(w) for w in model.weights]


@pytest.mark.interop
@pytest.mark.parametrize("base_trainable", [True, False])
def test_fit_overrides_a_nested_models_training_false_as_keras(base_trainable):
    keras = require("keras")
    theirs, their_base = _transfer_model(keras, base_trainable)
    ours, our_base = _transfer_model(keratron, base_trainable)
    ours.set_weights([keras.ops.convert_to_numpy(w) for w in theirs.weights])
    before = [w.numpy() for w in our_base.layers[1].weights]

    expected = _fit_one_step(keras, theirs)
    got = _fit_one_step(keratron, ours)
    for e, g in zip(expected, got):
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6)
    moved = [not np.allclose(w.numpy(), b) for w, b in zip(our_base.layers[1].weights, before)]
    # A trainable BatchNormalization runs on batch statistics and moves its moving mean and
    # variance; a frozen one stays in inference mode.
    assert moved[2:] == [base_trainable, base_trainable]


def _dropout_model(k):
    inputs = k.Input((4,))
    return k.Model(inputs, k.layers.Dropout(0.5)(inputs, training=True))


@pytest.mark.interop
def test_predict_overrides_a_dropout_nodes_training_true_as_keras():
    keras = require("keras")
    theirs, ours = _dropout_model(keras), _dropout_model(keratron)
    np.testing.assert_array_equal(theirs.predict(X, verbose=0), X)
    np.testing.assert_array_equal(ours.predict(X, verbose=0), X)
    np.testing.assert_array_equal(ours(X, training=False).numpy(), X)
    # With no `training` given, the node's own `training=True` holds: some units are dropped.
    assert (keras.ops.convert_to_numpy(theirs(X)) == 0).any()
    assert (ours(X).numpy() == 0).any()


@pytest.mark.interop
def test_direct_calls_of_a_model_with_a_nested_training_false_as_keras():
    keras = require("keras")
    keras.utils.set_random_seed(0)  # the same weights whichever tests ran before
    theirs, _ = _transfer_model(keras, True)
    ours, _ = _transfer_model(keratron, True)
    ours.set_weights([keras.ops.convert_to_numpy(w) for w in theirs.weights])
    for kwargs in ({"training": True}, {}, {"training": False}):
        expected = keras.ops.convert_to_numpy(theirs(X, **kwargs))
        # Outputs of order 1 through a batch norm over 8 samples: the two variance formulas
        # round apart by a few float32 ulps of the outputs (an absolute, not a relative, error
        # for outputs near 0).
        np.testing.assert_allclose(ours(X, **kwargs).numpy(), expected, rtol=1e-5, atol=1e-5)
