"""`serialize_keras_object` / `deserialize_keras_object`: any Keras object to a config and back.

A config is Keras 3's `{"module", "class_name", "config", "registered_name"}` (plus
`build_config` / `compile_config` for layers); plain values pass through, lists and dicts are
handled item by item, numpy arrays and tensors become `__numpy__` / `__tensor__` entries. Each
family is written by its own namespace's `serialize` (layers, optimizers, losses, metrics,
initializers, regularizers, constraints, activations), so the dicts are those Keras writes and
reads. Classes are found by name only (custom objects, the registry, keratron's namespaces);
nothing from a config is executed, and a serialized lambda is refused in safe mode.
"""

from __future__ import annotations

import inspect
import types

import numpy as np

from keratron.autodiff import Tensor, convert_to_tensor
from keratron.layers.layer import Layer
from keratron.layers.node import KerasTensor
from keratron.layers.serialization import (
    custom_object_scope,
    get_registered_name,
    lookup_custom,
)

__all__ = ["serialize_keras_object", "deserialize_keras_object", "serialize_nested_objects"]

_PLAIN = (str, int, float, bool)
# The namespaces whose objects have their own serializers, in the order they are tried.
_FAMILIES = (
    "optimizers",
    "losses",
    "metrics",
    "initializers",
    "regularizers",
    "constraints",
    "activations",
)
_BASES = {
    "optimizers": "Optimizer",
    "losses": "Loss",
    "metrics": "Metric",
    "initializers": "Initializer",
    "regularizers": "Regularizer",
    "constraints": "Constraint",
}


def _namespace(family):
    from keratron import (
        activations,
        constraints,
        initializers,
        losses,
        metrics,
        optimizers,
        regularizers,
    )

    return {
        "activations": activations,
        "constraints": constraints,
        "initializers": initializers,
        "losses": losses,
        "metrics": metrics,
        "optimizers": optimizers,
        "regularizers": regularizers,
    }[family]


def _family_of(obj) -> str | None:
    """The namespace whose serializer writes `obj` (an instance of its base, or one of its
    functions), or None."""
    for family in _FAMILIES:
        module = _namespace(family)
        base = getattr(module, _BASES.get(family, ""), None)
        if inspect.isclass(base) and isinstance(obj, base):
            return family
        if inspect.isfunction(obj) and getattr(module, obj.__name__, None) is obj:
            return family
    return None


def serialize_keras_object(obj):
    """The config of a Keras object, as Keras 3 writes it (None stays None).

    Args:
        obj: a layer, model, optimizer, loss, metric, initializer, regularizer, constraint,
            function, any object with `get_config()`, or a plain / nested value.

    Returns:
        A JSON-friendly structure that `deserialize_keras_object` reads back.

    Example:
        >>> keratron.saving.serialize_keras_object(keratron.layers.Dense(2))["class_name"]
        'Dense'
    """
    if obj is None or isinstance(obj, _PLAIN):
        return obj
    if isinstance(obj, (list, tuple)):
        items = [serialize_keras_object(x) for x in obj]
        return tuple(items) if isinstance(obj, tuple) else items
    if isinstance(obj, dict):
        return {k: serialize_keras_object(v) for k, v in obj.items()}
    if isinstance(obj, bytes):
        return {"class_name": "__bytes__", "config": {"value": obj.decode("utf-8")}}
    if isinstance(obj, slice):
        parts = {p: serialize_keras_object(getattr(obj, p)) for p in ("start", "stop", "step")}
        return {"class_name": "__slice__", "config": parts}
    if obj is Ellipsis:
        return {"class_name": "__ellipsis__", "config": {}}
    if isinstance(obj, KerasTensor):
        history = getattr(obj, "_keras_history", None)
        if history:
            history = [history[0].name, *history[1:]]
        config = {"shape": obj.shape, "dtype": obj.dtype, "keras_history": history}
        return {"class_name": "__keras_tensor__", "config": config}
    if isinstance(obj, Tensor):
        value = obj.numpy()
        return {"class_name": "__tensor__", "config": {"value": value.tolist(), "dtype": obj.dtype}}
    if isinstance(obj, np.ndarray):
        if obj.ndim == 0:
            return obj.item()
        config = {"value": obj.tolist(), "dtype": str(obj.dtype)}
        return {"class_name": "__numpy__", "config": config}
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, Layer):
        from keratron.models.serialization import serialize_layer

        return serialize_layer(obj)
    family = _family_of(obj)
    if family is not None and inspect.isfunction(obj):
        # keratron's own functions (activations, losses, metrics) are Keras's built-ins.
        return {
            "module": "builtins",
            "class_name": "function",
            "config": obj.__name__,
            "registered_name": "function",
        }
    if family is not None:
        return _namespace(family).serialize(obj)
    if isinstance(obj, types.FunctionType):
        if obj.__name__ == "<lambda>":
            raise ValueError(
                "serialize_keras_object: lambdas cannot be serialized; use a named function "
                f"registered with `register_keras_serializable`. Received: {obj!r}"
            )
        return {
            "module": obj.__module__,
            "class_name": "function",
            "config": obj.__name__,
            "registered_name": get_registered_name(obj),
        }
    if not hasattr(obj, "get_config"):
        raise TypeError(
            "serialize_keras_object: cannot serialize an object of type "
            f"{type(obj).__name__} (it has no get_config()). Received: {obj!r}"
        )
    cls = type(obj)
    return {
        "module": cls.__module__,
        "class_name": cls.__name__,
        "config": serialize_nested_objects(obj.get_config()),
        "registered_name": get_registered_name(cls),
    }


def serialize_nested_objects(config):
    """`config` with every object in it that has `get_config()` (a layer returned by a custom
    layer's `get_config`, say) replaced by its serialized config, as Keras writes them; other
    values are left as they are."""
    if isinstance(config, dict):
        return {k: serialize_nested_objects(v) for k, v in config.items()}
    if isinstance(config, (list, tuple)):
        items = [serialize_nested_objects(v) for v in config]
        return tuple(items) if isinstance(config, tuple) else items
    if hasattr(config, "get_config") and not inspect.isclass(config):
        return serialize_keras_object(config)
    return config


def _is_object_config(config) -> bool:
    return isinstance(config, dict) and "class_name" in config and "config" in config


def deserialize_keras_object(config, custom_objects=None, safe_mode=True, **kwargs):
    """Rebuilds an object from `serialize_keras_object`'s output (or a Keras 3 config).

    Args:
        config: a config dict, a plain or nested value, or a registered name.
        custom_objects: optional dict of names to custom classes and functions.
        safe_mode: refuse serialized lambdas (the only entries that would run code).
        **kwargs: `module_objects` (extra names), as Keras accepts.

    Raises:
        ValueError: for an unknown class or function, or a lambda in safe mode.

    Example:
        >>> config = keratron.saving.serialize_keras_object(keratron.layers.Dense(2))
        >>> keratron.saving.deserialize_keras_object(config).units
        2
    """
    custom_objects = dict(kwargs.get("module_objects") or {}, **(custom_objects or {}))
    if config is None or isinstance(config, _PLAIN) and not isinstance(config, str):
        return config
    if isinstance(config, str):
        found = lookup_custom(config, custom_objects)
        return config if found is None else found
    if isinstance(config, (list, tuple)):
        return [deserialize_keras_object(v, custom_objects, safe_mode) for v in config]
    if not isinstance(config, dict):
        raise TypeError(f"deserialize_keras_object: could not parse config {config!r}")
    if not _is_object_config(config):
        return {
            k: deserialize_keras_object(v, custom_objects, safe_mode) for k, v in config.items()
        }
    class_name = config["class_name"]
    inner = config["config"] if config["config"] is not None else {}
    special = _deserialize_special(class_name, inner, custom_objects, safe_mode)
    if special is not _NOT_SPECIAL:
        return special
    module = config.get("module") or ""
    registered = config.get("registered_name")
    if class_name == "function":
        return _function(inner, registered, module, custom_objects)
    cls = None
    for name in (registered, class_name):
        if name and cls is None:
            cls = lookup_custom(name, custom_objects)
    family = _module_family(module)
    if (inspect.isclass(cls) and issubclass(cls, Layer)) or (cls is None and family is None):
        from keratron.models.serialization import deserialize_layer

        return deserialize_layer(config, custom_objects=custom_objects)
    with custom_object_scope(custom_objects):
        if cls is not None:
            return cls.from_config(inner)
        if family in _FAMILIES:
            return _namespace(family).deserialize(config)
    raise ValueError(
        f"deserialize_keras_object: unknown class '{class_name}' (module {module!r}). Register "
        "it with `register_keras_serializable` or pass it in `custom_objects`."
    )


_NOT_SPECIAL = object()


def _module_family(module: str) -> str | None:
    """The family a Keras module path names ("keras.losses", or Keras-on-torch's
    "keras.src.backend.torch.optimizers.torch_adam"); None for layers, models and others."""
    return next((part for part in module.split(".") if part in _FAMILIES), None)


def _deserialize_special(class_name, inner, custom_objects, safe_mode):
    if class_name == "__numpy__":
        return np.array(inner["value"], dtype=inner["dtype"])
    if class_name == "__tensor__":
        return convert_to_tensor(np.array(inner["value"], dtype=inner["dtype"]))
    if class_name == "__keras_tensor__":
        return KerasTensor(tuple(inner["shape"]), inner["dtype"], record_history=False)
    if class_name == "__bytes__":
        return inner["value"].encode("utf-8")
    if class_name == "__ellipsis__":
        return Ellipsis
    if class_name == "__slice__":
        parts = (
            deserialize_keras_object(inner[p], custom_objects, safe_mode)
            for p in ("start", "stop", "step")
        )
        return slice(*parts)
    if class_name == "__lambda__":
        raise ValueError(
            "deserialize_keras_object: the config holds a Python lambda; keratron never "
            "executes code from a config. Rewrite it as a named function registered with "
            "`register_keras_serializable`."
            + ("" if safe_mode else " (safe_mode=False does not change this.)")
        )
    return _NOT_SPECIAL


def _function(name, registered, module, custom_objects):
    for key in (registered, name):
        found = lookup_custom(key, custom_objects) if key else None
        if found is not None:
            return found
    family = _module_family(module)
    namespaces = [family] if family in _FAMILIES else list(_FAMILIES)
    for family in namespaces:
        fn = getattr(_namespace(family), name, None)
        if callable(fn) and not inspect.isclass(fn):
            return fn
    raise ValueError(
        f"deserialize_keras_object: unknown function '{name}' (module {module!r}). Register "
        "it with `register_keras_serializable` or pass it in `custom_objects`."
    )
