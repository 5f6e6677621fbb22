"""`Layer.add_weight`'s positional forms: Keras 3's `(shape, initializer, dtype)` and tf.keras
2's `(name, shape, dtype, initializer)`, which tf.keras layers in the wild call."""

import numpy as np
import pytest

import keratron
from tests.conftest import require


def _weight(layer_base, *args, **kwargs):
    class Holder(layer_base):
        def build(self, input_shape):
            self.w = self.add_weight(*args, **kwargs)

    layer = Holder()
    layer.build((None, 2))
    w = layer.w
    return (
        w.name.split("/")[-1].split(":")[0],
        tuple(w.shape),
        np.asarray(w.numpy()).dtype,
        w.numpy(),
    )


@pytest.mark.interop
@pytest.mark.parametrize(
    "args, kwargs",
    [
        (("kernel",), {"shape": (2, 3)}),
        (("kernel", (2, 3)), {"initializer": "ones"}),
        (("kernel", (2, 3), "float64"), {"initializer": "ones"}),
        (("kernel", (3,), "float32", "zeros"), {"trainable": False}),
    ],
)
def test_a_name_first_is_tf_keras_2s_order(args, kwargs):
    keras2 = require("tf_keras")
    got = _weight(keratron.layers.Layer, *args, **kwargs)
    want = _weight(keras2.layers.Layer, *args, **kwargs)
    assert got[:3] == want[:3]
    if kwargs.get("initializer") or len(args) == 4:
        np.testing.assert_array_equal(got[3], want[3])


@pytest.mark.interop
@pytest.mark.parametrize(
    "args, kwargs",
    [
        (((2, 3),), {"name": "w"}),
        (((2, 3), "ones"), {"name": "w"}),
        (((4,), "zeros", "float64"), {"name": "w"}),
    ],
)
def test_otherwise_keras_3s_order(args, kwargs):
    keras = require("keras")
    got = _weight(keratron.layers.Layer, *args, **kwargs)
    want = _weight(keras.layers.Layer, *args, **kwargs)
    assert got[:3] == want[:3]
    if len(args) > 1:  # an initializer given: the same values (else random draws)
        np.testing.assert_array_equal(got[3], want[3])


def test_positional_errors_name_the_argument():
    with pytest.raises(TypeError, match="`shape` was passed both"):
        _weight(keratron.layers.Layer, (2,), shape=(3,))
    with pytest.raises(TypeError, match="`name` was passed both"):
        _weight(keratron.layers.Layer, "kernel", name="other")
    with pytest.raises(TypeError, match="at most 3 positional"):
        _weight(keratron.layers.Layer, (2,), "zeros", "float32", True)
