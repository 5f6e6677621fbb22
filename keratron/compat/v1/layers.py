"""`tf.layers` (TF1): `dense`, `conv2d`, pooling, `dropout`, `flatten`, `batch_normalization`,
and their classes, with TF1's variable names and reuse rules.

A layer opens `variable_scope(name, default_name=<snake_case class name>)` on its first call, so
its variables are `dense/kernel:0`, `dense_1/kernel:0`, `<outer scope>/conv2d/bias:0`; with
`reuse=True` (or an enclosing reusing scope) the scope's existing variables are taken. Each
layer's computation is one graph op whose lowering is the keratron op the Keras layer uses
(`ops.fused_matmul`, `ops.fused_conv`, `ops.max_pool`, `ops.batch_normalization`), so
gradients and kernels are keratron's.

Example:
    >>> import keratron.compat.v1 as tf
    >>> with tf.Graph().as_default():
    ...     x = tf.placeholder(tf.float32, [None, 4])
    ...     y = tf.layers.dense(x, 3, activation=tf.nn.relu)
    ...     print([v.name for v in tf.trainable_variables()])
    ['dense/kernel:0', 'dense/bias:0']
"""

from __future__ import annotations

from keratron import ops as kops
from keratron import random as krandom
from keratron.compat.v1 import array_ops, nn
from keratron.compat.v1 import variables as variables_lib
from keratron.compat.v1.framework import (
    GraphKeys,
    Tensor,
    TensorShape,
    add_to_collection,
    convert_to_tensor,
    get_default_graph,
    make_op,
    op_scope,
)
from keratron.ops.batchnorm import fused_batch_normalization

__all__ = [
    "Layer",
    "Dense",
    "Conv1D",
    "Conv2D",
    "Conv2DTranspose",
    "MaxPooling1D",
    "AveragePooling1D",
    "MaxPooling2D",
    "AveragePooling2D",
    "Dropout",
    "Flatten",
    "BatchNormalization",
    "dense",
    "conv1d",
    "conv2d",
    "conv2d_transpose",
    "max_pooling1d",
    "average_pooling1d",
    "max_pooling2d",
    "average_pooling2d",
    "dropout",
    "flatten",
    "batch_normalization",
]

# Activations given as the compat functions run fused in the op's epilogue.
_FUSABLE = {nn.relu: "relu", nn.relu6: "relu6", nn.sigmoid: "sigmoid", nn.tanh: "tanh"}


def _tuple(value, n, what, layer):
    if isinstance(value, int):
        return (value,) * n
    value = tuple(value)
    if len(value) != n or not all(isinstance(v, int) for v in value):
        raise ValueError(
            f"Layer '{layer}': `{what}` must be an int or a tuple of {n} ints. Received: {value}"
        )
    return value


def _padding(value, layer):
    p = str(value).lower()
    if p not in ("valid", "same"):
        raise ValueError(
            f"Layer '{layer}': `padding` must be 'valid' or 'same'. Received: padding={value!r}"
        )
    return p


def _data_format(value, layer):
    if value not in ("channels_last", "channels_first"):
        raise ValueError(
            f"Layer '{layer}': `data_format` must be 'channels_last' or 'channels_first'. "
            f"Received: data_format={value!r}"
        )
    return value


class Layer:
    """The TF1 layer base: a variable scope captured on the first call, variables made with
    `get_variable` in `build`, reuse on later calls.

    Args:
        trainable: whether the layer's variables go to TRAINABLE_VARIABLES.
        name: the scope name (uniquified as TF1 does: `name`, `name_1`, ...); the snake-case
            class name when None.
        reuse: reuse the variables of the scope `name` (True or `tf.AUTO_REUSE`).
    """

    _base_name = "layer"

    def __init__(self, trainable=True, name=None, reuse=None, dtype=None):
        self.trainable = bool(trainable)
        self._given_name = name
        self._reuse = reuse
        self._scope = None
        self.built = False
        self._variables: list = []
        self._updates: list = []
        self._losses: list = []

    # ---- TF's attributes
    @property
    def name(self) -> str:
        if self._scope is not None:
            return self._scope.name.split("/")[-1]
        return self._given_name or self._base_name

    @property
    def scope_name(self) -> str:
        return self._scope.name

    @property
    def variables(self) -> list:
        return list(self._variables)

    weights = variables

    @property
    def trainable_variables(self) -> list:
        return [v for v in self._variables if v.trainable]

    trainable_weights = trainable_variables

    @property
    def non_trainable_variables(self) -> list:
        return [v for v in self._variables if not v.trainable]

    non_trainable_weights = non_trainable_variables

    @property
    def updates(self) -> list:
        return list(self._updates)

    @property
    def losses(self) -> list:
        return list(self._losses)

    # ---- building and calling
    def add_weight(self, name, shape, dtype=None, initializer=None, regularizer=None,
                   trainable=True, constraint=None):  # fmt: skip
        """A `get_variable` in the layer's scope (its regularization loss is collected)."""
        trainable = trainable and self.trainable
        g = get_default_graph()
        before = len(g.get_collection(GraphKeys.REGULARIZATION_LOSSES))
        v = variables_lib.get_variable(
            name,
            shape=shape,
            dtype=dtype,
            initializer=initializer,
            regularizer=regularizer,
            trainable=trainable,
            constraint=constraint,
        )
        if v not in self._variables:
            self._variables.append(v)
            self._losses.extend(g.get_collection(GraphKeys.REGULARIZATION_LOSSES)[before:])
        return v

    def build(self, input_shape: TensorShape) -> None:
        self.built = True

    def call(self, inputs, **kwargs):
        raise NotImplementedError(f"{type(self).__name__} must define `call`.")

    def _open_scope(self):
        if self._scope is not None:
            return variables_lib.variable_scope(self._scope, reuse=True if self.built else None)
        if self._given_name is not None or self._reuse:
            # A given name is the scope itself (TF1 does not uniquify it).
            name = self._given_name or self._base_name
            return variables_lib.variable_scope(name, reuse=self._reuse or None)
        return variables_lib.variable_scope(None, default_name=self._base_name)

    def __call__(self, inputs, *args, **kwargs):
        inputs = convert_to_tensor(inputs)
        with self._open_scope() as scope:
            if self._scope is None:
                self._scope = scope
            if not self.built:
                self.build(inputs.shape)
                self.built = True
            return self.call(inputs, *args, **kwargs)

    apply = __call__


def _activation(out, activation, fused):
    if activation is None or fused is not None:
        return out
    return activation(out)


def _fusable(activation):
    return _FUSABLE.get(activation) if activation is not None else None


# ---------------------------------------------------------------------------- Dense
class Dense(Layer):
    """`tf.layers.Dense`: `activation(inputs @ kernel + bias)` on the last axis."""

    _base_name = "dense"

    def __init__(self, units, activation=None, use_bias=True, kernel_initializer=None,
                 bias_initializer=None, kernel_regularizer=None, bias_regularizer=None,
                 activity_regularizer=None, kernel_constraint=None, bias_constraint=None,
                 trainable=True, name=None, **kwargs):  # fmt: skip
        super().__init__(trainable=trainable, name=name, reuse=kwargs.pop("_reuse", None))
        if not isinstance(units, int) or units <= 0:
            raise ValueError(
                f"Layer 'dense': `units` must be a positive integer. Received: units={units!r}"
            )
        self.units = units
        self.activation = activation
        self.use_bias = use_bias
        self.kernel_initializer = kernel_initializer
        self.bias_initializer = bias_initializer or variables_lib.zeros_initializer()
        self.kernel_regularizer = kernel_regularizer
        self.bias_regularizer = bias_regularizer
        self.kernel = self.bias = None

    def build(self, input_shape):
        dims = input_shape.dims
        if dims is None or dims[-1] is None:
            raise ValueError(
                "Layer 'dense': the last dimension of the inputs to `Dense` should be defined. "
                f"Found `None`. Received: input_shape={input_shape}"
            )
        self.kernel = self.add_weight(
            "kernel", [dims[-1], self.units], initializer=self.kernel_initializer,
            regularizer=self.kernel_regularizer,
        )  # fmt: skip
        if self.use_bias:
            self.bias = self.add_weight(
                "bias", [self.units], initializer=self.bias_initializer,
                regularizer=self.bias_regularizer,
            )  # fmt: skip

    def call(self, inputs):
        fused = _fusable(self.activation)

        def lower(ctx, x, w, *b):
            bias = b[0] if b else None
            if x.ndim == 2:
                return kops.fused_matmul(x, w, bias, activation=fused)
            flat = kops.reshape(x, (-1, x.shape[-1]))
            out = kops.fused_matmul(flat, w, bias, activation=fused)
            return kops.reshape(out, tuple(x.shape[:-1]) + (self.units,))

        ins = [inputs, self.kernel.value()] + ([self.bias.value()] if self.use_bias else [])
        with op_scope(None, "Tensordot" if inputs.shape.ndims != 2 else "BiasAdd") as scope:
            out = make_op("Dense", scope, ins, lower).outputs[0]
        return _activation(out, self.activation, fused)


# ---------------------------------------------------------------------------- Conv2D
class _Conv(Layer):
    """A `rank`-D convolution with kernel `kernel_size + (in, filters)` (TF's layout)."""

    _rank = 2
    _op_type = "Conv2D"

    def __init__(self, filters, kernel_size, strides=1, padding="valid",
                 data_format="channels_last", dilation_rate=1, activation=None,
                 use_bias=True, kernel_initializer=None, bias_initializer=None,
                 kernel_regularizer=None, bias_regularizer=None, activity_regularizer=None,
                 kernel_constraint=None, bias_constraint=None, trainable=True, name=None,
                 **kwargs):  # fmt: skip
        super().__init__(trainable=trainable, name=name, reuse=kwargs.pop("_reuse", None))
        what, n = self._base_name, self._rank
        if not isinstance(filters, int) or filters <= 0:
            raise ValueError(
                f"Layer '{what}': `filters` must be a positive integer. "
                f"Received: filters={filters!r}"
            )
        self.filters = filters
        self.kernel_size = _tuple(kernel_size, n, "kernel_size", what)
        self.strides = _tuple(strides, n, "strides", what)
        self.dilation_rate = _tuple(dilation_rate, n, "dilation_rate", what)
        self.padding = _padding(padding, what)
        self.data_format = _data_format(data_format, what)
        self.activation = activation
        self.use_bias = use_bias
        self.kernel_initializer = kernel_initializer
        self.bias_initializer = bias_initializer or variables_lib.zeros_initializer()
        self.kernel_regularizer = kernel_regularizer
        self.bias_regularizer = bias_regularizer
        self.kernel = self.bias = None

    def _kernel_shape(self, channels) -> list:
        return list(self.kernel_size) + [channels, self.filters]

    def build(self, input_shape):
        dims = input_shape.dims
        axis = -1 if self.data_format == "channels_last" else 1
        if dims is None or len(dims) != self._rank + 2 or dims[axis] is None:
            raise ValueError(
                f"Layer '{self._base_name}': the inputs must be {self._rank + 2}-D with a known "
                f"channel dimension. Received: input_shape={input_shape}"
            )
        self.kernel = self.add_weight(
            "kernel", self._kernel_shape(dims[axis]), initializer=self.kernel_initializer,
            regularizer=self.kernel_regularizer,
        )  # fmt: skip
        if self.use_bias:
            self.bias = self.add_weight(
                "bias", [self.filters], initializer=self.bias_initializer,
                regularizer=self.bias_regularizer,
            )  # fmt: skip

    def _compute(self, x, k, bias, fused):
        return kops.fused_conv(
            x, k, bias, activation=fused, strides=self.strides, padding=self.padding,
            data_format=self.data_format, dilation_rate=self.dilation_rate,
        )  # fmt: skip

    def call(self, inputs):
        fused = _fusable(self.activation)

        def lower(ctx, x, k, *b):
            return self._compute(x, k, b[0] if b else None, fused)

        ins = [inputs, self.kernel.value()] + ([self.bias.value()] if self.use_bias else [])
        with op_scope(None, self._op_type) as scope:
            out = make_op(self._op_type, scope, ins, lower).outputs[0]
        return _activation(out, self.activation, fused)


class Conv1D(_Conv):
    """`tf.layers.Conv1D`: a 1-D convolution with kernel `(width, in, filters)`."""

    _base_name = "conv1d"
    _rank = 1
    _op_type = "conv1d"


class Conv2D(_Conv):
    """`tf.layers.Conv2D`: a 2-D convolution with an HWIO kernel `(kh, kw, in, filters)`."""

    _base_name = "conv2d"


class Conv2DTranspose(_Conv):
    """`tf.layers.Conv2DTranspose`: the gradient of a convolution, kernel
    `(kh, kw, filters, in)`; 'same' padding multiplies the size by the stride."""

    _base_name = "conv2d_transpose"
    _op_type = "conv2d_transpose"

    def _kernel_shape(self, channels) -> list:
        return list(self.kernel_size) + [self.filters, channels]

    def _compute(self, x, k, bias, fused):
        out = kops.conv_transpose(
            x, k, strides=self.strides, padding=self.padding, data_format=self.data_format,
            dilation_rate=self.dilation_rate,
        )  # fmt: skip
        if bias is not None:
            shape = (1, -1) + (1,) * self._rank if self.data_format == "channels_first" else (-1,)
            out = out + kops.reshape(bias, shape)
        return out if fused is None else getattr(kops, fused)(out)


# ---------------------------------------------------------------------------- pooling
class _Pooling(Layer):
    _fn = None
    _op_type = ""
    _rank = 2

    def __init__(self, pool_size, strides, padding="valid", data_format="channels_last",
                 name=None, **kwargs):  # fmt: skip
        super().__init__(name=name)
        what, n = self._base_name, self._rank
        self.pool_size = _tuple(pool_size, n, "pool_size", what)
        self.strides = _tuple(strides, n, "strides", what)
        self.padding = _padding(padding, what)
        self.data_format = _data_format(data_format, what)

    def call(self, inputs):
        if inputs.shape.ndims not in (None, self._rank + 2):
            raise ValueError(
                f"Layer '{self._base_name}': the inputs must be {self._rank + 2}-D. "
                f"Received: input_shape={inputs.shape}"
            )
        fn = type(self)._fn

        def lower(ctx, x):
            return fn(
                x, self.pool_size, strides=self.strides, padding=self.padding,
                data_format=self.data_format,
            )  # fmt: skip

        with op_scope(None, self._op_type) as scope:
            return make_op(self._op_type, scope, [inputs], lower).outputs[0]


class MaxPooling1D(_Pooling):
    """`tf.layers.MaxPooling1D`."""

    _base_name = "max_pooling1d"
    _fn = staticmethod(kops.max_pool)
    _op_type = "MaxPool"
    _rank = 1


class AveragePooling1D(_Pooling):
    """`tf.layers.AveragePooling1D`."""

    _base_name = "average_pooling1d"
    _fn = staticmethod(kops.average_pool)
    _op_type = "AvgPool"
    _rank = 1


class MaxPooling2D(_Pooling):
    """`tf.layers.MaxPooling2D`."""

    _base_name = "max_pooling2d"
    _fn = staticmethod(kops.max_pool)
    _op_type = "MaxPool"


class AveragePooling2D(_Pooling):
    """`tf.layers.AveragePooling2D`."""

    _base_name = "average_pooling2d"
    _fn = staticmethod(kops.average_pool)
    _op_type = "AvgPool"


# ---------------------------------------------------------------------------- Flatten, Dropout
class Flatten(Layer):
    """`tf.layers.Flatten`: `(batch, ...) -> (batch, prod(...))`."""

    _base_name = "flatten"

    def __init__(self, data_format="channels_last", name=None, **kwargs):
        super().__init__(name=name)
        self.data_format = _data_format(data_format, "flatten")

    def call(self, inputs):
        first = self.data_format == "channels_first"

        def lower(ctx, x):
            if first and x.ndim > 2:
                x = kops.moveaxis(x, 1, -1)
            return kops.reshape(x, (x.shape[0], -1))

        with op_scope(None, "Reshape") as scope:
            return make_op("Reshape", scope, [inputs], lower).outputs[0]


def _training_input(training):
    """None for a Python bool `training`, else the bool tensor that selects at run time."""
    if isinstance(training, Tensor) or hasattr(training, "_as_graph_tensor"):
        return convert_to_tensor(training)
    return None


class Dropout(Layer):
    """`tf.layers.Dropout`: zeroes a `rate` fraction when `training` (a bool or bool tensor),
    scaling the rest by `1 / (1 - rate)`; the identity otherwise."""

    _base_name = "dropout"

    def __init__(self, rate=0.5, noise_shape=None, seed=None, name=None, **kwargs):
        super().__init__(name=name)
        if not 0 <= float(rate) <= 1:
            raise ValueError(
                f"Layer 'dropout': `rate` must be a float in [0, 1]. Received: rate={rate!r}"
            )
        self.rate = float(rate)
        self.noise_shape = noise_shape
        self.seed = seed

    def call(self, inputs, training=False):
        flag = _training_input(training)
        if flag is None and not training:
            return array_ops.identity(inputs, name="Identity")
        gen = array_ops._seed(self.seed)
        rate = self.rate

        def lower(ctx, x, *t):
            shape = tuple(x.shape) if self.noise_shape is None else tuple(self.noise_shape)
            keep = kops.cast(krandom.uniform(shape, dtype=x.dtype, seed=gen) >= rate, x.dtype)
            dropped = x * keep * (1.0 / (1.0 - rate)) if rate < 1 else x * 0.0
            return kops.where(t[0], dropped, x) if t else dropped

        with op_scope(None, "dropout") as scope:
            ins = [inputs] + ([flag] if flag is not None else [])
            return make_op("Dropout", scope, ins, lower).outputs[0]


# ---------------------------------------------------------------------------- BatchNormalization
class BatchNormalization(Layer):
    """`tf.layers.BatchNormalization`: normalizes over every axis but `axis`.

    With `training` True (or a bool tensor that is true) it uses the batch's mean and
    (biased) variance, and the moving-average updates `moving -= (moving - batch) *
    (1 - momentum)` are ops in the UPDATE_OPS collection (run them with the train op, as TF1
    programs do through `tf.control_dependencies(tf.get_collection(tf.GraphKeys.UPDATE_OPS))`);
    otherwise it uses the moving statistics.
    """

    _base_name = "batch_normalization"

    def __init__(self, axis=-1, momentum=0.99, epsilon=1e-3, center=True, scale=True,
                 beta_initializer=None, gamma_initializer=None, moving_mean_initializer=None,
                 moving_variance_initializer=None, beta_regularizer=None, gamma_regularizer=None,
                 beta_constraint=None, gamma_constraint=None, renorm=False, trainable=True,
                 name=None, fused=None, **kwargs):  # fmt: skip
        super().__init__(trainable=trainable, name=name, reuse=kwargs.pop("_reuse", None))
        self.fused = fused
        if renorm:
            raise ValueError("Layer 'batch_normalization': renorm=True is not supported.")
        if not isinstance(axis, int):
            raise TypeError(
                f"Layer 'batch_normalization': `axis` must be an int. Received: axis={axis!r}"
            )
        self.axis = axis
        self.momentum = float(momentum)
        self.epsilon = float(epsilon)
        self.center, self.scale = center, scale
        z, o = variables_lib.zeros_initializer, variables_lib.ones_initializer
        self.beta_initializer = beta_initializer or z()
        self.gamma_initializer = gamma_initializer or o()
        self.moving_mean_initializer = moving_mean_initializer or z()
        self.moving_variance_initializer = moving_variance_initializer or o()
        self.beta_regularizer, self.gamma_regularizer = beta_regularizer, gamma_regularizer
        self.gamma = self.beta = None

    def build(self, input_shape):
        dims = input_shape.dims
        if dims is None or dims[self.axis] is None:
            raise ValueError(
                "Layer 'batch_normalization': the inputs need a known rank and a known size "
                f"on axis {self.axis}. Received: input_shape={input_shape}"
            )
        self._rank = len(dims)
        self._fused = self.fused is not False and self._rank == 4 and self.axis in (-1, 1, 3)
        n = [dims[self.axis]]
        if self.scale:
            self.gamma = self.add_weight(
                "gamma", n, initializer=self.gamma_initializer, regularizer=self.gamma_regularizer
            )
        if self.center:
            self.beta = self.add_weight(
                "beta", n, initializer=self.beta_initializer, regularizer=self.beta_regularizer
            )
        self.moving_mean = self.add_weight(
            "moving_mean", n, initializer=self.moving_mean_initializer, trainable=False
        )
        self.moving_variance = self.add_weight(
            "moving_variance", n, initializer=self.moving_variance_initializer, trainable=False
        )

    def call(self, inputs, training=False):
        axis = self.axis % self._rank
        reduce_axes = tuple(i for i in range(self._rank) if i != axis)
        eps, center, scale = self.epsilon, self.center, self.scale
        flag = _training_input(training)

        def normalize(x, mean, var, params):
            gamma = params[0] if scale else None
            beta = params[int(scale)] if center else None
            return kops.batch_normalization(x, mean, var, axis, beta, gamma, epsilon=eps)

        ins = [inputs, self.moving_mean.value(), self.moving_variance.value()]
        ins += [v.value() for v in (self.gamma, self.beta) if v is not None]
        if flag is None and not training:

            def lower(ctx, x, mm, mv, *params):
                return normalize(x, mm, mv, list(params))

            with op_scope(None, "batchnorm") as scope:
                return make_op("BatchNorm", scope, ins, lower).outputs[0]

        def lower(ctx, x, mm, mv, *rest):
            params = list(rest[:-1] if flag is not None else rest)
            if flag is None and x.dtype in ("float32", "float64"):
                # Training: the fused primitive, one each way (as Keras's layer in training).
                gamma = params[0] if scale else None
                beta = params[int(scale)] if center else None
                return fused_batch_normalization(x, axis, gamma, beta, epsilon=eps)
            mean, var = kops.moments(x, reduce_axes)
            out = normalize(x, mean, var, params)
            if flag is not None:
                out = kops.where(rest[-1], out, normalize(x, mm, mv, params))
            return out, mean, var

        with op_scope(None, "FusedBatchNormV3") as scope:
            op = make_op("BatchNorm", scope, ins + ([flag] if flag is not None else []), lower,
                         n_out=3)  # fmt: skip
        out, mean, var = op.outputs
        decay = 1.0 - self.momentum
        if self._fused:
            # TF's fused kernel (4-D input, channel axis) feeds the moving variance the
            # Bessel-corrected batch variance, n / (n - 1) times the one it normalizes with.
            var = _bessel(var, inputs, reduce_axes)
        for moving, stat in ((self.moving_mean, mean), (self.moving_variance, var)):
            self._updates.append(_moving_average_update(moving, stat, decay, flag))
        for u in self._updates[-2:]:
            add_to_collection(GraphKeys.UPDATE_OPS, u)
        return out


def _bessel(var, inputs, axes):
    def lower(ctx, v, x):
        n = 1
        for a in axes:
            n *= x.shape[a]
        return v * (n / max(n - 1, 1))

    with op_scope(None, "Bessel") as scope:
        return make_op("Mul", scope, [var, inputs], lower, [(var.shape, var.dtype)]).outputs[0]


def _moving_average_update(variable, value, decay, flag):
    """`variable -= (variable - value) * decay` (decay 0 where `flag` is false)."""

    def lower(ctx, v, *t):
        current = ctx.read(variable)
        d = decay if not t else kops.where(t[0], decay, 0.0)
        return ctx.assign(variable, current - (current - v) * d, "assign")

    with op_scope(None, "AssignMovingAvg") as scope:
        ins = [value] + ([flag] if flag is not None else [])
        spec = [(variable.shape, variable.dtype)]
        return make_op("AssignSubVariableOp", scope, ins, lower, spec).outputs[0]


# ---------------------------------------------------------------------------- functional forms
def dense(inputs, units, activation=None, use_bias=True, kernel_initializer=None,
          bias_initializer=None, kernel_regularizer=None, bias_regularizer=None,
          activity_regularizer=None, kernel_constraint=None, bias_constraint=None,
          trainable=True, name=None, reuse=None):  # fmt: skip
    """`tf.layers.dense`: a `Dense` layer applied once (variables `<name>/kernel`, `/bias`)."""
    layer = Dense(
        units, activation, use_bias, kernel_initializer, bias_initializer, kernel_regularizer,
        bias_regularizer, trainable=trainable, name=name, _reuse=reuse,
    )  # fmt: skip
    return layer(inputs)


def conv2d(inputs, filters, kernel_size, strides=(1, 1), padding="valid",
           data_format="channels_last", dilation_rate=(1, 1), activation=None, use_bias=True,
           kernel_initializer=None, bias_initializer=None, kernel_regularizer=None,
           bias_regularizer=None, activity_regularizer=None, kernel_constraint=None,
           bias_constraint=None, trainable=True, name=None, reuse=None):  # fmt: skip
    """`tf.layers.conv2d`: a `Conv2D` layer applied once."""
    layer = Conv2D(
        filters, kernel_size, strides, padding, data_format, dilation_rate, activation,
        use_bias, kernel_initializer, bias_initializer, kernel_regularizer, bias_regularizer,
        trainable=trainable, name=name, _reuse=reuse,
    )  # fmt: skip
    return layer(inputs)


def conv1d(inputs, filters, kernel_size, strides=1, padding="valid", data_format="channels_last",
           dilation_rate=1, activation=None, use_bias=True, kernel_initializer=None,
           bias_initializer=None, kernel_regularizer=None, bias_regularizer=None,
           activity_regularizer=None, kernel_constraint=None, bias_constraint=None,
           trainable=True, name=None, reuse=None):  # fmt: skip
    """`tf.layers.conv1d`: a `Conv1D` layer applied once."""
    layer = Conv1D(
        filters, kernel_size, strides, padding, data_format, dilation_rate, activation,
        use_bias, kernel_initializer, bias_initializer, kernel_regularizer, bias_regularizer,
        trainable=trainable, name=name, _reuse=reuse,
    )  # fmt: skip
    return layer(inputs)


def conv2d_transpose(inputs, filters, kernel_size, strides=(1, 1), padding="valid",
                     data_format="channels_last", activation=None, use_bias=True,
                     kernel_initializer=None, bias_initializer=None, kernel_regularizer=None,
                     bias_regularizer=None, activity_regularizer=None, kernel_constraint=None,
                     bias_constraint=None, trainable=True, name=None, reuse=None):  # fmt: skip
    """`tf.layers.conv2d_transpose`: a `Conv2DTranspose` layer applied once."""
    layer = Conv2DTranspose(
        filters, kernel_size, strides, padding, data_format, 1, activation, use_bias,
        kernel_initializer, bias_initializer, kernel_regularizer, bias_regularizer,
        trainable=trainable, name=name, _reuse=reuse,
    )  # fmt: skip
    return layer(inputs)


def max_pooling1d(inputs, pool_size, strides, padding="valid", data_format="channels_last",
                  name=None):  # fmt: skip
    """`tf.layers.max_pooling1d`."""
    return MaxPooling1D(pool_size, strides, padding, data_format, name=name)(inputs)


def average_pooling1d(inputs, pool_size, strides, padding="valid",
                      data_format="channels_last", name=None):  # fmt: skip
    """`tf.layers.average_pooling1d`."""
    return AveragePooling1D(pool_size, strides, padding, data_format, name=name)(inputs)


def max_pooling2d(inputs, pool_size, strides, padding="valid", data_format="channels_last",
                  name=None):  # fmt: skip
    """`tf.layers.max_pooling2d`."""
    return MaxPooling2D(pool_size, strides, padding, data_format, name=name)(inputs)


def average_pooling2d(inputs, pool_size, strides, padding="valid",
                      data_format="channels_last", name=None):  # fmt: skip
    """`tf.layers.average_pooling2d`."""
    return AveragePooling2D(pool_size, strides, padding, data_format, name=name)(inputs)


def flatten(inputs, name=None, data_format="channels_last"):
    """`tf.layers.flatten`."""
    return Flatten(data_format, name=name)(inputs)


def dropout(inputs, rate=0.5, noise_shape=None, seed=None, training=False, name=None):
    """`tf.layers.dropout`: active only when `training` (a bool or a bool tensor)."""
    return Dropout(rate, noise_shape, seed, name=name)(inputs, training=training)


def batch_normalization(inputs, axis=-1, momentum=0.99, epsilon=1e-3, center=True, scale=True,
                        beta_initializer=None, gamma_initializer=None,
                        moving_mean_initializer=None, moving_variance_initializer=None,
                        beta_regularizer=None, gamma_regularizer=None, beta_constraint=None,
                        gamma_constraint=None, training=False, trainable=True, name=None,
                        reuse=None, renorm=False, renorm_clipping=None, renorm_momentum=0.99,
                        fused=None, virtual_batch_size=None, adjustment=None):  # fmt: skip
    """`tf.layers.batch_normalization`; its moving-average updates go to UPDATE_OPS."""
    if virtual_batch_size is not None or adjustment is not None:
        raise ValueError(
            "batch_normalization: virtual_batch_size and adjustment are not supported. "
            f"Received: virtual_batch_size={virtual_batch_size}, adjustment={adjustment}"
        )
    layer = BatchNormalization(
        axis, momentum, epsilon, center, scale, beta_initializer, gamma_initializer,
        moving_mean_initializer, moving_variance_initializer, beta_regularizer,
        gamma_regularizer, renorm=renorm, trainable=trainable, name=name, fused=fused,
        _reuse=reuse,
    )  # fmt: skip
    return layer(inputs, training=training)
