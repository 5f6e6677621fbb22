"""TF1's graph objects: `Graph`, `Operation`, symbolic `Tensor`, `TensorShape`, `DType`.

A TF1 graph here is a list of operations, each holding a *lowering*: a function from
keratron values of its inputs to keratron values of its outputs. Building the graph computes
nothing; a `Session.run` lowers the operations its fetches need into a
`keratron.autodiff.tracing.Trace` and compiles that (see `session.py`). Static shapes are
found by lowering one operation on data-free placeholders, once with each unknown dimension
standing for one size and once for another: a dimension that differs is unknown (None).
"""

from __future__ import annotations

import contextlib
import threading

import numpy as np

from keratron.autodiff.tracing import Trace

__all__ = [
    "DType",
    "Graph",
    "Operation",
    "Tensor",
    "TensorShape",
    "Dimension",
    "as_dtype",
    "convert_to_tensor",
    "get_default_graph",
    "reset_default_graph",
    "name_scope",
    "control_dependencies",
    "get_collection",
    "get_collection_ref",
    "add_to_collection",
    "add_to_collections",
    "GraphKeys",
    "make_op",
    "op_scope",
]


# ---------------------------------------------------------------------------- dtypes
class DType:
    """A TF dtype (`tf.float32`), comparable with its name and with numpy dtypes."""

    _ENUMS = {
        "float32": 1, "float64": 2, "int32": 3, "uint8": 4, "int16": 5, "int8": 6,
        "string": 7, "int64": 9, "bool": 10, "uint16": 17, "float16": 19, "bfloat16": 14,
        "complex64": 8, "complex128": 18,
    }  # fmt: skip

    def __init__(self, name: str):
        self.name = name

    @property
    def as_datatype_enum(self) -> int:
        return self._ENUMS[self.name]

    @property
    def as_numpy_dtype(self):
        return np.dtype(self.name).type if self.name != "bfloat16" else np.float32

    @property
    def base_dtype(self) -> DType:
        return self

    @property
    def is_floating(self) -> bool:
        return self.name in ("float16", "bfloat16", "float32", "float64")

    @property
    def is_integer(self) -> bool:
        return self.name.startswith(("int", "uint"))

    @property
    def is_bool(self) -> bool:
        return self.name == "bool"

    @property
    def is_complex(self) -> bool:
        return self.name.startswith("complex")

    @property
    def min(self):
        return np.finfo(self.name).min if self.is_floating else np.iinfo(self.name).min

    @property
    def max(self):
        return np.finfo(self.name).max if self.is_floating else np.iinfo(self.name).max

    def __eq__(self, other):
        try:
            return self.name == as_dtype(other).name
        except TypeError:
            return NotImplemented

    def __hash__(self):
        return hash(self.name)

    def __repr__(self):
        return f"tf.{self.name}"

    def __str__(self):
        return f"<dtype: '{self.name}'>"


_DTYPES = {n: DType(n) for n in DType._ENUMS}
_ENUM_TO_NAME = {v: k for k, v in DType._ENUMS.items()}


def as_dtype(x) -> DType:
    """The DType for a DType, a name, a numpy dtype or type, or TF's integer enum."""
    if isinstance(x, DType):
        return x
    if isinstance(x, int) and not isinstance(x, bool) and x in _ENUM_TO_NAME:
        return _DTYPES[_ENUM_TO_NAME[x]]
    if isinstance(x, str) and x in _DTYPES:
        return _DTYPES[x]
    if x is float:
        return _DTYPES["float32"]
    if x is int:
        return _DTYPES["int32"]
    if x is bool:
        return _DTYPES["bool"]
    try:
        name = np.dtype(x).name
    except TypeError as e:
        raise TypeError(f"Cannot convert {x!r} to a TensorFlow DType.") from e
    if name not in _DTYPES:
        raise TypeError(f"Cannot convert {x!r} to a TensorFlow DType.")
    return _DTYPES[name]


# ---------------------------------------------------------------------------- shapes
class Dimension(int):
    """Kept for code that wraps sizes in `tf.Dimension`; dimensions are ints or None."""

    def __new__(cls, value):
        return None if value is None else int.__new__(cls, int(value))


class TensorShape:
    """A static shape: a list of ints and Nones (unknown sizes), or unknown rank."""

    def __init__(self, dims):
        if isinstance(dims, TensorShape):
            dims = dims.dims
        if dims is None:
            self.dims = None
        elif isinstance(dims, (int, np.integer)):
            self.dims = [int(dims)]
        else:
            self.dims = [None if d is None else int(d) for d in dims]

    @property
    def ndims(self):
        return None if self.dims is None else len(self.dims)

    rank = ndims

    def as_list(self) -> list:
        if self.dims is None:
            raise ValueError("as_list() is not defined on an unknown TensorShape.")
        return list(self.dims)

    def is_fully_defined(self) -> bool:
        return self.dims is not None and all(d is not None for d in self.dims)

    def num_elements(self):
        return int(np.prod(self.dims)) if self.is_fully_defined() else None

    def is_compatible_with(self, other) -> bool:
        other = TensorShape(other)
        if self.dims is None or other.dims is None:
            return True
        if len(self.dims) != len(other.dims):
            return False
        return all(a is None or b is None or a == b for a, b in zip(self.dims, other.dims))

    def merge_with(self, other) -> TensorShape:
        other = TensorShape(other)
        if not self.is_compatible_with(other):
            raise ValueError(f"Shapes {self} and {other} are not compatible")
        if self.dims is None:
            return other
        if other.dims is None:
            return self
        return TensorShape([a if a is not None else b for a, b in zip(self.dims, other.dims)])

    def __len__(self):
        if self.dims is None:
            raise ValueError("Cannot take the length of shape with unknown rank.")
        return len(self.dims)

    def __iter__(self):
        return iter(self.as_list())

    def __getitem__(self, i):
        if self.dims is None:
            return None if not isinstance(i, slice) else TensorShape(None)
        r = self.dims[i]
        return TensorShape(r) if isinstance(i, slice) else r

    def __eq__(self, other):
        try:
            return self.dims == TensorShape(other).dims
        except (TypeError, ValueError):
            return NotImplemented

    def __hash__(self):
        return hash(None if self.dims is None else tuple(self.dims))

    def __str__(self):
        if self.dims is None:
            return "<unknown>"
        inner = ", ".join("?" if d is None else str(d) for d in self.dims)
        return f"({inner},)" if len(self.dims) == 1 else f"({inner})"

    def __repr__(self):
        return f"TensorShape({self.dims})"


# ---------------------------------------------------------------------------- tensors and ops
class Tensor:
    """A symbolic value of a `Graph`: output `value_index` of operation `op`."""

    def __init__(self, op, value_index: int, dtype: DType, shape: TensorShape):
        self.op = op
        self.value_index = value_index
        self.dtype = dtype
        self._shape = shape

    @property
    def name(self) -> str:
        return f"{self.op.name}:{self.value_index}"

    @property
    def graph(self) -> Graph:
        return self.op.graph

    @property
    def shape(self) -> TensorShape:
        return self._shape

    def get_shape(self) -> TensorShape:
        return self._shape

    def set_shape(self, shape) -> None:
        self._shape = self._shape.merge_with(shape)

    @property
    def consumers(self):
        return [op for op in self.graph.get_operations() if self in op.inputs]

    def eval(self, feed_dict=None, session=None):
        """This tensor's value in `session` (the default session if None)."""
        from keratron.compat.v1 import session as session_lib

        return session_lib.run_in(session, self, feed_dict)

    def __repr__(self):
        return f"<tf.Tensor '{self.name}' shape={self._shape} dtype={self.dtype.name}>"

    def __str__(self):
        return f'Tensor("{self.name}", shape={self._shape}, dtype={self.dtype.name})'

    def __hash__(self):
        return id(self)

    def __bool__(self):
        raise TypeError(
            "Using a `tf.Tensor` as a Python `bool` is not allowed. Use `if t is not None:` "
            "instead of `if t:` to test if a tensor is defined, and use TensorFlow ops such "
            "as tf.cond to execute subgraphs conditioned on the value of a tensor."
        )

    def __iter__(self):
        dims = self._shape.dims
        if dims is None or dims[0] is None:
            raise TypeError("Cannot iterate over a tensor with unknown first dimension.")
        from keratron.compat.v1 import array_ops

        return iter(array_ops.unstack(self, num=dims[0]))

    def __len__(self):
        raise TypeError(
            f"len is not well defined for symbolic Tensors ({self.name}). Please call "
            "`x.shape` rather than `len(x)` for shape information."
        )


_TENSOR_OPERATORS = {}  # filled by math_ops: dunder name -> function(self, other)


def _install_operator(name):
    def method(self, *args):
        return _TENSOR_OPERATORS[name](self, *args)

    method.__name__ = name
    setattr(Tensor, name, method)


for _n in (
    "__add__ __radd__ __sub__ __rsub__ __mul__ __rmul__ __truediv__ __rtruediv__ "
    "__floordiv__ __rfloordiv__ __mod__ __rmod__ __pow__ __rpow__ __matmul__ __rmatmul__ "
    "__neg__ __abs__ __lt__ __le__ __gt__ __ge__ __and__ __or__ __xor__ __invert__ "
    "__getitem__"
).split():
    _install_operator(_n)


class Operation:
    """A node of a `Graph`: a TF op type and name, inputs, outputs and a lowering."""

    def __init__(self, graph, op_type, name, inputs, lower, control_inputs, attrs):
        self.graph = graph
        self.type = op_type
        self.name = name
        self.inputs = list(inputs)
        self.control_inputs = list(control_inputs)
        self.outputs: list[Tensor] = []
        self._lower = lower
        self._attrs = dict(attrs or {})
        self._id = len(graph._ops)

    def get_attr(self, name):
        return self._attrs[name]

    @property
    def node_def(self):
        return {"name": self.name, "op": self.type, "input": [t.name for t in self.inputs]}

    def run(self, feed_dict=None, session=None) -> None:
        """Runs this operation in `session` (the default session if None)."""
        from keratron.compat.v1 import session as session_lib

        session_lib.run_in(session, self, feed_dict)

    def __repr__(self):
        return f"<tf.Operation '{self.name}' type={self.type}>"


# ---------------------------------------------------------------------------- graph
class GraphKeys:
    GLOBAL_VARIABLES = "variables"
    VARIABLES = "variables"
    LOCAL_VARIABLES = "local_variables"
    MODEL_VARIABLES = "model_variables"
    TRAINABLE_VARIABLES = "trainable_variables"
    SUMMARIES = "summaries"
    QUEUE_RUNNERS = "queue_runners"
    TABLE_INITIALIZERS = "table_initializer"
    MOVING_AVERAGE_VARIABLES = "moving_average_variables"
    REGULARIZATION_LOSSES = "regularization_losses"
    LOSSES = "losses"
    UPDATE_OPS = "update_ops"
    GLOBAL_STEP = "global_step"
    TRAIN_OP = "train_op"
    INIT_OP = "init_op"
    SAVERS = "savers"
    ACTIVATIONS = "activations"
    WEIGHTS = "weights"
    BIASES = "biases"


class Graph:
    """A TF1 dataflow graph: operations in creation order, names, scopes and collections.

    Example:
        >>> import keratron.compat.v1 as tf
        >>> g = tf.Graph()
        >>> with g.as_default():
        ...     c = tf.constant(30.0)
        >>> c.graph is g, tf.get_default_graph() is g
        (True, False)
    """

    def __init__(self):
        self._ops: list[Operation] = []
        self._by_name: dict[str, Operation] = {}
        self._names_in_use: dict[str, int] = {}
        self._name_stack = ""
        self._control_stack: list[list] = []
        self._collections: dict[str, list] = {}
        self._finalized = False
        self.seed = None
        self._var_store = None  # the get_variable store (variables.py)
        self._var_scope_stack: list = []  # variable_scope state (variables.py)
        self._uid = 0  # a source of op-level seeds

    # ---- naming
    def unique_name(self, name: str, mark_as_used: bool = True) -> str:
        if self._name_stack:
            name = self._name_stack + "/" + name
        key = name.lower()
        i = self._names_in_use.get(key, 0)
        if mark_as_used:
            self._names_in_use[key] = i + 1
        if i > 0:
            base = key
            while key in self._names_in_use:
                key = f"{base}_{i}"
                i += 1
            if mark_as_used:
                self._names_in_use[key] = 1
            name = f"{name}_{i - 1}"
        return name

    def get_name_scope(self) -> str:
        return self._name_stack

    @contextlib.contextmanager
    def name_scope(self, name):
        """Pushes a name scope; yields the scope string ("outer/inner/")."""
        old = self._name_stack
        if name is None or name == "":
            new = ""
        elif name.endswith("/"):
            new = name[:-1]
        else:
            new = self.unique_name(name)
        self._name_stack = new
        try:
            yield (new + "/") if new else ""
        finally:
            self._name_stack = old

    # ---- control dependencies
    @contextlib.contextmanager
    def control_dependencies(self, control_inputs):
        if control_inputs is None:
            saved, self._control_stack = self._control_stack, []
            try:
                yield
            finally:
                self._control_stack = saved
            return
        ops = []
        for c in control_inputs:
            c = _as_op(c)
            if c is not None:
                ops.append(c)
        self._control_stack.append(ops)
        try:
            yield
        finally:
            self._control_stack.pop()

    # ---- ops
    def _add_op(self, op_type, name, inputs, lower, out_specs, attrs=None) -> Operation:
        if self._finalized:
            raise RuntimeError("Graph is finalized and cannot be modified.")
        controls = []
        for layer in self._control_stack:
            for c in layer:
                if c not in controls:
                    controls.append(c)
        op = Operation(self, op_type, name, inputs, lower, controls, attrs)
        op.outputs = [Tensor(op, i, dt, sh) for i, (sh, dt) in enumerate(out_specs)]
        self._ops.append(op)
        self._by_name[name] = op
        return op

    def get_operations(self) -> list:
        return list(self._ops)

    def get_operation_by_name(self, name: str) -> Operation:
        try:
            return self._by_name[name]
        except KeyError:
            raise KeyError(f"The name '{name}' refers to an Operation not in the graph.") from None

    def get_tensor_by_name(self, name: str) -> Tensor:
        if ":" not in name:
            raise ValueError(
                f"The name '{name}' looks like an (invalid) Operation name, not a Tensor. "
                'Tensor names must be of the form "<op_name>:<output_index>".'
            )
        op_name, index = name.rsplit(":", 1)
        op = self._by_name.get(op_name)
        if op is None or int(index) >= len(op.outputs):
            raise KeyError(f"The name '{name}' refers to a Tensor which does not exist.")
        return op.outputs[int(index)]

    def as_graph_element(self, obj):
        if isinstance(obj, str):
            return self.get_tensor_by_name(obj) if ":" in obj else self.get_operation_by_name(obj)
        return obj

    def finalize(self) -> None:
        self._finalized = True

    @property
    def finalized(self) -> bool:
        return self._finalized

    # ---- collections
    def add_to_collection(self, name, value) -> None:
        self._collections.setdefault(name, []).append(value)

    def add_to_collections(self, names, value) -> None:
        for n in [names] if isinstance(names, str) else set(names):
            self.add_to_collection(n, value)

    def get_collection_ref(self, name) -> list:
        return self._collections.setdefault(name, [])

    def get_collection(self, name, scope=None) -> list:
        items = list(self._collections.get(name, []))
        if scope is None:
            return items
        import re

        out = []
        for item in items:
            n = getattr(item, "name", None)
            if n is not None and re.match(scope, n):
                out.append(item)
        return out

    def get_all_collection_keys(self) -> list:
        return list(self._collections)

    def clear_collection(self, name) -> None:
        self._collections.pop(name, None)

    # ---- default-graph stack
    @contextlib.contextmanager
    def as_default(self):
        _state.graphs.append(self)
        try:
            yield self
        finally:
            _state.graphs.pop()

    @property
    def version(self) -> int:
        return len(self._ops)

    def _next_uid(self) -> int:
        self._uid += 1
        return self._uid


def _as_op(x):
    if x is None:
        return None
    if isinstance(x, Operation):
        return x
    if isinstance(x, Tensor):
        return x.op
    op = getattr(x, "op", None)  # a Variable
    if isinstance(op, Operation):
        return op
    raise TypeError(f"Can not convert a {type(x).__name__} into an Operation: {x!r}")


class _State(threading.local):
    def __init__(self):
        self.graphs: list[Graph] = []


_state = _State()
_global_default: list[Graph] = [Graph()]


def get_default_graph() -> Graph:
    """The graph that new operations go into (`with g.as_default():` changes it)."""
    return _state.graphs[-1] if _state.graphs else _global_default[0]


def reset_default_graph() -> None:
    """Clears the global default graph (not allowed inside a `with g.as_default()` block)."""
    if _state.graphs:
        raise AssertionError(
            "Do not use tf.reset_default_graph() to clear nested graphs. If you need a "
            "cleared graph, exit the nesting and create a new graph."
        )
    _global_default[0] = Graph()
    from keratron.compat.v1 import session as session_lib

    session_lib.clear_default_session()


def name_scope(name, default_name=None, values=None):
    """`tf.name_scope(name)`: prefixes the names of ops created in the block."""
    del values
    return get_default_graph().name_scope(name if name is not None else default_name)


def control_dependencies(control_inputs):
    return get_default_graph().control_dependencies(control_inputs)


def get_collection(key, scope=None):
    return get_default_graph().get_collection(key, scope)


def get_collection_ref(key):
    return get_default_graph().get_collection_ref(key)


def add_to_collection(name, value):
    get_default_graph().add_to_collection(name, value)


def add_to_collections(names, value):
    get_default_graph().add_to_collections(names, value)


# ---------------------------------------------------------------------------- op creation
@contextlib.contextmanager
def op_scope(name, default_name):
    """The scope TF's generated ops open: inputs converted in it are named "<op>/y"; the op
    takes the scope's own name (`yield`s it)."""
    g = get_default_graph()
    with g.name_scope(name if name else default_name) as scope:
        yield scope[:-1]


_PROBE_SIZES = (7, 11)  # stand-ins for unknown dimensions (see the module docstring)


def _probe(lower, inputs, size, unknown_rank_shape):
    trace = Trace()
    args = []
    for t in inputs:
        dims = t.shape.dims
        shape = (
            unknown_rank_shape if dims is None else tuple(size if d is None else d for d in dims)
        )
        args.append(trace.placeholder(shape, t.dtype.name))
    with trace:
        out = lower(None, *args)
    out = out if isinstance(out, tuple) else (out,)
    return [(tuple(o.shape), o.dtype) for o in out]


def _infer(lower, inputs, n_out):
    """Static (shape, dtype) of each output of `lower` applied to `inputs`, or None.

    Unknown dimensions are probed with two sizes (a dimension of the result that follows them
    is unknown); an input of unknown rank is probed as a scalar and as a 1-element vector (a
    result whose rank follows it has unknown rank)."""
    try:
        runs = [_probe(lower, inputs, size, ()) for size in _PROBE_SIZES]
        if any(t.shape.dims is None for t in inputs):
            runs.append(_probe(lower, inputs, _PROBE_SIZES[0], (1,)))
    except Exception:
        return None
    if any(len(r) != n_out for r in runs):
        return None
    specs = []
    for outs in zip(*runs):
        dt = as_dtype(str(outs[0][1]).replace("torch.", ""))
        shapes = [s for s, _ in outs]
        if len({len(s) for s in shapes}) > 1:
            specs.append((TensorShape(None), dt))
            continue
        dims = [d if all(s[i] == d for s in shapes) else None for i, d in enumerate(shapes[0])]
        specs.append((TensorShape(dims), dt))
    return specs


def make_op(op_type, name, inputs, lower, out_specs=None, n_out=1, dtype=None, attrs=None):
    """Adds an operation to the default graph and returns it.

    Args:
        op_type: TF's op type ("MatMul").
        name: the op's full, already unique name (from `op_scope`).
        inputs: symbolic Tensors of this graph; their keratron values are `lower`'s inputs.
        lower: `lower(ctx, *values) -> value or tuple of values`; `ctx` is the session's
            lowering context (None while static shapes are inferred).
        out_specs: [(shape, dtype)] of the outputs; inferred from `lower` when None (then
            `dtype` is used if the inference fails).
    """
    g = get_default_graph()
    for t in inputs:
        if t.graph is not g:
            raise ValueError(f"Tensor {t.name} must be from the same graph as the new op {name}.")
    if out_specs is None:
        out_specs = _infer(lower, inputs, n_out)
        if out_specs is None:
            dt = as_dtype(dtype) if dtype is not None else inputs[0].dtype
            out_specs = [(TensorShape(None), dt)] * n_out
    out_specs = [(TensorShape(s), as_dtype(d)) for s, d in out_specs]
    return g._add_op(op_type, name, inputs, lower, out_specs, attrs)


def convert_to_tensor(value, dtype=None, name=None, preferred_dtype=None):
    """A symbolic Tensor for `value`: Tensors and Variables as they are, anything else as
    a `Const` op (Python floats become float32, ints int32, as in TF)."""
    if isinstance(value, Tensor):
        if dtype is not None and as_dtype(dtype) != value.dtype:
            raise ValueError(
                f"Tensor conversion requested dtype {as_dtype(dtype).name} for Tensor with "
                f"dtype {value.dtype.name}: {value!r}"
            )
        return value
    conv = getattr(value, "_as_graph_tensor", None)  # Variables
    if conv is not None:
        return conv(dtype)
    from keratron.compat.v1 import array_ops

    return array_ops.constant(
        value, dtype=dtype if dtype is not None else preferred_dtype, name=name or "Const"
    )
