"""ExportArchive: endpoints written to keratron's saved-model format reload with the same
outputs as the model (and as Keras, for weights taken from a Keras model)."""

import os

import numpy as np
import pytest

import keratron as kt
from tests.conftest import require

RNG = np.random.default_rng(0)
spec = kt.InputSpec


def _model():
    inp = kt.Input((3,))
    h = kt.layers.Dense(4, activation="relu")(inp)
    h = kt.layers.Dropout(0.5)(h)
    return kt.Model(inp, kt.layers.Dense(2)(h))


def test_endpoints_reload_with_same_outputs(tmp_path):
    model = _model()
    archive = kt.export.ExportArchive()
    archive.track(model)
    archive.add_endpoint(
        "serve", lambda x: model(x, training=False), [spec(shape=(None, 3), dtype="float32")]
    )
    archive.add_endpoint(
        "pair",
        lambda d: {"scaled": model(d["a"]) * 2.0, "shifted": d["b"] + 1.0},
        [{"a": spec(shape=(None, 3)), "b": spec(shape=(None, 2))}],
    )
    archive.add_variable_collection("first_layer", model.layers[1].weights)
    path = tmp_path / "archive"
    archive.write_out(path, verbose=False)
    reloaded = kt.export.load_archive(path)
    for n in (5, 32, 70):  # below, at and above the traced batch size
        x = RNG.normal(size=(n, 3)).astype("float32")
        expected = model.predict(x, verbose=0)
        np.testing.assert_allclose(reloaded.serve(x).numpy(), expected, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(
            reloaded.serving_default(x).numpy(), expected, rtol=1e-6, atol=1e-6
        )
    b = RNG.normal(size=(4, 2)).astype("float32")
    out = reloaded.pair({"a": x[:4], "b": b})
    assert sorted(out) == ["scaled", "shifted"]
    np.testing.assert_allclose(out["scaled"].numpy(), 2 * model.predict(x[:4], verbose=0), 1e-6)
    np.testing.assert_allclose(out["shifted"].numpy(), b + 1.0)
    assert [v.path for v in reloaded.first_layer] == [v.path for v in model.layers[1].weights]
    for v, w in zip(reloaded.first_layer, model.layers[1].weights):
        np.testing.assert_array_equal(v.numpy(), w.numpy())
    assert len(reloaded.trainable_variables) == 4 and len(reloaded.variables) == 4
    # The default endpoint is also a plain keratron saved model.
    plain = kt.saved_model.load(path)
    np.testing.assert_allclose(
        plain(args_0=x)["output_0"].numpy(), model.predict(x, verbose=0), rtol=1e-6, atol=1e-6
    )


def test_track_and_add_endpoint_and_rewrite(tmp_path):
    layer = kt.layers.Dense(3)
    layer.build((None, 2))
    archive = kt.export.ExportArchive()
    archive.track_and_add_endpoint("call", layer, [spec(shape=(None, 2))])
    path = tmp_path / "a"
    archive.write_out(path, verbose=False)
    archive.write_out(path, verbose=False)  # an earlier archive is replaced
    x = RNG.normal(size=(3, 2)).astype("float32")
    np.testing.assert_allclose(
        kt.export.load_archive(path).call(x).numpy(), layer(x).numpy(), rtol=1e-6
    )
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".export-")]


def test_archive_errors(tmp_path):
    archive = kt.export.ExportArchive()
    with pytest.raises(ValueError, match="No endpoints have been set yet"):
        archive.write_out(tmp_path / "x")
    with pytest.raises(ValueError, match="has not yet been built"):
        archive.track(kt.layers.Dense(2))
    with pytest.raises(ValueError, match="Invalid resource type"):
        archive.track(object())
    with pytest.raises(ValueError, match="must provide an `input_signature`"):
        archive.add_endpoint("f", lambda x: x)
    archive.add_endpoint("f", lambda x: x * 2.0, [spec(shape=(None, 2))])
    with pytest.raises(ValueError, match="Endpoint name 'f' is already taken"):
        archive.add_endpoint("f", lambda x: x, [spec(shape=(None, 2))])
    with pytest.raises(ValueError, match="only the first \\(batch\\) dimension may be None"):
        archive.add_endpoint("g", lambda x: x, [spec(shape=(None, None))])
    with pytest.raises(ValueError, match="only supported with the jax backend"):
        archive.add_endpoint("h", lambda x: x, [spec(shape=(2,))], is_static=True)
    with pytest.raises(ValueError, match="Expected `variables` to be a list/tuple/set"):
        archive.add_variable_collection("c", kt.Variable(1.0))
    with pytest.raises(ValueError, match="`Variable` instances"):
        archive.add_variable_collection("c", [np.ones(2)])
    with pytest.raises(ValueError, match="Unsupported format"):
        kt.export.ExportArchive(format="onnx")
    model = _model()
    archive.add_endpoint("train", lambda x: model(x, training=True), [spec(shape=(None, 3))])
    with pytest.raises(ValueError, match="endpoint 'train' has a side effect"):
        archive.write_out(tmp_path / "effects", verbose=False)
    assert not (tmp_path / "effects").exists()
    occupied = tmp_path / "occupied"
    occupied.mkdir()
    (occupied / "keep.txt").write_text("mine")
    with pytest.raises(ValueError, match="exists and is not an empty directory"):
        archive.write_out(occupied, verbose=False)
    assert (occupied / "keep.txt").read_text() == "mine"
    with pytest.raises(FileNotFoundError, match="no file"):
        kt.export.load_archive(occupied)


@pytest.mark.interop
def test_exported_keras_weights_give_keras_outputs(tmp_path):
    keras = require("keras")
    kin = keras.Input((8, 8, 3))
    kx = keras.layers.Conv2D(4, 3, activation="relu")(kin)
    kx = keras.layers.GlobalAveragePooling2D()(kx)
    kmodel = keras.Model(kin, keras.layers.Dense(5, activation="softmax")(kx))
    inp = kt.Input((8, 8, 3))
    x = kt.layers.Conv2D(4, 3, activation="relu")(inp)
    x = kt.layers.GlobalAveragePooling2D()(x)
    model = kt.Model(inp, kt.layers.Dense(5, activation="softmax")(x))
    model.set_weights([np.asarray(w) for w in kmodel.get_weights()])
    archive = kt.export.ExportArchive()
    archive.track_and_add_endpoint("serve", model, [spec(shape=(None, 8, 8, 3))])
    archive.write_out(tmp_path / "m", verbose=False)
    images = RNG.normal(size=(6, 8, 8, 3)).astype("float32")
    np.testing.assert_allclose(
        kt.export.load_archive(tmp_path / "m").serve(images).numpy(),
        np.asarray(kmodel.predict(images, verbose=0)),
        rtol=1e-5,
        atol=1e-6,
    )
