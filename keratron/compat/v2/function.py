"""`tf.function` and `tf.custom_gradient` over keratron's tracing and autodiff.

`tf.function` is `keratron.function` (trace, optimise, replay), with one difference that TF's
AutoGraph makes visible: a Python `if`/`while`/`for` on a tensor's value, which AutoGraph turns
into graph control flow, cannot be traced by keratron; such a function then runs its Python
body eagerly on every call, which gives the values TF's converted graph gives.

`tf.custom_gradient` follows TF's eager decorator: every positional argument is an input
(Python numbers included, so `grad_fn` returns one gradient per argument), and trainable
variables read by the function but not passed to it are handed to `grad_fn(*dys, variables=)`,
which then returns `(input_grads, variable_grads)`.
"""

from __future__ import annotations

import functools
import inspect

from keratron import ops as kops
from keratron.autodiff import Tensor, convert_to_tensor, tree
from keratron.autodiff.function import Function as _KFunction
from keratron.autodiff.tape import GradientTape, record_custom, stop_recording_all
from keratron.autodiff.tracing import is_tracing

__all__ = ["Function", "custom_gradient", "function"]

# What keratron raises when traced code needs a tensor's value (tensor.py: check_concrete).
_VALUE_DEPENDENT = "its value is not known while the function is traced"


class Function(_KFunction):
    """A `tf.function`: traced and compiled, or run eagerly if its Python control flow
    depends on tensor values (see the module docstring)."""

    def __init__(self, fn, input_signature=None, autograph=True):
        super().__init__(fn, input_signature=input_signature)
        self.autograph = autograph
        self.runs_eagerly = False

    def __get__(self, obj, objtype=None):
        if obj is None:
            return self
        bound = super().__get__(obj, objtype)  # keratron's per-instance copy, held weakly
        tf_bound = bound.__dict__.get("_tf_function")
        if tf_bound is None:
            tf_bound = Function(bound._fn, self.input_signature, self.autograph)
            bound._tf_function = tf_bound
        return tf_bound

    def __call__(self, *args, **kwargs):
        if not self.runs_eagerly:
            try:
                return super().__call__(*args, **kwargs)
            except TypeError as e:
                # Without AutoGraph, TF raises for such control flow too.
                if not self.autograph or is_tracing() or _VALUE_DEPENDENT not in str(e):
                    raise
                self.runs_eagerly = True
        if self.input_signature is not None:
            args, kwargs = self._conform(args, kwargs)
        return self._fn(*args, **kwargs)


def function(
    func=None,
    input_signature=None,
    autograph=True,
    jit_compile=None,
    reduce_retracing=False,
    experimental_implements=None,
    experimental_autograph_options=None,
    experimental_attributes=None,
    experimental_relax_shapes=None,
    experimental_compile=None,
    experimental_follow_type_hints=None,
):
    """`tf.function`: compiles `func` into a graph (as a decorator, with or without arguments).

    `reduce_retracing` and the `experimental_*` options are accepted and have no effect;
    `autograph=False` makes value-dependent Python control flow raise, as in TF.

    Example:
        >>> import keratron.compat.v2 as tf
        >>> @tf.function
        ... def f(x):
        ...     return x * x if x > 0 else -x
        >>> int(f(tf.constant(3))), int(f(tf.constant(-2)))
        (9, 2)
    """
    if jit_compile or experimental_compile:
        raise ValueError(
            "tf.function: jit_compile=True (XLA) is not supported; keratron compiles every "
            f"function already. Received: jit_compile={jit_compile or experimental_compile!r}"
        )

    def decorate(fn):
        return functools.update_wrapper(Function(fn, input_signature, autograph), fn)

    return decorate if func is None else decorate(func)


def _takes_variables(fn) -> bool:
    try:
        spec = inspect.getfullargspec(fn)
    except TypeError:
        return False
    return "variables" in spec.args or "variables" in spec.kwonlyargs or bool(spec.varkw)


def custom_gradient(f=None):
    """`tf.custom_gradient`: `f(*args)` returns `(y, grad_fn)`; gradients through `y` are
    `grad_fn(*dys)`, one per positional argument of `f` (None for no gradient).

    Example:
        >>> import keratron.compat.v2 as tf
        >>> @tf.custom_gradient
        ... def log1pexp(x):
        ...     e = tf.exp(x)
        ...     return tf.math.log(1 + e), lambda dy: dy * (1 - 1 / (1 + e))
        >>> x = tf.Variable(100.0)
        >>> with tf.GradientTape() as tape:
        ...     y = log1pexp(x)
        >>> float(tape.gradient(y, x))
        1.0
    """
    if f is None:
        return custom_gradient

    @functools.wraps(f)
    def wrapped(*args, **kwargs):
        # The forward pass is hidden from every tape; a tape of our own sees which trainable
        # variables it reads (TF's VariableWatcher).
        with stop_recording_all(), GradientTape() as watcher:
            result, grad_fn = f(*args, **kwargs)
        flat_args = tree.flatten(list(args))
        inputs = [a if isinstance(a, Tensor) else convert_to_tensor(a) for a in flat_args]
        variables = [v for v in watcher.watched_variables() if all(v is not a for a in flat_args)]
        if variables and not _takes_variables(grad_fn):
            raise TypeError(
                "@tf.custom_gradient grad_fn must accept keyword argument 'variables', since "
                f"function uses variables: {[v.name for v in variables]}"
            )
        flat_result = tree.flatten(result)
        taken = {id(x) for x in inputs + variables}
        # TF returns identities of the results: a result that is an input is a new tensor.
        with stop_recording_all():
            outputs = [
                kops.copy(o) if isinstance(o, Tensor) and id(o) in taken else o for o in flat_result
            ]
        tensors = [o for o in outputs if isinstance(o, Tensor)]

        def vjp(gs):
            gs = [kops.zeros_like(o) if g is None else g for g, o in zip(gs, tensors)]
            if variables:
                input_grads, variable_grads = grad_fn(*gs, variables=variables)
                variable_grads = list(variable_grads)
                if len(variable_grads) != len(variables):
                    raise ValueError(
                        "Must return gradient for each variable from @custom_gradient grad_fn."
                    )
            else:
                input_grads, variable_grads = grad_fn(*gs), []
            input_grads = tree.flatten(input_grads)
            if len(input_grads) != len(inputs):
                raise ValueError(
                    f"custom_gradient function expected to return {len(inputs)} gradients, but "
                    f"returned {len(input_grads)} instead."
                )
            return [
                None if g is None else convert_to_tensor(g) for g in input_grads + variable_grads
            ]

        record_custom(inputs + variables, tensors, vjp)
        return tree.pack_sequence_as(result, outputs)

    return wrapped
