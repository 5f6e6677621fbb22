"""Whole-step CUDA graphs: which compiled plans can be captured, and their capture and replay.

On CUDA, a compiled step (the train, test and predict steps of `fit`, `evaluate` and
`predict`, or a `keratron.function(..., cuda_graphs=True)`) runs its first call of each input
signature uncaptured on a side stream (the warm-up: Triton autotuning and JIT, cuBLAS
workspaces), is captured as one `torch.cuda.CUDAGraph` on its second, and from then on each
call copies its inputs into the graph's static input buffers and replays it: the forward, the
gradients, the optimizer update and the metric updates in one launch. A step that cannot be
captured runs uncaptured, with one warning naming the cause. `keratron.config.set_cuda_graphs`
(or KERATRON_CUDA_GRAPHS=0) turns capture off; CPU steps never take this path.

Whether a plan can be captured is decided from the plan alone (`capture_plan`, which unit
tests run on CPU, answering for the step as it would run on CUDA), conservatively: what is
not known to be graph-safe is not captured.

- A primitive with `effect` (a random draw: keratron.random re-seeds a generator from a
  host-side (seed, counter) key at every draw) is captured only when a capture rule says it is
  graph-safe; a pure primitive is captured unless a rule names what makes it unsafe (Python
  state it keeps across calls, a host read). Rules: `register_capture_rule`; a rule may look at
  the call's parameters (a draw from a SeedGenerator is graph-safe, one with a fixed int seed
  is not). keratron.random's capture hook (`register_capture_hook`) gives each captured graph
  a generator of its own, registered with the graph, so that every replay draws fresh numbers.
- A variable assignment is captured; its write count is bumped after every replay, so the
  caches that check write counts (a compiled prelude) see the change.
- An opaque effect (an optimizer update, a metric's confusion-matrix update) is captured only
  when its function carries `capture_check`, a callable returning None (graph-safe on CUDA) or
  the reason it is not (the optimizers: gradient accumulation reads `iterations` on the host,
  a Python learning-rate callable, ...). Python code inside a captured effect runs once, at
  capture: anything it does besides launching kernels on device tensors is lost on replay.
- Every variable the step reads or writes (the optimizer's `iterations`, learning rate and
  slots included) and every non-scalar constant lives on the step's device.
- Shapes are static by construction: every value of a traced plan has the shape tracing gave
  it, so no data-dependent allocation can occur in a replay.

A capture that fails anyway (a kernel that synchronises with the host, which torch reports
while capturing) is reported the same way, and the step runs uncaptured from then on.
"""

from __future__ import annotations

import contextlib
import threading
import warnings
from dataclasses import dataclass, field

import torch

from keratron import config
from keratron.autodiff.primitive import Primitive, without_grad

__all__ = [
    "CapturePlan",
    "GraphedStep",
    "capture_plan",
    "register_capture_hook",
    "register_capture_rule",
]

# Primitive -> None (graph-safe), the reason it is not, or a function of the call's params
# giving one of those; see register_capture_rule.
_RULES: dict = {}
# Context-manager factories entered around every capture; see register_capture_hook.
_HOOKS: list = []


def register_capture_rule(prim: Primitive, reason) -> Primitive:
    """Declares whether `prim` may run inside a CUDA graph.

    Args:
        prim: the primitive.
        reason: None when a replay of the captured kernel does what a call does (an effect
            primitive whose state is device-resident, e.g. a sampler on a graph-registered
            generator); otherwise what makes it unsafe ("keeps its running extremes in a
            Python dict"), which the warning shows; or a function of the call's parameters
            (a dict) that returns one of those.

    Returns:
        `prim`.
    """
    if reason is not None and not isinstance(reason, str) and not callable(reason):
        raise TypeError(
            "register_capture_rule: `reason` must be None, a string or a function of the "
            f"call's parameters. Received: {reason!r}"
        )
    _RULES[prim] = reason
    return prim


def register_capture_hook(hook) -> None:
    """Adds `hook(graph, device, plan)`, a context manager entered before a step's capture
    begins and left after it ends, with the `torch.cuda.CUDAGraph` about to capture, the
    device and the step's `CapturePlan` (keratron.random registers a generator with the
    graph there). What it yields is kept as long as the graph."""
    _HOOKS.append(hook)


@dataclass
class CapturePlan:
    """What capturing a compiled plan as a CUDA graph would do, or why it cannot.

    Attributes:
        capturable: whether the plan is captured on CUDA.
        reasons: why not (empty when capturable), one entry per cause.
        nodes: the captured steps, in order (primitive names, `assign:<path>`, effect names).
        static_inputs: the plan's input slots, each backed by a static buffer that every call
            copies its argument into.
        device_resident: the paths of the variables the step reads or writes in place (model
            weights, optimizer `iterations`, learning rate and slots, metric state): they stay
            on the device and the graph reads and writes their storage.
        written: the variables whose write counts are bumped after each replay.
        device: the device the plan's variables and constants live on.
    """

    capturable: bool
    reasons: list = field(default_factory=list)
    nodes: list = field(default_factory=list)
    static_inputs: list = field(default_factory=list)
    device_resident: list = field(default_factory=list)
    written: list = field(default_factory=list)
    device: torch.device | None = None

    @property
    def reason(self) -> str | None:
        """The causes joined into one line, or None when capturable."""
        return "; ".join(self.reasons) if self.reasons else None


def _effect_name(fn) -> str:
    return getattr(fn, "capture_name", None) or getattr(fn, "__qualname__", repr(fn))


def _same_device(a: torch.device, b: torch.device) -> bool:
    return a.type == b.type and (a.index is None or b.index is None or a.index == b.index)


def capture_plan(compiled, device=None) -> CapturePlan:
    """The capture decision for a compiled plan (a `passes.CompiledFunction`), as it would be
    made on CUDA; see the module docstring for the rules. `device` is where the step runs
    (its inputs' device); by default, where its variables and constants live.

    Example:
        >>> f = keratron.function(lambda x: keratron.ops.tanh(x) * 2.0)
        >>> plan = capture_plan(f.get_concrete_graph(np.ones(3, "float32")))
        >>> plan.capturable, plan.reason
        (True, None)
    """
    from keratron.autodiff.passes import graph_device

    graph = compiled.graph
    device = torch.device(device) if device is not None else graph_device(graph)
    reasons: list = []
    nodes: list = []
    variables: dict = {}  # id -> Variable, first-use order
    written: dict = {}

    def note(reason):
        if reason not in reasons:
            reasons.append(reason)

    for var in graph.captures.values():
        variables.setdefault(id(var), var)
    for node in graph.nodes:
        if node.kind == "prim":
            prim = node.prim
            nodes.append(prim.name)
            if prim in _RULES:
                rule = _RULES[prim]
                reason = rule(node.params) if callable(rule) else rule
                if reason is not None:
                    note(f"primitive {prim.name!r} {reason}")
            elif prim.effect:
                note(
                    f"primitive {prim.name!r} is an effect with no graph-safe form (a random "
                    "draw re-seeds its generator from a host-side seed counter at every call)"
                )
        elif node.kind == "effect":
            name = _effect_name(node.fn)
            nodes.append(name)
            check = getattr(node.fn, "capture_check", None)
            if check is None:
                note(
                    f"the opaque effect {name} declares no graph-safe form (its Python would "
                    "run once, at capture)"
                )
            else:
                reason = check()
                if reason is not None:
                    note(reason)
            for var in node.var or ():
                variables.setdefault(id(var), var)
                written.setdefault(id(var), var)
        else:
            var = node.var
            nodes.append(f"{node.kind}:{var.path}")
            variables.setdefault(id(var), var)
            written.setdefault(id(var), var)
    if not graph.nodes:
        note("the step launches no kernel")
    for var in variables.values():
        if not _same_device(var._value.device, device):
            note(
                f"variable {var.path!r} lives on {var._value.device}, not on the step's "
                f"device {device} (each step would copy it)"
            )
    for value in graph.consts.values():
        if value.dim() > 0 and not _same_device(value.device, device):
            note(f"a constant of shape {tuple(value.shape)} lives on {value.device}, not {device}")
    return CapturePlan(
        capturable=not reasons,
        reasons=reasons,
        nodes=nodes,
        static_inputs=list(compiled.in_slots),
        device_resident=[v.path for v in variables.values()],
        written=list(written.values()),
        device=device,
    )


# ------------------------------------------------------------------------------ capture
_side_streams: dict = {}
_streams_lock = threading.Lock()
_graphed = threading.local()


def in_graphed_step() -> bool:
    """Whether this thread is running a step that CUDA graphs replay, in its warm-up call or
    its capture: what the ops decide there (backend "auto"'s kernel choices) is replayed from
    the graph, where a launch costs the host nothing, so GPU time is what to compare."""
    return getattr(_graphed, "active", False)


@contextlib.contextmanager
def _graphed_scope():
    previous = in_graphed_step()
    _graphed.active = True
    try:
        yield
    finally:
        _graphed.active = previous


def _side_stream(device: torch.device):
    """The stream warm-up calls and captures run on (one per device)."""
    with _streams_lock:
        s = _side_streams.get(device)
        if s is None:
            s = _side_streams[device] = torch.cuda.Stream(device=device)
        return s


def _on_side_stream(device, fn):
    """`fn()` on the device's side stream, ordered after and before the current stream's work
    (the warm-up call: lazy initialisation and autotuning happen off the capture)."""
    side = _side_stream(device)
    current = torch.cuda.current_stream(device)
    side.wait_stream(current)
    with torch.cuda.stream(side):
        out = fn()
    current.wait_stream(side)
    return out


def _capture_into(device, fn, plan=None):
    """(a `torch.cuda.CUDAGraph` holding the kernels `fn()` launches, `fn()`'s outputs: the
    graph's static output buffers, what the capture hooks yielded). The graph has its own
    memory pool."""
    graph = torch.cuda.CUDAGraph()
    with contextlib.ExitStack() as hooks:
        kept = [hooks.enter_context(hook(graph, device, plan)) for hook in _HOOKS]
        with torch.cuda.graph(graph, stream=_side_stream(device)):
            outs = fn()
    return graph, outs, kept


class GraphedStep:
    """Runs a compiled plan on CUDA as a CUDA graph: warm-up call, capture, replays.

    Built by `keratron.function` for a plan whose values live on CUDA; `CompiledFunction.run`
    hands each call to `run`. The graph is recaptured when a variable the plan reads was
    rebound to another tensor (its storage moved).
    """

    def __init__(self, compiled, name: str, warned: set | None = None, device=None):
        self.compiled = compiled
        self.name = name
        self.plan = capture_plan(compiled, device)
        self.failed: str | None = None
        self.replays = 0
        self._warned = warned if warned is not None else set()
        self._warmed = False
        self._graph = None
        self._static_inputs: list = []
        self._static_outputs: tuple = ()
        self._bound: list = []
        self._kept: list = []  # what the capture hooks gave the graph (its generators)
        self._lock = threading.Lock()

    @property
    def captured(self) -> bool:
        """Whether a graph is held (later calls replay it)."""
        return self._graph is not None

    def _warn(self, reason: str) -> None:
        # One warning per function and cause: a last partial batch (a second signature) that
        # cannot be captured for the same reason says nothing new.
        if reason in self._warned:
            return
        self._warned.add(reason)
        warnings.warn(
            f"keratron.function {self.name!r} runs without a CUDA graph: {reason}. "
            "(keratron.config.set_cuda_graphs(False) turns capture off and this warning too.)",
            stacklevel=4,
        )

    def run(self, leaves):
        compiled = self.compiled
        if not config.cuda_graphs():
            return compiled.run_uncaptured(leaves)
        reason = self.plan.reason or self.failed
        if reason is not None:
            self._warn(reason)
            return compiled.run_uncaptured(leaves)
        with self._lock:
            if not self._warmed:
                self._warmed = True
                return self._warm_up(leaves)
            inputs = compiled.input_values(leaves)
            if self._graph is None or not self._bindings_hold():
                if not self._capture(inputs):
                    return compiled.run_uncaptured(leaves)
            else:
                for static, value in zip(self._static_inputs, inputs):
                    static.copy_(value, non_blocking=True)
            self._graph.replay()
            self.replays += 1
            for var in self.plan.written:
                var._writes += 1
            # The next replay overwrites the static outputs: hand out copies.
            values = [None if v is None else v.clone() for v in self._static_outputs]
        return compiled.pack_outputs(values, copy=False)

    def _bindings_hold(self) -> bool:
        return all(v._value is t for v, t in zip(self.compiled._capture_vars, self._bound))

    def _warm_up(self, leaves):
        with _graphed_scope():
            return _on_side_stream(self.plan.device, lambda: self.compiled.run_uncaptured(leaves))

    def _capture(self, inputs) -> bool:
        compiled = self.compiled
        device = self.plan.device
        static = []
        for slot, value in zip(compiled.in_slots, inputs):
            shape, dtype = compiled.graph.avals[slot]
            buf = torch.empty(shape, dtype=dtype, device=device)
            buf.copy_(value)
            static.append(buf)
        # A fresh prelude holder: the captured graph recomputes the prelude on every replay,
        # so it follows weight updates without a host-side check.
        pre: list = [None, None]
        try:
            with _graphed_scope():
                graph, outs, self._kept = _capture_into(
                    device,
                    lambda: without_grad(compiled._replay, static, compiled._capture_vars, pre),
                    self.plan,
                )
        except Exception as e:  # torch reports a host sync or unsupported call while capturing
            self.failed = f"capture failed ({type(e).__name__}: {e})"
            self._warn(self.failed)
            return False
        self._graph, self._static_inputs, self._static_outputs = graph, static, tuple(outs)
        self._bound = [v._value for v in compiled._capture_vars]
        return True


def attach(compiled, name: str, warned: set, device=None) -> GraphedStep | None:
    """Gives `compiled` a `GraphedStep` when it runs on CUDA: on `device` (its inputs'), else
    where its variables and constants live. Elsewhere it is left alone and returns None."""
    from keratron.autodiff.passes import graph_device

    device = torch.device(device) if device is not None else graph_device(compiled.graph)
    if device.type != "cuda" or not torch.cuda.is_available():
        return None
    compiled.graphed = GraphedStep(compiled, name, warned, device)
    return compiled.graphed
