"""`BackupAndRestore`: resume an interrupted `fit` where it stopped, as Keras does."""

from __future__ import annotations

import json
import os
import shutil
import warnings

from keratron.callbacks.callback import Callback
from keratron.utils.io_utils import atomic_write

__all__ = ["BackupAndRestore"]


class _UnplacedOptimizerState(ValueError):
    """The backup holds optimizer state that the model's optimizer cannot take."""


def _copy_atomic(src, dst) -> None:
    with atomic_write(dst) as tmp:
        shutil.copyfile(src, tmp)


class BackupAndRestore(Callback):
    """Backs up the model's weights, its optimizer state and the epoch reached into
    `backup_dir`, and restores them when `fit` starts again after a crash.

    The backup is `latest.weights.h5` (Keras 3 layout, with the optimizer's variables) and
    `training_metadata.json` (`{"epoch": ..., "batch": ...}`), the files Keras writes. Every
    write is crash-safe, so a process killed while backing up leaves the previous backup
    readable. Training resumes at the start of the epoch after the last backed-up one; a
    backup whose optimizer state the model's optimizer cannot take raises a `ValueError`
    instead of resuming with a fresh optimizer (Keras warns and trains on).

    Args:
        backup_dir: directory for the backup files (not shared between runs).
        save_freq: "epoch", or a number of batches between backups.
        double_checkpoint: also keep the previous backup (`*.bkp`), used when the latest one
            cannot be read.
        delete_checkpoint: delete `backup_dir` when training finishes normally.

    Example:
        >>> import os, shutil, tempfile
        >>> model = keratron.Sequential([keratron.Input((2,)), keratron.layers.Dense(1)])
        >>> model.compile(optimizer="sgd", loss="mse")
        >>> x, y = np.ones((4, 2)), np.zeros((4, 1))
        >>> tmp = tempfile.mkdtemp()
        >>> backup = keratron.callbacks.BackupAndRestore(tmp, delete_checkpoint=False)
        >>> history = model.fit(x, y, epochs=2, callbacks=[backup], verbose=0)
        >>> sorted(os.listdir(tmp))
        ['latest.weights.h5', 'training_metadata.json']
        >>> # A second run (after a crash, say) resumes after the last backed-up epoch.
        >>> history = model.fit(x, y, epochs=3, callbacks=[backup], verbose=0)
        >>> history.epoch
        [2]
        >>> shutil.rmtree(tmp)
    """

    def __init__(
        self, backup_dir, save_freq="epoch", double_checkpoint=False, delete_checkpoint=True
    ):
        super().__init__()
        if not backup_dir:
            raise ValueError("Empty `backup_dir` argument passed")
        if save_freq != "epoch" and (
            not isinstance(save_freq, int) or isinstance(save_freq, bool) or save_freq < 1
        ):
            raise ValueError(
                f"Invalid value for argument `save_freq`. Received: save_freq={save_freq}. "
                "Expected either 'epoch' or a positive integer value."
            )
        self.backup_dir = os.fspath(backup_dir)
        self.save_freq = save_freq
        self.double_checkpoint = double_checkpoint
        self.delete_checkpoint = delete_checkpoint
        self._batches_seen_since_last_saving = 0
        self._last_batch_seen = 0
        self._current_epoch = 0
        self._weights_path = os.path.join(self.backup_dir, "latest.weights.h5")
        self._training_metadata_path = os.path.join(self.backup_dir, "training_metadata.json")
        self._prev_weights_path = f"{self._weights_path}.bkp"
        self._prev_training_metadata_path = f"{self._training_metadata_path}.bkp"

    def on_train_begin(self, logs=None):
        try:
            self._load_model()
        except _UnplacedOptimizerState:
            raise  # the file is readable: the previous backup would not fit either
        except (OSError, ValueError):
            # The latest backup cannot be read: fall back to the previous one, if kept.
            if not os.path.exists(self._prev_weights_path):
                raise
            _copy_atomic(self._prev_weights_path, self._weights_path)
            if os.path.exists(self._prev_training_metadata_path):
                _copy_atomic(self._prev_training_metadata_path, self._training_metadata_path)
            elif os.path.exists(self._training_metadata_path):
                os.remove(self._training_metadata_path)
            self._load_model()

    def _load_model(self):
        model = self.model
        if not model.built:
            raise ValueError(
                "To use the BackupAndRestore callback, you model must be built before you call "
                f"`fit()`. Model {model} is unbuilt. You can build it beforehand by calling it "
                "on a batch of data."
            )
        metadata = self._read_metadata()
        if os.path.exists(self._weights_path):
            optimizer = getattr(model, "optimizer", None)
            if optimizer is not None and not optimizer.built:
                optimizer.build(model.trainable_variables)
            self._load_weights(model)
        if metadata is not None:
            model._initial_epoch = metadata["epoch"]
            self._current_epoch = metadata["epoch"]

    def _read_metadata(self):
        if not os.path.exists(self._training_metadata_path):
            return None
        with open(self._training_metadata_path) as f:
            try:
                return json.loads(f.read())
            except json.JSONDecodeError as e:
                raise ValueError(
                    f"BackupAndRestore: '{self._training_metadata_path}' is not valid JSON ({e})."
                ) from None

    def _unplaced(self, optimizer, why):
        return _UnplacedOptimizerState(
            f"BackupAndRestore: the backup '{self._weights_path}' holds optimizer state that "
            f"the model's optimizer '{optimizer.name}' cannot take ({why}). Resuming would "
            "train on with a freshly initialized optimizer. Compile the model with the "
            f"optimizer the backup was made with, or delete '{self.backup_dir}' to start over."
        )

    def _load_weights(self, model):
        # Keras warns and trains on with a fresh optimizer when the saved optimizer state does
        # not fit; resuming training is what this callback is for, so here that is an error,
        # and the weights the loader did assign are put back: nothing is half-restored.
        before = model.get_weights()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            model.load_weights(self._weights_path)
        for w in caught:
            if str(w.message).startswith("Skipping variable loading for optimizer"):
                model.set_weights(before)
                raise self._unplaced(model.optimizer, w.message)
        for w in caught:
            warnings.warn(w.message, w.category, stacklevel=4)

    def on_epoch_end(self, epoch, logs=None):
        self._current_epoch = epoch + 1
        self._last_batch_seen = 0
        if self.save_freq == "epoch":
            self._save_model()

    def on_train_batch_end(self, batch, logs=None):
        if self._should_save_on_batch(batch):
            self._save_model()

    def _save_model(self):
        os.makedirs(self.backup_dir, exist_ok=True)
        if self.double_checkpoint and os.path.exists(self._weights_path):
            _copy_atomic(self._weights_path, self._prev_weights_path)
        if self.double_checkpoint and os.path.exists(self._training_metadata_path):
            _copy_atomic(self._training_metadata_path, self._prev_training_metadata_path)
        self.model.save_weights(self._weights_path, overwrite=True)
        metadata = {"epoch": self._current_epoch, "batch": self._last_batch_seen}
        with atomic_write(self._training_metadata_path) as tmp:
            with open(tmp, "w") as f:
                f.write(json.dumps(metadata))

    def _should_save_on_batch(self, batch) -> bool:
        if self.save_freq == "epoch":
            return False
        if batch <= self._last_batch_seen:  # a new epoch
            added = batch + 1
        else:
            added = batch - self._last_batch_seen
        self._batches_seen_since_last_saving += added
        self._last_batch_seen = batch
        if self._batches_seen_since_last_saving >= self.save_freq:
            self._batches_seen_since_last_saving = 0
            return True
        return False

    def on_train_end(self, logs=None):
        if self.delete_checkpoint and os.path.exists(self.backup_dir):
            shutil.rmtree(self.backup_dir)
