"""`MultiOptimizer` and `OptimizerMap`: a different optimizer for each group of variables,
chosen by the variables' paths (as `keras.optimizers.MultiOptimizer`)."""

from __future__ import annotations

import re
from collections.abc import MutableMapping

from keratron.optimizers.base_optimizer import Optimizer
from keratron.optimizers.loss_scale_optimizer import LossScaleOptimizer

__all__ = ["MultiOptimizer", "OptimizerMap"]


def _serialize(optimizer) -> dict:
    from keratron.optimizers import serialize

    return serialize(optimizer)


def _deserialize(config, custom_objects=None):
    from keratron.optimizers import deserialize

    return deserialize(config, custom_objects=custom_objects)


class OptimizerMap(MutableMapping):
    """Maps variable paths to optimizers: an exact path, else the one key that is a regular
    expression matching the whole path, else `default_optimizer`.

    Args:
        default_optimizer: the optimizer of the variables no key matches.
        optimizer_map: an optional dict of path (or path pattern) -> optimizer.

    Example:
        >>> opt_map = keratron.optimizers.OptimizerMap(keratron.optimizers.Adam())
        >>> opt_map["dense/.*"] = keratron.optimizers.SGD(0.1)
        >>> type(opt_map["dense/kernel"]).__name__, type(opt_map["head/kernel"]).__name__
        ('SGD', 'Adam')
    """

    def __init__(self, default_optimizer, optimizer_map=None):
        if not isinstance(default_optimizer, Optimizer):
            raise TypeError(
                "OptimizerMap: default_optimizer must be a keratron Optimizer instance. "
                f"Received: {default_optimizer!r}"
            )
        if optimizer_map is not None and not isinstance(optimizer_map, dict):
            raise TypeError(
                f"OptimizerMap: optimizer_map must be a dictionary. Received: {optimizer_map!r}"
            )
        self._default_optimizer = default_optimizer
        self._optimizer_map = {}
        for key, optimizer in (optimizer_map or {}).items():
            self[key] = optimizer

    @property
    def default_optimizer(self):
        return self._default_optimizer

    def __getitem__(self, key):
        if key in self._optimizer_map:
            return self._optimizer_map[key]
        matching = [p for p in self._optimizer_map if re.fullmatch(p, key)]
        if len(matching) > 1:
            raise ValueError(f"Multiple optimizers assigned to variable {key}.")
        if matching:
            return self._optimizer_map[matching[0]]
        return self._default_optimizer

    def __setitem__(self, key, optimizer):
        if key in self._optimizer_map:
            raise ValueError(
                f"'{key}' already exists in the OptimizerMap with value "
                f"{self._optimizer_map[key]}. Please make sure to not use duplicated keys."
            )
        if not isinstance(key, str):
            raise ValueError(f"key must be a string. Received: {key}")
        if not isinstance(optimizer, Optimizer):
            raise ValueError(
                f"optimizer must be a keratron Optimizer instance. Received: {optimizer}"
            )
        if isinstance(optimizer, LossScaleOptimizer):
            raise ValueError("optimizer cannot be LossScaleOptimizer.")
        if isinstance(optimizer, MultiOptimizer):
            raise ValueError("optimizer cannot be MultiOptimizer.")
        self._optimizer_map[key] = optimizer

    def __delitem__(self, key):
        del self._optimizer_map[key]

    def __len__(self):
        return len(self._optimizer_map)

    def __iter__(self):
        return iter(self._optimizer_map)

    def __call__(self, variable):
        return self[variable.path]

    def get_config(self) -> dict:
        return {
            "default_optimizer": _serialize(self._default_optimizer),
            "optimizer_map": {k: _serialize(v) for k, v in self._optimizer_map.items()},
        }

    @classmethod
    def from_config(cls, config, custom_objects=None):
        return cls(
            _deserialize(config["default_optimizer"], custom_objects),
            {k: _deserialize(v, custom_objects) for k, v in config["optimizer_map"].items()},
        )


class MultiOptimizer(Optimizer):
    """Updates each variable with the optimizer that `optimizer_map` gives it.

    Each inner optimizer is built on, and steps, only its own variables, with its own learning
    rate and slots; `variables` lists the MultiOptimizer's own (`iteration`, `learning_rate`)
    then each inner optimizer's. The learning rate is read and set on the inner optimizers.

    Args:
        optimizer_map: an `OptimizerMap`, or any callable from a variable to its optimizer.
        loss_scale_factor: passed on to every inner optimizer.
        name: the optimizer's name.

    Example:
        >>> opt = keratron.optimizers.MultiOptimizer(
        ...     keratron.optimizers.OptimizerMap(
        ...         keratron.optimizers.Adam(1e-3), {".*/bias": keratron.optimizers.SGD(0.1)}))
        >>> model = keratron.Sequential(
        ...     [keratron.Input((3,)), keratron.layers.Dense(2, kernel_initializer="ones")])
        >>> model.compile(optimizer=opt, loss="mse")
        >>> model.train_on_batch(np.ones((2, 3)), np.zeros((2, 2)))
        9.0
        >>> model.layers[0].bias.numpy()  # one SGD step (learning rate 0.1) from zeros
        array([-0.3, -0.3], dtype=float32)
    """

    def __init__(self, optimizer_map, loss_scale_factor=None, name=None):
        super().__init__(learning_rate=0.0, loss_scale_factor=loss_scale_factor, name=name)
        self._optimizer_map = optimizer_map
        self._inner_optimizers = []
        for opt in list(getattr(optimizer_map, "values", list)()) + [
            getattr(optimizer_map, "default_optimizer", None)
        ]:
            if opt is not None and opt not in self._inner_optimizers:
                opt.loss_scale_factor = loss_scale_factor
                self._inner_optimizers.append(opt)

    def build(self, var_list):
        if self.built:
            return
        var_list = list(var_list)
        self._var_to_optimizer_idx = {}
        groups = [[] for _ in self._inner_optimizers]
        for var in var_list:
            opt = self._optimizer_map(var)
            if not isinstance(opt, Optimizer):
                raise ValueError(f"Optimizer for variable {var} is not an Optimizer instance.")
            if isinstance(opt, LossScaleOptimizer):
                raise ValueError("LossScaleOptimizer cannot be used inside an MultiOptimizer.")
            if isinstance(opt, MultiOptimizer):
                raise ValueError("MultiOptimizer cannot be used inside an MultiOptimizer.")
            if opt not in self._inner_optimizers:
                opt.loss_scale_factor = self.loss_scale_factor
                self._inner_optimizers.append(opt)
                groups.append([])
            idx = self._inner_optimizers.index(opt)
            self._var_to_optimizer_idx[id(var)] = idx
            groups[idx].append(var)
        for opt, variables in zip(self._inner_optimizers, groups):
            if variables:
                opt.build(variables)
        super().build(var_list)

    @property
    def optimizers(self) -> list:
        """The inner optimizers, in the order they were met."""
        return self._inner_optimizers

    @property
    def variables(self) -> list:
        variables = self._variables[:]
        for opt in self._inner_optimizers:
            variables.extend(opt.variables)
        return variables

    @property
    def learning_rate(self):
        raise AttributeError(
            "Learning rate cannot be accessed on a MultiOptimizer. Access the learning rate on "
            "the individual sub-optimizers instead."
        )

    @learning_rate.setter
    def learning_rate(self, value):
        raise AttributeError(
            "Learning rate cannot be set on a MultiOptimizer. Set the learning rate on the "
            "individual sub-optimizers instead."
        )

    @property
    def loss_scale_factor(self):
        return getattr(self, "_loss_scale_factor", None)

    @loss_scale_factor.setter
    def loss_scale_factor(self, value):
        self._loss_scale_factor = value
        for opt in getattr(self, "_inner_optimizers", ()):
            opt.loss_scale_factor = value

    @property
    def iterations(self):
        return self._iterations

    def apply(self, grads, trainable_variables=None) -> None:
        """Hands each variable's gradient to its optimizer, then counts one step."""
        from keratron.autodiff.function import is_tracing, record_effect

        grads = list(grads)
        if not grads:
            return
        if trainable_variables is None:
            if not self.built:
                raise ValueError(
                    f"Optimizer '{self.name}': when `grads` are passed without variables, the "
                    "optimizer must already be built; call `optimizer.build(trainable_variables)`"
                    " first or pass the variables."
                )
            trainable_variables = self._trainable_variables
        trainable_variables = list(trainable_variables)
        if not self.built:
            self.build(trainable_variables)
        if len(grads) != len(self._trainable_variables_indices):
            raise ValueError(
                "Gradients must match trainable variables one-to-one. Received "
                f"{len(grads)} gradients and {len(self._trainable_variables_indices)} variables."
            )
        groups = [[] for _ in self._inner_optimizers]
        for grad, var in zip(grads, trainable_variables):
            groups[self._var_to_optimizer_idx[id(var)]].append((grad, var))
        for opt, pairs in zip(self._inner_optimizers, groups):
            if pairs:
                opt.apply([g for g, _ in pairs], [v for _, v in pairs])
        if is_tracing():
            # A step of a compiled function counts at every replay, not once at tracing.
            record_effect(lambda: self._iterations._value.add_(1), [], [self._iterations])
        else:
            self._iterations._value.add_(1)

    def finalize_variable_values(self, var_list) -> None:
        groups = [[] for _ in self._inner_optimizers]
        for var in var_list:
            groups[self._var_to_optimizer_idx[id(var)]].append(var)
        for opt, variables in zip(self._inner_optimizers, groups):
            if variables:
                opt.finalize_variable_values(variables)

    def set_weights(self, weights) -> None:
        if not self.built:
            raise ValueError(
                f"Optimizer '{self.name}': set_weights() needs a built optimizer; call "
                "`optimizer.build(trainable_variables)` first."
            )
        weights = list(weights)
        own = len(self._variables)
        for variable, weight in zip(self._variables, weights[:own]):
            variable.assign(weight)
        start = own
        for opt in self._inner_optimizers:
            count = len(opt.variables)
            if count:
                opt.set_weights(weights[start : start + count])
                start += count

    def get_config(self) -> dict:
        optimizer_map = self._optimizer_map
        if isinstance(optimizer_map, OptimizerMap):
            optimizer_map = {
                "module": "keras.optimizers",
                "class_name": "OptimizerMap",
                "config": optimizer_map.get_config(),
                "registered_name": None,
            }
        return {
            "optimizer_map": optimizer_map,
            "loss_scale_factor": self.loss_scale_factor,
            "name": self.name,
        }

    @classmethod
    def from_config(cls, config, custom_objects=None):
        config = dict(config)
        optimizer_map = config["optimizer_map"]
        if isinstance(optimizer_map, dict) and optimizer_map.get("class_name") == "OptimizerMap":
            config["optimizer_map"] = OptimizerMap.from_config(
                optimizer_map["config"], custom_objects
            )
        return cls(**config)
