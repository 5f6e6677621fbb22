"""`tf.layers`, `tf.losses` and `tf.metrics` (keratron.compat.v1) against TensorFlow.

tf1_layers_losses_metrics_program.py is one TF1 program (variable names under scopes and
reuse, layer outputs and gradients, batch-norm moving statistics, every loss and reduction,
streaming metrics over two batches); tf1_layers_losses_metrics_tf.json is what TensorFlow
printed for it (the command is in the program's docstring). Here keratron runs the same
program and must print the same.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import keratron.compat.v1 as tf
from tests import provenance
from tests.compat import tf1_layers_losses_metrics_program as program
from tests.conftest import require_installed

HERE = os.path.dirname(__file__)
with open(os.path.join(HERE, "tf1_layers_losses_metrics_tf.json")) as f:
    TF_OUT = json.load(f)
# The fingerprint (tests/provenance.py) of tf1_layers_losses_metrics_tf.json with its program,
# as `test_recorded_numbers_are_tensorflows` last passed on them.
CHECKED = "eebe54f29348e6b9"


def _assert_checked():
    provenance.assert_checked(
        CHECKED,
        "tests/compat/tf1_layers_losses_metrics_program.py or tf1_layers_losses_metrics_tf.json",
        "TensorFlow 2.20",
        Path(HERE, "tf1_layers_losses_metrics_tf.json"),
        Path(HERE, "tf1_layers_losses_metrics_program.py"),
    )


def test_recorded_numbers_were_checked_on_this_program():
    _assert_checked()


def _same(got, want, path):
    if isinstance(want, dict):
        assert sorted(got) == sorted(want), path
        for k in want:
            _same(got[k], want[k], f"{path}/{k}")
    elif isinstance(want, str) or (isinstance(want, list) and want and isinstance(want[0], str)):
        assert got == want, path
    elif (
        isinstance(want, list) and want and isinstance(want[0], (dict, list)) and not _numeric(want)
    ):
        assert len(got) == len(want), path
        for i, (g, w) in enumerate(zip(got, want)):
            _same(g, w, f"{path}[{i}]")
    elif want is None or (isinstance(want, list) and None in want):
        assert got == want, path
    else:
        np.testing.assert_allclose(
            np.asarray(got, float), np.asarray(want, float), rtol=1e-5, atol=2e-6, err_msg=path
        )


def _numeric(x):
    try:
        np.asarray(x, float)
        return True
    except (ValueError, TypeError):
        return False


@pytest.fixture(scope="module")
def keratron_out():
    return program.run(tf)


@pytest.mark.parametrize("key", sorted(TF_OUT))
def test_program_prints_what_tensorflow_printed(keratron_out, key):
    _same(keratron_out[key], TF_OUT[key], key)


@pytest.mark.interop
@pytest.mark.slow
@pytest.mark.provenance
def test_recorded_numbers_are_tensorflows():
    _assert_checked()
    # TensorFlow and triton must not share a process (both bundle LLVM): a subprocess runs it.
    require_installed("tensorflow")
    env = dict(
        os.environ, TF_USE_LEGACY_KERAS="1", KERAS_BACKEND="tensorflow", TF_CPP_MIN_LOG_LEVEL="3"
    )
    out = subprocess.run(
        [sys.executable, os.path.join(HERE, "tf1_layers_losses_metrics_program.py"), "tf"],
        env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    _same(json.loads(out.stdout), TF_OUT, "")


@pytest.fixture
def graph():
    with tf.Graph().as_default() as g:
        yield g


def test_dropout_scales_kept_units_and_is_identity_when_not_training(graph):
    x = tf.placeholder(tf.float32, [None, 1000])
    flag = tf.placeholder(tf.bool, [])
    y = tf.layers.dropout(x, rate=0.25, training=flag, seed=3)
    off = tf.layers.dropout(x, rate=0.25)
    ones = np.ones((4, 1000), np.float32)
    with tf.Session() as sess:
        on, same, ident = sess.run([y, off, y], {x: ones, flag: True})[:1] + sess.run(
            [off, y], {x: ones, flag: False}
        )
    assert set(np.unique(on)) <= {0.0, np.float32(1 / 0.75)}
    assert abs((on == 0).mean() - 0.25) < 0.03
    np.testing.assert_array_equal(same, ones)
    np.testing.assert_array_equal(ident, ones)


def test_batch_norm_without_training_adds_no_update_ops(graph):
    x = tf.placeholder(tf.float32, [None, 3])
    tf.layers.batch_normalization(x)
    assert tf.get_collection(tf.GraphKeys.UPDATE_OPS) == []
    tf.layers.batch_normalization(x, training=True)
    assert len(tf.get_collection(tf.GraphKeys.UPDATE_OPS)) == 2


def test_layer_object_shares_its_variables_across_calls(graph):
    layer = tf.layers.Conv2D(2, 3, name="shared")
    a = layer(tf.placeholder(tf.float32, [None, 6, 6, 1]))
    b = layer(tf.placeholder(tf.float32, [None, 8, 8, 1]))
    assert [v.name for v in layer.variables] == ["shared/kernel:0", "shared/bias:0"]
    assert len(tf.global_variables()) == 2
    assert a.shape.as_list() == [None, 4, 4, 2] and b.shape.as_list() == [None, 6, 6, 2]


def test_layer_regularizer_goes_to_regularization_losses(graph):
    x = tf.placeholder(tf.float32, [None, 2])
    tf.layers.dense(x, 3, kernel_initializer=tf.ones_initializer(),
                    kernel_regularizer=lambda w: tf.reduce_sum(w) * 0.5)  # fmt: skip
    reg = tf.losses.get_regularization_loss()
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        assert sess.run(reg) == pytest.approx(3.0)


@pytest.mark.parametrize(
    "build,match",
    [
        (lambda x: tf.layers.dense(x, 0), "units"),
        (lambda x: tf.layers.conv2d(tf.reshape(x, [-1, 2, 2, 1]), 2, 1, padding="full"), "padding"),
        (
            lambda x: tf.layers.max_pooling2d(tf.reshape(x, [-1, 2, 2, 1]), (2, 2, 2), 1),
            "pool_size",
        ),
        (lambda x: tf.layers.dense(tf.placeholder(tf.float32), 2), "last dimension"),
        (lambda x: tf.layers.dropout(x, rate=1.5), "rate"),
        (lambda x: tf.losses.mean_squared_error(x, x, reduction="avg"), "Reduction"),
        (lambda x: tf.losses.mean_squared_error(x, x, weights=[1.0, 2.0, 3.0]), "broadcast"),
        (lambda x: tf.losses.absolute_difference(x, tf.zeros([3, 5])), "incompatible"),
        (lambda x: tf.metrics.auc(x > 0, x, curve="DET"), "curve"),
        (lambda x: tf.metrics.accuracy(x, tf.zeros([2, 5])), "compatible"),
    ],
)
def test_bad_arguments_raise_clear_errors(graph, build, match):
    x = tf.placeholder(tf.float32, [None, 4])
    with pytest.raises((ValueError, TypeError), match=match):
        build(x)


def test_update_ops_run_with_the_train_op_that_depends_on_them(graph):
    # The TF1 idiom: the moving statistics move only when the train op depends on UPDATE_OPS.
    x = tf.placeholder(tf.float32, [None, 2])
    h = tf.layers.batch_normalization(tf.layers.dense(x, 2), training=True, momentum=0.75)
    loss = tf.reduce_mean(tf.square(h - 1.0))
    plain = tf.train.GradientDescentOptimizer(0.1).minimize(loss)
    with tf.control_dependencies(tf.get_collection(tf.GraphKeys.UPDATE_OPS)):
        with_updates = tf.train.GradientDescentOptimizer(0.1).minimize(loss)
    mean = [v for v in tf.global_variables() if "moving_mean" in v.name][0]
    pre_bn = tf.get_default_graph().get_tensor_by_name("dense/BiasAdd:0")
    data = np.array([[1.0, 2.0], [3.0, -1.0], [0.5, 0.5]], np.float32)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        sess.run(plain, {x: data})
        np.testing.assert_array_equal(sess.run(mean), [0.0, 0.0])
        batch_mean = sess.run(pre_bn, {x: data}).mean(axis=0)
        sess.run(with_updates, {x: data})
        np.testing.assert_allclose(sess.run(mean), 0.25 * batch_mean, rtol=1e-5, atol=1e-6)
