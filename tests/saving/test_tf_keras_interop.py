"""Files exchanged with tf.keras 2 (the `tf-keras` package on TensorFlow), both directions:
`.h5` weights and `.h5` whole models. Needs the `interop` extra (tensorflow-cpu, tf-keras).

TensorFlow and Triton (which Keras's torch backend imports) both embed LLVM; loading TensorFlow
first and Triton second aborts the process, so the fixture loads Triton and Keras before
TensorFlow.
"""

from __future__ import annotations

import h5py
import numpy as np
import pytest

import keratron
from tests.conftest import require
from tests.saving import models

pytestmark = pytest.mark.interop

NAMES = sorted(models.BUILDERS)


@pytest.fixture(scope="module")
def tk():
    models.import_keras()  # loads Triton before TensorFlow (see the module docstring)
    return require("tf_keras")


@pytest.fixture(scope="module")
def pairs(tk):
    cache = {}

    def get(name):
        if name not in cache:
            tk.backend.clear_session()
            keratron.backend.clear_session()
            cache[name] = (models.BUILDERS[name](tk), models.BUILDERS[name](keratron))
        return cache[name]

    return get


def _tk_out(model, x):
    return np.asarray(model(x, training=False))


def _kt_out(model, x):
    return np.asarray(model(x, training=False))


def _assert_same_weights(expected, received):
    assert len(expected) == len(received)
    for a, b in zip(expected, received):
        assert a.shape == b.shape and a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("name", NAMES)
def test_h5_weights_tf_keras_to_keratron(pairs, tmp_path, name):
    rng = np.random.default_rng(11)
    km, tm = pairs(name)
    models.randomize(km, rng)
    path = str(tmp_path / "tf.h5")
    km.save_weights(path)
    tm.load_weights(path)
    _assert_same_weights(km.get_weights(), tm.get_weights())
    x = models.inputs_for(name, rng)
    np.testing.assert_allclose(_kt_out(tm, x), _tk_out(km, x), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", NAMES)
def test_h5_weights_keratron_to_tf_keras(pairs, tmp_path, name):
    rng = np.random.default_rng(12)
    km, tm = pairs(name)
    models.randomize(tm, rng)
    path = str(tmp_path / "keratron.h5")
    tm.save_weights(path)
    km.load_weights(path)
    _assert_same_weights(tm.get_weights(), km.get_weights())
    x = models.inputs_for(name, rng)
    np.testing.assert_allclose(_tk_out(km, x), _kt_out(tm, x), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", NAMES)
def test_h5_weights_by_name_from_tf_keras(pairs, tmp_path, name):
    rng = np.random.default_rng(13)
    km, tm = pairs(name)
    models.randomize(km, rng)
    path = str(tmp_path / "tf.h5")
    km.save_weights(path)
    tm.load_weights(path, by_name=True)
    _assert_same_weights(km.get_weights(), tm.get_weights())


@pytest.mark.parametrize("name", NAMES)
def test_h5_model_tf_keras_to_keratron(pairs, tmp_path, name):
    """A tf.keras 2 model file, saved after training: config, weights, compile arguments and
    the optimizer's step count and moments come back."""
    rng = np.random.default_rng(14)
    km, _ = pairs(name)
    models.randomize(km, rng)
    x = models.inputs_for(name, rng, batch=8)
    y = rng.normal(size=(8,) + tuple(km.output_shape[1:])).astype("float32")
    # Eager steps: tracing a tf.function costs more than these two tiny batches.
    km.compile(optimizer="adam", loss="mse", metrics=["mae"], run_eagerly=True)
    km.fit(x, y, epochs=1, batch_size=4, verbose=0)
    path = str(tmp_path / "tf_model.h5")
    km.save(path)
    loaded = keratron.models.load_model(path)
    assert [layer.name for layer in loaded.layers] == [layer.name for layer in km.layers]
    _assert_same_weights(km.get_weights(), loaded.get_weights())
    np.testing.assert_allclose(_kt_out(loaded, x), _tk_out(km, x), rtol=1e-5, atol=1e-5)
    assert type(loaded.optimizer).__name__ == "Adam"
    assert int(np.asarray(loaded.optimizer.iterations)) == 2
    # tf.keras 2 saves `iteration` and the moments (its learning rate is a hyper-parameter).
    saved = [np.asarray(v) for v in km.optimizer.variables]
    lr = loaded.optimizer._learning_rate
    restored = [v.numpy() for v in loaded.optimizer.variables if v is not lr]
    assert len(saved) == len(restored)
    for a, b in zip(saved[1:], restored[1:]):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("name", NAMES)
def test_h5_model_keratron_to_tf_keras(tk, pairs, tmp_path, name):
    rng = np.random.default_rng(15)
    _, tm = pairs(name)
    models.randomize(tm, rng)
    tm.compile(optimizer=keratron.optimizers.Adam(learning_rate=0.01), loss="mse")
    path = str(tmp_path / "keratron_model.h5")
    tm.save(path)
    loaded = tk.models.load_model(path)
    assert [layer.name for layer in loaded.layers] == [layer.name for layer in tm.layers]
    _assert_same_weights(tm.get_weights(), loaded.get_weights())
    x = models.inputs_for(name, rng)
    np.testing.assert_allclose(_tk_out(loaded, x), _kt_out(tm, x), rtol=1e-5, atol=1e-5)
    assert "adam" in type(loaded.optimizer).__name__.lower()
    assert float(np.asarray(loaded.optimizer.learning_rate)) == pytest.approx(0.01)


def _names(path):
    out = {}
    with h5py.File(path, "r") as f:
        layer_names = [
            v.decode() if isinstance(v, bytes) else str(v) for v in f.attrs["layer_names"]
        ]
        out["/"] = (sorted(f.attrs), layer_names)
        for layer in layer_names:
            names = [
                v.decode() if isinstance(v, bytes) else str(v)
                for v in f[layer].attrs["weight_names"]
            ]
            out[layer] = (sorted(f[layer].attrs), names)
    return out


def test_h5_names_match_tf_keras(pairs, tmp_path):
    """For a functional model (where tf.keras 2 and Keras 3 scope names alike) keratron writes
    the attribute, layer and weight names tf.keras 2 writes, `:0` included."""
    km, tm = pairs("two_inputs")
    km.save_weights(str(tmp_path / "tf.h5"))
    tm.save_weights(str(tmp_path / "keratron.h5"))
    assert _names(str(tmp_path / "keratron.h5")) == _names(str(tmp_path / "tf.h5"))


def test_tf_keras_reads_fixed_length_attributes_and_checksums(tk, pairs, tmp_path):
    """keratron writes string attributes fixed-length and checksums its datasets; tf.keras
    reads both, weights and whole models, with identical weights."""
    rng = np.random.default_rng(23)
    km, tm = pairs("two_inputs")
    models.randomize(tm, rng)
    weights_path = str(tmp_path / "w.h5")
    tm.save_weights(weights_path)
    tm.compile(optimizer="adam", loss="mean_squared_error")
    model_path = str(tmp_path / "m.h5")
    tm.save(model_path)
    for path in (weights_path, model_path):
        with h5py.File(path, "r") as f:
            group = f["model_weights"] if "model_weights" in f else f
            for key in ("layer_names", "backend", "keras_version"):
                assert h5py.check_string_dtype(group.attrs.get_id(key).dtype).length is not None
            datasets = []

            def collect(_, obj, datasets=datasets):
                if isinstance(obj, h5py.Dataset) and obj.shape:
                    datasets.append(obj)

            f.visititems(collect)
            assert datasets and all(d.fletcher32 for d in datasets)
    km.load_weights(weights_path)
    _assert_same_weights(tm.get_weights(), km.get_weights())
    loaded = tk.models.load_model(model_path)
    _assert_same_weights(tm.get_weights(), loaded.get_weights())
