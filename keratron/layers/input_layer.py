"""`InputLayer` and `Input`: the entry points of functional models."""

from __future__ import annotations

from keratron.autodiff.dtypes import standardize_dtype
from keratron.config import floatx
from keratron.layers.layer import Layer
from keratron.layers.node import KerasTensor, Node
from keratron.utils.naming import unique_object_name

__all__ = ["InputLayer", "Input"]


class InputLayer(Layer):
    """Holds a model's symbolic input. Usually made through `keratron.Input`."""

    def __init__(
        self,
        shape=None,
        batch_size=None,
        dtype=None,
        sparse=None,
        batch_shape=None,
        input_tensor=None,
        optional=False,
        name=None,
        **kwargs,
    ):
        if "input_shape" in kwargs:  # tf.keras 2 spelling
            shape = kwargs.pop("input_shape")
        if "batch_input_shape" in kwargs:
            batch_shape = kwargs.pop("batch_input_shape")
        super().__init__(name=name or unique_object_name("input_layer"), **kwargs)
        if shape is not None and batch_shape is not None:
            raise ValueError(
                "You cannot pass both `shape` and `batch_shape` at the same time. "
                f"Received: shape={shape}, batch_shape={batch_shape}"
            )
        if input_tensor is not None:
            if not isinstance(input_tensor, KerasTensor):
                raise ValueError(
                    "Argument `input_tensor` must be a KerasTensor. "
                    f"Received: input_tensor={input_tensor!r}"
                )
            batch_shape = input_tensor.shape
        if batch_shape is None:
            if shape is None:
                raise ValueError("You must pass a `shape` argument to InputLayer/Input.")
            if isinstance(shape, int):
                shape = (shape,)
            batch_shape = (batch_size,) + tuple(shape)
        self._batch_shape = tuple(batch_shape)
        if dtype in ("string", "str", str):
            raise ValueError(
                f"Input '{self.name}': keratron tensors hold numbers, not strings (as on "
                "Keras's torch and JAX backends). Map the strings to numbers before the model: "
                "apply TextVectorization or StringLookup to the data (a tf.data `map`, or on "
                "the arrays before `fit`) and give Input their output dtype. "
                f"Received: dtype={dtype!r}"
            )
        self._dtype = standardize_dtype(dtype) if dtype is not None else floatx()
        self.sparse = bool(sparse)
        self.optional = optional
        self.built = True
        if input_tensor is None:
            input_tensor = KerasTensor(self._batch_shape, dtype=self._dtype, name=self.name)
        Node(self, outputs=[input_tensor])

    @property
    def batch_shape(self):
        return self._batch_shape

    def call(self):
        return None

    def get_config(self):
        return {
            "batch_shape": self._batch_shape,
            "dtype": self.dtype,
            "sparse": self.sparse,
            "name": self.name,
        }


def Input(
    shape=None,
    batch_size=None,
    dtype=None,
    sparse=None,
    batch_shape=None,
    name=None,
    tensor=None,
    optional=False,
):
    """A symbolic input for a functional model.

    Example:
        >>> x = keratron.Input(shape=(784,))
        >>> y = keratron.layers.Dense(10)(x)
        >>> model = keratron.Model(x, y)
    """
    layer = InputLayer(
        shape=shape,
        batch_size=batch_size,
        dtype=dtype,
        sparse=sparse,
        batch_shape=batch_shape,
        name=name,
        input_tensor=tensor,
        optional=optional,
    )
    return layer.output
