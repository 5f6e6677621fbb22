"""TFRecord files: the record framing, CRC32C, and `TFRecordDataset`, as in tf.data.

A TFRecord file is a sequence of records, each framed as

    uint64 length (little-endian) | uint32 masked_crc32c(length) | data | uint32 masked_crc32c(data)

optionally inside one GZIP or ZLIB stream. CRC32C (Castagnoli) is computed here with numpy:
a long buffer is cut into 256-byte blocks whose CRCs come from one table gather, and the
block CRCs are then chained, so no C extension is needed.
"""

from __future__ import annotations

import gzip
import io
import os
import struct
import zlib

import numpy as np

from keratron.data.dataset import UNKNOWN_CARDINALITY, Dataset
from keratron.data.structure import STRING, TensorSpec

__all__ = [
    "CorruptRecordError",
    "check_compression",
    "TFRecordDataset",
    "crc32c",
    "frame_record",
    "masked_crc32c",
    "open_records",
    "read_records",
]

_POLY = 0x82F63B78  # CRC32C, reflected
_BLOCK = 256
_MASK_DELTA = 0xA282EAD8


def _byte_table() -> np.ndarray:
    crc = np.arange(256, dtype=np.uint32)
    for _ in range(8):
        crc = np.where(crc & 1, (crc >> 1) ^ np.uint32(_POLY), crc >> 1).astype(np.uint32)
    return crc


_TABLE = _byte_table()
_TABLE_LIST = _TABLE.tolist()


def _zero_byte(crc: np.ndarray) -> np.ndarray:
    """The CRC register after one more zero byte (with no initial or final inversion)."""
    return _TABLE[crc & 0xFF] ^ (crc >> 8)


def _block_tables():
    # contrib[j][b]: the CRC contribution of byte value b at offset j of a _BLOCK-byte block.
    rows = [_TABLE.copy()]
    for _ in range(_BLOCK - 1):
        rows.append(_zero_byte(rows[-1]))
    contrib = np.stack(rows[::-1])
    # shift[k][v]: the register (v << 8k) advanced over _BLOCK zero bytes.
    shift = np.arange(256, dtype=np.uint32)[None, :] << (8 * np.arange(4, dtype=np.uint32))[:, None]
    for _ in range(_BLOCK):
        shift = _zero_byte(shift)
    return contrib, shift


_CONTRIB, _SHIFT = None, None


def crc32c(data: bytes, value: int = 0) -> int:
    """The CRC32C (Castagnoli) checksum of `data`, continuing from `value`.

    Example:
        >>> hex(crc32c(b"123456789"))
        '0xe3069283'
    """
    global _CONTRIB, _SHIFT
    crc = value ^ 0xFFFFFFFF
    view = memoryview(data).cast("B")
    n = len(view)
    head = n % _BLOCK if n >= 4 * _BLOCK else n
    table = _TABLE_LIST
    for b in view[:head]:
        crc = table[(crc ^ b) & 0xFF] ^ (crc >> 8)
    if head == n:
        return crc ^ 0xFFFFFFFF
    if _CONTRIB is None:
        _CONTRIB, _SHIFT = _block_tables()
    blocks = np.frombuffer(view, np.uint8, n - head, head).reshape(-1, _BLOCK).copy()
    # The running register enters the first block as if XORed into its first four bytes.
    blocks[0, :4] ^= np.frombuffer(struct.pack("<I", crc), np.uint8)
    columns = np.arange(_BLOCK)
    block_crcs = []
    for start in range(0, len(blocks), 4096):  # about 4 MiB of gathered words at a time
        chunk = _CONTRIB[columns, blocks[start : start + 4096]]
        block_crcs.extend(np.bitwise_xor.reduce(chunk, axis=1).tolist())
    s0, s1, s2, s3 = (row.tolist() for row in _SHIFT)
    crc = 0
    for block_crc in block_crcs:
        crc = (
            s0[crc & 0xFF] ^ s1[(crc >> 8) & 0xFF] ^ s2[(crc >> 16) & 0xFF] ^ s3[crc >> 24]
        ) ^ block_crc
    return crc ^ 0xFFFFFFFF


def masked_crc32c(data: bytes) -> int:
    """The CRC32C of `data`, rotated and offset as TFRecord files store it."""
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF


def frame_record(data: bytes) -> bytes:
    """One record with its TFRecord framing (length, CRCs)."""
    length = struct.pack("<Q", len(data))
    return (
        length
        + struct.pack("<I", masked_crc32c(length))
        + data
        + struct.pack("<I", masked_crc32c(data))
    )


class CorruptRecordError(ValueError):
    """A TFRecord file whose framing or checksums are wrong, or that ends inside a record."""


_COMPRESSION = {None: "", "": "", "NONE": "", "GZIP": "GZIP", "ZLIB": "ZLIB"}


def check_compression(compression_type, op: str) -> str:
    """`compression_type` as "", "GZIP" or "ZLIB" (None and "NONE" are "")."""
    key = compression_type.upper() if isinstance(compression_type, str) else compression_type
    if key not in _COMPRESSION:
        raise ValueError(
            f"{op}: `compression_type` must be None, '', 'GZIP' or 'ZLIB'. Received: "
            f"compression_type={compression_type!r}"
        )
    return _COMPRESSION[key]


class _ZlibReader(io.RawIOBase):
    def __init__(self, raw):
        self._raw, self._inflate, self._pending = raw, zlib.decompressobj(), b""

    def readable(self):
        return True

    def readinto(self, buffer):
        while not self._pending and not self._inflate.eof:
            chunk = self._inflate.unconsumed_tail or self._raw.read(1 << 16)
            if not chunk:
                raise EOFError("the ZLIB stream ended before its end marker")
            # At most 64 KiB out per call, so that slicing what is pending stays cheap.
            self._pending = self._inflate.decompress(chunk, 1 << 16)
        n = min(len(buffer), len(self._pending))
        buffer[:n], self._pending = self._pending[:n], self._pending[n:]
        return n

    def close(self):
        self._raw.close()
        super().close()


def open_records(filename: str, compression: str):
    """A binary file object over the (decompressed) contents of `filename`."""
    if compression == "GZIP":
        return gzip.open(filename, "rb")
    if compression == "ZLIB":
        return io.BufferedReader(_ZlibReader(open(filename, "rb")))
    return open(filename, "rb")


def _read_exactly(f, n: int) -> bytes:
    chunks, left = [], n
    while left:
        chunk = f.read(left)
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def read_records(filename, compression_type=None, op: str = "TFRecordDataset"):
    """Yields the records of one TFRecord file as `bytes`, checking both CRCs of each.

    Raises:
        CorruptRecordError: naming the file, the record's index and its byte offset (in the
            decompressed stream), when a checksum is wrong or the file ends inside a record.
        FileNotFoundError: if the file does not exist.
    """
    filename = os.fspath(filename.decode() if isinstance(filename, bytes) else filename)
    compression = check_compression(compression_type, op)
    offset = index = 0

    def fail(what):
        raise CorruptRecordError(f"{op}: {what} record {index} at byte {offset} of {filename!r}.")

    with open_records(filename, compression) as f:
        while True:
            try:
                header = _read_exactly(f, 12)
                if not header:
                    return
                if len(header) < 12:
                    fail("truncated (the file ends inside the length header of)")
                length, length_crc = struct.unpack("<QI", header)
                if masked_crc32c(header[:8]) != length_crc:
                    hint = " (is this a TFRecord file?)" if index == 0 else ""
                    fail(f"corrupted length checksum{hint} in")
                body = _read_exactly(f, length + 4)
            except (EOFError, OSError, zlib.error) as e:
                raise CorruptRecordError(
                    f"{op}: cannot read record {index} at byte {offset} of {filename!r}: "
                    f"{compression or 'uncompressed'} data is invalid or truncated ({e})."
                ) from e
            if len(body) < length + 4:
                fail(f"truncated (the file ends inside the {length}-byte data of)")
            data = body[:length]
            if masked_crc32c(data) != struct.unpack("<I", body[length:])[0]:
                fail("corrupted data checksum in")
            yield data
            offset += 16 + length
            index += 1


def _filenames(filenames, op: str) -> list[str]:
    if isinstance(filenames, (str, bytes, os.PathLike)):
        filenames = [filenames]
    if isinstance(filenames, np.ndarray):
        filenames = filenames.reshape(-1).tolist()
    if not isinstance(filenames, (list, tuple)) or not filenames:
        raise TypeError(
            f"{op}: `filenames` must be a file name, a non-empty list of them or a Dataset "
            f"of them. Received: {filenames!r}"
        )
    for f in filenames:
        if not isinstance(f, (str, bytes, os.PathLike)):
            raise TypeError(f"{op}: file names must be strings. Received: {f!r}")
    return [os.fspath(f.decode("utf-8") if isinstance(f, bytes) else f) for f in filenames]


class TFRecordDataset(Dataset):
    """The records of one or more TFRecord files, each a `bytes` element (tf.string).

    Map a parsing function over it (`compat.v1`'s `tf.io.parse_single_example`) to get
    tensors. Each record's checksums are verified as it is read.

    Args:
        filenames: a file name, a list of them, or a Dataset of file names.
        compression_type: None or "" (plain), "GZIP" or "ZLIB".
        buffer_size: accepted for compatibility (Python's file buffering is used).
        num_parallel_reads: files read at once, their records interleaved one by one
            (None: one file after the other).
        name: accepted for compatibility.

    Raises:
        CorruptRecordError: while iterating, on a corrupt or truncated file.

    Example:
        >>> ds = keratron.data.TFRecordDataset("train.tfrecord")
        >>> ds = ds.map(lambda record: len(record))
    """

    def __init__(
        self,
        filenames,
        compression_type=None,
        buffer_size=None,
        num_parallel_reads=None,
        name=None,
    ):
        del buffer_size, name
        op = "TFRecordDataset"
        compression = check_compression(compression_type, op)
        files = filenames if isinstance(filenames, Dataset) else _filenames(filenames, op)
        cycle = 1 if num_parallel_reads is None else int(num_parallel_reads)
        if cycle < 1:
            raise ValueError(
                f"{op}: `num_parallel_reads` must be None or a positive int. Received: "
                f"num_parallel_reads={num_parallel_reads!r}"
            )

        def make():
            # tf.data's interleave order: visit the slots in turn, a visit reads one record;
            # a slot whose file is done is emptied and refilled with the next file when next
            # visited.
            names, slots, i, more = iter(files), [None] * cycle, 0, True
            while more or any(slots):
                if slots[i] is None and more:
                    filename = next(names, None)
                    more = filename is not None
                    if more:
                        slots[i] = read_records(filename, compression, op)
                if slots[i] is not None:
                    record = next(slots[i], None)
                    if record is None:
                        slots[i] = None
                    else:
                        yield record
                i = (i + 1) % cycle

        super().__init__(make, TensorSpec((), STRING), UNKNOWN_CARDINALITY, op)
