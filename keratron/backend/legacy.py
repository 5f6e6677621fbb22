"""The tf.keras 2 backend functions (`from tensorflow.keras import backend as K`): `K.mean`,
`K.sqrt`, `K.int_shape`, `K.set_value`, ..., as custom losses, metrics and callbacks of
tf.keras code call them. Keras 3 keeps them in its `tf.keras` namespace; keratron's
`backend` has them beside Keras 3's own names.

Each computes what tf.keras 2's function computes (`tf_keras.backend`, the reference of
tests/backend/test_legacy.py), on keratron ops, so it differentiates and traces like any op:
`sqrt` clips negative inputs to 0 first, the cross-entropies are elementwise (no mean over the
batch) and clip probabilities to [epsilon, 1 - epsilon], `argmax` returns int64, `mean` of a
boolean tensor is a float. Functions that make state (`variable`, `eye`, `ones`, `zeros`, the
`random_*_variable`s) return a `keratron.Variable`; `get_value`, `eval` and `batch_get_value`
return numpy arrays; `rnn` runs its step function step by step. tf.keras 2's graph-mode
`gradients` and the sparse-tensor helpers have no counterpart here.

Example:
    >>> from keratron import backend as K
    >>> def rmse(y_true, y_pred):
    ...     return K.sqrt(K.mean(K.square(y_pred - y_true), axis=-1))
    >>> float(rmse(K.constant([[1.0, 2.0]]), K.constant([[1.0, 4.0]]))[0])
    1.4142135381698608
"""

from __future__ import annotations

import builtins
import math

import numpy as np

from keratron import config, ops, random
from keratron.autodiff import tree
from keratron.autodiff.tensor import Tensor, Variable, convert_to_tensor
from keratron.layers.name_scope import name_scope as _name_scope
from keratron.layers.node import KerasTensor
from keratron.layers.recurrent import step_loop

__all__ = [
    "abs", "all", "any", "arange", "argmax", "argmin", "batch_dot", "batch_flatten",
    "batch_get_value", "batch_normalization", "batch_set_value", "bias_add",
    "binary_crossentropy", "binary_focal_crossentropy", "cast", "cast_to_floatx",
    "categorical_crossentropy", "categorical_focal_crossentropy", "clip", "concatenate",
    "constant", "conv1d", "conv2d", "conv2d_transpose", "conv3d", "cos", "count_params",
    "ctc_batch_cost", "ctc_decode", "cumprod", "cumsum", "depthwise_conv2d", "dot", "dropout",
    "dtype", "elu", "equal", "eval", "exp", "expand_dims", "eye", "flatten", "foldl", "foldr",
    "gather", "get_value", "greater", "greater_equal", "hard_sigmoid", "in_top_k", "int_shape",
    "is_sparse", "l2_normalize", "less", "less_equal", "log", "map_fn", "max", "maximum", "mean",
    "min", "minimum", "moving_average_update", "name_scope", "ndim", "not_equal", "one_hot",
    "ones", "ones_like", "permute_dimensions", "pool2d", "pool3d", "pow", "prod",
    "random_bernoulli", "random_normal", "random_normal_variable", "random_uniform",
    "random_uniform_variable", "relu", "repeat", "repeat_elements", "reshape", "resize_images",
    "resize_volumes", "reverse", "rnn", "round", "separable_conv2d", "set_value", "shape",
    "sigmoid", "sign", "sin", "softmax", "softplus", "softsign", "sparse_categorical_crossentropy",
    "spatial_2d_padding", "spatial_3d_padding", "sqrt", "square", "squeeze", "stack", "std",
    "stop_gradient", "sum", "switch", "tanh", "temporal_padding", "tile", "to_dense",
    "transpose", "truncated_normal", "update", "update_add", "update_sub", "var", "variable",
    "zeros", "zeros_like",
]  # fmt: skip


def _t(x) -> Tensor:
    # A symbolic input (functional model building) stays symbolic: the ops record it.
    return x if isinstance(x, (Tensor, KerasTensor)) else convert_to_tensor(x)


def _float(x) -> Tensor:
    """x, with a boolean one as floatx (tf.keras's mean, std and var)."""
    x = _t(x)
    return ops.cast(x, config.floatx()) if x.dtype == "bool" else x


# ------------------------------------------------------------------------------ values, state
def variable(value, dtype=None, name=None, constraint=None) -> Variable:
    """A variable holding `value` (floatx unless `dtype`)."""
    value = value.numpy() if isinstance(value, Tensor) else value
    return Variable(
        np.asarray(value), dtype=dtype or config.floatx(), name=name, constraint=constraint
    )


def constant(value, dtype=None, shape=None, name=None) -> Tensor:
    """A tensor of `value` (floatx unless `dtype`), broadcast to `shape` when given."""
    value = np.asarray(value, dtype=np.dtype(dtype or config.floatx()))
    if shape is not None:
        value = np.broadcast_to(value, tuple(shape)) if value.size == 1 else value.reshape(shape)
    return convert_to_tensor(np.array(value))


def get_value(x) -> np.ndarray:
    """The value of a tensor or variable as a numpy array (numpy input as is)."""
    if isinstance(x, np.ndarray):
        return x
    return _t(x).numpy()


def eval(x) -> np.ndarray:  # noqa: A001 (tf.keras's name)
    """The value of `x` as a numpy array."""
    return get_value(x)


def batch_get_value(tensors) -> list:
    """`get_value` of each of `tensors`."""
    return [get_value(t) for t in tensors]


def set_value(x: Variable, value) -> None:
    """Assigns `value` (cast to x's dtype) to the variable `x`."""
    x.assign(np.asarray(value, dtype=np.dtype(x.dtype)))


def batch_set_value(tuples) -> None:
    """`set_value` for each `(variable, value)` pair."""
    for x, value in tuples:
        set_value(x, value)


def update(x: Variable, new_x):
    """Assigns `new_x` to `x`; returns `x`."""
    x.assign(new_x)
    return x


def update_add(x: Variable, increment):
    """Adds `increment` to `x`; returns `x`."""
    x.assign_add(increment)
    return x


def update_sub(x: Variable, decrement):
    """Subtracts `decrement` from `x`; returns `x`."""
    x.assign_sub(decrement)
    return x


def moving_average_update(x: Variable, value, momentum):
    """`x = x * momentum + value * (1 - momentum)`; returns `x`."""
    x.assign(x * momentum + _t(value) * (1.0 - momentum))
    return x


def count_params(x) -> int:
    """The number of elements of `x`."""
    return int(math.prod(int_shape(x)))


def int_shape(x) -> tuple:
    """The shape of `x` as a tuple of ints (None for unknown dimensions of a symbolic input)."""
    return tuple(x.shape)


def ndim(x) -> int:
    """The rank of `x`."""
    return len(x.shape)


def dtype(x) -> str:
    """The dtype of `x`, as a string."""
    return _t(x).dtype


def shape(x) -> Tensor:
    """The shape of `x` as an int32 tensor."""
    return convert_to_tensor(np.asarray(x.shape, dtype="int32"))


def is_sparse(tensor) -> bool:
    """False: keratron tensors are dense."""
    return False


def to_dense(tensor) -> Tensor:
    """`tensor` itself (keratron tensors are dense)."""
    return _t(tensor)


def cast(x, dtype) -> Tensor:
    """`x` cast to `dtype`."""
    return ops.cast(_t(x), dtype)


def cast_to_floatx(x) -> np.ndarray | Tensor:
    """`x` cast to floatx: a tensor for a tensor, else a numpy array."""
    if isinstance(x, Tensor):
        return ops.cast(x, config.floatx())
    return np.asarray(x, dtype=config.floatx())


def name_scope(name):
    """A name scope for the variables and layers made inside it (`keratron.name_scope`)."""
    return _name_scope(name)


# ------------------------------------------------------------------------------ creation
def _fill_variable(fill, shape, dtype, name):
    return variable(fill(tuple(shape), dtype=dtype or config.floatx()), dtype, name)


def zeros(shape, dtype=None, name=None) -> Variable:
    """A variable of zeros."""
    return _fill_variable(np.zeros, shape, dtype, name)


def ones(shape, dtype=None, name=None) -> Variable:
    """A variable of ones."""
    return _fill_variable(np.ones, shape, dtype, name)


def eye(size, dtype=None, name=None) -> Variable:
    """A variable holding the `size` x `size` identity matrix."""
    return variable(np.eye(size), dtype or config.floatx(), name)


def zeros_like(x, dtype=None, name=None) -> Tensor:
    """Zeros of x's shape (and dtype unless `dtype`)."""
    return ops.zeros_like(_t(x), dtype=dtype)


def ones_like(x, dtype=None, name=None) -> Tensor:
    """Ones of x's shape (and dtype unless `dtype`)."""
    return ops.ones_like(_t(x), dtype=dtype)


def arange(start, stop=None, step=1, dtype="int32") -> Tensor:
    """`range` as a tensor (int32 unless `dtype`); a negative `start` alone gives nothing."""
    if stop is None and start < 0:
        start = 0
    if stop is None:
        start, stop = 0, start
    return ops.cast(ops.arange(start, stop, step), dtype)


def random_normal(shape, mean=0.0, stddev=1.0, dtype=None, seed=None) -> Tensor:
    """Normal draws."""
    return random.normal(shape, mean, stddev, dtype=dtype or config.floatx(), seed=seed)


def random_uniform(shape, minval=0.0, maxval=1.0, dtype=None, seed=None) -> Tensor:
    """Uniform draws in [minval, maxval)."""
    return random.uniform(shape, minval, maxval, dtype=dtype or config.floatx(), seed=seed)


def truncated_normal(shape, mean=0.0, stddev=1.0, dtype=None, seed=None) -> Tensor:
    """Normal draws within two standard deviations of the mean."""
    return random.truncated_normal(shape, mean, stddev, dtype=dtype or config.floatx(), seed=seed)


def random_bernoulli(shape, p=0.0, dtype=None, seed=None) -> Tensor:
    """1 with probability `p`, else 0."""
    draws = random.uniform(shape, dtype=config.floatx(), seed=seed)
    return ops.cast(ops.less(draws, p), dtype or config.floatx())


def random_normal_variable(shape, mean, scale, dtype=None, name=None, seed=None) -> Variable:
    """A variable of normal draws."""
    return variable(random_normal(shape, mean, scale, dtype, seed), dtype, name)


def random_uniform_variable(shape, low, high, dtype=None, name=None, seed=None) -> Variable:
    """A variable of uniform draws in [low, high)."""
    return variable(random_uniform(shape, low, high, dtype, seed), dtype, name)


# ------------------------------------------------------------------------------ elementwise
def abs(x):  # noqa: A001
    """|x|."""
    return ops.abs(_t(x))


def square(x):
    """x ** 2."""
    return ops.square(_t(x))


def sqrt(x):
    """The square root of `x`, with negative inputs clipped to 0 first (as tf.keras 2)."""
    x = _t(x)
    return ops.sqrt(ops.maximum(x, ops.cast(0.0, x.dtype)))


def exp(x):
    """e ** x."""
    return ops.exp(_t(x))


def log(x):
    """The natural logarithm."""
    return ops.log(_t(x))


def pow(x, a):  # noqa: A001
    """x ** a."""
    return ops.power(_t(x), a)


def round(x):  # noqa: A001
    """Rounds half to even."""
    return ops.round(_t(x))


def sign(x):
    """-1, 0 or 1."""
    return ops.sign(_t(x))


def sin(x):
    """The sine."""
    return ops.sin(_t(x))


def cos(x):
    """The cosine."""
    return ops.cos(_t(x))


def tanh(x):
    """The hyperbolic tangent."""
    return ops.tanh(_t(x))


def sigmoid(x):
    """The logistic sigmoid."""
    return ops.sigmoid(_t(x))


def hard_sigmoid(x):
    """`clip(0.2 * x + 0.5, 0, 1)` (tf.keras 2's slope)."""
    return ops.clip(_t(x) * 0.2 + 0.5, 0.0, 1.0)


def softplus(x):
    """log(1 + e ** x)."""
    return ops.softplus(_t(x))


def softsign(x):
    """x / (1 + |x|)."""
    return ops.softsign(_t(x))


def elu(x, alpha=1.0):
    """x for x > 0, else alpha * (e ** x - 1)."""
    return ops.elu(_t(x), alpha)


def relu(x, alpha=0.0, max_value=None, threshold=0.0):
    """Rectified linear unit with tf.keras 2's leak `alpha` below `threshold` and cap
    `max_value`."""
    x = _t(x)
    out = ops.where(ops.greater(x, threshold), x, ops.zeros_like(x)) if threshold else ops.relu(x)
    if max_value is not None:
        out = ops.clip(out, 0.0, max_value)
    if alpha:
        out = out - alpha * ops.relu(threshold - x)
    return out


def softmax(x, axis=-1):
    """The softmax along `axis`."""
    return ops.softmax(_t(x), axis=axis)


def clip(x, min_value, max_value):
    """`x` clipped to [min_value, max_value] (None: unbounded; a max below the min is the min)."""
    if isinstance(min_value, (int, float)) and isinstance(max_value, (int, float)):
        max_value = builtins.max(min_value, max_value)
    min_value = -np.inf if min_value is None else min_value
    max_value = np.inf if max_value is None else max_value
    return ops.clip(_t(x), min_value, max_value)


def maximum(x, y):
    """The elementwise maximum."""
    return ops.maximum(_t(x), y)


def minimum(x, y):
    """The elementwise minimum."""
    return ops.minimum(_t(x), y)


def equal(x, y):
    """x == y."""
    return ops.equal(_t(x), y)


def not_equal(x, y):
    """x != y."""
    return ops.not_equal(_t(x), y)


def greater(x, y):
    """x > y."""
    return ops.greater(_t(x), y)


def greater_equal(x, y):
    """x >= y."""
    return ops.greater_equal(_t(x), y)


def less(x, y):
    """x < y."""
    return ops.less(_t(x), y)


def less_equal(x, y):
    """x <= y."""
    return ops.less_equal(_t(x), y)


def switch(condition, then_expression, else_expression):
    """`then_expression` where `condition`, else `else_expression`; callables are called. A
    condition of lower rank than the expressions applies along their leading axes."""
    then_value = then_expression() if callable(then_expression) else then_expression
    else_value = else_expression() if callable(else_expression) else else_expression
    condition, then_value = _t(condition), _t(then_value)
    if condition.dtype != "bool":
        condition = ops.cast(condition, "bool")
    extra = len(then_value.shape) - len(condition.shape)
    if extra > 0:
        condition = ops.reshape(condition, tuple(condition.shape) + (1,) * extra)
    return ops.where(condition, then_value, else_value)


def stop_gradient(variables):
    """`variables` (a tensor or a list of them) cut from the gradient."""
    if isinstance(variables, (list, tuple)):
        return [ops.stop_gradient(v) for v in variables]
    return ops.stop_gradient(variables)


# ------------------------------------------------------------------------------ reductions
def _reduce(fn, x, axis, keepdims):
    return fn(x, axis=tuple(axis) if isinstance(axis, list) else axis, keepdims=keepdims)


def sum(x, axis=None, keepdims=False):  # noqa: A001
    """The sum over `axis` (all axes when None)."""
    return _reduce(ops.sum, _t(x), axis, keepdims)


def prod(x, axis=None, keepdims=False):
    """The product over `axis`."""
    return _reduce(ops.prod, _t(x), axis, keepdims)


def max(x, axis=None, keepdims=False):  # noqa: A001
    """The maximum over `axis`."""
    return _reduce(ops.max, _t(x), axis, keepdims)


def min(x, axis=None, keepdims=False):  # noqa: A001
    """The minimum over `axis`."""
    return _reduce(ops.min, _t(x), axis, keepdims)


def mean(x, axis=None, keepdims=False):
    """The mean over `axis` (a boolean `x` counts as floatx)."""
    return _reduce(ops.mean, _float(x), axis, keepdims)


def std(x, axis=None, keepdims=False):
    """The standard deviation (population) over `axis`."""
    return _reduce(ops.std, _float(x), axis, keepdims)


def var(x, axis=None, keepdims=False):
    """The variance (population) over `axis`."""
    return _reduce(ops.var, _float(x), axis, keepdims)


def all(x, axis=None, keepdims=False):  # noqa: A001
    """Whether every element over `axis` is nonzero."""
    return _reduce(ops.all, ops.cast(_t(x), "bool"), axis, keepdims)


def any(x, axis=None, keepdims=False):  # noqa: A001
    """Whether some element over `axis` is nonzero."""
    return _reduce(ops.any, ops.cast(_t(x), "bool"), axis, keepdims)


def argmax(x, axis=-1):
    """The index of the maximum along `axis`, int64."""
    return ops.cast(ops.argmax(_t(x), axis=axis), "int64")


def argmin(x, axis=-1):
    """The index of the minimum along `axis`, int64."""
    return ops.cast(ops.argmin(_t(x), axis=axis), "int64")


def cumsum(x, axis=0):
    """The cumulative sum along `axis`."""
    return ops.cumsum(_t(x), axis=axis)


def cumprod(x, axis=0):
    """The cumulative product along `axis`."""
    return ops.cumprod(_t(x), axis=axis)


def l2_normalize(x, axis=None):
    """`x / sqrt(max(sum(x ** 2, axis), 1e-12))`."""
    x = _t(x)
    squares = ops.sum(ops.square(x), axis=axis, keepdims=True)
    return x * ops.rsqrt(ops.maximum(squares, 1e-12))


def in_top_k(predictions, targets, k):
    """Whether each row's target class is among its `k` largest predictions."""
    return ops.in_top_k(_t(targets), _t(predictions), k)


# ------------------------------------------------------------------------------ shapes
def reshape(x, shape):
    """`x` in `shape`."""
    return ops.reshape(_t(x), tuple(shape))


def flatten(x):
    """`x` as a vector."""
    return ops.reshape(_t(x), (-1,))


def batch_flatten(x):
    """`x` as (batch, everything else)."""
    x = _t(x)
    return ops.reshape(x, (-1, math.prod(x.shape[1:])))


def expand_dims(x, axis=-1):
    """`x` with a unit axis inserted at `axis`."""
    return ops.expand_dims(_t(x), axis)


def squeeze(x, axis):
    """`x` without its unit axis `axis`."""
    return ops.squeeze(_t(x), axis)


def transpose(x):
    """`x` with its axes reversed."""
    return ops.transpose(_t(x))


def permute_dimensions(x, pattern):
    """`x` with its axes in the order `pattern`."""
    return ops.transpose(_t(x), tuple(pattern))


def concatenate(tensors, axis=-1):
    """The tensors joined along `axis`."""
    return ops.concatenate([_t(t) for t in tensors], axis=axis)


def stack(x, axis=0):
    """The tensors stacked along a new `axis`."""
    return ops.stack([_t(t) for t in x], axis=axis)


def tile(x, n):
    """`x` repeated `n` times along each axis (an int repeats the first)."""
    return ops.tile(_t(x), [n] if isinstance(n, int) else list(n))


def repeat(x, n):
    """A (batch, dim) `x` as (batch, n, dim)."""
    x = _t(x)
    if len(x.shape) != 2:
        raise ValueError(
            f"repeat: x must be 2-D (batch, dim). Received: x with shape {tuple(x.shape)}"
        )
    return ops.repeat(ops.expand_dims(x, 1), n, axis=1)


def repeat_elements(x, rep, axis):
    """Each slice of `x` along `axis` repeated `rep` times in place."""
    return ops.repeat(_t(x), rep, axis=axis)


def reverse(x, axes):
    """`x` reversed along `axes` (an int or a list)."""
    return ops.flip(_t(x), axis=tuple(axes) if isinstance(axes, (list, tuple)) else axes)


def gather(reference, indices):
    """The slices of `reference` at `indices` along its first axis."""
    return ops.take(_t(reference), _t(indices), axis=0)


def one_hot(indices, num_classes):
    """One-hot vectors of `num_classes` along a new last axis."""
    return ops.one_hot(_t(indices), num_classes)


def dot(x, y):
    """The product of `x` and `y`: for rank > 2, x's last axis against y's second to last
    (`(2, 3, 4) . (4, 3, 5)` is `(2, 3, 4, 5)`)."""
    x, y = _t(x), _t(y)
    if len(x.shape) > 2 or len(y.shape) > 2:
        return ops.tensordot(x, y, axes=[[len(x.shape) - 1], [len(y.shape) - 2]])
    return ops.matmul(x, y)


def batch_dot(x, y, axes=None):
    """The dot product of each batch entry of `x` with the same entry of `y`, over `axes`
    (default: x's last axis against y's last, or y's second to last when y is 3-D or more)."""
    x, y = _t(x), _t(y)
    nx, ny = len(x.shape), len(y.shape)
    if nx < 2 or ny < 2:
        raise ValueError(
            "batch_dot: x and y must have at least 2 dimensions. "
            f"Received: x.shape={tuple(x.shape)}, y.shape={tuple(y.shape)}"
        )
    if axes is None:
        axes = (nx - 1, ny - 1 if ny == 2 else ny - 2)
    if isinstance(axes, int):
        axes = (axes, axes)
    ax, ay = (a % n for a, n in zip(axes, (nx, ny)))
    if ax == 0 or ay == 0:
        raise ValueError(f"batch_dot: cannot reduce over the batch axis. Received: axes={axes}")
    x = ops.moveaxis(x, ax, -1)
    y = ops.moveaxis(y, ay, 1)
    # (b, ..x.., k) x (b, k, ..y..): flatten each side's free axes into one.
    x_free, y_free = tuple(x.shape[1:-1]), tuple(y.shape[2:])
    xm = ops.reshape(x, (x.shape[0], math.prod(x_free), x.shape[-1]))
    ym = ops.reshape(y, (y.shape[0], y.shape[1], math.prod(y_free)))
    out = ops.reshape(ops.matmul(xm, ym), (x.shape[0],) + x_free + y_free)
    if nx == 2 and ny == 2:
        out = ops.expand_dims(out, 1)
    return out


def map_fn(fn, elems, name=None, dtype=None):
    """`fn` applied to each slice of `elems` along its first axis, results stacked."""
    elems = _t(elems)
    return ops.stack([fn(elems[i]) for i in range(elems.shape[0])], axis=0)


def foldl(fn, elems, initializer=None, name=None):
    """`fn(acc, x)` over the slices of `elems` from the first (`initializer`, else the first
    slice, starts `acc`)."""
    elems = _t(elems)
    items = [elems[i] for i in range(elems.shape[0])]
    acc = items.pop(0) if initializer is None else initializer
    for item in items:
        acc = fn(acc, item)
    return acc


def foldr(fn, elems, initializer=None, name=None):
    """`fn(acc, x)` over the slices of `elems` from the last."""
    elems = _t(elems)
    return foldl(fn, ops.flip(elems, axis=0), initializer)


def rnn(
    step_function,
    inputs,
    initial_states,
    go_backwards=False,
    mask=None,
    constants=None,
    unroll=False,
    input_length=None,
    time_major=False,
    zero_output_for_mask=False,
    return_all_outputs=True,
):
    """tf.keras 2's loop over the time axis: `step_function(input_t, states + constants)`
    returns `(output, new_states)` for each time step of `inputs` (a tensor of shape (batch,
    time, ...), or a nested structure of them; (time, batch, ...) with `time_major`).

    Returns `(last_output, outputs, new_states)`: the last step's output, the outputs stacked
    on the time axis (in the order processed, so reversed with `go_backwards`; only the last,
    on a time axis of 1, with `return_all_outputs=False`) and a tuple of the final states.
    Where `mask` (batch, time) is False, a step keeps the previous output (zeros with
    `zero_output_for_mask`, and before the first step) and the previous states; without a
    mask, a tensor `input_length` (batch,) masks the steps past each sequence's length as
    TensorFlow's loop does. The loop runs step by step whatever `unroll` says.
    """
    inputs = tree.map_structure(_t, inputs)
    flat = tree.flatten(inputs)
    for x in flat:
        if x.ndim < 3:
            raise ValueError(
                "rnn: each input must have a batch axis, a time axis and features (rank 3 or "
                f"more); received shape {tuple(x.shape)}."
            )
    if time_major:
        inputs = tree.map_structure(lambda x: ops.swapaxes(x, 0, 1), inputs)
        flat = tree.flatten(inputs)
    steps = flat[0].shape[1]
    if not steps:
        raise ValueError("rnn: the inputs have no time steps.")
    if mask is not None:
        mask = ops.cast(_t(mask), "bool")
        if mask.ndim == 3:
            mask = ops.squeeze(mask, -1)
        if time_major:
            mask = ops.swapaxes(mask, 0, 1)
    elif input_length is not None and not isinstance(input_length, (int, np.integer)):
        lengths = ops.expand_dims(ops.cast(_t(input_length), "int32"), 1)
        if go_backwards:  # TensorFlow counts the reversed steps from the longest sequence
            lengths = lengths + (steps - ops.max(lengths))
        mask = ops.less(ops.expand_dims(ops.arange(steps, dtype="int32"), 0), lengths)
    extra = tuple(constants or ())

    def step(x_t, states):
        return step_function(x_t, tuple(states) + extra)

    last, outputs, states = step_loop(
        step,
        inputs,
        [tree.map_structure(_t, s) for s in initial_states],
        mask,
        go_backwards,
        zero_output_for_mask,
        None,
        keep_all=return_all_outputs,
    )
    if time_major:
        outputs = tree.map_structure(lambda x: ops.swapaxes(x, 0, 1), outputs)
    return last, outputs, tuple(states)


# ------------------------------------------------------------------------------ paddings, images
def _pad_spatial(x, padding, data_format):
    x = _t(x)
    spatial = [tuple(p) for p in padding]
    if config.standardize_data_format(data_format) == "channels_first":
        pads = [(0, 0), (0, 0), *spatial]
    else:
        pads = [(0, 0), *spatial, (0, 0)]
    return ops.pad(x, pads)


def temporal_padding(x, padding=(1, 1)):
    """Zeros added before and after the middle axis of a 3-D `x`."""
    return ops.pad(_t(x), [(0, 0), tuple(padding), (0, 0)])


def spatial_2d_padding(x, padding=((1, 1), (1, 1)), data_format=None):
    """Zeros around the rows and columns of a 4-D `x`."""
    return _pad_spatial(x, padding, data_format)


def spatial_3d_padding(x, padding=((1, 1), (1, 1), (1, 1)), data_format=None):
    """Zeros around the three spatial axes of a 5-D `x`."""
    return _pad_spatial(x, padding, data_format)


def bias_add(x, bias, data_format=None):
    """`x + bias` along the channel axis of `data_format` (a bias of rank ndim(x) - 1 covers
    every axis after the batch)."""
    x, bias = _t(x), _t(bias)
    data_format = config.standardize_data_format(data_format)
    if len(bias.shape) not in (1, len(x.shape) - 1):
        raise ValueError(
            f"bias_add: bias must have 1 or {len(x.shape) - 1} dimensions. "
            f"Received: bias with shape {tuple(bias.shape)}"
        )
    if data_format == "channels_first" and len(x.shape) > 2:
        if len(bias.shape) == 1:
            return x + ops.reshape(bias, (1, -1) + (1,) * (len(x.shape) - 2))
        return x + ops.expand_dims(ops.moveaxis(bias, -1, 0), 0)
    return x + bias


def batch_normalization(x, mean, var, beta, gamma, axis=-1, epsilon=1e-3):
    """`(x - mean) / sqrt(var + epsilon) * gamma + beta` (beta, gamma None: 0, 1)."""
    out = (_t(x) - mean) * ops.rsqrt(_t(var) + epsilon)
    if gamma is not None:
        out = out * gamma
    return out if beta is None else out + beta


def resize_images(x, height_factor, width_factor, data_format, interpolation="nearest"):
    """A 4-D `x` scaled by integer factors along its rows and columns ("nearest": each
    pixel repeated; "bilinear", ...: resampled)."""
    x = _t(x)
    data_format = config.standardize_data_format(data_format)
    rows, cols = (2, 3) if data_format == "channels_first" else (1, 2)
    if interpolation == "nearest":
        return ops.repeat(ops.repeat(x, height_factor, axis=rows), width_factor, axis=cols)
    size = (x.shape[rows] * height_factor, x.shape[cols] * width_factor)
    return ops.image.resize(x, size, interpolation=interpolation, data_format=data_format)


def resize_volumes(x, depth_factor, height_factor, width_factor, data_format):
    """A 5-D `x` with each voxel repeated by the three factors."""
    x = _t(x)
    first = 2 if config.standardize_data_format(data_format) == "channels_first" else 1
    for i, factor in enumerate((depth_factor, height_factor, width_factor)):
        x = ops.repeat(x, factor, axis=first + i)
    return x


# ------------------------------------------------------------------------------ convolutions
def _check_padding(padding):
    if padding not in ("same", "valid"):
        raise ValueError(f"padding must be 'same' or 'valid'. Received: padding={padding!r}")
    return padding


def conv1d(x, kernel, strides=1, padding="valid", data_format=None, dilation_rate=1):
    """1-D convolution (padding "same", "valid" or "causal")."""
    x = _t(x)
    data_format = config.standardize_data_format(data_format)
    if padding == "causal":
        left = dilation_rate * (kernel.shape[0] - 1)
        pads = [(0, 0), (0, 0), (left, 0)] if data_format == "channels_first" else None
        x = ops.pad(x, pads or [(0, 0), (left, 0), (0, 0)])
        padding = "valid"
    return ops.conv(x, kernel, strides, _check_padding(padding), data_format, dilation_rate)


def conv2d(x, kernel, strides=(1, 1), padding="valid", data_format=None, dilation_rate=(1, 1)):
    """2-D convolution."""
    return ops.conv(
        _t(x),
        kernel,
        strides,
        _check_padding(padding),
        config.standardize_data_format(data_format),
        dilation_rate,
    )


def conv3d(
    x, kernel, strides=(1, 1, 1), padding="valid", data_format=None, dilation_rate=(1, 1, 1)
):
    """3-D convolution."""
    return ops.conv(
        _t(x),
        kernel,
        strides,
        _check_padding(padding),
        config.standardize_data_format(data_format),
        dilation_rate,
    )


def conv2d_transpose(
    x,
    kernel,
    output_shape,
    strides=(1, 1),
    padding="valid",
    data_format=None,
    dilation_rate=(1, 1),
):
    """The transpose of `conv2d` (the gradient of a `conv2d` whose input has `output_shape`,
    as TensorFlow's `conv2d_transpose`); kernel (rows, cols, out channels, in channels)."""
    data_format = config.standardize_data_format(data_format)
    _check_padding(padding)
    x = _t(x)
    strides = (strides, strides) if isinstance(strides, int) else tuple(strides)
    dilation = (dilation_rate,) * 2 if isinstance(dilation_rate, int) else tuple(dilation_rate)
    axes = (2, 3) if data_format == "channels_first" else (1, 2)
    wanted = [int(output_shape[a]) for a in axes]
    # Every input position's full footprint, then the window that `padding` keeps: "same"
    # drops half the excess before (the rest after), "valid" keeps the start and pads zeros
    # after where `output_shape` is longer.
    out = ops.conv_transpose(x, kernel, strides, "valid", None, data_format, dilation)
    for axis, want, stride, k, rate in zip(axes, wanted, strides, kernel.shape[:2], dilation):
        size = x.shape[axis]
        reach = (k - 1) * rate + 1
        before = max((size - 1) * stride + reach - want, 0) // 2 if padding == "same" else 0
        index = [slice(None)] * len(out.shape)
        index[axis] = slice(before, before + want)
        out = out[tuple(index)]
        short = want - out.shape[axis]
        if short > 0:
            pads = [(0, 0)] * len(out.shape)
            pads[axis] = (0, short)
            out = ops.pad(out, pads)
    return out


def depthwise_conv2d(
    x, depthwise_kernel, strides=(1, 1), padding="valid", data_format=None, dilation_rate=(1, 1)
):
    """Depthwise 2-D convolution (kernel: (rows, cols, channels, multiplier))."""
    return ops.depthwise_conv(
        _t(x),
        depthwise_kernel,
        strides,
        _check_padding(padding),
        config.standardize_data_format(data_format),
        dilation_rate,
    )


def separable_conv2d(
    x,
    depthwise_kernel,
    pointwise_kernel,
    strides=(1, 1),
    padding="valid",
    data_format=None,
    dilation_rate=(1, 1),
):
    """Depthwise then pointwise 2-D convolution."""
    return ops.separable_conv(
        _t(x),
        depthwise_kernel,
        pointwise_kernel,
        strides,
        _check_padding(padding),
        config.standardize_data_format(data_format),
        dilation_rate,
    )


def _pool(x, pool_size, strides, padding, data_format, pool_mode):
    if pool_mode not in ("max", "avg"):
        raise ValueError(f"pool_mode must be 'max' or 'avg'. Received: pool_mode={pool_mode!r}")
    pool = ops.max_pool if pool_mode == "max" else ops.average_pool
    return pool(
        _t(x),
        pool_size,
        strides,
        _check_padding(padding),
        config.standardize_data_format(data_format),
    )


def pool2d(x, pool_size, strides=(1, 1), padding="valid", data_format=None, pool_mode="max"):
    """2-D max or average pooling."""
    return _pool(x, pool_size, strides, padding, data_format, pool_mode)


def pool3d(x, pool_size, strides=(1, 1, 1), padding="valid", data_format=None, pool_mode="max"):
    """3-D max or average pooling."""
    return _pool(x, pool_size, strides, padding, data_format, pool_mode)


def dropout(x, level, noise_shape=None, seed=None):
    """`x` with a fraction `level` of entries zeroed, the rest scaled by 1 / (1 - level)."""
    return random.dropout(_t(x), level, noise_shape=noise_shape, seed=seed)


# ------------------------------------------------------------------------------ losses
def binary_crossentropy(target, output, from_logits=False):
    """Elementwise binary cross-entropy; probabilities are clipped to [eps, 1 - eps]."""
    target, output = _t(target), _t(output)
    if from_logits:
        return ops.binary_crossentropy(target, output, from_logits=True)
    eps = config.epsilon()
    output = ops.clip(output, eps, 1.0 - eps)
    bce = target * ops.log(output + eps) + (1.0 - target) * ops.log(1.0 - output + eps)
    return -bce


def categorical_crossentropy(target, output, from_logits=False, axis=-1):
    """Cross-entropy along `axis`; probabilities are renormalised, then clipped."""
    target, output = _t(target), _t(output)
    if from_logits:
        return ops.categorical_crossentropy(target, output, from_logits=True, axis=axis)
    output = output / ops.sum(output, axis=axis, keepdims=True)
    eps = config.epsilon()
    return -ops.sum(target * ops.log(ops.clip(output, eps, 1.0 - eps)), axis=axis)


def sparse_categorical_crossentropy(target, output, from_logits=False, axis=-1, ignore_class=None):
    """Cross-entropy of integer targets along `axis` (probabilities are clipped, then
    renormalised); entries whose target is `ignore_class` give 0."""
    target, output = _t(target), _t(output)
    output = ops.moveaxis(output, axis, -1)
    if not from_logits:  # log-probabilities as logits: the softmax below renormalises them
        eps = config.epsilon()
        output = ops.log(ops.clip(output, eps, 1.0 - eps))
    logp = ops.log_softmax(output, axis=-1)
    labels = ops.cast(ops.reshape(target, tuple(logp.shape[:-1])), "int32")
    valid = None
    if ignore_class is not None:
        valid = ops.not_equal(labels, ignore_class)
        labels = ops.where(valid, labels, ops.zeros_like(labels))
    loss = -ops.squeeze(ops.take_along_axis(logp, ops.expand_dims(labels, -1), axis=-1), -1)
    if valid is not None:
        loss = ops.where(valid, loss, ops.zeros_like(loss))
    return loss


def _focal_weight(target, p_t, gamma, alpha, apply_class_balancing):
    weight = ops.power(1.0 - p_t, gamma)
    if apply_class_balancing:
        weight = weight * (target * alpha + (1.0 - target) * (1.0 - alpha))
    return weight


def binary_focal_crossentropy(
    target, output, apply_class_balancing=False, alpha=0.25, gamma=2.0, from_logits=False
):
    """Elementwise binary focal cross-entropy: `binary_crossentropy * (1 - p_t) ** gamma`,
    with `alpha` class weights when `apply_class_balancing`."""
    target, output = _t(target), _t(output)
    p = ops.sigmoid(output) if from_logits else output
    bce = binary_crossentropy(target, output, from_logits)
    p_t = target * p + (1.0 - target) * (1.0 - p)
    return _focal_weight(target, p_t, gamma, alpha, apply_class_balancing) * bce


def categorical_focal_crossentropy(
    target, output, alpha=0.25, gamma=2.0, from_logits=False, axis=-1
):
    """Focal cross-entropy along `axis`: each class's `-target * log(p)` weighted by
    `alpha * (1 - p) ** gamma`."""
    target, output = _t(target), _t(output)
    if from_logits:
        output = ops.softmax(output, axis=axis)
    output = output / ops.sum(output, axis=axis, keepdims=True)
    eps = config.epsilon()
    output = ops.clip(output, eps, 1.0 - eps)
    focal = alpha * ops.power(1.0 - output, gamma) * (-target * ops.log(output))
    return ops.sum(focal, axis=axis)


def ctc_batch_cost(y_true, y_pred, input_length, label_length):
    """CTC loss of each batch entry, shape (batch, 1) (y_pred: softmax outputs, the blank
    last; lengths: (batch, 1))."""
    y_pred = _t(y_pred)
    loss = ops.ctc_loss(
        ops.cast(_t(y_true), "int32"),
        ops.log(y_pred + config.epsilon()),
        ops.cast(ops.squeeze(_t(label_length), -1), "int32"),
        ops.cast(ops.squeeze(_t(input_length), -1), "int32"),
        mask_index=y_pred.shape[-1] - 1,
    )
    return ops.expand_dims(loss, 1)


def ctc_decode(y_pred, input_length, greedy=True, beam_width=100, top_paths=1):
    """Decodes softmax outputs `y_pred` (batch, steps, classes; the blank last) as tf.keras 2
    does: `([paths], log_prob)`, each path an int64 (batch, steps) tensor padded with -1;
    `log_prob` is (batch, 1) for the greedy decoder (minus the summed per-step maximum
    log-probabilities) and (batch, top_paths) for the beam search, which merges repeated
    labels in its paths as TensorFlow's v1 decoder does."""
    y_pred = _t(y_pred)
    if y_pred.ndim != 3:
        raise ValueError(
            f"ctc_decode: y_pred must be (batch, steps, classes). Received shape {y_pred.shape}."
        )
    paths, log_prob = ops.ctc_decode(
        ops.log(y_pred + config.epsilon()),
        ops.cast(ops.reshape(_t(input_length), (-1,)), "int32"),
        strategy="greedy" if greedy else "beam_search",
        beam_width=beam_width,
        top_paths=1 if greedy else top_paths,
        merge_repeated=True,
        mask_index=y_pred.shape[-1] - 1,
    )
    paths = np.asarray(paths).astype("int64")
    if not greedy:
        paths = np.stack([_merge_repeated(p) for p in paths])
    return [convert_to_tensor(p) for p in paths], log_prob


def _merge_repeated(paths):
    """TensorFlow's v1 beam search with merge_repeated: a label equal to the one before it in
    a decoded path is dropped (even where CTC had a blank between them), then -1 pads."""
    out = np.full_like(paths, -1)
    for row, path in enumerate(paths):
        labels = path[path >= 0]
        keep = labels[np.r_[True, labels[1:] != labels[:-1]]] if labels.size else labels
        out[row, : keep.size] = keep
    return out
