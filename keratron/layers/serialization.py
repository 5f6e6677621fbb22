"""The registry of custom classes and functions that configs may name.

`register_keras_serializable`, `custom_object_scope` and `get_custom_objects` are re-exported
by `keratron.saving` and `keratron.utils`, where Keras puts them.
"""

from __future__ import annotations

import contextlib
import threading

__all__ = [
    "register_keras_serializable",
    "custom_object_scope",
    "get_custom_objects",
    "get_registered_name",
    "lookup_custom",
    "lookup_registered",
    "CustomObjectScope",
]

_GLOBAL_CUSTOM_OBJECTS: dict = {}
_GLOBAL_CUSTOM_NAMES: dict = {}
_scopes = threading.local()


def register_keras_serializable(package="Custom", name=None):
    """Decorator registering a class or function as "package>name" for deserialization.

    Example:
        >>> @keratron.saving.register_keras_serializable(package="MyLayers")
        ... class Scale(keratron.layers.Layer): ...
    """

    def decorator(obj):
        key = f"{package}>{name or obj.__name__}"
        if hasattr(obj, "get_config") is False and isinstance(obj, type):
            raise ValueError(f"Cannot register {obj!r}: classes must implement get_config().")
        _GLOBAL_CUSTOM_OBJECTS[key] = obj
        _GLOBAL_CUSTOM_NAMES[obj] = key
        return obj

    return decorator


def get_registered_name(obj) -> str:
    return _GLOBAL_CUSTOM_NAMES.get(obj, getattr(obj, "__name__", type(obj).__name__))


def get_custom_objects() -> dict:
    """The global registry dict (mutable, as in Keras)."""
    return _GLOBAL_CUSTOM_OBJECTS


@contextlib.contextmanager
def custom_object_scope(custom_objects):
    """Makes `custom_objects` (name -> class/function) visible to deserialization."""
    stack = getattr(_scopes, "stack", None)
    if stack is None:
        stack = _scopes.stack = []
    stack.append(dict(custom_objects or {}))
    try:
        yield
    finally:
        stack.pop()


CustomObjectScope = custom_object_scope


def lookup_registered(name):
    """`name` in the active custom-object scopes (the innermost first), then in the global
    registry, by exact name; None where neither holds it. The first two places of Keras's
    `get_registered_object`, in its order."""
    for scope in reversed(getattr(_scopes, "stack", None) or []):
        if name in scope:
            return scope[name]
    return _GLOBAL_CUSTOM_OBJECTS.get(name)


def lookup_custom(name, custom_objects=None):
    """Finds `name` in the given dict, the active scopes, then the global registry."""
    if custom_objects and name in custom_objects:
        return custom_objects[name]
    found = lookup_registered(name)
    if found is not None:
        return found
    for key, obj in _GLOBAL_CUSTOM_OBJECTS.items():
        if key.split(">", 1)[-1] == name:
            return obj
    return None
