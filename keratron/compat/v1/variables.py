"""TF1 variables: `Variable`, `get_variable` with `variable_scope`, initializers and the
`*_initializer` ops.

A v1 Variable is graph structure: a `VariableV2` op (reading it needs the variable initialized
in the session), an `Assign` initializer and a `read` snapshot. Its value lives in the
`Session`: each session holds one keratron Variable per v1 Variable it initialized, so two
sessions on one graph have separate values, as in TF.
"""

from __future__ import annotations

import contextlib
import math

import numpy as np

from keratron.compat.v1 import array_ops
from keratron.compat.v1.framework import (
    _TENSOR_OPERATORS,
    GraphKeys,
    Tensor,
    TensorShape,
    as_dtype,
    convert_to_tensor,
    get_default_graph,
    make_op,
    op_scope,
)


class Variable:
    """`tf.Variable` (TF1's reference variable).

    Example:
        >>> import keratron.compat.v1 as tf
        >>> with tf.Graph().as_default(), tf.Session() as sess:
        ...     state = tf.Variable(0, name="counter")
        ...     update = tf.assign(state, state + 1)
        ...     sess.run(tf.global_variables_initializer())
        ...     print(state.name, sess.run(update), sess.run(update))
        counter:0 1 2
    """

    def __init__(self, initial_value=None, trainable=True, collections=None,
                 validate_shape=True, caching_device=None, name=None, variable_def=None,
                 dtype=None, expected_shape=None, import_scope=None, constraint=None,
                 use_resource=None, synchronization=None, aggregation=None,
                 shape=None):  # fmt: skip
        if initial_value is None:
            raise ValueError("initial_value must be specified.")
        g = get_default_graph()
        self.graph = g
        self.trainable = bool(trainable)
        self.constraint = constraint
        with g.control_dependencies(None), g.name_scope(name or "Variable") as scope:
            if callable(initial_value):
                with g.name_scope("Initializer"):
                    initial_value = initial_value()
            init = convert_to_tensor(initial_value, dtype=dtype, name="initial_value")
            self._initial_value = init
            vshape = TensorShape(shape) if shape is not None else init.shape
            if not vshape.is_fully_defined():
                raise ValueError(
                    f"Variable {scope[:-1]}: the initial value must have a fully defined shape "
                    f"(validate_shape=False is not supported). Received: {init.shape}"
                )
            self._shape = vshape
            self.dtype = init.dtype
            spec = [(vshape, init.dtype)]
            var_op = make_op("VariableV2", scope[:-1], [], lambda ctx: ctx.read(self), spec)
            self.op = var_op
            self._ref = var_op.outputs[0]
            self._initializer_op = make_op(
                "Assign",
                g.unique_name("Assign"),
                [init],
                lambda ctx, v: ctx.assign(self, v, "assign"),
                spec,
            )
            self._snapshot = make_op(
                "Identity", g.unique_name("read"), [self._ref], lambda ctx, v: v, spec
            ).outputs[0]
        if collections is None:
            collections = [GraphKeys.GLOBAL_VARIABLES]
        if self.trainable and GraphKeys.TRAINABLE_VARIABLES not in collections:
            collections = list(collections) + [GraphKeys.TRAINABLE_VARIABLES]
        g.add_to_collections(collections, self)

    # ---- TF's attributes
    @property
    def name(self) -> str:
        return self._ref.name

    @property
    def shape(self) -> TensorShape:
        return self._shape

    def get_shape(self) -> TensorShape:
        return self._shape

    @property
    def initializer(self):
        return self._initializer_op

    @property
    def initial_value(self) -> Tensor:
        return self._initial_value

    @property
    def device(self) -> str:
        return ""

    def value(self) -> Tensor:
        return self._snapshot

    def read_value(self) -> Tensor:
        with op_scope(None, "read") as scope:
            return make_op(
                "Identity", scope, [self._ref], lambda ctx, v: v, [(self._shape, self.dtype)]
            ).outputs[0]

    def initialized_value(self) -> Tensor:
        """This variable's value, initialized first if it is not yet (for initial values
        of other variables)."""
        with get_default_graph().control_dependencies(None), op_scope(None, "cond") as scope:
            return make_op(
                "Merge",
                scope,
                [self._initial_value],
                lambda ctx, v: ctx.read_or(self, v),
                [(self._shape, self.dtype)],
            ).outputs[0]

    def eval(self, session=None):
        return self._snapshot.eval(session=session)

    def load(self, value, session=None) -> None:
        from keratron.compat.v1 import session as session_lib

        session_lib.resolve(session).load_variable(self, value)

    def _as_graph_tensor(self, dtype=None):
        if dtype is not None and as_dtype(dtype) != self.dtype:
            raise ValueError(
                f"Incompatible type conversion requested to type {as_dtype(dtype).name} for "
                f"variable of type {self.dtype.name}"
            )
        return self._snapshot

    # ---- updates
    def _update(self, op_type, mode, value, name):
        with op_scope(name, op_type) as scope:
            v = convert_to_tensor(value, dtype=self.dtype)
            return make_op(
                op_type,
                scope,
                [v],
                lambda ctx, x: ctx.assign(self, x, mode),
                [(self._shape, self.dtype)],
            ).outputs[0]

    def assign(self, value, use_locking=None, name=None, read_value=True):
        return self._update("Assign", "assign", value, name)

    def assign_add(self, delta, use_locking=None, name=None, read_value=True):
        return self._update("AssignAdd", "assign_add", delta, name)

    def assign_sub(self, delta, use_locking=None, name=None, read_value=True):
        return self._update("AssignSub", "assign_sub", delta, name)

    def _scatter(self, op_type, indices, updates, combine, name):
        from keratron import ops as kops

        def lower(ctx, idx, upd):
            var = ctx.read(self)
            idx2 = kops.reshape(kops.cast(idx, "int32"), (-1, 1))
            new = combine(var, idx2, kops.reshape(upd, (-1,) + tuple(self._shape.dims[1:])))
            return ctx.assign(self, new, "assign")

        with op_scope(name, op_type) as scope:
            i = convert_to_tensor(indices)
            u = convert_to_tensor(updates, dtype=self.dtype)
            return make_op(op_type, scope, [i, u], lower, [(self._shape, self.dtype)]).outputs[0]

    def scatter_update(self, sparse_delta=None, use_locking=False, name=None, *, indices=None,
                       updates=None):  # fmt: skip
        from keratron import ops as kops

        return self._scatter(
            "ScatterUpdate", indices, updates, lambda v, i, u: kops.scatter_update(v, i, u), name
        )

    def scatter_add(self, indices, updates, name=None):
        from keratron import ops as kops

        def combine(v, i, u):
            return v + kops.scatter(i, u, tuple(self._shape.dims))

        return self._scatter("ScatterAdd", indices, updates, combine, name)

    def scatter_sub(self, indices, updates, name=None):
        from keratron import ops as kops

        def combine(v, i, u):
            return v - kops.scatter(i, u, tuple(self._shape.dims))

        return self._scatter("ScatterSub", indices, updates, combine, name)

    def count_up_to(self, limit):
        return count_up_to(self, limit)

    def __repr__(self):
        return f"<tf.Variable '{self.name}' shape={self._shape} dtype={self.dtype.name}_ref>"

    def __hash__(self):
        return id(self)


VariableV1 = Variable
RefVariable = Variable


def _install_variable_operators():
    for name in _TENSOR_OPERATORS:
        setattr(
            Variable,
            name,
            (lambda n: lambda self, *args: _TENSOR_OPERATORS[n](self._snapshot, *args))(name),
        )


# ---------------------------------------------------------------------------- module functions
def assign(ref, value, validate_shape=None, use_locking=None, name=None):
    return ref.assign(value, name=name)


def assign_add(ref, value, use_locking=None, name=None):
    return ref.assign_add(value, name=name)


def assign_sub(ref, value, use_locking=None, name=None):
    return ref.assign_sub(value, name=name)


def scatter_update(ref, indices, updates, use_locking=True, name=None):
    return ref.scatter_update(indices=indices, updates=updates, name=name)


def scatter_add(ref, indices, updates, use_locking=False, name=None):
    return ref.scatter_add(indices, updates, name=name)


def scatter_sub(ref, indices, updates, use_locking=False, name=None):
    return ref.scatter_sub(indices, updates, name=name)


def count_up_to(ref, limit, name=None):
    """Increments `ref` and returns its old value; raises `OutOfRangeError` at `limit`."""
    from keratron.compat.v1 import errors

    def lower(ctx, _unused=None):
        storage = ctx.read(ref)

        def check(value):
            if int(value._value.reshape(-1)[0]) >= limit:
                raise errors.OutOfRangeError(None, None, f"Reached limit of {limit}")

        ctx.effect(check, [storage])
        old = storage + 0
        ctx.assign(ref, storage + 1, "assign")
        return old

    with op_scope(name, "CountUpTo") as scope:
        return make_op("CountUpTo", scope, [], lower, [(ref.shape, ref.dtype)]).outputs[0]


def global_variables(scope=None) -> list:
    return get_default_graph().get_collection(GraphKeys.GLOBAL_VARIABLES, scope)


all_variables = global_variables


def trainable_variables(scope=None) -> list:
    return get_default_graph().get_collection(GraphKeys.TRAINABLE_VARIABLES, scope)


def local_variables(scope=None) -> list:
    return get_default_graph().get_collection(GraphKeys.LOCAL_VARIABLES, scope)


def model_variables(scope=None) -> list:
    return get_default_graph().get_collection(GraphKeys.MODEL_VARIABLES, scope)


def group(*inputs, name=None):
    """A `NoOp` that runs all of `inputs` (operations or tensors) when it runs."""
    g = get_default_graph()
    flat = []
    for x in inputs:
        flat.extend(x if isinstance(x, (list, tuple)) else [x])
    with g.control_dependencies(flat), op_scope(name, "group_deps") as scope:
        return make_op("NoOp", scope, [], lambda ctx: None, out_specs=[])


def no_op(name=None):
    with op_scope(name, "NoOp") as scope:
        return make_op("NoOp", scope, [], lambda ctx: None, out_specs=[])


def variables_initializer(var_list, name="init"):
    if not var_list:
        return no_op(name=name)
    return group(*[v.initializer for v in var_list], name=name)


def global_variables_initializer():
    return variables_initializer(global_variables())


initialize_all_variables = global_variables_initializer


def local_variables_initializer():
    return variables_initializer(local_variables(), name="init")


initialize_local_variables = local_variables_initializer


def tables_initializer(name="init_all_tables"):
    return no_op(name=name)


def is_variable_initialized(variable):
    def lower(ctx):
        from keratron.autodiff.tensor import convert_to_tensor as k_convert

        return k_convert(np.array(ctx.is_initialized(variable)))

    with op_scope(None, "IsVariableInitialized") as scope:
        return make_op("IsVariableInitialized", scope, [], lower, [((), "bool")]).outputs[0]


def report_uninitialized_variables(var_list=None, name="report_uninitialized_variables"):
    raise NotImplementedError("report_uninitialized_variables (string tensors) is not supported.")


# ---------------------------------------------------------------------------- initializers
class Initializer:
    """A TF1 initializer: `init(shape, dtype)` adds the ops computing an initial value."""

    def __init__(self, dtype="float32"):
        self.dtype = as_dtype(dtype)

    def _dt(self, dtype):
        return as_dtype(dtype) if dtype is not None else self.dtype

    def get_config(self) -> dict:
        return {}


class zeros_initializer(Initializer):  # noqa: N801
    def __call__(self, shape, dtype=None, partition_info=None):
        return array_ops.zeros(shape, self._dt(dtype))


class ones_initializer(Initializer):  # noqa: N801
    def __call__(self, shape, dtype=None, partition_info=None):
        return array_ops.ones(shape, self._dt(dtype))


class constant_initializer(Initializer):  # noqa: N801
    def __init__(self, value=0, dtype="float32", verify_shape=False):
        super().__init__(dtype)
        self.value = value

    def __call__(self, shape, dtype=None, partition_info=None):
        return array_ops.constant(self.value, dtype=self._dt(dtype), shape=shape)


class random_normal_initializer(Initializer):  # noqa: N801
    def __init__(self, mean=0.0, stddev=1.0, seed=None, dtype="float32"):
        super().__init__(dtype)
        self.mean, self.stddev, self.seed = mean, stddev, seed

    def __call__(self, shape, dtype=None, partition_info=None):
        return array_ops.random_normal(shape, self.mean, self.stddev, self._dt(dtype), self.seed)


class truncated_normal_initializer(random_normal_initializer):  # noqa: N801
    def __call__(self, shape, dtype=None, partition_info=None):
        return array_ops.truncated_normal(shape, self.mean, self.stddev, self._dt(dtype), self.seed)


class random_uniform_initializer(Initializer):  # noqa: N801
    def __init__(self, minval=0.0, maxval=None, seed=None, dtype="float32"):
        super().__init__(dtype)
        self.minval, self.maxval, self.seed = minval, maxval, seed

    def __call__(self, shape, dtype=None, partition_info=None):
        return array_ops.random_uniform(shape, self.minval, self.maxval, self._dt(dtype), self.seed)


class variance_scaling_initializer(Initializer):  # noqa: N801
    def __init__(self, scale=1.0, mode="fan_in", distribution="truncated_normal", seed=None,
                 dtype="float32"):  # fmt: skip
        super().__init__(dtype)
        self.scale, self.mode, self.distribution, self.seed = scale, mode, distribution, seed

    def __call__(self, shape, dtype=None, partition_info=None):
        shape = [int(d) for d in shape]
        if len(shape) < 1:
            fan_in = fan_out = 1
        elif len(shape) == 1:
            fan_in = fan_out = shape[0]
        else:
            receptive = int(np.prod(shape[:-2])) if len(shape) > 2 else 1
            fan_in, fan_out = shape[-2] * receptive, shape[-1] * receptive
        n = {"fan_in": fan_in, "fan_out": fan_out, "fan_avg": (fan_in + fan_out) / 2.0}[self.mode]
        scale = self.scale / max(1.0, n)
        dt = self._dt(dtype)
        if self.distribution in ("normal", "truncated_normal"):
            std = math.sqrt(scale) / 0.87962566103423978
            return array_ops.truncated_normal(shape, 0.0, std, dt, self.seed)
        if self.distribution == "untruncated_normal":
            return array_ops.random_normal(shape, 0.0, math.sqrt(scale), dt, self.seed)
        limit = math.sqrt(3.0 * scale)
        return array_ops.random_uniform(shape, -limit, limit, dt, self.seed)


class glorot_uniform_initializer(variance_scaling_initializer):  # noqa: N801
    def __init__(self, seed=None, dtype="float32"):
        super().__init__(1.0, "fan_avg", "uniform", seed, dtype)


class glorot_normal_initializer(variance_scaling_initializer):  # noqa: N801
    def __init__(self, seed=None, dtype="float32"):
        super().__init__(1.0, "fan_avg", "truncated_normal", seed, dtype)


# ---------------------------------------------------------------------------- variable scopes
AUTO_REUSE = "AUTO_REUSE"


class VariableScope:
    """A `variable_scope`'s settings: its name, reuse flag and default initializer."""

    def __init__(self, reuse, name="", initializer=None, regularizer=None, dtype="float32",
                 name_scope="", custom_getter=None):  # fmt: skip
        self.name = name
        self._reuse = reuse
        self.initializer = initializer
        self.regularizer = regularizer
        self.dtype = as_dtype(dtype)
        self.original_name_scope = name_scope
        self.custom_getter = custom_getter

    @property
    def reuse(self):
        return self._reuse

    def reuse_variables(self) -> None:
        self._reuse = True

    def set_initializer(self, initializer) -> None:
        self.initializer = initializer

    def get_variable(self, name, *args, **kwargs):
        return get_variable(name, *args, **kwargs)


class _Store:
    def __init__(self):
        self.vars: dict[str, Variable] = {}
        self.scope_counts: dict[str, int] = {}


def _store(g) -> _Store:
    if g._var_store is None:
        g._var_store = _Store()
    return g._var_store


def get_variable_scope() -> VariableScope:
    g = get_default_graph()
    return g._var_scope_stack[-1] if g._var_scope_stack else VariableScope(False)


@contextlib.contextmanager
def variable_scope(name_or_scope=None, default_name=None, values=None, initializer=None,
                   regularizer=None, caching_device=None, partitioner=None, custom_getter=None,
                   reuse=None, dtype=None, use_resource=None, constraint=None,
                   auxiliary_name_scope=True):  # fmt: skip
    """`tf.variable_scope`: prefixes `get_variable` names, sets reuse and default initializers,
    and opens a name scope of the same name for the ops created inside."""
    g = get_default_graph()
    parent = get_variable_scope()
    store = _store(g)
    if name_or_scope is None and default_name is None:
        raise TypeError("If default_name is None then name_or_scope is required")
    if isinstance(name_or_scope, VariableScope):
        full = name_or_scope.name
        ns_name = name_or_scope.original_name_scope or full + "/"
        base = name_or_scope
    else:
        if name_or_scope is not None:
            short = name_or_scope
        else:
            key = (parent.name + "/" if parent.name else "") + default_name
            n = store.scope_counts.get(key, 0)
            short = default_name if n == 0 else f"{default_name}_{n}"
        full = (parent.name + "/" if parent.name else "") + short
        store.scope_counts[full] = store.scope_counts.get(full, 0) + 1
        ns_name = short
        base = parent
    # Re-entering a scope restarts its sub-scopes' default names (TF's
    # close_variable_subscopes), so `tf.layers.dense` in a reused scope finds `dense` again.
    for key in store.scope_counts:
        if key.startswith(full + "/"):
            store.scope_counts[key] = 0
    if reuse is None or reuse is False:
        reuse_flag = parent.reuse if reuse is None else False
        if isinstance(name_or_scope, VariableScope) and reuse is None:
            reuse_flag = name_or_scope.reuse or parent.reuse
    else:
        reuse_flag = reuse
    if parent.reuse is True and reuse_flag is not AUTO_REUSE:
        reuse_flag = True
    scope = VariableScope(
        reuse_flag,
        full,
        initializer if initializer is not None else base.initializer,
        regularizer if regularizer is not None else base.regularizer,
        dtype if dtype is not None else base.dtype,
        custom_getter=custom_getter if custom_getter is not None else base.custom_getter,
    )
    ctx = g.name_scope(ns_name) if auxiliary_name_scope else contextlib.nullcontext("")
    with ctx as ns:
        if not scope.original_name_scope:
            scope.original_name_scope = ns
        g._var_scope_stack.append(scope)
        try:
            yield scope
        finally:
            g._var_scope_stack.pop()


def get_variable(name, shape=None, dtype=None, initializer=None, regularizer=None,
                 trainable=None, collections=None, caching_device=None, partitioner=None,
                 validate_shape=True, use_resource=None, custom_getter=None, constraint=None,
                 synchronization=None, aggregation=None):  # fmt: skip
    """`tf.get_variable`: the variable `<scope>/<name>`, created, or reused under
    `reuse=True` / `AUTO_REUSE`.

    Raises:
        ValueError: if the variable exists and the scope does not reuse, or does not exist
            and the scope reuses (`reuse=True`), or its shape differs from `shape`.
    """
    g = get_default_graph()
    scope = get_variable_scope()
    store = _store(g)
    full = (scope.name + "/" if scope.name else "") + name
    reuse = scope.reuse
    existing = store.vars.get(full)
    if existing is not None:
        if reuse is False or reuse is None:
            raise ValueError(
                f"Variable {full} already exists, disallowed. Did you mean to set reuse=True "
                "or reuse=tf.AUTO_REUSE in VarScope?"
            )
        if shape is not None and not existing.shape.is_compatible_with(shape):
            raise ValueError(
                f"Trying to share variable {full}, but specified shape {TensorShape(shape)} "
                f"and found shape {existing.shape}."
            )
        return existing
    if reuse is True:
        raise ValueError(
            f"Variable {full} does not exist, or was not created with tf.get_variable(). Did "
            "you mean to set reuse=tf.AUTO_REUSE in VarScope?"
        )
    dt = as_dtype(dtype) if dtype is not None else scope.dtype
    if initializer is None:
        initializer = scope.initializer
    if initializer is None:
        initializer = glorot_uniform_initializer() if dt.is_floating else zeros_initializer()
    if isinstance(initializer, type):
        initializer = initializer()
    if callable(initializer):
        if shape is None:
            raise ValueError(f"Shape of a new variable ({full}) must be fully defined.")
        init_value = lambda: initializer(shape, dtype=dt)  # noqa: E731
    else:
        init_value = initializer
    if trainable is None:
        trainable = True
    saved = g._name_stack
    g._name_stack = ""  # get_variable names ignore name_scope; only variable_scope counts
    try:
        v = Variable(init_value, trainable=trainable, collections=collections, name=full, dtype=dt)
    finally:
        g._name_stack = saved
    store.vars[full] = v
    regularizer = regularizer if regularizer is not None else scope.regularizer
    if regularizer is not None:
        loss = regularizer(v)
        if loss is not None:
            g.add_to_collection(GraphKeys.REGULARIZATION_LOSSES, loss)
    return v


def make_template(name_, func_, create_scope_now_=False, unique_name_=None, **kwargs):
    """A callable that runs `func_` in one variable scope, creating variables on the first
    call and reusing them on later calls."""
    state = {"scope": None}

    def template(*args, **kw):
        if state["scope"] is None:
            with variable_scope(unique_name_, default_name=name_) as vs:
                state["scope"] = vs
                return func_(*args, **kwargs, **kw)
        with variable_scope(state["scope"], reuse=True):
            return func_(*args, **kwargs, **kw)

    return template
