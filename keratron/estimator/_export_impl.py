"""`Estimator.export_saved_model`: trace the PREDICT graph on the serving inputs and write it
with `keratron.saved_model`'s format."""

from __future__ import annotations

import os
import shutil
import time

import numpy as np

from keratron.autodiff.tensor import collect_created_variables
from keratron.autodiff.tracing import Trace
from keratron.estimator import checkpoint as ckpt_lib
from keratron.estimator import export as export_lib
from keratron.estimator._tracing import (
    call_model_fn,
    current,
    naming_scope,
    running,
    variable_keys,
)
from keratron.estimator.mode_keys import ModeKeys

__all__ = ["export"]


def _signatures(spec, outputs):
    export_outputs = spec.export_outputs
    if not export_outputs:
        export_outputs = {
            export_lib.DEFAULT_SERVING_SIGNATURE_DEF_KEY: export_lib.PredictOutput(spec.predictions)
        }
    export_outputs = dict(export_outputs)
    default = export_lib.DEFAULT_SERVING_SIGNATURE_DEF_KEY
    if default not in export_outputs:
        if len(export_outputs) != 1:
            raise ValueError(
                "export_saved_model: export_outputs has several entries "
                f"{sorted(export_outputs)} and none named {default!r}; name the default one."
            )
        export_outputs[default] = next(iter(export_outputs.values()))
    sigs = {}
    for name, out in export_outputs.items():
        entries = {}
        for key, value in out.outputs.items():
            if isinstance(value, export_lib._HostLookup):
                entries[key] = (_add(outputs, value.ids), value.vocabulary)
            else:
                entries[key] = _add(outputs, value)
        sigs[name] = entries
    return sigs


def _add(outputs, t):
    for i, o in enumerate(outputs):
        if o is t:
            return i
    outputs.append(t)
    return len(outputs) - 1


def _new_export_dir(base):
    os.makedirs(base, exist_ok=True)
    stamp = int(time.time())
    while os.path.exists(os.path.join(base, str(stamp))) or os.path.exists(
        os.path.join(base, f"temp-{stamp}")
    ):
        stamp += 1
    return os.path.join(base, f"temp-{stamp}"), os.path.join(base, str(stamp))


def export(estimator, export_dir_base, serving_input_receiver_fn, prefix, assets_extra=None):
    values, step = ckpt_lib.read_checkpoint(prefix)
    trace = Trace()
    state = export_lib._export_state
    with (
        naming_scope(),
        collect_created_variables() as created,
        running(estimator, ModeKeys.PREDICT),
        trace,
    ):
        state.graph, state.batch_size, state.placeholders = trace.graph, 1, []
        saved_current = (current.tape, current.created)
        current.tape, current.created = None, created
        try:
            receiver = serving_input_receiver_fn()
            if not isinstance(receiver, export_lib.ServingInputReceiver):
                raise TypeError(
                    "serving_input_receiver_fn must return a ServingInputReceiver. Received: "
                    f"{type(receiver).__name__}"
                )
            placeholders = {id(t): kind for t, kind in state.placeholders}
            inputs = {}
            for name, t in receiver.receiver_tensors.items():
                if id(t) not in placeholders:
                    raise ValueError(
                        f"export_saved_model: receiver tensor {name!r} is not a placeholder; "
                        "create serving inputs with keratron.estimator.export.placeholder or "
                        "build_raw_serving_input_receiver_fn."
                    )
                inputs[name] = (t, placeholders[id(t)] == "string")
            spec = call_model_fn(
                estimator._model_fn,
                receiver.features,
                None,
                ModeKeys.PREDICT,
                estimator._params_for_call(),
                estimator._config,
            )
        finally:
            state.graph, state.placeholders = None, []
            current.tape, current.created = saved_current
    outputs: list = []
    signatures = _signatures(spec, outputs)
    gs = estimator._global_step
    ordered, seen = [], set()
    for v in list(created) + trace.captured_variables():
        if id(v) not in seen and v is not gs:
            seen.add(id(v))
            ordered.append(v)
    keys = variable_keys(ordered)
    missing = [k for k, v in keys.items() if k not in values and v.trainable]
    if missing:
        raise ValueError(
            f"export_saved_model: checkpoint {prefix!r} has no value for {missing}. It holds: "
            f"{sorted(values)}"
        )
    from keratron.estimator.estimator import _assign_now

    for key, var in keys.items():
        if key in values:
            _assign_now(var, values[key])
    names = {id(v): k for k, v in keys.items()}
    if any(v is gs for v in trace.captured_variables()):
        gs = _snapshot_global_step(trace, gs, step)
        names[id(gs)] = "global_step"
    compiled = trace.compile(outputs)
    from keratron.saved_model.save import write_serving_graph

    tmp_dir, final_dir = _new_export_dir(export_dir_base)
    os.makedirs(tmp_dir)
    try:
        write_serving_graph(tmp_dir, compiled, inputs, signatures, names, _batch_size(inputs))
        if assets_extra:
            for dest, source in assets_extra.items():
                target = os.path.join(tmp_dir, "assets.extra", dest)
                os.makedirs(os.path.dirname(target), exist_ok=True)
                shutil.copyfile(source, target)
        os.replace(tmp_dir, final_dir)
    except BaseException:
        shutil.rmtree(tmp_dir, ignore_errors=True)
        raise
    return os.fsencode(final_dir)


def _snapshot_global_step(trace, gs, step):
    """The serving graph reads the global step as of the exported checkpoint."""
    from keratron.autodiff.tensor import Variable

    frozen = Variable(np.int64(step), dtype="int64", trainable=False, name="global_step")
    trace.replace_variable(gs, frozen)
    return frozen


def _batch_size(inputs) -> int:
    sizes = {t.shape[0] for t, _ in inputs.values() if t.shape}
    if len(sizes) > 1:
        raise ValueError(
            f"export_saved_model: the serving inputs have different batch sizes {sorted(sizes)}."
        )
    return sizes.pop() if sizes else 1
