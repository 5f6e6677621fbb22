"""Tiled GEMM with a fused bias + activation epilogue: the Triton route of the "matmul" primitive.

`y = act(x @ w + b)` for x of shape (M, K) and w of shape (K, N), or a batch of them (one grid
axis per batch entry). Budget per product: 2*M*N*K FLOPs; at least (M*K + K*N + M*N + N)
elements of memory traffic when each operand tile is fetched once. Each program computes
BLOCK_M x BLOCK_N output tiles, walking K in BLOCK_K steps with masks on the ragged K edge;
rows and columns past M and N are read from wrapped (in-bounds) addresses and never stored,
so the inner loop needs no M/N masks. Tiles are ordered in groups of GROUP_M tile-rows
(Triton tutorial 03) so that neighbouring programs share w tiles in L2. Operands are read
through their strides, so the transposed views that the matmul VJP passes in are not copied.
Accumulation is in float32 (bfloat16 and float16 operands too); the epilogue adds the bias,
applies the activation and casts to the output dtype before the only store.

The launcher picks the config from the shape and the device's compute capability (`plan`;
no autotuning): sm_90 takes Hopper-sized 128x256 tiles with 8 warps and 3-4 stages, sm_80
128x256 for 16-bit operands and 128x128 for float32. A problem too small to fill the GPU
with large tiles (M of 64 or 128 with K and N in the thousands: an LSTM's recurrent product,
a Dense layer's batch) splits K over several programs that write float32 partials, then one
small kernel sums them in a fixed order and applies the epilogue: no atomics, so the result
is the same on every run. Split-K adds 2 * splits * M * N * 4 bytes of traffic, small beside
K * N when M is. A persistent schedule (one program per SM looping over the tiles) was tried
and dropped: the tile loop around the K loop made every config spill, 72-1056 bytes per
thread on sm_90 and sm_80.

float32 products multiply at `keratron.config.float32_matmul_precision()` (IEEE or TF32). On
sm_90 a TF32 product on a large tile reads its operands K-major, the layout wgmma takes for
32-bit types, copying one that is not first (`k_major_copies`).
TMA tensor descriptors are not used: the kernels read operands through arbitrary strides
(transposed views, Dense rows of 10 floats) that TMA's 16-byte stride rule does not admit.
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import numpy as np
import torch
import triton
import triton.language as tl

from keratron.triton_kernels._common import (
    FLOAT_DTYPES,
    TRITON_TYPES,
    Kernel,
    activate,
    activation_code,
    device_limits,
    dot_precision,
    launch_state,
    route_cache,
    tensor_key,
)

__all__ = [
    "matmul_route",
    "plan",
    "Plan",
    "CONFIGS",
    "KERNEL",
    "SPLITK_KERNEL",
    "REDUCE_KERNEL",
    "aot_specs",
    "k_major_copies",
]

_MAX_BATCH_GRID = 65535  # CUDA's limit on grid axis 1


@triton.jit
def _tile_ids(tile, num_pid_m, num_pid_n, GROUP_M: tl.constexpr):
    """(pid_m, pid_n) of output tile `tile`, in groups of GROUP_M tile-rows (Triton tutorial
    03) so that neighbouring programs share w tiles in L2."""
    num_pid_in_group = GROUP_M * num_pid_n
    first_pid_m = (tile // num_pid_in_group) * GROUP_M
    group_size_m = tl.minimum(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + ((tile % num_pid_in_group) % group_size_m)
    pid_n = (tile % num_pid_in_group) // group_size_m
    return pid_m, pid_n


@triton.jit
def _tile_dot(
    x_ptrs, w_ptrs, k_len, stride_xk, stride_wk,
    PRECISION: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):  # fmt: skip
    """The float32 sum over k < k_len of x_ptrs[:, k] * w_ptrs[k, :] (pointer tiles at the
    first k); the ragged K edge is masked."""
    offs_k = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(k_len, BLOCK_K)):
        k_left = k_len - k * BLOCK_K
        a = tl.load(x_ptrs, mask=offs_k[None, :] < k_left, other=0.0)
        b = tl.load(w_ptrs, mask=offs_k[:, None] < k_left, other=0.0)
        acc = tl.dot(a, b, acc, input_precision=PRECISION)
        x_ptrs += BLOCK_K * stride_xk
        w_ptrs += BLOCK_K * stride_wk
    return acc


@triton.jit
def _epilogue_store(
    acc, b_ptr, y_mat, offs_m, offs_n, M, N, stride_b, stride_ym, stride_yn,
    HAS_BIAS: tl.constexpr, ACTIVATION: tl.constexpr,
):  # fmt: skip
    """y[offs_m, offs_n] = act(acc + b[offs_n]), cast to y's dtype, within (M, N)."""
    if HAS_BIAS:
        bias = tl.load(b_ptr + (offs_n % N) * stride_b).to(tl.float32)
        acc += bias[None, :]
    acc = activate(acc, ACTIVATION)
    y_ptrs = y_mat + offs_m[:, None] * stride_ym + offs_n[None, :] * stride_yn
    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    tl.store(y_ptrs, acc.to(y_mat.dtype.element_ty), mask=mask)


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
    """Grid: (output tiles, batch); one BLOCK_M x BLOCK_N tile per program."""
    # int64 batch offsets: a batch of large matrices can pass 2**31 elements.
    batch = tl.program_id(1).to(tl.int64)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    x_mat = x_ptr + batch * stride_xb
    w_mat = w_ptr + batch * stride_wb
    y_mat = y_ptr + batch * stride_yb
    pid_m, pid_n = _tile_ids(tl.program_id(0), num_pid_m, num_pid_n, GROUP_M)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    # Wrapped row/column indices stay in bounds, so only the K edge needs a load mask; the
    # duplicated rows/columns they produce are masked out at the store.
    rows = offs_m % M
    cols = offs_n % N
    offs_k = tl.arange(0, BLOCK_K)
    x_ptrs = x_mat + rows[:, None] * stride_xm + offs_k[None, :] * stride_xk
    w_ptrs = w_mat + offs_k[:, None] * stride_wk + cols[None, :] * stride_wn
    acc = _tile_dot(x_ptrs, w_ptrs, K, stride_xk, stride_wk, PRECISION,
                    BLOCK_M, BLOCK_N, BLOCK_K)  # fmt: skip
    if BLOCK_N >= 256:
        # The epilogue in two column halves: a whole 128x256 tile's activation temporaries
        # and 64-bit store addresses do not fit beside its accumulator (300+ bytes of spills
        # per thread with gelu).
        halves = tl.permute(tl.reshape(acc, (BLOCK_M, 2, BLOCK_N // 2)), (0, 2, 1))
        acc0, acc1 = tl.split(halves)
        half_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N // 2)
        _epilogue_store(acc0, b_ptr, y_mat, offs_m, half_n, M, N, stride_b, stride_ym,
                        stride_yn, HAS_BIAS, ACTIVATION)  # fmt: skip
        _epilogue_store(acc1, b_ptr, y_mat, offs_m, half_n + BLOCK_N // 2, M, N, stride_b,
                        stride_ym, stride_yn, HAS_BIAS, ACTIVATION)  # fmt: skip
    else:
        _epilogue_store(acc, b_ptr, y_mat, offs_m, offs_n, M, N, stride_b, stride_ym,
                        stride_yn, HAS_BIAS, ACTIVATION)  # fmt: skip


@triton.jit
def _matmul_splitk_kernel(
    x_ptr, w_ptr, part_ptr,
    M, N, K, K_CHUNK,
    stride_xm, stride_xk,
    stride_wk, stride_wn,
    PRECISION: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
):  # fmt: skip
    """part[s] = x[:, s*K_CHUNK : (s+1)*K_CHUNK] @ w[s*K_CHUNK : (s+1)*K_CHUNK, :] in float32,
    for split s = program_id(1). Grid: (output tiles, splits); part is (splits, M, N)."""
    split = tl.program_id(1)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    pid_m, pid_n = _tile_ids(tl.program_id(0), num_pid_m, num_pid_n, GROUP_M)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rows = offs_m % M
    cols = offs_n % N
    k0 = split * K_CHUNK
    offs_k = k0 + tl.arange(0, BLOCK_K)
    x_ptrs = x_ptr + rows[:, None] * stride_xm + offs_k[None, :] * stride_xk
    w_ptrs = w_ptr + offs_k[:, None] * stride_wk + cols[None, :] * stride_wn
    k_len = tl.minimum(K - k0, K_CHUNK)
    acc = _tile_dot(x_ptrs, w_ptrs, k_len, stride_xk, stride_wk, PRECISION,
                    BLOCK_M, BLOCK_N, BLOCK_K)  # fmt: skip
    # The launcher keeps splits * M * N under 2**31.
    part = part_ptr + split * M * N
    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    tl.store(part + offs_m[:, None] * N + offs_n[None, :], acc, mask=mask)


@triton.jit
def _matmul_splitk_reduce_kernel(
    part_ptr, b_ptr, y_ptr,
    M, N, SPLIT,
    stride_b, stride_ym, stride_yn,
    HAS_BIAS: tl.constexpr,
    ACTIVATION: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
):  # fmt: skip
    """y = act(part[0] + part[1] + ... + part[SPLIT-1] + b), summed in split order (so the
    result is the same on every run), cast once. Grid: (cdiv(M, BLOCK_M), cdiv(N, BLOCK_N))."""
    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    ptrs = part_ptr + offs_m[:, None] * N + offs_n[None, :]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for s in range(0, SPLIT):
        acc += tl.load(ptrs + s * M * N, mask=mask, other=0.0)
    if HAS_BIAS:
        bias = tl.load(b_ptr + offs_n * stride_b, mask=offs_n < N, other=0.0).to(tl.float32)
        acc += bias[None, :]
    acc = activate(acc, ACTIVATION)
    y_ptrs = y_ptr + offs_m[:, None] * stride_ym + offs_n[None, :] * stride_yn
    tl.store(y_ptrs, acc.to(y_ptr.dtype.element_ty), mask=mask)


# ------------------------------------------------------------------------------ configs
# The tile of an output block, per architecture, largest first: (BLOCK_M, BLOCK_N) ->
# (num_warps, (BLOCK_K, stages) for float32 operands with TF32 dots, (BLOCK_K, stages) for
# 16-bit ones, (BLOCK_K, stages) for float32 with IEEE dots).
# Operand buffers take stages * (BLOCK_M + BLOCK_N) * BLOCK_K * bytes of shared memory, at most
# 128 KiB (128x128 float32, 4 stages), within sm_80's 163 KiB as well as sm_90's 227 KiB, and
# every config compiles without spills for both targets in its unspecialised form (any
# strides; the AOT suite checks it). That rule set the depths: 64-deep 16-bit tiles spilled
# 80-830 bytes per thread (their loads pass through registers when the strides' alignment is
# unknown), as did 128x256 float32 tiles 32 deep on sm_80 and every 256x128 tile but a 8-deep
# float32 one, so 256x128 is left out. The wide tiles have 8 warps (a 128x256 float32
# accumulator is 128 registers per thread), the rest 4. IEEE dots run on the CUDA cores,
# which read both operand tiles through registers: 32 deep, the 128x128, 128x64 and 64x128
# tiles spill 152-320 bytes per thread on sm_80, 16 deep none does on either target; the
# 128x256 tile spills 32 bytes 16 deep on sm_90 (48 at 8 deep), so IEEE leaves it out.
_HOPPER_TILES = {
    (128, 256): (8, (16, 3), (32, 4), None),
    (128, 128): (8, (32, 4), (32, 4), (16, 4)),
    (128, 64): (4, (32, 4), (32, 4), (16, 4)),
    (64, 128): (4, (32, 4), (32, 4), (16, 4)),
}
_AMPERE_TILES = {
    (128, 256): (8, None, (32, 3), None),  # 16-bit operands only
    (128, 128): (8, (32, 4), (32, 4), (16, 4)),
    (128, 64): (4, (32, 4), (32, 4), (16, 4)),
    (64, 128): (4, (32, 4), (32, 4), (16, 4)),
}
# Problems smaller than a wave of the large tiles (a batch of 128 rows or fewer, a GEMV-like
# product): one of these, then split-K. Both architectures.
_SMALL_TILES = {
    (64, 64): (4, (32, 4), (32, 4), (32, 4)),
    (64, 32): (4, (32, 4), (32, 4), (32, 4)),
    (64, 16): (4, (32, 4), (32, 4), (32, 4)),
    (32, 64): (4, (32, 4), (32, 4), (32, 4)),
    (16, 64): (4, (32, 4), (32, 4), (32, 4)),
}
_ARCH_TILES = {
    "sm_90": {**_HOPPER_TILES, **_SMALL_TILES},
    "sm_80": {**_AMPERE_TILES, **_SMALL_TILES},
}
GROUP_M = 8
# Tiles planned only for aligned operands (see `plan`), and what the JIT then finds divisible.
WIDE_TILES = ((128, 256),)
_ALIGNED = ("x_ptr", "w_ptr", "b_ptr", "y_ptr", "N", "K")
_ALIGNED += ("stride_xb", "stride_xm", "stride_wb", "stride_wk", "stride_yb", "stride_ym")
WAVE_FILL = 0.9  # a large tile is used when its tiles fill this fraction of the SMs
SPLIT_MIN_K = 256  # split-K: each split reduces over at least this many K
MAX_SPLIT = 16


# The columns of the tile tables after num_warps.
TF32, HALF, IEEE = "tf32", "half", "ieee"
_COLUMNS = (TF32, HALF, IEEE)


def _column(dtype: torch.dtype, precision: str) -> str:
    if dtype != torch.float32:
        return HALF
    return IEEE if precision == "ieee" else TF32


def _config(arch: str, tile: tuple, column: str):
    warps, *entries = _ARCH_TILES[arch][tile]
    block_k, stages = entries[_COLUMNS.index(column)]
    meta = {"BLOCK_M": tile[0], "BLOCK_N": tile[1], "BLOCK_K": block_k, "GROUP_M": GROUP_M}
    return triton.Config(meta, num_warps=warps, num_stages=stages)


def _all_configs() -> list:
    """`(arch, tile, column, config)` of every entry of the tile tables, in table order."""
    out = []
    for arch, tiles in _ARCH_TILES.items():
        for tile, (_, *entries) in tiles.items():
            for column, entry in zip(_COLUMNS, entries):
                if entry is not None:
                    out.append((arch, tile, column, _config(arch, tile, column)))
    return out


def _unique(configs) -> list:
    seen, out = set(), []
    for cfg in configs:
        key = (tuple(cfg.kwargs.items()), cfg.num_warps, cfg.num_stages)
        if key not in seen:
            seen.add(key)
            out.append(cfg)
    return out


# Every config a launch can be given (the first is also the pinned one of the launch spec).
CONFIGS = _unique([_config("sm_80", (64, 64), TF32)] + [cfg for _, _, _, cfg in _all_configs()])
REDUCE_CONFIG = triton.Config({"BLOCK_M": 32, "BLOCK_N": 64}, num_warps=4, num_stages=1)

_KEY = ["M", "N", "K", "HAS_BIAS", "ACTIVATION", "PRECISION"]
KERNEL = Kernel(_matmul_kernel, CONFIGS, key=_KEY, op="matmul")
SPLITK_KERNEL = Kernel(_matmul_splitk_kernel, CONFIGS, key=["M", "N", "K", "K_CHUNK"], op="matmul")
REDUCE_KERNEL = Kernel(
    _matmul_splitk_reduce_kernel, [REDUCE_CONFIG], key=["M", "N", "SPLIT"], op="matmul"
)


class Plan(NamedTuple):
    """How one product runs: the config, the output tiles (the first grid axis), the K splits
    (1: no split) and the K each split reduces."""

    config: object
    tiles: int
    split: int
    k_chunk: int


def _cap(size: int, largest: int) -> int:
    """The power of two >= size, between 16 and `largest`."""
    return max(16, min(triton.next_power_of_2(max(size, 1)), largest))


@functools.lru_cache(maxsize=1024)  # the launch path runs it on every call
def plan(
    m: int,
    n: int,
    k: int,
    batch: int,
    dtype: torch.dtype,
    capability,
    sms: int,
    aligned=True,
    precision: str = "tf32",
) -> Plan:
    """The config, grid and K split of an (m x k) @ (k x n) product, from the shape and the
    device alone (no search on the GPU).

    The rule: the architecture's tile table is sm_90's from capability 9.0 on, else sm_80's.
    Of its large tiles that the problem does not overhang (BLOCK_M <= the power of two >= m,
    likewise N), largest first, the first whose tile count (times batch) fills `WAVE_FILL` x
    `sms` is taken, one program per tile; the 128x256 tiles only when the operands are
    `aligned` (K and N, the row and batch strides and the addresses multiples of 16 elements
    and 16 bytes, unit column strides, or for TF32 dots a K-major w: the JIT then vectorises
    the loads; without that these tiles spill). A problem no
    large tile fills takes a small tile (16 or 32 rows by 64 columns when m <= 32, else 64
    rows by 16, 32 or 64 columns after n) and, for a single matrix whose tiles fill under half
    the SMs and whose K holds two `SPLIT_MIN_K` chunks, splits K over up to `MAX_SPLIT`
    programs per tile (enough to fill the SMs, each chunk a multiple of BLOCK_K and at least
    `SPLIT_MIN_K` long); a second kernel sums the float32 partials in split order and applies
    the epilogue, so the result does not depend on scheduling. bfloat16 and float16 operands
    take the 16-bit column of the table, accumulating in float32; float32 ones the TF32
    column, or the IEEE one where `precision` is "ieee" (no 128x256 tile there).

    Example:
        >>> p = plan(1024, 4096, 4096, 1, torch.bfloat16, (9, 0), 132)
        >>> p.config.kwargs["BLOCK_M"], p.config.kwargs["BLOCK_N"], p.tiles, p.split
        (128, 256, 128, 1)
        >>> plan(64, 4096, 1024, 1, torch.float32, (9, 0), 132).split
        2
    """
    arch = "sm_90" if tuple(capability) >= (9, 0) else "sm_80"
    column = _column(dtype, precision)
    cap_m, cap_n = _cap(m, 256), _cap(n, 256)

    def tiles(tile):
        return triton.cdiv(m, tile[0]) * triton.cdiv(n, tile[1]) * batch

    large = _HOPPER_TILES if arch == "sm_90" else _AMPERE_TILES
    for tile, (_, *entries) in large.items():
        if entries[_COLUMNS.index(column)] is None or tile[0] > cap_m or tile[1] > cap_n:
            continue
        if tile in WIDE_TILES and not aligned:
            continue
        count = tiles(tile)
        if count >= WAVE_FILL * sms:
            return Plan(_config(arch, tile, column), count, 1, k)
    tile = (min(cap_m, 64), 64) if cap_m < 64 else (64, min(cap_n, 64))
    cfg = _config(arch, tile, column)
    count = tiles(tile)
    split = 1
    if batch == 1 and 2 * count <= sms and k >= 2 * SPLIT_MIN_K:
        split = min(sms // count, k // SPLIT_MIN_K, MAX_SPLIT)
    if split == 1:
        return Plan(cfg, count, 1, k)
    block_k = cfg.kwargs["BLOCK_K"]
    chunk = triton.cdiv(triton.cdiv(k, split), block_k) * block_k
    return Plan(cfg, count, triton.cdiv(k, chunk), chunk)


def _span(t) -> int:
    """Largest element offset within one matrix of a (batch, rows, cols) view."""
    return (t.shape[1] - 1) * abs(t.stride(1)) + (t.shape[2] - 1) * abs(t.stride(2))


def _aligned(x3, w3, b, y3, tf32=False) -> bool:
    """Whether the JIT will find K and N multiples of 16 and every operand row-major with
    16-aligned rows and addresses; for TF32 dots w may be K-major instead (`k_major_copies`:
    the layout wgmma reads; at IEEE precision that form of the 128x256 tile spills)."""
    mats = (x3, w3, y3)
    if x3.shape[2] % 16 or w3.shape[2] % 16:
        return False
    if any(t.stride(2) != 1 or t.stride(1) % 16 or t.stride(0) % 16 for t in (x3, y3)):
        return False
    w_rows = w3.stride(2) == 1 and w3.stride(1) % 16 == 0
    w_columns = tf32 and w3.stride(1) == 1 and w3.stride(2) % 16 == 0
    if not (w_rows or w_columns) or w3.stride(0) % 16:
        return False
    if b is not None and b.stride(0) != 1:
        return False
    return all(t.data_ptr() % 16 == 0 for t in (*mats, b) if t is not None)


# TF32 on sm_90: wgmma reads 32-bit operands from shared memory K-major only (the PTX
# transpose bits exist for 16-bit types), so a row-major w, N contiguous, reaches shared memory
# through 4-byte cp.async, an element each. Compiled for sm_90 at 128x256x32: 16 16-byte
# copies (x) and 128 4-byte copies (w) a stage and 246 registers; with a K-major w, 48 16-byte
# copies and 210 registers (bfloat16 needs no copy: 16-byte copies either way). So a TF32
# product on a large tile whose operand tiles are each read by `K_MAJOR_READS` programs or
# more first copies a non-K-major operand K-major: 2 * 4 bytes an element, once, where the
# kernel then reads it `reads` times with a quarter of the instructions.
K_MAJOR_READS = 2


def k_major_copies(m, n, k, precision, capability, sms, x_k_major, w_k_major) -> tuple:
    """(copy x, copy w): which operands of an (m x k) @ (k x n) float32 product to copy
    K-major (x row-major, w column-major) before the kernel reads them (see above). Only on
    sm_90, for TF32 dots on a large tile (128 rows), without split-K.

    Example:
        >>> k_major_copies(1024, 4096, 4096, "tf32", (9, 0), 132, True, False)
        (False, True)
        >>> k_major_copies(1024, 4096, 4096, "ieee", (9, 0), 132, True, False)
        (False, False)
    """
    if precision != "tf32" or tuple(capability) < (9, 0):
        return False, False
    p = plan(m, n, k, 1, torch.float32, capability, sms)
    if p.split > 1 or p.config.kwargs["BLOCK_M"] < 128:
        return False, False
    block_m, block_n = p.config.kwargs["BLOCK_M"], p.config.kwargs["BLOCK_N"]
    copy_x = not x_k_major and triton.cdiv(n, block_n) >= K_MAJOR_READS
    copy_w = not w_k_major and triton.cdiv(m, block_m) >= K_MAJOR_READS
    return copy_x, copy_w


def _column_major(w):
    """w (k, n) with the same values, K contiguous."""
    return w.t().contiguous().t()


def _launch(x3, w3, b, y3, activation, ptrs) -> tuple:
    """Runs the kernels on 3-D (batch, M, K) x (batch, K, N) -> (batch, M, N) views of the
    tensors `ptrs` = (x, w, y) (which the kernels receive); returns the split count and the
    launches' relaunch makers (None where not bound)."""
    # In-matrix offsets are 32-bit in the kernel (only the batch offset is 64-bit).
    if max(_span(x3), _span(w3), _span(y3)) >= 2**31:
        raise NotImplementedError("a matrix spans 2**31 elements or more")
    batch, m, k = x3.shape
    n = w3.shape[2]
    capability, sms = device_limits(y3.device)
    precision = dot_precision(x3.dtype)
    aligned = _aligned(x3, w3, b, y3, precision == "tf32")
    p = plan(m, n, k, batch, x3.dtype, capability, sms, aligned, precision)
    code = activation_code("matmul", activation)
    bias = dict(b_ptr=b if b is not None else ptrs[2], stride_b=b.stride(0) if b is not None else 0)
    if p.split > 1:
        if m * n * p.split >= 2**31:
            raise NotImplementedError("split-K partials of 2**31 elements or more")
        part = torch.empty((p.split, m, n), dtype=torch.float32, device=y3.device)
        x2, w2, y2 = x3[0], w3[0], y3[0]
        xp, wp, yp = ptrs

        def grid(cfg):
            return (p.tiles, p.split)

        partial = SPLITK_KERNEL.launch(
            grid, p.config,
            x_ptr=xp, w_ptr=wp, part_ptr=part,
            M=m, N=n, K=k, K_CHUNK=p.k_chunk,
            stride_xm=x2.stride(0), stride_xk=x2.stride(1),
            stride_wk=w2.stride(0), stride_wn=w2.stride(1),
            PRECISION=precision,
        )  # fmt: skip

        def reduce_grid(cfg):
            return (triton.cdiv(m, cfg["BLOCK_M"]), triton.cdiv(n, cfg["BLOCK_N"]))

        reduce = REDUCE_KERNEL.launch(
            reduce_grid, REDUCE_CONFIG,
            part_ptr=part, y_ptr=yp, M=m, N=n, SPLIT=p.split,
            stride_ym=y2.stride(0), stride_yn=y2.stride(1),
            HAS_BIAS=b is not None, ACTIVATION=code, **bias,
        )  # fmt: skip
        return p.split, partial, reduce

    def grid(cfg):
        return (p.tiles, batch)

    whole = KERNEL.launch(
        grid, p.config,
        x_ptr=ptrs[0], w_ptr=ptrs[1], y_ptr=ptrs[2],
        M=m, N=n, K=k,
        stride_xb=x3.stride(0), stride_xm=x3.stride(1), stride_xk=x3.stride(2),
        stride_wb=w3.stride(0), stride_wk=w3.stride(1), stride_wn=w3.stride(2),
        stride_yb=y3.stride(0), stride_ym=y3.stride(1), stride_yn=y3.stride(2),
        HAS_BIAS=b is not None, ACTIVATION=code, PRECISION=precision, **bias,
    )  # fmt: skip
    return 1, whole, None


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


_CACHE = route_cache()


def _cached_route(out_shape, split, first, second, copies=(False, False)):
    """The 2-D-weight route of one signature: its launches prepared (`route_cache`), and the
    K-major copies it makes (`k_major_copies`)."""
    m, n = math.prod(out_shape[:-1]), out_shape[-1]
    if any(copies):
        copy_x, copy_w = copies

        def route_copying(x, w, b):
            y = x.new_empty(*out_shape)
            x = x.reshape(m, x.shape[-1]).contiguous() if copy_x else x
            first(x, _column_major(w) if copy_w else w, y if b is None else b, y)
            return y

        return route_copying
    if split == 1:

        def route(x, w, b):
            y = x.new_empty(*out_shape)
            first(x, w, y if b is None else b, y)
            return y

        return route

    def route_split(x, w, b):
        y = x.new_empty(*out_shape)
        part = x.new_empty((split, m, n), dtype=torch.float32)
        first(x, w, part)
        second(part, y if b is None else b, y)
        return y

    return route_split


def matmul_route(x, w, b, activation):
    """`act(x @ w + b)` on Triton, with the semantics of the "matmul" primitive's impl.

    x is (..., K) with w (K, N), or x (..., M, K) with w (..., K, N) and batch dimensions that
    broadcast; b is (N,) or None. Raises NotImplementedError for dtypes, bias shapes or batch
    sizes the kernel does not take (the dispatcher then falls back to torch).
    """
    state = launch_state()
    if state is not None:
        bias = None if b is None else tensor_key(b)
        key = (tensor_key(x), tensor_key(w), bias, activation, dot_precision(x.dtype), state)
        cached = _CACHE.get(key)
        if cached is not None:
            return cached(x, w, b)
    _check(x, w, b, activation)
    k, n = w.shape[-2], w.shape[-1]
    if w.dim() == 2:
        # All leading dims of x are rows of one GEMM; reshape is a view when x allows it.
        x2 = x.reshape(math.prod(x.shape[:-1]), k)
        y = torch.empty((*x.shape[:-1], n), dtype=x.dtype, device=x.device)
        if y.numel():
            # The kernels receive x and y themselves (their 2-D views' storage) where x2 is a
            # view: what the cached route passes. A copying reshape would need redoing per
            # call, so only views (or x copied K-major, which the route redoes) are cached.
            view = x2.data_ptr() == x.data_ptr()
            capability, sms = device_limits(y.device)
            copies = k_major_copies(
                x2.shape[0], n, k, dot_precision(x.dtype), capability, sms,
                x2.stride(1) == 1 or k == 1, w.stride(0) == 1 or k == 1,
            )  # fmt: skip
            if copies[0]:
                x2 = x2.contiguous()
            if copies[1]:
                w = _column_major(w)
            y3 = y.view(1, x2.shape[0], n)
            x_in = x if view and not copies[0] else x2
            split, first, second = _launch(
                x2.unsqueeze(0), w.unsqueeze(0), b, y3, activation, (x_in, w, y)
            )
            if state is not None and first is not None and (view or copies[0]):
                _CACHE[key] = _cached_route(y.shape, split, first(), second and second(), copies)
        return y
    if x.dim() < 2:
        raise NotImplementedError(f"a rank-1 x with a batched w of shape {tuple(w.shape)}")
    m = x.shape[-2]
    batch_shape = np.broadcast_shapes(x.shape[:-2], w.shape[:-2])
    nbatch = math.prod(batch_shape)
    if nbatch > _MAX_BATCH_GRID:
        raise NotImplementedError(f"batch of {nbatch} matrices (grid limit {_MAX_BATCH_GRID})")
    y = torch.empty((*batch_shape, m, n), dtype=x.dtype, device=x.device)
    if y.numel():
        # expand gives broadcast batch dims stride 0 (no copy); flattening them to one batch
        # axis is a view unless the strides cannot be merged, where reshape copies.
        x3 = x.expand(*batch_shape, m, k).reshape(nbatch, m, k)
        w3 = w.expand(*batch_shape, k, n).reshape(nbatch, k, n)
        y3 = y.view(nbatch, m, n)
        _launch(x3, w3, b, y3, activation, (x3, w3, y3))
    return y


# ------------------------------------------------------------------------------ ahead of time
def aot_specs() -> list:
    """(kernel_name, jit_function, signature, constexprs, num_warps, num_stages) of every
    config a launch can be given, for a Dense-like product (bias + relu): float32 configs in
    float32 (TF32 dots; the IEEE column's at IEEE dots, `..._ieee`), 16-bit configs in
    bfloat16 and float16; the split-K kernel at the
    small tiles in float32 and bfloat16, and its reduction in each dtype. Strides are 32-bit
    integers as the launcher passes them for tensors of fewer than 2**31 elements, and unit
    strides constants, as the JIT specialises them for row-major operands. The 128x256
    configs, planned for aligned operands only, carry a seventh element: the parameters the
    JIT then finds divisible by 16. The float32 configs of 128-row tiles also come with w
    K-major (`k_major_copies`: w's K stride the unit one), named `..._kmajor`."""
    relu = activation_code("matmul", "relu")
    by_config = {}
    for _, tile, column, cfg in _all_configs():
        key = (tuple(cfg.kwargs.items()), cfg.num_warps, cfg.num_stages)
        cases = {TF32: [(torch.float32, TF32)], IEEE: [(torch.float32, IEEE)]}.get(
            column, [(torch.bfloat16, IEEE), (torch.float16, IEEE)]
        )
        entry = by_config.setdefault(key, [cfg, set(), False])
        entry[1].update(cases)
        entry[2] = entry[2] or tile in _SMALL_TILES
    specs = []
    for cfg, cases, small in by_config.values():
        tiles = "x".join(str(cfg.kwargs[k]) for k in ("BLOCK_M", "BLOCK_N", "BLOCK_K"))
        suffix = f"{tiles}_w{cfg.num_warps}_s{cfg.num_stages}"
        tile = (cfg.kwargs["BLOCK_M"], cfg.kwargs["BLOCK_N"])
        for dtype, precision in sorted(cases, key=str):
            tt = TRITON_TYPES[dtype]
            tag = "_ieee" if dtype is torch.float32 and precision == IEEE else ""
            suffix_at = suffix + tag
            consts = dict(stride_xk=1, stride_wn=1, stride_b=1, stride_yn=1, HAS_BIAS=True)
            consts.update(ACTIVATION=relu, PRECISION=precision)
            spec = KERNEL.aot_spec(f"matmul_{tt}_{suffix_at}", dtype, consts, cfg)
            specs.append((*spec, _ALIGNED) if tile in WIDE_TILES else spec)
            if dtype is torch.float32 and precision == TF32 and tile[0] >= 128:
                consts = {**consts, "stride_wk": 1}
                del consts["stride_wn"]
                spec = KERNEL.aot_spec(f"matmul_{tt}_{suffix}_kmajor", dtype, consts, cfg)
                aligned = tuple("stride_wn" if a == "stride_wk" else a for a in _ALIGNED)
                specs.append((*spec, aligned) if tile in WIDE_TILES else spec)
            if small and dtype is not torch.float16:
                consts = dict(stride_xk=1, stride_wn=1, PRECISION=precision)
                name = f"matmul_splitk_{tt}_{suffix_at}"
                specs.append(SPLITK_KERNEL.aot_spec(name, dtype, consts, cfg))
    for dtype in FLOAT_DTYPES:
        consts = dict(stride_b=1, stride_yn=1, HAS_BIAS=True, ACTIVATION=relu)
        name = f"matmul_splitk_reduce_{TRITON_TYPES[dtype]}"
        spec = REDUCE_KERNEL.aot_spec(name, dtype, consts, REDUCE_CONFIG)
        spec[2]["part_ptr"] = "*fp32"
        specs.append(spec)
    return specs
