"""Recurrent layers (Keras's `layers/rnn`): the generic `RNN` layer, the cells `SimpleRNNCell`,
`LSTMCell`, `GRUCell` and `StackedRNNCells`, and the layers `SimpleRNN`, `LSTM` and `GRU`.

A cell computes one step, `call(inputs, states) -> (output, new_states)`; `RNN` runs it over
the time axis with Keras 3's masking rule (a masked step keeps the states and repeats the
previous output, or outputs zeros with `zero_output_for_mask=True`). The built-in cells also
know how to run a whole sequence at once: LSTM hands the sequence to `ops.lstm_sequence`
(oneDNN's RNN on the CPU, else one `fused_matmul` and the `ops.lstm` primitive); GRU projects
every step's input with one `fused_matmul` and hands the recurrence to `ops.gru`; SimpleRNN
projects once and loops over the recurrent matmul. Recurrent dropout needs a fresh per-step
product with a dropped-out state, which the fused primitives do not take, so with
`recurrent_dropout > 0` in training LSTM and GRU run their cell step by step instead.

Arguments, defaults, weight names, shapes and creation order and `get_config` keys are
Keras 3's (LSTM gates i, f, c, o; GRU gates z, r, h; GRU bias (2, 3 * units) when
`reset_after`), so Keras configs and weight files load unchanged.
"""

from __future__ import annotations

import numpy as np

from keratron import ops
from keratron import random as kt_random
from keratron.autodiff import tree
from keratron.autodiff.tensor import Variable
from keratron.layers import activations, constraints, initializers, regularizers
from keratron.layers.layer import InputSpec, Layer
from keratron.layers.layer import who as _who
from keratron.layers.wrappers import deserialize_layer, serialize_layer

__all__ = [
    "RNN",
    "SimpleRNNCell",
    "LSTMCell",
    "GRUCell",
    "StackedRNNCells",
    "SimpleRNN",
    "LSTM",
    "GRU",
]

# Activations the fused sequence primitives compute, by the name they take.
_PRIMITIVE_ACTIVATIONS = {
    activations.tanh: "tanh",
    activations.sigmoid: "sigmoid",
    activations.relu: "relu",
    activations.hard_sigmoid: "hard_sigmoid",
    activations.linear: "linear",
}


# ------------------------------------------------------------------------------------ helpers
def _check_units(units, who: str) -> int:
    if isinstance(units, bool) or not isinstance(units, (int, np.integer)) or units <= 0:
        raise ValueError(
            f"{who}: argument `units` must be a positive integer. Received: units={units!r}"
        )
    return int(units)


def _check_rate(value, arg: str, who: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.number)):
        raise TypeError(
            f"{who}: argument `{arg}` must be a float in [0, 1]. Received: {arg}={value!r}"
        )
    if not 0.0 <= float(value) <= 1.0:
        raise ValueError(
            f"{who}: argument `{arg}` must be a float in [0, 1]. Received: {arg}={value}"
        )
    return float(value)


def _serialize(module, obj):
    return None if obj is None else module.serialize(obj)


def _as_list(states):
    return list(states) if isinstance(states, (list, tuple)) else [states]


def _broadcast_mask(mask_t, like):
    """A (batch,) boolean step mask reshaped to broadcast against `like` (batch, ...)."""
    return ops.reshape(mask_t, (mask_t.shape[0],) + (1,) * (like.ndim - 1))


def step_loop(
    step, sequences, states, mask, go_backwards, zero_output_for_mask, output_size, keep_all=True
):
    """Runs `step(x_t, states) -> (output, new_states)` over axis 1 of `sequences`, a tensor or
    a nested structure of tensors (each step gets the same structure of slices); the output
    may be nested too.

    Returns `(last_output, outputs, final_states)`, outputs in processed order (with
    `keep_all=False` the last output alone, on a time axis of 1), with Keras's masking rule
    applied to outputs and states.
    """
    flat_seq = tree.flatten(sequences)
    batch, steps = flat_seq[0].shape[0], flat_seq[0].shape[1]
    if steps == 0:
        dtype = flat_seq[0].dtype
        zeros = ops.zeros((batch, 0, output_size), dtype=dtype)
        return ops.zeros((batch, output_size), dtype=dtype), zeros, states
    slices = [ops.unstack(x, axis=1) for x in flat_seq]
    ms = None if mask is None else ops.unstack(mask, axis=1)
    order = range(steps - 1, -1, -1) if go_backwards else range(steps)
    outputs, prev = [], None
    for t in order:
        x_t = tree.pack_sequence_as(sequences, [x[t] for x in slices])
        out, new_states = step(x_t, states)
        new_states = _as_list(new_states)
        if ms is not None:
            flat_out = tree.flatten(out)
            fills = (
                [ops.zeros_like(o) for o in flat_out]
                if zero_output_for_mask or prev is None
                else tree.flatten(prev)
            )
            kept = [ops.where(_broadcast_mask(ms[t], o), o, f) for o, f in zip(flat_out, fills)]
            out = tree.pack_sequence_as(out, kept)
            flat = [
                ops.where(_broadcast_mask(ms[t], new), new, old)
                for new, old in zip(tree.flatten(new_states), tree.flatten(states))
            ]
            new_states = tree.pack_sequence_as(new_states, flat)
        if keep_all:
            outputs.append(out)
        else:
            outputs = [out]
        prev, states = out, new_states
    columns = zip(*(tree.flatten(o) for o in outputs))
    stacked = tree.pack_sequence_as(prev, [ops.stack(list(c), axis=1) for c in columns])
    return prev, stacked, states


class DropoutRNNCell:
    """Dropout masks for a cell, drawn once per sequence and reused at every step.

    A cell mixing this in has `dropout`, `recurrent_dropout` and `seed_generator`, and,
    when it drops each gate's input separately, `dropout_mask_count`.
    """

    def _create_dropout_mask(self, step_input, rate):
        ones = ops.ones_like(step_input)
        count = getattr(self, "dropout_mask_count", None)
        if count is None:
            return kt_random.dropout(ones, rate, seed=self.seed_generator)
        return [kt_random.dropout(ones, rate, seed=self.seed_generator) for _ in range(count)]

    def get_dropout_mask(self, step_input):
        """The input dropout mask(s) for this sequence, drawn on first use."""
        if getattr(self, "_dropout_mask", None) is None and self.dropout > 0:
            self._dropout_mask = self._create_dropout_mask(step_input, self.dropout)
        return getattr(self, "_dropout_mask", None)

    def get_recurrent_dropout_mask(self, step_input):
        """The recurrent-state dropout mask(s) for this sequence, drawn on first use."""
        if getattr(self, "_recurrent_dropout_mask", None) is None and self.recurrent_dropout > 0:
            self._recurrent_dropout_mask = self._create_dropout_mask(
                step_input, self.recurrent_dropout
            )
        return getattr(self, "_recurrent_dropout_mask", None)

    def reset_dropout_mask(self):
        self._dropout_mask = None

    def reset_recurrent_dropout_mask(self):
        self._recurrent_dropout_mask = None


def _reset_dropout_masks(cell):
    if isinstance(cell, DropoutRNNCell):
        cell.reset_dropout_mask()
        cell.reset_recurrent_dropout_mask()
    for sub in getattr(cell, "cells", ()):
        _reset_dropout_masks(sub)


# -------------------------------------------------------------------------------------- cells
class _Cell(Layer, DropoutRNNCell):
    """What SimpleRNNCell, LSTMCell and GRUCell share: arguments, weights, config."""

    _gates = 1

    def __init__(
        self,
        units,
        activation="tanh",
        use_bias=True,
        kernel_initializer="glorot_uniform",
        recurrent_initializer="orthogonal",
        bias_initializer="zeros",
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
        who = _who(type(self).__name__, kwargs)
        units = _check_units(units, who)
        dropout = _check_rate(dropout, "dropout", who)
        recurrent_dropout = _check_rate(recurrent_dropout, "recurrent_dropout", who)
        super().__init__(**kwargs)
        self.units = units
        self.activation = activations.get(activation)
        self.use_bias = bool(use_bias)
        self.kernel_initializer = initializers.get(kernel_initializer)
        self.recurrent_initializer = initializers.get(recurrent_initializer)
        self.bias_initializer = initializers.get(bias_initializer)
        self.kernel_regularizer = regularizers.get(kernel_regularizer)
        self.recurrent_regularizer = regularizers.get(recurrent_regularizer)
        self.bias_regularizer = regularizers.get(bias_regularizer)
        self.kernel_constraint = constraints.get(kernel_constraint)
        self.recurrent_constraint = constraints.get(recurrent_constraint)
        self.bias_constraint = constraints.get(bias_constraint)
        self.dropout = dropout
        self.recurrent_dropout = recurrent_dropout
        self.seed = seed
        self.seed_generator = kt_random.SeedGenerator(seed)
        self.state_size = units
        self.output_size = units

    def _build_kernels(self, input_shape):
        in_dim = input_shape[-1]
        if in_dim is None:
            raise ValueError(
                f"Layer '{self.name}' ({type(self).__name__}) needs a known last input "
                f"dimension. Received: input_shape={tuple(input_shape)}"
            )
        width = self._gates * self.units
        self.kernel = self.add_weight(
            shape=(in_dim, width),
            name="kernel",
            initializer=self.kernel_initializer,
            regularizer=self.kernel_regularizer,
            constraint=self.kernel_constraint,
        )
        self.recurrent_kernel = self.add_weight(
            shape=(self.units, width),
            name="recurrent_kernel",
            initializer=self.recurrent_initializer,
            regularizer=self.recurrent_regularizer,
            constraint=self.recurrent_constraint,
        )

    def _add_bias(self, shape, initializer):
        if not self.use_bias:
            self.bias = None
            return
        self.bias = self.add_weight(
            shape=shape,
            name="bias",
            initializer=initializer,
            regularizer=self.bias_regularizer,
            constraint=self.bias_constraint,
        )

    def get_initial_state(self, batch_size=None):
        """Zero states, one (batch_size, size) tensor per entry of `state_size`."""
        sizes = self.state_size if isinstance(self.state_size, (list, tuple)) else [self.state_size]
        return [ops.zeros((batch_size, d), dtype=self.compute_dtype) for d in sizes]

    def _dropped_sequence(self, sequences, training):
        """Inputs with this sequence's dropout mask applied at every step (one mask)."""
        if not (training and 0.0 < self.dropout < 1.0):
            return sequences
        mask = self.get_dropout_mask(sequences[:, 0])
        return ops.multiply(sequences, ops.expand_dims(mask, 1))

    def _cell_config(self):
        return {
            "units": self.units,
            "activation": activations.serialize(self.activation),
            "use_bias": self.use_bias,
            "kernel_initializer": _serialize(initializers, self.kernel_initializer),
            "recurrent_initializer": _serialize(initializers, self.recurrent_initializer),
            "bias_initializer": _serialize(initializers, self.bias_initializer),
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


class SimpleRNNCell(_Cell):
    """One step of a fully-connected RNN: `h = activation(x @ kernel + h_prev @ recurrent_kernel
    + bias)`.

    Args:
        units: positive int, the state size.
        activation: activation (default tanh).
        use_bias: whether to add a bias.
        kernel_initializer, recurrent_initializer, bias_initializer: initializers (default
            "glorot_uniform", "orthogonal", "zeros").
        kernel_regularizer, recurrent_regularizer, bias_regularizer: optional regularizers.
        kernel_constraint, recurrent_constraint, bias_constraint: optional constraints.
        dropout: fraction of the inputs dropped in training (one mask per sequence).
        recurrent_dropout: fraction of the previous state dropped in training.
        seed: optional int seed for the dropout masks.

    Example:
        >>> cell = keratron.layers.SimpleRNNCell(4)
        >>> out, states = cell(np.ones((2, 3), "float32"), [np.zeros((2, 4), "float32")])
        >>> out.shape
        (2, 4)
    """

    def build(self, input_shape):
        self._build_kernels(input_shape)
        self._add_bias((self.units,), self.bias_initializer)
        self.built = True

    def call(self, sequence, states, training=False):
        prev = ops.convert_to_tensor(_as_list(states)[0])
        if training and 0.0 < self.dropout < 1.0:
            sequence = ops.multiply(sequence, self.get_dropout_mask(sequence))
        h = ops.fused_matmul(sequence, self.kernel, self.bias)
        if training and 0.0 < self.recurrent_dropout < 1.0:
            prev = ops.multiply(prev, self.get_recurrent_dropout_mask(prev))
        output = self.activation(ops.add(h, ops.matmul(prev, self.recurrent_kernel)))
        return output, ([output] if isinstance(states, (list, tuple)) else output)

    def _run_sequence(self, sequences, states, mask, training, go_backwards, zero_output):
        # The input projection of every step is one matmul; the loop keeps only h @ U.
        inputs = self._dropped_sequence(sequences, training)
        proj = ops.fused_matmul(inputs, self.kernel, self.bias)
        rec_mask = None
        if training and 0.0 < self.recurrent_dropout < 1.0:
            rec_mask = self.get_recurrent_dropout_mask(states[0])

        def step(x_t, step_states):
            h = step_states[0] if rec_mask is None else ops.multiply(step_states[0], rec_mask)
            out = self.activation(ops.add(x_t, ops.matmul(h, self.recurrent_kernel)))
            return out, [out]

        return step_loop(step, proj, states, mask, go_backwards, zero_output, self.units)


class LSTMCell(_Cell):
    """One step of a long short-term memory network (Hochreiter 1997), gates i, f, c, o.

    Args:
        units: positive int, the size of the hidden and cell states.
        activation: activation of the candidate and of the output (default tanh).
        recurrent_activation: activation of the gates (default sigmoid).
        use_bias: whether to add a bias.
        kernel_initializer, recurrent_initializer, bias_initializer: initializers.
        unit_forget_bias: initialise the forget gate's bias to ones (Jozefowicz et al. 2015).
        kernel_regularizer, recurrent_regularizer, bias_regularizer: optional regularizers.
        kernel_constraint, recurrent_constraint, bias_constraint: optional constraints.
        dropout, recurrent_dropout: fractions of inputs / previous states dropped in training.
        seed: optional int seed for the dropout masks.

    Example:
        >>> cell = keratron.layers.LSTMCell(4)
        >>> z = np.zeros((2, 4), "float32")
        >>> h, (h, c) = cell(np.ones((2, 3), "float32"), [z, z])
    """

    _gates = 4

    def __init__(
        self,
        units,
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
        # Keras's `implementation` picks between two equivalent formulations; as in Keras,
        # recurrent dropout forces the one with a separate mask per gate.
        implementation = kwargs.pop("implementation", 2)
        super().__init__(
            units,
            activation=activation,
            use_bias=use_bias,
            kernel_initializer=kernel_initializer,
            recurrent_initializer=recurrent_initializer,
            bias_initializer=bias_initializer,
            kernel_regularizer=kernel_regularizer,
            recurrent_regularizer=recurrent_regularizer,
            bias_regularizer=bias_regularizer,
            kernel_constraint=kernel_constraint,
            recurrent_constraint=recurrent_constraint,
            bias_constraint=bias_constraint,
            dropout=dropout,
            recurrent_dropout=recurrent_dropout,
            seed=seed,
            **kwargs,
        )
        self.recurrent_activation = activations.get(recurrent_activation)
        self.unit_forget_bias = bool(unit_forget_bias)
        self.implementation = 1 if self.recurrent_dropout else implementation
        if self.implementation == 1:
            self.dropout_mask_count = 4
        self.state_size = [self.units, self.units]

    def build(self, input_shape):
        self._build_kernels(input_shape)
        init = self.bias_initializer
        if self.unit_forget_bias:
            base, units = self.bias_initializer, self.units

            def init(shape, dtype=None):
                parts = [base((units,), dtype=dtype), ops.ones((units,), dtype=dtype)]
                return ops.concatenate(parts + [base((2 * units,), dtype=dtype)])

        self._add_bias((4 * self.units,), init)
        self.built = True

    def _gate_inputs(self, inputs, training):
        """x @ kernel + bias per gate; with per-gate masks (implementation 1) each gate sees
        its own dropped-out copy of the inputs."""
        masked = training and 0.0 < self.dropout < 1.0
        if self.implementation != 1:
            if masked:
                inputs = ops.multiply(inputs, self.get_dropout_mask(inputs))
            return ops.fused_matmul(inputs, self.kernel, self.bias)
        masks = self.get_dropout_mask(inputs) if masked else None
        kernels = ops.split(self.kernel, self._gates, axis=1)
        biases = [None] * self._gates if self.bias is None else ops.split(self.bias, self._gates)
        parts = [
            ops.fused_matmul(inputs if masks is None else ops.multiply(inputs, m), k, b)
            for m, k, b in zip(masks or [None] * self._gates, kernels, biases)
        ]
        return ops.concatenate(parts, axis=-1)

    def _gate_states(self, h, training):
        """h @ recurrent_kernel per gate; with recurrent dropout each gate's h has its mask."""
        if not (training and 0.0 < self.recurrent_dropout < 1.0):
            return ops.matmul(h, self.recurrent_kernel)
        masks = self.get_recurrent_dropout_mask(h)
        kernels = ops.split(self.recurrent_kernel, self._gates, axis=1)
        return ops.concatenate(
            [ops.matmul(ops.multiply(h, m), k) for m, k in zip(masks, kernels)], axis=-1
        )

    def call(self, inputs, states, training=False):
        h_prev, c_prev = (ops.convert_to_tensor(s) for s in states)
        z = ops.add(self._gate_inputs(inputs, training), self._gate_states(h_prev, training))
        z_i, z_f, z_c, z_o = ops.split(z, 4, axis=-1)
        i = self.recurrent_activation(z_i)
        f = self.recurrent_activation(z_f)
        c = ops.add(ops.multiply(f, c_prev), ops.multiply(i, self.activation(z_c)))
        o = self.recurrent_activation(z_o)
        h = ops.multiply(o, self.activation(c))
        return h, [h, c]

    def _run_sequence(self, sequences, states, mask, training, go_backwards, zero_output):
        act = _PRIMITIVE_ACTIVATIONS.get(self.activation)
        ract = _PRIMITIVE_ACTIVATIONS.get(self.recurrent_activation)
        if act is None or ract is None or (training and self.recurrent_dropout > 0):
            return None
        inputs = self._dropped_sequence(sequences, training)
        all_h, h, c = ops.lstm_sequence(
            inputs,
            self.kernel,
            self.recurrent_kernel,
            self.bias,
            states[0],
            states[1],
            mask=mask,
            reverse=go_backwards,
            activation=act,
            recurrent_activation=ract,
            zero_output_for_mask=zero_output,
        )
        # With a mask the last output is the last written one (Keras), not the carried state.
        last = all_h[:, -1] if mask is not None and sequences.shape[1] else h
        return last, all_h, [h, c]

    def _cell_config(self):
        return {
            **super()._cell_config(),
            "recurrent_activation": activations.serialize(self.recurrent_activation),
            "unit_forget_bias": self.unit_forget_bias,
        }


class GRUCell(_Cell):
    """One step of a gated recurrent unit (Cho et al. 2014), gates z, r, h.

    Args:
        units: positive int, the state size.
        activation: activation of the candidate (default tanh).
        recurrent_activation: activation of the update and reset gates (default sigmoid).
        use_bias: whether to add biases.
        kernel_initializer, recurrent_initializer, bias_initializer: initializers.
        kernel_regularizer, recurrent_regularizer, bias_regularizer: optional regularizers.
        kernel_constraint, recurrent_constraint, bias_constraint: optional constraints.
        dropout, recurrent_dropout: fractions of inputs / previous states dropped in training.
        reset_after: apply the reset gate after the recurrent matmul (default True, the cuDNN
            form, with a (2, 3 * units) bias: input bias, recurrent bias); False applies it
            before, with one (3 * units,) bias.
        seed: optional int seed for the dropout masks.

    Example:
        >>> cell = keratron.layers.GRUCell(4)
        >>> h, _ = cell(np.ones((2, 3), "float32"), [np.zeros((2, 4), "float32")])
    """

    _gates = 3

    def __init__(
        self,
        units,
        activation="tanh",
        recurrent_activation="sigmoid",
        use_bias=True,
        kernel_initializer="glorot_uniform",
        recurrent_initializer="orthogonal",
        bias_initializer="zeros",
        kernel_regularizer=None,
        recurrent_regularizer=None,
        bias_regularizer=None,
        kernel_constraint=None,
        recurrent_constraint=None,
        bias_constraint=None,
        dropout=0.0,
        recurrent_dropout=0.0,
        reset_after=True,
        seed=None,
        **kwargs,
    ):
        implementation = kwargs.pop("implementation", 2)
        super().__init__(
            units,
            activation=activation,
            use_bias=use_bias,
            kernel_initializer=kernel_initializer,
            recurrent_initializer=recurrent_initializer,
            bias_initializer=bias_initializer,
            kernel_regularizer=kernel_regularizer,
            recurrent_regularizer=recurrent_regularizer,
            bias_regularizer=bias_regularizer,
            kernel_constraint=kernel_constraint,
            recurrent_constraint=recurrent_constraint,
            bias_constraint=bias_constraint,
            dropout=dropout,
            recurrent_dropout=recurrent_dropout,
            seed=seed,
            **kwargs,
        )
        self.recurrent_activation = activations.get(recurrent_activation)
        self.reset_after = bool(reset_after)
        self.implementation = 1 if self.recurrent_dropout else implementation
        if self.implementation == 1:
            self.dropout_mask_count = 3

    def build(self, input_shape):
        self._build_kernels(input_shape)
        shape = (2, 3 * self.units) if self.reset_after else (3 * self.units,)
        self._add_bias(shape, self.bias_initializer)
        self.built = True

    def _biases(self):
        """(input bias, recurrent bias); the recurrent one exists only with reset_after."""
        if self.bias is None:
            return None, None
        if self.reset_after:
            return self.bias[0], self.bias[1]
        return self.bias, None

    def call(self, inputs, states, training=False):
        h_prev = ops.convert_to_tensor(_as_list(states)[0])
        u = self.units
        input_bias, recurrent_bias = self._biases()
        masks = None
        if training and 0.0 < self.dropout < 1.0:
            masks = self.get_dropout_mask(inputs)
        if self.implementation == 1:
            kernels = ops.split(self.kernel, 3, axis=1)
            biases = [None] * 3 if input_bias is None else ops.split(input_bias, 3)
            x_z, x_r, x_h = (
                ops.fused_matmul(inputs if masks is None else ops.multiply(inputs, m), k, b)
                for m, k, b in zip(masks or [None] * 3, kernels, biases)
            )
        else:
            x = inputs if masks is None else ops.multiply(inputs, masks)
            x_z, x_r, x_h = ops.split(ops.fused_matmul(x, self.kernel, input_bias), 3, axis=-1)
        h_z = h_r = h_h = h_prev
        if training and 0.0 < self.recurrent_dropout < 1.0:
            rec = self.get_recurrent_dropout_mask(h_prev)
            h_z, h_r, h_h = (ops.multiply(h_prev, m) for m in rec)
        rk = self.recurrent_kernel
        rb = [None] * 3 if recurrent_bias is None else ops.split(recurrent_bias, 3)
        r_z = ops.fused_matmul(h_z, rk[:, :u], rb[0])
        r_r = ops.fused_matmul(h_r, rk[:, u : 2 * u], rb[1])
        z = self.recurrent_activation(ops.add(x_z, r_z))
        r = self.recurrent_activation(ops.add(x_r, r_r))
        if self.reset_after:
            r_h = ops.multiply(r, ops.fused_matmul(h_h, rk[:, 2 * u :], rb[2]))
        else:
            r_h = ops.matmul(ops.multiply(r, h_h), rk[:, 2 * u :])
        hh = self.activation(ops.add(x_h, r_h))
        h = ops.add(ops.multiply(z, h_prev), ops.multiply(ops.subtract(1.0, z), hh))
        return h, ([h] if isinstance(states, (list, tuple)) else h)

    def _run_sequence(self, sequences, states, mask, training, go_backwards, zero_output):
        act = _PRIMITIVE_ACTIVATIONS.get(self.activation)
        ract = _PRIMITIVE_ACTIVATIONS.get(self.recurrent_activation)
        if act is None or ract is None or (training and self.recurrent_dropout > 0):
            return None
        input_bias, recurrent_bias = self._biases()
        inputs = self._dropped_sequence(sequences, training)
        proj = ops.fused_matmul(inputs, self.kernel, input_bias)
        all_h, h = ops.gru(
            proj,
            states[0],
            self.recurrent_kernel,
            recurrent_bias,
            mask=mask,
            reverse=go_backwards,
            reset_after=self.reset_after,
            activation=act,
            recurrent_activation=ract,
            zero_output_for_mask=zero_output,
        )
        last = all_h[:, -1] if mask is not None and sequences.shape[1] else h
        return last, all_h, [h]

    def _cell_config(self):
        return {
            **super()._cell_config(),
            "recurrent_activation": activations.serialize(self.recurrent_activation),
            "reset_after": self.reset_after,
        }


class StackedRNNCells(Layer):
    """Several cells run as one: each step feeds the output of one cell to the next.

    Args:
        cells: list of cells.

    Example:
        >>> cells = [keratron.layers.LSTMCell(4), keratron.layers.GRUCell(3)]
        >>> keratron.layers.RNN(cells)(np.ones((2, 5, 6), "float32")).shape
        (2, 3)
    """

    def __init__(self, cells, **kwargs):
        super().__init__(**kwargs)
        cells = list(cells)
        for cell in cells:
            if not hasattr(cell, "call") or not hasattr(cell, "state_size"):
                raise ValueError(
                    f"StackedRNNCells layer '{self.name}': every entry of `cells` must have a "
                    f"`call` method and a `state_size` attribute. Received: {cell!r}"
                )
        if not cells:
            raise ValueError(
                f"StackedRNNCells layer '{self.name}': argument `cells` must be a non-empty list."
            )
        self.cells = cells

    @property
    def state_size(self):
        return [c.state_size for c in self.cells]

    @property
    def output_size(self):
        last = self.cells[-1]
        if getattr(last, "output_size", None) is not None:
            return last.output_size
        size = last.state_size
        return size[0] if isinstance(size, (list, tuple)) else size

    def get_initial_state(self, batch_size=None):
        states = []
        for cell in self.cells:
            fn = getattr(cell, "get_initial_state", None)
            if fn is not None:
                state = fn(batch_size=batch_size)
            else:
                sizes = cell.state_size
                sizes = sizes if isinstance(sizes, (list, tuple)) else [sizes]
                state = [ops.zeros((batch_size, d), dtype=self.compute_dtype) for d in sizes]
            states.append(state)
        return states

    def call(self, inputs, states, training=False):
        new_states = []
        for cell, state in zip(self.cells, states):
            kwargs = {"training": training} if "training" in _call_params(cell) else {}
            state = list(state) if isinstance(state, (list, tuple)) else [state]
            inputs, state = cell.call(inputs, state, **kwargs)
            new_states.append(_as_list(state))
        return inputs, new_states

    def build(self, input_shape):
        shape = tuple(input_shape)
        for cell in self.cells:
            if isinstance(cell, Layer) and not cell.built:
                cell.build(shape)
                cell.built = True
            size = getattr(cell, "output_size", None)
            if size is None:
                size = _as_list(cell.state_size)[0]
            shape = shape[:-1] + (size,)
        self.built = True

    def get_config(self):
        return {**super().get_config(), "cells": [serialize_layer(c) for c in self.cells]}

    @classmethod
    def from_config(cls, config, custom_objects=None):
        config = dict(config)
        cells = [deserialize_layer(c, custom_objects) for c in config.pop("cells")]
        return cls(cells, **config)


def _call_params(cell):
    params = getattr(cell, "_call_params", None)
    if params is None:
        import inspect

        params = inspect.signature(cell.call).parameters
    return params


# ------------------------------------------------------------------------------------ RNN
class RNN(Layer):
    """Runs a cell over the time axis of a (batch, time, ...) sequence.

    Args:
        cell: a cell (`call(inputs, states) -> (output, new_states)` and `state_size`), or a
            list of cells, stacked.
        return_sequences: return every step's output (batch, time, units), not only the last.
        return_state: also return the final states, after the output.
        go_backwards: process the sequence last step first (outputs come in processed order).
        stateful: keep the final states of a batch as the initial states of the next (needs
            a fixed batch size); `reset_states()` zeroes them.
        unroll: accepted for Keras compatibility; both forms compute the same thing.
        zero_output_for_mask: masked steps output zeros instead of the previous output.

    Call arguments: `sequences`, `initial_state` (list of state tensors), `mask`
    ((batch, time) booleans, e.g. from `Embedding(mask_zero=True)`), `training`.

    Example:
        >>> layer = keratron.layers.RNN(keratron.layers.SimpleRNNCell(4), return_sequences=True)
        >>> layer(np.ones((2, 5, 3), "float32")).shape
        (2, 5, 4)
    """

    def __init__(
        self,
        cell,
        return_sequences=False,
        return_state=False,
        go_backwards=False,
        stateful=False,
        unroll=False,
        zero_output_for_mask=False,
        **kwargs,
    ):
        who = _who(type(self).__name__, kwargs)
        if isinstance(cell, (list, tuple)):
            cell = StackedRNNCells(cell)
        if not hasattr(cell, "call"):
            raise ValueError(
                f"{who}: argument `cell` must have a `call` method. Received: {cell!r}"
            )
        state_size = getattr(cell, "state_size", None)
        if state_size is None or not isinstance(state_size, (list, tuple, int, np.integer)):
            raise ValueError(
                f"{who}: the cell must have a `state_size` attribute, an int or a list of ints "
                f"(one per state). Received: state_size={state_size!r}"
            )
        super().__init__(**kwargs)
        self.cell = cell
        self.return_sequences = bool(return_sequences)
        self.return_state = bool(return_state)
        self.go_backwards = bool(go_backwards)
        self.stateful = bool(stateful)
        self.unroll = bool(unroll)
        self.zero_output_for_mask = bool(zero_output_for_mask)
        self.supports_masking = True
        self._states = None
        self._expected_batch_size = None

    @property
    def state_size(self) -> list:
        size = self.cell.state_size
        return list(size) if isinstance(size, (list, tuple)) else [int(size)]

    @property
    def _output_size(self) -> int:
        size = getattr(self.cell, "output_size", None)
        return size if size is not None else tree.flatten(self.state_size)[0]

    @property
    def states(self):
        """The state Variables of a stateful layer (None before it is built)."""
        return self._states

    def build(self, sequences_shape, initial_state_shape=None):
        sequences_shape = tuple(sequences_shape)
        if len(sequences_shape) < 3:
            raise ValueError(
                f"Layer '{self.name}' ({type(self).__name__}) expects inputs of shape "
                f"(batch, time, features). Received: input_shape={sequences_shape}"
            )
        if isinstance(self.cell, Layer) and not self.cell.built:
            self.cell.build((sequences_shape[0],) + sequences_shape[2:])
            self.cell.built = True
        if self.stateful:
            if self._states is not None:
                self.reset_state()
            else:
                if sequences_shape[0] is None:
                    raise ValueError(
                        f"Layer '{self.name}': with `stateful=True` the batch size must be "
                        "static; pass `batch_size=` (or `batch_shape=`) to `Input`. "
                        f"Received: input_shape={sequences_shape}"
                    )
                self._create_state_variables(sequences_shape[0])
        self.built = True

    def _create_state_variables(self, batch_size):
        # Like Keras, these are not weights: not saved, not in `layer.weights`.
        self._states = tree.map_structure(
            lambda v: Variable(v, trainable=False, dtype=self.dtype, name="rnn_state"),
            self.get_initial_state(batch_size),
        )
        self._expected_batch_size = int(batch_size)

    def get_initial_state(self, batch_size):
        """The states a sequence starts from when no `initial_state` is given (zeros)."""
        fn = getattr(self.cell, "get_initial_state", None)
        if fn is not None:
            return _as_list(fn(batch_size=batch_size))
        return [ops.zeros((batch_size, d), dtype=self.compute_dtype) for d in self.state_size]

    def reset_state(self):
        """Zeroes the states of a stateful layer."""
        if self._states is not None:
            for v in tree.flatten(self._states):
                v.assign(np.zeros(v.shape, dtype=v.dtype))

    def reset_states(self, states=None):
        """Zeroes the states, or sets them to `states` (numpy arrays, one per state)."""
        if states is None:
            self.reset_state()
            return
        if self._states is None:
            raise ValueError(
                f"Layer '{self.name}': `reset_states(states)` needs a stateful layer that is "
                "built (call it once, or build it with a fixed batch size)."
            )
        flat, values = tree.flatten(self._states), tree.flatten(_as_list(states))
        if len(values) != len(flat):
            raise ValueError(
                f"Layer '{self.name}' expects {len(flat)} states in `reset_states`. "
                f"Received: {len(values)} values"
            )
        for v, value in zip(flat, values):
            v.assign(np.asarray(value))

    def _initial_states(self, sequences, initial_state):
        batch = sequences.shape[0]
        if initial_state is None:
            if self.stateful:
                # Snapshot the Variables: they are overwritten after this call, and the
                # gradient of this call may still read the states it started from.
                return tree.map_structure(ops.copy, self._states)
            return self.get_initial_state(batch)
        states = tree.map_structure(
            lambda s: (
                ops.cast(ops.convert_to_tensor(s), self.cell.compute_dtype)
                if hasattr(self.cell, "compute_dtype")
                else ops.convert_to_tensor(s)
            ),
            _as_list(initial_state),
        )
        expected = tree.flatten(self.state_size)
        flat = tree.flatten(states)
        if len(flat) != len(expected):
            raise ValueError(
                f"Layer '{self.name}' expects {len(expected)} initial state(s) in "
                f"`initial_state`, of sizes {expected}. Received: {len(flat)} tensor(s)"
            )
        for s, size in zip(flat, expected):
            if tuple(s.shape) != (batch, size):
                raise ValueError(
                    f"Layer '{self.name}': each initial state must have shape (batch, size) = "
                    f"{(batch, size)}. Received: initial_state shapes "
                    f"{[tuple(x.shape) for x in flat]}"
                )
        return states

    def call(self, sequences, initial_state=None, mask=None, training=False):
        if sequences.ndim < 3:
            raise ValueError(
                f"Layer '{self.name}' ({type(self).__name__}) expects inputs of shape "
                f"(batch, time, features). Received: shape={tuple(sequences.shape)}"
            )
        if (
            self.stateful
            and self._expected_batch_size is not None
            and sequences.shape[0] != self._expected_batch_size
        ):
            raise ValueError(
                f"Layer '{self.name}' is stateful with batch size {self._expected_batch_size}; "
                f"every batch must have that size. Received: batch size {sequences.shape[0]}"
            )
        states = self._initial_states(sequences, initial_state)
        if mask is not None:
            mask = tree.flatten(mask)[0]
        if mask is not None:
            mask = ops.cast(ops.convert_to_tensor(mask), "bool")
        _reset_dropout_masks(self.cell)
        try:
            last, outputs, states = self._run(sequences, states, mask, bool(training))
        finally:
            _reset_dropout_masks(self.cell)
        if self.stateful:
            for var, value in zip(tree.flatten(self._states), tree.flatten(states)):
                var.assign(value)
        output = outputs if self.return_sequences else last
        if self.return_state:
            return (output, *states)
        return output

    def _run(self, sequences, states, mask, training):
        run = getattr(self.cell, "_run_sequence", None)
        if run is not None:
            result = run(
                sequences, states, mask, training, self.go_backwards, self.zero_output_for_mask
            )
            if result is not None:
                return result
        kwargs = {"training": training} if "training" in _call_params(self.cell) else {}

        def step(x_t, step_states):
            return self.cell.call(x_t, list(step_states), **kwargs)

        return step_loop(
            step,
            sequences,
            states,
            mask,
            self.go_backwards,
            self.zero_output_for_mask,
            self._output_size,
        )

    def compute_output_shape(self, sequences_shape, initial_state_shape=None):
        batch, length = sequences_shape[0], sequences_shape[1]
        if self.return_sequences:
            out = (batch, length, self._output_size)
        else:
            out = (batch, self._output_size)
        if not self.return_state:
            return out
        states = [
            [(batch, s) for s in size] if isinstance(size, (list, tuple)) else (batch, size)
            for size in self.state_size
        ]
        return (out, *states)

    def compute_mask(self, inputs, mask=None):
        mask = tree.flatten(mask)[0] if mask is not None else None
        output_mask = None
        if self.return_sequences and mask is not None:
            output_mask = ops.convert_to_tensor(mask)
        if self.return_state:
            return [output_mask] + [None] * len(self.state_size)
        return output_mask

    def _rnn_config(self):
        return {
            "return_sequences": self.return_sequences,
            "return_state": self.return_state,
            "go_backwards": self.go_backwards,
            "stateful": self.stateful,
            "unroll": self.unroll,
            "zero_output_for_mask": self.zero_output_for_mask,
        }

    def get_config(self):
        return {**super().get_config(), **self._rnn_config(), "cell": serialize_layer(self.cell)}

    @classmethod
    def from_config(cls, config, custom_objects=None):
        config = dict(config)
        cell = deserialize_layer(config.pop("cell"), custom_objects)
        return cls(cell, **config)


class _CellLayer(RNN):
    """An RNN layer that builds its own cell from the layer's arguments (SimpleRNN, LSTM,
    GRU): the cell's attributes read through, and the config is flat (no "cell" entry)."""

    _cell_attributes = (
        "units",
        "activation",
        "use_bias",
        "kernel_initializer",
        "recurrent_initializer",
        "bias_initializer",
        "kernel_regularizer",
        "recurrent_regularizer",
        "bias_regularizer",
        "kernel_constraint",
        "recurrent_constraint",
        "bias_constraint",
        "dropout",
        "recurrent_dropout",
    )

    def __init__(self, cell, **kwargs):
        super().__init__(cell, **kwargs)
        self.input_spec = InputSpec(ndim=3)

    def __getattr__(self, name):
        # Only reached when normal lookup fails: the cell's hyper-parameters.
        if name in type(self)._cell_attributes and "cell" in self.__dict__:
            return getattr(self.__dict__["cell"], name)
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def call(self, sequences, initial_state=None, mask=None, training=False):
        return super().call(sequences, initial_state=initial_state, mask=mask, training=training)

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


def _check_use_cudnn(value, who):
    if value not in ("auto", True, False):
        raise ValueError(
            f"{who}: argument `use_cudnn` must be one of 'auto', True, False. "
            f"Received: use_cudnn={value!r}"
        )
    return value


class SimpleRNN(_CellLayer):
    """A fully-connected RNN whose output is fed back as the next step's state.

    Args:
        units: positive int, the output size.
        activation: activation (default tanh).
        use_bias, kernel_initializer, recurrent_initializer, bias_initializer,
        kernel_regularizer, recurrent_regularizer, bias_regularizer, activity_regularizer,
        kernel_constraint, recurrent_constraint, bias_constraint, dropout,
        recurrent_dropout, seed: as in `SimpleRNNCell`.
        return_sequences, return_state, go_backwards, stateful, unroll: as in `RNN`.

    Example:
        >>> keratron.layers.SimpleRNN(4)(np.ones((2, 5, 3), "float32")).shape
        (2, 4)
    """

    def __init__(
        self,
        units,
        activation="tanh",
        use_bias=True,
        kernel_initializer="glorot_uniform",
        recurrent_initializer="orthogonal",
        bias_initializer="zeros",
        kernel_regularizer=None,
        recurrent_regularizer=None,
        bias_regularizer=None,
        activity_regularizer=None,
        kernel_constraint=None,
        recurrent_constraint=None,
        bias_constraint=None,
        dropout=0.0,
        recurrent_dropout=0.0,
        return_sequences=False,
        return_state=False,
        go_backwards=False,
        stateful=False,
        unroll=False,
        seed=None,
        **kwargs,
    ):
        who = _who("SimpleRNN", kwargs)
        _check_units(units, who)
        _check_rate(dropout, "dropout", who)
        _check_rate(recurrent_dropout, "recurrent_dropout", who)
        cell = SimpleRNNCell(
            units,
            activation=activation,
            use_bias=use_bias,
            kernel_initializer=kernel_initializer,
            recurrent_initializer=recurrent_initializer,
            bias_initializer=bias_initializer,
            kernel_regularizer=kernel_regularizer,
            recurrent_regularizer=recurrent_regularizer,
            bias_regularizer=bias_regularizer,
            kernel_constraint=kernel_constraint,
            recurrent_constraint=recurrent_constraint,
            bias_constraint=bias_constraint,
            dropout=dropout,
            recurrent_dropout=recurrent_dropout,
            seed=seed,
            dtype=kwargs.get("dtype"),
            trainable=kwargs.get("trainable", True),
            name="simple_rnn_cell",
        )
        super().__init__(
            cell,
            return_sequences=return_sequences,
            return_state=return_state,
            go_backwards=go_backwards,
            stateful=stateful,
            unroll=unroll,
            activity_regularizer=activity_regularizer,
            **kwargs,
        )


class LSTM(_CellLayer):
    """Long short-term memory layer (Hochreiter 1997), gates i, f, c, o.

    The whole sequence is one `ops.lstm_sequence` call (the input projection and the
    recurrence; on the CPU one oneDNN call in float32), except in
    training with `recurrent_dropout > 0` (a per-step loop of `LSTMCell`) or with
    activations the primitive does not compute.

    Args:
        units: positive int, the output and state size.
        activation, recurrent_activation, use_bias, kernel_initializer,
        recurrent_initializer, bias_initializer, unit_forget_bias, kernel_regularizer,
        recurrent_regularizer, bias_regularizer, kernel_constraint, recurrent_constraint,
        bias_constraint, dropout, recurrent_dropout, seed: as in `LSTMCell`.
        activity_regularizer: optional regularizer on the output.
        return_sequences, return_state, go_backwards, stateful, unroll: as in `RNN`.
        use_cudnn: "auto", True or False; accepted for Keras compatibility (the fused
            primitive is used whenever it applies).

    Example:
        >>> out, h, c = keratron.layers.LSTM(4, return_state=True)(np.ones((2, 5, 3), "float32"))
        >>> out.shape, c.shape
        ((2, 4), (2, 4))
    """

    _cell_attributes = _CellLayer._cell_attributes + ("recurrent_activation", "unit_forget_bias")

    def __init__(
        self,
        units,
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
        unroll=False,
        use_cudnn="auto",
        **kwargs,
    ):
        who = _who("LSTM", kwargs)
        _check_units(units, who)
        _check_rate(dropout, "dropout", who)
        _check_rate(recurrent_dropout, "recurrent_dropout", who)
        cell = LSTMCell(
            units,
            activation=activation,
            recurrent_activation=recurrent_activation,
            use_bias=use_bias,
            kernel_initializer=kernel_initializer,
            unit_forget_bias=unit_forget_bias,
            recurrent_initializer=recurrent_initializer,
            bias_initializer=bias_initializer,
            kernel_regularizer=kernel_regularizer,
            recurrent_regularizer=recurrent_regularizer,
            bias_regularizer=bias_regularizer,
            kernel_constraint=kernel_constraint,
            recurrent_constraint=recurrent_constraint,
            bias_constraint=bias_constraint,
            dropout=dropout,
            recurrent_dropout=recurrent_dropout,
            dtype=kwargs.get("dtype"),
            trainable=kwargs.get("trainable", True),
            name="lstm_cell",
            seed=seed,
            implementation=kwargs.pop("implementation", 2),
        )
        super().__init__(
            cell,
            return_sequences=return_sequences,
            return_state=return_state,
            go_backwards=go_backwards,
            stateful=stateful,
            unroll=unroll,
            activity_regularizer=activity_regularizer,
            **kwargs,
        )
        self.use_cudnn = _check_use_cudnn(use_cudnn, who)


class GRU(_CellLayer):
    """Gated recurrent unit layer (Cho et al. 2014), gates z, r, h.

    The whole sequence is one `ops.gru` call after one input-projection matmul, except in
    training with `recurrent_dropout > 0` (a per-step loop of `GRUCell`) or with activations
    the primitive does not compute.

    Args:
        units: positive int, the output and state size.
        activation, recurrent_activation, use_bias, kernel_initializer,
        recurrent_initializer, bias_initializer, kernel_regularizer, recurrent_regularizer,
        bias_regularizer, kernel_constraint, recurrent_constraint, bias_constraint, dropout,
        recurrent_dropout, reset_after, seed: as in `GRUCell` (`reset_after=True` default).
        activity_regularizer: optional regularizer on the output.
        return_sequences, return_state, go_backwards, stateful, unroll: as in `RNN`.
        use_cudnn: "auto", True or False; accepted for Keras compatibility.

    Example:
        >>> keratron.layers.GRU(4, return_sequences=True)(np.ones((2, 5, 3), "float32")).shape
        (2, 5, 4)
    """

    _cell_attributes = _CellLayer._cell_attributes + ("recurrent_activation", "reset_after")

    def __init__(
        self,
        units,
        activation="tanh",
        recurrent_activation="sigmoid",
        use_bias=True,
        kernel_initializer="glorot_uniform",
        recurrent_initializer="orthogonal",
        bias_initializer="zeros",
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
        unroll=False,
        reset_after=True,
        use_cudnn="auto",
        **kwargs,
    ):
        who = _who("GRU", kwargs)
        _check_units(units, who)
        _check_rate(dropout, "dropout", who)
        _check_rate(recurrent_dropout, "recurrent_dropout", who)
        cell = GRUCell(
            units,
            activation=activation,
            recurrent_activation=recurrent_activation,
            use_bias=use_bias,
            kernel_initializer=kernel_initializer,
            recurrent_initializer=recurrent_initializer,
            bias_initializer=bias_initializer,
            kernel_regularizer=kernel_regularizer,
            recurrent_regularizer=recurrent_regularizer,
            bias_regularizer=bias_regularizer,
            kernel_constraint=kernel_constraint,
            recurrent_constraint=recurrent_constraint,
            bias_constraint=bias_constraint,
            dropout=dropout,
            recurrent_dropout=recurrent_dropout,
            reset_after=reset_after,
            dtype=kwargs.get("dtype"),
            trainable=kwargs.get("trainable", True),
            name="gru_cell",
            seed=seed,
            implementation=kwargs.pop("implementation", 2),
        )
        super().__init__(
            cell,
            return_sequences=return_sequences,
            return_state=return_state,
            go_backwards=go_backwards,
            stateful=stateful,
            unroll=unroll,
            activity_regularizer=activity_regularizer,
            **kwargs,
        )
        self.use_cudnn = _check_use_cudnn(use_cudnn, who)
