"""`keras.backend`: config accessors, `get_uid`, `clear_session`, `is_keras_tensor`, and the
tf.keras 2 backend functions (`K.mean`, `K.sqrt`, `K.set_value`, ...: `backend.legacy`).

The naming helpers live in `keratron.utils.naming`; `get_uid` is re-exported here because
Keras has it here.
"""

from __future__ import annotations

from keratron.autodiff.dtypes import standardize_dtype
from keratron.autodiff.tensor import Tensor, Variable, convert_to_tensor, is_tensor
from keratron.backend import legacy
from keratron.backend.dtypes import result_type
from keratron.backend.legacy import *  # noqa: F403 (tf.keras 2's K.* functions)
from keratron.config import (
    epsilon,
    floatx,
    image_data_format,
    set_epsilon,
    set_floatx,
    set_image_data_format,
    standardize_data_format,
)
from keratron.utils.naming import clear_session, get_uid

__all__ = [
    "epsilon",
    "floatx",
    "image_data_format",
    "set_epsilon",
    "set_floatx",
    "set_image_data_format",
    "standardize_data_format",
    "clear_session",
    "get_uid",
    "backend",
    "Tensor",
    "Variable",
    "convert_to_tensor",
    "is_tensor",
    "is_keras_tensor",
    "is_float_dtype",
    "is_int_dtype",
    "result_type",
    "standardize_dtype",
    *legacy.__all__,
]


def backend() -> str:
    """The name of the array backend keratron runs on."""
    return "keratron"


def is_keras_tensor(x) -> bool:
    from keratron.layers.node import KerasTensor

    return isinstance(x, KerasTensor)


def is_float_dtype(dtype) -> bool:
    """Whether `dtype` (any form `standardize_dtype` reads) is a floating-point dtype."""
    dtype = standardize_dtype(dtype)
    return dtype.startswith("float") or dtype.startswith("bfloat")


def is_int_dtype(dtype) -> bool:
    """Whether `dtype` (any form `standardize_dtype` reads) is a signed or unsigned integer."""
    dtype = standardize_dtype(dtype)
    return dtype.startswith("int") or dtype.startswith("uint")
