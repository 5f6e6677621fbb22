"""Cross-entropy: the fused softmax cross-entropy primitive and the Keras crossentropy ops.

`softmax_cross_entropy` is one primitive over the last axis: its forward computes the
per-example loss with a stable log-sum-exp and returns the softmax probabilities as a
residual output, so the backward pass is `g * (probs - labels)` with no second softmax; that
product is the primitive `softmax_cross_entropy_grad`. Triton routes can be attached to both
primitives' `.kernel`. The Keras functions (`categorical_crossentropy`,
`sparse_categorical_crossentropy`, `binary_crossentropy`) follow Keras's torch backend:
`from_logits=True` goes through the fused primitive (binary through the stable softplus
form), probabilities are renormalised and clipped to [epsilon, 1 - epsilon] before the log.
"""

from __future__ import annotations

import torch

from keratron import config
from keratron.ops._core import Primitive, Tensor, canonical_axis, pair
from keratron.ops.elementwise import (
    add,
    cast,
    clip,
    divide,
    log,
    multiply,
    negative,
    softplus,
    stop_gradient_p,
    subtract,
)
from keratron.ops.reduction import logsumexp, sum
from keratron.ops.shaping import expand_dims, moveaxis, squeeze

__all__ = [
    "softmax_cross_entropy",
    "sparse_categorical_crossentropy",
    "categorical_crossentropy",
    "binary_crossentropy",
]


def _one_hot_impl(labels, num_classes, dtype):
    classes = torch.arange(num_classes, device=labels.device)
    return (labels.long().unsqueeze(-1) == classes).to(dtype)


# Integer class ids -> one-hot rows (no gradient: the ids are integers).
one_hot_p = Primitive(
    "softmax_cross_entropy_one_hot",
    _one_hot_impl,
    shape_rule=lambda labels, num_classes, dtype: [((*labels[0], num_classes), dtype)],
)


def _check_class_ids_impl(labels, num_classes):
    """Returns `labels` unchanged after checking that every id is in [0, num_classes).

    On the CPU the check reads the batch at once (a few microseconds against the loss it
    guards). On a GPU a per-batch check would wait for the device every step, so the batch's
    smallest and largest ids are folded into device-side running extremes instead, and
    `raise_for_invalid_class_ids()` reads them once (`fit` calls it at the end of each epoch).
    """
    if labels.is_meta or labels.numel() == 0:
        return labels
    if labels.device.type == "cpu":
        lo, hi = int(labels.min()), int(labels.max())
        if lo < 0 or hi >= num_classes:
            _raise_invalid(lo if lo < 0 else hi, num_classes)
        return labels
    # The extremes live in persistent device buffers updated in place, so a step captured as a
    # CUDA graph (after an uncaptured warm-up call made them) keeps folding into them.
    key = (labels.device, num_classes)
    lo, hi = labels.min().long(), labels.max().long()
    seen = _pending_class_ids.get(key)
    if seen is None:
        _pending_class_ids[key] = (lo.clone(), hi.clone())
    else:
        torch.minimum(seen[0], lo, out=seen[0])
        torch.maximum(seen[1], hi, out=seen[1])
    return labels


# (device, number of classes) -> running (min, max) class ids met on that device since the
# last `raise_for_invalid_class_ids()`, which reads them and resets them in place to 0 (a
# valid id for any number of classes).
_pending_class_ids: dict = {}


def _raise_invalid(value, num_classes):
    raise ValueError(
        f"sparse_categorical_crossentropy: received a label value of {value}, which is outside "
        f"the valid range of [0, {num_classes - 1}] for {num_classes} classes. Class ids must "
        "be integers from 0 to the number of classes minus one."
    )


def raise_for_invalid_class_ids() -> None:
    """Raises the ValueError for an out-of-range sparse label met on a GPU since the last
    call (one read of the device-side extremes); CPU batches are checked as they come."""
    bad = None
    for (_, num_classes), (lo_buf, hi_buf) in _pending_class_ids.items():
        lo, hi = int(lo_buf), int(hi_buf)
        lo_buf.fill_(0)
        hi_buf.fill_(0)
        if bad is None and (lo < 0 or hi >= num_classes):
            bad = (lo if lo < 0 else hi, num_classes)
    if bad is not None:
        _raise_invalid(*bad)


# Identity on integer class ids that raises on an id outside [0, num_classes): placed before
# both sparse cross-entropy paths, so a bad label cannot silently one-hot to a zero row.
check_class_ids_p = Primitive(
    "check_class_ids", _check_class_ids_impl, shape_rule=lambda labels, num_classes: [labels]
)


def _sce_impl(logits, labels, sparse):
    # One log-softmax (it subtracts the row max: finite for logits like 1e4, where exp(x)
    # overflows) gives both outputs: the loss reads it at the labels, and the probabilities are
    # its exponential, which saves a second pass over the logits.
    log_probs = torch.log_softmax(logits, dim=-1)
    if sparse:
        loss = log_probs.gather(-1, labels.long().unsqueeze(-1)).squeeze(-1).neg_()
    else:
        loss = (labels.to(log_probs.dtype) * log_probs).sum(-1).neg_()
    return loss, log_probs.exp_()


def _sce_grad_impl(g, probs, labels, sparse):
    if sparse:
        # probs - one_hot(labels) without building the one-hot: subtract 1 at each label.
        out = probs.clone()
        out.scatter_add_(-1, labels.unsqueeze(-1).long(), torch.full_like(g, -1.0).unsqueeze(-1))
        return out.mul_(g.unsqueeze(-1))
    return g.unsqueeze(-1) * (probs - labels)


def _sce_grad_vjp(gg, g, probs, labels, out, sparse):
    # out = g[..., None] * (probs - target): linear in g, probs and dense labels.
    ge = expand_dims(g, -1)
    if sparse:
        target = one_hot_p.bind(labels, num_classes=probs.shape[-1], dtype=probs._value.dtype)
    else:
        target = labels
    g_g = sum(multiply(gg, subtract(probs, target)), axis=-1)
    g_probs = multiply(gg, ge)
    return g_g, g_probs, (None if sparse else negative(g_probs))


# The logits gradient of the loss, g[..., None] * (probs - target), as one primitive so that a
# device kernel computes it in one pass (no one-hot tensor is materialised).
def _sce_grad_shape(g, probs, labels, sparse):
    shape, dtype = probs
    if g != (shape[:-1], dtype) or (not sparse and labels != probs):
        return None
    return [probs]


softmax_cross_entropy_grad_p = Primitive(
    "softmax_cross_entropy_grad", _sce_grad_impl, _sce_grad_vjp, shape_rule=_sce_grad_shape
)


def _sce_vjp(gs, logits, labels, out, sparse):
    g_loss, g_probs = gs
    probs = out[1]
    g_logits = None
    if g_loss is not None:
        g_logits = softmax_cross_entropy_grad_p.bind(g_loss, probs, labels, sparse=sparse)
    # The probabilities are an output too; a cotangent reaching them (a caller using them, or a
    # second derivative of this very rule, which reads `probs`) goes through softmax's VJP.
    # The engine passes None for an output that no cotangent reached (usually `probs`).
    if g_probs is not None:
        inner = subtract(g_probs, sum(multiply(g_probs, probs), axis=-1, keepdims=True))
        term = multiply(probs, inner)
        g_logits = term if g_logits is None else add(g_logits, term)
    if sparse or g_loss is None:
        return g_logits, None
    log_probs = subtract(logits, logsumexp(logits, axis=-1, keepdims=True))
    return g_logits, negative(multiply(expand_dims(g_loss, -1), log_probs))


def _sce_shape(logits, labels, sparse):
    shape, dtype = logits
    if not shape or not dtype.is_floating_point:
        return None
    if sparse:
        if labels[0] != shape[:-1] or labels[1].is_floating_point or labels[1].is_complex:
            return None
    elif labels[0] != shape:
        return None
    return [(shape[:-1], dtype), logits]


softmax_cross_entropy_p = Primitive(
    "softmax_cross_entropy",
    _sce_impl,
    _sce_vjp,
    multiple_results=True,
    vjp_accepts_none=True,
    shape_rule=_sce_shape,
)


def softmax_cross_entropy(logits, labels, sparse: bool = False) -> tuple[Tensor, Tensor]:
    """Fused softmax cross-entropy over the last axis of `logits`.

    Args:
        logits: float tensor of shape `(..., num_classes)`.
        labels: with `sparse=True`, integer class ids of shape `logits.shape[:-1]`;
            otherwise probabilities of `logits`' shape.
        sparse: whether `labels` are class ids.

    Returns:
        `(loss, probs)`: the per-example loss of shape `logits.shape[:-1]` and
        `softmax(logits)`.

    Raises:
        ValueError: if the shapes do not match or `logits` has rank 0.
        TypeError: if `logits` is not floating point or sparse labels are not integers.

    Example:
        >>> loss, probs = softmax_cross_entropy([[2.0, 0.0, -1.0]], [0], sparse=True)
        >>> loss.shape, probs.shape
        ((1,), (1, 3))
    """
    logits, labels = pair(logits, labels)
    if not logits._value.is_floating_point():
        raise TypeError(
            "softmax_cross_entropy: `logits` must be a floating-point tensor. "
            f"Received: logits.dtype={logits.dtype}"
        )
    if logits.ndim < 1:
        raise ValueError(
            "softmax_cross_entropy: `logits` must have rank >= 1. "
            f"Received: logits.shape={logits.shape}"
        )
    if sparse:
        if labels._value.is_floating_point() or labels.dtype == "bool":
            raise TypeError(
                "softmax_cross_entropy: with sparse=True, `labels` must be integer class ids. "
                f"Received: labels.dtype={labels.dtype}"
            )
        if labels.shape != logits.shape[:-1]:
            raise ValueError(
                "softmax_cross_entropy: with sparse=True, `labels` must have shape "
                f"logits.shape[:-1]={logits.shape[:-1]}. Received: labels.shape={labels.shape}"
            )
    else:
        if labels.shape != logits.shape:
            raise ValueError(
                "softmax_cross_entropy: dense `labels` must have the shape of `logits`. "
                f"Received: labels.shape={labels.shape}, logits.shape={logits.shape}"
            )
        labels = cast(labels, logits.dtype)
    return softmax_cross_entropy_p.bind(logits, labels, sparse=bool(sparse))


def _float_output(output: Tensor) -> Tensor:
    return output if output._value.is_floating_point() else cast(output, config.floatx())


def _clipped_log_probs(output: Tensor, axis: int) -> Tensor:
    # As Keras: renormalise along the class axis, then clip so the log stays finite.
    eps = config.epsilon()
    p = divide(output, sum(output, axis=axis, keepdims=True))
    return log(clip(p, eps, 1.0 - eps))


def categorical_crossentropy(target, output, from_logits=False, axis=-1):
    """Categorical cross-entropy between one-hot (or soft) targets and predictions.

    Args:
        target: tensor of target probabilities, same shape as `output`.
        output: predicted probabilities, or logits when `from_logits=True`.
        from_logits: whether `output` holds unnormalised logits.
        axis: the class axis.

    Returns:
        The loss per example: `output`'s shape without `axis`.

    Raises:
        ValueError: if the shapes differ or the rank is 0.

    Example:
        >>> categorical_crossentropy([[0.0, 1.0]], [[0.1, 0.9]]).shape
        (1,)
    """
    output, target = pair(output, target)
    if target.shape != output.shape:
        raise ValueError(
            "categorical_crossentropy: arguments `target` and `output` must have the same "
            f"shape. Received: target.shape={target.shape}, output.shape={output.shape}"
        )
    if output.ndim < 1:
        raise ValueError(
            "categorical_crossentropy: arguments `target` and `output` must be at least "
            f"rank 1. Received: target.shape={target.shape}, output.shape={output.shape}"
        )
    axis = canonical_axis(axis, output.ndim, "categorical_crossentropy")
    output = _float_output(output)
    target = cast(target, output.dtype)
    if from_logits:
        logits = moveaxis(output, axis, -1)
        labels = moveaxis(target, axis, -1)
        loss, probs = softmax_cross_entropy_p.bind(logits, labels, sparse=False)
        # The fused rule's logits gradient is g * (probs - labels) (TensorFlow's, right for
        # rows of labels that sum to 1); Keras's is g * (probs * sum(labels) - labels). The
        # difference, g * (sum(labels) - 1) * probs, comes from a term whose value is 0.
        u = sum(multiply(stop_gradient_p.bind(probs), logits), axis=-1)
        excess = stop_gradient_p.bind(subtract(sum(labels, axis=-1), 1.0))
        return add(loss, multiply(excess, subtract(u, stop_gradient_p.bind(u))))
    log_probs = _clipped_log_probs(output, axis)
    return negative(sum(multiply(target, log_probs), axis=axis))


def sparse_categorical_crossentropy(target, output, from_logits=False, axis=-1):
    """Categorical cross-entropy with integer class ids as targets.

    Args:
        target: integer class ids, of `output`'s shape without `axis` (a trailing size-1
            class axis is squeezed, as in Keras).
        output: predicted probabilities, or logits when `from_logits=True`.
        from_logits: whether `output` holds unnormalised logits.
        axis: the class axis of `output`.

    Returns:
        The loss per example: `output`'s shape without `axis`.

    Raises:
        ValueError: if `output` has rank 0 or the target's shape does not match.

    Example:
        >>> sparse_categorical_crossentropy([1], [[0.1, 0.9]]).shape
        (1,)
    """
    output, target = pair(output, target)
    if output.ndim < 1:
        raise ValueError(
            "sparse_categorical_crossentropy: argument `output` must be at least rank 1. "
            f"Received: output.shape={output.shape}"
        )
    axis = canonical_axis(axis, output.ndim, "sparse_categorical_crossentropy")
    if target.ndim == output.ndim and target.shape[axis] == 1:
        target = squeeze(target, axis)
    expected = output.shape[:axis] + output.shape[axis + 1 :]
    if target.shape != expected:
        raise ValueError(
            "sparse_categorical_crossentropy: arguments `target` and `output` must have the "
            "same shape up until the class axis. "
            f"Received: target.shape={target.shape}, output.shape={output.shape}"
        )
    if target._value.is_floating_point() or target.dtype == "bool":
        target = cast(target, "int64")  # as Keras, float class ids truncate to integers
    output = _float_output(output)
    target = check_class_ids_p.bind(target, num_classes=output.shape[axis])
    if from_logits:
        logits = moveaxis(output, axis, -1)
        return softmax_cross_entropy_p.bind(logits, target, sparse=True)[0]
    log_probs = moveaxis(_clipped_log_probs(output, axis), axis, -1)
    onehot = one_hot_p.bind(target, num_classes=output.shape[axis], dtype=output._value.dtype)
    return negative(sum(multiply(onehot, log_probs), axis=-1))


def binary_crossentropy(target, output, from_logits=False):
    """Binary cross-entropy, elementwise (no reduction).

    With `from_logits=True` the loss is `max(x, 0) - x * z + log1p(exp(-|x|))`, which is
    finite for any logit `x`; otherwise `output` is clipped to [epsilon, 1 - epsilon].

    Args:
        target: targets in [0, 1], same shape as `output`.
        output: predicted probabilities, or logits when `from_logits=True`.
        from_logits: whether `output` holds logits.

    Returns:
        The elementwise loss, `output`'s shape.

    Raises:
        ValueError: if the shapes differ.

    Example:
        >>> binary_crossentropy([1.0, 0.0], [0.8, 0.3]).shape
        (2,)
    """
    output, target = pair(output, target)
    if target.shape != output.shape:
        raise ValueError(
            "binary_crossentropy: arguments `target` and `output` must have the same shape. "
            f"Received: target.shape={target.shape}, output.shape={output.shape}"
        )
    output = _float_output(output)
    target = cast(target, output.dtype)
    if from_logits:
        # softplus(x) = max(x, 0) + log1p(exp(-|x|)); its derivative is sigmoid(x), correct at
        # x = 0 too, where the max/abs spelling would pick one-sided subgradients.
        return subtract(softplus(output), multiply(output, target))
    eps = config.epsilon()
    p = clip(output, eps, 1.0 - eps)
    return negative(
        add(multiply(target, log(p)), multiply(subtract(1.0, target), log(subtract(1.0, p))))
    )
