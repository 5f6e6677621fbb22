"""`Functional`: a model defined as a graph of layer calls on symbolic inputs.

Building a model walks back from its outputs through each KerasTensor's `_keras_history` to
find the nodes (layer calls) between inputs and outputs and groups them by depth (Keras's
`map_graph`). Calling the model replays those nodes, deepest first, on real tensors; masks
travel on the tensors (`_keras_mask`) and `training` through the call context.
"""

from __future__ import annotations

import collections
import copy
import inspect
import warnings

from keratron.autodiff import tree
from keratron.autodiff.tensor import Tensor, convert_to_tensor
from keratron.layers.input_layer import Input, InputLayer
from keratron.layers.layer import Layer, TensorOpLayer
from keratron.layers.node import KerasTensor, Node
from keratron.models.model import Model

__all__ = ["Functional", "functional_from_config", "clone_graph_nodes"]


class Functional(Model):
    """A model whose layers form a graph from `inputs` to `outputs` (made by `Model(...)`).

    Args:
        inputs: a KerasTensor from `keratron.Input`, or a list / dict of them.
        outputs: KerasTensors computed from `inputs`, as a single tensor, list or dict.
        name: the model's name.

    Example:
        >>> x = keratron.Input(shape=(4,))
        >>> y = keratron.layers.Dense(2)(x)
        >>> model = keratron.Model(x, y)
    """

    def __new__(cls, *args, **kwargs):
        return object.__new__(cls)

    def __init__(self, inputs, outputs, name=None, **kwargs):
        trainable = kwargs.pop("trainable", None)
        for what, struct in (("inputs", inputs), ("outputs", outputs)):
            for x in tree.flatten(struct):
                if not isinstance(x, KerasTensor):
                    raise ValueError(
                        f"All `{what}` values must be KerasTensors (from `keratron.Input` or "
                        f"layers called on them). Received: {what}={struct!r} including "
                        f"{x!r} of type {type(x).__name__}"
                    )
        if isinstance(inputs, dict):
            for key, x in inputs.items():
                if key != x._keras_history[0].name:
                    warnings.warn(
                        "When providing `inputs` as a dict, all keys in the dict must match "
                        f"the names of the corresponding inputs. Received key '{key}' for the "
                        f"input named '{x._keras_history[0].name}'.",
                        stacklevel=2,
                    )
        if not tree.flatten(inputs):
            raise ValueError(f"`inputs` argument cannot be empty. Received: inputs={inputs!r}")
        if not tree.flatten(outputs):
            raise ValueError(f"`outputs` argument cannot be empty. Received: outputs={outputs!r}")
        if not all(_is_input_tensor(x) for x in tree.flatten(inputs)):
            # A model from intermediate tensors gets fresh Inputs and copies of the nodes.
            inputs, outputs = clone_graph_nodes(inputs, outputs)
        Model._init_base(self, name=name, **kwargs)
        self._inputs_struct = tree.map_structure(lambda x: x, inputs)
        self._outputs_struct = tree.map_structure(lambda x: x, outputs)
        self._inputs = tree.flatten(inputs)
        self._outputs = tree.flatten(outputs)
        nodes, nodes_by_depth, operations = _map_graph(self._inputs, self._outputs)
        self._nodes = nodes
        self._nodes_by_depth = nodes_by_depth
        self._operations = operations
        # As Keras 3: ops on tensors (`x + 3.0`, `inputs + branch`) are operations, not layers.
        self._layers = [
            op for op in operations if isinstance(op, Layer) and not isinstance(op, TensorOpLayer)
        ]
        # Inputs are converted one by one to each Input's own dtype in `call`.
        self.autocast = False
        self.output_names = [x._keras_history[0].name for x in self._outputs]
        self.built = True
        if trainable is not None:
            self.trainable = trainable

    # ------------------------------------------------------------------ graph properties
    @property
    def layers(self) -> list:
        """The model's layers in graph order, InputLayers included (as Keras 3 lists them)."""
        return list(self._layers)

    @property
    def operations(self) -> list:
        return list(self._operations)

    @property
    def inputs(self) -> list:
        """The flat list of symbolic inputs."""
        return list(self._inputs)

    @property
    def outputs(self) -> list:
        """The flat list of symbolic outputs."""
        return list(self._outputs)

    @property
    def input(self):
        return self._inputs_struct

    @property
    def output(self):
        return self._outputs_struct

    @property
    def input_names(self) -> list:
        """The names of the input layers, in flat input order (tf.keras 2's attribute)."""
        return [x._keras_history[0].name for x in self._inputs]

    @property
    def input_shape(self):
        shapes = tree.map_structure(lambda x: x.shape, self._inputs_struct)
        return _unpack_singleton(shapes)

    @property
    def output_shape(self):
        shapes = tree.map_structure(lambda x: x.shape, self._outputs_struct)
        return _unpack_singleton(shapes)

    # ------------------------------------------------------------------ calling
    def call(self, inputs, training=None, mask=None):
        flat = self._standardize_inputs(inputs)
        if mask is not None:
            for x, m in zip(flat, tree.flatten(mask)):
                if m is not None and isinstance(x, Tensor):
                    x._keras_mask = convert_to_tensor(m)

        def operation_fn(op):
            def run(*args, **kwargs):
                # `training` reaches nested layers through the call context too; passing it
                # explicitly keeps a model-level value over a layer's own default. As in Keras 3,
                # it also overrides a value recorded when the graph was built: a base model
                # called with `training=False` runs in training mode under `fit` (its
                # BatchNormalization too, once it is trainable again).
                if training is not None and "training" in getattr(op, "_call_params", {}):
                    kwargs["training"] = training
                return op(*args, **kwargs)

            return run

        return _unpack_singleton(self._run_through_graph(flat, operation_fn))

    def _run_through_graph(self, inputs, operation_fn=lambda op: op):
        """Replays the graph's nodes, deepest first, on `inputs` (flat, in `self.inputs`
        order); `operation_fn(layer)` gives the callable used for each node."""
        values = {id(x): v for x, v in zip(self._inputs, tree.flatten(inputs))}

        def fill(v):
            return values[id(v)] if isinstance(v, KerasTensor) else v

        for depth in sorted(self._nodes_by_depth, reverse=True):
            for node in self._nodes_by_depth[depth]:
                if node.is_input or any(id(x) not in values for x in node.arguments):
                    continue
                args = tree.map_structure(fill, list(node.call_args))
                kwargs = {k: tree.map_structure(fill, v) for k, v in node.call_kwargs.items()}
                outputs = operation_fn(node.operation)(*args, **kwargs)
                for x, y in zip(node.outputs, tree.flatten(outputs)):
                    values[id(x)] = y
        flat_out = []
        for x in self._outputs:
            if id(x) not in values:
                raise ValueError(
                    f"Output '{x.name}' of model '{self.name}' is not connected to its inputs."
                )
            flat_out.append(values[id(x)])
        return tree.pack_sequence_as(self._outputs_struct, flat_out)

    def _standardize_inputs(self, inputs):
        """Flat list of input tensors in `self.inputs` order, each in its Input's dtype."""
        struct = self._inputs_struct
        if isinstance(inputs, dict) and not isinstance(struct, dict):
            names = self.input_names
            missing = [n for n in names if n not in inputs]
            if missing:
                raise ValueError(
                    f"Model '{self.name}' expects inputs named {names}; the input dict is "
                    f"missing {missing}. Received keys: {sorted(inputs)}"
                )
            flat = [inputs[n] for n in names]
        elif isinstance(struct, dict) and isinstance(inputs, dict):
            missing = [k for k in struct if k not in inputs]
            if missing:
                raise ValueError(
                    f"Model '{self.name}' expects input keys {sorted(struct)}; missing "
                    f"{missing}. Received keys: {sorted(inputs)}"
                )
            flat = tree.flatten({k: inputs[k] for k in struct})
        elif isinstance(inputs, (list, tuple)):
            flat = tree.flatten(list(inputs))
        else:
            flat = [inputs]
        if len(flat) != len(self._inputs):
            raise ValueError(
                f"Model '{self.name}' expects {len(self._inputs)} input(s), but it received "
                f"{len(flat)} input tensors."
            )
        return [self._conform_input(i, x) for i, x in enumerate(flat)]

    def _conform_input(self, i, x):
        ref = self._inputs[i]
        if x is None:
            return None
        if isinstance(x, KerasTensor):
            return x
        mask = getattr(x, "_keras_mask", None) if isinstance(x, Tensor) else None
        x = convert_to_tensor(x)
        if x.dtype != ref.dtype and ref.dtype != "string":
            from keratron import ops

            x = ops.cast(x, ref.dtype)
        x = self._adjust_rank(i, x)
        if mask is not None:
            x._keras_mask = mask
        return x

    def _adjust_rank(self, i, x):
        from keratron import ops

        ref_shape = self._inputs[i].shape
        if x.ndim == len(ref_shape) + 1 and x.shape[-1] == 1:
            x = ops.squeeze(x, axis=-1)
        elif x.ndim == len(ref_shape) - 1 and ref_shape[-1] == 1:
            x = ops.expand_dims(x, axis=-1)
        shape = x.shape
        ok = len(shape) == len(ref_shape) and all(
            r is None or s is None or r == s for r, s in zip(ref_shape[1:], shape[1:])
        )
        if not ok:
            raise ValueError(
                f"Input {i} of model '{self.name}' (input '{self.input_names[i]}') is "
                f"incompatible with the model: expected shape={ref_shape}, found "
                f"shape={tuple(shape)}"
            )
        return x

    def compute_output_spec(self, inputs, training=None, mask=None):
        flat = self._standardize_symbolic(inputs)
        if all(tuple(x.shape) == tuple(r.shape) for x, r in zip(flat, self._inputs)):
            out = tree.map_structure(lambda x: KerasTensor(x.shape, x.dtype), self._outputs_struct)
        else:
            out = self._run_through_graph(flat, lambda op: op.compute_output_spec)
        return _unpack_singleton(out)

    def _standardize_symbolic(self, inputs):
        if isinstance(inputs, dict) and not isinstance(self._inputs_struct, dict):
            return [inputs[n] for n in self.input_names]
        if isinstance(inputs, dict):
            return tree.flatten({k: inputs[k] for k in self._inputs_struct})
        return tree.flatten(inputs)

    def compute_output_shape(self, input_shape):
        specs = [
            KerasTensor(s, r.dtype, record_history=False)
            for s, r in zip(_flatten_shapes(input_shape), self._inputs)
        ]
        out = self.compute_output_spec(specs)
        return tree.map_structure(lambda t: t.shape, out)

    def get_build_config(self):
        return None

    # ------------------------------------------------------------------ config
    def get_config(self) -> dict:
        """Keras's functional config: `name`, `trainable`, `layers` (each with its
        `inbound_nodes`), `input_layers` and `output_layers`."""
        from keratron.models.serialization import serialize_layer

        if not functional_like_constructor(type(self)):
            return Model.get_config(self)
        config = {"name": self.name, "trainable": self.trainable}
        # Only the nodes of this model are saved; their indices are renumbered accordingly.
        reindex = {}
        for op in self._operations:
            kept = 1 if isinstance(op, Functional) else 0
            for i in range(len(op._inbound_nodes)):
                if (id(op), i) in self._nodes:
                    reindex[(id(op), i)] = kept
                    kept += 1
        layer_configs = []
        for op in self._operations:
            inbound = []
            for i, node in enumerate(op._inbound_nodes):
                if (id(op), i) in self._nodes and not node.is_input:
                    inbound.append(self._serialize_node(node))
            layer_config = serialize_layer(op)
            layer_config["name"] = op.name
            layer_config["inbound_nodes"] = inbound
            layer_configs.append(layer_config)
        config["layers"] = layer_configs

        def tensor_config(x):
            op, node_index, tensor_index = x._keras_history
            return [op.name, reindex[(id(op), node_index)], tensor_index]

        config["input_layers"] = tree.map_structure(tensor_config, self._inputs_struct)
        config["output_layers"] = tree.map_structure(tensor_config, self._outputs_struct)
        return copy.deepcopy(config)

    def _serialize_node(self, node) -> dict:
        def serialize(x):
            if isinstance(x, slice):  # an index (`x[:, 0]`), written as Keras writes it
                parts = {p: getattr(x, p) for p in ("start", "stop", "step")}
                return {"class_name": "__slice__", "config": parts}
            if x is Ellipsis:
                return {"class_name": "__ellipsis__", "config": {}}
            if not isinstance(x, KerasTensor):
                return x
            op, node_index, tensor_index = x._keras_history
            skipped = sum(1 for i in range(node_index) if (id(op), i) not in self._nodes)
            return {
                "class_name": "__keras_tensor__",
                "config": {
                    "shape": list(x.shape),
                    "dtype": x.dtype,
                    "keras_history": [op.name, node_index - skipped, tensor_index],
                },
            }

        return {
            "args": tree.map_structure(serialize, list(node.call_args)),
            "kwargs": {k: tree.map_structure(serialize, v) for k, v in node.call_kwargs.items()},
        }

    @classmethod
    def from_config(cls, config, custom_objects=None):
        return functional_from_config(cls, config, custom_objects=custom_objects)


# ---------------------------------------------------------------------- graph building
def _is_input_tensor(x) -> bool:
    layer, node_index, _ = x._keras_history
    return layer._inbound_nodes[node_index].is_input


def _node_key(node):
    return (id(node.operation), node.operation._inbound_nodes.index(node))


def _build_map(inputs, outputs):
    """Depth-first walk from `outputs` back to `inputs`: the nodes in topological order
    (inputs first) and each layer's first-visit index."""
    finished, in_progress = set(), set()
    ordered, op_index = [], {}
    input_ids = {id(x) for x in inputs}

    def visit(tensor):
        op, node_index, _ = tensor._keras_history
        node = op._inbound_nodes[node_index]
        if id(node) in finished:
            return
        if not node.is_input and id(tensor) in input_ids:
            finished.add(id(node))
            return
        if id(node) in in_progress:
            raise ValueError(f"Tensor {tensor.name} from layer '{op.name}' is part of a cycle.")
        op_index.setdefault(op, len(op_index))
        in_progress.add(id(node))
        if not node.is_input:
            for x in node.arguments:
                visit(x)
        finished.add(id(node))
        in_progress.discard(id(node))
        ordered.append(node)

    for x in outputs:
        if x._keras_history is None:
            raise ValueError(f"Output {x.name} was not produced by a layer call.")
        visit(x)
    return ordered, op_index


def _map_graph(inputs, outputs):
    """The model's node keys, its nodes grouped by depth (outputs at depth 0) and its layers
    ordered from inputs to outputs (Keras's `map_graph`)."""
    ordered, op_index = _build_map(inputs, outputs)
    in_graph = {id(n) for n in ordered}
    node_keys = {_node_key(n) for n in ordered}
    node_depth, op_depth = {}, {}
    for node in reversed(ordered):
        depth = node_depth.setdefault(node, 0)
        depth = max(depth, op_depth.get(node.operation, 0))
        op_depth[node.operation] = depth
        node_depth[node] = depth
        for parent in node.parent_nodes:
            if id(parent) in in_graph:
                node_depth[parent] = max(depth + 1, node_depth.get(parent, 0))
    for x in inputs:
        op, node_index, _ = x._keras_history
        if op not in op_depth:
            node = op._inbound_nodes[node_index]
            op_depth[op] = 0
            op_index[op] = -1
            node_depth[node] = 0
            node_keys.add((id(op), node_index))
    nodes_by_depth = collections.defaultdict(list)
    for node, depth in node_depth.items():
        nodes_by_depth[depth].append(node)
    ops_by_depth = collections.defaultdict(list)
    for op, depth in op_depth.items():
        ops_by_depth[depth].append(op)
    operations = []
    for depth in sorted(ops_by_depth, reverse=True):
        operations.extend(sorted(ops_by_depth[depth], key=lambda op: op_index[op]))
    computable = {id(x) for x in inputs}
    reached = []
    for depth in sorted(nodes_by_depth, reverse=True):
        for node in nodes_by_depth[depth]:
            if node.is_input:
                continue  # only the model's own inputs are computable, not other Inputs
            for x in node.arguments:
                if id(x) not in computable:
                    raise ValueError(
                        f"Graph disconnected: cannot find parent for tensor {x.name} at layer "
                        f"'{node.operation.name}'. The following previous layers were "
                        f"accessed without issue: {reached}"
                    )
            reached.append(node.operation.name)
            computable.update(id(x) for x in node.outputs)
    names = [op.name for op in operations]
    for name in names:
        if names.count(name) != 1:
            raise ValueError(
                f'The name "{name}" is used {names.count(name)} times in the model. All layer '
                "names should be unique."
            )
    return node_keys, dict(nodes_by_depth), operations


def clone_graph_nodes(inputs, outputs):
    """Copies the nodes between intermediate `inputs` and `outputs`, giving each
    intermediate input a fresh `Input`, so that a sub-model can start mid-graph."""
    ordered, _ = _build_map(tree.flatten(inputs), tree.flatten(outputs))
    mapping, op_mapping = {}, {}
    new_inputs = []
    for x in tree.flatten(inputs):
        if _is_input_tensor(x):
            new_inputs.append(x)
            mapping[id(x)] = x
            continue
        new_x = Input(batch_shape=x.shape, dtype=x.dtype, name=f"{x.name}CLONE")
        new_inputs.append(new_x)
        mapping[id(x)] = new_x
        op_mapping[id(x._keras_history[0])] = new_x._keras_history[0]
    new_outputs = []
    for x in tree.flatten(outputs):
        copy_x = KerasTensor(x.shape, x.dtype, name=f"{x.name}_clone")
        copy_x._keras_history = x._keras_history
        mapping[id(x)] = copy_x
        new_outputs.append(copy_x)

    def swap(x):
        if not isinstance(x, KerasTensor):
            return x
        if id(x) not in mapping:
            mapping[id(x)] = KerasTensor(x.shape, x.dtype, name=f"{x.name}_clone")
        return mapping[id(x)]

    for node in ordered:
        op = op_mapping.get(id(node.operation), node.operation)
        outs = tree.map_structure(swap, node.outputs)
        if isinstance(op, InputLayer):
            if op is not node.operation:
                continue  # the fresh Input already owns its node
            Node(op, outputs=outs)
        else:
            args = tree.map_structure(swap, list(node.call_args))
            kwargs = {k: tree.map_structure(swap, v) for k, v in node.call_kwargs.items()}
            Node(op, args, kwargs, outs)
    return (
        tree.pack_sequence_as(inputs, new_inputs),
        tree.pack_sequence_as(outputs, new_outputs),
    )


# ---------------------------------------------------------------------- config loading
def functional_like_constructor(cls) -> bool:
    """Whether `cls(inputs, outputs, name=...)` rebuilds an instance from a functional
    config (Functional itself, or a subclass with a compatible `__init__`)."""
    spec = inspect.getfullargspec(cls.__init__)
    if spec.args[1:] == inspect.getfullargspec(Functional.__init__).args[1:]:
        return True
    return spec.varargs is not None and spec.varkw is not None


def _deserialize_node(node_data, created):
    """`(args, kwargs)` for re-calling a layer from a saved node; IndexError while a node it
    reads from has not been rebuilt yet."""
    if isinstance(node_data, list):  # tf.keras 2: [[layer_name, node_index, tensor_index, kw]]
        tensors, kwargs = [], {}
        for entry in node_data:
            name, node_index, tensor_index = entry[0], entry[1], entry[2]
            if len(entry) == 4:
                kwargs = entry[3]
            tensors.append(_saved_tensor(created, name, node_index, tensor_index))
        return [_unpack_singleton(tensors)], dict(kwargs)

    def revive(x):
        if isinstance(x, dict) and x.get("class_name") == "__keras_tensor__":
            name, node_index, tensor_index = x["config"]["keras_history"]
            return _saved_tensor(created, name, node_index, tensor_index)
        if isinstance(x, dict) and x.get("class_name") == "__slice__":
            return slice(*(x["config"].get(p) for p in ("start", "stop", "step")))
        if isinstance(x, dict) and x.get("class_name") == "__ellipsis__":
            return Ellipsis
        if isinstance(x, dict):
            return {k: revive(v) for k, v in x.items()}
        if isinstance(x, list):
            return [revive(v) for v in x]
        return x

    return revive(list(node_data.get("args", []))), revive(dict(node_data.get("kwargs", {})))


def _saved_tensor(created, layer_name, node_index, tensor_index):
    if layer_name not in created:
        raise ValueError(f"Invalid functional model configuration: unknown layer '{layer_name}'.")
    layer = created[layer_name]
    if node_index >= len(layer._inbound_nodes):
        raise IndexError(f"Node {node_index} of layer '{layer_name}' does not exist yet.")
    return layer._inbound_nodes[node_index].outputs[tensor_index]


def functional_from_config(cls, config, custom_objects=None, make_layer=None):
    """Rebuilds a functional model from `get_config()` output by recreating each layer and
    re-calling it on the rebuilt tensors, in dependency order.

    Args:
        cls: the model class to instantiate (Functional or a compatible subclass).
        config: the functional config dict.
        custom_objects: optional dict of custom layer classes by name.
        make_layer: optional `fn(layer_config) -> layer` replacing deserialization (used by
            `clone_model`).
    """
    from keratron.models.serialization import deserialize_layer

    config = dict(config)
    try:
        layer_datas = config.pop("layers")
        input_spec = config.pop("input_layers")
        output_spec = config.pop("output_layers")
    except KeyError as e:
        raise ValueError(
            f"A functional model config needs 'layers', 'input_layers' and 'output_layers'; "
            f"missing {e}. Received keys: {sorted(config)}"
        ) from None
    name = config.pop("name", None)
    trainable = config.pop("trainable", None)
    created, pending = {}, {}
    for data in layer_datas:
        layer = make_layer(data) if make_layer else deserialize_layer(data, custom_objects)
        if not isinstance(layer, Layer):
            raise ValueError(
                f"Functional config: layer '{data.get('name')}' deserialized to "
                f"{type(layer).__name__}, expected a Layer."
            )
        created[data.get("name", layer.name)] = layer
        if data.get("inbound_nodes"):
            pending[data.get("name", layer.name)] = list(data["inbound_nodes"])
    order = [data.get("name") for data in layer_datas]
    while pending:
        progressed = False
        for layer_name in order:
            queue = pending.get(layer_name)
            if not queue:
                continue
            layer = created[layer_name]
            while queue:
                try:
                    args, kwargs = _deserialize_node(queue[0], created)
                except IndexError:
                    break
                layer(*args, **kwargs)
                queue.pop(0)
                progressed = True
            if not queue:
                del pending[layer_name]
        if not progressed:
            raise ValueError(
                "Invalid functional model configuration: the graph has loops or disconnected "
                f"nodes. Unresolved layers: {sorted(pending)}"
            )

    def tensor(spec):
        layer_name, node_index, tensor_index = spec
        layer = created.get(layer_name)
        if layer is None:
            raise ValueError(
                f"Invalid functional model configuration: unknown layer '{layer_name}'."
            )
        if isinstance(layer, Functional):
            node_index -= 1  # Keras numbers a nested model's calls from 1
        return layer._inbound_nodes[node_index].outputs[tensor_index]

    def map_specs(spec):
        if isinstance(spec, list) and len(spec) == 3 and isinstance(spec[0], str):
            return tensor(spec)
        if isinstance(spec, dict):
            return {k: map_specs(v) for k, v in spec.items()}
        return [map_specs(v) for v in spec]

    inputs = map_specs(input_spec)
    outputs = map_specs(output_spec)
    config.pop("dtype", None)
    return cls(inputs=inputs, outputs=outputs, name=name, trainable=trainable, **config)


# ---------------------------------------------------------------------- helpers
def _unpack_singleton(x):
    if isinstance(x, (list, tuple)) and len(x) == 1:
        return x[0]
    return x


def _flatten_shapes(shapes) -> list:
    """A shape or a structure of shapes -> a flat list of shape tuples."""
    if isinstance(shapes, (list, tuple)) and all(d is None or isinstance(d, int) for d in shapes):
        return [tuple(shapes)]
    if isinstance(shapes, dict):
        return [s for k in sorted(shapes, key=str) for s in _flatten_shapes(shapes[k])]
    return [s for v in shapes for s in _flatten_shapes(v)]
