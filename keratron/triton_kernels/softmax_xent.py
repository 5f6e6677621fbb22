"""The Triton routes of the "softmax_cross_entropy" (forward) and "softmax_cross_entropy_grad"
(backward) primitives: one program per row (many rows per program for rows of up to 256
classes), in float32 whatever the storage dtype. The kernels, configs and launch specs live in
`_softmax_xent`, loaded on the first call; the module's other names (`CONFIGS`, `BLOCK_MAX`,
`aot_specs`, ...) are read from there."""

from __future__ import annotations

from keratron.autodiff.primitive import device_route
from keratron.ops.xent import softmax_cross_entropy_grad_p, softmax_cross_entropy_p
from keratron.triton_kernels import load

__all__ = ["forward_route", "backward_route"]


@device_route(softmax_cross_entropy_p)
def forward_route(logits, labels, sparse):
    """(per-example loss, probs) of the "softmax_cross_entropy" primitive, on Triton.

    Raises NotImplementedError for dtypes or shapes it does not take (the dispatcher then falls
    back to torch).
    """
    return load("_softmax_xent").forward_route(logits, labels, sparse)


@device_route(softmax_cross_entropy_grad_p)
def backward_route(g, probs, labels, sparse):
    """`g[..., None] * (probs - target)` of the "softmax_cross_entropy_grad" primitive, on
    Triton (target: the one-hot rows of sparse labels, or the dense labels)."""
    return load("_softmax_xent").backward_route(g, probs, labels, sparse)


def __getattr__(name: str):
    if name.startswith("__"):
        raise AttributeError(name)
    return getattr(load("_softmax_xent"), name)
