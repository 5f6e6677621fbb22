"""`TerminateOnNaN`: stop training at the first batch whose loss is NaN or infinite."""

from __future__ import annotations

import math

from keratron.callbacks.callback import Callback
from keratron.utils.io_utils import print_msg

__all__ = ["TerminateOnNaN"]


class TerminateOnNaN(Callback):
    """Stops training when a batch's loss is NaN or infinite.

    Args:
        raise_error: raise a `RuntimeError` at once instead of setting
            `model.stop_training` (which lets the epoch close and `on_train_end` run).

    Example:
        >>> model = keratron.Sequential([keratron.Input((2,)), keratron.layers.Dense(1)])
        >>> model.compile(optimizer="sgd", loss="mse")
        >>> x, y = np.ones((4, 2)), np.full((4, 1), np.nan)
        >>> stop = keratron.callbacks.TerminateOnNaN()
        >>> history = model.fit(x, y, epochs=10, callbacks=[stop], verbose=0)
        Batch 0: Invalid loss, terminating training
        >>> len(history.history["loss"])
        1
    """

    def __init__(self, raise_error: bool = False):
        super().__init__()
        self.raise_error = raise_error

    def on_batch_end(self, batch, logs=None):
        loss = (logs or {}).get("loss")
        if loss is None:
            return
        loss = float(loss)
        if math.isnan(loss) or math.isinf(loss):
            if self.raise_error:
                raise RuntimeError(
                    f"NaN or Inf loss encountered at batch {batch}. Loss value: {loss}. "
                    "Terminating training immediately."
                )
            print_msg(f"Batch {batch}: Invalid loss, terminating training")
            self.model.stop_training = True
