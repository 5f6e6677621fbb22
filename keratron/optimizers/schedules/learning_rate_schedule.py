"""Learning-rate schedules: `schedule(step) -> learning rate`, with Keras 3's formulas.

Each schedule is computed with keratron ops in the dtype of `initial_learning_rate` (float32
for a Python float), as Keras does, so an optimizer gets the same values Keras would. Every
branch that depends on the step is a `where`, never Python control flow, so a schedule can be
evaluated on a device tensor without reading it back to the host: the built-in schedules
(`GRAPH_SAFE_SCHEDULES`) run inside a step captured as a CUDA graph, each replay reading the
optimizer's `iterations` on the device (their constants are filled on the device, not copied
from the host).
"""

from __future__ import annotations

import math

from keratron import ops
from keratron.autodiff.tensor import Tensor, convert_to_tensor

__all__ = [
    "LearningRateSchedule",
    "ExponentialDecay",
    "PiecewiseConstantDecay",
    "PolynomialDecay",
    "InverseTimeDecay",
    "CosineDecay",
    "CosineDecayRestarts",
    "serialize",
    "deserialize",
]


def _check_positive(cls_name, arg, value):
    if value <= 0:
        raise ValueError(f"{cls_name}: argument `{arg}` must be > 0. Received: {arg}={value}")


class LearningRateSchedule:
    """Base class of learning-rate schedules: a callable `step -> learning rate`.

    Subclasses define `__call__(self, step)` and `get_config()`; an optimizer created with a
    schedule evaluates it at its `iterations` on every step.

    Example:
        >>> class Halving(keratron.optimizers.schedules.LearningRateSchedule):
        ...     def __call__(self, step):
        ...         return 0.1 * keratron.ops.power(0.5, keratron.ops.cast(step, "float32"))
        ...     def get_config(self):
        ...         return {}
        >>> round(float(Halving()(2)), 6)
        0.025
    """

    def __call__(self, step) -> Tensor:
        raise TypeError(
            f"Learning rate schedule '{type(self).__name__}' must override `__call__(self, step)`."
        )

    def get_config(self) -> dict:
        raise TypeError(
            f"Learning rate schedule '{type(self).__name__}' must override `get_config()` to "
            "be serializable."
        )

    @classmethod
    def from_config(cls, config):
        """Rebuilds the schedule from `get_config()` output."""
        return cls(**config)


def _lr_and_dtype(initial_learning_rate):
    lr = convert_to_tensor(initial_learning_rate)
    return lr, lr.dtype


class ExponentialDecay(LearningRateSchedule):
    """`initial_learning_rate * decay_rate ** (step / decay_steps)`; with `staircase`, the
    exponent is floored so the rate drops in steps.

    Args:
        initial_learning_rate: the rate at step 0.
        decay_steps: the number of steps for one factor of `decay_rate`; must be > 0.
        decay_rate: the decay factor.
        staircase: floor `step / decay_steps`.
        name: the schedule's name.

    Example:
        >>> s = keratron.optimizers.schedules.ExponentialDecay(0.1, 10, 0.5)
        >>> round(float(s(10)), 6)
        0.05
    """

    def __init__(
        self,
        initial_learning_rate,
        decay_steps,
        decay_rate,
        staircase=False,
        name="ExponentialDecay",
    ):
        _check_positive(type(self).__name__, "decay_steps", decay_steps)
        self.initial_learning_rate = initial_learning_rate
        self.decay_steps = decay_steps
        self.decay_rate = decay_rate
        self.staircase = staircase
        self.name = name

    def __call__(self, step):
        lr, dtype = _lr_and_dtype(self.initial_learning_rate)
        p = ops.divide(ops.cast(step, dtype), ops.cast(self.decay_steps, dtype))
        if self.staircase:
            p = ops.floor(p)
        return ops.multiply(lr, ops.power(ops.cast(self.decay_rate, dtype), p))

    def get_config(self):
        return {
            "initial_learning_rate": self.initial_learning_rate,
            "decay_steps": self.decay_steps,
            "decay_rate": self.decay_rate,
            "staircase": self.staircase,
            "name": self.name,
        }


class PiecewiseConstantDecay(LearningRateSchedule):
    """`values[0]` up to and including `boundaries[0]`, `values[1]` up to `boundaries[1]`,
    ..., and `values[-1]` after the last boundary.

    Args:
        boundaries: increasing step boundaries.
        values: one more value than boundaries.
        name: the schedule's name.

    Example:
        >>> s = keratron.optimizers.schedules.PiecewiseConstantDecay([10], [1.0, 0.5])
        >>> float(s(10)), float(s(11))
        (1.0, 0.5)
    """

    def __init__(self, boundaries, values, name="PiecewiseConstant"):
        if len(boundaries) != len(values) - 1:
            raise ValueError(
                "PiecewiseConstantDecay: `boundaries` must have one element fewer than "
                f"`values`. Received: boundaries={boundaries} of length {len(boundaries)}, "
                f"values={values} of length {len(values)}."
            )
        self.boundaries = boundaries
        self.values = values
        self.name = name

    def __call__(self, step):
        step = convert_to_tensor(step)
        bounds = [ops.cast(convert_to_tensor(b), step.dtype) for b in self.boundaries]
        values = [convert_to_tensor(v) for v in self.values]
        dtype = values[0].dtype
        # A sum of indicator * value over the disjoint intervals; no data-dependent branch.
        result = ops.multiply(ops.cast(ops.less_equal(step, bounds[0]), dtype), values[0])
        result = ops.add(
            result, ops.multiply(ops.cast(ops.greater(step, bounds[-1]), dtype), values[-1])
        )
        for low, high, value in zip(bounds[:-1], bounds[1:], values[1:-1]):
            inside = ops.logical_and(ops.greater(step, low), ops.less_equal(step, high))
            result = ops.add(result, ops.multiply(ops.cast(inside, dtype), value))
        return result

    def get_config(self):
        return {"boundaries": self.boundaries, "values": self.values, "name": self.name}


class PolynomialDecay(LearningRateSchedule):
    """Decays from `initial_learning_rate` to `end_learning_rate` over `decay_steps` as
    `(initial - end) * (1 - step / decay_steps) ** power + end`; with `cycle`, the horizon
    grows to the next multiple of `decay_steps` instead of stopping.

    Args:
        initial_learning_rate: the rate at step 0.
        decay_steps: the decay horizon; must be > 0.
        end_learning_rate: the final rate.
        power: the polynomial's power.
        cycle: restart the decay past `decay_steps`.
        name: the schedule's name.

    Example:
        >>> s = keratron.optimizers.schedules.PolynomialDecay(1.0, 10, end_learning_rate=0.0)
        >>> float(s(5))
        0.5
    """

    def __init__(
        self,
        initial_learning_rate,
        decay_steps,
        end_learning_rate=0.0001,
        power=1.0,
        cycle=False,
        name="PolynomialDecay",
    ):
        _check_positive(type(self).__name__, "decay_steps", decay_steps)
        self.initial_learning_rate = initial_learning_rate
        self.decay_steps = decay_steps
        self.end_learning_rate = end_learning_rate
        self.power = power
        self.cycle = cycle
        self.name = name

    def __call__(self, step):
        lr, dtype = _lr_and_dtype(self.initial_learning_rate)
        end = ops.cast(self.end_learning_rate, dtype)
        power = ops.cast(self.power, dtype)
        s = ops.cast(step, dtype)
        horizon = ops.cast(self.decay_steps, dtype)
        if self.cycle:
            multiplier = ops.where(
                ops.equal(s, 0), 1.0, ops.ceil(ops.divide(s, float(self.decay_steps)))
            )
            horizon = ops.multiply(horizon, multiplier)
        else:
            s = ops.minimum(s, horizon)
        p = ops.divide(s, horizon)
        decayed = ops.multiply(ops.subtract(lr, end), ops.power(ops.subtract(1, p), power))
        return ops.add(decayed, end)

    def get_config(self):
        return {
            "initial_learning_rate": self.initial_learning_rate,
            "decay_steps": self.decay_steps,
            "end_learning_rate": self.end_learning_rate,
            "power": self.power,
            "cycle": self.cycle,
            "name": self.name,
        }


class InverseTimeDecay(LearningRateSchedule):
    """`initial_learning_rate / (1 + decay_rate * step / decay_steps)`; with `staircase`,
    `step / decay_steps` is floored.

    Args:
        initial_learning_rate: the rate at step 0.
        decay_steps: the step scale; must be > 0.
        decay_rate: the decay rate.
        staircase: floor `step / decay_steps`.
        name: the schedule's name.

    Example:
        >>> s = keratron.optimizers.schedules.InverseTimeDecay(1.0, 1, 0.5)
        >>> float(s(2))
        0.5
    """

    def __init__(
        self,
        initial_learning_rate,
        decay_steps,
        decay_rate,
        staircase=False,
        name="InverseTimeDecay",
    ):
        _check_positive(type(self).__name__, "decay_steps", decay_steps)
        self.initial_learning_rate = initial_learning_rate
        self.decay_steps = decay_steps
        self.decay_rate = decay_rate
        self.staircase = staircase
        self.name = name

    def __call__(self, step):
        lr, dtype = _lr_and_dtype(self.initial_learning_rate)
        p = ops.divide(ops.cast(step, dtype), ops.cast(self.decay_steps, dtype))
        if self.staircase:
            p = ops.floor(p)
        denom = ops.add(ops.cast(1, dtype), ops.multiply(ops.cast(self.decay_rate, dtype), p))
        return ops.divide(lr, denom)

    def get_config(self):
        return {
            "initial_learning_rate": self.initial_learning_rate,
            "decay_steps": self.decay_steps,
            "decay_rate": self.decay_rate,
            "staircase": self.staircase,
            "name": self.name,
        }


class CosineDecay(LearningRateSchedule):
    """Cosine decay with an optional linear warmup (SGDR without restarts).

    Without `warmup_target`: `initial * ((1 - alpha) * 0.5 * (1 + cos(pi * s / decay_steps))
    + alpha)` with `s = min(step, decay_steps)`. With `warmup_target`, the rate first rises
    linearly from `initial_learning_rate` to `warmup_target` over `warmup_steps`, then decays
    from `warmup_target` over `decay_steps`.

    Args:
        initial_learning_rate: the rate at step 0.
        decay_steps: the decay length; must be > 0.
        alpha: the final rate as a fraction of the decayed-from rate.
        name: the schedule's name.
        warmup_target: the rate reached at the end of warmup; None for no warmup.
        warmup_steps: the warmup length.

    Example:
        >>> s = keratron.optimizers.schedules.CosineDecay(1.0, 10)
        >>> round(float(s(5)), 6)
        0.5
    """

    def __init__(
        self,
        initial_learning_rate,
        decay_steps,
        alpha=0.0,
        name="CosineDecay",
        warmup_target=None,
        warmup_steps=0,
    ):
        _check_positive(type(self).__name__, "decay_steps", decay_steps)
        self.initial_learning_rate = initial_learning_rate
        self.decay_steps = decay_steps
        self.alpha = alpha
        self.name = name
        self.warmup_steps = warmup_steps
        self.warmup_target = warmup_target

    def _decay(self, step, decay_steps, decay_from, dtype):
        fraction = ops.divide(step, decay_steps)
        pi = convert_to_tensor(math.pi, dtype=dtype)
        cosine = ops.multiply(0.5, ops.add(1.0, ops.cos(ops.multiply(pi, fraction))))
        decayed = ops.add(ops.multiply(1 - self.alpha, cosine), self.alpha)
        return ops.multiply(decay_from, decayed)

    def __call__(self, step):
        lr, dtype = _lr_and_dtype(self.initial_learning_rate)
        decay_steps = ops.cast(self.decay_steps, dtype)
        s = ops.cast(step, dtype)
        if self.warmup_target is None:
            return self._decay(ops.minimum(s, decay_steps), decay_steps, lr, dtype)
        target = ops.cast(self.warmup_target, dtype)
        warmup_steps = ops.cast(self.warmup_steps, dtype)
        s = ops.minimum(s, ops.add(decay_steps, warmup_steps))
        warm = ops.add(ops.multiply(ops.subtract(target, lr), ops.divide(s, warmup_steps)), lr)
        decay = self._decay(ops.subtract(s, warmup_steps), decay_steps, target, dtype)
        # Both branches are computed; the unused warmup one may be inf/NaN (0 warmup steps).
        return ops.where(ops.less(s, warmup_steps), warm, decay)

    def get_config(self):
        return {
            "initial_learning_rate": self.initial_learning_rate,
            "decay_steps": self.decay_steps,
            "alpha": self.alpha,
            "name": self.name,
            "warmup_target": self.warmup_target,
            "warmup_steps": self.warmup_steps,
        }


class CosineDecayRestarts(LearningRateSchedule):
    """Cosine decay with warm restarts (SGDR): the first period lasts `first_decay_steps`,
    each next one `t_mul` times longer and starting from `m_mul` times the previous peak.

    Args:
        initial_learning_rate: the rate at step 0.
        first_decay_steps: the first period's length; must be > 0.
        t_mul: period length multiplier.
        m_mul: peak rate multiplier.
        alpha: the floor, as a fraction of `initial_learning_rate`.
        name: the schedule's name.

    Example:
        >>> s = keratron.optimizers.schedules.CosineDecayRestarts(1.0, 10)
        >>> float(s(10))
        1.0
    """

    def __init__(
        self,
        initial_learning_rate,
        first_decay_steps,
        t_mul=2.0,
        m_mul=1.0,
        alpha=0.0,
        name="SGDRDecay",
    ):
        _check_positive(type(self).__name__, "first_decay_steps", first_decay_steps)
        self.initial_learning_rate = initial_learning_rate
        self.first_decay_steps = first_decay_steps
        self._t_mul = t_mul
        self._m_mul = m_mul
        self.alpha = alpha
        self.name = name

    def __call__(self, step):
        lr, dtype = _lr_and_dtype(self.initial_learning_rate)
        first = ops.cast(self.first_decay_steps, dtype)
        alpha = ops.cast(self.alpha, dtype)
        t_mul = ops.cast(self._t_mul, dtype)
        m_mul = ops.cast(self._m_mul, dtype)
        fraction = ops.divide(ops.cast(step, dtype), first)
        if self._t_mul == 1.0:
            i_restart = ops.floor(fraction)
            fraction = ops.subtract(fraction, i_restart)
        else:
            # Periods grow geometrically: restart i begins at (1 - t_mul**i) / (1 - t_mul).
            i_restart = ops.floor(
                ops.divide(
                    ops.log(ops.subtract(1.0, ops.multiply(fraction, ops.subtract(1.0, t_mul)))),
                    ops.log(t_mul),
                )
            )
            start = ops.divide(
                ops.subtract(1.0, ops.power(t_mul, i_restart)), ops.subtract(1.0, t_mul)
            )
            fraction = ops.divide(ops.subtract(fraction, start), ops.power(t_mul, i_restart))
        m_fac = ops.power(m_mul, i_restart)
        pi = convert_to_tensor(math.pi, dtype=dtype)
        cosine = ops.multiply(
            ops.multiply(0.5, m_fac), ops.add(1.0, ops.cos(ops.multiply(pi, fraction)))
        )
        decayed = ops.add(ops.multiply(ops.subtract(1, alpha), cosine), alpha)
        return ops.multiply(lr, decayed)

    def get_config(self):
        return {
            "initial_learning_rate": self.initial_learning_rate,
            "first_decay_steps": self.first_decay_steps,
            "t_mul": self._t_mul,
            "m_mul": self._m_mul,
            "alpha": self.alpha,
            "name": self.name,
        }


_SCHEDULES = {
    cls.__name__: cls
    for cls in (
        ExponentialDecay,
        PiecewiseConstantDecay,
        PolynomialDecay,
        InverseTimeDecay,
        CosineDecay,
        CosineDecayRestarts,
    )
}


# The schedules whose __call__ is written with device ops alone (no host read of the step, no
# Python branch on it): a CUDA graph can capture them. Every built-in one; subclasses are not
# included.
GRAPH_SAFE_SCHEDULES = tuple(_SCHEDULES.values())


def serialize(learning_rate_schedule) -> dict:
    """A schedule's config in the Keras 3 serialized form.

    Example:
        >>> s = keratron.optimizers.schedules.ExponentialDecay(0.1, 10, 0.9)
        >>> keratron.optimizers.schedules.serialize(s)["class_name"]
        'ExponentialDecay'
    """
    if not isinstance(learning_rate_schedule, LearningRateSchedule):
        raise TypeError(
            "schedules.serialize expects a LearningRateSchedule. "
            f"Received: {type(learning_rate_schedule).__name__}"
        )
    cls = type(learning_rate_schedule)
    builtin = _SCHEDULES.get(cls.__name__) is cls
    return {
        "module": "keras.optimizers.schedules" if builtin else cls.__module__,
        "class_name": cls.__name__,
        "config": learning_rate_schedule.get_config(),
        "registered_name": None if builtin else cls.__name__,
    }


def deserialize(config, custom_objects=None) -> LearningRateSchedule:
    """Rebuilds a schedule from `serialize` output (Keras 3 or tf.keras 2 form).

    Example:
        >>> cfg = {"class_name": "InverseTimeDecay",
        ...        "config": {"initial_learning_rate": 1.0, "decay_steps": 1, "decay_rate": 1.0}}
        >>> type(keratron.optimizers.schedules.deserialize(cfg)).__name__
        'InverseTimeDecay'
    """
    if not isinstance(config, dict) or "class_name" not in config:
        raise ValueError(
            "schedules.deserialize expects a dict with 'class_name' and 'config'. "
            f"Received: {config!r}"
        )
    name = config["class_name"]
    custom_objects = custom_objects or {}
    cls = custom_objects.get(name) or custom_objects.get(config.get("registered_name"))
    if cls is None:
        cls = _SCHEDULES.get(name)
    if cls is None:
        raise ValueError(
            f"Unknown learning rate schedule: '{name}'. Expected one of {sorted(_SCHEDULES)}, "
            "or a class passed in `custom_objects`."
        )
    return cls.from_config(dict(config.get("config", {})))
