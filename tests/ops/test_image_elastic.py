"""keratron.ops.image.elastic_transform: shapes, data formats, seeding, identity at alpha=0,
sampling against Keras's torch backend on a shared noise field, errors, gradients."""

import itertools

import numpy as np
import pytest
import torch

import keratron as kt
import keratron.random
from keratron.ops.image import elastic_transform
from tests.conftest import require
from tests.gradcheck import check_grads

R = np.random.default_rng(7)
INTERPOLATIONS = ("nearest", "bilinear")
FILL_MODES = ("constant", "nearest", "wrap", "mirror", "reflect")


def images(*shape, dtype="float32"):
    return R.random(shape).astype(dtype)


@pytest.fixture(scope="module")
def keras():
    return require("keras")


# ------------------------------------------------------------------------------ shapes, formats
@pytest.mark.parametrize(
    "shape, data_format",
    [
        ((2, 9, 11, 3), "channels_last"),
        ((9, 11, 3), "channels_last"),
        ((2, 3, 9, 11), "channels_first"),
        ((3, 9, 11), "channels_first"),
    ],
)
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "uint8"])
def test_shape_and_dtype_are_kept(shape, data_format, dtype):
    x = images(*shape) * (255 if dtype == "uint8" else 1)
    y = elastic_transform(x.astype(dtype), alpha=4.0, sigma=2.0, seed=0, data_format=data_format)
    assert y.shape == shape
    assert y.dtype == dtype


def test_default_data_format_is_channels_last():
    y = elastic_transform(images(2, 9, 11, 3), seed=0)
    assert y.shape == (2, 9, 11, 3)


def test_channels_first_is_transposed_channels_last():
    x = images(2, 12, 10, 3)
    last = elastic_transform(x, alpha=6.0, sigma=2.0, seed=5).numpy()
    first = elastic_transform(
        x.transpose(0, 3, 1, 2), alpha=6.0, sigma=2.0, seed=5, data_format="channels_first"
    ).numpy()
    np.testing.assert_allclose(first, last.transpose(0, 3, 1, 2), rtol=0, atol=1e-6)
    assert not np.allclose(last, x, atol=1e-3)  # the field actually moved pixels


def test_unbatched_is_a_batch_of_one():
    x = images(12, 10, 2)
    one = elastic_transform(x, alpha=6.0, sigma=2.0, seed=5).numpy()
    batch = elastic_transform(x[None], alpha=6.0, sigma=2.0, seed=5).numpy()
    np.testing.assert_allclose(one, batch[0], rtol=0, atol=0)


def test_channels_share_one_field():
    # Identical channels stay identical: the displacement is per image, not per channel.
    x = np.repeat(images(2, 10, 12, 1), 3, axis=-1)
    y = elastic_transform(x, alpha=8.0, sigma=2.0, seed=3).numpy()
    np.testing.assert_array_equal(y[..., 0], y[..., 1])
    np.testing.assert_array_equal(y[..., 0], y[..., 2])


def test_rows_and_columns_move_differently():
    # A ramp along the columns only sees column displacements, one along the rows only row
    # displacements; equal changes would mean both fields came from the same draw.
    ramp = np.arange(16, dtype="float64")
    cols = np.broadcast_to(ramp[None, :, None], (16, 16, 1)).copy()
    rows = cols.transpose(1, 0, 2).copy()
    kw = dict(alpha=3.0, sigma=2.0, fill_mode="nearest", seed=4)
    dx = elastic_transform(cols, **kw).numpy() - cols
    dy = elastic_transform(rows, **kw).numpy() - rows
    assert np.abs(dx).max() > 0.1 and np.abs(dy).max() > 0.1
    assert not np.allclose(dx, dy.transpose(1, 0, 2), atol=1e-3)
    assert not np.allclose(dx, dy, atol=1e-3)


# ------------------------------------------------------------------------------ alpha = 0
@pytest.mark.parametrize(
    "interpolation, fill_mode", list(itertools.product(INTERPOLATIONS, FILL_MODES))
)
def test_zero_alpha_returns_the_input(interpolation, fill_mode):
    x = images(2, 7, 9, 3)
    y = elastic_transform(
        x, alpha=0.0, interpolation=interpolation, fill_mode=fill_mode, fill_value=5.0, seed=1
    )
    np.testing.assert_allclose(y.numpy(), x, rtol=0, atol=1e-6)


def test_zero_alpha_returns_integer_images_exactly():
    x = (images(6, 8, 3) * 255).astype("uint8")
    np.testing.assert_array_equal(elastic_transform(x, alpha=0.0, seed=1).numpy(), x)


# ------------------------------------------------------------------------------ seeding
def test_int_seed_is_reproducible_and_seeds_differ():
    x = images(2, 10, 10, 1)
    a = elastic_transform(x, seed=11).numpy()
    np.testing.assert_array_equal(elastic_transform(x, seed=11).numpy(), a)
    assert not np.allclose(elastic_transform(x, seed=12).numpy(), a, atol=1e-3)


def test_seed_generator_advances_reproducibly():
    x = images(2, 10, 10, 1)
    gen = kt.random.SeedGenerator(seed=3)
    first = elastic_transform(x, seed=gen).numpy()
    second = elastic_transform(x, seed=gen).numpy()
    assert not np.allclose(first, second, atol=1e-3)
    again = kt.random.SeedGenerator(seed=3)
    np.testing.assert_array_equal(elastic_transform(x, seed=again).numpy(), first)
    np.testing.assert_array_equal(elastic_transform(x, seed=again).numpy(), second)


def test_no_seed_draws_a_new_field_each_call():
    x = images(2, 10, 10, 1)
    assert not np.allclose(elastic_transform(x).numpy(), elastic_transform(x).numpy(), atol=1e-3)


def test_traced_call_draws_a_new_field_each_replay():
    gen = kt.random.SeedGenerator(seed=9)
    step = kt.function(lambda t: elastic_transform(t, alpha=5.0, sigma=2.0, seed=gen))
    x = kt.ops.convert_to_tensor(images(2, 10, 10, 1))
    first, second = step(x).numpy(), step(x).numpy()
    assert first.shape == (2, 10, 10, 1)
    assert not np.allclose(first, second, atol=1e-3)
    eager = elastic_transform(x, alpha=5.0, sigma=2.0, seed=kt.random.SeedGenerator(seed=9))
    np.testing.assert_allclose(first, eager.numpy(), rtol=0, atol=1e-6)


# ------------------------------------------------------------------------------ against Keras
def _shared_noise(monkeypatch, z, sigma):
    """Makes keratron and Keras blur the same unit normal noise z = (dx, dy), each (B, H, W).

    Keras's torch backend calls torch.normal twice (column field, then row field) and
    multiplies by sigma; keratron draws both at once as (2B, H, W, 1) with stddev sigma.
    """
    b, h, w = z.shape[1:]

    def fake_kt_normal(shape, mean=0.0, stddev=1.0, dtype=None, seed=None):
        assert shape == (2 * b, h, w, 1) and stddev == sigma and mean == 0.0
        return kt.ops.convert_to_tensor((z * sigma).reshape(shape).astype(dtype))

    draws = iter(z)

    def fake_torch_normal(mean, std, size, generator=None, dtype=None, device=None):
        assert tuple(size) == (b, h, w) and (mean, std) == (0.0, 1.0)
        return torch.as_tensor(next(draws), dtype=dtype, device=device)

    monkeypatch.setattr(keratron.random, "normal", fake_kt_normal)
    return fake_torch_normal


@pytest.mark.interop
@pytest.mark.parametrize(
    "interpolation, fill_mode, data_format",
    [
        ("bilinear", "reflect", "channels_last"),
        ("bilinear", "constant", "channels_last"),
        ("bilinear", "wrap", "channels_first"),
        ("bilinear", "mirror", "channels_last"),
        ("bilinear", "nearest", "channels_first"),
        ("nearest", "reflect", "channels_last"),
        ("nearest", "constant", "channels_first"),
        ("nearest", "wrap", "channels_last"),
    ],
)
def test_same_noise_gives_keras_output(keras, monkeypatch, interpolation, fill_mode, data_format):
    from keras.src.backend.torch import image as keras_torch_image

    sigma, alpha = 2.5, 9.0
    z = R.standard_normal((2, 2, 13, 11))
    x = images(2, 13, 11, 3, dtype="float64")
    if data_format == "channels_first":
        x = x.transpose(0, 3, 1, 2).copy()
    kw = dict(
        alpha=alpha,
        sigma=sigma,
        interpolation=interpolation,
        fill_mode=fill_mode,
        fill_value=-2.0,
        data_format=data_format,
    )
    fake_torch_normal = _shared_noise(monkeypatch, z, sigma)
    ours = elastic_transform(x, seed=0, **kw).numpy()
    monkeypatch.setattr(keras_torch_image.torch, "normal", fake_torch_normal)
    theirs = keras.ops.convert_to_numpy(keras.ops.image.elastic_transform(x, seed=0, **kw))
    monkeypatch.undo()
    assert theirs.shape == ours.shape == x.shape
    assert np.abs(theirs - x).max() > 0.1  # the shared field moves pixels
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-9)


@pytest.mark.interop
def test_same_noise_gives_keras_output_unbatched_float32(keras, monkeypatch):
    from keras.src.backend.torch import image as keras_torch_image

    z = R.standard_normal((2, 1, 16, 12))
    x = images(16, 12, 2)
    kw = dict(alpha=20.0, sigma=5.0)  # Keras's defaults: a 31 x 31 kernel, larger than the image
    fake_torch_normal = _shared_noise(monkeypatch, z, 5.0)
    ours = elastic_transform(x, seed=0, **kw).numpy()
    monkeypatch.setattr(keras_torch_image.torch, "normal", fake_torch_normal)
    theirs = keras.ops.convert_to_numpy(keras.ops.image.elastic_transform(x, seed=0, **kw))
    monkeypatch.undo()
    assert ours.dtype == theirs.dtype == np.float32
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-5)


@pytest.mark.interop
def test_displacement_scale_matches_keras(keras):
    # With real draws the numbers differ, but the spread of the displacement must agree: a
    # column ramp turns column displacements into value changes.
    ramp = np.broadcast_to(np.arange(64.0)[None, :, None], (8, 64, 64, 1)).copy()
    kw = dict(alpha=20.0, sigma=5.0, fill_mode="nearest")
    ours = np.std((elastic_transform(ramp, seed=1, **kw).numpy() - ramp)[:, 16:48, 16:48])
    with torch.random.fork_rng():  # Keras's torch backend draws from torch's global generator
        torch.manual_seed(1)
        theirs = keras.ops.image.elastic_transform(ramp, **kw)
    theirs = keras.ops.convert_to_numpy(theirs) - ramp
    theirs = np.std(theirs[:, 16:48, 16:48])
    assert 0.6 < ours / theirs < 1.6, (ours, theirs)


# ------------------------------------------------------------------------------ errors
@pytest.mark.parametrize(
    "kwargs, shape, error, words",
    [
        ({"interpolation": "bicubic"}, (2, 8, 8, 1), ValueError, ["interpolation", "'bicubic'"]),
        ({"interpolation": "cubic"}, (2, 8, 8, 1), ValueError, ["interpolation", "'cubic'"]),
        ({"fill_mode": "edge"}, (2, 8, 8, 1), ValueError, ["fill_mode", "'edge'"]),
        ({}, (8, 8), ValueError, ["images", "rank", "(8, 8)"]),
        ({}, (1, 2, 8, 8, 1), ValueError, ["images", "rank", "(1, 2, 8, 8, 1)"]),
        ({"sigma": 0.0}, (8, 8, 1), ValueError, ["sigma", "positive", "0.0"]),
        ({"sigma": -1.0}, (8, 8, 1), ValueError, ["sigma", "-1.0"]),
        ({"alpha": "large"}, (8, 8, 1), TypeError, ["alpha", "'large'"]),
        ({"seed": 1.5}, (8, 8, 1), ValueError, ["seed", "1.5"]),
        ({"data_format": "nhwc"}, (8, 8, 1), ValueError, ["data_format", "nhwc"]),
    ],
)
def test_argument_errors_name_op_argument_and_value(kwargs, shape, error, words):
    with pytest.raises(error) as info:
        elastic_transform(np.zeros(shape, "float32"), **kwargs)
    message = str(info.value)
    for word in words + (["elastic_transform"] if "data_format" not in kwargs else []):
        assert word in message, message


@pytest.mark.interop
@pytest.mark.parametrize(
    "kwargs, shape",
    [
        ({"interpolation": "bicubic"}, (2, 8, 8, 1)),
        ({"fill_mode": "edge"}, (2, 8, 8, 1)),
        ({}, (8, 8)),
        ({}, (1, 2, 8, 8, 1)),
    ],
)
def test_keras_rejects_the_same_arguments(keras, kwargs, shape):
    x = np.zeros(shape, "float32")
    with pytest.raises(ValueError):
        keras.ops.image.elastic_transform(x, **kwargs)
    with pytest.raises(ValueError):
        elastic_transform(x, **kwargs)


@pytest.mark.interop
def test_signature_matches_keras(keras):
    import inspect

    ours = inspect.signature(elastic_transform).parameters
    theirs = inspect.signature(keras.ops.image.elastic_transform).parameters
    assert [(p.name, p.default) for p in ours.values()] == [
        (p.name, p.default) for p in theirs.values()
    ]


# ------------------------------------------------------------------------------ gradients
@pytest.mark.parametrize(
    "interpolation, fill_mode",
    [
        ("bilinear", "reflect"),
        ("bilinear", "constant"),
        ("bilinear", "wrap"),
        ("nearest", "mirror"),
    ],
)
def test_gradient_wrt_images(interpolation, fill_mode):
    x = R.standard_normal((2, 6, 7, 2))

    def fn(t):
        return elastic_transform(
            t,
            alpha=6.0,
            sigma=1.5,
            interpolation=interpolation,
            fill_mode=fill_mode,
            fill_value=0.5,
            seed=2,
        )

    check_grads(fn, [x])


def test_gradient_is_the_transpose_of_the_warp():
    # For a fixed seed the warp is a linear map of the pixels, so d<u, y>/dx must be that
    # map's transpose applied to u.
    x = R.standard_normal((1, 6, 7, 1))
    u = R.standard_normal((1, 6, 7, 1))
    kw = dict(alpha=6.0, sigma=1.5, fill_mode="constant", seed=2)
    xt = kt.ops.convert_to_tensor(x)
    with kt.GradientTape() as tape:
        tape.watch(xt)
        loss = kt.ops.sum(elastic_transform(xt, **kw) * u)
    grad = tape.gradient(loss, xt).numpy()
    # The operator is linear in x: its matrix columns are the outputs of the unit images.
    basis = np.eye(x.size).reshape((x.size,) + x.shape)
    columns = np.stack([elastic_transform(e, **kw).numpy().ravel() for e in basis], axis=1)
    np.testing.assert_allclose(grad.ravel(), columns.T @ u.ravel(), rtol=1e-10, atol=1e-12)
    # A warp of x is the same linear map applied to x.
    out = elastic_transform(x, **kw).numpy().ravel()
    np.testing.assert_allclose(out, columns @ x.ravel(), rtol=1e-10, atol=1e-12)
