"""Two worker processes on 127.0.0.1 with gloo, started as torchrun would start them.

The checks on numbers run inside the workers (dist_worker.py): each worker's model sees
batches of global_batch / 2; after training, weights equal one-process training on the same
global batches within 1e-5 (a convnet with synchronized BatchNormalization, traced steps and
small gradient buckets; an LSTM, eager steps, Adam); history, evaluate and predict are
global; an Estimator trains and evaluates like one process, with RunConfig reporting the
cluster. Here: exit codes, which worker wrote files and printed, failure and resume.
"""

import json

import pytest

from tests.distribute.launch import launch

pytestmark = pytest.mark.slow


def _read_json(path):
    with open(path) as f:
        return json.load(f)


def test_two_workers_train_like_one_process(tmp_path):
    job = launch("train", tmp_path, timeout=240)
    assert job.returncodes == [0, 0], job.describe()
    # Each worker destroyed its process group before the interpreter's teardown (left to
    # teardown, gloo's threads can abort the process as it exits).
    for rank in (0, 1):
        assert (tmp_path / f"group_at_exit_train{rank}").read_text() == "destroyed"
    result = _read_json(tmp_path / "result_train.json")
    assert result["ok"]
    # Worker 0 alone writes logs and checkpoints and shows the progress bar.
    assert (tmp_path / "log0.csv").exists() and (tmp_path / "ckpt0.weights.h5").exists()
    assert not (tmp_path / "log1.csv").exists()
    assert not (tmp_path / "ckpt1.weights.h5").exists()
    assert "Epoch 1/2" in job.outputs[0]
    assert "Epoch" not in job.outputs[1] and "step/s" not in job.outputs[1]
    rows = (tmp_path / "log0.csv").read_text().strip().splitlines()
    assert rows[0].split(",")[:3] == ["epoch", "loss", "mae"]
    assert [float(r.split(",")[1]) for r in rows[1:]] == pytest.approx(result["lstm_loss"])
    # Estimator.train / evaluate in the same job: worker 0 checked variables and metrics
    # against one process; worker 1 wrote no checkpoint and no summary.
    assert _read_json(tmp_path / "result_estimator.json")["ok"]
    assert (tmp_path / "est0" / "model.ckpt-8.h5").exists()
    assert not (tmp_path / "est1").exists() or not any((tmp_path / "est1").iterdir())


def test_dead_worker_stops_the_job_and_a_rerun_resumes(tmp_path):
    crash = launch("crash", tmp_path, timeout=120)
    # Worker 1 kills itself (SIGKILL) in epoch 3; worker 0 must fail with the clear error.
    assert crash.returncodes[1] == -9, crash.describe()
    assert crash.returncodes[0] != 0, crash.describe()
    killed_at = float((tmp_path / "killed_at").read_text())
    failure = _read_json(tmp_path / "failure0.json")
    assert "worker 0 of 2 is stopping" in failure["message"]
    assert "peer worker stopped" in failure["message"]
    assert failure["time"] - killed_at < 60
    assert crash.ended[0] - killed_at < 60, crash.describe()
    assert "WorkerFailureError" in crash.outputs[0]
    # With a dead peer, worker 0 leaves its process group to exit (a teardown could wait on
    # work queued for the peer).
    assert (tmp_path / "group_at_exit_crash0").read_text() == "alive"
    # Epochs 1-2 were backed up by worker 0.
    assert _read_json(tmp_path / "backup" / "training_metadata.json")["epoch"] == 2

    resume = launch("resume", tmp_path, timeout=120)
    assert resume.returncodes == [0, 0], resume.describe()
    assert (tmp_path / "group_at_exit_resume0").read_text() == "destroyed"
    assert (tmp_path / "group_at_exit_resume1").read_text() == "destroyed"
    result = _read_json(tmp_path / "result_resume.json")
    assert result["epochs"] == [2, 3]
    before = [json.loads(line)[1] for line in (tmp_path / "losses_crash.jsonl").open()]
    curve = before + result["loss"]
    # The interrupted-and-resumed loss curve is the uninterrupted one-process curve.
    assert curve == pytest.approx(result["reference_loss"], abs=1e-5)
    assert not (tmp_path / "backup").exists()  # deleted by worker 0 after a clean finish


def test_worker_dying_outside_collectives_is_found_by_the_watchdog(tmp_path):
    # Timeout 3 s. Worker 1 dies while worker 0 spends 6 s in a callback, outside any
    # collective: worker 0's watchdog sees the heartbeats stop, and its next step raises.
    job = launch("watchdog", tmp_path, timeout=120)
    assert job.returncodes[1] == -9 and job.returncodes[0] != 0, job.describe()
    killed_at = float((tmp_path / "killed_at").read_text())
    failure = _read_json(tmp_path / "failure0.json")
    assert "worker 1 of 2 stopped sending heartbeats" in failure["message"], failure
    assert failure["time"] - killed_at < 30
    assert job.ended[0] - killed_at < 60, job.describe()
