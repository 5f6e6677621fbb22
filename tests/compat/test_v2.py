"""`keratron.compat.v2` against TensorFlow 2.15's values.

Every expected value below was printed by TensorFlow 2.15 running the same expression (recorded,
never computed by keratron); TensorFlow itself is not imported here.
"""

import numpy as np
import pytest

import keratron
import keratron.compat.v2 as tf

X = [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]

# expression, TF 2.15's value
OPS = [
    (lambda: tf.reduce_sum(X), 21.0),
    (lambda: tf.reduce_sum(X, axis=0), [5.0, 7.0, 9.0]),
    (lambda: tf.reduce_mean(X, 1, keepdims=True), [[2.0], [5.0]]),
    (lambda: tf.reduce_max(X, axis=[0, 1]), 6.0),
    (lambda: tf.matmul(X, X, transpose_b=True), [[14.0, 32.0], [32.0, 77.0]]),
    (lambda: tf.matmul(X, X, transpose_a=True)[0], [17.0, 22.0, 27.0]),
    (lambda: tf.reshape(X, [-1]), [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]),
    (lambda: tf.cast(tf.constant([1.7, -1.7]), tf.int32), [1, -1]),
    (lambda: tf.nn.relu([-1.0, 2.0]), [0.0, 2.0]),
    (lambda: tf.nn.softmax([[1.0, 2.0, 3.0]]), [[0.09003057, 0.24472848, 0.66524088]]),
    (
        lambda: tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=[0, 2], logits=[[1.0, 2.0, 3.0], [1.0, 0.5, -1.0]]
        ),
        [2.4076058864593506, 2.5549569129943848],
    ),
    (
        lambda: tf.nn.sigmoid_cross_entropy_with_logits(labels=[0.0, 1.0], logits=[0.5, -1.0]),
        [0.9740769863128662, 1.3132617473602295],
    ),
    (
        lambda: tf.nn.softmax_cross_entropy_with_logits(labels=[[0.0, 1.0]], logits=[[1.0, 2.0]]),
        [0.31326165795326233],
    ),
    (lambda: tf.nn.log_softmax([1.0, 2.0]), [-1.31326162815094, -0.31326165795326233]),
    (lambda: tf.nn.l2_loss(tf.constant([3.0, 4.0])), 12.5),
    (lambda: tf.math.log([1.0, np.e]), [0.0, 0.9999999403953552]),
    (lambda: tf.math.square(3.0), 9.0),
    (lambda: tf.math.reduce_std([1.0, 2.0, 3.0, 4.0]), 1.118034),
    (lambda: tf.math.argmax([[1, 5, 2]], axis=1), [1]),
    (lambda: tf.math.floormod(-7, 3), 2),
    (lambda: tf.constant(0.0, shape=(2, 2)), [[0.0, 0.0], [0.0, 0.0]]),
    (lambda: tf.ones([2], dtype=tf.int32), [1, 1]),
    (lambda: tf.shape(X), [2, 3]),
    (lambda: tf.size(X), 6),
    (lambda: tf.rank(X), 2),
    (lambda: tf.range(5), [0, 1, 2, 3, 4]),
    (lambda: tf.range(1, 2, 0.5), [1.0, 1.5]),
    (lambda: tf.one_hot([0, 2], 3), [[1.0, 0.0, 0.0], [0.0, 0.0, 1.0]]),
    (lambda: tf.gather([10, 20, 30], [2, 0]), [30, 10]),
    (lambda: tf.where([True, False], 1.0, 2.0), [1.0, 2.0]),
    (lambda: tf.tile([[1, 2]], [2, 1]), [[1, 2], [1, 2]]),
    (lambda: tf.add_n([X, X, X])[0], [3.0, 6.0, 9.0]),
    (lambda: tf.clip_by_value([-1.0, 5.0], 0.0, 1.0), [0.0, 1.0]),
    (lambda: tf.norm([3.0, 4.0]), 5.0),
    (lambda: tf.math.l2_normalize([3.0, 4.0]), [0.6000000238418579, 0.800000011920929]),
    (lambda: tf.nn.tanh([0.5]), [0.46211713552474976]),
    (lambda: tf.unstack(tf.constant([[1, 2], [3, 4]]))[1], [3, 4]),
]


@pytest.mark.parametrize("expr,expected", OPS)
def test_op_matches_tensorflow(expr, expected):
    out = expr()
    assert isinstance(out, keratron.Tensor)
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-6, atol=1e-6)


# expression, TF 2.15's dtype name
DTYPES = [
    (lambda: tf.constant(1), "int32"),
    (lambda: tf.constant(1.0), "float32"),
    (lambda: tf.constant(np.float64(1.0)), "float64"),
    (lambda: tf.zeros((2, 3)), "float32"),
    (lambda: tf.ones_like(tf.constant([1, 2])), "int32"),
    (lambda: tf.math.argmax([[1, 5, 2]], axis=1), "int64"),
    (lambda: tf.random.uniform((4,), minval=2.0, maxval=3.0), "float32"),
    (lambda: tf.random.uniform((4,), 0, 10, dtype=tf.int32), "int32"),
]


@pytest.mark.parametrize("expr,dtype", DTYPES)
def test_dtype_matches_tensorflow(expr, dtype):
    out = expr()
    assert out.dtype == dtype
    assert out.dtype == getattr(tf, dtype)


def test_shapes_match_tensorflow():
    assert tf.concat([X, X], axis=1).shape == (2, 6)
    assert tf.stack([X, X], axis=1).shape == (2, 2, 3)
    assert tf.transpose(X).shape == (3, 2)
    assert tf.expand_dims(X, 0).shape == (1, 2, 3)
    assert tf.squeeze(tf.zeros((1, 2, 1))).shape == (2,)
    assert [s.shape for s in tf.split(tf.zeros((6, 2)), 3)] == [(2, 2)] * 3
    assert [s.shape for s in tf.split(tf.zeros((6, 2)), [1, 5])] == [(1, 2), (5, 2)]
    tf.random.set_seed(0)
    assert tf.random.normal((2, 3)).shape == (2, 3)


def test_variable_matches_tensorflow():
    v = tf.Variable(1.0)
    assert v.name == "Variable:0" and tf.Variable([1.0, 2.0], name="w").name == "w:0"
    assert v.dtype == tf.float32 and v.trainable
    assert repr(v) == "<tf.Variable 'Variable:0' shape=() dtype=float32, numpy=1.0>"
    w = tf.Variable([1.0, 2.0, 3.0], name="w")
    assert w.assign_add([1.0, 1.0, 1.0]).numpy().tolist() == [2.0, 3.0, 4.0]
    assert w.read_value().numpy().tolist() == [2.0, 3.0, 4.0]
    assert w.value().numpy().tolist() == [2.0, 3.0, 4.0]
    w.assign_sub([0.5, 0.5, 0.5])
    assert w.numpy().tolist() == [1.5, 2.5, 3.5]
    w.scatter_nd_update([[0]], [10.0])
    assert w.numpy().tolist() == [10.0, 2.5, 3.5]
    w.scatter_update(tf.IndexedSlices(tf.constant([7.0]), tf.constant([2])))
    assert w.numpy().tolist() == [10.0, 2.5, 7.0]
    assert (w * 2).numpy().tolist() == [20.0, 5.0, 14.0]
    assert float(tf.reduce_sum(w)) == 19.5
    # TF raises for initial_value eagerly; keratron keeps the starting value.
    assert w.initial_value.numpy().tolist() == [1.0, 2.0, 3.0]
    snapshot = w.read_value()
    w.assign([0.0, 0.0, 0.0])
    assert snapshot.numpy().tolist() == [10.0, 2.5, 7.0]


def test_variable_from_callable_and_in_optimizer():
    v = tf.Variable(lambda: tf.ones((2,)), name="b")
    opt = keratron.optimizers.SGD(learning_rate=0.5)
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(v * v)
    opt.apply(tape.gradient(loss, [v]), [v])
    assert v.numpy().tolist() == [0.0, 0.0]


def test_gradient_tape_matches_tensorflow():
    w = tf.Variable([10.0, 2.5, 7.0])
    with tf.GradientTape() as tape:
        y = tf.reduce_sum(w * w)
    assert tape.gradient(y, w).numpy().tolist() == [20.0, 5.0, 14.0]
    x = tf.constant(3.0)
    with tf.GradientTape(persistent=True) as t:
        t.watch(x)
        y = x * x
        z = y * y
    assert float(t.gradient(z, x)) == 108.0 and float(t.gradient(y, x)) == 6.0
    w2 = tf.Variable([1.0, 2.0])
    with tf.GradientTape() as tape:
        y = tf.reduce_sum(tf.square(w2.read_value()))
    assert tape.gradient(y, w2).numpy().tolist() == [2.0, 4.0]


def test_function_traces_v2_ops_and_variables():
    eager = []
    v = tf.Variable(0.0)

    @tf.function
    def f(a):
        eager.append(tf.executing_eagerly())
        v.assign_add(tf.reduce_sum(a))
        return tf.reduce_sum(tf.nn.relu(a) * 2.0)

    assert float(f(tf.constant([-1.0, 2.0, 3.0]))) == 10.0  # TF: 10.0
    assert float(f(tf.constant([-1.0, 2.0, 3.0]))) == 10.0
    assert eager == [False] and tf.executing_eagerly()
    assert float(v) == 8.0


def test_nest_matches_tensorflow():
    assert tf.nest.flatten({"b": 1, "a": [2, (3, 4)]}) == [2, 3, 4, 1]
    assert tf.nest.map_structure(lambda a: a * 2, (1, [2, {"x": 3}])) == (2, [4, {"x": 6}])
    packed = tf.nest.pack_sequence_as(({"b": 0, "a": 0}, [0]), [1, 2, 3])
    assert packed == ({"b": 2, "a": 1}, [3])
    with pytest.raises(TypeError):
        tf.nest.assert_same_structure((1, 2), [1, 2], check_types=True)
    tf.nest.assert_same_structure((1, 2), [1, 2], check_types=False)
    with pytest.raises(ValueError):
        tf.nest.assert_same_structure((1, (2,)), (1, 2))


def test_debugging_matches_tensorflow():
    tf.debugging.assert_equal(tf.constant([1, 2]), tf.constant([1, 2]))
    with pytest.raises(tf.errors.InvalidArgumentError):
        tf.debugging.assert_equal(tf.constant([1, 2]), tf.constant([1, 3]))
    with pytest.raises(tf.errors.InvalidArgumentError, match="bad : Tensor had NaN values"):
        tf.debugging.check_numerics(tf.constant([1.0, np.nan]), "bad")
    assert tf.debugging.check_numerics([1.0], "ok").numpy().tolist() == [1.0]


def test_top_level_names():
    assert tf.keras is keratron and tf.data is keratron.data
    assert tf.GradientTape is keratron.GradientTape
    # tf.function is keratron.function that falls back to eager on value-dependent control flow
    assert isinstance(tf.function(lambda x: x), keratron.autodiff.function.Function)
    assert str(tf.float32) == "<dtype: 'float32'>" and repr(tf.float32) == "tf.float32"
    assert tf.float32 == "float32" and tf.float32.name == "float32"
    assert keratron.compat.v2 is tf
