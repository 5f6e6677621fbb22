"""Adagrad: per-coordinate learning rates from the accumulated squared gradients."""

from __future__ import annotations

import torch

from keratron.optimizers.base_optimizer import Optimizer


class Adagrad(Optimizer):
    """Adagrad, as Keras 3 defines it.

    `acc += g**2`, then `w -= lr * g / sqrt(acc + epsilon)`; `acc` starts at
    `initial_accumulator_value`.

    Args:
        learning_rate: a float, a `LearningRateSchedule`, or a callable. Defaults to 0.001.
        initial_accumulator_value: the accumulators' starting value (>= 0). Defaults to 0.1.
        epsilon: numerical-stability constant (inside the square root). Defaults to 1e-7.
        **kwargs: the base `Optimizer` arguments (weight_decay, clipnorm, ..., name).

    Example:
        >>> opt = keratron.optimizers.Adagrad(learning_rate=0.1)
        >>> w = keratron.Variable([1.0])
        >>> opt.apply([keratron.convert_to_tensor([1.0])], [w])
    """

    _update_is_graph_safe = True  # on CUDA its update makes no host read

    def __init__(
        self,
        learning_rate=0.001,
        initial_accumulator_value=0.1,
        epsilon=1e-7,
        weight_decay=None,
        clipnorm=None,
        clipvalue=None,
        global_clipnorm=None,
        use_ema=False,
        ema_momentum=0.99,
        ema_overwrite_frequency=None,
        loss_scale_factor=None,
        gradient_accumulation_steps=None,
        name=None,
        **kwargs,
    ):
        super().__init__(
            learning_rate=learning_rate,
            weight_decay=weight_decay,
            clipnorm=clipnorm,
            clipvalue=clipvalue,
            global_clipnorm=global_clipnorm,
            use_ema=use_ema,
            ema_momentum=ema_momentum,
            ema_overwrite_frequency=ema_overwrite_frequency,
            loss_scale_factor=loss_scale_factor,
            gradient_accumulation_steps=gradient_accumulation_steps,
            name=name,
            **kwargs,
        )
        self.initial_accumulator_value = initial_accumulator_value
        self.epsilon = epsilon

    def build(self, var_list):
        if self.built:
            return
        super().build(var_list)
        self._accumulators = self.add_optimizer_variables(
            var_list, "accumulator", initializer=float(self.initial_accumulator_value)
        )

    def _update_group(self, grads, variables, lr):
        values = [v._value for v in variables]
        acc = [self._accumulators[self._get_variable_index(v)]._value for v in variables]
        torch._foreach_addcmul_(acc, grads, grads)
        denom = torch._foreach_add(acc, self.epsilon)
        torch._foreach_sqrt_(denom)
        step = torch._foreach_mul(grads, lr)
        torch._foreach_div_(step, denom)
        torch._foreach_sub_(values, step)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "initial_accumulator_value": self.initial_accumulator_value,
                "epsilon": self.epsilon,
            }
        )
        return config
