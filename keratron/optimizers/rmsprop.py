"""RMSprop: gradient steps scaled by a running RMS of the gradients."""

from __future__ import annotations

import torch

from keratron.optimizers.base_optimizer import Optimizer


class RMSprop(Optimizer):
    """RMSprop, as Keras 3 defines it (plain, not Nesterov, momentum).

    `v = rho * v + (1 - rho) * g**2`; `increment = lr * g / sqrt(v + epsilon)` (centered:
    `sqrt(v - mg**2 + epsilon)` with `mg = rho * mg + (1 - rho) * g`); then `w -= increment`,
    or with momentum `mom = momentum * mom + increment`, `w -= mom`.

    Args:
        learning_rate: a float, a `LearningRateSchedule`, or a callable. Defaults to 0.001.
        rho: decay of the squared-gradient average. Defaults to 0.9.
        momentum: momentum factor. Defaults to 0.0.
        epsilon: numerical-stability constant (inside the square root). Defaults to 1e-7.
        centered: normalise by the estimated variance instead of the second moment.
        **kwargs: the base `Optimizer` arguments (weight_decay, clipnorm, ..., name).

    Example:
        >>> opt = keratron.optimizers.RMSprop(learning_rate=0.1)
        >>> w = keratron.Variable(10.0)
        >>> _ = opt.minimize(lambda: (w**2) / 2.0, [w])
        >>> round(float(w.numpy()), 5)
        9.68377
    """

    _update_is_graph_safe = True  # on CUDA its update makes no host read

    def __init__(
        self,
        learning_rate=0.001,
        rho=0.9,
        momentum=0.0,
        epsilon=1e-7,
        centered=False,
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
        self.rho = rho
        self.momentum = momentum
        self.epsilon = epsilon
        self.centered = centered

    def build(self, var_list):
        if self.built:
            return
        super().build(var_list)
        self._velocities = self.add_optimizer_variables(var_list, "velocity")
        self._momentums = []
        if self.momentum > 0:
            self._momentums = self.add_optimizer_variables(var_list, "momentum")
        self._average_gradients = []
        if self.centered:
            self._average_gradients = self.add_optimizer_variables(var_list, "average_gradient")

    def _update_group(self, grads, variables, lr):
        idx = [self._get_variable_index(v) for v in variables]
        values = [v._value for v in variables]
        rho = self.rho
        vel = [self._velocities[i]._value for i in idx]
        torch._foreach_mul_(vel, rho)
        torch._foreach_addcmul_(vel, grads, grads, value=1 - rho)
        denom = torch._foreach_add(vel, self.epsilon)
        if self.centered:
            avg = [self._average_gradients[i]._value for i in idx]
            torch._foreach_lerp_(avg, grads, 1 - rho)
            torch._foreach_addcmul_(denom, avg, avg, value=-1)
        torch._foreach_sqrt_(denom)
        increments = torch._foreach_mul(grads, lr)
        torch._foreach_div_(increments, denom)
        if self.momentum > 0:
            mom = [self._momentums[i]._value for i in idx]
            torch._foreach_mul_(mom, self.momentum)
            torch._foreach_add_(mom, increments)
            torch._foreach_sub_(values, mom)
        else:
            torch._foreach_sub_(values, increments)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "rho": self.rho,
                "momentum": self.momentum,
                "epsilon": self.epsilon,
                "centered": self.centered,
            }
        )
        return config
