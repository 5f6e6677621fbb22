"""Batch normalization in training, one primitive each way.

`fused_batch_normalization(x, axis, scale, offset, epsilon)` returns what Keras's
BatchNormalization computes in training from `moments` and `batch_normalization`: x
normalized with the batch statistics of every axis but `axis`, and those statistics (mean and
population variance). Composed from those ops, the backward pass reads and writes the whole
activation tensor about eight times (the products' cotangents, two reductions, the moments'
cotangent); as the primitive `batch_norm_grad` it is torch's batch-norm backward kernel, one
pass for both per-channel reductions and one for dx (on the CPU, from 4 MiB on, that kernel
for the reductions and dx by chunks, into a compiled plan's kept buffer). The forward
computes the statistics with sums on CPU, where `torch.var_mean` over the leading axes of a
channels-last tensor runs a scalar loop (41 ms against 20 ms for sum, subtract, square and sum
on a 32x56x56x128 float32 tensor, at the same accuracy), then y with torch's inference
kernel; on CUDA, with torch's batch-norm forward kernel.

A float16 or bfloat16 `x` is normalized by torch's batch-norm kernels on every device, which
compute in float32 and round y once (the values Keras's layer gets by casting to float32 and
back, to an ulp of the half type): its scale and offset are float32 and so are the
statistics. On a bfloat16 MobileNet batch of 8x112x112x64 (2-core CPU) the forward took 0.95 ms
against 20 ms through float32 copies, the backward 1.6 against 29.

A gradient taken under another recording tape (second order) goes through the composite ops
instead, so that the backward pass is differentiable too.
"""

from __future__ import annotations

import math

import torch

from keratron.autodiff import memory_plan
from keratron.autodiff.primitive import device_route
from keratron.ops._core import (
    Primitive,
    as_tensor,
    backward_is_recorded,
    canonical_axis,
    composite_vjp,
)
from keratron.ops.elementwise import add, cast, multiply, subtract, zeros_like_p
from keratron.ops.shaping import reshape

__all__ = ["fused_batch_normalization"]


def _channel_shape(ndim: int, axis: int, channels: int) -> tuple:
    shape = [1] * ndim
    shape[axis] = channels
    return tuple(shape)


def _normalize_native(xl, scale, offset, epsilon):
    """Channels-last `xl`: torch's batch-norm forward kernel (CUDA), seen as NCHW with
    channels-last strides. Its statistics kernel reads x once (Welford); the variance is
    recovered from the inverse standard deviation it returns, to about 4e-7 of
    variance + epsilon (the sum every consumer of a moving variance adds). On an H200, MobileNet's
    112x112x64 batch of 64: 133 us a call for `var_mean` over the leading axes, which this
    replaces."""
    y, mean, invstd = torch.ops.aten.native_batch_norm(
        xl.movedim(-1, 1), scale, offset, None, None, True, 0.0, epsilon
    )
    var = invstd.square().reciprocal_().sub_(epsilon).clamp_min_(0.0)
    return y.movedim(1, -1), mean, var


# Rows a chunk of a CPU pass holds: about 2 MiB, cache-sized and small enough that its buffer
# comes from malloc's bins instead of fresh pages (a fresh 49 MB temporary faults its pages in
# at every step: 15 ms of a 17 ms subtraction on a 32x56x56x128 float32 batch, two cores).
_CHUNK_BYTES = 1 << 21


def _row_chunks(m2):
    """Slices of the rows of the (M, C) matrix `m2` in _CHUNK_BYTES chunks (the last shorter),
    and the chunk's row count."""
    rows, channels = m2.shape
    step = max(1, min(rows, _CHUNK_BYTES // (channels * m2.element_size())))
    return [slice(start, start + step) for start in range(0, rows, step)], step


def _squared_deviations(x2, mean):
    """Per-channel sum of (x - mean)**2 over the rows of the (M, C) `x2`, by chunks of rows
    through one small scratch (as accurate as one full-size deviation tensor: the same
    per-chunk reduction)."""
    chunks, step = _row_chunks(x2)
    total = x2.new_zeros(x2.shape[1])
    scratch = x2.new_empty((step, x2.shape[1]))
    for rows in chunks:
        part = x2[rows]
        total += torch.sub(part, mean, out=scratch[: part.shape[0]]).square_().sum(0)
    return total


def _as_channels_last_batch(t2):
    """The (M, C) matrix `t2` as a (1, C, 1, M) batch with channels-last strides (a view)."""
    return t2.view(1, 1, *t2.shape).movedim(-1, 1)


def _normalize_by_sums(xl, scale, offset, epsilon, out=None):
    """Channels-last `xl`: the mean by a sum, the variance by a sum of squared deviations
    (two-pass, as accurate as `var_mean`; the deviations by cache-sized chunks), then torch's
    inference kernel with these statistics writes `x * a + b` (a = scale / sqrt(var + epsilon),
    b = offset - mean * a: Keras's own arithmetic, as `tf.nn.batch_normalization`) into `out`
    (an (M, C) buffer) or a new tensor, in one pass over x (CPU). On MobileNet's 8x112x112x64
    batch with `out` a kept buffer: 2.2 ms against 2.9 for the deviations written to `out`
    and scaled there in place, three passes more."""
    channels = xl.shape[-1]
    if channels == 0:
        empty = xl.new_empty((0,))
        return xl.clone(), empty, empty.clone()
    x2 = xl.reshape(-1, channels)
    count = x2.shape[0]
    mean = x2.sum(0).div_(count)
    var = _squared_deviations(x2, mean).div_(count)
    if count == 0:  # NaN statistics, as var_mean's; nothing to normalize
        return x2.new_empty(xl.shape) if out is None else out.view(xl.shape), mean, var
    args = (_as_channels_last_batch(x2), scale, offset, mean, var, False, 0.0, epsilon)
    if out is None:
        y = torch.ops.aten.native_batch_norm(*args)[0].movedim(1, -1)
    else:
        empty = x2.new_empty((0,))
        torch.ops.aten.native_batch_norm.out(
            *args, out=_as_channels_last_batch(out), save_mean=empty, save_invstd=empty.clone()
        )
        y = out
    return y.reshape(xl.shape), mean, var


_HALF = (torch.float16, torch.bfloat16)


def _float32_scale(x, scale):
    """The scale torch's kernels get for a half-precision x: float32 ones in place of None,
    so that they compute their statistics in float32 (without a weight they return them in
    the half type)."""
    if scale is None and x.dtype in _HALF:
        return torch.ones(x.shape[-1], dtype=torch.float32, device=x.device)
    return scale


def _bn_impl(x, scale, offset, axis, epsilon):
    xl = x.movedim(axis, -1)  # channels last: a view, and x itself for axis = -1
    if xl.dtype in _HALF and xl.numel():
        return _bn_half(xl, scale, offset, axis, epsilon)
    # torch's kernel refuses an empty batch; the sums give its NaN statistics, as var_mean.
    normalize = _normalize_native if x.is_cuda and x.numel() else _normalize_by_sums
    y, mean, var = normalize(xl, scale, offset, epsilon)
    return y.movedim(-1, axis), mean, var


def _bn_half(xl, scale, offset, axis, epsilon):
    """Channels-last half-precision `xl`: torch's kernel, float32 inside and for the
    statistics."""
    y, mean, var = _normalize_native(xl, _float32_scale(xl, scale), offset, epsilon)
    return y.movedim(-1, axis), mean, var


def _bn_shape(x, scale, offset, axis, epsilon):
    (shape, dtype) = x
    if not dtype.is_floating_point:
        return None
    stat_dtype = torch.float32 if dtype in _HALF else dtype
    if any(p is not None and p[1] != stat_dtype for p in (scale, offset)):
        return None
    stat = ((shape[axis],), stat_dtype)
    return [(tuple(shape), dtype), stat, stat]


def _bn_grad_impl(gy, x, scale, mean, var, axis, epsilon):
    # torch's kernel takes channels at dimension 1 (any strides: a channels-last tensor is
    # seen as NCHW with channels-last strides, and dx comes back in that layout).
    if x.numel() == 0:  # an empty batch: nothing reaches x, the sums are zero
        return torch.zeros_like(x), torch.zeros_like(mean), torch.zeros_like(mean)
    invstd = torch.rsqrt(var + epsilon)
    scale = _float32_scale(x.movedim(axis, -1), scale)
    dx, dscale, doffset = torch.ops.aten.native_batch_norm_backward(
        gy.movedim(axis, 1), x.movedim(axis, 1), scale, None, None, mean, invstd, True,
        epsilon, [True, True, True],
    )  # fmt: skip
    return dx.movedim(1, axis), dscale, doffset


def _bn_grad_shape(gy, x, scale, mean, var, axis, epsilon):
    return [x, mean, mean]


def _composite(x, scale, offset, axis, epsilon):
    from keratron.ops.nn import batch_normalization, moments

    dtype = x.dtype
    if dtype in ("float16", "bfloat16"):  # in float32, as the kernels compute
        x = cast(x, "float32")
    axes = [i for i in range(x.ndim) if i != axis]
    mean, var = moments(x, axes)
    y = batch_normalization(x, mean, var, axis, offset=offset, scale=scale, epsilon=epsilon)
    return cast(y, dtype), mean, var


def _bn_vjp(gs, x, scale, offset, out, axis, epsilon):
    if backward_is_recorded():
        filled = [zeros_like_p.bind(o) if g is None else g for g, o in zip(gs, out)]
        return composite_vjp(_composite, filled, [x, scale, offset], axis=axis, epsilon=epsilon)
    gy, gmean, gvar = gs
    _, mean, var = out
    if gy is None:
        gy = multiply(x, 0.0)
    dx, dscale, doffset = batch_norm_grad_p.bind(gy, x, scale, mean, var, axis=axis,
                                                 epsilon=epsilon)  # fmt: skip
    if gmean is not None or gvar is not None:
        # d mean / dx = 1 / n, d var / dx = 2 (x - mean) / n, per channel.
        n = x.size // x.shape[axis] if x.shape[axis] else 1
        shape = _channel_shape(x.ndim, axis, x.shape[axis])
        if gmean is not None:
            dx = add(dx, cast(reshape(multiply(gmean, 1.0 / n), shape), x.dtype))
        if gvar is not None:
            centered = subtract(cast(x, mean.dtype), reshape(mean, shape))
            term = multiply(reshape(multiply(gvar, 2.0 / n), shape), centered)
            dx = add(dx, cast(term, x.dtype))
    return dx, None if scale is None else dscale, None if offset is None else doffset


batch_norm_p = Primitive(
    "batch_norm",
    _bn_impl,
    _bn_vjp,
    multiple_results=True,
    fresh=True,  # y, mean and variance are new tensors (y may lie in a kept buffer)
    shape_rule=_bn_shape,
    vjp_accepts_none=True,
)
batch_norm_grad_p = Primitive(
    "batch_norm_grad", _bn_grad_impl, multiple_results=True, shape_rule=_bn_grad_shape
)


# From this many bytes of x on, the CPU input gradient of a dense channels-last float32 batch
# is computed by chunks (`_bn_grad_by_chunks`), which a compiled plan writes into a kept
# buffer: torch's kernel allocates dx afresh at every call, and in MobileNet's training step
# at batch 8 the three largest (6.4-25.7 MB) faulted in 9,700 pages a step (7.5 ms for the
# 8x112x112x64 one, 3.7 ms standalone). Below it torch's kernel is the faster (0.33 against
# 0.42 ms at 8x28x28x256, no page faulted either way).
GRAD_BY_CHUNKS_BYTES = 1 << 22


def _by_chunks(x, gy, axis) -> bool:
    return (
        x.device.type == "cpu"
        and x.dtype == torch.float32
        and gy.dtype == torch.float32
        and axis == x.dim() - 1
        and x.numel() * x.element_size() >= GRAD_BY_CHUNKS_BYTES
        and x.is_contiguous()
        and gy.is_contiguous()
    )


def _bn_grad_by_chunks(gy, x, scale, mean, var, epsilon, out=None):
    """The input gradient of a dense channels-last batch, `_bn_grad_impl`'s values by another
    order of operations: torch's backward kernel for the two per-channel sums alone (no dx),
    then dx = (x - mean) * b + gy * a + c, a = scale / sqrt(var + epsilon), b = -a * sum(gy *
    xhat) / (n * sqrt(var + epsilon)), c = -a * sum(gy) / n, by cache-sized chunks of rows
    into `out` (a kept buffer) or a new tensor: x and gy read once, dx written once."""
    channels = x.shape[-1]
    invstd = torch.rsqrt(var + epsilon)
    _, dscale, doffset = torch.ops.aten.native_batch_norm_backward(
        gy.movedim(-1, 1), x.movedim(-1, 1), scale, None, None, mean, invstd, True, epsilon,
        [False, True, True],
    )  # fmt: skip
    dx = torch.empty_like(x) if out is None else out
    x2, g2, d2 = x.view(-1, channels), gy.view(-1, channels), dx.view(-1, channels)
    rows = x2.shape[0]
    a = invstd if scale is None else invstd * scale
    b = a * invstd * dscale / -rows
    c = a * doffset / -rows
    for part in _row_chunks(x2)[0]:
        torch.sub(x2[part], mean, out=d2[part]).mul_(b).addcmul_(g2[part], a).add_(c)
    return dx, dscale, doffset


@device_route(batch_norm_grad_p, "cpu")
def _bn_grad_cpu(gy, x, scale, mean, var, axis, epsilon):
    if not _by_chunks(x, gy, axis):
        raise NotImplementedError("torch's backward kernel serves this case")
    return _bn_grad_by_chunks(gy, x, scale, mean, var, epsilon)


def _grad_by_chunks_kept(params, avals) -> bool:
    (_, gy_dtype), (shape, dtype) = avals[0], avals[1]
    return (
        params["axis"] == len(shape) - 1
        and dtype == torch.float32
        and gy_dtype == torch.float32
        and math.prod(shape) * 4 >= GRAD_BY_CHUNKS_BYTES
    )


@memory_plan.keeps_output(batch_norm_grad_p, _grad_by_chunks_kept)
def _batch_norm_grad_into(buffers, out_avals, gy, x, scale, mean, var, axis, epsilon):
    # `_bn_grad_cpu`'s values, dx written into the plan's kept buffer.
    if not _by_chunks(x, gy, axis):
        return None
    dx = memory_plan.buffer(buffers, "dx", out_avals[0])
    return _bn_grad_by_chunks(gy, x, scale, mean, var, epsilon, out=dx)


def _channels_last(params, avals) -> bool:
    shape, dtype = avals[0]
    return params["axis"] == len(shape) - 1 and dtype not in _HALF


@memory_plan.keeps_output(batch_norm_p, _channels_last)
def _batch_norm_into(buffers, out_avals, x, scale, offset, axis, epsilon):
    # What `_bn_impl` computes on CPU, y written into the plan's kept buffer.
    if not x.is_contiguous() or x.shape[-1] == 0:
        return None
    y = memory_plan.buffer(buffers, "y", out_avals[0])
    return _normalize_by_sums(x, scale, offset, epsilon, out=y.view(-1, x.shape[-1]))


def fused_batch_normalization(
    x, axis=-1, scale=None, offset=None, epsilon=1e-3, *, statistics_dtype=None
):
    """Batch normalization in training: `(x - mean) / sqrt(variance + epsilon) * scale +
    offset` with `mean` and `variance` (population) the statistics of `x` over every axis but
    `axis`; returns `(y, mean, variance)`, the statistics of shape `(x.shape[axis],)`.

    Equal to `moments` then `batch_normalization`, as one primitive each way (see the module).
    A float16 or bfloat16 `x` is normalized in float32 and y returned in its dtype; the
    statistics come in `statistics_dtype` (x's dtype by default; "float32" keeps them as
    computed, as `tf.nn.fused_batch_norm` returns them and as the layer's moving averages
    want them).

    Example:
        >>> y, mean, var = fused_batch_normalization([[1.0, 2.0], [3.0, 6.0]], axis=-1)
        >>> mean.numpy(), var.numpy()
        (array([2., 4.], dtype=float32), array([1., 4.], dtype=float32))
    """
    x = as_tensor(x)
    if not x.dtype.startswith("float") and x.dtype != "bfloat16":
        raise TypeError(
            f"fused_batch_normalization: `x` must be a float tensor. Received dtype={x.dtype}"
        )
    if x.ndim < 2:
        raise ValueError(
            "fused_batch_normalization: `x` needs at least 2 dimensions (a batch axis and a "
            f"feature axis). Received shape={x.shape}"
        )
    axis = canonical_axis(axis, x.ndim, "fused_batch_normalization")
    dtype = x.dtype
    # Half precision: reduced in float32 (by the kernels), with float32 scale and offset.
    compute = "float32" if dtype in ("float16", "bfloat16") else dtype
    params = []
    for name, v in (("scale", scale), ("offset", offset)):
        if v is not None:
            v = cast(as_tensor(v), compute)
            if tuple(v.shape) != (x.shape[axis],):
                raise ValueError(
                    f"fused_batch_normalization: `{name}` must have shape ({x.shape[axis]},) "
                    f"(axis {axis} of x with shape {x.shape}). Received shape {v.shape}."
                )
        params.append(v)
    y, mean, var = batch_norm_p.bind(x, *params, axis=axis, epsilon=float(epsilon))
    stats = dtype if statistics_dtype is None else statistics_dtype
    return y, cast(mean, stats), cast(var, stats)
