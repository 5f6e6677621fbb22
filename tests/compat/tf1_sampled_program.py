"""One TF1 program over tf.nn.nce_loss, tf.nn.sampled_softmax_loss and the candidate
samplers, run by tests/compat/test_v1_candidate_sampling.py under keratron and recorded under
TensorFlow:

    TF_USE_LEGACY_KERAS=1 KERAS_BACKEND=tensorflow TF_CPP_MIN_LOG_LEVEL=3 \
        python tests/compat/tf1_sampled_program.py tf > tests/compat/tf1_sampled_tf.json

(TensorFlow 2.20). The losses are given fixed `sampled_values` (random draws cannot match
TF's bits); the samplers' expected counts are compared where they do not depend on the draw
(unique=False, or a single unique draw). It prints a JSON object."""

import json
import sys

import numpy as np

N_CLASSES, DIM, BATCH = 11, 4, 3
W = np.cos(np.arange(N_CLASSES * DIM, dtype=np.float32).reshape(N_CLASSES, DIM) * 0.7) * 0.8
BIAS = np.sin(np.arange(N_CLASSES, dtype=np.float32)) * 0.3
X = np.tanh(np.arange(BATCH * DIM, dtype=np.float32).reshape(BATCH, DIM) * 0.4 - 2.0)
LABELS1 = np.array([[2], [7], [0]], np.int64)
LABELS2 = np.array([[2, 5], [7, 1], [0, 9]], np.int64)
SAMPLED = np.array([1, 7, 3, 10, 2], np.int64)  # 7 and 2 are accidental hits
TRUE_EXP1 = np.array([[0.4], [0.2], [0.9]], np.float32)
TRUE_EXP2 = np.array([[0.4, 0.3], [0.2, 0.6], [0.9, 0.1]], np.float32)
SAMPLED_EXP = np.array([0.7, 0.2, 0.5, 0.1, 0.4], np.float32)


def _loss_case(tf, fn, labels, true_exp, **kw):
    g = tf.Graph()
    with g.as_default():
        w = tf.Variable(W)
        b = tf.Variable(BIAS)
        x = tf.placeholder(tf.float32, [None, DIM])
        sv = (tf.constant(SAMPLED), tf.constant(true_exp), tf.constant(SAMPLED_EXP))
        loss = fn(w, b, tf.constant(labels), x, len(SAMPLED), N_CLASSES,
                  num_true=labels.shape[1], sampled_values=sv, **kw)  # fmt: skip
        weighted = tf.reduce_sum(loss * np.array([1.0, -0.5, 2.0], np.float32))
        grads = [tf.convert_to_tensor(g) for g in tf.gradients(weighted, [w, b, x])]
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            value, gv = sess.run([loss, grads], {x: X})
    return {"loss": value.tolist(), "grads": [np.asarray(v).tolist() for v in gv]}


def run(tf):
    out = {}
    for name, fn in [("nce", tf.nn.nce_loss), ("sampled_softmax", tf.nn.sampled_softmax_loss)]:
        for hits in (False, True):
            for labels, true_exp in [(LABELS1, TRUE_EXP1), (LABELS2, TRUE_EXP2)]:
                key = f"{name}_true{labels.shape[1]}_{'remove' if hits else 'keep'}"
                out[key] = _loss_case(tf, fn, labels, true_exp, remove_accidental_hits=hits)
    g = tf.Graph()
    with g.as_default():
        tc = tf.constant(LABELS2)
        counts = {
            "log_uniform_repeated": tf.nn.log_uniform_candidate_sampler(tc, 2, 6, False, 1000),
            "log_uniform_single": tf.nn.log_uniform_candidate_sampler(tc, 2, 1, True, 50),
            "uniform_repeated": tf.nn.uniform_candidate_sampler(tc, 2, 4, False, 30),
        }
        with tf.Session() as sess:
            for key, (_, true_exp, _) in counts.items():
                out[key] = sess.run(true_exp).tolist()
            s, _, e = sess.run(counts["log_uniform_repeated"])
            out["sampled_counts_follow_the_classes"] = bool(
                np.allclose(e, 6 * np.log((s + 2.0) / (s + 1.0)) / np.log(1001.0), rtol=1e-5)
            )
    return out


if __name__ == "__main__":
    if sys.argv[1] == "tf":
        import tensorflow.compat.v1 as tf

        tf.disable_v2_behavior()
    else:
        import keratron.compat.v1 as tf
    print(json.dumps(run(tf)))
