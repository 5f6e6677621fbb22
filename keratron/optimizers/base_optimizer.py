"""The optimizer base class: Keras 3's `Optimizer` contract over in-place torch updates.

Updates never go through primitives or tapes: an optimizer step is a side effect on the
variables' torch storage, written with torch's multi-tensor `_foreach_*` kernels, one call per
(device, dtype) group of variables. Scalar coefficients (learning rate, bias corrections) stay
0-d tensors on the variables' device, so a step on CUDA never waits for the host.

The order of work in `apply` is Keras's: drop None gradients, overwrite variables that take
their gradient as value, unscale (loss_scale_factor), accumulate or clip, decoupled weight
decay, the update rule, constraints, moving averages (EMA), then `iterations += 1`.
"""

from __future__ import annotations

import collections
import contextlib
import re
import warnings

import numpy as np
import torch

from keratron import config
from keratron.autodiff.dtypes import standardize_dtype, to_torch_dtype
from keratron.autodiff.tape import GradientTape, active_tapes, stop_recording_all
from keratron.autodiff.tensor import Tensor, Variable, convert_to_tensor, mark_written
from keratron.ops.elementwise import cast_p
from keratron.optimizers.schedules import learning_rate_schedule as lrs

_name_uids: collections.defaultdict = collections.defaultdict(int)

# Keys that tf.keras 2 optimizers wrote into their configs and that mean nothing here.
_TF_KERAS_ONLY_CONFIG_KEYS = ("jit_compile", "is_legacy_optimizer")


def _snake_case(name: str) -> str:
    # Same splitting rule as Keras's auto-naming ("RMSprop" -> "rm_sprop", "AdamW" -> "adam_w").
    name = re.sub(r"\W+", "", name)
    name = re.sub(r"(.)([A-Z][a-z]+)", r"\1_\2", name)
    return re.sub(r"([a-z])([A-Z])", r"\1_\2", name).lower()


def _auto_name(class_name: str) -> str:
    base = _snake_case(class_name)
    uid = _name_uids[base]
    _name_uids[base] += 1
    return base if uid == 0 else f"{base}_{uid}"


def is_auto_name(name, class_name: str) -> bool:
    """Whether `name` is one that auto-naming gives an optimizer of class `class_name`
    ("adam", "adam_3"): its number counts the optimizers the process made before.

    Example:
        >>> is_auto_name("adam_2", "Adam"), is_auto_name("fine_tune", "Adam")
        (True, False)
    """
    base = re.escape(_snake_case(class_name))
    return isinstance(name, str) and re.fullmatch(rf"{base}(_\d+)?", name) is not None


@contextlib.contextmanager
def fresh_auto_names():
    """Optimizer auto-naming starts afresh inside the block (the first Adam is "adam" again)
    and continues afterwards where it was: an Estimator names the optimizer of each traced
    `model_fn` the same in every process this way.
    """
    saved = dict(_name_uids)
    _name_uids.clear()
    try:
        yield
    finally:
        _name_uids.clear()
        _name_uids.update(saved)


def _by_device_dtype(tensors) -> dict:
    """Indices of `tensors` grouped by (device, dtype): one foreach launch per group."""
    groups: dict = {}
    for i, t in enumerate(tensors):
        groups.setdefault((t.device, t.dtype), []).append(i)
    return groups


def _foreach_scale(tensors: list, scale: torch.Tensor) -> list:
    """`[t * scale for t in tensors]` with one foreach call per device/dtype group."""
    out = list(tensors)
    for (device, dtype), idx in _by_device_dtype(tensors).items():
        res = torch._foreach_mul([tensors[i] for i in idx], scale.to(device=device, dtype=dtype))
        for i, r in zip(idx, res):
            out[i] = r
    return out


def _initial_value(initializer, shape, dtype, device, what: str) -> torch.Tensor:
    tdtype = to_torch_dtype(dtype)
    if isinstance(initializer, str):
        key = initializer.lower()
        if key not in ("zeros", "ones"):
            raise ValueError(
                f"{what}: `initializer` must be 'zeros', 'ones', a number or a callable "
                f"(shape, dtype) -> value. Received: initializer={initializer!r}"
            )
        return torch.full(tuple(shape), 0.0 if key == "zeros" else 1.0, dtype=tdtype, device=device)
    if isinstance(initializer, (int, float, np.number)) and not isinstance(initializer, bool):
        return torch.full(tuple(shape), float(initializer), dtype=tdtype, device=device)
    if callable(initializer):
        value = convert_to_tensor(initializer(tuple(shape), dtype=dtype), dtype=dtype)
        return value._value.to(device)
    raise ValueError(
        f"{what}: `initializer` must be 'zeros', 'ones', a number or a callable "
        f"(shape, dtype) -> value. Received: initializer={initializer!r}"
    )


class Optimizer:
    """Base class of all optimizers, with Keras 3's arguments and behaviour.

    A subclass creates its slot variables in `build` (with `add_optimizer_variables`) and
    defines its rule either in `update_step(gradient, variable, learning_rate)`, written with
    keratron ops and `self.assign*` (one variable at a time, as in Keras), or, for speed, in
    `_update_group(grads, variables, lr)`, which receives torch gradients, the Variables and a
    0-d learning-rate tensor for one device/dtype group and updates `variable._value` in place.

    Args:
        learning_rate: a float, a `LearningRateSchedule`, or a callable taking no arguments.
        weight_decay: if set, every step first does `w -= w * weight_decay * learning_rate`
            (decoupled weight decay), except on variables excluded with
            `exclude_from_weight_decay`.
        clipnorm: clips each gradient to this L2 norm.
        clipvalue: clips each gradient element to `[-clipvalue, clipvalue]`.
        global_clipnorm: scales all gradients so that their joint L2 norm is at most this.
        use_ema: keep an exponential moving average of the trained variables.
        ema_momentum: the EMA's decay.
        ema_overwrite_frequency: every this many steps, copy the averages into the variables.
        loss_scale_factor: gradients are divided by this before use (`scale_loss` multiplies).
        gradient_accumulation_steps: update every N calls with the mean of the N gradients.
        name: the optimizer's name; prefixes its variables' paths. Defaults to the snake-case
            class name, made unique ("adam", "adam_1").

    Example:
        >>> opt = keratron.optimizers.SGD(learning_rate=0.1)
        >>> w = keratron.Variable([1.0, 2.0])
        >>> opt.apply([keratron.convert_to_tensor([1.0, 1.0])], [w])
        >>> w.numpy()
        array([0.9, 1.9], dtype=float32)
    """

    def __init__(
        self,
        learning_rate,
        weight_decay=None,
        clipnorm=None,
        clipvalue=None,
        global_clipnorm=None,
        use_ema=False,
        ema_momentum=0.99,
        ema_overwrite_frequency=None,
        loss_scale_factor=None,
        gradient_accumulation_steps=None,
        name=None,
        **kwargs,
    ):
        cls_name = type(self).__name__
        if "lr" in kwargs:
            warnings.warn(
                f"{cls_name}: the `lr` argument is deprecated, use `learning_rate` instead.",
                DeprecationWarning,
                stacklevel=3,
            )
            learning_rate = kwargs.pop("lr")
        # tf.keras 2 time-based decay: lr / (1 + decay * iterations). Keras 3 dropped it; we
        # keep its old meaning so that tf.keras 2 scripts train the same way.
        self._legacy_decay = 0.0
        if "decay" in kwargs:
            decay = kwargs.pop("decay")
            if decay:
                warnings.warn(
                    f"{cls_name}: the `decay` argument is deprecated; it applies tf.keras 2 "
                    "time-based decay lr / (1 + decay * iterations). Use a "
                    "keratron.optimizers.schedules.InverseTimeDecay instead.",
                    DeprecationWarning,
                    stacklevel=3,
                )
                self._legacy_decay = float(decay)
        if kwargs:
            raise ValueError(f"{cls_name}: argument(s) not recognized: {kwargs}")

        self.name = _auto_name(cls_name) if name is None else str(name)
        self.weight_decay = weight_decay
        self.clipnorm = clipnorm
        self.global_clipnorm = global_clipnorm
        self.clipvalue = clipvalue
        self.use_ema = use_ema
        self.loss_scale_factor = loss_scale_factor
        self.gradient_accumulation_steps = gradient_accumulation_steps
        if gradient_accumulation_steps and not gradient_accumulation_steps >= 2:
            raise ValueError(
                f"{cls_name}: `gradient_accumulation_steps` must be an integer >= 2. "
                f"Received: gradient_accumulation_steps={gradient_accumulation_steps}"
            )
        if use_ema:
            if not 0 <= ema_momentum <= 1:
                raise ValueError(
                    f"{cls_name}: `ema_momentum` must be in the range [0, 1]. "
                    f"Received: ema_momentum={ema_momentum}"
                )
            if ema_overwrite_frequency and (
                not isinstance(ema_overwrite_frequency, int) or ema_overwrite_frequency < 1
            ):
                raise ValueError(
                    f"{cls_name}: `ema_overwrite_frequency` must be an integer >= 1 or None. "
                    f"Received: ema_overwrite_frequency={ema_overwrite_frequency}"
                )
        self.ema_momentum = ema_momentum
        self.ema_overwrite_frequency = ema_overwrite_frequency
        if sum(a is not None for a in (clipnorm, clipvalue, global_clipnorm)) > 1:
            raise ValueError(
                f"{cls_name}: only one of `clipnorm`, `clipvalue` and `global_clipnorm` can be "
                f"set. Received: clipnorm={clipnorm}, clipvalue={clipvalue}, "
                f"global_clipnorm={global_clipnorm}"
            )
        self.built = False
        self._variables: list[Variable] = []
        self._trainable_variables: list[Variable] = []
        self._trainable_variables_indices: dict[int, int] = {}
        self._exclude_from_weight_decay: set = set()
        self._exclude_from_weight_decay_pattern = None

        self._iterations = self._make_variable(
            torch.zeros((), dtype=torch.int64, device=config.default_device()), "iteration"
        )
        self._learning_rate = None
        self._set_learning_rate(learning_rate, initial=True)

    # ------------------------------------------------------------------ variables
    def _make_variable(self, value: torch.Tensor, name: str) -> Variable:
        v = Variable(value, dtype=standardize_dtype(value.dtype), trainable=False, name=name)
        v.path = f"{self.name}/{name}"
        self._variables.append(v)
        return v

    @property
    def variables(self) -> list:
        """The optimizer's own variables, in Keras order: `iteration`, `learning_rate` (when it
        is not a schedule), then the slots created by `build`."""
        return self._variables[:]

    @property
    def iterations(self):
        """The number of update steps taken (an int64 Variable); with gradient accumulation,
        the number of applied (accumulated) updates."""
        if self.gradient_accumulation_steps:
            from keratron import ops

            return ops.floor_divide(self._iterations, self.gradient_accumulation_steps)
        return self._iterations

    def _step_count(self, device) -> torch.Tensor:
        it = self._iterations._value
        if self.gradient_accumulation_steps:
            it = torch.div(it, self.gradient_accumulation_steps, rounding_mode="floor")
        return it.to(device)

    def add_variable(
        self, shape, initializer="zeros", dtype=None, aggregation="none", layout=None, name=None
    ) -> Variable:
        """Creates and tracks a non-trainable optimizer variable.

        Args:
            shape: the variable's shape.
            initializer: "zeros", "ones", a number, or a callable `(shape, dtype) -> value`.
            dtype: defaults to `floatx()`.
            aggregation: accepted for Keras compatibility (single-replica here).
            layout: accepted for Keras compatibility.
            name: the variable's name; its path is `"<optimizer name>/<name>"`.

        Example:
            >>> opt = keratron.optimizers.SGD(name="sgd")
            >>> opt.add_variable((2,), name="scale").path
            'sgd/scale'
        """
        dtype = standardize_dtype(dtype) if dtype is not None else config.floatx()
        name = name if name is not None else f"variable_{len(self._variables)}"
        what = f"{type(self).__name__}.add_variable"
        value = _initial_value(initializer, shape, dtype, config.default_device(), what)
        return self._make_variable(value, name)

    def add_variable_from_reference(self, reference_variable, name=None, initializer="zeros"):
        """Creates a slot shaped, typed and placed like `reference_variable`.

        The slot is named `"<reference path with / replaced by _>_<name>"`, as Keras names
        them ("dense_kernel_momentum").
        """
        ref_name = getattr(reference_variable, "path", None) or str(reference_variable.name)
        name = f"{ref_name.replace('/', '_').replace(':', '_')}_{name or 'var'}"
        ref = reference_variable._value
        value = _initial_value(
            initializer,
            ref.shape,
            standardize_dtype(ref.dtype),
            ref.device,
            f"{type(self).__name__}.add_variable_from_reference",
        )
        return self._make_variable(value, name)

    def add_optimizer_variables(self, trainable_variables, name, initializer="zeros"):
        """Creates one slot per variable for each name in `name` (a string or a list),
        interleaved per variable as Keras does; variables with `overwrite_with_gradient` get
        None. Returns a list, or a tuple of lists when `name` is a list."""
        names = [name] if isinstance(name, str) else list(name)
        if isinstance(name, str) or not isinstance(initializer, (list, tuple)):
            inits = [initializer] * len(names)
        else:
            inits = list(initializer)
        if len(names) != len(inits):
            raise ValueError(
                f"{type(self).__name__}.add_optimizer_variables: the number of names must match "
                f"the number of initializers. Received: name={name!r}, initializer={initializer!r}"
            )
        slots = tuple([] for _ in names)
        for variable in trainable_variables:
            overwrite = getattr(variable, "overwrite_with_gradient", False)
            for lst, n, init in zip(slots, names, inits):
                lst.append(
                    None
                    if overwrite
                    else self.add_variable_from_reference(variable, name=n, initializer=init)
                )
        return slots[0] if isinstance(name, str) else slots

    def build(self, variables):
        """Creates the optimizer's slots for `variables` (called by the first `apply`)."""
        variables = list(variables)
        if self.use_ema:
            self._model_variables_moving_average = self.add_optimizer_variables(
                variables, "average"
            )
        if self.gradient_accumulation_steps:
            self._accumulated_gradients = []
        for i, variable in enumerate(variables):
            if not isinstance(variable, Variable):
                raise TypeError(
                    f"Optimizer '{self.name}' can only update Variables. Received at index {i}: "
                    f"{type(variable).__name__}"
                )
            self._trainable_variables_indices[id(variable)] = i
            if self.gradient_accumulation_steps:
                self._accumulated_gradients.append(
                    self.add_variable_from_reference(variable, name="gradient_accumulator")
                )
        self._trainable_variables = variables[:]
        self.built = True

    def _get_variable_index(self, variable) -> int:
        return self._trainable_variables_indices[id(variable)]

    def set_weights(self, weights) -> None:
        """Sets the optimizer's variables from a list of arrays (in `variables` order)."""
        if not self.built:
            raise ValueError(
                f"Optimizer '{self.name}': set_weights() needs a built optimizer; call "
                "`optimizer.build(trainable_variables)` first."
            )
        for variable, weight in zip(self._variables, weights):
            if tuple(variable.shape) != tuple(np.shape(weight)):
                raise ValueError(
                    f"Optimizer '{self.name}': variable '{variable.path}' has shape "
                    f"{variable.shape}, received a weight of shape {tuple(np.shape(weight))}."
                )
            variable.assign(weight)

    def get_weights(self) -> list:
        """The optimizer's variables as numpy arrays (tf.keras 2 API)."""
        return [v.numpy() for v in self._variables]

    def save_own_variables(self, store) -> None:
        """Writes the variables into `store` under keys "0", "1", ... (Keras 3 layout)."""
        for i, variable in enumerate(self.variables):
            store[str(i)] = variable.numpy()

    def load_own_variables(self, store) -> None:
        """Reads the variables back from `store`; warns and skips on a count mismatch."""
        if len(store.keys()) != len(self.variables):
            warnings.warn(
                f"Skipping variable loading for optimizer '{self.name}', because it has "
                f"{len(self.variables)} variables whereas the saved optimizer has "
                f"{len(store.keys())} variables.",
                stacklevel=2,
            )
            return
        for i, variable in enumerate(self.variables):
            variable.assign(store[str(i)])

    # ------------------------------------------------------------------ learning rate
    @property
    def learning_rate(self):
        """The current learning rate: the Variable, or the schedule's value at `iterations`.

        Assigning a float sets the Variable; assigning a schedule or callable replaces it.
        """
        lr = self._learning_rate
        if isinstance(lr, lrs.LearningRateSchedule):
            return lr(self._iterations)
        if isinstance(lr, Variable):
            return lr
        return convert_to_tensor(lr(), dtype=config.floatx())

    @learning_rate.setter
    def learning_rate(self, learning_rate):
        self._set_learning_rate(learning_rate, initial=False)

    @property
    def lr(self):
        """tf.keras 2 spelling of `learning_rate` (deprecated)."""
        warnings.warn(
            f"{type(self).__name__}.lr is deprecated, use `learning_rate` instead.",
            DeprecationWarning,
            stacklevel=2,
        )
        return self.learning_rate

    @lr.setter
    def lr(self, learning_rate):
        warnings.warn(
            f"{type(self).__name__}.lr is deprecated, use `learning_rate` instead.",
            DeprecationWarning,
            stacklevel=2,
        )
        self.learning_rate = learning_rate

    def _set_learning_rate(self, learning_rate, initial: bool) -> None:
        prev = self._learning_rate
        if isinstance(learning_rate, lrs.LearningRateSchedule) or (
            callable(learning_rate) and not isinstance(learning_rate, Tensor)
        ):
            self._learning_rate = learning_rate
            if isinstance(prev, Variable):
                self._variables.remove(prev)
            return
        value = self._learning_rate_value(learning_rate)
        if isinstance(prev, lrs.LearningRateSchedule):
            raise TypeError(
                f"Optimizer '{self.name}' was created with a `LearningRateSchedule` as its "
                "`learning_rate`, so its learning rate cannot be set to a number. Create the "
                "optimizer with a float `learning_rate` to make it settable."
            )
        if isinstance(prev, Variable):
            prev.assign(value)
            return
        tdtype = to_torch_dtype(config.floatx())
        v = Variable(
            torch.tensor(value, dtype=tdtype, device=config.default_device()),
            trainable=False,
            name="learning_rate",
        )
        v.path = f"{self.name}/learning_rate"
        # Keras keeps the learning rate right after `iteration`.
        self._variables.insert(1 if initial else len(self._variables), v)
        self._learning_rate = v

    def _learning_rate_value(self, learning_rate) -> float:
        if isinstance(learning_rate, (Tensor, np.ndarray)) and np.size(learning_rate) == 1:
            return float(np.asarray(learning_rate).reshape(()))
        if isinstance(learning_rate, (int, float, np.number)) and not isinstance(
            learning_rate, bool
        ):
            return float(learning_rate)
        raise ValueError(
            f"Optimizer '{self.name}': `learning_rate` must be a float, a "
            "LearningRateSchedule, or a callable taking no arguments that returns the learning "
            f"rate. Received: learning_rate={learning_rate!r}"
        )

    def _current_learning_rate(self) -> torch.Tensor:
        """The learning rate for this step as a 0-d float tensor (no host sync)."""
        lr = self._learning_rate
        if isinstance(lr, Variable):
            value = lr._value
        elif isinstance(lr, lrs.LearningRateSchedule):
            value = convert_to_tensor(lr(self._iterations))._value
        else:
            value = convert_to_tensor(lr())._value
        if not value.is_floating_point():
            value = value.to(to_torch_dtype(config.floatx()))
        if self._legacy_decay:
            it = self._iterations._value.to(device=value.device, dtype=value.dtype)
            value = value / (1.0 + self._legacy_decay * it)
        return value

    def scale_loss(self, loss):
        """Multiplies `loss` by `loss_scale_factor` (when set) before differentiation."""
        if self.loss_scale_factor is not None:
            return loss * self.loss_scale_factor
        return loss

    # ------------------------------------------------------------------ weight decay
    def exclude_from_weight_decay(self, var_list=None, var_names=None) -> None:
        """Excludes variables from weight decay: those in `var_list`, and those whose name
        matches any of `var_names` (regular expressions searched in the name, as in Keras;
        e.g. `var_names=["bias"]`)."""
        self._exclude_from_weight_decay = {id(v) for v in var_list} if var_list else set()
        self._exclude_from_weight_decay_pattern = (
            re.compile("|".join(set(var_names))) if var_names else None
        )

    def _use_weight_decay(self, variable) -> bool:
        if id(variable) in self._exclude_from_weight_decay:
            return False
        pattern = self._exclude_from_weight_decay_pattern
        return pattern is None or pattern.search(variable.name) is None

    def _apply_weight_decay(self, variables, lr: torch.Tensor) -> None:
        if self.weight_decay is None:
            return
        decayed = [v._value for v in variables if self._use_weight_decay(v)]
        if decayed:
            factor = 1.0 - float(self.weight_decay) * lr
            for (device, dtype), idx in _by_device_dtype(decayed).items():
                torch._foreach_mul_(
                    [decayed[i] for i in idx], factor.to(device=device, dtype=dtype)
                )

    # ------------------------------------------------------------------ clipping
    def _clip_gradients(self, grads: list) -> list:
        if self.clipnorm and self.clipnorm > 0:
            clip = float(self.clipnorm)
            norms = torch._foreach_norm(grads)
            # g * clipnorm / max(||g||, clipnorm): a no-op for gradients already inside the ball.
            factors = torch._foreach_reciprocal(torch._foreach_clamp_min(norms, clip))
            torch._foreach_mul_(factors, clip)
            return list(torch._foreach_mul(grads, factors))
        if self.global_clipnorm and self.global_clipnorm > 0:
            clip = float(self.global_clipnorm)
            norms = torch._foreach_norm(grads)
            device = grads[0].device
            total = torch.linalg.vector_norm(
                torch.stack([n.to(device=device, dtype=torch.float32) for n in norms])
            )
            # Adding (total - total) turns the scale into NaN when the norm is inf or NaN.
            scale = clip * torch.minimum(1.0 / total, torch.full((), 1.0 / clip, device=device))
            scale = scale + (total - total)
            return _foreach_scale(grads, scale)
        if self.clipvalue and self.clipvalue > 0:
            v = float(self.clipvalue)
            return list(torch._foreach_clamp_max(torch._foreach_clamp_min(grads, -v), v))
        return grads

    # ------------------------------------------------------------------ applying gradients
    def apply_gradients(
        self,
        grads_and_vars,
        name=None,
        skip_gradients_aggregation=False,
        experimental_aggregate_gradients=True,
    ):
        """Applies `(gradient, variable)` pairs (tf.keras style) and returns `iterations`.

        `name`, `skip_gradients_aggregation` and `experimental_aggregate_gradients` are the
        tf.keras 2 arguments; they change nothing on a single replica.

        Example:
            >>> opt = keratron.optimizers.Adam()
            >>> w = keratron.Variable([1.0])
            >>> _ = opt.apply_gradients([(keratron.convert_to_tensor([0.5]), w)])
        """
        pairs = list(grads_and_vars)
        if not pairs:
            return self._iterations
        for i, p in enumerate(pairs):
            if not isinstance(p, (tuple, list)) or len(p) != 2:
                raise ValueError(
                    f"Optimizer '{self.name}': apply_gradients expects (gradient, variable) pairs. "
                    f"Received at index {i}: {p!r}"
                )
        grads, variables = zip(*pairs)
        self.apply(list(grads), list(variables))
        return self._iterations

    def apply(self, grads, trainable_variables=None) -> None:
        """Updates `trainable_variables` with `grads` (one per variable, None to skip one).

        Without `trainable_variables`, the optimizer must be built and `grads` matches the
        variables it was built with.

        Example:
            >>> opt = keratron.optimizers.SGD(0.5)
            >>> w = keratron.Variable([2.0])
            >>> opt.apply([keratron.convert_to_tensor([1.0])], [w])
            >>> float(w.numpy()[0])
            1.5
        """
        grads = list(grads)
        if not grads:
            return
        if trainable_variables is None:
            if not self.built:
                raise ValueError(
                    f"Optimizer '{self.name}': when `grads` are passed without variables, the "
                    "optimizer must already be built; call `optimizer.build(trainable_variables)`"
                    " first or pass the variables."
                )
            variables = self._trainable_variables
        else:
            variables = list(trainable_variables)
        if len(grads) != len(variables):
            raise ValueError(
                f"Optimizer '{self.name}' ({type(self).__name__}) expects one gradient per "
                f"variable. Received {len(grads)} gradients for {len(variables)} variables."
            )
        from keratron.autodiff.function import is_tracing

        if is_tracing():
            # Inside keratron.function: the update is one opaque effect of the graph, run
            # eagerly (with the fused multi-tensor kernels) at this point of every replay.
            self._trace_apply(grads, variables)
            return
        if not self.built:
            self.build(variables)
        for v in variables:
            if id(v) not in self._trainable_variables_indices:
                raise ValueError(
                    f"Optimizer '{self.name}': unknown variable '{getattr(v, 'path', v)}'. This "
                    "optimizer can only update the variables it was built with; create a new "
                    "optimizer for a new set of variables."
                )
        with stop_recording_all():
            grads, variables = self._filter_empty_gradients(grads, variables)
            tgrads = [self._gradient_value(g, v) for g, v in zip(grads, variables)]
            self._apply_values(tgrads, variables)

    def _apply_values(self, tgrads: list, variables: list) -> None:
        """The update itself, on validated torch gradients (one per variable)."""
        from keratron.distribute.hooks import aggregate_gradients

        # Every path below (fused, multi-tensor, per-tensor, overwrite-with-gradient) writes
        # storage in place; the write counts tell cached derived state that it is stale.
        mark_written(variables)
        mark_written(self._variables)
        # Under a multi-worker strategy: the replicas' gradients, averaged (else unchanged).
        tgrads = aggregate_gradients(self, tgrads)
        tgrads, variables = self._overwrite_variables_directly_with_gradients(tgrads, variables)
        if tgrads:
            if self.loss_scale_factor is not None:
                tgrads = list(torch._foreach_div(tgrads, float(self.loss_scale_factor)))
            self._backend_apply_gradients(tgrads, variables)
            for variable in variables:
                if variable.constraint is not None:
                    variable.assign(variable.constraint(variable))
        self._iterations._value.add_(1)

    def _trace_apply(self, grads, variables) -> None:
        from keratron.autodiff.function import record_effect
        from keratron.autodiff.primitive import suspend_tracing

        with suspend_tracing():
            if not self.built:
                self.build(variables)
        for v in variables:
            if id(v) not in self._trainable_variables_indices:
                raise ValueError(
                    f"Optimizer '{self.name}': unknown variable '{getattr(v, 'path', v)}'. This "
                    "optimizer can only update the variables it was built with; create a new "
                    "optimizer for a new set of variables."
                )
        # Validated once, while tracing: the replayed effect only updates.
        grads, kept = self._filter_empty_gradients(grads, variables)
        checked = []
        for g, v in zip(grads, kept):
            with suspend_tracing():
                self._gradient_value(Tensor(torch.empty(g.shape, dtype=g._value.dtype)), v)
            if g._value.dtype != v._value.dtype:
                g = cast_p.bind(g, dtype=v._value.dtype)
            checked.append(g)

        def run(*values):
            self._apply_values(list(values), kept)

        # For whole-step CUDA graphs (autodiff.cuda_graphs): whether this update may be
        # captured, decided when the plan is analysed.
        run.capture_name = f"optimizer '{self.name}' update"
        run.capture_check = lambda: self._graph_capture_blocker(kept)
        record_effect(run, checked, variables=list(kept) + self.variables)

    # Set True, in its own class body, by each optimizer whose `_update_group` was checked to
    # launch only device work on CUDA (no host read of a tensor, no data-dependent shape).
    _update_is_graph_safe = False

    def _graph_capture_blocker(self, variables) -> str | None:
        """Why this optimizer's update, as it runs on CUDA, cannot be captured in a CUDA
        graph (its Python runs once, at capture; replays repeat only its kernels), or None.
        Conservative: what was not checked does not capture."""
        from keratron.distribute.hooks import strategy_in_scope

        what = f"optimizer '{self.name}'"
        if not type(self).__dict__.get("_update_is_graph_safe", False):
            return (
                f"{what} ({type(self).__name__}) has an update rule not checked for CUDA "
                "graphs (set _update_is_graph_safe in its class once it makes no host reads)"
            )
        if self.gradient_accumulation_steps:
            return f"{what} accumulates gradients: whether a step updates is read on the host"
        lr = self._learning_rate
        if isinstance(lr, lrs.LearningRateSchedule) and type(lr) not in lrs.GRAPH_SAFE_SCHEDULES:
            return (
                f"{what}'s learning-rate schedule {type(lr).__name__} is not one of Keras's "
                "built-in schedules, whose step-dependent ops run on the device: its Python "
                "would run once, at capture"
            )
        if not isinstance(lr, (Variable, lrs.LearningRateSchedule)):
            return f"{what}'s learning_rate is a Python callable, called on the host each step"
        constrained = [v.path for v in variables if v.constraint is not None]
        if constrained:
            return (
                f"{what} applies the constraint of {constrained[0]!r} with eager ops inside the "
                "step"
            )
        strategy = self.__dict__.get("_distribute_strategy") or strategy_in_scope()
        if strategy is not None and getattr(strategy, "num_replicas_in_sync", 1) > 1:
            return f"{what} all-reduces gradients across workers inside the step"
        return None

    def _gradient_value(self, g, variable) -> torch.Tensor:
        if isinstance(g, Tensor):
            t = g._value
        elif isinstance(g, torch.Tensor):
            t = g.detach()
        else:
            t = torch.as_tensor(np.asarray(g))
        if tuple(t.shape) != tuple(variable._value.shape):
            raise ValueError(
                f"Optimizer '{self.name}': the gradient for variable '{variable.path}' has shape "
                f"{tuple(t.shape)}, expected the variable's shape {variable.shape}."
            )
        if not variable._value.is_floating_point():
            raise TypeError(
                f"Optimizer '{self.name}' can only update floating-point variables. Received "
                f"variable '{variable.path}' of dtype {variable.dtype}."
            )
        return t.to(device=variable._value.device, dtype=variable._value.dtype)

    def _filter_empty_gradients(self, grads, variables):
        kept = [(g, v) for g, v in zip(grads, variables) if g is not None]
        if not kept:
            raise ValueError(f"Optimizer '{self.name}': no gradients provided for any variable.")
        if len(kept) != len(grads):
            missing = [getattr(v, "path", str(v)) for g, v in zip(grads, variables) if g is None]
            warnings.warn(
                f"Gradients do not exist for variables {missing} when minimizing the loss. If "
                "using `model.compile()`, did you forget to provide a `loss` argument?",
                stacklevel=3,
            )
        return [g for g, _ in kept], [v for _, v in kept]

    def _overwrite_variables_directly_with_gradients(self, grads, variables):
        """Variables flagged `overwrite_with_gradient` take their gradient as their new value
        (float8 scaling statistics); they skip clipping, decay and the update rule."""
        if not any(getattr(v, "overwrite_with_gradient", False) for v in variables):
            return grads, variables
        kept_g, kept_v = [], []
        for g, v in zip(grads, variables):
            if not getattr(v, "overwrite_with_gradient", False):
                kept_g.append(g)
                kept_v.append(v)
                continue
            if self.gradient_accumulation_steps:
                acc = self._accumulated_gradients[self._get_variable_index(v)]._value
                if self._is_accumulation_update_step():
                    v._value.copy_(torch.maximum(g, acc))
                    acc.zero_()
                else:
                    acc.copy_(torch.maximum(g, acc))
            else:
                v._value.copy_(g)
        return kept_g, kept_v

    def _is_accumulation_update_step(self) -> bool:
        # A host read: accumulation decides per call whether variables change at all.
        return (int(self._iterations._value) + 1) % self.gradient_accumulation_steps == 0

    def _backend_apply_gradients(self, grads: list, variables: list) -> None:
        if self.gradient_accumulation_steps:
            accumulators = self._accumulated_gradients
            acc = [accumulators[self._get_variable_index(v)]._value for v in variables]
            if self._is_accumulation_update_step():
                grads = list(torch._foreach_add(grads, acc))
                torch._foreach_div_(grads, float(self.gradient_accumulation_steps))
                self._update(grads, variables)
                torch._foreach_zero_([a._value for a in self._accumulated_gradients])
            else:
                torch._foreach_add_(acc, grads)
        else:
            self._update(grads, variables)
        if self.use_ema:
            self._update_model_variables_moving_average(self._trainable_variables)

    def _update(self, grads, variables) -> None:
        grads = self._clip_gradients(grads)
        lr = self._current_learning_rate()
        self._apply_weight_decay(variables, lr)
        self._backend_update_step(grads, variables, lr)

    def _backend_update_step(self, grads: list, variables: list, lr: torch.Tensor) -> None:
        groups = _by_device_dtype([v._value for v in variables])
        for (device, dtype), idx in groups.items():
            self._update_group(
                [grads[i] for i in idx],
                [variables[i] for i in idx],
                lr.to(device=device, dtype=dtype),
            )

    def _update_group(self, grads: list, variables: list, lr: torch.Tensor) -> None:
        """Updates one device/dtype group. The default runs `update_step` per variable."""
        learning_rate = Tensor(lr)
        for g, v in zip(grads, variables):
            self.update_step(Tensor(g), v, learning_rate)

    def update_step(self, gradient, variable, learning_rate) -> None:
        """The update rule for one variable; subclasses without `_update_group` define it."""
        raise TypeError(
            f"Optimizer '{self.name}' ({type(self).__name__}) has no update rule: a subclass of "
            "Optimizer must override `update_step(gradient, variable, learning_rate)`."
        )

    def assign(self, variable, value) -> None:
        """`variable.assign(value)`; for use inside `update_step`."""
        variable.assign(value)

    def assign_add(self, variable, value) -> None:
        """`variable.assign_add(value)`; for use inside `update_step`."""
        variable.assign_add(value)

    def assign_sub(self, variable, value) -> None:
        """`variable.assign_sub(value)`; for use inside `update_step`."""
        variable.assign_sub(value)

    # ------------------------------------------------------------------ moving averages
    def _update_model_variables_moving_average(self, variables) -> None:
        pairs = [
            (v._value, a._value)
            for v, a in zip(variables, self._model_variables_moving_average)
            if a is not None
        ]
        if not pairs:
            return
        values = [p[0] for p in pairs]
        step = self._step_count(values[0].device)
        # avg <- m * avg + (1 - m) * var, with m = 0 on the very first step (avg starts at var).
        momentum = self.ema_momentum * (step != 0).to(torch.float32)
        overwrite = None
        if self.ema_overwrite_frequency:
            overwrite = ((step + 1) % self.ema_overwrite_frequency == 0).to(torch.float32)
        for (device, dtype), idx in _by_device_dtype(values).items():
            vs = [pairs[i][0] for i in idx]
            avgs = [pairs[i][1] for i in idx]
            m = momentum.to(device=device, dtype=dtype)
            # Keras's form m * avg + (1 - m) * var, exact when m is 0; tensor-scalar foreach
            # overloads (lerp has none) keep the step free of host reads.
            torch._foreach_mul_(avgs, m)
            torch._foreach_add_(avgs, torch._foreach_mul(vs, 1.0 - m))
            if overwrite is not None:
                # A branch-free "copy if": var * (1 - c) + avg * c with c in {0, 1}.
                c = overwrite.to(device=device, dtype=dtype)
                torch._foreach_mul_(vs, 1.0 - c)
                torch._foreach_add_(vs, torch._foreach_mul(avgs, c))

    def finalize_variable_values(self, var_list) -> None:
        """With `use_ema`, overwrites the variables with their moving averages."""
        if not self.use_ema:
            return
        var_list = list(var_list)
        averages = self._model_variables_moving_average
        if len(var_list) != len(averages):
            raise ValueError(
                f"Optimizer '{self.name}': finalize_variable_values received {len(var_list)} "
                f"variables, but the optimizer holds {len(averages)} moving averages."
            )
        for v, a in zip(var_list, averages):
            if a is not None:
                v.assign(a)

    # ------------------------------------------------------------------ minimize
    def minimize(self, loss, var_list, tape=None):
        """Differentiates `loss` and applies the gradients to `var_list` (tf.keras style).

        Args:
            loss: a callable taking no arguments that returns the loss, or a loss Tensor that
                was computed under `tape`.
            var_list: the variables to update (or a callable returning them).
            tape: the `GradientTape` that recorded a Tensor `loss`; defaults to the innermost
                active tape that recorded it.

        Returns:
            The `iterations` variable.

        Example:
            >>> opt = keratron.optimizers.SGD(0.1)
            >>> w = keratron.Variable(1.0)
            >>> _ = opt.minimize(lambda: w * w, [w])
            >>> round(float(w.numpy()), 4)
            0.8
        """
        if callable(var_list):
            var_list = var_list()
        var_list = list(var_list)
        if callable(loss) and not isinstance(loss, Tensor):
            tape = GradientTape()
            with tape:
                tape.watch(var_list)
                loss = loss()
        elif tape is None:
            # Under a tape that recorded the loss (an Estimator traces its model_fn under one),
            # that tape differentiates it, as TensorFlow's graph mode needs no tape.
            tape = next((t for t in reversed(active_tapes()) if t.recorded(loss)), None)
        if tape is None:
            raise ValueError(
                f"Optimizer '{self.name}': `tape` is required when a Tensor loss that no active "
                "GradientTape recorded is passed to minimize(). "
                f"Received: loss={type(loss).__name__}, tape=None"
            )
        loss = convert_to_tensor(loss)
        output_gradients = None
        if self.loss_scale_factor is not None:
            # Same as differentiating the scaled loss; apply() divides the factor back out.
            output_gradients = Tensor(torch.full_like(loss._value, float(self.loss_scale_factor)))
        grads = tape.gradient(loss, var_list, output_gradients=output_gradients)
        return self.apply_gradients(zip(grads, var_list))

    # ------------------------------------------------------------------ config
    def get_config(self) -> dict:
        """The optimizer's hyper-parameters as a JSON-friendly dict (Keras 3 keys)."""
        lr = self._learning_rate
        if isinstance(lr, lrs.LearningRateSchedule):
            learning_rate = lrs.serialize(lr)
        elif isinstance(lr, Variable):
            learning_rate = float(lr.numpy())
        else:
            learning_rate = {
                "module": getattr(lr, "__module__", None),
                "class_name": "function",
                "config": getattr(lr, "__name__", repr(lr)),
                "registered_name": getattr(lr, "__name__", repr(lr)),
            }
        cfg = {
            "name": self.name,
            "learning_rate": learning_rate,
            "weight_decay": self.weight_decay,
            "clipnorm": self.clipnorm,
            "global_clipnorm": self.global_clipnorm,
            "clipvalue": self.clipvalue,
            "use_ema": self.use_ema,
            "ema_momentum": self.ema_momentum,
            "ema_overwrite_frequency": self.ema_overwrite_frequency,
            "loss_scale_factor": self.loss_scale_factor,
            "gradient_accumulation_steps": self.gradient_accumulation_steps,
        }
        if self._legacy_decay:
            cfg["decay"] = self._legacy_decay
        return cfg

    @classmethod
    def from_config(cls, config, custom_objects=None):
        """Creates an optimizer from `get_config()` output (tf.keras 2 configs included)."""
        config = dict(config)
        for key in _TF_KERAS_ONLY_CONFIG_KEYS:
            config.pop(key, None)
        lr = config.get("learning_rate")
        if isinstance(lr, dict):
            if lr.get("class_name") == "function":
                fn_name = lr.get("config")
                if not custom_objects or fn_name not in custom_objects:
                    raise ValueError(
                        f"{cls.__name__}.from_config: the learning rate is the function "
                        f"{fn_name!r}; pass it in `custom_objects` to rebuild the optimizer."
                    )
                config["learning_rate"] = custom_objects[fn_name]
            else:
                config["learning_rate"] = lrs.deserialize(lr, custom_objects=custom_objects)
        return cls(**config)

    def __repr__(self):
        return f"<{type(self).__name__} name={self.name}, built={self.built}>"
