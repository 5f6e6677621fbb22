"""`LearningRateScheduler`: set the optimizer's learning rate from a function of the epoch."""

from __future__ import annotations

import numpy as np

from keratron.callbacks.callback import Callback
from keratron.callbacks.monitor_callback import to_float
from keratron.utils.io_utils import print_msg

__all__ = ["LearningRateScheduler"]


class LearningRateScheduler(Callback):
    """Sets `model.optimizer.learning_rate` at the start of every epoch.

    `schedule(epoch, lr)` receives the epoch index (from 0) and the current rate and returns
    the new rate as a float; a one-argument `schedule(epoch)` is accepted too. The rate in
    force is added to the epoch logs as "learning_rate".

    Args:
        schedule: a function `(epoch, lr) -> float` or `(epoch) -> float`.
        verbose: 0 (silent) or 1 (print the rate each epoch).

    Raises:
        ValueError: at the start of an epoch, if `schedule` does not return a float.

    Example:
        >>> model = keratron.Sequential([keratron.Input((2,)), keratron.layers.Dense(1)])
        >>> model.compile(optimizer="sgd", loss="mse")
        >>> x, y = np.ones((4, 2)), np.zeros((4, 1))
        >>> def schedule(epoch, lr):
        ...     return lr if epoch < 2 else lr * 0.5
        >>> callback = keratron.callbacks.LearningRateScheduler(schedule)
        >>> history = model.fit(x, y, epochs=4, callbacks=[callback], verbose=0)
        >>> [round(lr, 6) for lr in history.history["learning_rate"]]
        [0.01, 0.01, 0.005, 0.0025]
    """

    def __init__(self, schedule, verbose=0):
        super().__init__()
        self.schedule = schedule
        self.verbose = verbose

    def _optimizers(self):
        optimizer = self.model.optimizer
        inner = getattr(optimizer, "optimizers", None)
        return (list(inner), True) if inner is not None else ([optimizer], False)

    def _update_optimizer_lr(self, optimizer, epoch) -> float:
        if not hasattr(optimizer, "learning_rate"):
            raise ValueError(
                "LearningRateScheduler: the optimizer must have a `learning_rate` attribute. "
                f"Received: optimizer={optimizer!r}"
            )
        try:
            learning_rate = self.schedule(epoch, to_float(optimizer.learning_rate))
        except TypeError:
            # Old one-argument schedules, as Keras accepts them.
            learning_rate = self.schedule(epoch)
        if not isinstance(learning_rate, (float, np.floating)) and hasattr(
            learning_rate, "__array__"
        ):
            # A scalar tensor (tf.keras 2's documented `lr * tf.math.exp(-0.1)`, a keratron or
            # torch scalar), as tf.keras 2 took it: a float one is its value.
            value = np.asarray(learning_rate)
            if value.ndim == 0 and value.dtype.kind == "f":
                learning_rate = float(value)
        if not isinstance(learning_rate, (float, np.float32, np.float64)):
            raise ValueError(
                "LearningRateScheduler: the output of the `schedule` function should be a "
                f"float. Received: {learning_rate!r} of type {type(learning_rate).__name__}"
            )
        optimizer.learning_rate = float(learning_rate)
        return float(learning_rate)

    def on_epoch_begin(self, epoch, logs=None):
        optimizers, multi = self._optimizers()
        for opt in optimizers:
            learning_rate = self._update_optimizer_lr(opt, epoch)
            if self.verbose > 0:
                name = f"{opt.name} " if multi else ""
                print_msg(
                    f"\nEpoch {epoch + 1}: LearningRateScheduler setting {name}learning rate "
                    f"to {learning_rate}."
                )

    def on_epoch_end(self, epoch, logs=None):
        if logs is None:
            return
        optimizers, multi = self._optimizers()
        for opt in optimizers:
            key = f"learning_rate_{opt.name}" if multi else "learning_rate"
            logs[key] = to_float(opt.learning_rate)
