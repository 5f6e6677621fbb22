"""The one place where a primitive call picks its implementation (`execute`; `bind` prepares
the same choice once for a compiled plan's step).

Each primitive has a plain torch implementation, the reference (`prim.impl`), and may have
device routes registered next to their kernels with `@device_route(prim, device)`
(`keratron.autodiff.primitive`). Per call:

- the "cuda" route (a Triton kernel) runs when the backend is "triton" (on CPU values that
  needs TRITON_INTERPRET=1); with "auto" and CUDA values, whichever of the route (each of its
  variants, when it lists some: the LSTM's whole-sequence and per-step plans) and the
  reference (cuBLAS, cuDNN) was faster the first time this primitive met these shapes,
  dtypes, strides and parameters runs (like cuDNN's benchmark mode; a training step's shapes
  repeat, so each is timed once; past 64 measured signatures of one primitive, a new one
  takes that primitive's most frequent choice untimed). Inside a step that CUDA graphs replay
  (its warm-up and capture) "faster" is by GPU time, since a replay pays no host time per
  kernel (a host-bound comparison picked slower kernels for small convolutions); elsewhere
  (eager ops, uncaptured steps) by host time with the GPU drained, and the two are measured
  and kept apart;
- otherwise, on CPU values, the "cpu" route (oneDNN, a GEMM) runs, untimed here (a CPU route
  may measure its own choice between kernels, `ops._cpu_choice`);
- otherwise the reference runs.

A route that cannot handle a case raises NotImplementedError and the reference runs ("auto",
"fallback") or a clear error is raised (a "cuda" route under "triton"). Everything runs with
torch's grad mode off (`without_grad`), so torch.autograd never records keratron's work and
torch's global state is left as found.

A call on data-free "meta" values (shape inference for a symbolic layer call) whose primitive
has a `shape_rule` gets empty meta outputs of the rule's shapes and dtypes: no meta kernel
runs (torch's Python meta kernels import torch._dynamo and sympy).
"""

from __future__ import annotations

import os
import time
from functools import partial

import torch

from keratron import config
from keratron.autodiff import cuda_graphs, primitive
from keratron.autodiff.primitive import without_grad


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


def _device_type(vals) -> str | None:
    """The device type of the first operand ("cpu", "cuda", or "meta" for data-free values)."""
    for v in vals:
        if v is not None:
            return v.device.type
    return None


def _meta_outputs(prim, vals, params):
    """Empty meta outputs shaped by `prim.shape_rule`, or None where the rule does not cover
    the call."""
    avals = [None if v is None else (tuple(v.shape), v.dtype) for v in vals]
    out = prim.shape_rule(*avals, **params)
    if out is None:
        return None
    outs = tuple(torch.empty(shape, dtype=dtype, device="meta") for shape, dtype in out)
    return outs if prim.multiple_results else outs[0]


def execute(prim, vals, params):
    """Runs `prim` on torch values `vals` with `params`; returns torch value(s)."""
    if prim.shape_rule is not None:
        for v in vals:
            if v is not None and v.is_meta:
                out = _meta_outputs(prim, vals, params)
                if out is not None:
                    return out
                break
    routes = prim.routes
    if routes:
        route = routes.get("cuda")
        if route is not None:
            backend = config.kernel_backend()
            if _wants_kernel(vals, backend):
                if backend == "auto":
                    out = _run_faster(prim, vals, params)
                else:
                    out = _run_kernel(prim, vals, params)
                if out is not None:
                    return out
    device = _device_type(vals)
    if routes:
        route = routes.get("cpu")
        if route is not None and device == "cpu":
            try:
                return without_grad(route, *vals, **params)
            except NotImplementedError:
                pass
    if device == "cuda":
        return _reference_on_cuda(prim, vals, params)
    if device == "meta":
        primitive.prepare_meta_kernels()
    return without_grad(prim.impl, *vals, **params)


def _reference_on_cuda(prim, vals, params):
    # cuBLAS and cuDNN multiply float32 at keratron's precision setting, the one the Triton
    # kernels use, whatever torch's own TF32 flags say; the flags are restored after.
    with config.float32_precision_scope():
        return without_grad(prim.impl, *vals, **params)


def _run_kernel(prim, vals, params, variant=None):
    """The route's result (its `variant`, else its own pick), or None where it declines."""
    strict = config.kernel_backend() == "triton"
    if strict and os.environ.get("TRITON_INTERPRET") != "1":
        if not any(v is not None and v.is_cuda for v in vals):
            raise RuntimeError(
                f"Kernel backend 'triton' was asked to run op '{prim.name}' on CPU tensors; "
                "this needs TRITON_INTERPRET=1 set before triton is imported."
            )
    try:
        if variant is not None:
            return without_grad(prim.routes["cuda"], *vals, variant=variant, **params)
        return without_grad(prim.routes["cuda"], *vals, **params)
    except NotImplementedError as e:
        if strict:
            raise ValueError(
                f"The Triton kernel for op '{prim.name}' does not support this case: {e}"
            ) from e
        return None


def _variants(prim, vals, params) -> tuple:
    """The ways the route can run this call (`route.variants`, its own pick first), or
    (None,) for a route with one way."""
    listed = getattr(prim.routes["cuda"], "variants", None)
    return (None,) if listed is None else tuple(listed(*vals, **params))


# ("auto" on CUDA) call signature -> "fallback", "kernel", or "kernel:<variant>" for a route
# that lists variants: whichever measured fastest.
_choices: dict = {}
_TIMED_RUNS = 3
# The wait queued ahead of the timed runs, in GPU cycles: at least about 2 ms at 2 GHz, and
# 1.5 times the host's time to queue the runs at up to 2 GHz. The host queues the runs while
# the GPU waits, so the events around them time the GPU's work alone, also for a fallback
# that launches a few kernels per time step of an LSTM.
_QUEUE_CYCLES = 4_000_000
_QUEUE_HZ = 2.0e9


def _queue_cycles(host_seconds: float, runs: int) -> int:
    """GPU cycles to wait ahead of `runs` calls that each take `host_seconds` to queue."""
    return max(_QUEUE_CYCLES, int(1.5 * runs * host_seconds * _QUEUE_HZ))


def _gpu_time(run, runs: int) -> float:
    """Seconds of GPU time per call of `run` (on the current CUDA stream), from events around
    `runs` back-to-back calls queued behind a wait kernel long enough to cover their queuing
    (timed on one more call first)."""
    torch.cuda.synchronize()
    host = time.perf_counter()
    run()
    host = time.perf_counter() - host
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda._sleep(_queue_cycles(host, runs))
    start.record()
    for _ in range(runs):
        run()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / 1000.0 / runs


def _host_time(run, runs: int) -> float:
    """Seconds per call of `run` on CUDA from the host's clock, the GPU drained before and
    after: what a call costs where each launch is paid by the host (eager ops, steps that
    run uncaptured)."""
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(runs):
        run()
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / runs


def _wall_time(run, runs: int) -> float:
    """Seconds per call of `run` by the host's clock (values off CUDA: nothing runs async)."""
    start = time.perf_counter()
    for _ in range(runs):
        run()
    return (time.perf_counter() - start) / runs


# Past this many measured signatures of one primitive (shapes that change on every call),
# a new signature takes that primitive's most frequent choice without measuring.
_MEASURED_PER_PRIMITIVE = 64


def _signature(prim, vals, params):
    """(primitive, shapes, params, graphed): a call inside a step that CUDA graphs replay
    (its warm-up and its capture, `cuda_graphs.in_graphed_step`) is measured apart from the
    same call made eagerly, since one pays its launches on the host and the other not."""
    shapes = tuple(
        None if v is None else (tuple(v.shape), v.dtype, v.stride(), v.device) for v in vals
    )
    return prim.name, shapes, repr(sorted(params.items())), cuda_graphs.in_graphed_step()


def _run_faster(prim, vals, params, timer=None):
    """The route's or the fallback's result, whichever the measurement for this signature
    chose; None means "run the fallback". The first call of a signature runs both (the
    route first, so its compile and autotuning stay out of the timing), times `_TIMED_RUNS`
    more runs of each with `timer(run, runs) -> seconds per run` (by default GPU time inside a
    step that CUDA graphs replay, host time with the GPU drained otherwise), and keeps the
    fastest. A route that lists variants (`route.variants(*vals, **params)`: the LSTM's
    whole-sequence and per-step plans) has each variant run once more and timed the same
    way."""
    key = _signature(prim, vals, params)
    choice = _choices.get(key)
    if choice is None:
        made = [c for k, c in _choices.items() if k[0] == prim.name]
        if len(made) >= _MEASURED_PER_PRIMITIVE:
            choice = max(sorted(set(made)), key=made.count)
            # A variant chosen for other sizes may not run this one (the LSTM's streamed
            # plan past 1024 units): the route's own pick runs instead.
            variant = choice.partition(":")[2]
            if variant and variant not in _variants(prim, vals, params):
                choice = "kernel"
    if choice == "fallback":
        return None
    if choice is not None:
        return _run_kernel(prim, vals, params, choice.partition(":")[2] or None)
    out = _run_kernel(prim, vals, params)
    if out is None:  # the route does not handle this case
        _choices[key] = "fallback"
        return None
    _reference_on_cuda(prim, vals, params)  # warm-up, as the route's first run was
    timer = timer or (_gpu_time if key[-1] else _host_time)
    timed = {"fallback": timer(lambda: _reference_on_cuda(prim, vals, params), _TIMED_RUNS)}
    for i, variant in enumerate(_variants(prim, vals, params)):
        if i > 0 and _run_kernel(prim, vals, params, variant) is None:  # warm-up, compile
            continue
        name = "kernel" if variant is None else f"kernel:{variant}"
        timed[name] = timer(partial(_run_kernel, prim, vals, params, variant), _TIMED_RUNS)
    _choices[key] = min(timed, key=lambda name: (timed[name], name == "fallback"))
    return out


def kernel_choices() -> dict:
    """What backend "auto" measured so far: {(primitive, shapes, params, graphed): "kernel",
    "kernel:<variant>" or "fallback"}, where shapes holds (shape, dtype, strides, device) per
    operand and graphed whether the call ran inside a step that CUDA graphs replay."""
    return dict(_choices)


def clear_kernel_choices() -> None:
    """Forgets the measurements: the next call of each signature measures again."""
    _choices.clear()


def bind(prim, params):
    """`execute(prim, vals, params)` prepared once for a step of a compiled plan (a plan is
    compiled per kernel backend and replays with torch's grad mode off): outside the "triton"
    backend, a primitive with a CPU route gets the CPU case decided first (CPU values run
    the route, the reference where it raises NotImplementedError; anything else goes through
    `execute`), skipping the checks a CPU call never needs (meta values, the CUDA route, the
    grad guard): about 1.5 us a call, a few calls a step of a small model."""
    route = prim.routes.get("cpu")
    if route is None or config.kernel_backend() == "triton":
        return lambda *vals: execute(prim, vals, params)
    impl = prim.impl

    def call(*vals):
        v = vals[0]
        if v is not None and v.device.type == "cpu":
            try:
                return route(*vals, **params)
            except NotImplementedError:
                return impl(*vals, **params)
        return execute(prim, vals, params)

    return call


primitive.set_executor(execute, bind)


def attach_kernel_routes() -> None:
    """Attaches the Triton routes (lazily: triton is imported on first use only)."""
    from keratron import triton_kernels

    triton_kernels.attach_routes()
