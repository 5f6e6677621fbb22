"""ConvNeXt, MobileNetV3 and NASNet against real Keras 3.15: same layers, operations, names and
weight shapes; Keras's weight files (tf.keras 2 `.h5` layout and Keras 3 `.weights.h5`) load
by order and give the same logits and features; `weights="imagenet"` resolves Keras's file
names, URLs and checksums and downloads through `get_file` from a local HTTP server; argument
errors; `preprocess_input` / `decode_predictions` as Keras's modules have them.

Keras 3.15 refuses `NASNetMobile` on its torch backend (the suite's KERAS_BACKEND), so the
reference is Keras's own `NASNet` builder called with exactly NASNetMobile's arguments.
"""

import hashlib
import inspect
import json

import numpy as np
import pytest

import keratron
from keratron.applications import convnext, imagenet_utils, mobilenet_v3, nasnet
from keratron.layers.layer import TensorOpLayer

# Re-exported for the tests below (pytest finds fixtures by module attribute).
from tests.applications.test_keras_interop import (
    assert_close,
    assert_same_weights,
    keras_forward,
    randomize,
    save_legacy_h5,
    weight_server,  # noqa: F401, E402
    zero_weights,
)
from tests.conftest import require

# name -> (builder, kwargs): small inputs, and the small variants where Keras has them.
CASES = {
    "v3small": ("MobileNetV3Small", dict(alpha=0.75, input_shape=(32, 32, 3))),
    "v3large-minimalistic-avg": (
        "MobileNetV3Large",
        dict(minimalistic=True, include_top=False, pooling="avg", input_shape=(48, 40, 3)),
    ),
    "v3large-wide-raw": (
        "MobileNetV3Large",
        dict(alpha=1.25, input_shape=(33, 35, 3), include_preprocessing=False, dropout_rate=0.0),
    ),
    "convnext-tiny": ("ConvNeXtTiny", dict(input_shape=(32, 32, 3))),
    "convnext-tiny-max-raw": (
        "ConvNeXtTiny",
        dict(
            include_top=False, pooling="max", input_shape=(64, 48, 3), include_preprocessing=False
        ),
    ),
    "nasnet-mobile": ("NASNetMobile", dict(input_shape=(32, 32, 3))),
    "nasnet-large-avg": (
        "NASNetLarge",
        dict(include_top=False, pooling="avg", input_shape=(32, 32, 3)),
    ),
}
# ConvNeXtTiny's 28M weights go through two files, and NASNet's hundreds of layers take tens of
# seconds (NASNetLarge has 85M weights): reduced ConvNeXt and NASNet models run in the fast
# suite (test_convnext_general_builder_with_stochastic_depth, test_nasnet_general_builder).
SLOW = {
    "v3large-wide-raw",
    "convnext-tiny",
    "convnext-tiny-max-raw",
    "nasnet-mobile",
    "nasnet-large-avg",
}


def build_keras(keras, arch, **kwargs):
    if arch == "NASNetMobile":
        # keras.applications.NASNetMobile raises on the torch backend; this is its body.
        from keras.src.applications import nasnet as keras_nasnet

        input_shape = kwargs.pop("input_shape", None)
        if not kwargs.get("include_top", True) and input_shape is None:
            input_shape = (224, 224, 3)
        return keras_nasnet.NASNet(
            input_shape,
            penultimate_filters=1056,
            num_blocks=4,
            stem_block_filters=32,
            skip_reduction=False,
            filter_multiplier=2,
            default_size=224,
            name="nasnet_mobile",
            **kwargs,
        )
    return getattr(keras.applications, arch)(**kwargs)


def model_kwargs(case):
    arch, kwargs = CASES[case]
    kwargs = dict(weights=None, **kwargs)
    if kwargs.get("include_top", True):
        kwargs["classifier_activation"] = None
    return arch, kwargs


def sample(case, seed):
    """A batch in the range the model expects: [0, 255] with built-in preprocessing."""
    _, kwargs = CASES[case]
    raw = not kwargs.get("include_preprocessing", True) or CASES[case][0].startswith("NAS")
    low, high = (-1.0, 1.0) if raw else (0.0, 255.0)
    rng = np.random.default_rng(seed)
    return rng.uniform(low, high, (2,) + kwargs["input_shape"]).astype("float32")


def layer_list(model):
    """(name, class) of the layers: tensor operators (`x + 3.0`) are operations, not layers,
    in keratron as in Keras 3."""
    return [(layer.name, type(layer).__name__) for layer in model.layers]


def assert_same_architecture(model, reference):
    assert layer_list(model) == layer_list(reference)
    # The tensor operators sit where Keras has its operations, under the same auto-names.
    import keras

    assert [op.name for op in model.operations] == [op.name for op in reference.operations]
    assert [isinstance(op, TensorOpLayer) for op in model.operations] == [
        not isinstance(op, keras.layers.Layer) for op in reference.operations
    ]
    assert [tuple(w.shape) for w in model.weights] == [tuple(w.shape) for w in reference.weights]
    assert len(model.trainable_weights) == len(reference.trainable_weights)
    assert model.count_params() == reference.count_params()
    assert model.name == reference.name
    assert model.input_shape == reference.input_shape
    assert model.output_shape == reference.output_shape


def _cases():
    for case in CASES:
        marks = [pytest.mark.interop] + ([pytest.mark.slow] if case in SLOW else [])
        yield pytest.param(case, marks=marks, id=case)


@pytest.mark.parametrize("case", list(_cases()))
def test_matches_keras(case, tmp_path):
    keras = require("keras")
    arch, kwargs = model_kwargs(case)
    keras.backend.clear_session()
    keratron.backend.clear_session()
    reference = build_keras(keras, arch, **kwargs)
    model = getattr(keratron.applications, arch)(**kwargs)
    assert_same_architecture(model, reference)

    seed = list(CASES).index(case)
    values = randomize(reference, seed)
    x = sample(case, seed)
    ref = keras_forward(reference, x)

    # Directly, independent of any file format.
    model.set_weights(reference.get_weights())
    assert_close(model(x, training=False).numpy(), ref)

    # Keras's tf.keras-layout .h5 file, loaded by layer order.
    zero_weights(model)
    legacy = tmp_path / "weights.h5"
    save_legacy_h5(reference, legacy)
    model.load_weights(str(legacy))
    assert_same_weights(model, values)
    assert_close(model(x, training=False).numpy(), ref)

    # Keras 3's own .weights.h5 layout (nested Sequential blocks in ConvNeXt included).
    zero_weights(model)
    keras3 = tmp_path / "model.weights.h5"
    reference.save_weights(str(keras3))
    model.load_weights(str(keras3))
    assert_same_weights(model, values)


# Run in a child process: TensorFlow must not share a process with Triton (LLVM), which the
# torch backend of Keras loads (hence KERAS_BACKEND=tensorflow there too). It builds the
# tf.keras model with random weights and saves them with tf.keras's own `save_weights` (the
# published files' layout), with its predictions.
TF_KERAS_CHILD = """
import sys
import numpy as np
import tf_keras

arch, kwargs, out = sys.argv[1], eval(sys.argv[2]), sys.argv[3]
model = getattr(tf_keras.applications, arch)(**kwargs)
rng = np.random.default_rng(7)
values = []
for v in model.weights:
    shape = tuple(v.shape)
    if "moving_variance" in v.name or "gamma" in v.name:
        values.append(rng.uniform(0.5, 1.5, shape))
    elif "kernel" in v.name:
        fan_in = np.prod(shape[:2]) if "depthwise" in v.name else np.prod(shape[:-1])
        values.append(rng.normal(size=shape) * np.sqrt(2.0 / fan_in))
    else:
        values.append(rng.normal(0.0, 0.2, shape))
model.set_weights([w.astype("float32") for w in values])
model.save_weights(out + "/tf_keras.h5")
x = rng.uniform(float(sys.argv[4]), float(sys.argv[5]), (2,) + kwargs["input_shape"])
x = x.astype("float32")
np.savez(out + "/io.npz", x=x, y=model.predict(x, verbose=0), *model.get_weights())
"""


@pytest.mark.interop
@pytest.mark.parametrize(
    "arch,kwargs,low",
    [
        pytest.param("MobileNetV3Small", dict(alpha=0.75, input_shape=(32, 32, 3)), 0, id="v3"),
        pytest.param(
            "ConvNeXtTiny", dict(input_shape=(32, 32, 3)), 0, id="convnext", marks=pytest.mark.slow
        ),
        pytest.param(
            "NASNetMobile", dict(input_shape=(32, 32, 3)), -1, id="nasnet", marks=pytest.mark.slow
        ),
    ],
)
def test_matches_tf_keras_h5(arch, kwargs, low, tmp_path):
    """tf.keras 2, which wrote the published files, writes their layout natively."""
    import importlib.util
    import os
    import subprocess
    import sys

    if importlib.util.find_spec("tf_keras") is None:
        require("tf_keras")  # skips, or fails on CI; never imported in this process

    kwargs = dict(weights=None, classifier_activation=None, **kwargs)
    high = 255 if low == 0 else 1
    env = dict(
        os.environ, KERAS_BACKEND="tensorflow", TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES=""
    )
    args = [arch, repr(kwargs), str(tmp_path), str(low), str(high)]
    subprocess.run([sys.executable, "-c", TF_KERAS_CHILD, *args], env=env, check=True, timeout=300)
    saved = np.load(tmp_path / "io.npz")
    values = [saved[f"arr_{i}"] for i in range(len(saved.files) - 2)]
    model = getattr(keratron.applications, arch)(**kwargs)
    assert [tuple(w.shape) for w in model.weights] == [w.shape for w in values]
    model.load_weights(str(tmp_path / "tf_keras.h5"))
    assert_same_weights(model, values)
    assert_close(model(saved["x"], training=False).numpy(), saved["y"])
    assert_close(model.predict(saved["x"], verbose=0), saved["y"])  # the compiled plan too


def test_compiled_predict_matches_eager_on_a_nasnet_cell():
    """`predict` (the compiled plan) gives the eager outputs, which match Keras and tf.keras,
    on NASNet's stem and first reduction cell (51 layers), where a BatchNormalization's
    output is read both through a relu and directly."""
    keratron.backend.clear_session()
    inputs = keratron.Input((32, 32, 3))
    x = keratron.layers.Conv2D(32, 3, strides=2, use_bias=False)(inputs)
    x = keratron.layers.BatchNormalization()(x)
    outputs, _ = nasnet._reduction_a_cell(x, None, 11, block_id="t")
    model = keratron.Model(inputs, outputs)
    rng = np.random.default_rng(0)
    values = []
    for w in model.weights:
        shape = tuple(w.shape)
        fan_in = np.prod(shape[:2] if "depthwise" in w.name else shape[:-1])
        scale = np.sqrt(2.0 / fan_in) if len(shape) > 1 else None
        value = rng.normal(size=shape) * scale if scale else rng.uniform(0.5, 1.5, shape)
        values.append(value.astype("float32"))
    model.set_weights(values)
    x = rng.uniform(-1, 1, (2, 32, 32, 3)).astype("float32")
    assert_close(model.predict(x, verbose=0), model(x, training=False).numpy())


# ------------------------------------------------------------------- full-size models


@pytest.mark.interop
@pytest.mark.parametrize(
    "arch,kwargs",
    [
        ("MobileNetV3Small", {}),
        ("MobileNetV3Large", {}),
        ("MobileNetV3Small", dict(minimalistic=True, alpha=1.5)),
        ("MobileNetV3Large", dict(minimalistic=True, include_top=False, pooling="max")),
    ],
)
def test_mobilenet_v3_full_size(arch, kwargs):
    keras = require("keras")
    keras.backend.clear_session()
    keratron.backend.clear_session()
    reference = getattr(keras.applications, arch)(weights=None, **kwargs)
    model = getattr(keratron.applications, arch)(weights=None, **kwargs)
    assert_same_architecture(model, reference)


# (params, non-trainable params, layers, weights, sha256 of the layer names joined by "\n",
# first 16 hex digits) of Keras 3.15.1 on its torch backend, from a fresh session:
#   m = keras.applications.<arch>(weights=None)
#   (m.count_params(), sum(prod(w.shape) for w in m.non_trainable_weights), len(m.layers),
#    len(m.weights), sha256("\n".join(l.name for l in m.layers)).hexdigest()[:16])
KERAS_FULL_SIZE = {
    "ConvNeXtSmall": (50_223_688, 0, 261, 344, "dfd1f42dd0d10c15"),
    "ConvNeXtBase": (88_591_464, 0, 261, 344, "a37bfac5c69a84dc"),
    "ConvNeXtLarge": (197_767_336, 0, 261, 344, "1aa56b6c023a9d98"),
    "ConvNeXtXLarge": (350_196_968, 0, 261, 344, "6913f5c410f2b3fe"),
    "NASNetLarge": (88_949_818, 196_668, 1041, 1546, "430d5cc571d5d878"),
}


@pytest.mark.slow
@pytest.mark.parametrize("arch", list(KERAS_FULL_SIZE))
def test_full_size_matches_recorded_keras(arch):
    keratron.backend.clear_session()
    model = getattr(keratron.applications, arch)(weights=None)
    frozen = sum(int(np.prod(w.shape)) for w in model.non_trainable_weights)
    names = [name for name, _ in layer_list(model)]
    names[0] = "input_layer"  # the name Keras's fresh session gives the input
    digest = hashlib.sha256("\n".join(names).encode()).hexdigest()[:16]
    got = (model.count_params(), frozen, len(names), len(model.weights), digest)
    assert got == KERAS_FULL_SIZE[arch]
    default = 331 if arch == "NASNetLarge" else 224
    assert model.input_shape == (None, default, default, 3)
    assert model.output_shape == (None, 1000)


# ------------------------------------------------------------------- ConvNeXt specifics


@pytest.mark.interop
def test_convnext_general_builder_with_stochastic_depth(tmp_path):
    """Keras's general builder with a drop-path schedule: StochasticDepth layers where the rate
    is positive, the identity Activation where it is 0, and equal inference outputs."""
    keras = require("keras")
    from keras.src.applications import convnext as keras_convnext

    kwargs = dict(
        depths=[1, 2, 1, 1],
        projection_dims=[8, 16, 24, 32],
        drop_path_rate=0.3,
        layer_scale_init_value=0.5,
        name="tinynet",
        weights=None,
        classifier_activation=None,
        input_shape=(32, 32, 3),
        weights_name="convnext_tiny",
    )
    keras.backend.clear_session()
    keratron.backend.clear_session()
    reference = keras_convnext.ConvNeXt(**kwargs)
    model = convnext._convnext(**kwargs)
    assert_same_architecture(model, reference)
    names = [name for name, _ in layer_list(model)]
    assert "tinynet_stage_0_block_0_identity" in names
    assert "tinynet_stage_3_block_0_stochastic_depth" in names
    layer = model.get_layer("tinynet_stage_3_block_0_stochastic_depth")
    assert layer.drop_path_rate == pytest.approx(0.3)
    values = randomize(reference, 31)
    x = np.random.default_rng(31).uniform(0, 255, (2, 32, 32, 3)).astype("float32")
    ref = keras_forward(reference, x)
    model.set_weights(reference.get_weights())
    assert_close(model(x, training=False).numpy(), ref)
    # Both file layouts, the nested Sequential stem and downsampling blocks included.
    for path in (tmp_path / "weights.h5", tmp_path / "model.weights.h5"):
        if path.name == "weights.h5":
            save_legacy_h5(reference, path)
        else:
            reference.save_weights(str(path))
        zero_weights(model)
        model.load_weights(str(path))
        assert_same_weights(model, values)
    assert_close(model(x, training=False).numpy(), ref)
    # Training drops whole residual branches of some samples: outputs change, stay finite.
    trained = model(x, training=True).numpy()
    assert np.isfinite(trained).all()


@pytest.mark.interop
def test_nasnet_general_builder(tmp_path):
    """Keras's NASNet builder with one cell per stage and narrow filters: the cell wiring,
    names and outputs of the two NASNet models at a fraction of their build time."""
    keras = require("keras")
    from keras.src.applications import nasnet as keras_nasnet

    kwargs = dict(
        penultimate_filters=96,
        num_blocks=1,
        stem_block_filters=8,
        skip_reduction=False,
        filter_multiplier=2,
        include_top=True,
        weights=None,
        input_tensor=None,
        pooling=None,
        classes=10,
        default_size=224,
        classifier_activation=None,
        name="nasnet_small",
    )
    keras.backend.clear_session()
    keratron.backend.clear_session()
    reference = keras_nasnet.NASNet((32, 32, 3), **kwargs)
    model = nasnet._nasnet((32, 32, 3), who="NASNet", **kwargs)
    assert_same_architecture(model, reference)
    values = randomize(reference, 37)
    x = np.random.default_rng(37).uniform(-1, 1, (2, 32, 32, 3)).astype("float32")
    ref = keras_forward(reference, x)
    path = tmp_path / "weights.h5"
    save_legacy_h5(reference, path)
    model.load_weights(str(path))
    assert_same_weights(model, values)
    assert_close(model(x, training=False).numpy(), ref)


def test_convnext_input_tensor_and_channels():
    source = keratron.Input((40, 40, 3))
    model = convnext.ConvNeXtTiny(input_tensor=source, weights=None, include_top=False)
    assert model.inputs[0] is source
    assert model.output_shape == (None, 1, 1, 768)
    # The ImageNet normalization only applies to 3 channels.
    gray = convnext.ConvNeXtTiny(weights=None, include_top=False, input_shape=(32, 32, 1))
    assert not any(isinstance(la, keratron.layers.Normalization) for la in gray.layers)


# ------------------------------------------------------------------- argument rules


def _input_tensor(shape):
    return keratron.Input(shape)


ERRORS = [
    ("MobileNetV3Small", dict(weights="no/such/file.h5"), "weights="),
    ("MobileNetV3Small", dict(classes=10), "classes=10"),
    ("MobileNetV3Small", dict(alpha=0.5), "alpha=0.5"),
    ("MobileNetV3Large", dict(alpha=0.75, minimalistic=True), "alpha=0.75"),
    ("MobileNetV3Small", dict(input_shape=(31, 64, 3), weights=None), "32x32"),
    ("MobileNetV3Large", dict(classifier_activation="relu"), "classifier_activation='relu'"),
    (
        "MobileNetV3Small",
        dict(input_tensor=np.zeros((1, 96, 96, 3)), input_shape=(96, 96, 3), weights=None),
        "symbolic",
    ),
    (
        "MobileNetV3Small",
        dict(input_tensor=(96, 64, 3), input_shape=(96, 96, 3), weights=None),
        r"input_shape\[1\]",
    ),
    ("ConvNeXtTiny", dict(weights=3), "weights=3"),
    ("ConvNeXtSmall", dict(classes=10), "classes=10"),
    ("ConvNeXtBase", dict(input_shape=(100, 100, 3)), r"\(224, 224, 3\)"),
    ("ConvNeXtTiny", dict(input_shape=(31, 32, 3), include_top=False, weights=None), "32x32"),
    ("ConvNeXtTiny", dict(input_shape=(None, None, 3), weights=None), "static `input_shape`"),
    ("ConvNeXtLarge", dict(name="mynet"), "name='mynet'"),
    ("ConvNeXtXLarge", dict(classifier_activation="tanh"), "classifier_activation"),
    ("NASNetMobile", dict(weights="nofile"), "weights="),
    ("NASNetLarge", dict(classes=5), "classes=5"),
    ("NASNetMobile", dict(input_shape=(None, None, 3), include_top=False), "static"),
    ("NASNetLarge", dict(input_shape=(224, 224, 3)), r"\(331, 331, 3\)"),
    ("NASNetMobile", dict(input_shape=(30, 32, 3), include_top=False, weights=None), "32x32"),
    ("NASNetLarge", dict(input_shape=(64, 64, 1), include_top=False), "3 channels"),
    ("NASNetMobile", dict(classifier_activation="relu"), "classifier_activation"),
]


def _resolve(kwargs):
    kwargs = dict(kwargs)
    if isinstance(kwargs.get("input_tensor"), tuple):
        kwargs["input_tensor"] = _input_tensor(kwargs["input_tensor"])
    return kwargs


@pytest.mark.parametrize("arch,kwargs,match", ERRORS)
def test_argument_errors(arch, kwargs, match, monkeypatch):
    def no_download(*args, **kwargs):
        raise AssertionError("the arguments should have been rejected before loading weights")

    monkeypatch.setattr(imagenet_utils, "load_model_weights", no_download)
    with pytest.raises(ValueError, match=match):
        getattr(keratron.applications, arch)(**_resolve(kwargs))


# Keras rejects these before building anything (the others only after building the model).
KERAS_EARLY = [e for e in ERRORS if e[0] != "ConvNeXtLarge" and "classifier_activation" not in e[1]]


@pytest.mark.interop
@pytest.mark.parametrize("arch,kwargs,match", KERAS_EARLY)
def test_keras_rejects_the_same_arguments(arch, kwargs, match, monkeypatch):
    keras = require("keras")
    from keras.src.utils import file_utils

    def no_download(*args, **kwargs):
        raise AssertionError("Keras accepted the arguments")

    monkeypatch.setattr(file_utils, "get_file", no_download)
    kwargs = dict(kwargs)
    if isinstance(kwargs.get("input_tensor"), tuple):
        kwargs["input_tensor"] = keras.Input(kwargs["input_tensor"])
    with pytest.raises(ValueError):
        build_keras(keras, arch, **kwargs)


@pytest.mark.parametrize("arch", ["ConvNeXtTiny", "NASNetMobile"])
def test_channels_first_is_rejected(arch):
    keratron.config.set_image_data_format("channels_first")
    try:
        with pytest.raises(ValueError, match="channels_first"):
            getattr(keratron.applications, arch)(weights=None, input_shape=(3, 32, 32))
    finally:
        keratron.config.set_image_data_format("channels_last")


def test_mobilenet_v3_any_input_size_and_input_tensor():
    model = mobilenet_v3.MobileNetV3Small(weights=None, alpha=0.75, classes=7)
    assert model.input_shape == (None, None, None, 3) and model.output_shape == (None, 7)
    for shape in [(1, 32, 40, 3), (2, 57, 33, 3)]:
        out = model(np.full(shape, 128.0, "float32"), training=False).numpy()
        np.testing.assert_allclose(out.sum(axis=1), 1.0, rtol=1e-5)
    source = keratron.Input((48, 48, 3))
    x = keratron.layers.Rescaling(0.5)(source)
    features = mobilenet_v3.MobileNetV3Large(
        input_tensor=x, weights=None, include_top=False, minimalistic=True
    )
    assert features.inputs[0] is source
    assert features.output_shape == (None, 2, 2, 960)
    channels_first = mobilenet_v3.MobileNetV3Small  # the layout is supported, as in Keras
    keratron.config.set_image_data_format("channels_first")
    try:
        cf = channels_first(weights=None, input_shape=(3, 32, 32), include_top=False)
    finally:
        keratron.config.set_image_data_format("channels_last")
    assert cf.output_shape == (None, 576, 1, 1)


# ------------------------------------------------------------------- weight files


IMAGENET_FILES = [
    (
        "MobileNetV3Small",
        dict(alpha=0.75),
        "weights_mobilenet_v3_small_224_0.75_float.h5",
        mobilenet_v3.BASE_WEIGHT_PATH,
        "cb65d4e5be93758266aa0a7f2c6708b7",
    ),
    (
        "MobileNetV3Large",
        dict(minimalistic=True, include_top=False, input_shape=(224, 224, 3)),
        "weights_mobilenet_v3_large_minimalistic_224_1.0_float_no_top_v2.h5",
        mobilenet_v3.BASE_WEIGHT_PATH,
        "ec5221f64a2f6d1ef965a614bdae7973",
    ),
    (
        "ConvNeXtTiny",
        dict(include_top=False, input_shape=(32, 32, 3)),
        "convnext_tiny_notop.h5",
        convnext.BASE_WEIGHTS_PATH,
        "d547c096cabd03329d7be5562c5e14798aa39ed24b474157cef5e85ab9e49ef1",
    ),
]


@pytest.mark.parametrize("arch,kwargs,file_name,base,file_hash", IMAGENET_FILES)
def test_imagenet_weight_files(arch, kwargs, file_name, base, file_hash, monkeypatch):
    calls = []
    monkeypatch.setattr(imagenet_utils, "load_model_weights", lambda *a: calls.append(a))
    model = getattr(keratron.applications, arch)(weights="imagenet", **kwargs)
    assert calls == [(model, "imagenet", file_name, base + file_name, file_hash)]


@pytest.mark.slow
@pytest.mark.parametrize(
    "arch,include_top,file_name,url_name,file_hash",
    [
        (
            "NASNetMobile",
            True,
            "nasnet_mobile.h5",
            "NASNet-mobile.h5",
            "020fb642bf7360b370c678b08e0adf61",
        ),
        (
            "NASNetLarge",
            False,
            "nasnet_large_no_top.h5",
            "NASNet-large-no-top.h5",
            "d81d89dc07e6e56530c4e77faddd61b5",
        ),
    ],
)
def test_nasnet_imagenet_weight_files(
    arch, include_top, file_name, url_name, file_hash, monkeypatch
):
    calls = []
    monkeypatch.setattr(imagenet_utils, "load_model_weights", lambda *a: calls.append(a))
    kwargs = {} if include_top else dict(input_shape=(32, 32, 3))
    model = getattr(nasnet, arch)(weights="imagenet", include_top=include_top, **kwargs)
    assert calls == [(model, "imagenet", file_name, nasnet.BASE_WEIGHTS_PATH + url_name, file_hash)]


@pytest.mark.interop
def test_weight_tables_match_keras_sources():
    require("keras")
    from keras.src.applications import convnext as k_convnext
    from keras.src.applications import mobilenet_v3 as k_mobilenet_v3
    from keras.src.applications import nasnet as k_nasnet

    assert convnext.WEIGHTS_HASHES == k_convnext.WEIGHTS_HASHES
    assert convnext.BASE_WEIGHTS_PATH == k_convnext.BASE_WEIGHTS_PATH
    assert convnext.MODEL_CONFIGS == k_convnext.MODEL_CONFIGS
    assert mobilenet_v3.WEIGHTS_HASHES == k_mobilenet_v3.WEIGHTS_HASHES
    assert mobilenet_v3.BASE_WEIGHT_PATH == k_mobilenet_v3.BASE_WEIGHT_PATH
    # Keras writes NASNet's cache names and md5 sums inline in its builder.
    source = inspect.getsource(k_nasnet.NASNet)
    for (size, top), (file_name, url, digest) in nasnet.WEIGHT_FILES.items():
        assert f'"{file_name}"' in source and f'"{digest}"' in source
        keras_url = {
            (224, True): k_nasnet.NASNET_MOBILE_WEIGHT_PATH,
            (224, False): k_nasnet.NASNET_MOBILE_WEIGHT_PATH_NO_TOP,
            (331, True): k_nasnet.NASNET_LARGE_WEIGHT_PATH,
            (331, False): k_nasnet.NASNET_LARGE_WEIGHT_PATH_NO_TOP,
        }[(size, top)]
        assert url == keras_url


@pytest.mark.interop
def test_imagenet_weights_download_and_cache(weight_server, tmp_path, monkeypatch):  # noqa: F811
    keras = require("keras")
    root, base_url, requests = weight_server
    kwargs = dict(include_top=False, input_shape=(32, 32, 3))
    file_name = "weights_mobilenet_v3_small_224_1.0_float_no_top_v2.h5"
    keras.backend.clear_session()
    reference = keras.applications.MobileNetV3Small(weights=None, **kwargs)
    values = randomize(reference, 41)
    save_legacy_h5(reference, root / file_name)
    digest = hashlib.md5((root / file_name).read_bytes()).hexdigest()  # Keras lists md5 sums

    home = tmp_path / "keras_home"
    monkeypatch.setenv("KERAS_HOME", str(home))
    monkeypatch.setattr(mobilenet_v3, "BASE_WEIGHT_PATH", base_url)
    monkeypatch.setattr(mobilenet_v3, "WEIGHTS_HASHES", {"small_224_1.0_float": ("", digest)})
    with pytest.warns(UserWarning, match=r"Weights for input shape \(224, 224\)"):
        model = mobilenet_v3.MobileNetV3Small(weights="imagenet", **kwargs)
    assert_same_weights(model, values)
    assert requests == ["/" + file_name]
    assert (home / "models" / file_name).read_bytes() == (root / file_name).read_bytes()
    with pytest.warns(UserWarning):
        again = mobilenet_v3.MobileNetV3Small(weights="imagenet", **kwargs)
    assert_same_weights(again, values)
    assert requests == ["/" + file_name]  # served from the cache


@pytest.mark.interop
@pytest.mark.slow  # ConvNeXtTiny built by Keras and keratron, 28M weights through a file
def test_convnext_imagenet_weights_over_http(weight_server, tmp_path, monkeypatch):  # noqa: F811
    """ConvNeXt's weights do not depend on the input size: Keras's 32x32 top model's file
    serves the 224x224 top model that `weights="imagenet"` builds."""
    keras = require("keras")
    root, base_url, requests = weight_server
    keras.backend.clear_session()
    reference = keras.applications.ConvNeXtTiny(weights=None, input_shape=(32, 32, 3))
    values = randomize(reference, 43)
    save_legacy_h5(reference, root / "convnext_tiny.h5")
    digest = hashlib.sha256((root / "convnext_tiny.h5").read_bytes()).hexdigest()
    monkeypatch.setenv("KERAS_HOME", str(tmp_path / "keras_home"))
    monkeypatch.setattr(convnext, "BASE_WEIGHTS_PATH", base_url)
    monkeypatch.setattr(convnext, "WEIGHTS_HASHES", {"convnext_tiny": (digest, "")})
    model = convnext.ConvNeXtTiny(weights="imagenet")
    assert model.input_shape == (None, 224, 224, 3)
    assert_same_weights(model, values)
    assert requests == ["/convnext_tiny.h5"]


# ------------------------------------------------------------------- preprocessing, decoding


@pytest.mark.interop
@pytest.mark.parametrize("module", [convnext, mobilenet_v3, nasnet], ids=lambda m: m.__name__)
def test_preprocess_and_decode_match_keras(module, monkeypatch):
    keras = require("keras")
    from keras.src.applications import imagenet_utils as keras_imagenet_utils

    with open(imagenet_utils.CLASS_INDEX_PATH, encoding="utf-8") as f:
        monkeypatch.setattr(keras_imagenet_utils, "CLASS_INDEX", json.load(f))  # no download
    theirs = getattr(keras.applications, module.__name__.rsplit(".", 1)[-1])
    rng = np.random.default_rng(53)
    for shape, data_format in [((2, 5, 4, 3), None), ((3, 6, 2), "channels_first")]:
        x = rng.uniform(0, 255, shape).astype("float32")
        want = np.asarray(theirs.preprocess_input(x.copy(), data_format=data_format))
        got = np.asarray(module.preprocess_input(x.copy(), data_format=data_format))
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    preds = rng.uniform(0, 1, (3, 1000)).astype("float32")
    assert module.decode_predictions(preds, top=4) == theirs.decode_predictions(preds, top=4)


def test_passthrough_preprocessing_returns_its_input():
    x = np.arange(12, dtype="float32").reshape(1, 2, 2, 3)
    assert convnext.preprocess_input(x) is x
    assert mobilenet_v3.preprocess_input(x) is x
    np.testing.assert_allclose(nasnet.preprocess_input(x.copy()), x / 127.5 - 1.0, rtol=1e-6)


@pytest.mark.parametrize(
    "module",
    [convnext, mobilenet_v3, pytest.param(nasnet, marks=pytest.mark.slow)],
    ids=lambda m: m.__name__,
)
def test_docstring_examples(module):
    import doctest

    globs = {"np": np, "keratron": keratron, **vars(module)}
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
    tests = doctest.DocTestFinder(exclude_empty=True).find(module, module.__name__, globs=globs)
    assert sum(len(t.examples) for t in tests) > 0
    for test in tests:
        runner.run(test)
    assert runner.summarize(verbose=False).failed == 0, module.__name__
