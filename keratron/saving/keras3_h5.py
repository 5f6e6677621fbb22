"""The Keras 3 weights layout (`*.weights.h5`, and `model.weights.h5` inside a `.keras` zip).

Keras 3 stores each object's own variables under `<path>/vars/0`, `<path>/vars/1`, ... where
the path comes from walking the model the way Keras's saver does:

- a Functional or Sequential model first visits its `layers` list;
- then every public attribute in name order, private (`_x`) attributes last, skipping what a
  bare `Layer` has;
- a layer or optimizer attribute is visited under the attribute name; a list, tuple or dict
  of them is visited as a container whose items are named after their class in snake case,
  made unique with `_1`, `_2`, ... (`layers/dense`, `layers/dense_1`, ...);
- an object reached twice is saved once, at its first path;
- each visited object gets a `vars` group (with a `name` attribute) even when it owns no
  variables; the model's own variables are at `vars/` at the root.

Reading walks the keratron model the same way, so a file written by Keras 3 for the same
architecture (or by keratron) lines up path by path.
"""

from __future__ import annotations

import warnings

from keratron.saving.legacy_h5 import (
    WeightFileError,
    create_weight_dataset,
    fixed_string,
    read_values,
    stored_value,
)

__all__ = ["iter_saveables", "write_weights", "read_weights"]

_PROBE_NAMES: set | None = None
# keratron-internal attributes that refer to layers already reached another way (the graph
# of a Sequential, the operations of a Functional); Keras's saver skips its equivalents too.
_MODEL_SKIP = {"_functional", "operations", "_operations", "_layers", "_nodes_by_depth"}


def _layer_probe_names() -> set:
    """The attribute names of a bare `Layer` (Keras's saver skips those on every layer)."""
    global _PROBE_NAMES
    if _PROBE_NAMES is None:
        from keratron.layers.layer import Layer

        # An explicit name keeps the probe out of the auto-naming counters.
        _PROBE_NAMES = set(dir(Layer(name="keratron_saving_probe")))
    return _PROBE_NAMES


def _is_model(obj) -> bool:
    from keratron.models.model import Model

    return isinstance(obj, Model)


def _is_graph_model(obj) -> bool:
    from keratron.models.functional import Functional
    from keratron.models.sequential import Sequential

    return isinstance(obj, (Functional, Sequential))


def _is_saveable(obj) -> bool:
    from keratron.layers.layer import Layer
    from keratron.optimizers import Optimizer

    return isinstance(obj, (Layer, Optimizer))


def _snake_case(name: str) -> str:
    import re

    name = re.sub(r"\W+", "", name)
    name = re.sub("(.)([A-Z][a-z]+)", r"\1_\2", name)
    return re.sub("([a-z])([A-Z])", r"\1_\2", name).lower()


def _name_key(name: str) -> str:
    # Private attributes come after public ones.
    return f"~{name}" if name.startswith("_") else name


def _children(obj):
    """(attribute name, value) pairs in the order Keras's saver visits them."""
    from keratron.optimizers import Optimizer

    if isinstance(obj, Optimizer):
        return  # an optimizer's variables are its own; it holds no layers
    model = _is_model(obj)
    if model and _is_graph_model(obj):
        # Keras visits the layer list of Functional and Sequential models before anything else.
        yield "layers", obj.layers
    skip = _layer_probe_names()
    for attr in sorted(dir(obj), key=_name_key):
        if attr.startswith("__"):
            continue
        # A bare Keras Layer has no `layers`; Keras reaches a subclassed model's tracked
        # layers through `Model.layers`, so it is visited for models only.
        if attr in skip and not (model and attr == "layers"):
            continue
        if model and attr in _MODEL_SKIP:
            continue
        try:
            value = getattr(obj, attr)
        except Exception:  # properties that need a built or called model
            continue
        yield attr, value


def _join(path: str, name: str) -> str:
    return f"{path}/{name}" if path else name


def iter_saveables(model) -> list:
    """`(path, object)` for every layer and optimizer reached from `model`, in Keras's order."""
    out: list = []
    visited: set = set()

    def visit(obj, path):
        if id(obj) in visited:
            return
        visited.add(id(obj))
        out.append((path, obj))
        for attr, child in _children(obj):
            if _is_saveable(child):
                visit(child, _join(path, attr))
            elif isinstance(child, (list, tuple, dict)):
                visit_container(child, _join(path, attr), set())

    def visit_container(container, path, seen_containers):
        if id(container) in seen_containers:
            return
        seen_containers.add(id(container))
        used: dict = {}
        items = list(container.values()) if isinstance(container, dict) else list(container)
        for item in items:
            if _is_saveable(item):
                visit(item, _join(path, _unique(_snake_case(type(item).__name__), used)))
            elif isinstance(item, (list, tuple, dict)):
                visit_container(item, _join(path, _unique("container", used)), seen_containers)

    visit(model, "")
    return out


def _unique(name: str, used: dict) -> str:
    if name in used:
        used[name] += 1
        return f"{name}_{used[name]}"
    used[name] = 0
    return name


def own_variables(obj) -> list:
    """The variables an object saves itself: a layer's own (trainable, then non-trainable),
    or all of an optimizer's."""
    from keratron.optimizers import Optimizer

    if isinstance(obj, Optimizer):
        return list(obj.variables)
    return list(obj._trainable_variables) + list(obj._non_trainable_variables)


def write_weights(h5file, model) -> None:
    """Writes every object's own variables into an open, empty h5 file."""
    for path, obj in iter_saveables(model):
        group = h5file.create_group(_join(path, "vars"))
        name = getattr(obj, "name", None)
        if isinstance(name, str):
            group.attrs["name"] = fixed_string(name)
        for i, variable in enumerate(own_variables(obj)):
            create_weight_dataset(group, str(i), variable.numpy())


def _vars_group(h5file, path):
    """The `vars` group of `path`, or None. Files from Keras 2.13 keep layers under
    `_layer_checkpoint_dependencies` instead of `layers`."""
    import h5py

    candidates = [path]
    if "_layer_checkpoint_dependencies" in h5file:
        candidates.append(path.replace("layers", "_layer_checkpoint_dependencies"))
    for candidate in candidates:
        full = _join(candidate, "vars")
        if full in h5file:
            group = h5file[full]
            if isinstance(group, h5py.Group):
                return group
    return None


def _read_vars(group, filepath, path) -> list:
    import h5py

    values = []
    for i in range(len(group.keys())):
        key = str(i)
        link = group.get(key, getlink=True)
        if isinstance(link, (h5py.SoftLink, h5py.ExternalLink)):
            raise WeightFileError(
                f"Weights file '{filepath}': '{path}/vars/{key}' is a {type(link).__name__}; "
                "links are not allowed in weight files."
            )
        dataset = group.get(key)
        if not isinstance(dataset, h5py.Dataset):
            raise WeightFileError(
                f"Weights file '{filepath}': '{path}/vars' should hold datasets named 0..."
                f"{len(group.keys()) - 1}, but '{key}' is missing."
            )
        bfloat16 = dataset.attrs.get("dtype") == "bfloat16"
        values.append(stored_value(dataset, filepath, f"'{path}/vars/{key}'", bfloat16))
    return values


def read_weights(h5file, model, filepath, skip_mismatch=False) -> list:
    """Reads and checks the variables of `model` (and its optimizer) from a Keras 3 layout
    file; returns the `(variable, array)` pairs to assign without assigning anything. Every
    dataset's declared shape and type are checked before any data is read.

    Raises:
        ValueError: naming every object whose variables are missing or do not match, unless
            `skip_mismatch` (then those objects are skipped with a warning).
    """
    from keratron.optimizers import Optimizer

    if not looks_like_keras3(h5file):
        raise WeightFileError(
            f"Weights file '{filepath}' is not in the Keras 3 layout (no 'vars' or 'layers' "
            "groups). A tf.keras 2 weights file should be named '*.h5', not '*.weights.h5'."
        )
    assignments: list = []
    errors: list = []
    for path, obj in iter_saveables(model):
        variables = own_variables(obj)
        group = _vars_group(h5file, path)
        values = _read_vars(group, filepath, path) if group is not None else []
        label = f"'{path or '<root>'}' ({type(obj).__name__} '{getattr(obj, 'name', '')}')"
        if isinstance(obj, Optimizer):
            pairs = _optimizer_pairs(model, obj, values, label)
            if pairs is not None:
                assignments.extend(pairs)
            continue
        if len(values) != len(variables):
            errors.append(
                f"{label}: Layer '{obj.name}' expected {len(variables)} variables, but "
                f"received {len(values)} variables during loading. Expected: "
                f"{[str(v.name) for v in variables]}"
            )
            continue
        for variable, value in zip(variables, values):
            if tuple(variable.shape) != tuple(value.shape):
                errors.append(
                    f"{label}: variable '{variable.path}' has shape {tuple(variable.shape)}, "
                    f"the file holds shape {tuple(value.shape)}"
                )
            else:
                assignments.append((variable, value))
    if errors:
        message = (
            f"Weights file '{filepath}': {len(errors)} object(s) could not be loaded:\n"
            + "\n".join(f"- {e}" for e in errors)
        )
        if not skip_mismatch:
            raise ValueError(message)
        warnings.warn(message, stacklevel=3)
    return read_values(assignments)


def _optimizer_pairs(model, optimizer, values, label):
    variables = list(optimizer.variables)
    if len(values) != len(variables) and not optimizer.built and len(values) > len(variables):
        # The slots exist only once the optimizer is built; build it so that a resumed run
        # gets its moments back.
        optimizer.build(model.trainable_variables)
        variables = list(optimizer.variables)
    if len(values) != len(variables):
        warnings.warn(
            f"Skipping variable loading for optimizer '{optimizer.name}' ({label}), because it "
            f"has {len(variables)} variables whereas the saved optimizer has {len(values)} "
            "variables.",
            stacklevel=4,
        )
        return None
    for variable, value in zip(variables, values):
        if tuple(variable.shape) != tuple(value.shape):
            warnings.warn(
                f"Skipping variable loading for optimizer '{optimizer.name}': variable "
                f"'{variable.path}' has shape {tuple(variable.shape)}, the file holds "
                f"{tuple(value.shape)}.",
                stacklevel=4,
            )
            return None
    return list(zip(variables, values))


def looks_like_keras3(h5file) -> bool:
    """Whether an open h5 file has the Keras 3 layout's top-level groups."""
    return bool(set(h5file.keys()) & {"vars", "layers", "_layer_checkpoint_dependencies"})
