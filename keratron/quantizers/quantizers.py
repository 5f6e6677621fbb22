"""Quantizers and quantization functions, as `keras.quantizers` has them.

Int8 / int4 weight quantization (`abs_max_quantize`, its grouped zero-point form, nibble packing),
fake quantization for quantization-aware training (`fake_quant_with_min_max_vars`, whose
gradient is TensorFlow's straight-through estimator) and the float8 scaling helpers. Everything
is written with `keratron.ops`; gradients come from keratron's autodiff, so they also hold in
traced steps.
"""

from __future__ import annotations

import math

import numpy as np

from keratron import config, ops
from keratron.autodiff.dtypes import standardize_dtype

__all__ = [
    "Quantizer",
    "AbsMaxQuantizer",
    "abs_max_quantize",
    "abs_max_quantize_grouped_with_zero_point",
    "compute_quantization_parameters",
    "fake_quant_with_min_max_vars",
    "compute_float8_scale",
    "compute_float8_amax_history",
    "quantize_and_dequantize",
    "pack_int4",
    "unpack_int4",
]

# Keras reads its epsilon default once, when the module loads.
_EPSILON = config.epsilon()


class Quantizer:
    """Base class of quantizers: `quantizer(x)` returns the quantized `x`.

    Args:
        output_dtype: dtype of the quantized values.

    Example:
        >>> keratron.quantizers.Quantizer()(np.ones(2)).tolist()
        [1.0, 1.0]
    """

    def __init__(self, output_dtype="int8"):
        self.output_dtype = output_dtype

    def __call__(self, x):
        """The quantized input (the base class returns `x` as it is)."""
        return x

    @classmethod
    def from_config(cls, config):
        """A quantizer from the dict `get_config` returned."""
        return cls(**config)

    def get_config(self):
        """The quantizer's constructor arguments, as a dict; subclasses define it."""
        raise NotImplementedError(f"{self} does not implement get_config()")


def _numpy_axis(axis):
    return tuple(axis) if isinstance(axis, list) else axis


def abs_max_quantize(
    inputs,
    axis,
    value_range=(-127, 127),
    dtype="int8",
    epsilon=_EPSILON,
    to_numpy=False,
):
    """Symmetric quantization by the absolute maximum along `axis`.

    `scale = value_range[1] / (max|inputs| + epsilon)`, reduced over `axis` with kept dims, and
    `outputs = clip(round(inputs * scale), *value_range)` cast to `dtype`.

    Args:
        inputs: tensor to quantize.
        axis: axis or axes the maximum is taken over.
        value_range: `(min, max)` of the quantized values.
        dtype: dtype of the quantized output.
        epsilon: added to the maximum, so that an all-zero slice does not divide by zero.
        to_numpy: compute on the host in numpy (saves device memory).

    Returns:
        `(quantized, scale)`; `scale` has the inputs' dtype.

    Example:
        >>> q, scale = keratron.quantizers.abs_max_quantize(np.array([[0.5, -1.0]]), axis=-1)
        >>> q.numpy().tolist()
        [[63, -127]]
    """
    if to_numpy:
        original_dtype = standardize_dtype(inputs.dtype)
        inputs = ops.convert_to_numpy(inputs)
        axis = _numpy_axis(axis)
        scale = np.divide(
            value_range[1], np.add(np.max(np.abs(inputs), axis=axis, keepdims=True), epsilon)
        )
        outputs = np.clip(np.round(np.multiply(inputs, scale)), value_range[0], value_range[1])
        outputs = outputs.astype(dtype)
        return ops.convert_to_tensor(outputs), ops.convert_to_tensor(scale, dtype=original_dtype)

    inputs = ops.convert_to_tensor(inputs)
    scale = ops.divide(
        value_range[1], ops.add(ops.max(ops.abs(inputs), axis=axis, keepdims=True), epsilon)
    )
    scale = ops.cast(scale, inputs.dtype)
    outputs = ops.clip(ops.round(ops.multiply(inputs, scale)), value_range[0], value_range[1])
    return ops.cast(outputs, dtype), scale


def abs_max_quantize_grouped_with_zero_point(
    inputs,
    block_size,
    value_range=(-8, 7),
    dtype="int8",
    epsilon=_EPSILON,
    to_numpy=False,
):
    """Asymmetric quantization of a 2D tensor in groups of `block_size` rows, with zero points.

    Each group of `block_size` rows along axis 0 (the last group zero-padded) gets one scale
    and one zero point per column: `q = clip(round(x / scale) + zero_point, *value_range)`.

    Args:
        inputs: tensor of shape `(input_dim, output_dim)`.
        block_size: rows per group.
        value_range: `(min, max)` of the quantized values; its width sets the bit count.
        dtype: dtype of the quantized output.
        epsilon: added to each group's `max - min`.
        to_numpy: compute on the host in numpy (saves device memory). As in Keras, this path
            leaves out the tensor path's handling of constant groups.

    Returns:
        `(quantized, scale, zero_point)`: `quantized` has the inputs' shape; `scale` (the
        inputs' dtype) and `zero_point` (int8) have shape `(ceil(input_dim / block_size),
        output_dim)`.

    Raises:
        ValueError: if `inputs` is not 2D.

    Example:
        >>> q, scale, zero = keratron.quantizers.abs_max_quantize_grouped_with_zero_point(
        ...     np.ones((5, 3), "float32"), block_size=2)
        >>> tuple(scale.shape), tuple(zero.shape)
        ((3, 3), (3, 3))
    """
    if len(inputs.shape) != 2:
        raise ValueError(
            "abs_max_quantize_grouped_with_zero_point: `inputs` must be 2D (input_dim, "
            f"output_dim). Received: inputs.shape={tuple(inputs.shape)}"
        )
    if to_numpy:
        return _grouped_with_zero_point_numpy(inputs, block_size, value_range, dtype, epsilon)
    return _grouped_with_zero_point_tensor(inputs, block_size, value_range, dtype, epsilon)


def _grouped_with_zero_point_numpy(inputs, block_size, value_range, dtype, epsilon):
    original_dtype = standardize_dtype(inputs.dtype)
    inputs = ops.convert_to_numpy(inputs)
    input_dim, output_dim = inputs.shape
    n_groups = math.ceil(input_dim / block_size)
    qmin, qmax = value_range
    padded_dim = n_groups * block_size
    padding = np.zeros((padded_dim - input_dim, output_dim), dtype=inputs.dtype)
    grouped = np.concatenate([inputs, padding], axis=0).reshape(n_groups, block_size, output_dim)

    min_val = np.min(grouped, axis=1, keepdims=True)
    max_val = np.max(grouped, axis=1, keepdims=True)
    scale = np.divide(np.subtract(max_val, min_val) + epsilon, qmax - qmin)
    zero_point = np.clip(np.round(np.divide(-min_val, scale)) + qmin, qmin, qmax)
    outputs = np.clip(np.round(np.divide(grouped, scale)) + zero_point, qmin, qmax).astype(dtype)

    outputs = outputs.reshape(padded_dim, output_dim)[:input_dim, :]
    scale = np.squeeze(scale, axis=1)
    zero_point = np.squeeze(zero_point, axis=1).astype("int8")
    return (
        ops.convert_to_tensor(outputs),
        ops.convert_to_tensor(scale, dtype=original_dtype),
        ops.convert_to_tensor(zero_point),
    )


def _grouped_with_zero_point_tensor(inputs, block_size, value_range, dtype, epsilon):
    original_dtype = standardize_dtype(inputs.dtype)
    inputs = ops.convert_to_tensor(inputs)
    input_dim, output_dim = (int(d) for d in inputs.shape)
    qmin, qmax = value_range
    bits = int(math.log2(qmax - qmin + 1))
    n_groups = math.ceil(input_dim / block_size)
    padded_dim = n_groups * block_size

    scale_t, zero_t, _ = compute_quantization_parameters(
        ops.transpose(inputs),
        bits=bits,
        symmetric=False,
        per_channel=True,
        group_size=block_size,
        compute_dtype=original_dtype,
        epsilon=epsilon,
        signed=True,
    )
    scale, zero_point = ops.transpose(scale_t), ops.transpose(zero_t)

    if padded_dim > input_dim:
        padding = ops.zeros((padded_dim - input_dim, output_dim), dtype=inputs.dtype)
        inputs = ops.concatenate([inputs, padding], axis=0)
    grouped = ops.reshape(inputs, (n_groups, block_size, output_dim))
    outputs = ops.add(
        ops.round(ops.divide(grouped, ops.expand_dims(scale, 1))), ops.expand_dims(zero_point, 1)
    )
    outputs = ops.cast(ops.clip(outputs, qmin, qmax), dtype)
    outputs = ops.reshape(outputs, (padded_dim, output_dim))[:input_dim, :]
    return outputs, scale, zero_point


def compute_quantization_parameters(
    x,
    *,
    bits,
    symmetric=False,
    per_channel=False,
    group_size=-1,
    compute_dtype="float32",
    epsilon=0.0,
    signed=False,
):
    """Scale and zero point that quantize a weight of shape `(out_features, in_features)`.

    Per tensor, per row (`per_channel`), or per row and group of `group_size` columns; the
    zero point is in `[-2**(bits-1), 2**(bits-1) - 1]` (int8) when `signed`, else in
    `[0, 2**bits - 1]` (uint8). A constant slice is widened to `[v - 1, v + 1]`.

    Returns:
        `(scale, zero, maxq)`: `scale` and `zero` of shape `(out_features, n_groups)` (one
        group unless grouped), and `maxq = 2**bits - 1` in `compute_dtype`.

    Raises:
        ValueError: if `x` is None, not at least 2D, or empty.
    """
    if x is None:
        raise ValueError("compute_quantization_parameters: the input tensor `x` is None.")
    if len(x.shape) < 2:
        raise ValueError(
            "compute_quantization_parameters: `x` must have rank 2 or more. "
            f"Received: x.shape={tuple(x.shape)}"
        )
    if math.prod(x.shape) == 0:
        raise ValueError("compute_quantization_parameters: `x` is empty.")
    x = ops.convert_to_tensor(x)
    out_features, in_features = int(x.shape[0]), int(x.shape[1])
    n_groups = -(-in_features // group_size) if per_channel and group_size > 0 else 1

    if n_groups > 1:
        pad = n_groups * group_size - in_features
        if pad:
            x = ops.pad(x, [[0, 0], [0, pad]], constant_values=0.0)
        grouped = ops.reshape(x, (out_features, n_groups, group_size))
        min_values, max_values = ops.min(grouped, axis=2), ops.max(grouped, axis=2)
    else:
        flat = ops.reshape(x, (out_features, -1) if per_channel else (1, -1))
        min_values, max_values = ops.min(flat, axis=1), ops.max(flat, axis=1)

    if symmetric:
        max_abs = ops.maximum(ops.abs(min_values), max_values)
        min_values = ops.where(ops.less(min_values, 0), ops.negative(max_abs), min_values)
        max_values = max_abs
    zero_range = ops.equal(min_values, max_values)
    min_values = ops.where(zero_range, ops.subtract(min_values, 1), min_values)
    max_values = ops.where(zero_range, ops.add(max_values, 1), max_values)

    maxq = ops.cast(2**bits - 1, compute_dtype)
    range_values = ops.subtract(max_values, min_values)
    if epsilon > 0:
        range_values = ops.add(range_values, epsilon)
    scale = ops.divide(range_values, maxq)
    scale = ops.where(ops.less_equal(scale, 0), 1e-8, scale)

    midpoint = (2**bits) / 2
    if signed:
        qmin, qmax = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
        if symmetric:
            zero = ops.full_like(scale, midpoint + qmin)
        else:
            zero = ops.add(ops.round(ops.divide(ops.negative(min_values), scale)), qmin)
        zero = ops.clip(zero, qmin, qmax)
    elif symmetric:
        zero = ops.full_like(scale, midpoint)
    else:
        zero = ops.round(ops.divide(ops.negative(min_values), scale))

    if n_groups == 1 and per_channel:
        scale, zero = ops.reshape(scale, (-1, 1)), ops.reshape(zero, (-1, 1))
    elif n_groups == 1:
        scale = ops.tile(ops.reshape(scale, (1, 1)), (out_features, 1))
        zero = ops.tile(ops.reshape(zero, (1, 1)), (out_features, 1))
    return scale, ops.cast(zero, "int8" if signed else "uint8"), maxq


class AbsMaxQuantizer(Quantizer):
    """Quantizer by the absolute maximum (`abs_max_quantize`).

    Args:
        axis: deprecated; the axis given to `__call__` (default -1) is preferred.
        value_range: `(min, max)` of the quantized values.
        epsilon: added to the maximum.
        output_dtype: dtype of the quantized values.

    Raises:
        ValueError: if `output_dtype="int8"` and `value_range` leaves `[-128, 127]`.

    Example:
        >>> q, scale = keratron.quantizers.AbsMaxQuantizer()(np.array([[2.0, -1.0]]))
        >>> q.numpy().tolist()
        [[127, -63]]
    """

    def __init__(
        self,
        axis=None,
        value_range=(-127, 127),
        epsilon=_EPSILON,
        output_dtype="int8",
    ):
        Quantizer.__init__(self, output_dtype=output_dtype)
        if axis is not None:
            axis = (axis,) if isinstance(axis, int) else tuple(axis)
        self.axis = axis
        self.value_range = value_range
        self.epsilon = epsilon
        if output_dtype == "int8" and (value_range[0] < -128 or value_range[1] > 127):
            raise ValueError(
                "AbsMaxQuantizer: output_dtype='int8' requires `value_range` within "
                f"[-128, 127]. Received: value_range={value_range}"
            )

    def __call__(self, x, axis=None, to_numpy=False):
        """`(quantized, scale)` of `x`, reduced over `axis` (else the constructor's, else -1)."""
        if axis is None:
            axis = self.axis if self.axis is not None else -1
        return abs_max_quantize(
            x, axis, self.value_range, self.output_dtype, self.epsilon, to_numpy
        )

    @classmethod
    def from_config(cls, config):
        # A config read from JSON holds lists: the range is a tuple again, as written. (Keras
        # keeps the list, and then refuses it in an Int4QuantizationConfig.)
        config = dict(config)
        if isinstance(config.get("value_range"), list):
            config["value_range"] = tuple(config["value_range"])
        return cls(**config)

    def get_config(self):
        config = {
            "value_range": self.value_range,
            "epsilon": self.epsilon,
            "output_dtype": self.output_dtype,
        }
        if self.axis is not None:
            config["axis"] = self.axis
        return config


# ----------------------------------------------------------------------------- fake quantization
def _adjust_and_nudge(min_range, max_range, num_bits, narrow_range):
    """TensorFlow's nudged range: `[min, max]` moved so that 0.0 is exactly representable."""
    compute_dtype = "float64" if min_range.dtype == "float64" else "float32"
    min_range = ops.cast(min_range, compute_dtype)
    max_range = ops.cast(max_range, compute_dtype)
    quant_max = (1 << num_bits) - 1
    quant_min = 1 if narrow_range else 0
    diff_range = ops.subtract(max_range, min_range)
    scale = ops.divide(diff_range, quant_max - quant_min)
    # The inverse from the range itself, not 1 / scale: one rounding less.
    inv_scale = ops.divide(quant_max - quant_min, diff_range)
    zero_point = ops.subtract(quant_min, ops.divide(min_range, scale))
    zero_point = ops.clip(zero_point, quant_min, quant_max)
    nudged_zero_point = ops.round(zero_point)
    nudged_min = ops.multiply(ops.subtract(quant_min, nudged_zero_point), scale)
    nudged_max = ops.multiply(ops.subtract(quant_max, nudged_zero_point), scale)
    return nudged_min, nudged_max, scale, inv_scale


def _zero_with_gradient(t):
    """An exact zero whose gradient is that of `t` (`t - t` is 0.0 for every finite `t`)."""
    return ops.subtract(t, ops.stop_gradient(t))


def fake_quant_with_min_max_vars(
    inputs,
    min_vals,
    max_vals,
    num_bits=8,
    narrow_range=False,
    axis=None,
):
    """Per-tensor or per-channel fake quantization (quantize, then dequantize).

    `inputs` are clamped to the nudged `[min_vals, max_vals]` (moved so that 0.0 is a
    quantization level), quantized to `[0, 2**num_bits - 1]` (`[1, ...]` with `narrow_range`)
    and dequantized. The gradient is TensorFlow's straight-through estimator: the upstream
    gradient passes to `inputs` inside the nudged range, and the clamped parts go to
    `min_vals` / `max_vals`, so the range can be trained.

    Args:
        inputs: float tensor.
        min_vals: scalar minimum, or one per channel.
        max_vals: scalar maximum, or one per channel.
        num_bits: bit width (8 for int8).
        narrow_range: leave out the lowest quantization level.
        axis: channel axis of a per-channel quantization (any axis, as Keras's TensorFlow
            backend allows); None quantizes per tensor.

    Returns:
        A tensor of the inputs' shape and dtype.

    Raises:
        ValueError: if per-channel `min_vals` / `max_vals` do not hold one value per channel.

    Example:
        >>> x = np.array([-0.3, 0.1, 0.7], "float32")
        >>> y = keratron.quantizers.fake_quant_with_min_max_vars(x, -0.5, 0.5, num_bits=2)
        >>> y.numpy().tolist()
        [-0.3333333432674408, 0.0, 0.3333333432674408]
    """
    inputs = ops.convert_to_tensor(inputs)
    min_vals = ops.convert_to_tensor(min_vals)
    max_vals = ops.convert_to_tensor(max_vals)
    num_bits = int(num_bits)
    dtype = inputs.dtype
    rank = len(inputs.shape)

    nudged_min, nudged_max, scale, inv_scale = _adjust_and_nudge(
        ops.stop_gradient(min_vals), ops.stop_gradient(max_vals), num_bits, narrow_range
    )
    lo, hi = min_vals, max_vals
    if axis is not None:
        axis = axis + rank if axis < 0 else axis
        if not 0 <= axis < rank:
            raise ValueError(
                f"fake_quant_with_min_max_vars: `axis` must be in [-{rank}, {rank}) for inputs "
                f"of rank {rank}. Received: axis={axis}"
            )
        channels = int(inputs.shape[axis])
        for name, v in (("min_vals", min_vals), ("max_vals", max_vals)):
            if math.prod(v.shape) != channels:
                raise ValueError(
                    f"fake_quant_with_min_max_vars: per-channel `{name}` must hold one value "
                    f"per channel of axis {axis} ({channels}). Received: {name}.shape="
                    f"{tuple(v.shape)}"
                )
        # The channel values line up with `axis` (Keras's torch path only lines them up with
        # the last axis; its TensorFlow path, as here, with any).
        shape = [1] * rank
        shape[axis] = channels
        nudged_min, nudged_max, scale, inv_scale, lo, hi = (
            ops.reshape(t, shape) for t in (nudged_min, nudged_max, scale, inv_scale, lo, hi)
        )

    quant_zero = ops.floor(ops.add(ops.multiply(ops.negative(nudged_min), inv_scale), 0.5))
    clamped = ops.cast(ops.stop_gradient(inputs), nudged_min.dtype)
    clamped = ops.clip(clamped, nudged_min, nudged_max)
    levels = ops.floor(
        ops.add(
            ops.subtract(ops.multiply(ops.subtract(clamped, nudged_min), inv_scale), quant_zero),
            0.5,
        )
    )
    result = ops.stop_gradient(ops.cast(ops.multiply(levels, scale), dtype))

    # Straight-through gradients, as exact zeros added to the result (so they hold in traced
    # steps and under higher-order differentiation too).
    inside = ops.logical_and(
        ops.greater_equal(inputs, nudged_min), ops.less_equal(inputs, nudged_max)
    )
    below = ops.less_equal(inputs, nudged_min)
    above = ops.greater_equal(inputs, nudged_max)
    to_inputs = ops.where(inside, inputs, ops.zeros_like(inputs))
    to_range = ops.add(
        ops.where(below, lo, ops.zeros_like(lo)), ops.where(above, hi, ops.zeros_like(hi))
    )
    return ops.add(
        ops.add(result, _zero_with_gradient(to_inputs)),
        ops.cast(_zero_with_gradient(to_range), dtype),
    )


# ---------------------------------------------------------------------------------------- float8
# Float8 formats: (mantissa bits, exponent of the smallest normal, largest finite value).
_FLOAT8 = {
    "float8_e4m3fn": (3, -6, 448.0),
    "float8_e5m2": (2, -14, 57344.0),
}


def compute_float8_scale(amax, scale, dtype_max, margin=0):
    """The next float8 scale from the running absolute maximum (Transformer Engine's rule).

    `scale` is the reciprocal of Transformer Engine's scale; where `amax` is not positive and
    finite the scale is kept.

    Args:
        amax: absolute maximum seen.
        scale: current scale.
        dtype_max: largest finite value of the float8 dtype.
        margin: the new scale leaves `2**margin` headroom.

    Example:
        >>> float(keratron.quantizers.compute_float8_scale(np.float32(448.0), 1.0, 448.0))
        1.0
    """
    amax = ops.convert_to_tensor(amax)
    scale = ops.reciprocal(scale)
    sf = ops.divide(ops.divide(dtype_max, amax), 2**margin)
    sf = ops.where(ops.greater(amax, 0.0), sf, scale)
    sf = ops.where(ops.isfinite(amax), sf, scale)
    return ops.reciprocal(sf)


def compute_float8_amax_history(x, amax_history):
    """`amax_history` rolled by -1, with `max|x|` written at index 0.

    Example:
        >>> keratron.quantizers.compute_float8_amax_history(
        ...     np.array([-3.0]), np.array([1.0, 2.0], "float32")).numpy().tolist()
        [3.0, 1.0]
    """
    amax_history = ops.convert_to_tensor(amax_history)
    amax_update = ops.cast(ops.max(ops.abs(x)), amax_history.dtype)
    return ops.scatter_update(
        ops.roll(amax_history, shift=-1), [[0]], ops.reshape(amax_update, [1])
    )


def _round_to_float8(x, quantized_dtype):
    """`x` rounded to the nearest value of a float8 format (ties to even), in `x`'s dtype.

    The caller has clipped `x` to the format's finite range. Within a binade `[2**e, 2**(e+1))`
    the format's values are the multiples of `2**(e - mantissa_bits)`, and below the smallest
    normal binade the subnormals share its spacing, so one `round(x / step) * step` rounds
    exactly (dividing by a power of two is exact).
    """
    mantissa_bits, min_exponent, _ = _FLOAT8[quantized_dtype]
    work = "float64" if x.dtype == "float64" else "float32"
    v = ops.cast(x, work)
    a = ops.abs(v)
    e = ops.floor(ops.log2(ops.maximum(a, 2.0**min_exponent)))
    # log2 may be off by one ulp next to a power of two: settle the binade exactly.
    e = ops.where(ops.greater(ops.power(2.0, e), a), ops.subtract(e, 1), e)
    e = ops.where(ops.less_equal(ops.power(2.0, ops.add(e, 1)), a), ops.add(e, 1), e)
    step = ops.power(2.0, ops.subtract(ops.maximum(e, min_exponent), mantissa_bits))
    rounded = ops.multiply(ops.sign(v), ops.multiply(ops.round(ops.divide(a, step)), step))
    return ops.cast(rounded, x.dtype)


def quantize_and_dequantize(inputs, scale, quantized_dtype, compute_dtype):
    """`inputs / scale` clipped to the float8 range, rounded to `quantized_dtype` and scaled
    back, in `compute_dtype`.

    The rounding passes gradients straight through, as a float cast does.

    Args:
        inputs: tensor to quantize.
        scale: the quantization scale.
        quantized_dtype: `"float8_e4m3fn"` or `"float8_e5m2"`.
        compute_dtype: dtype of the computation and the result.

    Raises:
        ValueError: for another `quantized_dtype`.

    Example:
        >>> x = np.array([1.06, 500.0], "float32")
        >>> keratron.quantizers.quantize_and_dequantize(x, 1.0, "float8_e4m3fn", "float32").numpy()
        array([  1., 448.], dtype=float32)
    """
    if quantized_dtype not in _FLOAT8:
        raise ValueError(
            f"quantize_and_dequantize: `quantized_dtype` must be one of {sorted(_FLOAT8)}. "
            f"Received: quantized_dtype={quantized_dtype!r}"
        )
    dtype_max = ops.cast(_FLOAT8[quantized_dtype][2], compute_dtype)
    scale = ops.cast(scale, compute_dtype)
    x = ops.clip(ops.divide(inputs, scale), ops.negative(dtype_max), dtype_max)
    # float8 storage is not a keratron dtype: the values are rounded onto its grid in place.
    x = ops.add(ops.stop_gradient(_round_to_float8(x, quantized_dtype)), _zero_with_gradient(x))
    return ops.multiply(ops.cast(x, compute_dtype), scale)


# ------------------------------------------------------------------------------------------ int4
def _check_int4_dtype(dtype, fn):
    if dtype not in ("int8", "uint8"):
        raise ValueError(f"{fn}: `dtype` must be 'int8' or 'uint8'. Received: dtype={dtype!r}")


def pack_int4(arr, axis=0, dtype="int8"):
    """Packs int4 values (int8 in `[-8, 7]`) two to a byte along `axis`.

    Of each pair of consecutive entries, the first goes in the low nibble and the second in the
    high one; an odd length is padded with a zero. Packing runs in numpy, as in Keras.

    Args:
        arr: int8 (or uint8) tensor of int4 values.
        axis: axis to pack along.
        dtype: `"int8"` or `"uint8"`, the dtype of `arr` and of the result.

    Returns:
        `(packed, packed_shape, orig_len)`: the packed tensor, its shape, and the unpadded
        length of `axis`.

    Raises:
        ValueError: for another `dtype`.
        TypeError: if `arr` is not of `dtype`.

    Example:
        >>> packed, shape, n = keratron.quantizers.pack_int4(
        ...     np.array([[-3, 7], [2, -8], [1, 0]], "int8"))
        >>> packed.numpy().tolist(), n
        ([[45, -121], [1, 0]], 3)
    """
    _check_int4_dtype(dtype, "pack_int4")
    if standardize_dtype(arr.dtype) != dtype:
        raise TypeError(
            f"pack_int4: expected a {dtype} tensor. Received: arr.dtype="
            f"{standardize_dtype(arr.dtype)}"
        )
    arr_np = np.moveaxis(ops.convert_to_numpy(arr), axis, 0)
    n = arr_np.shape[0]
    if n % 2 == 1:
        arr_np = np.concatenate([arr_np, np.zeros((1,) + arr_np.shape[1:], arr_np.dtype)], axis=0)
    np_dtype = np.dtype(dtype)
    mask = np.array(0x0F, dtype=np_dtype)
    low = np.bitwise_and(arr_np[::2].astype(np_dtype), mask)
    high = np.bitwise_and(arr_np[1::2].astype(np_dtype), mask)
    packed = np.bitwise_or(low, np.left_shift(high, np.array(4, dtype=np_dtype)))
    packed = np.moveaxis(packed.astype(np_dtype), 0, axis)
    return ops.convert_to_tensor(packed), tuple(packed.shape), n


def unpack_int4(packed, orig_len, axis=0, dtype="int8"):
    """Unpacks `pack_int4`'s bytes back to one int4 value per entry.

    Args:
        packed: int8 or uint8 tensor of packed nibbles.
        orig_len: unpadded length of `axis` (`pack_int4`'s third result).
        axis: axis that was packed.
        dtype: `"int8"` gives signed values in `[-8, 7]`, `"uint8"` the nibbles in `[0, 15]`.

    Returns:
        A tensor of `dtype` with `orig_len` entries along `axis`.

    Raises:
        ValueError: for another `dtype`.
        TypeError: if `packed` is not int8 or uint8.

    Example:
        >>> packed = np.array([[45, -121], [1, 0]], "int8")
        >>> keratron.quantizers.unpack_int4(packed, 3).numpy().tolist()
        [[-3, 7], [2, -8], [1, 0]]
    """
    _check_int4_dtype(dtype, "unpack_int4")
    packed = ops.convert_to_tensor(packed)
    if packed.dtype not in ("int8", "uint8"):
        raise TypeError(
            f"unpack_int4: expected an int8 or uint8 tensor. Received: packed.dtype={packed.dtype}"
        )
    rank = len(packed.shape)
    axis = axis + rank if axis < 0 else axis
    perm = [axis] + [i for i in range(rank) if i != axis]
    transposed = ops.transpose(packed, perm) if axis else packed

    mask = ops.array(0x0F, dtype=packed.dtype)
    nibbles = [
        ops.bitwise_and(transposed, mask),
        ops.bitwise_and(ops.right_shift(transposed, 4), mask),
    ]
    if dtype == "int8":
        # (n ^ 8) - 8 maps the nibbles 0..15 to -0..7, -8..-1.
        eight = ops.cast(8, packed.dtype)
        nibbles = [ops.subtract(ops.bitwise_xor(n, eight), eight) for n in nibbles]
    stacked = ops.stack([ops.cast(n, dtype) for n in nibbles], axis=1)
    unpacked = ops.reshape(stacked, (-1,) + tuple(transposed.shape[1:]))[:orig_len]
    if axis:
        unpacked = ops.transpose(unpacked, [perm.index(i) for i in range(rank)])
    return unpacked
