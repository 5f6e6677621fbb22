"""Every hook receives a logs dict, as in Keras: `{}` where the trainer has nothing to report
(the `on_*_begin` hooks), never None; checked against Keras 3 (torch backend)."""

import numpy as np
import pytest

import keratron
from tests.conftest import require

HOOKS = [
    "on_train_begin",
    "on_train_end",
    "on_epoch_begin",
    "on_epoch_end",
    "on_train_batch_begin",
    "on_train_batch_end",
    "on_test_begin",
    "on_test_end",
    "on_test_batch_begin",
    "on_test_batch_end",
    "on_predict_begin",
    "on_predict_end",
    "on_predict_batch_begin",
    "on_predict_batch_end",
]


def _record(k):
    seen = {}

    class Recorder(k.callbacks.Callback):
        pass

    def make(name):
        def hook(self, *args, logs=None):
            if args and ("batch" in name or "epoch" in name):
                logs = args[1] if len(args) > 1 else logs
            elif args:
                logs = args[0]
            seen.setdefault(name, type(logs).__name__ if logs is None else sorted(logs))

        return hook

    for name in HOOKS:
        setattr(Recorder, name, make(name))
    return seen, Recorder()


def _run(k):
    x = np.random.default_rng(0).random((8, 3), dtype=np.float32)
    y = x.sum(axis=1, keepdims=True)
    model = k.Sequential([k.Input((3,)), k.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    seen, cb = _record(k)
    model.fit(x, y, batch_size=4, epochs=1, verbose=0, callbacks=[cb])
    model.evaluate(x, y, batch_size=4, verbose=0, callbacks=[cb])
    model.predict(x, batch_size=4, verbose=0, callbacks=[cb])
    return seen


@pytest.mark.interop
def test_begin_hooks_get_an_empty_dict_as_in_keras():
    keras = require("keras")
    ours, theirs = _run(keratron), _run(keras)
    assert set(ours) == set(HOOKS)
    for name in HOOKS:
        if name.endswith("_begin"):
            assert ours[name] == theirs[name] == [], name
        else:
            assert ours[name] != "NoneType", name


def test_callback_list_gives_empty_dict_when_called_without_logs():
    got = []
    cb = keratron.callbacks.LambdaCallback(
        on_epoch_begin=lambda epoch, logs: got.append(logs),
        on_train_begin=lambda logs: got.append(logs),
        on_train_batch_begin=lambda batch, logs: got.append(logs),
    )
    callbacks = keratron.callbacks.CallbackList([cb])
    callbacks.on_train_begin()
    callbacks.on_epoch_begin(0)
    callbacks.on_train_batch_begin(0)
    assert got == [{}, {}, {}]
