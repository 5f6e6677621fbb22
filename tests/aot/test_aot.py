"""Every Triton kernel compiles for sm_90 and sm_80 without spills and within shared memory.

One build (all specs x both targets, in two processes, through the Triton cache that
`make kernels-report` shares) feeds the checks; the occupancy, parser and roofline checks need
no build.
"""

import dataclasses
from collections import Counter

import pytest
import torch

from tools import kernels_aot as aot

TARGETS = ("sm_90", "sm_80")


@pytest.fixture(scope="module")
def specs():
    return aot.all_specs()


@pytest.fixture(scope="module")
def results(specs):
    return aot.build(specs, TARGETS, jobs=2)


def _names(rows):
    return "\n".join(f"{r.spec.label} on {r.target}: {r.error}" for r in rows)


# ------------------------------------------------------------------------------ the build
def test_each_spec_compiled_once_per_target(specs, results):
    listed = sum(len(aot._import(m).aot_specs()) for m in aot.kernel_modules())
    assert sum(s.origin == "module" for s in specs) == listed
    assert len({s.label for s in specs}) == len(specs)
    pairs = Counter((r.spec.label, r.target) for r in results)
    assert set(pairs.values()) == {1}
    assert len(pairs) == len(specs) * len(TARGETS)


def test_every_spec_compiles(results):
    failed = [r for r in results if not r.ok]
    assert not failed, _names(failed)


def test_no_config_spills(results):
    # Every spec is an autotune config (or its benchmark specialisation), so any may run.
    spilling = [r for r in results if r.ok and r.spill > 0]
    assert not spilling, "\n".join(
        f"{r.spec.label} on {r.target}: {r.regs} registers, {r.spill} B stack/local per thread"
        for r in spilling
    )


def test_shared_memory_within_the_block_limit(results):
    over = [r for r in results if r.ok and r.smem > aot.SMS[r.target].smem_per_block]
    assert not over, "\n".join(f"{r.spec.label} on {r.target}: {r.smem} B" for r in over)
    # A resident block at all: registers, shared memory and threads within one SM's limits.
    idle = [r for r in results if r.ok and r.occ["blocks"] < 1]
    assert not idle, _names(idle)


def test_every_route_module_contributes_its_kernels(results):
    kernels = {(r.spec.module, r.spec.kernel) for r in results if r.ok}
    routes = aot.routes()
    assert len(kernels) >= len(routes)
    routes_per_module = Counter("_" + module for module in routes.values())
    per_module = Counter(module for module, _ in kernels)
    for module, routes in routes_per_module.items():
        assert per_module[module] >= routes, (module, sorted(k for m, k in kernels if m == module))
    for target in TARGETS:
        assert {(r.spec.module, r.spec.kernel) for r in results if r.target == target} == kernels


def test_benchmark_launches_are_compiled_at_every_config(specs):
    bench = [s for s in specs if s.origin == "bench"]
    # Every kernel a module lists is launched by some benchmark shape.
    assert {s.kernel for s in bench} == {s.kernel for s in specs if s.origin == "module"}
    keys = {(s.kernel, s.signature, s.constexprs, s.divisible, s.num_warps, s.num_stages)
            for s in bench}  # fmt: skip
    for module, kernel, args, meta, case in aot.bench_launches():
        fn = aot._kernel(module, kernel)
        for tiles, warps, stages in aot.launch_configs(kernel, meta):
            sig, consts, divisible = aot.specialise(fn, args, {**meta, **tiles})
            assert (kernel, sig, consts, divisible, warps, stages) in keys, (kernel, case, tiles)


def test_every_ieee_float32_config_is_compiled_at_ieee(specs):
    # IEEE is the default float32 precision, and its dots (on the CUDA cores) need other
    # tiles than TF32's: every config a float32 launch at IEEE may run is compiled at IEEE,
    # so test_no_config_spills covers it. (The matmul launcher's configs come from its plan,
    # which test_matmul_plans checks against these specs at both precisions.)
    def key(cfg_kwargs, warps, stages):
        return tuple(sorted(cfg_kwargs.items())), warps, stages

    compiled = {
        (s.kernel, key({k: s.consts()[k] for k in names}, s.num_warps, s.num_stages))
        for s in specs
        if s.dtype == "fp32" and s.consts().get("PRECISION") == "ieee"
        for names in [[k for k in ("BLOCK_M", "BLOCK_N", "BLOCK_K", "BLOCK_B") if k in s.consts()]]
    }
    checked = 0
    for name, kernel in aot.launch_specs().items():
        if "PRECISION" not in kernel.constexprs or kernel.fn.fn.__module__.endswith("_matmul"):
            continue
        for cfg in kernel.configs_at(torch.float32, "ieee"):
            assert (name, key(cfg.kwargs, cfg.num_warps, cfg.num_stages)) in compiled, name
            checked += 1
    assert checked >= 20


def test_tf32_matmul_copies_a_k_major_w_in_16_byte_pieces_on_sm_90(specs):
    # wgmma reads 32-bit operands K-major: on sm_90 the row-major w of the 128x256 TF32 tile
    # reaches shared memory an element at a time, the K-major w (what `k_major_copies` makes)
    # 16 bytes at a time; sm_80's mma.sync takes either layout in 16-byte copies.
    wide = [s for s in specs if s.origin == "module" and s.name.startswith("matmul_fp32_128x256")]
    assert sorted(s.name.endswith("_kmajor") for s in wide) == [False, True]
    results = aot.build(wide, TARGETS, jobs=2, copies=True)
    got = {(r.spec.name.endswith("_kmajor"), r.target): r for r in results}
    rows, k_major = got[False, "sm_90"], got[True, "sm_90"]
    assert rows.copies_narrow > 0 and rows.copies_wide > 0
    assert k_major.copies_narrow == 0 and k_major.copies_wide > 0
    assert got[False, "sm_80"].copies_narrow == 0
    table = aot.resource_table(results).splitlines()
    assert " cp w/n " in table[0] and f" {rows.copies_wide}/{rows.copies_narrow} " in table[2]


def test_report_has_a_row_per_spec_and_target(results):
    table = aot.resource_table(results).splitlines()
    assert len(table) == 2 + len(results)
    assert sum(" sm_90 " in line for line in table) == len(results) // 2
    assert sum(" sm_80 " in line for line in table) == len(results) // 2
    summary = aot.resource_summary(results)
    assert "_matmul_kernel" in summary and "depthwise_grad_filter_kernel" in summary


def test_a_failing_spec_becomes_a_failed_row(specs, tmp_path):
    # tl.arange needs a power-of-two length: a 24-wide K tile cannot compile.
    consts = {**specs[0].consts(), "BLOCK_K": 24}
    bad = dataclasses.replace(specs[0], constexprs=tuple(consts.items()))
    (result,) = aot.build([bad], ("sm_80",), jobs=1, cache_dir=str(tmp_path))
    assert not result.ok and "power of 2" in result.error
    assert "FAILED" in aot.resource_table([result]).splitlines()[2]
    assert "FAILED" not in aot.resource_table([r for r in [result] if r.ok])


# ------------------------------------------------------------------------------ no build needed
def test_registry_modules_come_from_routes():
    routes = aot.routes()
    assert set(routes) == {
        "matmul", "conv", "conv_grad_input", "conv_grad_filter", "lstm", "lstm_grad",
        "softmax_cross_entropy", "softmax_cross_entropy_grad", "gru", "gru_grad",
    }  # fmt: skip
    assert aot.kernel_modules() == list(dict.fromkeys("_" + m for m in routes.values()))


def test_specialise_follows_the_jit():
    from triton._C.libtriton import native_specialize_impl
    from triton.backends.compiler import BaseBackend

    fn = aot._kernel("_lstm", "_lstm_fwd_step_kernel")
    ints = dict(B=64, U=250, T=1, t=1, t_src=32, stride_xb=0, stride_xt=48, stride_xf=1)
    ptrs = dict(h_in_ptr=aot._Ptr("fp32", 8))
    args = [
        ptrs.get(name, aot._Ptr("fp32")) if name.endswith("_ptr") else ints.get(name, 16)
        for name in fn.arg_names[:22]
    ]
    meta = dict(HAS_MASK=False, ZERO_OUTPUT=False, ACT=1, RACT=2, PRECISION="tf32")
    meta.update(BLOCK_B=16, BLOCK_N=32, BLOCK_K=32)
    sig, consts, divisible = aot.specialise(fn, args, meta)
    sig = dict(sig)
    for p in fn.params[:22]:
        if p.name in ints:
            kind, key = native_specialize_impl(
                BaseBackend, ints[p.name], False, not p.do_not_specialize, True
            )
            assert sig[p.name] == kind, p.name
            assert (p.name in divisible) == (key == "D"), p.name
    # t is never specialised, so a 1 stays an argument; T == 1 becomes a constant.
    assert sig["t"] == "i32" and dict(consts)["T"] == 1 and sig["T"] == "constexpr"
    assert "x_ptr" in divisible and "h_in_ptr" not in divisible
    assert sig["HAS_MASK"] == "constexpr" and dict(consts)["HAS_MASK"] is False
    with pytest.raises(ValueError, match="missing"):
        aot.specialise(fn, args[:5], {})


def test_bench_launches_mirror_the_launchers(monkeypatch):
    """Runs every benchmark case's routes on meta tensors with each jit function's `run`
    replaced by a recorder, and compares what the JIT would make of each launch with what
    `bench_launches` (the launch specs' own record) says."""
    import types

    from triton.runtime.jit import JITFunction

    conv2d = aot._import("_conv2d")
    standin = aot._import("_standin")
    recorded = []
    for module in aot.kernel_modules():
        for obj in vars(aot._import(module)).values():
            if isinstance(obj, JITFunction):

                def run(*args, grid, warmup, _fn=obj, **kwargs):
                    recorded.append((_fn, args, kwargs))

                monkeypatch.setattr(obj, "run", run)
    monkeypatch.setenv("KERATRON_TRITON_PIN", "1")  # each launcher at its first config
    # TF32 dots, as `bench_launches` records them (a TF32 product may copy w K-major).
    monkeypatch.setenv("KERATRON_FLOAT32_PRECISION", "tf32")
    gpu = types.SimpleNamespace(multi_processor_count=aot.BENCH_SMS)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device: gpu)
    split = conv2d._num_splits
    monkeypatch.setattr(
        conv2d, "_num_splits", lambda p, t, d, *rule: split(p, t, torch.device("cuda"), *rule)
    )

    tensor_types = {torch.float32: "fp32", torch.int64: "i64", torch.int32: "i32"}

    def key(fn, args, meta):
        args = [
            aot._Ptr(tensor_types[a.dtype], a.storage_offset() * a.element_size())
            if isinstance(a, torch.Tensor)
            else a
            for a in args
        ]
        # Both sides at the first config (what a pinned launcher runs), the dot precision
        # left out.
        meta = {**aot.autotune_configs(fn.__name__)[0][0], **meta}
        meta = {k: ("any" if k == "PRECISION" else v) for k, v in meta.items()
                if k not in ("num_warps", "num_stages")}  # fmt: skip
        return (fn.__name__, aot.specialise(fn, args, meta))

    launches = aot.bench_launches()
    # The stand-in driver answers the launch path's device and stream queries; the patched
    # `run` returns no compiled kernel, so nothing is bound and every launch reaches it.
    for case in dict.fromkeys(launch[4] for launch in launches):
        recorded.clear()
        with standin.stand_in_driver():
            aot.run_case(case)
        got = {key(fn, args, kwargs) for fn, args, kwargs in recorded}
        want = {
            key(aot._kernel(module, kernel), args, meta)
            for module, kernel, args, meta, c in launches
            if c == case
        }
        assert got == want, case


@pytest.mark.parametrize(
    "target, regs, smem, warps, blocks, limiter",
    [
        # 216 registers x 32 = 6912 per warp: two warps per 16,384-register sub-partition.
        ("sm_90", 216, 132096, 8, 1, "regs"),
        # 24 registers, 4 warps: the 64-warp limit (16 blocks) comes before registers (21).
        ("sm_80", 24, 0, 4, 16, "warps"),
        # 98,304 B + 1 KiB reserved: one block in sm_80's 164 KiB, two in sm_90's 228 KiB.
        ("sm_80", 64, 98304, 4, 1, "smem"),
        ("sm_90", 64, 98304, 4, 2, "smem"),
        # 40 x 32 = 1280 registers per warp: 12 warps per sub-partition, 48 per SM; one-warp
        # blocks stop at 32 blocks per SM.
        ("sm_90", 40, 0, 1, 32, "warps"),
        ("sm_90", 40, 0, 8, 6, "regs"),
        # 41 x 32 = 1312 rounds up to 1536 per warp: 10 warps per sub-partition.
        ("sm_90", 41, 0, 8, 5, "regs"),
        # 16 warps x 160 registers = 81,920 > 65,536 per block: cannot launch.
        ("sm_80", 160, 0, 16, 0, "launch"),
        # More than 163 KiB of shared memory per block on sm_80.
        ("sm_80", 32, 170000, 4, 0, "launch"),
    ],
)
def test_occupancy(target, regs, smem, warps, blocks, limiter):
    occ = aot.occupancy(aot.SMS[target], regs, smem, warps)
    assert occ["blocks"] == blocks
    assert occ["limiter"] == limiter
    assert occ["warps"] == blocks * warps
    assert occ["occupancy"] == pytest.approx(blocks * warps / 64)


def test_parse_res_usage():
    text = (
        "\nResource usage:\n Common:\n  GLOBAL:0\n Function _matmul_kernel:\n"
        "  REG:128 STACK:312 SHARED:1024 LOCAL:8 CONSTANT[0]:440 TEXTURE:0 SURFACE:0\n"
    )
    assert aot.parse_res_usage(text) == dict(regs=128, stack=312, smem_static=1024, local=8)
    with pytest.raises(ValueError, match="no resource line"):
        aot.parse_res_usage("Resource usage:\n")


def test_roofline_bounds():
    sxm, pcie = aot.GPUS
    work = {w.label: w for w in aot.workloads("bfloat16") if w.op == "matmul"}
    big = work["Dense 1024x4096 @ 4096x4096 +gelu"]
    seconds, bound = aot.roofline(big, sxm, "bfloat16")
    assert bound == "compute"
    assert seconds == pytest.approx(2 * 1024 * 4096 * 4096 / 989e12)
    assert aot.roofline(big, pcie, "bfloat16")[0] == pytest.approx(seconds * 989 / 756)
    # float32 dots run on TF32 tensor cores: half the bf16 rate, twice the bytes.
    big32 = next(w for w in aot.workloads("float32") if w.label == big.label)
    assert big32.nbytes == 2 * big.nbytes
    assert aot.roofline(big32, sxm, "float32")[0] == pytest.approx(big32.flops / 495e12)
    # A 1x1 convolution over 32 channels moves more bytes than it has FLOPs to hide them.
    pw = next(w for w in aot.workloads("float32") if w.label.startswith("MobileNet pw"))
    seconds, bound = aot.roofline(pw, sxm)
    assert bound == "memory" and seconds == pytest.approx(pw.nbytes / 3.35e12)
    # Depthwise and softmax rows use CUDA cores; the LSTM is a launch per step.
    dw = next(w for w in aot.workloads("float32") if w.kernels == "depthwise_fwd")
    assert not dw.tensor_cores
    lstm = next(w for w in aot.workloads("float32") if w.op == "lstm")
    assert lstm.launches == 50 and lstm.launches * aot.LAUNCH_S > aot.roofline(lstm, sxm)[0]
    # The largest vocabulary does not fit L2, so its chunked rows read the logits twice.
    xent = [w for w in aot.workloads("float32") if w.op == "softmax_cross_entropy"]
    assert [w.reread > 0 for w in xent] == [False, False, False, True]


def test_roofline_table_lists_every_workload():
    for dtype in ("float32", "bfloat16"):
        table = aot.roofline_table(dtype).splitlines()
        assert len(table) == 2 + len(aot.workloads(dtype))
        assert "H100 SXM" in table[0] and "H100 PCIe" in table[0]
