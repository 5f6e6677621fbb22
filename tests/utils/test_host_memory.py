"""The host-memory reuse the training loops ask glibc for."""

import subprocess
import sys

import numpy as np
import pytest

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


def test_applies_on_linux_glibc_only_when_opted_in():
    # A fresh process each: the setting is process-wide and applied once.
    assert _probe("1") == "True"
    assert _probe("0") == "False"
    assert _probe(None) == "False"  # off by default: the allocator is the user's


OPT_IN = """
from keratron import config
from keratron.utils import host_memory
print(host_memory.keep_freed_host_memory())
config.set_host_memory_cache(True)
print(host_memory.keep_freed_host_memory())
config.set_host_memory_cache(False)
print(host_memory.keep_freed_host_memory())
"""


def test_config_switch_opts_in_after_a_call_that_did_nothing():
    env = {"PATH": "/usr/bin:/bin"}
    out = subprocess.run(
        [sys.executable, "-c", OPT_IN], capture_output=True, text=True, env=env, check=True
    )
    # The last call reports the settings still in effect: glibc keeps them once made.
    assert out.stdout.split() == ["False", "True", "True"]


def test_default_fit_leaves_the_allocator_alone():
    code = "\n".join(
        [
            "import numpy as np, keratron as kt",
            "from keratron.utils import host_memory",
            "m = kt.Sequential([kt.Input((3,)), kt.layers.Dense(2)]); m.compile('sgd', 'mse')",
            "m.fit(np.ones((4, 3), 'float32'), np.zeros((4, 2), 'float32'), verbose=0)",
            "print(host_memory._applied)",
        ]
    )
    env = {"PATH": "/usr/bin:/bin", "KERATRON_DEVICE": "cpu"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.stdout.strip() == "None", out.stdout + out.stderr


def test_environment_variable_is_validated(monkeypatch):
    from keratron import config

    monkeypatch.setenv("KERATRON_HOST_MEMORY_CACHE", "maybe")
    with pytest.raises(ValueError, match="KERATRON_HOST_MEMORY_CACHE"):
        config.host_memory_cache()


REUSE = """
import ctypes, resource
from keratron.utils import host_memory
print(host_memory.keep_freed_host_memory())
libc = ctypes.CDLL("libc.so.6")
libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
libc.memset.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t]
faults = []
for _ in range(3):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    block = libc.malloc(64 << 20)  # over glibc's largest mmap threshold (32 MiB)
    libc.memset(block, 1, 64 << 20)
    libc.free(block)
    faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
print(faults[-1])
"""


def test_large_blocks_are_reused_without_faulting_their_pages_again():
    env = {"PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"}
    kept = subprocess.run(
        [sys.executable, "-c", REUSE],
        capture_output=True,
        text=True,
        env={**env, "KERATRON_HOST_MEMORY_CACHE": "1"},
    )
    plain = subprocess.run(
        [sys.executable, "-c", REUSE],
        capture_output=True,
        text=True,
        env={**env, "KERATRON_HOST_MEMORY_CACHE": "0"},
    )
    applied, kept_faults = kept.stdout.split()
    assert applied == "True" and int(kept_faults) < 100, kept.stdout + kept.stderr
    # Without it the 16,384 pages of a fresh mapping fault on every pass.
    assert int(plain.stdout.split()[1]) > 10_000, plain.stdout + plain.stderr


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
