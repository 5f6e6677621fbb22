"""Resuming `fit` in a new process, after other models were built there: BackupAndRestore
and ModelCheckpoint(save_weights_only=False) + load_model bring the optimizer state back, and
a backup whose optimizer state cannot be placed is an error, not a fresh optimizer."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import keratron as kt

ROOT = Path(__file__).resolve().parents[2]
STEPS_PER_EPOCH = 4  # 64 samples, batch 16


def _worker(*args):
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    out = subprocess.run(
        [sys.executable, "-m", "tests.callbacks.resume_worker", *map(str, args)],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_backup_and_restore_resumes_optimizer_in_fresh_process(tmp_path):
    first = _worker("backup", tmp_path, "first")
    assert first["iterations"] == 2 * STEPS_PER_EPOCH
    resumed = _worker("backup", tmp_path, "resume")
    assert resumed["epochs_run"] == [2, 3]
    assert resumed["iterations"] == 4 * STEPS_PER_EPOCH


@pytest.mark.parametrize("ext", [".keras", ".h5"])
def test_model_checkpoint_load_model_resumes_optimizer_in_fresh_process(tmp_path, ext):
    _worker("checkpoint", tmp_path, "first", ext)
    resumed = _worker("checkpoint", tmp_path, "resume", ext)
    assert resumed["loaded_iterations"] == 2 * STEPS_PER_EPOCH
    assert resumed["iterations"] == 4 * STEPS_PER_EPOCH


def _model(optimizer):
    kt.utils.set_random_seed(0)
    model = kt.Sequential(
        [kt.Input((3,)), kt.layers.Dense(4, activation="relu"), kt.layers.Dense(1)]
    )
    model.compile(optimizer=optimizer, loss="mse")
    return model


def test_backup_with_optimizer_state_that_cannot_be_placed_raises(tmp_path):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((32, 3)).astype("float32")
    y = x.sum(axis=1, keepdims=True)
    backup = kt.callbacks.BackupAndRestore(tmp_path, delete_checkpoint=False)
    _model(kt.optimizers.Adam(0.01)).fit(x, y, epochs=1, callbacks=[backup], verbose=0)
    weights = tmp_path / "latest.weights.h5"
    saved = weights.read_bytes()
    model = _model(kt.optimizers.RMSprop(0.01))
    before = [w.copy() for w in model.get_weights()]
    backup = kt.callbacks.BackupAndRestore(tmp_path, delete_checkpoint=False)
    with pytest.raises(ValueError, match=r"latest\.weights\.h5.*optimizer state.*rm_sprop"):
        model.fit(x, y, epochs=2, callbacks=[backup], verbose=0)
    assert int(model.optimizer.iterations.numpy()) == 0  # not a single step trained
    for a, b in zip(before, model.get_weights()):  # nothing half-restored
        np.testing.assert_array_equal(a, b)
    assert weights.read_bytes() == saved  # the backup is left as it was
