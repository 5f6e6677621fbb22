"""`ExportArchive`: serving endpoints of a model, written for inference as Keras's is.

Keras writes a TensorFlow SavedModel (reloaded with `tf.saved_model.load`). keratron has no
TensorFlow backend, so the archive is written in keratron's own saved-model format instead:
each endpoint is traced with its input signature into a serving graph, optimised and stored
as data (`keratron.saved_model`'s layout: graph JSON plus an HDF5 file of the values it
reads), and nothing in the archive is executed when it is loaded. The directory holds:

- `saved_model.json`, `variables/variables.h5`: the first endpoint (also its
  "serving_default" signature), so `keratron.saved_model.load(path)` serves it;
- `endpoints/<name>/`: every endpoint, in the same layout;
- `variable_collections.h5`: the tracked variables and the variable collections;
- `keratron_export.json`: the index that `load_archive` reads (endpoints, their inputs and
  output structures, collections).

`load_archive(path)` returns an object with one method per endpoint and one attribute per
variable collection, as the object `tf.saved_model.load` returns for a Keras archive.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile

import h5py
import numpy as np

from keratron.autodiff import tree
from keratron.autodiff.dtypes import standardize_dtype
from keratron.autodiff.tensor import Tensor, Variable, convert_to_tensor
from keratron.autodiff.tracing import Trace
from keratron.layers import Layer
from keratron.saved_model import GRAPH_FILE, WEIGHTS_DIR
from keratron.saved_model import load as load_saved_model
from keratron.saved_model.save import write_serving_graph

__all__ = ["ExportArchive", "load_archive"]

INDEX_FILE = "keratron_export.json"
COLLECTIONS_FILE = "variable_collections.h5"
FORMAT = "keratron.export"
VERSION = 1
# The batch size a signature with an unknown batch dimension is traced with; calls with other
# batch sizes run in chunks of it (see `keratron.saved_model.Signature`).
TRACE_BATCH_SIZE = 32


def _spec_of(spec, where: str) -> tuple:
    """(shape, dtype name) of an InputSpec, KerasTensor, tensor spec, tensor or array."""
    shape = getattr(spec, "shape", None)
    dtype = getattr(spec, "dtype", None)
    if shape is None:
        raise ValueError(
            f"ExportArchive.add_endpoint: {where} must be an InputSpec, KerasTensor, tensor spec "
            f"or tensor with a shape. Received: {spec!r}"
        )
    shape = tuple(None if d is None else int(d) for d in tuple(shape))
    dtype = getattr(dtype, "name", dtype) if dtype is not None else "float32"
    return shape, standardize_dtype(dtype)


class ExportArchive:
    """Collects serving endpoints and variables, and writes them for inference (Keras's
    `keras.export.ExportArchive`, in keratron's saved-model format; see the module docstring).

    Only the batch dimension (the first) of an input signature may be unknown (None): each
    endpoint is traced once into a fixed graph, and calls with any batch size run in chunks
    of the traced one. Endpoints must be free of side effects (no variable updates, no
    random draws: call layers with `training=False`).

    Args:
        format: "saved_model" (the only format Keras's ExportArchive writes besides the
            abstract "neptune_model").

    Example:
        >>> import os, tempfile
        >>> model = keratron.Sequential([keratron.Input((3,)), keratron.layers.Dense(2)])
        >>> archive = keratron.export.ExportArchive()
        >>> archive.track(model)
        >>> serve = archive.add_endpoint("serve", model.call,
        ...     input_signature=[keratron.InputSpec(shape=(None, 3), dtype="float32")])
        >>> path = os.path.join(tempfile.mkdtemp(), "exported")
        >>> archive.write_out(path)  # doctest: +ELLIPSIS
        Saved artifact at '...exported'. The following endpoints are available:
        <BLANKLINE>
        * Endpoint 'serve'
          args_0: shape=(None, 3), dtype=float32
        >>> keratron.export.load_archive(path).serve(np.ones((2, 3), "float32")).shape
        (2, 2)
    """

    def __init__(self, format="saved_model"):
        if format == "neptune_model":
            raise NotImplementedError(
                "NeptuneExportArchive is an abstract class in Keras (its subclasses write "
                "Orbax/JAX artifacts); keratron has no JAX backend. Use format='saved_model'."
            )
        if format != "saved_model":
            raise ValueError(f"Unsupported format: {format}")
        self._endpoint_names: list[str] = []
        self._endpoints: dict[str, dict] = {}
        self._collections: dict[str, list] = {}
        self._tracked: list = []

    @property
    def variables(self) -> list:
        """The variables of the tracked layers."""
        return _unique(v for layer in self._tracked for v in layer.weights)

    @property
    def trainable_variables(self) -> list:
        return [v for v in self.variables if v.trainable]

    @property
    def non_trainable_variables(self) -> list:
        return [v for v in self.variables if not v.trainable]

    def track(self, resource) -> None:
        """Tracks the variables of a layer or model (built), which the reloaded archive
        exposes as `variables`, `trainable_variables` and `non_trainable_variables`.

        Raises:
            ValueError: for an unbuilt layer, or an object that is not a layer.
        """
        if not isinstance(resource, Layer):
            raise ValueError(
                "Invalid resource type. Expected a Keras `Layer` or `Model`. "
                f"Received object {resource} of type '{type(resource)}'. "
            )
        if not resource.built:
            raise ValueError(
                "The layer provided has not yet been built. It must be built before export."
            )
        if not any(r is resource for r in self._tracked):
            self._tracked.append(resource)

    def add_endpoint(self, name, fn, input_signature=None, **kwargs):
        """Registers a serving endpoint `name` computing `fn(*inputs)`.

        Args:
            name: the endpoint's name (a method of the reloaded archive).
            fn: a callable on tensors (`model.call`, a lambda calling the model...).
            input_signature: a list with one entry per positional argument of `fn`: an
                `InputSpec`, `KerasTensor`, tensor spec or tensor, or a list / dict of them.
            **kwargs: Keras's JAX-only `is_static` and `jax2tf_kwargs` are refused.

        Returns:
            `fn` itself (what the endpoint computes, callable eagerly).

        Raises:
            ValueError: for a taken name, a missing input signature, an unknown non-batch
                dimension, or JAX-only arguments.
        """
        if name in self._endpoint_names:
            raise ValueError(f"Endpoint name '{name}' is already taken.")
        if "jax2tf_kwargs" in kwargs or "is_static" in kwargs:
            raise ValueError(
                "'jax2tf_kwargs' and 'is_static' are only supported with the jax backend. "
                "Current backend: keratron"
            )
        if kwargs:
            raise ValueError(f"add_endpoint: unknown arguments {sorted(kwargs)}.")
        if input_signature is None:
            raise ValueError(
                "You must provide an `input_signature` argument to specify the shape and dtype "
                "of the function arguments. Example:\n\n"
                "export_archive.add_endpoint(\n"
                "    name='call',\n"
                "    fn=model.call,\n"
                "    input_signature=[\n"
                "        keras.InputSpec(\n"
                "            shape=(None, 224, 224, 3),\n"
                "            dtype='float32',\n"
                "        )\n"
                "    ],\n"
                ")"
            )
        if not isinstance(input_signature, (list, tuple)):
            input_signature = [input_signature]
        flat = tree.flatten(list(input_signature))
        specs = [_spec_of(s, f"input {i} of endpoint '{name}'") for i, s in enumerate(flat)]
        for i, (shape, _) in enumerate(specs):
            if any(d is None for d in shape[1:]):
                raise ValueError(
                    f"ExportArchive.add_endpoint: input {i} of endpoint '{name}' has shape "
                    f"{shape}; only the first (batch) dimension may be None, because keratron "
                    "traces each endpoint into a fixed-shape graph."
                )
        batch_sizes = {shape[0] for shape, _ in specs if shape and shape[0] is not None}
        if len(batch_sizes) > 1:
            raise ValueError(
                f"ExportArchive.add_endpoint: the inputs of endpoint '{name}' have different "
                f"batch sizes {sorted(batch_sizes)}."
            )
        self._endpoints[name] = {
            "fn": fn,
            "structure": list(input_signature),
            "specs": specs,
            "batch_size": batch_sizes.pop() if batch_sizes else TRACE_BATCH_SIZE,
        }
        self._endpoint_names.append(name)
        return fn

    def track_and_add_endpoint(self, name, resource, input_signature, **kwargs):
        """`track(resource)`, then `add_endpoint(name, resource.__call__, input_signature)`."""
        self.track(resource)
        return self.add_endpoint(name, resource.__call__, input_signature, **kwargs)

    def add_variable_collection(self, name, variables) -> None:
        """Registers variables that the reloaded archive exposes as the attribute `name`.

        Raises:
            ValueError: if `variables` is not a list/tuple/set of Variables.
        """
        if not isinstance(variables, (list, tuple, set)):
            raise ValueError(
                "Expected `variables` to be a list/tuple/set. "
                f"Received instead object of type '{type(variables)}'."
            )
        if not all(isinstance(v, Variable) for v in variables):
            raise ValueError(
                "Expected all elements in `variables` to be `Variable` instances. Found "
                f"instead the following types: {list({type(v) for v in variables})}"
            )
        self._collections[name] = list(variables)

    def write_out(self, filepath, options=None, verbose=True) -> None:
        """Writes the archive to the directory `filepath` (see the module docstring).

        The first endpoint is also the "serving_default" signature (unless an endpoint has
        that name). The write is atomic: a temporary directory is renamed into place; an
        existing keratron archive at `filepath` is replaced.

        Args:
            filepath: a directory path (str or pathlib.Path); it must not exist, be empty, or
                hold an earlier keratron archive.
            options: accepted for Keras compatibility (TensorFlow's SaveOptions); unused.
            verbose: print the endpoints written.

        Raises:
            ValueError: with no endpoint, or an endpoint with side effects.
        """
        del options
        if not self._endpoint_names:
            raise ValueError("No endpoints have been set yet. Call add_endpoint().")
        filepath = os.fspath(filepath)
        if os.path.exists(filepath) and (
            not os.path.isdir(filepath)
            or (os.listdir(filepath) and not os.path.isfile(os.path.join(filepath, INDEX_FILE)))
        ):
            raise ValueError(
                f"ExportArchive.write_out: '{filepath}' exists and is not an empty directory "
                "or an earlier keratron archive; choose another path."
            )
        parent = os.path.dirname(os.path.abspath(filepath))
        os.makedirs(parent, exist_ok=True)
        tmp = tempfile.mkdtemp(prefix=".export-", dir=parent)
        try:
            index = self._write(tmp)
            if os.path.isdir(filepath):
                shutil.rmtree(filepath)
            os.replace(tmp, filepath)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        if verbose:
            lines = [f"Saved artifact at '{filepath}'. The following endpoints are available:"]
            for name, entry in index["endpoints"].items():
                lines.append(f"\n* Endpoint '{name}'")
                for arg, (shape, dtype) in zip(entry["inputs"], entry["input_specs"]):
                    lines.append(f"  {arg}: shape={tuple(shape)}, dtype={dtype}")
            print("\n".join(lines))

    # ------------------------------------------------------------------ writing
    def _write(self, directory) -> dict:
        default = (
            "serving_default"
            if "serving_default" in self._endpoint_names
            else self._endpoint_names[0]
        )
        index = {"format": FORMAT, "version": VERSION, "default": default, "endpoints": {}}
        for name in self._endpoint_names:
            target = os.path.join(directory, "endpoints", name)
            os.makedirs(target)
            index["endpoints"][name] = self._write_endpoint(name, target, name == default)
            if name == default:
                # The default endpoint also sits at the top, where keratron.saved_model.load
                # finds it.
                shutil.copyfile(
                    os.path.join(target, GRAPH_FILE), os.path.join(directory, GRAPH_FILE)
                )
                shutil.copytree(
                    os.path.join(target, WEIGHTS_DIR), os.path.join(directory, WEIGHTS_DIR)
                )
        index["collections"] = self._write_collections(os.path.join(directory, COLLECTIONS_FILE))
        with open(os.path.join(directory, INDEX_FILE), "w", encoding="utf-8") as f:
            json.dump(index, f, indent=1)
        return index

    def _write_endpoint(self, name, target, also_default=False) -> dict:
        entry = self._endpoints[name]
        batch = entry["batch_size"]
        trace = Trace()
        placeholders = [
            trace.placeholder(tuple(batch if d is None else d for d in shape), dtype)
            for shape, dtype in entry["specs"]
        ]
        args = tree.pack_sequence_as(entry["structure"], placeholders)
        with trace:
            outputs = entry["fn"](*args)
        flat_out = tree.flatten(outputs)
        for o in flat_out:
            if not isinstance(o, Tensor):
                raise ValueError(
                    f"ExportArchive: endpoint '{name}' returned {type(o).__name__}; an "
                    "endpoint must return tensors (or a list / dict of them)."
                )
        compiled = trace.compile(flat_out)
        for node in compiled.graph.nodes:
            if node.kind != "prim" or node.prim.effect:
                what = node.prim.name if node.prim is not None else node.kind
                raise ValueError(
                    f"ExportArchive: endpoint '{name}' has a side effect ({what}): a serving "
                    "endpoint must not update variables or draw random numbers (call layers "
                    "with training=False)."
                )
        input_names = [f"args_{i}" for i in range(len(placeholders))]
        keys = {f"output_{i}": i for i in range(len(flat_out))}
        signatures = {name: keys}
        if also_default and name != "serving_default":
            signatures["serving_default"] = keys
        names = _variable_names(trace.captured_variables())
        write_serving_graph(
            target,
            compiled,
            {n: (p, False) for n, p in zip(input_names, placeholders)},
            signatures,
            names,
            batch,
        )
        return {
            "path": os.path.join("endpoints", name),
            "inputs": input_names,
            "input_specs": [[list(shape), dtype] for shape, dtype in entry["specs"]],
            "input_structure": _structure_doc(entry["structure"]),
            "output_structure": _structure_doc(outputs),
        }

    def _write_collections(self, path) -> dict:
        groups = {
            "trainable_variables": self.trainable_variables,
            "non_trainable_variables": self.non_trainable_variables,
            **self._collections,
        }
        doc = {}
        with h5py.File(path, "w") as f:
            for group_name, variables in groups.items():
                g = f.create_group(group_name)
                doc[group_name] = []
                for i, v in enumerate(variables):
                    value = v._value.detach().float() if v.dtype == "bfloat16" else v._value
                    ds = g.create_dataset(str(i), data=value.detach().cpu().numpy())
                    ds.attrs["path"] = v.path
                    ds.attrs["dtype"] = v.dtype
                    ds.attrs["trainable"] = bool(v.trainable)
                    doc[group_name].append(v.path)
        return doc


def _unique(variables) -> list:
    seen, out = set(), []
    for v in variables:
        if id(v) not in seen:
            seen.add(id(v))
            out.append(v)
    return out


def _variable_names(variables) -> dict:
    """id(Variable) -> a unique dataset name (its path, numbered when two paths clash)."""
    names, used = {}, set()
    for v in variables:
        name, n = v.path, 1
        while name in used:
            name = f"{v.path}_{n}"
            n += 1
        used.add(name)
        names[id(v)] = name
    return names


def _structure_doc(structure):
    """The nesting of `structure` as JSON, leaves numbered in `tree.flatten` order."""
    counter = iter(range(len(tree.flatten(structure))))

    def walk(x):
        if isinstance(x, dict):
            return {"dict": {str(k): walk(x[k]) for k in sorted(x, key=str)}}
        if isinstance(x, (list, tuple)):
            return {"list" if isinstance(x, list) else "tuple": [walk(e) for e in x]}
        return next(counter)

    return walk(structure)


def _unflatten(doc, flat):
    if isinstance(doc, int):
        return flat[doc]
    if "dict" in doc:
        return {k: _unflatten(v, flat) for k, v in doc["dict"].items()}
    items = [_unflatten(v, flat) for v in doc.get("list", doc.get("tuple", []))]
    return items if "list" in doc else tuple(items)


class _Endpoint:
    """A reloaded endpoint: called with the endpoint's positional arguments, it returns the
    outputs in the structure the exported function returned."""

    def __init__(self, name, signature, entry):
        self.name = name
        self._signature = signature
        self._inputs = entry["inputs"]
        self._input_structure = entry["input_structure"]
        self._output_structure = entry["output_structure"]
        self.input_signature = [(tuple(shape), dtype) for shape, dtype in entry["input_specs"]]

    def __call__(self, *args):
        flat = tree.flatten(list(args))
        if len(flat) != len(self._inputs):
            raise ValueError(
                f"Endpoint '{self.name}' takes {len(self._inputs)} input tensors "
                f"(signature {self.input_signature}); received {len(flat)}."
            )
        outputs = self._signature(**dict(zip(self._inputs, flat)))
        flat_out = [outputs[f"output_{i}"] for i in range(len(outputs))]
        return _unflatten(self._output_structure, flat_out)

    def __repr__(self):
        return f"<Endpoint {self.name} inputs={self.input_signature}>"


class _ReloadedArchive:
    """What `load_archive` returns: one method per endpoint, one attribute per collection."""

    def __init__(self, path, index, collections):
        self._path = path
        self.endpoint_names = list(index["endpoints"])
        for name, entry in index["endpoints"].items():
            loaded = load_saved_model(os.path.join(path, entry["path"]))
            setattr(self, name, _Endpoint(name, loaded.signatures[name], entry))
        if "serving_default" not in index["endpoints"]:
            self.serving_default = getattr(self, index["default"])
        for name, variables in collections.items():
            setattr(self, name, variables)
        self.variables = self.trainable_variables + self.non_trainable_variables

    def __repr__(self):
        return f"<ReloadedArchive '{self._path}' endpoints={self.endpoint_names}>"


def load_archive(filepath):
    """Loads an archive written by `ExportArchive.write_out` (keratron's counterpart of
    `tf.saved_model.load` for a Keras archive).

    Args:
        filepath: the archive directory.

    Returns:
        An object with a method per endpoint (taking the endpoint's positional inputs and
        returning keratron Tensors in the exported structure), `serving_default`, an
        attribute per variable collection (lists of Variables), and `variables`,
        `trainable_variables`, `non_trainable_variables` of the tracked layers.

    Raises:
        FileNotFoundError: if `filepath` holds no archive index.
        ValueError: if the archive is of another format or version, or inconsistent.

    Example:
        >>> import os, tempfile
        >>> model = keratron.Sequential([keratron.Input((3,)), keratron.layers.Dense(2)])
        >>> path = os.path.join(tempfile.mkdtemp(), "exported")
        >>> archive = keratron.export.ExportArchive()
        >>> serve = archive.track_and_add_endpoint(
        ...     "serve", model, input_signature=[keratron.InputSpec(shape=(None, 3))])
        >>> archive.write_out(path, verbose=False)
        >>> reloaded = keratron.export.load_archive(path)
        >>> reloaded.serve(np.ones((4, 3), "float32")).shape
        (4, 2)
    """
    path = os.fspath(filepath)
    index_file = os.path.join(path, INDEX_FILE)
    if not os.path.isfile(index_file):
        raise FileNotFoundError(
            f"load_archive: no file '{index_file}' (is '{path}' an ExportArchive directory?)."
        )
    with open(index_file, encoding="utf-8") as f:
        index = json.load(f)
    if not isinstance(index, dict) or index.get("format") != FORMAT:
        raise ValueError(f"load_archive: '{index_file}' is not a keratron export archive.")
    if index.get("version") != VERSION:
        raise ValueError(
            f"load_archive: '{index_file}' has format version {index.get('version')!r}; this "
            f"keratron reads version {VERSION}."
        )
    collections = {}
    with h5py.File(os.path.join(path, COLLECTIONS_FILE), "r") as f:
        for name, paths in index["collections"].items():
            variables = []
            for i, var_path in enumerate(paths):
                ds = f[name][str(i)]
                dtype = ds.attrs["dtype"]
                dtype = dtype.decode() if isinstance(dtype, bytes) else str(dtype)
                value = convert_to_tensor(np.array(ds), dtype=dtype)
                v = Variable(
                    value,
                    dtype=dtype,
                    trainable=bool(ds.attrs["trainable"]),
                    name=var_path.rsplit("/", 1)[-1],
                )
                v.path = var_path
                variables.append(v)
            collections[name] = variables
    return _ReloadedArchive(path, index, collections)
