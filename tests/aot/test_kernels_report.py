"""The kernels report beyond the build (test_aot.py compiles every spec): the matmul plans of
the benchmark shapes, the split-K launches they record, and the last measured times printed
beside each case's roofline. No compile here."""

import importlib.util
import os

import pytest

from tools import kernels_aot as aot

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SPLIT_CASES = ("LSTM recurrent step 64x1024 @ 1024x4096", "Dense 128x4096 @ 4096x1024 +relu")


def _kernels_gpu():
    spec = importlib.util.spec_from_file_location(
        "kernels_gpu", os.path.join(ROOT, "bench", "kernels_gpu.py")
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_small_m_benchmark_cases_launch_split_k_at_their_planned_config():
    launches = [launch for launch in aot.bench_launches() if launch[4] in SPLIT_CASES]
    kernels = [(launch[4], launch[1]) for launch in launches]
    assert kernels == [
        (case, kernel)
        for case in SPLIT_CASES
        for kernel in ("_matmul_splitk_kernel", "_matmul_splitk_reduce_kernel")
    ]
    for _, kernel, _, meta, _ in launches:
        (config,) = aot.launch_configs(kernel, meta)
        tiles, warps, stages = config
        if kernel == "_matmul_splitk_kernel":
            assert (tiles["BLOCK_M"], tiles["BLOCK_N"], warps, stages) == (64, 64, 4, 4)
    # Autotuned kernels keep every config.
    conv = next(launch for launch in aot.bench_launches() if launch[1] == "conv_fwd_kernel")
    assert len(aot.launch_configs(conv[1], conv[3])) == len(aot.autotune_configs(conv[1]))


def test_matmul_plan_strings():
    assert aot.matmul_plan("Dense 1024x4096 @ 4096x4096 +gelu") == "M128 N256 K16 w8 s3"
    assert aot.matmul_plan("Dense 1024x4096 @ 4096x4096 +gelu", "bfloat16") == (
        "M128 N256 K32 w8 s4"
    )
    assert aot.matmul_plan(SPLIT_CASES[1]) == "M64 N64 K32 w4 s4 split-K 4"


def test_measured_times_from_the_h100_page_and_json(tmp_path):
    measured = aot.measured_times()
    # Figures of bench/kernels_h100.md (float32, TF32 on both sides).
    assert measured[("float32", "matmul", "Dense 1024x4096 @ 4096x4096 +gelu")] == (
        pytest.approx(364.1e-6),
        pytest.approx(103.7e-6),
    )
    assert ("float32", "conv_grad_filter", "MobileNet dw b32 3x3 112x112x32") in measured
    assert len(measured) >= 40
    # A JSON file as kernels_gpu.py --json writes it overrides the page.
    path = str(tmp_path / "times.json")
    results = [
        dict(op="matmul", case="Dense 1024x4096 @ 4096x4096 +gelu", triton_us=120.0, torch_us=99.0)
    ]
    _kernels_gpu().write_json(path, "float32", "NVIDIA H100", results)
    both = aot.measured_times([aot.MEASURED_DEFAULT, path])
    assert both[("float32", "matmul", "Dense 1024x4096 @ 4096x4096 +gelu")] == (
        pytest.approx(120e-6),
        pytest.approx(99e-6),
    )
    assert aot.measured_times([str(tmp_path / "none.md")]) == {}


def test_roofline_table_prints_plan_and_measured_time_beside_the_expectation():
    label = "Dense 1024x4096 @ 4096x4096 +gelu"
    measured = {("float32", "matmul", label): (364.1e-6, 103.7e-6)}
    table = aot.roofline_table("float32", measured).splitlines()
    assert "plan (H100)" in table[0] and "measured" in table[0]
    (row,) = [line for line in table if label in line]
    assert "M128 N256 K16 w8 s3" in row and "364.1 us" in row and "103.7 us" in row
    # 364.1 us against the TF32 roofline of 2*1024*4096*4096 FLOPs at 495 TFLOP/s.
    expect = 2 * 1024 * 4096 * 4096 / 495e12
    assert row.rstrip().endswith(f"{364.1e-6 / expect:6.1f}x")
    unmeasured = [line for line in table if SPLIT_CASES[0] in line]
    assert unmeasured and unmeasured[0].rstrip().endswith("-")


def test_kernels_gpu_dry_run_lists_every_case(capsys):
    assert _kernels_gpu().main(["--dry-run", "--only", "matmul", "--only", "xent"]) == 0
    lines = capsys.readouterr().out.splitlines()
    for case in SPLIT_CASES:
        (line,) = [line for line in lines if case in line]
        assert "_matmul_splitk_kernel[M64 N64 K32 w4 s4], _matmul_splitk_reduce_kernel" in line
    out = "\n".join(lines)
    assert "_xent_fwd_rows_kernel" in out and "[unsupported]" not in out
    assert "Dense 1024x4096 @ 4096x4096 +gelu" in out
