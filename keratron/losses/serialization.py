"""Config dicts for losses and metrics, in Keras 3's format, readable from tf.keras 2 too.

Keras 3 writes `{"module", "class_name", "config", "registered_name"}`; a built-in function
is `{"module": "builtins", "class_name": "function", "config": <name>}`. tf.keras 2 wrote
`{"class_name", "config"}` and plain names. Nothing here imports or executes code named in
a config: names are looked up in the tables the caller passes.
"""

from __future__ import annotations

import inspect


def serialize_object(obj, module: str, builtins: dict):
    """Returns the Keras 3 config dict of a loss/metric instance or function (None for None).

    `builtins` maps names to keratron's own objects: those are written with the Keras module
    name (`module`), so that real Keras can read the config; other objects keep their own
    class name as `registered_name` and need `custom_objects` to be read back.
    """
    if obj is None:
        return None
    if inspect.isfunction(obj) or (callable(obj) and not hasattr(obj, "get_config")):
        name = getattr(obj, "__name__", None)
        if name is None:
            raise TypeError(f"Cannot serialize {obj!r}: it is a callable without a name.")
        return {
            "module": "builtins",
            "class_name": "function",
            "config": name,
            "registered_name": "function",
        }
    if not hasattr(obj, "get_config"):
        raise TypeError(
            f"Cannot serialize {obj!r}: expected a function or an object with get_config()."
        )
    from keratron.layers.serialization import get_registered_name

    cls = obj.__class__
    builtin = builtins.get(cls.__name__) is cls
    return {
        "module": module if builtin else cls.__module__,
        "class_name": cls.__name__,
        "config": obj.get_config(),
        "registered_name": None if builtin else get_registered_name(cls),
    }


def _lookup(name, objects, custom_objects):
    # The caller's dict, then custom_object_scope / register_keras_serializable, then ours.
    from keratron.layers.serialization import lookup_custom

    obj = lookup_custom(name, custom_objects)
    return obj if obj is not None else objects.get(name)


def deserialize_object(
    config,
    objects: dict,
    custom_objects=None,
    kind: str = "object",
    functions: dict | None = None,
):
    """Rebuilds an object from a name or a config dict (Keras 3 or tf.keras 2 format).

    Args:
        config: None, a name, or a config dict.
        objects: the built-in names (classes and functions) that may be referenced.
        custom_objects: extra names, looked up first.
        kind: "loss" or "metric", for error messages.
        functions: the names a `"function"` config may reference; defaults to `objects`
            (metrics need their own table: "mean_squared_error" is both a function and the
            snake-case name of a class there).
    """
    if config is None:
        return None
    if isinstance(config, str):
        obj = _lookup(config, objects, custom_objects)
        if obj is None:
            raise ValueError(
                f"Unknown {kind}: {config!r}. Pass it in `custom_objects` if it is a custom object."
            )
        return obj() if inspect.isclass(obj) else obj
    if not isinstance(config, dict) or "class_name" not in config:
        raise ValueError(
            f"Could not deserialize {kind}: expected a name or a dict with 'class_name'. "
            f"Received: {config!r}"
        )
    class_name = config["class_name"]
    inner = config.get("config", {})
    if class_name == "function":
        fn = _lookup(inner, objects if functions is None else functions, custom_objects)
        if fn is None or inspect.isclass(fn):
            raise ValueError(
                f"Unknown {kind} function: {inner!r}. Pass it in `custom_objects` "
                "if it is a custom function."
            )
        return fn
    cls = _lookup(class_name, objects, custom_objects)
    if cls is None and config.get("registered_name"):
        cls = _lookup(config["registered_name"], objects, custom_objects)
    if cls is None or not inspect.isclass(cls):
        raise ValueError(
            f"Unknown {kind} class: {class_name!r}. Pass it in `custom_objects` "
            "if it is a custom class."
        )
    return cls.from_config(dict(inner or {}))
