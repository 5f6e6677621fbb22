# ruff: noqa: E501
"""One TF1 program over tf.nn.rnn_cell, dynamic_rnn, static_rnn and bidirectional_dynamic_rnn,
run by tests/compat/test_v1_rnn.py under keratron and recorded under TensorFlow:

    TF_USE_LEGACY_KERAS=1 KERAS_BACKEND=tensorflow TF_CPP_MIN_LOG_LEVEL=3 \
        python tests/compat/tf1_rnn_program.py tf > tests/compat/tf1_rnn_tf.json

(TensorFlow 2.20 with tf_keras 2.20, whose tf.compat.v1.nn.rnn_cell are TF1's cells). Every
variable is loaded with fixed numpy values, so outputs, final states and gradients are
TensorFlow's exactly. It prints a JSON object."""

import json
import sys

import numpy as np

B, T, D = 3, 4, 5
X = np.sin(np.arange(B * T * D, dtype=np.float32).reshape(B, T, D) * 0.7)
LENS = np.array([4, 2, 0], np.int32)


def _value(shape, k):
    n = int(np.prod(shape))
    return (np.cos(np.arange(n, dtype=np.float32) * (0.37 + 0.11 * k)) * 0.5).reshape(shape)


def _load(tf, sess):
    for k, v in enumerate(tf.global_variables()):
        v.load(_value(v.shape.as_list(), k), sess)


def _r(shape):
    return np.tanh(np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape) * 0.3 - 1.0)


def _case(tf, build, feed_x=X):
    """Builds `build(x) -> (outputs, state_list)` in a fresh graph; returns names, values and
    gradients of sum(outputs * R) + sum(state_i * R_i) w.r.t. every variable and x."""
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, feed_x.shape)
        outs, states = build(tf, x)
        loss = 0.0
        for i, t in enumerate(outs + states):
            loss = loss + tf.reduce_sum(t * _r(t.shape.as_list()) * (1.0 + i))
        variables = tf.global_variables()
        grads = tf.gradients(loss, variables + [x])
        with tf.Session() as sess:
            _load(tf, sess)
            vals, gvals = sess.run([outs + states, grads], {x: feed_x})
    return {
        "names": [v.name for v in variables],
        "shapes": [t.shape.as_list() for t in outs + states],
        "values": [np.asarray(v).tolist() for v in vals],
        "grads": [np.asarray(v).tolist() for v in gvals],
    }


def _flat(state):
    if isinstance(state, (tuple, list)):
        return [t for s in state for t in _flat(s)]
    return [state]


def basic_lstm(tf, x):
    cell = tf.nn.rnn_cell.BasicLSTMCell(6, forget_bias=0.7)
    init = tf.nn.rnn_cell.LSTMStateTuple(tf.constant(_r([B, 6]) * 0.5), tf.constant(_r([B, 6])))
    out, st = tf.nn.dynamic_rnn(cell, x, sequence_length=LENS, initial_state=init)
    return [out], _flat(st)


def lstm_concat_state_time_major(tf, x):
    cell = tf.nn.rnn_cell.BasicLSTMCell(4, state_is_tuple=False)
    out, st = tf.nn.dynamic_rnn(
        cell, tf.transpose(x, [1, 0, 2]), dtype=tf.float32, time_major=True, scope="tm"
    )
    return [out], [st]


def lstm_peephole_proj(tf, x):
    cell = tf.nn.rnn_cell.LSTMCell(5, use_peepholes=True, num_proj=3, cell_clip=0.8, proj_clip=0.4)
    out, st = tf.nn.dynamic_rnn(cell, x, dtype=tf.float32, sequence_length=LENS)
    return [out], _flat(st)


def gru_and_rnn(tf, x):
    o1, s1 = tf.nn.dynamic_rnn(tf.nn.rnn_cell.GRUCell(4), x, dtype=tf.float32, scope="gru")
    cell = tf.nn.rnn_cell.BasicRNNCell(3, activation=tf.nn.relu)
    o2, s2 = tf.nn.dynamic_rnn(cell, x, dtype=tf.float32, scope="vanilla", sequence_length=LENS)
    return [o1, o2], [s1, s2]


def multi(tf, x):
    cells = [
        tf.nn.rnn_cell.DropoutWrapper(tf.nn.rnn_cell.BasicLSTMCell(n), output_keep_prob=1.0)
        for n in (4, 3)
    ]
    cell = tf.nn.rnn_cell.MultiRNNCell(cells)
    init = cell.zero_state(B, tf.float32)
    out, st = tf.nn.dynamic_rnn(cell, x, initial_state=init)
    return [out], _flat(st)


def static(tf, x):
    cell = tf.nn.rnn_cell.BasicLSTMCell(3)
    xs = tf.unstack(x, num=T, axis=1)
    outs, st = tf.nn.static_rnn(cell, xs, dtype=tf.float32, sequence_length=LENS)
    return outs, _flat(st)


def bidirectional(tf, x):
    fw, bw = tf.nn.rnn_cell.BasicLSTMCell(3), tf.nn.rnn_cell.GRUCell(2)
    (of, ob), (sf, sb) = tf.nn.bidirectional_dynamic_rnn(
        fw, bw, x, sequence_length=LENS, dtype=tf.float32
    )
    return [of, ob], _flat(sf) + [sb]


def static_bidirectional(tf, x):
    fw, bw = tf.nn.rnn_cell.GRUCell(3), tf.nn.rnn_cell.BasicLSTMCell(2)
    xs = tf.unstack(x, num=T, axis=1)
    outs, sf, sb = tf.nn.static_bidirectional_rnn(fw, bw, xs, dtype=tf.float32,
                                                  sequence_length=LENS)  # fmt: skip
    return outs, [sf] + _flat(sb)


def residual_and_concat_state(tf, x):
    stack = tf.nn.rnn_cell.MultiRNNCell(
        [
            tf.nn.rnn_cell.LSTMCell(D, state_is_tuple=False, use_peepholes=True),
            tf.nn.rnn_cell.ResidualWrapper(tf.nn.rnn_cell.GRUCell(D)),
        ]
    )
    out, st = tf.nn.dynamic_rnn(stack, x, dtype=tf.float32)
    return [out], _flat(st)


def bidirectional_stacked_lstms(tf, x):
    fw = tf.nn.rnn_cell.LSTMCell(2, forget_bias=0.3)
    bw = tf.nn.rnn_cell.MultiRNNCell(
        [tf.nn.rnn_cell.BasicLSTMCell(3), tf.nn.rnn_cell.LSTMCell(2, state_is_tuple=False)]
    )
    (of, ob), (sf, sb) = tf.nn.bidirectional_dynamic_rnn(
        fw, bw, x, sequence_length=LENS, dtype=tf.float32, scope="bi"
    )
    return [of, ob], _flat(sf) + _flat(sb)


def direct_call(tf, x):
    cell = tf.nn.rnn_cell.LSTMCell(4)
    state = cell.zero_state(B, tf.float32)
    outs = []
    for t in range(2):
        out, state = cell(x[:, t, :], state)
        outs.append(out)
    return outs, _flat(state)


CASES = [basic_lstm, lstm_concat_state_time_major, lstm_peephole_proj, gru_and_rnn, multi,
         static, bidirectional, direct_call, static_bidirectional,
         residual_and_concat_state, bidirectional_stacked_lstms]  # fmt: skip


def run(tf):
    out = {case.__name__: _case(tf, case) for case in CASES}
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [None, None, D])
        cell = tf.nn.rnn_cell.MultiRNNCell([tf.nn.rnn_cell.BasicLSTMCell(4) for _ in range(2)])
        o, s = tf.nn.dynamic_rnn(cell, x, dtype=tf.float32, scope="first")
        out["unknown_shapes"] = [t.shape.as_list() for t in [o] + _flat(s)]
        tf.nn.dynamic_rnn(tf.nn.rnn_cell.BasicLSTMCell(2), x, dtype=tf.float32)
        tf.nn.dynamic_rnn(tf.nn.rnn_cell.BasicLSTMCell(2), x, dtype=tf.float32, scope="rnn_1")
        with tf.variable_scope("outer"):
            c = tf.nn.rnn_cell.GRUCell(2)
            c(x[:, 0, :], c.zero_state(B, tf.float32))
        out["names"] = [v.name for v in tf.global_variables()]
        out["trainable"] = len(tf.trainable_variables())
    return out


if __name__ == "__main__":
    if sys.argv[1] == "tf":
        import tensorflow.compat.v1 as tf

        tf.disable_v2_behavior()
    else:
        import keratron.compat.v1 as tf
    print(json.dumps(run(tf)))
