"""Reverse-mode autodiff: `GradientTape`, `stop_gradient`, `custom_gradient`.

The engine is deliberately small: a tape is a list of (inputs, outputs, vjp) records in
execution order, which is already a topological order. `gradient` walks it backwards, looks
up each record's VJP, sums cotangents back to each input's shape (the only place
un-broadcasting happens) and accumulates. VJPs are written with keratron ops, so when an outer
tape is recording, the backward pass is itself recorded: nested tapes give higher derivatives.
"""

from __future__ import annotations

import contextlib
import functools
import threading

from keratron.autodiff import tree
from keratron.autodiff.dtypes import is_float
from keratron.autodiff.tensor import Tensor, Variable, convert_to_tensor


class EnginePrimitives:
    """The ops primitives the engine binds itself: the tape sums cotangents (`add`), sums them
    back to an input's shape (`sum`, `reshape`), seeds and zero-fills them (`ones_like`,
    `zeros_like`), fixes their dtype (`cast`), stacks jacobian rows (`stack`) and stops
    gradients (`stop_gradient`); the compiler reshapes (`reshape`).

    autodiff sits below ops and never imports it: `keratron.ops` installs them once, at import,
    with `install_engine_primitives`.
    """

    __slots__ = (
        "add",
        "sum",
        "reshape",
        "cast",
        "stack",
        "ones_like",
        "zeros_like",
        "stop_gradient",
    )


engine = EnginePrimitives()


def install_engine_primitives(**prims) -> None:
    """Installs the `Primitive`s of `EnginePrimitives`, every one, by keyword.

    Raises:
        ValueError: naming the missing and unknown keywords.
    """
    names = set(EnginePrimitives.__slots__)
    if set(prims) != names:
        raise ValueError(
            f"install_engine_primitives expects exactly the keywords {sorted(names)}. "
            f"Missing: {sorted(names - set(prims))}; unknown: {sorted(set(prims) - names)}."
        )
    for name, prim in prims.items():
        setattr(engine, name, prim)


class _State(threading.local):
    def __init__(self):
        self.tapes: list[GradientTape] = []


_state = _State()


def active_tapes() -> tuple:
    """The `GradientTape`s entered in this thread and not yet exited, innermost last.

    Example:
        >>> with keratron.GradientTape() as tape:
        ...     keratron.autodiff.active_tapes()[-1] is tape
        True
    """
    return tuple(_state.tapes)


def any_active() -> bool:
    """Whether a `GradientTape` is entered in this thread (the cheap test `Primitive.bind`
    makes on every call before offering the call to the tapes)."""
    return bool(_state.tapes)


def _should_record(tape, inputs) -> bool:
    watched = tape._watched
    hit = False
    for a in inputs:
        if a is None:
            continue
        if id(a) in watched:
            hit = True
        elif (
            tape._watch_vars
            and isinstance(a, Variable)
            and a.trainable
            and is_float(a._value.dtype)
        ):
            watched[id(a)] = a
            tape._variables[id(a)] = a
            hit = True
    return hit


def record_primitive(prim, inputs, outputs, params) -> None:
    """Called by `Primitive.bind`: lets every recording tape keep the call."""
    outs = outputs if prim.multiple_results else (outputs,)
    vjp = None
    for tape in _state.tapes:
        if tape._recording and _should_record(tape, inputs):
            if vjp is None:
                vjp = _primitive_vjp(prim, inputs, outputs, params)
            tape._records.append((inputs, outs, vjp, prim.vjp_accepts_none))
            for o in outs:
                tape._watched[id(o)] = o


def _primitive_vjp(prim, inputs, outputs, params):
    if prim.multiple_results:
        return lambda gs: prim.vjp(tuple(gs), *inputs, out=outputs, **params)
    return lambda gs: prim.vjp(gs[0], *inputs, out=outputs, **params)


def record_custom(inputs, outputs, vjp) -> None:
    """Records a node whose backward is `vjp(list_of_output_grads) -> input grads`."""
    for tape in _state.tapes:
        if tape._recording and _should_record(tape, inputs):
            tape._records.append((tuple(inputs), tuple(outputs), vjp, False))
            for o in outputs:
                tape._watched[id(o)] = o


def _unbroadcast(g: Tensor, shape: tuple) -> Tensor:
    gshape = g.shape
    if gshape == shape:
        return g
    lead = len(gshape) - len(shape)
    inner = tuple(lead + i for i, d in enumerate(shape) if d == 1 and gshape[lead + i] != 1)
    if not inner:
        # Only added leading axes (a bias broadcast over a batch): one sum drops them.
        g = engine.sum.bind(g, axis=tuple(range(lead)), keepdims=False)
        return g if g.shape == tuple(shape) else engine.reshape.bind(g, shape=tuple(shape))
    g = engine.sum.bind(g, axis=tuple(range(lead)) + inner, keepdims=True)
    return engine.reshape.bind(g, shape=tuple(shape))


class GradientTape:
    """Records operations for automatic differentiation, as `tf.GradientTape` does.

    Args:
        persistent: allow `gradient` to be called more than once.
        watch_accessed_variables: watch every trainable Variable read inside the block.

    Example:
        >>> x = keratron.Variable(3.0)
        >>> with keratron.GradientTape() as tape:
        ...     y = x * x
        >>> float(tape.gradient(y, x))
        6.0
    """

    def __init__(self, persistent: bool = False, watch_accessed_variables: bool = True):
        self._persistent = persistent
        self._watch_vars = watch_accessed_variables
        self._records: list = []
        self._watched: dict[int, Tensor] = {}
        self._variables: dict[int, Variable] = {}
        self._recording = False
        self._used = False

    def __enter__(self):
        self._recording = True
        _state.tapes.append(self)
        return self

    def __exit__(self, *exc):
        self._recording = False
        if self in _state.tapes:
            _state.tapes.remove(self)

    @property
    def is_recording(self) -> bool:
        """Whether the tape records now: inside its `with` block and not paused by
        `stop_recording` (nor by `gradient` computing the backward pass)."""
        return self._recording

    def recorded(self, x) -> bool:
        """Whether `x` is watched by this tape or the output of an op it recorded, so that
        gradients flow from `x` back to the watched tensors."""
        return id(x) in self._watched

    def watch(self, tensor) -> None:
        """Makes the tape track operations on `tensor` (a Tensor, Variable or structure)."""
        for t in tree.flatten(tensor):
            if not isinstance(t, Tensor):
                raise ValueError(
                    f"GradientTape.watch expects Tensors or Variables. Received: {type(t).__name__}"
                )
            self._watched[id(t)] = t
            if isinstance(t, Variable):
                self._variables[id(t)] = t

    def watched_variables(self) -> tuple:
        return tuple(self._variables.values())

    @contextlib.contextmanager
    def stop_recording(self):
        """Temporarily stops recording on this tape."""
        was = self._recording
        self._recording = False
        try:
            yield
        finally:
            self._recording = was

    def reset(self) -> None:
        """Forgets everything recorded so far."""
        self._records.clear()
        self._watched.clear()
        self._variables.clear()

    def gradient(self, target, sources, output_gradients=None, unconnected_gradients="none"):
        """Gradients of `target` (a structure of Tensors; summed) w.r.t. each of `sources`.

        Returns a structure like `sources`, with None (or zeros when
        `unconnected_gradients="zero"`) for sources the target does not depend on.
        """
        if self._used and not self._persistent:
            raise RuntimeError(
                "A non-persistent GradientTape can only be used to compute one set of "
                "gradients. Use GradientTape(persistent=True) to call gradient() again."
            )
        if unconnected_gradients not in ("none", "zero"):
            raise ValueError(
                "unconnected_gradients must be 'none' or 'zero'. "
                f"Received: {unconnected_gradients!r}"
            )
        self._used = True
        targets = tree.flatten(target)
        flat_sources = tree.flatten(sources)
        for s in flat_sources:
            if not isinstance(s, Tensor):
                raise ValueError(
                    f"GradientTape.gradient: sources must be Tensors or Variables. "
                    f"Received: {type(s).__name__}"
                )
        if output_gradients is None:
            ograds = [None] * len(targets)
        else:
            ograds = tree.flatten(output_gradients)
            if len(ograds) != len(targets):
                raise ValueError(
                    f"output_gradients has {len(ograds)} entries for {len(targets)} targets."
                )
        grads: dict[int, Tensor] = {}

        def accumulate(key, g):
            prev = grads.get(key)
            grads[key] = g if prev is None else engine.add.bind(prev, g)

        was = self._recording
        self._recording = False  # the backward pass is recorded only by outer tapes
        try:
            for t, og in zip(targets, ograds):
                if not isinstance(t, Tensor) or not is_float(t._value.dtype):
                    continue
                g = engine.ones_like.bind(t) if og is None else convert_to_tensor(og, dtype=t.dtype)
                accumulate(id(t), g)
            needed = self._needed(flat_sources)
            for inputs, outputs, vjp, accepts_none in reversed(self._records):
                if not any(id(o) in grads for o in outputs):
                    continue
                if not any(a is not None and id(a) in needed for a in inputs):
                    continue
                if accepts_none:
                    # The rule gets None (not zeros) for outputs no cotangent reached.
                    gs = [grads.get(id(o)) for o in outputs]
                else:
                    gs = [
                        grads[id(o)] if id(o) in grads else engine.zeros_like.bind(o)
                        for o in outputs
                    ]
                in_grads = vjp(gs)
                if len(in_grads) != len(inputs):
                    raise AssertionError(
                        f"VJP returned {len(in_grads)} grads for {len(inputs)} inputs"
                    )
                for a, g in zip(inputs, in_grads):
                    if g is None or a is None or id(a) not in needed:
                        continue
                    if not is_float(a._value.dtype):
                        continue
                    accumulate(id(a), _unbroadcast(g, a.shape))
        finally:
            self._recording = was
        result = []
        for s in flat_sources:
            g = grads.get(id(s))
            if g is None and unconnected_gradients == "zero":
                g = engine.zeros_like.bind(s)
            elif g is not None and g.dtype != s.dtype and is_float(s._value.dtype):
                g = engine.cast.bind(g, dtype=s._value.dtype)
            result.append(g)
        if not self._persistent:
            # The records go; `watched_variables()` still answers afterwards, as in TF.
            self._records.clear()
            self._watched.clear()
        return tree.pack_sequence_as(sources, result)

    def _needed(self, sources) -> set:
        """Ids of tensors that depend on some source: only their cotangents are computed.

        A source the tape never watched gets no gradient (None), as in `tf.GradientTape`,
        even when it is an input of an op recorded because of another, watched input.
        """
        needed = {id(s) for s in sources if id(s) in self._watched}
        for inputs, outputs, _, _ in self._records:
            if any(a is not None and id(a) in needed for a in inputs):
                needed.update(id(o) for o in outputs)
        return needed

    def jacobian(self, target, sources, unconnected_gradients="none"):
        """Full Jacobian d target / d source (rows of `target`'s flattened size)."""
        if not self._persistent:
            raise RuntimeError("jacobian() needs GradientTape(persistent=True).")
        n = int(target._value.numel())
        flat_sources = tree.flatten(sources)
        rows = [[] for _ in flat_sources]
        for i in range(n):
            og = engine.zeros_like.bind(target)._value.reshape(-1).clone()
            og[i] = 1
            g = self.gradient(
                target,
                flat_sources,
                output_gradients=Tensor(og.reshape(target._value.shape)),
                unconnected_gradients=unconnected_gradients,
            )
            for r, gi in zip(rows, g):
                r.append(gi)
        out = []
        for s, r in zip(flat_sources, rows):
            if r[0] is None:
                out.append(None)
                continue
            stacked = engine.stack.bind(*r, axis=0)
            out.append(engine.reshape.bind(stacked, shape=target.shape + s.shape))
        return tree.pack_sequence_as(sources, out)


@contextlib.contextmanager
def stop_recording_all():
    """Pauses every active tape (used by `custom_gradient` to hide its forward pass)."""
    saved = [(t, t._recording) for t in _state.tapes]
    for t, _ in saved:
        t._recording = False
    try:
        yield
    finally:
        for t, was in saved:
            t._recording = was


def stop_gradient(x) -> Tensor:
    """Returns `x` as a constant: no gradient flows through it."""
    return engine.stop_gradient.bind(convert_to_tensor(x))


def custom_gradient(f):
    """Decorator: `f(*args)` returns `(outputs, grad_fn)`; `grad_fn(*output_grads)` returns
    the gradients of the Tensor arguments, in order (as `tf.custom_gradient`).

    Example:
        >>> @keratron.custom_gradient
        ... def clip_grad(x):
        ...     return x, lambda g: keratron.ops.clip(g, -1.0, 1.0)
    """

    @functools.wraps(f)
    def wrapped(*args, **kwargs):
        with stop_recording_all():
            outputs, grad_fn = f(*args, **kwargs)
        inputs = [a for a in tree.flatten(list(args)) if isinstance(a, Tensor)]
        flat_out = [o for o in tree.flatten(outputs) if isinstance(o, Tensor)]

        def vjp(gs):
            res = grad_fn(*gs)
            res = list(res) if isinstance(res, (list, tuple)) else [res]
            if len(res) != len(inputs):
                raise ValueError(
                    f"custom_gradient: grad_fn returned {len(res)} gradients for "
                    f"{len(inputs)} Tensor inputs of {f.__name__}."
                )
            return [None if r is None else convert_to_tensor(r) for r in res]

        record_custom(inputs, flat_out, vjp)
        return outputs

    return wrapped
