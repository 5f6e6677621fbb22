"""EfficientNet B0-B7 and EfficientNetV2 B0-B3/S/M/L against real Keras: same layers, names,
weight shapes and parameter counts; Keras's weight files (tf.keras 2 `.h5` and Keras 3
`.weights.h5`) load and give the same logits and features; `weights="imagenet"` fetches
Keras's file names with Keras's checksums (from a local server, never the internet).
"""

import hashlib

import numpy as np
import pytest

import keratron
from keratron.applications import efficientnet, efficientnet_v2, imagenet_utils
from tests.applications.test_keras_interop import (
    assert_close,
    assert_same_weights,
    keras_forward,
    save_legacy_h5,
    weight_server,  # noqa: F401 (a fixture)
    zero_weights,
)
from tests.conftest import require

V1_NAMES = [f"EfficientNetB{i}" for i in range(8)]
V2_NAMES = [f"EfficientNetV2{v}" for v in ("B0", "B1", "B2", "B3", "S", "M", "L")]


def builder(arch):
    module = efficientnet_v2 if arch.startswith("EfficientNetV2") else efficientnet
    return getattr(module, arch)


def random_values(variables, seed):
    """Random weights of a sensible scale for (name, shape, dtype) variables: He-scaled
    kernels, positive scales and variances (batch norm's and the input Normalization's),
    small offsets."""
    rng = np.random.default_rng(seed)
    values = []
    for name, shape, dtype in variables:
        if name.endswith("/count"):
            values.append(np.asarray(rng.integers(1, 1000), dtype=dtype))
            continue
        if "project_bn/gamma" in name:
            # Small residual branches keep the sum of 16 to 40 blocks O(1): a random
            # network that grows to 1e3 turns float32 rounding into visible differences.
            w = rng.uniform(0.1, 0.3, shape)
        elif "variance" in name or "gamma" in name:
            w = rng.uniform(0.5, 1.5, shape)
        elif "depthwise" in name or name.endswith("dwconv/kernel") or "dwconv2" in name:
            w = rng.normal(size=shape) * np.sqrt(2.0 / np.prod(shape[:2]))
        elif "kernel" in name:
            w = rng.normal(size=shape) * np.sqrt(2.0 / np.prod(shape[:-1]))
        else:  # biases, beta, moving and input means
            w = rng.normal(0.0, 0.2, shape)
        values.append(w.astype("float32"))
    return values


def randomize(model, seed):
    """Sets a Keras 3 model's weights to `random_values`; returns them."""
    values = random_values([(v.path, tuple(v.shape), v.dtype) for v in model.weights], seed)
    model.set_weights(values)
    return values


def signature(model):
    """(layers, parameters, non-trainable parameters, digest of the layer names and types
    after the input, digest of the weight shapes in order)."""
    names = "\n".join(f"{layer.name}:{type(layer).__name__}" for layer in model.layers[1:])
    shapes = "\n".join(str(tuple(w.shape)) for w in model.weights)
    frozen = sum(int(np.prod(w.shape)) for w in model.non_trainable_weights)
    return (
        len(model.layers),
        model.count_params(),
        frozen,
        hashlib.sha256(names.encode()).hexdigest()[:16],
        hashlib.sha256(shapes.encode()).hexdigest()[:16],
    )


def assert_same_architecture(model, reference):
    assert [layer.name for layer in model.layers] == [layer.name for layer in reference.layers]
    assert [type(layer).__name__ for layer in model.layers] == [
        type(layer).__name__ for layer in reference.layers
    ]
    assert [tuple(w.shape) for w in model.weights] == [tuple(w.shape) for w in reference.weights]
    assert model.count_params() == reference.count_params()
    assert model.name == reference.name
    assert model.output_shape == reference.output_shape
    # Drop-connect: the same Dropout layers with the same rates (and the classifier's dropout).
    rates = [(layer.name, layer.rate) for layer in reference.layers if hasattr(layer, "rate")]
    assert [(layer.name, layer.rate) for layer in model.layers if hasattr(layer, "rate")] == rates


# ----------------------------------------------------------------- against real Keras

# Small inputs keep the forward passes cheap; one case per stem / preprocessing branch.
CASES = {
    "B0-top": ("EfficientNetB0", dict(input_shape=(64, 64, 3), classifier_activation=None)),
    "V2B0-top": ("EfficientNetV2B0", dict(input_shape=(64, 64, 3), classifier_activation=None)),
}
SLOW_CASES = {
    # One channel: V2's B variants fall back to the [-1, 1) rescaling of S, M and L.
    "V2B0-gray-avg": (
        "EfficientNetV2B0",
        dict(input_shape=(48, 40, 1), include_top=False, pooling="avg"),
    ),
    "V2B0-raw-max": (
        "EfficientNetV2B0",
        dict(
            input_shape=(33, 47, 3), include_top=False, pooling="max", include_preprocessing=False
        ),
    ),
    "B1-features": ("EfficientNetB1", dict(input_shape=(35, 32, 3), include_top=False)),
    "V2S-top": ("EfficientNetV2S", dict(input_shape=(64, 64, 3), classifier_activation=None)),
    "B3-avg": ("EfficientNetB3", dict(input_shape=(41, 64, 3), include_top=False, pooling="avg")),
}


def _cases():
    for case_id, case in CASES.items():
        yield pytest.param(*case, id=case_id)
    for case_id, case in SLOW_CASES.items():
        yield pytest.param(*case, id=case_id, marks=pytest.mark.slow)


@pytest.mark.interop
@pytest.mark.parametrize("arch,kwargs", list(_cases()))
def test_matches_keras(arch, kwargs, tmp_path):
    keras = require("keras")
    kwargs = dict(weights=None, **kwargs)
    keras.backend.clear_session()
    keratron.backend.clear_session()
    reference = getattr(keras.applications, arch)(**kwargs)
    model = builder(arch)(**kwargs)
    assert_same_architecture(model, reference)

    seed = sum(map(ord, arch)) + len(kwargs)
    values = randomize(reference, seed)
    # Pixels in [0, 255]; a model without its preprocessing takes them in [-1, 1].
    low, high = (-1.0, 1.0) if kwargs.get("include_preprocessing") is False else (0.0, 255.0)
    x = np.random.default_rng(seed).uniform(low, high, (2,) + kwargs["input_shape"])
    x = x.astype("float32")
    ref = keras_forward(reference, x)

    model.set_weights(reference.get_weights())
    assert_close(model(x, training=False).numpy(), ref)

    # Keras's tf.keras-layout .h5 file and its Keras 3 .weights.h5 file, loaded by order.
    zero_weights(model)
    save_legacy_h5(reference, tmp_path / "weights.h5")
    model.load_weights(str(tmp_path / "weights.h5"))
    assert_same_weights(model, values)
    assert_close(model.predict(x, verbose=0), ref)
    zero_weights(model)
    reference.save_weights(str(tmp_path / "model.weights.h5"))
    model.load_weights(str(tmp_path / "model.weights.h5"))
    assert_same_weights(model, values)


@pytest.mark.interop
@pytest.mark.parametrize(
    "arch,channels",
    [
        # One channel: V2's B variants then take the [-1, 1) rescaling of S, M and L.
        ("EfficientNetV2B0", 1),
        pytest.param("EfficientNetB0", 3, marks=pytest.mark.slow),
    ],
)
def test_channels_first_matches_keras(arch, channels):
    keras = require("keras")
    shape = (channels, 45, 36)
    kwargs = dict(weights=None, input_shape=shape, include_top=False, pooling="max")
    keras.config.set_image_data_format("channels_first")
    keratron.config.set_image_data_format("channels_first")
    try:
        keras.backend.clear_session()
        keratron.backend.clear_session()
        reference = getattr(keras.applications, arch)(**kwargs)
        model = builder(arch)(**kwargs)
    finally:
        keras.config.set_image_data_format("channels_last")
        keratron.config.set_image_data_format("channels_last")
    assert_same_architecture(model, reference)
    # The stride-2 paddings depend on the layout (odd and even sizes differ).
    pads = [layer.padding for layer in model.layers if layer.name.endswith("pad")]
    assert pads == [layer.padding for layer in reference.layers if layer.name.endswith("pad")]
    randomize(reference, 31)
    model.set_weights(reference.get_weights())
    x = np.random.default_rng(31).uniform(0, 255, (2,) + shape).astype("float32")
    assert_close(model(x, training=False).numpy(), keras_forward(reference, x))


@pytest.mark.interop
@pytest.mark.parametrize(
    "arch", ["EfficientNetB0", pytest.param("EfficientNetV2B0", marks=pytest.mark.slow)]
)
def test_matches_tf_keras_h5(arch, tmp_path):
    """tf.keras 2 writes the published files' layout natively (its Normalization counts in
    int64)."""
    tf_keras = require("tf_keras")
    kwargs = dict(weights=None, input_shape=(48, 48, 3), classifier_activation=None)
    tf_keras.backend.clear_session()
    keratron.backend.clear_session()
    reference = getattr(tf_keras.applications, arch)(**kwargs)
    model = builder(arch)(**kwargs)
    # tf.keras names the input "input_1"; every other layer is named as in Keras 3.
    assert [layer.name for layer in model.layers[1:]] == [
        layer.name for layer in reference.layers[1:]
    ]
    values = randomize_tf_keras(reference, 41)
    reference.save_weights(str(tmp_path / "tf_keras.h5"))
    model.load_weights(str(tmp_path / "tf_keras.h5"))
    for got, want in zip(model.get_weights(), values):
        np.testing.assert_array_equal(got, np.asarray(want, dtype=got.dtype))
    x = np.random.default_rng(41).uniform(0, 255, (2, 48, 48, 3)).astype("float32")
    assert_close(model.predict(x, verbose=0), reference.predict(x, verbose=0))


def randomize_tf_keras(model, seed):
    """`randomize` for a tf.keras 2 model, whose variables are named "layer/weight:0"."""
    variables = [(v.name.split(":")[0], tuple(v.shape), v.dtype.name) for v in model.weights]
    values = random_values(variables, seed)
    model.set_weights(values)
    return values


# ------------------------------------------------------------ all variants, recorded

# signature() of each Keras 3.15.1 model at its default size with the top, recorded with
#   KERAS_BACKEND=torch python -c "import keras; from tests.applications.test_efficientnet \
#   import signature; keras.backend.clear_session(); \
#   print(signature(keras.applications.EfficientNetB4(weights=None)))"
# (one fresh session per model, as the test builds them).
KERAS_SIGNATURES = {
    "EfficientNetB0": (240, 5330571, 42023, "2b561202a36d9e88", "dbd4cc8c7e2bb4d8"),
    "EfficientNetB1": (342, 7856239, 62055, "941f62011042f763", "a1309c18304578dc"),
    "EfficientNetB2": (342, 9177569, 67575, "941f62011042f763", "1ea638be786f2afa"),
    "EfficientNetB3": (387, 12320535, 87303, "30cccc005034e007", "8642929926a67be3"),
    "EfficientNetB4": (477, 19466823, 125207, "e4c267fe6a4b4864", "e19b7612b7949fa7"),
    "EfficientNetB5": (579, 30562527, 172743, "532cb793778e34a5", "69c69af9e5d77b21"),
    "EfficientNetB6": (669, 43265143, 224439, "e62940a9d39153ae", "99a40606b882b2c3"),
    "EfficientNetB7": (816, 66658687, 310727, "20063d48e709b7ed", "e2510d240ba74b21"),
    "EfficientNetV2B0": (273, 7200312, 60608, "d848dcdc8b83fa19", "fe0e4706f5653de3"),
    "EfficientNetV2B1": (337, 8212124, 71072, "00f64ba06b55670b", "aafad2568c5bce69"),
    "EfficientNetV2B2": (352, 10178374, 82288, "800e30dc4dbf00f2", "6546f8af3697cef4"),
    "EfficientNetV2B3": (412, 14467622, 109216, "70d9b18b3ad9264b", "6c6ad0a251763373"),
    "EfficientNetV2S": (516, 21612360, 153872, "4f68e962ceb1914f", "035298c4a7abc4aa"),
    "EfficientNetV2M": (743, 54431388, 292032, "02043b5bf8901119", "216c919df55c21c3"),
    "EfficientNetV2L": (1031, 119027848, 512576, "c93f73bab2a36f99", "5cf5b6ead5ced91b"),
}
DEFAULT_SIZES = dict(
    zip(V1_NAMES + V2_NAMES, [224, 240, 260, 300, 380, 456, 528, 600, 224, 240, 260, 300, 384])
)
DEFAULT_SIZES.update(EfficientNetV2M=480, EfficientNetV2L=480)


@pytest.mark.slow
@pytest.mark.parametrize("arch", V1_NAMES + V2_NAMES)
def test_full_size_matches_recorded_keras(arch):
    keratron.backend.clear_session()
    model = builder(arch)(weights=None)
    size = DEFAULT_SIZES[arch]
    assert model.input_shape == (None, size, size, 3) and model.output_shape == (None, 1000)
    assert signature(model) == KERAS_SIGNATURES[arch]


# ------------------------------------------------------------ weights="imagenet"

V1_URL = "https://storage.googleapis.com/keras-applications/"
V2_URL = "https://storage.googleapis.com/tensorflow/keras-applications/efficientnet_v2/"


@pytest.mark.interop
def test_weight_urls_and_hashes_are_keras():
    require("keras")
    from keras.src.applications import efficientnet as k_v1
    from keras.src.applications import efficientnet_v2 as k_v2

    assert efficientnet.BASE_WEIGHTS_PATH == k_v1.BASE_WEIGHTS_PATH == V1_URL
    assert efficientnet_v2.BASE_WEIGHTS_PATH == k_v2.BASE_WEIGHTS_PATH == V2_URL
    assert efficientnet.WEIGHTS_HASHES == k_v1.WEIGHTS_HASHES
    assert efficientnet_v2.WEIGHTS_HASHES == k_v2.WEIGHTS_HASHES


def _file_cases():
    fast = [
        ("EfficientNetB0", True, "efficientnetb0.h5", "902e53a9f72be733fc0bcb005b3ebbac"),
        ("EfficientNetV2S", False, "efficientnetv2-s_notop.h5", "af0682fb74e8c54910f2d4393339c070"),
    ]
    slow = [  # more weights to initialize
        ("EfficientNetB2", False, "efficientnetb2_notop.h5", "111f8e2ac8aa800a7a99e3239f7bfb39"),
        ("EfficientNetV2B0", True, "efficientnetv2-b0.h5", "21ecbf6da12460d5c40bb2f29ceb2188"),
        (
            "EfficientNetV2B3",
            False,
            "efficientnetv2-b3_notop.h5",
            "f6abf7b5849ac99a89b50dd3fd532856",
        ),
        ("EfficientNetB7", False, "efficientnetb7_notop.h5", "cbcfe4450ddf6f3ad90b1b398090fe4a"),
        ("EfficientNetV2M", False, "efficientnetv2-m_notop.h5", "1b8dc055df72dde80d614482840fe342"),
        ("EfficientNetV2L", True, "efficientnetv2-l.h5", "27e6d408b53c7ebc868fefa357689935"),
    ]
    yield from (pytest.param(*case, id=case[2]) for case in fast)
    yield from (pytest.param(*case, id=case[2], marks=pytest.mark.slow) for case in slow)


@pytest.mark.parametrize("arch,include_top,file_name,digest", list(_file_cases()))
def test_imagenet_weight_files(arch, include_top, file_name, digest, monkeypatch):
    """Each variant asks for Keras's file name, URL and md5 checksum (without the top, at a
    small size: the files do not depend on the image size)."""
    calls = []

    def record(model, weights, name, origin, file_hash=None):
        calls.append((weights, name, origin, file_hash))

    monkeypatch.setattr(imagenet_utils, "load_model_weights", record)
    kwargs = {} if include_top else dict(input_shape=(32, 32, 3))
    model = builder(arch)(weights="imagenet", include_top=include_top, **kwargs)
    base = V2_URL if "V2" in arch else V1_URL
    assert calls == [("imagenet", file_name, base + file_name, digest)]
    # Only V1 adds the layer that completes the original normalization for these weights.
    rescalings = [layer for layer in model.layers if isinstance(layer, keratron.layers.Rescaling)]
    assert len(rescalings) == (1 if "V2" in arch else 2)


@pytest.mark.interop
def test_imagenet_weights_download_and_match_keras(weight_server, tmp_path, monkeypatch):  # noqa: F811
    """The served file is fetched once into ~/.keras/models with its md5 checked, and the
    model (with the extra Rescaling that only "imagenet" adds) matches Keras's on it."""
    keras = require("keras")
    from keras.src.applications import efficientnet as keras_efficientnet

    root, base_url, requests = weight_server
    kwargs = dict(include_top=False, pooling="avg", input_shape=(48, 48, 3))
    file_name = "efficientnetb0_notop.h5"
    keras.backend.clear_session()
    source = keras.applications.EfficientNetB0(weights=None, **kwargs)
    values = randomize(source, 51)
    save_legacy_h5(source, root / file_name)
    digest = hashlib.md5((root / file_name).read_bytes()).hexdigest()

    home = tmp_path / "keras_home"
    monkeypatch.setenv("KERAS_HOME", str(home))
    monkeypatch.setattr(efficientnet, "BASE_WEIGHTS_PATH", base_url)
    monkeypatch.setattr(efficientnet, "WEIGHTS_HASHES", {"b0": ("0" * 32, digest)})
    keratron.backend.clear_session()
    model = efficientnet.EfficientNetB0(weights="imagenet", **kwargs)
    assert requests == ["/" + file_name]
    assert (home / "models" / file_name).read_bytes() == (root / file_name).read_bytes()
    assert_same_weights(model, values)

    # Keras's own "imagenet" model, its download pointed at the same file.
    fetched = []

    def local_file(fname, origin, cache_subdir=None, file_hash=None, **unused):
        fetched.append((fname, origin, cache_subdir, file_hash))
        return str(root / file_name)

    monkeypatch.setattr(keras_efficientnet.file_utils, "get_file", local_file)
    keras.backend.clear_session()
    reference = keras.applications.EfficientNetB0(weights="imagenet", **kwargs)
    expected_hash = keras_efficientnet.WEIGHTS_HASHES["b0"][1]
    assert fetched == [(file_name, V1_URL + file_name, "models", expected_hash)]
    assert [layer.name for layer in model.layers] == [layer.name for layer in reference.layers]
    x = np.random.default_rng(51).uniform(0, 255, (2, 48, 48, 3)).astype("float32")
    assert_close(model(x, training=False).numpy(), keras_forward(reference, x))


# ------------------------------------------------------------ module functions


@pytest.mark.interop
@pytest.mark.parametrize("module", [efficientnet, efficientnet_v2], ids=lambda m: m.__name__)
def test_preprocess_and_decode_match_keras(module, rng, monkeypatch):
    require("keras")
    import importlib
    import json

    from keras.src.applications import imagenet_utils as keras_imagenet_utils

    keras_module = importlib.import_module(f"keras.applications.{module.__name__.split('.')[-1]}")
    x = rng.uniform(0, 255, (2, 5, 4, 3)).astype("float32")
    for data_format in (None, "channels_last", "channels_first"):
        ref = keras_module.preprocess_input(x.copy(), data_format=data_format)
        out = module.preprocess_input(x, data_format=data_format)
        assert out is x  # a pass-through, as Keras's
        np.testing.assert_array_equal(out, ref)
    tensor = keratron.convert_to_tensor(x)
    assert module.preprocess_input(tensor) is tensor

    with open(imagenet_utils.CLASS_INDEX_PATH, encoding="utf-8") as f:
        monkeypatch.setattr(keras_imagenet_utils, "CLASS_INDEX", json.load(f))  # no download
    preds = rng.uniform(size=(3, 1000)).astype("float32")
    for top in (1, 5):
        ref = keras_module.decode_predictions(preds, top=top)
        out = module.decode_predictions(preds, top=top)
        assert [[e[:2] for e in r] for r in out] == [[e[:2] for e in r] for r in ref]
        assert [[float(e[2]) for e in r] for r in out] == [[float(e[2]) for e in r] for r in ref]
    with pytest.raises(ValueError, match="1000"):
        module.decode_predictions(preds[:, :10])


# ------------------------------------------------------------ argument rules

ERROR_CASES = [
    (dict(weights="no/such/file.h5"), "weights="),
    (dict(classes=10), "classes=10"),
    (dict(input_shape=(100, 100, 3)), r"input_shape"),
    (dict(input_shape=(31, 64, 3), include_top=False, weights=None), "32x32"),
    (dict(input_shape=(64, 64, 1), include_top=False), "3 channels"),
    (dict(input_shape=(None, None, 3), weights=None), "static `input_shape`"),
    (dict(input_shape=(64, 64), include_top=False, weights=None), "three integers"),
]


@pytest.mark.interop
@pytest.mark.parametrize("arch", ["EfficientNetB0", "EfficientNetV2B0"])
@pytest.mark.parametrize("kwargs,match", ERROR_CASES)
def test_argument_errors_as_keras(arch, kwargs, match, monkeypatch):
    """keratron rejects what Keras rejects, with a message naming the argument."""
    keras = require("keras")
    from keras.src.utils import file_utils as keras_file_utils

    def no_download(*args, **kwargs):
        raise AssertionError("the arguments should have been rejected before loading weights")

    monkeypatch.setattr(imagenet_utils, "load_model_weights", no_download)
    monkeypatch.setattr(keras_file_utils, "get_file", no_download)
    with pytest.raises(ValueError):
        getattr(keras.applications, arch)(**kwargs)
    with pytest.raises(ValueError, match=match):
        builder(arch)(**kwargs)


def test_errors_raised_before_building(monkeypatch):
    monkeypatch.setattr(imagenet_utils, "load_model_weights", pytest.fail)
    for arch in ("EfficientNetB0", "EfficientNetV2B0"):
        # Keras builds the whole model before it checks the activation (seconds).
        with pytest.raises(ValueError, match="classifier_activation='relu'"):
            builder(arch)(classifier_activation="relu")
        # Keras takes an int for the path of a file descriptor (and fails loading from it).
        with pytest.raises(ValueError, match="weights=3"):
            builder(arch)(weights=3)


# ------------------------------------------------------------ inputs, names, drop-connect


# len(keras.applications.EfficientNetV2B0(weights=None, include_top=False).weights) under
# Keras 3.15.1 (KERAS_BACKEND=torch).
KERAS_V2B0_NOTOP_WEIGHTS = 359


def test_input_tensor_and_custom_name():
    """The input tensor's sources become the model's inputs. A custom name is kept and the
    variant still picks the stages and the preprocessing (Keras's EfficientNetV2 looks both
    up by name and fails on any other name)."""
    keratron.backend.clear_session()
    source = keratron.Input((40, 40, 3))
    x = keratron.layers.Rescaling(1.0)(source)
    model = efficientnet_v2.EfficientNetV2B0(
        input_tensor=x, include_top=False, weights=None, name="backbone"
    )
    assert model.name == "backbone" and model.inputs[0] is source
    assert model.output_shape == (None, 2, 2, 1280)
    kinds = [type(layer).__name__ for layer in model.layers[1:4]]
    assert kinds == ["Rescaling", "Rescaling", "Normalization"]
    assert model.get_layer("block6h_add").output.shape == (None, 2, 2, 192)
    assert len(model.weights) == KERAS_V2B0_NOTOP_WEIGHTS


def test_drop_connect_drops_whole_samples_only_while_training():
    keratron.backend.clear_session()
    model = efficientnet.EfficientNetB0(weights=None, include_top=False, input_shape=(32, 32, 3))
    drops = [layer for layer in model.layers if layer.name.endswith("_drop")]
    # 16 blocks, rate 0.2 * index / 16 on the nine that keep their shape.
    assert [(d.name, round(d.rate, 6)) for d in drops[:2]] == [
        ("block2b_drop", 0.025),
        ("block3b_drop", 0.05),
    ]
    layer = model.get_layer("block6d_drop")
    assert layer.rate == pytest.approx(0.2 * 14 / 16) and layer.noise_shape == (None, 1, 1, 1)
    x = np.ones((256, 3, 3, 8), "float32")
    np.testing.assert_array_equal(layer(x, training=False).numpy(), x)
    y = layer(x, training=True).numpy().reshape(256, -1)
    kept = y[:, 0] != 0
    # One decision per sample: a sample is dropped entirely or scaled by 1 / (1 - rate).
    np.testing.assert_allclose(y[kept], 1.0 / (1.0 - layer.rate), rtol=1e-6)
    assert (y[~kept] == 0).all() and 0 < kept.sum() < 256


@pytest.mark.parametrize("module", [efficientnet, efficientnet_v2], ids=lambda m: m.__name__)
def test_docstring_examples(module):
    """The module's examples run and print what they show (the builders' shared example on
    the smallest variant only: the others differ in the numbers, checked above)."""
    import doctest

    smallest = "EfficientNetB0" if module is efficientnet else "EfficientNetV2B0"
    wanted = {module.__name__} | {
        f"{module.__name__}.{n}" for n in (smallest, "preprocess_input", "decode_predictions")
    }
    globs = {"np": np, "keratron": keratron, **vars(module)}
    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
    tests = [t for t in finder.find(module, module.__name__, globs=globs) if t.name in wanted]
    assert {t.name for t in tests} == wanted
    for test in tests:
        runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{result.failed} docstring example(s) failed in {module.__name__}"


@pytest.mark.parametrize("arch", V1_NAMES + V2_NAMES)
def test_builder_docstrings_state_the_feature_width(arch):
    # Each builder's docstring example shows its variant's feature width.
    import re

    features = re.search(r"\(None, (\d+)\)", builder(arch).__doc__).group(1)
    assert int(features) == KERAS_FEATURES[arch]


# keras.applications.X(weights=None, include_top=False, pooling="avg",
# input_shape=(32, 32, 3)).output_shape[-1] under Keras 3.15.1 (KERAS_BACKEND=torch).
KERAS_FEATURES = dict(
    EfficientNetB0=1280,
    EfficientNetB1=1280,
    EfficientNetB2=1408,
    EfficientNetB3=1536,
    EfficientNetB4=1792,
    EfficientNetB5=2048,
    EfficientNetB6=2304,
    EfficientNetB7=2560,
    EfficientNetV2B0=1280,
    EfficientNetV2B1=1280,
    EfficientNetV2B2=1408,
    EfficientNetV2B3=1536,
    EfficientNetV2S=1280,
    EfficientNetV2M=1280,
    EfficientNetV2L=1280,
)
