"""Saving and loading models and weights in Keras's file formats, as `keras.saving`.

- `.keras`: the Keras 3 zip (config.json, metadata.json, model.weights.h5);
- `.h5` / `.hdf5`: tf.keras 2 HDF5 (whole models, or weights only);
- `.weights.h5`: Keras 3 weights.

Files written by tf.keras 2 and Keras 3 load here, and files written here load there. Writes
are crash-safe (temporary file, fsync, rename); reads check everything before assigning.

Models are rebuilt by class name through `keratron.layers`, the model classes and the
custom-object registry (`register_keras_serializable`, `custom_object_scope`); nothing in a file
is executed unless `load_model(..., safe_mode=False)` is asked for.

Example:
    >>> import os, tempfile
    >>> model = keratron.Sequential([keratron.Input((3,)), keratron.layers.Dense(2)])
    >>> path = os.path.join(tempfile.mkdtemp(), "model.keras")
    >>> model.save(path)
    >>> restored = keratron.saving.load_model(path)
    >>> restored.output_shape
    (None, 2)
"""

from keratron.layers.serialization import (
    CustomObjectScope,
    custom_object_scope,
    get_custom_objects,
    get_registered_name,
    lookup_registered,
    register_keras_serializable,
)
from keratron.saving.file_editor import KerasFileEditor
from keratron.saving.saving_api import load_model, load_weights, save_model, save_weights
from keratron.saving.serialization_lib import deserialize_keras_object, serialize_keras_object

__all__ = [
    "CustomObjectScope",
    "KerasFileEditor",
    "custom_object_scope",
    "deserialize_keras_object",
    "get_custom_objects",
    "get_registered_name",
    "get_registered_object",
    "load_model",
    "load_weights",
    "register_keras_serializable",
    "save_model",
    "save_weights",
    "serialize_keras_object",
]


def get_registered_object(name, custom_objects=None, module_objects=None):
    """The class or function registered (or in scope) under exactly `name`, or None. As in
    Keras, the active `custom_object_scope`s come first, then the global registry (a class
    registered with a package is found under "package>Name" only), then `custom_objects`, then
    `module_objects`.

    Example:
        >>> class Halve(keratron.layers.Layer):
        ...     pass
        >>> with keratron.saving.custom_object_scope({"Halve": Halve}):
        ...     keratron.saving.get_registered_object("Halve") is Halve
        True
        >>> keratron.saving.get_registered_object("Halve") is None
        True
    """
    found = lookup_registered(name)
    if found is None and custom_objects and name in custom_objects:
        found = custom_objects[name]
    if found is None and module_objects and name in module_objects:
        found = module_objects[name]
    return found
