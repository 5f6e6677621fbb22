"""Global settings: float type, epsilon, image layout, device, kernel backend, float32 matmul
precision, seeds, and Keras's logging and debugging switches (interactive logging, traceback
filtering, flash attention, unsafe deserialization, caps on epochs and steps).

Mirrors `keras.config` / `keras.backend`. Importing this module touches no torch global
state; only `set_float32_matmul_precision` (and TF's spelling of it) writes torch's TF32 flags,
because the caller asked for that precision everywhere.
"""

from __future__ import annotations

import contextlib
import os
import threading

import torch

_FLOATX = "float32"
_EPSILON = 1e-7
_IMAGE_DATA_FORMAT = "channels_last"
_KERNEL_BACKENDS = ("auto", "triton", "fallback")
_kernel_backend: str | None = None  # resolved lazily from KERATRON_KERNELS
_device_state = threading.local()
_default_device: str | None = None


# os.environ's own mapping (encoded names to encoded values) where this Python has one.
_ENVIRON_DATA = getattr(os.environ, "_data", None)
_environ_keys: dict = {}
_environ_values: dict = {}  # name -> (the encoded value object last seen, its decoded value)


def environ_get(name: str, default=None):
    """`os.environ.get(name, default)` at a few dictionary lookups' cost, for settings read at
    every kernel launch so that changing them takes effect: the value is decoded again only
    when `os.environ` holds a new object for it."""
    if not isinstance(_ENVIRON_DATA, dict):
        return os.environ.get(name, default)
    key = _environ_keys.get(name)
    if key is None:
        key = _environ_keys[name] = os.environ.encodekey(name)
    raw = _ENVIRON_DATA.get(key)
    if raw is None:
        return default
    seen = _environ_values.get(name)
    if seen is not None and seen[0] is raw:
        return seen[1]
    value = os.environ.decodevalue(raw)
    _environ_values[name] = (raw, value)
    return value


_SWITCH_ON, _SWITCH_OFF = ("1", "true", "on"), ("0", "false", "off")


def _env_switch(name: str, default: bool) -> bool:
    """The 0/1 environment variable `name` (also true/false, on/off); unset or empty is
    `default`. Anything else is a ValueError naming the variable."""
    env = environ_get(name, "").strip().lower()
    if env == "":
        return default
    if env not in _SWITCH_ON + _SWITCH_OFF:
        raise ValueError(f"{name} must be 0 or 1. Received: {env!r}")
    return env in _SWITCH_ON


def floatx() -> str:
    """Returns the default float type as a string, e.g. "float32"."""
    return _FLOATX


def set_floatx(value: str) -> None:
    """Sets the default float type ("float16", "bfloat16", "float32" or "float64")."""
    global _FLOATX
    if value not in ("float16", "bfloat16", "float32", "float64"):
        raise ValueError(
            "Unknown `floatx` value. Expected one of float16, bfloat16, float32, float64. "
            f"Received: floatx={value!r}"
        )
    _FLOATX = str(value)


def epsilon() -> float:
    """Returns the fuzz factor used in numeric expressions (default 1e-7)."""
    return _EPSILON


def set_epsilon(value: float) -> None:
    """Sets the fuzz factor used in numeric expressions."""
    global _EPSILON
    _EPSILON = float(value)


def image_data_format() -> str:
    """Returns "channels_last" (default) or "channels_first"."""
    return _IMAGE_DATA_FORMAT


def set_image_data_format(data_format: str) -> None:
    """Sets the default image layout."""
    global _IMAGE_DATA_FORMAT
    data_format = str(data_format).lower()
    if data_format not in ("channels_first", "channels_last"):
        raise ValueError(
            "The `data_format` argument must be one of channels_first, channels_last. "
            f"Received: data_format={data_format!r}"
        )
    _IMAGE_DATA_FORMAT = data_format


def standardize_data_format(data_format: str | None) -> str:
    """Returns `data_format` validated, or the global default when None."""
    if data_format is None:
        return image_data_format()
    data_format = str(data_format).lower()
    if data_format not in ("channels_first", "channels_last"):
        raise ValueError(
            "The `data_format` argument must be one of channels_first, channels_last. "
            f"Received: data_format={data_format!r}"
        )
    return data_format


# ---------------------------------------------------------------------------- devices


def _normalize_device(name) -> str:
    name = str(name).lower()
    if name.startswith("gpu"):
        name = "cuda" + name[3:]
    if name.startswith("/"):  # TensorFlow spelling, "/cpu:0" or "/gpu:0"
        name = name.lstrip("/").replace("gpu", "cuda")
    if name.endswith(":0") and name.startswith("cpu"):
        name = "cpu"
    try:
        torch.device(name)
    except RuntimeError as e:
        raise ValueError(f"Unknown device. Expected 'cpu' or 'cuda[:N]'. Received: {name!r}") from e
    return name


_resolved_default: tuple | None = None  # (KERATRON_DEVICE value, device) last resolved


def set_device(name: str | None) -> None:
    """Sets the device that new tensors and variables go to; None restores the default."""
    global _default_device, _resolved_default
    _default_device = None if name is None else _normalize_device(name)
    _resolved_default = None


def default_device() -> str:
    """The device new tensors go to: a `device()` scope, `set_device`, KERATRON_DEVICE, then
    CUDA when available, else CPU."""
    stack = getattr(_device_state, "stack", None)
    if stack:
        return stack[-1]
    if _default_device is not None:
        return _default_device
    global _resolved_default
    env = os.environ.get("KERATRON_DEVICE")
    # Resolved once per value of KERATRON_DEVICE (asking CUDA is slow, and this runs per op).
    if _resolved_default is None or _resolved_default[0] != env:
        dev = _normalize_device(env) if env else "cuda" if torch.cuda.is_available() else "cpu"
        _resolved_default = (env, dev)
    return _resolved_default[1]


@contextlib.contextmanager
def device(name: str):
    """Scopes tensor and variable creation to a device.

    Example:
        >>> with keratron.device("cpu"):
        ...     x = keratron.ops.ones((2,))
    """
    name = _normalize_device(name)
    stack = getattr(_device_state, "stack", None)
    if stack is None:
        stack = _device_state.stack = []
    stack.append(name)
    try:
        yield
    finally:
        stack.pop()


# ---------------------------------------------------------------------------- CUDA graphs
_cuda_graphs: bool | None = None  # resolved from KERATRON_CUDA_GRAPHS when None


def set_cuda_graphs(enabled: bool | None) -> None:
    """Lets a compiled step on CUDA replay as one CUDA graph.

    On by default. The train, test and predict steps of `fit`, `evaluate` and `predict` (and a
    `keratron.function(..., cuda_graphs=True)`) are captured as one `torch.cuda.CUDAGraph` per
    input signature after a warm-up call and replayed; a step that cannot be captured runs
    as before, with one warning naming the cause. Off, every step runs uncaptured. CPU steps
    are never captured. None re-reads KERATRON_CUDA_GRAPHS ("0" is off).

    Example:
        >>> keratron.config.set_cuda_graphs(False)
        >>> keratron.config.cuda_graphs()
        False
        >>> keratron.config.set_cuda_graphs(None)
    """
    global _cuda_graphs
    _cuda_graphs = None if enabled is None else bool(enabled)


def cuda_graphs() -> bool:
    """Whether compiled steps on CUDA may replay as CUDA graphs: `set_cuda_graphs`, else
    KERATRON_CUDA_GRAPHS ("1" or unset on, "0" off)."""
    if _cuda_graphs is not None:
        return _cuda_graphs
    return _env_switch("KERATRON_CUDA_GRAPHS", default=True)


# ---------------------------------------------------------------------------- host memory
_host_memory_cache: bool | None = None  # resolved from KERATRON_HOST_MEMORY_CACHE when None


def set_host_memory_cache(enabled: bool | None) -> None:
    """Lets `fit`, `evaluate` and `predict` tune glibc's malloc for the whole process.

    Off by default. When on, the first of those calls asks glibc (Linux only) to serve every
    block from its heap and to trim the heap only past 1 GiB of free memory, so each training
    step reuses the previous step's buffers instead of faulting in fresh pages; the price is
    that up to 1 GiB of freed memory stays with the process. The allocator settings are
    process-wide and stay in effect once applied: turning the switch off afterwards does not
    undo them. None re-reads the KERATRON_HOST_MEMORY_CACHE environment variable ("1" is on).

    Example:
        >>> keratron.config.set_host_memory_cache(True)
        >>> keratron.config.host_memory_cache()
        True
        >>> keratron.config.set_host_memory_cache(None)
    """
    global _host_memory_cache
    _host_memory_cache = None if enabled is None else bool(enabled)


def host_memory_cache() -> bool:
    """Whether the training loops may tune glibc's malloc: `set_host_memory_cache`, else the
    KERATRON_HOST_MEMORY_CACHE environment variable ("1" on, "0" or unset off)."""
    if _host_memory_cache is not None:
        return _host_memory_cache
    return _env_switch("KERATRON_HOST_MEMORY_CACHE", default=False)


# ---------------------------------------------------------------------------- CPU threads
_adapt_threads: bool | None = None  # resolved from KERATRON_ADAPT_THREADS when None


def set_adapt_threads(enabled: bool | None) -> None:
    """Lets `fit`, `evaluate` and `predict` run torch's CPU kernels on the cores other
    processes leave free.

    On by default. When another process keeps some cores busy, those calls lower torch's
    intra-op thread count (`torch.set_num_threads`) to the cores that are free, never raise it,
    and restore the caller's count when they return. The same switch, as the environment
    variable KERATRON_ADAPT_THREADS=0. (OpenMP's passive wait policy is a separate opt-in,
    KERATRON_OMP_PASSIVE=1 before `import keratron`; see the README.) None re-reads
    KERATRON_ADAPT_THREADS ("0" is off).

    Example:
        >>> keratron.config.set_adapt_threads(False)
        >>> keratron.config.adapt_threads()
        False
        >>> keratron.config.set_adapt_threads(None)
    """
    global _adapt_threads
    _adapt_threads = None if enabled is None else bool(enabled)


def adapt_threads() -> bool:
    """Whether the training loops match torch's thread count to the free cores:
    `set_adapt_threads`, else KERATRON_ADAPT_THREADS ("1" or unset on, "0" off)."""
    if _adapt_threads is not None:
        return _adapt_threads
    return _env_switch("KERATRON_ADAPT_THREADS", default=True)


_cpu_kernel_benchmark: bool | None = None  # resolved from KERATRON_CPU_KERNEL_BENCHMARK


def set_cpu_kernel_benchmark(enabled: bool | None) -> None:
    """Lets the CPU routes pick between kernels by timing them on this machine.

    On by default. Where two CPU kernels compute the same product and which is faster depends
    on the processor (torch's BLAS GEMM and oneDNN's inner product), the first call of each
    shape times both on its own operands and later calls run the faster, as cuDNN's benchmark
    mode does on a GPU. Off, each route takes a fixed rule, so which kernel runs (and the
    rounding of its result) does not depend on timing. None re-reads the environment
    variable KERATRON_CPU_KERNEL_BENCHMARK ("0" is off).

    Example:
        >>> keratron.config.set_cpu_kernel_benchmark(False)
        >>> keratron.config.cpu_kernel_benchmark()
        False
        >>> keratron.config.set_cpu_kernel_benchmark(None)
    """
    global _cpu_kernel_benchmark
    _cpu_kernel_benchmark = None if enabled is None else bool(enabled)


def cpu_kernel_benchmark() -> bool:
    """Whether the CPU routes time their kernel choices: `set_cpu_kernel_benchmark`, else
    KERATRON_CPU_KERNEL_BENCHMARK ("1" or unset on, "0" off)."""
    if _cpu_kernel_benchmark is not None:
        return _cpu_kernel_benchmark
    return _env_switch("KERATRON_CPU_KERNEL_BENCHMARK", default=True)


# ---------------------------------------------------------------------------- kernel backend


def set_kernel_backend(name: str | None) -> None:
    """Chooses how hot ops run: "auto" (on CUDA, the faster of Triton and the torch fallback,
    measured once per call signature; on CPU the fallback), "triton" (always
    Triton; on CPU this needs TRITON_INTERPRET=1) or "fallback" (never Triton). None re-reads
    the KERATRON_KERNELS environment variable."""
    global _kernel_backend
    if name is None:
        _kernel_backend = None
        return
    name = str(name).lower()
    if name not in _KERNEL_BACKENDS:
        raise ValueError(
            f"Unknown kernel backend. Expected one of {_KERNEL_BACKENDS}. Received: {name!r}"
        )
    _kernel_backend = name


def kernel_backend() -> str:
    """Returns the active kernel backend name."""
    global _kernel_backend
    if _kernel_backend is None:
        env = os.environ.get("KERATRON_KERNELS", "auto").lower()
        if env not in _KERNEL_BACKENDS:
            raise ValueError(
                f"KERATRON_KERNELS must be one of {_KERNEL_BACKENDS}. Received: {env!r}"
            )
        _kernel_backend = env
    return _kernel_backend


# ---------------------------------------------------------------------------- float32 precision
_FLOAT32_PRECISIONS = ("ieee", "tf32")
_float32_precision: str | None = None  # resolved lazily from KERATRON_FLOAT32_PRECISION


def set_float32_matmul_precision(precision: str | None) -> None:
    """Chooses how float32 matrix products and convolutions multiply on NVIDIA GPUs: "ieee"
    (exact float32 products, the default) or "tf32" (TensorFloat-32 tensor cores: inputs
    rounded to a 10-bit mantissa, several times faster on Ampere and later).

    One setting governs keratron's Triton kernels (their `tl.dot` precision) and torch's
    cuBLAS / cuDNN calls alike, so backend "auto" times a kernel against a fallback of the
    same precision. Calling this also sets torch's own flags
    (`torch.backends.cuda.matmul.allow_tf32`, `torch.backends.cudnn.allow_tf32`) to match, for
    the whole process; None forgets the choice (KERATRON_FLOAT32_PRECISION is read again) and
    leaves torch's flags as they are. CPU results are IEEE either way.

    Example:
        >>> keratron.config.set_float32_matmul_precision("ieee")
        >>> keratron.config.float32_matmul_precision()
        'ieee'
    """
    global _float32_precision
    if precision is None:
        _float32_precision = None
        return
    name = str(precision).lower()
    if name not in _FLOAT32_PRECISIONS:
        raise ValueError(
            "Unknown float32 matmul precision. Expected one of ('ieee', 'tf32'). "
            f"Received: precision={precision!r}"
        )
    _float32_precision = name
    _set_torch_tf32(name == "tf32")


def float32_matmul_precision() -> str:
    """Returns "ieee" or "tf32": `set_float32_matmul_precision`, else the
    KERATRON_FLOAT32_PRECISION environment variable, else "ieee"."""
    if _float32_precision is not None:
        return _float32_precision
    env = environ_get("KERATRON_FLOAT32_PRECISION", "ieee").lower()
    if env not in _FLOAT32_PRECISIONS:
        raise ValueError(
            f"KERATRON_FLOAT32_PRECISION must be one of {_FLOAT32_PRECISIONS}. Received: {env!r}"
        )
    return env


def enable_tensor_float_32_execution(enabled: bool) -> None:
    """TensorFlow's spelling: `True` is `set_float32_matmul_precision("tf32")`, `False`
    is "ieee"."""
    set_float32_matmul_precision("tf32" if enabled else "ieee")


def tensor_float_32_execution_enabled() -> bool:
    """TensorFlow's spelling: whether float32 products may use TF32."""
    return float32_matmul_precision() == "tf32"


def _set_torch_tf32(enabled: bool) -> tuple:
    cublas, cudnn = torch.backends.cuda.matmul, torch.backends.cudnn
    previous = (cublas.allow_tf32, cudnn.allow_tf32)
    cublas.allow_tf32 = cudnn.allow_tf32 = enabled
    return previous


@contextlib.contextmanager
def float32_precision_scope():
    """Within this scope torch's TF32 flags follow `float32_matmul_precision()`; they are
    restored after. keratron wraps its own CUDA fallback calls in it (whatever the user's torch
    flags, a fallback multiplies at keratron's precision) without changing the process's flags.
    """
    previous = _set_torch_tf32(float32_matmul_precision() == "tf32")
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = previous


def backend() -> str:
    """The name of the backend, as `keras.config.backend()`: keratron is its own backend."""
    return "keratron"


def set_backend(backend: str) -> None:
    """Keras's backend switch; keratron has one backend, so only "keratron" is accepted.

    Raises:
        NotImplementedError: for any other backend name (Keras reloads itself on JAX,
            TensorFlow or torch; keratron computes with its own autodiff on torch storage).
    """
    if backend != "keratron":
        raise NotImplementedError(
            f"keras.config.set_backend is not available in keratron: it has a single backend "
            f"('keratron'). Received: backend={backend!r}"
        )


def is_nnx_enabled() -> bool:
    """Whether Flax NNX mode is on: never, as in Keras on any backend other than JAX."""
    return False


# ---------------------------------------------------------------------------- logging, debugging
_interactive_logging = True
_traceback_filtering = True
_flash_attention: bool | None = None  # None: on where it applies (Keras's default)
_MAX_EPOCHS: int | None = None
_MAX_STEPS_PER_EPOCH: int | None = None
_UNSAFE_DESERIALIZATION = False
if "KERAS_MAX_EPOCHS" in os.environ:
    _MAX_EPOCHS = int(os.environ["KERAS_MAX_EPOCHS"])
if "KERAS_MAX_STEPS_PER_EPOCH" in os.environ:
    _MAX_STEPS_PER_EPOCH = int(os.environ["KERAS_MAX_STEPS_PER_EPOCH"])


def enable_interactive_logging() -> None:
    """Sends keratron's messages and progress bars to stdout (the default)."""
    global _interactive_logging
    _interactive_logging = True


def disable_interactive_logging() -> None:
    """Sends keratron's messages to the `logging` logger "keratron" (level INFO) instead of
    stdout, and draws no live progress bars: the choice for jobs whose output is a log file.

    Example:
        >>> keratron.config.disable_interactive_logging()
        >>> keratron.config.is_interactive_logging_enabled()
        False
        >>> keratron.config.enable_interactive_logging()
    """
    global _interactive_logging
    _interactive_logging = False


def is_interactive_logging_enabled() -> bool:
    """Whether messages and progress bars go to stdout (True) or to `logging` (False)."""
    return _interactive_logging


def enable_traceback_filtering() -> None:
    """Turns traceback filtering back on (Keras's switch; see `disable_traceback_filtering`)."""
    global _traceback_filtering
    _traceback_filtering = True


def disable_traceback_filtering() -> None:
    """Keras's switch for showing its internal frames in tracebacks.

    keratron raises its errors where they happen and never removes frames from a traceback, so
    tracebacks are complete with the switch on or off; the setting is kept and reported by
    `is_traceback_filtering_enabled` for scripts that read it.
    """
    global _traceback_filtering
    _traceback_filtering = False


def is_traceback_filtering_enabled() -> bool:
    """The traceback-filtering switch (True unless `disable_traceback_filtering` was called)."""
    return _traceback_filtering


def enable_flash_attention() -> None:
    """Lets attention layers use flash attention where it applies (Keras's default)."""
    global _flash_attention
    _flash_attention = None


def disable_flash_attention() -> None:
    """Stops `MultiHeadAttention` (and `ops.dot_product_attention` called without an explicit
    `flash_attention`) from choosing flash attention.

    Example:
        >>> keratron.config.disable_flash_attention()
        >>> keratron.config.is_flash_attention_enabled()
        False
        >>> keratron.config.enable_flash_attention()
    """
    global _flash_attention
    _flash_attention = False


def is_flash_attention_enabled() -> bool | None:
    """False after `disable_flash_attention()`, else None ("on where it applies"), as Keras."""
    return _flash_attention


def set_max_epochs(max_epochs: int | None) -> None:
    """Caps the epochs of every `fit` call (a debugging aid; also the KERAS_MAX_EPOCHS
    environment variable). None removes the cap.

    Example:
        >>> keratron.config.set_max_epochs(1)
        >>> keratron.config.max_epochs()
        1
        >>> keratron.config.set_max_epochs(None)
    """
    global _MAX_EPOCHS
    _MAX_EPOCHS = max_epochs


def max_epochs() -> int | None:
    """The cap on `fit`'s epochs, or None."""
    return _MAX_EPOCHS


def set_max_steps_per_epoch(max_steps_per_epoch: int | None) -> None:
    """Caps the steps of each epoch of `fit`, and of `evaluate` and `predict` (a debugging
    aid; also the KERAS_MAX_STEPS_PER_EPOCH environment variable). None removes the cap."""
    global _MAX_STEPS_PER_EPOCH
    _MAX_STEPS_PER_EPOCH = max_steps_per_epoch


def max_steps_per_epoch() -> int | None:
    """The cap on steps per epoch, or None."""
    return _MAX_STEPS_PER_EPOCH


def enable_unsafe_deserialization() -> None:
    """Lets `Lambda` layers rebuild Python lambdas from serialized bytecode when loading.

    A config or model file holding a lambda's bytecode can run arbitrary code when loaded, so
    keratron refuses it unless this is called (or `safe_mode=False` is passed).
    """
    global _UNSAFE_DESERIALIZATION
    _UNSAFE_DESERIALIZATION = True


def unsafe_deserialization_enabled() -> bool:
    """Whether `enable_unsafe_deserialization()` was called."""
    return _UNSAFE_DESERIALIZATION
