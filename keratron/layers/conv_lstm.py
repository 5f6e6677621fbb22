"""Convolutional LSTM layers (Shi et al., 2015), Keras's `layers/rnn/conv_lstm*`: an LSTM
whose input and recurrent transforms are convolutions, over sequences of 1D, 2D or 3D
feature maps.

The cell has Keras 3's weights (`kernel` `kernel_size + (channels, 4 * filters)`,
`recurrent_kernel` `kernel_size + (filters, 4 * filters)`, `bias` `(4 * filters,)`, gates
i, f, c, o) and computes the step as Keras does: the input convolution with the layer's
strides, padding and dilation, the recurrent one with stride 1 and "same" padding. Without
input dropout the input convolution of every step runs as one batched call before the
recurrence (the same arithmetic as one call per step).
"""

from __future__ import annotations

import numpy as np

from keratron import ops
from keratron import random as kt_random
from keratron.autodiff import tree
from keratron.layers import activations, constraints, initializers, regularizers
from keratron.layers.convolutional import (
    _channel_axis,
    _data_format,
    _padding,
    _positive_int,
    _serialize,
    _spatial,
    _with_channels,
    conv_output_length,
)
from keratron.layers.layer import InputSpec, Layer
from keratron.layers.layer import int_tuple as _int_tuple
from keratron.layers.layer import who as _who
from keratron.layers.recurrent import RNN, DropoutRNNCell, step_loop

__all__ = ["ConvLSTM1D", "ConvLSTM2D", "ConvLSTM3D"]


def _check_rate(value, arg, who) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.number)):
        raise ValueError(
            f"{who}: argument `{arg}` must be a float between 0 and 1. Received: {arg}={value!r}"
        )
    if not 0 <= value <= 1:
        raise ValueError(
            f"{who}: argument `{arg}` must be a float between 0 and 1. Received: {arg}={value}"
        )
    return float(value)


class ConvLSTMCell(Layer, DropoutRNNCell):
    """One step of a convolutional LSTM over `rank`-D feature maps (the ConvLSTM layers'
    cell; arguments as `ConvLSTM2D`)."""

    def __init__(
        self,
        rank,
        filters,
        kernel_size,
        strides=1,
        padding="valid",
        data_format=None,
        dilation_rate=1,
        activation="tanh",
        recurrent_activation="sigmoid",
        use_bias=True,
        kernel_initializer="glorot_uniform",
        recurrent_initializer="orthogonal",
        bias_initializer="zeros",
        unit_forget_bias=True,
        kernel_regularizer=None,
        recurrent_regularizer=None,
        bias_regularizer=None,
        kernel_constraint=None,
        recurrent_constraint=None,
        bias_constraint=None,
        dropout=0.0,
        recurrent_dropout=0.0,
        seed=None,
        **kwargs,
    ):
        # The layer that owns the cell passes its own name for error messages.
        who = kwargs.pop("_who", None) or _who(type(self).__name__, kwargs)
        filters = _positive_int(filters, "filters", who)
        kernel_size = _int_tuple(kernel_size, rank, "kernel_size", who)
        strides = _int_tuple(strides, rank, "strides", who)
        padding = _padding(padding, who)
        data_format = _data_format(data_format, who)
        dilation_rate = _int_tuple(dilation_rate, rank, "dilation_rate", who)
        if max(strides) > 1 and max(dilation_rate) > 1:
            raise ValueError(
                f"{who}: `strides > 1` is not compatible with `dilation_rate > 1`. Received: "
                f"strides={strides}, dilation_rate={dilation_rate}"
            )
        dropout = _check_rate(dropout, "dropout", who)
        recurrent_dropout = _check_rate(recurrent_dropout, "recurrent_dropout", who)
        super().__init__(**kwargs)
        self.rank = rank
        self.filters = filters
        self.kernel_size = kernel_size
        self.strides = strides
        self.padding = padding
        self.data_format = data_format
        self.dilation_rate = dilation_rate
        self.activation = activations.get(activation)
        self.recurrent_activation = activations.get(recurrent_activation)
        self.use_bias = bool(use_bias)
        self.kernel_initializer = initializers.get(kernel_initializer)
        self.recurrent_initializer = initializers.get(recurrent_initializer)
        self.bias_initializer = initializers.get(bias_initializer)
        self.unit_forget_bias = bool(unit_forget_bias)
        self.kernel_regularizer = regularizers.get(kernel_regularizer)
        self.recurrent_regularizer = regularizers.get(recurrent_regularizer)
        self.bias_regularizer = regularizers.get(bias_regularizer)
        self.kernel_constraint = constraints.get(kernel_constraint)
        self.recurrent_constraint = constraints.get(recurrent_constraint)
        self.bias_constraint = constraints.get(bias_constraint)
        self.dropout = dropout
        self.recurrent_dropout = recurrent_dropout
        self.dropout_mask_count = 4
        self.seed = seed
        self.seed_generator = kt_random.SeedGenerator(seed)
        self.input_spec = InputSpec(ndim=rank + 2)
        # The states are feature maps, not vectors: their shapes come from
        # `get_initial_state`.
        self.state_size = -1

    def build(self, input_shape):
        input_shape = tuple(input_shape)
        self.spatial_dims = _spatial(input_shape, self.data_format)
        if None in self.spatial_dims:
            raise ValueError(
                f"Layer '{self.name}': ConvLSTM layers need static spatial dimensions. "
                f"Received: input_shape={input_shape}"
            )
        channels = input_shape[_channel_axis(self.data_format)]
        if channels is None:
            raise ValueError(
                f"Layer '{self.name}': the channel dimension of the inputs must be known. "
                f"Received: input_shape={input_shape}"
            )
        self.input_dim = int(channels)
        self.kernel = self.add_weight(
            name="kernel",
            shape=self.kernel_size + (self.input_dim, 4 * self.filters),
            initializer=self.kernel_initializer,
            regularizer=self.kernel_regularizer,
            constraint=self.kernel_constraint,
        )
        self.recurrent_kernel = self.add_weight(
            name="recurrent_kernel",
            shape=self.kernel_size + (self.filters, 4 * self.filters),
            initializer=self.recurrent_initializer,
            regularizer=self.recurrent_regularizer,
            constraint=self.recurrent_constraint,
        )
        self.bias = None
        if self.use_bias:
            init = self.bias_initializer
            if self.unit_forget_bias:
                base, n = self.bias_initializer, self.filters

                def init(shape, dtype=None):
                    parts = [base((n,), dtype=dtype), ops.ones((n,), dtype=dtype)]
                    return ops.concatenate(parts + [base((2 * n,), dtype=dtype)])

            self.bias = self.add_weight(
                name="bias",
                shape=(4 * self.filters,),
                initializer=init,
                regularizer=self.bias_regularizer,
                constraint=self.bias_constraint,
            )
        self.built = True

    def state_shape(self, batch_size):
        """The shape of each of the two states (h and c) for a batch."""
        spatial = tuple(
            conv_output_length(n, k, s, d, self.padding)
            for n, k, s, d in zip(
                self.spatial_dims, self.kernel_size, self.strides, self.dilation_rate
            )
        )
        return _with_channels(batch_size, spatial, self.filters, self.data_format)

    def get_initial_state(self, batch_size=None):
        shape = self.state_shape(batch_size)
        return [ops.zeros(shape, dtype=self.compute_dtype) for _ in range(2)]

    def _bias_shape(self):
        if self.data_format == "channels_last":
            return (1,) * (self.rank + 1) + (-1,)
        return (1, -1) + (1,) * self.rank

    def input_conv(self, x, kernel, bias=None):
        out = ops.conv(
            x,
            kernel,
            strides=self.strides,
            padding=self.padding,
            data_format=self.data_format,
            dilation_rate=self.dilation_rate,
        )
        if bias is not None:
            out = ops.add(out, ops.reshape(bias, self._bias_shape()))
        return out

    def recurrent_conv(self, h, kernel):
        return ops.conv(h, kernel, strides=1, padding="same", data_format=self.data_format)

    def _gates(self, z_inputs, h_prev, c_prev, training):
        """Adds the recurrent convolutions to the input ones (a list of four, one per gate)
        and returns the new (h, c)."""
        if training and 0.0 < self.recurrent_dropout < 1.0:
            masks = self.get_recurrent_dropout_mask(h_prev)
            hs = [ops.multiply(h_prev, m) for m in masks]
        else:
            hs = [h_prev] * 4
        kernels = ops.split(self.recurrent_kernel, 4, axis=self.rank + 1)
        z_i, z_f, z_c, z_o = (
            ops.add(x, self.recurrent_conv(h, k)) for x, h, k in zip(z_inputs, hs, kernels)
        )
        i = self.recurrent_activation(z_i)
        f = self.recurrent_activation(z_f)
        c = ops.add(ops.multiply(f, c_prev), ops.multiply(i, self.activation(z_c)))
        o = self.recurrent_activation(z_o)
        return ops.multiply(o, self.activation(c)), c

    def _input_gates(self, inputs, training):
        kernels = ops.split(self.kernel, 4, axis=self.rank + 1)
        biases = [None] * 4 if self.bias is None else ops.split(self.bias, 4)
        if training and 0.0 < self.dropout < 1.0:
            xs = [ops.multiply(inputs, m) for m in self.get_dropout_mask(inputs)]
        else:
            xs = [inputs] * 4
        return [self.input_conv(x, k, b) for x, k, b in zip(xs, kernels, biases)]

    def call(self, inputs, states, training=False):
        h_prev, c_prev = (ops.convert_to_tensor(s) for s in states)
        h, c = self._gates(self._input_gates(inputs, training), h_prev, c_prev, training)
        return h, [h, c]

    def _run_sequence(self, sequences, states, mask, training, go_backwards, zero_output):
        if training and 0.0 < self.dropout < 1.0:
            return None  # each step draws on its own masked copies: the per-step loop
        # Every step's input convolution in one call, time folded into the batch.
        batch, steps = sequences.shape[0], sequences.shape[1]
        if steps == 0:
            return None
        folded = ops.reshape(sequences, (batch * steps,) + tuple(sequences.shape[2:]))
        z = self.input_conv(folded, self.kernel, self.bias)
        z = ops.reshape(z, (batch, steps) + tuple(z.shape[1:]))
        channel = self.rank + 2 if self.data_format == "channels_last" else 2

        def step(z_t, step_states):
            h, c = self._gates(
                ops.split(z_t, 4, axis=channel - 1), step_states[0], step_states[1], training
            )
            return h, [h, c]

        return step_loop(step, z, list(states), mask, go_backwards, zero_output, self.filters)

    def _cell_config(self):
        return {
            "filters": self.filters,
            "kernel_size": self.kernel_size,
            "strides": self.strides,
            "padding": self.padding,
            "data_format": self.data_format,
            "dilation_rate": self.dilation_rate,
            "activation": activations.serialize(self.activation),
            "recurrent_activation": activations.serialize(self.recurrent_activation),
            "use_bias": self.use_bias,
            "kernel_initializer": _serialize(initializers, self.kernel_initializer),
            "recurrent_initializer": _serialize(initializers, self.recurrent_initializer),
            "bias_initializer": _serialize(initializers, self.bias_initializer),
            "unit_forget_bias": self.unit_forget_bias,
            "kernel_regularizer": _serialize(regularizers, self.kernel_regularizer),
            "recurrent_regularizer": _serialize(regularizers, self.recurrent_regularizer),
            "bias_regularizer": _serialize(regularizers, self.bias_regularizer),
            "kernel_constraint": _serialize(constraints, self.kernel_constraint),
            "recurrent_constraint": _serialize(constraints, self.recurrent_constraint),
            "bias_constraint": _serialize(constraints, self.bias_constraint),
            "dropout": self.dropout,
            "recurrent_dropout": self.recurrent_dropout,
            "seed": self.seed,
        }

    def get_config(self):
        return {**super().get_config(), **self._cell_config()}


class _ConvLSTM(RNN):
    """A ConvLSTM layer of rank `rank`: runs a `ConvLSTMCell` over axis 1 of
    `(batch, time, *spatial, channels)` inputs (channels first: `(batch, time, channels,
    *spatial)`)."""

    rank: int
    _cell_attributes = (
        "filters",
        "kernel_size",
        "strides",
        "padding",
        "data_format",
        "dilation_rate",
        "activation",
        "recurrent_activation",
        "use_bias",
        "kernel_initializer",
        "recurrent_initializer",
        "bias_initializer",
        "unit_forget_bias",
        "kernel_regularizer",
        "recurrent_regularizer",
        "bias_regularizer",
        "kernel_constraint",
        "recurrent_constraint",
        "bias_constraint",
        "dropout",
        "recurrent_dropout",
    )

    def __init__(
        self,
        filters,
        kernel_size,
        strides=1,
        padding="valid",
        data_format=None,
        dilation_rate=1,
        activation="tanh",
        recurrent_activation="sigmoid",
        use_bias=True,
        kernel_initializer="glorot_uniform",
        recurrent_initializer="orthogonal",
        bias_initializer="zeros",
        unit_forget_bias=True,
        kernel_regularizer=None,
        recurrent_regularizer=None,
        bias_regularizer=None,
        activity_regularizer=None,
        kernel_constraint=None,
        recurrent_constraint=None,
        bias_constraint=None,
        dropout=0.0,
        recurrent_dropout=0.0,
        seed=None,
        return_sequences=False,
        return_state=False,
        go_backwards=False,
        stateful=False,
        **kwargs,
    ):
        cell = ConvLSTMCell(
            self.rank,
            filters,
            kernel_size,
            strides=strides,
            padding=padding,
            data_format=data_format,
            dilation_rate=dilation_rate,
            activation=activation,
            recurrent_activation=recurrent_activation,
            use_bias=use_bias,
            kernel_initializer=kernel_initializer,
            recurrent_initializer=recurrent_initializer,
            bias_initializer=bias_initializer,
            unit_forget_bias=unit_forget_bias,
            kernel_regularizer=kernel_regularizer,
            recurrent_regularizer=recurrent_regularizer,
            bias_regularizer=bias_regularizer,
            kernel_constraint=kernel_constraint,
            recurrent_constraint=recurrent_constraint,
            bias_constraint=bias_constraint,
            dropout=dropout,
            recurrent_dropout=recurrent_dropout,
            seed=seed,
            name="conv_lstm_cell",
            dtype=kwargs.get("dtype"),
            _who=_who(type(self).__name__, kwargs),
        )
        super().__init__(
            cell,
            return_sequences=return_sequences,
            return_state=return_state,
            go_backwards=go_backwards,
            stateful=stateful,
            activity_regularizer=activity_regularizer,
            **kwargs,
        )
        self.input_spec = InputSpec(ndim=self.rank + 3)

    def __getattr__(self, name):
        # Only reached when normal lookup fails: the cell's hyper-parameters.
        if name in type(self)._cell_attributes and "cell" in self.__dict__:
            return getattr(self.__dict__["cell"], name)
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    @property
    def state_size(self) -> list:
        return [-1, -1]

    def _initial_states(self, sequences, initial_state):
        if initial_state is None:
            return super()._initial_states(sequences, None)
        states = [
            ops.cast(ops.convert_to_tensor(s), self.cell.compute_dtype)
            for s in tree.flatten(initial_state)
        ]
        want = self.cell.state_shape(sequences.shape[0])
        if len(states) != 2 or any(tuple(s.shape) != want for s in states):
            raise ValueError(
                f"Layer '{self.name}' expects 2 initial states (h and c), each of shape "
                f"{want}. Received: {[tuple(s.shape) for s in states]}"
            )
        return states

    def call(self, sequences, initial_state=None, mask=None, training=False):
        return super().call(sequences, initial_state=initial_state, mask=mask, training=training)

    def compute_output_shape(self, sequences_shape, initial_state_shape=None):
        batch, steps = sequences_shape[0], sequences_shape[1]
        step_shape = (batch,) + tuple(sequences_shape[2:])
        spatial = tuple(
            conv_output_length(n, k, s, d, self.padding)
            for n, k, s, d in zip(
                _spatial(step_shape, self.data_format),
                self.kernel_size,
                self.strides,
                self.dilation_rate,
            )
        )
        state = _with_channels(batch, spatial, self.filters, self.data_format)
        out = (batch, steps) + state[1:] if self.return_sequences else state
        if self.return_state:
            return out, state, state
        return out

    def compute_mask(self, inputs, mask=None):
        mask = tree.flatten(mask)[0] if mask is not None else None
        output_mask = (
            ops.convert_to_tensor(mask) if self.return_sequences and mask is not None else None
        )
        if self.return_state:
            return [output_mask, None, None]
        return output_mask

    def get_config(self):
        return {
            **Layer.get_config(self),
            **self._rnn_config(),
            **self.cell._cell_config(),
            "activity_regularizer": _serialize(regularizers, self.activity_regularizer),
        }

    @classmethod
    def from_config(cls, config, custom_objects=None):
        return cls(**config)


class ConvLSTM1D(_ConvLSTM):
    """Convolutional LSTM over sequences of 1D feature maps `(batch, time, steps, channels)`.

    Args:
        filters: number of output channels.
        kernel_size, strides, dilation_rate: int or tuple of 1 int.
        padding: "valid" or "same" (of the input convolution; the recurrent one is "same").
        data_format: "channels_last" or "channels_first".
        activation, recurrent_activation, use_bias, kernel_initializer,
        recurrent_initializer, bias_initializer, unit_forget_bias, kernel_regularizer,
        recurrent_regularizer, bias_regularizer, activity_regularizer, kernel_constraint,
        recurrent_constraint, bias_constraint, dropout, recurrent_dropout, seed: as `LSTM`.
        return_sequences, return_state, go_backwards, stateful: as `RNN`.

    Example:
        >>> layer = keratron.layers.ConvLSTM1D(4, 3, padding="same")
        >>> layer(np.ones((2, 5, 8, 3), "float32")).shape
        (2, 8, 4)
    """

    rank = 1


class ConvLSTM2D(_ConvLSTM):
    """Convolutional LSTM over sequences of images `(batch, time, rows, cols, channels)`.

    Args: as `ConvLSTM1D`, with tuples of 2 ints.

    Example:
        >>> layer = keratron.layers.ConvLSTM2D(4, 3, return_sequences=True)
        >>> layer(np.ones((2, 5, 8, 8, 3), "float32")).shape
        (2, 5, 6, 6, 4)
    """

    rank = 2


class ConvLSTM3D(_ConvLSTM):
    """Convolutional LSTM over sequences of volumes `(batch, time, d, h, w, channels)`.

    Args: as `ConvLSTM1D`, with tuples of 3 ints.

    Example:
        >>> layer = keratron.layers.ConvLSTM3D(2, 2)
        >>> layer(np.ones((1, 3, 4, 4, 4, 1), "float32")).shape
        (1, 3, 3, 3, 2)
    """

    rank = 3
