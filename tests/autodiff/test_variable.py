"""Variable: creation, assignment, naming, trainability, dtype rules."""

import numpy as np
import pytest
import torch

import keratron as kt
from keratron.autodiff.tensor import Tensor, write_count


def test_create_from_list_and_read():
    v = kt.Variable([1.0, 2.0, 3.0])
    assert isinstance(v, Tensor)
    assert v.shape == (3,)
    assert v.dtype == "float32"
    assert v.trainable
    np.testing.assert_array_equal(v.numpy(), [1.0, 2.0, 3.0])
    assert isinstance(v.value, Tensor) and not isinstance(v.value, kt.Variable)
    np.testing.assert_array_equal(v.value.numpy(), [1.0, 2.0, 3.0])


def test_assign_family_updates_in_place_and_returns_self():
    v = kt.Variable([1.0, 2.0])
    storage = v.torch().data_ptr()
    assert v.assign([5.0, 6.0]) is v
    np.testing.assert_array_equal(v.numpy(), [5.0, 6.0])
    assert v.assign_add([1.0, 1.0]) is v
    np.testing.assert_array_equal(v.numpy(), [6.0, 7.0])
    assert v.assign_sub(kt.convert_to_tensor([2.0, 3.0])) is v
    np.testing.assert_array_equal(v.numpy(), [4.0, 4.0])
    v.assign(np.array([0.5, 0.25]))
    np.testing.assert_array_equal(v.numpy(), [0.5, 0.25])
    v.assign(torch.tensor([1.0, 2.0], dtype=torch.float64))  # cast to the variable's dtype
    assert v.dtype == "float32"
    np.testing.assert_array_equal(v.numpy(), [1.0, 2.0])
    assert v.torch().data_ptr() == storage


def test_assign_shape_mismatch_raises_value_error_naming_variable():
    v = kt.Variable(np.zeros((2, 3), np.float32), name="kernel")
    with pytest.raises(ValueError, match=r"kernel.*\(2, 3\)|\(2, 3\).*kernel"):
        v.assign(np.zeros((3, 2), np.float32))
    np.testing.assert_array_equal(v.numpy(), np.zeros((2, 3)))


def test_variable_does_not_alias_its_initial_value():
    a = np.array([1.0, 2.0], np.float32)
    t = kt.convert_to_tensor([1.0, 2.0])
    va, vt = kt.Variable(a), kt.Variable(t)
    va.assign_add([1.0, 1.0])
    vt.assign_add([1.0, 1.0])
    np.testing.assert_array_equal(a, [1.0, 2.0])
    np.testing.assert_array_equal(t.numpy(), [1.0, 2.0])


def test_name_path_and_auto_names():
    v = kt.Variable(1.0, name="bias")
    assert v.name == "bias" and v.path == "bias"
    a, b = kt.Variable(1.0), kt.Variable(1.0)
    assert a.name.startswith("variable") and b.name.startswith("variable")
    assert a.name != b.name
    assert "bias" in repr(v)


@pytest.mark.parametrize("bad", ["a/b", 3])
def test_bad_name_raises(bad):
    with pytest.raises(ValueError, match="name"):
        kt.Variable(1.0, name=bad)


def test_trainable_flag_and_tape_watching():
    w = kt.Variable(2.0)
    frozen = kt.Variable(3.0, trainable=False)
    assert w.trainable and not frozen.trainable
    with kt.GradientTape() as tape:
        y = w * frozen
    gw, gf = tape.gradient(y, [w, frozen])
    assert float(gw) == 3.0
    assert gf is None  # non-trainable variables are not watched automatically
    frozen.trainable = True
    with kt.GradientTape() as tape:
        y = w * frozen
    assert float(tape.gradient(y, frozen)) == 2.0


def test_callable_initializer_needs_shape():
    calls = []

    def init(shape, dtype=None):
        calls.append((shape, dtype))
        return np.full(shape, 0.5)

    v = kt.Variable(init, shape=(2, 3), dtype="float32")
    assert calls == [((2, 3), "float32")]
    assert v.shape == (2, 3) and v.dtype == "float32"
    np.testing.assert_array_equal(v.numpy(), np.full((2, 3), 0.5))
    with pytest.raises(ValueError, match="shape"):
        kt.Variable(init)


def test_callable_initializer_default_dtype_is_floatx():
    v = kt.Variable(lambda shape, dtype: np.ones(shape), shape=[4])
    assert v.shape == (4,) and v.dtype == "float32"


def test_initial_value_shape_mismatch_raises():
    with pytest.raises(ValueError, match="shape"):
        kt.Variable(np.zeros(3), shape=(2,))


def test_float64_variables():
    v = kt.Variable([1.0, 2.0], dtype="float64")
    assert v.dtype == "float64"
    v.assign_add([0.1, 0.1])
    np.testing.assert_allclose(v.numpy(), [1.1, 2.1], rtol=0, atol=1e-15)
    w = kt.Variable(kt.convert_to_tensor(np.array([1.0, 2.0])))  # a float64 Tensor keeps it
    assert w.dtype == "float64"
    with kt.GradientTape() as tape:
        y = kt.ops.sum(v * v)
    g = tape.gradient(y, v)
    assert g.dtype == "float64"
    np.testing.assert_allclose(g.numpy(), 2 * v.numpy(), rtol=1e-15)


def test_python_floats_and_ints_dtypes():
    assert kt.Variable(1.5).dtype == "float32"
    assert kt.Variable([1, 2]).dtype == "int32"
    assert kt.Variable([1, 2], dtype="float32").dtype == "float32"


def test_integer_variable_is_not_watched():
    i = kt.Variable([1, 2])
    with kt.GradientTape() as tape:
        y = i * 2
    assert tape.gradient(y, i) is None


def test_variable_in_ops_and_numpy():
    v = kt.Variable([[1.0, 2.0], [3.0, 4.0]])
    np.testing.assert_array_equal((v + 1).numpy(), [[2.0, 3.0], [4.0, 5.0]])
    np.testing.assert_array_equal(np.asarray(v), [[1.0, 2.0], [3.0, 4.0]])
    np.testing.assert_array_equal(v[1].numpy(), [3.0, 4.0])


def test_variable_is_not_picklable():
    import pickle

    with pytest.raises(TypeError, match="save_weights"):
        pickle.dumps(kt.Variable(1.0))


def test_every_write_bumps_the_write_count():
    v = kt.Variable(np.zeros(3, "float32"))
    counts = [write_count(v)]
    v.assign([1.0, 2.0, 3.0])
    counts.append(write_count(v))
    v.assign_add([1.0, 1.0, 1.0])
    counts.append(write_count(v))
    v.assign_sub([1.0, 1.0, 1.0])
    counts.append(write_count(v))

    @kt.function
    def step():
        v.assign_add([1.0, 0.0, 0.0])

    step()  # traced: the replayed assignment counts as well
    step()
    counts.append(write_count(v))
    opt = kt.optimizers.Adam(0.1)  # the fused CPU kernel leaves torch's version alone
    opt.apply([kt.convert_to_tensor([1.0, 1.0, 1.0])], [v])
    counts.append(write_count(v))
    assert counts == [0, 1, 2, 3, 5, 6]
    np.testing.assert_allclose(v.numpy()[1:], [1.9, 2.9], rtol=1e-5)
