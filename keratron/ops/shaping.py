"""Shape ops: reshaping, joining and splitting, padding, indexing (keras.ops names).

Each primitive sits next to its VJP. Most of the family is composite: `tile` and `repeat` are
reshape + broadcast, non-constant `pad` modes are `take` with a precomputed index, `diag` is
`diagonal`'s scatter. Gathers (`get_item` with array indices, `take`, `take_along_axis`;
`ops.sorting`'s `sort` and `top_k`) have dedicated scatter-add backward primitives, so repeated
indices accumulate and second derivatives work (the backward of a scatter-add is the gather).
"""

from __future__ import annotations

import builtins
import math

import numpy as np
import torch

from keratron import config
from keratron.autodiff import memory_plan, passes
from keratron.autodiff.tensor import Tensor
from keratron.ops import _shape_rules as rules
from keratron.ops._core import Primitive, as_tensor, canonical_axis, on_device
from keratron.ops.elementwise import cast, zeros_like_p
from keratron.ops.symbolic import SymbolicTensor

__all__ = [
    "reshape",
    "transpose",
    "broadcast_to",
    "expand_dims",
    "squeeze",
    "concatenate",
    "stack",
    "unstack",
    "split",
    "array_split",
    "tile",
    "repeat",
    "pad",
    "flatten",
    "ravel",
    "moveaxis",
    "swapaxes",
    "flip",
    "roll",
    "tril",
    "triu",
    "diag",
    "diagonal",
    "trace",
    "take",
    "take_along_axis",
    "get_item",
    "meshgrid",
    "vstack",
    "hstack",
    "nonzero",
    "argwhere",
    "shape",
    "ndim",
    "size",
]


def _home(x: Tensor) -> torch.device:
    """Where constants that go with `x` are made: x's device, or, for a traced (data-free)
    `x`, the default device, so that a replayed graph finds real data in its constants."""
    v = x._value
    return torch.device(config.default_device()) if v.is_meta else v.device


def _const(a: np.ndarray, like: Tensor, dtype=torch.int64) -> Tensor:
    """A constant index/weight array on `like`'s device (its home device when tracing)."""
    return Tensor(torch.as_tensor(a, dtype=dtype, device=_home(like)))


def _with(t: Tensor, x: Tensor) -> Tensor:
    """`t` moved to `x`'s home device (data-free tensors stay where they are)."""
    return on_device(t, _home(x))


def _const_index(a: np.ndarray, x: Tensor) -> Tensor:
    return Tensor(torch.from_numpy(a).to(_home(x)))


def _data_dependent(name):
    def abstract(*args, **params):
        raise ValueError(
            f"{name}: the output shape depends on the input values, so it has no abstract "
            "(shape-only) evaluation and cannot be traced."
        )

    return abstract


def _shape_tuple(shape, op: str, arg: str = "shape") -> tuple:
    """A shape given as an int or a sequence of ints, as a tuple of non-negative ints."""
    if isinstance(shape, Tensor):
        shape = shape.numpy().tolist()
    try:
        dims = (int(shape),) if np.ndim(shape) == 0 else tuple(int(d) for d in shape)
    except (TypeError, ValueError) as e:
        raise TypeError(
            f"{op}: `{arg}` must be an int or a sequence of ints. Received: {arg}={shape!r}"
        ) from e
    return dims


# ------------------------------------------------------------------------------ queries
def shape(x) -> tuple:
    """The static shape as a tuple of ints.

    Example:
        >>> keratron.ops.shape(keratron.ops.zeros((8, 12)))
        (8, 12)
    """
    if isinstance(x, SymbolicTensor):  # a KerasTensor: its static shape, None where unknown
        return tuple(x.shape)
    return tuple(as_tensor(x).shape)


def ndim(x) -> int:
    """The number of dimensions (rank) of `x`.

    Example:
        >>> keratron.ops.ndim(keratron.ops.zeros((8, 12)))
        2
    """
    if isinstance(x, SymbolicTensor):
        return len(x.shape)
    return as_tensor(x).ndim


def size(x) -> int:
    """The number of elements of `x`.

    Example:
        >>> keratron.ops.size(keratron.ops.zeros((8, 12)))
        96
    """
    return as_tensor(x).size


# ------------------------------------------------------------------------------ reshape
def _simplify_reshape(graph, node, prod):
    same = passes.identity_on_same_aval(graph, node, prod)
    inner = prod.get(node.inputs[0])
    if same is not None or inner is None or inner.prim is not reshape_p:
        return same
    node.inputs = [inner.inputs[0]]  # a reshape of a reshape is one reshape
    return passes.identity_on_same_aval(graph, node, prod)


def _reshape_shape(x, shape):
    shape = tuple(int(d) for d in shape)
    if builtins.any(d < 0 for d in shape) or math.prod(shape) != math.prod(x[0]):
        return None  # a -1 to resolve, or a bad shape for torch to reject
    return [(shape, x[1])]


reshape_p = Primitive(
    "reshape",
    lambda x, shape: x.reshape(shape),
    lambda g, x, out, shape: (reshape_p.bind(g, shape=x.shape),),
    simplify=_simplify_reshape,
    shape_rule=_reshape_shape,
)


def reshape(x, newshape):
    """Gives `x` a new shape with the same number of elements; one dimension may be -1.

    Example:
        >>> keratron.ops.reshape(keratron.ops.arange(6), (2, -1)).shape
        (2, 3)
    """
    x = as_tensor(x)
    newshape = _shape_tuple(newshape, "reshape", "newshape")
    known = 1
    for d in newshape:
        if d != -1:
            known *= d
    bad = (
        newshape.count(-1) > 1
        or builtins.any(d < -1 for d in newshape)
        or (-1 not in newshape and known != x.size)
        or (-1 in newshape and (known == 0 or x.size % known))
    )
    if bad:
        raise ValueError(
            f"reshape: cannot reshape a tensor of shape {x.shape} into shape {newshape}."
        )
    if -1 in newshape:
        newshape = tuple(x.size // known if d == -1 else d for d in newshape)
    if newshape == x.shape:
        return x
    return reshape_p.bind(x, shape=newshape)


def flatten(x):
    """`x` as a 1-D tensor (row-major order); the same as `ravel`.

    Example:
        >>> keratron.ops.flatten([[1, 2], [3, 4]]).shape
        (4,)
    """
    return reshape(x, (-1,))


def ravel(x):
    """`x` as a 1-D tensor (row-major order), as `numpy.ravel`.

    Example:
        >>> keratron.ops.ravel([[1, 2], [3, 4]]).shape
        (4,)
    """
    return reshape(x, (-1,))


def expand_dims(x, axis):
    """Inserts size-1 dimensions at `axis` (an int or a tuple of ints) of the output.

    Example:
        >>> keratron.ops.expand_dims(keratron.ops.zeros((2, 3)), -1).shape
        (2, 3, 1)
    """
    x = as_tensor(x)
    axes = axis if isinstance(axis, (list, tuple)) else (axis,)
    out_ndim = x.ndim + len(axes)
    axes = sorted(canonical_axis(a, out_ndim, "expand_dims") for a in axes)
    if len(set(axes)) != len(axes):
        raise ValueError(f"expand_dims: repeated axis in axis={axis!r}.")
    new = list(x.shape)
    for a in axes:
        new.insert(a, 1)
    return reshape(x, new)


def squeeze(x, axis=None):
    """Removes size-1 dimensions (all of them, or those at `axis`).

    Example:
        >>> keratron.ops.squeeze(keratron.ops.zeros((1, 3, 1)), axis=0).shape
        (3, 1)
    """
    x = as_tensor(x)
    if axis is None:
        return reshape(x, [d for d in x.shape if d != 1])
    axes = canonical_axis(axis if isinstance(axis, (list, tuple)) else (axis,), x.ndim, "squeeze")
    for a in axes:
        if x.shape[a] != 1:
            raise ValueError(
                f"squeeze: cannot squeeze axis {a} of size {x.shape[a]} in a tensor of shape "
                f"{x.shape}."
            )
    return reshape(x, [d for i, d in enumerate(x.shape) if i not in axes])


# ------------------------------------------------------------------------------ transpose
def _transpose_vjp(g, x, out, axes):
    inv = tuple(int(i) for i in np.argsort(axes))
    return (transpose_p.bind(g, axes=inv),)


def _simplify_transpose(graph, node, prod):
    inner = prod.get(node.inputs[0])
    if inner is None or inner.prim is not transpose_p:
        return None
    # A transpose of a transpose is one transpose, or none.
    perm = tuple(inner.params["axes"][i] for i in node.params["axes"])
    if perm == tuple(range(len(perm))):
        return inner.inputs[0]
    node.inputs = [inner.inputs[0]]
    node.params = {**node.params, "axes": perm}
    return None


def _transpose_shape(x, axes):
    shape = x[0]
    if sorted(a % builtins.max(len(shape), 1) for a in axes) != list(range(len(shape))):
        return None
    return [(tuple(shape[a] for a in axes), x[1])]


transpose_p = Primitive(
    "transpose",
    lambda x, axes: x.permute(axes),
    _transpose_vjp,
    simplify=_simplify_transpose,
    shape_rule=_transpose_shape,
)


def transpose(x, axes=None):
    """Permutes the axes of `x`; by default reverses them.

    Example:
        >>> keratron.ops.transpose(keratron.ops.zeros((2, 3, 4)), (1, 0, 2)).shape
        (3, 2, 4)
    """
    x = as_tensor(x)
    if axes is None:
        axes = tuple(range(x.ndim))[::-1]
    axes = tuple(canonical_axis(a, x.ndim, "transpose") for a in axes)
    if sorted(axes) != list(range(x.ndim)):
        raise ValueError(
            f"transpose: axes {axes} are not a permutation of the axes of a tensor of shape "
            f"{x.shape}."
        )
    if axes == tuple(range(x.ndim)):
        return x
    return transpose_p.bind(x, axes=axes)


def _axes_arg(axes, ndim, op):
    axes = axes if isinstance(axes, (list, tuple)) else (axes,)
    return tuple(canonical_axis(a, ndim, op) for a in axes)


def moveaxis(x, source, destination):
    """Moves axes `source` to positions `destination`; the others keep their order.

    Example:
        >>> keratron.ops.moveaxis(keratron.ops.zeros((2, 3, 4)), 0, -1).shape
        (3, 4, 2)
    """
    x = as_tensor(x)
    src = _axes_arg(source, x.ndim, "moveaxis")
    dst = _axes_arg(destination, x.ndim, "moveaxis")
    if len(src) != len(dst):
        raise ValueError(
            "moveaxis: `source` and `destination` must have the same number of axes. "
            f"Received: source={source!r}, destination={destination!r}"
        )
    if len(set(src)) != len(src) or len(set(dst)) != len(dst):
        raise ValueError(
            f"moveaxis: repeated axis. Received: source={source!r}, destination={destination!r}"
        )
    order = [i for i in range(x.ndim) if i not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return transpose(x, order)


def swapaxes(x, axis1, axis2):
    """Interchanges two axes.

    Example:
        >>> keratron.ops.swapaxes(keratron.ops.zeros((2, 3, 4)), 0, 2).shape
        (4, 3, 2)
    """
    x = as_tensor(x)
    axes = list(range(x.ndim))
    a1, a2 = canonical_axis(axis1, x.ndim, "swapaxes"), canonical_axis(axis2, x.ndim, "swapaxes")
    axes[a1], axes[a2] = axes[a2], axes[a1]
    return transpose(x, axes)


# ------------------------------------------------------------------------------ broadcast
# The engine sums broadcast cotangents back to the input shape, so the rule passes g on.
broadcast_to_p = Primitive(
    "broadcast_to",
    lambda x, shape: x.expand(shape).contiguous() if x.dim() else x.expand(shape).clone(),
    lambda g, x, out, shape: (g,),
    simplify=passes.identity_on_same_aval,
    shape_rule=lambda x, shape: (
        [(tuple(shape), x[1])]
        if rules.broadcast_shapes(x[0], tuple(shape)) == tuple(shape)
        else None
    ),
)


def broadcast_to(x, shape):
    """Broadcasts `x` to `shape` (numpy rules).

    Example:
        >>> keratron.ops.broadcast_to([1.0, 2.0], (3, 2)).shape
        (3, 2)
    """
    x = as_tensor(x)
    shape = _shape_tuple(shape, "broadcast_to")
    if x.shape == shape:
        return x
    ok = len(shape) >= x.ndim and builtins.all(
        d == s or d == 1 for d, s in zip(x.shape[::-1], shape[::-1])
    )
    if not ok or builtins.any(s < 0 for s in shape):
        raise ValueError(
            f"broadcast_to: cannot broadcast a tensor of shape {x.shape} to shape {shape}."
        )
    return broadcast_to_p.bind(x, shape=shape)


# ------------------------------------------------------------------------------ join / split
def _fill(gs, outs):
    return [zeros_like_p.bind(o) if g is None else g for g, o in zip(gs, outs)]


def _concatenate_shape(*xs, axis):
    ref = xs[0][0]
    if not ref or not -len(ref) <= axis < len(ref):
        return None
    axis %= len(ref)
    for shape, _ in xs:
        # torch skips 1-D empty inputs and rejects other mismatches: left to torch.
        if len(shape) != len(ref) or builtins.any(
            a != b for i, (a, b) in enumerate(zip(shape, ref)) if i != axis
        ):
            return None
    dtype = rules.result_type(*((s, d) for s, d in xs))
    size = builtins.sum(shape[axis] for shape, _ in xs)
    return None if dtype is None else [(ref[:axis] + (size,) + ref[axis + 1 :], dtype)]


concatenate_p = Primitive(
    "concatenate",
    lambda *xs, axis: torch.cat(xs, dim=axis),
    lambda g, *xs, out, axis: tuple(
        split_p.bind(g, sizes=tuple(x.shape[axis] for x in xs), axis=axis)
    ),
    fresh=True,
    shape_rule=_concatenate_shape,
)


@memory_plan.keeps_output(concatenate_p)
def _concatenate_into(buffers, out_avals, *xs, axis):
    return torch.cat(xs, dim=axis, out=memory_plan.buffer(buffers, "out", out_avals[0]))


def _split_shape(x, sizes, axis):
    shape = x[0]
    if not -len(shape) <= axis < len(shape) or builtins.sum(sizes) != shape[axis]:
        return None
    axis %= len(shape)
    return [(shape[:axis] + (s,) + shape[axis + 1 :], x[1]) for s in sizes]


split_p = Primitive(
    "split_sizes",
    lambda x, sizes, axis: tuple(torch.split(x, list(sizes), dim=axis)),
    lambda gs, x, out, sizes, axis: (concatenate_p.bind(*_fill(gs, out), axis=axis),),
    multiple_results=True,
    shape_rule=_split_shape,
)


def _promote(xs, op):
    if isinstance(xs, (Tensor, np.ndarray)):
        xs = list(xs)
    xs = [as_tensor(x) for x in xs]
    if not xs:
        raise ValueError(f"{op}: expected at least one tensor. Received an empty sequence.")
    dt = xs[0]._value.dtype
    for x in xs[1:]:
        dt = torch.promote_types(dt, x._value.dtype)
    dev = next((x._value.device for x in xs if x._value.is_cuda), xs[0]._value.device)
    out = []
    for x in xs:
        x = cast(x, dt)
        x = on_device(x, dev)
        out.append(x)
    return out


def concatenate(xs, axis=0):
    """Joins tensors along an existing axis; their shapes must agree on the other axes.

    Example:
        >>> keratron.ops.concatenate([keratron.ops.zeros((2, 3)), keratron.ops.ones((1, 3))]).shape
        (3, 3)
    """
    xs = _promote(xs, "concatenate")
    if xs[0].ndim == 0:
        raise ValueError("concatenate: zero-dimensional tensors cannot be concatenated.")
    axis = canonical_axis(axis, xs[0].ndim, "concatenate")
    ref = xs[0].shape
    for i, x in enumerate(xs):
        if x.ndim != len(ref) or builtins.any(
            a != b for j, (a, b) in enumerate(zip(x.shape, ref)) if j != axis
        ):
            raise ValueError(
                f"concatenate: input {i} has shape {x.shape}, incompatible with input 0's "
                f"shape {ref} along axes other than {axis}."
            )
    if len(xs) == 1:
        return xs[0]
    return concatenate_p.bind(*xs, axis=axis)


stack_p = Primitive(
    "stack",
    lambda *xs, axis: torch.stack(xs, dim=axis),
    lambda g, *xs, out, axis: tuple(unstack_p.bind(g, axis=axis)),
    fresh=True,
)
unstack_p = Primitive(
    "unstack",
    lambda x, axis: tuple(torch.unbind(x, dim=axis)),
    lambda gs, x, out, axis: (stack_p.bind(*_fill(gs, out), axis=axis),),
    multiple_results=True,
)


def stack(x, axis=0):
    """Joins tensors of one shape along a new axis.

    Example:
        >>> keratron.ops.stack([[1, 2], [3, 4]], axis=1).shape
        (2, 2)
    """
    xs = _promote(x, "stack")
    for i, t in enumerate(xs):
        if t.shape != xs[0].shape:
            raise ValueError(
                f"stack: all inputs must have the same shape; input {i} has shape {t.shape}, "
                f"input 0 has shape {xs[0].shape}."
            )
    axis = canonical_axis(axis, xs[0].ndim + 1, "stack")
    return stack_p.bind(*xs, axis=axis)


def unstack(x, num=None, axis=0):
    """Splits `x` along `axis` into a list of tensors of one rank less.

    Example:
        >>> [t.shape for t in keratron.ops.unstack(keratron.ops.zeros((2, 3)), axis=1)]
        [(2,), (2,), (2,)]
    """
    x = as_tensor(x)
    if x.ndim == 0:
        raise ValueError("unstack: cannot unstack a zero-dimensional tensor.")
    axis = canonical_axis(axis, x.ndim, "unstack")
    if num is not None and int(num) != x.shape[axis]:
        raise ValueError(
            f"unstack: num={num} does not match the size {x.shape[axis]} of axis {axis} of a "
            f"tensor of shape {x.shape}."
        )
    return list(unstack_p.bind(x, axis=axis))


def _split_at(x, bounds, axis):
    """Pieces x[b_i:b_{i+1}] along `axis`, with Python slice semantics for each bound."""
    n = x.shape[axis]
    ranges = [builtins.slice(lo, hi).indices(n)[:2] for lo, hi in zip(bounds[:-1], bounds[1:])]
    ranges = [(lo, builtins.max(lo, hi)) for lo, hi in ranges]
    contiguous = (
        ranges[0][0] == 0
        and ranges[-1][1] == n
        and builtins.all(a[1] == b[0] for a, b in zip(ranges[:-1], ranges[1:]))
    )
    if contiguous:
        if len(ranges) == 1:
            return [x]
        return list(split_p.bind(x, sizes=tuple(hi - lo for lo, hi in ranges), axis=axis))
    pre = (builtins.slice(None),) * axis
    return [get_item(x, pre + (builtins.slice(lo, hi),)) for lo, hi in ranges]


def _split_indices(indices, op):
    if isinstance(indices, Tensor):
        indices = indices.numpy()
    a = np.asarray(indices)
    if a.ndim != 1 or (a.size and a.dtype.kind not in "iu"):
        raise TypeError(
            f"{op}: `indices_or_sections` must be an int or a 1-D sequence of ints. "
            f"Received: indices_or_sections={indices!r}"
        )
    return [int(i) for i in a]


def split(x, indices_or_sections, axis=0):
    """Splits `x` into equal sections (an int) or at the given indices (a sequence).

    Example:
        >>> [t.shape for t in keratron.ops.split(keratron.ops.arange(7), [2, 5])]
        [(2,), (3,), (2,)]
    """
    x = as_tensor(x)
    if x.ndim == 0:
        raise ValueError("split: cannot split a zero-dimensional tensor.")
    axis = canonical_axis(axis, x.ndim, "split")
    n = x.shape[axis]
    if np.ndim(indices_or_sections) == 0:
        sections = int(indices_or_sections)
        if sections <= 0 or n % sections:
            raise ValueError(
                f"split: axis {axis} of size {n} (tensor shape {x.shape}) cannot be divided into "
                f"{indices_or_sections} equal sections."
            )
        step = n // sections
        return _split_at(x, [i * step for i in range(sections + 1)], axis)
    idx = _split_indices(indices_or_sections, "split")
    return _split_at(x, [0, *idx, n], axis)


def array_split(x, indices_or_sections, axis=0):
    """Like `split`, but an int number of sections need not divide the axis: the first
    `n % sections` pieces get one extra element.

    Example:
        >>> [t.shape for t in keratron.ops.array_split(keratron.ops.arange(7), 3)]
        [(3,), (2,), (2,)]
    """
    x = as_tensor(x)
    if x.ndim == 0:
        raise ValueError("array_split: cannot split a zero-dimensional tensor.")
    axis = canonical_axis(axis, x.ndim, "array_split")
    n = x.shape[axis]
    if np.ndim(indices_or_sections) == 0:
        sections = int(indices_or_sections)
        if sections <= 0:
            raise ValueError(
                f"array_split: the number of sections must be positive. Received: "
                f"indices_or_sections={indices_or_sections}"
            )
        q, r = divmod(n, sections)
        sizes = [q + 1] * r + [q] * (sections - r)
        return _split_at(x, [0, *np.cumsum(sizes).tolist()], axis)
    idx = _split_indices(indices_or_sections, "array_split")
    return _split_at(x, [0, *idx, n], axis)


def vstack(xs):
    """Stacks tensors row-wise: 1-D inputs become rows, then concatenation on axis 0.

    Example:
        >>> keratron.ops.vstack([[1, 2], [3, 4]]).shape
        (2, 2)
    """
    xs = _promote(xs, "vstack")
    xs = [reshape(x, (1, -1)) if x.ndim < 2 else x for x in xs]
    return concatenate(xs, axis=0)


def hstack(xs):
    """Stacks tensors column-wise: along axis 0 for 1-D inputs, else along axis 1.

    Example:
        >>> keratron.ops.hstack([[1, 2], [3]]).shape
        (3,)
    """
    xs = _promote(xs, "hstack")
    xs = [reshape(x, (1,)) if x.ndim == 0 else x for x in xs]
    return concatenate(xs, axis=0 if xs[0].ndim == 1 else 1)


def meshgrid(*x, indexing="xy"):
    """Coordinate grids from 1-D coordinate vectors ("xy": Cartesian, "ij": matrix indexing).

    Example:
        >>> gx, gy = keratron.ops.meshgrid([1, 2, 3], [4, 5])
        >>> gx.shape
        (2, 3)
    """
    if indexing not in ("xy", "ij"):
        raise ValueError(
            f"meshgrid: indexing must be 'xy' or 'ij'. Received: indexing={indexing!r}"
        )
    xs = [reshape(as_tensor(v), (-1,)) for v in x]
    out_shape = [v.shape[0] for v in xs]
    cartesian = indexing == "xy" and len(xs) >= 2
    if cartesian:
        out_shape[0], out_shape[1] = out_shape[1], out_shape[0]
    grids = []
    for i, v in enumerate(xs):
        pos = {0: 1, 1: 0}.get(i, i) if cartesian else i
        view = [1] * len(xs)
        view[pos] = v.shape[0]
        grids.append(broadcast_to(reshape(v, view), out_shape))
    return grids


# ------------------------------------------------------------------------------ tile, repeat
def _interleave(a, b):
    return tuple(v for pair in zip(a, b) for v in pair)


def tile(x, repeats):
    """Repeats `x` `repeats[i]` times along each axis (numpy semantics: the shorter of
    `x.shape` and `repeats` is padded with leading ones).

    Example:
        >>> keratron.ops.tile([1, 2], (2, 2)).numpy()
        array([[1, 2, 1, 2],
               [1, 2, 1, 2]], dtype=int32)
    """
    x = as_tensor(x)
    reps = _shape_tuple(repeats, "tile", "repeats")
    if builtins.any(r < 0 for r in reps):
        raise ValueError(f"tile: `repeats` must be non-negative. Received: repeats={repeats!r}")
    d = builtins.max(len(reps), x.ndim)
    reps = (1,) * (d - len(reps)) + reps
    dims = (1,) * (d - x.ndim) + x.shape
    if builtins.all(r == 1 for r in reps):
        return reshape(x, dims)
    # (d0, d1) -> (1, d0, 1, d1) -> (r0, d0, r1, d1) -> (r0*d0, r1*d1): the engine's
    # un-broadcasting gives the gradient.
    y = broadcast_to(reshape(x, _interleave((1,) * d, dims)), _interleave(reps, dims))
    return reshape(y, tuple(r * s for r, s in zip(reps, dims)))


def repeat(x, repeats, axis=None):
    """Repeats each element of `x` (`repeats` an int, or one count per element along `axis`);
    `axis=None` works on the flattened input.

    Example:
        >>> keratron.ops.repeat([1, 2], [1, 3]).numpy()
        array([1, 2, 2, 2], dtype=int32)
    """
    x = as_tensor(x)
    if axis is None:
        x, axis = reshape(x, (-1,)), 0
    if x.ndim == 0:
        x = reshape(x, (1,))
    axis = canonical_axis(axis, x.ndim, "repeat")
    n = x.shape[axis]
    reps = np.asarray(repeats.numpy() if isinstance(repeats, Tensor) else repeats)
    if reps.size and reps.dtype.kind not in "iu":
        raise TypeError(f"repeat: `repeats` must be integers. Received: repeats={repeats!r}")
    reps = reps.astype(np.int64)
    if (reps < 0).any():
        raise ValueError(f"repeat: `repeats` must be non-negative. Received: repeats={repeats!r}")
    if reps.ndim > 1 or (reps.ndim == 1 and reps.size not in (1, n)):
        raise ValueError(
            f"repeat: `repeats` must be an int or have one entry per element of axis {axis} "
            f"(size {n}) of a tensor of shape {x.shape}. Received repeats of shape {reps.shape}."
        )
    if reps.size == 1:
        r = int(reps.reshape(()))
        shp = x.shape
        y = broadcast_to(expand_dims(x, axis + 1), shp[: axis + 1] + (r,) + shp[axis + 1 :])
        return reshape(y, shp[:axis] + (n * r,) + shp[axis + 1 :])
    idx = np.repeat(np.arange(n), reps)
    return take(x, _const_index(idx, x), axis=axis)


# ------------------------------------------------------------------------------ pad
def _pad_impl(x, widths, value):
    out_shape = tuple(d + lo + hi for d, (lo, hi) in zip(x.shape, widths))
    out = torch.full(out_shape, value, dtype=x.dtype, device=x.device)
    out[tuple(builtins.slice(lo, lo + d) for d, (lo, _) in zip(x.shape, widths))] = x
    return out


def _pad_vjp(g, x, out, widths, value):
    spec = tuple(("s", lo, lo + d, 1) for d, (lo, _) in zip(x.shape, widths))
    return (index_p.bind(g, key=(spec, ())),)


def _pad_shape(x, widths, value):
    shape = x[0]
    if len(widths) != len(shape) or builtins.any(lo < 0 or hi < 0 for lo, hi in widths):
        return None
    return [(tuple(d + lo + hi for d, (lo, hi) in zip(shape, widths)), x[1])]


pad_p = Primitive("pad", _pad_impl, _pad_vjp, shape_rule=_pad_shape)


@memory_plan.keeps_output(pad_p)
def _pad_into(buffers, out_avals, x, widths, value):
    # Only the border is filled: x overwrites the rest (MobileNet's 8x112x112x64 batch padded
    # by one row and column: 0.56 -> 0.38 ms, one write of the whole buffer less).
    out = memory_plan.buffer(buffers, "out", out_avals[0])
    every = builtins.slice(None)
    for axis, (size, (lo, hi)) in enumerate(zip(x.shape, widths)):
        if lo:
            out[(every,) * axis + (builtins.slice(0, lo),)].fill_(value)
        if hi:
            out[(every,) * axis + (builtins.slice(lo + size, None),)].fill_(value)
    out[tuple(builtins.slice(lo, lo + d) for d, (lo, _) in zip(x.shape, widths))] = x
    return out


_PAD_MODES = ("constant", "reflect", "symmetric", "edge", "wrap", "circular")


def _pad_source_index(n, lo, hi, mode):
    """For each padded position along one axis, the source index (numpy's rules, including
    pads wider than the axis, which reflect or wrap repeatedly)."""
    i = np.arange(-lo, n + hi)
    if mode == "edge":
        return np.clip(i, 0, n - 1)
    if mode in ("wrap", "circular"):
        return np.mod(i, n)
    if mode == "symmetric":
        m = np.mod(i, 2 * n)
        return np.where(m >= n, 2 * n - 1 - m, m)
    if n == 1:  # reflect about a single element repeats it
        return np.zeros_like(i)
    period = 2 * (n - 1)
    m = np.mod(i, period)
    return np.where(m >= n, period - m, m)


def pad(x, pad_width, mode="constant", constant_values=None):
    """Pads `x`. `pad_width` is an int, `(before, after)` or one pair per axis.

    Modes: "constant" (with `constant_values`, default 0), "reflect" (mirror without the edge
    value), "symmetric" (mirror with it), "edge", and "wrap"/"circular" (periodic).

    Example:
        >>> keratron.ops.pad([1.0, 2.0, 3.0], (1, 2), mode="reflect").numpy()
        array([2., 1., 2., 3., 2., 1.], dtype=float32)
    """
    x = as_tensor(x)
    if mode not in _PAD_MODES:
        raise ValueError(f"pad: mode must be one of {_PAD_MODES}. Received: mode={mode!r}")
    if constant_values is not None and mode != "constant":
        raise ValueError(
            f"pad: constant_values can only be set with mode='constant'. Received: mode={mode!r}, "
            f"constant_values={constant_values!r}"
        )
    pw = np.asarray(pad_width.numpy() if isinstance(pad_width, Tensor) else pad_width)
    if pw.size and pw.dtype.kind not in "iu":
        raise TypeError(f"pad: pad_width must contain integers. Received: pad_width={pad_width!r}")
    try:
        widths = np.broadcast_to(pw.astype(np.int64), (x.ndim, 2))
    except ValueError as e:
        raise ValueError(
            f"pad: pad_width must be an int, a (before, after) pair or one pair per axis of a "
            f"tensor of shape {x.shape}. Received: pad_width={pad_width!r}"
        ) from e
    if (widths < 0).any():
        raise ValueError(f"pad: pad_width must be non-negative. Received: pad_width={pad_width!r}")
    widths = tuple((int(lo), int(hi)) for lo, hi in widths)
    if mode == "constant":
        if builtins.all(lo == 0 and hi == 0 for lo, hi in widths):
            return x
        value = 0 if constant_values is None else constant_values
        if isinstance(value, (Tensor, np.ndarray, np.generic)):
            if np.size(value) != 1:
                raise ValueError(
                    "pad: constant_values must be a scalar. "
                    f"Received an array of shape {np.shape(value)}."
                )
            value = np.asarray(value).reshape(()).item()
        tdt = x._value.dtype
        value = (
            bool(value)
            if tdt is torch.bool
            else float(value)
            if tdt.is_floating_point
            else int(value)
        )
        return pad_p.bind(x, widths=widths, value=value)
    for axis, (lo, hi) in enumerate(widths):
        if lo == 0 and hi == 0:
            continue
        n = x.shape[axis]
        if n == 0:
            raise ValueError(
                f"pad: cannot extend the empty axis {axis} of a tensor of shape {x.shape} with "
                f"mode={mode!r}; only mode='constant' pads empty axes."
            )
        idx = _pad_source_index(n, lo, hi, mode)
        x = take(x, _const_index(idx, x), axis=axis)
    return x


# ------------------------------------------------------------------------------ flip, roll
flip_p = Primitive(
    "flip",
    lambda x, axes: torch.flip(x, axes),
    lambda g, x, out, axes: (flip_p.bind(g, axes=axes),),
)


def flip(x, axis=None):
    """Reverses the order of elements along `axis` (an int, a tuple, or None for all).

    Example:
        >>> keratron.ops.flip([1, 2, 3]).numpy()
        array([3, 2, 1], dtype=int32)
    """
    x = as_tensor(x)
    axes = tuple(range(x.ndim)) if axis is None else _axes_arg(axis, x.ndim, "flip")
    if not axes:
        return x
    return flip_p.bind(x, axes=axes)


roll_p = Primitive(
    "roll",
    lambda x, shifts, axes: torch.roll(x, shifts, axes),
    lambda g, x, out, shifts, axes: (roll_p.bind(g, shifts=tuple(-s for s in shifts), axes=axes),),
)


def roll(x, shift, axis=None):
    """Rolls elements along `axis` by `shift` (elements past the end wrap around); with
    `axis=None` the flattened tensor is rolled and the shape restored.

    Example:
        >>> keratron.ops.roll([1, 2, 3, 4], 1).numpy()
        array([4, 1, 2, 3], dtype=int32)
    """
    x = as_tensor(x)
    shifts = _shape_tuple(shift, "roll", "shift")
    if axis is None:
        if len(shifts) != 1:
            raise ValueError(
                f"roll: with axis=None, shift must be an int. Received: shift={shift!r}"
            )
        return reshape(roll_p.bind(reshape(x, (-1,)), shifts=shifts, axes=(0,)), x.shape)
    axes = _axes_arg(axis, x.ndim, "roll")
    if len(shifts) == 1 and len(axes) > 1:
        shifts = shifts * len(axes)
    elif len(axes) == 1 and len(shifts) > 1:
        axes = axes * len(shifts)
    if len(shifts) != len(axes):
        raise ValueError(
            f"roll: shift and axis must have the same length. Received: shift={shift!r}, "
            f"axis={axis!r}"
        )
    return roll_p.bind(x, shifts=shifts, axes=axes)


# ------------------------------------------------------------------------------ triangles
tril_p = Primitive(
    "tril", lambda x, k: torch.tril(x, k), lambda g, x, out, k: (tril_p.bind(g, k=k),)
)
triu_p = Primitive(
    "triu", lambda x, k: torch.triu(x, k), lambda g, x, out, k: (triu_p.bind(g, k=k),)
)


def _triangle(p, x, k, op):
    x = as_tensor(x)
    if x.ndim < 2:
        raise ValueError(f"{op}: expected a tensor of rank >= 2. Received shape {x.shape}.")
    return p.bind(x, k=int(k))


def tril(x, k=0):
    """Zeroes the elements above the k-th diagonal of the last two axes.

    Example:
        >>> keratron.ops.tril(keratron.ops.ones((2, 2))).numpy()
        array([[1., 0.],
               [1., 1.]], dtype=float32)
    """
    return _triangle(tril_p, x, k, "tril")


def triu(x, k=0):
    """Zeroes the elements below the k-th diagonal of the last two axes.

    Example:
        >>> keratron.ops.triu(keratron.ops.ones((2, 2))).numpy()
        array([[1., 1.],
               [0., 1.]], dtype=float32)
    """
    return _triangle(triu_p, x, k, "triu")


# ------------------------------------------------------------------------------ diagonals
def _diagonal_grad_impl(g, shape, offset, axis1, axis2):
    z = g.new_zeros(shape)
    torch.diagonal(z, offset, axis1, axis2).copy_(g)
    return z


diagonal_p = Primitive(
    "diagonal",
    lambda x, offset, axis1, axis2: torch.diagonal(x, offset, axis1, axis2),
    lambda g, x, out, offset, axis1, axis2: (
        diagonal_grad_p.bind(g, shape=x.shape, offset=offset, axis1=axis1, axis2=axis2),
    ),
)
diagonal_grad_p = Primitive(
    "diagonal_grad",
    _diagonal_grad_impl,
    lambda g, d, out, shape, offset, axis1, axis2: (
        diagonal_p.bind(g, offset=offset, axis1=axis1, axis2=axis2),
    ),
)


def diagonal(x, offset=0, axis1=0, axis2=1):
    """The diagonal at `offset` of the 2-D slices over (`axis1`, `axis2`); it becomes the
    last axis of the result.

    Example:
        >>> keratron.ops.diagonal([[1, 2], [3, 4]]).numpy()
        array([1, 4], dtype=int32)
    """
    x = as_tensor(x)
    if x.ndim < 2:
        raise ValueError(f"diagonal: expected a tensor of rank >= 2. Received shape {x.shape}.")
    a1 = canonical_axis(axis1, x.ndim, "diagonal")
    a2 = canonical_axis(axis2, x.ndim, "diagonal")
    if a1 == a2:
        raise ValueError(f"diagonal: axis1 and axis2 must differ. Received: {axis1}, {axis2}")
    return diagonal_p.bind(x, offset=int(offset), axis1=a1, axis2=a2)


def diag(x, k=0):
    """For a 1-D `x`, the square matrix with `x` on its k-th diagonal; for a 2-D `x`, its
    k-th diagonal.

    Example:
        >>> keratron.ops.diag([1, 2]).numpy()
        array([[1, 0],
               [0, 2]], dtype=int32)
    """
    x = as_tensor(x)
    k = int(k)
    if x.ndim == 1:
        n = x.shape[0] + builtins.abs(k)
        return diagonal_grad_p.bind(x, shape=(n, n), offset=k, axis1=0, axis2=1)
    if x.ndim == 2:
        return diagonal(x, offset=k)
    raise ValueError(f"diag: expected a 1-D or 2-D tensor. Received shape {x.shape}.")


def trace(x, offset=0, axis1=0, axis2=1):
    """Sum along a diagonal (see `diagonal`); small integer and bool inputs sum as int32.

    Example:
        >>> int(keratron.ops.trace([[1, 2], [3, 4]]))
        5
    """
    from keratron.ops.reduction import sum as _sum

    x = as_tensor(x)
    if x.dtype in ("bool", "int8", "int16", "uint8"):
        x = cast(x, "int32")
    # torch sums integers in int64; the result keeps the (promoted) input dtype, as in Keras.
    return cast(_sum(diagonal(x, offset, axis1, axis2), axis=-1), x.dtype)


# ------------------------------------------------------------------------------ gathers
def _normalize_index(idx, n):
    idx = idx.long()
    return torch.where(idx < 0, idx + n, idx)


def _take_impl(x, idx, axis):
    flat = _normalize_index(idx, x.shape[axis]).reshape(-1)
    out = torch.index_select(x, axis, flat)
    return out.reshape(x.shape[:axis] + idx.shape + x.shape[axis + 1 :])


def _take_grad_impl(g, idx, shape, axis):
    flat = _normalize_index(idx, shape[axis]).reshape(-1)
    g = g.reshape(shape[:axis] + (flat.shape[0],) + shape[axis + 1 :])
    return g.new_zeros(shape).index_add_(axis, flat, g)


def _take_shape(x, idx, axis):
    shape = x[0]
    if not 0 <= axis < len(shape) or idx[1].is_floating_point or idx[1].is_complex:
        return None
    return [(shape[:axis] + tuple(idx[0]) + shape[axis + 1 :], x[1])]


def _take_grad_shape(g, idx, shape, axis):
    shape = tuple(shape)
    expected = shape[:axis] + tuple(idx[0]) + shape[axis + 1 :]
    if not 0 <= axis < len(shape) or tuple(g[0]) != expected:
        return None
    return [(shape, g[1])]


take_p = Primitive(
    "take",
    _take_impl,
    lambda g, x, idx, out, axis: (take_grad_p.bind(g, idx, shape=x.shape, axis=axis), None),
    shape_rule=_take_shape,
)
take_grad_p = Primitive(
    "take_grad",
    _take_grad_impl,
    lambda g, gout, idx, out, shape, axis: (take_p.bind(g, idx, axis=axis), None),
    shape_rule=_take_grad_shape,
)


def _index_tensor(indices, op, device) -> Tensor:
    t = as_tensor(indices)
    if t.size == 0 and not isinstance(indices, Tensor):
        t = Tensor(t._value.to(torch.int64))
    if t._value.dtype.is_floating_point or t._value.dtype.is_complex or t.dtype == "bool":
        raise TypeError(f"{op}: indices must be integers. Received dtype {t.dtype}.")
    return on_device(t, device)


def _check_range(idx: Tensor, n: int, op: str, what: str):
    """Eager bounds check (negative indices count from the end); values without data
    (meta tensors, as when tracing) are not checked."""
    v = idx._value
    if v.device.type == "meta" or not v.numel():
        return
    if bool(((v < -n) | (v >= n)).any()):  # one reduction, one device sync
        lo, hi = int(v.min()), int(v.max())
        raise IndexError(
            f"{op}: indices must lie in [{-n}, {n}) for {what}. Received indices in [{lo}, {hi}]."
        )


def take(x, indices, axis=None):
    """Elements of `x` at integer `indices` along `axis` (None: of the flattened `x`); the
    output shape is `x.shape[:axis] + indices.shape + x.shape[axis + 1:]`.

    Example:
        >>> keratron.ops.take([[1, 2], [3, 4]], [3, 0]).numpy()
        array([4, 1], dtype=int32)
    """
    x = as_tensor(x)
    idx = _index_tensor(indices, "take", x._value.device)
    if axis is None:
        x, axis = reshape(x, (-1,)), 0
    if x.ndim == 0:
        raise ValueError("take: cannot take from a zero-dimensional tensor along an axis.")
    axis = canonical_axis(axis, x.ndim, "take")
    _check_range(idx, x.shape[axis], "take", f"axis {axis} of a tensor of shape {x.shape}")
    return take_p.bind(x, idx, axis=axis)


def _gather_grad_impl(g, idx, shape, axis):
    return g.new_zeros(shape).scatter_add_(axis, _normalize_index(idx, shape[axis]), g)


gather_p = Primitive(
    "take_along_axis",
    lambda x, idx, axis: torch.gather(x, axis, _normalize_index(idx, x.shape[axis])),
    lambda g, x, idx, out, axis: (gather_grad_p.bind(g, idx, shape=x.shape, axis=axis), None),
)
gather_grad_p = Primitive(
    "take_along_axis_grad",
    _gather_grad_impl,
    lambda g, gout, idx, out, shape, axis: (gather_p.bind(g, idx, axis=axis), None),
)


def take_along_axis(x, indices, axis=None):
    """Picks values of `x` at `indices` along `axis` (`indices` has the rank of `x`; other
    axes broadcast). With `axis=None`, `x` is flattened and `indices` must be 1-D.

    Example:
        >>> x = keratron.ops.convert_to_tensor([[10, 30, 20]])
        >>> keratron.ops.take_along_axis(x, keratron.ops.argsort(x), axis=1).numpy()
        array([[10, 20, 30]], dtype=int32)
    """
    x = as_tensor(x)
    idx = _index_tensor(indices, "take_along_axis", x._value.device)
    if axis is None:
        if idx.ndim != 1:
            raise ValueError(
                "take_along_axis: with axis=None, indices must be 1-D. "
                f"Received indices of shape {idx.shape}."
            )
        x, axis = reshape(x, (-1,)), 0
    if x.ndim == 0 or idx.ndim != x.ndim:
        raise ValueError(
            "take_along_axis: indices must have the same rank as x. Received x of shape "
            f"{x.shape} and indices of shape {idx.shape}."
        )
    axis = canonical_axis(axis, x.ndim, "take_along_axis")
    common = rules.broadcast_shapes(
        tuple(1 if i == axis else d for i, d in enumerate(x.shape)),
        tuple(1 if i == axis else d for i, d in enumerate(idx.shape)),
    )
    if common is None:
        raise ValueError(
            f"take_along_axis: x of shape {x.shape} and indices of shape {idx.shape} do not "
            f"broadcast on the axes other than {axis}."
        )
    common = list(common)
    _check_range(
        idx, x.shape[axis], "take_along_axis", f"axis {axis} of a tensor of shape {x.shape}"
    )
    x = broadcast_to(x, common[:axis] + [x.shape[axis]] + common[axis + 1 :])
    idx = broadcast_to(idx, common[:axis] + [idx.shape[axis]] + common[axis + 1 :])
    return gather_p.bind(x, idx, axis=axis)


# ------------------------------------------------------------------------------ nonzero
nonzero_p = Primitive(
    "nonzero",
    lambda x: tuple(t.to(torch.int32) for t in torch.nonzero(x, as_tuple=True)),
    abstract=_data_dependent("nonzero"),
    multiple_results=True,
)


def nonzero(x):
    """A tuple of int32 index tensors, one per axis, of the non-zero elements of `x`.

    Example:
        >>> [t.numpy() for t in keratron.ops.nonzero([0, 3, 0, 5])]
        [array([1, 3], dtype=int32)]
    """
    x = as_tensor(x)
    if x.ndim == 0:
        x = reshape(x, (1,))
    return nonzero_p.bind(x)


argwhere_p = Primitive(
    "argwhere",
    lambda x: torch.argwhere(x).to(torch.int32),
    abstract=_data_dependent("argwhere"),
)


def argwhere(x):
    """The int32 indices of the non-zero elements, one row per element: shape (N, x.ndim).

    Example:
        >>> keratron.ops.argwhere([[0, 1], [1, 0]]).numpy()
        array([[0, 1],
               [1, 0]], dtype=int32)
    """
    return argwhere_p.bind(as_tensor(x))


# ------------------------------------------------------------------------------ get_item
# A key is encoded as hashable params plus a list of index tensors (primitive inputs, so
# the graph compiler sees them): entries are None (new axis), Ellipsis, ("b", bool),
# int, ("s", start, stop, step) with step > 0, or ("t", j) for the j-th index tensor.
# Slices with negative steps become positive slices of `x` flipped along those axes
# (torch slices only step forward); `flips` lists the axes.


def _torch_key(entries, idx):
    out = []
    for e in entries:
        if isinstance(e, tuple):
            if e[0] == "s":
                out.append(builtins.slice(e[1], e[2], e[3]))
            elif e[0] == "t":
                out.append(idx[e[1]].long())
            else:
                out.append(e[1])
        else:
            out.append(e)
    return tuple(out)


def _index_impl(x, *idx, key):
    entries, flips = key
    if flips:
        x = torch.flip(x, flips)
    return x[_torch_key(entries, idx)]


def _index_grad_impl(g, *idx, shape, key):
    entries, flips = key
    tkey = _torch_key(entries, idx)
    z = g.new_zeros(shape)
    if idx:
        # Advanced indices may repeat: scatter-add through flat positions so they accumulate.
        n = int(np.prod(shape))
        pos = torch.arange(n, device=g.device).reshape(shape)[tkey]
        z = z.reshape(-1).index_add_(0, pos.reshape(-1), g.reshape(-1)).reshape(shape)
    else:
        z[tkey] = g
    return torch.flip(z, flips) if flips else z


def _index_vjp(g, x, *rest, out, key):
    idx = rest
    return (index_grad_p.bind(g, *idx, shape=x.shape, key=key),) + (None,) * len(idx)


def _index_grad_vjp(g, gout, *rest, out, shape, key):
    idx = rest
    return (index_p.bind(g, *idx, key=key),) + (None,) * len(idx)


def _basic_index_shape(shape, entries) -> tuple | None:
    """The shape of `x[key]` for a key of new axes, ellipses, ints and slices; None for a
    key with index tensors or bools, or an int out of range."""
    used = builtins.sum(1 for e in entries if e is not None and e is not Ellipsis)
    out, dim = [], 0
    for e in entries:
        if e is None:
            out.append(1)
        elif e is Ellipsis:
            rest = len(shape) - used
            out.extend(shape[dim : dim + rest])
            dim += rest
        elif dim >= len(shape):
            return None
        elif type(e) is int:
            if not -shape[dim] <= e < shape[dim]:
                return None
            dim += 1
        elif isinstance(e, tuple) and e[0] == "s" and e[3] > 0:
            out.append(len(range(*builtins.slice(e[1], e[2], e[3]).indices(shape[dim]))))
            dim += 1
        else:
            return None
    return (*out, *shape[dim:])


def _index_shape(x, *idx, key):
    shape = None if idx else _basic_index_shape(x[0], key[0])
    return None if shape is None else [(shape, x[1])]


def _index_grad_shape(g, *idx, shape, key):
    shape = tuple(shape)
    if idx or _basic_index_shape(shape, key[0]) != tuple(g[0]):
        return None
    return [(shape, g[1])]


index_p = Primitive("get_item", _index_impl, _index_vjp, shape_rule=_index_shape)
index_grad_p = Primitive(
    "get_item_grad", _index_grad_impl, _index_grad_vjp, shape_rule=_index_grad_shape
)


def _key_error(x, key, msg):
    return IndexError(f"get_item: {msg} (tensor shape {x.shape}, key {key!r}).")


def _as_index_array(k, x, key) -> Tensor:
    if isinstance(k, Tensor):
        v = k._value
    elif isinstance(k, torch.Tensor):
        v = k.detach()
    else:
        a = np.asarray(k)
        if a.size == 0 and a.dtype.kind == "f":
            a = a.astype(np.int64)  # an empty list is an empty integer index, as in numpy
        if a.dtype.kind not in "biu":
            raise _key_error(x, key, f"index arrays must be integer or boolean, got {a.dtype}")
        v = torch.from_numpy(np.ascontiguousarray(a))
    if v.is_floating_point() or v.is_complex():
        raise _key_error(x, key, f"index arrays must be integer or boolean, got {v.dtype}")
    return _with(Tensor(v), x)


def _parse_key(x, key):
    """Validates `key` against x's shape; returns (params key, index tensors)."""
    parts = list(key) if isinstance(key, tuple) else [key]
    items = []  # (kind, payload)
    for k in parts:
        if k is None or k is Ellipsis:
            items.append(("new" if k is None else "ell", k))
        elif isinstance(k, (bool, np.bool_)):
            items.append(("bool", bool(k)))
        elif isinstance(k, (int, np.integer)):
            items.append(("int", int(k)))
        elif isinstance(k, builtins.slice):
            items.append(("slice", k))
        else:
            t = _as_index_array(k, x, key)
            if t.dtype == "bool":
                items.append(("bool", bool(t._value)) if t.ndim == 0 else ("mask", t))
            else:
                items.append(("arr", t))
    if builtins.sum(kind == "ell" for kind, _ in items) > 1:
        raise _key_error(x, key, "an index can only have a single ellipsis")
    used = builtins.sum(
        t.ndim if kind == "mask" else kind in ("int", "slice", "arr") for kind, t in items
    )
    if used > x.ndim:
        raise _key_error(x, key, f"too many indices: {used} for a tensor of rank {x.ndim}")
    entries, flips, idx = [], [], []
    has_arrays = builtins.any(kind in ("arr", "mask") for kind, _ in items)
    dim = 0
    for kind, v in items:
        if kind in ("new", "bool"):
            entries.append(v if kind == "new" else ("b", v))
            continue
        if kind == "ell":
            entries.append(Ellipsis)
            dim += x.ndim - used
            continue
        n = x.shape[dim] if dim < x.ndim else 0
        if kind == "int":
            if not -n <= v < n:
                raise _key_error(x, key, f"index {v} is out of bounds for axis {dim} with size {n}")
            entries.append(v)
        elif kind == "slice":
            bounds = [int(b) if isinstance(b, Tensor) else b for b in (v.start, v.stop, v.step)]
            if bounds[2] == 0:
                raise ValueError(f"get_item: slice step cannot be zero (key {key!r}).")
            start, stop, step = builtins.slice(*bounds).indices(n)
            count = len(range(start, stop, step))
            if step < 0:
                # x[s:e:-k] == flip(x)[n-1-s :: k] (count elements)
                flips.append(dim)
                start, step = n - 1 - start, -step
            stop = start + (count - 1) * step + 1 if count else start
            entries.append(("s", start, stop, step))
        elif kind == "arr":
            _check_range(v, n, "get_item", f"axis {dim} of a tensor of shape {x.shape}")
            entries.append(("t", len(idx)))
            idx.append(v)
        else:  # boolean mask over v.ndim axes: numpy turns it into one index per axis
            covered = x.shape[dim : dim + v.ndim]
            if tuple(v.shape) != covered:
                raise _key_error(
                    x,
                    key,
                    f"boolean index of shape {v.shape} does not match the indexed axes "
                    f"{tuple(range(dim, dim + v.ndim))} of size {covered}",
                )
            for t in nonzero_p.bind(v):
                entries.append(("t", len(idx)))
                idx.append(t)
            dim += v.ndim
            continue
        dim += 1
    if has_arrays:
        # numpy treats integers next to index arrays as index arrays (this decides where the
        # indexed axes go); torch treats them as basic indices, so make them arrays.
        bshape = rules.broadcast_shapes(*(t.shape for t in idx)) if idx else ()
        if bshape is None:
            shapes = [t.shape for t in idx]
            raise _key_error(x, key, f"index arrays of shapes {shapes} do not broadcast")
        if bshape:
            for i, e in enumerate(entries):
                if isinstance(e, int) and not isinstance(e, bool):
                    entries[i] = ("t", len(idx))
                    idx.append(Tensor(torch.full(bshape, e, dtype=torch.int64, device=_home(x))))
    return (tuple(entries), tuple(flips)), idx


def get_item(x, key):
    """numpy-style indexing `x[key]`: ints, slices (any step), None, Ellipsis, integer index
    arrays and boolean masks (Tensor, numpy or list). Differentiable in `x`; repeated indices
    accumulate their gradients.

    Example:
        >>> x = keratron.ops.arange(12).reshape(3, 4)
        >>> keratron.ops.get_item(x, (slice(None, None, -1), [0, 0])).numpy()
        array([[8, 8],
               [4, 4],
               [0, 0]], dtype=int32)
    """
    x = as_tensor(x)
    params, idx = _parse_key(x, key)
    try:
        return index_p.bind(x, *idx, key=params)
    except (IndexError, RuntimeError) as e:  # e.g. index arrays that do not broadcast
        raise _key_error(x, key, str(e).split("\n")[0]) from e
