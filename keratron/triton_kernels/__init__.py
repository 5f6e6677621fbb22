"""Triton GPU kernels for the hot primitives, attached as device routes of those primitives.

Importing this package never imports triton: each route is a small lazy object that imports
its kernel module on first use. `ops._dispatch` is the only caller (decision 5 of the
architecture): it runs a route for CUDA tensors (backend "auto") or always (backend
"triton", which on CPU tensors needs TRITON_INTERPRET=1). A route that cannot handle a case
raises NotImplementedError and the CPU/torch fallback runs.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from collections import Counter

__all__ = [
    "ROUTES",
    "attach_routes",
    "available",
    "launch_counts",
    "reset_launch_counts",
    "count_launch",
    "pin_configs",
]

# primitive name -> "module:function" (modules live in this package). The registry of what
# the dispatcher can launch: the ahead-of-time report reads it.
ROUTES = {
    "matmul": "matmul:matmul_route",
    "softmax_cross_entropy": "softmax_xent:forward_route",
    "softmax_cross_entropy_grad": "softmax_xent:backward_route",
    "conv": "conv2d:conv_route",
    "conv_grad_input": "conv2d:grad_input_route",
    "conv_grad_filter": "conv2d:grad_filter_route",
    "lstm": "lstm:forward_route",
    "lstm_grad": "lstm:backward_route",
}

_counts: Counter = Counter()


def available() -> bool:
    """Whether triton can be imported here (checked without importing it)."""
    return importlib.util.find_spec("triton") is not None


def pin_configs() -> bool:
    """True when kernels must use their first config instead of autotuning (the interpreter,
    where autotuning would run every config; or KERATRON_TRITON_PIN=1)."""
    return os.environ.get("TRITON_INTERPRET") == "1" or os.environ.get("KERATRON_TRITON_PIN") == "1"


def count_launch(op: str, n: int = 1) -> None:
    _counts[op] += n


def launch_counts() -> dict:
    """Kernel launches per primitive name since the last `reset_launch_counts()`."""
    return dict(_counts)


def reset_launch_counts() -> None:
    _counts.clear()


class _LazyRoute:
    __slots__ = ("op", "target", "_fn")

    def __init__(self, op: str, target: str):
        self.op = op
        self.target = target
        self._fn = None

    def __call__(self, *vals, **params):
        if self._fn is None:
            if not available():
                raise NotImplementedError("triton is not installed")
            if "triton" not in sys.modules and "tensorflow" in sys.modules:
                # Both bundle LLVM and register its command-line options process-wide: triton
                # loaded after TensorFlow aborts the process ("LLVM ERROR: inconsistency in
                # registered CommandLine options"). The other order works.
                raise NotImplementedError(
                    "TensorFlow was imported before triton in this process, and loading triton "
                    "after it aborts the process (both bundle LLVM). Import triton before "
                    "tensorflow to use the Triton kernels."
                )
            module, name = self.target.split(":")
            try:
                mod = importlib.import_module(f"{__name__}.{module}")
            except ModuleNotFoundError as e:
                if e.name == f"{__name__}.{module}":
                    raise NotImplementedError(f"no Triton kernel module {module!r}") from e
                raise
            self._fn = getattr(mod, name)
        return self._fn(*vals, **params)

    def __repr__(self):
        return f"<Triton route {self.op} -> {self.target}>"


def attach_routes() -> None:
    """Sets `Primitive.kernel` for every primitive in ROUTES that is registered."""
    from keratron.autodiff.primitive import PRIMITIVES

    for op, target in ROUTES.items():
        prim = PRIMITIVES.get(op)
        if prim is not None and prim.kernel is None:
            prim.kernel = _LazyRoute(op, target)
