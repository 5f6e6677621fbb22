"""Stochastic gradient descent, with optional (Nesterov) momentum."""

from __future__ import annotations

import torch

from keratron.optimizers.base_optimizer import Optimizer


class SGD(Optimizer):
    """Gradient descent with optional momentum, as Keras 3 defines it.

    Without momentum: `w -= learning_rate * g`. With momentum:
    `velocity = momentum * velocity - learning_rate * g`, then `w += velocity`, or with
    `nesterov=True`, `w += momentum * velocity - learning_rate * g`.

    Args:
        learning_rate: a float, a `LearningRateSchedule`, or a callable. Defaults to 0.01.
        momentum: a float in [0, 1]. Defaults to 0.0.
        nesterov: use Nesterov momentum.
        **kwargs: the base `Optimizer` arguments (weight_decay, clipnorm, ..., name).

    Example:
        >>> opt = keratron.optimizers.SGD(learning_rate=0.1, momentum=0.9)
        >>> w = keratron.Variable([1.0])
        >>> opt.apply([keratron.convert_to_tensor([1.0])], [w])
        >>> w.numpy()
        array([0.9], dtype=float32)
    """

    _update_is_graph_safe = True  # on CUDA its update makes no host read

    def __init__(
        self,
        learning_rate=0.01,
        momentum=0.0,
        nesterov=False,
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
        if isinstance(momentum, bool) or not isinstance(momentum, (int, float)):
            raise ValueError(f"SGD: `momentum` must be a float in [0, 1]. Received: {momentum!r}")
        if not 0 <= momentum <= 1:
            raise ValueError(f"SGD: `momentum` must be a float in [0, 1]. Received: {momentum}")
        self.momentum = float(momentum)
        self.nesterov = nesterov

    def build(self, variables):
        if self.built:
            return
        super().build(variables)
        self.momentums = []
        if self.momentum != 0:
            self.momentums = self.add_optimizer_variables(variables, "momentum")

    def _update_group(self, grads, variables, lr):
        values = [v._value for v in variables]
        step = torch._foreach_mul(grads, -lr)  # -learning_rate * g
        if self.momentum == 0:
            torch._foreach_add_(values, step)
            return
        bufs = [self.momentums[self._get_variable_index(v)]._value for v in variables]
        torch._foreach_mul_(bufs, self.momentum)
        torch._foreach_add_(bufs, step)
        if self.nesterov:
            torch._foreach_add_(values, step)
            torch._foreach_add_(values, bufs, alpha=self.momentum)
        else:
            torch._foreach_add_(values, bufs)

    def get_config(self):
        config = super().get_config()
        config.update({"momentum": self.momentum, "nesterov": self.nesterov})
        return config
