"""The `Layer` base class: config in `__init__`, weights in `build`, computation in `call`.

`Layer.__call__` is the one place that (1) converts array inputs, (2) checks `input_spec`,
(3) builds on first call, (4) resolves `training` and the input mask, (5) records a
functional-graph node when called on symbolic `KerasTensor`s, and (6) attaches the output
mask and activity-regularization loss.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import threading

import numpy as np
import torch

from keratron.autodiff import tree
from keratron.autodiff.dtypes import standardize_dtype
from keratron.autodiff.remat import get_current_remat_mode, rematerialized_call
from keratron.autodiff.tensor import (
    Tensor,
    Variable,
    autocast_dtype,
    autocast_scope,
    convert_to_tensor,
)
from keratron.config import floatx
from keratron.layers.node import KerasTensor, Node
from keratron.mixed_precision import policy as dtype_policies
from keratron.utils.naming import to_snake_case, unique_object_name

__all__ = ["Layer", "InputSpec", "TensorOpLayer"]

# The keywords Layer accepts beyond its named arguments (tf.keras's input-shape keywords).
ALLOWED_KWARGS = frozenset(
    {"input_shape", "input_dim", "batch_input_shape", "batch_size", "weights"}
)


class InputSpec:
    """Constraints a layer places on its inputs: dtype, ndim, min/max ndim, shape, axis sizes."""

    def __init__(
        self,
        dtype=None,
        shape=None,
        ndim=None,
        max_ndim=None,
        min_ndim=None,
        axes=None,
        allow_last_axis_squeeze=False,
        name=None,
        optional=False,
    ):
        self.dtype = standardize_dtype(dtype) if dtype is not None else None
        self.shape = tuple(shape) if shape is not None else None
        self.ndim = len(shape) if shape is not None else ndim
        self.max_ndim = max_ndim
        self.min_ndim = min_ndim
        self.axes = {int(k): v for k, v in (axes or {}).items()}
        self.allow_last_axis_squeeze = allow_last_axis_squeeze
        self.name = name
        self.optional = optional

    def __repr__(self):
        parts = [
            f"{k}={v}"
            for k, v in [
                ("dtype", self.dtype),
                ("shape", self.shape),
                ("ndim", self.ndim),
                ("max_ndim", self.max_ndim),
                ("min_ndim", self.min_ndim),
                ("axes", self.axes or None),
            ]
            if v is not None
        ]
        return f"InputSpec({', '.join(parts)})"

    def get_config(self):
        return {
            "dtype": self.dtype,
            "shape": self.shape,
            "ndim": self.ndim,
            "max_ndim": self.max_ndim,
            "min_ndim": self.min_ndim,
            "axes": self.axes,
        }


def who(cls_name: str, kwargs: dict) -> str:
    """How an error names a layer being constructed, before it has its auto-generated name:
    "Dense layer 'head'" with a `name` keyword, else "Dense layer"."""
    name = kwargs.get("name")
    return f"{cls_name} layer '{name}'" if name else f"{cls_name} layer"


def int_tuple(value, n: int, arg: str, who: str, allow_zero: bool = False) -> tuple:
    """An int or n ints -> a tuple of n ints, each positive (or >= 0 with `allow_zero`), as
    Keras's `standardize_tuple` checks layer arguments such as `strides` or `cropping`."""
    lowest = 0 if allow_zero else 1
    what = "non-negative" if allow_zero else "positive"
    values = value
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        values = (int(value),) * n
    try:
        ok = len(values) == n and all(
            isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in values
        )
    except TypeError:
        ok = False
    if not ok or any(v < lowest for v in values):
        raise ValueError(
            f"{who}: argument `{arg}` must be a {what} int or a tuple of {n} {what} ints. "
            f"Received: {arg}={value!r}"
        )
    return tuple(int(v) for v in values)


def _check_input_spec(specs, inputs, layer_name):
    if specs is None:
        return
    specs = tree.flatten(specs)
    flat = tree.flatten(inputs)
    if len(flat) != len(specs):
        raise ValueError(
            f"Layer '{layer_name}' expects {len(specs)} input(s), but it received "
            f"{len(flat)} input tensors."
        )
    for i, (spec, x) in enumerate(zip(specs, flat)):
        if spec is None or x is None:
            continue
        shape = tuple(x.shape)
        ndim = len(shape)
        if spec.ndim is not None and not spec.allow_last_axis_squeeze and ndim != spec.ndim:
            raise ValueError(
                f"Input {i} of layer '{layer_name}' is incompatible with the layer: expected "
                f"ndim={spec.ndim}, found ndim={ndim}. Full shape received: {shape}"
            )
        if spec.max_ndim is not None and ndim > spec.max_ndim:
            raise ValueError(
                f"Input {i} of layer '{layer_name}' is incompatible with the layer: expected "
                f"max_ndim={spec.max_ndim}, found ndim={ndim}. Full shape received: {shape}"
            )
        if spec.min_ndim is not None and ndim < spec.min_ndim:
            raise ValueError(
                f"Input {i} of layer '{layer_name}' is incompatible with the layer: expected "
                f"min_ndim={spec.min_ndim}, found ndim={ndim}. Full shape received: {shape}"
            )
        if spec.dtype is not None and x.dtype != spec.dtype:
            raise ValueError(
                f"Input {i} of layer '{layer_name}' is incompatible with the layer: expected "
                f"dtype={spec.dtype}, found dtype={x.dtype}"
            )
        for axis, value in spec.axes.items():
            if value is None:
                continue
            a = axis if axis >= 0 else ndim + axis
            if not 0 <= a < ndim or shape[a] not in (value, None):
                raise ValueError(
                    f"Input {i} of layer '{layer_name}' is incompatible with the layer: expected "
                    f"axis {axis} of input shape to have value {value}, but received input "
                    f"with shape {shape}"
                )
        if spec.shape is not None:
            for want, got in zip(spec.shape, shape):
                if want is not None and got is not None and want != got:
                    raise ValueError(
                        f"Input {i} of layer '{layer_name}' is incompatible with the layer: "
                        f"expected shape={spec.shape}, found shape={shape}"
                    )


class _CallContext(threading.local):
    def __init__(self):
        self.entry = None  # the outermost layer being called
        self.training = None


_ctx = _CallContext()


class _NameScopes(threading.local):
    def __init__(self):
        self.stack: list = []  # (layer name, layer), outermost first


_scopes = _NameScopes()


_NO_SCOPE = contextlib.nullcontext()


class _LayerScope:
    """Opens `layer`'s name scope, as Keras does around a layer's build, call and weight
    creation: variables created inside are named `"<outer>/<layer>/<variable>"`. A layer
    already at the top of the stack (its build calling `super().build`, a weight created
    in its own build) does not open it again."""

    __slots__ = ("layer", "pushed")

    def __init__(self, layer):
        self.layer = layer

    def __enter__(self):
        stack = _scopes.stack
        self.pushed = not (stack and stack[-1][1] is self.layer)
        if self.pushed:
            stack.append((self.layer.name, self.layer))

    def __exit__(self, *exc):
        if self.pushed:
            _scopes.stack.pop()


def current_path() -> str:
    """The open layer name scopes, outermost first, joined by "/"."""
    return "/".join(name for name, _ in _scopes.stack)


def _scoped_build(build):
    """Wraps a `build` method so it runs in the layer's name scope; the first build fixes the
    layer's `path` (the scopes open around it, its own name last)."""
    if getattr(build, "_scoped", False):
        return build

    @functools.wraps(build)
    def scoped(self, *args, **kwargs):
        with _LayerScope(self):
            if getattr(self, "_path", None) is None:
                self._path = current_path()
            return build(self, *args, **kwargs)

    scoped._scoped = True
    return scoped


def _signature_params(fn) -> dict:
    try:
        return dict(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return {}


def _is_array(x) -> bool:
    return isinstance(x, (np.ndarray, torch.Tensor, np.generic))


class Layer:
    """Base class of every layer (Keras's `keras.layers.Layer`).

    Subclasses set config in `__init__`, create weights with `add_weight` in `build`, and
    compute in `call(inputs, training=None, mask=None)`.

    Example:
        >>> class Scale(keratron.layers.Layer):
        ...     def build(self, input_shape):
        ...         self.w = self.add_weight(shape=(input_shape[-1],), initializer="ones")
        ...     def call(self, x):
        ...         return x * self.w
    """

    def __init__(
        self,
        *,
        activity_regularizer=None,
        trainable=True,
        dtype=None,
        autocast=True,
        name=None,
        **kwargs,
    ):
        unknown = set(kwargs) - ALLOWED_KWARGS
        if unknown:
            raise TypeError(
                f"Unrecognized keyword arguments passed to {type(self).__name__}: "
                f"{ {k: kwargs[k] for k in sorted(unknown)} }"
            )
        from keratron.layers import regularizers

        self._init_tracking()
        self.name = name or unique_object_name(to_snake_case(type(self).__name__))
        if not isinstance(self.name, str) or "/" in self.name:
            raise ValueError(
                f"Argument `name` must be a string and cannot contain '/'. Received: name={name!r}"
            )
        self._trainable = bool(trainable)
        # A policy given, else the global one if set; None follows floatx().
        self._dtype = (
            dtype_policies.get(dtype)
            if dtype is not None
            else dtype_policies.explicit_global_policy()
        )
        self.autocast = autocast
        self.activity_regularizer = regularizers.get(activity_regularizer)
        self.built = False
        self.input_spec = None
        self.supports_masking = getattr(self, "supports_masking", False)
        self._call_params = _signature_params(self.call)
        input_shape = kwargs.get("input_shape")
        if kwargs.get("input_dim") is not None:
            input_shape = (kwargs["input_dim"],)
        batch_shape = kwargs.get("batch_input_shape")
        if batch_shape is None and input_shape is not None:
            batch_shape = (kwargs.get("batch_size"),) + tuple(input_shape)
        self._batch_input_shape_arg = tuple(batch_shape) if batch_shape is not None else None
        self._initial_weights = kwargs.get("weights")
        # The RematScope around the layer's construction decides whether its calls
        # rematerialise (as in Keras, where Operation.__init__ reads it).
        self._remat_mode = get_current_remat_mode()

    def _init_tracking(self):
        d = self.__dict__
        d.setdefault("_layers", [])
        d.setdefault("_trainable_variables", [])
        d.setdefault("_non_trainable_variables", [])
        d.setdefault("_losses", [])
        d.setdefault("_inbound_nodes", [])
        d.setdefault("_outbound_nodes", [])
        d.setdefault("_build_shapes", None)

    def __setattr__(self, name, value):
        if not name.startswith("_"):
            self._init_tracking()
            if isinstance(value, Layer) and value is not self:
                if not any(value is x for x in self._layers):
                    self._layers.append(value)
            elif (
                isinstance(value, (list, tuple))
                and value
                and all(isinstance(v, Layer) for v in value)
            ):
                for v in value:
                    if not any(v is x for x in self._layers):
                        self._layers.append(v)
            elif isinstance(value, Variable):
                self._track_variable(value)
        object.__setattr__(self, name, value)

    def _track_variable(self, v):
        bucket = self._trainable_variables if v.trainable else self._non_trainable_variables
        if not any(v is w for w in self._trainable_variables + self._non_trainable_variables):
            bucket.append(v)

    # ----------------------------------------------------------------------- properties
    @property
    def dtype_policy(self) -> dtype_policies.DTypePolicy:
        """The layer's `DTypePolicy` (its `dtype=` argument, else the global policy)."""
        policy = self._dtype
        if isinstance(policy, dtype_policies.DTypePolicy):
            return policy
        return dtype_policies.DTypePolicy(policy or floatx())

    @dtype_policy.setter
    def dtype_policy(self, value):
        self._dtype = dtype_policies.get(value)

    @property
    def dtype(self) -> str:
        """The dtype of the layer's variables (as in Keras 3: `dtype_policy.variable_dtype`)."""
        return self.variable_dtype

    @property
    def compute_dtype(self) -> str:
        """The dtype the layer computes in: float inputs are cast to it."""
        policy = self._dtype
        if isinstance(policy, dtype_policies.DTypePolicy):
            return policy.compute_dtype
        return policy or floatx()

    @property
    def variable_dtype(self) -> str:
        """The dtype `add_weight` creates variables in."""
        policy = self._dtype
        if isinstance(policy, dtype_policies.DTypePolicy):
            return policy.variable_dtype
        return policy or floatx()

    def _autocast_scope(self):
        """Keras's rule for the variable autocast scope of this layer's call: opened when the
        policy is mixed, switched to this layer's compute dtype inside another layer's scope,
        and cleared for layers that do not autocast or compute in a non-float type."""
        current = autocast_dtype()
        compute = self.compute_dtype
        if current is not None:
            if not self.autocast or "float" not in compute:
                return autocast_scope(None)
            if current != compute:
                return autocast_scope(compute)
            return _NO_SCOPE
        if compute != self.variable_dtype and self.autocast and "float" in compute:
            return autocast_scope(compute)
        return _NO_SCOPE

    @property
    def path(self) -> str:
        """The layer's name after the names of the layers it was built inside (a Dense in a
        Sequential model: "sequential/dense"); its name until it is built."""
        path = getattr(self, "_path", None)
        return self.name if path is None else path

    @property
    def trainable(self) -> bool:
        return self._trainable

    @trainable.setter
    def trainable(self, value):
        value = bool(value)
        for layer in self._flatten_layers():
            layer._trainable = value
            # As in Keras: the flag reaches the variables, so a parent model's
            # trainable_weights (filtered by variable) leaves a frozen sublayer out.
            for v in layer._trainable_variables:
                v.trainable = value

    @property
    def layers(self) -> list:
        return list(self._layers)

    @property
    def weights(self) -> list:
        """Own trainable, own non-trainable, then each sublayer's weights (Keras 3 order)."""
        out, seen = [], set()
        for w in self._trainable_variables + self._non_trainable_variables:
            if id(w) not in seen:
                seen.add(id(w))
                out.append(w)
        for layer in self._layers:
            for w in layer.weights:
                if id(w) not in seen:
                    seen.add(id(w))
                    out.append(w)
        return out

    variables = weights

    @property
    def trainable_weights(self) -> list:
        if not self.trainable:
            return []
        return [w for w in self.weights if w.trainable]

    trainable_variables = trainable_weights

    @property
    def non_trainable_weights(self) -> list:
        if not self.trainable:
            return self.weights
        return [w for w in self.weights if not w.trainable]

    non_trainable_variables = non_trainable_weights

    def _flatten_layers(self, include_self=True, recursive=True):
        out = [self] if include_self else []
        for layer in self._layers:
            out.append(layer)
            if recursive:
                out.extend(layer._flatten_layers(include_self=False))
        seen, unique = set(), []
        for layer in out:
            if id(layer) not in seen:
                seen.add(id(layer))
                unique.append(layer)
        return unique

    # ----------------------------------------------------------------------- weights
    def add_weight(
        self,
        *args,
        shape=None,
        initializer=None,
        dtype=None,
        trainable=True,
        autocast=True,
        regularizer=None,
        constraint=None,
        aggregation="none",
        overwrite_with_gradient=False,
        name=None,
    ) -> Variable:
        """Creates a weight Variable owned by this layer (Keras's `add_weight`).

        Positional arguments are Keras 3's `(shape, initializer, dtype)`, or tf.keras 2's
        `(name, shape, dtype, initializer)` when the first is a string (the name), so that
        tf.keras code's `self.add_weight("kernel", shape=...)` runs unchanged.
        """
        from keratron.layers import constraints, initializers, regularizers

        if args:
            order = ("name", "shape", "dtype", "initializer")
            if not isinstance(args[0], str):
                order = ("shape", "initializer", "dtype")
            if len(args) > len(order):
                raise TypeError(
                    f"add_weight() takes at most {len(order)} positional arguments "
                    f"{order}. Received: {len(args)} positional arguments."
                )
            given = dict(shape=shape, initializer=initializer, dtype=dtype, name=name)
            for key, value in zip(order, args):
                if given[key] is not None:
                    raise TypeError(
                        f"add_weight(): `{key}` was passed both positionally and as a "
                        f"keyword argument. Received: {key}={value!r} and {key}={given[key]!r}"
                    )
                given[key] = value
            shape, initializer = given["shape"], given["initializer"]
            dtype, name = given["dtype"], given["name"]
        shape = () if shape is None else tuple(int(d) for d in shape)
        dtype = standardize_dtype(dtype or self.variable_dtype)
        if initializer is None:
            initializer = "glorot_uniform" if "float" in dtype else "zeros"
        init = initializers.get(initializer)
        v = Variable(
            init,
            shape=shape,
            dtype=dtype,
            trainable=trainable,
            autocast=autocast,
            aggregation=aggregation,
            name=name or unique_object_name("variable"),
            constraint=constraints.get(constraint),
            regularizer=regularizers.get(regularizer),
        )
        with _LayerScope(self):
            v.path = f"{current_path()}/{v.name}"
        v.overwrite_with_gradient = overwrite_with_gradient
        self._track_variable(v)
        return v

    def get_weights(self) -> list:
        """The weights' values as numpy arrays, in `weights` order."""
        return [w.numpy() for w in self.weights]

    def set_weights(self, weights) -> None:
        """Sets the weights from numpy arrays, in `weights` order; shapes must match."""
        params = self.weights
        weights = list(weights)
        if len(params) != len(weights):
            raise ValueError(
                f"Layer {self.name} weight shape mismatch: you called `set_weights(weights)` on "
                f"layer '{self.name}' with a weight list of length {len(weights)}, but the "
                f"layer was expecting {len(params)} weights."
            )
        for p, w in zip(params, weights):
            w = np.asarray(w)
            if tuple(p.shape) != tuple(w.shape):
                raise ValueError(
                    f"Layer {self.name} weight shape {p.shape} is not compatible with provided "
                    f"weight shape {w.shape} (weight '{p.path}')."
                )
        for p, w in zip(params, weights):
            p.assign(np.asarray(w))

    def count_params(self) -> int:
        if not self.built:
            raise ValueError(
                f"You tried to call `count_params` on layer '{self.name}', but the layer isn't "
                "built. You can build it manually via: `layer.build(input_shape)`."
            )
        return int(sum(int(np.prod(w.shape)) for w in self.weights))

    # ----------------------------------------------------------------------- losses
    def add_loss(self, loss) -> None:
        """Adds a loss tensor (e.g. an activity penalty) collected in `layer.losses`."""
        for x in tree.flatten(loss):
            self._losses.append(x if isinstance(x, Tensor) else convert_to_tensor(x))

    @property
    def losses(self) -> list:
        """Losses added during the last call, plus weight-regularization penalties."""
        out = []
        for layer in self._flatten_layers():
            out.extend(layer._losses)
        for w in self.weights:
            if w.regularizer is not None:
                out.append(w.regularizer(w))
        return out

    def _clear_losses(self):
        for layer in self._flatten_layers():
            layer._losses = []

    # ----------------------------------------------------------------------- build / call
    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "build" in cls.__dict__:
            cls.build = _scoped_build(cls.__dict__["build"])

    @_scoped_build
    def build(self, input_shape=None) -> None:
        """Creates the layer's weights. The default builds nothing."""
        self.built = True

    def call(self, inputs, *args, **kwargs):
        raise NotImplementedError(f"Layer {type(self).__name__} does not define call().")

    def compute_output_shape(self, *args, **kwargs):
        """Output shape(s) from input shape(s); the default runs `call` symbolically."""
        shapes = args[0] if args else next(iter(kwargs.values()))
        specs = tree.map_structure(
            lambda s: KerasTensor(s, self.compute_dtype, record_history=False), _shapes(shapes)
        )
        out = self.compute_output_spec(specs, **{k: v for k, v in kwargs.items() if False})
        return tree.map_structure(lambda t: t.shape, out)

    def compute_mask(self, inputs, previous_mask=None):
        """The output mask; by default the input mask passes through when masking is
        supported, else None."""
        if not self.supports_masking:
            return None
        return previous_mask

    def _maybe_build(self, args, kwargs):
        if self.built:
            return
        build_params = _signature_params(self.build)
        shape_args = [p for p in build_params if p.endswith("_shape")]
        if len(shape_args) > 1 or (shape_args and shape_args[0] != "input_shape"):
            call_names = list(self._call_params)
            shapes = {}
            for name in shape_args:
                base = name[: -len("_shape")]
                if base in kwargs:
                    shapes[name] = shapes_of(kwargs[base])
                elif base in call_names and call_names.index(base) < len(args):
                    shapes[name] = shapes_of(args[call_names.index(base)])
            self.build(**shapes)
            self._build_shapes = shapes
        else:
            first = args[0] if args else next(iter(kwargs.values()))
            shape = shapes_of(first)
            self.build(shape)
            self._build_shapes = {"input_shape": shape}
        self.built = True
        if self._initial_weights is not None:
            self.set_weights(self._initial_weights)
            self._initial_weights = None

    def __call__(self, *args, **kwargs):
        flat = tree.flatten([list(args), kwargs])
        if any(isinstance(x, KerasTensor) for x in flat):
            with _LayerScope(self), self._autocast_scope():
                return self._symbolic_call(args, kwargs)
        if not args and "inputs" not in kwargs:
            raise ValueError(f"Layer '{self.name}' was called without inputs.")
        # (1) arrays -> Tensors, floats cast to the layer's compute dtype
        args = list(args)
        if args:
            args[0] = self._convert_inputs(args[0])
        else:
            kwargs["inputs"] = self._convert_inputs(kwargs["inputs"])
        for i in range(1, len(args)):
            if _is_array(args[i]):
                args[i] = convert_to_tensor(args[i])
        # (2) input spec
        _check_input_spec(self.input_spec, args[0] if args else kwargs["inputs"], self.name)
        with _LayerScope(self), self._autocast_scope():
            return self._scoped_call(args, kwargs)

    def _scoped_call(self, args, kwargs):
        # (3) build
        if not self.built:
            self._maybe_build(args, kwargs)
        # (4) training flag and mask
        outer = _ctx.entry is None
        if "training" in self._call_params:
            training = kwargs.get("training")
            if training is None:
                training = _ctx.training
            if training is None:
                default = self._call_params["training"].default
                training = None if default is inspect.Parameter.empty else default
            kwargs["training"] = training
        else:
            training = kwargs.pop("training", None)
            if training is None:
                training = _ctx.training
        first = args[0] if args else kwargs["inputs"]
        prev_mask = _mask_of(first)
        if "mask" in self._call_params and kwargs.get("mask") is None and prev_mask is not None:
            kwargs["mask"] = prev_mask
        saved = (_ctx.entry, _ctx.training)
        if outer:
            _ctx.entry = self
            self._clear_losses()
        if training is not None:
            _ctx.training = training
        # (5) call; under a RematScope, through remat (its backward recomputes it)
        call = self.call
        if getattr(self, "_remat_mode", None) is not None:
            call = rematerialized_call(self, call, args, kwargs)
        try:
            outputs = call(*args, **kwargs)
        finally:
            _ctx.entry, _ctx.training = saved
        # (6) output mask, activity regularization
        mask = kwargs.get("mask", prev_mask)
        out_mask = self.compute_mask(first, mask)
        if out_mask is not None:
            for o, m in zip(
                tree.flatten(outputs), tree.flatten(out_mask) * len(tree.flatten(outputs))
            ):
                if isinstance(o, Tensor) and m is not None:
                    try:
                        o._keras_mask = m
                    except AttributeError:
                        pass
        if self.activity_regularizer is not None:
            for o in tree.flatten(outputs):
                if isinstance(o, Tensor):
                    from keratron import ops

                    self.add_loss(
                        ops.divide(self.activity_regularizer(o), ops.cast(o.shape[0], o.dtype))
                    )
        return outputs

    def _convert_inputs(self, x):
        def conv(t):
            if _is_array(t) or isinstance(t, (list, float, int)) and not isinstance(t, bool):
                t = convert_to_tensor(t)
            if (
                isinstance(t, Tensor)
                and self.autocast
                and t._value.is_floating_point()
                and t.dtype != self.compute_dtype
            ):
                from keratron import ops

                mask = getattr(t, "_keras_mask", None)
                t = ops.cast(t, self.compute_dtype)
                if mask is not None:
                    t._keras_mask = mask
            return t

        if isinstance(x, (list, tuple, dict)) and not (
            isinstance(x, list)
            and x
            and not isinstance(x[0], (Tensor, np.ndarray, list, dict, tuple))
        ):
            return tree.map_structure(conv, x)
        return conv(x)

    # ----------------------------------------------------------------------- symbolic call
    def compute_output_spec(self, *args, **kwargs):
        """Runs `call` on data-free tensors to find output shapes and dtypes.

        Unknown (None) dimensions are filled with two different sizes; an output dimension
        that differs between the two runs is unknown too (Keras's torch backend does the same).
        """
        flat = tree.flatten([list(args), kwargs])
        has_none = any(isinstance(x, KerasTensor) and None in x.shape for x in flat)
        runs = [_run_filled(self, args, kwargs, 83)]
        if has_none:
            runs.append(_run_filled(self, args, kwargs, 89))

        def to_spec(*outs):
            o = outs[0]
            if not isinstance(o, Tensor):
                return o
            shape = tuple(
                None if any(x.shape[i] != d for x in outs[1:]) else d for i, d in enumerate(o.shape)
            )
            return KerasTensor(shape, o.dtype)

        return tree.map_structure(to_spec, *runs)

    def _symbolic_call(self, args, kwargs):
        if not self.built:
            _check_input_spec(self.input_spec, args[0] if args else kwargs.get("inputs"), self.name)
            self._maybe_build(args, kwargs)
        else:
            _check_input_spec(self.input_spec, args[0] if args else kwargs.get("inputs"), self.name)
        # The input's mask reaches `call(..., mask=...)` while the graph is built, as it does
        # when the model runs; it is not an input of the node (at run time it travels on the
        # tensors again).
        first = args[0] if args else kwargs.get("inputs")
        prev_mask = _mask_of(first)
        call_kwargs = kwargs
        if "mask" in self._call_params and kwargs.get("mask") is None and prev_mask is not None:
            call_kwargs = {**kwargs, "mask": prev_mask}
        outputs = self.compute_output_spec(*args, **call_kwargs)
        Node(self, args, kwargs, outputs)
        out_mask = _symbolic_output_mask(self, first, call_kwargs.get("mask", prev_mask))
        if out_mask is not None:
            flat_outputs = tree.flatten(outputs)
            for o, m in zip(flat_outputs, tree.flatten(out_mask) * len(flat_outputs)):
                if isinstance(o, KerasTensor) and isinstance(m, KerasTensor):
                    o._keras_mask = m
        return outputs

    # ----------------------------------------------------------------------- graph info
    def _node_attr(self, attr, what):
        if not self._inbound_nodes:
            raise AttributeError(
                f"Layer '{self.name}' has never been called and thus has no {what}."
            )
        values = getattr(self._inbound_nodes[0], attr)
        return values[0] if len(values) == 1 else values

    @property
    def input(self):
        return self._node_attr("arguments", "defined input")

    @property
    def output(self):
        return self._node_attr("outputs", "defined output")

    # ----------------------------------------------------------------------- config
    def get_config(self) -> dict:
        """The constructor arguments that recreate this layer (Keras's base keys)."""
        policy = self.dtype_policy
        # Mixed policies are stored as Keras 3 does (a serialized DTypePolicy); plain ones as
        # their dtype name, which Keras reads too.
        dtype = dtype_policies.serialize(policy) if policy.is_mixed else policy.name
        config = {"name": self.name, "trainable": self.trainable, "dtype": dtype}
        if self._batch_input_shape_arg is not None:
            config["batch_input_shape"] = self._batch_input_shape_arg
        if self.activity_regularizer is not None:
            from keratron.layers import regularizers

            config["activity_regularizer"] = regularizers.serialize(self.activity_regularizer)
        return config

    @classmethod
    def from_config(cls, config):
        return cls(**config)

    def get_build_config(self):
        if self._build_shapes is not None:
            return dict(self._build_shapes)
        return None

    def build_from_config(self, config):
        if config:
            if len(config) == 1 and "input_shape" in config:
                self.build(config["input_shape"])
            else:
                self.build(**config)
            self.built = True
            # Kept so that a rebuilt layer saves the same build config again.
            self._build_shapes = dict(config)

    def __repr__(self):
        return f"<{type(self).__name__} name={self.name}, built={self.built}>"


def _shapes(s):
    """A shape or a structure of shapes, with tuples as leaves."""
    if isinstance(s, (list, tuple)) and all(
        d is None or isinstance(d, (int, np.integer)) for d in s
    ):
        return tuple(s)
    if isinstance(s, dict):
        return {k: _shapes(v) for k, v in s.items()}
    return [_shapes(x) for x in s]


def shapes_of(x):
    """The shapes in a structure of tensors / arrays: tuples, in lists and dicts (None for
    values without a shape), as `build` and `build_config` record them."""
    if isinstance(x, (Tensor, KerasTensor)):
        return tuple(x.shape)
    if isinstance(x, dict):
        return {k: shapes_of(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [shapes_of(v) for v in x]
    if hasattr(x, "shape"):
        return tuple(x.shape)
    return None


def _mask_of(x):
    """The mask a (symbolic) input tensor carries, or the list of masks of a list of them."""
    kinds = (Tensor, KerasTensor)
    if isinstance(x, (list, tuple)):
        masks = [getattr(t, "_keras_mask", None) if isinstance(t, kinds) else None for t in x]
        return masks if any(m is not None for m in masks) else None
    if isinstance(x, kinds):
        return getattr(x, "_keras_mask", None)
    return None


def _symbolic_output_mask(layer, inputs, mask):
    """The KerasTensor(s) of the mask `layer.compute_mask` gives for symbolic `inputs`.

    `compute_mask` runs on small tensors of ones in place of the KerasTensors (twice, with
    different sizes, when a dimension is unknown), so that no op records a node."""
    if mask is None and type(layer).compute_mask is Layer.compute_mask:
        return None
    if type(layer).compute_mask is Layer.compute_mask:
        return mask if layer.supports_masking else None
    from keratron.autodiff.dtypes import to_torch_dtype

    def run(size):
        def conv(x):
            if isinstance(x, KerasTensor):
                shape = tuple(size if d is None else d for d in x.shape)
                return Tensor(torch.ones(shape, dtype=to_torch_dtype(x.dtype)))
            return x

        return layer.compute_mask(tree.map_structure(conv, inputs), tree.map_structure(conv, mask))

    runs = [run(2), run(3)]

    def to_spec(a, b):
        if not isinstance(a, Tensor):
            return None
        shape = tuple(None if da != db else da for da, db in zip(a.shape, b.shape))
        return KerasTensor(shape, a.dtype, record_history=False)

    try:
        return tree.map_structure(to_spec, *runs)
    except (TypeError, ValueError):
        return None


def _run_filled(layer, args, kwargs, fill):
    """Calls `layer.call` with KerasTensors replaced by data-free "meta" tensors (None dims
    -> `fill`) and the layer's weights swapped for meta tensors of the same shapes, so no
    arithmetic runs. If some op cannot run on meta tensors, the call runs on zeros on the
    CPU instead, with small fills (2 and 3) so that it stays cheap."""
    from keratron.autodiff.dtypes import to_torch_dtype

    def run(device, size):
        def conv(x):
            if isinstance(x, KerasTensor):
                shape = tuple(size if d is None else d for d in x.shape)
                return Tensor(torch.zeros(shape, dtype=to_torch_dtype(x.dtype), device=device))
            return x

        a = tree.map_structure(conv, list(args)) if args else []
        k = {key: tree.map_structure(conv, v) for key, v in kwargs.items()}
        # As in an eager call: float inputs reach `call` in the layer's compute dtype.
        if a:
            a[0] = layer._convert_inputs(a[0])
        elif "inputs" in k:
            k["inputs"] = layer._convert_inputs(k["inputs"])
        if "training" in layer._call_params and k.get("training") is None:
            k["training"] = False
        if "mask" in layer._call_params and k.get("mask") is None:
            k.pop("mask", None)
        swapped = []
        if device == "meta":
            for v in layer.weights:
                if not v._value.is_meta:
                    swapped.append((v, v._value))
                    v._value = torch.empty_like(v._value, device="meta")
        saved = (_ctx.entry, _ctx.training)
        _ctx.entry = layer
        try:
            return layer.call(*a, **k)
        finally:
            _ctx.entry, _ctx.training = saved
            for v, value in swapped:
                v._value = value

    try:
        return run("meta", fill)
    except (NotImplementedError, RuntimeError):
        return run("cpu", 2 if fill == 83 else 3)


# Keras's op modules (keras.src.ops.<name>), the order a plain op name is looked up in.
_KERAS_OP_NAMESPACES = ("numpy", "nn", "math", "linalg", "image", "core")


class TensorOpLayer(Layer):
    """Wraps one `keratron.ops` function so that operators and ops on KerasTensors (`x * 2`,
    `x[:, 0]`) become nodes of a functional graph.

    Keras 3 records such a call as an `Operation` that is not a layer: a functional model lists
    it in `operations` and `summary()` but not in `layers`, and its config names the op class
    (`{"module": "keras.src.ops.numpy", "class_name": "Add", "config": {"name": "add"}}`);
    `keras_class_name` and `get_config` give that view.
    """

    def __init__(self, fn_name, fn_kwargs=None, **kwargs):
        name = kwargs.pop("name", None) or unique_object_name(fn_name.split(".")[-1])
        super().__init__(name=name, **kwargs)
        self.fn_name = fn_name
        self.fn_kwargs = dict(fn_kwargs or {})

    @property
    def keras_class_name(self) -> str:
        """The Keras 3 op class of this call ("Add" for `add`, "TrueDivide" for `true_divide`)."""
        return "".join(part.capitalize() for part in self.fn_name.split(".")[-1].split("_"))

    def call(self, *args):
        from keratron import ops

        if self.fn_name == "get_item" and len(args) == 2 and isinstance(args[1], list):
            # A saved tuple key comes back from JSON as a list: `x[:, 0]`, not `x[[:, 0]]`.
            if any(k is None or k is Ellipsis or isinstance(k, slice) for k in args[1]):
                args = (args[0], tuple(args[1]))
        op = ops
        for part in self.fn_name.split("."):  # "image.resize": an op of a Keras sub-namespace
            op = getattr(op, part)
        return op(*args, **self.fn_kwargs)

    def get_config(self):
        """The op's constructor arguments with its name, as Keras's `Operation.get_config`."""
        return {"name": self.name, **self.fn_kwargs}

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        if "fn_name" in config:  # keratron's earlier layout: the op named in the config
            return cls(config.pop("fn_name"), config.pop("fn_kwargs", None), name=config["name"])
        raise ValueError(
            "TensorOpLayer.from_config needs the op: use `TensorOpLayer.from_keras_op` with the "
            f"Keras op class name. Received: config={config!r}"
        )

    @property
    def keras_module(self) -> str:
        """The Keras module of the op class (`keras.src.ops.numpy`, `...nn`, `...image`)."""
        from keratron import ops

        if "." in self.fn_name:
            return "keras.src.ops." + self.fn_name.split(".")[0]
        for namespace in _KERAS_OP_NAMESPACES:
            if self.fn_name in getattr(ops, namespace).__all__:
                return "keras.src.ops." + namespace
        return "keras.src.ops.numpy"

    @classmethod
    def from_keras_op(cls, class_name, config, module="keras.src.ops.numpy"):
        """The node for a Keras op config (`class_name="Mean"`, `config={"name": "mean",
        "axis": -1}`), calling `keratron.ops.mean(x, axis=-1)`; an op of another Keras op
        module (`module="keras.src.ops.image"`, `class_name="Resize"`) calls
        `keratron.ops.image.resize`.

        Raises:
            ValueError: if keratron has no op of that name.
        """
        from keratron import ops

        fn_name = to_snake_case(class_name)
        namespace = str(module or "").rsplit(".", 1)[-1]
        if not callable(getattr(ops, fn_name, None)) and namespace in _KERAS_OP_NAMESPACES:
            if callable(getattr(getattr(ops, namespace), fn_name, None)):
                fn_name = f"{namespace}.{fn_name}"
        if "." not in fn_name and not callable(getattr(ops, fn_name, None)):
            raise ValueError(
                f"Unknown Keras operation '{class_name}': keratron.ops has no '{fn_name}'. "
                f"Received: config={config!r}"
            )
        config = dict(config)
        name = config.pop("name", None)
        return cls(fn_name, config, name=name)
