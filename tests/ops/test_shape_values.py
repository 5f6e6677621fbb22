"""Values of shape and indexing ops against numpy: irregular shapes, dtypes, negative axes,
numpy-style keys, and the errors for bad arguments."""

import sys

import numpy as np
import pytest
import torch

import keratron as kt
from keratron.autodiff.primitive import PRIMITIVES

ops = kt.ops
R = np.random.default_rng(7)
X3 = R.standard_normal((2, 3, 5)).astype("float32")
I3 = np.arange(2 * 3 * 5, dtype="int32").reshape(2, 3, 5)
B2 = R.random((3, 4)) > 0.5


def check(got, want):
    got_list = got if isinstance(got, (list, tuple)) else [got]
    want_list = want if isinstance(want, (list, tuple)) else [want]
    assert len(got_list) == len(want_list)
    for g, w in zip(got_list, want_list):
        w = np.asarray(w)
        assert isinstance(g, kt.Tensor)
        assert g.shape == w.shape, (g.shape, w.shape)
        assert g.dtype == str(w.dtype), (g.dtype, w.dtype)
        np.testing.assert_array_equal(g.numpy(), w)


CASES = [
    ("reshape", lambda x: ops.reshape(x, (5, -1)), lambda x: x.reshape(5, -1), I3),
    ("reshape_int", lambda x: ops.reshape(x, 30), lambda x: x.reshape(30), X3),
    ("transpose_default", ops.transpose, np.transpose, X3),
    ("transpose_neg", lambda x: ops.transpose(x, (-1, 0, -2)), lambda x: x.transpose(2, 0, 1), I3),
    (
        "expand_dims_multi",
        lambda x: ops.expand_dims(x, (0, -1)),
        lambda x: np.expand_dims(x, (0, -1)),
        I3,
    ),
    ("squeeze_all", ops.squeeze, np.squeeze, I3.reshape(2, 1, 15, 1)),
    (
        "squeeze_neg",
        lambda x: ops.squeeze(x, -1),
        lambda x: np.squeeze(x, -1),
        I3.reshape(2, 1, 15, 1),
    ),
    (
        "broadcast_to",
        lambda x: ops.broadcast_to(x, (4, 3, 5)),
        lambda x: np.broadcast_to(x, (4, 3, 5)),
        I3[:1],
    ),
    (
        "moveaxis",
        lambda x: ops.moveaxis(x, (0, 1), (-1, 0)),
        lambda x: np.moveaxis(x, (0, 1), (-1, 0)),
        I3,
    ),
    ("swapaxes", lambda x: ops.swapaxes(x, -1, 0), lambda x: np.swapaxes(x, -1, 0), B2),
    ("ravel", ops.ravel, np.ravel, B2),
    ("flatten", ops.flatten, lambda x: x.reshape(-1), I3),
    (
        "split_neg_axis",
        lambda x: ops.split(x, [1, 4], axis=-1),
        lambda x: np.split(x, [1, 4], axis=-1),
        I3,
    ),
    (
        "split_out_of_range",
        lambda x: ops.split(x, [4, 9]),
        lambda x: np.split(x, [4, 9]),
        np.arange(6),
    ),
    (
        "split_unordered",
        lambda x: ops.split(x, [3, 1]),
        lambda x: np.split(x, [3, 1]),
        np.arange(6),
    ),
    (
        "array_split",
        lambda x: ops.array_split(x, 4, axis=2),
        lambda x: np.array_split(x, 4, axis=2),
        X3,
    ),
    ("unstack", lambda x: ops.unstack(x, axis=-2), lambda x: list(np.moveaxis(x, -2, 0)), I3),
    ("tile_short", lambda x: ops.tile(x, 2), lambda x: np.tile(x, 2), I3),
    ("tile_long", lambda x: ops.tile(x, (2, 1, 1, 3)), lambda x: np.tile(x, (2, 1, 1, 3)), I3),
    ("tile_zero", lambda x: ops.tile(x, (0, 2)), lambda x: np.tile(x, (0, 2)), B2),
    ("repeat_flat", lambda x: ops.repeat(x, 3), lambda x: np.repeat(x, 3), I3),
    (
        "repeat_neg_axis",
        lambda x: ops.repeat(x, [2, 0, 1, 3, 1], axis=-1),
        lambda x: np.repeat(x, [2, 0, 1, 3, 1], axis=-1),
        I3,
    ),
    ("repeat_bool", lambda x: ops.repeat(x, 2, axis=0), lambda x: np.repeat(x, 2, axis=0), B2),
    (
        "pad_constant_int",
        lambda x: ops.pad(x, ((0, 1), (2, 0), (1, 1)), constant_values=-7),
        lambda x: np.pad(x, ((0, 1), (2, 0), (1, 1)), constant_values=-7),
        I3,
    ),
    (
        "pad_constant_float_on_int",
        lambda x: ops.pad(x, 1, constant_values=2.9),
        lambda x: np.pad(x, 1, constant_values=2.9),
        I3,
    ),
    ("pad_bool", lambda x: ops.pad(x, (1, 2)), lambda x: np.pad(x, (1, 2)), B2),
    (
        "pad_reflect",
        lambda x: ops.pad(x, ((1, 1), (2, 2), (4, 3)), mode="reflect"),
        lambda x: np.pad(x, ((1, 1), (2, 2), (4, 3)), mode="reflect"),
        X3,
    ),
    (
        "pad_reflect_wide",
        lambda x: ops.pad(x, (9, 11), mode="reflect"),
        lambda x: np.pad(x, (9, 11), mode="reflect"),
        np.arange(4),
    ),
    (
        "pad_reflect_single",
        lambda x: ops.pad(x, 3, mode="reflect"),
        lambda x: np.pad(x, 3, mode="reflect"),
        np.arange(1),
    ),
    (
        "pad_symmetric_wide",
        lambda x: ops.pad(x, ((7, 2), (0, 5)), mode="symmetric"),
        lambda x: np.pad(x, ((7, 2), (0, 5)), mode="symmetric"),
        B2,
    ),
    (
        "pad_edge",
        lambda x: ops.pad(x, ((1, 3),), mode="edge"),
        lambda x: np.pad(x, ((1, 3),), mode="edge"),
        I3,
    ),
    (
        "pad_wrap_wide",
        lambda x: ops.pad(x, (5, 8), mode="wrap"),
        lambda x: np.pad(x, (5, 8), mode="wrap"),
        np.arange(3),
    ),
    ("flip_neg", lambda x: ops.flip(x, -1), lambda x: np.flip(x, -1), I3),
    ("flip_none", ops.flip, np.flip, I3),
    ("roll_neg_shift", lambda x: ops.roll(x, -7, axis=-1), lambda x: np.roll(x, -7, axis=-1), I3),
    ("roll_flat", lambda x: ops.roll(x, 11), lambda x: np.roll(x, 11), I3),
    ("roll_multi", lambda x: ops.roll(x, 1, axis=(0, 2)), lambda x: np.roll(x, 1, axis=(0, 2)), I3),
    ("tril_batched", lambda x: ops.tril(x, 1), lambda x: np.tril(x, 1), I3),
    ("triu_bool", lambda x: ops.triu(x, -1), lambda x: np.triu(x, -1), B2),
    (
        "diag_vector",
        lambda x: ops.diag(x, -2),
        lambda x: np.diag(x, -2),
        np.arange(4, dtype="int32"),
    ),
    ("diag_matrix", lambda x: ops.diag(x, 2), lambda x: np.diag(x, 2), I3[0]),
    (
        "diagonal_neg",
        lambda x: ops.diagonal(x, -1, axis1=-1, axis2=1),
        lambda x: np.diagonal(x, -1, axis1=-1, axis2=1),
        X3,
    ),
    (
        "trace_float",
        lambda x: ops.trace(x, 1, 2, 1),
        lambda x: np.trace(x, 1, 2, 1),
        X3.astype("float64"),
    ),
    (
        "trace_int",
        lambda x: ops.trace(x, axis1=1, axis2=2),
        lambda x: np.trace(x, axis1=1, axis2=2).astype("int32"),
        I3,
    ),
    (
        "take_flat",
        lambda x: ops.take(x, [[0, -1], [7, 7]]),
        lambda x: np.take(x, [[0, -1], [7, 7]]),
        I3,
    ),
    (
        "take_axis",
        lambda x: ops.take(x, np.array([2, -3, 0]), axis=-2),
        lambda x: np.take(x, [2, -3, 0], axis=-2),
        X3,
    ),
    (
        "take_empty",
        lambda x: ops.take(x, [], axis=1),
        lambda x: np.take(x, np.array([], "int64"), axis=1),
        I3,
    ),
    (
        "take_along_axis",
        lambda x: ops.take_along_axis(x, np.argsort(x, axis=-1), axis=-1),
        lambda x: np.sort(x, axis=-1),
        X3,
    ),
    (
        "take_along_axis_flat",
        lambda x: ops.take_along_axis(x, [29, 0, -1]),
        lambda x: np.take_along_axis(x, np.array([29, 0, -1]), None),
        I3,
    ),
    ("sort_int", lambda x: ops.sort(x, axis=0), lambda x: np.sort(x, axis=0), I3[:, ::-1]),
    ("sort_bool", ops.sort, np.sort, B2),
    ("sort_none", lambda x: ops.sort(x, axis=None), lambda x: np.sort(x, axis=None), X3),
    (
        "argsort",
        lambda x: ops.argsort(x, axis=1),
        lambda x: np.argsort(x, axis=1, kind="stable").astype("int32"),
        X3,
    ),
    (
        "argsort_ties",
        ops.argsort,
        lambda x: np.argsort(x, kind="stable").astype("int32"),
        np.array([3, 1, 3, 1, 2]),
    ),
    ("argsort_bool", ops.argsort, lambda x: np.argsort(x, kind="stable").astype("int32"), B2),
    ("vstack", lambda x: ops.vstack([x[0], x]), lambda x: np.vstack([x[0], x]), I3[0]),
    (
        "hstack_1d",
        lambda x: ops.hstack([x, x[:2]]),
        lambda x: np.hstack([x, x[:2]]),
        np.arange(5, dtype="int32"),
    ),
    ("hstack_2d", lambda x: ops.hstack([x, x[:, :1]]), lambda x: np.hstack([x, x[:, :1]]), X3[0]),
    (
        "meshgrid_xy",
        lambda x: ops.meshgrid(x, x[:2], x[:3]),
        lambda x: np.meshgrid(x, x[:2], x[:3]),
        np.arange(4, dtype="int32"),
    ),
    (
        "meshgrid_ij",
        lambda x: ops.meshgrid(x, x[:2], indexing="ij"),
        lambda x: np.meshgrid(x, x[:2], indexing="ij"),
        np.arange(4, dtype="int32"),
    ),
    ("nonzero", ops.nonzero, lambda x: tuple(i.astype("int32") for i in np.nonzero(x)), B2),
    ("argwhere", ops.argwhere, lambda x: np.argwhere(x).astype("int32"), I3 % 4 == 0),
    ("where_one_arg", ops.where, lambda x: tuple(i.astype("int32") for i in np.nonzero(x)), I3 % 3),
    (
        "searchsorted_left",
        lambda x: ops.searchsorted(x, [[-1.0, 0.5], [3.0, 99.0]]),
        lambda x: np.searchsorted(x, [[-1.0, 0.5], [3.0, 99.0]]).astype("int32"),
        np.array([0.0, 1.0, 3.0, 3.0, 7.0], "float32"),
    ),
    (
        "searchsorted_right",
        lambda x: ops.searchsorted(x, [3, 8], side="right"),
        lambda x: np.searchsorted(x, [3, 8], side="right").astype("int32"),
        np.array([0, 1, 3, 3, 7], "int32"),
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_against_numpy(case):
    _, fn, np_fn, x = case
    check(fn(kt.convert_to_tensor(x)), np_fn(x))


def test_concatenate_and_stack_promote_dtypes():
    a = np.arange(6, dtype="int32").reshape(2, 3)
    b = R.standard_normal((1, 3)).astype("float32")
    # int32 with float32 gives float32, as in Keras (numpy would widen to float64).
    check(ops.concatenate([a, b], axis=-2), np.concatenate([a, b], axis=-2).astype("float32"))
    check(ops.stack([a[0], b[0]], axis=-1), np.stack([a[0], b[0]], axis=-1).astype("float32"))


def test_top_k():
    x = R.permutation(40).reshape(5, 8).astype("float32")
    values, indices = ops.top_k(x, 3)
    want = np.argsort(-x, axis=-1)[:, :3]
    check(indices, want.astype("int32"))
    check(values, np.take_along_axis(x, want, -1))
    values, indices = ops.top_k(x, 3, sorted=False)
    np.testing.assert_array_equal(
        np.sort(values.numpy(), -1), np.sort(np.take_along_axis(x, want, -1), -1)
    )
    assert indices.dtype == "int32"


KEYS = [
    1,
    -1,
    (1, -2),
    (slice(None), 0, slice(1, None, 2)),
    (slice(None, None, -1), slice(3, 0, -2), slice(-2, None, -3)),
    (Ellipsis, slice(None, None, -2)),
    (None, 1, Ellipsis, None),
    (Ellipsis, 2),
    np.int64(1),
    [1, 0, 1],
    ([1, 0], [2, 2]),
    ([[0, 1], [1, 1]], slice(None), [[4], [0]]),
    (0, slice(None), [1, 1, 4]),
    (slice(None), [0, 2], 3),
    (1, [2, 0], slice(None, None, -1)),
    ([0, 1], Ellipsis, [3, 4]),
    (slice(None), np.array([True, False, True])),
    np.array([True, False]),
    (I3[:, :, 0] % 2 == 0,),
    (Ellipsis, R.random((3, 5)) > 0.5),
    [],
    True,
    (1, False),
    (slice(10, 20),),
    (slice(-100, 100, 7), slice(None), slice(4, -100, -1)),
]


@pytest.mark.parametrize("key", KEYS, ids=[repr(k)[:40] for k in KEYS])
def test_get_item_matches_numpy(key):
    got = kt.convert_to_tensor(I3)[key]
    check(got, I3[key])


def test_get_item_with_tensor_keys():
    x = kt.convert_to_tensor(I3)
    check(x[kt.convert_to_tensor([1, 0])], I3[[1, 0]])
    check(x[kt.convert_to_tensor(1)], I3[1])
    check(x[:, kt.convert_to_tensor(np.array([True, False, True]))], I3[:, [True, False, True]])
    check(x[kt.convert_to_tensor(1) :], I3[1:])
    check(x[np.uint8(1), torch.tensor([2, 0])], I3[1, [2, 0]])


def test_tensor_iteration_uses_get_item():
    rows = list(kt.convert_to_tensor(I3[0]))
    assert len(rows) == 3
    check(rows[2], I3[0, 2])


@pytest.mark.parametrize(
    "key, pattern",
    [
        (2, r"index 2 is out of bounds for axis 0 with size 2"),
        ((0, 0, 0, 0), r"too many indices"),
        ((0, [0, 3]), r"\[-3, 3\)"),
        (np.array([True, False, True]), r"boolean index of shape \(3,\)"),
        ((Ellipsis, 0, Ellipsis), r"single ellipsis"),
        (np.array([0.5]), r"integer or boolean"),
        (([0, 1], [0, 1, 2]), r"do not broadcast"),
    ],
)
def test_get_item_errors_name_shape_and_key(key, pattern):
    with pytest.raises(IndexError, match=pattern) as info:
        kt.convert_to_tensor(I3)[key]
    assert "get_item" in str(info.value) and "(2, 3, 5)" in str(info.value)


@pytest.mark.parametrize(
    "fn, err, pattern",
    [
        (lambda: ops.reshape(I3, (4, -1)), ValueError, r"reshape.*\(2, 3, 5\).*\(4, -1\)"),
        (lambda: ops.reshape(I3, (-1, -1)), ValueError, r"reshape"),
        (lambda: ops.broadcast_to(I3, (3, 5)), ValueError, r"broadcast_to.*\(2, 3, 5\).*\(3, 5\)"),
        (lambda: ops.broadcast_to(np.ones(3), (1,)), ValueError, r"broadcast_to.*\(3,\).*\(1,\)"),
        (
            lambda: ops.concatenate([I3, I3[:, :2, :1]], axis=1),
            ValueError,
            r"concatenate.*\(2, 2, 1\).*\(2, 3, 5\)",
        ),
        (lambda: ops.concatenate([], axis=0), ValueError, r"concatenate"),
        (lambda: ops.stack([I3, I3[:1]]), ValueError, r"stack.*\(1, 3, 5\).*\(2, 3, 5\)"),
        (lambda: ops.split(I3, 4, axis=-1), ValueError, r"split.*size 5.*\(2, 3, 5\)"),
        (lambda: ops.transpose(I3, (0, 1)), ValueError, r"transpose.*\(2, 3, 5\)"),
        (lambda: ops.transpose(I3, (0, 1, 3)), ValueError, r"transpose.*out of bounds"),
        (lambda: ops.squeeze(I3, 1), ValueError, r"squeeze.*size 3.*\(2, 3, 5\)"),
        (lambda: ops.expand_dims(I3, 5), ValueError, r"expand_dims"),
        (lambda: ops.tile(I3, (2, -1)), ValueError, r"tile"),
        (lambda: ops.repeat(I3, [1, 2], axis=2), ValueError, r"repeat.*size 5.*\(2, 3, 5\)"),
        (lambda: ops.repeat(I3, -1), ValueError, r"repeat"),
        (lambda: ops.pad(I3, ((1, 1), (1, 1))), ValueError, r"pad.*\(2, 3, 5\)"),
        (lambda: ops.pad(I3, -1), ValueError, r"pad.*non-negative"),
        (lambda: ops.pad(I3, 1, mode="mean"), ValueError, r"pad.*mode"),
        (lambda: ops.pad(I3, 1, mode="reflect", constant_values=0), ValueError, r"constant_values"),
        (lambda: ops.pad(np.zeros((0, 2)), 1, mode="reflect"), ValueError, r"pad.*empty axis"),
        (lambda: ops.take(I3, [0, 30]), IndexError, r"take.*\[-30, 30\)"),
        (lambda: ops.take(I3, [0.5]), TypeError, r"take.*integers"),
        (
            lambda: ops.take_along_axis(I3, [[0]], axis=0),
            ValueError,
            r"take_along_axis.*\(2, 3, 5\).*\(1, 1\)",
        ),
        (
            lambda: ops.take_along_axis(I3, np.zeros((3, 2, 5), "int32"), axis=1),
            ValueError,
            r"broadcast",
        ),
        (lambda: ops.tril(np.ones(3)), ValueError, r"tril.*\(3,\)"),
        (lambda: ops.diagonal(I3, axis1=1, axis2=-2), ValueError, r"diagonal"),
        (lambda: ops.diag(I3), ValueError, r"diag.*\(2, 3, 5\)"),
        (lambda: ops.top_k(I3, 6), ValueError, r"top_k.*\(2, 3, 5\).*k=6"),
        (lambda: ops.searchsorted(I3, [1]), ValueError, r"searchsorted.*\(2, 3, 5\)"),
        (lambda: ops.searchsorted([1, 2], [1], side="middle"), ValueError, r"side"),
        (lambda: ops.unstack(I3, num=4), ValueError, r"unstack.*\(2, 3, 5\)"),
        (lambda: ops.moveaxis(I3, (0, 1), 2), ValueError, r"moveaxis"),
        (lambda: ops.roll(I3, (1, 2), axis=(0, 1, 2)), ValueError, r"roll"),
        (lambda: ops.meshgrid([1], indexing="yx"), ValueError, r"meshgrid"),
    ],
)
def test_errors(fn, err, pattern):
    with pytest.raises(err, match=pattern):
        fn()


def test_abstract_eval_runs_on_meta():
    shape, dtype = (2, 3, 5), torch.float32
    (out,) = PRIMITIVES["pad"].abstract_eval(
        [(shape, dtype)], {"widths": ((1, 0), (0, 2), (1, 1)), "value": 0.0}
    )
    assert out == ((3, 5, 7), torch.float32)
    x = kt.convert_to_tensor(I3)
    S = sys.modules["keratron.ops.shaping"]  # `keratron.ops.shape` is the function, as in Keras
    params, idx = S._parse_key(x, ([1, 0, 1], slice(None), slice(4, 0, -2)))
    avals = [(x.shape, torch.int32)] + [(t.shape, t._value.dtype) for t in idx]
    (out,) = PRIMITIVES["get_item"].abstract_eval(avals, {"key": params})
    assert out == ((3, 3, 2), torch.int32)
    (g,) = PRIMITIVES["get_item_grad"].abstract_eval(
        [((3, 3, 2), torch.float32)] + avals[1:], {"shape": x.shape, "key": params}
    )
    assert g == ((2, 3, 5), torch.float32)
    outs = PRIMITIVES["top_k"].abstract_eval([((4, 9), torch.float32)], {"k": 3, "sorted": True})
    assert outs == [((4, 3), torch.float32), ((4, 3), torch.int32)]
    with pytest.raises(ValueError, match="nonzero.*depends on the input values"):
        PRIMITIVES["nonzero"].abstract_eval([((4,), torch.bool)], {})


def test_no_torch_autograd_state():
    out = ops.take(ops.pad(kt.convert_to_tensor(X3), 1, mode="reflect"), [0, 1], axis=2)
    assert not out._value.requires_grad and torch.is_grad_enabled()
