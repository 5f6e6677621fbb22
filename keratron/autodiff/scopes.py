"""Keras's backend scopes: `StatelessScope` (variables are read from a mapping and written to
it, never in place) and `SymbolicScope` (marks symbolic shape inference).

A `StatelessScope` gives each variable it maps, or that is written inside it, a private
storage for the duration of the block (`Variable._value` is swapped, as shape inference swaps
weights for meta tensors), so every read (ops, VJPs, `numpy()`, optimizers) sees the scope's
value. Writes reach the scope through the tracer hook that `Variable.assign*` and opaque
updates (`record_effect`: optimizer steps, metric counters) already use under
`keratron.function`: the scope installs itself as the thread's interpreter, runs every op
eagerly, and applies writes to the private storage. On exit every variable gets its own
storage back and the scope keeps the last values (`get_current_value`).
"""

from __future__ import annotations

import threading

from keratron.autodiff.primitive import executor, trace_state
from keratron.autodiff.tensor import Tensor, Variable, convert_to_tensor

__all__ = [
    "StatelessScope",
    "SymbolicScope",
    "get_stateless_scope",
    "get_symbolic_scope",
    "in_stateless_scope",
    "in_symbolic_scope",
]


class _Scopes(threading.local):
    def __init__(self):
        self.stateless = None
        self.symbolic = None


_scopes = _Scopes()


class _StatelessInterpreter:
    """Installed as the thread's tracer inside a `StatelessScope`: ops run eagerly (on the
    variables' scope values), writes go to the scope."""

    def __init__(self, scope):
        self.scope = scope

    def wants(self, args) -> bool:
        return False  # only effects (random draws) reach `record`

    def record(self, prim, args, params):
        out = executor()(prim, [None if a is None else a._value for a in args], params)
        return tuple(Tensor(o) for o in out) if prim.multiple_results else Tensor(out)

    def record_assign(self, var, value, mode) -> None:
        storage = self.scope._private(var)
        v = value._value.to(device=storage.device, dtype=storage.dtype)
        if mode == "assign":
            storage.copy_(v)
        elif mode == "assign_add":
            storage.add_(v)
        else:
            storage.sub_(v)

    def record_effect(self, fn, inputs, variables=()) -> None:
        for var in variables:
            self.scope._private(var)
        fn(*(x._value for x in inputs))


class StatelessScope:
    """A scope in which no variable is updated in place (Keras's `StatelessScope`).

    Variables listed in `state_mapping` read as their mapped values inside the scope.
    Assignments inside the scope (`assign`, `assign_add`, `assign_sub`, optimizer and metric
    updates) are collected instead of applied: outside the scope every variable keeps its
    value, and `get_current_value(v)` returns the last value `v` had inside (None for a
    variable neither mapped nor written). Unlike Keras, where a nested scope sees only its own
    mapping, a nested scope also sees the values of the scopes around it. Take gradients of
    computations on mapped variables inside the scope: a `GradientTape` records the variables
    themselves, and outside the scope they hold their own values again.

    Args:
        state_mapping: pairs `(variable, value)`; each value (a tensor, array or Variable)
            is cast to the variable's dtype and must have its shape.
        collect_losses: kept for Keras compatibility (`add_loss` collects into `losses`).
        initialize_variables: kept for Keras compatibility (keratron variables are
            initialised when created).

    Raises:
        ValueError: for a key that is not a Variable, or a value of another shape.
        RuntimeError: when entered while `keratron.function` traces (the trace records
            variable reads and writes itself).

    Example:
        >>> v = keratron.Variable([1.0, 2.0])
        >>> with keratron.StatelessScope(state_mapping=[(v, [5.0, 5.0])]) as scope:
        ...     _ = v.assign_add([1.0, 1.0])
        >>> v.numpy(), scope.get_current_value(v).numpy()
        (array([1., 2.], dtype=float32), array([6., 6.], dtype=float32))
    """

    def __init__(self, state_mapping=None, collect_losses=False, initialize_variables=True):
        self.collect_losses = collect_losses
        self.initialize_variables = initialize_variables
        self.losses = []
        self.state_mapping: dict[int, Tensor] = {}
        self._variables: dict[int, Variable] = {}
        self._swapped: dict[int, tuple] = {}
        self._entered = False
        for k, v in state_mapping or ():
            if not isinstance(k, Variable):
                raise ValueError(
                    "Invalid reference variable in StatelessScope: all keys in argument "
                    f"`mapping` must be Variable instances. Received instead: {k}"
                )
            v = convert_to_tensor(v.value if isinstance(v, Variable) else v, dtype=k.dtype)
            if tuple(v.shape) != tuple(k.shape):
                raise ValueError(
                    "Invalid variable value in StatelessScope: all values in argument "
                    "`mapping` must be tensors with a shape that matches the corresponding "
                    f"variable shape. For variable {k.path}, received invalid value with "
                    f"shape {tuple(v.shape)} (expected {tuple(k.shape)})."
                )
            self.state_mapping[id(k)] = v
            self._variables[id(k)] = k

    def __enter__(self):
        tracer = trace_state.tracer
        if tracer is not None and not isinstance(tracer, _StatelessInterpreter):
            raise RuntimeError(
                "StatelessScope cannot be entered while keratron.function traces a function: "
                "the trace already records variable reads and writes as graph values."
            )
        if self._entered:
            raise RuntimeError("This StatelessScope is already entered.")
        self._entered = True
        self._outer_tracer = tracer
        self._outer_scope = _scopes.stateless
        for key, value in self.state_mapping.items():
            var = self._variables[key]
            self._private(var).copy_(value._value.to(var._value.device))
        trace_state.tracer = _StatelessInterpreter(self)
        _scopes.stateless = self
        return self

    def __exit__(self, *exc):
        trace_state.tracer = self._outer_tracer
        _scopes.stateless = self._outer_scope
        for key, (var, original) in self._swapped.items():
            self.state_mapping[key] = Tensor(var._value)
            var._value = original
        self._swapped.clear()
        self._entered = False

    def _private(self, var: Variable):
        """The variable's storage for this scope (a copy of its value, made on first use)."""
        key = id(var)
        if key not in self._swapped:
            self._swapped[key] = (var, var._value)
            self._variables[key] = var
            var._value = var._value.clone()
        return var._value

    def add_loss(self, loss) -> None:
        self.losses.append(loss)

    def add_update(self, update) -> None:
        """Records `(variable, value)` as the variable's current value in the scope."""
        variable, value = update
        value = convert_to_tensor(value, dtype=variable.dtype)
        if self._entered:
            self._private(variable).copy_(value._value)
        else:
            self.state_mapping[id(variable)] = value
            self._variables[id(variable)] = variable

    def get_current_value(self, variable) -> Tensor | None:
        """The variable's value in the scope: mapped, or written inside; None otherwise."""
        key = id(variable)
        if key in self._swapped:
            return Tensor(variable._value.clone())
        return self.state_mapping.get(key)


def in_stateless_scope() -> bool:
    """Whether a `StatelessScope` is entered in this thread."""
    return _scopes.stateless is not None


def get_stateless_scope() -> StatelessScope | None:
    """The innermost `StatelessScope` entered in this thread, or None."""
    return _scopes.stateless


class SymbolicScope:
    """Marks a block as symbolic (shape and dtype inference), as Keras's `SymbolicScope`.

    Example:
        >>> with keratron.SymbolicScope():
        ...     keratron.autodiff.scopes.in_symbolic_scope()
        True
    """

    def __enter__(self):
        self.original_scope = _scopes.symbolic
        _scopes.symbolic = self
        return self

    def __exit__(self, *exc):
        _scopes.symbolic = self.original_scope


def in_symbolic_scope() -> bool:
    """Whether a `SymbolicScope` is entered in this thread."""
    return _scopes.symbolic is not None


def get_symbolic_scope() -> SymbolicScope | None:
    """The innermost `SymbolicScope` entered in this thread, or None."""
    return _scopes.symbolic
