"""The host-memory reuse the training loops ask glibc for."""

import subprocess
import sys

import numpy as np

import keratron as kt
from keratron.utils import host_memory

PROBE = "from keratron.utils import host_memory; print(host_memory.keep_freed_host_memory())"


def _probe(env_value):
    env = {"PATH": "/usr/bin:/bin"}
    if env_value is not None:
        env["KERATRON_HOST_MEMORY_CACHE"] = env_value
    out = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, env=env, check=True
    )
    return out.stdout.strip()


def test_applies_on_linux_glibc_and_can_be_turned_off():
    # A fresh process each: the setting is process-wide and applied once.
    assert _probe(None) == "True"
    assert _probe("0") == "False"


def test_is_idempotent():
    first = host_memory.keep_freed_host_memory()
    assert host_memory.keep_freed_host_memory() is first


def test_fit_evaluate_and_predict_apply_it(monkeypatch):
    calls = []
    monkeypatch.setattr(host_memory, "keep_freed_host_memory", lambda: calls.append(1))
    model = kt.Sequential([kt.Input((3,)), kt.layers.Dense(2)])
    model.compile("sgd", "mse")
    x, y = np.ones((4, 3), "float32"), np.zeros((4, 2), "float32")
    model.fit(x, y, verbose=0)
    model.evaluate(x, y, verbose=0)
    model.predict(x, verbose=0)
    assert len(calls) == 3
