import glob
import json
import os
import struct
import subprocess
import sys
import zlib

import numpy as np
import pytest

import keratron as keras
from tests.callbacks._helpers import StandInModel, drive, regression_data, regression_model
from tests.conftest import require


def _records(path):
    """The records of a TFRecord file, framing and CRCs checked with tensorboard's own
    checksum (its TensorFlow-free stub: importing TensorFlow beside torch's compiler aborts)."""
    from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c

    data = open(path, "rb").read()
    pos = 0
    while pos < len(data):
        header = data[pos : pos + 8]
        (length,) = struct.unpack("<Q", header)
        assert struct.unpack("<I", data[pos + 8 : pos + 12])[0] == masked_crc32c(header)
        body = data[pos + 12 : pos + 12 + length]
        crc = data[pos + 12 + length : pos + 16 + length]
        assert struct.unpack("<I", crc)[0] == masked_crc32c(body)
        yield body
        pos += 16 + length


def _events(run_dir):
    """{tag: [(step, value, plugin name)]} over every event file of one run directory."""
    require("tensorboard")
    from tensorboard.compat.proto import event_pb2
    from tensorboard.util import tensor_util

    files = sorted(glob.glob(os.path.join(run_dir, "events.out.tfevents.*")))
    assert files, f"no event file in {run_dir}"
    out = {}
    for path in files:
        events = [event_pb2.Event.FromString(r) for r in _records(path)]
        assert events[0].file_version == "brain.Event:2"
        for event in events:
            for value in event.summary.value:
                array = tensor_util.make_ndarray(value.tensor)
                out.setdefault(value.tag, []).append(
                    (event.step, array, value.metadata.plugin_data.plugin_name)
                )
    return out


def test_without_validation_data_there_is_no_validation_run(tmp_path):
    """Keras opens the validation writer only for `val_` logs: a fit without validation data
    writes the train run alone."""
    require("tensorboard")
    x, y = regression_data()
    tb = keras.callbacks.TensorBoard(log_dir=tmp_path)
    regression_model(0.05).fit(x, y, epochs=2, batch_size=16, verbose=0, callbacks=[tb])
    assert sorted(os.listdir(tmp_path)) == ["train"]
    assert [s for s, _, _ in _events(tmp_path / "train")["epoch_loss"]] == [0, 1]


def test_writes_epoch_scalars_under_train_and_validation(tmp_path):
    require("tensorboard")
    x, y = regression_data()
    model = regression_model(0.05)
    tb = keras.callbacks.TensorBoard(log_dir=tmp_path)
    history = model.fit(
        x, y, validation_split=0.25, epochs=3, batch_size=16, verbose=0, callbacks=[tb]
    )
    train = _events(tmp_path / "train")
    val = _events(tmp_path / "validation")
    for name in ["loss", "mae"]:
        assert [s for s, _, _ in train[f"epoch_{name}"]] == [0, 1, 2]
        np.testing.assert_allclose(
            [float(v) for _, v, _ in train[f"epoch_{name}"]], history.history[name], rtol=1e-6
        )
        np.testing.assert_allclose(
            [float(v) for _, v, _ in val[f"epoch_{name}"]],
            history.history[f"val_{name}"],
            rtol=1e-6,
        )
        assert {p for _, _, p in train[f"epoch_{name}"]} == {"scalars"}
    np.testing.assert_allclose([float(v) for _, v, _ in train["epoch_learning_rate"]], 0.05)
    # Validation runs inside fit are also logged against the optimizer's step count.
    steps = [s for s, _, _ in val["evaluation_loss_vs_iterations"]]
    assert steps == [3, 6, 9]
    assert not any(tag.startswith("batch_") for tag in train)
    # The Sequential model's config is written for the conceptual graph view.
    ((step, config, plugin),) = train["keras"]
    assert plugin == "graph_keras_model" and step == 0
    assert json.loads(config.item().decode()) == json.loads(model.to_json())


def test_writes_weight_histograms_images_and_batch_scalars(tmp_path):
    require("tensorboard")
    x, y = regression_data()
    model = regression_model(0.05)
    tb = keras.callbacks.TensorBoard(
        log_dir=str(tmp_path),
        histogram_freq=2,
        write_images=True,
        update_freq=3,
        write_steps_per_second=True,
    )
    model.fit(x, y, epochs=3, batch_size=16, verbose=0, callbacks=[tb])
    train = _events(tmp_path / "train")
    kernel_var, bias_var = model.layers[0].weights
    kernel = train[f"{kernel_var.path}/histogram"]
    assert [s for s, _, _ in kernel] == [0, 2] and kernel[0][2] == "histograms"
    buckets = kernel[-1][1]
    assert buckets.shape == (30, 3) and buckets[:, 2].sum() == 4
    w = kernel_var.numpy()
    assert buckets[0, 0] == pytest.approx(w.min()) and buckets[-1, 1] == pytest.approx(w.max())
    assert train[f"{bias_var.path}/histogram"][0][1][:, 2].sum() == 1
    # Images: width, height, then PNG bytes (the 4x1 kernel squeezes to a vector, written as
    # a one-pixel-wide column, as Keras does).
    (_, image, plugin), _ = train[f"{kernel_var.path}/image"]
    assert plugin == "images" and image[:2].tolist() == [b"1", b"4"]
    assert image[2].startswith(b"\x89PNG\r\n\x1a\n")
    # 12 steps over three epochs; update_freq=3 writes batches 3, 6, 9 and 12.
    assert [s for s, _, _ in train["batch_loss"]] == [3, 6, 9, 12]
    assert len(train["batch_steps_per_second"]) == 4
    assert all(float(v) > 0 for _, v, _ in train["epoch_steps_per_second"])


def test_png_encoding_round_trips():
    from keratron.callbacks.tensorboard import _png

    image = (np.arange(24).reshape(2, 4, 3) * 10).astype(np.uint8)
    data = _png(image)
    # Decode by hand: concatenated IDAT payloads, inflate, strip the per-row filter byte.
    pos, idat = 8, b""
    while pos < len(data):
        length = int.from_bytes(data[pos : pos + 4], "big")
        kind = data[pos + 4 : pos + 8]
        if kind == b"IHDR":
            assert data[pos + 8 : pos + 16] == (4).to_bytes(4, "big") + (2).to_bytes(4, "big")
        if kind == b"IDAT":
            idat += data[pos + 8 : pos + 8 + length]
        pos += 12 + length
    raw = np.frombuffer(zlib.decompress(idat), np.uint8).reshape(2, 1 + 4 * 3)
    assert (raw[:, 0] == 0).all()
    np.testing.assert_array_equal(raw[:, 1:].reshape(2, 4, 3), image)


def test_embeddings_written_for_the_projector(tmp_path):
    require("tensorboard")
    keras.utils.set_random_seed(0)
    model = keras.Sequential(
        [
            keras.Input((3,), dtype="int32"),
            keras.layers.Embedding(10, 4, name="words"),
            keras.layers.Flatten(),
            keras.layers.Dense(1),
        ]
    )
    model.compile(optimizer="sgd", loss="mse")
    x = np.random.default_rng(0).integers(0, 10, (16, 3))
    tb = keras.callbacks.TensorBoard(
        tmp_path, embeddings_freq=1, embeddings_metadata={"words": "vocab.tsv"}
    )
    model.fit(x, np.zeros((16, 1)), epochs=1, verbose=0, callbacks=[tb])
    config = (tmp_path / "projector_config.pbtxt").read_text()
    assert 'tensor_name: "words/embeddings"' in config
    assert 'tensor_path: "words_embeddings.tsv"' in config
    assert 'metadata_path: "vocab.tsv"' in config
    table = np.loadtxt(tmp_path / "words_embeddings.tsv", delimiter="\t")
    np.testing.assert_allclose(table, model.layers[0].weights[0].numpy(), rtol=1e-6)

    bad = keras.callbacks.TensorBoard(
        tmp_path, embeddings_freq=1, embeddings_metadata={"nope": "v.tsv"}
    )
    with pytest.raises(ValueError, match="nope"):
        bad.set_model(model)


def test_argument_errors(tmp_path):
    require("tensorboard")
    with pytest.raises(ValueError, match="update_freq"):
        keras.callbacks.TensorBoard(tmp_path, update_freq="sometimes")
    with pytest.raises(ValueError, match="histogram_freq"):
        keras.callbacks.TensorBoard(tmp_path, histogram_freq=-1)
    with pytest.raises(ValueError, match="profile_batch"):
        keras.callbacks.TensorBoard(tmp_path, profile_batch=2)
    # A stand-in (not Sequential/functional) gets scalars but no model config.
    tb = keras.callbacks.TensorBoard(tmp_path)
    drive(tb, StandInModel(), [{"loss": 1.0, "val_loss": 2.0}])
    train = _events(tmp_path / "train")
    assert "keras" not in train and float(train["epoch_loss"][0][1]) == 1.0
    assert float(_events(tmp_path / "validation")["epoch_loss"][0][1]) == 2.0


def test_missing_tensorboard_builds_and_raises_install_hint_at_first_write(monkeypatch, tmp_path):
    # A None entry makes `import` fail, as for a package that is not installed.
    for name in [m for m in sys.modules if m.split(".")[0] == "tensorboard"] + ["tensorboard"]:
        monkeypatch.setitem(sys.modules, name, None)
    # Keras builds the callback without the package (keras-io scripts create it up front).
    real_keras = require("keras")
    real_keras.callbacks.TensorBoard(log_dir=str(tmp_path / "keras"))
    tensorboard = keras.callbacks.TensorBoard(log_dir=str(tmp_path / "ours"), histogram_freq=1)
    assert tensorboard.histogram_freq == 1
    x, y = regression_data(8)
    with pytest.raises(ImportError, match="pip install tensorboard"):
        regression_model().fit(x, y, epochs=1, verbose=0, callbacks=[tensorboard])


def test_writing_events_does_not_import_tensorflow(tmp_path):
    """tensorboard's own EventFileWriter goes through `tf.io.gfile`, which imports TensorFlow
    where it is installed; with Keras's torch backend that import loads torch's compiler after
    TensorFlow's LLVM and aborts the process. The callback writes its event files itself."""
    require("tensorboard")
    script = (
        "import os, sys, numpy as np, keratron\n"
        "m = keratron.Sequential([keratron.Input((2,)), keratron.layers.Dense(1)])\n"
        "m.compile('sgd', 'mse')\n"
        f"tb = keratron.callbacks.TensorBoard({str(tmp_path)!r}, histogram_freq=1)\n"
        "m.fit(np.ones((4, 2)), np.ones((4, 1)), epochs=2, validation_split=0.5, verbose=0,\n"
        "      callbacks=[tb])\n"
        "print(sorted(os.listdir(tb.log_dir)), 'tensorflow' in sys.modules)\n"
    )
    env = {**os.environ, "KERAS_BACKEND": "torch"}
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split("\n")[-2] == "['train', 'validation'] False", done.stdout
    assert [s for s, _, _ in _events(tmp_path / "train")["epoch_loss"]] == [0, 1]
