"""`Estimator`: TensorFlow's train / evaluate / predict / export loop around a `model_fn`.

Each mode's `model_fn` is traced once into a graph (see `_tracing.py`) and replayed per
step. State moves between modes and processes through checkpoints, as in TensorFlow:
`train` resumes from the latest checkpoint in `model_dir` (or warm-starts) and saves one
when it starts, periodically and when it ends; `evaluate`, `predict` and
`export_saved_model` load the latest checkpoint. Within one Estimator object the traced
graphs and their variables are kept, and a checkpoint this object wrote or read last is not
read again.
"""

from __future__ import annotations

import collections
import copy
import inspect
import logging
import math
import os
import re
import tempfile

import numpy as np

from keratron.autodiff import tree
from keratron.autodiff.tensor import Tensor, Variable, mark_written
from keratron.estimator import checkpoint as ckpt_lib
from keratron.estimator import distribute_hooks
from keratron.estimator import hooks as hooks_lib
from keratron.estimator._tracing import (
    check_model_fn,
    current,
    match_checkpoint,
    running,
    signature_key,
    to_tensors,
    trace_model_fn,
)
from keratron.estimator.mode_keys import ModeKeys
from keratron.estimator.run_config import RunConfig
from keratron.estimator.summary import SummaryWriter

__all__ = ["Estimator", "WarmStartSettings", "get_global_step"]

logger = logging.getLogger("keratron.estimator")


def get_global_step():
    """The running Estimator's global step: an int64 scalar Variable that each training
    step increments once (None outside `train`, `evaluate`, `predict` and hooks).

    Inside a `model_fn` it can drive schedules, and a `model_fn` that increments it itself
    (`get_global_step().assign_add(1)`) is not incremented a second time.

    Example:
        >>> print(keratron.estimator.get_global_step())  # no Estimator is running
        None
    """
    est = current.estimator
    return None if est is None else est._global_step


class WarmStartSettings(
    collections.namedtuple(
        "WarmStartSettings",
        [
            "ckpt_to_initialize_from",
            "vars_to_warm_start",
            "var_name_to_vocab_info",
            "var_name_to_prev_var_name",
        ],
    )
):
    """Which checkpoint (a prefix or a model directory) and which trainable variables (a
    regex or a list of regexes on variable paths) initialise a fresh training run.

    Example:
        >>> ws = keratron.estimator.WarmStartSettings("/tmp/old_model", vars_to_warm_start="dnn/.*")
        >>> ws.vars_to_warm_start
        'dnn/.*'
    """

    def __new__(
        cls,
        ckpt_to_initialize_from,
        vars_to_warm_start=".*",
        var_name_to_vocab_info=None,
        var_name_to_prev_var_name=None,
    ):
        if not ckpt_to_initialize_from:
            raise ValueError("WarmStartSettings: `ckpt_to_initialize_from` must be given.")
        if var_name_to_vocab_info:
            raise ValueError(
                "WarmStartSettings: `var_name_to_vocab_info` (vocabulary remapping) is not "
                "supported."
            )
        return super().__new__(
            cls,
            os.fspath(ckpt_to_initialize_from),
            vars_to_warm_start,
            var_name_to_vocab_info or {},
            dict(var_name_to_prev_var_name or {}),
        )


class _Coordinator:
    def __init__(self):
        self._stop = False

    def request_stop(self, ex=None):
        self._stop = True

    def should_stop(self) -> bool:
        return self._stop


class _Session:
    """What hooks receive as `session`: `run(fetches)` reads values now (after the last
    step for Tensors of the `model_fn`)."""

    def __init__(self, estimator):
        self._estimator = estimator
        self.last = None  # (traced, outputs) of the latest step

    def run(self, fetches):
        return self._estimator._resolve(fetches, *(self.last or (None, None)))


def _check_steps(name, value):
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value <= 0:
        raise ValueError(f"Must specify `{name}` > 0. Received: {name}={value!r}")
    return int(value)


def _is_dataset(x) -> bool:
    from keratron.data import Dataset

    if isinstance(x, Dataset):
        return True
    if isinstance(x, (tuple, list, dict, Tensor, np.ndarray, str, bytes)):
        return False
    return hasattr(x, "__iter__")


def _split_element(element, mode):
    if isinstance(element, list):
        element = tuple(element)
    if isinstance(element, tuple):
        if len(element) == 2:
            features, labels = element
        elif len(element) == 1:
            features, labels = element[0], None
        else:
            raise ValueError(
                "input_fn must give `features` or `(features, labels)`. Received a tuple of "
                f"{len(element)} elements."
            )
    else:
        features, labels = element, None
    if mode == ModeKeys.PREDICT:
        labels = None
    return to_tensors(features), to_tensors(labels)


class Estimator:
    """Trains, evaluates, predicts with and exports a model given by a `model_fn`.

    `model_fn(features, labels, mode, params, config)` (any subset of these argument names)
    builds the model for one mode and returns an `EstimatorSpec`. It is traced once per mode
    and input signature; its layers and variables persist for the Estimator's lifetime, and
    a new Estimator on the same `model_dir` rebuilds them from the latest checkpoint.

    Args:
        model_fn: the model function.
        model_dir: where checkpoints, summaries and eval results go; defaults to
            `config.model_dir`, else a new temporary directory.
        config: a `RunConfig`.
        params: a dict passed to `model_fn` as `params`.
        warm_start_from: a checkpoint prefix or model directory, or `WarmStartSettings`:
            initial values of the trainable variables when `model_dir` has no checkpoint.

    Example:
        >>> import tempfile
        >>> def model_fn(features, labels, mode):
        ...     logits = keratron.layers.Dense(3)(features["x"])
        ...     if mode == keratron.estimator.ModeKeys.PREDICT:
        ...         return keratron.estimator.EstimatorSpec(mode, predictions={"logits": logits})
        ...     loss = keratron.ops.mean(keratron.losses.sparse_categorical_crossentropy(
        ...         labels, logits, from_logits=True))
        ...     train_op = keratron.optimizers.Adam(0.01).minimize(
        ...         loss, keratron.estimator.trainable_variables())
        ...     return keratron.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)
        >>> features, labels = {"x": np.ones((6, 4), "float32")}, np.array([0, 1, 2, 0, 1, 2])
        >>> est = keratron.estimator.Estimator(model_fn, model_dir=tempfile.mkdtemp())
        >>> _ = est.train(lambda: (features, labels), steps=2)
        >>> est.get_variable_value("dense/kernel").shape
        (4, 3)
    """

    def __init__(self, model_fn, model_dir=None, config=None, params=None, warm_start_from=None):
        check_model_fn(model_fn, params)
        if config is None:
            config = RunConfig()
        elif not isinstance(config, RunConfig):
            raise ValueError(
                "Estimator: `config` must be a keratron.estimator.RunConfig. Received: "
                f"{type(config).__name__}"
            )
        if model_dir is not None:
            model_dir = os.fspath(model_dir)
            if config.model_dir is not None and os.path.abspath(
                config.model_dir
            ) != os.path.abspath(model_dir):
                raise ValueError(
                    "Estimator: `model_dir` is set both in the constructor and in the RunConfig, "
                    f"with different values: {model_dir!r} and {config.model_dir!r}."
                )
        else:
            model_dir = config.model_dir
        if model_dir is None:
            model_dir = tempfile.mkdtemp(prefix="keratron_estimator_")
            logger.warning("Using temporary folder as model directory: %s", model_dir)
        self._model_dir = model_dir
        self._config = config.replace(model_dir=model_dir)
        self._model_fn = model_fn
        self._params = copy.deepcopy(params or {})
        self._warm_start = _warm_start_settings(warm_start_from)
        self._global_step = _new_global_step()
        self._traced: dict = {ModeKeys.TRAIN: {}, ModeKeys.EVAL: {}, ModeKeys.PREDICT: {}}
        self._metric_names_map = None

    # ------------------------------------------------------------------ properties
    @property
    def model_dir(self) -> str:
        return self._model_dir

    @property
    def config(self) -> RunConfig:
        return copy.deepcopy(self._config)

    @property
    def params(self) -> dict:
        return copy.deepcopy(self._params)

    @property
    def model_fn(self):
        """The model function, callable as `model_fn(features, labels, mode, config)`."""

        def public_model_fn(features, labels, mode, config):
            from keratron.estimator._tracing import call_model_fn

            return call_model_fn(
                self._model_fn, features, labels, mode, self._params_for_call(), config
            )

        return public_model_fn

    def _params_for_call(self):
        return copy.deepcopy(self._params)

    # ------------------------------------------------------------------ checkpoints
    def latest_checkpoint(self):
        """The prefix of the newest checkpoint in `model_dir`, or None.

        Example:
            >>> import os, tempfile
            >>> cols = [keratron.feature_column.numeric_column("x")]
            >>> est = keratron.estimator.LinearRegressor(cols, model_dir=tempfile.mkdtemp())
            >>> _ = est.train(lambda: ({"x": np.ones((2, 1))}, np.ones((2, 1))), steps=3)
            >>> os.path.basename(est.latest_checkpoint())
            'model.ckpt-3'
        """
        return ckpt_lib.latest_checkpoint(self._model_dir)

    def get_variable_names(self) -> list:
        """The paths of the variables in the latest checkpoint (plus "global_step").

        Raises:
            ValueError: if `model_dir` has no checkpoint yet.
        """
        values, _ = self._read_latest("get_variable_names")
        return sorted(list(values) + ["global_step"])

    def get_variable_value(self, name):
        """The value of variable `name` (a path from `get_variable_names`) in the latest
        checkpoint, as a numpy array.

        Example:
            >>> import tempfile
            >>> cols = [keratron.feature_column.numeric_column("x", shape=(4,))]
            >>> est = keratron.estimator.LinearRegressor(cols, model_dir=tempfile.mkdtemp())
            >>> _ = est.train(lambda: ({"x": np.ones((2, 4))}, np.ones((2, 1))), steps=1)
            >>> est.get_variable_value("linear/linear_model/x/weights").shape
            (4, 1)
        """
        values, step = self._read_latest("get_variable_value")
        if name == "global_step":
            return np.int64(step)
        if name not in values:
            raise ValueError(
                f"get_variable_value: no variable {name!r} in checkpoint "
                f"{self.latest_checkpoint()!r}. Its variables: {sorted(values)}"
            )
        return values[name]

    def _read_latest(self, what):
        latest = self.latest_checkpoint()
        if latest is None:
            raise ValueError(
                f"{what}: no checkpoint in model_dir {self._model_dir!r}; train first."
            )
        return ckpt_lib.read_checkpoint(latest)

    @staticmethod
    def _token(prefix):
        if prefix is None:
            return None
        st = os.stat(prefix + ".h5")
        return (os.path.abspath(prefix), st.st_mtime_ns, st.st_size)

    def _restore(self, traced, prefix):
        """Gives `traced`'s variables the values of checkpoint `prefix` (all read and checked
        first, so a bad file changes nothing).

        Raises:
            ValueError: when the checkpoint lacks a trainable variable, holds one with another
                shape, or, when training, lacks the state of a non-trainable one (optimizer
                slots and counters): training would go on with that state started afresh.
        """
        values, step = ckpt_lib.read_checkpoint(prefix)
        taken = {key: stored for stored, key in match_checkpoint(traced.variables, values).items()}
        missing, missing_state, assigns = [], [], []
        for key, var in traced.variables.items():
            if key not in taken:
                if var.trainable:
                    missing.append(key)
                elif traced.mode == ModeKeys.TRAIN:
                    missing_state.append(key)
                else:
                    assigns.append((var, traced.initial.get(key)))
                continue
            value = values[taken[key]]
            if tuple(value.shape) != tuple(var.shape):
                raise ValueError(
                    f"Checkpoint {prefix!r} holds {taken[key]!r} with shape "
                    f"{tuple(value.shape)}, but the model_fn's variable {key!r} has shape "
                    f"{tuple(var.shape)}."
                )
            assigns.append((var, value))
        if missing:
            raise ValueError(
                f"Checkpoint {prefix!r} has no value for the trainable variables {missing} that "
                f"model_fn made in mode {traced.mode!r}. The checkpoint holds: {sorted(values)}"
            )
        if missing_state:
            unplaced = sorted(set(values) - set(taken.values()))
            raise ValueError(
                f"Checkpoint {prefix!r} cannot resume training: it has no value for the "
                f"model_fn's state variables {missing_state} (optimizer slots and counters), "
                "and training on would start them afresh. Values in the checkpoint that no "
                f"variable takes: {unplaced}. If the optimizer changed, train in a new "
                "model_dir and warm-start the weights from this one (warm_start_from)."
            )
        for var, value in assigns:
            if value is not None:
                _assign_now(var, value)
        _assign_now(self._global_step, np.int64(step))
        traced.synced_to = self._token(prefix)

    def _warm_start_from(self, traced):
        ws = self._warm_start
        source = ws.ckpt_to_initialize_from
        prefix = ckpt_lib.latest_checkpoint(source) if os.path.isdir(source) else source
        if prefix is None or not ckpt_lib.checkpoint_exists(prefix):
            raise ValueError(f"warm_start_from: no checkpoint found at {source!r}.")
        values, _ = ckpt_lib.read_checkpoint(prefix)
        patterns = ws.vars_to_warm_start
        if isinstance(patterns, str):
            patterns = [patterns]
        patterns = [re.compile(p) for p in (patterns or [])]
        chosen = [
            (k, v)
            for k, v in traced.variables.items()
            if v.trainable and any(p.match(k) for p in patterns)
        ]
        missing = []
        for key, var in chosen:
            old = ws.var_name_to_prev_var_name.get(key, key)
            if old not in values:
                missing.append(old)
            elif tuple(values[old].shape) != tuple(var.shape):
                raise ValueError(
                    f"warm_start_from: {old!r} in {prefix!r} has shape {values[old].shape}, "
                    f"the variable {key!r} has shape {tuple(var.shape)}."
                )
        if missing:
            raise ValueError(
                f"warm_start_from: checkpoint {prefix!r} has no variables {missing}. It holds: "
                f"{sorted(values)}"
            )
        for key, var in chosen:
            _assign_now(var, values[ws.var_name_to_prev_var_name.get(key, key)])
        logger.info("Warm-started %d variables from %s.", len(chosen), prefix)

    def _prepare(self, traced, prefix, mode):
        """Brings `traced`'s variables to the state of checkpoint `prefix`. Without a
        checkpoint the model starts fresh at global step 0 (warm-started when training)."""
        if prefix is not None:
            if traced.synced_to != self._token(prefix):
                self._restore(traced, prefix)
            else:
                _assign_now(self._global_step, np.int64(_step_of(prefix)))
            return
        _assign_now(self._global_step, np.int64(0))
        if mode == ModeKeys.TRAIN and self._warm_start is not None:
            self._warm_start_from(traced)

    def _save(self, traced) -> str:
        if not distribute_hooks.is_chief(self):  # distribute: worker 0 writes checkpoints
            return None
        step = int(self._global_step._value)
        values = {k: v.numpy() for k, v in traced.variables.items()}
        prefix = ckpt_lib.save_checkpoint(
            self._model_dir, step, values, keep_checkpoint_max=self._config.keep_checkpoint_max
        )
        traced.synced_to = self._token(prefix)
        logger.info("Saving checkpoints for %d into %s.", step, prefix)
        return prefix

    # ------------------------------------------------------------------ graphs
    def _traced_for(self, mode, features, labels):
        key = signature_key([features, labels])
        cache = self._traced[mode]
        traced = cache.get(key)
        if traced is None:
            if self._config.tf_random_seed is not None:
                from keratron.utils import set_random_seed

                set_random_seed(self._config.tf_random_seed)
            traced = trace_model_fn(self, mode, features, labels)
            traced.initial = (
                {}
                if mode == ModeKeys.TRAIN
                else {k: v._value.clone() for k, v in traced.variables.items() if not v.trainable}
            )
            cache[key] = traced
        return traced

    def _switch(self, old, new):
        """Moves the state of the running mode from one traced graph to another (another
        input signature, e.g. a smaller last batch)."""
        if old is new:
            return
        _copy_state(old.variables, new.variables)
        for name, metric in old.metrics.items():
            _copy_metric(metric, new.metrics.get(name))
        if old.loss_metric is not None:
            _copy_metric(old.loss_metric, new.loss_metric)
        # Training moves the variables away from any checkpoint; the other modes do not.
        new.synced_to = old.synced_to if new.mode != ModeKeys.TRAIN else None

    def _resolve(self, fetches, traced, outs):
        """Numpy values of a hook's fetches after a step (see `hooks` module docstring)."""

        def one(f):
            if isinstance(f, str):
                if f == "global_step":
                    return self._global_step.numpy()
                if traced is not None and f == "loss" and traced.loss_index is not None:
                    return outs[traced.loss_index].numpy()
                if traced is not None and isinstance(traced.predictions, dict):
                    entry = traced.predictions.get(f)
                    if entry is not None:
                        return outs[entry[1]].numpy()
                raise ValueError(
                    f"Hook fetch {f!r} names nothing the Estimator can fetch: use 'loss', "
                    "'global_step', a prediction key, a Variable, or a Tensor of the model_fn "
                    "(from a hook the model_fn returns)."
                )
            if isinstance(f, Variable):
                return f.numpy()
            if isinstance(f, Tensor):
                index = None if traced is None else traced.fetch_ids.get(id(f))
                if index is None:
                    if f._value.is_meta:
                        raise ValueError(
                            "A hook fetched a Tensor of the model_fn that is not available: "
                            "Tensors can be fetched by hooks the model_fn returns in its "
                            "EstimatorSpec, after a step of that mode."
                        )
                    return f.numpy()
                return outs[index].numpy()
            if f is None:
                return None
            raise TypeError(f"Hook fetches must be names, Variables or Tensors. Received: {f!r}")

        return tree.map_structure(one, fetches)

    # ------------------------------------------------------------------ input
    def _call_input_fn(self, input_fn, mode):
        if not callable(input_fn):
            raise TypeError(f"`input_fn` must be callable. Received: {input_fn!r}")
        try:
            args = set(inspect.signature(input_fn).parameters)
        except (TypeError, ValueError):
            args = set()
        kwargs = {}
        if "mode" in args:
            kwargs["mode"] = mode
        if "params" in args:
            kwargs["params"] = self.params
        if "config" in args:
            kwargs["config"] = self.config
        if "input_context" in args:
            kwargs["input_context"] = distribute_hooks.input_context(self)  # distribute
        return input_fn(**kwargs)

    def _batches(self, input_fn, mode, steps=None):
        """An iterator of converted `(features, labels)` batches."""
        result = self._call_input_fn(input_fn, mode)
        if _is_dataset(result):
            for element in result:
                yield _split_element(element, mode)
            return
        batch = _split_element(result, mode)
        # Tensors rather than a dataset: the same batch every step, as TensorFlow's graph
        # mode reads a constant tensor again each step; evaluation and prediction read it
        # `steps` times (once by default), training until a hook stops it.
        if mode == ModeKeys.TRAIN:
            while True:
                yield batch
        for _ in range(steps or 1):
            yield batch

    # ------------------------------------------------------------------ train
    def train(self, input_fn, hooks=None, steps=None, max_steps=None, saving_listeners=None):
        """Trains for `steps` more steps, up to global step `max_steps`, or until the input
        ends; resumes from the latest checkpoint in `model_dir`.

        Args:
            input_fn: returns a `keratron.data.Dataset` (or any iterable) of
                `(features, labels)` batches, or one `(features, labels)` pair used for every
                step. It may take `mode`, `params`, `config` arguments.
            hooks: `SessionRunHook`s run around each step.
            steps: number of steps to train (adds to the global step).
            max_steps: the global step to stop at; if the latest checkpoint is already
                there, nothing is trained.
            saving_listeners: `CheckpointSaverListener`s run around each checkpoint save.

        Returns:
            self.

        Example:
            >>> import tempfile
            >>> cols = [keratron.feature_column.numeric_column("x")]
            >>> est = keratron.estimator.LinearRegressor(cols, model_dir=tempfile.mkdtemp())
            >>> features, labels = {"x": np.array([[1.0], [2.0]])}, np.array([[2.0], [4.0]])
            >>> est = est.train(input_fn=lambda: (features, labels), steps=5)
            >>> int(est.get_variable_value("global_step"))
            5
        """
        if steps is not None and max_steps is not None:
            raise ValueError(
                "Estimator.train: `steps` and `max_steps` cannot both be given. Received: "
                f"steps={steps}, max_steps={max_steps}"
            )
        steps = _check_steps("steps", steps)
        max_steps = _check_steps("max_steps", max_steps)
        hooks = _check_hooks(hooks, "hooks")
        listeners = list(saving_listeners or [])
        for listener in listeners:
            if not isinstance(listener, hooks_lib.CheckpointSaverListener):
                raise TypeError(
                    "Estimator.train: `saving_listeners` must be CheckpointSaverListeners. "
                    f"Received: {type(listener).__name__}"
                )
        latest = self.latest_checkpoint()
        if max_steps is not None and latest is not None:
            if int(ckpt_lib.read_checkpoint(latest)[1]) >= max_steps:
                logger.info("Skipping training since max_steps has already saved.")
                return self
        if steps is not None or max_steps is not None:
            hooks.append(hooks_lib.StopAtStepHook(num_steps=steps, last_step=max_steps))
        # distribute: in a multi-worker strategy's scope, optimizer steps average gradients.
        with running(self, ModeKeys.TRAIN), distribute_hooks.scope(self, ModeKeys.TRAIN):
            self._train_loop(input_fn, hooks, latest, listeners)
        return self

    def _train_loop(self, input_fn, hooks, latest, listeners):
        config = self._config
        batches = self._batches(input_fn, ModeKeys.TRAIN)
        batches = distribute_hooks.local_batches(self, batches, ModeKeys.TRAIN)  # distribute
        first = next(batches, None)
        if first is None:
            logger.warning("input_fn produced no data; nothing trained.")
            return
        traced = self._traced_for(ModeKeys.TRAIN, *first)
        self._prepare(traced, latest, ModeKeys.TRAIN)
        distribute_hooks.sync_variables(self, traced, ModeKeys.TRAIN)  # distribute
        hooks = hooks + list(traced.hooks)
        for h in hooks:
            h.begin()
        for listener in listeners:
            listener.begin()
        session, coord = _Session(self), _Coordinator()
        writer = distribute_hooks.summary_writer(self, SummaryWriter, self._model_dir)
        saver = _Saver(self, config, listeners, session)
        saver.save_if_new(traced)
        for h in hooks:
            h.after_create_session(session, coord)
        step_timer = hooks_lib.SecondOrStepTimer(every_steps=config.log_step_count_steps or 100)
        step_timer.update_last_triggered_step(int(self._global_step._value))
        last_loss = None
        batch = first
        try:
            while not coord.should_stop():
                features, labels = batch
                context = hooks_lib.SessionRunContext(
                    hooks_lib.SessionRunArgs({"loss": "loss"}), session
                )
                requests = [h.before_run(context) for h in hooks]
                outs = traced.run(features, labels)
                traced.synced_to = None  # the variables have moved past any checkpoint
                session.last = (traced, outs)
                last_loss = float(outs[traced.loss_index]._value)
                if math.isnan(last_loss):
                    raise hooks_lib.NanLossDuringTrainingError()
                for h, request in zip(hooks, requests):
                    results = None
                    if request is not None:
                        results = self._resolve(request.fetches, traced, outs)
                    h.after_run(context, hooks_lib.SessionRunValues(results))
                step = int(self._global_step._value)
                if config.save_summary_steps and step % config.save_summary_steps == 0:
                    writer.scalars(step, {"loss": last_loss})
                if step_timer.should_trigger_for_step(step):
                    secs, n = step_timer.update_last_triggered_step(step)
                    if secs:
                        rate = n / secs
                        writer.scalars(step, {"global_step/sec": rate})
                        logger.info("global_step/sec: %g", rate)
                    logger.info("loss = %g, step = %d", last_loss, step)
                if saver.after_step(traced, step):
                    break
                if context.stop_requested:
                    break
                batch = next(batches, None)
                if batch is None:
                    break
                nxt = self._traced_for(ModeKeys.TRAIN, *batch)
                self._switch(traced, nxt)
                traced = nxt
            for h in hooks:
                h.end(session)
            saver.end(traced)
            if last_loss is not None:
                logger.info("Loss for final step: %g.", last_loss)
        finally:
            writer.close()

    # ------------------------------------------------------------------ evaluate
    def evaluate(self, input_fn, steps=None, hooks=None, checkpoint_path=None, name=None):
        """Evaluates the model on the data of `input_fn` (all of it, or `steps` batches).

        Args:
            input_fn: as for `train`; a single `(features, labels)` pair is one batch.
            steps: the number of batches to evaluate (default: until the input ends).
            hooks: `SessionRunHook`s.
            checkpoint_path: a checkpoint prefix; default the latest in `model_dir`.
            name: evaluation name; results also go to `model_dir/eval_<name>`.

        Returns:
            A dict with "loss" (the mean of the batch losses), "global_step" and every
            `eval_metric_ops` entry.

        Example:
            >>> import tempfile
            >>> cols = [keratron.feature_column.numeric_column("x")]
            >>> est = keratron.estimator.LinearClassifier(cols, model_dir=tempfile.mkdtemp())
            >>> features, labels = {"x": np.array([[-1.0], [1.0]])}, np.array([[0], [1]])
            >>> _ = est.train(lambda: (features, labels), steps=5)
            >>> float(est.evaluate(input_fn=lambda: (features, labels))["accuracy"])
            1.0
        """
        steps = _check_steps("steps", steps)
        hooks = _check_hooks(hooks, "hooks")
        prefix = checkpoint_path if checkpoint_path is not None else self.latest_checkpoint()
        if checkpoint_path is not None and not ckpt_lib.checkpoint_exists(checkpoint_path):
            raise ValueError(f"evaluate: no checkpoint at {checkpoint_path!r}.")
        if prefix is None:
            logger.info(
                "Could not find trained model in model_dir: %s, running initialization to "
                "evaluate.",
                self._model_dir,
            )
        with running(self, ModeKeys.EVAL):
            results = self._eval_loop(input_fn, steps, hooks, prefix)
        logdir = os.path.join(self._model_dir, "eval" if not name else f"eval_{name}")
        writer = distribute_hooks.summary_writer(self, SummaryWriter, logdir)
        try:
            writer.scalars(
                int(results["global_step"]),
                {k: v for k, v in results.items() if k != "global_step" and np.size(v) == 1},
            )
        finally:
            writer.close()
        return results

    def _eval_loop(self, input_fn, steps, hooks, prefix):
        batches = self._batches(input_fn, ModeKeys.EVAL, steps)
        batches = distribute_hooks.local_batches(self, batches, ModeKeys.EVAL)  # distribute
        first = next(batches, None)
        if first is None:
            raise ValueError("evaluate: input_fn produced no data.")
        traced = self._traced_for(ModeKeys.EVAL, *first)
        self._prepare(traced, prefix, ModeKeys.EVAL)
        distribute_hooks.sync_variables(self, traced, ModeKeys.EVAL)  # distribute
        _reset_local_state(traced)
        hooks = hooks + list(traced.hooks)
        for h in hooks:
            h.begin()
        session, coord = _Session(self), _Coordinator()
        for h in hooks:
            h.after_create_session(session, coord)
        batch, n, outs = first, 0, None
        while not coord.should_stop():
            context = hooks_lib.SessionRunContext(hooks_lib.SessionRunArgs({}), session)
            requests = [h.before_run(context) for h in hooks]
            outs = traced.run(*batch)
            session.last = (traced, outs)
            n += 1
            for h, request in zip(hooks, requests):
                results = None if request is None else self._resolve(request.fetches, traced, outs)
                h.after_run(context, hooks_lib.SessionRunValues(results))
            if context.stop_requested or (steps is not None and n >= steps):
                break
            batch = next(batches, None)
            if batch is None:
                break
            nxt = self._traced_for(ModeKeys.EVAL, *batch)
            if nxt is not traced:
                self._switch(traced, nxt)
                traced = nxt
        distribute_hooks.reduce_metrics(self, traced)  # distribute: summed over workers
        results = {}
        for key, metric in traced.metrics.items():
            value = metric.result()
            if isinstance(value, dict):
                results.update({k: _numpy(v) for k, v in value.items()})
            else:
                results[key] = _numpy(value)
        for key, index in traced.metric_values.items():
            results[key] = outs[index].numpy() if outs is not None else None
        if self._metric_names_map:
            results = {self._metric_names_map.get(k, k): v for k, v in results.items()}
        results["loss"] = _numpy(traced.loss_metric.result())
        results["global_step"] = np.int64(int(self._global_step._value))
        for h in hooks:
            h.end(session)
        logger.info(
            "Saving dict for global step %d: %s",
            int(results["global_step"]),
            ", ".join(f"{k} = {v}" for k, v in sorted(results.items())),
        )
        return results

    # ------------------------------------------------------------------ predict
    def predict(
        self,
        input_fn,
        predict_keys=None,
        hooks=None,
        checkpoint_path=None,
        yield_single_examples=True,
    ):
        """Yields predictions for the features of `input_fn` (a generator).

        Args:
            input_fn: returns a Dataset of features (or of `(features, labels)`, labels
                ignored), or one features batch.
            predict_keys: the prediction keys to return (default all).
            hooks: `SessionRunHook`s.
            checkpoint_path: a checkpoint prefix; default the latest in `model_dir`.
            yield_single_examples: yield one example at a time (dicts of per-example arrays)
                rather than whole batches.

        Example:
            >>> import tempfile
            >>> cols = [keratron.feature_column.numeric_column("x")]
            >>> est = keratron.estimator.LinearClassifier(cols, model_dir=tempfile.mkdtemp())
            >>> features, labels = {"x": np.array([[-1.0], [1.0]])}, np.array([[0], [1]])
            >>> _ = est.train(lambda: (features, labels), steps=5)
            >>> for p in est.predict(input_fn=lambda: features):
            ...     print(p["class_ids"])
            [0]
            [1]
        """
        hooks = _check_hooks(hooks, "hooks")
        if isinstance(predict_keys, str):
            predict_keys = [predict_keys]
        prefix = checkpoint_path if checkpoint_path is not None else self.latest_checkpoint()
        if checkpoint_path is not None and not ckpt_lib.checkpoint_exists(checkpoint_path):
            raise ValueError(f"predict: no checkpoint at {checkpoint_path!r}.")
        if prefix is None:
            logger.warning(
                "Could not find trained model in model_dir: %s, running initialization to predict.",
                self._model_dir,
            )
        return self._predict_gen(input_fn, predict_keys, hooks, prefix, yield_single_examples)

    def _predict_gen(self, input_fn, predict_keys, hooks, prefix, single):
        with running(self, ModeKeys.PREDICT):
            batches = self._batches(input_fn, ModeKeys.PREDICT)
            first = next(batches, None)
            if first is None:
                return
            traced = self._traced_for(ModeKeys.PREDICT, *first)
            self._prepare(traced, prefix, ModeKeys.PREDICT)
            hooks = hooks + list(traced.hooks)
            for h in hooks:
                h.begin()
            session, coord = _Session(self), _Coordinator()
            for h in hooks:
                h.after_create_session(session, coord)
        batch = first
        while not coord.should_stop():
            with running(self, ModeKeys.PREDICT):
                context = hooks_lib.SessionRunContext(hooks_lib.SessionRunArgs({}), session)
                requests = [h.before_run(context) for h in hooks]
                outs = traced.run(*batch)
                session.last = (traced, outs)
                for h, request in zip(hooks, requests):
                    results = None
                    if request is not None:
                        results = self._resolve(request.fetches, traced, outs)
                    h.after_run(context, hooks_lib.SessionRunValues(results))
                preds = traced.predictions_from(outs, predict_keys)
            if single:
                yield from _examples(preds)
            else:
                yield preds
            if context.stop_requested:
                break
            batch = next(batches, None)
            if batch is None:
                break
            nxt = self._traced_for(ModeKeys.PREDICT, *batch)
            if nxt is not traced:
                self._switch(traced, nxt)
                traced = nxt
        with running(self, ModeKeys.PREDICT):
            for h in hooks:
                h.end(session)

    # ------------------------------------------------------------------ export
    def export_saved_model(
        self,
        export_dir_base,
        serving_input_receiver_fn,
        assets_extra=None,
        as_text=False,
        checkpoint_path=None,
        experimental_mode=ModeKeys.PREDICT,
    ):
        """Exports the PREDICT graph, traced on the serving inputs, with the weights of the
        latest checkpoint, to a new timestamped directory under `export_dir_base`.

        The directory holds `saved_model.json` (the graph as data: inputs, signatures,
        primitive nodes with their parameters, shapes and dtypes) and
        `variables/variables.h5` (the weights and constants); `keratron.saved_model.load`
        runs it without executing code from the directory.

        Args:
            export_dir_base: the parent directory.
            serving_input_receiver_fn: returns a `ServingInputReceiver` (see
                `keratron.estimator.export`).
            assets_extra: dict of destination path (inside `assets.extra/`) to source file.
            as_text: accepted for TensorFlow compatibility (the graph is always JSON).
            checkpoint_path: the checkpoint to export; default the latest.
            experimental_mode: only `ModeKeys.PREDICT` is supported.

        Returns:
            The export directory, as bytes (as TensorFlow returns it).

        Example:
            >>> import tempfile
            >>> cols = [keratron.feature_column.numeric_column("x")]
            >>> est = keratron.estimator.LinearRegressor(cols, model_dir=tempfile.mkdtemp())
            >>> _ = est.train(lambda: ({"x": np.ones((2, 1))}, np.ones((2, 1))), steps=1)
            >>> receiver_fn = keratron.estimator.export.build_raw_serving_input_receiver_fn(
            ...     {"x": np.zeros((1, 1), "float32")})
            >>> path = est.export_saved_model(tempfile.mkdtemp(), receiver_fn)
            >>> loaded = keratron.saved_model.load(path)
            >>> loaded(x=np.array([[1.0], [2.0]], "float32"))["outputs"].shape
            (2, 1)
        """
        from keratron.estimator._export_impl import export

        if experimental_mode != ModeKeys.PREDICT:
            raise ValueError(
                "export_saved_model: only experimental_mode=ModeKeys.PREDICT is supported. "
                f"Received: {experimental_mode!r}"
            )
        prefix = checkpoint_path if checkpoint_path is not None else self.latest_checkpoint()
        if prefix is None or not ckpt_lib.checkpoint_exists(prefix):
            raise ValueError(f"Couldn't find trained model at {self._model_dir}.")
        return export(
            self, os.fspath(export_dir_base), serving_input_receiver_fn, prefix, assets_extra
        )

    def export_savedmodel(self, export_dir_base, serving_input_receiver_fn, **kwargs):
        """Deprecated alias of `export_saved_model`."""
        return self.export_saved_model(export_dir_base, serving_input_receiver_fn, **kwargs)


# ---------------------------------------------------------------------------- helpers
class _Saver:
    """Checkpoint timing (every N steps or seconds), listeners, and the saves themselves."""

    def __init__(self, estimator, config, listeners, session):
        self._est = estimator
        self._listeners = listeners
        self._session = session
        secs, steps = config.save_checkpoints_secs, config.save_checkpoints_steps
        self._timer = (
            None
            if secs is None and steps is None
            else hooks_lib.SecondOrStepTimer(every_secs=secs, every_steps=steps)
        )
        self._last_saved_step = None

    def _save(self, traced, step) -> bool:
        for listener in self._listeners:
            listener.before_save(self._session, step)
        self._est._save(traced)
        self._last_saved_step = step
        if self._timer is not None:
            self._timer.update_last_triggered_step(step)
        stop = False
        for listener in self._listeners:
            if listener.after_save(self._session, step):
                stop = True
        return stop

    def save_if_new(self, traced):
        step = int(self._est._global_step._value)
        latest = self._est.latest_checkpoint()
        if latest is not None and latest.endswith(f"-{step}") and traced.synced_to is not None:
            self._last_saved_step = step
            if self._timer is not None:
                self._timer.update_last_triggered_step(step)
            return
        self._save(traced, step)

    def after_step(self, traced, step) -> bool:
        if self._timer is not None and self._timer.should_trigger_for_step(step):
            return self._save(traced, step)
        return False

    def end(self, traced):
        step = int(self._est._global_step._value)
        if self._last_saved_step != step:
            self._save(traced, step)
        for listener in self._listeners:
            listener.end(self._session, step)


def _new_global_step():
    from keratron.autodiff.primitive import suspend_tracing

    with suspend_tracing():
        v = Variable(np.int64(0), dtype="int64", trainable=False, name="global_step")
    return v


def _assign_now(var, value):
    import torch

    v = value if isinstance(value, torch.Tensor) else torch.as_tensor(np.asarray(value))
    var._value.copy_(
        v.to(device=var._value.device, dtype=var._value.dtype).reshape(var._value.shape)
    )
    mark_written([var])


def _copy_state(src: dict, dst: dict):
    for key, var in dst.items():
        other = src.get(key)
        if other is not None and other is not var and other.shape == var.shape:
            var._value.copy_(other._value)
            mark_written([var])


def _copy_metric(src, dst):
    if dst is None or src is dst:
        return
    for a, b in zip(src.variables, dst.variables):
        if a.shape == b.shape:
            b._value.copy_(a._value)
            mark_written([b])


def _step_of(prefix) -> int:
    m = re.search(r"-(\d+)$", prefix)
    if m is None:
        return ckpt_lib.read_checkpoint(prefix)[1]
    return int(m.group(1))


def _reset_local_state(traced):
    for key, value in traced.initial.items():
        traced.variables[key]._value.copy_(value)
        mark_written([traced.variables[key]])
    for metric in traced.metrics.values():
        metric.reset_state()
    if traced.loss_metric is not None:
        traced.loss_metric.reset_state()


def _numpy(value):
    a = np.asarray(value.numpy() if isinstance(value, Tensor) else value)
    return a[()] if a.ndim == 0 else a


def _examples(preds):
    if isinstance(preds, dict):
        sizes = {k: (np.shape(v)[0] if np.ndim(v) else None) for k, v in preds.items()}
        distinct = set(sizes.values())
        if None in distinct or len(distinct) != 1:
            raise ValueError(
                "predict(yield_single_examples=True): every prediction must have the same "
                f"batch size (first dimension). Received: {sizes}. Use "
                "yield_single_examples=False."
            )
        n = distinct.pop()
        for i in range(n):
            yield {k: v[i] for k, v in preds.items()}
    else:
        if np.ndim(preds) == 0:
            raise ValueError(
                "predict(yield_single_examples=True): the prediction has no batch dimension. "
                "Use yield_single_examples=False."
            )
        yield from preds


def _check_hooks(hooks, name) -> list:
    hooks = list(hooks or [])
    for h in hooks:
        if not isinstance(h, hooks_lib.SessionRunHook):
            raise TypeError(
                f"`{name}` must be a list of SessionRunHook instances. Received: {type(h).__name__}"
            )
    return hooks


def _warm_start_settings(warm_start_from):
    if warm_start_from is None:
        return None
    if isinstance(warm_start_from, WarmStartSettings):
        return warm_start_from
    if isinstance(warm_start_from, (str, bytes, os.PathLike)):
        path = os.fsdecode(warm_start_from)
        return WarmStartSettings(ckpt_to_initialize_from=path)
    raise ValueError(
        "Estimator: `warm_start_from` must be a checkpoint path, a model directory or "
        f"WarmStartSettings. Received: {type(warm_start_from).__name__}"
    )
