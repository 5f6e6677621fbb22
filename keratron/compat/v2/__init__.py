"""`import keratron.compat.v2 as tf`: TensorFlow 2's top-level API over keratron.

Eager first: the ops take and return keratron Tensors, `GradientTape` records them and
`tf.function` is `keratron.function`, which traces them into a compiled graph. `tf.keras` is
keratron itself and `tf.data` is `keratron.data`. DTypes (`tf.float32`) are shared with
`keratron.compat.v1`, and compare equal to keratron's dtype names.

Example:
    >>> import keratron.compat.v2 as tf
    >>> x = tf.Variable(3.0)
    >>> with tf.GradientTape() as tape:
    ...     y = x * x
    >>> float(tape.gradient(y, x))
    6.0
"""

# ruff: noqa: F401, A004
from __future__ import annotations

import types as _types

import keratron as keras
from keratron import data, estimator, feature_column
from keratron.autodiff import GradientTape, Tensor, is_tensor
from keratron.autodiff.tracing import is_tracing as _is_tracing
from keratron.compat.v1 import errors
from keratron.compat.v1.dtypes import (  # noqa: E402
    bfloat16,
    bool,
    float16,
    float32,
    float64,
    int8,
    int16,
    int32,
    int64,
    string,
    uint8,
    uint16,
)
from keratron.compat.v1.framework import DType, as_dtype
from keratron.compat.v1.tfrecord import (
    FixedLenFeature,
    FixedLenSequenceFeature,
    SparseTensor,
    TFRecordOptions,
    TFRecordWriter,
    VarLenFeature,
    parse_example,
    parse_single_example,
    parse_single_sequence_example,
)
from keratron.compat.v2 import debugging, linalg, math, nest, nn, random, train
from keratron.compat.v2.function import custom_gradient, function
from keratron.compat.v2.module import Module
from keratron.compat.v2.ops import (
    abs,
    add,
    add_n,
    argmax,
    argmin,
    cast,
    clip_by_global_norm,
    clip_by_norm,
    clip_by_value,
    concat,
    constant,
    convert_to_tensor,
    cos,
    divide,
    equal,
    exp,
    expand_dims,
    fill,
    gather,
    greater,
    greater_equal,
    identity,
    less,
    less_equal,
    log,
    logical_and,
    logical_not,
    logical_or,
    matmul,
    maximum,
    minimum,
    multiply,
    negative,
    norm,
    not_equal,
    one_hot,
    ones,
    ones_like,
    pad,
    pow,
    range,
    rank,
    reduce_all,
    reduce_any,
    reduce_logsumexp,
    reduce_max,
    reduce_mean,
    reduce_min,
    reduce_prod,
    reduce_sum,
    reshape,
    round,
    shape,
    sigmoid,
    sign,
    sin,
    size,
    split,
    sqrt,
    square,
    squeeze,
    stack,
    stop_gradient,
    subtract,
    tanh,
    tile,
    transpose,
    truediv,
    unstack,
    where,
    zeros,
    zeros_like,
)  # fmt: skip
from keratron.compat.v2.variables import IndexedSlices, Variable
from keratron.data import TensorSpec


def executing_eagerly() -> bool:
    """False while `tf.function` traces its Python body, True otherwise (as in TF)."""
    return not _is_tracing()


io = _types.SimpleNamespace(
    TFRecordWriter=TFRecordWriter, TFRecordOptions=TFRecordOptions,
    FixedLenFeature=FixedLenFeature, VarLenFeature=VarLenFeature,
    FixedLenSequenceFeature=FixedLenSequenceFeature, parse_example=parse_example,
    parse_single_example=parse_single_example,
    parse_single_sequence_example=parse_single_sequence_example,
)  # fmt: skip
