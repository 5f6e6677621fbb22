# ruff: noqa: UP031, E501, B007 (the tutorial's own %-formatting, lines and loop)
"""TensorFlow Mechanics 101 (TF 1.x documentation): `mnist.py`'s inference / loss / training /
evaluation and `fully_connected_feed.py`'s feed-dict training loop with summaries, checkpoints
and evaluation, in one file. Only the import line, the data source (the bundled 8x8 digits:
64 pixels, 1,200 train / 300 validation / 297 test images), a graph seed, the flags (a fixed
namespace instead of argparse and tf.app.run) and a temporary log directory differ from the
original."""

import argparse
import math
import os
import tempfile
import time

import digits_data

import keratron.compat.v1 as tf

# ----------------------------------------------------------------------------- mnist.py
NUM_CLASSES = 10
IMAGE_SIZE = 8
IMAGE_PIXELS = IMAGE_SIZE * IMAGE_SIZE


def inference(images, hidden1_units, hidden2_units):
    """Build the MNIST model up to where it may be used for inference."""
    # Hidden 1
    with tf.name_scope("hidden1"):
        weights = tf.Variable(
            tf.truncated_normal(
                [IMAGE_PIXELS, hidden1_units], stddev=1.0 / math.sqrt(float(IMAGE_PIXELS))
            ),
            name="weights",
        )
        biases = tf.Variable(tf.zeros([hidden1_units]), name="biases")
        hidden1 = tf.nn.relu(tf.matmul(images, weights) + biases)
    # Hidden 2
    with tf.name_scope("hidden2"):
        weights = tf.Variable(
            tf.truncated_normal(
                [hidden1_units, hidden2_units], stddev=1.0 / math.sqrt(float(hidden1_units))
            ),
            name="weights",
        )
        biases = tf.Variable(tf.zeros([hidden2_units]), name="biases")
        hidden2 = tf.nn.relu(tf.matmul(hidden1, weights) + biases)
    # Linear
    with tf.name_scope("softmax_linear"):
        weights = tf.Variable(
            tf.truncated_normal(
                [hidden2_units, NUM_CLASSES], stddev=1.0 / math.sqrt(float(hidden2_units))
            ),
            name="weights",
        )
        biases = tf.Variable(tf.zeros([NUM_CLASSES]), name="biases")
        logits = tf.matmul(hidden2, weights) + biases
    return logits


def loss(logits, labels):
    """Calculates the loss from the logits and the labels."""
    labels = tf.to_int64(labels)
    return tf.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)


def training(loss, learning_rate):
    """Sets up the training Ops."""
    tf.summary.scalar("loss", loss)
    optimizer = tf.train.GradientDescentOptimizer(learning_rate)
    global_step = tf.Variable(0, name="global_step", trainable=False)
    train_op = optimizer.minimize(loss, global_step=global_step)
    return train_op


def evaluation(logits, labels):
    """Evaluate the quality of the logits at predicting the label."""
    correct = tf.nn.in_top_k(logits, labels, 1)
    return tf.reduce_sum(tf.cast(correct, tf.int32))


# ----------------------------------------------------------------------------- fully_connected_feed.py
FLAGS = argparse.Namespace(
    learning_rate=0.01,
    max_steps=2000,
    hidden1=128,
    hidden2=32,
    batch_size=100,
    log_dir=os.path.join(tempfile.mkdtemp(), "logs", "fully_connected_feed"),
)


def read_data_sets():
    data = digits_data.read_data_sets(one_hot=False)
    images, labels = data.train.images, data.train.labels.astype("int32")
    data.validation = digits_data.DataSet(images[1200:], labels[1200:])
    data.train = digits_data.DataSet(images[:1200], labels[:1200])
    data.test = digits_data.DataSet(data.test.images, data.test.labels.astype("int32"))
    return data


def placeholder_inputs(batch_size):
    images_placeholder = tf.placeholder(tf.float32, shape=(batch_size, IMAGE_PIXELS))
    labels_placeholder = tf.placeholder(tf.int32, shape=(batch_size))
    return images_placeholder, labels_placeholder


def fill_feed_dict(data_set, images_pl, labels_pl):
    images_feed, labels_feed = data_set.next_batch(FLAGS.batch_size)
    feed_dict = {
        images_pl: images_feed,
        labels_pl: labels_feed,
    }
    return feed_dict


def do_eval(sess, eval_correct, images_placeholder, labels_placeholder, data_set):
    """Runs one evaluation against the full epoch of data."""
    true_count = 0  # Counts the number of correct predictions.
    steps_per_epoch = data_set.num_examples // FLAGS.batch_size
    num_examples = steps_per_epoch * FLAGS.batch_size
    for step in range(steps_per_epoch):
        feed_dict = fill_feed_dict(data_set, images_placeholder, labels_placeholder)
        true_count += sess.run(eval_correct, feed_dict=feed_dict)
    precision = float(true_count) / num_examples
    print(
        "Num examples: %d  Num correct: %d  Precision @ 1: %0.04f"
        % (num_examples, true_count, precision)
    )


def run_training():
    """Train MNIST for a number of steps."""
    data_sets = read_data_sets()

    with tf.Graph().as_default():
        tf.set_random_seed(0)
        images_placeholder, labels_placeholder = placeholder_inputs(FLAGS.batch_size)
        logits = inference(images_placeholder, FLAGS.hidden1, FLAGS.hidden2)
        loss_op = loss(logits, labels_placeholder)
        train_op = training(loss_op, FLAGS.learning_rate)
        eval_correct = evaluation(logits, labels_placeholder)
        summary = tf.summary.merge_all()
        init = tf.global_variables_initializer()
        saver = tf.train.Saver()
        sess = tf.Session()
        summary_writer = tf.summary.FileWriter(FLAGS.log_dir, sess.graph)
        sess.run(init)

        for step in range(FLAGS.max_steps):
            start_time = time.time()
            feed_dict = fill_feed_dict(data_sets.train, images_placeholder, labels_placeholder)
            _, loss_value = sess.run([train_op, loss_op], feed_dict=feed_dict)
            duration = time.time() - start_time

            if step % 100 == 0:
                print("Step %d: loss = %.2f (%.3f sec)" % (step, loss_value, duration))
                summary_str = sess.run(summary, feed_dict=feed_dict)
                summary_writer.add_summary(summary_str, step)
                summary_writer.flush()

            if (step + 1) % 1000 == 0 or (step + 1) == FLAGS.max_steps:
                checkpoint_file = os.path.join(FLAGS.log_dir, "model.ckpt")
                saver.save(sess, checkpoint_file, global_step=step)
                print("Training Data Eval:")
                do_eval(sess, eval_correct, images_placeholder, labels_placeholder, data_sets.train)
                print("Validation Data Eval:")
                do_eval(
                    sess, eval_correct, images_placeholder, labels_placeholder, data_sets.validation
                )
                print("Test Data Eval:")
                do_eval(sess, eval_correct, images_placeholder, labels_placeholder, data_sets.test)


run_training()
