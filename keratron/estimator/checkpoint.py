"""Estimator checkpoints: `model.ckpt-<step>.h5` files and TensorFlow's `checkpoint` index.

One HDF5 file per checkpoint holds every variable the `model_fn` made (layer weights,
optimizer slots and counters) as a dataset named by the variable's path, and the global
step as the `global_step` dataset; no pickled objects. The index file is TensorFlow's text
format, naming checkpoints by prefix (`model.ckpt-100`), so `latest_checkpoint` returns the
same strings TensorFlow does.

Writes are crash-safe: each file is written to a temporary file in the same directory,
fsynced and renamed into place, the index only after its checkpoint, and old checkpoints are
deleted only after the index stops naming them. A process killed at any moment leaves the
previous checkpoint and index intact.
"""

from __future__ import annotations

import os
import re
import time

import h5py
import numpy as np

from keratron.utils.io_utils import atomic_write

__all__ = [
    "CHECKPOINT_BASENAME",
    "latest_checkpoint",
    "checkpoint_state",
    "save_checkpoint",
    "read_checkpoint",
    "checkpoint_exists",
]

CHECKPOINT_BASENAME = "model.ckpt"
INDEX_FILENAME = "checkpoint"
_SUFFIX = ".h5"
_FORMAT = "keratron.estimator.checkpoint"
_LINE = re.compile(r"^\s*([a-z_]+)\s*:\s*(.*?)\s*$")


def _data_file(prefix: str) -> str:
    return prefix + _SUFFIX


def checkpoint_exists(prefix) -> bool:
    """Whether the checkpoint named by `prefix` (e.g. ".../model.ckpt-100") has its file."""
    return prefix is not None and os.path.isfile(_data_file(os.fspath(prefix)))


def _unquote(text: str) -> str:
    if len(text) >= 2 and text[0] == text[-1] == '"':
        return text[1:-1].replace('\\"', '"').replace("\\\\", "\\")
    return text


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def checkpoint_state(model_dir) -> dict | None:
    """The parsed index of `model_dir`: `model_checkpoint_path` and
    `all_model_checkpoint_paths` (relative entries joined to `model_dir`), or None."""
    path = os.path.join(os.fspath(model_dir), INDEX_FILENAME)
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        return None
    state = {"model_checkpoint_path": None, "all_model_checkpoint_paths": []}
    for line in text.splitlines():
        m = _LINE.match(line)
        if not m:
            continue
        key, value = m.group(1), _unquote(m.group(2))
        if key in ("model_checkpoint_path", "all_model_checkpoint_paths"):
            if not os.path.isabs(value):
                value = os.path.join(os.fspath(model_dir), value)
            if key == "model_checkpoint_path":
                state[key] = value
            else:
                state[key].append(value)
    if state["model_checkpoint_path"] is None:
        return None
    return state


def latest_checkpoint(model_dir) -> str | None:
    """The prefix of the newest checkpoint in `model_dir` (e.g. ".../model.ckpt-200"), or
    None when there is none (no index, or its checkpoint file is gone).

    Example:
        >>> import os, tempfile
        >>> model_dir = tempfile.mkdtemp()
        >>> print(keratron.estimator.latest_checkpoint(model_dir))
        None
        >>> cols = [keratron.feature_column.numeric_column("x")]
        >>> est = keratron.estimator.LinearRegressor(cols, model_dir=model_dir)
        >>> _ = est.train(lambda: ({"x": np.ones((2, 1))}, np.ones((2, 1))), steps=2)
        >>> os.path.basename(keratron.estimator.latest_checkpoint(model_dir))
        'model.ckpt-2'
    """
    if model_dir is None:
        return None
    state = checkpoint_state(model_dir)
    if state is None:
        return None
    prefix = state["model_checkpoint_path"]
    return prefix if checkpoint_exists(prefix) else None


def _write_index(model_dir: str, latest: str, all_paths: list, timestamps: list) -> None:
    lines = [f"model_checkpoint_path: {_quote(os.path.basename(latest))}"]
    lines += [f"all_model_checkpoint_paths: {_quote(os.path.basename(p))}" for p in all_paths]
    lines += [f"all_model_checkpoint_timestamps: {t:.6f}" for t in timestamps]
    lines.append(f"last_preserved_timestamp: {min(timestamps, default=time.time()):.6f}")
    with atomic_write(os.path.join(model_dir, INDEX_FILENAME)) as tmp:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")


def _dataset_names(paths: list) -> list:
    """Each variable's dataset name: its path, or `<path>/:value` when the path is also the
    group of another path ("v" beside "v/ExponentialMovingAverage")."""
    groups = {p.rsplit("/", 1)[0] for p in paths if "/" in p}
    prefixes = {g[:i] for g in groups for i in range(len(g) + 1) if i == len(g) or g[i] == "/"}
    return [f"{p}/:value" if p in prefixes else p for p in paths]


def save_checkpoint(model_dir, global_step: int, values: dict, keep_checkpoint_max=5) -> str:
    """Writes `values` (variable path -> numpy array) as checkpoint `model.ckpt-<step>`,
    makes it the latest in the index and deletes checkpoints beyond `keep_checkpoint_max`
    (None or 0 keeps all). Returns the new checkpoint's prefix."""
    model_dir = os.fspath(model_dir)
    os.makedirs(model_dir, exist_ok=True)
    prefix = os.path.join(model_dir, f"{CHECKPOINT_BASENAME}-{int(global_step)}")
    with atomic_write(_data_file(prefix)) as tmp:
        with h5py.File(tmp, "w") as f:
            f.attrs["format"] = _FORMAT
            f.attrs["version"] = 1
            f.create_dataset("global_step", data=np.int64(global_step))
            variables = f.create_group("variables")
            names = _dataset_names(list(values))
            for name, value in zip(names, values.values()):
                variables.create_dataset(name, data=np.asarray(value))
            f.attrs["dataset_names"] = np.array(names, dtype=h5py.string_dtype())
            f.attrs["variable_paths"] = np.array(list(values), dtype=h5py.string_dtype())
    state = checkpoint_state(model_dir)
    previous = [] if state is None else state["all_model_checkpoint_paths"]
    kept = [p for p in previous if p != prefix and checkpoint_exists(p)] + [prefix]
    removed = []
    if keep_checkpoint_max:
        removed = kept[: max(0, len(kept) - keep_checkpoint_max)]
        kept = kept[len(removed) :]
    stamps = [os.path.getmtime(_data_file(p)) for p in kept]
    _write_index(model_dir, prefix, kept, stamps)
    for p in removed:
        try:
            os.remove(_data_file(p))
        except FileNotFoundError:
            pass
    return prefix


def read_checkpoint(prefix) -> tuple[dict, int]:
    """Reads a whole checkpoint: (variable path -> numpy array, global step).

    Raises:
        FileNotFoundError: if the checkpoint's file is missing.
        ValueError: if the file is not a readable keratron estimator checkpoint.
    """
    path = _data_file(os.fspath(prefix))
    if not os.path.isfile(path):
        raise FileNotFoundError(
            f"Estimator checkpoint '{prefix}': no file '{path}'. Pass the prefix that "
            "latest_checkpoint() returns (e.g. '<model_dir>/model.ckpt-100')."
        )
    try:
        with h5py.File(path, "r") as f:
            if f.attrs.get("format") != _FORMAT:
                raise ValueError("it is not a keratron estimator checkpoint (no format tag)")
            paths = [
                p.decode() if isinstance(p, bytes) else str(p) for p in f.attrs["variable_paths"]
            ]
            group = f["variables"]
            names = paths
            if "dataset_names" in f.attrs:
                names = [
                    n.decode() if isinstance(n, bytes) else str(n) for n in f.attrs["dataset_names"]
                ]
            values = {p: np.array(group[n]) for p, n in zip(paths, names)}
            step = int(np.array(f["global_step"]))
    except (OSError, KeyError, ValueError) as e:
        raise ValueError(f"Estimator checkpoint '{path}' cannot be read: {e}") from None
    return values, step
