"""TF1 input pipelines: queues, readers, `decode_csv` / `decode_raw`, `train.batch` /
`shuffle_batch`, `QueueRunner`, `Coordinator`.

Queues and readers live on the host, one instance per `Session` (as TF's queue resources).
Their ops are *host steps* of `Session.run` (run before the compiled plan, as `tf.data`'s
`get_next`): a dequeue's numeric outputs become feeds of the plan; an enqueue computes its
components with a `Session.run` of its own and puts them in the queue. String tensors (file
names, records, lines) never enter a compiled plan: the host step that makes them keeps their
values for the host steps after it in the same run (readers -> decoders, dequeues -> decoders).
So strings can be read, queued, batched and decoded, but not fetched or given to graph ops.

`QueueRunner` threads run enqueue ops in a loop until their input ends (`OutOfRangeError`,
which closes the queue) or the `Coordinator` asks them to stop; a dequeue from a closed queue
with too few elements raises `tf.errors.OutOfRangeError`, the end of input.

Example:
    >>> import keratron.compat.v1 as tf
    >>> with tf.Graph().as_default(), tf.Session() as sess:
    ...     q = tf.FIFOQueue(3, tf.float32)
    ...     init = q.enqueue_many(([1.0, 2.0, 3.0],))
    ...     x = q.dequeue()
    ...     sess.run(init)
    ...     print(sess.run(x), sess.run(x))
    1.0 2.0
"""

from __future__ import annotations

import csv
import random as pyrandom
import threading
import time
import weakref

import numpy as np

from keratron.compat.v1 import errors, math_ops, summary
from keratron.compat.v1.framework import (
    GraphKeys,
    Tensor,
    TensorShape,
    add_to_collection,
    as_dtype,
    convert_to_tensor,
    get_collection,
    get_default_graph,
    make_op,
    name_scope,
    op_scope,
)

__all__ = [
    "QueueBase",
    "FIFOQueue",
    "RandomShuffleQueue",
    "ReaderBase",
    "TextLineReader",
    "FixedLengthRecordReader",
    "WholeFileReader",
    "decode_csv",
    "decode_raw",
    "string_input_producer",
    "range_input_producer",
    "slice_input_producer",
    "batch",
    "shuffle_batch",
    "QueueRunner",
    "add_queue_runner",
    "start_queue_runners",
    "Coordinator",
]

_POLL_S = 0.05  # how often a blocked queue operation looks for closure or a closed session


# ---------------------------------------------------------------------------- host state
class _HostValues(threading.local):
    def __init__(self):
        self.values: dict = {}


_host = _HostValues()  # string values made by host steps of the current run, per thread
_sessions: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_sessions_lock = threading.Lock()


def _session_state(session) -> dict:
    with _sessions_lock:
        state = _sessions.get(session)
        if state is None:
            state = _sessions[session] = {"lock": threading.RLock()}
        return state


def _is_string(dtype) -> bool:
    return as_dtype(dtype).name == "string"


def _host_op(op_type, name, inputs, specs, host_fn):
    """An op that runs on the host before the plan; its lowering is reached only when a
    compiled op consumes one of its string outputs, which cannot be done."""

    def lower(ctx, *args):
        if not specs:
            return None  # the work was done by the host step
        raise TypeError(
            f"{op_type} '{op.name}' makes string tensors: they can be read, queued, batched and "
            "decoded (tf.decode_csv, tf.decode_raw), but not fetched or used by other ops."
        )

    op = make_op(op_type, name, inputs, lower, specs)
    op._attrs["host_fn"] = host_fn
    return op


def _string_value(tensor):
    try:
        return _host.values[tensor]
    except KeyError:
        raise errors.InvalidArgumentError(
            None, tensor.op, f"The string tensor {tensor.name} has no value in this run."
        ) from None


def _outputs_to_feeds(outputs, values) -> dict:
    """Feeds for the numeric outputs; string outputs are kept for later host steps."""
    feeds = {}
    for t, v in zip(outputs, values):
        if _is_string(t.dtype):
            _host.values[t] = np.asarray(v, dtype=object)
        else:
            feeds[t] = np.asarray(v, dtype=t.dtype.as_numpy_dtype)
    return feeds


def _upstream_host_ops(tensors) -> list:
    seen, stack = set(), [t.op for t in tensors]
    while stack:
        op = stack.pop()
        if op in seen:
            continue
        seen.add(op)
        stack.extend(t.op for t in op.inputs)
        stack.extend(op.control_inputs)
    return sorted((op for op in seen if "host_fn" in op._attrs), key=lambda op: op._id)


def _evaluate(session, tensors) -> list:
    """The values of `tensors` in `session`: numeric ones by a `Session.run`, strings from
    the host steps that make them (each host step runs once)."""
    saved, _host.values = _host.values, {}
    try:
        numeric = [t for t in tensors if not _is_string(t.dtype)]
        got = dict(zip(numeric, session.run(numeric))) if numeric else {}
        missing = [t for t in tensors if _is_string(t.dtype) and t not in _host.values]
        if missing:
            for op in _upstream_host_ops(missing):
                op._attrs["host_fn"](session)
        return [got[t] if t in got else _string_value(t) for t in tensors]
    finally:
        _host.values = saved


def _lock_for(session, key) -> threading.Lock:
    state = _session_state(session)
    with state["lock"]:
        return state.setdefault(("lock", key), threading.Lock())


# ---------------------------------------------------------------------------- queues
class _QueueState:
    def __init__(self, queue):
        self.queue = queue
        self.items: list = []
        self.closed = False
        self.cond = threading.Condition()
        self.rng = np.random.RandomState(queue._seed)

    def _wait(self, session, ready) -> None:
        while not ready():
            if getattr(session, "_closed", False):
                raise errors.CancelledError(None, None, "The session was closed.")
            self.cond.wait(_POLL_S)

    def put(self, session, elements) -> None:
        cap = self.queue._capacity
        with self.cond:
            for element in elements:
                self._wait(session, lambda: self.closed or cap is None or len(self.items) < cap)
                if self.closed:
                    raise errors.CancelledError(
                        None, None, f"{self.queue._kind} '{self.queue.name}' is closed."
                    )
                self.items.append(element)
                self.cond.notify_all()

    def take(self, session, n, allow_smaller) -> list:
        need = n + self.queue._min_after_dequeue
        with self.cond:
            self._wait(session, lambda: self.closed or len(self.items) >= need)
            if len(self.items) < n:  # closed
                if not (allow_smaller and self.items):
                    raise errors.OutOfRangeError(
                        None,
                        None,
                        f"{self.queue._kind} '{self.queue.name}' is closed and has insufficient "
                        f"elements (requested {n}, current size {len(self.items)})",
                    )
                n = len(self.items)
            if self.queue._shuffle:
                picks = sorted(self.rng.choice(len(self.items), n, replace=False), reverse=True)
                out = [self.items.pop(int(i)) for i in picks]
            else:
                out, self.items = self.items[:n], self.items[n:]
            self.cond.notify_all()
            return out

    def close(self, cancel_pending_enqueues) -> None:
        with self.cond:
            self.closed = True
            self.cond.notify_all()


def _listify(x):
    return list(x) if isinstance(x, (list, tuple)) else [x]


class QueueBase:
    """A TF1 queue of tuples of tensors with fixed dtypes (and shapes, for `dequeue_many`)."""

    _kind = "Queue"
    _default_name = "queue"
    _shuffle = False

    def __init__(self, capacity, dtypes, shapes=None, names=None, seed=None, name=None,
                 min_after_dequeue=0):  # fmt: skip
        self._dtypes = [as_dtype(d) for d in _listify(dtypes)]
        if shapes is None:
            self._shapes = [TensorShape(None)] * len(self._dtypes)
        else:
            shapes = list(shapes)
            if shapes and not isinstance(shapes[0], (list, tuple, TensorShape)):
                shapes = [shapes]
            if len(shapes) != len(self._dtypes):
                raise ValueError(
                    f"{self._kind}: `shapes` must have one shape per dtype: expected "
                    f"{len(self._dtypes)}, received {len(shapes)}"
                )
            self._shapes = [TensorShape(s) for s in shapes]
        self._names = list(names) if names is not None else None
        if capacity is not None and int(capacity) <= 0:
            raise ValueError(f"{self._kind}: `capacity` must be positive. Received: {capacity}")
        self._capacity = None if capacity is None else int(capacity)
        self._min_after_dequeue = int(min_after_dequeue)
        g = get_default_graph()
        if seed is None and g.seed is not None:
            seed = g.seed + g._next_uid()
        self._seed = None if seed is None else int(seed) % (2**32)
        with op_scope(name, self._default_name) as scope:
            self._name = scope
        self.graph = g

    # ---- TF's attributes
    @property
    def name(self) -> str:
        return self._name

    @property
    def dtypes(self) -> list:
        return list(self._dtypes)

    @property
    def shapes(self) -> list:
        return list(self._shapes)

    @property
    def names(self):
        return self._names

    def _state(self, session) -> _QueueState:
        state = _session_state(session)
        with state["lock"]:
            q = state.get(self)
            if q is None:
                q = state[self] = _QueueState(self)
            return q

    # ---- enqueue
    def _components(self, vals) -> list:
        if isinstance(vals, dict):
            if self._names is None:
                raise ValueError(f"{self._kind} '{self.name}' has no names: enqueue a list.")
            vals = [vals[n] for n in self._names]
        vals = _listify(vals)
        if len(vals) != len(self._dtypes):
            raise ValueError(
                f"{self._kind} '{self.name}' expects {len(self._dtypes)} components, received "
                f"{len(vals)}"
            )
        out = []
        for v, dt in zip(vals, self._dtypes):
            if _is_string(dt) and not isinstance(v, Tensor):
                raise TypeError(
                    f"{self._kind} '{self.name}': string components must be string tensors of "
                    f"readers or queues. Received: {v!r}"
                )
            out.append(convert_to_tensor(v, dtype=dt))
        return out

    def _enqueue(self, vals, many, name):
        comps = self._components(vals)
        for t, s in zip(comps, self._shapes):
            shape = t.shape[1:] if many and t.shape.dims is not None else t.shape
            if not shape.is_compatible_with(s):
                raise ValueError(
                    f"{self._kind} '{self.name}': component shape {shape} is not compatible "
                    f"with the queue's shape {s}"
                )

        def host(session):
            # The runner threads of one enqueue op share its compiled plan: one at a time.
            with _lock_for(session, op):
                values = _evaluate(session, comps)
            if many:
                n = len(values[0])
                elements = [tuple(v[i] for v in values) for i in range(n)]
            else:
                elements = [tuple(values)]
            state = self._state(session)
            state.put(session, elements)
            return {}

        with op_scope(name, "EnqueueMany" if many else "enqueue") as scope:
            op = _host_op("QueueEnqueueV2", scope, [], [], host)
        return op

    def enqueue(self, vals, name=None):
        """An op that puts one element (a tensor or a list of tensors) in the queue, waiting
        while the queue is full."""
        return self._enqueue(vals, False, name)

    def enqueue_many(self, vals, name=None):
        """An op that puts the slices along axis 0 of `vals` in the queue."""
        return self._enqueue(vals, True, name)

    # ---- dequeue
    def _dequeue(self, n, allow_smaller, name, op_type):
        if n is not None and any(not s.is_fully_defined() for s in self._shapes):
            raise ValueError(
                f"{self._kind} '{self.name}': dequeue_many needs fully defined component shapes; "
                f"the queue has {[str(s) for s in self._shapes]}"
            )
        lead = [None if allow_smaller else n]
        specs = [
            (s if n is None else TensorShape(lead + s.dims), d)
            for s, d in zip(self._shapes, self._dtypes)
        ]

        def host(session):
            state = self._state(session)
            elements = state.take(session, 1 if n is None else n, allow_smaller)
            if n is None:
                values = list(elements[0])
            else:
                values = [np.stack([e[i] for e in elements]) for i in range(len(self._dtypes))]
            return _outputs_to_feeds(op.outputs, values)

        with op_scope(name, op_type) as scope:
            op = _host_op(op_type, scope, [], specs, host)
        outs = list(op.outputs)
        if self._names is not None:
            return dict(zip(self._names, outs))
        return outs[0] if len(outs) == 1 else outs

    def dequeue(self, name=None):
        """One element, waiting until there is one (`OutOfRangeError` once the queue is closed
        and empty)."""
        return self._dequeue(None, False, name, "QueueDequeueV2")

    def dequeue_many(self, n, name=None):
        """`n` elements stacked on a new axis 0 (`OutOfRangeError` once the queue is closed
        with fewer than `n`)."""
        return self._dequeue(int(n), False, name, "QueueDequeueManyV2")

    def dequeue_up_to(self, n, name=None):
        """Up to `n` elements: fewer only once the queue is closed."""
        return self._dequeue(int(n), True, name, "QueueDequeueUpToV2")

    # ---- state
    def close(self, cancel_pending_enqueues=False, name=None):
        """An op that closes the queue: later enqueues fail, dequeues drain what is left."""

        def host(session):
            self._state(session).close(cancel_pending_enqueues)
            return {}

        with op_scope(name, "close") as scope:
            return _host_op("QueueCloseV2", scope, [], [], host)

    def size(self, name=None):
        """The number of elements in the queue (int32)."""

        def host(session):
            return {op.outputs[0]: np.asarray(len(self._state(session).items), np.int32)}

        with op_scope(name, "size") as scope:
            op = _host_op("QueueSizeV2", scope, [], [((), "int32")], host)
        return op.outputs[0]

    def is_closed(self, name=None):
        def host(session):
            return {op.outputs[0]: np.asarray(self._state(session).closed)}

        with op_scope(name, "is_closed") as scope:
            op = _host_op("QueueIsClosedV2", scope, [], [((), "bool")], host)
        return op.outputs[0]


class FIFOQueue(QueueBase):
    """`tf.FIFOQueue(capacity, dtypes, shapes=None, names=None)`: first in, first out."""

    _kind = "FIFOQueue"
    _default_name = "fifo_queue"

    def __init__(self, capacity, dtypes, shapes=None, names=None, shared_name=None,
                 name="fifo_queue"):  # fmt: skip
        super().__init__(capacity, dtypes, shapes, names, name=name)


class RandomShuffleQueue(QueueBase):
    """`tf.RandomShuffleQueue`: dequeues uniformly random elements, keeping at least
    `min_after_dequeue` elements until the queue is closed."""

    _kind = "RandomShuffleQueue"
    _default_name = "random_shuffle_queue"
    _shuffle = True

    def __init__(self, capacity, min_after_dequeue, dtypes, shapes=None, names=None, seed=None,
                 shared_name=None, name="random_shuffle_queue"):  # fmt: skip
        if min_after_dequeue >= capacity:
            raise ValueError(
                "RandomShuffleQueue: `min_after_dequeue` must be less than `capacity`. "
                f"Received: min_after_dequeue={min_after_dequeue}, capacity={capacity}"
            )
        super().__init__(capacity, dtypes, shapes, names, seed, name, min_after_dequeue)


# ---------------------------------------------------------------------------- readers
class ReaderBase:
    """A TF1 reader: `read(queue)` takes file names from a string queue and returns the next
    `(key, value)` record as string tensors."""

    _op_type = "ReaderReadV2"

    def __init__(self, name=None):
        with op_scope(name, type(self).__name__) as scope:
            self._name = scope

    @property
    def name(self) -> str:
        return self._name

    def _records(self, path):
        """Yields (key, value bytes) for the records of the file `path`."""
        raise NotImplementedError

    def _next(self, session, queue):
        state = _session_state(session)
        with state["lock"]:
            mine = state.setdefault(self, {"it": None, "produced": 0})
        with _lock_for(session, self):
            return self._next_locked(session, queue, mine)

    def _next_locked(self, session, queue, mine):
        while True:
            if mine["it"] is None:
                name = queue._state(session).take(session, 1, False)[0][0]
                path = name.decode() if isinstance(name, bytes) else str(name)
                try:
                    mine["it"] = iter(self._records(path))
                except OSError as e:
                    raise errors.NotFoundError(None, None, f"{path}; {e.strerror}") from None
            record = next(mine["it"], None)
            if record is not None:
                mine["produced"] += 1
                return record
            mine["it"] = None

    def read(self, queue, name=None):
        """The next record as `(key, value)` string tensors."""

        def host(session):
            key, value = self._next(session, queue)
            return _outputs_to_feeds(op.outputs, [key, value])

        with op_scope(name, "ReaderReadV2") as scope:
            op = _host_op(self._op_type, scope, [], [((), "string"), ((), "string")], host)
        return op.outputs[0], op.outputs[1]

    def read_up_to(self, queue, num_records, name=None):
        """Up to `num_records` records as 1-D `(keys, values)` (fewer at the end of input)."""

        def host(session):
            keys, values = [], []
            for _ in range(int(num_records)):
                try:
                    k, v = self._next(session, queue)
                except errors.OutOfRangeError:
                    if keys:
                        break
                    raise
                keys.append(k)
                values.append(v)
            return _outputs_to_feeds(op.outputs, [keys, values])

        with op_scope(name, "ReaderReadUpToV2") as scope:
            spec = [([None], "string"), ([None], "string")]
            op = _host_op("ReaderReadUpToV2", scope, [], spec, host)
        return op.outputs[0], op.outputs[1]

    def num_records_produced(self, name=None):
        def host(session):
            mine = _session_state(session).get(self, {"produced": 0})
            return {op.outputs[0]: np.asarray(mine["produced"], np.int64)}

        with op_scope(name, "ReaderNumRecordsProducedV2") as scope:
            op = _host_op("ReaderNumRecordsProducedV2", scope, [], [((), "int64")], host)
        return op.outputs[0]


class TextLineReader(ReaderBase):
    """Records are the lines of text files (without the line end); keys `"<file>:<line>"`."""

    def __init__(self, skip_header_lines=None, name=None):
        super().__init__(name)
        self._skip = int(skip_header_lines or 0)

    def _records(self, path):
        with open(path, "rb") as f:
            for i, line in enumerate(f, start=1):
                if i <= self._skip:
                    continue
                yield f"{path}:{i}".encode(), line.rstrip(b"\n").rstrip(b"\r")


class FixedLengthRecordReader(ReaderBase):
    """Records are `record_bytes`-long pieces of binary files (after `header_bytes`, before
    `footer_bytes`); keys `"<file>:<index>"`."""

    def __init__(self, record_bytes, header_bytes=None, footer_bytes=None, hop_bytes=None,
                 name=None, encoding=None):  # fmt: skip
        super().__init__(name)
        if int(record_bytes) <= 0:
            raise ValueError(
                "FixedLengthRecordReader: `record_bytes` must be positive. "
                f"Received: {record_bytes}"
            )
        self._record = int(record_bytes)
        self._header = int(header_bytes or 0)
        self._footer = int(footer_bytes or 0)
        self._hop = int(hop_bytes or 0) or self._record

    def _records(self, path):
        with open(path, "rb") as f:
            data = f.read()
        end = len(data) - self._footer
        pos, i = self._header, 0
        while pos + self._record <= end:
            yield f"{path}:{i}".encode(), data[pos : pos + self._record]
            pos += self._hop
            i += 1


class WholeFileReader(ReaderBase):
    """One record per file: the key is its name, the value its contents."""

    def _records(self, path):
        with open(path, "rb") as f:
            yield path.encode(), f.read()


# ---------------------------------------------------------------------------- decoding
def _host_decode(op_type, default, records, specs, decode, name):
    with op_scope(name, default) as scope:
        rec = convert_to_tensor(records)
        if not _is_string(rec.dtype):
            raise TypeError(f"{default}: the records must be a string tensor. Received: {rec!r}")

        def host(session):
            return _outputs_to_feeds(op.outputs, decode(_string_value(rec)))

        op = _host_op(op_type, scope, [rec], [(s, d) for s, d in specs], host)
    return op


def decode_raw(input_bytes=None, out_type=None, little_endian=True, name=None, bytes=None):  # noqa: A002
    """The bytes of each string reinterpreted as `out_type` numbers (a new last axis).

    Raises:
        InvalidArgumentError (at run time): the strings' lengths differ or are not a multiple
            of the type's size.
    """
    records = input_bytes if input_bytes is not None else bytes
    dt = as_dtype(out_type)
    np_dt = np.dtype(dt.as_numpy_dtype).newbyteorder("<" if little_endian else ">")
    rec = convert_to_tensor(records)
    shape = TensorShape(None) if rec.shape.dims is None else TensorShape(rec.shape.dims + [None])

    def decode(values):
        flat = [np.frombuffer(v, dtype=np_dt) for v in np.asarray(values, object).reshape(-1)]
        if len({len(a) for a in flat}) > 1:
            raise errors.InvalidArgumentError(
                None, None, "DecodeRaw requires input strings to all be the same size"
            )
        n = len(flat[0]) if flat else 0
        out = np.stack(flat) if flat else np.zeros((0, 0), np_dt)
        return [out.reshape(np.shape(values) + (n,)).astype(dt.as_numpy_dtype)]

    return _host_decode("DecodeRaw", "DecodeRaw", rec, [(shape, dt)], decode, name).outputs[0]


def _default_value(d):
    v = d
    if isinstance(d, Tensor):
        v = d.op._attrs.get("value")
        if v is None:
            raise TypeError("decode_csv: record_defaults must be constants or Python values.")
    arr = np.asarray(v)
    if arr.dtype.kind in "USO":
        return "string", (arr.reshape(-1)[0] if arr.size else None)
    if isinstance(d, Tensor):
        dt = d.dtype.name
    elif arr.dtype.kind == "f":
        dt = "float32"
    elif arr.dtype.kind in "iu":
        dt = "int32" if arr.dtype == np.int64 and not isinstance(v, np.ndarray) else arr.dtype.name
    else:
        raise TypeError(f"decode_csv: unsupported record default {d!r}")
    return dt, (arr.reshape(-1)[0] if arr.size else None)


def decode_csv(records, record_defaults, field_delim=",", use_quote_delim=True, name=None,
               na_value="", select_cols=None):  # fmt: skip
    """Each CSV string of `records` parsed into one tensor per column; `record_defaults`
    gives each column's type and value for empty fields (an empty default makes it required).

    Raises:
        InvalidArgumentError (at run time): a record has another number of fields, a required
            field is empty, or a field does not parse as its column's type.
    """
    cols = [_default_value(d) for d in record_defaults]
    if select_cols is not None and len(select_cols) != len(cols):
        raise ValueError(
            "decode_csv: select_cols and record_defaults must have the same length. Received: "
            f"{len(select_cols)} and {len(cols)}"
        )
    rec = convert_to_tensor(records)

    def field(text, col, row):
        dt, default = cols[col]
        if text == "" or text == na_value:
            if default is None:
                raise errors.InvalidArgumentError(
                    None, None, f"Field {col} is required but missing in record {row}!"
                )
            return default.encode() if dt == "string" and isinstance(default, str) else default
        if dt == "string":
            return text.encode()
        try:
            return float(text) if dt.startswith("float") else int(text)
        except ValueError:
            raise errors.InvalidArgumentError(
                None, None, f"Field {col} in record {row} is not a valid {dt}: {text}"
            ) from None

    def decode(values):
        arr = np.asarray(values, object)
        rows = arr.reshape(-1)
        out = [[] for _ in cols]
        for r, raw in enumerate(rows):
            line = raw.decode() if isinstance(raw, (bytes, np.bytes_)) else str(raw)
            quoting = csv.QUOTE_MINIMAL if use_quote_delim else csv.QUOTE_NONE
            fields = next(csv.reader([line], delimiter=field_delim, quoting=quoting), [""])
            if select_cols is not None:
                fields = [fields[i] if i < len(fields) else "" for i in select_cols]
            if len(fields) != len(cols):
                raise errors.InvalidArgumentError(
                    None, None, f"Expect {len(cols)} fields but have {len(fields)} in record {r}"
                )
            for c, text in enumerate(fields):
                out[c].append(field(text, c, r))
        return [
            np.asarray(o, dtype=object if dt == "string" else dt).reshape(arr.shape)
            for o, (dt, _) in zip(out, cols)
        ]

    specs = [(rec.shape, dt) for dt, _ in cols]
    return list(_host_decode("DecodeCSV", "DecodeCSV", rec, specs, decode, name).outputs)


# ---------------------------------------------------------------------------- runners
class QueueRunner:
    """Threads that run `enqueue_ops` in a loop; when every one has hit the end of its input
    (`OutOfRangeError`), the queue is closed.

    Args:
        queue: the queue the ops fill.
        enqueue_ops: one thread each.
    """

    def __init__(self, queue=None, enqueue_ops=None, close_op=None, cancel_op=None,
                 queue_closed_exception_types=None, queue_runner_def=None,
                 import_scope=None):  # fmt: skip
        if queue is None or not enqueue_ops:
            raise ValueError("QueueRunner: `queue` and `enqueue_ops` must be given.")
        self._queue = queue
        self._enqueue_ops = list(enqueue_ops)
        self._close_op = close_op if close_op is not None else queue.close()
        self._cancel_op = (
            cancel_op if cancel_op is not None else queue.close(cancel_pending_enqueues=True)
        )
        self._closed_types = tuple(
            queue_closed_exception_types or (errors.OutOfRangeError, errors.CancelledError)
        )
        self._lock = threading.Lock()
        self._runs: dict = {}
        self._exceptions: list = []

    @property
    def queue(self):
        return self._queue

    @property
    def enqueue_ops(self) -> list:
        return list(self._enqueue_ops)

    @property
    def exceptions_raised(self) -> list:
        return list(self._exceptions)

    @property
    def name(self) -> str:
        return self._queue.name

    def _run(self, sess, enqueue_op, coord):
        decremented = False
        try:
            while not (coord is not None and coord.should_stop()):
                try:
                    sess.run(enqueue_op)
                except self._closed_types:
                    with self._lock:
                        self._runs[sess] -= 1
                        decremented = True
                        if self._runs[sess] == 0:
                            try:
                                sess.run(self._close_op)
                            except Exception:  # noqa: BLE001 - the session may be closing
                                pass
                    return
        except Exception as e:  # noqa: BLE001 - reported to the coordinator, as TF does
            if coord is not None:
                coord.request_stop(e)
            else:
                with self._lock:
                    self._exceptions.append(e)
                raise
        finally:
            if not decremented:
                with self._lock:
                    self._runs[sess] -= 1

    def _close_on_stop(self, sess, coord):
        coord.wait_for_stop()
        try:
            sess.run(self._cancel_op)
        except Exception:  # noqa: BLE001 - the session may already be closed
            pass

    def create_threads(self, sess, coord=None, daemon=False, start=False) -> list:
        """One thread per enqueue op (plus one that cancels the queue when `coord` stops)."""
        with self._lock:
            if self._runs.get(sess, 0) > 0:
                return []
            self._runs[sess] = len(self._enqueue_ops)
            self._exceptions = []
        threads = [
            threading.Thread(target=self._run, args=(sess, op, coord), daemon=daemon)
            for op in self._enqueue_ops
        ]
        if coord is not None:
            threads.append(
                threading.Thread(target=self._close_on_stop, args=(sess, coord), daemon=daemon)
            )
        for t in threads:
            if coord is not None:
                coord.register_thread(t)
            if start:
                t.start()
        return threads


def add_queue_runner(qr, collection=GraphKeys.QUEUE_RUNNERS) -> None:
    add_to_collection(collection, qr)


def start_queue_runners(sess=None, coord=None, daemon=True, start=True,
                        collection=GraphKeys.QUEUE_RUNNERS) -> list:  # fmt: skip
    """Starts the threads of every QueueRunner in `collection`; returns them."""
    if sess is None:
        from keratron.compat.v1 import session as session_lib

        sess = session_lib.resolve(None)
    threads = []
    for qr in get_collection(collection):
        threads.extend(qr.create_threads(sess, coord=coord, daemon=daemon, start=start))
    return threads


class Coordinator:
    """Stops a set of threads together: any may `request_stop` (with the exception that
    ended it), `join` waits for all and re-raises that exception.

    Example:
        >>> import keratron.compat.v1 as tf
        >>> coord = tf.train.Coordinator()
        >>> coord.request_stop()
        >>> coord.should_stop()
        True
    """

    def __init__(self, clean_stop_exception_types=None):
        if clean_stop_exception_types is None:
            clean_stop_exception_types = (errors.OutOfRangeError,)
        self._clean = tuple(clean_stop_exception_types)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._exc_info = None
        self._threads: set = set()
        self._joined = False

    def request_stop(self, ex=None) -> None:
        with self._lock:
            if ex is not None and not isinstance(ex, self._clean) and self._exc_info is None:
                if isinstance(ex, tuple):
                    self._exc_info = ex
                else:
                    self._exc_info = (type(ex), ex, ex.__traceback__)
            self._stop.set()

    def clear_stop(self) -> None:
        with self._lock:
            self._joined = False
            self._exc_info = None
            self._stop.clear()

    def should_stop(self) -> bool:
        return self._stop.is_set()

    def stop_on_exception(self):
        """A context manager that turns an exception in its block into `request_stop(ex)`."""
        coord = self

        class _Ctx:
            def __enter__(self):
                return None

            def __exit__(self, exc_type, exc, tb):
                if exc_type is not None:
                    coord.request_stop((exc_type, exc, tb))
                    return True
                return False

        return _Ctx()

    def wait_for_stop(self, timeout=None) -> bool:
        return self._stop.wait(timeout)

    def register_thread(self, thread) -> None:
        with self._lock:
            self._threads.add(thread)

    @property
    def joined(self) -> bool:
        return self._joined

    def raise_requested_exception(self) -> None:
        with self._lock:
            if self._exc_info is not None:
                raise self._exc_info[1].with_traceback(self._exc_info[2])

    def join(self, threads=None, stop_grace_period_secs=120, ignore_live_threads=False) -> None:
        """Waits for the registered threads and `threads`; re-raises a reported exception.

        Raises:
            RuntimeError: threads still run `stop_grace_period_secs` after the stop request.
        """
        with self._lock:
            all_threads = set(self._threads) | set(threads or [])
        while any(t.is_alive() for t in all_threads) and not self.wait_for_stop(0.1):
            pass
        deadline = time.time() + stop_grace_period_secs
        while any(t.is_alive() for t in all_threads) and time.time() < deadline:
            time.sleep(0.01)
        with self._lock:
            self._joined = True
            self._threads = set()
            exc_info = self._exc_info
        live = [t.name for t in all_threads if t.is_alive()]
        if exc_info is not None:
            raise exc_info[1].with_traceback(exc_info[2])
        if live and not ignore_live_threads:
            raise RuntimeError(f"Coordinator stopped with threads still running: {' '.join(live)}")


# ---------------------------------------------------------------------------- producers, batching
def _epoch_producer(items, dtype, shape, num_epochs, shuffle, seed, capacity, name, default,
                    cancel_op=None):  # fmt: skip
    """A FIFO queue that a QueueRunner refills with `items` once per epoch (shuffled per epoch
    when `shuffle`), closed after `num_epochs` epochs; its fill fraction is a summary."""
    g = get_default_graph()
    if seed is None and g.seed is not None:
        seed = g.seed + g._next_uid()
    with name_scope(name, default):
        queue = FIFOQueue(capacity, [dtype], shapes=[shape])
        epochs = weakref.WeakKeyDictionary()

        def host(session):
            done, rng = epochs.get(session, (0, None))
            if rng is None:
                rng = pyrandom.Random(seed)
            if num_epochs is not None and done >= num_epochs:
                raise errors.OutOfRangeError(None, None, "Reached limit of num_epochs")
            epochs[session] = (done + 1, rng)
            order = list(items)
            if shuffle:
                rng.shuffle(order)
            queue._state(session).put(session, [(s,) for s in order])
            return {}

        with op_scope(None, f"{default}_EnqueueMany") as scope:
            enqueue = _host_op("QueueEnqueueManyV2", scope, [], [], host)
        add_queue_runner(QueueRunner(queue, [enqueue], cancel_op=cancel_op))
        full = math_ops.cast(queue.size(), "float32") * (1.0 / capacity)
        summary.scalar(f"fraction_of_{capacity}_full", full)
    return queue


def string_input_producer(string_tensor, num_epochs=None, shuffle=True, seed=None, capacity=32,
                          shared_name=None, name=None, cancel_op=None):  # fmt: skip
    """A FIFO queue of the strings (file names), refilled by a QueueRunner once per epoch,
    shuffled per epoch when `shuffle`; after `num_epochs` epochs the queue is closed.

    Raises:
        TypeError: `string_tensor` is not a list of strings.
        ValueError: it is empty.
    """
    if isinstance(string_tensor, Tensor) or not isinstance(string_tensor, (list, tuple)):
        raise TypeError(
            "string_input_producer: `string_tensor` must be a list of strings (file names). "
            f"Received: {string_tensor!r}"
        )
    items = [s.encode() if isinstance(s, str) else bytes(s) for s in string_tensor]
    if not items:
        raise ValueError("string_input_producer: `string_tensor` must not be empty.")
    return _epoch_producer(
        items, "string", [], num_epochs, shuffle, seed, capacity, name, "input_producer",
        cancel_op,
    )  # fmt: skip


def range_input_producer(limit, num_epochs=None, shuffle=True, seed=None, capacity=32,
                         shared_name=None, name=None):  # fmt: skip
    """A FIFO queue of the int32 indices `0 .. limit - 1`, once per epoch (shuffled per epoch
    when `shuffle`).

    Raises:
        ValueError: `limit` is not a positive int.
    """
    if not isinstance(limit, (int, np.integer)) or limit <= 0:
        raise ValueError(
            f"range_input_producer: `limit` must be a positive int. Received: {limit!r}"
        )
    items = [np.int32(i) for i in range(int(limit))]
    return _epoch_producer(
        items, "int32", [], num_epochs, shuffle, seed, capacity, name, "input_producer"
    )


def slice_input_producer(tensor_list, num_epochs=None, shuffle=True, seed=None, capacity=32,
                         shared_name=None, name=None):  # fmt: skip
    """One row (a slice along axis 0) of each tensor of `tensor_list` per dequeue, the rows
    visited once per epoch (in a random order per epoch when `shuffle`).

    Raises:
        ValueError: the tensors' first dimensions are unknown or differ.
    """
    from keratron.compat.v1 import array_ops

    with name_scope(name, "input_producer"):
        tensors = [convert_to_tensor(t) for t in tensor_list]
        sizes = {t.shape.dims[0] if t.shape.dims else None for t in tensors}
        if len(sizes) != 1 or None in sizes:
            raise ValueError(
                "slice_input_producer: the tensors need one known first dimension. Received "
                f"shapes {[str(t.shape) for t in tensors]}"
            )
        queue = range_input_producer(sizes.pop(), num_epochs, shuffle, seed, capacity)
        index = queue.dequeue()
        return [array_ops.gather(t, index) for t in tensors]


def _batch(tensors, batch_size, num_threads, capacity, enqueue_many, shapes,
           allow_smaller_final_batch, name, default, make_queue):  # fmt: skip
    if isinstance(tensors, dict):
        keys = list(tensors)
        flat = [tensors[k] for k in keys]
    else:
        keys = None
        flat = _listify(tensors)
    with name_scope(name, default):
        flat = [convert_to_tensor(t) for t in flat]
        if shapes is None:
            shapes = [t.shape[1:] if enqueue_many else t.shape for t in flat]
        shapes = [TensorShape(s) for s in shapes]
        for t, s in zip(flat, shapes):
            if not s.is_fully_defined():
                raise ValueError(
                    f"{default}: all shapes must be fully defined: the shape of {t.name} is {s}. "
                    "Use set_shape() or pass `shapes`."
                )
        queue = make_queue([t.dtype for t in flat], shapes)
        enqueue = queue.enqueue_many(flat) if enqueue_many else queue.enqueue(flat)
        add_queue_runner(QueueRunner(queue, [enqueue] * int(num_threads)))
        size = math_ops.cast(queue.size(), "float32")
        keep = queue._min_after_dequeue
        if keep:
            full = math_ops.maximum(0.0, size - keep) * (1.0 / (capacity - keep))
            summary.scalar(f"fraction_over_{keep}_of_{capacity - keep}_full", full)
        else:
            summary.scalar(f"fraction_of_{capacity}_full", size * (1.0 / capacity))
        if allow_smaller_final_batch:
            out = queue.dequeue_up_to(batch_size, name=name)
        else:
            out = queue.dequeue_many(batch_size, name=name)
    out = _listify(out)
    if keys is not None:
        return dict(zip(keys, out))
    return out if isinstance(tensors, (list, tuple)) else out[0]


def batch(tensors, batch_size, num_threads=1, capacity=32, enqueue_many=False, shapes=None,
          dynamic_pad=False, allow_smaller_final_batch=False, shared_name=None,
          name=None):  # fmt: skip
    """`tf.train.batch`: batches of `tensors` from a FIFOQueue that `num_threads`
    QueueRunner threads fill (start them with `tf.train.start_queue_runners`).

    Raises:
        ValueError: a tensor's shape is not fully defined, or `dynamic_pad` is set.
    """
    if dynamic_pad:
        raise ValueError("batch: dynamic_pad=True is not supported.")
    return _batch(
        tensors, batch_size, num_threads, capacity, enqueue_many, shapes,
        allow_smaller_final_batch, name, "batch",
        lambda dts, shs: FIFOQueue(capacity, dts, shs),
    )  # fmt: skip


def shuffle_batch(tensors, batch_size, capacity, min_after_dequeue, num_threads=1, seed=None,
                  enqueue_many=False, shapes=None, allow_smaller_final_batch=False,
                  shared_name=None, name=None):  # fmt: skip
    """`tf.train.shuffle_batch`: batches drawn at random from a RandomShuffleQueue holding at
    least `min_after_dequeue` elements (until its input ends)."""
    return _batch(
        tensors, batch_size, num_threads, capacity, enqueue_many, shapes,
        allow_smaller_final_batch, name, "shuffle_batch",
        lambda dts, shs: RandomShuffleQueue(capacity, min_after_dequeue, dts, shs, seed=seed),
    )  # fmt: skip
