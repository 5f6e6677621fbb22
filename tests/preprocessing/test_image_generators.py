"""tf.keras's legacy `ImageDataGenerator`, its iterators and the image transforms against Keras
3's own (`keras.src.legacy.preprocessing.image`, which warps with scipy.ndimage): the warp's
values to the bit, the random parameters for a seed, `fit` / `standardize`, and every batch of
`flow` and `flow_from_directory`; then `model.fit` reading `flow`.

Both sides run in this process and draw from numpy's global generator, which each comparison
seeds alike before calling either side.
"""

import importlib

import numpy as np
import pytest

import keratron
from keratron.preprocessing import image as ours
from tests.conftest import require

FILL_MODES = ("constant", "nearest", "reflect", "wrap")


def _keras():
    require("keras")
    require("scipy")
    return importlib.import_module("keras.src.legacy.preprocessing.image")


def _same(a, b):
    """Batches (arrays, or tuples / lists of them) equal to the bit, with equal dtypes."""
    if isinstance(a, (tuple, list)):
        assert type(a) is type(b) and len(a) == len(b)
        for x, y in zip(a, b):
            _same(x, y)
        return
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape
    np.testing.assert_array_equal(a, b)


@pytest.mark.interop
def test_namespace_matches_tf_keras():
    require("keras")
    tf_keras = importlib.import_module("keras._tf_keras.keras.preprocessing.image")
    public = {n for n in dir(tf_keras) if not n.startswith("_")}
    assert public == set(ours.__all__)


# (name, affine parameters)
AFFINE_CASES = [
    ("rotation", dict(theta=33.0)),
    ("rotation_neg_large", dict(theta=-171.5)),
    ("shift", dict(tx=2.6, ty=-3.25)),
    ("shift_far", dict(tx=-11.0, ty=17.5)),
    ("shear", dict(shear=27.0)),
    ("zoom_in", dict(zx=0.55, zy=0.8)),
    ("zoom_out", dict(zx=1.9, zy=2.4)),
    ("everything", dict(theta=-12.0, tx=1.5, ty=-0.75, shear=-9.0, zx=1.3, zy=0.7)),
]
# (image shape, row_axis, col_axis, channel_axis, dtype)
LAYOUTS = [
    ((7, 10, 3), 0, 1, 2, "float32"),
    ((2, 9, 6), 1, 2, 0, "float64"),
    ((5, 8, 1), 0, 1, 2, "uint8"),
    ((3, 6, 5), 2, 1, 0, "float32"),  # columns before rows
    ((1, 4, 2), 0, 1, 2, "float32"),  # a single row
]


@pytest.mark.interop
@pytest.mark.parametrize("order", [0, 1])
@pytest.mark.parametrize("fill_mode", FILL_MODES)
def test_apply_affine_transform_matches_scipy(fill_mode, order):
    keras_image = _keras()
    rng = np.random.default_rng(7)
    for shape, row, col, chan, dtype in LAYOUTS:
        x = (rng.normal(size=shape) * 60 + 120).clip(0, 255).astype(dtype)
        for _, params in AFFINE_CASES:
            kwargs = dict(
                row_axis=row, col_axis=col, channel_axis=chan, fill_mode=fill_mode, cval=-4.5
            )
            expected = keras_image.apply_affine_transform(x, **params, **kwargs, order=order)
            got = ours.apply_affine_transform(x, **params, **kwargs, order=order)
            _same(got, expected)


@pytest.mark.interop
def test_apply_affine_transform_identity_and_errors():
    keras_image = _keras()
    x = np.arange(24.0).reshape(2, 3, 4)
    assert ours.apply_affine_transform(x) is x
    _same(ours.apply_affine_transform(x, zx=1, zy=1), keras_image.apply_affine_transform(x))
    for bad in (dict(row_axis=0, col_axis=0), dict(channel_axis=1, row_axis=0, col_axis=2)):
        with pytest.raises(ValueError):
            ours.apply_affine_transform(x, theta=5, **bad)
    with pytest.raises(ValueError, match="order"):
        ours.apply_affine_transform(x, theta=5, order=3)
    with pytest.raises(ValueError, match="fill_mode"):
        ours.apply_affine_transform(x, theta=5, fill_mode="edge")
    with pytest.raises(ValueError, match="3-D"):
        ours.apply_affine_transform(x[0], theta=5)


@pytest.mark.interop
def test_channel_and_brightness_shifts_match_keras():
    keras_image = _keras()
    rng = np.random.default_rng(3)
    images = [
        rng.uniform(0, 255, size=(5, 6, 3)).astype("float32"),
        rng.uniform(-2, 3, size=(4, 4, 1)).astype("float32"),  # outside [0, 255]
        rng.uniform(10, 200, size=(3, 5, 4)).astype("float32"),
    ]
    for x in images:
        for intensity in (-30.0, 0.4, 80.0):
            for axis in (0, 2):
                _same(
                    ours.apply_channel_shift(x, intensity, axis),
                    keras_image.apply_channel_shift(x, intensity, axis),
                )
        for brightness in (0.3, 1.0, 1.7):
            for scale in (True, False):
                _same(
                    ours.apply_brightness_shift(x, brightness, scale),
                    keras_image.apply_brightness_shift(x, brightness, scale),
                )


@pytest.mark.interop
def test_random_functions_match_keras_for_a_seed():
    keras_image = _keras()
    x = np.random.default_rng(4).uniform(0, 255, size=(3, 9, 7)).astype("float32")
    calls = [
        ("random_rotation", (40,), dict(fill_mode="reflect")),
        ("random_shift", (0.3, 0.2), dict(fill_mode="wrap", interpolation_order=0)),
        ("random_shear", (25,), dict(fill_mode="constant", cval=1.0)),
        ("random_zoom", ((0.6, 1.4),), {}),
        ("random_channel_shift", (20.0,), {}),
    ]
    for name, args, kwargs in calls:
        for seed in (0, 11):
            np.random.seed(seed)
            expected = getattr(keras_image, name)(x, *args, **kwargs)
            np.random.seed(seed)
            _same(getattr(ours, name)(x, *args, **kwargs), expected)
    last = np.moveaxis(x, 0, 2)
    np.random.seed(5)
    expected = keras_image.random_brightness(last, (0.5, 1.5))
    np.random.seed(5)
    _same(ours.random_brightness(last, (0.5, 1.5)), expected)
    with pytest.raises(ValueError):
        ours.random_zoom(x, (0.5, 1.0, 2.0))


# (name, ImageDataGenerator kwargs)
GENERATOR_CASES = [
    ("none", {}),
    ("rotation", dict(rotation_range=30)),
    ("float_shifts", dict(width_shift_range=0.2, height_shift_range=0.3)),
    ("pixel_shifts", dict(width_shift_range=3, height_shift_range=[1, 2, 4])),
    ("large_float_shift", dict(width_shift_range=2.5)),
    ("zoom_float", dict(zoom_range=0.25)),
    ("zoom_pair", dict(zoom_range=(0.7, 1.1))),
    ("flips", dict(horizontal_flip=True, vertical_flip=True)),
    ("channel_shift", dict(channel_shift_range=15.0)),
    ("brightness", dict(brightness_range=(0.6, 1.4))),
    (
        "all",
        dict(
            rotation_range=20,
            width_shift_range=0.1,
            height_shift_range=0.1,
            shear_range=10,
            zoom_range=0.2,
            channel_shift_range=5.0,
            horizontal_flip=True,
            fill_mode="constant",
            cval=3.0,
            interpolation_order=0,
        ),
    ),
]


# Keras's brightness shift reads every image as channels-last, so it runs on those alone.
TRANSFORM_CASES = [
    pytest.param(kwargs, data_format, id=f"{name}-{data_format}")
    for name, kwargs in GENERATOR_CASES
    for data_format in ("channels_last", "channels_first")
    if not (name == "brightness" and data_format == "channels_first")
]


@pytest.mark.interop
@pytest.mark.parametrize("kwargs,data_format", TRANSFORM_CASES)
def test_random_transform_matches_keras_for_a_seed(kwargs, data_format):
    keras_image = _keras()
    theirs = keras_image.ImageDataGenerator(data_format=data_format, **kwargs)
    mine = ours.ImageDataGenerator(data_format=data_format, **kwargs)
    shape = (11, 8, 3) if data_format == "channels_last" else (3, 11, 8)
    x = np.random.default_rng(1).uniform(0, 255, size=shape).astype("float32")
    for seed in (0, 1, 42):
        expected = theirs.get_random_transform(shape, seed=seed)
        got = mine.get_random_transform(shape, seed=seed)
        assert got.keys() == expected.keys()
        for key in expected:
            assert got[key] == expected[key], key
        _same(mine.random_transform(x, seed=seed), theirs.random_transform(x, seed=seed))
    # Without a seed both continue from numpy's global state.
    np.random.seed(9)
    expected = [theirs.get_random_transform(shape) for _ in range(3)]
    np.random.seed(9)
    assert [mine.get_random_transform(shape) for _ in range(3)] == expected


def _fitted_pair(keras_image, x, fit_kwargs=None, **kwargs):
    theirs = keras_image.ImageDataGenerator(**kwargs)
    mine = ours.ImageDataGenerator(**kwargs)
    theirs.fit(x, **(fit_kwargs or {}))
    mine.fit(x, **(fit_kwargs or {}))
    return mine, theirs


@pytest.mark.interop
@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize(
    "kwargs,fit_kwargs",
    [
        (dict(featurewise_center=True), None),
        (dict(featurewise_std_normalization=True, rescale=1 / 255), None),
        (dict(featurewise_center=True, featurewise_std_normalization=True), None),
        (dict(zca_whitening=True, zca_epsilon=1e-3), None),
        (dict(samplewise_center=True, samplewise_std_normalization=True), None),
        (dict(featurewise_center=True, data_format="channels_first"), None),
        (
            dict(featurewise_std_normalization=True, rotation_range=30, horizontal_flip=True),
            dict(augment=True, rounds=2, seed=3),
        ),
        (dict(rescale=0.5, preprocessing_function=lambda v: v + 1.0), None),
    ],
)
def test_fit_and_standardize_match_keras(kwargs, fit_kwargs):
    keras_image = _keras()
    rng = np.random.default_rng(2)
    shape = (12, 3, 5, 4) if kwargs.get("data_format") == "channels_first" else (12, 5, 4, 3)
    x = rng.uniform(0, 255, size=shape).astype("float32")
    mine, theirs = _fitted_pair(keras_image, x, fit_kwargs, **kwargs)
    for attr in ("featurewise_center", "featurewise_std_normalization", "samplewise_center"):
        assert getattr(mine, attr) == getattr(theirs, attr)
    for attr in ("mean", "std", "zca_whitening_matrix"):
        expected = getattr(theirs, attr)
        if expected is None:
            assert getattr(mine, attr) is None
        else:
            _same(getattr(mine, attr), expected)
    queries = rng.uniform(0, 255, size=shape).astype("float32")
    _same(mine.standardize(queries.copy()), theirs.standardize(queries.copy()))
    _same(mine.standardize(queries[0].copy()), theirs.standardize(queries[0].copy()))


@pytest.mark.interop
def test_standardize_warns_before_fit_and_constructor_errors():
    gen = ours.ImageDataGenerator(featurewise_center=True, zca_whitening=True)
    with pytest.warns(UserWarning, match="fit"):
        gen.standardize(np.ones((2, 2, 3), "float32"))
    for bad in (
        dict(data_format="channels_middle"),
        dict(validation_split=1.5),
        dict(zoom_range=(0.5, 1.0, 2.0)),
        dict(brightness_range=0.5),
    ):
        with pytest.raises(ValueError):
            ours.ImageDataGenerator(**bad)
    with pytest.raises(ValueError, match="rank 4"):
        ours.ImageDataGenerator().fit(np.ones((3, 4, 4)))


def _epoch(iterator):
    return [iterator[i] for i in range(len(iterator))]


@pytest.mark.interop
@pytest.mark.parametrize(
    "flow_kwargs",
    [
        dict(batch_size=4, shuffle=False),
        dict(batch_size=5, shuffle=True, seed=13),
        dict(batch_size=3, seed=2, subset="validation"),
        dict(batch_size=4, seed=2, subset="training"),
    ],
    ids=["ordered", "shuffled", "validation", "training"],
)
def test_flow_batches_match_keras(flow_kwargs):
    keras_image = _keras()
    rng = np.random.default_rng(5)
    x = rng.uniform(0, 255, size=(14, 6, 7, 3))
    y = np.tile([0, 1], 7)
    weights = rng.uniform(size=14)
    kwargs = dict(rotation_range=15, zoom_range=0.1, horizontal_flip=True, validation_split=0.3)
    theirs = keras_image.ImageDataGenerator(**kwargs)
    mine = ours.ImageDataGenerator(**kwargs)
    flows = []
    for extra in ({}, {"y": y}, {"y": y, "sample_weight": weights}):
        if "sample_weight" in extra and flow_kwargs.get("subset") == "training":
            continue  # Keras does not split the weights (see the next test)
        np.random.seed(0)
        expected_it = theirs.flow(x, **extra, **flow_kwargs)
        expected = _epoch(expected_it) + _epoch(expected_it)  # a second epoch reshuffles
        np.random.seed(0)
        got_it = mine.flow(x, **extra, **flow_kwargs)
        assert isinstance(got_it, keratron.utils.PyDataset)
        assert len(got_it) == len(expected_it)
        got = _epoch(got_it) + _epoch(got_it)
        _same(got, expected)
        flows.append(got_it)
    assert flows[0][0].dtype == np.float32


@pytest.mark.interop
def test_flow_next_tuple_inputs_and_subset_weights():
    keras_image = _keras()
    rng = np.random.default_rng(6)
    x = rng.uniform(size=(10, 4, 4, 1)).astype("float32")
    extra = rng.uniform(size=(10, 2))
    y = np.arange(10) % 2
    theirs = keras_image.ImageDataGenerator(width_shift_range=0.25)
    mine = ours.ImageDataGenerator(width_shift_range=0.25)
    np.random.seed(1)
    it = theirs.flow((x, extra), y, batch_size=4, seed=8)
    expected = [next(it) for _ in range(7)]  # past the end of an epoch: never stops
    np.random.seed(1)
    it = mine.flow((x, extra), y, batch_size=4, seed=8)
    _same([next(it) for _ in range(7)], expected)
    # The weights of a training subset are those of its samples (Keras does not split them).
    split = ours.ImageDataGenerator(validation_split=0.4)
    weights = np.arange(10.0)
    _, batch_y, batch_w = split.flow(x, y, sample_weight=weights, shuffle=False, subset="training")[
        0
    ]
    np.testing.assert_array_equal(batch_w, weights[4:])
    np.testing.assert_array_equal(batch_y, y[4:])
    with pytest.raises(ValueError, match="different"):
        split.flow(x, np.sort(y), subset="training")
    with pytest.raises(ValueError, match="subset"):
        split.flow(x, y, subset="test")
    with pytest.raises(ValueError, match="same length"):
        split.flow(x, y[:5])
    with pytest.raises(ValueError, match="rank 4"):
        split.flow(x[0], y[:4])


@pytest.mark.interop
def test_flow_save_to_dir_writes_one_file_per_image(tmp_path):
    gen = ours.ImageDataGenerator(rotation_range=10)
    x = np.random.default_rng(0).uniform(0, 255, size=(5, 6, 6, 3))
    gen.flow(x, batch_size=3, save_to_dir=str(tmp_path), save_prefix="aug")[1]
    names = sorted(p.name for p in tmp_path.iterdir())
    assert len(names) == 2 and all(n.startswith("aug_") and n.endswith(".png") for n in names)


def _write_tree(root):
    """Class folders with images of several sizes and modes, a nested folder, a non-image file
    and an empty class, as a tf.keras tutorial's data set."""
    from PIL import Image

    rng = np.random.default_rng(8)
    layout = {
        "dogs": ["b.png", "a.jpg", "c.bmp", "sub/d.png", "sub/deeper/e.png", "notes.txt"],
        "cats": ["z.png", "y.PNG", "x.jpeg", "w.png"],
        "birds": [],
        "ants": ["q.png", "p.tif"],
    }
    for cls, names in layout.items():
        (root / cls).mkdir()
        for name in names:
            path = root / cls / name
            path.parent.mkdir(parents=True, exist_ok=True)
            if name.endswith(".txt"):
                path.write_text("not an image")
                continue
            h, w = int(rng.integers(5, 12)), int(rng.integers(5, 12))
            mode = ["RGB", "L", "RGBA"][int(rng.integers(0, 3))]
            channels = {"RGB": 3, "L": 1, "RGBA": 4}[mode]
            pixels = rng.integers(0, 256, size=(h, w, channels), dtype=np.uint8)
            img = Image.fromarray(pixels[..., 0] if channels == 1 else pixels, mode)
            if name.endswith((".jpg", ".jpeg")):
                img = img.convert("RGB")  # JPEG holds no alpha
            img.save(path)
    (root / "README.md").write_text("not a class")


@pytest.mark.interop
@pytest.mark.parametrize(
    "flow_kwargs",
    [
        dict(class_mode="categorical", color_mode="rgb", shuffle=False, batch_size=4),
        dict(class_mode="binary", color_mode="grayscale", seed=3, batch_size=5),
        dict(class_mode="sparse", color_mode="rgba", seed=4, target_size=(7, 9)),
        dict(class_mode="input", shuffle=False, interpolation="bilinear", batch_size=3),
        dict(class_mode=None, shuffle=False, classes=["cats", "ants"], keep_aspect_ratio=True),
        dict(class_mode="sparse", subset="training", seed=1, batch_size=4),
        dict(class_mode="categorical", subset="validation", shuffle=False, batch_size=2),
    ],
    ids=["categorical", "binary", "sparse", "input", "none", "training", "validation"],
)
@pytest.mark.parametrize("data_format", ["channels_last", "channels_first"])
def test_flow_from_directory_matches_keras(tmp_path, flow_kwargs, data_format, capsys):
    keras_image = _keras()
    require("PIL")
    _write_tree(tmp_path)
    kwargs = dict(
        rotation_range=10,
        width_shift_range=0.1,
        horizontal_flip=True,
        rescale=1 / 255,
        validation_split=0.5,
        data_format=data_format,
    )
    flow_kwargs = dict(dict(target_size=(6, 8)), **flow_kwargs)
    theirs = keras_image.ImageDataGenerator(**kwargs).flow_from_directory(
        str(tmp_path), **flow_kwargs
    )
    keras_printed = capsys.readouterr().out
    mine = ours.ImageDataGenerator(**kwargs).flow_from_directory(str(tmp_path), **flow_kwargs)
    assert capsys.readouterr().out == keras_printed
    assert isinstance(mine, keratron.utils.PyDataset)
    assert mine.class_indices == theirs.class_indices
    assert mine.filenames == theirs.filenames
    assert mine.filepaths == theirs.filepaths
    _same(mine.classes, theirs.classes)
    assert (mine.samples, mine.num_classes, len(mine)) == (
        theirs.samples,
        theirs.num_classes,
        len(theirs),
    )
    assert mine.image_shape == theirs.image_shape
    np.random.seed(0)
    expected = _epoch(theirs) + _epoch(theirs)
    np.random.seed(0)
    _same(_epoch(mine) + _epoch(mine), expected)


@pytest.mark.interop
def test_flow_from_directory_errors(tmp_path):
    require("PIL")
    (tmp_path / "a").mkdir()
    gen = ours.ImageDataGenerator()
    for bad in (dict(color_mode="cmyk"), dict(class_mode="raw"), dict(subset="test")):
        with pytest.raises(ValueError):
            gen.flow_from_directory(str(tmp_path), **bad)


def test_model_fit_reads_flow():
    rng = np.random.default_rng(0)
    y = np.repeat([0, 1], 20)
    # Dark images are class 0, bright ones class 1: learnable after rescaling.
    x = (rng.uniform(0, 80, size=(40, 6, 6, 1)) + 150 * y[:, None, None, None]).astype("float32")
    gen = ours.ImageDataGenerator(rescale=1 / 255, horizontal_flip=True, rotation_range=10)
    flow = gen.flow(x, y, batch_size=8, seed=1)
    seen = []
    original = flow._get_batches_of_transformed_samples

    def counted(index_array):
        seen.append(len(index_array))
        return original(index_array)

    flow._get_batches_of_transformed_samples = counted
    keratron.utils.set_random_seed(0)
    model = keratron.Sequential(
        [
            keratron.Input((6, 6, 1)),
            keratron.layers.Flatten(),
            keratron.layers.Dense(2, activation="softmax"),
        ]
    )
    model.compile(
        optimizer=keratron.optimizers.Adam(0.05),
        loss="sparse_categorical_crossentropy",
        metrics=["accuracy"],
    )
    history = model.fit(flow, epochs=6, verbose=0)
    assert seen == [8] * 5 * 6  # len(flow) batches of 8 an epoch
    losses = history.history["loss"]
    assert len(losses) == 6 and losses[-1] < losses[0]
    assert history.history["accuracy"][-1] > 0.9
    predictions = model.predict(gen.flow(x, batch_size=16, shuffle=False), verbose=0)
    assert predictions.shape == (40, 2)
