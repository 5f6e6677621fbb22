"""`tf.train.Example` and its message family, with the protobuf wire format written by hand.

`BytesList`, `FloatList`, `Int64List`, `Feature`, `Features`, `FeatureList`, `FeatureLists`,
`Example` and `SequenceExample` take TensorFlow's constructor arguments and field names
(`tf.train.Feature(float_list=tf.train.FloatList(value=[1.0]))`), and read and write the
bytes TensorFlow's protobuf classes do (tensorflow/core/example/{example,feature}.proto):
packed repeated floats and int64s, map entries in the order of TensorFlow's deterministic
serialization, sub-messages written when set even if empty. Parsing accepts packed and
unpacked repeated numbers and skips unknown fields. Float values are stored as float32, as
protobuf does. No protobuf library is used.

Example:
    >>> ex = Example(features=Features(feature={"x": Feature(int64_list=Int64List(value=[7]))}))
    >>> Example.FromString(ex.SerializeToString()) == ex
    True
"""

from __future__ import annotations

import numbers
import struct
import weakref

import numpy as np

__all__ = [
    "BytesList",
    "DecodeError",
    "Example",
    "Feature",
    "FeatureList",
    "FeatureLists",
    "Features",
    "FloatList",
    "Int64List",
    "SequenceExample",
]

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_MASK64 = 2**64 - 1


class DecodeError(Exception):
    """Bytes that are not a valid serialization of the message (protobuf's `DecodeError`)."""


# ------------------------------------------------------------------------------ wire format
def _varint(value: int) -> bytes:
    value &= _MASK64
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _length_delimited(number: int, body: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(body)) + body


def _read_varint(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= end or shift > 63:
            raise DecodeError("truncated or overlong varint")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result & _MASK64, pos
        shift += 7


def _signed(value: int) -> int:
    return value - 2**64 if value > _INT64_MAX else value


def _fields(buf: bytes, pos: int, end: int):
    """Yields (field number, wire type, value) where value is an int (wire types 0, 1, 5)
    or a (start, end) slice of `buf` (wire type 2)."""
    while pos < end:
        key, pos = _read_varint(buf, pos, end)
        number, wire = key >> 3, key & 7
        if number == 0:
            raise DecodeError("field number 0")
        if wire == 0:
            value, pos = _read_varint(buf, pos, end)
        elif wire == 1 or wire == 5:
            size = 8 if wire == 1 else 4
            if pos + size > end:
                raise DecodeError("truncated fixed-width field")
            value, pos = pos, pos + size
        elif wire == 2:
            size, pos = _read_varint(buf, pos, end)
            if pos + size > end:
                raise DecodeError("length-delimited field past the end")
            value, pos = (pos, pos + size), pos + size
        else:
            raise DecodeError(f"unsupported wire type {wire}")
        yield number, wire, value


# --------------------------------------------------------------------- value conversions
def _to_float(value, owner):
    if isinstance(value, (str, bytes)) or not isinstance(value, numbers.Real):
        raise TypeError(
            f"{owner}.value: expected a real number. Received: {value!r} "
            f"of type {type(value).__name__}"
        )
    return float(np.float32(value))


def _to_int64(value, owner):
    if isinstance(value, (bool, np.bool_)) or not hasattr(value, "__index__"):
        raise TypeError(
            f"{owner}.value: expected an int. Received: {value!r} of type {type(value).__name__}"
        )
    value = int(value)
    if not _INT64_MIN <= value <= _INT64_MAX:
        raise ValueError(f"{owner}.value: value out of the int64 range. Received: {value}")
    return value


def _to_bytes(value, owner):
    if not isinstance(value, (bytes, bytearray, memoryview)):
        raise TypeError(
            f"{owner}.value: expected bytes. Received: {value!r} of type {type(value).__name__}"
        )
    return bytes(value)


def _convert_all(values, convert, owner) -> list:
    if isinstance(values, np.ndarray) and values.dtype.kind in "fiu" and convert is _to_float:
        return values.astype(np.float32).reshape(-1).tolist()
    if isinstance(values, np.ndarray) and values.dtype.kind in "iu" and convert is _to_int64:
        return [_to_int64(v, owner) for v in values.reshape(-1).tolist()]
    return [convert(v, owner) for v in values]


# ----------------------------------------------------------------------------- containers
class _Repeated(list):
    """A repeated scalar field: a list that converts what goes in and tells its message."""

    def __init__(self, convert, owner: str, on_change):
        super().__init__()
        self._convert, self._owner, self._on_change = convert, owner, on_change

    def append(self, value):
        super().append(self._convert(value, self._owner))
        self._on_change()

    def extend(self, values):
        super().extend(_convert_all(values, self._convert, self._owner))
        self._on_change()

    def insert(self, index, value):
        super().insert(index, self._convert(value, self._owner))
        self._on_change()

    def __setitem__(self, index, value):
        if isinstance(index, slice):
            value = _convert_all(value, self._convert, self._owner)
        else:
            value = self._convert(value, self._owner)
        super().__setitem__(index, value)
        self._on_change()

    def __iadd__(self, values):
        self.extend(values)
        return self

    def __reduce__(self):
        return list, (list(self),)


class _RepeatedMessages(list):
    """A repeated message field (`FeatureList.feature`): `add(**fields)` / `append(copy)`."""

    def __init__(self, cls, owner: str, on_change):
        super().__init__()
        self._cls, self._owner, self._on_change = cls, owner, on_change

    def add(self, **fields):
        message = self._cls(**fields)
        message._on_change = self._on_change
        super().append(message)
        self._on_change()
        return message

    def append(self, message):
        self.add().CopyFrom(_as_message(message, self._cls, self._owner))

    def extend(self, messages):
        for message in messages:
            self.append(message)

    def __setitem__(self, index, value):
        raise TypeError(f"{self._owner}: items of a repeated message field cannot be assigned.")


class _MessageMap(dict):
    """A `map<string, Message>` field: reading a missing key inserts an empty message."""

    def __init__(self, cls, owner: str, on_change):
        super().__init__()
        self._cls, self._owner, self._on_change = cls, owner, on_change

    def __missing__(self, key):
        if not isinstance(key, str):
            raise TypeError(
                f"{self._owner}: map keys must be str. Received: {key!r} of type "
                f"{type(key).__name__}"
            )
        message = self._cls()
        message._on_change = self._on_change
        super().__setitem__(key, message)
        self._on_change()
        return message

    def __setitem__(self, key, value):
        raise ValueError(
            f"{self._owner}: map values cannot be assigned; use `m[key].CopyFrom(value)`."
        )

    def __delitem__(self, key):
        super().__delitem__(key)
        self._on_change()

    def get_or_create(self, key):
        return self[key]


def _as_message(value, cls, owner):
    if isinstance(value, dict):
        return cls(**value)
    if type(value) is not cls:
        raise TypeError(
            f"{owner}: expected a {cls.__name__} (or a dict of its fields). Received: "
            f"{value!r} of type {type(value).__name__}"
        )
    return value


# -------------------------------------------------------------------------------- messages
class _ParentLink:
    """Tells a message that a field of it changed (marking `field` present, if given).

    It holds the message weakly, so that a message and its fields form no reference cycle
    and a parsed message is freed as soon as it is dropped, without the cyclic collector.
    """

    __slots__ = ("_ref", "_field")

    def __init__(self, message, field=None):
        self._ref, self._field = weakref.ref(message), field

    def __call__(self):
        message = self._ref()
        if message is not None and self._field:
            message._set_present(self._field)
        elif message is not None:
            message._changed()


class _Message:
    """A protobuf message over a field table of (name, number, kind, type).

    Kinds: "message" (singular, with presence), "messages" (repeated), "map" (string keys),
    and the repeated scalars "bytes", "float", "int64" (packed when written).
    """

    _FULL_NAME = ""
    _FIELDS: tuple = ()
    _ONEOF: tuple = ()  # names of the fields in the message's oneof, if any

    def __init__(self, **fields):
        object.__setattr__(self, "_values", {})
        object.__setattr__(self, "_present", set())
        object.__setattr__(self, "_on_change", None)
        for name, value in fields.items():
            _, _, kind, cls = self._field(name)
            if value is None:
                continue
            if kind == "message":
                getattr(self, name).CopyFrom(_as_message(value, cls, f"{self._name()}.{name}"))
            elif kind == "map":
                target = getattr(self, name)
                for key, item in dict(value).items():
                    target[key].CopyFrom(_as_message(item, cls, f"{self._name()}.{name}"))
            else:
                getattr(self, name).extend(value)

    @classmethod
    def _name(cls) -> str:
        return cls.__name__

    @classmethod
    def _field(cls, name):
        for field in cls._FIELDS:
            if field[0] == name:
                return field
        raise ValueError(f'Protocol message {cls.__name__} has no "{name}" field.')

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            _, _, kind, cls = self._field(name)
        except ValueError:
            raise AttributeError(f"{self._name()} has no attribute {name!r}") from None
        values = self._values
        if name not in values:
            owner = f"{self._name()}.{name}"
            if kind == "message":
                values[name] = cls()
                values[name]._on_change = _ParentLink(self, name)
            elif kind == "messages":
                values[name] = _RepeatedMessages(cls, owner, _ParentLink(self))
            elif kind == "map":
                values[name] = _MessageMap(cls, owner, _ParentLink(self))
            else:
                convert = {"bytes": _to_bytes, "float": _to_float, "int64": _to_int64}[kind]
                values[name] = _Repeated(convert, self._name(), _ParentLink(self))
        return values[name]

    def __setattr__(self, name, value):
        if name == "_on_change":
            object.__setattr__(self, name, value)
            return
        raise AttributeError(
            f"{self._name()}: assignment not allowed to field {name!r} (use CopyFrom on a "
            "message field, extend on a repeated one)."
        )

    def _changed(self):
        if self._on_change is not None:
            self._on_change()

    def _set_present(self, name):
        if name not in self._present:
            if name in self._ONEOF:
                for other in self._ONEOF:
                    if other != name:
                        self._present.discard(other)
                        self._values.pop(other, None)
            self._present.add(name)
        self._changed()

    # ------------------------------------------------------------------- protobuf methods
    def HasField(self, field_name: str) -> bool:
        _, _, kind, _ = self._field(field_name)
        if kind != "message":
            raise ValueError(f'Protocol message {self._name()} has no singular "{field_name}".')
        return field_name in self._present

    def WhichOneof(self, oneof_group: str):
        if oneof_group != "kind" or not self._ONEOF:
            raise ValueError(f'Protocol message has no oneof "{oneof_group}" field.')
        return next((n for n in self._ONEOF if n in self._present), None)

    def ClearField(self, field_name: str):
        self._field(field_name)
        self._values.pop(field_name, None)
        self._present.discard(field_name)
        self._changed()

    def Clear(self):
        self._values.clear()
        self._present.clear()
        self._changed()

    def CopyFrom(self, other):
        if type(other) is not type(self):
            raise TypeError(
                f"Parameter to CopyFrom() must be instance of same class: expected "
                f"{self._name()} got {type(other).__name__}."
            )
        if other is not self:
            self.Clear()
            self.MergeFrom(other)

    def MergeFrom(self, other):
        if type(other) is not type(self):
            raise TypeError(
                f"Parameter to MergeFrom() must be instance of same class: expected "
                f"{self._name()} got {type(other).__name__}."
            )
        self.MergeFromString(other.SerializeToString())

    def SerializeToString(self, deterministic=None) -> bytes:
        """The wire-format bytes (map entries in the order of TF's deterministic serialization)."""
        del deterministic
        out = bytearray()
        for name, number, kind, _ in self._FIELDS:
            value = self._values.get(name)
            if kind == "message":
                if name in self._present:
                    out += _length_delimited(number, value.SerializeToString())
            elif not value:
                continue
            elif kind == "messages":
                for message in value:
                    out += _length_delimited(number, message.SerializeToString())
            elif kind == "map":
                for key in sorted(value, key=_map_order):
                    entry = _length_delimited(1, key.encode("utf-8")) + _length_delimited(
                        2, value[key].SerializeToString()
                    )
                    out += _length_delimited(number, entry)
            elif kind == "bytes":
                for item in value:
                    out += _length_delimited(number, item)
            elif kind == "float":
                out += _length_delimited(number, np.asarray(value, "<f4").tobytes())
            else:
                out += _length_delimited(number, b"".join(_varint(v) for v in value))
        return bytes(out)

    def ByteSize(self) -> int:
        return len(self.SerializeToString())

    def ParseFromString(self, serialized) -> int:
        """Replaces the contents with the message in `serialized`; returns its length."""
        self.Clear()
        return self.MergeFromString(serialized)

    def MergeFromString(self, serialized) -> int:
        buf = bytes(serialized)
        try:
            self._merge(buf, 0, len(buf))
        except DecodeError as e:
            raise DecodeError(f"Error parsing message with type '{self._FULL_NAME}': {e}") from None
        return len(buf)

    @classmethod
    def FromString(cls, serialized):
        message = cls()
        message.MergeFromString(serialized)
        return message

    def _merge(self, buf: bytes, pos: int, end: int):
        table = {number: (name, kind, cls) for name, number, kind, cls in self._FIELDS}
        for number, wire, value in _fields(buf, pos, end):
            if number not in table:
                continue  # unknown fields are skipped
            name, kind, cls = table[number]
            expected = {"float": (2, 5), "int64": (2, 0)}.get(kind, (2,))
            if wire not in expected:
                raise DecodeError(f"field {name!r} has wire type {wire}")
            target = getattr(self, name)
            if kind == "message":
                target._merge(buf, *value)
                self._set_present(name)
            elif kind == "messages":
                target.add()._merge(buf, *value)
            elif kind == "map":
                key, item = "", cls()
                for n, w, v in _fields(buf, *value):
                    if n == 1 and w == 2:
                        try:
                            key = buf[v[0] : v[1]].decode("utf-8")
                        except UnicodeDecodeError:
                            raise DecodeError(f"map key of {name!r} is not UTF-8") from None
                    elif n == 2 and w == 2:
                        item._merge(buf, *v)
                item._on_change = target._on_change
                dict.__setitem__(target, key, item)  # a repeated key replaces the earlier entry
                self._changed()
            elif kind == "bytes":
                list.append(target, buf[value[0] : value[1]])
                self._changed()
            elif kind == "float":
                if wire == 5:
                    list.append(target, struct.unpack_from("<f", buf, value)[0])
                else:
                    start, stop = value
                    if (stop - start) % 4:
                        raise DecodeError(f"packed field {name!r} is not a multiple of 4 bytes")
                    list.extend(
                        target, np.frombuffer(buf, "<f4", (stop - start) // 4, start).tolist()
                    )
                self._changed()
            else:
                if wire == 0:
                    list.append(target, _signed(value))
                else:
                    p, stop = value
                    while p < stop:
                        v, p = _read_varint(buf, p, stop)
                        list.append(target, _signed(v))
                self._changed()

    # ---------------------------------------------------------------------- Python protocol
    def __eq__(self, other):
        if type(other) is not type(self):
            return NotImplemented
        return self.SerializeToString() == other.SerializeToString()

    __hash__ = None

    def __reduce__(self):
        return type(self).FromString, (self.SerializeToString(),)

    def __deepcopy__(self, memo):
        return type(self).FromString(self.SerializeToString())

    def __str__(self):
        return "".join(self._text(""))

    __repr__ = __str__

    def _text(self, indent: str):
        inner = indent + "  "
        for name, _, kind, _ in self._FIELDS:
            value = self._values.get(name)
            if kind == "message":
                if name in self._present:
                    yield f"{indent}{name} {{\n"
                    yield from value._text(inner)
                    yield f"{indent}}}\n"
            elif not value:
                continue
            elif kind == "messages":
                for message in value:
                    yield f"{indent}{name} {{\n"
                    yield from message._text(inner)
                    yield f"{indent}}}\n"
            elif kind == "map":
                for key in sorted(value, key=_map_order):
                    yield f'{indent}{name} {{\n{inner}key: "{_escape(key.encode())}"\n'
                    yield f"{inner}value {{\n"
                    yield from value[key]._text(inner + "  ")
                    yield f"{inner}}}\n{indent}}}\n"
            else:
                for item in value:
                    yield f"{indent}{name}: {_text_scalar(item, kind)}\n"


def _map_order(key: str) -> bytes:
    # The order of TensorFlow's `SerializeToString(deterministic=True)` (upb): bytewise, but a
    # key sorts after the keys it is a prefix of ("aa" before "a", "" last). 0xFF never
    # occurs in UTF-8, so appending it gives that order.
    return key.encode("utf-8") + b"\xff"


def _escape(data: bytes) -> str:
    special = {10: "\\n", 13: "\\r", 9: "\\t", 34: '\\"', 39: "\\'", 92: "\\\\"}
    return "".join(special.get(b) or (chr(b) if 32 <= b < 127 else f"\\{b:03o}") for b in data)


def _text_scalar(value, kind: str) -> str:
    if kind == "bytes":
        return f'"{_escape(value)}"'
    if kind == "float":
        # The shortest of 6 or 9 significant digits that reads back as the same float32.
        text = f"{value:.6g}"
        return text if np.float32(text) == np.float32(value) else f"{value:.9g}"
    return str(value)


# ----------------------------------------------------------------------- the Example family
class BytesList(_Message):
    """`tf.train.BytesList(value=[b"...", ...])`: a list of byte strings."""

    _FULL_NAME = "tensorflow.BytesList"
    _FIELDS = (("value", 1, "bytes", None),)


class FloatList(_Message):
    """`tf.train.FloatList(value=[...])`: a list of float32 values (packed on the wire)."""

    _FULL_NAME = "tensorflow.FloatList"
    _FIELDS = (("value", 1, "float", None),)


class Int64List(_Message):
    """`tf.train.Int64List(value=[...])`: a list of int64 values (packed varints)."""

    _FULL_NAME = "tensorflow.Int64List"
    _FIELDS = (("value", 1, "int64", None),)


class Feature(_Message):
    """`tf.train.Feature`: one of `bytes_list`, `float_list` or `int64_list` (the oneof
    `kind`; setting one clears the others)."""

    _FULL_NAME = "tensorflow.Feature"
    _FIELDS = (
        ("bytes_list", 1, "message", BytesList),
        ("float_list", 2, "message", FloatList),
        ("int64_list", 3, "message", Int64List),
    )
    _ONEOF = ("bytes_list", "float_list", "int64_list")


class Features(_Message):
    """`tf.train.Features(feature={name: Feature})`."""

    _FULL_NAME = "tensorflow.Features"
    _FIELDS = (("feature", 1, "map", Feature),)


class FeatureList(_Message):
    """`tf.train.FeatureList(feature=[Feature, ...])`: one feature per time step."""

    _FULL_NAME = "tensorflow.FeatureList"
    _FIELDS = (("feature", 1, "messages", Feature),)


class FeatureLists(_Message):
    """`tf.train.FeatureLists(feature_list={name: FeatureList})`."""

    _FULL_NAME = "tensorflow.FeatureLists"
    _FIELDS = (("feature_list", 1, "map", FeatureList),)


class Example(_Message):
    """`tf.train.Example(features=Features(...))`: the record of a TFRecord input pipeline.

    Example:
        >>> ex = Example()
        >>> ex.features.feature["x"].float_list.value.extend([1.0, 2.0])
        >>> ex.SerializeToString().hex()
        '0a130a110a0178120c120a0a080000803f00000040'
    """

    _FULL_NAME = "tensorflow.Example"
    _FIELDS = (("features", 1, "message", Features),)


class SequenceExample(_Message):
    """`tf.train.SequenceExample(context=Features(...), feature_lists=FeatureLists(...))`."""

    _FULL_NAME = "tensorflow.SequenceExample"
    _FIELDS = (
        ("context", 1, "message", Features),
        ("feature_lists", 2, "message", FeatureLists),
    )
