"""Files exchanged with real Keras 3 (torch backend), both directions, in every format:
`.h5` weights (tf.keras 2 layout), `.weights.h5` (Keras 3 layout), `.h5` whole models and
`.keras` archives. Weights must round-trip bit for bit and predictions agree within 1e-5; the
names keratron writes in `.h5` files must be the ones Keras's legacy writer writes."""

from __future__ import annotations

import h5py
import numpy as np
import pytest

import keratron
from tests.saving import models

pytestmark = pytest.mark.interop

NAMES = sorted(models.BUILDERS)


@pytest.fixture(scope="module")
def keras():
    return models.import_keras()


def _build_pair(keras, name):
    """A Keras model and a keratron model of the same architecture, with the same names."""
    keras.backend.clear_session()
    keratron.backend.clear_session()
    km = models.BUILDERS[name](keras)
    tm = models.BUILDERS[name](keratron)
    return km, tm


@pytest.fixture(scope="module")
def pairs(keras):
    """Model pairs built once per architecture: each test overwrites every weight."""
    cache = {}

    def get(name):
        if name not in cache:
            cache[name] = _build_pair(keras, name)
        return cache[name]

    return get


def _keras_out(keras, model, x):
    return keras.ops.convert_to_numpy(model(x, training=False))


def _keratron_out(model, x):
    return np.asarray(model(x, training=False))


def _assert_same_weights(expected, received):
    assert len(expected) == len(received)
    for a, b in zip(expected, received):
        assert a.shape == b.shape and a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)


def _write_keras_legacy_weights(keras, model, path):
    from keras.src.legacy.saving import legacy_h5_format

    with h5py.File(path, "w") as f:
        legacy_h5_format.save_weights_to_hdf5_group(f, model)


@pytest.mark.parametrize("fmt", ["h5", "weights.h5"])
@pytest.mark.parametrize("name", NAMES)
def test_weights_keras_to_keratron(keras, pairs, tmp_path, name, fmt):
    rng = np.random.default_rng(1)
    km, tm = pairs(name)
    models.randomize(km, rng)
    path = str(tmp_path / f"model.{fmt}")
    if fmt == "h5":
        _write_keras_legacy_weights(keras, km, path)
    else:
        km.save_weights(path)
    tm.load_weights(path)
    _assert_same_weights(km.get_weights(), tm.get_weights())
    x = models.inputs_for(name, rng)
    np.testing.assert_allclose(_keratron_out(tm, x), _keras_out(keras, km, x), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("fmt", ["h5", "weights.h5"])
@pytest.mark.parametrize("name", NAMES)
def test_weights_keratron_to_keras(keras, pairs, tmp_path, name, fmt):
    rng = np.random.default_rng(2)
    km, tm = pairs(name)
    models.randomize(tm, rng)
    path = str(tmp_path / f"model.{fmt}")
    tm.save_weights(path)
    km.load_weights(path)
    _assert_same_weights(tm.get_weights(), km.get_weights())
    x = models.inputs_for(name, rng)
    np.testing.assert_allclose(_keras_out(keras, km, x), _keratron_out(tm, x), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("fmt", ["h5", "keras"])
@pytest.mark.parametrize("name", NAMES)
def test_model_keras_to_keratron(keras, pairs, tmp_path, name, fmt):
    rng = np.random.default_rng(3)
    km, _ = pairs(name)
    models.randomize(km, rng)
    km.compile(optimizer="adam", loss="mean_squared_error")
    path = str(tmp_path / f"model.{fmt}")
    km.save(path)
    loaded = keratron.models.load_model(path)
    assert type(loaded.optimizer).__name__ == "Adam"
    assert [x.name for x in loaded.layers] == [x.name for x in km.layers]
    _assert_same_weights(km.get_weights(), loaded.get_weights())
    x = models.inputs_for(name, rng)
    np.testing.assert_allclose(
        _keratron_out(loaded, x), _keras_out(keras, km, x), rtol=1e-5, atol=1e-5
    )


@pytest.mark.parametrize("fmt", ["h5", "keras"])
@pytest.mark.parametrize("name", NAMES)
def test_model_keratron_to_keras(keras, pairs, tmp_path, name, fmt):
    rng = np.random.default_rng(4)
    _, tm = pairs(name)
    models.randomize(tm, rng)
    tm.compile(optimizer="adam", loss="mse")
    path = str(tmp_path / f"model.{fmt}")
    tm.save(path)
    if name == "nested" and fmt == "h5":
        # `.h5` configs follow tf.keras 2, which numbers a nested model's calls from 1; Keras 3
        # reads such configs of tf.keras 2 itself no better (use `.keras` with Keras 3).
        with pytest.raises(ValueError, match="disconnected nodes"):
            keras.models.load_model(path)
        return
    loaded = keras.models.load_model(path)
    assert type(loaded.optimizer).__name__ == "Adam"
    assert [x.name for x in loaded.layers] == [x.name for x in tm.layers]
    _assert_same_weights(tm.get_weights(), loaded.get_weights())
    x = models.inputs_for(name, rng)
    np.testing.assert_allclose(
        _keras_out(keras, loaded, x), _keratron_out(tm, x), rtol=1e-5, atol=1e-5
    )


def _h5_layout(path, strip_suffix):
    """Attribute names and values of every group, and every dataset path with its shape."""
    out = {}
    with h5py.File(path, "r") as f:

        def fix(name):
            return name.replace(":0", "") if strip_suffix else name

        def visit(name, obj):
            if isinstance(obj, h5py.Dataset):
                out[("dataset", fix(name))] = obj.shape
            else:
                attrs = {}
                for key, value in obj.attrs.items():
                    if key in ("weight_names", "layer_names"):
                        value = [fix(v.decode() if isinstance(v, bytes) else str(v)) for v in value]
                    attrs[key] = value if key in ("weight_names", "layer_names") else None
                out[("group", fix(name))] = attrs

        out[("group", "/")] = {
            k: ([v.decode() if isinstance(v, bytes) else str(v) for v in f.attrs[k]])
            if k == "layer_names"
            else None
            for k in f.attrs
        }
        f.visititems(visit)
    return out


@pytest.mark.parametrize("name", NAMES)
def test_h5_names_match_keras_legacy_writer(keras, pairs, tmp_path, name):
    km, tm = pairs(name)
    keras_path = str(tmp_path / "keras.h5")
    ours = str(tmp_path / "keratron.h5")
    _write_keras_legacy_weights(keras, km, keras_path)
    tm.save_weights(ours)
    expected = _h5_layout(keras_path, strip_suffix=False)
    received = _h5_layout(ours, strip_suffix=True)
    assert received == expected
    # keratron writes the tf.keras 2 spelling: every dataset name ends in ":0".
    with h5py.File(ours, "r") as f:
        datasets = []
        f.visititems(lambda n, o: datasets.append(n) if isinstance(o, h5py.Dataset) else None)
        assert datasets and all(d.endswith(":0") for d in datasets)
        for layer in tm.layers:
            names = [
                n.decode() if isinstance(n, bytes) else str(n)
                for n in f[layer.name].attrs["weight_names"]
            ]
            assert all(n.endswith(":0") for n in names)


def test_keras3_weights_file_layout_matches_keras(keras, tmp_path):
    """The `.weights.h5` keratron writes has Keras's groups, `name` attributes and datasets,
    optimizer included."""
    km, tm = _build_pair(keras, "two_inputs")
    rng = np.random.default_rng(5)
    x, y = models.inputs_for("two_inputs", rng, 4), rng.normal(size=(4, 3)).astype("float32")
    for lib, model in ((keras, km), (keratron, tm)):
        model.compile(optimizer=lib.optimizers.Adam(name="adam"), loss="mean_squared_error")
        model.fit(x, y, epochs=1, verbose=0)
    km.save_weights(str(tmp_path / "k.weights.h5"))
    tm.save_weights(str(tmp_path / "t.weights.h5"))

    def layout(path):
        # keratron stores `name` as a fixed-length string, Keras as a variable-length one.
        def text(value):
            return value.decode() if isinstance(value, bytes) else value

        items = {}
        with h5py.File(path, "r") as f:
            f.visititems(
                lambda n, o: items.__setitem__(
                    n, (getattr(o, "shape", None), text(o.attrs.get("name")))
                )
            )
        return items

    assert layout(str(tmp_path / "t.weights.h5")) == layout(str(tmp_path / "k.weights.h5"))


def test_keras_optimizer_state_resumes_in_keratron(keras, tmp_path):
    """A `.keras` file written after Keras trained carries its Adam moments and step count."""
    km, _ = _build_pair(keras, "mlp")
    rng = np.random.default_rng(6)
    x, y = rng.normal(size=(16, 8)).astype("float32"), rng.normal(size=(16, 4)).astype("float32")
    km.compile(optimizer="adam", loss="mean_squared_error")
    km.fit(x, y, epochs=2, batch_size=8, verbose=0)
    path = str(tmp_path / "trained.keras")
    km.save(path)
    loaded = keratron.models.load_model(path)
    assert int(np.asarray(loaded.optimizer.iterations)) == 4
    expected = [keras.ops.convert_to_numpy(v) for v in km.optimizer.variables]
    received = [np.asarray(v.numpy()) for v in loaded.optimizer.variables]
    assert len(expected) == len(received)
    for a, b in zip(expected, received):
        np.testing.assert_array_equal(a.astype(b.dtype), b)


def _assert_fixed_strings_and_checksums(path):
    """Every string attribute keratron wrote is fixed-length (a corrupted variable-length one
    can hang HDF5) and every non-scalar dataset carries a Fletcher-32 checksum."""
    found = {"attributes": 0, "datasets": 0}

    def check(obj):
        for key in obj.attrs:
            info = h5py.check_string_dtype(obj.attrs.get_id(key).dtype)
            if info is not None:
                assert info.length is not None, f"{obj.name} attribute {key} is variable-length"
                found["attributes"] += 1
        if isinstance(obj, h5py.Dataset) and obj.shape:
            assert obj.fletcher32, obj.name
            found["datasets"] += 1

    with h5py.File(path, "r") as f:
        check(f)
        f.visititems(lambda _, obj: check(obj))
    assert found["attributes"] and found["datasets"]


@pytest.mark.parametrize("fmt", ["h5", "weights.h5"])
def test_keras_reads_fixed_length_attributes_and_checksums(keras, pairs, tmp_path, fmt):
    rng = np.random.default_rng(21)
    km, tm = pairs("two_inputs")
    models.randomize(tm, rng)
    path = str(tmp_path / f"t.{fmt}")
    tm.save_weights(path)
    _assert_fixed_strings_and_checksums(path)
    km.load_weights(path)
    _assert_same_weights(tm.get_weights(), km.get_weights())


def test_keras_reads_fixed_length_model_h5(keras, tmp_path):
    km, tm = _build_pair(keras, "mlp")
    models.randomize(tm, np.random.default_rng(22))
    tm.compile(optimizer="adam", loss="mean_squared_error")
    path = str(tmp_path / "t.h5")
    tm.save(path)
    _assert_fixed_strings_and_checksums(path)
    loaded = keras.models.load_model(path)
    _assert_same_weights(tm.get_weights(), loaded.get_weights())
