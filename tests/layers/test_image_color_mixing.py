"""The Keras 3.15 colour, warping and mixing image layers against real Keras: configs, the
layer contract, outputs of the deterministic layers and of fixed factors, Keras's own random
draws applied by our layers, dict inputs, and properties of our random draws."""

import numpy as np
import pytest

import keratron as kt
from tests.conftest import require
from tests.layers.layer_test import run_layer_test

pytestmark = pytest.mark.interop

RNG = np.random.default_rng(0)
IMAGES = RNG.uniform(0, 255, (3, 7, 9, 3)).astype("float32")

LAYERS = [
    ("AugMix", {"seed": 1}),
    ("AutoContrast", {"value_range": (0, 255)}),
    ("ContrastLimitedAdaptiveHistogramEqualization", {"tile_grid_size": (2, 3), "clip_limit": 0}),
    ("CutMix", {"factor": 0.5, "seed": 2}),
    ("Equalization", {"bins": 64}),
    ("MaxNumBoundingBoxes", {"max_number": 3}),
    ("MixUp", {"alpha": 0.4, "seed": 3}),
    ("RandAugment", {"num_ops": 1, "factor": 0.3, "seed": 4}),
    ("RandomColorDegeneration", {"factor": 0.4}),
    ("RandomColorJitter", {"brightness_factor": 0.2, "hue_factor": 0.1, "seed": 5}),
    ("RandomElasticTransform", {"scale": 0.5, "seed": 6}),
    ("RandomErasing", {"scale": (0.1, 0.3), "fill_value": 0.0}),
    ("RandomGaussianBlur", {"kernel_size": 5, "sigma": (0.5, 1.0)}),
    ("RandomGrayscale", {"factor": 0.7}),
    ("RandomHue", {"factor": 0.3}),
    ("RandomInvert", {"factor": 0.6}),
    ("RandomPerspective", {"scale": 0.3, "interpolation": "nearest"}),
    ("RandomPosterization", {"factor": (2, 6)}),
    ("RandomSaturation", {"factor": (0.2, 0.8)}),
    ("RandomSharpness", {"factor": 0.7}),
    ("RandomShear", {"x_factor": 0.2, "y_factor": (0.1, 0.3), "fill_mode": "constant"}),
    ("Solarization", {"addition_factor": 0.1, "threshold_factor": (0.2, 0.6)}),
]
NAMES = [n for n, _ in LAYERS]
ACTIVE_AT_INFERENCE = {"AutoContrast", "ContrastLimitedAdaptiveHistogramEqualization"}


def _k(x):
    return require("keras").ops.convert_to_numpy(x)


def _keras_layer(name, **kwargs):
    return getattr(require("keras").layers, name)(**kwargs)


def _ours_and_keras(name, kwargs, x, atol=1e-4, **call):
    want = _k(_keras_layer(name, **kwargs)(x, training=True, **call))
    got = getattr(kt.layers, name)(**kwargs)(x, training=True, **call).numpy()
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, atol=atol, rtol=1e-5)


@pytest.mark.parametrize("name,kwargs", LAYERS, ids=NAMES)
def test_layer_contract_and_config_match_keras(name, kwargs):
    layer = run_layer_test(
        getattr(kt.layers, name),
        init_kwargs=kwargs,
        input_data=IMAGES,
        training=True,
        expected_output_shape=IMAGES.shape,
        expected_num_trainable_weights=0,
        expected_num_non_trainable_weights=0,
    )
    ours = layer.get_config()
    theirs = _keras_layer(name, **kwargs).get_config()
    extra = {"fill_value"} if name == "MaxNumBoundingBoxes" else set()  # dropped by Keras
    assert set(ours) == set(theirs) | extra
    for key in set(theirs) - {"name", "dtype"}:
        assert ours[key] == theirs[key], key
    assert tuple(layer(IMAGES[0], training=True).shape) == IMAGES.shape[1:]
    cf = getattr(kt.layers, name)(**kwargs, data_format="channels_first")
    x = IMAGES.transpose(0, 3, 1, 2)
    assert tuple(cf(x, training=True).shape) == x.shape


@pytest.mark.parametrize("name,kwargs", LAYERS, ids=NAMES)
def test_inference_matches_keras(name, kwargs):
    layer = getattr(kt.layers, name)(**kwargs)
    if name in ACTIVE_AT_INFERENCE:
        want = _k(_keras_layer(name, **kwargs)(IMAGES, training=False))
        np.testing.assert_allclose(layer(IMAGES, training=False).numpy(), want, atol=1e-3)
        return
    np.testing.assert_array_equal(layer(IMAGES, training=False).numpy(), IMAGES)
    model = kt.Sequential([kt.Input(IMAGES.shape[1:]), layer])
    np.testing.assert_array_equal(model.predict(IMAGES, verbose=0), IMAGES)


DETERMINISTIC = [
    ("AutoContrast", {}, 255.0),
    ("AutoContrast", {"value_range": (0, 1)}, 1.0),
    ("Equalization", {}, 255.0),
    ("Equalization", {"bins": 16, "value_range": (0, 1)}, 1.0),
    ("Solarization", {}, 255.0),
    ("Solarization", {"value_range": (-1, 1)}, 2.0),
    ("RandomGrayscale", {"factor": 1.0}, 255.0),
    ("RandomInvert", {"factor": (1.0, 1.0)}, 255.0),
    ("RandomInvert", {"factor": (1.0, 1.0), "value_range": (0, 1)}, 1.0),
    ("RandomSaturation", {"factor": (0.7, 0.7), "value_range": (0, 1)}, 1.0),
    ("RandomSaturation", {"factor": (0.2, 0.2), "value_range": (0, 1)}, 1.0),
    ("RandomColorDegeneration", {"factor": (0.4, 0.4)}, 255.0),
    ("RandomPosterization", {"factor": 1}, 255.0),
    ("RandomPosterization", {"factor": (5, 5), "value_range": (0, 1)}, 1.0),
    ("RandomSharpness", {"factor": (0.9, 0.9)}, 255.0),
    ("RandomSharpness", {"factor": (0.1, 0.1)}, 255.0),
    ("RandomGaussianBlur", {"factor": (1, 1), "sigma": (0.7, 0.7)}, 255.0),
    ("RandomGaussianBlur", {"factor": (1, 1), "sigma": (0.4, 0.4), "kernel_size": 5}, 255.0),
    (
        "RandomColorJitter",
        {"brightness_factor": (0.1, 0.1), "saturation_factor": (0.6, 0.6)},
        255.0,
    ),
]


@pytest.mark.parametrize("name,kwargs,scale", DETERMINISTIC, ids=[d[0] for d in DETERMINISTIC])
def test_deterministic_outputs_match_keras(name, kwargs, scale):
    lo = -1.0 if kwargs.get("value_range") == (-1, 1) else 0.0
    x = lo + IMAGES / 255.0 * scale
    _ours_and_keras(name, kwargs, x, atol=1e-4 * scale)
    # A single image, and a batch of one for Equalization (whose histogram spans the batch).
    _ours_and_keras(name, kwargs, x[1], atol=1e-4 * scale)


@pytest.mark.parametrize(
    "name,kwargs",
    [
        ("Equalization", {"bins": 32}),
        ("RandomGrayscale", {"factor": 1.0}),
        ("RandomSharpness", {"factor": (0.8, 0.8)}),
        ("RandomSaturation", {"factor": (0.3, 0.3), "value_range": (0, 1)}),
        ("RandomGaussianBlur", {"factor": (1, 1), "sigma": (0.6, 0.6)}),
        ("ContrastLimitedAdaptiveHistogramEqualization", {"clip_limit": 0.0}),
    ],
)
def test_channels_first_matches_keras(name, kwargs):
    x = IMAGES.transpose(0, 3, 1, 2)
    if kwargs.get("value_range") == (0, 1):
        x = x / 255.0
    _ours_and_keras(name, dict(kwargs, data_format="channels_first"), x, atol=1e-3)


@pytest.mark.parametrize(
    "shape,kwargs",
    [
        ((2, 16, 16, 3), {"tile_grid_size": (2, 2)}),  # clip limit 1 count per bin
        ((2, 16, 16, 3), {"tile_grid_size": (2, 2), "clip_limit": 8.0}),
        ((1, 16, 24, 1), {"tile_grid_size": (4, 3), "clip_limit": 16.0}),
        ((2, 7, 9, 3), {"tile_grid_size": (2, 3), "clip_limit": 0}),  # padded tiles
        ((2, 7, 9, 3), {"clip_limit": -1.0}),  # the default 8 x 8 grid, larger than the image
        ((2, 12, 10, 2), {"tile_grid_size": (3, 5), "value_range": (0, 1), "clip_limit": 0}),
    ],
)
def test_clahe_matches_keras(shape, kwargs):
    # Keras 3.15 on torch counts histograms in integers and so truncates the clip limit
    # (`clip_limit * tile_pixels / 256`) to a whole count; TensorFlow and JAX keep it
    # fractional, as we do. The cases here have whole limits (or none), where all agree.
    x = RNG.uniform(0, 255, shape).astype("float32")
    if kwargs.get("value_range") == (0, 1):
        x = x / 255.0
    name = "ContrastLimitedAdaptiveHistogramEqualization"
    _ours_and_keras(name, kwargs, x, atol=1e-3)


# Random layers: Keras draws the transformation, and our layer applies that same draw.
KERAS_DRAWS = [
    ("RandomShear", {"x_factor": 0.3, "y_factor": 0.2}),
    ("RandomShear", {"x_factor": (0.1, 0.4), "fill_mode": "constant", "interpolation": "nearest"}),
    ("RandomPerspective", {"scale": 0.5}),
    ("RandomPerspective", {"scale": 0.8, "fill_value": 9.0, "factor": 0.5}),
    ("RandomHue", {"factor": 0.8}),
    ("RandomErasing", {}),
    ("RandomErasing", {"fill_value": 7.0, "factor": 0.5, "scale": 0.5}),
    ("CutMix", {}),
    ("MixUp", {"alpha": 0.5}),
    ("RandomInvert", {}),
    ("Solarization", {"addition_factor": 0.2, "threshold_factor": 0.5}),
    ("RandomGaussianBlur", {"factor": 0.5}),
    ("RandomPosterization", {"factor": 6}),
    ("RandomSaturation", {"factor": 0.8, "value_range": (0, 1)}),
    ("RandomSharpness", {"factor": 1.0}),
    ("RandomColorDegeneration", {"factor": 0.9}),
]


def _to_ours(params):
    return {k: kt.ops.convert_to_tensor(_k(v)) for k, v in params.items() if k != "input_shape"}


@pytest.mark.parametrize("name,kwargs", KERAS_DRAWS, ids=[d[0] for d in KERAS_DRAWS])
@pytest.mark.parametrize("data_format", ["channels_last", "channels_first"])
def test_keras_draws_applied_match_keras(name, kwargs, data_format):
    keras = require("keras")
    x = RNG.uniform(0, 255, (6, 7, 9, 3)).astype("float32")
    if kwargs.get("value_range") == (0, 1):
        x = x / 255.0
    if data_format == "channels_first":
        x = x.transpose(0, 3, 1, 2)
    kwargs = dict(kwargs, data_format=data_format)
    theirs = _keras_layer(name, **kwargs)
    params = theirs.get_random_transformation(x, training=True)
    want = _k(theirs.transform_images(keras.ops.convert_to_tensor(x), params))
    got = getattr(kt.layers, name)(**kwargs)._apply(kt.ops.convert_to_tensor(x), _to_ours(params))
    np.testing.assert_allclose(got.numpy(), want, atol=1e-3, rtol=1e-5)
    if name in ("CutMix", "MixUp"):
        labels = np.eye(6, dtype="float32")[RNG.permutation(6)]
        want = _k(theirs.transform_labels(keras.ops.convert_to_tensor(labels), params))
        got = getattr(kt.layers, name)()._apply_labels(
            kt.ops.convert_to_tensor(labels), _to_ours(params)
        )
        np.testing.assert_allclose(got.numpy(), want, atol=1e-5)


def test_hue_and_shear_fixed_magnitude_take_one_of_two_signs():
    # With a fixed magnitude only the sign is random: each of our images equals one of the
    # two outputs Keras gives over many copies of the same image.
    x = np.repeat(IMAGES[:1], 24, axis=0)
    for name, kwargs in [
        ("RandomHue", {"factor": (0.4, 0.4)}),
        ("RandomShear", {"x_factor": (0.3, 0.3), "y_factor": (0.1, 0.1)}),
    ]:
        want = _k(_keras_layer(name, **kwargs)(x, training=True))
        candidates = [want[0]] + [w for w in want if not np.allclose(w, want[0], atol=1e-3)][:1]
        assert len(candidates) == 2, name
        got = getattr(kt.layers, name)(**kwargs, seed=1)(x, training=True).numpy()
        signs = [int(np.argmin([np.abs(g - c).max() for c in candidates])) for g in got]
        for g, s in zip(got, signs):
            np.testing.assert_allclose(g, candidates[s], atol=1e-3)
        assert 0 < sum(signs) < len(signs), name


def test_max_num_bounding_boxes_matches_keras():
    images = IMAGES[:2]
    boxes = RNG.uniform(0, 5, (2, 4, 4)).astype("float32")
    labels = RNG.integers(0, 3, (2, 4)).astype("float32")
    for max_number in (2, 4, 6):
        for batched in (True, False):
            data = {"images": images, "bounding_boxes": {"boxes": boxes, "labels": labels}}
            if not batched:
                data = {
                    "images": images[0],
                    "bounding_boxes": {"boxes": boxes[0], "labels": labels[0]},
                }
            kw = {"max_number": max_number, "fill_value": -2, "bounding_box_format": "xyxy"}
            want = _keras_layer("MaxNumBoundingBoxes", **kw)(
                {"images": data["images"], "bounding_boxes": dict(data["bounding_boxes"])}
            )
            got = kt.layers.MaxNumBoundingBoxes(**kw)(data)
            for key in ("boxes", "labels"):
                np.testing.assert_array_equal(
                    got["bounding_boxes"][key].numpy(), _k(want["bounding_boxes"][key])
                )
            np.testing.assert_array_equal(got["images"].numpy(), data["images"])
    with pytest.raises(ValueError, match="bounding box format"):
        kt.layers.MaxNumBoundingBoxes(2)(
            {"images": images, "bounding_boxes": {"boxes": boxes, "labels": labels}}
        )
    sym = kt.layers.MaxNumBoundingBoxes(5, bounding_box_format="xyxy")(
        {
            "images": kt.Input((7, 9, 3)),
            "bounding_boxes": {"boxes": kt.Input((4, 4)), "labels": kt.Input((4,))},
        }
    )
    assert tuple(sym["bounding_boxes"]["boxes"].shape) == (None, 5, 4)
    assert tuple(sym["bounding_boxes"]["labels"].shape) == (None, 5)


@pytest.mark.parametrize("name", ["CutMix", "MixUp"])
def test_mixing_dict_inputs_mix_labels_with_the_images(name):
    n = 8
    x = np.stack([np.full((6, 8, 3), float(i)) for i in range(n)]).astype("float32")
    labels = np.eye(n, dtype="float32")
    masks = x[..., :1].copy()
    layer = getattr(kt.layers, name)(seed=3)
    out = layer({"images": x, "labels": labels, "segmentation_masks": masks}, training=True)
    imgs, labs = out["images"].numpy(), out["labels"].numpy()
    np.testing.assert_allclose(labs.sum(axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(out["segmentation_masks"].numpy()[..., 0], imgs[..., 0], atol=1e-4)
    assert not np.allclose(labs, labels)
    for i in range(n):
        partners = set(np.nonzero(labs[i] > 1e-6)[0]) - {i}
        assert len(partners) <= 1
        if name == "MixUp":
            # Blended pixels: the labels' weighted index.
            np.testing.assert_allclose(imgs[i], labs[i] @ np.arange(float(n)), atol=1e-3)
        else:
            # Pasted pixels: each is the image's own value or its partner's, and the labels
            # weigh the partner by the box's share of the image (Keras's continuous box).
            values = set(np.unique(imgs[i])) - {float(i)}
            assert values <= {float(j) for j in partners}
            if values:
                share = np.mean(imgs[i] != i)
                assert abs(share - (1 - labs[i, i])) < 0.35
    # A single image with its labels passes through; inference leaves everything as it is.
    single = layer({"images": x[0], "labels": labels[0]}, training=True)
    np.testing.assert_array_equal(single["images"].numpy(), x[0])
    same = layer({"images": x, "labels": labels}, training=False)
    np.testing.assert_array_equal(same["labels"].numpy(), labels)
    with pytest.raises(ValueError, match="keys"):
        layer({"pictures": x})


def test_random_probabilities_and_seeds():
    x = RNG.uniform(0, 255, (200, 4, 5, 3)).astype("float32")
    gray = kt.layers.RandomGrayscale(0.3, seed=1)(x, training=True).numpy()
    frac = np.mean([np.allclose(g[..., 0], g[..., 2]) for g in gray])
    assert 0.2 < frac < 0.4
    # Keras's default factor 1.0 draws each image's probability from [0, 1]: half invert.
    inv = kt.layers.RandomInvert(seed=2)(x, training=True).numpy()
    frac = np.mean([np.allclose(i, 255 - o) for i, o in zip(x, inv)])
    assert 0.4 < frac < 0.6
    a = kt.layers.RandomHue(0.5, seed=7)
    b = kt.layers.RandomHue(0.5, seed=7)
    first = a(x[:4], training=True).numpy()
    np.testing.assert_array_equal(first, b(x[:4], training=True).numpy())
    assert not np.allclose(first, a(x[:4], training=True).numpy())
    post = kt.layers.RandomPosterization((2, 5), seed=3)(x, training=True).numpy()
    gcds = [np.gcd.reduce(p.astype(int).ravel()[p.ravel() > 0]) for p in post]
    bits = [8 - int(np.log2(g & -g)) for g in gcds]  # the largest power of 2 dividing all
    assert set(bits) <= {2, 3, 4} and len(set(bits)) == 3  # randint's upper bound is open


def test_random_erasing_erases_boxes_within_scale():
    x = np.full((64, 20, 20, 1), 100.0, dtype="float32")
    out = kt.layers.RandomErasing(factor=(1, 1), scale=(0.1, 0.3), fill_value=0.0, seed=1)(
        x, training=True
    ).numpy()[..., 0]
    for o in out:
        rows, cols = np.nonzero(o == 0)
        assert rows.size > 0
        h, w = np.ptp(rows) + 1, np.ptp(cols) + 1
        assert rows.size == h * w  # one filled rectangle
        assert np.sqrt(0.1) * 20 - 1.01 <= h <= np.sqrt(0.3) * 20 + 1.01
        assert np.sqrt(0.1) * 20 - 1.01 <= w <= np.sqrt(0.3) * 20 + 1.01
    noisy = kt.layers.RandomErasing(factor=(1, 1), seed=2)(x, training=True).numpy()
    assert noisy.min() >= 0 and noisy.max() <= 255 and np.unique(noisy).size > 10


def test_elastic_transform_properties():
    x = RNG.uniform(0, 255, (4, 24, 20, 3)).astype("float32")
    layer = kt.layers.RandomElasticTransform(factor=(1, 1), scale=(0.5, 0.5), seed=3)
    out = layer(x, training=True).numpy()
    assert out.min() >= 0 and out.max() <= 255
    assert not np.allclose(out, x)
    assert not np.allclose(out, layer(x, training=True).numpy())
    again = kt.layers.RandomElasticTransform(factor=(1, 1), scale=(0.5, 0.5), seed=3)
    np.testing.assert_array_equal(out, again(x, training=True).numpy())
    # A constant image stays constant (reflect fill); zero probability leaves images alone.
    flat = np.full((2, 24, 20, 3), 42.0, dtype="float32")
    np.testing.assert_allclose(layer(flat, training=True).numpy(), flat, atol=1e-3)
    off = kt.layers.RandomElasticTransform(factor=(0, 0), seed=1)(x, training=True).numpy()
    np.testing.assert_array_equal(off, x)


def test_rand_augment_and_aug_mix_properties():
    x = RNG.uniform(0, 255, (4, 8, 10, 3)).astype("float32")
    ra = kt.layers.RandAugment(seed=1)
    outs = [ra(x, training=True).numpy() for _ in range(4)]
    # Within the value range up to float rounding: a bilinear rotation or translation of
    # pixels at 255 gives 255.00003 where its two weights' sum rounds above 1 (Keras's
    # RandAugment does not clip either).
    assert all(-1e-3 <= o.min() and o.max() <= 255 + 1e-3 for o in outs)
    assert not all(np.allclose(outs[0], o) for o in outs[1:])
    np.testing.assert_array_equal(
        kt.layers.RandAugment(num_ops=0, seed=1)(x, training=True).numpy(), x
    )
    mix = kt.layers.AugMix(seed=2, value_range=(0, 255))
    out = mix(x, training=True).numpy()
    assert out.shape == x.shape and 0 <= out.min() and out.max() <= 255
    np.testing.assert_array_equal(
        out, kt.layers.AugMix(seed=2, value_range=(0, 255))(x, training=True).numpy()
    )
    assert not np.allclose(out, x)
    few = kt.layers.AugMix(all_ops=False, seed=3)
    assert sorted(n for n in few._choices) == sorted(
        [
            "random_shear",
            "random_translation",
            "random_rotation",
            "random_posterization",
            "solarization",
            "auto_contrast",
            "equalization",
        ]
    )


def test_augmentation_layers_in_a_trained_model():
    x = RNG.uniform(0, 1, (8, 8, 8, 3)).astype("float32")
    model = kt.Sequential(
        [
            kt.Input((8, 8, 3)),
            kt.layers.RandomColorJitter((0, 1), brightness_factor=0.1, contrast_factor=0.2),
            kt.layers.RandomShear(0.1, seed=1),
            kt.layers.RandomErasing(value_range=(0, 1), seed=1),
            kt.layers.RandomSharpness(0.5, value_range=(0, 1), seed=1),
            kt.layers.MixUp(seed=1),
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
        lambda: kt.layers.AutoContrast(value_range=5),
        lambda: kt.layers.Equalization(value_range=(0, 1, 2)),
        lambda: kt.layers.Equalization(bins=0),
        lambda: kt.layers.ContrastLimitedAdaptiveHistogramEqualization(tile_grid_size=(0, 2)),
        lambda: kt.layers.Solarization(addition_factor=1.5),
        lambda: kt.layers.Solarization(threshold_factor=(0.1, 0.2, 0.3)),
        lambda: kt.layers.RandomGrayscale(factor=1.2),
        lambda: kt.layers.RandomInvert(factor=-0.5),
        lambda: kt.layers.RandomHue(factor=2.0),
        lambda: kt.layers.RandomSaturation(factor="x"),
        lambda: kt.layers.RandomPosterization(factor=9),
        lambda: kt.layers.RandomSharpness(factor=1.5),
        lambda: kt.layers.RandomGaussianBlur(kernel_size=4),
        lambda: kt.layers.RandomGaussianBlur(sigma=2.0),
        lambda: kt.layers.RandomShear(x_factor=1.5),
        lambda: kt.layers.RandomPerspective(scale=1.5),
        lambda: kt.layers.RandomElasticTransform(scale=2.0),
        lambda: kt.layers.RandomErasing(fill_value=(1, 2)),
        lambda: kt.layers.CutMix(factor=3),
        lambda: kt.layers.MixUp(alpha=0),
        lambda: kt.layers.RandAugment(num_ops=-1),
        lambda: kt.layers.AugMix(num_chains=0),
        lambda: kt.layers.MaxNumBoundingBoxes(0),
    ],
)
def test_bad_arguments_raise(build):
    with pytest.raises(ValueError):
        build()


def test_bad_modes_and_channels_raise_like_keras():
    with pytest.raises(NotImplementedError, match="fill_mode"):
        kt.layers.RandomShear(0.1, fill_mode="mirror")
    with pytest.raises(NotImplementedError, match="interpolation"):
        kt.layers.RandomPerspective(interpolation="bicubic")
    with pytest.raises(NotImplementedError, match="fill_mode"):
        kt.layers.RandomElasticTransform(fill_mode="edge")
    with pytest.raises(ValueError, match="3 channels"):
        kt.layers.RandomColorDegeneration(0.2).compute_output_shape((None, 4, 4, 2))
    with pytest.raises(ValueError, match="rank 3"):
        kt.layers.RandomHue(0.2)(np.ones((4, 4)), training=True)


@pytest.mark.parametrize(
    "name,kwargs",
    [
        ("Equalization", {}),
        ("ContrastLimitedAdaptiveHistogramEqualization", {"tile_grid_size": (2, 2)}),
        ("CutMix", {"seed": 1}),
        ("RandomElasticTransform", {"seed": 1}),
        ("RandAugment", {"seed": 1, "num_ops": 1}),
        ("AugMix", {"seed": 1, "num_chains": 2, "chain_depth": 2}),
    ],
)
def test_traced_steps(name, kwargs):
    # Histograms, Beta weights and elastic fields are traced (keratron.function, as `fit`
    # compiles its step): deterministic layers give their eager output, random ones draw anew.
    x = RNG.uniform(0, 255, (4, 16, 16, 3)).astype("float32")  # whole CLAHE clip limits
    layer = getattr(kt.layers, name)(**kwargs)
    step = kt.function(lambda t: layer(t, training=True))
    first, second = step(x).numpy(), step(x).numpy()
    if name in ("Equalization", "ContrastLimitedAdaptiveHistogramEqualization"):
        np.testing.assert_allclose(first, layer(x, training=True).numpy(), atol=1e-3)
        want = _k(_keras_layer(name, **kwargs)(x, training=True))
        np.testing.assert_allclose(first, want, atol=1e-3)
    else:
        assert not np.array_equal(first, second)
        assert 0 <= first.min() and first.max() <= 255


@pytest.mark.parametrize(
    "name,kwargs",
    [
        ("AutoContrast", {}),
        ("RandomColorJitter", {"saturation_factor": (0.3, 0.3), "hue_factor": (0.0, 0.0)}),
        ("Equalization", {}),
    ],
)
def test_channels_first_is_channels_last_transposed(name, kwargs):
    # Where Keras 3.15 ignores data_format (AutoContrast reduces axes (1, 2) whatever the
    # layout; RandomColorJitter builds its steps in the default layout), a channels_first
    # image gives the channels_last result, transposed; channels_last matches Keras.
    x = IMAGES / 255.0 if name == "RandomColorJitter" else IMAGES
    kwargs = dict(kwargs, value_range=(0, 1)) if name == "RandomColorJitter" else kwargs
    last = getattr(kt.layers, name)(**kwargs)(x, training=True).numpy()
    first = getattr(kt.layers, name)(**kwargs, data_format="channels_first")(
        x.transpose(0, 3, 1, 2), training=True
    )
    np.testing.assert_allclose(first.numpy().transpose(0, 2, 3, 1), last, atol=1e-4)
    _ours_and_keras(name, kwargs, x, atol=1e-3)
