"""The launch cache of `Kernel.launch`: the first launch of a signature goes through Triton's
autotuner and JIT, later ones through the bound launch, with the same launch. Real kernels
compile for sm_90 under the stand-in driver (`_standin`), which records launches instead of
running them, so this runs without a GPU (in the aot process: the interpreter is off)."""

import gc
import weakref

import pytest
import torch
import triton
from triton.runtime.autotuner import Autotuner
from triton.runtime.jit import JITFunction

from keratron.triton_kernels import _common, _lstm, _matmul, _softmax_xent, _standin, lstm


@pytest.fixture
def calls(monkeypatch):
    """Counts autotuner lookups and JIT bindings (`run` of each)."""
    counts = {"autotune": 0, "jit": 0}

    def counting(cls, name):
        run = cls.run

        def wrapper(self, *args, **kwargs):
            counts[name] += 1
            return run(self, *args, **kwargs)

        monkeypatch.setattr(cls, "run", wrapper)

    counting(Autotuner, "autotune")
    counting(JITFunction, "jit")
    monkeypatch.delenv("KERATRON_TRITON_PIN", raising=False)
    return counts


def _described(launch):
    """A launch with tensors as (dtype, shape, strides, 16-byte aligned): fresh outputs differ
    in address only."""
    args = tuple(
        (a.dtype, tuple(a.shape), a.stride(), a.data_ptr() % 16 == 0)
        if isinstance(a, torch.Tensor)
        else a
        for a in launch.args
    )
    return launch.name, launch.grid, args


def test_second_launch_of_a_signature_skips_autotuner_and_binding(calls):
    x, w, b = torch.randn(33, 70), torch.randn(70, 20), torch.randn(20)
    with _standin.stand_in_driver() as launches:
        y1 = _matmul.matmul_route(x, w, b, "relu")
        # The launcher gives its planned config: no autotuner.
        assert calls == {"autotune": 0, "jit": 1}
        assert len(_matmul.KERNEL.bound_signatures()) == 1
        y2 = _matmul.matmul_route(x, w, b, "relu")
        assert calls == {"autotune": 0, "jit": 1}  # no binding
        assert len(launches) == 2
        first, second = launches
        # The bound launch passes what Triton's own path passed, the output excepted.
        assert _described(first) == _described(second)
        for launch, y in ((first, y1), (second, y2)):
            assert [a.data_ptr() for a in launch.args[:4]] == [t.data_ptr() for t in (x, w, b, y)]
        assert first.name == "_matmul_kernel" and first.grid == (1, 1, 1)
        planned = _matmul.plan(33, 20, 70, 1, torch.float32, (9, 0), 132).config
        assert first.args[-4:] == tuple(planned.kwargs.values())
    # Leaving the stand-in forgets every binding it made.
    assert _matmul.KERNEL.bound_signatures() == []


@pytest.mark.parametrize(
    "change",
    [
        pytest.param(lambda x, w, b: (torch.randn(65, 70), w, b), id="shape"),
        pytest.param(lambda x, w, b: (x.half(), w.half(), b.half()), id="dtype"),
        pytest.param(lambda x, w, b: (x, w.t().contiguous().t(), b), id="stride"),
        pytest.param(
            lambda x, w, b: (torch.randn(33 * 70 + 1)[1:].view(33, 70), w, b), id="alignment"
        ),
        pytest.param(lambda x, w, b: (x, w, None), id="constexpr"),
    ],
)
def test_a_changed_signature_binds_again(calls, change):
    x, w, b = torch.randn(33, 70), torch.randn(70, 20), torch.randn(20)
    with _standin.stand_in_driver() as launches:
        _matmul.matmul_route(x, w, b, "relu")
        _matmul.matmul_route(*change(x, w, b), "relu")
        assert calls["jit"] == 2 and len(_matmul.KERNEL.bound_signatures()) == 2
        _matmul.matmul_route(*change(x, w, b), "relu")
        assert calls["jit"] == 2 and len(launches) == 3
        assert _described(launches[1]) == _described(launches[2])


def test_grid_follows_the_grid_function_closure(calls):
    # The row count is only in the grid (`(rows,)`), not among the kernel's arguments (rows
    # of 300 classes: one program per row).
    labels = torch.tensor([1, 2, 0, 1, 1])
    with _standin.stand_in_driver() as launches:
        for rows in (5, 3, 5):
            _softmax_xent.forward_route(torch.randn(rows, 300), labels[:rows], True)
        assert [launch.grid for launch in launches] == [(5, 1, 1), (3, 1, 1), (5, 1, 1)]
        assert calls["jit"] == 2


def test_pinning_binds_its_own_launch(calls, monkeypatch):
    # An autotuned kernel (the softmax forward of 300-class rows).
    x, labels = torch.randn(4, 300), torch.tensor([1, 2, 0, 1])
    with _standin.stand_in_driver():
        _softmax_xent.forward_route(x, labels, True)
        tuned = dict(calls)
        assert tuned["autotune"] == 1
        monkeypatch.setenv("KERATRON_TRITON_PIN", "1")
        _softmax_xent.forward_route(x, labels, True)
        assert calls == {"autotune": 1, "jit": tuned["jit"] + 1}
        _softmax_xent.forward_route(x, labels, True)
        assert calls == {"autotune": 1, "jit": tuned["jit"] + 1}


def test_time_steps_share_a_binding_per_specialisation_class(calls, monkeypatch):
    monkeypatch.setattr(_lstm, "plan", lambda units, dtype: "steps")  # a launch per step
    steps, batch, units = 40, 3, 8
    args = (torch.randn(batch, steps, 4 * units), torch.randn(batch, units))
    args += (torch.randn(batch, units), torch.randn(units, 4 * units), None, False)
    acts = dict(activation="tanh", recurrent_activation="sigmoid", zero_output_for_mask=False)
    with _standin.stand_in_driver() as launches:
        lstm.forward_route(*args, **acts)
        # t and t_src are 0, 1, multiples of 16 or neither: a few bindings, not one per step.
        assert 1 < len(_lstm.FWD_STEP.bound_signatures()) <= 4
        bound = calls["jit"]
        lstm.forward_route(*args, **acts)
        assert calls["jit"] == bound and len(launches) == 2 * steps
        t_index = _lstm.FWD_STEP.fn.arg_names.index("t")
        assert [launch.args[t_index] for launch in launches[steps:]] == list(range(steps))


def test_unknown_or_missing_arguments_raise(calls):
    x = torch.randn(4, 4)
    with _standin.stand_in_driver():
        with pytest.raises(TypeError, match="missing arguments"):
            _matmul.KERNEL.launch(lambda meta: (1,), x_ptr=x)
        with pytest.raises(ValueError, match="dynamic"):
            _common.Kernel(_matmul.KERNEL.fn, _matmul.CONFIGS, ["M"], "matmul", dynamic=("M",))


_CONV = dict(strides=(1, 1), padding=((1, 1), (1, 0)), dilation=(1, 1))
_LSTM = dict(activation="tanh", recurrent_activation="sigmoid", zero_output_for_mask=False)


def _route_cases():
    """(id, call making fresh inputs each time) of every cached route, irregular shapes."""
    from keratron.triton_kernels import conv2d, softmax_xent

    def lstm_backward(units, dtype=torch.float32):
        x, h0, c0 = _r(3, 5, 4 * units, dtype=dtype), _r(3, units, dtype=dtype), None
        c0, k = _r(3, units, dtype=dtype), _r(units, 4 * units, dtype=dtype)
        all_h, _, _, gates, cells = lstm.forward_route(x, h0, c0, k, None, False, **_LSTM)
        g = (_r(3, 5, units, dtype=dtype), _r(3, units, dtype=dtype), _r(3, units, dtype=dtype))
        return lstm.backward_route(*g, h0, c0, k, None, all_h, gates, cells, False, **_LSTM)

    return [
        ("matmul", lambda: _matmul.matmul_route(_r(3, 11, 70), _r(70, 20), _r(20), "relu")),
        ("matmul_splitk", lambda: _matmul.matmul_route(_r(16, 2048), _r(2048, 40), None, None)),
        ("conv", lambda: conv2d.conv_route(_r(2, 7, 9, 6), _r(3, 3, 6, 5), _r(5), groups=1,
                                           activation="relu", **_CONV)),
        ("conv_1d", lambda: conv2d.conv_route(_r(2, 9, 6), _r(3, 6, 5), None, (2,), ((1, 1),),
                                              (1,), 1, None)),
        ("conv_1d_grad_input", lambda: conv2d.grad_input_route(_r(2, 5, 5), _r(3, 6, 5), (2, 9, 6),
                                                               (2,), ((1, 1),), (1,), 1)),
        ("conv_1d_grad_filter", lambda: conv2d.grad_filter_route(_r(2, 9, 6), _r(2, 5, 5),
                                                                 (3, 6, 5), (2,), ((1, 1),), (1,),
                                                                 1)),
        ("depthwise", lambda: conv2d.conv_route(_r(2, 7, 9, 6), _r(3, 3, 1, 6), None, groups=6,
                                                activation="relu6", **_CONV)),
        ("conv_grad_input", lambda: conv2d.grad_input_route(_r(2, 7, 8, 5), _r(3, 3, 6, 5),
                                                            (2, 7, 9, 6), groups=1, **_CONV)),
        ("conv_grad_filter", lambda: conv2d.grad_filter_route(_r(2, 7, 9, 6), _r(2, 7, 8, 5),
                                                              (3, 3, 6, 5), groups=1, **_CONV)),
        ("xent", lambda: softmax_xent.forward_route(_r(6, 13), torch.arange(6) % 13, True)),
        ("xent_wide", lambda: softmax_xent.forward_route(_r(3, 300), _r(3, 300), False)),
        ("xent_grad", lambda: softmax_xent.backward_route(_r(6), _r(6, 13), torch.arange(6),
                                                          True)),
        # Resident kernels in float16: float32 ones hit an LLVM assertion compiling on the CPU.
        ("lstm_resident", lambda: lstm.forward_route(_r(3, 5, 128, dtype=torch.float16),
                                                     _r(3, 32, dtype=torch.float16),
                                                     _r(3, 32, dtype=torch.float16),
                                                     _r(32, 128, dtype=torch.float16), None,
                                                     True, **_LSTM)),
        ("lstm_streamed", lambda: lstm.forward_route(_r(3, 5, 4 * 40), _r(3, 40), _r(3, 40),
                                                     _r(40, 160), None, False, **_LSTM)),
        ("lstm_grad_resident", lambda: lstm_backward(32, torch.float16)),
        ("lstm_grad_streamed", lambda: lstm_backward(40)),
    ]  # fmt: skip


def _r(*shape, dtype=torch.float32):
    return torch.randn(*shape, dtype=dtype)


def _aliasing(launches, outputs) -> list:
    """Which storage each output and each launched tensor is, numbered by first appearance
    (the recorded launches keep their tensors alive, so no storage is reused in a call), and
    where in it the tensor starts."""
    flat = outputs if isinstance(outputs, tuple) else (outputs,)
    tensors = list(flat) + [a for launch in launches for a in launch.args if torch.is_tensor(a)]
    seen: dict = {}
    return [
        (seen.setdefault(t.untyped_storage().data_ptr(), len(seen)), t.storage_offset())
        for t in tensors
    ]


@pytest.mark.parametrize("case", _route_cases(), ids=lambda c: c[0])
def test_a_cached_route_launches_as_the_first_call_without_planning(calls, monkeypatch, case):
    _, call = case
    with _standin.stand_in_driver() as launches:
        outputs = call()
        first = list(launches)
        jit = calls["jit"]
        # A second signature-equal call: the route's cache holds its launches, so neither
        # `Kernel.launch` (config choice, argument binding) nor a plan runs.
        general = []
        monkeypatch.setattr(_common.Kernel, "launch", lambda *a, **k: general.append(a))
        monkeypatch.setattr(_matmul, "plan", lambda *a, **k: general.append(a))
        monkeypatch.setattr(_lstm, "plan", lambda *a, **k: general.append(a))
        launches.clear()
        again = call()
        assert general == [] and calls["jit"] == jit
        assert [_described(launch) for launch in launches] == [_described(f) for f in first]
        # The same buffers in the same places: outputs, scratch, and what the kernels read.
        assert _aliasing(launches, again) == _aliasing(first, outputs)
        flat = again if isinstance(again, tuple) else (again,)
        assert [(t.shape, t.dtype) for t in flat] == [
            (t.shape, t.dtype) for t in (outputs if isinstance(outputs, tuple) else (outputs,))
        ]
    monkeypatch.undo()
    assert all(not cache for cache in _common.ROUTE_CACHES)


def test_a_changed_parameter_misses_the_route_cache(calls):
    x, w = torch.randn(5, 24), torch.randn(24, 16)
    with _standin.stand_in_driver() as launches:
        for activation in ("relu", "gelu", "relu"):
            _matmul.matmul_route(x, w, None, activation)
        codes = [launch.args[_matmul.KERNEL.fn.arg_names.index("ACTIVATION")] for launch in
                 launches]  # fmt: skip
        assert codes == [1, 3, 1] and calls["jit"] == 2


def test_a_route_cache_keeps_no_tensor_of_the_call_that_filled_it(calls):
    with _standin.stand_in_driver(record=False):
        x, w, b = torch.randn(9, 24), torch.randn(24, 16), torch.randn(16)
        y = _matmul.matmul_route(x, w, b, "relu")
        refs = [weakref.ref(t) for t in (x, w, b, y)]
        del x, w, b, y
        gc.collect()
        assert [r() for r in refs] == [None] * 4
        assert any(_common.ROUTE_CACHES)


def test_the_step_plan_is_not_answered_by_a_cached_whole_sequence_launch(calls):
    """Backend "auto" runs both of the LSTM's plans for one signature: with the streamed plan's
    launches cached, the step plan (`variant="steps"`) still launches once per time step."""
    steps = 5
    args = (_r(3, steps, 4 * 40), _r(3, 40), _r(3, 40), _r(40, 160), None, False)
    with _standin.stand_in_driver() as launches:
        for _ in range(2):  # the second call replays the cached launch
            lstm.forward_route(*args, **_LSTM)
        assert len(launches) == 2 and {f.name for f in launches} == {"_lstm_fwd_seq_kernel"}
        launches.clear()
        for _ in range(2):
            lstm.forward_route(*args, **_LSTM, variant="steps")
        assert [f.name for f in launches] == ["_lstm_fwd_step_kernel"] * (2 * steps)
        launches.clear()
        lstm.forward_route(*args, **_LSTM)
        assert [f.name for f in launches] == ["_lstm_fwd_seq_kernel"]


@pytest.mark.parametrize("case", _route_cases(), ids=lambda c: c[0])
def test_a_cached_launch_calls_the_c_launcher_with_addresses(calls, case):
    """With a launcher shaped as Triton's CUDA launcher, a cached launch skips its Python call
    and passes each pointer as its address: the rest of the launch is the first call's."""
    _, call = case
    with _standin.stand_in_driver(direct=True) as launches:
        call()
        first = list(launches)
        launches.clear()
        again = call()
        assert [(f.name, f.grid) for f in launches] == [(f.name, f.grid) for f in first]
        addresses = []
        for cached, launch in zip(launches, first):
            assert len(cached.args) == len(launch.args)
            for a, b in zip(cached.args, launch.args):
                if torch.is_tensor(b):
                    assert type(a) is int and (a % 16 == 0) == (b.data_ptr() % 16 == 0)
                    addresses.append(a)
                else:
                    assert a == b
        flat = again if isinstance(again, tuple) else (again,)
        starts = {a for a in addresses}
        # Every output the kernels write is launched at its own address.
        assert any(t.data_ptr() in starts for t in flat)


def test_a_cached_launch_goes_through_the_launcher_while_a_hook_is_set(calls):
    x, w, b = torch.randn(33, 70), torch.randn(70, 20), torch.randn(20)
    seen = []
    with _standin.stand_in_driver(direct=True) as launches:
        _matmul.matmul_route(x, w, b, "relu")
        y = _matmul.matmul_route(x, w, b, "relu")
        assert launches[1].args[:4] == tuple(t.data_ptr() for t in (x, w, b, y))
        hooks = triton.knobs.runtime.launch_enter_hook
        hooks.add(seen.append)
        try:
            y = _matmul.matmul_route(x, w, b, "relu")
        finally:
            hooks.remove(seen.append)
        assert [a.data_ptr() for a in launches[2].args[:4]] == [t.data_ptr() for t in (x, w, b, y)]
        assert len(seen) == 1 and seen[0].get()["name"].startswith("_matmul_kernel")
        _matmul.matmul_route(x, w, b, "relu")
        assert type(launches[3].args[0]) is int and len(seen) == 1


def test_only_a_launcher_that_forwards_as_triton_does_is_called_directly():
    class Launcher(_standin._CudaLauncher):
        pass

    class Checking(_standin._CudaLauncher):
        def __call__(self, gridX, gridY, gridZ, stream, function, *args):
            assert gridX > 0  # work the C launcher alone would skip
            self.launch(gridX, gridY, gridZ, stream, function, self.launch_cooperative_grid,
                        self.launch_pdl, None, None, *args)  # fmt: skip

    meta = type("Meta", (), {"name": "k"})()
    direct = Launcher(None, meta, None)
    assert _common._direct_launcher(direct) == direct.launch
    assert _common._direct_launcher(Checking(None, meta, None)) is None
    assert _common._direct_launcher(_standin._Launcher(None, meta, None)) is None
    scratch = Launcher(None, meta, None)
    scratch.global_scratch_size = 256
    assert _common._direct_launcher(scratch) is None


@pytest.mark.parametrize("pinned", [False, True])
def test_every_compile_asks_for_fp_fusion_itself(calls, monkeypatch, pinned):
    # The kernels' numerics are those of contracted code; Triton 3.10 turns its default off
    # (3.9 warns at the first compile where nobody asked). Both launch paths (a planned or
    # pinned config, and the autotuner's) say it.
    from keratron.triton_kernels import conv2d

    asked = []
    knobs = triton.knobs.language
    decide = type(knobs).fp_fusion_enabled

    def recording(self, requested):
        asked.append(requested)
        return decide(self, requested)

    monkeypatch.setattr(type(knobs), "fp_fusion_enabled", recording)
    if pinned:
        monkeypatch.setenv("KERATRON_TRITON_PIN", "1")
    with _standin.stand_in_driver():
        _matmul.matmul_route(_r(5, 70), _r(70, 20), _r(20), "relu")
        conv2d.grad_filter_route(_r(2, 7, 9, 6), _r(2, 7, 8, 5), (3, 3, 6, 5), groups=1, **_CONV)
    assert calls["autotune"] == (0 if pinned else 1)
    assert asked and all(requested is _common.FP_FUSION is True for requested in asked)
