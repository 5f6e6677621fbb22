"""`KerasFileEditor`: inspect and edit the weights of a `.keras` or `.weights.h5` file, as
Keras 3's `keras.saving.KerasFileEditor` does, and write them back as `.weights.h5`.

The weights are read into `weights_dict`, a nested dict that follows the file's object paths
(`{"layers": {"dense": {"0": kernel, "1": bias}}}`: each object's `vars` group becomes the
dict of its datasets). Edits change that dict; `save` writes it in the Keras 3 layout, which
Keras and keratron load. Keras prints with `rich`; keratron prints plain text.
"""

from __future__ import annotations

import collections
import json
import math
import os
import zipfile

import h5py
import numpy as np

from keratron.saving import keras3_h5
from keratron.saving._files import check_readable
from keratron.utils.io_utils import atomic_write

__all__ = ["KerasFileEditor"]

# Keras refuses datasets above 4 GiB (a malformed or malicious file).
_MAX_DATASET_BYTES = 1 << 32
_MAX_RANK = 64


class KerasFileEditor:
    """Inspects, edits and resaves the weights of a Keras file.

    Useful to adapt a saved weights file to a changed architecture: rename, delete or add
    objects (layers) and weights, compare with a model, and save as `.weights.h5`.

    Args:
        filepath: a `.keras` archive or a `.weights.h5` file (Keras 3 layout).

    Attributes:
        weights_dict: the weights, nested by object path (see the module docstring).
        object_metadata: {object path: the attributes of its `vars` group}.
        config, metadata: a `.keras` file's `config.json` and `metadata.json` (else None).

    Raises:
        ValueError: for another extension, a file that is not in the Keras 3 layout, or one
            with links, external or virtual datasets, or datasets beyond Keras's limits.

    Example:
        >>> import os, tempfile
        >>> model = keratron.Sequential(
        ...     [keratron.Input((3,)), keratron.layers.Dense(2, name="dense")])
        >>> path = os.path.join(tempfile.mkdtemp(), "model.weights.h5")
        >>> model.save_weights(path)
        >>> editor = keratron.saving.KerasFileEditor(path)  # doctest: +ELLIPSIS
        Keras model file '...model.weights.h5'
        >>> editor.rename_object("dense", "dense_head")
        >>> list(editor.weights_dict["layers"])
        ['dense_head']
        >>> editor.save(os.path.join(os.path.dirname(path), "edited.weights.h5"))
    """

    def __init__(self, filepath):
        self.filepath = os.fspath(filepath)
        self.metadata = None
        self.config = None
        self.model = None
        if self.filepath.endswith(".keras"):
            self._read_archive()
        elif self.filepath.endswith(".weights.h5"):
            check_readable(self.filepath, "KerasFileEditor")
            with h5py.File(self.filepath, "r") as f:
                self._read_weights(f)
        else:
            raise ValueError(
                "Invalid filename: expected a `.keras` `.weights.h5` extension. "
                f"Received: filepath={self.filepath}"
            )
        print(f"Keras model file '{self.filepath}'")
        if self.metadata is not None:
            print(
                f"Saved with Keras {self.metadata.get('keras_version')} - date: "
                f"{self.metadata.get('date_saved')}"
            )

    # ------------------------------------------------------------------ reading
    def _read_archive(self) -> None:
        from keratron.saving import saving_api

        what = "KerasFileEditor"
        check_readable(self.filepath, what)
        if not zipfile.is_zipfile(self.filepath):
            raise ValueError(f"{what}: '{self.filepath}' is not a valid '.keras' zip archive.")
        with zipfile.ZipFile(self.filepath) as zf:
            names = zf.namelist()
            for member in (
                saving_api._CONFIG_FILENAME,
                saving_api._METADATA_FILENAME,
                saving_api._VARS_FILENAME,
            ):
                if member not in names:
                    raise ValueError(
                        f"{what}: the archive '{self.filepath}' has no '{member}' (found {names})."
                    )
            limit = saving_api._CONFIG_MAX_BYTES
            self.config = json.loads(
                saving_api._read_member(zf, saving_api._CONFIG_FILENAME, limit, self.filepath, what)
            )
            self.metadata = json.loads(
                saving_api._read_member(
                    zf, saving_api._METADATA_FILENAME, limit, self.filepath, what
                )
            )
            h5, buffer = saving_api._open_member_h5(
                zf, saving_api._VARS_FILENAME, 1 << 40, self.filepath, what
            )
            try:
                self._read_weights(h5)
            finally:
                h5.close()
                buffer.close()

    def _read_weights(self, h5file) -> None:
        if not keras3_h5.looks_like_keras3(h5file):
            raise ValueError(
                f"KerasFileEditor: '{self.filepath}' is not in the Keras 3 weights layout "
                "(no 'vars' or 'layers' groups). A tf.keras 2 '.h5' file cannot be edited here."
            )
        self.object_metadata = {}
        self.weights_dict = self._extract(h5file, "")

    def _extract(self, group, inner_path):
        """The dict of `group`: child objects by name, an object's `vars` datasets inline."""
        attrs = {k: _attr(v) for k, v in group.attrs.items()}
        if attrs:
            self.object_metadata[inner_path] = attrs
        result = collections.OrderedDict()
        for key in group.keys():
            path = f"{inner_path}/{key}"
            link = group.get(key, getlink=True)
            if isinstance(link, (h5py.ExternalLink, h5py.SoftLink)):
                raise ValueError(f"Not allowed: H5 file with {type(link).__name__}")
            value = group[key]
            if isinstance(value, h5py.Group):
                if len(value) == 0:
                    continue
                if "vars" in value.keys() and isinstance(value["vars"], h5py.Group):
                    # An object: its variables, then (a nested model's) child objects.
                    # Keras keeps only the variables here, dropping a nested model's layers;
                    # keratron keeps both, under distinct keys.
                    children = [
                        c
                        for c in value.keys()
                        if c != "vars" and isinstance(value[c], h5py.Group) and len(value[c])
                    ]
                    if len(value["vars"]) == 0 and not children:
                        continue  # an object without variables, as Keras skips it
                    entry = self._extract(value["vars"], path)
                    for child in children:
                        entry[child] = self._extract(value[child], f"{path}/{child}")
                    result[key] = entry
                else:
                    result[key] = self._extract(value, path)
                continue
            if not isinstance(value, h5py.Dataset):
                continue
            if value.external:
                raise ValueError(
                    f"Not allowed: H5 file Dataset with external links: {value.external}"
                )
            if value.is_virtual:
                raise ValueError(f"Not allowed: H5 file with virtual Dataset at {path}")
            shape = value.shape or ()
            if any(d < 0 for d in shape) or len(shape) > _MAX_RANK:
                raise ValueError(
                    f"Malformed HDF5 dataset shape {shape} at {path} in '{self.filepath}'."
                )
            size = math.prod(shape) * value.dtype.itemsize
            if size > _MAX_DATASET_BYTES:
                raise ValueError(
                    f"HDF5 dataset too large to load safely ({size} bytes; limit is "
                    f"{_MAX_DATASET_BYTES})."
                )
            result[key] = value[()]
        return result

    # ------------------------------------------------------------------ inspecting
    def summary(self) -> None:
        """Prints the weight structure of the opened file."""
        print("Weights structure")
        self._print_structure(self.weights_dict, prefix="  ")

    def _print_structure(self, weights_dict, prefix="", inner_path="", is_first=True):
        items = list(weights_dict.items())
        for idx, (key, value) in enumerate(items):
            path = f"{inner_path}/{key}"
            is_last = idx == len(items) - 1
            if is_first:
                is_first = False
                connector = "> "
            elif is_last:
                connector = "└─ "
            else:
                connector = "├─ "
            if isinstance(value, dict):
                label = f"{prefix}{connector}{key}"
                name = self.object_metadata.get(path, {}).get("name")
                if name is not None:
                    label += f" ('{name}')"
                print(label)
                self._print_structure(
                    value, prefix + ("    " if is_last else "│   "), path, is_first
                )
            elif hasattr(value, "shape"):
                print(f"{prefix}{connector}{key}: shape={value.shape}, dtype={value.dtype}")
            else:
                print(f"{prefix}{connector}{key}: {value}")

    def compare(self, reference_model) -> dict:
        """Compares the file's weights with a model's, path by path.

        Args:
            reference_model: the model (or layer) to compare with.

        Returns:
            `{"status": "success" | "error", "error_count": int, "match_count": int}`;
            each mismatch (an object or weight missing on one side, a shape that differs)
            is printed. Each weight counts once (Keras 3.15 adds its running totals twice
            when it recurses into nested objects, so its counts are larger; the status is
            the same).
        """
        print("Running comparison")
        ref = _weight_spec(reference_model)
        checked: set = set()
        errors, matches = self._compare(
            self.weights_dict, ref, "", "saved file", "reference model", checked
        )
        back_errors, _ = self._compare(
            ref, self.weights_dict, "", "reference model", "saved file", checked
        )
        errors += back_errors
        print("─────────────────────")
        if errors == 0:
            print("Comparison successful: saved file is compatible with the reference model")
            print(f"    Found {matches} matching weight{'' if matches == 1 else 's'}")
        else:
            print(
                f"Found {errors} error{'' if errors == 1 else 's'}: saved file is not "
                "compatible with the reference model"
            )
        return {
            "status": "success" if errors == 0 else "error",
            "error_count": errors,
            "match_count": matches,
        }

    def _compare(self, target, ref, base, target_name, ref_name, checked):
        errors = matches = 0
        for key, ref_val in ref.items():
            path = f"{base}/{key}"
            if path in checked:
                continue
            if key not in target:
                errors += 1
                checked.add(path)
                if isinstance(ref_val, dict):
                    print(f"...Object {path} present in {ref_name}, missing from {target_name}")
                    print(
                        f"    In {ref_name}, {path} contains the following keys: "
                        f"{list(ref_val.keys())}"
                    )
                else:
                    print(f"...Weight {path} present in {ref_name}, missing from {target_name}")
            elif isinstance(ref_val, dict):
                e, m = self._compare(target[key], ref_val, path, target_name, ref_name, checked)
                errors += e
                matches += m
            elif tuple(target[key].shape) != tuple(ref_val.shape):
                errors += 1
                checked.add(path)
                print(
                    f"...Weight shape mismatch for {path}\n"
                    f"    In {ref_name}: shape={tuple(ref_val.shape)}\n"
                    f"    In {target_name}: shape={tuple(target[key].shape)}"
                )
            else:
                matches += 1
        return errors, matches

    # ------------------------------------------------------------------ editing
    def _edit_object(self, edit_fn, source_name, target_name=None):
        if target_name is not None and "/" in target_name:
            raise ValueError(
                "Argument `target_name` should be a leaf name, not a full path name. "
                f"Received: target_name='{target_name}'"
            )
        # A name without '/' must occur once in the whole file (Keras 3.15 miscounts names
        # followed by other objects and may call a unique name ambiguous; keratron does not).
        if "/" in source_name:
            elements = source_name.split("/")
            d = self.weights_dict
            for e in elements[:-1]:
                if e not in d:
                    raise ValueError(f"Path '{source_name}' not found in model.")
                d = d[e]
            if elements[-1] not in d:
                raise ValueError(f"Path '{source_name}' not found in model.")
            edit_fn(d, elements[-1], target_name)
            return
        holders = []

        def find(d):
            for v in d.values():
                if isinstance(v, dict):
                    find(v)
            if source_name in d:
                holders.append(d)

        find(self.weights_dict)
        if len(holders) > 1:
            raise ValueError(
                f"Name '{source_name}' occurs more than once in the model; try passing a "
                "complete path"
            )
        if not holders:
            raise ValueError(
                f"Source name '{source_name}' does not appear in the model. Use "
                "`editor.summary()` to list all objects."
            )
        edit_fn(holders[0], source_name, target_name)

    def rename_object(self, object_name, new_name) -> None:
        """Renames an object (a layer), given by name or path (`"dense_2"`,
        `"layers/dense_2"`); `new_name` is a leaf name."""

        def rename(d, source, target):
            d[target] = d.pop(source)

        self._edit_object(rename, object_name, new_name)

    def delete_object(self, object_name) -> None:
        """Removes an object (a layer), given by name or path."""

        def delete(d, source, target):
            d.pop(source)

        self._edit_object(delete, object_name)

    def add_object(self, object_path, weights) -> None:
        """Adds an object at `object_path` (`"layers/dense_2"`) with `weights`, a dict of
        weight name (`"0"`, `"1"`, ...) to array."""
        _check_weights(weights)
        elements = object_path.split("/")
        d = self.weights_dict
        for e in elements[:-1]:
            if e not in d:
                raise ValueError(f"Path '{'/'.join(elements[:-1])}' not found in model.")
            d = d[e]
        d[elements[-1]] = weights

    def delete_weight(self, object_name, weight_name) -> None:
        """Removes the weight `weight_name` (`"0"`) of an object given by name or path."""

        def delete(d, source, target):
            if weight_name not in d[source]:
                raise ValueError(
                    f"Weight {weight_name} not found in object {object_name}. Weights found: "
                    f"{list(d[source].keys())}"
                )
            d[source].pop(weight_name)

        self._edit_object(delete, object_name)

    def add_weights(self, object_name, weights) -> None:
        """Adds weights (a dict of name to array) to an object given by name or path."""
        _check_weights(weights)

        def add(d, source, target):
            d[source].update(weights)

        self._edit_object(add, object_name)

    # ------------------------------------------------------------------ writing
    def save(self, filepath) -> None:
        """Writes the (edited) weights to a `.weights.h5` file in the Keras 3 layout (atomic:
        a temporary file renamed into place).

        Raises:
            ValueError: for another extension.
        """
        filepath = os.fspath(filepath)
        if not filepath.endswith(".weights.h5"):
            raise ValueError(
                "Invalid `filepath` argument: expected a `.weights.h5` extension. "
                f"Received: filepath={filepath}"
            )
        with atomic_write(filepath) as tmp, h5py.File(tmp, "w") as f:
            self._write(f, self.weights_dict, "")

    def resave_weights(self, filepath) -> None:
        """Same as `save`."""
        self.save(filepath)

    def _write(self, h5file, weights_dict, inner_path) -> None:
        values = {}
        for name, value in weights_dict.items():
            if isinstance(value, dict):
                if value:
                    self._write(h5file, value, f"{inner_path}/{name}" if inner_path else name)
            else:
                values[name] = value
        if values:
            group = h5file.require_group(f"{inner_path}/vars" if inner_path else "vars")
            for name, value in values.items():
                array = np.asarray(value)
                # bfloat16 as Keras stores it: 2-byte opaque values (read back as such, or an
                # ml_dtypes bfloat16 array) marked by a dtype attribute.
                if array.dtype.name == "bfloat16" or (
                    array.dtype.kind == "V" and array.dtype.itemsize == 2
                ):
                    ds = group.create_dataset(name, data=array)
                    ds.attrs["dtype"] = "bfloat16"
                else:
                    group[name] = array


def _attr(value):
    return value.decode("utf-8") if isinstance(value, bytes) else value


def _check_weights(weights) -> None:
    if not isinstance(weights, dict):
        raise ValueError(
            "Argument `weights` should be a dict where keys are weight names (usually '0', "
            f"'1', etc.) and values are NumPy arrays. Received: type(weights)={type(weights)}"
        )


_WeightSpec = collections.namedtuple("_WeightSpec", ["shape", "dtype"])


def _weight_spec(model) -> dict:
    """The reference model's weights as `weights_dict` holds a file's: nested by object path,
    each object's own variables under "0", "1", ... (their shapes and dtypes only)."""
    spec: dict = {}
    for path, obj in keras3_h5.iter_saveables(model):
        variables = keras3_h5.own_variables(obj)
        if not variables:
            continue
        d = spec
        for part in [p for p in path.split("/") if p]:
            d = d.setdefault(part, {})
        for i, v in enumerate(variables):
            d[str(i)] = _WeightSpec(tuple(v.shape), v.dtype)
    return spec
