"""The tf.keras 2 HDF5 weights layout (`model.save_weights("x.h5")`, and `model_weights` in
`model.save("x.h5")`).

The layout, as tf.keras 2 and Keras 3's legacy writer produce it:

- attributes `layer_names` (one entry per layer of `model.layers`), `backend`, `keras_version`;
- one group per layer (created in name order) with a `weight_names` attribute listing its
  weights in trainable-then-non-trainable order, each stored as a dataset at that name
  (`dense/kernel:0`, so inside the group `dense` the dataset is `dense/kernel:0`);
- a `top_level_model_weights` group for variables owned by the model itself;
- attributes longer than HDF5's 64 KB object-header limit split into numbered chunks
  (`layer_names0`, `layer_names1`, ...).

Reading collects and checks every value before anything is assigned, so a mismatch leaves the
model untouched. Files without the `:0` suffix (Keras 3's legacy writer) read the same way.
"""

from __future__ import annotations

import warnings

import numpy as np

__all__ = [
    "HDF5_OBJECT_HEADER_LIMIT",
    "KERAS_VERSION",
    "BACKEND_NAME",
    "WeightFileError",
    "StoredValue",
    "fixed_string",
    "stored_value",
    "read_values",
    "save_attributes_to_hdf5_group",
    "load_attributes_from_hdf5_group",
    "legacy_weights",
    "weight_names",
    "save_weights_to_hdf5_group",
    "load_weights_from_hdf5_group",
    "save_optimizer_weights_to_hdf5_group",
    "load_optimizer_weights_from_hdf5_group",
]

# HDF5 stores attributes in the object header, which holds at most 64 KB.
HDF5_OBJECT_HEADER_LIMIT = 64512
# The Keras release whose public API keratron follows; written where Keras writes its version.
KERAS_VERSION = "3.15.1"
BACKEND_NAME = "keratron"


class WeightFileError(ValueError):
    """A weights file whose layout or contents cannot be read (names the file)."""


def save_attributes_to_hdf5_group(group, name: str, data) -> None:
    """Stores a list of strings (bytes) as attribute `name`, split into `name0`, `name1`, ...
    when one attribute would exceed the HDF5 object-header limit.

    Raises:
        RuntimeError: if a single entry is longer than the limit (it cannot be stored).
    """
    too_long = [x for x in data if len(x) > HDF5_OBJECT_HEADER_LIMIT]
    if too_long:
        raise RuntimeError(
            "The following attributes cannot be saved to HDF5 file because they are larger "
            f"than {HDF5_OBJECT_HEADER_LIMIT} bytes: {too_long}"
        )
    # Fixed-length strings: HDF5 reads variable-length string attributes through its global
    # heap, which a corrupted file can send into an endless loop; Keras 3 and tf.keras read
    # both kinds the same.
    array = np.array(list(data), dtype="S")
    num_chunks = 1
    chunks = np.array_split(array, num_chunks)
    while any(c.nbytes > HDF5_OBJECT_HEADER_LIMIT for c in chunks):
        num_chunks += 1
        chunks = np.array_split(array, num_chunks)
    if num_chunks > 1:
        for i, chunk in enumerate(chunks):
            group.attrs[f"{name}{i}"] = chunk
    else:
        group.attrs[name] = array


def fixed_string(text: str):
    """`text` as a fixed-length HDF5 string (what `attrs[...]` stores for `np.bytes_`); texts
    too long for an object header stay variable-length, as Keras writes them."""
    data = text.encode("utf8")
    return np.bytes_(data) if len(data) <= HDF5_OBJECT_HEADER_LIMIT else data


def _decode(values) -> list:
    return [v.decode("utf8") if hasattr(v, "decode") else str(v) for v in values]


def load_attributes_from_hdf5_group(group, name: str) -> list:
    """Reads a string-list attribute written by `save_attributes_to_hdf5_group` (whole or
    chunked); an absent attribute reads as an empty list."""
    if name in group.attrs:
        return _decode(group.attrs[name])
    data, chunk = [], 0
    while f"{name}{chunk}" in group.attrs:
        data.extend(_decode(group.attrs[f"{name}{chunk}"]))
        chunk += 1
    return data


def legacy_weights(layer) -> list:
    """A layer's weights in the h5 order: trainable ones, then non-trainable ones."""
    return list(layer.trainable_weights) + list(layer.non_trainable_weights)


def _own_variables(layer) -> list:
    return list(layer._trainable_variables) + list(layer._non_trainable_variables)


def _is_functional(layer) -> bool:
    from keratron.models.functional import Functional

    return isinstance(layer, Functional)


def _variable_scopes(layer, prefix) -> dict:
    """id(variable) -> the name scopes Keras 3 gives it: the layers from `layer` down to the
    variable's owner, under `prefix`. A Functional model's layers are built on their own, so
    they start a fresh scope; a Sequential, subclassed model or layer adds its name."""
    scopes: dict = {}

    def visit(current, scope, seen):
        if id(current) in seen:
            return
        seen.add(id(current))
        for v in _own_variables(current):
            scopes.setdefault(id(v), scope)
        for sub in current._layers:
            base = [] if _is_functional(current) else scope
            visit(sub, base + ([] if _is_functional(sub) else [sub.name]), seen)

    visit(layer, list(prefix) + ([] if _is_functional(layer) else [layer.name]), set())
    return scopes


def weight_names(layer, weights=None, prefix=(), suffix: str = ":0") -> list:
    """The h5 names of a layer's weights, as Keras 3 paths plus `suffix`:
    `"bidirectional/forward_lstm/lstm_cell/kernel:0"`; `prefix` holds the enclosing scopes
    (the model's name for a Sequential or subclassed model)."""
    weights = legacy_weights(layer) if weights is None else weights
    scopes = _variable_scopes(layer, prefix)
    names = []
    for v in weights:
        scope = scopes.get(id(v), list(prefix) + [layer.name])
        base = str(v.name).split(":")[0]
        names.append("/".join(scope + [base]) + suffix)
    return names


def create_weight_dataset(group, name: str, value: np.ndarray) -> None:
    """Stores one weight. Non-empty arrays get a Fletcher-32 checksum per chunk, so a flipped
    bit fails the read instead of loading a wrong value (tf.keras and Keras 3 read them);
    HDF5 cannot chunk scalars or empty arrays, which are stored plain."""
    value = np.asarray(value)
    checksum = value.ndim > 0 and value.size > 0
    group.create_dataset(name, data=value, fletcher32=checksum)


def _write_values(group, names, values) -> None:
    save_attributes_to_hdf5_group(group, "weight_names", [n.encode("utf8") for n in names])
    for name, value in zip(names, values):
        create_weight_dataset(group, name, value)


def save_weights_to_hdf5_group(group, model) -> None:
    """Writes `model`'s weights into `group` in the tf.keras 2 layout."""
    layers = list(model.layers)
    save_attributes_to_hdf5_group(group, "layer_names", [x.name.encode("utf8") for x in layers])
    group.attrs["backend"] = fixed_string(BACKEND_NAME)
    group.attrs["keras_version"] = fixed_string(KERAS_VERSION)
    # A Sequential or subclassed model builds its layers under its own name; a Functional
    # model's layers are built before the model exists.
    prefix = [] if _is_functional(model) else [model.name]
    # Groups in name order, as Keras creates them (so that no name is a prefix of a later one).
    for layer in sorted(layers, key=lambda x: x.name):
        weights = legacy_weights(layer)
        _write_values(
            group.create_group(layer.name),
            weight_names(layer, weights, prefix),
            [w.numpy() for w in weights],
        )
    top = [v for v in _own_variables(model) if any(v is w for w in model.weights)]
    _write_values(
        group.create_group("top_level_model_weights"),
        [f"{model.name}/{str(v.name).split(':')[0]}:0" for v in top],
        [v.numpy() for v in top],
    )


class StoredValue:
    """A checked dataset, read only once everything in the file has been matched to the
    model: the shape is the dataset's declared one, `read()` returns the array."""

    def __init__(self, dataset, where: str, bfloat16: bool = False):
        self.dataset = dataset
        self.where = where
        self.shape = tuple(dataset.shape)
        self.bfloat16 = bfloat16

    def read(self) -> np.ndarray:
        value = np.asarray(self.dataset[()])
        if value.shape != self.shape:
            raise WeightFileError(f"{self.where} declares shape {self.shape}, read {value.shape}.")
        if self.bfloat16:
            # Keras writes bfloat16 through ml_dtypes: the stored bits are a float32's top half.
            raw = np.ascontiguousarray(value).view(np.uint16).astype(np.uint32) << 16
            value = raw.view(np.float32)
        return value


def _file_size(dataset) -> int | None:
    try:
        return int(dataset.file.id.get_filesize())
    except Exception:  # a driver that cannot tell
        return None


def stored_value(dataset, filepath, where: str, bfloat16: bool = False) -> StoredValue:
    """Checks what a dataset declares (its type, where its data lives, how much is stored)
    without reading its data.

    Raises:
        WeightFileError: for anything but a plain float, int, uint or bool array stored in the
            file itself, or one that claims more stored bytes than the file has.
    """
    label = f"Weights file '{filepath}': {where}"
    dtype = dataset.dtype
    if dtype.kind == "O":
        raise WeightFileError(
            f"{label} holds Python objects, which are not loaded (they would need pickle)."
        )
    # Keras 3 stores a bfloat16 weight as 2-byte opaque data (ml_dtypes' bfloat16, which h5py
    # does not know) and marks it with a dtype="bfloat16" attribute.
    bf16_opaque = bfloat16 and dtype.kind == "V" and dtype.itemsize == 2
    if (
        dtype.fields is not None
        or dtype.subdtype is not None
        or (dtype.kind not in "fiub" and not bf16_opaque)
    ):
        raise WeightFileError(
            f"{label} has dtype {dtype}; weights are stored as float, int, uint or bool arrays."
        )
    if dtype.itemsize > 8:
        raise WeightFileError(f"{label} has dtype {dtype}, wider than 64 bits.")
    if dataset.shape is None:
        raise WeightFileError(f"{label} has no dataspace (an empty HDF5 dataset).")
    if dataset.is_virtual or dataset.external:
        raise WeightFileError(
            f"{label} keeps its data outside the file (a virtual or external dataset), which "
            "weight files may not do."
        )
    file_size = _file_size(dataset)
    stored = int(dataset.id.get_storage_size())
    if file_size is not None and stored > file_size:
        raise WeightFileError(
            f"{label} claims {stored} stored bytes in a file of {file_size} bytes (the file is "
            "truncated or corrupted)."
        )
    return StoredValue(dataset, f"{label}", bfloat16)


def read_values(pairs) -> list:
    """`(variable, array)` for each `(variable, StoredValue)`: the data is read here, after
    every declared shape and type has been checked."""
    return [(variable, value.read()) for variable, value in pairs]


def _read_group_values(group, filepath, where) -> list:
    """The checked datasets listed in a group's `weight_names`, in that order (not read)."""
    import h5py

    names = load_attributes_from_hdf5_group(group, "weight_names")
    values = []
    for name in names:
        link = group.get(name, getlink=True)
        if isinstance(link, (h5py.SoftLink, h5py.ExternalLink)):
            raise WeightFileError(
                f"Weights file '{filepath}': {where} lists weight '{name}' as a "
                f"{type(link).__name__}; links are not allowed in weight files."
            )
        dataset = group.get(name)
        if not isinstance(dataset, h5py.Dataset):
            raise WeightFileError(
                f"Weights file '{filepath}': {where} lists weight '{name}' but the file has no "
                "dataset of that name (the file is incomplete or not a Keras weights file)."
            )
        values.append(stored_value(dataset, filepath, f"weight '{name}' in {where}"))
    return values


def _check_shapes(pairs, what, skip_mismatch, assignments) -> None:
    """Appends (variable, value) to `assignments`, raising (or warning) on a shape mismatch."""
    for variable, value in pairs:
        expected = tuple(variable.shape)
        received = tuple(value.shape)
        if expected != received:
            message = (
                f"Shape mismatch in {what} for weight {variable.path}. Weight expects shape "
                f"{expected}. Received saved weight with shape {received}"
            )
            if skip_mismatch:
                warnings.warn(f"Skipping loading weights: {message}", stacklevel=4)
                continue
            raise ValueError(message)
        assignments.append((variable, value))


def load_weights_from_hdf5_group(
    group, model, filepath, by_name=False, skip_mismatch=False
) -> list:
    """Reads and checks the weights of `model` from a tf.keras 2 layout group.

    Every dataset's declared shape and type are checked before any data is read. Returns the
    list of `(variable, array)` pairs to assign; nothing is assigned here, so a failure leaves
    the model unchanged.

    Raises:
        ValueError: on a layer-count, weight-count or shape mismatch (Keras's wording).
    """
    layer_names = load_attributes_from_hdf5_group(group, "layer_names")
    if "layer_names" not in group.attrs and "layer_names0" not in group.attrs:
        raise WeightFileError(
            f"Weights file '{filepath}' has no 'layer_names' attribute: it is not a Keras h5 "
            "weights file (for the Keras 3 layout, name the file '*.weights.h5')."
        )
    saved = {}
    for name in layer_names:
        if name not in group:
            raise WeightFileError(
                f"Weights file '{filepath}' lists layer '{name}' but has no group for it "
                "(the file is incomplete)."
            )
        saved[name] = _read_group_values(group[name], filepath, f"layer '{name}'")
    top_values = None
    if "top_level_model_weights" in group:
        top_values = _read_group_values(
            group["top_level_model_weights"], filepath, "'top_level_model_weights'"
        )
    assignments: list = []
    if by_name:
        _match_by_name(model, layer_names, saved, skip_mismatch, assignments)
    else:
        _match_by_order(model, layer_names, saved, skip_mismatch, assignments, filepath)
    if top_values is not None:
        top = [v for v in _own_variables(model) if any(v is w for w in model.weights)]
        if len(top_values) != len(top):
            message = (
                "Weight count mismatch for top-level weights when loading weights from file. "
                f"Model expects {len(top)} top-level weight(s). Received {len(top_values)} "
                "saved top-level weight(s)"
            )
            if not skip_mismatch:
                raise ValueError(message)
            warnings.warn(message, stacklevel=3)
        else:
            _check_shapes(zip(top, top_values), "top-level model", skip_mismatch, assignments)
    return read_values(assignments)


def _match_by_order(model, layer_names, saved, skip_mismatch, assignments, filepath) -> None:
    layers = [x for x in model.layers if legacy_weights(x)]
    names = [n for n in layer_names if saved[n]]
    if len(names) != len(layers):
        raise ValueError(
            "Layer count mismatch when loading weights from file. "
            f"Model expected {len(layers)} layers, found {len(names)} saved layers. "
            f"File '{filepath}'; layers with weights in the model: "
            f"{[x.name for x in layers]}, in the file: {names}."
        )
    for k, (name, layer) in enumerate(zip(names, layers)):
        weights = legacy_weights(layer)
        values = saved[name]
        if len(values) != len(weights):
            raise ValueError(
                f"Weight count mismatch for layer #{k} (named {layer.name} in the current "
                f"model, {name} in the save file). Layer expects {len(weights)} weight(s). "
                f"Received {len(values)} saved weight(s)"
            )
        _check_shapes(
            zip(weights, values), f"layer #{k} (named {layer.name})", skip_mismatch, assignments
        )


def _match_by_name(model, layer_names, saved, skip_mismatch, assignments) -> None:
    index: dict = {}
    for layer in model.layers:
        index.setdefault(layer.name, []).append(layer)
    for k, name in enumerate(layer_names):
        values = saved[name]
        for layer in index.get(name, []):
            weights = legacy_weights(layer)
            if len(values) != len(weights):
                message = (
                    f"Weight count mismatch for layer #{k} (named {layer.name}). Layer expects "
                    f"{len(weights)} weight(s). Received {len(values)} saved weight(s)"
                )
                if skip_mismatch:
                    warnings.warn(f"Skipping loading weights: {message}", stacklevel=4)
                    continue
                raise ValueError(message)
            _check_shapes(
                zip(weights, values),
                f"layer #{k} (named {layer.name})",
                skip_mismatch,
                assignments,
            )


# ------------------------------------------------------------------------- optimizer weights
def save_optimizer_weights_to_hdf5_group(group, optimizer) -> None:
    """Writes `optimizer_weights`: every optimizer variable (`iteration`, `learning_rate`, then
    the slots), as Keras 3 writes them, so that Keras 3 and keratron restore the state."""
    variables = list(optimizer.variables)
    if not variables:
        return
    names, seen = [], set()
    for v in variables:
        base = str(getattr(v, "path", None) or v.name).split(":")[0]
        # Slot names derive from variable paths, which need not be unique (two LSTM cells in
        # a Bidirectional); loading goes by position, so a numeric suffix is enough.
        name, k = base, 0
        while name in seen:
            k += 1
            name = f"{base}_{k}"
        seen.add(name)
        names.append(f"{name}:0")
    weights_group = group.create_group("optimizer_weights")
    _write_values(weights_group, names, [v.numpy() for v in variables])


def load_optimizer_weights_from_hdf5_group(group, filepath) -> tuple[list, list]:
    """`(names, values)` of the saved optimizer variables; the values are checked
    `StoredValue`s, read by `read_values` once they are matched."""
    weights_group = group["optimizer_weights"]
    names = load_attributes_from_hdf5_group(weights_group, "weight_names")
    return names, _read_group_values(weights_group, filepath, "'optimizer_weights'")


def match_optimizer_values(optimizer, names, values) -> list | None:
    """Pairs saved optimizer values with `optimizer.variables`, or None when the counts or
    shapes do not fit. Files from Keras 3 (and keratron) hold `iteration`, the learning rate
    and the slots; files from tf.keras 2 hold `iteration` and the slots (the learning rate is
    a hyper-parameter in `training_config` there)."""
    variables = list(optimizer.variables)
    lr = getattr(optimizer, "_learning_rate", None)
    without_lr = [v for v in variables if v is not lr]
    if len(values) == len(variables):
        targets = variables
    elif len(values) == len(without_lr):
        targets = without_lr
    else:
        return None
    pairs = list(zip(targets, values))
    if any(tuple(v.shape) != tuple(np.shape(x)) for v, x in pairs):
        return None
    return pairs
