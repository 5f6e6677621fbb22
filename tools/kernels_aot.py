"""Ahead-of-time builds of every Triton kernel for sm_90 (H100/H200) and sm_80 (A100), with a
resource report and a roofline of the benchmark shapes.

No GPU is needed: `triton.compile` runs the whole pipeline down to a cubin for an explicit
`GPUTarget`, and the `cuobjdump` inside the triton wheel reads each cubin's registers per
thread, stack (where ptxas puts spilled registers) and local memory. Triton itself says how
much dynamic shared memory a launch asks for (`metadata.shared`).

What is compiled, on both targets:

- every entry of `aot_specs()` of the kernel module behind each registered Triton route: each
  autotune config of each kernel, as the module chose to specialise it;
- every launch that `bench/kernels_gpu.py` makes at its MobileNet, InceptionV3, Dense, LSTM and
  softmax shapes (float32 by default, TF32 dots), at every autotune config, specialised exactly
  as the JIT would: the launcher's constexprs (a GELU epilogue, no bias, a 16-wide softmax row,
  no LSTM mask), integer arguments equal to 1 turned into constants, and integers that are
  multiples of 16 and 16-byte aligned pointers marked divisible (`specialise`). Those facts
  change the code: wider loads, asynchronous copies into multi-stage shared buffers, and
  different register allocation, so a config that is spill-free as a module wrote it may not
  be at a real shape. `bench_launches` gets each launch's arguments from the launcher itself:
  it calls the routes on meta tensors while the kernels' launch specs record instead of
  running.

Occupancy follows the CUDA occupancy calculator: registers are allocated per warp in units
of 256 within four SM sub-partitions of 16,384 registers; shared memory per block is static +
dynamic + 1 KiB the driver reserves, in 128-byte units, out of the SM's largest carveout;
at most 64 warps and 32 blocks per SM.

Reading the numbers: ptxas keeps spilled registers in the stack frame, so "stack" + "local"
above zero means spills (Triton kernels make no calls and have no local arrays). "cp w/n"
counts the asynchronous global-to-shared copies in the SASS, wide (8-16 bytes) and narrow (4
bytes): narrow ones copy an operand tile an element at a time, as a TF32 wgmma's 32-bit
operand that is not K-major needs on sm_90. sm_90 cubins
that use shared memory carry a 1 KiB static section; it is counted as static shared memory, on
top of the driver's reserve, which may understate sm_90 occupancy by a block where shared
memory binds. `CompiledKernel.n_regs` / `n_spills` exist only once a kernel is loaded on a
GPU, so cuobjdump is the source here.

Usage: `python -m tools.kernels_aot` from the repository root (or `make kernels-report`);
`--help` lists the options. Compiles run in a pool of two processes, cached in
`KERATRON_AOT_CACHE` (default `~/.cache/keratron/triton-aot`), so a second run only reads the
cache.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import importlib
import multiprocessing
import os
import re
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor

import torch

import keratron  # noqa: F401  (registers every primitive and its routes)
from keratron.autodiff.primitive import PRIMITIVES

__all__ = [
    "SMS",
    "GPUS",
    "Spec",
    "Result",
    "routes",
    "kernel_modules",
    "collect_specs",
    "autotune_configs",
    "launch_configs",
    "bench_launches",
    "run_case",
    "specialise",
    "benchmark_specs",
    "all_specs",
    "build",
    "occupancy",
    "parse_async_copies",
    "parse_res_usage",
    "workloads",
    "roofline",
    "resource_table",
    "resource_summary",
    "roofline_table",
    "measured_times",
    "matmul_plan",
    "main",
]

_PKG = "keratron.triton_kernels"


# ------------------------------------------------------------------------------ targets
@dataclasses.dataclass(frozen=True)
class SM:
    """Per-SM limits of one compute capability (CUDA occupancy calculator values)."""

    name: str
    arch: int
    smem_per_sm: int  # bytes, at the largest shared-memory carveout
    smem_per_block: int  # bytes, the opt-in maximum of one block (static + dynamic)
    regs_per_sm: int = 65536
    regs_per_block: int = 65536
    reg_unit: int = 256  # registers are allocated per warp in units of this many
    sub_partitions: int = 4
    max_warps: int = 64
    max_blocks: int = 32
    max_threads_per_block: int = 1024
    smem_reserved: int = 1024  # per block, for the driver, since sm_80
    smem_unit: int = 128


SMS = {
    "sm_90": SM("sm_90", 90, smem_per_sm=228 * 1024, smem_per_block=227 * 1024),
    "sm_80": SM("sm_80", 80, smem_per_sm=164 * 1024, smem_per_block=163 * 1024),
}


def occupancy(sm: SM, regs: int, smem: int, num_warps: int) -> dict:
    """Resident blocks and warps per SM for a kernel, and what limits them.

    Args:
        sm: the target's limits (an entry of `SMS`).
        regs: registers per thread.
        smem: shared memory per block in bytes (static + dynamic; the reserved KiB is added
            here).
        num_warps: warps per block.

    Returns:
        A dict with `blocks` and `warps` per SM, `occupancy` (warps / max warps), the per-limit
        block counts `by_regs`, `by_smem`, `by_warps`, and `limiter` (the smallest; "launch"
        when a block cannot run at all).

    Example:
        >>> occupancy(SMS["sm_90"], regs=128, smem=0, num_warps=4)["blocks"]
        4
    """
    threads = num_warps * 32
    regs_per_warp = -(-regs * 32 // sm.reg_unit) * sm.reg_unit
    # The hardware checks a block's registers as if its warps filled all sub-partitions.
    warps_assumed = -(-num_warps // sm.sub_partitions) * sm.sub_partitions
    fits = (
        threads <= sm.max_threads_per_block
        and regs_per_warp * max(num_warps, warps_assumed) <= sm.regs_per_block
        and smem <= sm.smem_per_block
    )
    if regs_per_warp:
        warps_per_part = (sm.regs_per_sm // sm.sub_partitions) // regs_per_warp
        by_regs = warps_per_part * sm.sub_partitions // num_warps
    else:
        by_regs = sm.max_blocks
    smem_alloc = -(-(smem + sm.smem_reserved) // sm.smem_unit) * sm.smem_unit
    by_smem = sm.smem_per_sm // smem_alloc
    by_warps = min(sm.max_warps // num_warps, sm.max_blocks)
    limits = {"regs": by_regs, "smem": by_smem, "warps": by_warps}
    blocks = min(limits.values()) if fits else 0
    limiter = min(limits, key=limits.get) if fits else "launch"
    return dict(
        blocks=blocks,
        warps=blocks * num_warps,
        occupancy=blocks * num_warps / sm.max_warps,
        by_regs=by_regs,
        by_smem=by_smem,
        by_warps=by_warps,
        limiter=limiter,
    )


# ------------------------------------------------------------------------------ specs
@dataclasses.dataclass(frozen=True)
class Spec:
    """One kernel specialisation to compile: a jit function of a kernel module, its full
    signature (constexpr parameters marked "constexpr"), constexpr values, the parameters
    known to be multiples of 16 (16-byte aligned, for pointers), and a launch config.

    `origin` is "module" (an entry of the module's `aot_specs()`) or "bench" (what the JIT
    makes of a benchmark launch, `case`, at one autotune config)."""

    module: str
    kernel: str
    name: str
    dtype: str
    signature: tuple
    constexprs: tuple
    num_warps: int
    num_stages: int
    divisible: tuple = ()
    origin: str = "module"
    case: str = ""

    @property
    def label(self) -> str:
        return f"{self.name} [{self.case}]" if self.case else self.name

    def consts(self) -> dict:
        return dict(self.constexprs)


def routes() -> dict:
    """{primitive name: route module (e.g. "matmul")} of every registered Triton route."""
    out = {}
    for name, prim in PRIMITIVES.items():
        route = prim.routes.get("cuda")
        if route is not None and route.__module__.startswith(_PKG + "."):
            out[name] = route.__module__.rsplit(".", 1)[-1]
    return out


def kernel_modules() -> list:
    """The private kernel modules (e.g. "_matmul") behind the registered routes."""
    return list(dict.fromkeys("_" + module for module in routes().values()))


def _import(module: str):
    return importlib.import_module(f"{_PKG}.{module}")


def _kernel(module: str, name: str):
    """The jit function `name` of a kernel module."""
    fn = getattr(_import(module), name, None)
    if fn is None or not hasattr(fn, "arg_names"):
        raise ValueError(f"aot: {module}.py has no jit function {name!r}")
    return fn


def _dtype(signature: dict) -> str:
    """The floating-point element type of a kernel's data pointers."""
    types = [t[1:] for t in signature.values() if t in ("*fp32", "*fp16", "*bf16")]
    return max(set(types), key=types.count) if types else "none"


def collect_specs(modules=None) -> list:
    """Every `aot_specs()` entry of `modules` (default: `kernel_modules()`) as `Spec`s. An
    entry is `(name, jit_function, signature, constexprs, num_warps, num_stages)`, optionally
    followed by the parameters the JIT would find divisible by 16 (for a config its launcher
    gives only to aligned operands).

    Example:
        >>> specs = collect_specs(["_matmul"])
        >>> specs[0].kernel
        '_matmul_kernel'
    """
    specs = []
    for module in modules or kernel_modules():
        for name, fn, sig, consts, warps, stages, *divisible in _import(module).aot_specs():
            spec = Spec(
                module, fn.__name__, name, _dtype(sig), tuple(sig.items()),
                tuple(consts.items()), warps, stages, tuple(*divisible),
            )  # fmt: skip
            specs.append(spec)
    return specs


def launch_specs() -> dict:
    """{jit function name: its `Kernel` launch spec} over every kernel module."""
    from keratron.triton_kernels._common import Kernel

    specs = {}
    for module in kernel_modules():
        for obj in vars(_import(module)).values():
            if isinstance(obj, Kernel):
                specs[obj.name] = obj
    return specs


def autotune_configs(kernel: str, dtype="fp32", precision=None) -> list:
    """`(meta-parameters, num_warps, num_stages)` of each config autotune may pick for
    `kernel` (a jit function's name) on `dtype` data at dot `precision` (`Kernel.configs_at`);
    KeyError for a kernel no launch spec names."""
    configs = launch_specs()[kernel].configs_at(dtype, precision)
    return [(dict(c.kwargs), c.num_warps, c.num_stages) for c in configs]


def launch_configs(kernel: str, meta: dict, dtype="fp32") -> list:
    """`(meta-parameters, num_warps, num_stages)` a recorded launch of `kernel` on `dtype`
    data may run at: the config its launcher chose (recorded in `meta` with its num_warps and
    num_stages, as the matmul launcher records its shape-and-device plan), else every
    autotune config at the launch's PRECISION."""
    if "num_warps" in meta:
        names = launch_specs()[kernel].configs[0].kwargs
        return [({n: meta[n] for n in names}, meta["num_warps"], meta["num_stages"])]
    return autotune_configs(kernel, dtype, meta.get("PRECISION"))


# ------------------------------------------------------------------------------ benchmark shapes
# The shapes of bench/kernels_gpu.py (same labels), which launches every kernel with sparse
# labels, no LSTM mask, SAME padding and the activations below.
MATMUL_CASES = [  # (label, M, K, N, bias, activation)
    ("Dense 128x784 @ 784x512 +relu", 128, 784, 512, True, "relu"),
    ("Dense 128x512 @ 512x10", 128, 512, 10, True, None),
    ("Dense 1024x4096 @ 4096x4096 +gelu", 1024, 4096, 4096, True, "gelu"),
    ("MobileNet 1x1 112*112x32 @ 32x64", 112 * 112, 32, 64, True, "relu6"),
    ("MobileNet 1x1 56*56x128 @ 128x128", 56 * 56, 128, 128, True, "relu6"),
    ("MobileNet 1x1 14*14x512 @ 512x512", 14 * 14, 512, 512, True, "relu6"),
    ("MobileNet 1x1 b32 7*7x1024 @ 1024x1024", 32 * 7 * 7, 1024, 1024, True, None),
    ("InceptionV3 1x1 b32 35*35x192 @ 192x64", 32 * 35 * 35, 192, 64, True, "relu"),
    ("InceptionV3 1x1 b32 17*17x768 @ 768x192", 32 * 17 * 17, 768, 192, True, "relu"),
    ("InceptionV3 1x1 b32 8*8x2048 @ 2048x320", 32 * 8 * 8, 2048, 320, True, "relu"),
    ("LSTM input projection 64*50x256 @ 256x1024", 64 * 50, 256, 1024, True, None),
    ("LSTM recurrent step 64x256 @ 256x1024", 64, 256, 1024, False, None),
    # Small M with K and N in the thousands: split-K.
    ("LSTM recurrent step 64x1024 @ 1024x4096", 64, 1024, 4096, False, None),
    ("Dense 128x4096 @ 4096x1024 +relu", 128, 4096, 1024, True, "relu"),
]
CONV_CASES = [  # (label, N, H, W, C, KH, KW, F, stride, groups, activation)
    ("MobileNet conv1 b32 3x3/2 224x224x3->32", 32, 224, 224, 3, 3, 3, 32, 2, 1, None),
    ("MobileNet dw b32 3x3 112x112x32", 32, 112, 112, 32, 3, 3, 32, 1, 32, None),
    ("MobileNet pw b32 1x1 112x112x32->64", 32, 112, 112, 32, 1, 1, 64, 1, 1, "relu6"),
    ("MobileNet dw b32 3x3/2 28x28x256", 32, 28, 28, 256, 3, 3, 256, 2, 256, None),
    ("InceptionV3 b32 3x3 147x147x32->64", 32, 147, 147, 32, 3, 3, 64, 1, 1, "relu"),
    ("InceptionV3 b32 5x5 35x35x48->64", 32, 35, 35, 48, 5, 5, 64, 1, 1, "relu"),
    ("InceptionV3 b32 1x7 17x17x128->128", 32, 17, 17, 128, 1, 7, 128, 1, 1, "relu"),
    ("InceptionV3 b32 3x3 8x8x448->384", 32, 8, 8, 448, 3, 3, 384, 1, 1, "relu"),
]
LSTM_CASES = [  # (label, batch, steps, units); tanh / sigmoid, forward order
    ("LSTM b64 t50 u256", 64, 50, 256),
    ("LSTM b32 t100 u128", 32, 100, 128),
    ("LSTM b128 t20 u512", 128, 20, 512),
    ("LSTM b64 t50 u32", 64, 50, 32),  # the recurrent kernel on chip
    ("LSTM b16 t20 u2048", 16, 20, 2048),  # a launch per step
]
GRU_CASES = [  # (label, batch, steps, units); Keras's default: reset_after with a recurrent bias
    ("GRU b64 t50 u64", 64, 50, 64),
    ("GRU b64 t50 u256", 64, 50, 256),  # the recurrent kernel streamed
]
XENT_CASES = [(128, 10), (256, 1000), (64, 50000), (4096, 32000)]  # (rows, classes)
BENCH_SMS = 132  # H100 SXM: conv grad-filter launchers split their reduction by SM count

_ELEMENT_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2}


@dataclasses.dataclass(frozen=True)
class _Ptr:
    """A tensor argument: its element type and byte offset from a fresh allocation (which the
    CUDA caching allocator aligns to 512 bytes)."""

    dtype: str
    offset: int = 0


def _xent_block(classes: int) -> tuple:
    """(BLOCK, ONE_PASS) as softmax_xent's launcher picks them."""
    block = min(1 << max(classes - 1, 0).bit_length(), _import("_softmax_xent").BLOCK_MAX)
    return block, classes <= block


def _same_padding(size: int, ks: int, stride: int) -> tuple:
    # TensorFlow's SAME padding, as the benchmark resolves it: the extra pixel goes last.
    total = max((-(-size // stride) - 1) * stride + ks - size, 0)
    return total // 2, total - total // 2


def cases() -> list:
    """The labels of every benchmark case, in order."""
    labels = [c[0] for c in MATMUL_CASES + CONV_CASES + LSTM_CASES + GRU_CASES]
    return labels + [f"softmax-xent {rows}x{c}" for rows, c in XENT_CASES]


def run_case(case: str, dtype: torch.dtype = torch.float32) -> None:
    """Calls the routes the benchmark calls for one case, on meta tensors of `dtype`."""
    from keratron.triton_kernels import conv2d, gru, lstm, matmul, softmax_xent

    def meta(*shape, dtype=dtype):
        return torch.empty(*shape, dtype=dtype, device="meta")

    by_label = {c[0]: c for c in MATMUL_CASES + CONV_CASES + LSTM_CASES + GRU_CASES}
    if case.startswith("softmax-xent"):
        rows, c = (int(v) for v in case.split()[1].split("x"))
        labels = meta(rows, dtype=torch.int64)
        softmax_xent.forward_route(meta(rows, c), labels, True)
        softmax_xent.backward_route(meta(rows), meta(rows, c), labels, True)
    elif case in {c[0] for c in MATMUL_CASES}:
        _, m, k, n, bias, act = by_label[case]
        matmul.matmul_route(meta(m, k), meta(k, n), meta(n) if bias else None, act)
    elif case in {c[0] for c in CONV_CASES}:
        _, n, h, w, c, kh, kw, f, s, groups, act = by_label[case]
        pads = (_same_padding(h, kh, s), _same_padding(w, kw, s))
        geom = dict(strides=(s, s), padding=pads, dilation=(1, 1), groups=groups)
        x, k = meta(n, h, w, c), meta(kh, kw, c // groups, f)
        g = conv2d.conv_route(x, k, meta(f), activation=act, **geom)
        conv2d.grad_input_route(g, k, input_shape=tuple(x.shape), **geom)
        conv2d.grad_filter_route(x, g, kernel_shape=tuple(k.shape), **geom)
    elif case in {c[0] for c in GRU_CASES}:
        _, b, t, u = by_label[case]
        params = dict(reverse=False, reset_after=True, activation="tanh",
                      recurrent_activation="sigmoid", zero_output_for_mask=False)  # fmt: skip
        x, h0, kernel, bias = meta(b, t, 3 * u), meta(b, u), meta(u, 3 * u), meta(3 * u)
        all_h, _, gates, aux = gru.forward_route(x, h0, kernel, bias, None, **params)
        gru.backward_route(meta(b, t, u), h0, h0, kernel, bias, None, all_h, gates, aux, **params)
    else:
        _, b, t, u = by_label[case]
        params = dict(reverse=False, activation="tanh", recurrent_activation="sigmoid",
                      zero_output_for_mask=False)  # fmt: skip
        x, h0, c0, kernel = meta(b, t, 4 * u), meta(b, u), meta(b, u), meta(u, 4 * u)
        all_h, _, _, gates, cells = lstm.forward_route(x, h0, c0, kernel, None, **params)
        lstm.backward_route(meta(b, t, u), h0, c0, h0, c0, kernel, None, all_h, gates, cells,
                            **params)  # fmt: skip


_POINTER_TYPES = {torch.int64: "i64", torch.int32: "i32", torch.uint8: "u8"}


def as_ptr(value):
    """A tensor argument as the `_Ptr` the JIT specialises on; other values unchanged."""
    if not isinstance(value, torch.Tensor):
        return value
    from keratron.triton_kernels._common import TRITON_TYPES

    tt = TRITON_TYPES.get(value.dtype) or _POINTER_TYPES[value.dtype]
    return _Ptr(tt, value.storage_offset() * value.element_size())


@contextlib.contextmanager
def _float32_precision(precision: str):
    # The benchmark times float32 with TF32 dots; the setting is read from the environment
    # (the setter would also write torch's flags, which a report has no business changing).
    previous = os.environ.get("KERATRON_FLOAT32_PRECISION")
    os.environ["KERATRON_FLOAT32_PRECISION"] = precision
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop("KERATRON_FLOAT32_PRECISION")
        else:
            os.environ["KERATRON_FLOAT32_PRECISION"] = previous


def bench_launches(dtype: str = "float32") -> list:
    """`(module, kernel, args, meta, case)` for every kernel launch of the benchmark shapes in
    `dtype`: the positional arguments and constexpr keywords each launcher passes (tile sizes
    aside), with tensors as `_Ptr`s. Recorded from the launchers themselves, run on meta
    tensors, with the grad-filter splits of a BENCH_SMS GPU."""
    from keratron.triton_kernels._common import record_launches

    torch_dtype = getattr(torch, dtype)
    out = []
    for case in cases():
        with _float32_precision("tf32"), record_launches(BENCH_SMS) as launches:
            run_case(case, torch_dtype)
        for kernel, args, meta in launches:
            module = kernel.fn.fn.__module__.rsplit(".", 1)[-1]
            out.append((module, kernel.name, tuple(as_ptr(a) for a in args), meta, case))
    return out


def specialise(fn, args, meta) -> tuple:
    """(signature, constexprs, divisible) the JIT derives from a launch of `fn`: an integer 1
    becomes a constexpr, and integers that are multiples of 16 and 16-byte aligned pointers
    are marked divisible, except for parameters marked `do_not_specialize`."""
    values = dict(zip(fn.arg_names, args), **meta)
    missing = [p.name for p in fn.params if p.name not in values]
    if missing or len(args) > len(fn.arg_names):
        raise ValueError(
            f"aot: a launch of {fn.__name__} gives {len(args)} arguments and {sorted(meta)}; "
            f"missing: {missing}"
        )
    sig, consts, divisible = {}, {}, []
    for p in fn.params:
        v = values[p.name]
        specialise_value = not p.do_not_specialize
        aligned = specialise_value and not p.do_not_specialize_on_alignment
        if p.is_constexpr or p.name in meta or v is None:
            sig[p.name], consts[p.name] = "constexpr", v
        elif isinstance(v, _Ptr):
            sig[p.name] = "*" + v.dtype
            if aligned and v.offset % 16 == 0:
                divisible.append(p.name)
        elif v == 1 and specialise_value:
            sig[p.name], consts[p.name] = "constexpr", 1
        else:
            sig[p.name] = "i32" if -(2**31) <= v < 2**31 else "i64"
            if aligned and v % 16 == 0:
                divisible.append(p.name)
    return tuple(sig.items()), tuple(consts.items()), tuple(divisible)


def benchmark_specs(dtypes=("float32",)) -> list:
    """One spec per distinct JIT specialisation of the benchmark launches in `dtypes` and per
    config each may run at (`launch_configs`; launches that specialise alike share their
    specs)."""
    specs, seen = [], set()
    launches = [(dtype, launch) for dtype in dtypes for launch in bench_launches(dtype)]
    for dtype, (module, kernel, args, meta, case) in launches:
        fn = _kernel(module, kernel)
        configs = launch_configs(kernel, meta, getattr(torch, dtype))
        for i, (tiles, warps, stages) in enumerate(configs):
            sig, consts, divisible = specialise(fn, args, {**meta, **tiles})
            key = (module, kernel, sig, consts, divisible, warps, stages)
            if key in seen:
                continue
            seen.add(key)
            name = f"{kernel.strip('_')}_{_dtype(dict(sig))}_cfg{i}"
            # A case may launch a kernel in several specialisations (the LSTM's last step).
            taken = sum(s.name.split("/")[0] == name and s.case == case for s in specs)
            name += f"/{taken + 1}" if taken else ""
            spec = Spec(module, kernel, name, _dtype(dict(sig)), sig, consts, warps, stages,
                        divisible=divisible, origin="bench", case=case)  # fmt: skip
            specs.append(spec)
    return specs


# ------------------------------------------------------------------------------ compiling
@dataclasses.dataclass
class Result:
    """What compiling one spec for one target gave."""

    spec: Spec
    target: str
    ok: bool
    error: str = ""
    regs: int = 0
    stack: int = 0  # bytes per thread; ptxas keeps spilled registers in the stack frame
    local: int = 0  # bytes of local memory per thread besides the stack
    smem_static: int = 0
    smem_dynamic: int = 0  # what Triton asks for at launch (metadata.shared)
    # Asynchronous global-to-shared copies (LDGSTS) of 8 or 16 bytes, and of 4 (an element
    # each); None where the build did not disassemble (`build(..., copies=True)`).
    copies_wide: int | None = None
    copies_narrow: int | None = None
    occ: dict = dataclasses.field(default_factory=dict)

    @property
    def spill(self) -> int:
        return self.stack + self.local

    @property
    def smem(self) -> int:
        return self.smem_static + self.smem_dynamic


_RES = re.compile(r"REG:(\d+) STACK:(\d+) SHARED:(\d+) LOCAL:(\d+)")


def parse_res_usage(text: str) -> dict:
    """Registers, stack, static shared and local bytes from `cuobjdump -res-usage` output.

    Example:
        >>> parse_res_usage("Function k:\\n REG:40 STACK:0 SHARED:0 LOCAL:8 CONSTANT[0]:400")
        {'regs': 40, 'stack': 0, 'smem_static': 0, 'local': 8}
    """
    m = _RES.search(text)
    if m is None:
        raise ValueError(f"aot: no resource line in cuobjdump output: {text[:200]!r}")
    regs, stack, shared, local = (int(g) for g in m.groups())
    return dict(regs=regs, stack=stack, smem_static=shared, local=local)


_LDGSTS = re.compile(r"\bLDGSTS((?:\.\w+)*)")


def parse_async_copies(sass: str) -> dict:
    """The asynchronous global-to-shared copies (`cp.async`, SASS `LDGSTS`) in a cubin's SASS:
    `copies_wide` of 8 or 16 bytes (suffix .64 or .128), `copies_narrow` of 4 bytes (an
    element each). A kernel that copies an operand tile element by element makes the narrow
    ones: on sm_90, a 32-bit operand that is not K-major on its way to a TF32 wgmma.

    Example:
        >>> parse_async_copies("LDGSTS.E.BYPASS.128 [R1], desc[UR4][R2.64] ;\\n"
        ...                    "LDGSTS.E [R3+0x80], desc[UR4][R4.64] ;")
        {'copies_wide': 1, 'copies_narrow': 1}
    """
    wide = narrow = 0
    for suffixes in _LDGSTS.findall(sass):
        parts = suffixes.split(".")
        if "128" in parts or "64" in parts:
            wide += 1
        else:
            narrow += 1
    return dict(copies_wide=wide, copies_narrow=narrow)


def default_cache_dir() -> str:
    return os.environ.get("KERATRON_AOT_CACHE") or os.path.join(
        os.path.expanduser("~"), ".cache", "keratron", "triton-aot"
    )


def _worker_init(cache_dir: str) -> None:
    # A compile-only process: kernels must be real jit functions, whatever the caller's
    # environment says (an interpreted function cannot be compiled).
    os.environ.pop("TRITON_INTERPRET", None)
    os.environ["TRITON_CACHE_DIR"] = cache_dir
    # Only the cubin and its metadata are read back; the IR stages would be ~10x the disk.
    os.environ["TRITON_STORE_BINARY_ONLY"] = "1"


def _compile(job) -> dict:
    """Compiles one (spec, target, count copies) in a worker; returns the fields of a
    Result."""
    spec, target, copies = job
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from keratron.triton_kernels._common import FP_FUSION

    fn = _kernel(spec.module, spec.kernel)
    attrs = {(fn.arg_names.index(name),): [["tt.divisibility", 16]] for name in spec.divisible}
    sig, consts = dict(spec.signature), spec.consts()
    warps, stages = spec.num_warps, spec.num_stages
    try:
        kernel = triton.compile(
            ASTSource(fn=fn, signature=sig, constexprs=consts, attrs=attrs),
            target=GPUTarget("cuda", SMS[target].arch, 32),
            options={"num_warps": warps, "num_stages": stages, "enable_fp_fusion": FP_FUSION},
        )
    except Exception as e:  # noqa: BLE001 - every failure is a row of the report
        # The first line says what failed; a Triton CompilationError ends with its cause.
        lines = [line.strip() for line in str(e).splitlines() if line.strip()]
        lines = lines if len(lines) <= 4 else [lines[0], "...", *lines[-3:]]
        error = f"{type(e).__name__}: {' | '.join(lines)}"
        return dict(
            ok=False, error=error if len(error) <= 400 else f"{error[:150]} ... {error[-245:]}"
        )
    cuobjdump = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin",
                             "cuobjdump")  # fmt: skip
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(kernel.asm["cubin"])
        f.flush()
        # The disassembly takes ~0.5 s a cubin (nvdisasm), the resource line ~2 ms.
        flags = ["-res-usage", "-sass"] if copies else ["-res-usage"]
        out = subprocess.run(
            [cuobjdump, *flags, f.name], capture_output=True, text=True, check=True
        ).stdout
    fields = dict(ok=True, smem_dynamic=int(kernel.metadata.shared), **parse_res_usage(out))
    return {**fields, **parse_async_copies(out)} if copies else fields


def build(
    specs, targets=("sm_90", "sm_80"), jobs: int = 2, cache_dir=None, progress=None, copies=False
):
    """Compiles every spec once per target in a pool of `jobs` processes.

    Args:
        specs: `Spec`s (from `collect_specs` and `benchmark_specs`).
        targets: keys of `SMS`.
        jobs: worker processes.
        cache_dir: Triton cache directory (default `default_cache_dir()`).
        progress: optional callable(done, total) called as results arrive.

    Returns:
        One `Result` per (spec, target), occupancy filled in, in spec-then-target order.
    """
    cache_dir = cache_dir or default_cache_dir()
    os.makedirs(cache_dir, exist_ok=True)
    work = [(spec, target, copies) for spec in specs for target in targets]
    results = []
    # Spawned, not forked: a worker must import the kernels afresh (the caller may have them
    # interpreted), and forking a process that runs torch's thread pools is unsafe.
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(jobs, mp_context=ctx, initializer=_worker_init,
                             initargs=(cache_dir,)) as pool:  # fmt: skip
        for (spec, target, _), fields in zip(work, pool.map(_compile, work, chunksize=1)):
            res = Result(spec, target, **fields)
            if res.ok:
                res.occ = occupancy(SMS[target], res.regs, res.smem, spec.num_warps)
            results.append(res)
            if progress is not None:
                progress(len(results), len(work))
    return results


# ------------------------------------------------------------------------------ roofline
@dataclasses.dataclass(frozen=True)
class GPU:
    name: str
    bf16: float  # dense tensor-core FLOP/s (fp16 the same)
    tf32: float
    fp32: float  # without tensor cores
    hbm: float  # bytes/s
    l2: int  # bytes


GPUS = [
    GPU("H100 SXM", 989e12, 495e12, 67e12, 3.35e12, 50 * 2**20),
    GPU("H100 PCIe", 756e12, 378e12, 51e12, 2.0e12, 50 * 2**20),
]
# Host side of one dependent Triton launch from Python: the floor of a step-by-step LSTM.
LAUNCH_S = 5e-6


@dataclasses.dataclass(frozen=True)
class Workload:
    """One benchmark launch of a primitive: its FLOPs, DRAM bytes and launches."""

    op: str
    label: str
    kernels: str
    flops: float
    nbytes: float  # every input read once, every output written once (the bench's count)
    tensor_cores: bool
    launches: int = 1
    reread: float = 0.0  # bytes read again from DRAM by design (a chunked row past L2)


def workloads(dtype: str = "float32") -> list:
    """The benchmark shapes as `Workload`s in `dtype` (float32, float16 or bfloat16)."""
    e = _ELEMENT_BYTES[dtype]
    out = []
    for label, m, k, n, bias, _ in MATMUL_CASES:
        nbytes = e * (m * k + k * n + m * n + (n if bias else 0))
        out.append(Workload("matmul", label, "matmul", 2.0 * m * n * k, nbytes, True))
    for label, n, h, w, c, kh, kw, f, s, groups, _ in CONV_CASES:
        oh, ow = -(-h // s), -(-w // s)
        cg = c // groups
        flops = 2.0 * n * oh * ow * f * cg * kh * kw
        x, y, k_ = n * h * w * c, n * oh * ow * f, kh * kw * cg * f
        kind = "depthwise" if groups == c else "conv"
        tc = kind == "conv"
        out.append(Workload("conv", label, f"{kind}_fwd", flops, e * (x + k_ + f + y), tc))
        out.append(
            Workload("conv_grad_input", label, f"{kind}_grad_input", flops, e * (y + k_ + x), tc)
        )
        out.append(
            Workload("conv_grad_filter", label, f"{kind}_grad_filter", flops, e * (x + y + k_), tc)
        )
    for label, b, t, u in LSTM_CASES:
        flops = 2.0 * t * b * u * 4 * u
        # in: x_proj, h0, c0, kernel; out: all_h, last h and c, gates, cells.
        fwd = e * (4 * b * t * u + 2 * b * u + 4 * u * u + b * t * u + 2 * b * u + 5 * t * b * u)
        # in: g_all, g_h, g_c, h0, c0, kernel, all_h, gates, cells; out: dx, dh0, dc0, dkernel.
        bwd = e * (b * t * u + 4 * b * u + 4 * u * u + 6 * b * t * u + 4 * b * t * u + 2 * b * u
                   + 4 * u * u)  # fmt: skip
        out.append(Workload("lstm", label, "lstm_fwd_step", flops, fwd, True, launches=t))
        out.append(
            Workload(
                "lstm_grad",
                label,
                "lstm_carry+bwd_step+dkernel",
                2 * flops,
                bwd,
                True,
                launches=t + 3,
            )  # fmt: skip
        )
    for rows, classes in XENT_CASES:
        label = f"softmax-xent {rows}x{classes}"
        logits = e * rows * classes
        _, one_pass = _xent_block(classes)
        # A chunked row reads its logits twice; the second read hits L2 only if they fit.
        reread = 0.0 if one_pass or logits <= GPUS[0].l2 else float(logits)
        fwd = 2 * logits + 8 * rows + e * rows
        # Rows of up to ROWS_MAX_C classes: the rows kernels (many rows per program).
        rows_kernels = "_rows" if classes <= _import("_softmax_xent").ROWS_MAX_C else ""
        out.append(Workload("softmax_cross_entropy", label, f"xent_fwd{rows_kernels}",
                            4.0 * rows * classes, fwd, False, reread=reread))  # fmt: skip
        bwd = e * rows + 2 * logits + 8 * rows
        out.append(
            Workload(
                "softmax_cross_entropy_grad",
                label,
                f"xent_bwd{rows_kernels}",
                2.0 * rows * classes,
                bwd,
                False,
            )  # fmt: skip
        )
    return out


def roofline(work: Workload, gpu: GPU, dtype: str = "float32") -> tuple:
    """(seconds, bound) of `work` on `gpu`: the larger of its compute time at the peak its
    kernels use and its DRAM time; bound is "compute" or "memory". The expected time is the
    larger of this and the launch floor `work.launches * LAUNCH_S`.

    Example:
        >>> w = Workload("matmul", "square", "matmul", 2.0 * 4096**3, 3 * 2 * 4096**2, True)
        >>> roofline(w, GPUS[0], "bfloat16")[1]
        'compute'
    """
    if not work.tensor_cores:
        peak = gpu.fp32  # the row kernels and the direct depthwise kernels compute in fp32
    else:
        peak = gpu.tf32 if dtype == "float32" else gpu.bf16
    times = {"compute": work.flops / peak, "memory": (work.nbytes + work.reread) / gpu.hbm}
    bound = max(times, key=times.get)
    return times[bound], bound


# ------------------------------------------------------------------------------ report
_TILE_ORDER = ("BLOCK_B", "BLOCK_M", "BLOCK_P", "BLOCK_N", "BLOCK_C", "BLOCK_K", "GROUP_M")


def _tiles(spec: Spec) -> str:
    """The config's tile meta-parameters, e.g. "M128 N64 K32 G8"."""
    consts = spec.consts()
    keys = [k for k in _TILE_ORDER if k in consts]
    return " ".join(f"{k[6] if k.startswith('BLOCK_') else 'G'}{consts[k]}" for k in keys) or "-"


def _status(r: Result) -> str:
    if not r.ok:
        return f"FAILED: {r.error}"
    if r.smem > SMS[r.target].smem_per_block:
        return f"SHARED {r.smem} B > {SMS[r.target].smem_per_block} B per block"
    if r.spill:
        return f"SPILLS {r.spill} B/thread"
    return "launch fails" if r.occ["blocks"] == 0 else "ok"


def _copies(r: Result) -> str:
    return "-" if r.copies_wide is None else f"{r.copies_wide}/{r.copies_narrow}"


def resource_table(results) -> str:
    """One row per kernel spec x target: config, registers per thread, stack and local bytes
    (spills), static and dynamic shared memory, and the occupancy they imply: resident
    blocks per SM allowed by registers / shared memory / warps, the resulting blocks and
    warps per SM, and which limit binds; then the asynchronous copies in the code, wide (8-16
    bytes) / narrow (4 bytes, an element each: `parse_async_copies`)."""
    width = max([len("kernel spec"), *(len(r.spec.label) for r in results)])
    head = (
        f"{'kernel spec':<{width}} {'target':<6} {'tiles':<17} {'w':>2} {'s':>1} {'thr':>4} "
        f"{'regs':>4} {'stack':>5} {'local':>5} {'smem st':>7} {'smem dyn':>8} "
        f"{'blk r/s/w':>10} {'blk':>3} {'warps':>5} {'occ':>4} {'limit':<6} {'cp w/n':>7} "
        "status"
    )
    lines = [head, "-" * len(head)]
    for r in results:
        s = r.spec
        row = (
            f"{s.label:<{width}} {r.target:<6} {_tiles(s):<17} {s.num_warps:>2} {s.num_stages:>1} "
            f"{32 * s.num_warps:>4}"
        )
        if r.ok:
            o = r.occ
            limits = f"{o['by_regs']}/{o['by_smem']}/{o['by_warps']}"
            row += (
                f" {r.regs:>4} {r.stack:>5} {r.local:>5} {r.smem_static:>7} {r.smem_dynamic:>8} "
                f"{limits:>10} {o['blocks']:>3} {o['warps']:>5} {o['occupancy']:>4.0%} "
                f"{o['limiter']:<6} {_copies(r):>7}"
            )
        else:
            row += " " * 76
        lines.append(f"{row} {_status(r)}")
    return "\n".join(lines)


def resource_summary(results) -> str:
    """Per kernel and target: specs compiled, failures, max registers, spilling specs, max
    shared memory (static + dynamic), the occupancy range and the specs that copy into shared
    memory element by element (4-byte asynchronous copies)."""
    groups: dict = {}
    for r in results:
        groups.setdefault((r.spec.module, r.spec.kernel, r.target), []).append(r)
    head = (
        f"{'module':<13} {'kernel':<30} {'target':<6} {'specs':>5} {'failed':>6} "
        f"{'max regs':>8} {'spilling':>8} {'max smem':>9} {'occupancy':>11} {'4B copies':>9}"
    )
    lines = [head, "-" * len(head)]
    for (module, kernel, target), rs in groups.items():
        ok = [r for r in rs if r.ok]
        narrow = sum(bool(r.copies_narrow) for r in ok)
        occ = [r.occ["occupancy"] for r in ok]
        occ_range = f"{min(occ):.0%}-{max(occ):.0%}" if occ else "-"
        lines.append(
            f"{module:<13} {kernel:<30} {target:<6} {len(rs):>5} {len(rs) - len(ok):>6} "
            f"{max((r.regs for r in ok), default=0):>8} {sum(r.spill > 0 for r in ok):>8} "
            f"{max((r.smem for r in ok), default=0):>9} {occ_range:>11} "
            f"{narrow if any(r.copies_wide is not None for r in ok) else '-':>9}"
        )
    return "\n".join(lines)


def _fmt_time(seconds: float) -> str:
    return f"{seconds * 1e6:.1f} us" if seconds < 1e-2 else f"{seconds * 1e3:.2f} ms"


# The last measured figures: bench/kernels_h100.md's table (float32), and JSON files that
# `bench/kernels_gpu.py --json` writes, passed with --measured.
MEASURED_DEFAULT = os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench", "kernels_h100.md"
)
_MD_ROW = re.compile(r"^\|\s*(\w+)\s*\|\s*`([^`]+)`\s*\|.*\|\s*([\d.]+) us\s*\|\s*([\d.]+) us\s*\|"
                     r"\s*[\d.]+\s*\|\s*$")  # fmt: skip


def measured_times(paths=(MEASURED_DEFAULT,)) -> dict:
    """{(dtype, op, case label): (Triton seconds, torch seconds)} from the measurement files
    that exist among `paths`: a markdown table as bench/kernels_h100.md has it (op, case in
    backquotes, ..., Triton us, torch us, ratio; float32), or a JSON file of
    `bench/kernels_gpu.py --json` ({"dtype": ..., "results": [{"op", "case", "triton_us",
    "torch_us"}, ...]}). Later files override earlier ones.

    Example:
        >>> measured_times(["/nonexistent.md"])
        {}
    """
    import json

    out = {}
    for path in paths:
        if not os.path.exists(path):
            continue
        with open(path) as f:
            text = f.read()
        if path.endswith(".json"):
            data = json.loads(text)
            for r in data["results"]:
                key = (data["dtype"], r["op"], r["case"])
                out[key] = (r["triton_us"] * 1e-6, r["torch_us"] * 1e-6)
            continue
        for line in text.splitlines():
            m = _MD_ROW.match(line.strip())
            if m:
                op, case, triton_us, torch_us = m.groups()
                out[("float32", op, case)] = (float(triton_us) * 1e-6, float(torch_us) * 1e-6)
    return out


def matmul_plan(label: str, dtype: str = "float32") -> str:
    """The config the matmul launcher plans for benchmark case `label` on the benchmarks' GPU
    (sm_90, BENCH_SMS), e.g. "M128 N256 K16 w8 s3" or "M64 N64 K32 w4 s4 split-K 4"."""
    _, m, k, n, _, _ = next(c for c in MATMUL_CASES if c[0] == label)
    mm = _import("_matmul")
    p = mm.plan(m, n, k, 1, getattr(torch, dtype), (9, 0), BENCH_SMS)
    cfg = p.config
    text = f"M{cfg.kwargs['BLOCK_M']} N{cfg.kwargs['BLOCK_N']} K{cfg.kwargs['BLOCK_K']} "
    text += f"w{cfg.num_warps} s{cfg.num_stages}"
    return text + (f" split-K {p.split}" if p.split > 1 else "")


def roofline_table(dtype: str = "float32", measured=None) -> str:
    """Per benchmark launch: FLOPs, DRAM bytes, intensity, and on each of `GPUS` the roofline
    time with its bound, then the launch floor and the expected time on each GPU (the larger
    of roofline and floor); the config the matmul launcher plans on an H100; and, where
    `measured` (from `measured_times`) has the case in `dtype`, the last measured Triton and
    torch times and the Triton time over the SXM expectation."""
    measured = measured or {}
    head = f"{'op':<27} {'kernels':<27} {'case':<44} {'GFLOP':>8} {'MB':>8} {'FLOP/B':>6}"
    for gpu in GPUS:
        head += f" | {gpu.name:>10} {'bound':<7}"
    head += f" | {'floor':>8} | " + " ".join(f"{'expect ' + g.name[5:]:>11}" for g in GPUS)
    head += f" | {'plan (H100)':<30} | {'measured':>10} {'torch':>10} {'/expect':>7}"
    lines = [head, "-" * len(head)]
    matmul_labels = {c[0] for c in MATMUL_CASES}
    for w in workloads(dtype):
        nbytes = w.nbytes + w.reread
        row = (
            f"{w.op:<27} {w.kernels:<27} {w.label:<44} {w.flops / 1e9:8.3f} "
            f"{nbytes / 1e6:8.2f} {w.flops / nbytes:6.1f}"
        )
        expect = []
        for gpu in GPUS:
            seconds, bound = roofline(w, gpu, dtype)
            row += f" | {_fmt_time(seconds):>10} {bound:<7}"
            expect.append(max(seconds, w.launches * LAUNCH_S))
        row += f" | {_fmt_time(w.launches * LAUNCH_S):>8} | "
        row += " ".join(f"{_fmt_time(t):>11}" for t in expect)
        plan = matmul_plan(w.label, dtype) if w.label in matmul_labels else "autotuned"
        row += f" | {plan:<30} | "
        got = measured.get((dtype, w.op, w.label))
        if got is None:
            row += f"{'-':>10} {'-':>10} {'-':>7}"
        else:
            row += f"{_fmt_time(got[0]):>10} {_fmt_time(got[1]):>10} {got[0] / expect[0]:6.1f}x"
        lines.append(row)
    return "\n".join(lines)


def all_specs(bench_dtypes=("float32",)) -> list:
    """The modules' specs and the specialisations of the benchmark launches in `bench_dtypes`
    (float32, the benchmark's default, unless asked)."""
    return collect_specs() + benchmark_specs(bench_dtypes)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tools.kernels_aot",
        description="Compiles every Triton kernel for sm_90 and sm_80 and prints registers, "
        "spills, shared memory, occupancy, and the roofline of the benchmark shapes.",
    )
    parser.add_argument(
        "--targets", default="sm_90,sm_80", help="comma-separated, of: sm_90, sm_80"
    )
    parser.add_argument("--jobs", type=int, default=2, help="compile processes (default 2)")
    parser.add_argument("--cache-dir", default=None, help="Triton cache (KERATRON_AOT_CACHE)")
    parser.add_argument(
        "--bench-dtypes",
        default="float32",
        help="benchmark launches to specialise, comma-separated float32, float16, bfloat16",
    )
    parser.add_argument("--roofline-only", action="store_true", help="skip the compiles")
    parser.add_argument(
        "--measured",
        action="append",
        default=[],
        help="a JSON file of `bench/kernels_gpu.py --json` (repeatable); "
        "bench/kernels_h100.md is read first when it exists",
    )
    args = parser.parse_args(argv)
    targets = [t.strip() for t in args.targets.split(",") if t.strip()]
    unknown = [t for t in targets if t not in SMS]
    if unknown:
        parser.error(f"--targets: expected names from {sorted(SMS)}. Received: {unknown}")
    bench_dtypes = [d.strip() for d in args.bench_dtypes.split(",") if d.strip()]
    unknown = [d for d in bench_dtypes if d not in _ELEMENT_BYTES]
    if unknown:
        parser.error(f"--bench-dtypes: expected {sorted(_ELEMENT_BYTES)}. Received: {unknown}")
    missing = [p for p in args.measured if not os.path.exists(p)]
    if missing:
        parser.error(f"--measured: no such file. Received: {missing}")
    measured = measured_times([MEASURED_DEFAULT, *args.measured])
    status = 0
    if not args.roofline_only:
        specs = all_specs(bench_dtypes)
        start = time.perf_counter()

        def progress(done, total):
            if done % 50 == 0 or done == total:
                print(f"compiled {done}/{total}", file=sys.stderr, flush=True)

        results = build(specs, targets, args.jobs, args.cache_dir, progress, copies=True)
        elapsed = time.perf_counter() - start
        print(f"Resources of {len(specs)} kernel specs x {len(targets)} targets "
              f"({elapsed:.0f} s; cache {args.cache_dir or default_cache_dir()})\n")  # fmt: skip
        print(resource_table(results))
        print("\nPer kernel and target\n")
        print(resource_summary(results))
        bad = [r for r in results if _status(r) != "ok"]
        if bad:
            print(f"\n{len(bad)} specs fail to compile, spill or exceed shared memory.")
            status = 1
    for dtype in ("float32", "bfloat16"):
        peaks = "TF32 tensor cores" if dtype == "float32" else "bf16 tensor cores"
        print(f"\nRoofline, {dtype} ({peaks} for dots, fp32 CUDA cores for row and depthwise "
              f"kernels; launch floor {LAUNCH_S * 1e6:.0f} us)\n")  # fmt: skip
        print(roofline_table(dtype, measured))
    return status


if __name__ == "__main__":
    # Run through the importable module, so the worker processes unpickle the same classes.
    from tools import kernels_aot

    sys.exit(kernels_aot.main())
