"""Keras layers that wrap another framework's runtime, which keratron does not have.

Keras exports them under `keras.layers`; here they exist so that a script finds the name, and
raise at construction with the reason instead of failing later with an `AttributeError`.

Example:
    >>> from keratron.layers import JaxLayer
"""

__all__ = ["FlaxLayer", "JaxLayer", "TFSMLayer", "TorchModuleWrapper"]


def _unsupported(name: str, reason: str):
    def __init__(self, *args, **kwargs):
        raise NotImplementedError(f"keras.layers.{name} is not available in keratron: {reason}.")

    return type(name, (), {"__init__": __init__, "__doc__": f"Not available: {reason}."})


JaxLayer = _unsupported("JaxLayer", "it wraps a JAX function and keratron has no JAX backend")
FlaxLayer = _unsupported("FlaxLayer", "it wraps a Flax module and keratron has no JAX backend")
TFSMLayer = _unsupported(
    "TFSMLayer",
    "it loads a TensorFlow SavedModel into a TensorFlow-backend layer; keratron's own exports "
    "load with keratron.saved_model.load",
)
TorchModuleWrapper = _unsupported(
    "TorchModuleWrapper",
    "it trains a torch.nn.Module through torch.autograd, and keratron computes every gradient "
    "with its own autodiff; write the module as keratron layers instead",
)
