# ruff: noqa: E501, F403, F405
"""One TF1 program over tf.layers (2-D, 1-D, transposed), tf.losses, tf.metrics, tf.nn.lrn and
tf.train.ExponentialMovingAverage, run by
tests/compat/test_v1_layers_losses_metrics.py under keratron and recorded under TensorFlow:

    TF_USE_LEGACY_KERAS=1 KERAS_BACKEND=tensorflow python tests/compat/tf1_layers_losses_metrics_program.py tf \
        > tests/compat/tf1_layers_losses_metrics_tf.json

(TensorFlow 2.20 with tf_keras 2.20 gives tf.compat.v1.layers). It prints a JSON object."""

import json
import sys

import numpy as np

X = np.array([[0.5, -1.0, 2.0, 0.25], [1.5, 0.0, -0.5, 1.0]], np.float32)
K = (np.arange(12, dtype=np.float32).reshape(4, 3) - 5.5) / 10.0
B = np.array([0.1, -0.2, 0.3], np.float32)
IMG = (np.arange(2 * 5 * 5 * 2, dtype=np.float32).reshape(2, 5, 5, 2) % 7 - 3.0) / 4.0
CK = (np.arange(3 * 3 * 2 * 4, dtype=np.float32).reshape(3, 3, 2, 4) % 5 - 2.0) / 10.0
BN_X = np.array([[1.0, 2.0, -1.0], [3.0, -2.0, 0.5], [0.0, 1.0, 4.0], [2.0, 0.5, 1.5]], np.float32)

LOGITS = np.array([[2.0, -1.0, 0.5], [0.1, 0.2, 3.0], [-1.0, 1.5, 0.0]], np.float32)
ONEHOT = np.array([[1, 0, 0], [0, 0, 1], [1, 0, 0]], np.float32)
SPARSE = np.array([0, 2, 0], np.int32)
W3 = np.array([1.0, 0.0, 2.0], np.float32)
MULTI = np.array([[1, 0, 1], [0, 0, 1], [1, 1, 0]], np.float32)
PRED = np.array([[0.9, 0.2, 0.6], [0.3, 0.1, 0.8], [0.7, 0.6, 0.05]], np.float32)
REG = np.array([[1.0, -2.0], [0.5, 3.0]], np.float32)

M_LABELS = [np.array([1, 0, 1, 1, 0], np.int64), np.array([0, 0, 1, 1], np.int64)]
M_PROBS = [
    np.array([0.8, 0.3, 0.4, 0.95, 0.6], np.float32),
    np.array([0.1, 0.55, 0.7, 0.2], np.float32),
]
M_WEIGHTS = [
    np.array([1.0, 2.0, 1.0, 0.5, 1.0], np.float32),
    np.array([1.0, 0.0, 1.0, 3.0], np.float32),
]


def run(tf):
    out = {}
    # ---------------- layers: names
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [None, 4])
        with tf.variable_scope("m"):
            h = tf.layers.dense(x, 3, activation=tf.nn.relu)
            tf.layers.dense(h, 2)
        with tf.variable_scope("m", reuse=True):
            h = tf.layers.dense(x, 3, activation=tf.nn.relu)
            tf.layers.dense(h, 2)
        tf.layers.dense(x, 2, name="fc")
        try:
            tf.layers.dense(x, 2, name="fc")
        except ValueError as e:
            out["dup_error"] = str(e).split(".")[0]
        tf.layers.dense(x, 2, name="fc", reuse=True)
        img = tf.placeholder(tf.float32, [None, 5, 5, 2])
        c = tf.layers.conv2d(img, 4, 3, padding="same")
        c = tf.layers.conv2d(c, 4, [3, 3])
        layer = tf.layers.Dense(5)
        layer(x)
        layer(x)
        p = tf.layers.max_pooling2d(c, 2, 1)
        f = tf.layers.flatten(p)
        b = tf.layers.batch_normalization(f, training=True)
        out["names"] = [v.name for v in tf.global_variables()]
        out["trainable"] = [v.name for v in tf.trainable_variables()]
        out["update_ops"] = len(tf.get_collection(tf.GraphKeys.UPDATE_OPS))
        out["shapes"] = [p.shape.as_list(), f.shape.as_list(), b.shape.as_list()]
    # ---------------- layers: values
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [None, 4])
        d = tf.layers.dense(
            x,
            3,
            activation=tf.nn.relu,
            kernel_initializer=tf.constant_initializer(K),
            bias_initializer=tf.constant_initializer(B),
        )
        img = tf.placeholder(tf.float32, [None, 5, 5, 2])
        c = tf.layers.conv2d(
            img,
            4,
            3,
            strides=2,
            padding="same",
            kernel_initializer=tf.constant_initializer(CK),
            bias_initializer=tf.constant_initializer(0.05),
        )
        c2 = tf.layers.conv2d(
            img, 4, 3, activation=tf.nn.tanh, kernel_initializer=tf.constant_initializer(CK)
        )
        mp = tf.layers.max_pooling2d(c2, 2, 1)
        ap = tf.layers.average_pooling2d(c2, 2, 2, padding="same")
        dr = tf.layers.dropout(x, 0.5, training=False)
        bx = tf.placeholder(tf.float32, [None, 3])
        tr = tf.placeholder(tf.bool, [])
        bn = tf.layers.batch_normalization(
            bx,
            training=tr,
            momentum=0.9,
            gamma_initializer=tf.constant_initializer(1.5),
            beta_initializer=tf.constant_initializer(0.1),
        )
        upd = tf.get_collection(tf.GraphKeys.UPDATE_OPS)
        bimg = tf.layers.batch_normalization(img, training=True, momentum=0.5, name="bn4")
        upd4 = tf.get_collection(tf.GraphKeys.UPDATE_OPS)[2:]
        dk = [v for v in tf.trainable_variables() if v.name == "dense/kernel:0"][0]
        ck = [v for v in tf.trainable_variables() if v.name == "conv2d_1/kernel:0"][0]
        obj = tf.reduce_sum(d * d) + tf.reduce_sum(mp * ap[:, :2, :2, :]) + tf.reduce_sum(bn * BN_X)
        grads = tf.gradients(obj, [x, dk, ck, img, bx])
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            out["dense"] = s.run(d, {x: X}).tolist()
            out["conv"] = s.run(c, {img: IMG}).tolist()
            out["maxpool"] = s.run(mp, {img: IMG}).tolist()
            out["avgpool"] = s.run(ap, {img: IMG}).tolist()
            out["dropout_off"] = s.run(dr, {x: X}).tolist()
            out["bn_train"] = s.run(bn, {bx: BN_X, tr: True}).tolist()
            out["layer_grads"] = [
                a.tolist() for a in s.run(grads, {x: X, img: IMG, bx: BN_X, tr: True})
            ]
            for _ in range(2):
                s.run(upd, {bx: BN_X, tr: True})
            s.run(upd, {bx: BN_X * 3.0, tr: False})
            mm = [v for v in tf.global_variables() if "moving" in v.name]
            out["bn_moving"] = [a.tolist() for a in s.run(mm[:2])]
            out["bn_infer"] = s.run(bn, {bx: BN_X, tr: False}).tolist()
            r = s.run([bimg] + upd4, {img: IMG})
            mv = [v for v in tf.global_variables() if v.name.startswith("bn4/moving")]
            out["bn4"] = [r[0][0, 0].tolist()] + [a.tolist() for a in s.run(mv)]
    # ---------------- losses
    g = tf.Graph()
    with g.as_default():
        lg = tf.constant(LOGITS)
        L = tf.losses
        R = L.Reduction
        cases = {
            "softmax": L.softmax_cross_entropy(ONEHOT, lg),
            "softmax_w": L.softmax_cross_entropy(ONEHOT, lg, weights=W3),
            "softmax_smooth": L.softmax_cross_entropy(ONEHOT, lg, label_smoothing=0.1),
            "softmax_none": L.softmax_cross_entropy(
                ONEHOT, lg, weights=W3, reduction=R.NONE, loss_collection=None
            ),
            "softmax_sum": L.softmax_cross_entropy(ONEHOT, lg, weights=W3, reduction=R.SUM),
            "softmax_mean": L.softmax_cross_entropy(ONEHOT, lg, weights=W3, reduction=R.MEAN),
            "softmax_batch": L.softmax_cross_entropy(
                ONEHOT, lg, weights=W3, reduction=R.SUM_OVER_BATCH_SIZE
            ),
            "softmax_nonzero": L.softmax_cross_entropy(
                ONEHOT, lg, weights=W3, reduction=R.SUM_OVER_NONZERO_WEIGHTS
            ),
            "sparse": L.sparse_softmax_cross_entropy(SPARSE, lg),
            "sparse_w": L.sparse_softmax_cross_entropy(SPARSE, lg, weights=W3),
            "sigmoid": L.sigmoid_cross_entropy(MULTI, lg),
            "sigmoid_smooth_w": L.sigmoid_cross_entropy(
                MULTI, lg, weights=W3[:, None], label_smoothing=0.2
            ),
            "mse": L.mean_squared_error(MULTI, PRED),
            "mse_w": L.mean_squared_error(MULTI, PRED, weights=[[1.0], [0.0], [2.0]]),
            "abs": L.absolute_difference(MULTI, PRED, weights=0.5),
            "huber": L.huber_loss(MULTI, LOGITS, delta=0.5),
            "huber_none": L.huber_loss(MULTI, LOGITS, reduction=R.NONE, loss_collection=None),
            "log": L.log_loss(MULTI, PRED),
            "log_w": L.log_loss(MULTI, PRED, weights=W3[:, None], epsilon=1e-3),
            "hinge": L.hinge_loss(MULTI, LOGITS),
            "cosine": L.cosine_distance(
                tf.nn.l2_normalize(MULTI, 1), tf.nn.l2_normalize(PRED, 1), axis=1
            ),
        }
        grad = tf.gradients(cases["softmax_w"] + cases["huber"] + cases["sigmoid"], lg)[0]
        w = tf.Variable(REG)
        L.add_loss(tf.reduce_sum(w) * 0.0 + 0.25)
        tf.add_to_collection(tf.GraphKeys.REGULARIZATION_LOSSES, tf.nn.l2_loss(w) * 0.01)
        tf.add_to_collection(tf.GraphKeys.REGULARIZATION_LOSSES, tf.reduce_sum(tf.abs(w)) * 0.1)
        total = L.get_total_loss()
        total_noreg = L.get_total_loss(add_regularization_losses=False)
        regl = L.get_regularization_loss()
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            out["losses"] = {k: np.asarray(v).tolist() for k, v in s.run(cases).items()}
            out["loss_grad"] = s.run(grad).tolist()
            out["total"] = [float(s.run(total)), float(s.run(total_noreg)), float(s.run(regl))]
            out["n_losses"] = [len(L.get_losses()), len(L.get_regularization_losses())]
            out["loss_names"] = [cases["softmax"].name, cases["mse"].name, total.name]
    # ---------------- metrics
    g = tf.Graph()
    with g.as_default():
        lab = tf.placeholder(tf.int64, [None])
        prob = tf.placeholder(tf.float32, [None])
        wt = tf.placeholder(tf.float32, [None])
        pred = tf.cast(prob > 0.5, tf.int64)
        M = tf.metrics
        ms = {
            "accuracy": M.accuracy(lab, pred),
            "accuracy_w": M.accuracy(lab, pred, weights=wt),
            "mean": M.mean(prob),
            "mean_w": M.mean(prob, weights=wt),
            "precision": M.precision(lab, pred),
            "recall": M.recall(lab, pred),
            "recall_w": M.recall(lab, pred, weights=wt),
            "mse": M.mean_squared_error(tf.cast(lab, tf.float32), prob),
            "mae": M.mean_absolute_error(tf.cast(lab, tf.float32), prob, weights=wt),
            "rmse": M.root_mean_squared_error(tf.cast(lab, tf.float32), prob),
            "tp": M.true_positives(lab, pred),
            "fp": M.false_positives(lab, pred),
            "fn": M.false_negatives(lab, pred),
            "tn": M.true_negatives(lab, pred),
            "auc": M.auc(lab, prob),
            "auc_pr": M.auc(lab, prob, curve="PR", num_thresholds=50),
            "auc_w": M.auc(lab, prob, weights=wt, num_thresholds=20),
            "mean_class_acc": M.mean_per_class_accuracy(lab, pred, 2),
            "mean_class_acc_w": M.mean_per_class_accuracy(lab, pred, 2, weights=wt),
            "mean_iou": M.mean_iou(lab, pred, 2),
            "mean_iou_w": M.mean_iou(lab, pred, 3, weights=wt),
        }
        at = {
            "precision_at": M.precision_at_thresholds(lab, prob, [0.25, 0.5, 0.9]),
            "recall_at": M.recall_at_thresholds(lab, prob, [0.0, 0.5, 0.7], weights=wt),
        }
        ms.update(at)
        out["local_names"] = [v.name for v in tf.local_variables()][:8]
        out["n_local"] = len(tf.local_variables())
        with tf.Session() as s:
            s.run(tf.local_variables_initializer())
            ups = []
            for i in range(2):
                fd = {lab: M_LABELS[i], prob: M_PROBS[i], wt: M_WEIGHTS[i]}
                ups.append(
                    {
                        k: np.asarray(v).tolist()
                        for k, v in s.run({k: u for k, (_, u) in ms.items()}, fd).items()
                    }
                )
            out["metric_updates"] = ups
            out["metric_values"] = {
                k: np.asarray(v).tolist()
                for k, v in s.run({k: m for k, (m, _) in ms.items()}).items()
            }
            s.run(tf.local_variables_initializer())
            out["metric_reset"] = float(s.run(ms["accuracy"][0]))
    # ---------------------------------------------------------------- 1-D and transposed
    g = tf.Graph()
    with g.as_default():
        seq = tf.placeholder(tf.float32, [None, 7, 2])
        c1 = tf.layers.conv1d(seq, 3, 3, strides=2, padding="same", activation=tf.nn.relu,
                              kernel_initializer=tf.constant_initializer(CK[0, :, :, :3]),
                              bias_initializer=tf.constant_initializer(0.1))  # fmt: skip
        m1 = tf.layers.max_pooling1d(c1, 2, 1)
        d3 = tf.layers.dense(seq, 3, kernel_initializer=tf.constant_initializer(K[:2]),
                             bias_initializer=tf.constant_initializer(B))  # fmt: skip
        a1 = tf.layers.average_pooling1d(seq, 3, 2, padding="same")
        img = tf.placeholder(tf.float32, [None, 5, 5, 2])
        ct = tf.layers.conv2d_transpose(img, 3, 3, strides=2, padding="same",
                                        kernel_initializer=tf.constant_initializer(CK[..., :3].transpose(0, 1, 3, 2)),
                                        bias_initializer=tf.constant_initializer(-0.05))  # fmt: skip
        cv = tf.layers.conv2d_transpose(img, 2, (2, 3), strides=(1, 2), activation=tf.nn.tanh)
        out["names_1d"] = [v.name for v in tf.global_variables()]
        out["shapes_1d"] = [t.shape.as_list() for t in (c1, m1, a1, ct, cv, d3)]
        seq_v = IMG[:, 0]  # (2, 5, 2) -> pad in time to 7
        seq_v = np.concatenate([seq_v, seq_v[:, :2] * -1.0], axis=1)
        grads = tf.gradients(
            tf.reduce_sum(m1 * m1) + tf.reduce_sum(ct * ct) + tf.reduce_sum(a1), [seq, img]
        )
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            r = s.run([c1, m1, a1, ct] + grads, {seq: seq_v, img: IMG})
            out["conv1d"], out["maxpool1d"], out["avgpool1d"] = (a.tolist() for a in r[:3])
            out["conv2d_transpose"] = r[3][0, :3].tolist()
            out["grads_1d"] = [r[4].tolist(), r[5][1, 2:].tolist()]
            out["dense_3d"] = s.run(d3, {seq: seq_v})[1].tolist()

    # ---------------------------------------------------------------- lrn, zero_fraction, EMA
    g = tf.Graph()
    with g.as_default():
        img = tf.constant(IMG)
        four = tf.concat([img, img * 0.5 + 0.25], axis=3)
        norm = tf.nn.lrn(four, 1, bias=1.0, alpha=0.3, beta=0.75)
        norm_grad = tf.gradients(tf.reduce_sum(norm * np.concatenate([IMG, -IMG], 3)), img)[0]
        zf = tf.nn.zero_fraction(tf.nn.relu(img))
        v = tf.Variable([1.0, 2.0], name="v")
        t = tf.reduce_sum(v * 3.0, name="t")
        step = tf.Variable(0, trainable=False, name="step")
        ema = tf.train.ExponentialMovingAverage(0.9, num_updates=step, name="avg")
        with tf.control_dependencies([tf.assign_add(v, [1.0, -1.0]), tf.assign_add(step, 1)]):
            update = ema.apply([v, t])
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            out["lrn"] = s.run(norm)[0, :2].tolist()
            out["lrn_grad"] = s.run(norm_grad)[1, 3].tolist()
            out["zero_fraction"] = float(s.run(zf))
            for _ in range(3):
                s.run(update)
            out["ema"] = [s.run(ema.average(v)).tolist(), float(s.run(ema.average(t)))]
            out["ema_names"] = [ema.average(v).name, ema.average(t).name, ema.average_name(v)]
            out["ema_vars"] = sorted(
                x.name for x in tf.get_collection(tf.GraphKeys.MOVING_AVERAGE_VARIABLES)
            )
    return out


if __name__ == "__main__":
    if sys.argv[1] == "tf":
        import tensorflow.compat.v1 as tf

        tf.disable_v2_behavior()
    else:
        import keratron.compat.v1 as tf
    print(json.dumps(run(tf)))
