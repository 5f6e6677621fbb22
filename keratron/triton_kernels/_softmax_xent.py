"""Fused softmax cross-entropy over the last axis: the Triton routes of the
"softmax_cross_entropy" (forward) and "softmax_cross_entropy_grad" (backward) primitives.

Forward, one program per row of C logits: a log-sum-exp, the probabilities and the row's loss.
A row of at most BLOCK_MAX classes is loaded once and handled in registers (ONE_PASS); a longer
row (a 50,000-word vocabulary) is walked in BLOCK-wide chunks twice: first with an online
running max and rescaled running sum (so no chunk's exp overflows and no second max pass is
needed), then to write probabilities and accumulate the loss. Budget per row: ~4C FLOPs and C
exps; memory C reads (2C when chunked) + C writes of probs + one label or C dense labels.

Backward, one program per row: `g[row] * (probs - target)`, with the one-hot target of sparse
labels formed in registers from the class id, never in memory. Budget: 2C FLOPs, C reads of
probs (+ C dense labels) and C writes.

Many short rows (C <= ROWS_MAX_C, e.g. a batch of 128 rows of 10 classes) take the rows
kernels instead: each program holds a (BLOCK_R x BLOCK) tile of ROW_TILE elements, so 128x10
is one program of one launch rather than 128 programs of 16 lanes, most of them idle; same
budget, one pass.

Both compute in float32 whatever the storage dtype (float32, float16, bfloat16). A sparse label
outside [0, C) gives a NaN loss (the torch fallback raises instead; a device kernel cannot
raise without a host sync).
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
    launch_state,
    route_cache,
    tensor_key,
)

__all__ = [
    "forward_route",
    "backward_route",
    "CONFIGS",
    "ROWS_CONFIGS",
    "BLOCK_MAX",
    "ROW_TILE",
    "ROWS_MAX_C",
    "aot_specs",
]

_INT_DTYPES = (torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8)
# Widest row handled in one pass, and the chunk width of longer rows (a power of two).
BLOCK_MAX = 4096


@triton.jit
def _xent_fwd_kernel(
    logits_ptr, labels_ptr, loss_ptr, probs_ptr,
    C,
    stride_lr, stride_lc,
    stride_tr, stride_tc,
    stride_pr,
    SPARSE: tl.constexpr,
    BLOCK: tl.constexpr,
    ONE_PASS: tl.constexpr,
):  # fmt: skip
    # int64 row offsets: rows * C can pass 2**31 for a large vocabulary.
    row = tl.program_id(0).to(tl.int64)
    x_row = logits_ptr + row * stride_lr
    p_row = probs_ptr + row * stride_pr
    t_row = labels_ptr + row * stride_tr
    offs = tl.arange(0, BLOCK)
    if ONE_PASS:
        mask = offs < C
        x = tl.load(x_row + offs * stride_lc, mask=mask, other=float("-inf")).to(tl.float32)
        m = tl.max(x, 0)
        e = tl.exp(x - m)
        s = tl.sum(e, 0)
        tl.store(p_row + offs, (e / s).to(probs_ptr.dtype.element_ty), mask=mask)
        log_s = tl.log(s)
        if not SPARSE:
            t = tl.load(t_row + offs * stride_tc, mask=mask, other=0.0).to(tl.float32)
            # Padding lanes hold -inf logits: zero their log-probabilities (not 0 * -inf).
            dense_sum = tl.sum(t * tl.where(mask, x - m - log_s, 0.0), 0)
    else:
        m = tl.full((), float("-inf"), tl.float32)
        s = tl.full((), 0.0, tl.float32)
        for start in range(0, C, BLOCK):
            cols = start + offs
            x = tl.load(x_row + cols * stride_lc, mask=cols < C, other=float("-inf"))
            x = x.to(tl.float32)
            m_new = tl.maximum(m, tl.max(x, 0))
            # While every logit so far is -inf, shift by 0 rather than by -inf (which would
            # make exp(-inf - -inf) = NaN); the running sum is still 0 then.
            m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
            s = s * tl.exp(m - m_safe) + tl.sum(tl.exp(x - m_safe), 0)
            m = m_new
        log_s = tl.log(s)
        dense_sum = tl.full((), 0.0, tl.float32)
        for start in range(0, C, BLOCK):
            cols = start + offs
            mask = cols < C
            x = tl.load(x_row + cols * stride_lc, mask=mask, other=float("-inf"))
            x = x.to(tl.float32)
            tl.store(p_row + cols, (tl.exp(x - m) / s).to(probs_ptr.dtype.element_ty), mask=mask)
            if not SPARSE:
                t = tl.load(t_row + cols * stride_tc, mask=mask, other=0.0).to(tl.float32)
                dense_sum += tl.sum(t * tl.where(mask, x - m - log_s, 0.0), 0)
    if SPARSE:
        label = tl.load(t_row).to(tl.int64)
        valid = (label >= 0) & (label < C)
        picked = tl.load(x_row + tl.where(valid, label, 0) * stride_lc).to(tl.float32)
        loss = tl.where(valid, log_s - (picked - m), float("nan"))
    else:
        loss = -dense_sum
    tl.store(loss_ptr + row, loss.to(loss_ptr.dtype.element_ty))


@triton.jit
def _xent_bwd_kernel(
    g_ptr, probs_ptr, labels_ptr, out_ptr,
    C,
    stride_gr,
    stride_pr, stride_pc,
    stride_tr, stride_tc,
    stride_or,
    SPARSE: tl.constexpr,
    BLOCK: tl.constexpr,
):  # fmt: skip
    row = tl.program_id(0).to(tl.int64)
    g = tl.load(g_ptr + row * stride_gr).to(tl.float32)
    p_row = probs_ptr + row * stride_pr
    t_row = labels_ptr + row * stride_tr
    o_row = out_ptr + row * stride_or
    offs = tl.arange(0, BLOCK)
    if SPARSE:
        label = tl.load(t_row).to(tl.int64)
    for start in range(0, C, BLOCK):
        cols = start + offs
        mask = cols < C
        p = tl.load(p_row + cols * stride_pc, mask=mask, other=0.0).to(tl.float32)
        if SPARSE:
            t = tl.where(cols == label, 1.0, 0.0)
        else:
            t = tl.load(t_row + cols * stride_tc, mask=mask, other=0.0).to(tl.float32)
        tl.store(o_row + cols, (g * (p - t)).to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _xent_fwd_rows_kernel(
    logits_ptr, labels_ptr, loss_ptr, probs_ptr,
    R, C,
    stride_lr, stride_lc,
    stride_tr, stride_tc,
    stride_pr,
    SPARSE: tl.constexpr,
    BLOCK_R: tl.constexpr,
    BLOCK: tl.constexpr,
):  # fmt: skip
    """The forward of BLOCK_R rows of at most BLOCK classes per program (grid: cdiv(R,
    BLOCK_R)), one row per tile row, in one pass as `_xent_fwd_kernel`'s ONE_PASS branch."""
    rows = tl.program_id(0).to(tl.int64) * BLOCK_R + tl.arange(0, BLOCK_R)
    cols = tl.arange(0, BLOCK)
    r_mask = rows < R
    mask = r_mask[:, None] & (cols < C)[None, :]
    x_rows = logits_ptr + rows * stride_lr
    x = tl.load(x_rows[:, None] + cols[None, :] * stride_lc, mask=mask, other=float("-inf"))
    x = x.to(tl.float32)
    # Rows past R are all -inf: give them a max of 0 and a sum of 1 so that nothing computed
    # for them (never stored) is NaN.
    m = tl.where(r_mask, tl.max(x, 1), 0.0)
    e = tl.exp(x - m[:, None])
    s = tl.where(r_mask, tl.sum(e, 1), 1.0)
    p_ptrs = probs_ptr + (rows * stride_pr)[:, None] + cols[None, :]
    tl.store(p_ptrs, (e / s[:, None]).to(probs_ptr.dtype.element_ty), mask=mask)
    log_s = tl.log(s)
    if SPARSE:
        label = tl.load(labels_ptr + rows * stride_tr, mask=r_mask, other=0).to(tl.int64)
        valid = (label >= 0) & (label < C)
        picked = tl.load(x_rows + tl.where(valid, label, 0) * stride_lc, mask=r_mask, other=0.0)
        loss = tl.where(valid, log_s - (picked.to(tl.float32) - m), float("nan"))
    else:
        t_ptrs = labels_ptr + (rows * stride_tr)[:, None] + cols[None, :] * stride_tc
        t = tl.load(t_ptrs, mask=mask, other=0.0).to(tl.float32)
        # Padding lanes hold -inf logits: zero their log-probabilities (not 0 * -inf).
        loss = -tl.sum(t * tl.where(mask, x - m[:, None] - log_s[:, None], 0.0), 1)
    tl.store(loss_ptr + rows, loss.to(loss_ptr.dtype.element_ty), mask=r_mask)


@triton.jit
def _xent_bwd_rows_kernel(
    g_ptr, probs_ptr, labels_ptr, out_ptr,
    R, C,
    stride_gr,
    stride_pr, stride_pc,
    stride_tr, stride_tc,
    stride_or,
    SPARSE: tl.constexpr,
    BLOCK_R: tl.constexpr,
    BLOCK: tl.constexpr,
):  # fmt: skip
    """`g[row] * (probs - target)` for BLOCK_R rows of at most BLOCK classes per program."""
    rows = tl.program_id(0).to(tl.int64) * BLOCK_R + tl.arange(0, BLOCK_R)
    cols = tl.arange(0, BLOCK)
    r_mask = rows < R
    mask = r_mask[:, None] & (cols < C)[None, :]
    g = tl.load(g_ptr + rows * stride_gr, mask=r_mask, other=0.0).to(tl.float32)
    p_ptrs = probs_ptr + (rows * stride_pr)[:, None] + cols[None, :] * stride_pc
    p = tl.load(p_ptrs, mask=mask, other=0.0).to(tl.float32)
    if SPARSE:
        label = tl.load(labels_ptr + rows * stride_tr, mask=r_mask, other=0).to(tl.int64)
        t = tl.where(cols[None, :] == label[:, None], 1.0, 0.0)
    else:
        t_ptrs = labels_ptr + (rows * stride_tr)[:, None] + cols[None, :] * stride_tc
        t = tl.load(t_ptrs, mask=mask, other=0.0).to(tl.float32)
    o_ptrs = out_ptr + (rows * stride_or)[:, None] + cols[None, :]
    tl.store(o_ptrs, (g[:, None] * (p - t)).to(out_ptr.dtype.element_ty), mask=mask)


# Both kernels are memory-bound row loops: configs differ in how many warps share a row (fewer
# than 4 would hold 64 float32 values per thread for a 4096-wide chunk, near the register
# limit). The first is the interpreter's (and KERATRON_TRITON_PIN=1's).
CONFIGS = [
    triton.Config({}, num_warps=4, num_stages=2),
    triton.Config({}, num_warps=8, num_stages=2),
    triton.Config({}, num_warps=16, num_stages=2),
]

FORWARD = Kernel(
    _xent_fwd_kernel, CONFIGS, ["C", "SPARSE", "BLOCK", "ONE_PASS"], "softmax_cross_entropy"
)
BACKWARD = Kernel(_xent_bwd_kernel, CONFIGS, ["C", "SPARSE", "BLOCK"], "softmax_cross_entropy_grad")

# The rows kernels: ROW_TILE elements per program (16 float32 values per thread at 4 warps),
# for rows of up to ROWS_MAX_C classes (8 rows per program at 256 classes; 128 at 10).
ROW_TILE = 2048
ROWS_MAX_C = 256
ROWS_CONFIGS = [
    triton.Config({}, num_warps=4, num_stages=1),
    triton.Config({}, num_warps=8, num_stages=1),
]
_ROWS_KEY = ["R", "C", "SPARSE", "BLOCK_R", "BLOCK"]
FORWARD_ROWS = Kernel(_xent_fwd_rows_kernel, ROWS_CONFIGS, _ROWS_KEY, "softmax_cross_entropy")
BACKWARD_ROWS = Kernel(_xent_bwd_rows_kernel, ROWS_CONFIGS, _ROWS_KEY, "softmax_cross_entropy_grad")


def _block(c: int) -> int:
    return min(triton.next_power_of_2(max(c, 1)), BLOCK_MAX)


def _rows_block(c: int) -> tuple:
    """(BLOCK_R, BLOCK) of the rows kernels for c classes, or None past ROWS_MAX_C."""
    if c > ROWS_MAX_C:
        return None
    block = _block(c)
    return ROW_TILE // block, block


def _check_labels(labels, logits_shape, sparse: bool, float_dtype) -> None:
    if sparse:
        if labels.dtype not in _INT_DTYPES:
            raise NotImplementedError(f"sparse labels of dtype {labels.dtype}")
        if tuple(labels.shape) != tuple(logits_shape[:-1]):
            raise NotImplementedError(
                f"sparse labels of shape {tuple(labels.shape)} for rows {tuple(logits_shape[:-1])}"
            )
    elif labels.dtype != float_dtype or tuple(labels.shape) != tuple(logits_shape):
        raise NotImplementedError(
            f"dense labels of shape {tuple(labels.shape)} and dtype {labels.dtype} "
            f"(expected {tuple(logits_shape)} and {float_dtype})"
        )


def _rows(t, rows: int, c: int | None):
    """`t` as (rows, c) (or (rows,) when c is None); a view when the strides allow."""
    return t.reshape(rows) if c is None else t.reshape(rows, c)


_FORWARD_CACHE, _BACKWARD_CACHE = route_cache(), route_cache()


def _views(*pairs) -> bool:
    """Whether each (reshaped, original) pair shares its address: a copying reshape would
    need redoing per call, so only launches on views are cached."""
    return all(a.data_ptr() == b.data_ptr() for a, b in zip(pairs[::2], pairs[1::2]))


def forward_route(logits, labels, sparse):
    """(per-example loss, probs) of the "softmax_cross_entropy" primitive, on Triton.

    Raises NotImplementedError for dtypes or shapes it does not take (the dispatcher then falls
    back to torch).
    """
    key, state = None, launch_state()
    if state is not None:
        key = (tensor_key(logits), tensor_key(labels), sparse, state)
        cached = _FORWARD_CACHE.get(key)
        if cached is not None:
            return cached(logits, labels)
    if logits.dtype not in FLOAT_DTYPES:
        raise NotImplementedError(f"logits of dtype {logits.dtype}")
    if logits.dim() < 1 or logits.shape[-1] == 0:
        raise NotImplementedError(f"logits of shape {tuple(logits.shape)}")
    _check_labels(labels, logits.shape, sparse, logits.dtype)
    if labels.device != logits.device:
        raise NotImplementedError(f"labels on {labels.device}, logits on {logits.device}")
    c = logits.shape[-1]
    rows = math.prod(logits.shape[:-1])
    loss = torch.empty(logits.shape[:-1], dtype=logits.dtype, device=logits.device)
    probs = torch.empty(logits.shape, dtype=logits.dtype, device=logits.device)
    if rows == 0:
        return loss, probs
    x2 = _rows(logits, rows, c)
    t2 = _rows(labels, rows, None if sparse else c)
    tile = _rows_block(c)
    if tile is not None:
        block_r, block = tile
        relaunch = FORWARD_ROWS.launch(
            lambda meta: (triton.cdiv(rows, block_r),),
            logits_ptr=x2, labels_ptr=t2, loss_ptr=loss, probs_ptr=probs,
            R=rows, C=c,
            stride_lr=x2.stride(0), stride_lc=x2.stride(1),
            stride_tr=t2.stride(0), stride_tc=0 if sparse else t2.stride(1),
            stride_pr=c,
            SPARSE=bool(sparse), BLOCK_R=block_r, BLOCK=block,
        )  # fmt: skip
    else:
        block = _block(c)
        relaunch = FORWARD.launch(
        lambda meta: (rows,),
            logits_ptr=x2, labels_ptr=t2, loss_ptr=loss, probs_ptr=probs,
            C=c,
            stride_lr=x2.stride(0), stride_lc=x2.stride(1),
            stride_tr=t2.stride(0), stride_tc=0 if sparse else t2.stride(1),
            stride_pr=c,
            SPARSE=bool(sparse), BLOCK=block, ONE_PASS=c <= block,
        )  # fmt: skip
    if key is not None and relaunch is not None and _views(x2, logits, t2, labels):
        _FORWARD_CACHE[key] = _cached_forward(loss.shape, probs.shape, relaunch())
    return loss, probs


def _cached_forward(loss_shape, probs_shape, relaunch):
    """The forward route of one signature (`route_cache`)."""

    def route(logits, labels):
        loss = logits.new_empty(loss_shape)  # a tuple: a 1-D batch's loss is 0-d
        probs = logits.new_empty(*probs_shape)
        relaunch(logits, labels, loss, probs)
        return loss, probs

    return route


def backward_route(g, probs, labels, sparse):
    """`g[..., None] * (probs - target)` of the "softmax_cross_entropy_grad" primitive, on
    Triton (target: the one-hot rows of sparse labels, or the dense labels)."""
    key, state = None, launch_state()
    if state is not None:
        key = (tensor_key(g), tensor_key(probs), tensor_key(labels), sparse, state)
        cached = _BACKWARD_CACHE.get(key)
        if cached is not None:
            return cached(g, probs, labels)
    if probs.dtype not in FLOAT_DTYPES or g.dtype not in FLOAT_DTYPES:
        raise NotImplementedError(f"g of dtype {g.dtype} with probs of dtype {probs.dtype}")
    if probs.dim() < 1 or tuple(g.shape) != tuple(probs.shape[:-1]):
        raise NotImplementedError(
            f"g of shape {tuple(g.shape)} for probs of shape {tuple(probs.shape)}"
        )
    _check_labels(labels, probs.shape, sparse, probs.dtype)
    if len({g.device, probs.device, labels.device}) != 1:
        raise NotImplementedError("operands on several devices")
    out_dtype = torch.promote_types(g.dtype, probs.dtype)
    c = probs.shape[-1]
    rows = math.prod(probs.shape[:-1])
    out = torch.empty(probs.shape, dtype=out_dtype, device=probs.device)
    if out.numel() == 0:
        return out
    g1 = _rows(g, rows, None)
    p2 = _rows(probs, rows, c)
    t2 = _rows(labels, rows, None if sparse else c)
    tile = _rows_block(c)
    if tile is not None:
        block_r, block = tile
        relaunch = BACKWARD_ROWS.launch(
            lambda meta: (triton.cdiv(rows, block_r),),
            g_ptr=g1, probs_ptr=p2, labels_ptr=t2, out_ptr=out,
            R=rows, C=c,
            stride_gr=g1.stride(0),
            stride_pr=p2.stride(0), stride_pc=p2.stride(1),
            stride_tr=t2.stride(0), stride_tc=0 if sparse else t2.stride(1),
            stride_or=c,
            SPARSE=bool(sparse), BLOCK_R=block_r, BLOCK=block,
        )  # fmt: skip
    else:
        relaunch = BACKWARD.launch(
            lambda meta: (rows,),
            g_ptr=g1, probs_ptr=p2, labels_ptr=t2, out_ptr=out,
            C=c,
            stride_gr=g1.stride(0),
            stride_pr=p2.stride(0), stride_pc=p2.stride(1),
            stride_tr=t2.stride(0), stride_tc=0 if sparse else t2.stride(1),
            stride_or=c,
            SPARSE=bool(sparse), BLOCK=_block(c),
        )  # fmt: skip
    if key is not None and relaunch is not None and _views(g1, g, p2, probs, t2, labels):
        _BACKWARD_CACHE[key] = _cached_backward(out.shape, out.dtype, relaunch())
    return out


def _cached_backward(shape, dtype, relaunch):
    """The backward route of one signature (`route_cache`)."""

    def route(g, probs, labels):
        out = probs.new_empty(shape, dtype=dtype)
        relaunch(g, probs, labels, out)
        return out

    return route


# ------------------------------------------------------------------------------ ahead of time
def aot_specs(dtypes=(torch.float32, torch.float16)) -> list:
    """(kernel_name, jit_function, signature, constexprs, num_warps, num_stages) for every
    config: forward and backward, sparse (int64 ids) and dense labels, at 1,000 classes (one
    pass) and 50,000 classes (chunked), and the rows kernels at 10 classes (and 200 in
    float32), unit class strides as the JIT specialises them."""
    specs = []
    for dtype in dtypes:
        tt = TRITON_TYPES[dtype]
        for sparse in (True, False):
            kind = "sparse" if sparse else "dense"
            # Sparse labels are int64 ids, one per row: their row stride is the unit one.
            labels = {"labels_ptr": "i64" if sparse else tt}
            unit = "stride_tr" if sparse else "stride_tc"
            for c in (1000, 50000):
                block = _block(c)
                fwd = dict(stride_lc=1, SPARSE=sparse, BLOCK=block, ONE_PASS=c <= block)
                if not sparse:
                    fwd["stride_tc"] = 1
                bwd = {"stride_gr": 1, "stride_pc": 1, unit: 1, "SPARSE": sparse, "BLOCK": block}
                for i, cfg in enumerate(CONFIGS):
                    for kernel, consts, name in (
                        (FORWARD, fwd, f"xent_fwd_{kind}_{tt}_c{c}_cfg{i}"),
                        (BACKWARD, bwd, f"xent_bwd_{kind}_{tt}_c{c}_cfg{i}"),
                    ):
                        label, fn, sig, consts, warps, stages = kernel.aot_spec(
                            name, dtype, consts, cfg
                        )
                        sig.update((k, "*" + v) for k, v in labels.items())
                        specs.append((label, fn, sig, consts, warps, stages))
            # The rows kernels: 10 classes (128 rows per program), and 200 in float32.
            for c in (10, 200) if dtype == torch.float32 else (10,):
                block_r, block = _rows_block(c)
                tile = dict(SPARSE=sparse, BLOCK_R=block_r, BLOCK=block)
                fwd = dict(stride_lc=1, **tile)
                if not sparse:
                    fwd["stride_tc"] = 1
                bwd = {"stride_gr": 1, "stride_pc": 1, unit: 1, **tile}
                for i, cfg in enumerate(ROWS_CONFIGS):
                    for kernel, consts, name in (
                        (FORWARD_ROWS, fwd, f"xent_fwd_rows_{kind}_{tt}_c{c}_cfg{i}"),
                        (BACKWARD_ROWS, bwd, f"xent_bwd_rows_{kind}_{tt}_c{c}_cfg{i}"),
                    ):
                        label, fn, sig, consts, warps, stages = kernel.aot_spec(
                            name, dtype, consts, cfg
                        )
                        sig.update((k, "*" + v) for k, v in labels.items())
                        specs.append((label, fn, sig, consts, warps, stages))
    return specs
