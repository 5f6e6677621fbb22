"""`tf.train.Checkpoint` / `CheckpointManager` (keratron.compat.v2.train, also under
compat.v1's tf.train): keys, counters and kept files as TensorFlow has them, round trips of
variables, models and optimizers."""

import os

import numpy as np
import pytest

import keratron
import keratron.compat.v2 as tf
from tests.conftest import require_installed


def _model():
    return keratron.Sequential(
        [keratron.Input((3,)), keratron.layers.Dense(4), keratron.layers.Dense(1)]
    )


def test_keys_counters_and_kept_checkpoints_are_tfs(tmp_path):
    # TensorFlow 2.20 for the same objects (tf.train.list_variables, CheckpointManager):
    # keys d/a, net/w, save_counter and v (each "/.ATTRIBUTES/VARIABLE_VALUE") besides its
    # object graph, shapes [], [], [], [2]; saves ckpt-1..3 keep ckpt-2 and ckpt-3; a later
    # Checkpoint.save(".../x") writes x-4 and an index naming it alone.
    v, w = tf.Variable([1.0, 2.0]), tf.Variable(3.0)
    ck = tf.train.Checkpoint(v=v, net=tf.train.Checkpoint(w=w), d={"a": tf.Variable(1)})
    manager = tf.train.CheckpointManager(ck, str(tmp_path), max_to_keep=2)
    paths = [manager.save() for _ in range(3)]
    assert [os.path.basename(p) for p in paths] == ["ckpt-1", "ckpt-2", "ckpt-3"]
    assert [os.path.basename(p) for p in manager.checkpoints] == ["ckpt-2", "ckpt-3"]
    assert not tf.train.load_checkpoint(paths[2]).has_tensor("x")
    with pytest.raises(tf.errors.NotFoundError, match="ckpt-1"):
        tf.train.load_checkpoint(paths[0])
    keys = tf.train.list_variables(manager.latest_checkpoint)
    suffix = "/.ATTRIBUTES/VARIABLE_VALUE"
    assert keys == [("d/a" + suffix, []), ("net/w" + suffix, []),
                    ("save_counter" + suffix, []), ("v" + suffix, [2])]  # fmt: skip
    assert tf.train.latest_checkpoint(str(tmp_path)) == paths[2]
    x = ck.save(str(tmp_path / "x"))
    assert os.path.basename(x) == "x-4"
    assert tf.train.get_checkpoint_state(str(tmp_path)).all_model_checkpoint_paths == [x]
    np.testing.assert_array_equal(tf.train.load_variable(x, "v" + suffix), [1.0, 2.0])


def test_model_and_optimizer_restore_into_fresh_objects(tmp_path):
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(16, 3)), rng.normal(size=(16, 1))
    model = _model()
    model.compile(optimizer=keratron.optimizers.Adam(0.01), loss="mse")
    model.fit(x, y, epochs=2, batch_size=8, verbose=0)
    step = tf.Variable(7, dtype="int64")
    ck = tf.train.Checkpoint(model=model, optimizer=model.optimizer, step=step)
    path = ck.save(str(tmp_path / "ckpt"))
    saved = [v.numpy() for v in model.variables + model.optimizer.variables]

    fresh = _model()  # other auto-generated names: keys follow structure, not names
    fresh.compile(optimizer=keratron.optimizers.Adam(0.01), loss="mse")
    fresh.optimizer.build(fresh.trainable_variables)
    step2 = tf.Variable(0, dtype="int64")
    ck2 = tf.train.Checkpoint(model=fresh, optimizer=fresh.optimizer, step=step2)
    ck2.restore(path).assert_consumed()
    for got, want in zip(fresh.variables + fresh.optimizer.variables, saved, strict=True):
        np.testing.assert_array_equal(got.numpy(), want)
    assert int(step2.numpy()) == 7 and int(ck2.save_counter.numpy()) == 1
    np.testing.assert_allclose(fresh.predict(x, verbose=0), model.predict(x, verbose=0))


def test_restore_reports_what_did_not_match(tmp_path):
    a = tf.Variable([1.0, 2.0])
    path = tf.train.Checkpoint(a=a).save(str(tmp_path / "c"))
    b = tf.Variable(0.0)
    status = tf.train.Checkpoint(a=a, b=b).restore(path)
    with pytest.raises(AssertionError, match="b/"):
        status.assert_consumed()
    status = tf.train.Checkpoint(other=b).restore(path)
    with pytest.raises(AssertionError):
        status.assert_nontrivial_match()
    with pytest.raises(ValueError, match="shape"):
        tf.train.Checkpoint(a=tf.Variable([1.0, 2.0, 3.0])).restore(path)


def test_manager_reopens_a_directory_and_restore_or_initialize(tmp_path):
    v = tf.Variable(1.0)
    calls = []
    manager = tf.train.CheckpointManager(
        tf.train.Checkpoint(v=v), str(tmp_path), 3, init_fn=lambda: calls.append(1)
    )
    assert manager.restore_or_initialize() is None and calls == [1]
    manager.save(checkpoint_number=10)
    v.assign(5.0)
    again = tf.train.CheckpointManager(tf.train.Checkpoint(v=v), str(tmp_path), 3)
    assert os.path.basename(again.latest_checkpoint) == "ckpt-10"
    assert again.restore_or_initialize() == again.latest_checkpoint
    assert float(v.numpy()) == 1.0


@pytest.mark.parametrize(
    "build,match",
    [
        (lambda: tf.train.Checkpoint(save_counter=tf.Variable(1.0)), "reserved"),
        (lambda: tf.train.Checkpoint(x=3.0).save("/tmp/unused"), "x"),
        (lambda: tf.train.CheckpointManager(object(), "/tmp", 1), "Checkpoint"),
        (lambda: tf.train.CheckpointManager(tf.train.Checkpoint(), "/tmp", 0), "max_to_keep"),
    ],
)
def test_bad_arguments_raise_clear_errors(build, match):
    with pytest.raises((ValueError, TypeError), match=match):
        build()


# A checkpoint TensorFlow 2.20 wrote (TF's tensor bundle), made by:
#   v = tf.Variable(np.arange(6, dtype=np.float32).reshape(2, 3))
#   ck = tf.train.Checkpoint(v=v, net=tf.train.Checkpoint(w=tf.Variable(np.float64(2.5)),
#       i=tf.Variable(np.array([1, -2, 3], np.int64))), d={"a": tf.Variable(7)})
#   ck.save(d + "/ckpt")
TF_CHECKPOINT = os.path.join(os.path.dirname(__file__), "data", "tf_checkpoint", "ckpt-1")


def test_restores_a_checkpoint_tensorflow_wrote():
    v, w = tf.Variable(np.zeros((2, 3), np.float32)), tf.Variable(np.float64(0.0))
    i, a = tf.Variable(np.zeros(3, np.int64)), tf.Variable(0)
    ck = tf.train.Checkpoint(v=v, net=tf.train.Checkpoint(w=w, i=i), d={"a": a})
    ck.restore(TF_CHECKPOINT).assert_consumed()
    np.testing.assert_array_equal(v.numpy(), np.arange(6).reshape(2, 3))
    assert float(w.numpy()) == 2.5 and w.numpy().dtype == np.float64
    np.testing.assert_array_equal(i.numpy(), [1, -2, 3])
    assert int(a.numpy()) == 7 and int(ck.save_counter.numpy()) == 1


@pytest.mark.interop
@pytest.mark.slow
def test_restores_a_large_checkpoint_tensorflow_writes_now(tmp_path):
    # Hundreds of variables: the index table spans many blocks with shared key prefixes.
    import subprocess
    import sys

    require_installed("tensorflow")
    code = (
        "import numpy as np, tensorflow as tf\n"
        "vs = {f'layer_{i:03d}': tf.Variable(np.full((i % 7 + 1, 3), i, np.float32))"
        " for i in range(300)}\n"
        "vs['half'] = tf.Variable(np.array([1.5, -2.25], np.float16))\n"
        f"print(tf.train.Checkpoint(**vs).save({str(tmp_path / 'ck')!r}))\n"
    )
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", KERAS_BACKEND="tensorflow")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=600)  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    assert os.path.getsize(str(tmp_path / "ck-1.index")) > 3 * 4096
    ours = {f"layer_{i:03d}": tf.Variable(np.zeros((i % 7 + 1, 3), np.float32)) for i in range(300)}
    ours["half"] = tf.Variable(np.zeros(2, np.float16))
    tf.train.Checkpoint(**ours).restore(out.stdout.strip()).assert_consumed()
    for i in range(300):
        np.testing.assert_array_equal(ours[f"layer_{i:03d}"].numpy(), i)
    np.testing.assert_array_equal(ours["half"].numpy(), [1.5, -2.25])
