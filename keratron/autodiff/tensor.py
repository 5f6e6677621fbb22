"""`Tensor` and `Variable`: a torch.Tensor plus what autodiff needs.

A Tensor is immutable from the user's side (like tf.Tensor); a Variable is mutable through
`assign*` and is what layers own. Neither ever has `requires_grad` set: gradients come from
`GradientTape`, not torch.autograd.
"""

from __future__ import annotations

import contextlib
import itertools
import threading

import numpy as np
import torch

from keratron import config
from keratron.autodiff.dtypes import standardize_dtype, to_torch_dtype


class Tensor:
    """An immutable n-dimensional array on CPU or CUDA.

    Example:
        >>> x = keratron.convert_to_tensor([[1.0, 2.0]])
        >>> (x * 2).numpy()
        array([[2., 4.]], dtype=float32)
    """

    __slots__ = ("_value", "_keras_mask", "__weakref__")
    __array_priority__ = 100  # numpy defers `ndarray op Tensor` to us

    def __init__(self, value: torch.Tensor):
        self._value = value

    # ------------------------------------------------------------------ properties
    @property
    def value(self) -> torch.Tensor:
        return self._value

    @property
    def shape(self) -> tuple:
        return tuple(self._value.shape)

    @property
    def dtype(self) -> str:
        return standardize_dtype(self._value.dtype)

    @property
    def ndim(self) -> int:
        return self._value.dim()

    @property
    def device(self) -> str:
        return str(self._value.device)

    @property
    def size(self) -> int:
        return self._value.numel()

    def numpy(self) -> np.ndarray:
        check_concrete(self, "numpy()")
        v = self._value
        if v.dtype is torch.bfloat16:
            v = v.float()
        return v.detach().cpu().numpy()

    def __array__(self, dtype=None, copy=None):
        a = self.numpy()
        return a.astype(dtype) if dtype is not None else a

    def torch(self) -> torch.Tensor:
        """The underlying torch.Tensor (shares memory)."""
        return self._value

    def __len__(self):
        if self._value.dim() == 0:
            raise TypeError("len() of a 0-d tensor")
        return self._value.shape[0]

    def __iter__(self):
        if self._value.dim() == 0:
            raise TypeError("Iteration over a 0-d tensor")
        for i in range(self._value.shape[0]):
            yield self[i]

    def __bool__(self):
        check_concrete(self, "a Python bool (`if`, `while`, `and`, `or`)")
        if self._value.numel() != 1:
            raise ValueError(
                "The truth value of a tensor with more than one element is ambiguous. "
                f"Received a tensor of shape {self.shape}."
            )
        return bool(self._value)

    def __float__(self):
        check_concrete(self, "a Python float")
        return float(self._value)

    def __int__(self):
        check_concrete(self, "a Python int")
        return int(self._value)

    def __index__(self):
        check_concrete(self, "a Python index")
        return int(self._value)

    def __hash__(self):
        return id(self)

    def __repr__(self):
        return f"<Tensor shape={self.shape}, dtype={self.dtype}, numpy=\n{self.numpy()!r}>"

    def __format__(self, spec):
        # As TensorFlow's eager tensors: the values, formatted as numpy formats them
        # (`f"{t}"` -> "[1 2]", `f"{loss:.4f}"` -> "0.6931").
        if self._value.is_meta:
            return repr(self)
        if self._value.numel() == 1 and spec:
            return format(self._value.item(), spec)
        return format(self.numpy(), spec)

    def __reduce__(self):
        return (_rebuild_tensor, (self.numpy(),))

    # ------------------------------------------------------------------ operators
    # The operators call `keratron.ops` through the table that `ops` installs (see
    # `install_operators`): this module sits below `ops` and never imports it.
    def __getitem__(self, key):
        return _op("get_item")(self, key)

    def __neg__(self):
        return _op("negative")(self)

    def __pos__(self):
        return self

    def __abs__(self):
        return _op("abs")(self)

    def __invert__(self):
        if self.dtype == "bool":
            return _op("logical_not")(self)
        return _op("bitwise_invert")(self)

    def astype(self, dtype):
        return _op("cast")(self, dtype)

    @property
    def T(self):
        return _op("transpose")(self)

    def reshape(self, *shape):
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = shape[0]
        return _op("reshape")(self, shape)


_BINARY_OPERATORS = [
    ("add", "add"),
    ("sub", "subtract"),
    ("mul", "multiply"),
    ("truediv", "divide"),
    ("floordiv", "floor_divide"),
    ("mod", "mod"),
    ("pow", "power"),
    ("matmul", "matmul"),
    ("and", "logical_and"),
    ("or", "logical_or"),
    ("xor", "logical_xor"),
]
_COMPARISONS = [
    ("lt", "less"),
    ("le", "less_equal"),
    ("gt", "greater"),
    ("ge", "greater_equal"),
    ("eq", "equal"),
    ("ne", "not_equal"),
]
# Every op the Tensor methods above and `convert_to_tensor` call.
OPERATOR_OPS = frozenset(
    ["get_item", "negative", "abs", "logical_not", "bitwise_invert", "cast", "transpose"]
    + ["reshape", "stack"]
    + [op for _, op in _BINARY_OPERATORS + _COMPARISONS]
)
_operators: dict = {}


def install_operators(table) -> None:
    """Installs the ops behind `Tensor`'s operators (`x + y`, `x[i]`, `x.T`, ...).

    `keratron.ops` calls this once, at the end of its import, with its namespace; importing
    `keratron` imports `ops`, so the operators work wherever a Tensor can be made.

    Args:
        table: a mapping from op name to function that holds every name in `OPERATOR_OPS`.

    Raises:
        ValueError: if `table` lacks one of them.
    """
    missing = sorted(OPERATOR_OPS.difference(table))
    if missing:
        raise ValueError(f"install_operators: the table lacks the ops {missing}.")
    _operators.update({name: table[name] for name in OPERATOR_OPS})


def _op(name):
    fn = _operators.get(name)
    if fn is None:
        raise RuntimeError(
            f"Tensor operators are not installed yet (needed: ops.{name}); keratron.ops "
            "installs them at the end of its import, so this is code that runs while "
            "keratron.ops is still being imported."
        )
    return fn


def _binary(op_name, reflected=False):
    def method(self, other):
        fn = _op(op_name)
        return fn(other, self) if reflected else fn(self, other)

    method.__name__ = op_name
    return method


for _dunder, _op_name in _BINARY_OPERATORS:
    setattr(Tensor, f"__{_dunder}__", _binary(_op_name))
    setattr(Tensor, f"__r{_dunder}__", _binary(_op_name, reflected=True))
for _dunder, _op_name in _COMPARISONS:
    setattr(Tensor, f"__{_dunder}__", _binary(_op_name))


def check_concrete(t: Tensor, what: str) -> None:
    """Raises a TypeError naming `what` if `t` is a traced (data-free) tensor, whose value a
    Python conversion (bool, int, a loop bound) cannot read."""
    if t._value.is_meta:
        raise TypeError(
            f"A traced tensor (shape {tuple(t._value.shape)}) was used as {what} inside a "
            "keratron.function: its value is not known while the function is traced. Python "
            "control flow that depends on tensor values is not supported there; use "
            "keratron.ops.where / keratron.ops.cond, or run the function eagerly."
        )


def _rebuild_tensor(array):
    return convert_to_tensor(array)


_variable_uids = itertools.count()


class _CreationCollectors(threading.local):
    def __init__(self):
        self.stack: list[list] = []


_collectors = _CreationCollectors()


@contextlib.contextmanager
def collect_created_variables():
    """Yields a list that receives every Variable created in this thread inside the block.

    Estimators use it to find the variables a `model_fn` made while it was traced (the role
    of `tf.variable_creator_scope`).
    """
    created: list = []
    _collectors.stack.append(created)
    try:
        yield created
    finally:
        stack = _collectors.stack
        del stack[next(i for i, c in enumerate(stack) if c is created)]


class Variable(Tensor):
    """A mutable tensor owned by a layer or optimizer (Keras's `keras.Variable`).

    Args:
        initializer: an initial value (array-like) or a callable `(shape, dtype) -> value`.
        shape: required when `initializer` is callable.
        dtype: Keras dtype name; defaults to the initial value's float type or `floatx()`.
        trainable: whether `GradientTape` watches it automatically and optimizers update it.
        name: the variable's name; `path` is `"<parent path>/<name>"` when a layer owns it.

    Example:
        >>> v = keratron.Variable([1.0, 2.0])
        >>> v.assign_add([1.0, 1.0]).numpy()
        array([2., 3.], dtype=float32)
    """

    __slots__ = (
        "name",
        "path",
        "trainable",
        "aggregation",
        "synchronization",
        "constraint",
        "regularizer",
        "_uid",
        "_writes",
        "_layout",
        "overwrite_with_gradient",
        "autocast",
    )

    def __init__(
        self,
        initializer,
        shape=None,
        dtype=None,
        trainable=True,
        autocast=True,
        aggregation="none",
        synchronization="auto",
        name=None,
        constraint=None,
        regularizer=None,
    ):
        self._uid = next(_variable_uids)
        self._writes = 0
        self.name = (
            name if name is not None else f"variable_{self._uid}" if self._uid else "variable"
        )
        if not isinstance(self.name, str) or "/" in self.name:
            raise ValueError(
                f"Argument `name` must be a string without '/'. Received: name={name!r}"
            )
        self.path = self.name
        self.trainable = bool(trainable)
        self.autocast = autocast
        self.aggregation = aggregation
        self.synchronization = synchronization
        self.constraint = constraint
        self.regularizer = regularizer
        self.overwrite_with_gradient = False
        if callable(initializer) and not isinstance(initializer, (Tensor, np.ndarray)):
            if shape is None:
                raise ValueError(
                    "When creating a Variable from a callable initializer, `shape` is required. "
                    f"Received: initializer={initializer!r}, shape=None"
                )
            dtype = standardize_dtype(dtype)
            from keratron.autodiff.primitive import suspend_tracing

            with suspend_tracing():
                value = initializer(tuple(shape), dtype=dtype)
        else:
            value = initializer
        # Python floats and lists become floatx; numpy arrays keep their dtype (as in Keras).
        t = convert_to_tensor(value, dtype=dtype)
        if shape is not None and tuple(t.shape) != tuple(shape):
            raise ValueError(
                f"Initial value for variable '{self.name}' has shape {t.shape}, "
                f"expected shape {tuple(shape)}."
            )
        # Own the storage: assign_* updates it in place, so it must not alias the caller's.
        self._value = t._value.clone()
        for created in _collectors.stack:
            created.append(self)

    def assign(self, value):
        if _tracing():
            return _trace_assign(self, value, "assign")
        v = _as_torch(value, self._value)
        if v.is_meta:  # shape inference runs layers on data-free tensors: no state changes
            return self
        if tuple(v.shape) != tuple(self._value.shape):
            raise ValueError(
                f"Cannot assign a value of shape {tuple(v.shape)} to variable '{self.path}' "
                f"of shape {self.shape}."
            )
        self._value.copy_(v)
        self._writes += 1
        return self

    def assign_add(self, value):
        if _tracing():
            return _trace_assign(self, value, "assign_add")
        v = _as_torch(value, self._value)
        if not v.is_meta:
            self._value.add_(v)
            self._writes += 1
        return self

    def assign_sub(self, value):
        if _tracing():
            return _trace_assign(self, value, "assign_sub")
        v = _as_torch(value, self._value)
        if not v.is_meta:
            self._value.sub_(v)
            self._writes += 1
        return self

    @property
    def value(self) -> Tensor:
        return Tensor(self._value)

    def numpy(self) -> np.ndarray:
        """A copy of the current value (later assignments do not change it)."""
        return np.array(super().numpy(), copy=True)

    def __repr__(self):
        return (
            f"<Variable path={self.path}, shape={self.shape}, dtype={self.dtype}, "
            f"value={self.numpy()!r}>"
        )

    def __reduce__(self):
        raise TypeError("Variables are not picklable; save weights with save_weights().")


def mark_written(variables) -> None:
    """Records that each of `variables` had its storage written outside `assign*` (an
    optimizer's multi-tensor update, a restore, a broadcast).

    Every write to a variable bumps its write count, and whatever is derived from a variable
    and kept across calls (a compiled function's prelude: relaid-out kernels, folded
    BatchNormalization) is valid only while the count it was computed at is unchanged. torch's
    own version counter is no substitute: fused kernels such as `torch._fused_adam_` write
    without bumping it.
    """
    for v in variables:
        v._writes += 1


def write_count(variable: Variable) -> int:
    """How many times `variable` has been written (see `mark_written`)."""
    return variable._writes


# Mixed precision (Keras's AutocastScope): inside the call of a layer whose compute dtype
# differs from its variable dtype, float variables with `autocast=True` are read in the
# compute dtype. The cast is an op, so gradients flow back to the float32 variable.
class _AutocastState(threading.local):
    def __init__(self):
        self.dtype = None  # the innermost autocast_scope's torch dtype in this thread


_autocast = _AutocastState()


@contextlib.contextmanager
def autocast_scope(dtype):
    """Reads autocast float Variables as `dtype` (a float dtype; None: no cast) within.

    Example:
        >>> v = keratron.Variable([1.0])
        >>> with autocast_scope("bfloat16"):
        ...     keratron.ops.add(v, 0.0).dtype
        'bfloat16'
    """
    target = None if dtype is None else to_torch_dtype(dtype)
    if target is not None and not target.is_floating_point:
        raise ValueError(
            "autocast_scope: the target dtype must be a float type such as 'bfloat16'. "
            f"Received: dtype={dtype!r}"
        )
    previous = _autocast.dtype
    _autocast.dtype = target
    try:
        yield
    finally:
        _autocast.dtype = previous


def autocast_dtype() -> str | None:
    """The dtype of the innermost `autocast_scope`, or None outside one."""
    target = _autocast.dtype
    return None if target is None else standardize_dtype(target)


def maybe_autocast(x):
    """`x` itself, or, for an autocast float Variable read in an `autocast_scope`, its value
    cast to the scope's dtype (what every op sees of the variable)."""
    if not isinstance(x, Variable):  # most operands: checked before the thread-local read
        return x
    target = _autocast.dtype
    if (
        target is None
        or not x.autocast
        or x._value.dtype is target
        or not x._value.is_floating_point()
    ):
        return x
    _autocast.dtype = None  # ops.cast reads its input through here too
    try:
        return _op("cast")(x, target)
    finally:
        _autocast.dtype = target


def _tracing() -> bool:
    from keratron.autodiff.primitive import trace_state

    return trace_state.tracer is not None


def _trace_assign(var, value, mode):
    from keratron.autodiff.primitive import trace_state

    if not isinstance(value, Tensor):
        value = convert_to_tensor(value, dtype=var.dtype)
    if tuple(value.shape) != tuple(var.shape) and mode == "assign":
        raise ValueError(
            f"Cannot assign a value of shape {value.shape} to variable '{var.path}' "
            f"of shape {var.shape}."
        )
    trace_state.tracer.record_assign(var, value, mode)
    return var


def _as_torch(value, like: torch.Tensor) -> torch.Tensor:
    if isinstance(value, Tensor):
        v = value._value
    elif isinstance(value, torch.Tensor):
        v = value
    else:
        v = torch.as_tensor(np.asarray(value))
    if v.is_meta:
        return v
    return v.to(device=like.device, dtype=like.dtype)


def convert_to_tensor(x, dtype=None, sparse=None, device=None) -> Tensor:
    """Converts numpy arrays, Python scalars and lists, torch tensors and Tensors to a Tensor.

    Python floats become `floatx()`, Python ints `int32`, as in Keras. A torch tensor that
    requires grad is detached: torch.autograd never sees keratron's computations.

    Example:
        >>> keratron.convert_to_tensor([1, 2]).dtype
        'int32'
    """
    tdtype = None if dtype is None else to_torch_dtype(dtype)
    if isinstance(x, Tensor):
        x = maybe_autocast(x)
        if tdtype is not None and x._value.dtype != tdtype:
            # Through ops.cast (the cast primitive), so that tapes and traces see it.
            x = _op("cast")(x, tdtype)
        if device is not None and not x._value.is_meta:
            v = x._value.to(config._normalize_device(device))
            return x if v is x._value else Tensor(v)
        return x
    dev = config._normalize_device(device) if device is not None else config.default_device()
    if isinstance(x, torch.Tensor):
        v = x.detach() if x.requires_grad else x
        if tdtype is not None:
            v = v.to(tdtype)
        return Tensor(v.to(dev) if device is not None else v)
    if isinstance(x, np.ndarray) or np.isscalar(x) and not isinstance(x, (bool, int, float)):
        a = np.asarray(x)
        if a.dtype == object:
            raise TypeError(f"Cannot convert an object array to a tensor. Received: {x!r}")
        if a.dtype.kind in "US":
            raise TypeError(f"Cannot convert a string array to a tensor. Received: {x!r}")
        v = (
            torch.from_numpy(np.ascontiguousarray(a))
            if a.ndim
            else torch.tensor(a.item(), dtype=to_torch_dtype(a.dtype))
        )
    else:
        if isinstance(x, (list, tuple)) and any(isinstance(e, Tensor) for e in _leaves(x)):
            stacked = _op("stack")([convert_to_tensor(e) for e in x])
            return convert_to_tensor(stacked, dtype=dtype)
        a = np.asarray(x)
        if a.dtype == object or a.dtype.kind in "US":
            raise TypeError(f"Cannot convert {x!r} to a tensor.")
        if tdtype is None:
            if a.dtype.kind == "f":
                a = a.astype(config.floatx())
            elif a.dtype.kind in "iu" and a.dtype.itemsize == 8:
                a = a.astype("int32")
        v = (
            torch.from_numpy(np.ascontiguousarray(a))
            if a.ndim
            else torch.tensor(a.item(), dtype=to_torch_dtype(a.dtype))
        )
    if tdtype is not None and v.dtype != tdtype:
        v = v.to(tdtype)
    if v.device.type != torch.device(dev).type or device is not None:
        v = _to_device(v, dev)
    return Tensor(v)


def _to_device(v: torch.Tensor, dev) -> torch.Tensor:
    """`v` (made on the host) on `dev`. A scalar bound for a GPU is filled there by a kernel
    rather than copied from pageable host memory: the copy would block the host, and a CUDA
    graph cannot capture it (a learning-rate schedule's constants inside a captured step)."""
    target = torch.device(dev)
    if v.dim() == 0 and target.type == "cuda" and v.dtype in _FILLED_DTYPES:
        return torch.full((), v.item(), dtype=v.dtype, device=target)
    return v.to(target)


# The dtypes whose host scalars `_to_device` fills on a GPU (others are copied).
_FILLED_DTYPES = frozenset(
    (torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.bool, torch.uint8)
    + (torch.int8, torch.int16, torch.int32, torch.int64)
)


def _leaves(x):
    for e in x:
        if isinstance(e, (list, tuple)):
            yield from _leaves(e)
        else:
            yield e


def is_tensor(x) -> bool:
    return isinstance(x, Tensor)
