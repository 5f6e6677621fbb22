"""Turning what `fit` / `evaluate` / `predict` receive into batches, as Keras's data adapters do.

Accepted inputs: arrays (numpy, keratron Tensors, torch tensors, or lists / dicts of them),
Python generators and other iterables of batches, `keratron.utils.PyDataset`, and
`keratron.data.Dataset` (of batches, as Keras takes a `tf.data.Dataset`). A batch is
`x`, `(x,)`, `(x, y)` or `(x, y, sample_weight)`; its arrays enter the step as keratron
Tensors (numpy float64 becomes `floatx()`).
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import torch

from keratron import config
from keratron.autodiff import tree
from keratron.autodiff.tensor import Tensor, convert_to_tensor
from keratron.data.dataset import INFINITE_CARDINALITY, Dataset
from keratron.layers.node import KerasTensor

__all__ = [
    "EpochIterator",
    "unpack_x_y_sample_weight",
    "pack_x_y_sample_weight",
    "train_validation_split",
    "class_weight_to_sample_weights",
]


def unpack_x_y_sample_weight(data):
    """`(x, y, sample_weight)` from a batch given as `x`, `(x,)`, `(x, y)` or `(x, y, sw)`.

    Example:
        >>> x_batch, y_batch = np.ones((2, 3)), np.zeros((2,))
        >>> x, y, sw = keratron.utils.unpack_x_y_sample_weight((x_batch, y_batch))
        >>> x.shape, y.shape, sw
        ((2, 3), (2,), None)
    """
    if isinstance(data, list):
        data = tuple(data)
    if not isinstance(data, tuple):
        return data, None, None
    if len(data) == 1:
        return data[0], None, None
    if len(data) == 2:
        return data[0], data[1], None
    if len(data) == 3:
        return data[0], data[1], data[2]
    raise ValueError(
        "Data is expected to be in format `x`, `(x,)`, `(x, y)`, or `(x, y, sample_weight)`, "
        f"found a tuple of {len(data)} elements."
    )


def pack_x_y_sample_weight(x, y=None, sample_weight=None):
    """The inverse of `unpack_x_y_sample_weight`."""
    if y is None:
        return (x,) if tree.is_nested(x) else x
    if sample_weight is None:
        return (x, y)
    return (x, y, sample_weight)


def _is_array(x) -> bool:
    return isinstance(x, (np.ndarray, torch.Tensor, Tensor))


def _foreign_array(v):
    """Another library's array (a TensorFlow or JAX tensor, a pandas frame or series: what
    has a shape and converts with `np.asarray`, and is not an iterator) as a numpy array, as
    Keras's array adapter takes them; anything else as is."""
    if v is None or _is_array(v) or isinstance(v, (list, tuple, dict, str, bytes)):
        return v
    if hasattr(v, "__array__") and hasattr(v, "shape") and not hasattr(v, "__next__"):
        return np.asarray(v)
    return v


def _numbers(v) -> bool:
    """Whether `v` is a non-empty (nested) list of Python numbers."""
    if not isinstance(v, list) or not v:
        return False
    return all(_numbers(e) if isinstance(e, list) else isinstance(e, (int, float)) for e in v)


def _array_like(v):
    """`fit`'s x, y or sample_weight with other libraries' arrays (`_foreign_array`) and a
    (nested) list of Python numbers made numpy arrays, as tf.keras 2 took them (a list of
    arrays stays a list: several inputs)."""
    if _numbers(v):
        return np.asarray(v)
    return tree.map_structure(_foreign_array, v)


def _all_arrays(structure) -> bool:
    leaves = [v for v in tree.flatten(structure) if v is not None]
    return bool(leaves) and all(_is_array(v) for v in leaves)


def _to_numpy(x):
    if x is None:
        return None
    if isinstance(x, Tensor):
        return x.numpy()
    if isinstance(x, torch.Tensor):
        return x.detach().cpu().numpy()
    return np.asarray(x)


def _to_tensor(x):
    """A batch leaf -> a keratron Tensor; numpy float64 arrives as floatx, as in Keras."""
    if type(x) is torch.Tensor and not x.requires_grad:
        return Tensor(x)  # a batch cut from an array adapter's views: the common case first
    if x is None or isinstance(x, (Tensor, KerasTensor)):
        return x
    if isinstance(x, np.ndarray) and x.dtype == np.float64:
        return convert_to_tensor(x, dtype=config.floatx())
    if isinstance(x, (np.ndarray, torch.Tensor, np.generic)):
        return convert_to_tensor(x)
    if isinstance(x, (int, float)) and not isinstance(x, bool):
        return convert_to_tensor(np.asarray(x, dtype=config.floatx()))
    if isinstance(x, list):
        return convert_to_tensor(np.asarray(x))
    return x


def _indexable(a):
    """An array leaf as a torch tensor sharing its memory where torch has its dtype (float64
    cast to floatx once, as each batch would be); other leaves stay numpy arrays."""
    if not isinstance(a, np.ndarray) or a.dtype.kind not in "biuf" or a.ndim == 0:
        return a
    if a.dtype == np.float64:
        return torch.from_numpy(a.astype(config.floatx()))
    try:
        return torch.from_numpy(a if a.flags.writeable and a.flags.c_contiguous else a.copy())
    except TypeError:  # a dtype torch lacks (unsigned 16/32/64-bit in some builds)
        return a


def _take(a, idx):
    if a is None:
        return None
    if isinstance(a, torch.Tensor):
        return a[idx] if isinstance(idx, slice) else a.index_select(0, idx)
    return a[idx if isinstance(idx, slice) else idx.numpy()]


def _convert_batch(batch):
    if isinstance(batch, dict):
        return {k: _convert_batch(v) for k, v in batch.items()}
    if isinstance(batch, (list, tuple)) and not (
        isinstance(batch, list) and batch and all(isinstance(v, (int, float)) for v in batch)
    ):
        return type(batch)(_convert_batch(v) for v in batch)
    return _to_tensor(batch)


def class_weight_to_sample_weights(y, class_weight: dict) -> np.ndarray:
    """Per-sample weights from a {class index: weight} dict: labels are the argmax of one-hot
    rows, or the rounded value of single-column / 1-D labels (binary)."""
    if not isinstance(class_weight, dict):
        raise ValueError(
            f"`class_weight` must be a dict mapping class indices to weights. "
            f"Received: class_weight={class_weight!r}"
        )
    labels = _to_numpy(y)
    if labels.ndim > 1:
        labels = np.argmax(labels, axis=-1) if labels.shape[-1] != 1 else labels[..., 0]
    labels = np.round(labels).astype("int64").reshape(labels.shape[0], -1)[:, 0]
    return np.array([class_weight.get(int(c), 1.0) for c in labels], dtype=config.floatx())


def train_validation_split(arrays, validation_split):
    """Splits array data into (train, validation): the last `validation_split` fraction of
    samples, before any shuffling, is the validation data (Keras's rule)."""
    arrays = tuple(_array_like(v) for v in arrays)
    flat = tree.flatten(arrays)
    bad = [type(t).__name__ for t in flat if t is not None and not _is_array(t)]
    if bad:
        raise ValueError(
            "Argument `validation_split` is only supported for tensors or NumPy arrays. "
            f"Found incompatible type in the input: {bad}"
        )
    if isinstance(validation_split, bool) or not 0.0 < float(validation_split) < 1.0:
        raise ValueError(
            "Argument `validation_split` must be a fraction strictly between 0 and 1 (the "
            f"share of samples held out). Received: validation_split={validation_split!r}"
        )
    first = next((t for t in flat if t is not None), None)
    if first is None:
        return arrays, arrays
    n = int(first.shape[0])
    split_at = int(math.floor(n * (1.0 - validation_split)))
    if split_at == 0 or split_at == n:
        raise ValueError(
            f"Training data contains {n} samples, which is not sufficient to split it into a "
            f"validation and training set as specified by "
            f"`validation_split={validation_split}`. Either provide more data, or a "
            "different value for the `validation_split` argument."
        )

    def cut(lo, hi):
        return tree.map_structure(lambda t: None if t is None else t[lo:hi], arrays)

    return cut(0, split_at), cut(split_at, n)


# ---------------------------------------------------------------------- adapters
class _ArrayAdapter:
    def __init__(self, x, y, sample_weight, batch_size, steps, shuffle, class_weight):
        if sample_weight is not None:
            if class_weight is not None:
                raise ValueError(
                    "You cannot use `class_weight` and `sample_weight` at the same time."
                )
            if tree.is_nested(y) and not tree.is_nested(sample_weight):
                sw = _to_numpy(sample_weight)
                if not (sw.ndim == 1 or (sw.ndim == 2 and sw.shape[1] == 1)):
                    raise ValueError(
                        "For a model with multiple outputs, a single `sample_weight` array "
                        "should have one scalar weight per sample (shape `(num_samples,)`). "
                        f"Received shape {sw.shape}."
                    )
                sample_weight = tree.map_structure(lambda _: sw, y)
        if class_weight is not None:
            if tree.is_nested(y):
                raise ValueError(
                    "`class_weight` is only supported for Models with a single output."
                )
            if y is None:
                raise ValueError("`class_weight` needs targets `y`.")
            sample_weight = class_weight_to_sample_weights(y, class_weight)
        data = pack_x_y_sample_weight(x, y, sample_weight)
        self._data = tree.map_structure(_to_numpy, data)
        # Batches are cut from torch views of the arrays (made once, sharing their memory):
        # a slice is then free and a shuffled batch one multi-threaded index_select.
        self._tensors = tree.map_structure(_indexable, self._data)
        sizes = {int(a.shape[0]) for a in tree.flatten(self._data) if a is not None}
        if len(sizes) != 1:
            detail = {
                name: sorted({int(a.shape[0]) for a in tree.flatten(part) if a is not None})
                for name, part in (("x", x), ("y", y), ("sample_weight", sample_weight))
                if part is not None
            }
            raise ValueError(
                f"Data cardinality is ambiguous: the arrays do not all have the same number "
                f"of samples. Sizes: {detail}. Make sure all arrays contain the same number "
                "of samples."
            )
        self.num_samples = sizes.pop()
        if batch_size is None:
            batch_size = int(math.ceil(self.num_samples / steps)) if steps else 32
        if isinstance(batch_size, bool) or int(batch_size) != batch_size or int(batch_size) <= 0:
            raise ValueError(
                f"`batch_size` must be a positive integer. Received: batch_size={batch_size!r}"
            )
        self.batch_size = int(batch_size)
        self.num_batches = int(math.ceil(self.num_samples / self.batch_size))
        self.shuffle = shuffle

    def __iter__(self):
        n, bs = self.num_samples, self.batch_size
        # `(x, y, sample_weight)` of plain arrays (the usual case): cut without the generic
        # structure walk.
        flat = type(self._tensors) is tuple and not any(tree.is_nested(a) for a in self._tensors)
        perm = None
        if self.shuffle and self.shuffle != "batch":
            perm = torch.from_numpy(np.random.permutation(n))
        for i in range(self.num_batches):
            lo, hi = i * bs, min((i + 1) * bs, n)
            if self.shuffle == "batch":
                idx = torch.from_numpy(np.random.permutation(hi - lo) + lo)
            elif perm is not None:
                idx = perm[lo:hi]
            else:
                idx = slice(lo, hi)
            if flat:
                yield tuple([_take(a, idx) for a in self._tensors])
            else:
                yield tree.map_structure(lambda a, idx=idx: _take(a, idx), self._tensors)


class _IterableAdapter:
    """Generators (one pass, shared across epochs) and re-iterable batch sources."""

    def __init__(self, source, class_weight):
        self.source = source
        self.class_weight = class_weight
        self.num_batches = len(source) if hasattr(source, "__len__") else None

    def __iter__(self):
        # iter() of a generator is the generator itself: its batches are shared by epochs.
        for batch in self.source:
            yield _apply_class_weight(batch, self.class_weight)


class _PyDatasetAdapter:
    def __init__(self, dataset, shuffle, class_weight):
        self.dataset = dataset
        self.class_weight = class_weight
        self.num_batches = dataset.num_batches
        if self.num_batches is None and shuffle:
            warnings.warn(
                "`shuffle=True` was passed, but will be ignored since the data `x` was provided "
                "as an infinite PyDataset.",
                stacklevel=4,
            )
            shuffle = False
        self.shuffle = bool(shuffle)

    def __iter__(self):
        from keratron.utils.py_dataset import iterate_epoch

        for batch in iterate_epoch(self.dataset, shuffle=self.shuffle):
            yield _apply_class_weight(batch, self.class_weight)


class _DatasetAdapter:
    """A `keratron.data.Dataset` of batches; every epoch is a new pass over it (which
    reshuffles a `shuffle`d dataset)."""

    def __init__(self, dataset, class_weight):
        self.dataset = dataset
        self.class_weight = class_weight
        n = dataset._cardinality()
        self.infinite = n == INFINITE_CARDINALITY
        self.num_batches = n if n >= 0 else None

    def __iter__(self):
        for batch in self.dataset:
            yield _apply_class_weight(batch, self.class_weight)


def validation_batch_size(val_x, batch_size):
    """The batch size validation data inherits from `fit`: none for a Dataset, which is
    already batched (so `fit(x, y, batch_size=32, validation_data=dataset)` works)."""
    return None if isinstance(val_x, Dataset) else batch_size


def _apply_class_weight(batch, class_weight):
    if class_weight is None:
        return batch
    x, y, sw = unpack_x_y_sample_weight(batch)
    if y is None:
        raise ValueError("`class_weight` needs batches with targets: `(x, y)`.")
    if sw is not None:
        raise ValueError("You cannot use `class_weight` and `sample_weight` at the same time.")
    if tree.is_nested(y):
        raise ValueError("`class_weight` is only supported for Models with a single output.")
    return (x, y, class_weight_to_sample_weights(y, class_weight))


def _get_adapter(x, y, sample_weight, batch_size, steps, shuffle, class_weight):
    from keratron.utils.py_dataset import PyDataset

    if isinstance(x, PyDataset):
        _reject_targets(y, sample_weight, "a PyDataset")
        return _PyDatasetAdapter(x, shuffle, class_weight)
    if isinstance(x, Dataset):
        # Keras's wording; `shuffle` is ignored, as the dataset shuffles itself.
        for arg, value, what in (
            ("y", y, "the targets"),
            ("sample_weight", sample_weight, "the sample weights"),
        ):
            if value is not None:
                raise ValueError(
                    f"When providing `x` as a keratron.data.Dataset, `{arg}` should not be "
                    f"passed. Instead, {what} should be included as part of the "
                    "keratron.data.Dataset."
                )
        if batch_size is not None:
            raise ValueError(
                "The `batch_size` argument must not be specified for the given input type. "
                f"Received input: {x}, batch_size: {batch_size}"
            )
        return _DatasetAdapter(x, class_weight)
    x, y, sample_weight = (_array_like(v) for v in (x, y, sample_weight))
    if _all_arrays((x, y, sample_weight)):
        return _ArrayAdapter(x, y, sample_weight, batch_size, steps, shuffle, class_weight)
    if isinstance(x, (list, tuple, dict)) or x is None or _is_array(x):
        raise ValueError(
            "Unrecognized data: `x`, `y` and `sample_weight` must be arrays (numpy, Tensors) or "
            f"lists / dicts of arrays, or `x` a generator or PyDataset. Received: "
            f"x={_describe(x)}, y={_describe(y)}, sample_weight={_describe(sample_weight)}"
        )
    if not hasattr(x, "__iter__"):
        raise ValueError(
            "Unrecognized data type: x must be arrays, a generator, an iterable of batches or a "
            f"PyDataset. Received: x of type {type(x).__name__}"
        )
    _reject_targets(y, sample_weight, "a generator or iterable of batches")
    return _IterableAdapter(x, class_weight)


def _describe(x):
    return tree.map_structure(lambda v: type(v).__name__, x) if x is not None else None


def _reject_targets(y, sample_weight, what):
    if y is not None:
        raise ValueError(
            f"When providing `x` as {what}, `y` should not be passed: the batches must hold "
            "the targets."
        )
    if sample_weight is not None:
        raise ValueError(
            f"When providing `x` as {what}, `sample_weight` should not be passed: the "
            "batches must hold the sample weights."
        )


class EpochIterator:
    """Yields `(begin_step, end_step, batches)` for each step group of an epoch.

    With `steps_per_epoch`, the data is consumed across epochs from where the last epoch
    stopped and restarted when it runs out, as Keras does.
    """

    def __init__(
        self,
        x,
        y=None,
        sample_weight=None,
        batch_size=None,
        steps_per_epoch=None,
        shuffle=False,
        class_weight=None,
        steps_per_execution=1,
    ):
        if steps_per_epoch is not None and int(steps_per_epoch) <= 0:
            raise ValueError(
                f"`steps_per_epoch` must be a positive integer. Received: {steps_per_epoch}"
            )
        cap = config.max_steps_per_epoch()  # a debugging cap, as Keras's
        if cap and (not steps_per_epoch or cap < steps_per_epoch):
            warnings.warn(f"Limiting steps_per_epoch to {cap}", stacklevel=3)
            steps_per_epoch = cap
        self.steps_per_epoch = int(steps_per_epoch) if steps_per_epoch else None
        self.steps_per_execution = max(int(steps_per_execution or 1), 1)
        self.adapter = _get_adapter(
            x, y, sample_weight, batch_size, self.steps_per_epoch, shuffle, class_weight
        )
        if getattr(self.adapter, "infinite", False) and self.steps_per_epoch is None:
            raise ValueError(
                "When passing an infinitely repeating dataset, you must specify how many steps "
                "to draw from it: `steps_per_epoch` in `fit`, `steps` in `evaluate` and "
                "`predict` (and `validation_steps` for validation data)."
            )
        self._iterator = None
        self._steps_seen = 0
        self._exhausted = False

    @property
    def num_batches(self):
        return self.steps_per_epoch or self.adapter.num_batches

    def _warn_out_of_data(self):
        warnings.warn(
            "Your input ran out of data; interrupting training. Make sure that your dataset or "
            "generator can generate at least `steps_per_epoch * epochs` batches.",
            stacklevel=4,
        )

    def _next_batch(self):
        if self._iterator is None:
            self._iterator = iter(self.adapter)
            self._steps_seen = 0
        batch = next(self._iterator)
        self._steps_seen += 1
        return _convert_batch(batch)

    def __iter__(self):
        total = self.steps_per_epoch
        if total is None:
            self._iterator = None  # a fresh pass over the data every epoch
        step = 0
        while total is None or step < total:
            size = self.steps_per_execution
            if total is not None:
                size = min(size, total - step)
            group, ran_out = [], False
            for _ in range(size):
                try:
                    group.append(self._next_batch())
                except StopIteration:
                    ran_out = True
                    self._iterator = None
                    break
            if group:
                yield step, step + len(group) - 1, group
                step += len(group)
            if ran_out:
                if total is not None:
                    self._warn_out_of_data()
                break
        n = self.adapter.num_batches
        if total is not None and n is not None and self._steps_seen >= n:
            self._iterator = None  # the next epoch starts a new pass
        self._exhausted = step == 0

    @property
    def exhausted(self) -> bool:
        """Whether the last epoch produced no batch at all (e.g. an exhausted generator)."""
        return self._exhausted
