"""Host-memory reuse for the training and inference loops.

A training step allocates and frees the same large activation buffers every step. glibc's
malloc returns blocks of 128 KiB and up to the operating system on free (`munmap`, or a heap
trim) and takes them back on the next step, and every page of a fresh mapping faults on first
touch: on a small machine that costs as much as the arithmetic (zeroing one 19 MB gradient
buffer took 4 ms, a fifth of a convnet step's convolution time). TensorFlow avoids it with its
own caching allocator; torch's CPU allocator does not cache. `keep_freed_host_memory` asks
glibc to serve every block from the heap, none from a mapping of its own (blocks over 32 MiB,
the largest mmap threshold glibc accepts, would otherwise still be mapped and unmapped each
time: an InceptionV3 activation at batch 8 is 44 MB, 10,800 faults a batch), and to trim the
heap only past 1 GiB of free space, so a step reuses the previous step's memory. The price:
up to that much freed memory stays with the process.

`Model.fit`, `evaluate` and `predict` call it, and it acts only when the user has opted in with
`keratron.config.set_host_memory_cache(True)` or `KERATRON_HOST_MEMORY_CACHE=1`: the setting is
process-wide (it changes malloc for every library in the process), so keratron does not make it
on its own. Once applied it stays applied; it does nothing off glibc.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys

from keratron import config

_M_TRIM_THRESHOLD = -1  # glibc's mallopt parameter numbers (malloc.h)
_M_MMAP_MAX = -4
_TRIM_THRESHOLD = 1 << 30

_applied: bool | None = None


def keep_freed_host_memory() -> bool:
    """Tunes glibc's malloc once per process if `config.host_memory_cache()` is on; returns
    whether the settings are in effect."""
    global _applied
    if _applied is None:
        if not config.host_memory_cache():
            return False  # asked again on the next call: the user may opt in later
        _applied = _apply()
    return _applied


def _apply() -> bool:
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # not glibc (musl has no mallopt)
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    # With no mappings allowed, the mmap threshold no longer matters.
    ok = mallopt(_M_MMAP_MAX, 0) == 1
    return bool(ok and mallopt(_M_TRIM_THRESHOLD, _TRIM_THRESHOLD) == 1)
