"""`tf.train.ExponentialMovingAverage` (TF1): shadow variables that follow variables or
tensors, `shadow -= (1 - decay) * (shadow - value)` each time the `apply` op runs.

Example:
    >>> import keratron.compat.v1 as tf
    >>> with tf.Graph().as_default(), tf.Session() as sess:
    ...     v = tf.Variable(10.0)
    ...     ema = tf.train.ExponentialMovingAverage(0.5)
    ...     update = ema.apply([v])
    ...     sess.run(tf.global_variables_initializer())
    ...     _ = sess.run(tf.assign(v, 20.0))
    ...     sess.run(update)
    ...     print(sess.run(ema.average(v)))
    15.0
"""

from __future__ import annotations

from keratron.compat.v1 import array_ops, math_ops
from keratron.compat.v1 import variables as variables_lib
from keratron.compat.v1.framework import (
    GraphKeys,
    Tensor,
    add_to_collection,
    convert_to_tensor,
    get_default_graph,
    make_op,
    op_scope,
)

__all__ = ["ExponentialMovingAverage", "assign_moving_average"]


def assign_moving_average(variable, value, decay, zero_debias=False, name=None):
    """An op that sets `variable -= (1 - decay) * (variable - value)`; returns its new value.

    Raises:
        ValueError: `zero_debias=True` (not supported).
    """
    if zero_debias:
        raise ValueError("assign_moving_average: zero_debias=True is not supported.")

    def lower(ctx, v, d):
        current = ctx.read(variable)
        return ctx.assign(variable, current - (current - v) * (1.0 - d), "assign")

    with op_scope(name, "AssignMovingAvg") as scope:
        v = convert_to_tensor(value, dtype=variable.dtype)
        d = convert_to_tensor(decay, dtype=variable.dtype)
        spec = [(variable.shape, variable.dtype)]
        return make_op("AssignSub", scope, [v, d], lower, spec).outputs[0]


class ExponentialMovingAverage:
    """Moving averages of variables and tensors.

    Args:
        decay: the decay (0.999, 0.9999, ...).
        num_updates: if given (a step count, e.g. the global step), the decay used is
            `min(decay, (1 + num_updates) / (10 + num_updates))`.
        zero_debias: not supported (must be False).
        name: the shadow variables' suffix (`<var>/<name>`) and the update op's name.
    """

    def __init__(self, decay, num_updates=None, zero_debias=False,
                 name="ExponentialMovingAverage"):  # fmt: skip
        if zero_debias:
            raise ValueError("ExponentialMovingAverage: zero_debias=True is not supported.")
        self._decay = decay
        self._num_updates = num_updates
        self._name = name
        self._averages: dict = {}

    @property
    def name(self) -> str:
        return self._name

    def _shadow(self, var):
        g = get_default_graph()
        is_variable = isinstance(var, variables_lib.Variable)
        name = f"{var.op.name}/{self._name}"
        saved = g._name_stack
        g._name_stack = ""  # shadow names are absolute: "<var>/<name>"
        try:
            with g.control_dependencies(None):
                if is_variable:
                    init = var.initialized_value()
                else:
                    init = array_ops.zeros(var.shape.as_list(), var.dtype)
                return variables_lib.Variable(init, trainable=False, name=name)
        finally:
            g._name_stack = saved

    def apply(self, var_list=None):
        """Creates the shadow variables of `var_list` (variables or tensors) on first use and
        returns an op that updates all of them.

        Raises:
            TypeError: an element is not floating point.
            ValueError: an element already has a moving average here.
        """
        if var_list is None:
            var_list = variables_lib.trainable_variables()
        var_list = list(var_list)
        for var in var_list:
            if not var.dtype.is_floating:
                raise TypeError(
                    "ExponentialMovingAverage: the variables must be float16, float32 or float64. "
                    f"Received: {var.name} of type {var.dtype.name}"
                )
            if var in self._averages:
                raise ValueError(f"Moving average already computed for: {var.name}")
            if isinstance(var, Tensor) and not var.shape.is_fully_defined():
                raise ValueError(
                    f"ExponentialMovingAverage: {var.name} needs a fully defined shape. "
                    f"Received: {var.shape}"
                )
            self._averages[var] = self._shadow(var)
            if isinstance(var, variables_lib.Variable):
                add_to_collection(GraphKeys.MOVING_AVERAGE_VARIABLES, var)
        g = get_default_graph()
        with g.name_scope(self._name) as scope:
            decay = convert_to_tensor(self._decay, dtype="float32", name="decay")
            if self._num_updates is not None:
                n = math_ops.cast(self._num_updates, "float32", name="num_updates")
                decay = math_ops.minimum(decay, (1.0 + n) / (10.0 + n))
            updates = [
                assign_moving_average(self._averages[v], v, math_ops.cast(decay, v.dtype))
                for v in var_list
            ]
            return variables_lib.group(*updates, name=scope)

    def average(self, var):
        """The shadow variable of `var` (None if `apply` has not been given it)."""
        return self._averages.get(var)

    def average_name(self, var) -> str:
        """The shadow variable's name for `var` (`<var op name>/<name>`)."""
        return f"{var.op.name}/{self._name}"

    def variables_to_restore(self, moving_avg_variables=None) -> dict:
        """A Saver `var_list` that loads the averages into the variables they follow."""
        if moving_avg_variables is None:
            moving_avg_variables = variables_lib.trainable_variables()
            moving_avg_variables += variables_lib.model_variables()
        averaged = set(moving_avg_variables)
        out = {}
        for v in averaged:
            out[self.average_name(v)] = v
        for v in variables_lib.global_variables():
            if v not in averaged and v.op.name not in out:
                out[v.op.name] = v
        return out
