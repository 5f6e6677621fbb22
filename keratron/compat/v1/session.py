"""`Session.run`: the pruned subgraph of the fetches, compiled through the tracing API.

For each (fetches, feed signature) a session walks back from the fetched tensors and
operations over inputs and control inputs, stopping at fed tensors (TF's pruning: an assign
that no fetch needs does not run), lowers those operations in creation order into a
`keratron.autodiff.tracing.Trace` (fed tensors become its placeholders, with the fed values'
shapes) and compiles the trace for the fetches. The compiled plan is cached; a later `run` with
the same fetches and feed shapes replays it. Variable values live in the session (one keratron
Variable per initialized v1 Variable).
"""

from __future__ import annotations

import contextlib
import threading

import numpy as np

from keratron.autodiff.primitive import suspend_tracing
from keratron.autodiff.tensor import Tensor as KTensor
from keratron.autodiff.tensor import Variable as KVariable
from keratron.autodiff.tensor import convert_to_tensor as k_convert
from keratron.autodiff.tracing import Trace
from keratron.compat.v1 import errors
from keratron.compat.v1.framework import Operation, Tensor, get_default_graph

__all__ = ["Session", "InteractiveSession", "get_default_session"]


class _Sessions(threading.local):
    def __init__(self):
        self.stack: list = []


_sessions = _Sessions()


def get_default_session():
    """The innermost session made default by `with sess.as_default()` (or `with Session()`),
    or an `InteractiveSession`; None if there is none."""
    return _sessions.stack[-1] if _sessions.stack else None


def clear_default_session() -> None:
    _sessions.stack[:] = [s for s in _sessions.stack if not isinstance(s, InteractiveSession)]


def resolve(session):
    s = session if session is not None else get_default_session()
    if s is None:
        raise ValueError(
            "Cannot evaluate tensor using `eval()`: No default session is registered. Use "
            "`with sess.as_default()` or pass an explicit session to `eval(session=sess)`"
        )
    return s


def run_in(session, fetch, feed_dict):
    s = resolve(session)
    if fetch.graph is not s.graph:
        raise ValueError(
            "Cannot use the given session to evaluate tensor: the tensor's graph is different "
            "from the session's graph."
        )
    return s.run(fetch, feed_dict)


# ---------------------------------------------------------------------------- fetch structures
def _flatten(fetches, out):
    if isinstance(fetches, dict):
        return ("dict", type(fetches), [(k, _flatten(v, out)) for k, v in fetches.items()])
    if isinstance(fetches, tuple) and hasattr(fetches, "_fields"):
        return ("namedtuple", type(fetches), [_flatten(v, out) for v in fetches])
    if isinstance(fetches, (list, tuple)):
        return ("seq", type(fetches), [_flatten(v, out) for v in fetches])
    out.append(fetches)
    return ("leaf", len(out) - 1)


def _rebuild(spec, values):
    kind = spec[0]
    if kind == "leaf":
        return values[spec[1]]
    if kind == "dict":
        return spec[1]((k, _rebuild(s, values)) for k, s in spec[2])
    if kind == "namedtuple":
        return spec[1](*[_rebuild(s, values) for s in spec[2]])
    return spec[1](_rebuild(s, values) for s in spec[2])


# ---------------------------------------------------------------------------- lowering
class _Lowering:
    """What lowerings may ask of the session: variable storage, assignments, the trace."""

    def __init__(self, session, trace):
        self.session = session
        self.trace = trace
        self.extra_inputs: list = []

    def is_initialized(self, var) -> bool:
        return var in self.session._storage

    def read(self, var):
        storage = self.session._storage.get(var)
        if storage is None:
            raise errors.FailedPreconditionError(
                None, var.op, f"Attempting to use uninitialized value {var.op.name}"
            )
        return storage

    def read_or(self, var, default):
        storage = self.session._storage.get(var)
        return default if storage is None else storage

    def assign(self, var, value, mode):
        storage = self.session._storage.get(var)
        if storage is None:
            if mode != "assign":
                self.read(var)
            storage = self.session.create_storage(var)
        getattr(storage, mode)(value)
        return storage

    def effect(self, fn, inputs, variables=()) -> None:
        """Runs `fn(*input values)` at this point of every run; it may write `variables`."""
        self.trace.graph.record_effect(fn, inputs, variables)


class _Plan:
    def __init__(self, compiled, feed_order, extra_inputs):
        self.compiled = compiled
        self.feed_order = feed_order
        self.extra_inputs = extra_inputs


def _prune(fetch_items, fed) -> list:
    needed, stack = set(), []
    for x in fetch_items:
        if isinstance(x, Operation):
            stack.append(x)
        elif x not in fed:
            stack.append(x.op)
    while stack:
        op = stack.pop()
        if op in needed:
            continue
        needed.add(op)
        stack.extend(t.op for t in op.inputs if t not in fed)
        stack.extend(op.control_inputs)
    return sorted(needed, key=lambda op: op._id)


# ---------------------------------------------------------------------------- Session
class Session:
    """A TF1 session: runs fetches of `graph` (the default graph) with feeds.

    Example:
        >>> import keratron.compat.v1 as tf
        >>> g = tf.Graph()
        >>> with g.as_default():
        ...     a = tf.placeholder(tf.float32)
        ...     b = a * 2.0
        >>> with tf.Session(graph=g) as sess:
        ...     print(sess.run(b, feed_dict={a: 3.0}))
        6.0
    """

    def __init__(self, target="", graph=None, config=None):
        self.graph = graph if graph is not None else get_default_graph()
        self._storage: dict = {}
        self._plans: dict = {}
        self._hosts: dict = {}
        self._iterators: dict = {}
        self._closed = False
        self._ctx_stack: list = []

    # ---- variables
    def create_storage(self, var) -> KVariable:
        with suspend_tracing():
            zeros = np.zeros(var.shape.as_list(), dtype=var.dtype.as_numpy_dtype)
            storage = KVariable(
                zeros,
                dtype=var.dtype.name,
                trainable=var.trainable,
                name=var.op.name.replace("/", "_"),
            )
        self._storage[var] = storage
        return storage

    def load_variable(self, var, value) -> None:
        storage = self._storage.get(var)
        if storage is None:
            storage = self.create_storage(var)
        storage.assign(np.asarray(value, dtype=var.dtype.as_numpy_dtype))

    # ---- run
    def run(self, fetches, feed_dict=None, options=None, run_metadata=None):
        """Computes `fetches` (a tensor, an operation, a variable, a name, or a list, tuple,
        namedtuple or dict of them), feeding `feed_dict`'s values for its keys.

        Raises:
            InvalidArgumentError: a placeholder the fetches need is not fed.
            FailedPreconditionError: an uninitialized variable is read.
            ValueError: a fed value's shape does not fit its tensor.
        """
        if self._closed:
            raise RuntimeError("Attempted to use a closed Session.")
        leaves: list = []
        spec = _flatten(fetches, leaves)
        items, makers = [], []
        for x in leaves:
            item = self._fetch_item(x)
            parts = item.op._attrs.get("summary_parts") if isinstance(item, Tensor) else None
            # A summary is fetched as the tensors it summarizes, serialized afterwards.
            makers.append((len(items), parts))
            items.extend([item] if parts is None else [t for _, _, t in parts])
        feeds = self._feeds(feed_dict or {})
        # Host steps (iterator initializers, get_next) run before the plan; get_next's
        # element becomes a feed.
        hosts_key = (tuple(items), tuple(feeds))
        hosts = self._hosts.get(hosts_key)
        if hosts is None:
            hosts = [op for op in _prune(items, feeds) if "host_fn" in op._attrs]
            self._hosts[hosts_key] = hosts
        for op in hosts:
            feeds.update(op._attrs["host_fn"](self))
        key = (
            tuple(items),
            tuple((t, v.shape, v.dtype.str) for t, v in feeds.items()),
            len(self._storage),
        )
        plan = self._plans.get(key)
        if plan is None:
            plan = self._plans[key] = self._build(items, feeds)
        inputs = [k_convert(feeds[t]) for t in plan.feed_order] + list(plan.extra_inputs)
        results = plan.compiled.run(inputs)
        values = []
        for item, r in zip(items, results):
            if isinstance(item, Operation):
                values.append(None)
            else:
                arr = r.numpy() if isinstance(r, KTensor) else np.asarray(r)
                values.append(arr[()] if arr.ndim == 0 else arr)
        if any(parts is not None for _, parts in makers):
            from keratron.compat.v1 import summary

            values = [
                values[i] if parts is None else summary.serialize(parts, values[i : i + len(parts)])
                for i, parts in makers
            ]
        return _rebuild(spec, values)

    def _fetch_item(self, x):
        if isinstance(x, str):
            x = self.graph.as_graph_element(x)
        conv = getattr(x, "_as_graph_tensor", None)
        if conv is not None:
            x = conv()
        if not isinstance(x, (Tensor, Operation)):
            raise TypeError(
                f"Fetch argument {x!r} has invalid type {type(x)}, must be a string or Tensor. "
                "(Can not convert a {type(x).__name__} into a Tensor or Operation.)"
            )
        if x.graph is not self.graph:
            raise ValueError(f"Fetch argument {x!r} is not an element of this graph.")
        return x

    def _feeds(self, feed_dict) -> dict:
        out = {}
        for k, v in feed_dict.items():
            t = self.graph.as_graph_element(k) if isinstance(k, str) else k
            conv = getattr(t, "_as_graph_tensor", None)
            if conv is not None:
                t = conv()
            if not isinstance(t, Tensor):
                raise TypeError(f"Cannot interpret feed_dict key as Tensor: {k!r}")
            if isinstance(v, (Tensor, KTensor)) and not isinstance(v, np.ndarray):
                raise TypeError(
                    "The value of a feed cannot be a tf.Tensor object. Acceptable feed values "
                    "include Python scalars, strings, lists, numpy ndarrays, or TensorHandles."
                )
            arr = np.asarray(v, dtype=t.dtype.as_numpy_dtype)
            if not t.shape.is_compatible_with(arr.shape):
                raise ValueError(
                    f"Cannot feed value of shape {arr.shape} for Tensor {t.name}, which has "
                    f"shape {t.shape}"
                )
            out[t] = arr
        return out

    def _build(self, items, feeds) -> _Plan:
        ops = _prune(items, feeds)
        trace = Trace()
        ctx = _Lowering(self, trace)
        feed_order = list(feeds)
        values = {t: trace.placeholder(feeds[t].shape, t.dtype.name) for t in feed_order}
        sources = {s for op in ops if op.type == "Gradients" for s in op._attrs["sources"]}
        extra = []
        with trace:
            for op in ops:
                if op.outputs and all(t in values for t in op.outputs):
                    continue
                outs = op._lower(ctx, *[values[t] for t in op.inputs])
                if not op.outputs:
                    continue
                outs = outs if isinstance(outs, tuple) else (outs,)
                for t, v in zip(op.outputs, outs):
                    if t in values:
                        continue
                    if t in sources and not trace.owns(v) and not isinstance(v, KVariable):
                        # A gradient source must be a value of the trace: a constant one
                        # becomes an input fed with its value.
                        extra.append(k_convert(v))
                        v = trace.placeholder(tuple(v.shape), v.dtype)
                    values[t] = v
        fetched = [None if isinstance(x, Operation) else values[x] for x in items]
        return _Plan(trace.compile(fetched), feed_order, extra)

    # ---- lifetime
    def close(self) -> None:
        self._closed = True
        self._storage.clear()
        self._plans.clear()
        self._hosts.clear()
        self._iterators.clear()

    @contextlib.contextmanager
    def as_default(self):
        _sessions.stack.append(self)
        try:
            yield self
        finally:
            _sessions.stack.remove(self)

    def __enter__(self):
        g = self.graph.as_default()
        d = self.as_default()
        g.__enter__()
        d.__enter__()
        self._ctx_stack.append((g, d))
        return self

    def __exit__(self, *exc):
        g, d = self._ctx_stack.pop()
        d.__exit__(*exc)
        g.__exit__(*exc)
        self.close()

    @property
    def sess_str(self) -> str:
        return ""

    def list_devices(self) -> list:
        return []


class InteractiveSession(Session):
    """A session that makes itself the default on creation (for shells and notebooks)."""

    def __init__(self, target="", graph=None, config=None):
        super().__init__(target, graph, config)
        _sessions.stack.append(self)

    def close(self) -> None:
        super().close()
        if self in _sessions.stack:
            _sessions.stack.remove(self)
