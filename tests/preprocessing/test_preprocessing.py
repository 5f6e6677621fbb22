"""keras.preprocessing, the image helpers of keras.utils, Resizing / CenterCrop and the
dataset builders, against Keras 3 (torch backend) on files the tests write."""

import numpy as np
import pytest

import keratron
from tests.conftest import require

pytestmark = pytest.mark.interop


def _batches(ds):
    return [
        tuple(np.asarray(t) for t in b) if isinstance(b, tuple) else (np.asarray(b),) for b in ds
    ]


def test_namespaces_match_keras():
    keras = require("keras")
    for ours, theirs in [
        (keratron.preprocessing, keras.preprocessing),
        (keratron.preprocessing.image, keras.preprocessing.image),
        (keratron.preprocessing.sequence, keras.preprocessing.sequence),
    ]:
        expected = {n for n in dir(theirs) if not n.startswith("_")}
        expected.discard("text_dataset_from_directory")  # not built yet
        assert expected <= set(dir(ours)), expected - set(dir(ours))
    seqs = [[1, 2, 3], [4], [5, 6]]
    np.testing.assert_array_equal(
        keratron.preprocessing.sequence.pad_sequences(seqs, maxlen=2, padding="post"),
        keras.preprocessing.sequence.pad_sequences(seqs, maxlen=2, padding="post"),
    )


def test_image_helpers_match_keras(tmp_path):
    keras = require("keras")
    rng = np.random.default_rng(0)
    array = rng.integers(0, 256, size=(6, 10, 3)).astype("float32")
    for k, name in ((keratron, "ours.png"), (keras, "keras.png")):
        k.utils.save_img(str(tmp_path / name), array, scale=False)
    for mode in ("rgb", "grayscale", "rgba"):
        for kwargs in (
            {},
            {"target_size": (4, 4)},
            {"target_size": (4, 4), "keep_aspect_ratio": True},
        ):
            ours = keratron.utils.img_to_array(
                keratron.utils.load_img(str(tmp_path / "keras.png"), color_mode=mode, **kwargs)
            )
            theirs = keras.utils.img_to_array(
                keras.utils.load_img(str(tmp_path / "ours.png"), color_mode=mode, **kwargs)
            )
            np.testing.assert_array_equal(ours, theirs)
    np.testing.assert_array_equal(
        keratron.utils.img_to_array(keratron.utils.array_to_img(array)),
        keras.utils.img_to_array(keras.utils.array_to_img(array)),
    )
    np.testing.assert_allclose(
        keratron.preprocessing.image.smart_resize(array, (5, 5)),
        keras.ops.convert_to_numpy(keras.preprocessing.image.smart_resize(array, (5, 5))),
        atol=1e-3,
    )


@pytest.mark.parametrize(
    "layer, kwargs, shape",
    [
        ("Resizing", {"height": 4, "width": 5}, (2, 7, 9, 3)),
        ("Resizing", {"height": 8, "width": 3, "crop_to_aspect_ratio": True}, (2, 7, 9, 3)),
        ("Resizing", {"height": 5, "width": 5, "pad_to_aspect_ratio": True}, (1, 6, 9, 2)),
        ("Resizing", {"height": 3, "width": 4, "interpolation": "nearest"}, (7, 9, 3)),
        ("CenterCrop", {"height": 4, "width": 5}, (2, 7, 9, 3)),
        ("CenterCrop", {"height": 9, "width": 5}, (2, 7, 9, 3)),
        ("Rescaling", {"scale": 1 / 255, "offset": -1}, (2, 3, 3, 1)),
    ],
)
def test_image_layers_match_keras(layer, kwargs, shape):
    keras = require("keras")
    x = np.random.default_rng(1).uniform(0, 255, size=shape).astype("float32")
    ours = getattr(keratron.layers, layer)(**kwargs)
    theirs = getattr(keras.layers, layer)(**kwargs)
    expected = keras.ops.convert_to_numpy(theirs(x))
    np.testing.assert_allclose(ours(x).numpy(), expected, rtol=1e-4, atol=1e-3)
    symbolic = ours.compute_output_shape((None,) + shape[1:])
    assert symbolic == theirs.compute_output_shape((None,) + shape[1:])
    assert ours.get_config().keys() >= {k for k in kwargs}
    restored = getattr(keratron.layers, layer).from_config(ours.get_config())
    np.testing.assert_allclose(restored(x).numpy(), expected, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"sequence_length": 5, "batch_size": 8},
        {"sequence_length": 4, "sequence_stride": 3, "sampling_rate": 2, "batch_size": 5},
        {"sequence_length": 3, "start_index": 10, "end_index": 60, "batch_size": 16},
        {"sequence_length": 3, "batch_size": None},
    ],
)
def test_timeseries_dataset_matches_keras(kwargs):
    keras = require("keras")
    data = np.arange(200, dtype="float32").reshape(100, 2)
    targets = np.arange(100) * 10
    for t in (targets, None):
        ours = _batches(keratron.utils.timeseries_dataset_from_array(data, t, **kwargs))
        theirs = _batches(keras.utils.timeseries_dataset_from_array(data, t, **kwargs))
        assert len(ours) == len(theirs)
        for a, b in zip(ours, theirs):
            for u, v in zip(a, b):
                np.testing.assert_array_equal(u, v)
    ds = keratron.utils.timeseries_dataset_from_array(
        data, targets, sequence_length=5, batch_size=8, shuffle=True, seed=3
    )
    assert isinstance(ds, keratron.data.Dataset)
    windows = np.concatenate([np.asarray(x) for x, _ in ds])
    assert sorted(windows[:, 0, 0].tolist()) == list(range(0, 192, 2))


def _write_images(root, rng):
    from PIL import Image

    for cls, count in (("cats", 3), ("dogs", 4)):
        (root / cls).mkdir(parents=True)
        for i in range(count):
            h, w = (6, 8) if i % 2 else (8, 8)
            pixels = rng.integers(0, 256, size=(h, w, 3)).astype("uint8")
            Image.fromarray(pixels).save(root / cls / f"img_{i}.png")


@pytest.mark.parametrize("subset", ["training", "validation", "both"])
def test_image_dataset_from_directory_prints_what_keras_prints(tmp_path, subset, capsys):
    keras = require("keras")
    _write_images(tmp_path / "data", np.random.default_rng(2))
    kwargs = dict(validation_split=0.3, subset=subset, seed=4, image_size=(8, 8))
    keratron.utils.image_dataset_from_directory(str(tmp_path / "data"), **kwargs)
    ours = capsys.readouterr().out
    keras.utils.image_dataset_from_directory(str(tmp_path / "data"), **kwargs)
    theirs = capsys.readouterr().out
    assert ours == theirs and "files for" in ours, (ours, theirs)


@pytest.mark.parametrize("label_mode", ["int", "categorical", "binary"])
def test_image_dataset_from_directory_matches_keras(tmp_path, label_mode):
    keras = require("keras")
    _write_images(tmp_path / "data", np.random.default_rng(2))
    kwargs = dict(
        label_mode=label_mode, image_size=(8, 8), batch_size=3, shuffle=False, verbose=False
    )
    ours = keratron.utils.image_dataset_from_directory(str(tmp_path / "data"), **kwargs)
    theirs = keras.utils.image_dataset_from_directory(str(tmp_path / "data"), **kwargs)
    assert isinstance(ours, keratron.data.Dataset)
    assert ours.class_names == theirs.class_names == ["cats", "dogs"]
    ours_b, theirs_b = _batches(ours), _batches(theirs)
    assert len(ours_b) == len(theirs_b)
    for (x, y), (u, v) in zip(ours_b, theirs_b):
        assert x.dtype == u.dtype and y.dtype == v.dtype and y.shape == v.shape
        np.testing.assert_array_equal(y, v)
        np.testing.assert_allclose(x, u, atol=1.0)  # 6x8 images are resized (TF vs ours)
    train, val = keratron.utils.image_dataset_from_directory(
        str(tmp_path / "data"),
        validation_split=0.3,
        subset="both",
        seed=4,
        image_size=(8, 8),
        verbose=False,
    )
    k_train, k_val = keras.utils.image_dataset_from_directory(
        str(tmp_path / "data"),
        validation_split=0.3,
        subset="both",
        seed=4,
        image_size=(8, 8),
        verbose=False,
    )
    assert sum(len(y) for _, y in _batches(train)) == sum(len(y) for _, y in _batches(k_train))
    assert sum(len(y) for _, y in _batches(val)) == sum(len(y) for _, y in _batches(k_val))
    model = keratron.Sequential(
        [keratron.Input((8, 8, 3)), keratron.layers.Flatten(), keratron.layers.Dense(2)]
    )
    model.compile(optimizer="sgd", loss="sparse_categorical_crossentropy")
    model.fit(train, validation_data=val, epochs=1, verbose=0)
