"""Adam and AdamW (Adam with decoupled weight decay)."""

from __future__ import annotations

import numpy as np
import torch

from keratron.optimizers.base_optimizer import Optimizer

# Dtypes torch's fused CPU Adam kernel takes (half precision goes through the foreach ops).
_FUSED_DTYPES = (torch.float32, torch.float64)
# A step count at which beta**step underflows to 0 in float64 for any beta < 1 (0.9999999 **
# 2**40 = exp(-1.1e5)): torch's fused kernel then applies no bias correction (see
# Adam._fused_update). float32 holds 2**40 exactly; the kernel only reads it.
_UNCORRECTED_STEP = torch.tensor(2.0**40)


# The same step on each device the fused kernel runs on elsewhere (CUDA's reads it from
# device memory as float32), made outside any CUDA graph capture.
_UNCORRECTED_STEPS: dict = {}


def _uncorrected_step_on(device: torch.device):
    """`_UNCORRECTED_STEP` on `device`, or None while a CUDA graph captures and it has not
    been made there yet (a fill recorded by the capture would not have run)."""
    step = _UNCORRECTED_STEPS.get(device)
    if step is None and not (device.type == "cuda" and torch.cuda.is_current_stream_capturing()):
        step = _UNCORRECTED_STEPS[device] = _UNCORRECTED_STEP.to(device, torch.float32)
    return step


def _uncorrected(beta) -> bool:
    """Whether beta**_UNCORRECTED_STEP is 0 (every beta not within ~1e-11 of 1)."""
    return float(beta) ** 2.0**40 == 0.0


class Adam(Optimizer):
    """Adam, as Keras 3 defines it (epsilon is added to `sqrt(v)`, "epsilon hat").

    With `t = iterations + 1`:
    `m = beta_1 * m + (1 - beta_1) * g`, `v = beta_2 * v + (1 - beta_2) * g**2`,
    `w -= lr * sqrt(1 - beta_2**t) / (1 - beta_1**t) * m / (sqrt(v) + epsilon)`;
    with `amsgrad`, `v` in the last formula is the running maximum of `v`.

    Args:
        learning_rate: a float, a `LearningRateSchedule`, or a callable. Defaults to 0.001.
        beta_1: decay of the first-moment estimate. Defaults to 0.9.
        beta_2: decay of the second-moment estimate. Defaults to 0.999.
        epsilon: numerical-stability constant. Defaults to 1e-7.
        amsgrad: use the AMSGrad variant.
        **kwargs: the base `Optimizer` arguments (weight_decay, clipnorm, ..., name).

    Example:
        >>> opt = keratron.optimizers.Adam(learning_rate=0.1)
        >>> w = keratron.Variable([1.0])
        >>> opt.apply([keratron.convert_to_tensor([5.0])], [w])
        >>> round(float(w.numpy()[0]), 4)
        0.9
    """

    _update_is_graph_safe = True  # on CUDA its update makes no host read

    def __init__(
        self,
        learning_rate=0.001,
        beta_1=0.9,
        beta_2=0.999,
        epsilon=1e-7,
        amsgrad=False,
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
        self.amsgrad = amsgrad

    def build(self, var_list):
        if self.built:
            return
        super().build(var_list)
        self._momentums, self._velocities = self.add_optimizer_variables(
            var_list, ["momentum", "velocity"]
        )
        if self.amsgrad:
            self._velocity_hats = self.add_optimizer_variables(var_list, "velocity_hat")

    def _update_group(self, grads, variables, lr):
        idx = [self._get_variable_index(v) for v in variables]
        values = [v._value for v in variables]
        m = [self._momentums[i]._value for i in idx]
        v = [self._velocities[i]._value for i in idx]
        if lr.device.type == "cpu":
            # On the CPU, reading the step and rate is free: the scalar algebra in Python
            # costs less than the half-dozen tiny tensor ops it would take otherwise.
            # numpy scalars of the rate's dtype round like the tensor ops they replace
            # (1 - beta_2**t cancels badly, so float64 here would drift from Keras).
            f = np.float32 if lr.dtype == torch.float32 else np.float64
            t = f(float(self._step_count(lr.device)) + 1.0)
            one = f(1.0)
            alpha = float(
                f(float(lr)) * np.sqrt(one - f(self.beta_2) ** t) / (one - f(self.beta_1) ** t)
            )
            step = _UNCORRECTED_STEP if values[0].dtype in _FUSED_DTYPES else None
        else:
            # Elsewhere the scalars stay on the device, so a step never waits on the host.
            # (torch.full fills on the device; torch.tensor would copy from the host and wait.)
            t = (self._step_count(lr.device) + 1).to(lr.dtype)
            scalar = dict(dtype=lr.dtype, device=lr.device)
            beta_1_power = torch.pow(torch.full((), self.beta_1, **scalar), t)
            beta_2_power = torch.pow(torch.full((), self.beta_2, **scalar), t)
            alpha = lr * torch.sqrt(1 - beta_2_power) / (1 - beta_1_power)
            # On CUDA the fused kernel reads alpha and the step from device memory: one pass
            # over each variable instead of seven foreach kernels, and nothing read on the host.
            step = (
                _uncorrected_step_on(values[0].device)
                if values[0].is_cuda
                and values[0].dtype == torch.float32 == alpha.dtype
                and all(g.dtype == torch.float32 for g in grads)
                and alpha.device == values[0].device
                else None
            )
        if (
            step is not None
            and all(x.is_contiguous() for x in values)
            and _uncorrected(self.beta_1)
            and _uncorrected(self.beta_2)
        ):
            # The fused kernel walks every tensor as flat memory: gradients that are views in
            # another layout (a transposed kernel gradient) are made dense.
            grads = [g if g.is_contiguous() else g.contiguous() for g in grads]
            self._fused_update(values, grads, m, v, idx, alpha, step)
            return

        torch._foreach_lerp_(m, grads, 1 - self.beta_1)
        torch._foreach_mul_(v, self.beta_2)
        torch._foreach_addcmul_(v, grads, grads, value=1 - self.beta_2)
        if self.amsgrad:
            v_hat = [self._velocity_hats[i]._value for i in idx]
            torch._foreach_maximum_(v_hat, v)
            v = v_hat
        # w -= m * alpha / (sqrt(v) + eps), with alpha folded into the denominator.
        denom = torch._foreach_sqrt(v)
        torch._foreach_add_(denom, self.epsilon)
        torch._foreach_div_(denom, -alpha)
        torch._foreach_addcdiv_(values, m, denom)

    def _fused_update(self, values, grads, m, v, idx, alpha, step=_UNCORRECTED_STEP):
        """One pass over each variable in torch's fused Adam kernel (CPU, or CUDA with alpha a
        float32 tensor on the device and `step` `_UNCORRECTED_STEP` there).

        The kernel computes lr / c1 * m / (sqrt(v) / sqrt(c2) + eps) with its own bias
        corrections c1 = 1 - b1^step, c2 = 1 - b2^step (float64) from a step tensor. Given
        `_UNCORRECTED_STEP`, a step at which b^step is 0 in float64 for every b < 1, both
        corrections are exactly 1 and the kernel computes Keras's update, alpha * m / (sqrt(v)
        + eps), with Keras's alpha (computed at the variables' precision by the caller); the
        moments move by 1 - beta taken in float64, as Keras's do. The step tensor is shared and
        never written, so a step allocates nothing for it.
        """
        torch._fused_adam_(
            values,
            grads,
            m,
            v,
            [self._velocity_hats[i]._value for i in idx] if self.amsgrad else [],
            [step] * len(values),
            lr=alpha,
            beta1=float(self.beta_1),
            beta2=float(self.beta_2),
            weight_decay=0.0,
            eps=float(self.epsilon),
            amsgrad=self.amsgrad,
            maximize=False,
        )

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "beta_1": self.beta_1,
                "beta_2": self.beta_2,
                "epsilon": self.epsilon,
                "amsgrad": self.amsgrad,
            }
        )
        return config


class AdamW(Adam):
    """Adam with decoupled weight decay (Loshchilov & Hutter): before each Adam step,
    `w -= w * weight_decay * learning_rate`.

    Args:
        learning_rate: a float, a `LearningRateSchedule`, or a callable. Defaults to 0.001.
        weight_decay: the decay rate; required. Defaults to 0.004.
        beta_1: decay of the first-moment estimate. Defaults to 0.9.
        beta_2: decay of the second-moment estimate. Defaults to 0.999.
        epsilon: numerical-stability constant. Defaults to 1e-7.
        amsgrad: use the AMSGrad variant.
        **kwargs: the base `Optimizer` arguments (clipnorm, ..., name).

    Example:
        >>> opt = keratron.optimizers.AdamW(learning_rate=0.01, weight_decay=0.1)
        >>> opt.exclude_from_weight_decay(var_names=["bias"])
    """

    _update_is_graph_safe = True  # on CUDA its update makes no host read

    def __init__(
        self,
        learning_rate=0.001,
        weight_decay=0.004,
        beta_1=0.9,
        beta_2=0.999,
        epsilon=1e-7,
        amsgrad=False,
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
            beta_1=beta_1,
            beta_2=beta_2,
            epsilon=epsilon,
            amsgrad=amsgrad,
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
        if self.weight_decay is None:
            raise ValueError("AdamW: argument `weight_decay` must be a float. Received: None")
