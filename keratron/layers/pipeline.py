"""Pipeline (Keras's `layers/preprocessing/pipeline`): applies a list of layers in order, as
a single layer, passing the training flag and each layer's output mask to the next."""

from __future__ import annotations

from keratron.autodiff import tree
from keratron.layers.layer import Layer
from keratron.layers.wrappers import deserialize_layer, serialize_layer

__all__ = ["Pipeline"]


class Pipeline(Layer):
    """A sequence of layers applied one after the other, usually preprocessing or
    augmentation layers (unlike `Sequential` it is a layer, not a model).

    As in Keras, `training` defaults to True, so augmentation layers in a pipeline run
    unless the call says `training=False` (or an enclosing model runs in inference).

    Args:
        layers: a list of layers.
        name: optional name.

    Example:
        >>> pipeline = keratron.layers.Pipeline(
        ...     [keratron.layers.Rescaling(2.0), keratron.layers.Activation("relu")])
        >>> pipeline(np.array([[-1.0, 3.0]], "float32")).numpy()
        array([[0., 6.]], dtype=float32)
    """

    def __init__(self, layers, name=None):
        if not isinstance(layers, (list, tuple)) or not all(isinstance(x, Layer) for x in layers):
            raise ValueError(
                f"Pipeline layer{f' {name!r}' if name else ''}: argument `layers` must be a list "
                f"of layers. Received: layers={layers!r}"
            )
        super().__init__(name=name)
        self._pipeline_layers = list(layers)
        # Tracked, so the sublayers' weights (if any) are the pipeline's.
        self._layers.extend(self._pipeline_layers)
        self.built = True

    @property
    def layers(self):
        return self._pipeline_layers

    def call(self, inputs, training=True, mask=None):
        outputs = inputs
        for layer in self._pipeline_layers:
            kwargs = {}
            if "mask" in layer._call_params:
                kwargs["mask"] = mask
            if "training" in layer._call_params and training is not None:
                kwargs["training"] = training
            outputs = layer(inputs, **kwargs)
            inputs = outputs
            mask = tree.map_structure(lambda t: getattr(t, "_keras_mask", None), outputs)
        return outputs

    def get_config(self):
        return {
            "layers": [serialize_layer(layer) for layer in self._pipeline_layers],
            "name": self.name,
        }

    @classmethod
    def from_config(cls, config, custom_objects=None):
        layers = config.get("layers")
        if not isinstance(layers, (list, tuple)):
            raise ValueError(
                "A `Pipeline` config must hold a `layers` key with a list of serialized "
                f"layers. Received: layers={layers!r}"
            )
        config = {**config, "layers": [deserialize_layer(x, custom_objects) for x in layers]}
        return cls(**config)
