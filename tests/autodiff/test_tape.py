"""GradientTape semantics (tf.GradientTape's), with torch.autograd as the oracle for values."""

import numpy as np
import pytest
import torch

import keratron as kt

ops = kt.ops


def t(x):
    return kt.convert_to_tensor(x)


def test_watch_constant_tensor():
    x = t(3.0)
    with kt.GradientTape() as tape:
        tape.watch(x)
        y = x * x * x
    assert float(tape.gradient(y, x)) == 27.0


def test_unwatched_tensor_gets_none():
    x = t(3.0)
    with kt.GradientTape() as tape:
        y = x * x
    assert tape.gradient(y, x) is None


def test_unwatched_source_beside_a_watched_one_gets_none():
    # The op is recorded because `w` is watched; `x` was never watched, so, as in
    # tf.GradientTape, it gets no gradient.
    w = kt.Variable(2.0)
    x = t(5.0)
    frozen = kt.Variable(7.0, trainable=False)
    with kt.GradientTape() as tape:
        y = w * x * frozen
    gw, gx, gf = tape.gradient(y, [w, x, frozen])
    assert float(gw) == 35.0
    assert gx is None and gf is None


def test_gradient_wrt_intermediate_tensor():
    x = kt.Variable(2.0)
    with kt.GradientTape() as tape:
        h = x * 3.0
        y = h * h
    gh, gx = tape.gradient(y, [h, x])
    assert float(gh) == 12.0 and float(gx) == 36.0


def test_watch_rejects_non_tensors():
    with kt.GradientTape() as tape:
        with pytest.raises(ValueError, match="watch"):
            tape.watch(np.ones(2))


def test_non_persistent_tape_reuse_raises():
    x = kt.Variable(1.0)
    with kt.GradientTape() as tape:
        y = x * 2.0
    tape.gradient(y, x)
    with pytest.raises(RuntimeError, match="persistent"):
        tape.gradient(y, x)


def test_persistent_tape_allows_many_gradients():
    x = kt.Variable(3.0)
    with kt.GradientTape(persistent=True) as tape:
        y = x * x
        z = y * y
    assert float(tape.gradient(y, x)) == 6.0
    assert float(tape.gradient(z, x)) == 108.0
    assert float(tape.gradient(z, y)) == 18.0


def test_watch_accessed_variables_false():
    a, b = kt.Variable(2.0), kt.Variable(5.0)
    with kt.GradientTape(watch_accessed_variables=False) as tape:
        tape.watch(a)
        y = a * b
    assert tape.watched_variables() == (a,)
    ga, gb = tape.gradient(y, [a, b])
    assert float(ga) == 5.0
    assert gb is None


def test_watched_variables_lists_accessed_trainable_variables():
    a, b = kt.Variable(1.0), kt.Variable(1.0)
    frozen = kt.Variable(1.0, trainable=False)
    with kt.GradientTape() as tape:
        _ = a * frozen + b
    got = tape.watched_variables()
    assert set(map(id, got)) == {id(a), id(b)}


def test_stop_recording():
    x = kt.Variable(2.0)
    with kt.GradientTape() as tape:
        y = x * x
        with tape.stop_recording():
            z = y * x  # not recorded: y * x is a constant to the tape
        w = y + z
    assert float(tape.gradient(w, x)) == 4.0  # d(x^2)/dx only


def test_nested_tapes_give_second_and_third_derivatives():
    x = kt.Variable(1.5)
    with kt.GradientTape() as t3:
        with kt.GradientTape() as t2:
            with kt.GradientTape() as t1:
                y = ops.sin(x) * x**3
            dy = t1.gradient(y, x)
        d2y = t2.gradient(dy, x)
    d3y = t3.gradient(d2y, x)

    tx = torch.tensor(1.5, dtype=torch.float64, requires_grad=True)
    ty = torch.sin(tx) * tx**3
    (g1,) = torch.autograd.grad(ty, tx, create_graph=True)
    (g2,) = torch.autograd.grad(g1, tx, create_graph=True)
    (g3,) = torch.autograd.grad(g2, tx)
    np.testing.assert_allclose(float(dy), g1.item(), rtol=1e-5)
    np.testing.assert_allclose(float(d2y), g2.item(), rtol=1e-5)
    np.testing.assert_allclose(float(d3y), g3.item(), rtol=1e-4)


def test_hessian_vector_product_matches_torch():
    rng = np.random.default_rng(0)
    a = rng.standard_normal(4)
    v = rng.standard_normal(4)
    x = kt.Variable(a, dtype="float64")
    with kt.GradientTape() as outer:
        with kt.GradientTape() as inner:
            y = ops.sum(ops.exp(x) * ops.tanh(x))
        g = inner.gradient(y, x)
        gv = ops.sum(g * t(v))
    hv = outer.gradient(gv, x)

    tx = torch.tensor(a, requires_grad=True)
    (tg,) = torch.autograd.grad((torch.exp(tx) * torch.tanh(tx)).sum(), tx, create_graph=True)
    (thv,) = torch.autograd.grad((tg * torch.from_numpy(v)).sum(), tx)
    np.testing.assert_allclose(hv.numpy(), thv.numpy(), rtol=1e-10)


def test_nested_structures_of_targets_and_sources():
    a, b, c = kt.Variable(1.0), kt.Variable(2.0), kt.Variable(3.0)
    with kt.GradientTape() as tape:
        targets = {"p": a * b, "q": [b * c, c * c]}  # summed: ab + bc + c^2
    grads = tape.gradient(targets, {"first": a, "rest": (b, [c])})
    assert set(grads) == {"first", "rest"}
    assert isinstance(grads["rest"], tuple) and isinstance(grads["rest"][1], list)
    assert float(grads["first"]) == 2.0
    assert float(grads["rest"][0]) == 4.0
    assert float(grads["rest"][1][0]) == 8.0


def test_output_gradients_weight_the_targets():
    x = kt.Variable([1.0, 2.0, 3.0])
    with kt.GradientTape() as tape:
        y = x * x
    g = tape.gradient(y, x, output_gradients=t([1.0, 0.0, -2.0]))
    np.testing.assert_array_equal(g.numpy(), [2.0, 0.0, -12.0])


def test_output_gradients_count_must_match():
    x = kt.Variable(1.0)
    with kt.GradientTape() as tape:
        y = x * 2.0
    with pytest.raises(ValueError, match="output_gradients"):
        tape.gradient([y, y], x, output_gradients=[t(1.0)])


def test_unconnected_gradients():
    x, unused = kt.Variable([1.0, 2.0]), kt.Variable([[3.0]])
    with kt.GradientTape(persistent=True) as tape:
        y = ops.sum(x)
    assert tape.gradient(y, unused) is None
    z = tape.gradient(y, unused, unconnected_gradients="zero")
    assert z.shape == (1, 1) and z.dtype == "float32"
    np.testing.assert_array_equal(z.numpy(), [[0.0]])
    with pytest.raises(ValueError, match="unconnected_gradients"):
        tape.gradient(y, x, unconnected_gradients="bogus")


def test_broadcast_gradients_are_summed_back():
    w = kt.Variable([1.0, 2.0, 3.0])
    b = kt.Variable(0.5)
    xv = np.arange(6.0, dtype=np.float32).reshape(2, 3)
    with kt.GradientTape() as tape:
        y = ops.sum(t(xv) * w + b)
    gw, gb = tape.gradient(y, [w, b])
    np.testing.assert_array_equal(gw.numpy(), xv.sum(0))
    assert gb.shape == () and float(gb) == 6.0


def test_stop_gradient():
    x = kt.Variable(3.0)
    with kt.GradientTape() as tape:
        y = x * kt.stop_gradient(x)
    assert float(tape.gradient(y, x)) == 3.0
    np.testing.assert_array_equal(kt.stop_gradient([1.0, 2.0]).numpy(), [1.0, 2.0])


def test_custom_gradient():
    @kt.custom_gradient
    def clip_gradient(x):
        def grad(g):
            return ops.clip(g, -0.5, 0.5)

        return x * 1.0, grad

    x = kt.Variable([1.0, 2.0])
    with kt.GradientTape() as tape:
        y = ops.sum(clip_gradient(x) * t([3.0, 0.25]))
    np.testing.assert_array_equal(tape.gradient(y, x).numpy(), [0.5, 0.25])


def test_custom_gradient_numerically_stable_log1pexp():
    @kt.custom_gradient
    def log1pexp(x):
        e = ops.exp(x)

        def grad(g):
            return g * (1 - 1 / (1 + e))

        return ops.log(1 + e), grad

    x = kt.Variable(100.0, dtype="float64")
    with kt.GradientTape() as tape:
        y = log1pexp(x)
    assert float(tape.gradient(y, x)) == 1.0


def test_custom_gradient_wrong_count_raises():
    @kt.custom_gradient
    def f(a, b):
        return a * b, lambda g: g  # one gradient for two inputs

    a, b = kt.Variable(1.0), kt.Variable(2.0)
    with kt.GradientTape() as tape:
        y = f(a, b)
    with pytest.raises(ValueError, match="custom_gradient"):
        tape.gradient(y, [a, b])


def test_jacobian_matches_torch():
    rng = np.random.default_rng(1)
    a = rng.standard_normal(3)
    m = rng.standard_normal((2, 3))
    x = kt.Variable(a, dtype="float64")
    with kt.GradientTape(persistent=True) as tape:
        y = ops.tanh(ops.sum(t(m) * x, axis=1, keepdims=True) * x)  # shape (2, 3)
    jac = tape.jacobian(y, x)
    assert jac.shape == (2, 3, 3)
    ref = torch.autograd.functional.jacobian(
        lambda v: torch.tanh((torch.from_numpy(m) * v).sum(1, keepdim=True) * v),
        torch.from_numpy(a),
    )
    np.testing.assert_allclose(jac.numpy(), ref.numpy(), rtol=1e-10)


def test_jacobian_needs_persistent_tape():
    x = kt.Variable([1.0])
    with kt.GradientTape() as tape:
        y = x * 2.0
    with pytest.raises(RuntimeError, match="persistent"):
        tape.jacobian(y, x)


def test_integer_inputs_give_none():
    i = t(np.array([1, 2, 3], dtype=np.int32))
    f = kt.Variable([1.0, 2.0, 3.0])
    with kt.GradientTape() as tape:
        tape.watch(i)
        y = ops.sum(ops.cast(i, "float32") * f)
    gi, gf = tape.gradient(y, [i, f])
    assert gi is None
    np.testing.assert_array_equal(gf.numpy(), [1.0, 2.0, 3.0])


def test_integer_target_gives_none():
    x = kt.Variable(1.5)
    with kt.GradientTape() as tape:
        n = ops.cast(x * 2.0, "int32")
    assert tape.gradient(n, x) is None


def test_gradient_dtype_follows_source():
    x = kt.Variable([1.0, 2.0], dtype="float16")
    with kt.GradientTape() as tape:
        y = ops.sum(ops.cast(x, "float32") ** 2)
    g = tape.gradient(y, x)
    assert g.dtype == "float16"
    np.testing.assert_array_equal(g.numpy(), [2.0, 4.0])


def test_tape_records_nothing_after_exit():
    x = kt.Variable(2.0)
    with kt.GradientTape(persistent=True) as tape:
        y = x * x
    z = y * x  # after the block: not recorded
    assert float(tape.gradient(y, x)) == 4.0
    assert tape.gradient(z, x) is None


def test_gradient_computation_leaves_torch_autograd_alone():
    x = kt.Variable([1.0, 2.0])
    with kt.GradientTape() as tape:
        y = ops.sum(ops.exp(x))
    g = tape.gradient(y, x)
    assert not g.torch().requires_grad and g.torch().grad_fn is None
    assert not x.torch().requires_grad


def test_active_tapes_lists_entered_tapes_innermost_last():
    from keratron.autodiff import active_tapes

    assert active_tapes() == ()
    with kt.GradientTape() as outer:
        with kt.GradientTape() as inner:
            assert active_tapes() == (outer, inner)
        assert active_tapes() == (outer,)
    assert active_tapes() == ()


def test_active_tapes_are_per_thread():
    import threading

    from keratron.autodiff import active_tapes

    seen = []
    with kt.GradientTape():
        th = threading.Thread(target=lambda: seen.append(active_tapes()))
        th.start()
        th.join()
    assert seen == [()]


def test_is_recording_follows_the_block_and_stop_recording():
    tape = kt.GradientTape()
    assert not tape.is_recording
    with tape:
        assert tape.is_recording
        with tape.stop_recording():
            assert not tape.is_recording
        assert tape.is_recording
    assert not tape.is_recording


def test_recorded_is_true_for_watched_tensors_and_recorded_results():
    x, c = t(2.0), t(5.0)
    v = kt.Variable(1.0)
    with kt.GradientTape() as tape:
        tape.watch(x)
        y = x * 3.0
        z = c * 2.0  # depends on nothing watched: not recorded
        w = v * 2.0  # a trainable variable read is watched automatically
    assert tape.recorded(x) and tape.recorded(y) and tape.recorded(w) and tape.recorded(v)
    assert not tape.recorded(c) and not tape.recorded(z)
