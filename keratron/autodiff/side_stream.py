"""A second stream of steps for a compiled plan when every core is busy.

When other processes keep every core busy, keratron runs on one intra-op thread (a parallel
region would wait at its barrier for a thread that shares its core: `utils/threads.py`), and
the scheduler gives that thread an equal share of a core beside the others' threads. Two
threads of ours that never wait for each other inside an op get two such shares. So, in that
case only, a plan runs each step of a primitive marked `side_stream` (a weight gradient, which
only the optimizer's update reads, at the end of the step) on a second thread, while the main
thread goes on with the input gradients.

The order is made for the compiler (`schedule`). A side step is handed over as soon as its
inputs are made, and it moves to where its result is waited for: before the first step that
reads it, or before the hand-over of the side step IN_FLIGHT places later. So the liveness the
compiler derives from the order (when a value is freed, which dead buffer a step may overwrite
in place, which kept buffers may share memory) holds every input of the side step alive until
the wait, and a kept buffer that takes its output (memory_plan) lives from the hand-over on.
A step handed over while the second thread has QUEUED steps waiting runs in line instead. The
values are those of the one-stream plan: the same kernels on the same values, each on one
intra-op thread.

Measured on a 2-core machine (bench/README.md, "Beside busy processes, 2026-11-28, fourth
run"): on one intra-op thread with
the other core free, a training step with its weight gradients on a second thread ran cnn at
2,030 -> 2,950 samples/s and MobileNet (batch 8) at 26.6 -> 33.7 images/s; beside two busy
processes cnn drew 1,325-1,424 -> 1,885-2,029 samples/s. Beside one busy process a second
thread gains nothing (a conv pair run either way, 10.2 against 10.3-10.5 ms): the scheduler
leaves the busy process alone on one core and our two threads share the other. So the second
stream opens only when every core is busy.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import threading

import torch

from keratron.autodiff import memory_plan

# Side steps handed over and not yet waited for, at most: each holds its inputs alive (a
# convolution's incoming gradient) until it is waited for.
IN_FLIGHT = 4


# Steps queued behind the one the second thread runs, at most; a step handed over beyond that
# runs in line. On MobileNet's training step (batch 8) 0, 1 and 3 gave the same (33-34
# images/s), where the second thread's 28 filter gradients outweigh what the main thread runs
# beside them.
QUEUED = 1


class _Stream:
    """A second thread for one replaying thread, and its count of unfinished steps."""

    def __init__(self):
        self.pool = concurrent.futures.ThreadPoolExecutor(
            1, thread_name_prefix="keratron-side", initializer=torch.set_num_threads,
            initargs=(1,),
        )  # fmt: skip
        self.unfinished = 0
        self.lock = threading.Lock()


class _State(threading.local):
    def __init__(self):
        # This thread's second stream while a `side_thread` scope is open.
        self.stream = None


_state = _State()


@contextlib.contextmanager
def side_thread():
    """Within this scope, plans replayed by this thread run their `side_stream` steps on a
    second thread (one intra-op thread), which the scope starts and joins when it closes."""
    stream = _Stream()
    previous = _state.stream
    _state.stream = stream
    try:
        yield
    finally:
        _state.stream = previous
        stream.pool.shutdown(wait=True)


def active() -> bool:
    """Whether this thread is inside a `side_thread` scope."""
    return _state.stream is not None


def submit(fn, *args):
    """Runs `fn(*args)` on this thread's side stream, with this thread's kept buffers (a
    plan's step writes into the plan's buffer there as here); returns its future. When the
    second thread already has QUEUED steps waiting behind the one it runs, `fn` runs here and
    now instead: the main stream then does the work it would otherwise wait for."""
    stream = _state.stream
    with stream.lock:
        inline = stream.unfinished > QUEUED
        if not inline:
            stream.unfinished += 1
    if inline:
        done = concurrent.futures.Future()
        done.set_result(fn(*args))
        return done
    return stream.pool.submit(_run, stream, memory_plan.current_owner(), fn, args)


def _run(stream, owner, fn, args):
    try:
        return memory_plan.run_as_owner(owner, fn, args)
    finally:
        with stream.lock:
            stream.unfinished -= 1


def schedule(nodes: list, start: int = 0):
    """The plan order for a second stream: `(order, submits)`, or None when no node from
    index `start` on may run there.

    Each side node is handed over as early as it can be: before the first node after the last
    producer of its inputs. `order` holds the nodes with each side node moved to where its
    result is waited for: just before the first node that reads one of its outputs, or before
    the hand-over of the side node IN_FLIGHT places later, whichever comes first, or to the end.
    `submits` maps the id of each side node that runs on the second thread to the node of
    `order` before which it is handed over. A side node whose wait would come at its hand-over
    runs in line (it is not in `submits`). Nodes before `start` (a prelude) never move.
    """
    readers: dict = {}  # slot -> the indices of the nodes that read it, in order
    producer: dict = {}
    for i, node in enumerate(nodes):
        for s in node.inputs:
            if s is not None:
                readers.setdefault(s, []).append(i)
        for s in node.outputs:
            producer[s] = i
    side = [i for i in range(start, len(nodes)) if _candidate(nodes, i, readers)]
    if not side:
        return None
    # Hand-over positions: after the last producer of the node's inputs (the node's place at
    # the latest), in that order.
    handover = {
        i: max([start] + [producer[s] + 1 for s in nodes[i].inputs if s in producer]) for i in side
    }
    side.sort(key=lambda i: (handover[i], i))
    end = len(nodes)
    joins: dict = {}  # node index -> the side nodes waited for just before it (end: `end`)
    handovers: dict = {}  # node index -> the side nodes handed over just before it
    for k, i in enumerate(side):
        at = min((readers.get(s, [end])[0] for s in nodes[i].outputs), default=end)
        if k + IN_FLIGHT < len(side):
            at = min(at, handover[side[k + IN_FLIGHT]])
        if at <= handover[i]:
            continue  # waited for where it would be handed over: it runs in line
        joins.setdefault(at, []).append(nodes[i])
        handovers.setdefault(handover[i], []).append(nodes[i])
    moved = {id(n) for listed in joins.values() for n in listed}
    if not moved:
        return None
    order: list = []
    submits: dict = {}
    pending: list = []  # side nodes to hand over before the next node placed

    def place(node):
        for p in pending:
            submits[id(p)] = node
        pending.clear()
        order.append(node)

    for i, node in enumerate(nodes):
        for waited in joins.get(i, ()):
            place(waited)
        pending.extend(handovers.get(i, ()))
        if id(node) not in moved:
            place(node)
    for waited in joins.get(end, ()):
        place(waited)
    return order, submits


def _candidate(nodes: list, i: int, readers: dict) -> bool:
    """Whether `nodes[i]` may run on the second stream: its primitive's `side_stream` is True,
    or a predicate that holds for the nodes that read its outputs."""
    node = nodes[i]
    if node.kind != "prim" or not node.prim.side_stream:
        return False
    rule = node.prim.side_stream
    if rule is True:
        return True
    return rule([nodes[r] for s in node.outputs for r in readers.get(s, ())])


def read_by_effects_only(readers: list) -> bool:
    """A `side_stream` predicate: the value is read, and only by effects (the optimizer's
    update reads a weight gradient)."""
    return bool(readers) and all(r.is_effect for r in readers)
