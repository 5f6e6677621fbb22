"""The CPU routes' measured kernel choices (`ops._cpu_choice`): a float32 product runs on the
kernel that measured the fastest for its signature, measured once; with measuring off, the
fixed rules decide. Made-up round times drive the choices here, so each test knows which
kernel must run; the values are checked against float64 numpy whichever runs."""

import numpy as np
import pytest

import keratron
from keratron.ops import _cpu_choice, linalg
from keratron.ops.linalg import matmul_p

RNG = np.random.default_rng(5)


class _Named:
    """A candidate kernel that a made-up timer can tell apart."""

    def __init__(self, name, fn):
        self.name, self.fn = name, fn

    def __call__(self):
        return self.fn()


@pytest.fixture
def times(monkeypatch):
    """Measuring on, with `times[name]` seconds per round for the candidate `name`; records
    each signature's candidate lists in `times.built`."""
    made_up = {}
    built = []
    real = linalg._gemm_candidates

    def named(x, w, b):
        found = {name: _Named(name, fn) for name, fn in real(x, w, b).items()}
        built.append(sorted(found))
        return found

    def timer(fn, calls):
        fn()
        return made_up[fn.name]

    monkeypatch.setattr(linalg, "_gemm_candidates", named)
    monkeypatch.setattr(_cpu_choice, "_best_round", timer)
    monkeypatch.setattr(keratron.config, "_cpu_kernel_benchmark", True)
    _cpu_choice.forget()
    made_up_times = _Times(made_up, built)
    yield made_up_times
    _cpu_choice.forget()


class _Times(dict):
    def __init__(self, made_up, built):
        super().__init__()
        self.made_up, self.built = made_up, built

    def __setitem__(self, name, seconds):
        self.made_up[name] = seconds


@pytest.fixture
def onednn_calls(monkeypatch):
    calls = []
    real = linalg._onednn_linear
    monkeypatch.setattr(linalg, "_onednn_linear", lambda *a: calls.append(1) or real(*a))
    return calls


def _operands(m, k, n, bias=True):
    x = RNG.standard_normal((m, k)).astype("float32")
    w = RNG.standard_normal((k, n)).astype("float32")
    b = RNG.standard_normal((n,)).astype("float32") if bias else None
    want = x.astype("float64") @ w.astype("float64") + (0 if b is None else b)
    conv = keratron.convert_to_tensor
    return conv(x), conv(w), (None if b is None else conv(b)), want


def _close(got, want, k):
    np.testing.assert_allclose(np.asarray(got), want, rtol=0, atol=2e-5 * np.sqrt(k) * 10)


@pytest.mark.parametrize("winner", ["blas", "onednn"])
def test_a_product_runs_on_the_kernel_measured_fastest(times, onednn_calls, winner):
    # 128x784 @ 784x512 + b, the mlp's first Dense: oneDNN by the fixed rule.
    times["blas"], times["onednn"] = (1.0, 3.0) if winner == "blas" else (3.0, 1.0)
    x, w, b, want = _operands(128, 784, 512)
    assert linalg.onednn_gemm(x._value, w._value, b._value)
    _close(matmul_p.bind(x, w, b, activation=None), want, 784)
    assert times.built == [["blas", "onednn"]]  # measured on the first call
    onednn_calls.clear()
    for _ in range(2):
        _close(matmul_p.bind(x, w, b, activation=None), want, 784)
    assert times.built == [["blas", "onednn"]]  # and looked up afterwards
    assert len(onednn_calls) == (2 if winner == "onednn" else 0)


def test_the_fixed_rule_keeps_its_place_within_the_margin(times, onednn_calls):
    times["blas"], times["onednn"] = 0.95, 1.0  # BLAS 5% faster: not enough to move
    x, w, b, want = _operands(128, 784, 512)
    _close(matmul_p.bind(x, w, b, activation=None), want, 784)
    onednn_calls.clear()
    _close(matmul_p.bind(x, w, b, activation=None), want, 784)
    assert onednn_calls == [1]


def test_each_signature_is_measured_once(times):
    times["blas"], times["onednn"] = 1.0, 2.0
    a = _operands(128, 784, 512)
    c = _operands(64, 784, 512)  # another batch size: another signature
    for _ in range(3):
        matmul_p.bind(*a[:3], activation=None)
        matmul_p.bind(*c[:3], activation=None)
        matmul_p.bind(*a[:2], None, activation=None)  # no bias: another signature
    assert len(times.built) == 3


def test_a_narrow_weight_gradient_may_run_in_the_narrow_form(times, onednn_calls):
    # x.T @ g with g (128, 10): a classifier head's weight gradient, three candidates.
    times["blas"], times["onednn"], times["narrow"] = 3.0, 2.0, 1.0
    x = RNG.standard_normal((128, 512)).astype("float32")
    g = RNG.standard_normal((128, 10)).astype("float32")
    tx, tg = keratron.convert_to_tensor(x), keratron.convert_to_tensor(g)
    xt = keratron.ops.transpose(tx)
    matmul_p.bind(xt, tg, None, activation=None)
    assert times.built == [["blas", "narrow", "onednn"]]
    onednn_calls.clear()
    got = matmul_p.bind(xt, tg, None, activation=None)
    assert not onednn_calls
    assert linalg.gemm_kernel(xt._value, tg._value, None) == "narrow"
    _close(got, x.T.astype("float64") @ g.astype("float64"), 128)


@pytest.mark.parametrize("winner", ["blas", "onednn"])
def test_a_compiled_plan_follows_the_measured_choice(times, onednn_calls, winner):
    # With BLAS measured faster, a product the fixed rule gives oneDNN (2 MB: large enough
    # to keep) is written into a kept buffer; with oneDNN faster, the plan runs it on oneDNN.
    # Same values as eagerly.
    times["blas"], times["onednn"] = (1.0, 3.0) if winner == "blas" else (3.0, 1.0)
    x, w, _, want = _operands(512, 256, 1024, bias=False)
    assert linalg.onednn_gemm(x._value, w._value, None)

    def product(x, w):
        return keratron.ops.sum(matmul_p.bind(x, w, None, activation=None), axis=0)

    f = keratron.function(product)
    eager = np.asarray(product(x, w))
    onednn_calls.clear()
    for _ in range(3):
        assert np.array_equal(np.asarray(f(x, w)), eager)
    assert bool(onednn_calls) == (winner == "onednn")
    if winner == "blas":
        assert f.get_concrete_graph(x, w).kept_buffers
    np.testing.assert_allclose(eager, want.sum(axis=0), rtol=0, atol=2e-2)


def test_measuring_off_takes_the_fixed_rule(times, onednn_calls, monkeypatch):
    monkeypatch.setattr(keratron.config, "_cpu_kernel_benchmark", False)
    times["blas"], times["onednn"] = 1.0, 3.0
    x, w, b, want = _operands(128, 784, 512)
    _close(matmul_p.bind(x, w, b, activation=None), want, 784)
    assert not times.built
    assert onednn_calls == [1]  # the fixed rule's oneDNN, though BLAS would time faster


def test_small_products_are_not_measured(times):
    times["blas"], times["onednn"] = 1.0, 3.0
    x, w, b, want = _operands(32, 32, 64)
    _close(matmul_p.bind(x, w, b, activation=None), want, 32)
    assert not times.built


def test_past_its_quota_a_route_takes_the_fixed_rule(times, onednn_calls, monkeypatch):
    monkeypatch.setattr(_cpu_choice, "_MAX_SIGNATURES", 1)
    times["blas"], times["onednn"] = 1.0, 3.0
    matmul_p.bind(*_operands(128, 784, 512)[:3], activation=None)
    onednn_calls.clear()
    x, w, b, want = _operands(96, 784, 512)
    _close(matmul_p.bind(x, w, b, activation=None), want, 784)
    assert len(times.built) == 1
    assert onednn_calls == [1]


def test_real_timing_picks_a_candidate_with_the_right_values(monkeypatch):
    monkeypatch.setattr(keratron.config, "_cpu_kernel_benchmark", True)
    _cpu_choice.forget()
    x, w, b, want = _operands(128, 784, 512)
    for _ in range(2):
        _close(matmul_p.bind(x, w, b, activation=None), want, 784)
    assert set(_cpu_choice._choices.values()) <= {"blas", "onednn"}
    assert len(_cpu_choice._choices) == 1
    _cpu_choice.forget()


def test_measure_prefers_the_default_on_ties_and_rotates_the_order():
    order = []

    def timer(fn, calls):
        order.append(fn.name)
        fn()
        return 1.0

    noop = {name: _Named(name, lambda: None) for name in ("a", "b", "c")}
    assert _cpu_choice.measure(noop, "b", 1, timer=timer) == "b"
    assert order[:3] == ["a", "b", "c"] and order[3:6] == ["b", "c", "a"]


def test_environment_variable_is_validated(monkeypatch):
    monkeypatch.setattr(keratron.config, "_cpu_kernel_benchmark", None)
    monkeypatch.setenv("KERATRON_CPU_KERNEL_BENCHMARK", "0")
    assert not keratron.config.cpu_kernel_benchmark()
    monkeypatch.setenv("KERATRON_CPU_KERNEL_BENCHMARK", "maybe")
    with pytest.raises(ValueError, match="KERATRON_CPU_KERNEL_BENCHMARK"):
        keratron.config.cpu_kernel_benchmark()


def test_a_product_the_candidates_cannot_all_compute_keeps_the_fixed_rule(times):
    # bfloat16 operands: oneDNN's float32 inner product is not a candidate, nothing is timed.
    times["blas"], times["onednn"] = 3.0, 1.0
    x = RNG.standard_normal((128, 784)).astype("float32")
    w = RNG.standard_normal((784, 512)).astype("float32")
    tx = keratron.ops.cast(keratron.convert_to_tensor(x), "bfloat16")
    tw = keratron.ops.cast(keratron.convert_to_tensor(w), "bfloat16")
    for _ in range(2):
        got = matmul_p.bind(tx, tw, None, activation=None)
    assert not times.built
    assert list(_cpu_choice._choices.values()) == ["blas"]
    want = np.asarray(keratron.ops.cast(tx, "float32")) @ np.asarray(
        keratron.ops.cast(tw, "float32")
    )
    got = np.asarray(keratron.ops.cast(got, "float32"))
    np.testing.assert_allclose(got, want, rtol=0, atol=0.02 * np.abs(want).max())
