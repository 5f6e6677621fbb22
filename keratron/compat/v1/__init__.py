"""`import keratron.compat.v1 as tf`: TensorFlow 1's graph-and-session API over keratron.

Graphs record operations without computing; `Session.run` prunes the graph to what its
fetches need and compiles that through `keratron.autodiff.tracing` (the compiler and kernels
that `fit` uses).

Example:
    >>> import keratron.compat.v1 as tf
    >>> m = tf.matmul(tf.constant([[3.0, 3.0]]), tf.constant([[2.0], [2.0]]))
    >>> with tf.Session() as sess:
    ...     print(sess.run(m))
    [[12.]]
"""

# ruff: noqa: F401
from __future__ import annotations

from keratron.compat.v1 import data, errors, layers, losses, metrics, nn, summary, train
from keratron.compat.v1 import image_ops as image
from keratron.compat.v1 import math_ops as math
from keratron.compat.v1 import tf_logging as logging
from keratron.compat.v1 import variables as _variables_module
from keratron.compat.v1.array_ops import (
    concat,
    constant,
    expand_dims,
    fill,
    gather,
    identity,
    linspace,
    one_hot,
    ones,
    ones_like,
    pack,
    pad,
    placeholder,
    placeholder_with_default,
    random_normal,
    random_uniform,
    range,
    rank,
    reshape,
    set_random_seed,
    shape,
    size,
    slice,
    split,
    squeeze,
    stack,
    strided_slice,
    tile,
    transpose,
    truncated_normal,
    unpack,
    unstack,
    where,
    zeros,
    zeros_like,
)
from keratron.compat.v1.framework import (
    Dimension,
    DType,
    Graph,
    GraphKeys,
    Operation,
    Tensor,
    TensorShape,
    add_to_collection,
    add_to_collections,
    as_dtype,
    control_dependencies,
    convert_to_tensor,
    get_collection,
    get_collection_ref,
    get_default_graph,
    name_scope,
    reset_default_graph,
)
from keratron.compat.v1.gradients import gradients, stop_gradient
from keratron.compat.v1.image_ops import random_crop
from keratron.compat.v1.math_ops import (
    abs,
    add,
    add_n,
    arg_max,
    arg_min,
    argmax,
    argmin,
    cast,
    ceil,
    clip_by_global_norm,
    clip_by_norm,
    clip_by_value,
    cos,
    count_nonzero,
    div,
    divide,
    equal,
    exp,
    floor,
    floordiv,
    global_norm,
    greater,
    greater_equal,
    less,
    less_equal,
    log,
    log1p,
    logical_and,
    logical_not,
    logical_or,
    matmul,
    maximum,
    minimum,
    mod,
    mul,
    multiply,
    neg,
    negative,
    not_equal,
    pow,
    reciprocal,
    reduce_all,
    reduce_any,
    reduce_logsumexp,
    reduce_max,
    reduce_mean,
    reduce_min,
    reduce_prod,
    reduce_sum,
    round,
    rsqrt,
    sigmoid,
    sign,
    sin,
    sqrt,
    square,
    squared_difference,
    sub,
    subtract,
    tanh,
    to_float,
    to_int32,
    to_int64,
    truediv,
)
from keratron.compat.v1.queues import (
    FIFOQueue,
    FixedLengthRecordReader,
    QueueBase,
    RandomShuffleQueue,
    ReaderBase,
    TextLineReader,
    WholeFileReader,
    decode_csv,
    decode_raw,
)
from keratron.compat.v1.session import InteractiveSession, Session, get_default_session
from keratron.compat.v1.tfrecord import (
    FixedLenFeature,
    FixedLenSequenceFeature,
    SparseTensor,
    TFRecordCompressionType,
    TFRecordOptions,
    TFRecordReader,
    TFRecordWriter,
    VarLenFeature,
    parse_example,
    parse_single_example,
    parse_single_sequence_example,
    tf_record_iterator,
)
from keratron.compat.v1.variables import (
    AUTO_REUSE,
    Variable,
    VariableScope,
    all_variables,
    assign,
    assign_add,
    assign_sub,
    constant_initializer,
    count_up_to,
    get_variable,
    get_variable_scope,
    global_variables,
    global_variables_initializer,
    glorot_normal_initializer,
    glorot_uniform_initializer,
    group,
    initialize_all_variables,
    initialize_local_variables,
    is_variable_initialized,
    local_variables,
    local_variables_initializer,
    make_template,
    model_variables,
    no_op,
    ones_initializer,
    random_normal_initializer,
    random_uniform_initializer,
    scatter_add,
    scatter_sub,
    scatter_update,
    tables_initializer,
    trainable_variables,
    truncated_normal_initializer,
    variable_scope,
    variables_initializer,
    variance_scaling_initializer,
    zeros_initializer,
)

_variables_module._install_variable_operators()

from keratron.compat.v1.dtypes import (  # noqa: E402
    bfloat16,
    bool,
    complex64,
    complex128,
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

float_ = float32
double = float64
half = float16


def device(device_name_or_function):
    """`tf.device(...)`: accepted and ignored; keratron places values on its own device
    (`keratron.device` / KERATRON_DEVICE), not per op."""
    import contextlib

    return contextlib.nullcontext()


class _Namespace:
    def __init__(self, **items):
        self.__dict__.update(items)


dtypes = _Namespace(
    as_dtype=as_dtype, DType=DType, float16=float16, float32=float32, float64=float64,
    int8=int8, int16=int16, int32=int32, int64=int64, uint8=uint8, bool=bool, string=string,
)  # fmt: skip
initializers = _Namespace(
    zeros=zeros_initializer, ones=ones_initializer, constant=constant_initializer,
    random_normal=random_normal_initializer, truncated_normal=truncated_normal_initializer,
    random_uniform=random_uniform_initializer, glorot_uniform=glorot_uniform_initializer,
    glorot_normal=glorot_normal_initializer, variance_scaling=variance_scaling_initializer,
    global_variables=global_variables_initializer, local_variables=local_variables_initializer,
    variables=variables_initializer,
)  # fmt: skip
random = _Namespace(
    normal=random_normal, uniform=random_uniform, truncated_normal=truncated_normal,
    set_random_seed=set_random_seed,
    log_uniform_candidate_sampler=nn.log_uniform_candidate_sampler,
    uniform_candidate_sampler=nn.uniform_candidate_sampler,
)  # fmt: skip
python_io = _Namespace(
    TFRecordWriter=TFRecordWriter, TFRecordOptions=TFRecordOptions,
    TFRecordCompressionType=TFRecordCompressionType, tf_record_iterator=tf_record_iterator,
)  # fmt: skip
io = _Namespace(
    **python_io.__dict__, FixedLenFeature=FixedLenFeature, VarLenFeature=VarLenFeature,
    FixedLenSequenceFeature=FixedLenSequenceFeature, parse_example=parse_example,
    parse_single_example=parse_single_example,
    parse_single_sequence_example=parse_single_sequence_example,
    decode_csv=decode_csv, decode_raw=decode_raw,
)  # fmt: skip
# TF1's `tf.contrib.rnn` names for the cells and loops.
contrib = _Namespace(
    rnn=_Namespace(
        **{n: getattr(nn.rnn_cell, n) for n in nn.rnn_cell.__all__},
        static_rnn=nn.static_rnn, static_bidirectional_rnn=nn.static_bidirectional_rnn,
    ),
)  # fmt: skip
