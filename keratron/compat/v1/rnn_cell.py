"""`tf.nn.rnn_cell`: TF1's recurrent cells, with TF's variable names and gate orders.

A cell is graph structure plus one step of math. Its variables are created by `get_variable`
in the cell's own variable scope on first use (`basic_lstm_cell/kernel`, `bias`), so weights
set from a TF checkpoint give TF's numbers. The step itself (`_kstep`) is written once with
keratron ops on the values of the step input, the flat state and the cell's parameters: a
direct call `cell(x, state)` adds one op that lowers it, and `tf.nn.dynamic_rnn` adds one op
that lowers it once per time step (see rnn.py).

Example:
    >>> import keratron.compat.v1 as tf
    >>> with tf.Graph().as_default():
    ...     cell = tf.nn.rnn_cell.BasicLSTMCell(4)
    ...     x = tf.placeholder(tf.float32, [2, 3])
    ...     out, state = cell(x, cell.zero_state(2, tf.float32))
    ...     print([v.name for v in tf.global_variables()])
    ['basic_lstm_cell/kernel:0', 'basic_lstm_cell/bias:0']
"""

from __future__ import annotations

import collections
import re

from keratron import ops as kops
from keratron import random as krandom
from keratron import tree
from keratron.compat.v1 import array_ops
from keratron.compat.v1 import variables as vs
from keratron.compat.v1.framework import Tensor, as_dtype, convert_to_tensor, make_op, op_scope

__all__ = [
    "RNNCell",
    "BasicRNNCell",
    "BasicLSTMCell",
    "LSTMCell",
    "GRUCell",
    "MultiRNNCell",
    "DropoutWrapper",
    "ResidualWrapper",
    "LSTMStateTuple",
]


def lowerable(cell) -> bool:
    """Whether `cell`'s step is written with keratron ops all the way down (then
    `dynamic_rnn` unrolls it inside one op, for any number of time steps)."""
    if isinstance(cell, MultiRNNCell):
        return all(lowerable(c) for c in cell._cells)
    if isinstance(cell, (DropoutWrapper, ResidualWrapper)):
        return lowerable(cell._cell)
    return type(cell)._kstep is not None


class LSTMStateTuple(collections.namedtuple("LSTMStateTuple", ("c", "h"))):
    """The state of an LSTM cell: the cell state `c` and the output `h`."""

    __slots__ = ()

    @property
    def dtype(self):
        return self.c.dtype


def _snake(name: str) -> str:
    s = re.sub(r"(.)([A-Z][a-z0-9]+)", r"\1_\2", name)
    s = re.sub(r"([a-z])([A-Z])", r"\1_\2", s).lower()
    return s if s[0] != "_" else "private" + s  # Keras's to_snake_case


def _depth(x, who) -> int:
    d = x.shape.dims
    if d is None or d[-1] is None:
        raise ValueError(
            f"{who}: the last dimension of the inputs must be known when the graph is built. "
            f"Received: inputs with shape {x.shape}"
        )
    return int(d[-1])


class RNNCell:
    """The base of TF1's cells: `state_size`, `output_size`, `zero_state` and `cell(x, state)`.

    Subclasses define `_create_variables(input_depth)` (under the cell's scope),
    `_params()` (the graph tensors `_kstep` reads, in order) and
    `_kstep(x, flat_state, params) -> (output, new_flat_state)` on keratron values.
    """

    def __init__(self, name=None, dtype=None, reuse=None):
        self._name = name
        self._base_name = name or _snake(type(self).__name__)
        self._reuse = reuse
        self._scope = None
        self._built = False
        self._dtype = dtype

    @property
    def state_size(self):
        raise NotImplementedError

    @property
    def output_size(self):
        raise NotImplementedError

    @property
    def name(self) -> str:
        return self._scope.name if self._scope is not None else self._base_name

    # ---- variables
    def _build(self, input_depth: int, scope=None) -> None:
        """Creates the variables, once: in `scope` if given, else in a sub-scope of the
        current variable scope named after the cell (`basic_lstm_cell`, `basic_lstm_cell_1`)."""
        if self._built:
            return
        if scope is not None:
            ctx = vs.variable_scope(scope, reuse=self._reuse)
        else:
            default = None if self._name else self._base_name
            ctx = vs.variable_scope(self._name, default_name=default, reuse=self._reuse)
        with ctx as captured:
            self._scope = captured
            self._create_variables(input_depth)
        self._built = True

    def _params(self) -> list:
        return []

    # A subclass either defines `_kstep` (keratron values; `dynamic_rnn` lowers it per step)
    # or, as a TF user's cell does, `call(inputs, state)` with graph ops (and `build`).
    _kstep = None

    def _create_variables(self, input_depth: int) -> None:
        build = getattr(self, "build", None)
        if build is not None:
            build([None, input_depth])

    def call(self, inputs, state):
        raise NotImplementedError(
            f"{type(self).__name__} must define call(inputs, state) (TF's RNNCell contract)."
        )

    @property
    def variables(self) -> list:
        return self._variables_list()

    def _variables_list(self) -> list:
        return list(getattr(self, "_vars", []))

    trainable_variables = variables
    weights = variables
    trainable_weights = variables

    # ---- state
    def zero_state(self, batch_size, dtype):
        """Zeros shaped like `state_size` for a batch of `batch_size` (an int or a scalar
        int tensor)."""
        dt = dtype
        with op_scope(None, type(self).__name__ + "ZeroState"):
            sizes = tree.flatten(self.state_size)
            if isinstance(batch_size, Tensor):
                zeros = [_dynamic_zeros(batch_size, s, dt) for s in sizes]
            else:
                zeros = [array_ops.zeros([int(batch_size), s], dt) for s in sizes]
        return tree.pack_sequence_as(self.state_size, zeros)

    def get_initial_state(self, inputs=None, batch_size=None, dtype=None):
        """`zero_state`, with the batch size and dtype of `inputs` when it is given."""
        if inputs is not None:
            x = convert_to_tensor(inputs)
            batch = x.shape.dims[0] if x.shape.dims else None
            batch_size = batch if batch is not None else array_ops.shape(x)[0]
            dtype = x.dtype
        return self.zero_state(batch_size, dtype)

    # ---- a single step in the graph
    def __call__(self, inputs, state, scope=None):
        """One step: `(output, new_state)` for `inputs` [batch, depth] and `state`."""
        x = convert_to_tensor(inputs)
        self._build(_depth(x, type(self).__name__), scope)
        flat = [convert_to_tensor(s) for s in tree.flatten(state)]
        if len(flat) != len(tree.flatten(self.state_size)):
            raise ValueError(
                f"{type(self).__name__}: the state must have the structure of state_size "
                f"{self.state_size}. Received: {state}"
            )
        if not lowerable(self):
            with vs.variable_scope(self._scope, reuse=vs.AUTO_REUSE, auxiliary_name_scope=False):
                return self.call(x, state)
        params = self._params()
        n = len(flat)

        def lower(ctx, xv, *rest):
            out, new = self._kstep(xv, list(rest[:n]), list(rest[n:]))
            return (out, *new)

        with op_scope(None, self._base_name) as name:
            op = make_op(type(self).__name__, name, [x, *flat, *params], lower, n_out=1 + n)
        output, new_flat = op.outputs[0], op.outputs[1:]
        return output, tree.pack_sequence_as(self.state_size, list(new_flat))


def _dynamic_zeros(batch_size, size, dtype):
    dt = as_dtype(dtype)

    def lower(ctx, b):
        if b._value.is_meta:
            raise ValueError(
                "zero_state: a batch_size fed at run time makes zeros that only dynamic_rnn "
                "can use (it takes the batch of its inputs); elsewhere give a constant or "
                f"tf.shape(inputs)[0]. Received: {batch_size}"
            )
        return kops.zeros((int(b.numpy()), size), dtype=dt.name)

    with op_scope(None, "zeros") as name:
        b = convert_to_tensor(batch_size)
        # `zero_state` marks the op, so dynamic_rnn makes these zeros itself from the batch of
        # its inputs (a fed batch size is not known when the step is compiled).
        return make_op("Fill", name, [b], lower, out_specs=[((None, size), dt)],
                       attrs={"zero_state": True}).outputs[0]  # fmt: skip


def _get(name, shape, initializer=None, dtype="float32"):
    return vs.get_variable(name, shape=shape, initializer=initializer, dtype=dtype)


def _activation(fn):
    """A cell's activation as a keratron function (TF1 code passes `tf.tanh`, `tf.nn.relu`
    or a keratron op)."""
    if fn is None:
        return kops.tanh
    name = getattr(fn, "__name__", "")
    table = {
        "tanh": kops.tanh,
        "Tanh": kops.tanh,
        "relu": kops.relu,
        "Relu": kops.relu,
        "sigmoid": kops.sigmoid,
        "Sigmoid": kops.sigmoid,
        "relu6": kops.relu6,
        "elu": kops.elu,
        "softsign": kops.softsign,
    }
    if getattr(fn, "__module__", "").startswith("keratron.compat"):
        if name not in table:
            raise ValueError(
                f"RNN cell activation: {name!r} is not one of {sorted(set(table))} "
                "(or a keratron.ops function)."
            )
        return table[name]
    return fn


class _Dense(RNNCell):
    """Cells whose step starts with `concat([x, h]) @ kernel + bias`."""

    def __init__(self, num_units, activation=None, reuse=None, name=None, dtype=None,
                 kernel_initializer=None, bias_initializer=None):  # fmt: skip
        super().__init__(name=name, dtype=dtype, reuse=reuse)
        if int(num_units) <= 0:
            raise ValueError(
                f"{type(self).__name__}: num_units must be a positive integer. "
                f"Received: num_units={num_units}"
            )
        self._num_units = int(num_units)
        self._act_fn = activation
        self._activation = _activation(activation)
        self._kernel_initializer = kernel_initializer
        self._bias_initializer = bias_initializer

    def _params(self) -> list:
        return [v.value() for v in self._vars]


class BasicRNNCell(_Dense):
    """`output = new_state = activation(concat([x, h]) @ kernel + bias)`."""

    @property
    def state_size(self):
        return self._num_units

    @property
    def output_size(self):
        return self._num_units

    def _create_variables(self, input_depth):
        n = self._num_units
        self._vars = [
            _get("kernel", [input_depth + n, n], self._kernel_initializer),
            _get("bias", [n], self._bias_initializer or vs.zeros_initializer()),
        ]

    def _kstep(self, x, state, params):
        k, b = params
        h = self._activation(kops.matmul(kops.concatenate([x, state[0]], axis=1), k) + b)
        return h, [h]


class GRUCell(_Dense):
    """TF's GRU: `gates/kernel` gives r and u (bias initialised to 1), `candidate/kernel`
    reads `concat([x, r * h])`; `h' = u * h + (1 - u) * c`."""

    @property
    def state_size(self):
        return self._num_units

    @property
    def output_size(self):
        return self._num_units

    def _create_variables(self, input_depth):
        n = self._num_units
        with vs.variable_scope("gates"):
            gk = _get("kernel", [input_depth + n, 2 * n], self._kernel_initializer)
            gb = _get("bias", [2 * n], self._bias_initializer or vs.constant_initializer(1.0))
        with vs.variable_scope("candidate"):
            ck = _get("kernel", [input_depth + n, n], self._kernel_initializer)
            cb = _get("bias", [n], self._bias_initializer or vs.zeros_initializer())
        self._vars = [gk, gb, ck, cb]

    def _kstep(self, x, state, params):
        gk, gb, ck, cb = params
        h = state[0]
        value = kops.sigmoid(kops.matmul(kops.concatenate([x, h], axis=1), gk) + gb)
        r, u = kops.split(value, 2, axis=1)
        c = self._activation(kops.matmul(kops.concatenate([x, r * h], axis=1), ck) + cb)
        new_h = u * h + (1.0 - u) * c
        return new_h, [new_h]


class BasicLSTMCell(_Dense):
    """TF's basic LSTM: gates i, j, f, o from one `kernel`, `forget_bias` added to f;
    `c' = c * sigmoid(f + forget_bias) + sigmoid(i) * tanh(j)`, `h' = tanh(c') * sigmoid(o)`.

    Args:
        num_units: the size of `c` and `h`.
        forget_bias: added to the forget gate's pre-activation (1.0).
        state_is_tuple: the state is `LSTMStateTuple(c, h)` (True) or `concat([c, h], 1)`.
        activation: applied to j and to c' (tanh).
    """

    def __init__(self, num_units, forget_bias=1.0, state_is_tuple=True, activation=None,
                 reuse=None, name=None, dtype=None, **kwargs):  # fmt: skip
        super().__init__(num_units, activation, reuse, name, dtype)
        self._forget_bias = float(forget_bias)
        self._state_is_tuple = bool(state_is_tuple)

    @property
    def state_size(self):
        n = self._num_units
        return LSTMStateTuple(n, n) if self._state_is_tuple else 2 * n

    @property
    def output_size(self):
        return self._num_units

    def _create_variables(self, input_depth):
        n = self._num_units
        self._vars = [
            _get("kernel", [input_depth + n, 4 * n]),
            _get("bias", [4 * n], vs.zeros_initializer()),
        ]

    def _split_state(self, state):
        if self._state_is_tuple:
            return state[0], state[1]
        return kops.split(state[0], 2, axis=1)

    def _join_state(self, c, h):
        return [c, h] if self._state_is_tuple else [kops.concatenate([c, h], axis=1)]

    def _kstep(self, x, state, params):
        k, b = params
        c, h = self._split_state(state)
        z = kops.matmul(kops.concatenate([x, h], axis=1), k) + b
        i, j, f, o = kops.split(z, 4, axis=1)
        act = self._activation
        new_c = c * kops.sigmoid(f + self._forget_bias) + kops.sigmoid(i) * act(j)
        new_h = act(new_c) * kops.sigmoid(o)
        return new_h, self._join_state(new_c, new_h)


class LSTMCell(BasicLSTMCell):
    """TF's LSTM with optional peepholes (`w_f_diag`, `w_i_diag`, `w_o_diag`), cell clipping
    and a projection of the output to `num_proj` units (`projection/kernel`)."""

    def __init__(self, num_units, use_peepholes=False, cell_clip=None, initializer=None,
                 num_proj=None, proj_clip=None, num_unit_shards=None, num_proj_shards=None,
                 forget_bias=1.0, state_is_tuple=True, activation=None, reuse=None, name=None,
                 dtype=None, **kwargs):  # fmt: skip
        super().__init__(num_units, forget_bias, state_is_tuple, activation, reuse, name, dtype)
        if num_unit_shards is not None or num_proj_shards is not None:
            raise ValueError(
                "LSTMCell: num_unit_shards and num_proj_shards (sharded variables) are not "
                f"supported. Received: {num_unit_shards}, {num_proj_shards}"
            )
        self._use_peepholes = bool(use_peepholes)
        self._cell_clip = cell_clip
        self._initializer = initializer
        self._num_proj = None if num_proj is None else int(num_proj)
        self._proj_clip = proj_clip

    @property
    def state_size(self):
        n, p = self._num_units, self._num_proj or self._num_units
        return LSTMStateTuple(n, p) if self._state_is_tuple else n + p

    @property
    def output_size(self):
        return self._num_proj or self._num_units

    def _create_variables(self, input_depth):
        n, p = self._num_units, self._num_proj or self._num_units
        init = self._initializer
        self._vars = [
            _get("kernel", [input_depth + p, 4 * n], init),
            _get("bias", [4 * n], vs.zeros_initializer()),
        ]
        if self._use_peepholes:
            self._vars += [_get(f"w_{g}_diag", [n], init) for g in "fio"]
        if self._num_proj is not None:
            with vs.variable_scope("projection"):
                self._vars.append(_get("kernel", [n, self._num_proj], init))

    def _split_state(self, state):
        if self._state_is_tuple:
            return state[0], state[1]
        return kops.split(state[0], [self._num_units], axis=1)

    def _kstep(self, x, state, params):
        k, b, *rest = params
        c_prev, m_prev = self._split_state(state)
        z = kops.matmul(kops.concatenate([x, m_prev], axis=1), k) + b
        i, j, f, o = kops.split(z, 4, axis=1)
        act, fb = self._activation, self._forget_bias
        if self._use_peepholes:
            wf, wi, wo, *rest = rest
            c = kops.sigmoid(f + fb + wf * c_prev) * c_prev + kops.sigmoid(i + wi * c_prev) * act(j)
        else:
            c = kops.sigmoid(f + fb) * c_prev + kops.sigmoid(i) * act(j)
        if self._cell_clip is not None:
            c = kops.clip(c, -self._cell_clip, self._cell_clip)
        if self._use_peepholes:
            m = kops.sigmoid(o + wo * c) * act(c)
        else:
            m = kops.sigmoid(o) * act(c)
        if self._num_proj is not None:
            m = kops.matmul(m, rest[0])
            if self._proj_clip is not None:
                m = kops.clip(m, -self._proj_clip, self._proj_clip)
        return m, self._join_state(c, m)


class MultiRNNCell(RNNCell):
    """Cells stacked: cell i reads cell i-1's output; variables under `cell_<i>/`.

    Example:
        >>> import keratron.compat.v1 as tf
        >>> with tf.Graph().as_default():
        ...     cells = [tf.nn.rnn_cell.BasicLSTMCell(8) for _ in range(2)]
        ...     stack = tf.nn.rnn_cell.MultiRNNCell(cells)
        ...     out, state = stack(tf.zeros([2, 3]), stack.zero_state(2, tf.float32))
        ...     for v in tf.global_variables():
        ...         print(v.name)
        multi_rnn_cell/cell_0/basic_lstm_cell/kernel:0
        multi_rnn_cell/cell_0/basic_lstm_cell/bias:0
        multi_rnn_cell/cell_1/basic_lstm_cell/kernel:0
        multi_rnn_cell/cell_1/basic_lstm_cell/bias:0
    """

    def __init__(self, cells, state_is_tuple=True):
        super().__init__()
        if not cells:
            raise ValueError("MultiRNNCell: must specify at least one cell. Received: []")
        if not state_is_tuple:
            raise ValueError(
                "MultiRNNCell: state_is_tuple=False (concatenated states) is not supported. "
                "Received: state_is_tuple=False"
            )
        self._cells = list(cells)
        for c in self._cells:
            _require_lowerable(c, "MultiRNNCell")

    @property
    def state_size(self):
        return tuple(c.state_size for c in self._cells)

    @property
    def output_size(self):
        return self._cells[-1].output_size

    def _create_variables(self, input_depth):
        depth = input_depth
        for i, cell in enumerate(self._cells):
            with vs.variable_scope(f"cell_{i}"):
                cell._build(depth)
            depth = tree.flatten(cell.output_size)[0]

    def _variables_list(self):
        return [v for c in self._cells for v in c._variables_list()]

    def _params(self):
        return [p for c in self._cells for p in c._params()]

    def _kstep(self, x, state, params):
        new_state = []
        for cell in self._cells:
            ns = len(tree.flatten(cell.state_size))
            np_ = len(cell._params())
            x, s = cell._kstep(x, state[:ns], params[:np_])
            state, params = state[ns:], params[np_:]
            new_state.extend(s)
        return x, new_state


def _keep_prob(p, what):
    if isinstance(p, (int, float)):
        if not 0.0 < float(p) <= 1.0:
            raise ValueError(f"DropoutWrapper: {what} must be in (0, 1]. Received: {what}={p}")
        return None if float(p) == 1.0 else float(p)
    return convert_to_tensor(p, dtype="float32")


class DropoutWrapper(RNNCell):
    """Dropout on a cell's inputs, outputs and new state: a fresh mask every step, or with
    `variational_recurrent` one mask per run for all steps and examples (TF's [1, size]
    noise, drawn once per `Session.run`). Of an `LSTMStateTuple` only `h` is dropped, as TF's
    default filter does.

    Raises:
        ValueError: a keep probability outside (0, 1]; `variational_recurrent` without
            `dtype`, or without `input_size` when inputs are dropped.
    """

    def __init__(self, cell, input_keep_prob=1.0, output_keep_prob=1.0, state_keep_prob=1.0,
                 variational_recurrent=False, input_size=None, dtype=None, seed=None,
                 dropout_state_filter_visitor=None):  # fmt: skip
        super().__init__()
        if dropout_state_filter_visitor is not None:
            raise ValueError("DropoutWrapper: dropout_state_filter_visitor is not supported.")
        _require_lowerable(cell, "DropoutWrapper")
        self._cell = cell
        self._keeps = [
            _keep_prob(input_keep_prob, "input_keep_prob"),
            _keep_prob(output_keep_prob, "output_keep_prob"),
            _keep_prob(state_keep_prob, "state_keep_prob"),
        ]
        self._gen = array_ops._seed(seed)
        self._noise = [None, None, None]  # variational: graph tensors of uniform noise
        if variational_recurrent:
            self._noise = self._variational_noise(input_size, dtype, seed)

    def _variational_noise(self, input_size, dtype, seed):
        if dtype is None:
            raise ValueError(
                "DropoutWrapper: when variational_recurrent=True, dtype must be provided. "
                "Received: dtype=None"
            )
        if self._keeps[0] is not None and input_size is None:
            raise ValueError(
                "DropoutWrapper: when variational_recurrent=True and input_keep_prob < 1.0 "
                "(or is a tensor), input_size must be provided. Received: input_size=None"
            )

        def noise(sizes, salt):
            op_seed = None if seed is None else int(seed) * 7 + salt
            return [array_ops.random_uniform([1, int(n)], dtype=dtype, seed=op_seed)
                    for n in sizes]  # fmt: skip

        k_in, k_out, k_state = self._keeps
        state_sizes = tree.flatten(self._cell.state_size)
        return [
            None if k_in is None else noise(tree.flatten(input_size), 1),
            None if k_out is None else noise(tree.flatten(self._cell.output_size), 2),
            None if k_state is None else noise(state_sizes, 3),
        ]

    @property
    def wrapped_cell(self):
        return self._cell

    @property
    def state_size(self):
        return self._cell.state_size

    @property
    def output_size(self):
        return self._cell.output_size

    def _build(self, input_depth, scope=None):
        self._cell._build(input_depth, scope)

    def _variables_list(self):
        return self._cell._variables_list()

    def _own_params(self):
        keeps = [k for k in self._keeps if isinstance(k, Tensor)]
        return keeps + [t for group in self._noise if group is not None for t in group]

    def _params(self):
        return self._cell._params() + self._own_params()

    def _drop(self, v, keep, noise=None):
        if noise is None:
            noise = krandom.uniform(tuple(v.shape), dtype=v.dtype, seed=self._gen)
        return v / keep * kops.floor(keep + noise)

    def _kstep(self, x, state, params):
        n_own = len(self._own_params())
        inner, own = params[: len(params) - n_own], list(params[len(params) - n_own :])
        keep = [own.pop(0) if isinstance(k, Tensor) else k for k in self._keeps]
        noise = [None if g is None else [own.pop(0) for _ in g] for g in self._noise]
        if keep[0] is not None:
            x = self._drop(x, keep[0], noise[0] and noise[0][0])
        out, new = self._cell._kstep(x, state, inner)
        if keep[2] is not None:
            kept = _lstm_c_leaves(self._cell.state_size)
            state_noise = noise[2] or [None] * len(new)
            new = [v if is_c else self._drop(v, keep[2], u)
                   for v, is_c, u in zip(new, kept, state_noise)]  # fmt: skip
        if keep[1] is not None:
            out = self._drop(out, keep[1], noise[1] and noise[1][0])
        return out, new


class ResidualWrapper(RNNCell):
    """A cell whose output is its input plus the wrapped cell's output (the sizes must be
    equal); the state is the wrapped cell's.

    Raises:
        ValueError: `residual_fn` is given (only TF's default, `inputs + outputs`, is
            supported).
    """

    def __init__(self, cell, residual_fn=None):
        super().__init__()
        if residual_fn is not None:
            raise ValueError(
                "ResidualWrapper: residual_fn is not supported (the default inputs + outputs "
                f"is). Received: residual_fn={residual_fn!r}"
            )
        _require_lowerable(cell, "ResidualWrapper")
        self._cell = cell

    @property
    def state_size(self):
        return self._cell.state_size

    @property
    def output_size(self):
        return self._cell.output_size

    def _build(self, input_depth, scope=None):
        out = tree.flatten(self._cell.output_size)[0]
        if input_depth != out:
            raise ValueError(
                f"ResidualWrapper: the input depth must equal the cell's output size {out}. "
                f"Received: input depth {input_depth}"
            )
        self._cell._build(input_depth, scope)

    def _variables_list(self):
        return self._cell._variables_list()

    def _params(self):
        return self._cell._params()

    def _kstep(self, x, state, params):
        out, new = self._cell._kstep(x, state, params)
        return x + out, new


def _lstm_c_leaves(structure) -> list:
    """For each leaf of a state structure, whether it is the `c` of an LSTMStateTuple (TF's
    default dropout filter keeps those)."""
    if isinstance(structure, LSTMStateTuple):
        return [True, False]
    if isinstance(structure, (tuple, list)):
        return [k for s in structure for k in _lstm_c_leaves(s)]
    return [False]


def _require_lowerable(cell, who):
    if not lowerable(cell):
        raise TypeError(
            f"{who}: the wrapped cells must be keratron's tf.nn.rnn_cell cells (or their "
            f"wrappers); a cell defined by its own call() runs alone. Received: {cell!r}"
        )
