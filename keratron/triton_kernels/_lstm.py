"""Triton kernels for the LSTM recurrence (`lstm`) and its backpropagation through time
(`lstm_grad`), in Keras's gate order (i, f, c, o).

Three plans. `plan(units, dtype)` is a size's own pick, which backend "triton" runs; backend
"auto" also times the step plan (`variants`) and keeps the faster (`ops._dispatch`: by GPU
time inside a step that CUDA graphs replay, where the step plan's launch per time step costs
the host nothing):

- "resident" (units <= RESIDENT_UNITS: 32 in float32 with TF32 dots, 16 at IEEE precision,
  64 in float16/bfloat16): the forward is
  one launch per sequence. A program owns BLOCK_B = 16 batch rows and every unit of them
  (grid cdiv(B, 16)), so the recurrence needs no synchronisation between programs. The four
  (W, W) gate blocks of the recurrent kernel (W = units padded to a power of two) are loaded
  once before the time loop; Triton keeps these loop-invariant dot operands in shared memory
  (4 * W^2 * s bytes: 16 KiB at W = 32 in float32, 32 KiB at W = 64 in bfloat16). h, c and
  the previous output are loop-carried register tiles; per step the kernel reads the input
  projection, does four (16, W) x (W, W) dots, the activations and the cell update, and
  writes gates, cell and output. The limit is the AOT report's (sm_90 and sm_80, 8 warps):
  float32 W = 32 takes up to 104 / 136 registers (forward / backward), W = 64 has its backward at
  255 registers with 32 B/thread of spills, W = 128 asks for 264 KiB of shared memory (over
  227 KiB); bfloat16 W = 64 up to 109 / 189, W = 128 spills 440 B/thread in the
  backward. At IEEE precision (dots on the CUDA cores) float32 W = 32 spills 64 B/thread in
  the backward on sm_90, so W = 16 is the limit there.
- "streamed" (up to PERSISTENT_MAX_UNITS = 1024 units): the same ownership and one launch per
  sequence, but the recurrent kernel does not fit on chip: every step streams it from L2 in
  (BLOCK_K, BLOCK_N) tiles (4 * U^2 * s bytes a program a step, 1 MiB at U = 256 in float32,
  L2-resident), looping over unit tiles. h and c live in the program's own rows of a
  double-buffered (2, B, U) state buffer (L1/L2); one `tl.debug_barrier` (bar.sync, which
  orders the block's memory accesses) a step separates the threads that write step t's
  states from those that read them as step t + 1's dot operand. At most 128 registers a
  thread and no spills on either target (8 or 16 warps, num_stages=1; see SEQ_CONFIGS).
- "steps" (more units): one fused gate-and-cell launch per time step over a (batch tile,
  unit tile) grid, the launch boundary being the grid-wide barrier between steps. The
  threshold is an estimate until bench/kernels_gpu.py measures it: the step kernels took 59
  us a step at 256 units and 108 us at 512 on an H100, host launch included
  (bench/kernels_h100.md); one SM reading L2 at ~100 GB/s streams 4 * U^2 * s bytes in ~10
  us at 256 float32 units, ~40 us at 512 and ~160 us at 1024, so past 1024 units a step
  spread over the whole GPU should win.

A grid-wide barrier inside one launch (atomics and spinning) would let programs split units
too, but it deadlocks unless every program is co-resident, and cannot run under the
interpreter, so it is not used: a whole-sequence launch uses cdiv(B, 16) SMs (4 at B = 64).

The backward pass (`lstm_grad`) is two launches in the whole-sequence plans: one kernel
rebuilds the states entering each step (h_prev for dU, c_prev), then runs steps T-1 .. 0
(`dh = skip + dz[t + 1] @ U^T`, then the gate cotangents dz[t]) and writes dh0 and dc0; a
second launch computes `dU = h_prev^T @ dz` over all B * T rows, a reduction across the
batch (so across programs), run over (U, 4U) output tiles on the whole GPU. The step plan
runs the carry kernel, a launch per step, one for dh0, and dU.

The backward reads the saved gates instead of recomputing them: recomputing needs
`h_prev @ U` again, 8 * B * U^2 FLOPs a step (the forward's whole cost) plus, when streamed,
the 4 * U^2 * s bytes of U again; reading costs 4 * B * U * s bytes a step (for B = 64,
U = 256 in float32: 256 KiB a step against 33.5 MFLOP and 1 MiB of U). The `lstm`
primitive returns the gates anyway.

Budget per step (B batch, U units, s bytes per element): forward 8 * B * U^2 FLOPs for the
recurrent matmul plus ~30 * B * U elementwise; it reads 4 * B * U * s of input projection
and writes 6 * B * U * s (gates, cell, output), plus 4 * B * U * s of state traffic
through L1/L2 when streamed. The backward step is again 8 * B * U^2 FLOPs, reads
~11 * B * U * s (gates, cell, c_prev, g_all, dz[t + 1]) and writes 4 * B * U * s of dz;
the carry pass reads 2 * B * U * s and writes 2 * B * U * s a step. dU is 8 * T * B * U^2
FLOPs in one launch.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from keratron.triton_kernels._common import (
    FLOAT32_PRECISIONS,
    FLOAT_DTYPES,
    TRITON_TYPES,
    Kernel,
    activate,
    activation_code,
    dot_precision,
    launch_state,
    launchable,
    route_cache,
    tensor_key,
)

__all__ = ["forward_route", "backward_route", "plan", "variants", "aot_specs"]

_MAX_ELEMENTS = 2**31 - 1  # offsets are computed in int32


# ----------------------------------------------------------------------------- activations
@triton.jit
def _activation_grad(y, ACT: tl.constexpr):
    """The derivative of activation ACT (an `ACTIVATION_CODES` code), written through its
    output `y` (what is saved)."""
    if ACT == 6:  # tanh
        d = 1.0 - y * y
    elif ACT == 5:  # sigmoid
        d = y * (1.0 - y)
    elif ACT == 1:  # relu
        d = tl.where(y > 0.0, 1.0, 0.0)
    elif ACT == 7:  # hard_sigmoid
        d = tl.where((y > 0.0) & (y < 1.0), 1.0 / 6.0, 0.0)
    else:  # linear
        d = tl.full(y.shape, 1.0, tl.float32)
    return d


# --------------------------------------------------------------------------------- kernels
@triton.jit
def _fwd_tile(
    x_ptr, k_ptr, m_ptr, h_in_ptr, c_in_ptr, h_out_ptr, c_out_ptr, gates_ptr, cells_ptr, out_ptr,
    rb, rn, B, U, T, t, t_src, stride_xb, stride_xt, stride_xf, stride_kr, stride_kc,
    stride_mb, stride_mt,
    HAS_MASK: tl.constexpr, ZERO_OUTPUT: tl.constexpr, ACT: tl.constexpr, RACT: tl.constexpr,
    PRECISION: tl.constexpr, BLOCK_B: tl.constexpr, BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
):  # fmt: skip
    """Forward step `t` (processed order; `t_src` is its index in x_proj and mask) for the
    (rb, rn) tile of batch rows and units: reads the states entering the step from h_in/c_in
    (B, U), writes the states leaving it to h_out/c_out and the step's gates (T, B, 4U), cell
    (T, B, U) and output (B, T, U)."""
    b_ok = rb < B
    n_ok = rn < U
    tile_ok = b_ok[:, None] & n_ok[None, :]

    # z = h @ U for the four gate column blocks of this unit tile.
    acc_i = tl.zeros((BLOCK_B, BLOCK_N), dtype=tl.float32)
    acc_f = tl.zeros((BLOCK_B, BLOCK_N), dtype=tl.float32)
    acc_g = tl.zeros((BLOCK_B, BLOCK_N), dtype=tl.float32)
    acc_o = tl.zeros((BLOCK_B, BLOCK_N), dtype=tl.float32)
    gate_cols = U * stride_kc
    for k0 in range(0, U, BLOCK_K):
        rk = k0 + tl.arange(0, BLOCK_K)
        k_ok = rk < U
        h = tl.load(
            h_in_ptr + rb[:, None] * U + rk[None, :],
            mask=b_ok[:, None] & k_ok[None, :],
            other=0.0,
        )
        w_ptrs = k_ptr + rk[:, None] * stride_kr + rn[None, :] * stride_kc
        w_ok = k_ok[:, None] & n_ok[None, :]
        w = tl.load(w_ptrs, mask=w_ok, other=0.0)
        acc_i = tl.dot(h, w, acc_i, input_precision=PRECISION)
        w = tl.load(w_ptrs + gate_cols, mask=w_ok, other=0.0)
        acc_f = tl.dot(h, w, acc_f, input_precision=PRECISION)
        w = tl.load(w_ptrs + 2 * gate_cols, mask=w_ok, other=0.0)
        acc_g = tl.dot(h, w, acc_g, input_precision=PRECISION)
        w = tl.load(w_ptrs + 3 * gate_cols, mask=w_ok, other=0.0)
        acc_o = tl.dot(h, w, acc_o, input_precision=PRECISION)

    x_ptrs = x_ptr + rb[:, None] * stride_xb + t_src * stride_xt + rn[None, :] * stride_xf
    x_gate = U * stride_xf
    z_i = acc_i + tl.load(x_ptrs, mask=tile_ok, other=0.0).to(tl.float32)
    z_f = acc_f + tl.load(x_ptrs + x_gate, mask=tile_ok, other=0.0).to(tl.float32)
    z_g = acc_g + tl.load(x_ptrs + 2 * x_gate, mask=tile_ok, other=0.0).to(tl.float32)
    z_o = acc_o + tl.load(x_ptrs + 3 * x_gate, mask=tile_ok, other=0.0).to(tl.float32)
    gi = activate(z_i, RACT)
    gf = activate(z_f, RACT)
    gg = activate(z_g, ACT)
    go = activate(z_o, RACT)

    dtype = gates_ptr.dtype.element_ty
    state = rb[:, None] * U + rn[None, :]
    c_old = tl.load(c_in_ptr + state, mask=tile_ok, other=0.0).to(tl.float32)
    # Rounded to the storage dtype before use, as the fallback keeps its cells in it.
    c_new = (gf * c_old + gi * gg).to(dtype).to(tl.float32)
    h_new = go * activate(c_new, ACT)

    g_ptrs = gates_ptr + t * B * 4 * U + rb[:, None] * 4 * U + rn[None, :]
    tl.store(g_ptrs, gi.to(dtype), mask=tile_ok)
    tl.store(g_ptrs + U, gf.to(dtype), mask=tile_ok)
    tl.store(g_ptrs + 2 * U, gg.to(dtype), mask=tile_ok)
    tl.store(g_ptrs + 3 * U, go.to(dtype), mask=tile_ok)
    tl.store(cells_ptr + t * B * U + state, c_new.to(dtype), mask=tile_ok)

    out_ptrs = out_ptr + rb[:, None] * T * U + rn[None, :]
    if HAS_MASK:
        live = tl.load(m_ptr + rb * stride_mb + t_src * stride_mt, mask=b_ok, other=0) != 0
        live = live[:, None]
        h_old = tl.load(h_in_ptr + state, mask=tile_ok, other=0.0).to(tl.float32)
        h_keep = tl.where(live, h_new, h_old)
        c_keep = tl.where(live, c_new, c_old)
        if ZERO_OUTPUT:
            out = tl.where(live, h_new, 0.0)
        else:
            # A masked step repeats the previous step's output (zeros before the first).
            t_prev = tl.maximum(t - 1, 0)
            prev = tl.load(out_ptrs + t_prev * U, mask=tile_ok, other=0.0).to(tl.float32)
            prev = tl.where(t > 0, prev, 0.0)
            out = tl.where(live, h_new, prev)
    else:
        h_keep = h_new
        c_keep = c_new
        out = h_new
    tl.store(h_out_ptr + state, h_keep.to(dtype), mask=tile_ok)
    tl.store(c_out_ptr + state, c_keep.to(dtype), mask=tile_ok)
    tl.store(out_ptrs + t * U, out.to(dtype), mask=tile_ok)


# The step indices change every launch: specialising on them (a value of 1, or divisible by
# 16) would compile extra variants of the same kernel in the middle of a sequence.
@triton.jit(do_not_specialize=["t", "t_src"])
def _lstm_fwd_step_kernel(
    x_ptr,
    k_ptr,
    m_ptr,
    h_in_ptr,
    c_in_ptr,
    h_out_ptr,
    c_out_ptr,
    gates_ptr,
    cells_ptr,
    out_ptr,
    B,
    U,
    T,
    t,
    t_src,
    stride_xb,
    stride_xt,
    stride_xf,
    stride_kr,
    stride_kc,
    stride_mb,
    stride_mt,
    HAS_MASK: tl.constexpr,
    ZERO_OUTPUT: tl.constexpr,
    ACT: tl.constexpr,
    RACT: tl.constexpr,
    PRECISION: tl.constexpr,
    BLOCK_B: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    """One forward step `t` (processed order; `t_src` is its index in x_proj and mask).
    h/c states are (B, U) contiguous; gates (T, B, 4U), cells (T, B, U) and the output
    (B, T, U) are contiguous buffers of the launcher's."""
    rb = tl.program_id(0) * BLOCK_B + tl.arange(0, BLOCK_B)
    rn = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    _fwd_tile(
        x_ptr, k_ptr, m_ptr, h_in_ptr, c_in_ptr, h_out_ptr, c_out_ptr, gates_ptr, cells_ptr,
        out_ptr, rb, rn, B, U, T, t, t_src, stride_xb, stride_xt, stride_xf, stride_kr,
        stride_kc, stride_mb, stride_mt, HAS_MASK, ZERO_OUTPUT, ACT, RACT, PRECISION, BLOCK_B,
        BLOCK_N, BLOCK_K,
    )  # fmt: skip


@triton.jit
def _carry_tile(
    h0_ptr, c0_ptr, m_ptr, out_ptr, cells_ptr, h_prev_ptr, c_prev_ptr, rb, rn, B, U, T,
    stride_mb, stride_mt, HAS_MASK: tl.constexpr, REVERSE: tl.constexpr,
):  # fmt: skip
    """The states entering each step for the (rb, rn) tile: h_prev (B, T, U) at source time
    positions (paired with dx's rows for dU) and c_prev (T, B, U) in processed order. At a
    live step the output is the fresh h, so the hidden state is rebuilt from the outputs."""
    b_ok = rb < B
    tile_ok = b_ok[:, None] & (rn < U)[None, :]
    state = rb[:, None] * U + rn[None, :]
    h = tl.load(h0_ptr + state, mask=tile_ok, other=0.0)
    c = tl.load(c0_ptr + state, mask=tile_ok, other=0.0)
    for t in range(0, T):
        if REVERSE:
            t_src = T - 1 - t
        else:
            t_src = t
        tl.store(h_prev_ptr + rb[:, None] * T * U + t_src * U + rn[None, :], h, mask=tile_ok)
        tl.store(c_prev_ptr + t * B * U + state, c, mask=tile_ok)
        h_t = tl.load(out_ptr + rb[:, None] * T * U + t * U + rn[None, :], mask=tile_ok)
        c_t = tl.load(cells_ptr + t * B * U + state, mask=tile_ok)
        if HAS_MASK:
            live = tl.load(m_ptr + rb * stride_mb + t_src * stride_mt, mask=b_ok, other=0) != 0
            h = tl.where(live[:, None], h_t, h)
            c = tl.where(live[:, None], c_t, c)
        else:
            h = h_t
            c = c_t


@triton.jit
def _lstm_carry_kernel(
    h0_ptr,
    c0_ptr,
    m_ptr,
    out_ptr,
    cells_ptr,
    h_prev_ptr,
    c_prev_ptr,
    B,
    U,
    T,
    stride_mb,
    stride_mt,
    HAS_MASK: tl.constexpr,
    REVERSE: tl.constexpr,
    BLOCK_B: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    """`_carry_tile` over a (batch tile, unit tile) grid."""
    rb = tl.program_id(0) * BLOCK_B + tl.arange(0, BLOCK_B)
    rn = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    _carry_tile(h0_ptr, c0_ptr, m_ptr, out_ptr, cells_ptr, h_prev_ptr, c_prev_ptr, rb, rn, B, U,
                T, stride_mb, stride_mt, HAS_MASK, REVERSE)  # fmt: skip


@triton.jit
def _bwd_tile(
    k_ptr, m_ptr, gy_ptr, gates_ptr, cells_ptr, c_prev_ptr, dx_ptr, skip_in_ptr, dc_in_ptr,
    dprev_in_ptr, skip_out_ptr, dc_out_ptr, dprev_out_ptr, dh0_ptr, rb, rn, B, U, T, t, t_src,
    t_next_src, K_END, stride_kr, stride_kc, stride_mb, stride_mt, stride_gb, stride_gt,
    stride_gf,
    HAS_MASK: tl.constexpr, ZERO_OUTPUT: tl.constexpr, ACT: tl.constexpr, RACT: tl.constexpr,
    FINAL: tl.constexpr, PRECISION: tl.constexpr, BLOCK_B: tl.constexpr,
    BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):  # fmt: skip
    """Backward step `t` (processed order) for the (rb, rn) tile, after step t + 1 wrote
    dz[t + 1] into dx (B, T, 4U) at `t_next_src`. K_END is 4U, or 0 at the last step
    (nothing after it). State buffers (B, U): `skip` is the part of dh that bypassed masked
    steps (g_h at the start), `dc` the cell cotangent, `dprev` what a masked step's repeated
    output passes to the previous output. With FINAL it only writes dh0 = skip + dz[0] @ U^T."""
    b_ok = rb < B
    n_ok = rn < U
    tile_ok = b_ok[:, None] & n_ok[None, :]
    state = rb[:, None] * U + rn[None, :]

    # dh = skip + dz[t + 1] @ U^T, contracting over the 4U gate columns.
    dh = tl.load(skip_in_ptr + state, mask=tile_ok, other=0.0).to(tl.float32)
    dz_row = dx_ptr + rb[:, None] * T * 4 * U + t_next_src * 4 * U
    for j0 in range(0, K_END, BLOCK_K):
        rj = j0 + tl.arange(0, BLOCK_K)
        j_ok = rj < K_END
        dz = tl.load(dz_row + rj[None, :], mask=b_ok[:, None] & j_ok[None, :], other=0.0)
        w_t = tl.load(
            k_ptr + rn[None, :] * stride_kr + rj[:, None] * stride_kc,
            mask=j_ok[:, None] & n_ok[None, :],
            other=0.0,
        )
        dh = tl.dot(dz, w_t, dh, input_precision=PRECISION)

    dtype = dx_ptr.dtype.element_ty
    if FINAL:
        tl.store(dh0_ptr + state, dh.to(dtype), mask=tile_ok)
    else:
        gy_ptrs = gy_ptr + rb[:, None] * stride_gb + t * stride_gt + rn[None, :] * stride_gf
        dout = tl.load(gy_ptrs, mask=tile_ok, other=0.0).to(tl.float32)
        dc = tl.load(dc_in_ptr + state, mask=tile_ok, other=0.0).to(tl.float32)
        if HAS_MASK:
            live = tl.load(m_ptr + rb * stride_mb + t_src * stride_mt, mask=b_ok, other=0) != 0
            live = live[:, None]
            if not ZERO_OUTPUT:
                dprev = tl.load(dprev_in_ptr + state, mask=tile_ok, other=0.0).to(tl.float32)
                dout = dout + dprev
                tl.store(dprev_out_ptr + state, tl.where(live, 0.0, dout).to(dtype), mask=tile_ok)
            dh_new = tl.where(live, dout + dh, 0.0)
            skip = tl.where(live, 0.0, dh)
            dc_in = tl.where(live, dc, 0.0)
        else:
            dh_new = dout + dh
            skip = tl.zeros((BLOCK_B, BLOCK_N), dtype=tl.float32)
            dc_in = dc

        g_ptrs = gates_ptr + t * B * 4 * U + rb[:, None] * 4 * U + rn[None, :]
        gi = tl.load(g_ptrs, mask=tile_ok, other=0.0).to(tl.float32)
        gf = tl.load(g_ptrs + U, mask=tile_ok, other=0.0).to(tl.float32)
        gg = tl.load(g_ptrs + 2 * U, mask=tile_ok, other=0.0).to(tl.float32)
        go = tl.load(g_ptrs + 3 * U, mask=tile_ok, other=0.0).to(tl.float32)
        c = tl.load(cells_ptr + t * B * U + state, mask=tile_ok, other=0.0).to(tl.float32)
        c_prev = tl.load(c_prev_ptr + t * B * U + state, mask=tile_ok, other=0.0).to(tl.float32)
        act_c = activate(c, ACT)
        dc_new = dc_in + dh_new * go * _activation_grad(act_c, ACT)
        dz_i = dc_new * _activation_grad(gi, RACT) * gg
        dz_f = dc_new * _activation_grad(gf, RACT) * c_prev
        dz_g = dc_new * _activation_grad(gg, ACT) * gi
        dz_o = dh_new * _activation_grad(go, RACT) * act_c
        # A masked step passes dc through untouched (its dc_new is zero).
        if HAS_MASK:
            dc_next = tl.where(live, dc_new * gf, dc)
        else:
            dc_next = dc_new * gf

        dx_ptrs = dx_ptr + rb[:, None] * T * 4 * U + t_src * 4 * U + rn[None, :]
        tl.store(dx_ptrs, dz_i.to(dtype), mask=tile_ok)
        tl.store(dx_ptrs + U, dz_f.to(dtype), mask=tile_ok)
        tl.store(dx_ptrs + 2 * U, dz_g.to(dtype), mask=tile_ok)
        tl.store(dx_ptrs + 3 * U, dz_o.to(dtype), mask=tile_ok)
        tl.store(skip_out_ptr + state, skip.to(dtype), mask=tile_ok)
        tl.store(dc_out_ptr + state, dc_next.to(dtype), mask=tile_ok)


@triton.jit(do_not_specialize=["t", "t_src", "t_next_src", "K_END"])
def _lstm_bwd_step_kernel(
    k_ptr,
    m_ptr,
    gy_ptr,
    gates_ptr,
    cells_ptr,
    c_prev_ptr,
    dx_ptr,
    skip_in_ptr,
    dc_in_ptr,
    dprev_in_ptr,
    skip_out_ptr,
    dc_out_ptr,
    dprev_out_ptr,
    dh0_ptr,
    B,
    U,
    T,
    t,
    t_src,
    t_next_src,
    K_END,
    stride_kr,
    stride_kc,
    stride_mb,
    stride_mt,
    stride_gb,
    stride_gt,
    stride_gf,
    HAS_MASK: tl.constexpr,
    ZERO_OUTPUT: tl.constexpr,
    ACT: tl.constexpr,
    RACT: tl.constexpr,
    FINAL: tl.constexpr,
    PRECISION: tl.constexpr,
    BLOCK_B: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    """One backward step `t` (processed order) over a (batch tile, unit tile) grid: see
    `_bwd_tile`."""
    rb = tl.program_id(0) * BLOCK_B + tl.arange(0, BLOCK_B)
    rn = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    _bwd_tile(
        k_ptr, m_ptr, gy_ptr, gates_ptr, cells_ptr, c_prev_ptr, dx_ptr, skip_in_ptr, dc_in_ptr,
        dprev_in_ptr, skip_out_ptr, dc_out_ptr, dprev_out_ptr, dh0_ptr, rb, rn, B, U, T, t,
        t_src, t_next_src, K_END, stride_kr, stride_kc, stride_mb, stride_mt, stride_gb,
        stride_gt, stride_gf, HAS_MASK, ZERO_OUTPUT, ACT, RACT, FINAL, PRECISION, BLOCK_B,
        BLOCK_N, BLOCK_K,
    )  # fmt: skip


# ------------------------------------------------------------------- whole-sequence kernels
# One program owns BLOCK_B batch rows and every unit of them, so the recurrence needs no
# synchronisation between programs: the time loop runs inside the kernel. Within a program
# the threads that write the states of step t are not the ones that read them as the dot
# operand of step t + 1; `tl.debug_barrier` (bar.sync, which orders the block's global and
# shared memory accesses) separates the steps, and double-buffered states keep a step's
# writes off the buffer its other unit tiles still read.
@triton.jit
def _lstm_fwd_seq_kernel(
    x_ptr,
    k_ptr,
    m_ptr,
    h0_ptr,
    c0_ptr,
    state_ptr,
    gates_ptr,
    cells_ptr,
    out_ptr,
    B,
    U,
    T,
    stride_xb,
    stride_xt,
    stride_xf,
    stride_kr,
    stride_kc,
    stride_mb,
    stride_mt,
    HAS_MASK: tl.constexpr,
    ZERO_OUTPUT: tl.constexpr,
    REVERSE: tl.constexpr,
    ACT: tl.constexpr,
    RACT: tl.constexpr,
    PRECISION: tl.constexpr,
    BLOCK_B: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    """The whole forward sequence for BLOCK_B batch rows, the recurrent kernel streamed from
    L2 in (BLOCK_K, BLOCK_N) tiles at every step. The states live in state (4, B, U): h in
    buffers 0 and 1, c in buffers 2 and 3. The kernel first fills buffers T % 2 and
    2 + T % 2 from h0 / c0 (so re-running it, as autotuning does, gives the same result);
    step t reads parity (t + T) % 2 and writes the other, so the final states are always in
    buffers 0 (h) and 2 (c)."""
    rb = tl.program_id(0) * BLOCK_B + tl.arange(0, BLOCK_B)
    b_ok = rb < B
    h_buf_ptr = state_ptr
    c_buf_ptr = state_ptr + 2 * B * U
    first = (T % 2) * B * U
    for n0 in range(0, U, BLOCK_N):
        rn = n0 + tl.arange(0, BLOCK_N)
        ok = b_ok[:, None] & (rn < U)[None, :]
        state = rb[:, None] * U + rn[None, :]
        tl.store(h_buf_ptr + first + state, tl.load(h0_ptr + state, mask=ok), mask=ok)
        tl.store(c_buf_ptr + first + state, tl.load(c0_ptr + state, mask=ok), mask=ok)
    tl.debug_barrier()
    for t in range(0, T):
        if REVERSE:
            t_src = T - 1 - t
        else:
            t_src = t
        cur = ((t + T) % 2) * B * U
        nxt = ((t + T + 1) % 2) * B * U
        for n0 in range(0, U, BLOCK_N):
            rn = n0 + tl.arange(0, BLOCK_N)
            _fwd_tile(
                x_ptr, k_ptr, m_ptr, h_buf_ptr + cur, c_buf_ptr + cur, h_buf_ptr + nxt,
                c_buf_ptr + nxt, gates_ptr, cells_ptr, out_ptr, rb, rn, B, U, T, t, t_src,
                stride_xb, stride_xt, stride_xf, stride_kr, stride_kc, stride_mb, stride_mt,
                HAS_MASK, ZERO_OUTPUT, ACT, RACT, PRECISION, BLOCK_B, BLOCK_N, BLOCK_K,
            )  # fmt: skip
        tl.debug_barrier()


@triton.jit
def _lstm_bwd_seq_kernel(
    k_ptr,
    m_ptr,
    gy_ptr,
    gh_ptr,
    gc_ptr,
    h0_ptr,
    c0_ptr,
    out_ptr,
    gates_ptr,
    cells_ptr,
    h_prev_ptr,
    c_prev_ptr,
    dx_ptr,
    state_ptr,
    dh0_ptr,
    dc0_ptr,
    B,
    U,
    T,
    stride_kr,
    stride_kc,
    stride_mb,
    stride_mt,
    stride_gb,
    stride_gt,
    stride_gf,
    HAS_MASK: tl.constexpr,
    ZERO_OUTPUT: tl.constexpr,
    REVERSE: tl.constexpr,
    ACT: tl.constexpr,
    RACT: tl.constexpr,
    PRECISION: tl.constexpr,
    BLOCK_B: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    """Backpropagation through the whole sequence for BLOCK_B batch rows: the states entering
    each step (h_prev for dU, c_prev), then steps T-1 .. 0, then dh0 and dc0. `state_ptr`
    holds the double-buffered (skip, dc, dprev) states, (3, 2, B, U), filled here from g_h,
    g_c and zeros."""
    rb = tl.program_id(0) * BLOCK_B + tl.arange(0, BLOCK_B)
    b_ok = rb < B
    bu = B * U
    for n0 in range(0, U, BLOCK_N):
        rn = n0 + tl.arange(0, BLOCK_N)
        _carry_tile(h0_ptr, c0_ptr, m_ptr, out_ptr, cells_ptr, h_prev_ptr, c_prev_ptr, rb, rn, B,
                    U, T, stride_mb, stride_mt, HAS_MASK, REVERSE)  # fmt: skip
        ok = b_ok[:, None] & (rn < U)[None, :]
        state = rb[:, None] * U + rn[None, :]
        tl.store(state_ptr + state, tl.load(gh_ptr + state, mask=ok), mask=ok)
        tl.store(state_ptr + 2 * bu + state, tl.load(gc_ptr + state, mask=ok), mask=ok)
        zero = tl.zeros((BLOCK_B, BLOCK_N), dtype=state_ptr.dtype.element_ty)
        tl.store(state_ptr + 4 * bu + state, zero, mask=ok)
    tl.debug_barrier()
    for s in range(0, T):
        t = T - 1 - s
        if REVERSE:
            t_src = s
            t_next_src = s - 1
        else:
            t_src = t
            t_next_src = t + 1
        k_end = tl.where(s > 0, 4 * U, 0)  # the last step has no dz[t + 1]
        t_next_src = tl.where(s > 0, t_next_src, 0)
        cur = (s % 2) * bu
        nxt = ((s + 1) % 2) * bu
        for n0 in range(0, U, BLOCK_N):
            rn = n0 + tl.arange(0, BLOCK_N)
            _bwd_tile(
                k_ptr, m_ptr, gy_ptr, gates_ptr, cells_ptr, c_prev_ptr, dx_ptr, state_ptr + cur,
                state_ptr + 2 * bu + cur, state_ptr + 4 * bu + cur, state_ptr + nxt,
                state_ptr + 2 * bu + nxt, state_ptr + 4 * bu + nxt, dh0_ptr, rb, rn, B, U, T, t,
                t_src, t_next_src, k_end, stride_kr, stride_kc, stride_mb, stride_mt,
                stride_gb, stride_gt, stride_gf, HAS_MASK, ZERO_OUTPUT, ACT, RACT, False,
                PRECISION, BLOCK_B, BLOCK_N, BLOCK_K,
            )  # fmt: skip
        tl.debug_barrier()
    fin = (T % 2) * bu
    if REVERSE:
        t0_src = T - 1
    else:
        t0_src = 0
    for n0 in range(0, U, BLOCK_N):
        rn = n0 + tl.arange(0, BLOCK_N)
        _bwd_tile(
            k_ptr, m_ptr, gy_ptr, gates_ptr, cells_ptr, c_prev_ptr, dx_ptr, state_ptr + fin,
            state_ptr + 2 * bu + fin, state_ptr + 4 * bu + fin, state_ptr + fin,
            state_ptr + 2 * bu + fin, state_ptr + 4 * bu + fin, dh0_ptr, rb, rn, B, U, T, 0,
            t0_src, t0_src, 4 * U, stride_kr, stride_kc, stride_mb, stride_mt, stride_gb,
            stride_gt, stride_gf, HAS_MASK, ZERO_OUTPUT, ACT, RACT, True, PRECISION, BLOCK_B,
            BLOCK_N, BLOCK_K,
        )  # fmt: skip
        ok = b_ok[:, None] & (rn < U)[None, :]
        state = rb[:, None] * U + rn[None, :]
        tl.store(dc0_ptr + state, tl.load(state_ptr + 2 * bu + fin + state, mask=ok), mask=ok)


@triton.jit
def _lstm_fwd_resident_kernel(
    x_ptr,
    k_ptr,
    m_ptr,
    h0_ptr,
    c0_ptr,
    h_last_ptr,
    c_last_ptr,
    gates_ptr,
    cells_ptr,
    out_ptr,
    B,
    U,
    T,
    stride_xb,
    stride_xt,
    stride_xf,
    stride_kr,
    stride_kc,
    stride_mb,
    stride_mt,
    HAS_MASK: tl.constexpr,
    ZERO_OUTPUT: tl.constexpr,
    REVERSE: tl.constexpr,
    ACT: tl.constexpr,
    RACT: tl.constexpr,
    PRECISION: tl.constexpr,
    UNITS: tl.constexpr,
    BLOCK_B: tl.constexpr,
):
    """The whole forward sequence for BLOCK_B batch rows with U <= UNITS (a power of two):
    the four (UNITS, UNITS) gate blocks of the recurrent kernel are loaded once and stay on
    chip, and h, c and the previous output are loop-carried tiles; nothing but the step's
    input projection is read inside the time loop."""
    rb = tl.program_id(0) * BLOCK_B + tl.arange(0, BLOCK_B)
    rn = tl.arange(0, UNITS)
    b_ok = rb < B
    n_ok = rn < U
    tile_ok = b_ok[:, None] & n_ok[None, :]
    state = rb[:, None] * U + rn[None, :]
    w_ptrs = k_ptr + rn[:, None] * stride_kr + rn[None, :] * stride_kc
    w_ok = n_ok[:, None] & n_ok[None, :]
    gate_cols = U * stride_kc
    # Padded rows of the blocks are zero, so whatever the padded units of h hold is ignored.
    w_i = tl.load(w_ptrs, mask=w_ok, other=0.0)
    w_f = tl.load(w_ptrs + gate_cols, mask=w_ok, other=0.0)
    w_g = tl.load(w_ptrs + 2 * gate_cols, mask=w_ok, other=0.0)
    w_o = tl.load(w_ptrs + 3 * gate_cols, mask=w_ok, other=0.0)
    dtype = gates_ptr.dtype.element_ty
    h = tl.load(h0_ptr + state, mask=tile_ok, other=0.0).to(dtype)
    c = tl.load(c0_ptr + state, mask=tile_ok, other=0.0).to(tl.float32)
    prev = tl.zeros((BLOCK_B, UNITS), dtype=tl.float32)
    x_gate = U * stride_xf
    for t in range(0, T):
        if REVERSE:
            t_src = T - 1 - t
        else:
            t_src = t
        x_ptrs = x_ptr + rb[:, None] * stride_xb + t_src * stride_xt + rn[None, :] * stride_xf
        x_i = tl.load(x_ptrs, mask=tile_ok, other=0.0).to(tl.float32)
        x_f = tl.load(x_ptrs + x_gate, mask=tile_ok, other=0.0).to(tl.float32)
        x_g = tl.load(x_ptrs + 2 * x_gate, mask=tile_ok, other=0.0).to(tl.float32)
        x_o = tl.load(x_ptrs + 3 * x_gate, mask=tile_ok, other=0.0).to(tl.float32)
        gi = activate(tl.dot(h, w_i, x_i, input_precision=PRECISION), RACT)
        gf = activate(tl.dot(h, w_f, x_f, input_precision=PRECISION), RACT)
        gg = activate(tl.dot(h, w_g, x_g, input_precision=PRECISION), ACT)
        go = activate(tl.dot(h, w_o, x_o, input_precision=PRECISION), RACT)
        # Rounded to the storage dtype before use, as the fallback keeps its cells in it.
        c_new = (gf * c + gi * gg).to(dtype).to(tl.float32)
        h_new = go * activate(c_new, ACT)

        g_ptrs = gates_ptr + t * B * 4 * U + rb[:, None] * 4 * U + rn[None, :]
        tl.store(g_ptrs, gi.to(dtype), mask=tile_ok)
        tl.store(g_ptrs + U, gf.to(dtype), mask=tile_ok)
        tl.store(g_ptrs + 2 * U, gg.to(dtype), mask=tile_ok)
        tl.store(g_ptrs + 3 * U, go.to(dtype), mask=tile_ok)
        tl.store(cells_ptr + t * B * U + state, c_new.to(dtype), mask=tile_ok)
        if HAS_MASK:
            live = tl.load(m_ptr + rb * stride_mb + t_src * stride_mt, mask=b_ok, other=0) != 0
            live = live[:, None]
            h = tl.where(live, h_new.to(dtype), h)
            c = tl.where(live, c_new, c)
            if ZERO_OUTPUT:
                out = tl.where(live, h_new, 0.0)
            else:
                # A masked step repeats the previous step's output (zeros before the first).
                out = tl.where(live, h_new, prev)
        else:
            h = h_new.to(dtype)
            c = c_new
            out = h_new
        out = out.to(dtype).to(tl.float32)
        prev = out
        tl.store(out_ptr + rb[:, None] * T * U + t * U + rn[None, :], out.to(dtype), mask=tile_ok)
    tl.store(h_last_ptr + state, h, mask=tile_ok)
    tl.store(c_last_ptr + state, c.to(dtype), mask=tile_ok)


@triton.jit
def _lstm_bwd_resident_kernel(
    k_ptr,
    m_ptr,
    gy_ptr,
    gh_ptr,
    gc_ptr,
    h0_ptr,
    c0_ptr,
    out_ptr,
    gates_ptr,
    cells_ptr,
    h_prev_ptr,
    c_prev_ptr,
    dx_ptr,
    dh0_ptr,
    dc0_ptr,
    B,
    U,
    T,
    stride_kr,
    stride_kc,
    stride_mb,
    stride_mt,
    stride_gb,
    stride_gt,
    stride_gf,
    HAS_MASK: tl.constexpr,
    ZERO_OUTPUT: tl.constexpr,
    REVERSE: tl.constexpr,
    ACT: tl.constexpr,
    RACT: tl.constexpr,
    PRECISION: tl.constexpr,
    UNITS: tl.constexpr,
    BLOCK_B: tl.constexpr,
):
    """Backpropagation through the whole sequence for BLOCK_B batch rows with U <= UNITS: the
    transposed gate blocks of the recurrent kernel stay on chip, and dz[t + 1] and the
    (skip, dc, dprev) cotangents are loop-carried tiles. The states entering each step come
    first (`_carry_tile`: h_prev for dU, c_prev read back below)."""
    rb = tl.program_id(0) * BLOCK_B + tl.arange(0, BLOCK_B)
    rn = tl.arange(0, UNITS)
    b_ok = rb < B
    n_ok = rn < U
    tile_ok = b_ok[:, None] & n_ok[None, :]
    state = rb[:, None] * U + rn[None, :]
    _carry_tile(h0_ptr, c0_ptr, m_ptr, out_ptr, cells_ptr, h_prev_ptr, c_prev_ptr, rb, rn, B, U,
                T, stride_mb, stride_mt, HAS_MASK, REVERSE)  # fmt: skip
    # c_prev is read back below in a layout other than the one it was written in.
    tl.debug_barrier()
    # wt[j, n] = kernel[n, gate * U + j]: dh = dz @ kernel^T, one (UNITS, UNITS) block a gate.
    wt_ptrs = k_ptr + rn[None, :] * stride_kr + rn[:, None] * stride_kc
    w_ok = n_ok[:, None] & n_ok[None, :]
    gate_cols = U * stride_kc
    wt_i = tl.load(wt_ptrs, mask=w_ok, other=0.0)
    wt_f = tl.load(wt_ptrs + gate_cols, mask=w_ok, other=0.0)
    wt_g = tl.load(wt_ptrs + 2 * gate_cols, mask=w_ok, other=0.0)
    wt_o = tl.load(wt_ptrs + 3 * gate_cols, mask=w_ok, other=0.0)
    dtype = dx_ptr.dtype.element_ty
    skip = tl.load(gh_ptr + state, mask=tile_ok, other=0.0).to(tl.float32)
    dc = tl.load(gc_ptr + state, mask=tile_ok, other=0.0).to(tl.float32)
    dprev = tl.zeros((BLOCK_B, UNITS), dtype=tl.float32)
    # dz[t + 1] as stored (rounded to dtype): zero after the last step.
    dz_i = tl.zeros((BLOCK_B, UNITS), dtype=dtype)
    dz_f = tl.zeros((BLOCK_B, UNITS), dtype=dtype)
    dz_g = tl.zeros((BLOCK_B, UNITS), dtype=dtype)
    dz_o = tl.zeros((BLOCK_B, UNITS), dtype=dtype)
    for s in range(0, T):
        t = T - 1 - s
        if REVERSE:
            t_src = s
        else:
            t_src = t
        dh = tl.dot(dz_i, wt_i, skip, input_precision=PRECISION)
        dh = tl.dot(dz_f, wt_f, dh, input_precision=PRECISION)
        dh = tl.dot(dz_g, wt_g, dh, input_precision=PRECISION)
        dh = tl.dot(dz_o, wt_o, dh, input_precision=PRECISION)
        gy_ptrs = gy_ptr + rb[:, None] * stride_gb + t * stride_gt + rn[None, :] * stride_gf
        dout = tl.load(gy_ptrs, mask=tile_ok, other=0.0).to(tl.float32)
        if HAS_MASK:
            live = tl.load(m_ptr + rb * stride_mb + t_src * stride_mt, mask=b_ok, other=0) != 0
            live = live[:, None]
            if not ZERO_OUTPUT:
                dout = dout + dprev
                dprev = tl.where(live, 0.0, dout).to(dtype).to(tl.float32)
            dh_new = tl.where(live, dout + dh, 0.0)
            skip = tl.where(live, 0.0, dh)
            dc_in = tl.where(live, dc, 0.0)
        else:
            dh_new = dout + dh
            skip = tl.zeros((BLOCK_B, UNITS), dtype=tl.float32)
            dc_in = dc
        g_ptrs = gates_ptr + t * B * 4 * U + rb[:, None] * 4 * U + rn[None, :]
        gi = tl.load(g_ptrs, mask=tile_ok, other=0.0).to(tl.float32)
        gf = tl.load(g_ptrs + U, mask=tile_ok, other=0.0).to(tl.float32)
        gg = tl.load(g_ptrs + 2 * U, mask=tile_ok, other=0.0).to(tl.float32)
        go = tl.load(g_ptrs + 3 * U, mask=tile_ok, other=0.0).to(tl.float32)
        c = tl.load(cells_ptr + t * B * U + state, mask=tile_ok, other=0.0).to(tl.float32)
        c_prev = tl.load(c_prev_ptr + t * B * U + state, mask=tile_ok, other=0.0).to(tl.float32)
        act_c = activate(c, ACT)
        dc_new = dc_in + dh_new * go * _activation_grad(act_c, ACT)
        dz_i = (dc_new * _activation_grad(gi, RACT) * gg).to(dtype)
        dz_f = (dc_new * _activation_grad(gf, RACT) * c_prev).to(dtype)
        dz_g = (dc_new * _activation_grad(gg, ACT) * gi).to(dtype)
        dz_o = (dh_new * _activation_grad(go, RACT) * act_c).to(dtype)
        if HAS_MASK:
            dc = tl.where(live, dc_new * gf, dc)
        else:
            dc = dc_new * gf
        # The states round to dtype between steps, as the step kernels' buffers do.
        skip = skip.to(dtype).to(tl.float32)
        dc = dc.to(dtype).to(tl.float32)
        dx_ptrs = dx_ptr + rb[:, None] * T * 4 * U + t_src * 4 * U + rn[None, :]
        tl.store(dx_ptrs, dz_i, mask=tile_ok)
        tl.store(dx_ptrs + U, dz_f, mask=tile_ok)
        tl.store(dx_ptrs + 2 * U, dz_g, mask=tile_ok)
        tl.store(dx_ptrs + 3 * U, dz_o, mask=tile_ok)
    dh = tl.dot(dz_i, wt_i, skip, input_precision=PRECISION)
    dh = tl.dot(dz_f, wt_f, dh, input_precision=PRECISION)
    dh = tl.dot(dz_g, wt_g, dh, input_precision=PRECISION)
    dh = tl.dot(dz_o, wt_o, dh, input_precision=PRECISION)
    tl.store(dh0_ptr + state, dh.to(dtype), mask=tile_ok)
    tl.store(dc0_ptr + state, dc.to(dtype), mask=tile_ok)


@triton.jit
def _lstm_dkernel_kernel(
    h_prev_ptr,
    dz_ptr,
    dk_ptr,
    U,
    N,
    R,
    PRECISION: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    """dU (U, N) = h_prev^T @ dz over the R = B * T rows of h_prev (R, U) and dz (R, N)."""
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    m_ok = rm < U
    n_ok = rn < N
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for r0 in range(0, R, BLOCK_K):
        rr = r0 + tl.arange(0, BLOCK_K)
        r_ok = rr < R
        a = tl.load(
            h_prev_ptr + rr[None, :] * U + rm[:, None],
            mask=m_ok[:, None] & r_ok[None, :],
            other=0.0,
        )
        b = tl.load(
            dz_ptr + rr[:, None] * N + rn[None, :], mask=r_ok[:, None] & n_ok[None, :], other=0.0
        )
        acc = tl.dot(a, b, acc, input_precision=PRECISION)
    tl.store(
        dk_ptr + rm[:, None] * N + rn[None, :],
        acc.to(dk_ptr.dtype.element_ty),
        mask=m_ok[:, None] & n_ok[None, :],
    )


# ---------------------------------------------------------------------------------- configs
# Step kernels (forward and backward share them): a batch tile, a unit tile, a K tile. The
# first entry is what the interpreter (and KERATRON_TRITON_PIN=1) runs.
CONFIGS = [
    triton.Config({"BLOCK_B": 16, "BLOCK_N": 32, "BLOCK_K": 32}, num_warps=4, num_stages=2),
    triton.Config({"BLOCK_B": 16, "BLOCK_N": 64, "BLOCK_K": 32}, num_warps=4, num_stages=3),
    triton.Config({"BLOCK_B": 32, "BLOCK_N": 32, "BLOCK_K": 32}, num_warps=4, num_stages=3),
    triton.Config({"BLOCK_B": 64, "BLOCK_N": 32, "BLOCK_K": 32}, num_warps=8, num_stages=3),
]
# Float32 at IEEE precision (dots on the CUDA cores, operands through registers): the 32-deep
# 16x64 and 32x32 forward tiles spill 8-56 bytes per thread on sm_80, 16-deep they do not.
IEEE_FWD_CONFIGS = [
    CONFIGS[0],
    triton.Config({"BLOCK_B": 16, "BLOCK_N": 64, "BLOCK_K": 16}, num_warps=4, num_stages=3),
    triton.Config({"BLOCK_B": 32, "BLOCK_N": 32, "BLOCK_K": 16}, num_warps=4, num_stages=3),
    CONFIGS[3],
]
# The carry kernel is a memory-bound walk over time.
CARRY_CONFIGS = [
    triton.Config({"BLOCK_B": 16, "BLOCK_N": 32}, num_warps=4, num_stages=1),
    triton.Config({"BLOCK_B": 32, "BLOCK_N": 64}, num_warps=8, num_stages=1),
]
# dU: a (U, 4U) output with a long (B * T) reduction.
DKERNEL_CONFIGS = [
    triton.Config({"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 32}, num_warps=4, num_stages=2),
    triton.Config({"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32}, num_warps=4, num_stages=3),
    triton.Config({"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 32}, num_warps=8, num_stages=3),
]
# At IEEE the 32-deep 64x64 and 64x128 tiles spill 8-56 bytes (64x64 on sm_90 too); 16 deep.
IEEE_DKERNEL_CONFIGS = [
    DKERNEL_CONFIGS[0],
    triton.Config({"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 16}, num_warps=4, num_stages=3),
    triton.Config({"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 16}, num_warps=8, num_stages=3),
]

# The time-step arguments change on every launch of a sequence: the launch cache keys them by
# Triton's specialisation class, not by value.
_STEPS = ("t", "t_src", "t_next_src")
FWD_STEP = Kernel(
    _lstm_fwd_step_kernel, CONFIGS, ["B", "U"], "lstm", {"m_ptr": "u8"}, _STEPS[:2],
    ieee_configs=IEEE_FWD_CONFIGS,
)  # fmt: skip
BWD_STEP = Kernel(_lstm_bwd_step_kernel, CONFIGS, ["B", "U"], "lstm_grad", {"m_ptr": "u8"}, _STEPS)
CARRY = Kernel(_lstm_carry_kernel, CARRY_CONFIGS, ["B", "U"], "lstm_grad", {"m_ptr": "u8"})
DKERNEL = Kernel(
    _lstm_dkernel_kernel, DKERNEL_CONFIGS, ["U", "R"], "lstm_grad",
    ieee_configs=IEEE_DKERNEL_CONFIGS,
)  # fmt: skip

# Whole-sequence kernels: a program is BLOCK_B batch rows for the whole sequence, so the grid
# is cdiv(B, BLOCK_B) and a small BLOCK_B means more programs (SMs) at work. The streamed
# kernels tile units (BLOCK_N) and the contraction (BLOCK_K) inside each step.
SEQ_CONFIGS = [
    triton.Config({"BLOCK_B": 16, "BLOCK_N": 32, "BLOCK_K": 32}, num_warps=8, num_stages=1),
    triton.Config({"BLOCK_B": 16, "BLOCK_N": 64, "BLOCK_K": 32}, num_warps=16, num_stages=1),
    triton.Config({"BLOCK_B": 16, "BLOCK_N": 32, "BLOCK_K": 64}, num_warps=16, num_stages=1),
]
# Not pipelined (num_stages=1): inside the time loop, two-stage K loops spill on sm_90 at
# every one of these tiles (the forward by 16-64 B a thread). Wider tiles take 16 warps: at 8
# they reach 238-255 registers, and 4 warps spill (24 B) in the reversed, masked forward.
# One config: at 4 warps the backward spills from a 32-wide float32 tile on (sm_80), at 8 it
# does not (see RESIDENT_UNITS).
RESIDENT_CONFIGS = [triton.Config({"BLOCK_B": 16}, num_warps=8, num_stages=1)]
# Float32 at IEEE precision. Streamed: the 16x64x32 tile of 16 warps spills 40-152 bytes in
# the forward (8-24 in the backward) on sm_90, and the 64-deep one 8-280; the forward takes
# the 64-wide tile 16 deep and drops the 64-deep one; the backward's 32-deep tiles take 16
# deep at 8 warps (16x32) and 8 warps at 32 deep (16x64), the 64-deep one as it is.
# Resident: compiled for sm_90 with any strides (the AOT suite's form), the 16-wide forward
# at 8 warps (and the 32-wide one at 2 to 16) aborts the compiler (an assertion in LLVM's
# SLP vectorizer), so it takes 4 warps, and the 32-wide backward spills 64-456 bytes at any
# warp count: at IEEE the recurrent kernel stays on chip up to 16 units
# (RESIDENT_UNITS_IEEE).
IEEE_SEQ_FWD_CONFIGS = [
    SEQ_CONFIGS[0],
    triton.Config({"BLOCK_B": 16, "BLOCK_N": 64, "BLOCK_K": 16}, num_warps=16, num_stages=1),
]
IEEE_SEQ_BWD_CONFIGS = [
    triton.Config({"BLOCK_B": 16, "BLOCK_N": 32, "BLOCK_K": 16}, num_warps=8, num_stages=1),
    triton.Config({"BLOCK_B": 16, "BLOCK_N": 64, "BLOCK_K": 32}, num_warps=8, num_stages=1),
    SEQ_CONFIGS[2],
]
IEEE_RESIDENT_FWD_CONFIGS = [triton.Config({"BLOCK_B": 16}, num_warps=4, num_stages=1)]
FWD_SEQ = Kernel(
    _lstm_fwd_seq_kernel, SEQ_CONFIGS, ["B", "U"], "lstm", {"m_ptr": "u8"},
    ieee_configs=IEEE_SEQ_FWD_CONFIGS,
)  # fmt: skip
BWD_SEQ = Kernel(
    _lstm_bwd_seq_kernel, SEQ_CONFIGS, ["B", "U"], "lstm_grad", {"m_ptr": "u8"},
    ieee_configs=IEEE_SEQ_BWD_CONFIGS,
)  # fmt: skip
FWD_RESIDENT = Kernel(
    _lstm_fwd_resident_kernel, RESIDENT_CONFIGS, ["B", "U"], "lstm", {"m_ptr": "u8"},
    ieee_configs=IEEE_RESIDENT_FWD_CONFIGS,
)  # fmt: skip
BWD_RESIDENT = Kernel(
    _lstm_bwd_resident_kernel, RESIDENT_CONFIGS, ["B", "U"], "lstm_grad", {"m_ptr": "u8"}
)

# The largest unit count whose recurrent kernel stays on chip, per dtype: the widest padded
# width (UNITS, a power of two) whose resident kernels, forward and backward, compile for
# sm_90 and sm_80 within 255 registers, without spills and within shared memory (`make
# kernels-report`; the module docstring has the figures). RESIDENT_MIN_WIDTH is the
# narrowest: tl.dot's 16, and 32 for half types, whose 16-wide backward spills on sm_90.
RESIDENT_UNITS = {torch.float32: 32, torch.float16: 64, torch.bfloat16: 64}
RESIDENT_UNITS_IEEE = 16  # float32 at IEEE precision (see IEEE_RESIDENT_FWD_CONFIGS)
RESIDENT_MIN_WIDTH = {torch.float32: 16, torch.float16: 32, torch.bfloat16: 32}
# Above this many units the whole-sequence kernels' per-step stream of the recurrent kernel
# (4 * U^2 elements through one SM) outweighs the launch per step it saves, and the step
# kernels, which spread a step over (batch, unit) tiles, run instead.
PERSISTENT_MAX_UNITS = 1024


def resident_units(dtype: torch.dtype) -> int:
    """The most units the resident kernels run in `dtype`: RESIDENT_UNITS, and for float32 at
    IEEE precision (`dot_precision`) RESIDENT_UNITS_IEEE."""
    if dtype == torch.float32 and dot_precision(dtype) == "ieee":
        return RESIDENT_UNITS_IEEE
    return RESIDENT_UNITS.get(dtype, 0)


def plan(units: int, dtype: torch.dtype) -> str:
    """Which kernels run an LSTM of `units` in `dtype`: "resident" (one launch per sequence,
    recurrent kernel on chip), "streamed" (one launch per sequence, recurrent kernel read from
    L2 every step) or "steps" (a launch per time step).

    Example:
        >>> plan(32, torch.bfloat16)
        'resident'
    """
    if units <= resident_units(dtype):
        return "resident"
    return "streamed" if units <= PERSISTENT_MAX_UNITS else "steps"


def variants(units: int, dtype: torch.dtype) -> tuple:
    """The plans a route can run for `units` in `dtype`, the size's own (`plan`) first: the
    step plan runs any size, and inside a CUDA graph its launch per time step costs the host
    nothing while it spreads each step over the whole GPU.

    Example:
        >>> variants(128, torch.float32)
        ('streamed', 'steps')
    """
    own = plan(units, dtype)
    return (own,) if own == "steps" else (own, "steps")


def _plan_of(variant, units: int, dtype: torch.dtype) -> str:
    if variant is None:
        return plan(units, dtype)
    if variant not in variants(units, dtype):
        raise ValueError(
            f"lstm: plan {variant!r} cannot run {units} units in {dtype}; expected one of "
            f"{variants(units, dtype)}"
        )
    return variant


def _resident_width(units: int, dtype: torch.dtype) -> int:
    """The padded unit width of the resident kernels: a power of two, at least
    RESIDENT_MIN_WIDTH."""
    return max(RESIDENT_MIN_WIDTH[dtype], triton.next_power_of_2(units))


def _batch_grid(batch):
    return lambda meta: (triton.cdiv(batch, meta["BLOCK_B"]),)


# -------------------------------------------------------------------------------- launchers
def _check(op, tensors, activation, recurrent_activation):
    """The cases the kernels handle; NotImplementedError (-> fallback) for the rest."""
    for name in (activation, recurrent_activation):
        activation_code(op, name)
    ref = tensors[0]
    if ref.dtype not in FLOAT_DTYPES:
        raise NotImplementedError(
            f"{op}: dtype {ref.dtype} (expected float32, float16 or bfloat16)"
        )
    for t in tensors:
        if t.dtype != ref.dtype or t.device != ref.device:
            raise NotImplementedError(
                f"{op}: inputs must share one dtype and device; got {t.dtype} on {t.device} "
                f"and {ref.dtype} on {ref.device}"
            )
    # Meta tensors never launch for real: the ahead-of-time report records their launches.
    if not launchable(ref):
        raise NotImplementedError(f"{op}: CPU tensors need TRITON_INTERPRET=1")
    for t in tensors:
        if t.numel() > _MAX_ELEMENTS:
            raise NotImplementedError(f"{op}: more than 2**31 - 1 elements in one tensor")


def _mask_arg(mask, like):
    """The mask as bytes (same storage as the bool tensor) and its strides, or a dummy."""
    if mask is None:
        return like, 0, 0
    if mask.dtype != torch.bool or mask.device != like.device:
        raise NotImplementedError(f"mask must be bool on {like.device}; got {mask.dtype}")
    m = mask.view(torch.uint8)
    return m, m.stride(0), m.stride(1)


def _step_grid(batch, units):
    return lambda meta: (triton.cdiv(batch, meta["BLOCK_B"]), triton.cdiv(units, meta["BLOCK_N"]))


_FORWARD_CACHE, _BACKWARD_CACHE = route_cache(), route_cache()


def _cached_forward(batch, steps, units, streamed, relaunch):
    """The whole-sequence forward of one signature (`route_cache`): the resident kernel, which
    writes the final states into their own outputs, or the streamed one (`streamed`), whose
    (4, B, U) state buffer ends with h in buffer 0 and c in buffer 2. (Sizes go to `new_empty`
    as separate arguments: torch parses them faster than a tuple.)"""
    width = 4 * units

    def route(x_proj, h0, c0, kernel, mask):
        new = x_proj.new_empty
        all_h = new(batch, steps, units)
        gates, cells = new(steps, batch, width), new(steps, batch, units)
        m = x_proj if mask is None else mask.view(torch.uint8)
        h0, c0 = h0.contiguous(), c0.contiguous()
        if streamed:
            states = new(4, batch, units)
            relaunch(x_proj, kernel, m, h0, c0, states, gates, cells, all_h)
            return all_h, states[0], states[2], gates, cells
        h_last, c_last = new(batch, units), new(batch, units)
        relaunch(x_proj, kernel, m, h0, c0, h_last, c_last, gates, cells, all_h)
        return all_h, h_last, c_last, gates, cells

    return route


def forward_route(
    x_proj,
    h0,
    c0,
    kernel,
    mask,
    reverse,
    activation,
    recurrent_activation,
    zero_output_for_mask,
    variant=None,
):
    """The `lstm` primitive's impl on the GPU: same arguments and the same five outputs
    `(all_h, last_h, last_c, gates, cells)`, gates and cells time-major in processed
    order as the backward expects them. `variant` is the plan to run (one of `variants`),
    None the size's own (`plan`).

    Raises:
        NotImplementedError: for dtypes other than float32/float16/bfloat16, unknown
            activations, mixed dtypes/devices, or tensors too large for int32 offsets.
    """
    key, state = None, launch_state()
    if state is not None:
        # The variant asked for (None: the size's own plan, which the shapes fix) is part of
        # the key: a plan's cached launches never answer for another's.
        key = (tensor_key(x_proj), tensor_key(h0), tensor_key(c0), tensor_key(kernel),
               None if mask is None else tensor_key(mask), reverse, activation,
               recurrent_activation, zero_output_for_mask, dot_precision(x_proj.dtype),
               variant, state)  # fmt: skip
        cached = _FORWARD_CACHE.get(key)
        if cached is not None:
            return cached(x_proj, h0, c0, kernel, mask)
    mode = _plan_of(variant, h0.shape[-1], x_proj.dtype)
    _check("lstm", [x_proj, h0, c0, kernel], activation, recurrent_activation)
    batch, steps, width = x_proj.shape
    units = h0.shape[-1]
    if width != 4 * units or tuple(kernel.shape) != (units, width):
        raise NotImplementedError(
            f"lstm: expected x_proj (B, T, {4 * units}) and kernel ({units}, {4 * units}); "
            f"got {tuple(x_proj.shape)} and {tuple(kernel.shape)}"
        )
    new = x_proj.new_empty
    all_h = new((batch, steps, units))
    gates = new((steps, batch, width))
    cells = new((steps, batch, units))
    if steps == 0 or batch == 0 or units == 0:
        return all_h, new((batch, units)).copy_(h0), new((batch, units)).copy_(c0), gates, cells
    m, smb, smt = _mask_arg(mask, x_proj)
    args = dict(
        x_ptr=x_proj, k_ptr=kernel, m_ptr=m, gates_ptr=gates, cells_ptr=cells, out_ptr=all_h,
        B=batch, U=units, T=steps,
        stride_xb=x_proj.stride(0), stride_xt=x_proj.stride(1), stride_xf=x_proj.stride(2),
        stride_kr=kernel.stride(0), stride_kc=kernel.stride(1), stride_mb=smb, stride_mt=smt,
        HAS_MASK=mask is not None, ZERO_OUTPUT=bool(zero_output_for_mask),
        ACT=activation_code("lstm", activation),
        RACT=activation_code("lstm", recurrent_activation),
        PRECISION=dot_precision(x_proj.dtype),
    )  # fmt: skip
    if mode == "resident":
        h_last, c_last = new((batch, units)), new((batch, units))
        relaunch = FWD_RESIDENT.launch(
            _batch_grid(batch), h0_ptr=h0.contiguous(), c0_ptr=c0.contiguous(),
            h_last_ptr=h_last, c_last_ptr=c_last, REVERSE=bool(reverse),
            UNITS=_resident_width(units, x_proj.dtype), **args,
        )  # fmt: skip
        if key is not None and relaunch is not None:
            _FORWARD_CACHE[key] = _cached_forward(batch, steps, units, False, relaunch())
        return all_h, h_last, c_last, gates, cells
    if mode == "streamed":
        states = new((4, batch, units))  # h, then c, each double-buffered
        relaunch = FWD_SEQ.launch(
            _batch_grid(batch), h0_ptr=h0.contiguous(), c0_ptr=c0.contiguous(), state_ptr=states,
            REVERSE=bool(reverse), **args,
        )  # fmt: skip
        if key is not None and relaunch is not None:
            _FORWARD_CACHE[key] = _cached_forward(batch, steps, units, True, relaunch())
        return all_h, states[0], states[2], gates, cells
    # Double-buffered states: step t reads buffer t % 2 and writes the other one.
    h_buf = new((2, batch, units))
    c_buf = new((2, batch, units))
    h_buf[0].copy_(h0)
    c_buf[0].copy_(c0)
    grid = _step_grid(batch, units)
    for t in range(steps):
        t_src = steps - 1 - t if reverse else t
        cur, nxt = t % 2, (t + 1) % 2
        FWD_STEP.launch(
            grid, h_in_ptr=h_buf[cur], c_in_ptr=c_buf[cur], h_out_ptr=h_buf[nxt],
            c_out_ptr=c_buf[nxt], t=t, t_src=t_src, **args,
        )  # fmt: skip
    last = steps % 2
    return all_h, h_buf[last], c_buf[last], gates, cells


def backward_route(
    g_all,
    g_h,
    g_c,
    h0,
    c0,
    kernel,
    mask,
    all_h,
    gates,
    cells,
    reverse,
    activation,
    recurrent_activation,
    zero_output_for_mask,
    variant=None,
):
    """The `lstm_grad` primitive's impl on the GPU: returns `(dx_proj, dh0, dc0, dkernel)`
    with dx_proj (B, T, 4U) in source time order; `variant` as in `forward_route`.

    Raises:
        NotImplementedError: as `forward_route`.
    """
    tensors = [g_all, g_h, g_c, h0, c0, kernel, all_h, gates, cells]
    key, state = None, launch_state()
    if state is not None:
        key = tuple(map(tensor_key, tensors))
        key += (None if mask is None else tensor_key(mask), reverse, activation)
        key += (recurrent_activation, zero_output_for_mask, dot_precision(gates.dtype), variant)
        key += (state,)
        cached = _BACKWARD_CACHE.get(key)
        if cached is not None:
            return cached(*tensors, mask)
    mode = _plan_of(variant, h0.shape[-1], gates.dtype)
    _check("lstm_grad", tensors, activation, recurrent_activation)
    steps, batch, width = gates.shape
    units = h0.shape[-1]
    if width != 4 * units or tuple(kernel.shape) != (units, width):
        raise NotImplementedError(
            f"lstm_grad: expected gates (T, B, {4 * units}) and kernel ({units}, {4 * units}); "
            f"got {tuple(gates.shape)} and {tuple(kernel.shape)}"
        )
    # The launcher's own layouts (what forward_route returns); other producers get copies.
    all_h, gates, cells = all_h.contiguous(), gates.contiguous(), cells.contiguous()
    new = gates.new_empty
    dx = new((batch, steps, width))
    if steps == 0 or batch == 0 or units == 0:
        dh0, dc0 = new((batch, units)).copy_(g_h), new((batch, units)).copy_(g_c)
        return dx, dh0, dc0, kernel.new_zeros(kernel.shape)
    m, smb, smt = _mask_arg(mask, gates)
    precision = dot_precision(gates.dtype)

    h_prev = new((batch, steps, units))
    c_prev = new((steps, batch, units))
    if mode != "steps":
        dh0, dc0 = new((batch, units)), new((batch, units))
        args = dict(
            k_ptr=kernel, m_ptr=m, gy_ptr=g_all, gh_ptr=g_h.contiguous(), gc_ptr=g_c.contiguous(),
            h0_ptr=h0.contiguous(), c0_ptr=c0.contiguous(), out_ptr=all_h, gates_ptr=gates,
            cells_ptr=cells, h_prev_ptr=h_prev, c_prev_ptr=c_prev, dx_ptr=dx, dh0_ptr=dh0,
            dc0_ptr=dc0, B=batch, U=units, T=steps,
            stride_kr=kernel.stride(0), stride_kc=kernel.stride(1), stride_mb=smb, stride_mt=smt,
            stride_gb=g_all.stride(0), stride_gt=g_all.stride(1), stride_gf=g_all.stride(2),
            HAS_MASK=mask is not None, ZERO_OUTPUT=bool(zero_output_for_mask),
            REVERSE=bool(reverse), ACT=activation_code("lstm_grad", activation),
            RACT=activation_code("lstm_grad", recurrent_activation), PRECISION=precision,
        )  # fmt: skip
        if mode == "resident":
            first = BWD_RESIDENT.launch(
                _batch_grid(batch), UNITS=_resident_width(units, gates.dtype), **args
            )
        else:
            first = BWD_SEQ.launch(_batch_grid(batch), state_ptr=new((3, 2, batch, units)), **args)
        dkernel, second = _dkernel(h_prev, dx, units, width, precision)
        if key is not None and first is not None and second is not None:
            streamed = mode == "streamed"
            _BACKWARD_CACHE[key] = _cached_backward(
                steps, batch, units, streamed, first(), second()
            )
        return dx, dh0, dc0, dkernel

    # Double-buffered (skip, dc, dprev) states; see the backward step kernel.
    skip, dc, dprev = new((2, batch, units)), new((2, batch, units)), new((2, batch, units))
    skip[0].copy_(g_h)
    dc[0].copy_(g_c)
    dprev[0].zero_()
    grid = _step_grid(batch, units)
    CARRY.launch(
        grid, h0_ptr=h0.contiguous(), c0_ptr=c0.contiguous(), m_ptr=m, out_ptr=all_h,
        cells_ptr=cells, h_prev_ptr=h_prev, c_prev_ptr=c_prev, B=batch, U=units, T=steps,
        stride_mb=smb, stride_mt=smt, HAS_MASK=mask is not None, REVERSE=bool(reverse),
    )  # fmt: skip

    dh0 = new((batch, units))
    args = dict(
        k_ptr=kernel, m_ptr=m, gy_ptr=g_all, gates_ptr=gates, cells_ptr=cells,
        c_prev_ptr=c_prev, dx_ptr=dx, dh0_ptr=dh0, B=batch, U=units, T=steps,
        stride_kr=kernel.stride(0), stride_kc=kernel.stride(1), stride_mb=smb, stride_mt=smt,
        stride_gb=g_all.stride(0), stride_gt=g_all.stride(1), stride_gf=g_all.stride(2),
        HAS_MASK=mask is not None, ZERO_OUTPUT=bool(zero_output_for_mask),
        ACT=activation_code("lstm_grad", activation),
        RACT=activation_code("lstm_grad", recurrent_activation),
        PRECISION=precision,
    )  # fmt: skip
    src = (lambda t: steps - 1 - t) if reverse else (lambda t: t)
    # Steps T-1 .. 0, then a FINAL launch for dh0 = skip + dz[0] @ U^T.
    for t in range(steps - 1, -2, -1):
        cur, nxt = (steps - 1 - t) % 2, (steps - t) % 2
        has_next = t + 1 < steps
        BWD_STEP.launch(
            grid,
            skip_in_ptr=skip[cur], dc_in_ptr=dc[cur], dprev_in_ptr=dprev[cur],
            skip_out_ptr=skip[nxt], dc_out_ptr=dc[nxt], dprev_out_ptr=dprev[nxt],
            t=max(t, 0), t_src=src(max(t, 0)), t_next_src=src(t + 1) if has_next else 0,
            K_END=width if has_next else 0, FINAL=t < 0, **args,
        )  # fmt: skip
    dc0 = dc[steps % 2]  # written by step 0

    return dx, dh0, dc0, _dkernel(h_prev, dx, units, width, precision)[0]


def _cached_backward(steps, batch, units, streamed, first, second):
    """The whole-sequence backward of one signature (`route_cache`): the resident or streamed
    kernel (`first`), then the recurrent kernel's gradient (`second`)."""

    def route(g_all, g_h, g_c, h0, c0, kernel, all_h, gates, cells, mask):
        # As the uncached route: the launcher's own layouts, copies of others.
        all_h, gates, cells = all_h.contiguous(), gates.contiguous(), cells.contiguous()
        new = gates.new_empty
        dx = new((batch, steps, 4 * units))
        h_prev = new((batch, steps, units))
        c_prev = new((steps, batch, units))
        dh0, dc0 = new((batch, units)), new((batch, units))
        m = gates if mask is None else mask.view(torch.uint8)
        ptrs = (kernel, m, g_all, g_h.contiguous(), g_c.contiguous(), h0.contiguous())
        ptrs += (c0.contiguous(), all_h, gates, cells, h_prev, c_prev, dx)
        if streamed:  # its state buffer comes between dx and dh0
            first(*ptrs, new((3, 2, batch, units)), dh0, dc0)
        else:
            first(*ptrs, dh0, dc0)
        dkernel = dx.new_empty((units, 4 * units))
        second(h_prev, dx, dkernel)
        return dx, dh0, dc0, dkernel

    return route


def _dkernel(h_prev, dx, units, width, precision):
    """dU = h_prev^T @ dz over all B * T rows: one launch over (U, 4U) output tiles. Returns
    dU and the launch's relaunch maker (`Kernel.launch`)."""
    dkernel = dx.new_empty((units, width))

    def grid(meta):
        return (triton.cdiv(units, meta["BLOCK_M"]), triton.cdiv(width, meta["BLOCK_N"]))

    relaunch = DKERNEL.launch(
        grid, h_prev_ptr=h_prev, dz_ptr=dx, dk_ptr=dkernel, U=units, N=width,
        R=h_prev.shape[0] * h_prev.shape[1], PRECISION=precision,
    )  # fmt: skip
    return dkernel, relaunch


# ------------------------------------------------------------------------ ahead of time
def aot_specs():
    """(kernel_name, jit_function, signature, constexprs, num_warps, num_stages) for every
    config of every kernel here, in the representative case (masked, tanh / sigmoid, fp32
    with TF32 dots and, at the IEEE configs, with IEEE ones: `..._ieee`), plus fp16 and bf16
    step kernels at the first config.

    Example:
        >>> name, fn, signature, constexprs, num_warps, num_stages = aot_specs()[0]
    """
    acts = dict(ACT=activation_code("lstm", "tanh"), RACT=activation_code("lstm", "sigmoid"))
    step = dict(HAS_MASK=True, ZERO_OUTPUT=False, **acts)
    specs = []
    f32 = torch.float32
    for precision, tag in FLOAT32_PRECISIONS:
        for i, cfg in enumerate(FWD_STEP.configs_at(f32, precision)):
            consts = dict(step, PRECISION=precision)
            specs.append(FWD_STEP.aot_spec(f"lstm_fwd_step_fp32{tag}_{i}", f32, consts, cfg))
        for i, cfg in enumerate(BWD_STEP.configs_at(f32, precision)):
            for final in (False, True):
                kind = "final" if final else "step"
                consts = dict(step, PRECISION=precision, FINAL=final)
                label = f"lstm_bwd_{kind}_fp32{tag}_{i}"
                specs.append(BWD_STEP.aot_spec(label, f32, consts, cfg))
    for dtype in (torch.float16, torch.bfloat16):
        dt, half = TRITON_TYPES[dtype], dict(step, PRECISION="ieee")
        specs.append(FWD_STEP.aot_spec(f"lstm_fwd_step_{dt}_0", dtype, half, CONFIGS[0]))
        consts = dict(half, FINAL=False)
        specs.append(BWD_STEP.aot_spec(f"lstm_bwd_step_{dt}_0", dtype, consts, CONFIGS[0]))
    for i, cfg in enumerate(CARRY_CONFIGS):
        consts = dict(HAS_MASK=True, REVERSE=True)
        specs.append(CARRY.aot_spec(f"lstm_carry_fp32_{i}", torch.float32, consts, cfg))
    seq = dict(step, REVERSE=True)
    for precision, tag in FLOAT32_PRECISIONS:
        for i, cfg in enumerate(DKERNEL.configs_at(f32, precision)):
            consts = dict(PRECISION=precision)
            specs.append(DKERNEL.aot_spec(f"lstm_dkernel_fp32{tag}_{i}", f32, consts, cfg))
        consts = dict(seq, PRECISION=precision)
        for kernel, kind in ((FWD_SEQ, "fwd"), (BWD_SEQ, "bwd")):
            for i, cfg in enumerate(kernel.configs_at(f32, precision)):
                label = f"lstm_{kind}_seq_fp32{tag}_{i}"
                specs.append(kernel.aot_spec(label, f32, consts, cfg))
    for dtype in (torch.float16, torch.bfloat16):
        dt, consts = TRITON_TYPES[dtype], dict(seq, PRECISION="ieee")
        specs.append(FWD_SEQ.aot_spec(f"lstm_fwd_seq_{dt}_0", dtype, consts, SEQ_CONFIGS[0]))
        specs.append(BWD_SEQ.aot_spec(f"lstm_bwd_seq_{dt}_0", dtype, consts, SEQ_CONFIGS[0]))
    # The resident kernels at the narrowest and the widest width each dtype (and float32 at
    # each precision) runs them at.
    cases = [(f32, "tf32", RESIDENT_UNITS[f32], ""), (f32, "ieee", RESIDENT_UNITS_IEEE, "_ieee")]
    cases += [(dtype, "ieee", RESIDENT_UNITS[dtype], "") for dtype in FLOAT_DTYPES[1:]]
    for dtype, precision, widest, tag in cases:
        dt = TRITON_TYPES[dtype]
        for width in sorted({RESIDENT_MIN_WIDTH[dtype], _resident_width(widest, dtype)}):
            consts = dict(seq, PRECISION=precision, UNITS=width)
            for kernel, kind in ((FWD_RESIDENT, "fwd"), (BWD_RESIDENT, "bwd")):
                label = f"lstm_{kind}_resident_{dt}{tag}_u{width}"
                (cfg,) = kernel.configs_at(dtype, precision)
                specs.append(kernel.aot_spec(label, dtype, consts, cfg))
    return specs
