"""MultiOptimizer / OptimizerMap against real Keras 3 (torch backend): the same model and data
trained by fit with a different optimizer per variable group; weights, optimizer variables
and iterations must agree."""

import numpy as np
import pytest

import keratron as kt
from tests.conftest import require

pytestmark = pytest.mark.interop


def _optimizer(k):
    opt_map = k.optimizers.OptimizerMap(
        k.optimizers.Adam(0.01, name="adam"),
        {
            "net/dense/bias": k.optimizers.SGD(0.1, momentum=0.5, name="sgd"),
            ".*/out/.*": k.optimizers.RMSprop(0.005, name="rms"),
        },
    )
    return k.optimizers.MultiOptimizer(opt_map, name="multi")


def _fit(k, weights, x, y):
    k.utils.set_random_seed(0)
    model = k.Sequential(
        [k.Input((4,)), k.layers.Dense(5, activation="tanh", name="dense"),
         k.layers.Dense(3, name="hidden"), k.layers.Dense(1, name="out")],
        name="net",  # explicit: the variable paths the map matches start with it
    )  # fmt: skip
    model.set_weights(weights)
    model.compile(optimizer=_optimizer(k), loss="mse")
    history = model.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0)
    return model, history.history["loss"]


def test_multi_optimizer_matches_keras():
    keras = require("keras")
    rng = np.random.default_rng(5)
    shapes = [(4, 5), (5,), (5, 3), (3,), (3, 1), (1,)]
    weights = [rng.normal(size=s).astype("float32") * 0.5 for s in shapes]
    x = rng.normal(size=(32, 4)).astype("float32")
    y = (x @ rng.normal(size=(4, 1))).astype("float32")
    ours, ours_loss = _fit(kt, weights, x, y)
    theirs, theirs_loss = _fit(keras, weights, x, y)
    np.testing.assert_allclose(ours_loss, theirs_loss, rtol=1e-5)
    for a, b in zip(ours.get_weights(), theirs.get_weights()):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    ours_vars = ours.optimizer.variables
    theirs_vars = theirs.optimizer.variables
    assert [v.name for v in ours_vars] == [v.name for v in theirs_vars]
    for a, b in zip(ours_vars, theirs_vars):
        np.testing.assert_allclose(
            a.numpy(), keras.ops.convert_to_numpy(b), rtol=1e-5, atol=1e-6, err_msg=a.name
        )
    assert [o.name for o in ours.optimizer.optimizers] == ["sgd", "rms", "adam"]
    assert [int(o.iterations.numpy()) for o in ours.optimizer.optimizers] == [8, 8, 8]
    assert int(ours.optimizer.iterations.numpy()) == 8
    with pytest.raises(AttributeError, match="individual sub-optimizers"):
        ours.optimizer.learning_rate  # noqa: B018


def test_config_round_trip_and_errors():
    opt = _optimizer(kt)
    again = kt.optimizers.deserialize(kt.optimizers.serialize(opt))
    assert isinstance(again, kt.optimizers.MultiOptimizer)
    assert [type(o).__name__ for o in again.optimizers] == ["SGD", "RMSprop", "Adam"]
    assert again._optimizer_map["net/out/kernel"].name == "rms"
    opt_map = kt.optimizers.OptimizerMap(kt.optimizers.Adam())
    with pytest.raises(ValueError, match="cannot be MultiOptimizer"):
        opt_map["x"] = opt
    opt_map["a.*"] = kt.optimizers.SGD()
    opt_map[".*b"] = kt.optimizers.SGD()
    with pytest.raises(ValueError, match="Multiple optimizers assigned to variable ab"):
        opt_map["ab"]  # noqa: B018
    with pytest.raises(TypeError, match="default_optimizer"):
        kt.optimizers.OptimizerMap("adam")


def test_swap_ema_weights_with_multi_optimizer():
    x = np.ones((8, 4), "float32")
    model = kt.Sequential([kt.Input((4,)), kt.layers.Dense(1, name="dense")])
    opt = kt.optimizers.MultiOptimizer(
        kt.optimizers.OptimizerMap(kt.optimizers.SGD(0.1, use_ema=True),
                                   {".*/dense/bias": kt.optimizers.SGD(0.1)})
    )  # fmt: skip
    model.compile(optimizer=opt, loss="mse")
    history = model.fit(
        x, x[:, :1], epochs=2, verbose=0, validation_data=(x, x[:, :1]),
        callbacks=[kt.callbacks.SwapEMAWeights()],
    )  # fmt: skip
    assert len(history.history["val_loss"]) == 2
