"""`save_assets` / `load_assets` in `.keras` archives, laid out as Keras 3 lays them out.

A layer that defines `save_assets(dir)` writes files into a folder of its own; the archive keeps
them under `assets/<the layer's path>/`, and loading hands the same folder to `load_assets`
after the weights are in place.
"""

import os
import zipfile

import numpy as np
import pytest

import keratron as keras


@keras.saving.register_keras_serializable(package="test_keras_assets")
class LayerWithVocab(keras.layers.Dense):
    def __init__(self, vocab=None, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.vocab = vocab

    def save_assets(self, inner_path):
        with open(os.path.join(inner_path, "vocabulary.txt"), "w") as f:
            f.write(self.vocab)
        os.makedirs(os.path.join(inner_path, "nested"))
        with open(os.path.join(inner_path, "nested", "counts.bin"), "wb") as f:
            f.write(bytes([1, 2, 3]))

    def load_assets(self, inner_path):
        with open(os.path.join(inner_path, "vocabulary.txt")) as f:
            self.vocab = f.read().replace("<unk>", "little")
        with open(os.path.join(inner_path, "nested", "counts.bin"), "rb") as f:
            self.counts = list(f.read())


def _model():
    model = keras.Sequential([keras.Input((4,)), LayerWithVocab(vocab="a <unk> lamb", units=2)])
    model.layers[0].kernel.assign(np.arange(8, dtype="float32").reshape(4, 2))
    return model


def test_assets_round_trip_through_a_keras_archive(tmp_path):
    path = tmp_path / "assets_model.keras"
    _model().save(path)
    with zipfile.ZipFile(path) as zf:
        names = set(zf.namelist())
        assert zf.read("assets/layers/layer_with_vocab/vocabulary.txt") == b"a <unk> lamb"
    assert "assets/layers/layer_with_vocab/nested/counts.bin" in names
    restored = keras.models.load_model(path)
    assert restored.layers[0].vocab == "a little lamb"
    assert restored.layers[0].counts == [1, 2, 3]
    np.testing.assert_array_equal(
        restored.layers[0].kernel.numpy(), np.arange(8, dtype="float32").reshape(4, 2)
    )


def test_an_archive_without_the_assets_folder_gives_load_assets_none(tmp_path):
    received = []

    @keras.saving.register_keras_serializable(package="test_keras_assets")
    class Recorder(keras.layers.Dense):
        def load_assets(self, inner_path):
            received.append(inner_path)

    path = tmp_path / "no_assets.keras"
    keras.Sequential([keras.Input((3,)), Recorder(2)]).save(path)
    keras.models.load_model(path)
    assert received == [None]  # as Keras's DiskIOStore.get: None for a missing folder


def test_an_asset_path_that_escapes_the_assets_folder_is_refused(tmp_path):
    path = tmp_path / "assets_model.keras"
    _model().save(path)
    evil = tmp_path / "evil.keras"
    with zipfile.ZipFile(path) as src, zipfile.ZipFile(evil, "w") as dst:
        for item in src.infolist():
            dst.writestr(item, src.read(item))
        dst.writestr("assets/../../outside.txt", b"x")
    with pytest.raises(ValueError, match="outside.txt"):
        keras.models.load_model(evil)
    assert not (tmp_path / "outside.txt").exists()
