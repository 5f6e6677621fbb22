"""VGG16, VGG19, ResNet50/101/152 and ResNet50V2/101V2/152V2 against Keras 3.15.

Each model is compared with `keras.applications` built in the same test: layer names, types
and order, weight shapes, model name and output shape; Keras's weight files (tf.keras 2 `.h5`
layout and Keras 3 `.weights.h5`) load by order and give the same logits / features on the
same random weights. The deepest models and the pooled variants run with the slow tests.
"""

import doctest
import hashlib

import numpy as np
import pytest

import keratron
from keratron.applications import imagenet_utils, resnet, resnet50, resnet_v2, vgg16, vgg19
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

# Non-square and not a power of two, so odd feature-map sizes occur on the way down.
INPUT_SHAPE = (40, 48, 3)
ARCHS = [
    "VGG16",
    "VGG19",
    "ResNet50",
    "ResNet101",
    "ResNet152",
    "ResNet50V2",
    "ResNet101V2",
    "ResNet152V2",
]
# One model per family runs in the fast suite; the deeper ones repeat the same blocks.
FAST = ("VGG16", "ResNet50", "ResNet50V2")
VARIANTS = {
    "top": dict(include_top=True, classifier_activation=None),
    "avg": dict(include_top=False, pooling="avg"),
    "max": dict(include_top=False, pooling="max"),
    "features": dict(include_top=False),
}

# Keras 3.15.1's full-size models (weights=None, default arguments):
# (parameters, non-trainable parameters, layers, weight tensors), printed by
#   KERAS_BACKEND=torch python -c "import keras, numpy as np; m = keras.applications.X(
#   weights=None); print(m.count_params(), sum(int(np.prod(w.shape)) for w in
#   m.non_trainable_weights), len(m.layers), len(m.weights))"
KERAS_FULL_SIZE = {
    "VGG16": (138_357_544, 0, 23, 32),
    "VGG19": (143_667_240, 0, 26, 38),
    "ResNet50": (25_636_712, 53_120, 177, 320),
    "ResNet101": (44_707_176, 105_344, 347, 626),
    "ResNet152": (60_419_944, 151_424, 517, 932),
    "ResNet50V2": (25_613_800, 45_440, 192, 272),
    "ResNet101V2": (44_675_560, 97_664, 379, 544),
    "ResNet152V2": (60_380_648, 143_744, 566, 816),
}
MODULES = ["vgg16", "vgg19", "resnet", "resnet50", "resnet_v2"]


def _cases():
    for arch in ARCHS:
        for variant in VARIANTS:
            fast = arch in FAST and variant == "top"
            marks = [] if fast else [pytest.mark.slow]
            yield pytest.param(arch, variant, marks=marks, id=f"{arch}-{variant}")


@pytest.mark.interop
@pytest.mark.parametrize("arch,variant", list(_cases()))
def test_matches_keras(arch, variant, tmp_path):
    keras = require("keras")
    kwargs = dict(weights=None, input_shape=INPUT_SHAPE, **VARIANTS[variant])
    # Auto-names (max_pooling2d_3, global_average_pooling2d) count per session.
    keras.backend.clear_session()
    keratron.backend.clear_session()
    reference = getattr(keras.applications, arch)(**kwargs)
    model = getattr(keratron.applications, arch)(**kwargs)

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

    seed = ARCHS.index(arch) * 10 + list(VARIANTS).index(variant)
    values = randomize(reference, seed)
    x = np.random.default_rng(seed).uniform(-1, 1, (2,) + INPUT_SHAPE).astype("float32")
    ref = keras_forward(reference, x)
    model.set_weights(reference.get_weights())
    assert_close(model(x, training=False).numpy(), ref)

    # Keras's tf.keras-layout .h5 file, loaded by layer order.
    zero_weights(model)
    legacy = tmp_path / "weights.h5"
    save_legacy_h5(reference, legacy)
    model.load_weights(str(legacy))
    assert_same_weights(model, values)
    if variant == "top":
        assert_close(model.predict(x, verbose=0), ref)
        # Keras 3's own .weights.h5 layout.
        zero_weights(model)
        keras3 = tmp_path / "model.weights.h5"
        reference.save_weights(str(keras3))
        model.load_weights(str(keras3))
        assert_same_weights(model, values)


# Slow: the fast suite checks tf.keras's own writer on Xception (test_xception_densenet.py), and
# Keras 3's writer of the same layout on every model above.
@pytest.mark.interop
@pytest.mark.slow
@pytest.mark.parametrize("arch", ["ResNet50V2", "VGG19"])
def test_matches_tf_keras_h5(arch, tmp_path):
    """tf.keras 2 writes the published files' layout natively with `save_weights("x.h5")`."""
    # Keras 3 (torch backend) loads triton's LLVM through torch._dynamo; loaded after
    # TensorFlow's, it aborts the process ("registered more than once"), so it goes first.
    require("keras")
    tf_keras = require("tf_keras")
    kwargs = dict(weights=None, input_shape=INPUT_SHAPE, **VARIANTS["top"])
    tf_keras.backend.clear_session()
    keratron.backend.clear_session()
    reference = getattr(tf_keras.applications, arch)(**kwargs)
    model = getattr(keratron.applications, arch)(**kwargs)
    # tf.keras names the input "input_1"; every other layer (the auto-named 1x1 max poolings
    # of ResNetV2's shortcuts included) is named as in Keras 3.
    assert [layer.name for layer in model.layers[1:]] == [
        layer.name for layer in reference.layers[1:]
    ]
    values = randomize(reference, 7)
    path = tmp_path / "tf_keras.h5"
    reference.save_weights(str(path))
    model.load_weights(str(path))
    assert_same_weights(model, values)
    x = np.random.default_rng(7).uniform(-1, 1, (2,) + INPUT_SHAPE).astype("float32")
    assert_close(model.predict(x, verbose=0), reference.predict(x, verbose=0))


@pytest.mark.interop
@pytest.mark.slow
@pytest.mark.parametrize("arch", ["ResNet50", "ResNet50V2"])
def test_channels_first_matches_keras(arch):
    keras = require("keras")
    kwargs = dict(weights=None, input_shape=(3, 40, 48), classifier_activation=None)
    keras.config.set_image_data_format("channels_first")
    keratron.config.set_image_data_format("channels_first")
    try:
        keras.backend.clear_session()
        keratron.backend.clear_session()
        reference = getattr(keras.applications, arch)(**kwargs)
        model = getattr(keratron.applications, arch)(**kwargs)
    finally:
        keras.config.set_image_data_format("channels_last")
        keratron.config.set_image_data_format("channels_last")
    assert [tuple(w.shape) for w in model.weights] == [tuple(w.shape) for w in reference.weights]
    randomize(reference, 21)
    model.set_weights(reference.get_weights())
    x = np.random.default_rng(21).uniform(-1, 1, (2, 3, 40, 48)).astype("float32")
    assert_close(model(x, training=False).numpy(), keras_forward(reference, x))


# ------------------------------------------------------------------- full-size models


@pytest.mark.parametrize(
    "arch",
    [a if a == "ResNet50" else pytest.param(a, marks=pytest.mark.slow) for a in ARCHS],
)
def test_full_size_counts_match_keras(arch):
    model = getattr(keratron.applications, arch)(weights=None)
    frozen = sum(int(np.prod(w.shape)) for w in model.non_trainable_weights)
    assert (model.count_params(), frozen, len(model.layers), len(model.weights)) == (
        KERAS_FULL_SIZE[arch]
    )
    assert model.input_shape == (None, 224, 224, 3) and model.output_shape == (None, 1000)
    assert model.name == arch.lower()
    assert model.get_layer("predictions").activation is keratron.activations.softmax


# ------------------------------------------------------------------- module contents


@pytest.mark.interop
@pytest.mark.parametrize("module", MODULES)
def test_module_names_match_keras(module):
    """`keratron.applications.<module>` offers exactly what `keras.applications.<module>`
    does, and the top-level builders are the module's."""
    keras = require("keras")
    reference = getattr(keras.applications, module)
    ours = getattr(keratron.applications, module)
    public = sorted(n for n in dir(reference) if not n.startswith("_"))
    # resnet.py also exports the shared `ResNet` builder, as Keras's source module has it.
    assert sorted(set(ours.__all__) - {"ResNet"}) == public
    for name in public:
        assert callable(getattr(ours, name))
        if name[0].isupper():
            assert getattr(keratron.applications, name) is getattr(ours, name)
            assert getattr(keras.applications, name) is getattr(reference, name)
    assert resnet50.ResNet50 is resnet.ResNet50


# ------------------------------------------------------------------- argument rules


@pytest.mark.parametrize(
    "builder,kwargs,match",
    [
        (keratron.applications.VGG16, dict(weights="no/such/file.h5"), "weights="),
        (keratron.applications.VGG19, dict(classes=10), "classes=10"),
        (keratron.applications.ResNet50, dict(classes=10), "classes=10"),
        (keratron.applications.ResNet152V2, dict(weights=3), "weights=3"),
        (
            keratron.applications.ResNet50V2,
            dict(input_shape=(31, 64, 3), include_top=False, weights=None),
            "32x32",
        ),
        (
            keratron.applications.VGG16,
            dict(input_shape=(64, 31, 3), include_top=False, weights=None),
            "32x32",
        ),
        (keratron.applications.VGG19, dict(input_shape=(100, 100, 3)), r"\(224, 224, 3\)"),
        (
            keratron.applications.ResNet101,
            dict(input_shape=(64, 64, 1), include_top=False),
            "3 channels",
        ),
        (
            keratron.applications.ResNet152,
            dict(input_shape=(None, None, 3), weights=None),
            "static `input_shape`",
        ),
        (
            keratron.applications.ResNet50,
            dict(input_shape=(64, 64), include_top=False, weights=None),
            "three integers",
        ),
        (keratron.applications.VGG16, dict(classifier_activation="relu"), "'relu'"),
        (keratron.applications.ResNet101V2, dict(classifier_activation="sigmoid"), "sigmoid"),
    ],
)
def test_argument_errors(builder, kwargs, match, monkeypatch):
    def no_download(*args, **kwargs):
        raise AssertionError("the arguments should have been rejected before loading weights")

    monkeypatch.setattr(imagenet_utils, "load_model_weights", no_download)
    with pytest.raises(ValueError, match=match):
        builder(**kwargs)


def test_resnet_builder_needs_published_weights_for_imagenet():
    with pytest.raises(ValueError, match="weights_name='resnext50'"):
        resnet.ResNet(
            lambda x: x, preact=False, use_bias=True, weights="imagenet", weights_name="resnext50"
        )


def test_input_tensor_sources_become_the_inputs():
    source = keratron.Input((40, 40, 3))
    x = keratron.layers.Rescaling(1 / 127.5, offset=-1.0)(source)
    model = keratron.applications.ResNet50V2(input_tensor=x, include_top=False, weights=None)
    assert model.inputs[0] is source
    assert isinstance(model.layers[1], keratron.layers.Rescaling)
    assert model.output_shape == (None, 2, 2, 2048)
    out = model(np.ones((1, 40, 40, 3), "float32"), training=False)
    assert out.shape == (1, 2, 2, 2048)


def test_classes_and_activation_of_the_top():
    model = keratron.applications.VGG16(
        weights=None, input_shape=(32, 32, 3), classes=7, classifier_activation="sigmoid"
    )
    assert model.output_shape == (None, 7)
    assert model.get_layer("fc1").kernel.shape == (512, 4096)
    out = model(np.ones((2, 32, 32, 3), "float32"), training=False).numpy()
    assert ((out > 0) & (out < 1)).all()
    names = [layer.name for layer in model.layers]
    assert names[-4:] == ["flatten", "fc1", "fc2", "predictions"]


# ------------------------------------------------------------------- weights="imagenet"

RESNET_URL = "https://storage.googleapis.com/tensorflow/keras-applications/resnet/"
APPS_URL = "https://storage.googleapis.com/tensorflow/keras-applications/"


def _slow(*values):
    return pytest.param(*values, marks=pytest.mark.slow)


@pytest.mark.parametrize(
    "builder,include_top,file_name,file_hash",
    [
        (
            "VGG16",
            False,
            "vgg16/vgg16_weights_tf_dim_ordering_tf_kernels_notop.h5",
            "6d6bbae143d832006294945121d1f1fc",
        ),
        (
            "VGG19",
            False,
            "vgg19/vgg19_weights_tf_dim_ordering_tf_kernels_notop.h5",
            "253f8cb515780f3b799900260a226db6",
        ),
        (
            "ResNet50",
            True,
            "resnet/resnet50_weights_tf_dim_ordering_tf_kernels.h5",
            "2cb95161c43110f7111970584f804107",
        ),
        (
            "ResNet50",
            False,
            "resnet/resnet50_weights_tf_dim_ordering_tf_kernels_notop.h5",
            "4d473c1dd8becc155b73f8504c6f6626",
        ),
        (
            "ResNet50V2",
            True,
            "resnet/resnet50v2_weights_tf_dim_ordering_tf_kernels.h5",
            "3ef43a0b657b3be2300d5770ece849e0",
        ),
        _slow(
            "ResNet101",
            False,
            "resnet/resnet101_weights_tf_dim_ordering_tf_kernels_notop.h5",
            "88cf7a10940856eca736dc7b7e228a21",
        ),
        _slow(
            "ResNet152",
            True,
            "resnet/resnet152_weights_tf_dim_ordering_tf_kernels.h5",
            "100835be76be38e30d865e96f2aaae62",
        ),
        _slow(
            "ResNet101V2",
            True,
            "resnet/resnet101v2_weights_tf_dim_ordering_tf_kernels.h5",
            "6343647c601c52e1368623803854d971",
        ),
        _slow(
            "ResNet152V2",
            False,
            "resnet/resnet152v2_weights_tf_dim_ordering_tf_kernels_notop.h5",
            "ed17cf2e0169df9d443503ef94b23b33",
        ),
    ],
)
def test_imagenet_weight_files(builder, include_top, file_name, file_hash, monkeypatch):
    """Each model asks `get_file` for Keras's file name, URL and checksum."""
    calls = []

    def record(model, weights, name, origin, digest=None):
        calls.append((model, weights, name, origin, digest))

    monkeypatch.setattr(imagenet_utils, "load_model_weights", record)
    kwargs = {} if include_top else dict(include_top=False, input_shape=(32, 32, 3))
    model = getattr(keratron.applications, builder)(weights="imagenet", **kwargs)
    name = file_name.split("/")[1]
    assert calls == [(model, "imagenet", name, APPS_URL + file_name, file_hash)]


def test_published_files_with_top():
    """The with-top files of the models too large to build here, as Keras lists them."""
    assert vgg16.BASE_WEIGHT_PATH + vgg16.WEIGHTS_NAME == (
        APPS_URL + "vgg16/vgg16_weights_tf_dim_ordering_tf_kernels.h5"
    )
    assert vgg16.WEIGHTS_HASHES[vgg16.WEIGHTS_NAME] == "64373286793e3c8b2b4e3219cbf3544b"
    assert vgg19.BASE_WEIGHT_PATH + vgg19.WEIGHTS_NAME == (
        APPS_URL + "vgg19/vgg19_weights_tf_dim_ordering_tf_kernels.h5"
    )
    assert vgg19.WEIGHTS_HASHES[vgg19.WEIGHTS_NAME] == "cbe5617147190e668d6c5d5026f83318"
    assert resnet.BASE_WEIGHTS_PATH == RESNET_URL
    assert resnet.WEIGHTS_HASHES["resnet101"][0] == "f1aeb4b969a6efcfb50fad2f0c20cfc5"
    assert resnet.WEIGHTS_HASHES["resnet152"][1] == "ee4c566cf9a93f14d82f913c2dc6dd0c"
    assert resnet.WEIGHTS_HASHES["resnet50v2"][1] == "fac2f116257151a9d068a22e544a4917"
    assert resnet.WEIGHTS_HASHES["resnet101v2"][1] == "c0ed64b8031c3730f411d2eb4eea35b5"
    assert resnet.WEIGHTS_HASHES["resnet152v2"][0] == "a49b44d1979771252814e80f8ec446f9"
    assert resnet_v2.resnet is resnet  # ResNetV2 loads through ResNet's table


@pytest.mark.interop
def test_imagenet_weights_download_and_cache(weight_server, tmp_path, monkeypatch):  # noqa: F811
    """A Keras-written file served over HTTP is fetched once into KERAS_HOME/models, checked
    against its hash and loaded; a second build reads the cache."""
    keras = require("keras")
    root, base_url, requests = weight_server
    kwargs = dict(input_shape=INPUT_SHAPE, include_top=False, pooling="avg")
    file_name = "vgg16_weights_tf_dim_ordering_tf_kernels_notop.h5"
    keras.backend.clear_session()
    reference = keras.applications.VGG16(weights=None, **kwargs)
    values = randomize(reference, 11)
    save_legacy_h5(reference, root / file_name)
    digest = hashlib.md5((root / file_name).read_bytes()).hexdigest()  # Keras's hashes are MD5

    home = tmp_path / "keras_home"
    monkeypatch.setenv("KERAS_HOME", str(home))
    monkeypatch.setattr(vgg16, "BASE_WEIGHT_PATH", base_url)
    monkeypatch.setattr(vgg16, "WEIGHTS_HASHES", {file_name: digest})

    model = keratron.applications.VGG16(weights="imagenet", **kwargs)
    assert_same_weights(model, values)
    assert requests == ["/" + file_name]
    assert (home / "models" / file_name).read_bytes() == (root / file_name).read_bytes()
    again = keratron.applications.VGG16(weights="imagenet", **kwargs)
    assert_same_weights(again, values)
    assert requests == ["/" + file_name]


@pytest.mark.parametrize(
    "module",
    [
        vgg16,
        vgg19,
        resnet50,
        pytest.param(resnet, marks=pytest.mark.slow),
        pytest.param(resnet_v2, marks=pytest.mark.slow),
    ],
    ids=lambda m: m.__name__,
)
def test_docstring_examples(module):
    globs = {"np": np, "keratron": keratron, **vars(module)}
    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
    tests = finder.find(module, module.__name__, globs=globs)
    assert sum(len(t.examples) for t in tests) > 0
    for test in tests:
        runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{result.failed} docstring example(s) failed in {module.__name__}"
