"""Importing and using keratron leaves torch's global state as it found it.

Runs in a fresh interpreter (a subprocess), so nothing imported by other tests interferes.
"""

import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SCRIPT = r"""
import json, sys
import torch

def snapshot():
    return {
        "grad_enabled": torch.is_grad_enabled(),
        "default_dtype": str(torch.get_default_dtype()),
        "default_device": str(torch.get_default_device()),
        "num_threads": torch.get_num_threads(),
        "num_interop_threads": torch.get_num_interop_threads(),
        "rng_state": torch.get_rng_state().tolist(),
        "initial_seed": torch.initial_seed(),
        "deterministic": torch.are_deterministic_algorithms_enabled(),
        "matmul_precision": torch.get_float32_matmul_precision(),
        "anomaly": torch.is_anomaly_enabled(),
        "inference_mode": torch.is_inference_mode_enabled(),
    }

torch.manual_seed(1234)
before = snapshot()
import keratron as kt

after_import = snapshot()
x = kt.Variable([[1.0, 2.0], [3.0, 4.0]])
with kt.GradientTape() as tape:
    y = kt.ops.sum(kt.ops.tanh(x * x) + kt.random.dropout(x, 0.5))
g = tape.gradient(y, x)
_ = kt.random.normal((3,)), kt.random.uniform((2,), seed=1)
assert g.shape == (2, 2)
after_use = snapshot()
print(json.dumps({
    "before": before,
    "after_import": after_import,
    "after_use": after_use,
    "modules": sorted(m for m in ("triton", "keras", "tensorflow", "jax") if m in sys.modules),
    "grad_nonzero": bool((g.numpy() != 0).any()),
}))
"""


def test_import_and_use_leave_torch_global_state_unchanged():
    env = dict(os.environ)
    env.pop("KERATRON_DEVICE", None)
    env.pop("KERATRON_KERNELS", None)
    r = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    before = out["before"]
    for stage in ("after_import", "after_use"):
        for key, value in before.items():
            assert out[stage][key] == value, f"{stage}: torch {key} changed"
    assert out["modules"] == [], f"importing keratron imported {out['modules']}"
    assert out["grad_nonzero"]


def test_the_suite_runs_in_its_own_environment():
    """tests/conftest.py: Keras reads a fresh KERAS_HOME holding its defaults, and no KERATRON_*
    variable of the user's reaches a test or a process it starts."""
    home = os.environ["KERAS_HOME"]
    assert os.path.basename(home).startswith("keratron-tests-keras-home-")
    with open(os.path.join(home, "keras.json")) as f:
        assert json.load(f) == {
            "floatx": "float32",
            "epsilon": 1e-07,
            "backend": "tensorflow",
            "image_data_format": "channels_last",
        }
    assert os.environ["KERAS_BACKEND"] == "torch"
    for name, value in os.environ.items():
        if name.startswith("KERATRON_") and not name.startswith("KERATRON_TEST_"):
            assert os.environ.get("KERATRON_TEST_" + name[len("KERATRON_") :]) == value, name
    child = "import os; print(os.environ['KERAS_HOME'])"
    r = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, check=True)
    assert r.stdout.strip() == home
