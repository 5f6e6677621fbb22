"""Masks while a functional model is built: a layer's `call(inputs, mask=None)` receives the
mask of its input, and KerasTensors carry the masks that layers compute, as in Keras 3 (the
masking and padding guide's TemporalSoftmax); checked against Keras on the torch backend."""

import numpy as np
import pytest

import keratron
from tests.conftest import require


def _build(k, seen):
    class TemporalSoftmax(k.layers.Layer):
        def call(self, inputs, mask=None):
            seen.append(None if mask is None else len(mask.shape))
            float_mask = k.ops.expand_dims(k.ops.cast(mask, "float32"), -1)
            inputs_exp = k.ops.exp(inputs) * float_mask
            inputs_sum = k.ops.sum(inputs_exp * float_mask, axis=-1, keepdims=True)
            return inputs_exp / inputs_sum

    class PositiveMask(k.layers.Layer):
        """Passes its input through and also masks the steps whose first feature is <= 0."""

        def call(self, inputs, mask=None):
            return inputs

        def compute_mask(self, inputs, mask=None):
            return k.ops.logical_and(mask, k.ops.greater(inputs[..., 0], 0.0))

    inputs = k.Input(shape=(None,), dtype="int32")
    embedded = k.layers.Embedding(input_dim=10, output_dim=4, mask_zero=True)(inputs)
    dense = k.layers.Dense(1)(embedded)
    halved = PositiveMask()(dense)
    outputs = TemporalSoftmax()(halved)
    return k.Model(inputs, outputs), (embedded, dense, halved, outputs)


def _mask_spec(t):
    m = getattr(t, "_keras_mask", None)
    return None if m is None else (tuple(m.shape), str(m.dtype))


@pytest.mark.interop
def test_mask_reaches_call_and_keras_tensors_while_building_as_in_keras():
    keras = require("keras")
    seen_ours, seen_keras = [], []
    ours, ours_tensors = _build(keratron, seen_ours)
    theirs, keras_tensors = _build(keras, seen_keras)
    assert seen_ours[:1] == seen_keras[:1] == [2]
    assert [_mask_spec(t) for t in ours_tensors] == [_mask_spec(t) for t in keras_tensors]
    assert _mask_spec(ours_tensors[0]) == ((None, None), "bool")

    ours.set_weights([w.numpy() for w in theirs.weights])
    x = np.array([[1, 2, 0, 0, 3, 4], [5, 0, 6, 7, 0, 0]], dtype="int32")
    expected = keras.ops.convert_to_numpy(theirs(x, training=False))
    np.testing.assert_allclose(ours(x, training=False).numpy(), expected, rtol=1e-5)
    np.testing.assert_allclose(ours.predict(x, verbose=0), expected, rtol=1e-5)


def test_building_records_no_mask_node_and_keeps_one_input():
    seen = []
    model, (embedded, *_rest) = _build(keratron, seen)
    assert [type(layer).__name__ for layer in model.layers] == [
        "InputLayer",
        "Embedding",
        "Dense",
        "PositiveMask",
        "TemporalSoftmax",
    ]
    assert getattr(embedded._keras_mask, "_keras_history", None) is None
    config = model.get_config()
    assert all(
        node["kwargs"] == {} for layer in config["layers"] for node in layer["inbound_nodes"]
    )
