"""The suite's own environment, set before anything imports Keras, TensorFlow or keratron.

No setting of the user's changes a result: Keras reads its `keras.json` (backend, floatx, image
layout) and caches from a fresh `KERAS_HOME` holding Keras's defaults, `KERAS_BACKEND` is torch,
and every `KERATRON_*` variable is cleared. Child processes the tests start inherit all of it.
A run that means to change a keratron setting says so with `KERATRON_TEST_<NAME>`, which becomes
`KERATRON_<NAME>` here (`KERATRON_TEST_DEVICE=cuda` runs the suite on CUDA tensors). Under
pytest-xdist each worker runs its share of the cores (`_share_cores`).
"""

import atexit
import json
import os
import shutil
import tempfile

KERAS_DEFAULTS = {
    "floatx": "float32",
    "epsilon": 1e-07,
    "backend": "tensorflow",
    "image_data_format": "channels_last",
}
TEST_PREFIX = "KERATRON_TEST_"


def _isolate_environment() -> None:
    keras_home = tempfile.mkdtemp(prefix="keratron-tests-keras-home-")
    atexit.register(shutil.rmtree, keras_home, ignore_errors=True)
    with open(os.path.join(keras_home, "keras.json"), "w") as f:
        json.dump(KERAS_DEFAULTS, f)
    os.environ["KERAS_HOME"] = keras_home
    os.environ["KERAS_BACKEND"] = "torch"
    os.environ.pop("TF_USE_LEGACY_KERAS", None)
    for name in [n for n in os.environ if n.startswith("KERATRON_")]:
        if not name.startswith(TEST_PREFIX):
            del os.environ[name]
    for name, value in list(os.environ.items()):
        if name.startswith(TEST_PREFIX):
            os.environ["KERATRON_" + name[len(TEST_PREFIX) :]] = value


def _share_cores() -> None:
    """Under pytest-xdist, each worker (and every process it starts) runs its share of the
    cores as OpenMP threads, unless OMP_NUM_THREADS is set: torch's default of a thread per
    core in each of two workers on two cores keeps four threads spinning for two cores. A
    test that is about thread counts sets its own (`torch_threads`)."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT") or 0)
    if workers > 1 and "OMP_NUM_THREADS" not in os.environ:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
        os.environ["OMP_NUM_THREADS"] = str(max(1, (cores or os.cpu_count() or 1) // workers))


_isolate_environment()
_share_cores()

import numpy as np  # noqa: E402
import pytest  # noqa: E402


@pytest.fixture(autouse=True, scope="session")
def _doctest_names(doctest_namespace):
    """Docstring examples (`make test` runs every one in the package with `-p tests.conftest`)
    are written against `keratron` and `np`, as a user's script is."""
    import keratron

    doctest_namespace.update(keratron=keratron, np=np)


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


def require_installed(module_name):
    """Checks that an optional test dependency is installed without importing it (a test that
    runs it in a child process: TensorFlow must not load beside Triton); on CI a missing one
    fails instead of skipping."""
    import importlib.util

    if importlib.util.find_spec(module_name) is None:
        if os.environ.get("CI") == "true":
            raise ImportError(f"{module_name} is not installed")
        pytest.skip(f"{module_name} is not installed (the dev and interop extras)")


def require(module_name):
    """Imports an optional test dependency; on CI a missing one fails instead of skipping.

    Triton and TensorFlow both embed LLVM, and a process that loads TensorFlow first aborts
    when Triton loads later (Keras's torch backend loads it through torch._dynamo, keratron's
    kernels load it too): before TensorFlow or tf.keras is first imported, Triton is, so the
    order of the tests in a worker cannot abort it.
    """
    import importlib
    import sys

    if module_name in ("tensorflow", "tf_keras") and "tensorflow" not in sys.modules:
        try:
            import triton  # noqa: F401
        except ImportError:
            pass
    try:
        return importlib.import_module(module_name)
    except ImportError:
        if os.environ.get("CI") == "true":
            raise
        pytest.skip(f"{module_name} is not installed")


def group_sizes(monkeypatch) -> list:
    """The list that each `cast_group` call made by a plan compiled from now on appends its
    tensor count to (plans bind the primitive's implementation when they compile)."""
    from keratron.ops import elementwise

    sizes = []
    impl = elementwise.cast_group_p.impl

    def counted(*xs, dtype):
        sizes.append(len(xs))
        return impl(*xs, dtype=dtype)

    monkeypatch.setattr(elementwise.cast_group_p, "impl", counted)
    return sizes


@pytest.fixture
def torch_threads():
    """`torch_threads(n)` sets torch's intra-op thread count for the test; the count it found
    is restored after."""
    import torch

    before = torch.get_num_threads()
    yield torch.set_num_threads
    torch.set_num_threads(before)
