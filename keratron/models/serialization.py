"""Layer and model configs as Keras writes them, and their rebuilding by class name.

A serialized layer is `{"module", "class_name", "config", "registered_name", "build_config"}`
(Keras 3's layout); tf.keras 2 configs (`{"class_name", "config"}`) read as well. Classes are
found by name only: in the custom-object registry (`keratron.layers.serialization`), in
`keratron.layers`, and among the model classes. Nothing from a config is ever evaluated.
"""

from __future__ import annotations

import inspect

from keratron.layers import serialization as registry

__all__ = ["serialize_layer", "deserialize_layer", "lookup_layer_class"]

# The modules Keras names in configs for its own classes; written so that Keras can read ours.
_KERAS_MODULES = {"Functional": "keras.src.models.functional", "Sequential": "keras"}


def _model_classes() -> dict:
    from keratron.models.functional import Functional
    from keratron.models.model import Model
    from keratron.models.sequential import Sequential

    return {"Functional": Functional, "Sequential": Sequential, "Model": Model}


def lookup_layer_class(class_name, registered_name=None, custom_objects=None):
    """The layer or model class a config names, or None when no known class has that name.

    Looks in `custom_objects`, the custom-object scopes and registry (by registered name, then
    class name), then `keratron.layers`, then the model classes.
    """
    import keratron.layers as layers_module
    from keratron.layers.layer import TensorOpLayer

    for name in (registered_name, class_name):
        if name:
            found = registry.lookup_custom(name, custom_objects)
            if found is not None:
                return found
    models = _model_classes()
    if class_name in models:
        return models[class_name]
    cls = getattr(layers_module, class_name, None)
    if inspect.isclass(cls) and issubclass(cls, layers_module.Layer):
        return cls
    if class_name == "TensorOpLayer":
        return TensorOpLayer
    return None


def serialize_layer(layer) -> dict:
    """The Keras 3 config dict of a layer or model (class, constructor config, build shapes).

    Example:
        >>> serialize_layer(keratron.layers.Dense(2))["class_name"]
        'Dense'
    """
    from keratron.layers.layer import TensorOpLayer

    if type(layer) is TensorOpLayer:  # a Keras 3 op class, not a layer
        name = layer.keras_class_name
        return {
            "module": layer.keras_module,
            "class_name": name,
            "config": layer.get_config(),
            "registered_name": name,
        }
    cls = type(layer)
    registered = registry._GLOBAL_CUSTOM_NAMES.get(cls)
    name = cls.__name__
    if registered is not None:
        module = cls.__module__
    elif name in _KERAS_MODULES and cls.__module__.startswith("keratron.models"):
        module = _KERAS_MODULES[name]
        registered = name if name == "Functional" else None
    elif cls.__module__.startswith("keratron."):
        module = "keras.layers"
    else:
        module = cls.__module__
        registered = name
    # Layers that a custom get_config returns as objects are written as their configs.
    from keratron.saving.serialization_lib import serialize_nested_objects

    out = {
        "module": module,
        "class_name": name,
        "config": serialize_nested_objects(layer.get_config()),
        "registered_name": registered,
    }
    build_config = layer.get_build_config() if hasattr(layer, "get_build_config") else None
    if build_config is not None:
        out["build_config"] = build_config
    compile_config = getattr(layer, "get_compile_config", None)
    if compile_config is not None:
        cc = compile_config()
        if cc:
            out["compile_config"] = cc
    return out


def _standardize_layer_config(class_name, config: dict) -> dict:
    """Maps Keras-only config entries onto what keratron layers take."""
    config = dict(config)
    dtype = config.get("dtype")
    if isinstance(dtype, dict):  # a Keras 3 DTypePolicy: keep a mixed policy's name, else
        inner = dtype.get("config", {})  # the dtype name (of a quantized policy too)
        name = inner.get("name") if isinstance(inner, dict) else None
        if isinstance(name, str) and not name.startswith("mixed_"):
            name = name.split("_")[-1]
        config["dtype"] = name if isinstance(name, str) else None
        if config["dtype"] is None:
            config.pop("dtype")
    if class_name == "InputLayer" and not config.get("ragged"):
        config.pop("ragged", None)
    return config


def deserialize_layer(data, custom_objects=None):
    """Rebuilds a layer or model from `serialize_layer`'s output (or a tf.keras 2 config).

    Args:
        data: the config dict.
        custom_objects: optional dict mapping names to custom layer classes.

    Raises:
        ValueError: if `data` is not a layer config or names an unknown class.

    Example:
        >>> layer = deserialize_layer(serialize_layer(keratron.layers.Dense(2)))
    """
    if not isinstance(data, dict) or "class_name" not in data:
        raise ValueError(
            f"deserialize_layer: expected a config dict with a 'class_name' key. Received: {data!r}"
        )
    class_name = data["class_name"]
    if str(data.get("module") or "").startswith("keras.src.ops."):
        # An op on symbolic tensors (`x + 3.0`, `ops.mean(x)`): its class name can be a layer's
        # too (the op `Add` is not the layer `Add`), so the module decides.
        from keratron.layers.layer import TensorOpLayer

        return TensorOpLayer.from_keras_op(class_name, data.get("config", {}), data["module"])
    cls = lookup_layer_class(class_name, data.get("registered_name"), custom_objects)
    if cls is None:
        raise ValueError(
            f"Unknown layer: '{class_name}'. Please ensure you are using a keratron layer, or "
            "that a custom layer is registered with `register_keras_serializable` or passed "
            "in `custom_objects`."
        )
    config = _standardize_layer_config(class_name, data.get("config", {}))
    from_config = cls.from_config
    if "custom_objects" in inspect.signature(from_config).parameters:
        layer = from_config(config, custom_objects=custom_objects)
    else:
        with registry.custom_object_scope(custom_objects or {}):
            layer = from_config(config)
    build_config = data.get("build_config")
    if build_config and not layer.built:
        layer.build_from_config(build_config)
    compile_config = data.get("compile_config")
    if compile_config and hasattr(layer, "compile_from_config"):
        layer.compile_from_config(compile_config)
    return layer
