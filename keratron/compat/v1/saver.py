"""`tf.train.Saver`, `latest_checkpoint`, `get_checkpoint_state`, `list_variables` and
`load_variable` on the Estimator's checkpoint format (`keratron.estimator.checkpoint`).

A checkpoint is one file per prefix (`<save_path>-<global_step>` plus the format's suffix)
holding each saved variable under its checkpoint name (the variable's op name, or the key of a
`var_list` dict), and a `checkpoint` index in TensorFlow's text format, so Estimator and TF1
programs read each other's checkpoints.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time

import numpy as np

from keratron.compat.v1 import errors
from keratron.compat.v1.framework import GraphKeys, get_default_graph
from keratron.estimator import checkpoint as ckpt

__all__ = [
    "Saver",
    "CheckpointState",
    "latest_checkpoint",
    "get_checkpoint_state",
    "checkpoint_exists",
    "list_variables",
    "load_variable",
    "load_checkpoint",
    "NewCheckpointReader",
]

_INDEX = "checkpoint"


class CheckpointState:
    """The parsed `checkpoint` index: `model_checkpoint_path`, `all_model_checkpoint_paths`."""

    def __init__(self, model_checkpoint_path, all_model_checkpoint_paths):
        self.model_checkpoint_path = model_checkpoint_path
        self.all_model_checkpoint_paths = list(all_model_checkpoint_paths)

    def __repr__(self):
        return f'model_checkpoint_path: "{self.model_checkpoint_path}"\n' + "".join(
            f'all_model_checkpoint_paths: "{p}"\n' for p in self.all_model_checkpoint_paths
        )


def get_checkpoint_state(checkpoint_dir, latest_filename=None) -> CheckpointState | None:
    """The index of `checkpoint_dir` (paths joined to the directory), or None if it has none."""
    _check_index_name(latest_filename)
    state = ckpt.checkpoint_state(checkpoint_dir)
    if state is None:
        return None
    return CheckpointState(state["model_checkpoint_path"], state["all_model_checkpoint_paths"])


def latest_checkpoint(checkpoint_dir, latest_filename=None) -> str | None:
    """The prefix of the newest checkpoint in `checkpoint_dir`, or None.

    Example:
        >>> import os, tempfile
        >>> import keratron.compat.v1 as tf
        >>> d = tempfile.mkdtemp()
        >>> with tf.Graph().as_default(), tf.Session() as sess:
        ...     saver = tf.train.Saver([tf.Variable(1.0)])
        ...     sess.run(tf.global_variables_initializer())
        ...     path = saver.save(sess, os.path.join(d, "model.ckpt"), global_step=10)
        >>> tf.train.latest_checkpoint(d) == path, os.path.basename(path)
        (True, 'model.ckpt-10')
    """
    _check_index_name(latest_filename)
    return ckpt.latest_checkpoint(checkpoint_dir)


def checkpoint_exists(checkpoint_prefix) -> bool:
    return ckpt.checkpoint_exists(checkpoint_prefix)


def _check_index_name(latest_filename) -> None:
    if latest_filename not in (None, _INDEX):
        raise NotImplementedError(
            f"Saver: latest_filename={latest_filename!r} is not supported; the index is always "
            f"'{_INDEX}' (the Estimator's checkpoint format)."
        )


def _resolve(ckpt_dir_or_file) -> str:
    path = os.fspath(ckpt_dir_or_file)
    if os.path.isdir(path):
        found = latest_checkpoint(path)
        if found is None:
            raise ValueError(
                f"Couldn't find 'checkpoint' file or checkpoints in given directory {path}"
            )
        return found
    if not ckpt.checkpoint_exists(path):
        raise errors.NotFoundError(
            None,
            None,
            f"Unsuccessful TensorSliceReader constructor: Failed to find any matching files "
            f"for {path}",
        )
    return path


def _read(prefix) -> dict:
    return ckpt.read_checkpoint(prefix)[0]


class CheckpointReader:
    """`tf.train.load_checkpoint(...)`: the variables of one checkpoint by name."""

    def __init__(self, prefix):
        self._values = _read(_resolve(prefix))

    def get_variable_to_shape_map(self) -> dict:
        return {k: list(v.shape) for k, v in self._values.items()}

    def get_variable_to_dtype_map(self) -> dict:
        from keratron.compat.v1.framework import as_dtype

        return {k: as_dtype(v.dtype.name) for k, v in self._values.items()}

    def has_tensor(self, name) -> bool:
        return name in self._values

    def get_tensor(self, name):
        if name not in self._values:
            raise errors.NotFoundError(None, None, f"Key {name} not found in checkpoint")
        return self._values[name]


def load_checkpoint(ckpt_dir_or_file) -> CheckpointReader:
    return CheckpointReader(ckpt_dir_or_file)


NewCheckpointReader = load_checkpoint


def list_variables(ckpt_dir_or_file) -> list:
    """[(name, shape)] of every variable in a checkpoint (or a directory's latest), by name."""
    values = _read(_resolve(ckpt_dir_or_file))
    return sorted((k, list(v.shape)) for k, v in values.items())


def load_variable(ckpt_dir_or_file, name):
    """The value of variable `name` (":0" optional) in a checkpoint, as a numpy array."""
    name = name[:-2] if name.endswith(":0") else name
    return CheckpointReader(ckpt_dir_or_file).get_tensor(name)


def _var_map(var_list) -> dict:
    if var_list is None:
        g = get_default_graph()
        var_list = g.get_collection(GraphKeys.GLOBAL_VARIABLES) + g.get_collection(
            "saveable_objects"
        )
    if isinstance(var_list, dict):
        return dict(var_list)
    out: dict = {}
    for v in var_list:
        name = v.op.name
        if name in out and out[name] is not v:
            raise ValueError(f"At least two variables have the same name: {name}")
        out[name] = v
    if not out:
        raise ValueError("No variables to save")
    return out


def _write_index(directory, latest, paths) -> None:
    def rel(p):
        return os.path.basename(p) if os.path.dirname(p) == directory else p

    lines = [f'model_checkpoint_path: "{rel(latest)}"']
    lines += [f'all_model_checkpoint_paths: "{rel(p)}"' for p in paths]
    tmp = os.path.join(directory, f".{_INDEX}.tmp{os.getpid()}")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, os.path.join(directory, _INDEX))


def _remove_checkpoint(prefix) -> None:
    directory, base = os.path.split(prefix)
    for name in os.listdir(directory or "."):
        if name.startswith(base + "."):
            try:
                os.remove(os.path.join(directory, name))
            except FileNotFoundError:
                pass


class Saver:
    """Saves and restores variables (`tf.train.Saver`).

    Args:
        var_list: the variables to save (default: all global variables), as a list
            (checkpoint names are the variables' op names) or a dict name -> variable.
        max_to_keep: how many recent checkpoints this saver keeps (None or 0: all).

    Example:
        >>> import os, tempfile
        >>> import keratron.compat.v1 as tf
        >>> prefix = os.path.join(tempfile.mkdtemp(), "model.ckpt")
        >>> with tf.Graph().as_default(), tf.Session() as sess:
        ...     v = tf.Variable(1.0)
        ...     saver = tf.train.Saver({"my_v": v}, max_to_keep=2)
        ...     sess.run(tf.global_variables_initializer())
        ...     path = saver.save(sess, prefix, global_step=100)
        ...     _ = sess.run(tf.assign(v, 5.0))
        ...     saver.restore(sess, path)
        ...     print(os.path.basename(path), sess.run(v))
        model.ckpt-100 1.0
        >>> tf.train.list_variables(path)
        [('my_v', [])]
    """

    def __init__(self, var_list=None, reshape=False, sharded=False, max_to_keep=5,
                 keep_checkpoint_every_n_hours=10000.0, name=None, restore_sequentially=False,
                 saver_def=None, builder=None, defer_build=False, allow_empty=False,
                 write_version=2, pad_step_number=False, save_relative_paths=False,
                 filename=None):  # fmt: skip
        self._var_list = var_list
        self._vars = None if defer_build else _var_map(var_list)
        self._max_to_keep = max_to_keep
        self._pad = pad_step_number
        self._last: list = []  # [(prefix, time)] of this saver's kept checkpoints
        get_default_graph().add_to_collection(GraphKeys.SAVERS, self)

    def build(self) -> None:
        if self._vars is None:
            self._vars = _var_map(self._var_list)

    @property
    def last_checkpoints(self) -> list:
        return [p for p, _ in self._last]

    def set_last_checkpoints_with_time(self, last_checkpoints_with_time) -> None:
        self._last = list(last_checkpoints_with_time)

    def recover_last_checkpoints(self, checkpoint_paths) -> None:
        self._last = [(p, time.time()) for p in checkpoint_paths if ckpt.checkpoint_exists(p)]

    def save(self, sess, save_path, global_step=None, latest_filename=None,
             meta_graph_suffix="meta", write_meta_graph=True, write_state=True,
             strip_default_attrs=False, save_debug_info=False) -> str:  # fmt: skip
        """Writes the variables' values in `sess` to `save_path` (`-<global_step>` appended
        when given: an int, or a tensor/variable read in `sess`); returns the prefix."""
        self.build()
        _check_index_name(latest_filename)
        step = None
        if global_step is not None:
            step = int(
                global_step if isinstance(global_step, (int, np.integer)) else sess.run(global_step)
            )
            suffix = f"{step:08d}" if self._pad else str(step)
            prefix = f"{os.fspath(save_path)}-{suffix}"
        else:
            prefix = os.fspath(save_path)
        prefix = os.path.abspath(prefix)
        names = list(self._vars)
        values = dict(zip(names, sess.run([self._vars[n] for n in names]) if names else []))
        directory = os.path.dirname(prefix)
        os.makedirs(directory, exist_ok=True)
        # The Estimator's writer names its files `model.ckpt-<step>`: write there in a
        # scratch directory beside the target and move the files to this prefix.
        scratch = tempfile.mkdtemp(prefix=".saver-", dir=directory)
        try:
            written = ckpt.save_checkpoint(scratch, step or 0, values, keep_checkpoint_max=0)
            base = os.path.basename(written)
            for name in os.listdir(scratch):
                if name.startswith(base + "."):
                    os.replace(os.path.join(scratch, name), prefix + name[len(base) :])
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        self._last = [(p, t) for p, t in self._last if p != prefix] + [(prefix, time.time())]
        if self._max_to_keep:
            while len(self._last) > self._max_to_keep:
                _remove_checkpoint(self._last.pop(0)[0])
        if write_state:
            _write_index(directory, prefix, self.last_checkpoints)
        return prefix

    def restore(self, sess, save_path) -> None:
        """Loads this saver's variables (only those: a partial restore leaves the others as
        they are) from checkpoint `save_path` into `sess`.

        Raises:
            ValueError: `save_path` is None.
            NotFoundError: the checkpoint or one of the variables is missing from it.
            InvalidArgumentError: a saved shape differs from the variable's.
        """
        self.build()
        if save_path is None:
            raise ValueError("Can't load save_path when it is None.")
        if not ckpt.checkpoint_exists(save_path):
            raise errors.NotFoundError(
                None, None, f"The passed save_path is not a valid checkpoint: {save_path}"
            )
        values = _read(save_path)
        for name, var in self._vars.items():
            if name not in values:
                raise errors.NotFoundError(None, None, f"Key {name} not found in checkpoint")
            value = values[name]
            want = var.shape.as_list()
            if list(value.shape) != want:
                raise errors.InvalidArgumentError(
                    None,
                    None,
                    f"Assign requires shapes of both tensors to match. lhs shape= {want} "
                    f"rhs shape= {list(value.shape)} (variable {name})",
                )
            sess.load_variable(var, value)

    def as_saver_def(self):
        return None

    def export_meta_graph(self, *args, **kwargs):
        raise NotImplementedError("Saver.export_meta_graph: MetaGraphDef export is not supported.")
