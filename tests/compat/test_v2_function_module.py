"""compat.v2's tf.Module, tf.function, tf.custom_gradient, clip_by_norm / clip_by_global_norm
and tf.train.Checkpoint's iterators, deferred restores and shared variables. Expected values
are TensorFlow 2.20's for the same code (recorded)."""

import numpy as np
import pytest

import keratron
import keratron.compat.v2 as tf


class _Inner(tf.Module):
    def __init__(self):
        super().__init__()
        self.b = tf.Variable(2.0, trainable=False)
        self.a = {"y": tf.Variable(1.0), "x": (tf.Variable(0.5),)}


class _Outer(tf.Module):
    def __init__(self):
        super().__init__()
        self.z = tf.Variable(3.0)
        self.inner = _Inner()
        self.again = self.inner
        self.c = [tf.Variable(4.0)]


def _values(vs):
    return [float(v.numpy()) for v in vs]


def test_module_walks_attributes_in_tensorflows_order():
    o = _Outer()
    # TF 2.20: [4.0, 3.0, 0.5, 1.0, 2.0] / [4.0, 3.0, 0.5, 1.0] / [2.0], one submodule.
    assert _values(o.variables) == [4.0, 3.0, 0.5, 1.0, 2.0]
    assert _values(o.trainable_variables) == [4.0, 3.0, 0.5, 1.0]
    assert _values(o.non_trainable_variables) == [2.0]
    assert o.submodules == (o.inner,)


def test_module_names():
    class MyOtherModule(tf.Module):
        pass

    class HTTPServer2(tf.Module):
        pass

    assert (MyOtherModule().name, HTTPServer2().name) == ("my_other_module", "http_server2")
    assert tf.Module(name="dense_1").name == "dense_1"
    with pytest.raises(ValueError, match="'a b' is not a valid module name"):
        tf.Module(name="a b")


def test_function_traces_and_falls_back_to_eager_on_value_dependent_control_flow():
    @tf.function
    def square_if_positive(x):
        return x * x if x > 0 else x * 0

    assert int(square_if_positive(tf.constant(3))) == 9
    assert int(square_if_positive(tf.constant(-2))) == 0
    assert square_if_positive.runs_eagerly

    @tf.function
    def traced(x):
        return tf.reduce_sum(x * x)

    assert float(traced(tf.constant([1.0, 2.0]))) == 5.0
    assert not traced.runs_eagerly and traced.trace_count == 1

    @tf.function
    def broken(x):
        return x + "a"

    with pytest.raises(TypeError):
        broken(tf.constant(1.0))
    assert not broken.runs_eagerly  # other errors are not swallowed

    @tf.function
    def sum_to(n):
        total = tf.constant(0)
        for i in tf.range(n):  # a traced bound: the length is known only eagerly
            total += i
        return total

    assert int(sum_to(tf.constant(10))) == 45  # TF 2.20: 45
    assert int(tf.function(lambda: tf.reduce_sum(tf.range(4)))()) == 6

    plain = tf.function(lambda x: x if x > 0 else -x, autograph=False)
    with pytest.raises(TypeError, match="Python bool"):
        plain(tf.constant(1.0))


def test_function_on_methods_is_per_instance():
    class Scale(tf.Module):
        def __init__(self, k):
            super().__init__()
            self.k = tf.Variable(k)

        @tf.function
        def __call__(self, x):
            if x > 0:
                return x * self.k
            return x

    a, b = Scale(2.0), Scale(3.0)
    assert float(a(tf.constant(1.5))) == 3.0 and float(b(tf.constant(1.5))) == 4.5
    assert float(a(tf.constant(-1.0))) == -1.0


def test_custom_gradient_multiple_outputs_and_errors():
    @tf.custom_gradient
    def two(x, y):
        def grad(da, db):
            return da * 2 + db, da - db

        return (x * 2, x + y), grad

    x, y = tf.constant(1.0), tf.constant(2.0)
    with tf.GradientTape(persistent=True) as t:
        t.watch([x, y])
        a, b = two(x, y)
        s = a * 3 + b * 5
    # TF 2.20: [11.0, -2.0] and (b unused: its cotangent is zero) [2.0, 1.0].
    assert _values(t.gradient(s, [x, y])) == [11.0, -2.0]
    assert _values(t.gradient(a, [x, y])) == [2.0, 1.0]

    @tf.custom_gradient
    def bad(x):
        return x * 1.0, lambda dy: (dy, dy)

    with tf.GradientTape() as t:
        t.watch(x)
        z = bad(x)
    with pytest.raises(ValueError, match="expected to return 1 gradients, but returned 2"):
        t.gradient(z, x)

    v = tf.Variable(2.0)

    @tf.custom_gradient
    def uses_variable(x):
        return x * v, lambda dy: dy

    with pytest.raises(TypeError, match="must accept keyword argument 'variables'"):
        uses_variable(x)


def test_clip_by_norm_and_global_norm():
    x = tf.zeros([3])
    with tf.GradientTape() as t:
        t.watch(x)
        y = tf.reduce_sum(tf.clip_by_norm(x, 1.0) * tf.constant([1.0, 2.0, 3.0]))
    assert t.gradient(y, x).numpy().tolist() == [1.0, 2.0, 3.0]  # TF: no NaN at zero
    x = tf.constant([[3.0, 4.0], [6.0, 8.0]])
    assert tf.clip_by_norm(x, 5.0, axes=[1]).numpy().tolist() == [[3.0, 4.0], [3.0, 4.0]]
    with tf.GradientTape() as t:
        t.watch(x)
        y = tf.reduce_sum(tf.clip_by_norm(x, 5.0) * tf.constant([[1.0, 2.0], [3.0, 4.0]]))
    np.testing.assert_allclose(
        t.gradient(y, x).numpy(),
        [[-0.20750710368156433, 0.02146625518798828], [0.03219938278198242, 0.04293251037597656]],
        rtol=1e-6,
    )
    clipped, norm = tf.clip_by_global_norm(
        [tf.constant([3.0, 4.0]), None, tf.constant([[12.0]])], 6.5
    )
    assert clipped[1] is None and float(norm) == 13.0
    assert clipped[0].numpy().tolist() == [1.5, 2.0] and clipped[2].numpy().tolist() == [[6.0]]
    assert float(tf.linalg.global_norm([tf.constant([3.0]), tf.constant([4.0])])) == 5.0
    with pytest.raises(TypeError, match="sequence"):
        tf.clip_by_global_norm(tf.constant([1.0]), 1.0)


def test_checkpoint_saves_iterator_position(tmp_path):
    ds = tf.data.Dataset.range(7).repeat().batch(2)
    it = iter(ds)
    ckpt = tf.train.Checkpoint(iterator=it)
    for _ in range(3):
        next(it)
    path = ckpt.save(str(tmp_path / "ckpt"))
    after = next(it).numpy().tolist()
    keys = [k for k, _ in tf.train.list_variables(path)]
    assert keys == [
        "iterator/.ATTRIBUTES/ITERATOR_STATE",
        "save_counter/.ATTRIBUTES/VARIABLE_VALUE",
    ]
    it2 = iter(ds)
    tf.train.Checkpoint(iterator=it2).restore(path).assert_consumed()
    assert next(it2).numpy().tolist() == after == [6, 0]


def test_checkpoint_defers_values_until_variables_exist(tmp_path):
    def make():
        model = keratron.Sequential([keratron.layers.Dense(3), keratron.layers.Dense(1)])
        return model, keratron.optimizers.Adam(0.1)

    model, opt = make()
    x = np.arange(8, dtype="float32").reshape(4, 2)
    for _ in range(2):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(model(x) - 1.0))
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
    path = tf.train.Checkpoint(model=model, opt=opt).save(str(tmp_path / "c"))
    fresh, fresh_opt = make()  # nothing built yet
    tf.train.Checkpoint(model=fresh, opt=fresh_opt).restore(path)
    np.testing.assert_array_equal(fresh(x).numpy(), model(x).numpy())  # the first call
    fresh_opt.build(fresh.trainable_variables)
    for got, want in zip(fresh_opt.variables, opt.variables, strict=True):
        np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_checkpoint_finds_a_shared_variable_through_either_attribute(tmp_path):
    save = tf.train.Checkpoint()
    save.listed = [tf.Variable(1.0), tf.Variable(2.0)]
    save.mapped = {"one": save.listed[0], "two": save.listed[1]}
    path = save.save(str(tmp_path / "shared"))
    v = tf.Variable(0.0)
    restore = tf.train.Checkpoint()
    restore.mapped = {"two": v}
    restore.restore(path).assert_existing_objects_matched()
    assert float(v.numpy()) == 2.0  # TF 2.20: 2.0


def test_deferred_values_are_written_once_when_the_first_call_is_traced(tmp_path):
    x = np.arange(8, dtype="float32").reshape(4, 2)

    def make():
        model = keratron.Sequential([keratron.layers.Dense(3), keratron.layers.Dense(1)])
        optimizer = keratron.optimizers.Adam(0.1)

        def step():
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(tf.square(model(x) - 1.0))
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables))
            return loss

        return model, optimizer, step

    model, opt, step = make()
    step(), step()
    path = tf.train.Checkpoint(model=model, opt=opt).save(str(tmp_path / "c"))
    want = [float(step()) for _ in range(3)]
    fresh, fresh_opt, fresh_step = make()
    tf.train.Checkpoint(model=fresh, opt=fresh_opt).restore(path)
    traced = tf.function(fresh_step)
    # Restored in the first trace, then trained: not reset to the saved values at each replay.
    assert [float(traced()) for _ in range(3)] == want
    assert not traced.runs_eagerly and traced.trace_count == 1
