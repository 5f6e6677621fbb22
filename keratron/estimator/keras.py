"""`model_to_estimator`: a compiled Keras-style model as an Estimator.

In every traced mode the model is cloned (fresh layers with the same names, so variable
paths match the model's) and the clone starts from the model's current weights; a
checkpoint in `model_dir`, when there is one, takes precedence, as for any Estimator.
Training uses a copy of the model's optimizer (from its config; its slot values too, when
the model's optimizer has been used) and the compiled loss; evaluation reports the compiled
metrics under their Keras names.
"""

from __future__ import annotations

from keratron.autodiff.primitive import suspend_tracing
from keratron.autodiff.tensor import mark_written
from keratron.estimator._tracing import mark_local
from keratron.estimator.canned.optimizers import copy_optimizer
from keratron.estimator.estimator import Estimator
from keratron.estimator.mode_keys import ModeKeys
from keratron.estimator.model_fn import EstimatorSpec

__all__ = ["model_to_estimator"]


def _fresh(spec):
    """Metric instances in a compile argument, replaced by new ones with the same config
    (each traced graph needs its own metric state)."""
    from keratron.metrics import Metric

    if isinstance(spec, Metric):
        return type(spec).from_config(spec.get_config())
    if isinstance(spec, dict):
        return {k: _fresh(v) for k, v in spec.items()}
    if isinstance(spec, (list, tuple)):
        return type(spec)(_fresh(v) for v in spec)
    return spec


def _model_inputs(model, features):
    names = list(getattr(model, "input_names", None) or [])
    if isinstance(features, dict):
        if sorted(features) != sorted(names):
            raise ValueError(
                "model_to_estimator: the input_fn's feature keys must be the model's input names. "
                f"Feature keys: {sorted(features)}; model input names: {sorted(names)}."
            )
        values = [features[n] for n in names]
        return values[0] if len(values) == 1 else values
    if len(names) > 1:
        raise ValueError(
            f"model_to_estimator: the model has {len(names)} inputs {names}; the input_fn must "
            "give features as a dict keyed by them."
        )
    return features


def _predictions(model, y_pred):
    names = list(getattr(model, "output_names", None) or [])
    if isinstance(y_pred, dict):
        return dict(y_pred)
    outs = list(y_pred) if isinstance(y_pred, (list, tuple)) else [y_pred]
    if len(names) != len(outs):
        names = [f"output_{i + 1}" for i in range(len(outs))]
    return dict(zip(names, outs))


def _under(path: str, scope: str) -> str:
    return path[len(scope) + 1 :] if path.startswith(scope + "/") else path


def _keras_model_fn(model):
    from keratron.models import clone_model

    compile_config = dict(model._compile_config or {})
    optimizer = model.optimizer
    # Keyed by the path under the optimizer's name: the copy is named afresh in the trace.
    source_opt_values = (
        {_under(v.path, optimizer.name): v for v in optimizer.variables} if optimizer.built else {}
    )

    def model_fn(features, labels, mode):
        clone = clone_model(model)
        with suspend_tracing():
            clone.set_weights(model.get_weights())
        opt = copy_optimizer(optimizer)
        clone.compile(
            optimizer=opt,
            loss=compile_config.get("loss"),
            loss_weights=compile_config.get("loss_weights"),
            metrics=_fresh(compile_config.get("metrics")),
            weighted_metrics=_fresh(compile_config.get("weighted_metrics")),
        )
        mark_local(clone.metrics_variables)
        x = _model_inputs(model, features)
        y_pred = clone(x, training=mode == ModeKeys.TRAIN)
        predictions = _predictions(model, y_pred)
        if mode == ModeKeys.PREDICT:
            return EstimatorSpec(mode, predictions=predictions)
        loss = clone._compute_loss(x=x, y=labels, y_pred=y_pred, training=mode == ModeKeys.TRAIN)
        if mode == ModeKeys.EVAL:
            metric_ops = {}
            if clone._compile_metrics is not None:
                clone._compile_metrics.update_state(labels, y_pred)
                metric_ops["keras_metrics"] = clone._compile_metrics
            return EstimatorSpec(
                mode, loss=loss, predictions=predictions, eval_metric_ops=metric_ops
            )
        train_op = opt.minimize(loss, clone.trainable_variables)
        if source_opt_values:
            with suspend_tracing():
                for v in opt.variables:
                    src = source_opt_values.get(_under(v.path, opt.name))
                    if src is not None and src.shape == v.shape:
                        v._value.copy_(src._value)
                        mark_written([v])
        return EstimatorSpec(mode, loss=loss, train_op=train_op, predictions=predictions)

    return model_fn


def model_to_estimator(
    keras_model=None,
    keras_model_path=None,
    custom_objects=None,
    model_dir=None,
    config=None,
    checkpoint_format="checkpoint",
    metric_names_map=None,
    export_outputs=None,
):
    """An Estimator that trains, evaluates and predicts with a compiled model.

    Features are a dict keyed by the model's input names (a single-input model also takes
    one tensor); labels are what the compiled loss expects.

    Args:
        keras_model: a compiled Sequential or functional model.
        keras_model_path: instead, a saved model file (`model.save(...)`) that includes its
            compile configuration.
        custom_objects: for loading `keras_model_path`.
        model_dir: the Estimator's directory.
        config: a RunConfig.
        checkpoint_format: accepted for TensorFlow compatibility (checkpoints are always the
            Estimator's format).
        metric_names_map: optional dict renaming metrics in `evaluate`'s results.
        export_outputs: not supported (the default PredictOutput is exported).

    Raises:
        ValueError: without exactly one model, or when the model is not compiled.

    Example:
        >>> import tempfile
        >>> model = keratron.Sequential(
        ...     [keratron.Input((4,)), keratron.layers.Dense(3, activation="softmax")])
        >>> model.compile(optimizer="adam", loss="sparse_categorical_crossentropy",
        ...               metrics=["accuracy"])
        >>> est = keratron.estimator.model_to_estimator(
        ...     keras_model=model, model_dir=tempfile.mkdtemp())
        >>> x, y = np.ones((2, 4), "float32"), np.array([0, 1])
        >>> _ = est.train(lambda: (x, y), steps=2)
        >>> sorted(est.evaluate(lambda: (x, y)))
        ['accuracy', 'global_step', 'loss']
    """
    if (keras_model is None) == (keras_model_path is None):
        raise ValueError(
            "model_to_estimator: give exactly one of `keras_model` and `keras_model_path`. "
            f"Received: keras_model={keras_model!r}, keras_model_path={keras_model_path!r}"
        )
    if export_outputs is not None:
        raise ValueError("model_to_estimator: `export_outputs` is not supported.")
    if keras_model_path is not None:
        from keratron.models import load_model

        keras_model = load_model(keras_model_path, custom_objects=custom_objects)
    if not getattr(keras_model, "compiled", False) or keras_model.optimizer is None:
        raise ValueError(
            "model_to_estimator: the given model has not been compiled yet. Compile it with "
            "`model.compile(optimizer, loss, ...)` before calling model_to_estimator()."
        )
    if getattr(keras_model, "_compile_loss", None) is None:
        raise ValueError(
            "model_to_estimator: the model was compiled without a `loss`; the Estimator needs "
            "one to train and evaluate."
        )
    from keratron.models import Sequential
    from keratron.models.functional import Functional

    if not isinstance(keras_model, (Sequential, Functional)):
        raise ValueError(
            "model_to_estimator: only Sequential and functional models can be converted (the "
            f"model is cloned per mode). Received: {type(keras_model).__name__}"
        )
    model_fn = _keras_model_fn(keras_model)
    est = Estimator(model_fn, model_dir=model_dir, config=config)
    if metric_names_map:
        est._metric_names_map = dict(metric_names_map)
    return est
