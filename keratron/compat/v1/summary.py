"""`tf.summary` (v1): `scalar`, `histogram`, `merge`, `merge_all` and `FileWriter`.

A summary op's output is a serialized `Summary` proto (dtype string). In the graph it stands
for the tensors it summarizes (`summary_parts`); `Session.run` fetches those and serializes the
proto from their values, so summaries cost no graph-side string ops. `FileWriter` appends
`Event` records to an `events.out.tfevents.*` file framed by tensorboard's `RecordWriter` on
a plain file, as `keratron.estimator.summary` does (tensorboard's own file writer would import
TensorFlow when it is installed). Serializing needs the optional `tensorboard` package.
"""

from __future__ import annotations

import os
import sys
import time

import numpy as np

from keratron.compat.v1.framework import (
    GraphKeys,
    Tensor,
    convert_to_tensor,
    get_default_graph,
    make_op,
    op_scope,
)
from keratron.utils.event_file import EventFile

__all__ = ["scalar", "histogram", "merge", "merge_all", "FileWriter", "FileWriterCache"]


def _protos():
    try:
        from tensorboard.compat.proto import event_pb2, summary_pb2
    except ImportError:
        raise ImportError(
            "tf.summary needs the optional `tensorboard` package to write summaries "
            "(pip install tensorboard)."
        ) from None
    return event_pb2, summary_pb2


def _summary_op(op_type, name, parts_of, inputs, collections):
    g = get_default_graph()
    with op_scope(name, op_type) as scope:
        ins = [convert_to_tensor(x) for x in inputs]
        parts = parts_of(scope, ins)
        op = make_op(op_type, scope, ins, lambda ctx, *v: v[0], [((), "string")])
    op._attrs["summary_parts"] = parts
    out = op.outputs[0]
    for key in collections if collections is not None else [GraphKeys.SUMMARIES]:
        g.add_to_collection(key, out)
    return out


def scalar(name, tensor, collections=None, family=None):
    """A `Summary` with one `simple_value` tagged `name` (prefixed by the name scope)."""
    name = f"{family}/{name}" if family else name
    return _summary_op(
        "ScalarSummary", name, lambda tag, ins: [("scalar", tag, ins[0])], [tensor], collections
    )


def histogram(name, values, collections=None, family=None):
    """A `Summary` with a `HistogramProto` of `values` in TensorFlow's default buckets."""
    name = f"{family}/{name}" if family else name
    return _summary_op(
        "HistogramSummary", name, lambda tag, ins: [("histo", tag, ins[0])], [values], collections
    )


def merge(inputs, collections=None, name=None):
    """One `Summary` holding the values of every summary in `inputs`."""
    inputs = [t for t in inputs if t is not None]
    parts = []
    for t in inputs:
        sub = t.op._attrs.get("summary_parts") if isinstance(t, Tensor) else None
        if sub is None:
            raise TypeError(f"tf.summary.merge: {t!r} is not a summary op's output.")
        parts.extend(sub)
    return _summary_op("MergeSummary", name, lambda tag, ins: parts, inputs, collections or [])


def merge_all(key=GraphKeys.SUMMARIES, scope=None, name=None):
    """`merge` of the summaries in collection `key`, or None when it is empty."""
    found = get_default_graph().get_collection(key, scope)
    return merge(found, name=name) if found else None


# ---------------------------------------------------------------------------- serialization
def _default_bucket_limits() -> list:
    pos, v = [], 1e-12
    while v < 1e20:
        pos.append(v)
        v *= 1.1
    pos.append(sys.float_info.max)
    return [-x for x in reversed(pos)] + [0.0] + pos


_LIMITS = np.array(_default_bucket_limits())


def _histogram(summary_pb2, values):
    """TensorFlow's `Histogram::EncodeToProto` without zero buckets: runs of empty buckets
    collapse into their last one."""
    x = np.asarray(values, dtype=np.float64).ravel()
    counts = np.bincount(np.searchsorted(_LIMITS, x, side="right"), minlength=len(_LIMITS))
    limits, buckets, i = [], [], 0
    while i < len(_LIMITS):
        end, count = _LIMITS[i], counts[i]
        i += 1
        if count <= 0:
            while i < len(_LIMITS) and counts[i] <= 0:
                end, count = _LIMITS[i], counts[i]
                i += 1
        limits.append(float(end))
        buckets.append(float(count))
    return summary_pb2.HistogramProto(
        min=float(x.min()) if x.size else sys.float_info.max,
        max=float(x.max()) if x.size else -sys.float_info.max,
        num=float(x.size),
        sum=float(x.sum()),
        sum_squares=float((x * x).sum()),
        bucket_limit=limits,
        bucket=buckets,
    )


def serialize(parts, values) -> bytes:
    """The serialized `Summary` of `parts` [(kind, tag, tensor)] given their fetched values."""
    _, summary_pb2 = _protos()
    out = []
    for (kind, tag, _), value in zip(parts, values):
        if kind == "scalar":
            out.append(summary_pb2.Summary.Value(tag=tag, simple_value=float(value)))
        else:
            out.append(summary_pb2.Summary.Value(tag=tag, histo=_histogram(summary_pb2, value)))
    return summary_pb2.Summary(value=out).SerializeToString()


# ---------------------------------------------------------------------------- writer
class FileWriter:
    """Writes `Summary` protos (as `Session.run` returns them) to an event file in `logdir`.

    Example:
        >>> import os, tempfile
        >>> import keratron.compat.v1 as tf
        >>> logdir = tempfile.mkdtemp()
        >>> with tf.Graph().as_default(), tf.Session() as sess:
        ...     merged = tf.summary.scalar("loss", tf.constant(0.5))
        ...     writer = tf.summary.FileWriter(logdir, sess.graph)
        ...     writer.add_summary(sess.run(merged), global_step=1)
        ...     writer.close()
        >>> [name.startswith("events.out.tfevents.") for name in os.listdir(logdir)]
        [True]
    """

    def __init__(self, logdir, graph=None, max_queue=10, flush_secs=120, graph_def=None,
                 filename_suffix=None, session=None):  # fmt: skip
        self._event_pb2, self._summary_pb2 = _protos()
        self._logdir = os.fspath(logdir)
        self._file = EventFile(self._logdir, filename_suffix or "")

    def get_logdir(self) -> str:
        return self._logdir

    def _write(self, event) -> None:
        if self._file.closed:
            raise RuntimeError(f"FileWriter for {self._logdir} is closed.")
        self._file.add_event(event)

    def add_event(self, event) -> None:
        self._write(event)

    def add_summary(self, summary, global_step=None) -> None:
        """Appends `summary` (serialized bytes or a `Summary` proto) at `global_step`."""
        if isinstance(summary, (bytes, np.bytes_)):
            summary = self._summary_pb2.Summary.FromString(bytes(summary))
        event = self._event_pb2.Event(wall_time=time.time(), summary=summary)
        if global_step is not None:
            event.step = int(global_step)
        self._write(event)

    def add_graph(self, graph, global_step=None, graph_def=None) -> None:
        """Accepted for TF1 programs; the graph is not written (no GraphDef export)."""

    def add_session_log(self, session_log, global_step=None) -> None:
        event = self._event_pb2.Event(wall_time=time.time(), session_log=session_log)
        if global_step is not None:
            event.step = int(global_step)
        self._write(event)

    def flush(self) -> None:
        self._file.flush()

    def close(self) -> None:
        self._file.close()

    def reopen(self) -> None:
        self._file.reopen()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class FileWriterCache:
    """One `FileWriter` per log directory."""

    _cache: dict = {}

    @staticmethod
    def get(logdir) -> FileWriter:
        key = os.fspath(logdir)
        if key not in FileWriterCache._cache:
            FileWriterCache._cache[key] = FileWriter(key)
        return FileWriterCache._cache[key]

    @staticmethod
    def clear() -> None:
        for w in FileWriterCache._cache.values():
            w.close()
        FileWriterCache._cache.clear()
