"""The public tracing API: record ops into a `Graph`, differentiate it, compile it, replay it.

Everything that builds graphs goes through here: `keratron.function` (a Python function, once
per input signature), the Estimator (a `model_fn` per mode), `saved_model` export (the serving
graph) and TF1-style sessions (fetches over placeholders).

    trace = Trace()
    x = trace.placeholder((32, 3), "float32")   # a graph input
    with trace:                                 # ops on x record nodes
        y = ops.sum(ops.tanh(x) * w)
    (dw,) = trace.gradients(y, [w])             # reverse mode, into the same graph
    step = trace.compile([y, dw])               # optimised, lowered replay plan
    y_value, dw_value = step.run([x_value])     # replay

Inside `with trace:` every `Primitive.bind` whose inputs include a tracer or a Variable, and
every effect (random draws, variable assignments, opaque updates such as an optimizer step),
becomes a node; ops on constants alone are computed at once. A `GradientTape` inside the block
records the traced ops as it does eager ones. `compile` optimises a copy of the graph
(`passes.optimize`: dead code, common subexpressions, constant folding, algebraic clean-ups,
epilogue fusion) and lowers it to a flat plan of pre-bound kernel calls; the trace itself is
unchanged, so one trace compiles for several sets of fetches.
"""

from __future__ import annotations

import contextlib

import torch

from keratron.autodiff import tree
from keratron.autodiff.dtypes import is_float, to_torch_dtype
from keratron.autodiff.primitive import Primitive, trace_state
from keratron.autodiff.tape import _unbroadcast, engine
from keratron.autodiff.tensor import Tensor, Variable, convert_to_tensor

__all__ = [
    "Trace",
    "Graph",
    "Node",
    "Tracer",
    "is_tracing",
    "record_effect",
]


class Tracer(Tensor):
    """A data-free tensor standing for a value of the graph being traced."""

    __slots__ = ("_graph",)

    def __init__(self, meta: torch.Tensor, graph):
        self._value = meta
        self._graph = graph

    def __repr__(self):
        return f"<Tracer shape={self.shape}, dtype={self.dtype}>"


class Node:
    """One graph operation: a primitive call, a variable assignment, or an opaque effect."""

    __slots__ = ("kind", "prim", "params", "inputs", "outputs", "fn", "var")

    def __init__(self, kind, inputs, outputs, prim=None, params=None, fn=None, var=None):
        self.kind = kind  # "prim" | "assign" | "assign_add" | "assign_sub" | "effect"
        self.prim = prim
        self.params = params or {}
        self.inputs = list(inputs)  # slot ids (None for absent optional inputs)
        self.outputs = list(outputs)  # slot ids
        self.fn = fn
        self.var = var  # the assigned Variable; for an effect, the tuple of those it updates

    @property
    def is_effect(self) -> bool:
        return self.kind != "prim" or self.prim.effect

    def __repr__(self):
        name = self.prim.name if self.prim is not None else self.kind
        return f"Node({name}, in={self.inputs}, out={self.outputs})"


class Graph:
    """A traced program over numbered value slots.

    Slots are graph inputs, constants (concrete Tensors met while tracing), variable captures
    (one slot per variable *version*: a read after an assignment is a different value, so no
    pass can merge reads across it) or node outputs. `avals[slot]` is (shape, torch dtype).
    """

    def __init__(self):
        self.nodes: list[Node] = []
        self.avals: dict[int, tuple] = {}
        self.inputs: list[int] = []
        self.consts: dict[int, torch.Tensor] = {}
        self.captures: dict[int, Variable] = {}
        self._slot_of: dict[int, int] = {}  # id(object) -> slot
        self._keep: list = []  # keeps traced objects alive so ids stay unique
        self._var_version: dict[int, int] = {}
        self._var_slot: dict[tuple, int] = {}
        self._n = 0

    @property
    def num_slots(self) -> int:
        """How many value slots the graph has numbered (slots are 0 .. num_slots - 1)."""
        return self._n

    def copy(self) -> Graph:
        """A copy that the passes may rewrite without changing this graph (the traced
        objects and constants are shared, not copied)."""
        g = Graph.__new__(Graph)
        g.nodes = [
            Node(n.kind, n.inputs, n.outputs, n.prim, dict(n.params), n.fn, n.var)
            for n in self.nodes
        ]
        g.avals = dict(self.avals)
        g.inputs = list(self.inputs)
        g.consts = dict(self.consts)
        g.captures = dict(self.captures)
        g._slot_of = dict(self._slot_of)
        g._keep = list(self._keep)
        g._var_version = dict(self._var_version)
        g._var_slot = dict(self._var_slot)
        g._n = self._n
        return g

    # ------------------------------------------------------------------ slots
    def _new_slot(self, shape, dtype) -> int:
        s = self._n
        self._n += 1
        self.avals[s] = (tuple(shape), dtype)
        return s

    def new_input(self, shape, dtype) -> Tracer:
        meta = torch.empty(shape, dtype=dtype, device="meta")
        t = Tracer(meta, self)
        s = self._new_slot(shape, dtype)
        self._slot_of[id(t)] = s
        self._keep.append(t)
        self.inputs.append(s)
        return t

    def slot(self, x) -> int | None:
        if x is None:
            return None
        if isinstance(x, Variable):
            key = (id(x), self._var_version.get(id(x), 0))
            s = self._var_slot.get(key)
            if s is None:
                s = self._var_slot[key] = self._new_slot(x._value.shape, x._value.dtype)
                self.captures[s] = x
                self._keep.append(x)
            return s
        s = self._slot_of.get(id(x))
        if s is not None:
            return s
        if isinstance(x, Tracer):
            raise ValueError(
                "A tensor traced by another keratron.function was used here; tracers cannot "
                "leave the function that made them (return it as an output instead)."
            )
        if x._value.is_meta:
            raise RuntimeError(
                "Internal error while tracing: a data-free tensor that is not a graph value was "
                "used as an op input (some code built a Tensor from a traced value directly "
                "instead of through an op)."
            )
        s = self._new_slot(x._value.shape, x._value.dtype)
        self.consts[s] = x._value
        self._slot_of[id(x)] = s
        self._keep.append(x)
        return s

    def _tracer_for(self, shape, dtype) -> Tracer:
        t = Tracer(torch.empty(shape, dtype=dtype, device="meta"), self)
        self._slot_of[id(t)] = self._new_slot(shape, dtype)
        self._keep.append(t)
        return t

    # ------------------------------------------------------------------ recording
    def wants(self, args) -> bool:
        for a in args:
            if a is not None and (type(a) is Tracer or isinstance(a, Variable)):
                return True
        return False

    def record(self, prim: Primitive, args, params):
        ins = [self.slot(a) for a in args]
        avals = [None if a is None else (tuple(a._value.shape), a._value.dtype) for a in args]
        outs = [
            self._tracer_for(shape, dtype) for shape, dtype in prim.abstract_eval(avals, params)
        ]
        self.nodes.append(Node("prim", ins, [self._slot_of[id(o)] for o in outs], prim, params))
        return tuple(outs) if prim.multiple_results else outs[0]

    def record_assign(self, var: Variable, value: Tensor, mode: str) -> None:
        s_val = self.slot(value)
        s_var = self.slot(var)
        self.nodes.append(Node(mode, [s_var, s_val], [], var=var))
        self._var_version[id(var)] = self._var_version.get(id(var), 0) + 1

    def record_effect(self, fn, inputs, variables=()) -> None:
        """Records `fn(*input_values)` to run at this point of every replay (it may mutate the
        given `variables`, whose later reads become new values)."""
        ins = [self.slot(x) for x in inputs]
        variables = tuple(variables)
        self.nodes.append(Node("effect", ins, [], fn=fn, var=variables))
        for v in variables:
            self._var_version[id(v)] = self._var_version.get(id(v), 0) + 1


class Trace:
    """A graph being recorded, and what can be done with it: differentiate, compile.

    Use it as a context manager: ops run inside `with trace:` in this thread record nodes
    (a trace may be entered several times; each entry adds to the same graph).

    Example:
        >>> w = keratron.Variable([1.0, 2.0, 3.0])
        >>> trace = keratron.autodiff.tracing.Trace()
        >>> x = trace.placeholder((3,), "float32")
        >>> with trace:
        ...     y = keratron.ops.sum(x * w)
        >>> (g,) = trace.gradients(y, [w])
        >>> step = trace.compile([y, g])
        >>> [v.numpy().tolist() for v in step.run([keratron.ops.ones((3,))])]
        [6.0, [1.0, 1.0, 1.0]]
    """

    def __init__(self):
        self.graph = Graph()
        self._saved: list = []

    def __enter__(self) -> Trace:
        self._saved.append(trace_state.tracer)
        trace_state.tracer = self.graph
        return self

    def __exit__(self, *exc) -> None:
        trace_state.tracer = self._saved.pop()

    @contextlib.contextmanager
    def _active(self):
        if trace_state.tracer is self.graph:
            yield
        else:
            with self:
                yield

    # ------------------------------------------------------------------ inputs and state
    def placeholder(self, shape, dtype) -> Tracer:
        """A new graph input of a fixed `shape` and `dtype` (a dtype name or torch dtype);
        `compile(...).run(inputs)` takes the inputs in the order they were made."""
        if not isinstance(dtype, torch.dtype):
            dtype = to_torch_dtype(dtype)
        shape = tuple(shape)
        if not all(isinstance(d, int) and d >= 0 for d in shape):
            raise ValueError(
                "Trace.placeholder: the shape must be fully known (non-negative ints). "
                f"Received: shape={shape}"
            )
        return self.graph.new_input(shape, dtype)

    @property
    def placeholders(self) -> list:
        """The graph inputs' slots, in the order `run` takes their values."""
        return list(self.graph.inputs)

    def owns(self, x) -> bool:
        """Whether `x` is a value of this trace (a placeholder or an op result)."""
        return isinstance(x, Tracer) and x._graph is self.graph

    def captured_variables(self) -> list:
        """The variables the traced ops read or write, each once, in first-use order."""
        seen, out = set(), []
        for v in self.graph.captures.values():
            if id(v) not in seen:
                seen.add(id(v))
                out.append(v)
        return out

    def writes(self, variable: Variable) -> bool:
        """Whether the traced program assigns `variable` (or an effect updates it)."""
        return self.graph._var_version.get(id(variable), 0) > 0

    def replace_variable(self, old: Variable, new: Variable) -> None:
        """Makes the graph read `new` wherever it read `old` (a frozen copy for export)."""
        if tuple(new.shape) != tuple(old.shape) or new._value.dtype != old._value.dtype:
            raise ValueError(
                f"Trace.replace_variable: {new.path!r} ({new.shape}, {new.dtype}) cannot stand "
                f"for {old.path!r} ({old.shape}, {old.dtype})."
            )
        for slot, var in list(self.graph.captures.items()):
            if var is old:
                self.graph.captures[slot] = new

    # ------------------------------------------------------------------ differentiate
    def gradients(self, targets, sources, output_gradients=None) -> list:
        """Gradients of the sum of `targets` with respect to each of `sources`, added to the
        graph (as `tf.gradients` in a TF1 graph): reverse mode over the recorded nodes with
        the primitives' VJP rules, which record their own nodes.

        Args:
            targets: a Tensor or structure of Tensors of this trace.
            sources: a list of placeholders, op results or Variables (a Variable's gradient
                sums over every read of it in the graph).
            output_gradients: optional cotangents, one per target (ones by default).

        Returns:
            A list with one gradient (or None, where a source does not reach the targets)
            per source, in the source's dtype.
        """
        g = self.graph
        targets, sources = tree.flatten(targets), list(sources)
        ograds = (
            [None] * len(targets) if output_gradients is None else tree.flatten(output_gradients)
        )
        if len(ograds) != len(targets):
            raise ValueError(
                f"Trace.gradients: {len(ograds)} output_gradients for {len(targets)} targets."
            )
        handles = _SlotHandles(g)
        source_slots = [self._source_slots(s) for s in sources]
        needed = {s for slots in source_slots for s in slots}
        nodes = list(g.nodes)
        for node in nodes:
            if any(s in needed for s in node.inputs if s is not None):
                needed.update(node.outputs)
        grads: dict = {}

        def accumulate(slot, value):
            prev = grads.get(slot)
            grads[slot] = value if prev is None else _bind("add", prev, value)

        with self._active():
            for t, og in zip(targets, ograds):
                slot = g.slot(t)
                if not is_float(g.avals[slot][1]):
                    continue
                t = handles[slot]
                accumulate(slot, _bind("ones_like", t) if og is None else convert_to_tensor(og))
            for node in reversed(nodes):
                prim = node.prim
                if node.kind != "prim" or prim.vjp is None:
                    continue
                if not any(o in grads for o in node.outputs):
                    continue
                if not any(s in needed for s in node.inputs if s is not None):
                    continue
                outs = [handles[o] for o in node.outputs]
                if prim.vjp_accepts_none:
                    gs = [grads.get(o) for o in node.outputs]
                else:
                    gs = [
                        grads[o] if o in grads else _bind("zeros_like", h)
                        for o, h in zip(node.outputs, outs)
                    ]
                ins = [None if s is None else handles[s] for s in node.inputs]
                if prim.multiple_results:
                    in_grads = prim.vjp(tuple(gs), *ins, out=tuple(outs), **node.params)
                else:
                    in_grads = prim.vjp(gs[0], *ins, out=outs[0], **node.params)
                for s, x, gi in zip(node.inputs, ins, in_grads):
                    if gi is None or s is None or s not in needed or not is_float(x._value.dtype):
                        continue
                    accumulate(s, _unbroadcast(gi, x.shape))
            result = []
            for src, slots in zip(sources, source_slots):
                parts = [grads[s] for s in slots if s in grads]
                total = None
                for p in parts:
                    total = p if total is None else _bind("add", total, p)
                if total is not None and total._value.dtype != src._value.dtype:
                    total = _bind("cast", total, dtype=src._value.dtype)
                result.append(total)
        return result

    def _source_slots(self, x) -> list:
        g = self.graph
        if isinstance(x, Variable):
            return [s for s, v in g.captures.items() if v is x]
        if not self.owns(x):
            raise ValueError(
                "Trace.gradients: a source must be a placeholder or an op result of this trace, "
                f"or a Variable. Received: {x!r}"
            )
        return [g.slot(x)]

    # ------------------------------------------------------------------ compile
    def compile(self, fetches, numpy_inputs=None):
        """The optimised replay plan computing `fetches` (a structure of this trace's Tensors
        and Python values) from the placeholders.

        Every effect of the trace (assignments, random draws, opaque updates) runs on each
        replay; pure nodes that no fetch needs are dropped. The trace is left as it was.

        Args:
            fetches: what `run` returns, in this structure.
            numpy_inputs: optional flags, one per `run` input, for inputs given as numpy
                arrays (they are converted at each call).

        Returns:
            A `passes.CompiledFunction`: `run(inputs)` replays the plan.
        """
        from keratron.autodiff import passes

        flags = [False] * len(self.graph.inputs) if numpy_inputs is None else list(numpy_inputs)
        graph = self.graph.copy()

        def on_copy(x):
            # This trace's values stand for the same slots of the copy.
            if not self.owns(x):
                return x
            t = Tracer(x._value, graph)
            graph._slot_of[id(t)] = self.graph.slot(x)
            graph._keep.append(t)
            return t

        fetches = tree.pack_sequence_as(fetches, [on_copy(x) for x in tree.flatten(fetches)])
        return passes.compile_graph(graph, fetches, flags)


class _SlotHandles(dict):
    """A Tensor standing for each slot of a graph, for calling VJP rules on recorded nodes.

    A captured variable's slot gets a tracer of its own: the Variable object stands for its
    latest value, and a VJP must read the value the node read.
    """

    def __init__(self, graph: Graph):
        super().__init__()
        self._graph = graph
        for x in graph._keep:
            s = graph._slot_of.get(id(x))
            if s is not None and not isinstance(x, Variable):
                self[s] = x

    def __missing__(self, slot):
        g = self._graph
        shape, dtype = g.avals[slot]
        t = Tracer(torch.empty(shape, dtype=dtype, device="meta"), g)
        g._slot_of[id(t)] = slot
        g._keep.append(t)
        self[slot] = t
        return t


def _bind(name, *args, **params):
    # The engine's primitives are installed by keratron.ops (autodiff never imports it).
    return getattr(engine, name).bind(*args, **params)


def is_tracing() -> bool:
    """True while a `keratron.function` body is being traced in this thread."""
    return trace_state.tracer is not None


def record_effect(fn, inputs, variables=()) -> None:
    """Inside a trace, records an opaque effect (see `Graph.record_effect`)."""
    trace_state.tracer.record_effect(fn, inputs, variables)
