"""FTRL-Proximal (McMahan et al., 2013), with Keras's L1, L2, L2-shrinkage and beta terms."""

from __future__ import annotations

import torch

from keratron.optimizers.base_optimizer import Optimizer


class Ftrl(Optimizer):
    """Follow-the-regularized-leader, as Keras 3 defines it.

    With `p = -learning_rate_power` and `g' = g + 2 * l2_shrinkage * w`:
    `n_new = n + g**2`, `z += g' - (n_new**p - n**p) / lr * w`,
    `w = (clip(z, -l1, l1) - z) / (n_new**p / lr + 2 * (l2 + beta / (2 * lr)))`, `n = n_new`.

    Args:
        learning_rate: a float, a `LearningRateSchedule`, or a callable. Defaults to 0.001.
        learning_rate_power: <= 0; -0.5 is Adagrad-like. Defaults to -0.5.
        initial_accumulator_value: the accumulators' start (>= 0). Defaults to 0.1.
        l1_regularization_strength: >= 0. Defaults to 0.0.
        l2_regularization_strength: >= 0. Defaults to 0.0.
        l2_shrinkage_regularization_strength: >= 0; a magnitude penalty on the gradient.
        beta: added to the L2 term as `beta / (2 * lr)`. Defaults to 0.0.
        **kwargs: the base `Optimizer` arguments (weight_decay, clipnorm, ..., name).

    Example:
        >>> opt = keratron.optimizers.Ftrl(learning_rate=0.1, l1_regularization_strength=0.01)
        >>> w = keratron.Variable([1.0])
        >>> opt.apply([keratron.convert_to_tensor([2.0])], [w])
    """

    _update_is_graph_safe = True  # on CUDA its update makes no host read

    def __init__(
        self,
        learning_rate=0.001,
        learning_rate_power=-0.5,
        initial_accumulator_value=0.1,
        l1_regularization_strength=0.0,
        l2_regularization_strength=0.0,
        l2_shrinkage_regularization_strength=0.0,
        beta=0.0,
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
        for arg, value in (
            ("initial_accumulator_value", initial_accumulator_value),
            ("l1_regularization_strength", l1_regularization_strength),
            ("l2_regularization_strength", l2_regularization_strength),
            ("l2_shrinkage_regularization_strength", l2_shrinkage_regularization_strength),
        ):
            if value < 0.0:
                raise ValueError(f"Ftrl: `{arg}` must be positive or zero. Received: {arg}={value}")
        if learning_rate_power > 0.0:
            raise ValueError(
                "Ftrl: `learning_rate_power` must be negative or zero. "
                f"Received: learning_rate_power={learning_rate_power}"
            )
        self.learning_rate_power = learning_rate_power
        self.initial_accumulator_value = initial_accumulator_value
        self.l1_regularization_strength = l1_regularization_strength
        self.l2_regularization_strength = l2_regularization_strength
        self.l2_shrinkage_regularization_strength = l2_shrinkage_regularization_strength
        self.beta = beta

    def build(self, var_list):
        if self.built:
            return
        super().build(var_list)
        self._accumulators, self._linears = self.add_optimizer_variables(
            var_list,
            ["accumulator", "linear"],
            initializer=[float(self.initial_accumulator_value), "zeros"],
        )

    def _update_group(self, grads, variables, lr):
        idx = [self._get_variable_index(v) for v in variables]
        values = [v._value for v in variables]
        accum = [self._accumulators[i]._value for i in idx]
        linear = [self._linears[i]._value for i in idx]
        power = -float(self.learning_rate_power)
        l1 = float(self.l1_regularization_strength)

        grad_to_use = grads
        if self.l2_shrinkage_regularization_strength:
            grad_to_use = torch._foreach_add(
                grads, values, alpha=2 * self.l2_shrinkage_regularization_strength
            )
        new_accum = torch._foreach_addcmul(accum, grads, grads)
        new_pow = torch._foreach_pow(new_accum, power)
        sigma = torch._foreach_sub(new_pow, torch._foreach_pow(accum, power))
        torch._foreach_div_(sigma, lr)
        torch._foreach_mul_(sigma, values)
        torch._foreach_add_(linear, grad_to_use)
        torch._foreach_sub_(linear, sigma)

        # n_new**p / lr + 2 * (l2 + beta / (2 lr)), regrouped as (n_new**p + beta) / lr + 2 l2 so
        # that the only tensor operand is a divisor (no host read of lr).
        quadratic = torch._foreach_add(new_pow, float(self.beta))
        torch._foreach_div_(quadratic, lr)
        torch._foreach_add_(quadratic, 2.0 * float(self.l2_regularization_strength))
        clipped = torch._foreach_clamp_max(torch._foreach_clamp_min(linear, -l1), l1)
        torch._foreach_sub_(clipped, linear)
        torch._foreach_div_(clipped, quadratic)
        torch._foreach_copy_(values, clipped)
        torch._foreach_copy_(accum, new_accum)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "learning_rate_power": self.learning_rate_power,
                "initial_accumulator_value": self.initial_accumulator_value,
                "l1_regularization_strength": self.l1_regularization_strength,
                "l2_regularization_strength": self.l2_regularization_strength,
                "l2_shrinkage_regularization_strength": (self.l2_shrinkage_regularization_strength),
                "beta": self.beta,
            }
        )
        return config
