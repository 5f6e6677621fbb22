"""TFRecord files and `tf.train.Example` parsing: `tf.io` / `tf.python_io` over keratron.

`TFRecordWriter` writes records with TensorFlow's framing (length, masked CRC32C of the
length, data, masked CRC32C of the data), plain or in one GZIP / ZLIB stream;
`tf_record_iterator` and `keratron.data.TFRecordDataset` read them back and check both
checksums of every record. `parse_single_example` / `parse_example` decode serialized
`tf.train.Example`s (keratron.compat.v1.example_proto) into eager keratron tensors for
`FixedLenFeature`s and `SparseTensor`s for `VarLenFeature`s.

keratron has no string tensors: records are Python `bytes`, and bytes features come back
as numpy object arrays of `bytes` (a `SparseTensor`'s `values` too).

Example:
    >>> with tf.io.TFRecordWriter("data.tfrecord") as w:
    ...     w.write(tf.train.Example(features=tf.train.Features(feature={
    ...         "x": tf.train.Feature(float_list=tf.train.FloatList(value=[1.0, 2.0]))
    ...     })).SerializeToString())
    >>> ds = tf.data.TFRecordDataset("data.tfrecord").map(
    ...     lambda r: tf.io.parse_single_example(r, {"x": tf.io.FixedLenFeature([2], tf.float32)}))
"""

from __future__ import annotations

import collections
import os
import zlib

import numpy as np

from keratron import ops
from keratron.compat.v1 import errors
from keratron.compat.v1.example_proto import DecodeError, Example
from keratron.compat.v1.framework import Tensor as _GraphTensor
from keratron.compat.v1.framework import as_dtype
from keratron.data.tfrecord import CorruptRecordError, check_compression, frame_record, read_records

__all__ = [
    "DataLossError",
    "FixedLenFeature",
    "SparseTensor",
    "TFRecordCompressionType",
    "TFRecordOptions",
    "TFRecordWriter",
    "VarLenFeature",
    "parse_example",
    "parse_single_example",
    "tf_record_iterator",
]


class DataLossError(errors.OpError):
    """Unrecoverable data loss or corruption (TF's `tf.errors.DataLossError`)."""


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
        >>> with tf.io.TFRecordWriter("out.tfrecord", "GZIP") as writer:
        ...     writer.write(b"record")
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
    records = read_records(path, check_compression(compression, "tf_record_iterator"))
    try:
        yield from records
    except FileNotFoundError as e:
        raise errors.NotFoundError(None, None, f"{path}; No such file or directory") from e
    except CorruptRecordError as e:
        raise DataLossError(None, None, str(e)) from e


# ------------------------------------------------------------------------------- parsing
class FixedLenFeature(collections.namedtuple("FixedLenFeature", "shape dtype default_value")):
    """`tf.io.FixedLenFeature(shape, dtype, default_value=None)`: a feature with exactly
    `prod(shape)` values, read as a dense tensor of `shape` (float32, int64 or string).
    `default_value` (that many values) is used when an example lacks the feature."""

    def __new__(cls, shape, dtype, default_value=None):
        return super().__new__(cls, shape, dtype, default_value)


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


def _feature_dtype(key, spec, op: str) -> str:
    if not isinstance(spec, (FixedLenFeature, VarLenFeature)):
        raise TypeError(
            f"{op}: `features[{key!r}]` must be a FixedLenFeature or VarLenFeature. "
            f"Received: {spec!r}"
        )
    name = as_dtype(spec.dtype).name
    if name not in _LIST_OF:
        raise ValueError(
            f"{op}: feature {key!r} has dtype {name}; Example features are float32, int64 "
            f"or string. Received: dtype={spec.dtype!r}"
        )
    return name


def _serialized_list(serialized, op: str) -> list:
    if isinstance(serialized, _GraphTensor):
        raise TypeError(
            f"{op}: `serialized` is a graph tensor; keratron has no string tensors. Parse "
            "records in `Dataset.map` (its function runs eagerly on bytes) or pass bytes."
        )
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


def _values_of(record: bytes, keys, op: str) -> dict:
    """{key: (list kind, values)} for the requested keys an Example has with a kind set."""
    try:
        feature_map = Example.FromString(record).features.feature
    except DecodeError:
        raise errors.InvalidArgumentError(
            None, None, f"{op}: Could not parse example input, value: {record[:64]!r}"
        ) from None
    found = {}
    for key in keys:
        feature = dict.get(feature_map, key)
        kind = feature.WhichOneof("kind") if feature is not None else None
        if kind is not None:
            found[key] = (kind, getattr(feature, kind).value)
    return found


def _to_output(array: np.ndarray, dtype: str):
    return array if dtype == "string" else ops.convert_to_tensor(array)


def _parse(serialized, features, op: str, single: bool) -> dict:
    if not isinstance(features, dict) or not features:
        raise ValueError(
            f"{op}: `features` must be a non-empty dict of FixedLenFeature / VarLenFeature. "
            f"Received: features={features!r}"
        )
    dtypes = {key: _feature_dtype(key, spec, op) for key, spec in features.items()}
    records = _serialized_list(serialized, op)
    if single and len(records) != 1:
        raise ValueError(f"{op}: `serialized` must be one record. Received: {len(records)}")
    parsed = [_values_of(r, features, op) for r in records]
    where = "" if single else "Name: <unknown>, "
    result = {}
    sparse_keys = sorted(k for k, s in features.items() if isinstance(s, VarLenFeature))
    dense_keys = sorted(k for k, s in features.items() if isinstance(s, FixedLenFeature))
    for key in sparse_keys:
        dtype = dtypes[key]
        rows = []
        for i, found in enumerate(parsed):
            kind, values = found.get(key, (_LIST_OF[dtype], []))
            if kind != _LIST_OF[dtype]:
                raise errors.InvalidArgumentError(
                    None, None,
                    f"{where}Key: {key}, Index: {i}.  Data types don't match. Expected type: "
                    f"{_TF_TYPE[_LIST_OF[dtype]]}, Actual type: {_TF_TYPE[kind]}",
                )  # fmt: skip
            rows.append(values)
        width = max((len(r) for r in rows), default=0)
        values = np.empty(sum(len(r) for r in rows), dtype=_NUMPY[dtype])
        values[:] = [v for r in rows for v in r]
        cols = np.concatenate([np.arange(len(r)) for r in rows] + [np.zeros(0, int)])
        if single:
            indices, shape = cols[:, None], [width]
        else:
            batch = np.repeat(np.arange(len(rows)), [len(r) for r in rows])
            indices, shape = np.stack([batch, cols], axis=1), [len(rows), width]
        result[key] = SparseTensor(
            ops.convert_to_tensor(indices.astype(np.int64).reshape(-1, 1 if single else 2)),
            _to_output(values, dtype),
            ops.convert_to_tensor(np.asarray(shape, np.int64)),
        )
    for key in dense_keys:
        spec, dtype = features[key], dtypes[key]
        shape = tuple(int(d) for d in spec.shape)
        size = int(np.prod(shape))
        default = None
        if spec.default_value is not None:
            default = np.asarray(spec.default_value, dtype=_NUMPY[dtype])
            if default.size != size:
                raise ValueError(
                    f"{op}: the default_value of feature {key!r} must have {size} values "
                    f"(shape {list(shape)}). Received: default_value={spec.default_value!r}"
                )
            default = default.reshape(shape)
        out = np.empty((len(parsed),) + shape, dtype=_NUMPY[dtype])
        for i, found in enumerate(parsed):
            if key not in found:
                if default is None:
                    raise errors.InvalidArgumentError(
                        None, None,
                        f"{where}Feature: {key} (data type: {_TF_TYPE[_LIST_OF[dtype]]}) is "
                        "required but could not be found.",
                    )  # fmt: skip
                out[i] = default
                continue
            kind, values = found[key]
            if kind != _LIST_OF[dtype]:
                raise errors.InvalidArgumentError(
                    None, None,
                    f"{where}Key: {key}.  Data types don't match. Data type: {_TF_TYPE[kind]} "
                    f"but expected type: {_TF_TYPE[_LIST_OF[dtype]]}",
                )  # fmt: skip
            if len(values) != size:
                raise errors.InvalidArgumentError(
                    None, None,
                    f"{where}Key: {key}.  Can't parse serialized Example: expected {size} "
                    f"values (shape {list(shape)}), found {len(values)}.",
                )  # fmt: skip
            flat = np.empty(size, dtype=_NUMPY[dtype])
            flat[:] = values
            out[i] = flat.reshape(shape)
        result[key] = _to_output(out[0] if single else out, dtype)
    return result


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
        >>> feature = tf.train.Feature(int64_list=tf.train.Int64List(value=[3]))
        >>> ex = tf.train.Example(features=tf.train.Features(feature={"n": feature}))
        >>> spec = {"n": tf.io.FixedLenFeature([], tf.int64)}
        >>> int(tf.io.parse_single_example(ex.SerializeToString(), spec)["n"])
        3
    """
    del name, example_names
    return _parse(serialized, features, "parse_single_example", single=True)
