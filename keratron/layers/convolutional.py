"""Convolution layers (Keras's `layers/convolutional`): Conv1D/2D/3D, their transposes,
DepthwiseConv1D/2D and SeparableConv1D/2D.

Names, arguments, defaults, weight names, shapes and creation order, and `get_config` keys
follow Keras 3, so Keras scripts and weight files work unchanged. Each convolution, its bias
and (for relu, relu6, gelu, sigmoid, tanh and linear) its activation are one `ops.fused_conv`
call; a depthwise convolution is that same call with `groups = in_channels`.
"""

from __future__ import annotations

import numpy as np

from keratron import config, ops
from keratron.layers import activations, constraints, initializers, regularizers
from keratron.layers.layer import InputSpec, Layer
from keratron.layers.layer import int_tuple as _int_tuple
from keratron.layers.layer import who as _who

__all__ = [
    "Conv1D",
    "Conv2D",
    "Conv3D",
    "Convolution1D",
    "Convolution2D",
    "Convolution3D",
    "Conv1DTranspose",
    "Conv2DTranspose",
    "Conv3DTranspose",
    "Convolution1DTranspose",
    "Convolution2DTranspose",
    "Convolution3DTranspose",
    "DepthwiseConv1D",
    "DepthwiseConv2D",
    "SeparableConv1D",
    "SeparableConv2D",
    "SeparableConvolution1D",
    "SeparableConvolution2D",
]


# ------------------------------------------------------------------------------------ helpers
def _positive_int(value, arg: str, who: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value <= 0:
        raise ValueError(
            f"{who}: argument `{arg}` must be a positive integer. Received: {arg}={value!r}"
        )
    return int(value)


def _padding(value, who: str, allowed=("valid", "same")) -> str:
    mode = value.lower() if isinstance(value, str) else None
    if mode not in allowed:
        raise ValueError(
            f"{who}: argument `padding` must be one of {', '.join(map(repr, allowed))}. "
            f"Received: padding={value!r}"
        )
    return mode


def _data_format(value, who: str) -> str:
    try:
        return config.standardize_data_format(value)
    except ValueError:
        raise ValueError(
            f"{who}: argument `data_format` must be 'channels_last' or 'channels_first'. "
            f"Received: data_format={value!r}"
        ) from None


def _serialize(module, obj):
    # Keras writes a missing initializer/regularizer/constraint as None.
    return None if obj is None else module.serialize(obj)


def conv_output_length(size, kernel, stride, dilation, padding):
    """Output length of a convolution or pooling window along one axis (None stays None)."""
    if size is None:
        return None
    if padding in ("same", "causal"):
        return (size + stride - 1) // stride
    return (size - (kernel - 1) * dilation - 1) // stride + 1


def _transpose_output_length(size, kernel, stride, dilation, padding, output_padding):
    """Keras's output length of a transposed convolution along one axis."""
    if size is None:
        return None
    dk = (kernel - 1) * dilation + 1
    if padding == "valid":
        extra = max(dk, stride) - dk if output_padding is None else output_padding
        return (size - 1) * stride + dk + extra
    if output_padding is None:
        return size * stride
    return (size - 1) * stride + dk % 2 + output_padding


def _channel_axis(data_format: str) -> int:
    return -1 if data_format == "channels_last" else 1


def _spatial(shape, data_format: str) -> tuple:
    return tuple(shape[1:-1]) if data_format == "channels_last" else tuple(shape[2:])


def _with_channels(batch, spatial, channels, data_format: str) -> tuple:
    if data_format == "channels_last":
        return (batch, *spatial, channels)
    return (batch, channels, *spatial)


def _input_channels(layer, input_shape) -> int:
    input_shape = tuple(input_shape)
    if len(input_shape) != layer.rank + 2:
        raise ValueError(
            f"Input 0 of layer '{layer.name}' ({type(layer).__name__}) must have rank "
            f"{layer.rank + 2} (batch, spatial..., channels). Received: input_shape={input_shape}"
        )
    channels = input_shape[_channel_axis(layer.data_format)]
    if channels is None:
        raise ValueError(
            f"Layer '{layer.name}' ({type(layer).__name__}) needs a known channel dimension "
            f"(data_format={layer.data_format!r}). Received: input_shape={input_shape}"
        )
    return int(channels)


def _check_positive_output(layer, input_shape, output_shape):
    if any(d is not None and d <= 0 for d in output_shape):
        raise ValueError(
            f"Layer '{layer.name}' ({type(layer).__name__}): the computed output size would be "
            f"zero or negative. Received: input_shape={tuple(input_shape)}, kernel_size="
            f"{layer.kernel_size}, strides={layer.strides}, dilation_rate={layer.dilation_rate},"
            f" padding={layer.padding!r} -> output shape {tuple(output_shape)}"
        )


# Activations the fused conv epilogue computes; anything else runs after the convolution.
_FUSED_ACTIVATIONS = {
    activations.relu: "relu",
    activations.relu6: "relu6",
    activations.gelu: "gelu",
    activations.sigmoid: "sigmoid",
    activations.tanh: "tanh",
    activations.linear: None,
}


def _fused_conv(layer, inputs, kernel, bias, **params):
    """One fused_conv call with the layer's activation in the epilogue when it can be."""
    fused = _FUSED_ACTIVATIONS.get(layer.activation, False)
    if fused is not False:
        return ops.fused_conv(inputs, kernel, bias, activation=fused, **params)
    return layer.activation(ops.fused_conv(inputs, kernel, bias, **params))


class _ConvCommon(Layer):
    """Arguments every convolution layer shares (validation and config)."""

    rank: int

    def _init_common(self, kernel_size, strides, padding, data_format, dilation_rate, who, pads):
        self.kernel_size = _int_tuple(kernel_size, self.rank, "kernel_size", who)
        self.strides = _int_tuple(strides, self.rank, "strides", who)
        self.dilation_rate = _int_tuple(dilation_rate, self.rank, "dilation_rate", who)
        self.padding = _padding(padding, who, pads)
        self.data_format = _data_format(data_format, who)
        self.input_spec = InputSpec(ndim=self.rank + 2)

    def _spec_after_build(self, channels):
        self.input_spec = InputSpec(
            ndim=self.rank + 2, axes={_channel_axis(self.data_format): channels}
        )

    def _common_config(self) -> dict:
        return {
            "kernel_size": self.kernel_size,
            "strides": self.strides,
            "padding": self.padding,
            "data_format": self.data_format,
            "dilation_rate": self.dilation_rate,
        }

    def _bias_config(self) -> dict:
        return {
            "activation": activations.serialize(self.activation),
            "use_bias": self.use_bias,
            "bias_initializer": _serialize(initializers, self.bias_initializer),
            "bias_regularizer": _serialize(regularizers, self.bias_regularizer),
            "activity_regularizer": _serialize(regularizers, self.activity_regularizer),
            "bias_constraint": _serialize(constraints, self.bias_constraint),
        }

    def _add_bias(self, size):
        if not self.use_bias:
            return None
        return self.add_weight(
            name="bias",
            shape=(size,),
            initializer=self.bias_initializer,
            regularizer=self.bias_regularizer,
            constraint=self.bias_constraint,
        )


# ------------------------------------------------------------------------------ Conv1D/2D/3D
class _Conv(_ConvCommon):
    """N-D convolution: `activation(conv(inputs, kernel) + bias)`.

    Args:
        filters: positive int, the number of output channels.
        kernel_size: int or tuple of `rank` ints, the window size.
        strides: int or tuple of `rank` ints; strides > 1 cannot be combined with
            dilation_rate > 1.
        padding: "valid", "same" (TensorFlow's rule: the odd pixel is padded after) or,
            for Conv1D only, "causal" (left padding: output[t] sees only inputs[:t + 1]).
        data_format: "channels_last" (default `image_data_format()`) or "channels_first".
        dilation_rate: int or tuple of `rank` ints.
        groups: positive int dividing both the input channels and `filters`.
        activation: activation name or callable; None means linear.
        use_bias: whether to add a bias vector.
        kernel_initializer, bias_initializer: initializers for `kernel` and `bias`.
        kernel_regularizer, bias_regularizer: optional weight regularizers.
        activity_regularizer: optional regularizer on the output.
        kernel_constraint, bias_constraint: optional weight constraints.
    """

    def __init__(
        self,
        filters,
        kernel_size,
        strides=1,
        padding="valid",
        data_format=None,
        dilation_rate=1,
        groups=1,
        activation=None,
        use_bias=True,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        kernel_regularizer=None,
        bias_regularizer=None,
        activity_regularizer=None,
        kernel_constraint=None,
        bias_constraint=None,
        **kwargs,
    ):
        who = _who(type(self).__name__, kwargs)
        filters = _positive_int(filters, "filters", who)
        groups = _positive_int(groups, "groups", who)
        if filters % groups:
            raise ValueError(
                f"{who}: argument `filters` must be divisible by `groups`. Received: "
                f"filters={filters}, groups={groups}"
            )
        super().__init__(activity_regularizer=activity_regularizer, **kwargs)
        pads = ("valid", "same", "causal") if self.rank == 1 else ("valid", "same")
        self._init_common(kernel_size, strides, padding, data_format, dilation_rate, who, pads)
        if max(self.strides) > 1 and max(self.dilation_rate) > 1:
            raise ValueError(
                f"{who}: `strides > 1` cannot be combined with `dilation_rate > 1`. Received: "
                f"strides={self.strides}, dilation_rate={self.dilation_rate}"
            )
        self.filters = filters
        self.groups = groups
        self.activation = activations.get(activation)
        self.use_bias = bool(use_bias)
        self.kernel_initializer = initializers.get(kernel_initializer)
        self.bias_initializer = initializers.get(bias_initializer)
        self.kernel_regularizer = regularizers.get(kernel_regularizer)
        self.bias_regularizer = regularizers.get(bias_regularizer)
        self.kernel_constraint = constraints.get(kernel_constraint)
        self.bias_constraint = constraints.get(bias_constraint)

    def build(self, input_shape):
        channels = _input_channels(self, input_shape)
        if channels % self.groups:
            raise ValueError(
                f"Layer '{self.name}' ({type(self).__name__}): the input channels ({channels}) "
                f"must be divisible by `groups`. Received: groups={self.groups}, "
                f"input_shape={tuple(input_shape)}"
            )
        _check_positive_output(self, input_shape, self.compute_output_shape(input_shape))
        self.kernel = self.add_weight(
            name="kernel",
            shape=self.kernel_size + (channels // self.groups, self.filters),
            initializer=self.kernel_initializer,
            regularizer=self.kernel_regularizer,
            constraint=self.kernel_constraint,
        )
        self.bias = self._add_bias(self.filters)
        self._spec_after_build(channels)
        self.built = True

    def call(self, inputs):
        return _fused_conv(
            self,
            inputs,
            self.kernel,
            self.bias,
            strides=self.strides,
            padding=self.padding,
            data_format=self.data_format,
            dilation_rate=self.dilation_rate,
            groups=self.groups,
        )

    def compute_output_shape(self, input_shape):
        spatial = tuple(
            conv_output_length(n, k, s, d, self.padding)
            for n, k, s, d in zip(
                _spatial(input_shape, self.data_format),
                self.kernel_size,
                self.strides,
                self.dilation_rate,
            )
        )
        return _with_channels(input_shape[0], spatial, self.filters, self.data_format)

    def get_config(self):
        return {
            **super().get_config(),
            "filters": self.filters,
            **self._common_config(),
            "groups": self.groups,
            "kernel_initializer": _serialize(initializers, self.kernel_initializer),
            "kernel_regularizer": _serialize(regularizers, self.kernel_regularizer),
            "kernel_constraint": _serialize(constraints, self.kernel_constraint),
            **self._bias_config(),
        }


class Conv1D(_Conv):
    """1D convolution over `(batch, steps, channels)` (e.g. temporal convolution).

    Arguments as `Conv2D`, with ints or 1-tuples; `padding` may also be "causal".

    Example:
        >>> layer = keratron.layers.Conv1D(8, 3, padding="causal", activation="relu")
        >>> layer(np.ones((2, 10, 4), "float32")).shape
        (2, 10, 8)
    """

    rank = 1


class Conv2D(_Conv):
    """2D convolution over `(batch, height, width, channels)` images.

    Args:
        filters: positive int, the number of output channels.
        kernel_size: int or tuple of 2 ints.
        strides: int or tuple of 2 ints (> 1 cannot be combined with dilation_rate > 1).
        padding: "valid" or "same" (TensorFlow's rule: the odd pixel is padded after).
        data_format: "channels_last" (default `image_data_format()`) or "channels_first".
        dilation_rate: int or tuple of 2 ints.
        groups: positive int dividing both the input channels and `filters`.
        activation: activation name or callable; None means linear.
        use_bias: whether to add a bias vector.
        kernel_initializer, bias_initializer: initializers for `kernel` and `bias`.
        kernel_regularizer, bias_regularizer: optional weight regularizers.
        activity_regularizer: optional regularizer on the output.
        kernel_constraint, bias_constraint: optional weight constraints.

    Example:
        >>> layer = keratron.layers.Conv2D(16, 3, strides=2, padding="same")
        >>> layer(np.ones((1, 9, 9, 3), "float32")).shape
        (1, 5, 5, 16)
    """

    rank = 2


class Conv3D(_Conv):
    """3D convolution over `(batch, depth, height, width, channels)` volumes.

    Arguments as `Conv2D`, with ints or 3-tuples.

    Example:
        >>> keratron.layers.Conv3D(4, 3)(np.ones((1, 5, 5, 5, 2), "float32")).shape
        (1, 3, 3, 3, 4)
    """

    rank = 3


Convolution1D, Convolution2D, Convolution3D = Conv1D, Conv2D, Conv3D


# ------------------------------------------------------------------------ transposed convs
class _ConvTranspose(_ConvCommon):
    """Transposed convolution (the gradient of a convolution w.r.t. its input).

    Output length per spatial axis, with `dk = (kernel - 1) * dilation + 1`: "valid":
    `(n - 1) * stride + max(dk, stride)`, "same": `n * stride`; when `output_padding` is
    given, "valid" gives `(n - 1) * stride + dk + output_padding` and "same"
    `(n - 1) * stride + dk % 2 + output_padding`.
    """

    def __init__(
        self,
        filters,
        kernel_size,
        strides=1,
        padding="valid",
        output_padding=None,
        data_format=None,
        dilation_rate=1,
        activation=None,
        use_bias=True,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        kernel_regularizer=None,
        bias_regularizer=None,
        activity_regularizer=None,
        kernel_constraint=None,
        bias_constraint=None,
        **kwargs,
    ):
        who = _who(type(self).__name__, kwargs)
        filters = _positive_int(filters, "filters", who)
        super().__init__(activity_regularizer=activity_regularizer, **kwargs)
        self._init_common(
            kernel_size, strides, padding, data_format, dilation_rate, who, ("valid", "same")
        )
        if output_padding is not None:
            output_padding = _int_tuple(
                output_padding, self.rank, "output_padding", who, allow_zero=True
            )
            if any(p >= s for p, s in zip(output_padding, self.strides)):
                raise ValueError(
                    f"{who}: every value of `output_padding` must be smaller than the "
                    f"matching `strides` value. Received: output_padding={output_padding}, "
                    f"strides={self.strides}"
                )
        if max(self.strides) > 1 and max(self.dilation_rate) > 1:
            raise ValueError(
                f"{who}: `strides > 1` cannot be combined with `dilation_rate > 1`. Received: "
                f"strides={self.strides}, dilation_rate={self.dilation_rate}"
            )
        self.filters = filters
        self.output_padding = output_padding
        self.activation = activations.get(activation)
        self.use_bias = bool(use_bias)
        self.kernel_initializer = initializers.get(kernel_initializer)
        self.bias_initializer = initializers.get(bias_initializer)
        self.kernel_regularizer = regularizers.get(kernel_regularizer)
        self.bias_regularizer = regularizers.get(bias_regularizer)
        self.kernel_constraint = constraints.get(kernel_constraint)
        self.bias_constraint = constraints.get(bias_constraint)

    def build(self, input_shape):
        channels = _input_channels(self, input_shape)
        # Keras's transposed kernel layout: (*kernel_size, filters, in_channels).
        self.kernel = self.add_weight(
            name="kernel",
            shape=self.kernel_size + (self.filters, channels),
            initializer=self.kernel_initializer,
            regularizer=self.kernel_regularizer,
            constraint=self.kernel_constraint,
        )
        self.bias = self._add_bias(self.filters)
        self._spec_after_build(channels)
        self.built = True

    def call(self, inputs):
        # No fused transposed-conv primitive exists: bias and activation follow the op.
        y = ops.conv_transpose(
            inputs,
            self.kernel,
            strides=self.strides,
            padding=self.padding,
            output_padding=self.output_padding,
            data_format=self.data_format,
            dilation_rate=self.dilation_rate,
        )
        if self.bias is not None:
            shape = [1] * (self.rank + 2)
            shape[_channel_axis(self.data_format)] = self.filters
            y = ops.add(y, ops.reshape(self.bias, tuple(shape)))
        return self.activation(y)

    def compute_output_shape(self, input_shape):
        out_pad = self.output_padding or (None,) * self.rank
        spatial = tuple(
            _transpose_output_length(n, k, s, d, self.padding, p)
            for n, k, s, d, p in zip(
                _spatial(input_shape, self.data_format),
                self.kernel_size,
                self.strides,
                self.dilation_rate,
                out_pad,
            )
        )
        return _with_channels(input_shape[0], spatial, self.filters, self.data_format)

    def get_config(self):
        common = self._common_config()
        return {
            **super().get_config(),
            "filters": self.filters,
            "kernel_size": common.pop("kernel_size"),
            "strides": common.pop("strides"),
            "padding": common.pop("padding"),
            "output_padding": self.output_padding,
            **common,
            "kernel_initializer": _serialize(initializers, self.kernel_initializer),
            "kernel_regularizer": _serialize(regularizers, self.kernel_regularizer),
            "kernel_constraint": _serialize(constraints, self.kernel_constraint),
            **self._bias_config(),
        }


class Conv1DTranspose(_ConvTranspose):
    """1D transposed convolution over `(batch, steps, channels)`.

    Arguments as `Conv2DTranspose`, with ints or 1-tuples.

    Example:
        >>> keratron.layers.Conv1DTranspose(4, 3, strides=2)(np.ones((2, 5, 3), "float32")).shape
        (2, 11, 4)
    """

    rank = 1


class Conv2DTranspose(_ConvTranspose):
    """2D transposed convolution ("deconvolution"), e.g. to upsample feature maps.

    Args:
        filters: positive int, the number of output channels.
        kernel_size: int or tuple of 2 ints.
        strides: int or tuple of 2 ints.
        padding: "valid" or "same".
        output_padding: None, or int / tuple of 2 ints, each smaller than its stride: the
            extra length on the high side of each spatial axis.
        data_format: "channels_last" (default `image_data_format()`) or "channels_first".
        dilation_rate: int or tuple of 2 ints.
        activation: activation name or callable; None means linear.
        use_bias: whether to add a bias vector.
        kernel_initializer, bias_initializer: initializers for `kernel` and `bias`.
        kernel_regularizer, bias_regularizer: optional weight regularizers.
        activity_regularizer: optional regularizer on the output.
        kernel_constraint, bias_constraint: optional weight constraints.

    Example:
        >>> layer = keratron.layers.Conv2DTranspose(8, 3, strides=2, padding="same")
        >>> layer(np.ones((1, 4, 4, 3), "float32")).shape
        (1, 8, 8, 8)
    """

    rank = 2


class Conv3DTranspose(_ConvTranspose):
    """3D transposed convolution over `(batch, depth, height, width, channels)`.

    Arguments as `Conv2DTranspose`, with ints or 3-tuples.

    Example:
        >>> layer = keratron.layers.Conv3DTranspose(2, 2, strides=2)
        >>> layer(np.ones((1, 2, 2, 2, 3), "float32")).shape
        (1, 4, 4, 4, 2)
    """

    rank = 3


Convolution1DTranspose, Convolution2DTranspose, Convolution3DTranspose = (
    Conv1DTranspose,
    Conv2DTranspose,
    Conv3DTranspose,
)


# ------------------------------------------------------------------------------ depthwise
def _as_grouped(kernel, kernel_size):
    """Depthwise kernel (*k, C, M) -> grouped kernel (*k, 1, C * M): output c * M + m."""
    return ops.reshape(kernel, tuple(kernel_size) + (1, kernel.shape[-2] * kernel.shape[-1]))


class _DepthwiseConv(_ConvCommon):
    """Depthwise convolution: each input channel convolved with its own `depth_multiplier`
    filters; output channel `c * depth_multiplier + m`."""

    def __init__(
        self,
        kernel_size,
        strides=1,
        padding="valid",
        depth_multiplier=1,
        data_format=None,
        dilation_rate=1,
        activation=None,
        use_bias=True,
        depthwise_initializer="glorot_uniform",
        bias_initializer="zeros",
        depthwise_regularizer=None,
        bias_regularizer=None,
        activity_regularizer=None,
        depthwise_constraint=None,
        bias_constraint=None,
        **kwargs,
    ):
        who = _who(type(self).__name__, kwargs)
        depth_multiplier = _positive_int(depth_multiplier, "depth_multiplier", who)
        super().__init__(activity_regularizer=activity_regularizer, **kwargs)
        self._init_common(
            kernel_size, strides, padding, data_format, dilation_rate, who, ("valid", "same")
        )
        self.depth_multiplier = depth_multiplier
        self.activation = activations.get(activation)
        self.use_bias = bool(use_bias)
        self.depthwise_initializer = initializers.get(depthwise_initializer)
        self.bias_initializer = initializers.get(bias_initializer)
        self.depthwise_regularizer = regularizers.get(depthwise_regularizer)
        self.bias_regularizer = regularizers.get(bias_regularizer)
        self.depthwise_constraint = constraints.get(depthwise_constraint)
        self.bias_constraint = constraints.get(bias_constraint)

    def build(self, input_shape):
        channels = _input_channels(self, input_shape)
        _check_positive_output(self, input_shape, self.compute_output_shape(input_shape))
        self.kernel = self.add_weight(
            name="kernel",
            shape=self.kernel_size + (channels, self.depth_multiplier),
            initializer=self.depthwise_initializer,
            regularizer=self.depthwise_regularizer,
            constraint=self.depthwise_constraint,
        )
        self.bias = self._add_bias(channels * self.depth_multiplier)
        self._spec_after_build(channels)
        self.built = True

    @property
    def depthwise_kernel(self):
        """The kernel under its tf.keras 2 name."""
        return self.kernel

    def call(self, inputs):
        channels = inputs.shape[_channel_axis(self.data_format)]
        return _fused_conv(
            self,
            inputs,
            _as_grouped(self.kernel, self.kernel_size),
            self.bias,
            strides=self.strides,
            padding=self.padding,
            data_format=self.data_format,
            dilation_rate=self.dilation_rate,
            groups=channels,
        )

    def compute_output_shape(self, input_shape):
        channels = input_shape[_channel_axis(self.data_format)]
        spatial = tuple(
            conv_output_length(n, k, s, d, self.padding)
            for n, k, s, d in zip(
                _spatial(input_shape, self.data_format),
                self.kernel_size,
                self.strides,
                self.dilation_rate,
            )
        )
        out_channels = None if channels is None else channels * self.depth_multiplier
        return _with_channels(input_shape[0], spatial, out_channels, self.data_format)

    def get_config(self):
        return {
            **super().get_config(),
            "depth_multiplier": self.depth_multiplier,
            **self._common_config(),
            "depthwise_initializer": _serialize(initializers, self.depthwise_initializer),
            "depthwise_regularizer": _serialize(regularizers, self.depthwise_regularizer),
            "depthwise_constraint": _serialize(constraints, self.depthwise_constraint),
            **self._bias_config(),
        }


class DepthwiseConv1D(_DepthwiseConv):
    """1D depthwise convolution over `(batch, steps, channels)`.

    Arguments as `DepthwiseConv2D`, with ints or 1-tuples.

    Example:
        >>> layer = keratron.layers.DepthwiseConv1D(3, depth_multiplier=2)
        >>> layer(np.ones((2, 6, 4), "float32")).shape
        (2, 4, 8)
    """

    rank = 1


class DepthwiseConv2D(_DepthwiseConv):
    """2D depthwise convolution (MobileNet's main block): one fused grouped convolution.

    Args:
        kernel_size: int or tuple of 2 ints.
        strides: int or tuple of 2 ints.
        padding: "valid" or "same".
        depth_multiplier: positive int, filters per input channel.
        data_format: "channels_last" (default `image_data_format()`) or "channels_first".
        dilation_rate: int or tuple of 2 ints.
        activation: activation name or callable; None means linear.
        use_bias: whether to add a bias of size `channels * depth_multiplier`.
        depthwise_initializer, bias_initializer: initializers for `kernel` and `bias`.
        depthwise_regularizer, bias_regularizer: optional weight regularizers.
        activity_regularizer: optional regularizer on the output.
        depthwise_constraint, bias_constraint: optional weight constraints.

    Example:
        >>> layer = keratron.layers.DepthwiseConv2D(3, padding="same", use_bias=False)
        >>> layer(np.ones((1, 8, 8, 4), "float32")).shape
        (1, 8, 8, 4)
    """

    rank = 2


# ------------------------------------------------------------------------------ separable
class _SeparableConv(_ConvCommon):
    """Depthwise convolution followed by a pointwise (1x1) convolution, bias and activation."""

    def __init__(
        self,
        filters,
        kernel_size,
        strides=1,
        padding="valid",
        data_format=None,
        dilation_rate=1,
        depth_multiplier=1,
        activation=None,
        use_bias=True,
        depthwise_initializer="glorot_uniform",
        pointwise_initializer="glorot_uniform",
        bias_initializer="zeros",
        depthwise_regularizer=None,
        pointwise_regularizer=None,
        bias_regularizer=None,
        activity_regularizer=None,
        depthwise_constraint=None,
        pointwise_constraint=None,
        bias_constraint=None,
        **kwargs,
    ):
        who = _who(type(self).__name__, kwargs)
        filters = _positive_int(filters, "filters", who)
        depth_multiplier = _positive_int(depth_multiplier, "depth_multiplier", who)
        super().__init__(activity_regularizer=activity_regularizer, **kwargs)
        self._init_common(
            kernel_size, strides, padding, data_format, dilation_rate, who, ("valid", "same")
        )
        self.filters = filters
        self.depth_multiplier = depth_multiplier
        self.activation = activations.get(activation)
        self.use_bias = bool(use_bias)
        self.depthwise_initializer = initializers.get(depthwise_initializer)
        self.pointwise_initializer = initializers.get(pointwise_initializer)
        self.bias_initializer = initializers.get(bias_initializer)
        self.depthwise_regularizer = regularizers.get(depthwise_regularizer)
        self.pointwise_regularizer = regularizers.get(pointwise_regularizer)
        self.bias_regularizer = regularizers.get(bias_regularizer)
        self.depthwise_constraint = constraints.get(depthwise_constraint)
        self.pointwise_constraint = constraints.get(pointwise_constraint)
        self.bias_constraint = constraints.get(bias_constraint)

    def build(self, input_shape):
        channels = _input_channels(self, input_shape)
        _check_positive_output(self, input_shape, self.compute_output_shape(input_shape))
        self.depthwise_kernel = self.add_weight(
            name="depthwise_kernel",
            shape=self.kernel_size + (channels, self.depth_multiplier),
            initializer=self.depthwise_initializer,
            regularizer=self.depthwise_regularizer,
            constraint=self.depthwise_constraint,
        )
        self.pointwise_kernel = self.add_weight(
            name="pointwise_kernel",
            shape=(1,) * self.rank + (channels * self.depth_multiplier, self.filters),
            initializer=self.pointwise_initializer,
            regularizer=self.pointwise_regularizer,
            constraint=self.pointwise_constraint,
        )
        self.bias = self._add_bias(self.filters)
        self._spec_after_build(channels)
        self.built = True

    def call(self, inputs):
        channels = inputs.shape[_channel_axis(self.data_format)]
        depthwise = ops.fused_conv(
            inputs,
            _as_grouped(self.depthwise_kernel, self.kernel_size),
            strides=self.strides,
            padding=self.padding,
            data_format=self.data_format,
            dilation_rate=self.dilation_rate,
            groups=channels,
        )
        return _fused_conv(
            self,
            depthwise,
            self.pointwise_kernel,
            self.bias,
            strides=1,
            padding="valid",
            data_format=self.data_format,
            dilation_rate=1,
            groups=1,
        )

    def compute_output_shape(self, input_shape):
        spatial = tuple(
            conv_output_length(n, k, s, d, self.padding)
            for n, k, s, d in zip(
                _spatial(input_shape, self.data_format),
                self.kernel_size,
                self.strides,
                self.dilation_rate,
            )
        )
        return _with_channels(input_shape[0], spatial, self.filters, self.data_format)

    def get_config(self):
        return {
            **super().get_config(),
            "depth_multiplier": self.depth_multiplier,
            "filters": self.filters,
            **self._common_config(),
            "depthwise_initializer": _serialize(initializers, self.depthwise_initializer),
            "pointwise_initializer": _serialize(initializers, self.pointwise_initializer),
            "depthwise_regularizer": _serialize(regularizers, self.depthwise_regularizer),
            "pointwise_regularizer": _serialize(regularizers, self.pointwise_regularizer),
            "depthwise_constraint": _serialize(constraints, self.depthwise_constraint),
            "pointwise_constraint": _serialize(constraints, self.pointwise_constraint),
            **self._bias_config(),
        }


class SeparableConv1D(_SeparableConv):
    """1D separable convolution over `(batch, steps, channels)`.

    Arguments as `SeparableConv2D`, with ints or 1-tuples.

    Example:
        >>> keratron.layers.SeparableConv1D(5, 3)(np.ones((2, 6, 4), "float32")).shape
        (2, 4, 5)
    """

    rank = 1


class SeparableConv2D(_SeparableConv):
    """2D separable convolution: depthwise, then pointwise (1x1), bias and activation.

    Args:
        filters: positive int, the number of output channels.
        kernel_size: int or tuple of 2 ints, the depthwise window.
        strides: int or tuple of 2 ints, of the depthwise step.
        padding: "valid" or "same".
        data_format: "channels_last" (default `image_data_format()`) or "channels_first".
        dilation_rate: int or tuple of 2 ints.
        depth_multiplier: positive int, depthwise filters per input channel.
        activation: activation name or callable; None means linear.
        use_bias: whether to add a bias vector.
        depthwise_initializer, pointwise_initializer, bias_initializer: initializers.
        depthwise_regularizer, pointwise_regularizer, bias_regularizer: regularizers.
        activity_regularizer: optional regularizer on the output.
        depthwise_constraint, pointwise_constraint, bias_constraint: constraints.

    Example:
        >>> layer = keratron.layers.SeparableConv2D(8, 3, padding="same")
        >>> layer(np.ones((1, 6, 6, 3), "float32")).shape
        (1, 6, 6, 8)
    """

    rank = 2


SeparableConvolution1D, SeparableConvolution2D = SeparableConv1D, SeparableConv2D
