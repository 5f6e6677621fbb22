"""`keras.quantizers.serialize` / `deserialize` / `get`: quantizers and quantization configs
to Keras 3's `{"module", "class_name", "config", "registered_name"}` dicts and back.

Classes are found by name only: `custom_objects`, then keratron's quantizer classes (by class
name or its snake_case), then the custom-object scopes and registry of
`register_keras_serializable`. Nothing from a config is executed.
"""

from __future__ import annotations

import inspect

from keratron.layers.serialization import get_registered_name, lookup_custom
from keratron.quantizers.quantization_config import (
    AWQConfig,
    Float8QuantizationConfig,
    GPTQConfig,
    Int4QuantizationConfig,
    Int8QuantizationConfig,
    QuantizationConfig,
)
from keratron.quantizers.quantizers import AbsMaxQuantizer, Quantizer
from keratron.utils.naming import to_snake_case

__all__ = ["serialize", "deserialize", "get"]

# The classes `get` and `deserialize` know by name, as Keras's `ALL_OBJECTS` (GPTQConfig is
# not among them there either; `deserialize` still finds it, by its module).
_ALL_OBJECTS = (
    Quantizer,
    AbsMaxQuantizer,
    QuantizationConfig,
    Int8QuantizationConfig,
    Int4QuantizationConfig,
    Float8QuantizationConfig,
    AWQConfig,
)
ALL_OBJECTS_DICT = {cls.__name__: cls for cls in _ALL_OBJECTS}
ALL_OBJECTS_DICT.update({to_snake_case(cls.__name__): cls for cls in _ALL_OBJECTS})
_BUILTINS = {cls.__name__: cls for cls in (*_ALL_OBJECTS, GPTQConfig)}


def serialize(quantizer):
    """A quantizer or quantization config as Keras 3 serializes it (None stays None).

    Raises:
        TypeError: if the object has no `get_config()`.

    Example:
        >>> keratron.quantizers.serialize(keratron.quantizers.AbsMaxQuantizer())["config"]
        {'value_range': (-127, 127), 'epsilon': 1e-07, 'output_dtype': 'int8'}
    """
    if quantizer is None:
        return None
    cls = type(quantizer)
    if not hasattr(quantizer, "get_config"):
        raise TypeError(
            "quantizers.serialize: expected a quantizer or quantization config with "
            f"get_config(). Received: {quantizer!r} (of type {cls.__name__})"
        )
    builtin = _BUILTINS.get(cls.__name__) is cls
    return {
        "module": "keras.quantizers" if builtin else cls.__module__,
        "class_name": cls.__name__,
        "config": quantizer.get_config(),
        "registered_name": None if builtin else get_registered_name(cls),
    }


def deserialize(config, custom_objects=None):
    """A quantizer or quantization config from its serialized dict (None stays None).

    Raises:
        ValueError: for a config that is not a serialized object, or an unknown class.

    Example:
        >>> config = keratron.quantizers.serialize(keratron.quantizers.AbsMaxQuantizer(axis=0))
        >>> keratron.quantizers.deserialize(config).axis
        (0,)
    """
    if config is None:
        return None
    if not isinstance(config, dict) or "class_name" not in config:
        raise ValueError(
            "quantizers.deserialize: expected a dict with 'class_name' and 'config'. "
            f"Received: config={config!r}"
        )
    name = config["class_name"]
    registered = config.get("registered_name")
    cls = None
    for key in (registered, name):
        if key and cls is None and custom_objects and key in custom_objects:
            cls = custom_objects[key]
    if cls is None:
        cls = ALL_OBJECTS_DICT.get(name) or _BUILTINS.get(name)
    for key in (registered, name):
        if key and cls is None:
            cls = lookup_custom(key)
    if not inspect.isclass(cls):
        raise ValueError(
            f"quantizers.deserialize: unknown quantizer class {name!r}. Register it with "
            "`register_keras_serializable` or pass it in `custom_objects`."
        )
    return cls.from_config(config.get("config") or {})


def get(identifier, **kwargs):
    """A quantizer from a quantizer, its class, a class name or a serialized dict.

    A class (or class name) is instantiated with `**kwargs`; None gives None.

    Raises:
        ValueError: if the identifier names nothing callable (an unknown name, or a
            quantization config, which is not a quantizer).

    Example:
        >>> keratron.quantizers.get("abs_max_quantizer", axis=0).axis
        (0,)
    """
    if identifier is None:
        return None
    if isinstance(identifier, dict):
        obj = deserialize(identifier)
    elif isinstance(identifier, str):
        obj = ALL_OBJECTS_DICT.get(identifier)
    else:
        obj = identifier
    if callable(obj):
        # Keras passes the kwargs as one positional dict (`obj(kwargs)`), which sets the
        # quantizer's first argument to a dict; here they are keyword arguments.
        return obj(**kwargs) if inspect.isclass(obj) else obj
    raise ValueError(f"Could not interpret quantizer identifier: {identifier}")
