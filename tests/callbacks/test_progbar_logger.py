"""ProgbarLogger: what the bar shows, and how often it formats the running values."""

import re

import numpy as np
import torch

import keratron as keras
from keratron.autodiff.tensor import Tensor
from keratron.callbacks import progbar_logger
from keratron.models.trainer import _python_logs
from tests.callbacks._helpers import regression_data, regression_model


def test_fit_shows_each_epoch_and_its_final_values(capsys):
    x, y = regression_data()
    model = regression_model()
    history = model.fit(x, y, epochs=2, batch_size=8, verbose=1)
    out = capsys.readouterr().out
    assert "Epoch 1/2" in out and "Epoch 2/2" in out
    assert "8/8" in out
    for epoch in range(2):
        for name in ("loss", "mae"):
            assert f"{name}: {history.history[name][epoch]:.4f}" in out


class _Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_each_redraw_shows_its_batch_and_values_are_formatted_only_then(monkeypatch, capsys):
    formatted = []
    fmt = progbar_logger._fmt
    monkeypatch.setattr(progbar_logger, "_fmt", lambda logs: formatted.append(logs) or fmt(logs))
    bar = keras.callbacks.ProgbarLogger()
    bar.set_params({"verbose": 1, "epochs": 1, "steps": 300})
    bar.on_epoch_begin(0)
    clock, tq = _Clock(), bar._bar
    clock.now = tq.last_print_t
    tq._time = clock  # the bar's clock, as tqdm reads it
    interval = tq.mininterval
    redraws = []
    real_refresh = tq.refresh
    monkeypatch.setattr(tq, "refresh", lambda **kw: (redraws.append((tq.n, tq.postfix)),
                                                       real_refresh(**kw))[1])  # fmt: skip
    for i in range(50):  # no time passes: no redraw, nothing formatted
        bar.on_train_batch_end(i, {"loss": float(i)})
    assert formatted == [] and redraws == []
    for i in range(50, 80):
        clock.now += 0.6 * interval
        bar.on_train_batch_end(i, {"loss": float(i)})
    # Every redraw shows the values of the batch it counts, and only those batches' values
    # were formatted.
    assert redraws and all(postfix == f"loss: {n - 1:.4f}" for n, postfix in redraws)
    assert [logs["loss"] for logs in formatted] == [float(n - 1) for n, _ in redraws]
    assert len(formatted) < 30
    bar.on_epoch_end(0, {"loss": 299.0})
    assert "loss: 299.0000" in capsys.readouterr().out


def test_python_logs_reads_tensors_of_one_element():
    logs = {
        "b": Tensor(torch.tensor([[2.5]])),
        "a": Tensor(torch.tensor(0.25, dtype=torch.bfloat16)),
        "c": Tensor(torch.tensor(3)),
        "d": np.float32(1.5),
        "e": Tensor(torch.tensor([1.0, 2.0])),
        "nested": {"f": Tensor(torch.tensor(True))},
    }
    out = _python_logs(logs)
    assert list(out) == ["a", "b", "c", "d", "e", "f"]
    assert out["a"] == 0.25 and out["b"] == 2.5 and out["c"] == 3.0 and out["f"] == 1.0
    assert all(type(out[k]) is float for k in "abcdf")
    assert isinstance(out["e"], Tensor)  # more than one element: left as it is
    assert re.fullmatch(r"\d+\.\d+", f"{out['d']}")
