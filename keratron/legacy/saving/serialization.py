"""tf.keras 2's object serialization (`keras.legacy.saving`): `{"class_name", "config"}` dicts.

Keras 3 keeps the Keras 2 format for code that reads or writes it. Unlike
`keratron.saving.serialize_keras_object` (Keras 3's format, with `module` and
`registered_name`), an object becomes its registered class name and its `get_config()`, whose
object-valued entries are serialized the same way and marked `__passive_serialization__`;
functions become their registered names.
"""

from __future__ import annotations

import inspect

from keratron.saving import CustomObjectScope, get_registered_name, get_registered_object

__all__ = ["deserialize_keras_object", "serialize_keras_object"]


def serialize_keras_object(instance):
    """Serializes a keratron object into Keras 2's JSON-compatible form.

    Args:
        instance: an object with `get_config()` (a layer, optimizer, regularizer...), a
            function or class (its registered name), or None.

    Returns:
        `{"class_name": ..., "config": ...}`, a name, or None.

    Raises:
        ValueError: for an object without `get_config()` or `__name__`.

    Example:
        >>> keratron.legacy.saving.serialize_keras_object(keratron.regularizers.L2(0.1))
        {'class_name': 'L2', 'config': {'l2': 0.1}}
    """
    instance = inspect.unwrap(instance)
    if instance is None:
        return None
    if hasattr(instance, "get_config"):
        config = instance.get_config()
        serialized = {}
        for key, item in config.items():
            if isinstance(item, str):
                serialized[key] = item
                continue
            # Entries that are objects (a layer, a function) become their own serialization.
            try:
                item_config = serialize_keras_object(item)
            except ValueError:
                serialized[key] = item
                continue
            if isinstance(item_config, dict) and not isinstance(item, dict):
                item_config["__passive_serialization__"] = True
            serialized[key] = item_config
        return {"class_name": get_registered_name(type(instance)), "config": serialized}
    if hasattr(instance, "__name__"):
        return get_registered_name(instance)
    raise ValueError(f"Cannot serialize {instance} because it doesn't implement `get_config()`.")


def _class_and_config(config, module_objects, custom_objects, printable_module_name):
    if not isinstance(config, dict) or "class_name" not in config or "config" not in config:
        raise ValueError(
            f"Improper config format for {config}. Expecting python dict contains "
            "`class_name` and `config` as keys"
        )
    class_name = config["class_name"]
    cls = get_registered_object(class_name, custom_objects, module_objects)
    if cls is None:
        raise ValueError(
            f"Unknown {printable_module_name}: '{class_name}'. Please ensure you are using a "
            "`keratron.utils.custom_object_scope` and that this object is included in the "
            "scope."
        )
    cls_config = config["config"]
    # Keras 2.0's Sequential stored its layer list as the config itself.
    if isinstance(cls_config, list):
        return cls, cls_config
    cls_config = dict(cls_config)
    for key, item in cls_config.items():
        if key == "name":
            continue  # a name is a string, even when a function has the same name
        if isinstance(item, dict) and "__passive_serialization__" in item:
            cls_config[key] = deserialize_keras_object(
                item,
                module_objects=module_objects,
                custom_objects=custom_objects,
                printable_module_name="config_item",
            )
        elif isinstance(item, str) and inspect.isfunction(
            get_registered_object(item, custom_objects, module_objects)
        ):
            cls_config[key] = get_registered_object(item, custom_objects, module_objects)
    return cls, cls_config


def deserialize_keras_object(
    identifier, module_objects=None, custom_objects=None, printable_module_name="object"
):
    """Rebuilds an object from its Keras 2 serialization.

    Names are looked up in `custom_objects`, the active `custom_object_scope`s, the global
    registry, then `module_objects` (as in Keras, built-in classes are found only through
    `module_objects`).

    Args:
        identifier: a `{"class_name", "config"}` dict, a name, a function, or None.
        module_objects: a dict of built-in objects to look names up in.
        custom_objects: a dict of user objects to look names up in.
        printable_module_name: what the object is, for error messages.

    Returns:
        The object (a class given by name is instantiated with no arguments).

    Raises:
        ValueError: for an unknown name or a malformed identifier.

    Example:
        >>> config = {"class_name": "L2", "config": {"l2": 0.1}}
        >>> reg = keratron.legacy.saving.deserialize_keras_object(
        ...     config, module_objects={"L2": keratron.regularizers.L2})
        >>> type(reg).__name__, round(float(reg.l2), 4)
        ('L2', 0.1)
    """
    if identifier is None:
        return None
    if isinstance(identifier, dict):
        cls, cls_config = _class_and_config(
            identifier, module_objects, custom_objects, printable_module_name
        )
        custom_objects = custom_objects or {}
        if hasattr(cls, "from_config"):
            if "custom_objects" in inspect.signature(cls.from_config).parameters:
                return cls.from_config(cls_config, custom_objects=dict(custom_objects))
            with CustomObjectScope(custom_objects):
                return cls.from_config(cls_config)
        # A function returning an object: its config holds the keyword arguments.
        with CustomObjectScope(custom_objects):
            return cls(**cls_config)
    if isinstance(identifier, str):
        obj = get_registered_object(identifier, custom_objects, module_objects)
        if obj is None:
            raise ValueError(
                f"Unknown {printable_module_name}: '{identifier}'. Please ensure you are "
                "using a `keratron.utils.custom_object_scope` and that this object is "
                "included in the scope."
            )
        return obj() if inspect.isclass(obj) else obj
    if inspect.isfunction(identifier):
        return identifier
    raise ValueError(f"Could not interpret serialized {printable_module_name}: {identifier}")
