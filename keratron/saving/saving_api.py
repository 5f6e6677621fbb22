"""`save_model` / `load_model` and `save_weights` / `load_weights`, by file extension.

| file               | written as                                   | read from                |
|--------------------|----------------------------------------------|--------------------------|
| `*.keras`          | Keras 3 zip: config.json, metadata.json,     | Keras 3, keratron        |
|                    | model.weights.h5 (Keras 3 weights layout)    |                          |
| `*.h5`, `*.hdf5`   | tf.keras 2 HDF5: `model_config`,             | tf.keras 2, Keras 3,     |
|                    | `training_config`, `model_weights`,          | keratron                 |
|                    | `optimizer_weights`                          |                          |
| `*.weights.h5`     | Keras 3 weights layout                       | Keras 3, keratron        |
| `*.h5` (weights)   | tf.keras 2 weights layout                    | tf.keras 2, Keras 3, ... |

Every write goes through `atomic_write` (temporary file, fsync, rename). Every read collects
and checks all values before assigning any, so a bad file leaves the model as it was; errors
name the file and what is wrong with it.
"""

from __future__ import annotations

import datetime
import io
import json
import os
import zipfile

import numpy as np

from keratron.saving import config_compat, keras3_h5, legacy_h5
from keratron.saving._files import check_readable
from keratron.utils.io_utils import ask_to_proceed_with_overwrite, atomic_write

__all__ = ["save_model", "load_model", "save_weights", "load_weights"]

_CONFIG_FILENAME = "config.json"
_METADATA_FILENAME = "metadata.json"
_VARS_FILENAME = "model.weights.h5"
_ASSETS_DIRNAME = "assets"
_H5_SUFFIXES = (".h5", ".hdf5")


def _json_default(obj):
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.floating):
        return float(obj)
    if isinstance(obj, np.bool_):
        return bool(obj)
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, (set, frozenset)):
        return sorted(obj)
    raise TypeError(f"Object of type {type(obj).__name__} is not JSON serializable: {obj!r}")


def _dumps(value) -> str:
    return json.dumps(value, default=_json_default)


def _proceed(filepath, overwrite) -> bool:
    if not overwrite and os.path.exists(filepath):
        return ask_to_proceed_with_overwrite(filepath)
    return True


def _check_model(model, what):
    from keratron.models.model import Model

    if not isinstance(model, Model):
        raise TypeError(f"{what} expects a keratron Model. Received: {type(model).__name__}")


def _numpy_dtype(variable):
    # bfloat16 goes through float32, which torch casts exactly: numpy has no bfloat16 of its
    # own, and ml_dtypes' (registered once JAX, TensorFlow or Keras is imported) torch rejects.
    if str(variable.dtype) == "bfloat16":
        return np.dtype("float32")
    return np.dtype(str(variable.dtype))


def _assign(assignments) -> None:
    """Assigns `(variable, array)` pairs all or nothing: every value is converted to its
    variable's dtype first, and a failing assignment restores the variables already written."""
    converted = [(v, np.asarray(x).astype(_numpy_dtype(v), copy=False)) for v, x in assignments]
    done: list = []
    try:
        for variable, value in converted:
            done.append((variable, variable.numpy()))
            variable.assign(value)
    except BaseException:
        for variable, previous in reversed(done):
            variable.assign(previous)
        raise


def _open_h5(filepath, what):
    """Opens an HDF5 file for reading; an unreadable one raises a ValueError naming it."""
    import h5py

    filepath = check_readable(filepath, what)
    if not h5py.is_hdf5(filepath):
        raise ValueError(
            f"{what}: '{filepath}' is not an HDF5 file (no HDF5 signature; the file is "
            "corrupted or of another format)."
        )
    try:
        return h5py.File(filepath, "r")
    except OSError as e:
        raise ValueError(
            f"{what}: '{filepath}' could not be opened as HDF5 ({e}); the file is truncated "
            "or corrupted."
        ) from None


def _reading(filepath, what, fn):
    """Runs `fn()`; any failure is re-raised with the file's name in its message: as it is
    when it names the file already, as the same type for ValueError, TypeError and
    MemoryError, as a ValueError for everything else (h5py's OSError, KeyError, ...)."""
    try:
        return fn()
    except Exception as e:
        if filepath in str(e):
            raise
        if type(e) in (ValueError, TypeError, MemoryError):
            # Keras's wording first (scripts match on it), then the file.
            raise type(e)(f"{e} ({what}: reading '{filepath}')") from e
        raise ValueError(
            f"{what}: reading '{filepath}' failed ({type(e).__name__}: {e}); the file is "
            "truncated or corrupted."
        ) from e


# Limits checked against a .keras archive's directory before a member is read.
_CONFIG_MAX_BYTES = 64 * 2**20
_ASSETS_MAX_BYTES = 2**30  # per asset file
# The weights member holds the model's variables and the optimizer's (Adam keeps two slots per
# weight), possibly in a wider dtype: a generous multiple of the model's bytes plus room for
# HDF5's own structures.
_WEIGHTS_SLACK = 8
_WEIGHTS_OVERHEAD_BYTES = 64 * 2**20
# Deflate cannot compress by more than about 1032:1; a directory claiming more is lying.
_MAX_DEFLATE_RATIO = 1100
_COPY_CHUNK = 2**20


def _model_bytes(model) -> int:
    variables = list(model.weights)
    optimizer = getattr(model, "optimizer", None)
    if optimizer is not None:
        variables += list(getattr(optimizer, "variables", []))
    total = 0
    for v in variables:
        total += int(np.prod(tuple(v.shape), dtype=np.int64)) * _numpy_dtype(v).itemsize
    return total


def _weights_limit(model) -> int:
    return _WEIGHTS_SLACK * _model_bytes(model) + _WEIGHTS_OVERHEAD_BYTES


def _member_info(zf, name, limit, filepath, what):
    """The `ZipInfo` of `name` after checking, from the zip directory alone, its compression
    method, its size against `limit` and its compression ratio."""
    info = zf.getinfo(name)
    if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
        raise ValueError(
            f"{what}: '{name}' in '{filepath}' uses compression method {info.compress_type}; "
            "'.keras' archives are stored or deflated."
        )
    if info.file_size > limit:
        raise ValueError(
            f"{what}: '{name}' in '{filepath}' inflates to {info.file_size} bytes, more than "
            f"the {limit} bytes allowed for it (a corrupted archive or a zip bomb)."
        )
    ratio = info.file_size / max(info.compress_size, 1)
    if info.compress_type == zipfile.ZIP_DEFLATED and ratio > _MAX_DEFLATE_RATIO:
        raise ValueError(
            f"{what}: '{name}' in '{filepath}' claims a compression ratio of {ratio:.0f}:1, "
            f"more than deflate can reach ({_MAX_DEFLATE_RATIO}:1); the archive is corrupted."
        )
    return info


def _read_member(zf, name, limit, filepath, what) -> bytes:
    """A small member, read whole after `_member_info`'s checks (zipfile never inflates past
    the size the directory declares)."""
    info = _member_info(zf, name, limit, filepath, what)
    with zf.open(info) as member:
        return member.read()


def _open_member_h5(zf, name, limit, filepath, what):
    """An h5py file over the weights member, streamed into a spooled temporary file (memory
    up to 64 MB, then disk) after `_member_info`'s checks. Close the file, then its buffer."""
    import shutil
    import tempfile

    import h5py

    info = _member_info(zf, name, limit, filepath, what)
    buffer = tempfile.SpooledTemporaryFile(max_size=_CONFIG_MAX_BYTES)
    try:
        with zf.open(info) as member:
            shutil.copyfileobj(member, buffer, _COPY_CHUNK)
        buffer.seek(0)
        return h5py.File(buffer, "r"), buffer
    except BaseException:
        buffer.close()
        raise


# =============================================================================== weights
def save_weights(model, filepath, overwrite=True, max_shard_size=None) -> None:
    """Saves the model's weights: `*.weights.h5` in the Keras 3 layout, `*.h5` / `*.hdf5` in
    the tf.keras 2 layout.

    Args:
        model: a built keratron model.
        filepath: the destination path.
        overwrite: when False and the file exists, ask on the terminal first.
        max_shard_size: not supported (sharded files); must be None.

    Example:
        >>> import os, tempfile
        >>> model = keratron.Sequential([keratron.Input((3,)), keratron.layers.Dense(2)])
        >>> path = os.path.join(tempfile.mkdtemp(), "model.weights.h5")
        >>> keratron.saving.save_weights(model, path)
        >>> os.path.exists(path)
        True
    """
    _check_model(model, "save_weights")
    filepath = os.fspath(filepath)
    if max_shard_size is not None:
        raise ValueError(
            "save_weights: sharded weight files are not supported; pass max_shard_size=None. "
            f"Received: max_shard_size={max_shard_size}"
        )
    if not filepath.endswith(".weights.h5") and not filepath.endswith(_H5_SUFFIXES):
        raise ValueError(
            "The filename must end in `.weights.h5` (Keras 3 layout) or `.h5` / `.hdf5` "
            f"(tf.keras 2 layout). Received: filepath={filepath}"
        )
    if not model.built:
        raise ValueError(
            "You are saving a model that has not yet been built. Try building the model first "
            "by calling it on some data or by using `build()`."
        )
    if not _proceed(filepath, overwrite):
        return
    import h5py

    with atomic_write(filepath) as tmp:
        with h5py.File(tmp, "w") as f:
            if filepath.endswith(".weights.h5"):
                keras3_h5.write_weights(f, model)
            else:
                legacy_h5.save_weights_to_hdf5_group(f, model)


def load_weights(model, filepath, skip_mismatch=False, by_name=False, **kwargs) -> None:
    """Loads weights saved by keratron, tf.keras 2 or Keras 3 into `model`.

    `*.keras` and `*.weights.h5` files are read in the Keras 3 layout, `*.h5` / `*.hdf5` in
    the tf.keras 2 layout (by layer order, or by layer name with `by_name=True`); a file whose
    contents show the other layout is read in that one. All values are read and checked first:
    on any error the model keeps its weights.

    Args:
        model: a built keratron model.
        filepath: the file to read.
        skip_mismatch: skip (with a warning) layers whose weight count or shapes differ,
            instead of raising.
        by_name: tf.keras 2 layout only: match layers by name instead of by order.

    Raises:
        ValueError: the file is missing pieces, corrupted, or does not match the model.

    Example:
        >>> import os, tempfile
        >>> model = keratron.Sequential([keratron.Input((3,)), keratron.layers.Dense(2)])
        >>> path = os.path.join(tempfile.mkdtemp(), "model.weights.h5")
        >>> keratron.saving.save_weights(model, path)
        >>> twin = keratron.Sequential([keratron.Input((3,)), keratron.layers.Dense(2)])
        >>> keratron.saving.load_weights(twin, path)
        >>> all(np.array_equal(a, b) for a, b in zip(twin.get_weights(), model.get_weights()))
        True
    """
    _check_model(model, "load_weights")
    if kwargs:
        raise TypeError(f"load_weights: unexpected keyword arguments {sorted(kwargs)}")
    filepath = os.fspath(filepath)
    if not model.built:
        raise ValueError(
            "You are loading weights into a model that has not yet been built. Try building "
            "the model first by calling it on some data or by using `build()`."
        )
    what = "load_weights"
    if filepath.endswith(".keras"):
        if by_name:
            raise ValueError("load_weights: `by_name=True` applies to '.h5' files only.")
        check_readable(filepath, what)
        if not zipfile.is_zipfile(filepath):
            raise ValueError(f"{what}: '{filepath}' is not a valid '.keras' zip archive.")

        def read_zip():
            with zipfile.ZipFile(filepath) as zf:
                return _read_zip_weights(zf, model, filepath, skip_mismatch)

        _assign(_reading(filepath, what, read_zip))
        return
    if not filepath.endswith(".weights.h5") and not filepath.endswith(_H5_SUFFIXES):
        raise ValueError(
            f"{what}: unrecognized file extension. Expected '.weights.h5', '.h5', '.hdf5' or "
            f"'.keras'. Received: filepath={filepath}"
        )
    f = _open_h5(filepath, what)
    try:
        assignments = _reading(
            filepath,
            what,
            lambda: _read_h5_weights(f, model, filepath, skip_mismatch, by_name),
        )
    finally:
        f.close()
    _assign(assignments)


def _read_h5_weights(f, model, filepath, skip_mismatch, by_name) -> list:
    group = f
    if "layer_names" not in f.attrs and "layer_names0" not in f.attrs and "model_weights" in f:
        group = f["model_weights"]  # a full-model .h5 file
    legacy = "layer_names" in group.attrs or "layer_names0" in group.attrs
    if legacy or (not keras3_h5.looks_like_keras3(f) and not filepath.endswith(".weights.h5")):
        # A file of neither layout is reported against the layout its name promises.
        return legacy_h5.load_weights_from_hdf5_group(
            group, model, filepath, by_name=by_name, skip_mismatch=skip_mismatch
        )
    if by_name:
        raise ValueError(
            f"load_weights: `by_name=True` needs a tf.keras 2 layout file; '{filepath}' is in "
            "the Keras 3 layout, which matches objects by their position in the model."
        )
    return keras3_h5.read_weights(f, model, filepath, skip_mismatch=skip_mismatch)


def _read_zip_weights(zf, model, filepath, skip_mismatch, what="load_weights") -> list:
    if _VARS_FILENAME not in zf.namelist():
        raise ValueError(
            f"'{filepath}': the archive has no '{_VARS_FILENAME}' (found {zf.namelist()})."
        )
    h5, buffer = _open_member_h5(zf, _VARS_FILENAME, _weights_limit(model), filepath, what)
    try:
        return keras3_h5.read_weights(h5, model, filepath, skip_mismatch=skip_mismatch)
    finally:
        h5.close()
        buffer.close()


# ================================================================================= models
def save_model(model, filepath, overwrite=True, zipped=None, include_optimizer=True) -> None:
    """Saves a model: `*.keras` as the Keras 3 zip, `*.h5` / `*.hdf5` as a tf.keras 2 HDF5
    model file (config, compile arguments, weights and optimizer state).

    Args:
        model: the model.
        filepath: the destination; its extension picks the format.
        overwrite: when False and the file exists, ask on the terminal first.
        zipped: Keras 3's switch between a `.keras` zip and a directory; only the zip is
            supported, so it must be None or True.
        include_optimizer: `.h5` only: also save the optimizer's variables.

    Example:
        >>> import os, tempfile
        >>> model = keratron.Sequential([keratron.Input((3,)), keratron.layers.Dense(2)])
        >>> path = os.path.join(tempfile.mkdtemp(), "model.keras")
        >>> keratron.saving.save_model(model, path)
        >>> os.path.exists(path)
        True
    """
    _check_model(model, "save_model")
    filepath = os.fspath(filepath)
    if zipped is False:
        raise ValueError(
            "save_model: saving to an unzipped directory is not supported; use a '.keras' "
            "file. Received: zipped=False"
        )
    if filepath.endswith(".weights.h5"):
        raise ValueError(
            "save_model: a '.weights.h5' path holds weights only; use `save_weights`, or a "
            f"'.keras' / '.h5' path for the whole model. Received: filepath={filepath}"
        )
    if filepath.endswith(".keras"):
        if not _proceed(filepath, overwrite):
            return
        payload = _keras_zip_bytes(model)
        with atomic_write(filepath) as tmp:
            with open(tmp, "wb") as out:
                out.write(payload)
                out.flush()
        return
    if filepath.endswith(_H5_SUFFIXES):
        if not _proceed(filepath, overwrite):
            return
        with atomic_write(filepath) as tmp:
            _write_h5_model(model, tmp, include_optimizer)
        return
    raise ValueError(
        "Invalid filepath extension for saving. Please add either a `.keras` extension for the "
        "native Keras format (recommended) or a `.h5` extension. Received: "
        f"filepath={filepath}."
    )


def _keras_zip_bytes(model) -> bytes:
    """The `.keras` archive, built in memory so that the file itself is written in one go."""
    import h5py

    from keratron.models.serialization import serialize_layer

    config = config_compat.keras_build_configs(serialize_layer(model))
    metadata = {
        "keras_version": legacy_h5.KERAS_VERSION,
        "date_saved": datetime.datetime.now().strftime("%Y-%m-%d@%H:%M:%S"),
    }
    weights = io.BytesIO()
    with h5py.File(weights, "w") as h5:
        keras3_h5.write_weights(h5, model)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        zf.writestr(_METADATA_FILENAME, _dumps(metadata))
        zf.writestr(_CONFIG_FILENAME, _dumps(config))
        zf.writestr(_VARS_FILENAME, weights.getvalue())
        for name, data in _asset_files(model):
            zf.writestr(name, data)
    return buffer.getvalue()


def _asset_files(model) -> list:
    """`(archive name, bytes)` for the files each object's `save_assets(folder)` writes, under
    `assets/<object path>/` as Keras 3 lays them out."""
    import tempfile

    savers = [(p, o) for p, o in keras3_h5.iter_saveables(model) if hasattr(o, "save_assets")]
    files = []
    with tempfile.TemporaryDirectory() as tmp:
        for path, obj in savers:
            folder = os.path.join(tmp, *path.split("/"))
            os.makedirs(folder, exist_ok=True)
            obj.save_assets(folder)
        for root, _, names in sorted(os.walk(tmp)):
            for name in sorted(names):
                full = os.path.join(root, name)
                with open(full, "rb") as f:
                    rel = os.path.relpath(full, tmp).replace(os.sep, "/")
                    files.append((f"{_ASSETS_DIRNAME}/{rel}", f.read()))
    return files


def _load_assets(zf, model, filepath) -> None:
    """Hands each object that has `load_assets` its folder of `assets/` extracted from the
    archive (None when the archive has none for it, as Keras does)."""
    import tempfile

    loaders = [(p, o) for p, o in keras3_h5.iter_saveables(model) if hasattr(o, "load_assets")]
    if not loaders:
        return
    prefix = f"{_ASSETS_DIRNAME}/"
    with tempfile.TemporaryDirectory() as tmp:
        for name in zf.namelist():
            if not name.startswith(prefix) or name.endswith("/"):
                continue
            parts = name[len(prefix) :].split("/")
            if any(part in ("", ".", "..") or "\\" in part or ":" in part for part in parts):
                raise ValueError(
                    f"load_model: '{name}' in '{filepath}' is not a plain path under "
                    f"'{prefix}'; assets are not extracted outside their folder."
                )
            data = _read_member(zf, name, _ASSETS_MAX_BYTES, filepath, "load_model")
            target = os.path.join(tmp, *parts)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with open(target, "wb") as f:
                f.write(data)
        for path, obj in loaders:
            folder = os.path.join(tmp, *path.split("/")) if path else tmp
            obj.load_assets(folder if os.path.isdir(folder) else None)


def _write_h5_model(model, path, include_optimizer) -> None:
    import h5py

    from keratron.models.serialization import serialize_layer

    model_config = config_compat.to_tf_keras2(serialize_layer(model))
    model_config.pop("compile_config", None)
    model_config.pop("build_config", None)
    with h5py.File(path, "w") as f:
        # Fixed-length strings (see legacy_h5.fixed_string).
        f.attrs["backend"] = legacy_h5.fixed_string(legacy_h5.BACKEND_NAME)
        f.attrs["keras_version"] = legacy_h5.fixed_string(legacy_h5.KERAS_VERSION)
        f.attrs["model_config"] = legacy_h5.fixed_string(_dumps(model_config))
        training = config_compat.training_config(model)
        if training is not None:
            f.attrs["training_config"] = legacy_h5.fixed_string(_dumps(training))
        legacy_h5.save_weights_to_hdf5_group(f.create_group("model_weights"), model)
        if include_optimizer and getattr(model, "optimizer", None) is not None:
            legacy_h5.save_optimizer_weights_to_hdf5_group(f, model.optimizer)
        f.flush()


class _LambdaLoader:
    """Stands in for `Lambda` during loading so that the caller's `safe_mode` reaches
    `Lambda.from_config`."""

    def __init__(self, safe_mode):
        self.safe_mode = safe_mode

    def from_config(self, config, custom_objects=None):
        from keratron.layers.core import Lambda

        return Lambda.from_config(config, custom_objects=custom_objects, safe_mode=self.safe_mode)


def _check_safe(config, filepath, safe_mode) -> None:
    if not safe_mode:
        return
    where = config_compat.find_unsafe_entry(config)
    if where is not None:
        raise ValueError(
            f"load_model: '{filepath}' contains a serialized Python lambda (at {where}). "
            "Loading it would execute code stored in the file, which safe mode refuses. If you "
            "trust the source of this file, pass `safe_mode=False` to `load_model`."
        )


def _unregistered_name(data, custom_objects):
    """The first `registered_name` "package>Name" in a config that neither the registry, the
    custom-object scopes nor `custom_objects` knows (by that name or its class name)."""
    from keratron.layers.serialization import lookup_custom

    if isinstance(data, list):
        for item in data:
            found = _unregistered_name(item, custom_objects)
            if found is not None:
                return found
        return None
    if not isinstance(data, dict):
        return None
    registered = data.get("registered_name")
    if isinstance(registered, str) and ">" in registered and "class_name" in data:
        # A function is named by its config; a class by its class name.
        short = data.get("config") if data.get("class_name") == "function" else None
        short = short if isinstance(short, str) else data.get("class_name")
        if lookup_custom(registered, custom_objects) is None and (
            not isinstance(short, str) or lookup_custom(short, custom_objects) is None
        ):
            return data
    for value in data.values():
        found = _unregistered_name(value, custom_objects)
        if found is not None:
            return found
    return None


def _check_registered_names(config, filepath, custom_objects) -> None:
    """A class saved under a registered name must be registered to load: a built-in class of
    the same class name is not what the file was written with."""
    entry = _unregistered_name(config, custom_objects)
    if entry is None:
        return
    registered = entry["registered_name"]
    package, _, name = registered.partition(">")
    raise TypeError(
        f"load_model: '{filepath}' uses '{registered}' (class_name '{entry.get('class_name')}'), "
        "which is not registered. Decorate the class with "
        f"`@keratron.saving.register_keras_serializable(package='{package}', name='{name}')` "
        f"before loading, or pass `custom_objects={{'{registered}': {name}}}`."
    )


def _model_from_config(config, filepath, custom_objects, safe_mode):
    from keratron.layers.layer import Layer
    from keratron.models.serialization import deserialize_layer

    if not isinstance(config, dict) or "class_name" not in config:
        raise ValueError(
            f"load_model: the model config in '{filepath}' is not a serialized model (expected "
            f"a dict with 'class_name' and 'config'). Received: {str(config)[:200]}"
        )
    _check_safe(config, filepath, safe_mode)
    _check_registered_names(config, filepath, custom_objects)
    objects = {"Lambda": _LambdaLoader(safe_mode)}
    objects.update(custom_objects or {})
    normalized = config_compat.normalize_config(config, objects)
    model = deserialize_layer(normalized, custom_objects=objects)
    if not isinstance(model, Layer):
        raise ValueError(
            f"load_model: '{filepath}' describes a {type(model).__name__}, not a model."
        )
    return model


def load_model(filepath, custom_objects=None, compile=True, safe_mode=True):
    """Loads a model saved by keratron, tf.keras 2 (`.h5`) or Keras 3 (`.keras`, `.h5`).

    Args:
        filepath: a `.keras` or `.h5` / `.hdf5` file.
        custom_objects: dict mapping class or function names to the objects to use.
        compile: also restore the compile arguments and the optimizer state.
        safe_mode: refuse to rebuild serialized Python lambdas (code from the file).

    Returns:
        The model, compiled when the file holds compile arguments and `compile=True`.

    Raises:
        ValueError: the file is not a model file, is corrupted, or needs `safe_mode=False`.

    Example:
        >>> import os, tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "model.keras")
        >>> keratron.Sequential([keratron.Input((3,)), keratron.layers.Dense(2)]).save(path)
        >>> model = keratron.models.load_model(path)
        >>> model.output_shape
        (None, 2)
    """
    filepath = check_readable(filepath, "load_model")
    if zipfile.is_zipfile(filepath):
        return _reading(
            filepath,
            "load_model",
            lambda: _load_keras_zip(filepath, custom_objects, compile, safe_mode),
        )
    import h5py

    if h5py.is_hdf5(filepath):
        f = _open_h5(filepath, "load_model")
        try:
            return _reading(
                filepath,
                "load_model",
                lambda: _load_h5_model(f, filepath, custom_objects, compile, safe_mode),
            )
        finally:
            f.close()
    if filepath.endswith(".keras"):
        raise ValueError(
            f"load_model: '{filepath}' is not a valid '.keras' zip archive (it may be truncated "
            "or corrupted)."
        )
    raise ValueError(
        f"load_model: '{filepath}' is neither a '.keras' zip archive nor an HDF5 model file "
        "(it may be corrupted, or of an unsupported format)."
    )


def _load_keras_zip(filepath, custom_objects, compile, safe_mode):
    with zipfile.ZipFile(filepath) as zf:
        names = zf.namelist()
        for needed in (_CONFIG_FILENAME, _VARS_FILENAME):
            if needed not in names:
                raise ValueError(
                    f"load_model: '{filepath}' has no '{needed}' entry; a '.keras' archive holds "
                    f"{_CONFIG_FILENAME}, {_METADATA_FILENAME} and {_VARS_FILENAME}. Found: "
                    f"{names}"
                )
        raw = _read_member(zf, _CONFIG_FILENAME, _CONFIG_MAX_BYTES, filepath, "load_model")
        try:
            config = json.loads(raw.decode("utf8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise ValueError(
                f"load_model: '{_CONFIG_FILENAME}' in '{filepath}' is not valid JSON ({e})."
            ) from None
        if not isinstance(config, dict):
            raise ValueError(f"load_model: '{_CONFIG_FILENAME}' in '{filepath}' is not a dict.")
        config = dict(config)
        compile_config = config.pop("compile_config", None)
        model = _model_from_config(config, filepath, custom_objects, safe_mode)
        if compile and compile_config:
            from keratron.layers import serialization as registry

            with registry.custom_object_scope(custom_objects or {}):
                model.compile_from_config(compile_config)
        assignments = _read_zip_weights(zf, model, filepath, False, "load_model")
        _assign(assignments)
        _load_assets(zf, model, filepath)
    return model


def _decode_attr(value):
    if hasattr(value, "decode"):
        value = value.decode("utf8")
    return value


def _load_h5_model(f, filepath, custom_objects, compile, safe_mode):
    raw = f.attrs.get("model_config")
    if raw is None:
        raise ValueError(
            f"No model config found in the file at {filepath}. (A weights-only file: build the "
            "model in code and use `model.load_weights`.)"
        )
    try:
        config = json.loads(_decode_attr(raw))
    except (TypeError, json.JSONDecodeError) as e:
        raise ValueError(
            f"load_model: the 'model_config' attribute of '{filepath}' is not valid JSON ({e})."
        ) from None
    model = _model_from_config(config, filepath, custom_objects, safe_mode)
    if "model_weights" not in f:
        raise ValueError(f"load_model: '{filepath}' has no 'model_weights' group.")
    assignments = legacy_h5.load_weights_from_hdf5_group(f["model_weights"], model, filepath)
    training = f.attrs.get("training_config")
    if compile and training is not None:
        try:
            training = json.loads(_decode_attr(training))
        except (TypeError, json.JSONDecodeError) as e:
            raise ValueError(
                f"load_model: the 'training_config' attribute of '{filepath}' is not valid "
                f"JSON ({e})."
            ) from None
        model.compile(
            **config_compat.compile_args_from_training_config(training, model, custom_objects)
        )
        if "optimizer_weights" in f:
            names, values = legacy_h5.load_optimizer_weights_from_hdf5_group(f, filepath)
            # The optimizer's state is read (and checked) before the model's weights are
            # assigned, so that both are assigned together or not at all.
            assignments += _optimizer_assignments(model, names, values, filepath)
    _assign(assignments)
    return model


def _optimizer_assignments(model, names, values, filepath) -> list:
    import warnings

    optimizer = model.optimizer
    pairs = legacy_h5.match_optimizer_values(optimizer, names, values)
    if pairs is None and not optimizer.built:
        # The file holds slots: they exist once the optimizer is built for the model.
        optimizer.build(model.trainable_variables)
        pairs = legacy_h5.match_optimizer_values(optimizer, names, values)
    if pairs is None:
        warnings.warn(
            f"load_model: the optimizer state in '{filepath}' ({len(values)} variables) does "
            f"not fit optimizer '{optimizer.name}' ({len(optimizer.variables)} variables); the "
            "model starts with a freshly initialized optimizer.",
            stacklevel=4,
        )
        return []
    return legacy_h5.read_values(pairs)
