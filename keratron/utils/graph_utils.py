"""`keras.utils.get_source_inputs`: the `Input` tensors a symbolic tensor is computed from."""

from __future__ import annotations

from keratron.autodiff import tree

__all__ = ["get_source_inputs"]


def get_source_inputs(tensor):
    """Returns the list of input tensors a functional-API tensor is computed from.

    The walk follows each tensor's `_keras_history` back through the nodes of the layers that
    produced it, to the nodes of `Input` layers; each source appears once, in first-seen order.
    A value with no history (not a symbolic tensor) is returned as it is, as in Keras.

    Args:
        tensor: a symbolic (`KerasTensor`) output of the functional API.

    Returns:
        A list of `Input` tensors.

    Example:
        >>> a, b = keratron.Input((2,)), keratron.Input((2,))
        >>> y = keratron.layers.Add()([a, keratron.layers.Dense(2)(b)])
        >>> keratron.utils.get_source_inputs(y) == [a, b]
        True
    """
    if not hasattr(tensor, "_keras_history"):
        return tensor
    history = tensor._keras_history
    if history is None or not history[0] or not history[0]._inbound_nodes:
        return [tensor]
    operation, node_index, _ = history
    node = operation._inbound_nodes[node_index]
    if node.is_input:
        return tree.flatten(node.output_tensors)
    sources = []
    for parent in node.input_tensors:
        for x in get_source_inputs(parent):
            if all(x is not s for s in sources):
                sources.append(x)
    return sources
