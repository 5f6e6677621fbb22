"""Layer wrappers (Keras's `Wrapper`, `Bidirectional`, `TimeDistributed`) and the nested-layer
config helpers they and `RNN` use.

A wrapped layer is written into the wrapper's config as Keras 3 writes any layer:
`{"module", "class_name", "config", "registered_name"}`, and rebuilt by class name from the
custom-object registry or `keratron.layers`; nothing from a config is ever evaluated.
"""

from __future__ import annotations

import inspect

from keratron import ops
from keratron.autodiff import tree
from keratron.layers.layer import Layer
from keratron.layers.serialization import get_registered_name, lookup_custom

__all__ = ["Wrapper", "Bidirectional", "TimeDistributed"]


# --------------------------------------------------------------------- nested layer configs
def serialize_layer(layer) -> dict:
    """A layer's Keras 3 config dict: class name, module, constructor config."""
    cls = type(layer)
    builtin = cls.__module__.startswith("keratron.")
    registered = get_registered_name(cls)
    return {
        "module": "keras.layers" if builtin else cls.__module__,
        "class_name": cls.__name__,
        "config": layer.get_config(),
        "registered_name": None if builtin and registered == cls.__name__ else registered,
    }


def deserialize_layer(config, custom_objects=None):
    """Rebuilds a layer from `serialize_layer`'s output (a Layer passes through)."""
    if isinstance(config, Layer):
        return config
    if not isinstance(config, dict) or "class_name" not in config:
        raise ValueError(
            f"Expected a layer config dict with a 'class_name' key. Received: {config!r}"
        )
    import keratron.layers as layers_module

    name = config["class_name"]
    cls = None
    for key in (config.get("registered_name"), name):
        if key and cls is None:
            cls = lookup_custom(key, custom_objects)
    if cls is None:
        cls = getattr(layers_module, name, None)
    if not (inspect.isclass(cls) and issubclass(cls, Layer)):
        raise ValueError(
            f"Unknown layer: '{name}'. Register custom layers with "
            "`register_keras_serializable` or pass them in `custom_objects`."
        )
    inner = dict(config.get("config", {}))
    dtype = inner.get("dtype")
    if isinstance(dtype, dict):  # a Keras 3 DTypePolicy: a mixed policy's name, else its dtype
        policy = dtype.get("config", {}).get("name")
        if isinstance(policy, str) and not policy.startswith("mixed_"):
            policy = policy.split("_")[-1]
        inner["dtype"] = policy if isinstance(policy, str) else None
    if "custom_objects" in inspect.signature(cls.from_config).parameters:
        return cls.from_config(inner, custom_objects=custom_objects)
    return cls.from_config(inner)


def _build_child(layer, shape):
    """Builds a wrapped layer on `shape`, then applies weights given at construction."""
    if not layer.built:
        layer.build(shape)
        layer.built = True
    if getattr(layer, "_initial_weights", None) is not None:
        weights, layer._initial_weights = layer._initial_weights, None
        layer.set_weights(weights)


# ------------------------------------------------------------------------------------ Wrapper
class Wrapper(Layer):
    """Base class of layers that wrap another layer (stored as `self.layer`).

    Args:
        layer: the wrapped layer.

    Example:
        >>> class Twice(keratron.layers.Wrapper):
        ...     def call(self, x):
        ...         return self.layer(self.layer(x))
    """

    def __init__(self, layer, **kwargs):
        if not isinstance(layer, Layer):
            raise ValueError(
                f"{type(self).__name__} layer: argument `layer` must be a keratron Layer "
                f"instance. Received: layer={layer!r}"
            )
        super().__init__(**kwargs)
        self.layer = layer

    def build(self, input_shape=None):
        _build_child(self.layer, input_shape)
        self.built = True

    def get_config(self):
        return {**super().get_config(), "layer": serialize_layer(self.layer)}

    @classmethod
    def from_config(cls, config, custom_objects=None):
        config = dict(config)
        layer = deserialize_layer(config.pop("layer"), custom_objects)
        return cls(layer, **config)


# ---------------------------------------------------------------------------- TimeDistributed
class TimeDistributed(Wrapper):
    """Applies a layer to every time step of a (batch, time, ...) input, with shared weights.

    Batch and time are merged into one axis, so the wrapped layer runs once on
    (batch * time, ...) and the result is split back into (batch, time, ...).

    Args:
        layer: the layer to apply at each step.

    Example:
        >>> layer = keratron.layers.TimeDistributed(keratron.layers.Dense(4))
        >>> layer(np.ones((2, 5, 3), "float32")).shape
        (2, 5, 4)
    """

    def __init__(self, layer, **kwargs):
        super().__init__(layer, **kwargs)
        self.supports_masking = True

    def _child_shape(self, input_shape):
        if not isinstance(input_shape, (tuple, list)) or len(input_shape) < 3:
            raise ValueError(
                f"Layer '{self.name}' (TimeDistributed) expects inputs of rank >= 3, "
                f"(batch, time, ...). Received: input_shape={input_shape}"
            )
        return (input_shape[0], *input_shape[2:])

    def build(self, input_shape):
        super().build(self._child_shape(tuple(input_shape)))

    def compute_mask(self, inputs, mask=None):
        # The mask passes through; a mask given as an array becomes a tensor.
        return None if mask is None else ops.convert_to_tensor(mask)

    def compute_output_shape(self, input_shape):
        child = self.layer.compute_output_shape(self._child_shape(tuple(input_shape)))
        return (child[0], input_shape[1], *child[1:])

    def call(self, inputs, training=None, mask=None):
        shape = tuple(inputs.shape)
        self._child_shape(shape)
        batch, steps = shape[0], shape[1]
        kwargs = {}
        params = self.layer._call_params
        if "training" in params:
            kwargs["training"] = training
        if mask is not None:
            mask = ops.convert_to_tensor(mask)
            if mask.ndim < 2 or tuple(mask.shape[:2]) != (batch, steps):
                raise ValueError(
                    f"Layer '{self.name}' (TimeDistributed): the mask must start with the "
                    f"input's (batch, time) = {(batch, steps)}. Received: "
                    f"mask.shape={tuple(mask.shape)}"
                )
            if "mask" in params:
                kwargs["mask"] = ops.reshape(mask, (batch * steps, *mask.shape[2:]))
        merged = ops.reshape(inputs, (batch * steps, *shape[2:]))
        outputs = self.layer.call(merged, **kwargs)
        return tree.map_structure(lambda y: ops.reshape(y, (batch, steps, *y.shape[1:])), outputs)


# ------------------------------------------------------------------------------ Bidirectional
_MERGE_MODES = ("sum", "mul", "ave", "concat", None)


def _remove_prefix(name, prefix):
    return name[len(prefix) :] if name.startswith(prefix) else name


class Bidirectional(Layer):
    """Runs a recurrent layer forwards and a copy of it backwards, and merges the outputs.

    Weights are the forward layer's, then the backward layer's (Keras's order).

    Args:
        layer: a recurrent layer (e.g. `LSTM`); a copy named "forward_<name>" runs forwards.
        merge_mode: "concat" (default), "sum", "mul", "ave", or None (return both outputs).
        weights: optional initial weights, the forward layer's then the backward layer's.
        backward_layer: optional layer for the backward direction; by default a copy of
            `layer` with `go_backwards` flipped, named "backward_<name>".

    Example:
        >>> layer = keratron.layers.Bidirectional(keratron.layers.LSTM(4))
        >>> layer(np.ones((2, 5, 3), "float32")).shape
        (2, 8)
    """

    def __init__(self, layer, merge_mode="concat", weights=None, backward_layer=None, **kwargs):
        who = f"Bidirectional layer '{kwargs['name']}'" if kwargs.get("name") else "Bidirectional"
        if not isinstance(layer, Layer):
            raise ValueError(
                f"{who}: argument `layer` must be a keratron Layer instance. "
                f"Received: layer={layer!r}"
            )
        if backward_layer is not None and not isinstance(backward_layer, Layer):
            raise ValueError(
                f"{who}: argument `backward_layer` must be a keratron Layer instance. "
                f"Received: backward_layer={backward_layer!r}"
            )
        if merge_mode not in _MERGE_MODES:
            raise ValueError(
                f"{who}: argument `merge_mode` must be one of {_MERGE_MODES}. "
                f"Received: merge_mode={merge_mode!r}"
            )
        for attr in ("go_backwards", "return_sequences", "return_state", "stateful"):
            if not hasattr(layer, attr):
                raise ValueError(
                    f"{who}: argument `layer` must be a recurrent layer (with `{attr}`). "
                    f"Received: layer={layer!r}"
                )
        super().__init__(**kwargs)
        config = serialize_layer(layer)
        config["config"]["name"] = "forward_" + _remove_prefix(layer.name, "forward_")
        self.forward_layer = deserialize_layer(config)
        if backward_layer is None:
            config = serialize_layer(layer)
            config["config"]["go_backwards"] = not layer.go_backwards
            config["config"]["name"] = "backward_" + _remove_prefix(layer.name, "backward_")
            backward_layer = deserialize_layer(config)
        self.backward_layer = backward_layer
        self._verify_layers(who)
        # Masked steps must output zeros so that the two directions line up after the flip.
        for sub in (self.forward_layer, self.backward_layer):
            if hasattr(sub, "zero_output_for_mask"):
                sub.zero_output_for_mask = sub.return_sequences
        self.merge_mode = merge_mode
        if weights:
            half = len(weights) // 2
            self.forward_layer._initial_weights = list(weights[:half])
            self.backward_layer._initial_weights = list(weights[half:])
        self.stateful = layer.stateful
        self.return_sequences = layer.return_sequences
        self.return_state = layer.return_state
        self.supports_masking = True
        self.input_spec = layer.input_spec

    def _verify_layers(self, who):
        fwd, bwd = self.forward_layer, self.backward_layer
        if fwd.go_backwards == bwd.go_backwards:
            raise ValueError(
                f"{who}: the forward and backward layers must have different `go_backwards`. "
                f"Received: forward go_backwards={fwd.go_backwards}, backward "
                f"go_backwards={bwd.go_backwards}"
            )
        for attr in ("stateful", "return_sequences", "return_state"):
            if getattr(fwd, attr) != getattr(bwd, attr):
                raise ValueError(
                    f"{who}: the forward and backward layers must have the same `{attr}`. "
                    f"Received: {getattr(fwd, attr)} (forward) and {getattr(bwd, attr)} "
                    "(backward)"
                )

    def build(self, sequences_shape, initial_state_shape=None):
        _build_child(self.forward_layer, tuple(sequences_shape))
        _build_child(self.backward_layer, tuple(sequences_shape))
        self.built = True

    def call(self, sequences, initial_state=None, mask=None, training=None):
        kwargs = {}
        if "training" in self.forward_layer._call_params:
            kwargs["training"] = training
        if "mask" in self.forward_layer._call_params:
            kwargs["mask"] = mask
        forward_state = backward_state = None
        if initial_state is not None:
            initial_state = list(initial_state)
            half = len(initial_state) // 2
            forward_state, backward_state = initial_state[:half], initial_state[half:]
        y = self.forward_layer(sequences, initial_state=forward_state, **kwargs)
        y_rev = self.backward_layer(sequences, initial_state=backward_state, **kwargs)
        states = ()
        if self.return_state:
            states = tuple(y[1:]) + tuple(y_rev[1:])
            y, y_rev = y[0], y_rev[0]
        if self.return_sequences:
            y_rev = ops.flip(y_rev, axis=1)
        if self.merge_mode == "concat":
            output = ops.concatenate([y, y_rev], axis=-1)
        elif self.merge_mode == "sum":
            output = ops.add(y, y_rev)
        elif self.merge_mode == "ave":
            output = ops.divide(ops.add(y, y_rev), 2.0)
        elif self.merge_mode == "mul":
            output = ops.multiply(y, y_rev)
        else:
            output = (y, y_rev)
        if self.return_state:
            return (*output, *states) if self.merge_mode is None else (output, *states)
        return output

    def compute_mask(self, inputs, mask=None):
        if isinstance(mask, (list, tuple)):
            mask = mask[0]
        output_mask = None
        if self.return_sequences and mask is not None:
            output_mask = ops.convert_to_tensor(mask)
        masks = [output_mask, output_mask] if self.merge_mode is None else [output_mask]
        if self.return_state:
            n_states = len(getattr(self.forward_layer, "state_size", [])) * 2
            return masks + [None] * n_states
        return masks if self.merge_mode is None else output_mask

    @property
    def states(self):
        fwd, bwd = self.forward_layer.states, self.backward_layer.states
        if fwd and bwd:
            return tuple(fwd) + tuple(bwd)
        return None

    def reset_state(self):
        if not self.stateful:
            raise AttributeError(f"Layer '{self.name}' (Bidirectional) must be stateful.")
        self.forward_layer.reset_state()
        self.backward_layer.reset_state()

    def reset_states(self):
        self.reset_state()

    def get_config(self):
        return {
            **super().get_config(),
            "merge_mode": self.merge_mode,
            "layer": serialize_layer(self.forward_layer),
            "backward_layer": serialize_layer(self.backward_layer),
        }

    @classmethod
    def from_config(cls, config, custom_objects=None):
        config = dict(config)
        config["layer"] = deserialize_layer(config["layer"], custom_objects)
        backward = config.pop("backward_layer", None)
        if backward is not None:
            config["backward_layer"] = deserialize_layer(backward, custom_objects)
        return cls(**config)
