"""`tf.train` (TF2): object-based checkpoints and the checkpoint readers.

`tf.train.Checkpoint` here is compat.v1's (keys, counters and files as described there), and
also saves a dataset iterator given to it as an attribute (`iterator=iter(dataset)`), under
TF's key `<name>/.ATTRIBUTES/ITERATOR_STATE`: the number of elements it has given out.
Restoring restarts the iterator's pass and skips that many, so the same elements follow as
long as the pipeline draws no unseeded randomness.

Two more of TF's behaviours: restoring into a model or optimizer whose variables do not exist
yet defers their values until they are created (a layer's first call, an optimizer's `build`;
eagerly), and a variable reachable from two attributes (`listed=[v]`, `mapped={"one": v}`) is
saved under each, so that a restore through either path finds it.

Example:
    >>> import tempfile
    >>> import keratron.compat.v2 as tf
    >>> x = tf.ones([1, 3])
    >>> model = tf.keras.Sequential([tf.keras.layers.Dense(2)])
    >>> y = model(x)
    >>> manager = tf.train.CheckpointManager(
    ...     tf.train.Checkpoint(model=model), tempfile.mkdtemp(), max_to_keep=2)
    >>> path = manager.save()
    >>> fresh = tf.keras.Sequential([tf.keras.layers.Dense(2)])  # no variables yet
    >>> _ = tf.train.Checkpoint(model=fresh).restore(manager.latest_checkpoint)
    >>> bool(tf.reduce_all(fresh(x) == y))
    True
"""

from __future__ import annotations

import contextlib
import functools
import os

import numpy as np

from keratron.autodiff.primitive import trace_state
from keratron.autodiff.tape import stop_recording_all
from keratron.autodiff.tensor import Variable as _KVariable
from keratron.compat.v1 import checkpoint as _v1
from keratron.compat.v1.checkpoint import CheckpointManager
from keratron.compat.v1.example_proto import (
    BytesList,
    Example,
    Feature,
    FeatureList,
    FeatureLists,
    Features,
    FloatList,
    Int64List,
    SequenceExample,
)
from keratron.compat.v1.saver import (
    get_checkpoint_state,
    latest_checkpoint,
    list_variables,
    load_checkpoint,
    load_variable,
)
from keratron.data.dataset import Iterator as _Iterator

__all__ = [
    "BytesList",
    "Example",
    "Feature",
    "FeatureList",
    "FeatureLists",
    "Features",
    "FloatList",
    "Int64List",
    "SequenceExample",
    "Checkpoint",
    "CheckpointManager",
    "get_checkpoint_state",
    "latest_checkpoint",
    "list_variables",
    "load_checkpoint",
    "load_variable",
]

_ITERATOR_STATE = ".ATTRIBUTES/ITERATOR_STATE"


class Checkpoint(_v1.Checkpoint):
    """`tf.train.Checkpoint(**objects)`: variables, layers, models, optimizers, nested
    Checkpoints, dicts and lists of them, and dataset iterators.

    Example:
        >>> import os, tempfile
        >>> import keratron.compat.v2 as tf
        >>> it = iter(tf.data.Dataset.range(5))
        >>> ckpt = tf.train.Checkpoint(step=tf.Variable(1), iterator=it)
        >>> path = ckpt.save(os.path.join(tempfile.mkdtemp(), "ckpt"))
        >>> int(next(it)), int(next(it))
        (0, 1)
        >>> _ = ckpt.restore(path).assert_consumed()
        >>> int(next(it))
        0
    """

    def _variables(self) -> dict:
        positions = self.__dict__.setdefault("_positions", {})
        out = {f"save_counter/{_v1._VALUE}": self.save_counter}
        for name, obj in self._objects.items():
            if isinstance(obj, _Iterator):
                held = positions.get(name)
                if held is None or held[0] is not obj:
                    var = _KVariable(np.int64(0), dtype="int64", trainable=False, name=name)
                    held = positions[name] = (obj, var)
                held[1].assign(np.int64(obj._position))
                out[f"{name}/{_ITERATOR_STATE}"] = held[1]
            else:  # each attribute in full: a shared variable is found through either
                _v1._collect(obj, name, out, {id(self.save_counter)}, "Checkpoint")
        return out

    def restore(self, save_path, options=None):
        status = super().restore(save_path, options)
        for iterator, var in self.__dict__.get("_positions", {}).values():
            position = int(var.numpy())
            if position != iterator._position:
                iterator._seek(position)
        if save_path is not None:
            _defer(self._objects, "", _read_values(save_path))
        return status


def _read_values(save_path) -> dict:
    if os.path.isfile(os.fspath(save_path) + ".index"):
        return _v1.read_tensor_bundle(save_path)
    reader = load_checkpoint(save_path)
    return {k: reader.get_tensor(k) for k in reader.get_variable_to_shape_map()}


def _defer(objects, prefix, values) -> None:
    """Arranges for the saved values of variables not created yet to be assigned when they
    are: at the end of an optimizer's `build`, or on a layer's first call."""
    for name, obj in objects.items():
        path = f"{prefix}{name}"
        if isinstance(obj, Checkpoint):
            _defer(obj._objects, path + "/", values)
        elif isinstance(obj, dict):
            _defer(obj, path + "/", values)
        elif isinstance(obj, (list, tuple)):
            _defer(dict(enumerate(obj)), path + "/", values)
        elif isinstance(obj, (_KVariable, _Iterator)):
            continue
        else:
            variables = getattr(obj, "variables", None)
            if variables is None or callable(variables):
                continue
            pending, i = {}, len(variables)
            while f"{path}/variables/{i}/{_v1._VALUE}" in values:
                pending[i] = values[f"{path}/variables/{i}/{_v1._VALUE}"]
                i += 1
            if pending:
                _hook(obj, path, pending)


@contextlib.contextmanager
def _eagerly():
    """Runs the block outside any trace: a value restored while `tf.function` traces the
    first call is written once, now, not at every replay of the graph."""
    saved, trace_state.tracer = trace_state.tracer, None
    try:
        yield
    finally:
        trace_state.tracer = saved


def _assign(obj, path, pending) -> None:
    variables = obj.variables
    for i, value in pending.items():
        if i < len(variables):
            var = variables[i]
            if tuple(np.shape(value)) != tuple(var.shape):
                raise ValueError(
                    f"Checkpoint.restore: the value of '{path}/variables/{i}' has shape "
                    f"{tuple(np.shape(value))}, its variable {tuple(var.shape)}"
                )
            with _eagerly():
                var.assign(np.asarray(value, dtype=var.dtype))


def _hook(obj, path, pending) -> None:
    if callable(getattr(obj, "call", None)):  # a layer or model: creates variables in call
        original = obj.call

        @functools.wraps(original)
        def call(*args, **kwargs):
            del obj.call
            with stop_recording_all():  # a first pass that creates the variables
                original(*args, **kwargs)
            _assign(obj, path, pending)
            return original(*args, **kwargs)

        obj.call = call
    elif callable(getattr(obj, "build", None)):  # an optimizer: creates them in build
        original = obj.build

        @functools.wraps(original)
        def build(*args, **kwargs):
            del obj.build
            result = original(*args, **kwargs)
            _assign(obj, path, pending)
            return result

        obj.build = build
