"""Values, dtypes and errors of the ops in keratron.ops.extra and keratron.ops.image, against
keras.ops on its torch backend and against numpy; plus tracing (keratron.function) of the
composites and the clear errors of the data-dependent ops under tracing.
"""

import numpy as np
import pytest
import torch

import keratron as kt
from tests.conftest import require

ops = kt.ops
R = np.random.default_rng(7)


def f32(*shape):
    return R.standard_normal(shape).astype("float32")


def K():
    return require("keras")


def kt_(x):
    """keras.ops on the torch backend wants torch tensors for some ops."""
    return K().ops.convert_to_tensor(x)


def close(a, b, tol=1e-5, dtype=True):
    a_list = list(a) if isinstance(a, (tuple, list)) else [a]
    b_list = list(b) if isinstance(b, (tuple, list)) else [b]
    assert len(a_list) == len(b_list)
    for x, y in zip(a_list, b_list):
        x = np.asarray(x)
        y = K().ops.convert_to_numpy(y) if not isinstance(y, np.ndarray) else y
        assert x.shape == y.shape, (x.shape, y.shape)
        if dtype:
            assert x.dtype == y.dtype, (x.dtype, y.dtype)
        np.testing.assert_allclose(x.astype(float), y.astype(float), rtol=tol, atol=tol)


# ------------------------------------------------------------------------------ elementwise
X = f32(3, 4)
Y = f32(3, 4)
I32 = R.integers(-20, 20, (3, 4)).astype("int32")
J32 = R.integers(1, 6, (3, 4)).astype("int32")

ELEMENTWISE = [
    ("erfc", (X,)),
    ("erfc", (I32,)),
    ("cbrt", (X,)),
    ("cbrt", (I32,)),
    ("fabs", (I32,)),
    ("deg2rad", (X,)),
    ("rad2deg", (I32,)),
    ("sinc", (X,)),
    ("signbit", (X,)),
    ("i0", (X,)),
    ("angle", (X,)),
    ("isneginf", (np.array([-np.inf, 0.0, np.inf], "float32"),)),
    ("isposinf", (np.array([-np.inf, 0.0, np.inf], "float32"),)),
    ("isreal", (X,)),
    ("conjugate", (X,)),
    ("fmod", (X, Y)),
    ("fmod", (I32, J32)),
    ("fmod", (I32, 3)),
    ("logaddexp2", (X, Y)),
    ("fmax", (np.array([1.0, np.nan, np.nan], "float32"), np.array([2.0, 3.0, np.nan], "float32"))),
    ("fmin", (np.array([1.0, np.nan, np.nan], "float32"), np.array([2.0, 3.0, np.nan], "float32"))),
    ("fmax", (X, Y)),
    ("gcd", (I32, J32)),
    ("lcm", (I32, J32)),
    ("bitwise_and", (I32, J32)),
    ("bitwise_or", (I32, J32)),
    ("bitwise_xor", (I32, J32)),
    ("bitwise_not", (I32,)),
    ("bitwise_left_shift", (J32, J32)),
    ("bitwise_right_shift", (I32, J32)),
    ("left_shift", (J32, 2)),
    ("right_shift", (I32, 1)),
    ("ldexp", (X, J32)),
    ("nextafter", (X, Y)),
    ("isclose", (X, X + 1e-7)),
    ("isclose", (np.array([1.0, np.nan, np.inf]), np.array([1.0, np.nan, np.inf]))),
]


@pytest.mark.parametrize("name,args", ELEMENTWISE, ids=[r[0] for r in ELEMENTWISE])
def test_elementwise_matches_keras(name, args):
    keras = K()
    close(getattr(ops, name)(*args), getattr(keras.ops, name)(*[kt_(a) for a in args]))


def test_isclose_options_and_allclose():
    a = np.array([1.0, np.nan, 2.0], "float32")
    b = np.array([1.0 + 1e-3, np.nan, 2.0], "float32")
    np.testing.assert_array_equal(ops.isclose(a, b).numpy(), np.isclose(a, b))
    np.testing.assert_array_equal(
        ops.isclose(a, b, rtol=1e-2, equal_nan=True).numpy(), np.isclose(a, b, 1e-2, 0, True)
    )
    assert bool(ops.allclose(a, b, rtol=1e-2, equal_nan=True))
    assert not bool(ops.allclose(a, b))


def test_integer_only_ops_reject_floats():
    with pytest.raises(TypeError, match="gcd"):
        ops.gcd([1.5], [2])
    with pytest.raises(TypeError, match="bitwise_not"):
        ops.bitwise_not([1.0])
    with pytest.raises(TypeError, match="ldexp"):
        ops.ldexp([1.0], [2.0])


def test_view_and_complex_views():
    x = np.array([1.0, -2.0], "float32")
    np.testing.assert_array_equal(ops.view(x, "int32").numpy(), x.view("int32"))
    np.testing.assert_array_equal(ops.view(x, "uint8").numpy(), x.view("uint8"))
    with pytest.raises(ValueError, match="view"):
        ops.view(np.ones(3, "uint8"), "int32")
    z = ops.view_as_complex(np.array([[1.0, 2.0], [3.0, -4.0]], "float32"))
    np.testing.assert_array_equal(z.numpy(), np.array([1 + 2j, 3 - 4j], "complex64"))
    np.testing.assert_array_equal(ops.view_as_real(z).numpy(), [[1.0, 2.0], [3.0, -4.0]])
    p = ops.polar(np.array([2.0], "float32"), np.array([np.pi / 2], "float32"))
    np.testing.assert_allclose(p.numpy(), [2j], atol=1e-6)


@pytest.mark.parametrize(
    "x,dtype",
    [
        (np.array([-5.0, 300.0, np.inf, -np.inf, 7.6], "float32"), "uint8"),
        (np.array([-300, 300, 5], "int32"), "int8"),
        (np.array([1e300, -1e300], "float64"), "float32"),
    ],
)
def test_saturate_cast_matches_keras(x, dtype):
    keras = K()
    close(ops.saturate_cast(x, dtype), keras.ops.saturate_cast(kt_(x), dtype))


def test_saturate_cast_float32_to_int32_stays_in_range():
    # float32 cannot hold 2**31 - 1: the upper limit is the largest float32 below it.
    got = ops.saturate_cast(np.array([-5e10, 3e10, 1.5], "float32"), "int32").numpy()
    np.testing.assert_array_equal(got, [-(2**31), 2**31 - 128, 1])


# ------------------------------------------------------------------------------ statistics
NANX = f32(3, 4, 5)
NANX[0, 1, 2] = NANX[2, 0, 0] = np.nan
NANX[1, :, 3] = np.nan


class _quiet:
    def __enter__(self):
        import warnings

        self._w = warnings.catch_warnings()
        self._w.__enter__()
        warnings.simplefilter("ignore")

    def __exit__(self, *a):
        self._w.__exit__(*a)


@pytest.mark.parametrize(
    "name,axis,keepdims",
    [
        ("nansum", 1, False),
        ("nanmean", (0, 2), False),
        ("nanvar", 1, True),
        ("nanstd", None, False),
        ("nanmax", 2, False),
        ("nanmin", 1, False),
        ("nanprod", 0, True),
        ("nanmedian", 1, False),
    ],
)
def test_nan_reductions_match_numpy(name, axis, keepdims):
    got = getattr(ops, name)(NANX, axis=axis, keepdims=keepdims).numpy()
    with _quiet():
        want = getattr(np, name)(NANX, axis=axis, keepdims=keepdims)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, equal_nan=True)


def test_nan_args_and_cumulatives():
    x = np.array([[1.0, np.nan, 3.0], [np.nan, np.nan, np.nan]], "float32")
    np.testing.assert_array_equal(ops.nanargmax(x, axis=1).numpy(), [2, -1])
    np.testing.assert_array_equal(ops.nanargmin(x, axis=1).numpy(), [0, -1])
    np.testing.assert_allclose(ops.nancumsum(x, axis=1).numpy(), np.nancumsum(x, axis=1))
    np.testing.assert_allclose(ops.nancumprod(x, axis=1).numpy(), np.nancumprod(x, axis=1))
    assert ops.nansum(np.array([1, 2], "int32")).dtype == "int32"
    assert np.isnan(ops.nanmax(x, axis=1).numpy()[1])


def test_ptp():
    x = R.integers(0, 9, (3, 4)).astype("int32")
    np.testing.assert_array_equal(ops.ptp(x, axis=1).numpy(), np.ptp(x, axis=1))
    assert ops.ptp(x).dtype == "int32"


@pytest.mark.parametrize("method", ["linear", "lower", "higher", "midpoint", "nearest"])
def test_quantiles_match_numpy(method):
    x = f32(3, 4, 5)
    q = [0.0, 0.1, 0.5, 0.77, 1.0]
    np.testing.assert_allclose(
        ops.quantile(x, q, axis=(0, 2), method=method).numpy(),
        np.quantile(x, q, axis=(0, 2), method=method),
        rtol=1e-5,
    )
    np.testing.assert_allclose(
        ops.percentile(x, 30, axis=1, method=method, keepdims=True).numpy(),
        np.percentile(x, 30, axis=1, method=method, keepdims=True),
        rtol=1e-5,
    )
    with _quiet():
        want = np.nanquantile(NANX, 0.3, axis=1, method=method)
    np.testing.assert_allclose(
        ops.nanquantile(NANX, 0.3, axis=1, method=method).numpy(), want, rtol=1e-5, equal_nan=True
    )


def test_quantile_dtypes_nan_and_errors():
    x = np.array([1, 2, 3, 4], "int32")
    assert ops.median(x).dtype == "float32"
    assert float(ops.median(x)) == 2.5
    assert ops.median(x.astype("float16")).dtype == "float16"
    assert np.isnan(float(ops.quantile(np.array([1.0, np.nan, 2.0]), 0.5)))
    assert float(ops.nanpercentile(np.array([1.0, np.nan, 3.0]), 50)) == 2.0
    with pytest.raises(ValueError, match="quantile"):
        ops.quantile(x, 1.5)
    with pytest.raises(ValueError, match="method"):
        ops.quantile(x, 0.5, method="cubic")


def test_quantile_matches_keras():
    keras = K()
    x = f32(4, 6)
    close(ops.quantile(x, [0.25, 0.5], axis=1), keras.ops.quantile(x, [0.25, 0.5], axis=1))
    close(ops.median(x, axis=0, keepdims=True), keras.ops.median(x, axis=0, keepdims=True))


# ------------------------------------------------------------------------------ arrays
def test_append_diff_kron_rot90_flips():
    a, b = f32(2, 3), f32(4, 1, 2)
    np.testing.assert_array_equal(ops.append(a, b).numpy(), np.append(a, b))
    np.testing.assert_array_equal(ops.append(a, a, axis=0).numpy(), np.append(a, a, axis=0))
    m = f32(3, 5, 4)
    np.testing.assert_allclose(ops.diff(m, 2, axis=1).numpy(), np.diff(m, 2, axis=1), 1e-5)
    bools = np.array([True, True, False])
    np.testing.assert_array_equal(ops.diff(bools).numpy(), np.diff(bools))
    np.testing.assert_allclose(ops.kron(a, b).numpy(), np.kron(a, b), 1e-6)
    for k in range(-1, 5):
        np.testing.assert_array_equal(ops.rot90(m, k, (1, 2)).numpy(), np.rot90(m, k, (1, 2)))
    np.testing.assert_array_equal(ops.fliplr(m).numpy(), np.fliplr(m))
    np.testing.assert_array_equal(ops.flipud(m).numpy(), np.flipud(m))
    with pytest.raises(ValueError, match="rot90"):
        ops.rot90(m, axes=(1, 1))


@pytest.mark.parametrize(
    "sa,sb,kw", [(3, 3, {}), (2, 3, {}), (3, 2, {}), (2, 2, {}), (3, 3, {"axis": 0})]
)
def test_cross_matches_numpy(sa, sb, kw):
    if "axis" in kw:
        a, b = f32(sa, 4), f32(sb, 4)
    else:
        a, b = f32(4, sa), f32(4, sb)
    with _quiet():  # numpy deprecates 2-vectors; keratron keeps numpy's semantics for them
        want = np.cross(a, b, **kw)
    np.testing.assert_allclose(ops.cross(a, b, **kw).numpy(), want, 1e-5, 1e-6)


def test_splits_dstack_diagflat_trapezoid_vander():
    x = f32(4, 6, 2)
    for name in ("hsplit", "vsplit", "dsplit"):
        n = 2
        got = getattr(ops, name)(x, n)
        want = getattr(np, name)(x, n)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g.numpy(), w)
    np.testing.assert_array_equal(ops.hsplit(np.arange(6), [2, 3])[2].numpy(), [3, 4, 5])
    with pytest.raises(ValueError, match="dsplit"):
        ops.dsplit(f32(2, 2), 2)
    a, b = np.arange(3), np.arange(3, 6)
    np.testing.assert_array_equal(ops.dstack([a, b]).numpy(), np.dstack([a, b]))
    np.testing.assert_array_equal(
        ops.diagflat([[1, 2], [3, 4]], 1).numpy(), np.diagflat([[1, 2], [3, 4]], 1)
    )
    y = f32(3, 5)
    np.testing.assert_allclose(ops.trapezoid(y).numpy(), np.trapezoid(y), 1e-5)
    xs = np.array([0.0, 0.5, 2.0])
    np.testing.assert_allclose(
        ops.trapezoid(y, x=xs, axis=0).numpy(), np.trapezoid(y, x=xs, axis=0), 1e-5
    )
    np.testing.assert_allclose(ops.trapezoid(y, dx=0.3).numpy(), np.trapezoid(y, dx=0.3), 1e-5)
    v = np.array([1, 2, 3], "int32")
    np.testing.assert_array_equal(ops.vander(v).numpy(), np.vander(v))
    np.testing.assert_array_equal(ops.vander(v, 4, increasing=True).numpy(), np.vander(v, 4, True))
    assert ops.vander(v).dtype == "int32"


def test_select_digitize_isin_unravel():
    x = np.arange(6)
    got = ops.select([x < 2, x > 3], [x, x * 10], -1)
    np.testing.assert_array_equal(got.numpy(), np.select([x < 2, x > 3], [x, x * 10], -1))
    with pytest.raises(ValueError, match="select"):
        ops.select([x < 2], [x, x])
    v, bins = np.array([0.5, 1.0, 2.5, 3.0, 9.0]), np.array([1.0, 2.0, 3.0])
    np.testing.assert_array_equal(ops.digitize(v, bins).numpy(), np.digitize(v, bins))
    assert ops.digitize(v, bins).dtype == "int32"
    np.testing.assert_array_equal(
        ops.isin([1, 2, 3, 4], [2, 4], invert=True).numpy(),
        np.isin([1, 2, 3, 4], [2, 4], invert=True),
    )
    idx = np.array([0, 5, 11, 7])
    for g, w in zip(ops.unravel_index(idx, (3, 4)), np.unravel_index(idx, (3, 4))):
        np.testing.assert_array_equal(g.numpy(), w)
    with pytest.raises(ValueError, match="unravel_index"):
        ops.unravel_index([12], (3, 4))


def test_bincount_histogram_unique():
    x = np.array([0, 1, 1, 5, 3])
    np.testing.assert_array_equal(ops.bincount(x, minlength=8).numpy(), np.bincount(x, minlength=8))
    w = np.array([0.5, 1.0, 2.0, 0.25, 1.0], "float32")
    np.testing.assert_allclose(ops.bincount(x, weights=w).numpy(), np.bincount(x, w))
    assert ops.bincount(x).dtype == "int32"
    x2 = np.array([[0, 1, 1], [2, 2, 0]])
    np.testing.assert_array_equal(ops.bincount(x2).numpy(), [[1, 2, 0], [1, 0, 2]])
    with pytest.raises(ValueError, match="non-negative"):
        ops.bincount([-1, 2])
    y = f32(50)
    for bins, rng in ((7, None), (5, (-1.0, 1.0))):
        counts, edges = ops.histogram(y, bins, rng)
        nc, ne = np.histogram(y, bins, rng)
        np.testing.assert_array_equal(counts.numpy(), nc)
        np.testing.assert_allclose(edges.numpy(), ne, rtol=1e-6)
    u = np.array([3, 1, 3, 2, 1, 1])
    got = ops.unique(u, return_index=True, return_inverse=True, return_counts=True)
    want = np.unique(u, return_index=True, return_inverse=True, return_counts=True)
    for g, w_ in zip(got, want):
        np.testing.assert_array_equal(g.numpy(), w_)
    np.testing.assert_array_equal(ops.unique(u, size=5, fill_value=-1).numpy(), [1, 2, 3, -1, -1])
    np.testing.assert_array_equal(ops.unique(u, size=2).numpy(), [1, 2])
    rows = np.array([[1, 2], [0, 1], [1, 2]])
    np.testing.assert_array_equal(ops.unique(rows, axis=0).numpy(), np.unique(rows, axis=0))


def test_unique_and_bincount_match_keras():
    keras = K()
    u = np.array([4, 1, 4, 2, 1, 1])
    close(
        ops.unique(u, return_counts=True, return_index=True),
        keras.ops.unique(u, return_counts=True, return_index=True),
        dtype=False,
    )
    close(ops.bincount(u, minlength=7), keras.ops.bincount(u, minlength=7))


def test_argpartition_is_a_partition():
    x = f32(4, 9)
    for kth in (0, 3, 8):
        idx = ops.argpartition(x, kth, axis=1).numpy()
        part = np.take_along_axis(x, idx, axis=1)
        ref = np.sort(x, axis=1)
        np.testing.assert_array_equal(part[:, kth], ref[:, kth])
        assert (part[:, :kth] <= part[:, kth : kth + 1]).all()
        assert (part[:, kth + 1 :] >= part[:, kth : kth + 1]).all()
    with pytest.raises(ValueError, match="argpartition"):
        ops.argpartition(x, 9)


def test_in_top_k_cdist_corrcoef_correlate():
    keras = K()
    pred = f32(5, 6)
    tgt = np.array([0, 3, 5, 1, 2])
    for k in (1, 3):
        close(ops.in_top_k(tgt, pred, k), keras.ops.in_top_k(kt_(tgt), kt_(pred), k))
    a, b = f32(2, 3, 4), f32(2, 5, 4)
    close(ops.cdist(a, b), keras.ops.cdist(kt_(a), kt_(b)))
    c = f32(3, 6).astype("float64")
    np.testing.assert_allclose(ops.corrcoef(c).numpy(), np.corrcoef(c), 1e-10)
    for m, n in ((6, 3), (3, 6), (4, 4)):
        u, v = f32(m), f32(n)
        for mode in ("valid", "same", "full"):
            np.testing.assert_allclose(
                ops.correlate(u, v, mode).numpy(), np.correlate(u, v, mode), 1e-5, 1e-5
            )


# ------------------------------------------------------------------------------ creation
@pytest.mark.parametrize("n", [0, 1, 6, 7])
def test_windows_match_numpy(n):
    for name in ("hamming", "hanning", "blackman", "bartlett"):
        np.testing.assert_allclose(getattr(ops, name)(n).numpy(), getattr(np, name)(n), atol=1e-6)
    np.testing.assert_allclose(ops.kaiser(n, 5.0).numpy(), np.kaiser(n, 5.0), atol=1e-6)
    assert ops.hamming(n).dtype == "float32"


def test_logspace_geomspace():
    np.testing.assert_allclose(ops.logspace(0, 3, 4).numpy(), np.logspace(0, 3, 4), 1e-6)
    np.testing.assert_allclose(
        ops.logspace(1, 2, 5, endpoint=False, base=2).numpy(), np.logspace(1, 2, 5, False, 2), 1e-6
    )
    np.testing.assert_allclose(ops.geomspace(1, 1000, 4).numpy(), np.geomspace(1, 1000, 4), 1e-6)
    np.testing.assert_allclose(ops.geomspace(-2, -32, 5).numpy(), np.geomspace(-2, -32, 5), 1e-6)
    np.testing.assert_allclose(
        ops.geomspace([1.0, 2.0], [8.0, 32.0], 4, axis=1).numpy(),
        np.geomspace([1.0, 2.0], [8.0, 32.0], 4, axis=1),
        1e-6,
    )
    assert ops.geomspace(1, 10, 3, dtype="float64").dtype == "float64"
    with pytest.raises(ValueError, match="geomspace"):
        ops.geomspace(0, 10, 3)


# ------------------------------------------------------------------------------ segments
@pytest.mark.parametrize("name", ["segment_sum", "segment_max", "segment_min", "segment_prod"])
def test_segments_match_keras(name):
    keras = K()
    data = f32(6, 3)
    ids = np.array([0, 0, 2, 1, 1, 1])
    close(getattr(ops, name)(data, ids), getattr(keras.ops, name)(kt_(data), kt_(ids)))
    close(
        getattr(ops, name)(data, ids, num_segments=4)[:3],
        getattr(keras.ops, name)(kt_(data), kt_(ids), num_segments=4)[:3],
    )


def test_segments_drop_out_of_range_and_fill_empty():
    data = np.array([1.0, 2.0, 3.0, 4.0], "float32")
    ids = np.array([0, -1, 2, 5])
    np.testing.assert_array_equal(ops.segment_sum(data, ids, 3).numpy(), [1.0, 0.0, 3.0])
    np.testing.assert_array_equal(ops.segment_max(data, ids, 3).numpy(), [1.0, -np.inf, 3.0])
    np.testing.assert_array_equal(ops.segment_prod(data, ids, 3).numpy(), [1.0, 1.0, 3.0])
    ints = np.array([5, 7], "int32")
    assert ops.segment_min(ints, [1, 1], 2).numpy()[0] == np.iinfo(np.int32).max
    with pytest.raises(ValueError, match="segment_sum"):
        ops.segment_sum(data, ids[:3])


# ------------------------------------------------------------------------------ linalg
def _spd(n, batch=()):
    a = R.standard_normal(batch + (n, n))
    return a @ np.swapaxes(a, -1, -2) + n * np.eye(n)


def test_det_slogdet_logdet_match_numpy():
    a = R.standard_normal((2, 4, 4))
    np.testing.assert_allclose(ops.det(a).numpy(), np.linalg.det(a), 1e-10)
    s, l = ops.slogdet(a)
    ns, nl = np.linalg.slogdet(a)
    np.testing.assert_allclose(s.numpy(), ns)
    np.testing.assert_allclose(l.numpy(), nl, 1e-10)
    p = _spd(3)
    np.testing.assert_allclose(float(ops.logdet(p)), np.log(np.linalg.det(p)), 1e-10)
    with pytest.raises(ValueError, match="det"):
        ops.det(np.ones((2, 3)))


def test_cholesky_and_inverse():
    p = _spd(4, (2,))
    l = ops.cholesky(p).numpy()
    np.testing.assert_allclose(l, np.linalg.cholesky(p), 1e-10)
    np.testing.assert_allclose(ops.cholesky(p, upper=True).numpy(), np.swapaxes(l, -1, -2), 1e-10)
    np.testing.assert_allclose(ops.cholesky_inverse(l).numpy(), np.linalg.inv(p), 1e-8)
    u = np.swapaxes(l, -1, -2).copy()
    np.testing.assert_allclose(ops.cholesky_inverse(u, upper=True).numpy(), np.linalg.inv(p), 1e-8)
    with pytest.raises(ValueError, match="positive-definite"):
        ops.cholesky(-np.eye(3))


def test_solve_triangular():
    a = np.tril(R.standard_normal((4, 4))) + 4 * np.eye(4)
    b = R.standard_normal((4, 2))
    np.testing.assert_allclose(
        ops.solve_triangular(a, b, lower=True).numpy(), np.linalg.solve(a, b), 1e-10
    )
    # Only the named triangle is read.
    junk = a + np.triu(np.ones((4, 4)), 1)
    np.testing.assert_allclose(
        ops.solve_triangular(junk, b[:, 0], lower=True).numpy(), np.linalg.solve(a, b[:, 0]), 1e-10
    )
    np.testing.assert_allclose(
        ops.solve_triangular(a.T, b, lower=False).numpy(), np.linalg.solve(a.T, b), 1e-10
    )


@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (4, 4), (2, 5, 3)])
@pytest.mark.parametrize("mode", ["reduced", "complete"])
def test_qr_reconstructs(shape, mode):
    a = R.standard_normal(shape)
    q, r = ops.qr(a, mode=mode)
    q, r = q.numpy(), r.numpy()
    np.testing.assert_allclose(q @ r, a, atol=1e-10)
    eye = np.broadcast_to(np.eye(q.shape[-1]), q.shape[:-2] + (q.shape[-1],) * 2)
    np.testing.assert_allclose(np.swapaxes(q, -1, -2) @ q, eye, atol=1e-10)
    np.testing.assert_allclose(np.triu(r), r)
    nq, nr = np.linalg.qr(a, mode=mode)
    np.testing.assert_allclose(np.abs(r), np.abs(nr), atol=1e-10)


def test_eigh_eig_svd():
    p = _spd(4)
    w, v = ops.eigh(p)
    nw, _ = np.linalg.eigh(p)
    np.testing.assert_allclose(w.numpy(), nw, 1e-10)
    np.testing.assert_allclose(p @ v.numpy(), v.numpy() * w.numpy(), atol=1e-10)
    a = R.standard_normal((3, 3))
    ew, ev = ops.eig(a)
    assert ew.dtype == "complex128"
    np.testing.assert_allclose(a @ ev.numpy(), ev.numpy() * ew.numpy(), atol=1e-10)
    m = R.standard_normal((5, 3))
    u, s, vh = ops.svd(m)
    assert u.shape == (5, 5) and vh.shape == (3, 3)
    np.testing.assert_allclose(s.numpy(), np.linalg.svd(m, compute_uv=False), 1e-10)
    u, s, vh = ops.svd(m, full_matrices=False)
    np.testing.assert_allclose((u.numpy() * s.numpy()) @ vh.numpy(), m, atol=1e-10)
    np.testing.assert_allclose(ops.svd(m, compute_uv=False).numpy(), s.numpy(), 1e-12)


def test_pinv_lstsq_rank_lu():
    keras = K()
    m = R.standard_normal((5, 3))
    np.testing.assert_allclose(ops.pinv(m).numpy(), np.linalg.pinv(m), 1e-10)
    singular = np.array([[1.0, 2.0], [2.0, 4.0]])
    np.testing.assert_allclose(ops.pinv(singular).numpy(), np.linalg.pinv(singular), 1e-10)
    b = R.standard_normal((5, 2))
    np.testing.assert_allclose(ops.lstsq(m, b).numpy(), np.linalg.lstsq(m, b, rcond=None)[0], 1e-10)
    np.testing.assert_allclose(
        ops.lstsq(m, b[:, 0], rcond=1e-3).numpy(), np.linalg.lstsq(m, b[:, 0], rcond=1e-3)[0], 1e-10
    )
    assert int(ops.matrix_rank(singular)) == 1
    assert ops.matrix_rank(m).dtype == "int32"
    assert int(ops.matrix_rank(np.diag([1.0, 1e-3]), tol=1e-2)) == 1
    sq = R.standard_normal((4, 4)).astype("float32")
    close(ops.lu_factor(sq), keras.ops.lu_factor(kt_(sq)))


def test_jvp_matches_keras_and_forward_difference():
    keras = K()

    def f(x, y):
        return ops.sin(x) * y, ops.sum(x * x)

    x, y = f32(3), f32(3)
    tx, ty = f32(3), f32(3)
    out, t = ops.jvp(f, (x, y), (tx, ty))
    _, kt_t = keras.ops.jvp(
        lambda a, b: (keras.ops.sin(a) * b, keras.ops.sum(a * a)),
        (kt_(x), kt_(y)),
        (kt_(tx), kt_(ty)),
    )
    close(t, kt_t, tol=1e-5)
    np.testing.assert_allclose(out[0].numpy(), np.sin(x) * y, 1e-6)
    res = ops.jvp(lambda a: (ops.exp(a), "aux"), (x,), (tx,), has_aux=True)
    assert res[2] == "aux"
    np.testing.assert_allclose(res[1].numpy(), np.exp(x) * tx, 1e-5)
    with pytest.raises(ValueError, match="jvp"):
        ops.jvp(ops.exp, (x,), (tx, ty))


# ------------------------------------------------------------------------------ fft, signal
def test_fft_family_matches_numpy():
    re, im = f32(2, 6), f32(2, 6)
    z = re.astype("complex64") + 1j * im
    for name, ref in (("fft", np.fft.fft), ("fft2", np.fft.fft2), ("ifft2", np.fft.ifft2)):
        r, i = getattr(ops, name)((re, im))
        np.testing.assert_allclose(r.numpy() + 1j * i.numpy(), ref(z), atol=1e-4)
    for n in (None, 4, 9):
        r, i = ops.rfft(re, n)
        np.testing.assert_allclose(r.numpy() + 1j * i.numpy(), np.fft.rfft(re, n), atol=1e-4)
        np.testing.assert_allclose(ops.irfft((re, im), n).numpy(), np.fft.irfft(z, n), atol=1e-5)
    with pytest.raises(ValueError, match="fft"):
        ops.fft(re)
    with pytest.raises(ValueError, match="same shape"):
        ops.fft((re, im[:, :3]))


@pytest.mark.parametrize("args", [(8, 4, 8), (6, 3, 8)])
@pytest.mark.parametrize("center", [True, False])
@pytest.mark.parametrize("window", ["hann", "hamming", None])
def test_stft_istft_match_keras(args, center, window):
    keras = K()
    x = f32(2, 40)
    ours = ops.stft(x, *args, window=window, center=center)
    theirs = keras.ops.stft(kt_(x), *args, window=window, center=center)
    close(ours, theirs, tol=1e-4)
    close(
        ops.istft(ours, *args, window=window, center=center),
        keras.ops.istft(theirs, *args, window=window, center=center),
        tol=1e-4,
    )


def test_stft_roundtrip_and_extract_sequences():
    keras = K()
    x = f32(40)
    np.testing.assert_allclose(
        ops.istft(ops.stft(x, 8, 2, 8), 8, 2, 8, length=40).numpy(), x, atol=1e-5
    )
    s = f32(2, 11)
    close(ops.extract_sequences(s, 4, 3), keras.ops.extract_sequences(kt_(s), 4, 3))
    with pytest.raises(ValueError, match="extract_sequences"):
        ops.extract_sequences(s, 12, 1)


def test_unfold_fold_match_keras():
    keras = K()
    img = f32(2, 3, 7, 6)
    close(
        ops.unfold(img, (2, 3), dilation=(1, 2), padding=1, stride=2),
        keras.ops.unfold(kt_(img), (2, 3), dilation=(1, 2), padding=1, stride=2),
    )
    cols = f32(2, 12, 9)
    close(
        ops.fold(cols, (5, 5), 2, stride=2, padding=1),
        keras.ops.fold(kt_(cols), (5, 5), 2, stride=2, padding=1),
    )


# ------------------------------------------------------------------------------ nn
@pytest.mark.parametrize(
    "kw",
    [
        {},
        {"is_causal": True, "scale": 0.3},
        {"mask": R.random((2, 1, 4, 5)) > 0.3, "is_causal": True},
        {"bias": f32(1, 6, 4, 5)},
    ],
    ids=["plain", "causal", "mask+causal", "bias"],
)
@pytest.mark.parametrize("kv_heads", [6, 3, 1])
def test_dot_product_attention_matches_keras(kw, kv_heads):
    keras = K()
    q, k, v = f32(2, 4, 6, 8), f32(2, 5, kv_heads, 8), f32(2, 5, kv_heads, 8)
    theirs = keras.ops.dot_product_attention(
        kt_(q), kt_(k), kt_(v), **{n: (kt_(a) if hasattr(a, "shape") else a) for n, a in kw.items()}
    )
    close(ops.dot_product_attention(q, k, v, **kw), theirs, tol=1e-5)


def test_dot_product_attention_fully_masked_rows_and_errors():
    q = f32(1, 2, 1, 4)
    kv = f32(1, 3, 1, 4)
    out = ops.dot_product_attention(q, kv, kv, mask=np.zeros((1, 1, 2, 3), bool)).numpy()
    np.testing.assert_allclose(out[0, :, 0], np.broadcast_to(kv[0, :, 0].mean(0), (2, 4)), 1e-5)
    with pytest.raises(ValueError, match="bias"):
        ops.dot_product_attention(
            q, kv, kv, bias=np.zeros((1, 1, 2, 3)), mask=np.ones((1, 1, 2, 3))
        )
    with pytest.raises(ValueError, match="4-D"):
        ops.dot_product_attention(q[0], kv, kv)
    with pytest.raises(ValueError, match="divides"):
        ops.dot_product_attention(f32(1, 2, 3, 4), f32(1, 3, 2, 4), f32(1, 3, 2, 4))


def test_normalizations_match_keras():
    keras = K()
    x, g, b = f32(2, 3, 5), f32(5), f32(5)
    close(ops.layer_normalization(x, g, b), keras.ops.layer_normalization(x, g, b))
    g2 = f32(3, 5)
    close(
        ops.layer_normalization(x, g2, g2, axis=(1, 2), epsilon=1e-3),
        keras.ops.layer_normalization(x, g2, g2, axis=(1, 2), epsilon=1e-3),
    )
    close(ops.rms_normalization(x, g), keras.ops.rms_normalization(x, g))
    close(ops.rms_normalization(x, axis=(1, 2)), keras.ops.rms_normalization(x, axis=(1, 2)))
    h = x.astype("float16")
    close(ops.layer_normalization(h), keras.ops.layer_normalization(h), tol=1e-2)
    # A non-trailing axis: parameters are broadcast along it.
    g3 = f32(3)
    got = ops.layer_normalization(x, g3, axis=1, epsilon=1e-6).numpy()
    m, s = x.mean(1, keepdims=True), x.var(1, keepdims=True)
    np.testing.assert_allclose(got, (x - m) / np.sqrt(s + 1e-6) * g3[:, None], 1e-4, 1e-5)


@pytest.mark.parametrize("fmt", ["channels_last", "channels_first"])
def test_depth_space_match_keras(fmt):
    keras = K()
    x = f32(2, 8, 6, 12)
    close(ops.depth_to_space(x, 2, fmt), keras.ops.depth_to_space(kt_(x), 2, fmt))
    close(ops.space_to_depth(x, 2, fmt), keras.ops.space_to_depth(kt_(x), 2, fmt))
    np.testing.assert_array_equal(
        ops.space_to_depth(ops.depth_to_space(x, 2, fmt), 2, fmt).numpy(), x
    )
    with pytest.raises(ValueError, match="depth_to_space"):
        ops.depth_to_space(f32(1, 2, 2, 3), 2)


@pytest.mark.parametrize(
    "shape,size",
    [((2, 7, 3), 3), ((2, 7, 5, 3), (2, 3)), ((2, 9, 5, 3), 4), ((1, 5, 6, 7, 2), (2, 3, 4))],
)
@pytest.mark.parametrize("fmt", ["channels_last", "channels_first"])
def test_adaptive_pools_match_keras(shape, size, fmt):
    keras = K()
    x = f32(*shape)
    close(
        ops.adaptive_average_pool(x, size, fmt), keras.ops.adaptive_average_pool(kt_(x), size, fmt)
    )
    close(ops.adaptive_max_pool(x, size, fmt), keras.ops.adaptive_max_pool(kt_(x), size, fmt))


def _sparsemax_ref(z):
    """The projection of z onto the simplex (Martins and Astudillo, 2016, Algorithm 1)."""
    zs = np.sort(z)[::-1]
    cs = np.cumsum(zs)
    k = np.arange(1, len(z) + 1)
    kz = k[1 + k * zs > cs].max()
    tau = (cs[kz - 1] - 1) / kz
    return np.maximum(z - tau, 0)


def test_sparsemax_projects_onto_the_simplex():
    x = f32(4, 7) * 2
    got = ops.sparsemax(x).numpy()
    np.testing.assert_allclose(got, np.stack([_sparsemax_ref(r) for r in x]), atol=1e-6)
    np.testing.assert_allclose(got.sum(-1), 1.0, atol=1e-6)
    got0 = ops.sparsemax(x, axis=0).numpy()
    np.testing.assert_allclose(got0, np.stack([_sparsemax_ref(c) for c in x.T], 1), atol=1e-6)
    np.testing.assert_array_equal(ops.sparsemax([-1.0, 0.0, 1.0]).numpy(), [0.0, 0.0, 1.0])


def test_psnr_matches_keras():
    keras = K()
    x = f32(2, 4, 4, 3)
    close(ops.psnr(x, x * 0.9, 1.0), keras.ops.psnr(kt_(x), kt_(x * 0.9), 1.0))
    with pytest.raises(ValueError, match="psnr"):
        ops.psnr(x, x[0], 1.0)


def test_ctc_loss_and_decode_match_keras():
    keras = K()
    tgt = np.array([[1, 2, 2, 0], [3, 1, 0, 0]])
    out = f32(2, 8, 5)
    tl, ol = np.array([3, 2]), np.array([8, 6])
    close(ops.ctc_loss(tgt, out, tl, ol), keras.ops.ctc_loss(kt_(tgt), kt_(out), kt_(tl), kt_(ol)))
    close(
        ops.ctc_loss(tgt, out, tl, ol, mask_index=4),
        keras.ops.ctc_loss(kt_(tgt), kt_(out), kt_(tl), kt_(ol), mask_index=4),
    )
    # Three repeats need five frames: three frames cannot align.
    assert np.isinf(ops.ctc_loss([[1, 1, 1]], out[:1, :3], [3], [3]).numpy()[0])
    close(
        ops.ctc_decode(out, ol),
        keras.ops.ctc_decode(kt_(out), kt_(ol)),
    )
    close(
        ops.ctc_decode(out, ol, merge_repeated=False),
        keras.ops.ctc_decode(kt_(out), kt_(ol), merge_repeated=False),
    )
    close(
        ops.ctc_decode(out, ol, strategy="beam_search", beam_width=50, top_paths=3),
        keras.ops.ctc_decode(kt_(out), kt_(ol), strategy="beam_search", beam_width=50, top_paths=3),
        tol=1e-4,
    )
    with pytest.raises(ValueError, match="strategy"):
        ops.ctc_decode(out, ol, strategy="best")


# ------------------------------------------------------------------------------ core
def test_associative_scan():
    keras = K()
    x = f32(6, 3)
    np.testing.assert_allclose(ops.associative_scan(ops.add, x).numpy(), np.cumsum(x, 0), 1e-5)
    close(
        ops.associative_scan(ops.add, x, reverse=True, axis=1),
        keras.ops.associative_scan(keras.ops.add, kt_(x), reverse=True, axis=1),
    )
    m = R.standard_normal((7, 2, 2))
    got = ops.associative_scan(ops.matmul, m).numpy()
    want = [m[0]]
    for i in range(1, 7):
        want.append(want[-1] @ m[i])
    np.testing.assert_allclose(got, np.stack(want), 1e-10)
    tree_out = ops.associative_scan(
        lambda a, b: {"s": a["s"] + b["s"], "m": ops.maximum(a["m"], b["m"])},
        {"s": x[:, 0], "m": x[:, 1]},
    )
    np.testing.assert_allclose(tree_out["m"].numpy(), np.maximum.accumulate(x[:, 1]))


def test_vectorize_and_rearrange():
    keras = K()
    f = ops.vectorize(lambda a, b: a * 10 + b)
    np.testing.assert_array_equal(f([1, 2], [[3], [4]]).numpy(), [[13, 23], [14, 24]])
    dot = ops.vectorize(lambda a, b: ops.sum(a * b), signature="(n),(n)->()")
    a, b = f32(3, 4), f32(4)
    np.testing.assert_allclose(dot(a, b).numpy(), a @ b, 1e-5)
    with pytest.raises(ValueError, match="core dimension"):
        dot(a, f32(5))
    imgs = f32(4, 6, 8, 3)
    for pattern, kw in (
        ("b h w c -> b c h w", {}),
        ("b h w c -> (b h) w c", {}),
        ("b (h1 h) (w1 w) c -> (b h1 w1) h w c", {"h1": 2, "w1": 2}),
        ("b (h h1) (w w1) c -> b h w (c h1 w1)", {"h1": 2, "w1": 2}),
    ):
        close(ops.rearrange(imgs, pattern, **kw), keras.ops.rearrange(kt_(imgs), pattern, **kw))
    with pytest.raises(ValueError, match="rearrange"):
        ops.rearrange(imgs, "b h w -> b w h")


# ------------------------------------------------------------------------------ image
IMG = R.random((2, 9, 7, 3)).astype("float32")


@pytest.mark.parametrize("interpolation", ["nearest", "bilinear", "bicubic"])
@pytest.mark.parametrize("antialias", [False, True])
@pytest.mark.parametrize("size", [(4, 5), (13, 11)])
def test_resize_matches_keras(interpolation, antialias, size):
    keras = K()
    close(
        ops.image.resize(IMG, size, interpolation, antialias=antialias),
        keras.ops.image.resize(kt_(IMG), size, interpolation, antialias=antialias),
        tol=1e-4,
    )


def test_resize_options_match_keras():
    keras = K()
    ki = keras.ops.image
    close(
        ops.image.resize(IMG, (4, 8), crop_to_aspect_ratio=True),
        ki.resize(kt_(IMG), (4, 8), crop_to_aspect_ratio=True),
    )
    close(
        ops.image.resize(IMG, (4, 8), pad_to_aspect_ratio=True, fill_value=0.5),
        ki.resize(kt_(IMG), (4, 8), pad_to_aspect_ratio=True, fill_value=0.5),
    )
    cf = np.moveaxis(IMG, -1, 1)
    close(
        ops.image.resize(cf, (4, 5), data_format="channels_first"),
        ki.resize(kt_(cf), (4, 5), data_format="channels_first"),
    )
    u8 = (R.random((9, 7, 3)) * 255).astype("uint8")
    close(ops.image.resize(u8, (5, 4), "bicubic"), ki.resize(kt_(u8), (5, 4), "bicubic"), tol=1.01)
    with pytest.raises(ValueError, match="interpolation"):
        ops.image.resize(IMG, (4, 4), "lanczos7")


def test_colour_conversions_match_keras():
    keras = K()
    ki = keras.ops.image
    close(ops.image.rgb_to_grayscale(IMG), ki.rgb_to_grayscale(kt_(IMG)))
    close(ops.image.rgb_to_hsv(IMG), ki.rgb_to_hsv(kt_(IMG)))
    close(ops.image.hsv_to_rgb(IMG), ki.hsv_to_rgb(kt_(IMG)))
    np.testing.assert_allclose(
        ops.image.hsv_to_rgb(ops.image.rgb_to_hsv(IMG)).numpy(), IMG, atol=1e-5
    )
    with pytest.raises(ValueError, match="float"):
        ops.image.rgb_to_hsv(np.ones((2, 2, 3), "int32"))


# Coefficients chosen so that no sample lands exactly half-way between pixels (where nearest
# rounding would depend on float evaluation order).
TRANSFORMS = np.array(
    [[1.1, 0.23, -1.37, -0.13, 0.91, 1.71, 0, 0], [0.93, -0.21, 1.03, 0.31, 1.07, -0.97, 0, 0]],
    "float32",
)


@pytest.mark.parametrize("interpolation", ["nearest", "bilinear"])
@pytest.mark.parametrize("fill_mode", ["constant", "nearest", "wrap", "mirror", "reflect"])
def test_affine_transform_and_map_coordinates_match_keras(interpolation, fill_mode):
    keras = K()
    ki = keras.ops.image
    close(
        ops.image.affine_transform(IMG, TRANSFORMS, interpolation, fill_mode, 0.3),
        ki.affine_transform(kt_(IMG), kt_(TRANSFORMS), interpolation, fill_mode, 0.3),
    )
    x = f32(5, 6)
    coords = R.uniform(-2.3, 8.3, (2, 3, 4)).astype("float32")
    order = 0 if interpolation == "nearest" else 1
    close(
        ops.image.map_coordinates(x, coords, order, fill_mode, 0.5),
        ki.map_coordinates(kt_(x), kt_(coords), order, fill_mode, 0.5),
    )


def test_projective_and_perspective_transforms():
    keras = K()
    start = np.array([[0, 0], [6, 0], [0, 8], [6, 8]], "float32")
    end = np.array([[1, 0], [5, 1], [0, 7], [6, 8]], "float32")
    close(
        ops.image.perspective_transform(IMG, start, end),
        keras.ops.image.perspective_transform(kt_(IMG), kt_(start), kt_(end)),
        tol=1e-3,
    )
    # The identity correspondence leaves the image unchanged.
    np.testing.assert_allclose(
        ops.image.perspective_transform(IMG, start, start).numpy(), IMG, atol=1e-5
    )
    # A pure projective term: output (x, y) reads input (x / k, y / k), k = 1 + 0.1 x.
    t = np.array([1, 0, 0, 0, 1, 0, 0.1, 0], "float32")
    got = ops.image.affine_transform(IMG[0], t, "nearest").numpy()
    y, x = 4, 5
    k = 1 + 0.1 * x
    np.testing.assert_array_equal(got[y, x], IMG[0, int(np.round(y / k)), int(np.round(x / k))])


def test_pad_crop_patches_filters_ssim_match_keras():
    keras = K()
    ki = keras.ops.image
    close(
        ops.image.pad_images(IMG, 1, 2, None, 0, 12, None),
        ki.pad_images(kt_(IMG), 1, 2, None, 0, 12, None),
    )
    close(
        ops.image.crop_images(IMG, 1, 2, None, 0, 5, None),
        ki.crop_images(kt_(IMG), 1, 2, None, 0, 5, None),
    )
    with pytest.raises(ValueError, match="exactly two"):
        ops.image.pad_images(IMG, 1, 1, 1, 1, 20, 20)
    close(ops.image.extract_patches(IMG, (3, 2)), ki.extract_patches(kt_(IMG), (3, 2)))
    close(
        ops.image.extract_patches(IMG, 3, (2, 2), padding="same"),
        ki.extract_patches(kt_(IMG), 3, (2, 2), padding="same"),
    )
    vol = R.random((2, 6, 5, 4, 2)).astype("float32")
    close(ops.image.extract_patches_3d(vol, (2, 2, 2)), ki.extract_patches_3d(kt_(vol), (2, 2, 2)))
    close(
        ops.image.gaussian_blur(IMG, (5, 5), (1.5, 1.5)),
        ki.gaussian_blur(kt_(IMG), (5, 5), (1.5, 1.5), data_format="channels_last"),
    )
    close(
        ops.image.sobel_edges(IMG), ki.sobel_edges(kt_(IMG), data_format="channels_last"), tol=1e-4
    )
    a = R.random((2, 16, 16, 3)).astype("float32")
    close(ops.image.ssim(a, a * 0.8 + 0.1), ki.ssim(kt_(a), kt_(a * 0.8 + 0.1)))


@pytest.mark.parametrize("method", ["linear", "cubic", "lanczos3", "lanczos5"])
@pytest.mark.parametrize("antialias", [True, False])
def test_scale_and_translate_matches_keras(method, antialias):
    keras = K()
    scale, shift = np.array([0.6, 1.7], "float32"), np.array([0.3, -1.0], "float32")
    close(
        ops.image.scale_and_translate(IMG, (2, 5, 12, 3), scale, shift, (1, 2), method, antialias),
        keras.ops.image.scale_and_translate(
            kt_(IMG), (2, 5, 12, 3), kt_(scale), kt_(shift), (1, 2), method, antialias
        ),
    )


# ------------------------------------------------------------------------------ tracing
TRACED = {
    "quantile": lambda a: ops.quantile(a, [0.2, 0.7], axis=1),
    "nanmedian": lambda a: ops.nanmedian(a, axis=0),
    "histogram": lambda a: ops.histogram(a, 4),
    "segment_max": lambda a: ops.segment_max(a, [0, 1, 1], num_segments=3),
    "qr": lambda a: ops.qr(a),
    "svd": lambda a: ops.svd(a, full_matrices=False),
    "stft": lambda a: ops.stft(ops.reshape(a, (12,)), 4, 2, 4),
    "attention": lambda a: ops.dot_product_attention(
        ops.reshape(a, (1, 3, 1, 4)),
        ops.reshape(a, (1, 3, 1, 4)),
        ops.reshape(a, (1, 3, 1, 4)),
        is_causal=True,
    ),
    "ctc_loss": lambda a: ops.ctc_loss([[1]], ops.reshape(a, (1, 3, 4)), [1], [3]),
    "resize": lambda a: ops.image.resize(ops.reshape(a, (3, 4, 1)), (5, 2)),
    "unique_size": lambda a: ops.unique(ops.round(a), size=3),
}


@pytest.mark.parametrize("name", list(TRACED))
def test_traced_equals_eager(name):
    fn = TRACED[name]
    x = f32(3, 4)
    eager, traced = fn(x), kt.function(fn)(x)
    eager = eager if isinstance(eager, (tuple, list)) else [eager]
    traced = traced if isinstance(traced, (tuple, list)) else [traced]
    for e, t in zip(eager, traced):
        np.testing.assert_allclose(t.numpy(), e.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    "fn,match",
    [
        (lambda a: ops.unique(a), "unique.*size="),
        (lambda a: ops.bincount(ops.cast(ops.abs(a) * 3, "int32")), "bincount"),
        (lambda a: ops.segment_sum(a, ops.cast(ops.abs(a[:, 0]), "int32")), "num_segments"),
        (lambda a: ops.ctc_decode(ops.reshape(a, (1, 3, 4)), [3]), "ctc_decode"),
    ],
)
def test_data_dependent_ops_refuse_tracing(fn, match):
    with pytest.raises(ValueError, match=match):
        kt.function(fn)(f32(3, 4))


def test_ops_keep_torch_state():
    state = torch.get_rng_state()
    ops.quantile(f32(5), 0.5)
    ops.image.resize(IMG, (3, 3))
    assert torch.equal(state, torch.get_rng_state())
    assert torch.is_grad_enabled()


def test_affine_transform_indexes_large_half_precision_images_exactly():
    # Flat gather indices are int64: in float16 they would stop being exact past 2048 pixels.
    img = (np.arange(2 * 48 * 64 * 1) % 251).astype("float16").reshape(2, 48, 64, 1)
    identity = np.array([[1, 0, 0, 0, 1, 0, 0, 0]] * 2, "float32")
    for method in ("nearest", "bilinear"):
        out = kt.ops.image.affine_transform(img, identity, interpolation=method)
        np.testing.assert_array_equal(out.numpy(), img)
