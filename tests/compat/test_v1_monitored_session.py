# ruff: noqa: E501 (the program and its printed output, verbatim)
"""`tf.train.MonitoredTrainingSession` and its hooks (keratron.compat.v1) against TensorFlow.

PROGRAM trains a linear model from a one-shot dataset twice in one checkpoint directory with
StopAtStepHook, NanTensorHook and a printing hook (the second session restores the first's
checkpoint), then runs to the end of input. PROGRAM_TF is what TensorFlow 2.20's
tf.compat.v1 printed for it (`test_program_under_tensorflow_prints_the_same` reruns it there).
"""

import contextlib
import io
import os
import subprocess
import sys

import pytest

import keratron.compat.v1 as tf
from tests import provenance
from tests.conftest import require_installed

KERATRON = "import keratron.compat.v1 as tf\n"
TENSORFLOW = """import tensorflow.compat.v1 as tf
from tensorflow.python.training import training_util
tf.disable_v2_behavior()
# CheckpointSaverHook's graph.pbtxt writer fails with this environment's protobuf
# (MessageToString lost `float_format`); the graph file is not part of the comparison.
training_util.write_graph = lambda *args, **kwargs: None
"""
PROGRAM = """import os, tempfile
import numpy as np
ckpt = tempfile.mkdtemp()
X = np.arange(24, dtype=np.float32).reshape(12, 2) / 10.0
Y = (X[:, :1] * 2.0 - X[:, 1:] + 0.5).astype(np.float32)

def build():
    step = tf.train.get_or_create_global_step()
    ds = tf.data.Dataset.from_tensor_slices((X, Y)).batch(4)
    x, y = tf.data.make_one_shot_iterator(ds).get_next()
    w = tf.get_variable("w", [2, 1], initializer=tf.zeros_initializer())
    b = tf.get_variable("b", [1], initializer=tf.zeros_initializer())
    loss = tf.losses.mean_squared_error(y, tf.matmul(x, w) + b)
    train = tf.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=step)
    return step, loss, train, w

class Printer(tf.train.SessionRunHook):
    def __init__(self, loss, step, w):
        self.loss, self.step, self.w = loss, step, w
    def begin(self):
        print("begin")
    def after_create_session(self, session, coord):
        print("created at step", session.run(self.step))
    def before_run(self, run_context):
        return tf.train.SessionRunArgs({"loss": self.loss, "step": self.step})
    def after_run(self, run_context, run_values):
        r = run_values.results
        print("step %d loss %.6f" % (r["step"], r["loss"]))
    def end(self, session):
        print("end at step", session.run(self.step))
        print("w", session.run(self.w).ravel().round(6).tolist())

for run in range(2):
    with tf.Graph().as_default():
        step, loss, train, w = build()
        hooks = [tf.train.StopAtStepHook(num_steps=2), Printer(loss, step, w), tf.train.NanTensorHook(loss)]
        with tf.train.MonitoredTrainingSession(checkpoint_dir=ckpt, hooks=hooks, save_checkpoint_steps=1, log_step_count_steps=0, save_summaries_steps=None) as sess:
            while not sess.should_stop():
                sess.run(train)
            try:
                sess.run(train)
            except RuntimeError as e:
                print(e)
        print("stopped", sess.should_stop())
    print("checkpoint", os.path.basename(tf.train.latest_checkpoint(ckpt)))
# the end of input stops the session without an error
with tf.Graph().as_default():
    step, loss, train, w = build()
    n = 0
    with tf.train.MonitoredTrainingSession(hooks=[tf.train.StopAtStepHook(last_step=100)]) as sess:
        while not sess.should_stop():
            sess.run(train)
            n += 1
    print("steps until end of input", n)
"""

# Printed by TensorFlow 2.20 (tf.compat.v1) for TENSORFLOW + PROGRAM.
PROGRAM_TF = """begin
created at step 0
step 1 loss 0.540000
step 2 loss 1.536093
Run called even after should_stop requested.
end at step 2
w [0.3300119936466217, 0.3684839904308319]
stopped True
checkpoint model.ckpt-2
begin
created at step 2
step 3 loss 0.009290
step 4 loss 0.081489
Run called even after should_stop requested.
end at step 4
w [0.4012260138988495, 0.4466400146484375]
stopped True
checkpoint model.ckpt-4
steps until end of input 3
"""


# The fingerprint (tests/provenance.py) of the program, its TensorFlow header and what
# TensorFlow printed, as `test_program_under_tensorflow_prints_the_same` last passed on them.
CHECKED = "3a9c859bb72de7b6"


def _assert_checked():
    provenance.assert_checked(
        CHECKED, "the program or its recording", "TensorFlow 2.20", TENSORFLOW, PROGRAM,
        PROGRAM_TF,
    )  # fmt: skip


def test_recording_was_checked_on_this_program():
    _assert_checked()


def _run(header, **environ):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", **environ)
    out = subprocess.run(
        [sys.executable, "-c", header + PROGRAM], env=env, capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout


def test_program_prints_what_tensorflow_printed():
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(KERATRON + PROGRAM, "<program>", "exec"), {"__name__": "__program__"})
    assert out.getvalue() == PROGRAM_TF


@pytest.mark.interop
@pytest.mark.slow
@pytest.mark.provenance
def test_program_under_tensorflow_prints_the_same():
    _assert_checked()
    # A subprocess: TensorFlow and triton must not share a process (both bundle LLVM).
    require_installed("tensorflow")
    assert _run(TENSORFLOW, KERAS_BACKEND="tensorflow") == PROGRAM_TF


@pytest.fixture
def graph():
    with tf.Graph().as_default() as g:
        yield g


def test_nan_loss_raises_and_hooks_see_added_feeds(graph):
    step = tf.train.get_or_create_global_step()
    x = tf.placeholder(tf.float32, [])
    loss = tf.log(x)
    train = tf.assign_add(step, 1)

    class Feed(tf.train.SessionRunHook):
        def before_run(self, run_context):
            return tf.train.SessionRunArgs(loss, feed_dict={x: -1.0})

    with pytest.raises(tf.train.NanLossDuringTrainingError):
        with tf.train.MonitoredTrainingSession(hooks=[Feed(), tf.train.NanTensorHook(loss)]) as s:
            s.run(train)


def test_hooks_that_feed_the_same_tensor_are_refused(graph):
    tf.train.get_or_create_global_step()
    x = tf.placeholder(tf.float32, [])

    class Feed(tf.train.SessionRunHook):
        def before_run(self, run_context):
            return tf.train.SessionRunArgs(None, feed_dict={x: 1.0})

    y = x * 2.0
    with tf.train.MonitoredTrainingSession(hooks=[Feed()]) as sess:
        with pytest.raises(ValueError, match="fed by two hooks"):
            sess.run(y, feed_dict={x: 3.0})


def test_hooks_without_a_global_step_and_bad_arguments_fail_clearly(graph):
    with pytest.raises(ValueError, match="num_steps or last_step"):
        tf.train.StopAtStepHook()
    with pytest.raises(RuntimeError, match="Global step should be created"):
        tf.train.MonitoredTrainingSession(hooks=[tf.train.StopAtStepHook(num_steps=1)])


def test_logging_tensor_hook_logs_every_n_iterations(graph, caplog):
    step = tf.train.get_or_create_global_step()
    train = tf.assign_add(step, 1)
    hook = tf.train.LoggingTensorHook({"step": step}, every_n_iter=2)
    with caplog.at_level(tf.logging.INFO, logger="tensorflow"):
        with tf.train.MonitoredTrainingSession(hooks=[hook], log_step_count_steps=0) as sess:
            for _ in range(5):
                sess.run(train)
    logged = [r.getMessage() for r in caplog.records if r.getMessage().startswith("step = ")]
    assert len(logged) == 3


def test_saver_keeps_a_variable_beside_its_moving_average(graph, tmp_path):
    # "v" and "v/ExponentialMovingAverage": one name is the other's parent path.
    v = tf.Variable([1.0, 2.0], name="v")
    ema = tf.train.ExponentialMovingAverage(0.5)
    update = ema.apply([v])
    saver = tf.train.Saver()
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        sess.run(tf.assign(v, [3.0, 6.0]))
        sess.run(update)
        path = saver.save(sess, str(tmp_path / "model.ckpt"), global_step=1)
    names = dict(tf.train.list_variables(path))
    assert names == {"v": [2], "v/ExponentialMovingAverage": [2]}
    with tf.Session() as sess:
        saver.restore(sess, path)
        assert sess.run(v).tolist() == [3.0, 6.0]
        assert sess.run(ema.average(v)).tolist() == [2.0, 4.0]
