"""Optimizers, named and defaulted as `keras.optimizers`, plus `get` / `serialize` /
`deserialize` and the `schedules` submodule."""

from __future__ import annotations

from keratron.optimizers import schedules
from keratron.optimizers.adadelta import Adadelta
from keratron.optimizers.adafactor import Adafactor
from keratron.optimizers.adagrad import Adagrad
from keratron.optimizers.adam import Adam, AdamW
from keratron.optimizers.adamax import Adamax
from keratron.optimizers.base_optimizer import Optimizer
from keratron.optimizers.ftrl import Ftrl
from keratron.optimizers.lamb import Lamb
from keratron.optimizers.lion import Lion
from keratron.optimizers.loss_scale_optimizer import LossScaleOptimizer
from keratron.optimizers.multi_optimizer import MultiOptimizer, OptimizerMap
from keratron.optimizers.muon import Muon
from keratron.optimizers.nadam import Nadam
from keratron.optimizers.rmsprop import RMSprop
from keratron.optimizers.schedule_free_adamw import ScheduleFreeAdamW
from keratron.optimizers.sgd import SGD

__all__ = [
    "Optimizer",
    "SGD",
    "Adam",
    "AdamW",
    "RMSprop",
    "Adagrad",
    "Adadelta",
    "Adamax",
    "Nadam",
    "Ftrl",
    "Lion",
    "Adafactor",
    "Lamb",
    "LossScaleOptimizer",
    "MultiOptimizer",
    "Muon",
    "OptimizerMap",
    "ScheduleFreeAdamW",
    "schedules",
    "get",
    "serialize",
    "deserialize",
]

ALL_OBJECTS = (
    Optimizer,
    SGD,
    Adam,
    AdamW,
    RMSprop,
    Adagrad,
    Adadelta,
    Adamax,
    Nadam,
    Ftrl,
    Lion,
    Adafactor,
    Lamb,
    LossScaleOptimizer,
    MultiOptimizer,
    Muon,
    ScheduleFreeAdamW,
)
ALL_OBJECTS_DICT = {cls.__name__.lower(): cls for cls in ALL_OBJECTS}


def serialize(optimizer) -> dict:
    """The optimizer's config in the Keras 3 serialized form
    (`{"module", "class_name", "config", "registered_name"}`).

    Example:
        >>> keratron.optimizers.serialize(keratron.optimizers.Adam())["class_name"]
        'Adam'
    """
    if not isinstance(optimizer, Optimizer):
        raise TypeError(
            f"optimizers.serialize expects an Optimizer. Received: {type(optimizer).__name__}"
        )
    cls = type(optimizer)
    builtin = ALL_OBJECTS_DICT.get(cls.__name__.lower()) is cls
    return {
        "module": "keras.optimizers" if builtin else cls.__module__,
        "class_name": cls.__name__,
        "config": optimizer.get_config(),
        "registered_name": None if builtin else cls.__name__,
    }


def deserialize(config, custom_objects=None) -> Optimizer:
    """Rebuilds an optimizer from `serialize` output; also reads tf.keras 2 configs
    (`{"class_name": "Adam", "config": {...}}`, with `lr`/`decay` keys). Built-in class names
    match case-insensitively.

    Example:
        >>> opt = keratron.optimizers.deserialize({"class_name": "sgd", "config": {}})
        >>> type(opt).__name__
        'SGD'
    """
    if not isinstance(config, dict) or "class_name" not in config:
        raise ValueError(
            "optimizers.deserialize expects a dict with 'class_name' and 'config'. "
            f"Received: {config!r}"
        )
    name = config["class_name"]
    custom_objects = custom_objects or {}
    cls = custom_objects.get(name) or custom_objects.get(config.get("registered_name"))
    if cls is None:
        cls = ALL_OBJECTS_DICT.get(str(name).lower())
    if cls is None:
        raise ValueError(
            f"Unknown optimizer: '{name}'. Expected one of {sorted(ALL_OBJECTS_DICT)}, or a "
            "class passed in `custom_objects`."
        )
    return cls.from_config(dict(config.get("config") or {}), custom_objects=custom_objects)


def get(identifier) -> Optimizer | None:
    """Returns an optimizer from a name ("adam"), a config dict, or an instance (unchanged).

    Example:
        >>> type(keratron.optimizers.get("rmsprop")).__name__
        'RMSprop'
    """
    if identifier is None:
        return None
    if isinstance(identifier, Optimizer):
        return identifier
    if isinstance(identifier, dict):
        return deserialize(identifier)
    if isinstance(identifier, str):
        return deserialize({"class_name": identifier, "config": {}})
    raise ValueError(
        "Could not interpret optimizer identifier: expected a name, a config dict or an "
        f"Optimizer. Received: {identifier!r}"
    )
