# ruff: noqa: UP031 (the tutorial's own %-formatting)
"""TensorFlow's "MNIST For ML Beginners" (TF 1.x documentation): softmax regression trained
with gradient descent. Only the import line and the data source (the bundled 8x8 digits,
64 pixels instead of 784) differ from the original."""

import digits_data

import keratron.compat.v1 as tf

mnist = digits_data.read_data_sets(one_hot=True)

x = tf.placeholder(tf.float32, [None, 64])
W = tf.Variable(tf.zeros([64, 10]))
b = tf.Variable(tf.zeros([10]))
y = tf.nn.softmax(tf.matmul(x, W) + b)

y_ = tf.placeholder(tf.float32, [None, 10])
cross_entropy = tf.reduce_mean(-tf.reduce_sum(y_ * tf.log(y), reduction_indices=[1]))
train_step = tf.train.GradientDescentOptimizer(0.5).minimize(cross_entropy)

sess = tf.InteractiveSession()
tf.global_variables_initializer().run()

for _ in range(1000):
    batch_xs, batch_ys = mnist.train.next_batch(100)
    sess.run(train_step, feed_dict={x: batch_xs, y_: batch_ys})

correct_prediction = tf.equal(tf.argmax(y, 1), tf.argmax(y_, 1))
accuracy = tf.reduce_mean(tf.cast(correct_prediction, tf.float32))
print(
    "test accuracy %.6f"
    % sess.run(accuracy, feed_dict={x: mnist.test.images, y_: mnist.test.labels})
)
print(
    "final loss %.6f"
    % sess.run(cross_entropy, feed_dict={x: mnist.test.images, y_: mnist.test.labels})
)
