"""Argument conversion shared by every op family."""

from __future__ import annotations

import numpy as np
import torch

from keratron import config
from keratron.autodiff import tape as _tape
from keratron.autodiff.dtypes import standardize_dtype, to_torch_dtype
from keratron.autodiff.primitive import Primitive
from keratron.autodiff.tensor import Tensor, convert_to_tensor, maybe_autocast

__all__ = ["Primitive", "Tensor", "as_tensor", "on_device", "pair", "scalar_like", "to_torch_dtype"]

_scalar_cache: dict = {}


def as_tensor(x, dtype=None) -> Tensor:
    """Converts op arguments to Tensors (numpy, Python and torch values accepted)."""
    if isinstance(x, Tensor) and dtype is None:
        return maybe_autocast(x)
    return convert_to_tensor(x, dtype=dtype)


def scalar_like(v, ref: Tensor) -> Tensor:
    """A Python scalar as a 0-d tensor, weakly typed against `ref` (as Keras/JAX do):
    `int32_tensor + 2` stays int32, `float16_tensor * 2.0` stays float16, and
    `int_tensor * 0.5` becomes floatx."""
    rd = ref._value.dtype
    if isinstance(v, bool):
        td = rd if rd is torch.bool else rd
    elif isinstance(v, int):
        td = rd if rd is not torch.bool else torch.int32
    else:
        td = rd if (rd.is_floating_point or rd.is_complex) else to_torch_dtype(config.floatx())
    dev = ref._value.device
    if dev.type == "meta":  # tracing: constants are concrete, on the default device
        dev = torch.device(config.default_device())
    key = (v, type(v), td, dev)
    t = _scalar_cache.get(key)
    if t is None:
        t = Tensor(torch.tensor(v, dtype=td, device=dev))
        if len(_scalar_cache) < 4096:
            _scalar_cache[key] = t
    return t


def _is_py_scalar(v) -> bool:
    return isinstance(v, (bool, int, float)) and not isinstance(v, np.generic)


def pair(x, y) -> tuple[Tensor, Tensor]:
    """Converts binary-op operands; scalars follow the other operand, numpy arrays move to the
    other operand's device."""
    x, y = maybe_autocast(x), maybe_autocast(y)
    xt = isinstance(x, Tensor)
    yt = isinstance(y, Tensor)
    if xt and yt:
        xv, yv = x._value, y._value
        if xv.device != yv.device and not (xv.is_meta or yv.is_meta):
            # A 0-d CPU tensor mixes with a CUDA one, as in torch; otherwise move to x's device.
            if y._value.dim() == 0:
                return x, Tensor(y._value.to(x._value.device))
            return Tensor(x._value.to(y._value.device)), y
        return x, y
    if xt:
        return x, scalar_like(y, x) if _is_py_scalar(y) else _on(y, x)
    if yt:
        return (scalar_like(x, y) if _is_py_scalar(x) else _on(x, y)), y
    if _is_py_scalar(x) and not _is_py_scalar(y):
        y = convert_to_tensor(y)
        return scalar_like(x, y), y
    x = convert_to_tensor(x)
    return x, scalar_like(y, x) if _is_py_scalar(y) else _on(y, x)


def _on(v, ref: Tensor) -> Tensor:
    t = convert_to_tensor(v)
    if t._value.device != ref._value.device and not ref._value.is_meta:
        t = Tensor(t._value.to(ref._value.device))
    return t


def on_device(x: Tensor, device) -> Tensor:
    """`x` on `device`; never moves data to or from torch's "meta" device (tracing)."""
    v = x._value
    device = torch.device(device)
    if v.device == device or v.is_meta or device.type == "meta":
        return x
    return Tensor(v.to(device))


def canonical_axis(axis, ndim: int, op: str = "op"):
    """Normalizes an int / tuple / None axis against `ndim`; None stays None."""
    if axis is None:
        return None
    if isinstance(axis, (list, tuple)):
        return tuple(canonical_axis(a, ndim, op) for a in axis)
    a = int(axis)
    if not -max(ndim, 1) <= a < max(ndim, 1):
        raise ValueError(f"{op}: axis {axis} is out of bounds for a tensor of rank {ndim}.")
    return a % max(ndim, 1)


def standard_dtype(dtype):
    return None if dtype is None else standardize_dtype(dtype)


def _concrete(x: Tensor) -> bool:
    """Whether `x` holds data (False for the data-free tensors of a trace)."""
    return not x._value.is_meta


def _axis_list(axis, ndim, op) -> tuple:
    if axis is None:
        return tuple(range(ndim))
    axes = canonical_axis(axis if isinstance(axis, (tuple, list)) else (axis,), ndim, op)
    return tuple(sorted(set(axes)))


def _data_dependent(name, hint):
    """An abstract rule for an op whose output shape depends on its input values."""

    def abstract(*args, **params):
        raise ValueError(
            f"{name}: the output shape depends on the input values, so it cannot be traced "
            f"(keratron.function); {hint}"
        )

    return abstract


def on_device_of(t: Tensor, ref: Tensor) -> Tensor:
    """`t` moved to `ref`'s device."""
    return on_device(t, ref._value.device)


def backward_is_recorded() -> bool:
    """Whether a tape other than the one taking this gradient is recording it (a second-order
    gradient): a VJP rule whose backward is a primitive without its own VJP then composes the
    backward from keratron ops instead (`composite_vjp`)."""
    return any(t.is_recording for t in _tape.active_tapes())


def composite_vjp(fn, cotangents, inputs, *args, **params):
    """Input cotangents of `fn(*inputs, *args, **params)`, written with keratron ops, from a
    nested tape: every op of this backward pass is recorded by the outer tapes. None inputs
    get None."""
    live = [x for x in inputs if x is not None]
    with _tape.GradientTape() as inner:
        inner.watch(live)
        outs = fn(*inputs, *args, **params)
    grads = iter(inner.gradient(list(outs), live, output_gradients=list(cotangents)))
    return tuple(None if x is None else next(grads) for x in inputs)
