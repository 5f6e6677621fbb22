"""`tf.nn` with TF1's signatures: activations, `conv2d` with `[1, s, s, 1]` strides, pooling,
`dropout(keep_prob)`, the cross-entropies, `l2_loss`, `bias_add`, `moments`, `in_top_k`."""

from __future__ import annotations

from keratron import ops as kops
from keratron import random as krandom
from keratron.compat.v1 import array_ops
from keratron.compat.v1.framework import convert_to_tensor, make_op, op_scope
from keratron.compat.v1.math_ops import sigmoid, tanh

__all__ = [
    "relu", "relu6", "elu", "selu", "softplus", "softsign", "sigmoid", "tanh", "leaky_relu",
    "softmax", "log_softmax", "bias_add", "xw_plus_b", "conv2d", "max_pool", "avg_pool",
    "dropout", "softmax_cross_entropy_with_logits", "softmax_cross_entropy_with_logits_v2",
    "sparse_softmax_cross_entropy_with_logits", "sigmoid_cross_entropy_with_logits",
    "l2_loss", "moments", "in_top_k", "embedding_lookup", "l2_normalize", "lrn",
    "local_response_normalization", "zero_fraction",
]  # fmt: skip


def _op(op_type, default, inputs, lower, name, **kw):
    with op_scope(name, default) as scope:
        ins = [convert_to_tensor(x) for x in inputs]
        return make_op(op_type, scope, ins, lower, **kw).outputs


def _act(op_type, fn):
    def act(features, name=None):
        return _op(op_type, op_type, [features], lambda ctx, x: fn(x), name)[0]

    act.__name__ = op_type.lower()
    return act


relu = _act("Relu", kops.relu)
relu6 = _act("Relu6", kops.relu6)
elu = _act("Elu", kops.elu)
selu = _act("Selu", kops.selu)
softplus = _act("Softplus", kops.softplus)
softsign = _act("Softsign", kops.softsign)


def leaky_relu(features, alpha=0.2, name=None):
    return _op(
        "LeakyRelu", "LeakyRelu", [features], lambda ctx, x: kops.leaky_relu(x, alpha), name
    )[0]


def softmax(logits, axis=None, name=None, dim=None):
    ax = -1 if axis is None and dim is None else (axis if axis is not None else dim)
    return _op("Softmax", "Softmax", [logits], lambda ctx, x: kops.softmax(x, axis=ax), name)[0]


def log_softmax(logits, axis=None, name=None, dim=None):
    ax = -1 if axis is None and dim is None else (axis if axis is not None else dim)
    return _op(
        "LogSoftmax", "LogSoftmax", [logits], lambda ctx, x: kops.log_softmax(x, axis=ax), name
    )[0]


def bias_add(value, bias, data_format=None, name=None):
    return _op("BiasAdd", "BiasAdd", [value, bias], lambda ctx, x, b: x + b, name)[0]


def xw_plus_b(x, weights, biases, name=None):
    return _op(
        "XwPlusB",
        "xw_plus_b",
        [x, weights, biases],
        lambda ctx, a, w, b: kops.matmul(a, w) + b,
        name,
    )[0]


def _hw(v, what):
    v = list(v)
    if len(v) != 4 or v[0] != 1 or v[3] != 1:
        raise ValueError(
            f"{what} must be [1, h, w, 1] for NHWC (batch and channel entries 1). Received: {v}"
        )
    return (int(v[1]), int(v[2]))


def conv2d(input, filter=None, strides=None, padding=None, use_cudnn_on_gpu=True,  # noqa: A002
           data_format="NHWC", dilations=None, name=None, filters=None):  # fmt: skip
    """`tf.nn.conv2d` on NHWC input with an HWIO filter; `strides=[1, s, s, 1]`, `padding`
    "SAME" or "VALID"."""
    filt = filter if filter is not None else filters
    if data_format != "NHWC":
        raise ValueError(f"conv2d: only data_format='NHWC' is supported. Received: {data_format}")
    s = _hw(strides, "conv2d strides")
    d = _hw(dilations, "conv2d dilations") if dilations is not None else (1, 1)
    pad = padding.lower()
    return _op(
        "Conv2D",
        "Conv2D",
        [input, filt],
        lambda ctx, x, k: kops.conv(
            x, k, strides=s, padding=pad, data_format="channels_last", dilation_rate=d
        ),
        name,
    )[0]


def depthwise_conv2d(input, filter, strides, padding, rate=None, name=None,  # noqa: A002
                     data_format=None, dilations=None):  # fmt: skip
    """`tf.nn.depthwise_conv2d` on NHWC input with a `[h, w, in, multiplier]` filter: output
    channel `c * multiplier + m` is input channel c convolved with filter `[:, :, c, m]`."""
    if data_format not in (None, "NHWC"):
        raise ValueError(
            f"depthwise_conv2d: only data_format='NHWC' is supported. Received: {data_format}"
        )
    s = _hw(strides, "depthwise_conv2d strides")
    d = dilations if dilations is not None else rate
    d = (1, 1) if d is None else tuple(int(v) for v in d)
    if len(d) != 2:
        raise ValueError(f"depthwise_conv2d: rate must be [rate_h, rate_w]. Received: {d}")
    pad = padding.lower()
    return _op(
        "DepthwiseConv2dNative",
        "depthwise",
        [input, filter],
        lambda ctx, x, k: kops.depthwise_conv(
            x, k, strides=s, padding=pad, data_format="channels_last", dilation_rate=d
        ),
        name,
    )[0]


def _pool(op_type, fn):
    def pool(value, ksize, strides, padding, data_format="NHWC", name=None, input=None):  # noqa: A002
        x = value if value is not None else input
        k, s, pad = _hw(ksize, f"{op_type} ksize"), _hw(strides, f"{op_type} strides"), padding
        return _op(
            op_type,
            op_type,
            [x],
            lambda ctx, v: fn(v, k, strides=s, padding=pad.lower(), data_format="channels_last"),
            name,
        )[0]

    return pool


max_pool = _pool("MaxPool", kops.max_pool)
avg_pool = _pool("AvgPool", kops.average_pool)


def dropout(x, keep_prob=None, noise_shape=None, seed=None, name=None, rate=None):
    """Keeps each element with probability `keep_prob` (a float or a fed tensor), scaled by
    `1 / keep_prob`; TF1's form `floor(keep_prob + uniform) * x / keep_prob`."""
    if keep_prob is None:
        if rate is None:
            raise ValueError("dropout: give keep_prob or rate.")
        keep_prob = 1.0 - rate if not hasattr(rate, "op") else 1.0 - rate
    gen = array_ops._seed(seed)

    def lower(ctx, v, keep):
        shape = tuple(v.shape) if noise_shape is None else tuple(noise_shape)
        u = krandom.uniform(shape, dtype=v.dtype, seed=gen)
        return v / keep * kops.floor(keep + u)

    with op_scope(name, "dropout") as scope:
        xv = convert_to_tensor(x, name="x")
        kp = convert_to_tensor(keep_prob, dtype=xv.dtype, name="keep_prob")
        return make_op("Dropout", scope, [xv, kp], lower).outputs[0]


def _xent(op_type, default, sparse, stop_labels):
    def xent(_sentinel=None, labels=None, logits=None, dim=-1, name=None, axis=None):
        if _sentinel is not None:
            raise ValueError(f"Only call `{default}` with named arguments (labels=..., logits=...)")
        if labels is None or logits is None:
            raise ValueError("Both labels= and logits= must be provided.")

        def lower(ctx, lab, lg):
            if stop_labels:
                lab = kops.stop_gradient(lab)
            loss, _ = kops.softmax_cross_entropy(lg, lab, sparse=sparse)
            return loss

        with op_scope(name, default) as scope:
            lg = convert_to_tensor(logits)
            lab = convert_to_tensor(labels, dtype=None if sparse else lg.dtype)
            return make_op(op_type, scope, [lab, lg], lower).outputs[0]

    xent.__name__ = default
    return xent


softmax_cross_entropy_with_logits = _xent(
    "SoftmaxCrossEntropyWithLogits", "softmax_cross_entropy_with_logits", False, True
)
softmax_cross_entropy_with_logits_v2 = _xent(
    "SoftmaxCrossEntropyWithLogits", "softmax_cross_entropy_with_logits", False, False
)
sparse_softmax_cross_entropy_with_logits = _xent(
    "SparseSoftmaxCrossEntropyWithLogits", "SparseSoftmaxCrossEntropyWithLogits", True, False
)


def sigmoid_cross_entropy_with_logits(_sentinel=None, labels=None, logits=None, name=None):
    """`max(x, 0) - x * z + log(1 + exp(-|x|))`, TF's stable form."""

    def lower(ctx, z, x):
        # Written with `where` on x >= 0 as TF does, so the gradient at x = 0 is
        # sigmoid(0) - z (relu and abs would give their subgradient 0 there).
        pos = x >= 0
        relu_x = kops.where(pos, x, kops.zeros_like(x))
        neg_abs = kops.where(pos, -x, x)
        return relu_x - x * z + kops.log1p(kops.exp(neg_abs))

    with op_scope(name, "logistic_loss") as scope:
        lg = convert_to_tensor(logits)
        lab = convert_to_tensor(labels, dtype=lg.dtype)
        return make_op("LogisticLoss", scope, [lab, lg], lower).outputs[0]


def l2_loss(t, name=None):
    """`sum(t ** 2) / 2`."""
    return _op("L2Loss", "L2Loss", [t], lambda ctx, x: kops.sum(kops.square(x)) * 0.5, name)[0]


def l2_normalize(x, axis=None, epsilon=1e-12, name=None, dim=None):
    ax = axis if axis is not None else dim

    def lower(ctx, v):
        sq = kops.sum(kops.square(v), axis=ax, keepdims=True)
        return v * kops.rsqrt(kops.maximum(sq, epsilon))

    return _op("L2Normalize", "l2_normalize", [x], lower, name)[0]


def moments(x, axes, shift=None, name=None, keep_dims=None, keepdims=None):
    kd = bool(keepdims if keepdims is not None else keep_dims)
    ax = tuple(array_ops._axis_list(axes))
    with op_scope(name, "moments") as scope:
        xv = convert_to_tensor(x)
        op = make_op(
            "Moments",
            scope,
            [xv],
            lambda ctx, v: tuple(kops.moments(v, ax, keepdims=kd)),
            n_out=2,
        )
        return op.outputs[0], op.outputs[1]


def in_top_k(predictions, targets, k, name=None):
    return _op(
        "InTopKV2",
        "in_top_k",
        [predictions, targets],
        lambda ctx, p, t: kops.in_top_k(t, p, k),
        name,
    )[0]


def embedding_lookup(params, ids, partition_strategy="mod", name=None, max_norm=None):
    if isinstance(params, (list, tuple)):
        if len(params) != 1:
            raise NotImplementedError("embedding_lookup over sharded params is not supported.")
        params = params[0]
    return _op(
        "GatherV2",
        "embedding_lookup",
        [params, ids],
        lambda ctx, p, i: kops.take(p, i, axis=0),
        name,
    )[0]


def local_response_normalization(input, depth_radius=5, bias=1.0, alpha=1.0, beta=0.5,  # noqa: A002
                                 name=None):  # fmt: skip
    """`x / (bias + alpha * sum(x[..., d - r : d + r + 1] ** 2)) ** beta` over the last axis
    (NHWC channels), r = `depth_radius`."""
    r = int(depth_radius)

    def lower(ctx, x):
        c = x.shape[-1]
        padded = kops.pad(kops.square(x), [(0, 0)] * (x.ndim - 1) + [(r, r)])
        window = padded[..., 0:c]
        for i in range(1, 2 * r + 1):
            window = window + padded[..., i : i + c]
        return x / kops.power(bias + alpha * window, beta)

    return _op("LRN", "LRN", [input], lower, name)[0]


lrn = local_response_normalization


def zero_fraction(value, name=None):
    """The fraction of `value`'s elements that are zero (float32)."""

    def lower(ctx, x):
        return kops.mean(kops.cast(kops.equal(x, 0), "float32"))

    return _op("ZeroFraction", "zero_fraction", [value], lower, name)[0]


__all__ += ["sigmoid", "tanh", "depthwise_conv2d"]

# The recurrent cells and loops (rnn_cell.py, rnn.py).
from keratron.compat.v1 import rnn_cell  # noqa: E402
from keratron.compat.v1.rnn import (  # noqa: E402
    bidirectional_dynamic_rnn,
    dynamic_rnn,
    static_bidirectional_rnn,
    static_rnn,
)

__all__ += [
    "rnn_cell", "dynamic_rnn", "bidirectional_dynamic_rnn", "static_rnn",
    "static_bidirectional_rnn",
]  # fmt: skip

from keratron.compat.v1.candidate_sampling import (  # noqa: E402
    log_uniform_candidate_sampler,
    nce_loss,
    sampled_softmax_loss,
    uniform_candidate_sampler,
)

__all__ += [
    "log_uniform_candidate_sampler", "nce_loss", "sampled_softmax_loss",
    "uniform_candidate_sampler",
]  # fmt: skip
