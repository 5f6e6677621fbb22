"""The training API of `Model`: `compile`, `fit`, `evaluate`, `predict` and the `*_on_batch`
methods, following Keras 3's trainer.

The unit of work is a step method that takes one batch and returns logs: `train_step`
(forward with `training=True` -> loss -> `GradientTape` gradients -> `optimizer.apply` ->
metrics), `test_step` and `predict_step`. Subclasses may override them in the Keras 3 style
(`compute_loss`, `optimizer.apply`, `self.metrics`) or the tf.keras 2 style
(`compiled_loss`, `compiled_metrics`, `optimizer.apply_gradients`).
"""

from __future__ import annotations

import inspect
import warnings

import numpy as np

from keratron import config, ops
from keratron.autodiff import tree
from keratron.autodiff.tape import GradientTape
from keratron.autodiff.tensor import Tensor
from keratron.distribute import hooks as distribute_hooks
from keratron.models import data_adapter
from keratron.models.data_adapter import EpochIterator, unpack_x_y_sample_weight
from keratron.ops.xent import raise_for_invalid_class_ids
from keratron.utils import host_memory, threads
from keratron.utils.threads import matched_threads

__all__ = ["Trainer"]


def _python_logs(logs) -> dict:
    """Logs as a flat dict of Python floats in sorted key order (nested dicts, such as the
    compiled metrics' results, are merged in), as Keras passes them to callbacks."""
    out = {}
    for key, value in sorted((logs or {}).items()):
        if isinstance(value, dict):
            out.update(_python_logs(value))
            continue
        if isinstance(value, Tensor) and value._value.numel() == 1:
            value = float(value._value)  # read by torch: numpy's np.size copies it first
        elif isinstance(value, (np.ndarray, np.generic)) and np.size(value) == 1:
            value = float(np.asarray(value).reshape(()))
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            value = float(value)
        out[key] = value
    return out


def _resolve_verbose(verbose):
    if verbose == "auto":
        return 1
    if verbose not in (0, 1, 2, True, False):
        raise ValueError(f"`verbose` must be 'auto', 0, 1 or 2. Received: verbose={verbose!r}")
    return int(verbose)


def _first_batch_size(x) -> int:
    for t in tree.flatten(x):
        if t is not None and hasattr(t, "shape") and len(t.shape):
            return int(t.shape[0])
    return 1


def _same_device(value, target) -> bool:
    dev = value.device
    return dev.type == target.type and (target.index is None or dev.index == target.index)


def _on_gpu(value) -> bool:
    return value.device.type == "cuda"


def _warn_generator_method(name: str, instead: str) -> None:
    warnings.warn(
        f"`Model.{name}` is deprecated (tf.keras 2; Keras 3 removed it). Use `Model.{instead}`, "
        "which takes generators.",
        DeprecationWarning,
        stacklevel=3,
    )


class _PredictOutputs:
    """`predict`'s batch outputs, gathered. Outputs on a GPU stay there and reach the host once,
    concatenated, when `merged` is called (a transfer per batch would make the host wait for
    each batch and leave the GPU idle while the next one is queued, as Keras's predict keeps
    device tensors until the end); other outputs become numpy arrays as they come."""

    def __init__(self, kept_on_device=_on_gpu):
        self._kept_on_device = kept_on_device
        self.structure = None
        self.buckets = None

    def add(self, out) -> None:
        flat = [self._entry(o) for o in tree.flatten(out)]
        if self.buckets is None:
            self.structure, self.buckets = out, [[f] for f in flat]
        else:
            for bucket, f in zip(self.buckets, flat):
                bucket.append(f)

    def _entry(self, o):
        if o is None:
            return None
        if isinstance(o, Tensor) and self._kept_on_device(o._value):
            return o
        return np.asarray(o)

    def merged(self):
        import torch

        merged = []
        for bucket in self.buckets:
            if isinstance(bucket[0], Tensor):
                merged.append(np.asarray(Tensor(torch.cat([t._value for t in bucket], 0))))
            else:
                merged.append(np.concatenate(bucket, axis=0))
        return tree.pack_sequence_as(self.structure, merged)


class Trainer:
    """Mixin giving `Model` its training loop (see the module docstring)."""

    def __init__(self):
        self.compiled = False
        self.optimizer = None
        self.loss = None
        self.stop_training = False
        self.history = None
        self.steps_per_execution = 1
        self.train_function = None
        self.test_function = None
        self.predict_function = None
        self._run_eagerly = False
        self._jit_compile = False
        self._compile_loss = None
        self._compile_metrics = None
        self._loss_tracker = None
        self._compile_config = None
        self.__dict__.setdefault("_metrics", [])
        self._in_fit = False
        self._eval_iterator = None
        # distribute: a model made in a strategy's scope trains under that strategy.
        self._distribute_strategy = distribute_hooks.strategy_in_scope()

    @property
    def distribute_strategy(self):
        """The strategy this model trains under (the default one-replica strategy if none)."""
        from keratron.distribute import get_strategy

        return self.__dict__.get("_distribute_strategy") or get_strategy()

    # ------------------------------------------------------------------ compile
    def compile(
        self,
        optimizer="rmsprop",
        loss=None,
        loss_weights=None,
        metrics=None,
        weighted_metrics=None,
        run_eagerly=False,
        steps_per_execution=1,
        jit_compile="auto",
        auto_scale_loss=True,
    ):
        """Configures the model for training.

        Args:
            optimizer: an optimizer name ("sgd", "adam", ...) or instance.
            loss: a loss name, function or `Loss`; a list or dict for several outputs.
            loss_weights: a float, or a list / dict with one weight per output.
            metrics: metric names, functions or instances: a list, or a list / dict per
                output. "accuracy" picks binary, categorical or sparse accuracy from shapes.
            weighted_metrics: metrics that also receive `sample_weight` / `class_weight`.
            run_eagerly: run the steps as plain Python (no graph tracing).
            steps_per_execution: batches processed per call of the step function.
            jit_compile: kept for Keras compatibility; "auto" resolves to False.
            auto_scale_loss: under the "mixed_float16" policy, wrap the optimizer in a
                `LossScaleOptimizer` (as Keras does).

        Example:
            >>> model = keratron.Sequential(
            ...     [keratron.Input((4,)), keratron.layers.Dense(3, activation="softmax")])
            >>> model.compile(optimizer="adam", loss="sparse_categorical_crossentropy",
            ...               metrics=["accuracy"])
            >>> type(model.optimizer).__name__
            'Adam'
        """
        from keratron import metrics as metrics_module
        from keratron import optimizers
        from keratron.models.compile_utils import CompileLoss, CompileMetrics

        if int(steps_per_execution) < 1:
            raise ValueError(
                "`steps_per_execution` must be a positive integer. "
                f"Received: steps_per_execution={steps_per_execution}"
            )
        self.optimizer = optimizers.get(optimizer)
        if (
            auto_scale_loss
            and self.optimizer is not None
            and self.dtype_policy.name == "mixed_float16"
            and not isinstance(self.optimizer, optimizers.LossScaleOptimizer)
        ):
            # As Keras: float16 gradients underflow without dynamic loss scaling.
            self.optimizer = optimizers.LossScaleOptimizer(
                self.optimizer, name="loss_scale_optimizer"
            )
        output_names = getattr(self, "output_names", None)
        if loss is not None:
            self._compile_loss = CompileLoss(loss, loss_weights, output_names=output_names)
            self.loss = loss
        if metrics is not None or weighted_metrics is not None:
            self._compile_metrics = CompileMetrics(
                metrics, weighted_metrics, output_names=output_names, losses=loss
            )
        self._jit_compile = False if jit_compile == "auto" or run_eagerly else bool(jit_compile)
        self._run_eagerly = bool(run_eagerly)
        self.stop_training = False
        self.compiled = True
        self._loss_tracker = metrics_module.Mean(name="loss")
        self.steps_per_execution = int(steps_per_execution)
        self.train_function = self.test_function = self.predict_function = None
        self._compile_config = {
            "optimizer": optimizer,
            "loss": loss,
            "loss_weights": loss_weights,
            "metrics": metrics,
            "weighted_metrics": weighted_metrics,
            "run_eagerly": run_eagerly,
            "steps_per_execution": steps_per_execution,
            "jit_compile": jit_compile,
        }
        distribute_hooks.attach(self)  # distribute: the scope's strategy, if any

    @property
    def run_eagerly(self) -> bool:
        return self._run_eagerly

    @run_eagerly.setter
    def run_eagerly(self, value):
        self._run_eagerly = bool(value)
        self.train_function = self.test_function = self.predict_function = None

    def _maybe_compiled(self, step):
        """`step` traced and compiled with keratron.function, unless run_eagerly or the model
        holds a host-side preprocessing layer (lookups, hashing, text vectorization compute on
        numpy, which a traced step cannot run)."""
        from keratron.layers.hashing import HostLayer

        if self._run_eagerly or any(isinstance(x, HostLayer) for x in self._flatten_layers()):
            return step
        from keratron.autodiff.function import function

        # On CUDA each step replays as one CUDA graph when its plan allows (config.cuda_graphs).
        return function(step, cuda_graphs=True)

    @property
    def jit_compile(self) -> bool:
        return self._jit_compile

    @jit_compile.setter
    def jit_compile(self, value):
        self._jit_compile = bool(value)

    def get_compile_config(self) -> dict:
        """The `compile()` arguments, serialized (empty before `compile`)."""
        if not self.compiled or self._compile_config is None:
            return {}
        from keratron import losses, metrics, optimizers

        def ser(value, module):
            if value is None or isinstance(value, (str, int, float, bool)):
                return value
            if isinstance(value, dict):
                return {k: ser(v, module) for k, v in value.items()}
            if isinstance(value, (list, tuple)):
                return [ser(v, module) for v in value]
            return module.serialize(value)

        c = self._compile_config
        return {
            "optimizer": ser(self.optimizer, optimizers),
            "loss": ser(c["loss"], losses),
            "loss_weights": c["loss_weights"],
            "metrics": ser(c["metrics"], metrics),
            "weighted_metrics": ser(c["weighted_metrics"], metrics),
            "run_eagerly": c["run_eagerly"],
            "steps_per_execution": c["steps_per_execution"],
            "jit_compile": c["jit_compile"],
        }

    def compile_from_config(self, config):
        """Calls `compile` with the arguments saved by `get_compile_config`."""
        if not config:
            return
        from keratron import losses, metrics, optimizers

        def de(value, module):
            if isinstance(value, dict) and "class_name" in value:
                return module.deserialize(value)
            if isinstance(value, dict):
                return {k: de(v, module) for k, v in value.items()}
            if isinstance(value, list):
                return [de(v, module) for v in value]
            return value

        config = dict(config)
        self.compile(
            optimizer=de(config.get("optimizer", "rmsprop"), optimizers),
            loss=de(config.get("loss"), losses),
            loss_weights=config.get("loss_weights"),
            metrics=de(config.get("metrics"), metrics),
            weighted_metrics=de(config.get("weighted_metrics"), metrics),
            run_eagerly=config.get("run_eagerly", False),
            steps_per_execution=config.get("steps_per_execution", 1),
            jit_compile=config.get("jit_compile", "auto"),
        )

    def _assert_compile_called(self, method_name):
        if not self.compiled:
            raise ValueError(f"You must call `compile()` before calling `{method_name}()`.")

    # ------------------------------------------------------------------ metrics
    @property
    def metrics(self) -> list:
        """The loss tracker ("loss"), the compiled metrics, the per-output loss trackers,
        then metrics assigned as attributes (Keras 3's order)."""
        out = []
        if self.compiled:
            if self._loss_tracker is not None:
                out.append(self._loss_tracker)
            if self._compile_metrics is not None:
                out.append(self._compile_metrics)
            if self._compile_loss is not None:
                out.extend(self._compile_loss.metrics)
        out.extend(m for m in self._metrics if not any(m is o for o in out))
        return out

    @property
    def metrics_names(self) -> list:
        return [m.name for m in self.metrics]

    @property
    def metrics_variables(self) -> list:
        out = []
        for m in self.metrics:
            out.extend(m.variables)
        return out

    def reset_metrics(self):
        """Resets the state of every metric in `model.metrics`."""
        for m in self.metrics:
            m.reset_state()

    @property
    def compiled_loss(self):
        """tf.keras 2's callable loss container (see `LegacyCompiledLoss`)."""
        from keratron.models.compile_utils import LegacyCompiledLoss

        return LegacyCompiledLoss(self)

    @property
    def compiled_metrics(self):
        """tf.keras 2's metrics container (see `LegacyCompiledMetrics`)."""
        from keratron.models.compile_utils import LegacyCompiledMetrics

        return LegacyCompiledMetrics(self)

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        """The compiled loss plus `model.losses` (regularization and `add_loss` terms).

        Example:
            >>> model = keratron.Sequential(
            ...     [keratron.Input((2,)), keratron.layers.Dense(1, kernel_initializer="ones")])
            >>> model.compile(loss="mse")
            >>> x, y = np.ones((4, 2), "float32"), np.zeros((4, 1), "float32")
            >>> float(model.compute_loss(y=y, y_pred=model(x)))
            4.0
        """
        del x, training
        terms = []
        if self._compile_loss is not None:
            value = self._compile_loss(y, y_pred, sample_weight)
            if value is not None:
                terms.append(value)
        for loss in self.losses:
            if "float" not in loss.dtype:
                loss = ops.cast(loss, "float32")
            terms.append(ops.sum(loss))
        if not terms:
            raise ValueError("No loss to compute. Provide a `loss` argument in `compile()`.")
        total = terms[0]
        for t in terms[1:]:
            total = ops.add(total, t)
        return total

    def _compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        params = inspect.signature(self.compute_loss).parameters
        if "training" in params:
            return self.compute_loss(x, y, y_pred, sample_weight, training=training)
        return self.compute_loss(x, y, y_pred, sample_weight)

    def compute_metrics(self, x, y, y_pred, sample_weight=None) -> dict:
        """Updates the compiled metrics and returns every metric's current result.

        Example:
            >>> model = keratron.Sequential(
            ...     [keratron.Input((2,)), keratron.layers.Dense(1, kernel_initializer="ones")])
            >>> model.compile(loss="mse", metrics=["mae"])
            >>> x, y = np.ones((4, 2), "float32"), np.zeros((4, 1), "float32")
            >>> logs = model.compute_metrics(x, y, model(x))
            >>> float(logs["mae"])
            2.0
        """
        del x
        if self._compile_metrics is not None:
            self._compile_metrics.update_state(y, y_pred, sample_weight)
        return self.get_metrics_result()

    def get_metrics_result(self) -> dict:
        """`{name: result}` for every metric, dict results merged in."""
        out = {}
        for m in self.metrics:
            if m is self._compile_metrics and not m.built:
                continue
            result = m.result()
            if isinstance(result, dict):
                out.update(result)
            else:
                out[m.name] = result
        return out

    # ------------------------------------------------------------------ steps
    def _to_model_device(self, batch):
        """Moves a batch's tensors to the device of the model's weights (or the default
        device before the model has weights), as each batch enters a step."""
        import torch

        from keratron import config

        target = getattr(self, "_batch_device", None)
        if target is None:
            # Looked up once: walking every layer's weights on each batch costs more than the
            # step itself for small models.
            weights = self.weights
            target = weights[0]._value.device if weights else torch.device(config.default_device())
            if weights:
                self._batch_device = target

        if type(batch) is tuple and all(
            t is None or (type(t) is Tensor and _same_device(t._value, target)) for t in batch
        ):
            return batch  # `(x, y, sample_weight)` already there: the common case on the CPU
        to_cuda = target.type == "cuda"

        def move(t):
            if isinstance(t, Tensor) and not _same_device(t._value, target):
                value = t._value
                if to_cuda and value.device.type == "cpu":
                    # From pageable memory a copy to the GPU waits for the GPU to go idle; from
                    # pinned memory it is queued behind the previous step's kernels instead.
                    return Tensor(value.pin_memory().to(target, non_blocking=True))
                return Tensor(value.to(target))
            return t

        return tree.map_structure(move, batch)

    def train_step(self, data) -> dict:
        """One optimization step on a batch `(x, y, sample_weight)`; returns the logs."""
        x, y, sample_weight = unpack_x_y_sample_weight(data)
        with GradientTape() as tape:
            y_pred = self(x, training=True)
            loss = self._compute_loss(
                x=x, y=y, y_pred=y_pred, sample_weight=sample_weight, training=True
            )
            scaled = self.optimizer.scale_loss(loss) if self.optimizer is not None else loss
        self._loss_tracker.update_state(loss, sample_weight=_first_batch_size(x))
        variables = self.trainable_variables
        if variables:
            grads = tape.gradient(scaled, variables)
            self.optimizer.apply(grads, variables)
        else:
            warnings.warn("The model does not have any trainable weights.", stacklevel=2)
        return self.compute_metrics(x, y, y_pred, sample_weight=sample_weight)

    def test_step(self, data) -> dict:
        """Loss and metrics on one batch, no update; returns the logs."""
        x, y, sample_weight = unpack_x_y_sample_weight(data)
        y_pred = self(x, training=False)
        loss = self._compute_loss(
            x=x, y=y, y_pred=y_pred, sample_weight=sample_weight, training=False
        )
        self._loss_tracker.update_state(loss, sample_weight=_first_batch_size(x))
        return self.compute_metrics(x, y, y_pred, sample_weight=sample_weight)

    def predict_step(self, data):
        """The model's outputs for one batch."""
        x, _, _ = unpack_x_y_sample_weight(data)
        return self(x, training=False)

    def make_train_function(self, force=False):
        """The function `fit` calls on each group of `steps_per_execution` batches."""
        if self.train_function is not None and not force:
            return self.train_function

        step = self._maybe_compiled(self.train_step)

        def train_function(batches):
            logs = {}
            for batch in batches:
                batch = distribute_hooks.local_batch(self, batch, "train")  # distribute
                if batch is None:
                    continue
                logs = step(self._to_model_device(batch))
            return distribute_hooks.train_logs(self, logs)  # distribute: global metrics

        self.train_function = train_function
        return train_function

    def make_test_function(self, force=False):
        if self.test_function is not None and not force:
            return self.test_function

        step = self._maybe_compiled(self.test_step)

        def test_function(batches):
            logs = {}
            for batch in batches:
                batch = distribute_hooks.local_batch(self, batch, "test")  # distribute
                if batch is None:
                    continue
                logs = step(self._to_model_device(batch))
            return distribute_hooks.test_logs(self, logs)  # distribute: global metrics

        self.test_function = test_function
        return test_function

    def make_predict_function(self, force=False):
        if self.predict_function is not None and not force:
            return self.predict_function

        step = self._maybe_compiled(self.predict_step)

        def predict_function(batches):
            # distribute: each worker predicts its slice; the slices are gathered in order.
            return [
                distribute_hooks.gather_outputs(
                    self,
                    step(self._to_model_device(distribute_hooks.local_batch(self, b, "predict"))),
                )
                for b in batches
            ]

        self.predict_function = predict_function
        return predict_function

    # ------------------------------------------------------------------ loops
    def _callback_list(self, callbacks, verbose, epochs, steps, add_history=False):
        from keratron import callbacks as callbacks_module

        # distribute: progress bar and writing callbacks run on worker 0 only.
        callbacks, verbose = distribute_hooks.worker_callbacks(self, callbacks, verbose)
        if isinstance(callbacks, callbacks_module.CallbackList):
            return callbacks
        return callbacks_module.CallbackList(
            callbacks,
            add_history=add_history,
            add_progbar=verbose != 0,
            model=self,
            verbose=verbose,
            epochs=epochs,
            steps=steps,
        )

    def _get_metrics_result_or_logs(self, logs):
        # A custom train_step may return its own logs: keep them unless they name exactly
        # the model's metrics, whose epoch-wide results are then used.
        results = distribute_hooks.metrics_result(self)  # distribute: summed over workers
        if isinstance(logs, dict) and set(_python_logs(logs)) == set(_python_logs(results)):
            return results
        return logs

    @matched_threads
    def fit(
        self,
        x=None,
        y=None,
        batch_size=None,
        epochs=1,
        verbose="auto",
        callbacks=None,
        validation_split=0.0,
        validation_data=None,
        shuffle=True,
        class_weight=None,
        sample_weight=None,
        initial_epoch=0,
        steps_per_epoch=None,
        validation_steps=None,
        validation_batch_size=None,
        validation_freq=1,
    ):
        """Trains the model for a number of epochs; returns the `History`.

        Args:
            x: inputs: arrays (numpy or Tensors, a list / dict for several inputs), a Python
                generator or iterable of `(x, y[, sample_weight])` batches, or a PyDataset.
            y: targets, for array `x`.
            batch_size: samples per step for array data (default 32).
            epochs: the epoch index to stop at (training starts at `initial_epoch`).
            verbose: "auto" (= 1, progress bar), 0 (silent), 1, or 2 (one line per epoch).
            callbacks: a list of `keratron.callbacks.Callback`.
            validation_split: fraction of array data held out, taken from the end before
                shuffling.
            validation_data: `(x_val, y_val[, sample_weight])`, or a generator / PyDataset.
            shuffle: shuffle array data each epoch (or "batch" to shuffle within batches).
            class_weight: {class index: weight}, multiplying each sample's loss.
            sample_weight: per-sample weights for array data.
            initial_epoch: the epoch to start from.
            steps_per_epoch: batches per epoch (default: one pass over the data).
            validation_steps: batches per validation run.
            validation_batch_size: batch size for validation (default `batch_size`).
            validation_freq: validate every n epochs, or on the epochs in a list.

        Example:
            >>> model = keratron.Sequential([keratron.Input((2,)), keratron.layers.Dense(1)])
            >>> model.compile(optimizer="sgd", loss="mse")
            >>> x_train, y_train = np.ones((64, 2), "float32"), np.zeros((64, 1), "float32")
            >>> history = model.fit(x_train, y_train, batch_size=32, epochs=5, verbose=0)
            >>> len(history.history["loss"])
            5
        """
        self._assert_compile_called("fit")
        cap = config.max_epochs()  # a debugging cap, as Keras's
        if cap and cap < epochs:
            warnings.warn(f"Limiting epochs to {cap}", stacklevel=2)
            epochs = cap
        host_memory.keep_freed_host_memory()
        verbose = _resolve_verbose(verbose)
        if validation_split and validation_data is None:
            (x, y, sample_weight), validation_data = data_adapter.train_validation_split(
                (x, y, sample_weight), validation_split=validation_split
            )
        if validation_data is not None:
            val_x, val_y, val_sw = unpack_x_y_sample_weight(validation_data)
        iterator = EpochIterator(
            x,
            y,
            sample_weight,
            batch_size=batch_size,
            steps_per_epoch=steps_per_epoch,
            shuffle=shuffle,
            class_weight=class_weight,
            steps_per_execution=self.steps_per_execution,
        )
        callbacks = self._callback_list(
            callbacks, verbose, epochs, iterator.num_batches, add_history=True
        )
        self.stop_training = False
        self._eval_iterator = None
        train_function = self.make_train_function()
        batch_end = callbacks.implements("on_train_batch_end")
        training_logs = {}
        self._in_fit = True
        try:
            callbacks.on_train_begin()
            distribute_hooks.sync_replicas(self)  # distribute: worker 0's weights everywhere
            # A callback restoring a backup (BackupAndRestore) sets the epoch to resume from.
            initial_epoch = getattr(self, "_initial_epoch", None) or initial_epoch
            self._initial_epoch = None
            for epoch in range(initial_epoch, epochs):
                self.reset_metrics()
                callbacks.on_epoch_begin(epoch)
                logs = None
                for begin, end, batches in iterator:
                    callbacks.on_train_batch_begin(begin)
                    logs = train_function(batches)
                    if batch_end:
                        callbacks.on_train_batch_end(end, _python_logs(logs))
                    if self.stop_training:
                        break
                if logs is None:
                    warnings.warn(
                        "Your input ran out of data: epoch "
                        f"{epoch + 1} received no batch; stopping training.",
                        stacklevel=2,
                    )
                    break
                # Out-of-range sparse labels met on a GPU surface here, read once an epoch.
                raise_for_invalid_class_ids()
                epoch_logs = _python_logs(self._get_metrics_result_or_logs(logs))
                if validation_data is not None and self._should_eval(epoch, validation_freq):
                    if self._eval_iterator is None:
                        self._eval_iterator = EpochIterator(
                            val_x,
                            val_y,
                            val_sw,
                            batch_size=validation_batch_size
                            or data_adapter.validation_batch_size(val_x, batch_size),
                            steps_per_epoch=validation_steps,
                            shuffle=False,
                            steps_per_execution=self.steps_per_execution,
                        )
                    val_logs = self.evaluate(
                        callbacks=callbacks, return_dict=True, _use_cached_eval_dataset=True
                    )
                    epoch_logs.update({f"val_{k}": v for k, v in val_logs.items()})
                    epoch_logs = dict(sorted(epoch_logs.items()))
                callbacks.on_epoch_end(epoch, epoch_logs)
                training_logs = epoch_logs
                if self.stop_training:
                    break
            if self.optimizer is not None and hasattr(self.optimizer, "finalize_variable_values"):
                self.optimizer.finalize_variable_values(self.trainable_variables)
            callbacks.on_train_end(logs=training_logs)
        finally:
            self._in_fit = False
            self._eval_iterator = None
        history = getattr(callbacks, "history", None)
        if history is None:
            from keratron.callbacks import History

            history = next((c for c in callbacks if isinstance(c, History)), None)
        self.history = history
        return history

    @staticmethod
    def _should_eval(epoch, validation_freq) -> bool:
        epoch = epoch + 1
        if isinstance(validation_freq, int):
            if validation_freq < 1:
                raise ValueError(
                    f"`validation_freq` must be a positive integer or a list of epochs. "
                    f"Received: validation_freq={validation_freq}"
                )
            return epoch % validation_freq == 0
        if isinstance(validation_freq, (list, tuple, set)):
            return epoch in validation_freq
        raise ValueError(
            "Expected `validation_freq` to be a list or int. Received: "
            f"validation_freq={validation_freq!r} of type {type(validation_freq).__name__}."
        )

    @matched_threads
    def evaluate(
        self,
        x=None,
        y=None,
        batch_size=None,
        verbose="auto",
        sample_weight=None,
        steps=None,
        callbacks=None,
        return_dict=False,
        **kwargs,
    ):
        """Returns the loss and metrics on the given data (one pass, no updates).

        Returns a scalar (loss only), a list (loss then metrics, in `metrics_names`
        order) or, with `return_dict=True`, a dict.

        Example:
            >>> model = keratron.Sequential(
            ...     [keratron.Input((2,)), keratron.layers.Dense(1, kernel_initializer="ones")])
            >>> model.compile(loss="mse", metrics=["mae"])
            >>> x_test, y_test = np.ones((4, 2), "float32"), np.zeros((4, 1), "float32")
            >>> model.evaluate(x_test, y_test, verbose=0, return_dict=True)
            {'loss': 4.0, 'mae': 2.0}
        """
        use_cached = kwargs.pop("_use_cached_eval_dataset", False)
        if kwargs:
            raise ValueError(f"Arguments not recognized: {kwargs}")
        self._assert_compile_called("evaluate")
        host_memory.keep_freed_host_memory()
        verbose = _resolve_verbose(verbose)
        if use_cached:
            iterator = self._eval_iterator
        else:
            iterator = EpochIterator(
                x,
                y,
                sample_weight,
                batch_size=batch_size,
                steps_per_epoch=steps,
                shuffle=False,
                steps_per_execution=self.steps_per_execution,
            )
        callbacks = self._callback_list(callbacks, verbose, 1, iterator.num_batches)
        test_function = self.make_test_function()
        distribute_hooks.sync_replicas(self, training=False)  # distribute
        self.stop_evaluating = False
        callbacks.on_test_begin()
        self.reset_metrics()
        logs = {}
        batch_end = callbacks.implements("on_test_batch_end")
        for begin, end, batches in iterator:
            callbacks.on_test_batch_begin(begin)
            logs = test_function(batches)
            if batch_end:
                callbacks.on_test_batch_end(end, _python_logs(logs))
            if self.stop_evaluating:
                break
        logs = _python_logs(self._get_metrics_result_or_logs(logs))
        callbacks.on_test_end(logs)
        if return_dict:
            return logs
        return self._flatten_metrics_in_order(logs)

    def _flatten_metrics_in_order(self, logs):
        from keratron.models.compile_utils import CompileMetrics

        names = []
        for m in self.metrics:
            if isinstance(m, CompileMetrics):
                names.extend(sub.name for sub in m.metrics)
            else:
                names.append(m.name)
        results = [logs[n] for n in names if n in logs]
        results.extend(logs[k] for k in sorted(logs) if k not in names)
        return results[0] if len(results) == 1 else results

    @matched_threads
    def predict(self, x, batch_size=None, verbose="auto", steps=None, callbacks=None):
        """The model's outputs on `x` as numpy arrays (same structure as the outputs).

        Example:
            >>> model = keratron.Sequential(
            ...     [keratron.Input((4,)), keratron.layers.Dense(3, activation="softmax")])
            >>> probs = model.predict(np.ones((256, 4), "float32"), batch_size=128, verbose=0)
            >>> probs.shape
            (256, 3)
        """
        host_memory.keep_freed_host_memory()
        verbose = _resolve_verbose(verbose)
        iterator = EpochIterator(
            x,
            batch_size=batch_size,
            steps_per_epoch=steps,
            shuffle=False,
            steps_per_execution=self.steps_per_execution,
        )
        callbacks = self._callback_list(callbacks, verbose, 1, iterator.num_batches)
        predict_function = self.make_predict_function()
        distribute_hooks.sync_replicas(self, training=False)  # distribute
        self.stop_predicting = False
        callbacks.on_predict_begin()
        collected = _PredictOutputs()
        workers = self._predict_workers(callbacks, iterator)
        if workers > 1:
            # Beside busy processes: whole batches on threads that each take the next one;
            # the progress bar, the only batch hook here, sees them in order as they finish.
            results = threads.ordered_map(
                lambda step: (step[0], step[1], predict_function(step[2])), iterator, workers
            )
            for begin, end, outs in results:
                callbacks.on_predict_batch_begin(begin)
                for out in outs:
                    collected.add(out)
                    callbacks.on_predict_batch_end(end, {"outputs": out})
        else:
            for begin, end, batches in iterator:
                callbacks.on_predict_batch_begin(begin)
                for out in predict_function(batches):
                    collected.add(out)
                    callbacks.on_predict_batch_end(end, {"outputs": out})
                if self.stop_predicting:
                    break
        callbacks.on_predict_end()
        if collected.buckets is None:
            raise ValueError(
                "Unexpected result of `predict_function` (empty batch_outputs): the input "
                "produced no batch."
            )
        return collected.merged()

    def _predict_workers(self, callbacks, iterator) -> int:
        """Threads for `predict`'s batches: `threads.batch_workers()` for a model on the CPU
        with several batches, one process, independent batches (the built-in `predict_step`,
        no stateful layer, whose state runs from batch to batch), and no callback but the
        progress bar at batch level (its batches then finish before their begin hooks run);
        else 1."""
        workers = threads.batch_workers()
        if workers < 2 or not (iterator.num_batches or 0) > 1:
            return 1
        if distribute_hooks.model_strategy(self) is not None:
            return 1
        if getattr(type(self), "predict_step", None) is not Trainer.predict_step:
            return 1
        if any(getattr(layer, "stateful", False) for layer in self._flatten_layers()):
            return 1
        weights = self.weights
        device = weights[0]._value.device.type if weights else config.default_device()
        if device != "cpu":
            return 1
        from keratron.callbacks import ProgbarLogger
        from keratron.callbacks.callback import overrides

        for hook in ("on_predict_batch_begin", "on_predict_batch_end"):
            if any(
                overrides(c, hook) and not isinstance(c, ProgbarLogger) for c in callbacks.callbacks
            ):
                return 1
        return workers

    # ------------------------------------------------------------------ single batches
    def train_on_batch(self, x, y=None, sample_weight=None, class_weight=None, return_dict=False):
        """One training step on one batch; returns the batch's loss and metrics.

        Example:
            >>> model = keratron.Sequential(
            ...     [keratron.Input((2,)), keratron.layers.Dense(1, kernel_initializer="ones")])
            >>> model.compile(optimizer="sgd", loss="mse")
            >>> x_batch, y_batch = np.ones((4, 2), "float32"), np.zeros((4, 1), "float32")
            >>> model.train_on_batch(x_batch, y_batch)
            4.0
        """
        self._assert_compile_called("train_on_batch")
        if class_weight is not None:
            if sample_weight is not None:
                raise ValueError(
                    "Arguments `sample_weight` and `class_weight` cannot be specified at the "
                    "same time."
                )
            sample_weight = data_adapter.class_weight_to_sample_weights(y, class_weight)
        batch = data_adapter._convert_batch((x, y, sample_weight))
        self.reset_metrics()
        logs = _python_logs(self.make_train_function()([batch]))
        return logs if return_dict else self._flatten_metrics_in_order(logs)

    def test_on_batch(self, x, y=None, sample_weight=None, return_dict=False):
        """Loss and metrics on one batch, without updating the model."""
        self._assert_compile_called("test_on_batch")
        batch = data_adapter._convert_batch((x, y, sample_weight))
        self.reset_metrics()
        logs = _python_logs(self.make_test_function()([batch]))
        return logs if return_dict else self._flatten_metrics_in_order(logs)

    def predict_on_batch(self, x):
        """The model's outputs on one batch, as numpy arrays."""
        batch = data_adapter._convert_batch((x,))
        out = self.make_predict_function()([batch])[0]
        return tree.map_structure(lambda o: None if o is None else np.asarray(o), out)

    # tf.keras 2's generator methods (removed in Keras 3): `fit` & co. take generators.
    def fit_generator(
        self,
        generator,
        steps_per_epoch=None,
        epochs=1,
        verbose=1,
        callbacks=None,
        validation_data=None,
        validation_steps=None,
        validation_freq=1,
        class_weight=None,
        max_queue_size=10,
        workers=1,
        use_multiprocessing=False,
        shuffle=True,
        initial_epoch=0,
    ):
        """tf.keras 2's `fit_generator`: `fit` on the generator (a PyDataset, `Sequence` or
        Python generator). The queue and worker arguments are accepted and not used: give
        a PyDataset `workers=` to prefetch."""
        _warn_generator_method("fit_generator", "fit")
        return self.fit(
            generator,
            steps_per_epoch=steps_per_epoch,
            epochs=epochs,
            verbose=verbose,
            callbacks=callbacks,
            validation_data=validation_data,
            validation_steps=validation_steps,
            validation_freq=validation_freq,
            class_weight=class_weight,
            shuffle=shuffle,
            initial_epoch=initial_epoch,
        )

    def evaluate_generator(
        self,
        generator,
        steps=None,
        callbacks=None,
        max_queue_size=10,
        workers=1,
        use_multiprocessing=False,
        verbose=0,
    ):
        """tf.keras 2's `evaluate_generator`: `evaluate` on the generator."""
        _warn_generator_method("evaluate_generator", "evaluate")
        return self.evaluate(generator, steps=steps, callbacks=callbacks, verbose=verbose)

    def predict_generator(
        self,
        generator,
        steps=None,
        callbacks=None,
        max_queue_size=10,
        workers=1,
        use_multiprocessing=False,
        verbose=0,
    ):
        """tf.keras 2's `predict_generator`: `predict` on the generator."""
        _warn_generator_method("predict_generator", "predict")
        return self.predict(generator, steps=steps, callbacks=callbacks, verbose=verbose)
