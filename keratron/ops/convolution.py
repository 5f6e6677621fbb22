"""Convolutions and pooling in Keras's layouts (channels_last by default).

`conv` is the hot primitive behind Conv1D/2D/3D and DepthwiseConv: inputs `(x, kernel,
bias or None)` with x `(N, *spatial, C)` and kernel `(*k, C // groups, filters)`, explicit
`((lo, hi), ...)` padding and an optional activation epilogue. TensorFlow's SAME rule, which
pads asymmetrically, is resolved into explicit pads in the Python wrappers. The torch
implementation views NHWC data as NCHW with permute (torch then runs its channels_last
kernels, fast on CPU) and pads explicitly only when the pads are asymmetric.

The backward pass is two more primitives, `conv_grad_input` and `conv_grad_filter`, on
`aten.convolution_backward`; each has a VJP made of the three conv primitives, so convolutions
differentiate twice. `conv_transpose` is `conv_grad_input` with Keras's output-shape rule.
Pooling: `max_pool` / `avg_pool` with backward primitives on aten's pooling backward kernels,
and the max-pool rewrites the compiler runs (`autodiff.passes.register_pass`); among them, in
CPU inference, `conv_max_pool`: a convolution and the max pool that alone reads it, run a chunk
of the batch at a time so that the convolution's output is pooled while still in cache; and a
zero pad that only a convolution reads folds into the convolution's own padding
(`fold_pads_into_convs`).

The reference `conv` is plain torch. On the CPU a route (`@device_route(conv_p, "cpu")`) runs
a 1x1 convolution as a GEMM where that is faster and one with a relu/relu6 epilogue on
oneDNN's kernel directly (the activation applied in place after it); the compiler stores an
inference convolution's kernel in oneDNN's blocked format once per weight change
(`conv_kernel_layout`, a prelude rewrite registered here).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from keratron import config
from keratron.autodiff import memory_plan, passes
from keratron.autodiff.primitive import device_route
from keratron.autodiff.tracing import Graph, Node
from keratron.ops import _shape_rules as rules
from keratron.ops import epilogue
from keratron.ops._core import Primitive, Tensor, as_tensor
from keratron.ops.elementwise import relu6_grad_p, relu6_p, relu_grad_p, relu_p
from keratron.ops.linalg import (
    _matmul_with,
    _promote,
    blas_is_slow,
    cpu_gemm,
    epilogue_grad,
    matmul_p,
    onednn_bias,
)
from keratron.ops.reduction import sum_p
from keratron.ops.shaping import expand_dims, moveaxis, pad_p, reshape, squeeze

__all__ = [
    "conv",
    "fused_conv",
    "depthwise_conv",
    "separable_conv",
    "conv_transpose",
    "max_pool",
    "average_pool",
]


# ------------------------------------------------------------------------------ layout helpers
def _to_cf(x: torch.Tensor) -> torch.Tensor:
    """(N, *S, C) -> (N, C, *S) as a view: NHWC memory is torch's channels_last format."""
    nd = x.dim() - 2
    return x.permute(0, nd + 1, *range(1, nd + 1))


def _to_cl(y: torch.Tensor) -> torch.Tensor:
    nd = y.dim() - 2
    return y.permute(0, *range(2, nd + 2), 1)


def _kernel_to_torch(k: torch.Tensor) -> torch.Tensor:
    """Keras (*k, in, out) -> torch (out, in, *k)."""
    nd = k.dim() - 2
    return k.permute(nd + 1, nd, *range(nd))


def _kernel_from_torch(w: torch.Tensor) -> torch.Tensor:
    nd = w.dim() - 2
    return w.permute(*range(2, nd + 2), 1, 0)


def _pad_cl(x: torch.Tensor, padding, value=0.0) -> torch.Tensor:
    """Pads (negative: crops) the spatial axes of a channels_last tensor."""
    pads = [0, 0]
    for lo, hi in reversed(padding):
        pads += [lo, hi]
    return F.pad(x, pads, value=value)


def _neg(padding):
    return tuple((-lo, -hi) for lo, hi in padding)


def _torch_padding(padding):
    """torch's symmetric padding when the pads allow it, else None (pad explicitly)."""
    if all(lo == hi and lo >= 0 for lo, hi in padding):
        return [lo for lo, _ in padding]
    return None


def _padded_shape(shape, padding):
    return (shape[0], *(s + lo + hi for s, (lo, hi) in zip(shape[1:-1], padding)), shape[-1])


# ------------------------------------------------------------------------------ conv primitives
def _conv_impl(x, k, b, strides, padding, dilation, groups, activation):
    nd = x.dim() - 2
    tpad = _torch_padding(padding)
    if tpad is None:
        x, tpad = _pad_cl(x, padding), [0] * nd
    y = torch.convolution(
        _to_cf(x), _kernel_to_torch(k), b, strides, tpad, dilation, False, [0] * nd, groups
    )
    return _to_cl(epilogue.apply(y, activation, inplace=True))


def _conv_vjp(g, x, k, b, out, strides, padding, dilation, groups, activation):
    params = dict(strides=strides, padding=padding, dilation=dilation, groups=groups)
    g = epilogue_grad(g, out, activation, lambda: conv_p.bind(x, k, b, activation=None, **params))
    gx = conv_grad_input_p.bind(g, k, input_shape=x.shape, **params)
    gk = conv_grad_filter_p.bind(x, g, kernel_shape=k.shape, **params)
    # The engine sums the bias cotangent over the batch and spatial axes.
    return gx, gk, (None if b is None else g)


def _conv_out_spatial(shape, window, strides, padding, dilation):
    """The output's spatial sizes, or None where the window does not fit."""
    out = tuple(
        rules.window_out(s, k, st, lo, hi, d)
        for s, k, st, (lo, hi), d in zip(shape[1:-1], window, strides, padding, dilation)
    )
    return None if any(o < 1 for o in out) else out


def _conv_shape(x, k, b, strides, padding, dilation, groups, activation):
    (shape, dtype), (kshape, kdtype) = x, k
    nd = len(shape) - 2
    if nd < 1 or len(kshape) != nd + 2 or kdtype != dtype or not dtype.is_floating_point:
        return None
    if kshape[-2] * groups != shape[-1] or kshape[-1] % groups:
        return None
    if b is not None and (b[1] != dtype or tuple(b[0]) != (kshape[-1],)):
        return None
    out = _conv_out_spatial(shape, kshape[:-2], strides, padding, dilation)
    return None if out is None else [((shape[0], *out, kshape[-1]), dtype)]


conv_p = Primitive(
    "conv",
    _conv_impl,
    _conv_vjp,
    fresh=True,
    epilogues=epilogue.FUSED,
    shape_rule=_conv_shape,
)


# ------------------------------------------------------------------------------ conv, CPU route
# The epilogues after which a convolution runs on oneDNN's kernel, with the activation
# applied by torch in place after it (oneDNN's own relu and hardtanh post-ops map NaN to 0,
# where the epilogue's NaN policy keeps NaN). relu and relu6 measured the faster there; with
# none, it is the kernel torch's own convolution runs (equal bit for bit, as fast at
# MobileNet's shapes), called so that a compiled plan can write it into a kept buffer
# (`_conv_into`): a MobileNet training step at batch 8 faulted in 13,000 pages a step for its
# convolutions' fresh outputs.
_ONEDNN_EPILOGUES = (None, "relu", "relu6")
try:
    _conv_post_op = torch.ops.mkldnn._convolution_pointwise
except (AttributeError, RuntimeError):  # a torch built without oneDNN
    _conv_post_op = None
# Up to this many output pixels (batch x spatial) a 1x1 convolution is faster as a BLAS GEMM
# over the NHWC channels; from there on oneDNN's is (MobileNet and InceptionV3's 54 pointwise
# convolutions at batch 8, 2 threads: at 8-1,568 pixels the GEMM is 4-81% faster; at
# 2,312-100,352 oneDNN is up to 45% faster, in all but one shape).
_POINTWISE_GEMM_PIXELS = 2048


def _onednn_cpu(device_type: str, dtype, ndim: int) -> bool:
    """oneDNN's 2-D convolution kernels serve an input (N, H, W, C) of this device and dtype."""
    return (
        device_type == "cpu"
        and dtype == torch.float32
        and ndim == 4
        and torch.backends.mkldnn.is_available()
    )


def _pointwise(k_shape, strides, padding, groups) -> bool:
    """A 1x1 (or 1) kernel, stride 1, no padding, one group: the conv is a plain GEMM over
    the channels of NHWC memory."""
    return (
        groups == 1
        and all(d == 1 for d in k_shape[:-2])
        and all(s == 1 for s in strides)
        and all(lo == 0 and hi == 0 for lo, hi in padding)
    )


def _gemm_route(x_shape, k_shape, strides, padding, groups, onednn: bool) -> bool:
    """A pointwise convolution runs as a GEMM: always where oneDNN does not serve it, and up to
    `_POINTWISE_GEMM_PIXELS` output pixels where it does."""
    pixels = math.prod(x_shape[:-1])
    return _pointwise(k_shape, strides, padding, groups) and not (
        onednn and pixels > _POINTWISE_GEMM_PIXELS
    )


def _cpu_branch(x, k, strides, padding, groups, activation) -> str:
    """Which kernel the CPU convolution runs for these values: "gemm" for a small pointwise
    convolution, "onednn" for a relu/relu6 epilogue or a kernel prepacked by
    `conv_kernel_layout`, else "reference"."""
    onednn = _onednn_cpu(x.device.type, x.dtype, x.dim())
    if (
        not k.is_mkldnn
        and x.is_contiguous()
        and _gemm_route(x.shape, k.shape, strides, padding, groups, onednn)
    ):
        return "gemm"
    if onednn and _conv_post_op is not None and (activation in _ONEDNN_EPILOGUES or k.is_mkldnn):
        return "onednn"
    return "reference"


def _onednn_args(x, k, b, tpad, strides, dilation, groups) -> tuple:
    """The operands oneDNN's convolution ops (`_conv_post_op`, `_conv_into_op`) take first:
    the NHWC input as the channels_last NCHW view, the kernel in torch's layout (one prepacked
    by conv_kernel_layout is already in oneDNN's blocked format), the bias made dense, and
    the geometry."""
    w = k if k.is_mkldnn else _kernel_to_torch(k)
    return _to_cf(x), w, onednn_bias(b), tpad, list(strides), list(dilation), groups


@device_route(conv_p, "cpu")
def _conv_cpu(x, k, b, strides, padding, dilation, groups, activation):
    """The CPU convolution, by `_cpu_branch`: a GEMM, oneDNN's kernel, or the reference."""
    branch = _cpu_branch(x, k, strides, padding, groups, activation)
    if branch == "gemm":  # over the NHWC channels: the matmul CPU route's product
        return _matmul_with(cpu_gemm, x, k.reshape(k.shape[-2], k.shape[-1]), b, activation)
    if branch == "onednn":
        nd = x.dim() - 2
        tpad = _torch_padding(padding)
        if tpad is None:
            x, tpad = _pad_cl(x, padding), [0] * nd
        y = _conv_post_op(*_onednn_args(x, k, b, tpad, strides, dilation, groups), "none", [], "")
        return _to_cl(epilogue.apply(y, activation, inplace=True))
    return _conv_impl(x, k, b, strides, padding, dilation, groups, activation)


try:  # oneDNN's convolution that adds its result into a given tensor (a binary post-op)
    _conv_into_op = torch.ops.mkldnn._convolution_pointwise_.binary
except (AttributeError, RuntimeError):
    _conv_into_op = None


def _onednn_into(out, args) -> torch.Tensor:
    """oneDNN's convolution of `args` (`_onednn_args`, `_full_conv_args`) written into `out`
    (channels_last NCHW): `out` is zeroed and oneDNN adds the convolution into it (exact:
    c + 0 == c)."""
    out.zero_()
    _conv_into_op(out, *args, "add", None, None, [], "")
    return out


def _kept_onednn_padding(x, k, strides, padding, groups, activation):
    """torch's symmetric padding where a kept-buffer writer can run `_conv_cpu`'s oneDNN
    branch for these values; None where it cannot (the plain kernel runs)."""
    tpad = _torch_padding(padding)
    if (
        _conv_into_op is None
        or tpad is None
        or _cpu_branch(x, k, strides, padding, groups, activation) != "onednn"
    ):
        return None
    return tpad


@memory_plan.keeps_output(conv_p)
def _conv_into(buffers, out_avals, x, k, b, strides, padding, dilation, groups, activation):
    """The oneDNN branch of `_conv_cpu`, written into a kept buffer (`_onednn_into`); the
    activation follows in place."""
    tpad = _kept_onednn_padding(x, k, strides, padding, groups, activation)
    if tpad is None:
        return None
    n, *spatial, c = out_avals[0][0]
    out = memory_plan.buffer(buffers, "out", ((n, c, *spatial), x.dtype), channels_last=True)
    _onednn_into(out, _onednn_args(x, k, b, tpad, strides, dilation, groups))
    return epilogue.apply(_to_cl(out), activation, inplace=True)


def _kernel_layout_impl(k, input_shape=None, strides=None, padding=None, dilation=None, groups=1):
    # The same values, stored as the CPU convolution reads them, so that it does not copy the
    # kernel into its layout on every call. Given the convolution's input shape (where
    # kernel_layout_params chose oneDNN): oneDNN's blocked format for that shape, an opaque
    # tensor that only the convolution's CPU route reads. Otherwise torch's channels_last
    # (out, *k, in).
    if k.dim() != 4:
        return k.clone()
    w = _kernel_to_torch(k)
    if input_shape is not None:
        return torch._C._nn.mkldnn_reorder_conv2d_weight(
            w.contiguous().to_mkldnn(), padding, strides, dilation, groups, list(input_shape)
        )
    return _kernel_from_torch(w.contiguous(memory_format=torch.channels_last))


# An identity on values (so its VJP passes the cotangent through). The graph compiler puts it
# before the convolutions of inference functions, where it is computed once per weight change.
conv_kernel_layout_p = Primitive("conv_kernel_layout", _kernel_layout_impl, lambda g, k, out: (g,))


def kernel_layout_params(x_aval, k_aval, strides, padding, dilation, groups) -> dict:
    """The `conv_kernel_layout` parameters for a CPU convolution of these shapes: oneDNN's
    blocked format when oneDNN runs it, else ({}) the channels_last order."""
    (x_shape, x_dtype), (k_shape, _) = x_aval, k_aval
    if _conv_post_op is None or not _onednn_cpu("cpu", x_dtype, len(x_shape)):
        return {}
    if _gemm_route(x_shape, k_shape, strides, padding, groups, onednn=True):
        return {}  # the GEMM reads the plain kernel
    tpad = _torch_padding(padding)
    if tpad is None:
        x_shape, tpad = _padded_shape(x_shape, padding), [0, 0]
    n, h, w, c = x_shape
    return dict(
        input_shape=(n, c, h, w),
        strides=list(strides),
        padding=list(tpad),
        dilation=list(dilation),
        groups=groups,
    )


def _relayout_conv_kernels(graph: Graph) -> None:
    """In a function with no effects on the CPU, a 2-D convolution whose kernel is computed
    from variables alone reads it through `conv_kernel_layout`: the prelude then stores the
    kernel in the layout the CPU convolution wants, once per weight change: oneDNN's blocked
    format for its input shape where oneDNN runs it, else channels_last order (a 1x1 kernel
    that runs as a GEMM reads the same memory as a transposed matrix)."""
    if passes.graph_device(graph).type != "cpu" or config.kernel_backend() == "triton":
        return
    fixed = passes.variable_only(graph)
    nodes = []
    for n in graph.nodes:
        if n.kind == "prim" and n.prim in (conv_p, conv_max_pool_p) and n.inputs[1] in fixed:
            shape, dtype = graph.avals[n.inputs[1]]
            if len(shape) == 4:
                p = n.params
                params = kernel_layout_params(
                    graph.avals[n.inputs[0]],
                    (shape, dtype),
                    p["strides"],
                    p["padding"],
                    p["dilation"],
                    p["groups"],
                )
                node, kernel = passes.new_value(
                    graph, conv_kernel_layout_p, [n.inputs[1]], params, (shape, dtype)
                )
                nodes.append(node)
                n.inputs = [n.inputs[0], kernel] + n.inputs[2:]
        nodes.append(n)
    graph.nodes = nodes


passes.register_pass(_relayout_conv_kernels, stage="prelude")


def _conv_grad_input_impl(g, k, input_shape, strides, padding, dilation, groups):
    if not k.is_meta and _pointwise(k.shape, strides, padding, groups):
        cin, cout = k.shape[-2], k.shape[-1]
        gi = torch.mm(g.reshape(-1, cout), k.reshape(cin, cout).t())
        return gi.reshape(*g.shape[:-1], cin)
    nd = g.dim() - 2
    tpad = _torch_padding(padding)
    shape = input_shape if tpad is not None else _padded_shape(input_shape, padding)
    # convolution_backward reads only the shape (and layout) of `input` for grad_input.
    like = _to_cf(torch.empty(shape, dtype=g.dtype, device=g.device))
    gi = torch.ops.aten.convolution_backward(
        _to_cf(g),
        like,
        _kernel_to_torch(k),
        None,
        list(strides),
        tpad or [0] * nd,
        list(dilation),
        False,
        [0] * nd,
        groups,
        [True, False, False],
    )[0]
    gi = _to_cl(gi)
    return gi if tpad is not None else _pad_cl(gi, _neg(padding))


def _conv_grad_input_vjp(h, g, k, out, input_shape, strides, padding, dilation, groups):
    # grad_input(g, k) = J_x^T g is bilinear: <h, J_x^T g> = <conv(h, k), g>.
    params = dict(strides=strides, padding=padding, dilation=dilation, groups=groups)
    return (
        conv_p.bind(h, k, None, activation=None, **params),
        conv_grad_filter_p.bind(h, g, kernel_shape=k.shape, **params),
    )


def _conv_grad_filter_impl(x, g, kernel_shape, strides, padding, dilation, groups):
    if _pointwise(kernel_shape, strides, padding, groups):
        cin, cout = kernel_shape[-2], kernel_shape[-1]
        gw = torch.mm(x.reshape(-1, cin).t(), g.reshape(-1, cout))
        return gw.reshape(kernel_shape)
    return _grad_filter_by_convolution(x, g, kernel_shape, strides, padding, dilation, groups)


def _grad_filter_by_convolution(x, g, kernel_shape, strides, padding, dilation, groups):
    """The filter gradient as torch's weight-gradient convolution (oneDNN's on the CPU), in
    the NHWC kernel layout (a view of torch's)."""
    nd = x.dim() - 2
    tpad = _torch_padding(padding)
    if tpad is None:
        x, tpad = _pad_cl(x, padding), [0] * nd
    wshape = (kernel_shape[-1], kernel_shape[-2], *kernel_shape[:-2])
    like = torch.empty(wshape, dtype=g.dtype, device=g.device)
    gw = torch.ops.aten.convolution_backward(
        _to_cf(g),
        _to_cf(x),
        like,
        None,
        list(strides),
        tpad,
        list(dilation),
        False,
        [0] * nd,
        groups,
        [False, True, False],
    )[1]
    return _kernel_from_torch(gw)


def _conv_grad_filter_vjp(hk, x, g, out, kernel_shape, strides, padding, dilation, groups):
    # <hk, grad_filter(x, g)> = <conv(x, hk), g>.
    params = dict(strides=strides, padding=padding, dilation=dilation, groups=groups)
    return (
        conv_grad_input_p.bind(g, hk, input_shape=x.shape, **params),
        conv_p.bind(x, hk, None, activation=None, **params),
    )


def _conv_grad_input_shape(g, k, input_shape, strides, padding, dilation, groups):
    if g[1] != k[1] or not g[1].is_floating_point:
        return None
    return [(tuple(input_shape), g[1])]


def _conv_grad_filter_shape(x, g, kernel_shape, strides, padding, dilation, groups):
    if g[1] != x[1] or not g[1].is_floating_point:
        return None
    return [(tuple(kernel_shape), g[1])]


conv_grad_input_p = Primitive(
    "conv_grad_input",
    _conv_grad_input_impl,
    _conv_grad_input_vjp,
    fresh=True,
    shape_rule=_conv_grad_input_shape,
)
conv_grad_filter_p = Primitive(
    "conv_grad_filter",
    _conv_grad_filter_impl,
    _conv_grad_filter_vjp,
    fresh=True,
    side_stream=True,  # read by the optimizer's update only, at the end of a training step
    shape_rule=_conv_grad_filter_shape,
)


# ------------------------------------------------------------------------- conv_grad_input, CPU
def _depthwise(k_shape, groups) -> bool:
    """A depthwise kernel of channel multiplier 1: one filter per input channel."""
    return groups > 1 and k_shape[-2] == 1 and k_shape[-1] == groups


def _full_conv_padding(k_shape, strides, padding, dilation, groups, dtype, ndim):
    """For a 2-D float32 convolution of stride 1 and dilation 1, with one group or depthwise
    (`_depthwise`), padded the same on both sides of each axis (valid, or same with an odd
    kernel), the padding under which a plain convolution of the output gradient with the
    flipped, transposed kernel (a "full" convolution) is the input gradient; else None."""
    if (
        _conv_post_op is None
        or not _onednn_cpu("cpu", dtype, ndim)
        or not (groups == 1 or _depthwise(k_shape, groups))
        or any(s != 1 for s in strides)
        or any(d != 1 for d in dilation)
        or _pointwise(k_shape, strides, padding, groups)
    ):
        return None
    pads = []
    for size, (lo, hi) in zip(k_shape[:2], padding):
        if lo != hi or lo > size - 1:
            return None
        pads.append(size - 1 - lo)
    return pads


def _full_conv_args(g, k, strides, padding, dilation, groups) -> tuple | None:
    """The operands oneDNN's convolution ops take first for the input gradient as a full
    convolution (see `_full_conv_padding`): the output gradient as the channels_last NCHW
    view, the kernel flipped in space with its channels swapped (torch layout (in, out, kh,
    kw); small, made on each call), no bias, the full padding, unit strides and dilation, one
    group. None where the route does not serve the case (the reference runs)."""
    pads = _full_conv_padding(k.shape, strides, padding, dilation, groups, g.dtype, g.dim())
    if pads is None or g.device.type != "cpu" or k.is_mkldnn:
        return None
    # (in, out, kh, kw) for one group; a depthwise kernel stays (channels, 1, kh, kw).
    order = (2, 3, 0, 1) if groups == 1 else (3, 2, 0, 1)
    w = k.flip(0, 1).permute(*order).contiguous(memory_format=torch.channels_last)
    return _to_cf(g), w, None, pads, [1, 1], [1, 1], groups


@device_route(conv_grad_input_p, "cpu")
def _conv_grad_input_cpu(g, k, input_shape, strides, padding, dilation, groups):
    """The input gradient as oneDNN's forward convolution of the output gradient with the
    flipped, transposed kernel (the same values as aten's backward-data kernel, which runs
    the same oneDNN arithmetic; measured equal bit for bit at the cnn's shape) where
    `_full_conv_padding` allows, else the reference. As a forward convolution it can add into
    a kept buffer (`_conv_grad_input_into`), where the reference allocates 11 MB a step at the
    cnn's batch 128, every page of which faults. A large float32 one that no forward
    convolution computes (strided, dilated) runs a few images at a time
    (`_grad_input_by_images`), into a kept buffer too."""
    if not k.is_mkldnn and _pointwise(k.shape, strides, padding, groups):
        # g @ k.T over the NHWC channels, on the matmul CPU route's product (oneDNN's inner
        # product for the large ones).
        cin, cout = k.shape[-2], k.shape[-1]
        gi = cpu_gemm(g.reshape(-1, cout), k.reshape(cin, cout).t(), None)
        return gi.reshape(*g.shape[:-1], cin)
    if _half_strided_grouped(g, k, strides, groups):
        # oneDNN's bfloat16 kernel for this case is several times slower than its float32
        # one with both casts: MobileNet's stride-2 depthwise input gradients at batch 8 took
        # 11.5 ms against 2.7 (8x64x113x113), 4.9 against 0.17 (8x512x15x15), 2 threads.
        gf = _conv_grad_input_impl(
            g.float(), k.float(), input_shape, strides, padding, dilation, groups
        )
        return gf.to(g.dtype)
    args = _full_conv_args(g, k, strides, padding, dilation, groups)
    if args is not None:
        return _to_cl(_conv_post_op(*args, "none", [], ""))
    if not k.is_mkldnn and _by_images(
        g.shape, k.shape, input_shape, strides, padding, groups, g.dtype
    ):
        return _grad_input_by_images(g, k, input_shape, strides, padding, dilation, groups)
    return _conv_grad_input_impl(g, k, input_shape, strides, padding, dilation, groups)


# From this many bytes of float32 input gradient on, one that `_full_conv_padding` leaves to
# the reference is computed `_IMAGES_CHUNK_BYTES` of it at a time (`_grad_input_by_images`).
_GRAD_INPUT_BY_IMAGES_BYTES = 4 << 20
_IMAGES_CHUNK_BYTES = 4 << 20


def _by_images(g_shape, k_shape, input_shape, strides, padding, groups, dtype) -> bool:
    """A float32 input gradient of several images, `_GRAD_INPUT_BY_IMAGES_BYTES` or more, not
    pointwise: `_grad_input_by_images` computes it where `_full_conv_padding` does not serve."""
    return (
        dtype == torch.float32
        and g_shape[0] > 1
        and math.prod(input_shape) * 4 >= _GRAD_INPUT_BY_IMAGES_BYTES
        and not _pointwise(k_shape, strides, padding, groups)
    )


def _grad_input_by_images(g, k, input_shape, strides, padding, dilation, groups, out=None):
    """The reference input gradient, a few images (about `_IMAGES_CHUNK_BYTES` of output) at
    a time, copied into `out` (a kept buffer) or a new tensor. No image's gradient reads
    another's; each chunk's output, cache-sized, comes from malloc's bins, where the whole
    batch's is fresh pages each step: MobileNet's stride-2 depthwise input gradient at batch 8
    (8x113x113x64, 26 MB) took 5.2 ms in a training step against 1.2 with its pages kept,
    and standalone 6.8 ms at once against 1.4 by images (2 threads)."""
    n, *rest = input_shape
    if out is None:
        out = torch.empty(input_shape, dtype=g.dtype, device=g.device)
    step = max(1, _IMAGES_CHUNK_BYTES // (math.prod(rest) * g.element_size()))
    for start in range(0, n, step):
        part = g[start : start + step]
        shape = (part.shape[0], *rest)
        out[start : start + step] = _conv_grad_input_impl(
            part, k, shape, strides, padding, dilation, groups
        )
    return out


def _half_strided_grouped(g, k, strides, groups) -> bool:
    """A bfloat16 input gradient of a strided grouped (depthwise) convolution."""
    return (
        g.dtype == torch.bfloat16 and not k.is_mkldnn and groups > 1 and any(s > 1 for s in strides)
    )


@device_route(conv_grad_filter_p, "cpu")
def _conv_grad_filter_cpu(x, g, kernel_shape, strides, padding, dilation, groups):
    """The reference, except for a pointwise float32 kernel where torch's BLAS GEMM is slow
    (`blas_is_slow`): x.T @ g over the NHWC channels as oneDNN's weight-gradient convolution
    (which reads the NHWC batch in place) where the batch has at least twice as many pixels as
    input channels, else on the matmul CPU route's product (which copies x.T for oneDNN).
    Measured on a 2-core AMD EPYC (2 threads), MobileNet's pointwise gradients at batch 8:
    100,352 pixels x 32 channels 3.5 ms (BLAS) -> 1.8 ms; 1,568 x 512 3.9 -> 2.0 ms; 392 x 1024
    4.1 -> 1.9 ms (inner product; the convolution took 4.0 there)."""
    if (
        _pointwise(kernel_shape, strides, padding, groups)
        and x.dtype == torch.float32
        and x.dim() == 4
        and torch.backends.mkldnn.is_available()
        and blas_is_slow()
    ):
        cin, cout = kernel_shape[-2], kernel_shape[-1]
        pixels = math.prod(x.shape[:-1])
        if pixels < 2 * cin:
            # No kept buffer takes this product: oneDNN serves it at any size (392 x 1024 x
            # 1024, MobileNet's last pointwise gradient at batch 8: 4.8 ms on BLAS, 2.0 here).
            gw = cpu_gemm(x.reshape(-1, cin).t(), g.reshape(-1, cout), None, keepable=False)
            return gw.reshape(kernel_shape)
        gw = _grad_filter_by_convolution(x, g, kernel_shape, strides, padding, dilation, 1)
        return gw.contiguous()
    return _conv_grad_filter_impl(x, g, kernel_shape, strides, padding, dilation, groups)


def _grad_input_keeps(params, avals) -> bool:
    (g_shape, dtype), (k_shape, _) = avals[0], avals[1]
    strides, padding, groups = params["strides"], params["padding"], params["groups"]
    geometry = (k_shape, strides, padding, params["dilation"], groups, dtype, len(g_shape))
    if _full_conv_padding(*geometry) is not None:
        return _conv_into_op is not None
    return _by_images(g_shape, k_shape, params["input_shape"], strides, padding, groups, dtype)


@memory_plan.keeps_output(conv_grad_input_p, _grad_input_keeps)
def _conv_grad_input_into(
    buffers, out_avals, g, k, input_shape, strides, padding, dilation, groups
):
    """`_conv_grad_input_cpu`'s oneDNN branch, added into a zeroed kept buffer (exact:
    c + 0 == c), or its images branch copied into one."""
    args = _full_conv_args(g, k, strides, padding, dilation, groups)
    if args is not None:
        if _conv_into_op is None:
            return None
        n, *spatial, c = out_avals[0][0]
        out = memory_plan.buffer(buffers, "out", ((n, c, *spatial), g.dtype), channels_last=True)
        return _to_cl(_onednn_into(out, args))
    if k.is_mkldnn or not _by_images(
        g.shape, k.shape, input_shape, strides, padding, groups, g.dtype
    ):
        return None
    out = memory_plan.buffer(buffers, "out", out_avals[0])
    return _grad_input_by_images(g, k, input_shape, strides, padding, dilation, groups, out)


# ------------------------------------------------------------------------------ argument parsing
def _tuple(value, n: int, name: str, op: str) -> tuple:
    if isinstance(value, int):
        value = (value,) * n
    try:
        value = tuple(int(v) for v in value)
    except TypeError:
        raise TypeError(
            f"{op}: argument `{name}` must be an int or a tuple of {n} ints. "
            f"Received: {name}={value!r}"
        ) from None
    if len(value) != n or any(v < 1 for v in value):
        raise ValueError(
            f"{op}: argument `{name}` must be a positive int or a tuple of {n} positive ints. "
            f"Received: {name}={value!r}"
        )
    return value


def same_padding(size: int, kernel: int, stride: int, dilation: int = 1) -> tuple[int, int]:
    """TensorFlow's SAME pads: output ceil(size / stride), the odd pixel going after."""
    out = -(-size // stride)
    total = max((out - 1) * stride + (kernel - 1) * dilation + 1 - size, 0)
    return total // 2, total - total // 2


def _resolve_padding(padding, spatial, ksize, strides, dilation, op, allow_explicit=False):
    nd = len(spatial)
    if isinstance(padding, str):
        mode = padding.lower()
        if mode == "valid":
            return ((0, 0),) * nd
        if mode == "same":
            return tuple(
                same_padding(s, k, st, d) for s, k, st, d in zip(spatial, ksize, strides, dilation)
            )
        if mode == "causal" and allow_explicit and nd == 1:
            return (((ksize[0] - 1) * dilation[0], 0),)
    elif allow_explicit:
        try:
            pads = tuple((int(lo), int(hi)) for lo, hi in padding)
        except (TypeError, ValueError):
            pads = None
        if pads is not None and len(pads) == nd:
            return pads
    expected = "'valid' or 'same'"
    if allow_explicit:
        expected += (", 'causal' (1D)" if nd == 1 else "") + " or ((lo, hi),) per spatial axis"
    raise ValueError(f"{op}: argument `padding` must be {expected}. Received: padding={padding!r}")


def _channels_last(x: Tensor, data_format: str) -> Tensor:
    return x if data_format == "channels_last" else moveaxis(x, 1, -1)


def _restore(y: Tensor, data_format: str) -> Tensor:
    return y if data_format == "channels_last" else moveaxis(y, -1, 1)


def _check_rank(x: Tensor, op: str, ranks=(3, 4, 5)):
    if x.ndim not in ranks:
        raise ValueError(
            f"{op}: `inputs` must have rank {' or '.join(map(str, ranks))} (batch, spatial..., "
            f"channels). Received shape {x.shape}."
        )


def _conv_call(
    op,
    inputs,
    kernel,
    bias,
    activation,
    strides,
    padding,
    data_format,
    dilation_rate,
    groups,
    allow_explicit=False,
):
    data_format = config.standardize_data_format(data_format)
    args = _promote(inputs, kernel) if bias is None else _promote(inputs, kernel, bias)
    x, k = args[0], args[1]
    b = args[2] if bias is not None else None
    _check_rank(x, op)
    if k.ndim != x.ndim:
        raise ValueError(
            f"{op}: `kernel` must have rank {x.ndim} (kernel_size..., in_channels // groups, "
            f"filters) for inputs of shape {x.shape}. Received kernel shape {k.shape}."
        )
    x = _channels_last(x, data_format)
    nd = x.ndim - 2
    cin, kin, filters = x.shape[-1], k.shape[-2], k.shape[-1]
    if groups is None:
        groups = cin // kin if kin and cin % kin == 0 else 0
    if kin * groups != cin or filters % groups:
        raise ValueError(
            f"{op}: inputs have {cin} channels, so the kernel's in-channel axis "
            f"(size {kin}) times groups ({groups}) must equal {cin}, and filters ({filters}) "
            f"must be divisible by groups. Received kernel shape {k.shape}."
        )
    if b is not None and b.shape != (filters,):
        raise ValueError(f"{op}: `bias` must have shape ({filters},). Received shape {b.shape}.")
    strides = _tuple(strides, nd, "strides", op)
    dilation = _tuple(dilation_rate, nd, "dilation_rate", op)
    pads = _resolve_padding(
        padding, x.shape[1:-1], k.shape[:-2], strides, dilation, op, allow_explicit
    )
    for s, (lo, hi), ks, d in zip(x.shape[1:-1], pads, k.shape[:-2], dilation):
        if s + lo + hi < (ks - 1) * d + 1:
            raise ValueError(
                f"{op}: the (padded) input of shape {x.shape} is smaller than the dilated "
                f"kernel {k.shape[:-2]} (dilation {dilation})."
            )
    y = conv_p.bind(
        x,
        k,
        b,
        strides=strides,
        padding=pads,
        dilation=dilation,
        groups=int(groups),
        activation=activation,
    )
    return _restore(y, data_format)


# ------------------------------------------------------------------------------ public convs
def conv(inputs, kernel, strides=1, padding="valid", data_format=None, dilation_rate=1):
    """N-D convolution (1D, 2D, 3D), as keras.ops.conv.

    Grouped convolution is implied by the kernel: `groups = in_channels // kernel.shape[-2]`.

    Args:
        inputs: `(batch, *spatial, channels)` (channels_last) or `(batch, channels, *spatial)`.
        kernel: `(*kernel_size, in_channels // groups, filters)`.
        strides: int or tuple of ints.
        padding: "valid" or "same" (TensorFlow's rule: the odd pixel is padded after).
        data_format: "channels_last" or "channels_first"; default `image_data_format()`.
        dilation_rate: int or tuple of ints.

    Returns:
        The convolved tensor.

    Example:
        >>> x, k = keratron.ops.ones((1, 5, 5, 3)), keratron.ops.ones((3, 3, 3, 8))
        >>> keratron.ops.conv(x, k, strides=2, padding="same").shape
        (1, 3, 3, 8)
    """
    return _conv_call(
        "conv", inputs, kernel, None, None, strides, padding, data_format, dilation_rate, None
    )


def fused_conv(
    inputs,
    kernel,
    bias=None,
    activation=None,
    strides=1,
    padding="valid",
    data_format=None,
    dilation_rate=1,
    groups=1,
):
    """`activation(conv(inputs, kernel) + bias)` as one primitive call (what Conv layers run).

    Args:
        inputs: `(batch, *spatial, channels)` or channels_first.
        kernel: `(*kernel_size, in_channels // groups, filters)`. A depthwise kernel
            `(*k, C, multiplier)` reshaped to `(*k, 1, C * multiplier)` with `groups=C`.
        bias: optional `(filters,)`.
        activation: None, "linear", "relu", "relu6", "gelu", "gelu_tanh", "sigmoid", "tanh".
        strides: int or tuple.
        padding: "valid", "same", "causal" (1D) or explicit `((lo, hi), ...)` per spatial axis.
        data_format: "channels_last" or "channels_first".
        dilation_rate: int or tuple.
        groups: number of channel groups.

    Example:
        >>> x, k = keratron.ops.ones((2, 8, 8, 4)), keratron.ops.ones((3, 3, 4, 6))
        >>> keratron.ops.fused_conv(x, k, keratron.ops.zeros((6,)), "relu", padding="same").shape
        (2, 8, 8, 6)
    """
    activation = epilogue.standardize(activation, "fused_conv")
    if not isinstance(groups, int) or groups < 1:
        raise ValueError(
            f"fused_conv: `groups` must be a positive int. Received: groups={groups!r}"
        )
    return _conv_call(
        "fused_conv",
        inputs,
        kernel,
        bias,
        activation,
        strides,
        padding,
        data_format,
        dilation_rate,
        groups,
        allow_explicit=True,
    )


def _depthwise_kernel(k: Tensor, cin: int, op: str) -> Tensor:
    if k.shape[-2] != cin:
        raise ValueError(
            f"{op}: the depthwise kernel's axis -2 (size {k.shape[-2]}) must equal the input "
            f"channels ({cin}). Received kernel shape {k.shape}."
        )
    # (..., C, M) -> (..., 1, C * M): output channel c * M + m, multiplier fastest (as TF).
    return reshape(k, k.shape[:-2] + (1, k.shape[-2] * k.shape[-1]))


def depthwise_conv(inputs, kernel, strides=1, padding="valid", data_format=None, dilation_rate=1):
    """Depthwise convolution: each input channel convolved with its own `multiplier` filters.

    Args:
        inputs: `(batch, *spatial, channels)` or channels_first (1D or 2D).
        kernel: `(*kernel_size, channels, multiplier)`; output channel `c * multiplier + m`.
        strides, padding, data_format, dilation_rate: as in `conv`.

    Example:
        >>> x, k = keratron.ops.ones((1, 6, 6, 3)), keratron.ops.ones((3, 3, 3, 2))
        >>> keratron.ops.depthwise_conv(x, k, padding="same").shape
        (1, 6, 6, 6)
    """
    x = as_tensor(inputs)
    k = as_tensor(kernel)
    _check_rank(x, "depthwise_conv", (3, 4))
    data_format = config.standardize_data_format(data_format)
    cin = x.shape[-1] if data_format == "channels_last" else x.shape[1]
    if k.ndim != x.ndim:
        raise ValueError(
            f"depthwise_conv: `kernel` must have rank {x.ndim}. Received shape {k.shape}."
        )
    k = _depthwise_kernel(k, cin, "depthwise_conv")
    return _conv_call(
        "depthwise_conv", x, k, None, None, strides, padding, data_format, dilation_rate, cin
    )


def separable_conv(
    inputs,
    depthwise_kernel,
    pointwise_kernel,
    strides=1,
    padding="valid",
    data_format=None,
    dilation_rate=1,
):
    """Depthwise convolution followed by a 1x1 (pointwise) convolution.

    Args:
        inputs: `(batch, *spatial, channels)` or channels_first (1D or 2D).
        depthwise_kernel: `(*kernel_size, channels, multiplier)`.
        pointwise_kernel: `(*1, channels * multiplier, filters)`.
        strides, padding, data_format, dilation_rate: of the depthwise step.

    Example:
        >>> x = keratron.ops.ones((1, 6, 6, 3))
        >>> dk, pk = keratron.ops.ones((3, 3, 3, 2)), keratron.ops.ones((1, 1, 6, 4))
        >>> keratron.ops.separable_conv(x, dk, pk, padding="same").shape
        (1, 6, 6, 4)
    """
    y = depthwise_conv(inputs, depthwise_kernel, strides, padding, data_format, dilation_rate)
    return conv(y, pointwise_kernel, 1, "valid", data_format, 1)


def _transpose_pads(size, k, s, d, padding, output_padding):
    """Forward-conv pads (lo, hi) whose input gradient is Keras's transposed convolution.

    The transposed conv's natural output has length (size - 1) * s + dk; Keras's padding mode
    and output_padding crop it (or, when negative, extend it with zeros) on either side.
    """
    dk = (k - 1) * d + 1
    if padding == "valid":
        op = max(dk, s) - dk if output_padding is None else output_padding
        left, right = dk - 1, dk - 1 + op
    else:
        total = s + dk - 2 if output_padding is None else dk + dk % 2 - 2 + output_padding
        left = min(total // 2 + total % 2, dk - 1)
        right = total - left
    return dk - 1 - left, dk - 1 - right


def conv_transpose(
    inputs,
    kernel,
    strides=1,
    padding="valid",
    output_padding=None,
    data_format=None,
    dilation_rate=1,
):
    """Transposed convolution (the gradient of `conv` w.r.t. its input), as keras.ops.

    Output length per axis: "valid": `(in - 1) * s + max(dk, s)` (+ output_padding instead of
    the max when given); "same": `in * s` (or `(in - 1) * s + dk % 2 + output_padding`), with
    `dk = (k - 1) * dilation + 1`.

    Args:
        inputs: `(batch, *spatial, channels)` or channels_first.
        kernel: `(*kernel_size, filters, in_channels)`.
        strides: int or tuple.
        padding: "valid" or "same".
        output_padding: None, int or tuple: extra length on the high side.
        data_format: "channels_last" or "channels_first".
        dilation_rate: int or tuple.

    Example:
        >>> x, k = keratron.ops.ones((1, 4, 4, 3)), keratron.ops.ones((3, 3, 5, 3))
        >>> keratron.ops.conv_transpose(x, k, strides=2, padding="same").shape
        (1, 8, 8, 5)
    """
    op = "conv_transpose"
    data_format = config.standardize_data_format(data_format)
    x, k = _promote(inputs, kernel)
    _check_rank(x, op)
    x = _channels_last(x, data_format)
    nd = x.ndim - 2
    if k.ndim != x.ndim or k.shape[-1] != x.shape[-1]:
        raise ValueError(
            f"{op}: `kernel` must have shape (kernel_size..., filters, {x.shape[-1]}) for inputs "
            f"with {x.shape[-1]} channels. Received kernel shape {k.shape}."
        )
    strides = _tuple(strides, nd, "strides", op)
    dilation = _tuple(dilation_rate, nd, "dilation_rate", op)
    if not isinstance(padding, str) or padding.lower() not in ("valid", "same"):
        raise ValueError(
            f"{op}: argument `padding` must be 'valid' or 'same'. Received: padding={padding!r}"
        )
    if output_padding is None:
        out_pad = (None,) * nd
    else:
        out_pad = (
            (output_padding,) * nd if isinstance(output_padding, int) else tuple(output_padding)
        )
        if len(out_pad) != nd:
            raise ValueError(
                f"{op}: `output_padding` must be an int or a tuple of {nd} ints. "
                f"Received: output_padding={output_padding!r}"
            )
    pads, out_spatial = [], []
    for size, ks, s, d, opad in zip(x.shape[1:-1], k.shape[:-2], strides, dilation, out_pad):
        lo, hi = _transpose_pads(size, ks, s, d, padding.lower(), opad)
        pads.append((lo, hi))
        out_spatial.append((size - 1) * s + (ks - 1) * d + 1 - lo - hi)
    if any(n < 1 for n in out_spatial):
        raise ValueError(f"{op}: the output would be empty: spatial shape {tuple(out_spatial)}.")
    y = conv_grad_input_p.bind(
        x,
        k,
        input_shape=(x.shape[0], *out_spatial, k.shape[-2]),
        strides=strides,
        padding=tuple(pads),
        dilation=dilation,
        groups=1,
    )
    return _restore(y, data_format)


# ------------------------------------------------------------------------------ pooling
_MAX_POOL = {
    2: (torch.ops.aten.max_pool2d_with_indices, torch.ops.aten.max_pool2d_with_indices_backward),
    3: (torch.ops.aten.max_pool3d_with_indices, torch.ops.aten.max_pool3d_with_indices_backward),
}
_AVG_POOL = {
    2: (torch.ops.aten.avg_pool2d, torch.ops.aten.avg_pool2d_backward),
    3: (torch.ops.aten.avg_pool3d, torch.ops.aten.avg_pool3d_backward),
}


def _lowest(dtype):
    return float("-inf") if dtype.is_floating_point else torch.iinfo(dtype).min


def _has_pad(padding):
    return any(lo or hi for lo, hi in padding)


def _max_pool_indices(x, pool_size, strides, padding):
    """(padded channels_first input, pooled values, flat argmax indices into its planes)."""
    nd = x.dim() - 2
    if _has_pad(padding):
        x = _pad_cl(x, padding, _lowest(x.dtype))
    xt = _to_cf(x)
    out, idx = _MAX_POOL[nd][0](xt, list(pool_size), list(strides), [0] * nd, [1] * nd, False)
    return xt, out, idx


def _max_pool_impl(x, pool_size, strides, padding):
    # The argmax indices are a second (integer) output: the backward reuses them.
    _, out, idx = _max_pool_indices(x, pool_size, strides, padding)
    return _to_cl(out), idx


def _max_pool_grad_impl(x, g, idx, pool_size, strides, padding):
    nd = x.dim() - 2
    if idx is None:
        xt, _, idx = _max_pool_indices(x, pool_size, strides, padding)
    else:
        xt = _to_cf(_pad_cl(x, padding, _lowest(x.dtype)) if _has_pad(padding) else x)
    gi = _MAX_POOL[nd][1](
        _to_cf(g), xt, list(pool_size), list(strides), [0] * nd, [1] * nd, False, idx
    )
    gi = _to_cl(gi)
    return _pad_cl(gi, _neg(padding)) if _has_pad(padding) else gi


def _max_pool_gather_impl(x, h, pool_size, strides, padding):
    """h at each window's argmax of x: the transpose of max_pool_grad in its cotangent."""
    _, out, idx = _max_pool_indices(x, pool_size, strides, padding)
    if _has_pad(padding):
        h = _pad_cl(h, padding)
    ht = _to_cf(h)
    n, c = ht.shape[:2]
    vals = torch.gather(ht.reshape(n, c, -1), 2, idx.reshape(n, c, -1))
    return _to_cl(vals.reshape(out.shape))


def _pool_params(pool_size, strides, padding):
    return dict(pool_size=pool_size, strides=strides, padding=padding)


def _max_pool_vjp(gs, x, out, pool_size, strides, padding):
    if gs[0] is None:  # only the indices were reached: they carry no gradient
        return (None,)
    params = _pool_params(pool_size, strides, padding)
    return (max_pool_grad_p.bind(x, gs[0], out[1], **params),)


def _pooled_shape(x, pool_size, strides, padding):
    """(N, *out spatial, C) of a 2D/3D pooling of a float or integer input, else None."""
    shape, dtype = x
    if len(shape) not in (4, 5) or dtype is torch.bool or dtype.is_complex:
        return None
    out = _conv_out_spatial(shape, pool_size, strides, padding, (1,) * len(pool_size))
    return None if out is None else (shape[0], *out, shape[-1])


def _pooled_aval(x, pool_size, strides, padding):
    out = _pooled_shape(x, pool_size, strides, padding)
    return None if out is None else [(out, x[1])]


def _max_pool_shape(x, pool_size, strides, padding):
    out = _pooled_shape(x, pool_size, strides, padding)
    if out is None:
        return None
    # The argmax indices stay channels_first, as aten gives them.
    return [(out, x[1]), ((out[0], out[-1], *out[1:-1]), torch.int64)]


max_pool_p = Primitive(
    "max_pool",
    _max_pool_impl,
    _max_pool_vjp,
    multiple_results=True,
    vjp_accepts_none=True,
    shape_rule=_max_pool_shape,
)
# The gradient of max_pool_grad w.r.t. x is zero almost everywhere (it is piecewise constant).
# Without indices (None), max_pool_grad finds them again from x.
max_pool_grad_p = Primitive(
    "max_pool_grad",
    _max_pool_grad_impl,
    lambda h, x, g, idx, out, pool_size, strides, padding: (
        None,
        max_pool_gather_p.bind(x, h, **_pool_params(pool_size, strides, padding)),
        None,
    ),
    shape_rule=lambda x, g, idx, pool_size, strides, padding: (
        [x] if g[1] == x[1] and _pooled_shape(x, pool_size, strides, padding) == g[0] else None
    ),
)
max_pool_gather_p = Primitive(
    "max_pool_gather",
    _max_pool_gather_impl,
    lambda g, x, h, out, pool_size, strides, padding: (
        None,
        max_pool_grad_p.bind(x, g, None, **_pool_params(pool_size, strides, padding)),
    ),
    # An empty input is left to torch (the gather's reshape cannot infer a size from 0).
    shape_rule=lambda x, h, pool_size, strides, padding: (
        _pooled_aval(x, pool_size, strides, padding) if h == x and 0 not in x[0] else None
    ),
)


def _pool_2d_unpadded(params, avals) -> bool:
    return len(avals[0][0]) == 4 and not _has_pad(params["padding"])


@memory_plan.keeps_output(max_pool_p, _pool_2d_unpadded)
def _max_pool_into(buffers, out_avals, x, pool_size, strides, padding):
    n, oh, ow, c = out_avals[0][0]
    out = memory_plan.buffer(buffers, "out", ((n, c, oh, ow), x.dtype), channels_last=True)
    idx = memory_plan.buffer(buffers, "idx", ((n, c, oh, ow), torch.int64), channels_last=True)
    torch.ops.aten.max_pool2d_with_indices.out(
        _to_cf(x), list(pool_size), list(strides), [0, 0], [1, 1], False, out=out, indices=idx
    )
    return _to_cl(out), idx


@memory_plan.keeps_output(max_pool_grad_p, _pool_2d_unpadded)
def _max_pool_grad_into(buffers, out_avals, x, g, idx, pool_size, strides, padding):
    if idx is None:
        return None
    n, h, w, c = x.shape
    out = memory_plan.buffer(buffers, "out", ((n, c, h, w), x.dtype), channels_last=True)
    torch.ops.aten.max_pool2d_with_indices_backward.grad_input(
        _to_cf(g),
        _to_cf(x),
        list(pool_size),
        list(strides),
        [0, 0],
        [1, 1],
        False,
        idx,
        grad_input=out,
    )
    return _to_cl(out)


def _avg_scale(spatial, pool_size, strides, padding, out_spatial, dtype, device):
    """window area / number of unpadded elements, per output position (TF's SAME average)."""
    scale = None
    for size, k, s, (lo, _), n in zip(spatial, pool_size, strides, padding, out_spatial):
        counts = [min(o * s - lo + k, size) - max(o * s - lo, 0) for o in range(n)]
        r = torch.tensor([k / c for c in counts], dtype=dtype, device=device)
        scale = r if scale is None else scale.unsqueeze(-1) * r
    return scale


def _symmetric_pad(pool_size, padding):
    """Per-axis padding when every axis pads both sides equally by at most half a window (no
    padding, or SAME pooling at stride 1 with an odd window): aten's pooling then pads by
    itself and, with count_include_pad=False, averages over the unpadded elements only, as TF
    does; None otherwise."""
    if not all(lo == hi and 2 * lo <= k for (lo, hi), k in zip(padding, pool_size)):
        return None
    return [lo for lo, _ in padding]


def _avg_pool_impl(x, pool_size, strides, padding):
    nd = x.dim() - 2
    native = _symmetric_pad(pool_size, padding)
    if native is not None:
        y = _AVG_POOL[nd][0](_to_cf(x), list(pool_size), list(strides), native, False, False, None)
        return _to_cl(y)
    # Uneven padding: pad explicitly, then rescale each output by window / valid elements.
    spatial = x.shape[1:-1]
    x = _pad_cl(x, padding)
    y = _AVG_POOL[nd][0](_to_cf(x), list(pool_size), list(strides), [0] * nd, False, True, None)
    y.mul_(_avg_scale(spatial, pool_size, strides, padding, y.shape[2:], y.dtype, y.device))
    return _to_cl(y)


def _avg_pool_grad_impl(g, input_shape, pool_size, strides, padding):
    nd = g.dim() - 2
    gt = _to_cf(g)
    native = _symmetric_pad(pool_size, padding)
    if native is not None:
        like = _to_cf(torch.empty(input_shape, dtype=g.dtype, device=g.device))
        args = (list(pool_size), list(strides), native, False, False, None)
        return _to_cl(_AVG_POOL[nd][1](gt, like, *args))
    gt = gt * _avg_scale(
        input_shape[1:-1], pool_size, strides, padding, gt.shape[2:], g.dtype, g.device
    )
    like = _to_cf(torch.empty(_padded_shape(input_shape, padding), dtype=g.dtype, device=g.device))
    gi = _AVG_POOL[nd][1](gt, like, list(pool_size), list(strides), [0] * nd, False, True, None)
    return _pad_cl(_to_cl(gi), _neg(padding))


# Average pooling is linear; avg_pool and avg_pool_grad are each other's transposes.
avg_pool_p = Primitive(
    "avg_pool",
    _avg_pool_impl,
    lambda g, x, out, pool_size, strides, padding: (
        avg_pool_grad_p.bind(g, input_shape=x.shape, **_pool_params(pool_size, strides, padding)),
    ),
    shape_rule=lambda x, pool_size, strides, padding: (
        _pooled_aval(x, pool_size, strides, padding) if x[1].is_floating_point else None
    ),
)
avg_pool_grad_p = Primitive(
    "avg_pool_grad",
    _avg_pool_grad_impl,
    lambda h, g, out, input_shape, pool_size, strides, padding: (
        avg_pool_p.bind(h, **_pool_params(pool_size, strides, padding)),
    ),
    shape_rule=lambda g, input_shape, pool_size, strides, padding: (
        [(tuple(input_shape), g[1])] if g[1].is_floating_point else None
    ),
)


def _avg_pool_2d_native(params, avals) -> bool:
    native = _symmetric_pad(params["pool_size"], params["padding"])
    return len(avals[0][0]) == 4 and native is not None


@memory_plan.keeps_output(avg_pool_p, _avg_pool_2d_native)
def _avg_pool_into(buffers, out_avals, x, pool_size, strides, padding):
    """`_avg_pool_impl`'s native branch (aten's channels_last kernel, which pads by itself)
    written into a kept buffer; an input in another layout is left to the plain kernel."""
    if not x.is_contiguous():
        return None
    n, oh, ow, c = out_avals[0][0]
    out = memory_plan.buffer(buffers, "out", ((n, c, oh, ow), x.dtype), channels_last=True)
    native = _symmetric_pad(pool_size, padding)
    torch.ops.aten.avg_pool2d.out(
        _to_cf(x), list(pool_size), list(strides), native, False, False, None, out=out
    )
    return _to_cl(out)


def _pool(op, prim, inputs, pool_size, strides, padding, data_format):
    data_format = config.standardize_data_format(data_format)
    x = as_tensor(inputs)
    _check_rank(x, op)
    x = _channels_last(x, data_format)
    nd = x.ndim - 2
    pool_size = _tuple(pool_size, nd, "pool_size", op)
    strides = pool_size if strides is None else _tuple(strides, nd, "strides", op)
    pads = _resolve_padding(padding, x.shape[1:-1], pool_size, strides, (1,) * nd, op)
    for s, (lo, hi), k in zip(x.shape[1:-1], pads, pool_size):
        if s + lo + hi < k:
            raise ValueError(
                f"{op}: the (padded) input of shape {x.shape} is smaller than pool_size "
                f"{pool_size}."
            )
    if nd == 1:  # pooled as 2D with a height of 1
        y = prim.bind(
            expand_dims(x, 1),
            pool_size=(1, *pool_size),
            strides=(1, *strides),
            padding=((0, 0), *pads),
        )
        y = squeeze(y[0] if prim.multiple_results else y, 1)
    else:
        y = prim.bind(x, pool_size=pool_size, strides=strides, padding=pads)
        y = y[0] if prim.multiple_results else y
    return _restore(y, data_format)


def max_pool(inputs, pool_size, strides=None, padding="valid", data_format=None):
    """Max pooling over 1, 2 or 3 spatial axes; SAME pads with -inf (TensorFlow's rule).

    Args:
        inputs: `(batch, *spatial, channels)` or channels_first.
        pool_size: int or tuple.
        strides: int or tuple; defaults to `pool_size`.
        padding: "valid" or "same".
        data_format: "channels_last" or "channels_first".

    Example:
        >>> keratron.ops.max_pool(keratron.ops.ones((1, 5, 5, 2)), 2, padding="same").shape
        (1, 3, 3, 2)
    """
    return _pool("max_pool", max_pool_p, inputs, pool_size, strides, padding, data_format)


def average_pool(inputs, pool_size, strides=None, padding="valid", data_format=None):
    """Average pooling; with SAME, each window averages only its unpadded elements (as TF).

    Args:
        inputs: `(batch, *spatial, channels)` or channels_first.
        pool_size: int or tuple.
        strides: int or tuple; defaults to `pool_size`.
        padding: "valid" or "same".
        data_format: "channels_last" or "channels_first".

    Example:
        >>> keratron.ops.average_pool(keratron.ops.ones((1, 5, 5, 2)), 2, padding="same").shape
        (1, 3, 3, 2)
    """
    x = as_tensor(inputs)
    if not x._value.dtype.is_floating_point:
        from keratron.ops.elementwise import cast

        x = cast(x, config.floatx())
    return _pool("average_pool", avg_pool_p, x, pool_size, strides, padding, data_format)


# ------------------------------------------------------------------------------ pooling rewrites
# The compiler's max-pool rewrites (registered with `passes.register_pass`). The gradient
# gates of the activations that commute with a window max, and those activations.
_GATES = {relu_grad_p: relu_p, relu6_grad_p: relu6_p}
_MONOTONE = (relu_p, relu6_p)
_MONOTONE_EPILOGUES = {"relu": relu_p, "relu6": relu6_p}


def gate_pooled_gradients(graph: Graph, outputs: list) -> list:
    """Moves a relu/relu6 gradient gate in front of a max-pool gradient:
    `relu_grad(max_pool_grad(y, g, idx), y)` becomes `max_pool_grad(y, relu_grad(g, pooled),
    idx)` where `pooled, idx = max_pool(y)`. The pool gradient is zero except at each window's
    argmax, whose value is the window's pooled value; so gating g by the pooled values gives
    the same numbers, and the gate reads the pooled tensor (a quarter of the elements for 2x2
    pooling) instead of another full pass over the unpooled one (a relu conv before a pool).
    """
    prod = passes.producers(graph)
    uses = passes.use_counts(graph, outputs)
    subst: dict = {}
    nodes = []
    for n in graph.nodes:
        nodes.append(n)
        if n.kind != "prim" or n.prim not in _GATES:
            continue
        a, y = n.inputs
        grad = prod.get(a)
        if grad is None or grad.kind != "prim" or grad.prim is not max_pool_grad_p:
            continue
        x, g, idx = grad.inputs
        pool = prod.get(idx) if idx is not None else None
        # The gate reads the pooled input itself, or what the activation was applied to
        # (relu(v) > 0 exactly where v > 0; relu6(v) is in (0, 6) exactly where v is).
        act = prod.get(x)
        reads_pooled = x == y or (
            act is not None
            and act.kind == "prim"
            and act.prim is _GATES[n.prim]
            and act.inputs[0] == y
        )
        if (
            uses.get(a, 0) != 1
            or not reads_pooled
            or pool is None
            or pool.prim is not max_pool_p
            or pool.inputs[0] != x
            or pool.params != grad.params
        ):
            continue
        gate, gated = passes.new_value(graph, n.prim, [g, pool.outputs[0]], {}, graph.avals[g])
        regrad, out = passes.new_value(
            graph, max_pool_grad_p, [x, gated, idx], grad.params, graph.avals[n.outputs[0]]
        )
        nodes[-1:] = [gate, regrad]
        subst[n.outputs[0]] = out
    graph.nodes = nodes
    return passes.substitute(graph, outputs, subst)


def sum_pooled_gradients(graph: Graph, outputs: list) -> list:
    """A sum of a max-pool gradient over (at least) the spatial axes sums the pooled gradient
    instead: the pool gradient only moves each pooled value to its window's argmax (adding
    where windows overlap), so the totals are the same, up to the order of the additions. A
    convolution's bias gradient before a pool then reads a quarter of the elements (2x2)."""
    prod = passes.producers(graph)
    for n in graph.nodes:
        if n.kind != "prim" or n.prim is not sum_p:
            continue
        grad = prod.get(n.inputs[0])
        if grad is None or grad.kind != "prim" or grad.prim is not max_pool_grad_p:
            continue
        rank = len(graph.avals[n.inputs[0]][0])
        axis = n.params["axis"]
        axes = range(rank) if axis is None else (axis,) if isinstance(axis, int) else axis
        if {a % rank for a in axes} >= set(range(1, rank - 1)):
            n.inputs = [grad.inputs[1]]
    return outputs


def pool_before_activation(graph: Graph, outputs: list) -> list:
    """`max_pool(relu(v))` becomes `relu(max_pool(v))` (likewise relu6, standalone or as a
    matmul epilogue): a non-decreasing elementwise function commutes with a window max, so
    the activation reads the pooled tensor instead of the unpooled one. (A convolution's
    epilogue stays: the convolution applies it as it writes its output, at no extra pass.)

    Only where every consumer of the activated value is such a max_pool, or the max_pool_grad
    of one (which reads its input's shape only, and the pool's indices). Indices can differ
    only in windows whose raw values are all <= 0 (relu6: >= 6), where the activated values
    tie; the pooled value there is 0 (6), whose gate passes no gradient, so the gradient is
    the same.
    """
    prod = passes.producers(graph)
    consumers: dict = {}
    for n in graph.nodes:
        for s in n.inputs:
            if s is not None:
                consumers.setdefault(s, []).append(n)
    live_outputs = {v for k, v in outputs if k == "slot"}
    after: dict = {}  # id(max_pool node) -> the activation node to run right after it

    def pool_or_its_grad(u, a, indices):
        if u.kind != "prim" or u.inputs.count(a) != 1 or u.inputs[0] != a:
            return False
        return u.prim is max_pool_p or (u.prim is max_pool_grad_p and u.inputs[2] in indices)

    for a, users in consumers.items():
        act = prod.get(a)
        if a in live_outputs or act is None or act.kind != "prim":
            continue
        pools = [u for u in users if u.kind == "prim" and u.prim is max_pool_p]
        indices = {p.outputs[1] for p in pools}
        if not pools or not all(pool_or_its_grad(u, a, indices) for u in users):
            continue
        if act.prim in _MONOTONE and graph.avals[act.inputs[0]] == graph.avals[a]:
            prim, source = act.prim, act.inputs[0]
        elif act.prim is matmul_p and act.params.get("activation") in _MONOTONE_EPILOGUES:
            prim, source = _MONOTONE_EPILOGUES[act.params["activation"]], a
            act.params = {**act.params, "activation": None}
        else:
            continue
        for u in users:
            u.inputs = [source] + u.inputs[1:]
        for p in pools:
            pooled = p.outputs[0]
            raw = graph._new_slot(*graph.avals[pooled])
            p.outputs = [raw] + p.outputs[1:]
            after[id(p)] = Node("prim", [raw], [pooled], prim, {})
    nodes = []
    for n in graph.nodes:
        nodes.append(n)
        if id(n) in after:
            nodes.append(after[id(n)])
    graph.nodes = nodes
    return outputs


# ------------------------------------------------------------------------------ conv + max pool
# In a CPU function, a 2-D convolution read only by a valid max pool whose argmax indices
# nothing reads (inference) runs as one primitive: the batch is cut into chunks whose
# convolution output fits in a few MiB, each pooled while it is still in cache, and the pool
# takes window maxima of strided views instead of computing indices. The bench's cnn predict
# (batch 128) otherwise wrote a 19 MB convolution output to memory, read it back to pool it
# and wrote 9 MB of indices no one read.
_CHUNK_BYTES = 4 << 20


def _valid(pool_size):
    return tuple((0, 0) for _ in pool_size)


def _conv_max_pool_shape(x, k, b, strides, padding, dilation, groups, activation, pool_size,
                         pool_strides):  # fmt: skip
    y = _conv_shape(x, k, b, strides, padding, dilation, groups, activation)
    return None if y is None else _pooled_aval(y[0], pool_size, pool_strides, _valid(pool_size))


def _conv_max_pool_impl(x, k, b, strides, padding, dilation, groups, activation, pool_size,
                        pool_strides):  # fmt: skip
    y = _conv_impl(x, k, b, strides, padding, dilation, groups, activation)
    return _max_pool_impl(y, pool_size, pool_strides, _valid(pool_size))[0]


def _conv_max_pool_vjp(g, x, k, b, out, strides, padding, dilation, groups, activation,
                       pool_size, pool_strides):  # fmt: skip
    conv = dict(strides=strides, padding=padding, dilation=dilation, groups=groups)
    pool = dict(pool_size=pool_size, strides=pool_strides, padding=_valid(pool_size))
    y = conv_p.bind(x, k, b, activation=activation, **conv)
    _, idx = max_pool_p.bind(y, **pool)
    gy = max_pool_grad_p.bind(y, g, idx, **pool)
    return _conv_vjp(gy, x, k, b, y, activation=activation, **conv)


conv_max_pool_p = Primitive(
    "conv_max_pool",
    _conv_max_pool_impl,
    _conv_max_pool_vjp,
    fresh=True,
    shape_rule=_conv_max_pool_shape,
)


def _max_into(views, out):
    """out = the elementwise maximum of `views` (NaN wins, as in max pooling)."""
    if len(views) == 1:
        return out.copy_(views[0])
    torch.maximum(views[0], views[1], out=out)
    for v in views[2:]:
        torch.maximum(out, v, out=out)
    return out


def _window_max(y, pool_size, strides, out, rows):
    """out (N, OH, OW, C) = the valid max pooling of y (N, H, W, C): the maxima over each
    window's rows into `rows` (N, OH, W, C), then over its columns."""
    (ph, pw), (sh, sw) = pool_size, strides
    oh, ow = out.shape[1], out.shape[2]
    _max_into([y[:, a : a + sh * (oh - 1) + 1 : sh] for a in range(ph)], rows)
    return _max_into([rows[:, :, a : a + sw * (ow - 1) + 1 : sw] for a in range(pw)], out)


def _conv_pool_plan(x, k, strides, padding, dilation, pool_size, pool_strides):
    """(chunk, conv output (H, W, C), pooled (OH, OW)) for a chunked run; `k` may be the
    kernel prepacked by `conv_kernel_layout` (torch's (out, in, *k) order)."""
    window, c = (k.shape[2:], k.shape[0]) if k.is_mkldnn else (k.shape[:-2], k.shape[-1])
    h, w = _conv_out_spatial(x.shape, window, strides, padding, dilation)
    oh, ow = _conv_out_spatial((0, h, w, c), pool_size, pool_strides, _valid(pool_size), (1, 1))
    n, image = x.shape[0], h * w * c * x.element_size()
    pieces = max(1, -(-n * image // _CHUNK_BYTES))
    return -(-n // pieces), (h, w, c), (oh, ow)


@device_route(conv_max_pool_p, "cpu")
def _conv_max_pool_cpu(x, k, b, strides, padding, dilation, groups, activation, pool_size,
                       pool_strides):  # fmt: skip
    """oneDNN's convolution and the window maxima, a chunk of the batch at a time, where the
    convolution's CPU route runs oneDNN; else the convolution's route, then the max pool."""
    args = (strides, padding, dilation, groups, activation, pool_size, pool_strides)
    out = _conv_max_pool_into({}, None, x, k, b, *args)
    if out is None:
        y = _conv_cpu(x, k, b, *args[:5])
        return _max_pool_impl(y, pool_size, pool_strides, _valid(pool_size))[0]
    return out


def _conv_pool_2d(params, avals) -> bool:
    return len(avals[0][0]) == 4


@memory_plan.keeps_output(conv_max_pool_p, _conv_pool_2d)
def _conv_max_pool_into(buffers, out_avals, x, k, b, strides, padding, dilation, groups,
                        activation, pool_size, pool_strides):  # fmt: skip
    """The chunked run in the buffers of `buffers`: the pooled output, one chunk's convolution
    (`_onednn_into`, as `_conv_into` writes it) and the row maxima. A relu or relu6 epilogue,
    which commutes with a window max, is applied to the pooled chunk."""
    tpad = _kept_onednn_padding(x, k, strides, padding, groups, activation)
    if tpad is None or x.shape[0] == 0:
        return None
    step, (h, w, c), (oh, ow) = _conv_pool_plan(x, k, strides, padding, dilation, pool_size,
                                                pool_strides)  # fmt: skip
    n = x.shape[0]
    out = _to_cl(memory_plan.buffer(buffers, "out", ((n, c, oh, ow), x.dtype), channels_last=True))
    chunk = memory_plan.buffer(buffers, "conv", ((step, c, h, w), x.dtype), channels_last=True)
    rows = memory_plan.buffer(buffers, "rows", ((step, oh, w, c), x.dtype))
    after = activation in _MONOTONE_EPILOGUES
    xt, *args = _onednn_args(x, k, b, tpad, strides, dilation, groups)
    for i in range(0, n, step):
        y = _onednn_into(chunk[: min(step, n - i)], (xt[i : i + step], *args))
        y = _to_cl(epilogue.apply(y, None if after else activation, inplace=True))
        pooled = _window_max(y, pool_size, pool_strides, out[i : i + step], rows[: y.shape[0]])
        if after:
            epilogue.apply(pooled, activation, inplace=True)
    return out


def fuse_conv_max_pool(graph: Graph, outputs: list) -> list:
    """`pooled, idx = max_pool(conv(x, k, b))` becomes `pooled = conv_max_pool(x, k, b)` in a
    CPU function where nothing else reads the convolution's output or the indices (a valid
    2-D float32 pool); backend "triton" keeps its convolution kernels."""
    if passes.graph_device(graph).type != "cpu" or config.kernel_backend() == "triton":
        return outputs
    prod = passes.producers(graph)
    uses = passes.use_counts(graph, outputs)
    fused = set()
    for n in graph.nodes:
        if n.kind != "prim" or n.prim is not max_pool_p or uses.get(n.outputs[1], 0):
            continue
        conv = prod.get(n.inputs[0])
        shape, dtype = graph.avals[n.inputs[0]]
        if (
            conv is None
            or conv.kind != "prim"
            or conv.prim is not conv_p
            or uses.get(conv.outputs[0]) != 1
            or len(shape) != 4
            or dtype != torch.float32
            or _has_pad(n.params["padding"])
        ):
            continue
        pool = {"pool_size": n.params["pool_size"], "pool_strides": n.params["strides"]}
        n.prim, n.params = conv_max_pool_p, {**conv.params, **pool}
        n.inputs, n.outputs = list(conv.inputs), n.outputs[:1]
        fused.add(id(conv))
    graph.nodes = [n for n in graph.nodes if id(n) not in fused]
    return outputs


def fold_pads_into_convs(graph: Graph, outputs: list) -> list:
    """`conv(pad(x))` becomes one convolution with symmetric padding in a CPU function, where
    the pad is the convolution's alone, adds zeros on the spatial axes only (at most as many
    before as after each one) and the convolution pads nothing itself (dilation 1): Keras's
    ZeroPadding2D before a VALID convolution, as MobileNet pads (0, 1) before each stride-2
    depthwise convolution. The pad's copy of the input goes (26 MB for MobileNet's first at
    batch 8: 1.56 -> 0.57 ms with the convolution). A depthwise convolution's own uneven
    padding (SAME at stride 2 on an even size pads (0, 1)), which its CPU route would copy
    the input to apply, folds the same way.

    Symmetric pads fold as they are. Uneven pads (lo, hi) on an axis, for a depthwise kernel
    (one input channel a group), become (hi, hi) with hi - lo zero rows prepended to the
    kernel (a small pad of the kernel, in the prelude where the kernel is a variable's): each
    window then starts hi - lo rows earlier and those rows meet zero weights, so the window
    covers the same inputs and the output has the same size. A depthwise convolution is
    memory-bound and the extra taps cost little; a dense one would do (k + 1)^2 / k^2 the
    multiply-adds (a 3x3 stem at 224x224: 0.53 -> 0.69 ms), so it keeps its pad. The added
    taps multiply real inputs by zero and come first in each window: the values are the same
    for finite inputs, while an infinite or NaN input spreads NaN to the hi - lo windows
    before its own."""
    if passes.graph_device(graph).type != "cpu" or config.kernel_backend() == "triton":
        return outputs
    prod = passes.producers(graph)
    uses = passes.use_counts(graph, outputs)
    nodes = []
    for n in graph.nodes:
        if n.kind == "prim" and n.prim is conv_p:
            folded = _folded_pad(graph, n, prod.get(n.inputs[0]), uses)
            if folded is not None:
                nodes.extend(folded)
        nodes.append(n)
    graph.nodes = nodes
    return outputs


def _folded_pad(graph: Graph, conv, pad, uses):
    """Rewrites `conv` to read the input of `pad`, or its own uneven padding, with symmetric
    padding (see `fold_pads_into_convs`); returns the nodes to run before it (the kernel's
    pad, if any), or None where the fold does not apply."""
    p = conv.params
    shape, dtype = graph.avals[conv.inputs[0]]
    if len(shape) != 4 or dtype != torch.float32 or any(d != 1 for d in p["dilation"]):
        return None
    if _foldable_pad(pad, uses) and not _has_pad(p["padding"]):
        x, widths = pad.inputs[0], pad.params["widths"][1:-1]
    elif _torch_padding(p["padding"]) is None:  # the convolution's own SAME pads, uneven
        x, widths = conv.inputs[0], p["padding"]
    else:
        return None
    if not all(0 <= lo <= hi for lo, hi in widths):
        return None
    before = []
    k = conv.inputs[1]
    grow = tuple((hi - lo, 0) for lo, hi in widths) + ((0, 0), (0, 0))
    if any(g for g, _ in grow):
        kshape, kdtype = graph.avals[k]
        if p["groups"] == 1 or kshape[-2] != 1:  # only a depthwise kernel grows
            return None
        padded = tuple(d + g for d, (g, _) in zip(kshape, grow))
        node, k = passes.new_value(
            graph, pad_p, [k], {"widths": grow, "value": 0.0}, (padded, kdtype)
        )
        before.append(node)
    conv.inputs = [x, k] + conv.inputs[2:]
    conv.params = {**p, "padding": tuple((hi, hi) for _, hi in widths)}
    return before


def _foldable_pad(pad, uses) -> bool:
    """A zero pad of a 4-D value on its spatial axes alone, read by nothing but the
    convolution asking."""
    if pad is None or pad.kind != "prim" or pad.prim is not pad_p:
        return False
    widths = pad.params["widths"]
    return (
        uses.get(pad.outputs[0]) == 1
        and len(widths) == 4
        and pad.params["value"] == 0
        and widths[0] == (0, 0)
        and widths[-1] == (0, 0)
    )


passes.register_pass(gate_pooled_gradients)
passes.register_pass(sum_pooled_gradients)
passes.register_pass(pool_before_activation)
passes.register_pass(fold_pads_into_convs)
passes.register_pass(fuse_conv_max_pool)
