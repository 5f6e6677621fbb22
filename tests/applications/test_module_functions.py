"""`preprocess_input` and `decode_predictions` of the application modules against Keras's."""

import json

import numpy as np
import pytest

import keratron
from keratron.applications import imagenet_utils
from tests.conftest import require

MODULES = [
    "vgg16",
    "vgg19",
    "resnet",
    "resnet50",
    "resnet_v2",
    "xception",
    "densenet",
    "inception_resnet_v2",
]


@pytest.mark.interop
@pytest.mark.parametrize("module", MODULES)
@pytest.mark.parametrize("data_format", ["channels_last", "channels_first"])
def test_preprocess_input_matches_keras(module, data_format, rng):
    keras = require("keras")
    reference = getattr(keras.applications, module).preprocess_input
    ours = getattr(keratron.applications, module).preprocess_input
    for shape in [(2, 5, 4, 3), (5, 4, 3)]:
        if data_format == "channels_first":
            shape = shape[:-3] + (3,) + shape[-3:-1]
        x = rng.uniform(0, 255, shape).astype("float32")
        ref = reference(x.copy(), data_format=data_format)
        np.testing.assert_allclose(ours(x.copy(), data_format=data_format), ref, atol=1e-5)
        tensor = ours(keratron.convert_to_tensor(x), data_format=data_format)
        np.testing.assert_allclose(tensor.numpy(), ref, rtol=1e-5, atol=1e-4)


@pytest.mark.interop
@pytest.mark.parametrize("module", MODULES)
@pytest.mark.parametrize("rows,top", [(2, 3), (3, 4)])
def test_decode_predictions_matches_keras(module, rows, top, rng, monkeypatch):
    keras = require("keras")
    from keras.src.applications import imagenet_utils as kiu

    with open(imagenet_utils.CLASS_INDEX_PATH, encoding="utf-8") as f:
        monkeypatch.setattr(kiu, "CLASS_INDEX", json.load(f))  # no download in Keras
    preds = rng.uniform(size=(rows, 1000)).astype("float32")
    ref = getattr(keras.applications, module).decode_predictions(preds, top=top)
    out = getattr(keratron.applications, module).decode_predictions(preds, top=top)
    assert [[e[:2] for e in r] for r in out] == [[e[:2] for e in r] for r in ref]
    assert [[float(e[2]) for e in r] for r in out] == [[float(e[2]) for e in r] for r in ref]
