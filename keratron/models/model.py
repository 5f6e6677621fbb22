"""`Model`: a layer with training (`compile` / `fit` / `evaluate` / `predict`) and saving.

`Model(inputs, outputs)` returns a `Functional` model (Keras's `__new__` switch); subclassing
`Model` and defining `call` gives a subclassed model whose layers are the ones assigned as
attributes.
"""

from __future__ import annotations

import json

import numpy as np

from keratron.layers.layer import Layer, shapes_of
from keratron.layers.node import KerasTensor
from keratron.models.trainer import Trainer

__all__ = ["Model", "model_from_json", "model_from_config"]


def _functional_init_arguments(args, kwargs) -> bool:
    return (
        len(args) == 2
        or (len(args) == 1 and "outputs" in kwargs)
        or ("inputs" in kwargs and "outputs" in kwargs)
    )


def _inject_functional_model_class(cls):
    """Puts `Functional` under a `Model` subclass whose `__init__` passes (inputs, outputs)
    to `super().__init__` (the "functional subclass" pattern), as Keras does."""
    from keratron.models.functional import Functional

    if cls is Model:
        return Functional
    if cls is object or issubclass(cls, Functional):
        return cls
    cls.__bases__ = tuple(_inject_functional_model_class(base) for base in cls.__bases__)
    return cls


def _is_metric(value) -> bool:
    methods = ("update_state", "result", "reset_state")
    return not isinstance(value, (Layer, type)) and all(
        callable(getattr(value, m, None)) for m in methods
    )


class Model(Trainer, Layer):
    """Groups layers into an object with training and inference features.

    Three ways to make one: `Model(inputs, outputs)` from symbolic `Input`s (a functional
    model), `Sequential([...])`, or subclassing `Model` and writing `call`.

    Example:
        >>> inputs = keratron.Input(shape=(8,))
        >>> outputs = keratron.layers.Dense(1)(inputs)
        >>> model = keratron.Model(inputs, outputs)
        >>> model.compile(optimizer="sgd", loss="mse")
    """

    def __new__(cls, *args, **kwargs):
        if cls is Model and _functional_init_arguments(args, kwargs):
            from keratron.models.functional import Functional

            return Functional.__new__(Functional)
        return object.__new__(cls)

    def __init__(self, *args, **kwargs):
        from keratron.models.functional import Functional

        if _functional_init_arguments(args, kwargs):
            if not isinstance(self, Functional):
                _inject_functional_model_class(type(self))
            Functional.__init__(self, *args, **kwargs)
        else:
            if args:
                raise TypeError(
                    f"{type(self).__name__}.__init__ takes keyword arguments only (or "
                    f"`inputs, outputs` for a functional model). Received {len(args)} "
                    "positional argument(s)."
                )
            self._init_base(**kwargs)

    def _init_base(self, **kwargs):
        Trainer.__init__(self)
        Layer.__init__(self, **kwargs)

    def __setattr__(self, name, value):
        # Metrics assigned as attributes are reported by `model.metrics`, as in Keras.
        if not name.startswith("_") and _is_metric(value):
            tracked = self.__dict__.setdefault("_metrics", [])
            if not any(value is m for m in tracked):
                tracked.append(value)
        super().__setattr__(name, value)

    # ------------------------------------------------------------------ layers
    def get_layer(self, name=None, index=None):
        """Returns a layer by its (unique) name or its index in `model.layers`.

        Example:
            >>> model = keratron.Sequential(
            ...     [keratron.Input((3,)), keratron.layers.Dense(2, name="head")])
            >>> model.get_layer("head").units
            2
            >>> model.get_layer(index=0).name
            'head'
        """
        if index is not None and name is not None:
            raise ValueError(
                f"Provide only a layer name or a layer index. Received: index={index}, name={name}."
            )
        layers = self.layers
        if index is not None:
            if not -len(layers) <= index < len(layers):
                raise ValueError(
                    f"Was asked to retrieve layer at index {index} but model "
                    f"'{self.name}' only has {len(layers)} layers."
                )
            return layers[index]
        if name is not None:
            for layer in layers:
                if layer.name == name:
                    return layer
            raise ValueError(
                f"No such layer: {name}. Existing layers are: {[x.name for x in layers]}."
            )
        raise ValueError("Provide either a layer name or layer index at `get_layer`.")

    def summary(
        self,
        line_length=None,
        positions=None,
        print_fn=None,
        expand_nested=False,
        show_trainable=False,
        layer_range=None,
    ):
        """Prints a table of the layers (name, type, output shape, parameter count) and the
        parameter totals, as Keras 3 does.

        Args:
            line_length: total width of the table (default: 88, or 108 with a
                "Connected to" column, capped by the terminal width).
            positions: relative (<= 1) or absolute right edges of the columns.
            print_fn: called once with the whole text; defaults to printing it.
            expand_nested: also list the layers of nested models.
            show_trainable: add a "Trainable" column.
            layer_range: two name patterns bounding the rows shown.

        Example:
            >>> model = keratron.Sequential(
            ...     [keratron.Input((3,)), keratron.layers.Dense(2, name="dense")], name="tiny")
            >>> model.summary(line_length=60)
            Model: "tiny"
            ┏━━━━━━━━━━━━━━━━━━━━━━━━━━┳━━━━━━━━━━━━━━━━━━━┳━━━━━━━━━━━┓
            ┃ Layer (type)             ┃ Output Shape      ┃   Param # ┃
            ┡━━━━━━━━━━━━━━━━━━━━━━━━━━╇━━━━━━━━━━━━━━━━━━━╇━━━━━━━━━━━┩
            │ dense (Dense)            │ (None, 2)         │         8 │
            └──────────────────────────┴───────────────────┴───────────┘
             Total params: 8 (32.00 B)
             Trainable params: 8 (32.00 B)
             Non-trainable params: 0 (0.00 B)
        """
        from keratron.models.summary import print_summary

        print_summary(
            self,
            line_length=line_length,
            positions=positions,
            print_fn=print_fn,
            expand_nested=expand_nested,
            show_trainable=show_trainable,
            layer_range=layer_range,
        )

    # ------------------------------------------------------------------ build
    def build(self, input_shape=None):
        """Creates a subclassed model's weights by running `call` on data-free inputs of
        `input_shape` (a shape, or a list / dict of shapes)."""
        if self.built:
            return
        if input_shape is None:
            raise ValueError(
                f"Model '{self.name}': `build()` needs an `input_shape`. Received: None"
            )
        specs = _shape_specs(input_shape, self.compute_dtype)
        Layer.compute_output_spec(self, specs)
        self._build_shapes = {"input_shape": input_shape}
        self.built = True

    def _maybe_build(self, args, kwargs):
        if not self.built and type(self).build is Model.build:
            # A subclassed model's weights appear as its layers are first called.
            first = args[0] if args else next(iter(kwargs.values()))
            self._build_shapes = {"input_shape": shapes_of(first)}
            self.built = True
            return
        super()._maybe_build(args, kwargs)

    # ------------------------------------------------------------------ config
    def get_config(self) -> dict:
        """The constructor arguments; a subclassed model with its own arguments overrides
        this (and `from_config`)."""
        return Layer.get_config(self)

    @classmethod
    def from_config(cls, config, custom_objects=None):
        """Rebuilds a model from `get_config()`: a functional config (with `layers`,
        `input_layers`, `output_layers`) or the constructor arguments of a subclass."""
        from keratron.models.functional import (
            Functional,
            functional_from_config,
            functional_like_constructor,
        )

        if "layers" in config and "input_layers" in config and "output_layers" in config:
            target = Functional if cls is Model else cls
            if functional_like_constructor(target) or target is Functional:
                return functional_from_config(target, config, custom_objects=custom_objects)
        from keratron.layers import serialization as registry

        with registry.custom_object_scope(custom_objects or {}):
            return cls(**config)

    def to_json(self, **kwargs) -> str:
        """The model's architecture as a JSON string (Keras's layout); rebuild it with
        `keratron.models.model_from_json`.

        Args:
            **kwargs: passed to `json.dumps` (e.g. `indent=2`).

        Example:
            >>> model = keratron.Sequential([keratron.Input((3,)), keratron.layers.Dense(2)])
            >>> clone = keratron.models.model_from_json(model.to_json())
            >>> clone.output_shape
            (None, 2)
        """
        from keratron.models.serialization import serialize_layer

        return json.dumps(serialize_layer(self), default=_json_default, **kwargs)

    # ------------------------------------------------------------------ saving
    def __reduce__(self):
        """Pickles the model as its `.keras` archive (Keras 3's way): architecture, weights,
        compile arguments and optimizer state; a subclassed model needs `get_config` and
        registration, as for `save`."""
        from keratron.saving import pickle_utils

        data = pickle_utils.serialize_model_as_bytecode(self)
        return (pickle_utils.deserialize_model_from_bytecode, (data,))

    def save(self, filepath, overwrite=True, zipped=None, **kwargs):
        """Saves the model: `.keras` (Keras 3 zip) or `.h5` (tf.keras 2 HDF5); see
        `keratron.saving.save_model`.

        Example:
            >>> import os, tempfile
            >>> model = keratron.Sequential([keratron.Input((3,)), keratron.layers.Dense(2)])
            >>> path = os.path.join(tempfile.mkdtemp(), "model.keras")
            >>> model.save(path)
            >>> keratron.models.load_model(path).output_shape
            (None, 2)
        """
        from keratron.saving import save_model

        save_model(self, filepath, overwrite=overwrite, zipped=zipped, **kwargs)

    def save_weights(self, filepath, overwrite=True, max_shard_size=None):
        """Saves the weights: `.weights.h5` (Keras 3 layout) or `.h5` (tf.keras 2 layout).

        Example:
            >>> import os, tempfile
            >>> model = keratron.Sequential([keratron.Input((3,)), keratron.layers.Dense(2)])
            >>> path = os.path.join(tempfile.mkdtemp(), "model.weights.h5")
            >>> model.save_weights(path)
            >>> os.path.exists(path)
            True
        """
        from keratron.saving import save_weights

        save_weights(self, filepath, overwrite=overwrite, max_shard_size=max_shard_size)

    def load_weights(self, filepath, by_name=False, skip_mismatch=False, **kwargs):
        """Loads weights saved by keratron, tf.keras 2 or Keras 3; see
        `keratron.saving.load_weights`.

        Example:
            >>> import os, tempfile
            >>> model = keratron.Sequential([keratron.Input((3,)), keratron.layers.Dense(2)])
            >>> path = os.path.join(tempfile.mkdtemp(), "model.weights.h5")
            >>> model.save_weights(path)
            >>> twin = keratron.Sequential([keratron.Input((3,)), keratron.layers.Dense(2)])
            >>> twin.load_weights(path)
            >>> x = np.ones((1, 3), "float32")
            >>> np.allclose(twin.predict(x, verbose=0), model.predict(x, verbose=0))
            True
        """
        from keratron.saving import load_weights

        load_weights(self, filepath, skip_mismatch=skip_mismatch, by_name=by_name, **kwargs)


def _json_default(obj):
    if isinstance(obj, (np.integer,)):
        return int(obj)
    if isinstance(obj, (np.floating,)):
        return float(obj)
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    raise TypeError(f"Object of type {type(obj).__name__} is not JSON serializable: {obj!r}")


def _shape_specs(input_shape, dtype):
    if isinstance(input_shape, dict):
        return {k: _shape_specs(v, dtype) for k, v in input_shape.items()}
    if isinstance(input_shape, (list, tuple)) and all(
        d is None or isinstance(d, (int, np.integer)) for d in input_shape
    ):
        return KerasTensor(tuple(input_shape), dtype, record_history=False)
    return [_shape_specs(s, dtype) for s in input_shape]


def model_from_config(config, custom_objects=None):
    """Rebuilds a model (or layer) from a serialized config dict.

    Example:
        >>> model = keratron.Sequential([keratron.Input((3,)), keratron.layers.Dense(2)])
        >>> config = keratron.saving.serialize_keras_object(model)
        >>> keratron.models.model_from_config(config).output_shape
        (None, 2)
    """
    from keratron.models.serialization import deserialize_layer

    if isinstance(config, dict) and "class_name" not in config:
        raise ValueError(
            "model_from_config expects a serialized model, a dict with 'class_name' and "
            f"'config'. Received keys: {sorted(config)}"
        )
    return deserialize_layer(config, custom_objects=custom_objects)


def model_from_json(json_string, custom_objects=None):
    """Rebuilds a model from `model.to_json()`; weights are freshly initialized.

    Args:
        json_string: the JSON text.
        custom_objects: optional dict mapping names to custom layer classes.

    Example:
        >>> model = keratron.Sequential([keratron.Input((3,)), keratron.layers.Dense(2)])
        >>> clone = keratron.models.model_from_json(model.to_json())
        >>> clone.set_weights(model.get_weights())
        >>> x = np.ones((1, 3), "float32")
        >>> np.allclose(clone.predict(x, verbose=0), model.predict(x, verbose=0))
        True
    """
    try:
        config = json.loads(json_string)
    except (TypeError, json.JSONDecodeError) as e:
        raise ValueError(f"model_from_json: the argument is not valid JSON ({e}).") from None
    return model_from_config(config, custom_objects=custom_objects)
