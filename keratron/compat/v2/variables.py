"""TF2's `tf.Variable` and `tf.IndexedSlices` over keratron's Variable.

A `tf.Variable` is a keratron Variable (layers, optimizers, tapes and `keratron.function` treat
it as one) with TF2's surface: `read_value()`, `value()`, `assign*` with TF's keyword arguments,
`scatter_*`, `initial_value`, and names with TF's `:0` suffix.
"""

from __future__ import annotations

from keratron import autodiff
from keratron import ops as kops
from keratron.compat.v2.ops import _dt, convert_to_tensor

__all__ = ["IndexedSlices", "Variable"]


class IndexedSlices:
    """`tf.IndexedSlices`: rows `values` at `indices` of a tensor of `dense_shape`."""

    def __init__(self, values, indices, dense_shape=None):
        self.values = convert_to_tensor(values)
        self.indices = convert_to_tensor(indices)
        self.dense_shape = dense_shape


class _ValueTensor(autodiff.Tensor):
    """A Variable's current value: a Tensor that `value()` (TF's method form) also returns."""

    __slots__ = ()

    def __call__(self):
        return self


class Variable(autodiff.Variable):
    """`tf.Variable`: a mutable tensor, from an initial value or a zero-argument callable.

    `initial_value` keeps the value the variable started with (TF raises for it eagerly).

    Example:
        >>> import keratron.compat.v2 as tf
        >>> v = tf.Variable([1.0, 2.0], name="w")
        >>> v.name, v.assign_add([1.0, 1.0]).numpy().tolist()
        ('w:0', [2.0, 3.0])
    """

    __slots__ = ("_initial",)

    def __init__(
        self,
        initial_value=None,
        trainable=None,
        validate_shape=True,
        caching_device=None,
        name=None,
        variable_def=None,
        dtype=None,
        import_scope=None,
        constraint=None,
        synchronization="auto",
        aggregation="none",
        shape=None,
        **kwargs,
    ):
        if initial_value is None:
            raise ValueError("tf.Variable needs an `initial_value`. Received: None")
        if callable(initial_value) and not isinstance(initial_value, autodiff.Tensor):
            initial_value = initial_value()
        initial = convert_to_tensor(initial_value, dtype=dtype)
        base = "Variable" if name is None else str(name).split(":")[0]
        super().__init__(
            initial,
            dtype=_dt(dtype),
            trainable=True if trainable is None else trainable,
            name=base.replace("/", "_"),
            constraint=constraint,
            synchronization=synchronization,
            aggregation=aggregation,
        )
        self._initial = autodiff.Tensor(self._value.clone())

    # TF's names carry the output index; `path` (what keratron keys state by) does not.
    @property
    def name(self) -> str:
        return f"{autodiff.Variable.name.__get__(self)}:0"

    @name.setter
    def name(self, value):
        autodiff.Variable.name.__set__(self, value)

    @property
    def initial_value(self):
        return self._initial

    @property
    def value(self):
        """The current value; `v.value()` works too, as in TF."""
        return _ValueTensor(self._value)

    def read_value(self):
        """A Tensor with the current value (through `ops.copy`, so tapes and traces see it)."""
        return kops.copy(self)

    def get_shape(self):
        return self.shape

    def assign(self, value, use_locking=None, name=None, read_value=True):
        return super().assign(convert_to_tensor(value, dtype=self.dtype))

    def assign_add(self, delta, use_locking=None, name=None, read_value=True):
        return super().assign_add(convert_to_tensor(delta, dtype=self.dtype))

    def assign_sub(self, delta, use_locking=None, name=None, read_value=True):
        return super().assign_sub(convert_to_tensor(delta, dtype=self.dtype))

    # -------------------------------------------------------------- scatter_*
    def _rows(self, sparse_delta):
        idx = kops.reshape(kops.cast(sparse_delta.indices, "int32"), (-1, 1))
        upd = kops.reshape(
            kops.cast(sparse_delta.values, self.dtype), (-1,) + tuple(self.shape[1:])
        )
        return idx, upd

    def scatter_update(self, sparse_delta, use_locking=False, name=None):
        idx, upd = self._rows(sparse_delta)
        return self.assign(kops.scatter_update(self.read_value(), idx, upd))

    def scatter_add(self, sparse_delta, use_locking=False, name=None):
        idx, upd = self._rows(sparse_delta)
        return self.assign_add(kops.scatter(idx, upd, self.shape))

    def scatter_sub(self, sparse_delta, use_locking=False, name=None):
        idx, upd = self._rows(sparse_delta)
        return self.assign_sub(kops.scatter(idx, upd, self.shape))

    def scatter_nd_update(self, indices, updates, name=None):
        idx = kops.cast(convert_to_tensor(indices), "int32")
        upd = convert_to_tensor(updates, dtype=self.dtype)
        return self.assign(kops.scatter_update(self.read_value(), idx, upd))

    def scatter_nd_add(self, indices, updates, name=None):
        idx = kops.cast(convert_to_tensor(indices), "int32")
        return self.assign_add(
            kops.scatter(idx, convert_to_tensor(updates, self.dtype), self.shape)
        )

    def scatter_nd_sub(self, indices, updates, name=None):
        idx = kops.cast(convert_to_tensor(indices), "int32")
        return self.assign_sub(
            kops.scatter(idx, convert_to_tensor(updates, self.dtype), self.shape)
        )

    def __repr__(self):
        v = self.numpy()
        text = repr(v.item()) if v.ndim == 0 else repr(v)
        return f"<tf.Variable '{self.name}' shape={self.shape} dtype={self.dtype}, numpy={text}>"
