"""The collectives a data-parallel step needs, on torch values, and one differentiable one.

Budget per training step with N workers and G bytes of gradients: one ring all-reduce of the
gradients (each worker sends and receives 2(N-1)/N * G bytes, in buckets of `bucket_bytes`
launched as they fill, so packing the next bucket overlaps the transfer of the previous one),
a few bytes per metric variable for the logs, and, with `BatchNormalization(synchronized=
True)`, three floats per channel per BN layer forward and the same backward.

Every function here is a no-op-free collective: all workers must call it in the same order
with tensors of the same shapes (shapes of the *gathered* rows may differ). Errors of the
transport become `WorkerFailureError` (see `_runtime.Runtime.collective`).
"""

from __future__ import annotations

import numpy as np
import torch
import torch.distributed as dist

from keratron.autodiff.primitive import Primitive
from keratron.autodiff.tensor import Tensor, convert_to_tensor
from keratron.distribute import _runtime

__all__ = [
    "all_reduce_gradients",
    "all_reduce_sum",
    "broadcast_",
    "all_gather_rows",
    "all_gather_ints",
    "cross_replica_sum",
    "cross_replica_moments",
]

DEFAULT_BUCKET_BYTES = 25 * 1024 * 1024  # as torch DDP: large enough to amortise latency


def _rt():
    rt = _runtime.current_runtime()
    if rt is None or not rt.distributed:
        raise RuntimeError("keratron.distribute: no process group (a job of one worker).")
    return rt


def _wire(t: torch.Tensor) -> torch.Tensor:
    # gloo reduces no bool; a uint8 copy carries the bits.
    return t.to(torch.uint8) if t.dtype == torch.bool else t


def all_reduce_gradients(grads, weight: float, bucket_bytes: int = DEFAULT_BUCKET_BYTES):
    """`sum over workers of weight * g` for each gradient, in buckets.

    Gradients are taken last-first (the order a backward pass produces them, so the layers
    nearest the loss go out first), packed per (device, dtype) into flat buffers, and each
    buffer's all-reduce starts asynchronously as soon as it holds `bucket_bytes`; the waits
    come after the last launch. `weight` is this worker's share of the global batch
    (n_local / n_global), so the result is the gradient of the global batch's mean loss.

    Args:
        grads: list of torch tensors (one per variable).
        weight: this worker's factor.
        bucket_bytes: the size at which a bucket is launched.

    Returns:
        A list of reduced tensors, in the order of `grads`.
    """
    rt = _rt()
    out = [None] * len(grads)
    pending = []
    open_buckets: dict = {}

    def launch(key):
        idx, _ = open_buckets.pop(key)
        flat = torch.cat([grads[i].reshape(-1) for i in idx])
        if weight != 1.0:
            flat.mul_(weight)
        pending.append((dist.all_reduce(flat, async_op=True), flat, idx))

    with rt.collective("gradient all-reduce"):
        for i in reversed(range(len(grads))):
            g = grads[i]
            key = (g.device, g.dtype)
            bucket = open_buckets.setdefault(key, ([], [0]))
            bucket[0].append(i)
            bucket[1][0] += g.numel() * g.element_size()
            if bucket[1][0] >= bucket_bytes:
                launch(key)
        for key in list(open_buckets):
            launch(key)
        for work, flat, idx in pending:
            work.wait()
            offset = 0
            for i in idx:
                n = grads[i].numel()
                out[i] = flat[offset : offset + n].view(grads[i].shape)
                offset += n
    return out


def all_reduce_sum(values, what="all-reduce"):
    """Sums a list of tensors over the workers (one flat float64 buffer per device);
    returns new tensors with the input dtypes."""
    rt = _rt()
    out = [None] * len(values)
    groups: dict = {}
    for i, v in enumerate(values):
        groups.setdefault(v.device, []).append(i)
    with rt.collective(what):
        for idx in groups.values():
            # float64 holds int64 counts exactly up to 2**53 and every float metric state.
            flat = torch.cat([values[i].reshape(-1).to(torch.float64) for i in idx])
            dist.all_reduce(flat)
            offset = 0
            for i in idx:
                n = values[i].numel()
                out[i] = flat[offset : offset + n].view(values[i].shape).to(values[i].dtype)
                offset += n
    return out


def broadcast_(values, src: int = 0, what="broadcast") -> None:
    """Overwrites every tensor in `values`, in place, with worker `src`'s (packed per device
    and dtype, one broadcast per group)."""
    rt = _rt()
    groups: dict = {}
    for i, v in enumerate(values):
        groups.setdefault((v.device, v.dtype), []).append(i)
    with rt.collective(what):
        for idx in groups.values():
            flat = torch.cat([_wire(values[i]).reshape(-1) for i in idx])
            dist.broadcast(flat, src=src)
            offset = 0
            for i in idx:
                v = values[i]
                n = v.numel()
                v.copy_(flat[offset : offset + n].view(v.shape).to(v.dtype))
                offset += n


def all_gather_ints(values, what="all-gather"):
    """Every worker's list of ints (same length on all): a (world_size, len) numpy array."""
    rt = _rt()
    local = torch.tensor(list(values), dtype=torch.int64).reshape(1, -1)
    parts = [torch.empty_like(local) for _ in range(rt.cluster.world_size)]
    with rt.collective(what):
        dist.all_gather(parts, local)
    return torch.cat(parts).numpy()


def all_gather_rows(value: torch.Tensor, sizes, what="all-gather") -> torch.Tensor:
    """Concatenates the workers' tensors along axis 0, worker 0 first; worker r holds
    `sizes[r]` rows (rows are padded to the largest for the transfer)."""
    rt = _rt()
    longest = max(sizes)
    local = _wire(value)
    if local.shape[0] != longest:
        pad = local.new_zeros((longest - local.shape[0],) + tuple(local.shape[1:]))
        local = torch.cat([local, pad])
    parts = [torch.empty_like(local) for _ in sizes]
    with rt.collective(what):
        dist.all_gather(parts, local.contiguous())
    return torch.cat([p[:n] for p, n in zip(parts, sizes)]).to(value.dtype)


# ------------------------------------------------------------------ differentiable sum
def _cross_replica_sum_impl(x):
    rt = _runtime.current_runtime()
    y = x.contiguous().clone()
    if rt is not None and rt.distributed:
        with rt.collective("cross-replica sum"):
            dist.all_reduce(y)
    return y


# The sum's transpose is itself: each worker's cotangent of the global sum is summed back to
# every worker's input. An effect, so the graph compiler never drops, merges or folds it: the
# collective must run on every worker in the same order.
cross_replica_sum_p = Primitive(
    "cross_replica_sum",
    _cross_replica_sum_impl,
    vjp=lambda g, x, *, out: (cross_replica_sum(g),),
    abstract=lambda x: torch.empty_like(x),
    effect=True,
)


def cross_replica_sum(x) -> Tensor:
    """The sum of `x` over all workers, differentiable (its VJP is the same sum).

    Example:
        >>> total = cross_replica_sum(keratron.ops.ones((3,)))  # (N, N, N) with N workers
    """
    return cross_replica_sum_p.bind(x if isinstance(x, Tensor) else convert_to_tensor(x))


def cross_replica_moments(mean, variance, count):
    """Global batch moments from each worker's `(mean, variance, count)`, with one all-reduce
    of `[count * mean, count * (variance + mean**2), count]` per call.

    This serves `BatchNormalization._cross_replica_moments` for `synchronized=True` layers.
    """
    from keratron import ops

    dtype = mean.dtype
    if isinstance(count, (int, float, np.integer, np.floating)):
        n = ops.full_like(mean, float(count))
    else:
        n = ops.multiply(ops.ones_like(mean), ops.cast(count, dtype))
    packed = ops.stack(
        [ops.multiply(n, mean), ops.multiply(n, ops.add(variance, ops.square(mean))), n]
    )
    total_mean, total_sq, total_n = ops.unstack(cross_replica_sum(packed), num=3)
    global_mean = ops.divide(total_mean, total_n)
    # E[x^2] - E[x]^2 can come out a rounding error below zero for a constant channel.
    global_var = ops.maximum(
        ops.subtract(ops.divide(total_sq, total_n), ops.square(global_mean)), 0.0
    )
    return global_mean, global_var
