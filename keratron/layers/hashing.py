"""The Hashing preprocessing layer and the string hashes Keras's lookup layers use.

Keras hashes strings with TensorFlow's `to_hash_bucket_fast` (FarmHash `Fingerprint64`, i.e.
`farmhashna::Hash64`) and, when a `salt` is given, `to_hash_bucket_strong` (SipHash-2-4 keyed
with the two salt integers). Both are written out here over the UTF-8 bytes so that a value
lands in the same bin as in Keras; numbers are hashed as their decimal strings, as Keras does.
These layers run on the host: strings cannot live in tensors, so inputs stay numpy arrays
until the integer result is made a Tensor.
"""

from __future__ import annotations

import struct

import numpy as np

from keratron.autodiff.tensor import Tensor, convert_to_tensor
from keratron.config import floatx
from keratron.layers.layer import Layer
from keratron.layers.node import KerasTensor

__all__ = ["Hashing"]

_M64 = (1 << 64) - 1
_K0 = 0xC3A5C85C97CB3127
_K1 = 0xB492B66FBE98F273
_K2 = 0x9AE16A3B2F90404F


def _f64(s: bytes, i: int) -> int:
    return struct.unpack_from("<Q", s, i)[0]


def _f32(s: bytes, i: int) -> int:
    return struct.unpack_from("<I", s, i)[0]


def _rot(v: int, shift: int) -> int:
    return v if shift == 0 else ((v >> shift) | (v << (64 - shift))) & _M64


def _shift_mix(v: int) -> int:
    return v ^ (v >> 47)


def _hash_len16(u: int, v: int, mul: int) -> int:
    a = ((u ^ v) * mul) & _M64
    a ^= a >> 47
    b = ((v ^ a) * mul) & _M64
    b ^= b >> 47
    return (b * mul) & _M64


def _hash_len0to16(s: bytes) -> int:
    n = len(s)
    if n >= 8:
        mul = _K2 + n * 2
        a = (_f64(s, 0) + _K2) & _M64
        b = _f64(s, n - 8)
        c = (_rot(b, 37) * mul + a) & _M64
        d = ((_rot(a, 25) + b) * mul) & _M64
        return _hash_len16(c, d, mul)
    if n >= 4:
        mul = _K2 + n * 2
        return _hash_len16(n + (_f32(s, 0) << 3), _f32(s, n - 4), mul)
    if n > 0:
        y = (s[0] + (s[n >> 1] << 8)) & 0xFFFFFFFF
        z = (n + (s[n - 1] << 2)) & 0xFFFFFFFF
        return (_shift_mix(((y * _K2) ^ (z * _K0)) & _M64) * _K2) & _M64
    return _K2


def _hash_len17to32(s: bytes) -> int:
    n = len(s)
    mul = _K2 + n * 2
    a = (_f64(s, 0) * _K1) & _M64
    b = _f64(s, 8)
    c = (_f64(s, n - 8) * mul) & _M64
    d = (_f64(s, n - 16) * _K2) & _M64
    return _hash_len16(
        (_rot((a + b) & _M64, 43) + _rot(c, 30) + d) & _M64,
        (a + _rot((b + _K2) & _M64, 18) + c) & _M64,
        mul,
    )


def _hash_len33to64(s: bytes) -> int:
    n = len(s)
    mul = _K2 + n * 2
    a = (_f64(s, 0) * _K2) & _M64
    b = _f64(s, 8)
    c = (_f64(s, n - 8) * mul) & _M64
    d = (_f64(s, n - 16) * _K2) & _M64
    y = (_rot((a + b) & _M64, 43) + _rot(c, 30) + d) & _M64
    z = _hash_len16(y, (a + _rot((b + _K2) & _M64, 18) + c) & _M64, mul)
    e = (_f64(s, 16) * mul) & _M64
    f = _f64(s, 24)
    g = ((y + _f64(s, n - 32)) * mul) & _M64
    h = ((z + _f64(s, n - 24)) * mul) & _M64
    return _hash_len16(
        (_rot((e + f) & _M64, 43) + _rot(g, 30) + h) & _M64,
        (e + _rot((f + a) & _M64, 18) + g) & _M64,
        mul,
    )


def _weak32(s: bytes, i: int, a: int, b: int) -> tuple[int, int]:
    w, x, y, z = _f64(s, i), _f64(s, i + 8), _f64(s, i + 16), _f64(s, i + 24)
    a = (a + w) & _M64
    b = _rot((b + a + z) & _M64, 21)
    c = a
    a = (a + x + y) & _M64
    b = (b + _rot(a, 44)) & _M64
    return (a + z) & _M64, (b + c) & _M64


def fingerprint64(s: bytes) -> int:
    """FarmHash `Fingerprint64` of bytes, as an unsigned 64-bit int (TensorFlow's fingerprint)."""
    n = len(s)
    if n <= 16:
        return _hash_len0to16(s)
    if n <= 32:
        return _hash_len17to32(s)
    if n <= 64:
        return _hash_len33to64(s)
    seed = 81
    x = seed
    y = (seed * _K1 + 113) & _M64
    z = (_shift_mix((y * _K2 + 113) & _M64) * _K2) & _M64
    v0 = v1 = w0 = w1 = 0
    x = (x * _K2 + _f64(s, 0)) & _M64
    end = ((n - 1) // 64) * 64
    last64 = end + ((n - 1) & 63) - 63
    i = 0
    while True:
        x = (_rot((x + y + v0 + _f64(s, i + 8)) & _M64, 37) * _K1) & _M64
        y = (_rot((y + v1 + _f64(s, i + 48)) & _M64, 42) * _K1) & _M64
        x ^= w1
        y = (y + v0 + _f64(s, i + 40)) & _M64
        z = (_rot((z + w0) & _M64, 33) * _K1) & _M64
        v0, v1 = _weak32(s, i, (v1 * _K1) & _M64, (x + w0) & _M64)
        w0, w1 = _weak32(s, i + 32, (z + w1) & _M64, (y + _f64(s, i + 16)) & _M64)
        z, x = x, z
        i += 64
        if i == end:
            break
    mul = _K1 + ((z & 0xFF) << 1)
    i = last64
    w0 = (w0 + ((n - 1) & 63)) & _M64
    v0 = (v0 + w0) & _M64
    w0 = (w0 + v0) & _M64
    x = (_rot((x + y + v0 + _f64(s, i + 8)) & _M64, 37) * mul) & _M64
    y = (_rot((y + v1 + _f64(s, i + 48)) & _M64, 42) * mul) & _M64
    x ^= (w1 * 9) & _M64
    y = (y + v0 * 9 + _f64(s, i + 40)) & _M64
    z = (_rot((z + w0) & _M64, 33) * mul) & _M64
    v0, v1 = _weak32(s, i, (v1 * mul) & _M64, (x + w0) & _M64)
    w0, w1 = _weak32(s, i + 32, (z + w1) & _M64, (y + _f64(s, i + 16)) & _M64)
    z, x = x, z
    return _hash_len16(
        (_hash_len16(v0, w0, mul) + _shift_mix(y) * _K0 + z) & _M64,
        (_hash_len16(v1, w1, mul) + x) & _M64,
        mul,
    )


def siphash24(key: tuple[int, int], s: bytes) -> int:
    """SipHash-2-4 of bytes under a 128-bit key given as two 64-bit ints (TF's strong hash)."""
    k0, k1 = key[0] & _M64, key[1] & _M64
    v = [k0 ^ 0x736F6D6570736575, k1 ^ 0x646F72616E646F6D, k0 ^ 0x6C7967656E657261]
    v.append(k1 ^ 0x7465646279746573)

    def rounds(count):
        for _ in range(count):
            v[0] = (v[0] + v[1]) & _M64
            v[1] = _rot_l(v[1], 13) ^ v[0]
            v[0] = _rot_l(v[0], 32)
            v[2] = (v[2] + v[3]) & _M64
            v[3] = _rot_l(v[3], 16) ^ v[2]
            v[0] = (v[0] + v[3]) & _M64
            v[3] = _rot_l(v[3], 21) ^ v[0]
            v[2] = (v[2] + v[1]) & _M64
            v[1] = _rot_l(v[1], 17) ^ v[2]
            v[2] = _rot_l(v[2], 32)

    n = len(s)
    full = n - n % 8
    for i in range(0, full, 8):
        m = _f64(s, i)
        v[3] ^= m
        rounds(2)
        v[0] ^= m
    m = ((n & 0xFF) << 56) | int.from_bytes(s[full:], "little")
    v[3] ^= m
    rounds(2)
    v[0] ^= m
    v[2] ^= 0xFF
    rounds(4)
    return v[0] ^ v[1] ^ v[2] ^ v[3]


def _rot_l(v: int, shift: int) -> int:
    return ((v << shift) | (v >> (64 - shift))) & _M64


def as_host_array(x) -> np.ndarray:
    """A numpy array of the values of a Tensor, array, list or scalar; bytes become str."""
    if isinstance(x, Tensor):
        return x.numpy()
    a = np.asarray(x)
    if a.dtype.kind == "S":
        return np.char.decode(a, "utf-8").astype(object)
    if a.dtype.kind == "U":
        return a.astype(object)
    if a.dtype == object:
        return np.vectorize(
            lambda v: v.decode("utf-8") if isinstance(v, bytes) else v, otypes=[object]
        )(a)
    return a


def _as_hash_string(value) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    # Keras hashes numbers as tf.as_string of their int64 value.
    return str(int(value)).encode("utf-8")


def hash_to_bins(values: np.ndarray, num_bins: int, salt=None) -> np.ndarray:
    """Bins in [0, num_bins) of each value, as Keras's fast (or, with `salt`, strong) hash."""
    flat = values.reshape(-1)
    uniques, inverse = np.unique(flat, return_inverse=True)
    if salt is None:
        codes = [fingerprint64(_as_hash_string(u)) % num_bins for u in uniques]
    else:
        codes = [siphash24(salt, _as_hash_string(u)) % num_bins for u in uniques]
    return np.asarray(codes, dtype=np.int64)[inverse.reshape(-1)].reshape(values.shape)


def encode_indices(indices: np.ndarray, output_mode: str, depth: int, dtype: str) -> np.ndarray:
    """Keras's `encode_categorical_inputs` on host int indices (out-of-range ones count 0)."""
    if output_mode == "int":
        return indices.astype(dtype)
    if indices.ndim == 0:
        indices = indices[None]
    if output_mode == "one_hot" and indices.ndim > 1 and indices.shape[-1] == 1:
        indices = indices[..., 0]
    if output_mode != "one_hot" and indices.ndim == 1:
        # A rank-1 batch is one sample, as in Keras.
        indices = indices[None]
        squeeze = True
    else:
        squeeze = False
    valid = (indices >= 0) & (indices < depth)
    if output_mode == "one_hot":
        out = np.zeros(indices.shape + (depth,), dtype=dtype)
        np.put_along_axis(out, np.where(valid, indices, 0)[..., None], 1, axis=-1)
        out *= valid[..., None].astype(dtype)
        return out
    rows = indices.reshape(-1, indices.shape[-1])
    rvalid = valid.reshape(rows.shape)
    out = np.zeros((rows.shape[0], depth), dtype="float64")
    for r in range(rows.shape[0]):
        np.add.at(out[r], rows[r][rvalid[r]], 1)
    if output_mode == "multi_hot":
        out = np.minimum(out, 1)
    out = out.reshape(indices.shape[:-1] + (depth,)).astype(dtype)
    return out[0] if squeeze else out


class HostLayer(Layer):
    """A layer that computes on the host: called eagerly on numpy, lists or Tensors.

    Inputs skip the base class's tensor conversion (they may be strings); symbolic calls get
    their output from `compute_output_shape` and `_output_dtype`.
    """

    def __call__(self, inputs, **kwargs):
        if isinstance(inputs, KerasTensor):
            return super().__call__(inputs, **kwargs)
        if not self.built:
            self.built = True
        return self.call(inputs, **kwargs)

    def compute_output_spec(self, inputs, **kwargs):
        return KerasTensor(self.compute_output_shape(inputs.shape), dtype=self._output_dtype())

    def _output_dtype(self) -> str:
        return "int64"


class Hashing(HostLayer):
    """Hashes categorical features (strings or integers) into `num_bins` bins.

    Args:
        num_bins: the number of bins, including the mask bin when `mask_value` is set.
        mask_value: a value that goes to bin 0 (the others hash into bins 1..num_bins-1).
        salt: an int or a pair of ints: use the keyed (strong) hash instead of FarmHash.
        output_mode: "int" (default), "one_hot", "multi_hot" or "count".
        sparse: only False is accepted (keratron has no sparse tensors).

    Example:
        >>> layer = keratron.layers.Hashing(num_bins=3)
        >>> layer(np.array([["A"], ["B"], ["C"]])).numpy().ravel()
        array([1, 0, 1])
    """

    def __init__(
        self, num_bins, mask_value=None, salt=None, output_mode="int", sparse=False, **kwargs
    ):
        if kwargs.get("dtype") is None:
            kwargs["dtype"] = "int64" if output_mode == "int" else floatx()
        kwargs.setdefault("autocast", False)
        super().__init__(**kwargs)
        if num_bins is None or num_bins <= 0:
            raise ValueError(
                "The `num_bins` for `Hashing` cannot be `None` or non-positive values. "
                f"Received: num_bins={num_bins}."
            )
        if output_mode == "int" and self.compute_dtype not in ("int32", "int64"):
            raise ValueError(
                "When `output_mode=\"int\"`, `dtype` should be an integer type, 'int32' or "
                f"'int64'. Received: dtype={kwargs['dtype']}"
            )
        modes = ("int", "one_hot", "multi_hot", "count")
        if output_mode not in modes:
            raise ValueError(
                f"Invalid value for argument `output_mode`. Expected one of {modes}. "
                f"Received: output_mode={output_mode}"
            )
        if sparse:
            raise ValueError("Hashing layer: keratron has no sparse tensors. Received: sparse=True")
        self.num_bins = num_bins
        self.mask_value = mask_value
        self.strong_hash = salt is not None
        self.output_mode = output_mode
        self.sparse = sparse
        self.salt = None
        if salt is not None:
            if isinstance(salt, (tuple, list)) and len(salt) == 2:
                self.salt = list(salt)
            elif isinstance(salt, int):
                self.salt = [salt, salt]
            else:
                raise ValueError(
                    "The `salt` argument for `Hashing` can only be a tuple of size 2 integers, "
                    f"or a single integer. Received: salt={salt}."
                )

    def call(self, inputs):
        values = as_host_array(inputs)
        if values.dtype.kind == "f":
            values = values.astype("int64")
        if self.output_mode == "one_hot" and values.ndim and values.shape[-1] == 1:
            values = values[..., 0]
        bins = self.num_bins
        mask = None
        if self.mask_value is not None and bins > 1:
            bins -= 1
            mask = values == self.mask_value
        indices = hash_to_bins(values, bins, self.salt)
        if mask is not None:
            indices = np.where(mask, 0, indices + 1)
        out = encode_indices(indices, self.output_mode, self.num_bins, self.compute_dtype)
        return convert_to_tensor(out)

    def compute_output_shape(self, input_shape):
        if self.output_mode == "int":
            return tuple(input_shape)
        if len(input_shape) == 0:
            return (self.num_bins,)
        return tuple(input_shape[:-1]) + (self.num_bins,)

    def _output_dtype(self):
        return self.compute_dtype

    def get_config(self):
        return {
            **super().get_config(),
            "num_bins": self.num_bins,
            "salt": self.salt,
            "mask_value": self.mask_value,
            "output_mode": self.output_mode,
            "sparse": self.sparse,
        }
