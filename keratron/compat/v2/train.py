"""`tf.train` (TF2): object-based checkpoints and the checkpoint readers.

Example:
    >>> ckpt = tf.train.Checkpoint(model=model)
    >>> manager = tf.train.CheckpointManager(ckpt, "/tmp/run", max_to_keep=2)
    >>> ckpt.restore(manager.latest_checkpoint)
"""

from keratron.compat.v1.checkpoint import Checkpoint, CheckpointManager
from keratron.compat.v1.saver import (
    get_checkpoint_state,
    latest_checkpoint,
    list_variables,
    load_checkpoint,
    load_variable,
)

__all__ = [
    "Checkpoint",
    "CheckpointManager",
    "get_checkpoint_state",
    "latest_checkpoint",
    "list_variables",
    "load_checkpoint",
    "load_variable",
]
