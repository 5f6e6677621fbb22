"""Output buffers a compiled plan keeps across replays, so a step reuses last step's memory.

Each replay of a training step allocates the same large values and frees them at the end;
glibc hands the freed top of its heap back to the system, and the next step faults every page
of those values in again (a convnet at batch 128: ~17,000 faults a step, a third of its time
on two cores). For the kernels below that torch can run into a given buffer, the plan writes
their large, non-escaping results into a buffer of its own, allocated on the first replay and
released with the plan: no process-wide malloc setting is involved (ARCHITECTURE.md, 10).

A kept buffer is only used for a value that is not a function output, not kept by the prelude,
and on the CPU; `CompiledFunction` clones any fetched value that still shares a kept buffer's
memory (a view of one), so nothing handed out is overwritten by the next replay. Every writer
calls the kernel the plain implementation calls, so results are bit-identical.
"""

from __future__ import annotations

import builtins
import math
import threading

import torch

# Below this a value comes from malloc's bins without faulting: keeping it saves nothing.
MIN_BYTES = 1 << 20


class _ReplayState(threading.local):
    def __init__(self):
        # The kept-buffer list of the plan this thread is replaying with its kept buffers
        # (None: every step allocates as usual).
        self.owner = None


_state = _ReplayState()


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


def _cl_empty(shape_cf, dtype):
    """An (N, C, *S) tensor with channels_last strides: how the pooling kernels write."""
    n, c, *spatial = shape_cf
    return torch.empty((n, *spatial, c), dtype=dtype).permute(0, len(shape_cf) - 1, 1, 2)


def _pad(buffers, x, widths, value):
    out = buffers.get("out")
    if out is None or out.dtype != x.dtype:
        shape = tuple(d + lo + hi for d, (lo, hi) in zip(x.shape, widths))
        out = buffers["out"] = torch.empty(shape, dtype=x.dtype)
    out.fill_(value)
    out[tuple(builtins.slice(lo, lo + d) for d, (lo, _) in zip(x.shape, widths))] = x
    return out


def _max_pool(buffers, x, pool_size, strides, padding):
    xt = x.permute(0, 3, 1, 2)
    if "out" not in buffers:
        n, h, w, c = x.shape
        oh = (h - pool_size[0]) // strides[0] + 1
        ow = (w - pool_size[1]) // strides[1] + 1
        buffers["out"] = _cl_empty((n, c, oh, ow), x.dtype)
        buffers["idx"] = _cl_empty((n, c, oh, ow), torch.int64)
    out, idx = buffers["out"], buffers["idx"]
    torch.ops.aten.max_pool2d_with_indices.out(
        xt, list(pool_size), list(strides), [0, 0], [1, 1], False, out=out, indices=idx
    )
    return out.permute(0, 2, 3, 1), idx


def _max_pool_grad(buffers, x, g, idx, pool_size, strides, padding):
    if idx is None:
        return None
    if "out" not in buffers:
        n, h, w, c = x.shape
        buffers["out"] = _cl_empty((n, c, h, w), x.dtype)
    out = buffers["out"]
    torch.ops.aten.max_pool2d_with_indices_backward.grad_input(
        g.permute(0, 3, 1, 2),
        x.permute(0, 3, 1, 2),
        list(pool_size),
        list(strides),
        [0, 0],
        [1, 1],
        False,
        idx,
        grad_input=out,
    )
    return out.permute(0, 2, 3, 1)


def _matmul(buffers, x, w, b, activation):
    if x.dim() != 2 or w.dim() != 2 or activation is not None:
        return None
    out = buffers.get("out")
    if out is None:
        out = buffers["out"] = torch.empty((x.shape[0], w.shape[1]), dtype=x.dtype)
    if b is None:
        return torch.mm(x, w, out=out)
    return torch.addmm(b, x, w, out=out)


def _pool_2d_unpadded(params, shapes) -> bool:
    return len(shapes[0]) == 4 and not any(lo or hi for lo, hi in params["padding"])


# primitive name -> (writer(buffers, *inputs, **params) -> outputs or None, static condition)
_WRITERS = {
    "pad": (_pad, lambda params, shapes: True),
    "max_pool": (_max_pool, _pool_2d_unpadded),
    "max_pool_grad": (_max_pool_grad, _pool_2d_unpadded),
    "matmul": (_matmul, lambda params, shapes: True),
}


def _nbytes(aval) -> int:
    shape, dtype = aval
    return math.prod(shape) * (torch.finfo(dtype).bits if dtype.is_floating_point else 64) // 8


def kept_buffer_call(graph, node, fallback, buffers_list: list):
    """A step function that writes `node`'s result into buffers it keeps, or None where no
    writer serves the node. `fallback` runs when the values at replay time do not fit (not on
    the CPU, another dtype, a shape the writer does not take). The kept buffers are appended
    to `buffers_list` (one dict per step) so that the plan can find them."""
    entry = _WRITERS.get(node.prim.name)
    if entry is None or node.params is None:
        return None
    writer, static_ok = entry
    shapes = [graph.avals[s][0] if s is not None else None for s in node.inputs]
    if shapes[0] is None or not static_ok(node.params, shapes):
        return None
    if max(_nbytes(graph.avals[s]) for s in node.outputs) < MIN_BYTES:
        return None
    avals = [graph.avals[s] for s in node.outputs]
    buffers: dict = {}
    buffers_list.append(buffers)
    params = node.params

    def run(*vals):
        x = vals[0]
        if _state.owner is buffers_list and x.device.type == "cpu" and not x.requires_grad:
            out = writer(buffers, *vals, **params)
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
