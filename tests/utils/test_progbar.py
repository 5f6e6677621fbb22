"""keras.utils.Progbar and interactive logging: the text, escapes included, is compared with
real Keras's for the same updates under the same (frozen) clock."""

import logging
import re

import numpy as np
import pytest

import keratron
from keratron.utils import progbar as kt_progbar
from tests.conftest import require


class _Clock:
    def __init__(self):
        self.now = 1000.0

    def time(self):
        return self.now


def _run(module, clock, capsys, steps, **kwargs):
    """Feeds `steps` (current, values, seconds elapsed before the update) to a Progbar of
    `module`, and returns what it printed."""
    bar = module.Progbar(**kwargs)
    for current, values, dt in steps:
        clock.now += dt
        if current is None:
            bar.add(1, values)
        else:
            bar.update(current, values)
    return capsys.readouterr().out


SCENARIOS = {
    "known_target": (
        {"target": 5},
        [(1, [("loss", 2.0), ("acc", 0.5)], 0.5)]
        + [(i, [("loss", 2.0 / i), ("acc", 0.1 * i)], 0.02 * i) for i in range(2, 6)],
    ),
    "stateful_and_tiny_values": (
        {"target": 12, "stateful_metrics": ["acc"], "width": 10},
        [(i, [("loss", 1e-5 * i), ("acc", i / 12)], 0.3) for i in range(1, 13)],
    ),
    "stateless_list_and_samples": (
        {"target": 300, "stateless_metrics": ["loss"], "unit_name": "sample"},
        [(i * 100, [("loss", 3.0 - i), ("lr", 0.01)], 40.0) for i in range(1, 4)],
    ),
    "unknown_target_and_add": (
        {"target": None},
        [(None, [("loss", 1.0 * i)], 0.1) for i in range(4)],
    ),
    "verbose2": (
        {"target": 4, "verbose": 2},
        [(i, [("loss", 0.5 * i), ("mae", 1e-4)], 2.0) for i in range(1, 5)],
    ),
    "long_eta": (
        {"target": 1000},
        [(1, [], 1.0), (2, [], 5.0), (3, [], 5.0), (1000, [], 1.0)],
    ),
}


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_progbar_text_matches_keras(name, monkeypatch, capsys):
    require("keras")
    from keras.src.utils import progbar as keras_progbar

    kwargs, steps = SCENARIOS[name]
    outputs = []
    for module in (kt_progbar, keras_progbar):
        clock = _Clock()
        monkeypatch.setattr(module.time, "time", clock.time)
        outputs.append(_run(module, clock, capsys, steps, **kwargs))
    ours, theirs = outputs
    assert ours and ours == theirs


def test_progbar_arguments():
    with pytest.raises(ValueError, match="Only one of `stateful_metrics`"):
        keratron.utils.Progbar(3, stateful_metrics=["a"], stateless_metrics=["b"])


def test_interactive_logging_switch(caplog, capsys):
    keras = require("keras")
    assert keratron.config.is_interactive_logging_enabled() is True
    assert keras.config.is_interactive_logging_enabled() is True
    assert keratron.utils.disable_interactive_logging is keratron.config.disable_interactive_logging
    keratron.config.disable_interactive_logging()
    try:
        assert not keratron.utils.is_interactive_logging_enabled()
        with caplog.at_level(logging.INFO, logger="keratron"):
            bar = keratron.utils.Progbar(2, verbose=2)
            bar.update(1, [("loss", 1.0)])
            bar.update(2, [("loss", 3.0)])
            model = keratron.Sequential([keratron.Input((3,)), keratron.layers.Dense(1)])
            model.compile(optimizer="sgd", loss="mse")
            x = np.ones((8, 3), "float32")
            stop = keratron.callbacks.EarlyStopping(
                monitor="loss", patience=0, min_delta=100.0, verbose=1
            )
            model.fit(x, x[:, :1], epochs=3, batch_size=4, verbose=1, callbacks=[stop])
            model.summary()
        assert capsys.readouterr().out == ""
        logged = [r.getMessage() for r in caplog.records if r.name == "keratron"]
        # A finishing update shows its values as given (Keras: epoch-level values).
        assert logged[0].startswith("2/2 - 0s -") and logged[0].endswith("loss: 3.0000\n")
        assert logged[1:5:2] == ["Epoch 1/3", "Epoch 2/3"]
        assert all(re.fullmatch(r"\d+s - loss: \d\.\d{4}", m) for m in logged[2:5:2])
        assert "Epoch 2: early stopping" in logged  # callbacks' messages are logged too
        assert any("Total params" in m for m in logged)
    finally:
        keratron.config.enable_interactive_logging()
    assert keratron.config.is_interactive_logging_enabled()
    keratron.utils.io_utils.print_msg("back on stdout")
    assert capsys.readouterr().out == "back on stdout\n"
