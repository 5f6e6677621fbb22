"""Tensor basics: properties, numpy interop, indexing, operators, convert_to_tensor rules."""

import operator
import pickle

import numpy as np
import pytest
import torch

import keratron as kt
from keratron.autodiff.tensor import Tensor

A = np.array([[1.5, -2.0, 3.0], [0.5, 4.0, -1.0]], dtype=np.float32)
B = np.array([[2.0, 1.0, -3.0], [1.5, 0.25, 2.0]], dtype=np.float32)


def t(x):
    return kt.convert_to_tensor(x)


def test_properties():
    x = t(A)
    assert x.shape == (2, 3)
    assert x.dtype == "float32"
    assert x.ndim == 2
    assert x.size == 6
    assert x.device == "cpu"
    assert len(x) == 2
    assert isinstance(x.torch(), torch.Tensor)
    assert not x.torch().requires_grad


def test_numpy_and_array_protocol():
    x = t(A)
    np.testing.assert_array_equal(x.numpy(), A)
    assert x.numpy().dtype == np.float32
    np.testing.assert_array_equal(np.asarray(x), A)
    assert np.asarray(x, dtype=np.float64).dtype == np.float64
    assert np.array(x).shape == (2, 3)
    # bfloat16 has no numpy dtype: numpy() widens to float32.
    bf = kt.convert_to_tensor(A, dtype="bfloat16")
    assert bf.dtype == "bfloat16"
    assert bf.numpy().dtype == np.float32


def test_scalar_conversions_and_truth():
    s = t(3.0)
    assert s.shape == ()
    assert float(s) == 3.0 and int(s) == 3 and bool(s)
    assert [10, 20, 30, 40][t(2)] == 30  # __index__
    assert f"{s:.2f}" == "3.00"
    with pytest.raises(ValueError, match="ambiguous"):
        bool(t([1.0, 2.0]))
    with pytest.raises(TypeError):
        len(s)
    with pytest.raises(TypeError):
        iter(s).__next__()


def test_iteration_and_repr():
    rows = list(t(A))
    assert len(rows) == 2
    np.testing.assert_array_equal(rows[1].numpy(), A[1])
    r = repr(t(A))
    assert "shape=(2, 3)" in r and "float32" in r


def test_pickle_round_trip():
    y = pickle.loads(pickle.dumps(t(A)))
    assert isinstance(y, Tensor)
    np.testing.assert_array_equal(y.numpy(), A)


@pytest.mark.parametrize(
    "key",
    [
        0,
        -1,
        (1, 2),
        (slice(None), 1),
        (slice(None, None, -1),),
        (Ellipsis, None),
        (None, 0),
        ([1, 0], [2, 0]),
        (slice(None), [2, 0, 0]),
        (slice(1, None), slice(0, 2)),
    ],
)
def test_indexing_matches_numpy(key):
    np.testing.assert_array_equal(t(A)[key].numpy(), A[key])


def test_boolean_mask_and_tensor_index():
    x = t(A)
    np.testing.assert_array_equal(x[x > 1.0].numpy(), A[A > 1.0])
    idx = kt.convert_to_tensor([1, 0, 1])
    np.testing.assert_array_equal(x[idx].numpy(), A[[1, 0, 1]])


def test_index_out_of_range_raises():
    with pytest.raises(IndexError):
        t(A)[5]


BINARY = [
    (operator.add, "add"),
    (operator.sub, "sub"),
    (operator.mul, "mul"),
    (operator.truediv, "truediv"),
    (operator.floordiv, "floordiv"),
    (operator.mod, "mod"),
]


@pytest.mark.parametrize("fn,name", BINARY)
def test_binary_operators_match_torch(fn, name):
    ta, tb = torch.from_numpy(A), torch.from_numpy(B)
    np.testing.assert_allclose(fn(t(A), t(B)).numpy(), fn(ta, tb).numpy(), rtol=1e-6)
    # Reflected forms with a Python scalar on the left.
    np.testing.assert_allclose(fn(3.0, t(B)).numpy(), fn(3.0, tb).numpy(), rtol=1e-6)
    np.testing.assert_allclose(fn(t(A), 2.0).numpy(), fn(ta, 2.0).numpy(), rtol=1e-6)


def test_power_matmul_unary():
    pa = np.abs(A) + 0.5
    np.testing.assert_allclose((t(pa) ** 2).numpy(), pa**2, rtol=1e-6)
    np.testing.assert_allclose((2.0 ** t(A)).numpy(), 2.0**A, rtol=1e-6)
    np.testing.assert_allclose((t(A) @ t(B.T)).numpy(), A @ B.T, rtol=1e-5)
    np.testing.assert_allclose((B.T @ t(A)).numpy(), B.T @ A, rtol=1e-5)  # __rmatmul__
    np.testing.assert_array_equal((-t(A)).numpy(), -A)
    np.testing.assert_array_equal((+t(A)).numpy(), A)
    np.testing.assert_array_equal(abs(t(A)).numpy(), np.abs(A))
    np.testing.assert_array_equal(t(A).T.numpy(), A.T)
    np.testing.assert_array_equal(t(A).reshape(3, 2).numpy(), A.reshape(3, 2))
    np.testing.assert_array_equal(t(A).reshape((6,)).numpy(), A.reshape(6))
    assert t(A).astype("int32").dtype == "int32"


@pytest.mark.parametrize(
    "fn",
    [operator.lt, operator.le, operator.gt, operator.ge, operator.eq, operator.ne],
)
def test_comparisons(fn):
    out = fn(t(A), t(B))
    assert out.dtype == "bool"
    np.testing.assert_array_equal(out.numpy(), fn(A, B))
    np.testing.assert_array_equal(fn(t(A), 1.5).numpy(), fn(A, 1.5))


def test_logical_and_bitwise_operators():
    p = np.array([True, False, True, False])
    q = np.array([True, True, False, False])
    np.testing.assert_array_equal((t(p) & t(q)).numpy(), p & q)
    np.testing.assert_array_equal((t(p) | t(q)).numpy(), p | q)
    np.testing.assert_array_equal((t(p) ^ t(q)).numpy(), p ^ q)
    np.testing.assert_array_equal((~t(p)).numpy(), ~p)
    i = np.array([0, 5, -3], dtype=np.int32)
    np.testing.assert_array_equal((~t(i)).numpy(), ~i)


def test_numpy_array_on_the_left_defers_to_tensor():
    out = A + t(B)
    assert isinstance(out, Tensor)
    np.testing.assert_allclose(out.numpy(), A + B)
    out = B * t(A)
    assert isinstance(out, Tensor)
    np.testing.assert_allclose(out.numpy(), A * B)
    out = A > t(B)
    assert isinstance(out, Tensor) and out.dtype == "bool"
    np.testing.assert_array_equal(out.numpy(), A > B)
    # float64 numpy with a float32 tensor promotes, as numpy/Keras do.
    assert (A.astype(np.float64) + t(B)).dtype == "float64"


def test_python_scalars_are_weakly_typed():
    i = t(np.array([1, 2], dtype=np.int32))
    assert (i + 2).dtype == "int32"
    assert (i * 0.5).dtype == "float32"
    h = kt.convert_to_tensor([1.0, 2.0], dtype="float16")
    assert (h * 2.0).dtype == "float16"
    assert (2 * h).dtype == "float16"


@pytest.mark.parametrize(
    "value,dtype",
    [
        (1.5, "float32"),
        (2, "int32"),
        (True, "bool"),
        ([1.0, 2.0], "float32"),
        ([1, 2], "int32"),
        ([[True], [False]], "bool"),
        (np.array([1.0, 2.0]), "float64"),
        (np.array([1.0], dtype=np.float16), "float16"),
        (np.array([1, 2], dtype=np.int64), "int64"),
        (np.array([1, 2], dtype=np.uint8), "uint8"),
        (np.int64(3), "int64"),
        (np.float32(3.0), "float32"),
        (torch.tensor([1.0], dtype=torch.float64), "float64"),
        (torch.tensor([1, 2], dtype=torch.int16), "int16"),
    ],
)
def test_convert_to_tensor_dtype_rules(value, dtype):
    x = kt.convert_to_tensor(value)
    assert isinstance(x, Tensor)
    assert x.dtype == dtype
    np.testing.assert_array_equal(x.numpy(), np.asarray(value))


def test_convert_to_tensor_explicit_dtype_and_identity():
    x = kt.convert_to_tensor([1, 2], dtype="float64")
    assert x.dtype == "float64"
    np.testing.assert_array_equal(x.numpy(), [1.0, 2.0])
    y = kt.convert_to_tensor(x)
    assert y is x  # no copy when nothing changes
    z = kt.convert_to_tensor(x, dtype="float32")
    assert z.dtype == "float32" and x.dtype == "float64"


def test_convert_numpy_shares_no_surprises():
    a = np.array([1.0, 2.0], dtype=np.float32)
    x = kt.convert_to_tensor(a)
    np.testing.assert_array_equal(x.numpy(), a)
    # Non-contiguous input (a strided view) converts correctly.
    b = np.arange(12, dtype=np.float32).reshape(3, 4)[:, ::2]
    np.testing.assert_array_equal(kt.convert_to_tensor(b).numpy(), b)


def test_torch_tensor_with_requires_grad_is_detached():
    src = torch.ones(3, requires_grad=True)
    x = kt.convert_to_tensor(src)
    assert not x.torch().requires_grad
    assert x.torch().grad_fn is None
    y = (x * 2.0).torch()
    assert not y.requires_grad and y.grad_fn is None
    assert src.grad is None


def test_list_of_tensors_is_stacked():
    x = kt.convert_to_tensor([t(1.0), t(2.0), t(3.0)])
    assert x.shape == (3,)
    np.testing.assert_array_equal(x.numpy(), [1.0, 2.0, 3.0])


@pytest.mark.parametrize("bad", [np.array(["a", "b"]), ["x", "y"], np.array([object()])])
def test_convert_rejects_strings_and_objects(bad):
    with pytest.raises(TypeError):
        kt.convert_to_tensor(bad)


def test_is_tensor():
    assert kt.is_tensor(t(1.0))
    assert kt.is_tensor(kt.Variable(1.0))
    assert not kt.is_tensor(np.ones(2))
    assert not kt.is_tensor(torch.ones(2))


def test_ops_installs_every_tensor_operator():
    from keratron.autodiff import tensor as tensor_module

    assert tensor_module._operators.keys() == tensor_module.OPERATOR_OPS
    for name in tensor_module.OPERATOR_OPS:
        assert tensor_module._operators[name] is getattr(kt.ops, name)


def test_install_operators_names_what_the_table_lacks():
    from keratron.autodiff.tensor import install_operators

    with pytest.raises(ValueError, match=r"lacks the ops \['abs'"):
        install_operators({"add": kt.ops.add})
