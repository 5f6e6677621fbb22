"""`LossScaleOptimizer`: dynamic loss scaling around another optimizer (Keras 3's rules).

The trainer multiplies the loss by `scale_loss` before differentiating, so float16
gradients that would underflow keep their value; `apply` divides the scale back out. A step
whose gradients hold an inf or NaN is skipped and the scale halved; after
`dynamic_growth_steps` finite steps in a row the scale doubles.
"""

from __future__ import annotations

import torch

from keratron.autodiff.tape import stop_recording_all
from keratron.autodiff.tensor import Tensor, mark_written
from keratron.ops.elementwise import cast_p
from keratron.optimizers.base_optimizer import Optimizer

__all__ = ["LossScaleOptimizer"]

# Arguments older Keras versions wrote into this optimizer's config; accepted at their
# defaults so that those files load, refused otherwise (they belong on the inner optimizer).
_BASE_DEFAULTS = {
    "weight_decay": None,
    "clipnorm": None,
    "global_clipnorm": None,
    "clipvalue": None,
    "use_ema": False,
    "ema_momentum": 0.99,
    "ema_overwrite_frequency": None,
    "loss_scale_factor": None,
    "gradient_accumulation_steps": None,
}


class LossScaleOptimizer(Optimizer):
    """An optimizer that dynamically scales the loss to prevent float16 gradient underflow.

    Args:
        inner_optimizer: the optimizer that applies the unscaled gradients.
        initial_scale: the first loss scale (default 2**15).
        dynamic_growth_steps: the scale doubles after this many finite steps in a row.
        name: the optimizer's name (default "loss_scale_optimizer").

    Raises:
        ValueError: for `dynamic=False` or any base-optimizer argument (set those on the
            inner optimizer).

    Example:
        >>> opt = keratron.mixed_precision.LossScaleOptimizer(keratron.optimizers.SGD())
        >>> w = keratron.Variable([1.0])
        >>> opt.apply([keratron.convert_to_tensor([float("inf")])], [w])
        >>> float(opt.dynamic_scale.numpy())
        16384.0
    """

    def __init__(
        self, inner_optimizer, initial_scale=2.0**15, dynamic_growth_steps=2000, name=None, **kwargs
    ):
        if not kwargs.pop("dynamic", True):
            raise ValueError(
                "LossScaleOptimizer no longer supports `dynamic=False`. Instead, simply set "
                "`loss_scale_factor` directly on the `inner_optimizer`."
            )
        for arg, default in _BASE_DEFAULTS.items():
            if arg in kwargs and kwargs.pop(arg) != default:
                raise ValueError(
                    f"LossScaleOptimizer does not support `{arg}`. Instead, set `{arg}` on the "
                    "`inner_optimizer`."
                )
        if kwargs:
            raise ValueError(
                f"LossScaleOptimizer does not support arguments: `{'`, `'.join(kwargs)}`."
            )
        if not isinstance(inner_optimizer, Optimizer):
            raise TypeError(
                "LossScaleOptimizer: `inner_optimizer` must be an Optimizer. Received: "
                f"inner_optimizer={inner_optimizer!r}"
            )
        if int(dynamic_growth_steps) < 1:
            raise ValueError(
                "LossScaleOptimizer: `dynamic_growth_steps` must be a positive integer. "
                f"Received: dynamic_growth_steps={dynamic_growth_steps}"
            )
        super().__init__(learning_rate=0.0, name=name)
        self.inner_optimizer = inner_optimizer
        self.initial_scale = initial_scale
        self.dynamic_growth_steps = dynamic_growth_steps
        # The inner optimizer must not unscale a second time.
        self.inner_optimizer.loss_scale_factor = None
        # Created here rather than in `build` (Keras's order is the same: after `iteration`
        # and `learning_rate`), so that a traced train step reads the live scale in
        # `scale_loss` before the first `apply` builds the optimizer.
        self.step_counter = self.add_variable(
            (), initializer="zeros", dtype="int32", name="step_counter"
        )
        self.dynamic_scale = self.add_variable(
            (), initializer=float(initial_scale), dtype="float32", name="dynamic_scale"
        )

    def build(self, variables):
        self.inner_optimizer.build(variables)
        super().build(variables)

    @property
    def variables(self) -> list:
        """Own variables (`iteration`, `learning_rate`, `step_counter`, `dynamic_scale`),
        then the inner optimizer's, as Keras orders them."""
        return self._variables + self.inner_optimizer.variables

    @property
    def learning_rate(self):
        return self.inner_optimizer.learning_rate

    @learning_rate.setter
    def learning_rate(self, learning_rate):
        # The base class sets its own (unused) rate while constructing.
        if "inner_optimizer" in self.__dict__:
            self.inner_optimizer.learning_rate = learning_rate
        else:
            self._set_learning_rate(learning_rate, initial=True)

    @property
    def iterations(self):
        return self.inner_optimizer.iterations

    def scale_loss(self, loss):
        """`loss` multiplied by the current loss scale."""
        from keratron import ops

        return ops.multiply(loss, self.dynamic_scale)

    # ------------------------------------------------------------------ applying gradients
    def apply(self, grads, trainable_variables=None) -> None:
        """Applies `grads` (of the scaled loss) unscaled, or skips the step when one of them
        is not finite; then updates the scale."""
        grads = list(grads)
        if not grads:
            return
        variables = (
            self._trainable_variables if trainable_variables is None else list(trainable_variables)
        )
        if len(grads) != len(variables):
            raise ValueError(
                f"Optimizer '{self.name}' (LossScaleOptimizer) expects one gradient per "
                f"variable. Received {len(grads)} gradients for {len(variables)} variables."
            )
        from keratron.autodiff.function import is_tracing
        from keratron.autodiff.primitive import suspend_tracing

        if not self.built:
            with suspend_tracing():
                self.build(variables)
        grads, variables = self.inner_optimizer._filter_empty_gradients(grads, variables)
        if is_tracing():
            from keratron.autodiff.function import record_effect

            checked = []
            for g, v in zip(grads, variables):
                if g._value.dtype != v._value.dtype:
                    g = cast_p.bind(g, dtype=v._value.dtype)
                checked.append(g)

            def run(*values):
                self._apply_scaled(list(values), variables)

            # Captured on CUDA, the update decides on the device whether to skip (see
            # `_apply_scaled_on_device`), so it is as graph-safe as the inner optimizer's.
            run.capture_name = f"optimizer '{self.name}' update"
            run.capture_check = lambda: self.inner_optimizer._graph_capture_blocker(variables)
            record_effect(run, checked, variables=list(variables) + self.variables)
            return
        with stop_recording_all():
            values = [self.inner_optimizer._gradient_value(g, v) for g, v in zip(grads, variables)]
            self._apply_scaled(values, variables)

    def _apply_scaled(self, values: list, variables: list) -> None:
        # While a CUDA graph captures the step, the skip is decided on the device; run
        # uncaptured, one host read of the finite flag costs less than saving and restoring
        # every variable and slot.
        if values and values[0].is_cuda and torch.cuda.is_current_stream_capturing():
            self._apply_scaled_on_device(values, variables)
            return
        finite, counter, scale = self._scaling_state(values)
        if not bool(finite):
            counter.zero_()
            scale.mul_(0.5)
            return
        unscaled = self._unscaled(values, variables, scale)
        self.inner_optimizer.apply([Tensor(g) for g in unscaled], variables)
        if int(counter) == self.dynamic_growth_steps - 1:
            counter.zero_()
            scale.mul_(2.0)
        else:
            counter.add_(1)

    def _scaling_state(self, values: list) -> tuple:
        """(whether every gradient is finite, as a device bool; the step counter; the scale),
        the last two marked as written by this step."""
        finite = torch.stack([torch.isfinite(g).all() for g in values]).all()
        mark_written([self.step_counter, self.dynamic_scale])
        return finite, self.step_counter._value, self.dynamic_scale._value

    @staticmethod
    def _unscaled(values: list, variables: list, scale: torch.Tensor) -> list:
        """The gradients divided by the loss scale, except those that overwrite their
        variable."""
        return [
            g if getattr(v, "overwrite_with_gradient", False) else g / scale.to(g.dtype)
            for g, v in zip(values, variables)
        ]

    def _apply_scaled_on_device(self, values: list, variables: list) -> None:
        """`_apply_scaled` without a host read, so that a CUDA graph can replay it: the inner
        update always runs (on zeros where the gradients are not finite), and the variables and
        the inner optimizer's state are then put back where the step is skipped; the counter
        and the scale follow the same rules through `where`. Same results as the host form."""
        finite, counter, scale = self._scaling_state(values)
        state = [v._value for v in variables] + [v._value for v in self.inner_optimizer.variables]
        saved = [t.clone() for t in state]
        unscaled = [
            torch.where(finite, g, torch.zeros_like(g))
            for g in self._unscaled(values, variables, scale)
        ]
        self.inner_optimizer.apply([Tensor(g) for g in unscaled], variables)
        for t, before in zip(state, saved):
            t.copy_(torch.where(finite, t, before))
        mark_written(list(variables) + self.inner_optimizer.variables)
        grow = finite & (counter == self.dynamic_growth_steps - 1)
        counter.copy_(torch.where(finite & ~grow, counter + 1, torch.zeros_like(counter)))
        halved_or_kept = torch.where(finite, scale, scale * 0.5)
        scale.copy_(torch.where(grow, scale * 2.0, halved_or_kept))

    def finalize_variable_values(self, var_list) -> None:
        self.inner_optimizer.finalize_variable_values(var_list)

    # ------------------------------------------------------------------ config
    def get_config(self) -> dict:
        from keratron.optimizers import serialize

        return {
            "name": self.name,
            "inner_optimizer": serialize(self.inner_optimizer),
            "initial_scale": self.initial_scale,
            "dynamic_growth_steps": self.dynamic_growth_steps,
        }

    @classmethod
    def from_config(cls, config, custom_objects=None):
        from keratron.optimizers import deserialize

        config = dict(config)
        inner = deserialize(config.pop("inner_optimizer"), custom_objects=custom_objects)
        return cls(inner, **config)
