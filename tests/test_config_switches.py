"""keras.config's switches: the debugging caps on epochs and steps (honoured by fit, evaluate
and predict as in real Keras), unsafe deserialization, traceback filtering, flash attention."""

import os
import subprocess
import sys
import warnings

import numpy as np
import pytest

import keratron
from keratron import config
from tests.conftest import require


@pytest.fixture
def caps(monkeypatch):
    keras = require("keras")
    from keras.src.backend import config as keras_config

    for module in (config, keras_config):
        monkeypatch.setattr(module, "_MAX_EPOCHS", None)
        monkeypatch.setattr(module, "_MAX_STEPS_PER_EPOCH", None)
    return keras


def _run_capped(module, max_epochs, max_steps, steps_per_epoch):
    module.config.set_max_epochs(max_epochs)
    module.config.set_max_steps_per_epoch(max_steps)
    model = module.Sequential([module.Input((3,)), module.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    x = np.ones((40, 3), "float32")
    seen = {"train": 0, "test": 0, "predict": 0}
    count = module.callbacks.LambdaCallback(
        on_train_batch_end=lambda b, logs: seen.__setitem__("train", seen["train"] + 1),
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        history = model.fit(
            x,
            x[:, :1],
            epochs=5,
            batch_size=4,
            verbose=0,
            callbacks=[count],
            steps_per_epoch=steps_per_epoch,
        )
    messages = sorted({str(w.message) for w in caught if "Limiting" in str(w.message)})
    predictions = model.predict(x, batch_size=4, verbose=0)
    return len(history.history["loss"]), seen["train"], len(predictions), messages


@pytest.mark.parametrize(
    "max_epochs,max_steps,steps_per_epoch",
    [(2, None, None), (None, 3, None), (3, 4, 6), (9, 20, 2)],
)
def test_caps_match_keras(caps, max_epochs, max_steps, steps_per_epoch):
    keras = caps
    ours = _run_capped(keratron, max_epochs, max_steps, steps_per_epoch)
    theirs = _run_capped(keras, max_epochs, max_steps, steps_per_epoch)
    assert ours == theirs
    assert keratron.config.max_epochs() == max_epochs
    assert keratron.config.max_steps_per_epoch() == max_steps


def test_caps_from_environment():
    code = "import keratron as k; print(k.config.max_epochs(), k.config.max_steps_per_epoch())"
    env = {"KERAS_MAX_EPOCHS": "3", "KERAS_MAX_STEPS_PER_EPOCH": "7"}
    out = subprocess.run(
        [sys.executable, "-c", code], env={**os.environ, **env}, capture_output=True, text=True
    )
    assert out.stdout.split() == ["3", "7"], out.stderr


def test_enable_unsafe_deserialization(monkeypatch, tmp_path):
    from keratron.layers import core

    monkeypatch.setattr(config, "_UNSAFE_DESERIALIZATION", False)
    monkeypatch.setattr(core, "_UNSAFE_DESERIALIZATION", False)
    cfg = keratron.layers.Lambda(lambda x: x * 2.0).get_config()
    with pytest.raises(ValueError, match=r"keratron\.config\.enable_unsafe_deserialization"):
        keratron.layers.Lambda.from_config(cfg)
    keratron.config.enable_unsafe_deserialization()
    layer = keratron.layers.Lambda.from_config(cfg)
    np.testing.assert_allclose(layer(np.ones((1, 2), "float32")).numpy(), 2.0)
    # As in Keras, an explicit safe_mode=True (load_model's default) still refuses.
    with pytest.raises(ValueError, match="safe mode"):
        keratron.layers.Lambda.from_config(cfg, safe_mode=True)
    inputs = keratron.Input((2,))
    model = keratron.Model(inputs, keratron.layers.Lambda(lambda x: x + 1.0)(inputs))
    path = str(tmp_path / "m.keras")
    model.save(path)
    with pytest.raises(ValueError, match="safe_mode=False"):
        keratron.saving.load_model(path)


def test_traceback_and_flash_switches_match_keras():
    keras = require("keras")
    for module in (keratron, keras):
        assert module.config.is_traceback_filtering_enabled() is True
        module.config.disable_traceback_filtering()
        assert module.config.is_traceback_filtering_enabled() is False
        module.config.enable_traceback_filtering()
        assert module.config.is_flash_attention_enabled() is None
        module.config.disable_flash_attention()
        assert module.config.is_flash_attention_enabled() is False
        module.config.enable_flash_attention()
        assert module.config.is_flash_attention_enabled() is None


def test_environ_get_follows_every_change_of_the_environment(monkeypatch):
    name = "KERATRON_TEST_ENVIRON_GET"
    monkeypatch.delenv(name, raising=False)
    assert config.environ_get(name) is None and config.environ_get(name, "d") == "d"
    for value in ("tf32", "ieee", "", "ünïcode", "tf32"):
        monkeypatch.setenv(name, value)
        assert config.environ_get(name, "d") == value == os.environ.get(name, "d")
    os.environ.pop(name)
    assert config.environ_get(name, "gone") == "gone"
    os.environ[name] = "again"  # os.environ's own spelling, not monkeypatch's
    try:
        assert config.environ_get(name) == "again"
    finally:
        del os.environ[name]
