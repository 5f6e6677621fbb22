"""Gradient-check table for shape, indexing and core (scatter / slice) ops.

Each row: (name, keratron fn, torch fn, float64 input arrays). Every row is checked by float64
central differences and against torch.autograd. Index arguments are constants closed over by
the row's functions; repeated indices check that gradients accumulate.
"""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import keratron as kt
from tests.gradcheck import check_against_torch, check_grads

ops = kt.ops
R = np.random.default_rng(0)


def nrm(*shape):
    return R.standard_normal(shape)


def distinct(*shape):
    """Values with no ties (sort / top_k / max are then differentiable everywhere)."""
    return R.permutation(int(np.prod(shape))).reshape(shape) * 0.37 + R.uniform(0.05, 0.3)


def _np_pad_index(n, lo, hi, mode):
    # numpy's own pad gives the oracle's source positions for the non-constant modes.
    return torch.from_numpy(np.pad(np.arange(n), (lo, hi), mode=mode))


def torch_pad(x, widths, mode):
    for axis, (lo, hi) in enumerate(widths):
        x = torch.index_select(x, axis, _np_pad_index(x.shape[axis], lo, hi, mode))
    return x


def torch_index_put(x, cols, values, accumulate):
    return x.index_put(tuple(torch.tensor(c) for c in cols), values, accumulate=accumulate)


def torch_slice_update(x, u):
    y = x.clone()
    y[1:3, 1:3] = u
    return y


IDX = np.array([[2, 0], [2, -1]])
TA_IDX = np.array([[1, 1], [0, 3], [3, 3]])
MASK = np.array(
    [[True, False, True, True], [False, False, True, False], [True, True, False, False]]
)
SC_IDX = np.array([[0, 1], [2, 2], [0, 1]])

ROWS = [
    ("reshape", lambda x: ops.reshape(x, (4, -1)), lambda x: x.reshape(4, -1), [nrm(2, 3, 2)]),
    (
        "transpose",
        lambda x: ops.transpose(x, (2, 0, 1)),
        lambda x: x.permute(2, 0, 1),
        [nrm(2, 3, 4)],
    ),
    ("expand_dims", lambda x: ops.expand_dims(x, -1), lambda x: x.unsqueeze(-1), [nrm(2, 3)]),
    ("squeeze", lambda x: ops.squeeze(x, 1), lambda x: x.squeeze(1), [nrm(3, 1, 2)]),
    (
        "broadcast_to",
        lambda x: ops.broadcast_to(x, (2, 3, 4)),
        lambda x: x.expand(2, 3, 4),
        [nrm(3, 1)],
    ),
    (
        "moveaxis",
        lambda x: ops.moveaxis(x, 0, -1),
        lambda x: torch.movedim(x, 0, -1),
        [nrm(2, 3, 4)],
    ),
    (
        "swapaxes",
        lambda x: ops.swapaxes(x, 0, 2),
        lambda x: torch.swapaxes(x, 0, 2),
        [nrm(2, 3, 4)],
    ),
    ("ravel", ops.ravel, lambda x: x.reshape(-1), [nrm(2, 3)]),
    (
        "concatenate",
        lambda a, b: ops.concatenate([a, b], axis=0),
        lambda a, b: torch.cat([a, b], 0),
        [nrm(2, 3), nrm(4, 3)],
    ),
    (
        "stack",
        lambda a, b: ops.stack([a, b], axis=-1),
        lambda a, b: torch.stack([a, b], -1),
        [nrm(2, 3), nrm(2, 3)],
    ),
    ("unstack", lambda x: ops.unstack(x, axis=1), lambda x: torch.unbind(x, 1), [nrm(3, 2)]),
    ("split_sections", lambda x: ops.split(x, 3), lambda x: torch.split(x, 2), [nrm(6, 2)]),
    (
        "split_indices",
        lambda x: ops.split(x, [2, 5]),
        lambda x: torch.split(x, [2, 3, 2]),
        [nrm(7)],
    ),
    (
        "split_overlapping",
        lambda x: ops.split(x, [5, 2], axis=1),
        lambda x: (x[:, :5], x[:, 5:2], x[:, 2:]),
        [nrm(2, 7)],
    ),
    (
        "array_split",
        lambda x: ops.array_split(x, 3),
        lambda x: torch.tensor_split(x, 3),
        [nrm(7)],
    ),
    (
        "vstack",
        lambda a, b: ops.vstack([a, b]),
        lambda a, b: torch.vstack([a, b]),
        [nrm(3), nrm(2, 3)],
    ),
    (
        "hstack",
        lambda a, b: ops.hstack([a, b]),
        lambda a, b: torch.hstack([a, b]),
        [nrm(2, 3), nrm(2, 1)],
    ),
    (
        "meshgrid",
        lambda a, b: ops.meshgrid(a, b),
        lambda a, b: torch.meshgrid(a, b, indexing="xy"),
        [nrm(3), nrm(2)],
    ),
    (
        "meshgrid_ij",
        lambda a, b, c: ops.meshgrid(a, b, c, indexing="ij"),
        lambda a, b, c: torch.meshgrid(a, b, c, indexing="ij"),
        [nrm(3), nrm(2), nrm(4)],
    ),
    ("tile", lambda x: ops.tile(x, (2, 1, 3)), lambda x: torch.tile(x, (2, 1, 3)), [nrm(2, 3)]),
    (
        "repeat_int",
        lambda x: ops.repeat(x, 2, axis=1),
        lambda x: torch.repeat_interleave(x, 2, dim=1),
        [nrm(2, 3)],
    ),
    (
        "repeat_each",
        lambda x: ops.repeat(x, [1, 0, 3], axis=0),
        lambda x: torch.repeat_interleave(x, torch.tensor([1, 0, 3]), dim=0),
        [nrm(3, 2)],
    ),
    (
        "repeat_flat",
        lambda x: ops.repeat(x, 2),
        lambda x: torch.repeat_interleave(x.reshape(-1), 2),
        [nrm(2, 3)],
    ),
    (
        "pad_constant",
        lambda x: ops.pad(x, ((1, 0), (2, 1)), constant_values=1.5),
        lambda x: F.pad(x, (2, 1, 1, 0), value=1.5),
        [nrm(2, 3)],
    ),
    (
        "pad_reflect",
        lambda x: ops.pad(x, ((2, 1), (1, 3)), mode="reflect"),
        lambda x: F.pad(x[None], (1, 3, 2, 1), mode="reflect")[0],
        [nrm(3, 4)],
    ),
    (
        "pad_reflect_wide",
        lambda x: ops.pad(x, ((5, 7), (0, 0)), mode="reflect"),
        lambda x: torch_pad(x, ((5, 7), (0, 0)), "reflect"),
        [nrm(3, 2)],
    ),
    (
        "pad_symmetric",
        lambda x: ops.pad(x, ((2, 1), (4, 3)), mode="symmetric"),
        lambda x: torch_pad(x, ((2, 1), (4, 3)), "symmetric"),
        [nrm(3, 2)],
    ),
    (
        "pad_edge",
        lambda x: ops.pad(x, 2, mode="edge"),
        lambda x: F.pad(x[None], (2, 2, 2, 2), mode="replicate")[0],
        [nrm(3, 4)],
    ),
    (
        "pad_wrap",
        lambda x: ops.pad(x, (1, 2), mode="wrap"),
        lambda x: F.pad(x[None], (1, 2, 1, 2), mode="circular")[0],
        [nrm(3, 4)],
    ),
    ("flip", lambda x: ops.flip(x, (0, 2)), lambda x: torch.flip(x, (0, 2)), [nrm(2, 3, 4)]),
    ("flip_all", ops.flip, lambda x: torch.flip(x, (0, 1)), [nrm(2, 3)]),
    ("roll", lambda x: ops.roll(x, 2, axis=1), lambda x: torch.roll(x, 2, 1), [nrm(3, 4)]),
    (
        "roll_multi",
        lambda x: ops.roll(x, (1, -2), axis=(0, 1)),
        lambda x: torch.roll(x, (1, -2), (0, 1)),
        [nrm(3, 4)],
    ),
    ("roll_flat", lambda x: ops.roll(x, 5), lambda x: torch.roll(x, 5), [nrm(3, 4)]),
    ("tril", lambda x: ops.tril(x, -1), lambda x: torch.tril(x, -1), [nrm(2, 3, 4)]),
    ("triu", lambda x: ops.triu(x, 1), lambda x: torch.triu(x, 1), [nrm(2, 4, 3)]),
    ("diag_vector", lambda x: ops.diag(x, 1), lambda x: torch.diag(x, 1), [nrm(3)]),
    ("diag_matrix", lambda x: ops.diag(x, -1), lambda x: torch.diag(x, -1), [nrm(3, 4)]),
    (
        "diagonal",
        lambda x: ops.diagonal(x, offset=1, axis1=2, axis2=0),
        lambda x: torch.diagonal(x, 1, 2, 0),
        [nrm(3, 4, 5)],
    ),
    ("trace", ops.trace, torch.trace, [nrm(3, 4)]),
    (
        "take",
        lambda x: ops.take(x, IDX, axis=1),
        lambda x: x[:, torch.tensor(IDX % 4)],
        [nrm(3, 4)],
    ),
    (
        "take_flat",
        lambda x: ops.take(x, [5, 0, 5, -1]),
        lambda x: x.reshape(-1)[torch.tensor([5, 0, 5, 5])],
        [nrm(2, 3)],
    ),
    (
        "take_along_axis",
        lambda x: ops.take_along_axis(x, TA_IDX, axis=1),
        lambda x: torch.gather(x, 1, torch.tensor(TA_IDX)),
        [nrm(3, 4)],
    ),
    (
        "take_along_axis_broadcast",
        lambda x: ops.take_along_axis(x, [[0, 2, 2, 1, -1]], axis=1),
        lambda x: torch.take_along_dim(x, torch.tensor([[0, 2, 2, 1, 3]]), dim=1),
        [nrm(3, 4)],
    ),
    (
        "get_item_basic",
        lambda x: x[1:, ::-1, None, 2],
        lambda x: x.flip(1)[1:, :, None, 2],
        [nrm(3, 4, 5)],
    ),
    (
        "get_item_step",
        lambda x: x[..., 4:0:-2],
        lambda x: x[..., torch.tensor([4, 2])],
        [nrm(2, 6)],
    ),
    (
        "get_item_repeated",
        lambda x: x[[0, 2, 0, 0]],
        lambda x: x[torch.tensor([0, 2, 0, 0])],
        [nrm(3, 4)],
    ),
    (
        "get_item_mixed",
        lambda x: x[0, :, [1, 1, 3]],
        lambda x: x[torch.tensor([0, 0, 0]), :, torch.tensor([1, 1, 3])],
        [nrm(2, 3, 4)],
    ),
    (
        "get_item_tensor_index",
        lambda x: x[kt.convert_to_tensor([[1, 1], [0, 2]]), 1:],
        lambda x: x[torch.tensor([[1, 1], [0, 2]]), 1:],
        [nrm(3, 4)],
    ),
    (
        "get_item_repeated_flipped",
        lambda x: x[[0, 2, 0], ::-1, -2:0:-1],
        lambda x: x.flip(1, 2)[torch.tensor([0, 2, 0]), :, 1:4],
        [nrm(3, 4, 5)],
    ),
    ("get_item_mask", lambda x: x[MASK], lambda x: x[torch.tensor(MASK)], [nrm(3, 4)]),
    (
        "get_item_mask_slice",
        lambda x: x[MASK, 1],
        lambda x: x[torch.tensor(MASK), 1],
        [nrm(3, 4, 2)],
    ),
    ("sort", lambda x: ops.sort(x, axis=0), lambda x: torch.sort(x, 0).values, [distinct(4, 3)]),
    (
        "sort_flat",
        lambda x: ops.sort(x, axis=None),
        lambda x: torch.sort(x.reshape(-1)).values,
        [distinct(2, 3)],
    ),
    ("top_k", lambda x: ops.top_k(x, 3), lambda x: tuple(torch.topk(x, 3)), [distinct(2, 6)]),
    (
        "scatter",
        lambda v: ops.scatter(SC_IDX, v, (3, 4)),
        lambda v: torch_index_put(torch.zeros(3, 4, dtype=v.dtype), SC_IDX.T, v, True),
        [nrm(3)],
    ),
    (
        "scatter_rows",
        lambda v: ops.scatter([[2], [0], [2]], v, (4, 2)),
        lambda v: torch_index_put(torch.zeros(4, 2, dtype=v.dtype), [[2, 0, 2]], v, True),
        [nrm(3, 2)],
    ),
    (
        "scatter_update",
        lambda x, u: ops.scatter_update(x, [[1, 2], [0, 0]], u),
        lambda x, u: torch_index_put(x, [[1, 0], [2, 0]], u, False),
        [nrm(3, 4), nrm(2)],
    ),
    (
        "scatter_update_add",
        lambda x, u: ops.scatter_update(x, SC_IDX, u, reduction="add"),
        lambda x, u: torch_index_put(x, SC_IDX.T, u, True),
        [nrm(3, 4), nrm(3)],
    ),
    (
        "scatter_update_max",
        lambda x, u: ops.scatter_update(x, [[1], [3], [1], [0]], u, reduction="max"),
        lambda x, u: x.scatter_reduce(0, torch.tensor([1, 3, 1, 0]), u, "amax"),
        [distinct(5), distinct(4)],
    ),
    (
        "scatter_update_min",
        lambda x, u: ops.scatter_update(x, [[1], [3], [1]], u, reduction="min"),
        lambda x, u: x.scatter_reduce(0, torch.tensor([1, 3, 1]), u, "amin"),
        [distinct(5), distinct(3)],
    ),
    (
        "scatter_update_mul",
        lambda x, u: ops.scatter_update(x, [[1], [3], [1], [3], [3]], u, reduction="mul"),
        lambda x, u: x.scatter_reduce(0, torch.tensor([1, 3, 1, 3, 3]), u, "prod"),
        [nrm(5), np.array([0.5, 0.0, -1.5, 0.0, 2.0])],
    ),
    (
        "scatter_update_mul_one_zero",
        lambda x, u: ops.scatter_update(x, [[1], [1], [2]], u, reduction="mul"),
        lambda x, u: x.scatter_reduce(0, torch.tensor([1, 1, 2]), u, "prod"),
        [nrm(4), np.array([0.0, 2.0, -1.5])],
    ),
    (
        "slice",
        lambda x: ops.slice(x, [1, 1], [2, -1]),
        lambda x: x[1:3, 1:],
        [nrm(3, 4)],
    ),
    (
        "slice_update",
        lambda x, u: ops.slice_update(x, [1, 1], u),
        torch_slice_update,
        [nrm(3, 4), nrm(2, 2)],
    ),
]


@pytest.mark.parametrize("row", ROWS, ids=[r[0] for r in ROWS])
def test_grad_finite_differences(row):
    _, fn, _, args, *opts = row
    check_grads(fn, args, **(opts[0] if opts else {}))


@pytest.mark.parametrize("row", ROWS, ids=[r[0] for r in ROWS])
def test_grad_against_torch(row):
    _, fn, torch_fn, args, *_ = row
    check_against_torch(fn, torch_fn, args)


# Second order: the cube makes the first-order cotangent depend on x, so the backward
# primitives (scatter-adds, diagonal scatter, ...) are themselves differentiated.
SECOND = [
    ("get_item", lambda x: x[[0, 2, 0], 1:]),
    ("get_item_mask", lambda x: x[MASK[:, :3]]),
    ("take", lambda x: ops.take(x, IDX, axis=1)),
    ("take_along_axis", lambda x: ops.take_along_axis(x, TA_IDX[:, :2] % 3, axis=1)),
    ("sort", lambda x: ops.sort(x)),
    ("top_k", lambda x: ops.top_k(x, 2)[0]),
    ("pad_reflect", lambda x: ops.pad(x, ((1, 1), (2, 0)), mode="reflect")),
    ("pad_constant", lambda x: ops.pad(x, 1, constant_values=2.0)),
    ("diagonal", lambda x: ops.diagonal(x, 1)),
    ("diag", lambda x: ops.diag(ops.diagonal(x))),
    ("tile", lambda x: ops.tile(x, (2, 2))),
    ("flip_roll", lambda x: ops.roll(ops.flip(x, 0), 1, axis=1)),
    ("tril", lambda x: ops.tril(x)),
    ("scatter", lambda x: ops.scatter(SC_IDX[:, :1], x[:, 0], (3,))),
    ("slice_update", lambda x: ops.slice_update(x, [0, 1], x[1:, :2])),
    ("scatter_update", lambda x: ops.scatter_update(x, [[0, 0], [2, 1]], x[1, :2])),
    ("scatter_update_max", lambda x: ops.scatter_update(x, [[0, 0], [2, 1]], x[1, :2], "max")),
    ("split_concat", lambda x: ops.concatenate(ops.split(x, [1], axis=1)[::-1], axis=1)),
]


@pytest.mark.parametrize("row", SECOND, ids=[r[0] for r in SECOND])
def test_second_order(row):
    _, fn = row
    check_grads(lambda x: fn(x) ** 3, [distinct(3, 3) / 4], order=2)


def test_repeated_indices_accumulate():
    x = kt.Variable(np.zeros((3,)))
    with kt.GradientTape() as tape:
        y = ops.sum(x[[0, 0, 2, 0]])
    np.testing.assert_array_equal(tape.gradient(y, x).numpy(), [3.0, 0.0, 1.0])


def test_scatter_update_duplicates_last_wins_and_gets_the_gradient():
    x = kt.Variable(np.zeros((4,)))
    u = kt.Variable(np.array([1.0, 2.0, 3.0]))
    with kt.GradientTape() as tape:
        y = ops.scatter_update(x, [[1], [1], [2]], u)
        loss = ops.sum(y * np.array([10.0, 20.0, 30.0, 40.0]))
    np.testing.assert_array_equal(y.numpy(), [0.0, 2.0, 3.0, 0.0])
    gx, gu = tape.gradient(loss, [x, u])
    np.testing.assert_array_equal(gx.numpy(), [10.0, 0.0, 0.0, 40.0])
    np.testing.assert_array_equal(gu.numpy(), [0.0, 20.0, 30.0])


def test_sort_indices_and_argsort_have_no_gradient():
    x = kt.Variable(np.array([3.0, 1.0, 2.0]))
    with kt.GradientTape() as tape:
        y = ops.sum(ops.cast(ops.argsort(x), "float64"))
    assert tape.gradient(y, x) is None


def test_stop_gradient_blocks():
    x = kt.Variable(np.array([1.0, 2.0]))
    with kt.GradientTape() as tape:
        y = ops.sum(ops.stop_gradient(x) * x)
    np.testing.assert_array_equal(tape.gradient(y, x).numpy(), [1.0, 2.0])


def _traced_body(x):
    a = ops.pad(x, ((1, 2), (0, 1)), mode="reflect")
    b = a[[0, 2, 2], ::-1] + ops.repeat(x, [1, 0, 2], axis=0)[0, 0]
    c = ops.take_along_axis(x, ops.argsort(x, axis=1), axis=1)
    d = ops.scatter_update(x, [[0, 1], [2, 3], [0, 1]], ops.top_k(x, 3)[0][0])
    e = ops.slice_update(d, [1, 1], ops.slice(x, [0, 0], [2, 2]))
    f = ops.tile(ops.diag(ops.diagonal(x)), (1, 2)) + ops.full_like(x, 2.0)[1:, :3][1, 1]
    g = ops.triu(x) + ops.roll(ops.flip(x), 1) + ops.scatter([[1, 0], [1, 0]], x[:2, 0], (3, 4))
    h = ops.concatenate(ops.split(x, 2, axis=1)[::-1], axis=1)
    m = x[np.array([[True, False, True, True]] * 3)]
    return b, c, e, f, g, h, m


def test_traced_function_matches_eager_values_and_gradients():
    from keratron.autodiff.function import function

    x = kt.convert_to_tensor(nrm(3, 4))

    def grad_body(x):
        with kt.GradientTape() as tape:
            tape.watch(x)
            loss = sum(ops.sum(o * o * o) for o in _traced_body(x))
        return tape.gradient(loss, x)

    for got, want in zip(function(_traced_body)(x), _traced_body(x)):
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12)
    np.testing.assert_allclose(function(grad_body)(x).numpy(), grad_body(x).numpy(), rtol=1e-12)
