"""`tf.train`: the v1 optimizers with TF1's update rules and slot initial values, the global
step, and the v1 learning-rate decay functions.

Each optimizer adds one update op per variable (`update_<var>/Apply<Name>`) whose lowering
reads the variable and its slots from the session and assigns them, following TF1's
`training_ops` kernels; `minimize` = `compute_gradients` (`tf.gradients`) + `apply_gradients`.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from keratron import ops as kops
from keratron.autodiff.tensor import mark_written
from keratron.compat.v1 import array_ops, math_ops
from keratron.compat.v1 import variables as variables_lib
from keratron.compat.v1.checkpoint import Checkpoint, CheckpointManager
from keratron.compat.v1.example_proto import (
    BytesList,
    Example,
    Feature,
    FeatureList,
    FeatureLists,
    Features,
    FloatList,
    Int64List,
    SequenceExample,
)
from keratron.compat.v1.framework import (
    GraphKeys,
    convert_to_tensor,
    get_default_graph,
    make_op,
    op_scope,
)
from keratron.compat.v1.gradients import gradients
from keratron.compat.v1.monitored_session import (
    CheckpointSaverHook,
    LoggingTensorHook,
    MonitoredSession,
    MonitoredTrainingSession,
    NanLossDuringTrainingError,
    NanTensorHook,
    Scaffold,
    SessionRunArgs,
    SessionRunContext,
    SessionRunHook,
    SessionRunValues,
    SingularMonitoredSession,
    StepCounterHook,
    StopAtStepHook,
    SummarySaverHook,
)
from keratron.compat.v1.moving_averages import ExponentialMovingAverage
from keratron.compat.v1.queues import (
    Coordinator,
    QueueRunner,
    add_queue_runner,
    batch,
    range_input_producer,
    shuffle_batch,
    slice_input_producer,
    start_queue_runners,
    string_input_producer,
)
from keratron.compat.v1.saver import (
    CheckpointState,
    NewCheckpointReader,
    Saver,
    checkpoint_exists,
    get_checkpoint_state,
    latest_checkpoint,
    list_variables,
    load_checkpoint,
    load_variable,
)

__all__ = [
    "BytesList",
    "Example",
    "Feature",
    "FeatureList",
    "FeatureLists",
    "Features",
    "FloatList",
    "Int64List",
    "SequenceExample",
    "Checkpoint",
    "CheckpointManager",
    "Optimizer",
    "GradientDescentOptimizer",
    "MomentumOptimizer",
    "AdamOptimizer",
    "AdagradOptimizer",
    "AdadeltaOptimizer",
    "RMSPropOptimizer",
    "FtrlOptimizer",
    "ProximalGradientDescentOptimizer",
    "ProximalAdagradOptimizer",
    "get_or_create_global_step",
    "get_global_step",
    "create_global_step",
    "exponential_decay",
    "piecewise_constant",
    "polynomial_decay",
    "natural_exp_decay",
    "inverse_time_decay",
    "cosine_decay",
    "Saver",
    "CheckpointState",
    "NewCheckpointReader",
    "checkpoint_exists",
    "get_checkpoint_state",
    "latest_checkpoint",
    "list_variables",
    "load_checkpoint",
    "load_variable",
    "Coordinator",
    "QueueRunner",
    "add_queue_runner",
    "batch",
    "shuffle_batch",
    "start_queue_runners",
    "string_input_producer",
    "range_input_producer",
    "slice_input_producer",
    "ExponentialMovingAverage",
    "CheckpointSaverHook",
    "LoggingTensorHook",
    "MonitoredSession",
    "MonitoredTrainingSession",
    "NanLossDuringTrainingError",
    "NanTensorHook",
    "Scaffold",
    "SessionRunArgs",
    "SessionRunContext",
    "SessionRunHook",
    "SessionRunValues",
    "SingularMonitoredSession",
    "StepCounterHook",
    "StopAtStepHook",
    "SummarySaverHook",
]


class Optimizer:
    """The v1 optimizer base: `minimize`, `compute_gradients`, `apply_gradients`, slots."""

    GATE_NONE, GATE_OP, GATE_GRAPH = 0, 1, 2
    _slot_inits: dict = {}  # slot name -> initial value (a float) for the slots of each variable
    _slot_suffix: dict = {}  # slot name -> the slot variable's name suffix

    def __init__(self, use_locking=False, name=None):
        if not name:
            raise ValueError("Must specify the optimizer name")
        self._name = name
        self._slots: dict = {}  # slot name -> {var: slot Variable}
        self._non_slots: dict = {}

    def get_name(self) -> str:
        return self._name

    # ---- slots
    def get_slot_names(self) -> list:
        return sorted(self._slots)

    def get_slot(self, var, name):
        return self._slots.get(name, {}).get(var)

    def variables(self) -> list:
        out = list(self._non_slots.values())
        for table in self._slots.values():
            out.extend(table.values())
        return out

    def _make_var(self, name, value, dtype, shape=None):
        g = get_default_graph()
        saved = g._name_stack
        g._name_stack = ""  # slot names are absolute: "<var>/<Optimizer>"
        try:
            with g.control_dependencies(None):
                init = (
                    array_ops.constant(value, dtype=dtype, shape=shape)
                    if shape is not None
                    else value
                )
                return variables_lib.Variable(init, trainable=False, name=name, dtype=dtype)
        finally:
            g._name_stack = saved

    def _create_slots(self, var_list) -> None:
        for slot, init in self._slot_inits.items():
            table = self._slots.setdefault(slot, {})
            suffix = self._slot_suffix.get(slot, self._name)
            for v in var_list:
                if v not in table:
                    with get_default_graph().name_scope(None):
                        table[v] = self._make_var(
                            f"{v.op.name}/{suffix}", float(init), v.dtype, v.shape.as_list()
                        )

    def _hyper(self) -> dict:
        """Hyper-parameters as tensors (floats or tensors such as a decayed learning rate)."""
        return {}

    # ---- the public steps
    def compute_gradients(self, loss, var_list=None, gate_gradients=GATE_OP,
                          aggregation_method=None, colocate_gradients_with_ops=False,
                          grad_loss=None):  # fmt: skip
        if var_list is None:
            var_list = variables_lib.trainable_variables()
        var_list = list(var_list)
        if not var_list:
            raise ValueError("No variables to optimize.")
        grads = gradients(loss, var_list, grad_ys=grad_loss)
        return list(zip(grads, var_list))

    def apply_gradients(self, grads_and_vars, global_step=None, name=None):
        grads_and_vars = [(g, v) for g, v in grads_and_vars]
        if not any(g is not None for g, _ in grads_and_vars):
            raise ValueError(
                "No gradients provided for any variable, check your graph for ops that do not "
                f"support gradients, between variables {[v.name for _, v in grads_and_vars]} "
                "and loss."
            )
        live = [(g, v) for g, v in grads_and_vars if g is not None]
        self._create_slots([v for _, v in live])
        self._create_non_slots([v for _, v in live])
        g_ = get_default_graph()
        with op_scope(name, self._name) as scope:
            hyper = {k: convert_to_tensor(h, name=k) for k, h in self._hyper().items()}
            updates = []
            for grad, var in live:
                with g_.name_scope("update_" + var.op.name.replace(":", "_")):
                    updates.append(self._apply(grad, var, hyper))
            finish = self._finish(updates, hyper)
            if global_step is None:
                return variables_lib.group(*finish, name=scope + "/")
            with g_.control_dependencies(finish):
                return global_step.assign_add(
                    array_ops.constant(1, dtype=global_step.dtype), name=scope + "/"
                ).op

    def minimize(self, loss, global_step=None, var_list=None, gate_gradients=GATE_OP,
                 aggregation_method=None, colocate_gradients_with_ops=False, name=None,
                 grad_loss=None):  # fmt: skip
        """`compute_gradients` then `apply_gradients`: the training op."""
        gv = self.compute_gradients(loss, var_list=var_list, grad_loss=grad_loss)
        return self.apply_gradients(gv, global_step=global_step, name=name)

    def _lower(self, ctx, var, g, hs, names):
        """The update of `var` as graph ops: `_rule` on the values read, assigned back."""
        slots = {name: table[var] for name, table in self._slots.items()}
        h = {k: kops.cast(x, g.dtype) for k, x in zip(names, hs)}
        s = {k: ctx.read(sv) for k, sv in slots.items()}
        new_w, new_s = self._rule(ctx.read(var), g, s, h, ctx)
        for k, value in new_s.items():
            ctx.assign(slots[k], value, "assign")
        return ctx.assign(var, new_w, "assign")

    # ---- per-optimizer parts
    def _create_non_slots(self, var_list) -> None:
        pass

    def _finish(self, updates, hyper) -> list:
        return updates

    def _apply(self, grad, var, hyper):
        names = list(hyper)

        def lower(ctx, g, *hs):
            return self._lower(ctx, var, g, hs, names)

        op_type = "Apply" + type(self).__name__.replace("Optimizer", "")
        with op_scope(None, op_type) as scope:
            return make_op(
                op_type,
                scope,
                [convert_to_tensor(grad)] + [hyper[k] for k in names],
                lower,
                out_specs=[(var.shape, var.dtype)],
            )


class GradientDescentOptimizer(Optimizer):
    """`var -= learning_rate * grad`."""

    def __init__(self, learning_rate, use_locking=False, name="GradientDescent"):
        super().__init__(use_locking, name)
        self._lr = learning_rate

    def _hyper(self):
        return {"learning_rate": self._lr}

    def _rule(self, w, g, s, h, ctx):
        return w - h["learning_rate"] * g, {}


class MomentumOptimizer(Optimizer):
    """`accum = momentum * accum + grad; var -= lr * accum` (Nesterov:
    `var -= lr * grad + lr * momentum * accum`); `accum` starts at 0."""

    _slot_inits = {"momentum": 0.0}
    _slot_suffix = {"momentum": "Momentum"}

    def __init__(self, learning_rate, momentum, use_locking=False, name="Momentum",
                 use_nesterov=False):  # fmt: skip
        super().__init__(use_locking, name)
        self._lr, self._momentum, self._nesterov = learning_rate, momentum, use_nesterov

    def _hyper(self):
        return {"learning_rate": self._lr, "momentum": self._momentum}

    def _rule(self, w, g, s, h, ctx):
        lr, m = h["learning_rate"], h["momentum"]
        accum = s["momentum"] * m + g
        if self._nesterov:
            return w - (g * lr + accum * m * lr), {"momentum": accum}
        return w - lr * accum, {"momentum": accum}


# Dtypes torch's fused CPU Adam kernel takes.
_FUSED_DTYPES = (torch.float32, torch.float64)


def _fused_adam(w, m, v, g, lr, beta1, beta2, epsilon, beta1_power, beta2_power):
    """TF1's ApplyAdam on the storage of `w`, `m`, `v` in one pass of torch's fused kernel.

    The kernel computes `lr' / c1 * m / (sqrt(v) / sqrt(c2) + eps')` with its own bias
    corrections `c = 1 - beta^step` (in float64, from the step it is given: 1 here). Handing
    it `lr' = lr_t * c1 / sqrt(c2)` and `eps' = eps / sqrt(c2)` leaves TF1's
    `lr_t * m / (sqrt(v) + eps)`, with TF1's `lr_t = lr * sqrt(1 - beta2^t) / (1 - beta1^t)`
    computed at the variable's precision from the beta powers the graph keeps.
    """
    f = np.float32 if w.dtype == torch.float32 else np.float64
    b1, b2 = float(beta1), float(beta2)
    lr_t = f(float(lr)) * np.sqrt(f(1) - f(float(beta2_power))) / (f(1) - f(float(beta1_power)))
    c1, c2 = 1.0 - b1, 1.0 - b2
    values = [x._value for x in (w, m, v)]
    torch._fused_adam_(
        [values[0]], [g.contiguous()], [values[1]], [values[2]], [],
        [torch.tensor(1.0)],
        lr=float(lr_t) * c1 / math.sqrt(c2), beta1=b1, beta2=b2, weight_decay=0.0,
        eps=float(epsilon) / math.sqrt(c2), amsgrad=False, maximize=False,
    )  # fmt: skip
    mark_written([w, m, v])


class AdamOptimizer(Optimizer):
    """TF1's Adam: `lr_t = lr * sqrt(1 - beta2^t) / (1 - beta1^t)`,
    `var -= lr_t * m / (sqrt(v) + epsilon)`; slots m, v start at 0; `beta1_power` and
    `beta2_power` (non-slot variables) start at beta1, beta2."""

    _slot_inits = {"m": 0.0, "v": 0.0}

    def __init__(self, learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-08,
                 use_locking=False, name="Adam"):  # fmt: skip
        super().__init__(use_locking, name)
        self._lr, self._b1, self._b2, self._eps = learning_rate, beta1, beta2, epsilon
        self._slot_suffix = {"m": name, "v": name + "_1"}

    def _create_non_slots(self, var_list):
        if "beta1_power" not in self._non_slots:
            first = min(var_list, key=lambda v: v.name)
            with get_default_graph().name_scope(None):
                self._non_slots["beta1_power"] = self._make_var(
                    "beta1_power", float(self._b1), first.dtype, []
                )
                self._non_slots["beta2_power"] = self._make_var(
                    "beta2_power", float(self._b2), first.dtype, []
                )

    def _get_beta_accumulators(self):
        return self._non_slots["beta1_power"], self._non_slots["beta2_power"]

    def _hyper(self):
        return {
            "learning_rate": self._lr,
            "beta1": self._b1,
            "beta2": self._b2,
            "epsilon": self._eps,
        }

    def _rule(self, w, g, s, h, ctx):
        b1p = ctx.read(self._non_slots["beta1_power"])
        b2p = ctx.read(self._non_slots["beta2_power"])
        b1, b2 = h["beta1"], h["beta2"]
        lr_t = h["learning_rate"] * kops.sqrt(1 - b2p) / (1 - b1p)
        m = s["m"] + (g - s["m"]) * (1 - b1)
        v = s["v"] + (g * g - s["v"]) * (1 - b2)
        return w - lr_t * m / (kops.sqrt(v) + h["epsilon"]), {"m": m, "v": v}

    def _lower(self, ctx, var, g, hs, names):
        w = ctx.read(var)
        value = w._value
        if g.dtype != w.dtype or value.dtype not in _FUSED_DTYPES or value.device.type != "cpu":
            return super()._lower(ctx, var, g, hs, names)
        # One pass over the variable in torch's fused CPU Adam kernel instead of a dozen
        # elementwise ops: the update is an effect of the graph that writes w, m and v.
        m, v = ctx.read(self._slots["m"][var]), ctx.read(self._slots["v"][var])
        h = dict(zip(names, hs))
        inputs = [g, h["learning_rate"], h["beta1"], h["beta2"], h["epsilon"]]
        inputs += [ctx.read(p) for p in self._get_beta_accumulators()]
        ctx.effect(lambda *values: _fused_adam(w, m, v, *values), inputs, [w, m, v])
        return w

    def _finish(self, updates, hyper):
        b1p, b2p = self._get_beta_accumulators()
        with get_default_graph().control_dependencies(updates):
            u1 = b1p.assign(math_ops.multiply(b1p, hyper["beta1"]))
            u2 = b2p.assign(math_ops.multiply(b2p, hyper["beta2"]))
        return updates + [u1.op, u2.op]


class AdagradOptimizer(Optimizer):
    """`accum += grad^2; var -= lr * grad / sqrt(accum)`; `accum` starts at
    `initial_accumulator_value` (0.1)."""

    def __init__(self, learning_rate, initial_accumulator_value=0.1, use_locking=False,
                 name="Adagrad"):  # fmt: skip
        super().__init__(use_locking, name)
        self._lr = learning_rate
        self._slot_inits = {"accumulator": initial_accumulator_value}

    def _hyper(self):
        return {"learning_rate": self._lr}

    def _rule(self, w, g, s, h, ctx):
        acc = s["accumulator"] + g * g
        return w - h["learning_rate"] * g * kops.rsqrt(acc), {"accumulator": acc}


class AdadeltaOptimizer(Optimizer):
    """TF1's Adadelta (`accum` and `accum_update` start at 0)."""

    _slot_inits = {"accum": 0.0, "accum_update": 0.0}

    def __init__(self, learning_rate=0.001, rho=0.95, epsilon=1e-08, use_locking=False,
                 name="Adadelta"):  # fmt: skip
        super().__init__(use_locking, name)
        self._lr, self._rho, self._eps = learning_rate, rho, epsilon
        self._slot_suffix = {"accum": name, "accum_update": name + "_1"}

    def _hyper(self):
        return {"learning_rate": self._lr, "rho": self._rho, "epsilon": self._eps}

    def _rule(self, w, g, s, h, ctx):
        rho, eps = h["rho"], h["epsilon"]
        accum = s["accum"] * rho + g * g * (1 - rho)
        update = kops.sqrt(s["accum_update"] + eps) * kops.rsqrt(accum + eps) * g
        accum_update = s["accum_update"] * rho + update * update * (1 - rho)
        return w - update * h["learning_rate"], {"accum": accum, "accum_update": accum_update}


class RMSPropOptimizer(Optimizer):
    """TF1's RMSProp: `ms += (grad^2 - ms) * (1 - decay)`,
    `mom = momentum * mom + lr * grad / sqrt(ms + epsilon)`, `var -= mom`; the `rms` slot
    starts at 1 (TF1's choice), `momentum` at 0; `centered` subtracts the mean gradient's
    square."""

    def __init__(self, learning_rate, decay=0.9, momentum=0.0, epsilon=1e-10,
                 use_locking=False, centered=False, name="RMSProp"):  # fmt: skip
        super().__init__(use_locking, name)
        self._lr, self._decay, self._momentum, self._eps = learning_rate, decay, momentum, epsilon
        self._centered = centered
        self._slot_inits = {"rms": 1.0, "momentum": 0.0}
        self._slot_suffix = {"rms": name, "momentum": name + "_1"}
        if centered:
            self._slot_inits["mg"] = 0.0
            self._slot_suffix["mg"] = name + "_2"

    def _hyper(self):
        return {
            "learning_rate": self._lr,
            "decay": self._decay,
            "momentum": self._momentum,
            "epsilon": self._eps,
        }

    def _rule(self, w, g, s, h, ctx):
        rho = h["decay"]
        ms = s["rms"] + (g * g - s["rms"]) * (1 - rho)
        new = {"rms": ms}
        denom = ms + h["epsilon"]
        if self._centered:
            mg = s["mg"] + (g - s["mg"]) * (1 - rho)
            new["mg"] = mg
            denom = ms - mg * mg + h["epsilon"]
        mom = s["momentum"] * h["momentum"] + h["learning_rate"] * g * kops.rsqrt(denom)
        new["momentum"] = mom
        return w - mom, new


def _prox(prox_v, lr, l1, l2):
    shrunk = kops.sign(prox_v) * kops.maximum(kops.abs(prox_v) - lr * l1, 0.0)
    return shrunk / (1 + lr * l2)


class ProximalGradientDescentOptimizer(Optimizer):
    """Gradient descent followed by the proximal step of `l1 * |w| + l2 / 2 * w^2`."""

    def __init__(self, learning_rate, l1_regularization_strength=0.0,
                 l2_regularization_strength=0.0, use_locking=False,
                 name="ProximalGradientDescent"):  # fmt: skip
        super().__init__(use_locking, name)
        self._lr, self._l1, self._l2 = (
            learning_rate,
            l1_regularization_strength,
            (l2_regularization_strength),
        )

    def _hyper(self):
        return {"learning_rate": self._lr, "l1": self._l1, "l2": self._l2}

    def _rule(self, w, g, s, h, ctx):
        lr = h["learning_rate"]
        return _prox(w - lr * g, lr, h["l1"], h["l2"]), {}


class ProximalAdagradOptimizer(Optimizer):
    """Adagrad's step size with the proximal step; `accumulator` starts at 0.1."""

    def __init__(self, learning_rate, initial_accumulator_value=0.1,
                 l1_regularization_strength=0.0, l2_regularization_strength=0.0,
                 use_locking=False, name="ProximalAdagrad"):  # fmt: skip
        super().__init__(use_locking, name)
        self._lr, self._l1, self._l2 = (
            learning_rate,
            l1_regularization_strength,
            (l2_regularization_strength),
        )
        self._slot_inits = {"accumulator": initial_accumulator_value}

    def _hyper(self):
        return {"learning_rate": self._lr, "l1": self._l1, "l2": self._l2}

    def _rule(self, w, g, s, h, ctx):
        acc = s["accumulator"] + g * g
        lr_t = h["learning_rate"] * kops.rsqrt(acc)
        return _prox(w - g * lr_t, lr_t, h["l1"], h["l2"]), {"accumulator": acc}


class FtrlOptimizer(Optimizer):
    """FTRL-Proximal (TF1's `ApplyFtrl`): `accum` starts at `initial_accumulator_value`
    (0.1), `linear` at 0."""

    def __init__(self, learning_rate, learning_rate_power=-0.5, initial_accumulator_value=0.1,
                 l1_regularization_strength=0.0, l2_regularization_strength=0.0,
                 use_locking=False, name="Ftrl", accum_name=None, linear_name=None,
                 l2_shrinkage_regularization_strength=0.0, beta=None):  # fmt: skip
        super().__init__(use_locking, name)
        self._lr, self._power = learning_rate, learning_rate_power
        self._l1, self._l2 = l1_regularization_strength, l2_regularization_strength
        self._shrink = l2_shrinkage_regularization_strength
        self._slot_inits = {"accum": initial_accumulator_value, "linear": 0.0}
        self._slot_suffix = {"accum": accum_name or name, "linear": linear_name or name + "_1"}

    def _hyper(self):
        return {
            "learning_rate": self._lr,
            "l1": self._l1,
            "l2": self._l2,
            "shrink": self._shrink,
        }

    def _rule(self, w, g, s, h, ctx):
        lr, l1, l2, p = h["learning_rate"], h["l1"], h["l2"], -float(self._power)
        g_shrink = g + 2 * h["shrink"] * w if self._shrink else g
        accum, linear = s["accum"], s["linear"]
        new_accum = accum + g * g
        sigma = (kops.power(new_accum, p) - kops.power(accum, p)) / lr
        linear = linear + g_shrink - sigma * w
        quadratic = kops.power(new_accum, p) / lr + 2 * l2
        pre = (kops.sign(linear) * l1 - linear) / quadratic
        new_w = kops.where(kops.abs(linear) > l1, pre, kops.zeros_like(pre))
        return new_w, {"accum": new_accum, "linear": linear}


# ---------------------------------------------------------------------------- global step
def get_global_step(graph=None):
    g = graph if graph is not None else get_default_graph()
    found = g.get_collection(GraphKeys.GLOBAL_STEP)
    return found[0] if found else None


def create_global_step(graph=None):
    g = graph if graph is not None else get_default_graph()
    if get_global_step(g) is not None:
        raise ValueError("global_step already exists.")
    with g.as_default():
        saved = g._var_scope_stack
        g._var_scope_stack = []
        try:
            return variables_lib.get_variable(
                "global_step",
                shape=[],
                dtype="int64",
                initializer=variables_lib.zeros_initializer(),
                trainable=False,
                collections=[GraphKeys.GLOBAL_VARIABLES, GraphKeys.GLOBAL_STEP],
            )
        finally:
            g._var_scope_stack = saved


def get_or_create_global_step(graph=None):
    return get_global_step(graph) or create_global_step(graph)


# ---------------------------------------------------------------------------- decay functions
def _f(x, name=None):
    x = convert_to_tensor(x, name=name)
    return x if x.dtype.name == "float32" else math_ops.cast(x, "float32")


def exponential_decay(learning_rate, global_step, decay_steps, decay_rate, staircase=False,
                      name=None):  # fmt: skip
    """`learning_rate * decay_rate ^ (global_step / decay_steps)` (floored if `staircase`)."""
    with op_scope(name, "ExponentialDecay"):
        p = math_ops.divide(_f(global_step), _f(decay_steps))
        if staircase:
            p = math_ops.floor(p)
        return math_ops.multiply(_f(learning_rate), math_ops.pow(_f(decay_rate), p))


def natural_exp_decay(learning_rate, global_step, decay_steps, decay_rate, staircase=False,
                      name=None):  # fmt: skip
    with op_scope(name, "NaturalExpDecay"):
        p = math_ops.divide(_f(global_step), _f(decay_steps))
        if staircase:
            p = math_ops.floor(p)
        return math_ops.multiply(
            _f(learning_rate), math_ops.exp(math_ops.multiply(math_ops.negative(_f(decay_rate)), p))
        )


def inverse_time_decay(learning_rate, global_step, decay_steps, decay_rate, staircase=False,
                       name=None):  # fmt: skip
    with op_scope(name, "InverseTimeDecay"):
        p = math_ops.divide(_f(global_step), _f(decay_steps))
        if staircase:
            p = math_ops.floor(p)
        return math_ops.divide(
            _f(learning_rate), math_ops.add(math_ops.multiply(_f(decay_rate), p), 1.0)
        )


def polynomial_decay(learning_rate, global_step, decay_steps, end_learning_rate=0.0001,
                     power=1.0, cycle=False, name=None):  # fmt: skip
    with op_scope(name, "PolynomialDecay"):
        gs, ds = _f(global_step), _f(decay_steps)
        if cycle:
            ratio = math_ops.ceil(math_ops.divide(gs, ds))
            ds = math_ops.multiply(ds, math_ops.maximum(ratio, 1.0))
        else:
            gs = math_ops.minimum(gs, ds)
        frac = math_ops.subtract(1.0, math_ops.divide(gs, ds))
        lr, end = _f(learning_rate), _f(end_learning_rate)
        return math_ops.add(
            math_ops.multiply(math_ops.subtract(lr, end), math_ops.pow(frac, _f(power))), end
        )


def cosine_decay(learning_rate, global_step, decay_steps, alpha=0.0, name=None):
    with op_scope(name, "CosineDecay"):
        gs = math_ops.minimum(_f(global_step), _f(decay_steps))
        frac = math_ops.divide(gs, _f(decay_steps))
        cosine = math_ops.multiply(0.5, math_ops.add(1.0, math_ops.cos(math_ops.multiply(
            math.pi, frac))))  # fmt: skip
        decayed = math_ops.add(math_ops.multiply(1.0 - alpha, cosine), alpha)
        return math_ops.multiply(_f(learning_rate), decayed)


def piecewise_constant(x, boundaries, values, name=None):
    """`values[i]` where `boundaries[i-1] < x <= boundaries[i]` (the last value past the
    last boundary)."""
    if len(values) != len(boundaries) + 1:
        raise ValueError(
            "The length of boundaries should be 1 less than the length of values. Received: "
            f"{len(boundaries)} boundaries, {len(values)} values"
        )
    with op_scope(name, "PiecewiseConstant"):
        xv = convert_to_tensor(x)
        result = convert_to_tensor(values[-1])
        for b, v in reversed(list(zip(boundaries, values[:-1]))):
            cond = math_ops.less_equal(xv, convert_to_tensor(b, dtype=xv.dtype))
            result = array_ops.where(cond, array_ops.fill([], convert_to_tensor(v)), result)
        return result
