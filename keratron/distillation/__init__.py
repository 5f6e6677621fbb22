"""Knowledge distillation, as `keras.distillation`: train a student model from a teacher's
outputs with `Distiller` and the losses `LogitsDistillation` and `FeatureDistillation`.

Example:
    >>> teacher = keratron.Sequential([keratron.Input((4,)), keratron.layers.Dense(3)])
    >>> student = keratron.Sequential([keratron.Input((4,)), keratron.layers.Dense(3)])
    >>> distiller = keratron.distillation.Distiller(
    ...     teacher=teacher, student=student,
    ...     distillation_losses=keratron.distillation.LogitsDistillation(temperature=3.0))
    >>> distiller.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    >>> distiller(np.ones((2, 4), "float32")).shape
    (2, 3)
"""

from keratron.distillation.distillation_loss import (
    DistillationLoss,
    FeatureDistillation,
    LogitsDistillation,
)
from keratron.distillation.distiller import Distiller

__all__ = ["DistillationLoss", "Distiller", "FeatureDistillation", "LogitsDistillation"]
