"""Object-based checkpoints: `tf.train.Checkpoint` and `tf.train.CheckpointManager` over
keratron's eager objects (Variables, layers, models, optimizers, nested Checkpoints).

A checkpoint's keys follow the attributes it was given, as TF's object graph does:
`v/.ATTRIBUTES/VARIABLE_VALUE` for a Variable passed as `v=`, `net/inner/w/...` through
nested Checkpoints and dicts, and for an object that owns variables (a layer, a model, an
optimizer) its variables by position, `model/variables/3/.ATTRIBUTES/VARIABLE_VALUE`, so a
fresh model built the same way restores (the rule Keras's `.h5` loading follows). Files use
the Estimator's checkpoint format (`<prefix>.h5` and TF's text `checkpoint` index), not TF's
tensor bundle: `tf.train.list_variables`, `load_variable` and `latest_checkpoint` read them,
TensorFlow does not. `restore` also reads TensorFlow's own checkpoints (the `.index` /
`.data-*` tensor bundle), by the same keys: what a TF2 program saved with
`tf.train.Checkpoint(v=..., net=...)` restores into the same structure here.
"""

from __future__ import annotations

import os
import shutil
import struct
import tempfile

import numpy as np

from keratron.autodiff.tensor import Variable as KVariable
from keratron.compat.v1 import saver as saver_lib
from keratron.estimator import checkpoint as ckpt

__all__ = ["Checkpoint", "CheckpointManager"]

_VALUE = ".ATTRIBUTES/VARIABLE_VALUE"


# ---------------------------------------------------------------------------- TF's tensor bundle
# `<prefix>.index` is a LevelDB table (uncompressed blocks) from tensor name to a serialized
# BundleEntryProto (dtype, shape, shard, offset, size); the bytes are in `<prefix>.data-*`.
_TABLE_MAGIC = 0xDB4775248B80FB57
_TF_DTYPES = {1: "<f4", 2: "<f8", 3: "<i4", 4: "u1", 5: "<i2", 6: "i1", 8: "<c8", 9: "<i8",
              10: "?", 17: "<u2", 18: "<c16", 19: "<f2", 22: "<u4", 23: "<u8"}  # fmt: skip
_BFLOAT16 = 14


def _varint(buf, pos):
    result = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7


def _proto_fields(buf):
    """(field number, value) of a serialized protobuf: ints for varints, bytes otherwise."""
    pos = 0
    while pos < len(buf):
        tag, pos = _varint(buf, pos)
        wire = tag & 7
        if wire == 0:
            value, pos = _varint(buf, pos)
        elif wire == 2:
            n, pos = _varint(buf, pos)
            value, pos = buf[pos : pos + n], pos + n
        elif wire in (1, 5):
            n = 8 if wire == 1 else 4
            value, pos = buf[pos : pos + n], pos + n
        else:
            raise ValueError(f"unsupported protobuf wire type {wire}")
        yield tag >> 3, value


def _block(data, offset, size, path):
    if data[offset + size] != 0:
        raise ValueError(f"{path}: compressed table blocks are not supported")
    block = data[offset : offset + size]
    (n_restarts,) = struct.unpack_from("<I", block, len(block) - 4)
    end, pos, key = len(block) - 4 - 4 * n_restarts, 0, b""
    while pos < end:
        shared, pos = _varint(block, pos)
        own, pos = _varint(block, pos)
        n, pos = _varint(block, pos)
        key = key[:shared] + block[pos : pos + own]
        pos += own
        yield key, block[pos : pos + n]
        pos += n


def read_tensor_bundle(prefix) -> dict:
    """The numeric tensors of a TensorFlow checkpoint (`<prefix>.index` and its data files)
    by name, as numpy arrays (string tensors, such as TF's object graph, are left out).

    Raises:
        ValueError: the index is not a TF checkpoint table, or holds partitioned variables.
    """
    path = os.fspath(prefix) + ".index"
    with open(path, "rb") as f:
        data = f.read()
    footer = data[-48:]
    if len(data) < 48 or struct.unpack_from("<Q", footer, 40)[0] != _TABLE_MAGIC:
        raise ValueError(f"{path} is not a TensorFlow checkpoint index (no table magic)")
    pos = _varint(footer, _varint(footer, 0)[1])[1]  # past the metaindex handle
    index_offset, pos = _varint(footer, pos)
    index_size, _ = _varint(footer, pos)
    entries = {}
    for _, handle in _block(data, index_offset, index_size, path):
        offset, p = _varint(handle, 0)
        size, _ = _varint(handle, p)
        entries.update(_block(data, offset, size, path))
    header = dict(_proto_fields(entries.pop(b"", b"")))
    num_shards = header.get(1, 1)
    shards: dict = {}
    out = {}
    for key, value in entries.items():
        entry: dict = {}
        for field, v in _proto_fields(value):
            entry.setdefault(field, []).append(v)
        if 7 in entry:
            raise ValueError(f"{path}: '{key.decode()}' is partitioned (slices): not supported")
        dtype = entry.get(1, [1])[0]
        if dtype != _BFLOAT16 and dtype not in _TF_DTYPES:
            continue  # strings and other non-numeric entries
        shape = []
        for field, dim in _proto_fields(entry.get(2, [b""])[0]):
            if field == 2:
                shape.append(dict(_proto_fields(dim)).get(1, 0))
        shard = entry.get(3, [0])[0]
        if shard not in shards:
            name = f"{os.fspath(prefix)}.data-{shard:05d}-of-{num_shards:05d}"
            with open(name, "rb") as f:
                shards[shard] = f.read()
        offset, size = entry.get(4, [0])[0], entry.get(5, [0])[0]
        raw = shards[shard][offset : offset + size]
        if dtype == _BFLOAT16:
            bits = np.frombuffer(raw, "<u2").astype(np.uint32) << 16
            array = bits.view(np.float32)
        else:
            array = np.frombuffer(raw, _TF_DTYPES[dtype]).copy()
        out[key.decode()] = array.reshape(shape)
    return out


def _collect(obj, path, out, seen, who):
    """Adds `key -> keratron Variable` for everything `obj` (found at `path`) holds."""
    if isinstance(obj, KVariable):
        if id(obj) not in seen:  # a variable reachable twice is saved once, at its first path
            seen.add(id(obj))
            out[f"{path}/{_VALUE}"] = obj
        return
    if isinstance(obj, Checkpoint):
        for name, child in obj._objects.items():
            _collect(child, f"{path}/{name}", out, seen, who)
        return
    if isinstance(obj, dict):
        for name, child in obj.items():
            _collect(child, f"{path}/{name}", out, seen, who)
        return
    if isinstance(obj, (list, tuple)):
        for i, child in enumerate(obj):
            _collect(child, f"{path}/{i}", out, seen, who)
        return
    if hasattr(obj, "_as_graph_tensor"):
        raise ValueError(
            f"{who}: `{path}` is a TF1 graph variable, whose value lives in a Session; save "
            "those with tf.train.Saver. Checkpoint takes eager (keratron) objects."
        )
    variables = getattr(obj, "variables", None)
    if variables is None or callable(variables):
        raise ValueError(
            f"{who}: `{path}` must be a Variable, a layer, model or optimizer (an object with "
            f"`variables`), a Checkpoint, or a dict or list of them. Received: {type(obj)}"
        )
    for i, v in enumerate(variables):
        _collect(v, f"{path}/variables/{i}", out, seen, who)


class _LoadStatus:
    """What a `restore` matched: `assert_consumed` / `assert_existing_objects_matched`."""

    def __init__(self, unused_keys, missing_keys, matched_keys=()):
        self._unused = sorted(unused_keys)
        self._missing = sorted(missing_keys)
        self._matched = sorted(matched_keys)

    def assert_consumed(self):
        """Raises unless every value of the checkpoint went to a variable and every variable
        got one."""
        if self._unused or self._missing:
            raise AssertionError(
                f"Unresolved object in checkpoint: unused {self._unused[:5]}, objects without "
                f"a value {self._missing[:5]}"
            )
        return self

    def assert_existing_objects_matched(self):
        """Raises unless every variable of the objects got a value."""
        if self._missing:
            raise AssertionError(f"Objects without a value in the checkpoint: {self._missing[:5]}")
        return self

    def expect_partial(self):
        return self

    def assert_nontrivial_match(self):
        """Raises unless some variable besides `save_counter` got a value."""
        if not self._matched:
            raise AssertionError("Nothing except the save counter was matched.")
        return self

    def run_restore_ops(self, session=None):
        """Nothing to run: values are assigned when `restore` is called (eager, as in TF2)."""

    def initialize_or_restore(self, session=None):
        """Nothing to run: values are assigned when `restore` is called (eager, as in TF2)."""


class Checkpoint:
    """`tf.train.Checkpoint(**objects)`: saves and restores the variables of `objects`.

    Example:
        >>> import os, tempfile
        >>> import keratron
        >>> import keratron.compat.v1 as tf
        >>> v = keratron.Variable(1.0)
        >>> ckpt = tf.train.Checkpoint(v=v)
        >>> path = ckpt.save(os.path.join(tempfile.mkdtemp(), "ckpt"))
        >>> _ = v.assign(5.0)
        >>> _ = ckpt.restore(path).assert_consumed()
        >>> float(v)
        1.0
    """

    def __init__(self, root=None, **kwargs):
        if root is not None:
            kwargs = {**kwargs, "root": root}
        for name in kwargs:
            if name == "save_counter" or name.startswith("_"):
                raise ValueError(f"Checkpoint: `{name}` is reserved. Received: {name}=...")
        self._objects = dict(kwargs)
        self.save_counter = KVariable(np.int64(0), dtype="int64", trainable=False,
                                      name="save_counter")  # fmt: skip
        for name, obj in kwargs.items():
            setattr(self, name, obj)

    def __setattr__(self, name, value):
        if not name.startswith("_") and name != "save_counter" and hasattr(self, "_objects"):
            self._objects[name] = value
        object.__setattr__(self, name, value)

    def _variables(self) -> dict:
        out = {f"save_counter/{_VALUE}": self.save_counter}
        seen = {id(self.save_counter)}
        for name, obj in self._objects.items():
            _collect(obj, name, out, seen, "Checkpoint")
        return out

    def write(self, file_prefix, options=None) -> str:
        """Writes the variables to `file_prefix` (no counter, no index); returns it."""
        values = {k: v.numpy() for k, v in self._variables().items()}
        prefix = os.path.abspath(os.fspath(file_prefix))
        directory = os.path.dirname(prefix)
        os.makedirs(directory, exist_ok=True)
        # The Estimator's writer names its file `model.ckpt-<step>.h5`: write it in a scratch
        # directory beside the target and move it to this prefix.
        scratch = tempfile.mkdtemp(prefix=".checkpoint-", dir=directory)
        try:
            step = int(self.save_counter.numpy())
            written = ckpt.save_checkpoint(scratch, step, values, keep_checkpoint_max=0)
            base = os.path.basename(written)
            for name in os.listdir(scratch):
                if name.startswith(base + "."):
                    os.replace(os.path.join(scratch, name), prefix + name[len(base) :])
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        return prefix

    def save(self, file_prefix, options=None) -> str:
        """Increments `save_counter`, writes `<file_prefix>-<save_counter>` and makes the
        directory's `checkpoint` index name it (alone, as TF's does); returns the path."""
        self.save_counter.assign(self.save_counter.numpy() + 1)
        path = self.write(f"{os.fspath(file_prefix)}-{int(self.save_counter.numpy())}")
        saver_lib._write_index(os.path.dirname(path), path, [path])  # as TF: only this one
        return path

    def read(self, save_path, options=None) -> _LoadStatus:
        """Loads the values saved at `save_path` (a prefix) into the variables whose keys it
        holds; `save_counter` too."""
        return self.restore(save_path)

    def restore(self, save_path, options=None) -> _LoadStatus:
        """Loads the checkpoint at `save_path` (a prefix, as `save` and `latest_checkpoint`
        return; None restores nothing).

        Raises:
            NotFoundError: no checkpoint at `save_path`.
            ValueError: a saved value's shape differs from its variable's.
        """
        variables = self._variables()
        if save_path is None:
            return _LoadStatus([], [k for k in variables if not k.startswith("save_counter")])
        if os.path.isfile(os.fspath(save_path) + ".index"):
            values = read_tensor_bundle(save_path)  # written by TensorFlow
        else:
            reader = saver_lib.load_checkpoint(save_path)
            values = {k: reader.get_tensor(k) for k in reader.get_variable_to_shape_map()}
        for key, var in variables.items():
            if key in values:
                value = values[key]
                if tuple(value.shape) != tuple(var.shape):
                    raise ValueError(
                        f"Checkpoint.restore: the value of '{key}' in {save_path} has shape "
                        f"{tuple(value.shape)}, its variable {tuple(var.shape)}"
                    )
                var.assign(np.asarray(value, dtype=var.dtype))
        matched = (set(variables) & set(values)) - {f"save_counter/{_VALUE}"}
        return _LoadStatus(set(values) - set(variables), set(variables) - set(values), matched)


class CheckpointManager:
    """Keeps the last `max_to_keep` checkpoints of a `Checkpoint` in `directory`
    (`<directory>/<checkpoint_name>-<n>`), with TF's `checkpoint` index.

    Example:
        >>> import os, tempfile
        >>> import keratron
        >>> import keratron.compat.v1 as tf
        >>> ckpt = tf.train.Checkpoint(v=keratron.Variable(1.0))
        >>> manager = tf.train.CheckpointManager(ckpt, tempfile.mkdtemp(), max_to_keep=3)
        >>> path = manager.save()
        >>> os.path.basename(path), manager.latest_checkpoint == path
        ('ckpt-1', True)
        >>> _ = ckpt.restore(manager.latest_checkpoint).assert_consumed()
    """

    def __init__(self, checkpoint, directory, max_to_keep, keep_checkpoint_every_n_hours=None,
                 checkpoint_name="ckpt", step_counter=None, checkpoint_interval=None,
                 init_fn=None):  # fmt: skip
        if not isinstance(checkpoint, Checkpoint):
            raise TypeError(
                f"CheckpointManager: checkpoint must be a tf.train.Checkpoint. Received: "
                f"{type(checkpoint)}"
            )
        if max_to_keep is not None and max_to_keep <= 0:
            raise ValueError(
                f"CheckpointManager: max_to_keep must be positive or None. Received: "
                f"max_to_keep={max_to_keep}"
            )
        self._checkpoint = checkpoint
        self._directory = os.path.abspath(os.fspath(directory))
        self._max_to_keep = max_to_keep
        self._prefix = os.path.join(self._directory, checkpoint_name)
        self._init_fn = init_fn
        state = saver_lib.get_checkpoint_state(self._directory)
        found = [] if state is None else state.all_model_checkpoint_paths
        self._kept = [p for p in found if saver_lib.checkpoint_exists(p)]

    @property
    def directory(self) -> str:
        return self._directory

    @property
    def checkpoints(self) -> list:
        """The kept checkpoints' prefixes, oldest first."""
        return list(self._kept)

    @property
    def latest_checkpoint(self):
        return self._kept[-1] if self._kept else None

    def save(self, checkpoint_number=None, check_interval=True, options=None) -> str:
        """Writes a checkpoint numbered `checkpoint_number` (else the checkpoint's
        incremented `save_counter`), drops the oldest beyond `max_to_keep`; returns its path."""
        counter = self._checkpoint.save_counter
        counter.assign(counter.numpy() + 1)
        number = int(counter.numpy()) if checkpoint_number is None else int(checkpoint_number)
        path = self._checkpoint.write(f"{self._prefix}-{number}")
        self._kept = [p for p in self._kept if p != path] + [path]
        if self._max_to_keep is not None:
            while len(self._kept) > self._max_to_keep:
                saver_lib._remove_checkpoint(self._kept.pop(0))
        saver_lib._write_index(self._directory, path, self._kept)
        return path

    def restore_or_initialize(self):
        """Restores the latest checkpoint if there is one (returning its path), else runs
        `init_fn` (returning None)."""
        if self.latest_checkpoint is not None:
            self._checkpoint.restore(self.latest_checkpoint)
            return self.latest_checkpoint
        if self._init_fn is not None:
            self._init_fn()
        return None
