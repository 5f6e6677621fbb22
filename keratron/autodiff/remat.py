"""Rematerialisation (gradient checkpointing): `remat` and `RematScope`, as Keras 3 has them.

`remat(f)` runs `f` with every tape paused, so none of its intermediate values is kept, and
records one tape node from `f`'s tensor arguments (and the variables and watched tensors it
reads) to its outputs. That node's VJP runs `f` again under a fresh tape and differentiates the
recomputed forward: memory for compute. Variable assignments inside `f` (a
BatchNormalization's moving statistics) are not applied a second time: the eager recompute runs
in a `StatelessScope`, and under `keratron.function` the recompute's writes are not recorded.

`RematScope(mode=...)` decides which layers built inside it rematerialise their calls; a layer
reads the innermost scope when it is constructed (`get_current_remat_mode`), and its
`__call__` wraps its `call` through `rematerialized_call`.
"""

from __future__ import annotations

import contextlib
import functools
import math
import threading
from collections import namedtuple

import torch

from keratron.autodiff import tree
from keratron.autodiff.dtypes import is_float
from keratron.autodiff.primitive import Primitive, suspend_tracing, trace_state
from keratron.autodiff.tape import (
    GradientTape,
    active_tapes,
    any_active,
    record_custom,
    stop_recording_all,
)
from keratron.autodiff.tensor import Tensor, Variable

__all__ = ["RematMode", "RematScope", "get_current_remat_mode", "remat", "rematerialized_call"]

_MODES = ("full", "activations", "larger_than", "list_of_layers", None)


class _ScopeStack(threading.local):
    def __init__(self):
        self.scopes: list[RematScope] = []


_stack = _ScopeStack()

RematMode = namedtuple("RematMode", ["mode", "output_size_threshold", "layer_names"])


class RematScope:
    """Enables rematerialisation for the layers created inside it (Keras's `RematScope`).

    Args:
        mode: "full" (every layer call), "activations" (only the `activation` of layers that
            have one), "larger_than" (layers whose output has more than
            `output_size_threshold` elements), "list_of_layers" (layers named in
            `layer_names`), or None (no rematerialisation, also inside an outer scope).
        output_size_threshold: the element count for "larger_than".
        layer_names: the layer names for "list_of_layers".

    Raises:
        ValueError: for another `mode`.

    Example:
        >>> with keratron.RematScope(mode="full"):
        ...     layer = keratron.layers.Dense(4, activation="relu")
        >>> y = layer(keratron.ops.ones((2, 3)))  # its backward recomputes its forward
    """

    def __init__(self, mode="full", output_size_threshold=1024, layer_names=None):
        if mode not in _MODES:
            raise ValueError(
                f"Invalid mode '{mode}'. Supported modes are: 'full', 'activations', "
                "'larger_than', 'list_of_layers', or None."
            )
        self.mode = mode
        self.output_size_threshold = output_size_threshold
        self.layer_names = layer_names or []
        self._pop_on_exit = False

    def __enter__(self):
        _stack.scopes.append(self)
        self._pop_on_exit = True
        return self

    def __exit__(self, *exc):
        if self._pop_on_exit:
            _stack.scopes.remove(self)
            self._pop_on_exit = False


def get_current_remat_mode() -> RematMode | None:
    """The innermost `RematScope`'s settings in this thread, or None outside any scope."""
    if not _stack.scopes:
        return None
    scope = _stack.scopes[-1]
    return RematMode(scope.mode, scope.output_size_threshold, scope.layer_names)


class _Sink(list):
    """A record list that keeps nothing: the probe tape only looks at what `f` reads."""

    def append(self, item):
        pass


class _ReadSet:
    """The probe tape's `_watched`: answers "not watched" for every tensor (so nothing is
    recorded) while noting the tensors `f` reads that some paused outer tape watches, and
    the trainable variables it reads (which an outer tape may watch on access)."""

    def __init__(self, outer):
        self.outer = outer
        self.found: dict[int, Tensor] = {}

    def get(self, key):
        hit = self.found.get(key)
        if hit is None:
            for t in self.outer:
                hit = t._watched.get(key)
                if hit is not None:
                    break
        return hit

    def __contains__(self, key):
        hit = self.get(key)
        if hit is not None:
            self.found.setdefault(key, hit)
        return False

    def __setitem__(self, key, value):
        # Written for the trainable variables f reads, and for the outputs of ops it records
        # (ignored: they are f's intermediates).
        if isinstance(value, Variable):
            self.found.setdefault(key, value)


class _ReadProbe(GradientTape):
    """A tape that records nothing and lists the outside tensors an ops sequence reads."""

    def __init__(self, outer):
        super().__init__(persistent=False, watch_accessed_variables=True)
        self._watched = _ReadSet(outer)
        self._records = _Sink()

    def reads(self) -> list:
        return list(self._watched.found.values())


class _WritesDiscarded:
    """Stands for the graph being traced while `f` is recomputed inside it: the recompute's
    ops are recorded into the graph, its variable writes and opaque updates are not (they
    were recorded by the forward pass already)."""

    def __init__(self, graph):
        self.graph = graph

    def wants(self, args) -> bool:
        return self.graph.wants(args)

    def record(self, prim, args, params):
        return self.graph.record(prim, args, params)

    def record_assign(self, var, value, mode) -> None:
        pass

    def record_effect(self, fn, inputs, variables=()) -> None:
        pass


@contextlib.contextmanager
def _recompute_scope():
    """Where `f` runs again: its variable writes are not applied a second time."""
    tracer = trace_state.tracer
    if tracer is None:
        from keratron.autodiff.scopes import StatelessScope

        with StatelessScope():
            yield
        return
    trace_state.tracer = _WritesDiscarded(tracer)
    try:
        yield
    finally:
        trace_state.tracer = tracer


# `x`, once the values after it are known: the recomputed forward reads its inputs through
# this, with the incoming cotangents as extra inputs, so that under `keratron.function` the
# compiler neither merges the recompute with the forward (which would keep the forward's
# intermediates alive until the backward, saving nothing) nor runs it before the backward
# needs it. Its value is `x` and its gradient goes to `x` alone.
remat_barrier_p = Primitive(
    "remat_barrier",
    lambda x, *after: x,
    lambda g, x, *after, out: (g, *(None for _ in after)),
    shape_rule=lambda x, *after: [x],
)


def _after(value, deps):
    if isinstance(value, Tensor) and deps:
        return remat_barrier_p.bind(value, *deps)
    return value


def remat(f):
    """Wraps `f` so that its backward pass recomputes its forward (Keras's `remat`).

    The wrapped function returns what `f` returns. Inside a `GradientTape` it keeps only its
    inputs and outputs; the gradient runs `f` again to rebuild the intermediate values. A
    function that draws from a `SeedGenerator` draws again when it is recomputed (as with
    Keras's torch backend), so its random values differ between forward and backward.

    Args:
        f: a callable on tensors (a function, a layer's `call`, an activation).

    Returns:
        The wrapped callable.

    Example:
        >>> w = keratron.Variable([1.0, 2.0])
        >>> block = keratron.remat(lambda x: keratron.ops.sum(keratron.ops.tanh(x * w)))
        >>> with keratron.GradientTape() as tape:
        ...     y = block(keratron.ops.ones((2,)))
        >>> tape.gradient(y, w).shape
        (2,)
    """

    @functools.wraps(f)
    def wrapped(*args, **kwargs):
        if not any_active():
            return f(*args, **kwargs)
        probe = _ReadProbe(active_tapes())
        with stop_recording_all(), probe:
            outputs = f(*args, **kwargs)
        inputs: dict[int, Tensor] = {}
        for a in tree.flatten([list(args), kwargs]):
            if isinstance(a, Tensor):
                inputs.setdefault(id(a), a)
        for a in probe.reads():
            inputs.setdefault(id(a), a)
        sources = [a for a in inputs.values() if is_float(a._value.dtype)]
        # The node's outputs are the tensors f made; one it passes through (an identity
        # activation returns its input) already carries its gradient to its source.
        made = [
            i
            for i, o in enumerate(tree.flatten(outputs))
            if isinstance(o, Tensor) and id(o) not in inputs
        ]
        flat = tree.flatten(outputs)
        flat_out = [flat[i] for i in made]
        if not sources or not flat_out:
            return outputs

        def vjp(gs):
            deps = [g for g in gs if isinstance(g, Tensor)] if trace_state.tracer else []
            with GradientTape(watch_accessed_variables=False) as tape:
                tape.watch(sources)
                a = tree.map_structure(lambda v: _after(v, deps), list(args))
                k = tree.map_structure(lambda v: _after(v, deps), dict(kwargs))
                with _recompute_scope():
                    again = tree.flatten(f(*a, **k))
            return tape.gradient([again[i] for i in made], sources, output_gradients=list(gs))

        record_custom(sources, flat_out, vjp)
        return outputs

    return wrapped


def _output_size(layer, args, kwargs) -> int:
    """The element count of `layer`'s outputs for these inputs, from its output spec (the
    call run on data-free "meta" tensors, as for a symbolic call)."""

    def meta(x):
        if isinstance(x, Tensor) and not x._value.is_meta:
            return Tensor(torch.empty(x.shape, dtype=x._value.dtype, device="meta"))
        return x

    # Sized on data-free values, out of every tape and trace: nothing here is recorded.
    with stop_recording_all(), suspend_tracing():
        out = layer.compute_output_spec(
            *tree.map_structure(meta, list(args)), **tree.map_structure(meta, dict(kwargs))
        )
    return sum(
        math.prod(d or 1 for d in o.shape)
        for o in tree.flatten(out)
        if isinstance(getattr(o, "shape", None), tuple)
    )


def rematerialized_call(layer, layer_call, args, kwargs):
    """`layer_call`, or its rematerialised form, as the layer's `RematScope` mode says.

    Args:
        layer: the layer being called; its `_remat_mode` was read when it was constructed.
        layer_call: the function computing the call (the layer's `call`).
        args, kwargs: the call's arguments (the "larger_than" mode sizes its output).

    Returns:
        The function to call with `*args, **kwargs`.
    """
    mode = getattr(layer, "_remat_mode", None)
    if not mode or mode.mode is None:
        return layer_call
    if mode.mode == "full":
        return remat(layer_call)
    if mode.mode == "activations":
        if getattr(layer, "activation", None) is None:
            return layer_call

        @functools.wraps(layer_call)
        def call_with_remat_activation(*a, **k):
            original = layer.activation
            layer.activation = remat(original)
            try:
                return layer_call(*a, **k)
            finally:
                layer.activation = original

        return call_with_remat_activation
    if mode.mode == "list_of_layers":
        return remat(layer_call) if layer.name in mode.layer_names else layer_call
    # "larger_than"
    if _output_size(layer, args, kwargs) > mode.output_size_threshold:
        return remat(layer_call)
    return layer_call
