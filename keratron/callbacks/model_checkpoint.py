"""`ModelCheckpoint`: save the model or its weights during `fit`, as Keras does."""

from __future__ import annotations

import os
import re
import warnings

import numpy as np

from keratron.callbacks.monitor_callback import MonitorCallback
from keratron.utils.io_utils import print_msg

__all__ = ["ModelCheckpoint"]

_WEIGHTS_SUFFIXES = (".weights.h5", ".h5", ".hdf5")
_MODEL_SUFFIXES = (".keras", ".h5", ".hdf5")


class ModelCheckpoint(MonitorCallback):
    """Saves the model (or its weights) at the end of every epoch or every `save_freq`
    batches, optionally only when the monitored quantity improves.

    `filepath` may hold `str.format` fields filled from the epoch number (1-based), the batch
    number and the logs: `"ckpt/{epoch:02d}-{val_loss:.2f}.keras"`. Every file is written
    crash-safely (temporary file, fsync, rename).

    Args:
        filepath: where to save; `.keras` or `.h5` for whole models, `.weights.h5` (Keras 3
            layout) or `.h5` (tf.keras 2 layout) with `save_weights_only=True`.
        monitor: the log key watched by `save_best_only`.
        verbose: 1 prints a line for each save decision.
        save_best_only: save only when `monitor` improves (the file is overwritten unless
            the path has format fields).
        save_weights_only: save only the weights.
        mode: "auto", "min" or "max": the direction of improvement.
        save_freq: "epoch", or a number of batches between saves.
        initial_value_threshold: the value `monitor` must beat for the first save.

    Example:
        >>> import os, shutil, tempfile
        >>> model = keratron.Sequential([keratron.Input((2,)), keratron.layers.Dense(1)])
        >>> model.compile(optimizer="sgd", loss="mse")
        >>> x, y = np.ones((4, 2)), np.zeros((4, 1))
        >>> tmp = tempfile.mkdtemp()
        >>> path = os.path.join(tmp, "best.keras")
        >>> checkpoint = keratron.callbacks.ModelCheckpoint(
        ...     path, monitor="loss", save_best_only=True)
        >>> history = model.fit(x, y, epochs=2, callbacks=[checkpoint], verbose=0)
        >>> keratron.models.load_model(path).count_params()
        3
        >>> shutil.rmtree(tmp)
    """

    def __init__(
        self,
        filepath,
        monitor="val_loss",
        verbose=0,
        save_best_only=False,
        save_weights_only=False,
        mode="auto",
        save_freq="epoch",
        initial_value_threshold=None,
    ):
        super().__init__(monitor, mode, initial_value_threshold)
        self.verbose = verbose
        self.filepath = os.fspath(filepath)
        self.save_best_only = save_best_only
        self.save_weights_only = save_weights_only
        self.save_freq = save_freq
        self._batches_seen_since_last_saving = 0
        self._last_batch_seen = None
        self._current_epoch = 0
        if save_freq != "epoch" and (
            not isinstance(save_freq, int) or isinstance(save_freq, bool) or save_freq < 1
        ):
            raise ValueError(
                f"Unrecognized save_freq: {save_freq}. Expected save_freq are 'epoch' or "
                "positive integer values"
            )
        if save_weights_only:
            if not self.filepath.endswith(_WEIGHTS_SUFFIXES):
                raise ValueError(
                    "When using `save_weights_only=True` in `ModelCheckpoint`, the filepath "
                    "provided must end in `.weights.h5` (Keras weights format) or `.h5` "
                    f"(tf.keras 2 layout). Received: filepath={self.filepath}"
                )
        elif not self.filepath.endswith(_MODEL_SUFFIXES) or self.filepath.endswith(".weights.h5"):
            raise ValueError(
                "The filepath provided must end in `.keras` (Keras model format) or `.h5`. "
                f"Received: filepath={self.filepath}"
            )

    def on_epoch_begin(self, epoch, logs=None):
        self._current_epoch = epoch

    def on_train_batch_end(self, batch, logs=None):
        if self._should_save_on_batch(batch):
            self._save_model(epoch=self._current_epoch, batch=batch, logs=logs)

    def on_epoch_end(self, epoch, logs=None):
        if self.monitor_op is None:
            # Resolved here: compiled metrics exist only once the model has run.
            self._set_monitor_op()
        if self.save_freq == "epoch":
            self._save_model(epoch=epoch, batch=None, logs=logs)

    def _should_save_on_batch(self, batch) -> bool:
        if self.save_freq == "epoch":
            return False
        if self._last_batch_seen is None or batch <= self._last_batch_seen:
            added = batch + 1  # a new epoch: batches count from 0
        else:
            added = batch - self._last_batch_seen
        self._batches_seen_since_last_saving += added
        self._last_batch_seen = batch
        if self._batches_seen_since_last_saving >= self.save_freq:
            self._batches_seen_since_last_saving = 0
            return True
        return False

    def _should_save_model(self, epoch, logs, filepath) -> bool:
        logs = logs or {}
        if not self.save_best_only:
            if self.verbose > 0:
                print_msg(f"\nEpoch {epoch + 1}: saving model to {filepath}")
            return True
        current = logs.get(self.monitor)
        if current is None:
            warnings.warn(f"Can save best model only with {self.monitor} available.", stacklevel=3)
            return True
        if np.ndim(current) > 0:
            warnings.warn(
                "Can save best model only when `monitor` is a scalar value. Received: "
                f"{current}. Falling back to `save_best_only=False`.",
                stacklevel=3,
            )
            return True
        if self.monitor_op is None:
            self._set_monitor_op()
        current = float(np.asarray(current))
        best = "None" if self.best is None else f"{self.best:.5f}"
        if self._is_improvement(current, self.best):
            if self.verbose > 0:
                print_msg(
                    f"\nEpoch {epoch + 1}: {self.monitor} improved from {best} to "
                    f"{current:.5f}, saving model to {filepath}"
                )
            self.best = current
            return True
        if self.verbose > 0:
            print_msg(f"\nEpoch {epoch + 1}: {self.monitor} did not improve from {best}")
        return False

    def _save_model(self, epoch, batch, logs):
        filepath = self._get_file_path(epoch, batch, logs)
        if os.path.isdir(filepath):
            raise OSError(
                "Please specify a non-directory filepath for ModelCheckpoint. Filepath used is "
                f"an existing directory: {filepath}"
            )
        if not self._should_save_model(epoch, logs, filepath):
            return
        dirname = os.path.dirname(filepath)
        if dirname:
            os.makedirs(dirname, exist_ok=True)
        if self.save_weights_only:
            self.model.save_weights(filepath, overwrite=True)
        else:
            self.model.save(filepath, overwrite=True)
        if self.verbose > 0:
            print_msg(f"\nEpoch {epoch + 1}: finished saving model to {filepath}")

    def _get_file_path(self, epoch, batch, logs) -> str:
        logs = dict(logs or {})
        try:
            if batch is None or "batch" in logs:
                return self.filepath.format(epoch=epoch + 1, **logs)
            return self.filepath.format(epoch=epoch + 1, batch=batch + 1, **logs)
        except KeyError as e:
            raise KeyError(
                f'Failed to format this callback filepath: "{self.filepath}". Reason: {e}'
            ) from None

    def _checkpoint_exists(self, filepath) -> bool:
        return os.path.exists(filepath)

    def _get_most_recently_modified_file_matching_pattern(self, pattern):
        """The newest file whose name matches `pattern` (format fields match anything); ties
        go to the largest name. None when nothing matches."""
        dir_name = os.path.dirname(pattern) or "."
        base_regex = "^" + re.sub(r"{.*}", r".*", os.path.basename(pattern)) + "$"
        latest_time, latest, count, largest = 0.0, None, 0, None
        if os.path.isdir(dir_name):
            for name in os.listdir(dir_name):
                if not re.match(base_regex, name):
                    continue
                path = os.path.join(dir_name, name)
                mtime = os.path.getmtime(path)
                if largest is None or path > largest:
                    largest = path
                if mtime > latest_time:
                    latest_time, latest, count = mtime, path, 1
                elif mtime == latest_time:
                    count += 1
        return latest if count == 1 else largest
