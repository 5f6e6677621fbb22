"""The Triton routes of the "lstm" and "lstm_grad" primitives: one launch per sequence with the
time loop inside the kernel (up to 1024 units; the recurrent kernel on chip up to 32 float32
or 64 half units), else one fused gate-and-cell launch per time step; backpropagation through
time runs last step first. The kernels, configs and launch specs live in `_lstm`, loaded on
the first call; the module's other names (`plan`, `CONFIGS`, `aot_specs`, ...) are read from
there."""

from __future__ import annotations

from keratron.autodiff.primitive import device_route
from keratron.ops.rnn import lstm_grad_p, lstm_p
from keratron.triton_kernels import load

__all__ = ["forward_route", "backward_route"]


@device_route(lstm_p)
def forward_route(x_proj, h0, c0, kernel, mask, reverse, activation, recurrent_activation,
                  zero_output_for_mask, variant=None):  # fmt: skip
    """The `lstm` primitive's impl on the GPU: same arguments and the same five outputs
    `(all_h, last_h, last_c, gates, cells)`, gates and cells time-major in processed order.
    `variant` names the plan to run (one of `forward_route.variants(...)`), else the size's own.

    Raises:
        NotImplementedError: for dtypes other than float32/float16/bfloat16, unknown
            activations, mixed dtypes/devices, or tensors too large for int32 offsets.
    """
    return load("_lstm").forward_route(
        x_proj, h0, c0, kernel, mask, reverse, activation, recurrent_activation,
        zero_output_for_mask, variant,
    )  # fmt: skip


@device_route(lstm_grad_p)
def backward_route(g_all, g_h, g_c, h0, c0, kernel, mask, all_h, gates, cells, reverse,
                   activation, recurrent_activation, zero_output_for_mask,
                   variant=None):  # fmt: skip
    """The `lstm_grad` primitive's impl on the GPU: returns `(dx_proj, dh0, dc0, dkernel)`
    with dx_proj (B, T, 4U) in source time order; `variant` as in `forward_route`.

    Raises:
        NotImplementedError: as `forward_route`.
    """
    return load("_lstm").backward_route(g_all, g_h, g_c, h0, c0, kernel, mask, all_h, gates,
                                        cells, reverse, activation, recurrent_activation,
                                        zero_output_for_mask, variant)  # fmt: skip


def _forward_variants(x_proj, h0, *_, **__):
    return load("_lstm").variants(h0.shape[-1], x_proj.dtype)


def _backward_variants(g_all, g_h, g_c, h0, c0, kernel, mask, all_h, gates, *_, **__):
    return load("_lstm").variants(h0.shape[-1], gates.dtype)


# Backend "auto" times each plan and keeps the fastest: inside a CUDA graph a launch per time
# step costs the host nothing.
forward_route.variants = _forward_variants
backward_route.variants = _backward_variants


def __getattr__(name: str):
    if name.startswith("__"):
        raise AttributeError(name)
    return getattr(load("_lstm"), name)
