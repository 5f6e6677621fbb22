"""The dispatch contract for Triton routes, checked in the interpreter process."""

import contextlib

import numpy as np
import pytest
import torch

import keratron as kt
from keratron import triton_kernels
from keratron.autodiff.primitive import PRIMITIVES
from tests.conftest import require_installed


def test_every_route_module_registers_its_routes_without_importing_triton():
    import importlib
    import subprocess
    import sys

    routes = {
        name: prim.kernel.__module__ for name, prim in PRIMITIVES.items() if prim.kernel is not None
    }
    assert routes == {
        "matmul": "keratron.triton_kernels.matmul",
        "conv": "keratron.triton_kernels.conv2d",
        "conv_grad_input": "keratron.triton_kernels.conv2d",
        "conv_grad_filter": "keratron.triton_kernels.conv2d",
        "lstm": "keratron.triton_kernels.lstm",
        "lstm_grad": "keratron.triton_kernels.lstm",
        "gru": "keratron.triton_kernels.gru",
        "gru_grad": "keratron.triton_kernels.gru",
        "softmax_cross_entropy": "keratron.triton_kernels.softmax_xent",
        "softmax_cross_entropy_grad": "keratron.triton_kernels.softmax_xent",
    }
    for module in triton_kernels.ROUTE_MODULES:
        assert importlib.import_module(f"keratron.triton_kernels.{module}").__all__
    code = "import sys, keratron; assert 'triton' not in sys.modules, 'triton imported'"
    subprocess.run([sys.executable, "-c", code], check=True, env={"PATH": ""})


def test_fallback_backend_never_launches():
    kt.config.set_kernel_backend("fallback")
    triton_kernels.reset_launch_counts()
    try:
        a = kt.convert_to_tensor(np.ones((3, 4), "float32"))
        kt.ops.matmul(a, kt.ops.transpose(a))
        assert triton_kernels.launch_counts() == {}
    finally:
        kt.config.set_kernel_backend(None)


def test_unknown_backend_is_rejected():
    with pytest.raises(ValueError, match="Unknown kernel backend"):
        kt.config.set_kernel_backend("cuda")


class _Slowed:
    """Wraps a primitive implementation so that each call takes at least `seconds`."""

    def __init__(self, fn, seconds):
        self.fn, self.seconds, self.calls = fn, seconds, 0

    def __call__(self, *vals, **params):
        import time

        self.calls += 1
        time.sleep(self.seconds)
        return self.fn(*vals, **params)


def _matmul_operands(rows):
    rng = np.random.default_rng(rows)
    x = torch.as_tensor(rng.standard_normal((rows, 7)).astype("float32"))
    w = torch.as_tensor(rng.standard_normal((7, 5)).astype("float32"))
    return [x, w, None], {"activation": "relu"}


def test_auto_selection_keeps_the_faster_and_measures_once(monkeypatch):
    from keratron.ops import _dispatch

    prim = PRIMITIVES["matmul"]
    _dispatch.clear_kernel_choices()
    # A fallback slowed well past the kernel: the kernel is kept.
    slow_impl = _Slowed(prim.impl, 0.5)
    monkeypatch.setattr(prim, "impl", slow_impl)
    vals, params = _matmul_operands(6)
    triton_kernels.reset_launch_counts()
    out = _dispatch._run_faster(prim, vals, params, timer=_dispatch._wall_time)
    ref = slow_impl.fn(*vals, **params)
    assert torch.allclose(out, ref, atol=1e-5)
    ((key, choice),) = _dispatch.kernel_choices().items()
    assert key[0] == "matmul" and choice == "kernel"
    measured = triton_kernels.launch_counts()["matmul"]
    assert measured == 1 + _dispatch._TIMED_RUNS and slow_impl.calls == 1 + _dispatch._TIMED_RUNS
    # Later calls with this signature run the kernel alone, without measuring again.
    _dispatch._run_faster(prim, vals, params, timer=_dispatch._wall_time)
    assert triton_kernels.launch_counts()["matmul"] == measured + 1
    assert slow_impl.calls == 1 + _dispatch._TIMED_RUNS
    monkeypatch.undo()

    # Interpreted Triton is far slower than torch's CPU matmul: a new signature (other rows)
    # chooses the fallback, and its later calls return None (run the fallback) at once.
    vals, params = _matmul_operands(9)
    _dispatch._run_faster(prim, vals, params, timer=_dispatch._wall_time)
    assert sorted(_dispatch.kernel_choices().values()) == ["fallback", "kernel"]
    triton_kernels.reset_launch_counts()
    assert _dispatch._run_faster(prim, vals, params, timer=_dispatch._wall_time) is None
    assert triton_kernels.launch_counts() == {}
    _dispatch.clear_kernel_choices()
    assert _dispatch.kernel_choices() == {}


def test_auto_selection_of_an_unsupported_case_is_the_fallback():
    from keratron.ops import _dispatch

    _dispatch.clear_kernel_choices()
    x = torch.ones((3, 4), dtype=torch.int32)
    assert (
        _dispatch._run_faster(PRIMITIVES["matmul"], [x, x.t(), None], {"activation": None}) is None
    )
    assert list(_dispatch.kernel_choices().values()) == ["fallback"]
    _dispatch.clear_kernel_choices()


def test_triton_after_tensorflow_is_a_clear_error_not_an_abort():
    """Loading triton after TensorFlow would abort the whole process (both bundle LLVM):
    the route refuses to load it, so "auto" falls back and "triton" says why."""
    import subprocess
    import sys

    # Only the child imports TensorFlow: in this process it would import Keras on torch, which
    # loads triton after TensorFlow's LLVM and aborts pytest when no earlier test loaded triton.
    require_installed("tensorflow")
    script = (
        "import tensorflow, numpy as np, keratron as kt\n"
        "a = kt.convert_to_tensor(np.ones((3, 4), 'float32'))\n"
        "kt.config.set_kernel_backend('auto')\n"
        "print('auto', tuple(kt.ops.matmul(a, kt.ops.transpose(a)).shape))\n"
        "kt.config.set_kernel_backend('triton')\n"
        "try:\n"
        "    kt.ops.matmul(a, kt.ops.transpose(a))\n"
        "except ValueError as e:\n"
        "    print('triton', e)\n"
    )
    # Keras on TensorFlow, whatever the user's keras.json says (the suite runs Keras on torch,
    # and importing TensorFlow then imports Keras on torch, which loads triton itself, outside
    # keratron, and LLVM aborts the process before keratron can say anything).
    env = dict(__import__("os").environ)
    env.update(KERAS_BACKEND="tensorflow", TRITON_INTERPRET="1", TF_CPP_MIN_LOG_LEVEL="3")
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "auto (3, 3)" in done.stdout
    assert "TensorFlow was imported before triton" in done.stdout


def test_auto_selection_stops_measuring_a_primitive_with_ever_new_shapes(monkeypatch):
    from keratron.ops import _dispatch

    _dispatch.clear_kernel_choices()
    monkeypatch.setattr(_dispatch, "_MEASURED_PER_PRIMITIVE", 2)
    prim = PRIMITIVES["matmul"]
    for rows in (3, 4):  # measured: the interpreted kernel loses to torch each time
        _dispatch._run_faster(prim, *_matmul_operands(rows), timer=_dispatch._wall_time)
    assert sorted(_dispatch.kernel_choices().values()) == ["fallback", "fallback"]
    # A third shape takes the primitive's usual choice at once: no kernel launch at all.
    triton_kernels.reset_launch_counts()
    assert _dispatch._run_faster(prim, *_matmul_operands(5), timer=_dispatch._wall_time) is None
    assert triton_kernels.launch_counts() == {}
    assert len(_dispatch.kernel_choices()) == 2
    _dispatch.clear_kernel_choices()


def test_auto_waits_longer_than_the_host_takes_to_queue_the_timed_runs():
    from keratron.ops import _dispatch

    # A route that queues in microseconds gets the floor; a fallback that takes 4 ms of host
    # time a call (an LSTM backward of a few launches per step) gets 1.5x its 12 ms at 2 GHz.
    assert _dispatch._queue_cycles(2e-5, 3) == _dispatch._QUEUE_CYCLES
    assert _dispatch._queue_cycles(4e-3, 3) == int(1.5 * 12e-3 * 2e9)


def test_auto_measures_a_graphed_step_by_gpu_time_and_apart_from_eager_calls(monkeypatch):
    """A choice made inside a step that CUDA graphs replay (its warm-up and capture) is made
    by GPU time, since the replays cost the host nothing; the same call made eagerly pays each
    launch on the host, so it is measured again, by host time, and kept apart."""
    from keratron.autodiff import cuda_graphs
    from keratron.ops import _dispatch

    used = []
    for name in ("_gpu_time", "_host_time"):
        monkeypatch.setattr(_dispatch, name, lambda run, runs, name=name: used.append(name) or 1.0)
    vals, params = _matmul_operands(4)
    prim = PRIMITIVES["matmul"]
    _dispatch.clear_kernel_choices()
    try:
        for scope, want in ((contextlib.nullcontext, "_host_time"),
                            (cuda_graphs._graphed_scope, "_gpu_time")):  # fmt: skip
            used.clear()
            with scope():
                _dispatch._run_faster(prim, vals, params)
                assert cuda_graphs.in_graphed_step() == (want == "_gpu_time")
            assert used and set(used) == {want}
        assert not cuda_graphs.in_graphed_step()
        graphed = [key[-1] for key in _dispatch.kernel_choices()]
        assert sorted(graphed) == [False, True]
        # Measured once per context: later calls in either reuse their own choice.
        used.clear()
        _dispatch._run_faster(prim, vals, params)
        with cuda_graphs._graphed_scope():
            _dispatch._run_faster(prim, vals, params)
        assert used == []
    finally:
        _dispatch.clear_kernel_choices()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_auto_measures_gpu_time_not_the_hosts():
    """'auto' times each side by GPU work: a call that keeps the host busy but launches
    nothing measures (near) zero, a chain of large products measures what they take."""
    import time

    from keratron.ops import _dispatch

    a = torch.randn(2048, 2048, device="cuda")
    flops = 3 * 2 * 2048**3

    def busy_host():  # 0.3 ms of host work, no GPU work
        end = time.perf_counter() + 3e-4
        while time.perf_counter() < end:
            pass

    host = _dispatch._gpu_time(busy_host, 3)
    gpu = _dispatch._gpu_time(lambda: a @ a @ a @ a, 3)
    assert host < 5e-5, host

    def busier_host():  # 1.5 ms a call: three of them outlast the 2 ms floor of the wait
        end = time.perf_counter() + 1.5e-3
        while time.perf_counter() < end:
            pass

    assert _dispatch._gpu_time(busier_host, 3) < 5e-5
    # between 1 and 2,000 TFLOP/s: the products' own time, not an idle host's
    assert flops / 2e15 < gpu < flops / 1e12, gpu
