"""The Triton route of the "matmul" primitive: `act(x @ w + b)` as one tiled GEMM with a fused
bias + activation epilogue, its config planned from the shape and the compute capability
(split-K with an ordered reduction for small M). The kernels, their configs and launch specs
live in `_matmul`, loaded on the first call; the module's other names (`CONFIGS`, `plan`,
`aot_specs`, ...) are read from there."""

from __future__ import annotations

from keratron.autodiff.primitive import device_route
from keratron.ops.linalg import matmul_p
from keratron.triton_kernels import load

__all__ = ["matmul_route"]


@device_route(matmul_p)
def matmul_route(x, w, b, activation):
    """`act(x @ w + b)` on Triton, with the semantics of the "matmul" primitive's impl.

    x is (..., K) with w (K, N), or x (..., M, K) with w (..., K, N) and batch dimensions that
    broadcast; b is (N,) or None. Raises NotImplementedError for dtypes, bias shapes or batch
    sizes the kernel does not take (the dispatcher then falls back to torch).
    """
    return load("_matmul").matmul_route(x, w, b, activation)


def __getattr__(name: str):
    if name.startswith("__"):
        raise AttributeError(name)
    return getattr(load("_matmul"), name)
