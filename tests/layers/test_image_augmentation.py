"""Random image augmentation layers against Keras 3.15: configs, inference identity, outputs
for fixed factors, and properties of the random draws."""

import numpy as np
import pytest

import keratron as kt
from tests.conftest import require
from tests.layers.layer_test import run_layer_test

pytestmark = pytest.mark.interop

RNG = np.random.default_rng(0)
IMAGES = RNG.uniform(0, 255, (3, 7, 9, 2)).astype("float32")

LAYERS = [
    ("RandomFlip", {"mode": "horizontal", "seed": 3}),
    ("RandomRotation", {"factor": 0.2, "seed": 1}),
    ("RandomZoom", {"height_factor": (-0.3, 0.2), "width_factor": 0.1}),
    ("RandomTranslation", {"height_factor": 0.2, "width_factor": (-0.1, 0.3)}),
    ("RandomContrast", {"factor": 0.4, "value_range": (0, 1)}),
    ("RandomBrightness", {"factor": (-0.2, 0.1), "value_range": (0, 255)}),
    ("RandomCrop", {"height": 4, "width": 5, "seed": 7}),
]


def _k(x):
    keras = require("keras")
    return keras.ops.convert_to_numpy(x)


@pytest.mark.parametrize("name,kwargs", LAYERS, ids=[n for n, _ in LAYERS])
def test_layer_contract_and_config_matches_keras(name, kwargs):
    keras = require("keras")
    expected = (3, 4, 5, 2) if name == "RandomCrop" else IMAGES.shape
    layer = run_layer_test(
        getattr(kt.layers, name),
        init_kwargs=kwargs,
        input_data=IMAGES,
        training=True,
        expected_output_shape=expected,
        expected_num_trainable_weights=0,
        expected_num_non_trainable_weights=0,
    )
    ours = layer.get_config()
    theirs = getattr(keras.layers, name)(**kwargs).get_config()
    assert set(ours) == set(theirs)
    for key in set(theirs) - {"name", "dtype"}:
        assert ours[key] == theirs[key], key
    # A rank-3 image keeps its rank.
    assert tuple(layer(IMAGES[0], training=True).shape) == expected[1:]


@pytest.mark.parametrize("name,kwargs", LAYERS[:-1], ids=[n for n, _ in LAYERS[:-1]])
def test_inference_is_identity(name, kwargs):
    layer = getattr(kt.layers, name)(**kwargs)
    np.testing.assert_array_equal(layer(IMAGES, training=False).numpy(), IMAGES)
    model = kt.Sequential([kt.Input(IMAGES.shape[1:]), layer])
    np.testing.assert_array_equal(model.predict(IMAGES, verbose=0), IMAGES)


GEOMETRIC = [
    ("RandomRotation", {"factor": (0.25, 0.25)}),
    ("RandomRotation", {"factor": (-0.07, -0.07)}),
    ("RandomZoom", {"height_factor": (0.3, 0.3)}),
    ("RandomZoom", {"height_factor": (-0.4, -0.4), "width_factor": (0.2, 0.2)}),
    ("RandomTranslation", {"height_factor": (0.2, 0.2), "width_factor": (-0.3, -0.3)}),
]


@pytest.mark.parametrize("fill_mode", ["reflect", "wrap", "constant", "nearest"])
@pytest.mark.parametrize("interpolation", ["bilinear", "nearest"])
@pytest.mark.parametrize("name,kwargs", GEOMETRIC)
def test_fixed_geometric_transform_matches_keras(name, kwargs, fill_mode, interpolation):
    keras = require("keras")
    kw = dict(kwargs, fill_mode=fill_mode, interpolation=interpolation, fill_value=3.0)
    want = _k(getattr(keras.layers, name)(**kw)(IMAGES, training=True))
    got = getattr(kt.layers, name)(**kw)(IMAGES, training=True).numpy()
    np.testing.assert_allclose(got, want, atol=1e-3, rtol=1e-5)


@pytest.mark.parametrize("name,kwargs", GEOMETRIC[::2])
def test_fixed_geometric_transform_channels_first_and_single_image(name, kwargs):
    keras = require("keras")
    x = IMAGES.transpose(0, 3, 1, 2)
    kw = dict(kwargs, data_format="channels_first")
    want = _k(getattr(keras.layers, name)(**kw)(x, training=True))
    got = getattr(kt.layers, name)(**kw)(x, training=True).numpy()
    np.testing.assert_allclose(got, want, atol=1e-3, rtol=1e-5)
    want = _k(getattr(keras.layers, name)(**kwargs)(IMAGES[1], training=True))
    got = getattr(kt.layers, name)(**kwargs)(IMAGES[1], training=True).numpy()
    np.testing.assert_allclose(got, want, atol=1e-3, rtol=1e-5)


def test_fixed_brightness_matches_keras():
    keras = require("keras")
    for kw in ({"factor": (0.1, 0.1)}, {"factor": (-0.3, -0.3), "value_range": (0, 200)}):
        want = _k(keras.layers.RandomBrightness(**kw)(IMAGES, training=True))
        got = kt.layers.RandomBrightness(**kw)(IMAGES, training=True).numpy()
        np.testing.assert_allclose(got, want, atol=1e-4)


def test_random_flip_flips_whole_images_or_none():
    x = RNG.standard_normal((64, 5, 6, 2)).astype("float32")
    for mode, axes in [
        ("horizontal", (1,)),
        ("vertical", (0,)),
        ("horizontal_and_vertical", (0, 1)),
    ]:
        out = kt.layers.RandomFlip(mode, seed=5)(x, training=True).numpy()
        flipped = [np.array_equal(o, np.flip(i, axes)) for o, i in zip(out, x)]
        same = [np.array_equal(o, i) for o, i in zip(out, x)]
        assert all(f or s for f, s in zip(flipped, same)), mode
        assert 10 < sum(flipped) < 54, mode  # each image flips with probability 1/2


def test_seeded_layers_repeat_and_advance():
    a, b = kt.layers.RandomRotation(0.3, seed=11), kt.layers.RandomRotation(0.3, seed=11)
    first = a(IMAGES, training=True).numpy()
    np.testing.assert_array_equal(first, b(IMAGES, training=True).numpy())
    assert not np.allclose(first, a(IMAGES, training=True).numpy())
    # Draws per image: the batch's images get different angles.
    same = np.repeat(IMAGES[:1], 4, axis=0)
    out = kt.layers.RandomRotation(0.3, seed=2)(same, training=True).numpy()
    assert not np.allclose(out[0], out[1])


def test_random_contrast_keeps_mean_and_factor_range():
    x = RNG.uniform(100, 150, (32, 6, 5, 3)).astype("float32")
    lower, upper = 0.2, 0.5
    out = kt.layers.RandomContrast((lower, upper), seed=4)(x, training=True).numpy()
    mean = x.mean(axis=(1, 2), keepdims=True)
    np.testing.assert_allclose(out.mean(axis=(1, 2), keepdims=True), mean, atol=1e-3)
    factors = ((out - mean) / (x - mean)).reshape(32, -1)
    np.testing.assert_allclose(factors, factors[:, :1].repeat(factors.shape[1], 1), atol=1e-2)
    assert factors.min() >= 1 - lower - 1e-3 and factors.max() <= 1 + upper + 1e-3
    assert np.ptp(factors[:, 0]) > 0.1
    # Keras 3: a single number f draws from [1, 1 + f]; the result stays in value_range.
    wide = kt.layers.RandomContrast(0.9, value_range=(0, 255), seed=1)(IMAGES, training=True)
    assert 0 <= wide.numpy().min() and wide.numpy().max() <= 255


def test_random_brightness_shifts_each_image_within_range():
    x = RNG.uniform(50, 200, (16, 4, 4, 3)).astype("float32")
    out = kt.layers.RandomBrightness(0.1, seed=3)(x, training=True).numpy()
    delta = (out - x).reshape(16, -1)
    np.testing.assert_allclose(delta, delta[:, :1].repeat(delta.shape[1], 1), atol=1e-3)
    assert np.abs(delta).max() <= 25.5 + 1e-3 and np.ptp(delta[:, 0]) > 1


def test_random_translation_and_zoom_values_within_range():
    x = RNG.uniform(0, 1, (8, 6, 6, 1)).astype("float32")
    for layer in (
        kt.layers.RandomTranslation(0.3, 0.3, seed=1),
        kt.layers.RandomZoom(0.5, seed=1),
        kt.layers.RandomRotation(0.5, seed=1),
    ):
        out = layer(x, training=True).numpy()
        assert out.min() >= -1e-5 and out.max() <= 1 + 1e-5


def test_random_crop_window_and_inference():
    keras = require("keras")
    x = np.arange(2 * 7 * 9, dtype="float32").reshape(2, 7, 9, 1)
    layer = kt.layers.RandomCrop(4, 5, seed=2)
    starts = set()
    for _ in range(20):
        out = layer(x, training=True).numpy()
        h0, w0 = divmod(int(out[0, 0, 0, 0]), 9)
        np.testing.assert_array_equal(out, x[:, h0 : h0 + 4, w0 : w0 + 5])
        starts.add((h0, w0))
    assert len(starts) > 3
    # An input not larger than the target on both axes: Keras's window, then a resize.
    for small in (x[:, :3, :4], x[:, :, :4], x[:, :, :3], x[:, :4, :5]):
        want = _k(keras.layers.RandomCrop(4, 5)(small, training=True))
        np.testing.assert_allclose(layer(small, training=True).numpy(), want, atol=1e-4)
    # Inference: the documented largest centred window of the target aspect ratio, resized
    # (Keras's smart_resize), so the output has the layer's output shape.
    want = _k(keras.preprocessing.image.smart_resize(x, (4, 5)))
    np.testing.assert_allclose(layer(x, training=False).numpy(), want, atol=1e-4)


def test_augmentation_in_a_trained_model():
    x = RNG.uniform(0, 1, (8, 8, 8, 1)).astype("float32")
    model = kt.Sequential(
        [
            kt.Input((8, 8, 1)),
            kt.layers.RandomFlip(seed=1),
            kt.layers.RandomRotation(0.1, seed=1),
            kt.layers.RandomZoom(0.1, seed=1),
            kt.layers.RandomCrop(6, 6, seed=1),
            kt.layers.Flatten(),
            kt.layers.Dense(1),
        ]
    )
    assert model.output_shape == (None, 1)
    model.compile("adam", "mse")
    model.fit(x, np.zeros((8, 1)), epochs=2, verbose=0)
    assert model.predict(x, verbose=0).shape == (8, 1)
    step = kt.function(lambda t: model.layers[1](t, training=True))
    assert not np.array_equal(step(x).numpy(), step(x).numpy())


@pytest.mark.parametrize(
    "build",
    [
        lambda: kt.layers.RandomRotation(1.5),
        lambda: kt.layers.RandomZoom(-1.0),
        lambda: kt.layers.RandomTranslation((0.1, 0.2, 0.3), 0.1),
        lambda: kt.layers.RandomContrast(-0.1),
        lambda: kt.layers.RandomBrightness(0.1, value_range=5),
        lambda: kt.layers.RandomFlip("diagonal"),
        lambda: kt.layers.RandomCrop(0, 3),
    ],
)
def test_bad_arguments_raise(build):
    with pytest.raises(ValueError):
        build()


def test_bad_fill_mode_raises_like_keras():
    with pytest.raises(NotImplementedError, match="fill_mode"):
        kt.layers.RandomRotation(0.1, fill_mode="mirror")
    with pytest.raises(NotImplementedError, match="interpolation"):
        kt.layers.RandomZoom(0.1, interpolation="bicubic")
