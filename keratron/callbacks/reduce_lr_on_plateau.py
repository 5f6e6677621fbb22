"""`ReduceLROnPlateau`: lower the optimizer's learning rate when a quantity stops improving."""

from __future__ import annotations

import warnings

import numpy as np

from keratron.callbacks.monitor_callback import MonitorCallback, to_float
from keratron.utils.io_utils import print_msg

__all__ = ["ReduceLROnPlateau"]


class ReduceLROnPlateau(MonitorCallback):
    """Multiplies the learning rate by `factor` after `patience` epochs without improvement.

    The rate is read from and written to `model.optimizer.learning_rate` (every optimizer of
    a multi-optimizer with an `optimizers` list). The current rate is added to the epoch logs
    as "learning_rate".

    Args:
        monitor: the log key to watch. Defaults to "val_loss".
        factor: multiplier for the learning rate, below 1. Defaults to 0.1.
        patience: epochs without improvement before a reduction. Defaults to 10.
        verbose: 0 (silent) or 1 (print a line at each reduction).
        mode: "auto", "min" or "max".
        min_delta: smallest change that counts as an improvement. Defaults to 1e-4.
        cooldown: epochs to wait after a reduction before counting again. Defaults to 0.
        min_lr: lower bound on the learning rate. Defaults to 0.

    Raises:
        ValueError: if `factor >= 1.0`.

    Example:
        >>> dense = keratron.layers.Dense(1, kernel_initializer="zeros")
        >>> model = keratron.Sequential([keratron.Input((2,)), dense])
        >>> model.compile(optimizer="sgd", loss="mse")
        >>> x, y = np.ones((4, 2)), np.zeros((4, 1))  # fit from the start: the loss stays 0
        >>> reduce_lr = keratron.callbacks.ReduceLROnPlateau(
        ...     monitor="loss", factor=0.2, patience=1, min_lr=0.001)
        >>> history = model.fit(x, y, epochs=4, callbacks=[reduce_lr], verbose=0)
        >>> [round(lr, 6) for lr in history.history["learning_rate"]]  # the rate of each epoch
        [0.01, 0.01, 0.002, 0.001]
    """

    def __init__(
        self,
        monitor="val_loss",
        factor=0.1,
        patience=10,
        verbose=0,
        mode="auto",
        min_delta=1e-4,
        cooldown=0,
        min_lr=0.0,
        **kwargs,
    ):
        super().__init__(monitor, mode, min_delta=min_delta)
        if factor >= 1.0:
            raise ValueError(
                f"ReduceLROnPlateau does not support a factor >= 1.0. Received factor={factor}"
            )
        if "epsilon" in kwargs:
            # tf.keras 1/2 name of min_delta.
            self.min_delta = abs(kwargs.pop("epsilon"))
        if kwargs:
            # Keras accepts and ignores unknown keywords; say so instead of staying silent.
            warnings.warn(
                f"ReduceLROnPlateau ignores unknown keyword arguments: {sorted(kwargs)}",
                stacklevel=2,
            )
        self.factor = factor
        self.min_lr = min_lr
        self.patience = patience
        self.verbose = verbose
        self.cooldown = cooldown
        self.cooldown_counter = 0
        self.wait = 0

    def _reset(self):
        self.best = None
        self.cooldown_counter = 0
        self.wait = 0

    def _optimizers(self):
        optimizer = self.model.optimizer
        inner = getattr(optimizer, "optimizers", None)
        return list(inner) if inner is not None else [optimizer]

    def _reduce_optimizer_lr(self, optimizer, epoch, name="") -> bool:
        old_lr = to_float(optimizer.learning_rate)
        # Compared in float32 because the rate is stored as a float32 variable.
        if old_lr > np.float32(self.min_lr):
            new_lr = max(old_lr * self.factor, self.min_lr)
            optimizer.learning_rate = new_lr
            if self.verbose > 0:
                name_str = f" {name}" if name else ""
                print_msg(
                    f"\nEpoch {epoch + 1}: ReduceLROnPlateau reducing{name_str} learning rate "
                    f"to {new_lr}."
                )
            return True
        return False

    def on_train_begin(self, logs=None):
        self._reset()

    def on_epoch_end(self, epoch, logs=None):
        if self.monitor_op is None:
            self._set_monitor_op()
        logs = logs if logs is not None else {}
        optimizers = self._optimizers()
        multi = hasattr(self.model.optimizer, "optimizers")
        for opt in optimizers:
            key = f"learning_rate_{opt.name}" if multi else "learning_rate"
            logs[key] = to_float(opt.learning_rate)

        current = logs.get(self.monitor)
        if current is None:
            warnings.warn(
                f"Learning rate reduction is conditioned on metric `{self.monitor}` which is "
                f"not available. Available metrics are: {','.join(logs)}.",
                stacklevel=2,
            )
            return
        if self.in_cooldown():
            self.cooldown_counter -= 1
            self.wait = 0
        if self._is_improvement(current, self.best):
            self.best = current
            self.wait = 0
        elif not self.in_cooldown():
            self.wait += 1
            if self.wait >= self.patience:
                reduced = False
                for opt in optimizers:
                    name = opt.name if multi else ""
                    reduced = self._reduce_optimizer_lr(opt, epoch, name) or reduced
                if reduced:
                    self.cooldown_counter = self.cooldown
                    self.wait = 0

    def in_cooldown(self) -> bool:
        return self.cooldown_counter > 0
