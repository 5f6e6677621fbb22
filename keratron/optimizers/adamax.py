"""Adamax: Adam with the infinity norm in place of the second moment."""

from __future__ import annotations

import torch

from keratron.optimizers.base_optimizer import Optimizer


class Adamax(Optimizer):
    """Adamax, as Keras 3 defines it.

    With `t = iterations + 1`: `m = beta_1 * m + (1 - beta_1) * g`,
    `u = max(beta_2 * u, |g|)`, `w -= lr * m / ((1 - beta_1**t) * (u + epsilon))`.

    Args:
        learning_rate: a float, a `LearningRateSchedule`, or a callable. Defaults to 0.001.
        beta_1: decay of the first-moment estimate. Defaults to 0.9.
        beta_2: decay of the weighted infinity norm. Defaults to 0.999.
        epsilon: numerical-stability constant. Defaults to 1e-7.
        **kwargs: the base `Optimizer` arguments (weight_decay, clipnorm, ..., name).

    Example:
        >>> opt = keratron.optimizers.Adamax(learning_rate=0.1)
        >>> w = keratron.Variable([1.0])
        >>> opt.apply([keratron.convert_to_tensor([2.0])], [w])
    """

    _update_is_graph_safe = True  # on CUDA its update makes no host read

    def __init__(
        self,
        learning_rate=0.001,
        beta_1=0.9,
        beta_2=0.999,
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
        self.beta_1 = beta_1
        self.beta_2 = beta_2
        self.epsilon = epsilon

    def build(self, var_list):
        if self.built:
            return
        super().build(var_list)
        self._m, self._u = self.add_optimizer_variables(var_list, ["momentum", "norm"])

    def _update_group(self, grads, variables, lr):
        idx = [self._get_variable_index(v) for v in variables]
        values = [v._value for v in variables]
        m = [self._m[i]._value for i in idx]
        u = [self._u[i]._value for i in idx]
        t = (self._step_count(lr.device) + 1).to(lr.dtype)
        beta_1_power = torch.pow(torch.full((), self.beta_1, dtype=lr.dtype, device=lr.device), t)
        torch._foreach_lerp_(m, grads, 1 - self.beta_1)
        torch._foreach_mul_(u, self.beta_2)
        torch._foreach_maximum_(u, torch._foreach_abs(grads))
        denom = torch._foreach_add(u, self.epsilon)
        torch._foreach_mul_(denom, (1 - beta_1_power) / -lr)
        torch._foreach_addcdiv_(values, m, denom)

    def get_config(self):
        config = super().get_config()
        config.update({"beta_1": self.beta_1, "beta_2": self.beta_2, "epsilon": self.epsilon})
        return config
