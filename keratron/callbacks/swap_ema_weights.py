"""`SwapEMAWeights`: evaluate (and checkpoint) with the optimizer's moving averages of the
weights, as `keras.callbacks.SwapEMAWeights`."""

from __future__ import annotations

import numpy as np

from keratron.callbacks.callback import Callback

__all__ = ["SwapEMAWeights"]


class SwapEMAWeights(Callback):
    """Swaps the model's weights with the optimizer's exponential moving averages of them
    (Polyak averaging) for evaluation and prediction, and swaps them back afterwards.

    The optimizer must be built with `use_ema=True` (for a `MultiOptimizer`, at least one of
    its optimizers). The swap is in place: each weight and its average exchange values.

    Args:
        swap_on_epoch: also swap at the end of each epoch (and back at the start of the next),
            so that callbacks after this one, such as `ModelCheckpoint`, see the averages; at
            the end of the last epoch the averages stay in the model.

    Unlike Keras 3.15, whose `on_predict_end` never swaps back (the model keeps the averages
    after `predict`), `predict` here restores the trained weights as `evaluate` does.

    Example:
        >>> model = keratron.Sequential([keratron.Input((2,)), keratron.layers.Dense(1)])
        >>> model.compile(optimizer=keratron.optimizers.SGD(use_ema=True), loss="mse")
        >>> x, y = np.ones((4, 2)), np.zeros((4, 1))
        >>> history = model.fit(x, y, epochs=3, validation_data=(x, y), verbose=0,
        ...                     callbacks=[keratron.callbacks.SwapEMAWeights()])
        >>> # Validated with the averages, which `fit` leaves in the model at its end.
        >>> history.history["val_loss"][-1] == model.evaluate(x, y, verbose=0)
        True
    """

    def __init__(self, swap_on_epoch: bool = False):
        super().__init__()
        self.swap_on_epoch = swap_on_epoch
        self._ema_weights_in_model = False

    def _ema_optimizers(self) -> list:
        optimizer = self.model.optimizer
        optimizer = getattr(optimizer, "inner_optimizer", optimizer)
        if hasattr(optimizer, "optimizers"):
            chosen = [o for o in optimizer.optimizers if getattr(o, "use_ema", False)]
            if not chosen:
                raise ValueError(
                    "SwapEMAWeights must be used when at least one inner optimizer has "
                    "`use_ema=True` set. Received a MultiOptimizer with all inner optimizers "
                    "having `use_ema=False`."
                )
        else:
            chosen = [optimizer]
        for opt in chosen:
            if getattr(opt, "_model_variables_moving_average", None) is None:
                raise ValueError(
                    "SwapEMAWeights must be used when `use_ema=True` is set on the optimizer "
                    "(and after it was built by a training step). Received: "
                    f"use_ema={getattr(opt, 'use_ema', None)}"
                )
        return chosen

    @staticmethod
    def _pairs(optimizer):
        return [
            (v, a)
            for v, a in zip(
                optimizer._trainable_variables, optimizer._model_variables_moving_average
            )
            if a is not None
        ]

    def _swap_variables(self) -> None:
        for optimizer in self._ema_optimizers():
            for var, average in self._pairs(optimizer):
                held = np.array(var.numpy(), copy=True)
                var.assign(average)
                average.assign(held)

    def _finalize_ema_values(self) -> None:
        for optimizer in self._ema_optimizers():
            for var, average in self._pairs(optimizer):
                average.assign(var)

    def on_epoch_begin(self, epoch, logs=None):
        if self.swap_on_epoch and self._ema_weights_in_model:
            self._swap_variables()
            self._ema_weights_in_model = False

    def on_epoch_end(self, epoch, logs=None):
        if self.swap_on_epoch and not self._ema_weights_in_model:
            self._swap_variables()
            self._ema_weights_in_model = True
            if epoch == self.params["epochs"] - 1:
                self._finalize_ema_values()

    def on_test_begin(self, logs=None):
        if not self._ema_weights_in_model:
            self._swap_variables()
            self._ema_weights_in_model = True

    def on_test_end(self, logs=None):
        if self._ema_weights_in_model:
            self._swap_variables()
            self._ema_weights_in_model = False

    def on_predict_begin(self, logs=None):
        self.on_test_begin(logs)

    def on_predict_end(self, logs=None):
        self.on_test_end(logs)
