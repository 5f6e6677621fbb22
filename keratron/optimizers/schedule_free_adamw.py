"""Schedule-Free AdamW (Defazio et al., 2024): Adam steps on a `z` sequence, the variables
held at an interpolation of `z` and a running average of it, so no learning-rate schedule is
needed."""

from __future__ import annotations

import numpy as np
import torch

from keratron.optimizers.base_optimizer import Optimizer

__all__ = ["ScheduleFreeAdamW"]


class ScheduleFreeAdamW(Optimizer):
    """Schedule-Free AdamW, as Keras 3 defines it.

    Each variable `y` is stored; its slot `momentum` holds the `z` sequence (starting at the
    variable's value) and `velocity` Adam's second moment. With `t` the step (from 1) and
    `lr` warmed up linearly over `warmup_steps`:
    `v = beta_2 * v + (1 - beta_2) * g^2`, `z -= lr * g / (sqrt(v / (1 - beta_2^t)) + eps)`,
    `x = (y - (1 - beta_1) * z_old) / beta_1`, `x = (1 - 1/t) * x + z / t`,
    `y = (1 - beta_1) * z + beta_1 * x`.

    This is the algorithm, and Keras's result on its JAX backend. Keras on torch and
    TensorFlow reads `z_old` after `z` was updated (the read aliases the slot it then updates
    in place), so their results drift from it after the first step.

    Args:
        learning_rate: a float, a `LearningRateSchedule`, or a callable. Defaults to 0.0025.
        beta_1: interpolation between `z` and its average. Defaults to 0.9.
        beta_2: decay of the second moment. Defaults to 0.999.
        epsilon: added to the denominator. Defaults to 1e-8.
        warmup_steps: steps over which the rate grows linearly to `learning_rate`.
        **kwargs: the base `Optimizer` arguments (weight_decay, clipnorm, ..., name).

    Example:
        >>> opt = keratron.optimizers.ScheduleFreeAdamW(learning_rate=0.1)
        >>> w = keratron.Variable([1.0])
        >>> opt.apply([keratron.convert_to_tensor([2.0])], [w])
        >>> w.numpy().round(4)
        array([0.9], dtype=float32)
    """

    def __init__(
        self,
        learning_rate=0.0025,
        beta_1=0.9,
        beta_2=0.999,
        epsilon=1e-8,
        warmup_steps=0,
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
        self.warmup_steps = warmup_steps

    def build(self, var_list):
        if self.built:
            return
        super().build(var_list)
        self._momentums, self._velocities = self.add_optimizer_variables(
            var_list, ["momentum", "velocity"]
        )
        for momentum, var in zip(self._momentums, var_list):
            if momentum is not None:
                momentum.assign(var)  # z starts at the variable's value

    def _update_group(self, grads, variables, lr):
        idx = [self._get_variable_index(v) for v in variables]
        values = [v._value for v in variables]
        z = [self._momentums[i]._value for i in idx]
        v = [self._velocities[i]._value for i in idx]
        t = (self._step_count(lr.device) + 1).to(lr.dtype)
        if self.warmup_steps > 0:
            lr = lr * torch.clamp(t / float(self.warmup_steps), max=1.0)
        # Keras takes the betas at the variables' precision (float32): 1 - beta_1 rounds there.
        f = np.float32 if lr.dtype == torch.float32 else np.float64
        beta_1 = float(f(self.beta_1))
        one_minus_beta_1, one_minus_beta_2 = (
            float(f(1) - f(self.beta_1)),
            float(f(1) - f(self.beta_2)),
        )
        bias_correction_2 = 1 - torch.pow(torch.full_like(t, self.beta_2), t)
        z_old = [zi.clone() for zi in z]
        # v += (g^2 - v) * (1 - beta_2)
        delta = torch._foreach_sub(torch._foreach_mul(grads, grads), v)
        torch._foreach_add_(v, torch._foreach_mul(delta, one_minus_beta_2))
        denom = torch._foreach_sqrt(torch._foreach_div(v, bias_correction_2))
        torch._foreach_add_(denom, self.epsilon)
        torch._foreach_sub_(z, torch._foreach_div(torch._foreach_mul(grads, lr), denom))
        weight = 1.0 / t
        # x_old from y_old and z_old; x_new = (1 - weight) x_old + weight z; y = lerp(z, x, b1)
        x = torch._foreach_div(
            torch._foreach_sub(values, torch._foreach_mul(z_old, one_minus_beta_1)), beta_1
        )
        x = torch._foreach_add(torch._foreach_mul(x, 1 - weight), torch._foreach_mul(z, weight))
        y = torch._foreach_add(
            torch._foreach_mul(z, one_minus_beta_1), torch._foreach_mul(x, beta_1)
        )
        torch._foreach_copy_(values, y)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "beta_1": self.beta_1,
                "beta_2": self.beta_2,
                "epsilon": self.epsilon,
                "warmup_steps": self.warmup_steps,
            }
        )
        return config
