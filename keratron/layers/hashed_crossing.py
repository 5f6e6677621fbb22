"""HashedCrossing (Keras's `layers/preprocessing/hashed_crossing`): crosses categorical
features by hashing each combination into `num_bins` bins, bit for bit as TensorFlow's
`tf.sparse.cross_hashed` (which Keras runs): integer features enter as their int64 value,
strings through FarmHash Fingerprint64, and the per-feature hashes are chained with
`FingerprintCat64` from the key 0xDECAFCAFFE."""

from __future__ import annotations

import numpy as np

from keratron.autodiff.tensor import convert_to_tensor
from keratron.config import floatx
from keratron.layers.hashing import HostLayer, as_host_array, encode_indices, fingerprint64
from keratron.layers.layer import who as _who
from keratron.layers.node import KerasTensor

__all__ = ["HashedCrossing"]

_M64 = (1 << 64) - 1
_K_MUL = 0xC6A4A7935BD1E995
_DEFAULT_HASH_KEY = 0xDECAFCAFFE


def _shift_mix(v: int) -> int:
    return v ^ (v >> 47)


def fingerprint_cat64(fp1: int, fp2: int) -> int:
    """TensorFlow's `FingerprintCat64`: combines two 64-bit fingerprints."""
    result = fp1 ^ _K_MUL
    result ^= (_shift_mix((fp2 * _K_MUL) & _M64) * _K_MUL) & _M64
    result = (result * _K_MUL) & _M64
    result = (_shift_mix(result) * _K_MUL) & _M64
    return _shift_mix(result)


def _feature_hash(value) -> int:
    if isinstance(value, bytes):
        return fingerprint64(value)
    if isinstance(value, str):
        return fingerprint64(value.encode("utf-8"))
    return int(value) & _M64  # an int64 feature is its own hash (two's complement)


def cross_hashed(columns: list[np.ndarray], num_bins: int) -> np.ndarray:
    """Bins of the crosses of equally long 1D feature columns (one feature per row each)."""
    out = np.empty(len(columns[0]), dtype=np.int64)
    for row in range(len(out)):
        h = _DEFAULT_HASH_KEY
        for col in columns:
            h = fingerprint_cat64(h, _feature_hash(col[row]))
        out[row] = h % num_bins
    return out


class HashedCrossing(HostLayer):
    """Crosses two or more categorical features (ints or strings) into hashed bins.

    Args:
        num_bins: number of hash bins.
        output_mode: "int" (bin indices) or "one_hot".
        sparse: only False is accepted (keratron has no sparse tensors).
        name, dtype: as any layer (dtype defaults to "int64" for "int" output).

    Call arguments:
        inputs: a list or tuple of at least two equally shaped inputs, each a scalar,
            `(batch,)` or `(batch, 1)`, of an integer or string dtype.

    Example:
        >>> layer = keratron.layers.HashedCrossing(num_bins=5)
        >>> layer((np.array([1, 2]), np.array(["a", "b"]))).shape
        (2,)
    """

    def __init__(self, num_bins, output_mode="int", sparse=False, name=None, dtype=None, **kwargs):
        who = _who("HashedCrossing", {"name": name})
        if (
            isinstance(num_bins, bool)
            or not isinstance(num_bins, (int, np.integer))
            or (num_bins <= 0)
        ):
            raise ValueError(
                f"{who}: argument `num_bins` must be a positive integer. Received: "
                f"num_bins={num_bins!r}"
            )
        if output_mode not in ("int", "one_hot"):
            raise ValueError(
                f"{who}: argument `output_mode` must be 'int' or 'one_hot'. Received: "
                f"output_mode={output_mode!r}"
            )
        if sparse:
            raise ValueError(f"{who}: keratron has no sparse tensors. Received: sparse=True")
        if dtype is None:
            dtype = "int64" if output_mode == "int" else floatx()
        kwargs.setdefault("autocast", False)
        super().__init__(name=name, dtype=dtype, **kwargs)
        self.num_bins = int(num_bins)
        self.output_mode = output_mode
        self.sparse = sparse

    def __call__(self, inputs, **kwargs):
        if isinstance(inputs, (list, tuple)) and any(isinstance(x, KerasTensor) for x in inputs):
            return super(HostLayer, self).__call__(list(inputs), **kwargs)
        return super().__call__(inputs, **kwargs)

    def _check_inputs(self, shapes, dtypes=None):
        if len(shapes) < 2:
            raise ValueError(
                f"Layer '{self.name}' (HashedCrossing) must be called on a list or tuple of at "
                f"least two inputs. Received: {len(shapes)} input(s)"
            )
        first = tuple(shapes[0])
        if len(first) > 2 or (len(first) == 2 and first[-1] != 1):
            raise ValueError(
                f"Layer '{self.name}' (HashedCrossing): every input must have shape (), "
                f"(batch_size,) or (batch_size, 1). Received: shapes={[tuple(s) for s in shapes]}"
            )
        if any(tuple(s) != first for s in shapes[1:]):
            raise ValueError(
                f"Layer '{self.name}' (HashedCrossing): all inputs must have the same shape. "
                f"Received: shapes={[tuple(s) for s in shapes]}"
            )
        for d in dtypes or ():
            if d.kind not in "iuOSU":
                raise ValueError(
                    f"Layer '{self.name}' (HashedCrossing): inputs must have an integer or "
                    f"string dtype. Received: dtype={d}"
                )

    def call(self, inputs):
        if not isinstance(inputs, (list, tuple)):
            raise ValueError(
                f"Layer '{self.name}' (HashedCrossing) must be called on a list or tuple of "
                f"inputs. Received: {type(inputs).__name__}"
            )
        arrays = [as_host_array(x) for x in inputs]
        self._check_inputs([a.shape for a in arrays], [a.dtype for a in arrays])
        shape = arrays[0].shape
        columns = [a.reshape(-1) for a in arrays]
        bins = cross_hashed(columns, self.num_bins).reshape(shape)
        out = encode_indices(bins, self.output_mode, self.num_bins, self.compute_dtype)
        return convert_to_tensor(out)

    def compute_output_shape(self, input_shape):
        self._check_inputs(list(input_shape))
        first = tuple(input_shape[0])
        if self.output_mode == "int":
            return first
        if len(first) == 2:
            return first[:-1] + (self.num_bins,)
        return first + (self.num_bins,)

    def compute_output_spec(self, inputs, **kwargs):
        shape = self.compute_output_shape([x.shape for x in inputs])
        return KerasTensor(shape, dtype=self._output_dtype())

    def _output_dtype(self):
        return self.compute_dtype

    def get_config(self):
        return {
            "num_bins": self.num_bins,
            "output_mode": self.output_mode,
            "sparse": self.sparse,
            "name": self.name,
            "dtype": self.dtype,
        }
