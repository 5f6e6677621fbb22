"""TensorFlow's "Sharing Variables" how-to (TF 1.x documentation): its code and asserts, each
snippet in a fresh default graph. Only the import line differs from the original."""

import numpy as np

import keratron.compat.v1 as tf


def conv_relu(input, kernel_shape, bias_shape):
    weights = tf.get_variable("weights", kernel_shape, initializer=tf.random_normal_initializer())
    biases = tf.get_variable("biases", bias_shape, initializer=tf.constant_initializer(0.0))
    conv = tf.nn.conv2d(input, weights, strides=[1, 1, 1, 1], padding="SAME")
    return tf.nn.relu(conv + biases)


def my_image_filter(input_images):
    with tf.variable_scope("conv1"):
        relu1 = conv_relu(input_images, [5, 5, 32, 32], [32])
    with tf.variable_scope("conv2"):
        return conv_relu(relu1, [5, 5, 32, 32], [32])


image1 = tf.placeholder(tf.float32, [2, 8, 8, 32])
image2 = tf.placeholder(tf.float32, [2, 8, 8, 32])
with tf.variable_scope("image_filters") as scope:
    result1 = my_image_filter(image1)
    scope.reuse_variables()
    result2 = my_image_filter(image2)
names = [v.name for v in tf.global_variables()]
assert names == [
    "image_filters/conv1/weights:0",
    "image_filters/conv1/biases:0",
    "image_filters/conv2/weights:0",
    "image_filters/conv2/biases:0",
], names
with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    img = np.random.RandomState(0).rand(2, 8, 8, 32).astype(np.float32)
    r1, r2 = sess.run([result1, result2], {image1: img, image2: img})
    assert np.array_equal(r1, r2)

tf.reset_default_graph()
with tf.variable_scope("foo"):
    v = tf.get_variable("v", [1])
assert v.name == "foo/v:0"

tf.reset_default_graph()
with tf.variable_scope("foo"):
    with tf.variable_scope("bar"):
        v = tf.get_variable("v", [1])
assert v.name == "foo/bar/v:0"

tf.reset_default_graph()
with tf.variable_scope("foo"):
    v = tf.get_variable("v", [1])
with tf.variable_scope("foo", reuse=True):
    v1 = tf.get_variable("v", [1])
assert v1 is v

tf.reset_default_graph()
with tf.variable_scope("foo") as foo_scope:
    v = tf.get_variable("v", [1])
with tf.variable_scope(foo_scope):
    w = tf.get_variable("w", [1])
with tf.variable_scope(foo_scope, reuse=True):
    v1 = tf.get_variable("v", [1])
    w1 = tf.get_variable("w", [1])
assert v1 is v
assert w1 is w

tf.reset_default_graph()
with tf.variable_scope("foo") as foo_scope:
    assert foo_scope.name == "foo"
with tf.variable_scope("bar"):
    with tf.variable_scope("baz") as other_scope:
        assert other_scope.name == "bar/baz"
        with tf.variable_scope(foo_scope) as foo_scope2:
            assert foo_scope2.name == "foo"  # Not changed.

tf.reset_default_graph()
sess = tf.InteractiveSession()
with tf.variable_scope("foo", initializer=tf.constant_initializer(0.4)):
    v = tf.get_variable("v", [1])
    v.initializer.run()
    assert v.eval() == 0.4  # Default initializer as set above.
    w = tf.get_variable("w", [1], initializer=tf.constant_initializer(0.3))
    w.initializer.run()
    assert w.eval() == np.float32(0.3)  # Specific initializer overrides the default.
    with tf.variable_scope("bar"):
        v = tf.get_variable("v", [1])
        v.initializer.run()
        assert v.eval() == np.float32(0.4)  # Inherited default initializer.
    with tf.variable_scope("baz", initializer=tf.constant_initializer(0.2)):
        v = tf.get_variable("v", [1])
        v.initializer.run()
        assert v.eval() == np.float32(0.2)  # Changed default initializer.
sess.close()

tf.reset_default_graph()
with tf.variable_scope("foo"):
    x = 1.0 + tf.get_variable("v", [1])
assert x.op.name == "foo/add"

tf.reset_default_graph()
with tf.variable_scope("foo"):
    with tf.name_scope("bar"):
        v = tf.get_variable("v", [1])
        x = 1.0 + v
assert v.name == "foo/v:0"
assert x.op.name == "foo/bar/add"

tf.reset_default_graph()
try:
    with tf.variable_scope("foo"):
        v = tf.get_variable("v", [1])
        v1 = tf.get_variable("v", [1])
    raise AssertionError("a second get_variable without reuse must raise")
except ValueError as e:
    assert "already exists" in str(e)
print("sharing variables: all asserts hold")
