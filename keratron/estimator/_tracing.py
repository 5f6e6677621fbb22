"""Tracing a `model_fn` into a replayable graph, once per mode and input signature.

The `model_fn` runs once with data-free tracer tensors, as TensorFlow builds a graph once:
the layers, optimizers and metrics it creates live on with the traced graph, and every
later step replays the graph (forward, gradients, optimizer update, metric updates, global
step increment). In TRAIN mode the call runs under a persistent `GradientTape`, so
`optimizer.minimize(loss, variables)` differentiates the traced loss without a tape
argument. Each trace gets fresh auto-naming (the first Dense is "dense" again), so the same
`model_fn` gives the same variable paths in every mode and process: that is how checkpoints
match variables to values.
"""

from __future__ import annotations

import contextlib
import inspect
import re
import threading

import numpy as np
import torch

from keratron import config
from keratron.autodiff import tree
from keratron.autodiff.tape import GradientTape
from keratron.autodiff.tensor import Tensor, Variable, collect_created_variables, convert_to_tensor
from keratron.autodiff.tracing import Trace
from keratron.estimator.mode_keys import ModeKeys
from keratron.estimator.model_fn import EstimatorSpec
from keratron.optimizers.base_optimizer import fresh_auto_names
from keratron.utils.naming import fresh_uids

__all__ = [
    "TracedModelFn",
    "trace_model_fn",
    "to_tensors",
    "signature_key",
    "current",
    "trainable_variables",
    "match_checkpoint",
]


class _Current(threading.local):
    def __init__(self):
        self.estimator = None
        self.mode = None
        self.tape = None
        self.created = None
        self.local_ids = None


current = _Current()


@contextlib.contextmanager
def running(estimator, mode):
    """Marks `estimator` as the one running (what `get_global_step()` returns from)."""
    saved = (current.estimator, current.mode)
    current.estimator, current.mode = estimator, mode
    try:
        yield
    finally:
        current.estimator, current.mode = saved


@contextlib.contextmanager
def naming_scope():
    """The name scope of one `model_fn` call: Keras auto-naming for layers, metrics and
    optimizers starts afresh (the first Adam is "adam", whatever the process built before)
    and continues afterwards where it was."""
    with fresh_uids(), fresh_auto_names():
        yield


def mark_local(variables) -> None:
    """Keeps `variables` (metric state of the `model_fn` being traced) out of checkpoints,
    like TensorFlow's local variables."""
    if current.local_ids is not None:
        current.local_ids.update(id(v) for v in variables)


def trainable_variables() -> list:
    """The trainable variables of the `model_fn` being traced: those it has created so far
    and those its ops have read (as `tf.compat.v1.trainable_variables()` lists the graph's).

    Raises:
        RuntimeError: outside a `model_fn` called by an Estimator.

    Example:
        >>> import tempfile
        >>> def model_fn(features, labels, mode):
        ...     pred = keratron.layers.Dense(1)(features)
        ...     loss = keratron.ops.mean(keratron.ops.square(pred - labels))
        ...     variables = keratron.estimator.trainable_variables()
        ...     print([v.path for v in variables])
        ...     train_op = keratron.optimizers.SGD(0.1).minimize(loss, variables)
        ...     return keratron.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)
        >>> est = keratron.estimator.Estimator(model_fn, model_dir=tempfile.mkdtemp())
        >>> _ = est.train(lambda: (np.ones((2, 3), "float32"), np.ones((2, 1), "float32")), steps=2)
        ['dense/kernel', 'dense/bias']
    """
    if current.created is None:
        raise RuntimeError(
            "keratron.estimator.trainable_variables() can only be called inside a model_fn "
            "while an Estimator builds it."
        )
    out, seen = [], set()
    watched = current.tape.watched_variables() if current.tape is not None else ()
    for v in list(current.created) + list(watched):
        if v.trainable and id(v) not in seen and v.dtype.startswith(("float", "bfloat")):
            seen.add(id(v))
            out.append(v)
    return out


# ---------------------------------------------------------------------------- inputs
def _leaf_to_tensor(x, device):
    from keratron.feature_column import is_string_array, strings_to_fingerprints

    if isinstance(x, Variable):
        raise TypeError("input_fn returned a Variable; return tensors or arrays.")
    if isinstance(x, Tensor):
        if x._value.device != device:
            return Tensor(x._value.to(device))
        return x
    if isinstance(x, (np.ndarray, list, tuple, bytes, str)) and is_string_array(x):
        return Tensor(torch.from_numpy(strings_to_fingerprints(x)).to(device))
    if isinstance(x, torch.Tensor):
        return Tensor(x.detach().to(device))
    if x is None:
        return None
    a = np.asarray(x)
    if a.dtype == object:
        raise TypeError(
            f"input_fn returned a value that is not a tensor, array or string array: "
            f"{type(x).__name__}"
        )
    return convert_to_tensor(a, device=device)


def to_tensors(structure):
    """Every leaf of `structure` as a Tensor on the default device (strings become their
    int64 fingerprints)."""
    device = torch.device(config.default_device())
    return tree.map_structure(lambda x: _leaf_to_tensor(x, device), structure)


def _structure_key(x):
    if isinstance(x, dict):
        return ("d", tuple((k, _structure_key(x[k])) for k in sorted(x, key=str)))
    if isinstance(x, (list, tuple)):
        return ("l", tuple(_structure_key(v) for v in x))
    if x is None:
        return "n"
    return "t"


def signature_key(structure):
    """What a trace depends on: the structure and every leaf's shape and dtype."""
    leaves = tuple(
        (tuple(t._value.shape), t._value.dtype) for t in tree.flatten(structure) if t is not None
    )
    return (_structure_key(structure), leaves)


# ---------------------------------------------------------------------------- model_fn
def model_fn_args(model_fn) -> set:
    try:
        return set(inspect.signature(model_fn).parameters)
    except (TypeError, ValueError):
        return {"features", "labels", "mode", "params", "config"}


def check_model_fn(model_fn, params):
    if not callable(model_fn):
        raise TypeError(f"Estimator: `model_fn` must be callable. Received: {model_fn!r}")
    args = model_fn_args(model_fn)
    if "features" not in args:
        raise ValueError(
            f"Estimator: model_fn {getattr(model_fn, '__name__', model_fn)!r} must take a "
            f"`features` argument. Its arguments: {sorted(args)}"
        )
    if params is not None and "params" not in args:
        raise ValueError(
            "Estimator: `params` was given but model_fn does not take a `params` argument. "
            f"Its arguments: {sorted(args)}"
        )


def call_model_fn(model_fn, features, labels, mode, params, run_config):
    args = model_fn_args(model_fn)
    kwargs = {}
    if "labels" in args:
        kwargs["labels"] = labels
    elif labels is not None:
        raise ValueError(
            "model_fn does not take a `labels` argument, but input_fn returned labels."
        )
    if "mode" in args:
        kwargs["mode"] = mode
    if "params" in args:
        kwargs["params"] = params
    if "config" in args:
        kwargs["config"] = run_config
    spec = model_fn(features=features, **kwargs)
    if not isinstance(spec, EstimatorSpec):
        raise TypeError(f"model_fn must return an EstimatorSpec. Received: {type(spec).__name__}")
    if spec.mode != mode:
        raise ValueError(
            f"model_fn returned an EstimatorSpec for mode {spec.mode!r} when called with mode "
            f"{mode!r}."
        )
    return spec


# ---------------------------------------------------------------------------- variables
_AUTO_VARIABLE = re.compile(r"variable(_\d+)?")


def variable_keys(variables) -> dict:
    """Checkpoint keys for variables: their paths, with standalone auto-named Variables
    ("variable_17", whose number counts every Variable ever made) renumbered in creation
    order, and repeated paths made unique with a suffix."""
    keys: dict = {}
    auto = 0
    for v in variables:
        key = v.path
        if _AUTO_VARIABLE.fullmatch(key):
            key = "variable" if auto == 0 else f"variable_{auto}"
            auto += 1
        base, n = key, 1
        while key in keys:
            key = f"{base}_{n}"
            n += 1
        keys[key] = v
    return keys


_COUNTER = re.compile(r"_\d+$")


def _uncounted(key: str):
    """("adam", "dense_kernel_momentum") for "adam_1/dense_kernel_momentum"; None for a key
    without a scope."""
    scope, sep, rest = key.partition("/")
    return (_COUNTER.sub("", scope), rest) if sep else None


def match_checkpoint(variables: dict, stored) -> dict:
    """Which stored value each variable takes: checkpoint key -> variable key.

    A variable takes the value stored under its own key. Checkpoints written before each
    `model_fn` call had its own name scope carry the process's auto-name counter in the
    optimizer's name ("adam_1/dense_kernel_momentum" for today's "adam/..."): a
    non-trainable variable without a value of its own takes the one stored under its key
    with another counter on the first component, when exactly one such value is left.
    """
    matched = {k: k for k in variables if k in stored}
    left: dict = {}
    for key in stored:
        if key not in matched and _uncounted(key) is not None:
            left.setdefault(_uncounted(key), []).append(key)
    for key, var in variables.items():
        if key in matched or var.trainable or _uncounted(key) is None:
            continue
        candidates = left.get(_uncounted(key), [])
        if len(candidates) == 1:
            matched[candidates.pop()] = key
    return matched


def metric_variable_ids(metrics) -> set:
    ids = set()
    for m in metrics:
        for v in m.variables:
            ids.add(id(v))
    return ids


# ---------------------------------------------------------------------------- outputs
class _Outputs:
    """The flat output list of a traced graph, with where each value of interest sits."""

    def __init__(self):
        self.tensors: list = []
        self.by_id: dict = {}

    def add(self, t) -> int:
        i = self.by_id.get(id(t))
        if i is None:
            i = self.by_id[id(t)] = len(self.tensors)
            self.tensors.append(t)
        return i


def _prediction_entry(value, outputs):
    from keratron.estimator.export import _HostLookup

    if isinstance(value, _HostLookup):
        return ("lookup", outputs.add(value.ids), value.vocabulary)
    return ("tensor", outputs.add(value))


class TracedModelFn:
    """One trace of the `model_fn` (one mode, one input signature) and its variables.

    Attributes:
        mode: the ModeKeys value.
        compiled: the optimised replay plan; `run(features, labels)` executes one step.
        variables: checkpoint key -> Variable, for the variables the trace uses or made
            (metric state excluded).
        metrics: name -> Metric for `eval_metric_ops` entries given as metric objects.
        metric_values: name -> output index for `(value, update_op)` entries.
        loss_index: output index of the loss (None in PREDICT).
        predictions: None, a single entry or a dict of entries (see `_prediction_entry`).
        hooks: the hooks the EstimatorSpec returned for this mode.
    """

    def __init__(self, **kw):
        self.__dict__.update(kw)

    def run(self, features, labels) -> list:
        leaves = [t for t in tree.flatten([features, labels]) if t is not None]
        return self.compiled.run(leaves)

    def predictions_from(self, outs, predict_keys=None):
        """The step's predictions as numpy values (dict or single array)."""

        def value(entry):
            a = outs[entry[1]].numpy()
            return _lookup(a, entry[2]) if entry[0] == "lookup" else a

        if self.predictions is None:
            return None
        if isinstance(self.predictions, dict):
            keys = list(self.predictions)
            if predict_keys is not None:
                missing = [k for k in predict_keys if k not in self.predictions]
                if missing:
                    raise ValueError(
                        f"predict: predict_keys {missing} are not among the predictions "
                        f"{sorted(self.predictions)}."
                    )
                keys = list(predict_keys)
            return {k: value(self.predictions[k]) for k in keys}
        return value(self.predictions)


def _lookup(ids, vocabulary):
    table = np.array([v.encode("utf-8") for v in vocabulary], dtype=object)
    return table[np.asarray(ids).astype(np.int64)]


def trace_model_fn(estimator, mode, features, labels, extra_outputs=None) -> TracedModelFn:
    """Traces `estimator`'s model_fn for `mode` on batches shaped like `features`/`labels`."""
    from keratron import metrics as metrics_module
    from keratron.estimator.hooks import tensors_in

    trace = Trace()
    leaves = tree.flatten([features, labels])
    traced = [
        None if t is None else trace.placeholder(t._value.shape, t._value.dtype) for t in leaves
    ]
    t_features, t_labels = tree.pack_sequence_as([features, labels], traced)
    gs = estimator._global_step
    outputs = _Outputs()
    tape = GradientTape(persistent=True) if mode == ModeKeys.TRAIN else None
    loss_metric = None
    with naming_scope(), collect_created_variables() as created, running(estimator, mode):
        saved = (current.tape, current.created, current.local_ids)
        current.tape, current.created, current.local_ids = tape, created, set()
        local_ids = current.local_ids
        try:
            with trace:
                with tape if tape is not None else contextlib.nullcontext():
                    spec = call_model_fn(
                        estimator._model_fn,
                        t_features,
                        t_labels,
                        mode,
                        estimator._params_for_call(),
                        estimator._config,
                    )
                if mode == ModeKeys.TRAIN and not trace.writes(gs):
                    gs.assign_add(1)
                if mode == ModeKeys.EVAL:
                    loss_metric = metrics_module.Mean(name="loss")
                    loss_metric.update_state(spec.loss)
        finally:
            current.tape, current.created, current.local_ids = saved
    loss_index = None if spec.loss is None else outputs.add(spec.loss)
    predictions = None
    # Only PREDICT returns predictions: elsewhere they would be computed every step for no one.
    if spec.predictions is not None and mode == ModeKeys.PREDICT:
        if isinstance(spec.predictions, dict):
            predictions = {k: _prediction_entry(v, outputs) for k, v in spec.predictions.items()}
        else:
            predictions = _prediction_entry(spec.predictions, outputs)
    metrics, metric_values = {}, {}
    for name, op in spec.eval_metric_ops.items():
        if isinstance(op, metrics_module.Metric):
            metrics[name] = op
        else:
            metric_values[name] = outputs.add(op[0])
    hooks = {
        ModeKeys.TRAIN: spec.training_hooks + spec.training_chief_hooks,
        ModeKeys.EVAL: spec.evaluation_hooks,
        ModeKeys.PREDICT: spec.prediction_hooks,
    }[mode]
    for hook in hooks:
        for t in tensors_in(hook):
            if trace.owns(t):
                outputs.add(t)
    if mode == ModeKeys.EVAL:
        metrics_all = list(metrics.values()) + [loss_metric]
    else:
        metrics_all = list(metrics.values())
    excluded = metric_variable_ids(metrics_all) | {id(gs)} | local_ids
    seen = set()
    ordered = []
    for v in list(created) + trace.captured_variables():
        if id(v) not in excluded and id(v) not in seen:
            seen.add(id(v))
            ordered.append(v)
    compiled = trace.compile(list(outputs.tensors))
    return TracedModelFn(
        mode=mode,
        compiled=compiled,
        variables=variable_keys(ordered),
        metrics=metrics,
        metric_values=metric_values,
        loss_metric=loss_metric,
        loss_index=loss_index,
        predictions=predictions,
        hooks=tuple(hooks),
        fetch_ids=dict(outputs.by_id),
        export_outputs=spec.export_outputs,
        synced_to=None,
    )
