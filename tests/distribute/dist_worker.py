"""One worker of the multi-process tests (started by launch.py with torchrun's variables).

Usage: dist_worker.py SCENARIO WORKDIR. Worker 0 writes WORKDIR/result_SCENARIO.json; every
worker asserts what it can see and exits non-zero on a failed check.
"""

from __future__ import annotations

import atexit
import json
import os
import signal
import sys
import time

import numpy as np

import keratron as kt
from keratron import distribute

SCENARIO, WORKDIR = sys.argv[1], sys.argv[2]
RANK = int(os.environ["RANK"])
GLOBAL_BATCH = 8


def _record_group_at_exit():
    # Registered before the strategy's runtime exists, so it runs after the runtime's
    # shutdown (atexit handlers run last registered first).
    import torch.distributed as dist

    with open(os.path.join(WORKDIR, f"group_at_exit_{SCENARIO}{RANK}"), "w") as f:
        f.write("alive" if dist.is_initialized() else "destroyed")


atexit.register(_record_group_at_exit)


class BatchRecorder(kt.layers.Layer):
    """Identity that records the batch dimension of every training call."""

    def __init__(self, seen, **kwargs):
        super().__init__(**kwargs)
        self.seen = seen

    def call(self, x, training=None):
        if training:
            self.seen.append(int(x.shape[0]))
        return x


def convnet(synchronized, seen):
    inputs = kt.Input((6, 6, 3))
    x = BatchRecorder(seen)(inputs)
    x = kt.layers.Conv2D(4, 3, padding="same")(x)
    x = kt.layers.BatchNormalization(synchronized=synchronized)(x)
    x = kt.layers.Activation("relu")(x)
    x = kt.layers.GlobalAveragePooling2D()(x)
    return kt.Model(inputs, kt.layers.Dense(3)(x))


def lstm_model(seen):
    inputs = kt.Input((5, 3))
    x = BatchRecorder(seen)(inputs)
    x = kt.layers.LSTM(4)(x)
    return kt.Model(inputs, kt.layers.Dense(2)(x))


def compile_conv(model):
    model.compile(
        optimizer=kt.optimizers.SGD(learning_rate=0.1, momentum=0.9),
        loss=kt.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )


def compile_lstm(model, run_eagerly):
    model.compile(
        optimizer=kt.optimizers.Adam(learning_rate=0.01),
        loss="mse",
        metrics=["mae"],
        run_eagerly=run_eagerly,
    )


def assert_close(a_list, b_list, what, atol=1e-5):
    for i, (a, b) in enumerate(zip(a_list, b_list)):
        np.testing.assert_allclose(a, b, atol=atol, rtol=0, err_msg=f"{what} [{i}]")


def assert_same_on_all_workers(strategy, arrays, what):
    flat = np.concatenate([np.asarray(a, dtype=np.float64).ravel() for a in arrays])[None]
    everyone = strategy.gather(flat, axis=0).numpy()
    for r in range(1, everyone.shape[0]):
        np.testing.assert_array_equal(everyone[r], everyone[0], err_msg=f"{what}: worker {r}")


def scenario_train():
    # Buckets of 64 bytes: the convnet's gradients travel in several multi-tensor buckets.
    options = distribute.experimental.CommunicationOptions(bytes_per_pack=64)
    strategy = distribute.MultiWorkerMirroredStrategy(communication_options=options)
    assert strategy.num_replicas_in_sync == 2
    rng = np.random.default_rng(0)
    result = {}

    # 1. Convnet with synchronized BatchNormalization, traced steps, shuffled batches.
    x = rng.normal(size=(32, 6, 6, 3)).astype("float32")
    y = rng.integers(0, 3, size=(32,))
    kt.utils.set_random_seed(10 + RANK)  # different initial weights: fit must broadcast
    seen = []
    with strategy.scope():
        model = convnet(True, seen)
        compile_conv(model)
    conv_initial = model.get_weights()  # worker 0's are the ones fit broadcasts
    np.random.seed(100 + RANK)  # different shuffling unless fit synchronises it
    hist = model.fit(x, y, batch_size=GLOBAL_BATCH, epochs=2, shuffle=True, verbose=0)
    assert seen and set(seen) == {GLOBAL_BATCH // 2}, f"convnet saw batches {seen}"
    assert_same_on_all_workers(strategy, model.get_weights(), "convnet weights")
    conv_weights, conv_hist = model.get_weights(), hist.history

    # 2. LSTM, eager steps, Adam (slot variables), global metrics in the logs.
    xs = rng.normal(size=(48, 5, 3)).astype("float32")
    ys = rng.normal(size=(48, 2)).astype("float32")
    seen_lstm = []
    strategy = distribute.MirroredStrategy()  # the same job, one process per device
    with strategy.scope():
        lstm = lstm_model(seen_lstm)
        compile_lstm(lstm, run_eagerly=True)
    lstm_initial = lstm.get_weights()
    callbacks = [
        kt.callbacks.CSVLogger(os.path.join(WORKDIR, f"log{RANK}.csv")),
        kt.callbacks.ModelCheckpoint(
            os.path.join(WORKDIR, f"ckpt{RANK}.weights.h5"), save_weights_only=True
        ),
    ]
    lstm_hist = lstm.fit(
        xs, ys, batch_size=GLOBAL_BATCH, epochs=2, shuffle=False, verbose=1, callbacks=callbacks
    )
    assert set(seen_lstm) == {GLOBAL_BATCH // 2}, f"LSTM saw batches {seen_lstm}"
    assert_same_on_all_workers(strategy, lstm.get_weights(), "LSTM weights")

    # 3. evaluate and predict shard and gather; uneven and tiny last batches.
    x_eval, y_eval = xs[:10], ys[:10]
    eval_logs = lstm.evaluate(x_eval, y_eval, batch_size=4, verbose=0, return_dict=True)
    preds = lstm.predict(xs[:9], batch_size=4, verbose=0)
    assert preds.shape == (9, 2), preds.shape
    assert_same_on_all_workers(strategy, [preds], "predictions")
    assert_same_on_all_workers(strategy, [eval_logs["loss"], eval_logs["mae"]], "evaluate")

    # 3b. Unsynchronized BatchNormalization: each replica normalises by its own slice, and
    # the moving statistics are averaged, so every worker still holds the same weights.
    with strategy.scope():
        bn = kt.Sequential(
            [kt.Input((5,)), kt.layers.Dense(4), kt.layers.BatchNormalization(), kt.layers.Dense(1)]
        )
        bn.compile(optimizer="sgd", loss="mse")
    bn.fit(xs[:, :, 0], ys[:, :1], batch_size=GLOBAL_BATCH, epochs=1, verbose=0)
    moving = bn.layers[1].moving_mean.numpy()
    assert np.abs(moving).max() > 0, "moving mean never updated"
    assert_same_on_all_workers(strategy, bn.get_weights(), "unsynchronized BN weights")

    # 4. strategy.run / reduce / gather / distributed dataset.
    total = strategy.reduce("SUM", np.array([RANK + 1.0]), axis=None).numpy()
    assert total.tolist() == [3.0], total
    mean = strategy.reduce("MEAN", np.arange(4.0) + RANK * 4, axis=0).numpy()
    assert float(mean) == 3.5, mean
    ds = kt.data.Dataset.from_tensor_slices((np.arange(10.0), np.arange(10.0))).batch(5)
    parts = [x_.numpy().tolist() for x_, _ in strategy.experimental_distribute_dataset(ds)]
    expected = [[0.0, 1.0, 2.0], [5.0, 6.0, 7.0]] if RANK == 0 else [[3.0, 4.0], [8.0, 9.0]]
    assert parts == expected, parts
    ctx_id = strategy.run(lambda: distribute.get_replica_context().replica_id_in_sync_group)
    assert ctx_id == RANK

    if RANK == 0:
        # The same training in one process on the same global batches, from the same start.
        ref = convnet(False, [])
        compile_conv(ref)
        ref.set_weights(conv_initial)
        np.random.seed(100)
        ref_hist = ref.fit(x, y, batch_size=GLOBAL_BATCH, epochs=2, shuffle=True, verbose=0)
        assert_close(conv_weights, ref.get_weights(), "convnet vs one process")
        assert_close([conv_hist["loss"]], [ref_hist.history["loss"]], "convnet loss", atol=1e-5)
        ref_lstm = lstm_model([])
        compile_lstm(ref_lstm, run_eagerly=False)
        ref_lstm.set_weights(lstm_initial)
        ref_lstm_hist = ref_lstm.fit(
            xs, ys, batch_size=GLOBAL_BATCH, epochs=2, shuffle=False, verbose=0
        )
        assert_close(lstm.get_weights(), ref_lstm.get_weights(), "LSTM vs one process")
        for key in ("loss", "mae"):
            assert_close(
                [lstm_hist.history[key]], [ref_lstm_hist.history[key]], f"LSTM history {key}"
            )
        ref_eval = ref_lstm.evaluate(x_eval, y_eval, batch_size=4, verbose=0, return_dict=True)
        for key in ("loss", "mae"):
            assert abs(eval_logs[key] - ref_eval[key]) < 1e-5, (key, eval_logs, ref_eval)
        assert_close([preds], [ref_lstm.predict(xs[:9], batch_size=4, verbose=0)], "predict")
        result.update(ok=True, conv_loss=conv_hist["loss"], lstm_loss=lstm_hist.history["loss"])
        with open(os.path.join(WORKDIR, "result_train.json"), "w") as f:
            json.dump(result, f)


def _data():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(64, 4)).astype("float32")
    y = (x @ np.array([[1.0], [-2.0], [0.5], [3.0]], dtype="float32")).astype("float32")
    return x, y


def _mlp():
    kt.utils.set_random_seed(7)
    return kt.Sequential(
        [kt.Input((4,)), kt.layers.Dense(8, activation="tanh"), kt.layers.Dense(1)]
    )


class _KillAt(kt.callbacks.Callback):
    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = epoch

    def on_train_batch_begin(self, batch, logs=None):
        if self.epoch == 2 and batch == 1:
            with open(os.path.join(WORKDIR, "killed_at"), "w") as f:
                f.write(repr(time.time()))
            os.kill(os.getpid(), signal.SIGKILL)


class _LossFile(kt.callbacks.Callback):
    def on_epoch_end(self, epoch, logs=None):
        if RANK == 0:
            with open(os.path.join(WORKDIR, f"losses_{SCENARIO}.jsonl"), "a") as f:
                f.write(json.dumps([epoch, logs["loss"]]) + "\n")


def scenario_crash_or_resume():
    strategy = distribute.MultiWorkerMirroredStrategy()
    x, y = _data()
    with strategy.scope():
        model = _mlp()
        model.compile(optimizer=kt.optimizers.SGD(0.05, momentum=0.5), loss="mse")
    callbacks = [kt.callbacks.BackupAndRestore(os.path.join(WORKDIR, "backup")), _LossFile()]
    if SCENARIO == "crash" and RANK == 1:
        callbacks.append(_KillAt())
    try:
        hist = model.fit(
            x, y, batch_size=16, epochs=4, shuffle=False, verbose=0, callbacks=callbacks
        )
    except distribute.WorkerFailureError as e:
        with open(os.path.join(WORKDIR, f"failure{RANK}.json"), "w") as f:
            json.dump({"time": time.time(), "message": str(e)}, f)
        raise
    if RANK == 0:
        ref = _mlp()
        ref.compile(optimizer=kt.optimizers.SGD(0.05, momentum=0.5), loss="mse")
        ref_hist = ref.fit(x, y, batch_size=16, epochs=4, shuffle=False, verbose=0)
        with open(os.path.join(WORKDIR, f"result_{SCENARIO}.json"), "w") as f:
            json.dump(
                {
                    "epochs": hist.epoch,
                    "loss": hist.history["loss"],
                    "reference_loss": ref_hist.history["loss"],
                },
                f,
            )


def scenario_estimator():
    from keratron import estimator as E

    config = E.RunConfig(tf_random_seed=10 + RANK, save_checkpoints_steps=4)
    assert (config.num_worker_replicas, config.task_id, config.is_chief) == (2, RANK, RANK == 0)
    rng = np.random.default_rng(3)
    x = rng.normal(size=(32, 4)).astype("float32")
    y = (x[:, 0] > 0).astype("int32") + (x[:, 1] > 0).astype("int32")
    seen = []

    def model_fn(features, labels, mode):
        if mode == E.ModeKeys.TRAIN:
            seen.append(int(features.shape[0]))
        logits = kt.layers.Dense(3)(kt.layers.Dense(6, activation="tanh")(features))
        loss = kt.ops.mean(
            kt.losses.sparse_categorical_crossentropy(labels, logits, from_logits=True)
        )
        if mode == E.ModeKeys.EVAL:
            acc = kt.metrics.SparseCategoricalAccuracy(name="acc")
            acc.update_state(labels, logits)
            return E.EstimatorSpec(mode, loss=loss, eval_metric_ops={"accuracy": acc})
        opt = kt.optimizers.SGD(learning_rate=0.1, momentum=0.9)
        return E.EstimatorSpec(
            mode, loss=loss, train_op=opt.minimize(loss, E.trainable_variables())
        )

    def train_input():
        return kt.data.Dataset.from_tensor_slices((x, y)).batch(GLOBAL_BATCH).repeat(2)

    def eval_input():
        return kt.data.Dataset.from_tensor_slices((x, y)).batch(GLOBAL_BATCH)

    est = E.Estimator(model_fn, model_dir=os.path.join(WORKDIR, f"est{RANK}"), config=config)
    est.train(train_input)
    assert seen == [GLOBAL_BATCH // 2], seen
    results = est.evaluate(eval_input)
    if RANK != 0:
        return
    # The same Estimator in one process (a job of one, whatever the environment says).
    os.environ["WORLD_SIZE"] = "1"
    ref = E.Estimator(
        model_fn,
        model_dir=os.path.join(WORKDIR, "reference"),
        config=E.RunConfig(tf_random_seed=10, save_checkpoints_steps=4),
    )
    ref.train(train_input)
    ref_results = ref.evaluate(eval_input)
    assert ref.latest_checkpoint().endswith("-8") and est.latest_checkpoint().endswith("-8")
    names = est.get_variable_names()
    assert names == ref.get_variable_names()
    assert_close(
        [est.get_variable_value(n) for n in names],
        [ref.get_variable_value(n) for n in names],
        "estimator variables",
    )
    for key in ("loss", "accuracy"):
        assert abs(float(results[key]) - float(ref_results[key])) < 1e-5, (results, ref_results)
    assert int(results["global_step"]) == 8
    with open(os.path.join(WORKDIR, "result_estimator.json"), "w") as f:
        json.dump({"ok": True, "loss": float(results["loss"])}, f)


class _DieWhilePeerComputes(kt.callbacks.Callback):
    """In epoch 2, worker 1 dies while worker 0 is busy outside any collective (a long
    callback): only the heartbeat watchdog can tell worker 0."""

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = epoch

    def on_train_batch_begin(self, batch, logs=None):
        if self.epoch != 1 or batch != 0:
            return
        if RANK == 1:
            with open(os.path.join(WORKDIR, "killed_at"), "w") as f:
                f.write(repr(time.time()))
            os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(6.0)


def scenario_watchdog():
    options = distribute.experimental.CommunicationOptions(timeout_seconds=3)
    strategy = distribute.MultiWorkerMirroredStrategy(communication_options=options)
    x, y = _data()
    with strategy.scope():
        model = _mlp()
        model.compile(optimizer="sgd", loss="mse")
    try:
        model.fit(x, y, batch_size=16, epochs=3, verbose=0, callbacks=[_DieWhilePeerComputes()])
    except distribute.WorkerFailureError as e:
        with open(os.path.join(WORKDIR, f"failure{RANK}.json"), "w") as f:
            json.dump({"time": time.time(), "message": str(e)}, f)
        raise


if __name__ == "__main__":
    if SCENARIO == "train":  # one job for both: each job start costs seconds
        scenario_train()
        scenario_estimator()
    elif SCENARIO == "watchdog":
        scenario_watchdog()
    elif SCENARIO in ("crash", "resume"):
        scenario_crash_or_resume()
    else:
        raise SystemExit(f"unknown scenario {SCENARIO!r}")
