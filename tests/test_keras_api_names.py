"""keratron's public names against the installed Keras 3, namespace by namespace.

Every public name a `keras.<namespace>` exports must be found under `keratron.<namespace>`,
unless it is a deliberate exception (`EXCEPTIONS`, each with its reason) or a known gap
(`MISSING`). The gap list is exact: a new gap fails the test, and so does a gap that was closed
without being removed from the list.
"""

import importlib

import pytest

from tests.conftest import require

NAMESPACES = [
    "",
    "layers",
    "preprocessing",
    "saving",
    "utils",
    "utils.bounding_boxes",
    "visualization",
    "config",
    "callbacks",
    "losses",
    "metrics",
    "optimizers",
    "optimizers.schedules",
    "optimizers.legacy",
    "legacy",
    "legacy.saving",
    "utils.legacy",
    "export",
    "initializers",
    "regularizers",
    "constraints",
    "activations",
    "random",
    "datasets",
    "models",
    "tree",
    "mixed_precision",
    "backend",
    "applications",
    "quantizers",
    "wrappers",
    "distillation",
]

# Names keratron does not provide as Keras does, by design. Those that exist raise an error that
# says why (checked by `test_deliberate_exceptions_raise`); the others are not public API.
EXCEPTIONS = {
    "": {
        "src": "Keras's implementation package, not public API",
    },
    "layers": {
        "JaxLayer": "wraps a JAX function; keratron has no JAX backend",
        "FlaxLayer": "wraps a Flax module; keratron has no JAX backend",
        "TorchModuleWrapper": "trains a torch.nn.Module with torch.autograd, which keratron "
        "deliberately does not use (its gradients are its own)",
        "TFSMLayer": "loads a TensorFlow SavedModel into a TensorFlow-backend layer",
    },
    "callbacks": {
        "OrbaxCheckpoint": "checkpoints JAX state with Orbax; keratron has no JAX backend",
    },
    "config": {
        "set_backend": "keratron is its own single backend; any other name raises",
    },
}

# Names that raise a NotImplementedError naming the reason: (namespace, name, call args).
RAISING_STUBS = [
    ("layers", "JaxLayer", (lambda x: x,)),
    ("layers", "FlaxLayer", (None,)),
    ("layers", "TorchModuleWrapper", (None,)),
    ("layers", "TFSMLayer", ("model_dir",)),
    ("callbacks", "OrbaxCheckpoint", ("dir",)),
    ("config", "set_backend", ("jax",)),
]

# Known gaps, still to close. Remove a name here in the same change that adds it.
MISSING: dict = {}


def _module(package, namespace):
    return importlib.import_module(package + ("." + namespace if namespace else ""))


def _provides(module, name):
    if hasattr(module, name):
        return True
    try:
        importlib.import_module(f"{module.__name__}.{name}")
    except ImportError:
        return False
    return True


def test_namespace_lists_are_consistent():
    assert set(MISSING) <= set(NAMESPACES) and set(EXCEPTIONS) <= set(NAMESPACES)
    for namespace, names in MISSING.items():
        assert names == sorted(set(names)), namespace
        assert not set(names) & set(EXCEPTIONS.get(namespace, {})), namespace


@pytest.mark.parametrize("namespace", NAMESPACES, ids=lambda n: n or "keras")
def test_keras_names_are_exported(namespace):
    require("keras")
    keras_module = _module("keras", namespace)
    ours = _module("keratron", namespace)
    keras_names = {n for n in dir(keras_module) if not n.startswith("_")}
    expected = keras_names - set(EXCEPTIONS.get(namespace, {}))
    missing = sorted(n for n in expected if not _provides(ours, n))
    listed = MISSING.get(namespace, [])
    new_gaps = sorted(set(missing) - set(listed))
    closed = sorted(set(listed) - set(missing))
    assert not new_gaps, f"keratron.{namespace} lacks Keras names: {new_gaps}"
    assert not closed, f"keratron.{namespace} now has {closed}: remove them from MISSING"
    stale = sorted(set(EXCEPTIONS.get(namespace, {})) - keras_names)
    assert not stale, f"keras.{namespace} no longer exports {stale}: remove them from EXCEPTIONS"


# Ids name the stub only: an argument may be a lambda, whose repr differs between the xdist
# workers (which must collect the same test ids).
@pytest.mark.parametrize(
    "namespace,name,args", RAISING_STUBS, ids=[f"{ns}-{name}" for ns, name, _ in RAISING_STUBS]
)
def test_deliberate_exceptions_raise(namespace, name, args):
    obj = getattr(_module("keratron", namespace), name)
    with pytest.raises(NotImplementedError, match="keratron"):
        obj(*args)
