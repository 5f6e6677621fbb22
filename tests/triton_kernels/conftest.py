"""Triton kernel tests run in a pytest process of their own (`make test` starts it) with
TRITON_INTERPRET=1 set here, before anything imports triton, so the kernels run on CPU.

On a machine with a GPU, `KERATRON_DEVICE=cuda` runs the same tests on CUDA tensors with the
kernels compiled for the device instead of interpreted."""

import os

ON_GPU = os.environ.get("KERATRON_DEVICE", "").startswith("cuda")
if not ON_GPU:
    os.environ["TRITON_INTERPRET"] = "1"

import pytest  # noqa: E402
import torch  # noqa: E402

import keratron as kt  # noqa: E402
from keratron import triton_kernels  # noqa: E402

if ON_GPU:
    # Tensors the tests make with torch directly go where keratron's own do.
    torch.set_default_device(os.environ["KERATRON_DEVICE"])


@pytest.fixture(autouse=True)
def ieee_float32():
    """Kernels and their torch references multiply float32 at IEEE precision (on a GPU both
    could otherwise use TF32, cuDNN's convolutions by default), so 2e-4 tolerances hold. The
    setter writes torch's TF32 flags too; both are restored after."""
    cudnn, cublas = torch.backends.cudnn, torch.backends.cuda.matmul
    previous = cudnn.allow_tf32, cublas.allow_tf32
    kt.config.set_float32_matmul_precision("ieee")
    yield
    kt.config.set_float32_matmul_precision(None)
    cudnn.allow_tf32, cublas.allow_tf32 = previous


@pytest.fixture
def triton_backend():
    """Forces every op with a Triton route through its kernel; restores the backend after."""
    kt.config.set_kernel_backend("triton")
    triton_kernels.reset_launch_counts()
    try:
        yield triton_kernels
    finally:
        kt.config.set_kernel_backend(None)


def pytest_collection_modifyitems(items):
    for item in items:
        item.add_marker(pytest.mark.triton)
