"""`numpy_input_fn`: input functions over in-memory numpy arrays (`tf.estimator.inputs`)."""

from __future__ import annotations

import numpy as np

__all__ = ["numpy_input_fn"]

_TARGET_KEY = "__target_key__"


class _ShuffleNotGiven(TypeError, ValueError):
    """`shuffle` must be an explicit bool. A TypeError as documented here, and a
    ValueError as TensorFlow raises, so that either `except` clause catches it."""


def _as_ordered_dict(x, what):
    if isinstance(x, dict):
        if not x:
            raise ValueError(f"numpy_input_fn: `{what}` cannot be an empty dict.")
        return {k: np.asarray(x[k]) for k in sorted(x)}
    if isinstance(x, np.ndarray):
        if x.size == 0:
            raise ValueError(f"numpy_input_fn: `{what}` cannot be an empty array.")
        return {"__direct_np_input__": x}
    raise TypeError(f"numpy_input_fn: `{what}` must be a dict or array; got {type(x).__name__}")


class _NumpyBatches:
    """The batches of one `numpy_input_fn` call: epochs of (optionally shuffled) indices,
    cut into batches; the last batch may be smaller when `num_epochs` is finite."""

    def __init__(self, data, feature_keys, target, batch_size, num_epochs, shuffle, single):
        self._data = data
        self._feature_keys = feature_keys
        self._target = target
        self._batch_size = batch_size
        self._num_epochs = num_epochs
        self._shuffle = shuffle
        self._single = single
        self._n = len(next(iter(data.values())))

    def _indices(self):
        rng = np.random.default_rng(np.random.randint(0, 2**31 - 1)) if self._shuffle else None
        epoch = 0
        pending = np.empty((0,), dtype=np.int64)
        while self._num_epochs is None or epoch < self._num_epochs:
            order = rng.permutation(self._n) if rng is not None else np.arange(self._n)
            pending = np.concatenate([pending, order])
            epoch += 1
            while len(pending) >= self._batch_size:
                yield pending[: self._batch_size]
                pending = pending[self._batch_size :]
        if len(pending):
            yield pending

    def __iter__(self):
        for idx in self._indices():
            batch = {k: v[idx] for k, v in self._data.items()}
            if self._single:
                features = batch["__direct_np_input__"]
            else:
                features = {k: batch[k] for k in self._feature_keys}
            if self._target is None:
                yield features
            elif isinstance(self._target, str):
                yield features, batch[self._target]
            else:
                yield features, {k: batch[k] for k in self._target}


def numpy_input_fn(
    x, y=None, batch_size=128, num_epochs=1, shuffle=None, queue_capacity=1000, num_threads=1
):
    """An `input_fn` feeding numpy arrays in batches, with TensorFlow's signature.

    The returned function gives an iterable of `(features, targets)` batches (`features`
    alone when `y` is None): `features` is a dict with the keys of `x`, or one array when `x`
    is an array; `targets` likewise for `y`.

    Args:
        x: a numpy array (one feature) or a dict of arrays.
        y: a numpy array, a dict of arrays, or None.
        batch_size: examples per batch.
        num_epochs: passes over the data; None repeats forever.
        shuffle: required: whether each epoch is in a random order.
        queue_capacity, num_threads: accepted for TensorFlow compatibility (batches are
            assembled in the calling thread).

    Raises:
        TypeError (also a ValueError): if `shuffle` is not a bool.
        ValueError: on empty inputs, mismatched lengths or keys in both `x` and `y`.

    Example:
        >>> import tempfile
        >>> x_train, y_train = np.arange(8.0).reshape(8, 1), np.arange(8.0).reshape(8, 1)
        >>> input_fn = keratron.estimator.inputs.numpy_input_fn(
        ...     {"x": x_train}, y_train, batch_size=4, num_epochs=1, shuffle=False)
        >>> cols = [keratron.feature_column.numeric_column("x")]
        >>> estimator = keratron.estimator.LinearRegressor(cols, model_dir=tempfile.mkdtemp())
        >>> _ = estimator.train(input_fn)  # one epoch: two batches of 4
        >>> int(estimator.get_variable_value("global_step"))
        2
    """
    if not isinstance(shuffle, bool):
        raise _ShuffleNotGiven(
            "numpy_input_fn: `shuffle` must be provided and explicitly set as a bool (True is "
            f"recommended for training); got {shuffle!r}"
        )
    if (
        isinstance(batch_size, bool)
        or not isinstance(batch_size, (int, np.integer))
        or batch_size < 1
    ):
        raise ValueError(
            f"numpy_input_fn: `batch_size` must be a positive int. Received: {batch_size!r}"
        )
    if num_epochs is not None and (
        isinstance(num_epochs, bool)
        or not isinstance(num_epochs, (int, np.integer))
        or num_epochs < 1
    ):
        raise ValueError(
            f"numpy_input_fn: `num_epochs` must be a positive int or None. Received: {num_epochs!r}"
        )
    del queue_capacity, num_threads

    def input_fn():
        data = _as_ordered_dict(x, "x")
        feature_keys = list(data)
        if y is None:
            target = None
        elif isinstance(y, dict):
            if not y:
                raise ValueError("numpy_input_fn: `y` cannot be an empty dict; use None instead.")
            ys = _as_ordered_dict(y, "y")
            duplicate = sorted(set(feature_keys) & set(ys))
            if duplicate:
                raise ValueError(
                    f"numpy_input_fn: {len(duplicate)} duplicate keys are found in both x and y: "
                    f"{duplicate}"
                )
            data.update(ys)
            target = list(ys)
        else:
            target = _TARGET_KEY
            while target in data:
                target += "_n"
            data[target] = np.asarray(y)
        if len({len(v) for v in data.values()}) != 1:
            x_shapes = {k: data[k].shape for k in feature_keys}
            y_shapes = {k: v.shape for k, v in data.items() if k not in feature_keys}
            raise ValueError(
                "numpy_input_fn: length of tensors in x and y is mismatched. All elements in x "
                f"and y must have the same length. Shapes in x: {x_shapes}; shapes in y: "
                f"{y_shapes or None}"
            )
        return _NumpyBatches(
            data,
            feature_keys,
            target,
            int(batch_size),
            num_epochs,
            shuffle,
            single=isinstance(x, np.ndarray),
        )

    return input_fn
