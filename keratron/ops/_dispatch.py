"""The one place where a primitive call picks its implementation.

Per call: a primitive with a device kernel route runs it when the backend is "triton"; with
"auto" and CUDA inputs, it runs whichever of the route and the torch fallback (cuBLAS,
cuDNN) measured faster the first time this primitive met these shapes, dtypes, strides and
parameters (like cuDNN's benchmark mode; a training step's shapes repeat, so each is timed
once; past 64 measured signatures of one primitive, a new one takes that primitive's most
frequent choice untimed). A route that cannot handle a case raises NotImplementedError and
the CPU/torch fallback runs ("auto") or a clear error is raised ("triton"). Everything runs
under `torch.no_grad()` only when torch's grad mode is on, so torch.autograd never records
keratron's work and torch's global state is left as found.
"""

from __future__ import annotations

import os
import time

import torch

from keratron import config
from keratron.autodiff import primitive

_no_grad = torch.no_grad
_is_grad_enabled = torch.is_grad_enabled
_set_grad_enabled = torch._C._set_grad_enabled


def _wants_kernel(vals, backend: str) -> bool:
    if backend == "fallback":
        return False
    if backend == "triton":
        # Shape inference runs on data-free "meta" tensors: nothing to launch there.
        return not any(v is not None and v.is_meta for v in vals)
    for v in vals:
        if v is not None and v.is_cuda:
            return True
    return False


def execute(prim, vals, params):
    """Runs `prim` on torch values `vals` with `params`; returns torch value(s)."""
    if prim.kernel is not None:
        backend = config.kernel_backend()
        if _wants_kernel(vals, backend):
            if backend == "auto":
                out = _run_faster(prim, vals, params)
            else:
                out = _run_kernel(prim, vals, params)
            if out is not None:
                return out
    if _is_grad_enabled():
        # What torch.no_grad() does, without the context-manager cost on every op; the
        # previous (thread-local) grad mode is restored before returning.
        _set_grad_enabled(False)
        try:
            return prim.impl(*vals, **params)
        finally:
            _set_grad_enabled(True)
    return prim.impl(*vals, **params)


def _run_kernel(prim, vals, params):
    strict = config.kernel_backend() == "triton"
    if strict and os.environ.get("TRITON_INTERPRET") != "1":
        if not any(v is not None and v.is_cuda for v in vals):
            raise RuntimeError(
                f"Kernel backend 'triton' was asked to run op '{prim.name}' on CPU tensors; "
                "this needs TRITON_INTERPRET=1 set before triton is imported."
            )
    try:
        with _no_grad():
            return prim.kernel(*vals, **params)
    except NotImplementedError as e:
        if strict:
            raise ValueError(
                f"The Triton kernel for op '{prim.name}' does not support this case: {e}"
            ) from e
        return None


# ("auto" on CUDA) call signature -> "kernel" or "fallback", whichever measured faster.
_choices: dict = {}
_TIMED_RUNS = 3
# Past this many measured signatures of one primitive (shapes that change on every call),
# a new signature takes that primitive's most frequent choice without measuring.
_MEASURED_PER_PRIMITIVE = 64


def _signature(prim, vals, params):
    shapes = tuple(
        None if v is None else (tuple(v.shape), v.dtype, v.stride(), v.device) for v in vals
    )
    return prim.name, shapes, repr(sorted(params.items()))


def _run_faster(prim, vals, params, sync=torch.cuda.synchronize):
    """The route's or the fallback's result, whichever the measurement for this signature
    chose; None means "run the fallback". The first call of a signature runs both (the
    route first, so its compile and autotuning stay out of the timing), times `_TIMED_RUNS`
    more runs of each, and keeps the faster."""
    key = _signature(prim, vals, params)
    choice = _choices.get(key)
    if choice is None:
        made = [c for k, c in _choices.items() if k[0] == prim.name]
        if len(made) >= _MEASURED_PER_PRIMITIVE:
            choice = max(("kernel", "fallback"), key=made.count)
    if choice == "kernel":
        return _run_kernel(prim, vals, params)
    if choice == "fallback":
        return None
    out = _run_kernel(prim, vals, params)
    if out is None:  # the route does not handle this case
        _choices[key] = "fallback"
        return None
    with _no_grad():
        prim.impl(*vals, **params)  # warm-up, as the route's first run was
    best = {}
    for name, run in (("kernel", prim.kernel), ("fallback", prim.impl)):
        for _ in range(_TIMED_RUNS):
            sync()
            start = time.perf_counter()
            with _no_grad():
                run(*vals, **params)
            sync()
            elapsed = time.perf_counter() - start
            best[name] = min(best.get(name, elapsed), elapsed)
    _choices[key] = "kernel" if best["kernel"] <= best["fallback"] else "fallback"
    return out


def kernel_choices() -> dict:
    """What backend "auto" measured so far: {(primitive, shapes, params): "kernel" or
    "fallback"}, where shapes holds (shape, dtype, strides, device) per operand."""
    return dict(_choices)


def clear_kernel_choices() -> None:
    """Forgets the measurements: the next call of each signature measures again."""
    _choices.clear()


primitive.set_executor(execute)


def attach_kernel_routes() -> None:
    """Attaches the Triton routes (lazily: triton is imported on first use only)."""
    from keratron import triton_kernels

    triton_kernels.attach_routes()


def uses_onednn_rnn(vals) -> bool:
    """Whether a whole-sequence recurrence on these values runs on oneDNN's CPU RNN.

    The first concrete (non-meta) value tells the device; when every value is data-free (a
    trace over arguments only), the default device does. oneDNN runs float32 on the CPU.
    """
    device = next((v.device.type for v in vals if v is not None and not v.is_meta), None)
    if device is None:
        device = torch.device(config.default_device()).type
    dtype = next(v.dtype for v in vals if v is not None)
    return device == "cpu" and dtype == torch.float32 and torch.backends.mkldnn.is_available()
