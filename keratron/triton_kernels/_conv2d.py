"""2-D convolution in NHWC as implicit GEMMs: forward (with the bias + activation epilogue),
grad-input and grad-filter, plus direct kernels for depthwise convolution.

Shapes: x (N, H, W, C), kernel (KH, KW, CG, F) with CG = C // groups, y (N, OH, OW, F);
FG = F // groups filters per group. No im2col buffer is ever written: each kernel gathers its
A tile straight from the NHWC tensor, computing input coordinates from output coordinates
(padding and the image border become load masks).

Budgets (P = N * OH * OW output positions, e = bytes per element):

- forward: GEMM (P x KH*KW*CG) @ (KH*KW*CG x FG) per group, 2 * P * F * KH*KW*CG FLOPs.
  Ideal traffic e * (N*H*W*C + KH*KW*CG*F + P*F); the gathered x tile is re-read from L2
  once per column tile and per overlapping window, so for C >= 32 the kernel is compute-bound
  (about 2 * KH*KW*CG * FG / (e * (CG + FG)) FLOP/byte from DRAM).
- grad-input: the transposed GEMM gx (N*H*W x CG) = g (x KH*KW*FG) @ kernel^T, in the
  scatter-free gather form: each program owns one stride phase (ih % SH, iw % SW), for which
  a kernel tap either hits every row of the tile or none, so stride-s convolutions skip the
  (s^2 - 1) / s^2 of taps that would only multiply zeros. Same FLOPs as the forward.
- grad-filter: gw (KH*KW*CG x FG) = x_gathered^T @ g, a GEMM whose reduction runs over all P
  positions; it is split over SPLIT programs writing float32 partials (no atomics, so the
  result is deterministic and autotuning may rerun it) that one sum reduces.
- depthwise (CG == 1, output channel f reads input channel f // FG): 2 * P * F * KH*KW
  FLOPs for e * (N*H*W*C + P*F) bytes, about KH*KW / e FLOP/byte: memory-bound, so a
  direct kernel over (positions x channels) tiles with channels contiguous beats a GEMM
  whose reduction would be only KH*KW long. Its weight gradient reads each output-gradient
  tile once for all taps (one pass over the positions, split over programs as above); a
  program per tap had read the inputs KH*KW times (0.15-0.25x cuDNN on the H200 at MobileNet's
  112x112x32 shape).

float32 `tl.dot` multiplies at `keratron.config.float32_matmul_precision()` (IEEE or TF32).
On sm_90 a TF32 forward reads a K-major copy of the kernel (`k_major_weights`): wgmma takes
32-bit operands K-major only, and the (KH*KW*CG x F) kernel, F contiguous, otherwise reaches
shared memory through 4-byte asynchronous copies, an element each.
"""

from __future__ import annotations

import functools

import torch
import triton
import triton.language as tl

from keratron.triton_kernels._common import (
    FLOAT_DTYPES,
    Kernel,
    activate,
    activation_code,
    device_limits,
    dot_precision,
    launch_state,
    multiprocessor_count,
    route_cache,
    tensor_key,
)

__all__ = ["conv_route", "grad_input_route", "grad_filter_route", "aot_specs"]

SPLIT_MIN_POSITIONS = 1024  # grad-filter: each split reduces over at least this many positions
# The depthwise weight gradient's partials are (taps x channels) a split, not a GEMM tile's
# rows x filters, so its splits can be shorter: at 1024 the cnn's first convolution (one input
# channel, 32 filters, 86,528 positions at batch 128) ran as 84 programs on an H100's 132 SMs,
# 70 us (bench/gpu_h100_2026-11-27.md); at 256, 338.
DEPTHWISE_SPLIT_MIN_POSITIONS = 256
# Its programs are small (a 16x32 tile on 4 warps at 72 registers: several fit an SM) and
# their partials short (taps x channels), so it asks for eight programs a SM, not two.
DEPTHWISE_PROGRAMS_PER_SM = 8
_INT32_MAX = 2**31 - 1


# ------------------------------------------------------------------------------ kernels
@triton.jit
def _epilogue(acc, b_ptr, offs_f, f_mask, HAS_BIAS: tl.constexpr, ACTIVATION: tl.constexpr):
    """bias + activation on a float32 (rows x filters) tile, as `ops.epilogue.apply`."""
    if HAS_BIAS:
        bias = tl.load(b_ptr + offs_f, mask=f_mask, other=0.0).to(tl.float32)
        acc = acc + bias[None, :]
    return activate(acc, ACTIVATION)


@triton.jit
def conv_fwd_kernel(
    x_ptr, w_ptr, b_ptr, y_ptr,
    N, H, W, C, OH, OW, F, KH, KW, CG, FG, WKS,
    sxn, sxh, sxw, sxc,
    SH, SW, PH, PW, DH, DW,
    HAS_BIAS: tl.constexpr, ACTIVATION: tl.constexpr, PRECISION: tl.constexpr,
    W_K_MAJOR: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):  # fmt: skip
    """y[p, g*FG + f] = sum_r x_gathered[p, r] * w[r, g*FG + f], r = (kh*KW + kw)*CG + c.

    Grid: (cdiv(N*OH*OW, BLOCK_M), cdiv(FG, BLOCK_N), groups). The reduction index r is
    flattened over taps and channels, so small channel counts (the RGB stem) waste no lanes.
    With W_K_MAJOR, w is the kernel as (F, WKS) rows, r contiguous and zero past KH*KW*CG
    (`k_major_weights`), WKS a multiple of 16: the JIT then copies its tiles 16 bytes at a
    time.
    """
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    grp = tl.program_id(2)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_f = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    m_mask = offs_m < N * OH * OW
    f_mask = offs_f < FG
    ow = offs_m % OW
    oh = (offs_m // OW) % OH
    n = offs_m // (OW * OH)
    ih0 = oh * SH - PH
    iw0 = ow * SW - PW
    x_row = x_ptr + n * sxn + grp * CG * sxc
    w_col = w_ptr + grp * FG + offs_f
    w_row = w_ptr + (grp * FG + offs_f) * WKS
    K = KH * KW * CG
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        offs_k = k0 + tl.arange(0, BLOCK_K)
        k_mask = offs_k < K
        c = offs_k % CG
        tap = offs_k // CG
        ih = ih0[:, None] + ((tap // KW) * DH)[None, :]
        iw = iw0[:, None] + ((tap % KW) * DW)[None, :]
        a_mask = (m_mask[:, None] & k_mask[None, :]) & ((ih >= 0) & (ih < H))
        a_mask = a_mask & ((iw >= 0) & (iw < W))
        a = tl.load(
            x_row[:, None] + ih * sxh + iw * sxw + (c * sxc)[None, :], mask=a_mask, other=0.0
        )
        if W_K_MAJOR:
            b = tl.load(
                w_row[None, :] + offs_k[:, None],
                mask=(offs_k < WKS)[:, None] & f_mask[None, :],
                other=0.0,
            )
        else:
            b = tl.load(
                w_col[None, :] + offs_k[:, None] * F,
                mask=k_mask[:, None] & f_mask[None, :],
                other=0.0,
            )
        acc = tl.dot(a, b, acc, input_precision=PRECISION)
    acc = _epilogue(acc, b_ptr, grp * FG + offs_f, f_mask, HAS_BIAS, ACTIVATION)
    y_ptrs = y_ptr + offs_m[:, None] * F + (grp * FG + offs_f)[None, :]
    tl.store(y_ptrs, acc.to(y_ptr.dtype.element_ty), mask=m_mask[:, None] & f_mask[None, :])


@triton.jit
def conv_grad_input_kernel(
    g_ptr, w_ptr, taps_ptr, gx_ptr,
    N, H, W, C, OH, OW, F, KH, KW, CG, FG,
    sgn, sgh, sgw, sgc,
    SH, SW,
    PRECISION: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):  # fmt: skip
    """gx[n, ih, iw, g*CG + c] = sum over the taps (kh, kw) that reach (ih, iw) from an output
    position (oh, ow) and over f of g[n, oh, ow, g*FG + f] * w[kh, kw, c, g*FG + f].

    Grid: (cdiv(N*cdiv(H, SH)*cdiv(W, SW), BLOCK_M), cdiv(CG, BLOCK_N), groups*SH*SW). The
    third axis also picks the stride phase (ih % SH, iw % SW) shared by every row of the
    tile: for a phase, a tap reaches either every row (at output offset oh = i + doh) or
    none, so the loop runs over that phase's taps only, read from `taps_ptr` (per phase:
    count, then (tap, doh, dow) triples; see `_tap_table`).
    """
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    pid_z = tl.program_id(2)
    grp = pid_z // (SH * SW)
    phase = pid_z % (SH * SW)
    HQ = tl.cdiv(H, SH)
    WQ = tl.cdiv(W, SW)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_c = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    j = offs_m % WQ
    i = (offs_m // WQ) % HQ
    n = offs_m // (WQ * HQ)
    ih = phase // SW + i * SH
    iw = phase % SW + j * SW
    row_mask = (offs_m < N * HQ * WQ) & (ih < H) & (iw < W)
    c_mask = offs_c < CG
    g_row = g_ptr + n * sgn + grp * FG * sgc
    w_col = w_ptr + offs_c * F + grp * FG
    table = taps_ptr + phase * (1 + 3 * KH * KW)
    num_f = tl.cdiv(FG, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for it in range(0, tl.load(table) * num_f):
        entry = table + 1 + 3 * (it // num_f)
        tap = tl.load(entry)
        oh = i + tl.load(entry + 1)
        ow = j + tl.load(entry + 2)
        offs_f = (it % num_f) * BLOCK_K + tl.arange(0, BLOCK_K)
        f_mask = offs_f < FG
        r_mask = row_mask & (oh >= 0) & (oh < OH) & (ow >= 0) & (ow < OW)
        a = tl.load(
            (g_row + oh * sgh + ow * sgw)[:, None] + (offs_f * sgc)[None, :],
            mask=r_mask[:, None] & f_mask[None, :],
            other=0.0,
        )
        b = tl.load(
            (w_col + tap * CG * F)[None, :] + offs_f[:, None],
            mask=f_mask[:, None] & c_mask[None, :],
            other=0.0,
        )
        acc = tl.dot(a, b, acc, input_precision=PRECISION)
    gx_ptrs = gx_ptr + (((n * H + ih) * W + iw) * C + grp * CG)[:, None] + offs_c[None, :]
    tl.store(gx_ptrs, acc.to(gx_ptr.dtype.element_ty), mask=row_mask[:, None] & c_mask[None, :])


@triton.jit
def conv_grad_filter_kernel(
    x_ptr, g_ptr, out_ptr,
    N, H, W, C, OH, OW, F, KH, KW, CG, FG,
    sxn, sxh, sxw, sxc, sgn, sgh, sgw, sgc,
    SH, SW, PH, PW, DH, DW,
    SPLIT, CHUNK,
    PRECISION: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):  # fmt: skip
    """out[split, r, g*FG + f] = sum over positions p of this split of
    x_gathered[p, r]^T * g[p, g*FG + f], with r = (kh*KW + kw)*CG + c.

    Grid: (cdiv(KH*KW*CG, BLOCK_M), cdiv(FG, BLOCK_N), groups*SPLIT); split s reduces the
    positions [s*CHUNK, min((s+1)*CHUNK, N*OH*OW)).
    """
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    pid_z = tl.program_id(2)
    grp = pid_z // SPLIT
    split = pid_z % SPLIT
    R = KH * KW * CG
    P = N * OH * OW
    offs_r = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_f = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    r_mask = offs_r < R
    f_mask = offs_f < FG
    c = offs_r % CG
    tap = offs_r // CG
    dh = (tap // KW) * DH - PH
    dw = (tap % KW) * DW - PW
    x_col = x_ptr + (grp * CG + c) * sxc
    g_col = g_ptr + (grp * FG + offs_f) * sgc
    start = split * CHUNK
    end = tl.minimum(start + CHUNK, P)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for p0 in range(start, end, BLOCK_K):
        offs_p = p0 + tl.arange(0, BLOCK_K)
        p_mask = offs_p < end
        ow = offs_p % OW
        oh = (offs_p // OW) % OH
        n = offs_p // (OW * OH)
        ih = dh[:, None] + (oh * SH)[None, :]
        iw = dw[:, None] + (ow * SW)[None, :]
        a_mask = (r_mask[:, None] & p_mask[None, :]) & ((ih >= 0) & (ih < H))
        a_mask = a_mask & ((iw >= 0) & (iw < W))
        a = tl.load(
            x_col[:, None] + (n * sxn)[None, :] + ih * sxh + iw * sxw, mask=a_mask, other=0.0
        )
        b = tl.load(
            g_col[None, :] + (n * sgn + oh * sgh + ow * sgw)[:, None],
            mask=p_mask[:, None] & f_mask[None, :],
            other=0.0,
        )
        acc = tl.dot(a, b, acc, input_precision=PRECISION)
    out_ptrs = out_ptr + split * R * F + offs_r[:, None] * F + (grp * FG + offs_f)[None, :]
    tl.store(out_ptrs, acc.to(out_ptr.dtype.element_ty), mask=r_mask[:, None] & f_mask[None, :])


@triton.jit
def depthwise_fwd_kernel(
    x_ptr, w_ptr, b_ptr, y_ptr,
    N, H, W, C, OH, OW, F, KH, KW, MULT,
    sxn, sxh, sxw, sxc,
    SH, SW, PH, PW, DH, DW,
    HAS_BIAS: tl.constexpr, ACTIVATION: tl.constexpr,
    BLOCK_P: tl.constexpr, BLOCK_C: tl.constexpr,
):  # fmt: skip
    """y[n, oh, ow, f] = sum_{kh, kw} x[n, ih, iw, f // MULT] * w[kh, kw, 0, f].

    Grid: (cdiv(N*OH*OW, BLOCK_P), cdiv(F, BLOCK_C)); output channels are the contiguous axis.
    """
    pid_p = tl.program_id(0)
    pid_c = tl.program_id(1)
    offs_p = pid_p * BLOCK_P + tl.arange(0, BLOCK_P)
    offs_f = pid_c * BLOCK_C + tl.arange(0, BLOCK_C)
    p_mask = offs_p < N * OH * OW
    f_mask = offs_f < F
    ow = offs_p % OW
    oh = (offs_p // OW) % OH
    n = offs_p // (OW * OH)
    x_row = x_ptr + n * sxn
    x_chan = (offs_f // MULT) * sxc
    acc = tl.zeros((BLOCK_P, BLOCK_C), dtype=tl.float32)
    for kh in range(KH):
        ih = oh * SH - PH + kh * DH
        h_mask = p_mask & (ih >= 0) & (ih < H)
        for kw in range(KW):
            iw = ow * SW - PW + kw * DW
            r_mask = h_mask & (iw >= 0) & (iw < W)
            xv = tl.load(
                (x_row + ih * sxh + iw * sxw)[:, None] + x_chan[None, :],
                mask=r_mask[:, None] & f_mask[None, :],
                other=0.0,
            )
            wv = tl.load(w_ptr + (kh * KW + kw) * F + offs_f, mask=f_mask, other=0.0)
            acc += xv.to(tl.float32) * wv.to(tl.float32)[None, :]
    acc = _epilogue(acc, b_ptr, offs_f, f_mask, HAS_BIAS, ACTIVATION)
    y_ptrs = y_ptr + offs_p[:, None] * F + offs_f[None, :]
    tl.store(y_ptrs, acc.to(y_ptr.dtype.element_ty), mask=p_mask[:, None] & f_mask[None, :])


@triton.jit
def depthwise_grad_input_kernel(
    g_ptr, w_ptr, gx_ptr,
    N, H, W, C, OH, OW, F, KH, KW, MULT,
    sgn, sgh, sgw, sgc,
    SH, SW, PH, PW, DH, DW,
    BLOCK_P: tl.constexpr, BLOCK_C: tl.constexpr,
):  # fmt: skip
    """gx[n, ih, iw, c] = sum_{kh, kw, m} g[n, oh, ow, c*MULT + m] * w[kh, kw, 0, c*MULT + m]
    over the taps that land on (ih, iw). Grid: (cdiv(N*H*W, BLOCK_P), cdiv(C, BLOCK_C))."""
    pid_p = tl.program_id(0)
    pid_c = tl.program_id(1)
    offs_p = pid_p * BLOCK_P + tl.arange(0, BLOCK_P)
    offs_c = pid_c * BLOCK_C + tl.arange(0, BLOCK_C)
    p_mask = offs_p < N * H * W
    c_mask = offs_c < C
    iw = offs_p % W
    ih = (offs_p // W) % H
    n = offs_p // (W * H)
    g_row = g_ptr + n * sgn
    acc = tl.zeros((BLOCK_P, BLOCK_C), dtype=tl.float32)
    for kh in range(KH):
        num_h = ih + PH - kh * DH
        # Rows with num_h < 0 are masked before their quotient is used, so C-style and
        # floor division give the same result on every row that loads.
        oh = num_h // SH
        h_mask = p_mask & (num_h >= 0) & (num_h % SH == 0) & (oh < OH)
        for kw in range(KW):
            num_w = iw + PW - kw * DW
            ow = num_w // SW
            r_mask = h_mask & (num_w >= 0) & (num_w % SW == 0) & (ow < OW)
            m2 = r_mask[:, None] & c_mask[None, :]
            a_row = (g_row + oh * sgh + ow * sgw)[:, None]
            for m in range(MULT):
                f = offs_c * MULT + m
                gv = tl.load(a_row + (f * sgc)[None, :], mask=m2, other=0.0)
                wv = tl.load(w_ptr + (kh * KW + kw) * F + f, mask=c_mask, other=0.0)
                acc += gv.to(tl.float32) * wv.to(tl.float32)[None, :]
    gx_ptrs = gx_ptr + offs_p[:, None] * C + offs_c[None, :]
    tl.store(gx_ptrs, acc.to(gx_ptr.dtype.element_ty), mask=p_mask[:, None] & c_mask[None, :])


@triton.jit
def _tap_window(x_tile, mask, ih0, iw0, H, W, sxh, sxw, DH, DW, tap: tl.constexpr,
                KW: tl.constexpr):  # fmt: skip
    """The input each (position, channel) of a tile reads through tap `tap`, in float32 (0 off
    the image): `x_tile` points at the tile's image rows and channels, (ih0, iw0) is each
    position's window corner."""
    ih = ih0 + (tap // KW) * DH
    iw = iw0 + (tap % KW) * DW
    inside = (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)
    xv = tl.load(x_tile + (ih * sxh + iw * sxw)[:, None], mask=mask & inside[:, None], other=0.0)
    return xv.to(tl.float32)


@triton.jit
def _tap_add(a, gv, x_tile, mask, ih0, iw0, H, W, sxh, sxw, DH, DW, tap: tl.constexpr,
             TAPS: tl.constexpr, KW: tl.constexpr):  # fmt: skip
    """Accumulator `a` of tap `tap` plus this tile's products; unchanged past the kernel's
    TAPS."""
    if tap < TAPS:
        a += gv * _tap_window(x_tile, mask, ih0, iw0, H, W, sxh, sxw, DH, DW, tap, KW)
    return a


@triton.jit
def _tap_row(out, rows, a, tap: tl.constexpr, TAPS: tl.constexpr):
    """`out` with row `tap` set to accumulator `a`'s sum over positions (`out` itself past
    TAPS)."""
    if tap < TAPS:
        out = tl.where(rows[:, None] == tap, tl.sum(a, axis=0)[None, :], out)
    return out


@triton.jit
def depthwise_grad_filter_kernel(
    x_ptr, g_ptr, out_ptr,
    N, H, W, C, OH, OW, F, MULT,
    sxn, sxh, sxw, sxc, sgn, sgh, sgw, sgc,
    SH, SW, PH, PW, DH, DW,
    SPLIT, CHUNK,
    KH: tl.constexpr, KW: tl.constexpr, TAPS_P2: tl.constexpr,
    BLOCK_P: tl.constexpr, BLOCK_C: tl.constexpr,
):  # fmt: skip
    """out[split, kh*KW + kw, f] = sum over this split's positions of
    x[n, ih, iw, f // MULT] * g[n, oh, ow, f]. Grid: (cdiv(F, BLOCK_C), SPLIT); TAPS_P2 is
    KH * KW rounded up to a power of two.

    One pass over the positions serves every tap: each chunk of the output gradient is loaded
    once and multiplied by the input window of each tap in turn (neighbouring taps read
    neighbouring input rows, mostly from cache). Up to 9 taps (3x3 and smaller), each tap
    adds its products into its own (positions x channels) accumulator and the sums over
    positions are taken once, after the loop: a sum across a tile's threads every iteration
    (two bar.sync per tap on sm_90 with 4 warps) would dominate the loop. More taps sum each
    chunk into their row of a (taps x channels) accumulator."""
    pid_c = tl.program_id(0)
    split = tl.program_id(1)
    P = N * OH * OW
    offs_f = pid_c * BLOCK_C + tl.arange(0, BLOCK_C)
    f_mask = offs_f < F
    x_chan = (offs_f // MULT) * sxc
    g_chan = offs_f * sgc
    rows = tl.arange(0, TAPS_P2)
    start = split * CHUNK
    end = tl.minimum(start + CHUNK, P)
    TAPS: tl.constexpr = KH * KW
    acc = tl.zeros((TAPS_P2, BLOCK_C), dtype=tl.float32)
    a0 = tl.zeros((BLOCK_P, BLOCK_C), dtype=tl.float32)
    a1 = tl.zeros((BLOCK_P, BLOCK_C), dtype=tl.float32)
    a2 = tl.zeros((BLOCK_P, BLOCK_C), dtype=tl.float32)
    a3 = tl.zeros((BLOCK_P, BLOCK_C), dtype=tl.float32)
    a4 = tl.zeros((BLOCK_P, BLOCK_C), dtype=tl.float32)
    a5 = tl.zeros((BLOCK_P, BLOCK_C), dtype=tl.float32)
    a6 = tl.zeros((BLOCK_P, BLOCK_C), dtype=tl.float32)
    a7 = tl.zeros((BLOCK_P, BLOCK_C), dtype=tl.float32)
    a8 = tl.zeros((BLOCK_P, BLOCK_C), dtype=tl.float32)
    for p0 in range(start, end, BLOCK_P):
        offs_p = p0 + tl.arange(0, BLOCK_P)
        p_mask = offs_p < end
        ow = offs_p % OW
        oh = (offs_p // OW) % OH
        n = offs_p // (OW * OH)
        mask = p_mask[:, None] & f_mask[None, :]
        gv = tl.load(
            (g_ptr + n * sgn + oh * sgh + ow * sgw)[:, None] + g_chan[None, :],
            mask=mask,
            other=0.0,
        ).to(tl.float32)
        x_tile = (x_ptr + n * sxn)[:, None] + x_chan[None, :]
        ih0 = oh * SH - PH
        iw0 = ow * SW - PW
        if TAPS <= 9:
            a0 = _tap_add(a0, gv, x_tile, mask, ih0, iw0, H, W, sxh, sxw, DH, DW, 0, TAPS, KW)
            a1 = _tap_add(a1, gv, x_tile, mask, ih0, iw0, H, W, sxh, sxw, DH, DW, 1, TAPS, KW)
            a2 = _tap_add(a2, gv, x_tile, mask, ih0, iw0, H, W, sxh, sxw, DH, DW, 2, TAPS, KW)
            a3 = _tap_add(a3, gv, x_tile, mask, ih0, iw0, H, W, sxh, sxw, DH, DW, 3, TAPS, KW)
            a4 = _tap_add(a4, gv, x_tile, mask, ih0, iw0, H, W, sxh, sxw, DH, DW, 4, TAPS, KW)
            a5 = _tap_add(a5, gv, x_tile, mask, ih0, iw0, H, W, sxh, sxw, DH, DW, 5, TAPS, KW)
            a6 = _tap_add(a6, gv, x_tile, mask, ih0, iw0, H, W, sxh, sxw, DH, DW, 6, TAPS, KW)
            a7 = _tap_add(a7, gv, x_tile, mask, ih0, iw0, H, W, sxh, sxw, DH, DW, 7, TAPS, KW)
            a8 = _tap_add(a8, gv, x_tile, mask, ih0, iw0, H, W, sxh, sxw, DH, DW, 8, TAPS, KW)
        else:
            for tap in tl.static_range(TAPS):
                xv = _tap_window(x_tile, mask, ih0, iw0, H, W, sxh, sxw, DH, DW, tap, KW)
                part = tl.sum(xv * gv, axis=0)
                acc += tl.where(rows[:, None] == tap, part[None, :], 0.0)
    if TAPS <= 9:
        acc = _tap_row(acc, rows, a0, 0, TAPS)
        acc = _tap_row(acc, rows, a1, 1, TAPS)
        acc = _tap_row(acc, rows, a2, 2, TAPS)
        acc = _tap_row(acc, rows, a3, 3, TAPS)
        acc = _tap_row(acc, rows, a4, 4, TAPS)
        acc = _tap_row(acc, rows, a5, 5, TAPS)
        acc = _tap_row(acc, rows, a6, 6, TAPS)
        acc = _tap_row(acc, rows, a7, 7, TAPS)
        acc = _tap_row(acc, rows, a8, 8, TAPS)
    out_ptrs = out_ptr + (split * TAPS + rows[:, None]) * F + offs_f[None, :]
    tl.store(
        out_ptrs,
        acc.to(out_ptr.dtype.element_ty),
        mask=(rows[:, None] < TAPS) & f_mask[None, :],
    )


# ------------------------------------------------------------------------------ configs
def _cfg(num_warps, num_stages, **meta):
    return triton.Config(meta, num_warps=num_warps, num_stages=num_stages)


# Tile sets, each checked ahead of time on sm_80 and sm_90 for register spills. The first of
# each list is what the interpreter (and KERATRON_TRITON_PIN=1) runs.
#
# Forward implicit GEMM.
CONFIGS = [
    _cfg(8, 3, BLOCK_M=64, BLOCK_N=64, BLOCK_K=32),
    _cfg(8, 3, BLOCK_M=128, BLOCK_N=64, BLOCK_K=32),
    _cfg(8, 3, BLOCK_M=64, BLOCK_N=128, BLOCK_K=32),
    _cfg(8, 3, BLOCK_M=128, BLOCK_N=32, BLOCK_K=32),
    _cfg(4, 3, BLOCK_M=64, BLOCK_N=32, BLOCK_K=32),
    _cfg(4, 4, BLOCK_M=64, BLOCK_N=64, BLOCK_K=16),
]
# Grad-input: its gathered A tile is contiguous along the reduction (filters), so threads
# lie along K and each holds many rows; smaller K tiles keep that within the register file.
GRAD_INPUT_CONFIGS = [
    _cfg(8, 3, BLOCK_M=64, BLOCK_N=64, BLOCK_K=32),
    _cfg(8, 3, BLOCK_M=64, BLOCK_N=32, BLOCK_K=32),
    _cfg(8, 3, BLOCK_M=128, BLOCK_N=32, BLOCK_K=16),
    _cfg(4, 3, BLOCK_M=64, BLOCK_N=32, BLOCK_K=16),
]
# Grad-filter (rows: taps x channels, columns: filters, reduction: positions).
GRAD_FILTER_CONFIGS = [
    _cfg(8, 3, BLOCK_M=64, BLOCK_N=64, BLOCK_K=32),
    _cfg(8, 3, BLOCK_M=128, BLOCK_N=64, BLOCK_K=32),
    _cfg(8, 3, BLOCK_M=64, BLOCK_N=128, BLOCK_K=32),
    _cfg(8, 3, BLOCK_M=128, BLOCK_N=32, BLOCK_K=32),
    _cfg(4, 3, BLOCK_M=64, BLOCK_N=32, BLOCK_K=16),
]
# Float32 at IEEE precision (a dot on the CUDA cores reads its operands through registers):
# the 32-deep 64x64, 128x64 and 64x128 tiles of 8 warps spill 32-288 bytes per thread on
# sm_80 (the forward, grad-input and grad-filter alike), 16-deep they compile within
# 134-202 registers on both targets but for 64x128, which still spills 8 bytes 16 deep
# (the forward on sm_90, the grad-filter on sm_80; more at 16 warps or 2 stages), so IEEE
# leaves 64x128 out.
IEEE_CONFIGS = [
    _cfg(8, 3, BLOCK_M=64, BLOCK_N=64, BLOCK_K=16),
    _cfg(8, 3, BLOCK_M=128, BLOCK_N=64, BLOCK_K=16),
    *CONFIGS[3:],
]
IEEE_GRAD_INPUT_CONFIGS = [
    _cfg(8, 3, BLOCK_M=64, BLOCK_N=64, BLOCK_K=16),
    *GRAD_INPUT_CONFIGS[1:],
]
IEEE_GRAD_FILTER_CONFIGS = [
    GRAD_FILTER_CONFIGS[0],
    _cfg(8, 3, BLOCK_M=128, BLOCK_N=64, BLOCK_K=16),
    *GRAD_FILTER_CONFIGS[3:],
]
# Direct depthwise tiles: (positions x channels), channels contiguous; at most 16 elements
# per thread.
DEPTHWISE_CONFIGS = [
    _cfg(4, 2, BLOCK_P=32, BLOCK_C=32),
    _cfg(4, 2, BLOCK_P=32, BLOCK_C=64),
    _cfg(4, 2, BLOCK_P=64, BLOCK_C=32),
    _cfg(8, 2, BLOCK_P=64, BLOCK_C=64),
    _cfg(8, 2, BLOCK_P=32, BLOCK_C=128),
]

# The depthwise weight gradient keeps a (positions x channels) float32 accumulator per tap (up
# to 3x3), so a thread holds 9 tiles' worth: 16x32 on 4 warps first (115-125 registers with any
# strides on sm_80 and sm_90, 72 at MobileNet's shapes), then larger tiles for the
# autotuner; 32x32 on 4 warps reaches 242-250 with any strides, without spills, and 32x64 on
# 8 warps spilled at MobileNet's 112x112x32, so it is left out. Its loop has no sum across
# threads (the sums over positions come once, after it): summing each tap's chunk every
# iteration, as the kernel did, put 18 bar.sync in each iteration of the loop on sm_90.
DEPTHWISE_GRAD_FILTER_CONFIGS = [
    _cfg(4, 2, BLOCK_P=16, BLOCK_C=32),
    _cfg(4, 2, BLOCK_P=32, BLOCK_C=32),
    _cfg(4, 1, BLOCK_P=16, BLOCK_C=64),
    _cfg(8, 2, BLOCK_P=32, BLOCK_C=32),
    _cfg(2, 2, BLOCK_P=16, BLOCK_C=32),
]

# Autotuning is redone for each new value of these (those a kernel takes) and each dtype.
_TUNING_KEY = ["N", "H", "W", "C", "OH", "OW", "F", "KH", "KW", "CG", "MULT", "SH", "SW"]


def _kernel(fn, configs, op, ieee=None, **pointer_types):
    key = [k for k in _TUNING_KEY if k in fn.arg_names]
    return Kernel(fn, configs, key, op, pointer_types, ieee_configs=ieee)


CONV_FWD = _kernel(conv_fwd_kernel, CONFIGS, "conv", IEEE_CONFIGS)
CONV_GRAD_INPUT = _kernel(
    conv_grad_input_kernel, GRAD_INPUT_CONFIGS, "conv_grad_input", IEEE_GRAD_INPUT_CONFIGS,
    taps_ptr="i32",
)  # fmt: skip
CONV_GRAD_FILTER = _kernel(
    conv_grad_filter_kernel, GRAD_FILTER_CONFIGS, "conv_grad_filter", IEEE_GRAD_FILTER_CONFIGS
)
DEPTHWISE_FWD = _kernel(depthwise_fwd_kernel, DEPTHWISE_CONFIGS, "conv")
DEPTHWISE_GRAD_INPUT = _kernel(depthwise_grad_input_kernel, DEPTHWISE_CONFIGS, "conv_grad_input")
DEPTHWISE_GRAD_FILTER = _kernel(
    depthwise_grad_filter_kernel, DEPTHWISE_GRAD_FILTER_CONFIGS, "conv_grad_filter"
)


# ------------------------------------------------------------------------------ launchers
def _check(op: str, *tensors) -> None:
    """Raises NotImplementedError for what the kernels do not handle (the fallback runs)."""
    dtype = tensors[0].dtype
    if dtype not in FLOAT_DTYPES:
        raise NotImplementedError(f"{op}: dtype {dtype} (supported: float32, float16, bfloat16)")
    for t in tensors:
        if t is None:
            continue
        if t.dtype != dtype:
            raise NotImplementedError(f"{op}: mixed dtypes {dtype} and {t.dtype}")
        if t.device != tensors[0].device:
            raise NotImplementedError(f"{op}: tensors on {tensors[0].device} and {t.device}")
        # Offsets are int32 inside the kernels.
        span = 1 + sum((s - 1) * abs(st) for s, st in zip(t.shape, t.stride()) if s > 0)
        if t.numel() > _INT32_MAX or span > _INT32_MAX:
            raise NotImplementedError(f"{op}: shape {tuple(t.shape)} needs 64-bit offsets")


def _spatial_2d(op, nd, strides, padding, dilation):
    """Normalises 1-D (height-1) and 2-D parameters; 3-D convolutions use the fallback."""
    if nd == 2:
        return tuple(strides), tuple(tuple(p) for p in padding), tuple(dilation)
    if nd == 1:
        return (1, strides[0]), ((0, 0), tuple(padding[0])), (1, dilation[0])
    raise NotImplementedError(f"{op}: {nd}-D convolution (kernels cover 1-D and 2-D)")


def _num_splits(
    positions: int, tiles: int, device: torch.device, least=SPLIT_MIN_POSITIONS, per_sm=2
) -> int:
    """How many programs share the grad-filter reduction: `per_sm` programs per SM over all
    tiles, each split reducing over at least `least` positions."""
    sms = multiprocessor_count(device)
    want = max(1, (per_sm * sms) // max(tiles, 1))
    return max(1, min(want, positions // least))


@functools.lru_cache(maxsize=128)
def _tap_table(kh, kw, sh, sw, pt, pl, dh, dw, device) -> torch.Tensor:
    """Per stride phase (ih % sh, iw % sw): the taps that reach it, for the grad-input kernel.

    Row `phase_h * sw + phase_w` holds the count, then `(kh*kw_size + kw, doh, dow)` per tap,
    where input row `phase_h + i*sh` reads output row `i + doh` through that tap.
    """
    rows = []
    for ph in range(sh):
        for pw in range(sw):
            entries = []
            for a in range(kh):
                num_h = ph + pt - a * dh
                if num_h % sh:
                    continue
                for b in range(kw):
                    num_w = pw + pl - b * dw
                    if num_w % sw == 0:
                        entries += [a * kw + b, num_h // sh, num_w // sw]
            rows.append([len(entries) // 3, *entries] + [0] * (3 * kh * kw - len(entries)))
    return torch.tensor(rows, dtype=torch.int32, device=device)


def _sizes(n, h, w, c, oh, ow, f, kh, kw) -> dict:
    return dict(N=n, H=h, W=w, C=c, OH=oh, OW=ow, F=f, KH=kh, KW=kw)


def _strides(prefix: str, t) -> dict:
    """The NHWC strides of `t` as the kernels name them (sxn, sxh, sxw, sxc for prefix sx)."""
    return dict(zip((prefix + axis for axis in "nhwc"), t.stride()))


_FWD_CACHE, _GRAD_INPUT_CACHE, _GRAD_FILTER_CACHE = route_cache(), route_cache(), route_cache()


def _cached(cache: dict, key: tuple) -> tuple:
    """`(key, route)`: the cached route of `key`; key None where a parameter is unhashable (a
    list: such calls are not cached)."""
    try:
        return key, cache.get(key)
    except TypeError:
        return None, None


# A TF32 forward on sm_90 whose kernel tiles are each read by this many row tiles or more
# copies the kernel K-major first (`k_major_weights`; the copy is the kernel's size).
K_MAJOR_READS = 2


def k_major_weights(k) -> tuple:
    """`(w, WKS)`: the kernel (..., CG, F) as F rows of its KH*KW*CG reduction entries, each row
    padded with zeros to WKS, the next multiple of 16 (16-byte aligned rows: the JIT proves
    the copies' alignment from WKS). What `conv_fwd_kernel` reads with W_K_MAJOR.

    Example:
        >>> w, wks = k_major_weights(torch.arange(2 * 3 * 5.0).reshape(1, 2, 3, 5))
        >>> tuple(w.shape), wks, w[1, :6].tolist(), float(w[:, 6:].abs().sum())
        ((5, 16), 16, [1.0, 6.0, 11.0, 16.0, 21.0, 26.0], 0.0)
    """
    f = k.shape[-1]
    rows = k.reshape(-1, f)
    wks = triton.cdiv(rows.shape[0], 16) * 16
    w = torch.zeros((f, wks), dtype=k.dtype, device=k.device)
    w[:, : rows.shape[0]] = rows.t()
    return w, wks


def _reads_k_major(precision: str, device, positions: int) -> bool:
    """Whether a forward of `positions` output positions reads the kernel K-major: TF32 dots
    on sm_90, the kernel re-read by `K_MAJOR_READS` row tiles (of the first config's rows)."""
    capability, _ = device_limits(device)
    if precision != "tf32" or tuple(capability) < (9, 0):
        return False
    return triton.cdiv(positions, CONFIGS[0].kwargs["BLOCK_M"]) >= K_MAJOR_READS


def conv_route(x, k, b, strides, padding, dilation, groups, activation):
    """Triton route of the "conv" primitive: same signature and result as its impl.

    Example:
        >>> x, k = torch.randn(1, 5, 7, 3), torch.randn(3, 3, 3, 5)
        >>> conv_route(x, k, None, (1, 1), ((1, 1), (1, 1)), (1, 1), 1, "relu").shape
        torch.Size([1, 5, 7, 5])
    """
    key, state = None, launch_state()
    if state is not None:
        bias = None if b is None else tensor_key(b)
        key = (tensor_key(x), tensor_key(k), bias, strides, padding, dilation, groups)
        key, cached = _cached(_FWD_CACHE, key + (activation, dot_precision(x.dtype), state))
        if cached is not None:
            return cached(x, k, b)
    nd = x.dim() - 2
    (sh, sw), ((pt, pb), (pl, pr)), (dh, dw) = _spatial_2d("conv", nd, strides, padding, dilation)
    x_in, k_in = x, k
    if nd == 1:
        x, k = x.unsqueeze(1), k.unsqueeze(0)
    _check("conv", x, k, b)
    code = activation_code("conv", activation)
    n, h, w, c = x.shape
    kh, kw, cg, f = k.shape
    oh = (h + pt + pb - (kh - 1) * dh - 1) // sh + 1
    ow = (w + pl + pr - (kw - 1) * dw - 1) // sw + 1
    y = torch.empty((n, oh, ow, f), dtype=x.dtype, device=x.device)
    _check("conv", y)
    if y.numel():
        wt = k_in.contiguous()
        fg = f // groups
        bias = y if b is None else b.contiguous()
        # The kernels receive the route's own tensors (1-D ones too), as the cached route
        # passes them.
        y_out = y.squeeze(1) if nd == 1 else y
        args = dict(x_ptr=x_in, w_ptr=wt, b_ptr=y_out if b is None else bias, y_ptr=y_out)
        args.update(_sizes(n, h, w, c, oh, ow, f, kh, kw))
        k_major = False
        args.update(_strides("sx", x), SH=sh, SW=sw, PH=pt, PW=pl, DH=dh, DW=dw)
        args.update(HAS_BIAS=b is not None, ACTIVATION=code)
        p = n * oh * ow
        if cg == 1:

            def grid(m):
                return (triton.cdiv(p, m["BLOCK_P"]), triton.cdiv(f, m["BLOCK_C"]))

            relaunch = DEPTHWISE_FWD.launch(grid, MULT=fg, **args)
        else:

            def grid(m):
                return (triton.cdiv(p, m["BLOCK_M"]), triton.cdiv(fg, m["BLOCK_N"]), groups)

            precision = dot_precision(x.dtype)
            k_major = _reads_k_major(precision, x.device, p)
            wks = 0
            if k_major:
                args["w_ptr"], wks = k_major_weights(k_in)
            relaunch = CONV_FWD.launch(
                grid, CG=cg, FG=fg, WKS=wks, PRECISION=precision, W_K_MAJOR=k_major, **args
            )
        if key is not None and relaunch is not None:
            _FWD_CACHE[key] = _cached_forward(y_out.shape, relaunch(), k_major)
    return y.squeeze(1) if nd == 1 else y


def _cached_forward(shape, relaunch, k_major=False):
    """The forward route of one signature (`route_cache`): a height-1 (1-D) convolution passes
    its unsqueezed tensors' storage as is; a K-major read copies the kernel each call."""

    def route(x, k, b):
        y = x.new_empty(*shape)
        w = k_major_weights(k)[0] if k_major else k.contiguous()
        relaunch(x, w, y if b is None else b.contiguous(), y)
        return y

    return route


def grad_input_route(g, k, input_shape, strides, padding, dilation, groups):
    """Triton route of "conv_grad_input": the input cotangent, of shape `input_shape`.

    Example:
        >>> g, k = torch.randn(1, 3, 4, 5), torch.randn(3, 3, 3, 5)
        >>> grad_input_route(g, k, (1, 5, 7, 3), (2, 2), ((1, 1), (1, 1)), (1, 1), 1).shape
        torch.Size([1, 5, 7, 3])
    """
    key, state = None, launch_state()
    if state is not None:
        key = (tensor_key(g), tensor_key(k), input_shape, strides, padding, dilation, groups)
        key, cached = _cached(_GRAD_INPUT_CACHE, key + (dot_precision(g.dtype), state))
        if cached is not None:
            return cached(g, k)
    nd = g.dim() - 2
    (sh, sw), ((pt, _), (pl, _)), (dh, dw) = _spatial_2d(
        "conv_grad_input", nd, strides, padding, dilation
    )
    shape = tuple(input_shape)
    g_in, k_in = g, k
    if nd == 1:
        g, k, shape = g.unsqueeze(1), k.unsqueeze(0), (shape[0], 1, *shape[1:])
    _check("conv_grad_input", g, k)
    n, h, w, c = shape
    _, oh, ow, f = g.shape
    kh, kw, cg, _ = k.shape
    gx = torch.empty(shape, dtype=g.dtype, device=g.device)
    _check("conv_grad_input", gx)
    if gx.numel():
        wt = k_in.contiguous()
        fg = f // groups
        gx_out = gx.squeeze(1) if nd == 1 else gx
        out_shape = gx_out.shape
        args = dict(g_ptr=g_in, w_ptr=wt, gx_ptr=gx_out)
        args.update(_sizes(n, h, w, c, oh, ow, f, kh, kw))
        args.update(_strides("sg", g), SH=sh, SW=sw)
        if cg == 1:

            def grid(m):
                return (triton.cdiv(n * h * w, m["BLOCK_P"]), triton.cdiv(c, m["BLOCK_C"]))

            relaunch = DEPTHWISE_GRAD_INPUT.launch(
                grid, MULT=fg, PH=pt, PW=pl, DH=dh, DW=dw, **args
            )
            if key is not None and relaunch is not None:
                _GRAD_INPUT_CACHE[key] = _cached_grad_input(out_shape, relaunch(), None)
        else:
            taps = _tap_table(kh, kw, sh, sw, pt, pl, dh, dw, g.device)
            rows = n * triton.cdiv(h, sh) * triton.cdiv(w, sw)

            def grid(m):
                return (
                    triton.cdiv(rows, m["BLOCK_M"]),
                    triton.cdiv(cg, m["BLOCK_N"]),
                    groups * sh * sw,
                )

            precision = dot_precision(g.dtype)
            relaunch = CONV_GRAD_INPUT.launch(
                grid, taps_ptr=taps, CG=cg, FG=fg, PRECISION=precision, **args
            )
            if key is not None and relaunch is not None:
                _GRAD_INPUT_CACHE[key] = _cached_grad_input(out_shape, relaunch(), taps)
    return gx.squeeze(1) if nd == 1 else gx


def _cached_grad_input(shape, relaunch, taps):
    """The grad-input route of one signature (`route_cache`), with its tap table (None for
    the depthwise kernel, which has none)."""

    def route(g, k):
        gx = g.new_empty(*shape)
        if taps is None:
            relaunch(g, k.contiguous(), gx)
        else:
            relaunch(g, k.contiguous(), taps, gx)
        return gx

    return route


def grad_filter_route(x, g, kernel_shape, strides, padding, dilation, groups):
    """Triton route of "conv_grad_filter": the kernel cotangent, of shape `kernel_shape`.

    Example:
        >>> x, g = torch.randn(1, 5, 7, 3), torch.randn(1, 3, 4, 5)
        >>> grad_filter_route(x, g, (3, 3, 3, 5), (2, 2), ((1, 1), (1, 1)), (1, 1), 1).shape
        torch.Size([3, 3, 3, 5])
    """
    key, state = None, launch_state()
    if state is not None:
        key = (tensor_key(x), tensor_key(g), kernel_shape, strides, padding, dilation, groups)
        key, cached = _cached(_GRAD_FILTER_CACHE, key + (dot_precision(g.dtype), state))
        if cached is not None:
            return cached(x, g)
    nd = x.dim() - 2
    (sh, sw), ((pt, _), (pl, _)), (dh, dw) = _spatial_2d(
        "conv_grad_filter", nd, strides, padding, dilation
    )
    shape = tuple(kernel_shape)
    x_in, g_in = x, g
    if nd == 1:
        x, g, shape = x.unsqueeze(1), g.unsqueeze(1), (1, *shape)
    _check("conv_grad_filter", g, x)
    n, h, w, c = x.shape
    _, oh, ow, f = g.shape
    kh, kw, cg, _ = shape
    fg = f // groups
    p = n * oh * ow
    rows = kh * kw * cg
    if cg == 1:
        tiles = triton.cdiv(f, 64)
        splits = _num_splits(
            p, tiles, g.device, DEPTHWISE_SPLIT_MIN_POSITIONS, DEPTHWISE_PROGRAMS_PER_SM
        )
    else:
        tiles = triton.cdiv(rows, 64) * triton.cdiv(fg, 64) * groups
        splits = _num_splits(p, tiles, g.device)
    chunk = max(1, triton.cdiv(p, splits))
    splits = max(1, triton.cdiv(p, chunk))
    if splits == 1:
        out = torch.empty(shape, dtype=g.dtype, device=g.device)
    else:
        out = torch.empty((splits, rows, f), dtype=torch.float32, device=g.device)
    _check("conv_grad_filter", out)
    if out.numel():
        out_arg = out.squeeze(0) if nd == 1 and splits == 1 else out
        args = dict(x_ptr=x_in, g_ptr=g_in, out_ptr=out_arg)
        args.update(_sizes(n, h, w, c, oh, ow, f, kh, kw))
        args.update(_strides("sx", x), **_strides("sg", g))
        args.update(SH=sh, SW=sw, PH=pt, PW=pl, DH=dh, DW=dw, SPLIT=splits, CHUNK=chunk)
        if cg == 1:

            def grid(m):
                return (triton.cdiv(f, m["BLOCK_C"]), splits)

            taps = triton.next_power_of_2(kh * kw)
            relaunch = DEPTHWISE_GRAD_FILTER.launch(grid, MULT=fg, TAPS_P2=taps, **args)
        else:

            def grid(m):
                return (
                    triton.cdiv(rows, m["BLOCK_M"]),
                    triton.cdiv(fg, m["BLOCK_N"]),
                    groups * splits,
                )

            precision = dot_precision(g.dtype)
            relaunch = CONV_GRAD_FILTER.launch(grid, CG=cg, FG=fg, PRECISION=precision, **args)
        if key is not None and relaunch is not None:
            result = shape[1:] if nd == 1 else shape
            _GRAD_FILTER_CACHE[key] = _cached_grad_filter(out.shape, splits, result, relaunch())
    if splits > 1:
        out = out.sum(0).to(g.dtype).reshape(shape)
    return out.squeeze(0) if nd == 1 else out


def _cached_grad_filter(out_shape, splits, shape, relaunch):
    """The grad-filter route of one signature (`route_cache`): `splits` float32 partials
    summed after the launch, or the kernel cotangent itself."""

    def route(x, g):
        if splits == 1:
            out = g.new_empty(*shape)
            relaunch(x, g, out)
            return out
        out = g.new_empty(out_shape, dtype=torch.float32)
        relaunch(x, g, out)
        return out.sum(0).to(g.dtype).reshape(shape)

    return route


# ------------------------------------------------------------------------------ ahead of time
def aot_specs() -> list:
    """Every kernel x config for the ahead-of-time compile report.

    Returns a list of `(kernel_name, jit_function, signature, constexprs, num_warps,
    num_stages)`: float32 for every config, with TF32 dots (the forward with its bias + relu
    or relu6 epilogue, and reading a K-major kernel as well, `..._kmajor`) and with IEEE dots
    at the IEEE configs (`..._ieee`; the K-major kernel is read under TF32 only), and
    float16 / bfloat16 with each kernel's first config. Integer arguments are left
    unspecialised (no stride known to be 1 or divisible by 16): the worst case for
    registers.
    """
    epilogue = dict(HAS_BIAS=True, ACTIVATION=activation_code("conv", "relu"))
    kernels = [
        ("conv_fwd", CONV_FWD, epilogue),
        ("conv_grad_input", CONV_GRAD_INPUT, {}),
        ("conv_grad_filter", CONV_GRAD_FILTER, {}),
        ("depthwise_fwd", DEPTHWISE_FWD, dict(epilogue, ACTIVATION=activation_code("", "relu6"))),
        ("depthwise_grad_input", DEPTHWISE_GRAD_INPUT, {}),
        # 3x3 taps, the depthwise kernels' usual size (the tap loop is unrolled per size)
        ("depthwise_grad_filter", DEPTHWISE_GRAD_FILTER, dict(KH=3, KW=3, TAPS_P2=16)),
    ]
    specs = []
    for name, kernel, extra in kernels:
        dot = "PRECISION" in kernel.constexprs  # the tl.dot kernels
        cases = [(torch.float32, "tf32", kernel.configs)]
        if dot:
            cases.append((torch.float32, "ieee", kernel.ieee_configs))
        cases += [(dtype, "ieee", kernel.configs[:1]) for dtype in FLOAT_DTYPES[1:]]
        for dtype, precision, configs in cases:
            for cfg in configs:
                consts = dict(extra, PRECISION=precision) if dot else dict(extra)
                tiles = "x".join(str(v) for v in cfg.kwargs.values())
                label = f"{name}_{str(dtype)[6:]}_{tiles}_w{cfg.num_warps}_s{cfg.num_stages}"
                if dtype == torch.float32 and precision == "ieee":
                    label += "_ieee"
                if "W_K_MAJOR" not in kernel.constexprs:
                    specs.append(kernel.aot_spec(label, dtype, consts, cfg))
                    continue
                specs.append(kernel.aot_spec(label, dtype, dict(consts, W_K_MAJOR=False), cfg))
                if dtype == torch.float32 and precision == "tf32":
                    k_major = dict(consts, W_K_MAJOR=True)
                    specs.append(kernel.aot_spec(label + "_kmajor", dtype, k_major, cfg))
    return specs
