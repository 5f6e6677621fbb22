"""A save interrupted at any moment leaves the previous file byte-identical or the new file
complete: a child process saving a large model in a loop is killed with SIGKILL."""

from __future__ import annotations

import os
import signal
import time

import numpy as np
import pytest

import keratron
from keratron import layers

FILES = ("m.h5", "m.keras", "m.weights.h5", "w.h5")


def _model(seed):
    model = keratron.Sequential(
        [keratron.Input((256,)), layers.Dense(512), layers.Dense(512), layers.Dense(128)]
    )
    rng = np.random.default_rng(seed)
    model.set_weights([rng.normal(size=tuple(w.shape)).astype("float32") for w in model.weights])
    model.compile(optimizer="sgd", loss="mse")
    return model


def _save_all(model, directory):
    model.save(os.path.join(directory, "m.h5"))
    model.save(os.path.join(directory, "m.keras"))
    model.save_weights(os.path.join(directory, "m.weights.h5"))
    model.save_weights(os.path.join(directory, "w.h5"))


def _load(name, path):
    if name in ("m.h5", "m.keras"):
        return keratron.models.load_model(path).get_weights()
    target = _model(0)
    target.load_weights(path)
    return target.get_weights()


def _save_forever(model, directory, ready_fd):
    """The child: signals readiness, then saves in a loop until it is killed."""
    try:
        os.write(ready_fd, b"r")
        while True:
            _save_all(model, directory)
    finally:
        os._exit(0)


@pytest.mark.parametrize("delay", [0.02, 0.11, 0.23, 0.41])
def test_sigkill_during_save_leaves_old_or_new_file(tmp_path, delay):
    old_model = _model(seed=0)
    _save_all(old_model, str(tmp_path))
    old_bytes = {name: (tmp_path / name).read_bytes() for name in FILES}
    new_model = _model(seed=1)
    new_weights = new_model.get_weights()

    # A forked child already has keratron imported and the model built: the kill lands while
    # it writes (each save of this ~2 MB model takes a few tens of milliseconds).
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_fd)
        _save_forever(new_model, str(tmp_path), write_fd)
    os.close(write_fd)
    try:
        assert os.read(read_fd, 1) == b"r"
        time.sleep(delay)
    finally:
        os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
        os.close(read_fd)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL

    for name in FILES:
        path = tmp_path / name
        if path.read_bytes() == old_bytes[name]:
            continue
        weights = _load(name, str(path))  # a file that changed must be complete and new
        assert len(weights) == len(new_weights)
        for a, b in zip(new_weights, weights):
            np.testing.assert_array_equal(a, b)
    # Besides the targets, at most leftover temporary files (hidden, never at a target name).
    extra = set(os.listdir(tmp_path)) - set(FILES)
    assert all(name.startswith(".") and name.endswith(".tmp") for name in extra)


def test_failed_save_keeps_the_old_file_and_cleans_up(tmp_path, monkeypatch):
    path = tmp_path / "m.weights.h5"
    model = _model(seed=0)
    model.save_weights(str(path))
    before = path.read_bytes()

    from keratron.saving import keras3_h5

    def broken(h5file, model):
        h5file.create_group("layers")
        raise RuntimeError("disk full (simulated)")

    monkeypatch.setattr(keras3_h5, "write_weights", broken)
    with pytest.raises(RuntimeError, match="disk full"):
        model.save_weights(str(path))
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["m.weights.h5"]
