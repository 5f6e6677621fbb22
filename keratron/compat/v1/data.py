"""`tf.data` (v1): `Dataset` (keratron.data.Dataset) with `make_one_shot_iterator`,
`make_initializable_iterator` and `Iterator.from_structure`, read through `get_next` in a
`Session`.

The pipeline runs on the host, as `keratron.data` does: `get_next()` is an `IteratorGetNext`
op whose outputs `Session.run` feeds with the iterator's next element (a host step before the
compiled plan), and an iterator's `initializer` restarts it in that session. An exhausted
iterator raises `tf.errors.OutOfRangeError`. Map functions receive keratron tensors (the
element), not graph tensors: use keratron ops or numpy in them.
"""

from __future__ import annotations

import numpy as np

from keratron import data as kdata
from keratron import tree
from keratron.compat.v1 import errors
from keratron.compat.v1.framework import TensorShape, as_dtype, get_default_graph, make_op, op_scope

__all__ = [
    "Dataset",
    "Iterator",
    "TFRecordDataset",
    "make_one_shot_iterator",
    "make_initializable_iterator",
    "get_output_types",
    "get_output_shapes",
]


def _wrap(value):
    return Dataset(value) if isinstance(value, kdata.Dataset) else value


class Dataset:
    """A `keratron.data.Dataset` with TensorFlow 1's iterator methods.

    Example:
        >>> import numpy as np
        >>> import keratron.compat.v1 as tf
        >>> with tf.Graph().as_default(), tf.Session() as sess:
        ...     ds = tf.data.Dataset.from_tensor_slices(np.arange(3)).batch(2)
        ...     nxt = ds.make_one_shot_iterator().get_next()
        ...     print(sess.run(nxt), sess.run(nxt))
        [0 1] [2]
    """

    def __init__(self, dataset):
        self._dataset = dataset

    def __getattr__(self, name):
        attr = getattr(self._dataset, name)
        if not callable(attr):
            return attr

        def method(*args, **kwargs):
            args = [a._dataset if isinstance(a, Dataset) else a for a in args]
            return _wrap(attr(*args, **kwargs))

        return method

    def __iter__(self):
        return iter(self._dataset)

    def __len__(self):
        return len(self._dataset)

    def __repr__(self):
        return repr(self._dataset)

    @property
    def output_types(self):
        return tree.map_structure(lambda s: as_dtype(s.dtype), self._dataset.element_spec)

    @property
    def output_shapes(self):
        return tree.map_structure(lambda s: TensorShape(s.shape), self._dataset.element_spec)

    @property
    def output_classes(self):
        return tree.map_structure(lambda s: object, self._dataset.element_spec)

    def make_one_shot_iterator(self) -> Iterator:
        return Iterator(self, initializable=False)

    def make_initializable_iterator(self, shared_name=None) -> Iterator:
        return Iterator(self, initializable=True)


def _static(name):
    def build(*args, **kwargs):
        args = [a._dataset if isinstance(a, Dataset) else a for a in args]
        return _wrap(getattr(kdata.Dataset, name)(*args, **kwargs))

    build.__name__ = name
    return staticmethod(build)


for _name in ("from_tensor_slices", "from_tensors", "from_generator", "range", "zip"):
    setattr(Dataset, _name, _static(_name))


class TFRecordDataset(Dataset):
    """`tf.data.TFRecordDataset`: the records of TFRecord files, as bytes elements
    (`keratron.data.TFRecordDataset` with TensorFlow 1's iterator methods)."""

    def __init__(self, filenames, compression_type=None, buffer_size=None, num_parallel_reads=None):
        super().__init__(
            kdata.TFRecordDataset(filenames, compression_type, buffer_size, num_parallel_reads)
        )


class Iterator:
    """A v1 iterator over a dataset in a session; `get_next()` is its next element."""

    def __init__(self, dataset, initializable, output_types=None, output_shapes=None):
        self._dataset = dataset
        self._initializable = initializable
        g = get_default_graph()
        if dataset is not None:
            output_types, output_shapes = dataset.output_types, dataset.output_shapes
        self._types = output_types
        self._shapes = output_shapes
        with op_scope(None, "Iterator") as scope:
            self._name = scope
        self._initializer = None
        if initializable:
            self._initializer = self.make_initializer(dataset) if dataset is not None else None
        self.graph = g

    @staticmethod
    def from_structure(output_types, output_shapes=None, shared_name=None, output_classes=None):
        """An iterator not bound to a dataset: `make_initializer(ds)` binds it in a session."""
        if output_shapes is None:
            output_shapes = tree.map_structure(lambda _: TensorShape(None), output_types)
        types = tree.map_structure(as_dtype, output_types)
        shapes = tree.map_structure(
            lambda s: s if isinstance(s, TensorShape) else TensorShape(s), output_shapes
        )
        return Iterator(None, True, types, shapes)

    @property
    def output_types(self):
        return self._types

    @property
    def output_shapes(self):
        return self._shapes

    @property
    def initializer(self):
        if self._initializer is None:
            raise ValueError("Iterator does not have an initializer (use make_initializer).")
        return self._initializer

    def make_initializer(self, dataset, name=None):
        """An op that (re)starts this iterator on `dataset` in the session that runs it."""
        if self._dataset is not None and dataset is not self._dataset and not self._initializable:
            raise ValueError("A one-shot iterator cannot be re-initialized.")

        def host(session):
            session._iterators[self] = iter(dataset._dataset)
            return {}

        with op_scope(name, "make_initializer") as scope:
            op = make_op("MakeIterator", scope, [], lambda ctx: None, [])
        op._attrs["host_fn"] = host
        return op

    def _next_values(self, session) -> list:
        it = session._iterators.get(self)
        if it is None:
            if self._initializable:
                raise errors.FailedPreconditionError(
                    None, None, "GetNext() failed because the iterator has not been initialized."
                )
            it = session._iterators[self] = iter(self._dataset._dataset)
        try:
            element = next(it)
        except StopIteration:
            raise errors.OutOfRangeError(None, None, "End of sequence") from None
        return tree.flatten(element)

    def get_next(self, name=None):
        """The next element (the dataset's structure of symbolic tensors); each `run` that
        needs it advances the iterator once."""
        flat_types = tree.flatten(self._types)
        flat_shapes = tree.flatten(self._shapes)
        specs = [(s, t) for s, t in zip(flat_shapes, flat_types)]
        with op_scope(name, "IteratorGetNext") as scope:
            op = make_op("IteratorGetNext", scope, [], lambda ctx: None, specs)

        def host(session):
            values = self._next_values(session)
            return {
                t: np.asarray(v.numpy() if hasattr(v, "numpy") else v, t.dtype.as_numpy_dtype)
                for t, v in zip(op.outputs, values)
            }

        op._attrs["host_fn"] = host
        return tree.pack_sequence_as(self._types, list(op.outputs))

    def string_handle(self, name=None):
        raise NotImplementedError("Iterator.string_handle: string tensors are not supported.")


def make_one_shot_iterator(dataset) -> Iterator:
    return dataset.make_one_shot_iterator()


def make_initializable_iterator(dataset, shared_name=None) -> Iterator:
    return dataset.make_initializable_iterator()


def get_output_types(dataset_or_iterator):
    return dataset_or_iterator.output_types


def get_output_shapes(dataset_or_iterator):
    return dataset_or_iterator.output_shapes
