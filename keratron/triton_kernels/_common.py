"""What every Triton kernel module shares: the epilogue activations (one encoding, one NaN
policy, one tanh and one sigmoid), the float32 dot precision, the dtype maps, and `Kernel`,
the launch-argument spec of one jit function (it builds the launcher's call, pins or autotunes
it, and gives the ahead-of-time signature).

Imported by the kernel modules only, so importing triton here is lazy from the package's
point of view.
"""

from __future__ import annotations

import contextlib
import inspect

import torch
import triton
import triton.language as tl
from triton.compiler import CompiledKernel
from triton.runtime.driver import driver as _triton_driver

from keratron import config
from keratron.config import environ_get
from keratron.ops import epilogue
from keratron.triton_kernels import count_launch, pin_configs

__all__ = [
    "ACTIVATION_CODES",
    "EPILOGUE_ACTIVATIONS",
    "FLOAT32_PRECISIONS",
    "FLOAT_DTYPES",
    "TRITON_TYPES",
    "KERNELS",
    "Kernel",
    "activate",
    "activation_code",
    "device_limits",
    "dot_precision",
    "forget_launches",
    "interpreted",
    "launch_state",
    "launchable",
    "multiprocessor_count",
    "record_launches",
    "route_cache",
    "set_stand_in",
    "tanh",
    "tensor_key",
]

# One encoding for every kernel: `ops.epilogue`'s codes of the epilogue activations (the
# constexpr ACTIVATION / ACT argument of `activate`; "linear" is None's code), then the LSTM's
# one extra recurrent activation.
EPILOGUE_ACTIVATIONS = epilogue.ACTIVATIONS
ACTIVATION_CODES = dict(epilogue.CODES, hard_sigmoid=len(epilogue.ACTIVATIONS))

# torch dtype -> Triton's element type name (signatures, pointer types).
TRITON_TYPES = {torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16"}
FLOAT_DTYPES = tuple(TRITON_TYPES)
# The float32 dot precisions, each with the suffix its ahead-of-time spec labels carry.
FLOAT32_PRECISIONS = (("tf32", ""), ("ieee", "_ieee"))


def activation_code(op: str, name) -> int:
    """The constexpr code of activation `name`; NotImplementedError (the fallback runs) for a
    name no kernel implements."""
    code = ACTIVATION_CODES.get(name)
    if code is None:
        raise NotImplementedError(f"{op}: activation {name!r} has no Triton kernel")
    return code


@triton.jit
def tanh(z):
    # tl has no tanh. Built on exp(-2|z|) <= 1 it cannot overflow, and the quotient keeps
    # relative precision near zero better than 2 * sigmoid(2z) - 1.
    e = tl.exp(-2.0 * tl.abs(z))
    t = (1.0 - e) / (1.0 + e)
    return tl.where(z < 0, -t, t)


@triton.jit
def activate(x, ACTIVATION: tl.constexpr):
    """`ACTIVATION_CODES` applied to a float32 tile, with `ops.epilogue`'s NaN policy: NaN
    propagates through relu, relu6 and hard_sigmoid as through torch's relu and clamp
    (tl.maximum alone would drop it)."""
    if ACTIVATION == 1:  # relu
        x = tl.maximum(x, 0.0, propagate_nan=tl.PropagateNan.ALL)
    elif ACTIVATION == 2:  # relu6
        x = tl.maximum(x, 0.0, propagate_nan=tl.PropagateNan.ALL)
        x = tl.minimum(x, 6.0, propagate_nan=tl.PropagateNan.ALL)
    elif ACTIVATION == 3:  # gelu
        x = 0.5 * x * (1.0 + tl.erf(x * 0.7071067811865476))
    elif ACTIVATION == 4:  # gelu_tanh
        inner = 0.7978845608028654 * (x + 0.044715 * x * x * x)
        x = 0.5 * x * (1.0 + tanh(inner))
    elif ACTIVATION == 5:  # sigmoid
        x = 1.0 / (1.0 + tl.exp(-x))
    elif ACTIVATION == 6:  # tanh
        x = tanh(x)
    elif ACTIVATION == 7:  # hard_sigmoid, as torch's hardsigmoid: clip(x / 6 + 1/2, 0, 1)
        x = tl.maximum(x / 6.0 + 0.5, 0.0, propagate_nan=tl.PropagateNan.ALL)
        x = tl.minimum(x, 1.0, propagate_nan=tl.PropagateNan.ALL)
    return x


# Floating-point contraction (a * b + c as one fused multiply-add) in every kernel, asked for
# explicitly: the kernels' tolerances, AOT reports and GPU timings are those of contracted
# code, and Triton 3.10 turns its default off (3.9 warns at the first compile when unasked).
FP_FUSION = True

# Triton decides at decoration time whether jit functions are interpreted.
_INTERPRETED = not isinstance(tanh, triton.runtime.JITFunction)


def interpreted() -> bool:
    """Whether kernels run under the Triton interpreter (on CPU tensors)."""
    return environ_get("TRITON_INTERPRET") == "1"


def dot_precision(dtype: torch.dtype) -> str:
    """The `tl.dot` input precision for operands of `dtype`: float32 follows
    `keratron.config.float32_matmul_precision()` ("ieee" or "tf32"); half types are exact."""
    if dtype != torch.float32:
        return "ieee"
    return config.float32_matmul_precision()


_recording: list | None = None
_recording_sms: int | None = None


@contextlib.contextmanager
def record_launches(multiprocessors: int | None = None):
    """Within this scope `Kernel.launch` records `(kernel, args, meta)` instead of running, so
    routes can be called on meta tensors to see every launch they would make (the ahead-of-time
    report does). `multiprocessors` stands in for the GPU's SM count."""
    global _recording, _recording_sms
    previous = _recording, _recording_sms
    _recording, _recording_sms = [], multiprocessors
    try:
        yield _recording
    finally:
        _recording, _recording_sms = previous


_stand_in = False


def set_stand_in(active: bool) -> None:
    """Marks a stand-in driver (`_standin.stand_in_driver`) active: launches on CPU tensors
    are then recorded by it instead of needing the interpreter."""
    global _stand_in
    _stand_in = bool(active)


def launchable(t: torch.Tensor) -> bool:
    """Whether a kernel can be launched on `t`'s memory here: CUDA tensors, meta tensors (only
    ever recorded), and CPU tensors under the interpreter or a stand-in driver."""
    return t.is_cuda or t.is_meta or _stand_in or interpreted()


def forget_launches() -> None:
    """Empties every `Kernel`'s launch caches and its JIT function's compiled kernels (the
    stand-in driver calls it on entry and exit, so its fake launchers never reach a real
    launch)."""
    for kernel in KERNELS:
        kernel.forget()
    for cache in ROUTE_CACHES:
        cache.clear()


def multiprocessor_count(device: torch.device) -> int:
    """SMs of `device` (1 off CUDA), or the count a `record_launches` scope names."""
    if _recording_sms is not None:
        return _recording_sms
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    return 1


# What launchers that size their grid to the GPU assume off CUDA (the interpreter, meta tensors
# recorded for the ahead-of-time report): an H100 SXM, the GPU the benchmarks target.
OFF_GPU_CAPABILITY = (9, 0)
OFF_GPU_SMS = 132


def device_limits(device: torch.device) -> tuple:
    """`((major, minor), SMs)` of `device`; off CUDA `OFF_GPU_CAPABILITY` and the SM count a
    `record_launches` scope names (else `OFF_GPU_SMS`), so that interpreted and recorded
    launches follow the plan of the benchmarks' GPU."""
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        return (props.major, props.minor), props.multi_processor_count
    return OFF_GPU_CAPABILITY, _recording_sms or OFF_GPU_SMS


def _constexpr_names(fn) -> tuple:
    # Jit and interpreted functions alike wrap the Python function as `.fn`; with postponed
    # annotations a constexpr parameter is annotated by the string "tl.constexpr".
    params = inspect.signature(fn.fn).parameters.values()
    return tuple(p.name for p in params if "constexpr" in str(p.annotation))


KERNELS: list = []  # every Kernel made, for forget_launches
ROUTE_CACHES: list = []  # every route_cache made, for forget_launches


def route_cache() -> dict:
    """A route's launches prepared per signature (`Kernel.launch`'s relaunch functions and
    what the route allocates around them), emptied with the kernels' launch caches by
    `forget_launches`. A route keys it by everything its launches depend on but the data:
    shapes, strides, dtypes, devices, 16-byte alignment of the inputs, its parameters, and
    `launch_state()`."""
    cache: dict = {}
    ROUTE_CACHES.append(cache)
    return cache


def tensor_key(t) -> tuple:
    """What a route cache key holds of a tensor: shape, strides, dtype, device and whether its
    address is 16-byte aligned (as Triton specialises pointers)."""
    return t.shape, t.stride(), t.dtype, t.device, t.data_ptr() & 15 == 0


def launch_state() -> tuple | None:
    """What a route cache key needs beyond the route's arguments: the current device and
    whether configs are pinned; None when launches cannot be cached (under the interpreter,
    in a `record_launches` scope, or with no GPU driver)."""
    if _recording is not None or _INTERPRETED:
        return None
    try:
        device = _triton_driver.active.get_current_device()
    except RuntimeError:  # no GPU driver here: the route's own checks decide
        return None
    return device, environ_get("KERATRON_TRITON_PIN") == "1"


def _int_class(v: int) -> tuple:
    """What Triton specialises an integer argument on: 1, divisibility by 16, 64 bits."""
    return v == 1, v % 16 == 0, -(2**31) <= v < 2**31


def _signature_functions(names: tuple, dynamic: tuple):
    """`(key, ordered)` for a kernel whose `launch` receives `names`: `key(values, grid,
    device, pinned)` is the launch-cache key of the named `values` (KeyError when one is
    missing), `ordered(values)` their tuple in parameter order. Both are generated as
    straight-line code, as Triton generates its binder: a loop over ~20 names would cost
    more than the launch they serve."""
    parts = []
    for n in names:
        if n.endswith("_ptr"):
            parts.append(f"v[{n!r}].dtype, v[{n!r}].data_ptr() & 15 == 0")
        elif n in dynamic:
            parts.append(f"int_class(v[{n!r}])")
        else:
            parts.append(f"v[{n!r}]")
    source = (
        "def key(v, grid, device, pinned):\n"
        "    cells = grid.__closure__\n"
        "    return (device, pinned, grid.__code__, "
        "cells and tuple([c.cell_contents for c in cells]), "
        f"{', '.join(parts)})\n"
        "def ordered(v):\n"
        f"    return ({''.join(f'v[{n!r}], ' for n in names)})\n"
    )
    namespace = {"int_class": _int_class}
    exec(source, namespace)
    return namespace["key"], namespace["ordered"]


# What Triton's `CudaLauncher.__call__` does with its arguments, whitespace removed: it takes
# the grid, the stream and the function, allocates the scratch buffers (None where the kernel
# needs none) and forwards everything to the C launcher. Where the installed launcher's source
# says exactly this, a bound launch calls the C launcher itself (`_direct_launcher`).
_LAUNCHER_HEAD = "def__call__(self,gridX,gridY,gridZ,stream,function,*args):"
_LAUNCHER_FORWARD = (
    "self.launch(gridX,gridY,gridZ,stream,function,self.launch_cooperative_grid,"
    "self.launch_pdl,global_scratch,profile_scratch,*args)"
)
_FORWARDS: dict = {}


def _direct_launcher(run):
    """The C launch function behind `run` (a compiled kernel's launcher) where calling it
    with the scratch buffers None does all that `run` would: `run`'s class forwards its
    arguments as `_LAUNCHER_HEAD` and `_LAUNCHER_FORWARD` say and the kernel needs no global
    or profile scratch. None otherwise (another Triton's launcher, a stand-in), and the launch
    goes through `run`."""
    cls = type(run)
    forwards = _FORWARDS.get(cls)
    if forwards is None:
        try:
            source = "".join(inspect.getsource(cls.__call__).split())
        except (OSError, TypeError, AttributeError):
            source = ""
        forwards = source.startswith(_LAUNCHER_HEAD) and _LAUNCHER_FORWARD in source
        _FORWARDS[cls] = forwards
    if not forwards or not hasattr(run, "launch"):
        return None
    scratch = getattr(run, "global_scratch_size", 1), getattr(run, "profile_scratch_size", 1)
    if any(scratch) or getattr(run, "gsan_enabled", False):
        return None
    return run.launch


def _hooked() -> bool:
    """Whether a launch hook is set (a profiler's): the hooks are chains, empty by default."""
    runtime = triton.knobs.runtime
    enter, exit_ = runtime.launch_enter_hook, runtime.launch_exit_hook
    return bool(getattr(enter, "calls", enter) or getattr(exit_, "calls", exit_))


class _Bound:
    """One signature's launch, resolved once: the compiled kernel's launcher, its function
    handle and packed metadata, the grid, and the config's meta-parameter values (the
    trailing arguments the launcher takes)."""

    __slots__ = ("kernel", "run", "direct", "function", "packed", "grid", "meta")

    def __init__(self, kernel, grid, meta: tuple):
        self.kernel = kernel
        self.run = kernel.run  # loads the module on first access (done by the first launch)
        self.direct = _direct_launcher(self.run)
        self.function = kernel.function
        self.packed = kernel.packed_metadata
        self.grid = (tuple(grid) + (1, 1))[:3]
        self.meta = meta

    def relaunch(self, names: tuple, values: dict, op: str):
        """This launch as a function of its pointers (the `*_ptr` arguments, in parameter
        order, positionally), every other argument fixed to its value in `values`: what a
        route cache holds. Generated as straight-line code, like `_signature_functions`.

        With a direct launcher (`_direct_launcher`) and no launch hook set, it calls the C
        launcher with the pointers' addresses: no Python launcher frame, no hook calls, and
        no `data_ptr` call and device-pointer query by the launcher per pointer (the route
        cache key has checked device, dtype and alignment)."""
        pointers = [n for n in names if n.endswith("_ptr")]
        args = "".join(f"{n}, " if n in pointers else f"v[{n!r}], " for n in names)
        lines = [
            f"def relaunch({', '.join(pointers)}):",
            "    active = driver.active",
            "    stream = active.get_current_stream(active.get_current_device())",
        ]
        launch = "    launch((" + args + "), stream)"
        if self.direct is None:
            lines.append(launch)
        else:
            addresses = "".join(
                f"{n}.data_ptr(), " if n in pointers else f"v[{n!r}], " for n in names
            )
            meta = "".join(f"meta[{i}], " for i in range(len(self.meta)))
            lines += [
                "    if hooked():",
                "    " + launch,
                "    else:",
                "        direct(gx, gy, gz, stream, function, cooperative, pdl, None, None, "
                f"packed, None, None, None, {addresses}{meta})",
            ]
        lines.append("    count_launch(op)")
        # Only the fixed values are kept: the first call's tensors must not outlive it.
        fixed = {n: values[n] for n in names if n not in pointers}
        namespace = dict(v=fixed, driver=_triton_driver, launch=self.launch, op=op)
        namespace["count_launch"] = count_launch
        if self.direct is not None:
            namespace.update(zip(("gx", "gy", "gz"), self.grid), function=self.function)
            namespace.update(packed=self.packed, meta=self.meta, hooked=_hooked)
            namespace.update(direct=self.direct, cooperative=self.run.launch_cooperative_grid)
            namespace["pdl"] = self.run.launch_pdl
        exec("\n".join(lines) + "\n", namespace)
        return namespace["relaunch"]

    def launch(self, args: tuple, stream) -> None:
        args += self.meta
        runtime = triton.knobs.runtime
        # Launch hooks (a profiler's) read the launch metadata: made only when one is set.
        metadata = self.kernel.launch_metadata(self.grid, stream, *args) if _hooked() else None
        gx, gy, gz = self.grid
        self.run(gx, gy, gz, stream, self.function, self.packed, metadata,
                 runtime.launch_enter_hook, runtime.launch_exit_hook, *args)  # fmt: skip


class Kernel:
    """The launch-argument spec of one jit function.

    The launcher names every argument once (`launch(grid, x_ptr=x, M=m, ...,
    ACTIVATION=code)`); the spec orders them as the kernel declares them, splits the runtime
    arguments from the constexprs, and runs the kernel pinned to its first config (the
    interpreter, KERATRON_TRITON_PIN=1) or autotuned over `configs` keyed by `key`. The same
    spec gives the ahead-of-time signature (`signature`), and under `record_launches` the
    argument lists of real launches.

    Args:
        fn: the `@triton.jit` function.
        configs: its autotune configs; the first is the pinned one.
        key: the arguments whose values retune.
        op: the primitive whose launch count `launch` bumps.
        pointer_types: element types of pointers that do not hold the data dtype, e.g.
            `{"taps_ptr": "i32"}`.
        dynamic: integer arguments whose value changes from launch to launch without changing
            the grid or the config (a time step): the launch cache keys them by Triton's
            specialisation class (1, a multiple of 16, 64-bit) instead of their value.
        ieee_configs: the configs of a float32 launch at IEEE precision (PRECISION="ieee"),
            where they differ from `configs`: such a dot runs on the CUDA cores, which read
            its operand tiles through registers, so a tile that fits beside a TF32 or 16-bit
            dot spills or does not compile (`configs_at`).
    """

    def __init__(
        self, fn, configs, key, op: str, pointer_types=None, dynamic=(), ieee_configs=None
    ):
        self.fn = fn
        self.configs = configs
        self.ieee_configs = configs if ieee_configs is None else ieee_configs
        self.key = list(key)
        self.op = op
        self.pointer_types = dict(pointer_types or {})
        self.name = fn.fn.__name__
        self.constexprs = _constexpr_names(fn)
        self.arg_names = tuple(n for n in fn.arg_names if n not in self.constexprs)
        self._tuned: dict = {}  # the autotuner of each config list, by id
        tuned = tuple(configs[0].kwargs)
        if any(tuple(c.kwargs) != tuned for c in (*configs, *self.ieee_configs)) or (
            tuned and tuple(fn.arg_names[-len(tuned) :]) != tuned
        ):
            raise ValueError(f"{self.name}: every config must set the trailing constexprs {tuned}")
        # What `launch` receives by name: every parameter but the config's.
        self._given = tuple(fn.arg_names[: len(fn.arg_names) - len(tuned)])
        unknown = set(dynamic) - set(self._given) | set(dynamic) & set(self.key)
        if unknown:
            raise ValueError(f"{self.name}: dynamic arguments {sorted(unknown)}")
        self._key, self._ordered = _signature_functions(self._given, tuple(dynamic))
        self._bound: dict = {}
        # Triton decides at decoration time: under TRITON_INTERPRET=1 there is no compiled
        # kernel to bind (and the interpreter pins the first config).
        self._interpreted = not isinstance(fn, triton.runtime.JITFunction)
        KERNELS.append(self)

    def forget(self) -> None:
        """Drops the autotuners (and their tuned configs) and the JIT function's compiled
        kernels."""
        self._tuned.clear()
        self._bound.clear()
        caches = getattr(self.fn, "device_caches", None)  # an interpreted function has none
        if caches is not None:
            caches.clear()

    def configs_at(self, dtype, precision: str) -> list:
        """The configs a launch on `dtype` data (a torch dtype or Triton name) at dot
        `precision` may run: `ieee_configs` for float32 at "ieee", else `configs`."""
        float32 = dtype in (torch.float32, "fp32")
        return self.ieee_configs if float32 and precision == "ieee" else self.configs

    def _configs_for(self, values: dict) -> list:
        """`configs_at` for a launch's named values: the data dtype is the most common of
        its tensors' (pointers named in `pointer_types` aside)."""
        precision = values.get("PRECISION")
        if precision is None or self.ieee_configs is self.configs:
            return self.configs
        dtypes = [
            v.dtype
            for n, v in values.items()
            if isinstance(v, torch.Tensor) and n not in self.pointer_types
        ]
        dtype = max(set(dtypes), key=dtypes.count) if dtypes else None
        return self.configs_at(dtype, precision)

    def args(self, values: dict) -> tuple:
        """The positional runtime arguments, in the kernel's order, from named `values`."""
        missing = [n for n in self.arg_names if n not in values]
        extra = [n for n in values if n not in self.arg_names and n not in self.constexprs]
        if missing or extra:
            raise TypeError(f"{self.name}: missing arguments {missing}, unknown {extra}")
        return tuple(values[n] for n in self.arg_names)

    def launch(self, grid, config=None, **values):
        """Runs the kernel on `grid` (a callable of the config's meta-parameters). Returns, for
        a route cache, a function that makes this launch's `_Bound.relaunch` (a function of
        the pointers alone), or None where the launch is not bound (interpreted, recorded, or
        compiling asynchronously).

        `config`, when given, is the config to run (one of `configs`, chosen by the launcher
        from the shape and the device): neither pinning nor autotuning applies, and a
        `record_launches` scope records its meta-parameters, num_warps and num_stages with the
        launcher's constexprs. The grid must capture what the choice depends on beyond the
        named values (the launch cache keys on the grid's captured values).

        The first launch of a signature goes through Triton's autotuner (or the pinned config)
        and JIT; it leaves a `_Bound` launch behind, which every later launch of the signature
        calls directly: no autotuner lookup, no argument binding, no grid call. A signature is
        what decides the compiled kernel, its config and its grid: the current device, pinning,
        each pointer's dtype and 16-byte alignment, the value of every other argument (the
        triton specialisation class of those named in `dynamic`), and the grid function's code
        and captured values (so a grid must depend on its closure and meta only).
        """
        if _recording is not None:
            meta = {n: values.pop(n) for n in self.constexprs if n in values}
            if config is not None:
                meta.update(config.kwargs, num_warps=config.num_warps)
                meta["num_stages"] = config.num_stages
            _recording.append((self, self.args(values), meta))
            return None
        if self._interpreted:
            self._run(grid, values, config)
            count_launch(self.op)
            return None
        active = _triton_driver.active
        device = active.get_current_device()
        try:
            key = self._key(values, grid, device, environ_get("KERATRON_TRITON_PIN") == "1")
        except KeyError:
            key = None
        if key is None or len(values) != len(self._given):
            self.args({n: v for n, v in values.items() if n not in self.constexprs})
            raise TypeError(f"{self.name}: constexprs {self.constexprs} expected")
        bound = self._bound.get(key)
        if bound is None:
            kernel, cfg = self._run(grid, values, config)
            if isinstance(kernel, CompiledKernel):  # not a future of an async compile
                bound = _Bound(kernel, grid(cfg.kwargs), tuple(cfg.kwargs.values()))
                self._bound[key] = bound
        else:
            bound.launch(self._ordered(values), active.get_current_stream(device))
        count_launch(self.op)
        return None if bound is None else lambda: bound.relaunch(self._given, values, self.op)

    def _run(self, grid, values: dict, config=None) -> tuple:
        """Launches through Triton's autotuner (or the pinned or given config) and JIT; returns
        the compiled kernel and the config it ran."""
        meta = {n: values[n] for n in self.constexprs if n in values}
        args = self.args({n: v for n, v in values.items() if n not in meta})
        configs = self._configs_for(values)
        if config is not None or pin_configs():
            cfg = config if config is not None else configs[0]
            kernel = self.fn[grid(cfg.kwargs)](
                *args, **meta, **cfg.kwargs, num_warps=cfg.num_warps, num_stages=cfg.num_stages,
                enable_fp_fusion=FP_FUSION,
            )  # fmt: skip
            return kernel, cfg
        tuned = self._tuned.get(id(configs))
        if tuned is None:
            tuned = self._tuned[id(configs)] = triton.autotune(configs=configs, key=self.key)(
                self.fn
            )
        kernel = tuned[grid](*args, **meta, enable_fp_fusion=FP_FUSION)
        return kernel, tuned.best_config

    def bound_signatures(self) -> list:
        """The signatures this kernel has a bound launch for (a list of keys, for tests)."""
        return list(self._bound)

    def signature(self, dtype, constexprs: dict) -> dict:
        """The ahead-of-time signature: data pointers of `dtype` (a torch dtype or Triton
        name), `pointer_types` for the others, 32-bit integers, and the names of `constexprs`
        (and every constexpr parameter) marked "constexpr"."""
        tt = TRITON_TYPES.get(dtype, dtype)
        sig = {}
        for name in self.fn.arg_names:
            if name in constexprs or name in self.constexprs:
                sig[name] = "constexpr"
            elif name.endswith("_ptr"):
                sig[name] = "*" + self.pointer_types.get(name, tt)
            else:
                sig[name] = "i32"
        return sig

    def aot_spec(self, label: str, dtype, constexprs: dict, cfg) -> tuple:
        """`(label, jit_function, signature, constexprs, num_warps, num_stages)` for config
        `cfg`, as the modules' `aot_specs()` list them."""
        consts = dict(constexprs, **cfg.kwargs)
        sig = self.signature(dtype, consts)
        return (label, self.fn, sig, consts, cfg.num_warps, cfg.num_stages)
