"""The `Callback` base class and `CallbackList`, with Keras 3's hooks."""

from __future__ import annotations

__all__ = ["Callback", "CallbackList"]


class Callback:
    """Base class for objects that hook into `fit`, `evaluate` and `predict`.

    Example:
        >>> class PrintLoss(keratron.callbacks.Callback):
        ...     def on_epoch_end(self, epoch, logs=None):
        ...         print(epoch, logs["loss"])
    """

    def __init__(self):
        self.params = {}
        self._model = None

    def set_params(self, params):
        self.params = params

    def set_model(self, model):
        self._model = model

    @property
    def model(self):
        return self._model

    def on_batch_begin(self, batch, logs=None):
        """tf.keras 2 alias of on_train_batch_begin."""

    def on_batch_end(self, batch, logs=None):
        """tf.keras 2 alias of on_train_batch_end."""

    def on_epoch_begin(self, epoch, logs=None):
        pass

    def on_epoch_end(self, epoch, logs=None):
        pass

    def on_train_batch_begin(self, batch, logs=None):
        self.on_batch_begin(batch, logs=logs)

    def on_train_batch_end(self, batch, logs=None):
        self.on_batch_end(batch, logs=logs)

    def on_test_batch_begin(self, batch, logs=None):
        pass

    def on_test_batch_end(self, batch, logs=None):
        pass

    def on_predict_batch_begin(self, batch, logs=None):
        pass

    def on_predict_batch_end(self, batch, logs=None):
        pass

    def on_train_begin(self, logs=None):
        pass

    def on_train_end(self, logs=None):
        pass

    def on_test_begin(self, logs=None):
        pass

    def on_test_end(self, logs=None):
        pass

    def on_predict_begin(self, logs=None):
        pass

    def on_predict_end(self, logs=None):
        pass


def _forward(name):
    # Each hook reaches every callback with the argument convention Keras uses, so callables
    # given to LambdaCallback see the same arguments: epoch hooks get `(epoch, logs)`, batch
    # hooks `(batch, logs=logs)`, begin/end hooks `(logs)`; as in Keras, `logs` is `{}` when
    # the trainer gives none (callbacks written for Keras index it in `on_*_begin`).
    if name.startswith("on_epoch_"):

        def hook(self, epoch, logs=None):
            logs = {} if logs is None else logs
            for cb in self.callbacks:
                getattr(cb, name)(epoch, logs)

    elif name.endswith("batch_begin") or name.endswith("batch_end"):

        def hook(self, batch, logs=None):
            logs = {} if logs is None else logs
            for cb in self.callbacks:
                getattr(cb, name)(batch, logs=logs)

    else:

        def hook(self, logs=None):
            logs = {} if logs is None else logs
            for cb in self.callbacks:
                getattr(cb, name)(logs)

    hook.__name__ = name
    return hook


class CallbackList(Callback):
    """Calls every hook on a list of callbacks; adds History and the progress bar on request,
    as Keras's trainer does."""

    def __init__(self, callbacks=None, add_history=False, add_progbar=False, model=None, **params):
        super().__init__()
        from keratron.callbacks.history import History
        from keratron.callbacks.progbar_logger import ProgbarLogger

        self.callbacks = list(callbacks or [])
        for cb in self.callbacks:
            if not isinstance(cb, Callback):
                raise TypeError(
                    "Every callback must be an instance of keratron.callbacks.Callback. "
                    f"Received: {cb!r}"
                )
        if add_progbar and not any(isinstance(c, ProgbarLogger) for c in self.callbacks):
            self.callbacks.insert(0, ProgbarLogger())
        if add_history:
            self.history = next((c for c in self.callbacks if isinstance(c, History)), None)
            if self.history is None:
                self.history = History()
                self.callbacks.append(self.history)
        if model is not None:
            self.set_model(model)
        if params:
            self.set_params(params)

    def append(self, callback):
        self.callbacks.append(callback)

    def set_params(self, params):
        self.params = params
        for cb in self.callbacks:
            cb.set_params(params)

    def set_model(self, model):
        self._model = model
        for cb in self.callbacks:
            cb.set_model(model)

    def __iter__(self):
        return iter(self.callbacks)

    def implements(self, name: str) -> bool:
        """Whether any callback does something in hook `name` (a method overriding the base
        class's no-op, or a function set on the instance, as LambdaCallback does). The loops
        skip building per-batch logs nobody reads."""
        names = (name, "on_batch_end") if name == "on_train_batch_end" else (name,)
        return any(overrides(cb, n) for cb in self.callbacks for n in names)


def overrides(callback, name: str) -> bool:
    """Whether `callback` does something in hook `name`: a method overriding the base class's
    no-op, or a function set on the instance."""
    return name in vars(callback) or getattr(type(callback), name) is not getattr(Callback, name)


for _name in [n for n in vars(Callback) if n.startswith("on_")]:
    setattr(CallbackList, _name, _forward(_name))
