"""Primitives' shape rules against torch: the meta kernels (today's abstract path) and real
execution on the CPU.

A rule that answers must give exactly the (shape, dtype) pairs that the primitive's
implementation gives on meta tensors (and on real ones, where those run); where the meta
kernel raises, the rule must leave the call to it (return None). Rows marked covered must be
answered. Every primitive with a rule has rows here.
"""

import json
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest
import torch

from keratron.autodiff.primitive import PRIMITIVES, Primitive
from keratron.ops import _dispatch
from tests.conftest import require_installed

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

F32, F16, BF16, F64 = torch.float32, torch.float16, torch.bfloat16, torch.float64
I32, I64, I8, U8, BOOL = torch.int32, torch.int64, torch.int8, torch.uint8, torch.bool
ALL_DTYPES = (F32, F16, BF16, F64, I32, I64, I8, U8, BOOL)
PAIR_DTYPES = (F32, F16, F64, I32, I64, U8, BOOL)

# name -> list of (avals, params, covered)
CASES: dict[str, list] = {}


def _add(name, avals, params=None, covered=False):
    CASES.setdefault(name, []).append((avals, params or {}, covered))


# ---------------------------------------------------------------------- elementwise
UNARY_SHAPES = ((2, 3), (), (0, 4), (1,), (2, 1, 3))
for name in ("negative", "abs", "square", "relu", "relu6"):
    for shape in UNARY_SHAPES:
        for dt in ALL_DTYPES:
            _add(name, [(shape, dt)], covered=dt in (F32, F64) or (dt is I32 and name != "relu6"))
for name in (
    "exp",
    "log",
    "log1p",
    "expm1",
    "sqrt",
    "rsqrt",
    "reciprocal",
    "tanh",
    "erf",
    "sigmoid",
    "softplus",
):
    for shape in UNARY_SHAPES:
        for dt in ALL_DTYPES:
            _add(name, [(shape, dt)], covered=dt in (F32, F16, F64))
for shape in UNARY_SHAPES:
    for dt in ALL_DTYPES:
        _add("nan_to_num", [(shape, dt)], dict(nan=0.0, posinf=None, neginf=None), dt is F32)
        for name in ("copy", "stop_gradient", "ones_like", "zeros_like", "logical_not"):
            _add(name, [(shape, dt)], covered=True)
        for name in ("isnan", "isinf", "isfinite"):
            _add(name, [(shape, dt)], covered=dt.is_floating_point)
        for to in (F32, F16, I32, I64, BOOL):
            _add("cast", [(shape, dt)], dict(dtype=to), covered=True)
for to in (F16, F32, I32):
    _add("cast_group", [((2, 3), F32), ((), F32), ((0, 4), F32)], dict(dtype=to), covered=True)
    _add("cast_group", [((5,), I64)], dict(dtype=to), covered=True)
for name in ("relu_grad", "relu6_grad"):
    for dt in (F32, F16, F64, I32):
        _add(name, [((2, 3), dt), ((2, 3), dt)], covered=dt.is_floating_point)
        _add(name, [((0, 3), dt), ((0, 3), dt)], covered=dt.is_floating_point)
    _add(name, [((2, 3), F32), ((3,), F32)])
    _add(name, [((2, 3), F32), ((2, 3), F16)])

BINARY_SHAPES = (
    ((2, 3), (2, 3), True),
    ((2, 3), (3,), True),
    ((4, 1, 3), (5, 1), True),
    ((2, 3), (), True),
    ((), (2, 3), True),
    ((), (), True),
    ((0, 3), (1, 3), True),
    ((0,), (1,), True),
    ((1,), (0,), True),
    ((2, 3), (4, 3), False),
    ((2, 0), (2,), False),
)
BINARY = ("add", "multiply", "maximum", "minimum", "subtract", "power", "divide", "divide_no_nan")
COMPARE = (
    "equal",
    "not_equal",
    "less",
    "less_equal",
    "greater",
    "greater_equal",
    "logical_and",
    "logical_or",
    "logical_xor",
)
for name in BINARY + COMPARE:
    for sx, sy, ok in BINARY_SHAPES:
        for dx in PAIR_DTYPES:
            for dy in PAIR_DTYPES:
                same = dx == dy and dx in (F32, I32)
                _add(name, [(sx, dx), (sy, dy)], covered=ok and same)
        # 0-d operands rank below dimensioned ones of their category (torch.result_type).
        _add(name, [(sx, I32), (sy, F64)], covered=ok)
        _add(name, [(sx, F16), (sy, F32)], covered=ok)
for dt in (F32, I32, I64, U8, BOOL):
    for lo_dt in (F32, F64, I32, I64):
        for shape in ((2, 3), (0,), ()):
            _add("clip", [(shape, dt), ((), lo_dt), ((), lo_dt)], covered=dt is F32 is lo_dt)
    _add("clip", [((2, 3), dt), ((3,), dt), ((2, 1), dt)], covered=dt is F32)
    _add("clip", [((2, 3), dt), ((4,), dt), ((), dt)])
for cond in (BOOL, I32):
    for dx, dy in ((F32, F32), (F32, F64), (I32, F32), (F16, I64), (BOOL, BOOL), (U8, I8)):
        for sc, sx, sy in (
            ((2, 3), (2, 3), (2, 3)),
            ((2, 1), (3,), ()),
            ((), (2, 3), (1, 3)),
            ((0, 3), (3,), ()),
            ((2, 3), (4, 3), (3,)),
        ):
            ok = cond is BOOL and sx != (4, 3)
            _add("where", [(sc, cond), (sx, dx), (sy, dy)], covered=ok and dx == dy == F32)

# ---------------------------------------------------------------------- reductions
REDUCE_SHAPES = ((2, 3, 4), (5,), (), (0, 3), (2, 1))
AXES = (None, 0, 1, -1, (0, 1), (0, 2), (), (1, 1), 3)
for shape in REDUCE_SHAPES:
    for axis in AXES:
        valid_axis = axis in (None, ()) or all(
            -max(len(shape), 1) <= a < max(len(shape), 1)
            for a in (axis if isinstance(axis, tuple) else (axis,))
        )
        valid_axis = valid_axis and axis != (1, 1)
        for keepdims in (False, True):
            params = dict(axis=axis, keepdims=keepdims)
            for dt in ALL_DTYPES:
                _add("sum", [(shape, dt)], params, covered=valid_axis and dt in (F32, I32, I64))
                for name in ("max", "min"):
                    cov = valid_axis and dt is F32 and 0 not in shape
                    _add(name, [(shape, dt)], params, covered=cov)
                _add("logsumexp", [(shape, dt)], params, covered=valid_axis and dt is F32)
for shape in ((2, 3, 4), (5,), (), (0, 3), (3, 0)):
    for axis in (None, 0, -1, (0, 1), 2):
        for keepdims in (False, True):
            for dt in (F32, I32, U8, BOOL):
                ok = 0 not in shape and axis != (0, 1) and dt is not BOOL
                ok = ok and (axis in (None, 0, -1) or (axis == 2 and len(shape) == 3))
                for name in ("argmax", "argmin"):
                    _add(name, [(shape, dt)], dict(axis=axis, keepdims=keepdims), covered=ok)
for shape, axes in (((4, 5, 6, 3), (0, 1, 2)), ((4, 3), (0,)), ((0, 3), (0,)), ((2, 3), (1,))):
    for keepdims in (False, True):
        for dt in (F32, F16, F64):
            _add("moments", [(shape, dt)], dict(axes=axes, keepdims=keepdims), covered=True)
for shape, axis in (((4, 5, 6, 3), 3), ((4, 3), 1), ((0, 3), 1), ((2, 3, 5), 1)):
    channel = ((shape[axis],), F32)
    for affine in (False, True):
        scale = channel if affine else None
        params = dict(axis=axis, epsilon=1e-3)
        _add("batch_norm", [(shape, F32), scale, scale], params, covered=True)
        grad = [(shape, F32), (shape, F32), scale, channel, channel]
        _add("batch_norm_grad", grad, params, covered=True)
for name in ("softmax", "log_softmax"):
    for shape in ((2, 3), (4,), (2, 0), (0, 5)):
        for axis in (0, -1):
            for dt in (F32, F16, F64, I32):
                _add(name, [(shape, dt)], dict(axis=axis), covered=dt.is_floating_point)

# ---------------------------------------------------------------------- shaping
for dt in (F32, I64, BOOL):
    for shape, new, ok in (
        ((2, 3), (3, 2), True),
        ((2, 3), (6,), True),
        ((2, 3), (1, 6, 1), True),
        ((), (1, 1), True),
        ((0, 3), (3, 0), True),
        ((2, 3), (-1,), False),
        ((2, 3), (4, 2), False),
    ):
        _add("reshape", [(shape, dt)], dict(shape=new), covered=ok)
    for shape, axes, ok in (
        ((2, 3, 4), (2, 0, 1), True),
        ((2, 3), (1, 0), True),
        ((0, 5), (1, 0), True),
        ((2, 3, 4), (0, 0, 1), False),
    ):
        _add("transpose", [(shape, dt)], dict(axes=axes), covered=ok)
    for shape, to, ok in (
        ((3,), (2, 3), True),
        ((1, 3), (4, 2, 3), True),
        ((), (2, 2), True),
        ((2, 1), (2, 0), True),
        ((2,), (2, 3), False),
    ):
        _add("broadcast_to", [(shape, dt)], dict(shape=to), covered=ok)
    for widths, ok in ((((1, 2), (0, 3)), True), (((0, 0), (0, 0)), True), (((1, 0),), False)):
        _add("pad", [((2, 3), dt)], dict(widths=widths, value=0), covered=ok)
    _add("pad", [((0, 3), dt)], dict(widths=((1, 1), (2, 0)), value=0), covered=True)
for avals, axis, ok in (
    ([((2, 3), F32), ((4, 3), F32)], 0, True),
    ([((2, 3), F32), ((2, 5), F32), ((2, 0), F32)], 1, True),
    ([((2, 3), F32), ((2, 5), F32)], -1, True),
    ([((2, 3), I32), ((1, 3), F64)], 0, True),
    ([((2, 3), BOOL), ((1, 3), U8)], 0, True),
    ([((2, 3), F32), ((2, 4), F32)], 0, False),
    ([((2, 3), F32), ((3,), F32)], 0, False),
    ([((2, 3), F32), ((0,), F32)], 0, False),
    ([((), F32), ((), F32)], 0, False),
):
    _add("concatenate", avals, dict(axis=axis), covered=ok)
for shape, sizes, axis, ok in (
    ((6, 4), (2, 3, 1), 0, True),
    ((2, 7), (0, 7), -1, True),
    ((2, 0, 3), (0, 0), 1, True),
    ((6, 4), (2, 3), 0, False),
):
    _add("split_sizes", [(shape, F32)], dict(sizes=sizes, axis=axis), covered=ok)


def _slice(start, stop, step=1):
    return ("s", start, stop, step)


for shape, entries, flips, ok in (
    ((5, 6), (_slice(1, 4),), (), True),
    ((5, 6), (Ellipsis, _slice(None, None, 2)), (), True),
    ((5, 6), (2,), (), True),
    ((5, 6), (-1, _slice(-3, None)), (), True),
    ((5, 6), (None, _slice(0, 9), None, 3), (), True),
    ((5, 6, 7), (_slice(None, None), Ellipsis, 0), (1,), True),
    ((5, 6, 7), (Ellipsis, None), (), True),
    ((0, 6), (_slice(None, None, 3), 5), (), True),
    ((5, 6), (_slice(4, 1),), (), True),
    ((5, 6), (7,), (), False),
    ((5, 6), (("b", True),), (), False),
):
    key = (entries, flips)
    for dt in (F32, I64, BOOL):
        _add("get_item", [(shape, dt)], dict(key=key), covered=ok)
    meta = torch.empty(shape, device="meta")
    if ok:
        out = tuple(PRIMITIVES["get_item"].impl(meta, key=key).shape)
        _add("get_item_grad", [(out, F32)], dict(shape=shape, key=key), covered=True)
        _add("get_item_grad", [((*out, 2), F32)], dict(shape=shape, key=key))
_add("get_item", [((5, 6), F32), ((3,), I64)], dict(key=((("t", 0),), ())))
for x, idx, axis, ok in (
    ((20, 8), (4, 5), 0, True),
    ((3, 20, 8), (6,), 1, True),
    ((3, 4), (), 1, True),
    ((3, 4), (2, 0), 0, True),
    ((3, 4), (2,), -1, False),
):
    for idt in (I32, I64, F32):
        _add("take", [(x, F32), (idx, idt)], dict(axis=axis), covered=ok and idt is not F32)
        g = x[:axis] + idx + x[axis + 1 :] if axis >= 0 else x
        _add("take_grad", [(g, F32), (idx, idt)], dict(shape=x, axis=axis), covered=ok)

# ---------------------------------------------------------------------- matmul
for xs, ws, bs, ok in (
    ((4, 3), (3, 5), None, True),
    ((4, 3), (3, 5), (5,), True),
    ((4, 3), (3, 5), (4, 5), True),
    ((2, 7, 4, 3), (3, 5), (5,), True),
    ((7, 1, 4, 3), (6, 3, 5), None, True),
    ((3,), (3, 5), None, True),
    ((4, 3), (3,), None, True),
    ((3,), (3,), None, True),
    ((0, 3), (3, 5), None, True),
    ((4, 0), (0, 5), None, True),
    ((4, 3), (4, 5), None, False),
    ((4, 3), (3, 5), (4,), False),
    ((2, 4, 3), (3, 3, 5), None, False),
):
    for dt in (F32, F16, F64, I64):
        for act in (None, "relu"):
            avals = [(xs, dt), (ws, dt), None if bs is None else (bs, dt)]
            cov = ok and dt.is_floating_point
            _add("matmul", avals, dict(activation=act), covered=cov)
_add("matmul", [((4, 3), F32), ((3, 5), F64), None], dict(activation=None))
for equation, shapes, ok in (
    ("ij,jk->ik", ((4, 3), (3, 5)), True),
    ("abc,cd->abd", ((2, 4, 3), (3, 5)), True),
    ("bqhd,bkhd->bhqk", ((2, 5, 3, 4), (2, 7, 3, 4)), True),
    ("bhqk,bkhd->bqhd", ((2, 3, 5, 7), (2, 7, 3, 4)), True),
    ("ij->j", ((4, 3),), True),
    ("ij,ij->ij", ((4, 1), (1, 3)), True),
    ("i,j->ij", ((0,), (3,)), True),
    ("ij,jk->ik", ((4, 3), (2, 5)), False),
    ("ii->i", ((3, 3),), False),
    ("...j,jk->...k", ((2, 4, 3), (3, 5)), False),
):
    for dt in (F32, F64, I64):
        avals = [(s, dt) for s in shapes]
        _add("einsum", avals, dict(equation=equation), covered=ok and dt is not I64)
_add("einsum", [((4, 3), F32), ((3, 5), F64)], dict(equation="ij,jk->ik"))
_add("matmul", [((4, 3), F32), ((3, 5), F32), ((5,), F64)], dict(activation=None))


# ---------------------------------------------------------------------- conv and pooling
def _conv_rows():
    # (x, kernel, strides, padding, dilation, groups)
    yield (1, 9, 9, 4), (3, 3, 4, 6), (1, 1), ((0, 0), (0, 0)), (1, 1), 1
    yield (2, 10, 11, 3), (3, 3, 3, 8), (2, 2), ((1, 1), (1, 1)), (1, 1), 1
    yield (2, 10, 11, 3), (3, 2, 3, 8), (2, 3), ((0, 1), (1, 0)), (1, 1), 1
    yield (1, 12, 12, 4), (3, 3, 4, 4), (1, 1), ((2, 2), (2, 2)), (2, 2), 1
    yield (2, 8, 8, 6), (3, 3, 1, 6), (1, 1), ((1, 1), (1, 1)), (1, 1), 6  # depthwise
    yield (2, 8, 8, 6), (3, 3, 1, 12), (2, 2), ((0, 1), (0, 1)), (1, 1), 6  # multiplier 2
    yield (2, 8, 8, 4), (1, 1, 2, 6), (1, 1), ((0, 0), (0, 0)), (1, 1), 2
    yield (3, 7, 5, 5), (1, 1, 5, 7), (1, 1), ((0, 0), (0, 0)), (1, 1), 1  # pointwise
    yield (0, 5, 5, 2), (3, 3, 2, 4), (1, 1), ((1, 1), (1, 1)), (1, 1), 1
    yield (2, 9, 3), (3, 3, 5), (2,), ((1, 1),), (1,), 1  # 1D
    yield (1, 5, 6, 7, 2), (2, 3, 2, 2, 4), (1, 2, 1), ((0, 0), (1, 1), (0, 1)), (1, 1, 1), 1


for x, k, strides, padding, dilation, groups in _conv_rows():
    conv = dict(strides=strides, padding=padding, dilation=dilation, groups=groups)
    for dt in (F32, F64, F16):
        for bias in (False, True):
            b = ((k[-1],), dt) if bias else None
            act = "relu" if bias else None
            _add("conv", [(x, dt), (k, dt), b], dict(conv, activation=act), covered=True)
    meta = torch.empty(x, device="meta")
    out_shape = (
        PRIMITIVES["conv"]
        .impl(meta, torch.empty(k, device="meta"), None, activation=None, **conv)
        .shape
    )
    for dt in (F32, F64):
        _add(
            "conv_grad_input",
            [(tuple(out_shape), dt), (k, dt)],
            dict(conv, input_shape=x),
            covered=True,
        )
        _add(
            "conv_grad_filter",
            [(x, dt), (tuple(out_shape), dt)],
            dict(conv, kernel_shape=k),
            covered=True,
        )
# Kernels that do not fit, mismatched channels or dtypes: left to torch.
_add(
    "conv",
    [((1, 2, 2, 3), F32), ((3, 3, 3, 4), F32), None],
    dict(strides=(1, 1), padding=((0, 0), (0, 0)), dilation=(1, 1), groups=1, activation=None),
)
_add(
    "conv",
    [((1, 5, 5, 3), F32), ((3, 3, 2, 4), F32), None],
    dict(strides=(1, 1), padding=((0, 0), (0, 0)), dilation=(1, 1), groups=1, activation=None),
)
_add(
    "conv",
    [((1, 5, 5, 3), F32), ((3, 3, 3, 4), F64), None],
    dict(strides=(1, 1), padding=((0, 0), (0, 0)), dilation=(1, 1), groups=1, activation=None),
)

POOL_ROWS = (
    ((2, 8, 8, 3), (2, 2), (2, 2), ((0, 0), (0, 0))),
    ((2, 9, 7, 3), (3, 3), (2, 2), ((1, 1), (1, 1))),
    ((2, 9, 7, 3), (3, 3), (1, 1), ((1, 1), (1, 1))),
    ((1, 10, 10, 4), (3, 3), (2, 2), ((0, 1), (0, 1))),
    ((1, 1, 9, 2), (1, 3), (1, 2), ((0, 0), (1, 1))),
    ((0, 4, 4, 2), (2, 2), (2, 2), ((0, 0), (0, 0))),
    ((1, 6, 5, 4, 2), (2, 2, 2), (2, 1, 2), ((0, 0), (0, 1), (1, 0))),
)
for x, pool, strides, padding in POOL_ROWS:
    params = dict(pool_size=pool, strides=strides, padding=padding)
    for dt in (F32, F64, I32):
        _add("max_pool", [(x, dt)], params, covered=dt is not I32 or len(x) == 4)
        _add("avg_pool", [(x, dt)], params, covered=dt.is_floating_point)
    meta = torch.empty(x, device="meta")
    out, idx = PRIMITIVES["max_pool"].impl(meta, **params)
    for dt in (F32, F64):
        _add(
            "max_pool_grad",
            [(x, dt), (tuple(out.shape), dt), (tuple(idx.shape), I64)],
            params,
            covered=True,
        )
        _add("max_pool_grad", [(x, dt), (tuple(out.shape), dt), None], params, covered=True)
        _add("max_pool_gather", [(x, dt), (x, dt)], params, covered=x[0] > 0)
        _add(
            "avg_pool_grad",
            [(tuple(out.shape), dt)],
            dict(params, input_shape=x),
            covered=True,
        )
_add(
    "max_pool", [((1, 2, 2, 3), F32)], dict(pool_size=(3, 3), strides=(1, 1), padding=((0, 0),) * 2)
)
# The fused convolution + max pool of CPU inference plans: a convolution's rows, then a pool.
for x, k, strides, padding, pool, pool_strides in (
    ((2, 12, 12, 3), (3, 3, 3, 8), (1, 1), ((0, 0), (0, 0)), (2, 2), (2, 2)),
    ((1, 15, 13, 4), (3, 3, 4, 6), (1, 1), ((1, 1), (1, 1)), (3, 3), (2, 2)),
    ((0, 9, 9, 2), (3, 3, 2, 5), (2, 2), ((0, 0), (0, 0)), (2, 3), (1, 2)),
):
    fused = dict(strides=strides, padding=padding, dilation=(1, 1), groups=1, activation="relu")
    fused.update(pool_size=pool, pool_strides=pool_strides)
    for dt in (F32, F64):
        _add("conv_max_pool", [(x, dt), (k, dt), ((k[-1],), dt)], fused, covered=True)
# The pool's window does not fit the convolution's output: left to torch.
_add(
    "conv_max_pool",
    [((1, 5, 5, 3), F32), ((3, 3, 3, 4), F32), None],
    dict(
        strides=(1, 1),
        padding=((0, 0), (0, 0)),
        dilation=(1, 1),
        groups=1,
        activation=None,
        pool_size=(4, 4),
        pool_strides=(1, 1),
    ),
)

# ---------------------------------------------------------------------- losses
for shape in ((4, 10), (2, 3, 5), (0, 7), (3, 1)):
    for ldt in (I32, I64, U8):
        _add("check_class_ids", [(shape[:-1], ldt)], dict(num_classes=shape[-1]), covered=True)
        _add(
            "softmax_cross_entropy_one_hot",
            [(shape[:-1], ldt)],
            dict(num_classes=shape[-1], dtype=F32),
            covered=True,
        )
    for dt in (F32, F16, F64):
        _add("softmax_cross_entropy", [(shape, dt), (shape[:-1], I64)], dict(sparse=True), True)
        _add("softmax_cross_entropy", [(shape, dt), (shape, dt)], dict(sparse=False), True)
        _add(
            "softmax_cross_entropy_grad",
            [(shape[:-1], dt), (shape, dt), (shape[:-1], I32)],
            dict(sparse=True),
            covered=True,
        )
        _add(
            "softmax_cross_entropy_grad",
            [(shape[:-1], dt), (shape, dt), (shape, dt)],
            dict(sparse=False),
            covered=True,
        )
_add("softmax_cross_entropy", [((4, 10), F32), ((4, 9), F32)], dict(sparse=False))
_add("softmax_cross_entropy", [((4, 10), I32), ((4,), I64)], dict(sparse=True))

# ---------------------------------------------------------------------- LSTM (oneDNN form)
for batch, steps, feat, units, bias in (
    (3, 5, 4, 6, True),
    (2, 1, 3, 2, False),
    (0, 4, 3, 2, True),
):
    x = ((batch, steps, feat), F32)
    k, rk = ((feat, 4 * units), F32), ((units, 4 * units), F32)
    b = ((4 * units,), F32) if bias else None
    h0 = c0 = ((batch, units), F32)
    for reverse in (False, True):
        _add("lstm_onednn", [x, k, rk, b, h0, c0], dict(reverse=reverse), covered=True)
    all_h = ((batch, steps, units), F32)
    ws = ((0,), U8)
    _add(
        "lstm_onednn_grad",
        [all_h, h0, c0, x, k, rk, b, h0, c0, all_h, h0, c0, ws],
        dict(reverse=False),
        covered=True,
    )
    _add(
        "lstm_onednn_grad",
        [None, h0, None, x, k, rk, b, h0, c0, all_h, h0, c0, ws],
        dict(reverse=True),
        covered=True,
    )


RNN = dict(activation="tanh", recurrent_activation="sigmoid", zero_output_for_mask=False)
for batch, steps, units, masked in ((3, 4, 2, False), (2, 1, 3, True), (0, 3, 2, False)):
    mask = ((batch, steps), BOOL) if masked else None
    h = ((batch, units), F32)
    for reverse in (False, True):
        params = dict(RNN, reverse=reverse)
        proj = ((batch, steps, 4 * units), F32)
        _add("lstm", [proj, h, h, ((units, 4 * units), F32), mask], params, covered=True)
        all_h = ((batch, steps, units), F32)
        gates, cells = ((steps, batch, 4 * units), F32), ((steps, batch, units), F32)
        lstm_grad = [all_h, h, h, h, h, ((units, 4 * units), F32), mask, all_h, gates, cells]
        _add("lstm_grad", lstm_grad, params, covered=True)
        for reset_after in (True, False):
            params = dict(RNN, reverse=reverse, reset_after=reset_after)
            proj = ((batch, steps, 3 * units), F32)
            k = ((units, 3 * units), F32)
            rb = ((3 * units,), F32) if reset_after else None
            _add("gru", [proj, h, k, rb, mask], params, covered=True)
            gates, aux = ((steps, batch, 3 * units), F32), ((steps, batch, units), F32)
            gru_grad = [all_h, h, h, k, rb, mask, all_h, gates, aux]
            _add("gru_grad", gru_grad, params, covered=True)


# remat_barrier: the value passes through; the values it waits on only order it
for dt in (F32, F16, I32, BOOL):
    for shape in ((2, 3), (), (0, 4)):
        _add("remat_barrier", [(shape, dt)], covered=True)
        _add("remat_barrier", [(shape, dt), ((5,), F32), ((2, 2), F16)], covered=True)


# ---------------------------------------------------------------------- the checks
def _meta_avals(prim, avals, params):
    """Today's abstract path: the abstract rule (or impl) on meta tensors; None if it raises."""
    metas = [None if a is None else torch.empty(a[0], dtype=a[1], device="meta") for a in avals]
    try:
        out = (prim.abstract or prim.impl)(*metas, **params)
    except (RuntimeError, ValueError, TypeError, IndexError, NotImplementedError):
        return None
    outs = out if prim.multiple_results else (out,)
    return [(tuple(o.shape), o.dtype) for o in outs]


def _real_avals(prim, avals, params):
    """The implementation run on zero-filled CPU tensors; None if it raises."""
    vals = [None if a is None else torch.zeros(a[0], dtype=a[1]) for a in avals]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # var_mean over no element, say
            out = prim.impl(*vals, **params)
    except (RuntimeError, ValueError, TypeError, IndexError, NotImplementedError):
        return None
    outs = out if prim.multiple_results else (out,)
    return [(tuple(o.shape), o.dtype) for o in outs]


def _ruled():
    return sorted(name for name, p in PRIMITIVES.items() if p.shape_rule is not None)


def test_every_primitive_with_a_rule_has_covered_rows():
    missing = [n for n in _ruled() if not any(c for _, _, c in CASES.get(n, ()))]
    assert not missing, f"shape rules without covered test rows: {missing}"
    unknown = [n for n in CASES if n not in PRIMITIVES or PRIMITIVES[n].shape_rule is None]
    assert not unknown, f"test rows for primitives without a rule: {unknown}"


@pytest.mark.parametrize("name", sorted(CASES))
def test_rule_agrees_with_the_meta_kernel_and_real_execution(name):
    prim = PRIMITIVES[name]
    for avals, params, covered in CASES[name]:
        where = f"{name}{tuple(avals)} {params}"
        got = prim.shape_rule(*avals, **params)
        want = _meta_avals(prim, avals, params)
        if want is None:
            assert got is None, f"{where}: the meta kernel raises, the rule answered {got}"
            assert not covered, f"{where}: a covered row the meta kernel rejects"
            continue
        if covered:
            assert got is not None, f"{where}: the rule left a covered row to the meta kernel"
        if got is None:
            continue
        got = [(tuple(s), d) for s, d in got]
        assert got == want, f"{where}: rule {got} != meta kernel {want}"
        real = _real_avals(prim, avals, params)
        if real is not None:
            assert got == real, f"{where}: rule {got} != real execution {real}"


def test_abstract_eval_and_the_dispatcher_use_the_rule_and_fall_back_without_it():
    calls = []

    def impl(x):
        calls.append(x.device.type)
        return x.sum(0)

    def rule(x):
        return None if x[1] is torch.bool else [(x[0][1:], x[1])]

    prim = Primitive("test_shape_rules_sum0", impl, shape_rule=rule)
    try:
        assert prim.abstract_eval([((4, 3), F32)], {}) == [((3,), F32)]
        out = _dispatch.execute(prim, [torch.empty((4, 3), device="meta")], {})
        assert out.is_meta and tuple(out.shape) == (3,) and out.dtype is F32
        assert calls == []  # no kernel ran, not even on meta tensors
        # Concrete values and calls the rule leaves alone run the implementation.
        assert _dispatch.execute(prim, [torch.ones((2, 3))], {}).tolist() == [2.0] * 3
        assert prim.abstract_eval([((4, 3), BOOL)], {}) == [((3,), I64)]
        assert calls == ["cpu", "meta"]
    finally:
        del PRIMITIVES["test_shape_rules_sum0"]


SCRIPT = r"""
import json, sys
import numpy as np
import keratron as kt

layers = kt.layers
rng = np.random.default_rng(0)
report = {}

def run(name, model, x, y, loss):
    model.compile(optimizer=kt.optimizers.Adam(1e-3), loss=loss)
    model.fit(x, y, batch_size=4, epochs=1, verbose=0)
    out = model.predict(x, batch_size=4, verbose=0)
    report[name] = [list(out.shape), "torch._dynamo" in sys.modules, "sympy" in sys.modules]

cnn = kt.Sequential([
    kt.Input(shape=(28, 28, 1)),
    layers.Conv2D(8, 3, activation="relu"),
    layers.Conv2D(16, 3, activation="relu"),
    layers.MaxPooling2D(2),
    layers.Flatten(),
    layers.Dense(32, activation="relu"),
    layers.Dense(10),
])
x = rng.random((8, 28, 28, 1), dtype=np.float32)
y = rng.integers(0, 10, size=(8,))
run("cnn", cnn, x, y, kt.losses.SparseCategoricalCrossentropy(from_logits=True))

lstm = kt.Sequential([
    kt.Input(shape=(12,), dtype="int32"),
    layers.Embedding(100, 16),
    layers.LSTM(16),
    layers.Dense(1, activation="sigmoid"),
])
x = rng.integers(0, 100, size=(8, 12)).astype(np.int32)
y = rng.integers(0, 2, size=(8, 1)).astype(np.float32)
run("lstm", lstm, x, y, "binary_crossentropy")

mobilenet = kt.applications.MobileNet(
    input_shape=(32, 32, 3), alpha=0.25, weights=None, classes=10
)
x = rng.random((4, 32, 32, 3), dtype=np.float32)
y = rng.integers(0, 10, size=(4,))
run("mobilenet", mobilenet, x, y, "sparse_categorical_crossentropy")
print(json.dumps(report))
"""


def test_building_fitting_and_predicting_import_neither_dynamo_nor_sympy():
    r = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout.strip().splitlines()[-1])
    assert report == {
        "cnn": [[8, 10], False, False],
        "lstm": [[8, 1], False, False],
        "mobilenet": [[4, 10], False, False],
    }


# A symbolic model whose take_along_axis has no shape rule (so its shape comes from torch's
# meta kernels, which import torch._dynamo, which imports triton when it can), compiled with a
# metric that gathers too, trained and run, in a process that imports TensorFlow before or
# after keratron and never imports triton itself.
BESIDE_TENSORFLOW = """
import json, sys
import {first}, {second}
import numpy as np
import keratron as keras
from keratron import ops

from keratron.autodiff.primitive import PRIMITIVES

# Its shape comes from the meta kernels (else pick another op without a rule).
assert PRIMITIVES["take_along_axis"].shape_rule is None
inp = keras.Input((5,))
lowest = ops.take_along_axis(inp, ops.argsort(inp)[:, :2], axis=1)
model = keras.Model(inp, keras.layers.Dense(3, activation="softmax")(lowest))
model.compile("adam", "sparse_categorical_crossentropy",
              metrics=[keras.metrics.SparseTopKCategoricalAccuracy(k=1)])
rng = np.random.default_rng(0)
x = rng.random((16, 5)).astype("float32")
model.fit(x, rng.integers(0, 3, 16), epochs=1, batch_size=8, verbose=0)
picked = keras.Model(inp, lowest).predict(x, verbose=0)
print(json.dumps([picked.tolist(), "triton" in sys.modules, "torch._dynamo" in sys.modules]))
"""


@pytest.mark.parametrize("first", ["tensorflow", "keratron"])
def test_ops_without_a_shape_rule_run_in_a_process_that_loaded_tensorflow(first):
    # Triton loaded after TensorFlow aborts the process (both bundle LLVM); torch's meta
    # kernels would load it through torch._dynamo (prepare_meta_kernels hides it then).
    require_installed("tensorflow")
    second = "keratron" if first == "tensorflow" else "tensorflow"
    # Keras's default backend: importing TensorFlow with Keras on torch (the suite's setting)
    # imports Keras, whose torch backend loads triton itself, outside keratron.
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", KERAS_BACKEND="tensorflow")
    r = subprocess.run(
        [sys.executable, "-c", BESIDE_TENSORFLOW.format(first=first, second=second)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    picked, triton_loaded, dynamo_loaded = json.loads(r.stdout.strip().splitlines()[-1])
    x = np.random.default_rng(0).random((16, 5)).astype("float32")
    np.testing.assert_array_equal(np.asarray(picked, "float32"), np.sort(x, axis=1)[:, :2])
    assert (triton_loaded, dynamo_loaded) == (False, True)
