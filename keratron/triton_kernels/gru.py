"""The Triton routes of the "gru" and "gru_grad" primitives: one launch per sequence with the
time loop inside the kernel, forward and backward (then one launch for the recurrent kernel's
gradient), the recurrent kernel on chip up to 64 units and streamed from L2 every step up to
1024; more units raise NotImplementedError and the reference runs.
The kernels, configs and launch specs live in `_gru`, loaded on the first call; the module's
other names (`plan`, `RESIDENT_UNITS`, `aot_specs`, ...) are read from there."""

from __future__ import annotations

from keratron.autodiff.primitive import device_route
from keratron.ops.rnn import gru_grad_p, gru_p
from keratron.triton_kernels import load

__all__ = ["forward_route", "backward_route"]


@device_route(gru_p)
def forward_route(x_proj, h0, kernel, recurrent_bias, mask, reverse, reset_after, activation,
                  recurrent_activation, zero_output_for_mask):  # fmt: skip
    """The `gru` primitive's impl on the GPU: same arguments and the same four outputs
    `(all_h, last_h, gates, aux)`, gates and aux time-major in processed order.

    Raises:
        NotImplementedError: for more than 1024 units, dtypes other than
            float32/float16/bfloat16, unknown activations, mixed dtypes/devices, or tensors
            too large for int32 offsets.
    """
    return load("_gru").forward_route(x_proj, h0, kernel, recurrent_bias, mask, reverse,
                                      reset_after, activation, recurrent_activation,
                                      zero_output_for_mask)  # fmt: skip


@device_route(gru_grad_p)
def backward_route(g_all, g_h, h0, kernel, recurrent_bias, mask, all_h, gates, aux,
                   reverse, reset_after, activation, recurrent_activation,
                   zero_output_for_mask):  # fmt: skip
    """The `gru_grad` primitive's impl on the GPU: returns `(dx_proj, dh0, dkernel, dbias)`
    with dx_proj (B, T, 3U) in source time order.

    Raises:
        NotImplementedError: as `forward_route`, and for more units than `RESIDENT_UNITS`.
    """
    return load("_gru").backward_route(g_all, g_h, h0, kernel, recurrent_bias, mask, all_h,
                                       gates, aux, reverse, reset_after, activation,
                                       recurrent_activation, zero_output_for_mask)  # fmt: skip


def __getattr__(name: str):
    if name.startswith("__"):
        raise AttributeError(name)
    return getattr(load("_gru"), name)
