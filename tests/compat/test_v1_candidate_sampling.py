"""`tf.nn.nce_loss`, `tf.nn.sampled_softmax_loss` and the candidate samplers
(keratron.compat.v1) against TensorFlow.

tf1_sampled_program.py computes the losses and their gradients on fixed sampled values, and
the samplers' draw-independent expected counts; tf1_sampled_tf.json is what TensorFlow printed
for it (the command is in the program's docstring). The samplers' draws are checked
statistically against TF's distributions.
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
from tests.compat import tf1_sampled_program as program
from tests.conftest import require_installed

HERE = os.path.dirname(__file__)
with open(os.path.join(HERE, "tf1_sampled_tf.json")) as f:
    TF_OUT = json.load(f)
# The fingerprint (tests/provenance.py) of tf1_sampled_tf.json with tf1_sampled_program.py, as
# `test_recorded_numbers_are_tensorflows` last passed on them.
CHECKED = "179ccb0e3bcd41c2"


def _assert_checked():
    provenance.assert_checked(
        CHECKED,
        "tests/compat/tf1_sampled_program.py or tf1_sampled_tf.json",
        "TensorFlow 2.20",
        Path(HERE, "tf1_sampled_tf.json"),
        Path(HERE, "tf1_sampled_program.py"),
    )


def test_recorded_numbers_were_checked_on_this_program():
    _assert_checked()


def _same(got, want, path):
    if isinstance(want, dict):
        assert sorted(got) == sorted(want), path
        for k in want:
            _same(got[k], want[k], f"{path}/{k}")
    elif isinstance(want, bool):
        assert got == want, path
    elif path.endswith("/grads"):
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=2e-6, err_msg=f"{path}[{i}]")
    else:
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6, err_msg=path)


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
        [sys.executable, os.path.join(HERE, "tf1_sampled_program.py"), "tf"],
        env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    _same(json.loads(out.stdout), TF_OUT, "")


@pytest.fixture
def graph():
    with tf.Graph().as_default() as g:
        yield g


def _zipf(n):
    c = np.arange(n)
    return np.log((c + 2.0) / (c + 1.0)) / np.log(n + 1.0)


def test_log_uniform_draws_follow_tfs_distribution(graph):
    n, k, runs = 12, 40, 300
    s, _, _ = tf.nn.log_uniform_candidate_sampler(tf.constant([[0]], tf.int64), 1, k, False, n)
    with tf.Session() as sess:
        draws = np.concatenate([sess.run(s) for _ in range(runs)])
    counts = np.bincount(draws, minlength=n)
    expected = _zipf(n) * k * runs
    chi2 = ((counts - expected) ** 2 / expected).sum()
    assert draws.min() >= 0 and draws.max() < n
    assert chi2 < 40.0  # 11 degrees of freedom: P(chi2 > 40) < 1e-4


def test_unique_draws_are_distinct_and_their_expected_counts_are_calibrated(graph):
    n, k, runs = 30, 8, 400
    tc = tf.constant([[5, 29]], tf.int64)
    s, t, e = tf.nn.log_uniform_candidate_sampler(tc, 2, k, True, n, seed=5)
    hits, expected = np.zeros(n), []
    with tf.Session() as sess:
        for _ in range(runs):
            sv, tv, ev = sess.run([s, t, e])
            assert len(set(sv.tolist())) == k
            assert np.all(ev > 0)  # above 1 where no draw repeated (TF's num_sampled * p)
            hits[sv] += 1
            expected.append(tv[0])
    # An expected count is P(class drawn) given the run's number of tries: the frequency of
    # each true class over the runs matches its mean expected count within sampling error.
    np.testing.assert_allclose(hits[[5, 29]] / runs, np.mean(expected, axis=0), atol=0.07)


def test_a_graph_seed_fixes_each_sessions_draws(graph):
    tf.set_random_seed(3)
    s, _, _ = tf.nn.log_uniform_candidate_sampler(tf.constant([[1]], tf.int64), 1, 5, True, 50)
    runs = []
    for _ in range(2):
        with tf.Session() as sess:
            runs.append([sess.run(s).tolist() for _ in range(3)])
    assert runs[0] == runs[1] and runs[0][0] != runs[0][1]


def test_nce_loss_trains_an_embedding_with_its_own_sampler(graph):
    rng = np.random.default_rng(0)
    w = tf.Variable(rng.normal(0, 0.1, (50, 8)).astype(np.float32))
    b = tf.Variable(np.zeros(50, np.float32))
    x = tf.Variable(rng.normal(0, 0.1, (16, 8)).astype(np.float32))
    labels = tf.constant((np.arange(16) % 50)[:, None], tf.int64)
    loss = tf.reduce_mean(tf.nn.nce_loss(w, b, labels, x, 10, 50))
    step = tf.train.GradientDescentOptimizer(1.0).minimize(loss)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        first = sess.run(loss)
        for _ in range(60):
            sess.run(step)
        last = np.mean([sess.run(loss) for _ in range(5)])
    assert last < 0.5 * first


@pytest.mark.parametrize(
    "build,match",
    [
        (lambda c: tf.nn.log_uniform_candidate_sampler(c, 1, 10, True, 5), "at most range_max"),
        (lambda c: tf.nn.log_uniform_candidate_sampler(c, 1, 0, False, 5), "positive"),
        (
            lambda c: tf.nn.log_uniform_candidate_sampler(tf.constant([[1]]), 1, 2, False, 5),
            "int64",
        ),
        (
            lambda c: tf.nn.nce_loss(
                [tf.zeros([5, 2]), tf.zeros([5, 2])], tf.zeros([5]), c, tf.zeros([1, 2]), 2, 10
            ),
            "sharded",
        ),
        (
            lambda c: tf.nn.sampled_softmax_loss(
                tf.zeros([5, 2]),
                tf.zeros([5]),
                tf.constant([1, 2], tf.int64),
                tf.zeros([2, 2]),
                2,
                5,
            ),
            "num_true",
        ),
        (
            lambda c: tf.nn.nce_loss(
                tf.zeros([5, 2]), tf.zeros([5]), c, tf.zeros([1, 2]), 2, 5, sampled_values=(c,)
            ),
            "sampled_values",
        ),
    ],
)
def test_bad_arguments_raise_clear_errors(graph, build, match):
    with pytest.raises((ValueError, TypeError), match=match):
        build(tf.constant([[1]], tf.int64))


@pytest.mark.parametrize(
    "key", sorted(k for k in TF_OUT if k.startswith(("nce_", "sampled_softmax_")))
)
def test_eager_v2_losses_equal_tensorflows(key):
    # compat.v2's eager functions on the program's data: TF's recorded losses and gradients.
    import keratron
    import keratron.compat.v2 as tf2

    fn = tf2.nn.nce_loss if key.startswith("nce") else tf2.nn.sampled_softmax_loss
    labels, true_exp = (
        (program.LABELS1, program.TRUE_EXP1) if "true1" in key else (program.LABELS2,
                                                                    program.TRUE_EXP2)
    )  # fmt: skip
    w, b = tf2.Variable(program.W), tf2.Variable(program.BIAS)
    x = tf2.Variable(program.X)
    sv = (program.SAMPLED, true_exp, program.SAMPLED_EXP)
    with keratron.GradientTape() as tape:
        loss = fn(w, b, labels, x, 5, program.N_CLASSES, num_true=labels.shape[1],
                  sampled_values=sv, remove_accidental_hits=key.endswith("remove"))  # fmt: skip
        weighted = tf2.reduce_sum(loss * np.array([1.0, -0.5, 2.0], np.float32))
    grads = tape.gradient(weighted, [w, b, x])
    _same({"loss": loss.numpy().tolist(), "grads": [g.numpy().tolist() for g in grads]},
          TF_OUT[key], key)  # fmt: skip


def test_eager_v2_sampler_is_seeded_and_its_default_loss_trains():
    import keratron.compat.v2 as tf2

    tc = tf2.constant([[1], [4]], tf2.int64)
    tf2.random.set_seed(4)
    a = [tf2.random.log_uniform_candidate_sampler(tc, 1, 6, True, 40)[0].numpy() for _ in "ab"]
    tf2.random.set_seed(4)
    b = [tf2.random.log_uniform_candidate_sampler(tc, 1, 6, True, 40)[0].numpy() for _ in "ab"]
    assert [v.tolist() for v in a] == [v.tolist() for v in b]
    assert a[0].tolist() != a[1].tolist() and len(set(a[0].tolist())) == 6
    s, t, e = tf2.random.uniform_candidate_sampler(tc, 1, 10, False, 20, seed=1)
    np.testing.assert_allclose(t.numpy(), np.full((2, 1), 0.5))
    np.testing.assert_allclose(e.numpy(), np.full(10, 0.5))
    loss = tf2.nn.sampled_softmax_loss(np.ones((40, 3), np.float32), np.zeros(40, np.float32),
                                       tc, np.ones((2, 3), np.float32), 6, 40)  # fmt: skip
    assert loss.shape == (2,) and np.all(np.isfinite(loss.numpy()))
