"""bfloat16 weights in Keras 3's files: Keras stores them as 2-byte opaque data marked
`dtype="bfloat16"`; keratron reads them bit for bit, and Keras reads what keratron writes."""

import numpy as np
import pytest

import keratron as kt
from tests.conftest import require

pytestmark = pytest.mark.interop


def _dense(K):
    return K.Sequential([K.Input((3,)), K.layers.Dense(2, dtype="bfloat16", name="d")])


def _floats(model):
    return [np.asarray(w, dtype=np.float32) for w in model.get_weights()]


@pytest.mark.parametrize("filename", ["m.weights.h5", "m.keras"])
def test_keras_bfloat16_weights_load(tmp_path, filename):
    keras = require("keras")
    theirs = _dense(keras)
    path = tmp_path / filename
    (theirs.save_weights if filename.endswith(".weights.h5") else theirs.save)(path)
    if filename.endswith(".keras"):
        ours = kt.models.load_model(path)
    else:
        ours = _dense(kt)
        ours.load_weights(path)
    assert [w.dtype for w in ours.weights] == ["bfloat16", "bfloat16"]
    want = [np.asarray(w.numpy().astype("float32")) for w in theirs.weights]
    for got, ref in zip(_floats(ours), want, strict=True):
        np.testing.assert_array_equal(got, ref)


def test_keratron_bfloat16_weights_load_in_keras(tmp_path):
    keras = require("keras")
    ours = _dense(kt)
    ours.save_weights(tmp_path / "m.weights.h5")
    theirs = _dense(keras)
    theirs.load_weights(tmp_path / "m.weights.h5")
    got = [np.asarray(w.numpy().astype("float32")) for w in theirs.weights]
    for a, b in zip(got, _floats(ours), strict=True):
        np.testing.assert_array_equal(a, b)
