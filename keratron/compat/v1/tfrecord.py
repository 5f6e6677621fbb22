"""TFRecord files and `tf.train.Example` parsing: `tf.io` / `tf.python_io` over keratron.

`TFRecordWriter` writes records with TensorFlow's framing (length, masked CRC32C of the
length, data, masked CRC32C of the data), plain or in one GZIP / ZLIB stream;
`tf_record_iterator` and `keratron.data.TFRecordDataset` read them back and check both
checksums of every record. `parse_single_example` / `parse_example` decode serialized
`tf.train.Example`s (keratron.compat.v1.example_proto) into eager keratron tensors for
`FixedLenFeature`s and `SparseTensor`s for `VarLenFeature`s; given a string tensor of a TF1
graph (from `TFRecordReader.read`), they add a host step to the graph instead, whose
outputs `Session.run` computes.

keratron has no string tensors: eagerly, records are Python `bytes`, and bytes features
come back as numpy object arrays of `bytes` (a `SparseTensor`'s `values` too).

Example:
    >>> import os, tempfile
    >>> import keratron.compat.v1 as tf
    >>> path = os.path.join(tempfile.mkdtemp(), "data.tfrecord")
    >>> with tf.io.TFRecordWriter(path) as w:
    ...     w.write(tf.train.Example(features=tf.train.Features(feature={
    ...         "x": tf.train.Feature(float_list=tf.train.FloatList(value=[1.0, 2.0]))
    ...     })).SerializeToString())
    >>> spec = {"x": tf.io.FixedLenFeature([2], tf.float32)}
    >>> ds = tf.data.TFRecordDataset(path).map(lambda r: tf.io.parse_single_example(r, spec))
    >>> list(ds.as_numpy_iterator())
    [{'x': array([1., 2.], dtype=float32)}]
"""

from __future__ import annotations

import collections
import os
import zlib

import numpy as np

from keratron import ops
from keratron.compat.v1 import errors
from keratron.compat.v1.example_proto import DecodeError, Example, SequenceExample
from keratron.compat.v1.framework import Tensor as _GraphTensor
from keratron.compat.v1.framework import as_dtype
from keratron.compat.v1.queues import ReaderBase, _host_decode
from keratron.data.tfrecord import CorruptRecordError, check_compression, frame_record, read_records

__all__ = [
    "DataLossError",
    "FixedLenFeature",
    "FixedLenSequenceFeature",
    "SparseTensor",
    "TFRecordCompressionType",
    "TFRecordOptions",
    "TFRecordReader",
    "TFRecordWriter",
    "VarLenFeature",
    "parse_example",
    "parse_single_example",
    "parse_single_sequence_example",
    "tf_record_iterator",
]


DataLossError = errors.DataLossError


# ------------------------------------------------------------------------------- options
class TFRecordCompressionType:
    """`tf.io.TFRecordCompressionType`: the compression of a TFRecord file, as TF's enum."""

    NONE = 0
    ZLIB = 1
    GZIP = 2


class TFRecordOptions:
    """`tf.io.TFRecordOptions`: how a TFRecord file is compressed.

    Args:
        compression_type: "GZIP", "ZLIB", "" / None, or a `TFRecordCompressionType`.
        flush_mode: accepted for compatibility.
        input_buffer_size: accepted for compatibility.
        output_buffer_size: accepted for compatibility.
        window_bits: zlib window size (8..15; default 15).
        compression_level: zlib level 0..9 (default: zlib's default, 6).
        compression_method: accepted for compatibility (deflate is the only one).
        mem_level: zlib memory level 1..9 (default 9, as TensorFlow).
        compression_strategy: zlib strategy (default 0).

    Raises:
        ValueError: for an unknown compression type.
    """

    compression_type_map = {
        TFRecordCompressionType.ZLIB: "ZLIB",
        TFRecordCompressionType.GZIP: "GZIP",
        TFRecordCompressionType.NONE: "",
    }

    def __init__(
        self,
        compression_type=None,
        flush_mode=None,
        input_buffer_size=None,
        output_buffer_size=None,
        window_bits=None,
        compression_level=None,
        compression_method=None,
        mem_level=None,
        compression_strategy=None,
    ):
        self.get_compression_type_string(compression_type)  # validates
        self.compression_type = compression_type
        self.flush_mode = flush_mode
        self.input_buffer_size = input_buffer_size
        self.output_buffer_size = output_buffer_size
        self.window_bits = window_bits
        self.compression_level = compression_level
        self.compression_method = compression_method
        self.mem_level = mem_level
        self.compression_strategy = compression_strategy

    @classmethod
    def get_compression_type_string(cls, options) -> str:
        """The compression of `options` (TFRecordOptions, enum, string or None) as a string:
        "", "ZLIB" or "GZIP"."""
        if not options:
            return ""
        if isinstance(options, TFRecordOptions):
            return cls.get_compression_type_string(options.compression_type)
        if isinstance(options, int) and options in cls.compression_type_map:
            return cls.compression_type_map[options]
        if options in ("", "ZLIB", "GZIP"):
            return options
        raise ValueError(f'Not a valid compression_type: "{options}"')


def _compression(options) -> str:
    if options is not None and not isinstance(options, (TFRecordOptions, str, int)):
        raise TypeError(
            "TFRecord: `options` must be a TFRecordOptions, a compression type string or "
            f"None. Received: options={options!r}"
        )
    return TFRecordOptions.get_compression_type_string(options)


# ------------------------------------------------------------------------------- writing
class TFRecordWriter:
    """`tf.io.TFRecordWriter`: writes records to a TFRecord file.

    Args:
        path: the file to write (created or truncated).
        options: a `TFRecordOptions`, "GZIP", "ZLIB", or None / "" for no compression.

    Raises:
        tf.errors.NotFoundError: if the file cannot be created.

    Example:
        >>> import os, tempfile
        >>> import keratron.compat.v1 as tf
        >>> path = os.path.join(tempfile.mkdtemp(), "out.tfrecord")
        >>> with tf.io.TFRecordWriter(path, "GZIP") as writer:
        ...     writer.write(b"record")
        >>> list(tf.io.tf_record_iterator(path, "GZIP"))
        [b'record']
    """

    def __init__(self, path, options=None):
        compression = _compression(options)
        opts = options if isinstance(options, TFRecordOptions) else TFRecordOptions()
        self._path = os.fspath(path)
        try:
            self._file = open(self._path, "wb")
        except OSError as e:
            raise errors.NotFoundError(None, None, f"{self._path}; {e.strerror}") from e
        self._deflate = None
        if compression:
            bits = opts.window_bits or zlib.MAX_WBITS
            self._deflate = zlib.compressobj(
                -1 if opts.compression_level is None else opts.compression_level,
                zlib.DEFLATED,
                bits + 16 if compression == "GZIP" else bits,
                9 if opts.mem_level is None else opts.mem_level,
                opts.compression_strategy or 0,
            )

    def _put(self, data: bytes):
        if self._file is None:
            raise errors.FailedPreconditionError(
                None, None, f"TFRecordWriter: {self._path!r} is closed."
            )
        self._file.write(self._deflate.compress(data) if self._deflate else data)

    def write(self, record):
        """Appends one record (bytes; a str is written as its UTF-8 bytes)."""
        if isinstance(record, str):
            record = record.encode("utf-8")
        if not isinstance(record, (bytes, bytearray, memoryview)):
            raise TypeError(
                f"TFRecordWriter.write: `record` must be bytes. Received: a {type(record).__name__}"
            )
        self._put(frame_record(bytes(record)))

    def flush(self):
        """Writes out what is buffered (a compressed stream is sync-flushed)."""
        if self._deflate is not None:
            self._put(self._deflate.flush(zlib.Z_SYNC_FLUSH))
        if self._file is not None:
            self._file.flush()

    def close(self):
        """Finishes the compressed stream, if any, and closes the file."""
        if self._file is None:
            return
        if self._deflate is not None:
            self._file.write(self._deflate.flush(zlib.Z_FINISH))
        self._file.close()
        self._file = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        # As TensorFlow's writer: a writer dropped unclosed still ends its compressed stream.
        if getattr(self, "_file", None) is not None:
            self.close()


# ------------------------------------------------------------------------------- reading
def tf_record_iterator(path, options=None):
    """`tf.compat.v1.io.tf_record_iterator`: yields the records of a TFRecord file as bytes.

    Args:
        path: the file to read.
        options: a `TFRecordOptions`, "GZIP", "ZLIB", or None / "" for no compression.

    Raises:
        tf.errors.NotFoundError: if the file does not exist.
        tf.errors.DataLossError: when a record's checksum is wrong or the file ends inside a
            record (also a partial header, where TensorFlow stops silently); the message
            names the file, the record's index and its byte offset.
    """
    compression = _compression(options)
    op = "tf_record_iterator"
    records = read_records(path, check_compression(compression, op), op)
    try:
        yield from records
    except FileNotFoundError as e:
        raise errors.NotFoundError(None, None, f"{path}; No such file or directory") from e
    except CorruptRecordError as e:
        raise DataLossError(None, None, str(e)) from e


class TFRecordReader(ReaderBase):
    """`tf.TFRecordReader`: `read(filename_queue)` gives the next record of the queued
    TFRecord files as `(key, value)` string tensors; keys are `"<file>:<byte offset>"`.

    Args:
        name: the reader's name.
        options: a `TFRecordOptions`, "GZIP", "ZLIB", or None for no compression.

    Raises:
        tf.errors.DataLossError (at run time): on a corrupt or truncated file.
    """

    def __init__(self, name=None, options=None):
        super().__init__(name)
        self._compression = _compression(options)

    def _records(self, path):
        open(path, "rb").close()  # a missing file fails here, where the reader reports it

        def records():
            offset = 0
            try:
                for record in read_records(path, self._compression, "TFRecordReader"):
                    yield f"{path}:{offset}".encode(), record
                    offset += 16 + len(record)
            except CorruptRecordError as e:
                raise DataLossError(None, None, str(e)) from e

        return records()


# ------------------------------------------------------------------------------- parsing
class FixedLenFeature(collections.namedtuple("FixedLenFeature", "shape dtype default_value")):
    """`tf.io.FixedLenFeature(shape, dtype, default_value=None)`: a feature with exactly
    `prod(shape)` values, read as a dense tensor of `shape` (float32, int64 or string).
    `default_value` (that many values) is used when an example lacks the feature."""

    def __new__(cls, shape, dtype, default_value=None):
        return super().__new__(cls, shape, dtype, default_value)


class FixedLenSequenceFeature(
    collections.namedtuple("FixedLenSequenceFeature", "shape dtype allow_missing default_value")
):
    """`tf.io.FixedLenSequenceFeature(shape, dtype, allow_missing=False, default_value=None)`:
    any number of values of `shape` each, read as `[steps] + shape` (a batch is padded to
    its longest with `default_value`, or zeros). In a SequenceExample's feature lists, one
    value of `shape` per step; in an Example, `allow_missing` must be True."""

    def __new__(cls, shape, dtype, allow_missing=False, default_value=None):
        return super().__new__(cls, shape, dtype, allow_missing, default_value)


class VarLenFeature(collections.namedtuple("VarLenFeature", "dtype")):
    """`tf.io.VarLenFeature(dtype)`: a feature with any number of values, read as a
    `SparseTensor`."""


class SparseTensor:
    """`tf.SparseTensor`: `indices` (int64, [N, rank]), `values` ([N]) and `dense_shape`
    (int64, [rank]) of a sparse tensor, as `VarLenFeature` parsing returns it.

    `values` is a keratron tensor, or a numpy object array of `bytes` for strings.
    """

    def __init__(self, indices, values, dense_shape):
        self.indices = indices
        self.values = values
        self.dense_shape = dense_shape

    @property
    def dtype(self):
        return as_dtype("string" if isinstance(self.values, np.ndarray) else self.values.dtype)

    @property
    def shape(self):
        return tuple(int(d) for d in np.asarray(self.dense_shape))

    def __repr__(self):
        return (
            f"SparseTensor(indices={self.indices!r}, values={self.values!r}, "
            f"dense_shape={self.dense_shape!r})"
        )


_LIST_OF = {"float32": "float_list", "int64": "int64_list", "string": "bytes_list"}
_TF_TYPE = {"float_list": "float", "int64_list": "int64", "bytes_list": "string"}
_NUMPY = {"float32": np.float32, "int64": np.int64, "string": object}
_SPECS = (FixedLenFeature, FixedLenSequenceFeature, VarLenFeature)


def _feature_dtype(key, spec, op: str) -> str:
    if not isinstance(spec, _SPECS):
        raise TypeError(
            f"{op}: `features[{key!r}]` must be a FixedLenFeature, FixedLenSequenceFeature or "
            f"VarLenFeature. Received: {spec!r}"
        )
    name = as_dtype(spec.dtype).name
    if name not in _LIST_OF:
        raise ValueError(
            f"{op}: feature {key!r} has dtype {name}; Example features are float32, int64 "
            f"or string. Received: dtype={spec.dtype!r}"
        )
    return name


def _check_features(features, op: str, what: str = "features") -> dict:
    if not isinstance(features, dict):
        raise ValueError(
            f"{op}: `{what}` must be a dict of FixedLenFeature / VarLenFeature. Received: "
            f"{what}={features!r}"
        )
    return {key: _feature_dtype(key, spec, op) for key, spec in features.items()}


def _serialized_list(serialized, op: str) -> list:
    if isinstance(serialized, (bytes, str)):
        serialized = [serialized]
    items = np.asarray(serialized, dtype=object).reshape(-1).tolist()
    out = []
    for s in items:
        if isinstance(s, str):
            s = s.encode("utf-8")
        if not isinstance(s, (bytes, bytearray)):
            raise TypeError(
                f"{op}: `serialized` must hold serialized Examples (bytes). Received: {s!r}"
            )
        out.append(bytes(s))
    return out


def _decode(cls, record: bytes, op: str):
    try:
        return cls.FromString(record)
    except DecodeError:
        raise errors.InvalidArgumentError(
            None, None, f"{op}: Could not parse example input, value: {record[:64]!r}"
        ) from None


def _kind_and_values(feature):
    """(list kind, values) of a Feature, or None when it has no kind set (as if missing)."""
    kind = feature.WhichOneof("kind") if feature is not None else None
    return None if kind is None else (kind, getattr(feature, kind).value)


def _found(feature_map, keys) -> dict:
    """{key: (list kind, values)} for the requested keys the map has with a kind set."""
    pairs = ((key, _kind_and_values(dict.get(feature_map, key))) for key in keys)
    return {key: pair for key, pair in pairs if pair is not None}


def _array(values, dtype: str) -> np.ndarray:
    out = np.empty(len(values), dtype=_NUMPY[dtype])
    out[:] = values
    return out


def _output(array: np.ndarray, dtype: str):
    return array if dtype == "string" else ops.convert_to_tensor(array)


def _sparse(rows: list, dtype: str, rank: int) -> SparseTensor:
    """A SparseTensor of `rows` (lists of values): rank 2 is [rows, longest]; rank 1 is the
    one row alone."""
    width = max((len(r) for r in rows), default=0)
    cols = np.concatenate([np.arange(len(r)) for r in rows] + [np.zeros(0, np.int64)])
    if rank == 1:
        indices, shape = cols[:, None], [width]
    else:
        row_ids = np.repeat(np.arange(len(rows)), [len(r) for r in rows])
        indices, shape = np.stack([row_ids, cols], axis=1), [len(rows), width]
    return SparseTensor(
        ops.convert_to_tensor(indices.astype(np.int64).reshape(-1, rank)),
        _output(_array([v for r in rows for v in r], dtype), dtype),
        ops.convert_to_tensor(np.asarray(shape, np.int64)),
    )


def _type_error(message: str):
    return errors.InvalidArgumentError(None, None, message)


def _parse_found(parsed: list, features: dict, dtypes: dict, op: str, single: bool) -> dict:
    """The parsed tensors of `features` from one `_found` dict per example."""
    where = "" if single else "Name: <unknown>, "
    result = {}
    sparse_keys = sorted(k for k, s in features.items() if isinstance(s, VarLenFeature))
    for key in sparse_keys:
        dtype = dtypes[key]
        rows = []
        for i, found in enumerate(parsed):
            kind, values = found.get(key, (_LIST_OF[dtype], []))
            if kind != _LIST_OF[dtype]:
                raise _type_error(
                    f"{where}Key: {key}, Index: {i}.  Data types don't match. Expected type: "
                    f"{_TF_TYPE[_LIST_OF[dtype]]}, Actual type: {_TF_TYPE[kind]}"
                )
            rows.append(values)
        result[key] = _sparse(rows, dtype, 1 if single else 2)
    for key in sorted(k for k in features if k not in sparse_keys):
        spec, dtype = features[key], dtypes[key]
        sequence = isinstance(spec, FixedLenSequenceFeature)
        if sequence and not spec.allow_missing:
            raise ValueError(
                "Unsupported: FixedLenSequenceFeature requires allow_missing to be True."
            )
        shape = tuple(int(d) for d in spec.shape)
        size = int(np.prod(shape))
        default = None
        if spec.default_value is not None:
            default = np.asarray(spec.default_value, dtype=_NUMPY[dtype])
            if not sequence and default.size != size:
                raise ValueError(
                    f"{op}: the default_value of feature {key!r} must have {size} values "
                    f"(shape {list(shape)}). Received: default_value={spec.default_value!r}"
                )
            default = default if sequence else default.reshape(shape)
        examples = []
        for found in parsed:
            if key not in found:
                if default is None and not sequence:
                    raise _type_error(
                        f"{where}Feature: {key} (data type: {_TF_TYPE[_LIST_OF[dtype]]}) is "
                        "required but could not be found."
                    )
                examples.append(_array([], dtype).reshape((0,) + shape) if sequence else default)
                continue
            kind, values = found[key]
            if kind != _LIST_OF[dtype]:
                raise _type_error(
                    f"{where}Key: {key}.  Data types don't match. Data type: {_TF_TYPE[kind]} "
                    f"but expected type: {_TF_TYPE[_LIST_OF[dtype]]}"
                )
            if sequence and (size == 0 or len(values) % size):
                raise _type_error(
                    f"Error while parsing feature with key {key}: number of elements should be "
                    f"divisible by {size}, found {len(values)} instead"
                )
            if not sequence and len(values) != size:
                raise _type_error(
                    f"{where}Key: {key}.  Can't parse serialized Example: expected {size} "
                    f"values (shape {list(shape)}), found {len(values)}."
                )
            examples.append(_array(values, dtype).reshape(((-1,) if sequence else ()) + shape))
        if sequence:  # padded to the longest, with the default (or zeros / b"")
            steps = max((len(e) for e in examples), default=0)
            out = np.empty((len(examples), steps) + shape, dtype=_NUMPY[dtype])
            out[...] = default if default is not None else (b"" if dtype == "string" else 0)
            for i, e in enumerate(examples):
                out[i, : len(e)] = e
        else:
            out = np.empty((len(examples),) + shape, dtype=_NUMPY[dtype])
            for i, e in enumerate(examples):
                out[i] = e
        result[key] = _output(out[0] if single else out, dtype)
    return result


def _graph_parse(serialized, features: dict, dtypes: dict, op: str, single: bool) -> dict:
    """Parsing as a host step of a TF1 graph: string tensor in, tensors out."""
    sparse_keys = sorted(k for k, s in features.items() if isinstance(s, VarLenFeature))
    dense_keys = sorted(k for k in features if k not in sparse_keys)
    batch, rank = ((), 1) if single else ((None,), 2)
    specs = []
    for key in sparse_keys:
        specs += [((None, rank), "int64"), ((None,), dtypes[key]), ((rank,), "int64")]
    for key in dense_keys:
        steps = (None,) if isinstance(features[key], FixedLenSequenceFeature) else ()
        specs.append((batch + steps + tuple(int(d) for d in features[key].shape), dtypes[key]))

    def decode(values):
        parsed = _parse(values, features, op, single)
        out = []
        for key in sparse_keys:
            out += [parsed[key].indices, parsed[key].values, parsed[key].dense_shape]
        out += [parsed[key] for key in dense_keys]
        return [v if isinstance(v, np.ndarray) else v.numpy() for v in out]

    outputs = list(_host_decode("ParseExampleV2", op, serialized, specs, decode, None).outputs)
    result = {key: SparseTensor(*outputs[3 * i : 3 * i + 3]) for i, key in enumerate(sparse_keys)}
    result.update(zip(dense_keys, outputs[3 * len(sparse_keys) :]))
    return result


def _parse(serialized, features, op: str, single: bool) -> dict:
    dtypes = _check_features(features, op)
    if not features:
        raise ValueError(f"{op}: `features` must not be empty.")
    if isinstance(serialized, _GraphTensor):
        return _graph_parse(serialized, features, dtypes, op, single)
    records = _serialized_list(serialized, op)
    if single and len(records) != 1:
        raise ValueError(f"{op}: `serialized` must be one record. Received: {len(records)}")
    parsed = [_found(_decode(Example, r, op).features.feature, features) for r in records]
    return _parse_found(parsed, features, dtypes, op, single)


def parse_example(serialized, features, name=None, example_names=None) -> dict:
    """`tf.io.parse_example`: parses a batch of serialized `tf.train.Example`s.

    Args:
        serialized: a list / 1-D array of serialized Examples (bytes).
        features: a dict from feature key to `FixedLenFeature` or `VarLenFeature`
            (dtype float32, int64 or string).
        name: accepted for compatibility.
        example_names: accepted for compatibility.

    Returns:
        A dict from key to a tensor of shape `[batch] + shape` for each `FixedLenFeature`
        (a numpy object array of bytes for strings), and a `SparseTensor` of dense shape
        `[batch, longest]` for each `VarLenFeature`.

    Raises:
        tf.errors.InvalidArgumentError: for an unparsable record, a missing feature without
            a default, a wrong value count or a dtype that does not match the data.
    """
    del name, example_names
    return _parse(serialized, features, "parse_example", single=False)


def parse_single_example(serialized, features, name=None, example_names=None) -> dict:
    """`tf.io.parse_single_example`: parses one serialized `tf.train.Example`.

    As `parse_example` without the batch dimension: `FixedLenFeature`s come back with
    their `shape`, `VarLenFeature`s as 1-D `SparseTensor`s.

    Example:
        >>> import keratron.compat.v1 as tf
        >>> feature = tf.train.Feature(int64_list=tf.train.Int64List(value=[3]))
        >>> ex = tf.train.Example(features=tf.train.Features(feature={"n": feature}))
        >>> spec = {"n": tf.io.FixedLenFeature([], tf.int64)}
        >>> int(tf.io.parse_single_example(ex.SerializeToString(), spec)["n"])
        3
    """
    del name, example_names
    return _parse(serialized, features, "parse_single_example", single=True)


def parse_single_sequence_example(
    serialized, context_features=None, sequence_features=None, example_name=None, name=None
):
    """`tf.io.parse_single_sequence_example`: parses one serialized `tf.train.SequenceExample`.

    Args:
        serialized: one serialized SequenceExample (bytes).
        context_features: a dict from key to `FixedLenFeature` / `VarLenFeature`, read from
            the `context` Features as `parse_single_example` reads an Example.
        sequence_features: a dict from key to `FixedLenSequenceFeature` (one value of its
            shape per step: `[steps] + shape`) or `VarLenFeature` (a `SparseTensor` of
            dense shape `[steps, longest]`), read from the `feature_lists`.
        example_name: accepted for compatibility.
        name: accepted for compatibility.

    Returns:
        A pair of dicts: the context tensors and the sequence tensors.

    Raises:
        ValueError: when both dicts are empty, or a FixedLenSequenceFeature has a default.
        tf.errors.InvalidArgumentError: for unparsable bytes, a missing feature list (unless
            `allow_missing`), a wrong value count or a dtype that does not match the data.
    """
    del example_name, name
    op = "parse_single_sequence_example"
    context_features, sequence_features = context_features or {}, sequence_features or {}
    if not context_features and not sequence_features:
        raise ValueError(
            "Both context_features and sequence_features are None, but at least one should "
            "have values."
        )
    context_dtypes = _check_features(context_features, op, "context_features")
    sequence_dtypes = _check_features(sequence_features, op, "sequence_features")
    if isinstance(serialized, _GraphTensor):
        raise TypeError(f"{op}: `serialized` must be bytes (graph string tensors: not supported).")
    records = _serialized_list(serialized, op)
    if len(records) != 1:
        raise ValueError(f"{op}: `serialized` must be one record. Received: {len(records)}")
    message = _decode(SequenceExample, records[0], op)
    context = _parse_found(
        [_found(message.context.feature, context_features)], context_features, context_dtypes,
        op, single=True,
    )  # fmt: skip
    lists = message.feature_lists.feature_list
    sequences = {}
    for key in sorted(sequence_features):
        spec, dtype = sequence_features[key], sequence_dtypes[key]
        if isinstance(spec, FixedLenFeature):
            raise ValueError(f"{op}: sequence feature {key!r} must be a FixedLenSequenceFeature.")
        if isinstance(spec, FixedLenSequenceFeature) and spec.default_value is not None:
            raise ValueError(f"Value feature_list.dense_defaults[{key}] must be None")
        feature_list = dict.get(lists, key)
        steps = [] if feature_list is None else list(feature_list.feature)
        rows = []
        for i, feature in enumerate(steps):
            kind, values = _kind_and_values(feature) or (_LIST_OF[dtype], [])
            if kind != _LIST_OF[dtype]:
                raise _type_error(
                    f"Name: <unknown>, Feature list: {key}, Index: {i}.  Data types don't "
                    f"match. Expected type: {_TF_TYPE[_LIST_OF[dtype]]}"
                )
            rows.append(values)
        if isinstance(spec, VarLenFeature):
            sequences[key] = _sparse(rows, dtype, 2)
            continue
        shape = tuple(int(d) for d in spec.shape)
        if feature_list is None and not spec.allow_missing:
            raise _type_error(
                f"Name: <unknown>, Feature list '{key}' is required but could not be found.  "
                "Did you mean to include it in feature_list_dense_missing_assumed_empty or "
                "feature_list_dense_defaults?"
            )
        size = int(np.prod(shape))
        if any(len(r) != size for r in rows):
            raise _type_error(
                f"Feature list '{key}' has an unexpected number of values.  Total values size: "
                f"{sum(len(r) for r in rows)} is not consistent with output shape: "
                f"[?,{','.join(str(d) for d in shape)}]"
            )
        flat = _array([v for r in rows for v in r], dtype)
        sequences[key] = _output(flat.reshape((len(rows),) + shape), dtype)
    return context, sequences
