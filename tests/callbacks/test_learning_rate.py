import numpy as np
import pytest

import keratron as keras
from tests.callbacks._helpers import StandInModel, drive, regression_data, regression_model
from tests.conftest import require


def _plateau_model(learning_rate=0.4):
    # Zero inputs and no bias: every gradient is zero, so the loss is the same each epoch.
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1, use_bias=False)])
    model.compile(optimizer=keras.optimizers.SGD(learning_rate), loss="mse")
    return model


def test_reduce_lr_on_plateau_after_patience():
    x, y = regression_data()
    model = _plateau_model(0.4)
    seen = []
    probe = keras.callbacks.LambdaCallback(
        on_epoch_begin=lambda epoch, logs: seen.append(float(model.optimizer.learning_rate))
    )
    reduce = keras.callbacks.ReduceLROnPlateau(monitor="loss", factor=0.5, patience=2, min_lr=0.09)
    history = model.fit(
        np.zeros_like(x), y, epochs=8, batch_size=32, verbose=0, callbacks=[probe, reduce]
    )
    assert np.ptp(history.history["loss"]) < 1e-5
    # Reductions at the ends of epochs 2, 4 and 6; the last one stops at min_lr.
    np.testing.assert_allclose(seen, [0.4, 0.4, 0.4, 0.2, 0.2, 0.1, 0.1, 0.09], rtol=1e-6)
    np.testing.assert_allclose(
        history.history["learning_rate"], [0.4, 0.4, 0.4, 0.2, 0.2, 0.1, 0.1, 0.09], rtol=1e-6
    )
    np.testing.assert_allclose(float(model.optimizer.learning_rate), 0.09, rtol=1e-6)


def test_reduce_lr_keeps_rate_while_improving_and_verbose(capsys):
    x, y = regression_data()
    model = regression_model(0.05)
    reduce = keras.callbacks.ReduceLROnPlateau(monitor="loss", patience=1, verbose=1)
    history = model.fit(x, y, epochs=4, batch_size=16, verbose=0, callbacks=[reduce])
    assert np.all(np.diff(history.history["loss"]) < 0)
    np.testing.assert_allclose(float(model.optimizer.learning_rate), 0.05, rtol=1e-6)
    assert "ReduceLROnPlateau" not in capsys.readouterr().out

    model = StandInModel(learning_rate=1.0)
    reduce = keras.callbacks.ReduceLROnPlateau(monitor="loss", patience=0, verbose=1)
    drive(reduce, model, [{"loss": 1.0}, {"loss": 1.0}])
    assert "Epoch 2: ReduceLROnPlateau reducing learning rate to 0.1." in capsys.readouterr().out


def test_reduce_lr_rejects_factor_and_warns_on_missing_monitor():
    with pytest.raises(ValueError, match="factor >= 1.0"):
        keras.callbacks.ReduceLROnPlateau(factor=1.0)
    reduce = keras.callbacks.ReduceLROnPlateau(monitor="val_loss", patience=0)
    with pytest.warns(UserWarning, match="val_loss"):
        drive(reduce, StandInModel(), [{"loss": 1.0}, {"loss": 1.0}])


@pytest.mark.interop
@pytest.mark.parametrize(
    "kwargs,values",
    [
        (dict(patience=1), [1.0, 1.0, 0.9, 0.9, 0.9, 0.9, 0.5]),
        (dict(patience=1, cooldown=2, factor=0.5), [1.0] * 8),
        (dict(patience=0, min_delta=0.2, min_lr=0.005), [1.0, 0.9, 0.5, 0.45, 0.44, 0.1, 0.1]),
        (dict(patience=2, mode="max", monitor="val_acc"), [0.1, 0.2, 0.2, 0.15, 0.3, 0.3, 0.3]),
    ],
)
def test_reduce_lr_matches_keras_on_log_sequences(kwargs, values):
    keras3 = require("keras")
    logs = [{"loss": v, "val_loss": v, "val_acc": v} for v in values]

    def rates(callback):
        model = StandInModel(learning_rate=0.1)
        out = []
        probe = keras.callbacks.LambdaCallback(
            on_epoch_end=lambda epoch, logs: out.append(float(model.optimizer.learning_rate))
        )
        probe.set_model(model)
        callback.set_model(model)
        callback.on_train_begin({})
        for epoch, epoch_logs in enumerate(logs):
            callback.on_epoch_end(epoch, dict(epoch_logs))
            probe.on_epoch_end(epoch, {})
        return out

    np.testing.assert_allclose(
        rates(keras.callbacks.ReduceLROnPlateau(**kwargs)),
        rates(keras3.callbacks.ReduceLROnPlateau(**kwargs)),
        rtol=1e-7,
    )


def test_learning_rate_scheduler_sets_rate_each_epoch():
    x, y = regression_data()
    model = regression_model(0.05)
    seen = []
    probe = keras.callbacks.LambdaCallback(
        on_epoch_begin=lambda epoch, logs: seen.append(float(model.optimizer.learning_rate))
    )
    scheduler = keras.callbacks.LearningRateScheduler(lambda epoch, lr: lr * 0.5 if epoch else lr)
    history = model.fit(x, y, epochs=4, batch_size=16, verbose=0, callbacks=[scheduler, probe])
    np.testing.assert_allclose(seen, [0.05, 0.025, 0.0125, 0.00625], rtol=1e-6)
    np.testing.assert_allclose(history.history["learning_rate"], seen, rtol=1e-6)


def test_learning_rate_scheduler_rate_drives_the_updates(capsys):
    x, y = regression_data()
    model = regression_model(0.05)
    weights = []
    probe = keras.callbacks.LambdaCallback(
        on_epoch_end=lambda epoch, logs: weights.append(
            [np.array(w, copy=True) for w in model.get_weights()]
        )
    )
    # One-argument schedules are accepted too; a zero rate freezes the weights for an epoch.
    scheduler = keras.callbacks.LearningRateScheduler(lambda epoch: 0.0 if epoch == 1 else 0.05, 1)
    model.fit(x, y, epochs=3, batch_size=16, verbose=0, callbacks=[scheduler, probe])
    for a, b in zip(weights[0], weights[1]):
        np.testing.assert_array_equal(a, b)
    assert not np.array_equal(weights[1][0], weights[2][0])
    out = capsys.readouterr().out
    assert "Epoch 2: LearningRateScheduler setting learning rate to 0.0." in out


def test_learning_rate_scheduler_rejects_non_float():
    scheduler = keras.callbacks.LearningRateScheduler(lambda epoch, lr: "fast")
    with pytest.raises(ValueError, match="should be a float"):
        drive(scheduler, StandInModel(), [{"loss": 1.0}])


@pytest.mark.interop
def test_a_schedule_returning_a_scalar_tensor_runs_as_in_tf_keras():
    # tf.keras 2's documented schedule, `lr * tf.math.exp(-0.1)`, returns a tf.Tensor: tf.keras
    # 2 takes a float scalar tensor (Keras 3 refuses it).
    tf = require("tensorflow")
    keras2 = require("tf_keras")

    def schedule(epoch, lr):
        return lr if epoch < 1 else lr * tf.math.exp(-0.1)

    def rates(api):
        seen = []

        class Record(api.callbacks.Callback):
            def on_epoch_begin(self, epoch, logs=None):
                seen.append(float(np.asarray(self.model.optimizer.learning_rate)))

        model = api.Sequential([api.Input((2,)), api.layers.Dense(1)])
        model.compile(api.optimizers.SGD(0.01), "mse")
        callbacks = [api.callbacks.LearningRateScheduler(schedule), Record()]
        model.fit(np.ones((4, 2)), np.ones((4, 1)), epochs=4, verbose=0, callbacks=callbacks)
        return seen

    np.testing.assert_allclose(rates(keras), rates(keras2), rtol=1e-6)
    for bad in (lambda e, lr: 1, lambda e, lr: tf.constant(1), lambda e, lr: np.ones(2)):
        model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
        model.compile("sgd", "mse")
        with pytest.raises(ValueError, match="should be a float"):
            model.fit(
                np.ones((4, 2)),
                np.ones((4, 1)),
                verbose=0,
                callbacks=[keras.callbacks.LearningRateScheduler(bad)],
            )
