"""TFRecord files and `tf.train.Example` against TensorFlow: the same messages serialize to
the same bytes, files written by one are read by the other (plain, GZIP, ZLIB), corruption
is reported as TensorFlow reports it, and parsing gives TensorFlow's values."""

import os

import numpy as np
import pytest

import keratron.compat.v1 as tf1
import keratron.compat.v2 as tf2
from keratron.compat.v1.tfrecord import DataLossError
from tests.conftest import require

pytestmark = pytest.mark.interop


def _tf():
    tf = require("tensorflow")
    return tf


def _messages(T):
    """The same messages built with TensorFlow's or keratron's `tf.train` (T)."""
    f = T.Feature
    return {
        "floats": T.Example(features=T.Features(feature={
            "x": f(float_list=T.FloatList(value=[1.5, 0.1, -0.0, 3.4e38, 1e-40, -7.0]))})),
        "ints": T.Example(features=T.Features(feature={
            "n": f(int64_list=T.Int64List(value=[0, 1, -2, 300, 2**63 - 1, -(2**63)]))})),
        "bytes": T.Example(features=T.Features(feature={
            "s": f(bytes_list=T.BytesList(value=[b"hi", b"", bytes(range(256))]))})),
        "empty_kinds": T.Example(features=T.Features(feature={
            "e": f(float_list=T.FloatList()), "none": f(), "": f(int64_list=T.Int64List())})),
        "many": T.Example(features=T.Features(feature={
            k: f(int64_list=T.Int64List(value=[i])) for i, k in enumerate("qwertyuiop")})),
        "empty": T.Example(),
        "empty_features": T.Example(features=T.Features()),
        "sequence": T.SequenceExample(
            context=T.Features(feature={"len": f(int64_list=T.Int64List(value=[2]))}),
            feature_lists=T.FeatureLists(feature_list={
                "tok": T.FeatureList(feature=[f(float_list=T.FloatList(value=[1.0])),
                                              f(float_list=T.FloatList(value=[2.0, 3.0]))]),
                "w": T.FeatureList()})),
    }  # fmt: skip


def test_examples_serialize_to_tensorflows_bytes_and_parse_both_ways():
    tf = _tf()
    theirs, ours = _messages(tf.train), _messages(tf2.train)
    for name, message in ours.items():
        # TF writes map entries in hash order by default; its deterministic form sorts keys.
        expected = theirs[name].SerializeToString(deterministic=True)
        assert message.SerializeToString() == expected, name
        assert type(message).FromString(expected) == message, name
        back = type(theirs[name]).FromString(message.SerializeToString())
        assert back == theirs[name], name
        assert str(type(message).FromString(expected)).count("{") == str(back).count("{"), name
    one = ours["floats"].features.feature["x"].float_list.value
    assert one == list(theirs["floats"].features.feature["x"].float_list.value)  # float32
    assert ours["empty"] != ours["empty_features"]
    assert theirs["empty"] != theirs["empty_features"]


def test_fields_are_built_and_checked_as_tensorflow_does():
    tf = _tf()
    for T in (tf.train, tf1.train):
        ex = T.Example()
        ex.features.feature["x"].int64_list.value.extend(np.arange(3))
        ex.features.feature["x"].int64_list.value.append(-5)
        ex.features.feature["y"].float_list.value.append(np.float32(0.5))
        feat = T.Feature(float_list=T.FloatList(value=[1.0]), int64_list=T.Int64List(value=[2]))
        feat.bytes_list.value.append(b"z")
        assert feat.WhichOneof("kind") == "bytes_list"
        for bad, error in [
            (lambda T=T: T.BytesList(value=["text"]), TypeError),
            (lambda T=T: T.Int64List(value=[1.5]), TypeError),
            (lambda T=T: T.FloatList(value=["1"]), TypeError),
            (lambda T=T: T.Int64List(value=[2**63]), ValueError),
            (lambda T=T: T.Feature(floats=T.FloatList()), ValueError),
        ]:
            with pytest.raises(error):
                bad()
    ours = tf1.train.Example()
    ours.features.feature["x"].int64_list.value.extend(np.arange(3))
    ours.features.feature["x"].int64_list.value.append(-5)
    ours.features.feature["y"].float_list.value.append(np.float32(0.5))
    assert ours.SerializeToString() == ex.SerializeToString(deterministic=True)
    for T in (tf.train, tf2.train):
        with pytest.raises(Exception) as info:
            T.Example.FromString(b"\x0a\x05ab")  # a length past the end
        assert type(info.value).__name__ == "DecodeError"
        assert "Error parsing message with type 'tensorflow.Example'" in str(info.value)


def test_unpacked_repeated_numbers_parse_as_tensorflow_parses_them():
    tf = _tf()
    floats = bytes.fromhex("0d0000803f0d000000c0") + bytes.fromhex("0a040000403f")  # + packed
    ints = bytes.fromhex("0801087f08feffffffffffffffff01")
    for raw, name in [(floats, "FloatList"), (ints, "Int64List")]:
        expected = list(getattr(tf.train, name).FromString(raw).value)
        assert list(getattr(tf1.train, name).FromString(raw).value) == expected
    unknown = bytes.fromhex("10051a0178") + tf.train.Example().SerializeToString()
    assert tf1.train.Features.FromString(unknown) == tf1.train.Features()


RECORDS = [b"hello", b"", bytes(range(256)) * 9 + b"tail", b"text"]


@pytest.mark.parametrize("compression", ["", "GZIP", "ZLIB"])
def test_tensorflow_files_read_by_keratron(tmp_path, compression):
    tf = _tf()
    path = str(tmp_path / "tf.tfrecord")
    with tf.io.TFRecordWriter(path, tf.io.TFRecordOptions(compression)) as writer:
        for r in RECORDS:
            writer.write(r)
    assert list(tf1.python_io.tf_record_iterator(path, compression or None)) == RECORDS
    options = tf1.io.TFRecordOptions(compression_type=compression)
    assert list(tf1.io.tf_record_iterator(path, options)) == RECORDS
    ds = tf2.data.TFRecordDataset([path, path], compression_type=compression)
    assert list(ds) == RECORDS * 2


def test_files_interleave_in_tensorflows_order(tmp_path):
    tf = _tf()
    files = []
    for name, n in [("a", 1), ("b", 3), ("c", 2), ("d", 2)]:
        files.append(str(tmp_path / name))
        with tf.io.TFRecordWriter(files[-1]) as writer:
            for i in range(n):
                writer.write(f"{name}{i}".encode())
    for cycle in (2, 3):
        theirs = tf.data.TFRecordDataset(files, num_parallel_reads=cycle)
        ours = tf2.data.TFRecordDataset(files, num_parallel_reads=cycle)
        assert list(ours) == [r.numpy() for r in theirs], cycle
    from_dataset = tf2.data.TFRecordDataset(tf2.data.Dataset.from_tensor_slices(files))
    assert list(from_dataset) == [r.numpy() for r in tf.data.TFRecordDataset(files)]


@pytest.mark.parametrize("compression", ["", "GZIP", "ZLIB"])
def test_keratron_files_read_by_tensorflow(tmp_path, compression):
    tf = _tf()
    path = str(tmp_path / "ours.tfrecord")
    with tf1.python_io.TFRecordWriter(path, compression) as writer:
        for r in RECORDS:
            writer.write(r)
        writer.write("str record")
    expected = RECORDS + [b"str record"]
    assert [r.numpy() for r in tf.data.TFRecordDataset(path, compression)] == expected
    assert list(tf.compat.v1.io.tf_record_iterator(path, compression)) == expected
    dropped = str(tmp_path / "dropped.tfrecord")
    writer = tf1.io.TFRecordWriter(dropped, tf1.io.TFRecordOptions(compression))
    writer.write(b"unclosed")
    del writer
    assert list(tf.compat.v1.io.tf_record_iterator(dropped, compression)) == [b"unclosed"]
    reference = str(tmp_path / "tf.tfrecord")
    with tf.io.TFRecordWriter(reference, compression) as writer:
        for r in expected:
            writer.write(r)
    with open(path, "rb") as a, open(reference, "rb") as b:
        assert a.read() == b.read()  # the framing, every CRC32C and the zlib stream


def _write(path, data: bytes):
    with open(path, "wb") as f:
        f.write(data)


def test_corrupt_and_truncated_files_raise_data_loss(tmp_path):
    tf = _tf()
    good = str(tmp_path / "good.tfrecord")
    with tf.io.TFRecordWriter(good) as writer:
        for r in RECORDS:
            writer.write(r)
    with open(good, "rb") as f:
        data = f.read()
    second = 16 + len(RECORDS[0])  # byte offset of record 1
    cases = {
        "data.tfrecord": (data[:14] + bytes([data[14] ^ 1]) + data[15:], "record 0 at byte 0"),
        "length.tfrecord": (data[:second] + b"\xff" + data[second + 1 :],
                            f"record 1 at byte {second}"),
        "short.tfrecord": (data[:-3], "truncated"),
        "text.tfrecord": (b"not a tfrecord file at all", "is this a TFRecord file?"),
    }  # fmt: skip
    for name, (content, message) in cases.items():
        path = str(tmp_path / name)
        _write(path, content)
        with pytest.raises(tf.errors.DataLossError):
            list(tf.compat.v1.io.tf_record_iterator(path))
        with pytest.raises(DataLossError) as info:
            list(tf1.io.tf_record_iterator(path))
        assert message in str(info.value) and name in str(info.value), str(info.value)
        with pytest.raises(ValueError, match=name):
            list(tf2.data.TFRecordDataset(path))
    assert list(tf1.io.tf_record_iterator(good)) == RECORDS
    for compression in ("GZIP", "ZLIB"):
        path = str(tmp_path / f"cut.{compression}")
        with tf.io.TFRecordWriter(path, compression) as writer:
            for r in RECORDS:
                writer.write(r)
        with open(path, "rb") as f:
            _write(path, f.read()[:-60])  # TensorFlow stops silently on shorter cuts
        with pytest.raises(tf.errors.DataLossError):
            list(tf.compat.v1.io.tf_record_iterator(path, compression))
        with pytest.raises(DataLossError, match=f"{compression} data is invalid or truncated"):
            list(tf1.io.tf_record_iterator(path, compression))
    with pytest.raises(tf1.errors.NotFoundError):
        list(tf1.io.tf_record_iterator(str(tmp_path / "missing.tfrecord")))


def _example(T, **features):
    feature = {}
    for key, values in features.items():
        kind = np.asarray(values).dtype.kind  # [] is a float list
        if kind == "f":
            feature[key] = T.Feature(float_list=T.FloatList(value=values))
        elif kind == "i":
            feature[key] = T.Feature(int64_list=T.Int64List(value=values))
        else:
            feature[key] = T.Feature(bytes_list=T.BytesList(value=values))
    return T.Example(features=T.Features(feature=feature)).SerializeToString()


def _spec(io, tf):
    return {
        "x": io.FixedLenFeature([2], tf.float32),
        "n": io.FixedLenFeature([], tf.int64, default_value=-1),
        "m": io.FixedLenFeature([1, 2], tf.float32, default_value=[[7.0, 8.0]]),
        "label": io.FixedLenFeature([], tf.string, default_value=b"?"),
        "v": io.VarLenFeature(tf.int64),
        "w": io.VarLenFeature(tf.float32),
        "s": io.VarLenFeature(tf.string),
    }


def _numpy(value):
    if hasattr(value, "indices"):  # a SparseTensor
        return tuple(_numpy(getattr(value, k)) for k in ("indices", "values", "dense_shape"))
    a = np.asarray(value.numpy() if hasattr(value, "numpy") else value)
    return a.astype(object) if a.dtype.kind in "SO" else a


def _assert_same(ours: dict, theirs: dict):
    assert sorted(ours) == sorted(theirs)
    for key in theirs:
        a, b = _numpy(ours[key]), _numpy(theirs[key])
        for x, y in zip(a, b) if isinstance(a, tuple) else [(a, b)]:
            assert x.dtype == y.dtype and x.shape == y.shape, (key, x, y)
            assert x.tolist() == y.tolist(), (key, x, y)


def _records(T):
    return [
        _example(T, x=[1.0, 2.5], n=[3], v=[1, 2, 3], s=[b"ab", b"c"], label=[b"cat"]),
        _example(T, x=[-1.0, 0.1], w=[0.5], m=[1.0, 2.0]),
        _example(T, x=[4.0, 5.0], v=[9], w=[]),
    ]


def test_parse_single_example_and_parse_example_match_tensorflow():
    tf = _tf()
    records = _records(tf.train)  # map entries in TensorFlow's (hash) order
    ours = [tf1.train.Example.FromString(r) for r in _records(tf1.train)]
    assert [tf1.train.Example.FromString(r) for r in records] == ours
    spec, theirs_spec = _spec(tf1.io, tf1), _spec(tf.io, tf)
    for r in records:
        _assert_same(tf1.parse_single_example(r, spec), tf.io.parse_single_example(r, theirs_spec))
    _assert_same(tf2.io.parse_example(records, spec), tf.io.parse_example(records, theirs_spec))
    one = records[1:2]
    _assert_same(tf1.io.parse_example(one, spec), tf.io.parse_example(one, theirs_spec))
    theirs = tf.io.FixedLenFeature([2], tf.float32)
    assert repr(tf1.FixedLenFeature([2], tf1.float32)) == repr(theirs)


def test_parse_errors_match_tensorflow():
    tf = _tf()
    record = _example(tf.train, x=[1.0, 2.0], n=[3])
    cases = [
        (lambda lib: {"q": lib.io.FixedLenFeature([], lib.float32)},
         "Feature: q \\(data type: float\\) is required"),
        (lambda lib: {"x": lib.io.FixedLenFeature([3], lib.float32)},
         "Key: x.  Can't parse serialized Example"),
        (lambda lib: {"x": lib.io.FixedLenFeature([2], lib.int64)},
         "Data types don't match. Data type: float but expected type: int64"),
        (lambda lib: {"x": lib.io.VarLenFeature(lib.int64)},
         "Data types don't match. Expected type: int64, Actual type: float"),
    ]  # fmt: skip
    for spec, message in cases:
        for lib in (tf, tf1):
            with pytest.raises(lib.errors.InvalidArgumentError, match=message):
                lib.io.parse_single_example(record, spec(lib))
    for lib in (tf, tf1):
        with pytest.raises(lib.errors.InvalidArgumentError, match="Could not parse example input"):
            lib.io.parse_single_example(b"garbage", {"x": lib.io.VarLenFeature(lib.int64)})


def test_dataset_map_pipeline_matches_tensorflow(tmp_path):
    tf = _tf()
    path = str(tmp_path / "train.tfrecord")
    with tf.io.TFRecordWriter(path, "GZIP") as writer:
        for i in range(5):
            writer.write(_example(tf.train, x=[float(i), i / 3.0], y=[i % 2]))

    def pipeline(lib, io):
        spec = {"x": io.FixedLenFeature([2], lib.float32), "y": io.FixedLenFeature([], lib.int64)}

        def parse(record):
            features = io.parse_single_example(record, spec)
            return features["x"], features["y"]

        return lib.data.TFRecordDataset(path, compression_type="GZIP").map(parse).batch(2)

    theirs = [(x.numpy(), y.numpy()) for x, y in pipeline(tf, tf.io)]
    ours = [(x.numpy(), y.numpy()) for x, y in pipeline(tf2, tf2.io)]
    assert len(ours) == len(theirs) == 3
    for (a, b), (c, d) in zip(ours, theirs):
        assert a.dtype == c.dtype and b.dtype == d.dtype
        np.testing.assert_array_equal(a, c)
        np.testing.assert_array_equal(b, d)

    tf1.reset_default_graph()
    x, y = tf1.data.make_one_shot_iterator(pipeline(tf1, tf1.io)).get_next()
    with tf1.Session() as sess:
        for c, d in theirs:
            a, b = sess.run([x, y])
            np.testing.assert_array_equal(a, c)
            np.testing.assert_array_equal(b, d)
        with pytest.raises(tf1.errors.OutOfRangeError):
            sess.run(x)
    assert os.path.getsize(path) > 0


def _sequence_example(T):
    f = T.Feature
    return T.SequenceExample(
        context=T.Features(feature={"len": f(int64_list=T.Int64List(value=[2])),
                                    "name": f(bytes_list=T.BytesList(value=[b"ab"]))}),
        feature_lists=T.FeatureLists(feature_list={
            "tok": T.FeatureList(feature=[f(float_list=T.FloatList(value=[1.0, 2.0])),
                                          f(float_list=T.FloatList(value=[3.0, 4.0]))]),
            "ids": T.FeatureList(feature=[f(int64_list=T.Int64List(value=[1])),
                                          f(int64_list=T.Int64List(value=[2, 3, 4])),
                                          f(int64_list=T.Int64List())])}),
    ).SerializeToString()  # fmt: skip


def test_sequence_features_match_tensorflow():
    tf = _tf()
    record = _sequence_example(tf.train)

    def specs(lib):
        context = {
            "len": lib.io.FixedLenFeature([], lib.int64),
            "name": lib.io.FixedLenFeature([], lib.string),
            "miss": lib.io.FixedLenFeature([], lib.float32, default_value=1.5),
        }
        sequence = {
            "tok": lib.io.FixedLenSequenceFeature([2], lib.float32),
            "ids": lib.io.VarLenFeature(lib.int64),
            "none": lib.io.FixedLenSequenceFeature([], lib.int64, allow_missing=True),
            "absent": lib.io.VarLenFeature(lib.float32),
        }
        return context, sequence

    ours = tf1.parse_single_sequence_example(record, *specs(tf1))
    theirs = tf.io.parse_single_sequence_example(record, *specs(tf))
    _assert_same(ours[0], theirs[0])
    _assert_same(ours[1], theirs[1])
    for lib in (tf, tf1):
        with pytest.raises(
            lib.errors.InvalidArgumentError, match="Feature list 'none' is required"
        ):
            lib.io.parse_single_sequence_example(
                record, sequence_features={"none": lib.io.FixedLenSequenceFeature([], lib.int64)}
            )
        with pytest.raises(lib.errors.InvalidArgumentError, match="unexpected number of values"):
            lib.io.parse_single_sequence_example(
                record, sequence_features={"tok": lib.io.FixedLenSequenceFeature([3], lib.float32)}
            )

    # In Examples, FixedLenSequenceFeature reads any multiple of its shape; batches are padded.
    x = [_example(tf.train, x=[1.0, 2.0, 3.0, 4.0]), _example(tf.train, x=[5.0, 6.0])]
    x.append(tf.train.Example().SerializeToString())
    for default in (None, -1.0):
        spec = {"x": tf1.io.FixedLenSequenceFeature([2], tf1.float32, True, default)}
        theirs_spec = {"x": tf.io.FixedLenSequenceFeature([2], tf.float32, True, default)}
        _assert_same(tf1.io.parse_example(x, spec), tf.io.parse_example(x, theirs_spec))
        _assert_same(
            tf1.io.parse_single_example(x[0], spec), tf.io.parse_single_example(x[0], theirs_spec)
        )


def test_dropped_messages_are_freed_at_once():
    import gc
    import weakref

    record = _sequence_example(tf1.train)
    gc.disable()  # freed by reference counting alone: messages and fields form no cycle
    try:
        message = tf1.train.SequenceExample.FromString(record)
        message.feature_lists.feature_list["new"].feature.add().float_list.value.append(1.0)
        refs = [weakref.ref(message), weakref.ref(message.feature_lists.feature_list["tok"])]
        del message
        assert [r() for r in refs] == [None, None]
    finally:
        gc.enable()


def test_graph_reader_and_parsing_match_tensorflow(tmp_path):
    import contextlib

    tf = _tf()
    path = str(tmp_path / "graph.tfrecord")
    with tf.io.TFRecordWriter(path, "ZLIB") as writer:
        for i in range(4):
            v = {"v": list(range(i))} if i else {}  # the first has no "v"
            writer.write(_example(tf.train, x=[float(i), i + 0.5], **v))

    def run(lib, graph):
        # A TF1 queue pipeline: file queue -> TFRecordReader -> parse_single_example.
        with graph:
            queue = lib.train.string_input_producer([path], num_epochs=1, shuffle=False)
            _, value = lib.TFRecordReader(options="ZLIB").read(queue)
            features = {
                "x": lib.FixedLenFeature([2], lib.float32),
                "v": lib.VarLenFeature(lib.int64),
            }
            parsed = lib.parse_single_example(value, features)
            v = parsed["v"]
            fetches = [parsed["x"], v.indices, v.values, v.dense_shape]
            init = lib.local_variables_initializer()
            with lib.Session() as sess:
                sess.run(init)
                coord = lib.train.Coordinator()
                threads = lib.train.start_queue_runners(sess, coord)
                out = [[a.tolist() for a in sess.run(fetches)] for _ in range(4)]
                with pytest.raises(lib.errors.OutOfRangeError):
                    sess.run(fetches)
                coord.request_stop()
                coord.join(threads)
        return out

    theirs = run(tf.compat.v1, tf.Graph().as_default())
    tf1.reset_default_graph()
    assert run(tf1, contextlib.nullcontext()) == theirs
