"""Triton GPU kernels for the hot primitives, registered as the primitives' "cuda" routes.

Each public module (`matmul`, `conv2d`, `lstm`, `gru`, `softmax_xent`) registers its routes with
`@device_route(<primitive>)` next to the primitive's kernel and imports no triton: a route loads
its private kernel module (`_matmul`, ...: the `@triton.jit` kernels, their configs and launch
specs, on `_common`) on first use. So importing keratron never imports triton. `ops._dispatch`
is the only caller (decision 5 of the architecture): it runs a route for CUDA tensors (backend
"auto") or always (backend "triton", which on CPU tensors needs TRITON_INTERPRET=1). A route
that cannot handle a case raises NotImplementedError and the CPU/torch fallback runs.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections import Counter

from keratron.config import environ_get

__all__ = [
    "ROUTE_MODULES",
    "attach_routes",
    "available",
    "load",
    "launch_counts",
    "reset_launch_counts",
    "count_launch",
    "pin_configs",
]

# The modules whose import registers the routes; each has a private kernel module `_<name>`.
ROUTE_MODULES = ("matmul", "softmax_xent", "conv2d", "lstm", "gru")

_counts: Counter = Counter()


def available() -> bool:
    """Whether triton can be imported here (checked without importing it)."""
    return importlib.util.find_spec("triton") is not None


def pin_configs() -> bool:
    """True when kernels must use their first config instead of autotuning (the interpreter,
    where autotuning would run every config; or KERATRON_TRITON_PIN=1)."""
    return environ_get("TRITON_INTERPRET") == "1" or environ_get("KERATRON_TRITON_PIN") == "1"


def count_launch(op: str, n: int = 1) -> None:
    _counts[op] += n


def launch_counts() -> dict:
    """Kernel launches per primitive name since the last `reset_launch_counts()`."""
    return dict(_counts)


def reset_launch_counts() -> None:
    _counts.clear()


def load(module: str):
    """The private kernel module `module` (e.g. "_matmul"), imported on first use.

    Raises:
        NotImplementedError: when triton cannot be loaded here (the fallback then runs).
    """
    name = f"{__name__}.{module}"
    loaded = sys.modules.get(name)
    if loaded is not None:
        return loaded
    if not available():
        raise NotImplementedError("triton is not installed")
    if "triton" not in sys.modules and "tensorflow" in sys.modules:
        # Both bundle LLVM and register its command-line options process-wide: triton loaded
        # after TensorFlow aborts the process ("LLVM ERROR: inconsistency in registered
        # CommandLine options"). The other order works.
        raise NotImplementedError(
            "TensorFlow was imported before triton in this process, and loading triton "
            "after it aborts the process (both bundle LLVM). Import triton before "
            "tensorflow to use the Triton kernels."
        )
    return importlib.import_module(name)


def attach_routes() -> None:
    """Registers every Triton route (importing the route modules; triton stays unloaded)."""
    for module in ROUTE_MODULES:
        importlib.import_module(f"{__name__}.{module}")
