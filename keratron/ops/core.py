"""`keras.ops.core`: conversion, scatter/slice updates and (eager) control flow.

Scatters and slice updates are primitives with VJPs written in keratron ops; the gather that
is a scatter's backward (`gather_nd`) lives here too. Control flow runs eagerly, in Python,
as Keras's torch backend does: gradients flow through whatever ops the branches and bodies
call.
"""

from __future__ import annotations

import builtins
import functools

import numpy as np
import torch

from keratron.autodiff import tree
from keratron.autodiff.dtypes import standardize_dtype
from keratron.autodiff.tape import custom_gradient
from keratron.autodiff.tape import stop_gradient as _stop_gradient
from keratron.autodiff.tensor import Tensor, is_tensor
from keratron.autodiff.tensor import convert_to_tensor as _convert_to_tensor
from keratron.ops._core import (
    Primitive,
    as_tensor,
    canonical_axis,
)
from keratron.ops.arrays import (
    _slice_along,
)
from keratron.ops.elementwise import (
    cast,
    divide,
    equal,
    multiply,
    ones_like_p,
    saturate_cast,
    where,
    zeros_like_p,
)
from keratron.ops.shaping import (
    _check_range,
    _with,
    broadcast_to,
    concatenate,
    flip,
    get_item,
    index_p,
    reshape,
    shape,
    stack,
    transpose,
    unstack,
)

__all__ = [
    "convert_to_tensor",
    "convert_to_numpy",
    "is_tensor",
    "stop_gradient",
    "dtype",
    "cast",
    "custom_gradient",
    "scatter",
    "scatter_update",
    "slice",
    "slice_update",
    "cond",
    "switch",
    "fori_loop",
    "while_loop",
    "map",
    "scan",
    "vectorized_map",
    # defined with their families, re-exported under keras.ops.core
    "saturate_cast",
    "shape",
    "unstack",
]


# ------------------------------------------------------------------------ conversion
def convert_to_tensor(x, dtype=None, sparse=None, ragged=None):
    """Converts arrays, Python values and torch tensors to a keratron Tensor.

    Python floats become floatx and Python ints int32, as in Keras. Sparse and ragged
    tensors do not exist in keratron, so `sparse=True` / `ragged=True` raise ValueError.

    Example:
        >>> keratron.ops.convert_to_tensor([1.0, 2.0]).dtype
        'float32'
    """
    if sparse:
        raise ValueError(
            f"convert_to_tensor: keratron has no sparse tensors. Received: sparse={sparse}"
        )
    if ragged:
        raise ValueError(
            f"convert_to_tensor: keratron has no ragged tensors. Received: ragged={ragged}"
        )
    return _convert_to_tensor(x, dtype=dtype)


def convert_to_numpy(x):
    """A numpy copy of `x` (a Tensor, torch tensor, array-like, or a list of tensors).

    Example:
        >>> keratron.ops.convert_to_numpy(keratron.ops.ones((2,)))
        array([1., 1.], dtype=float32)
    """
    if isinstance(x, Tensor):
        return np.array(x.numpy())
    if isinstance(x, torch.Tensor):
        v = x.detach().cpu()
        return (v.float() if v.dtype is torch.bfloat16 else v).numpy().copy()
    if isinstance(x, (list, tuple)):
        return np.array([convert_to_numpy(e) for e in x])
    return np.array(x)


def stop_gradient(variable):
    """`variable` as a constant: no gradient flows back through it.

    Example:
        >>> y = keratron.ops.stop_gradient(keratron.ops.ones((2,)))
    """
    return _stop_gradient(variable)


def dtype(x) -> str:
    """The standardized dtype name of `x`, e.g. "float32".

    Example:
        >>> keratron.ops.dtype(keratron.ops.zeros((2,)))
        'float32'
    """
    d = getattr(x, "dtype", None)
    if d is None:
        return as_tensor(x).dtype
    return standardize_dtype(d)


# ------------------------------------------------------------------------ scatter
def _nd_index(idx, shape):
    """(..., k) index tensor -> k flat index columns, negatives counted from the end."""
    k = idx.shape[-1]
    flat = idx.reshape(-1, k).long()
    cols = []
    for j in range(k):
        c = flat[:, j]
        cols.append(torch.where(c < 0, c + shape[j], c))
    return tuple(cols)


def _linear_index(idx, lead):
    cols = _nd_index(idx, lead)
    lin = torch.zeros_like(cols[0]) if cols else idx.new_zeros((0,), dtype=torch.long)
    for c, d in zip(cols, lead):
        lin = lin * d + c
    return lin


def _scatter_impl(idx, values, shape):
    k = idx.shape[-1]
    out = values.new_zeros(shape)
    return out.index_put_(_nd_index(idx, shape), values.reshape((-1,) + shape[k:]), accumulate=True)


def _gather_nd_impl(x, idx):
    k = idx.shape[-1]
    return x[_nd_index(idx, x.shape)].reshape(idx.shape[:-1] + x.shape[k:])


scatter_p = Primitive(
    "scatter",
    _scatter_impl,
    lambda g, idx, values, out, shape: (None, gather_nd_p.bind(g, idx)),
)
gather_nd_p = Primitive(
    "gather_nd",
    _gather_nd_impl,
    lambda g, x, idx, out: (scatter_p.bind(idx, g, shape=x.shape), None),
)


def _winners_impl(idx, lead):
    """For each position of the `lead` index space, the id of the last update written there
    (-1 where none is): duplicates resolve deterministically to the last one."""
    lin = _linear_index(idx, lead)
    w = torch.full((int(np.prod(lead)),), -1, dtype=torch.long, device=idx.device)
    ids = torch.arange(lin.shape[0], device=idx.device)
    return w.scatter_reduce_(0, lin, ids, "amax", include_self=True).reshape(lead)


_REDUCE = {"max": "amax", "min": "amin", "mul": "prod"}


def _scatter_update_impl(x, idx, upd, reduction):
    k = idx.shape[-1]
    lead, rest = x.shape[:k], x.shape[k:]
    if reduction == "add":
        return x.clone().index_put_(
            _nd_index(idx, lead), upd.reshape((-1,) + rest), accumulate=True
        )
    flat_x = x.reshape((-1,) + rest)
    flat_u = upd.reshape((-1,) + rest)
    if reduction in _REDUCE:
        lin = _linear_index(idx, lead).reshape((-1,) + (1,) * len(rest)).expand(flat_u.shape)
        out = flat_x.clone().scatter_reduce_(0, lin, flat_u, _REDUCE[reduction], include_self=True)
        return out.reshape(x.shape)
    if flat_u.shape[0] == 0:
        return x.clone()
    w = _winners_impl(idx, lead).reshape(-1)
    picked = flat_u[w.clamp(min=0)]
    keep = (w >= 0).reshape((-1,) + (1,) * len(rest))
    return torch.where(keep, picked, flat_x).reshape(x.shape)


def _winning_grad_impl(g, idx):
    """The cotangent each update receives under last-write-wins: g at its index if it won
    that position, else 0. Masks are computed here, next to the data, so a traced graph
    carries no constant masks."""
    k = idx.shape[-1]
    lead, rest = g.shape[:k], g.shape[k:]
    picked = g[_nd_index(idx, lead)]  # (N,) + rest
    n = picked.shape[0]
    won = _winners_impl(idx, lead).reshape(-1)[_linear_index(idx, lead)] == torch.arange(
        n, device=g.device
    )
    out = torch.where(won.reshape((-1,) + (1,) * len(rest)), picked, 0)
    return out.reshape(idx.shape[:-1] + rest)


# Linear in g; its adjoint writes each winner's cotangent back, which is last-write-wins
# scattering into zeros.
winning_grad_p = Primitive(
    "scatter_update_winning_grad",
    _winning_grad_impl,
    lambda h, g, idx, out: (
        scatter_update_p.bind(zeros_like_p.bind(g), idx, h, reduction=None),
        None,
    ),
)


def _scatter_update_vjp(g, x, idx, upd, out, reduction):
    if reduction == "add":
        return g, None, gather_nd_p.bind(g, idx)
    if reduction is None:
        # Overwritten positions pass no gradient to `inputs`: write zeros there.
        hole = scatter_update_p.bind(g, idx, zeros_like_p.bind(upd), reduction=None)
        return hole, None, winning_grad_p.bind(g, idx)
    if reduction in ("max", "min"):
        # Ties share the gradient equally between the input and the updates equal to the result.
        hit_x = cast(equal(x, out), g.dtype)
        hit_u = cast(equal(upd, gather_nd_p.bind(out, idx)), g.dtype)
        count = scatter_update_p.bind(hit_x, idx, hit_u, reduction="add")
        gn = divide(g, count)
        return multiply(gn, hit_x), None, multiply(gather_nd_p.bind(gn, idx), hit_u)
    # mul: out = x * prod(u). d/du_i needs the product of everything else at that position,
    # computed without dividing by zero: count the zero updates per position and divide only
    # by nonzero ones.
    prod_u = scatter_update_p.bind(ones_like_p.bind(x), idx, upd, reduction="mul")
    zero = equal(upd, 0)
    safe = where(zero, 1, upd)
    nonzero_prod = scatter_update_p.bind(x, idx, safe, reduction="mul")
    zeros = scatter_update_p.bind(zeros_like_p.bind(x), idx, cast(zero, g.dtype), reduction="add")
    nz_i = gather_nd_p.bind(nonzero_prod, idx)
    z_i = gather_nd_p.bind(zeros, idx)
    others = where(zero, where(equal(z_i, 1), nz_i, 0), where(equal(z_i, 0), divide(nz_i, safe), 0))
    return multiply(g, prod_u), None, multiply(gather_nd_p.bind(g, idx), others)


scatter_update_p = Primitive("scatter_update", _scatter_update_impl, _scatter_update_vjp)


def _nd_indices(indices, shape, op) -> Tensor:
    t = as_tensor(indices)
    if t._value.is_floating_point() or t._value.is_complex() or t.dtype == "bool":
        raise TypeError(f"{op}: indices must be integers. Received dtype {t.dtype}.")
    if t.ndim == 0 or t.shape[-1] > len(shape) or t.shape[-1] == 0:
        raise ValueError(
            f"{op}: indices must have shape (..., k) with 1 <= k <= {len(shape)} for a target "
            f"of shape {tuple(shape)}. Received indices of shape {t.shape}."
        )
    for j in range(t.shape[-1]):
        col = Tensor(t._value[..., j])
        _check_range(col, shape[j], op, f"axis {j} of shape {tuple(shape)}")
    return t


def _match_values(values, idx, shape, op, arg):
    want = idx.shape[:-1] + tuple(shape[idx.shape[-1] :])
    if values.shape == want:
        return values
    if values.size != int(np.prod(want)):
        raise ValueError(
            f"{op}: {arg} must have shape {want} (indices.shape[:-1] + shape[k:]) for indices "
            f"of shape {idx.shape} and a target of shape {tuple(shape)}. Received {arg} of "
            f"shape {values.shape}."
        )
    return reshape(values, want)


def scatter(indices, values, shape):
    """A zeros tensor of `shape` with `values` added at `indices` (shape (..., k): each row
    addresses an element, or a slice when k < len(shape)); duplicate indices accumulate.

    Example:
        >>> keratron.ops.scatter([[0, 1], [0, 1]], [1.0, 2.0], (2, 2)).numpy()
        array([[0., 3.],
               [0., 0.]], dtype=float32)
    """
    shp = tuple(int(d) for d in shape)
    values = as_tensor(values)
    idx = _nd_indices(indices, shp, "scatter")
    idx = _with(idx, values)
    values = _match_values(values, idx, shp, "scatter", "values")
    return scatter_p.bind(idx, values, shape=shp)


def scatter_update(inputs, indices, updates, reduction=None):
    """`inputs` with `updates` written at `indices` (shape (N, k)); with duplicates the last
    update wins, or they combine by `reduction` ("add", "max", "min", "mul").

    Example:
        >>> keratron.ops.scatter_update(keratron.ops.zeros((4,)), [[0], [2]], [1.0, 2.0]).numpy()
        array([1., 0., 2., 0.], dtype=float32)
    """
    if reduction is not None:
        reduction = str(reduction).lower()
        if reduction not in ("add", "max", "min", "mul"):
            raise ValueError(
                "scatter_update: reduction must be None, 'add', 'max', 'min' or 'mul'. "
                f"Received: reduction={reduction!r}"
            )
    x = as_tensor(inputs)
    idx = _nd_indices(indices, x.shape, "scatter_update")
    idx = _with(idx, x)
    upd = cast(as_tensor(updates), x.dtype)
    upd = _with(upd, x)
    upd = _match_values(upd, idx, x.shape, "scatter_update", "updates")
    return scatter_update_p.bind(x, idx, upd, reduction=reduction)


# ------------------------------------------------------------------------ slices
def _ints(v, op, arg):
    if isinstance(v, Tensor):
        v = v.numpy()
    a = np.asarray(v)
    if a.ndim != 1 or (a.size and a.dtype.kind not in "iu"):
        raise TypeError(f"{op}: `{arg}` must be a 1-D sequence of ints. Received: {arg}={v!r}")
    return tuple(int(i) for i in a)


def _slice_spec(starts, sizes):
    return tuple(("s", s, s + d, 1) for s, d in zip(starts, sizes))


def slice(inputs, start_indices, shape):
    """The block of `inputs` starting at `start_indices` with the given `shape` (-1: to the
    end of that axis); differentiable.

    Example:
        >>> keratron.ops.slice(keratron.ops.arange(10).reshape(2, 5), [0, 1], [2, 3]).numpy()
        array([[1, 2, 3],
               [6, 7, 8]], dtype=int32)
    """
    x = as_tensor(inputs)
    starts = _ints(start_indices, "slice", "start_indices")
    sizes = _ints(shape, "slice", "shape")
    if len(starts) != x.ndim or len(sizes) != x.ndim:
        raise ValueError(
            f"slice: start_indices and shape need one entry per axis of inputs of shape "
            f"{x.shape}. Received start_indices={starts}, shape={sizes}."
        )
    sizes = tuple(d - s if z == -1 else z for d, s, z in zip(x.shape, starts, sizes))
    if builtins.any(s < 0 or z < 0 or s + z > d for s, z, d in zip(starts, sizes, x.shape)):
        raise ValueError(
            f"slice: a block of shape {sizes} starting at {starts} does not fit in inputs of "
            f"shape {x.shape}."
        )
    return index_p.bind(x, key=(_slice_spec(starts, sizes), ()))


def _slice_update_impl(x, upd, starts):
    out = x.clone()
    out[tuple(builtins.slice(s, s + d) for s, d in zip(starts, upd.shape))] = upd
    return out


def _slice_update_vjp(g, x, upd, out, starts):
    hole = slice_update_p.bind(g, zeros_like_p.bind(upd), starts=starts)
    return hole, index_p.bind(g, key=(_slice_spec(starts, upd.shape), ()))


slice_update_p = Primitive("slice_update", _slice_update_impl, _slice_update_vjp)


def slice_update(inputs, start_indices, updates):
    """`inputs` with the block at `start_indices` replaced by `updates` (same rank);
    differentiable in both.

    Example:
        >>> keratron.ops.slice_update(keratron.ops.zeros((2, 3)), [1, 1], [[1.0, 2.0]]).numpy()
        array([[0., 0., 0.],
               [0., 1., 2.]], dtype=float32)
    """
    x = as_tensor(inputs)
    starts = _ints(start_indices, "slice_update", "start_indices")
    upd = cast(as_tensor(updates), x.dtype)
    upd = _with(upd, x)
    if len(starts) != x.ndim or upd.ndim != x.ndim:
        raise ValueError(
            f"slice_update: start_indices and updates must match the rank of inputs of shape "
            f"{x.shape}. Received start_indices={starts}, updates of shape {upd.shape}."
        )
    if builtins.any(s < 0 or s + z > d for s, z, d in zip(starts, upd.shape, x.shape)):
        raise ValueError(
            f"slice_update: updates of shape {upd.shape} starting at {starts} do not fit in "
            f"inputs of shape {x.shape}."
        )
    return slice_update_p.bind(x, upd, starts=starts)


# ------------------------------------------------------------------------ control flow
def cond(pred, true_fn, false_fn):
    """Calls `true_fn()` if `pred` is true, else `false_fn()`.

    Example:
        >>> keratron.ops.cond(True, lambda: 1, lambda: 2)
        1
    """
    return true_fn() if bool(pred) else false_fn()


def switch(index, branches, *operands):
    """Calls `branches[index](*operands)`; `index` is clamped to the valid range.

    Example:
        >>> keratron.ops.switch(5, [lambda x: x + 1, lambda x: x * 10], 3)
        30
    """
    i = builtins.min(builtins.max(int(index), 0), len(branches) - 1)
    return branches[i](*operands)


def fori_loop(lower, upper, body_fun, init_val):
    """`val = body_fun(i, val)` for i in [lower, upper); returns the final `val`.

    Example:
        >>> keratron.ops.fori_loop(0, 10, lambda i, s: s + i, 0)
        45
    """
    val = init_val
    for i in range(int(lower), int(upper)):
        val = body_fun(i, val)
    return val


def while_loop(cond, body, loop_vars, maximum_iterations=None):
    """Repeats `loop_vars = body(*loop_vars)` while `cond(*loop_vars)` holds (at most
    `maximum_iterations` times). A tuple or list is unpacked into the callables' arguments
    and comes back as the same kind of sequence; any other value is passed as is.

    Example:
        >>> int(keratron.ops.while_loop(lambda i: i < 10, lambda i: i + 1, 0))
        10
    """
    is_seq = isinstance(loop_vars, (list, tuple))
    seq_type = type(loop_vars) if is_seq else tuple
    state = tuple(loop_vars) if is_seq else (loop_vars,)
    state = tree.map_structure(as_tensor, state)
    n = 0
    while (maximum_iterations is None or n < maximum_iterations) and bool(cond(*state)):
        out = body(*state)
        out = tuple(out) if isinstance(out, (list, tuple)) else (out,)
        if len(out) != len(state):
            raise ValueError(
                f"while_loop: body returned {len(out)} values for {len(state)} loop variables."
            )
        state = out
        n += 1
    return seq_type(state) if is_seq else state[0]


def _slices(xs, n):
    leaves = [as_tensor(v) for v in tree.flatten(xs)]
    for v in leaves:
        if v.ndim == 0 or v.shape[0] != n:
            raise ValueError(
                f"expected every input to have leading dimension {n}. Received shape {v.shape}."
            )
    per_leaf = [unstack(v) for v in leaves]
    return [tree.pack_sequence_as(xs, [p[i] for p in per_leaf]) for i in range(n)]


def _stack_outputs(outs):
    if outs and builtins.all(o is None for o in tree.flatten(outs[0])):
        return outs[0]
    flats = [tree.flatten(o) for o in outs]
    return tree.pack_sequence_as(outs[0], [stack(list(col)) for col in zip(*flats)])


def _leading(xs, op):
    leaves = tree.flatten(xs)
    if not leaves:
        raise ValueError(f"{op}: expected at least one input tensor.")
    return as_tensor(leaves[0]).shape[0] if as_tensor(leaves[0]).ndim else 0


def map(f, xs):
    """Applies `f` to each slice of `xs` (a tensor or structure) along the first axis and
    stacks the results.

    Example:
        >>> keratron.ops.map(lambda v: v * 2, keratron.ops.arange(3)).numpy()
        array([0, 2, 4], dtype=int32)
    """
    n = _leading(xs, "map")
    outs = [f(s) for s in _slices(xs, n)]
    if not outs:
        raise ValueError("map: cannot map over an empty leading axis (no output to stack).")
    return _stack_outputs(outs)


def vectorized_map(function, elements):
    """`function` over the first axis of `elements`, results stacked (same as `map`).

    Example:
        >>> keratron.ops.vectorized_map(lambda r: r + 1, keratron.ops.zeros((2, 3))).shape
        (2, 3)
    """
    return map(function, elements)


def scan(f, init, xs=None, length=None, reverse=False, unroll=1):
    """Loops `carry, y = f(carry, x)` over the first axis of `xs` (or `length` times with
    x=None); returns the final carry and the stacked ys. The loop runs eagerly, so `unroll`
    (a compiler hint in Keras) has no effect.

    Example:
        >>> carry, ys = keratron.ops.scan(lambda c, x: (c + x, c + x), 0, keratron.ops.arange(4))
        >>> ys.numpy()
        array([0, 1, 3, 6], dtype=int32)
    """
    if xs is None:
        if length is None:
            raise ValueError("scan: give `xs` or `length`.")
        items = [None] * int(length)
    else:
        n = _leading(xs, "scan")
        if length is not None and int(length) != n:
            raise ValueError(f"scan: length={length} does not match the leading size {n} of xs.")
        items = _slices(xs, n)
    order = range(len(items) - 1, -1, -1) if reverse else range(len(items))
    carry, ys = init, [None] * len(items)
    for i in order:
        carry, ys[i] = f(carry, items[i])
    if not ys or builtins.all(o is None for y in ys for o in tree.flatten(y)):
        return carry, None
    return carry, _stack_outputs(ys)


# ------------------------------------------------------------------ scans, vectorize, rearrange
__all__ += ["associative_scan", "vectorize", "rearrange"]


def associative_scan(f, elems, reverse=False, axis=0):
    """Inclusive scan with an associative binary function `f` along `axis` of every leaf of
    `elems` (a tensor or a structure of tensors), in `ceil(log2(n))` batched calls of `f`.

    `f(a, b)` receives two structures like `elems`, sliced along `axis`, and must combine
    them elementwise (a before b). With `reverse=True` the scan runs from the end.

    Example:
        >>> x = keratron.ops.convert_to_tensor([1, 2, 3, 4])
        >>> keratron.ops.associative_scan(keratron.ops.add, x).numpy()
        array([ 1,  3,  6, 10], dtype=int32)
    """
    leaves = [as_tensor(e) for e in tree.flatten(elems)]
    if not leaves:
        raise ValueError("associative_scan: `elems` must contain at least one tensor.")
    axes = [canonical_axis(axis, t.ndim, "associative_scan") for t in leaves]
    n = leaves[0].shape[axes[0]]
    if any(t.shape[a] != n for t, a in zip(leaves, axes)):
        raise ValueError(
            "associative_scan: every leaf of `elems` must have the same length along axis "
            f"{axis}. Received shapes {[t.shape for t in leaves]}."
        )
    if reverse:
        leaves = [flip(t, a) for t, a in zip(leaves, axes)]

    def call(xs, ys):
        out = f(tree.pack_sequence_as(elems, xs), tree.pack_sequence_as(elems, ys))
        return [as_tensor(o) for o in tree.flatten(out)]

    # Hillis-Steele doubling: after the step with offset d, position i combines the
    # elements i - 2d + 1 .. i (clipped at 0).
    d = 1
    while d < n:
        early = [_slice_along(t, a, None, n - d) for t, a in zip(leaves, axes)]
        late = [_slice_along(t, a, d, None) for t, a in zip(leaves, axes)]
        combined = call(early, late)
        leaves = [
            concatenate([_slice_along(t, a, None, d), c], axis=a)
            for t, c, a in zip(leaves, combined, axes)
        ]
        d *= 2
    if reverse:
        leaves = [flip(t, a) for t, a in zip(leaves, axes)]
    return tree.pack_sequence_as(elems, leaves)


def _parse_signature(signature: str):
    import re

    def dims(group):
        return tuple(d.strip() for d in group.split(",") if d.strip())

    m = re.fullmatch(r"\s*((?:\([\w,\s]*\)\s*,?\s*)*)->\s*((?:\([\w,\s]*\)\s*,?\s*)*)", signature)
    if not m:
        raise ValueError(f"vectorize: not a valid gufunc signature: {signature!r}")
    ins = [dims(g) for g in re.findall(r"\(([\w,\s]*)\)", m.group(1))]
    outs = [dims(g) for g in re.findall(r"\(([\w,\s]*)\)", m.group(2))]
    return ins, outs


def vectorize(pyfunc, *, excluded=None, signature=None):
    """numpy.vectorize: maps `pyfunc` over the broadcast leading (loop) axes of its tensor
    arguments, calling it on core slices (scalars, or the core dims of a gufunc
    `signature` such as "(n),(n)->()"), eagerly in a Python loop; results are stacked.

    Args:
        pyfunc: the function to map.
        excluded: positions or keyword names passed through unchanged.
        signature: optional gufunc signature of the core dimensions.

    Example:
        >>> f = keratron.ops.vectorize(lambda a, b: a + b)
        >>> f([1, 2], [[10], [20]]).numpy()
        array([[11, 12],
               [21, 22]], dtype=int32)
    """
    excluded = set(excluded or ())
    in_core, out_core = _parse_signature(signature) if signature is not None else (None, None)

    @functools.wraps(pyfunc)
    def wrapped(*args, **kwargs):
        pos = [i for i in range(len(args)) if i not in excluded and args[i] is not None]
        names = [k for k in kwargs if k not in excluded]
        tensors = [as_tensor(args[i]) for i in pos] + [as_tensor(kwargs[k]) for k in names]
        core = in_core if in_core is not None else [()] * len(tensors)
        if len(core) != len(tensors):
            raise ValueError(
                f"vectorize: signature {signature!r} names {len(core)} inputs; the call "
                f"passed {len(tensors)} vectorized arguments."
            )
        sizes = {}
        loop_shapes = []
        for t, c in zip(tensors, core):
            if t.ndim < len(c):
                raise ValueError(
                    f"vectorize: an input of shape {t.shape} has fewer than {len(c)} core dims."
                )
            for name, dim in zip(c, t.shape[t.ndim - len(c) :]):
                if sizes.setdefault(name, dim) != dim:
                    raise ValueError(
                        f"vectorize: core dimension {name!r} has inconsistent sizes "
                        f"{sizes[name]} and {dim}."
                    )
            loop_shapes.append(t.shape[: t.ndim - len(c)])
        loop = tuple(np.broadcast_shapes(*loop_shapes)) if loop_shapes else ()
        count = int(np.prod(loop)) if loop else 1
        if count == 0:
            raise ValueError("vectorize: the loop shape is empty; there is nothing to call.")
        flat = [
            reshape(
                broadcast_to(t, loop + t.shape[t.ndim - len(c) :]),
                (count,) + t.shape[t.ndim - len(c) :],
            )
            for t, c in zip(tensors, core)
        ]
        results = []
        for i in range(count):
            call_args = list(args)
            call_kwargs = dict(kwargs)
            slices = [get_item(t, i) for t in flat]
            for j, p in enumerate(pos):
                call_args[p] = slices[j]
            for j, k in enumerate(names):
                call_kwargs[k] = slices[len(pos) + j]
            results.append(pyfunc(*call_args, **call_kwargs))
        multi = isinstance(results[0], (tuple, list))
        per_out = list(zip(*results)) if multi else [results]
        outs = []
        for j, rs in enumerate(per_out):
            st = stack([as_tensor(r) for r in rs], axis=0)
            if out_core is not None and j < len(out_core) and st.ndim - 1 != len(out_core[j]):
                raise ValueError(
                    f"vectorize: output {j} has {st.ndim - 1} core dims; the signature says "
                    f"{len(out_core[j])}."
                )
            outs.append(reshape(st, loop + st.shape[1:]))
        return tuple(outs) if multi else outs[0]

    return wrapped


def _einops_groups(side: str, pattern: str):
    import re

    tokens = re.findall(r"\(|\)|[A-Za-z_]\w*|\S", side)
    groups, cur = [], None
    for tok in tokens:
        if tok == "(":
            if cur is not None:
                raise ValueError(f"rearrange: nested parentheses in {pattern!r}.")
            cur = []
        elif tok == ")":
            if cur is None:
                raise ValueError(f"rearrange: unbalanced parentheses in {pattern!r}.")
            groups.append(cur)
            cur = None
        elif re.fullmatch(r"[A-Za-z_]\w*", tok):
            if cur is not None:
                cur.append(tok)
            else:
                groups.append([tok])
        else:
            raise ValueError(f"rearrange: unsupported token {tok!r} in {pattern!r}.")
    if cur is not None:
        raise ValueError(f"rearrange: unbalanced parentheses in {pattern!r}.")
    return groups


def rearrange(tensor, pattern, **axes_lengths):
    """einops-style axis rearrangement: transpose, merge "(a b)" and split axes.

    Args:
        tensor: input tensor.
        pattern: e.g. "b h w c -> b c h w" or "b (h1 h) w c -> (b h1) h w c".
        **axes_lengths: sizes of axes that a split cannot infer.

    Example:
        >>> keratron.ops.rearrange(keratron.ops.ones((2, 6, 3)), "b (h w) c -> b h w c", h=2).shape
        (2, 2, 3, 3)
    """
    x = as_tensor(tensor)
    if pattern.count("->") != 1:
        raise ValueError(f"rearrange: the pattern needs one '->'. Received: {pattern!r}")
    left, right = pattern.split("->")
    lg, rg = _einops_groups(left, pattern), _einops_groups(right, pattern)
    if len(lg) != x.ndim:
        raise ValueError(
            f"rearrange: the input side of {pattern!r} names {len(lg)} axes but the tensor has "
            f"rank {x.ndim}."
        )
    lnames = [a for g in lg for a in g]
    rnames = [a for g in rg for a in g]
    if sorted(lnames) != sorted(rnames) or len(set(lnames)) != len(lnames):
        raise ValueError(
            f"rearrange: both sides of {pattern!r} must name the same axes, each once."
        )
    sizes = {k: int(v) for k, v in axes_lengths.items()}
    for g, dim in zip(lg, x.shape):
        unknown = [a for a in g if a not in sizes]
        known = int(np.prod([sizes[a] for a in g if a in sizes])) if g else 1
        if len(unknown) > 1:
            raise ValueError(f"rearrange: cannot infer the sizes of {unknown} in {pattern!r}.")
        if unknown:
            if known == 0 or dim % known:
                raise ValueError(
                    f"rearrange: axis of size {dim} does not split into {g} with {axes_lengths}."
                )
            sizes[unknown[0]] = dim // known
        elif known != dim:
            raise ValueError(f"rearrange: {g} multiply to {known}, but the axis has size {dim}.")
    x = reshape(x, tuple(sizes[a] for a in lnames))
    x = transpose(x, [lnames.index(a) for a in rnames])
    return reshape(x, tuple(int(np.prod([sizes[a] for a in g])) for g in rg))
