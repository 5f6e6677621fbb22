"""The launch cache of `Kernel.launch`: the first launch of a signature goes through Triton's
autotuner and JIT, later ones through the bound launch, with the same launch. Real kernels
compile for sm_90 under the stand-in driver (`_standin`), which records launches instead of
running them, so this runs without a GPU (in the aot process: the interpreter is off)."""

import pytest
import torch
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
