"""LayerScale and StochasticDepth (ConvNeXt's residual-branch layers): through
`run_layer_test`, against Keras's own classes (`keras.src.applications.convnext`), and their
argument errors."""

import numpy as np
import pytest

import keratron as kt
from keratron.layers.residual_branch import LayerScale, StochasticDepth
from tests.conftest import require
from tests.layers.layer_test import run_layer_test

R = np.random.default_rng(5)


@pytest.fixture(scope="module")
def keras_convnext():
    require("keras")
    from keras.src.applications import convnext

    return convnext


@pytest.mark.parametrize("input_shape", [(3, 4), (2, 5, 3, 4)])
def test_layer_scale_layer_test(input_shape):
    run_layer_test(
        LayerScale,
        {"init_values": 0.5, "projection_dim": 4},
        input_shape=input_shape,
        expected_output_shape=input_shape,
        expected_num_trainable_weights=1,
        expected_num_non_trainable_weights=0,
        expected_weight_shapes=[(4,)],
    )
    fresh = LayerScale(0.5, 4)
    fresh(np.ones((1, 4), "float32"))
    np.testing.assert_array_equal(fresh.gamma.numpy(), np.full((4,), 0.5, "float32"))


@pytest.mark.parametrize("training", [None, False, True])
def test_stochastic_depth_layer_test(training):
    run_layer_test(
        StochasticDepth,
        {"drop_path_rate": 0.25},
        input_shape=(4, 3, 3, 2),
        expected_output_shape=(4, 3, 3, 2),
        expected_num_trainable_weights=0,
        expected_num_non_trainable_weights=0,
        training=training,
    )


@pytest.mark.interop
def test_layer_scale_matches_keras(keras_convnext):
    x = R.standard_normal((2, 3, 3, 6)).astype("float32")
    theirs = keras_convnext.LayerScale(1e-6, 6)
    ours = LayerScale(1e-6, 6)
    theirs(x)
    ours(x)
    np.testing.assert_array_equal(ours.get_weights()[0], theirs.get_weights()[0])
    gamma = R.uniform(0.5, 1.5, (6,)).astype("float32")
    theirs.set_weights([gamma])
    ours.set_weights([gamma])
    np.testing.assert_allclose(
        ours(x).numpy(), np.asarray(theirs(x).detach().cpu()), rtol=1e-6, atol=0
    )
    keys = ("init_values", "projection_dim", "trainable")
    assert {k: ours.get_config()[k] for k in keys} == {k: theirs.get_config()[k] for k in keys}


@pytest.mark.interop
def test_stochastic_depth_matches_keras(keras_convnext):
    """Both are the identity at inference; while training both keep or drop each sample's
    whole branch (Keras's draws are its own, so the comparison is of what each sample gets)."""
    x = R.uniform(1.0, 2.0, (64, 2, 3)).astype("float32")
    theirs = keras_convnext.StochasticDepth(0.25)
    ours = StochasticDepth(0.25)
    for training in (None, False):
        np.testing.assert_array_equal(ours(x, training=training).numpy(), x)
        np.testing.assert_array_equal(np.asarray(theirs(x, training=training).detach()), x)
    for out in (ours(x, training=True).numpy(), np.asarray(theirs(x, training=True).detach())):
        ratio = (out / x).reshape(64, -1)
        # Each sample is scaled by 0 or 1 / keep as a whole.
        assert np.allclose(ratio, ratio[:, :1], atol=1e-6)
        scales = ratio[:, 0]
        assert np.all(np.isclose(scales, 0.0) | np.isclose(scales, 1 / 0.75, rtol=1e-6))
        kept = float((ratio[:, 0] > 0).mean())
        assert 0.5 < kept < 0.95  # 64 samples at keep 0.75
    assert ours.get_config()["drop_path_rate"] == theirs.get_config()["drop_path_rate"]


def test_stochastic_depth_keeps_three_quarters_on_average():
    layer = StochasticDepth(0.25)
    out = layer(np.ones((4000, 1), "float32"), training=True).numpy()
    assert abs(out.mean() - 1.0) < 0.06  # unbiased: kept samples are scaled by 1 / 0.75
    assert abs((out > 0).mean() - 0.75) < 0.03


def test_gradient_through_layer_scale():
    layer = LayerScale(0.5, 3)
    x = kt.ops.convert_to_tensor(R.standard_normal((2, 3)).astype("float32"))
    with kt.GradientTape() as tape:
        tape.watch(x)
        y = kt.ops.sum(layer(x) * 2.0)
    gx, gg = tape.gradient(y, [x, layer.gamma])
    np.testing.assert_allclose(gx.numpy(), np.full((2, 3), 1.0), rtol=1e-6)
    np.testing.assert_allclose(gg.numpy(), 2.0 * x.numpy().sum(axis=0), rtol=1e-6)


@pytest.mark.parametrize(
    "cls,kwargs,error,match",
    [
        (LayerScale, {"init_values": "a", "projection_dim": 3}, TypeError, "init_values='a'"),
        (LayerScale, {"init_values": 0.1, "projection_dim": 0}, ValueError, "projection_dim=0"),
        (LayerScale, {"init_values": 0.1, "projection_dim": 2.5}, ValueError, "projection_dim"),
        (StochasticDepth, {"drop_path_rate": 1.0}, ValueError, "drop_path_rate=1.0"),
        (StochasticDepth, {"drop_path_rate": -0.1}, ValueError, "drop_path_rate=-0.1"),
        (StochasticDepth, {"drop_path_rate": None}, ValueError, "drop_path_rate=None"),
    ],
)
def test_argument_errors(cls, kwargs, error, match):
    with pytest.raises(error, match=match):
        cls(**kwargs)


def test_layer_scale_rejects_a_mismatched_input():
    with pytest.raises(ValueError, match=r"LayerScale '.*'.*projection_dim=4"):
        LayerScale(0.1, 4)(np.ones((2, 3), "float32"))
