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
import os

import torch
import triton
import triton.language as tl

from keratron import config
from keratron.ops import epilogue
from keratron.triton_kernels import count_launch, pin_configs

__all__ = [
    "ACTIVATION_CODES",
    "EPILOGUE_ACTIVATIONS",
    "FLOAT_DTYPES",
    "TRITON_TYPES",
    "Kernel",
    "activate",
    "activation_code",
    "dot_precision",
    "interpreted",
    "multiprocessor_count",
    "record_launches",
    "tanh",
]

# One encoding for every kernel: `ops.epilogue`'s codes of the epilogue activations (the
# constexpr ACTIVATION / ACT argument of `activate`; "linear" is None's code), then the LSTM's
# one extra recurrent activation.
EPILOGUE_ACTIVATIONS = epilogue.ACTIVATIONS
ACTIVATION_CODES = dict(epilogue.CODES, hard_sigmoid=len(epilogue.ACTIVATIONS))

# torch dtype -> Triton's element type name (signatures, pointer types).
TRITON_TYPES = {torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16"}
FLOAT_DTYPES = tuple(TRITON_TYPES)


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


def interpreted() -> bool:
    """Whether kernels run under the Triton interpreter (on CPU tensors)."""
    return os.environ.get("TRITON_INTERPRET") == "1"


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


def multiprocessor_count(device: torch.device) -> int:
    """SMs of `device` (1 off CUDA), or the count a `record_launches` scope names."""
    if _recording_sms is not None:
        return _recording_sms
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    return 1


def _constexpr_names(fn) -> tuple:
    # Jit and interpreted functions alike wrap the Python function as `.fn`; with postponed
    # annotations a constexpr parameter is annotated by the string "tl.constexpr".
    params = inspect.signature(fn.fn).parameters.values()
    return tuple(p.name for p in params if "constexpr" in str(p.annotation))


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
    """

    def __init__(self, fn, configs, key, op: str, pointer_types=None):
        self.fn = fn
        self.configs = configs
        self.key = list(key)
        self.op = op
        self.pointer_types = dict(pointer_types or {})
        self.name = fn.fn.__name__
        self.constexprs = _constexpr_names(fn)
        self.arg_names = tuple(n for n in fn.arg_names if n not in self.constexprs)
        self._tuned = None

    def args(self, values: dict) -> tuple:
        """The positional runtime arguments, in the kernel's order, from named `values`."""
        missing = [n for n in self.arg_names if n not in values]
        extra = [n for n in values if n not in self.arg_names and n not in self.constexprs]
        if missing or extra:
            raise TypeError(f"{self.name}: missing arguments {missing}, unknown {extra}")
        return tuple(values[n] for n in self.arg_names)

    def launch(self, grid, **values) -> None:
        """Runs the kernel on `grid` (a callable of the config's meta-parameters)."""
        meta = {n: values.pop(n) for n in self.constexprs if n in values}
        args = self.args(values)
        if _recording is not None:
            _recording.append((self, args, meta))
            return
        if pin_configs():
            cfg = self.configs[0]
            self.fn[grid(cfg.kwargs)](
                *args, **meta, **cfg.kwargs, num_warps=cfg.num_warps, num_stages=cfg.num_stages
            )
        else:
            if self._tuned is None:
                self._tuned = triton.autotune(configs=self.configs, key=self.key)(self.fn)
            self._tuned[grid](*args, **meta)
        count_launch(self.op)

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
