"""Rescaling and Normalization (with adapt) against numpy and real Keras."""

import numpy as np
import pytest

import keratron as kt
import keratron.layers  # noqa: F401
from tests.conftest import require
from tests.layers.layer_test import assert_matches_keras, run_layer_test

L = kt.layers
R = np.random.default_rng(21)


def x32(*shape, loc=0.0, scale=1.0):
    return (loc + scale * R.standard_normal(shape)).astype("float32")


@pytest.fixture(scope="module")
def keras():
    return require("keras")


# --------------------------------------------------------------------------------- Rescaling
@pytest.mark.parametrize(
    "kwargs", [{"scale": 1 / 255.0}, {"scale": 2.0, "offset": -1.0}, {"scale": [0.5, 2.0, 4.0]}]
)
def test_rescaling(keras, kwargs):
    run_layer_test(
        L.Rescaling,
        kwargs,
        input_shape=(2, 4, 3),
        expected_output_shape=(2, 4, 3),
        expected_num_trainable_weights=0,
        supports_masking=True,
    )
    assert_matches_keras("Rescaling", kwargs, x32(2, 4, 3))


def test_rescaling_int_input_and_numpy_scale():
    x = np.array([[0, 255]], "uint8")
    np.testing.assert_allclose(
        L.Rescaling(1 / 127.5, offset=-1)(x).numpy(), [[-1.0, 1.0]], atol=1e-6
    )
    layer = L.Rescaling(np.array([1.0, 2.0]))
    assert layer.get_config()["scale"] == [1.0, 2.0]
    with pytest.raises(TypeError, match="Rescaling.*scale"):
        L.Rescaling("big")


# ----------------------------------------------------------------------------- Normalization
def test_normalization_weights_match_keras(keras):
    layer = run_layer_test(
        L.Normalization,
        {},
        input_shape=(4, 3),
        expected_output_shape=(4, 3),
        expected_num_trainable_weights=0,
        expected_num_non_trainable_weights=3,
        expected_weight_shapes=[(3,), (3,), ()],
    )
    k = keras.layers.Normalization()
    k.build((None, 3))
    assert (
        [w.name for w in layer.weights]
        == [w.name for w in k.weights]
        == ["mean", "variance", "count"]
    )
    assert [w.dtype for w in layer.weights] == [str(w.dtype) for w in k.weights]
    assert set(layer.get_config()) == set(k.get_config())


@pytest.mark.parametrize("axis", [-1, (1, 2), None, 1])
def test_adapt_numpy_matches_numpy_and_keras(keras, axis):
    data = x32(50, 4, 3, loc=5.0, scale=3.0)
    layer = L.Normalization(axis=axis)
    layer.adapt(data)
    keep = () if axis is None else tuple(a % 3 for a in np.atleast_1d(axis))
    reduce = tuple(d for d in range(3) if d not in keep)
    np.testing.assert_allclose(layer.weights[0].numpy(), data.mean(axis=reduce), rtol=1e-5)
    np.testing.assert_allclose(layer.weights[1].numpy(), data.var(axis=reduce), rtol=1e-5)
    assert int(layer.weights[2].numpy()) == int(np.prod([data.shape[d] for d in reduce]))
    out = layer(data).numpy()
    np.testing.assert_allclose(out.mean(axis=reduce), 0.0, atol=1e-4)
    np.testing.assert_allclose(out.std(axis=reduce), 1.0, atol=1e-4)

    k = keras.layers.Normalization(axis=axis)
    k.adapt(data)
    test = x32(6, 4, 3, loc=5.0, scale=3.0)
    np.testing.assert_allclose(layer(test).numpy(), keras.ops.convert_to_numpy(k(test)), atol=1e-4)


def test_adapt_batched_iterables_equal_full_data():
    data = x32(103, 5, loc=-2.0, scale=4.0)
    full = L.Normalization()
    full.adapt(data)
    batches = [data[i : i + 16] for i in range(0, 103, 16)]
    for source in (
        batches,
        iter(batches),
        ((b, None) for b in batches),
        (kt.convert_to_tensor(b) for b in batches),
    ):
        layer = L.Normalization()
        layer.adapt(source)
        for a, b in zip(layer.get_weights(), full.get_weights()):
            np.testing.assert_allclose(a, b, rtol=1e-5)


def test_adapt_pydataset_and_tensor():
    data = x32(40, 3, loc=1.0)

    class Batches(kt.utils.PyDataset):
        def __len__(self):
            return 4

        def __getitem__(self, i):
            return data[i * 10 : (i + 1) * 10], np.zeros(10)

    layer = L.Normalization()
    layer.adapt(Batches())
    np.testing.assert_allclose(layer.get_weights()[0], data.mean(0), rtol=1e-5)
    t = L.Normalization()
    t.adapt(kt.convert_to_tensor(data))
    np.testing.assert_allclose(t.get_weights()[1], data.var(0), rtol=1e-5)


@pytest.mark.parametrize(
    "kwargs",
    [{"mean": 2.0, "variance": 4.0}, {"mean": [1.0, 2.0, 3.0], "variance": [1.0, 4.0, 9.0]}],
)
@pytest.mark.parametrize("invert", [False, True])
def test_fixed_statistics_match_keras(keras, kwargs, invert):
    kwargs = {**kwargs, "invert": invert}
    layer = run_layer_test(
        L.Normalization, kwargs, input_shape=(4, 3), expected_num_non_trainable_weights=0
    )
    assert layer.weights == []
    assert_matches_keras("Normalization", kwargs, x32(4, 3))
    cfg = layer.get_config()
    assert cfg["mean"] == kwargs["mean"] and cfg["invert"] == invert


def test_invert_undoes_normalization():
    data = x32(30, 2, loc=3.0, scale=2.0)
    norm = L.Normalization()
    norm.adapt(data)
    mean, var, _ = norm.get_weights()
    inv = L.Normalization(mean=mean, variance=var, invert=True)
    np.testing.assert_allclose(inv(norm(data)).numpy(), data, rtol=1e-5, atol=1e-5)


def test_adapted_weights_copy_to_keras(keras):
    data = x32(20, 3, loc=4.0)
    layer = L.Normalization()
    layer.adapt(data)
    k = keras.layers.Normalization()
    k.build((None, 3))
    k.set_weights(layer.get_weights())
    k.finalize_state()
    np.testing.assert_allclose(layer(data).numpy(), keras.ops.convert_to_numpy(k(data)), atol=1e-5)
    # And the other way: set_weights takes effect without any extra step.
    clone = L.Normalization()
    clone.build((None, 3))
    clone.set_weights(layer.get_weights())
    np.testing.assert_allclose(clone(data).numpy(), layer(data).numpy())


def test_normalization_errors():
    with pytest.raises(ValueError, match="both `mean` and `variance`"):
        L.Normalization(mean=1.0)
    with pytest.raises(ValueError, match="same shape"):
        L.Normalization(mean=[1.0, 2.0], variance=[1.0])
    with pytest.raises(ValueError, match="cannot be adapted"):
        L.Normalization(mean=1.0, variance=1.0).adapt(x32(4, 3))
    with pytest.raises(ValueError, match="empty iterable"):
        L.Normalization().adapt([])
    layer = L.Normalization()
    layer.adapt(x32(4, 3))
    with pytest.raises(ValueError, match="incompatible shape"):
        layer.adapt(x32(4, 5))
    with pytest.raises(ValueError, match="axis"):
        L.Normalization(axis=3).build((None, 3))
    with pytest.raises(TypeError, match="adapt"):
        L.Normalization().adapt(3.0)


def test_rescaling_and_normalization_in_compiled_predict():
    # Under tracing the input is data-free; the layers' constants must not follow it there.
    x = np.random.default_rng(0).uniform(0, 255, (2, 3, 4, 3)).astype("float32")
    scale, mean, var = np.array([0.5, 1.0, 2.0]), np.array([1.0, 2.0, 3.0]), np.array([4.0, 1, 9])
    model = kt.Sequential(
        [
            kt.Input((3, 4, 3)),
            kt.layers.Rescaling(list(scale), offset=1.0),
            kt.layers.Normalization(mean=list(mean), variance=list(var)),
        ]
    )
    expected = (x * scale + 1.0 - mean) / np.sqrt(var)
    np.testing.assert_allclose(model.predict(x, verbose=0), expected, rtol=1e-5, atol=1e-4)
    adapted = kt.Sequential([kt.Input((3, 4, 3)), kt.layers.Normalization()])
    adapted.layers[0].adapt(x)
    np.testing.assert_allclose(
        adapted.predict(x, verbose=0),
        (x - x.mean(axis=(0, 1, 2))) / x.std(axis=(0, 1, 2)),
        rtol=1e-4,
        atol=1e-4,
    )
