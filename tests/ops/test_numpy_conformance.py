"""Every numpy-named op of keratron.ops.numpy against numpy.

Four tables: unary elementwise ops, binary elementwise ops (with broadcasting and a Python
scalar operand), reductions (axis None / 0 / -1 / (), keepdims), and hand-written cases for
the rest. Inputs are random, on square, non-square, 1-D and 3-D shapes, float32 / int32 /
bool where numpy accepts them, passed as Tensors and as ndarrays.

Values come from numpy. Result dtypes come from keras.ops on the torch backend: keratron
follows Keras's promotion rule (int32 stays int32, integer inputs of float functions give
float32, no float64 from float32 inputs), not numpy's. Where Keras's values differ from
numpy's by design, the row says so and its expected value comes from keras.ops too. No
expected value is computed by keratron.
"""

import builtins
import warnings
import zlib

import numpy as np
import pytest

import keratron as kt
from tests.conftest import require

keras = require("keras")

SHAPES = [(3, 3), (2, 5), (4,), (2, 3, 4)]
BCAST = [((3, 3), (3, 3)), ((2, 5), (5,)), ((4, 1), (1, 3)), ((2, 3, 4), (3, 1))]
DTYPES = ["float32", "int32", "bool"]
# (rtol, atol) per dtype of the less precise of the two results. numpy computes float32 math in
# float32 too, but with other kernels, so a few ulps apart; it computes bool inputs of float
# functions in float16 where Keras uses float32; integers and bools are exact.
TOL = {"float16": (2e-3, 2e-3), "float32": (2e-5, 2e-6), "complex64": (2e-5, 2e-6)}

# Input domains where the function is real (and away from poles).
DOMAIN = {
    "arccos": (-0.9, 0.9),
    "arcsin": (-0.9, 0.9),
    "arctanh": (-0.9, 0.9),
    "arccosh": (1.1, 3.0),
    "log": (0.1, 3.0),
    "log2": (0.1, 3.0),
    "log10": (0.1, 3.0),
    "log1p": (0.1, 3.0),
    "sqrt": (0.1, 3.0),
    "reciprocal": (0.5, 3.0),
}
INT_ONLY = {
    "bitwise_and",
    "bitwise_or",
    "bitwise_xor",
    "bitwise_left_shift",
    "bitwise_right_shift",
    "left_shift",
    "right_shift",
    "gcd",
    "lcm",
    "bitwise_not",
    "bitwise_invert",
}
FLOAT_ONLY = {
    "nextafter",
    "ldexp",
    "heaviside",
    "logaddexp",
    "logaddexp2",
    "hypot",
    "arctan2",
    "fmod",
    "i0",
}
# (op, dtype or rank) pairs numpy accepts but keras.ops rejects too (torch has no kernel for
# them, or Keras asks for a matrix); keratron follows Keras, so they are not rows.
KERAS_REJECTS = {
    ("round", "bool"),
    ("negative", "bool"),
    ("floor_divide", "bool"),
    ("mod", "bool"),
    ("power", "bool"),
    ("gcd", "bool"),
    ("lcm", "bool"),
    ("bitwise_left_shift", "bool"),
    ("bitwise_right_shift", "bool"),
    ("left_shift", "bool"),
    ("right_shift", "bool"),
    ("tril", 1),
    ("triu", 1),
}
# Keras's rule, not numpy's, for the values too: the expected value comes from keras.ops.
# reciprocal of integers and bools divides in floating point (numpy truncates 1 / 2 to 0).
KERAS_VALUES = {("reciprocal", "int32"), ("reciprocal", "bool")}
# Where keratron keeps numpy's result dtype and Keras's differs: ceil and floor of integers
# stay integers (Keras: float32). The dtype reference is numpy's here; a known difference from
# Keras, left as it is.
NUMPY_DTYPE = {("ceil", "int32"), ("floor", "int32")}
# numpy calls that differ from the plain `np.<name>(*args)`: ties in argsort keep their order
# in keratron and Keras (a stable sort); numpy's default sort does not promise that.
NUMPY_CALL = {"argsort": lambda x, **kw: np.argsort(x, kind="stable", **kw)}

UNARY = """abs absolute arccos arccosh arcsin arcsinh arctan arctanh cbrt ceil conj conjugate cos
cosh deg2rad exp exp2 expm1 fabs floor i0 imag isfinite isinf isnan isneginf isposinf isreal log
log10 log1p log2 logical_not nan_to_num negative rad2deg real reciprocal round sign signbit sin
sinc sinh sqrt square tan tanh trunc bitwise_not bitwise_invert angle copy ravel size ndim
nonzero trace diagonal diag diagflat sort argsort tril triu transpose squeeze flip fliplr flipud
cumsum cumprod nancumsum nancumprod corrcoef unique""".split()
BINARY = """add arctan2 bitwise_and bitwise_or bitwise_xor bitwise_left_shift bitwise_right_shift
left_shift right_shift divide true_divide equal floor_divide fmax fmin fmod gcd lcm greater
greater_equal heaviside hypot ldexp less less_equal logaddexp logaddexp2 logical_and logical_or
logical_xor maximum minimum mod multiply nextafter not_equal power subtract""".split()
REDUCE = """all any amax amin argmax argmin max min mean sum prod std var median nansum nanmean
nanvar nanstd nanmax nanmin nanprod nanargmax nanargmin ptp count_nonzero average
nanmedian""".split()
# Reductions whose numpy and Keras signatures have no keepdims.
NO_KEEPDIMS = {"count_nonzero", "average"}
# Reductions that take an empty axis tuple in numpy: the result is the input, unreduced.
EMPTY_AXIS = """all any amax amin max min mean sum prod std var nansum nanmean nanvar nanstd
nanmax nanmin nanprod""".split()


def _rng(*key):
    return np.random.default_rng(zlib.crc32(repr(key).encode()))


def _gen(rng, shape, dtype, name):
    if dtype == "bool":
        return rng.random(shape) > 0.5
    if dtype == "int32":
        lo, hi = (1, 4) if name in DOMAIN else (0, 4) if name == "power" else (-4, 5)
        return rng.integers(lo, hi, shape).astype("int32")
    lo, hi = DOMAIN.get(name, (-3.0, 3.0))
    return rng.uniform(lo, hi, shape).astype("float32")


def _np(y):
    if isinstance(y, (list, tuple)):
        return [_np(v) for v in y]
    if isinstance(y, kt.Tensor):
        return y.numpy()
    if hasattr(y, "cpu"):  # a torch tensor from keras.ops
        return keras.ops.convert_to_numpy(y)
    return np.asarray(y)


def _keras(fn):
    """keras.ops's result, as numpy, or None where Keras rejects the call."""
    try:
        return _np(fn())
    except Exception:  # noqa: BLE001 - any rejection means "no Keras rule to follow"
        return None


def check(got, want, dtypes=None, tag=""):
    """`got` (keratron) has `want`'s (numpy's) values and shapes, and `dtypes`'s (Keras's)
    dtypes; a None dtype reference skips the dtype check."""
    if isinstance(want, (list, tuple)):
        assert isinstance(got, (list, tuple)) and len(got) == len(want), (tag, got)
        dtypes = dtypes if isinstance(dtypes, (list, tuple)) else [None] * len(want)
        for i, (g, w, d) in enumerate(zip(got, want, dtypes)):
            check(g, w, d, f"{tag}[{i}]")
        return
    got, want = _np(got), np.asarray(want)
    assert got.shape == want.shape, f"{tag}: shape {got.shape}, numpy {want.shape}"
    if dtypes is not None:
        assert got.dtype == np.asarray(dtypes).dtype, f"{tag}: dtype {got.dtype}, Keras {dtypes}"
    rtol, atol = builtins.max(TOL.get(got.dtype.name, (0, 0)), TOL.get(want.dtype.name, (0, 0)))
    if got.dtype.kind == "b" or want.dtype.kind == "b":
        np.testing.assert_array_equal(got, want, err_msg=tag)
    else:
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, equal_nan=True, err_msg=tag)


def _numpy(fn, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # numpy's overflow and domain warnings
        return fn(*args, **kwargs)


def _run(name, call, args, kwargs=None, tag="", key=None, keras_kwargs=None):
    """One row: numpy's value, Keras's dtype, keratron on Tensors and on ndarrays."""
    kwargs = kwargs or {}
    want = _numpy(call, np, args, kwargs)
    ref = _keras(lambda: call(keras.ops, args, kwargs if keras_kwargs is None else keras_kwargs))
    if key in KERAS_VALUES:
        want = ref
    elif key in NUMPY_DTYPE:
        ref = want
    tensors = [kt.convert_to_tensor(a) if isinstance(a, np.ndarray) else a for a in args]
    check(call(kt.ops, tensors, kwargs), want, ref, f"{tag} Tensor")
    check(call(kt.ops, args, kwargs), want, ref, f"{tag} ndarray")


def _by_name(name):
    def call(mod, args, kwargs):
        fn = NUMPY_CALL.get(name, getattr(np, name)) if mod is np else getattr(mod, name)
        return fn(*args, **kwargs)

    return call


@pytest.mark.parametrize("name", UNARY)
def test_unary(name):
    for shape in SHAPES:
        for dt in DTYPES:
            if (name in FLOAT_ONLY and dt != "float32") or (name in INT_ONLY and dt == "float32"):
                continue
            if (name, dt) in KERAS_REJECTS or (name, len(shape)) in KERAS_REJECTS:
                continue
            x = _gen(_rng(name, shape, dt), shape, dt, name)
            try:
                _numpy(getattr(np, name), x)
            except (TypeError, ValueError):
                continue  # numpy rejects the dtype or rank (trace of a vector, ...)
            _run(name, _by_name(name), [x], tag=f"{name}{shape} {dt}", key=(name, dt))


@pytest.mark.parametrize("name", BINARY)
def test_binary(name):
    for s1, s2 in BCAST:
        for dt in DTYPES:
            if (name in FLOAT_ONLY and dt != "float32") or (name in INT_ONLY and dt == "float32"):
                continue
            if (name, dt) in KERAS_REJECTS:
                continue
            rng = _rng(name, s1, s2, dt)
            a, b = _gen(rng, s1, dt, name), _gen(rng, s2, dt, name)
            if name in ("floor_divide", "mod", "fmod", "divide", "true_divide") and dt != "bool":
                b = np.where(b == 0, 1, b).astype(b.dtype)
            if "shift" in name:
                b = np.abs(b) % 4
            try:
                _numpy(getattr(np, name), a, b)
            except TypeError:
                continue  # numpy has no loop for the dtype (subtract on bools, ...)
            _run(name, _by_name(name), [a, b], tag=f"{name}{s1}{s2} {dt}", key=(name, dt))
            # A Python scalar operand takes the tensor's dtype (Keras's weak typing).
            _run(name, _by_name(name), [a, 2], tag=f"{name}{s1} {dt} + 2", key=(name, dt))


@pytest.mark.parametrize("name", REDUCE)
def test_reduction(name):
    for shape in SHAPES:
        for dt in DTYPES:
            x = _gen(_rng(name, shape, dt), shape, dt, name)
            axes = [None, 0, -1] + ([()] if name in EMPTY_AXIS else [])
            for axis in axes:
                for kd in [False] if name in NO_KEEPDIMS else [False, True]:
                    kw = {"axis": axis} if name in NO_KEEPDIMS else {"axis": axis, "keepdims": kd}
                    try:
                        _numpy(getattr(np, name), x, **kw)
                    except TypeError:
                        continue
                    # Keras returns the input itself for axis=(), in its dtype; the dtype
                    # reference is then its reduction over every axis (int32 sums of bools,
                    # float32 means of integers), as for any other axis.
                    kkw = {**kw, "axis": None} if axis == () else None
                    tag = f"{name}{shape} {dt} {kw}"
                    _run(name, _by_name(name), [x], kw, tag, (name, dt), kkw)
