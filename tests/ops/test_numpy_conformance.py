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
import keratron.ops.numpy as knp
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


# ------------------------------------------------------------------------ hand-written cases
_R = np.random.default_rng(11)
X = _R.standard_normal((3, 4)).astype("float32")
S = _R.standard_normal((3, 3)).astype("float32")
I = _R.integers(0, 5, (3, 4)).astype("int32")  # noqa: E741 - the int counterpart of X
V = _R.standard_normal(5).astype("float32")
XN = np.where(X > 1, np.nan, X).astype("float32")
C = np.array([[1 + 2j, -1, 0.5j], [-3 - 1j, 2, 1e-3 - 4j]], "complex64")
W4 = np.array([1.0, 2.0, 3.0, 4.0], "float32")


def case(id_, name, *args, np_fn=None, expect="numpy", **kwargs):
    """A row: `ops.<name>(*args, **kwargs)` against `np_fn` (default `np.<name>`).

    `expect="keras"` takes the expected values from keras.ops too (Keras's rule, not numpy's);
    `expect="values"` checks values only (the result dtype is the backend's in Keras).
    """

    def call(mod, a, kw):
        fn = (np_fn or getattr(np, name)) if mod is np else getattr(mod, name)
        return fn(*a, **kw)

    return pytest.param(name, call, list(args), kwargs, expect, id=id_)


def _tensors(v):
    if isinstance(v, np.ndarray):
        return kt.convert_to_tensor(v)
    if isinstance(v, list):
        return [_tensors(e) for e in v]
    return v


CASES = [
    case("append_axis", "append", X, X, axis=0),
    case("append_flat", "append", X, S),
    case("diff_n2", "diff", X, n=2, axis=0),
    case("diff_int", "diff", I),
    case("cross", "cross", S, S[::-1].copy()),
    case("kron", "kron", S, X),
    case("kron_int", "kron", I, I),
    case("outer", "outer", X, V),
    case("inner_square", "inner", S, S.T.copy()),
    case("inner", "inner", X, X),
    case("dot_square", "dot", S, S),
    case("dot_vectors", "dot", V, V),
    case("matmul", "matmul", S, S),
    case("matmul_int", "matmul", I, I.T.copy()),
    case("tensordot", "tensordot", X, X, axes=([0], [0])),
    case("vdot", "vdot", X, X),
    case("einsum", "einsum", "ij,kj->ik", X, X),
    case("trace_offset", "trace", X, offset=1),
    case("trace_int", "trace", I),
    case("diagonal_offset", "diagonal", X, offset=-1),
    case("diag_k", "diag", V, k=1),
    case("diag_matrix_k", "diag", X, k=1),
    case("diagflat_k", "diagflat", S, k=-1),
    case("tril_k", "tril", X, k=-1),
    case("triu_k", "triu", X, k=2),
    case("roll", "roll", X, 2, axis=1),
    case("roll_flat", "roll", X, -3),
    case("rot90", "rot90", X, k=3),
    case("rot90_negative", "rot90", X, k=-1),
    case("repeat", "repeat", X, 2, axis=1),
    case("repeat_flat", "repeat", X, 2),
    case("repeat_list", "repeat", X, [1, 2, 0], axis=0),
    case("tile", "tile", X, (2, 1, 2)),
    case("tile_int_reps", "tile", X, 2),
    case("swapaxes", "swapaxes", X, 0, 1),
    case("moveaxis", "moveaxis", X[None], 0, -1),
    case("expand_dims", "expand_dims", X, -1),
    case("expand_dims_tuple", "expand_dims", X, (0, 2)),
    case("take", "take", X, [0, 2, -1], axis=1),
    case("take_flat", "take", X, [[0, 5], [11, 1]]),
    case("take_along_axis", "take_along_axis", X, np.argsort(X, 1), axis=1),
    case("where", "where", X > 0, X, 0.0),
    case("where_indices", "where", X > 0),
    case("clip", "clip", X, -0.5, 0.5),
    case("clip_int", "clip", I, 1, 3),
    case("concatenate", "concatenate", [X, X], axis=1),
    case("stack", "stack", [X, X], axis=-1),
    case("hstack_1d", "hstack", [V, V]),
    case("hstack", "hstack", [X, X]),
    case("vstack_1d", "vstack", [V, V]),
    case("dstack", "dstack", [X, X]),
    case("dstack_1d", "dstack", [V, V]),
    case("split", "split", X, 2, axis=1),
    case("split_indices", "split", X, [1, 3], axis=1),
    case("array_split", "array_split", X, 3, axis=1),
    case("hsplit", "hsplit", X, 2),
    case("vsplit", "vsplit", X[:2], 2),
    case("dsplit", "dsplit", X[None], 2),
    case("meshgrid", "meshgrid", V, V[:3]),
    case("meshgrid_ij", "meshgrid", V, V[:3], indexing="ij"),
    case("quantile", "quantile", X, 0.3, axis=1),
    case("quantile_vector", "quantile", X, [0.1, 0.9]),
    case("quantile_nearest", "quantile", X, 0.3, method="nearest"),
    case("quantile_lower", "quantile", X, 0.35, axis=0, method="lower"),
    case("quantile_higher", "quantile", X, 0.35, axis=0, method="higher"),
    case("quantile_midpoint", "quantile", X, 0.35, axis=0, method="midpoint"),
    case("percentile", "percentile", X, 40, axis=0, keepdims=True),
    case("nanquantile", "nanquantile", XN, 0.3, axis=1),
    case("nanpercentile", "nanpercentile", XN, 70),
    case("nanmedian", "nanmedian", XN, axis=0),
    case("nanmean", "nanmean", XN, axis=1),
    case("nansum", "nansum", XN),
    case("nanvar", "nanvar", XN, axis=0),
    case("nanstd", "nanstd", XN, axis=0),
    case("nanmax", "nanmax", XN, axis=0),
    case("nanargmax", "nanargmax", XN, axis=1),
    case("nancumsum", "nancumsum", XN, axis=1),
    case("nancumprod", "nancumprod", XN),
    case("nan_to_num", "nan_to_num", np.array([np.nan, np.inf, -np.inf, 1], "float32")),
    case(
        "nan_to_num_values",
        "nan_to_num",
        np.array([np.nan, np.inf, -1], "float32"),
        nan=2.0,
        posinf=5.0,
        neginf=-5.0,
    ),
    case("searchsorted", "searchsorted", np.sort(V), X[0]),
    case("searchsorted_right", "searchsorted", np.sort(I[0]), I[1], side="right"),
    case("digitize", "digitize", X, np.array([-1.0, 0.0, 1.0], "float32")),
    # Keras's digitize reads the bins as increasing; numpy also takes decreasing ones.
    case(
        "digitize_decreasing",
        "digitize",
        X,
        np.array([1.0, 0.0, -1.0], "float32"),
        expect="keras",
    ),
    case("isin", "isin", I, np.array([1, 3], "int32")),
    case("isin_invert", "isin", I, np.array([1, 3], "int32"), invert=True),
    case("isclose", "isclose", X, X + 1e-6),
    case("allclose", "allclose", X, X + 1e-3),
    case("bincount", "bincount", I.ravel()),
    case("bincount_weights", "bincount", I.ravel(), weights=X.ravel(), minlength=8),
    case("histogram", "histogram", V, bins=4),
    case("histogram_range", "histogram", V, bins=3, range=(-1, 1)),
    case("unique", "unique", I),
    # keratron's indices are int32, as argmax's; Keras's are whatever its backend gives
    # (int64 from torch), so these rows check values and shapes only.
    case(
        "unique_inverse_counts",
        "unique",
        I,
        return_inverse=True,
        return_counts=True,
        expect="values",
    ),
    case("unique_inverse_3d", "unique", I.reshape(2, 3, 2), return_inverse=True, expect="values"),
    case("unique_index", "unique", I, return_index=True),
    case("unique_axis", "unique", np.array([[1, 2], [1, 2], [0, 1]], "int32"), axis=0),
    case("unravel_index", "unravel_index", np.array([1, 7, 11], "int32"), (3, 4)),
    case("vander", "vander", V),
    case("vander_increasing", "vander", V, N=3, increasing=True),
    case("vander_int", "vander", I[0]),
    case("trapezoid", "trapezoid", X),
    case("trapezoid_x", "trapezoid", X, x=np.array([0, 1, 3, 4.0], "float32")),
    case("trapezoid_dx", "trapezoid", X, dx=0.5, axis=0),
    case("select", "select", [X > 0.5, X < -0.5], [X, -X], 7.0),
    case("correlate", "correlate", V, V[:3]),
    case("correlate_full", "correlate", V, V[:3], mode="full"),
    case("correlate_same", "correlate", V, V[:2], mode="same"),
    case("correlate_short_first", "correlate", V[:3], V, mode="full"),
    case("corrcoef", "corrcoef", X),
    case("average_weights", "average", X, axis=1, weights=W4),
    case("cumsum_flat", "cumsum", X),
    case("cumsum_bool", "cumsum", X > 0, axis=1),
    case("pad", "pad", X, ((1, 2), (0, 1))),
    case("pad_reflect", "pad", X, 1, mode="reflect"),
    case("pad_symmetric", "pad", X, ((1, 1), (2, 2)), mode="symmetric"),
    case("pad_constant", "pad", X, 1, constant_values=3),
    case("pad_edge", "pad", X, 2, mode="edge"),
    case("pad_wrap", "pad", X, 2, mode="wrap"),
    case("reshape", "reshape", X, (2, -1)),
    case("broadcast_to", "broadcast_to", V, (2, 5)),
    case("squeeze_axis", "squeeze", X[None], axis=0),
    case("transpose_axes", "transpose", X[None], (2, 0, 1)),
    case("flip_axes", "flip", X, axis=(0, 1)),
    case("sort_axis0", "sort", X, axis=0),
    case("sort_flat", "sort", X, axis=None),
    case("argsort_flat", "argsort", X, axis=None),
    case("round_decimals", "round", X, decimals=2),
    case("round_half_even", "round", np.array([0.5, 1.5, 2.5, -0.5], "float32")),
    case("round_int", "round", np.array([[15, -25], [149, 3]], "int32")),
    case("round_int_tens", "round", np.array([15, 25, 149, -15, -26], "int32"), decimals=-1),
    case("round_int_hundreds", "round", np.array([150, 250, 1049], "int32"), decimals=-2),
    case("round_int_positive_decimals", "round", np.array([15, -25], "int32"), decimals=1),
    case("power_float", "power", X, 2.0),
    case("power_int", "power", I, I),
    case(
        "floor_divide_signs",
        "floor_divide",
        np.array([-7, 7, -7], "int32"),
        np.array([2, -2, -2], "int32"),
    ),
    case("mod_signs", "mod", np.array([-7, 7, -7]), np.array([2, -2, -2])),
    case("mod_float", "mod", np.array([-7.5, 7.5], "float32"), 2.0),
    case("fmod_float", "fmod", np.array([-7.5, 7.5], "float32"), 2.0),
    case("fmod_int", "fmod", np.array([-7, 7]), np.array([2, -3])),
    case("gcd", "gcd", np.array([12, -18, 0]), np.array([8, 12, 5])),
    case("lcm", "lcm", np.array([4, -6, 0]), np.array([6, 4, 5])),
    case("right_shift_negative", "right_shift", np.array([-8, 8]), np.array([1, 2])),
    case("cbrt_negative", "cbrt", np.array([-8.0, 27.0], "float32")),
    case("heaviside", "heaviside", np.array([-1.0, 0.0, 2.0], "float32"), 0.5),
    case("ldexp_int_exponent", "ldexp", X, I),
    case("i0_negative", "i0", np.array([-2.0, 0.0, 3.0], "float32")),
    case("nextafter", "nextafter", np.array([1.0], "float32"), np.array([2.0], "float32")),
    case("sinc_zero", "sinc", np.array([0.0, 0.5], "float32")),
    case("signbit_negative_zero", "signbit", np.array([-0.0, 0.0, -1.0], "float32")),
    case("count_nonzero_axes", "count_nonzero", I, axis=(0, 1)),
    case("argmax_keepdims", "argmax", X, axis=None, keepdims=True),
    case("sum_axes", "sum", X[None], axis=(0, 2)),
    case("mean_int", "mean", I, axis=0),
    case("var_int", "var", I),
    case("arange", "arange", 2, 11, 3),
    case("arange_float", "arange", 0.5, 3.0, 0.5),
    case("arange_negative_step", "arange", 5, 0, -2),
    case("linspace", "linspace", 0, 1, 7),
    case("linspace_no_endpoint", "linspace", 0, 1, 4, endpoint=False),
    case("logspace", "logspace", 0, 2, 5),
    case("logspace_base", "logspace", 0, 3, 4, base=2, endpoint=False),
    case("geomspace", "geomspace", 1, 1000, 4),
    case("geomspace_negative", "geomspace", -1, -1000, 4),
    case("eye", "eye", 3, 4, k=1),
    case("identity", "identity", 3),
    case("tri", "tri", 3, 4, k=-1),
    case("full", "full", (2, 3), 7),
    case("full_like", "full_like", I, 2.5),
    case("ones", "ones", (2, 3)),
    case("zeros", "zeros", (3,)),
    case("ones_like_bool", "ones_like", X > 0),
    case("zeros_like_int", "zeros_like", I),
    case("hamming", "hamming", 7),
    case("hanning", "hanning", 6),
    case("blackman", "blackman", 6),
    case("bartlett", "bartlett", 7),
    case("kaiser", "kaiser", 6, 3.0),
    case("hamming_one", "hamming", 1),
    case("nonzero", "nonzero", I),
    case("array", "array", [[1, 2], [3, 4]]),
    case("copy", "copy", X),
    # Complex inputs.
    case("real_complex", "real", C),
    case("imag_complex", "imag", C),
    case("conj_complex", "conj", C),
    case("conjugate_complex", "conjugate", C),
    case("angle_complex", "angle", C),
    case("isreal_complex", "isreal", C),
    case("abs_complex", "abs", C),
    # axis=() reduces over no axis (numpy has no logsumexp: log(exp(x)) is its value then).
    case("logsumexp_empty_axis", "logsumexp", X, axis=(), np_fn=lambda x, axis: np.log(np.exp(x))),
    case("max_empty_axis_keepdims", "max", X, axis=(), keepdims=True),
]


@pytest.mark.parametrize("name, call, args, kwargs, expect", CASES)
def test_case(name, call, args, kwargs, expect):
    want = _numpy(call, np, args, kwargs)
    ref = _keras(lambda: call(keras.ops, args, kwargs))
    if expect == "keras":
        want = ref
    elif expect == "values":
        ref = None
    tensor_args = [_tensors(a) for a in args]
    tensor_kwargs = {k: _tensors(v) for k, v in kwargs.items()}
    check(call(kt.ops, tensor_args, tensor_kwargs), want, ref, f"{name} Tensor")
    check(call(kt.ops, args, kwargs), want, ref, f"{name} ndarray")


def test_argpartition():
    # Only the k-th element's place is defined; the parts either side come in any order.
    k = 2
    got = kt.ops.argpartition(kt.convert_to_tensor(X), k, axis=1).numpy()
    part = np.take_along_axis(X, got, axis=1)
    want = np.sort(X, axis=1)
    np.testing.assert_array_equal(part[:, k], want[:, k])
    np.testing.assert_array_equal(np.sort(part[:, :k], axis=1), want[:, :k])
    np.testing.assert_array_equal(np.sort(got, axis=1), np.tile(np.arange(4), (3, 1)))


def test_empty_and_vectorize():
    # empty's values are undefined: only its shape and dtype are checked.
    for got, want in [
        (kt.ops.empty((2, 3)), keras.ops.empty((2, 3))),
        (kt.ops.empty_like(I), keras.ops.empty_like(I)),
    ]:
        assert got.shape == tuple(want.shape) and got.dtype == keras.backend.standardize_dtype(
            want.dtype
        )
    check(kt.ops.vectorize(lambda a, b: a * b + 1)(X, X), X * X + 1, X)


def test_every_numpy_name_has_rows():
    names = {n for n in knp.__all__ if hasattr(np, n)}
    tested = set(UNARY) | set(BINARY) | set(REDUCE) | {c.values[0] for c in CASES}
    tested |= {"argpartition", "empty", "empty_like", "vectorize"}
    assert sorted(names - tested) == []


# The VJPs of the reductions take axis=() as "no axis" too: the gradient passes unreduced.
# (std is left out: over no axis it is sqrt(0), whose derivative is not finite.)
EMPTY_AXIS_GRADS = ["sum", "mean", "max", "min", "var", "logsumexp", "prod"]


@pytest.mark.parametrize("name", EMPTY_AXIS_GRADS)
def test_empty_axis_gradient(name):
    from tests.gradcheck import check_grads

    x = _R.uniform(0.5, 2.0, (3, 4))
    for kd in (False, True):
        check_grads(lambda t, kd=kd: getattr(kt.ops, name)(t, axis=(), keepdims=kd), [x])


@pytest.mark.parametrize("name", ["real", "conj", "conjugate", "imag", "angle"])
def test_complex_parts_of_real_inputs_gradient(name):
    # real and conj of a real tensor are the identity, imag and angle constants (0 for x > 0).
    from tests.gradcheck import check_grads

    check_grads(lambda t: kt.ops.multiply(getattr(kt.ops, name)(t), t), [_R.uniform(0.5, 2, 5)])
