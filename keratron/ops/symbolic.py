"""Ops on symbolic tensors: `keratron.ops.mean(x)` while a functional model is being built.

In Keras, every op called with a `KerasTensor` among its arguments records a node of the
functional graph instead of computing. keratron's ops know nothing of layers (layers sit
above ops), so the functional API registers how such a call is recorded
(`set_symbolic_call`, done by `keratron.layers.node`), and each public op is wrapped once, when
`keratron.ops` is imported, by `symbolic_aware`: a call whose arguments hold a
`SymbolicTensor` is handed to that recorder; any other call runs the op itself.

The wrapper is built with the op's own module globals, so it is found where the op was
(docstring examples, `inspect`), and `__wrapped__` leads to the op.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import types

__all__ = ["SymbolicTensor", "set_symbolic_call", "symbolic_aware", "wrap_namespaces"]


class SymbolicTensor:
    """Marker base of tensors that stand for values not computed yet (`KerasTensor`)."""

    __slots__ = ()


# The recorder: `record(op_name, op, args, kwargs) -> outputs`; None until layers load.
_recorder: list = [None]


def set_symbolic_call(record) -> None:
    """Registers how an op called on symbolic tensors is recorded (see the module doc)."""
    _recorder[0] = record


def _holds_symbolic(args, kwargs, symbolic=SymbolicTensor) -> bool:
    for a in args:
        if isinstance(a, symbolic):
            return True
        if type(a) in (list, tuple) and any(isinstance(x, symbolic) for x in a):
            return True
    return bool(kwargs) and _holds_symbolic(tuple(kwargs.values()), None)


def _template(op, name, holds, recorder):
    def wrapper(*args, **kwargs):
        if recorder[0] is not None and holds(args, kwargs):
            return recorder[0](name, op, args, kwargs)
        return op(*args, **kwargs)

    return wrapper


def symbolic_aware(op, name: str | None = None):
    """`op`, made to record a node when called on symbolic tensors (idempotent)."""
    if getattr(op, "_symbolic_aware", False):
        return op
    proto = _template(op, name or op.__name__, _holds_symbolic, _recorder)
    wrapper = types.FunctionType(
        proto.__code__, op.__globals__, op.__name__, None, proto.__closure__
    )
    functools.update_wrapper(wrapper, op)
    wrapper._symbolic_aware = True
    return wrapper


# Ops that answer for a symbolic tensor themselves (its static shape), or that do not compute
# on tensors: never recorded as graph nodes.
_NOT_RECORDED = {"shape", "ndim", "is_tensor", "convert_to_numpy", "custom_gradient", "dtype"}

# The op families and Keras namespaces of keratron.ops whose public functions are wrapped.
_MODULES = [
    "elementwise", "shaping", "sorting", "reduction", "creation", "linalg", "arrays", "segment",
    "nn", "signal", "core", "image", "xent", "rnn", "convolution", "math", "numpy",
]  # fmt: skip


def wrap_namespaces(namespace: dict) -> None:
    """Replaces every public op function of keratron.ops (the `namespace` dict of the package
    and each module of `_MODULES`) by its `symbolic_aware` form, one wrapper per op, so the
    same op is the same object under every name."""
    wrappers: dict = {}
    for short in _MODULES:
        module = importlib.import_module(f"keratron.ops.{short}")
        for name in getattr(module, "__all__", ()):
            op = getattr(module, name, None)
            if name in _NOT_RECORDED or not inspect.isfunction(op):
                continue
            original = getattr(op, "__wrapped__", op) if getattr(op, "_symbolic_aware", 0) else op
            wrapper = wrappers.get(original)
            if wrapper is None:
                # The node calls the op by this name: keratron.ops.<name>, else <module>.<name>
                top = namespace.get(name)
                top = getattr(top, "__wrapped__", top)
                qualified = name if top is original else f"{short}.{name}"
                wrapper = wrappers[original] = symbolic_aware(original, qualified)
            setattr(module, name, wrapper)
    for name, value in list(namespace.items()):
        if inspect.isfunction(value) and value in wrappers:
            namespace[name] = wrappers[value]
