"""Tiled GEMM with a fused bias + activation epilogue: the Triton route of the "matmul" primitive.

`y = act(x @ w + b)` for x of shape (M, K) and w of shape (K, N), or a batch of them (one grid
axis per batch entry). Budget per product: 2*M*N*K FLOPs; at least (M*K + K*N + M*N + N)
elements of memory traffic when each operand tile is fetched once. Each program computes one
BLOCK_M x BLOCK_N output tile, walking K in BLOCK_K steps with masks on the ragged K edge;
rows and columns past M and N are read from wrapped (in-bounds) addresses and never stored,
so the inner loop needs no M/N masks. Programs are ordered in groups of GROUP_M tile-rows
(Triton tutorial 03) so that neighbouring programs share w tiles in L2. Operands are read
through their strides, so the transposed views that the matmul VJP passes in are not copied.
Accumulation is in float32; the epilogue adds the bias, applies the activation and casts to
the output dtype before the only store.

float32 products multiply at `keratron.config.float32_matmul_precision()` (IEEE or TF32).
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from keratron.triton_kernels._common import (
    FLOAT_DTYPES,
    TRITON_TYPES,
    Kernel,
    activate,
    activation_code,
    dot_precision,
)

__all__ = ["matmul_route", "CONFIGS", "KERNEL", "aot_specs"]

_MAX_BATCH_GRID = 65535  # CUDA's limit on grid axis 1


@triton.jit
def _matmul_kernel(
    x_ptr, w_ptr, b_ptr, y_ptr,
    M, N, K,
    stride_xb, stride_xm, stride_xk,
    stride_wb, stride_wk, stride_wn,
    stride_b,
    stride_yb, stride_ym, stride_yn,
    HAS_BIAS: tl.constexpr,
    ACTIVATION: tl.constexpr,
    PRECISION: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
):  # fmt: skip
    pid = tl.program_id(0)
    # int64 batch offsets: a batch of large matrices can pass 2**31 elements.
    batch = tl.program_id(1).to(tl.int64)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_pid_in_group = GROUP_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = tl.minimum(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m

    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    # Wrapped row/column indices stay in bounds, so only the K edge needs a load mask; the
    # duplicated rows/columns they produce are masked out at the store.
    rows = offs_m % M
    cols = offs_n % N
    offs_k = tl.arange(0, BLOCK_K)
    x_ptrs = x_ptr + batch * stride_xb + rows[:, None] * stride_xm + offs_k[None, :] * stride_xk
    w_ptrs = w_ptr + batch * stride_wb + offs_k[:, None] * stride_wk + cols[None, :] * stride_wn

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        k_left = K - k * BLOCK_K
        a = tl.load(x_ptrs, mask=offs_k[None, :] < k_left, other=0.0)
        b = tl.load(w_ptrs, mask=offs_k[:, None] < k_left, other=0.0)
        acc = tl.dot(a, b, acc, input_precision=PRECISION)
        x_ptrs += BLOCK_K * stride_xk
        w_ptrs += BLOCK_K * stride_wk

    if HAS_BIAS:
        bias = tl.load(b_ptr + cols * stride_b).to(tl.float32)
        acc += bias[None, :]
    acc = activate(acc, ACTIVATION)

    y_ptrs = y_ptr + batch * stride_yb + offs_m[:, None] * stride_ym + offs_n[None, :] * stride_yn
    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    tl.store(y_ptrs, acc.to(y_ptr.dtype.element_ty), mask=mask)


# Tile configs. Every one fits float32 operand tiles in sm_80's shared memory (the largest,
# 128x128x32 with 4 stages, needs 128 KiB) and compiles without register spills for sm_80 and
# sm_90; the first is the one the interpreter (and KERATRON_TRITON_PIN=1) uses, a
# middle-of-the-road choice for Dense-sized problems. The 16- and 32-row tiles serve small
# batches (inference, GEMV-like products).
CONFIGS = [
    triton.Config({"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "GROUP_M": 8}, 4, 3),
    triton.Config({"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 32, "GROUP_M": 8}, 8, 3),
    triton.Config({"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 32, "GROUP_M": 8}, 8, 4),
    triton.Config({"BLOCK_M": 128, "BLOCK_N": 64, "BLOCK_K": 32, "GROUP_M": 8}, 8, 4),
    triton.Config({"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 32, "GROUP_M": 8}, 8, 4),
    triton.Config({"BLOCK_M": 128, "BLOCK_N": 32, "BLOCK_K": 32, "GROUP_M": 8}, 4, 4),
    triton.Config({"BLOCK_M": 32, "BLOCK_N": 64, "BLOCK_K": 32, "GROUP_M": 8}, 4, 4),
    triton.Config({"BLOCK_M": 16, "BLOCK_N": 64, "BLOCK_K": 32, "GROUP_M": 8}, 4, 4),
]

KERNEL = Kernel(
    _matmul_kernel, CONFIGS, key=["M", "N", "K", "HAS_BIAS", "ACTIVATION", "PRECISION"], op="matmul"
)


def _span(t) -> int:
    """Largest element offset within one matrix of a (batch, rows, cols) view."""
    return (t.shape[1] - 1) * abs(t.stride(1)) + (t.shape[2] - 1) * abs(t.stride(2))


def _launch(x3, w3, b, y3, activation) -> None:
    """Runs the kernel on 3-D (batch, M, K) x (batch, K, N) -> (batch, M, N) views."""
    # In-matrix offsets are 32-bit in the kernel (only the batch offset is 64-bit).
    if max(_span(x3), _span(w3), _span(y3)) >= 2**31:
        raise NotImplementedError("a matrix spans 2**31 elements or more")
    batch, m, k = x3.shape
    n = w3.shape[2]

    def grid(cfg):
        return (triton.cdiv(m, cfg["BLOCK_M"]) * triton.cdiv(n, cfg["BLOCK_N"]), batch)

    KERNEL.launch(
        grid,
        x_ptr=x3, w_ptr=w3, b_ptr=b if b is not None else y3, y_ptr=y3,
        M=m, N=n, K=k,
        stride_xb=x3.stride(0), stride_xm=x3.stride(1), stride_xk=x3.stride(2),
        stride_wb=w3.stride(0), stride_wk=w3.stride(1), stride_wn=w3.stride(2),
        stride_b=b.stride(0) if b is not None else 0,
        stride_yb=y3.stride(0), stride_ym=y3.stride(1), stride_yn=y3.stride(2),
        HAS_BIAS=b is not None,
        ACTIVATION=activation_code("matmul", activation),
        PRECISION=dot_precision(x3.dtype),
    )  # fmt: skip


def _check(x, w, b, activation) -> None:
    activation_code("matmul", activation)
    if x.dtype not in FLOAT_DTYPES or w.dtype != x.dtype:
        raise NotImplementedError(
            f"dtypes x={x.dtype}, w={w.dtype}: the kernel takes two float32, float16 or "
            "bfloat16 operands of one dtype"
        )
    if x.dim() < 1 or w.dim() < 2:
        raise NotImplementedError(f"operand ranks x={x.dim()}, w={w.dim()}")
    if b is not None and (b.dim() != 1 or b.shape[0] != w.shape[-1] or b.dtype != x.dtype):
        raise NotImplementedError(
            f"bias of shape {tuple(b.shape)} and dtype {b.dtype}: the kernel takes a bias of "
            f"shape ({w.shape[-1]},) and the operands' dtype"
        )
    if x.shape[-1] != w.shape[-2]:
        raise NotImplementedError(f"contraction sizes differ: {x.shape[-1]} and {w.shape[-2]}")
    devices = {t.device for t in (x, w, b) if t is not None}
    if len(devices) != 1:
        raise NotImplementedError(f"operands on several devices: {sorted(map(str, devices))}")


def matmul_route(x, w, b, activation):
    """`act(x @ w + b)` on Triton, with the semantics of the "matmul" primitive's impl.

    x is (..., K) with w (K, N), or x (..., M, K) with w (..., K, N) and batch dimensions that
    broadcast; b is (N,) or None. Raises NotImplementedError for dtypes, bias shapes or batch
    sizes the kernel does not take (the dispatcher then falls back to torch).
    """
    _check(x, w, b, activation)
    k, n = w.shape[-2], w.shape[-1]
    if w.dim() == 2:
        # All leading dims of x are rows of one GEMM; reshape is a view when x allows it.
        x2 = x.reshape(math.prod(x.shape[:-1]), k)
        out_shape = (*x.shape[:-1], n)
        y = torch.empty((x2.shape[0], n), dtype=x.dtype, device=x.device)
        if y.numel():
            _launch(x2.unsqueeze(0), w.unsqueeze(0), b, y.unsqueeze(0), activation)
        return y.reshape(out_shape)
    if x.dim() < 2:
        raise NotImplementedError(f"a rank-1 x with a batched w of shape {tuple(w.shape)}")
    m = x.shape[-2]
    batch_shape = torch.broadcast_shapes(x.shape[:-2], w.shape[:-2])
    nbatch = math.prod(batch_shape)
    if nbatch > _MAX_BATCH_GRID:
        raise NotImplementedError(f"batch of {nbatch} matrices (grid limit {_MAX_BATCH_GRID})")
    y = torch.empty((*batch_shape, m, n), dtype=x.dtype, device=x.device)
    if y.numel():
        # expand gives broadcast batch dims stride 0 (no copy); flattening them to one batch
        # axis is a view unless the strides cannot be merged, where reshape copies.
        x3 = x.expand(*batch_shape, m, k).reshape(nbatch, m, k)
        w3 = w.expand(*batch_shape, k, n).reshape(nbatch, k, n)
        _launch(x3, w3, b, y.view(nbatch, m, n), activation)
    return y


# ------------------------------------------------------------------------------ ahead of time
def aot_specs(dtypes=(torch.float32, torch.float16)) -> list:
    """(kernel_name, jit_function, signature, constexprs, num_warps, num_stages) for every
    config, for a Dense-like product (bias + relu) in each dtype of `dtypes`; strides are
    32-bit integers as the launcher passes them for tensors of fewer than 2**31 elements, and
    unit strides constants, as the JIT specialises them for row-major operands."""
    specs = []
    for dtype in dtypes:
        consts = dict(stride_xk=1, stride_wn=1, stride_b=1, stride_yn=1, HAS_BIAS=True)
        consts.update(ACTIVATION=activation_code("matmul", "relu"))
        consts.update(PRECISION="tf32" if dtype is torch.float32 else "ieee")
        for i, cfg in enumerate(CONFIGS):
            specs.append(
                KERNEL.aot_spec(f"matmul_{TRITON_TYPES[dtype]}_cfg{i}", dtype, consts, cfg)
            )
    return specs
