"""TensorFlow's "Variables: Creation, Initialization" how-to (TF 1.x documentation): creation,
initialization, and initialization from another variable. Only the import line differs from
the original (the Saver part is left out)."""

import numpy as np

import keratron.compat.v1 as tf

# Create two variables.
weights = tf.Variable(tf.random_normal([784, 200], stddev=0.35), name="weights")
biases = tf.Variable(tf.zeros([200]), name="biases")
assert weights.name == "weights:0" and biases.name == "biases:0"

# Add an op to initialize the variables.
init_op = tf.global_variables_initializer()

# Later, when launching the model
with tf.Session() as sess:
    # Run the init operation.
    sess.run(init_op)
    w = sess.run(weights)
    assert w.shape == (784, 200) and abs(w.std() - 0.35) < 0.01
    assert not sess.run(biases).any()

# Initialization from another Variable
tf.reset_default_graph()
weights = tf.Variable(tf.random_normal([784, 200], stddev=0.35), name="weights")
w2 = tf.Variable(weights.initialized_value(), name="w2")
w_twice = tf.Variable(weights.initialized_value() * 2.0, name="w_twice")
init_op = tf.global_variables_initializer()
with tf.Session() as sess:
    sess.run(init_op)
    w, v2, vt = sess.run([weights, w2, w_twice])
    assert np.array_equal(w, v2)
    assert np.allclose(vt, 2 * w)

# Reading a variable before its initializer ran is an error.
with tf.Session() as sess:
    try:
        sess.run(weights)
        raise AssertionError("reading an uninitialized variable must raise")
    except tf.errors.FailedPreconditionError as e:
        assert "Attempting to use uninitialized value weights" in str(e)
print("variables: all asserts hold")
