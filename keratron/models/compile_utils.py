"""The loss and metrics containers that `compile` builds (Keras's `CompileLoss` and
`CompileMetrics`), and the tf.keras 2 `compiled_loss` / `compiled_metrics` views of them.

Both containers resolve their configuration lazily, on the first batch, because "accuracy"
and "crossentropy" depend on the shapes of the labels and predictions. Outputs are matched
to losses and metrics by position (lists), by key (dict outputs) or by output name (a dict
of losses for a list-output functional model).
"""

from __future__ import annotations

from keratron import losses as losses_module
from keratron import metrics as metrics_module
from keratron import ops
from keratron.autodiff import tree

__all__ = ["CompileLoss", "CompileMetrics", "LegacyCompiledLoss", "LegacyCompiledMetrics"]


class _Outputs:
    """The model's outputs as flat entries: a key (dict key, list index or None for a single
    output) and a display name (dict key, else the output layer's name, else None)."""

    def __init__(self, y_pred, output_names):
        if isinstance(y_pred, dict):
            self.kind = "dict"
            self.keys = sorted(y_pred, key=str)
            self.names = [str(k) for k in self.keys]
        elif isinstance(y_pred, (list, tuple)) and len(y_pred) != 1:
            self.kind = "list"
            self.keys = list(range(len(y_pred)))
            if output_names and len(output_names) == len(y_pred):
                self.names = list(output_names)
            else:
                self.names = [None] * len(y_pred)
        else:
            self.kind = "single"
            self.keys = [None]
            name = output_names[0] if output_names and len(output_names) == 1 else None
            self.names = [name]

    def __len__(self):
        return len(self.keys)

    def flatten(self, values, what):
        """`values` (a structure matching the outputs) as a list aligned with the entries."""
        n = len(self.keys)
        if self.kind == "single":
            if isinstance(values, (list, tuple)) and len(values) == 1:
                return [values[0]]
            name = self.names[0]
            if isinstance(values, dict) and name is not None and list(values) == [name]:
                return [values[name]]  # keyed by the output's name, as tf.keras 2 took it
            return [values]
        if isinstance(values, dict):
            if self.kind == "dict":
                lookup = self.keys
            elif all(name is not None for name in self.names):
                lookup = self.names
            else:
                raise ValueError(
                    f"`{what}` was given as a dict, but the model's outputs are a list without "
                    f"names. Received keys: {sorted(values, key=str)}"
                )
            missing = [k for k in lookup if k not in values]
            if missing:
                raise ValueError(
                    f"`{what}` is missing entries for the outputs {missing}. Expected keys "
                    f"{list(lookup)}, received {sorted(values, key=str)}."
                )
            return [values[k] for k in lookup]
        if isinstance(values, (list, tuple)) and len(values) == n:
            return list(values)
        raise ValueError(
            f"`{what}` does not match the model's {n} outputs: expected a list of {n} or a "
            f"dict keyed by {self.names if self.kind == 'list' else self.keys}. Received: "
            f"{tree.map_structure(lambda _: '*', values)}"
        )

    def align_config(self, spec, what):
        """A user's `loss` / `loss_weights` / `metrics` argument, one entry per output
        (None where an output gets nothing); a non-nested spec applies to every output."""
        n = len(self.keys)
        if isinstance(spec, dict):
            if self.kind == "dict":
                known = set(self.keys)
                lookup = self.keys
            elif self.kind == "list" and all(name is not None for name in self.names):
                known = set(self.names)
                lookup = self.names
            elif self.kind == "single" and self.names[0] is not None:
                known = {self.names[0]}
                lookup = self.names
            else:
                raise ValueError(
                    f"`{what}` was given as a dict, but the model's outputs have no names. "
                    f"Received: {what}={spec!r}"
                )
            unknown = [k for k in spec if k not in known]
            if unknown:
                raise ValueError(
                    f"`{what}` has keys {unknown} that match no output. Expected keys among "
                    f"{list(lookup)}. Received: {what}={spec!r}"
                )
            return [spec.get(k) for k in lookup]
        if isinstance(spec, (list, tuple)):
            if self.kind == "single":
                return [spec] if what.endswith("metrics") else _single(spec, what)
            if len(spec) != n:
                raise ValueError(
                    f"`{what}` should have one entry per output ({n}); received {len(spec)}: "
                    f"{what}={spec!r}"
                )
            return list(spec)
        return [spec] * n


def _single(spec, what):
    if len(spec) != 1:
        raise ValueError(
            f"The model has a single output, but `{what}` has {len(spec)} entries: {spec!r}"
        )
    return [spec[0]]


def _batch_size(y_pred) -> int:
    first = tree.flatten(y_pred)[0]
    return int(first.shape[0]) if first.shape else 1


def _loss_name(loss, identifier) -> str:
    if isinstance(identifier, str):
        return identifier
    return getattr(loss, "name", None) or getattr(loss, "__name__", type(loss).__name__)


class CompileLoss:
    """The compiled loss: one loss per output, weighted and summed.

    With more than one output loss, a `Mean` tracker named "<output>_loss" records each
    output's (unweighted) loss; these trackers are listed in `model.metrics`.
    """

    def __init__(self, loss, loss_weights=None, output_names=None):
        if loss_weights is not None and not isinstance(
            loss_weights, (list, tuple, dict, float, int)
        ):
            raise ValueError(
                "Expected `loss_weights` argument to be a float (single output case) or a "
                "list, tuple, or dict (multiple output case). Received instead: "
                f"loss_weights={loss_weights!r} of type {type(loss_weights).__name__}"
            )
        self._user_loss = loss
        self._user_loss_weights = loss_weights
        self.output_names = list(output_names) if output_names else None
        self.built = False
        self._entries = []  # (output index, loss object, weight, name)
        self._metrics = []

    @property
    def metrics(self) -> list:
        return list(self._metrics)

    def build(self, y_true, y_pred):
        outputs = _Outputs(y_pred, self.output_names)
        self._outputs = outputs
        specs = outputs.align_config(self._user_loss, "loss")
        if self._user_loss_weights is None:
            weights = [None] * len(outputs)
        elif isinstance(self._user_loss_weights, (float, int)):
            weights = [float(self._user_loss_weights)] * len(outputs)
        else:
            weights = outputs.align_config(self._user_loss_weights, "loss_weights")
        flat_true = outputs.flatten(y_true, "y")
        flat_pred = outputs.flatten(y_pred, "y_pred")
        self._entries = []
        for i, spec in enumerate(specs):
            if spec is None:
                continue
            fn = losses_module.resolve_loss(spec, _shape(flat_true[i]), _shape(flat_pred[i]))
            if not isinstance(fn, losses_module.Loss):
                fn = losses_module.LossFunctionWrapper(fn, name=_loss_name(fn, spec))
            name = outputs.names[i]
            if name is None:
                name = outputs.keys[i] if outputs.kind == "dict" else fn.name
            self._entries.append((i, fn, weights[i], str(name)))
        if not self._entries:
            raise ValueError(
                f"No loss was given for any output. Received: loss={self._user_loss!r}"
            )
        if len(self._entries) > 1:
            self._metrics = [metrics_module.Mean(name=f"{name}_loss") for *_, name in self._entries]
        self.built = True

    def __call__(self, y_true, y_pred, sample_weight=None):
        if not self.built:
            self.build(y_true, y_pred)
        outputs = self._outputs
        flat_true = outputs.flatten(y_true, "y")
        flat_pred = outputs.flatten(y_pred, "y_pred")
        if sample_weight is not None and tree.is_nested(sample_weight) and len(outputs) > 1:
            flat_sw = outputs.flatten(sample_weight, "sample_weight")
        else:
            flat_sw = [sample_weight] * len(outputs)
        total = None
        for k, (i, fn, weight, _) in enumerate(self._entries):
            value = fn(flat_true[i], flat_pred[i], flat_sw[i])
            if self._metrics:
                self._metrics[k].update_state(value, sample_weight=_batch_size(flat_pred[i]))
            if weight is not None:
                value = ops.multiply(value, weight)
            total = value if total is None else ops.add(total, value)
        return total


def _shape(x):
    return tuple(x.shape) if hasattr(x, "shape") else ()


class _MetricsForOutput:
    def __init__(self, metrics, output_name):
        self.metrics = metrics
        self.output_name = output_name


class CompileMetrics(metrics_module.Metric):
    """The compiled metrics of every output, as one metric whose `result()` is a dict.

    Result names are Keras's: the metric's name, prefixed with "<output>_" when the model has
    several outputs; a repeated name gets "_1", "_2", ...; a weighted metric whose name is
    taken becomes "weighted_<name>".
    """

    def __init__(self, metrics, weighted_metrics, output_names=None, losses=None):
        for arg, value in (("metrics", metrics), ("weighted_metrics", weighted_metrics)):
            if value and not isinstance(value, (list, tuple, dict)):
                raise ValueError(
                    f"Expected `{arg}` argument to be a list, tuple, or dict. Received "
                    f"instead: {arg}={value!r} of type {type(value).__name__}"
                )
        super().__init__(name="compile_metrics")
        self._user_metrics = metrics
        self._user_weighted_metrics = weighted_metrics
        self._user_losses = losses
        self.output_names = list(output_names) if output_names else None
        self.built = False
        self._flat_metrics = []
        self._flat_weighted_metrics = []

    @property
    def metrics(self) -> list:
        """Every metric object, unweighted first."""
        out = []
        for group in self._flat_metrics + self._flat_weighted_metrics:
            if group is not None:
                out.extend(group.metrics)
        return out

    @property
    def variables(self) -> list:
        out = []
        for m in self.metrics:
            out.extend(m.variables)
        return out

    def build(self, y_true, y_pred):
        outputs = _Outputs(y_pred, self.output_names)
        self._outputs = outputs
        flat_true = outputs.flatten(y_true, "y")
        flat_pred = outputs.flatten(y_pred, "y_pred")
        if self._user_losses is None:
            losses = [None] * len(outputs)
        else:
            try:
                losses = outputs.align_config(self._user_losses, "loss")
            except ValueError:
                losses = [None] * len(outputs)
        multi = len(outputs) > 1

        def resolve(spec, what):
            if not spec:
                return [None] * len(outputs)
            per_output = outputs.align_config(spec, what)
            groups = []
            for i, entry in enumerate(per_output):
                if entry is None:
                    groups.append(None)
                    continue
                entries = entry if isinstance(entry, (list, tuple)) else [entry]
                metrics = [
                    metrics_module.get_metric(
                        m, losses[i], _shape(flat_true[i]), _shape(flat_pred[i])
                    )
                    for m in entries
                ]
                name = outputs.names[i] if multi else None
                if multi and name is None and outputs.kind == "dict":
                    name = str(outputs.keys[i])
                groups.append(_MetricsForOutput(metrics, name))
            return groups

        self._flat_metrics = resolve(self._user_metrics, "metrics")
        self._flat_weighted_metrics = resolve(self._user_weighted_metrics, "weighted_metrics")
        self.built = True

    def update_state(self, y_true, y_pred, sample_weight=None):
        if not self.built:
            self.build(y_true, y_pred)
        outputs = self._outputs
        flat_true = outputs.flatten(y_true, "y")
        flat_pred = outputs.flatten(y_pred, "y_pred")
        for group, yt, yp in zip(self._flat_metrics, flat_true, flat_pred):
            if group is not None:
                for m in group.metrics:
                    m.update_state(yt, yp)
        if sample_weight is not None and tree.is_nested(sample_weight) and len(outputs) > 1:
            flat_sw = outputs.flatten(sample_weight, "sample_weight")
        else:
            flat_sw = [sample_weight] * len(outputs)
        for group, yt, yp, sw in zip(self._flat_weighted_metrics, flat_true, flat_pred, flat_sw):
            if group is not None:
                for m in group.metrics:
                    m.update_state(yt, yp, sample_weight=sw)

    def reset_state(self):
        for m in self.metrics:
            m.reset_state()

    def result(self) -> dict:
        if not self.built:
            raise ValueError("Cannot get result() since the metric has not yet been built.")
        results, counters = {}, {}

        def prefixed(group, name):
            return f"{group.output_name}_{name}" if group.output_name else name

        for group in self._flat_metrics:
            if group is None:
                continue
            for m in group.metrics:
                name = prefixed(group, m.name)
                if name in counters:
                    counters[name] += 1
                    name = f"{name}_{counters[name] - 1}"
                else:
                    counters[name] = 1
                results[name] = m.result()
        for group in self._flat_weighted_metrics:
            if group is None:
                continue
            for m in group.metrics:
                name = prefixed(group, m.name)
                if name not in counters:
                    counters[name] = 1
                else:
                    name = prefixed(group, f"weighted_{m.name}")
                    if name in counters:
                        counters[name] += 1
                        name = f"{name}_{counters[name] - 1}"
                    else:
                        counters[name] = 1
                results[name] = m.result()
        return results


class LegacyCompiledLoss:
    """tf.keras 2's `model.compiled_loss(y, y_pred, sample_weight, regularization_losses)`:
    the compiled loss plus the given regularization losses, recorded in the "loss" tracker."""

    def __init__(self, model):
        self._model = model

    def __call__(self, y_true, y_pred, sample_weight=None, regularization_losses=None):
        model = self._model
        terms = []
        if model._compile_loss is not None:
            value = model._compile_loss(y_true, y_pred, sample_weight)
            if value is not None:
                terms.append(value)
        for loss in regularization_losses or []:
            terms.append(ops.sum(loss))
        if not terms:
            raise ValueError("No loss to compute. Provide a `loss` argument in `compile()`.")
        total = terms[0]
        for t in terms[1:]:
            total = ops.add(total, t)
        if model._loss_tracker is not None:
            model._loss_tracker.update_state(total, sample_weight=_batch_size(y_pred))
        return total

    @property
    def metrics(self) -> list:
        out = [self._model._loss_tracker] if self._model._loss_tracker is not None else []
        if self._model._compile_loss is not None:
            out.extend(self._model._compile_loss.metrics)
        return out


class LegacyCompiledMetrics:
    """tf.keras 2's `model.compiled_metrics`: `update_state(y, y_pred, sample_weight)` and
    the flat list of compiled metrics."""

    def __init__(self, model):
        self._model = model

    def update_state(self, y_true, y_pred, sample_weight=None):
        if self._model._compile_metrics is not None:
            self._model._compile_metrics.update_state(y_true, y_pred, sample_weight)

    def reset_state(self):
        if self._model._compile_metrics is not None:
            self._model._compile_metrics.reset_state()

    @property
    def metrics(self) -> list:
        cm = self._model._compile_metrics
        return cm.metrics if cm is not None else []
