"""Normalization layers: each through `run_layer_test` and compared with real Keras across its
main options; BatchNormalization's moving-statistics updates (training only, Keras's formula,
equal to Keras's within 1e-6), masks, renorm, the synchronized hook, tracing, and errors."""

import contextlib

import numpy as np
import pytest

import keratron as kt
from keratron.autodiff.function import function
from tests.conftest import require
from tests.layers.layer_test import assert_matches_keras, run_layer_test

L = kt.layers
R = np.random.default_rng(3)


def x32(*shape, loc=0.0, scale=1.0):
    return (loc + scale * R.standard_normal(shape)).astype("float32")


@pytest.fixture(scope="module")
def keras():
    return require("keras")


# --------------------------------------------------------------------------- BatchNormalization
BN_CASES = [
    ({}, (6, 4), [(4,)] * 4),
    ({"axis": 1}, (3, 4, 5, 2), [(4,)] * 4),
    ({"center": False}, (3, 5, 5, 3), [(3,)] * 3),
    # beta starts at 1: at 0 it is already optimal for the training step's loss.
    (
        {"scale": False, "momentum": 0.9, "epsilon": 1e-2, "beta_initializer": "ones"},
        (4, 7, 3),
        [(3,)] * 3,
    ),
]


@pytest.mark.parametrize("training", [None, True])
@pytest.mark.parametrize("kwargs,in_shape,shapes", BN_CASES)
def test_batch_norm_layer_test(kwargs, in_shape, shapes, training):
    n_trainable = len(shapes) - 2
    layer = run_layer_test(
        L.BatchNormalization,
        kwargs,
        input_shape=in_shape,
        expected_output_shape=in_shape,
        expected_num_trainable_weights=n_trainable,
        expected_num_non_trainable_weights=2,
        expected_weight_shapes=shapes,
        supports_masking=True,
        training=training,
    )
    names = [w.name for w in layer.weights]
    want = (
        ["gamma", "beta"]
        if n_trainable == 2
        else (["beta"] if "center" not in kwargs else ["gamma"])
    )
    assert names == want + ["moving_mean", "moving_variance"]


@pytest.mark.parametrize("training", [False, True])
@pytest.mark.parametrize("kwargs,in_shape,shapes", BN_CASES)
def test_batch_norm_matches_keras(keras, kwargs, in_shape, shapes, training):
    x = x32(*in_shape, loc=2.0, scale=3.0)
    assert_matches_keras("BatchNormalization", kwargs, x, call_kwargs={"training": training})


@pytest.mark.parametrize(
    "kwargs,in_shape",
    [({}, (8, 5)), ({"axis": 1, "momentum": 0.5}, (4, 3, 6, 5)), ({"epsilon": 0.1}, (2, 6, 6, 3))],
)
def test_batch_norm_moving_statistics_match_keras(keras, kwargs, in_shape):
    x = x32(*in_shape, loc=1.5, scale=2.0)
    ours, theirs = L.BatchNormalization(**kwargs), keras.layers.BatchNormalization(**kwargs)
    ours(x), theirs(x)  # build (inference: nothing moves)
    start = [w + R.uniform(0.1, 0.5, w.shape).astype("float32") for w in theirs.get_weights()]
    ours.set_weights(start)
    theirs.set_weights(start)
    y_ours = ours(x, training=True).numpy()
    y_theirs = keras.ops.convert_to_numpy(theirs(x, training=True))
    np.testing.assert_allclose(y_ours, y_theirs, atol=1e-5)
    for name in ("moving_mean", "moving_variance"):
        a = getattr(ours, name).numpy()
        b = keras.ops.convert_to_numpy(getattr(theirs, name).value)
        np.testing.assert_allclose(a, b, atol=1e-6, rtol=0, err_msg=name)
        assert not np.allclose(a, start[-2 if name == "moving_mean" else -1]), name


def test_batch_norm_update_formula_and_inference():
    x = x32(10, 3, loc=4.0, scale=2.0)
    bn = L.BatchNormalization(momentum=0.8)
    y = bn(x, training=True).numpy()
    mean, var = x.mean(0), x.var(0)
    np.testing.assert_allclose(bn.moving_mean.numpy(), 0.2 * mean, rtol=1e-5)
    np.testing.assert_allclose(bn.moving_variance.numpy(), 0.8 + 0.2 * var, rtol=1e-5)
    np.testing.assert_allclose(y, (x - mean) / np.sqrt(var + 1e-3), rtol=1e-4, atol=1e-5)
    # Inference uses the moving statistics and changes nothing.
    before = [w.numpy().copy() for w in bn.weights]
    y_inf = bn(x).numpy()
    mm, mv = before[2], before[3]
    np.testing.assert_allclose(y_inf, (x - mm) / np.sqrt(mv + 1e-3), rtol=1e-4, atol=1e-5)
    bn(x, training=False)
    for b, w in zip(before, bn.weights):
        np.testing.assert_array_equal(b, w.numpy())


def test_frozen_batch_norm_runs_in_inference_mode():
    # As in Keras: a non-trainable BN uses (and keeps) its moving statistics even in training.
    x = x32(10, 3, loc=4.0)
    bn = L.BatchNormalization()
    bn(x)
    bn.trainable = False
    y = bn(x, training=True).numpy()
    np.testing.assert_array_equal(bn.moving_mean.numpy(), 0.0)
    np.testing.assert_allclose(y, x / np.sqrt(1 + 1e-3), rtol=1e-5)


def test_batch_norm_training_gradient_matches_torch():
    import torch

    x = x32(6, 4, loc=1.0, scale=2.0)
    bn = L.BatchNormalization()
    bn(x)
    bn.set_weights([R.uniform(0.5, 1.5, 4).astype("float32"), x32(4), np.zeros(4), np.ones(4)])
    xt = kt.ops.convert_to_tensor(x)
    with kt.GradientTape() as tape:
        tape.watch(xt)
        loss = kt.ops.sum(kt.ops.square(bn(xt, training=True)) * np.arange(4, dtype="float32"))
    gx, gg, gb = tape.gradient(loss, [xt, bn.gamma, bn.beta])

    xr = torch.tensor(x, requires_grad=True)
    g = torch.tensor(bn.gamma.numpy(), requires_grad=True)
    b = torch.tensor(bn.beta.numpy(), requires_grad=True)
    y = torch.nn.functional.batch_norm(xr, None, None, g, b, training=True, eps=1e-3)
    ((y**2) * torch.arange(4.0)).sum().backward()
    np.testing.assert_allclose(gx.numpy(), xr.grad.numpy(), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(gg.numpy(), g.grad.numpy(), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(gb.numpy(), b.grad.numpy(), rtol=1e-4, atol=1e-4)


@contextlib.contextmanager
def _bound_primitives():
    """Yields the list of the names of the primitives bound inside the block."""
    from keratron.autodiff import primitive

    names, original = [], primitive.Primitive.bind

    def spy(self, *args, **kwargs):
        names.append(self.name)
        return original(self, *args, **kwargs)

    primitive.Primitive.bind = spy
    try:
        yield names
    finally:
        primitive.Primitive.bind = original


@pytest.mark.parametrize("axis,shape", [(-1, (4, 5, 6, 3)), (1, (4, 3, 7))])
def test_batch_norm_training_runs_the_fused_primitive_with_the_composite_values(axis, shape):
    """Training without a mask binds `batch_norm` (forward) and `batch_norm_grad` (backward);
    an all-ones mask takes the composite ops (moments, then batch_normalization): outputs,
    gradients and moving statistics agree."""
    x = kt.ops.convert_to_tensor(x32(*shape, loc=3.0, scale=2.0))
    mask = np.ones(shape[:-1], bool) if axis == -1 else None
    channels = shape[axis]
    weights = [R.uniform(0.5, 1.5, channels).astype("float32"), x32(channels)]
    weights += [np.zeros(channels), np.ones(channels)]
    along = [1] * len(shape)
    along[axis] = channels
    per_channel = np.arange(channels, dtype="float32").reshape(along)
    results = []
    for fused in (True, False):
        bn = L.BatchNormalization(axis=axis, momentum=0.5)
        bn.build(shape)
        bn.set_weights(weights)
        with _bound_primitives() as bound:
            with kt.GradientTape() as tape:
                tape.watch(x)
                if fused or mask is None:
                    y = bn(x, training=True)
                else:
                    y = bn(x, training=True, mask=mask)
                loss = kt.ops.sum(kt.ops.square(y) * per_channel)
            grads = tape.gradient(loss, [x, bn.gamma, bn.beta])
        if fused:
            assert "batch_norm" in bound and "batch_norm_grad" in bound
        elif mask is None:
            continue
        else:
            assert "batch_norm" not in bound and "moments" not in bound
        results.append([y, *grads, bn.moving_mean, bn.moving_variance])
    if len(results) == 2:
        for a, b in zip(*results):
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=2e-5)


def test_batch_norm_traced_step_updates_moving_statistics():
    x = x32(8, 3, loc=2.0)
    eager, traced = L.BatchNormalization(), L.BatchNormalization()
    eager(x), traced(x)
    step = function(lambda t: traced(t, training=True))
    xt = kt.ops.convert_to_tensor(x)
    for _ in range(2):
        y_eager = eager(x, training=True).numpy()
        y_traced = step(xt).numpy()
    np.testing.assert_allclose(y_traced, y_eager, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(traced.moving_mean.numpy(), eager.moving_mean.numpy(), rtol=1e-6)
    np.testing.assert_allclose(
        traced.moving_variance.numpy(), eager.moving_variance.numpy(), rtol=1e-6
    )


def test_batch_norm_mask_matches_keras(keras):
    x = x32(3, 5, 4, loc=1.0, scale=2.0)
    mask = np.array([[1, 1, 1, 0, 0], [1, 0, 1, 1, 1], [1, 1, 0, 0, 0]], bool)
    ours, theirs = assert_matches_keras(
        "BatchNormalization", {}, x, call_kwargs={"training": True, "mask": mask}
    )
    for name in ("moving_mean", "moving_variance"):
        np.testing.assert_allclose(
            getattr(ours, name).numpy(),
            keras.ops.convert_to_numpy(getattr(theirs, name).value),
            atol=1e-6,
        )
    # The statistics ignore masked steps.
    bn = L.BatchNormalization(momentum=0.0)
    bn(x, training=True, mask=mask)
    np.testing.assert_allclose(bn.moving_mean.numpy(), x[mask].mean(0), rtol=1e-4)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"renorm": True},
        {
            "renorm": True,
            "renorm_clipping": {"rmax": 1.2, "rmin": 0.8, "dmax": 0.1},
            "center": False,
        },
    ],
)
def test_batch_renorm_matches_keras(keras, kwargs):
    x = x32(6, 5, loc=1.0, scale=2.0)
    ours, theirs = assert_matches_keras(
        "BatchNormalization", kwargs, x, call_kwargs={"training": True}
    )
    assert [w.name for w in ours.weights] == [w.name for w in theirs.weights]
    for ow, tw in zip(ours.weights, theirs.weights):
        np.testing.assert_allclose(
            ow.numpy(), keras.ops.convert_to_numpy(tw.value), atol=1e-6, err_msg=ow.name
        )


def test_synchronized_is_single_process_batch_norm_and_has_a_hook():
    x = x32(8, 3, loc=1.0)
    plain, synced = L.BatchNormalization(), L.BatchNormalization(synchronized=True)
    # The plain layer runs the fused primitive, the synchronized one the composite ops.
    np.testing.assert_allclose(
        synced(x, training=True).numpy(), plain(x, training=True).numpy(), rtol=1e-6, atol=1e-6
    )
    np.testing.assert_allclose(synced.moving_mean.numpy(), plain.moving_mean.numpy(), rtol=1e-6)
    assert synced.get_config()["synchronized"] is True

    seen = []

    class FakeStrategyBN(L.BatchNormalization):
        def _cross_replica_moments(self, mean, variance, count):
            # Pretend a second replica saw a batch with mean + 1 and the same variance.
            seen.append(count)
            return kt.ops.add(mean, 0.5), kt.ops.add(variance, 0.25)

    bn = FakeStrategyBN(synchronized=True, momentum=0.0)
    bn(x, training=True)
    assert seen == [8]
    np.testing.assert_allclose(bn.moving_mean.numpy(), x.mean(0) + 0.5, rtol=1e-5)
    np.testing.assert_allclose(bn.moving_variance.numpy(), x.var(0) + 0.25, rtol=1e-5)
    # Without synchronized the hook is not used.
    seen.clear()
    FakeStrategyBN()(x, training=True)
    assert seen == []


def test_batch_norm_half_precision_input():
    x = x32(8, 3, loc=100.0, scale=10.0)
    bn = L.BatchNormalization(dtype="float16")
    y = bn(x.astype("float16"), training=True)
    assert y.dtype == "float16"
    np.testing.assert_allclose(
        y.numpy().astype("float32"), (x - x.mean(0)) / np.sqrt(x.var(0) + 1e-3), atol=2e-2
    )


def test_batch_norm_config_matches_keras_and_tf_keras_axis(keras):
    ours, theirs = (
        L.BatchNormalization().get_config(),
        keras.layers.BatchNormalization().get_config(),
    )
    assert set(ours) == set(theirs)
    for key in set(ours) - {"name", "dtype"}:
        assert ours[key] == theirs[key], key
    # tf.keras 2 writes the axis as a one-element list.
    bn = L.BatchNormalization.from_config({**ours, "axis": [3], "name": "bn_legacy"})
    assert bn.axis == 3
    bn(x32(2, 3, 3, 5))
    assert [tuple(w.shape) for w in bn.weights] == [(5,)] * 4


# --------------------------------------------------------------------------- LayerNormalization
LN_CASES = [
    ({}, (3, 6), [(6,), (6,)]),
    ({"axis": [1, 2]}, (2, 3, 4, 5), [(3, 4), (3, 4)]),
    ({"axis": -2, "epsilon": 1e-5}, (2, 4, 3), [(4,), (4,)]),
    ({"center": False}, (2, 5, 4), [(4,)]),
    ({"scale": False, "center": False}, (2, 5, 4), []),
    ({"rms_scaling": True}, (2, 5, 4), [(4,)]),
]


@pytest.mark.parametrize("kwargs,in_shape,shapes", LN_CASES)
def test_layer_norm_layer_test(kwargs, in_shape, shapes):
    run_layer_test(
        L.LayerNormalization,
        kwargs,
        input_shape=in_shape,
        expected_output_shape=in_shape,
        expected_num_trainable_weights=len(shapes),
        expected_num_non_trainable_weights=0,
        expected_weight_shapes=shapes,
        supports_masking=True,
    )


# Keras's torch backend sends any contiguous axes to F.layer_norm, which only handles trailing
# ones, so its non-trailing cases ({"axis": -2}, axis [1, 2] of a 4D input) fail there; those
# are checked against NumPy below.
LN_KERAS_CASES = [c for c in LN_CASES if c[0].get("axis", -1) not in ([1, 2], -2)] + [
    ({"axis": [2, 3]}, (2, 3, 4, 5), None),
    ({"axis": [0, 2]}, (2, 3, 4), None),
]


@pytest.mark.parametrize("kwargs,in_shape,shapes", LN_KERAS_CASES)
def test_layer_norm_matches_keras(keras, kwargs, in_shape, shapes):
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Keras warns that rms_scaling is deprecated
        assert_matches_keras("LayerNormalization", kwargs, x32(*in_shape, loc=1.0, scale=3.0))


@pytest.mark.parametrize("axis,in_shape", [([1, 2], (2, 3, 4, 5)), (-2, (2, 4, 3))])
def test_layer_norm_inner_axes_match_numpy(axis, in_shape):
    x = x32(*in_shape, loc=1.0, scale=3.0)
    layer = L.LayerNormalization(axis=axis)
    layer(x)
    gamma, beta = x32(*layer.gamma.shape), x32(*layer.beta.shape)
    layer.set_weights([gamma, beta])
    axes = tuple(a % x.ndim for a in (axis if isinstance(axis, list) else [axis]))
    bshape = [x.shape[i] if i in axes else 1 for i in range(x.ndim)]
    m, v = x.mean(axes, keepdims=True), x.var(axes, keepdims=True)
    want = (x - m) / np.sqrt(v + 1e-3) * gamma.reshape(bshape) + beta.reshape(bshape)
    np.testing.assert_allclose(layer(x).numpy(), want, rtol=1e-4, atol=1e-5)


def test_layer_norm_values_and_config(keras):
    x = x32(4, 7, loc=5.0)
    y = L.LayerNormalization(epsilon=1e-6)(x).numpy()
    want = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-6)
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-5)
    ours, theirs = L.LayerNormalization(axis=[2, 1]), keras.layers.LayerNormalization(axis=[2, 1])
    xx = x32(2, 3, 4)
    ours(xx), theirs(xx)
    ours_cfg, theirs_cfg = ours.get_config(), theirs.get_config()
    assert set(ours_cfg) == set(theirs_cfg)
    assert ours_cfg["axis"] == theirs_cfg["axis"] == [1, 2]
    assert [w.name for w in ours.weights] == ["gamma", "beta"]


# --------------------------------------------------------------------------- GroupNormalization
GN_CASES = [
    ({"groups": 2}, (2, 5, 6), [(6,), (6,)]),
    ({"groups": -1}, (2, 4, 4, 3), [(3,), (3,)]),
    ({"groups": 1, "epsilon": 1e-5}, (2, 3, 3, 4), [(4,), (4,)]),
    ({"groups": 3, "axis": 1}, (2, 6, 4, 4), [(6,), (6,)]),
    ({"groups": 2, "center": False}, (3, 8), [(8,)]),
]


@pytest.mark.parametrize("kwargs,in_shape,shapes", GN_CASES)
def test_group_norm_layer_test(kwargs, in_shape, shapes):
    run_layer_test(
        L.GroupNormalization,
        kwargs,
        input_shape=in_shape,
        expected_output_shape=in_shape,
        expected_num_trainable_weights=len(shapes),
        expected_num_non_trainable_weights=0,
        expected_weight_shapes=shapes,
        supports_masking=True,
    )


@pytest.mark.parametrize("kwargs,in_shape,shapes", GN_CASES)
def test_group_norm_matches_keras(keras, kwargs, in_shape, shapes):
    assert_matches_keras("GroupNormalization", kwargs, x32(*in_shape, loc=1.0, scale=2.0))


def test_group_norm_values_and_config(keras):
    x = x32(2, 3, 3, 4, loc=2.0)
    y = L.GroupNormalization(groups=2, epsilon=1e-6)(x).numpy()
    xg = x.reshape(2, 3, 3, 2, 2)
    m, v = xg.mean((1, 2, 4), keepdims=True), xg.var((1, 2, 4), keepdims=True)
    np.testing.assert_allclose(y, ((xg - m) / np.sqrt(v + 1e-6)).reshape(x.shape), atol=1e-5)
    ours, theirs = L.GroupNormalization(groups=-1), keras.layers.GroupNormalization(groups=-1)
    ours(x), theirs(x)
    assert ours.get_config()["groups"] == theirs.get_config()["groups"] == 4
    assert set(ours.get_config()) == set(theirs.get_config())


# ---------------------------------------------------------------------------------- errors
@pytest.mark.parametrize(
    "cls,kwargs,arg",
    [
        ("BatchNormalization", {"axis": "last"}, "axis"),
        ("BatchNormalization", {"axis": [1, 2]}, "axis"),
        ("BatchNormalization", {"momentum": -0.1}, "momentum"),
        ("BatchNormalization", {"epsilon": "small"}, "epsilon"),
        (
            "BatchNormalization",
            {"renorm": True, "renorm_clipping": {"rmaxx": 2}},
            "renorm_clipping",
        ),
        (
            "BatchNormalization",
            {"renorm": True, "renorm_clipping": {"dmax": -1}},
            "renorm_clipping",
        ),
        ("LayerNormalization", {"epsilon": -1.0}, "epsilon"),
        ("GroupNormalization", {"groups": 0}, "groups"),
        ("GroupNormalization", {"groups": 2.0}, "groups"),
        ("GroupNormalization", {"axis": [1]}, "axis"),
    ],
)
def test_bad_arguments_name_layer_and_argument(cls, kwargs, arg):
    with pytest.raises(ValueError, match=rf"{cls} layer 'bad'.*`{arg}`"):
        getattr(L, cls)(name="bad", **kwargs)


def test_layer_norm_bad_axis_type():
    with pytest.raises(TypeError, match=r"LayerNormalization layer 'bad'.*`axis`"):
        L.LayerNormalization(axis="x", name="bad")


def test_build_errors_name_the_layer():
    with pytest.raises(ValueError, match=r"'bn'.*`axis`.*axis=3"):
        L.BatchNormalization(axis=3, name="bn")(x32(2, 4))
    with pytest.raises(ValueError, match=r"'ln'.*`axis`"):
        L.LayerNormalization(axis=[1, 5], name="ln")(x32(2, 4))
    with pytest.raises(ValueError, match=r"'gn'.*`groups`.*groups=4"):
        L.GroupNormalization(groups=4, name="gn")(x32(2, 6))
    with pytest.raises(ValueError, match=r"'gn2'.*`groups`"):
        L.GroupNormalization(groups=8, name="gn2")(x32(2, 6))
    bn = L.BatchNormalization(name="bn_mask")
    with pytest.raises(ValueError, match=r"'bn_mask'.*mask"):
        bn(x32(2, 3, 4), mask=np.ones((2, 3, 4), bool))


@pytest.mark.interop
@pytest.mark.parametrize("fused", [True, False, None])
def test_batch_norm_takes_tf_keras_2s_fused_argument(fused):
    # A kernel choice in tf.keras 2 (Keras 3 refuses the keyword), accepted and ignored: the
    # same outputs in training. tf.keras 2's fused kernel (fused True, or None on 4-D input)
    # also moves the moving variance toward the unbiased batch variance, where keratron keeps
    # Keras 3's (biased) update, so inference is compared on the unfused path only.
    keras2 = require("tf_keras")
    x = np.random.default_rng(1).standard_normal((4, 3, 3, 2)).astype("float32")
    ours = kt.layers.BatchNormalization(fused=fused)
    theirs = keras2.layers.BatchNormalization(fused=fused)
    for training in (True, False) if fused is False else (True,):
        np.testing.assert_allclose(
            ours(x, training=training).numpy(),
            theirs(x, training=training).numpy(),
            rtol=1e-5,
            atol=1e-5,
        )
    assert "fused" not in ours.get_config()
