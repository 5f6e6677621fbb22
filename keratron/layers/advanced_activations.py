"""Activation layers: ReLU, LeakyReLU, PReLU, ELU and Softmax (Keras 3 names, defaults and
configs; `LeakyReLU` also takes tf.keras's `alpha=`), and tf.keras's ThresholdedReLU."""

from __future__ import annotations

import warnings

import numpy as np

from keratron import ops
from keratron.autodiff.tensor import convert_to_tensor
from keratron.layers import activations, constraints, initializers, regularizers
from keratron.layers.layer import InputSpec, Layer
from keratron.layers.layer import who as _who

__all__ = ["ReLU", "LeakyReLU", "PReLU", "ELU", "Softmax", "ThresholdedReLU"]


def _check_non_negative(value, arg, who, allow_none=False):
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float, np.number)) or value < 0:
        raise ValueError(
            f"{who}: argument `{arg}` must be a non-negative number"
            f"{' or None' if allow_none else ''}. Received: {arg}={value!r}"
        )
    return value


class ReLU(Layer):
    """Rectified linear unit with optional cap, leak and threshold.

    `f(x) = max_value` for `x >= max_value`, `x` for `threshold <= x < max_value`, and
    `negative_slope * (x - threshold)` otherwise.

    Args:
        max_value: optional non-negative cap.
        negative_slope: non-negative slope below the threshold (default 0).
        threshold: non-negative threshold (default 0).

    Example:
        >>> keratron.layers.ReLU(max_value=1.0)(np.array([[-1.0, 0.5, 3.0]], "float32")).numpy()
        array([[0. , 0.5, 1. ]], dtype=float32)
    """

    def __init__(self, max_value=None, negative_slope=0.0, threshold=0.0, **kwargs):
        who = _who("ReLU", kwargs)
        _check_non_negative(max_value, "max_value", who, allow_none=True)
        _check_non_negative(negative_slope, "negative_slope", who)
        _check_non_negative(threshold, "threshold", who)
        super().__init__(**kwargs)
        self.max_value = max_value
        self.negative_slope = negative_slope
        self.threshold = threshold
        self.supports_masking = True

    def call(self, inputs):
        return activations.relu(
            inputs,
            negative_slope=self.negative_slope,
            max_value=self.max_value,
            threshold=self.threshold,
        )

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        return {
            **super().get_config(),
            "max_value": self.max_value,
            "negative_slope": self.negative_slope,
            "threshold": self.threshold,
        }


class ThresholdedReLU(Layer):
    """tf.keras's thresholded ReLU: `x` where `x > theta`, else 0.

    Args:
        theta: the non-negative threshold (default 1.0).

    Example:
        >>> keratron.layers.ThresholdedReLU(0.5)(np.array([[-1.0, 0.5, 3.0]], "float32")).numpy()
        array([[0., 0., 3.]], dtype=float32)
    """

    def __init__(self, theta=1.0, **kwargs):
        who = _who("ThresholdedReLU", kwargs)
        _check_non_negative(theta, "theta", who)
        super().__init__(**kwargs)
        self.theta = float(theta)
        self.supports_masking = True

    def call(self, inputs):
        return ops.where(ops.greater(inputs, self.theta), inputs, ops.zeros_like(inputs))

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        return {**super().get_config(), "theta": self.theta}


class LeakyReLU(Layer):
    """Leaky ReLU: `x` for `x >= 0`, `negative_slope * x` otherwise.

    Args:
        negative_slope: non-negative slope for negative inputs (Keras 3 default 0.3).
        alpha: tf.keras's name for `negative_slope`; accepted with a DeprecationWarning.

    Example:
        >>> keratron.layers.LeakyReLU(0.1)(np.array([[-1.0, 2.0]], "float32")).numpy()
        array([[-0.1,  2. ]], dtype=float32)
    """

    def __init__(self, negative_slope=0.3, **kwargs):
        if "alpha" in kwargs:
            negative_slope = kwargs.pop("alpha")
            warnings.warn(
                "LeakyReLU: argument `alpha` is deprecated; use `negative_slope` instead.",
                DeprecationWarning,
                stacklevel=2,
            )
        _check_non_negative(negative_slope, "negative_slope", _who("LeakyReLU", kwargs))
        super().__init__(**kwargs)
        self.negative_slope = negative_slope
        self.supports_masking = True

    def call(self, inputs):
        return activations.leaky_relu(inputs, negative_slope=self.negative_slope)

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        return {**super().get_config(), "negative_slope": self.negative_slope}


class PReLU(Layer):
    """Parametric ReLU: `x` for `x >= 0`, `alpha * x` otherwise, with a learned `alpha`.

    Args:
        alpha_initializer: initializer for `alpha` (default "Zeros").
        alpha_regularizer, alpha_constraint: optional.
        shared_axes: axes (1-based, excluding batch) along which `alpha` is shared, e.g.
            `[1, 2]` for one alpha per channel of `(batch, h, w, c)` images.

    Example:
        >>> layer = keratron.layers.PReLU(shared_axes=[1, 2])
        >>> layer(np.ones((2, 4, 4, 3), "float32")).shape
        (2, 4, 4, 3)
    """

    def __init__(
        self,
        alpha_initializer="Zeros",
        alpha_regularizer=None,
        alpha_constraint=None,
        shared_axes=None,
        **kwargs,
    ):
        who = _who("PReLU", kwargs)
        if shared_axes is not None:
            shared_axes = (
                list(shared_axes) if isinstance(shared_axes, (list, tuple)) else [shared_axes]
            )
            if not all(
                isinstance(a, int) and not isinstance(a, bool) and a >= 1 for a in shared_axes
            ):
                raise ValueError(
                    f"{who}: argument `shared_axes` must hold axis indices >= 1 (the batch "
                    f"axis cannot be shared). Received: shared_axes={shared_axes}"
                )
        super().__init__(**kwargs)
        self.supports_masking = True
        self.alpha_initializer = initializers.get(alpha_initializer)
        self.alpha_regularizer = regularizers.get(alpha_regularizer)
        self.alpha_constraint = constraints.get(alpha_constraint)
        self.shared_axes = shared_axes

    def build(self, input_shape):
        param_shape = list(input_shape[1:])
        for a in self.shared_axes or []:
            if a > len(param_shape):
                raise ValueError(
                    f"Layer '{self.name}' (PReLU): shared axis {a} is out of range for inputs "
                    f"of shape {tuple(input_shape)}."
                )
            param_shape[a - 1] = 1
        if any(d is None for d in param_shape):
            raise ValueError(
                f"Layer '{self.name}' (PReLU): unknown input dimensions must be listed in "
                f"`shared_axes`. Received: input_shape={tuple(input_shape)}"
            )
        self.alpha = self.add_weight(
            name="alpha",
            shape=param_shape,
            initializer=self.alpha_initializer,
            regularizer=self.alpha_regularizer,
            constraint=self.alpha_constraint,
        )
        axes = {}
        if self.shared_axes:
            axes = {
                i: input_shape[i] for i in range(1, len(input_shape)) if i not in self.shared_axes
            }
        self.input_spec = InputSpec(ndim=len(input_shape), axes=axes)
        self.built = True

    def call(self, inputs):
        pos = ops.relu(inputs)
        neg = ops.multiply(ops.negative(self.alpha), ops.relu(ops.negative(inputs)))
        return ops.add(pos, neg)

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        def ser(module, obj):
            return None if obj is None else module.serialize(obj)

        return {
            **super().get_config(),
            "alpha_initializer": ser(initializers, self.alpha_initializer),
            "alpha_regularizer": ser(regularizers, self.alpha_regularizer),
            "alpha_constraint": ser(constraints, self.alpha_constraint),
            "shared_axes": self.shared_axes,
        }


class ELU(Layer):
    """Exponential linear unit: `x` for `x > 0`, `alpha * (exp(x) - 1)` otherwise.

    Args:
        alpha: scale of the negative part (default 1.0).

    Example:
        >>> keratron.layers.ELU()(np.array([[0.0, 1.0]], "float32")).numpy()
        array([[0., 1.]], dtype=float32)
    """

    def __init__(self, alpha=1.0, **kwargs):
        super().__init__(**kwargs)
        self.alpha = alpha
        self.supports_masking = True

    def call(self, inputs):
        return activations.elu(inputs, alpha=self.alpha)

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        # Keras 3 leaves `alpha` out of the config (so a reloaded ELU forgets it); tf.keras
        # wrote it, and so do we.
        return {**super().get_config(), "alpha": self.alpha}


def _large_negative(dtype):
    # Stays finite in float16 (max ~6.5e4), so masked logits never become inf - inf = nan.
    return -3e4 if dtype == "float16" else -1e9


class Softmax(Layer):
    """Softmax over `axis` (an int or a tuple of axes); masked positions get probability 0.

    Args:
        axis: the normalization axis or axes (default -1).

    Call args:
        inputs: the logits.
        mask: optional boolean mask that broadcasts to `inputs` (True keeps a position).

    Example:
        >>> x = np.array([[1.0, 1.0, 5.0]], "float32")
        >>> keratron.layers.Softmax()(x, mask=np.array([[True, True, False]])).numpy()
        array([[0.5, 0.5, 0. ]], dtype=float32)
    """

    def __init__(self, axis=-1, **kwargs):
        super().__init__(**kwargs)
        self.axis = tuple(axis) if isinstance(axis, list) else axis
        self.supports_masking = True

    def call(self, inputs, mask=None):
        if mask is not None:
            mask = convert_to_tensor(mask, device=inputs.device)
            if mask.ndim > inputs.ndim or any(
                m not in (1, i) for m, i in zip(mask.shape[::-1], inputs.shape[::-1])
            ):
                raise ValueError(
                    f"Layer '{self.name}' (Softmax): the mask must broadcast to the inputs. "
                    f"Received: inputs.shape={tuple(inputs.shape)}, mask.shape={tuple(mask.shape)}"
                )
            if mask.dtype != "bool":
                mask = ops.greater(mask, 0.5)
            inputs = ops.where(mask, inputs, _large_negative(inputs.dtype))
        if isinstance(self.axis, tuple) and len(self.axis) > 1:
            outputs = ops.exp(
                ops.subtract(inputs, ops.logsumexp(inputs, axis=self.axis, keepdims=True))
            )
        else:
            axis = self.axis[0] if isinstance(self.axis, tuple) else self.axis
            outputs = activations.softmax(inputs, axis=axis)
        if mask is not None:
            outputs = ops.where(mask, outputs, 0.0)
        return outputs

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        return {**super().get_config(), "axis": self.axis}
