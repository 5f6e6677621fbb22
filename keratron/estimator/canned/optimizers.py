"""The optimizer argument of the premade estimators: a name, an instance or a callable."""

from __future__ import annotations

from keratron import optimizers as optimizers_module
from keratron.optimizers.base_optimizer import fresh_auto_names, is_auto_name
from keratron.utils.naming import fresh_uids

__all__ = ["check_optimizer", "copy_optimizer", "get_optimizer_instance"]

_NAMES = {
    "adagrad": optimizers_module.Adagrad,
    "adam": optimizers_module.Adam,
    "ftrl": optimizers_module.Ftrl,
    "rmsprop": optimizers_module.RMSprop,
    "sgd": optimizers_module.SGD,
}


def copy_optimizer(optimizer):
    """A new optimizer of `optimizer`'s class and config, for one traced `model_fn`.

    An auto-generated name ("adam_1", numbered by the optimizers the process made before) is
    left out, so that the copy is named afresh inside the traced `model_fn` ("adam") and its
    checkpoint keys are the same in every process; a name the user chose is kept.
    """
    config = optimizer.get_config()
    if is_auto_name(config.get("name"), type(optimizer).__name__):
        config.pop("name")
    return type(optimizer).from_config(config)


def get_optimizer_instance(optimizer, learning_rate, what):
    """A fresh optimizer for one traced graph.

    A name ("Adagrad", "Adam", "Ftrl", "RMSProp", "SGD") gets the estimator's default
    learning rate, as in TensorFlow. An instance is copied (`copy_optimizer`), so that each
    traced graph (and each Estimator) owns its optimizer variables; a callable is called.
    """
    if isinstance(optimizer, str):
        cls = _NAMES.get(optimizer.lower())
        if cls is None:
            raise ValueError(
                f"{what}: unsupported optimizer name {optimizer!r}; supported: Adagrad, Adam, "
                "Ftrl, RMSProp, SGD (or pass an optimizer instance)."
            )
        return cls(learning_rate=learning_rate)
    if isinstance(optimizer, optimizers_module.Optimizer):
        return copy_optimizer(optimizer)
    if callable(optimizer):
        made = optimizer()
        if not isinstance(made, optimizers_module.Optimizer):
            raise ValueError(
                f"{what}: the optimizer callable must return a keratron optimizer. Received: "
                f"{type(made).__name__}"
            )
        return made
    raise ValueError(
        f"{what}: `optimizer` must be a name, a keratron optimizer or a callable returning one. "
        f"Received: {optimizer!r}"
    )


def check_optimizer(optimizer, learning_rate, what) -> None:
    """Validates a premade estimator's `optimizer` argument when it is constructed. The
    optimizer made to check it is thrown away, and the process's auto-naming is left as it
    was: building an Estimator does not rename the user's next "adam"."""
    with fresh_uids(), fresh_auto_names():
        get_optimizer_instance(optimizer, learning_rate, what)
