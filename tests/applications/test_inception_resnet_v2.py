"""InceptionResNetV2 against Keras 3.15.

The model is compared with `keras.applications.InceptionResNetV2` built in the same session:
layer names (the auto-named `conv2d_N` / `batch_normalization_N` / `activation_N` /
`custom_scale_layer_N` included), types and order, weight shapes, model name and output
shape; Keras's weight files (tf.keras 2 `.h5` layout, by order and by name, and Keras 3
`.weights.h5`) load and give the same logits on the same random weights. The pooled variants,
channels_first and tf.keras 2 itself run with the slow tests.
"""

import doctest
import hashlib

import numpy as np
import pytest

import keratron
from keratron.applications import imagenet_utils, inception_resnet_v2
from tests.applications.test_keras_interop import (  # noqa: F401 (weight_server: a fixture)
    assert_close,
    assert_same_weights,
    keras_forward,
    randomize,
    save_legacy_h5,
    weight_server,
    zero_weights,
)
from tests.conftest import require

# The minimum side is 75; non-square so that odd sizes occur on the way down (75x83 ends 1x1).
INPUT_SHAPE = (75, 83, 3)
VARIANTS = {
    "top": dict(include_top=True, classifier_activation=None),
    "avg": dict(include_top=False, pooling="avg"),
    "max": dict(include_top=False, pooling="max"),
    "features": dict(include_top=False),
}
# Keras 3.15.1's full-size model (weights=None, default arguments): parameters, non-trainable
# parameters, layers, weight tensors, printed by
#   KERAS_BACKEND=torch python -c "import keras, numpy as np; m = keras.applications.
#   InceptionResNetV2(weights=None); print(m.count_params(), sum(int(np.prod(w.shape)) for w
#   in m.non_trainable_weights), len(m.layers), len(m.weights))"
KERAS_FULL_SIZE = (55_873_736, 60_544, 782, 898)
URL = "https://storage.googleapis.com/tensorflow/keras-applications/inception_resnet_v2/"


def _build_pair(keras, variant, input_shape=INPUT_SHAPE):
    kwargs = dict(weights=None, input_shape=input_shape, **VARIANTS[variant])
    # Auto-names (conv2d_3, custom_scale_layer_3, ...) count per session.
    keras.backend.clear_session()
    keratron.backend.clear_session()
    return keras.applications.InceptionResNetV2(**kwargs), keratron.applications.InceptionResNetV2(
        **kwargs
    )


def _assert_same_structure(model, reference):
    assert [layer.name for layer in model.layers] == [layer.name for layer in reference.layers]
    assert [type(layer).__name__ for layer in model.layers] == [
        type(layer).__name__ for layer in reference.layers
    ]
    assert [tuple(w.shape) for w in model.weights] == [tuple(w.shape) for w in reference.weights]
    assert [len(layer.trainable_weights) for layer in model.layers] == [
        len(layer.trainable_weights) for layer in reference.layers
    ]
    assert model.count_params() == reference.count_params()
    assert model.name == reference.name
    assert model.output_shape == reference.output_shape


@pytest.mark.interop
def test_matches_keras(tmp_path):
    keras = require("keras")
    reference, model = _build_pair(keras, "top")
    _assert_same_structure(model, reference)
    scales = [0.17] * 10 + [0.1] * 20 + [0.2] * 9 + [1.0]
    for m in (model, reference):
        assert [
            layer.scale for layer in m.layers if type(layer).__name__ == "CustomScaleLayer"
        ] == (scales)

    values = randomize(reference, 41)
    x = np.random.default_rng(41).uniform(-1, 1, (2,) + INPUT_SHAPE).astype("float32")
    ref = keras_forward(reference, x)

    # Keras's tf.keras-layout .h5 file, loaded by layer order (then the logits) and by name.
    legacy = tmp_path / "weights.h5"
    save_legacy_h5(reference, legacy)
    model.load_weights(str(legacy))
    assert_same_weights(model, values)
    assert_close(model(x, training=False).numpy(), ref)
    zero_weights(model)
    model.load_weights(str(legacy), by_name=True)
    assert_same_weights(model, values)

    # Keras 3's own .weights.h5 layout.
    zero_weights(model)
    keras3 = tmp_path / "model.weights.h5"
    reference.save_weights(str(keras3))
    model.load_weights(str(keras3))
    assert_same_weights(model, values)


@pytest.mark.interop
@pytest.mark.slow
@pytest.mark.parametrize("variant", ["avg", "max", "features"])
def test_pooled_variants_match_keras(variant, tmp_path):
    keras = require("keras")
    reference, model = _build_pair(keras, variant)
    _assert_same_structure(model, reference)
    seed = 50 + list(VARIANTS).index(variant)
    values = randomize(reference, seed)
    legacy = tmp_path / "weights.h5"
    save_legacy_h5(reference, legacy)
    model.load_weights(str(legacy))
    assert_same_weights(model, values)
    x = np.random.default_rng(seed).uniform(-1, 1, (2,) + INPUT_SHAPE).astype("float32")
    assert_close(model.predict(x, verbose=0), keras_forward(reference, x))


@pytest.mark.interop
@pytest.mark.slow
def test_matches_tf_keras_h5(tmp_path):
    """tf.keras 2 writes the published files' layout natively with `save_weights("x.h5")`."""
    require("keras")  # loads Triton before TensorFlow (see tests.conftest.require)
    tf_keras = require("tf_keras")
    kwargs = dict(weights=None, input_shape=INPUT_SHAPE, **VARIANTS["top"])
    tf_keras.backend.clear_session()
    keratron.backend.clear_session()
    reference = tf_keras.applications.InceptionResNetV2(**kwargs)
    model = keratron.applications.InceptionResNetV2(**kwargs)
    # tf.keras names the input "input_1"; every other layer is named as in Keras 3.
    assert [layer.name for layer in model.layers[1:]] == [
        layer.name for layer in reference.layers[1:]
    ]
    values = randomize(reference, 9)
    path = tmp_path / "tf_keras.h5"
    reference.save_weights(str(path))
    model.load_weights(str(path))
    assert_same_weights(model, values)
    x = np.random.default_rng(9).uniform(-1, 1, (2,) + INPUT_SHAPE).astype("float32")
    assert_close(model.predict(x, verbose=0), reference.predict(x, verbose=0))


@pytest.mark.interop
@pytest.mark.slow
def test_channels_first_matches_keras():
    keras = require("keras")
    input_shape = (3, 75, 83)
    keras.config.set_image_data_format("channels_first")
    keratron.config.set_image_data_format("channels_first")
    try:
        reference, model = _build_pair(keras, "top", input_shape)
    finally:
        keras.config.set_image_data_format("channels_last")
        keratron.config.set_image_data_format("channels_last")
    _assert_same_structure(model, reference)
    randomize(reference, 23)
    model.set_weights(reference.get_weights())
    x = np.random.default_rng(23).uniform(-1, 1, (2,) + input_shape).astype("float32")
    assert_close(model(x, training=False).numpy(), keras_forward(reference, x))


def test_full_size_counts_and_weight_file_match_keras(monkeypatch):
    """Keras's counts, shapes and names at 299x299, and `get_file` asked for Keras's file name,
    URL and checksum."""
    calls = []
    monkeypatch.setattr(imagenet_utils, "load_model_weights", lambda *args: calls.append(args))
    model = keratron.applications.InceptionResNetV2(weights="imagenet")
    file_name = "inception_resnet_v2_weights_tf_dim_ordering_tf_kernels.h5"
    assert calls == [
        (model, "imagenet", file_name, URL + file_name, "e693bd0210a403b3192acc6073ad2e96")
    ]
    frozen = sum(int(np.prod(w.shape)) for w in model.non_trainable_weights)
    assert (model.count_params(), frozen, len(model.layers), len(model.weights)) == (
        KERAS_FULL_SIZE
    )
    assert model.input_shape == (None, 299, 299, 3) and model.output_shape == (None, 1000)
    assert model.name == "inception_resnet_v2"
    assert model.get_layer("predictions").activation is keratron.activations.softmax
    # 35x35x320 -> 17x17x1088 -> 8x8x2080 -> 8x8x1536, as the paper's figure 18.
    assert model.get_layer("block35_10_ac").output.shape == (None, 35, 35, 320)
    assert model.get_layer("block17_20_ac").output.shape == (None, 17, 17, 1088)
    assert model.get_layer("block8_10_conv").output.shape == (None, 8, 8, 2080)
    assert model.get_layer("conv_7b_ac").output.shape == (None, 8, 8, 1536)


def test_custom_scale_layer():
    layer = inception_resnet_v2.CustomScaleLayer(0.25, name="scale")
    out = layer([np.full((1, 3), 2.0, "float32"), np.array([[4.0, -8.0, 0.0]], "float32")])
    np.testing.assert_array_equal(out.numpy(), [[3.0, 0.0, 2.0]])
    config = layer.get_config()
    assert config["scale"] == 0.25 and config["name"] == "scale"
    assert inception_resnet_v2.CustomScaleLayer.from_config(config).scale == 0.25


def test_unknown_block_type_is_rejected():
    with pytest.raises(ValueError, match="block_type='block99'"):
        inception_resnet_v2._inception_resnet_block(
            keratron.Input((8, 8, 16)), 0.1, "block99", 1, axis=3
        )


# ------------------------------------------------------------------- module contents


@pytest.mark.interop
def test_module_names_match_keras():
    keras = require("keras")
    reference = keras.applications.inception_resnet_v2
    public = sorted(n for n in dir(reference) if not n.startswith("_"))
    assert sorted(inception_resnet_v2.__all__) == public
    assert keratron.applications.inception_resnet_v2 is inception_resnet_v2
    assert keratron.applications.InceptionResNetV2 is inception_resnet_v2.InceptionResNetV2
    assert "InceptionResNetV2" in keratron.applications.__all__


# ------------------------------------------------------------------- argument rules


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(weights="no/such/file.h5"), "weights="),
        (dict(classes=10), "classes=10"),
        (dict(input_shape=(74, 83, 3), include_top=False, weights=None), "75x75"),
        (dict(input_shape=(83, 74, 3), include_top=False, weights=None), "75x75"),
        (dict(input_shape=(224, 224, 3)), r"\(299, 299, 3\)"),
        (dict(input_shape=(80, 80, 4), include_top=False), "3 channels"),
        (dict(input_shape=(None, 80, 3), weights=None), "static `input_shape`"),
        (dict(classifier_activation="relu"), "'relu'"),
    ],
)
def test_argument_errors(kwargs, match, monkeypatch):
    def no_download(*args, **kwargs):
        raise AssertionError("the arguments should have been rejected before loading weights")

    monkeypatch.setattr(imagenet_utils, "load_model_weights", no_download)
    with pytest.raises(ValueError, match=match):
        keratron.applications.InceptionResNetV2(**kwargs)


@pytest.mark.interop
def test_argument_errors_as_keras_raises_them():
    """The same arguments Keras rejects (its messages differ in wording only)."""
    keras = require("keras")
    for kwargs in (
        dict(weights="no/such/file.h5"),
        dict(classes=10),
        dict(input_shape=(74, 83, 3), include_top=False, weights=None),
        dict(input_shape=(224, 224, 3)),
    ):
        with pytest.raises(ValueError):
            keras.applications.InceptionResNetV2(**kwargs)


def test_input_tensor_sources_become_the_inputs():
    source = keratron.Input((75, 83, 3))
    x = keratron.layers.Rescaling(1 / 127.5, offset=-1.0)(source)
    model = keratron.applications.InceptionResNetV2(input_tensor=x, include_top=False, weights=None)
    assert model.inputs[0] is source
    assert isinstance(model.layers[1], keratron.layers.Rescaling)
    assert model.output_shape == (None, 1, 1, 1536)


# ------------------------------------------------------------------- weights="imagenet"


def test_imagenet_no_top_weight_file(monkeypatch):
    calls = []
    monkeypatch.setattr(imagenet_utils, "load_model_weights", lambda *args: calls.append(args))
    model = keratron.applications.InceptionResNetV2(
        weights="imagenet", include_top=False, input_shape=(75, 75, 3)
    )
    file_name = "inception_resnet_v2_weights_tf_dim_ordering_tf_kernels_notop.h5"
    assert calls == [
        (model, "imagenet", file_name, URL + file_name, "d19885ff4a710c122648d3b5c3b684e4")
    ]


@pytest.mark.interop
@pytest.mark.slow
def test_imagenet_weights_download_and_cache(weight_server, tmp_path, monkeypatch):  # noqa: F811
    """A Keras-written no-top file served over HTTP is fetched once into KERAS_HOME/models,
    checked against its hash and loaded; a second build reads the cache."""
    keras = require("keras")
    root, base_url, requests = weight_server
    kwargs = dict(input_shape=INPUT_SHAPE, include_top=False)
    file_name = inception_resnet_v2.WEIGHTS_NAME_NO_TOP
    keras.backend.clear_session()
    reference = keras.applications.InceptionResNetV2(weights=None, **kwargs)
    values = randomize(reference, 13)
    save_legacy_h5(reference, root / file_name)
    digest = hashlib.md5((root / file_name).read_bytes()).hexdigest()  # Keras's hashes are MD5

    home = tmp_path / "keras_home"
    monkeypatch.setenv("KERAS_HOME", str(home))
    monkeypatch.setattr(inception_resnet_v2, "BASE_WEIGHT_URL", base_url)
    monkeypatch.setitem(inception_resnet_v2.WEIGHTS_HASHES, file_name, digest)

    model = keratron.applications.InceptionResNetV2(weights="imagenet", **kwargs)
    assert_same_weights(model, values)
    assert requests == ["/" + file_name]
    again = keratron.applications.InceptionResNetV2(weights="imagenet", **kwargs)
    assert_same_weights(again, values)
    assert requests == ["/" + file_name]
    assert (home / "models" / file_name).read_bytes() == (root / file_name).read_bytes()


def test_docstring_examples():
    module = inception_resnet_v2
    globs = {"np": np, "keratron": keratron, **vars(module)}
    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
    tests = finder.find(module, module.__name__, globs=globs)
    assert sum(len(t.examples) for t in tests) > 0
    for test in tests:
        runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{result.failed} docstring example(s) failed in {module.__name__}"
