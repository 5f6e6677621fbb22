"""Graph optimisation passes and the lowering of a traced `Graph` to a flat replay plan.

Passes (each `pass(graph, outputs) -> outputs`, run in `PASSES` order):
- `simplify`: the clean-ups VJPs create (transpose of transpose, reshape of reshape, casts
  and reshapes to the same type/shape, multiply by one, add/subtract of zeros, double
  negation), each the `simplify` rule of its primitive, written in the op's module.
- `cse`: merges pure nodes with the same primitive, inputs and parameters.
- `fold_constants`: evaluates pure nodes whose inputs are all constants.
- `fuse_epilogues`: a primitive with `epilogues` (matmul, conv) followed by a bias add and an
  activation it accepts becomes one call.
- the passes that op modules register with `register_pass(fn)` (the max-pool rewrites of the
  pooling module, and on the CPU a convolution read only by a max pool whose indices nothing
  reads fused with it into one chunked call), in registration order, then the "late" ones
  (casts between the same two dtypes grouped into one multi-tensor call);
- `dce`: drops nodes that neither feed an output nor have an effect.
Effects (random draws, variable assignments, opaque updates) are never merged, folded or
dropped, and they keep their order.

Lowering (`compile_graph`) runs the `register_pass(fn, stage="prelude")` rewrites of a function
without effects (a CPU convolution's kernel relayout), hoists the work that reads only variables
into a prelude, binds each node to its kernel once, reuses a dead input buffer for the result
of a primitive with an `inplace` form (a chain of elementwise ops runs in one buffer) and frees
every intermediate right after its last use. What the compiler knows about a primitive is a
field of the `Primitive` (`inplace`, `commutative`, `fresh`, `epilogues`, `simplify`,
`fill_value`, `fuses_as`), never its name.
"""

from __future__ import annotations

import copy
import itertools
import linecache
import math
import threading
from collections.abc import Callable

import numpy as np
import torch

from keratron import config
from keratron.autodiff import memory_plan, side_stream, tree
from keratron.autodiff.primitive import without_grad
from keratron.autodiff.tape import engine
from keratron.autodiff.tensor import Tensor, Variable, convert_to_tensor
from keratron.autodiff.tracing import Graph, Node, Tracer

__all__ = [
    "PASSES",
    "optimize",
    "compile_graph",
    "CompiledFunction",
    "register_pass",
    "substitute",
    "uniform_value",
    "graph_device",
    "identity_on_same_aval",
    "is_const_fill",
    "new_const",
    "new_value",
    "producers",
    "use_counts",
    "variable_only",
]


# ------------------------------------------------------------------------------ helpers
def substitute(graph: Graph, outputs: list, subst: dict) -> list:
    """Rewires every node input and output slot through `subst` ({old slot: new slot})."""

    def r(s):
        while s in subst:
            s = subst[s]
        return s

    for node in graph.nodes:
        node.inputs = [None if s is None else r(s) for s in node.inputs]
    return [("slot", r(v)) if k == "slot" else (k, v) for k, v in outputs]


def producers(graph: Graph) -> dict:
    """{slot: the node that computes it}."""
    return {s: n for n in graph.nodes for s in n.outputs}


def is_const_fill(graph: Graph, s, value) -> bool:
    """Whether slot `s` is a (small) constant whose elements all equal `value`."""
    c = graph.consts.get(s)
    if c is None or c.numel() > 1 << 16:
        return False
    return bool(torch.all(c == value))


def uniform_value(graph: Graph, s):
    """The one value of a small constant whose elements are all equal (else None)."""
    c = graph.consts.get(s)
    if c is None or c.numel() == 0 or c.numel() > 1 << 16 or not c.dtype.is_floating_point:
        return None
    v = c.reshape(-1)[0]
    return float(v) if bool(torch.all(c == v)) else None


def identity_on_same_aval(graph: Graph, node: Node, prod: dict):
    """A `Primitive.simplify` rule: the node's value is its first input when the two have
    the same shape and dtype (a reshape, cast or broadcast to what the input already is)."""
    if graph.avals[node.inputs[0]] == graph.avals[node.outputs[0]]:
        return node.inputs[0]
    return None


def new_const(graph: Graph, value: float, dtype) -> int:
    """A new scalar constant slot holding `value`."""
    slot = graph._new_slot((), dtype)
    graph.consts[slot] = torch.tensor(value, dtype=dtype, device=graph_device(graph))
    return slot


def _params_key(params):
    try:
        key = tuple(sorted(params.items()))
        hash(key)
        return key
    except TypeError:
        return None


# ------------------------------------------------------------------------------ passes
def simplify(graph: Graph, outputs: list) -> list:
    """Applies each pure node's `Primitive.simplify` rule (the algebra its op module knows:
    multiply by one, double negation, transpose of transpose, ...), in graph order."""
    subst: dict = {}
    prod: dict = {}

    def r(s):
        while s in subst:
            s = subst[s]
        return s

    kept = []
    for node in graph.nodes:
        node.inputs = [None if s is None else r(s) for s in node.inputs]
        if node.kind == "prim" and node.prim.simplify is not None and not node.prim.effect:
            src = node.prim.simplify(graph, node, prod)
            if src is not None:
                subst[node.outputs[0]] = src
                continue
        for s in node.outputs:
            prod[s] = node
        kept.append(node)
    graph.nodes = kept
    return substitute(graph, outputs, subst)


def cse(graph: Graph, outputs: list) -> list:
    seen: dict = {}
    subst: dict = {}
    kept = []
    for node in graph.nodes:
        node.inputs = [None if s is None else subst.get(s, s) for s in node.inputs]
        if node.kind == "prim" and not node.prim.effect:
            pk = _params_key(node.params)
            if pk is not None:
                key = (node.prim.name, tuple(node.inputs), pk)
                prev = seen.get(key)
                if prev is not None:
                    for a, b in zip(node.outputs, prev.outputs):
                        subst[a] = b
                    continue
                seen[key] = node
        kept.append(node)
    graph.nodes = kept
    return substitute(graph, outputs, subst)


def fold_constants(graph: Graph, outputs: list) -> list:
    kept = []
    for node in graph.nodes:
        if node.kind == "prim" and node.prim.fill_value is not None:
            # Depends on its input's shape and dtype only, which tracing fixed.
            shape, dtype = graph.avals[node.outputs[0]]
            ref = graph.consts.get(node.inputs[0])
            device = ref.device if ref is not None else graph_device(graph)
            graph.consts[node.outputs[0]] = torch.full(
                shape, node.prim.fill_value, dtype=dtype, device=device
            )
            continue
        if (
            node.kind == "prim"
            and not node.prim.effect
            and all(s is None or s in graph.consts for s in node.inputs)
        ):
            vals = [None if s is None else graph.consts[s] for s in node.inputs]
            with torch.no_grad():
                out = node.prim.impl(*vals, **node.params)
            outs = out if node.prim.multiple_results else (out,)
            for s, v in zip(node.outputs, outs):
                graph.consts[s] = v
            continue
        kept.append(node)
    graph.nodes = kept
    return outputs


def graph_device(graph: Graph):
    """The device of a graph's values: its variables', else its constants', else the default."""
    for var in graph.captures.values():
        return var._value.device
    for c in graph.consts.values():
        return c.device
    return torch.device(config.default_device())


# A CPU plan whose every value has fewer elements than this replays on one intra-op thread:
# each product then has at most 64^3 multiply-adds (its operands and result each under 4,096
# elements), a few microseconds on one core, where entering a parallel region costs about as
# much and waits for the other threads. When a core is also held by another thread (numpy's
# OpenBLAS workers spin for a while after each of its products), each region waits for it:
# the bench's tiny step (32x32 @ 32x10 and Adam) ran at 165 us a step against 80 on one
# thread, in about half of the processes (2-core machine, 2 threads).
SERIAL_ELEMENTS = 1 << 12


def serial_plan(graph: Graph) -> bool:
    """Whether a plan of `graph` replays on one intra-op thread: its values are on the CPU
    and each has fewer than SERIAL_ELEMENTS elements. The caller's thread count is restored
    after each replay; `config.set_adapt_threads(False)` turns this off with the rest of
    keratron's thread-count changes."""
    if not graph.avals or graph_device(graph).type != "cpu":
        return False
    return all(math.prod(shape) < SERIAL_ELEMENTS for shape, _ in graph.avals.values())


def new_value(graph: Graph, prim, inputs: list, params: dict, aval) -> tuple:
    """A new node computing one value of the given aval with `prim` (a `Primitive`);
    returns (node, slot)."""
    slot = graph._new_slot(*aval)
    return Node("prim", inputs, [slot], prim, params), slot


def _channel_vector(graph: Graph, s, channels: int, dtype):
    """True when slot `s` holds a vector over the last axis: shape (C,) or (1, ..., 1, C)."""
    if s is None:
        return False
    shape, d = graph.avals[s]
    return (
        d == dtype and len(shape) >= 1 and shape[-1] == channels and all(x == 1 for x in shape[:-1])
    )


def _flat(graph: Graph, s, channels: int, before: list):
    if graph.avals[s][0] == (channels,):
        return s
    node, flat = new_value(
        graph, engine.reshape, [s], {"shape": (channels,)}, ((channels,), graph.avals[s][1])
    )
    before.append(node)
    return flat


def fuse_epilogues(graph: Graph, outputs: list) -> list:
    """Folds what follows a matmul/conv into the call itself, when the intermediate has no
    other consumer and so the fused call computes the same values:

    - a multiply by a per-output-channel vector (the inference form of BatchNormalization)
      becomes a scaled kernel and bias (`conv(x, W) * s == conv(x, W * s)`; the scaling of
      the small weight tensors is itself a graph node, so it follows weight updates);
    - an add of a per-channel vector becomes (or joins) the bias;
    - relu, relu6, sigmoid or tanh becomes the epilogue activation.

    The fused call moves to where the last folded op was (its inputs may be computed after
    the original call, e.g. BatchNormalization's scale); never across an effect.
    """
    uses = use_counts(graph, outputs)
    prod = producers(graph)
    index = {id(n): i for i, n in enumerate(graph.nodes)}
    effects = [i for i, n in enumerate(graph.nodes) if n.is_effect]
    subst: dict = {}
    dead: set = set()
    moved: dict = {}  # id(linear node) -> (position, nodes to run just before it)

    def linear_producer(a, at):
        mm = prod.get(a)
        if (
            mm is None
            or mm.kind != "prim"
            or not mm.prim.epilogues
            or len(mm.inputs) < 3
            or mm.params.get("activation") is not None
            or uses.get(a, 0) != 1
            or id(mm) in dead
            # The bias runs over the second operand's last axis: a vector has none.
            or len(graph.avals[mm.inputs[1]][0]) < 2
        ):
            return None
        start = moved.get(id(mm), (index[id(mm)], None))[0]
        if any(start < e < at for e in effects):
            return None
        return mm

    for i, node in enumerate(graph.nodes):
        node.inputs = [None if s is None else subst.get(s, s) for s in node.inputs]
        if node.kind != "prim" or id(node) in dead:
            continue
        fuses_as = node.prim.fuses_as
        out = node.outputs[0] if node.outputs else None
        if fuses_as in ("scale", "bias") and len(node.inputs) == 2:
            for a, b in ((node.inputs[0], node.inputs[1]), (node.inputs[1], node.inputs[0])):
                mm = linear_producer(a, i)
                if mm is None or graph.avals[out] != graph.avals[a]:
                    continue
                shape, dtype = graph.avals[a]
                channels = shape[-1]
                if not _channel_vector(graph, b, channels, dtype):
                    continue
                before = moved.get(id(mm), (i, []))[1]
                vec = _flat(graph, b, channels, before)
                kernel, bias = mm.inputs[1], mm.inputs[2]
                if fuses_as == "scale":
                    k_aval = graph.avals[kernel]
                    kn, kernel = new_value(graph, node.prim, [kernel, vec], {}, k_aval)
                    before.append(kn)
                    if bias is not None:
                        bn, bias = new_value(graph, node.prim, [bias, vec], {}, graph.avals[bias])
                        before.append(bn)
                elif bias is None:
                    bias = vec
                else:
                    bn, bias = new_value(graph, node.prim, [bias, vec], {}, graph.avals[bias])
                    before.append(bn)
                mm.inputs = [mm.inputs[0], kernel, bias] + mm.inputs[3:]
                moved[id(mm)] = (i, before)
                subst[out] = a
                # The fused call's result now stands for `out`: it has `out`'s readers, so a
                # further fold needs `out` to have had a single reader too.
                uses[a] = uses.get(out, 0)
                dead.add(id(node))
                break
        elif fuses_as is not None and len(node.inputs) == 1 and not node.params:
            # An activation primitive's `fuses_as` names the epilogue activation it computes.
            src = node.inputs[0]
            mm = linear_producer(src, i)
            if (
                mm is not None
                and fuses_as in mm.prim.epilogues
                and "activation" in mm.params
                and graph.avals[out] == graph.avals[src]
            ):
                mm.params = {**mm.params, "activation": fuses_as}
                moved[id(mm)] = (i, moved.get(id(mm), (i, []))[1])
                subst[out] = src
                uses[src] = uses.get(out, 0)
                dead.add(id(node))
    by_position: dict = {}
    for n in graph.nodes:
        if id(n) in moved:
            by_position.setdefault(moved[id(n)][0], []).append(n)
    nodes = []
    for i, n in enumerate(graph.nodes):
        if id(n) not in dead and id(n) not in moved:
            nodes.append(n)
        for mm in by_position.get(i, ()):
            nodes.extend(moved[id(mm)][1])
            nodes.append(mm)
    graph.nodes = nodes
    return substitute(graph, outputs, subst)


def dce(graph: Graph, outputs: list) -> list:
    live = {v for k, v in outputs if k == "slot"}
    kept = []
    for node in reversed(graph.nodes):
        if node.is_effect or any(s in live for s in node.outputs):
            kept.append(node)
            live.update(s for s in node.inputs if s is not None)
    graph.nodes = kept[::-1]
    return outputs


def resimplify(graph: Graph, outputs: list) -> list:
    """simplify once more: constant folding turns the VJPs' broadcast scale factors into
    constants, which the multiply and negative rules can then merge."""
    return simplify(graph, outputs)


PASSES = [simplify, cse, fold_constants, resimplify, fuse_epilogues, dce]
# Rewrites a function without effects gets before its prelude is hoisted (register_pass).
PRELUDE_PASSES: list = []
# The "late" passes of PASSES, kept after every "optimize" one (register_pass).
LATE_PASSES: list = []


def register_pass(fn: Callable, stage: str = "optimize") -> Callable:
    """Adds a graph rewrite that an op module owns (a peephole on its primitives, a lowering
    for one backend), so the generic passes never name it.

    Stages:
        "optimize": `fn(graph, outputs) -> outputs`, run after `fuse_epilogues` and before
            `dce`, in registration order (`outputs` as the passes take them: ("slot", s) or
            ("value", v) items).
        "late": as "optimize", but after every "optimize" pass, whenever registered (a
            rewrite that must see the graph the others leave: grouping casts).
        "prelude": `fn(graph) -> None`, run in place on a function without effects (inference)
            before the work that reads only variables is hoisted into its prelude; it may add
            nodes that read variables (a kernel stored in another layout) to be computed once
            per weight change.

    Registering the same function again does nothing. Returns `fn`, so it serves as a
    decorator.
    """
    if stage in ("optimize", "late"):
        if fn not in PASSES:
            before = dce if stage == "late" or not LATE_PASSES else LATE_PASSES[0]
            PASSES.insert(PASSES.index(before), fn)
            if stage == "late":
                LATE_PASSES.append(fn)
    elif stage == "prelude":
        if fn not in PRELUDE_PASSES:
            PRELUDE_PASSES.append(fn)
    else:
        raise ValueError(
            "register_pass: argument `stage` must be 'optimize', 'late' or 'prelude'. "
            f"Received: {stage!r}"
        )
    return fn


def optimize(graph: Graph, outputs: list) -> list:
    for p in PASSES:
        outputs = p(graph, outputs)
    return outputs


def use_counts(graph: Graph, outputs: list) -> dict:
    """{slot: how many node inputs read it}; a function output counts as 2**20 reads, so it is
    never taken for a dead buffer."""
    uses: dict = {}
    for node in graph.nodes:
        for s in node.inputs:
            if s is not None:
                uses[s] = uses.get(s, 0) + 1
    for k, v in outputs:
        if k == "slot":
            uses[v] = uses.get(v, 0) + (1 << 20)  # outputs are never overwritten
    return uses


# ------------------------------------------------------------------------------ lowering
def _kernel_call(graph: Graph, node: Node):
    prim, params = node.prim, node.params
    if prim.routes:
        from keratron.autodiff import primitive as _prim

        general = _prim.bound_executor(prim, params)
        if prim.cpu_step is not None and config.kernel_backend() != "triton":
            avals = [None if s is None else graph.avals[s] for s in node.inputs]
            return prim.cpu_step(avals, params, general) or general
        return general
    impl = prim.impl
    return (lambda *vals: impl(*vals, **params)) if params else impl


class CompiledFunction:
    """A flat replay plan: `steps` of (callable, input slots, output slots, slots to free).

    The plan is turned into straight-line Python once (one local variable per slot, each
    kernel pre-bound, `del` after each value's last use), so a replay costs one call per
    kernel and nothing else.
    """

    def __init__(
        self, graph, steps, n_slots, in_slots, out_items, out_structure, numpy_flags, prelude=None
    ):
        self.graph = graph
        self.steps = steps
        self.n_slots = n_slots
        self.in_slots = in_slots
        self.out_items = out_items
        self.out_structure = out_structure
        self.numpy_flags = numpy_flags
        self._capture_vars = [var for _, var in graph.captures.items()]
        kept = set(graph.captures) | set(graph.consts) | set(prelude.outputs if prelude else ())
        self._copy_out = [kind == "slot" and v in kept for kind, v in out_items]
        self.prelude = prelude
        # [the prelude's values or None, the (tensor, version) of each variable it read]
        self._pre: list = [None, None]
        self._replay = _codegen(graph, steps, in_slots, out_items, prelude)
        # A cuda_graphs.GraphedStep when keratron.function captures this plan on CUDA.
        self.graphed = None
        # The output buffers the plan's steps keep across replays (see memory_plan), and the
        # lock that gives them to one replaying thread at a time.
        self.kept_buffers: list = []
        self._kept_lock = threading.Lock()
        # Whether a replay runs on one intra-op thread (`serial_plan`).
        self.serial = serial_plan(graph)
        # What `compile_graph` lowered (its fetches, its prelude), for the second-stream
        # variant of the plan, built on first use: (replay, kept buffers), or False for none.
        self.lowering = None
        self._side = None

    @property
    def num_nodes(self) -> int:
        return len(self.graph.nodes)

    def dump(self) -> str:
        """The plan as text, one line per step: `outputs = kernel(inputs)`, then the values
        freed after it. Values are named `v<slot>` as in the replay source; the steps of the
        prelude (computed once per weight change) are marked `pre`.

        Example:
            >>> import keratron
            >>> f = keratron.function(lambda x: keratron.ops.exp(x) + 1.0)
            >>> print(f.get_concrete_graph(np.ones(3, "float32")).dump())  # doctest: +ELLIPSIS
            inputs: v0
            constants: v...
               0      v... = exp(v0)
               1      v... = add_(v..., v...)  [in place]...
            outputs: v...
        """
        names = {s: f"v{s}" for s in range(self.n_slots)}
        n_pre = self.prelude.n_steps if self.prelude is not None else 0
        lines = ["inputs: " + ", ".join(names[s] for s in self.in_slots)]
        if self.graph.captures:
            captured = (f"{names[s]}={var.path}" for s, var in self.graph.captures.items())
            lines.append("variables: " + ", ".join(captured))
        if self.graph.consts:
            lines.append("constants: " + ", ".join(names[s] for s in self.graph.consts))
        for k, (node, (fn, ins, outs, free)) in enumerate(zip(self.graph.nodes, self.steps)):
            args = ", ".join("None" if s is None else names[s] for s in ins)
            if node.kind == "prim":
                inplace = fn is node.prim.inplace or (
                    getattr(fn, "__name__", None) == node.prim.inplace
                )
                kernel = fn.__name__ if inplace else node.prim.name
                params = ", ".join(f"{key}={value!r}" for key, value in node.params.items())
                call = f"{kernel}({args}{', ' + params if params else ''})"
                call += "  [in place]" if inplace else ""
            else:
                call = f"{getattr(fn, '__name__', node.kind)}({args})"
            target = ", ".join(names[s] for s in outs)
            line = f"{k:>4} {'pre ' if k < n_pre else '    '} {target + ' = ' if target else ''}"
            line += call
            if free:
                line += "  free " + ", ".join(names[s] for s in sorted(free))
            lines.append(line)
        outputs = (names[v] if kind == "slot" else repr(v) for kind, v in self.out_items)
        lines.append("outputs: " + ", ".join(outputs))
        return "\n".join(lines)

    def run(self, leaves):
        """Replays the plan on a call's flattened arguments; returns the fetches."""
        if self.graphed is not None:  # on CUDA: a CUDA graph (see cuda_graphs.GraphedStep)
            return self.graphed.run(leaves)
        return self.run_uncaptured(leaves)

    def run_uncaptured(self, leaves):
        """`run` through the straight-line replay, never through a CUDA graph."""
        inputs = self.input_values(leaves)
        if self.prelude is not None:
            self._check_prelude()
        threads = torch.get_num_threads() if self.serial and config.adapt_threads() else 1
        replay, kept = self._replay, self.kept_buffers
        if side_stream.active() and not self.serial:
            replay, kept = self._side_variant() or (replay, kept)
        if threads > 1:
            torch.set_num_threads(1)
        try:
            if kept:
                values = memory_plan.replay_with_kept_buffers(
                    self._kept_lock,
                    kept,
                    lambda: without_grad(replay, inputs, self._capture_vars, self._pre),
                )
            else:
                values = without_grad(replay, inputs, self._capture_vars, self._pre)
        finally:
            if threads > 1:
                torch.set_num_threads(threads)
        return self.pack_outputs(values)

    def _side_variant(self):
        """The plan lowered for a second stream (`side_stream.schedule`): (replay, kept
        buffers), or None where no CPU step of the plan may run there."""
        if self._side is None:
            self._side = False
            if self.lowering is not None and graph_device(self.graph).type == "cpu":
                items, prelude = self.lowering
                start = prelude.n_steps if prelude is not None else 0
                plan = side_stream.schedule(self.graph.nodes, start)
                if plan is not None:
                    self._side = self._lower_side(items, prelude, *plan)
        return self._side or None

    def _lower_side(self, items, prelude, order, submits):
        graph = copy.copy(self.graph)
        graph.nodes = order
        index = {id(node): q for q, node in enumerate(order)}
        handed = {node_id: index[id(before)] for node_id, before in submits.items()}
        kept: list = []
        steps = _lower(graph, items, prelude, kept, side=handed)
        hand: dict = {}
        for node_id, q in handed.items():
            hand.setdefault(q, []).append(index[node_id])
        replay = _codegen(graph, steps, self.in_slots, self.out_items, prelude, hand)
        return replay, kept

    def input_values(self, leaves) -> list:
        """The torch values of a call's tensor arguments, in placeholder order."""
        inputs = []
        for x in leaves:
            if isinstance(x, Tensor):
                if not isinstance(x, Variable):
                    inputs.append(x._value)
            elif isinstance(x, np.ndarray):
                inputs.append(convert_to_tensor(x)._value)
        return inputs

    def pack_outputs(self, values, copy: bool = True):
        """The fetches' structure around the replay's output values (`copy`: clone those
        that are a variable's, a constant's or the prelude's storage)."""
        results = []
        for (kind, v), value, kept in zip(self.out_items, values, self._copy_out):
            if kind == "slot":
                # Never hand out a variable's or a constant's storage.
                results.append(Tensor(value.clone() if copy and kept else value))
            else:
                results.append(v)
        return tree.pack_sequence_as(self.out_structure, results)

    def _check_prelude(self):
        """Drops the prelude's values when a variable it read was written since they were
        computed: its keratron write count moved (every write through keratron bumps it,
        including fused optimizer kernels that leave torch's version counter alone), its
        torch version moved (a write to the storage from outside keratron), or it was rebound
        to another tensor."""
        seen = self._pre[1]
        if seen is not None and all(
            var._value is t and var._writes == writes and t._version == version
            for var, (t, writes, version) in zip(self.prelude.variables, seen)
        ):
            return
        self._pre[0] = None
        self._pre[1] = [
            (var._value, var._writes, var._value._version) for var in self.prelude.variables
        ]


_replay_ids = itertools.count()


def _codegen(graph, steps, in_slots, out_items, prelude=None, submits=None):
    """Straight-line Python for the plan: `_replay(inputs, captured_variables, pre) ->
    outputs`, where `pre[0]` holds the prelude's values from an earlier call (or None).
    `submits` ({step index: [indices of side steps]}) hands each listed step to the second
    stream (`side_stream.submit`) just before the keyed step; a side step's own place then
    waits for its result."""
    submits = submits or {}
    on_side = {j for listed in submits.values() for j in listed}
    namespace: dict = {"_submit": side_stream.submit}
    lines = ["def _replay(inputs, captures, pre):"]
    for i, slot in enumerate(in_slots):
        lines.append(f"    v{slot} = inputs[{i}]")
    for j, slot in enumerate(graph.captures):
        lines.append(f"    v{slot} = captures[{j}]._value")
    for slot, value in graph.consts.items():
        namespace[f"v{slot}"] = value
    n_pre = prelude.n_steps if prelude is not None else 0
    indent = "    "
    if n_pre:
        kept = ", ".join(f"v{s}" for s in prelude.outputs)
        lines.append("    if pre[0] is not None:")
        lines.append(f"        ({kept}{',' if len(prelude.outputs) == 1 else ''}) = pre[0]")
        lines.append("    else:")
        indent = "        "
    for k, (fn, ins, outs, free) in enumerate(steps):
        if n_pre and k == n_pre:
            lines.append(f"        pre[0] = ({kept}{',' if len(prelude.outputs) == 1 else ''})")
            indent = "    "
        namespace[f"f{k}"] = fn
        for j in submits.get(k, ()):
            side_args = "".join(", None" if s is None else f", v{s}" for s in steps[j][1])
            lines.append(f"{indent}p{j} = _submit(f{j}{side_args})")
        args = ", ".join("None" if s is None else f"v{s}" for s in ins)
        call = f"p{k}.result()" if k in on_side else f"f{k}({args})"
        if not outs:
            lines.append(f"{indent}{call}")
        elif len(outs) == 1:
            lines.append(f"{indent}v{outs[0]} = {call}")
        else:
            lines.append(f"{indent}{', '.join(f'v{o}' for o in outs)}, = {call}")
        if free:
            lines.append(f"{indent}del {', '.join(f'v{s}' for s in free)}")
    if n_pre and n_pre == len(steps):
        lines.append(f"        pre[0] = ({kept}{',' if len(prelude.outputs) == 1 else ''})")
    results = [f"v{v}" if kind == "slot" else "None" for kind, v in out_items]
    lines.append(f"    return ({', '.join(results)}{',' if len(results) == 1 else ''})")
    source = "\n".join(lines) + "\n"
    # A unique name registered with linecache: a traceback through the replay shows its line.
    filename = f"<keratron.function replay {next(_replay_ids)}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    exec(compile(source, filename, "exec"), namespace)
    return namespace["_replay"]


def compile_graph(graph: Graph, out, numpy_flags) -> CompiledFunction:
    flat = tree.flatten(out)
    items = []
    for x in flat:
        if isinstance(x, Tracer):
            if x._graph is not graph:
                raise ValueError(
                    "A keratron.function returned a tensor traced by another function."
                )
            items.append(("slot", graph.slot(x)))
        elif isinstance(x, Tensor):
            items.append(("slot", graph.slot(x)))
        else:
            items.append(("value", x))
    items = optimize(graph, items)
    prelude = _hoist_prelude(graph, items)
    kept: list = []
    steps = _lower(graph, items, prelude, kept)
    compiled = CompiledFunction(
        graph, steps, graph._n, list(graph.inputs), items, out, numpy_flags, prelude
    )
    compiled.kept_buffers = kept
    compiled.lowering = (items, prelude)
    return compiled


class Prelude:
    """The leading steps of a plan that read only variables and constants (BatchNormalization
    folded into a kernel, a transposed weight): in a function that writes no variable they
    are computed once and reused until one of the variables they read changes.

    `n_steps` are the first steps of the plan; `outputs` the values they hand to the rest;
    `variables` the captured variables they read.
    """

    def __init__(self, n_steps: int, outputs: list, variables: list):
        self.n_steps = n_steps
        self.outputs = outputs
        self.variables = variables


def variable_only(graph: Graph) -> set:
    """The slots computed from captured variables and constants alone (those included)."""
    fixed = set(graph.captures) | set(graph.consts)
    for n in graph.nodes:
        if not n.is_effect and all(s is None or s in fixed for s in n.inputs):
            fixed.update(n.outputs)
    return fixed


def _hoist_prelude(graph: Graph, outputs: list) -> Prelude | None:
    """Moves the variable-only nodes to the front of a function with no effects."""
    if any(n.is_effect for n in graph.nodes):
        return None  # a training step writes its variables: nothing stays valid across calls
    for rewrite in PRELUDE_PASSES:
        rewrite(graph)
    fixed = variable_only(graph)
    pre, rest = [], []
    for n in graph.nodes:
        (pre if all(s is None or s in fixed for s in n.inputs) else rest).append(n)
    read = {s for n in pre for s in n.inputs if s in graph.captures}
    if not pre or not read:
        return None
    used_later = {s for n in rest for s in n.inputs} | {v for k, v in outputs if k == "slot"}
    graph.nodes = pre + rest
    variables = [var for slot, var in graph.captures.items() if slot in read]
    return Prelude(len(pre), [s for n in pre for s in n.outputs if s in used_later], variables)


def _lower(
    graph: Graph, outputs: list, prelude: Prelude | None = None, kept=None, side=None
) -> list:
    """The plan's steps; with a list `kept`, large values that stay inside a call are written
    into buffers the steps keep across calls (memory_plan), which `kept` collects. `side`
    maps the id of each node that runs on a second thread (`side_stream`) to the step before
    which it is handed over: such a node never writes in place, and a kept buffer of its
    output lives from that step on."""
    side = side or {}
    uses = use_counts(graph, outputs)
    last_use: dict = {}
    for i, node in enumerate(graph.nodes):
        for s in node.inputs:
            if s is not None:
                last_use[s] = i
    protected = set(graph.inputs) | set(graph.consts) | set(graph.captures)
    protected |= {v for k, v in outputs if k == "slot"}
    if prelude is not None:  # kept across calls: never overwritten in place
        protected |= {s for n in graph.nodes[: prelude.n_steps] for s in n.outputs}
    fresh: set = set()
    steps = []
    writers: list = []  # (the step's KeptBuffers, its index, its outputs)
    views: list = []  # (output, input) pairs where the output may share the input's memory
    for i, node in enumerate(graph.nodes):
        ins = list(node.inputs)
        if node.kind == "prim":
            out = node.outputs[0] if len(node.outputs) == 1 else None
            fn = None
            on_side = id(node) in side
            if out is not None and not node.prim.routes and not node.params and not on_side:
                fn, ins = _inplace(graph, node.prim, ins, out, uses, fresh, protected)
            if fn is None:
                fn = _kernel_call(graph, node)
                if kept is not None and not protected.intersection(node.outputs):
                    n_kept = len(kept)
                    fn = memory_plan.kept_buffer_call(graph, node, fn, kept) or fn
                    if len(kept) > n_kept:
                        writers.append((kept[-1], side.get(id(node), i), node.outputs))
                if node.prim.fresh:
                    fresh.update(node.outputs)
                else:
                    views += [(o, s) for o in node.outputs for s in node.inputs if s is not None]
            else:
                fresh.add(out)
                views.append((out, ins[0]))  # written into its input's buffer
            steps.append((fn, ins, node.outputs, []))
        elif node.kind == "effect":
            f = node.fn
            steps.append((lambda *v, f=f: (f(*v), None)[1], ins, [], []))
        else:
            steps.append((_assign_fn(node), ins, [], []))
        free = [
            s
            for s in set(node.inputs)
            if s is not None and last_use.get(s) == i and s not in protected
        ]
        steps[-1] = (steps[-1][0], steps[-1][1], steps[-1][2], free)
    if writers:
        memory_plan.share_memory(_live_ranges(graph, writers, views, last_use, protected))
    return steps


def _live_ranges(graph: Graph, writers: list, views: list, last_use: dict, protected) -> list:
    """`(buffers, first step, last step)` for each kept-buffer writer: from its step to the
    last read of its outputs or of any value that may share their memory (a view, a result
    written in place); to the end when such a value is kept beyond the call (an output, a
    prelude value) or never read."""
    parent: dict = {}

    def root(s):
        while parent.get(s, s) != s:
            parent[s] = parent.get(parent[s], parent[s])
            s = parent[s]
        return s

    for a, b in views:
        ra, rb = root(a), root(b)
        if ra != rb:
            parent[ra] = rb
    end = len(graph.nodes)
    last: dict = {}
    for i, node in enumerate(graph.nodes):
        for s in node.outputs:
            r = root(s)
            last[r] = max(last.get(r, i), end if s in protected else last_use.get(s, i))
        for s in node.inputs:
            if s is not None and s in protected:
                last[root(s)] = end  # an input, constant or variable: lives past the call
    return [
        (buffers, i, max(last.get(root(s), end) for s in outputs))
        for buffers, i, outputs in writers
    ]


def _inplace(graph, prim, ins, out, uses, fresh, protected):
    """(the in-place torch method, its inputs) when `prim` has an in-place form and a dead
    fresh input buffer of the result's type can take the result; else (None, ins)."""
    if prim.inplace is None or len(ins) not in (1, 2):
        return None, ins
    out_aval = graph.avals[out]

    def reusable(s):
        return (
            s is not None
            and s in fresh
            and s not in protected
            and uses.get(s, 0) == 1
            and graph.avals[s] == out_aval
        )

    method = prim.inplace if callable(prim.inplace) else getattr(torch.Tensor, prim.inplace)
    if reusable(ins[0]):
        return method, ins
    if len(ins) == 2 and prim.commutative and reusable(ins[1]):
        return method, [ins[1], ins[0]]
    return None, ins


def _assign_fn(node: Node):
    var = node.var
    mode = node.kind

    def run(target, value):
        if value.dtype != target.dtype or value.device != target.device:
            value = value.to(device=target.device, dtype=target.dtype)
        if mode == "assign":
            target.copy_(value)
        elif mode == "assign_add":
            target.add_(value)
        else:
            target.sub_(value)
        var._writes += 1

    run.__name__ = f"{mode}:{var.path}"
    return run
