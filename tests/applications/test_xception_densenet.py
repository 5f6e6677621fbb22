"""Xception and DenseNet121/169/201 against Keras 3.15.

Each model is compared with `keras.applications` built in the same test: layer names (the
auto-named ones included), types and order, weight shapes, model name and output shape;
Keras's weight files (tf.keras 2 `.h5` layout and Keras 3 `.weights.h5`) load by order and
give the same logits / features on the same random weights. DenseNet169/201 and the pooled
variants run with the slow tests.
"""

import doctest
import hashlib

import numpy as np
import pytest

import keratron
from keratron.applications import densenet, imagenet_utils, xception
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

# Small inputs: Xception's minimum side is 71; non-square so odd sizes occur on the way down.
INPUT_SHAPES = {
    "Xception": (71, 75, 3),
    "DenseNet121": (40, 48, 3),
    "DenseNet169": (40, 48, 3),
    "DenseNet201": (40, 48, 3),
}
ARCHS = list(INPUT_SHAPES)
FAST = ("Xception", "DenseNet121")
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
    "Xception": (22_910_480, 54_528, 134, 236),
    "DenseNet121": (8_062_504, 83_648, 429, 606),
    "DenseNet169": (14_307_880, 158_400, 597, 846),
    "DenseNet201": (20_242_984, 229_056, 709, 1006),
}
MODULES = ["xception", "densenet"]
APPS_URL = "https://storage.googleapis.com/tensorflow/keras-applications/"


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
    input_shape = INPUT_SHAPES[arch]
    kwargs = dict(weights=None, input_shape=input_shape, **VARIANTS[variant])
    # Auto-names (conv2d_3, batch_normalization_3, add_11, zero_padding2d_1) count per session.
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

    seed = 100 + ARCHS.index(arch) * 10 + list(VARIANTS).index(variant)
    values = randomize(reference, seed)
    x = np.random.default_rng(seed).uniform(-1, 1, (2,) + input_shape).astype("float32")
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


@pytest.mark.interop
@pytest.mark.parametrize("arch", ["Xception", pytest.param("DenseNet121", marks=pytest.mark.slow)])
def test_matches_tf_keras_h5(arch, tmp_path):
    """tf.keras 2 writes the published files' layout natively with `save_weights("x.h5")`."""
    # Keras 3 (torch backend) loads triton's LLVM through torch._dynamo; loaded after
    # TensorFlow's, it aborts the process ("registered more than once"), so it goes first.
    require("keras")
    tf_keras = require("tf_keras")
    input_shape = INPUT_SHAPES[arch]
    kwargs = dict(weights=None, input_shape=input_shape, **VARIANTS["top"])
    tf_keras.backend.clear_session()
    keratron.backend.clear_session()
    reference = getattr(tf_keras.applications, arch)(**kwargs)
    model = getattr(keratron.applications, arch)(**kwargs)
    # tf.keras names the input "input_1", and DenseNet's stem "conv1/conv", "conv1/bn" and
    # "conv1/relu" (as in the published files; Keras 3 says "conv1_conv"); the files load by
    # layer order, so only the names differ. Every other layer is named as in Keras 3.
    assert [layer.name for layer in model.layers[1:]] == [
        layer.name.replace("/", "_") for layer in reference.layers[1:]
    ]
    values = randomize(reference, 8)
    path = tmp_path / "tf_keras.h5"
    reference.save_weights(str(path))
    model.load_weights(str(path))
    assert_same_weights(model, values)
    x = np.random.default_rng(8).uniform(-1, 1, (2,) + input_shape).astype("float32")
    assert_close(model.predict(x, verbose=0), reference.predict(x, verbose=0))


@pytest.mark.interop
@pytest.mark.slow
def test_xception_channels_first_matches_keras():
    keras = require("keras")
    kwargs = dict(weights=None, input_shape=(3, 71, 75), classifier_activation=None)
    keras.config.set_image_data_format("channels_first")
    keratron.config.set_image_data_format("channels_first")
    try:
        keras.backend.clear_session()
        keratron.backend.clear_session()
        reference = keras.applications.Xception(**kwargs)
        model = keratron.applications.Xception(**kwargs)
    finally:
        keras.config.set_image_data_format("channels_last")
        keratron.config.set_image_data_format("channels_last")
    assert [tuple(w.shape) for w in model.weights] == [tuple(w.shape) for w in reference.weights]
    randomize(reference, 22)
    model.set_weights(reference.get_weights())
    x = np.random.default_rng(22).uniform(-1, 1, (2, 3, 71, 75)).astype("float32")
    assert_close(model(x, training=False).numpy(), keras_forward(reference, x))


@pytest.mark.interop
def test_densenet_rejects_channels_first_as_keras_does():
    keras = require("keras")
    keras.config.set_image_data_format("channels_first")
    keratron.config.set_image_data_format("channels_first")
    try:
        with pytest.raises(ValueError, match="channels_first"):
            keras.applications.DenseNet121(weights=None)
        with pytest.raises(ValueError, match="image_data_format='channels_first'"):
            keratron.applications.DenseNet121(weights=None)
    finally:
        keras.config.set_image_data_format("channels_last")
        keratron.config.set_image_data_format("channels_last")


# ------------------------------------------------------------------- full-size models


@pytest.mark.parametrize(
    "arch",
    # DenseNet121 is compared with Keras (at a small size) in the fast tests above.
    [pytest.param(a, marks=pytest.mark.slow) for a in ARCHS],
)
def test_full_size_counts_match_keras(arch):
    model = getattr(keratron.applications, arch)(weights=None)
    frozen = sum(int(np.prod(w.shape)) for w in model.non_trainable_weights)
    assert (model.count_params(), frozen, len(model.layers), len(model.weights)) == (
        KERAS_FULL_SIZE[arch]
    )
    size = 299 if arch == "Xception" else 224
    assert model.input_shape == (None, size, size, 3) and model.output_shape == (None, 1000)
    assert model.name == arch.lower()
    assert model.get_layer("predictions").activation is keratron.activations.softmax


def test_densenet_blocks():
    """The generic builder: conv blocks concatenate 32 channels; transitions halve them."""
    model = densenet.DenseNet(
        [1, 2, 1, 1], weights=None, include_top=False, input_shape=(64, 64, 3)
    )
    # 64 + 32 -> 48 (pool2); 48 + 2 * 32 -> 56 (pool3); 56 + 32 -> 44 (pool4); 44 + 32 = 76.
    assert model.get_layer("pool2_conv").kernel.shape == (1, 1, 96, 48)
    assert model.get_layer("pool3_conv").kernel.shape == (1, 1, 112, 56)
    assert model.get_layer("pool4_conv").kernel.shape == (1, 1, 88, 44)
    assert model.output_shape == (None, 2, 2, 76)
    assert "conv3_block2_concat" in [layer.name for layer in model.layers]


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
    # densenet.py also exports the shared `DenseNet` builder, as Keras's source module has it.
    assert sorted(set(ours.__all__) - {"DenseNet"}) == public
    for name in public:
        assert callable(getattr(ours, name))
        if name[0].isupper():
            assert getattr(keratron.applications, name) is getattr(ours, name)


# ------------------------------------------------------------------- argument rules


@pytest.mark.parametrize(
    "builder,kwargs,match",
    [
        (keratron.applications.Xception, dict(weights="no/such/file.h5"), "weights="),
        (keratron.applications.DenseNet169, dict(weights="no_file.h5"), "weights="),
        (keratron.applications.Xception, dict(classes=10), "classes=10"),
        (keratron.applications.DenseNet121, dict(classes=10), "classes=10"),
        (
            keratron.applications.Xception,
            dict(input_shape=(70, 71, 3), include_top=False, weights=None),
            "71x71",
        ),
        (
            keratron.applications.DenseNet201,
            dict(input_shape=(64, 31, 3), include_top=False, weights=None),
            "32x32",
        ),
        (keratron.applications.Xception, dict(input_shape=(224, 224, 3)), r"\(299, 299, 3\)"),
        (keratron.applications.DenseNet121, dict(input_shape=(299, 299, 3)), r"\(224, 224, 3\)"),
        (
            keratron.applications.DenseNet121,
            dict(input_shape=(64, 64, 4), include_top=False),
            "3 channels",
        ),
        (
            keratron.applications.Xception,
            dict(input_shape=(None, 80, 3), weights=None),
            "static `input_shape`",
        ),
        (keratron.applications.Xception, dict(classifier_activation="relu"), "'relu'"),
        (keratron.applications.DenseNet201, dict(classifier_activation="tanh"), "'tanh'"),
        (
            densenet.DenseNet,
            dict(blocks=[1, 1, 1, 1], weights="imagenet"),
            r"blocks=\(1, 1, 1, 1\)",
        ),
    ],
)
def test_argument_errors(builder, kwargs, match, monkeypatch):
    def no_download(*args, **kwargs):
        raise AssertionError("the arguments should have been rejected before loading weights")

    monkeypatch.setattr(imagenet_utils, "load_model_weights", no_download)
    with pytest.raises(ValueError, match=match):
        builder(**kwargs)


def test_input_tensor_sources_become_the_inputs():
    source = keratron.Input((72, 72, 3))
    x = keratron.layers.Rescaling(1 / 127.5, offset=-1.0)(source)
    model = keratron.applications.Xception(input_tensor=x, include_top=False, weights=None)
    assert model.inputs[0] is source
    assert isinstance(model.layers[1], keratron.layers.Rescaling)
    assert model.output_shape == (None, 3, 3, 2048)


# ------------------------------------------------------------------- weights="imagenet"


@pytest.mark.parametrize(
    "builder,include_top,file_name,file_hash",
    [
        (
            "Xception",
            True,
            "xception/xception_weights_tf_dim_ordering_tf_kernels.h5",
            "0a58e3b7378bc2990ea3b43d5981f1f6",
        ),
        (
            "Xception",
            False,
            "xception/xception_weights_tf_dim_ordering_tf_kernels_notop.h5",
            "b0042744bf5b25fce3cb969f33bebb97",
        ),
        (
            "DenseNet121",
            True,
            "densenet/densenet121_weights_tf_dim_ordering_tf_kernels.h5",
            "9d60b8095a5708f2dcce2bca79d332c7",
        ),
        (
            "DenseNet121",
            False,
            "densenet/densenet121_weights_tf_dim_ordering_tf_kernels_notop.h5",
            "30ee3e1110167f948a6b9946edeeb738",
        ),
        pytest.param(
            "DenseNet169",
            True,
            "densenet/densenet169_weights_tf_dim_ordering_tf_kernels.h5",
            "d699b8f76981ab1b30698df4c175e90b",
            marks=pytest.mark.slow,
        ),
        pytest.param(
            "DenseNet169",
            False,
            "densenet/densenet169_weights_tf_dim_ordering_tf_kernels_notop.h5",
            "b8c4d4c20dd625c148057b9ff1c1176b",
            marks=pytest.mark.slow,
        ),
        pytest.param(
            "DenseNet201",
            True,
            "densenet/densenet201_weights_tf_dim_ordering_tf_kernels.h5",
            "1ceb130c1ea1b78c3bf6114dbdfd8807",
            marks=pytest.mark.slow,
        ),
        pytest.param(
            "DenseNet201",
            False,
            "densenet/densenet201_weights_tf_dim_ordering_tf_kernels_notop.h5",
            "c13680b51ded0fb44dff2d8f86ac8bb1",
            marks=pytest.mark.slow,
        ),
    ],
)
def test_imagenet_weight_files(builder, include_top, file_name, file_hash, monkeypatch):
    """Each model asks `get_file` for Keras's file name, URL and checksum."""
    calls = []

    def record(model, weights, name, origin, digest=None):
        calls.append((model, weights, name, origin, digest))

    monkeypatch.setattr(imagenet_utils, "load_model_weights", record)
    kwargs = {} if include_top else dict(include_top=False, input_shape=(71, 71, 3))
    model = getattr(keratron.applications, builder)(weights="imagenet", **kwargs)
    name = file_name.split("/")[1]
    assert calls == [(model, "imagenet", name, APPS_URL + file_name, file_hash)]


@pytest.mark.interop
@pytest.mark.slow
def test_imagenet_weights_download_and_cache(weight_server, tmp_path, monkeypatch):  # noqa: F811
    """A Keras-written DenseNet121 file served over HTTP is fetched once into
    KERAS_HOME/models, checked against its hash and loaded; a second build reads the cache."""
    keras = require("keras")
    root, base_url, requests = weight_server
    kwargs = dict(input_shape=(32, 32, 3), include_top=False)
    file_name = "densenet121_weights_tf_dim_ordering_tf_kernels_notop.h5"
    keras.backend.clear_session()
    reference = keras.applications.DenseNet121(weights=None, **kwargs)
    values = randomize(reference, 12)
    save_legacy_h5(reference, root / file_name)
    digest = hashlib.md5((root / file_name).read_bytes()).hexdigest()  # Keras's hashes are MD5

    home = tmp_path / "keras_home"
    monkeypatch.setenv("KERAS_HOME", str(home))
    monkeypatch.setattr(densenet, "BASE_WEIGHTS_PATH", base_url)
    blocks = (6, 12, 24, 16)
    monkeypatch.setitem(densenet.WEIGHTS, blocks, ("densenet121", "unused", digest))

    model = keratron.applications.DenseNet121(weights="imagenet", **kwargs)
    assert_same_weights(model, values)
    assert requests == ["/" + file_name]
    again = keratron.applications.DenseNet121(weights="imagenet", **kwargs)
    assert_same_weights(again, values)
    assert requests == ["/" + file_name]
    assert (home / "models" / file_name).read_bytes() == (root / file_name).read_bytes()
    assert xception.BASE_WEIGHT_PATH == APPS_URL + "xception/"


@pytest.mark.parametrize(
    "module", [xception, pytest.param(densenet, marks=pytest.mark.slow)], ids=lambda m: m.__name__
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
