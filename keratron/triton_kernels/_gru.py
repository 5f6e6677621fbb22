"""Triton kernels for the GRU recurrence (`gru`) and its backpropagation through time
(`gru_grad`), in Keras's gate order (z, r, h), with `reset_after` both ways.

With the recurrent kernel resident (units <= RESIDENT_UNITS: 64 in every dtype) the forward
is one launch per sequence. A program owns BLOCK_B = 16 batch rows and every unit of them (grid
cdiv(B, 16)), so the recurrence needs no synchronisation between programs. The three (W, W)
gate blocks of the recurrent kernel (W = units padded to a power of two) are loaded once
before the time loop and stay on chip (3 * W^2 * s bytes: 48 KiB at W = 64 in float32, 24 KiB
in bfloat16); h and the previous output are loop-carried register tiles. Per step the
kernel reads the input projection, does three (16, W) x (W, W) dots and the gate math:

    reset_after=True:  z, r = ract(x_zr + h @ U_zr + b_zr);  a = h @ U_h + b_h
                       hh = act(x_h + r * a)
    reset_after=False: z, r = ract(x_zr + h @ U_zr);  a = r * h;  hh = act(x_h + a @ U_h)
    h_new = z * h + (1 - z) * hh

and writes the gates (z, r, hh), the candidate term `a` (the primitive's `aux`) and the output.
The backward is two launches: one kernel rebuilds the states entering each step, then runs
steps T-1 .. 0 with the transposed gate blocks on chip (`dh = dh_new * z + drec @ U^T`, plus
`d(r * h) * r` with reset_after=False) and writes dx and dh0; a second launch reduces
`dU = [h_prev, a']^T @ drec` over all B * T rows (a' = h_prev, or `a` = r * h for the
candidate block with reset_after=False) and the recurrent bias's gradient (its column sums).

Two plans, picked by `plan(units, dtype)`:

- "resident" (above).
- "streamed" (up to PERSISTENT_MAX_UNITS = 1024 units): the same ownership and launches, but
  the recurrent kernel is read from L2 in (BLOCK_K, BLOCK_N) tiles at every step (3 * U^2 * s
  bytes a program a step), looping over unit tiles; the states live in the program's rows of
  double-buffered (B, U) buffers, and `tl.debug_barrier` separates the passes over unit tiles
  that depend on every unit of the previous one: one a step in the forward, two with
  reset_after=False (r * h before its product with U_h); two a step in the backward (the
  step's cotangents, then dh = ... + drec @ U^T), three with reset_after=False (d(r * h)
  contracts dx_h over every unit in between). At most 128 registers and no spills (8 or 16
  warps, num_stages=1).

More units raise NotImplementedError and the reference runs.

The resident limit is the AOT report's (sm_90 and sm_80, 8 warps, `make kernels-report`): at
W = 64 the resident kernels take at most 150 registers (float32) / 142 (half types), no spills, and
60 KiB / 30 KiB of shared memory; at W = 128 every dtype's backward spills (48-144 B/thread)
and float32 asks for 200-216 KiB of shared memory, over sm_80's 163 KiB a block.

Budget per step (B batch, U units, s bytes per element): forward 6 * B * U^2 FLOPs for the
recurrent matmuls plus ~20 * B * U elementwise; it reads 3 * B * U * s of input projection and
writes 5 * B * U * s (gates, aux, output). The backward step is again 6 * B * U^2 FLOPs, reads
~6 * B * U * s (gates, aux, h_prev, g_all) and writes 6 * B * U * s (dx and drec); dU is
6 * T * B * U^2 FLOPs in one launch.
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
)
from keratron.triton_kernels._lstm import _activation_grad, _check, _mask_arg

__all__ = ["forward_route", "backward_route", "plan", "aot_specs"]


# --------------------------------------------------------------------------------- kernels
@triton.jit
def _gru_fwd_resident_kernel(
    x_ptr,
    k_ptr,
    b_ptr,
    m_ptr,
    h0_ptr,
    h_last_ptr,
    gates_ptr,
    aux_ptr,
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
    HAS_BIAS: tl.constexpr,
    HAS_MASK: tl.constexpr,
    ZERO_OUTPUT: tl.constexpr,
    REVERSE: tl.constexpr,
    RESET_AFTER: tl.constexpr,
    ACT: tl.constexpr,
    RACT: tl.constexpr,
    PRECISION: tl.constexpr,
    UNITS: tl.constexpr,
    BLOCK_B: tl.constexpr,
):
    """The whole forward sequence for BLOCK_B batch rows with U <= UNITS (a power of two):
    the three (UNITS, UNITS) gate blocks of the recurrent kernel are loaded once and stay on
    chip; h and the previous output are loop-carried tiles. gates (T, B, 3U) and aux (T, B, U)
    are time-major in processed order, the output (B, T, U) in processed order."""
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
    w_z = tl.load(w_ptrs, mask=w_ok, other=0.0)
    w_r = tl.load(w_ptrs + gate_cols, mask=w_ok, other=0.0)
    w_h = tl.load(w_ptrs + 2 * gate_cols, mask=w_ok, other=0.0)
    if HAS_BIAS:
        b_z = tl.load(b_ptr + rn, mask=n_ok, other=0.0).to(tl.float32)[None, :]
        b_r = tl.load(b_ptr + U + rn, mask=n_ok, other=0.0).to(tl.float32)[None, :]
        b_h = tl.load(b_ptr + 2 * U + rn, mask=n_ok, other=0.0).to(tl.float32)[None, :]
    else:
        b_z = tl.zeros((1, UNITS), dtype=tl.float32)
        b_r = tl.zeros((1, UNITS), dtype=tl.float32)
        b_h = tl.zeros((1, UNITS), dtype=tl.float32)
    dtype = gates_ptr.dtype.element_ty
    h = tl.load(h0_ptr + state, mask=tile_ok, other=0.0).to(tl.float32)
    prev = tl.zeros((BLOCK_B, UNITS), dtype=tl.float32)
    x_gate = U * stride_xf
    for t in range(0, T):
        if REVERSE:
            t_src = T - 1 - t
        else:
            t_src = t
        x_ptrs = x_ptr + rb[:, None] * stride_xb + t_src * stride_xt + rn[None, :] * stride_xf
        x_z = tl.load(x_ptrs, mask=tile_ok, other=0.0).to(tl.float32)
        x_r = tl.load(x_ptrs + x_gate, mask=tile_ok, other=0.0).to(tl.float32)
        x_h = tl.load(x_ptrs + 2 * x_gate, mask=tile_ok, other=0.0).to(tl.float32)
        h_op = h.to(dtype)
        z = activate(tl.dot(h_op, w_z, x_z + b_z, input_precision=PRECISION), RACT)
        r = activate(tl.dot(h_op, w_r, x_r + b_r, input_precision=PRECISION), RACT)
        if RESET_AFTER:
            # The recurrent candidate term, rounded as the fallback stores it.
            a = tl.dot(h_op, w_h, b_h + tl.zeros((BLOCK_B, UNITS), dtype=tl.float32),
                       input_precision=PRECISION).to(dtype)  # fmt: skip
            hh = activate(x_h + r * a.to(tl.float32), ACT)
        else:
            a = (r * h).to(dtype)
            hh = activate(tl.dot(a, w_h, x_h, input_precision=PRECISION), ACT)
        h_new = hh + z * (h - hh)

        g_ptrs = gates_ptr + t * B * 3 * U + rb[:, None] * 3 * U + rn[None, :]
        tl.store(g_ptrs, z.to(dtype), mask=tile_ok)
        tl.store(g_ptrs + U, r.to(dtype), mask=tile_ok)
        tl.store(g_ptrs + 2 * U, hh.to(dtype), mask=tile_ok)
        tl.store(aux_ptr + t * B * U + state, a, mask=tile_ok)
        if HAS_MASK:
            live = tl.load(m_ptr + rb * stride_mb + t_src * stride_mt, mask=b_ok, other=0) != 0
            live = live[:, None]
            h = tl.where(live, h_new, h)
            if ZERO_OUTPUT:
                out = tl.where(live, h_new, 0.0)
            else:
                # A masked step repeats the previous step's output (zeros before the first).
                out = tl.where(live, h_new, prev)
        else:
            h = h_new
            out = h_new
        # The state and the output round to the storage dtype between steps, as stored.
        h = h.to(dtype).to(tl.float32)
        prev = out.to(dtype).to(tl.float32)
        tl.store(out_ptr + rb[:, None] * T * U + t * U + rn[None, :], out.to(dtype), mask=tile_ok)
    tl.store(h_last_ptr + state, h.to(dtype), mask=tile_ok)


@triton.jit
def _gru_bwd_resident_kernel(
    k_ptr,
    m_ptr,
    gy_ptr,
    gh_ptr,
    h0_ptr,
    out_ptr,
    gates_ptr,
    aux_ptr,
    h_prev_ptr,
    drec_ptr,
    dx_ptr,
    dh0_ptr,
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
    RESET_AFTER: tl.constexpr,
    ACT: tl.constexpr,
    RACT: tl.constexpr,
    PRECISION: tl.constexpr,
    UNITS: tl.constexpr,
    BLOCK_B: tl.constexpr,
):
    """Backpropagation through the whole sequence for BLOCK_B batch rows with U <= UNITS.
    First the states entering each step, h_prev (T, B, U) in processed order (at a live step
    the output is the fresh h); then steps T-1 .. 0 with the transposed gate blocks of the
    recurrent kernel on chip. Writes dx (B, T, 3U) in source order, drec (T, B, 3U), the
    cotangents of the recurrent products (`h @ U_zr` and `h @ U_h` or `(r * h) @ U_h`) in
    processed order for dU, and dh0."""
    rb = tl.program_id(0) * BLOCK_B + tl.arange(0, BLOCK_B)
    rn = tl.arange(0, UNITS)
    b_ok = rb < B
    n_ok = rn < U
    tile_ok = b_ok[:, None] & n_ok[None, :]
    state = rb[:, None] * U + rn[None, :]
    h = tl.load(h0_ptr + state, mask=tile_ok, other=0.0)
    for t in range(0, T):
        tl.store(h_prev_ptr + t * B * U + state, h, mask=tile_ok)
        h_t = tl.load(out_ptr + rb[:, None] * T * U + t * U + rn[None, :], mask=tile_ok)
        if HAS_MASK:
            if REVERSE:
                t_src = T - 1 - t
            else:
                t_src = t
            live = tl.load(m_ptr + rb * stride_mb + t_src * stride_mt, mask=b_ok, other=0) != 0
            h = tl.where(live[:, None], h_t, h)
        else:
            h = h_t
    # h_prev is read back below by threads other than the ones that wrote it.
    tl.debug_barrier()
    # wt[j, n] = kernel[n, gate * U + j]: dh = drec @ kernel^T, one (UNITS, UNITS) block a gate.
    wt_ptrs = k_ptr + rn[None, :] * stride_kr + rn[:, None] * stride_kc
    w_ok = n_ok[:, None] & n_ok[None, :]
    gate_cols = U * stride_kc
    wt_z = tl.load(wt_ptrs, mask=w_ok, other=0.0)
    wt_r = tl.load(wt_ptrs + gate_cols, mask=w_ok, other=0.0)
    wt_h = tl.load(wt_ptrs + 2 * gate_cols, mask=w_ok, other=0.0)
    dtype = dx_ptr.dtype.element_ty
    dh = tl.load(gh_ptr + state, mask=tile_ok, other=0.0).to(tl.float32)
    dprev = tl.zeros((BLOCK_B, UNITS), dtype=tl.float32)
    for s in range(0, T):
        t = T - 1 - s
        if REVERSE:
            t_src = s
        else:
            t_src = t
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
        else:
            dh_new = dout + dh
            skip = tl.zeros((BLOCK_B, UNITS), dtype=tl.float32)
        g_ptrs = gates_ptr + t * B * 3 * U + rb[:, None] * 3 * U + rn[None, :]
        z = tl.load(g_ptrs, mask=tile_ok, other=0.0).to(tl.float32)
        r = tl.load(g_ptrs + U, mask=tile_ok, other=0.0).to(tl.float32)
        hh = tl.load(g_ptrs + 2 * U, mask=tile_ok, other=0.0).to(tl.float32)
        a = tl.load(aux_ptr + t * B * U + state, mask=tile_ok, other=0.0).to(tl.float32)
        hp = tl.load(h_prev_ptr + t * B * U + state, mask=tile_ok, other=0.0).to(tl.float32)
        # The candidate pre-activation's and the update gate's cotangents.
        dx_h = (dh_new * (1.0 - z) * _activation_grad(hh, ACT)).to(dtype)
        dx_z = (dh_new * (hp - hh) * _activation_grad(z, RACT)).to(dtype)
        dh = dh_new * z + skip
        if RESET_AFTER:
            per_hh = dx_h.to(tl.float32)
            dx_r = (per_hh * a * _activation_grad(r, RACT)).to(dtype)
            drec_h = (per_hh * r).to(dtype)
        else:
            # d(r * h): the candidate's cotangent back through U_h.
            d_rh = tl.dot(dx_h, wt_h, tl.zeros((BLOCK_B, UNITS), dtype=tl.float32),
                          input_precision=PRECISION).to(dtype).to(tl.float32)  # fmt: skip
            dx_r = (d_rh * hp * _activation_grad(r, RACT)).to(dtype)
            drec_h = dx_h
            dh = dh + d_rh * r
        dh = tl.dot(dx_z, wt_z, dh, input_precision=PRECISION)
        dh = tl.dot(dx_r, wt_r, dh, input_precision=PRECISION)
        if RESET_AFTER:
            dh = tl.dot(drec_h, wt_h, dh, input_precision=PRECISION)
        # The state cotangent rounds to dtype between steps, as the fallback keeps it.
        dh = dh.to(dtype).to(tl.float32)
        dx_ptrs = dx_ptr + rb[:, None] * T * 3 * U + t_src * 3 * U + rn[None, :]
        tl.store(dx_ptrs, dx_z, mask=tile_ok)
        tl.store(dx_ptrs + U, dx_r, mask=tile_ok)
        tl.store(dx_ptrs + 2 * U, dx_h, mask=tile_ok)
        rec_ptrs = drec_ptr + t * B * 3 * U + rb[:, None] * 3 * U + rn[None, :]
        tl.store(rec_ptrs, dx_z, mask=tile_ok)
        tl.store(rec_ptrs + U, dx_r, mask=tile_ok)
        tl.store(rec_ptrs + 2 * U, drec_h, mask=tile_ok)
    tl.store(dh0_ptr + state, dh.to(dtype), mask=tile_ok)


@triton.jit
def _gru_dkernel_kernel(
    h_prev_ptr,
    a_ptr,
    drec_ptr,
    dk_ptr,
    db_ptr,
    U,
    R,
    HAS_DB: tl.constexpr,
    PRECISION: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    """dU (U, 3U) over the R = T * B rows of drec (R, 3U): `h_prev^T @ drec[:, :2U]` in the
    first cdiv(2U, BLOCK_N) column tiles, `a^T @ drec[:, 2U:]` in the rest (a is h_prev, or
    r * h with reset_after=False); with HAS_DB the programs of row tile 0 also write the
    column sums of drec (the recurrent bias's gradient)."""
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    zr_tiles = tl.cdiv(2 * U, BLOCK_N)
    if pid_n < zr_tiles:
        rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        n_end = 2 * U
        left_ptr = h_prev_ptr
    else:
        rn = 2 * U + (pid_n - zr_tiles) * BLOCK_N + tl.arange(0, BLOCK_N)
        n_end = 3 * U
        left_ptr = a_ptr
    m_ok = rm < U
    n_ok = rn < n_end
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    db = tl.zeros((BLOCK_N,), dtype=tl.float32)
    for r0 in range(0, R, BLOCK_K):
        rr = r0 + tl.arange(0, BLOCK_K)
        r_ok = rr < R
        a = tl.load(
            left_ptr + rr[None, :] * U + rm[:, None], mask=m_ok[:, None] & r_ok[None, :], other=0.0
        )
        d = tl.load(
            drec_ptr + rr[:, None] * 3 * U + rn[None, :],
            mask=r_ok[:, None] & n_ok[None, :],
            other=0.0,
        )
        acc = tl.dot(a, d, acc, input_precision=PRECISION)
        if HAS_DB:
            db += tl.sum(d.to(tl.float32), axis=0)
    dtype = dk_ptr.dtype.element_ty
    tl.store(dk_ptr + rm[:, None] * 3 * U + rn[None, :], acc.to(dtype),
             mask=m_ok[:, None] & n_ok[None, :])  # fmt: skip
    if HAS_DB:
        if pid_m == 0:
            tl.store(db_ptr + rn, db.to(dtype), mask=n_ok)


# ------------------------------------------------------------------- streamed forward
# One program owns BLOCK_B batch rows and every unit of them, as in the resident kernels, but
# the recurrent kernel is read from L2 in (BLOCK_K, BLOCK_N) tiles at every step, looping over
# unit tiles. Within a program the threads that write the states of step t are not the ones
# that read them as the dot operand of step t + 1: `tl.debug_barrier` (bar.sync, which orders
# the block's global and shared memory accesses) separates the steps, and double-buffered
# states keep a step's writes off the buffer its other unit tiles still read. With
# reset_after=False a second barrier a step separates the writes of r * h (aux) from its
# product with U_h.
@triton.jit
def _fwd_finish(
    h_new, h_old, m_ptr, h_out_ptr, out_ptr, b_ok, tile_ok, rb, rn, U, T, t, t_src, stride_mb,
    stride_mt, HAS_MASK: tl.constexpr, ZERO_OUTPUT: tl.constexpr,
):  # fmt: skip
    """The streamed forward's last writes for the (rb, rn) tile of step t: the state leaving
    the step into h_out (B, U) and the output (B, T, U)."""
    dtype = out_ptr.dtype.element_ty
    out_ptrs = out_ptr + rb[:, None] * T * U + rn[None, :]
    if HAS_MASK:
        live = tl.load(m_ptr + rb * stride_mb + t_src * stride_mt, mask=b_ok, other=0) != 0
        live = live[:, None]
        h_keep = tl.where(live, h_new, h_old)
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
        out = h_new
    tl.store(h_out_ptr + rb[:, None] * U + rn[None, :], h_keep.to(dtype), mask=tile_ok)
    tl.store(out_ptrs + t * U, out.to(dtype), mask=tile_ok)


@triton.jit
def _gru_fwd_seq_kernel(
    x_ptr,
    k_ptr,
    b_ptr,
    m_ptr,
    h0_ptr,
    h_buf_ptr,
    gates_ptr,
    aux_ptr,
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
    HAS_BIAS: tl.constexpr,
    HAS_MASK: tl.constexpr,
    ZERO_OUTPUT: tl.constexpr,
    REVERSE: tl.constexpr,
    RESET_AFTER: tl.constexpr,
    ACT: tl.constexpr,
    RACT: tl.constexpr,
    PRECISION: tl.constexpr,
    BLOCK_B: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    """The whole forward sequence for BLOCK_B batch rows, the recurrent kernel streamed from
    L2 at every step. States live in h_buf (2, B, U), which the kernel fills from h0 first (so
    re-running it, as autotuning does, gives the same result); the final state is in buffer
    T % 2. Outputs as `_gru_fwd_resident_kernel`'s."""
    rb = tl.program_id(0) * BLOCK_B + tl.arange(0, BLOCK_B)
    b_ok = rb < B
    for n0 in range(0, U, BLOCK_N):
        rn = n0 + tl.arange(0, BLOCK_N)
        ok = b_ok[:, None] & (rn < U)[None, :]
        state = rb[:, None] * U + rn[None, :]
        tl.store(h_buf_ptr + state, tl.load(h0_ptr + state, mask=ok), mask=ok)
    tl.debug_barrier()
    dtype = gates_ptr.dtype.element_ty
    gate_cols = U * stride_kc
    x_gate = U * stride_xf
    for t in range(0, T):
        if REVERSE:
            t_src = T - 1 - t
        else:
            t_src = t
        h_in_ptr = h_buf_ptr + (t % 2) * B * U
        h_out_ptr = h_buf_ptr + ((t + 1) % 2) * B * U
        for n0 in range(0, U, BLOCK_N):
            rn = n0 + tl.arange(0, BLOCK_N)
            n_ok = rn < U
            tile_ok = b_ok[:, None] & n_ok[None, :]
            acc_z = tl.zeros((BLOCK_B, BLOCK_N), dtype=tl.float32)
            acc_r = tl.zeros((BLOCK_B, BLOCK_N), dtype=tl.float32)
            acc_h = tl.zeros((BLOCK_B, BLOCK_N), dtype=tl.float32)
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
                acc_z = tl.dot(h, w, acc_z, input_precision=PRECISION)
                w = tl.load(w_ptrs + gate_cols, mask=w_ok, other=0.0)
                acc_r = tl.dot(h, w, acc_r, input_precision=PRECISION)
                if RESET_AFTER:
                    w = tl.load(w_ptrs + 2 * gate_cols, mask=w_ok, other=0.0)
                    acc_h = tl.dot(h, w, acc_h, input_precision=PRECISION)
            x_ptrs = x_ptr + rb[:, None] * stride_xb + t_src * stride_xt + rn[None, :] * stride_xf
            acc_z += tl.load(x_ptrs, mask=tile_ok, other=0.0).to(tl.float32)
            acc_r += tl.load(x_ptrs + x_gate, mask=tile_ok, other=0.0).to(tl.float32)
            if HAS_BIAS:
                acc_z += tl.load(b_ptr + rn, mask=n_ok, other=0.0).to(tl.float32)[None, :]
                acc_r += tl.load(b_ptr + U + rn, mask=n_ok, other=0.0).to(tl.float32)[None, :]
                acc_h += tl.load(b_ptr + 2 * U + rn, mask=n_ok, other=0.0).to(tl.float32)[None, :]
            z = activate(acc_z, RACT)
            r = activate(acc_r, RACT)
            state = rb[:, None] * U + rn[None, :]
            h_old = tl.load(h_in_ptr + state, mask=tile_ok, other=0.0).to(tl.float32)
            g_ptrs = gates_ptr + t * B * 3 * U + rb[:, None] * 3 * U + rn[None, :]
            tl.store(g_ptrs, z.to(dtype), mask=tile_ok)
            tl.store(g_ptrs + U, r.to(dtype), mask=tile_ok)
            if RESET_AFTER:
                a = acc_h.to(dtype)
                x_h = tl.load(x_ptrs + 2 * x_gate, mask=tile_ok, other=0.0).to(tl.float32)
                hh = activate(x_h + r * a.to(tl.float32), ACT)
                tl.store(g_ptrs + 2 * U, hh.to(dtype), mask=tile_ok)
                tl.store(aux_ptr + t * B * U + state, a, mask=tile_ok)
                h_new = hh + z * (h_old - hh)
                _fwd_finish(h_new, h_old, m_ptr, h_out_ptr, out_ptr, b_ok, tile_ok, rb, rn, U,
                            T, t, t_src, stride_mb, stride_mt, HAS_MASK, ZERO_OUTPUT)  # fmt: skip
            else:
                tl.store(aux_ptr + t * B * U + state, (r * h_old).to(dtype), mask=tile_ok)
        if not RESET_AFTER:
            # The candidate needs every unit of r * h: its writes above come first.
            tl.debug_barrier()
            a_row = aux_ptr + t * B * U + rb[:, None] * U
            for n0 in range(0, U, BLOCK_N):
                rn = n0 + tl.arange(0, BLOCK_N)
                n_ok = rn < U
                tile_ok = b_ok[:, None] & n_ok[None, :]
                acc_h = tl.zeros((BLOCK_B, BLOCK_N), dtype=tl.float32)
                for k0 in range(0, U, BLOCK_K):
                    rk = k0 + tl.arange(0, BLOCK_K)
                    k_ok = rk < U
                    a = tl.load(a_row + rk[None, :], mask=b_ok[:, None] & k_ok[None, :], other=0.0)
                    w = tl.load(
                        k_ptr + rk[:, None] * stride_kr + rn[None, :] * stride_kc + 2 * gate_cols,
                        mask=k_ok[:, None] & n_ok[None, :],
                        other=0.0,
                    )
                    acc_h = tl.dot(a, w, acc_h, input_precision=PRECISION)
                x_ptrs = (
                    x_ptr + rb[:, None] * stride_xb + t_src * stride_xt + rn[None, :] * stride_xf
                )
                x_h = tl.load(x_ptrs + 2 * x_gate, mask=tile_ok, other=0.0).to(tl.float32)
                hh = activate(acc_h + x_h, ACT)
                state = rb[:, None] * U + rn[None, :]
                g_ptrs = gates_ptr + t * B * 3 * U + rb[:, None] * 3 * U + rn[None, :]
                z = tl.load(g_ptrs, mask=tile_ok, other=0.0).to(tl.float32)
                tl.store(g_ptrs + 2 * U, hh.to(dtype), mask=tile_ok)
                h_old = tl.load(h_in_ptr + state, mask=tile_ok, other=0.0).to(tl.float32)
                h_new = hh + z * (h_old - hh)
                _fwd_finish(h_new, h_old, m_ptr, h_out_ptr, out_ptr, b_ok, tile_ok, rb, rn, U,
                            T, t, t_src, stride_mb, stride_mt, HAS_MASK, ZERO_OUTPUT)  # fmt: skip
        tl.debug_barrier()


@triton.jit
def _gru_bwd_seq_kernel(
    k_ptr,
    m_ptr,
    gy_ptr,
    gh_ptr,
    h0_ptr,
    out_ptr,
    gates_ptr,
    aux_ptr,
    h_prev_ptr,
    drec_ptr,
    dx_ptr,
    state_ptr,
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
    RESET_AFTER: tl.constexpr,
    ACT: tl.constexpr,
    RACT: tl.constexpr,
    PRECISION: tl.constexpr,
    BLOCK_B: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    """Backpropagation through the whole sequence for BLOCK_B batch rows, the recurrent kernel
    streamed from L2 at every step; writes what `_gru_bwd_resident_kernel` writes. `state_ptr`
    (5, B, U) holds the double-buffered state cotangent dh (planes 0-1; dh0 ends in plane
    T % 2), the double-buffered cotangent a masked step's repeated output passes back (2-3),
    and the part of the next dh known before the recurrent product (4). A step is two passes
    over unit tiles (three with reset_after=False, whose d(r * h) contracts dx_h over every
    unit first), a barrier after each."""
    rb = tl.program_id(0) * BLOCK_B + tl.arange(0, BLOCK_B)
    b_ok = rb < B
    bu = B * U
    dtype = dx_ptr.dtype.element_ty
    for n0 in range(0, U, BLOCK_N):
        rn = n0 + tl.arange(0, BLOCK_N)
        tile_ok = b_ok[:, None] & (rn < U)[None, :]
        state = rb[:, None] * U + rn[None, :]
        h = tl.load(h0_ptr + state, mask=tile_ok, other=0.0)
        for t in range(0, T):
            tl.store(h_prev_ptr + t * bu + state, h, mask=tile_ok)
            h_t = tl.load(out_ptr + rb[:, None] * T * U + t * U + rn[None, :], mask=tile_ok)
            if HAS_MASK:
                if REVERSE:
                    t_src = T - 1 - t
                else:
                    t_src = t
                live = tl.load(m_ptr + rb * stride_mb + t_src * stride_mt, mask=b_ok, other=0)
                h = tl.where(live[:, None] != 0, h_t, h)
            else:
                h = h_t
        tl.store(state_ptr + state, tl.load(gh_ptr + state, mask=tile_ok), mask=tile_ok)
        zero = tl.zeros((BLOCK_B, BLOCK_N), dtype=dtype)
        tl.store(state_ptr + 2 * bu + state, zero, mask=tile_ok)
    tl.debug_barrier()
    gate_cols = U * stride_kc
    if RESET_AFTER:
        rec_end = 3 * U
    else:
        rec_end = 2 * U  # the candidate block reaches dh through d(r * h) instead
    for s in range(0, T):
        t = T - 1 - s
        if REVERSE:
            t_src = s
        else:
            t_src = t
        dh_in = state_ptr + (s % 2) * bu
        dh_out = state_ptr + ((s + 1) % 2) * bu
        dprev_in = state_ptr + (2 + s % 2) * bu
        dprev_out = state_ptr + (2 + (s + 1) % 2) * bu
        base_ptr = state_ptr + 4 * bu
        for n0 in range(0, U, BLOCK_N):
            rn = n0 + tl.arange(0, BLOCK_N)
            tile_ok = b_ok[:, None] & (rn < U)[None, :]
            state = rb[:, None] * U + rn[None, :]
            dh = tl.load(dh_in + state, mask=tile_ok, other=0.0).to(tl.float32)
            gy_ptrs = gy_ptr + rb[:, None] * stride_gb + t * stride_gt + rn[None, :] * stride_gf
            dout = tl.load(gy_ptrs, mask=tile_ok, other=0.0).to(tl.float32)
            if HAS_MASK:
                live = tl.load(m_ptr + rb * stride_mb + t_src * stride_mt, mask=b_ok, other=0)
                live = live[:, None] != 0
                if not ZERO_OUTPUT:
                    dout = dout + tl.load(dprev_in + state, mask=tile_ok, other=0.0).to(tl.float32)
                    dprev = tl.where(live, 0.0, dout)
                    tl.store(dprev_out + state, dprev.to(dtype), mask=tile_ok)
                dh_new = tl.where(live, dout + dh, 0.0)
                skip = tl.where(live, 0.0, dh)
            else:
                dh_new = dout + dh
                skip = tl.zeros((BLOCK_B, BLOCK_N), dtype=tl.float32)
            g_ptrs = gates_ptr + t * B * 3 * U + rb[:, None] * 3 * U + rn[None, :]
            z = tl.load(g_ptrs, mask=tile_ok, other=0.0).to(tl.float32)
            r = tl.load(g_ptrs + U, mask=tile_ok, other=0.0).to(tl.float32)
            hh = tl.load(g_ptrs + 2 * U, mask=tile_ok, other=0.0).to(tl.float32)
            hp = tl.load(h_prev_ptr + t * bu + state, mask=tile_ok, other=0.0).to(tl.float32)
            dx_h = (dh_new * (1.0 - z) * _activation_grad(hh, ACT)).to(dtype)
            dx_z = (dh_new * (hp - hh) * _activation_grad(z, RACT)).to(dtype)
            dx_ptrs = dx_ptr + rb[:, None] * T * 3 * U + t_src * 3 * U + rn[None, :]
            rec_ptrs = drec_ptr + t * B * 3 * U + rb[:, None] * 3 * U + rn[None, :]
            tl.store(dx_ptrs, dx_z, mask=tile_ok)
            tl.store(dx_ptrs + 2 * U, dx_h, mask=tile_ok)
            tl.store(rec_ptrs, dx_z, mask=tile_ok)
            if RESET_AFTER:
                a = tl.load(aux_ptr + t * bu + state, mask=tile_ok, other=0.0).to(tl.float32)
                dx_r = (dx_h.to(tl.float32) * a * _activation_grad(r, RACT)).to(dtype)
                tl.store(dx_ptrs + U, dx_r, mask=tile_ok)
                tl.store(rec_ptrs + U, dx_r, mask=tile_ok)
                tl.store(rec_ptrs + 2 * U, (dx_h.to(tl.float32) * r).to(dtype), mask=tile_ok)
            else:
                tl.store(rec_ptrs + 2 * U, dx_h, mask=tile_ok)
            tl.store(base_ptr + state, (dh_new * z + skip).to(dtype), mask=tile_ok)
        tl.debug_barrier()
        if not RESET_AFTER:
            # d(r * h) = dx_h @ U_h^T, over every unit of dx_h (written above).
            for n0 in range(0, U, BLOCK_N):
                rn = n0 + tl.arange(0, BLOCK_N)
                n_ok = rn < U
                tile_ok = b_ok[:, None] & n_ok[None, :]
                state = rb[:, None] * U + rn[None, :]
                d_rh = tl.zeros((BLOCK_B, BLOCK_N), dtype=tl.float32)
                for j0 in range(0, U, BLOCK_K):
                    rj = j0 + tl.arange(0, BLOCK_K)
                    j_ok = rj < U
                    d = tl.load(
                        drec_ptr + t * B * 3 * U + rb[:, None] * 3 * U + 2 * U + rj[None, :],
                        mask=b_ok[:, None] & j_ok[None, :],
                        other=0.0,
                    )
                    w_t = tl.load(
                        k_ptr + rn[None, :] * stride_kr + rj[:, None] * stride_kc + 2 * gate_cols,
                        mask=j_ok[:, None] & n_ok[None, :],
                        other=0.0,
                    )
                    d_rh = tl.dot(d, w_t, d_rh, input_precision=PRECISION)
                d_rh = d_rh.to(dtype).to(tl.float32)
                g_ptrs = gates_ptr + t * B * 3 * U + rb[:, None] * 3 * U + rn[None, :]
                r = tl.load(g_ptrs + U, mask=tile_ok, other=0.0).to(tl.float32)
                hp = tl.load(h_prev_ptr + t * bu + state, mask=tile_ok, other=0.0).to(tl.float32)
                dx_r = (d_rh * hp * _activation_grad(r, RACT)).to(dtype)
                tl.store(dx_ptr + rb[:, None] * T * 3 * U + t_src * 3 * U + U + rn[None, :], dx_r,
                         mask=tile_ok)  # fmt: skip
                tl.store(drec_ptr + t * B * 3 * U + rb[:, None] * 3 * U + U + rn[None, :], dx_r,
                         mask=tile_ok)  # fmt: skip
                base = tl.load(base_ptr + state, mask=tile_ok, other=0.0).to(tl.float32)
                tl.store(base_ptr + state, (base + d_rh * r).to(dtype), mask=tile_ok)
            tl.debug_barrier()
        # dh entering step t = base + drec[t] @ U^T (the z and r blocks, and the candidate's
        # with reset_after).
        for n0 in range(0, U, BLOCK_N):
            rn = n0 + tl.arange(0, BLOCK_N)
            n_ok = rn < U
            tile_ok = b_ok[:, None] & n_ok[None, :]
            state = rb[:, None] * U + rn[None, :]
            dh = tl.load(base_ptr + state, mask=tile_ok, other=0.0).to(tl.float32)
            for j0 in range(0, rec_end, BLOCK_K):
                rj = j0 + tl.arange(0, BLOCK_K)
                j_ok = rj < rec_end
                d = tl.load(
                    drec_ptr + t * B * 3 * U + rb[:, None] * 3 * U + rj[None, :],
                    mask=b_ok[:, None] & j_ok[None, :],
                    other=0.0,
                )
                w_t = tl.load(
                    k_ptr + rn[None, :] * stride_kr + rj[:, None] * stride_kc,
                    mask=j_ok[:, None] & n_ok[None, :],
                    other=0.0,
                )
                dh = tl.dot(d, w_t, dh, input_precision=PRECISION)
            tl.store(dh_out + state, dh.to(dtype), mask=tile_ok)
        tl.debug_barrier()


# ---------------------------------------------------------------------------------- configs
# One config: a program is BLOCK_B batch rows for the whole sequence, so the grid is
# cdiv(B, BLOCK_B) and a small BLOCK_B means more programs (SMs) at work; 8 warps, as the
# LSTM's resident kernels, whose backward spills at 4.
RESIDENT_CONFIGS = [triton.Config({"BLOCK_B": 16}, num_warps=8, num_stages=1)]
# dU: a (U, 3U) output with a long (T * B) reduction.
DKERNEL_CONFIGS = [
    triton.Config({"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 32}, num_warps=4, num_stages=2),
    triton.Config({"BLOCK_M": 32, "BLOCK_N": 64, "BLOCK_K": 64}, num_warps=4, num_stages=3),
]
# The streamed forward: a batch tile for the whole sequence, a unit tile and a K tile inside
# each step; not pipelined (num_stages=1), as the LSTM's streamed kernels.
SEQ_CONFIGS = [
    triton.Config({"BLOCK_B": 16, "BLOCK_N": 32, "BLOCK_K": 32}, num_warps=8, num_stages=1),
    triton.Config({"BLOCK_B": 16, "BLOCK_N": 64, "BLOCK_K": 32}, num_warps=16, num_stages=1),
]
# Float32 at IEEE precision (dots on the CUDA cores, operands through registers): no warp
# count keeps the resident kernels free of spills at every width on both targets (4 warps:
# the 64-wide forward spills 3-6 KB per thread; 8: the 64-wide forward 160 B on sm_90, the
# 16-wide backward 8 B on sm_80; 16: the 16-wide forward and the 64-wide backward 8-24 B on
# sm_80), so a resident launch there takes the warps of its padded width
# (`_resident_config`). The streamed 16x64x32 tile spills 8-88 bytes on sm_90 and sm_80, 16
# deep it does not; the 32x64x64 dU tile spills 384 bytes on sm_80 at 4 warps, at 8 it does
# not.
IEEE_RESIDENT_WARPS = {"fwd": {16: 4, 32: 8, 64: 16}, "bwd": {16: 4, 32: 16, 64: 8}}
IEEE_RESIDENT_CONFIGS = {
    warps: triton.Config({"BLOCK_B": 16}, num_warps=warps, num_stages=1) for warps in (4, 8, 16)
}
IEEE_SEQ_CONFIGS = [
    SEQ_CONFIGS[0],
    triton.Config({"BLOCK_B": 16, "BLOCK_N": 64, "BLOCK_K": 16}, num_warps=16, num_stages=1),
]
IEEE_DKERNEL_CONFIGS = [
    DKERNEL_CONFIGS[0],
    triton.Config({"BLOCK_M": 32, "BLOCK_N": 64, "BLOCK_K": 64}, num_warps=8, num_stages=3),
]


def _kernel(fn, configs, ieee_configs, op):
    return Kernel(fn, configs, ["B", "U"], op, {"m_ptr": "u8"}, ieee_configs=ieee_configs)


_IEEE_RESIDENT = list(IEEE_RESIDENT_CONFIGS.values())
FWD_RESIDENT = _kernel(_gru_fwd_resident_kernel, RESIDENT_CONFIGS, _IEEE_RESIDENT, "gru")
BWD_RESIDENT = _kernel(_gru_bwd_resident_kernel, RESIDENT_CONFIGS, _IEEE_RESIDENT, "gru_grad")
DKERNEL = Kernel(
    _gru_dkernel_kernel, DKERNEL_CONFIGS, ["U", "R"], "gru_grad",
    ieee_configs=IEEE_DKERNEL_CONFIGS,
)  # fmt: skip
FWD_SEQ = _kernel(_gru_fwd_seq_kernel, SEQ_CONFIGS, IEEE_SEQ_CONFIGS, "gru")
BWD_SEQ = _kernel(_gru_bwd_seq_kernel, SEQ_CONFIGS, IEEE_SEQ_CONFIGS, "gru_grad")

# The largest unit count whose recurrent kernel stays on chip, per dtype: the widest padded
# width (UNITS, a power of two) whose resident kernels, forward and backward, compile for
# sm_90 and sm_80 within 255 registers, without spills and within shared memory (`make
# kernels-report`). RESIDENT_MIN_WIDTH is the narrowest: tl.dot's 16, and 32 for half types.
RESIDENT_UNITS = {torch.float32: 64, torch.float16: 64, torch.bfloat16: 64}
RESIDENT_MIN_WIDTH = {torch.float32: 16, torch.float16: 32, torch.bfloat16: 32}


# Up to this many units the forward streams the recurrent kernel through one SM a step
# (3 * U^2 * s bytes: 12 MiB at 1024 float32 units), as the LSTM's streamed plan.
PERSISTENT_MAX_UNITS = 1024


def plan(units: int, dtype: torch.dtype) -> str | None:
    """Which kernels run a GRU of `units` in `dtype`: "resident" (one launch per sequence,
    recurrent kernel on chip), "streamed" (one launch per sequence, recurrent kernel read
    from L2 every step), or None (no kernel: the routes raise NotImplementedError).

    Example:
        >>> plan(32, torch.float32)
        'resident'
    """
    if units <= RESIDENT_UNITS.get(dtype, 0):
        return "resident"
    return "streamed" if units <= PERSISTENT_MAX_UNITS else None


def _resident_config(kind: str, width: int, dtype: torch.dtype, precision: str):
    """The config of a resident launch ("fwd" or "bwd") at padded `width` in `dtype` with
    `precision` dots."""
    if dtype == torch.float32 and precision == "ieee":
        return IEEE_RESIDENT_CONFIGS[IEEE_RESIDENT_WARPS[kind][width]]
    return RESIDENT_CONFIGS[0]


def _resident_width(units: int, dtype: torch.dtype) -> int:
    """The padded unit width of the resident kernels: a power of two, at least
    RESIDENT_MIN_WIDTH."""
    return max(RESIDENT_MIN_WIDTH[dtype], triton.next_power_of_2(units))


def _batch_grid(batch):
    return lambda meta: (triton.cdiv(batch, meta["BLOCK_B"]),)


# -------------------------------------------------------------------------------- launchers
def _check_plan(op, units, dtype, supported):
    """The plan for `units`, or NotImplementedError when it is not one of `supported`."""
    mode = plan(units, dtype)
    if mode not in supported:
        limit = PERSISTENT_MAX_UNITS if "streamed" in supported else RESIDENT_UNITS.get(dtype, 0)
        raise NotImplementedError(f"{op}: {units} units in {dtype} is over the limit ({limit})")
    return mode


def _check_shapes(op, width, units, kernel, recurrent_bias):
    if width != 3 * units or tuple(kernel.shape) != (units, width):
        raise NotImplementedError(
            f"{op}: expected a last axis of {3 * units} and kernel ({units}, {3 * units}); "
            f"got {width} and {tuple(kernel.shape)}"
        )
    if recurrent_bias is not None and tuple(recurrent_bias.shape) != (width,):
        raise NotImplementedError(
            f"{op}: expected recurrent_bias ({width},); got {tuple(recurrent_bias.shape)}"
        )


def forward_route(
    x_proj,
    h0,
    kernel,
    recurrent_bias,
    mask,
    reverse,
    reset_after,
    activation,
    recurrent_activation,
    zero_output_for_mask,
):
    """The `gru` primitive's impl on the GPU: same arguments and the same four outputs
    `(all_h, last_h, gates, aux)`, gates and aux time-major in processed order as the
    backward expects them.

    Raises:
        NotImplementedError: for more units than PERSISTENT_MAX_UNITS, dtypes other than
            float32/float16/bfloat16, unknown activations, mixed dtypes/devices, or tensors
            too large for int32 offsets.
    """
    tensors = [x_proj, h0, kernel] + ([] if recurrent_bias is None else [recurrent_bias])
    _check("gru", tensors, activation, recurrent_activation)
    batch, steps, width = x_proj.shape
    units = h0.shape[-1]
    _check_shapes("gru", width, units, kernel, recurrent_bias)
    new = x_proj.new_empty
    all_h = new((batch, steps, units))
    gates = new((steps, batch, width))
    aux = new((steps, batch, units))
    if steps == 0 or batch == 0 or units == 0:
        return all_h, new((batch, units)).copy_(h0), gates, aux
    mode = _check_plan("gru", units, x_proj.dtype, ("resident", "streamed"))
    m, smb, smt = _mask_arg(mask, x_proj)
    args = dict(
        x_ptr=x_proj, k_ptr=kernel, m_ptr=m, gates_ptr=gates, aux_ptr=aux, out_ptr=all_h,
        b_ptr=x_proj if recurrent_bias is None else recurrent_bias.contiguous(),
        h0_ptr=h0.contiguous(), B=batch, U=units, T=steps,
        stride_xb=x_proj.stride(0), stride_xt=x_proj.stride(1), stride_xf=x_proj.stride(2),
        stride_kr=kernel.stride(0), stride_kc=kernel.stride(1), stride_mb=smb, stride_mt=smt,
        HAS_BIAS=recurrent_bias is not None, HAS_MASK=mask is not None,
        ZERO_OUTPUT=bool(zero_output_for_mask), REVERSE=bool(reverse),
        RESET_AFTER=bool(reset_after), ACT=activation_code("gru", activation),
        RACT=activation_code("gru", recurrent_activation),
        PRECISION=dot_precision(x_proj.dtype),
    )  # fmt: skip
    if mode == "streamed":
        h_buf = new((2, batch, units))
        FWD_SEQ.launch(_batch_grid(batch), h_buf_ptr=h_buf, **args)
        return all_h, h_buf[steps % 2], gates, aux
    h_last = new((batch, units))
    padded = _resident_width(units, x_proj.dtype)
    config = _resident_config("fwd", padded, x_proj.dtype, args["PRECISION"])
    FWD_RESIDENT.launch(_batch_grid(batch), config, h_last_ptr=h_last, UNITS=padded, **args)
    return all_h, h_last, gates, aux


def backward_route(
    g_all,
    g_h,
    h0,
    kernel,
    recurrent_bias,
    mask,
    all_h,
    gates,
    aux,
    reverse,
    reset_after,
    activation,
    recurrent_activation,
    zero_output_for_mask,
):
    """The `gru_grad` primitive's impl on the GPU: returns `(dx_proj, dh0, dkernel, dbias)`
    with dx_proj (B, T, 3U) in source time order; dbias is the column sums of the recurrent
    products' cotangents with reset_after, zeros without.

    Raises:
        NotImplementedError: as `forward_route`.
    """
    tensors = [g_all, g_h, h0, kernel, all_h, gates, aux]
    tensors += [] if recurrent_bias is None else [recurrent_bias]
    _check("gru_grad", tensors, activation, recurrent_activation)
    steps, batch, width = gates.shape
    units = h0.shape[-1]
    _check_shapes("gru_grad", width, units, kernel, recurrent_bias)
    # The launcher's own layouts (what forward_route returns); other producers get copies.
    all_h, gates, aux = all_h.contiguous(), gates.contiguous(), aux.contiguous()
    new = gates.new_empty
    dx = new((batch, steps, width))
    if steps == 0 or batch == 0 or units == 0:
        dh0 = new((batch, units)).copy_(g_h)
        return dx, dh0, kernel.new_zeros(kernel.shape), gates.new_zeros((width,))
    mode = _check_plan("gru_grad", units, gates.dtype, ("resident", "streamed"))
    m, smb, smt = _mask_arg(mask, gates)
    precision = dot_precision(gates.dtype)
    h_prev = new((steps, batch, units))
    drec = new((steps, batch, width))
    args = dict(
        k_ptr=kernel, m_ptr=m, gy_ptr=g_all, gh_ptr=g_h.contiguous(), h0_ptr=h0.contiguous(),
        out_ptr=all_h, gates_ptr=gates, aux_ptr=aux, h_prev_ptr=h_prev, drec_ptr=drec,
        dx_ptr=dx, B=batch, U=units, T=steps,
        stride_kr=kernel.stride(0), stride_kc=kernel.stride(1), stride_mb=smb, stride_mt=smt,
        stride_gb=g_all.stride(0), stride_gt=g_all.stride(1), stride_gf=g_all.stride(2),
        HAS_MASK=mask is not None, ZERO_OUTPUT=bool(zero_output_for_mask),
        REVERSE=bool(reverse), RESET_AFTER=bool(reset_after),
        ACT=activation_code("gru_grad", activation),
        RACT=activation_code("gru_grad", recurrent_activation), PRECISION=precision,
    )  # fmt: skip
    if mode == "streamed":
        state = new((5, batch, units))
        BWD_SEQ.launch(_batch_grid(batch), state_ptr=state, **args)
        dh0 = state[steps % 2]
    else:
        dh0 = new((batch, units))
        padded = _resident_width(units, gates.dtype)
        config = _resident_config("bwd", padded, gates.dtype, precision)
        BWD_RESIDENT.launch(_batch_grid(batch), config, dh0_ptr=dh0, UNITS=padded, **args)
    dkernel = new((units, width))
    dbias = new((width,)) if reset_after else gates.new_zeros((width,))

    def grid(meta):
        zr = triton.cdiv(2 * units, meta["BLOCK_N"])
        return (triton.cdiv(units, meta["BLOCK_M"]), zr + triton.cdiv(units, meta["BLOCK_N"]))

    DKERNEL.launch(
        grid, h_prev_ptr=h_prev, a_ptr=h_prev if reset_after else aux, drec_ptr=drec,
        dk_ptr=dkernel, db_ptr=dbias, U=units, R=steps * batch,
        HAS_DB=bool(reset_after), PRECISION=precision,
    )  # fmt: skip
    return dx, dh0, dkernel, dbias


# ------------------------------------------------------------------------ ahead of time
def aot_specs():
    """(kernel_name, jit_function, signature, constexprs, num_warps, num_stages) for every
    config of every kernel here: the resident kernels at the narrowest and the widest width
    each dtype runs them at, and the streamed ones at every config in fp32 and the first in
    half types, both reset_after modes, in the representative case (masked, reversed, with a
    recurrent bias, tanh / sigmoid); fp32 with TF32 dots and, at the IEEE configs, with IEEE
    ones (`..._ieee`); dU at every config.

    Example:
        >>> name, fn, signature, constexprs, num_warps, num_stages = aot_specs()[0]
    """
    acts = dict(ACT=activation_code("gru", "tanh"), RACT=activation_code("gru", "sigmoid"))
    seq = dict(HAS_MASK=True, ZERO_OUTPUT=False, REVERSE=True, **acts)
    specs = []
    f32 = torch.float32
    cases = [(f32, precision, tag) for precision, tag in FLOAT32_PRECISIONS]
    cases += [(dtype, "ieee", "") for dtype in FLOAT_DTYPES[1:]]
    for dtype, precision, tag in cases:
        dt, widest = TRITON_TYPES[dtype], RESIDENT_UNITS[dtype]
        widths = {RESIDENT_MIN_WIDTH[dtype], _resident_width(widest, dtype)}
        if tag:  # a config per width: every width
            widths = set(IEEE_RESIDENT_WARPS["fwd"])
        for width in sorted(widths):
            for reset_after in (True, False):
                consts = dict(seq, PRECISION=precision, UNITS=width, RESET_AFTER=reset_after)
                mode = "ra" if reset_after else "rb"
                for kernel, kind in ((FWD_RESIDENT, "fwd"), (BWD_RESIDENT, "bwd")):
                    label = f"gru_{kind}_resident_{mode}_{dt}{tag}_u{width}"
                    cfg = _resident_config(kind, width, dtype, precision)
                    extra = dict(HAS_BIAS=True) if kind == "fwd" else {}
                    specs.append(kernel.aot_spec(label, dtype, dict(consts, **extra), cfg))
    for reset_after in (True, False):
        mode = "ra" if reset_after else "rb"
        consts = dict(seq, RESET_AFTER=reset_after)
        fwd = dict(consts, HAS_BIAS=reset_after)
        for precision, tag in FLOAT32_PRECISIONS:
            for i, cfg in enumerate(FWD_SEQ.configs_at(f32, precision)):
                label = f"gru_fwd_seq_{mode}_fp32{tag}_{i}"
                specs.append(FWD_SEQ.aot_spec(label, f32, dict(fwd, PRECISION=precision), cfg))
            for i, cfg in enumerate(BWD_SEQ.configs_at(f32, precision)):
                label = f"gru_bwd_seq_{mode}_fp32{tag}_{i}"
                specs.append(BWD_SEQ.aot_spec(label, f32, dict(consts, PRECISION=precision), cfg))
        for dtype in (torch.float16, torch.bfloat16):
            half, cfg = dict(PRECISION="ieee"), SEQ_CONFIGS[0]
            label = f"gru_fwd_seq_{mode}_{TRITON_TYPES[dtype]}_0"
            specs.append(FWD_SEQ.aot_spec(label, dtype, dict(fwd, **half), cfg))
            label = f"gru_bwd_seq_{mode}_{TRITON_TYPES[dtype]}_0"
            specs.append(BWD_SEQ.aot_spec(label, dtype, dict(consts, **half), cfg))
    for precision, tag in FLOAT32_PRECISIONS:
        for i, cfg in enumerate(DKERNEL.configs_at(f32, precision)):
            consts = dict(PRECISION=precision, HAS_DB=True)
            specs.append(DKERNEL.aot_spec(f"gru_dkernel_fp32{tag}_{i}", f32, consts, cfg))
    return specs
