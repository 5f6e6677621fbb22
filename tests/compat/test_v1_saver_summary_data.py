# ruff: noqa: E501 (TensorFlow's printed numbers)
"""`tf.train.Saver`, `tf.summary` and the v1 `tf.data` iterators against TensorFlow 2.15's
`tf.compat.v1`: the expected values were printed by TensorFlow for the same program (a
variable `v1`, a scoped `s/w`, the global step, three saves with `max_to_keep=2`, a merged
scalar + histogram summary and a batched dataset); they are recorded here, not computed by
keratron."""

import glob
import os

import numpy as np
import pytest

import keratron.compat.v1 as tf
from tests.conftest import require

W0 = [[0.5, -1.5, 2.0], [0.0, 3.25, -0.001]]
TF_SAVED = ["model.ckpt-1", "model.ckpt-2", "model.ckpt-3"]
TF_KEPT = ["model.ckpt-2", "model.ckpt-3"]
TF_LIST_VARIABLES = [("global_step", []), ("s/w", [2, 3]), ("v1", [2])]
TF_HISTO = (-1.5, 3.25, 6.0, 4.2489999999525025, 17.062501000000093,
            [-1.624957930213695, -1.47723448201245, -0.001055857634516068, -0.0009598705768327891, 0.0, 1e-12, 0.47069243095356195, 0.5177616740489182, 1.9661990955585713, 2.1628190051144287, 3.1665833053880363, 3.48324163592684, 1.7976931348623157e+308],
            [0.0, 1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 1.0, 0.0])  # fmt: skip
TF_BATCHES = [[[0.0, 1.0], [0, 1]], [[2.0, 3.0], [2, 3]], [[4.0], [4]]]


@pytest.fixture(autouse=True)
def fresh_graph():
    tf.reset_default_graph()
    yield


def _model():
    v1 = tf.Variable([1.0, 2.0], name="v1")
    with tf.variable_scope("s"):
        w = tf.get_variable("w", [2, 3], initializer=tf.constant_initializer(W0))
    gs = tf.train.get_or_create_global_step()
    return v1, w, gs, tf.assign_add(gs, 1)


def test_saver_max_to_keep_index_list_and_partial_restore(tmp_path):
    v1, w, gs, inc = _model()
    saver = tf.train.Saver(max_to_keep=2)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        saved = []
        for _ in range(3):
            sess.run(inc)
            saved.append(saver.save(sess, str(tmp_path / "model.ckpt"), global_step=gs))
        assert [os.path.basename(p) for p in saved] == TF_SAVED
        kept = sorted(
            {f.split(".")[1] for f in os.listdir(tmp_path) if f.startswith("model.ckpt-")}
        )
        assert ["model." + k for k in kept] == TF_KEPT
        assert os.path.basename(tf.train.latest_checkpoint(str(tmp_path))) == "model.ckpt-3"
        state = tf.train.get_checkpoint_state(str(tmp_path))
        assert [os.path.basename(p) for p in state.all_model_checkpoint_paths] == TF_KEPT
        assert tf.train.list_variables(str(tmp_path)) == TF_LIST_VARIABLES
        np.testing.assert_array_equal(tf.train.load_variable(str(tmp_path), "s/w"), np.float32(W0))
        assert tf.train.load_variable(saved[-1], "global_step") == 3
        sess.run([tf.assign(v1, [5.0, 6.0]), tf.assign(w, tf.zeros([2, 3]))])
        # Partial restore: only v1 comes back, w keeps its new value (as in TF).
        tf.train.Saver([v1]).restore(sess, tf.train.latest_checkpoint(str(tmp_path)))
        assert sess.run(v1).tolist() == [1.0, 2.0]
        assert sess.run(w).tolist() == [[0.0] * 3] * 2


def test_saver_dict_names_fresh_session_and_errors(tmp_path):
    v1, w, _, _ = _model()
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        path = tf.train.Saver({"renamed": w}).save(sess, str(tmp_path / "only_w"))
    assert path == str(tmp_path / "only_w")
    assert tf.train.list_variables(path) == [("renamed", [2, 3])]
    with tf.Session() as sess:  # restoring initializes: no initializer run needed
        tf.train.Saver({"renamed": w}).restore(sess, path)
        np.testing.assert_array_equal(sess.run(w), np.float32(W0))
        with pytest.raises(tf.errors.NotFoundError, match="Key v1 not found"):
            tf.train.Saver([v1]).restore(sess, path)
        with pytest.raises(tf.errors.InvalidArgumentError, match="shapes"):
            tf.train.Saver({"renamed": v1}).restore(sess, path)
        with pytest.raises(ValueError, match="None"):
            tf.train.Saver([v1]).restore(sess, None)


def _read_events(logdir):
    """Every event of `logdir`, read with tensorboard's own record reader and protos."""
    require("tensorboard")
    from tensorboard.compat.proto import event_pb2
    from tensorboard.compat.tensorflow_stub import errors as tb_errors
    from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import PyRecordReader_New

    (path,) = glob.glob(os.path.join(logdir, "events.out.tfevents.*"))
    reader, events = PyRecordReader_New(path), []
    while True:
        try:
            reader.GetNext()
        except tb_errors.OutOfRangeError:
            return events
        events.append(event_pb2.Event.FromString(reader.record()))


def test_summaries_match_tf_and_file_writer_is_readable(tmp_path):
    require("tensorboard")
    v1, w, _, _ = _model()
    with tf.name_scope("train"):
        loss = tf.summary.scalar("loss", tf.reduce_sum(v1))
    tf.summary.histogram("w", w)
    merged = tf.summary.merge_all()
    assert loss.op.name == "train/loss" and loss.dtype == tf.string
    writer = tf.summary.FileWriter(str(tmp_path))
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        writer.add_summary(sess.run(merged), global_step=7)
        sess.run(tf.assign(v1, [2.0, 2.5]))
        writer.add_summary(sess.run(loss), 8)
    writer.close()
    events = _read_events(str(tmp_path))
    assert events[0].file_version == "brain.Event:2"
    assert [e.step for e in events[1:]] == [7, 8]
    values = {v.tag: v for v in events[1].summary.value}
    assert values["train/loss"].simple_value == 3.0
    h = values["w"].histo
    assert (h.min, h.max, h.num, h.sum, h.sum_squares) == pytest.approx(TF_HISTO[:5], rel=1e-7)
    np.testing.assert_allclose(list(h.bucket_limit), TF_HISTO[5], rtol=1e-12)
    assert list(h.bucket) == TF_HISTO[6]
    assert events[2].summary.value[0].simple_value == 4.5


def test_initializable_and_one_shot_iterators_match_tf():
    ds = tf.data.Dataset.from_tensor_slices((np.arange(5, dtype=np.float32), np.arange(5))).batch(2)
    assert ds.output_types == (tf.float32, tf.int64)
    assert [s.as_list() for s in ds.output_shapes] == [[None], [None]]
    it = ds.make_initializable_iterator()
    x, y = it.get_next()
    one = tf.data.make_one_shot_iterator(tf.data.Dataset.range(3)).get_next()
    with tf.Session() as sess:
        with pytest.raises(tf.errors.FailedPreconditionError):
            sess.run(x)
        sess.run(it.initializer)
        got = []
        with pytest.raises(tf.errors.OutOfRangeError):
            while True:
                got.append([a.tolist() for a in sess.run([x, y])])
        assert got == TF_BATCHES
        sess.run(it.initializer)  # restarts
        assert sess.run(x * 2.0).tolist() == [0.0, 2.0]
        assert [int(sess.run(one)) for _ in range(3)] == [0, 1, 2]
        with pytest.raises(tf.errors.OutOfRangeError):
            sess.run(one)


def test_iterator_from_structure_is_bound_by_make_initializer():
    train = tf.data.Dataset.from_tensor_slices(np.float32([1.0, 2.0]))
    test = tf.data.Dataset.from_tensor_slices(np.float32([10.0]))
    it = tf.data.Iterator.from_structure(train.output_types, train.output_shapes)
    nxt = it.get_next()
    init_train, init_test = it.make_initializer(train), it.make_initializer(test)
    with tf.Session() as sess:
        sess.run(init_train)
        assert [sess.run(nxt) for _ in range(2)] == [1.0, 2.0]
        sess.run(init_test)
        assert sess.run(nxt) == 10.0


def test_tf_logging_goes_to_the_tensorflow_logger(caplog):
    tf.logging.set_verbosity(tf.logging.INFO)
    assert tf.logging.get_verbosity() == tf.logging.INFO == 20
    with caplog.at_level(tf.logging.INFO, logger="tensorflow"):
        tf.logging.info("step %d", 10)
        tf.logging.debug("hidden")
    assert [(r.name, r.getMessage()) for r in caplog.records] == [("tensorflow", "step 10")]
