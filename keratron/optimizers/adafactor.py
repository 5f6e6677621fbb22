"""Adafactor: second moments factored into row and column means for rank >= 2 variables."""

from __future__ import annotations

import torch

from keratron.optimizers.base_optimizer import Optimizer


class Adafactor(Optimizer):
    """Adafactor (Shazeer & Stern, 2018), as Keras 3 defines it.

    With `t = iterations + 1`, `rho = min(lr, 1 / sqrt(t))`, `beta_2_t = 1 - t**beta_2_decay`
    and `g2 = g**2 + epsilon_1`: a variable of rank >= 2 keeps `r` (the mean of `g2` over the
    last axis) and `c` (over the second-to-last axis) as moving averages and uses
    `v = r / mean(r) (outer) c`; a smaller variable keeps `v` itself. Then `u = g / sqrt(v)`
    is clipped to `u / max(1, rms(u) / clip_threshold)` and
    `w -= max(epsilon_2, rms(w)) * rho * u`.

    Args:
        learning_rate: a float, a `LearningRateSchedule`, or a callable. Defaults to 0.001.
        beta_2_decay: exponent of the second-moment decay schedule. Defaults to -0.8.
        epsilon_1: added to squared gradients. Defaults to 1e-30.
        epsilon_2: lower bound on the variable's RMS in the step size. Defaults to 1e-3.
        clip_threshold: bound on the RMS of the unscaled update. Defaults to 1.0.
        relative_step: cap a constant learning rate at `1 / sqrt(t)`. Defaults to True.
        **kwargs: the base `Optimizer` arguments (weight_decay, clipnorm, ..., name).

    Example:
        >>> opt = keratron.optimizers.Adafactor(learning_rate=0.5)
        >>> w = keratron.Variable([[1.0, 2.0], [3.0, 4.0]])
        >>> opt.apply([keratron.ops.ones((2, 2))], [w])
        >>> w.shape
        (2, 2)
    """

    # Not marked `_update_is_graph_safe`: the update is written without host reads, but it
    # has not been run under CUDA graph capture yet.

    def __init__(
        self,
        learning_rate=0.001,
        beta_2_decay=-0.8,
        epsilon_1=1e-30,
        epsilon_2=1e-3,
        clip_threshold=1.0,
        relative_step=True,
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
        self.beta_2_decay = beta_2_decay
        self.epsilon_1 = epsilon_1
        self.epsilon_2 = epsilon_2
        self.clip_threshold = clip_threshold
        self.relative_step = relative_step

    def build(self, var_list):
        if self.built:
            return
        super().build(var_list)
        self._r, self._c, self._v = [], [], []
        for var in var_list:
            shape = tuple(var.shape)
            overwrite = getattr(var, "overwrite_with_gradient", False)
            if len(shape) < 2:
                # Keras keeps 0-d placeholders for unfactored variables, so the slot count
                # (and `set_weights` order) matches its optimizers.
                self._r.append(self.add_variable((), dtype=var.dtype, name=var.name))
                self._c.append(self.add_variable((), dtype=var.dtype, name=var.name))
            elif overwrite:
                self._r.append(None)
                self._c.append(None)
            else:
                # Always factor the last two axes.
                self._r.append(self.add_variable(shape[:-1], dtype=var.dtype, name=var.name))
                self._c.append(
                    self.add_variable(shape[:-2] + shape[-1:], dtype=var.dtype, name=var.name)
                )
            self._v.append(
                None if overwrite else self.add_variable_from_reference(var, name="velocity")
            )

    def _update_group(self, grads, variables, lr):
        idx = [self._get_variable_index(v) for v in variables]
        values = [v._value for v in variables]
        t = (self._step_count(lr.device) + 1).to(lr.dtype)
        # Keras caps a constant rate by relative_step, then caps it again unconditionally:
        # the step size is min(lr, 1 / sqrt(t)) either way.
        rho = torch.minimum(lr, torch.rsqrt(t))
        beta = 1 - torch.pow(t, self.beta_2_decay)

        # alpha = max(epsilon_2, rms(w)) * rho, from the variables before this step.
        inv_sqrt_n = [max(x.numel(), 1) ** -0.5 for x in values]
        rms_w = torch.stack(torch._foreach_mul(torch._foreach_norm(values), inv_sqrt_n))
        alpha = torch.clamp_min(rms_w, self.epsilon_2) * rho

        g2 = torch._foreach_mul(grads, grads)
        torch._foreach_add_(g2, self.epsilon_1)
        small = [k for k, x in enumerate(values) if x.dim() < 2]
        if small:
            v = [self._v[idx[k]]._value for k in small]
            torch._foreach_lerp_(v, [g2[k] for k in small], 1 - beta)
        for k, x in enumerate(values):
            if x.dim() < 2:
                continue
            i = idx[k]
            r, c = self._r[i]._value, self._c[i]._value
            r.lerp_(g2[k].mean(dim=-1), 1 - beta)
            c.lerp_(g2[k].mean(dim=-2), 1 - beta)
            row = r / r.mean(dim=-1, keepdim=True)
            torch.mul(row.unsqueeze(-1), c.unsqueeze(-2), out=self._v[i]._value)

        u = torch._foreach_div(grads, torch._foreach_sqrt([self._v[i]._value for i in idx]))
        rms_u = torch.stack(torch._foreach_mul(torch._foreach_norm(u), inv_sqrt_n))
        scale = -alpha / torch.clamp_min(rms_u / self.clip_threshold, 1.0)
        torch._foreach_mul_(u, torch.unbind(scale))
        torch._foreach_add_(values, u)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "beta_2_decay": self.beta_2_decay,
                "epsilon_1": self.epsilon_1,
                "epsilon_2": self.epsilon_2,
                "clip_threshold": self.clip_threshold,
                "relative_step": self.relative_step,
            }
        )
        return config
