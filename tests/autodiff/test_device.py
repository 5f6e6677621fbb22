"""Device selection: set_device, KERATRON_DEVICE, `keratron.device(...)` scopes, operand moves.

This machine may have no GPU: placement is checked with "cpu" and with torch's data-free
"meta" device (a real, distinct device), and CUDA-only checks run where CUDA exists.
"""

import os
import subprocess
import sys
import threading

import numpy as np
import pytest
import torch

import keratron as kt
from keratron import config

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# The one check that needs a GPU: where there is none (CI's machine), it cannot run.
cuda = pytest.mark.skipif(
    not torch.cuda.is_available(), reason="moves tensors onto a CUDA device; no GPU here"
)


@pytest.fixture(autouse=True)
def restore_device():
    yield
    config.set_device(None)


def test_default_device_without_settings(monkeypatch):
    monkeypatch.delenv("KERATRON_DEVICE", raising=False)  # read on every call
    want = "cuda" if torch.cuda.is_available() else "cpu"
    assert config.default_device() == want
    assert kt.convert_to_tensor([1.0]).device.startswith(want)


def test_set_device_routes_new_tensors_variables_and_samples():
    config.set_device("meta")
    assert config.default_device() == "meta"
    assert kt.convert_to_tensor([1.0, 2.0]).device == "meta"
    assert kt.convert_to_tensor(np.ones(3)).device == "meta"
    assert kt.Variable([1.0]).device == "meta"
    assert kt.random.normal((2,)).device == "meta"
    config.set_device("cpu")
    assert kt.convert_to_tensor([1.0]).device == "cpu"
    config.set_device(None)
    assert config.default_device() in ("cpu", "cuda")


@pytest.mark.parametrize(
    "name,want",
    [
        ("cpu", "cpu"),
        ("CPU", "cpu"),
        ("/cpu:0", "cpu"),
        ("cpu:0", "cpu"),
        ("gpu", "cuda"),
        ("GPU:1", "cuda:1"),
        ("/gpu:0", "cuda:0"),
        ("cuda:2", "cuda:2"),
    ],
)
def test_device_name_spellings(name, want):
    # Naming a CUDA device needs no GPU; only allocating on it would.
    config.set_device(name)
    assert config.default_device() == want


@pytest.mark.parametrize("bad", ["tpu", "xyz", "cuda:abc", ""])
def test_unknown_device_raises(bad):
    with pytest.raises(ValueError, match="device"):
        config.set_device(bad)
    with pytest.raises(ValueError, match="device"):
        with kt.device(bad):
            pass
    with pytest.raises(ValueError, match="device"):
        kt.convert_to_tensor([1.0], device=bad)


def test_device_scope_nests_and_restores():
    config.set_device("cpu")
    with kt.device("meta"):
        assert config.default_device() == "meta"
        assert kt.convert_to_tensor([1.0]).device == "meta"
        with kt.device("cpu"):
            assert kt.convert_to_tensor([1.0]).device == "cpu"
        assert config.default_device() == "meta"
    assert config.default_device() == "cpu"
    with pytest.raises(RuntimeError):
        with kt.device("meta"):
            raise RuntimeError("boom")
    assert config.default_device() == "cpu"


def test_device_scope_beats_set_device():
    config.set_device("meta")
    with kt.device("cpu"):
        assert kt.convert_to_tensor([1.0]).device == "cpu"
    assert kt.convert_to_tensor([1.0]).device == "meta"


def test_device_scope_is_per_thread():
    seen = {}

    def worker():
        seen["device"] = config.default_device()

    with kt.device("meta"):
        th = threading.Thread(target=worker)
        th.start()
        th.join()
    assert seen["device"] != "meta"


def test_explicit_device_argument():
    with kt.device("meta"):
        x = kt.convert_to_tensor([1.0, 2.0], device="cpu")
    assert x.device == "cpu"
    np.testing.assert_array_equal(x.numpy(), [1.0, 2.0])
    assert kt.convert_to_tensor(x, device="meta").device == "meta"


def test_numpy_and_scalar_operands_follow_the_tensor_operand():
    with kt.device("cpu"):
        x = kt.convert_to_tensor([1.0, 2.0, 3.0])
        for out in (
            x + np.ones(3, np.float32),
            np.ones(3, np.float32) * x,
            kt.ops.add(np.ones(3, np.float32), x),
            x - 1.0,
            2.0 / x,
        ):
            assert out.device == "cpu"
        np.testing.assert_array_equal((x + np.ones(3, np.float32)).numpy(), [2.0, 3.0, 4.0])


def test_scalars_join_a_meta_tensor_without_leaving_it():
    # Python scalars are weakly typed and never force a device move of the tensor operand.
    m = kt.convert_to_tensor([1.0, 2.0], device="meta")
    out = m * 2.0
    assert out.device == "meta" and out.shape == (2,) and out.dtype == "float32"


def _run(code, **env):
    full = dict(os.environ)
    full.pop("KERATRON_DEVICE", None)
    full.update(env)
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env=full,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_keratron_device_environment_variable():
    code = (
        "import os, keratron as kt\n"
        "print(kt.config.default_device(), kt.convert_to_tensor([1.0]).device)\n"
        "with kt.device('cpu'):\n"
        "    print(kt.config.default_device())\n"
        "kt.config.set_device('cpu')\n"
        "print(kt.config.default_device())\n"
        "kt.config.set_device(None)\n"
        "os.environ['KERATRON_DEVICE'] = 'gpu:1'\n"
        "print(kt.config.default_device())\n"
        "os.environ['KERATRON_DEVICE'] = 'tpu'\n"
        "try:\n"
        "    kt.config.default_device()\n"
        "except ValueError as e:\n"
        "    print('error', 'tpu' in str(e))\n"
    )
    r = _run(code, KERATRON_DEVICE="meta")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split("\n")[:5] == ["meta meta", "cpu", "cpu", "cuda:1", "error True"]


@cuda
def test_cuda_placement_and_operand_moves():
    with kt.device("cuda"):
        x = kt.convert_to_tensor([1.0, 2.0])
        assert x.device.startswith("cuda")
        assert (x + np.ones(2, np.float32)).device.startswith("cuda")
        assert kt.random.uniform((3,)).device.startswith("cuda")
    with kt.device("cpu"):
        y = kt.convert_to_tensor([1.0, 2.0])
    with kt.device("cuda"):
        # numpy joins the CPU tensor on the CPU, whatever the default device.
        assert (y + np.ones(2, np.float32)).device == "cpu"
    np.testing.assert_array_equal((x + y).numpy(), [2.0, 4.0])


@pytest.mark.parametrize(
    "value, dtype",
    [
        (0.1, torch.float32),
        (1e-3, torch.bfloat16),
        (65504.0, torch.float16),
        (-(2**40) + 7, torch.int64),
        (3, torch.int32),
        (True, torch.bool),
    ],
)
def test_scalars_bound_for_a_gpu_are_filled_there_not_copied(monkeypatch, value, dtype):
    # A host-made scalar reaches a GPU through a fill kernel (asynchronous, and capturable in a
    # CUDA graph), with exactly the value the host tensor held; arrays are copied as before.
    # torch.full is stood in for here (no GPU): it records the call and fills on the CPU.
    from keratron.autodiff import tensor as T

    calls = []
    real_full = torch.full

    def full(size, fill_value, *, dtype=None, device=None):
        calls.append((tuple(size), dtype, torch.device(device).type))
        return real_full(size, fill_value, dtype=dtype)

    monkeypatch.setattr(torch, "full", full)
    host = torch.tensor(value, dtype=dtype)
    out = T._to_device(host, "cuda")
    assert calls == [((), dtype, "cuda")]
    assert out.dtype == dtype and out.shape == () and torch.equal(out, host)
    calls.clear()
    assert torch.equal(T._to_device(torch.ones(3, dtype=dtype), "cpu"), torch.ones(3, dtype=dtype))
    assert calls == []
