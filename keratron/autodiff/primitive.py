"""Primitives: the units the engine computes, records and differentiates.

A primitive bundles, in one place, its CPU implementation (torch; the reference semantics),
its abstract rule (output shapes/dtypes: its `shape_rule` where it has one, else the
implementation run on torch's "meta" device), its VJP rule written with keratron ops, the
facts the compiler needs about it (in-place form, fresh outputs, fusable epilogues) and its
device routes (`device_route`), which `ops._dispatch` may pick. `bind` is the one entry
point: it computes (or, under tracing, records a graph node) and lets every active
`GradientTape` record the call.
"""

from __future__ import annotations

import contextlib
import importlib
import sys
import threading
from collections.abc import Callable

import torch

from keratron.autodiff.tape import any_active, record_primitive
from keratron.autodiff.tensor import Tensor

PRIMITIVES: dict[str, Primitive] = {}


def _default_executor(prim, vals, params):
    return prim.impl(*vals, **params)


_executor = _default_executor


def _default_binder(prim, params):
    return lambda *vals: _executor(prim, vals, params)


_binder = _default_binder


def prepare_meta_kernels() -> None:
    """Makes torch's Python meta kernels safe to run in a process that loaded TensorFlow
    and not triton.

    Those kernels import torch._dynamo on first use, and torch._dynamo imports triton when
    it can; triton loaded after TensorFlow aborts the process (both bundle LLVM and register
    its command-line options: "LLVM ERROR: inconsistency in registered CommandLine
    options"). So, in that process only, torch._dynamo is imported first with triton hidden:
    torch records triton as absent (it could not be loaded there anyway) instead of loading
    it. Elsewhere this does nothing; the checks cost three dictionary lookups.
    """
    modules = sys.modules
    if "torch._dynamo" in modules or "triton" in modules or "tensorflow" not in modules:
        return
    modules["triton"] = None  # `import triton` raises ImportError while this holds
    try:
        importlib.import_module("torch._dynamo")
    finally:
        del modules["triton"]


class _TraceState(threading.local):
    def __init__(self):
        self.tracer = None  # the Graph being traced by keratron.function in this thread


trace_state = _TraceState()


@contextlib.contextmanager
def suspend_tracing():
    """Runs a block eagerly even inside a trace (variable initializers use this)."""
    saved = trace_state.tracer
    trace_state.tracer = None
    try:
        yield
    finally:
        trace_state.tracer = saved


_is_grad_enabled = torch.is_grad_enabled
# What torch.no_grad() sets, without the context manager's cost on every op.
_set_grad_enabled = torch._C._set_grad_enabled


def without_grad(fn: Callable, *args, **kwargs):
    """`fn(*args, **kwargs)` with torch's (thread-local) grad mode off, restored afterwards.

    keratron computes its own gradients: torch.autograd must never record its work, and the
    caller's grad mode is left as found. The one definition of that guard (the op dispatcher
    and the compiled replay use it).
    """
    if _is_grad_enabled():
        _set_grad_enabled(False)
        try:
            return fn(*args, **kwargs)
        finally:
            _set_grad_enabled(True)
    return fn(*args, **kwargs)


def executor():
    """The installed function `execute(prim, torch_values, params)` that runs a primitive on
    concrete values (the op dispatcher once `keratron.ops` is imported)."""
    return _executor


def bound_executor(prim, params: dict) -> Callable:
    """`f(*torch_values)` equal to `executor()(prim, torch_values, params)`, prepared once for
    a step of a compiled plan (which replays with torch's grad mode off): the op dispatcher's
    `bind` once `keratron.ops` is imported."""
    return _binder(prim, params)


def set_executor(fn, binder=None) -> None:
    """Installs the function that runs a primitive on concrete values (the op dispatcher),
    and the one that prepares it for a compiled plan's step (`bound_executor`)."""
    global _executor, _binder
    _executor = fn
    _binder = binder or _default_binder


DEVICE_KINDS = ("cuda", "cpu")


def device_route(prim: Primitive, device: str = "cuda") -> Callable[[Callable], Callable]:
    """Registers the decorated function as `prim`'s route on one kind of device.

    A route has the signature of the primitive's implementation,
    `route(*torch_values, **params) -> torch.Tensor` (a tuple for a multiple-result
    primitive), and must compute what `prim.impl` computes. It raises `NotImplementedError`
    for a case it does not handle; the dispatcher (`ops._dispatch.execute`) then runs the
    reference `prim.impl`. One route per primitive and device kind; registering again replaces
    the previous one. The function is returned unchanged.

    Device kinds:
        "cuda": the Triton kernel. It runs for CUDA values (backend "auto" times it once per
            call signature against the reference and keeps the faster) and for every call
            under backend "triton" (on CPU values that needs TRITON_INTERPRET=1; a route that
            raises NotImplementedError is then an error).
        "cpu": a CPU fast path (oneDNN, a GEMM). It runs for CPU values under backends
            "auto" and "fallback", without timing: a CPU route must be at least as fast as the
            reference wherever it does not raise.

    Args:
        prim: the `Primitive` the route computes.
        device: "cuda" or "cpu".

    Returns:
        A decorator that registers its function and returns it.

    Example:
        >>> sq = Primitive("doc_square", lambda x: x * x)
        >>> @device_route(sq, "cpu")
        ... def _square_cpu(x):
        ...     return torch.square(x)
        >>> sq.routes["cpu"] is _square_cpu
        True
        >>> del PRIMITIVES["doc_square"]
    """
    if not isinstance(prim, Primitive):
        raise TypeError(f"device_route expects a Primitive. Received: {prim!r}")
    if device not in DEVICE_KINDS:
        raise ValueError(
            f"device_route expects device to be one of {DEVICE_KINDS}. Received: {device!r}"
        )

    def register(fn: Callable) -> Callable:
        prim.routes[device] = fn
        return fn

    return register


class Primitive:
    """One operation the engine knows.

    Args:
        name: registry name; unique.
        impl: `impl(*torch_values, **params)` -> torch.Tensor (or tuple when multiple_results).
        vjp: `vjp(g, *inputs, out, **params)` -> tuple of input cotangents (None for none);
            `g` and `out` are tuples when the primitive has multiple results. None marks the
            primitive as not differentiable.
        abstract: optional `abstract(*meta_values, **params)`; defaults to `impl` on meta
            tensors.
        shape_rule: optional `shape_rule(*avals, **params)` -> list of (shape tuple, torch
            dtype), one per output, from the inputs' avals ((shape tuple, torch dtype) pairs,
            None for absent inputs); it may return None for a case it does not cover. It runs
            no kernel: shape inference (tracing, symbolic layer calls) then stays clear of
            torch's Python meta kernels, which import torch._dynamo and sympy. Where it
            answers, it takes precedence over `abstract` and must agree with `impl`.
        multiple_results: whether `impl` returns a tuple.
        effect: True for ops with side effects or randomness (never merged or folded).
        inplace: name of the torch.Tensor method that computes the op into its first input
            (`"add_"`), or a function of the inputs that does so; the compiler then reuses a
            dead input buffer for the result.
        commutative: whether the two inputs may be swapped (so the in-place form may write
            into the second input).
        fresh: whether every output is a new buffer, never a view of an input (the compiler
            may then overwrite it in place).
        epilogues: the activation names (`ops.epilogue.ACTIVATIONS`) the op applies itself
            through its `activation` parameter, after an optional bias input (its third); the
            compiler folds a following bias add and activation into the call.
        vjp_accepts_none: whether the VJP rule takes None (not zeros) for the cotangents of
            outputs that no gradient reached (multiple-result primitives).
        simplify: the op's algebraic clean-up, `rule(graph, node, producers) -> slot or None`,
            called by the compiler's `simplify` pass on every pure node of the op (producers:
            {slot: the node computing it}, so far). It returns the slot that already holds the
            node's value (the node goes), or None to keep the node, which it may rewrite in
            place (inputs, params, primitive) to an equal, cheaper call.
        fill_value: for an op whose output is this constant at the input's shape and dtype
            whatever the input's values (`ones_like`: 1); the compiler computes it at trace time.
        fuses_as: what the op is when it follows a primitive with `epilogues`, which may then
            fold it in: "bias" (adds a per-output-channel vector), "scale" (multiplies by one)
            or the name of the epilogue activation it computes ("relu").
        side_stream: whether a compiled plan may run the op on a second thread while the
            next steps run, when every core is busy (`autodiff.side_stream`): True for an op
            whose result is read late (a weight gradient, read by the optimizer's update), or
            a predicate of the nodes that read a call's outputs
            (`side_stream.read_by_effects_only`).

    Attributes:
        routes: {device kind: route}, filled by `device_route`.
        cpu_step: None, or `cpu_step(in_avals, params, general)` -> a callable or None: a
            compiled plan's step for this node, chosen when the plan is built from its input
            avals (None for absent inputs). The callable runs the kernel the CPU route would
            pick for those avals straight away, and calls `general` (the bound executor) for
            values that are not on the CPU. For small ops of small models, where the route's
            own decisions cost as much as the kernel.
    """

    __slots__ = (
        "name",
        "impl",
        "vjp",
        "abstract",
        "shape_rule",
        "multiple_results",
        "effect",
        "inplace",
        "commutative",
        "fresh",
        "epilogues",
        "vjp_accepts_none",
        "simplify",
        "fill_value",
        "fuses_as",
        "side_stream",
        "routes",
        "cpu_step",
    )

    def __init__(
        self,
        name: str,
        impl: Callable,
        vjp: Callable | None = None,
        abstract: Callable | None = None,
        multiple_results: bool = False,
        effect: bool = False,
        *,
        inplace: str | Callable | None = None,
        commutative: bool = False,
        fresh: bool = False,
        epilogues: tuple[str, ...] = (),
        vjp_accepts_none: bool = False,
        simplify: Callable | None = None,
        fill_value: float | None = None,
        fuses_as: str | None = None,
        side_stream: bool | Callable = False,
        shape_rule: Callable | None = None,
    ):
        if name in PRIMITIVES:
            raise ValueError(f"Primitive {name!r} is already registered.")
        self.name = name
        self.impl = impl
        self.vjp = vjp
        self.abstract = abstract
        self.multiple_results = multiple_results
        self.effect = effect
        self.inplace = inplace
        self.commutative = commutative
        self.fresh = fresh
        self.epilogues = frozenset(epilogues)
        self.vjp_accepts_none = vjp_accepts_none
        self.simplify = simplify
        self.fill_value = fill_value
        self.fuses_as = fuses_as
        self.side_stream = side_stream
        self.shape_rule = shape_rule
        self.routes: dict[str, Callable] = {}
        self.cpu_step: Callable | None = None
        PRIMITIVES[name] = self

    @property
    def kernel(self) -> Callable | None:
        """The "cuda" route (the Triton kernel), or None; an alias of `routes["cuda"]`."""
        return self.routes.get("cuda")

    @kernel.setter
    def kernel(self, fn: Callable | None) -> None:
        if fn is None:
            self.routes.pop("cuda", None)
        else:
            self.routes["cuda"] = fn

    def __repr__(self):
        return f"Primitive({self.name})"

    def abstract_eval(self, avals, params):
        """Output (shape, dtype) pairs from input (shape, dtype) pairs: the `shape_rule`'s
        answer, else the abstract rule (or `impl`) run on meta tensors."""
        if self.shape_rule is not None:
            out = self.shape_rule(*avals, **params)
            if out is not None:
                return [(tuple(shape), dtype) for shape, dtype in out]
        prepare_meta_kernels()
        metas = [None if a is None else torch.empty(a[0], dtype=a[1], device="meta") for a in avals]
        fn = self.abstract or self.impl
        out = fn(*metas, **params)
        outs = out if self.multiple_results else (out,)
        return [(tuple(o.shape), o.dtype) for o in outs]

    def bind(self, *args: Tensor | None, **params):
        """Runs the primitive on Tensors (None allowed for absent optional inputs)."""
        tracer = trace_state.tracer
        if tracer is not None and (self.effect or tracer.wants(args)):
            outs = tracer.record(self, args, params)
        else:
            vals = [None if a is None else a._value for a in args]
            out = _executor(self, vals, params)
            if self.multiple_results:
                outs = tuple(Tensor(o) for o in out)
            else:
                outs = Tensor(out)
        if self.vjp is not None and any_active():
            record_primitive(self, args, outs, params)
        return outs
