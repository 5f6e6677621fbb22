"""The epilogue activations: what a matmul or convolution applies to its output as it writes it.

One list (`ACTIVATIONS`), one integer encoding for kernels (`CODES`: the constexpr a Triton
kernel branches on) and one torch reference (`apply`), used by the ops, the compiler (a
primitive's `epilogues` field names the activations it fuses) and every kernel.

NaN policy: an activation maps NaN to NaN, as torch does (`torch.relu(nan)` and
`torch.clamp(nan, 0, 6)` are NaN; sigmoid, tanh and gelu compute NaN from NaN). A kernel's
relu must propagate NaN too (`tl.maximum(x, 0.0, propagate_nan=tl.PropagateNan.ALL)`), never
turn it into 0.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

__all__ = ["ACTIVATIONS", "CODES", "FUSED", "apply", "code", "standardize"]

# None is the identity ("linear" is its Keras spelling).
ACTIVATIONS = (None, "relu", "relu6", "gelu", "gelu_tanh", "sigmoid", "tanh")
# The kernels' encoding: position in ACTIVATIONS; "linear" is None's code.
CODES = {name: i for i, name in enumerate(ACTIVATIONS)}
CODES["linear"] = 0
# The activations a fused matmul/convolution applies: the value of their `epilogues` field.
FUSED = tuple(a for a in ACTIVATIONS if a is not None)


def standardize(activation, op: str):
    """The epilogue name for `activation` ("linear" means None).

    Raises:
        ValueError: naming `op`, when `activation` is not an epilogue activation.

    Example:
        >>> standardize("linear", "matmul") is None
        True
    """
    if activation == "linear":
        return None
    if activation not in ACTIVATIONS:
        raise ValueError(
            f"{op}: argument `activation` must be one of {ACTIVATIONS} or 'linear'. "
            f"Received: activation={activation!r}"
        )
    return activation


def code(activation) -> int:
    """The integer a kernel receives for `activation` (a name of ACTIVATIONS, or "linear").

    Example:
        >>> code(None), code("relu")
        (0, 1)
    """
    return CODES[activation]


def apply(y: torch.Tensor, activation, inplace: bool = False) -> torch.Tensor:
    """The reference epilogue: `activation` applied to the torch tensor `y`.

    With `inplace=True` it overwrites `y` where torch can (pass only a fresh buffer).

    Example:
        >>> apply(torch.tensor([-1.0, float("nan"), 7.0]), "relu6")
        tensor([0., nan, 6.])
    """
    if activation is None or activation == "linear":
        return y
    if activation == "relu":
        return y.relu_() if inplace else torch.relu(y)
    if activation == "relu6":
        return y.clamp_(0.0, 6.0) if inplace else torch.clamp(y, 0.0, 6.0)
    if activation == "sigmoid":
        return y.sigmoid_() if inplace else torch.sigmoid(y)
    if activation == "tanh":
        return y.tanh_() if inplace else torch.tanh(y)
    if activation == "gelu":
        return F.gelu(y)
    if activation == "gelu_tanh":
        return F.gelu(y, approximate="tanh")
    raise ValueError(f"Unknown epilogue activation. Received: activation={activation!r}")
