"""Linear algebra: the fused `matmul` primitive, products (dot, tensordot, einsum, ...), norms,
`solve` and `inv`.

`matmul` is the hot primitive behind Dense: inputs `(x, w, bias or None)` and an optional
activation epilogue, applied in place on the fresh product, so a Dense layer is one call. Its
VJP takes the activation's derivative from the output (relu, relu6, sigmoid, tanh) or from the
recomputed pre-activation (gelu), then forms both products. A device kernel may be attached as
`matmul_p.kernel` (see `ops._dispatch`). The epilogue helpers here are shared with `ops.conv`.
"""

from __future__ import annotations

import math
import string

import torch
import torch.nn.functional as F

from keratron import config
from keratron.ops import reduction
from keratron.ops._core import Primitive, Tensor, as_tensor, canonical_axis, on_device
from keratron.ops.elementwise import (
    abs,
    add,
    cast,
    erf,
    exp,
    greater,
    multiply,
    negative,
    not_equal,
    power,
    relu6_grad_p,
    relu_grad_p,
    sqrt,
    square,
    subtract,
    tanh,
    where,
)
from keratron.ops.shape import broadcast_to, moveaxis, reshape, transpose

__all__ = [
    "matmul",
    "fused_matmul",
    "dot",
    "tensordot",
    "einsum",
    "outer",
    "inner",
    "vdot",
    "norm",
    "solve",
    "inv",
]

# ------------------------------------------------------------------------------ epilogues
EPILOGUE_ACTIVATIONS = (None, "relu", "relu6", "gelu", "gelu_tanh", "sigmoid", "tanh")
_GELU_C = math.sqrt(2.0 / math.pi)
_GELU_A = 0.044715


def standardize_activation(activation, op: str):
    """Validates an epilogue activation name ("linear" means none)."""
    if activation == "linear":
        return None
    if activation not in EPILOGUE_ACTIVATIONS:
        raise ValueError(
            f"{op}: argument `activation` must be one of {EPILOGUE_ACTIVATIONS} or 'linear'. "
            f"Received: activation={activation!r}"
        )
    return activation


def apply_epilogue(y: torch.Tensor, activation) -> torch.Tensor:
    """Applies the activation to a freshly computed torch tensor, in place where torch can."""
    if activation is None:
        return y
    if activation == "relu":
        return y.relu_()
    if activation == "relu6":
        return y.clamp_(0.0, 6.0)
    if activation == "sigmoid":
        return y.sigmoid_()
    if activation == "tanh":
        return y.tanh_()
    if activation == "gelu":
        return F.gelu(y)
    return F.gelu(y, approximate="tanh")


def gelu_derivative(z: Tensor, approximate: bool) -> Tensor:
    """d gelu / dz at the pre-activation `z`, written with ops (so it differentiates again)."""
    if not approximate:
        # Phi(z) + z * phi(z)
        cdf = multiply(add(erf(multiply(z, 1.0 / math.sqrt(2.0))), 1.0), 0.5)
        pdf = multiply(exp(multiply(square(z), -0.5)), 1.0 / math.sqrt(2.0 * math.pi))
        return add(cdf, multiply(z, pdf))
    z2 = square(z)
    t = tanh(multiply(multiply(z, add(multiply(z2, _GELU_A), 1.0)), _GELU_C))
    dt = multiply(subtract(1.0, square(t)), multiply(add(multiply(z2, 3 * _GELU_A), 1.0), _GELU_C))
    return multiply(add(add(t, 1.0), multiply(z, dt)), 0.5)


def epilogue_grad(g: Tensor, out: Tensor, activation, pre_activation) -> Tensor:
    """Pulls the cotangent `g` back through the epilogue.

    relu, relu6, sigmoid and tanh read their derivative off the output; gelu calls
    `pre_activation()` to recompute the product it was applied to.
    """
    if activation is None:
        return g
    if activation == "relu":
        return relu_grad_p.bind(g, out)
    if activation == "relu6":
        return relu6_grad_p.bind(g, out)
    if activation == "sigmoid":
        return multiply(g, multiply(out, subtract(1, out)))
    if activation == "tanh":
        return multiply(g, subtract(1, square(out)))
    return multiply(g, gelu_derivative(pre_activation(), activation == "gelu_tanh"))


# ------------------------------------------------------------------------------ matmul
def _matmul_impl(x, w, b, activation):
    if x.dim() == 2 and w.dim() == 2:
        y = torch.mm(x, w) if b is None else torch.addmm(b, x, w)
        return y if activation is None else apply_epilogue(y, activation)
    if w.dim() == 2:
        # One BLAS call over all leading dims of x, with the bias folded in by addmm.
        x2 = x.reshape(-1, x.shape[-1])
        y = torch.mm(x2, w) if b is None else torch.addmm(b, x2, w)
        y = y.reshape(*x.shape[:-1], w.shape[-1])
    else:
        y = torch.matmul(x, w)
        if b is not None:
            y.add_(b)
    return apply_epilogue(y, activation)


def _mT(x: Tensor) -> Tensor:
    axes = list(range(x.ndim))
    axes[-1], axes[-2] = axes[-2], axes[-1]
    return transpose(x, axes)


def _matmul_vjp(g, x, w, b, out, activation):
    g = epilogue_grad(g, out, activation, lambda: matmul_p.bind(x, w, b, activation=None))
    gx = matmul_p.bind(g, _mT(w), None, activation=None)
    if w.ndim == 2 and x.ndim > 2:
        k, n = w.shape
        gw = matmul_p.bind(_mT(reshape(x, (-1, k))), reshape(g, (-1, n)), None, activation=None)
    else:
        gw = matmul_p.bind(_mT(x), g, None, activation=None)
    # The engine sums the bias cotangent over the leading axes.
    return gx, gw, (None if b is None else g)


matmul_p = Primitive("matmul", _matmul_impl, _matmul_vjp)
# matmul_p.kernel: optional device route, attached by the Triton kernels package.


def _promote(*xs) -> list[Tensor]:
    xs = [as_tensor(x) for x in xs]
    dt = xs[0]._value.dtype
    for x in xs[1:]:
        dt = torch.promote_types(dt, x._value.dtype)
    if dt is torch.bool:
        dt = torch.int32
    dev = next((x._value.device for x in xs if x._value.is_cuda), xs[0]._value.device)
    out = []
    for x in xs:
        x = cast(x, dt)
        x = on_device(x, dev)
        out.append(x)
    return out


def _float(x: Tensor) -> Tensor:
    if x._value.dtype.is_floating_point:
        return x
    return cast(x, config.floatx())


def _plain_matrix_product(x1, x2, transpose_x2: bool = False) -> Tensor | None:
    """`x1 @ x2` (or `x1 @ x2.T`) for the common case that needs no conversion: two Tensors
    holding non-bool matrices of one dtype on one device whose contracted axes match. Returns
    None for anything else, so the caller takes its general path.
    """
    if not (isinstance(x1, Tensor) and isinstance(x2, Tensor)):
        return None
    v1, v2 = x1._value, x2._value
    if not (
        v1.dim() == 2
        and v2.dim() == 2
        and v1.dtype is v2.dtype
        and v1.dtype is not torch.bool
        and v1.device == v2.device
        and v1.shape[1] == v2.shape[1 if transpose_x2 else 0]
    ):
        return None
    return matmul_p.bind(x1, _mT(x2) if transpose_x2 else x2, None, activation=None)


def matmul(x1, x2):
    """Matrix product with numpy's `matmul` rules: batch dimensions broadcast, a 1-D first
    operand is a row vector and a 1-D second operand a column vector (removed afterwards).

    Args:
        x1: tensor of rank >= 1.
        x2: tensor of rank >= 1.

    Returns:
        The product, of the operands' promoted dtype.

    Example:
        >>> a = keratron.ops.ones((2, 3, 4))
        >>> keratron.ops.matmul(a, keratron.ops.ones((4, 5))).shape
        (2, 3, 5)
    """
    y = _plain_matrix_product(x1, x2)
    if y is not None:
        return y
    x1, x2 = _promote(x1, x2)
    if x1.ndim == 0 or x2.ndim == 0:
        raise ValueError(
            "matmul: operands must have rank >= 1 (use multiply for scalars). "
            f"Received shapes {x1.shape} and {x2.shape}."
        )
    a = reshape(x1, (1, x1.shape[0])) if x1.ndim == 1 else x1
    b = reshape(x2, (x2.shape[0], 1)) if x2.ndim == 1 else x2
    if a.shape[-1] != b.shape[-2]:
        raise ValueError(
            "matmul: the last axis of x1 must match the second-to-last axis of x2. "
            f"Received shapes {x1.shape} and {x2.shape}."
        )
    try:
        torch.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    except RuntimeError as e:
        raise ValueError(
            f"matmul: batch dimensions do not broadcast. Received shapes {x1.shape} and {x2.shape}."
        ) from e
    y = matmul_p.bind(a, b, None, activation=None)
    if x1.ndim == 1 and x2.ndim == 1:
        return reshape(y, ())
    if x1.ndim == 1:
        return reshape(y, y.shape[:-2] + y.shape[-1:])
    if x2.ndim == 1:
        return reshape(y, y.shape[:-1])
    return y


def fused_matmul(x, w, bias=None, activation=None):
    """`activation(x @ w + bias)` as one primitive call (what Dense computes).

    Args:
        x: tensor of shape `(..., K)`.
        w: kernel of shape `(K, N)`.
        bias: optional vector of shape `(N,)`.
        activation: None, "linear", "relu", "relu6", "gelu", "gelu_tanh", "sigmoid" or "tanh".

    Returns:
        Tensor of shape `(..., N)`.

    Example:
        >>> x, w = keratron.ops.ones((8, 3)), keratron.ops.ones((3, 4))
        >>> keratron.ops.fused_matmul(x, w, keratron.ops.zeros((4,)), "relu").shape
        (8, 4)
    """
    activation = standardize_activation(activation, "fused_matmul")
    args = [x, w] if bias is None else [x, w, bias]
    args = _promote(*args)
    x, w = args[0], args[1]
    b = args[2] if bias is not None else None
    if w.ndim != 2:
        raise ValueError(f"fused_matmul: `w` must have shape (K, N). Received shape {w.shape}.")
    if x.ndim == 0 or x.shape[-1] != w.shape[0]:
        raise ValueError(
            f"fused_matmul: `x` must have shape (..., {w.shape[0]}) to match `w` of shape "
            f"{w.shape}. Received shape {x.shape}."
        )
    if b is not None and b.shape != (w.shape[1],):
        raise ValueError(
            f"fused_matmul: `bias` must have shape ({w.shape[1]},). Received shape {b.shape}."
        )
    if x.ndim == 1:
        y = matmul_p.bind(reshape(x, (1, x.shape[0])), w, b, activation=activation)
        return reshape(y, (w.shape[1],))
    return matmul_p.bind(x, w, b, activation=activation)


# ------------------------------------------------------------------------------ einsum
def _einsum_impl(*operands, equation):
    return torch.einsum(equation, *operands)


def _einsum_vjp(g, *operands, out, equation):
    lhs, rhs = equation.split("->")
    terms = lhs.split(",")
    grads = []
    for i, (term, x) in enumerate(zip(terms, operands)):
        others = [t for j, t in enumerate(terms) if j != i]
        avail = set(rhs).union(*others)
        kept = "".join(c for c in term if c in avail)
        eq = ",".join([rhs, *others]) + "->" + kept
        gi = einsum_p.bind(g, *(o for j, o in enumerate(operands) if j != i), equation=eq)
        # Letters summed away only by this operand come back as broadcasts; letters where the
        # operand had size 1 and the others more come back full size (the engine sums them).
        sizes = dict(zip(kept, gi.shape))
        gi = reshape(gi, tuple(sizes.get(c, 1) for c in term))
        gi = broadcast_to(
            gi, tuple(d if sizes.get(c, 1) == 1 else sizes[c] for c, d in zip(term, x.shape))
        )
        grads.append(gi)
    return tuple(grads)


einsum_p = Primitive("einsum", _einsum_impl, _einsum_vjp)


def _canonical_einsum(subscripts: str, operands: list[Tensor]):
    """Rewrites an equation to explicit form: ellipses become letters, the output is spelled
    out, and a letter repeated inside one operand becomes a fresh letter tied to it by an
    identity matrix (so every VJP is again an einsum)."""
    eq = subscripts.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(operands):
        raise ValueError(
            f"einsum: subscripts {subscripts!r} name {len(terms)} operands, "
            f"received {len(operands)}."
        )
    for c in eq:
        if not (c in string.ascii_letters or c in ",.->"):
            raise ValueError(f"einsum: invalid character {c!r} in subscripts {subscripts!r}.")
    free = iter(c for c in string.ascii_letters if c not in eq)
    ell_rank = 0
    for t, x in zip(terms, operands):
        if "..." in t:
            ell_rank = max(ell_rank, x.ndim - (len(t) - 3))
    ell = "".join(next(free) for _ in range(ell_rank))
    explicit = []
    for i, (t, x) in enumerate(zip(terms, operands)):
        if "..." in t:
            n = x.ndim - (len(t) - 3)
            if n < 0:
                raise ValueError(
                    f"einsum: operand {i} has rank {x.ndim}, too small for subscripts {t!r}."
                )
            t = t.replace("...", ell[ell_rank - n :])
        if len(t) != x.ndim or "." in t:
            raise ValueError(
                f"einsum: operand {i} has shape {x.shape}, which does not match subscripts "
                f"{terms[i]!r}."
            )
        explicit.append(t)
    if arrow:
        rhs = rhs.replace("...", ell)
    else:
        counts = {}
        for t in explicit:
            for c in t:
                counts[c] = counts.get(c, 0) + 1
        rhs = ell + "".join(sorted(c for c, n in counts.items() if n == 1 and c not in ell))
    sizes = {}
    for t, x in zip(explicit, operands):
        for c, d in zip(t, x.shape):
            if sizes.get(c, 1) not in (1, d) and d != 1:
                raise ValueError(
                    f"einsum: index {c!r} has inconsistent sizes {sizes[c]} and {d} in "
                    f"{subscripts!r}."
                )
            sizes[c] = max(sizes.get(c, 1), d)
    for c in rhs:
        if c not in sizes or rhs.count(c) > 1:
            raise ValueError(f"einsum: invalid output subscripts {rhs!r} in {subscripts!r}.")
    operands = list(operands)
    extra_terms = []
    for i, t in enumerate(explicit):
        seen = ""
        for c in t:
            if c in seen:
                fresh = next(free)
                n = operands[i].shape[t.index(c)]
                eye = torch.eye(n, dtype=operands[i]._value.dtype, device=operands[i]._value.device)
                operands.append(Tensor(eye))
                extra_terms.append(c + fresh)
                c = fresh
            seen += c
        explicit[i] = seen
    return ",".join(explicit + extra_terms) + "->" + rhs, operands


def einsum(subscripts, *operands):
    """Einstein summation (numpy's `einsum`), differentiable w.r.t. every operand.

    Ellipses, implicit outputs and repeated indices (diagonals, traces) are supported.

    Args:
        subscripts: e.g. "ij,jk->ik", "bij,bjk->bik", "...ij,...j->...i".
        *operands: the tensors.

    Example:
        >>> a, b = keratron.ops.ones((2, 3)), keratron.ops.ones((3, 4))
        >>> keratron.ops.einsum("ij,jk->ik", a, b).shape
        (2, 4)
    """
    if not isinstance(subscripts, str):
        raise TypeError(f"einsum: `subscripts` must be a string. Received: {subscripts!r}")
    if not operands:
        raise ValueError("einsum: expected at least one operand.")
    xs = _promote(*operands)
    equation, xs = _canonical_einsum(subscripts, xs)
    return einsum_p.bind(*xs, equation=equation)


# ------------------------------------------------------------------------------ products
def tensordot(x1, x2, axes=2):
    """Sum of products over the given axes (numpy's `tensordot`).

    Args:
        x1: first tensor.
        x2: second tensor.
        axes: an int N (the last N axes of x1 with the first N of x2), or a pair of axis
            lists (or ints) to contract.

    Example:
        >>> a, b = keratron.ops.ones((2, 3, 4)), keratron.ops.ones((4, 3, 5))
        >>> keratron.ops.tensordot(a, b, axes=([1, 2], [1, 0])).shape
        (2, 5)
    """
    x1, x2 = _promote(x1, x2)
    if isinstance(axes, int):
        if axes < 0 or axes > min(x1.ndim, x2.ndim):
            raise ValueError(
                f"tensordot: `axes` must be in [0, {min(x1.ndim, x2.ndim)}] for shapes "
                f"{x1.shape} and {x2.shape}. Received: axes={axes}"
            )
        a1 = tuple(range(x1.ndim - axes, x1.ndim))
        a2 = tuple(range(axes))
    else:
        if len(axes) != 2:
            raise ValueError(
                f"tensordot: `axes` must be an int or a pair of axis lists. Received: {axes!r}"
            )
        a1, a2 = ((a,) if isinstance(a, int) else tuple(a) for a in axes)
        a1 = canonical_axis(a1, x1.ndim, "tensordot")
        a2 = canonical_axis(a2, x2.ndim, "tensordot")
        if len(a1) != len(a2):
            raise ValueError(
                f"tensordot: both axis lists must have the same length. Received: {axes!r}"
            )
    for i, j in zip(a1, a2):
        if x1.shape[i] != x2.shape[j]:
            raise ValueError(
                f"tensordot: axis {i} of x1 (size {x1.shape[i]}) does not match axis {j} of x2 "
                f"(size {x2.shape[j]}). Received shapes {x1.shape} and {x2.shape}."
            )
    letters = iter(string.ascii_letters)
    t1 = [next(letters) for _ in range(x1.ndim)]
    t2 = [next(letters) for _ in range(x2.ndim)]
    for i, j in zip(a1, a2):
        t2[j] = t1[i]
    out = [c for k, c in enumerate(t1) if k not in a1] + [
        c for k, c in enumerate(t2) if k not in a2
    ]
    return einsum_p.bind(x1, x2, equation=f"{''.join(t1)},{''.join(t2)}->{''.join(out)}")


def dot(x1, x2):
    """numpy's `dot`: a product for scalars, the inner product for vectors, matmul for
    matrices, and for N-D operands a sum over the last axis of x1 and the second-to-last of
    x2.

    Example:
        >>> keratron.ops.dot([1.0, 2.0], [3.0, 4.0]).numpy()
        array(11., dtype=float32)
    """
    y = _plain_matrix_product(x1, x2)
    if y is not None:
        return y
    x1, x2 = _promote(x1, x2)
    if x1.ndim == 0 or x2.ndim == 0:
        return multiply(x1, x2)
    if x2.ndim <= 2:
        return matmul(x1, x2)
    return tensordot(x1, x2, axes=([x1.ndim - 1], [x2.ndim - 2]))


def inner(x1, x2):
    """Sum of products over the last axes of both operands (numpy's `inner`).

    Example:
        >>> keratron.ops.inner(keratron.ops.ones((2, 3)), keratron.ops.ones((4, 3))).shape
        (2, 4)
    """
    y = _plain_matrix_product(x1, x2, transpose_x2=True)
    if y is not None:
        return y
    x1, x2 = _promote(x1, x2)
    if x1.ndim == 0 or x2.ndim == 0:
        return multiply(x1, x2)
    return tensordot(x1, x2, axes=([x1.ndim - 1], [x2.ndim - 1]))


def outer(x1, x2):
    """Outer product of the flattened operands: shape `(x1.size, x2.size)`.

    Example:
        >>> keratron.ops.outer([1.0, 2.0], [1.0, 2.0, 3.0]).shape
        (2, 3)
    """
    x1, x2 = _promote(x1, x2)
    return multiply(reshape(x1, (-1, 1)), reshape(x2, (1, -1)))


def vdot(x1, x2):
    """Dot product of the flattened operands (real tensors).

    Example:
        >>> keratron.ops.vdot([[1.0, 2.0]], [[3.0, 4.0]]).numpy()
        array(11., dtype=float32)
    """
    x1, x2 = _promote(x1, x2)
    if x1.size != x2.size:
        raise ValueError(
            f"vdot: operands must have the same size. Received shapes {x1.shape} and {x2.shape}."
        )
    return einsum_p.bind(reshape(x1, (-1,)), reshape(x2, (-1,)), equation="a,a->")


# ------------------------------------------------------------------------------ norms
def _safe_sqrt(s: Tensor) -> Tensor:
    """sqrt with gradient 0 (not NaN) at 0, as torch.linalg.norm has."""
    pos = greater(s, 0)
    return where(pos, sqrt(where(pos, s, 1)), 0)


def _svdvals_grad_impl(x, g):
    u, _, vh = torch.linalg.svd(x, full_matrices=False)
    return (u * g.unsqueeze(-2)) @ vh


# d sigma_i = u_i^T dX v_i, so the cotangent of the singular values maps to U diag(g) V^T.
svdvals_grad_p = Primitive("svdvals_grad", _svdvals_grad_impl)
svdvals_p = Primitive(
    "svdvals",
    torch.linalg.svdvals,
    lambda g, x, out: (svdvals_grad_p.bind(x, g),),
)


def _vector_norm(x: Tensor, ord, axis: tuple) -> Tensor:
    if ord is None or ord == 2:
        return _safe_sqrt(reduction.sum(square(x), axis, keepdims=True))
    if ord == 1:
        return reduction.sum(abs(x), axis, keepdims=True)
    if ord == float("inf"):
        return reduction.max(abs(x), axis, keepdims=True)
    if ord == float("-inf"):
        return reduction.min(abs(x), axis, keepdims=True)
    if ord == 0:
        return reduction.sum(cast(not_equal(x, 0), x.dtype), axis, keepdims=True)
    if isinstance(ord, str):
        raise ValueError(f"norm: ord={ord!r} is only valid for matrix norms.")
    return power(reduction.sum(power(abs(x), float(ord)), axis, keepdims=True), 1.0 / float(ord))


def _matrix_norm(x: Tensor, ord, axis: tuple) -> Tensor:
    r, c = axis
    if ord in (None, "fro"):
        return _safe_sqrt(reduction.sum(square(x), axis, keepdims=True))
    if ord in (1, -1):
        colsums = reduction.sum(abs(x), r, keepdims=True)
        return (reduction.max if ord == 1 else reduction.min)(colsums, c, keepdims=True)
    if ord in (float("inf"), float("-inf")):
        rowsums = reduction.sum(abs(x), c, keepdims=True)
        return (reduction.max if ord > 0 else reduction.min)(rowsums, r, keepdims=True)
    if ord in (2, -2, "nuc"):
        s = svdvals_p.bind(moveaxis(x, (r, c), (-2, -1)))
        if ord == "nuc":
            v = reduction.sum(s, -1)
        else:
            v = (reduction.max if ord == 2 else reduction.min)(s, -1)
        shape = list(x.shape)
        shape[r] = shape[c] = 1
        return reshape(v, shape)
    raise ValueError(
        "norm: for matrices `ord` must be one of None, 'fro', 'nuc', 1, -1, 2, -2, inf, -inf. "
        f"Received: ord={ord!r}"
    )


def norm(x, ord=None, axis=None, keepdims=False):
    """Vector or matrix norm, as numpy.linalg.norm / keras.ops.norm.

    With `axis=None` a 1-D input gets a vector norm and a 2-D input a matrix norm (ord=None
    flattens any rank into a 2-norm); an int axis gives vector norms, a pair of axes matrix
    norms. Integer inputs are cast to floatx.

    Args:
        x: input tensor.
        ord: None/2, 1, inf, -inf, 0 or any p for vectors; None/"fro", "nuc", 1, -1, 2, -2,
            inf, -inf for matrices.
        axis: None, an int or a pair of ints.
        keepdims: keep the reduced axes with size 1.

    Example:
        >>> keratron.ops.norm([3.0, 4.0]).numpy()
        array(5., dtype=float32)
    """
    x = _float(as_tensor(x))
    if axis is None:
        if ord is None:
            axes = tuple(range(x.ndim))
            r = _safe_sqrt(reduction.sum(square(x), axes, keepdims=True))
            return r if keepdims else reshape(r, ())
        if x.ndim not in (1, 2):
            raise ValueError(
                f"norm: with `ord` given and axis=None, x must be 1-D or 2-D. Received shape "
                f"{x.shape}."
            )
        axis = tuple(range(x.ndim))
    axes = canonical_axis(axis if isinstance(axis, (tuple, list)) else (axis,), x.ndim, "norm")
    if len(axes) == 1:
        r = _vector_norm(x, ord, axes)
    elif len(axes) == 2:
        if axes[0] == axes[1]:
            raise ValueError(f"norm: the two axes must differ. Received: axis={axis!r}")
        r = _matrix_norm(x, ord, axes)
    else:
        raise ValueError(f"norm: `axis` must be None, an int or a pair. Received: axis={axis!r}")
    if keepdims:
        return r
    return reshape(r, tuple(d for i, d in enumerate(r.shape) if i not in axes))


# ------------------------------------------------------------------------------ solve, inv
def _solve_vjp(g, a, b, out):
    gb = solve_p.bind(_mT(a), g)
    return negative(matmul_p.bind(gb, _mT(out), None, activation=None)), gb


solve_p = Primitive("solve", torch.linalg.solve, _solve_vjp)


def solve(a, b):
    """Solves `a @ x = b` for x; `b` is a matrix `(..., M, K)` or a vector `(..., M)`.

    Example:
        >>> keratron.ops.solve([[2.0, 0.0], [0.0, 4.0]], [2.0, 4.0]).numpy()
        array([1., 1.], dtype=float32)
    """
    a, b = _promote(a, b)
    a, b = _float(a), _float(b)
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise ValueError(f"solve: `a` must be a square matrix (..., M, M). Received {a.shape}.")
    vector = b.ndim == a.ndim - 1
    if vector:
        b = reshape(b, b.shape + (1,))
    if b.ndim < 2 or b.shape[-2] != a.shape[-1]:
        raise ValueError(
            f"solve: `b` must have shape (..., {a.shape[-1]}, K) or (..., {a.shape[-1]}). "
            f"Received {b.shape} for `a` of shape {a.shape}."
        )
    x = solve_p.bind(a, b)
    return reshape(x, x.shape[:-1]) if vector else x


def _inv_vjp(g, x, out):
    out_t = _mT(out)
    return (
        negative(
            matmul_p.bind(
                matmul_p.bind(out_t, g, None, activation=None), out_t, None, activation=None
            )
        ),
    )


inv_p = Primitive("inv", torch.linalg.inv, _inv_vjp)


def inv(x):
    """Inverse of a square matrix (batched over leading axes).

    Example:
        >>> keratron.ops.inv([[2.0, 0.0], [0.0, 4.0]]).numpy()
        array([[0.5 , 0.  ],
               [0.  , 0.25]], dtype=float32)
    """
    x = _float(as_tensor(x))
    if x.ndim < 2 or x.shape[-1] != x.shape[-2]:
        raise ValueError(f"inv: expected a square matrix (..., M, M). Received shape {x.shape}.")
    return inv_p.bind(x)
