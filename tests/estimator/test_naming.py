"""Checkpoint names do not depend on what else the process built: each `model_fn` call has
its own name scope, so an Estimator resumes its optimizer state in a new process, and two
Estimators of the same model_fn name their variables alike."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import keratron as kt
from keratron import estimator as E
from keratron import feature_column as fc
from keratron.estimator import checkpoint as ckpt_lib
from tests.estimator._models import regression_data, regression_fn

ROOT = Path(__file__).resolve().parents[2]


def _worker(kind, model_dir, steps, *flags):
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    out = subprocess.run(
        [sys.executable, "-m", "tests.estimator.resume_worker", kind, str(model_dir), str(steps)]
        + list(flags),
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("kind", ["dnn", "keras"])
def test_resume_in_fresh_process_keeps_optimizer_state(tmp_path, kind):
    # The first process built another Adam, a Keras model and an Estimator before this one.
    first = _worker(kind, tmp_path, 20, "--others")
    assert first == {"global_step": 20, "iterations": {"adam/iteration": 20}}
    second = _worker(kind, tmp_path, 20)
    assert second == {"global_step": 40, "iterations": {"adam/iteration": 40}}


def _dnn(model_dir):
    return E.DNNRegressor(
        [4],
        [fc.numeric_column("x", shape=(3,))],
        model_dir=str(model_dir),
        optimizer=kt.optimizers.Adam(0.01),
        config=E.RunConfig(tf_random_seed=0),
    )


def test_two_estimators_in_one_process_name_variables_alike(tmp_path):
    x, y = regression_data()
    first, second = _dnn(tmp_path / "a"), _dnn(tmp_path / "b")
    for est in (first, second):
        est.train(lambda: ({"x": x}, y), steps=3)
    names = first.get_variable_names()
    assert names == second.get_variable_names()
    assert "adam/iteration" in names
    for name in names:
        assert np.shape(second.get_variable_value(name)) == np.shape(first.get_variable_value(name))
    assert int(second.get_variable_value("adam/iteration")) == 3


def test_building_and_training_an_estimator_leaves_auto_naming_alone(tmp_path):
    x, y = regression_data()
    before = kt.optimizers.Adam().name
    est = E.DNNRegressor(
        [2], [fc.numeric_column("x", shape=(3,))], model_dir=str(tmp_path), optimizer="Adam"
    )
    est.train(lambda: ({"x": x}, y), steps=1)
    after = kt.optimizers.Adam().name
    n = 0 if before == "adam" else int(before.rsplit("_", 1)[1])
    assert after == f"adam_{n + 1}"


def _regressor(model_dir, model_fn=regression_fn):
    return E.Estimator(model_fn, model_dir=str(model_dir), config=E.RunConfig(tf_random_seed=0))


def test_checkpoint_with_counted_optimizer_names_still_resumes(tmp_path):
    # Checkpoints written before names were scoped carry the process's counter: "adam_1/...".
    x, y = regression_data()
    _regressor(tmp_path).train(lambda: (x, y), steps=20)
    latest = ckpt_lib.latest_checkpoint(str(tmp_path))
    values, step = ckpt_lib.read_checkpoint(latest)
    old = {k.replace("adam/", "adam_1/", 1): v for k, v in values.items()}
    assert any(k.startswith("adam_1/") for k in old)
    ckpt_lib.save_checkpoint(str(tmp_path), step, old)
    est = _regressor(tmp_path)
    est.train(lambda: (x, y), steps=20)
    assert int(est.get_variable_value("global_step")) == 40
    assert int(est.get_variable_value("adam/iteration")) == 40
    assert not any(n.startswith("adam_1/") for n in est.get_variable_names())


def _rmsprop_fn(features, labels, mode):
    """`regression_fn` trained with RMSprop instead of Adam."""
    hidden = kt.layers.Dense(4, activation="tanh", name="hidden")(features)
    pred = kt.layers.Dense(1, name="out")(hidden)
    loss = kt.ops.mean(kt.ops.square(pred - labels))
    if mode != E.ModeKeys.TRAIN:
        return E.EstimatorSpec(mode, loss=loss, predictions={"y": pred})
    train_op = kt.optimizers.RMSprop(0.01).minimize(loss, E.trainable_variables())
    return E.EstimatorSpec(mode, loss=loss, train_op=train_op)


def test_checkpoint_whose_optimizer_state_cannot_be_placed_raises(tmp_path):
    x, y = regression_data()
    _regressor(tmp_path).train(lambda: (x, y), steps=5)
    est = _regressor(tmp_path, _rmsprop_fn)
    with pytest.raises(ValueError, match=r"cannot resume training.*rm_sprop/iteration.*adam/"):
        est.train(lambda: (x, y), steps=5)
    # Nothing was trained or written: the Adam checkpoint is still the latest.
    assert int(est.get_variable_value("global_step")) == 5
    # Evaluating and predicting need no optimizer state.
    assert "loss" in est.evaluate(lambda: (x, y), steps=1)


def test_ambiguous_counted_names_are_not_guessed(tmp_path):
    x, y = regression_data()
    _regressor(tmp_path).train(lambda: (x, y), steps=5)
    latest = ckpt_lib.latest_checkpoint(str(tmp_path))
    values, step = ckpt_lib.read_checkpoint(latest)
    old = {}
    for k, v in values.items():
        if k.startswith("adam/"):
            old[k.replace("adam/", "adam_1/", 1)] = v
            old[k.replace("adam/", "adam_2/", 1)] = v
        else:
            old[k] = v
    ckpt_lib.save_checkpoint(str(tmp_path), step, old)
    with pytest.raises(ValueError, match="cannot resume training"):
        _regressor(tmp_path).train(lambda: (x, y), steps=5)
