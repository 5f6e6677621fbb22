"""Knowledge distillation, as `keras.distillation`: train a student model from a teacher's
outputs with `Distiller` and the losses `LogitsDistillation` and `FeatureDistillation`.

Example:
    >>> distiller = keratron.distillation.Distiller(
    ...     teacher=teacher, student=student,
    ...     distillation_losses=keratron.distillation.LogitsDistillation(temperature=3.0))
    >>> distiller.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
"""

from keratron.distillation.distillation_loss import (
    DistillationLoss,
    FeatureDistillation,
    LogitsDistillation,
)
from keratron.distillation.distiller import Distiller

__all__ = ["DistillationLoss", "Distiller", "FeatureDistillation", "LogitsDistillation"]
