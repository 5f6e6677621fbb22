"""File readers: `TextLineDataset` and `make_csv_dataset`, as in tf.data."""

from __future__ import annotations

import csv
import glob
import gzip
import io
import os
import zlib

import numpy as np
import torch

from keratron.autodiff.dtypes import to_torch_dtype
from keratron.autodiff.tensor import Tensor
from keratron.data import structure
from keratron.data.dataset import AUTOTUNE, UNKNOWN_CARDINALITY, Dataset
from keratron.data.structure import STRING, TensorSpec

__all__ = ["TextLineDataset", "make_csv_dataset"]

_COMPRESSION = {None: None, "": None, "GZIP": "GZIP", "ZLIB": "ZLIB"}


def _open(filename: str, compression, op: str):
    """A binary file object over the decompressed contents of `filename`."""
    if compression == "GZIP":
        return gzip.open(filename, "rb")
    if compression == "ZLIB":
        with open(filename, "rb") as f:
            try:
                return io.BytesIO(zlib.decompress(f.read()))
            except zlib.error as e:
                raise ValueError(f"{op}: {filename!r} is not ZLIB-compressed data ({e}).") from e
    return open(filename, "rb")


def _check_compression(compression_type, op: str):
    key = compression_type.upper() if isinstance(compression_type, str) else compression_type
    if key not in _COMPRESSION:
        raise ValueError(
            f"{op}: `compression_type` must be None, '', 'GZIP' or 'ZLIB'. Received: "
            f"compression_type={compression_type!r}"
        )
    return _COMPRESSION[key]


def _filenames(filenames, op: str) -> list[str]:
    if isinstance(filenames, (str, bytes, os.PathLike)):
        filenames = [filenames]
    if isinstance(filenames, np.ndarray):
        filenames = filenames.reshape(-1).tolist()
    if not isinstance(filenames, (list, tuple)) or not filenames:
        raise TypeError(
            f"{op}: `filenames` must be a file name or a non-empty list of file names. "
            f"Received: {filenames!r}"
        )
    out = []
    for f in filenames:
        if isinstance(f, bytes):
            f = f.decode("utf-8")
        if not isinstance(f, (str, os.PathLike)):
            raise TypeError(f"{op}: file names must be strings. Received: {f!r}")
        out.append(os.fspath(f))
    return out


class TextLineDataset(Dataset):
    """The lines of one or more text files, as `bytes` without their line endings.

    A trailing "\\n" (and a "\\r" before it) is removed; a last line without a newline is
    still a line. Files are read in order, or, with `num_parallel_reads` > 1, that many at
    a time with their lines interleaved one by one.

    Args:
        filenames: a file name, a list of them, or a Dataset of file names.
        compression_type: None or "" (plain), "GZIP" or "ZLIB".
        buffer_size: accepted for compatibility (Python's file buffering is used).
        num_parallel_reads: files read at once (None: one after the other).
        name: accepted for compatibility.

    Example:
        >>> ds = keratron.data.TextLineDataset("train.txt")
        >>> ds = ds.map(lambda line: len(line))
    """

    def __init__(
        self, filenames, compression_type=None, buffer_size=None, num_parallel_reads=None, name=None
    ):
        del buffer_size, name
        op = "TextLineDataset"
        compression = _check_compression(compression_type, op)
        if isinstance(filenames, Dataset):
            files = filenames
        else:
            files = Dataset.from_tensor_slices(np.array(_filenames(filenames, op), dtype=object))

        def lines_of(filename):
            path = filename.decode("utf-8") if isinstance(filename, bytes) else str(filename)

            def make():
                with _open(path, compression, op) as f:
                    for raw in f:
                        line = raw[:-1] if raw.endswith(b"\n") else raw
                        yield line[:-1] if line.endswith(b"\r") else line

            return Dataset(make, TensorSpec((), STRING), UNKNOWN_CARDINALITY, op)

        cycle = 1 if num_parallel_reads is None else num_parallel_reads
        lines = files.interleave(lines_of, cycle_length=cycle, block_length=1)
        super().__init__(lines._make_iterator, TensorSpec((), STRING), UNKNOWN_CARDINALITY, op)


# ------------------------------------------------------------------------------------ CSV
_INFERRED = ("int32", "int64", "float32", "float64", STRING)


def _fits(text: str, dtype: str) -> bool:
    try:
        if dtype in ("int32", "int64"):
            value, bound = int(text), 2**31 if dtype == "int32" else 2**63
            return -bound <= value < bound
        if dtype in ("float32", "float64"):
            with np.errstate(over="ignore"):
                return bool(np.isfinite(np.dtype(dtype).type(float(text))))
    except ValueError:
        return False
    return True


def _infer_type(text: str, na_value: str, previous):
    """The narrowest of int32, int64, float32, float64, string that holds `text` and every
    earlier value of the column (tf.data's inference order)."""
    if text in ("", na_value):
        return previous
    start = 0 if previous is None else _INFERRED.index(previous)
    return next(t for t in _INFERRED[start:] if _fits(text, t))


def _csv_rows(path, compression, field_delim, use_quote_delim, encoding, header, op):
    with _open(path, compression, op) as raw:
        text = io.TextIOWrapper(raw, encoding=encoding, newline="")
        quoting = csv.QUOTE_MINIMAL if use_quote_delim else csv.QUOTE_NONE
        reader = csv.reader(text, delimiter=field_delim, quoting=quoting)
        for n, row in enumerate(reader):
            if (header and n == 0) or not row:
                continue  # the header, and blank lines (e.g. a trailing one)
            yield n + 1, row


class _Column:
    """How to read one selected CSV column: its dtype and default (None: required)."""

    def __init__(self, name, index, dtype, default):
        self.name, self.index, self.dtype, self.default = name, index, dtype, default

    def parse(self, field: str, na_value: str, encoding: str):
        if field in ("", na_value):
            if self.default is None:
                raise ValueError(f"field {self.index} ({self.name!r}) is required but missing")
            return self.default
        if self.dtype == STRING:
            return field.encode(encoding)
        try:
            value = int(field) if self.dtype.startswith("int") else float(field)
        except ValueError:
            raise ValueError(
                f"field {self.index} ({self.name!r}) is not a valid {self.dtype}: {field!r}"
            ) from None
        return Tensor(torch.tensor(value, dtype=to_torch_dtype(self.dtype)))


def _column_default(value, name, op):
    """A `column_defaults` entry -> (dtype, default leaf or None for a required column).

    A type (`float`, `int`, `str`, `np.float64`, ...) or numpy dtype marks a required
    column of that type; a value (0, 0.0, "", np.int64(0), [0.0]) is the default."""
    if isinstance(value, type) or isinstance(value, np.dtype):
        return structure.standardize_spec_dtype(value), None
    if isinstance(value, (list, tuple)) and len(value) <= 1:
        if not value:
            raise ValueError(
                f"{op}: the default of column {name!r} is an empty list; give a dtype "
                "(e.g. `float`) for a required column."
            )
        value = value[0]
    try:
        leaf = structure.to_leaf(value)
    except TypeError as e:
        raise ValueError(f"{op}: invalid default {value!r} for column {name!r}.") from e
    dtype = structure.leaf_dtype(leaf)
    if structure.leaf_shape(leaf) != () or dtype not in _INFERRED:
        raise ValueError(
            f"{op}: the default of column {name!r} must be a scalar of type int32, int64, "
            f"float32, float64 or string. Received: {value!r}"
        )
    return dtype, leaf


def make_csv_dataset(
    file_pattern,
    batch_size,
    column_names=None,
    column_defaults=None,
    label_name=None,
    select_columns=None,
    field_delim=",",
    use_quote_delim=True,
    na_value="",
    header=True,
    num_epochs=None,
    shuffle=True,
    shuffle_buffer_size=10000,
    shuffle_seed=None,
    prefetch_buffer_size=None,
    num_parallel_reads=None,
    sloppy=False,
    num_rows_for_inference=100,
    compression_type=None,
    ignore_errors=False,
    encoding="utf-8",
):
    """Reads CSV files into a dataset of `(features, label)` batches, as tf.data does.

    `features` is a dict from column name to a batch of values; with no `label_name` the
    elements are the dicts alone. Column names come from `column_names` or the header.
    Column types are inferred from the first `num_rows_for_inference` rows (int32, int64,
    float32, float64, then string; missing values become 0 or b"") unless
    `column_defaults` gives, per selected column, a default value or a type (required).
    Rows are shuffled through a `shuffle_buffer_size` buffer, repeated `num_epochs` times
    (None: forever, and then the last, partial batch is dropped), and batched.

    Args:
        file_pattern: a glob pattern or file name, or a list of them.
        batch_size: rows per batch.
        column_names: names of all columns, in file order (default: the header).
        column_defaults: one default value or type per selected column.
        label_name: the column returned apart, as the label.
        select_columns: names or indices of the columns to keep.
        field_delim: the field separator.
        use_quote_delim: whether double quotes delimit fields (`"a,b"` is one field).
        na_value: text that marks a missing value (as does an empty field).
        header: whether each file's first line is a header to skip.
        num_epochs: passes over the files (None: repeat forever).
        shuffle: shuffle the files and the rows.
        shuffle_buffer_size: rows in the shuffle buffer.
        shuffle_seed: seed of the shuffle.
        prefetch_buffer_size: batches prepared ahead (None: AUTOTUNE).
        num_parallel_reads: files read at once, rows interleaved (None: 1).
        sloppy: accepted for compatibility (the order is always deterministic).
        num_rows_for_inference: rows read to infer the column types (None or 0: all).
        compression_type: None / "" (plain), "GZIP" or "ZLIB".
        ignore_errors: skip malformed rows instead of raising.
        encoding: the files' text encoding.

    Returns:
        A Dataset of `(features, label)` or `features` batches.

    Example:
        >>> import os, shutil, tempfile
        >>> tmp = tempfile.mkdtemp()
        >>> with open(os.path.join(tmp, "train.csv"), "w") as f:
        ...     _ = f.write("age,fare,survived\\n22,7.25,0\\n38,71.28,1\\n26,7.92,1\\n")
        >>> ds = keratron.data.experimental.make_csv_dataset(
        ...     os.path.join(tmp, "train.csv"), batch_size=2, label_name="survived",
        ...     num_epochs=1, shuffle=False)
        >>> features, labels = next(iter(ds))
        >>> sorted(features), features["fare"].numpy(), labels.numpy()
        (['age', 'fare'], array([ 7.25, 71.28], dtype=float32), array([0, 1], dtype=int32))
        >>> shutil.rmtree(tmp)
    """
    del sloppy
    op = "make_csv_dataset"
    compression = _check_compression(compression_type, op)
    files = _match_files(file_pattern, op)
    batch_size = int(batch_size)
    if batch_size <= 0:
        raise ValueError(f"{op}: `batch_size` must be positive. Received: {batch_size}")

    def rows_of(path):
        return _csv_rows(path, compression, field_delim, use_quote_delim, encoding, header, op)

    if column_names is None:
        if not header:
            raise ValueError(f"{op}: give `column_names` when the files have no header.")
        column_names = _header_names(files, compression, field_delim, use_quote_delim, encoding, op)
    column_names = list(column_names)
    if len(set(column_names)) != len(column_names):
        raise ValueError(f"{op}: `column_names` must be unique. Received: {column_names}")
    indices = _select(select_columns, column_names, op)
    names = [column_names[i] for i in indices]
    if label_name is not None and label_name not in names:
        raise ValueError(
            f"{op}: `label_name` provided must be one of the columns: {names}. Received: "
            f"{label_name!r}"
        )

    if column_defaults is not None:
        if len(column_defaults) != len(indices):
            raise ValueError(
                f"{op}: `column_defaults` must have one entry per selected column "
                f"({len(indices)}). Received {len(column_defaults)}."
            )
        typed = [_column_default(v, n, op) for v, n in zip(column_defaults, names)]
    else:
        inferred = [None] * len(indices)
        limit = num_rows_for_inference or None
        seen = 0
        for path in files:
            for _, row in rows_of(path):
                if limit is not None and seen >= limit:
                    break
                seen += 1
                if len(row) == len(column_names):
                    for k, i in enumerate(indices):
                        inferred[k] = _infer_type(row[i], na_value, inferred[k])
        typed = []
        for dtype in inferred:
            dtype = dtype or STRING
            default = (
                b"" if dtype == STRING else Tensor(torch.zeros((), dtype=to_torch_dtype(dtype)))
            )
            typed.append((dtype, default))
    columns = [_Column(n, i, d, v) for n, i, (d, v) in zip(names, indices, typed)]

    features_spec = {c.name: TensorSpec((), c.dtype) for c in columns if c.name != label_name}
    label_spec = next((TensorSpec((), c.dtype) for c in columns if c.name == label_name), None)
    row_spec = features_spec if label_name is None else (features_spec, label_spec)

    def parse(path, line, row):
        if len(row) != len(column_names):
            raise ValueError(
                f"{op}: expected {len(column_names)} fields but found {len(row)} in line "
                f"{line} of {path!r}."
            )
        features, label = {}, None
        for c in columns:
            try:
                value = c.parse(row[c.index], na_value, encoding)
            except ValueError as e:
                raise ValueError(f"{op}: in line {line} of {path!r}: {e}.") from None
            if c.name == label_name:
                label = value
            else:
                features[c.name] = value
        return features if label_name is None else (features, label)

    def rows_dataset(filename):
        path = filename.decode("utf-8") if isinstance(filename, bytes) else filename

        def make():
            for line, row in rows_of(path):
                try:
                    yield parse(path, line, row)
                except ValueError:
                    if not ignore_errors:
                        raise

        return Dataset(make, row_spec, UNKNOWN_CARDINALITY, "CsvDataset")

    dataset = Dataset.from_tensor_slices(np.array(files, dtype=object))
    if shuffle:
        dataset = dataset.shuffle(len(files), seed=shuffle_seed)
    dataset = dataset.interleave(rows_dataset, cycle_length=num_parallel_reads or 1, block_length=1)
    if shuffle:
        dataset = dataset.shuffle(shuffle_buffer_size, seed=shuffle_seed)
    if num_epochs != 1:
        dataset = dataset.repeat(num_epochs)
    dataset = dataset.batch(batch_size, drop_remainder=num_epochs is None)
    return dataset.prefetch(AUTOTUNE if prefetch_buffer_size is None else prefetch_buffer_size)


def _match_files(file_pattern, op) -> list[str]:
    patterns = _filenames(file_pattern, op)
    files = []
    for pattern in patterns:
        matched = sorted(glob.glob(pattern))
        if not matched:
            raise ValueError(f"{op}: no files match `file_pattern` {pattern!r}.")
        files.extend(matched)
    return files


def _header_names(files, compression, field_delim, use_quote_delim, encoding, op):
    names = None
    for path in files:
        with _open(path, compression, op) as raw:
            text = io.TextIOWrapper(raw, encoding=encoding, newline="")
            quoting = csv.QUOTE_MINIMAL if use_quote_delim else csv.QUOTE_NONE
            header = next(csv.reader(text, delimiter=field_delim, quoting=quoting), None)
        if header is None:
            raise ValueError(f"{op}: {path!r} is empty; expected a header line.")
        if names is not None and header != names:
            raise ValueError(
                f"{op}: files have different headers: {names} and {header} (in {path!r})."
            )
        names = header
    return names


def _select(select_columns, column_names, op) -> list[int]:
    if select_columns is None:
        return list(range(len(column_names)))
    indices = []
    for c in select_columns:
        if isinstance(c, (int, np.integer)) and not isinstance(c, bool):
            if not 0 <= c < len(column_names):
                raise ValueError(
                    f"{op}: column index {c} in `select_columns` is out of range for "
                    f"{len(column_names)} columns."
                )
            indices.append(int(c))
        elif c in column_names:
            indices.append(column_names.index(c))
        else:
            raise ValueError(
                f"{op}: column {c!r} in `select_columns` is not one of {column_names}."
            )
    if len(set(indices)) != len(indices):
        raise ValueError(f"{op}: `select_columns` names a column twice: {select_columns}")
    return sorted(indices)
