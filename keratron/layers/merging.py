"""Merge layers: Add, Subtract, Multiply, Average, Maximum, Minimum, Concatenate and Dot, plus
Keras's functional helpers (`add([a, b])`, `concatenate([a, b], axis=1)`, ...).

Masks merge as in Keras 3: the output mask is the logical OR of the input masks (None when
any input has none); Multiply, Maximum and Minimum also ignore masked positions of one input
in favour of the other.
"""

from __future__ import annotations

import math

from keratron import ops
from keratron.autodiff.tensor import convert_to_tensor
from keratron.config import epsilon
from keratron.layers.layer import Layer

__all__ = [
    "Add",
    "Subtract",
    "Multiply",
    "Average",
    "Maximum",
    "Minimum",
    "Concatenate",
    "Dot",
    "add",
    "subtract",
    "multiply",
    "average",
    "maximum",
    "minimum",
    "concatenate",
    "dot",
]


def _mask_of(x):
    return getattr(x, "_keras_mask", None)


def _expanded_mask(mask, x):
    """A `(batch, ...)` mask broadcast over the feature axis of `x`."""
    return ops.broadcast_to(ops.expand_dims(mask, -1), x.shape)


def _is_shape_list(input_shape) -> bool:
    return (
        isinstance(input_shape, (list, tuple))
        and all(s is None or isinstance(s, (list, tuple)) for s in input_shape)
        and len(input_shape) > 0
        and isinstance(input_shape[0], (list, tuple))
    )


class _Merge(Layer):
    """Base of the merge layers: checks the inputs' shapes, aligns ranks by inserting axes
    after the batch axis, and merges masks. Subclasses define `_merge_function(inputs)`."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.supports_masking = True
        self._reshape_required = False

    def _label(self) -> str:
        return f"Layer '{self.name}' ({type(self).__name__})"

    def _elementwise_shape(self, shape1, shape2, all_shapes):
        if shape1 is None or shape2 is None:
            return None
        if len(shape1) < len(shape2):
            shape1, shape2 = shape2, shape1
        if not shape2:
            return tuple(shape1)
        out = list(shape1[: len(shape1) - len(shape2)])
        for i, j in zip(shape1[len(shape1) - len(shape2) :], shape2):
            if i is None or j is None:
                out.append(None)
            elif i == 1 or j == 1 or i == j:
                out.append(j if i == 1 else i)
            else:
                raise ValueError(
                    f"{self._label()} received inputs with incompatible shapes: "
                    f"{[tuple(s) for s in all_shapes]} (dimensions {i} and {j} do not "
                    "broadcast)."
                )
        return tuple(out)

    def _check_list(self, input_shape):
        if not _is_shape_list(input_shape):
            raise ValueError(
                f"{self._label()} must be called on a list of input tensors. "
                f"Received: input_shape={input_shape}"
            )

    def build(self, input_shape):
        self._check_list(input_shape)
        batch_sizes = {s[0] for s in input_shape if s} - {None}
        if len(batch_sizes) > 1:
            raise ValueError(
                f"{self._label()} cannot merge tensors with different batch sizes. "
                f"Received shapes {[tuple(s) for s in input_shape]}"
            )
        self._compute_merged_shape(input_shape)
        self._reshape_required = len({len(s) for s in input_shape}) != 1
        self.built = True

    def _compute_merged_shape(self, input_shape):
        out = tuple(input_shape[0][1:])
        for s in input_shape[1:]:
            out = self._elementwise_shape(out, tuple(s[1:]), input_shape)
        return out

    def call(self, inputs):
        if not isinstance(inputs, (list, tuple)):
            raise ValueError(
                f"{self._label()} must be called on a list of input tensors. "
                f"Received: inputs of type {type(inputs).__name__}"
            )
        inputs = list(inputs)
        if self._reshape_required:
            max_ndim = max(x.ndim for x in inputs)
            aligned = []
            for x in inputs:
                for _ in range(max_ndim - x.ndim):
                    x = ops.expand_dims(x, 1)
                aligned.append(x)
            inputs = aligned
        return self._merge_function(inputs)

    def compute_output_shape(self, input_shape):
        self._check_list(input_shape)
        out = self._compute_merged_shape(input_shape)
        batch_sizes = {s[0] for s in input_shape if s is not None} - {None}
        batch = next(iter(batch_sizes)) if len(batch_sizes) == 1 else None
        return (batch,) + tuple(out)

    def compute_mask(self, inputs, mask=None):
        if mask is None:
            return None
        if not isinstance(mask, (list, tuple)) or not isinstance(inputs, (list, tuple)):
            raise ValueError(
                f"{self._label()}: `inputs` and `mask` must be lists. Received: mask={mask!r}"
            )
        if len(mask) != len(inputs):
            raise ValueError(f"{self._label()}: got {len(inputs)} inputs but {len(mask)} masks.")
        if any(m is None for m in mask):
            return None
        out = mask[0]
        for m in mask[1:]:
            out = ops.logical_or(out, m)
        return out

    def _apply_merge_op_and_or_mask(self, op, inputs):
        # Where one input is masked the other one's value wins, so masked steps never
        # decide the result (Keras's rule for Maximum and Minimum).
        output = output_mask = None
        for x in inputs:
            mask = _mask_of(x)
            if mask is not None:
                mask = _expanded_mask(mask, x)
            if output is None:
                output, output_mask = x, mask
                continue
            if mask is not None:
                x = ops.where(mask, x, output)
            if output_mask is not None:
                output = ops.where(output_mask, output, x)
            output_mask = (
                ops.logical_or(output_mask, mask)
                if mask is not None and output_mask is not None
                else None
            )
            output = op(output, x)
        return output


class Add(_Merge):
    """Adds a list of inputs of the same shape (broadcasting allowed).

    Example:
        >>> a, b = np.ones((2, 3), "float32"), np.ones((2, 3), "float32")
        >>> keratron.layers.Add()([a, b]).numpy()[0]
        array([2., 2., 2.], dtype=float32)
    """

    def _merge_function(self, inputs):
        out = inputs[0]
        for x in inputs[1:]:
            out = ops.add(out, x)
        return out


class Subtract(_Merge):
    """Subtracts the second of exactly two inputs from the first.

    Example:
        >>> a, b = np.ones((2, 3), "float32"), np.ones((2, 3), "float32")
        >>> keratron.layers.Subtract()([a, b]).shape
        (2, 3)
    """

    def build(self, input_shape):
        self._check_list(input_shape)
        if len(input_shape) != 2:
            raise ValueError(
                f"{self._label()} must be called on exactly 2 inputs. "
                f"Received {len(input_shape)} inputs with shapes {list(input_shape)}"
            )
        super().build(input_shape)

    def _merge_function(self, inputs):
        if len(inputs) != 2:
            raise ValueError(
                f"{self._label()} must be called on exactly 2 inputs. Received {len(inputs)}."
            )
        return ops.subtract(inputs[0], inputs[1])


class Multiply(_Merge):
    """Multiplies a list of inputs elementwise; masked entries count as 1, and entries masked
    in every input are 0.

    Example:
        >>> a = np.full((2, 3), 2.0, "float32")
        >>> keratron.layers.Multiply()([a, a]).numpy()[0]
        array([4., 4., 4.], dtype=float32)
    """

    def _merge_function(self, inputs):
        masks = [_mask_of(x) for x in inputs]
        all_masked = all(m is not None for m in masks)
        output = output_mask = None
        for x, mask in zip(inputs, masks):
            if mask is not None:
                mask = _expanded_mask(mask, x)
                x = ops.where(mask, x, 1.0)
                if all_masked:
                    output_mask = mask if output_mask is None else ops.logical_or(output_mask, mask)
            output = x if output is None else ops.multiply(output, x)
        if all_masked:
            output = ops.where(output_mask, output, 0.0)
        return output


class Average(_Merge):
    """The elementwise mean of a list of inputs.

    Example:
        >>> a, b = np.zeros((1, 2), "float32"), np.ones((1, 2), "float32")
        >>> keratron.layers.Average()([a, b]).numpy()
        array([[0.5, 0.5]], dtype=float32)
    """

    def _merge_function(self, inputs):
        out = inputs[0]
        for x in inputs[1:]:
            out = ops.add(out, x)
        return ops.divide(out, float(len(inputs)))


class Maximum(_Merge):
    """The elementwise maximum of a list of inputs (masked entries defer to the others).

    Example:
        >>> a, b = np.zeros((1, 2), "float32"), np.ones((1, 2), "float32")
        >>> keratron.layers.Maximum()([a, b]).numpy()
        array([[1., 1.]], dtype=float32)
    """

    def _merge_function(self, inputs):
        return self._apply_merge_op_and_or_mask(ops.maximum, inputs)


class Minimum(_Merge):
    """The elementwise minimum of a list of inputs (masked entries defer to the others).

    Example:
        >>> a, b = np.zeros((1, 2), "float32"), np.ones((1, 2), "float32")
        >>> keratron.layers.Minimum()([a, b]).numpy()
        array([[0., 0.]], dtype=float32)
    """

    def _merge_function(self, inputs):
        return self._apply_merge_op_and_or_mask(ops.minimum, inputs)


class Concatenate(_Merge):
    """Concatenates a list of inputs along `axis`; all other axes must match.

    Args:
        axis: the concatenation axis (default -1).

    Example:
        >>> a, b = np.ones((2, 3), "float32"), np.ones((2, 4), "float32")
        >>> keratron.layers.Concatenate()([a, b]).shape
        (2, 7)
    """

    def __init__(self, axis=-1, **kwargs):
        if isinstance(axis, bool) or not isinstance(axis, int):
            raise TypeError(
                f"Concatenate layer: argument `axis` must be an integer. Received: axis={axis!r}"
            )
        super().__init__(**kwargs)
        self.axis = axis

    def _check_shapes(self, input_shape):
        self._check_list(input_shape)
        ranks = {len(s) for s in input_shape}
        bad = len(ranks) != 1
        if not bad:
            (rank,) = ranks
            if not -rank <= self.axis < rank:
                raise ValueError(
                    f"{self._label()}: `axis`={self.axis} is out of range for inputs of rank "
                    f"{rank}. Received: input_shape={[tuple(s) for s in input_shape]}"
                )
            axis = self.axis % rank
            for d in range(rank):
                if d != axis and len({s[d] for s in input_shape} - {None}) > 1:
                    bad = True
        if bad:
            raise ValueError(
                f"{self._label()} requires inputs with matching shapes except for the "
                f"concatenation axis {self.axis}. Received: "
                f"input_shape={[tuple(s) for s in input_shape]}"
            )

    def build(self, input_shape):
        self._check_shapes(input_shape)
        self.built = True

    def call(self, inputs):
        return ops.concatenate(list(inputs), axis=self.axis)

    def compute_output_shape(self, input_shape):
        self._check_shapes(input_shape)
        out = list(input_shape[0])
        axis = self.axis % len(out)
        for s in input_shape:
            if s[axis] is None:
                out[axis] = None
                break
        else:
            out[axis] = sum(s[axis] for s in input_shape)
        for d in range(len(out)):
            if d != axis and out[d] is None:
                out[d] = next((s[d] for s in input_shape if s[d] is not None), None)
        return tuple(out)

    def compute_mask(self, inputs, mask=None):
        if mask is None:
            return None
        if not isinstance(mask, (list, tuple)) or len(mask) != len(inputs):
            raise ValueError(
                f"{self._label()}: expected one mask (or None) per input. Received: mask={mask!r}"
            )
        if all(m is None for m in mask):
            return None
        full = []
        for x, m in zip(inputs, mask):
            if m is None:
                full.append(ops.broadcast_to(convert_to_tensor(True, device=x.device), x.shape))
            elif m.ndim < x.ndim:
                full.append(_expanded_mask(m, x))
            else:
                full.append(m)
        return ops.any(ops.concatenate(full, axis=self.axis), axis=-1)

    def get_config(self):
        return {**super().get_config(), "axis": self.axis}


def _l2_normalize(x, axis):
    # max(||x||, eps) written as sqrt(max(||x||^2, eps^2)): no infinite gradient at x = 0.
    eps = epsilon()
    sq = ops.sum(ops.square(x), axis=axis, keepdims=True)
    return ops.multiply(x, ops.rsqrt(ops.maximum(sq, eps * eps)))


def _batch_dot(x, y, axes):
    """Per-sample tensor contraction of x's axis `axes[0]` with y's axis `axes[1]`: the
    result has x's remaining axes, then y's (Keras's `batch_dot`; a rank-1 result gains a
    trailing axis of size 1)."""
    a0, a1 = axes
    xp = [i for i in range(x.ndim) if i != a0] + [a0]
    yp = [0, a1] + [i for i in range(1, y.ndim) if i != a1]
    x = ops.transpose(x, xp)
    y = ops.transpose(y, yp)
    batch, k = x.shape[0], x.shape[-1]
    x_mid, y_rest = x.shape[1:-1], y.shape[2:]
    x3 = ops.reshape(x, (batch, math.prod(x_mid), k))
    y3 = ops.reshape(y, (batch, k, math.prod(y_rest)))
    out = ops.matmul(x3, y3)
    shape = (batch, *x_mid, *y_rest)
    return ops.reshape(out, shape if len(shape) > 1 else (batch, 1))


class Dot(_Merge):
    """Per-sample dot product of two inputs along the given axes.

    Args:
        axes: int or `(axis_of_x, axis_of_y)`; axis 0 (the batch axis) is not allowed.
        normalize: if True, L2-normalize both inputs along those axes first (the result is
            then the cosine similarity).

    Example:
        >>> a, b = np.ones((2, 3), "float32"), np.ones((2, 3), "float32")
        >>> keratron.layers.Dot(axes=1)([a, b]).numpy()
        array([[3.],
               [3.]], dtype=float32)
    """

    def __init__(self, axes, normalize=False, **kwargs):
        who = f"Dot layer '{kwargs['name']}'" if kwargs.get("name") else "Dot layer"
        if not isinstance(axes, int):
            if not isinstance(axes, (list, tuple)):
                raise TypeError(
                    f"{who}: argument `axes` must be an int or a list of 2 ints. "
                    f"Received: axes={axes!r}"
                )
            if len(axes) != 2 or not all(isinstance(a, int) for a in axes):
                raise ValueError(
                    f"{who}: argument `axes` must hold exactly 2 integers. Received: axes={axes!r}"
                )
        super().__init__(**kwargs)
        self.axes = axes
        self.normalize = normalize

    def _resolve_axes(self, shape1, shape2):
        if isinstance(self.axes, int):
            axes = (
                [self.axes % len(shape1), self.axes % len(shape2)]
                if self.axes < 0
                else [self.axes] * 2
            )
        else:
            axes = [a % len(s) if a < 0 else a for a, s in zip(self.axes, (shape1, shape2))]
        for a, s in zip(axes, (shape1, shape2)):
            if not 0 < a < len(s):
                raise ValueError(
                    f"{self._label()}: `axes`={self.axes} is invalid for input shapes "
                    f"{tuple(shape1)} and {tuple(shape2)} (axis 0, the batch axis, cannot be "
                    "contracted)."
                )
        return axes

    def _check(self, input_shape):
        self._check_list(input_shape)
        if len(input_shape) != 2:
            raise ValueError(
                f"{self._label()} must be called on exactly 2 inputs. "
                f"Received: input_shape={list(input_shape)}"
            )
        s1, s2 = input_shape
        if len(s1) < 2 or len(s2) < 2:
            raise ValueError(
                f"{self._label()} needs inputs of rank >= 2. Received shapes {tuple(s1)} "
                f"and {tuple(s2)}"
            )
        a1, a2 = self._resolve_axes(s1, s2)
        if s1[a1] is not None and s2[a2] is not None and s1[a1] != s2[a2]:
            raise ValueError(
                f"{self._label()}: incompatible input shapes: axis values {s1[a1]} (at axis "
                f"{a1}) != {s2[a2]} (at axis {a2}). Full input shapes: {tuple(s1)}, {tuple(s2)}"
            )
        return a1, a2

    def build(self, input_shape):
        self._check(input_shape)
        self.built = True

    def call(self, inputs):
        if len(inputs) != 2:
            raise ValueError(
                f"{self._label()} must be called on exactly 2 inputs. Received {len(inputs)}."
            )
        x1, x2 = inputs
        axes = self._check([x1.shape, x2.shape])
        if self.normalize:
            x1 = _l2_normalize(x1, axes[0])
            x2 = _l2_normalize(x2, axes[1])
        return _batch_dot(x1, x2, axes)

    def compute_output_shape(self, input_shape):
        a1, a2 = self._check(input_shape)
        s1, s2 = list(input_shape[0]), list(input_shape[1])
        s1.pop(a1)
        s2.pop(a2)
        s2.pop(0)
        out = s1 + s2
        return tuple(out + [1] if len(out) == 1 else out)

    def compute_mask(self, inputs, mask=None):
        return None

    def get_config(self):
        return {**super().get_config(), "axes": self.axes, "normalize": self.normalize}


# --------------------------------------------------------------------- functional helpers
def add(inputs, **kwargs):
    """Functional form of `Add`: `add([a, b])`."""
    return Add(**kwargs)(inputs)


def subtract(inputs, **kwargs):
    """Functional form of `Subtract`: `subtract([a, b])`."""
    return Subtract(**kwargs)(inputs)


def multiply(inputs, **kwargs):
    """Functional form of `Multiply`: `multiply([a, b])`."""
    return Multiply(**kwargs)(inputs)


def average(inputs, **kwargs):
    """Functional form of `Average`: `average([a, b])`."""
    return Average(**kwargs)(inputs)


def maximum(inputs, **kwargs):
    """Functional form of `Maximum`: `maximum([a, b])`."""
    return Maximum(**kwargs)(inputs)


def minimum(inputs, **kwargs):
    """Functional form of `Minimum`: `minimum([a, b])`."""
    return Minimum(**kwargs)(inputs)


def concatenate(inputs, axis=-1, **kwargs):
    """Functional form of `Concatenate`: `concatenate([a, b], axis=-1)`.

    Example:
        >>> keratron.layers.concatenate([np.ones((1, 2)), np.ones((1, 3))]).shape
        (1, 5)
    """
    return Concatenate(axis=axis, **kwargs)(inputs)


def dot(inputs, axes=-1, **kwargs):
    """Functional form of `Dot`: `dot([a, b], axes=1, normalize=False)`."""
    return Dot(axes=axes, **kwargs)(inputs)
