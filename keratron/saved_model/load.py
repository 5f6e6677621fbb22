"""`keratron.saved_model.load`: an exported serving graph back as callable signatures.

The loader reads the JSON graph and the HDF5 weights, checks them, and runs the nodes in
order by looking each primitive up by name in `keratron.autodiff.primitive.PRIMITIVES` and
calling it through the op dispatcher (Triton kernels on CUDA where they apply, the torch
implementation otherwise). Nothing from the directory is executed as code.
"""

from __future__ import annotations

import json
import os

import h5py
import numpy as np
import torch

from keratron import config
from keratron.autodiff.tensor import Tensor
from keratron.saved_model import _format as fmt

__all__ = ["load", "LoadedModel", "Signature"]


class _Program:
    """The decoded graph: what to run, shared by every signature of one export."""

    def __init__(self, path, doc, weights):
        from keratron import ops  # noqa: F401  (registers every primitive)
        from keratron.autodiff.primitive import PRIMITIVES

        self.path = path
        self.batch_size = int(doc["batch_size"])
        self.num_slots = int(doc["num_slots"])
        device = torch.device(config.default_device())
        self.values = {}
        for slot, entry in doc["values"].items():
            key = entry["dataset"]
            if key not in weights:
                raise ValueError(f"saved_model.load: '{path}': the weights file lacks {key!r}.")
            array = weights[key]
            if list(array.shape) != list(entry["shape"]):
                raise ValueError(
                    f"saved_model.load: '{path}': {key!r} has shape {list(array.shape)}, the "
                    f"graph expects {entry['shape']}."
                )
            dtype = fmt.torch_dtype_from_name(entry["dtype"])
            self.values[_slot(slot, self.num_slots, path)] = torch.from_numpy(
                np.ascontiguousarray(array)
            ).to(device=device, dtype=dtype)
        self.variables = {
            e["name"]: self.values[int(s)]
            for s, e in doc["values"].items()
            if e["kind"] == "variable"
        }
        self.inputs = {}
        for name, spec in doc["inputs"].items():
            self.inputs[name] = (
                _slot(spec["slot"], self.num_slots, path),
                tuple(int(d) for d in spec["shape"]),
                fmt.torch_dtype_from_name(spec["dtype"]),
                bool(spec.get("strings", False)),
            )
        self.steps = []
        last_use = {}
        for i, node in enumerate(doc["nodes"]):
            name = node.get("op")
            prim = PRIMITIVES.get(name)
            if prim is None:
                raise ValueError(
                    f"saved_model.load: '{path}': node {i} uses the primitive {name!r}, which "
                    "this version of keratron does not have."
                )
            where = f"'{path}' node {i} ({name})"
            params = {k: fmt.decode_param(v, where) for k, v in node.get("params", {}).items()}
            ins = [None if s is None else _slot(s, self.num_slots, path) for s in node["inputs"]]
            outs = [_slot(s, self.num_slots, path) for s in node["outputs"]]
            if len(outs) != (len(outs) if prim.multiple_results else 1):
                raise ValueError(f"saved_model.load: {where} has {len(outs)} outputs.")
            for s in ins:
                if s is not None:
                    last_use[s] = i
            self.steps.append((prim, params, ins, outs))
        keep = set(self.values) | {v[0] for v in self.inputs.values()}
        self.free = [
            [s for s in set(ins) if s is not None and last_use.get(s) == i and s not in keep]
            for i, (_, _, ins, _) in enumerate(self.steps)
        ]

    def run(self, feeds: dict, wanted: set) -> dict:
        from keratron.autodiff import primitive

        execute = primitive.executor()
        env = [None] * self.num_slots
        for s, v in self.values.items():
            env[s] = v
        for s, v in feeds.items():
            env[s] = v
        with torch.no_grad():
            for (prim, params, ins, outs), free in zip(self.steps, self.free):
                vals = [None if s is None else env[s] for s in ins]
                res = execute(prim, vals, params)
                if prim.multiple_results:
                    for s, v in zip(outs, res):
                        env[s] = v
                else:
                    env[outs[0]] = res
                for s in free:
                    if s not in wanted:
                        env[s] = None
        return {s: env[s] for s in wanted}


def _slot(s, n, path) -> int:
    if isinstance(s, str) and s.isdigit():
        s = int(s)
    if not isinstance(s, int) or isinstance(s, bool) or not 0 <= s < n:
        raise ValueError(f"saved_model.load: '{path}': slot {s!r} is out of range.")
    return s


class Signature:
    """One exported signature: call it with keyword inputs; returns a dict of outputs
    (keratron Tensors; string outputs as numpy arrays of bytes).

    Any batch size works: other sizes than the traced one run in chunks of it.
    """

    def __init__(self, program: _Program, name: str, spec: dict):
        self._program = program
        self.name = name
        self.input_names = list(spec["inputs"])
        unknown = [n for n in self.input_names if n not in program.inputs]
        if unknown:
            raise ValueError(
                f"saved_model.load: signature {name!r} names unknown inputs {unknown}."
            )
        self._outputs = {}
        for key, out in spec["outputs"].items():
            self._outputs[key] = (
                _slot(out["slot"], program.num_slots, program.path),
                bool(out.get("batched", False)),
                None if out.get("vocabulary") is None else [str(v) for v in out["vocabulary"]],
            )

    @property
    def structured_outputs(self) -> list:
        return list(self._outputs)

    @property
    def structured_input_signature(self) -> dict:
        return {
            n: (
                self._program.inputs[n][1],
                "string"
                if self._program.inputs[n][3]
                else str(self._program.inputs[n][2]).replace("torch.", ""),
            )
            for n in self.input_names
        }

    def _convert(self, name, value):
        slot, shape, dtype, strings = self._program.inputs[name]
        from keratron.feature_column import is_string_array, strings_to_fingerprints

        if strings:
            if not is_string_array(value):
                raise TypeError(
                    f"Signature {self.name!r}: input {name!r} takes strings. Received: "
                    f"{type(value).__name__}"
                )
            t = torch.from_numpy(strings_to_fingerprints(value))
        elif isinstance(value, Tensor):
            t = value._value
        elif isinstance(value, torch.Tensor):
            t = value.detach()
        else:
            t = torch.as_tensor(np.asarray(value))
        if tuple(t.shape[1:]) != shape[1:] or t.dim() != len(shape):
            raise ValueError(
                f"Signature {self.name!r}: input {name!r} expects shape (batch,) + "
                f"{shape[1:]}, received {tuple(t.shape)}."
            )
        return t.to(device=torch.device(config.default_device()), dtype=dtype)

    def __call__(self, *args, **kwargs):
        if args:
            if len(args) > len(self.input_names):
                raise TypeError(
                    f"Signature {self.name!r} takes {len(self.input_names)} inputs "
                    f"{self.input_names}; received {len(args)} positional arguments."
                )
            kwargs = {**dict(zip(self.input_names, args)), **kwargs}
        missing = [n for n in self.input_names if n not in kwargs]
        extra = [n for n in kwargs if n not in self.input_names]
        if missing or extra:
            raise ValueError(
                f"Signature {self.name!r} takes the inputs {self.input_names}. Missing: "
                f"{missing}; unexpected: {extra}."
            )
        feeds = {n: self._convert(n, kwargs[n]) for n in self.input_names}
        sizes = {t.shape[0] for t in feeds.values() if t.dim()}
        if len(sizes) > 1:
            raise ValueError(
                f"Signature {self.name!r}: inputs have different batch sizes {sorted(sizes)}."
            )
        n = sizes.pop() if sizes else self._program.batch_size
        b = self._program.batch_size
        wanted = {slot for slot, _, _ in self._outputs.values()}
        chunks = []
        for start in range(0, max(n, 1), b) if n != b else [0]:
            part = {}
            for name, t in feeds.items():
                piece = t[start : start + b] if n != b else t
                if piece.shape[0] < b:
                    # Pad with copies of the last row; the padded rows' outputs are dropped.
                    pad = piece[-1:].expand(b - piece.shape[0], *piece.shape[1:])
                    piece = torch.cat([piece, pad], dim=0)
                part[self._program.inputs[name][0]] = piece
            chunks.append(self._program.run(part, wanted))
        result = {}
        for key, (slot, batched, vocabulary) in self._outputs.items():
            if batched:
                value = (
                    torch.cat([c[slot] for c in chunks], dim=0)[:n] if n != b else chunks[0][slot]
                )
            else:
                value = chunks[0][slot]
            if vocabulary is not None:
                table = np.array([v.encode("utf-8") for v in vocabulary], dtype=object)
                result[key] = table[value.cpu().numpy().astype(np.int64)]
            else:
                result[key] = Tensor(value)
        return result


class LoadedModel:
    """An exported model: `signatures` (name -> `Signature`), `variables` (name -> Tensor);
    calling it runs the "serving_default" signature."""

    def __init__(self, program: _Program, signatures: dict):
        self._program = program
        self.signatures = signatures
        self.variables = {k: Tensor(v) for k, v in program.variables.items()}

    def __call__(self, *args, **kwargs):
        if "serving_default" not in self.signatures:
            raise ValueError(
                f"This export has no 'serving_default' signature; use one of "
                f"{sorted(self.signatures)} through `signatures[...]`."
            )
        return self.signatures["serving_default"](*args, **kwargs)


def load(export_dir, tags=None, options=None) -> LoadedModel:
    """Loads a model written by `Estimator.export_saved_model`.

    Args:
        export_dir: the export directory (str, bytes or path).
        tags, options: accepted for TensorFlow compatibility; unused.

    Returns:
        A `LoadedModel`.

    Raises:
        FileNotFoundError: if the directory or one of its files is missing.
        ValueError: if a file is not a keratron export or is inconsistent.

    Example:
        >>> import os, tempfile
        >>> model = keratron.Sequential([keratron.Input((4,)), keratron.layers.Dense(2)])
        >>> export_path = os.path.join(tempfile.mkdtemp(), "export")
        >>> archive = keratron.export.ExportArchive()
        >>> serve = archive.track_and_add_endpoint(
        ...     "serve", model, input_signature=[keratron.InputSpec(shape=(None, 4))])
        >>> archive.write_out(export_path, verbose=False)
        >>> loaded = keratron.saved_model.load(export_path)
        >>> loaded.signatures["serving_default"](np.zeros((2, 4), "float32"))["output_0"].shape
        (2, 2)
    """
    del tags, options
    path = os.fsdecode(export_dir)
    graph_file = os.path.join(path, fmt.GRAPH_FILE)
    weights_file = os.path.join(path, fmt.WEIGHTS_FILE)
    for f in (graph_file, weights_file):
        if not os.path.isfile(f):
            raise FileNotFoundError(f"saved_model.load: no file '{f}' (is '{path}' an export?).")
    try:
        with open(graph_file, encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        raise ValueError(f"saved_model.load: '{graph_file}' is not valid JSON: {e}") from None
    if not isinstance(doc, dict) or doc.get("format") != fmt.FORMAT:
        raise ValueError(f"saved_model.load: '{graph_file}' is not a keratron saved model.")
    if doc.get("version") != fmt.VERSION:
        raise ValueError(
            f"saved_model.load: '{graph_file}' has format version {doc.get('version')!r}; this "
            f"keratron reads version {fmt.VERSION}."
        )
    try:
        with h5py.File(weights_file, "r") as h:
            weights = {}
            for entry in doc["values"].values():
                key = entry["dataset"]
                if key in h:
                    weights[key] = np.array(h[key])
        program = _Program(path, doc, weights)
        signatures = {
            name: Signature(program, name, spec) for name, spec in doc["signatures"].items()
        }
    except (KeyError, TypeError) as e:
        raise ValueError(f"saved_model.load: '{path}' is malformed: missing or bad {e}") from None
    except OSError as e:
        raise ValueError(f"saved_model.load: '{weights_file}' cannot be read: {e}") from None
    return LoadedModel(program, signatures)
