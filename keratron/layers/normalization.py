"""Normalization layers (Keras's `layers/normalization`): BatchNormalization,
LayerNormalization and GroupNormalization.

Names, arguments, defaults (epsilon 1e-3, momentum 0.99), weight names and creation order
(gamma, beta, moving_mean, moving_variance) and `get_config` keys follow Keras 3, so Keras
scripts and `.h5` weight files work unchanged. Half-precision inputs are normalized in
float32 and cast back, as Keras does.
"""

from __future__ import annotations

import math

import numpy as np

from keratron import config, ops
from keratron.layers import constraints, initializers, regularizers
from keratron.layers.layer import InputSpec, Layer
from keratron.layers.layer import who as _who
from keratron.ops.batchnorm import fused_batch_normalization

__all__ = ["BatchNormalization", "LayerNormalization", "GroupNormalization"]


# ------------------------------------------------------------------------------------ helpers
def _serialize(module, obj):
    return None if obj is None else module.serialize(obj)


def _is_int(value) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def _nonnegative_float(value, arg: str, who: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.number)) or value < 0:
        raise ValueError(
            f"{who}: argument `{arg}` must be a non-negative number. Received: {arg}={value!r}"
        )
    return float(value)


def _canonical(layer, axis: int, ndim: int) -> int:
    if not -ndim <= axis < ndim:
        raise ValueError(
            f"Layer '{layer.name}' ({type(layer).__name__}): argument `axis` is out of bounds "
            f"for inputs of rank {ndim}. Received: axis={layer.axis}"
        )
    return axis % ndim


def _compute_float(x):
    """Half-precision inputs are normalized in float32 (overflow-prone otherwise)."""
    if x.dtype in ("float16", "bfloat16") or "float" not in x.dtype:
        return ops.cast(x, "float32")
    return x


def _weight_kwargs(layer) -> dict:
    return {
        "beta_initializer": _serialize(initializers, layer.beta_initializer),
        "gamma_initializer": _serialize(initializers, layer.gamma_initializer),
        "beta_regularizer": _serialize(regularizers, layer.beta_regularizer),
        "gamma_regularizer": _serialize(regularizers, layer.gamma_regularizer),
        "beta_constraint": _serialize(constraints, layer.beta_constraint),
        "gamma_constraint": _serialize(constraints, layer.gamma_constraint),
    }


def _set_gamma_beta_args(layer, b_init, g_init, b_reg, g_reg, b_con, g_con):
    layer.beta_initializer = initializers.get(b_init)
    layer.gamma_initializer = initializers.get(g_init)
    layer.beta_regularizer = regularizers.get(b_reg)
    layer.gamma_regularizer = regularizers.get(g_reg)
    layer.beta_constraint = constraints.get(b_con)
    layer.gamma_constraint = constraints.get(g_con)


def _add_gamma_beta(layer, shape, want_gamma: bool, want_beta: bool):
    gamma = beta = None
    if want_gamma:
        gamma = layer.add_weight(
            name="gamma",
            shape=shape,
            initializer=layer.gamma_initializer,
            regularizer=layer.gamma_regularizer,
            constraint=layer.gamma_constraint,
            autocast=False,
        )
    if want_beta:
        beta = layer.add_weight(
            name="beta",
            shape=shape,
            initializer=layer.beta_initializer,
            regularizer=layer.beta_regularizer,
            constraint=layer.beta_constraint,
            autocast=False,
        )
    return gamma, beta


# --------------------------------------------------------------------------- BatchNormalization
class BatchNormalization(Layer):
    """Normalizes each feature over the batch: `(x - mean) / sqrt(var + epsilon) * gamma + beta`.

    In training (`training=True`, and the layer trainable) the statistics are the batch's,
    and the moving statistics are updated as `moving = moving * momentum + batch * (1 -
    momentum)`; in inference the moving statistics are used and nothing changes.

    Args:
        axis: int, the feature axis (a one-element list, as tf.keras configs store it, is
            accepted too).
        momentum: momentum of the moving averages.
        epsilon: small float added to the variance.
        center: whether to add the learned offset `beta`.
        scale: whether to multiply by the learned `gamma`.
        beta_initializer, gamma_initializer: initializers of beta and gamma.
        moving_mean_initializer, moving_variance_initializer: initializers of the moving
            statistics.
        beta_regularizer, gamma_regularizer: optional regularizers.
        beta_constraint, gamma_constraint: optional constraints.
        renorm: batch renormalization (Ioffe, 2017): training outputs are corrected towards
            the moving statistics by factors `r` and `d`, clipped by `renorm_clipping`.
        renorm_clipping: dict with optional keys "rmax", "rmin", "dmax".
        renorm_momentum: momentum of the moving averages that `r` and `d` are computed from.
        synchronized: compute the batch statistics across all replicas. With one process it
            is the same as False; a distribution strategy supplies the cross-replica
            reduction by overriding `_cross_replica_moments`.

    Example:
        >>> bn = keratron.layers.BatchNormalization()
        >>> y = bn(np.random.rand(8, 3).astype("float32"), training=True)
        >>> [w.name for w in bn.weights]
        ['gamma', 'beta', 'moving_mean', 'moving_variance']
    """

    def __init__(
        self,
        axis=-1,
        momentum=0.99,
        epsilon=1e-3,
        center=True,
        scale=True,
        beta_initializer="zeros",
        gamma_initializer="ones",
        moving_mean_initializer="zeros",
        moving_variance_initializer="ones",
        beta_regularizer=None,
        gamma_regularizer=None,
        beta_constraint=None,
        gamma_constraint=None,
        renorm=False,
        renorm_clipping=None,
        renorm_momentum=0.99,
        synchronized=False,
        **kwargs,
    ):
        who = _who("BatchNormalization", kwargs)
        # tf.keras 2's kernel choice (fused or not): the same values either way.
        kwargs.pop("fused", None)
        if isinstance(axis, (list, tuple)) and len(axis) == 1:
            axis = axis[0]
        if not _is_int(axis):
            raise ValueError(f"{who}: argument `axis` must be an int. Received: axis={axis!r}")
        momentum = _nonnegative_float(momentum, "momentum", who)
        epsilon = _nonnegative_float(epsilon, "epsilon", who)
        renorm_momentum = _nonnegative_float(renorm_momentum, "renorm_momentum", who)
        if renorm:
            renorm_clipping = dict(renorm_clipping or {})
            unknown = set(renorm_clipping) - {"rmax", "rmin", "dmax"}
            if unknown:
                raise ValueError(
                    f"{who}: argument `renorm_clipping` accepts the keys 'rmax', 'rmin' and "
                    f"'dmax'. Received: renorm_clipping={renorm_clipping!r}"
                )
            rmax, rmin = renorm_clipping.get("rmax"), renorm_clipping.get("rmin")
            dmax = renorm_clipping.get("dmax")
            if rmax is not None and rmin is not None and rmax < rmin:
                raise ValueError(
                    f"{who}: in `renorm_clipping`, rmax must be >= rmin. Received: "
                    f"renorm_clipping={renorm_clipping!r}"
                )
            if dmax is not None and dmax < 0:
                raise ValueError(
                    f"{who}: in `renorm_clipping`, dmax must be >= 0. Received: "
                    f"renorm_clipping={renorm_clipping!r}"
                )
        super().__init__(**kwargs)
        self.axis = int(axis)
        self.momentum = momentum
        self.epsilon = epsilon
        self.center = bool(center)
        self.scale = bool(scale)
        _set_gamma_beta_args(
            self,
            beta_initializer,
            gamma_initializer,
            beta_regularizer,
            gamma_regularizer,
            beta_constraint,
            gamma_constraint,
        )
        self.moving_mean_initializer = initializers.get(moving_mean_initializer)
        self.moving_variance_initializer = initializers.get(moving_variance_initializer)
        self.renorm = bool(renorm)
        self.renorm_clipping = renorm_clipping
        self.renorm_momentum = renorm_momentum
        self.synchronized = bool(synchronized)
        self.supports_masking = True
        self.gamma = self.beta = self.moving_mean = self.moving_variance = None
        self._reduction_axes = None

    def build(self, input_shape):
        input_shape = tuple(input_shape)
        axis = _canonical(self, self.axis, len(input_shape))
        dim = input_shape[axis]
        if dim is None:
            raise ValueError(
                f"Layer '{self.name}' (BatchNormalization) needs a known size on axis "
                f"{self.axis}. Received: input_shape={input_shape}"
            )
        shape = (dim,)
        self.gamma, self.beta = _add_gamma_beta(self, shape, self.scale, self.center)
        self.moving_mean = self.add_weight(
            name="moving_mean",
            shape=shape,
            initializer=self.moving_mean_initializer,
            trainable=False,
            autocast=False,
        )
        self.moving_variance = self.add_weight(
            name="moving_variance",
            shape=shape,
            initializer=self.moving_variance_initializer,
            trainable=False,
            autocast=False,
        )
        if self.renorm:
            # Renorm tracks standard deviations; they start at sqrt(initial variance).
            def stddev_init(shape, dtype=None):
                return ops.sqrt(self.moving_variance_initializer(shape, dtype=dtype))

            self.moving_stddev = self.add_weight(
                name="moving_stddev",
                shape=shape,
                initializer=stddev_init,
                trainable=False,
                autocast=False,
            )
            self.renorm_mean = self.add_weight(
                name="renorm_mean",
                shape=shape,
                initializer=self.moving_mean_initializer,
                trainable=False,
                autocast=False,
            )
            self.renorm_stddev = self.add_weight(
                name="renorm_stddev",
                shape=shape,
                initializer=stddev_init,
                trainable=False,
                autocast=False,
            )
        self.input_spec = InputSpec(ndim=len(input_shape), axes={self.axis: dim})
        self._reduction_axes = tuple(i for i in range(len(input_shape)) if i != axis)
        self.built = True

    def call(self, inputs, training=None, mask=None):
        if mask is not None and mask.ndim != inputs.ndim - 1:
            raise ValueError(
                f"Layer '{self.name}' (BatchNormalization): the mask must have one dimension "
                f"less than the inputs. Received: mask.shape={mask.shape}, "
                f"inputs.shape={inputs.shape}"
            )
        if inputs.dtype == "bfloat16" and not (training and self.trainable):
            return self._bfloat16_inference(inputs)
        x = _compute_float(inputs)
        gamma = None if self.gamma is None else ops.cast(self.gamma, x.dtype)
        beta = None if self.beta is None else ops.cast(self.beta, x.dtype)
        if training and self.trainable and self._fused(x, mask):
            # One primitive each way (`ops.batchnorm`): the same values, fewer passes. A
            # half-precision input goes in as it is: the kernels normalize it in float32.
            half = inputs.dtype in ("float16", "bfloat16")
            y, mean, variance = fused_batch_normalization(
                inputs if half else x,
                self.axis,
                scale=gamma,
                offset=beta,
                epsilon=self.epsilon,
                statistics_dtype="float32" if half else None,
            )
            self._update_moving(self.moving_mean, mean, self.momentum)
            self._update_moving(self.moving_variance, variance, self.momentum)
            return ops.cast(y, self.compute_dtype)
        if training and self.trainable:
            mean, variance = self._moments(x, mask)
            if self.renorm:
                gamma, beta = self._renorm_transform(mean, variance, gamma, beta)
            else:
                self._update_moving(self.moving_mean, mean, self.momentum)
                self._update_moving(self.moving_variance, variance, self.momentum)
        else:
            mean = ops.cast(self.moving_mean, x.dtype)
            variance = ops.cast(self.moving_variance, x.dtype)
        y = ops.batch_normalization(
            x, mean, variance, axis=self.axis, offset=beta, scale=gamma, epsilon=self.epsilon
        )
        return ops.cast(y, self.compute_dtype)

    def _bfloat16_inference(self, inputs):
        """Inference on bfloat16 inputs: `inputs * a + b` in bfloat16, with the per-channel a
        and b computed in float32 from the weights (as `ops.batch_normalization` computes
        them) and rounded once. In a compiled function that follows a convolution, the
        compiler then folds it into the convolution's kernel and bias, as it does in float32
        (through float32 copies of the activations it could not). The values are Keras's
        (which normalizes in float32 and rounds y) to about one bfloat16 rounding of a and b;
        bfloat16 has float32's exponent range, so nothing overflows that would not."""
        shape = [1] * inputs.ndim
        shape[self.axis] = inputs.shape[self.axis]
        mean = ops.cast(self.moving_mean, "float32")
        a = ops.rsqrt(ops.add(ops.cast(self.moving_variance, "float32"), self.epsilon))
        if self.gamma is not None:
            a = ops.multiply(a, ops.cast(self.gamma, "float32"))
        b = ops.negative(ops.multiply(mean, a))
        if self.beta is not None:
            b = ops.add(b, ops.cast(self.beta, "float32"))
        a = ops.reshape(ops.cast(a, "bfloat16"), shape)
        b = ops.reshape(ops.cast(b, "bfloat16"), shape)
        return ops.cast(ops.add(ops.multiply(inputs, a), b), self.compute_dtype)

    def _fused(self, x, mask) -> bool:
        """Whether training statistics come from the fused primitive: plain batch statistics
        (no mask, renormalization or cross-replica moments). `x` is float32 or float64 here
        (`_compute_float`)."""
        plain = mask is None and not self.renorm and not self.synchronized
        return plain and x.ndim >= 2

    @staticmethod
    def _update_moving(variable, batch_value, momentum):
        # The update is state, not part of the differentiated computation.
        batch_value = ops.cast(ops.stop_gradient(batch_value), variable.dtype)
        variable.assign(
            ops.add(ops.multiply(variable, momentum), ops.multiply(batch_value, 1.0 - momentum))
        )

    def _moments(self, inputs, mask):
        """Batch mean and variance per feature, over every axis but `axis`.

        Masked positions (mask 0) do not count. With `synchronized=True` the per-replica
        moments go through `_cross_replica_moments`.
        """
        axes = self._reduction_axes
        if mask is None:
            mean, variance = ops.moments(inputs, axes=axes)
            count = math.prod(inputs.shape[a] for a in axes)
        else:
            keep = ops.broadcast_to(ops.expand_dims(ops.cast(mask, "bool"), -1), inputs.shape)
            count = ops.sum(ops.cast(keep, inputs.dtype), axis=axes, keepdims=True)
            denom = ops.add(count, config.epsilon())
            mean = ops.divide(ops.sum(ops.where(keep, inputs, 0), axis=axes, keepdims=True), denom)
            centered = ops.where(keep, ops.subtract(inputs, mean), 0)
            variance = ops.divide(ops.sum(ops.square(centered), axis=axes, keepdims=True), denom)
            dim = inputs.shape[self.axis]
            mean, variance = ops.reshape(mean, (dim,)), ops.reshape(variance, (dim,))
            count = ops.reshape(count, (dim,))
        if self.synchronized:
            mean, variance = self._cross_replica_moments(mean, variance, count)
        return mean, variance

    def _cross_replica_moments(self, mean, variance, count):
        """Combines per-replica batch moments into global ones (`synchronized=True`).

        This is the hook a multi-process distribution strategy overrides: with `N = sum(count)`
        over replicas, the global mean is `sum(count * mean) / N` and the global variance
        `sum(count * (variance + mean**2)) / N - mean**2`. In a single process the local batch
        is the whole batch, so the moments are returned unchanged.

        Args:
            mean, variance: this replica's moments, shape `(features,)`.
            count: the number of values behind each moment (an int, or a `(features,)`
                tensor when a mask is used).

        Returns:
            `(mean, variance)` over all replicas.
        """
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
            raise ValueError(
                f"Layer '{self.name}' (BatchNormalization): synchronized=True across "
                f"{dist.get_world_size()} processes needs a distribution strategy that "
                "overrides `_cross_replica_moments`; none is active."
            )
        return mean, variance

    def _renorm_transform(self, mean, variance, gamma, beta):
        """Batch renormalization: updates the moving statistics and returns the effective
        (gamma, beta) that apply the clipped corrections r and d."""
        dtype = mean.dtype
        stddev = ops.sqrt(ops.add(variance, self.epsilon))
        renorm_mean = ops.cast(self.renorm_mean, dtype)
        # The floor keeps r and d finite while renorm_stddev is still near zero.
        renorm_stddev = ops.maximum(ops.cast(self.renorm_stddev, dtype), math.sqrt(self.epsilon))
        r = ops.divide(stddev, renorm_stddev)
        d = ops.divide(ops.subtract(mean, renorm_mean), renorm_stddev)
        clip = self.renorm_clipping or {}
        if clip.get("rmin") is not None:
            r = ops.maximum(r, clip["rmin"])
        if clip.get("rmax") is not None:
            r = ops.minimum(r, clip["rmax"])
        if clip.get("dmax") is not None:
            d = ops.clip(d, -clip["dmax"], clip["dmax"])
        # r and d are treated as constants in the backward pass (as in the paper).
        r, d = ops.stop_gradient(r), ops.stop_gradient(d)
        if gamma is None:
            eff_gamma, eff_beta = r, d
        else:
            eff_gamma, eff_beta = ops.multiply(r, gamma), ops.multiply(d, gamma)
        if beta is not None:
            eff_beta = ops.add(eff_beta, beta)

        self._update_moving(self.renorm_mean, mean, self.renorm_momentum)
        self._update_moving(self.renorm_stddev, stddev, self.renorm_momentum)
        self._update_moving(self.moving_mean, mean, self.momentum)
        self._update_moving(self.moving_stddev, stddev, self.momentum)
        # The moving variance follows the moving stddev (relu guards against rounding below 0).
        ms = ops.cast(self.moving_stddev, dtype)
        self.moving_variance.assign(
            ops.cast(
                ops.relu(ops.subtract(ops.square(ms), self.epsilon)), self.moving_variance.dtype
            )
        )
        return eff_gamma, eff_beta

    def compute_output_shape(self, input_shape):
        _canonical(self, self.axis, len(input_shape))
        return tuple(input_shape)

    def get_config(self):
        return {
            **super().get_config(),
            "axis": self.axis,
            "momentum": self.momentum,
            "epsilon": self.epsilon,
            "center": self.center,
            "scale": self.scale,
            **_weight_kwargs(self),
            "moving_mean_initializer": _serialize(initializers, self.moving_mean_initializer),
            "moving_variance_initializer": _serialize(
                initializers, self.moving_variance_initializer
            ),
            "synchronized": self.synchronized,
            "renorm": self.renorm,
            "renorm_clipping": self.renorm_clipping,
            "renorm_momentum": self.renorm_momentum,
        }


# --------------------------------------------------------------------------- LayerNormalization
class LayerNormalization(Layer):
    """Normalizes each sample over `axis`: `(x - mean) / sqrt(var + epsilon) * gamma + beta`.

    Args:
        axis: int or list of ints, the axes to normalize over (gamma and beta span them).
        epsilon: small float added to the variance.
        center: whether to add the learned offset `beta`.
        scale: whether to multiply by the learned `gamma`.
        beta_initializer, gamma_initializer: initializers of beta and gamma.
        beta_regularizer, gamma_regularizer: optional regularizers.
        beta_constraint, gamma_constraint: optional constraints.
        rms_scaling: Keras's (deprecated) variant: `x / sqrt(var + epsilon) * gamma`, with
            no centering and no beta. As in Keras it divides by the variance, not the mean
            square.

    Example:
        >>> ln = keratron.layers.LayerNormalization()
        >>> ln(np.random.rand(2, 5).astype("float32")).shape
        (2, 5)
    """

    def __init__(
        self,
        axis=-1,
        epsilon=1e-3,
        center=True,
        scale=True,
        beta_initializer="zeros",
        gamma_initializer="ones",
        beta_regularizer=None,
        gamma_regularizer=None,
        beta_constraint=None,
        gamma_constraint=None,
        rms_scaling=False,
        **kwargs,
    ):
        who = _who("LayerNormalization", kwargs)
        if isinstance(axis, (list, tuple)):
            if not axis or not all(_is_int(a) for a in axis):
                raise TypeError(
                    f"{who}: argument `axis` must be an int or a non-empty list of ints. "
                    f"Received: axis={axis!r}"
                )
            axis = [int(a) for a in axis]
        elif _is_int(axis):
            axis = int(axis)
        else:
            raise TypeError(
                f"{who}: argument `axis` must be an int or a list of ints. Received: axis={axis!r}"
            )
        epsilon = _nonnegative_float(epsilon, "epsilon", who)
        super().__init__(**kwargs)
        self.axis = axis
        self.epsilon = epsilon
        self.center = bool(center)
        self.scale = bool(scale)
        self.rms_scaling = bool(rms_scaling)
        _set_gamma_beta_args(
            self,
            beta_initializer,
            gamma_initializer,
            beta_regularizer,
            gamma_regularizer,
            beta_constraint,
            gamma_constraint,
        )
        self.supports_masking = True
        # Inputs keep their dtype (float16 is normalized in float32 inside call).
        self.autocast = False

    def _axes(self, ndim):
        axes = self.axis if isinstance(self.axis, list) else [self.axis]
        return tuple(sorted({_canonical(self, a, ndim) for a in axes}))

    def build(self, input_shape):
        input_shape = tuple(input_shape)
        axes = self._axes(len(input_shape))
        shape = tuple(input_shape[a] for a in axes)
        if None in shape:
            raise ValueError(
                f"Layer '{self.name}' (LayerNormalization) needs known sizes on axis "
                f"{self.axis}. Received: input_shape={input_shape}"
            )
        # Keras stores the axes as a sorted list once built (and writes that in its config).
        self.axis = sorted(self.axis) if isinstance(self.axis, list) else [self.axis]
        self.gamma, self.beta = _add_gamma_beta(
            self, shape, self.scale or self.rms_scaling, self.center and not self.rms_scaling
        )
        self.built = True

    def call(self, inputs):
        x = _compute_float(inputs)
        axes = self._axes(x.ndim)
        bshape = tuple(x.shape[i] if i in axes else 1 for i in range(x.ndim))
        mean, variance = ops.moments(x, axes=axes, keepdims=True)
        inv = ops.rsqrt(ops.add(variance, self.epsilon))
        if self.gamma is not None:
            inv = ops.multiply(inv, ops.reshape(ops.cast(self.gamma, x.dtype), bshape))
        if self.rms_scaling:
            y = ops.multiply(x, inv)
        else:
            # x * inv + (beta - mean * inv): one fused multiply-add over the big tensor.
            shift = ops.negative(ops.multiply(mean, inv))
            if self.beta is not None:
                shift = ops.add(shift, ops.reshape(ops.cast(self.beta, x.dtype), bshape))
            y = ops.add(ops.multiply(x, inv), shift)
        return ops.cast(y, self.compute_dtype)

    def compute_output_shape(self, input_shape):
        self._axes(len(input_shape))
        return tuple(input_shape)

    def get_config(self):
        return {
            **super().get_config(),
            "axis": self.axis,
            "epsilon": self.epsilon,
            "center": self.center,
            "scale": self.scale,
            "rms_scaling": self.rms_scaling,
            **_weight_kwargs(self),
        }


# --------------------------------------------------------------------------- GroupNormalization
class GroupNormalization(Layer):
    """Splits the channels into `groups` and normalizes each group of each sample
    (Wu & He, 2018); gamma and beta are per channel.

    `groups=-1` gives instance normalization (one channel per group); `groups=1` normalizes
    all channels together.

    Args:
        groups: positive int dividing the channel count, or -1.
        axis: int, the channel axis.
        epsilon: small float added to the variance.
        center: whether to add the learned offset `beta`.
        scale: whether to multiply by the learned `gamma`.
        beta_initializer, gamma_initializer: initializers of beta and gamma.
        beta_regularizer, gamma_regularizer: optional regularizers.
        beta_constraint, gamma_constraint: optional constraints.

    Example:
        >>> gn = keratron.layers.GroupNormalization(groups=2)
        >>> gn(np.random.rand(2, 4, 4, 6).astype("float32")).shape
        (2, 4, 4, 6)
    """

    def __init__(
        self,
        groups=32,
        axis=-1,
        epsilon=1e-3,
        center=True,
        scale=True,
        beta_initializer="zeros",
        gamma_initializer="ones",
        beta_regularizer=None,
        gamma_regularizer=None,
        beta_constraint=None,
        gamma_constraint=None,
        **kwargs,
    ):
        who = _who("GroupNormalization", kwargs)
        if not _is_int(groups) or (groups <= 0 and groups != -1):
            raise ValueError(
                f"{who}: argument `groups` must be a positive integer, or -1 for instance "
                f"normalization. Received: groups={groups!r}"
            )
        if not _is_int(axis):
            raise ValueError(f"{who}: argument `axis` must be an int. Received: axis={axis!r}")
        epsilon = _nonnegative_float(epsilon, "epsilon", who)
        super().__init__(**kwargs)
        self.groups = int(groups)
        self.axis = int(axis)
        self.epsilon = epsilon
        self.center = bool(center)
        self.scale = bool(scale)
        _set_gamma_beta_args(
            self,
            beta_initializer,
            gamma_initializer,
            beta_regularizer,
            gamma_regularizer,
            beta_constraint,
            gamma_constraint,
        )
        self.supports_masking = True
        self.autocast = False

    def build(self, input_shape):
        input_shape = tuple(input_shape)
        axis = _canonical(self, self.axis, len(input_shape))
        dim = input_shape[axis]
        if dim is None:
            raise ValueError(
                f"Layer '{self.name}' (GroupNormalization) needs a known size on axis "
                f"{self.axis}. Received: input_shape={input_shape}"
            )
        if self.groups == -1:
            self.groups = dim
        if dim < self.groups or dim % self.groups:
            raise ValueError(
                f"Layer '{self.name}' (GroupNormalization): argument `groups` must divide the "
                f"{dim} channels on axis {self.axis}. Received: groups={self.groups}"
            )
        self.input_spec = InputSpec(ndim=len(input_shape), axes={self.axis: dim})
        self.gamma, self.beta = _add_gamma_beta(self, (dim,), self.scale, self.center)
        self.built = True

    def call(self, inputs):
        x = _compute_float(inputs)
        axis = _canonical(self, self.axis, x.ndim)
        dim = x.shape[axis]
        # (..., C, ...) -> (..., groups, C // groups, ...); statistics per (sample, group).
        gshape = x.shape[:axis] + (self.groups, dim // self.groups) + x.shape[axis + 1 :]
        xg = ops.reshape(x, gshape)
        axes = tuple(i for i in range(1, xg.ndim) if i != axis)
        mean, variance = ops.moments(xg, axes=axes, keepdims=True)
        bshape = [1] * xg.ndim
        bshape[axis], bshape[axis + 1] = self.groups, dim // self.groups
        inv = ops.rsqrt(ops.add(variance, self.epsilon))
        if self.gamma is not None:
            inv = ops.multiply(inv, ops.reshape(ops.cast(self.gamma, x.dtype), tuple(bshape)))
        shift = ops.negative(ops.multiply(mean, inv))
        if self.beta is not None:
            shift = ops.add(shift, ops.reshape(ops.cast(self.beta, x.dtype), tuple(bshape)))
        y = ops.reshape(ops.add(ops.multiply(xg, inv), shift), x.shape)
        return ops.cast(y, self.compute_dtype)

    def compute_output_shape(self, input_shape):
        _canonical(self, self.axis, len(input_shape))
        return tuple(input_shape)

    def get_config(self):
        return {
            **super().get_config(),
            "groups": self.groups,
            "axis": self.axis,
            "epsilon": self.epsilon,
            "center": self.center,
            "scale": self.scale,
            **_weight_kwargs(self),
        }
