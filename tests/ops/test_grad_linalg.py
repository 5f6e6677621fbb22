"""Gradient-check table for linear algebra (matmul with every epilogue, products, einsum,
norms, solve, inv), plus value and error tests for the same ops.

Each row: (name, keratron fn, torch fn, float64 inputs[, check_grads options]). Every row is
checked by float64 central differences and against torch.autograd.
"""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import keratron as kt
from keratron.autodiff.primitive import PRIMITIVES
from tests.gradcheck import check_against_torch, check_grads

ops = kt.ops
R = np.random.default_rng(0)
INF = float("inf")


def nrm(*shape):
    return R.standard_normal(shape)


EPILOGUES = {
    None: lambda y: y,
    "relu": torch.relu,
    "relu6": lambda y: torch.clamp(y, 0, 6),
    "gelu": F.gelu,
    "gelu_tanh": lambda y: F.gelu(y, approximate="tanh"),
    "sigmoid": torch.sigmoid,
    "tanh": torch.tanh,
}


def _fused_row(act, xshape=(2, 3, 4)):
    # Scaled so that relu6's clamp at 6 is exercised too.
    return (
        f"fused_matmul_{act}",
        lambda x, w, b: ops.fused_matmul(x, w, b, activation=act),
        lambda x, w, b: EPILOGUES[act](x @ w + b),
        [nrm(*xshape) * 2, nrm(4, 5) * 2, nrm(5)],
    )


def _einsum_row(eq, *shapes):
    return (
        f"einsum_{eq}",
        lambda *xs: ops.einsum(eq, *xs),
        lambda *xs: torch.einsum(eq, *xs),
        [nrm(*s) for s in shapes],
    )


def _norm_row(name, shape, **kw):
    return (
        f"norm_{name}",
        lambda x: ops.norm(x, **kw),
        lambda x: torch.linalg.norm(
            x, ord=kw.get("ord"), dim=kw.get("axis"), keepdim=kw.get("keepdims", False)
        ),
        [nrm(*shape)],
    )


SPD = nrm(4, 4) + 4 * np.eye(4)

ROWS = [
    ("matmul_2d", ops.matmul, torch.matmul, [nrm(3, 4), nrm(4, 5)]),
    ("matmul_batched", ops.matmul, torch.matmul, [nrm(2, 3, 4), nrm(2, 4, 5)]),
    ("matmul_broadcast", ops.matmul, torch.matmul, [nrm(2, 1, 3, 4), nrm(5, 4, 2)]),
    ("matmul_batch_by_2d", ops.matmul, torch.matmul, [nrm(2, 3, 4), nrm(4, 5)]),
    ("matmul_2d_by_batch", ops.matmul, torch.matmul, [nrm(3, 4), nrm(2, 4, 5)]),
    ("matmul_vec_vec", ops.matmul, torch.matmul, [nrm(4), nrm(4)]),
    ("matmul_mat_vec", ops.matmul, torch.matmul, [nrm(2, 3, 4), nrm(4)]),
    ("matmul_vec_mat", ops.matmul, torch.matmul, [nrm(4), nrm(2, 4, 5)]),
    *[_fused_row(act) for act in EPILOGUES],
    _fused_row("relu", xshape=(4,)),
    (
        "fused_matmul_no_bias",
        lambda x, w: ops.fused_matmul(x, w, activation="tanh"),
        lambda x, w: torch.tanh(x @ w),
        [nrm(3, 4), nrm(4, 2)],
    ),
    ("dot_vec", ops.dot, torch.dot, [nrm(5), nrm(5)]),
    ("dot_mat", ops.dot, torch.matmul, [nrm(3, 4), nrm(4, 2)]),
    (
        "dot_nd",
        ops.dot,
        lambda a, b: torch.tensordot(a, b, dims=([2], [1])),
        [nrm(2, 3, 4), nrm(5, 4, 2)],
    ),
    ("tensordot_2", ops.tensordot, torch.tensordot, [nrm(2, 3, 4), nrm(3, 4, 5)]),
    (
        "tensordot_pairs",
        lambda a, b: ops.tensordot(a, b, axes=([1, 2], [1, 0])),
        lambda a, b: torch.tensordot(a, b, dims=([1, 2], [1, 0])),
        [nrm(2, 3, 4), nrm(4, 3, 5)],
    ),
    (
        "tensordot_ints",
        lambda a, b: ops.tensordot(a, b, axes=(0, 1)),
        lambda a, b: torch.tensordot(a, b, dims=([0], [1])),
        [nrm(3, 2), nrm(4, 3)],
    ),
    _einsum_row("ij,jk->ik", (2, 3), (3, 4)),
    _einsum_row("bij,bjk->bik", (2, 3, 4), (2, 4, 5)),
    _einsum_row("bhqd,bhkd->bhqk", (2, 2, 3, 4), (2, 2, 5, 4)),
    _einsum_row("ij,jk,kl->il", (2, 3), (3, 4), (4, 2)),
    _einsum_row("bi,bj,ij->b", (3, 2), (3, 4), (2, 4)),
    _einsum_row("ij->", (2, 3)),
    _einsum_row("ij->ji", (2, 3)),
    _einsum_row("i,j->ij", (3,), (4,)),
    _einsum_row("ij,ij->i", (1, 3), (4, 3)),
    _einsum_row("...ij,...jk->...ik", (2, 3, 4), (4, 5)),
    _einsum_row("ii->i", (3, 3)),
    _einsum_row("ii", (3, 3)),
    _einsum_row("ij,jk", (2, 3), (3, 4)),
    ("outer", ops.outer, lambda a, b: torch.outer(a.flatten(), b.flatten()), [nrm(2, 3), nrm(4)]),
    ("inner", ops.inner, torch.inner, [nrm(2, 3), nrm(4, 3)]),
    ("vdot", ops.vdot, lambda a, b: torch.vdot(a.flatten(), b.flatten()), [nrm(2, 3), nrm(3, 2)]),
    _norm_row("default", (3, 4)),
    _norm_row("keepdims_all", (3, 4), keepdims=True),
    _norm_row("vec2_axis1", (3, 4), ord=2, axis=1),
    _norm_row("vec1", (3, 4), ord=1, axis=0),
    _norm_row("vec_inf", (3, 4), ord=INF, axis=-1),
    _norm_row("vec_neg_inf", (3, 4), ord=-INF, axis=-1, keepdims=True),
    _norm_row("vec_p3", (3, 4), ord=3, axis=-1),
    _norm_row("vec_1d", (5,), ord=2),
    _norm_row("fro", (2, 3, 4), ord="fro", axis=(1, 2)),
    _norm_row("fro_2d", (3, 4), ord="fro"),
    _norm_row("mat1", (3, 4), ord=1, axis=(0, 1)),
    _norm_row("mat_neg1", (3, 4), ord=-1, axis=(0, 1)),
    _norm_row("mat_inf", (2, 3, 4), ord=INF, axis=(1, 2), keepdims=True),
    _norm_row("mat_neg_inf", (3, 4), ord=-INF, axis=(0, 1)),
    _norm_row("mat2", (3, 4), ord=2, axis=(0, 1)),
    _norm_row("mat_neg2", (2, 3, 4), ord=-2, axis=(2, 1)),
    _norm_row("nuc", (2, 3, 4), ord="nuc", axis=(1, 2)),
    ("solve_matrix", ops.solve, torch.linalg.solve, [SPD, nrm(4, 2)]),
    (
        "solve_vector",
        ops.solve,
        lambda a, b: torch.linalg.solve(a, b.unsqueeze(-1)).squeeze(-1),
        [SPD, nrm(4)],
    ),
    ("inv", ops.inv, torch.linalg.inv, [SPD]),
]


@pytest.mark.parametrize("row", ROWS, ids=[r[0] for r in ROWS])
def test_grad_finite_differences(row):
    _, fn, _, args, *opts = row
    check_grads(fn, args, **(opts[0] if opts else {}))


@pytest.mark.parametrize("row", ROWS, ids=[r[0] for r in ROWS])
def test_grad_against_torch(row):
    _, fn, torch_fn, args, *_ = row
    check_against_torch(fn, torch_fn, args)


@pytest.mark.parametrize("act", [None, "sigmoid", "tanh", "gelu", "gelu_tanh"])
def test_matmul_second_order(act):
    check_grads(
        lambda x, w, b: ops.fused_matmul(x, w, b, activation=act),
        [nrm(3, 4), nrm(4, 2), nrm(2)],
        order=2,
    )


def test_batched_matmul_second_order():
    check_grads(ops.matmul, [nrm(2, 3, 4), nrm(4, 2)], order=2)


def test_inv_second_order():
    check_grads(ops.inv, [SPD], order=2)


# ------------------------------------------------------------------------------ values
def test_fused_matmul_is_one_primitive_call(monkeypatch):
    calls = []
    prim = PRIMITIVES["matmul"]
    orig = type(prim).bind

    def spy(self, *args, **params):
        calls.append(self.name)
        return orig(self, *args, **params)

    monkeypatch.setattr(type(prim), "bind", spy)
    x, w, b = nrm(7, 3).astype("float32"), nrm(3, 5).astype("float32"), nrm(5).astype("float32")
    y = ops.fused_matmul(x, w, b, activation="relu")
    assert calls == ["matmul"]
    np.testing.assert_allclose(y.numpy(), np.maximum(x @ w + b, 0), rtol=1e-5, atol=1e-6)


def test_matmul_primitive_is_the_kernel_hook():
    assert PRIMITIVES["matmul"].name == "matmul"
    assert hasattr(PRIMITIVES["matmul"], "kernel")


@pytest.mark.parametrize(
    "shape_x, shape_w",
    [((3,), (3,)), ((5, 3), (3,)), ((3,), (3, 4)), ((2, 1, 5, 3), (4, 3, 2)), ((1, 7), (7, 1))],
)
def test_matmul_values_match_numpy(shape_x, shape_w):
    a, b = nrm(*shape_x).astype("float32"), nrm(*shape_w).astype("float32")
    y = ops.matmul(a, b)
    assert y.dtype == "float32"
    np.testing.assert_allclose(y.numpy(), np.matmul(a, b), rtol=1e-5, atol=1e-5)


def test_matmul_integer_and_operator():
    a = np.arange(6, dtype="int32").reshape(2, 3)
    b = np.arange(12, dtype="int32").reshape(3, 4)
    y = kt.convert_to_tensor(a) @ kt.convert_to_tensor(b)
    assert y.dtype == "int32"
    np.testing.assert_array_equal(y.numpy(), a @ b)


def test_matmul_mixed_dtypes_promote():
    y = ops.matmul(np.ones((2, 3), "float32"), np.ones((3, 2), "float64"))
    assert y.dtype == "float64"


def test_fused_matmul_rank3_input_and_activation_values():
    x = nrm(2, 3, 4).astype("float32") * 3
    w = nrm(4, 5).astype("float32")
    b = nrm(5).astype("float32")
    for act, fn in EPILOGUES.items():
        got = ops.fused_matmul(x, w, b, activation=act).numpy()
        want = fn(torch.from_numpy(x) @ torch.from_numpy(w) + torch.from_numpy(b)).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, err_msg=str(act))


@pytest.mark.parametrize(
    "eq, shapes",
    [
        ("ij,jk", [(2, 3), (3, 4)]),
        ("ba", [(2, 3)]),
        ("ii", [(4, 4)]),
        ("...i,...i->...", [(2, 3, 4), (3, 4)]),
        ("ijk,ikl->jl", [(2, 3, 4), (2, 4, 5)]),
        ("i,i,i->", [(3,), (3,), (3,)]),
    ],
)
def test_einsum_values_match_numpy(eq, shapes):
    xs = [nrm(*s) for s in shapes]
    np.testing.assert_allclose(ops.einsum(eq, *xs).numpy(), np.einsum(eq, *xs), rtol=1e-10)


def test_dot_follows_numpy_for_nd_and_scalars():
    a, b = nrm(2, 3, 4), nrm(5, 4, 6)
    np.testing.assert_allclose(ops.dot(a, b).numpy(), np.dot(a, b), rtol=1e-10)
    np.testing.assert_allclose(ops.dot(np.array(2.0), b).numpy(), 2.0 * b)


@pytest.mark.parametrize("wrap", [kt.convert_to_tensor, np.asarray], ids=["tensor", "ndarray"])
@pytest.mark.parametrize(
    "name, shapes",
    [
        ("inner", [(3, 3), (3, 3)]),
        ("inner", [(2, 3), (4, 3)]),
        ("inner", [(3, 4), (4, 4)]),
        ("dot", [(3, 3), (3, 3)]),
        ("dot", [(2, 3), (3, 4)]),
        ("matmul", [(3, 3), (3, 3)]),
        ("matmul", [(2, 3), (3, 4)]),
    ],
)
def test_matrix_products_match_numpy_on_square_and_non_square(wrap, name, shapes):
    # Square Tensor operands reach the no-conversion fast path, which once computed
    # inner(a, b) as a @ b instead of a @ b.T.
    a, b = (R.standard_normal(s).astype(np.float32) for s in shapes)
    got = getattr(ops, name)(wrap(a), wrap(b)).numpy()
    np.testing.assert_allclose(got, getattr(np, name)(a, b), rtol=1e-5, atol=1e-5)


def test_norm_values_and_int_input():
    x = nrm(3, 4)
    for ord_ in (None, 1, 2, INF, -INF, 0, 3):
        np.testing.assert_allclose(
            ops.norm(x, ord=ord_, axis=1).numpy(), np.linalg.norm(x, ord=ord_, axis=1), rtol=1e-10
        )
    for ord_ in (None, "fro", "nuc", 1, -1, 2, -2, INF, -INF):
        np.testing.assert_allclose(ops.norm(x, ord=ord_).numpy(), np.linalg.norm(x, ord=ord_))
    y = ops.norm(np.array([3, 4], dtype="int32"))
    assert y.dtype == "float32" and float(y) == 5.0


def test_norm_gradient_at_zero_is_zero_not_nan():
    x = kt.Variable(np.zeros(3))
    with kt.GradientTape() as tape:
        y = ops.norm(x)
    np.testing.assert_array_equal(tape.gradient(y, x).numpy(), np.zeros(3))


def test_solve_and_inv_values():
    a = SPD.astype("float32")
    b = nrm(4, 3).astype("float32")
    np.testing.assert_allclose(ops.solve(a, b).numpy(), np.linalg.solve(a, b), rtol=1e-4)
    np.testing.assert_allclose(ops.inv(a).numpy(), np.linalg.inv(a), rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize(
    "fn, message",
    [
        (lambda: ops.matmul(np.ones((2, 3)), np.ones((4, 2))), "matmul"),
        (lambda: ops.matmul(np.ones((2, 2, 3)), np.ones((3, 3, 2))), "batch dimensions"),
        (lambda: ops.matmul(np.ones(()), np.ones((2,))), "rank >= 1"),
        (lambda: ops.fused_matmul(np.ones((2, 3)), np.ones((3, 4)), np.ones(5)), "bias"),
        (
            lambda: ops.fused_matmul(np.ones((2, 3)), np.ones((3, 4)), activation="swish"),
            "activation",
        ),
        (lambda: ops.fused_matmul(np.ones((2, 5)), np.ones((3, 4))), "fused_matmul"),
        (lambda: ops.einsum("ij,jk->ik", np.ones((2, 3))), "operands"),
        (lambda: ops.einsum("ij,jk->ik", np.ones((2, 3)), np.ones((4, 2))), "inconsistent"),
        (lambda: ops.tensordot(np.ones((2, 3)), np.ones((2, 3)), axes=([1], [1, 0])), "length"),
        (lambda: ops.norm(np.ones((2, 3)), ord="nope", axis=(0, 1)), "ord"),
        (lambda: ops.inv(np.ones((2, 3))), "square"),
    ],
)
def test_errors_name_the_op_and_argument(fn, message):
    with pytest.raises(ValueError, match=message):
        fn()


@pytest.mark.parametrize(
    "name, avals, params, want",
    [
        ("matmul", [((2, 3, 4),), ((4, 5),), ((5,),)], dict(activation="gelu"), [(2, 3, 5)]),
        ("matmul", [((2, 3, 4),), ((2, 4, 5),), None], dict(activation=None), [(2, 3, 5)]),
        ("einsum", [((2, 3),), ((3, 4),)], dict(equation="ij,jk->ki"), [(4, 2)]),
        ("svdvals", [((2, 3, 4),)], {}, [(2, 3)]),
        ("solve", [((3, 3),), ((3, 2),)], {}, [(3, 2)]),
    ],
)
def test_abstract_eval_on_meta(name, avals, params, want):
    avals = [None if a is None else (a[0], torch.float32) for a in avals]
    out = PRIMITIVES[name].abstract_eval(avals, params)
    assert [s for s, _ in out] == want
    assert all(d is torch.float32 for _, d in out)
