"""`LambdaCallback`: a callback built from plain functions."""

from __future__ import annotations

from keratron.callbacks.callback import Callback

__all__ = ["LambdaCallback"]


class LambdaCallback(Callback):
    """Calls the given functions at the matching hooks.

    Epoch hooks are called as `f(epoch, logs)`, batch hooks as `f(batch, logs=logs)`, and
    begin/end hooks as `f(logs)`. Any other hook of `Callback` may be given by keyword
    (`on_test_end=...`, `on_predict_batch_end=...`).

    Args:
        on_epoch_begin: called at the start of every epoch.
        on_epoch_end: called at the end of every epoch.
        on_train_begin: called when training starts.
        on_train_end: called when training ends.
        on_train_batch_begin: called before every training batch.
        on_train_batch_end: called after every training batch.
        **kwargs: other hooks by name.

    Raises:
        ValueError: for a keyword that is not a `Callback` hook.

    Example:
        >>> model = keratron.Sequential([keratron.Input((2,)), keratron.layers.Dense(1)])
        >>> model.compile(optimizer="sgd", loss="mse")
        >>> x, y = np.ones((4, 2)), np.zeros((4, 1))
        >>> report = keratron.callbacks.LambdaCallback(
        ...     on_epoch_end=lambda epoch, logs: print(f"epoch {epoch}: {sorted(logs)}"))
        >>> history = model.fit(x, y, epochs=2, callbacks=[report], verbose=0)
        epoch 0: ['loss']
        epoch 1: ['loss']
    """

    def __init__(
        self,
        on_epoch_begin=None,
        on_epoch_end=None,
        on_train_begin=None,
        on_train_end=None,
        on_train_batch_begin=None,
        on_train_batch_end=None,
        **kwargs,
    ):
        super().__init__()
        for name in kwargs:
            if not (name.startswith("on_") and callable(getattr(Callback, name, None))):
                raise ValueError(
                    f"LambdaCallback: `{name}` is not a callback hook; expected one of the "
                    "`on_*` methods of keratron.callbacks.Callback."
                )
        hooks = dict(
            on_epoch_begin=on_epoch_begin,
            on_epoch_end=on_epoch_end,
            on_train_begin=on_train_begin,
            on_train_end=on_train_end,
            on_train_batch_begin=on_train_batch_begin,
            on_train_batch_end=on_train_batch_end,
            **kwargs,
        )
        for name, fn in hooks.items():
            if fn is not None:
                # Instance attributes shadow the no-op methods of the base class.
                setattr(self, name, fn)
