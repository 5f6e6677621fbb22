"""`keras.distribution`: Keras's JAX-style sharding API (device meshes, tensor layouts,
data and model parallelism).

keratron does not shard tensors over a device mesh. Its data-parallel training is
`keratron.distribute` (tf.distribute's strategies over torch.distributed, launched with
torchrun), so the classes and functions here raise a NotImplementedError that points there.
`list_devices`, `get_device_count` and `distribution` answer, as they need no sharding.

Example:
    >>> keratron.distribution.list_devices("cpu")
    ['cpu:0']
"""

from __future__ import annotations

import torch

__all__ = [
    "DataParallel",
    "DeviceMesh",
    "LayoutMap",
    "ModelParallel",
    "TensorLayout",
    "distribute_tensor",
    "distribution",
    "get_device_count",
    "initialize",
    "list_devices",
    "set_distribution",
]

_ADVICE = (
    "keratron does not shard tensors over a device mesh; for data-parallel training use "
    "keratron.distribute (e.g. `with keratron.distribute.MirroredStrategy().scope(): ...`, "
    "started with torchrun)."
)


def _unsupported(name):
    raise NotImplementedError(f"keras.distribution.{name} is not available in keratron: {_ADVICE}")


class DeviceMesh:
    """Not available in keratron (see the module docstring)."""

    def __init__(self, shape, axis_names, devices=None):
        _unsupported("DeviceMesh")


class TensorLayout:
    """Not available in keratron (see the module docstring)."""

    def __init__(self, axes, device_mesh=None):
        _unsupported("TensorLayout")


class LayoutMap:
    """Not available in keratron (see the module docstring)."""

    def __init__(self, device_mesh):
        _unsupported("LayoutMap")


class DataParallel:
    """Not available in keratron: use `keratron.distribute.MirroredStrategy` (one process per
    device, torchrun) for data parallelism."""

    def __init__(self, device_mesh=None, devices=None, auto_shard_dataset=True):
        _unsupported("DataParallel")


class ModelParallel:
    """Not available in keratron (see the module docstring)."""

    def __init__(self, *, layout_map=None, batch_dim_name=None, auto_shard_dataset=True, **kwargs):
        _unsupported("ModelParallel")


def distribute_tensor(tensor, layout):
    """Not available in keratron (see the module docstring)."""
    _unsupported("distribute_tensor")


def initialize(job_addresses=None, num_processes=None, process_id=None):
    """Not available in keratron: keratron.distribute reads torchrun's environment."""
    _unsupported("initialize")


def set_distribution(value):
    """Not available in keratron (see the module docstring)."""
    _unsupported("set_distribution")


def distribution():
    """The global distribution: always None, as none can be set."""
    return None


def list_devices(device_type=None) -> list:
    """This process's devices as `"cpu:0"`, `"cuda:0"`, ...: those of `device_type` ("cpu",
    "gpu" or "cuda"), else the GPUs if there are any, else the CPU."""
    kind = None if device_type is None else str(device_type).lower()
    if kind not in (None, "cpu", "gpu", "cuda"):
        raise ValueError(
            "list_devices: `device_type` must be 'cpu', 'gpu' or 'cuda'. Received: "
            f"device_type={device_type!r}"
        )
    gpus = [f"cuda:{i}" for i in range(torch.cuda.device_count())]
    if kind in ("gpu", "cuda") or (kind is None and gpus):
        return gpus
    return ["cpu:0"]


def get_device_count(device_type=None) -> int:
    """The number of devices `list_devices(device_type)` lists."""
    return len(list_devices(device_type))
