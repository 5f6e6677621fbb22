"""Gradient-check table for elementwise and reduction ops.

Each row: (name, keratron fn, torch fn, input arrays). Every row is checked by float64
central differences and against torch.autograd.
"""

import numpy as np
import pytest
import torch

import keratron as kt
from tests.gradcheck import check_against_torch, check_grads

ops = kt.ops
R = np.random.default_rng(0)


def pos(*shape):
    return R.uniform(0.5, 2.0, shape)


def unit(*shape):
    return R.uniform(-0.9, 0.9, shape)


def nrm(*shape):
    return R.standard_normal(shape)


ROWS = [
    ("add", ops.add, torch.add, [nrm(3, 4), nrm(4)]),
    ("subtract", ops.subtract, torch.sub, [nrm(3, 1), nrm(1, 4)]),
    ("multiply", ops.multiply, torch.mul, [nrm(2, 3), nrm(2, 3)]),
    ("divide", ops.divide, torch.div, [nrm(2, 3), pos(3)]),
    ("power", ops.power, torch.pow, [pos(2, 3), nrm(2, 3)]),
    ("negative", ops.negative, torch.neg, [nrm(5)]),
    ("abs", ops.abs, torch.abs, [nrm(5)]),
    ("exp", ops.exp, torch.exp, [nrm(5)]),
    ("exp2", ops.exp2, torch.exp2, [nrm(5)]),
    ("log", ops.log, torch.log, [pos(5)]),
    ("log1p", ops.log1p, torch.log1p, [pos(5)]),
    ("log2", ops.log2, torch.log2, [pos(5)]),
    ("log10", ops.log10, torch.log10, [pos(5)]),
    ("expm1", ops.expm1, torch.expm1, [nrm(5)]),
    ("sqrt", ops.sqrt, torch.sqrt, [pos(5)]),
    ("rsqrt", ops.rsqrt, torch.rsqrt, [pos(5)]),
    ("square", ops.square, torch.square, [nrm(5)]),
    ("reciprocal", ops.reciprocal, torch.reciprocal, [pos(5)]),
    ("sin", ops.sin, torch.sin, [nrm(5)]),
    ("cos", ops.cos, torch.cos, [nrm(5)]),
    ("tan", ops.tan, torch.tan, [unit(5)]),
    ("arcsin", ops.arcsin, torch.asin, [unit(5)]),
    ("arccos", ops.arccos, torch.acos, [unit(5)]),
    ("arctan", ops.arctan, torch.atan, [nrm(5)]),
    ("arctan2", ops.arctan2, torch.atan2, [nrm(5), nrm(5)]),
    ("sinh", ops.sinh, torch.sinh, [nrm(5)]),
    ("cosh", ops.cosh, torch.cosh, [nrm(5)]),
    ("tanh", ops.tanh, torch.tanh, [nrm(5)]),
    ("arcsinh", ops.arcsinh, torch.asinh, [nrm(5)]),
    ("arccosh", ops.arccosh, torch.acosh, [pos(5) + 1.0]),
    ("arctanh", ops.arctanh, torch.atanh, [unit(5)]),
    ("erf", ops.erf, torch.erf, [nrm(5)]),
    ("erfinv", ops.erfinv, torch.erfinv, [unit(5)]),
    ("hypot", ops.hypot, torch.hypot, [nrm(4), nrm(4)]),
    ("logaddexp", ops.logaddexp, torch.logaddexp, [nrm(4), nrm(4)]),
    ("mod", ops.mod, torch.remainder, [pos(4) * 3, pos(4)]),
    ("clip", lambda x: ops.clip(x, -0.5, 0.5), lambda x: torch.clamp(x, -0.5, 0.5), [nrm(6)]),
    ("maximum", ops.maximum, torch.maximum, [nrm(6), nrm(6)]),
    ("minimum", ops.minimum, torch.minimum, [nrm(6), nrm(6)]),
    (
        "where",
        lambda x, y: ops.where(ops.greater(x, 0), x, y),
        lambda x, y: torch.where(x > 0, x, y),
        [nrm(6), nrm(6)],
    ),
    # A float32 round trip is linear but rounds: a wide step keeps rounding out of the check.
    (
        "cast",
        lambda x: ops.cast(ops.cast(x, "float32"), "float64"),
        lambda x: x.float().double(),
        [nrm(4)],
        dict(eps=1e-2, rtol=1e-4),
    ),
    ("relu", ops.relu, torch.relu, [nrm(6)]),
    ("relu6", ops.relu6, lambda x: torch.clamp(x, 0, 6), [nrm(6) * 5]),
    ("softplus", ops.softplus, torch.nn.functional.softplus, [nrm(6)]),
    ("log_sigmoid", ops.log_sigmoid, torch.nn.functional.logsigmoid, [nrm(6)]),
    ("nan_to_num", ops.nan_to_num, torch.nan_to_num, [nrm(4)]),
    ("divide_no_nan", ops.divide_no_nan, torch.div, [nrm(4), pos(4)]),
    ("divide_no_nan_broadcast", ops.divide_no_nan, torch.div, [nrm(3, 4), pos(4)]),
    ("copy", ops.copy, torch.clone, [nrm(4)]),
    ("sum", lambda x: ops.sum(x, axis=1), lambda x: x.sum(1), [nrm(3, 4)]),
    ("sum_all", ops.sum, torch.sum, [nrm(3, 4)]),
    (
        "sum_keepdims",
        lambda x: ops.sum(x, (0, 2), keepdims=True),
        lambda x: x.sum((0, 2), keepdim=True),
        [nrm(2, 3, 4)],
    ),
    ("mean", lambda x: ops.mean(x, axis=-1), lambda x: x.mean(-1), [nrm(3, 4)]),
    ("max", lambda x: ops.max(x, axis=0), lambda x: x.amax(0), [nrm(3, 4)]),
    ("min", lambda x: ops.min(x, axis=(0, 1)), lambda x: x.amin((0, 1)), [nrm(3, 4, 2)]),
    ("prod", lambda x: ops.prod(x, axis=1), lambda x: x.prod(1), [pos(3, 4)]),
    ("var", lambda x: ops.var(x, axis=1), lambda x: x.var(1, unbiased=False), [nrm(3, 4)]),
    ("std", lambda x: ops.std(x), lambda x: x.std(unbiased=False), [nrm(3, 4)]),
    ("logsumexp", lambda x: ops.logsumexp(x, axis=1), lambda x: torch.logsumexp(x, 1), [nrm(3, 4)]),
    ("cumsum", lambda x: ops.cumsum(x, axis=1), lambda x: torch.cumsum(x, 1), [nrm(3, 4)]),
    ("cumprod", lambda x: ops.cumprod(x, axis=0), lambda x: torch.cumprod(x, 0), [pos(3, 4)]),
    (
        "average",
        lambda x, w: ops.average(x, axis=1, weights=w),
        lambda x, w: (x * w).sum(1) / w.sum(),
        [nrm(3, 4), pos(4)],
    ),
]


@pytest.mark.parametrize("row", ROWS, ids=[r[0] for r in ROWS])
def test_grad_finite_differences(row):
    _, fn, _, args, *opts = row
    check_grads(fn, args, **(opts[0] if opts else {}))


@pytest.mark.parametrize("row", ROWS, ids=[r[0] for r in ROWS])
def test_grad_against_torch(row):
    _, fn, torch_fn, args, *_ = row
    check_against_torch(fn, torch_fn, args)


@pytest.mark.parametrize("fn", [ops.tanh, ops.exp, ops.log1p])
def test_second_order(fn):
    check_grads(fn, [R.uniform(0.1, 1.0, (4,))], order=2)


def test_round_is_bankers():
    np.testing.assert_array_equal(ops.round([0.9, 2.5, 2.3, -4.4]).numpy(), [1, 2, 2, -4])


def test_gradient_of_square_at_three():
    x = kt.Variable(3.0)
    with kt.GradientTape() as tape:
        y = x**2
    assert float(tape.gradient(y, x)) == 6.0


def test_softplus_stable_gradient_at_100():
    x = kt.Variable(100.0)
    with kt.GradientTape() as tape:
        y = ops.softplus(x)
    assert float(tape.gradient(y, x)) == 1.0
    with kt.GradientTape() as tape:
        naive = ops.log(1 + ops.exp(x))
    assert np.isnan(float(tape.gradient(naive, x)))


@pytest.mark.parametrize("compiled", [False, True])
def test_divide_no_nan_where_the_divisor_is_zero(compiled):
    x = np.array([[1.5, np.nan, -2.0], [3.0, 4.0, 0.5]], "float32")
    y = np.array([0.0, -0.0, 4.0], "float32")
    g = np.array([[1.0, 2.0, 3.0], [-1.0, 0.5, 2.0]], "float32")

    def value_and_grads(x, y):
        with kt.GradientTape() as tape:
            tape.watch(x)
            tape.watch(y)
            out = ops.divide_no_nan(x, y)
            total = ops.sum(ops.multiply(out, g))
        return (out, *tape.gradient(total, [x, y]))

    fn = kt.function(value_and_grads) if compiled else value_and_grads
    out, gx, gy = (t.numpy() for t in fn(ops.convert_to_tensor(x), ops.convert_to_tensor(y)))
    # By hand: x / y where y != 0, else 0; the gradients are 0 wherever y == 0 (even for
    # x = NaN), g / y and the column sum of -g * x / y**2 elsewhere.
    np.testing.assert_array_equal(out, [[0.0, 0.0, -0.5], [0.0, 0.0, 0.125]])
    np.testing.assert_array_equal(gx, [[0.0, 0.0, 0.75], [0.0, 0.0, 0.5]])
    np.testing.assert_allclose(gy, [0.0, 0.0, -3.0 * -2.0 / 16 - 2.0 * 0.5 / 16], rtol=1e-6)
    assert out.dtype == np.float32 and not np.signbit(out[0, :2]).any()


@pytest.mark.parametrize("compiled", [False, True])
def test_divide_no_nan_by_a_scalar(compiled):
    x = ops.convert_to_tensor(np.array([1.0, np.nan, -np.inf], "float32"))
    fn = kt.function(ops.divide_no_nan) if compiled else ops.divide_no_nan
    for y, expected in (
        (0.0, [0.0, 0.0, 0.0]),
        (-0.0, [0.0, 0.0, 0.0]),
        (2.0, [0.5, np.nan, -np.inf]),
    ):
        out = fn(x, ops.convert_to_tensor(np.float32(y))).numpy()
        np.testing.assert_array_equal(out, expected)
        assert not np.signbit(out[0])
    out = fn(x, ops.convert_to_tensor(np.float32(np.nan))).numpy()
    assert np.isnan(out).all()
