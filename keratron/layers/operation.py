"""`keras.Operation`: the base of a computation that, called on Keras tensors, records a node
of a functional graph, and called on values, computes.

Every keratron `Layer` counts as an Operation (`isinstance(layer, keratron.Operation)`), as
every Keras layer is one.
"""

from __future__ import annotations

import abc

import torch

from keratron.autodiff import tree
from keratron.autodiff.dtypes import to_torch_dtype
from keratron.autodiff.tensor import Tensor
from keratron.layers.layer import Layer
from keratron.layers.node import KerasTensor, Node
from keratron.utils.naming import to_snake_case, unique_object_name

__all__ = ["Operation"]


def _run_on_zeros(fn, args, kwargs, fill):
    def conv(x):
        if isinstance(x, KerasTensor):
            shape = tuple(fill if d is None else d for d in x.shape)
            return Tensor(torch.zeros(shape, dtype=to_torch_dtype(x.dtype), device="cpu"))
        return x

    return fn(*tree.map_structure(conv, list(args)), **tree.map_structure(conv, dict(kwargs)))


class Operation(abc.ABC):  # noqa: B024 (an ABC for `register`, with no abstract method)
    """A computation with a symbolic form: subclasses define `call` (on values) and may define
    `compute_output_spec` (on Keras tensors; by default `call` is run on zero-filled inputs
    to find the output shapes and dtypes, unknown dimensions tried at two sizes).

    Args:
        name: the operation's name (default: its class name in snake case, made unique).

    Example:
        >>> class Double(keratron.Operation):
        ...     def call(self, x):
        ...         return x * 2.0
        >>> y = Double()(keratron.Input((3,)))
        >>> y.shape
        (None, 3)
    """

    def __init__(self, name=None):
        if name is not None and (not isinstance(name, str) or "/" in name):
            raise ValueError(
                "Argument `name` must be a string and cannot contain character `/`. "
                f"Received: name={name!r} (of type {type(name).__name__})"
            )
        self.name = name or unique_object_name(to_snake_case(type(self).__name__))
        self._inbound_nodes = []
        self._outbound_nodes = []

    def __call__(self, *args, **kwargs):
        if any(isinstance(x, KerasTensor) for x in tree.flatten([list(args), kwargs])):
            return self.symbolic_call(*args, **kwargs)
        return self.call(*args, **kwargs)

    def symbolic_call(self, *args, **kwargs):
        """Records the call as a node of the functional graph; returns its Keras tensors."""
        outputs = self.compute_output_spec(*args, **kwargs)
        Node(self, args, kwargs, outputs)
        return outputs

    def call(self, *args, **kwargs):
        raise NotImplementedError(
            f"Operation '{self.name}' ({type(self).__name__}) has no `call`: a subclass of "
            "Operation must define `call`."
        )

    def compute_output_spec(self, *args, **kwargs):
        has_none = any(
            isinstance(x, KerasTensor) and None in x.shape
            for x in tree.flatten([list(args), kwargs])
        )
        runs = [_run_on_zeros(self.call, args, kwargs, 2)]
        if has_none:
            runs.append(_run_on_zeros(self.call, args, kwargs, 3))

        def to_spec(*outs):
            first = outs[0]
            if not isinstance(first, Tensor):
                return first
            shape = tuple(
                None if any(o.shape[i] != d for o in outs[1:]) else d
                for i, d in enumerate(first.shape)
            )
            return KerasTensor(shape, first.dtype)

        return tree.map_structure(to_spec, *runs)

    def get_config(self) -> dict:
        return {"name": self.name}

    @classmethod
    def from_config(cls, config):
        return cls(**config)

    @property
    def input(self):
        """The input of the operation's first call in a functional graph."""
        return self._node_value("arguments")

    @property
    def output(self):
        """The output of the operation's first call in a functional graph."""
        return self._node_value("outputs")

    def _node_value(self, attr):
        if not self._inbound_nodes:
            raise AttributeError(f"Operation '{self.name}' has never been called.")
        values = getattr(self._inbound_nodes[0], attr)
        return values[0] if len(values) == 1 else values


# Every layer is an operation, as in Keras (where Layer subclasses Operation).
Operation.register(Layer)
