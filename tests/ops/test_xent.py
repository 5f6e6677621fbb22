"""Fused softmax cross-entropy and the Keras crossentropy ops.

Gradients: float64 central differences (first and second order) and torch.autograd on a
reference written with torch.nn.functional. Values: real Keras (torch backend).
"""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import keratron as kt
from keratron.ops import xent
from tests.conftest import require
from tests.gradcheck import check_against_torch, check_grads

R = np.random.default_rng(7)
EPS = 1e-7


def logits(*shape, scale=2.0):
    return R.standard_normal(shape) * scale


def probs(*shape, axis=-1):
    p = R.uniform(0.05, 1.0, shape)
    return p / p.sum(axis=axis, keepdims=True)


def ids(shape, classes):
    return R.integers(0, classes, shape)


def grad_of(fn, *args):
    """Gradients of sum(fn(*args)) w.r.t. every float argument, through a GradientTape."""
    xs = [kt.convert_to_tensor(a) for a in args]
    with kt.GradientTape() as tape:
        for x in xs:
            if x.dtype.startswith("float"):
                tape.watch(x)
        loss = kt.ops.sum(fn(*xs))
    return loss, tape.gradient(loss, xs)


# ------------------------------------------------------------------ torch references (oracle)
def torch_cce(target, output, from_logits, axis):
    if from_logits:
        log_prob = F.log_softmax(output, dim=axis)
    else:
        p = output / output.sum(dim=axis, keepdim=True)
        log_prob = torch.log(torch.clamp(p, EPS, 1 - EPS))
    return -(target * log_prob).sum(dim=axis)


def torch_scce(target, output, from_logits, axis):
    output = output.movedim(axis, 1)
    target = torch.as_tensor(target, dtype=torch.long)
    if from_logits:
        return F.cross_entropy(output, target, reduction="none")
    p = output / output.sum(dim=1, keepdim=True)
    return F.nll_loss(torch.log(torch.clamp(p, EPS, 1 - EPS)), target, reduction="none")


def torch_bce(target, output, from_logits):
    if from_logits:
        return F.binary_cross_entropy_with_logits(output, target, reduction="none")
    p = torch.clamp(output, EPS, 1 - EPS)
    return -(target * torch.log(p) + (1 - target) * torch.log(1 - p))


# --------------------------------------------------------------------------- fused primitive
def test_primitive_is_one_named_object():
    assert xent.softmax_cross_entropy_p.name == "softmax_cross_entropy"
    assert xent.softmax_cross_entropy_p.multiple_results
    assert kt.ops.softmax_cross_entropy is xent.softmax_cross_entropy


@pytest.mark.parametrize("shape", [(6, 5), (2, 3, 4), (7,)])
def test_sparse_grads(shape):
    y = ids(shape[:-1], shape[-1])
    fn = lambda x: xent.softmax_cross_entropy(x, y, sparse=True)  # noqa: E731
    check_grads(fn, [logits(*shape)])
    check_grads(fn, [logits(*shape)], order=2)
    check_against_torch(
        fn,
        lambda x: (
            F.cross_entropy(
                x.reshape(-1, shape[-1]), torch.as_tensor(y).reshape(-1), reduction="none"
            ).reshape(shape[:-1]),
            torch.softmax(x, -1),
        ),
        [logits(*shape)],
    )


@pytest.mark.parametrize("shape", [(6, 5), (2, 3, 4)])
def test_dense_grads_logits_and_labels(shape):
    fn = lambda x, t: xent.softmax_cross_entropy(x, t, sparse=False)  # noqa: E731
    args = [logits(*shape), probs(*shape)]
    check_grads(fn, args)
    check_grads(fn, args, order=2)
    check_against_torch(
        fn, lambda x, t: (-(t * F.log_softmax(x, -1)).sum(-1), torch.softmax(x, -1)), args
    )


def test_values_and_probs():
    x, y = logits(5, 4), ids((5,), 4)
    loss, p = xent.softmax_cross_entropy(x, y, sparse=True)
    np.testing.assert_allclose(p.numpy(), torch.softmax(torch.tensor(x), -1).numpy(), rtol=1e-12)
    expected = F.cross_entropy(torch.tensor(x), torch.tensor(y), reduction="none").numpy()
    np.testing.assert_allclose(loss.numpy(), expected, rtol=1e-12)


def test_vjp_is_probs_minus_onehot():
    x, y = logits(4, 6).astype("float32"), ids((4,), 6)
    g = R.standard_normal(4).astype("float32")
    xt = kt.convert_to_tensor(x)
    with kt.GradientTape() as tape:
        tape.watch(xt)
        loss, _ = xent.softmax_cross_entropy(xt, y, sparse=True)
    got = tape.gradient(loss, xt, output_gradients=g).numpy()
    p = torch.softmax(torch.tensor(x), -1).numpy()
    np.testing.assert_allclose(got, g[:, None] * (p - np.eye(6)[y]), rtol=1e-5, atol=1e-7)


def test_sparse_labels_get_no_gradient():
    x, y = kt.convert_to_tensor(logits(3, 4)), kt.convert_to_tensor(ids((3,), 4))
    with kt.GradientTape() as tape:
        tape.watch(x)
        loss, _ = xent.softmax_cross_entropy(x, y, sparse=True)
    gx, gy = tape.gradient(loss, [x, y])
    assert gx is not None and gy is None


def test_abstract_eval_on_meta():
    prim = xent.softmax_cross_entropy_p
    shapes = prim.abstract_eval(
        [((8, 3, 10), torch.float32), ((8, 3), torch.int64)], dict(sparse=True)
    )
    assert shapes == [((8, 3), torch.float32), ((8, 3, 10), torch.float32)]
    shapes = prim.abstract_eval(
        [((8, 10), torch.float16), ((8, 10), torch.float16)], dict(sparse=False)
    )
    assert shapes == [((8,), torch.float16), ((8, 10), torch.float16)]


@pytest.mark.parametrize("sparse", [True, False])
def test_large_logits_finite(sparse):
    x = np.array([[1e4, 0.0, -1e4], [0.0, 1e4, 1e4]], dtype="float32")
    y = np.array([0, 0]) if sparse else np.eye(3, dtype="float32")[[0, 0]]
    loss, (gx, *_) = grad_of(lambda a, b: xent.softmax_cross_entropy(a, b, sparse)[0], x, y)
    per_example = xent.softmax_cross_entropy(x, y, sparse)[0].numpy()
    np.testing.assert_allclose(per_example, [0.0, 1e4 + np.log(2.0)], rtol=1e-6)
    assert np.isfinite(gx.numpy()).all()
    np.testing.assert_allclose(gx.numpy(), [[0, 0, 0], [-1, 0.5, 0.5]], atol=1e-6)


def test_primitive_argument_errors():
    with pytest.raises(ValueError, match="labels.shape"):
        xent.softmax_cross_entropy(logits(3, 4), ids((4,), 4), sparse=True)
    with pytest.raises(ValueError, match="labels.shape"):
        xent.softmax_cross_entropy(logits(3, 4), probs(3, 5), sparse=False)
    with pytest.raises(TypeError, match="class ids"):
        xent.softmax_cross_entropy(logits(3, 4), logits(3), sparse=True)
    with pytest.raises(TypeError, match="floating-point"):
        xent.softmax_cross_entropy(ids((3, 4), 4), ids((3,), 4), sparse=True)


# -------------------------------------------------------------------------- Keras functions
CCE_CASES = [
    ("logits_last", True, -1, (6, 5)),
    ("probs_last", False, -1, (6, 5)),
    ("logits_axis1", True, 1, (2, 4, 3)),
    ("probs_axis0", False, 0, (4, 3)),
    ("rank1_logits", True, -1, (5,)),
]


@pytest.mark.parametrize("case", CCE_CASES, ids=[c[0] for c in CCE_CASES])
def test_categorical_crossentropy_grads(case):
    _, from_logits, axis, shape = case
    out = logits(*shape) if from_logits else probs(*shape, axis=axis)
    args = [probs(*shape, axis=axis), out]
    fn = lambda t, o: kt.ops.categorical_crossentropy(t, o, from_logits, axis)  # noqa: E731
    check_grads(fn, args)
    check_against_torch(fn, lambda t, o: torch_cce(t, o, from_logits, axis), args)


@pytest.mark.parametrize("scale", [0.3, 2.5, -1.0])
def test_categorical_crossentropy_on_labels_that_do_not_sum_to_one(scale):
    """Soft labels need not be a distribution (LogitsDistillation feeds scaled teacher logits):
    the gradient is g * (probs * sum(labels) - labels), as torch's autograd of Keras's formula
    gives, not the fused rule's g * (probs - labels)."""
    args = [probs(6, 5) * scale + R.uniform(-0.2, 0.2, (6, 5)), logits(6, 5)]
    fn = lambda t, o: kt.ops.categorical_crossentropy(t, o, from_logits=True)  # noqa: E731
    check_grads(fn, args)
    check_against_torch(fn, lambda t, o: torch_cce(t, o, True, -1), args)


@pytest.mark.parametrize("case", CCE_CASES, ids=[c[0] for c in CCE_CASES])
def test_sparse_categorical_crossentropy_grads(case):
    _, from_logits, axis, shape = case
    out = logits(*shape) if from_logits else probs(*shape, axis=axis)
    a = axis % len(shape)
    y = ids(shape[:a] + shape[a + 1 :], shape[a])
    fn = lambda o: kt.ops.sparse_categorical_crossentropy(y, o, from_logits, axis)  # noqa: E731
    check_grads(fn, [out])
    if len(shape) > 1:
        check_against_torch(fn, lambda o: torch_scce(y, o, from_logits, axis), [out])


@pytest.mark.parametrize("from_logits", [True, False])
def test_binary_crossentropy_grads(from_logits):
    shape = (4, 3)
    out = logits(*shape) if from_logits else R.uniform(0.05, 0.95, shape)
    args = [R.uniform(0, 1, shape), out]
    fn = lambda t, o: kt.ops.binary_crossentropy(t, o, from_logits)  # noqa: E731
    check_grads(fn, args)
    check_against_torch(fn, lambda t, o: torch_bce(t, o, from_logits), args)


def test_binary_from_logits_gradient_at_zero_logit():
    # d/dx = sigmoid(x) - z; at x = 0 that is 0.5 - z (a max/abs spelling gets -z).
    z = np.array([0.0, 1.0, 0.25], dtype="float32")
    _, (_, gx) = grad_of(
        lambda t, o: kt.ops.binary_crossentropy(t, o, True), z, np.zeros(3, "float32")
    )
    np.testing.assert_allclose(gx.numpy(), 0.5 - z, rtol=1e-6)


KERAS_CASES = [
    ("cce", True, -1),
    ("cce", False, -1),
    ("cce", True, 1),
    ("cce", False, 0),
    ("scce", True, -1),
    ("scce", False, -1),
    ("scce", True, 1),
    ("scce", False, 0),
    ("bce", True, None),
    ("bce", False, None),
]


@pytest.mark.parametrize("case", KERAS_CASES, ids=[f"{c[0]}-{c[1]}-{c[2]}" for c in KERAS_CASES])
def test_values_match_keras(case):
    keras = require("keras")
    kind, from_logits, axis = case
    shape = (3, 4, 5)
    out = (logits(*shape) if from_logits else probs(*shape, axis=axis or -1)).astype("float32")
    if kind == "cce":
        t = probs(*shape, axis=axis).astype("float32")
        got = kt.ops.categorical_crossentropy(t, out, from_logits, axis)
        want = keras.ops.categorical_crossentropy(t, out, from_logits=from_logits, axis=axis)
    elif kind == "scce":
        a = axis % 3
        t = ids(shape[:a] + shape[a + 1 :], shape[a])
        got = kt.ops.sparse_categorical_crossentropy(t, out, from_logits, axis)
        want = keras.ops.sparse_categorical_crossentropy(t, out, from_logits=from_logits, axis=axis)
    else:
        t = R.uniform(0, 1, shape).astype("float32")
        got = kt.ops.binary_crossentropy(t, out, from_logits)
        want = keras.ops.binary_crossentropy(t, out, from_logits=from_logits)
    want = keras.ops.convert_to_numpy(want)
    assert got.shape == want.shape and got.dtype == "float32"
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-6)


def test_sparse_target_with_trailing_class_axis_of_one():
    keras = require("keras")
    out = logits(4, 3).astype("float32")
    t = ids((4, 1), 3)
    got = kt.ops.sparse_categorical_crossentropy(t, out, from_logits=True)
    want = keras.ops.convert_to_numpy(
        keras.ops.sparse_categorical_crossentropy(t, out, from_logits=True)
    )
    assert got.shape == (4,)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-6)


def test_sparse_int32_and_float_targets_agree():
    out = logits(5, 4).astype("float32")
    t = ids((5,), 4)
    a = kt.ops.sparse_categorical_crossentropy(t.astype("int32"), out, from_logits=True)
    b = kt.ops.sparse_categorical_crossentropy(t.astype("float32"), out, from_logits=True)
    np.testing.assert_array_equal(a.numpy(), b.numpy())


@pytest.mark.parametrize("kind", ["cce", "scce", "bce"])
def test_large_logits_finite_through_keras_functions(kind):
    x = np.array([[1e4, -1e4, 0.0], [-1e4, 1e4, 1e4]], dtype="float32")
    if kind == "cce":
        fn = lambda o: kt.ops.categorical_crossentropy(np.eye(3, dtype="float32")[[1, 0]], o, True)  # noqa: E731
        expected = [2e4, 2e4 + np.log(2.0)]
    elif kind == "scce":
        fn = lambda o: kt.ops.sparse_categorical_crossentropy(np.array([1, 0]), o, True)  # noqa: E731
        expected = [2e4, 2e4 + np.log(2.0)]
    else:
        fn = lambda o: kt.ops.binary_crossentropy(np.ones((2, 3), "float32"), o, True)  # noqa: E731
        expected = [[0.0, 1e4, np.log(2.0)], [1e4, 0.0, 0.0]]
    loss, (gx,) = grad_of(fn, x)
    np.testing.assert_allclose(fn(x).numpy(), expected, rtol=1e-6)
    assert np.isfinite(gx.numpy()).all()
    assert np.abs(gx.numpy()).max() <= 1.0 + 1e-6


def test_keras_function_errors():
    with pytest.raises(ValueError, match="categorical_crossentropy.*same shape"):
        kt.ops.categorical_crossentropy(probs(3, 4), probs(3, 5))
    with pytest.raises(ValueError, match="sparse_categorical_crossentropy.*class axis"):
        kt.ops.sparse_categorical_crossentropy(ids((4,), 3), logits(3, 3))
    with pytest.raises(ValueError, match="binary_crossentropy.*same shape"):
        kt.ops.binary_crossentropy(probs(3, 4), probs(4, 3))
    with pytest.raises(ValueError, match="axis 2 is out of bounds"):
        kt.ops.categorical_crossentropy(probs(3, 4), probs(3, 4), axis=2)


def test_probability_path_clips_like_keras():
    # A zero probability for the true class is clipped to epsilon, not log(0) = -inf.
    out = np.array([[0.0, 1.0]], dtype="float32")
    loss = kt.ops.categorical_crossentropy(np.array([[1.0, 0.0]], "float32"), out)
    np.testing.assert_allclose(loss.numpy(), [-np.log(np.float32(EPS))], rtol=1e-5)
    loss = kt.ops.binary_crossentropy(np.array([1.0], "float32"), np.array([0.0], "float32"))
    np.testing.assert_allclose(loss.numpy(), [-np.log(np.float32(EPS))], rtol=1e-5)


def test_traced_losses_match_eager():
    from keratron.autodiff.function import function

    x = kt.convert_to_tensor(logits(4, 5).astype("float32"))
    w = kt.Variable(R.standard_normal(5).astype("float32"))
    y = kt.convert_to_tensor(ids((4,), 5))
    t = kt.convert_to_tensor(probs(4, 5).astype("float32"))

    def step(x):
        with kt.GradientTape() as tape:
            out = x * w
            loss = (
                kt.ops.sum(kt.ops.sparse_categorical_crossentropy(y, out, from_logits=True))
                + kt.ops.sum(kt.ops.categorical_crossentropy(t, out, from_logits=True, axis=0))
                + kt.ops.sum(kt.ops.binary_crossentropy(t, out, from_logits=True))
                + kt.ops.sum(kt.ops.categorical_crossentropy(t, kt.ops.sigmoid(out)))
            )
        return loss, tape.gradient(loss, w)

    traced = function(step)
    for _ in range(2):
        loss, grad = traced(x)
    want_loss, want_grad = step(x)
    np.testing.assert_allclose(float(loss), float(want_loss), rtol=1e-6)
    np.testing.assert_allclose(grad.numpy(), want_grad.numpy(), rtol=1e-5, atol=1e-6)
