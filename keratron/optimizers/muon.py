"""Muon (Jordan et al., 2024; Liu et al., 2025): momentum SGD whose update of each 2-D weight
is orthogonalised by a Newton-Schulz iteration; other weights take AdamW steps."""

from __future__ import annotations

import math
import re

import numpy as np
import torch

from keratron.optimizers.base_optimizer import Optimizer

__all__ = ["Muon"]


class Muon(Optimizer):
    """Muon, as Keras 3 defines it.

    A variable takes AdamW steps (rate `learning_rate * adam_lr_ratio`, decay
    `adam_weight_decay`) when it is not 2-D, when its path names an embedding (with
    `exclude_embeddings`), or when its path matches a pattern of `exclude_layers`; every other
    variable takes Muon steps: `m = momentum * m + g`, the direction `g + momentum * m`
    (Nesterov) or `m`, orthogonalised by `ns_steps` quintic Newton-Schulz iterations with
    coefficients `(muon_a, muon_b, muon_c)`, scaled by `sqrt(max(rows, cols)) * rms_rate`.

    Args:
        learning_rate: a float, a `LearningRateSchedule`, or a callable. Defaults to 0.001.
        adam_beta_1, adam_beta_2, epsilon: AdamW's moment decays and denominator term.
        adam_weight_decay: weight decay of the AdamW variables.
        weight_decay: weight decay of the Muon variables.
        exclude_layers: regular expressions; variables whose path matches take AdamW steps.
        exclude_embeddings: embedding weights take AdamW steps.
        muon_a, muon_b, muon_c: the Newton-Schulz coefficients.
        adam_lr_ratio: the AdamW rate as a multiple of `learning_rate`.
        momentum: the Muon momentum.
        ns_steps: Newton-Schulz iterations.
        nesterov: use Nesterov momentum.
        rms_rate: the update's RMS scale (None: unscaled).
        **kwargs: the base `Optimizer` arguments (clipnorm, use_ema, ..., name).

    Example:
        >>> opt = keratron.optimizers.Muon(learning_rate=0.01, exclude_layers=["head"])
    """

    def __init__(
        self,
        learning_rate=0.001,
        adam_beta_1=0.9,
        adam_beta_2=0.999,
        adam_weight_decay=0.004,
        epsilon=1e-7,
        weight_decay=0.004,
        clipnorm=None,
        clipvalue=None,
        global_clipnorm=None,
        use_ema=False,
        ema_momentum=0.99,
        ema_overwrite_frequency=None,
        loss_scale_factor=None,
        gradient_accumulation_steps=None,
        name=None,
        exclude_layers=None,
        exclude_embeddings=True,
        muon_a=3.4445,
        muon_b=-4.7750,
        muon_c=2.0315,
        adam_lr_ratio=1,
        momentum=0.95,
        ns_steps=5,
        nesterov=True,
        rms_rate=0.2,
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
        self.adam_beta_1 = adam_beta_1
        self.adam_beta_2 = adam_beta_2
        self.epsilon = epsilon
        self.muon_a = muon_a
        self.muon_b = muon_b
        self.muon_c = muon_c
        self.adam_lr_ratio = adam_lr_ratio
        self.momentum = momentum
        self.ns_steps = ns_steps
        self.nesterov = nesterov
        self.exclude_embeddings = exclude_embeddings
        self.exclude_layers = exclude_layers or []
        self.adam_weight_decay = adam_weight_decay
        self.rms_rate = rms_rate

    def _should_use_adamw(self, variable) -> bool:
        if len(variable.shape) != 2:
            return True
        path = getattr(variable, "path", variable.name)
        if self.exclude_embeddings and "embedding" in path.lower():
            return True
        return any(re.search(pattern, path) for pattern in self.exclude_layers)

    def build(self, var_list):
        if self.built:
            return
        super().build(var_list)
        self.momentums = [None] * len(var_list)
        self.adam_velocities = [None] * len(var_list)
        for var in var_list:
            if getattr(var, "overwrite_with_gradient", False):
                continue
            i = self._get_variable_index(var)
            self.momentums[i] = self.add_variable_from_reference(var, name="momentum")
            if self._should_use_adamw(var):
                self.adam_velocities[i] = self.add_variable_from_reference(var, name="velocity")

    def _apply_weight_decay(self, variables, lr):
        # Each kind of variable decays by its own rate, at the unscaled learning rate.
        for variable in variables:
            if not self._use_weight_decay(variable):
                continue
            decay = (
                self.adam_weight_decay if self._should_use_adamw(variable) else (self.weight_decay)
            )
            if decay is not None:
                value = variable._value
                value.sub_(value * float(decay) * lr.to(device=value.device, dtype=value.dtype))

    def _update_group(self, grads, variables, lr):
        for g, var in zip(grads, variables):
            i = self._get_variable_index(var)
            if self.adam_velocities[i] is not None:
                self._adamw_step(g, var, lr * self.adam_lr_ratio, i)
            else:
                self._muon_step(g, var, lr, i)

    def _adamw_step(self, g, var, lr, i):
        w, m, v = var._value, self.momentums[i]._value, self.adam_velocities[i]._value
        f = np.float32 if w.dtype == torch.float32 else np.float64
        t = (self._step_count(w.device) + 1).to(w.dtype)
        beta_1_power = torch.pow(torch.full_like(t, float(f(self.adam_beta_1))), t)
        beta_2_power = torch.pow(torch.full_like(t, float(f(self.adam_beta_2))), t)
        alpha = lr.to(w.dtype) * torch.sqrt(1 - beta_2_power) / (1 - beta_1_power)
        m.add_((g - m) * (1 - self.adam_beta_1))
        v.add_((g * g - v) * (1 - self.adam_beta_2))
        w.sub_(m * alpha / (torch.sqrt(v) + self.epsilon))

    def _muon_step(self, g, var, lr, i):
        w, m = var._value, self.momentums[i]._value
        m.add_(g + m * (self.momentum - 1))
        direction = g + self.momentum * m if self.nesterov else m
        update = self.zeropower_via_newtonschulz5(direction, self.ns_steps) * lr.to(w.dtype)
        if self.rms_rate is not None:
            update = update * math.sqrt(max(update.shape[0], update.shape[1])) * self.rms_rate
        w.sub_(update)

    def zeropower_via_newtonschulz5(self, x: torch.Tensor, steps: int) -> torch.Tensor:
        """An approximate orthogonalisation `U S' V^T` of `x` (of SVD `U S V^T`) by the quintic
        Newton-Schulz iteration, on the last two axes."""
        if x.ndim < 2:
            raise ValueError(
                "Muon: expected gradient or momentum to have at least 2 dimensions. Received: "
                f"shape={tuple(x.shape)}"
            )
        a, b, c = self.muon_a, self.muon_b, self.muon_c
        tall = x.shape[-2] > x.shape[-1]
        if tall:
            x = x.transpose(-2, -1)
        x = x / (torch.linalg.matrix_norm(x, keepdim=True) + 1e-7)
        for _ in range(steps):
            gram = x @ x.transpose(-2, -1)
            x = a * x + (b * gram + c * gram @ gram) @ x
        return x.transpose(-2, -1) if tall else x

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "adam_beta_1": self.adam_beta_1,
                "adam_beta_2": self.adam_beta_2,
                "epsilon": self.epsilon,
                "exclude_layers": self.exclude_layers,
                "muon_a": self.muon_a,
                "muon_b": self.muon_b,
                "muon_c": self.muon_c,
                "adam_lr_ratio": self.adam_lr_ratio,
                "momentum": self.momentum,
                "ns_steps": self.ns_steps,
                "nesterov": self.nesterov,
                "exclude_embeddings": self.exclude_embeddings,
                "adam_weight_decay": self.adam_weight_decay,
                "rms_rate": self.rms_rate,
            }
        )
        return config
