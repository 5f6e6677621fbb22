"""`tf.Module`: a named container whose variables and submodules are found by walking its
attributes, as TensorFlow's `Module._flatten` does.

The walk visits a module's attributes in sorted order (and lists, tuples and dicts in them,
dict keys sorted), yields its own matches first and then those of its submodules, and yields
each object once.
"""

from __future__ import annotations

import contextlib
import re

from keratron import autodiff

__all__ = ["Module"]

_CAMEL = re.compile(r"((?<=[a-z0-9])[A-Z]|(?!^)[A-Z](?=[a-z]))")


def _leaves(value):
    if isinstance(value, dict):
        for key in sorted(value, key=str):
            yield from _leaves(value[key])
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _leaves(item)
    else:
        yield value


def _flatten(module, predicate, seen, stack):
    recursive = id(module) not in stack
    submodules = []
    for key in sorted(vars(module)):
        for leaf in _leaves(vars(module)[key]):
            if id(leaf) in seen:
                continue
            seen.add(id(leaf))
            if predicate(leaf):
                yield leaf
            if recursive and isinstance(leaf, Module):
                submodules.append(leaf)
    stack.append(id(module))
    for sub in submodules:
        yield from _flatten(sub, predicate, seen, stack)
    stack.pop()


def _is_variable(x) -> bool:
    return isinstance(x, autodiff.Variable)


class Module:
    """`tf.Module(name=None)`: groups variables and other modules under a name.

    `variables`, `trainable_variables` and `submodules` are found from the attributes (a
    subclass need not call `super().__init__()` for them), in TensorFlow's order.

    Example:
        >>> import keratron.compat.v2 as tf
        >>> class Dense(tf.Module):
        ...     def __init__(self):
        ...         super().__init__()
        ...         self.w = tf.Variable(tf.ones([3, 2]))
        >>> Dense().name, len(Dense().variables)
        ('dense', 1)
    """

    def __init__(self, name: str | None = None):
        if name is None:
            name = _CAMEL.sub(r"_\1", type(self).__name__).lower()
        elif not (isinstance(name, str) and name.isidentifier()):
            raise ValueError(
                f"'{name}' is not a valid module name. Module names must be valid Python "
                "identifiers (e.g. a valid class name)."
            )
        self._name = name

    @property
    def name(self) -> str:
        return self._name

    @property
    def name_scope(self):
        """A context manager for the module's name scope (names are not scoped in keratron)."""
        return contextlib.nullcontext(self._name + "/")

    def _flatten(self, predicate):
        return tuple(_flatten(self, predicate, {id(self)}, []))

    @property
    def variables(self) -> tuple:
        """Every variable of this module and its submodules."""
        return self._flatten(_is_variable)

    @property
    def trainable_variables(self) -> tuple:
        return self._flatten(lambda x: _is_variable(x) and x.trainable)

    @property
    def non_trainable_variables(self) -> tuple:
        return self._flatten(lambda x: _is_variable(x) and not x.trainable)

    @property
    def submodules(self) -> tuple:
        """Every module reachable from this one's attributes (not itself)."""
        return self._flatten(lambda x: isinstance(x, Module))

    @classmethod
    def with_name_scope(cls, method):
        """Decorator entering the module's name scope around `method` (a no-op here)."""
        return method
