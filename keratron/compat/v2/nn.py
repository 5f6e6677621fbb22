"""`tf.nn`: activations and losses under TF's names and signatures, eager over keratron.ops."""

from __future__ import annotations

from keratron import ops as kops
from keratron.compat.v2.ops import convert_to_tensor, l2_normalize, sigmoid, tanh

__all__ = [
    "elu", "gelu", "l2_loss", "l2_normalize", "leaky_relu", "log_softmax", "relu", "relu6",
    "selu", "sigmoid", "sigmoid_cross_entropy_with_logits", "silu", "softmax",
    "softmax_cross_entropy_with_logits", "softplus", "sparse_softmax_cross_entropy_with_logits",
    "swish", "tanh",
]  # fmt: skip


def relu(features, name=None):
    return kops.relu(convert_to_tensor(features))


def relu6(features, name=None):
    return kops.relu6(convert_to_tensor(features))


def elu(features, name=None):
    return kops.elu(convert_to_tensor(features))


def selu(features, name=None):
    return kops.selu(convert_to_tensor(features))


def softplus(features, name=None):
    return kops.softplus(convert_to_tensor(features))


def leaky_relu(features, alpha=0.2, name=None):
    return kops.leaky_relu(convert_to_tensor(features), negative_slope=alpha)


def gelu(features, approximate=False, name=None):
    return kops.gelu(convert_to_tensor(features), approximate=approximate)


def silu(features, beta=1.0):
    x = convert_to_tensor(features)
    return kops.multiply(x, kops.sigmoid(kops.multiply(x, beta)))


swish = silu


def softmax(logits, axis=None, name=None):
    return kops.softmax(convert_to_tensor(logits), axis=-1 if axis is None else axis)


def log_softmax(logits, axis=None, name=None):
    return kops.log_softmax(convert_to_tensor(logits), axis=-1 if axis is None else axis)


def sparse_softmax_cross_entropy_with_logits(labels=None, logits=None, name=None):
    """Per-example cross-entropy of integer `labels` against unnormalised `logits`."""
    if labels is None or logits is None:
        raise ValueError(
            "sparse_softmax_cross_entropy_with_logits needs both `labels` and `logits` "
            f"(by keyword). Received: labels={labels!r}, logits={logits!r}"
        )
    return kops.sparse_categorical_crossentropy(
        convert_to_tensor(labels), convert_to_tensor(logits), from_logits=True
    )


def softmax_cross_entropy_with_logits(labels, logits, axis=-1, name=None):
    """Per-example cross-entropy of a distribution `labels` against `logits`."""
    logits = convert_to_tensor(logits)
    labels = convert_to_tensor(labels, dtype=logits.dtype)
    return kops.negative(kops.sum(kops.multiply(labels, kops.log_softmax(logits, axis)), axis))


def sigmoid_cross_entropy_with_logits(labels=None, logits=None, name=None):
    """TF's stable form: max(x, 0) - x * z + log(1 + exp(-|x|))."""
    x = convert_to_tensor(logits)
    z = convert_to_tensor(labels, dtype=x.dtype)
    return kops.add(
        kops.subtract(kops.relu(x), kops.multiply(x, z)), kops.log1p(kops.exp(-kops.abs(x)))
    )


def l2_loss(t, name=None):
    """sum(t ** 2) / 2."""
    return kops.multiply(kops.sum(kops.square(convert_to_tensor(t))), 0.5)


from keratron.compat.v2.candidate_sampling import nce_loss, sampled_softmax_loss  # noqa: E402

__all__ += ["nce_loss", "sampled_softmax_loss"]
