"""The Triton routes of the "conv", "conv_grad_input" and "conv_grad_filter" primitives: NHWC
convolutions as implicit GEMMs (forward with the bias + activation epilogue), plus direct
depthwise kernels. The kernels, configs and launch specs live in `_conv2d`, loaded on the first
call; the module's other names (`CONFIGS`, `aot_specs`, ...) are read from there."""

from __future__ import annotations

from keratron.autodiff.primitive import device_route
from keratron.ops.convolution import conv_grad_filter_p, conv_grad_input_p, conv_p
from keratron.triton_kernels import load

__all__ = ["conv_route", "grad_input_route", "grad_filter_route"]


@device_route(conv_p)
def conv_route(x, k, b, strides, padding, dilation, groups, activation):
    """Triton route of the "conv" primitive: same signature and result as its impl.

    Example:
        >>> import torch
        >>> x, k = torch.randn(1, 5, 7, 3), torch.randn(3, 3, 3, 5)
        >>> conv_route(x, k, None, (1, 1), ((1, 1), (1, 1)), (1, 1), 1, "relu").shape
        torch.Size([1, 5, 7, 5])
    """
    return load("_conv2d").conv_route(x, k, b, strides, padding, dilation, groups, activation)


@device_route(conv_grad_input_p)
def grad_input_route(g, k, input_shape, strides, padding, dilation, groups):
    """Triton route of "conv_grad_input": the input cotangent, of shape `input_shape`.

    Example:
        >>> import torch
        >>> g, k = torch.randn(1, 3, 4, 5), torch.randn(3, 3, 3, 5)
        >>> grad_input_route(g, k, (1, 5, 7, 3), (2, 2), ((1, 1), (1, 1)), (1, 1), 1).shape
        torch.Size([1, 5, 7, 3])
    """
    kernels = load("_conv2d")
    return kernels.grad_input_route(g, k, input_shape, strides, padding, dilation, groups)


@device_route(conv_grad_filter_p)
def grad_filter_route(x, g, kernel_shape, strides, padding, dilation, groups):
    """Triton route of "conv_grad_filter": the kernel cotangent, of shape `kernel_shape`.

    Example:
        >>> import torch
        >>> x, g = torch.randn(1, 5, 7, 3), torch.randn(1, 3, 4, 5)
        >>> grad_filter_route(x, g, (3, 3, 3, 5), (2, 2), ((1, 1), (1, 1)), (1, 1), 1).shape
        torch.Size([3, 3, 3, 5])
    """
    kernels = load("_conv2d")
    return kernels.grad_filter_route(x, g, kernel_shape, strides, padding, dilation, groups)


def __getattr__(name: str):
    if name.startswith("__"):
        raise AttributeError(name)
    return getattr(load("_conv2d"), name)
