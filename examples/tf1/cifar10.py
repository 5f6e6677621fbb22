# ruff: noqa: UP031, E501 (the tutorial's own %-formatting and lines)
"""TensorFlow's CIFAR-10 tutorial (TF 1.x models/tutorials/image/cifar10): `cifar10_input`'s
distorted training input (a FixedLengthRecordReader over the binary batches, random crop to
24x24, flip, brightness, contrast, per-image standardization, shuffle_batch on queue-runner
threads) and `cifar10`'s model (conv1 / pool1 / norm1 / conv2 / norm2 / pool2 / local3 / local4
/ softmax_linear with weight decay), loss, and train op (exponential learning-rate decay, loss
and variable moving averages), trained by `cifar10_train`'s MonitoredTrainingSession loop with
its StopAtStepHook, NanTensorHook and logging hook.

Only the import line, the data (a synthetic data_batch_1.bin of 512 random 32x32x3 images in
CIFAR-10's binary format, written to a temporary directory), a graph seed, the flags (a fixed
namespace, 4 steps, temporary directories), no `config=tf.ConfigProto(...)`, a smaller minimum
queue and no `tf.summary.image` of the input batch differ from the original. It prints the
number of trainable parameters (1,068,298) and the loss of each step; at step 0 the loss is
the cross-entropy (about ln 10) plus the weight decay of local3 and local4 (about 2.38), near
4.68.
"""

import argparse
import os
import re
import tempfile
import time
from datetime import datetime

import numpy as np

import keratron.compat.v1 as tf

FLAGS = argparse.Namespace(
    batch_size=128,
    data_dir=tempfile.mkdtemp(),
    train_dir=tempfile.mkdtemp(),
    use_fp16=False,
    max_steps=4,
    log_frequency=1,
)

# ----------------------------------------------------------------------------- cifar10_input.py
IMAGE_SIZE = 24
NUM_CLASSES = 10
NUM_EXAMPLES_PER_EPOCH_FOR_TRAIN = 50000
NUM_EXAMPLES_PER_EPOCH_FOR_EVAL = 10000


def read_cifar10(filename_queue):
    """Reads and parses examples from CIFAR10 data files."""

    class CIFAR10Record:
        pass

    result = CIFAR10Record()
    label_bytes = 1  # 2 for CIFAR-100
    result.height = 32
    result.width = 32
    result.depth = 3
    image_bytes = result.height * result.width * result.depth
    record_bytes = label_bytes + image_bytes
    reader = tf.FixedLengthRecordReader(record_bytes=record_bytes)
    result.key, value = reader.read(filename_queue)
    record_bytes = tf.decode_raw(value, tf.uint8)
    result.label = tf.cast(tf.strided_slice(record_bytes, [0], [label_bytes]), tf.int32)
    depth_major = tf.reshape(
        tf.strided_slice(record_bytes, [label_bytes], [label_bytes + image_bytes]),
        [result.depth, result.height, result.width],
    )
    result.uint8image = tf.transpose(depth_major, [1, 2, 0])
    return result


def _generate_image_and_label_batch(image, label, min_queue_examples, batch_size, shuffle):
    """Construct a queued batch of images and labels."""
    num_preprocess_threads = 2
    if shuffle:
        images, label_batch = tf.train.shuffle_batch(
            [image, label],
            batch_size=batch_size,
            num_threads=num_preprocess_threads,
            capacity=min_queue_examples + 3 * batch_size,
            min_after_dequeue=min_queue_examples,
        )
    else:
        images, label_batch = tf.train.batch(
            [image, label],
            batch_size=batch_size,
            num_threads=num_preprocess_threads,
            capacity=min_queue_examples + 3 * batch_size,
        )
    return images, tf.reshape(label_batch, [batch_size])


def distorted_inputs(data_dir, batch_size):
    """Construct distorted input for CIFAR training using the Reader ops."""
    filenames = [os.path.join(data_dir, "data_batch_%d.bin" % i) for i in range(1, 2)]
    for f in filenames:
        if not os.path.exists(f):
            raise ValueError("Failed to find file: " + f)

    with tf.name_scope("data_augmentation"):
        filename_queue = tf.train.string_input_producer(filenames)
        read_input = read_cifar10(filename_queue)
        reshaped_image = tf.cast(read_input.uint8image, tf.float32)
        height = IMAGE_SIZE
        width = IMAGE_SIZE
        distorted_image = tf.random_crop(reshaped_image, [height, width, 3])
        distorted_image = tf.image.random_flip_left_right(distorted_image)
        distorted_image = tf.image.random_brightness(distorted_image, max_delta=63)
        distorted_image = tf.image.random_contrast(distorted_image, lower=0.2, upper=1.8)
        float_image = tf.image.per_image_standardization(distorted_image)
        float_image.set_shape([height, width, 3])
        read_input.label.set_shape([1])
        min_fraction_of_examples_in_queue = 0.4
        min_queue_examples = int(
            NUM_EXAMPLES_PER_EPOCH_FOR_TRAIN * min_fraction_of_examples_in_queue
        )
        # The synthetic data has 512 images: the queue holds at most a quarter of them.
        min_queue_examples = min(min_queue_examples, 128)
        print(
            "Filling queue with %d CIFAR images before starting to train. This will take a few minutes."
            % min_queue_examples
        )

    return _generate_image_and_label_batch(
        float_image, read_input.label, min_queue_examples, batch_size, shuffle=True
    )


# ----------------------------------------------------------------------------- cifar10.py
MOVING_AVERAGE_DECAY = 0.9999
NUM_EPOCHS_PER_DECAY = 350.0
LEARNING_RATE_DECAY_FACTOR = 0.1
INITIAL_LEARNING_RATE = 0.1
TOWER_NAME = "tower"


def _activation_summary(x):
    tensor_name = re.sub("%s_[0-9]*/" % TOWER_NAME, "", x.op.name)
    tf.summary.histogram(tensor_name + "/activations", x)
    tf.summary.scalar(tensor_name + "/sparsity", tf.nn.zero_fraction(x))


def _variable_on_cpu(name, shape, initializer):
    with tf.device("/cpu:0"):
        dtype = tf.float16 if FLAGS.use_fp16 else tf.float32
        var = tf.get_variable(name, shape, initializer=initializer, dtype=dtype)
    return var


def _variable_with_weight_decay(name, shape, stddev, wd):
    dtype = tf.float16 if FLAGS.use_fp16 else tf.float32
    var = _variable_on_cpu(name, shape, tf.truncated_normal_initializer(stddev=stddev, dtype=dtype))
    if wd is not None:
        weight_decay = tf.multiply(tf.nn.l2_loss(var), wd, name="weight_loss")
        tf.add_to_collection("losses", weight_decay)
    return var


def inference(images):
    """Build the CIFAR-10 model."""
    # conv1
    with tf.variable_scope("conv1") as scope:
        kernel = _variable_with_weight_decay("weights", shape=[5, 5, 3, 64], stddev=5e-2, wd=None)
        conv = tf.nn.conv2d(images, kernel, [1, 1, 1, 1], padding="SAME")
        biases = _variable_on_cpu("biases", [64], tf.constant_initializer(0.0))
        pre_activation = tf.nn.bias_add(conv, biases)
        conv1 = tf.nn.relu(pre_activation, name=scope.name)
        _activation_summary(conv1)

    # pool1
    pool1 = tf.nn.max_pool(
        conv1, ksize=[1, 3, 3, 1], strides=[1, 2, 2, 1], padding="SAME", name="pool1"
    )
    # norm1
    norm1 = tf.nn.lrn(pool1, 4, bias=1.0, alpha=0.001 / 9.0, beta=0.75, name="norm1")

    # conv2
    with tf.variable_scope("conv2") as scope:
        kernel = _variable_with_weight_decay("weights", shape=[5, 5, 64, 64], stddev=5e-2, wd=None)
        conv = tf.nn.conv2d(norm1, kernel, [1, 1, 1, 1], padding="SAME")
        biases = _variable_on_cpu("biases", [64], tf.constant_initializer(0.1))
        pre_activation = tf.nn.bias_add(conv, biases)
        conv2 = tf.nn.relu(pre_activation, name=scope.name)
        _activation_summary(conv2)

    # norm2
    norm2 = tf.nn.lrn(conv2, 4, bias=1.0, alpha=0.001 / 9.0, beta=0.75, name="norm2")
    # pool2
    pool2 = tf.nn.max_pool(
        norm2, ksize=[1, 3, 3, 1], strides=[1, 2, 2, 1], padding="SAME", name="pool2"
    )

    # local3
    with tf.variable_scope("local3") as scope:
        reshape = tf.reshape(pool2, [images.get_shape().as_list()[0], -1])
        dim = reshape.get_shape().as_list()[1]
        weights = _variable_with_weight_decay("weights", shape=[dim, 384], stddev=0.04, wd=0.004)
        biases = _variable_on_cpu("biases", [384], tf.constant_initializer(0.1))
        local3 = tf.nn.relu(tf.matmul(reshape, weights) + biases, name=scope.name)
        _activation_summary(local3)

    # local4
    with tf.variable_scope("local4") as scope:
        weights = _variable_with_weight_decay("weights", shape=[384, 192], stddev=0.04, wd=0.004)
        biases = _variable_on_cpu("biases", [192], tf.constant_initializer(0.1))
        local4 = tf.nn.relu(tf.matmul(local3, weights) + biases, name=scope.name)
        _activation_summary(local4)

    # linear layer(WX + b),
    with tf.variable_scope("softmax_linear") as scope:
        weights = _variable_with_weight_decay(
            "weights", [192, NUM_CLASSES], stddev=1 / 192.0, wd=None
        )
        biases = _variable_on_cpu("biases", [NUM_CLASSES], tf.constant_initializer(0.0))
        softmax_linear = tf.add(tf.matmul(local4, weights), biases, name=scope.name)
        _activation_summary(softmax_linear)

    return softmax_linear


def loss(logits, labels):
    """Add L2Loss to all the trainable variables."""
    labels = tf.cast(labels, tf.int64)
    cross_entropy = tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=labels, logits=logits, name="cross_entropy_per_example"
    )
    cross_entropy_mean = tf.reduce_mean(cross_entropy, name="cross_entropy")
    tf.add_to_collection("losses", cross_entropy_mean)
    return tf.add_n(tf.get_collection("losses"), name="total_loss")


def _add_loss_summaries(total_loss):
    loss_averages = tf.train.ExponentialMovingAverage(0.9, name="avg")
    losses = tf.get_collection("losses")
    loss_averages_op = loss_averages.apply(losses + [total_loss])
    for l in losses + [total_loss]:  # noqa: E741
        tf.summary.scalar(l.op.name + " (raw)", l)
        tf.summary.scalar(l.op.name, loss_averages.average(l))
    return loss_averages_op


def train(total_loss, global_step):
    """Train CIFAR-10 model."""
    num_batches_per_epoch = NUM_EXAMPLES_PER_EPOCH_FOR_TRAIN / FLAGS.batch_size
    decay_steps = int(num_batches_per_epoch * NUM_EPOCHS_PER_DECAY)

    lr = tf.train.exponential_decay(
        INITIAL_LEARNING_RATE, global_step, decay_steps, LEARNING_RATE_DECAY_FACTOR, staircase=True
    )
    tf.summary.scalar("learning_rate", lr)

    loss_averages_op = _add_loss_summaries(total_loss)

    with tf.control_dependencies([loss_averages_op]):
        opt = tf.train.GradientDescentOptimizer(lr)
        grads = opt.compute_gradients(total_loss)

    apply_gradient_op = opt.apply_gradients(grads, global_step=global_step)

    for var in tf.trainable_variables():
        tf.summary.histogram(var.op.name, var)

    for grad, var in grads:
        if grad is not None:
            tf.summary.histogram(var.op.name + "/gradients", grad)

    variable_averages = tf.train.ExponentialMovingAverage(MOVING_AVERAGE_DECAY, global_step)
    with tf.control_dependencies([apply_gradient_op]):
        variables_averages_op = variable_averages.apply(tf.trainable_variables())

    return variables_averages_op


# ----------------------------------------------------------------------------- the data and cifar10_train.py
def write_synthetic_batch(path, n=512, seed=0):
    rng = np.random.RandomState(seed)
    labels = rng.randint(0, NUM_CLASSES, size=(n, 1)).astype(np.uint8)
    images = rng.randint(0, 256, size=(n, 3 * 32 * 32)).astype(np.uint8)
    with open(path, "wb") as f:
        f.write(np.concatenate([labels, images], axis=1).tobytes())


def train_cifar10():
    """Train CIFAR-10 for a number of steps (cifar10_train.train)."""
    write_synthetic_batch(os.path.join(FLAGS.data_dir, "data_batch_1.bin"))
    with tf.Graph().as_default():
        tf.set_random_seed(0)
        global_step = tf.train.get_or_create_global_step()

        # Force input pipeline to CPU:0 to avoid operations sometimes ending up on GPU and
        # resulting in a slow down.
        with tf.device("/cpu:0"):
            images, labels = distorted_inputs(FLAGS.data_dir, FLAGS.batch_size)

        logits = inference(images)
        loss_op = loss(logits, labels)
        train_op = train(loss_op, global_step)
        n_params = sum(int(np.prod(v.shape.as_list())) for v in tf.trainable_variables())
        print("trainable parameters: %d" % n_params)

        class _LoggerHook(tf.train.SessionRunHook):
            """Logs loss and runtime."""

            def begin(self):
                self._step = -1
                self._start_time = time.time()

            def before_run(self, run_context):
                self._step += 1
                return tf.train.SessionRunArgs(loss_op)  # Asks for loss value.

            def after_run(self, run_context, run_values):
                if self._step % FLAGS.log_frequency == 0:
                    current_time = time.time()
                    duration = current_time - self._start_time
                    self._start_time = current_time

                    loss_value = run_values.results
                    examples_per_sec = FLAGS.log_frequency * FLAGS.batch_size / duration
                    sec_per_batch = float(duration / FLAGS.log_frequency)

                    format_str = "%s: step %d, loss = %.2f (%.1f examples/sec; %.3f sec/batch)"
                    print(
                        format_str
                        % (datetime.now(), self._step, loss_value, examples_per_sec, sec_per_batch)
                    )

        with tf.train.MonitoredTrainingSession(
            checkpoint_dir=FLAGS.train_dir,
            hooks=[
                tf.train.StopAtStepHook(last_step=FLAGS.max_steps),
                tf.train.NanTensorHook(loss_op),
                _LoggerHook(),
            ],
        ) as mon_sess:
            while not mon_sess.should_stop():
                mon_sess.run(train_op)


train_cifar10()
