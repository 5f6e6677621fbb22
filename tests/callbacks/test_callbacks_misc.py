import http.server
import json
import socket
import threading
import urllib.parse

import numpy as np
import pytest

import keratron as keras
from tests.callbacks._helpers import StandInModel, drive, regression_data, regression_model


def test_all_callbacks_exported_under_keras_names():
    for name in [
        "Callback",
        "CallbackList",
        "History",
        "ProgbarLogger",
        "EarlyStopping",
        "ReduceLROnPlateau",
        "LearningRateScheduler",
        "CSVLogger",
        "TerminateOnNaN",
        "LambdaCallback",
        "RemoteMonitor",
        "TensorBoard",
    ]:
        assert issubclass(getattr(keras.callbacks, name), keras.callbacks.Callback)
        assert name in keras.callbacks.__all__


def test_terminate_on_nan_stops_at_the_bad_batch(capsys):
    x, y = regression_data(64)
    x[40] = np.nan  # batch 2 of 16-sample batches, in order
    model = regression_model()
    batches = []
    count = keras.callbacks.LambdaCallback(
        on_train_batch_end=lambda batch, logs: batches.append((batch, logs["loss"]))
    )
    history = model.fit(
        x,
        y,
        epochs=5,
        batch_size=16,
        shuffle=False,
        verbose=0,
        callbacks=[count, keras.callbacks.TerminateOnNaN()],
    )
    assert [b for b, _ in batches] == [0, 1, 2]
    assert np.isfinite(batches[1][1]) and np.isnan(batches[2][1])
    assert len(history.history["loss"]) == 1 and model.stop_training
    assert "Batch 2: Invalid loss, terminating training" in capsys.readouterr().out


def test_terminate_on_nan_inf_and_raise_error():
    stop = keras.callbacks.TerminateOnNaN(raise_error=True)
    stop.set_model(StandInModel())
    stop.on_train_batch_end(0, {"loss": 1.0})
    with pytest.raises(RuntimeError, match="NaN or Inf loss encountered at batch 3"):
        stop.on_train_batch_end(3, {"loss": float("inf")})
    quiet = keras.callbacks.TerminateOnNaN()
    model = StandInModel()
    quiet.set_model(model)
    quiet.on_train_batch_end(0, {"accuracy": float("nan")})  # only the loss is watched
    assert not model.stop_training


def test_lambda_callback_hooks_fire_in_fit_order():
    x, y = regression_data(48)
    events = []
    cb = keras.callbacks.LambdaCallback(
        on_train_begin=lambda logs: events.append(("train_begin", logs)),
        on_epoch_begin=lambda epoch, logs: events.append(("epoch_begin", epoch)),
        on_train_batch_begin=lambda batch, logs: events.append(("batch_begin", batch)),
        on_train_batch_end=lambda batch, logs: events.append(("batch_end", batch, set(logs))),
        on_epoch_end=lambda epoch, logs: events.append(("epoch_end", epoch, set(logs))),
        on_train_end=lambda logs: events.append(("train_end", set(logs))),
        on_test_end=lambda logs: events.append(("test_end", set(logs))),
    )
    model = regression_model()
    model.fit(
        x, y, validation_data=(x[:8], y[:8]), epochs=2, batch_size=24, verbose=0, callbacks=[cb]
    )
    epoch = [
        ("batch_begin", 0),
        ("batch_end", 0, {"loss", "mae"}),
        ("batch_begin", 1),
        ("batch_end", 1, {"loss", "mae"}),
        ("test_end", {"loss", "mae"}),
    ]
    full = {"loss", "mae", "val_loss", "val_mae"}
    assert events == (
        [("train_begin", {}), ("epoch_begin", 0)]
        + epoch
        + [("epoch_end", 0, full)]
        + [("epoch_begin", 1)]
        + epoch
        + [("epoch_end", 1, full), ("train_end", full)]
    )


def test_lambda_callback_rejects_unknown_hook():
    with pytest.raises(ValueError, match="on_epoch_finish"):
        keras.callbacks.LambdaCallback(on_epoch_finish=print)


def test_callback_list_passes_logs_as_keras_does():
    seen = []
    cb = keras.callbacks.LambdaCallback(
        on_epoch_begin=lambda epoch, logs: seen.append((epoch, logs)),
        on_train_batch_begin=lambda batch, *, logs: seen.append((batch, logs)),
        on_predict_begin=lambda logs: seen.append(logs),
    )
    cbs = keras.callbacks.CallbackList([cb])
    cbs.on_epoch_begin(3)
    cbs.on_train_batch_begin(5)
    cbs.on_predict_begin()
    assert seen == [(3, {}), (5, {}), {}]  # Keras passes {} when no logs are given


class _Recorder(http.server.BaseHTTPRequestHandler):
    received = []

    def do_POST(self):  # noqa: N802 -- the name http.server dispatches to
        body = self.rfile.read(int(self.headers["Content-Length"]))
        _Recorder.received.append((self.path, self.headers["Content-Type"], body))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    _Recorder.received = []
    httpd = http.server.HTTPServer(("127.0.0.1", 0), _Recorder)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def test_remote_monitor_posts_epoch_logs(server):
    x, y = regression_data(32)
    model = regression_model()
    history = model.fit(
        x,
        y,
        epochs=2,
        verbose=0,
        callbacks=[
            keras.callbacks.RemoteMonitor(root=server, path="/form", field="payload"),
            keras.callbacks.RemoteMonitor(
                root=server, path="/json", send_as_json=True, headers={"X-Run": "1"}
            ),
        ],
    )
    form = [r for r in _Recorder.received if r[0] == "/form"]
    sent = [r for r in _Recorder.received if r[0] == "/json"]
    assert len(form) == 2 and len(sent) == 2
    assert form[0][1] == "application/x-www-form-urlencoded"
    payload = json.loads(urllib.parse.parse_qs(form[1][2].decode())["payload"][0])
    assert payload == {
        "epoch": 1,
        "loss": history.history["loss"][1],
        "mae": history.history["mae"][1],
    }
    assert sent[0][1] == "application/json"
    assert json.loads(sent[0][2]) == {
        "epoch": 0,
        "loss": history.history["loss"][0],
        "mae": history.history["mae"][0],
    }


def test_remote_monitor_unwraps_numpy_and_warns_when_unreachable(server):
    monitor = keras.callbacks.RemoteMonitor(root=server, send_as_json=True)
    drive(monitor, StandInModel(), [{"loss": np.float32(0.5), "v": np.array(2)}])
    assert json.loads(_Recorder.received[0][2]) == {"epoch": 0, "loss": 0.5, "v": 2}

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again before the request: nothing listens
    monitor = keras.callbacks.RemoteMonitor(root=f"http://127.0.0.1:{port}")
    with pytest.warns(UserWarning, match="Could not reach RemoteMonitor root server"):
        drive(monitor, StandInModel(), [{"loss": 1.0}])


def test_callback_list_knows_which_batch_hooks_do_something():
    from keratron.callbacks.callback import CallbackList

    class Counter(keras.callbacks.Callback):
        def on_batch_end(self, batch, logs=None):  # the tf.keras 2 alias counts too
            pass

    plain = CallbackList([], add_history=True)
    assert not plain.implements("on_train_batch_end")
    assert not plain.implements("on_test_batch_end")
    assert CallbackList([Counter()]).implements("on_train_batch_end")
    lam = CallbackList([keras.callbacks.LambdaCallback(on_test_batch_end=lambda b, logs: None)])
    assert lam.implements("on_test_batch_end") and not lam.implements("on_train_batch_end")


def test_batch_end_logs_reach_a_lambda_callback_as_floats():
    seen = []
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    model.compile("sgd", "mse")
    cb = keras.callbacks.LambdaCallback(on_train_batch_end=lambda b, logs: seen.append(logs))
    model.fit(
        np.ones((8, 3), "float32"),
        np.ones((8, 1), "float32"),
        batch_size=4,
        callbacks=[cb],
        verbose=0,
    )
    assert len(seen) == 2 and all(isinstance(s["loss"], float) for s in seen)
