"""`keratron.function`: trace a Python function into a graph, optimise it, replay it.

Tracing runs the Python body once per input signature with `Tracer` tensors (data-free
tensors on torch's "meta" device). Every `Primitive.bind` whose inputs include a tracer or a
Variable, and every effect (random draws, variable assignments, opaque updates such as an
optimizer step), becomes a node; ops on constants alone are computed once, at trace time.
A `GradientTape` inside the function records the traced ops as it does eager ones, and its
`gradient` call adds the VJP nodes to the same graph.

The graph is then optimised (`passes.optimize`: dead code, common subexpressions, constant
folding, algebraic clean-ups, epilogue fusion) and lowered to a flat plan of pre-bound kernel
calls with in-place reuse of dead buffers and a memory plan that drops each intermediate after
its last use. Replay never touches a tape.

Thread safety: one function (and so a model's `predict`, `evaluate` and `__call__`) may be
called from several threads at once, on any mix of input shapes. Each thread traces into its
own graph; a function traces one signature at a time (a thread that needs a signature another
thread is tracing waits for it), and only the variables the tracing thread creates count as
created by the trace. Calls that write the same variables are not ordered against each other:
running `fit` (or any training step) on one model from several threads at once is not
supported, nor is `fit` in one thread while another predicts with the same model.
"""

from __future__ import annotations

import functools
import threading
import warnings
from collections import Counter

import numpy as np
import torch

from keratron import config
from keratron.autodiff import tree
from keratron.autodiff.dtypes import standardize_dtype
from keratron.autodiff.primitive import Primitive, trace_state
from keratron.autodiff.tensor import (
    Tensor,
    Variable,
    collect_created_variables,
    convert_to_tensor,
)

__all__ = ["function", "Function", "Graph", "Tracer", "is_tracing", "record_effect"]


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
        self.var = var

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
        self.nodes.append(Node("effect", ins, [], fn=fn))
        for v in variables:
            self._var_version[id(v)] = self._var_version.get(id(v), 0) + 1


def is_tracing() -> bool:
    """True while a `keratron.function` body is being traced in this thread."""
    return trace_state.tracer is not None


def record_effect(fn, inputs, variables=()) -> None:
    """Inside a trace, records an opaque effect (see `Graph.record_effect`)."""
    trace_state.tracer.record_effect(fn, inputs, variables)


# ---------------------------------------------------------------------------- signatures
def _leaf_key(x):
    if isinstance(x, Variable):
        return ("V", id(x))
    if isinstance(x, Tensor):
        v = x._value
        return ("T", tuple(v.shape), v.dtype, v.device)
    if isinstance(x, np.ndarray):
        return ("T", x.shape, x.dtype.str, None)
    if isinstance(x, (int, float, bool, str, type(None), np.generic)):
        return ("P", type(x).__name__, x)
    return ("O", id(x))


def _structure_key(x):
    if isinstance(x, dict):
        return ("d", tuple((k, _structure_key(x[k])) for k in sorted(x, key=str)))
    if isinstance(x, (list, tuple)):
        return ("l" if isinstance(x, list) else "t", tuple(_structure_key(v) for v in x))
    return None


def _cache_key(args, kwargs, leaves):
    # The kernel backend is part of the key: the lowering decides by it how convolution
    # kernels are stored (see passes._relayout_conv_kernels).
    return (
        config.kernel_backend(),
        _structure_key([list(args), kwargs]),
        tuple(_leaf_key(x) for x in leaves),
    )


class Function:
    """A traced-and-compiled callable; see `function`."""

    def __init__(self, fn, input_signature=None, reduce_retracing=False, jit_compile=None):
        self._fn = fn
        self.input_signature = input_signature
        self.reduce_retracing = reduce_retracing
        self.jit_compile = jit_compile
        self._cache: dict = {}
        self.trace_count = 0
        self._leaf_history: list[list] = []
        self._warned = False
        # One trace at a time per function: a second thread asking for a signature being
        # traced waits for it instead of tracing it again (and layers build only once).
        self._trace_lock = threading.RLock()
        functools.update_wrapper(self, fn)

    def __get__(self, obj, objtype=None):
        if obj is None:
            return self
        bound = self.__dict__.setdefault("_bound", {})
        f = bound.get(id(obj))
        if f is None:
            f = bound[id(obj)] = Function(
                self._fn.__get__(obj, objtype), self.input_signature, self.reduce_retracing
            )
        return f

    def __call__(self, *args, **kwargs):
        if is_tracing():
            return self._fn(*args, **kwargs)  # nested: inline into the outer trace
        from keratron.autodiff import tape as _tape

        leaves = tree.flatten([list(args), kwargs])
        if _tape._state.tapes and any(isinstance(x, Tensor) for x in leaves):
            # An enclosing eager tape must see the ops: run the Python body eagerly.
            return self._fn(*args, **kwargs)
        key = _cache_key(args, kwargs, leaves)
        compiled = self._cache.get(key)
        if compiled is None:
            compiled = self._compiled_for(key, args, kwargs, leaves)
        return compiled.run(leaves)

    def _compiled_for(self, key, args, kwargs, leaves):
        with self._trace_lock:
            compiled = self._cache.get(key)  # another thread may have traced it meanwhile
            if compiled is None:
                compiled = self._cache[key] = self._trace(args, kwargs, leaves)
        return compiled

    def _trace(self, args, kwargs, leaves):
        self.trace_count += 1
        self._note_retrace(args, kwargs)
        graph = Graph()
        traced_leaves = []
        for x in leaves:
            if isinstance(x, Tensor) and not isinstance(x, Variable):
                traced_leaves.append(graph.new_input(x._value.shape, x._value.dtype))
            elif isinstance(x, np.ndarray):
                t = convert_to_tensor(x)
                traced_leaves.append(graph.new_input(t._value.shape, t._value.dtype))
            else:
                traced_leaves.append(x)
        t_args, t_kwargs = tree.pack_sequence_as([list(args), kwargs], traced_leaves)
        saved = trace_state.tracer
        trace_state.tracer = graph
        try:
            # Only this thread's creations count: other threads make variables of their own.
            with collect_created_variables() as created:
                out = self._fn(*t_args, **t_kwargs)
        finally:
            trace_state.tracer = saved
        if self.trace_count > 1 and created:
            raise ValueError(
                f"keratron.function {getattr(self._fn, '__name__', '')!r} created variables on a "
                "call after its first trace. Variables may be created only while the function "
                "is traced for the first time (e.g. layers building in the first step)."
            )
        from keratron.autodiff import passes

        return passes.compile_graph(graph, out, [isinstance(x, np.ndarray) for x in leaves])

    def _note_retrace(self, args, kwargs):
        names = _argument_names(self._fn, args, kwargs)
        keys = [
            _leaf_key(x) if not isinstance(x, (list, tuple, dict)) else _structure_key(x)
            for x in list(args) + list(kwargs.values())
        ]
        self._leaf_history.append(keys)
        if self.trace_count > 5 and not self._warned:
            changing = Counter()
            for prev, cur in zip(self._leaf_history, self._leaf_history[1:]):
                for i, (a, b) in enumerate(zip(prev, cur)):
                    if a != b:
                        changing[i] += 1
            if changing:
                i = changing.most_common(1)[0][0]
                name = names[i] if i < len(names) else f"argument {i}"
                warnings.warn(
                    f"keratron.function {getattr(self._fn, '__name__', '')!r} was traced "
                    f"{self.trace_count} times; argument {name!r} keeps changing (new shapes, "
                    "dtypes or Python values each call). Pass tensors of fixed shape, or "
                    "Python values that do not change.",
                    stacklevel=3,
                )
                self._warned = True

    def get_concrete_graph(self, *args, **kwargs):
        """The optimised plan for these arguments (traced if needed), for inspection."""
        leaves = tree.flatten([list(args), kwargs])
        key = _cache_key(args, kwargs, leaves)
        compiled = self._cache.get(key)
        return compiled if compiled is not None else self._compiled_for(key, args, kwargs, leaves)


def _argument_names(fn, args, kwargs):
    import inspect

    try:
        params = list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        params = []
    return params[: len(args)] + list(kwargs)


def function(fn=None, input_signature=None, reduce_retracing=False, jit_compile=None):
    """Compiles `fn` by tracing it per input signature, like `tf.function`.

    The Python body runs once per signature (tensor shapes/dtypes and Python values);
    later calls replay the optimised graph. Variables are captured by reference, so
    `assign*` inside the function takes effect on every call.

    Example:
        >>> @keratron.function
        ... def step(x):
        ...     return keratron.ops.tanh(x) * 2.0
        >>> step(keratron.ops.ones((2,))).shape
        (2,)
    """
    if fn is None:
        return functools.partial(
            function,
            input_signature=input_signature,
            reduce_retracing=reduce_retracing,
            jit_compile=jit_compile,
        )
    return Function(fn, input_signature, reduce_retracing, jit_compile)


def _dtype_name(d):
    return standardize_dtype(d)
