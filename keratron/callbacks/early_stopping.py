"""`EarlyStopping`: stop `fit` once a monitored quantity stops improving."""

from __future__ import annotations

import warnings

import numpy as np

from keratron.callbacks.monitor_callback import MonitorCallback
from keratron.utils.io_utils import print_msg

__all__ = ["EarlyStopping"]


class EarlyStopping(MonitorCallback):
    """Stops training when a monitored quantity has stopped improving.

    At each epoch end the value of `monitor` is compared with the best so far; after
    `patience` epochs without an improvement larger than `min_delta`, `model.stop_training`
    is set and `fit` ends after that epoch.

    Args:
        monitor: the log key to watch. Defaults to "val_loss".
        min_delta: smallest absolute change that counts as an improvement. Defaults to 0.
        patience: epochs without improvement before stopping. Defaults to 0.
        verbose: 0 (silent) or 1 (print a line when stopping or restoring). Defaults to 0.
        mode: "auto", "min" or "max"; "auto" infers the direction from the metric.
        baseline: a value the monitored quantity must beat; epochs that improve on the best
            but not on the baseline still count towards `patience`.
        restore_best_weights: at the end of training, set the weights of the best epoch.
        start_from_epoch: epochs of warm-up before monitoring starts. Defaults to 0.

    Example:
        >>> dense = keratron.layers.Dense(1, kernel_initializer="zeros")
        >>> model = keratron.Sequential([keratron.Input((2,)), dense])
        >>> model.compile(optimizer="sgd", loss="mse")
        >>> x, y = np.ones((4, 2)), np.zeros((4, 1))  # fit from the start: the loss stays 0
        >>> stop = keratron.callbacks.EarlyStopping(monitor="loss", patience=2)
        >>> history = model.fit(x, y, epochs=100, callbacks=[stop], verbose=0)
        >>> len(history.history["loss"]), stop.stopped_epoch
        (3, 2)
    """

    def __init__(
        self,
        monitor="val_loss",
        min_delta=0,
        patience=0,
        verbose=0,
        mode="auto",
        baseline=None,
        restore_best_weights=False,
        start_from_epoch=0,
    ):
        super().__init__(monitor, mode, min_delta=min_delta)
        self.patience = patience
        self.verbose = verbose
        self.baseline = baseline
        self.restore_best_weights = restore_best_weights
        self.start_from_epoch = start_from_epoch
        self.wait = 0
        self.stopped_epoch = 0
        self.best_weights = None
        self.best_epoch = 0

    def on_train_begin(self, logs=None):
        # Reset so one instance can be reused across fit() calls.
        self.wait = 0
        self.stopped_epoch = 0
        self.best = None
        self.best_weights = None
        self.best_epoch = 0

    def on_epoch_end(self, epoch, logs=None):
        if self.monitor_op is None:
            self._set_monitor_op()
        current = self.get_monitor_value(logs)
        if current is None or epoch < self.start_from_epoch:
            return
        if self.restore_best_weights and self.best_weights is None:
            # The first monitored epoch is the best one until another beats it.
            self.best_weights = self._copy_weights()
            self.best_epoch = epoch
        self.wait += 1
        if self._is_improvement(current, self.best):
            self.best = current
            self.best_epoch = epoch
            if self.restore_best_weights:
                self.best_weights = self._copy_weights()
            # Patience restarts only for a value that also beats the baseline.
            if self.baseline is None or self._is_improvement(current, self.baseline):
                self.wait = 0
            return
        if self.wait >= self.patience and epoch > 0:
            self.stopped_epoch = epoch
            self.model.stop_training = True

    def _copy_weights(self) -> list:
        # Copies: arrays that share memory with the variables would follow later updates.
        return [np.array(w, copy=True) for w in self.model.get_weights()]

    def on_train_end(self, logs=None):
        if self.stopped_epoch > 0 and self.verbose > 0:
            print_msg(f"Epoch {self.stopped_epoch + 1}: early stopping")
        if self.restore_best_weights and self.best_weights is not None:
            if self.verbose > 0:
                print_msg(
                    "Restoring model weights from the end of the best epoch: "
                    f"{self.best_epoch + 1}."
                )
            self.model.set_weights(self.best_weights)

    def get_monitor_value(self, logs):
        """The monitored value from `logs`, or None (with a warning) when it is missing."""
        logs = logs or {}
        value = logs.get(self.monitor)
        if value is None:
            warnings.warn(
                f"Early stopping conditioned on metric `{self.monitor}` which is not "
                f"available. Available metrics are: {','.join(logs)}",
                stacklevel=2,
            )
        return value
