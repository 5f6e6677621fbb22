"""Models, as `keras.models`: `Model`, `Sequential`, and rebuilding models from configs.

Example:
    >>> model = keratron.models.Sequential([keratron.layers.Dense(1)])
    >>> clone = keratron.models.clone_model(model)
"""

from keratron.models.cloning import clone_model
from keratron.models.functional import Functional
from keratron.models.model import Model, model_from_config, model_from_json
from keratron.models.sequential import Sequential
from keratron.saving import load_model, save_model

__all__ = [
    "Functional",
    "Model",
    "Sequential",
    "clone_model",
    "load_model",
    "model_from_config",
    "model_from_json",
    "save_model",
]
