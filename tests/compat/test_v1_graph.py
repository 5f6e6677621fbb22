"""keratron.compat.v1 graphs and sessions: TF's names, shapes, feeds, fetches, pruning and
errors. Expected values are what TensorFlow 2.15's `tf.compat.v1` prints for the same code."""

import collections

import numpy as np
import pytest

import keratron.compat.v1 as tf


@pytest.fixture(autouse=True)
def fresh_graph():
    tf.reset_default_graph()
    yield
    tf.reset_default_graph()


def test_op_and_tensor_names_follow_tf():
    a, b = tf.constant(1.0), tf.constant(2.0)
    assert (a.name, b.name) == ("Const:0", "Const_1:0")
    assert (a + b).name == "add:0"
    assert tf.add(a, b).name == "Add_1:0"
    assert (a * b).name == "mul:0"
    assert tf.multiply(a, b).name == "Mul_1:0"
    assert tf.matmul([[1.0]], [[2.0]]).name == "MatMul:0"
    assert ((a - b).name, (a / b).name) == ("sub:0", "truediv:0")
    assert tf.add(a, 1).op.inputs[1].name == "Add_2/y:0"
    assert (a + 1).op.inputs[1].name == "add_3/y:0"


def test_scopes_prefix_and_uniquify_names():
    with tf.name_scope("outer"):
        with tf.name_scope("inner"):
            c = tf.constant(1, name="c")
    assert c.name == "outer/inner/c:0"
    with tf.name_scope("outer"):
        assert tf.constant(1).name == "outer_1/Const:0"


def test_static_shapes_with_unknown_dimensions():
    x = tf.placeholder(tf.float32, [None, 784])
    assert x.name == "Placeholder:0"
    assert str(x.shape) == "(?, 784)" and x.get_shape().as_list() == [None, 784]
    assert repr(x) == "<tf.Tensor 'Placeholder:0' shape=(?, 784) dtype=float32>"
    assert tf.reduce_mean(x, reduction_indices=[1]).shape.as_list() == [None]
    assert tf.reduce_sum(x, 1, keep_dims=True).shape.as_list() == [None, 1]
    assert tf.reshape(x, [-1, 28, 28, 1]).shape.as_list() == [None, 28, 28, 1]
    w = tf.Variable(tf.zeros([784, 10]))
    y = tf.nn.softmax(tf.matmul(x, w))
    assert (y.name, y.shape.as_list()) == ("Softmax:0", [None, 10])
    am = tf.argmax(y, 1)
    assert (am.name, am.dtype, am.shape.as_list()) == ("ArgMax:0", tf.int64, [None])
    assert tf.equal(am, am).dtype == tf.bool


def test_variable_names_and_structure():
    v = tf.Variable(tf.zeros([784, 10]))
    assert (v.name, v.op.name, v.initializer.name) == ("Variable:0", "Variable", "Variable/Assign")
    assert v.value().name == "Variable/read:0"
    assert [t.name for t in v.initializer.inputs] == ["zeros:0"]
    assert repr(v) == "<tf.Variable 'Variable:0' shape=(784, 10) dtype=float32_ref>"
    assert tf.global_variables_initializer().name == "init"


def test_missing_feed_names_the_placeholder():
    x = tf.placeholder(tf.float32, [None, 784])
    with tf.Session() as sess:
        with pytest.raises(tf.errors.InvalidArgumentError) as e:
            sess.run(x * 2.0)
    assert (
        "You must feed a value for placeholder tensor 'Placeholder' with dtype float and "
        "shape [?,784]" in str(e.value)
    )


def test_feed_of_wrong_shape_is_a_value_error():
    x = tf.placeholder(tf.float32, [None, 784])
    with tf.Session() as sess, pytest.raises(ValueError) as e:
        sess.run(x, {x: [[1.0]]})
    assert str(e.value) == (
        "Cannot feed value of shape (1, 1) for Tensor Placeholder:0, which has shape (?, 784)"
    )


def test_uninitialized_variable_is_a_failed_precondition():
    v = tf.Variable(tf.zeros([2]))
    with tf.Session() as sess, pytest.raises(tf.errors.FailedPreconditionError) as e:
        sess.run(v)
    assert "Attempting to use uninitialized value Variable" in str(e.value)


def test_scalars_come_back_as_numpy_scalars():
    with tf.Session() as sess:
        three = sess.run(tf.constant(3.0))
        assert type(three) is np.float32 and three == 3.0
        assert type(sess.run(tf.constant(3))) is np.int32
        assert sess.run(tf.constant([1, 2])).dtype == np.int32


def test_nested_fetches_keep_their_structure():
    a, b = tf.constant([3.0]), tf.constant([2.0])
    Pair = collections.namedtuple("Pair", "first second")
    with tf.Session() as sess:
        out = sess.run({"sum": a + b, "pair": Pair(a, [b, a * b]), "op": tf.no_op()})
    assert out["sum"].tolist() == [5.0] and out["op"] is None
    assert isinstance(out["pair"], Pair)
    assert out["pair"].first.tolist() == [3.0]
    assert [x.tolist() for x in out["pair"].second] == [[2.0], [6.0]]


def test_run_prunes_assignments_no_fetch_needs():
    v = tf.Variable(1.0)
    bump = tf.assign_add(v, 10.0)
    doubled = v * 2.0
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        assert sess.run(doubled) == 2.0  # bump is not upstream of the fetch: it does not run
        sess.run(bump)
        assert sess.run(doubled) == 22.0
        with tf.control_dependencies([bump]):
            after = tf.identity(v)
        assert sess.run(after) == 21.0
        assert sess.run(v) == 21.0


def test_group_runs_its_inputs_and_fetches_none():
    v, w = tf.Variable(0), tf.Variable(5)
    step = tf.group(tf.assign_add(v, 1), tf.assign_sub(w, 1))
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        assert sess.run(step) is None
        sess.run(step)
        assert sess.run([v, w]) == [2, 3]


def test_feeding_any_tensor_and_placeholder_with_default():
    a = tf.constant(2.0)
    b = a * 3.0
    c = b + 1.0
    d = tf.placeholder_with_default(tf.constant([1.0, 2.0]), shape=[None])
    with tf.Session() as sess:
        assert sess.run(c) == 7.0
        assert sess.run(c, {b: 10.0}) == 11.0
        assert sess.run(d * 2.0).tolist() == [2.0, 4.0]
        assert sess.run(d * 2.0, {d: [5.0]}).tolist() == [10.0]


def test_sessions_hold_separate_variable_values():
    v = tf.Variable(1.0)
    inc = tf.assign_add(v, 1.0)
    s1, s2 = tf.Session(), tf.Session()
    s1.run(v.initializer)
    s2.run(v.initializer)
    s1.run(inc)
    assert (s1.run(v), s2.run(v)) == (2.0, 1.0)


def test_eval_and_run_need_a_default_session():
    c = tf.constant(4.0)
    with pytest.raises(ValueError, match="No default session is registered"):
        c.eval()
    with tf.Session():
        assert c.eval() == 4.0
    sess = tf.InteractiveSession()
    try:
        assert (c * 2.0).eval() == 8.0
    finally:
        sess.close()


def test_gradients_match_tf():
    x = tf.placeholder(tf.float32)
    y = x * x + tf.sin(x)
    (dx,) = tf.gradients(y, [x])
    (ddx,) = tf.gradients(dx, [x])
    unrelated = tf.placeholder(tf.float32)
    assert tf.gradients(y, [unrelated]) == [None]
    with tf.Session() as sess:
        # tf.compat.v1 prints np.float32(5.0100074) and np.float32(1.85888) at x=3.
        np.testing.assert_allclose(sess.run(dx, {x: 3.0}), 5.0100074, rtol=1e-6)
        np.testing.assert_allclose(sess.run(ddx, {x: 3.0}), 1.85888, rtol=1e-6)


def test_gradient_of_a_constant_source_and_stop_gradient():
    a = tf.constant(3.0)
    b = a * a
    c = tf.stop_gradient(b) * a
    with tf.Session() as sess:
        assert sess.run(tf.gradients(b, a)) == [6.0]
        assert sess.run(tf.gradients(c, a)) == [9.0]


def test_random_ops_are_reproducible_with_a_graph_seed_and_fresh_per_run():
    tf.set_random_seed(1)
    r = tf.random_uniform([3], -1.0, 1.0)
    with tf.Session() as sess:
        first, second = sess.run(r), sess.run(r)
    assert not np.array_equal(first, second)
    assert np.all(first >= -1.0) and np.all(first < 1.0)
    tf.reset_default_graph()
    tf.set_random_seed(1)
    r = tf.random_uniform([3], -1.0, 1.0)
    with tf.Session() as sess:
        assert np.array_equal(sess.run(r), first)


def test_reduction_indices_and_keep_dims():
    x = tf.constant([[1.0, 2.0], [3.0, 4.0]])
    with tf.Session() as sess:
        assert sess.run(tf.reduce_sum(x, reduction_indices=[1])).tolist() == [3.0, 7.0]
        assert sess.run(tf.reduce_mean(x, 0, keep_dims=True)).tolist() == [[2.0, 3.0]]
        assert sess.run(tf.reduce_max(x)) == 4.0
        assert sess.run(tf.argmax(x, dimension=0)).tolist() == [1, 1]
