"""`keratron.function`: trace a Python function into a graph, optimise it, replay it.

Tracing runs the Python body once per input signature with `Tracer` tensors (data-free
tensors on torch's "meta" device), through the public tracing API of
`keratron.autodiff.tracing` (`Trace`: record, differentiate, compile). A `GradientTape` inside
the function records the traced ops as it does eager ones, and its `gradient` call adds the
VJP nodes to the same graph. The compiled plan replays without touching a tape.

Thread safety: one function (and so a model's `predict`, `evaluate` and `__call__`) may be
called from several threads at once, on any mix of input shapes. Each thread traces into its
own graph; a function traces one signature at a time (a thread that needs a signature another
thread is tracing waits for it), and only the variables the tracing thread creates count as
created by the trace. Calls that write the same variables are not ordered against each other:
running `fit` (or any training step) on one model from several threads at once is not
supported, nor is `fit` in one thread while another predicts with the same model.
"""

from __future__ import annotations

import functools
import inspect
import threading
import warnings
import weakref
from collections import Counter

import numpy as np

from keratron import config
from keratron.autodiff import tree
from keratron.autodiff.dtypes import standardize_dtype
from keratron.autodiff.tape import active_tapes
from keratron.autodiff.tensor import (
    Tensor,
    Variable,
    collect_created_variables,
    convert_to_tensor,
)
from keratron.autodiff.tracing import Graph, Node, Trace, Tracer, is_tracing, record_effect

# Graph, Node and Tracer live in `tracing`; they are re-exported here for older imports.
__all__ = [
    "function",
    "Function",
    "Graph",
    "Node",
    "Tracer",
    "is_tracing",
    "record_effect",
]


# ---------------------------------------------------------------------------- signatures
def _leaf_key(x):
    # A plain Tensor (a batch's, every step's call) skips the Variable check.
    if type(x) is not Tensor and isinstance(x, Variable):
        return ("V", id(x))
    if isinstance(x, Tensor):
        v = x._value
        return ("T", tuple(v.shape), v.dtype, v.device)
    if isinstance(x, np.ndarray):
        return ("T", x.shape, x.dtype.str, None)
    if isinstance(x, (int, float, bool, str, type(None), np.generic)):
        return ("P", type(x).__name__, x)
    return ("O", id(x))


def _structure_key(x):
    t = type(x)
    if t is Tensor or x is None:  # the leaves of every step's call
        return None
    if isinstance(x, dict):
        return ("d", tuple((k, _structure_key(x[k])) for k in sorted(x, key=str)))
    if isinstance(x, (list, tuple)):
        return ("l" if isinstance(x, list) else "t", tuple([_structure_key(v) for v in x]))
    return None


def _cache_key(args, kwargs, leaves):
    # The kernel backend is part of the key: the lowering decides by it how convolution
    # kernels are stored (see passes._relayout_conv_kernels).
    return (
        config.kernel_backend(),
        _structure_key([list(args), kwargs]),
        tuple(_leaf_key(x) for x in leaves),
    )


class Function:
    """A traced-and-compiled callable; see `function`."""

    def __init__(
        self, fn, input_signature=None, reduce_retracing=False, jit_compile=None, cuda_graphs=False
    ):
        name = getattr(fn, "__name__", type(fn).__name__)
        if reduce_retracing:
            raise ValueError(
                f"keratron.function {name!r}: reduce_retracing=True is not supported; a "
                "keratron.function traces one graph per concrete input shape. Give an "
                "input_signature to have calls checked, or pass inputs of fixed shape. "
                f"Received: reduce_retracing={reduce_retracing!r}"
            )
        if jit_compile:
            raise ValueError(
                f"keratron.function {name!r}: jit_compile=True (XLA) is not supported; every "
                "keratron.function is already compiled (optimised, fused and planned), so "
                f"leave jit_compile unset. Received: jit_compile={jit_compile!r}"
            )
        self._fn = fn
        self.cuda_graphs = bool(cuda_graphs)
        self._graph_warnings: set = set()  # causes already warned about (cuda_graphs)
        self.input_signature = _check_input_signature(input_signature, name)
        self._cache: dict = {}
        self.trace_count = 0
        self._leaf_history: list[list] = []
        self._warned = False
        # One trace at a time per function: a second thread asking for a signature being
        # traced waits for it instead of tracing it again (and layers build only once).
        self._trace_lock = threading.RLock()
        # Bound copies per instance (see __get__): id(obj) -> (weak reference, Function).
        self._bound: dict = {}
        functools.update_wrapper(self, fn)

    def __get__(self, obj, objtype=None):
        if obj is None:
            return self
        entry = self._bound.get(id(obj))
        if entry is not None and entry[0]() is obj:
            return entry[1]
        # Keyed by identity and held weakly: the bound copy (and its traces) lives as long as
        # the instance and no longer. A WeakKeyDictionary would compare instances with their
        # own __eq__ and fail on unhashable ones.
        try:
            key = id(obj)
            ref = weakref.ref(obj, lambda _, key=key, bound=self._bound: bound.pop(key, None))
            method = _WeakMethod(self._fn, ref)
        except TypeError:  # no weak references to obj (__slots__ without __weakref__)
            ref = _StrongRef(obj)
            method = self._fn.__get__(obj, objtype)
        f = Function(method, self.input_signature, cuda_graphs=self.cuda_graphs)
        return self._bound.setdefault(id(obj), (ref, f))[1]

    def __call__(self, *args, **kwargs):
        if self.input_signature is not None:
            args, kwargs = self._conform(args, kwargs)
        if is_tracing():
            return self._fn(*args, **kwargs)  # nested: inline into the outer trace
        leaves = tree.flatten([list(args), kwargs])
        if active_tapes() and any(isinstance(x, Tensor) for x in leaves):
            # An enclosing eager tape must see the ops: run the Python body eagerly.
            return self._fn(*args, **kwargs)
        key = _cache_key(args, kwargs, leaves)
        compiled = self._cache.get(key)
        if compiled is None:
            compiled = self._compiled_for(key, args, kwargs, leaves)
        return compiled.run(leaves)

    def _conform(self, args, kwargs):
        """Checks a call against `input_signature` (as tf.function does) and converts its
        Python values to tensors of the specified dtypes."""
        name = getattr(self._fn, "__name__", "")
        specs = self.input_signature
        if kwargs:
            names = _parameter_names(self._fn)
            extra = [k for k in kwargs if k not in names[len(args) : len(specs)]]
            if extra:
                raise TypeError(
                    f"keratron.function {name!r} has an input_signature of {len(specs)} "
                    f"inputs; it got unexpected keyword arguments {extra}."
                )
            args = tuple(args) + tuple(
                kwargs[n] for n in names[len(args) : len(specs)] if n in kwargs
            )
            kwargs = {}
        if len(args) != len(specs):
            raise TypeError(
                f"keratron.function {name!r} has an input_signature of {len(specs)} inputs. "
                f"Received: {len(args)} arguments."
            )
        out = tuple(
            _conform_value(v, spec, name, i) for i, (v, spec) in enumerate(zip(args, specs))
        )
        return out, kwargs

    def _compiled_for(self, key, args, kwargs, leaves):
        with self._trace_lock:
            compiled = self._cache.get(key)  # another thread may have traced it meanwhile
            if compiled is None:
                compiled = self._cache[key] = self._trace(args, kwargs, leaves)
        return compiled

    def _trace(self, args, kwargs, leaves):
        self.trace_count += 1
        self._note_retrace(args, kwargs)
        trace = Trace()
        traced_leaves = []
        for x in leaves:
            if isinstance(x, Tensor) and not isinstance(x, Variable):
                traced_leaves.append(trace.placeholder(x._value.shape, x._value.dtype))
            elif isinstance(x, np.ndarray):
                t = convert_to_tensor(x)
                traced_leaves.append(trace.placeholder(t._value.shape, t._value.dtype))
            else:
                traced_leaves.append(x)
        t_args, t_kwargs = tree.pack_sequence_as([list(args), kwargs], traced_leaves)
        # Only this thread's creations count: other threads make variables of their own.
        with collect_created_variables() as created, trace:
            out = self._fn(*t_args, **t_kwargs)
        if self.trace_count > 1 and created:
            raise ValueError(
                f"keratron.function {getattr(self._fn, '__name__', '')!r} created variables on a "
                "call after its first trace. Variables may be created only while the function "
                "is traced for the first time (e.g. layers building in the first step)."
            )
        compiled = trace.compile(out, [isinstance(x, np.ndarray) for x in leaves])
        if self.cuda_graphs:
            from keratron.autodiff import cuda_graphs

            # The step runs where its tensor arguments are (else where its variables are).
            device = next(
                (
                    x._value.device
                    for x in leaves
                    if isinstance(x, Tensor) and not isinstance(x, Variable)
                ),
                None,
            )
            name = getattr(self._fn, "__name__", "")
            cuda_graphs.attach(compiled, name, self._graph_warnings, device)
        return compiled

    def _note_retrace(self, args, kwargs):
        names = _argument_names(self._fn, args, kwargs)
        keys = [
            _leaf_key(x) if not isinstance(x, (list, tuple, dict)) else _structure_key(x)
            for x in list(args) + list(kwargs.values())
        ]
        self._leaf_history.append(keys)
        if self.trace_count > 5 and not self._warned:
            changing = Counter()
            for prev, cur in zip(self._leaf_history, self._leaf_history[1:]):
                for i, (a, b) in enumerate(zip(prev, cur)):
                    if a != b:
                        changing[i] += 1
            if changing:
                i = changing.most_common(1)[0][0]
                name = names[i] if i < len(names) else f"argument {i}"
                warnings.warn(
                    f"keratron.function {getattr(self._fn, '__name__', '')!r} was traced "
                    f"{self.trace_count} times; argument {name!r} keeps changing (new shapes, "
                    "dtypes or Python values each call). Pass tensors of fixed shape, or "
                    "Python values that do not change.",
                    stacklevel=3,
                )
                self._warned = True

    def get_concrete_graph(self, *args, **kwargs):
        """The optimised plan for these arguments (traced if needed), for inspection."""
        if self.input_signature is not None:
            args, kwargs = self._conform(args, kwargs)
        leaves = tree.flatten([list(args), kwargs])
        key = _cache_key(args, kwargs, leaves)
        compiled = self._cache.get(key)
        return compiled if compiled is not None else self._compiled_for(key, args, kwargs, leaves)


class _WeakMethod:
    """`func` bound to an instance held by a weak reference (a bound method would keep it
    alive through the Function cached for it)."""

    def __init__(self, func, ref):
        self._func = func
        self._ref = ref
        functools.update_wrapper(self, func)
        try:
            sig = inspect.signature(func)
            self.__signature__ = sig.replace(parameters=list(sig.parameters.values())[1:])
        except (TypeError, ValueError):
            pass

    def __call__(self, *args, **kwargs):
        obj = self._ref()
        if obj is None:
            raise ReferenceError(
                f"keratron.function {self._func.__name__!r}: the instance it is bound to was "
                "deleted."
            )
        return self._func(obj, *args, **kwargs)


class _StrongRef:
    """Stands for a weak reference to an object that cannot be weakly referenced."""

    def __init__(self, obj):
        self._obj = obj

    def __call__(self):
        return self._obj


# ---------------------------------------------------------------------------- input_signature
def _is_spec(x) -> bool:
    return hasattr(x, "shape") and hasattr(x, "dtype") and not isinstance(x, (Tensor, np.ndarray))


def _check_input_signature(signature, name):
    if signature is None:
        return None
    if not isinstance(signature, (list, tuple)):
        raise TypeError(
            f"keratron.function {name!r}: input_signature must be a list or tuple of specs "
            f"(objects with `shape` and `dtype`, such as TensorSpec). Received: {signature!r}"
        )
    for spec in tree.flatten(list(signature)):
        if not _is_spec(spec):
            raise TypeError(
                f"keratron.function {name!r}: every input_signature entry needs a `shape` and a "
                f"`dtype` (a TensorSpec). Received: {spec!r}"
            )
    return tuple(signature)


def _conform_value(value, spec, name, i):
    """`value` checked against `spec` (a spec, or a list/tuple/dict of them) and converted."""
    if _is_spec(spec):
        return _conform_leaf(value, spec, name, i)
    same = (
        isinstance(spec, dict)
        and isinstance(value, dict)
        and sorted(spec, key=str) == sorted(value, key=str)
    ) or (
        isinstance(spec, (list, tuple))
        and isinstance(value, (list, tuple))
        and len(spec) == len(value)
    )
    if not same:
        raise ValueError(
            f"keratron.function {name!r}: argument {i} does not have the structure of its "
            f"input_signature. Expected: {spec!r}. Received: {value!r}"
        )
    if isinstance(spec, dict):
        return {k: _conform_value(value[k], spec[k], name, i) for k in value}
    return type(value)(_conform_value(v, sp, name, i) for v, sp in zip(value, spec))


def _conform_leaf(x, spec, name, i):
    want_dtype = None if spec.dtype is None else standardize_dtype(spec.dtype)
    if not isinstance(x, (Tensor, np.ndarray)):
        x = convert_to_tensor(x, dtype=want_dtype)
    shape = tuple(x.shape)
    dtype = standardize_dtype(x.dtype)
    want_shape = None if spec.shape is None else tuple(spec.shape)
    shape_ok = want_shape is None or (
        len(want_shape) == len(shape)
        and all(w is None or int(w) == d for w, d in zip(want_shape, shape))
    )
    if not shape_ok or (want_dtype is not None and dtype != want_dtype):
        raise ValueError(
            f"keratron.function {name!r}: argument {i} does not match its input_signature. "
            f"Expected: shape={want_shape}, dtype={want_dtype}. "
            f"Received: shape={shape}, dtype={dtype}"
        )
    return x


def _parameter_names(fn) -> list:
    try:
        return list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return []


def _argument_names(fn, args, kwargs):
    return _parameter_names(fn)[: len(args)] + list(kwargs)


def function(
    fn=None, input_signature=None, reduce_retracing=False, jit_compile=None, cuda_graphs=False
):
    """Compiles `fn` by tracing it per input signature, like `tf.function`.

    The Python body runs once per signature (tensor shapes/dtypes and Python values);
    later calls replay the optimised graph. Variables are captured by reference, so
    `assign*` inside the function takes effect on every call.

    Args:
        fn: the function (or method) to compile.
        input_signature: optional list of specs (objects with `shape` and `dtype`, such as
            `TensorSpec`; a None dimension matches any size), one per positional input, as in
            `tf.function`: each call is checked against it (a `ValueError` names the argument
            on a mismatch) and its Python values become tensors of the spec's dtype. A graph
            is still traced per concrete shape.
        reduce_retracing: only False is supported (a `ValueError` says so otherwise).
        jit_compile: only None or False: there is no XLA, and every keratron.function is
            compiled already (a `ValueError` says so otherwise).
        cuda_graphs: on CUDA, capture each signature's plan as one CUDA graph after a
            warm-up call and replay it (see `keratron.autodiff.cuda_graphs`; the steps of
            `fit`, `evaluate` and `predict` ask for it). Capture also needs
            `keratron.config.cuda_graphs()`; a plan that cannot be captured runs uncaptured
            with one warning. Outputs are fresh tensors; inputs are copied into the graph's
            static buffers. No effect on CPU.

    Example:
        >>> @keratron.function
        ... def step(x):
        ...     return keratron.ops.tanh(x) * 2.0
        >>> step(keratron.ops.ones((2,))).shape
        (2,)
    """
    if fn is None:
        return functools.partial(
            function,
            input_signature=input_signature,
            reduce_retracing=reduce_retracing,
            jit_compile=jit_compile,
            cuda_graphs=cuda_graphs,
        )
    return Function(fn, input_signature, reduce_retracing, jit_compile, cuda_graphs)
