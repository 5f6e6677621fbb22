"""The autodiff core: Tensor, Variable, primitives, GradientTape."""

from keratron.autodiff.primitive import PRIMITIVES, Primitive
from keratron.autodiff.tape import GradientTape, active_tapes, custom_gradient, stop_gradient
from keratron.autodiff.tensor import (
    Tensor,
    Variable,
    convert_to_tensor,
    is_tensor,
    mark_written,
    write_count,
)

__all__ = [
    "PRIMITIVES",
    "Primitive",
    "GradientTape",
    "active_tapes",
    "custom_gradient",
    "stop_gradient",
    "Tensor",
    "Variable",
    "convert_to_tensor",
    "is_tensor",
    "mark_written",
    "write_count",
]
