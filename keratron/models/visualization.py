"""`keras.utils.model_to_dot` and `keras.utils.plot_model`: a model's layer graph as a pydot
graph (one HTML-table node per layer, Keras's labels and layout) and as an image file.

Both need the optional `pydot` package (`pydot_ng` or `pydotplus` also serve), and writing
an image needs the Graphviz programs; without them both raise Keras's ImportError (in a
notebook, `plot_model` prints the message instead).
"""

from __future__ import annotations

import os
import sys

from keratron import tree
from keratron.models.functional import Functional
from keratron.models.sequential import Sequential
from keratron.utils.io_utils import print_msg

try:
    import pydot
except ImportError:
    try:
        import pydot_ng as pydot
    except ImportError:
        try:
            import pydotplus as pydot
        except ImportError:
            pydot = None

__all__ = ["model_to_dot", "plot_model"]


def check_pydot() -> bool:
    """Whether a pydot module could be imported."""
    return pydot is not None


def check_graphviz() -> bool:
    """Whether pydot can run Graphviz's `dot` program."""
    if not check_pydot():
        return False
    try:
        pydot.Dot.create(pydot.Dot())
        return True
    except (OSError, pydot.PydotException):
        return False


def _add_edge(dot, src, dst) -> None:
    src_id, dst_id = str(id(src)), str(id(dst))
    if not dot.get_edge(src_id, dst_id):
        edge = pydot.Edge(src_id, dst_id)
        edge.set("penwidth", "2")
        dot.add_edge(edge)


def _activation_name(layer) -> str:
    activation = layer.activation
    if hasattr(activation, "name"):
        return activation.name
    if hasattr(activation, "__name__"):
        return activation.__name__
    return str(activation)


def _format_shape(shape) -> str:
    if shape is None:
        return "?"
    if isinstance(shape, dict):
        text = ", ".join(f"{k}: {v}" for k, v in shape.items())
    else:
        text = f"{shape}"
    return text.replace("}", "").replace("{", "")


def _cell(text, bgcolor="white", font=' point-size="14"') -> str:
    return f'<td bgcolor="{bgcolor}"><font{font}>{text}</font></td>'


def _layer_label(layer, show_layer_names, show_layer_activations, show_dtype, show_shapes,
                 show_trainable) -> str:  # fmt: skip
    """The node's label: a Graphviz HTML table, as Keras draws it."""
    class_name = type(layer).__name__
    table = '<<table border="0" cellborder="1" bgcolor="black" cellpadding="10">'
    colspan = max(1, int(show_dtype) + int(show_trainable) + (2 if show_shapes else 0))
    title = f"<b>{layer.name}</b> ({class_name})" if show_layer_names else f"<b>{class_name}</b>"
    table += (
        f'<tr><td colspan="{colspan}" bgcolor="black"><font point-size="16" color="white">'
        f"{title}</font></td></tr>"
    )
    if show_layer_activations and getattr(layer, "activation", None) is not None:
        table += (
            f'<tr><td bgcolor="white" colspan="{colspan}"><font point-size="14">'
            f"Activation: <b>{_activation_name(layer)}</b></font></td></tr>"
        )
    cols = []
    if show_shapes:
        input_shape = output_shape = None
        try:
            input_shape = tree.map_structure(lambda x: x.shape, layer.input)
            output_shape = tree.map_structure(lambda x: x.shape, layer.output)
        except (ValueError, AttributeError):
            pass
        if class_name != "InputLayer":
            cols.append(_cell(f"Input shape: <b>{_format_shape(input_shape)}</b>"))
        cols.append(_cell(f"Output shape: <b>{_format_shape(output_shape)}</b>"))
    if show_dtype:
        dtype = None
        try:
            dtype = tree.map_structure(lambda x: x.dtype, layer.output)
        except (ValueError, AttributeError):
            pass
        cols.append(_cell(f"Output dtype: <b>{dtype or '?'}</b>"))
    if show_trainable and hasattr(layer, "trainable") and layer.weights:
        if layer.trainable:
            cols.append(_cell("<b>Trainable</b>", "forestgreen", ' point-size="14" color="white"'))
        else:
            cols.append(
                _cell("<b>Non-trainable</b>", "firebrick", ' point-size="14" color="white"')
            )
    if cols:
        table += f"<tr>{''.join(cols)}</tr>"
    return table + "</table>>"


def _make_node(layer, **kwargs):
    node = pydot.Node(str(id(layer)), label=_layer_label(layer, **kwargs))
    node.set("fontname", "Helvetica")
    node.set("border", "0")
    node.set("margin", "0")
    return node


def _check_built(model) -> None:
    if not model.built:
        raise ValueError(
            "This model has not yet been built. Build the model first by calling `build()` or "
            "by calling the model on a batch of data."
        )


def model_to_dot(
    model,
    show_shapes=False,
    show_dtype=False,
    show_layer_names=True,
    rankdir="TB",
    expand_nested=False,
    dpi=200,
    subgraph=False,
    show_layer_activations=False,
    show_trainable=False,
    splines="ortho",
    **kwargs,
):
    """The model's layer graph as a `pydot.Dot` (or, with `subgraph=True`, a `pydot.Cluster`).

    Args:
        model: a built keratron model.
        show_shapes, show_dtype, show_layer_names, show_layer_activations, show_trainable:
            what each layer's node shows.
        rankdir: "TB" (top to bottom) or "LR" (left to right).
        expand_nested: draw nested models as clusters of their layers.
        dpi: image resolution.
        subgraph: return a cluster, for nesting in another graph.
        splines: how edges are drawn ("ortho", "curved", "polyline", "spline", "line").

    Raises:
        ImportError: pydot is not installed.
        ValueError: the model is not built, or an unknown keyword argument was given.

    Example:
        >>> model = keratron.Sequential([keratron.Input((3,)), keratron.layers.Dense(2)])
        >>> dot = keratron.utils.model_to_dot(model, show_shapes=True)  # doctest: +SKIP
        >>> type(dot).__name__  # doctest: +SKIP
        'Dot'
    """
    _check_built(model)
    if not check_pydot():
        raise ImportError("You must install pydot (`pip install pydot`) for model_to_dot to work.")
    if subgraph:
        dot = pydot.Cluster(style="dashed", graph_name=model.name)
        dot.set("label", model.name)
        dot.set("labeljust", "l")
    else:
        dot = pydot.Dot()
        dot.set("rankdir", rankdir)
        dot.set("concentrate", True)
        dot.set("dpi", dpi)
        dot.set("splines", splines)
        dot.set_node_defaults(shape="record")
    if kwargs.pop("layer_range", None) is not None:
        raise ValueError("Argument `layer_range` is no longer supported.")
    if kwargs:
        raise ValueError(f"Unrecognized keyword arguments: {kwargs}")
    shown = {
        "show_layer_names": show_layer_names,
        "show_layer_activations": show_layer_activations,
        "show_dtype": show_dtype,
        "show_shapes": show_shapes,
        "show_trainable": show_trainable,
    }
    if isinstance(model, Sequential):
        layers = model.layers
    elif not isinstance(model, Functional):
        dot.add_node(_make_node(model, **shown))  # a subclassed model: one node
        return dot
    else:
        layers = model.operations
    for layer in layers:
        if expand_nested and isinstance(layer, (Functional, Sequential)):
            dot.add_subgraph(
                model_to_dot(
                    layer, show_shapes, show_dtype, show_layer_names, rankdir, expand_nested,
                    subgraph=True, show_layer_activations=show_layer_activations,
                    show_trainable=show_trainable,
                )
            )  # fmt: skip
        else:
            dot.add_node(_make_node(layer, **shown))
    if isinstance(model, Sequential):
        if not expand_nested:
            for before, after in zip(layers[:-1], layers[1:]):
                _add_edge(dot, before, after)
            return dot
        layers = model.layers[1:]
    nodes_in_model = getattr(model, "_nodes", None)
    for layer in layers:
        for inbound_index, inbound_node in enumerate(layer._inbound_nodes):
            if isinstance(model, Functional) and (id(layer), inbound_index) not in nodes_in_model:
                continue  # a call of the layer outside this model
            for input_index, input_tensor in enumerate(inbound_node.input_tensors):
                history = input_tensor._keras_history
                if history is None or history[0] is None:
                    continue
                operation, node_index, output_index = history
                source, destination = operation._inbound_nodes[node_index].operation, layer
                if not expand_nested:
                    _add_edge(dot, source, layer)
                    continue
                # Edges into and out of an expanded model join its inner layers.
                while isinstance(source, (Functional, Sequential)):
                    source, _, output_index = source.outputs[output_index]._keras_history
                while isinstance(destination, (Functional, Sequential)):
                    if isinstance(destination, Functional):
                        destination = destination.inputs[input_index]._keras_history[0]
                    else:
                        destination = destination.layers[0]
                _add_edge(dot, source, destination)
    return dot


def plot_model(
    model,
    to_file="model.png",
    show_shapes=False,
    show_dtype=False,
    show_layer_names=False,
    rankdir="TB",
    expand_nested=False,
    dpi=200,
    show_layer_activations=False,
    show_trainable=False,
    splines="ortho",
    **kwargs,
):
    """Draws the model's layer graph into an image file (its extension picks the format,
    PNG by default), as `keras.utils.plot_model`.

    Args:
        model: a built keratron model.
        to_file: the image's path.
        Others: as in `model_to_dot`.

    Returns:
        An `IPython.display.Image` of the file where IPython is installed (not for PDF).

    Raises:
        ImportError: pydot or Graphviz is missing (in a notebook the message is printed
            instead, as Keras does).

    Example:
        >>> import os, tempfile
        >>> model = keratron.Sequential([keratron.Input((3,)), keratron.layers.Dense(2)])
        >>> path = os.path.join(tempfile.mkdtemp(), "model.png")
        >>> image = keratron.utils.plot_model(model, path, show_shapes=True)  # doctest: +SKIP
        >>> os.path.exists(path)  # doctest: +SKIP
        True
    """
    _check_built(model)
    for available, message in (
        (check_pydot, "You must install pydot (`pip install pydot`) for `plot_model` to work."),
        (
            check_graphviz,
            "You must install graphviz (see instructions at "
            "https://graphviz.gitlab.io/download/) for `plot_model` to work.",
        ),
    ):
        if not available():
            if "IPython.core.magics.namespace" in sys.modules:
                print_msg(message)  # in a notebook, as Keras: say it, do not fail the cell
                return None
            raise ImportError(message)
    if kwargs.pop("layer_range", None) is not None:
        raise ValueError("Argument `layer_range` is no longer supported.")
    if kwargs:
        raise ValueError(f"Unrecognized keyword arguments: {kwargs}")
    dot = model_to_dot(
        model,
        show_shapes=show_shapes,
        show_dtype=show_dtype,
        show_layer_names=show_layer_names,
        rankdir=rankdir,
        expand_nested=expand_nested,
        dpi=dpi,
        show_layer_activations=show_layer_activations,
        show_trainable=show_trainable,
        splines=splines,
    )
    to_file = str(to_file)
    extension = os.path.splitext(to_file)[1][1:] or "png"
    dot.write(to_file, format=extension)
    if extension != "pdf":
        try:
            from IPython import display

            return display.Image(filename=to_file)
        except ImportError:
            pass
    return None
