"""Nadam: Adam with Nesterov momentum (Dozat, 2015), with Keras's momentum schedule."""

from __future__ import annotations

import torch

from keratron import config
from keratron.autodiff.dtypes import standardize_dtype, to_torch_dtype
from keratron.autodiff.tensor import Variable
from keratron.optimizers.base_optimizer import Optimizer


class Nadam(Optimizer):
    """Nadam, as Keras 3 defines it.

    With `t = iterations + 1`, `u_t = beta_1 * (1 - 0.5 * 0.96**t)` and `prod_t` the running
    product of the `u_t`: `m` and `v` as in Adam, then
    `m_hat = u_{t+1} * m / (1 - prod_t * u_{t+1}) + (1 - u_t) * g / (1 - prod_t)`,
    `v_hat = v / (1 - beta_2**t)`, `w -= lr * m_hat / (sqrt(v_hat) + epsilon)`.

    Args:
        learning_rate: a float, a `LearningRateSchedule`, or a callable. Defaults to 0.001.
        beta_1: decay of the first-moment estimate. Defaults to 0.9.
        beta_2: decay of the second-moment estimate. Defaults to 0.999.
        epsilon: numerical-stability constant. Defaults to 1e-7.
        **kwargs: the base `Optimizer` arguments (weight_decay, clipnorm, ..., name).

    Example:
        >>> opt = keratron.optimizers.Nadam(learning_rate=0.1)
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
        var_list = list(var_list)
        dtype = var_list[0]._value.dtype if var_list else to_torch_dtype(config.floatx())
        super().build(var_list)
        self._momentums, self._velocities = self.add_optimizer_variables(
            var_list, ["momentum", "velocity"]
        )
        # The running product of the momentum schedule; Keras names it plainly "variable".
        self._u_product = Variable(
            torch.ones((), dtype=dtype, device=config.default_device()),
            dtype=standardize_dtype(dtype),
            trainable=False,
            name="variable",
        )
        self._u_product.path = f"{self.name}/variable"
        self._variables.append(self._u_product)

    def _backend_update_step(self, grads, variables, lr):
        # The schedule product advances once per step, before the per-group updates read it.
        prod = self._u_product._value
        t = (self._step_count(prod.device) + 1).to(prod.dtype)
        beta_1 = torch.full((), self.beta_1, dtype=prod.dtype, device=prod.device)
        decay = torch.full((), 0.96, dtype=prod.dtype, device=prod.device)
        self._u_t = beta_1 * (1.0 - 0.5 * torch.pow(decay, t))
        self._u_t_1 = beta_1 * (1.0 - 0.5 * torch.pow(decay, t + 1))
        prod.mul_(self._u_t)
        super()._backend_update_step(grads, variables, lr)

    def _update_group(self, grads, variables, lr):
        idx = [self._get_variable_index(v) for v in variables]
        values = [v._value for v in variables]
        m = [self._momentums[i]._value for i in idx]
        v = [self._velocities[i]._value for i in idx]
        dt, dev = lr.dtype, lr.device
        u_t = self._u_t.to(device=dev, dtype=dt)
        u_t_1 = self._u_t_1.to(device=dev, dtype=dt)
        prod_t = self._u_product._value.to(device=dev, dtype=dt)
        t = (self._step_count(dev) + 1).to(dt)
        beta_2_power = torch.pow(torch.full((), self.beta_2, dtype=dt, device=dev), t)

        torch._foreach_lerp_(m, grads, 1 - self.beta_1)
        torch._foreach_mul_(v, self.beta_2)
        torch._foreach_addcmul_(v, grads, grads, value=1 - self.beta_2)
        m_hat = torch._foreach_mul(m, u_t_1 / (1 - prod_t * u_t_1))
        torch._foreach_add_(m_hat, torch._foreach_mul(grads, (1 - u_t) / (1 - prod_t)))
        # sqrt(v / (1 - beta_2**t)) + eps, with -lr folded in so addcdiv does the subtraction.
        denom = torch._foreach_div(v, 1 - beta_2_power)
        torch._foreach_sqrt_(denom)
        torch._foreach_add_(denom, self.epsilon)
        torch._foreach_div_(denom, -lr)
        torch._foreach_addcdiv_(values, m_hat, denom)

    def get_config(self):
        config = super().get_config()
        config.update({"beta_1": self.beta_1, "beta_2": self.beta_2, "epsilon": self.epsilon})
        return config
