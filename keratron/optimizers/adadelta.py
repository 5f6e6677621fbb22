"""Adadelta: step sizes from running averages of squared gradients and squared updates."""

from __future__ import annotations

import torch

from keratron.optimizers.base_optimizer import Optimizer


class Adadelta(Optimizer):
    """Adadelta, as Keras 3 defines it (with a learning rate, 0.001 by default).

    `Eg = rho * Eg + (1 - rho) * g**2`;
    `delta = -sqrt(Edx + epsilon) * g / sqrt(Eg + epsilon)`;
    `Edx = rho * Edx + (1 - rho) * delta**2`; `w += lr * delta`.

    Args:
        learning_rate: a float, a `LearningRateSchedule`, or a callable. Defaults to 0.001.
        rho: the decay rate. Defaults to 0.95.
        epsilon: numerical-stability constant. Defaults to 1e-7.
        **kwargs: the base `Optimizer` arguments (weight_decay, clipnorm, ..., name).

    Example:
        >>> opt = keratron.optimizers.Adadelta(learning_rate=1.0)
        >>> w = keratron.Variable([1.0])
        >>> opt.apply([keratron.convert_to_tensor([1.0])], [w])
    """

    _update_is_graph_safe = True  # on CUDA its update makes no host read

    def __init__(
        self,
        learning_rate=0.001,
        rho=0.95,
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
        self.rho = rho
        self.epsilon = epsilon

    def build(self, var_list):
        if self.built:
            return
        super().build(var_list)
        self._accumulated_grads, self._accumulated_delta_vars = self.add_optimizer_variables(
            var_list, ["accumulated_grad", "accumulated_delta_var"]
        )

    def _update_group(self, grads, variables, lr):
        idx = [self._get_variable_index(v) for v in variables]
        values = [v._value for v in variables]
        acc_g = [self._accumulated_grads[i]._value for i in idx]
        acc_dx = [self._accumulated_delta_vars[i]._value for i in idx]
        rho = self.rho
        torch._foreach_mul_(acc_g, rho)
        torch._foreach_addcmul_(acc_g, grads, grads, value=1 - rho)
        rms_dx = torch._foreach_sqrt(torch._foreach_add(acc_dx, self.epsilon))
        rms_g = torch._foreach_sqrt(torch._foreach_add(acc_g, self.epsilon))
        delta = torch._foreach_mul(rms_dx, grads)
        torch._foreach_div_(delta, rms_g)
        torch._foreach_neg_(delta)
        torch._foreach_mul_(acc_dx, rho)
        torch._foreach_addcmul_(acc_dx, delta, delta, value=1 - rho)
        torch._foreach_mul_(delta, lr)
        torch._foreach_add_(values, delta)

    def get_config(self):
        config = super().get_config()
        config.update({"rho": self.rho, "epsilon": self.epsilon})
        return config
