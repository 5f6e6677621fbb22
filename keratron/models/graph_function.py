"""`keras.Function`: a callable graph of operations between Keras tensors, without the
weights, training and saving of a `Model`."""

from __future__ import annotations

from keratron.autodiff import tree
from keratron.autodiff.tensor import Tensor, convert_to_tensor
from keratron.layers.node import KerasTensor
from keratron.models.functional import Functional, _map_graph
from keratron.utils.naming import unique_object_name

__all__ = ["Function"]


class Function:
    """The computation from `inputs` to `outputs` (Keras tensors of one functional graph),
    callable on values of the inputs' structure.

    Args:
        inputs: the input Keras tensors (a tensor, list or dict).
        outputs: the output Keras tensors (a tensor, list or dict).
        name: the function's name.

    Raises:
        ValueError: an input or output is not a Keras tensor, or an output does not depend
            on the inputs.

    Example:
        >>> x = keratron.Input((3,))
        >>> f = keratron.Function(x, keratron.ops.relu(x) * 2.0)
        >>> f(np.array([[-1.0, 0.5, 2.0]], "float32")).numpy()
        array([[0., 1., 4.]], dtype=float32)
    """

    def __init__(self, inputs, outputs, name=None):
        for what, struct in (("inputs", inputs), ("outputs", outputs)):
            for x in tree.flatten(struct):
                if not isinstance(x, KerasTensor):
                    raise ValueError(
                        f"Function: all `{what}` must be KerasTensors. Received: {what}="
                        f"{struct!r} including {x!r} of type {type(x).__name__}"
                    )
        self.name = name or unique_object_name("function")
        self._inputs_struct = tree.map_structure(lambda x: x, inputs)
        self._outputs_struct = tree.map_structure(lambda x: x, outputs)
        self._inputs = tree.flatten(inputs)
        self._outputs = tree.flatten(outputs)
        self._nodes, self._nodes_by_depth, self._operations = _map_graph(
            self._inputs, self._outputs
        )
        reachable = {id(x) for x in self._inputs}
        for depth in sorted(self._nodes_by_depth, reverse=True):
            for node in self._nodes_by_depth[depth]:
                if not node.is_input and all(id(a) in reachable for a in node.arguments):
                    reachable.update(id(o) for o in node.outputs)
        for i, x in enumerate(self._outputs):
            if id(x) not in reachable:
                raise ValueError(
                    f"Function '{self.name}': output {i} ({x.name}) is not connected to `inputs`."
                )

    @property
    def inputs(self) -> list:
        return list(self._inputs)

    @property
    def outputs(self) -> list:
        return list(self._outputs)

    @property
    def operations(self) -> list:
        """The graph's operations (Input layers included), from inputs to outputs."""
        return list(self._operations)

    def _flat_inputs(self, inputs) -> list:
        if isinstance(self._inputs_struct, dict) and isinstance(inputs, dict):
            return tree.flatten({k: inputs[k] for k in self._inputs_struct})
        flat = tree.flatten(inputs)
        if len(flat) != len(self._inputs):
            raise ValueError(
                f"Function '{self.name}' expects {len(self._inputs)} inputs. Received "
                f"{len(flat)}: {inputs!r}"
            )
        return flat

    def call(self, inputs):
        """Runs the graph on `inputs` (tensors or Keras tensors)."""
        return Functional._run_through_graph(self, self._flat_inputs(inputs))

    def __call__(self, inputs):
        flat = self._flat_inputs(inputs)
        if not any(isinstance(x, KerasTensor) for x in flat):
            flat = [x if isinstance(x, Tensor) else convert_to_tensor(x) for x in flat]
        return Functional._run_through_graph(self, flat)

    def compute_output_spec(self, inputs):
        """The outputs' Keras tensors for Keras-tensor `inputs` (shapes and dtypes)."""
        return self.call(inputs)
