"""`Distiller`: a model that trains a student from a frozen teacher, as `keras.distillation`.

The training loss is Keras 3.15's:
`w * student_loss + (1 - w) * sum_i(weight_i * distillation_loss_i)`, with `w` the
`student_loss_weight`, the student loss taken between the labels and the student's outputs
(the compiled `loss`, reduced to a scalar; sample weights and `model.losses` do not enter it,
as in Keras), and each distillation loss comparing the teacher's outputs (with
`training=False`) to the student's, or intermediate layer outputs read by feature-extractor
models built once at construction. `fit` reports `loss` and the compiled metrics, then
`student_loss`, `distillation_loss` and `total_loss`. A list or dict of student losses, one
per output, applies here (Keras 3.15 on torch fails on it).

Saving writes the teacher, the student and the losses in the config; loading rebuilds the
distiller (from Keras's files too) without compiling it, as Keras does for a model whose
`compile` is its own.
"""

from __future__ import annotations

import warnings

from keratron import metrics as metrics_module
from keratron import ops, tree
from keratron.distillation.distillation_loss import (
    FeatureDistillation,
    LogitsDistillation,
    convert_loss_to_function,
)
from keratron.models import Model, Sequential
from keratron.saving import (
    deserialize_keras_object,
    register_keras_serializable,
    serialize_keras_object,
)

__all__ = ["Distiller"]

_FINAL = "final_output"


@register_keras_serializable(package="keratron")
class Distiller(Model):
    """Trains a student model from a teacher model's outputs (knowledge distillation).

    The teacher is frozen (`trainable=False`) when the distiller is made; `fit` trains the
    student's weights only. Calling the distiller calls the student.

    Args:
        teacher: a trained `keratron.Model`, the source of knowledge.
        student: the `keratron.Model` to train.
        distillation_losses: a `DistillationLoss` (`LogitsDistillation`,
            `FeatureDistillation`, or a subclass), or a list of them.
        distillation_loss_weights: one weight per distillation loss; defaults to 1.0 each
            (and is 1.0 when a single loss is given).
        student_loss_weight: the weight of the student's supervised loss, in [0, 1]; the
            distillation losses together get `1 - student_loss_weight`. Defaults to 0.5.
        name: the model's name. Defaults to "distiller".
        **kwargs: passed to `Model`.

    Raises:
        ValueError: for a teacher or student that is not a model, models whose input or
            output shapes or dtypes differ, a weight out of range, or losses that cannot
            apply to the two models.

    Example:
        >>> teacher = keratron.Sequential([keratron.Input((4,)), keratron.layers.Dense(3)])
        >>> student = keratron.Sequential([keratron.Input((4,)), keratron.layers.Dense(3)])
        >>> distiller = keratron.distillation.Distiller(
        ...     teacher=teacher, student=student,
        ...     distillation_losses=keratron.distillation.LogitsDistillation(temperature=3.0))
        >>> distiller.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
        >>> x_train, y_train = np.ones((8, 4), "float32"), np.zeros((8,), "int32")
        >>> history = distiller.fit(x_train, y_train, epochs=2, verbose=0)
        >>> sorted(history.history)
        ['distillation_loss', 'loss', 'student_loss', 'total_loss']
        >>> trained = distiller.student
        >>> trained is student, teacher.trainable
        (True, False)
    """

    def __init__(
        self,
        teacher,
        student,
        distillation_losses,
        distillation_loss_weights=None,
        student_loss_weight=0.5,
        name="distiller",
        **kwargs,
    ):
        super().__init__(name=name, **kwargs)
        _validate_models(teacher, student)
        self.teacher = teacher
        self.student = student

        if not isinstance(student_loss_weight, (int, float)):
            raise ValueError(
                f"student_loss_weight must be a number, got {type(student_loss_weight)}"
            )
        if student_loss_weight < 0.0 or student_loss_weight > 1.0:
            raise ValueError(
                f"student_loss_weight must be between 0.0 and 1.0, got {student_loss_weight}"
            )
        self.student_loss_weight = student_loss_weight

        if distillation_losses is None:
            raise ValueError(
                "'distillation_losses' cannot be `None`. Provide a distillation loss (e.g., "
                "LogitsDistillation or FeatureDistillation) or a list of distillation losses."
            )
        if not isinstance(distillation_losses, (list, tuple)):
            self.distillation_losses = [distillation_losses]
            self.distillation_loss_weights = [1.0]
        else:
            self.distillation_losses = distillation_losses
            if distillation_loss_weights is None:
                self.distillation_loss_weights = [1.0] * len(distillation_losses)
            else:
                if len(distillation_loss_weights) != len(distillation_losses):
                    raise ValueError(
                        f"Number of distillation_loss_weights ({len(distillation_loss_weights)}) "
                        f"must match number of distillation_losses ({len(distillation_losses)})"
                    )
                self.distillation_loss_weights = distillation_loss_weights
        for distillation_loss in self.distillation_losses:
            distillation_loss.validate_model_compatibility(teacher, student)

        self._create_multi_feature_extractors()
        self.teacher.trainable = False

        self.student_loss_tracker = metrics_module.Mean(name="student_loss")
        self.distillation_loss_tracker = metrics_module.Mean(name="distillation_loss")
        self.total_loss_tracker = metrics_module.Mean(name="total_loss")

    # ------------------------------------------------------------------ feature extractors
    def _create_multi_feature_extractors(self):
        teacher_names, student_names = [], []
        for distillation_loss in self.distillation_losses:
            for names, attr in (
                (teacher_names, "teacher_layer_name"),
                (student_names, "student_layer_name"),
            ):
                layer_name = getattr(distillation_loss, attr, None)
                if layer_name and layer_name not in names:
                    names.append(layer_name)
        self._teacher_feature_extractor = _feature_extractor(self.teacher, teacher_names)
        self._student_feature_extractor = _feature_extractor(self.student, student_names)
        # Tracked as Keras tracks them (they appear in `layers`, and in a saved file's layout);
        # they own no weights of their own.
        for extractor in (self._teacher_feature_extractor, self._student_feature_extractor):
            if extractor is not None:
                self._layers.append(extractor)

    def _extract_all_teacher_features(self, x):
        if self._teacher_feature_extractor is not None:
            return self._teacher_feature_extractor(x, training=False)
        return {_FINAL: self.teacher(x, training=False)}

    def _extract_all_student_features(self, x, y_pred):
        if self._student_feature_extractor is not None:
            return self._student_feature_extractor(x, training=True)
        return {_FINAL: y_pred}

    # ------------------------------------------------------------------ training
    def compile(self, optimizer="adam", loss=None, metrics=None, **kwargs):
        """Configures training: `loss` is the student's supervised loss (required).

        Args:
            optimizer: the optimizer that trains the student.
            loss: the student's loss (a name, instance or function, or a structure of them
                for several outputs).
            metrics: a list or tuple of metrics on the student's outputs.
            **kwargs: passed to `Model.compile`.

        Raises:
            ValueError: if `loss` is None or `metrics` is not a list or tuple.
        """
        if loss is None:
            raise ValueError("'loss' cannot be `None`.")
        self._student_loss = tree.map_structure(convert_loss_to_function, loss)
        self._student_loss_for_serialization = loss
        if metrics is not None and not isinstance(metrics, (list, tuple)):
            raise ValueError(f"metrics must be a list or tuple, got {type(metrics)}")
        super().compile(optimizer=optimizer, loss=None, metrics=metrics, **kwargs)

    def compile_from_config(self, config):
        """Does not compile, as Keras does for a model whose `compile` is its own: call
        `compile()` after loading."""
        warnings.warn(
            "`compile()` was not called as part of model loading because the model's "
            "`compile()` method is custom. All subclassed Models that have `compile()` "
            "overridden should also override `get_compile_config()` and "
            "`compile_from_config(config)`. Alternatively, you can call `compile()` "
            "manually after loading.",
            stacklevel=2,
        )

    def call(self, inputs, training=None, **kwargs):
        """The student's outputs."""
        return self.student(inputs, training=training, **kwargs)

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        """The weighted sum of the student loss and the distillation losses (a scalar);
        also updates the `student_loss`, `distillation_loss` and `total_loss` metrics.

        Args:
            x: the inputs (the teacher and the feature extractors run on them).
            y: the labels; without them the student loss is 0.
            y_pred: the student's outputs; computed from `x` when None.
            sample_weight: accepted and not used, as in Keras.
            training: the mode `y_pred` is computed in when it is not given.
        """
        if y_pred is None:
            y_pred = self(x, training=training)
        student_loss = 0.0
        if self.student_loss_weight > 0.0 and y is not None:
            loss_values = tree.map_structure(
                lambda fn, target, prediction: fn(target, prediction), self._student_loss, y, y_pred
            )
            flat = tree.flatten(loss_values)
            student_loss = ops.sum(ops.stack(flat)) if len(flat) > 1 else flat[0]
            if len(getattr(student_loss, "shape", ())) > 0:
                student_loss = ops.mean(student_loss)

        distillation_loss = 0.0
        if self.student_loss_weight < 1.0:
            teacher_features = self._extract_all_teacher_features(x)
            student_features = self._extract_all_student_features(x, y_pred)
            for loss_fn, weight in zip(self.distillation_losses, self.distillation_loss_weights):
                if getattr(loss_fn, "teacher_layer_name", None) is not None:
                    teacher_output = _features_for(loss_fn, teacher_features, "teacher")
                    student_output = _features_for(loss_fn, student_features, "student")
                else:
                    teacher_output = teacher_features[_FINAL]
                    student_output = y_pred
                loss_fn.validate_outputs(teacher_output, student_output)
                value = loss_fn.compute_loss(teacher_output, student_output)
                if len(getattr(value, "shape", ())) > 0:
                    raise ValueError(
                        f"Distillation loss {type(loss_fn).__name__} returned a non-scalar loss "
                        f"with shape {value.shape}. The compute_loss method must return a "
                        "scalar tensor."
                    )
                distillation_loss = ops.add(distillation_loss, ops.multiply(weight, value))

        weight = self.student_loss_weight
        total_loss = ops.add(
            ops.multiply(weight, student_loss),
            ops.multiply(ops.subtract(1.0, weight), distillation_loss),
        )
        self.student_loss_tracker.update_state(student_loss)
        self.distillation_loss_tracker.update_state(distillation_loss)
        self.total_loss_tracker.update_state(total_loss)
        return total_loss

    # ------------------------------------------------------------------ config
    def get_config(self) -> dict:
        config = super().get_config()
        config.update(
            {
                "teacher": serialize_keras_object(self.teacher),
                "student": serialize_keras_object(self.student),
                "distillation_losses": [_serialize_loss(loss) for loss in self.distillation_losses],
                "distillation_loss_weights": self.distillation_loss_weights,
                "student_loss_weight": self.student_loss_weight,
            }
        )
        return config

    @classmethod
    def from_config(cls, config, custom_objects=None):
        config = dict(config)
        # Keras writes its distillation losses by module ("keras.distillation"), not by a
        # registered name: they are found here by class name.
        custom_objects = {
            "FeatureDistillation": FeatureDistillation,
            "LogitsDistillation": LogitsDistillation,
            **(custom_objects or {}),
        }
        for key in ("teacher", "student"):
            config[key] = deserialize_keras_object(config[key], custom_objects=custom_objects)
        config["distillation_losses"] = [
            deserialize_keras_object(loss, custom_objects=custom_objects)
            for loss in config["distillation_losses"]
        ]
        return cls(**config)


def _serialize_loss(loss):
    # keratron's own losses are written as Keras writes its own (Keras reads them by module).
    if type(loss) in (LogitsDistillation, FeatureDistillation):
        return {
            "module": "keras.distillation",
            "class_name": type(loss).__name__,
            "config": loss.get_config(),
            "registered_name": None,
        }
    return serialize_keras_object(loss)


def _features_for(loss_fn, features, role):
    layer_name = getattr(loss_fn, f"{role}_layer_name") or _FINAL
    if layer_name not in features:
        raise RuntimeError(
            f"Failed to extract features for {type(loss_fn).__name__} targeting teacher "
            f"layer '{loss_fn.teacher_layer_name}' and student layer "
            f"'{loss_fn.student_layer_name}'. Original error: Layer '{layer_name}' not found "
            f"in extracted features. Available: {list(features)}"
        )
    return features[layer_name]


def _feature_extractor(model, layer_names):
    """A functional model giving `{"final_output": ..., name: layer output, ...}`, or None
    when no layer is named."""
    if not layer_names:
        return None
    if getattr(model, "inputs", None) is None:
        raise ValueError(
            f"Cannot create feature extractor for {model.name}. The model has no symbolic "
            "inputs attribute."
        )
    final_output = model.layers[-1].output if isinstance(model, Sequential) else model.output
    outputs = {_FINAL: final_output}
    for layer_name in layer_names:
        outputs[layer_name] = model.get_layer(name=layer_name).output
    return Model(inputs=model.inputs, outputs=outputs, name=f"{model.name}_multi_feature_extractor")


def _validate_models(teacher, student):
    for role, model in (("Teacher", teacher), ("Student", student)):
        if not isinstance(model, Model):
            raise ValueError(f"{role} must be a keratron.Model, got {type(model)}")
    teacher_inputs = getattr(teacher, "inputs", None)
    student_inputs = getattr(student, "inputs", None)
    teacher_outputs = getattr(teacher, "outputs", None)
    student_outputs = getattr(student, "outputs", None)
    if teacher_inputs is not None and student_inputs is not None:
        tree.map_structure(
            lambda t, s: _assert_shapes_are_compatible(t.shape, s.shape, "input"),
            teacher_inputs,
            student_inputs,
        )
    if teacher_outputs is not None and student_outputs is not None:
        tree.map_structure(
            lambda t, s: _assert_shapes_are_compatible(t.shape, s.shape, "output"),
            teacher_outputs,
            student_outputs,
        )
    if teacher_inputs is not None and student_inputs is not None:
        tree.map_structure(
            lambda t, s: _assert_same_dtype(t.dtype, s.dtype, "input"),
            teacher_inputs,
            student_inputs,
        )
        if teacher_outputs is not None and student_outputs is not None:
            tree.map_structure(
                lambda t, s: _assert_same_dtype(t.dtype, s.dtype, "output"),
                teacher_outputs,
                student_outputs,
            )


def _assert_shapes_are_compatible(shape1, shape2, context):
    if len(shape1) != len(shape2):
        raise ValueError(
            f"Teacher and student {context} shapes have different dimensions. "
            f"Teacher: {shape1}, Student: {shape2}."
        )
    for dim1, dim2 in zip(shape1, shape2):
        if dim1 is not None and dim2 is not None and dim1 != dim2:
            raise ValueError(
                f"Teacher and student {context} shapes are incompatible. Teacher: {shape1}, "
                f"Student: {shape2}. All dimensions must match."
            )


def _assert_same_dtype(teacher_dtype, student_dtype, context):
    if teacher_dtype != student_dtype:
        raise ValueError(
            f"Teacher and student {context} dtypes must match. "
            f"Teacher: {teacher_dtype}, Student: {student_dtype}."
        )
