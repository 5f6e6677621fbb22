"""`keras.quantizers`: quantizers, quantization configs and quantization functions.

Example:
    >>> q, scale = keratron.quantizers.abs_max_quantize(np.array([[0.5, -1.0]]), axis=-1)
    >>> q.numpy().tolist()
    [[63, -127]]
"""

from keratron.quantizers.quantization_config import (
    AWQConfig,
    Float8QuantizationConfig,
    GPTQConfig,
    Int4QuantizationConfig,
    Int8QuantizationConfig,
    QuantizationConfig,
)
from keratron.quantizers.quantizers import (
    AbsMaxQuantizer,
    Quantizer,
    abs_max_quantize,
    abs_max_quantize_grouped_with_zero_point,
    compute_float8_amax_history,
    compute_float8_scale,
    fake_quant_with_min_max_vars,
    pack_int4,
    quantize_and_dequantize,
    unpack_int4,
)
from keratron.quantizers.serialization import deserialize, get, serialize

__all__ = [
    "AWQConfig",
    "AbsMaxQuantizer",
    "Float8QuantizationConfig",
    "GPTQConfig",
    "Int4QuantizationConfig",
    "Int8QuantizationConfig",
    "QuantizationConfig",
    "Quantizer",
    "abs_max_quantize",
    "abs_max_quantize_grouped_with_zero_point",
    "compute_float8_amax_history",
    "compute_float8_scale",
    "deserialize",
    "fake_quant_with_min_max_vars",
    "get",
    "pack_int4",
    "quantize_and_dequantize",
    "serialize",
    "unpack_int4",
]
