"""The process group under a strategy: torchrun's environment, rendezvous, timeouts, watchdog.

A job is N processes, one per device, started by torchrun (or anything that sets the same
variables: RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT). Without WORLD_SIZE the
process is a job of one and no process group is created. With several, the group runs gloo
for CPU tensors and NCCL for CUDA tensors, and every collective carries a timeout, so a peer
that dies or stops answering turns into a `WorkerFailureError` instead of a hang.

Two mechanisms bound the time to that error:

* the process-group timeout (30 s by default): a collective that a peer never joins fails
  after it; a peer whose process ended closes its sockets, which gloo reports at once;
* a watchdog thread per process. It beats a counter in the rendezvous store every second and
  reads the peers' counters: a peer whose counter stops for longer than the timeout without
  having announced a clean exit is dead, and the next step on this process raises. It also
  guards this process's own collectives: one still blocked `timeout + grace` seconds after it
  started (a transport that ignores its timeout) ends the process with the error printed,
  because a thread cannot interrupt a blocked C++ call.
"""

from __future__ import annotations

import atexit
import contextlib
import datetime
import os
import sys
import threading
import time

import torch
import torch.distributed as dist

from keratron.distribute.cluster import Cluster, cluster_from_environment

__all__ = ["WorkerFailureError", "Cluster", "cluster_from_environment", "Runtime", "runtime"]

DEFAULT_TIMEOUT_S = 30.0
_HEARTBEAT_S = 1.0
# Keys carry torchrun's restart count: a restarted job may meet the old attempt's store.
_KEY = f"keratron_distribute/{os.environ.get('TORCHELASTIC_RESTART_COUNT', '0')}"


class WorkerFailureError(RuntimeError):
    """A peer worker of a data-parallel job died, hung, or could not be reached."""


def _watchdog_store_timeout(rt) -> float:
    """The longest one watchdog store call may block: its heartbeat round is short, and
    `Runtime.shutdown` waits for the thread to end."""
    return min(rt.timeout_s, 10.0)


class _Watchdog(threading.Thread):
    """Heartbeats through the rendezvous store, and the deadline on blocked collectives."""

    def __init__(self, rt: Runtime):
        super().__init__(name="keratron-distribute-watchdog", daemon=True)
        self.rt = rt
        self.stop_event = threading.Event()

    def run(self):
        rt = self.rt
        c = rt.cluster
        try:
            store = dist.TCPStore(
                c.master_addr,
                c.master_port,
                is_master=False,
                timeout=datetime.timedelta(seconds=_watchdog_store_timeout(rt)),
                wait_for_workers=False,
            )
        except Exception:  # noqa: BLE001 - without a store only the collective deadline works
            store = None
        peers = [r for r in range(c.world_size) if r != c.rank]
        last_count = {r: -1 for r in peers}
        last_change = {r: time.monotonic() for r in peers}
        while not self.stop_event.wait(_HEARTBEAT_S):
            now = time.monotonic()
            started = rt.collective_started
            if started is not None and now - started[1] > rt.timeout_s + rt.grace_s:
                rt.hard_exit(
                    f"collective '{started[0]}' on worker {c.rank} has been blocked for "
                    f"{now - started[1]:.0f} s (timeout {rt.timeout_s:.0f} s)"
                )
            if store is None:
                continue
            try:
                store.add(f"{_KEY}/beat/{c.rank}", 1)
                for r in peers:
                    if store.check([f"{_KEY}/exit/{r}"]):
                        last_change[r] = now  # left cleanly; its absence is not a failure
                        continue
                    count = store.add(f"{_KEY}/beat/{r}", 0)
                    if count != last_count[r]:
                        last_count[r], last_change[r] = count, now
                    elif now - last_change[r] > rt.timeout_s and rt.failure is None:
                        rt.failure = (
                            f"worker {r} of {c.world_size} stopped sending heartbeats "
                            f"{now - last_change[r]:.0f} s ago (it died or its machine is "
                            "unreachable)"
                        )
                if store.check([f"{_KEY}/failed"]) and rt.failure is None:
                    rt.failure = store.get(f"{_KEY}/failed").decode(errors="replace")
            except Exception:  # noqa: BLE001
                # The store lives in worker 0 (or the torchrun agent): once it is gone, the
                # collectives (with their timeout) are what notices a failure.
                store = None
        if store is not None:
            with contextlib.suppress(Exception):
                store.set(f"{_KEY}/exit/{c.rank}", "1")


class Runtime:
    """The process group of this job (one per process) and its failure handling."""

    def __init__(self, cluster: Cluster, timeout_s: float, implementation: str):
        self.cluster = cluster
        self.timeout_s = float(timeout_s)
        self.grace_s = max(10.0, 0.5 * self.timeout_s)
        self.failure: str | None = None
        self.collective_started = None
        self.unfinished_collective = False  # a collective raised: gloo may hold queued work
        self._store = None
        self._watchdog = None
        self.owns_group = False
        self.backend = None
        if cluster.world_size > 1:
            self._init_group(implementation)

    @property
    def distributed(self) -> bool:
        return self.cluster.world_size > 1

    def _init_group(self, implementation):
        c = self.cluster
        use_cuda = torch.cuda.is_available() and implementation != "ring"
        if use_cuda:
            # One process per GPU: NCCL and new tensors use this worker's device (unless
            # KERATRON_DEVICE says otherwise).
            index = c.local_rank % torch.cuda.device_count()
            torch.cuda.set_device(index)
            if not os.environ.get("KERATRON_DEVICE"):
                from keratron import config

                config.set_device(f"cuda:{index}")
        if dist.is_initialized():
            if dist.get_world_size() != c.world_size or dist.get_rank() != c.rank:
                raise ValueError(
                    "keratron.distribute: a torch.distributed process group is already "
                    f"initialized with rank {dist.get_rank()} of {dist.get_world_size()}, but "
                    f"the environment says rank {c.rank} of {c.world_size}."
                )
            self.backend = dist.get_backend()
        else:
            if implementation == "nccl" and not use_cuda:
                raise ValueError(
                    "keratron.distribute: communication implementation 'nccl' needs CUDA, "
                    "which is not available on this machine."
                )
            self.backend = "cpu:gloo,cuda:nccl" if use_cuda else "gloo"
            timeout = datetime.timedelta(seconds=self.timeout_s)
            try:
                dist.init_process_group(
                    backend=self.backend,
                    init_method=f"tcp://{c.master_addr}:{c.master_port}",
                    rank=c.rank,
                    world_size=c.world_size,
                    timeout=timeout,
                )
            except Exception as e:
                raise WorkerFailureError(
                    f"keratron.distribute: worker {c.rank} of {c.world_size} could not join the "
                    f"job at {c.master_addr}:{c.master_port} within {self.timeout_s:.0f} s "
                    f"({type(e).__name__}: {e}). Check that every worker was started with the "
                    "same MASTER_ADDR, MASTER_PORT and WORLD_SIZE."
                ) from e
            self.owns_group = True
        self._watchdog = _Watchdog(self)
        self._watchdog.start()
        atexit.register(self.shutdown)

    # ------------------------------------------------------------------ failures
    def check(self) -> None:
        """Raises the watchdog's finding, if a peer has been found dead."""
        if self.failure is not None:
            raise WorkerFailureError(self._message(self.failure))

    def _message(self, what: str) -> str:
        c = self.cluster
        return (
            f"keratron.distribute: worker {c.rank} of {c.world_size} is stopping: {what}. "
            "Restart the job; with a BackupAndRestore callback, training resumes from the last "
            "backup."
        )

    def hard_exit(self, what: str) -> None:
        sys.stderr.write(f"WorkerFailureError: {self._message(what)}\n")
        sys.stderr.flush()
        os._exit(1)

    @contextlib.contextmanager
    def collective(self, what: str):
        """Runs a block of collectives: checks the watchdog first, arms the deadline, and
        turns transport errors into `WorkerFailureError`."""
        self.check()
        self.collective_started = (what, time.monotonic())
        try:
            yield
        except BaseException as e:
            self.unfinished_collective = True
            transport = isinstance(e, (RuntimeError, ValueError)) and not isinstance(
                e, WorkerFailureError
            )
            if not (transport and _looks_like_transport_error(e)):
                raise
            detail = self.failure or (
                "a peer worker stopped or became unreachable during "
                f"'{what}' ({type(e).__name__}: {str(e).splitlines()[0][:300]})"
            )
            raise WorkerFailureError(self._message(detail)) from e
        finally:
            self.collective_started = None

    def shutdown(self) -> None:
        """Announces a clean exit to the peers' watchdogs, stops this one, and destroys the
        process group this runtime created.

        Without the destroy, gloo's threads outlive the interpreter and the process can abort
        as it exits ("terminate called without an active exception"). It is skipped after a
        collective raised or a peer was found dead: gloo's teardown waits for queued work,
        which a dead peer leaves waiting until the timeout.
        """
        if self._watchdog is not None:
            self._watchdog.stop_event.set()
            # Long enough for a store call in flight to end: a thread still inside one when
            # the interpreter finalizes is unwound by force there, which aborts the process.
            self._watchdog.join(timeout=_watchdog_store_timeout(self) + 2 * _HEARTBEAT_S + 1)
            self._watchdog = None
        clean = not self.unfinished_collective and self.failure is None
        if self.owns_group and clean and dist.is_initialized():
            dist.destroy_process_group()
            self.owns_group = False


def _looks_like_transport_error(e: Exception) -> bool:
    # gloo and NCCL report peer loss and timeouts as RuntimeError subclasses (DistBackendError,
    # DistNetworkError) or with these words; a shape or dtype mistake is not one of them.
    if isinstance(e, getattr(dist, "DistError", ())):
        return True
    text = str(e).lower()
    return any(
        w in text
        for w in ("connection", "timed out", "timeout", "peer", "socket", "nccl", "gloo", "closed")
    )


_runtime: Runtime | None = None
_lock = threading.Lock()


def runtime(timeout_s=None, implementation="auto") -> Runtime:
    """The process's `Runtime`, created (and the process group joined) on first use."""
    global _runtime
    with _lock:
        if _runtime is None:
            _runtime = Runtime(
                cluster_from_environment(),
                DEFAULT_TIMEOUT_S if timeout_s is None else timeout_s,
                implementation,
            )
        return _runtime


def current_runtime() -> Runtime | None:
    """The runtime if a strategy created one, else None (no process group)."""
    return _runtime
