"""Symbolic tensors and nodes: how the functional API records a graph of layer calls.

Calling a layer on `KerasTensor`s computes output shapes without data (the call runs on
torch "meta" tensors) and records a `Node` linking the layer to its inputs and outputs; the
outputs remember their node in `_keras_history`, so a `Model(inputs, outputs)` can walk back
from its outputs to its inputs.
"""

from __future__ import annotations

import inspect

from keratron.autodiff import tree
from keratron.autodiff.dtypes import standardize_dtype
from keratron.ops.symbolic import SymbolicTensor, set_symbolic_call
from keratron.utils.naming import unique_object_name


class KerasTensor(SymbolicTensor):
    """A symbolic tensor: a shape (None for unknown dims), a dtype, and the node that made it.

    Example:
        >>> x = keratron.Input(shape=(3,))
        >>> x.shape
        (None, 3)
    """

    def __init__(self, shape, dtype="float32", sparse=False, name=None, record_history=True):
        self.shape = tuple(None if d is None else int(d) for d in shape)
        self.dtype = standardize_dtype(dtype)
        self.sparse = sparse
        self.name = name or unique_object_name("keras_tensor")
        self._keras_history = None  # (layer, node_index, tensor_index)
        self._keras_mask = None  # a KerasTensor when the producing layer emits a mask

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __repr__(self):
        return f"<KerasTensor shape={self.shape}, dtype={self.dtype}, name={self.name}>"

    def __hash__(self):
        return id(self)

    def __len__(self):
        raise TypeError("A symbolic KerasTensor has no len(); use its .shape.")

    def __bool__(self):
        raise TypeError(
            "A symbolic KerasTensor cannot be used as a Python bool (e.g. in `if`). "
            "Use layers or ops inside a Layer's call() instead."
        )

    def __iter__(self):
        raise TypeError("A symbolic KerasTensor is not iterable.")

    def numpy(self):
        raise ValueError(
            f"KerasTensor {self.name!r} is symbolic: it has no value until the model is called "
            "on data."
        )

    def __array__(self, *args, **kwargs):
        self.numpy()

    def __getitem__(self, key):
        # The key is a call argument, as in Keras's `GetItem` node (and its saved config).
        from keratron.layers.layer import TensorOpLayer

        return TensorOpLayer("get_item")(self, key)


def _op_layer(fn_name, *args, **kwargs):
    from keratron.layers.layer import TensorOpLayer

    return TensorOpLayer(fn_name, kwargs)(*args)


# Parameter names of the ops' tensor operands: node inputs even when not symbolic
# (`ops.add(x, 2.0)`), as Keras's op classes take them in `call`, not in their config.
_OPERANDS = {"x", "x1", "x2", "y", "a", "b", "xs", "condition", "inputs"}


def _symbolic(value) -> bool:
    return any(isinstance(v, SymbolicTensor) for v in tree.flatten(value))


def _record_op(fn_name, op, args, kwargs):
    """A `keratron.ops` call on KerasTensors, as a node of the functional graph, laid out as
    Keras's op classes are: the operands (up to the last symbolic or operand-named argument)
    are the node's call arguments, every other parameter (defaults included) its config."""
    params = list(inspect.signature(op).parameters.values())
    bound = inspect.signature(op).bind(*args, **kwargs)
    bound.apply_defaults()
    values = bound.arguments
    names = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    n = 0
    for i, name in enumerate(names):
        if name in values and (name in _OPERANDS or _symbolic(values[name])):
            n = i + 1
    call_args = [values[name] for name in names[:n]]
    config = {k: v for k, v in values.items() if k not in names[:n]}
    var = next((p.name for p in params if p.kind == p.VAR_POSITIONAL), None)
    if var is not None:  # `meshgrid(*xs)`: the variadic operands are call arguments
        call_args += list(config.pop(var))
    if _symbolic(list(config.values())):
        raise TypeError(
            f"ops.{fn_name}: a KerasTensor passed as a keyword-only argument cannot be a node "
            "input; pass it positionally."
        )
    return _op_layer(fn_name, *call_args, **config)


set_symbolic_call(_record_op)


def _symbolic_binary(fn_name, reflected=False):
    def method(self, other):
        a, b = (other, self) if reflected else (self, other)
        return _op_layer(fn_name, a, b)

    return method


for _dunder, _fn in [
    ("add", "add"),
    ("sub", "subtract"),
    ("mul", "multiply"),
    ("truediv", "true_divide"),  # Keras's `TrueDivide` op, auto-named "true_divide"
    ("floordiv", "floor_divide"),
    ("mod", "mod"),
    ("pow", "power"),
    ("matmul", "matmul"),
]:
    setattr(KerasTensor, f"__{_dunder}__", _symbolic_binary(_fn))
    setattr(KerasTensor, f"__r{_dunder}__", _symbolic_binary(_fn, reflected=True))
for _dunder, _fn in [
    ("lt", "less"),
    ("le", "less_equal"),
    ("gt", "greater"),
    ("ge", "greater_equal"),
]:
    setattr(KerasTensor, f"__{_dunder}__", _symbolic_binary(_fn))
KerasTensor.__neg__ = lambda self: _op_layer("negative", self)
KerasTensor.__abs__ = lambda self: _op_layer("absolute", self)


class Node:
    """One call of a layer in a functional graph.

    Attributes:
        operation: the layer called.
        call_args, call_kwargs: the arguments as given (KerasTensors where symbolic).
        outputs: the flat list of output KerasTensors.
        parent_nodes: the nodes that produced the KerasTensor arguments.
    """

    def __init__(self, operation, call_args=(), call_kwargs=None, outputs=None):
        self.operation = operation
        self.call_args = tuple(call_args)
        self.call_kwargs = dict(call_kwargs or {})
        self.outputs = tree.flatten(outputs) if outputs is not None else []
        self.arguments = [
            x
            for x in tree.flatten([self.call_args, self.call_kwargs])
            if isinstance(x, KerasTensor)
        ]
        self.is_input = not self.arguments
        node_index = len(operation._inbound_nodes)
        for i, t in enumerate(self.outputs):
            t._keras_history = (operation, node_index, i)
        operation._inbound_nodes.append(self)
        for x in self.arguments:
            if x._keras_history is not None:
                x._keras_history[0]._outbound_nodes.append(self)

    @property
    def input_tensors(self) -> list:
        return self.arguments

    @property
    def output_tensors(self) -> list:
        return self.outputs

    @property
    def parent_nodes(self) -> list:
        parents = []
        for x in self.arguments:
            if x._keras_history is not None:
                layer, ni, _ = x._keras_history
                node = layer._inbound_nodes[ni]
                if node not in parents:
                    parents.append(node)
        return parents
