"""The LSTM's whole-sequence kernels ahead of time: what the benchmark shapes launch, and the
resident limits (`_lstm.RESIDENT_UNITS`) as the compiler sees them. test_aot.py compiles every
spec listed here for sm_90 and sm_80 and checks registers, spills and shared memory."""

import pytest
import torch

from keratron.triton_kernels import load
from tools import kernels_aot as aot

LSTM = load("_lstm")


def test_benchmark_lstm_cases_launch_their_plans_kernels():
    """One forward launch and two backward (the sequence, dU) in the whole-sequence plans; the
    benchmark shapes cover every plan, so every kernel is compiled at a real shape (float32
    with TF32 dots, as the benchmark runs)."""
    with aot._float32_precision("tf32"):
        plans = {label: LSTM.plan(u, torch.float32) for label, _, _, u in aot.LSTM_CASES}
    steps = {label: t for label, _, t, _ in aot.LSTM_CASES}
    assert set(plans.values()) == {"resident", "streamed", "steps"}
    per_case = {}
    for _, kernel, _, _, case in aot.bench_launches():
        if case in plans:
            per_case.setdefault(case, []).append(kernel)
    assert set(per_case) == set(plans)
    for case, kernels in per_case.items():
        if plans[case] == "steps":
            t = steps[case]
            want = ["_lstm_fwd_step_kernel"] * t + ["_lstm_carry_kernel"]
            want += ["_lstm_bwd_step_kernel"] * (t + 1) + ["_lstm_dkernel_kernel"]
        else:
            kind = "resident" if plans[case] == "resident" else "seq"
            want = [f"_lstm_fwd_{kind}_kernel", f"_lstm_bwd_{kind}_kernel", "_lstm_dkernel_kernel"]
        assert kernels == want, case


def test_the_widths_at_the_resident_limits_are_compiled():
    specs = {
        (s.kernel, s.dtype, s.consts().get("PRECISION"), s.consts().get("UNITS"))
        for s in aot.collect_specs(["_lstm"])
    }
    limits = [(dtype, "ieee", units) for dtype, units in LSTM.RESIDENT_UNITS.items()]
    limits[0] = (torch.float32, "tf32", LSTM.RESIDENT_UNITS[torch.float32])
    limits.append((torch.float32, "ieee", LSTM.RESIDENT_UNITS_IEEE))
    for dtype, precision, units in limits:
        dt = {torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16"}[dtype]
        for width in (LSTM.RESIDENT_MIN_WIDTH[dtype], units):
            for kind in ("fwd", "bwd"):
                spec = (f"_lstm_{kind}_resident_kernel", dt, precision, width)
                assert spec in specs, spec
    # Every whole-sequence config is compiled in float32 (at each precision, its configs),
    # and in half types at the first.
    for kernel in (LSTM.FWD_SEQ, LSTM.BWD_SEQ):
        listed = [s for s in aot.collect_specs(["_lstm"]) if s.kernel == kernel.name]
        for precision in ("tf32", "ieee"):
            fp32 = [s for s in listed if s.dtype == "fp32" and s.consts()["PRECISION"] == precision]
            assert len(fp32) == len(kernel.configs_at(torch.float32, precision))
        assert {s.dtype for s in listed} == {"fp32", "fp16", "bf16"}


@pytest.mark.slow
def test_one_width_past_the_resident_limit_breaks_a_resource_limit(tmp_path):
    """The limits are tight: the backward at twice the widest resident width spills (or runs
    out of shared memory) on sm_90, in float32 at either precision and in bfloat16. (The
    forward at twice float32's IEEE limit aborts the compiler for sm_90, so it is not
    built here.)"""
    acts = dict(ACT=6, RACT=5, HAS_MASK=True, ZERO_OUTPUT=False, REVERSE=True)
    specs = []
    limits = [(torch.float32, "tf32", LSTM.RESIDENT_UNITS[torch.float32])]
    limits += [(torch.float32, "ieee", LSTM.RESIDENT_UNITS_IEEE)]
    limits += [(torch.bfloat16, "ieee", LSTM.RESIDENT_UNITS[torch.bfloat16])]
    for dtype, precision, units in limits:
        consts = dict(acts, PRECISION=precision, UNITS=2 * units)
        name, fn, sig, consts, warps, stages = LSTM.BWD_RESIDENT.aot_spec(
            f"past_{dtype}_{precision}", dtype, consts, LSTM.RESIDENT_CONFIGS[0]
        )
        specs.append(
            aot.Spec(
                "_lstm",
                fn.__name__,
                name,
                aot._dtype(sig),
                tuple(sig.items()),
                tuple(consts.items()),
                warps,
                stages,
            )  # fmt: skip
        )
    results = aot.build(specs, ("sm_90",), jobs=2)
    for r in results:
        assert r.ok, r.error
        assert r.spill > 0 or r.smem > aot.SMS["sm_90"].smem_per_block, r.spec.name
