"""keratron: a Keras-style deep-learning framework with its own autodiff over torch tensors."""

# The imports follow the package's layering (autodiff, ops, ..., layers, models), not the
# alphabet: each subpackage is imported after the ones it builds on.
# ruff: noqa: I001, E402

# First, before torch loads OpenMP: with KERATRON_OMP_PASSIVE=1 (and no wait policy of the
# user's), idle OpenMP threads sleep instead of spinning (keratron/_openmp.py, README).
from keratron import _openmp

_passive_wait = _openmp.prefer_passive_wait()
from keratron import config  # imports torch, and with it libgomp

_openmp.restore_environ(_passive_wait)
from keratron.autodiff import (
    GradientTape,
    Tensor,
    Variable,
    convert_to_tensor,
    custom_gradient,
    is_tensor,
    stop_gradient,
)
from keratron.autodiff.function import function
from keratron.autodiff.remat import RematScope, remat
from keratron.autodiff.scopes import StatelessScope, SymbolicScope
from keratron.config import device
from keratron import ops  # noqa: E402
from keratron import random  # noqa: E402
from keratron import utils  # noqa: E402
from keratron import tree  # noqa: E402
from keratron import datasets  # noqa: E402
from keratron import data  # noqa: E402
from keratron import optimizers  # noqa: E402
from keratron import losses  # noqa: E402
from keratron import metrics  # noqa: E402
from keratron import backend  # noqa: E402
from keratron import activations, constraints, initializers, regularizers  # noqa: E402
from keratron import mixed_precision  # noqa: E402
from keratron import layers  # noqa: E402
from keratron import callbacks  # noqa: E402
from keratron import models  # noqa: E402
from keratron import saving  # noqa: E402
from keratron import legacy  # noqa: E402
from keratron.optimizers import legacy as _optimizers_legacy  # noqa: E402, F401
from keratron.utils import legacy as _utils_legacy  # noqa: E402
from keratron import preprocessing  # noqa: E402
from keratron import applications  # noqa: E402
from keratron import estimator, feature_column, saved_model  # noqa: E402
from keratron import distribute  # noqa: E402
from keratron import export  # noqa: E402
from keratron import distillation, quantizers, visualization, wrappers  # noqa: E402
from keratron.quantizers import Quantizer  # noqa: E402
from keratron import distribution, dtype_policies  # noqa: E402
from keratron.layers import Input, InputSpec, Layer  # noqa: E402
from keratron.models import Model, Sequential  # noqa: E402
from keratron.models import visualization as _model_visualization  # noqa: E402
from keratron.layers import KerasTensor  # noqa: E402
from keratron.losses import Loss  # noqa: E402
from keratron.metrics import Metric  # noqa: E402
from keratron.optimizers import Optimizer  # noqa: E402
from keratron.initializers import Initializer  # noqa: E402
from keratron.regularizers import Regularizer  # noqa: E402
from keratron.dtype_policies import FloatDTypePolicy  # noqa: E402
from keratron.layers.name_scope import name_scope  # noqa: E402
from keratron.layers.operation import Operation  # noqa: E402
from keratron.models.graph_function import Function  # noqa: E402


def _install(namespace, names: dict) -> None:
    """Adds `names` to a lower package's namespace and `__all__` (see below)."""
    for name, value in names.items():
        setattr(namespace, name, value)
    namespace.__all__ = sorted({*namespace.__all__, *names})


# keras.utils and keras.layers also name functions that are built on higher floors of the
# package (the custom-object registry in layers, serialization in saving, datasets in data).
# utils and layers must not import those floors, so the top level, which sees them all,
# installs these names there: `keratron.utils.register_keras_serializable` is the one
# definition in `keratron.saving`, found under every path Keras gives it.
_install(
    utils,
    {
        "CustomObjectScope": saving.CustomObjectScope,
        "FeatureSpace": preprocessing.FeatureSpace,
        "audio_dataset_from_directory": preprocessing.audio_dataset_from_directory,
        "custom_object_scope": saving.custom_object_scope,
        "deserialize_keras_object": saving.deserialize_keras_object,
        "get_custom_objects": saving.get_custom_objects,
        "get_registered_name": saving.get_registered_name,
        "get_registered_object": saving.get_registered_object,
        "image_dataset_from_directory": preprocessing.image_dataset_from_directory,
        "is_keras_tensor": backend.is_keras_tensor,
        "model_to_dot": _model_visualization.model_to_dot,
        "plot_model": _model_visualization.plot_model,
        "register_keras_serializable": saving.register_keras_serializable,
        "serialize_keras_object": saving.serialize_keras_object,
        "split_dataset": preprocessing.split_dataset,
        "text_dataset_from_directory": preprocessing.text_dataset_from_directory,
        "timeseries_dataset_from_array": preprocessing.timeseries_dataset_from_array,
    },
)
_install(
    _utils_legacy,
    {
        "deserialize_keras_object": legacy.saving.deserialize_keras_object,
        "serialize_keras_object": legacy.saving.serialize_keras_object,
    },
)
_install(
    layers,
    {"serialize": saving.serialize_keras_object, "deserialize": saving.deserialize_keras_object},
)

# Keras names LossScaleOptimizer under keras.mixed_precision too, and keras.config holds the
# dtype-policy functions; both are defined on floors above those packages.
_install(mixed_precision, {"LossScaleOptimizer": optimizers.LossScaleOptimizer})
config.set_dtype_policy = mixed_precision.set_dtype_policy
config.dtype_policy = mixed_precision.dtype_policy
DTypePolicy = mixed_precision.DTypePolicy

__version__ = "0.1.0"


def version() -> str:
    return __version__


__all__ = [
    "GradientTape",
    "Input",
    "InputSpec",
    "KerasTensor",
    "Layer",
    "Loss",
    "Metric",
    "Operation",
    "Optimizer",
    "DTypePolicy",
    "FloatDTypePolicy",
    "Function",
    "Initializer",
    "Regularizer",
    "RematScope",
    "Model",
    "Sequential",
    "StatelessScope",
    "SymbolicScope",
    "Tensor",
    "Variable",
    "activations",
    "applications",
    "backend",
    "callbacks",
    "config",
    "constraints",
    "convert_to_tensor",
    "custom_gradient",
    "data",
    "datasets",
    "device",
    "distribute",
    "distribution",
    "dtype_policies",
    "estimator",
    "export",
    "distillation",
    "quantizers",
    "visualization",
    "wrappers",
    "feature_column",
    "function",
    "initializers",
    "is_tensor",
    "layers",
    "legacy",
    "losses",
    "metrics",
    "mixed_precision",
    "models",
    "name_scope",
    "ops",
    "optimizers",
    "preprocessing",
    "random",
    "regularizers",
    "remat",
    "Quantizer",
    "saved_model",
    "saving",
    "stop_gradient",
    "tree",
    "utils",
    "version",
]
