"""Models pickle as Keras 3's do (their `.keras` archive): predictions, compile state and the
optimizer's progress survive `pickle`, `copy.deepcopy` and a process boundary."""

import copy
import pickle

import numpy as np
import pytest

import keratron as kt
from tests.conftest import require


@kt.saving.register_keras_serializable(package="pickle_test")
class Scaled(kt.Model):
    def __init__(self, units=3, **kwargs):
        super().__init__(**kwargs)
        self.units = units
        self.dense = kt.layers.Dense(units)

    def call(self, x):
        return self.dense(x) * 2.0

    def get_config(self):
        return {**super().get_config(), "units": self.units}


def _sequential():
    return kt.Sequential(
        [kt.Input((4,)), kt.layers.Dense(5, activation="relu"), kt.layers.Dense(3)]
    )


def _functional():
    x = kt.Input((4,))
    h = kt.layers.Dense(5)(x)
    return kt.Model(x, kt.layers.Dense(3)(kt.ops.mean(kt.ops.stack([h, h * 2.0]), axis=0)))


def _subclassed():
    model = Scaled(3)
    model(np.zeros((1, 4), "float32"))
    return model


@pytest.mark.parametrize("build", [_sequential, _functional, _subclassed])
@pytest.mark.parametrize("how", ["pickle", "deepcopy"])
def test_round_trip_keeps_predictions_and_training_state(build, how):
    rng = np.random.default_rng(0)
    x, y = rng.random((16, 4), dtype=np.float32), rng.random((16, 3), dtype=np.float32)
    model = build()
    model.compile(optimizer=kt.optimizers.Adam(0.01), loss="mse")
    model.fit(x, y, batch_size=4, epochs=1, verbose=0)
    again = pickle.loads(pickle.dumps(model)) if how == "pickle" else copy.deepcopy(model)
    assert type(again) is type(model) and again is not model
    np.testing.assert_array_equal(again.predict(x, verbose=0), model.predict(x, verbose=0))
    assert int(again.optimizer.iterations.numpy()) == 4
    # Both continue identically: the optimizer's moments came along.
    model.fit(x, y, batch_size=4, epochs=1, verbose=0, shuffle=False)
    again.fit(x, y, batch_size=4, epochs=1, verbose=0, shuffle=False)
    np.testing.assert_allclose(again.predict(x, verbose=0), model.predict(x, verbose=0), rtol=1e-6)
    # The copy is independent of the original.
    assert again.weights[0] is not model.weights[0]


@pytest.mark.interop
def test_keras_models_pickle_too():
    keras = require("keras")
    theirs = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3)])
    x = np.ones((2, 4), "float32")
    np.testing.assert_array_equal(
        pickle.loads(pickle.dumps(theirs)).predict(x, verbose=0), theirs.predict(x, verbose=0)
    )
