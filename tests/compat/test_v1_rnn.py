"""`tf.nn.rnn_cell` and the RNN loops (keratron.compat.v1) against TensorFlow.

tf1_rnn_program.py builds each cell and loop with fixed weights and records variable names,
outputs, final states and gradients; tf1_rnn_tf.json is what TensorFlow printed for it (the
command is in the program's docstring). Here keratron runs the same program and must print the
same.
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
from tests.compat import tf1_rnn_program as program
from tests.conftest import require_installed

HERE = os.path.dirname(__file__)
with open(os.path.join(HERE, "tf1_rnn_tf.json")) as f:
    TF_OUT = json.load(f)
# The fingerprint (tests/provenance.py) of tf1_rnn_tf.json with tf1_rnn_program.py, as
# `test_recorded_numbers_are_tensorflows` last passed on them.
CHECKED = "8067a1511701e9eb"


def _assert_checked():
    provenance.assert_checked(
        CHECKED,
        "tests/compat/tf1_rnn_program.py or tf1_rnn_tf.json",
        "TensorFlow 2.20",
        Path(HERE, "tf1_rnn_tf.json"),
        Path(HERE, "tf1_rnn_program.py"),
    )


def test_recorded_numbers_were_checked_on_this_program():
    _assert_checked()


def _same(got, want, path):
    if isinstance(want, dict):
        assert sorted(got) == sorted(want), path
        for k in want:
            _same(got[k], want[k], f"{path}/{k}")
    elif path.endswith(("/values", "/grads")):
        assert len(got) == len(want), path
        for i, (g, w) in enumerate(zip(got, want)):
            np.testing.assert_allclose(
                np.asarray(g, float), np.asarray(w, float), rtol=1e-5, atol=2e-6,
                err_msg=f"{path}[{i}]",
            )  # fmt: skip
    else:
        assert got == want, path


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
        [sys.executable, os.path.join(HERE, "tf1_rnn_program.py"), "tf"],
        env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    _same(json.loads(out.stdout), TF_OUT, "")


@pytest.fixture
def graph():
    with tf.Graph().as_default() as g:
        yield g


def test_dynamic_rnn_runs_any_number_of_steps_and_matches_static_rnn(graph):
    x = tf.placeholder(tf.float32, [2, None, 3])
    cell = tf.nn.rnn_cell.GRUCell(4)
    out, state = tf.nn.dynamic_rnn(cell, x, dtype=tf.float32)
    xs = tf.placeholder(tf.float32, [2, 5, 3])
    outs, st = tf.nn.static_rnn(cell, tf.unstack(xs, axis=1), dtype=tf.float32)
    assert len(tf.global_variables()) == 4  # static_rnn reuses the cell's variables
    data = np.random.default_rng(0).normal(size=(2, 5, 3)).astype(np.float32)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        short = sess.run(out, {x: data[:, :2]})
        full, final, souts, sfinal = sess.run([out, state, outs, st], {x: data, xs: data})
    assert short.shape == (2, 2, 4) and full.shape == (2, 5, 4)
    np.testing.assert_allclose(short, full[:, :2], rtol=1e-6)
    np.testing.assert_allclose(np.stack(souts, 1), full, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(sfinal, final, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(final, full[:, -1], rtol=1e-6)


def test_dropout_wrapper_drops_outputs_with_a_fed_keep_prob(graph):
    keep = tf.placeholder_with_default(1.0, [])
    cell = tf.nn.rnn_cell.DropoutWrapper(
        tf.nn.rnn_cell.BasicRNNCell(400, activation=tf.nn.relu), output_keep_prob=keep, seed=1
    )
    x = tf.placeholder(tf.float32, [8, 3, 2])
    out, _ = tf.nn.dynamic_rnn(cell, x, dtype=tf.float32, initial_state=tf.ones([8, 400]) * 0.0)
    data = np.ones((8, 3, 2), np.float32)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        tf.global_variables()[1].load(np.full(400, 0.5, np.float32), sess)
        kept = sess.run(out, {x: data})
        dropped = sess.run(out, {x: data, keep: 0.6})
    live = kept > 0
    assert live.mean() > 0.5
    zero_fraction = (dropped[live] == 0).mean()
    assert abs(zero_fraction - 0.4) < 0.02
    np.testing.assert_allclose(dropped[dropped > 0], kept[dropped > 0] / 0.6, rtol=1e-5)


class MinimalCell(tf.nn.rnn_cell.RNNCell):
    """A user's cell defined the TF way (graph ops in call)."""

    @property
    def state_size(self):
        return 2

    @property
    def output_size(self):
        return 2

    def call(self, inputs, state):
        w = tf.get_variable("w", [3, 2], initializer=tf.ones_initializer())
        new = tf.tanh(tf.matmul(inputs, w) + state)
        return new, new


def test_a_cell_defined_by_its_call_runs_in_dynamic_rnn(graph):
    x = tf.placeholder(tf.float32, [1, 2, 3])
    out, state = tf.nn.dynamic_rnn(MinimalCell(), x, dtype=tf.float32)
    assert [v.name for v in tf.global_variables()] == ["rnn/minimal_cell/w:0"]
    data = np.array([[[0.1, 0.2, 0.3], [0.0, -0.5, 0.2]]], np.float32)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        got = sess.run(out, {x: data})
    h1 = np.tanh(np.full(2, 0.6))
    h2 = np.tanh(np.full(2, -0.3) + h1)
    np.testing.assert_allclose(got[0], [h1, h2], rtol=1e-6)


@pytest.mark.parametrize(
    "build,match",
    [
        (lambda x: tf.nn.dynamic_rnn(tf.nn.rnn_cell.GRUCell(2), x), "dtype"),
        (lambda x: tf.nn.rnn_cell.BasicLSTMCell(0), "num_units"),
        (lambda x: tf.nn.dynamic_rnn(tf.nn.rnn_cell.GRUCell(2), x[0], dtype=tf.float32), "rank"),
        (
            lambda x: tf.nn.dynamic_rnn(
                tf.nn.rnn_cell.GRUCell(2),
                tf.placeholder(tf.float32, [1, 2, None]),
                dtype=tf.float32,
            ),
            "last dimension",
        ),
        (lambda x: tf.nn.rnn_cell.DropoutWrapper(tf.nn.rnn_cell.GRUCell(2), 1.5), "keep_prob"),
        (
            lambda x: tf.nn.rnn_cell.DropoutWrapper(
                tf.nn.rnn_cell.GRUCell(2), variational_recurrent=True
            ),
            "dtype",
        ),
        (
            lambda x: tf.nn.rnn_cell.DropoutWrapper(
                tf.nn.rnn_cell.GRUCell(2), 0.5, variational_recurrent=True, dtype=tf.float32
            ),
            "input_size",
        ),
        (lambda x: tf.nn.rnn_cell.MultiRNNCell([]), "at least one"),
        (lambda x: tf.nn.rnn_cell.MultiRNNCell([MinimalCell()]), "own call"),
        (lambda x: tf.nn.static_rnn(tf.nn.rnn_cell.GRUCell(2), x, dtype=tf.float32), "list"),
    ],
)
def test_bad_arguments_raise_clear_errors(graph, build, match):
    x = tf.placeholder(tf.float32, [2, 3, 4])
    with pytest.raises((ValueError, TypeError), match=match):
        build(x)


def test_residual_wrapper_needs_matching_sizes_and_the_default_residual(graph):
    x = tf.placeholder(tf.float32, [2, 3, 4])
    with pytest.raises(ValueError, match="input depth"):
        tf.nn.dynamic_rnn(
            tf.nn.rnn_cell.ResidualWrapper(tf.nn.rnn_cell.GRUCell(3)), x, dtype=tf.float32
        )
    with pytest.raises(ValueError, match="residual_fn"):
        tf.nn.rnn_cell.ResidualWrapper(tf.nn.rnn_cell.GRUCell(4), residual_fn=lambda i, o: o)


def test_zero_state_of_a_dynamic_batch_follows_the_fed_batch(graph):
    x = tf.placeholder(tf.float32, [None, 3, 2])
    cell = tf.nn.rnn_cell.BasicLSTMCell(4)
    init = cell.get_initial_state(inputs=x[:, 0, :])
    out, state = tf.nn.dynamic_rnn(cell, x, initial_state=init)
    assert init.c.shape.as_list() == [None, 4]
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        zeros, h = sess.run([init.h, state.h], {x: np.ones((5, 3, 2), np.float32)})
    np.testing.assert_array_equal(zeros, np.zeros((5, 4)))
    assert h.shape == (5, 4) and np.abs(h).sum() > 0


def test_zero_state_of_a_fed_batch_size_feeds_dynamic_rnn(graph):
    batch = tf.placeholder(tf.int32, [])
    x = tf.placeholder(tf.float32, [None, 3, 2])
    cell = tf.nn.rnn_cell.MultiRNNCell([tf.nn.rnn_cell.GRUCell(3), tf.nn.rnn_cell.GRUCell(2)])
    out, state = tf.nn.dynamic_rnn(cell, x, initial_state=cell.zero_state(batch, tf.float32))
    plain, _ = tf.nn.dynamic_rnn(cell, x, dtype=tf.float32)
    data = np.random.default_rng(1).normal(size=(4, 3, 2)).astype(np.float32)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        got, want = sess.run([out, plain], {x: data, batch: 4})
        np.testing.assert_allclose(got, want, rtol=1e-6)
        with pytest.raises(ValueError, match="batch_size"):
            sess.run(cell.zero_state(batch, tf.float32), {batch: 4})


def test_variational_dropout_keeps_one_mask_for_all_steps_and_examples(graph):
    cell = tf.nn.rnn_cell.DropoutWrapper(
        tf.nn.rnn_cell.BasicLSTMCell(300), input_keep_prob=0.5, output_keep_prob=0.7,
        state_keep_prob=0.8, variational_recurrent=True, input_size=400, dtype=tf.float32,
        seed=2,
    )  # fmt: skip
    x = tf.placeholder(tf.float32, [3, 4, 400])
    out, _ = tf.nn.dynamic_rnn(cell, x, dtype=tf.float32)
    xs = tf.unstack(x, axis=1)
    outs, _ = tf.nn.static_rnn(cell, xs, dtype=tf.float32)
    data = np.ones((3, 4, 400), np.float32)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        k = np.abs(np.random.default_rng(0).normal(size=(700, 1200))).astype(np.float32)
        tf.global_variables()[0].load(k * 0.05, sess)
        first, static = sess.run([out, outs], {x: data})
        second = sess.run(out, {x: data})
    dropped = first == 0
    assert abs(dropped.mean() - 0.3) < 0.05
    # One output mask for every step and example within a run ...
    assert (dropped == dropped[:1, :1]).all()
    np.testing.assert_array_equal(
        np.stack(static, 1) == 0, np.broadcast_to(dropped[:1, :1], (3, 4, 300))
    )
    # ... and a new one in the next run.
    assert ((second == 0) != dropped).any()
