"""Lion: sign-of-interpolated-momentum updates (Chen et al., 2023)."""

from __future__ import annotations

import torch

from keratron.optimizers.base_optimizer import Optimizer


class Lion(Optimizer):
    """Lion, as Keras 3 defines it.

    `w -= lr * sign(beta_1 * m + (1 - beta_1) * g)`, then `m = beta_2 * m + (1 - beta_2) * g`.

    Args:
        learning_rate: a float, a `LearningRateSchedule`, or a callable. Defaults to 0.001.
        beta_1: interpolation factor for the update direction, in (0, 1]. Defaults to 0.9.
        beta_2: decay of the momentum. Defaults to 0.99.
        **kwargs: the base `Optimizer` arguments (weight_decay, clipnorm, ..., name).

    Example:
        >>> opt = keratron.optimizers.Lion(learning_rate=0.1)
        >>> w = keratron.Variable([1.0])
        >>> opt.apply([keratron.convert_to_tensor([3.0])], [w])
        >>> w.numpy()
        array([0.9], dtype=float32)
    """

    _update_is_graph_safe = True  # on CUDA its update makes no host read

    def __init__(
        self,
        learning_rate=0.001,
        beta_1=0.9,
        beta_2=0.99,
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
        if not 0 < beta_1 <= 1:
            raise ValueError(
                "Lion: argument `beta_1` must be in (0, 1]; otherwise the optimizer degenerates "
                f"to SignSGD. Received: beta_1={beta_1}"
            )
        self.beta_1 = beta_1
        self.beta_2 = beta_2

    def build(self, var_list):
        if self.built:
            return
        super().build(var_list)
        self._momentums = self.add_optimizer_variables(var_list, "momentum")

    def _update_group(self, grads, variables, lr):
        values = [v._value for v in variables]
        m = [self._momentums[self._get_variable_index(v)]._value for v in variables]
        direction = torch._foreach_lerp(m, grads, 1 - self.beta_1)
        torch._foreach_sign_(direction)
        torch._foreach_mul_(direction, lr)
        torch._foreach_sub_(values, direction)
        torch._foreach_lerp_(m, grads, 1 - self.beta_2)

    def get_config(self):
        config = super().get_config()
        config.update({"beta_1": self.beta_1, "beta_2": self.beta_2})
        return config
