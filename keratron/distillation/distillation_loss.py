"""Distillation losses, as `keras.distillation`: what a `Distiller` compares between teacher
and student.

`LogitsDistillation` compares the two models' outputs divided by a temperature;
`FeatureDistillation` compares outputs (or intermediate layer outputs) as they are. Both take
one loss, or a structure of losses matching the outputs' (`None` skips an output), and return
the sum of the per-output means, as Keras 3.15 does. A loss given by name is
`keratron.losses.get(name)`: "kl_divergence" is the plain function, so only a
`KLDivergence` instance takes the softmax and temperature-squared path, in Keras too.
"""

from __future__ import annotations

from keratron import losses as losses_module
from keratron import ops, tree
from keratron.saving import register_keras_serializable, serialize_keras_object

__all__ = ["DistillationLoss", "FeatureDistillation", "LogitsDistillation"]


def convert_loss_to_function(loss_item):
    """A loss name, instance or function as a callable loss (`None` stays `None`).

    Raises:
        ValueError: for a name that is not a loss.
    """
    if loss_item is None:
        return None
    if isinstance(loss_item, str):
        try:
            loss_fn = losses_module.get(loss_item)
        except ValueError:
            loss_fn = None
        if loss_fn is None:
            raise ValueError(f"Unknown loss function: '{loss_item}'.")
        return loss_fn
    return loss_item


def _convert_losses(loss):
    return tree.map_structure(convert_loss_to_function, loss)


def _deserialize_losses(config):
    """Losses from their configs (keratron's or Keras's): a config, a name, `None`, or a
    list / dict of those."""
    if config is None:
        return None
    if isinstance(config, (list, tuple)):
        return [_deserialize_losses(c) for c in config]
    if isinstance(config, dict) and "class_name" not in config:
        return {k: _deserialize_losses(v) for k, v in config.items()}
    return losses_module.deserialize(config)


def _sum_of(loss_values):
    return ops.sum(ops.stack(tree.flatten(loss_values)))


class DistillationLoss:
    """Base class of distillation losses: how a `Distiller` compares teacher and student.

    Subclasses implement `compute_loss(teacher_outputs, student_outputs)`, returning a
    scalar, and may override `validate_outputs` and `validate_model_compatibility`.

    Example:
        >>> class MeanGap(keratron.distillation.DistillationLoss):
        ...     def compute_loss(self, teacher_outputs, student_outputs, **kwargs):
        ...         return keratron.ops.mean(keratron.ops.abs(teacher_outputs - student_outputs))
    """

    def compute_loss(self, teacher_outputs, student_outputs, **kwargs):
        """The distillation loss between teacher and student outputs (a scalar tensor).

        Args:
            teacher_outputs: the teacher's outputs (a tensor or a structure of tensors).
            student_outputs: the student's outputs, in the same structure.
            **kwargs: extra arguments of a custom loss.
        """
        raise NotImplementedError("Subclasses must implement compute_loss")

    def validate_outputs(self, teacher_outputs, student_outputs):
        """Raises `ValueError` unless the two outputs have the same structure."""
        tree.assert_same_structure(teacher_outputs, student_outputs)

    def validate_model_compatibility(self, teacher, student):
        """Raises `ValueError` if this loss cannot compare the two models (no check here)."""


@register_keras_serializable(package="keratron")
class FeatureDistillation(DistillationLoss):
    """Compares teacher and student features: the final outputs, or the outputs of two named
    layers (of Functional or Sequential models).

    Args:
        loss: a loss name, instance or function, or a structure of them matching the
            outputs' (`None` skips an output; at least one must be given). Defaults to "mse".
        teacher_layer_name: the teacher layer whose output is compared; `None` for the final
            output.
        student_layer_name: the student layer whose output is compared; `None` for the final
            output.

    Example:
        >>> loss = keratron.distillation.FeatureDistillation(
        ...     loss="mse", teacher_layer_name="dense_1", student_layer_name="dense_1")
    """

    def __init__(self, loss="mse", teacher_layer_name=None, student_layer_name=None):
        self.teacher_layer_name = teacher_layer_name
        self.student_layer_name = student_layer_name
        self.loss = _convert_losses(loss)
        if all(item is None for item in tree.flatten(self.loss)):
            raise ValueError(
                "The `loss` argument in `FeatureDistillation` must contain at least one "
                "non-`None` value."
            )

    def validate_model_compatibility(self, teacher, student):
        """Checks that named layers exist, in models with symbolic inputs."""
        if self.teacher_layer_name is not None or self.student_layer_name is not None:
            subclassed = [
                role
                for role, model in (("teacher", teacher), ("student", student))
                if getattr(model, "inputs", None) is None
            ]
            if subclassed:
                raise ValueError(
                    "FeatureDistillation with specific layer names requires Functional or "
                    f"Sequential models. The {' and '.join(subclassed)} model(s) appear to be "
                    "subclassed (no symbolic inputs/outputs). Either use Functional/Sequential "
                    "models, or use FeatureDistillation without layer names (to distill final "
                    "outputs only), or use LogitsDistillation instead."
                )
        for role, model, name in (
            ("teacher", teacher, self.teacher_layer_name),
            ("student", student, self.student_layer_name),
        ):
            if name is not None:
                try:
                    model.get_layer(name=name)
                except ValueError as e:
                    raise ValueError(f"In {role} model: {e}") from None

    def validate_outputs(self, teacher_outputs, student_outputs):
        """Checks that the outputs share a structure, and that the losses match it."""
        super().validate_outputs(teacher_outputs, student_outputs)
        try:
            tree.assert_same_structure(self.loss, teacher_outputs)
        except ValueError as e:
            raise ValueError(
                f"Loss structure mismatch. Loss structure: {self.loss!r}, output structure: "
                f"{tree.map_structure(lambda _: '*', teacher_outputs)}. Error: {e}"
            ) from None

    def compute_loss(self, teacher_outputs, student_outputs, **kwargs):
        """The sum over outputs of `mean(loss(teacher_features, student_features))`."""

        def apply_loss(loss_fn, teacher_features, student_features):
            if loss_fn is None:
                return 0.0
            return ops.mean(loss_fn(teacher_features, student_features))

        return _sum_of(tree.map_structure(apply_loss, self.loss, teacher_outputs, student_outputs))

    def get_config(self) -> dict:
        return {
            "loss": serialize_keras_object(self.loss),
            "teacher_layer_name": self.teacher_layer_name,
            "student_layer_name": self.student_layer_name,
        }

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["loss"] = _deserialize_losses(config["loss"])
        return cls(**config)


@register_keras_serializable(package="keratron")
class LogitsDistillation(DistillationLoss):
    """Compares teacher and student outputs divided by a temperature (the classic
    knowledge-distillation loss).

    With a `KLDivergence` instance the scaled outputs go through a softmax first and the loss
    is multiplied by `temperature ** 2`; any other loss (the default "kl_divergence" name,
    which is the plain function, included) receives the scaled outputs themselves.

    Args:
        temperature: the positive number both models' outputs are divided by. Defaults to 3.
        loss: a loss name, instance or function, or a structure of them matching the
            outputs' (`None` skips an output; at least one must be given). Defaults to
            "kl_divergence".

    Example:
        >>> loss = keratron.distillation.LogitsDistillation(
        ...     temperature=4.0, loss=keratron.losses.KLDivergence())
    """

    def __init__(self, temperature=3.0, loss="kl_divergence"):
        self.temperature = temperature
        self.loss = _convert_losses(loss)
        if all(item is None for item in tree.flatten(self.loss)):
            raise ValueError("At least one loss must be non-`None`.")
        if not isinstance(self.temperature, (int, float)):
            raise ValueError(f"temperature must be a number, got {type(self.temperature)}")
        if self.temperature <= 0.0:
            raise ValueError("temperature must be positive.")

    def compute_loss(self, teacher_outputs, student_outputs, **kwargs):
        """The sum over outputs of the loss between the temperature-scaled outputs."""
        temperature = self.temperature
        teacher_scaled = tree.map_structure(lambda x: ops.divide(x, temperature), teacher_outputs)
        student_scaled = tree.map_structure(lambda x: ops.divide(x, temperature), student_outputs)

        def apply_loss(loss_fn, teacher_logits, student_logits):
            if loss_fn is None:
                return 0.0
            if isinstance(loss_fn, losses_module.KLDivergence):
                teacher_probs = ops.softmax(teacher_logits, axis=-1)
                student_probs = ops.softmax(student_logits, axis=-1)
                return ops.mean(loss_fn(teacher_probs, student_probs)) * (temperature**2)
            return ops.mean(loss_fn(teacher_logits, student_logits))

        return _sum_of(tree.map_structure(apply_loss, self.loss, teacher_scaled, student_scaled))

    def get_config(self) -> dict:
        return {"temperature": self.temperature, "loss": serialize_keras_object(self.loss)}

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["loss"] = _deserialize_losses(config["loss"])
        return cls(**config)
