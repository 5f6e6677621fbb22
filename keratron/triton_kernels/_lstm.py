"""Triton kernels for the LSTM recurrence (`lstm`) and its backpropagation through time
(`lstm_grad`).

Design: one fused gate-and-cell launch per time step over a (batch tile, unit tile) grid. A
program computes `h @ U` for its unit tile of all four gates (i, f, c, o in Keras's order)
as `tl.dot`s over K tiles of the previous hidden state, adds the step's input projection,
applies the activations and the cell update in registers, and writes the gates, the cell,
the output and the new states. The launch boundary is the grid-wide barrier that the
recurrence needs between steps; states are double-buffered, so every launch is a pure
function of its inputs (safe to autotune by re-running). The backward step is the same
shape of kernel run last step first: `dh = dz[t+1] @ U^T` (a `tl.dot` over the 4 * units
gate axis), then the gate cotangents `dz[t]` from the saved gates and cells. Two more
launches finish the backward pass: a carry kernel that rebuilds the states entering each
step (masked steps carry their state over), and `dU = h_prev^T @ dz` over all steps.

Budget per step (B batch, U units, s bytes per element): forward 8 * B * U^2 FLOPs for the
recurrent matmul plus ~30 * B * U elementwise; it reads U * 4U * s of recurrent kernel
(L2-resident after the first step) and 6 * B * U * s of activations, and writes
6 * B * U * s (gates, cell, output) plus 2 * B * U * s of state. The backward step is again
8 * B * U^2 FLOPs and reads ~10 * B * U * s. `dU` is 8 * T * B * U^2 FLOPs in one launch.
At small B the per-step cost is bound by reading U (4 * U^2 * s bytes, from L2) and by
launch latency; both are the price of a grid-wide barrier per step.
"""

from __future__ import annotations

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
    launchable,
)

__all__ = ["forward_route", "backward_route", "aot_specs"]

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

# The time-step arguments change on every launch of a sequence: the launch cache keys them by
# Triton's specialisation class, not by value.
_STEPS = ("t", "t_src", "t_next_src")
FWD_STEP = Kernel(_lstm_fwd_step_kernel, CONFIGS, ["B", "U"], "lstm", {"m_ptr": "u8"}, _STEPS[:2])
BWD_STEP = Kernel(_lstm_bwd_step_kernel, CONFIGS, ["B", "U"], "lstm_grad", {"m_ptr": "u8"}, _STEPS)
CARRY = Kernel(_lstm_carry_kernel, CARRY_CONFIGS, ["B", "U"], "lstm_grad", {"m_ptr": "u8"})
DKERNEL = Kernel(_lstm_dkernel_kernel, DKERNEL_CONFIGS, ["U", "R"], "lstm_grad")


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
):
    """The `lstm` primitive's impl on the GPU: same arguments and the same five outputs
    `(all_h, last_h, last_c, gates, cells)`, gates and cells time-major in processed
    order as the backward expects them.

    Raises:
        NotImplementedError: for dtypes other than float32/float16/bfloat16, unknown
            activations, mixed dtypes/devices, or tensors too large for int32 offsets.
    """
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
    # Double-buffered states: step t reads buffer t % 2 and writes the other one.
    h_buf = new((2, batch, units))
    c_buf = new((2, batch, units))
    h_buf[0].copy_(h0)
    c_buf[0].copy_(c0)
    if steps == 0 or batch == 0 or units == 0:
        return all_h, h_buf[0], c_buf[0], gates, cells
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
):
    """The `lstm_grad` primitive's impl on the GPU: returns `(dx_proj, dh0, dc0, dkernel)`
    with dx_proj (B, T, 4U) in source time order.

    Raises:
        NotImplementedError: as `forward_route`.
    """
    tensors = [g_all, g_h, g_c, h0, c0, kernel, all_h, gates, cells]
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
    # Double-buffered (skip, dc, dprev) states; see the backward step kernel.
    skip, dc, dprev = new((2, batch, units)), new((2, batch, units)), new((2, batch, units))
    skip[0].copy_(g_h)
    dc[0].copy_(g_c)
    dprev[0].zero_()
    if steps == 0 or batch == 0 or units == 0:
        return dx, skip[0], dc[0], kernel.new_zeros(kernel.shape)
    m, smb, smt = _mask_arg(mask, gates)
    precision = dot_precision(gates.dtype)

    h_prev = new((batch, steps, units))
    c_prev = new((steps, batch, units))
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

    dkernel = kernel.new_empty((units, width))

    def grid(meta):
        return (triton.cdiv(units, meta["BLOCK_M"]), triton.cdiv(width, meta["BLOCK_N"]))

    DKERNEL.launch(
        grid, h_prev_ptr=h_prev, dz_ptr=dx, dk_ptr=dkernel, U=units, N=width, R=batch * steps,
        PRECISION=precision,
    )  # fmt: skip
    return dx, dh0, dc0, dkernel


# ------------------------------------------------------------------------ ahead of time
def aot_specs():
    """(kernel_name, jit_function, signature, constexprs, num_warps, num_stages) for every
    config of every kernel here, in the representative case (masked, tanh / sigmoid, fp32
    with TF32 dots), plus fp16 and bf16 step kernels at the first config.

    Example:
        >>> name, fn, signature, constexprs, num_warps, num_stages = aot_specs()[0]
    """
    acts = dict(ACT=activation_code("lstm", "tanh"), RACT=activation_code("lstm", "sigmoid"))
    step = dict(HAS_MASK=True, ZERO_OUTPUT=False, **acts)
    specs = []
    for i, cfg in enumerate(CONFIGS):
        f32 = dict(step, PRECISION="tf32")
        specs.append(FWD_STEP.aot_spec(f"lstm_fwd_step_fp32_{i}", torch.float32, f32, cfg))
        for final in (False, True):
            kind = "final" if final else "step"
            consts = dict(f32, FINAL=final)
            specs.append(BWD_STEP.aot_spec(f"lstm_bwd_{kind}_fp32_{i}", torch.float32, consts, cfg))
    for dtype in (torch.float16, torch.bfloat16):
        dt, half = TRITON_TYPES[dtype], dict(step, PRECISION="ieee")
        specs.append(FWD_STEP.aot_spec(f"lstm_fwd_step_{dt}_0", dtype, half, CONFIGS[0]))
        consts = dict(half, FINAL=False)
        specs.append(BWD_STEP.aot_spec(f"lstm_bwd_step_{dt}_0", dtype, consts, CONFIGS[0]))
    for i, cfg in enumerate(CARRY_CONFIGS):
        consts = dict(HAS_MASK=True, REVERSE=True)
        specs.append(CARRY.aot_spec(f"lstm_carry_fp32_{i}", torch.float32, consts, cfg))
    for i, cfg in enumerate(DKERNEL_CONFIGS):
        consts = dict(PRECISION="tf32")
        specs.append(DKERNEL.aot_spec(f"lstm_dkernel_fp32_{i}", torch.float32, consts, cfg))
    return specs
