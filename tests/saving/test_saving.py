"""keratron's saving on its own: the file layouts, round trips, custom objects, safe mode,
resumed training, and what happens with broken or mismatched files."""

from __future__ import annotations

import json
import os
import zipfile

import h5py
import numpy as np
import pytest

import keratron
from keratron import layers
from keratron.saving import legacy_h5

FORMATS_WEIGHTS = ["h5", "weights.h5"]
FORMATS_MODEL = ["h5", "keras"]


def _functional(units=3):
    a = keratron.Input((6,), name="a")
    b = keratron.Input((4, 2), name="b")
    x = layers.Dense(5, activation="relu", name="dense_a")(a)
    y = layers.LSTM(3, name="lstm")(b)
    merged = layers.Concatenate(name="concat")([x, y])
    merged = layers.BatchNormalization(name="bn")(merged)
    out = layers.Dense(units, name="head")(merged)
    return keratron.Model([a, b], out, name="net")


def _data(rng, n=8, units=3):
    x = [rng.normal(size=(n, 6)).astype("float32"), rng.normal(size=(n, 4, 2)).astype("float32")]
    return x, rng.normal(size=(n, units)).astype("float32")


def _randomize(model, rng):
    values = []
    for w in model.weights:
        v = rng.normal(size=tuple(w.shape)).astype("float32")
        values.append(np.abs(v) + 0.5 if "variance" in w.name else v)
    model.set_weights(values)


def _text(values):
    return [v.decode() if isinstance(v, bytes) else str(v) for v in values]


def _same(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)


# ------------------------------------------------------------------------------ round trips
@pytest.mark.parametrize("fmt", FORMATS_WEIGHTS)
def test_weights_round_trip(tmp_path, rng, fmt):
    src, dst = _functional(), _functional()
    _randomize(src, rng)
    path = str(tmp_path / f"w.{fmt}")
    src.save_weights(path)
    dst.load_weights(path)
    _same(src.get_weights(), dst.get_weights())
    x, _ = _data(rng)
    np.testing.assert_array_equal(np.asarray(src(x)), np.asarray(dst(x)))


@pytest.mark.parametrize("fmt", FORMATS_MODEL)
def test_model_round_trip_with_compile(tmp_path, rng, fmt):
    model = _functional()
    _randomize(model, rng)
    model.compile(optimizer=keratron.optimizers.RMSprop(0.005), loss="mse", metrics=["mae"])
    path = str(tmp_path / f"m.{fmt}")
    model.save(path)
    loaded = keratron.models.load_model(path)
    assert type(loaded).__name__ == "Functional"
    assert [x.name for x in loaded.layers] == [x.name for x in model.layers]
    _same(model.get_weights(), loaded.get_weights())
    assert type(loaded.optimizer).__name__ == "RMSprop"
    assert float(loaded.optimizer.learning_rate.numpy()) == pytest.approx(0.005)
    x, y = _data(rng)
    np.testing.assert_array_equal(np.asarray(model(x)), np.asarray(loaded(x)))
    loaded.fit(x, y, epochs=1, verbose=0)  # compiled and trainable
    plain = keratron.models.load_model(path, compile=False)
    assert not plain.compiled


def test_keras_zip_contents(tmp_path, rng):
    model = _functional()
    model.compile(optimizer="adam", loss="mse")
    path = str(tmp_path / "m.keras")
    model.save(path)
    with zipfile.ZipFile(path) as zf:
        assert sorted(zf.namelist()) == ["config.json", "metadata.json", "model.weights.h5"]
        metadata = json.loads(zf.read("metadata.json"))
        config = json.loads(zf.read("config.json"))
    assert metadata["keras_version"] == legacy_h5.KERAS_VERSION and "date_saved" in metadata
    assert config["class_name"] == "Functional"
    assert config["compile_config"]["loss"] == "mse"
    dense = next(x for x in config["config"]["layers"] if x["name"] == "dense_a")
    assert dense["build_config"] == {"input_shape": [None, 6]}


# ------------------------------------------------------------------------------ h5 layout
def test_h5_weights_layout(tmp_path):
    model = _functional()
    path = str(tmp_path / "w.h5")
    model.save_weights(path)
    with h5py.File(path, "r") as f:
        assert set(f.attrs) == {"layer_names", "backend", "keras_version"}
        assert _text(f.attrs["layer_names"]) == [x.name for x in model.layers]
        assert _text(f["bn"].attrs["weight_names"]) == [
            "bn/gamma:0",
            "bn/beta:0",
            "bn/moving_mean:0",
            "bn/moving_variance:0",
        ]
        assert f["dense_a"]["dense_a"]["kernel:0"].shape == (6, 5)
        assert _text(f["lstm"].attrs["weight_names"]) == [
            "lstm/lstm_cell/kernel:0",
            "lstm/lstm_cell/recurrent_kernel:0",
            "lstm/lstm_cell/bias:0",
        ]
        assert len(f["a"].attrs["weight_names"]) == 0
        assert "top_level_model_weights" in f


class _Block(layers.Layer):
    """A layer whose sublayers mix trainable and non-trainable weights."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.norm = layers.BatchNormalization(name="inner_bn")
        self.proj = layers.Dense(2, name="inner_dense")

    def build(self, input_shape):
        self.norm.build(input_shape)
        self.proj.build(input_shape)

    def call(self, x):
        return self.proj(self.norm(x))


def test_h5_orders_trainable_then_non_trainable(tmp_path):
    model = keratron.Sequential([keratron.Input((3,)), _Block(name="block")], name="seq")
    path = str(tmp_path / "w.h5")
    model.save_weights(path)
    with h5py.File(path, "r") as f:
        names = _text(f["block"].attrs["weight_names"])
    assert names == [
        "seq/block/inner_bn/gamma:0",
        "seq/block/inner_bn/beta:0",
        "seq/block/inner_dense/kernel:0",
        "seq/block/inner_dense/bias:0",
        "seq/block/inner_bn/moving_mean:0",
        "seq/block/inner_bn/moving_variance:0",
    ]


class _ManyWeights(layers.Layer):
    def build(self, input_shape):
        self.ws = [
            self.add_weight(shape=(), initializer="ones", name=f"w{i:04d}_" + "x" * 300)
            for i in range(250)
        ]

    def call(self, x):
        return x * self.ws[0]


def test_h5_attribute_chunking_past_header_limit(tmp_path, rng):
    def build():
        return keratron.Sequential([keratron.Input((2,)), _ManyWeights(name="many")])

    src, dst = build(), build()
    src.set_weights([rng.normal(size=()).astype("float32") for _ in src.weights])
    path = str(tmp_path / "w.h5")
    src.save_weights(path)
    with h5py.File(path, "r") as f:
        attrs = set(f["many"].attrs)
        assert "weight_names" not in attrs and {"weight_names0", "weight_names1"} <= attrs
        assert all(f["many"].attrs[a].nbytes <= legacy_h5.HDF5_OBJECT_HEADER_LIMIT for a in attrs)
    dst.load_weights(path)
    _same(src.get_weights(), dst.get_weights())


def test_attribute_helpers_round_trip_and_refuse_oversized_entries(tmp_path):
    data = [f"layer_{i:05d}_{'y' * 200}".encode() for i in range(400)]
    with h5py.File(str(tmp_path / "a.h5"), "w") as f:
        legacy_h5.save_attributes_to_hdf5_group(f, "names", data)
        assert "names" not in f.attrs
        assert legacy_h5.load_attributes_from_hdf5_group(f, "names") == [d.decode() for d in data]
        with pytest.raises(RuntimeError, match="larger than 64512 bytes"):
            legacy_h5.save_attributes_to_hdf5_group(f, "big", [b"z" * 70000])


def test_reads_keras3_legacy_names_without_suffix(tmp_path, rng):
    """Keras 3's legacy writer names datasets without ':0'."""
    model = keratron.Sequential([keratron.Input((3,)), layers.Dense(2, name="d")])
    kernel, bias = rng.normal(size=(3, 2)).astype("float32"), rng.normal(size=2).astype("f4")
    path = str(tmp_path / "k3.h5")
    with h5py.File(path, "w") as f:
        f.attrs["layer_names"] = [b"d"]
        f.attrs["backend"] = b"torch"
        f.attrs["keras_version"] = b"3.15.1"
        g = f.create_group("d")
        g.attrs["weight_names"] = [b"sequential/d/kernel", b"sequential/d/bias"]
        g["sequential/d/kernel"] = kernel
        g["sequential/d/bias"] = bias
        f.create_group("top_level_model_weights").attrs["weight_names"] = []
    model.load_weights(path)
    _same([kernel, bias], model.get_weights())


# ------------------------------------------------------------------------ load mismatches
@pytest.mark.parametrize("fmt", FORMATS_WEIGHTS)
def test_changed_layer_names_it_and_both_shapes_and_changes_nothing(tmp_path, rng, fmt):
    path = str(tmp_path / f"w.{fmt}")
    _functional(units=3).save_weights(path)
    other = _functional(units=4)
    before = other.get_weights()
    with pytest.raises(ValueError) as err:
        other.load_weights(path)
    message = str(err.value)
    assert "head" in message and "(8, 4)" in message and "(8, 3)" in message
    if fmt == "h5":
        assert message.startswith(
            "Shape mismatch in layer #3 (named head) for weight head/kernel. Weight expects "
            "shape (8, 4). Received saved weight with shape (8, 3)"
        )
    assert path in message
    _same(before, other.get_weights())


def test_layer_count_mismatch_message(tmp_path):
    path = str(tmp_path / "w.h5")
    two = [keratron.Input((3,)), layers.Dense(2, name="first"), layers.Dense(2, name="second")]
    keratron.Sequential(two).save_weights(path)
    single = keratron.Sequential([keratron.Input((3,)), layers.Dense(2, name="only")])
    with pytest.raises(ValueError) as err:
        single.load_weights(path)
    # Keras's sentence, then the file and the layers on each side.
    assert str(err.value) == (
        "Layer count mismatch when loading weights from file. Model expected 1 layers, found 2 "
        f"saved layers. File '{path}'; layers with weights in the model: ['only'], in the file: "
        "['first', 'second']."
    )


def test_weight_count_mismatch_message(tmp_path):
    path = str(tmp_path / "w.h5")
    keratron.Sequential([keratron.Input((3,)), layers.Dense(2, name="d")]).save_weights(path)
    no_bias = keratron.Sequential([keratron.Input((3,)), layers.Dense(2, use_bias=False)])
    with pytest.raises(ValueError) as err:
        no_bias.load_weights(path)
    assert str(err.value) == (
        f"Weight count mismatch for layer #0 (named {no_bias.layers[0].name} in the current "
        "model, d in the save file). Layer expects 1 weight(s). Received 2 saved weight(s) "
        f"(load_weights: reading '{path}')"
    )


def test_load_weights_from_keras_archive(tmp_path, rng):
    src, dst = _functional(), _functional()
    _randomize(src, rng)
    src.save(str(tmp_path / "m.keras"))
    dst.load_weights(str(tmp_path / "m.keras"))
    _same(src.get_weights(), dst.get_weights())


def test_by_name_and_skip_mismatch(tmp_path, rng):
    src = keratron.Sequential(
        [keratron.Input((3,)), layers.Dense(4, name="shared"), layers.Dense(2, name="old_head")]
    )
    _randomize(src, rng)
    path = str(tmp_path / "w.h5")
    src.save_weights(path)
    dst = keratron.Sequential(
        [
            keratron.Input((3,)),
            layers.Dense(4, name="shared"),
            layers.Dense(5, name="extra"),
            layers.Dense(2, name="old_head"),
        ]
    )
    with pytest.raises(ValueError, match="Shape mismatch in layer #1 \\(named old_head\\)"):
        dst.load_weights(path, by_name=True)
    dst.load_weights(path, by_name=True, skip_mismatch=True)
    _same(src.get_layer("shared").get_weights(), dst.get_layer("shared").get_weights())
    head = keratron.Sequential(
        [keratron.Input((5,)), layers.Dense(4, name="unrelated"), layers.Dense(2, name="old_head")]
    )
    head.load_weights(path, by_name=True, skip_mismatch=True)  # (4, 2) head kernel fits
    _same(src.get_layer("old_head").get_weights(), head.get_layer("old_head").get_weights())


# --------------------------------------------------------------------------- broken files
def _broken_variants(path):
    data = open(path, "rb").read()
    rng = np.random.default_rng(0)
    return {
        "truncated": data[: len(data) // 2],
        "random": rng.integers(0, 256, size=len(data), dtype=np.uint8).tobytes(),
        "empty": b"",
    }


@pytest.mark.parametrize("kind", ["truncated", "random", "empty"])
@pytest.mark.parametrize("fmt", ["h5", "weights.h5", "keras"])
def test_broken_weight_files_raise_naming_the_file(tmp_path, rng, fmt, kind):
    model = _functional()
    _randomize(model, rng)
    good = str(tmp_path / f"good.{fmt}")
    if fmt == "keras":
        model.save(good)
    else:
        model.save_weights(good)
    bad = str(tmp_path / f"bad.{fmt}")
    with open(bad, "wb") as f:
        f.write(_broken_variants(good)[kind])
    target = _functional()
    before = target.get_weights()
    with pytest.raises(ValueError) as err:
        target.load_weights(bad)
    assert bad in str(err.value)
    _same(before, target.get_weights())
    with pytest.raises(ValueError) as err:
        keratron.models.load_model(bad)
    assert bad in str(err.value)


@pytest.mark.parametrize("fmt", ["h5", "keras"])
def test_truncated_model_file(tmp_path, fmt):
    model = _functional()
    good = str(tmp_path / f"good.{fmt}")
    model.save(good)
    data = open(good, "rb").read()
    for cut in (len(data) - 10, len(data) // 3, 100):
        bad = str(tmp_path / f"cut{cut}.{fmt}")
        with open(bad, "wb") as f:
            f.write(data[:cut])
        with pytest.raises(ValueError, match=os.path.basename(bad)):
            keratron.models.load_model(bad)


def test_wrong_layouts(tmp_path):
    model = _functional()
    other = str(tmp_path / "other.h5")
    with h5py.File(other, "w") as f:
        f["data"] = np.zeros(3)
    with pytest.raises(ValueError, match="has no 'layer_names' attribute"):
        model.load_weights(other)
    weights_only = str(tmp_path / "weights_only.h5")
    model.save_weights(weights_only)
    with pytest.raises(ValueError, match="No model config found in the file at .*weights_only"):
        keratron.models.load_model(weights_only)
    not_keras3 = str(tmp_path / "x.weights.h5")
    os.replace(other, not_keras3)
    with pytest.raises(ValueError, match="not in the Keras 3 layout"):
        model.load_weights(not_keras3)
    archive = str(tmp_path / "no_config.keras")
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("metadata.json", "{}")
    with pytest.raises(ValueError, match="has no 'config.json'"):
        keratron.models.load_model(archive)
    with pytest.raises(FileNotFoundError, match="missing.keras"):
        keratron.models.load_model(str(tmp_path / "missing.keras"))
    with pytest.raises(ValueError, match="must end in `.weights.h5`"):
        model.save_weights(str(tmp_path / "w.bin"))
    with pytest.raises(ValueError, match="Invalid filepath extension"):
        model.save(str(tmp_path / "m.bin"))


def test_keras3_file_missing_a_layer_names_it(tmp_path):
    small = keratron.Sequential([keratron.Input((3,)), layers.Dense(2)])
    path = str(tmp_path / "small.weights.h5")
    small.save_weights(path)
    bigger = keratron.Sequential([keratron.Input((3,)), layers.Dense(2), layers.Dense(2)])
    before = bigger.get_weights()
    with pytest.raises(
        ValueError, match="(?s)small.weights.h5.*layers/dense_1.*expected 2 variables"
    ):
        bigger.load_weights(path)
    _same(before, bigger.get_weights())


def test_overwrite_false_asks(tmp_path, monkeypatch):
    path = str(tmp_path / "w.h5")
    with open(path, "wb") as f:
        f.write(b"keep me")
    monkeypatch.setattr("builtins.input", lambda prompt="": "n")
    _functional().save_weights(path, overwrite=False)
    assert open(path, "rb").read() == b"keep me"
    monkeypatch.setattr("builtins.input", lambda prompt="": "y")
    _functional().save_weights(path, overwrite=False)
    assert h5py.is_hdf5(path)


# -------------------------------------------------------------------- custom objects / safety
@keratron.saving.register_keras_serializable(package="SavingTests")
class Scale(layers.Layer):
    def __init__(self, factor=2.0, **kwargs):
        super().__init__(**kwargs)
        self.factor = factor

    def build(self, input_shape):
        self.w = self.add_weight(shape=(input_shape[-1],), initializer="ones", name="w")

    def call(self, x):
        return x * self.w * self.factor

    def get_config(self):
        return {**super().get_config(), "factor": self.factor}


class Unregistered(layers.Layer):
    def call(self, x):
        return x + 1.0


@pytest.mark.parametrize("fmt", FORMATS_MODEL)
def test_registered_custom_layer(tmp_path, rng, fmt):
    assert keratron.saving.get_custom_objects()["SavingTests>Scale"] is Scale
    model = keratron.Sequential([keratron.Input((3,)), Scale(3.0, name="scale")])
    _randomize(model, rng)
    path = str(tmp_path / f"m.{fmt}")
    model.save(path)
    loaded = keratron.models.load_model(path)
    assert isinstance(loaded.layers[0], Scale) and loaded.layers[0].factor == 3.0
    _same(model.get_weights(), loaded.get_weights())


@pytest.mark.parametrize("fmt", FORMATS_MODEL)
def test_unregistered_custom_layer_needs_custom_objects(tmp_path, fmt):
    model = keratron.Sequential([keratron.Input((3,)), Unregistered(name="plus_one")])
    path = str(tmp_path / f"m.{fmt}")
    model.save(path)
    with pytest.raises(ValueError, match="Unknown layer: 'Unregistered'"):
        keratron.models.load_model(path)
    with keratron.saving.custom_object_scope({"Unregistered": Unregistered}):
        assert isinstance(keratron.models.load_model(path).layers[0], Unregistered)
    loaded = keratron.models.load_model(path, custom_objects={"Unregistered": Unregistered})
    np.testing.assert_array_equal(np.asarray(loaded(np.zeros((1, 3), "float32"))), 1.0)


@keratron.saving.register_keras_serializable(package="SavingTests")
class TwoTower(keratron.Model):
    def __init__(self, hidden=4, **kwargs):
        super().__init__(**kwargs)
        self.hidden = hidden
        self.left = layers.Dense(hidden, activation="tanh")
        self.right = layers.Dense(hidden)
        self.out = layers.Dense(1)

    def call(self, x):
        return self.out(self.left(x) + self.right(x))

    def get_config(self):
        return {"hidden": self.hidden, "name": self.name}


@pytest.mark.parametrize("fmt", ["keras", "weights.h5", "h5"])
def test_subclassed_model(tmp_path, rng, fmt):
    model = TwoTower(hidden=5, name="towers")
    x = rng.normal(size=(4, 3)).astype("float32")
    model(x)
    _randomize(model, rng)
    path = str(tmp_path / f"m.{fmt}")
    if fmt == "keras":
        model.save(path)
        loaded = keratron.models.load_model(path)
        assert isinstance(loaded, TwoTower) and loaded.hidden == 5
    else:
        model.save_weights(path)
        loaded = TwoTower(hidden=5)
        loaded(x)
        loaded.load_weights(path)
    _same(model.get_weights(), loaded.get_weights())
    np.testing.assert_array_equal(np.asarray(model(x)), np.asarray(loaded(x)))


@pytest.mark.parametrize("fmt", FORMATS_MODEL)
def test_safe_mode_refuses_lambda(tmp_path, fmt):
    model = keratron.Sequential([keratron.Input((2,)), layers.Lambda(lambda t: t * 2.0)])
    path = str(tmp_path / f"m.{fmt}")
    model.save(path)
    with pytest.raises(ValueError, match="safe_mode=False") as err:
        keratron.models.load_model(path)
    assert path in str(err.value) and "lambda" in str(err.value)
    loaded = keratron.models.load_model(path, safe_mode=False)
    out = np.asarray(loaded(np.ones((1, 2), "float32")))
    np.testing.assert_array_equal(out, [[2.0, 2.0]])


def test_object_dtype_datasets_are_refused(tmp_path):
    model = keratron.Sequential([keratron.Input((2,)), layers.Dense(1, name="d")])
    path = str(tmp_path / "w.h5")
    model.save_weights(path)
    with h5py.File(path, "a") as f:
        group = f["d"]
        name = _text(group.attrs["weight_names"])[0]
        del group[name]
        group.create_dataset(name, data=np.array([b"x", b"y"], dtype=object))
    with pytest.raises(ValueError, match="Python objects|needs pickle|pickle"):
        model.load_weights(path)


# ----------------------------------------------------------------------------- resuming
@pytest.mark.parametrize("fmt", ["keras", "h5"])
def test_resumed_fit_matches_uninterrupted(tmp_path, fmt):
    rng = np.random.default_rng(7)
    x, y = _data(rng, n=16)

    def fresh():
        keratron.utils.set_random_seed(3)
        model = _functional()
        model.compile(optimizer="adam", loss="mse")
        return model

    full = fresh()
    curve = full.fit(x, y, epochs=4, batch_size=4, shuffle=False, verbose=0).history["loss"]
    first = fresh()
    head = first.fit(x, y, epochs=2, batch_size=4, shuffle=False, verbose=0).history["loss"]
    path = str(tmp_path / f"ckpt.{fmt}")
    first.save(path)
    resumed = keratron.models.load_model(path)
    assert int(np.asarray(resumed.optimizer.iterations)) == 8
    tail = resumed.fit(
        x, y, epochs=4, initial_epoch=2, batch_size=4, shuffle=False, verbose=0
    ).history["loss"]
    assert head + tail == curve
    _same(full.get_weights(), resumed.get_weights())
