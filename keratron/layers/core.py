"""Core layers (Keras's `layers/core`, `layers/regularization` and the simple reshaping layers):
Dense, EinsumDense, Activation, the dropout and noise layers, Flatten, Reshape, Permute,
RepeatVector, Lambda, Embedding, Masking and Identity.

Names, arguments, defaults, weight names and creation order, and `get_config` keys follow
Keras 3, so a Keras script and a Keras weight file work unchanged.
"""

from __future__ import annotations

import codecs
import inspect
import marshal
import math
import re
import sys
import types
import warnings

import numpy as np

from keratron import ops
from keratron import random as kt_random
from keratron.autodiff import tree
from keratron.config import standardize_data_format, unsafe_deserialization_enabled
from keratron.layers import activations, constraints, initializers, regularizers
from keratron.layers.layer import InputSpec, Layer
from keratron.layers.layer import who as _who
from keratron.layers.node import KerasTensor
from keratron.layers.serialization import get_registered_name, lookup_custom

__all__ = [
    "Dense",
    "EinsumDense",
    "Activation",
    "Dropout",
    "SpatialDropout1D",
    "SpatialDropout2D",
    "GaussianNoise",
    "GaussianDropout",
    "Flatten",
    "Reshape",
    "Permute",
    "RepeatVector",
    "Lambda",
    "Embedding",
    "Masking",
    "Identity",
    "enable_unsafe_deserialization",
]


# ------------------------------------------------------------------------------------ helpers
def _check_positive_int(value, arg: str, who: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value <= 0:
        raise ValueError(
            f"{who}: argument `{arg}` must be a positive integer. Received: {arg}={value!r}"
        )
    return int(value)


def _check_rate(value, arg: str, who: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.number)):
        raise ValueError(
            f"{who}: argument `{arg}` must be a float between 0 and 1. Received: {arg}={value!r}"
        )
    if not 0 <= value <= 1:
        raise ValueError(
            f"{who}: argument `{arg}` must be a float between 0 and 1. Received: {arg}={value}"
        )
    return value


def _serialize(module, obj):
    # The shared serializers expect an object; a missing one is written as None, as Keras does.
    return None if obj is None else module.serialize(obj)


def _drop_keras_only_keys(config: dict) -> dict:
    """Keras 3 writes `quantization_config: None` (and LoRA keys when unused); accept them."""
    config = dict(config)
    for key in ("quantization_config", "lora_rank", "lora_alpha", "gptq_unpacked_column_size"):
        if key in config and config[key] is None:
            config.pop(key)
    return config


# -------------------------------------------------------------------------------------- Dense
# Activations the fused matmul epilogue computes; anything else runs after the product.
_FUSED_ACTIVATIONS = (
    (activations.relu, "relu"),
    (activations.relu6, "relu6"),
    (activations.gelu, "gelu"),
    (activations.sigmoid, "sigmoid"),
    (activations.tanh, "tanh"),
    (activations.linear, None),
)


class Dense(Layer):
    """A densely-connected layer: `activation(inputs @ kernel + bias)`.

    Inputs of rank > 2 are multiplied along their last axis. The product, bias and (for relu,
    relu6, gelu, sigmoid, tanh) the activation are one fused op call.

    Args:
        units: positive int, the output size.
        activation: activation name or callable; None means linear.
        use_bias: whether to add a bias vector.
        kernel_initializer, bias_initializer: initializers for `kernel` and `bias`.
        kernel_regularizer, bias_regularizer: optional weight regularizers.
        activity_regularizer: optional regularizer on the output.
        kernel_constraint, bias_constraint: optional weight constraints.

    Example:
        >>> layer = keratron.layers.Dense(4, activation="relu")
        >>> layer(np.ones((2, 3), "float32")).shape
        (2, 4)
    """

    def __init__(
        self,
        units,
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
        units = _check_positive_int(units, "units", _who("Dense", kwargs))
        kwargs = _drop_keras_only_keys(kwargs)
        super().__init__(activity_regularizer=activity_regularizer, **kwargs)
        self.units = units
        self.activation = activations.get(activation)
        self.use_bias = bool(use_bias)
        self.kernel_initializer = initializers.get(kernel_initializer)
        self.bias_initializer = initializers.get(bias_initializer)
        self.kernel_regularizer = regularizers.get(kernel_regularizer)
        self.bias_regularizer = regularizers.get(bias_regularizer)
        self.kernel_constraint = constraints.get(kernel_constraint)
        self.bias_constraint = constraints.get(bias_constraint)
        self.input_spec = InputSpec(min_ndim=2)
        self.supports_masking = True

    def build(self, input_shape):
        in_dim = input_shape[-1]
        if in_dim is None:
            raise ValueError(
                f"Layer '{self.name}' (Dense) needs a known last input dimension. "
                f"Received: input_shape={tuple(input_shape)}"
            )
        self.kernel = self.add_weight(
            name="kernel",
            shape=(in_dim, self.units),
            initializer=self.kernel_initializer,
            regularizer=self.kernel_regularizer,
            constraint=self.kernel_constraint,
        )
        if self.use_bias:
            self.bias = self.add_weight(
                name="bias",
                shape=(self.units,),
                initializer=self.bias_initializer,
                regularizer=self.bias_regularizer,
                constraint=self.bias_constraint,
            )
        else:
            self.bias = None
        self.input_spec = InputSpec(min_ndim=2, axes={-1: in_dim})
        self.built = True

    def call(self, inputs, training=None):
        for fn, name in _FUSED_ACTIVATIONS:
            if self.activation is fn:
                return ops.fused_matmul(inputs, self.kernel, self.bias, activation=name)
        return self.activation(ops.fused_matmul(inputs, self.kernel, self.bias))

    def compute_output_shape(self, input_shape):
        return tuple(input_shape[:-1]) + (self.units,)

    def get_config(self):
        return {
            **super().get_config(),
            "units": self.units,
            "activation": activations.serialize(self.activation),
            "use_bias": self.use_bias,
            "kernel_initializer": _serialize(initializers, self.kernel_initializer),
            "bias_initializer": _serialize(initializers, self.bias_initializer),
            "kernel_regularizer": _serialize(regularizers, self.kernel_regularizer),
            "bias_regularizer": _serialize(regularizers, self.bias_regularizer),
            "kernel_constraint": _serialize(constraints, self.kernel_constraint),
            "bias_constraint": _serialize(constraints, self.bias_constraint),
        }


# --------------------------------------------------------------------------------- EinsumDense
def _analyze_einsum(equation, bias_axes, input_shape, partial_output_shape, who):
    """Kernel shape, bias shape, full output shape and the kernel's input/output axes of an
    EinsumDense equation ("ab,bc->ac", "...b,bc->...c" or "ab...,bc->ac...")."""
    eq = equation.replace("...", "0")
    left = False
    m = re.fullmatch(r"([a-zA-Z]+),([a-zA-Z]+)->([a-zA-Z]+)", eq)
    if m is None:
        m = re.fullmatch(r"0([a-zA-Z]+),([a-zA-Z]+)->0([a-zA-Z]+)", eq)
        left = m is not None
    if m is None:
        m = re.fullmatch(r"([a-zA-Z]{2,})0,([a-zA-Z]+)->([a-zA-Z]+)0", eq)
    if m is None:
        raise ValueError(
            f"{who}: argument `equation` must have the form '[X],[Y]->[Z]', '...[X],[Y]->...[Z]' "
            f"or '[X]...,[Y]->[Z]...'. Received: equation={equation!r}"
        )
    in_spec, w_spec, out_spec = m.groups()
    input_shape = tuple(input_shape)
    elided = len(input_shape) - len(in_spec)
    if elided < 0 or (elided > 0 and "0" not in eq):
        raise ValueError(
            f"{who}: the input rank {len(input_shape)} does not match the equation "
            f"{equation!r}. Received: input_shape={input_shape}"
        )
    out = [input_shape[0], *partial_output_shape]
    if elided > 0 and left:
        for i in range(1, elided):
            out.insert(1, input_shape[i])
    elif elided > 0:
        out.extend(input_shape[len(input_shape) - elided :])
    if left:
        in_map = {c: i + elided for i, c in enumerate(in_spec)}
        out_map = {c: i + elided for i, c in enumerate(out_spec)}
    else:
        in_map = {c: i for i, c in enumerate(in_spec)}
        out_map = {c: i for i, c in enumerate(out_spec)}
    if len(out) != len(out_map) + (elided if elided > 0 else 0):
        raise ValueError(
            f"{who}: argument `output_shape` must give the {len(out_spec) - 1} non-batch output "
            f"dimensions of {equation!r}. Received: output_shape={tuple(partial_output_shape)}"
        )
    for c in in_spec:
        if (
            c in out_map
            and out[out_map[c]] is not None
            and out[out_map[c]] != input_shape[in_map[c]]
        ):
            raise ValueError(
                f"{who}: input and output shapes differ at shared dimension '{c}': input has "
                f"{input_shape[in_map[c]]}, output_shape has {out[out_map[c]]}."
            )
    for c in out_spec:
        if c not in in_spec and c not in w_spec:
            raise ValueError(
                f"{who}: output dimension '{c}' of {equation!r} appears in neither the input "
                f"nor the weight spec."
            )
    kernel_shape, in_axes, out_axes = [], [], []
    for i, c in enumerate(w_spec):
        if c in out_map:
            kernel_shape.append(out[out_map[c]])
            out_axes.append(i)
        elif c in in_map:
            kernel_shape.append(input_shape[in_map[c]])
            in_axes.append(i)
        else:
            raise ValueError(
                f"{who}: weight dimension '{c}' of {equation!r} matches neither the input nor "
                "the output spec."
            )
    bias_shape = None
    if bias_axes is not None:
        for c in bias_axes:
            if c not in out_spec:
                raise ValueError(
                    f"{who}: bias axis '{c}' is not an output axis of {equation!r}. "
                    f"Received: bias_axes={bias_axes!r}"
                )
        offset = elided if left else 0
        first = min(out_spec.find(c) for c in bias_axes)
        bias_shape = [
            out[i + offset] if c in bias_axes else 1 for i, c in enumerate(out_spec) if i >= first
        ]
        if not left:
            bias_shape.extend([1] * max(elided, 0))
    return kernel_shape, bias_shape, tuple(out), in_axes, out_axes


class EinsumDense(Layer):
    """A dense layer written as an einsum between the input and a kernel.

    Args:
        equation: e.g. "ab,bc->ac" or "abc,cd->abd"; the first term is the input, the second
            the kernel; "..." may stand for leading or trailing axes.
        output_shape: the output shape without the batch axis (int or tuple; None entries
            are inferred from the input).
        activation: optional activation.
        bias_axes: output axis letters that get a bias, or None.
        kernel_initializer, bias_initializer, kernel_regularizer, bias_regularizer,
        kernel_constraint, bias_constraint: as in `Dense`.

    Example:
        >>> layer = keratron.layers.EinsumDense("abc,cd->abd", (None, 8), bias_axes="d")
        >>> layer(np.ones((2, 5, 3), "float32")).shape
        (2, 5, 8)
    """

    def __init__(
        self,
        equation,
        output_shape,
        activation=None,
        bias_axes=None,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        kernel_regularizer=None,
        bias_regularizer=None,
        kernel_constraint=None,
        bias_constraint=None,
        **kwargs,
    ):
        who = _who("EinsumDense", kwargs)
        if not isinstance(equation, str):
            raise TypeError(f"{who}: argument `equation` must be a string. Received: {equation!r}")
        if isinstance(output_shape, (int, np.integer)) or output_shape is None:
            output_shape = (output_shape,)
        output_shape = tuple(None if d is None else int(d) for d in output_shape)
        if bias_axes is not None and not isinstance(bias_axes, str):
            raise TypeError(
                f"{who}: argument `bias_axes` must be a string of output axis letters or None. "
                f"Received: bias_axes={bias_axes!r}"
            )
        super().__init__(**_drop_keras_only_keys(kwargs))
        self.equation = equation
        self.partial_output_shape = output_shape
        self.bias_axes = bias_axes
        self.activation = activations.get(activation)
        self.kernel_initializer = initializers.get(kernel_initializer)
        self.bias_initializer = initializers.get(bias_initializer)
        self.kernel_regularizer = regularizers.get(kernel_regularizer)
        self.bias_regularizer = regularizers.get(bias_regularizer)
        self.kernel_constraint = constraints.get(kernel_constraint)
        self.bias_constraint = constraints.get(bias_constraint)

    def _analyze(self, input_shape):
        return _analyze_einsum(
            self.equation,
            self.bias_axes,
            input_shape,
            self.partial_output_shape,
            f"Layer '{self.name}' (EinsumDense)",
        )

    def build(self, input_shape):
        kernel_shape, bias_shape, _, in_axes, out_axes = self._analyze(input_shape)
        self.input_spec = InputSpec(ndim=len(input_shape))
        init = self.kernel_initializer
        if isinstance(init, initializers.VarianceScaling):
            # Keras computes the fans from the kernel's input and output axes, not from its
            # last two; the draws are i.i.d., so drawing a (fan_in, fan_out) matrix and
            # reshaping it gives exactly that distribution.
            fan_in = math.prod(kernel_shape[i] for i in in_axes)
            fan_out = math.prod(kernel_shape[i] for i in out_axes)
            base = init

            def init(shape, dtype=None):
                return ops.reshape(base((fan_in, fan_out), dtype=dtype), tuple(shape))

        self.kernel = self.add_weight(
            name="kernel",
            shape=tuple(kernel_shape),
            initializer=init,
            regularizer=self.kernel_regularizer,
            constraint=self.kernel_constraint,
        )
        if bias_shape is not None:
            self.bias = self.add_weight(
                name="bias",
                shape=tuple(bias_shape),
                initializer=self.bias_initializer,
                regularizer=self.bias_regularizer,
                constraint=self.bias_constraint,
            )
        else:
            self.bias = None
        self.built = True

    def call(self, inputs, training=None):
        x = ops.einsum(self.equation, inputs, self.kernel)
        if self.bias is not None:
            x = ops.add(x, self.bias)
        return self.activation(x)

    def compute_output_shape(self, input_shape):
        return self._analyze(input_shape)[2]

    def get_config(self):
        return {
            **super().get_config(),
            "output_shape": self.partial_output_shape,
            "equation": self.equation,
            "activation": activations.serialize(self.activation),
            "bias_axes": self.bias_axes,
            "kernel_initializer": _serialize(initializers, self.kernel_initializer),
            "bias_initializer": _serialize(initializers, self.bias_initializer),
            "kernel_regularizer": _serialize(regularizers, self.kernel_regularizer),
            "bias_regularizer": _serialize(regularizers, self.bias_regularizer),
            "activity_regularizer": _serialize(regularizers, self.activity_regularizer),
            "kernel_constraint": _serialize(constraints, self.kernel_constraint),
            "bias_constraint": _serialize(constraints, self.bias_constraint),
        }


# ---------------------------------------------------------------------------------- Activation
class Activation(Layer):
    """Applies an activation function.

    Args:
        activation: a name ("relu", "softmax", ...) or a callable.

    Example:
        >>> keratron.layers.Activation("relu")(np.array([[-1.0, 2.0]], "float32")).numpy()
        array([[0., 2.]], dtype=float32)
    """

    def __init__(self, activation, **kwargs):
        super().__init__(**kwargs)
        self.supports_masking = True
        self.activation = activations.get(activation)

    def call(self, inputs):
        return self.activation(inputs)

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        return {**super().get_config(), "activation": activations.serialize(self.activation)}


# ---------------------------------------------------------------------- dropout and noise layers
class Dropout(Layer):
    """Zeroes inputs at random with probability `rate` while training, scaling the rest by
    `1 / (1 - rate)`; the identity at inference.

    Args:
        rate: float in [0, 1], the fraction of inputs to drop.
        noise_shape: optional shape of the binary mask (1 shares it along an axis; None takes
            the input's size).
        seed: optional int seed.

    Example:
        >>> layer = keratron.layers.Dropout(0.5, seed=0)
        >>> y = layer(np.ones((2, 4), "float32"), training=True)  # entries 0.0 or 2.0
    """

    def __init__(self, rate, noise_shape=None, seed=None, **kwargs):
        who = _who(type(self).__name__, kwargs)
        rate = _check_rate(rate, "rate", who)
        super().__init__(**kwargs)
        self.rate = rate
        self.seed = seed
        self.noise_shape = self._validate_noise_shape(noise_shape, who)
        if rate > 0:
            self.seed_generator = kt_random.SeedGenerator(seed)
        self.supports_masking = True

    @staticmethod
    def _validate_noise_shape(noise_shape, who):
        if noise_shape is None:
            return None
        if isinstance(noise_shape, str) or not hasattr(noise_shape, "__iter__"):
            raise ValueError(
                f"{who}: argument `noise_shape` must be a tuple of integers or None. "
                f"Received: noise_shape={noise_shape!r}"
            )
        noise_shape = tuple(noise_shape)
        for i, d in enumerate(noise_shape):
            if d is not None and (
                isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d <= 0
            ):
                raise ValueError(
                    f"{who}: argument `noise_shape` must hold positive integers or None; entry "
                    f"{i} is {d!r}. Received: noise_shape={noise_shape}"
                )
        return noise_shape

    def _noise_shape(self, inputs):
        return self.noise_shape

    def call(self, inputs, training=False):
        if training and self.rate > 0:
            return kt_random.dropout(
                inputs, self.rate, noise_shape=self._noise_shape(inputs), seed=self.seed_generator
            )
        return inputs

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        return {
            **super().get_config(),
            "rate": self.rate,
            "seed": self.seed,
            "noise_shape": self.noise_shape,
        }


class _SpatialDropout(Dropout):
    def __init__(self, rate, seed=None, name=None, dtype=None):
        super().__init__(rate, seed=seed, name=name, dtype=dtype)

    def get_config(self):
        # Keras's spatial dropout configs carry only these keys.
        return {"rate": self.rate, "seed": self.seed, "name": self.name, "dtype": self.dtype}


class SpatialDropout1D(_SpatialDropout):
    """Dropout of whole channels of `(batch, steps, channels)` inputs.

    Args:
        rate: float in [0, 1].
        seed: optional int seed.

    Example:
        >>> layer = keratron.layers.SpatialDropout1D(0.5, seed=0)
        >>> y = layer(np.ones((2, 3, 4), "float32"), training=True)
    """

    def __init__(self, rate, seed=None, name=None, dtype=None):
        super().__init__(rate, seed=seed, name=name, dtype=dtype)
        self.input_spec = InputSpec(ndim=3)

    def _noise_shape(self, inputs):
        s = inputs.shape
        return (s[0], 1, s[2])


class SpatialDropout2D(_SpatialDropout):
    """Dropout of whole feature maps of 4D inputs.

    Args:
        rate: float in [0, 1].
        data_format: "channels_last" (default from config) or "channels_first".
        seed: optional int seed.

    Example:
        >>> layer = keratron.layers.SpatialDropout2D(0.5, seed=0)
        >>> y = layer(np.ones((2, 5, 5, 3), "float32"), training=True)
    """

    def __init__(self, rate, data_format=None, seed=None, name=None, dtype=None):
        super().__init__(rate, seed=seed, name=name, dtype=dtype)
        self.data_format = standardize_data_format(data_format)
        self.input_spec = InputSpec(ndim=4)

    def _noise_shape(self, inputs):
        s = inputs.shape
        if self.data_format == "channels_first":
            return (s[0], s[1], 1, 1)
        return (s[0], 1, 1, s[3])

    def get_config(self):
        return {**super().get_config(), "data_format": self.data_format}


class GaussianNoise(Layer):
    """Adds zero-mean Gaussian noise of standard deviation `stddev` while training.

    Args:
        stddev: float in [0, 1].
        seed: optional int seed.

    Example:
        >>> layer = keratron.layers.GaussianNoise(0.1, seed=0)
        >>> y = layer(np.zeros((2, 3), "float32"), training=True)
    """

    def __init__(self, stddev, seed=None, **kwargs):
        stddev = _check_rate(stddev, "stddev", _who("GaussianNoise", kwargs))
        super().__init__(**kwargs)
        self.stddev = stddev
        self.seed = seed
        if stddev > 0:
            self.seed_generator = kt_random.SeedGenerator(seed)
        self.supports_masking = True

    def call(self, inputs, training=False):
        if training and self.stddev > 0:
            noise = kt_random.normal(
                inputs.shape, 0.0, self.stddev, dtype=inputs.dtype, seed=self.seed_generator
            )
            return ops.add(inputs, noise)
        return inputs

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        return {**super().get_config(), "stddev": self.stddev, "seed": self.seed}


class GaussianDropout(Layer):
    """Multiplies inputs by Gaussian noise of mean 1 and variance `rate / (1 - rate)` while
    training.

    Args:
        rate: float in [0, 1).
        seed: optional int seed.

    Example:
        >>> layer = keratron.layers.GaussianDropout(0.2, seed=0)
        >>> y = layer(np.ones((2, 3), "float32"), training=True)
    """

    def __init__(self, rate, seed=None, **kwargs):
        who = _who("GaussianDropout", kwargs)
        rate = _check_rate(rate, "rate", who)
        if rate == 1:
            # The noise variance rate / (1 - rate) would be infinite.
            raise ValueError(f"{who}: argument `rate` must be in [0, 1). Received: rate={rate}")
        super().__init__(**kwargs)
        self.rate = rate
        self.seed = seed
        if rate > 0:
            self.seed_generator = kt_random.SeedGenerator(seed)
        self.supports_masking = True

    def call(self, inputs, training=False):
        if training and self.rate > 0:
            stddev = math.sqrt(self.rate / (1.0 - self.rate))
            noise = kt_random.normal(
                inputs.shape, 1.0, stddev, dtype=inputs.dtype, seed=self.seed_generator
            )
            return ops.multiply(inputs, noise)
        return inputs

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        return {**super().get_config(), "rate": self.rate, "seed": self.seed}


# ------------------------------------------------------------------------- reshaping layers
class Flatten(Layer):
    """Flattens every axis but the batch axis (a rank-1 input becomes `(batch, 1)`).

    Args:
        data_format: "channels_last" or "channels_first"; with "channels_first" the channel
            axis is moved last first, so the element order matches channels_last models.

    Example:
        >>> keratron.layers.Flatten()(np.ones((2, 3, 4), "float32")).shape
        (2, 12)
    """

    def __init__(self, data_format=None, **kwargs):
        super().__init__(**kwargs)
        self.data_format = standardize_data_format(data_format)
        self.input_spec = InputSpec(min_ndim=1)

    def call(self, inputs):
        rank = inputs.ndim
        if self.data_format == "channels_first" and rank > 2:
            inputs = ops.transpose(inputs, (0, *range(2, rank), 1))
        return ops.reshape(inputs, (inputs.shape[0], math.prod(inputs.shape[1:])))

    def compute_output_shape(self, input_shape):
        rest = input_shape[1:]
        dim = None if any(d is None for d in rest) else math.prod(rest)
        return (input_shape[0], dim)

    def get_config(self):
        return {**super().get_config(), "data_format": self.data_format}


class Reshape(Layer):
    """Reshapes the non-batch axes to `target_shape` (one entry may be -1).

    Args:
        target_shape: tuple of ints, without the batch axis.

    Example:
        >>> keratron.layers.Reshape((3, -1))(np.ones((2, 12), "float32")).shape
        (2, 3, 4)
    """

    def __init__(self, target_shape, **kwargs):
        who = _who("Reshape", kwargs)
        try:
            target_shape = tuple(int(d) for d in target_shape)
        except (TypeError, ValueError) as e:
            raise TypeError(
                f"{who}: argument `target_shape` must be a tuple of integers. "
                f"Received: target_shape={target_shape!r}"
            ) from e
        if any(d < -1 for d in target_shape) or target_shape.count(-1) > 1:
            raise ValueError(
                f"{who}: argument `target_shape` must hold non-negative integers and at most "
                f"one -1. Received: target_shape={target_shape}"
            )
        super().__init__(**kwargs)
        self.target_shape = target_shape

    def _resolve(self, input_shape):
        rest = tuple(input_shape[1:])
        target = self.target_shape
        if -1 not in target:
            if None not in rest and math.prod(rest) != math.prod(target):
                raise ValueError(
                    f"Layer '{self.name}' (Reshape) cannot reshape inputs of shape "
                    f"{tuple(input_shape)} to target_shape={target}: the sizes differ."
                )
            return target
        if None in rest:
            return tuple(None if d == -1 else d for d in target)
        known = math.prod(d for d in target if d != -1)
        total = math.prod(rest)
        if known == 0 or total % known:
            raise ValueError(
                f"Layer '{self.name}' (Reshape) cannot reshape inputs of shape "
                f"{tuple(input_shape)} to target_shape={target}."
            )
        return tuple(total // known if d == -1 else d for d in target)

    def call(self, inputs):
        return ops.reshape(inputs, (inputs.shape[0],) + self._resolve(inputs.shape))

    def compute_output_shape(self, input_shape):
        return (input_shape[0],) + self._resolve(input_shape)

    def get_config(self):
        return {**super().get_config(), "target_shape": self.target_shape}


class Permute(Layer):
    """Permutes the non-batch axes (`dims` are 1-based, e.g. `(2, 1)` swaps axes 1 and 2).

    Args:
        dims: tuple, a permutation of `1..rank-1`.

    Example:
        >>> keratron.layers.Permute((2, 1))(np.ones((2, 3, 4), "float32")).shape
        (2, 4, 3)
    """

    def __init__(self, dims, **kwargs):
        who = _who("Permute", kwargs)
        try:
            dims = tuple(int(d) for d in dims)
        except (TypeError, ValueError) as e:
            raise TypeError(
                f"{who}: argument `dims` must be a tuple of integers. Received: dims={dims!r}"
            ) from e
        if sorted(dims) != list(range(1, len(dims) + 1)):
            raise ValueError(
                f"{who}: argument `dims` must be a permutation of 1..{len(dims)} (axis 0, the "
                f"batch axis, is not permuted). Received: dims={dims}"
            )
        super().__init__(**kwargs)
        self.dims = dims
        self.input_spec = InputSpec(ndim=len(dims) + 1)

    def call(self, inputs):
        return ops.transpose(inputs, (0,) + self.dims)

    def compute_output_shape(self, input_shape):
        return (input_shape[0],) + tuple(input_shape[d] for d in self.dims)

    def get_config(self):
        return {**super().get_config(), "dims": self.dims}


class RepeatVector(Layer):
    """Repeats a `(batch, features)` input `n` times: `(batch, n, features)`.

    Args:
        n: positive int.

    Example:
        >>> keratron.layers.RepeatVector(3)(np.ones((2, 4), "float32")).shape
        (2, 3, 4)
    """

    def __init__(self, n, **kwargs):
        who = _who("RepeatVector", kwargs)
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
            raise TypeError(f"{who}: argument `n` must be an integer. Received: n={n!r}")
        n = _check_positive_int(n, "n", who)
        super().__init__(**kwargs)
        self.n = n
        self.input_spec = InputSpec(ndim=2)

    def call(self, inputs):
        return ops.repeat(ops.expand_dims(inputs, 1), self.n, axis=1)

    def compute_output_shape(self, input_shape):
        return (input_shape[0], self.n, input_shape[1])

    def get_config(self):
        return {**super().get_config(), "n": self.n}


# -------------------------------------------------------------------------------------- Lambda
_UNSAFE_DESERIALIZATION = False


def enable_unsafe_deserialization() -> None:
    """Lets `Lambda.from_config` rebuild Python lambdas from their serialized bytecode.

    A config (or a model file) holding a lambda's bytecode can run arbitrary code when
    loaded, so this is refused unless explicitly enabled here or with `safe_mode=False`.

    Example:
        >>> keratron.layers.core.enable_unsafe_deserialization()
    """
    global _UNSAFE_DESERIALIZATION
    _UNSAFE_DESERIALIZATION = True


def _is_python_lambda(fn) -> bool:
    return isinstance(fn, types.LambdaType) and fn.__name__ == "<lambda>"


def _func_dump(fn) -> tuple:
    """(base64 of the marshalled code, defaults, closure values), as tf.keras writes them."""
    code = codecs.encode(marshal.dumps(fn.__code__), "base64").decode("ascii")
    closure = tuple(c.cell_contents for c in fn.__closure__) if fn.__closure__ else None
    return code, fn.__defaults__, closure


def _make_cell(value):
    return (lambda: value).__closure__[0]


def _func_load(dumped, globs) -> types.FunctionType:
    code, defaults, closure = dumped
    raw = codecs.decode(code.encode("ascii"), "base64")
    code = marshal.loads(raw)
    if closure is not None:
        closure = tuple(_make_cell(v) for v in closure)
    if isinstance(defaults, list):
        defaults = tuple(defaults)
    return types.FunctionType(code, globs, code.co_name, defaults, closure)


class Lambda(Layer):
    """Wraps an arbitrary expression as a layer: `function(inputs, **arguments)`.

    Args:
        function: the callable; it may also take `mask` and `training` keyword arguments.
        output_shape: optional output shape without the batch axis (tuple) or a callable
            from input shape to output shape; by default it is inferred by running `function`.
        mask: optional output mask, or a callable `(inputs, mask) -> mask`.
        arguments: optional dict of extra keyword arguments for `function`.

    Python lambdas are serialized as marshalled bytecode, which `from_config` refuses to load
    unless `safe_mode=False` is passed or `enable_unsafe_deserialization()` was called; named
    functions are serialized by their registered name.

    Example:
        >>> layer = keratron.layers.Lambda(lambda x: x * 2.0)
        >>> layer(np.ones((1, 2), "float32")).numpy()
        array([[2., 2.]], dtype=float32)
    """

    def __init__(self, function, output_shape=None, mask=None, arguments=None, **kwargs):
        who = _who("Lambda", kwargs)
        if not callable(function):
            raise TypeError(
                f"{who}: argument `function` must be callable. Received: function={function!r}"
            )
        if arguments is not None and not isinstance(arguments, dict):
            raise TypeError(
                f"{who}: argument `arguments` must be a dict or None. "
                f"Received: arguments={arguments!r}"
            )
        super().__init__(**kwargs)
        self.function = function
        self.arguments = dict(arguments or {})
        self.mask = mask
        self.supports_masking = mask is not None
        if isinstance(output_shape, list):
            output_shape = tuple(output_shape)
        self._output_shape = output_shape
        try:
            params = inspect.signature(function).parameters
        except (TypeError, ValueError):
            params = {}
        self._fn_expects_training_arg = "training" in params
        self._fn_expects_mask_arg = "mask" in params

    def call(self, inputs, mask=None, training=None):
        kwargs = dict(self.arguments)
        if self._fn_expects_mask_arg:
            kwargs["mask"] = mask
        if self._fn_expects_training_arg:
            kwargs["training"] = training
        return self.function(inputs, **kwargs)

    def compute_mask(self, inputs, mask=None):
        if callable(self.mask):
            return self.mask(inputs, mask)
        return self.mask

    def compute_output_shape(self, input_shape):
        if self._output_shape is None:
            return super().compute_output_shape(input_shape)
        if callable(self._output_shape):
            return self._output_shape(input_shape)
        batch = tree.flatten(input_shape)[0] if input_shape else None

        def add_batch(shape):
            return (batch,) + tuple(shape)

        shape = self._output_shape
        if shape and all(isinstance(s, (tuple, list)) for s in shape):
            return [add_batch(s) for s in shape]
        return add_batch(shape)

    def compute_output_spec(self, *args, **kwargs):
        if self._output_shape is None:
            return super().compute_output_spec(*args, **kwargs)
        x = args[0] if args else kwargs["inputs"]
        shapes = tree.map_structure(lambda t: tuple(t.shape), x)
        dtype = tree.flatten(x)[0].dtype
        out = self.compute_output_shape(shapes)
        if isinstance(out, list):
            return [KerasTensor(s, dtype) for s in out]
        return KerasTensor(out, dtype)

    # -------------------------------------------------------------------------- config
    @staticmethod
    def _serialize_function(fn, allow_raw=False):
        if _is_python_lambda(fn):
            return _func_dump(fn), "lambda", fn.__module__
        if callable(fn):
            return get_registered_name(fn), "function", getattr(fn, "__module__", None)
        if allow_raw:
            return fn, "raw", None
        raise ValueError(f"Lambda: cannot serialize {fn!r} of type {type(fn).__name__}.")

    def get_config(self):
        config = super().get_config()
        fn, fn_type, fn_module = self._serialize_function(self.function)
        config.update({"function": fn, "function_type": fn_type, "module": fn_module})
        shape, shape_type, shape_module = self._serialize_function(
            self._output_shape, allow_raw=True
        )
        config.update(
            {
                "output_shape": shape,
                "output_shape_type": shape_type,
                "output_shape_module": shape_module,
            }
        )
        if self.mask is not None:
            mask, mask_type, mask_module = self._serialize_function(self.mask, allow_raw=True)
            config.update({"mask": mask, "mask_type": mask_type, "mask_module": mask_module})
        config["arguments"] = dict(self.arguments)
        return config

    @classmethod
    def from_config(cls, config, custom_objects=None, safe_mode=None):
        """Rebuilds a Lambda; Python lambdas load only with safe mode off.

        Args:
            config: a dict from `get_config` (tf.keras layout; Keras 3's layout also reads).
            custom_objects: optional dict of names to functions.
            safe_mode: None follows `keratron.config.enable_unsafe_deserialization()`; False
                allows lambdas.

        Raises:
            ValueError: for a Python lambda in safe mode, or an unknown function name.
        """
        unsafe = _UNSAFE_DESERIALIZATION or unsafe_deserialization_enabled()
        safe = (not unsafe) if safe_mode is None else safe_mode is not False
        config = dict(config)
        config["function"] = cls._parse_function(
            config, "function", "function_type", "module", custom_objects, safe
        )
        if "output_shape" in config:
            config["output_shape"] = cls._parse_function(
                config,
                "output_shape",
                "output_shape_type",
                "output_shape_module",
                custom_objects,
                safe,
            )
            if isinstance(config["output_shape"], list):
                config["output_shape"] = tuple(config["output_shape"])
        if "mask" in config:
            config["mask"] = cls._parse_function(
                config, "mask", "mask_type", "mask_module", custom_objects, safe
            )
        for key in (
            "function_type",
            "module",
            "output_shape_type",
            "output_shape_module",
            "mask_type",
            "mask_module",
        ):
            config.pop(key, None)
        return cls(**config)

    @staticmethod
    def _parse_function(config, key, type_key, module_key, custom_objects, safe):
        value = config[key]
        kind = config.get(type_key)
        # Keras 3 writes {"class_name": "__lambda__", "config": {code, defaults, closure}}.
        if isinstance(value, dict) and value.get("class_name") == "__lambda__":
            inner = value["config"]
            value, kind = (inner["code"], inner.get("defaults"), inner.get("closure")), "lambda"
        elif isinstance(value, dict) and value.get("class_name") == "function":
            value, kind = value.get("registered_name") or value.get("config"), "function"
        if kind == "lambda":
            if safe:
                raise ValueError(
                    f"Lambda.from_config: the config's `{key}` is a Python lambda stored as "
                    "bytecode, and loading it could execute arbitrary code, so it is refused in "
                    "safe mode. If you trust its source, pass `safe_mode=False` or call "
                    "`keratron.config.enable_unsafe_deserialization()` first."
                )
            module = config.get(module_key)
            globs = dict(vars(sys.modules[module])) if module in sys.modules else {}
            if module is not None and module not in sys.modules:
                warnings.warn(
                    f"Lambda.from_config: module {module!r} of the serialized lambda is not "
                    "imported; names it uses may be undefined.",
                    stacklevel=3,
                )
            globs.update(custom_objects or {})
            return _func_load(value, globs)
        if kind == "function":
            fn = lookup_custom(value, custom_objects)
            if fn is None and isinstance(value, str) and not value.startswith("<"):
                try:
                    fn = activations.get(value)
                except ValueError:
                    fn = None
            if fn is None:
                raise ValueError(
                    f"Lambda.from_config: unknown function {value!r} for `{key}`. Register it "
                    "with `keratron.saving.register_keras_serializable()` or pass it in "
                    "`custom_objects`."
                )
            return fn
        return value


# ------------------------------------------------------------------------------------ Embedding
class Embedding(Layer):
    """Maps integer indices in `[0, input_dim)` to dense vectors of size `output_dim`.

    Args:
        input_dim: vocabulary size.
        output_dim: embedding size.
        embeddings_initializer: initializer of the `embeddings` matrix (default "uniform").
        embeddings_regularizer, embeddings_constraint: optional.
        mask_zero: if True, index 0 is padding and the layer outputs a mask `inputs != 0`.
        weights: optional initial `[embeddings]` matrix.

    Example:
        >>> layer = keratron.layers.Embedding(10, 4, mask_zero=True)
        >>> layer(np.array([[1, 2, 0]])).shape
        (1, 3, 4)
    """

    def __init__(
        self,
        input_dim,
        output_dim,
        embeddings_initializer="uniform",
        embeddings_regularizer=None,
        embeddings_constraint=None,
        mask_zero=False,
        weights=None,
        **kwargs,
    ):
        who = _who("Embedding", kwargs)
        input_dim = _check_positive_int(input_dim, "input_dim", who)
        output_dim = _check_positive_int(output_dim, "output_dim", who)
        if kwargs.pop("input_length", None) is not None:
            warnings.warn("Argument `input_length` is deprecated. Just remove it.", stacklevel=2)
        super().__init__(**_drop_keras_only_keys(kwargs))
        self.input_dim = input_dim
        self.output_dim = output_dim
        self.embeddings_initializer = initializers.get(embeddings_initializer)
        self.embeddings_regularizer = regularizers.get(embeddings_regularizer)
        self.embeddings_constraint = constraints.get(embeddings_constraint)
        self.mask_zero = bool(mask_zero)
        self.supports_masking = self.mask_zero
        # Indices are never cast to the float compute dtype.
        self.autocast = False
        if weights is not None:
            self.build()
            if not (isinstance(weights, list) and len(weights) == 1):
                weights = [weights]
            self.set_weights(weights)

    def build(self, input_shape=None):
        if self.built:
            return
        self.embeddings = self.add_weight(
            name="embeddings",
            shape=(self.input_dim, self.output_dim),
            initializer=self.embeddings_initializer,
            regularizer=self.embeddings_regularizer,
            constraint=self.embeddings_constraint,
        )
        self.built = True

    def call(self, inputs):
        if inputs.dtype not in ("int32", "int64"):
            inputs = ops.cast(inputs, "int32")
        out = ops.take(self.embeddings, inputs, axis=0)
        return ops.cast(out, self.compute_dtype)

    def compute_mask(self, inputs, mask=None):
        if not self.mask_zero:
            return None
        return ops.not_equal(inputs, 0)

    def compute_output_shape(self, input_shape):
        return (*input_shape, self.output_dim)

    def get_config(self):
        return {
            **super().get_config(),
            "input_dim": self.input_dim,
            "output_dim": self.output_dim,
            "embeddings_initializer": _serialize(initializers, self.embeddings_initializer),
            "embeddings_regularizer": _serialize(regularizers, self.embeddings_regularizer),
            "activity_regularizer": _serialize(regularizers, self.activity_regularizer),
            "embeddings_constraint": _serialize(constraints, self.embeddings_constraint),
            "mask_zero": self.mask_zero,
        }


# ------------------------------------------------------------------------------ Masking, Identity
class Masking(Layer):
    """Masks timesteps whose features all equal `mask_value`: they become zeros and the output
    mask (`(batch, steps)`) is False there, so downstream layers skip them.

    Args:
        mask_value: the padding value.

    Example:
        >>> x = np.array([[[1.0], [0.0]]], "float32")
        >>> keratron.layers.Masking()(x)._keras_mask.numpy()
        array([[ True, False]])
    """

    def __init__(self, mask_value=0.0, **kwargs):
        super().__init__(**kwargs)
        self.mask_value = mask_value
        self.supports_masking = True

    def compute_mask(self, inputs, mask=None):
        return ops.any(ops.not_equal(inputs, self.mask_value), axis=-1)

    def call(self, inputs):
        keep = ops.any(ops.not_equal(inputs, self.mask_value), axis=-1, keepdims=True)
        return ops.where(keep, inputs, 0.0)

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        return {**super().get_config(), "mask_value": self.mask_value}


class Identity(Layer):
    """Returns its input unchanged (masks pass through).

    Example:
        >>> keratron.layers.Identity()(np.ones((1, 2), "float32")).shape
        (1, 2)
    """

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.supports_masking = True

    def call(self, inputs):
        return inputs

    def compute_output_shape(self, input_shape):
        return input_shape
