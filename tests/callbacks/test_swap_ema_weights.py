"""SwapEMAWeights against real Keras: validation losses computed with the moving averages,
the weights the next callback sees with `swap_on_epoch`, and the weights fit leaves."""

import numpy as np
import pytest

import keratron
from tests.callbacks._helpers import regression_data
from tests.conftest import require


def _run(module, weights, swap_on_epoch):
    x, y = regression_data(48)
    xv, yv = regression_data(16, seed=1)
    model = module.Sequential(
        [module.Input((4,)), module.layers.Dense(3, activation="tanh"), module.layers.Dense(1)]
    )
    model.set_weights(weights)
    model.compile(
        optimizer=module.optimizers.SGD(0.05, momentum=0.5, use_ema=True, ema_momentum=0.8),
        loss="mse",
    )
    seen = []
    probe = module.callbacks.LambdaCallback(
        on_epoch_end=lambda epoch, logs: seen.append([np.array(w) for w in model.get_weights()])
    )
    history = model.fit(
        x,
        y,
        batch_size=8,
        epochs=3,
        shuffle=False,
        verbose=0,
        validation_data=(xv, yv),
        callbacks=[module.callbacks.SwapEMAWeights(swap_on_epoch=swap_on_epoch), probe],
    )
    evaluated = model.evaluate(xv, yv, verbose=0)
    return history.history, seen, model.get_weights(), evaluated


@pytest.mark.parametrize("swap_on_epoch", [False, True])
def test_swap_ema_weights_matches_keras(swap_on_epoch):
    keras = require("keras")
    rng = np.random.default_rng(3)
    weights = [rng.normal(size=s).astype("float32") * 0.5 for s in [(4, 3), (3,), (3, 1), (1,)]]
    ours = _run(keratron, weights, swap_on_epoch)
    theirs = _run(keras, weights, swap_on_epoch)
    for key in ("loss", "val_loss"):
        np.testing.assert_allclose(ours[0][key], theirs[0][key], rtol=1e-5)
    for a, b in zip(ours[1], theirs[1]):
        for u, v in zip(a, b):
            np.testing.assert_allclose(u, v, rtol=1e-5, atol=1e-6)
    for u, v in zip(ours[2], theirs[2]):
        np.testing.assert_allclose(u, v, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ours[3], theirs[3], rtol=1e-5)


def test_swap_ema_weights_needs_use_ema():
    x, y = regression_data(16)
    model = keratron.Sequential([keratron.Input((4,)), keratron.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    with pytest.raises(ValueError, match="use_ema=True"):
        model.fit(
            x, y, verbose=0, validation_data=(x, y), callbacks=[keratron.callbacks.SwapEMAWeights()]
        )


def test_predict_restores_trained_weights():
    x, y = regression_data(16)
    model = keratron.Sequential([keratron.Input((4,)), keratron.layers.Dense(1)])
    model.compile(optimizer=keratron.optimizers.SGD(0.1, use_ema=True), loss="mse")
    model.fit(x, y, epochs=2, verbose=0)
    # The EMA lags behind the trained weights; predict with the callback uses the EMA.
    average = [np.array(a.numpy()) for a in model.optimizer._model_variables_moving_average]
    model.optimizer._model_variables_moving_average[0].assign(average[0] + 1.0)
    before = [w.copy() for w in model.get_weights()]
    swap = keratron.callbacks.SwapEMAWeights()
    swap.set_model(model)
    plain = model.predict(x, verbose=0)
    with_ema = model.predict(x, verbose=0, callbacks=[swap])
    np.testing.assert_allclose(with_ema - plain, x.sum(axis=1, keepdims=True), rtol=1e-5)
    for a, b in zip(before, model.get_weights()):
        np.testing.assert_array_equal(a, b)
