"""Lamb: Adam's direction scaled per variable by the trust ratio ||w|| / ||update||."""

from __future__ import annotations

import torch

from keratron.optimizers.base_optimizer import Optimizer


class Lamb(Optimizer):
    """Lamb (You et al., 2019), as Keras 3 defines it.

    With `t = iterations + 1`: `m = beta_1 * m + (1 - beta_1) * g`,
    `v = beta_2 * v + (1 - beta_2) * g**2`,
    `u = (m / (1 - beta_1**t)) / (sqrt(v / (1 - beta_2**t)) + epsilon)`, and
    `w -= r * lr * u` where the trust ratio `r = ||w|| / ||u||` per variable (1 when either
    norm is 0).

    Args:
        learning_rate: a float, a `LearningRateSchedule`, or a callable. Defaults to 0.001.
        beta_1: decay of the first-moment estimate. Defaults to 0.9.
        beta_2: decay of the second-moment estimate. Defaults to 0.999.
        epsilon: numerical-stability constant. Defaults to 1e-7.
        **kwargs: the base `Optimizer` arguments (weight_decay, clipnorm, ..., name).

    Example:
        >>> opt = keratron.optimizers.Lamb(learning_rate=0.1)
        >>> w = keratron.Variable([3.0, 4.0])
        >>> opt.apply([keratron.convert_to_tensor([1.0, 1.0])], [w])
        >>> [round(float(x), 3) for x in w.numpy()]
        [2.646, 3.646]
    """

    # Not marked `_update_is_graph_safe`: the update is written without host reads, but it
    # has not been run under CUDA graph capture yet.

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
        self._momentums, self._velocities = self.add_optimizer_variables(
            var_list, ["momentum", "velocity"]
        )

    def _update_group(self, grads, variables, lr):
        idx = [self._get_variable_index(v) for v in variables]
        values = [v._value for v in variables]
        m = [self._momentums[i]._value for i in idx]
        v = [self._velocities[i]._value for i in idx]
        # The step and bias corrections stay on the device, at the variables' precision.
        t = (self._step_count(lr.device) + 1).to(lr.dtype)
        scalar = dict(dtype=lr.dtype, device=lr.device)
        c1 = 1 - torch.pow(torch.full((), self.beta_1, **scalar), t)
        c2 = 1 - torch.pow(torch.full((), self.beta_2, **scalar), t)

        torch._foreach_lerp_(m, grads, 1 - self.beta_1)
        torch._foreach_mul_(v, self.beta_2)
        torch._foreach_addcmul_(v, grads, grads, value=1 - self.beta_2)
        denom = torch._foreach_div(v, c2)
        torch._foreach_sqrt_(denom)
        torch._foreach_add_(denom, self.epsilon)
        update = torch._foreach_div(m, c1)
        torch._foreach_div_(update, denom)

        # One trust ratio per variable, computed for the whole group at once.
        w_norm = torch.stack(torch._foreach_norm(values))
        u_norm = torch.stack(torch._foreach_norm(update))
        ratio = torch.where((w_norm > 0) & (u_norm > 0), w_norm / u_norm, 1.0)
        step = torch.unbind(ratio * -lr)
        torch._foreach_mul_(update, step)
        torch._foreach_add_(values, update)

    def get_config(self):
        config = super().get_config()
        config.update({"beta_1": self.beta_1, "beta_2": self.beta_2, "epsilon": self.epsilon})
        return config
