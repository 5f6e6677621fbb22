"""`clone_model`: the same architecture with new layers (and freshly initialized weights)."""

from __future__ import annotations

from keratron.autodiff import tree
from keratron.layers.input_layer import Input, InputLayer

__all__ = ["clone_model"]


def _default_clone(layer):
    return type(layer).from_config(layer.get_config())


def clone_model(model, input_tensors=None, clone_function=None, call_function=None, **kwargs):
    """Builds a copy of a functional or Sequential model with new layers.

    Weights are not copied (the new layers initialize their own); use
    `clone.set_weights(model.get_weights())` for that.

    Args:
        model: a Functional or Sequential model (a subclassed model is rebuilt from its
            config).
        input_tensors: optional KerasTensors (from `keratron.Input`) to build the clone on.
        clone_function: `fn(layer) -> new layer`; defaults to rebuilding from the config.
        call_function: optional `fn(layer, *args, **kwargs)` used instead of calling each
            cloned layer on its inputs.
        **kwargs: `recursive` is accepted for Keras compatibility (nested models are
            rebuilt from their configs either way).

    Example:
        >>> model = keratron.Sequential([keratron.Input((3,)), keratron.layers.Dense(2)])
        >>> clone = keratron.models.clone_model(model)
        >>> clone.layers[0] is model.layers[0]
        False
        >>> clone.set_weights(model.get_weights())
        >>> x = np.ones((1, 3), "float32")
        >>> np.allclose(clone.predict(x, verbose=0), model.predict(x, verbose=0))
        True
    """
    from keratron.models.functional import Functional
    from keratron.models.sequential import Sequential

    unknown = set(kwargs) - {"recursive"}
    if unknown:
        raise ValueError(f"clone_model: unexpected keyword arguments {sorted(unknown)}.")
    clone_function = clone_function or _default_clone
    if isinstance(model, Sequential):
        layers = [clone_function(layer) for layer in model.layers]
        if input_tensors is not None:
            flat = tree.flatten(input_tensors)
            if len(flat) != 1:
                raise ValueError(
                    "clone_model: a Sequential model takes exactly one input tensor. "
                    f"Received {len(flat)}."
                )
            layers = [flat[0]] + layers
        elif model._layers and isinstance(model._layers[0], InputLayer):
            first = model._layers[0]
            layers = [Input(batch_shape=first.batch_shape, dtype=first.dtype)] + layers
        return Sequential(layers, name=model.name, trainable=model.trainable)
    if not isinstance(model, Functional):
        if input_tensors is not None:
            raise ValueError(
                "clone_model: `input_tensors` can only be used with functional or Sequential "
                f"models. Received a {type(model).__name__}."
            )
        return type(model).from_config(model.get_config())
    if input_tensors is None:
        new_inputs = [
            Input(batch_shape=x.shape, dtype=x.dtype, name=x._keras_history[0].name)
            for x in model.inputs
        ]
    else:
        new_inputs = tree.flatten(input_tensors)
        if len(new_inputs) != len(model.inputs):
            raise ValueError(
                f"clone_model: model '{model.name}' has {len(model.inputs)} inputs, but "
                f"{len(new_inputs)} input_tensors were given."
            )
    clones = {}

    def cloned(layer):
        if id(layer) not in clones:
            clones[id(layer)] = clone_function(layer)
        new = clones[id(layer)]
        if call_function is None:
            return new
        return lambda *args, **kw: call_function(new, *args, **kw)

    outputs = model._run_through_graph(new_inputs, operation_fn=cloned)
    inputs = tree.pack_sequence_as(model._inputs_struct, new_inputs)
    return Functional(inputs, outputs, name=model.name, trainable=model.trainable)
