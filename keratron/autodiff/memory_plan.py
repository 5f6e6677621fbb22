"""Output buffers a compiled plan keeps across replays, so a step reuses last step's memory.

Each replay of a training step allocates the same large values and frees them at the end;
glibc hands the freed top of its heap back to the system, and the next step faults every page
of those values in again (a convnet at batch 128: ~17,000 faults a step, a third of its time
on two cores). For the kernels below that torch can run into a given buffer, the plan writes
their large, non-escaping results into a buffer of its own, allocated on the first replay and
released with the plan: no process-wide malloc setting is involved (ARCHITECTURE.md, 10).
Each op's module registers its writers (`keeps_output`) beside its CPU route.

A kept buffer is only used for a value that is not a function output, not kept by the prelude,
and on the CPU; `CompiledFunction` clones any fetched value that still shares a kept buffer's
memory (a view of one), so nothing handed out is overwritten by the next replay. Every writer
calls the kernel the plain implementation calls, so results are bit-identical.

Kept buffers whose values are never alive at the same time share memory (`share_memory`): the
compiler gives each its live range, from the step that writes it to the last step that reads
it or any value that may be a view of it, and buffers with disjoint ranges are laid out in one
storage (a pool), as an allocator would reuse freed memory within a step.
"""

from __future__ import annotations

import math
import threading

import torch

from keratron import config

# Below this a value comes from malloc's bins without faulting: keeping it saves nothing.
MIN_BYTES = 1 << 20


class _ReplayState(threading.local):
    def __init__(self):
        # The kept-buffer list of the plan this thread is replaying with its kept buffers
        # (None: every step allocates as usual).
        self.owner = None


_state = _ReplayState()


def current_owner():
    """The kept-buffer list of the plan this thread replays with its kept buffers, or None."""
    return _state.owner


def run_as_owner(owner, fn, args):
    """`fn(*args)` on this thread with `owner` (a `current_owner()` of the thread replaying the
    plan) taking the plan's kept buffers: a step of the plan run on another thread for it
    (`side_stream`)."""
    previous = _state.owner
    _state.owner = owner
    try:
        return fn(*args)
    finally:
        _state.owner = previous


def replay_with_kept_buffers(compiled_lock, kept: list, replay):
    """Runs `replay()` with the plan's kept buffers when this thread can take them.

    One thread at a time writes into a plan's buffers: another thread replaying the same plan
    meanwhile (concurrent `predict`) allocates as usual, and a plan replayed from inside
    another's step uses its own buffers only if it owns them. Returns `replay()`'s values with
    any value that lies in a kept buffer cloned (the next replay overwrites the buffer).
    """
    previous = _state.owner
    if not compiled_lock.acquire(blocking=False):
        _state.owner = None
        try:
            return replay()
        finally:
            _state.owner = previous
    _state.owner = kept
    try:
        values = replay()
        return [v.clone() if shares_kept_memory(v, kept) else v for v in values]
    finally:
        _state.owner = previous
        compiled_lock.release()


def _always(params, avals) -> bool:
    return True


# Primitive -> (writer, static condition); filled by `keeps_output` in each op's own module.
_WRITERS: dict = {}


def keeps_output(prim, condition=_always):
    """Registers the decorated function as the kept-buffer writer of `prim`.

    A writer has the signature `writer(buffers, out_avals, *torch_values, **params)`: it
    computes exactly what `prim`'s CPU implementation computes (the same kernel, so the values
    are bit-identical), writing into tensors it allocates once in the dict `buffers` (the
    outputs' (shape, dtype) are `out_avals`), and returns the output(s); or it returns None for
    a case it does not serve, and the plain kernel runs. `condition(params, input_avals)` (one
    (shape, dtype) pair per input, None for an absent one) is checked once, when the plan is
    built.

    Example:
        >>> from keratron.autodiff.primitive import Primitive
        >>> sq = Primitive("doc_square_kept", lambda x: x * x)
        >>> @keeps_output(sq)
        ... def _square_into(buffers, out_avals, x):
        ...     out = buffers.get("out")
        ...     if out is None:
        ...         out = buffers["out"] = torch.empty(out_avals[0][0], dtype=x.dtype)
        ...     return torch.mul(x, x, out=out)
    """

    def register(writer):
        _WRITERS[prim] = (writer, condition)
        return writer

    return register


class KeptBuffers(dict):
    """One step's kept tensors by key, the bytes they take (laid out one after another, as
    its outputs' (shape, dtype) say), and the pool (if any) their memory comes from."""

    def __init__(self, need: int = 0):
        super().__init__()
        self.need = need
        self.pool: Pool | None = None
        self.used = 0

    def clear(self) -> None:
        super().clear()
        self.used = 0


class Pool:
    """Memory shared by kept buffers whose live ranges do not overlap: the largest need among
    them, allocated on first use."""

    def __init__(self):
        self.size = 0
        self._storage: torch.UntypedStorage | None = None

    def storage(self) -> torch.UntypedStorage:
        if self._storage is None:
            self._storage = torch.UntypedStorage(self.size)
        return self._storage


_ALIGN = 64


def _aligned(nbytes: int) -> int:
    return -(-nbytes // _ALIGN) * _ALIGN


def _itemsize(dtype) -> int:
    return torch.empty((), dtype=dtype).element_size()


def buffer(buffers, key, aval, channels_last: bool = False) -> torch.Tensor:
    """The kept tensor `buffers[key]` of (shape, dtype) `aval`, allocated on first use (in the
    step's pool when it has one). With `channels_last`, `aval`'s shape is read as (N, C, *S)
    and the memory is laid out (N, *S, C), as the pooling and oneDNN kernels write."""
    out = buffers.get(key)
    if out is None:
        shape, dtype = aval
        if channels_last:
            n, c, *spatial = shape
            layout = (n, *spatial, c)
        else:
            layout = tuple(shape)
        pool = getattr(buffers, "pool", None)
        if pool is not None:
            offset = _aligned(buffers.used)
            buffers.used = offset + math.prod(layout) * _itemsize(dtype)
        if pool is not None and buffers.used <= pool.size:
            strides = torch.empty(layout, dtype=dtype, device="meta").stride()
            out = torch.empty(0, dtype=dtype).set_(
                pool.storage(), offset // _itemsize(dtype), layout, strides
            )
        else:
            out = torch.empty(layout, dtype=dtype)
        if channels_last:
            out = out.permute(0, len(shape) - 1, 1, 2)
        buffers[key] = out
    return out


def share_memory(ranges) -> None:
    """Lays out kept buffers in shared pools: `ranges` lists `(buffers, first_step,
    last_step)` for each step's `KeptBuffers`, in step order; two share a pool only if one's
    last step comes before the other's first."""
    pools: list = []  # [last step of the pool's latest user, Pool]
    for buffers, first, last in ranges:
        for entry in pools:
            if entry[0] < first:
                entry[0] = last
                buffers.pool = entry[1]
                break
        else:
            buffers.pool = Pool()
            pools.append([last, buffers.pool])
        buffers.pool.size = max(buffers.pool.size, buffers.need)


def _nbytes(aval) -> int:
    shape, dtype = aval
    return math.prod(shape) * (torch.finfo(dtype).bits if dtype.is_floating_point else 64) // 8


def kept_buffer_call(graph, node, fallback, buffers_list: list):
    """A step function that writes `node`'s result into buffers it keeps, or None where no
    writer serves the node. `fallback` runs when the values at replay time do not fit (not on
    the CPU, another dtype, a shape the writer does not take). The kept buffers are appended
    to `buffers_list` (one dict per step) so that the plan can find them."""
    entry = _WRITERS.get(node.prim)
    if entry is None or node.params is None:
        return None
    writer, static_ok = entry
    in_avals = [graph.avals[s] if s is not None else None for s in node.inputs]
    if in_avals[0] is None or not static_ok(node.params, in_avals):
        return None
    if max(_nbytes(graph.avals[s]) for s in node.outputs) < MIN_BYTES:
        return None
    avals = [graph.avals[s] for s in node.outputs]
    buffers = KeptBuffers(sum(_aligned(math.prod(a[0]) * _itemsize(a[1])) for a in avals))
    buffers_list.append(buffers)
    params = node.params

    def run(*vals):
        x = vals[0]
        if (
            _state.owner is buffers_list
            and x.device.type == "cpu"
            and not x.requires_grad
            and config.kernel_backend() != "triton"
        ):
            out = writer(buffers, avals, *vals, **params)
            if out is not None:
                res = out if isinstance(out, tuple) else (out,)
                if all(tuple(r.shape) == a[0] and r.dtype == a[1] for r, a in zip(res, avals)):
                    return out
                buffers.clear()  # the shapes moved under us: let the plain kernel answer
        return fallback(*vals)

    run.__name__ = node.prim.name
    return run


def shares_kept_memory(value, buffers_list) -> bool:
    """Whether torch tensor `value` lies in one of the plan's kept buffers."""
    if not isinstance(value, torch.Tensor) or value.device.type != "cpu":
        return False
    ptr = value.untyped_storage().data_ptr()
    return any(
        b.untyped_storage().data_ptr() == ptr for bufs in buffers_list for b in bufs.values()
    )
