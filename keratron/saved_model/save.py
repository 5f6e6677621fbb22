"""Writing a traced, optimised serving graph (what `keratron.autodiff.tracing.Trace.compile`
returns) to an export directory as data (see `_format.py`)."""

from __future__ import annotations

import json
import os

import h5py
import numpy as np
import torch

from keratron.saved_model import _format as fmt

__all__ = ["write_serving_graph"]


def _array(t: torch.Tensor) -> np.ndarray:
    t = t.detach()
    if t.dtype is torch.bfloat16:
        t = t.float()
    return t.cpu().numpy()


def write_serving_graph(export_dir, compiled, inputs, signatures, variable_names, batch_size):
    """Writes `compiled` into `export_dir` (which must exist and be empty).

    Args:
        export_dir: the directory.
        compiled: the optimised graph, traced with the serving inputs as its only inputs.
        inputs: dict of input name -> (Tracer, is_string), in signature order.
        signatures: dict of signature name -> dict of output key -> output index in
            `compiled`'s outputs, or (output index, vocabulary) for string outputs.
        variable_names: dict id(Variable) -> name for the captured variables.
        batch_size: the batch size the graph was traced with.

    Raises:
        ValueError: if the graph has side effects (assignments, opaque updates), which a
            serving graph must not have, or an output is not a tensor.
        TypeError: if a primitive parameter cannot be stored as data.
    """
    graph = compiled.graph
    for node in graph.nodes:
        if node.kind != "prim" or node.prim.effect:
            what = node.prim.name if node.prim is not None else node.kind
            raise ValueError(
                f"export: the serving graph has a side effect ({what}); the PREDICT mode of "
                "the model_fn must not assign variables, update metrics or draw random numbers."
            )
    out_slots = []
    for kind, value in compiled.out_items:
        if kind != "slot":
            raise ValueError(f"export: an output is not a tensor: {value!r}")
        out_slots.append(value)
    used = {s for n in graph.nodes for s in n.inputs if s is not None} | set(out_slots)
    values, datasets = {}, {}
    for slot, var in graph.captures.items():
        if slot not in used:
            continue
        name = variable_names.get(id(var), var.path)
        key = f"variables/{name}"
        values[str(slot)] = {"kind": "variable", "name": name, "dataset": key}
        datasets[key] = var._value
    for slot, const in graph.consts.items():
        if slot not in used:
            continue
        key = f"constants/{slot}"
        values[str(slot)] = {"kind": "constant", "dataset": key}
        datasets[key] = const
    for entry in values.values():
        t = datasets[entry["dataset"]]
        entry["shape"] = list(t.shape)
        entry["dtype"] = fmt.torch_dtype_name(t.dtype)
    input_specs = {}
    for name, (tracer, is_string) in inputs.items():
        slot = graph.slot(tracer)
        shape, dtype = graph.avals[slot]
        input_specs[name] = {
            "slot": slot,
            "shape": list(shape),
            "dtype": fmt.torch_dtype_name(dtype),
            "strings": bool(is_string),
        }
    if sorted(s["slot"] for s in input_specs.values()) != sorted(graph.inputs):
        raise ValueError(
            "export: the serving graph's inputs must be exactly the receiver tensors of the "
            "ServingInputReceiver (a placeholder was created but not listed, or listed twice)."
        )
    sigs = {}
    for sig_name, outputs in signatures.items():
        outs = {}
        for key, ref in outputs.items():
            index, vocabulary = ref if isinstance(ref, tuple) else (ref, None)
            slot = out_slots[index]
            shape, dtype = graph.avals[slot]
            entry = {
                "slot": slot,
                "shape": list(shape),
                "dtype": fmt.torch_dtype_name(dtype),
                "batched": bool(shape) and shape[0] == batch_size,
            }
            if vocabulary is not None:
                entry["vocabulary"] = list(vocabulary)
            outs[key] = entry
        sigs[sig_name] = {"inputs": list(inputs), "outputs": outs}
    nodes = []
    for i, node in enumerate(graph.nodes):
        where = f"node {i} ({node.prim.name})"
        nodes.append(
            {
                "op": node.prim.name,
                "params": {
                    k: fmt.encode_param(v, f"{where} param {k!r}") for k, v in node.params.items()
                },
                "inputs": list(node.inputs),
                "outputs": list(node.outputs),
            }
        )
    avals = {
        str(s): [list(shape), fmt.torch_dtype_name(dtype)]
        for s, (shape, dtype) in graph.avals.items()
        if s in used or any(s in n["outputs"] for n in nodes)
    }
    doc = {
        "format": fmt.FORMAT,
        "version": fmt.VERSION,
        "batch_size": int(batch_size),
        "num_slots": int(graph.num_slots),
        "inputs": input_specs,
        "signatures": sigs,
        "values": values,
        "nodes": nodes,
        "avals": avals,
    }
    os.makedirs(os.path.join(export_dir, fmt.WEIGHTS_DIR), exist_ok=True)
    with h5py.File(os.path.join(export_dir, fmt.WEIGHTS_FILE), "w") as f:
        f.attrs["format"] = fmt.FORMAT
        for key, t in datasets.items():
            ds = f.create_dataset(key, data=_array(t))
            ds.attrs["dtype"] = fmt.torch_dtype_name(t.dtype)
    with open(os.path.join(export_dir, fmt.GRAPH_FILE), "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1)
    return doc
