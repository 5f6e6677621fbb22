"""OpenMP's wait policy, chosen before torch loads its OpenMP runtime.

torch's CPU build runs its kernels (aten, oneDNN, MKL) on GNU OpenMP (libgomp). By default an
OpenMP thread that finishes its share of a parallel region spins for a while waiting for the
next one. On a quiet machine that saves a wake-up; on a shared one the spinning threads hold
cores that another process (or this process's own working thread) needs, and a training step
runs one to two orders of magnitude slower. With `OMP_WAIT_POLICY=PASSIVE` idle threads sleep.

libgomp reads the policy once, from the environment, when it is loaded (on `import torch`), and
offers no call to change it afterwards. So `keratron/__init__.py` calls `prefer_passive_wait`
before anything imports torch, and `restore_environ` right after: the variable is in the
environment only while libgomp reads it, and child processes inherit the environment the user
had. Nothing is set when

- the user chose a policy (`OMP_WAIT_POLICY` set to anything),
- `KERATRON_ADAPT_THREADS=0` turns keratron's thread policy off, or
- OpenMP is already loaded (torch, or another library linking libgomp, was imported before
  keratron): the setting could no longer take effect.

This module imports nothing from keratron or torch.
"""

from __future__ import annotations

import os
import sys

ENV_SWITCH = "KERATRON_ADAPT_THREADS"
_OFF = ("0", "false", "off")


def switched_off() -> bool:
    """Whether `KERATRON_ADAPT_THREADS` turns keratron's thread policy off ("0")."""
    return os.environ.get(ENV_SWITCH, "1").strip().lower() in _OFF


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
    """Sets `OMP_WAIT_POLICY=PASSIVE` for the OpenMP runtime about to be loaded, when nobody
    chose otherwise; returns whether it did (then call `restore_environ` once torch is
    imported)."""
    if "OMP_WAIT_POLICY" in os.environ or switched_off() or openmp_loaded():
        return False
    os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
    return True


def restore_environ(was_set: bool) -> None:
    """Removes the variable `prefer_passive_wait` set (libgomp has read it by now)."""
    if was_set and os.environ.get("OMP_WAIT_POLICY") == "PASSIVE":
        del os.environ["OMP_WAIT_POLICY"]
