"""`tf.image`, queues, readers, decoders, `train.batch` / `shuffle_batch`, `QueueRunner` and
`Coordinator` (keratron.compat.v1) against TensorFlow and numpy.

The deterministic image ops are one program (tf1_image_program.py) whose TensorFlow output is
recorded in tf1_image_tf.json; the CSV pipeline below printed CSV_PIPELINE_TF under TensorFlow
2.20, and the in-memory pipeline (slice_input_producer, with the queues' fill-fraction
summaries) printed SLICE_PIPELINE_TF (`test_pipeline_under_tensorflow_prints_the_same` reruns
both there). The random image ops and the binary-record pipeline are checked against numpy.
"""

import contextlib
import io
import json
import os
import subprocess
import sys
import threading

import numpy as np
import pytest

import keratron.compat.v1 as tf
from tests import provenance
from tests.compat import tf1_image_program
from tests.conftest import require_installed

HERE = os.path.dirname(__file__)
with open(os.path.join(HERE, "tf1_image_tf.json")) as f:
    IMAGE_TF = json.load(f)


@pytest.fixture
def graph():
    with tf.Graph().as_default() as g:
        yield g


@pytest.fixture(scope="module")
def image_out():
    with tf.Graph().as_default():
        return tf1_image_program.run(tf)


@pytest.mark.parametrize("key", sorted(IMAGE_TF))
def test_image_op_matches_tensorflow(image_out, key):
    np.testing.assert_allclose(image_out[key], IMAGE_TF[key], rtol=1e-5, atol=2e-6)


def test_random_image_ops_draw_within_their_ranges(graph):
    tf.set_random_seed(1)
    img = np.arange(4 * 5 * 3, dtype=np.float32).reshape(4, 5, 3) / 60.0
    x = tf.constant(img)
    crop = tf.image.random_crop(x, [2, 3, 3])
    flip = tf.image.random_flip_left_right(tf.stack([x, x, x, x]))
    bright = tf.image.random_brightness(x, max_delta=0.3)
    contrast = tf.image.random_contrast(x, lower=0.2, upper=1.8)
    assert crop.shape.as_list() == [2, 3, 3]
    windows = {img[i : i + 2, j : j + 3].tobytes() for i in range(3) for j in range(3)}
    mean = img.mean(axis=(0, 1), keepdims=True)
    seen_crops, seen_flips = set(), set()
    with tf.Session() as sess:
        for _ in range(30):
            c, fl, b, ct = sess.run([crop, flip, bright, contrast])
            assert c.tobytes() in windows
            seen_crops.add(c.tobytes())
            for im in fl:
                same, flipped = np.array_equal(im, img), np.array_equal(im, img[:, ::-1])
                assert same or flipped
                seen_flips.add(flipped)
            delta = b - img
            assert np.allclose(delta, delta.flat[0], atol=1e-6) and abs(delta.flat[0]) <= 0.3
            factor = (ct - mean) / (img - mean)
            ok = np.isfinite(factor)
            assert np.allclose(factor[ok], factor[ok][0], atol=1e-4)
            assert 0.2 - 1e-4 <= factor[ok][0] <= 1.8 + 1e-4
    assert len(seen_crops) > 3 and seen_flips == {True, False}


def test_strided_slice_takes_tf_begin_end_strides_and_masks(graph):
    a = np.arange(10)
    x = tf.constant(a)
    m = tf.reshape(x, [2, 5])
    with tf.Session() as sess:
        got = sess.run([
            tf.strided_slice(x, [1], [7], [2]),
            tf.strided_slice(x, [3], [4], shrink_axis_mask=1),
            tf.strided_slice(m, [0, 1], [0, 3], begin_mask=1, end_mask=1),
            x[2:4],
        ])  # fmt: skip
    np.testing.assert_array_equal(got[0], a[1:7:2])
    assert got[1] == a[3]
    np.testing.assert_array_equal(got[2], a.reshape(2, 5)[:, 1:3])
    np.testing.assert_array_equal(got[3], a[2:4])


# ---------------------------------------------------------------------------- pipelines
CSV_PIPELINE = """
import os, sys, tempfile
import numpy as np
import keratron.compat.v1 as tf
d = tempfile.mkdtemp()
for i in range(2):
    with open(os.path.join(d, f"f{i}.csv"), "w") as f:
        f.write("a,b,c\\n")
        for j in range(5):
            f.write(f"{i * 10 + j},{j * 0.5},{j % 2}\\n")
names = [os.path.join(d, f"f{i}.csv") for i in range(2)]
fq = tf.train.string_input_producer(names, num_epochs=2, shuffle=False)
reader = tf.TextLineReader(skip_header_lines=1)
key, value = reader.read(fq)
c1, c2, c3 = tf.decode_csv(value, record_defaults=[[0], [0.0], [0]])
feats = tf.stack([tf.cast(c1, tf.float32), c2])
xb, yb = tf.train.batch([feats, c3], batch_size=3)
with tf.Session() as sess:
    sess.run(tf.local_variables_initializer())
    coord = tf.train.Coordinator()
    threads = tf.train.start_queue_runners(sess, coord)
    n = 0
    try:
        while True:
            x, y = sess.run([xb, yb])
            print(x.tolist(), y.tolist())
            n += 1
    except tf.errors.OutOfRangeError:
        print("done", n)
    finally:
        coord.request_stop()
    coord.join(threads)
"""

# Printed by TensorFlow 2.20 (tf.compat.v1) for CSV_PIPELINE with the import line changed.
CSV_PIPELINE_TF = """[[0.0, 0.0], [1.0, 0.5], [2.0, 1.0]] [0, 1, 0]
[[3.0, 1.5], [4.0, 2.0], [10.0, 0.0]] [1, 0, 0]
[[11.0, 0.5], [12.0, 1.0], [13.0, 1.5]] [1, 0, 1]
[[14.0, 2.0], [0.0, 0.0], [1.0, 0.5]] [0, 0, 1]
[[2.0, 1.0], [3.0, 1.5], [4.0, 2.0]] [0, 1, 0]
[[10.0, 0.0], [11.0, 0.5], [12.0, 1.0]] [0, 1, 0]
done 6
"""


SLICE_PIPELINE = """import numpy as np
import keratron.compat.v1 as tf
X = np.arange(10, dtype=np.float32).reshape(5, 2)
Y = np.arange(5, dtype=np.int32) * 10
x, y = tf.train.slice_input_producer([X, Y], num_epochs=2, shuffle=False)
xb, yb = tf.train.batch([x, y], batch_size=4, allow_smaller_final_batch=True)
for s in sorted(s.op.name for s in tf.get_collection(tf.GraphKeys.SUMMARIES)):
    print(s)
with tf.Session() as sess:
    sess.run(tf.local_variables_initializer())
    coord = tf.train.Coordinator()
    threads = tf.train.start_queue_runners(sess, coord)
    try:
        while True:
            a, b = sess.run([xb, yb])
            print(a.tolist(), b.tolist())
    except tf.errors.OutOfRangeError:
        print("end")
    coord.request_stop()
    coord.join(threads)
"""

# Printed by TensorFlow 2.20 (tf.compat.v1) for SLICE_PIPELINE with the import line changed.
SLICE_PIPELINE_TF = """batch/fraction_of_32_full
input_producer/input_producer/fraction_of_32_full
[[0.0, 1.0], [2.0, 3.0], [4.0, 5.0], [6.0, 7.0]] [0, 10, 20, 30]
[[8.0, 9.0], [0.0, 1.0], [2.0, 3.0], [4.0, 5.0]] [40, 0, 10, 20]
[[6.0, 7.0], [8.0, 9.0]] [30, 40]
end
"""


# The fingerprint (tests/provenance.py) of the two pipelines and what TensorFlow printed for
# them, as `test_pipeline_under_tensorflow_prints_the_same` last passed on them.
CHECKED = "9a9130050507f185"
_TF_IMPORT = "import tensorflow.compat.v1 as tf\ntf.disable_v2_behavior()\n"


def _assert_checked():
    provenance.assert_checked(
        CHECKED, "the pipelines or their recordings", "TensorFlow 2.20",
        CSV_PIPELINE, CSV_PIPELINE_TF, SLICE_PIPELINE, SLICE_PIPELINE_TF, _TF_IMPORT,
    )  # fmt: skip


def test_recordings_were_checked_on_these_pipelines():
    _assert_checked()


def _run_program(source, **environ):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", **environ)
    out = subprocess.run(
        [sys.executable, "-c", source], env=env, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout


def _exec_here(source):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(source, "<program>", "exec"), {"__name__": "__program__"})
    return out.getvalue()


def test_csv_pipeline_prints_what_tensorflow_printed():
    assert _exec_here(CSV_PIPELINE) == CSV_PIPELINE_TF


def test_slice_pipeline_prints_what_tensorflow_printed():
    with tf.Graph().as_default():
        assert _exec_here(SLICE_PIPELINE) == SLICE_PIPELINE_TF


@pytest.mark.interop
@pytest.mark.slow
@pytest.mark.provenance
def test_pipeline_under_tensorflow_prints_the_same():
    _assert_checked()
    # A subprocess: TensorFlow and triton must not share a process (both bundle LLVM).
    require_installed("tensorflow")
    for program, printed in ((CSV_PIPELINE, CSV_PIPELINE_TF), (SLICE_PIPELINE, SLICE_PIPELINE_TF)):
        source = program.replace("import keratron.compat.v1 as tf\n", _TF_IMPORT)
        assert _run_program(source, KERAS_BACKEND="tensorflow") == printed


def _write_records(path, labels, images):
    with open(path, "wb") as f:
        for lab, im in zip(labels, images):
            f.write(bytes([lab]) + im.transpose(2, 0, 1).tobytes())


def test_binary_records_decode_as_numpy_reads_them(graph, tmp_path):
    # The CIFAR-10 record layout: a label byte, then the image as depth, height, width.
    rng = np.random.RandomState(0)
    images = rng.randint(0, 256, size=(5, 2, 3, 3)).astype(np.uint8)
    labels = [3, 1, 4, 1, 5]
    path = str(tmp_path / "data_batch_1.bin")
    _write_records(path, labels, images)
    queue = tf.train.string_input_producer([path], num_epochs=1, shuffle=False)
    reader = tf.FixedLengthRecordReader(record_bytes=1 + 18)
    _, value = reader.read(queue)
    record = tf.decode_raw(value, tf.uint8)
    label = tf.cast(tf.strided_slice(record, [0], [1]), tf.int32)
    depth_major = tf.reshape(tf.strided_slice(record, [1], [19]), [3, 2, 3])
    image = tf.cast(tf.transpose(depth_major, [1, 2, 0]), tf.float32)
    label.set_shape([1])
    image.set_shape([2, 3, 3])
    img_b, lab_b = tf.train.batch([image, label], batch_size=2, allow_smaller_final_batch=True)
    got_i, got_l = [], []
    with tf.Session() as sess:
        coord = tf.train.Coordinator()
        threads = tf.train.start_queue_runners(sess, coord)
        with pytest.raises(tf.errors.OutOfRangeError):
            while True:
                i, lab = sess.run([img_b, lab_b])
                got_i.append(i)
                got_l.append(lab)
        coord.request_stop()
        coord.join(threads)
    assert [len(b) for b in got_i] == [2, 2, 1]
    np.testing.assert_array_equal(np.concatenate(got_i), images.astype(np.float32))
    np.testing.assert_array_equal(np.concatenate(got_l).ravel(), labels)


def test_shuffle_batch_yields_every_element_once_in_another_order(graph):
    values = np.arange(40, dtype=np.int32)
    q = tf.FIFOQueue(40, tf.int32, shapes=[[]])
    fill = q.enqueue_many([values])
    close = q.close()
    batch = tf.train.shuffle_batch(
        [q.dequeue()], batch_size=8, capacity=20, min_after_dequeue=10, seed=7
    )[0]
    out = []
    with tf.Session() as sess:
        sess.run(fill)
        sess.run(close)
        coord = tf.train.Coordinator()
        threads = tf.train.start_queue_runners(sess, coord)
        try:
            while True:
                out.extend(sess.run(batch).tolist())
        except tf.errors.OutOfRangeError:
            pass
        coord.request_stop()
        coord.join(threads)
    assert sorted(out) == values.tolist()
    assert out != values.tolist()


def test_queue_ops_block_close_and_end_as_tf_does(graph):
    q = tf.FIFOQueue(2, [tf.float32, tf.int32], shapes=[[2], []])
    enq = q.enqueue(([1.0, 2.0], 7))
    size = q.size()
    x, n = q.dequeue()
    many = q.dequeue_many(2)
    close = q.close()
    with tf.Session() as sess:
        sess.run(enq)
        sess.run(enq)
        assert sess.run(size) == 2
        blocked = threading.Thread(target=sess.run, args=(enq,), daemon=True)
        blocked.start()
        blocked.join(0.3)
        assert blocked.is_alive()  # full: the enqueue waits
        a, b = sess.run([x, n])
        blocked.join(5)
        assert not blocked.is_alive()
        np.testing.assert_array_equal(a, [1.0, 2.0])
        assert b == 7
        assert sess.run(size) == 2
        sess.run(close)
        with pytest.raises(tf.errors.CancelledError, match="closed"):
            sess.run(enq)
        with pytest.raises(tf.errors.OutOfRangeError, match="insufficient"):
            sess.run(q.dequeue_many(3))
        assert sess.run(many)[0].shape == (2, 2)
        with pytest.raises(tf.errors.OutOfRangeError):
            sess.run(x)


def test_each_session_has_its_own_queue(graph):
    q = tf.FIFOQueue(5, tf.int32, shapes=[[]])
    enq = q.enqueue(3)
    size = q.size()
    with tf.Session() as s1, tf.Session() as s2:
        s1.run(enq)
        assert (s1.run(size), s2.run(size)) == (1, 0)


def test_coordinator_join_reraises_a_thread_error():
    coord = tf.train.Coordinator()

    def work():
        with coord.stop_on_exception():
            raise RuntimeError("reader failed")

    threads = [threading.Thread(target=work)]
    for t in threads:
        t.start()
    with pytest.raises(RuntimeError, match="reader failed"):
        coord.join(threads)
    clean = tf.train.Coordinator()
    clean.request_stop(tf.errors.OutOfRangeError(None, None, "end"))
    clean.join([])  # the end of input is a clean stop
    assert clean.should_stop() and clean.joined


def test_queue_runner_reports_enqueue_errors_to_the_coordinator(graph, tmp_path):
    path = tmp_path / "bad.csv"
    path.write_text("1,2\n3\n")
    fq = tf.train.string_input_producer([str(path)], shuffle=False)
    _, value = tf.TextLineReader().read(fq)
    a, b = tf.decode_csv(value, [[0], [0]])
    batch = tf.train.batch([a, b], batch_size=2)
    with tf.Session() as sess:
        coord = tf.train.Coordinator()
        threads = tf.train.start_queue_runners(sess, coord)
        with pytest.raises(tf.errors.OpError):
            sess.run(batch)
        with pytest.raises(tf.errors.InvalidArgumentError, match="Expect 2 fields but have 1"):
            coord.join(threads, stop_grace_period_secs=10)


@pytest.mark.parametrize(
    "build,error,match",
    [
        (lambda: tf.train.string_input_producer(tf.constant([1, 2])), TypeError, "list"),
        (lambda: tf.RandomShuffleQueue(4, 4, tf.float32), ValueError, "min_after_dequeue"),
        (lambda: tf.FIFOQueue(0, tf.float32), ValueError, "capacity"),
        (lambda: tf.train.batch([tf.placeholder(tf.float32)], 2), ValueError, "fully defined"),
        (lambda: tf.FIFOQueue(2, tf.float32).enqueue([1.0, 2.0]), ValueError, "components"),
        (lambda: tf.decode_raw(tf.constant([1]), tf.uint8), TypeError, "string tensor"),
        (lambda: tf.image.random_crop(tf.zeros([2, 2]), [3, 2]), ValueError, "size"),
        (lambda: tf.image.resize_images(tf.zeros([2, 2, 1]), [3, 3], 2), ValueError, "method"),
    ],
)
def test_bad_arguments_raise_clear_errors(graph, build, error, match):
    with pytest.raises(error, match=match):
        build()


def test_fetching_a_string_tensor_says_why_it_cannot(graph, tmp_path):
    path = tmp_path / "a.txt"
    path.write_text("x\n")
    fq = tf.train.string_input_producer([str(path)])
    key, value = tf.TextLineReader().read(fq)
    with tf.Session() as sess:
        coord = tf.train.Coordinator()
        threads = tf.train.start_queue_runners(sess, coord)
        with pytest.raises(TypeError, match="string tensors"):
            sess.run(value)
        coord.request_stop()
        coord.join(threads)
