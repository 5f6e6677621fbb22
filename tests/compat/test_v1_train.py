# ruff: noqa: E501 (tables of TensorFlow's printed numbers)
"""The v1 optimizers and decay functions against TensorFlow 2.15's `tf.compat.v1`.

The expected numbers were printed by TensorFlow for the same graph (3 `minimize` steps from
v0 = [1, 2], v1 = [3, 4] on loss = sum(v0^2 * [0.5, 1.5]) + sum(v1 * [0.3, -0.7])); they are
recorded here, not computed by keratron."""

import numpy as np
import pytest

import keratron.compat.v1 as tf

TF_AFTER_3_STEPS = {
    "GradientDescent": [[0.7289999723434448, 0.6859999895095825], [2.9100000858306885, 4.210000514984131], 3, []],
    "Momentum": [[0.4859999716281891, -0.5559999346733093], [2.831700086593628, 4.3927001953125], 3, ["momentum"]],
    "MomentumNesterov": [[0.32732099294662476, -0.696345865726471], [2.7585301399230957, 4.563429832458496], 3, ["momentum"]],
    "Adam": [[0.7015873789787292, 1.7006244659423828], [2.7000012397766113, 4.299998760223389], 3, ["m", "v"]],
    "Adagrad": [[0.7875127792358398, 1.7760331630706787], [2.8251607418060303, 4.214355945587158], 3, ["accumulator"]],
    "Adadelta": [[0.9986434578895569, 1.9986432790756226], [2.998642921447754, 4.001357078552246], 3, ["accum", "accum_update"]],
    "RMSProp": [[0.7260459661483765, 1.3582398891448975], [2.900984287261963, 4.220921039581299], 3, ["momentum", "rms"]],
    "RMSPropCentered": [[0.6050630807876587, 0.9915444850921631], [2.860614061355591, 4.31469202041626], 3, ["mg", "momentum", "rms"]],
    "Ftrl": [[0.5090834498405457, 1.6728154420852661], [0.6403433680534363, 2.553187608718872], 3, ["accum", "linear"]],
    "ProximalGradientDescent": [[0.6942675113677979, 0.6550653576850891], [2.808835744857788, 4.0735249519348145], 3, []],
    "ProximalAdagrad": [[0.7581533789634705, 1.7671290636062622], [2.63550066947937, 4.0750041007995605], 3, ["accumulator"]],
}  # fmt: skip

OPTIMIZERS = {
    "GradientDescent": lambda: tf.train.GradientDescentOptimizer(0.1),
    "Momentum": lambda: tf.train.MomentumOptimizer(0.1, 0.9),
    "MomentumNesterov": lambda: tf.train.MomentumOptimizer(0.1, 0.9, use_nesterov=True),
    "Adam": lambda: tf.train.AdamOptimizer(0.1),
    "Adagrad": lambda: tf.train.AdagradOptimizer(0.1),
    "Adadelta": lambda: tf.train.AdadeltaOptimizer(1.0),
    "RMSProp": lambda: tf.train.RMSPropOptimizer(0.1),
    "RMSPropCentered": lambda: tf.train.RMSPropOptimizer(0.1, momentum=0.5, centered=True),
    "Ftrl": lambda: tf.train.FtrlOptimizer(
        0.1, l1_regularization_strength=0.01, l2_regularization_strength=0.02
    ),
    "ProximalGradientDescent": lambda: tf.train.ProximalGradientDescentOptimizer(0.1, 0.05, 0.1),
    "ProximalAdagrad": lambda: tf.train.ProximalAdagradOptimizer(
        0.1, l1_regularization_strength=0.05, l2_regularization_strength=0.1
    ),
}

TF_DECAY_AT_0_7_15_25 = {
    "exponential": [0.10000000149011612, 0.06155722215771675, 0.0353553406894207, 0.01767767034471035],
    "exponential_staircase": [0.10000000149011612, 0.10000000149011612, 0.05000000074505806, 0.02500000037252903],
    "natural_exp": [0.10000000149011612, 0.07046880573034286, 0.04723665863275528, 0.02865048125386238],
    "inverse_time": [0.10000000149011612, 0.07407407462596893, 0.05714285746216774, 0.04444444552063942],
    "polynomial": [0.10000000149011612, 0.04802499711513519, 0.015625, 0.009999999776482582],
    "polynomial_cycle": [0.10000000149011612, 0.04802499711513519, 0.015625, 0.02265625074505806],
    "cosine": [0.10000000149011612, 0.07542957365512848, 0.023180196061730385, 0.010000000707805157],
    "piecewise": [1.0, 0.5, 0.5, 0.10000000149011612],
}  # fmt: skip


@pytest.fixture(autouse=True)
def fresh_graph():
    tf.reset_default_graph()
    yield
    tf.reset_default_graph()


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_optimizer_matches_tf_after_three_steps(name):
    v0, v1 = tf.Variable([1.0, 2.0]), tf.Variable([3.0, 4.0])
    loss = tf.reduce_sum(tf.square(v0) * [0.5, 1.5]) + tf.reduce_sum(v1 * [0.3, -0.7])
    gs = tf.train.get_or_create_global_step()
    opt = OPTIMIZERS[name]()
    train = opt.minimize(loss, global_step=gs)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for _ in range(3):
            sess.run(train)
        got = [sess.run(v0), sess.run(v1), int(sess.run(gs)), opt.get_slot_names()]
    want = TF_AFTER_3_STEPS[name]
    np.testing.assert_allclose(got[0], want[0], rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-6, atol=1e-6)
    assert got[2:] == want[2:]


def test_slots_are_named_after_their_variable_and_optimizer():
    v = tf.Variable([1.0, 2.0])
    opt = tf.train.AdamOptimizer(0.1)
    train = opt.minimize(tf.reduce_sum(v * v))
    assert train.name == "Adam"
    assert opt.get_slot(v, "m").name == "Variable/Adam:0"
    assert opt.get_slot(v, "v").name == "Variable/Adam_1:0"
    names = [x.name for x in tf.global_variables()]
    assert names == ["Variable:0", "beta1_power:0", "beta2_power:0", "Variable/Adam:0",
                     "Variable/Adam_1:0"] or set(names) == {
        "Variable:0", "beta1_power:0", "beta2_power:0", "Variable/Adam:0", "Variable/Adam_1:0"
    }  # fmt: skip
    rms = tf.train.RMSPropOptimizer(0.1)
    rms.minimize(tf.reduce_sum(v * v))
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        assert sess.run(rms.get_slot(v, "rms")).tolist() == [1.0, 1.0]  # TF1 starts rms at 1


def test_decay_functions_match_tf():
    gs = tf.placeholder(tf.int64, [])
    decays = {
        "exponential": tf.train.exponential_decay(0.1, gs, 10, 0.5),
        "exponential_staircase": tf.train.exponential_decay(0.1, gs, 10, 0.5, staircase=True),
        "natural_exp": tf.train.natural_exp_decay(0.1, gs, 10, 0.5),
        "inverse_time": tf.train.inverse_time_decay(0.1, gs, 10, 0.5),
        "polynomial": tf.train.polynomial_decay(0.1, gs, 20, 0.01, power=2.0),
        "polynomial_cycle": tf.train.polynomial_decay(0.1, gs, 20, 0.01, power=2.0, cycle=True),
        "cosine": tf.train.cosine_decay(0.1, gs, 20, alpha=0.1),
        "piecewise": tf.train.piecewise_constant(
            gs, [tf.constant(5, tf.int64), tf.constant(15, tf.int64)], [1.0, 0.5, 0.1]
        ),
    }
    with tf.Session() as sess:
        for name, t in decays.items():
            got = [float(sess.run(t, {gs: g})) for g in (0, 7, 15, 25)]
            np.testing.assert_allclose(got, TF_DECAY_AT_0_7_15_25[name], rtol=1e-6, err_msg=name)


def test_decayed_learning_rate_drives_the_optimizer():
    gs = tf.train.get_or_create_global_step()
    lr = tf.train.exponential_decay(0.5, gs, 1, 0.5, staircase=True)
    v = tf.Variable(0.0)
    train = tf.train.GradientDescentOptimizer(lr).minimize(-v, global_step=gs)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for _ in range(3):
            sess.run(train)
        assert sess.run([v, gs]) == [0.875, 3]  # 0.5 + 0.25 + 0.125
