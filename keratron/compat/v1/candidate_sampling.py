"""Candidate sampling: `tf.nn.nce_loss`, `tf.nn.sampled_softmax_loss` and the log-uniform
(Zipfian) and uniform candidate samplers, with TF's semantics.

A sampler draws on the host, before the compiled step (as TF's sampler kernels run on the
CPU): its candidates and number of tries are fed into the step, where the expected counts are
computed from them. A session's draws follow the graph and op seeds as TF's do (a fixed stream
per session when either is set), but not TF's bits.
"""

from __future__ import annotations

import math
import weakref

import numpy as np

from keratron import ops as kops
from keratron.compat.v1.framework import (
    as_dtype,
    convert_to_tensor,
    get_default_graph,
    make_op,
    op_scope,
)

__all__ = [
    "log_uniform_candidate_sampler",
    "uniform_candidate_sampler",
    "nce_loss",
    "sampled_softmax_loss",
]

_FLOAT_MAX = float(np.finfo(np.float32).max)


def _seed_sequence(op_seed):
    """TF's rule: a graph or op seed fixes the stream (per session); neither, a fresh one."""
    g = get_default_graph()
    if g.seed is None and op_seed is None:
        return None
    graph_seed = g.seed if g.seed is not None else 87654321
    op_seed = op_seed if op_seed is not None else g._next_uid()
    return (int(graph_seed), int(op_seed))


# ---------------------------------------------------------------------------- the math
# On keratron values; compat.v1's ops lower to these and compat.v2's eager functions call them.
def log_uniform_distribution(range_max):
    """(draw(rng, n) -> int64 classes, prob(classes float64) -> P) of TF's LogUniformSampler."""
    log_range = math.log(int(range_max) + 1)

    def draw(rng, n):
        # TF's LogUniformSampler: floor(exp(u * log(range + 1))) - 1, modulo range.
        return (np.exp(rng.random(n) * log_range).astype(np.int64) - 1) % int(range_max)

    def prob(c):
        return kops.log((c + 2.0) / (c + 1.0)) / log_range

    return draw, prob


def uniform_distribution(range_max):
    """(draw, prob) of TF's UniformSampler over [0, range_max)."""

    def draw(rng, n):
        return rng.integers(0, int(range_max), size=n, dtype=np.int64)

    def prob(c):
        return kops.zeros_like(c) + 1.0 / int(range_max)

    return draw, prob


def expected_counts(classes, n_tries, prob, num_sampled):
    """TF's ExpectedCountHelper: `num_sampled * P(c)` when every draw was kept (no unique
    sampling, or no repeat), else `1 - (1 - P(c)) ** tries`; float32."""
    p = prob(kops.cast(classes, "float64"))
    t = kops.cast(n_tries, "float64")
    counts = kops.where(t == num_sampled, p * num_sampled, -kops.expm1(t * kops.log1p(-p)))
    return kops.cast(counts, "float32")


def check_sampler_args(who, num_true, num_sampled, unique, range_max):
    num_true, num_sampled, range_max = int(num_true), int(num_sampled), int(range_max)
    if num_sampled < 1 or range_max < 1 or num_true < 1:
        raise ValueError(
            f"{who}: num_true, num_sampled and range_max must be positive. Received: "
            f"num_true={num_true}, num_sampled={num_sampled}, range_max={range_max}"
        )
    if unique and num_sampled > range_max:
        raise ValueError(
            f"{who}: with unique=True, num_sampled must be at most range_max. Received: "
            f"num_sampled={num_sampled}, range_max={range_max}"
        )
    return num_true, num_sampled, range_max


def sampled_logits(wv, bv, lv, xv, sampled, true_exp, sampled_exp, num_true,
                   remove_accidental_hits):  # fmt: skip
    """TF's `_compute_sampled_logits` on values: (logits [batch, num_true + num_sampled],
    labels: `1 / num_true` for the true classes, 0 for the sampled ones)."""
    sampled, true_exp, sampled_exp = (kops.stop_gradient(v) for v in (sampled, true_exp,
                                                                      sampled_exp))  # fmt: skip
    sampled = kops.cast(sampled, "int64")
    lv = kops.reshape(kops.cast(lv, "int64"), (-1, num_true))
    true_w = kops.take(wv, lv, axis=0)  # [batch, num_true, dim]
    true_logits = kops.sum(kops.expand_dims(xv, 1) * true_w, axis=-1) + kops.take(bv, lv)
    logits_s = kops.matmul(xv, kops.transpose(kops.take(wv, sampled, axis=0)))
    logits_s = logits_s + kops.take(bv, sampled)
    if remove_accidental_hits:
        hit = kops.any(
            kops.equal(kops.expand_dims(lv, -1), kops.reshape(sampled, (1, 1, -1))), axis=1
        )
        logits_s = logits_s + kops.where(hit, -_FLOAT_MAX, 0.0)
    true_logits = true_logits - kops.log(kops.reshape(true_exp, (-1, num_true)))
    logits_s = logits_s - kops.log(sampled_exp)
    logits = kops.concatenate([true_logits, logits_s], axis=1)
    labels = kops.concatenate(
        [kops.ones_like(true_logits) / num_true, kops.zeros_like(logits_s)], axis=1
    )
    return logits, labels


def nce_from_logits(logits, z):
    """Per-example sum of TF's sigmoid cross-entropies (written with where, as TF does)."""
    pos = logits >= 0
    per = (kops.where(pos, logits, kops.zeros_like(logits)) - logits * z
           + kops.log1p(kops.exp(kops.where(pos, -logits, logits))))  # fmt: skip
    return kops.sum(per, axis=1)


def softmax_from_logits(logits, z):
    """Per-example softmax cross-entropy with (constant) soft labels `z`."""
    return -kops.sum(kops.stop_gradient(z) * kops.log_softmax(logits, axis=1), axis=1)


def draw_candidates(rng, sample_one_chunk, num_sampled, unique, range_max):
    """`num_sampled` candidates (distinct if `unique`, in the order first drawn) and the
    number of draws it took."""
    if not unique:
        return sample_one_chunk(rng, num_sampled), num_sampled
    values = np.empty(0, np.int64)
    while True:
        values = np.concatenate([values, sample_one_chunk(rng, max(2 * num_sampled, 16))])
        uniq, first = np.unique(values, return_index=True)
        if len(uniq) >= num_sampled:
            order = np.sort(first)[:num_sampled]
            return values[order], int(order[-1]) + 1


def _candidate_sampler(kind, true_classes, num_true, num_sampled, unique, range_max, seed, name,
                       sample_one_chunk, prob):  # fmt: skip
    who = f"{kind}_candidate_sampler"
    num_true, num_sampled, range_max = check_sampler_args(
        who, num_true, num_sampled, unique, range_max
    )
    seeds = _seed_sequence(seed)
    rngs = weakref.WeakKeyDictionary()  # one stream per session, as TF's op state

    with op_scope(name, kind.title().replace("_", "") + "CandidateSampler") as scope:
        tc = convert_to_tensor(true_classes, name="true_classes")
        if tc.dtype != as_dtype("int64"):
            raise TypeError(f"{who}: true_classes must be int64. Received: dtype {tc.dtype.name}")
        draw_op = make_op(
            "CandidateDraw", scope + "/draw", [], lambda ctx: None,
            out_specs=[((num_sampled,), "int64"), ((), "int32")],
        )  # fmt: skip

        def host(session):
            rng = rngs.get(session)
            if rng is None:
                rng = rngs[session] = np.random.default_rng(seeds)
            values, tries = draw_candidates(rng, sample_one_chunk, num_sampled, unique,
                                            range_max)  # fmt: skip
            return {draw_op.outputs[0]: values, draw_op.outputs[1]: np.int32(tries)}

        draw_op._attrs["host_fn"] = host
        sampled, tries = draw_op.outputs

        def expected(ctx, classes, n_tries):
            return expected_counts(classes, n_tries, prob, num_sampled)

        true_exp = make_op("ExpectedCount", scope + "/true_expected_count", [tc, tries],
                           expected, out_specs=[(tc.shape, "float32")]).outputs[0]  # fmt: skip
        sampled_exp = make_op("ExpectedCount", scope + "/sampled_expected_count",
                              [sampled, tries], expected,
                              out_specs=[((num_sampled,), "float32")]).outputs[0]  # fmt: skip
    return sampled, true_exp, sampled_exp


def log_uniform_candidate_sampler(true_classes, num_true, num_sampled, unique, range_max,
                                  seed=None, name=None):  # fmt: skip
    """Samples classes from TF's log-uniform (Zipfian) distribution over [0, range_max):
    `P(c) = (log(c + 2) - log(c + 1)) / log(range_max + 1)`.

    Args:
        true_classes: int64 [batch, num_true], the targets (only their expected counts are
            computed).
        num_true: the number of targets per example.
        num_sampled: the number of classes to draw.
        unique: draw without repetition (then a class's expected count is
            `1 - (1 - P(c)) ** num_tries`, else `num_sampled * P(c)`).
        range_max: the number of classes.
        seed: the op seed.

    Returns:
        `(sampled_candidates int64 [num_sampled], true_expected_count float32 [batch,
        num_true], sampled_expected_count float32 [num_sampled])`.

    Example:
        >>> import keratron.compat.v1 as tf
        >>> with tf.Graph().as_default(), tf.Session() as sess:
        ...     labels = tf.constant([[3]], tf.int64)
        ...     s, t, e = tf.nn.log_uniform_candidate_sampler(labels, 1, 5, True, 100, seed=1)
        ...     print(sess.run(s))
        [12 42 19 75  0]
    """
    chunk, prob = log_uniform_distribution(range_max)
    return _candidate_sampler("log_uniform", true_classes, num_true, num_sampled, unique,
                              range_max, seed, name, chunk, prob)  # fmt: skip


def uniform_candidate_sampler(true_classes, num_true, num_sampled, unique, range_max, seed=None,
                              name=None):  # fmt: skip
    """Samples classes uniformly from [0, range_max); returns what
    `log_uniform_candidate_sampler` returns."""

    chunk, prob = uniform_distribution(range_max)
    return _candidate_sampler("uniform", true_classes, num_true, num_sampled, unique, range_max,
                              seed, name, chunk, prob)  # fmt: skip


def single_param(params, who, what):
    if isinstance(params, (list, tuple)):
        if len(params) != 1:
            raise ValueError(
                f"{who}: {what} sharded over {len(params)} variables is not supported; give "
                "one tensor."
            )
        params = params[0]
    return params


def _sampled_logits(who, weights, biases, labels, inputs, num_sampled, num_classes, num_true,
                    sampled_values, remove_accidental_hits, seed):  # fmt: skip
    """TF's `_compute_sampled_logits`: the graph inputs and a function from their values to
    (logits [batch, num_true + num_sampled], labels of the same shape)."""
    num_true = int(num_true)
    w = convert_to_tensor(single_param(weights, who, "weights"))
    b = convert_to_tensor(single_param(biases, who, "biases"))
    x = convert_to_tensor(inputs)
    lab = convert_to_tensor(labels)
    if lab.dtype != as_dtype("int64"):
        from keratron.compat.v1 import math_ops

        lab = math_ops.cast(lab, "int64")
    if lab.shape.ndims is not None and lab.shape.ndims != 2:
        raise ValueError(
            f"{who}: labels must be [batch_size, num_true]. Received: shape {lab.shape}"
        )
    if sampled_values is None:
        sampled_values = log_uniform_candidate_sampler(
            lab, num_true, num_sampled, True, num_classes, seed=seed
        )
    if len(sampled_values) != 3:
        raise ValueError(
            f"{who}: sampled_values must be (sampled_candidates, true_expected_count, "
            f"sampled_expected_count). Received: {sampled_values}"
        )
    sv = [convert_to_tensor(v) for v in sampled_values]

    def compute(wv, bv, lv, xv, sampled, true_exp, sampled_exp):
        return sampled_logits(wv, bv, lv, xv, sampled, true_exp, sampled_exp, num_true,
                              remove_accidental_hits)  # fmt: skip

    return [w, b, lab, x, *sv], compute


def nce_loss(weights, biases, labels, inputs, num_sampled, num_classes, num_true=1,
             sampled_values=None, remove_accidental_hits=False, partition_strategy="mod",
             name="nce_loss"):  # fmt: skip
    """Noise-contrastive estimation loss per example: sigmoid cross-entropies of the true
    classes (label `1 / num_true`) and of `num_sampled` sampled classes (label 0), each logit
    less the log of its expected count.

    Args:
        weights: [num_classes, dim] class embeddings.
        biases: [num_classes].
        labels: int [batch, num_true] target classes.
        inputs: [batch, dim].
        num_sampled: the number of negative classes drawn per batch.
        num_classes: the number of classes.
        num_true: targets per example.
        sampled_values: `(sampled, true_expected_count, sampled_expected_count)` from a
            candidate sampler; `log_uniform_candidate_sampler(unique=True)` if None.
        remove_accidental_hits: give sampled classes equal to a target a logit of -FLT_MAX.

    Returns:
        float32 [batch]: each example's loss.

    Example:
        >>> import keratron.compat.v1 as tf
        >>> with tf.Graph().as_default(), tf.Session() as sess:
        ...     tf.set_random_seed(1)
        ...     w, b, x = tf.zeros([10, 4]), tf.zeros([10]), tf.ones([2, 4])
        ...     loss = tf.nn.nce_loss(w, b, [[1], [2]], x, num_sampled=3, num_classes=10)
        ...     print(sess.run(loss).round(3))
        [4.351 4.248]
    """
    ins, compute = _sampled_logits("nce_loss", weights, biases, labels, inputs, num_sampled,
                                   num_classes, num_true, sampled_values,
                                   remove_accidental_hits, None)  # fmt: skip

    def lower(ctx, *vals):
        return nce_from_logits(*compute(*vals))

    with op_scope(name, "nce_loss") as scope:
        return make_op("NceLoss", scope, ins, lower, dtype="float32").outputs[0]


def sampled_softmax_loss(weights, biases, labels, inputs, num_sampled, num_classes, num_true=1,
                         sampled_values=None, remove_accidental_hits=True,
                         partition_strategy="mod", name="sampled_softmax_loss",
                         seed=None):  # fmt: skip
    """Softmax cross-entropy over the true classes and `num_sampled` sampled ones, each logit
    less the log of its expected count (sampled classes equal to a target removed by default).

    Args: as `nce_loss`, and `seed` for the default sampler.

    Returns:
        float32 [batch]: each example's loss.
    """
    ins, compute = _sampled_logits("sampled_softmax_loss", weights, biases, labels, inputs,
                                   num_sampled, num_classes, num_true, sampled_values,
                                   remove_accidental_hits, seed)  # fmt: skip

    def lower(ctx, *vals):
        return softmax_from_logits(*compute(*vals))

    with op_scope(name, "sampled_softmax_loss") as scope:
        return make_op("SampledSoftmaxLoss", scope, ins, lower, dtype="float32").outputs[0]
