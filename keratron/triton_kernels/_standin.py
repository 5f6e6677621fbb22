"""A stand-in for Triton's CUDA driver, so that the compiled-kernel launch path runs on a
machine without a GPU: kernels compile for real (for sm_90, as the ahead-of-time report does),
autotuning picks a config without timing anything, and the driver's launcher records each
launch instead of running it. `bench/launch_overhead.py` times the routes' host work with it,
and the tests check the cached launch path with it.

Imported by tests and benchmarks only; it imports triton.
"""

from __future__ import annotations

import contextlib

from triton.backends.compiler import GPUTarget
from triton.runtime import driver as _driver

from keratron.triton_kernels import _common

__all__ = ["Launch", "stand_in_driver"]

# What `get_device_properties` reports: an H100 SXM.
_PROPERTIES = {
    "max_shared_mem": 232448,
    "multiprocessor_count": 132,
    "max_num_regs": 65536,
    "warpSize": 32,
    "sm_clock_rate": 1980000,
    "mem_clock_rate": 2619000,
    "mem_bus_width": 5120,
}


class Launch(tuple):
    """One recorded launch: `(kernel_name, grid, args)`, args in the kernel's parameter order
    (constexprs included, as the launcher receives them)."""

    __slots__ = ()

    def __new__(cls, name, grid, args):
        return super().__new__(cls, (name, grid, args))

    @property
    def name(self):
        return self[0]

    @property
    def grid(self):
        return self[1]

    @property
    def args(self):
        return self[2]


class _Launcher:
    """The compiled kernel's launcher (`CompiledKernel.run`): records, launches nothing."""

    def __init__(self, src, metadata, log):
        self.name = metadata.name
        self.log = log

    def __call__(self, gx, gy, gz, stream, function, packed, launch_metadata, enter, exit_, *args):
        if self.log is not None:
            self.log.append(Launch(self.name, (gx, gy, gz), args))


class _CudaLauncher:
    """Shaped as Triton's `CudaLauncher` (3.x with scratch buffers): `__call__` forwards to the
    C launcher `launch` as Triton's does, word for word, so that a bound launch finds it
    direct (`_common._direct_launcher`) and calls `launch` itself. `launch` records the
    launch as the C launcher would receive it: pointers are tensors through `__call__` and
    addresses on the direct path."""

    def __init__(self, src, metadata, log):
        self.name = metadata.name
        self.log = log
        self.num_ctas = 1
        self.global_scratch_size = self.profile_scratch_size = 0
        self.global_scratch_align = self.profile_scratch_align = 1
        self.launch_cooperative_grid = False
        self.launch_pdl = False

    def launch(self, gx, gy, gz, stream, function, cooperative, pdl, global_scratch,
               profile_scratch, packed, launch_metadata, enter, exit_, *args):  # fmt: skip
        if enter is not None:
            enter(launch_metadata)
        if self.log is not None:
            self.log.append(Launch(self.name, (gx, gy, gz), args))
        if exit_ is not None:
            exit_(launch_metadata)

    def __call__(self, gridX, gridY, gridZ, stream, function, *args):

        def allocate_scratch(size, align, allocator):
            if size > 0:
                raise AssertionError("the stand-in's kernels need no scratch")
            return None

        global_scratch = allocate_scratch(self.global_scratch_size, self.global_scratch_align, None)
        profile_scratch = allocate_scratch(
            self.profile_scratch_size, self.profile_scratch_align, None
        )
        self.launch(gridX, gridY, gridZ, stream, function, self.launch_cooperative_grid,
                    self.launch_pdl, global_scratch, profile_scratch, *args)  # fmt: skip


class _Utils:
    def load_binary(self, name, kernel, shared, device):
        # (module, function, n_regs, n_spills, n_max_threads)
        return object(), object(), 0, 0, 1024

    def unload_module(self, module):
        pass

    def get_device_properties(self, device):
        return dict(_PROPERTIES)


class _Driver:
    """What the JIT, the compiled kernel and the autotuner ask of `driver.active`."""

    def __init__(self, log, target, launcher):
        self.log = log
        self.target = target
        self.utils = _Utils()
        self.launcher_cls = lambda src, metadata: launcher(src, metadata, self.log)

    def is_active(self):
        return True

    def get_current_target(self):
        return self.target

    def get_current_device(self):
        return 0

    def set_current_device(self, device):
        pass

    def get_current_stream(self, device=None):
        return 0

    def get_benchmarker(self):
        # Autotuning "measures" each config as equally fast: the first one wins, untimed.
        return lambda kernel_call, quantiles=None: [1.0, 1.0, 1.0]

    def get_device_interface(self):
        import torch

        return torch.cuda

    def get_empty_cache_for_benchmark(self):
        import torch

        return torch.empty(0)

    def clear_cache(self, cache):
        pass


@contextlib.contextmanager
def stand_in_driver(record: bool = True, target=None, direct: bool = False):
    """Within this scope kernels compile for `target` (sm_90 by default) and every launch of a
    compiled kernel is recorded in the yielded list (`Launch` entries) instead of run; the
    launch caches of every `Kernel` are emptied on entry and exit, so no binding made for the
    stand-in outlives it. `record=False` drops the records (for timing loops).

    `direct=True` gives the compiled kernels a launcher shaped as Triton's CUDA launcher (a
    Python `__call__` over a C `launch`), which bound launches call directly as they do on a
    GPU: cached launches then record their pointers as addresses."""
    log = [] if record else None
    previous = _driver._active
    launcher = _CudaLauncher if direct else _Launcher
    _driver.set_active(_Driver(log, target or GPUTarget("cuda", 90, 32), launcher))
    _common.forget_launches()
    _common.set_stand_in(True)
    try:
        yield log if log is not None else []
    finally:
        _common.set_stand_in(False)
        _unload_fakes()
        _common.forget_launches()
        _driver._active = previous


def _unload_fakes() -> None:
    # A compiled kernel unloads its module through the active driver when collected: the
    # stand-in's fake modules must not reach the real driver.
    for kernel in _common.KERNELS:
        for caches in getattr(kernel.fn, "device_caches", {}).values():
            for compiled in caches[0].values():
                compiled.module = None
