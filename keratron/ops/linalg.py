"""Linear algebra: the fused `matmul` primitive, products (dot, tensordot, einsum, ...), norms,
`solve` and `inv`.

`matmul` is the hot primitive behind Dense: inputs `(x, w, bias or None)` and an optional
activation epilogue, applied in place on the fresh product, so a Dense layer is one call. Its
VJP takes the activation's derivative from the output (relu, relu6, sigmoid, tanh) or from the
recomputed pre-activation (gelu), then forms both products. The reference is torch's BLAS
GEMM; on the CPU a route (`@device_route(matmul_p, "cpu")`, `cpu_gemm`) runs the larger float32
products on oneDNN's inner product instead, and the Triton route is attached by
`keratron.triton_kernels`. The epilogue helpers here are shared with `ops.convolution`.
"""

from __future__ import annotations

import builtins
import functools
import math
import string

import torch

from keratron import config
from keratron.autodiff import memory_plan, side_stream
from keratron.autodiff.jvp import jvp
from keratron.autodiff.primitive import device_route
from keratron.ops import _cpu_choice, epilogue, reduction
from keratron.ops import _shape_rules as rules
from keratron.ops._core import (
    Primitive,
    Tensor,
    as_tensor,
    canonical_axis,
    on_device_of,
)
from keratron.ops.creation import (
    eye,
)
from keratron.ops.elementwise import (
    _float,
    _promote,
    abs,
    add,
    cast,
    divide,
    erf,
    exp,
    greater,
    multiply,
    negative,
    not_equal,
    power,
    relu6_grad_p,
    relu_grad_p,
    sqrt,
    square,
    subtract,
    tanh,
    where,
)
from keratron.ops.shaping import (
    broadcast_to,
    concatenate,
    expand_dims,
    get_item,
    moveaxis,
    reshape,
    squeeze,
    transpose,
    tril,
    triu,
)

__all__ = [
    "matmul",
    "fused_matmul",
    "dot",
    "tensordot",
    "einsum",
    "outer",
    "inner",
    "vdot",
    "norm",
    "solve",
    "inv",
]

# ------------------------------------------------------------------------ epilogues
_GELU_C = math.sqrt(2.0 / math.pi)
_GELU_A = 0.044715


def gelu_derivative(z: Tensor, approximate: bool) -> Tensor:
    """d gelu / dz at the pre-activation `z`, written with ops (so it differentiates again)."""
    if not approximate:
        # Phi(z) + z * phi(z)
        cdf = multiply(add(erf(multiply(z, 1.0 / math.sqrt(2.0))), 1.0), 0.5)
        pdf = multiply(exp(multiply(square(z), -0.5)), 1.0 / math.sqrt(2.0 * math.pi))
        return add(cdf, multiply(z, pdf))
    z2 = square(z)
    t = tanh(multiply(multiply(z, add(multiply(z2, _GELU_A), 1.0)), _GELU_C))
    dt = multiply(subtract(1.0, square(t)), multiply(add(multiply(z2, 3 * _GELU_A), 1.0), _GELU_C))
    return multiply(add(add(t, 1.0), multiply(z, dt)), 0.5)


def epilogue_grad(g: Tensor, out: Tensor, activation, pre_activation) -> Tensor:
    """Pulls the cotangent `g` back through the epilogue.

    relu, relu6, sigmoid and tanh read their derivative off the output; gelu calls
    `pre_activation()` to recompute the product it was applied to.
    """
    if activation is None:
        return g
    if activation == "relu":
        return relu_grad_p.bind(g, out)
    if activation == "relu6":
        return relu6_grad_p.bind(g, out)
    if activation == "sigmoid":
        return multiply(g, multiply(out, subtract(1, out)))
    if activation == "tanh":
        return multiply(g, subtract(1, square(out)))
    return multiply(g, gelu_derivative(pre_activation(), activation == "gelu_tanh"))


# ------------------------------------------------------------------------ matmul
def _blas_gemm(x, w, b):
    """`x @ w (+ b)` for matrices on torch's BLAS GEMM, the bias folded in by addmm."""
    return torch.mm(x, w) if b is None else torch.addmm(b, x, w)


def _matmul_with(gemm, x, w, b, activation):
    """`act(x @ w + b)` with a 2-D `w` as one `gemm(x2, w, b)` call over all leading axes of x
    folded into the rows of x2; a batched `w` through torch.matmul."""
    if w.dim() == 2:
        if x.dim() == 2:
            y = gemm(x, w, b)
        else:
            y = gemm(x.reshape(-1, x.shape[-1]), w, b).reshape(*x.shape[:-1], w.shape[-1])
    else:
        y = torch.matmul(x, w)
        if b is not None:
            y.add_(b)
    return epilogue.apply(y, activation, inplace=True)


def _matmul_impl(x, w, b, activation):
    return _matmul_with(_blas_gemm, x, w, b, activation)


def _mT(x: Tensor) -> Tensor:
    axes = list(range(x.ndim))
    axes[-1], axes[-2] = axes[-2], axes[-1]
    return transpose(x, axes)


def _matmul_vjp(g, x, w, b, out, activation):
    g = epilogue_grad(g, out, activation, lambda: matmul_p.bind(x, w, b, activation=None))
    gx = matmul_p.bind(g, _mT(w), None, activation=None)
    if w.ndim == 2 and x.ndim > 2:
        k, n = w.shape
        gw = matmul_p.bind(_mT(reshape(x, (-1, k))), reshape(g, (-1, n)), None, activation=None)
    else:
        gw = matmul_p.bind(_mT(x), g, None, activation=None)
    # The engine sums the bias cotangent over the leading axes.
    return gx, gw, (None if b is None else g)


def _matmul_shape(x, w, b, activation):
    (xs, dtype), (ws, wdtype) = x, w
    if wdtype != dtype or not dtype.is_floating_point or not xs or not ws:
        return None
    # torch.matmul: a 1-D operand gains (and then loses) a unit axis; batch axes broadcast.
    x2 = xs if len(xs) > 1 else (1, *xs)
    w2 = ws if len(ws) > 1 else (*ws, 1)
    batch = rules.broadcast_shapes(x2[:-2], w2[:-2])
    if x2[-1] != w2[-2] or batch is None:
        return None
    out = batch + xs[-2:-1] + ws[-1:] if len(ws) > 1 else batch + xs[-2:-1]
    if b is not None and (b[1] != dtype or rules.broadcast_shapes(out, b[0]) != out):
        return None
    return [(out, dtype)]


matmul_p = Primitive(
    "matmul",
    _matmul_impl,
    _matmul_vjp,
    fresh=True,
    epilogues=epilogue.FUSED,
    # A weight gradient (x.T @ g), read by the optimizer's update alone.
    side_stream=side_stream.read_by_effects_only,
    shape_rule=_matmul_shape,
)


# ------------------------------------------------------------------ the CPU route
try:  # oneDNN's inner product (absent from a torch built without oneDNN)
    _onednn_linear = torch.ops.mkldnn._linear_pointwise
except (AttributeError, RuntimeError):
    _onednn_linear = None
# From this many multiply-adds (m*k*n) on, a float32 product runs on oneDNN's inner product,
# below it on torch's BLAS GEMM, whose per-call cost is lower. Measured on a 2-core AVX-512
# machine (2 threads): oneDNN is 1.7-2.6x faster from 2M multiply-adds on (128x784 @ 784x512:
# 543 -> 273 us; 8x1024 @ 1024x1000: 168 -> 66 us) and up to 3x slower below 500k (32x32 @
# 32x64: 6 -> 16 us). With a transposed left operand (a weight gradient, x.T @ g, whose
# contraction runs over the batch) oneDNN gains less and later: 1.5x at 33M-51M, slower at
# 2M. But a transposed product with KEPT_PRODUCT_ELEMENTS or more (cnn's 9216x128
# flatten-to-dense weight gradient, 4.7 MB) stays on BLAS, which a compiled plan has write
# into a kept buffer: oneDNN copies x.T into its layout and allocates the product afresh on
# every call; in cnn's training step that took 3.7 ms with 2,300 page faults, 1.9 ms kept.
ONEDNN_GEMM_MACS = 1 << 20
ONEDNN_GEMM_MACS_TRANSPOSED = 1 << 23
KEPT_PRODUCT_ELEMENTS = 1 << 20
# Narrow products (2 <= n < 16 output columns, a classifier's head) are the BLAS GEMM's weak
# case: 128x512 @ 512x10 takes 33 us there (20 G multiply-adds/s) where n = 16 takes 17 us.
# From NARROW_ROWS_COLS = m*k on, a narrow product runs on oneDNN (~21 us for that one, flat
# in n), or, with a transposed left operand (a head's weight gradient, x.T @ g), as
# (g.T @ x).T made dense (512x128 @ 128x10: 52 -> 25-32 us); at 128x128 BLAS stays as fast.
NARROW_COLUMNS = 16
NARROW_COLUMNS_TRANSPOSED = 12
NARROW_ROWS_COLS = 1 << 15


# On a CPU where torch's BLAS GEMM runs at about half oneDNN's rate (`blas_is_slow`), a
# transposed product runs on oneDNN from this many multiply-adds on. Measured on a 2-core AMD
# EPYC (AVX-512, 2 threads): x.T @ g at 64x128x512 (4M) 49 -> 37 us, at 128x128x128 (2M) BLAS
# 24 us against 30. Kept-size products stay on BLAS there too: cnn's 9216x128x128 weight
# gradient alone took 1.68 ms (BLAS, kept) against 1.25 ms (oneDNN, fresh), but the cnn
# step with it on oneDNN drew 3,109-3,199 samples/s against 3,287-3,354.
ONEDNN_GEMM_MACS_TRANSPOSED_SLOW_BLAS = 1 << 22


@functools.cache
def blas_is_slow() -> bool:
    """Whether torch's BLAS GEMM runs well below oneDNN's rate on this CPU: torch's x86 BLAS
    (MKL) on a processor not made by Intel, where MKL does not take its fastest code path.
    On a 2-core AMD EPYC with AVX-512 (2 threads) MKL's sgemm reaches 106 G multiply-adds/s
    at 512-1024 cubed, oneDNN's inner product 215-231; on the Intel machines the CPU routes
    were first measured on, MKL came within ~10% of oneDNN on the large products."""
    if not torch.backends.mkl.is_available():
        return False
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
            head = f.read(4096)
    except OSError:
        return False  # no way to tell: keep the choices measured on Intel machines
    for line in head.splitlines():
        if line.startswith("vendor_id"):
            return "GenuineIntel" not in line
    return False


def _narrow(m: int, k: int, n: int, columns: int = NARROW_COLUMNS) -> bool:
    """A product of `m`x`k` by `k`x`n` in BLAS's weak narrow case (see NARROW_COLUMNS)."""
    return 2 <= n < columns and m * k >= NARROW_ROWS_COLS


def _float32_cpu(x: torch.Tensor, w: torch.Tensor) -> bool:
    return (
        x.dtype == torch.float32
        and w.dtype == torch.float32
        and x.device.type == "cpu"
        and w.device.type == "cpu"
    )


def _plain_layout(t: torch.Tensor) -> bool:
    """A matrix whose rows or columns are contiguous (a matrix or a transposed one)."""
    return t.is_contiguous() or t.t().is_contiguous()


def _onednn_operands(x, w, b) -> bool:
    """Whether oneDNN's inner product (and so every candidate of `_gemm_candidates`) takes
    these operands: float32 CPU matrices whose rows or columns are contiguous, and no bias or
    a float32 vector of w's columns."""
    if not (_float32_cpu(x, w) and _plain_layout(x) and _plain_layout(w)):
        return False
    return b is None or (b.dtype == torch.float32 and tuple(b.shape) == (w.shape[1],))


def onednn_gemm(
    x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None, keepable: bool = True
) -> bool:
    """Whether `cpu_gemm(x, w, b, keepable)` runs on oneDNN: two float32 CPU matrices (b a
    vector of w's columns, or None) of a size where oneDNN's inner product is the faster.
    `keepable`: whether a kept buffer may take BLAS's product of KEPT_PRODUCT_ELEMENTS or
    more (a compiled plan's matmul, `_matmul_into`); where none can (a convolution's weight
    gradient), a large transposed product runs on oneDNN too."""
    if _onednn_linear is None or x.dim() != 2 or w.dim() != 2:
        return False
    m, k = x.shape
    n = w.shape[1]
    macs = m * k * n
    if macs < ONEDNN_GEMM_MACS and not _narrow(m, k, n):
        return False  # the common small case, decided first
    if not _onednn_operands(x, w, b):
        return False
    transposed = m > 1 and k > 1 and not x.is_contiguous()
    if transposed:
        least = (
            ONEDNN_GEMM_MACS_TRANSPOSED_SLOW_BLAS if blas_is_slow() else ONEDNN_GEMM_MACS_TRANSPOSED
        )
        return macs >= least and (m * n < KEPT_PRODUCT_ELEMENTS or not keepable)
    return macs >= ONEDNN_GEMM_MACS or n < NARROW_COLUMNS


def narrow_transposed(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None) -> bool:
    """Whether `cpu_gemm(x, w, b)` computes a narrow product with a transposed left operand
    (x.T @ g, a classifier head's weight gradient) as `(w.T @ x.T).T`, made dense: float32
    CPU matrices without a bias, 2 <= n < NARROW_COLUMNS_TRANSPOSED, m*k from
    NARROW_ROWS_COLS on, x a transposed dense matrix. Asked where `onednn_gemm` said no."""
    if x.dim() != 2 or w.dim() != 2 or b is not None:
        return False
    (m, k), n = x.shape, w.shape[1]
    if not _narrow(m, k, n, NARROW_COLUMNS_TRANSPOSED):
        return False
    return _float32_cpu(x, w) and not x.is_contiguous() and x.t().is_contiguous()


def onednn_bias(b: torch.Tensor | None) -> torch.Tensor | None:
    """A bias as oneDNN's kernels must get it: oneDNN reads it as a dense vector, so a strided
    one (a slice of a longer vector) is copied first; None stays None."""
    return b if b is None else b.contiguous()


# From this many multiply-adds on (and in BLAS's narrow case), which kernel runs a float32
# product is measured on this machine (`_cpu_choice`): the rules above were measured on one
# 2-core Intel machine, and on another (same torch, 2 threads) BLAS ran every product of the
# mlp's training step as fast as oneDNN or faster (128x784 @ 784x512 627 us against 631; the
# weight gradients 784x128.T @ 128x512 527 against 1,000, 512x128.T @ 128x512 363 against 661).
MEASURED_GEMM_MACS = 1 << 18
assert MEASURED_GEMM_MACS <= ONEDNN_GEMM_MACS  # below it, every fixed rule says BLAS


def _inner_product(x, w, b):
    # oneDNN's weight is (out_features, in_features): w.T, a view.
    return _onednn_linear(x, w.t(), onednn_bias(b), "none", [], "")


def _narrow_product(x, w, b):
    return torch.mm(w.t(), x.t()).t().contiguous()


# The kernels `cpu_gemm` runs, by the names `gemm_kernel` gives them.
_GEMM_KERNELS = {"blas": _blas_gemm, "onednn": _inner_product, "narrow": _narrow_product}


def _gemm_candidates(x, w, b) -> dict:
    """The kernels that can compute `x @ w (+ b)` for float32 CPU matrices, by name, each
    bound to the operands."""
    names = ["blas", "onednn"]
    n = w.shape[1]
    if b is None and 2 <= n < NARROW_COLUMNS_TRANSPOSED and x.t().is_contiguous():
        names.append("narrow")
    return {name: functools.partial(_GEMM_KERNELS[name], x, w, b) for name in names}


def _fixed_gemm_kernel(x, w, b, keepable: bool) -> str:
    """The kernel the fixed rules (`onednn_gemm`, `narrow_transposed`) give `x @ w (+ b)`."""
    if onednn_gemm(x, w, b, keepable):
        return "onednn"
    return "narrow" if narrow_transposed(x, w, b) else "blas"


def _blas_whatever_values(m: int, k: int, n: int) -> bool:
    """Whether `gemm_kernel` gives an (m, k) @ (k, n) product to BLAS from its sizes alone:
    below MEASURED_GEMM_MACS and not narrow."""
    return m * k * n < MEASURED_GEMM_MACS and not _narrow(m, k, n)


def gemm_kernel(
    x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None, keepable: bool = True
) -> str:
    """Which kernel `cpu_gemm(x, w, b, keepable)` runs: "onednn" (oneDNN's inner product),
    "narrow" (`(w.T @ x.T).T` made dense) or "blas" (torch's GEMM). The fixed rules decide
    small products, and are the default of the measured choice (`_cpu_choice.choose`) for
    float32 products of MEASURED_GEMM_MACS or more and narrow ones."""
    if x.dim() == 2 and w.dim() == 2:
        (m, k), n = x.shape, w.shape[1]
        macs = m * k * n
        if _blas_whatever_values(m, k, n):
            return "blas"  # below every fixed rule's threshold, as the common small product
        if _onednn_linear is not None and x.is_cpu and config.cpu_kernel_benchmark():
            # Everything the rules and the candidates read: sizes, layouts (strides), dtypes,
            # the bias, and the thread count the kernels will run on.
            bias = None if b is None else (b.dtype, b.shape, b.stride())
            key = (m, k, n, x.stride(), w.stride(), x.dtype, w.dtype, w.is_cpu, bias, keepable)
            key += (torch.get_num_threads(),)
            return _cpu_choice.choose(
                "gemm",
                key,
                lambda: _gemm_candidates(x, w, b) if _onednn_operands(x, w, b) else None,
                lambda: _fixed_gemm_kernel(x, w, b, keepable),
                # Enough calls that a round takes ~0.3 ms at ~100 G multiply-adds/s.
                calls=min(16, max(1, 30_000_000 // macs)),
            )
    return _fixed_gemm_kernel(x, w, b, keepable)


def cpu_gemm(
    x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None, keepable: bool = True
) -> torch.Tensor:
    """`x @ w (+ b)` for CPU matrices on the kernel `gemm_kernel` picks: oneDNN's inner
    product, the narrow form, or torch's BLAS GEMM. Activations are left to the caller
    (`epilogue.apply`): oneDNN's fused relu maps NaN to 0, where the epilogue's NaN policy
    keeps NaN."""
    return _GEMM_KERNELS[gemm_kernel(x, w, b, keepable)](x, w, b)


@device_route(matmul_p, "cpu")
def _matmul_cpu(x, w, b, activation):
    """`_matmul_impl` with its 2-D product on `cpu_gemm`: oneDNN for the large float32
    products, the reference's BLAS call otherwise (decided without raising: most products of
    a small model are small)."""
    return _matmul_with(cpu_gemm, x, w, b, activation)


def _matmul_cpu_step(avals, params, general):
    """A compiled plan's step for a product of 2-D operands that `gemm_kernel` leaves to BLAS
    whatever its values (below MEASURED_GEMM_MACS, not narrow): that BLAS call itself, without
    the route's decisions on every call (a small Dense layer's step spent about as long in them
    as in its three products)."""
    xa, wa, _ = avals
    if wa is None or len(xa[0]) != 2 or len(wa[0]) != 2:
        return None
    (m, k), n = xa[0], wa[0][1]
    if not _blas_whatever_values(m, k, n):
        return None
    activation = params["activation"]

    def step(x, w, b):
        if not x.is_cpu:
            return general(x, w, b)
        y = _blas_gemm(x, w, b)
        return y if activation is None else epilogue.apply(y, activation, inplace=True)

    return step


matmul_p.cpu_step = _matmul_cpu_step


def _matmul_keeps(params, avals) -> bool:
    """Whether a kept buffer may serve this product: the ones `cpu_gemm` leaves to BLAS, and
    any product of KEPT_PRODUCT_ELEMENTS or more, which BLAS serves where x is transposed (the
    writer checks the layout at run time)."""
    (xs, dtype), w = avals[0], avals[1]
    if w is None or len(xs) != 2 or len(w[0]) != 2:
        return False
    m, k, n = xs[0], xs[1], w[0][1]
    if dtype != torch.float32 or m * n >= KEPT_PRODUCT_ELEMENTS:
        return True
    if config.cpu_kernel_benchmark():
        return True  # BLAS may measure the faster at any size (the writer asks at run time)
    return m * k * n < ONEDNN_GEMM_MACS and not _narrow(m, k, n)


@memory_plan.keeps_output(matmul_p, _matmul_keeps)
def _matmul_into(buffers, out_avals, x, w, b, activation):
    if x.dim() != 2 or w.dim() != 2 or activation is not None:
        return None
    if gemm_kernel(x, w, b) != "blas":
        return None
    out = memory_plan.buffer(buffers, "out", out_avals[0])
    return torch.mm(x, w, out=out) if b is None else torch.addmm(b, x, w, out=out)


# matmul_p.kernel: optional device route, attached by the Triton kernels package.


def _plain_matrix_product(x1, x2, transpose_x2: bool = False) -> Tensor | None:
    """`x1 @ x2` (or `x1 @ x2.T`) for the common case that needs no conversion: two Tensors
    holding non-bool matrices of one dtype on one device whose contracted axes match. Returns
    None for anything else, so the caller takes its general path.
    """
    if not (isinstance(x1, Tensor) and isinstance(x2, Tensor)):
        return None
    v1, v2 = x1._value, x2._value
    if not (
        v1.dim() == 2
        and v2.dim() == 2
        and v1.dtype is v2.dtype
        and v1.dtype is not torch.bool
        and v1.device == v2.device
        and v1.shape[1] == v2.shape[1 if transpose_x2 else 0]
    ):
        return None
    return matmul_p.bind(x1, _mT(x2) if transpose_x2 else x2, None, activation=None)


def matmul(x1, x2):
    """Matrix product with numpy's `matmul` rules: batch dimensions broadcast, a 1-D first
    operand is a row vector and a 1-D second operand a column vector (removed afterwards).

    Args:
        x1: tensor of rank >= 1.
        x2: tensor of rank >= 1.

    Returns:
        The product, of the operands' promoted dtype.

    Example:
        >>> a = keratron.ops.ones((2, 3, 4))
        >>> keratron.ops.matmul(a, keratron.ops.ones((4, 5))).shape
        (2, 3, 5)
    """
    y = _plain_matrix_product(x1, x2)
    if y is not None:
        return y
    x1, x2 = _promote(x1, x2)
    if x1.ndim == 0 or x2.ndim == 0:
        raise ValueError(
            "matmul: operands must have rank >= 1 (use multiply for scalars). "
            f"Received shapes {x1.shape} and {x2.shape}."
        )
    a = reshape(x1, (1, x1.shape[0])) if x1.ndim == 1 else x1
    b = reshape(x2, (x2.shape[0], 1)) if x2.ndim == 1 else x2
    if a.shape[-1] != b.shape[-2]:
        raise ValueError(
            "matmul: the last axis of x1 must match the second-to-last axis of x2. "
            f"Received shapes {x1.shape} and {x2.shape}."
        )
    if rules.broadcast_shapes(a.shape[:-2], b.shape[:-2]) is None:
        raise ValueError(
            f"matmul: batch dimensions do not broadcast. Received shapes {x1.shape} and {x2.shape}."
        )
    y = matmul_p.bind(a, b, None, activation=None)
    if x1.ndim == 1 and x2.ndim == 1:
        return reshape(y, ())
    if x1.ndim == 1:
        return reshape(y, y.shape[:-2] + y.shape[-1:])
    if x2.ndim == 1:
        return reshape(y, y.shape[:-1])
    return y


def fused_matmul(x, w, bias=None, activation=None):
    """`activation(x @ w + bias)` as one primitive call (what Dense computes).

    Args:
        x: tensor of shape `(..., K)`.
        w: kernel of shape `(K, N)`.
        bias: optional vector of shape `(N,)`.
        activation: None, "linear", "relu", "relu6", "gelu", "gelu_tanh", "sigmoid" or "tanh".

    Returns:
        Tensor of shape `(..., N)`.

    Example:
        >>> x, w = keratron.ops.ones((8, 3)), keratron.ops.ones((3, 4))
        >>> keratron.ops.fused_matmul(x, w, keratron.ops.zeros((4,)), "relu").shape
        (8, 4)
    """
    activation = epilogue.standardize(activation, "fused_matmul")
    args = [x, w] if bias is None else [x, w, bias]
    args = _promote(*args)
    x, w = args[0], args[1]
    b = args[2] if bias is not None else None
    if w.ndim != 2:
        raise ValueError(f"fused_matmul: `w` must have shape (K, N). Received shape {w.shape}.")
    if x.ndim == 0 or x.shape[-1] != w.shape[0]:
        raise ValueError(
            f"fused_matmul: `x` must have shape (..., {w.shape[0]}) to match `w` of shape "
            f"{w.shape}. Received shape {x.shape}."
        )
    if b is not None and b.shape != (w.shape[1],):
        raise ValueError(
            f"fused_matmul: `bias` must have shape ({w.shape[1]},). Received shape {b.shape}."
        )
    if x.ndim == 1:
        y = matmul_p.bind(reshape(x, (1, x.shape[0])), w, b, activation=activation)
        return reshape(y, (w.shape[1],))
    return matmul_p.bind(x, w, b, activation=activation)


# ------------------------------------------------------------------------ einsum
def _einsum_impl(*operands, equation):
    return torch.einsum(equation, *operands)


def _einsum_vjp(g, *operands, out, equation):
    lhs, rhs = equation.split("->")
    terms = lhs.split(",")
    grads = []
    for i, (term, x) in enumerate(zip(terms, operands)):
        others = [t for j, t in enumerate(terms) if j != i]
        avail = set(rhs).union(*others)
        kept = "".join(c for c in term if c in avail)
        eq = ",".join([rhs, *others]) + "->" + kept
        gi = einsum_p.bind(g, *(o for j, o in enumerate(operands) if j != i), equation=eq)
        # Letters summed away only by this operand come back as broadcasts; letters where the
        # operand had size 1 and the others more come back full size (the engine sums them).
        sizes = dict(zip(kept, gi.shape))
        gi = reshape(gi, tuple(sizes.get(c, 1) for c in term))
        gi = broadcast_to(
            gi, tuple(d if sizes.get(c, 1) == 1 else sizes[c] for c, d in zip(term, x.shape))
        )
        grads.append(gi)
    return tuple(grads)


def _einsum_shape(*operands, equation):
    # Explicit equations of distinct letters per operand (what `einsum` binds), one dtype.
    lhs, arrow, rhs = equation.partition("->")
    terms = lhs.split(",")
    dtype = operands[0][1]
    if not arrow or "." in equation or len(terms) != len(operands) or dtype is torch.bool:
        return None
    sizes = {}
    for term, (shape, dt) in zip(terms, operands):
        if dt != dtype or len(term) != len(shape) or len(set(term)) != len(term):
            return None
        for c, d in zip(term, shape):
            seen = sizes.get(c, 1)
            if seen != 1 and d not in (1, seen):
                return None
            sizes[c] = d if seen == 1 else seen
    if any(c not in sizes for c in rhs) or len(set(rhs)) != len(rhs):
        return None
    return [(tuple(sizes[c] for c in rhs), dtype)]


einsum_p = Primitive("einsum", _einsum_impl, _einsum_vjp, shape_rule=_einsum_shape)


def _canonical_einsum(subscripts: str, operands: list[Tensor]):
    """Rewrites an equation to explicit form: ellipses become letters, the output is spelled
    out, and a letter repeated inside one operand becomes a fresh letter tied to it by an
    identity matrix (so every VJP is again an einsum)."""
    eq = subscripts.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(operands):
        raise ValueError(
            f"einsum: subscripts {subscripts!r} name {len(terms)} operands, "
            f"received {len(operands)}."
        )
    for c in eq:
        if not (c in string.ascii_letters or c in ",.->"):
            raise ValueError(f"einsum: invalid character {c!r} in subscripts {subscripts!r}.")
    free = iter(c for c in string.ascii_letters if c not in eq)
    ell_rank = 0
    for t, x in zip(terms, operands):
        if "..." in t:
            ell_rank = max(ell_rank, x.ndim - (len(t) - 3))
    ell = "".join(next(free) for _ in range(ell_rank))
    explicit = []
    for i, (t, x) in enumerate(zip(terms, operands)):
        if "..." in t:
            n = x.ndim - (len(t) - 3)
            if n < 0:
                raise ValueError(
                    f"einsum: operand {i} has rank {x.ndim}, too small for subscripts {t!r}."
                )
            t = t.replace("...", ell[ell_rank - n :])
        if len(t) != x.ndim or "." in t:
            raise ValueError(
                f"einsum: operand {i} has shape {x.shape}, which does not match subscripts "
                f"{terms[i]!r}."
            )
        explicit.append(t)
    if arrow:
        rhs = rhs.replace("...", ell)
    else:
        counts = {}
        for t in explicit:
            for c in t:
                counts[c] = counts.get(c, 0) + 1
        rhs = ell + "".join(sorted(c for c, n in counts.items() if n == 1 and c not in ell))
    sizes = {}
    for t, x in zip(explicit, operands):
        for c, d in zip(t, x.shape):
            if sizes.get(c, 1) not in (1, d) and d != 1:
                raise ValueError(
                    f"einsum: index {c!r} has inconsistent sizes {sizes[c]} and {d} in "
                    f"{subscripts!r}."
                )
            sizes[c] = max(sizes.get(c, 1), d)
    for c in rhs:
        if c not in sizes or rhs.count(c) > 1:
            raise ValueError(f"einsum: invalid output subscripts {rhs!r} in {subscripts!r}.")
    operands = list(operands)
    extra_terms = []
    for i, t in enumerate(explicit):
        seen = ""
        for c in t:
            if c in seen:
                fresh = next(free)
                n = operands[i].shape[t.index(c)]
                eye = torch.eye(n, dtype=operands[i]._value.dtype, device=operands[i]._value.device)
                operands.append(Tensor(eye))
                extra_terms.append(c + fresh)
                c = fresh
            seen += c
        explicit[i] = seen
    return ",".join(explicit + extra_terms) + "->" + rhs, operands


def einsum(subscripts, *operands):
    """Einstein summation (numpy's `einsum`), differentiable w.r.t. every operand.

    Ellipses, implicit outputs and repeated indices (diagonals, traces) are supported.

    Args:
        subscripts: e.g. "ij,jk->ik", "bij,bjk->bik", "...ij,...j->...i".
        *operands: the tensors.

    Example:
        >>> a, b = keratron.ops.ones((2, 3)), keratron.ops.ones((3, 4))
        >>> keratron.ops.einsum("ij,jk->ik", a, b).shape
        (2, 4)
    """
    if not isinstance(subscripts, str):
        raise TypeError(f"einsum: `subscripts` must be a string. Received: {subscripts!r}")
    if not operands:
        raise ValueError("einsum: expected at least one operand.")
    xs = _promote(*operands)
    equation, xs = _canonical_einsum(subscripts, xs)
    return einsum_p.bind(*xs, equation=equation)


# ------------------------------------------------------------------------ products
def tensordot(x1, x2, axes=2):
    """Sum of products over the given axes (numpy's `tensordot`).

    Args:
        x1: first tensor.
        x2: second tensor.
        axes: an int N (the last N axes of x1 with the first N of x2), or a pair of axis
            lists (or ints) to contract.

    Example:
        >>> a, b = keratron.ops.ones((2, 3, 4)), keratron.ops.ones((4, 3, 5))
        >>> keratron.ops.tensordot(a, b, axes=([1, 2], [1, 0])).shape
        (2, 5)
    """
    x1, x2 = _promote(x1, x2)
    if isinstance(axes, int):
        if axes < 0 or axes > min(x1.ndim, x2.ndim):
            raise ValueError(
                f"tensordot: `axes` must be in [0, {min(x1.ndim, x2.ndim)}] for shapes "
                f"{x1.shape} and {x2.shape}. Received: axes={axes}"
            )
        a1 = tuple(range(x1.ndim - axes, x1.ndim))
        a2 = tuple(range(axes))
    else:
        if len(axes) != 2:
            raise ValueError(
                f"tensordot: `axes` must be an int or a pair of axis lists. Received: {axes!r}"
            )
        a1, a2 = ((a,) if isinstance(a, int) else tuple(a) for a in axes)
        a1 = canonical_axis(a1, x1.ndim, "tensordot")
        a2 = canonical_axis(a2, x2.ndim, "tensordot")
        if len(a1) != len(a2):
            raise ValueError(
                f"tensordot: both axis lists must have the same length. Received: {axes!r}"
            )
    for i, j in zip(a1, a2):
        if x1.shape[i] != x2.shape[j]:
            raise ValueError(
                f"tensordot: axis {i} of x1 (size {x1.shape[i]}) does not match axis {j} of x2 "
                f"(size {x2.shape[j]}). Received shapes {x1.shape} and {x2.shape}."
            )
    letters = iter(string.ascii_letters)
    t1 = [next(letters) for _ in range(x1.ndim)]
    t2 = [next(letters) for _ in range(x2.ndim)]
    for i, j in zip(a1, a2):
        t2[j] = t1[i]
    out = [c for k, c in enumerate(t1) if k not in a1] + [
        c for k, c in enumerate(t2) if k not in a2
    ]
    return einsum_p.bind(x1, x2, equation=f"{''.join(t1)},{''.join(t2)}->{''.join(out)}")


def dot(x1, x2):
    """numpy's `dot`: a product for scalars, the inner product for vectors, matmul for
    matrices, and for N-D operands a sum over the last axis of x1 and the second-to-last of
    x2.

    Example:
        >>> keratron.ops.dot([1.0, 2.0], [3.0, 4.0]).numpy()
        array(11., dtype=float32)
    """
    y = _plain_matrix_product(x1, x2)
    if y is not None:
        return y
    x1, x2 = _promote(x1, x2)
    if x1.ndim == 0 or x2.ndim == 0:
        return multiply(x1, x2)
    if x2.ndim <= 2:
        return matmul(x1, x2)
    return tensordot(x1, x2, axes=([x1.ndim - 1], [x2.ndim - 2]))


def inner(x1, x2):
    """Sum of products over the last axes of both operands (numpy's `inner`).

    Example:
        >>> keratron.ops.inner(keratron.ops.ones((2, 3)), keratron.ops.ones((4, 3))).shape
        (2, 4)
    """
    y = _plain_matrix_product(x1, x2, transpose_x2=True)
    if y is not None:
        return y
    x1, x2 = _promote(x1, x2)
    if x1.ndim == 0 or x2.ndim == 0:
        return multiply(x1, x2)
    return tensordot(x1, x2, axes=([x1.ndim - 1], [x2.ndim - 1]))


def outer(x1, x2):
    """Outer product of the flattened operands: shape `(x1.size, x2.size)`.

    Example:
        >>> keratron.ops.outer([1.0, 2.0], [1.0, 2.0, 3.0]).shape
        (2, 3)
    """
    x1, x2 = _promote(x1, x2)
    return multiply(reshape(x1, (-1, 1)), reshape(x2, (1, -1)))


def vdot(x1, x2):
    """Dot product of the flattened operands (real tensors).

    Example:
        >>> keratron.ops.vdot([[1.0, 2.0]], [[3.0, 4.0]]).numpy()
        array(11., dtype=float32)
    """
    x1, x2 = _promote(x1, x2)
    if x1.size != x2.size:
        raise ValueError(
            f"vdot: operands must have the same size. Received shapes {x1.shape} and {x2.shape}."
        )
    return einsum_p.bind(reshape(x1, (-1,)), reshape(x2, (-1,)), equation="a,a->")


# ------------------------------------------------------------------------ norms
def _safe_sqrt(s: Tensor) -> Tensor:
    """sqrt with gradient 0 (not NaN) at 0, as torch.linalg.norm has."""
    pos = greater(s, 0)
    return where(pos, sqrt(where(pos, s, 1)), 0)


def _svdvals_grad_impl(x, g):
    u, _, vh = torch.linalg.svd(x, full_matrices=False)
    return (u * g.unsqueeze(-2)) @ vh


# d sigma_i = u_i^T dX v_i, so the cotangent of the singular values maps to U diag(g) V^T.
svdvals_grad_p = Primitive("svdvals_grad", _svdvals_grad_impl)
svdvals_p = Primitive(
    "svdvals",
    torch.linalg.svdvals,
    lambda g, x, out: (svdvals_grad_p.bind(x, g),),
)


def _vector_norm(x: Tensor, ord, axis: tuple) -> Tensor:
    if ord is None or ord == 2:
        return _safe_sqrt(reduction.sum(square(x), axis, keepdims=True))
    if ord == 1:
        return reduction.sum(abs(x), axis, keepdims=True)
    if ord == float("inf"):
        return reduction.max(abs(x), axis, keepdims=True)
    if ord == float("-inf"):
        return reduction.min(abs(x), axis, keepdims=True)
    if ord == 0:
        return reduction.sum(cast(not_equal(x, 0), x.dtype), axis, keepdims=True)
    if isinstance(ord, str):
        raise ValueError(f"norm: ord={ord!r} is only valid for matrix norms.")
    return power(reduction.sum(power(abs(x), float(ord)), axis, keepdims=True), 1.0 / float(ord))


def _matrix_norm(x: Tensor, ord, axis: tuple) -> Tensor:
    r, c = axis
    if ord in (None, "fro"):
        return _safe_sqrt(reduction.sum(square(x), axis, keepdims=True))
    if ord in (1, -1):
        colsums = reduction.sum(abs(x), r, keepdims=True)
        return (reduction.max if ord == 1 else reduction.min)(colsums, c, keepdims=True)
    if ord in (float("inf"), float("-inf")):
        rowsums = reduction.sum(abs(x), c, keepdims=True)
        return (reduction.max if ord > 0 else reduction.min)(rowsums, r, keepdims=True)
    if ord in (2, -2, "nuc"):
        s = svdvals_p.bind(moveaxis(x, (r, c), (-2, -1)))
        if ord == "nuc":
            v = reduction.sum(s, -1)
        else:
            v = (reduction.max if ord == 2 else reduction.min)(s, -1)
        shape = list(x.shape)
        shape[r] = shape[c] = 1
        return reshape(v, shape)
    raise ValueError(
        "norm: for matrices `ord` must be one of None, 'fro', 'nuc', 1, -1, 2, -2, inf, -inf. "
        f"Received: ord={ord!r}"
    )


def norm(x, ord=None, axis=None, keepdims=False):
    """Vector or matrix norm, as numpy.linalg.norm / keras.ops.norm.

    With `axis=None` a 1-D input gets a vector norm and a 2-D input a matrix norm (ord=None
    flattens any rank into a 2-norm); an int axis gives vector norms, a pair of axes matrix
    norms. Integer inputs are cast to floatx.

    Args:
        x: input tensor.
        ord: None/2, 1, inf, -inf, 0 or any p for vectors; None/"fro", "nuc", 1, -1, 2, -2,
            inf, -inf for matrices.
        axis: None, an int or a pair of ints.
        keepdims: keep the reduced axes with size 1.

    Example:
        >>> keratron.ops.norm([3.0, 4.0]).numpy()
        array(5., dtype=float32)
    """
    x = _float(as_tensor(x))
    if axis is None:
        if ord is None:
            axes = tuple(range(x.ndim))
            r = _safe_sqrt(reduction.sum(square(x), axes, keepdims=True))
            return r if keepdims else reshape(r, ())
        if x.ndim not in (1, 2):
            raise ValueError(
                f"norm: with `ord` given and axis=None, x must be 1-D or 2-D. Received shape "
                f"{x.shape}."
            )
        axis = tuple(range(x.ndim))
    axes = canonical_axis(axis if isinstance(axis, (tuple, list)) else (axis,), x.ndim, "norm")
    if len(axes) == 1:
        r = _vector_norm(x, ord, axes)
    elif len(axes) == 2:
        if axes[0] == axes[1]:
            raise ValueError(f"norm: the two axes must differ. Received: axis={axis!r}")
        r = _matrix_norm(x, ord, axes)
    else:
        raise ValueError(f"norm: `axis` must be None, an int or a pair. Received: axis={axis!r}")
    if keepdims:
        return r
    return reshape(r, tuple(d for i, d in enumerate(r.shape) if i not in axes))


# ------------------------------------------------------------------------ solve, inv
def _solve_vjp(g, a, b, out):
    gb = solve_p.bind(_mT(a), g)
    return negative(matmul_p.bind(gb, _mT(out), None, activation=None)), gb


solve_p = Primitive("solve", torch.linalg.solve, _solve_vjp)


def solve(a, b):
    """Solves `a @ x = b` for x; `b` is a matrix `(..., M, K)` or a vector `(..., M)`.

    Example:
        >>> keratron.ops.solve([[2.0, 0.0], [0.0, 4.0]], [2.0, 4.0]).numpy()
        array([1., 1.], dtype=float32)
    """
    a, b = _promote(a, b)
    a, b = _float(a), _float(b)
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise ValueError(f"solve: `a` must be a square matrix (..., M, M). Received {a.shape}.")
    vector = b.ndim == a.ndim - 1
    if vector:
        b = reshape(b, b.shape + (1,))
    if b.ndim < 2 or b.shape[-2] != a.shape[-1]:
        raise ValueError(
            f"solve: `b` must have shape (..., {a.shape[-1]}, K) or (..., {a.shape[-1]}). "
            f"Received {b.shape} for `a` of shape {a.shape}."
        )
    x = solve_p.bind(a, b)
    return reshape(x, x.shape[:-1]) if vector else x


def _inv_vjp(g, x, out):
    out_t = _mT(out)
    return (
        negative(
            matmul_p.bind(
                matmul_p.bind(out_t, g, None, activation=None), out_t, None, activation=None
            )
        ),
    )


inv_p = Primitive("inv", torch.linalg.inv, _inv_vjp)


def inv(x):
    """Inverse of a square matrix (batched over leading axes).

    Example:
        >>> keratron.ops.inv([[2.0, 0.0], [0.0, 4.0]]).numpy()
        array([[0.5 , 0.  ],
               [0.  , 0.25]], dtype=float32)
    """
    x = _float(as_tensor(x))
    if x.ndim < 2 or x.shape[-1] != x.shape[-2]:
        raise ValueError(f"inv: expected a square matrix (..., M, M). Received shape {x.shape}.")
    return inv_p.bind(x)


# ------------------------------------------------------------------ decompositions, solvers
__all__ += [
    "det",
    "slogdet",
    "logdet",
    "cholesky",
    "cholesky_inverse",
    "solve_triangular",
    "qr",
    "eigh",
    "eig",
    "svd",
    "pinv",
    "lstsq",
    "matrix_rank",
    "lu_factor",
    "jvp",
]


def _square_float(x, op) -> Tensor:
    x = _float(x)
    if x.ndim < 2 or x.shape[-1] != x.shape[-2]:
        raise ValueError(f"{op}: expected square matrices (..., M, M). Received shape {x.shape}.")
    if x.dtype in ("float16", "bfloat16"):
        x = cast(x, "float32")  # torch's linear algebra needs float32 or float64
    return x


def _mm(a, b):
    return matmul(a, b)


def _batch_scalar(s: Tensor) -> Tensor:
    """(...,) -> (..., 1, 1), to scale a stack of matrices."""
    return reshape(s, tuple(s.shape) + (1, 1))


# d det(A) = det(A) tr(A^-1 dA): the cotangent is g det(A) A^-T.
_det_p = Primitive(
    "det",
    torch.linalg.det,
    lambda g, x, out: (multiply(_batch_scalar(multiply(g, out)), _mT(inv(x))),),
)


def det(x):
    """Determinant of square matrices (batched over leading axes).

    Example:
        >>> keratron.ops.det([[2.0, 0.0], [0.0, 3.0]]).numpy()
        array(6., dtype=float32)
    """
    return _det_p.bind(_square_float(x, "det"))


def _slogdet_vjp(gs, x, out):
    g = gs[1]  # the sign is piecewise constant
    return (multiply(_batch_scalar(g), _mT(inv(x))),)


_slogdet_p = Primitive(
    "slogdet", lambda x: tuple(torch.linalg.slogdet(x)), _slogdet_vjp, multiple_results=True
)


def slogdet(x):
    """Sign and log of the absolute value of the determinant.

    Returns:
        `(sign, logabsdet)`; the determinant is `sign * exp(logabsdet)`.

    Example:
        >>> s, l = keratron.ops.slogdet([[-2.0, 0.0], [0.0, 3.0]])
        >>> float(s), round(float(l), 4)
        (-1.0, 1.7918)
    """
    return _slogdet_p.bind(_square_float(x, "slogdet"))


_logdet_p = Primitive(
    "logdet",
    torch.logdet,
    lambda g, x, out: (multiply(_batch_scalar(g), _mT(inv(x))),),
)


def logdet(x):
    """Log of the determinant (NaN for a negative determinant), as torch.logdet.

    Example:
        >>> keratron.ops.logdet([[1.0, 0.0], [0.0, 2.0]]).numpy()
        array(0.6931472, dtype=float32)
    """
    return _logdet_p.bind(_square_float(x, "logdet"))


def _cholesky_impl(x):
    l, info = torch.linalg.cholesky_ex(x)
    if not x.is_meta and bool((info != 0).any()):
        raise ValueError("cholesky: the input is not positive-definite (factorization failed).")
    return l


def _phi(x: Tensor) -> Tensor:
    """Lower triangle with the diagonal halved."""
    return subtract(tril(x), multiply(triu(tril(x)), 0.5))


def _cholesky_vjp(g, x, out):
    # A = L L^T gives L^-1 dA L^-T = X + X^T with X = L^-1 dL lower triangular, so
    # dL = L phi(L^-1 dA L^-T) and the cotangent is L^-T phi(L^T gL) L^-1, symmetrized.
    lt = _mT(out)
    p = _phi(matmul(lt, g))
    y = _solve_tri(lt, p, lower=False)  # L^-T P
    ga = _mT(_solve_tri(lt, _mT(y), lower=False))  # (L^-T (L^-T P)^T)^T = L^-T P L^-1
    return (multiply(add(ga, _mT(ga)), 0.5),)


_cholesky_p = Primitive("cholesky", _cholesky_impl, _cholesky_vjp)


def cholesky(x, upper=False):
    """Cholesky factor of a symmetric positive-definite matrix: lower `L` with
    `x = L @ L.T` (or upper `U = L.T` with `upper=True`). Only the lower triangle of `x` is
    read; gradients are symmetric.

    Example:
        >>> keratron.ops.cholesky([[4.0, 2.0], [2.0, 2.0]]).numpy()
        array([[2., 0.],
               [1., 1.]], dtype=float32)
    """
    l = _cholesky_p.bind(_square_float(x, "cholesky"))
    return _mT(l) if upper else l


def cholesky_inverse(x, upper=False):
    """The inverse of `A` from its Cholesky factor (`A = L @ L.T`, or `U.T @ U` when
    `upper`).

    Example:
        >>> keratron.ops.cholesky_inverse([[2.0, 0.0], [1.0, 1.0]]).shape
        (2, 2)
    """
    f = _square_float(x, "cholesky_inverse")
    ident = eye(f.shape[-1], dtype=f.dtype)
    ident = broadcast_to(on_device_of(ident, f), f.shape)
    if upper:
        u_inv = _solve_tri(f, ident, lower=False)
        return matmul(u_inv, _mT(u_inv))
    l_inv = _solve_tri(f, ident, lower=True)
    return matmul(_mT(l_inv), l_inv)


def _solve_tri_vjp(g, a, b, out, lower):
    gb = _solve_tri(_mT(a), g, lower=not lower)
    ga = negative(matmul(gb, _mT(out)))
    return (tril(ga) if lower else triu(ga)), gb


_solve_tri_p = Primitive(
    "solve_triangular",
    lambda a, b, lower: torch.linalg.solve_triangular(a, b, upper=not lower),
    _solve_tri_vjp,
)


def _solve_tri(a, b, lower):
    return _solve_tri_p.bind(a, b, lower=bool(lower))


def solve_triangular(a, b, lower=False):
    """Solves `a @ x = b` for triangular `a` (only its lower or upper triangle is read);
    `b` is `(..., M, K)` or `(..., M)`.

    Example:
        >>> keratron.ops.solve_triangular([[2.0, 0.0], [1.0, 1.0]], [2.0, 3.0], lower=True).numpy()
        array([1., 2.], dtype=float32)
    """
    a = _square_float(a, "solve_triangular")
    a, b = _promote(a, _float(b))
    vector = b.ndim == a.ndim - 1
    if vector:
        b = expand_dims(b, -1)
    if b.ndim < 2 or b.shape[-2] != a.shape[-1]:
        raise ValueError(
            f"solve_triangular: `b` must have shape (..., {a.shape[-1]}, K) or "
            f"(..., {a.shape[-1]}). Received {b.shape} for `a` of shape {a.shape}."
        )
    x = _solve_tri(a, b, lower)
    return squeeze(x, -1) if vector else x


def _copyltu(m: Tensor) -> Tensor:
    """The symmetric matrix whose lower triangle is that of `m`."""
    return add(tril(m), _mT(tril(m, -1)))


def _qr_tall_vjp(gq, gr, q, r):
    # m >= n, reduced: gA = (gQ + Q copyltu(M)) R^-T with M = R gR^T - gQ^T Q.
    m_ = subtract(matmul(r, _mT(gr)), matmul(_mT(gq), q))
    b = add(gq, matmul(q, _copyltu(m_)))
    return _mT(_solve_tri(r, _mT(b), lower=False))


def _qr_vjp(gs, x, out, mode):
    gq, gr = gs
    q, r = out
    m, n = x.shape[-2], x.shape[-1]
    if m >= n:
        if mode == "complete" and m > n:
            raise ValueError(
                "qr: mode='complete' with more rows than columns is not differentiable (the "
                "extra columns of Q are not unique); use mode='reduced'."
            )
        return (_qr_tall_vjp(gq, gr, q, r),)
    # Wide: A = [X | Y] with X square; Q R_x = X and R_y = Q^T Y.
    y = get_item(x, (Ellipsis, slice(m, None)))
    u = get_item(r, (Ellipsis, slice(0, m)))
    gu = get_item(gr, (Ellipsis, slice(0, m)))
    gv = get_item(gr, (Ellipsis, slice(m, None)))
    gx = _qr_tall_vjp(add(gq, matmul(y, _mT(gv))), gu, q, u)
    gy = matmul(q, gv)
    return (concatenate([gx, gy], axis=-1),)


_qr_p = Primitive(
    "qr", lambda x, mode: tuple(torch.linalg.qr(x, mode=mode)), _qr_vjp, multiple_results=True
)


def qr(x, mode="reduced"):
    """QR decomposition `x = q @ r`, with `q` orthonormal columns and `r` upper triangular.

    Args:
        x: matrices (..., M, N).
        mode: "reduced" (q: (..., M, K), r: (..., K, N), K = min(M, N)) or "complete"
            (q: (..., M, M), r: (..., M, N)).

    Example:
        >>> q, r = keratron.ops.qr([[3.0, 0.0], [4.0, 5.0]])
        >>> r.shape
        (2, 2)
    """
    if mode not in ("reduced", "complete"):
        raise ValueError(f"qr: mode must be 'reduced' or 'complete'. Received: mode={mode!r}")
    x = _float(x)
    if x.ndim < 2:
        raise ValueError(f"qr: expected matrices (..., M, N). Received shape {x.shape}.")
    if x.dtype in ("float16", "bfloat16"):
        x = cast(x, "float32")
    return _qr_p.bind(x, mode=mode)


def _off_diag_inv_gaps(s: Tensor) -> Tensor:
    """F[i, j] = 1 / (s[j] - s[i]) off the diagonal, 0 on it."""
    gaps = subtract(expand_dims(s, -2), expand_dims(s, -1))
    n = s.shape[-1]
    off = on_device_of(cast(subtract(1, eye(n)), "bool"), s)
    return where(off, divide(1.0, where(off, gaps, 1.0)), 0.0)


def _eigh_vjp(gs, x, out):
    gw, gv = gs
    w, v = out
    # gA = V (diag(gw) + F o (V^T gV)) V^T, F[i, j] = 1 / (w_j - w_i).
    inner = multiply(_off_diag_inv_gaps(w), matmul(_mT(v), gv))
    inner = add(
        inner, multiply(expand_dims(gw, -1), on_device_of(eye(w.shape[-1], dtype=w.dtype), w))
    )
    return (matmul(matmul(v, inner), _mT(v)),)


_eigh_p = Primitive("eigh", lambda x: tuple(torch.linalg.eigh(x)), _eigh_vjp, multiple_results=True)


def eigh(x):
    """Eigenvalues (ascending) and eigenvectors of symmetric matrices; only the lower
    triangle is read.

    Returns:
        `(w, v)` with `x @ v[..., :, i] = w[..., i] * v[..., :, i]`.

    Example:
        >>> w, v = keratron.ops.eigh([[2.0, 0.0], [0.0, 1.0]])
        >>> w.numpy()
        array([1., 2.], dtype=float32)
    """
    return _eigh_p.bind(_square_float(x, "eigh"))


_eig_p = Primitive("eig", lambda x: tuple(torch.linalg.eig(x)), multiple_results=True)


def eig(x):
    """Eigenvalues and right eigenvectors of general square matrices, as complex tensors
    (no gradient).

    Example:
        >>> w, v = keratron.ops.eig([[2.0, 0.0], [0.0, 1.0]])
        >>> w.dtype
        'complex64'
    """
    return _eig_p.bind(_square_float(x, "eig"))


def _svd_vjp(gs, x, out, full_matrices):
    gu, gsv, gvh = gs
    u, s, vh = out
    m, n = x.shape[-2], x.shape[-1]
    k = builtins.min(m, n)
    if full_matrices and m != n:
        raise ValueError(
            "svd: full_matrices=True with a non-square input is not differentiable (the "
            "extra singular vectors are not unique); use full_matrices=False."
        )
    v, gv = _mT(vh), _mT(gvh)
    ut_gu, vt_gv = matmul(_mT(u), gu), matmul(_mT(v), gv)
    f = _off_diag_inv_gaps(square(s))  # 1 / (s_j^2 - s_i^2)
    j = multiply(f, subtract(ut_gu, _mT(ut_gu)))
    kk = multiply(f, subtract(vt_gv, _mT(vt_gv)))
    ident = on_device_of(eye(k, dtype=s.dtype), s)
    inner = add(
        add(multiply(j, expand_dims(s, -2)), multiply(expand_dims(s, -1), kk)),
        multiply(expand_dims(gsv, -1), ident),
    )
    ga = matmul(matmul(u, inner), vh)
    s_inv = divide(1.0, s)
    if m > k:  # (I - U U^T) gU S^-1 V^T
        proj = subtract(gu, matmul(u, ut_gu))
        ga = add(ga, matmul(multiply(proj, expand_dims(s_inv, -2)), vh))
    if n > k:  # U S^-1 gV^T (I - V V^T)
        proj = subtract(gv, matmul(v, vt_gv))
        ga = add(ga, matmul(multiply(u, expand_dims(s_inv, -2)), _mT(proj)))
    return (ga,)


_svd_p = Primitive(
    "svd",
    lambda x, full_matrices: tuple(torch.linalg.svd(x, full_matrices=full_matrices)),
    _svd_vjp,
    multiple_results=True,
)


def svd(x, full_matrices=True, compute_uv=True):
    """Singular value decomposition `x = u @ diag(s) @ vh`, singular values descending.

    Gradients need distinct singular values, and `full_matrices=False` for non-square
    inputs (the extra singular vectors are not unique).

    Returns:
        `(u, s, vh)`, or only `s` when `compute_uv=False`.

    Example:
        >>> keratron.ops.svd([[3.0, 0.0], [0.0, 4.0]], compute_uv=False).numpy()
        array([4., 3.], dtype=float32)
    """
    x = _float(x)
    if x.ndim < 2:
        raise ValueError(f"svd: expected matrices (..., M, N). Received shape {x.shape}.")
    if x.dtype in ("float16", "bfloat16"):
        x = cast(x, "float32")
    if not compute_uv:
        return svdvals_p.bind(x)
    return _svd_p.bind(x, full_matrices=bool(full_matrices))


def _pinv_vjp(g, x, out, rtol):
    # For constant rank: gA = -P^T G P^T + (I - A P)^T G^T P P^T + P^T P G^T (I - P A),
    # with P = pinv(A) (Golub and Pereyra).
    p, pt, gt = out, _mT(out), _mT(g)
    t1 = negative(matmul(matmul(pt, g), pt))
    t2 = matmul(subtract(gt, matmul(matmul(x, p), gt)), matmul(p, pt))
    t3 = matmul(matmul(pt, p), subtract(gt, matmul(matmul(gt, p), x)))
    return (add(add(t1, t2), t3),)


def _pinv_impl(x, rtol):
    return torch.linalg.pinv(x, rtol=rtol) if rtol is not None else torch.linalg.pinv(x)


_pinv_p = Primitive("pinv", _pinv_impl, _pinv_vjp)


def pinv(x, rcond=None):
    """Moore-Penrose pseudo-inverse; singular values below `rcond * max(s)` count as zero
    (default `eps * max(M, N)`).

    Example:
        >>> keratron.ops.pinv([[2.0, 0.0], [0.0, 0.0]]).numpy()
        array([[0.5, 0. ],
               [0. , 0. ]], dtype=float32)
    """
    x = _float(x)
    if x.ndim < 2:
        raise ValueError(f"pinv: expected matrices (..., M, N). Received shape {x.shape}.")
    if x.dtype in ("float16", "bfloat16"):
        x = cast(x, "float32")
    return _pinv_p.bind(x, rtol=None if rcond is None else float(rcond))


def lstsq(a, b, rcond=None):
    """Least-squares (minimum-norm) solution `x` of `a @ x = b`, computed as
    `pinv(a, rcond) @ b`; `b` is `(M,)` or `(M, K)`.

    Example:
        >>> keratron.ops.lstsq([[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]], [1.0, 2.0, 3.0]).numpy()
        array([1., 2.], dtype=float32)
    """
    a, b = _promote(_float(a), _float(b))
    if a.ndim != 2 or b.ndim not in (1, 2) or b.shape[0] != a.shape[0]:
        raise ValueError(
            "lstsq: expected a of shape (M, N) and b of shape (M,) or (M, K). Received "
            f"{a.shape} and {b.shape}."
        )
    return matmul(pinv(a, rcond), b)


_matrix_rank_p = Primitive(
    "matrix_rank",
    lambda x, tol: (
        torch.linalg.matrix_rank(x, atol=tol).to(torch.int32)
        if tol is not None
        else torch.linalg.matrix_rank(x).to(torch.int32)
    ),
)


def matrix_rank(x, tol=None):
    """Number of singular values above `tol` (default `max(s) * max(M, N) * eps`).

    Example:
        >>> keratron.ops.matrix_rank([[1.0, 2.0], [2.0, 4.0]]).numpy()
        array(1, dtype=int32)
    """
    x = _float(x)
    if x.ndim < 2:
        raise ValueError(f"matrix_rank: expected matrices (..., M, N). Received {x.shape}.")
    if x.dtype in ("float16", "bfloat16"):
        x = cast(x, "float32")
    return _matrix_rank_p.bind(x, tol=None if tol is None else float(tol))


def _lu_factor_impl(x):
    lu, piv = torch.linalg.lu_factor(x)
    return lu, (piv - 1).to(torch.int32)  # LAPACK's pivots count from 1


_lu_factor_p = Primitive("lu_factor", _lu_factor_impl, multiple_results=True)


def lu_factor(x):
    """LU factorization with partial pivoting, packed as LAPACK's getrf (no gradient).

    Returns:
        `(lu, pivots)`: L (unit diagonal, below) and U (on and above) in one matrix, and the
        0-based row swapped with row i at step i.

    Example:
        >>> lu, piv = keratron.ops.lu_factor([[1.0, 2.0], [3.0, 4.0]])
        >>> piv.numpy()
        array([1, 1], dtype=int32)
    """
    return _lu_factor_p.bind(_square_float(x, "lu_factor"))
