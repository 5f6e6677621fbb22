"""Tests of the benchmark harness: a quick tiny run of keratron next to torch (slow), and the
report logic on made-up records."""

import json
import os
import re
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NUMBER = r"(\d+(?:\.\d+)?)"


@pytest.mark.slow
def test_quick_tiny_keratron_vs_torch(tmp_path):
    out_json = tmp_path / "results.json"
    cmd = [sys.executable, os.path.join(REPO, "bench", "run.py"), "--quick"]
    cmd += ["--workloads", "tiny", "--frameworks", "keratron,torch", "--json", str(out_json)]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]

    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("tiny ")]
    assert len(lines) == 1, proc.stdout
    match = re.fullmatch(rf"tiny keratron={NUMBER} torch={NUMBER} ratio={NUMBER}", lines[0])
    assert match, lines[0]
    keratron, torch, ratio = (float(v) for v in match.groups())
    assert keratron > 0 and torch > 0
    assert ratio == pytest.approx(keratron / torch, rel=0.01, abs=0.006)
    assert re.search(r"peak RSS MB: keratron=\d+ torch=\d+", proc.stdout), proc.stdout

    results = json.loads(out_json.read_text())["results"]["tiny"]["frameworks"]
    for name in ("keratron", "torch"):
        assert results[name]["status"] == "ok"
        (run,) = results[name]["runs"]
        assert run["samples"] == 1024 and run["params"] == 330
        # The hand-written loop and compile/fit both report the epoch's mean training loss.
        assert run["train_loss"] > 0
        assert results[name]["maxrss_mb"] > 10


def test_quick_tiny_under_mixed_bfloat16(tmp_path):
    # --policy reaches every measurement: Keras's global policy for keratron, torch.autocast
    # for the loop; both train (a finite loss) and the records say which policy ran.
    out_json = tmp_path / "results.json"
    cmd = [sys.executable, os.path.join(REPO, "bench", "run.py"), "--quick", "--policy"]
    cmd += ["mixed_bfloat16", "--workloads", "tiny", "--frameworks", "keratron,torch"]
    cmd += ["--json", str(out_json)]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "policy mixed_bfloat16" in proc.stdout.splitlines()[0]
    data = json.loads(out_json.read_text())
    assert data["meta"]["policy"] == "mixed_bfloat16"
    for name in ("keratron", "torch"):
        result = data["results"]["tiny"]["frameworks"][name]
        assert result["status"] == "ok", result
        (run,) = result["runs"]
        assert run["policy"] == "mixed_bfloat16"
        assert 0 < run["train_loss"] < float("inf")


def _load_run_module():
    import importlib.util

    path = os.path.join(REPO, "bench", "run.py")
    spec = importlib.util.spec_from_file_location("bench_run", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_missing_peers_venv_is_reported_with_the_setup_failure(tmp_path, monkeypatch):
    run = _load_run_module()
    log = tmp_path / "peers-setup.log"
    log.write_text("pip noise\npeers venv setup failed: pip install tensorflow-cpu failed\n")
    monkeypatch.setattr(run, "PEERS_VENV", str(tmp_path / "no-venv"))
    monkeypatch.setattr(run, "PEERS_LOG", str(log))
    paths = run.interpreters(["keratron", "keras3-tf", "tf.keras"])
    assert paths["keratron"] == (sys.executable, None)
    for peer in ("keras3-tf", "tf.keras"):
        python, reason = paths[peer]
        assert python is None
        assert reason == "peers venv setup failed: pip install tensorflow-cpu failed"


def test_summary_keeps_the_best_round_and_reports_n_a():
    run = _load_run_module()
    frameworks = ["keratron", "torch", "keras3-tf"]
    records = {
        "keratron": [
            {"status": "ok", "samples_per_s": 100.0, "maxrss_mb": 300.0},
            {"status": "ok", "samples_per_s": 120.0, "maxrss_mb": 310.0},
        ],
        "torch": [{"status": "ok", "samples_per_s": 240.0, "maxrss_mb": 250.0}],
        "keras3-tf": [{"status": "n/a", "reason": "no venv"}],
    }
    summary = run.summarise("mlp", frameworks, records)
    assert summary["ratio"] == pytest.approx(0.5)
    text = run.report_line("mlp", frameworks, summary)
    first, rss, why = text.splitlines()
    assert first == "mlp keratron=120.0 torch=240.0 keras3-tf=n/a ratio=0.50"
    assert rss == "  peak RSS MB: keratron=310 torch=250 keras3-tf=n/a"
    assert why == "  keras3-tf n/a: no venv"
