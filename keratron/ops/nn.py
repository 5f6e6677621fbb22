"""`keras.ops.nn`: activations, convolutions, pooling, normalization, losses, recurrences."""

from __future__ import annotations

import builtins
import functools
import math

import numpy as np
import torch
import torch.nn.functional as F

from keratron import config
from keratron.autodiff.dtypes import standardize_dtype, to_torch_dtype
from keratron.ops import convolution as _conv
from keratron.ops import rnn as _rnn
from keratron.ops import xent as _xent
from keratron.ops._core import (
    Primitive,
    Tensor,
    _axis_list,
    _concrete,
    as_tensor,
    canonical_axis,
    on_device_of,
)
from keratron.ops._shape_rules import reduced_shape, same_float
from keratron.ops.convolution import *  # noqa: F403
from keratron.ops.elementwise import (
    abs,
    add,
    cast,
    clip,
    divide,
    exp,
    expm1,
    greater,
    less,
    less_equal,
    log10,
    log_sigmoid,
    logical_and,
    maximum,
    minimum,
    multiply,
    negative,
    not_equal,
    polar,
    relu,
    relu6,
    rsqrt,
    sigmoid_p,
    softplus,
    sqrt,
    square,
    subtract,
    tanh,
    where,
)
from keratron.ops.linalg import (
    _promote,
    einsum,
    gelu_derivative,
    matmul,
    norm,
)
from keratron.ops.reduction import (
    cumsum,
    max,
    mean,
    sum,
)
from keratron.ops.rnn import *  # noqa: F403
from keratron.ops.shaping import (
    _const,
    broadcast_to,
    concatenate,
    expand_dims,
    flip,
    gather_p,
    get_item,
    moveaxis,
    reshape,
    squeeze,
    stack,
    take_p,
    transpose,
    tril,
)
from keratron.ops.sorting import (
    sort,
)
from keratron.ops.xent import *  # noqa: F403

__all__ = [*_conv.__all__, *_rnn.__all__, *_xent.__all__]
# Names defined in this file are added to __all__ next to their definitions.


def _float(x) -> Tensor:
    x = as_tensor(x)
    return x if x._value.dtype.is_floating_point else cast(x, config.floatx())


# ------------------------------------------------------------------------ activations
__all__ += ["relu", "relu6", "tanh", "softplus", "log_sigmoid"]  # defined in ops.elementwise


def sigmoid(x):
    """Logistic sigmoid, `1 / (1 + exp(-x))`.

    Example:
        >>> keratron.ops.sigmoid([0.0]).numpy()
        array([0.5], dtype=float32)
    """
    return sigmoid_p.bind(_float(x))


def _silu_vjp(g, x, out):
    s = sigmoid_p.bind(x)
    return (multiply(g, multiply(s, add(multiply(x, subtract(1, s)), 1))),)


silu_p = Primitive("silu", F.silu, _silu_vjp)


def silu(x):
    """Sigmoid linear unit (swish), `x * sigmoid(x)`.

    Example:
        >>> keratron.ops.silu([0.0, 1.0]).shape
        (2,)
    """
    return silu_p.bind(_float(x))


swish = silu

gelu_p = Primitive(
    "gelu",
    lambda x, approximate: F.gelu(x, approximate="tanh" if approximate else "none"),
    lambda g, x, out, approximate: (multiply(g, gelu_derivative(x, approximate)),),
)


def gelu(x, approximate=True):
    """Gaussian error linear unit; `approximate=True` (Keras's default) uses the tanh form.

    Example:
        >>> keratron.ops.gelu([0.0]).numpy()
        array([0.], dtype=float32)
    """
    return gelu_p.bind(_float(x), approximate=bool(approximate))


def elu(x, alpha=1.0):
    """Exponential linear unit: `x` for x > 0, else `alpha * (exp(x) - 1)`.

    Example:
        >>> keratron.ops.elu([-1.0, 1.0]).shape
        (2,)
    """
    x = _float(x)
    # expm1 of min(x, 0): the unused branch must not overflow, or its zero cotangent times
    # inf turns into NaN.
    return where(greater(x, 0), x, multiply(expm1(minimum(x, 0)), alpha))


_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def selu(x):
    """Scaled ELU with the self-normalizing constants (alpha ~1.6733, scale ~1.0507).

    Example:
        >>> keratron.ops.selu([0.0]).numpy()
        array([0.], dtype=float32)
    """
    return multiply(elu(x, _SELU_ALPHA), _SELU_SCALE)


def celu(x, alpha=1.0):
    """Continuously differentiable ELU: `max(x, 0) + min(0, alpha * (exp(x / alpha) - 1))`.

    Example:
        >>> keratron.ops.celu([-1.0, 1.0]).shape
        (2,)
    """
    x = _float(x)
    return where(greater(x, 0), x, multiply(expm1(divide(minimum(x, 0), alpha)), alpha))


def softsign(x):
    """`x / (1 + |x|)`.

    Example:
        >>> keratron.ops.softsign([1.0]).numpy()
        array([0.5], dtype=float32)
    """
    x = _float(x)
    return divide(x, add(abs(x), 1))


def hard_sigmoid(x):
    """Keras 3's piecewise-linear sigmoid, `relu6(x + 3) / 6`.

    Example:
        >>> keratron.ops.hard_sigmoid([0.0]).numpy()
        array([0.5], dtype=float32)
    """
    return divide(relu6(add(_float(x), 3)), 6)


def hard_silu(x):
    """`x * hard_sigmoid(x)` (hard swish, as in MobileNetV3).

    Example:
        >>> keratron.ops.hard_silu([3.0]).numpy()
        array([3.], dtype=float32)
    """
    x = _float(x)
    return multiply(x, hard_sigmoid(x))


hard_swish = hard_silu


def leaky_relu(x, negative_slope=0.2):
    """`x` for x > 0, else `negative_slope * x`.

    Example:
        >>> keratron.ops.leaky_relu([-1.0, 2.0]).numpy()
        array([-0.2,  2. ], dtype=float32)
    """
    x = _float(x)
    return where(greater(x, 0), x, multiply(x, negative_slope))


def sparse_sigmoid(x):
    """0 for x <= -1, 1 for x >= 1, `(x + 1) / 2` between.

    Example:
        >>> keratron.ops.sparse_sigmoid([0.0]).numpy()
        array([0.5], dtype=float32)
    """
    return clip(multiply(add(_float(x), 1), 0.5), 0.0, 1.0)


def sparse_plus(x):
    """0 for x <= -1, `(x + 1)^2 / 4` for -1 < x < 1, x for x >= 1.

    Example:
        >>> keratron.ops.sparse_plus([0.0]).numpy()
        array([0.25], dtype=float32)
    """
    x = _float(x)
    inner = multiply(square(add(clip(x, -1.0, 1.0), 1)), 0.25)
    return where(less_equal(x, -1), 0, where(less(x, 1), inner, x))


def squareplus(x, b=4):
    """`(x + sqrt(x^2 + b)) / 2`, a smooth relu.

    Example:
        >>> keratron.ops.squareplus([0.0]).numpy()
        array([1.], dtype=float32)
    """
    x = _float(x)
    return multiply(add(x, sqrt(add(square(x), b))), 0.5)


def tanh_shrink(x):
    """`x - tanh(x)`.

    Example:
        >>> keratron.ops.tanh_shrink([0.0]).numpy()
        array([0.], dtype=float32)
    """
    x = _float(x)
    return subtract(x, tanh(x))


def hard_tanh(x):
    """`clip(x, -1, 1)`.

    Example:
        >>> keratron.ops.hard_tanh([-2.0, 0.5]).numpy()
        array([-1. ,  0.5], dtype=float32)
    """
    return clip(_float(x), -1.0, 1.0)


def hard_shrink(x, threshold=0.5):
    """`x` where `|x| > threshold`, else 0.

    Example:
        >>> keratron.ops.hard_shrink([0.2, 1.0]).numpy()
        array([0., 1.], dtype=float32)
    """
    x = _float(x)
    return where(greater(abs(x), threshold), x, 0)


def soft_shrink(x, threshold=0.5):
    """`x - threshold` above `threshold`, `x + threshold` below `-threshold`, else 0.

    Example:
        >>> keratron.ops.soft_shrink([1.0]).numpy()
        array([0.5], dtype=float32)
    """
    x = _float(x)
    return where(
        greater(x, threshold),
        subtract(x, threshold),
        where(less(x, -threshold), add(x, threshold), 0),
    )


def threshold(x, threshold, default_value):
    """`x` where `x > threshold`, else `default_value`.

    Example:
        >>> keratron.ops.threshold([0.2, 1.0], 0.5, -1.0).numpy()
        array([-1.,  1.], dtype=float32)
    """
    x = _float(x)
    return where(greater(x, threshold), x, default_value)


def glu(x, axis=-1):
    """Gated linear unit: splits `axis` in halves a, b and returns `a * sigmoid(b)`.

    Example:
        >>> keratron.ops.glu(keratron.ops.ones((2, 4))).shape
        (2, 2)
    """
    x = _float(x)
    axis = canonical_axis(axis, x.ndim, "glu")
    n = x.shape[axis]
    if n % 2:
        raise ValueError(
            f"glu: axis {axis} must have an even size to be split in halves. Received shape "
            f"{x.shape}."
        )
    lead = (slice(None),) * axis
    a = get_item(x, lead + (slice(0, n // 2),))
    b = get_item(x, lead + (slice(n // 2, n),))
    return multiply(a, sigmoid_p.bind(b))


__all__ += [
    "sigmoid",
    "silu",
    "swish",
    "gelu",
    "elu",
    "selu",
    "celu",
    "softsign",
    "hard_sigmoid",
    "hard_silu",
    "hard_swish",
    "leaky_relu",
    "sparse_sigmoid",
    "sparse_plus",
    "squareplus",
    "tanh_shrink",
    "hard_tanh",
    "hard_shrink",
    "soft_shrink",
    "threshold",
    "glu",
]


# ------------------------------------------------------------------------ softmax
softmax_p = Primitive(
    "softmax",
    lambda x, axis: torch.softmax(x, dim=axis),
    lambda g, x, out, axis: (
        multiply(out, subtract(g, sum(multiply(g, out), axis, keepdims=True))),
    ),
    fresh=True,
    shape_rule=same_float,
)
log_softmax_p = Primitive(
    "log_softmax",
    lambda x, axis: torch.log_softmax(x, dim=axis),
    lambda g, x, out, axis: (subtract(g, multiply(exp(out), sum(g, axis, keepdims=True))),),
    fresh=True,
    shape_rule=same_float,
)


def _softmax_call(prim, x, axis):
    x = _float(x)
    if x.ndim == 0:
        x1 = prim.bind(reshape(x, (1,)), axis=0)
        return reshape(x1, ())
    if axis is None:
        return reshape(prim.bind(reshape(x, (-1,)), axis=0), x.shape)
    if isinstance(axis, (tuple, list)):
        axes = canonical_axis(tuple(axis), x.ndim, prim.name)
        if len(set(axes)) != 1:
            # Several axes: gather them last and flatten them into one, so the primitive's
            # max-shifted kernel sees them together.
            axes = tuple(sorted(set(axes)))
            dest = tuple(range(x.ndim - len(axes), x.ndim))
            moved = moveaxis(x, axes, dest)
            flat = reshape(moved, moved.shape[: x.ndim - len(axes)] + (-1,))
            y = reshape(prim.bind(flat, axis=flat.ndim - 1), moved.shape)
            return moveaxis(y, dest, axes)
        axis = axes[0]
    return prim.bind(x, axis=canonical_axis(axis, x.ndim, prim.name))


def softmax(x, axis=-1):
    """`exp(x) / sum(exp(x))` along `axis` (int, tuple, or None for all), computed stably.

    Example:
        >>> keratron.ops.softmax([1e4, 1e4]).numpy()
        array([0.5, 0.5], dtype=float32)
    """
    return _softmax_call(softmax_p, x, axis)


def log_softmax(x, axis=-1):
    """`x - logsumexp(x)` along `axis`, computed stably.

    Example:
        >>> keratron.ops.log_softmax([0.0, 0.0]).numpy()
        array([-0.6931472, -0.6931472], dtype=float32)
    """
    return _softmax_call(log_softmax_p, x, axis)


__all__ += ["softmax", "log_softmax"]


# ------------------------------------------------------------------------ encodings
def _one_hot_impl(x, num_classes, axis, dtype):
    classes = torch.arange(num_classes, device=x.device)
    # Negative and out-of-range labels match no class and give all-zero rows (as TF).
    y = (x.long().unsqueeze(-1) == classes).to(dtype)
    return y if axis == y.dim() - 1 else torch.movedim(y, -1, axis)


one_hot_p = Primitive("one_hot", _one_hot_impl)


def _check_dense(op, sparse):
    if sparse:
        raise ValueError(f"{op}: sparse outputs are not supported. Received: sparse={sparse!r}")


def one_hot(x, num_classes, axis=-1, dtype=None, sparse=False):
    """One-hot encodes integer labels into a new axis of size `num_classes`.

    Args:
        x: integer labels; negative or out-of-range labels give all-zero vectors.
        num_classes: number of classes.
        axis: where the new axis goes (default last).
        dtype: output dtype; default floatx.
        sparse: must be False.

    Example:
        >>> keratron.ops.one_hot([0, 2], 3).numpy()
        array([[1., 0., 0.],
               [0., 0., 1.]], dtype=float32)
    """
    _check_dense("one_hot", sparse)
    x = as_tensor(x)
    if int(num_classes) < 1:
        raise ValueError(f"one_hot: `num_classes` must be >= 1. Received: {num_classes!r}")
    dt = to_torch_dtype(standardize_dtype(dtype))
    return one_hot_p.bind(
        x,
        num_classes=int(num_classes),
        axis=canonical_axis(axis, x.ndim + 1, "one_hot"),
        dtype=dt,
    )


def multi_hot(inputs, num_classes=None, axis=-1, dtype=None, sparse=False, **kwargs):
    """Multi-hot encoding: 1 for every class that occurs in a sample.

    A 1-D input is one sample; a 2-D input `(batch, n)` gives `(batch, num_classes)`.

    Example:
        >>> keratron.ops.multi_hot([0, 4], num_classes=5).numpy()
        array([1., 0., 0., 0., 1.], dtype=float32)
    """
    if num_classes is None:
        num_classes = kwargs.pop("num_tokens", None)
    if num_classes is None:
        raise ValueError("multi_hot: argument `num_classes` must be specified.")
    if kwargs:
        raise TypeError(f"multi_hot: unexpected keyword arguments {sorted(kwargs)}.")
    x = as_tensor(inputs)
    reduce_axis = 1 if x.ndim > 1 else 0
    return max(one_hot(x, num_classes, axis, dtype, sparse), axis=reduce_axis)


__all__ += ["one_hot", "multi_hot"]


# ------------------------------------------------------------------------ normalization
def _moments_impl(x, axes, keepdims):
    var, mean = torch.var_mean(x, dim=axes, correction=0, keepdim=keepdims)
    return mean, var


def _moments_vjp(gs, x, out, axes, keepdims):
    gm, gv = gs
    mean = out[0]
    n = 1
    for a in axes:
        n *= x.shape[a]
    if not keepdims:
        shape = tuple(1 if i in axes else d for i, d in enumerate(x.shape))
        gm, gv, mean = reshape(gm, shape), reshape(gv, shape), reshape(mean, shape)
    # d mean / dx = 1/n; d var / dx = 2 (x - mean) / n.
    return (add(divide(gm, n), multiply(multiply(gv, 2.0 / n), subtract(x, mean))),)


def _moments_shape(x, axes, keepdims):
    shape = reduced_shape(x[0], tuple(axes), keepdims) if axes else None
    if shape is None or not x[1].is_floating_point:
        return None
    return [(shape, x[1]), (shape, x[1])]


moments_p = Primitive(
    "moments", _moments_impl, _moments_vjp, multiple_results=True, shape_rule=_moments_shape
)


def moments(x, axes, keepdims=False, synchronized=False):
    """Mean and (population) variance of `x` over `axes`, in one pass.

    float16/bfloat16 inputs are reduced in float32 and cast back, as Keras does.

    Args:
        x: input tensor.
        axes: int or list of axes to reduce.
        keepdims: keep reduced axes with size 1.
        synchronized: for multi-replica training; with one process it changes nothing.

    Returns:
        `(mean, variance)`.

    Example:
        >>> m, v = keratron.ops.moments([[1.0, 3.0]], axes=[1])
        >>> m.numpy(), v.numpy()
        (array([2.], dtype=float32), array([1.], dtype=float32))
    """
    if synchronized and torch.distributed.is_available() and torch.distributed.is_initialized():
        if torch.distributed.get_world_size() > 1:
            raise ValueError(
                "moments: synchronized=True across several processes must be handled by the "
                "distribution strategy; call moments with synchronized=False there."
            )
    x = _float(x)
    orig = x._value.dtype
    if orig in (torch.float16, torch.bfloat16):
        x = cast(x, "float32")
    axes = canonical_axis(axes if isinstance(axes, (tuple, list)) else (axes,), x.ndim, "moments")
    axes = tuple(sorted(set(axes)))
    if not axes:
        return x, multiply(x, 0)
    mean, var = moments_p.bind(x, axes=axes, keepdims=bool(keepdims))
    if orig is not x._value.dtype:
        mean, var = cast(mean, orig), cast(var, orig)
    return mean, var


def batch_normalization(x, mean, variance, axis, offset=None, scale=None, epsilon=1e-3):
    """`(x - mean) / sqrt(variance + epsilon) * scale + offset`, statistics along `axis`.

    `mean`, `variance`, `offset` and `scale` are vectors of length `x.shape[axis]` (or
    tensors that already broadcast against x).

    Example:
        >>> x = keratron.ops.ones((2, 3))
        >>> keratron.ops.batch_normalization(x, [1.0] * 3, [1.0] * 3, axis=-1).shape
        (2, 3)
    """
    x = _float(x)
    axis = canonical_axis(axis, x.ndim, "batch_normalization")
    names = ["mean", "variance", "offset", "scale"]
    given = [(n, v) for n, v in zip(names, (mean, variance, offset, scale)) if v is not None]
    vals = _promote(x, *(v for _, v in given))
    x, params = vals[0], dict(zip((n for n, _ in given), vals[1:]))
    shape = [1] * x.ndim
    shape[axis] = x.shape[axis]
    for name, v in params.items():
        if v.ndim == 1:
            if v.shape[0] != x.shape[axis]:
                raise ValueError(
                    f"batch_normalization: `{name}` must have length {x.shape[axis]} (axis "
                    f"{axis} of x with shape {x.shape}). Received shape {v.shape}."
                )
            params[name] = reshape(v, shape)
    inv = rsqrt(add(params["variance"], epsilon))
    if "scale" in params:
        inv = multiply(inv, params["scale"])
    shift = multiply(params["mean"], inv)
    if "offset" in params:
        shift = subtract(params["offset"], shift)
        return add(multiply(x, inv), shift)
    return subtract(multiply(x, inv), shift)


def normalize(x, axis=-1, order=2, epsilon=None):
    """Divides `x` by its `order`-norm along `axis` (at least `epsilon`, default
    `config.epsilon()`).

    Example:
        >>> keratron.ops.normalize([3.0, 4.0]).numpy()
        array([0.6, 0.8], dtype=float32)
    """
    if not isinstance(order, int) or isinstance(order, bool) or order < 1:
        raise ValueError(f"normalize: argument `order` must be an int >= 1. Received: {order!r}")
    x = _float(x)
    if x.ndim == 0:
        x = reshape(x, (1,))
    eps = config.epsilon() if epsilon is None else epsilon
    if order == 2:
        inv = minimum(rsqrt(sum(square(x), axis, keepdims=True)), 1.0 / eps)
        return multiply(x, inv)
    return divide(x, maximum(norm(x, ord=order, axis=axis, keepdims=True), eps))


__all__ += ["moments", "batch_normalization", "normalize"]

__all__ += ["polar"]  # defined in ops.elementwise


# ------------------------------------------------------------------------ unfold/fold
def _pair_arg(v, op, name):
    if isinstance(v, int):
        return (v, v)
    t = tuple(int(e) for e in v)
    if len(t) != 2:
        raise ValueError(f"{op}: `{name}` must be an int or a pair of ints. Received: {v!r}")
    return t


_unfold_p = Primitive(
    "unfold",
    lambda x, kernel_size, dilation, padding, stride: F.unfold(
        x, kernel_size, dilation=dilation, padding=padding, stride=stride
    ),
    lambda g, x, out, kernel_size, dilation, padding, stride: (
        _fold_p.bind(
            g,
            output_size=tuple(x.shape[-2:]),
            kernel_size=kernel_size,
            dilation=dilation,
            padding=padding,
            stride=stride,
        ),
    ),
)
# fold (col2im) is the adjoint of unfold (im2col): each is the other's VJP.
_fold_p = Primitive(
    "fold",
    lambda x, output_size, kernel_size, dilation, padding, stride: F.fold(
        x, output_size, kernel_size, dilation=dilation, padding=padding, stride=stride
    ),
    lambda g, x, out, output_size, kernel_size, dilation, padding, stride: (
        _unfold_p.bind(
            g, kernel_size=kernel_size, dilation=dilation, padding=padding, stride=stride
        ),
    ),
)

__all__ += ["unfold", "fold"]


def unfold(x, kernel_size, dilation=1, padding=0, stride=1):
    """Extracts sliding blocks (im2col) from `(N, C, H, W)` images into
    `(N, C * kh * kw, L)`, as torch.nn.functional.unfold.

    Example:
        >>> keratron.ops.unfold(keratron.ops.ones((1, 2, 4, 4)), 2).shape
        (1, 8, 9)
    """
    x = as_tensor(x)
    if x.ndim != 4:
        raise ValueError(f"unfold: expected (N, C, H, W) input. Received shape {x.shape}.")
    return _unfold_p.bind(
        x,
        kernel_size=_pair_arg(kernel_size, "unfold", "kernel_size"),
        dilation=_pair_arg(dilation, "unfold", "dilation"),
        padding=_pair_arg(padding, "unfold", "padding"),
        stride=_pair_arg(stride, "unfold", "stride"),
    )


def fold(x, output_size, kernel_size, dilation=1, padding=0, stride=1):
    """Sums sliding blocks `(N, C * kh * kw, L)` back into `(N, C, H, W)` images (col2im),
    the adjoint of `unfold`.

    Example:
        >>> blocks = keratron.ops.unfold(keratron.ops.ones((1, 1, 3, 3)), 2)
        >>> keratron.ops.fold(blocks, (3, 3), 2).numpy()[0, 0]
        array([[1., 2., 1.],
               [2., 4., 2.],
               [1., 2., 1.]], dtype=float32)
    """
    x = as_tensor(x)
    if x.ndim != 3:
        raise ValueError(f"fold: expected (N, C * kh * kw, L) input. Received shape {x.shape}.")
    return _fold_p.bind(
        x,
        output_size=_pair_arg(output_size, "fold", "output_size"),
        kernel_size=_pair_arg(kernel_size, "fold", "kernel_size"),
        dilation=_pair_arg(dilation, "fold", "dilation"),
        padding=_pair_arg(padding, "fold", "padding"),
        stride=_pair_arg(stride, "fold", "stride"),
    )


# ------------------------------------------------------ attention, normalization, pooling, CTC
__all__ += [
    "dot_product_attention",
    "layer_normalization",
    "rms_normalization",
    "depth_to_space",
    "space_to_depth",
    "adaptive_average_pool",
    "adaptive_max_pool",
    "sparsemax",
    "psnr",
    "ctc_loss",
    "ctc_decode",
]


def _large_negative(dtype: str) -> float:
    # Finite, so that a fully masked row gives a uniform softmax instead of NaNs (as Keras).
    return -0.7 * (65500.0 if dtype == "float16" else 3.38953e38)


def dot_product_attention(
    query,
    key,
    value,
    bias=None,
    mask=None,
    scale=None,
    is_causal=False,
    flash_attention=None,
    attn_logits_soft_cap=None,
):
    """Scaled dot-product attention, `softmax(q k^T * scale + bias) v`, per head.

    Shapes follow Keras: query `(B, T, N, H)`, key and value `(B, S, K, H)` with `N` a
    multiple of `K` (grouped-query attention; K == 1 is multi-query attention).

    Args:
        query, key, value: the inputs.
        bias: optional additive logits bias, broadcastable to `(B, N, T, S)`.
        mask: optional boolean mask broadcastable to `(B, N, T, S)`; True attends.
        scale: logits scale; default `1 / sqrt(H)`.
        is_causal: let position t attend only to positions <= t (top-left aligned).
        flash_attention: accepted for compatibility; the result is the same either way.
        attn_logits_soft_cap: if set, logits become `cap * tanh(logits / cap)`.

    Returns:
        `(B, T, N, H)`.

    Example:
        >>> q = keratron.ops.ones((2, 4, 8, 16))
        >>> kv = keratron.ops.ones((2, 6, 8, 16))
        >>> keratron.ops.dot_product_attention(q, kv, kv).shape
        (2, 4, 8, 16)
    """
    q, k, v = _promote(query, key, value)
    q, k, v = _float(q), _float(k), _float(v)
    if q.ndim != 4 or k.ndim != 4 or v.ndim != 4:
        raise ValueError(
            "dot_product_attention: query, key and value must be 4-D (B, T, N, H). Received "
            f"shapes {q.shape}, {k.shape} and {v.shape}."
        )
    if bias is not None and mask is not None:
        raise ValueError("dot_product_attention: pass `bias` or `mask`, not both.")
    b, t, n, h = q.shape
    s, kh = k.shape[1], k.shape[2]
    if k.shape != v.shape or k.shape[0] != b or k.shape[3] != h or n % kh:
        raise ValueError(
            "dot_product_attention: key and value must be (B, S, K, H) with the query's B and "
            f"H and a K that divides N={n}. Received query {q.shape}, key {k.shape}, value "
            f"{v.shape}."
        )
    g = n // kh
    scale = 1.0 / math.sqrt(h) if scale is None else float(scale)
    compute = "float32" if q.dtype in ("float16", "bfloat16") else q.dtype
    qg = reshape(q, (b, t, kh, g, h))
    logits = multiply(einsum("btkgh,bskh->bkgts", qg, k), scale)
    logits = reshape(cast(logits, compute), (b, n, t, s))
    if attn_logits_soft_cap is not None:
        cap = float(attn_logits_soft_cap)
        logits = multiply(tanh(divide(logits, cap)), cap)
    if bias is not None:
        logits = add(logits, cast(as_tensor(bias), compute))
    keep = None
    if mask is not None:
        keep = cast(as_tensor(mask), "bool")
    if is_causal:
        causal = on_device_of(cast(tril(np.ones((t, s), dtype=bool)), "bool"), logits)
        keep = causal if keep is None else logical_and(keep, causal)
    if keep is not None:
        logits = where(keep, logits, _large_negative(q.dtype))
    probs = cast(softmax(logits, axis=-1), q.dtype)
    probs = reshape(probs, (b, kh, g, t, s))
    return reshape(einsum("bkgts,bskh->btkgh", probs, v), (b, t, n, h))


def _norm_setup(x, axis, op):
    x = _float(x)
    orig = x.dtype
    if orig in ("float16", "bfloat16"):
        x = cast(x, "float32")  # statistics in at least float32, as Keras
    axes = _axis_list(axis, x.ndim, op)
    if not axes:
        raise ValueError(f"{op}: `axis` must name at least one axis. Received: axis={axis!r}")
    return x, orig, axes


def _norm_param(p, x, axes):
    """Broadcasts a per-feature parameter against x (Keras reshapes it to x's rank unless the
    normalized axis is the last one)."""
    p = cast(as_tensor(p), x.dtype)
    if p.ndim != x.ndim and tuple(axes) != (x.ndim - 1,):
        p = reshape(p, tuple(x.shape[i] if i in axes else 1 for i in range(x.ndim)))
    return p


def layer_normalization(x, gamma=None, beta=None, axis=-1, epsilon=None, **kwargs):
    """Normalizes `x` to zero mean and unit variance over `axis`, then scales by `gamma`
    and shifts by `beta` (Ba et al., 2016).

    Args:
        x: input tensor.
        gamma: optional scale, shaped like the normalized axes.
        beta: optional offset, shaped like the normalized axes.
        axis: int or list of ints; default -1.
        epsilon: added to the variance; default `config.epsilon()`.
        **kwargs: `rms_scaling=True` (deprecated in Keras) divides by the standard deviation
            without centering.

    Example:
        >>> keratron.ops.layer_normalization([0.0, 1.0, 2.0, 3.0, 4.0]).numpy().round(4)
        array([-1.4142, -0.7071,  0.    ,  0.7071,  1.4142], dtype=float32)
    """
    rms_scaling = kwargs.pop("rms_scaling", False)
    if kwargs:
        raise TypeError(f"layer_normalization: unexpected keyword arguments {sorted(kwargs)}.")
    x, orig, axes = _norm_setup(x, axis, "layer_normalization")
    eps = config.epsilon() if epsilon is None else float(epsilon)
    m = mean(x, axis=axes, keepdims=True)
    centered = subtract(x, m)
    var = mean(square(centered), axis=axes, keepdims=True)
    inv = rsqrt(add(var, eps))
    out = multiply(x if rms_scaling else centered, inv)
    if gamma is not None:
        out = multiply(out, _norm_param(gamma, x, axes))
    if beta is not None and not rms_scaling:
        out = add(out, _norm_param(beta, x, axes))
    return cast(out, orig)


def rms_normalization(x, scale=None, axis=-1, epsilon=None):
    """`x / sqrt(mean(x**2, axis) + epsilon) * scale` (Zhang and Sennrich, 2019).

    Example:
        >>> keratron.ops.rms_normalization([3.0, 4.0], epsilon=0.0).numpy().round(4)
        array([0.8485, 1.1314], dtype=float32)
    """
    x = _float(x)
    if x.ndim == 0:
        x = reshape(x, (1,))
    x, orig, axes = _norm_setup(x, axis, "rms_normalization")
    eps = config.epsilon() if epsilon is None else float(epsilon)
    out = multiply(x, rsqrt(add(mean(square(x), axis=axes, keepdims=True), eps)))
    if scale is not None:
        out = multiply(out, _norm_param(scale, x, axes))
    return cast(out, orig)


def _block_args(x, block_size, data_format, op):
    x = as_tensor(x)
    if x.ndim != 4:
        raise ValueError(f"{op}: expected a 4-D tensor. Received shape {x.shape}.")
    bs = int(block_size)
    if bs < 1:
        raise ValueError(f"{op}: block_size must be a positive int. Received: {block_size!r}")
    if data_format not in ("channels_last", "channels_first"):
        raise ValueError(
            f"{op}: data_format must be 'channels_last' or 'channels_first'. Received: "
            f"{data_format!r}"
        )
    return x, bs


def depth_to_space(x, block_size, data_format="channels_last"):
    """Moves channel blocks into `block_size x block_size` spatial tiles (TensorFlow's
    depth_to_space): `(N, H, W, C)` becomes `(N, H * b, W * b, C / b**2)`.

    Example:
        >>> keratron.ops.depth_to_space(keratron.ops.ones((1, 2, 2, 8)), 2).shape
        (1, 4, 4, 2)
    """
    x, bs = _block_args(x, block_size, data_format, "depth_to_space")
    c = x.shape[3] if data_format == "channels_last" else x.shape[1]
    if c % (bs * bs):
        raise ValueError(
            f"depth_to_space: the channel count {c} must be divisible by block_size**2 = {bs * bs}."
        )
    nc = c // (bs * bs)
    if data_format == "channels_last":
        n, h, w, _ = x.shape
        y = transpose(reshape(x, (n, h, w, bs, bs, nc)), (0, 1, 3, 2, 4, 5))
        return reshape(y, (n, h * bs, w * bs, nc))
    # channels_first keeps each output channel's block contiguous (c * b * b + i * b + j),
    # as Keras's torch backend does.
    n, _, h, w = x.shape
    y = transpose(reshape(x, (n, nc, bs, bs, h, w)), (0, 1, 4, 2, 5, 3))
    return reshape(y, (n, nc, h * bs, w * bs))


def space_to_depth(x, block_size, data_format="channels_last"):
    """Moves `block_size x block_size` spatial tiles into channels (TensorFlow's
    space_to_depth): `(N, H, W, C)` becomes `(N, H / b, W / b, C * b**2)`.

    Example:
        >>> keratron.ops.space_to_depth(keratron.ops.ones((1, 4, 4, 2)), 2).shape
        (1, 2, 2, 8)
    """
    x, bs = _block_args(x, block_size, data_format, "space_to_depth")
    h, w = (x.shape[1], x.shape[2]) if data_format == "channels_last" else x.shape[2:]
    if h % bs or w % bs:
        raise ValueError(
            f"space_to_depth: height {h} and width {w} must be divisible by block_size={bs}."
        )
    if data_format == "channels_last":
        n, _, _, c = x.shape
        y = transpose(reshape(x, (n, h // bs, bs, w // bs, bs, c)), (0, 1, 3, 2, 4, 5))
        return reshape(y, (n, h // bs, w // bs, c * bs * bs))
    n, c = x.shape[:2]
    y = transpose(reshape(x, (n, c, h // bs, bs, w // bs, bs)), (0, 1, 3, 5, 2, 4))
    return reshape(y, (n, c * bs * bs, h // bs, w // bs))


def _adaptive_windows(length: int, out: int):
    """torch's adaptive pooling windows: [floor(i L / out), ceil((i + 1) L / out))."""
    starts = [(i * length) // out for i in range(out)]
    ends = [-(-((i + 1) * length) // out) for i in range(out)]
    return starts, ends


def _adaptive_pool(inputs, output_size, data_format, op, reduce):
    x = as_tensor(inputs)
    nsp = x.ndim - 2
    if nsp not in (1, 2, 3):
        raise ValueError(f"{op}: inputs must be 3-D, 4-D or 5-D. Received shape {x.shape}.")
    fmt = config.standardize_data_format(data_format)
    sizes = (output_size,) * nsp if isinstance(output_size, int) else tuple(output_size)
    if len(sizes) != nsp or any(int(o) < 1 for o in sizes):
        raise ValueError(
            f"{op}: output_size must be a positive int or {nsp} positive ints. Received: "
            f"{output_size!r}"
        )
    first = 1 if fmt == "channels_last" else 2
    for i, o in enumerate(sizes):
        axis = first + i
        x = reduce(x, axis, int(o))
    return x


def _avg_along(x, axis, out):
    length = x.shape[axis]
    starts, ends = _adaptive_windows(length, out)
    w = np.zeros((length, out))
    for i, (a, b) in enumerate(zip(starts, ends)):
        w[a:b, i] = 1.0 / (b - a)
    y = matmul(moveaxis(_float(x), axis, -1), _const(w, x, dtype=_float(x)._value.dtype))
    return moveaxis(y, -1, axis)


def _max_along(x, axis, out):
    length = x.shape[axis]
    starts, ends = _adaptive_windows(length, out)
    k = builtins.max(b - a for a, b in zip(starts, ends))
    # Shorter windows repeat their last index: a repeated element cannot change a max.
    idx = np.array([[builtins.min(a + j, b - 1) for j in range(k)] for a, b in zip(starts, ends)])
    y = take_p.bind(moveaxis(x, axis, -1), _const(idx, x), axis=x.ndim - 1)
    return moveaxis(max(y, axis=-1), -1, axis)


def adaptive_average_pool(inputs, output_size, data_format=None):
    """Average pooling to a fixed output size, with torch's windows
    `[floor(i L / out), ceil((i + 1) L / out))` per spatial axis (1-D to 3-D).

    Example:
        >>> keratron.ops.adaptive_average_pool(keratron.ops.ones((1, 7, 5, 3)), (2, 2)).shape
        (1, 2, 2, 3)
    """
    return _adaptive_pool(inputs, output_size, data_format, "adaptive_average_pool", _avg_along)


def adaptive_max_pool(inputs, output_size, data_format=None):
    """Max pooling to a fixed output size (windows as `adaptive_average_pool`).

    Example:
        >>> keratron.ops.adaptive_max_pool(keratron.ops.ones((1, 7, 5, 3)), 2).shape
        (1, 2, 2, 3)
    """
    return _adaptive_pool(inputs, output_size, data_format, "adaptive_max_pool", _max_along)


def sparsemax(x, axis=-1):
    """Sparsemax (Martins and Astudillo, 2016): the Euclidean projection of `x` onto the
    probability simplex along `axis`; like softmax but with exact zeros.

    Example:
        >>> keratron.ops.sparsemax([1.0, 1.0, -5.0]).numpy()
        array([0.5, 0.5, 0. ], dtype=float32)
    """
    x = _float(x)
    axis = canonical_axis(axis, x.ndim, "sparsemax")
    z = moveaxis(x, axis, -1)
    zs = flip(sort(z, axis=-1), -1)  # descending
    cs = cumsum(zs, axis=-1)
    n = z.shape[-1]
    r = _const(np.arange(1, n + 1), z, dtype=z._value.dtype)
    support = greater(zs, divide(subtract(cs, 1), r))
    k = sum(cast(support, z.dtype), axis=-1, keepdims=True)
    # tau = (sum of the k largest - 1) / k, read from the cumulative sum at k - 1.
    top = gather_p.bind(cs, cast(subtract(k, 1), "int64"), axis=cs.ndim - 1)
    tau = divide(subtract(top, 1), k)
    return moveaxis(relu(subtract(z, tau)), -1, axis)


def psnr(x1, x2, max_val):
    """Peak signal-to-noise ratio `20 log10(max_val) - 10 log10(mean((x1 - x2)**2))`, over
    all elements.

    Example:
        >>> round(float(keratron.ops.psnr([0.0, 0.0], [0.1, 0.1], 1.0)), 3)
        20.0
    """
    a, b = _promote(_float(x1), _float(x2))
    if a.shape != b.shape:
        raise ValueError(
            f"psnr: x1 and x2 must have the same shape. Received {a.shape}, {b.shape}."
        )
    mse = mean(square(subtract(a, b)))
    peak = cast(as_tensor(max_val), a.dtype)
    return subtract(multiply(log10(peak), 20.0), multiply(log10(mse), 10.0))


def ctc_loss(target, output, target_length, output_length, mask_index=0):
    """Connectionist temporal classification loss per batch element, from logits.

    The forward (alpha) recursion runs in log space over time with keratron ops, so the
    gradient is the usual CTC gradient. An impossible alignment gives +inf.

    Args:
        target: int labels `(B, L)`, padded past `target_length`.
        output: logits `(B, T, C)` (log-softmax is applied here).
        target_length: `(B,)` label counts.
        output_length: `(B,)` valid time steps.
        mask_index: the blank class.

    Example:
        >>> loss = keratron.ops.ctc_loss([[1]], keratron.ops.zeros((1, 2, 2)), [1], [2])
        >>> loss.numpy().round(6)  # -log(3 / 4): 3 of the 4 paths emit the label
        array([0.287682], dtype=float32)
    """
    logits = _float(output)
    if logits.dtype in ("float16", "bfloat16"):
        logits = cast(logits, "float32")
    labels = cast(as_tensor(target), "int64")
    tl = cast(as_tensor(target_length), "int64")
    ol = cast(as_tensor(output_length), "int64")
    if logits.ndim != 3 or labels.ndim != 2 or labels.shape[0] != logits.shape[0]:
        raise ValueError(
            "ctc_loss: expected output (B, T, C) and target (B, L). Received shapes "
            f"{logits.shape} and {labels.shape}."
        )
    b, t_max, _ = logits.shape
    lab = labels.shape[1]
    s = 2 * lab + 1
    logp = log_softmax(logits, axis=-1)
    blank = int(mask_index)
    # Extended labels: blank, l1, blank, l2, ..., blank (length S = 2 L + 1).
    blanks = _const(np.full((b, lab + 1), blank), labels)
    ext = reshape(
        stack([get_item(blanks, (slice(None), slice(0, lab))), labels], axis=-1), (b, 2 * lab)
    )
    ext = concatenate([ext, get_item(blanks, (slice(None), slice(lab, lab + 1)))], axis=1)
    lp = gather_p.bind(logp, broadcast_to(expand_dims(ext, 1), (b, t_max, s)), axis=2)
    # A label may follow the label two places back (skipping a blank) unless they repeat.
    prev2 = concatenate(
        [_const(np.full((b, 2), -1), labels), get_item(ext, (slice(None), slice(0, s - 2)))], axis=1
    )
    skip = logical_and(not_equal(ext, blank), not_equal(ext, prev2))
    neg = -1e30  # finite "log 0": keeps logsumexp's gradient free of inf - inf
    pos = np.arange(s)
    init = _const(np.where(pos < 2, 0.0, neg), logits, dtype=logits._value.dtype)
    alpha = add(get_item(lp, (slice(None), 0)), init)
    time = _const(np.arange(t_max), logits)
    fill1 = _const(np.full((1,), neg), logits, dtype=logits._value.dtype)
    fill2 = _const(np.full((2,), neg), logits, dtype=logits._value.dtype)
    from keratron.ops.reduction import logsumexp

    for step in range(1, t_max):
        a1 = concatenate(
            [broadcast_to(fill1, (b, 1)), get_item(alpha, (slice(None), slice(0, s - 1)))], 1
        )
        a2 = concatenate(
            [broadcast_to(fill2, (b, 2)), get_item(alpha, (slice(None), slice(0, s - 2)))], 1
        )
        a2 = where(skip, a2, neg)
        new = add(
            logsumexp(stack([alpha, a1, a2], axis=0), axis=0), get_item(lp, (slice(None), step))
        )
        active = expand_dims(less(get_item(time, step), ol), 1)
        alpha = where(active, new, alpha)
    end = expand_dims(multiply(tl, 2), 1)
    last = gather_p.bind(alpha, end, axis=1)
    before = gather_p.bind(alpha, maximum(subtract(end, 1), 0), axis=1)
    before = where(expand_dims(greater(tl, 0), 1), before, neg)
    loss = negative(squeeze(logsumexp(concatenate([last, before], 1), axis=1, keepdims=True), 1))
    return where(greater(loss, 1e29), float("inf"), loss)


def _greedy_decode(x, lengths, merge_repeated, blank):
    b, t_max, _ = x.shape
    best = x.argmax(-1)
    scores = x.max(-1).values
    past_end = torch.arange(t_max, device=x.device)[None, :] >= lengths[:, None]
    best = torch.where(past_end, blank, best)
    scores = torch.where(past_end, torch.zeros_like(scores), scores)
    if merge_repeated:
        repeat = torch.zeros_like(past_end)
        repeat[:, 1:] = best[:, 1:] == best[:, :-1]
        best = torch.where(repeat, blank, best)
    drop = best == blank
    # Stable reorder: kept labels first, in time order; dropped ones become -1 at the end.
    order = torch.where(drop, t_max, torch.arange(t_max, device=x.device)[None, :])
    order = torch.argsort(order, dim=1, stable=True)
    paths = torch.gather(torch.where(drop, -1, best), 1, order)
    return paths[None].to(torch.int32), -scores.sum(1, keepdim=True)


def _bump(beams: dict, prefix, which, value):
    """Adds probability `value` (log space) to the blank (0) or label (1) track of `prefix`."""
    neg = -np.inf
    pb, pnb = beams.get(prefix, (neg, neg))
    if which == 0:
        pb = np.logaddexp(pb, value)
    else:
        pnb = np.logaddexp(pnb, value)
    beams[prefix] = (pb, pnb)


def _beam_decode(x, lengths, beam_width, top_paths, blank):
    """CTC prefix beam search: each prefix keeps the log-probability of its alignments
    ending in a blank and ending in its last label, so repeats merge correctly."""
    logp = torch.log_softmax(x.double(), -1).cpu().numpy()
    b, t_max, c = logp.shape
    neg = -np.inf
    all_paths = np.full((top_paths, b, t_max), -1, dtype=np.int32)
    all_scores = np.full((b, top_paths), neg)
    for i in range(b):
        beams = {(): (0.0, neg)}
        for t in range(int(lengths[i])):
            row = logp[i, t]
            nxt = {}
            bump = functools.partial(_bump, nxt)

            for prefix, (pb, pnb) in beams.items():
                total = np.logaddexp(pb, pnb)
                bump(prefix, 0, total + row[blank])
                last = prefix[-1] if prefix else None
                for k in range(c):
                    if k == blank:
                        continue
                    if k == last:
                        bump(prefix, 1, pnb + row[k])  # the repeat collapses
                        bump(prefix + (k,), 1, pb + row[k])  # a blank separated them
                    else:
                        bump(prefix + (k,), 1, total + row[k])
            ranked = sorted(nxt.items(), key=lambda kv: -np.logaddexp(*kv[1]))
            beams = dict(ranked[:beam_width])
        ranked = sorted(beams.items(), key=lambda kv: -np.logaddexp(*kv[1]))[:top_paths]
        for j, (prefix, (pb, pnb)) in enumerate(ranked):
            all_paths[j, i, : len(prefix)] = prefix
            all_scores[i, j] = np.logaddexp(pb, pnb)
    return all_paths, all_scores


def ctc_decode(
    inputs,
    sequence_lengths,
    strategy="greedy",
    beam_width=100,
    top_paths=1,
    merge_repeated=True,
    mask_index=0,
):
    """Decodes CTC outputs `(B, T, C)` into label sequences (no gradient; eager).

    "greedy" takes the best class per step, merges repeats (when `merge_repeated`) and drops
    blanks; its score is minus the summed per-step maxima of `inputs`. "beam_search" runs a
    prefix beam search over the log-softmax of `inputs` and scores each path by its total
    log-probability.

    Returns:
        `(paths, scores)`: int32 `(top_paths, B, T)` padded with -1, and `(B, top_paths)`.

    Example:
        >>> logits = keratron.ops.one_hot([[1, 1, 0, 2]], 3) * 5.0
        >>> keratron.ops.ctc_decode(logits, [4])[0].numpy()[0, 0]
        array([ 1,  2, -1, -1], dtype=int32)
    """
    x = _float(inputs)
    if x.ndim != 3:
        raise ValueError(f"ctc_decode: inputs must be (B, T, C). Received shape {x.shape}.")
    if not _concrete(x):
        raise ValueError("ctc_decode: decoding runs eagerly and cannot be traced.")
    lengths = as_tensor(sequence_lengths)._value.to(device=x._value.device, dtype=torch.int64)
    v = x._value.float() if x.dtype in ("float16", "bfloat16") else x._value
    blank = int(mask_index) % x.shape[-1]
    if strategy == "greedy":
        paths, scores = _greedy_decode(v, lengths, bool(merge_repeated), blank)
        return Tensor(paths), Tensor(scores)
    if strategy == "beam_search":
        if int(beam_width) < 1 or int(top_paths) < 1 or int(top_paths) > int(beam_width):
            raise ValueError(
                "ctc_decode: need 1 <= top_paths <= beam_width. Received "
                f"top_paths={top_paths}, beam_width={beam_width}."
            )
        paths, scores = _beam_decode(v, lengths.cpu(), int(beam_width), int(top_paths), blank)
        dev = x._value.device
        return (
            Tensor(torch.from_numpy(paths).to(dev)),
            Tensor(torch.from_numpy(scores).to(device=dev, dtype=v.dtype)),
        )
    raise ValueError(
        f"ctc_decode: strategy must be 'greedy' or 'beam_search'. Received: {strategy!r}"
    )
