"""`Dataset`: a tf.data-style input pipeline of Python iterators.

A dataset is a recipe: each `iter(dataset)` starts a fresh pass, built from a chain of
Python generators (one per transformation), so a pass holds only what its buffers hold
(shuffle, prefetch, cache). Elements are nested structures of CPU keratron Tensors (strings
are `bytes`, see `structure.py`); user functions given to `map`, `filter`, ... run under a
CPU device scope, as tf.data runs them on the host.

`element_spec` is derived without running the pipeline where possible: sources know it,
most transformations compute it, and `map` / `flat_map` / `interleave` trace their function
once (twice with unknown dimensions) on "meta" tensors that have shapes but no data. A
function that cannot run on meta tensors (it reads values, or takes strings) is instead
called on the first input element, and the result's dimensions are reported as unknown.
"""

from __future__ import annotations

import collections
import itertools
import os
import queue
import threading
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait

import numpy as np
import torch

from keratron import config
from keratron import random as krandom
from keratron.autodiff import tree
from keratron.autodiff.dtypes import to_torch_dtype
from keratron.autodiff.tensor import Tensor
from keratron.data import structure
from keratron.data.structure import TensorSpec

__all__ = [
    "AUTOTUNE",
    "INFINITE_CARDINALITY",
    "UNKNOWN_CARDINALITY",
    "Dataset",
    "Iterator",
]

AUTOTUNE = -1
INFINITE_CARDINALITY = -1
UNKNOWN_CARDINALITY = -2
_INF, _UNKNOWN = INFINITE_CARDINALITY, UNKNOWN_CARDINALITY
# Unknown dimensions are given these sizes when a function is traced on meta tensors; a
# dimension of the result that differs between the two traces depends on them.
_TRACE_SIZES = (24, 120)


class Dataset:
    """A sequence of elements, built from data and transformed lazily, as `tf.data.Dataset`.

    Build one with a source (`from_tensor_slices`, `from_tensors`, `from_generator`,
    `range`, `zip`, `keratron.data.TextLineDataset`) and chain transformations (`map`,
    `shuffle`, `batch`, `prefetch`, ...); each returns a new Dataset. Iterating gives
    elements of keratron Tensors; `as_numpy_iterator()` gives numpy arrays. `Model.fit`,
    `evaluate` and `predict` accept a dataset of batches.

    Example:
        >>> ds = keratron.data.Dataset.from_tensor_slices(([1, 2, 3], [4, 5, 6]))
        >>> ds = ds.map(lambda a, b: a + b).batch(2)
        >>> [b.tolist() for b in ds.as_numpy_iterator()]
        [[5, 7], [9]]
    """

    def __init__(self, make_iterator, element_spec, cardinality, kind: str = "Dataset"):
        # `element_spec` and `cardinality` may be callables, evaluated on first use.
        self._make_iterator = make_iterator
        self._spec = element_spec
        self._card = cardinality
        self._kind = kind
        self._spec_lock = threading.RLock()

    # ---------------------------------------------------------------------- inspection
    @property
    def element_spec(self):
        """The structure of `TensorSpec`s describing one element (None: unknown dim)."""
        with self._spec_lock:
            if callable(self._spec):
                self._spec = self._spec()
            return self._spec

    def _cardinality(self) -> int:
        if callable(self._card):
            self._card = int(self._card())
        return self._card

    def cardinality(self) -> Tensor:
        """The number of elements as an int64 scalar Tensor, or `INFINITE_CARDINALITY`
        (-1) / `UNKNOWN_CARDINALITY` (-2) when infinite or not known without iterating.

        Example:
            >>> int(keratron.data.Dataset.range(10).batch(3).cardinality())
            4
        """
        return Tensor(torch.tensor(self._cardinality(), dtype=torch.int64))

    def __len__(self) -> int:
        n = self._cardinality()
        if n == _INF:
            raise TypeError("The dataset is infinite.")
        if n == _UNKNOWN:
            raise TypeError("The dataset length is unknown.")
        return n

    def __bool__(self) -> bool:
        # Defined so that truth tests do not fall back on `__len__`, which may raise.
        return True

    def __iter__(self) -> Iterator:
        return Iterator(self)

    def as_numpy_iterator(self):
        """Iterates over the elements as numpy arrays (numpy scalars for rank 0, `bytes`
        for strings), in the dataset's structure.

        Example:
            >>> [x.item() for x in keratron.data.Dataset.range(3).as_numpy_iterator()]
            [0, 1, 2]
        """
        for element in self:
            yield tree.map_structure(structure.leaf_to_numpy, element)

    def __repr__(self):
        return f"<{self._kind} element_spec={self.element_spec}>"

    # -------------------------------------------------------------------------- sources
    @staticmethod
    def from_tensor_slices(tensors, name=None) -> Dataset:
        """A dataset whose elements are the slices of `tensors` along their first dimension.

        Args:
            tensors: an array, or a tuple / dict (nested) of arrays that all have the same
                size in their first dimension. A Python list is one array.
            name: accepted for compatibility.

        Example:
            >>> ds = keratron.data.Dataset.from_tensor_slices({"a": [1, 2], "b": [3, 4]})
            >>> {k: v.item() for k, v in next(ds.as_numpy_iterator()).items()}
            {'a': 1, 'b': 3}
        """
        del name
        element = structure.normalize(tensors, lists_are_leaves=True)
        flat = tree.flatten(element)
        sizes = []
        for i, leaf in enumerate(flat):
            if not structure.leaf_shape(leaf):
                raise ValueError(
                    "Dataset.from_tensor_slices: every component must have at least one "
                    f"dimension to slice; component {i} is a scalar: {leaf!r}"
                )
            sizes.append(structure.leaf_shape(leaf)[0])
        if len(set(sizes)) > 1:
            raise ValueError(
                "Dataset.from_tensor_slices: all components must have the same size in their "
                f"first dimension. Received sizes {sizes}."
            )
        n = sizes[0]

        def make():
            for i in range(n):
                yield tree.pack_sequence_as(element, [structure.slice_leaf(v, i) for v in flat])

        spec = tree.map_structure(
            lambda v: TensorSpec(structure.leaf_shape(v)[1:], structure.leaf_dtype(v)), element
        )
        ds = Dataset(make, spec, n, "TensorSliceDataset")
        ds._slices = (element, flat, n)  # lets `batch` cut whole batches at once
        return ds

    @staticmethod
    def from_tensors(tensors, name=None) -> Dataset:
        """A dataset of one element: `tensors` itself.

        Example:
            >>> ds = keratron.data.Dataset.from_tensors([1, 2, 3])
            >>> ds.element_spec.shape
            (3,)
        """
        del name
        element = structure.normalize(tensors, lists_are_leaves=True)
        return Dataset(lambda: iter([element]), structure.spec_of(element), 1, "TensorDataset")

    @staticmethod
    def from_generator(
        generator,
        output_types=None,
        output_shapes=None,
        args=None,
        output_signature=None,
        name=None,
    ) -> Dataset:
        """A dataset of the elements yielded by `generator(*args)`, called on each pass.

        Each yielded element must match `output_signature` (a structure of `TensorSpec`):
        its values are converted to the declared dtypes as numpy converts, and their shapes
        must fit the declared ones. `output_types` (and optionally `output_shapes`) is the
        older way to declare the same.

        Args:
            generator: a callable returning an iterable.
            output_types: a structure of dtypes (without `output_signature`).
            output_shapes: a structure of shapes matching `output_types`.
            args: a tuple of values passed to `generator` as numpy values.
            output_signature: a structure of `TensorSpec`.
            name: accepted for compatibility.

        Example:
            >>> def gen():
            ...     for i in range(3):
            ...         yield i, [i] * i
            >>> spec = (keratron.data.TensorSpec((), "int32"),
            ...         keratron.data.TensorSpec((None,), "int32"))
            >>> ds = keratron.data.Dataset.from_generator(gen, output_signature=spec)
        """
        del name
        if not callable(generator):
            raise TypeError(
                "Dataset.from_generator: `generator` must be a Python callable. Received: "
                f"generator={generator!r}"
            )
        signature = _signature(output_types, output_shapes, output_signature)
        flat_specs = tree.flatten(signature)
        call_args = tuple(
            structure.leaf_to_numpy(structure.to_leaf(a)) for a in (args if args else ())
        )

        def conform(value):
            try:
                flat = structure.flatten_up_to(signature, value, "element")
            except ValueError:
                raise TypeError(
                    "`generator` yielded an element that did not match the expected "
                    f"structure. The expected structure was {signature}, but the yielded "
                    f"element was {value!r}."
                ) from None
            leaves = []
            for spec, v in zip(flat_specs, flat):
                try:
                    leaf = structure.to_leaf(v, dtype=spec.dtype)
                except (TypeError, ValueError, OverflowError):
                    raise TypeError(
                        "`generator` yielded an element that could not be converted to the "
                        f"expected type. The expected type was {spec.dtype}, but the yielded "
                        f"element was {v!r}."
                    ) from None
                if not structure.shapes_compatible(spec.shape, structure.leaf_shape(leaf)):
                    raise ValueError(
                        f"`generator` yielded an element of shape {structure.leaf_shape(leaf)} "
                        f"where an element of shape {spec.shape} was expected."
                    )
                leaves.append(leaf)
            return tree.pack_sequence_as(signature, leaves)

        def make():
            for value in generator(*call_args):
                yield conform(value)

        return Dataset(make, signature, _UNKNOWN, "GeneratorDataset")

    @staticmethod
    def range(*args, output_type="int64", name=None) -> Dataset:
        """A dataset of evenly spaced integers, with Python's `range(start, stop, step)`
        arguments.

        Example:
            >>> [int(x) for x in keratron.data.Dataset.range(1, 8, 3)]
            [1, 4, 7]
        """
        del name
        if not 1 <= len(args) <= 3:
            raise ValueError(
                "Dataset.range: expected 1 to 3 arguments (start, stop, step). Received "
                f"{len(args)} arguments: {args}"
            )
        names = {1: ("stop",), 2: ("start", "stop"), 3: ("start", "stop", "step")}[len(args)]
        r = range(*(_int(a, "range", n) for a, n in zip(args, names)))
        dtype = structure.standardize_spec_dtype(output_type)
        tdtype = to_torch_dtype(dtype)

        def make():
            for i in r:
                yield Tensor(torch.tensor(i, dtype=tdtype))

        return Dataset(make, TensorSpec((), dtype), len(r), "RangeDataset")

    @staticmethod
    def zip(*args, datasets=None, name=None) -> Dataset:
        """A dataset of elements combined from several datasets, stopping at the shortest.

        Takes the datasets as arguments, or one (nested) tuple / dict of datasets; the
        elements have that structure.

        Example:
            >>> a = keratron.data.Dataset.range(3)
            >>> b = keratron.data.Dataset.range(10, 12)
            >>> [(int(x), int(y)) for x, y in keratron.data.Dataset.zip(a, b)]
            [(0, 10), (1, 11)]
        """
        del name
        if datasets is not None:
            if args:
                raise TypeError(
                    "Dataset.zip: pass the datasets either as `*args` or as `datasets`."
                )
            nested = datasets
        elif len(args) == 1 and not isinstance(args[0], Dataset):
            nested = args[0]
        else:
            nested = tuple(args)
        if isinstance(nested, list):
            nested = tuple(nested)
        members = tree.flatten(nested)
        if not members or not all(isinstance(d, Dataset) for d in members):
            raise TypeError(
                "Dataset.zip: expected datasets, or a (nested) tuple / dict of datasets. "
                f"Received: {nested!r}"
            )

        def make():
            iterators = [d._make_iterator() for d in members]
            while True:
                try:
                    values = [next(it) for it in iterators]
                except StopIteration:
                    return
                yield tree.pack_sequence_as(nested, values)

        def card():
            result = _INF
            for d in members:
                n = d._cardinality()
                if n == _UNKNOWN:
                    return _UNKNOWN
                if n != _INF and (result == _INF or n < result):
                    result = n
            return result

        def spec():
            return tree.pack_sequence_as(nested, [d.element_spec for d in members])

        return Dataset(make, spec, card, "ZipDataset")

    # ---------------------------------------------------------------- transformations
    def concatenate(self, dataset, name=None) -> Dataset:
        """This dataset's elements followed by those of `dataset` (same structure / dtypes).

        Example:
            >>> a = keratron.data.Dataset.range(2).concatenate(keratron.data.Dataset.range(5, 7))
            >>> [int(x) for x in a]
            [0, 1, 5, 6]
        """
        del name
        if not isinstance(dataset, Dataset):
            raise TypeError(
                f"Dataset.concatenate: expected a Dataset. Received: {type(dataset).__name__}"
            )
        spec = _concatenate_spec(self.element_spec, dataset.element_spec)

        def make():
            yield from self._make_iterator()
            yield from dataset._make_iterator()

        def card():
            a, b = self._cardinality(), dataset._cardinality()
            if _INF in (a, b):
                return _INF
            return _UNKNOWN if _UNKNOWN in (a, b) else a + b

        return Dataset(make, spec, card, "ConcatenateDataset")

    def map(self, map_func, num_parallel_calls=None, deterministic=None, name=None) -> Dataset:
        """Applies `map_func` to each element.

        A tuple element is passed as separate arguments (`lambda x, y: ...`), any other
        element as one argument. A returned list becomes a tuple of components. With
        `num_parallel_calls` (an int or `AUTOTUNE`), that many elements are mapped at once
        on a thread pool; the output order is the input order unless
        `deterministic=False`, which lets finished elements overtake slower ones.

        Example:
            >>> ds = keratron.data.Dataset.from_tensor_slices(([1, 2], [10, 20]))
            >>> [int(v) for v in ds.map(lambda x, y: x * y)]
            [10, 40]
        """
        del name
        _check_callable(map_func, "map", "map_func")
        workers = _parallelism(num_parallel_calls, "map")

        def apply(element):
            return structure.normalize(_call(map_func, element), lists_are_leaves=False)

        def make():
            if workers <= 1:
                return (apply(e) for e in self._make_iterator())
            return _parallel_map(self._make_iterator, apply, workers, deterministic is not False)

        def spec():
            return _trace_spec(map_func, self, "map")

        return Dataset(make, spec, self._cardinality, "MapDataset")

    def filter(self, predicate, name=None) -> Dataset:
        """Keeps the elements for which `predicate` returns True (a scalar boolean).

        Example:
            >>> ds = keratron.data.Dataset.range(6).filter(lambda x: x % 2 == 0)
            >>> [int(x) for x in ds]
            [0, 2, 4]
        """
        del name
        _check_callable(predicate, "filter", "predicate")

        def keep(element) -> bool:
            result = _call(predicate, element)
            if isinstance(result, Tensor):
                if result.dtype == "bool" and result.ndim == 0:
                    return bool(result)
            elif isinstance(result, (bool, np.bool_)) or (
                isinstance(result, np.ndarray) and result.shape == () and result.dtype == bool
            ):
                return bool(result)
            raise TypeError(
                "Dataset.filter: `predicate` must return a scalar boolean tensor. Received: "
                f"{result!r}"
            )

        def make():
            return (e for e in self._make_iterator() if keep(e))

        return Dataset(make, lambda: self.element_spec, _UNKNOWN, "FilterDataset")

    def flat_map(self, map_func, name=None) -> Dataset:
        """Maps each element to a Dataset (`map_func`) and chains their elements.

        Example:
            >>> ds = keratron.data.Dataset.from_tensor_slices([[1, 2], [3, 4]])
            >>> [int(x) for x in ds.flat_map(keratron.data.Dataset.from_tensor_slices)]
            [1, 2, 3, 4]
        """
        del name
        _check_callable(map_func, "flat_map", "map_func")

        def make():
            for element in self._make_iterator():
                yield from _call_dataset_fn(map_func, element, "flat_map")._make_iterator()

        return Dataset(
            make,
            lambda: _trace_dataset_spec(map_func, self, "flat_map"),
            _UNKNOWN,
            "FlatMapDataset",
        )

    def interleave(
        self,
        map_func,
        cycle_length=None,
        block_length=None,
        num_parallel_calls=None,
        deterministic=None,
        name=None,
    ) -> Dataset:
        """Maps each element to a Dataset and interleaves their elements.

        `cycle_length` datasets are open at a time (default: the number of CPU cores); the
        output takes `block_length` (default 1) consecutive elements from each in turn, and
        a finished dataset's place goes to the next input element. The order is the one
        tf.data's deterministic interleave gives; `num_parallel_calls` and `deterministic`
        are accepted for compatibility (the inner datasets are read in turn on the calling
        thread, so the order never depends on timing).

        Example:
            >>> ds = keratron.data.Dataset.range(1, 3).interleave(
            ...     lambda x: keratron.data.Dataset.from_tensors(x).repeat(3), cycle_length=2)
            >>> [int(x) for x in ds]
            [1, 2, 1, 2, 1, 2]
        """
        del num_parallel_calls, deterministic, name
        _check_callable(map_func, "interleave", "map_func")
        cycle = _positive_or_autotune(
            cycle_length, "interleave", "cycle_length", os.cpu_count() or 1
        )
        block = _positive_or_autotune(block_length, "interleave", "block_length", 1)

        def make():
            inputs = self._make_iterator()
            slots = [None] * cycle
            index = taken = n_open = 0
            inputs_done = False
            while not inputs_done or n_open:
                if slots[index] is not None:
                    try:
                        value = next(slots[index])
                    except StopIteration:
                        slots[index], taken, n_open = None, 0, n_open - 1
                        index = (index + 1) % cycle
                        continue
                    taken += 1
                    if taken == block:
                        taken, index = 0, (index + 1) % cycle
                    yield value
                elif not inputs_done:
                    try:
                        element = next(inputs)
                    except StopIteration:
                        inputs_done = True
                        continue
                    inner = _call_dataset_fn(map_func, element, "interleave")
                    slots[index], n_open = inner._make_iterator(), n_open + 1
                else:
                    taken, index = 0, (index + 1) % cycle

        def spec():
            return _trace_dataset_spec(map_func, self, "interleave")

        return Dataset(make, spec, _UNKNOWN, "InterleaveDataset")

    def batch(
        self,
        batch_size,
        drop_remainder=False,
        num_parallel_calls=None,
        deterministic=None,
        name=None,
    ) -> Dataset:
        """Combines consecutive elements into batches (a new first dimension).

        The last batch is smaller unless `drop_remainder=True` drops it. Components must
        have the same shape in every element of a batch (see `padded_batch`).
        `num_parallel_calls` and `deterministic` are accepted for compatibility.

        Example:
            >>> ds = keratron.data.Dataset.range(5).batch(2)
            >>> [b.tolist() for b in ds.as_numpy_iterator()]
            [[0, 1], [2, 3], [4]]
        """
        del num_parallel_calls, deterministic, name
        size = _positive_int(batch_size, "batch", "batch_size")
        drop = bool(drop_remainder)
        slices = getattr(self, "_slices", None)

        def combine(chunk):
            return _combine(chunk, lambda leaves, i: structure.stack(leaves, i, "Dataset.batch"))

        def make():
            if slices is not None:
                # Slicing the source in whole batches gives the same batches without
                # splitting into elements and stacking them again.
                element, flat, n = slices
                stop = n - n % size if drop else n
                return (
                    tree.pack_sequence_as(
                        element, [structure.slice_leaf(v, slice(lo, lo + size)) for v in flat]
                    )
                    for lo in range(0, stop, size)
                )
            return _chunks(self._make_iterator(), size, drop, combine)

        def spec():
            dim = size if drop else None
            return tree.map_structure(
                lambda s: TensorSpec(None if s.shape is None else (dim, *s.shape), s.dtype),
                self.element_spec,
            )

        return Dataset(make, spec, lambda: _batched_cardinality(self, size, drop), "BatchDataset")

    def padded_batch(
        self, batch_size, padded_shapes=None, padding_values=None, drop_remainder=False, name=None
    ) -> Dataset:
        """Like `batch`, but pads each component to a common shape first.

        Args:
            batch_size: elements per batch.
            padded_shapes: a shape per component (the element's structure); a None or -1
                dimension pads to the largest size in the batch. None pads every dimension
                to the batch's largest.
            padding_values: a scalar per component (or one scalar for all); defaults to 0
                for numbers and b"" for strings.
            drop_remainder: drop a last, smaller batch.
            name: accepted for compatibility.

        Example:
            >>> ds = keratron.data.Dataset.range(1, 4).map(lambda x: keratron.ops.ones((x,)))
            >>> [b.tolist() for b in ds.padded_batch(2).as_numpy_iterator()]
            [[[1.0, 0.0], [1.0, 1.0]], [[1.0, 1.0, 1.0]]]
        """
        del name
        size = _positive_int(batch_size, "padded_batch", "batch_size")
        drop = bool(drop_remainder)

        def plan(like):
            # Per component: the padded shape and padding value, from the element structure.
            n = len(tree.flatten(like))
            if padded_shapes is None:
                shapes = [None] * n
            else:
                shapes = structure.flatten_up_to(like, padded_shapes, "`padded_shapes`")
                shapes = [None if s is None else TensorSpec(s).shape for s in shapes]
            if padding_values is None or not tree.is_nested(padding_values):
                values = [padding_values] * n
            else:
                values = structure.flatten_up_to(like, padding_values, "`padding_values`")
            return shapes, values

        def make():
            planned = []

            def combine(chunk):
                if not planned:
                    planned.append(plan(chunk[0]))
                shapes, values = planned[0]
                return _combine(
                    chunk,
                    lambda leaves, i: structure.pad_stack(
                        leaves, shapes[i], values[i], i, "Dataset.padded_batch"
                    ),
                )

            return _chunks(self._make_iterator(), size, drop, combine)

        def spec():
            spec_in = self.element_spec
            shapes, _ = plan(spec_in)
            out = []
            for i, (s, sp) in enumerate(zip(shapes, tree.flatten(spec_in))):
                if s is not None and not structure.shapes_compatible(s, sp.shape):
                    raise ValueError(
                        f"Dataset.padded_batch: the padded shape {s} is not compatible with the "
                        f"shape {sp.shape} of component {i} of the input."
                    )
                inner = s if s is not None else sp.shape
                batch_dim = size if drop else None
                out.append(TensorSpec(None if inner is None else (batch_dim, *inner), sp.dtype))
            return tree.pack_sequence_as(spec_in, out)

        return Dataset(
            make, spec, lambda: _batched_cardinality(self, size, drop), "PaddedBatchDataset"
        )

    def unbatch(self, name=None) -> Dataset:
        """Splits each element along its first dimension: the inverse of `batch`.

        Example:
            >>> ds = keratron.data.Dataset.range(5).batch(2).unbatch()
            >>> [int(x) for x in ds]
            [0, 1, 2, 3, 4]
        """
        del name

        def make():
            for element in self._make_iterator():
                flat = tree.flatten(element)
                if any(not structure.leaf_shape(v) for v in flat):
                    raise ValueError(_SCALAR_UNBATCH)
                sizes = [structure.leaf_shape(v)[0] for v in flat]
                if len(set(sizes)) != 1:
                    raise ValueError(
                        "Dataset.unbatch: the components of an element must share their first "
                        f"dimension. Received first dimensions {sizes}."
                    )
                for i in range(sizes[0]):
                    yield tree.pack_sequence_as(element, [structure.slice_leaf(v, i) for v in flat])

        def spec():
            specs = self.element_spec
            if any(s.shape == () for s in tree.flatten(specs)):
                raise ValueError(_SCALAR_UNBATCH)
            return tree.map_structure(
                lambda s: TensorSpec(None if s.shape is None else s.shape[1:], s.dtype), specs
            )

        return Dataset(make, spec, _UNKNOWN, "UnbatchDataset")

    def shuffle(self, buffer_size, seed=None, reshuffle_each_iteration=True, name=None) -> Dataset:
        """Randomly shuffles the elements through a buffer of `buffer_size` elements.

        Each output element is drawn uniformly from the buffer, whose place is then taken
        by the next input element: a buffer at least as large as the dataset gives a
        uniform permutation, a buffer of 1 keeps the order. With
        `reshuffle_each_iteration`, every pass (every epoch) draws a new order; otherwise
        every pass repeats the first one. A `seed` makes the whole sequence of orders
        reproducible; without one, the seed comes from keratron's global random generator
        (`keratron.utils.set_random_seed`). tf.data's exact order is not reproduced.

        Example:
            >>> ds = keratron.data.Dataset.range(5).shuffle(5, seed=1)
            >>> sorted(int(x) for x in ds)
            [0, 1, 2, 3, 4]
        """
        del name
        size = _positive_int(buffer_size, "shuffle", "buffer_size")
        base = _check_seed(seed) if seed is not None else _draw_seed()
        passes = itertools.count()
        reshuffle = True if reshuffle_each_iteration is None else bool(reshuffle_each_iteration)

        def make():
            epoch = next(passes) if reshuffle else 0
            rng = np.random.default_rng([base, epoch])
            return _shuffled(self._make_iterator(), size, rng)

        return Dataset(make, lambda: self.element_spec, self._cardinality, "ShuffleDataset")

    def repeat(self, count=None, name=None) -> Dataset:
        """Repeats the dataset `count` times (None or -1: forever), a new pass each time.

        Example:
            >>> [int(x) for x in keratron.data.Dataset.range(2).repeat(2)]
            [0, 1, 0, 1]
        """
        del name
        count = -1 if count is None else _int(count, "repeat", "count")

        def make():
            done = 0
            while count < 0 or done < count:
                produced = False
                for element in self._make_iterator():
                    produced = True
                    yield element
                done += 1
                if not produced:  # repeating an empty dataset forever gives nothing
                    return

        def card():
            n = self._cardinality()
            if count == 0 or n == 0:
                return 0
            if count < 0 or n == _INF:
                return _INF
            return _UNKNOWN if n == _UNKNOWN else n * count

        return Dataset(make, lambda: self.element_spec, card, "RepeatDataset")

    def take(self, count, name=None) -> Dataset:
        """The first `count` elements (-1: all).

        Example:
            >>> [int(x) for x in keratron.data.Dataset.range(10).take(3)]
            [0, 1, 2]
        """
        del name
        count = _int(count, "take", "count")

        def make():
            it = self._make_iterator()
            return it if count < 0 else itertools.islice(it, count)

        def card():
            n = self._cardinality()
            if n == _UNKNOWN or count < 0:
                return n
            return count if n == _INF else min(n, count)

        return Dataset(make, lambda: self.element_spec, card, "TakeDataset")

    def skip(self, count, name=None) -> Dataset:
        """All but the first `count` elements (-1: skips them all).

        Example:
            >>> [int(x) for x in keratron.data.Dataset.range(5).skip(3)]
            [3, 4]
        """
        del name
        count = _int(count, "skip", "count")

        def make():
            it = self._make_iterator()
            if count < 0:
                collections.deque(it, maxlen=0)
                return iter(())
            return itertools.islice(it, count, None)

        def card():
            n = self._cardinality()
            if n < 0:
                return n
            return 0 if count < 0 else max(n - count, 0)

        return Dataset(make, lambda: self.element_spec, card, "SkipDataset")

    def cache(self, filename="", name=None) -> Dataset:
        """Keeps the elements of the first complete pass, and replays them afterwards.

        With `filename=""` the elements are kept in memory. With a file name they are
        written there (as a numpy `.npz` archive) when the first pass completes, and
        later passes (in this or another process) read the file. A pass stopped early
        caches nothing.

        Example:
            >>> ds = keratron.data.Dataset.range(3).map(lambda x: x * 2).cache()
            >>> [int(x) for x in ds]  # computed, then kept
            [0, 2, 4]
            >>> [int(x) for x in ds]  # read from the cache
            [0, 2, 4]
        """
        del name
        from keratron.data import _cache

        if not isinstance(filename, (str, os.PathLike)):
            raise TypeError(f"Dataset.cache: `filename` must be a string. Received: {filename!r}")
        return _cache.cache(self, os.fspath(filename))

    def prefetch(self, buffer_size, name=None) -> Dataset:
        """Produces elements ahead of use on a background thread, up to `buffer_size` of
        them (`AUTOTUNE`: 2); 0 passes elements straight through.

        An exception raised while producing an element is raised where that element is
        requested. The thread stops once its pass is finished or no longer referenced.

        Example:
            >>> ds = keratron.data.Dataset.range(100).batch(10).prefetch(keratron.data.AUTOTUNE)
        """
        del name
        size = _int(buffer_size, "prefetch", "buffer_size")
        if size == AUTOTUNE:
            size = 2
        elif size < 0:
            raise ValueError(
                f"Dataset.prefetch: `buffer_size` must be >= 0 or AUTOTUNE. Received: {buffer_size}"
            )

        def make():
            if size == 0:
                return self._make_iterator()
            return _prefetched(self._make_iterator, size)

        return Dataset(make, lambda: self.element_spec, self._cardinality, "PrefetchDataset")

    def enumerate(self, start=0, name=None) -> Dataset:
        """Pairs each element with its int64 index: `(index, element)`.

        Example:
            >>> [(int(i), int(x)) for i, x in keratron.data.Dataset.range(5, 7).enumerate()]
            [(0, 5), (1, 6)]
        """
        del name
        start = _int(start, "enumerate", "start")

        def make():
            for i, element in enumerate(self._make_iterator(), start):
                yield (Tensor(torch.tensor(i, dtype=torch.int64)), element)

        return Dataset(
            make,
            lambda: (TensorSpec((), "int64"), self.element_spec),
            self._cardinality,
            "EnumerateDataset",
        )

    def apply(self, transformation_func) -> Dataset:
        """Returns `transformation_func(self)`, which must be a Dataset.

        Example:
            >>> ds = keratron.data.Dataset.range(4).apply(lambda d: d.take(2))
        """
        result = transformation_func(self)
        if not isinstance(result, Dataset):
            raise TypeError(
                "Dataset.apply: `transformation_func` must return a Dataset. Received: "
                f"{type(result).__name__}"
            )
        return result


class Iterator:
    """One pass over a Dataset: `next()` gives the next element, StopIteration at the end.

    Example:
        >>> it = iter(keratron.data.Dataset.range(2))
        >>> int(next(it)), int(it.get_next())
        (0, 1)
    """

    def __init__(self, dataset: Dataset):
        self._dataset = dataset
        self._it = dataset._make_iterator()
        self._position = 0  # elements given out so far (what a checkpoint saves)

    @property
    def element_spec(self):
        return self._dataset.element_spec

    def __iter__(self):
        return self

    def __next__(self):
        element = next(self._it)
        self._position += 1
        return element

    def get_next(self):
        return self.__next__()

    def _seek(self, position: int) -> None:
        """Restarts the pass and skips `position` elements: how a checkpointed iterator is
        restored (the same elements follow when the pipeline's randomness is seeded)."""
        self._it = self._dataset._make_iterator()
        self._position = 0
        for _ in range(position):
            self.__next__()


# ------------------------------------------------------------------------------- helpers
def _check_callable(fn, op, arg):
    if not callable(fn):
        raise TypeError(f"Dataset.{op}: `{arg}` must be callable. Received: {arg}={fn!r}")


def _int(value, op, arg) -> int:
    if isinstance(value, Tensor) and value.ndim == 0:
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"Dataset.{op}: `{arg}` must be an integer. Received: {arg}={value!r}")
    return int(value)


def _positive_int(value, op, arg) -> int:
    value = _int(value, op, arg)
    if value <= 0:
        raise ValueError(f"Dataset.{op}: `{arg}` must be positive. Received: {arg}={value}")
    return value


def _positive_or_autotune(value, op, arg, default) -> int:
    if value is None or (not isinstance(value, bool) and value == AUTOTUNE):
        return default
    return _positive_int(value, op, arg)


def _parallelism(num_parallel_calls, op) -> int:
    if num_parallel_calls is None:
        return 1
    return _positive_or_autotune(num_parallel_calls, op, "num_parallel_calls", os.cpu_count() or 1)


def _check_seed(seed) -> int:
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise TypeError(f"Dataset.shuffle: `seed` must be an integer. Received: seed={seed!r}")
    return int(seed) & ((1 << 63) - 1)


def _draw_seed() -> int:
    # One draw from keratron's global SeedGenerator: `set_random_seed` fixes it.
    with config.device("cpu"):
        return int(krandom.randint((), 0, 2**31 - 1, dtype="int32"))


def _call(fn, element):
    """Calls a user function on an element as tf.data does: a plain tuple is unpacked into
    arguments (a namedtuple or dict is one argument). It runs with CPU as default device."""
    with config.device("cpu"):
        return fn(*element) if type(element) is tuple else fn(element)


def _call_dataset_fn(fn, element, op) -> Dataset:
    result = _call(fn, element)
    if not isinstance(result, Dataset):
        raise TypeError(
            f"Dataset.{op}: `map_func` must return a Dataset. Received: {type(result).__name__}"
        )
    return result


def _combine(chunk, stack_component):
    first = chunk[0]
    flats = [tree.flatten(e) for e in chunk]
    if any(len(f) != len(flats[0]) for f in flats):
        raise ValueError(f"Cannot batch elements of different structures. First element: {first!r}")
    return tree.pack_sequence_as(
        first, [stack_component([f[i] for f in flats], i) for i in range(len(flats[0]))]
    )


def _chunks(it, size, drop, combine):
    while True:
        chunk = list(itertools.islice(it, size))
        if not chunk or (drop and len(chunk) < size):
            return
        yield combine(chunk)


def _batched_cardinality(ds, size, drop) -> int:
    n = ds._cardinality()
    if n < 0:
        return n
    return n // size if drop else -(-n // size)


def _shuffled(it, size, rng):
    buffer = list(itertools.islice(it, size))
    while buffer:
        i = int(rng.integers(len(buffer)))
        out = buffer[i]
        try:
            buffer[i] = next(it)
        except StopIteration:
            buffer[i] = buffer[-1]
            buffer.pop()
        yield out


def _parallel_map(make_input, fn, workers, ordered):
    pool = ThreadPoolExecutor(workers, thread_name_prefix="keratron-data-map")
    pending = collections.deque()
    try:
        inputs = make_input()
        exhausted = False
        while True:
            while not exhausted and len(pending) < workers:
                try:
                    pending.append(pool.submit(fn, next(inputs)))
                except StopIteration:
                    exhausted = True
            if not pending:
                return
            if ordered:
                future = pending.popleft()
            else:
                done, _ = wait(pending, return_when=FIRST_COMPLETED)
                future = next(f for f in pending if f in done)
                pending.remove(future)
            yield future.result()
    finally:
        pool.shutdown(wait=False, cancel_futures=True)


_ITEM, _END, _ERROR = range(3)
_SCALAR_UNBATCH = "Dataset.unbatch: cannot unbatch an input with scalar components."


def _prefetched(make_input, size):
    """Runs `make_input()`'s iterator on a daemon thread, `size` elements ahead."""
    buffer = queue.Queue(maxsize=size)
    stop = threading.Event()

    def put(message) -> bool:
        while not stop.is_set():
            try:
                buffer.put(message, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def produce():
        it = make_input()
        try:
            for element in it:
                if not put((_ITEM, element)):
                    return
            put((_END, None))
        except BaseException as e:  # noqa: BLE001 - handed to the consumer, which re-raises
            put((_ERROR, e))
        finally:
            close = getattr(it, "close", None)
            if close is not None:
                close()

    thread = threading.Thread(target=produce, name="keratron-data-prefetch", daemon=True)
    thread.start()
    try:
        while True:
            kind, payload = buffer.get()
            if kind == _ITEM:
                yield payload
            elif kind == _END:
                return
            else:
                raise payload
    finally:
        # Also reached when the consumer drops this generator: the producer sees the flag
        # at its next hand-over and exits.
        stop.set()


def _signature(output_types, output_shapes, output_signature):
    def tuples(s):
        if isinstance(s, dict):
            return {k: tuples(v) for k, v in s.items()}
        if isinstance(s, (list, tuple)) and not hasattr(s, "_fields"):
            return tuple(tuples(v) for v in s)
        return s

    if output_signature is not None:
        if output_types is not None or output_shapes is not None:
            raise TypeError(
                "Dataset.from_generator: `output_types` and `output_shapes` cannot be used "
                "together with `output_signature`."
            )
        signature = tuples(output_signature)
        bad = [s for s in tree.flatten(signature) if not isinstance(s, TensorSpec)]
        if bad:
            raise TypeError(
                "Dataset.from_generator: `output_signature` must be a structure of "
                f"keratron.data.TensorSpec. Received: {output_signature!r}"
            )
        return signature
    if output_types is None:
        raise TypeError(
            "Dataset.from_generator: either `output_signature` or `output_types` must be given."
        )
    types = tuples(output_types)
    flat_types = tree.flatten(types)
    if output_shapes is None:
        flat_shapes = [None] * len(flat_types)
    else:
        flat_shapes = structure.flatten_up_to(types, output_shapes, "`output_shapes`")
    return tree.pack_sequence_as(types, [TensorSpec(s, t) for t, s in zip(flat_types, flat_shapes)])


def _concatenate_spec(a, b):
    flat_a, flat_b = tree.flatten(a), tree.flatten(b)
    same_structure = True
    try:
        tree.pack_sequence_as(a, flat_b)
        tree.pack_sequence_as(b, flat_a)
    except (ValueError, IndexError, KeyError, TypeError):
        same_structure = False
    if not same_structure or any(x.dtype != y.dtype for x, y in zip(flat_a, flat_b)):
        raise TypeError(f"Dataset.concatenate: incompatible dataset elements:\n  {a} vs.\n  {b}")
    return tree.pack_sequence_as(
        a,
        [
            TensorSpec(structure.most_specific_shape(x.shape, y.shape), x.dtype)
            for x, y in zip(flat_a, flat_b)
        ],
    )


def _has_unknown_dims(spec) -> bool:
    return any(s.shape is None or None in s.shape for s in tree.flatten(spec))


def _first_element(ds: Dataset, op: str):
    for element in ds._make_iterator():
        return element
    raise ValueError(
        f"Dataset.{op}: cannot determine `element_spec`: the function could not be traced on "
        "shapes alone and the input dataset is empty."
    )


def _traced(fn, spec_in, result_spec):
    """`result_spec(fn(...))` on meta tensors shaped like `spec_in`: once, or twice (with
    different sizes for the unknown dimensions) to find which output dimensions are known."""
    specs = []
    for size in _TRACE_SIZES[: 2 if _has_unknown_dims(spec_in) else 1]:
        placeholders = structure.placeholder(spec_in, size)
        specs.append(result_spec(_call(fn, placeholders)))
    if len(specs) == 1:
        return specs[0]
    return tree.map_structure(
        lambda x, y: TensorSpec(structure.most_specific_shape(x.shape, y.shape), x.dtype), *specs
    )


def _map_result_spec(out):
    return structure.spec_of(structure.normalize(out, lists_are_leaves=False))


def _trace_spec(fn, ds: Dataset, op: str):
    """The element_spec of `ds.map(fn)`: traced on meta tensors, or (when `fn` needs data)
    from `fn` applied to the first element, with every dimension unknown."""
    try:
        return _traced(fn, ds.element_spec, _map_result_spec)
    except Exception:  # noqa: BLE001 - any failure of the shape-only trace means "run it"
        out = _map_result_spec(_call(fn, _first_element(ds, op)))
        return tree.map_structure(lambda s: TensorSpec((None,) * len(s.shape), s.dtype), out)


def _trace_dataset_spec(fn, ds: Dataset, op: str):
    """The element_spec of the datasets `fn` returns (for `flat_map` / `interleave`):
    traced, or else that of the dataset `fn` makes from the first input element."""

    def result_spec(result):
        if not isinstance(result, Dataset):
            raise TypeError(f"Dataset.{op}: `map_func` must return a Dataset.")
        return result.element_spec

    try:
        return _traced(fn, ds.element_spec, result_spec)
    except Exception:  # noqa: BLE001 - see _trace_spec
        return _call_dataset_fn(fn, _first_element(ds, op), op).element_spec
