"""torch's CPU thread count matched to the cores other processes leave free.

An intra-op parallel region ends at a barrier: it is as slow as its slowest thread. When
another process keeps a core busy, one of torch's threads waits for that core, and every
parallel region of a step waits for it; with one thread per free core nothing waits. So
`Model.fit`, `evaluate` and `predict` run inside `matched_to_free_cores()`: it counts the
runnable threads of other processes (the kernel's `nr_running`, less this process's own), and
when fewer cores than torch's thread count are free, lowers the count for the call and restores
the caller's count when the call returns. It never raises the count: a user's
`torch.set_num_threads` is a ceiling. Within such a lowered call, `predict` may run its
independent batches on threads instead (twice the caller's count: `batch_workers`,
`ordered_map`), one intra-op thread each, so that a thread whose core is free takes more
batches than one that shares its core. Measured on a 2-core machine beside busy processes, with
OpenMP's passive wait (keratron/_openmp.py): see bench/README.md.

The count is probed at most once a second (four readings of /proc, about 3 ms), so calling
`predict` in a loop costs nothing measurable. `keratron.config.set_adapt_threads(False)` or
KERATRON_ADAPT_THREADS=0 turns it off; off Linux (no /proc) it does nothing.
"""

from __future__ import annotations

import collections
import concurrent.futures
import contextlib
import functools
import os
import threading
import time

import torch

from keratron import config
from keratron.autodiff import side_stream

_PROBE_EVERY_S = 1.0
_SAMPLES = 4
_SAMPLE_GAP_S = 0.001

# (monotonic time, free cores, other processes' runnable threads)
_last_probe: tuple = (float("-inf"), None, None)
# Per thread: the caller's thread count where a `matched_to_free_cores` scope lowered it.
_scope = threading.local()


def _allowed_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _running_threads() -> int:
    """Runnable threads on the whole machine, this reading thread included (/proc/loadavg's
    fourth field, `running/total`)."""
    with open("/proc/loadavg", encoding="ascii") as f:
        return int(f.read().split()[3].split("/")[0])


def _own_running_threads() -> int:
    """This process's threads that are runnable now (state R), the reading thread included.
    Spinning OpenMP workers are running too, but they are no other process's load."""
    count = 0
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/stat", encoding="ascii", errors="replace") as f:
                # The state follows the parenthesised command name, which may hold spaces.
                if f.read().rpartition(")")[2].split()[0] == "R":
                    count += 1
        except (OSError, IndexError):
            continue  # the thread exited meanwhile
    return count


def other_runnable_threads() -> int | None:
    """Runnable threads of other processes: the fewest seen in four readings a millisecond
    apart. A busy process is runnable in every reading, while a thread that runs for a moment
    (a process starting or exiting, a kernel thread) would otherwise halve the threads of a
    whole call on a quiet machine. None where /proc cannot be read."""
    readings = []
    try:
        for i in range(_SAMPLES):
            if i:
                time.sleep(_SAMPLE_GAP_S)
            # This process's own threads are read before and after the machine's count: an
            # OpenMP worker that goes to sleep (or wakes) in between is still its own, and
            # counting it as another process's would lower the threads of a quiet machine.
            own_before = _own_running_threads()
            running = _running_threads()
            own = max(own_before, _own_running_threads())
            readings.append(max(0, running - own))
    except (OSError, ValueError, IndexError):
        return None
    return min(readings)


def _free_beside(others: int | None) -> int | None:
    """Cores of this process's affinity set that `others` runnable threads leave free (at
    least 1); None for None."""
    return None if others is None else max(1, _allowed_cores() - others)


def free_cores() -> int | None:
    """Cores of this process's affinity set that other processes' runnable threads leave
    free (at least 1), from `other_runnable_threads`. None where /proc cannot be read."""
    return _free_beside(other_runnable_threads())


def _probe() -> tuple:
    """(monotonic time, free cores, other runnable threads), read at most once a second."""
    global _last_probe
    now = time.monotonic()
    if now - _last_probe[0] >= _PROBE_EVERY_S:
        others = other_runnable_threads()
        _last_probe = (now, _free_beside(others), others)
    return _last_probe


def _cached_free_cores() -> int | None:
    return _probe()[1]


def _cached_other_threads() -> int | None:
    return _probe()[2]


@contextlib.contextmanager
def matched_to_free_cores():
    """Within this scope torch's intra-op thread count is at most the number of free cores;
    the caller's count is restored after. Does nothing when `config.adapt_threads()` is off.

    Example:
        >>> import torch
        >>> from keratron.utils.threads import matched_to_free_cores
        >>> before = torch.get_num_threads()
        >>> with matched_to_free_cores():
        ...     inside = torch.get_num_threads()
        >>> inside <= before, torch.get_num_threads() == before
        (True, True)
    """
    if not config.adapt_threads():
        yield
        return
    before = torch.get_num_threads()
    free = _cached_free_cores() if before > 1 else None
    lowered = free is not None and free < before
    outer = getattr(_scope, "lowered_from", None)
    # Every core busy: a second stream of steps gets this process a second share of a core.
    others = _cached_other_threads() if lowered else None
    second = others is not None and others >= _allowed_cores() and not side_stream.active()
    if lowered:
        torch.set_num_threads(free)
        _scope.lowered_from = before
    try:
        with side_stream.side_thread() if second else contextlib.nullcontext():
            yield
    finally:
        if lowered:
            _scope.lowered_from = outer
            torch.set_num_threads(before)


# Threads that take whole batches, per thread of the caller's count, where other processes
# hold cores (`batch_workers`).
BATCH_WORKERS_PER_THREAD = 2


def batch_workers() -> int:
    """How many threads may each take whole batches of a loop whose batches are independent
    (`predict`) in this scope: twice the caller's thread count where `matched_to_free_cores`
    lowered it because other processes hold cores, else 1.

    Beside a busy process, an intra-op parallel region waits for the thread that shares a core
    with it; threads that each run whole batches on one intra-op thread, each taking the next
    batch when it is done, keep every core's share of the machine busy instead. The scheduler
    gives each runnable thread an equal share of a core: one thread of ours beside a busy one
    gets half of that core, two get two thirds, and on a free core two threads that take
    whole batches only take turns (no barrier waits for either). Measured on this project's
    2-core machine, cnn predict at batch 128 (8,192 samples, three alternating runs each):
    beside two busy processes 2 threads drew 7,135-7,502 samples/s, 3 drew 8,319-9,131 and
    4 drew 9,100-9,269; beside one, 9,618-10,213, 9,864-10,405 and 9,703-11,438."""
    lowered_from = getattr(_scope, "lowered_from", None)
    return BATCH_WORKERS_PER_THREAD * lowered_from if lowered_from else 1


def ordered_map(fn, items, workers: int):
    """Yields `fn(item)` for each of `items`, in order, computed by `workers` threads that each
    take the next item when they are free, with at most two items a worker in flight. Each
    worker runs torch on one intra-op thread. `torch.set_num_threads` also sets process-wide
    state (the count threads started later take, MKL's), so the caller's count is set again
    when the map ends. An exception raised by `fn` is raised here, and items not yet started
    are dropped; so are they when the caller stops iterating."""
    caller = torch.get_num_threads()
    pool = concurrent.futures.ThreadPoolExecutor(
        workers, thread_name_prefix="keratron-batch", initializer=torch.set_num_threads,
        initargs=(1,),
    )  # fmt: skip
    pending: collections.deque = collections.deque()
    try:
        for item in items:
            pending.append(pool.submit(fn, item))
            if len(pending) >= 2 * workers:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
    finally:
        for future in pending:
            future.cancel()
        pool.shutdown(wait=True)
        torch.set_num_threads(caller)


def matched_threads(method):
    """Decorates a method (`fit`, `evaluate`, `predict`) to run in `matched_to_free_cores()`."""

    @functools.wraps(method)
    def run(*args, **kwargs):
        with matched_to_free_cores():
            return method(*args, **kwargs)

    return run
