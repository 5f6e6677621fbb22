"""`Sequential`: a linear stack of single-input, single-output layers.

Once its input shape is known (an `Input` first, `input_shape=` on the first layer, or the
first call), a Sequential model builds a functional graph of its layers and runs through it,
as Keras 3 does; until then it calls its layers one after the other.
"""

from __future__ import annotations

from keratron.layers.input_layer import InputLayer
from keratron.layers.layer import Layer, shapes_of
from keratron.layers.node import KerasTensor
from keratron.models.model import Model

__all__ = ["Sequential"]


def _is_shape(s) -> bool:
    return isinstance(s, (list, tuple)) and all(d is None or isinstance(d, int) for d in s)


class Sequential(Model):
    """A model made of a list of layers, each feeding the next.

    Args:
        layers: optional list of layers (an `Input` may come first).
        trainable: whether the model's weights are trainable.
        name: the model's name.

    Example:
        >>> model = keratron.Sequential([
        ...     keratron.Input(shape=(16,)),
        ...     keratron.layers.Dense(8, activation="relu"),
        ...     keratron.layers.Dense(1),
        ... ])
        >>> model.output_shape
        (None, 1)
    """

    def __new__(cls, *args, **kwargs):
        return object.__new__(cls)

    def __init__(self, layers=None, trainable=True, name=None):
        Model._init_base(self, trainable=trainable, name=name)
        self._functional = None
        self._layers = []
        if layers:
            for layer in layers:
                self.add(layer, rebuild=False)
            self._maybe_rebuild()

    # ------------------------------------------------------------------ layer list
    def add(self, layer, rebuild=True):
        """Appends a layer (or an `Input`) on top of the stack.

        Example:
            >>> model = keratron.Sequential()
            >>> model.add(keratron.Input(shape=(4,)))
            >>> model.add(keratron.layers.Dense(2))
            >>> model.output_shape
            (None, 2)
        """
        if isinstance(layer, KerasTensor) and layer._keras_history is not None:
            origin = layer._keras_history[0]
            if isinstance(origin, InputLayer):
                layer = origin
        if not isinstance(layer, Layer):
            raise TypeError(
                "Only instances of `keratron.layers.Layer` can be added to a Sequential model. "
                f"Received: {layer!r} (of type {type(layer).__name__})"
            )
        if not self._layers and not isinstance(layer, InputLayer):
            batch_shape = getattr(layer, "_batch_input_shape_arg", None)
            if batch_shape is not None:
                self._layers.append(InputLayer(batch_shape=batch_shape, dtype=layer.dtype))
        for other in self._layers:
            if other.name == layer.name and other is not layer:
                raise ValueError(
                    "All layers added to a Sequential model should have unique names. Name "
                    f"'{layer.name}' is already the name of a layer in this model. Update the "
                    "`name` argument to pass a unique name."
                )
        if isinstance(layer, InputLayer) and self._layers:
            if isinstance(self._layers[0], InputLayer):
                raise ValueError(
                    f"Sequential model '{self.name}' has already been configured to use input "
                    f"shape {self._layers[0].batch_shape}. You cannot add a different Input "
                    "layer to it."
                )
            raise ValueError(
                f"Sequential model '{self.name}': an Input can only be its first layer; it "
                f"already has {len(self._layers)} layer(s)."
            )
        self._layers.append(layer)
        if rebuild:
            self._maybe_rebuild()
        else:
            self.built = False
            self._functional = None

    def pop(self, rebuild=True):
        """Removes and returns the last layer.

        Example:
            >>> model = keratron.Sequential(
            ...     [keratron.Input((4,)), keratron.layers.Dense(8), keratron.layers.Dense(1)])
            >>> last = model.pop()
            >>> last.units, model.output_shape
            (1, (None, 8))
        """
        if not self.layers:
            raise TypeError(f"Sequential model '{self.name}': there are no layers to pop.")
        layer = self._layers.pop()
        self.built = False
        self._functional = None
        if rebuild:
            self._maybe_rebuild()
        return layer

    @property
    def layers(self) -> list:
        """The layers, without the InputLayer (as Keras lists them)."""
        if self._layers and isinstance(self._layers[0], InputLayer):
            return self._layers[1:]
        return list(self._layers)

    def _maybe_rebuild(self):
        self.built = False
        self._functional = None
        if self._layers and isinstance(self._layers[0], InputLayer) and len(self._layers) > 1:
            self.build(self._layers[0].batch_shape)

    # ------------------------------------------------------------------ build / call
    def build(self, input_shape=None):
        """Builds the functional graph of the layers for inputs of `input_shape`."""
        if not _is_shape(input_shape):
            return
        input_shape = tuple(input_shape)
        if not self._layers:
            raise ValueError(
                f"Sequential model '{self.name}' cannot be built because it has no layers. "
                "Call `model.add(layer)`."
            )
        from keratron.models.functional import Functional

        if isinstance(self._layers[0], InputLayer):
            have = self._layers[0].batch_shape
            if len(have) != len(input_shape) or any(
                a is not None and b is not None and a != b
                for a, b in zip(have[1:], input_shape[1:])
            ):
                raise ValueError(
                    f"Sequential model '{self.name}' has already been configured to use input "
                    f"shape {have}. You cannot build it with input_shape {input_shape}"
                )
        else:
            self._layers.insert(
                0, InputLayer(batch_shape=input_shape, dtype=self._layers[0].compute_dtype)
            )
        x = self._layers[0].output
        try:
            for layer in self._layers[1:]:
                x = layer(x)
        except NotImplementedError:
            # A layer that cannot run symbolically: the stack stays eager (layer by layer).
            self.built = True
            return
        self._functional = Functional(inputs=self._layers[0].output, outputs=x)
        self._build_shapes = {"input_shape": input_shape}
        self.built = True

    def _maybe_build(self, args, kwargs):
        if self.built:
            return
        first = args[0] if args else next(iter(kwargs.values()))
        shape = shapes_of(first)
        if _is_shape(shape) and shape:
            # Deferred build: the batch size of the first batch is not part of the model.
            self.build((None,) + tuple(shape[1:]))
        if not self.built:
            self._build_shapes = {"input_shape": shape}
            self.built = True

    def call(self, inputs, training=None, mask=None):
        if self._functional is not None:
            return self._functional.call(inputs, training=training, mask=mask)
        x = inputs
        for layer in self.layers:
            kwargs = {}
            if training is not None and "training" in layer._call_params:
                kwargs["training"] = training
            if mask is not None and "mask" in layer._call_params:
                kwargs["mask"] = mask
            x = layer(x, **kwargs)
            mask = getattr(x, "_keras_mask", None)
        return x

    def compute_output_spec(self, inputs, training=None, mask=None):
        if self._functional is not None:
            return self._functional.compute_output_spec(inputs, training=training, mask=mask)
        x = inputs
        for layer in self.layers:
            x = layer.compute_output_spec(x)
        return x

    def compute_output_shape(self, input_shape):
        if self._functional is not None:
            return self._functional.compute_output_shape(input_shape)
        shape = input_shape
        for layer in self.layers:
            shape = layer.compute_output_shape(shape)
        return shape

    # ------------------------------------------------------------------ graph properties
    def _graph(self, what):
        if self._functional is None:
            raise AttributeError(f"Sequential model '{self.name}' has no defined {what} yet.")
        return self._functional

    @property
    def inputs(self):
        return self._graph("inputs").inputs

    @property
    def outputs(self):
        return self._graph("outputs").outputs

    @property
    def input(self):
        return self._graph("input").input

    @property
    def output(self):
        return self._graph("output").output

    @property
    def input_shape(self):
        return self._graph("input shape").input_shape

    @property
    def output_shape(self):
        return self._graph("output shape").output_shape

    @property
    def input_names(self):
        return self._graph("inputs").input_names

    @property
    def output_names(self):
        return self._graph("outputs").output_names if self._functional is not None else None

    # ------------------------------------------------------------------ config
    def get_config(self) -> dict:
        from keratron.models.serialization import serialize_layer

        config = Layer.get_config(self)
        config["name"] = self.name
        config["layers"] = [serialize_layer(layer) for layer in self._layers]
        if self._functional is not None:
            config["build_input_shape"] = self._layers[0].batch_shape
        return config

    @classmethod
    def from_config(cls, config, custom_objects=None):
        from keratron.models.serialization import deserialize_layer

        if isinstance(config, list):  # tf.keras 1 wrote the bare layer list
            config = {"layers": config}
        if "layers" not in config:
            raise ValueError(
                "A Sequential model configuration must be a dictionary with a 'layers' key. "
                f"Received keys: {sorted(config)}"
            )
        model = cls(name=config.get("name"), trainable=config.get("trainable", True))
        for layer_config in config["layers"]:
            model.add(deserialize_layer(layer_config, custom_objects=custom_objects))
        build_shape = config.get("build_input_shape")
        if model._functional is None and build_shape and _is_shape(build_shape):
            model.build(tuple(build_shape))
        return model
