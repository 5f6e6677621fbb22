"""OpenMP's wait policy, chosen before torch loads its OpenMP runtime.

torch's CPU build runs its kernels (aten, oneDNN, MKL) on GNU OpenMP (libgomp). By default an
OpenMP thread that finishes its share of a parallel region spins for a while waiting for the
next one. On a quiet machine that saves a wake-up; on a shared one the spinning threads hold
cores that another process (or this process's own working thread) needs, and a training step
runs one to two orders of magnitude slower. With `OMP_WAIT_POLICY=PASSIVE` idle threads sleep.

On a quiet machine the passive policy costs a wake-up per parallel region, which is most of the
time of a step made of small ops (measured on 2 cores: the `tiny` workload 245,000 -> 73,000
samples/s, lstm 2,600 -> 1,300), so it is opt-in: `KERATRON_OMP_PASSIVE=1` in the environment
before `import keratron`.

libgomp reads the policy once, from the environment, when it is loaded (on `import torch`), and
offers no call to change it afterwards. So `keratron/__init__.py` calls `prefer_passive_wait`
before anything imports torch, and `restore_environ` right after: the variable is in the
environment only while libgomp reads it, and child processes inherit the environment the user
had. Nothing is set unless `KERATRON_OMP_PASSIVE=1`, and not even then when

- the user chose a policy (`OMP_WAIT_POLICY` set to anything), or
- OpenMP is already loaded (torch, or another library linking libgomp, was imported before
  keratron): the setting could no longer take effect.

This module imports nothing from keratron or torch.
"""

from __future__ import annotations

import os
import sys

PASSIVE_SWITCH = "KERATRON_OMP_PASSIVE"
_ON = ("1", "true", "on")


def openmp_loaded() -> bool:
    """Whether an OpenMP runtime is already mapped into this process (or torch imported)."""
    if "torch" in sys.modules:
        return True
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as f:
            return any("libgomp" in line or "libiomp" in line for line in f)
    except OSError:  # not Linux: torch not imported is the best sign there is
        return False


def prefer_passive_wait() -> bool:
    """Sets `OMP_WAIT_POLICY=PASSIVE` for the OpenMP runtime about to be loaded, when
    `KERATRON_OMP_PASSIVE=1` asks for it and nobody chose a policy; returns whether it did
    (then call `restore_environ` once torch is imported)."""
    asked = os.environ.get(PASSIVE_SWITCH, "0").strip().lower() in _ON
    if not asked or "OMP_WAIT_POLICY" in os.environ or openmp_loaded():
        return False
    os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
    return True


def restore_environ(was_set: bool) -> None:
    """Removes the variable `prefer_passive_wait` set (libgomp has read it by now)."""
    if was_set and os.environ.get("OMP_WAIT_POLICY") == "PASSIVE":
        del os.environ["OMP_WAIT_POLICY"]
