"""TF2's eager `tf.nn.nce_loss`, `tf.nn.sampled_softmax_loss` and
`tf.random.log_uniform_candidate_sampler` / `uniform_candidate_sampler`, on keratron tensors.

The math is compat.v1's (the same functions its graph ops lower to); the draws come from numpy
on the host: an op `seed` gives a reproducible stream (each call draws anew, as TF's eager ops
do), no seed a stream seeded from keratron's global generator (`tf.random.set_seed`).
"""

from __future__ import annotations

import numpy as np

from keratron import ops as kops
from keratron import random as krandom
from keratron.compat.v1 import candidate_sampling as cs
from keratron.compat.v2.ops import convert_to_tensor

__all__ = [
    "log_uniform_candidate_sampler",
    "uniform_candidate_sampler",
    "nce_loss",
    "sampled_softmax_loss",
]

_SEEDED: dict = {}  # op seed -> its numpy generator


def _rng(seed):
    if seed is None:
        draw = krandom.randint((), 0, 2**31 - 1, dtype="int32")
        return np.random.default_rng(int(draw.numpy()))
    if seed not in _SEEDED:
        _SEEDED[seed] = np.random.default_rng(int(seed))
    return _SEEDED[seed]


def _sample(who, distribution, true_classes, num_true, num_sampled, unique, range_max, seed):
    num_true, num_sampled, range_max = cs.check_sampler_args(
        who, num_true, num_sampled, unique, range_max
    )
    tc = convert_to_tensor(true_classes)
    if tc.dtype != "int64":
        raise TypeError(f"{who}: true_classes must be int64. Received: dtype {tc.dtype}")
    draw, prob = distribution(range_max)
    values, tries = cs.draw_candidates(_rng(seed), draw, num_sampled, unique, range_max)
    sampled = convert_to_tensor(values)
    tries = np.int32(tries)
    return (
        sampled,
        cs.expected_counts(tc, tries, prob, num_sampled),
        cs.expected_counts(sampled, tries, prob, num_sampled),
    )


def log_uniform_candidate_sampler(true_classes, num_true, num_sampled, unique, range_max,
                                  seed=None, name=None):  # fmt: skip
    """Draws `num_sampled` classes from TF's log-uniform (Zipfian) distribution over
    [0, range_max); returns `(sampled_candidates, true_expected_count,
    sampled_expected_count)` as `tf.compat.v1`'s sampler does.

    Example:
        >>> import keratron.compat.v2 as tf
        >>> s, t, e = tf.random.log_uniform_candidate_sampler(
        ...     tf.constant([[3]], tf.int64), 1, 5, True, 100)
        >>> s.shape, t.shape, e.shape, len(set(s.numpy().tolist()))
        ((5,), (1, 1), (5,), 5)
    """
    return _sample("log_uniform_candidate_sampler", cs.log_uniform_distribution, true_classes,
                   num_true, num_sampled, unique, range_max, seed)  # fmt: skip


def uniform_candidate_sampler(true_classes, num_true, num_sampled, unique, range_max, seed=None,
                              name=None):  # fmt: skip
    """Draws `num_sampled` classes uniformly from [0, range_max) (see
    `log_uniform_candidate_sampler`)."""
    return _sample("uniform_candidate_sampler", cs.uniform_distribution, true_classes, num_true,
                   num_sampled, unique, range_max, seed)  # fmt: skip


def _logits(who, weights, biases, labels, inputs, num_sampled, num_classes, num_true,
            sampled_values, remove_accidental_hits, seed):  # fmt: skip
    num_true = int(num_true)
    w = convert_to_tensor(cs.single_param(weights, who, "weights"))
    b = convert_to_tensor(cs.single_param(biases, who, "biases"))
    x = convert_to_tensor(inputs)
    lab = kops.cast(convert_to_tensor(labels), "int64")
    if lab.ndim != 2:
        raise ValueError(
            f"{who}: labels must be [batch_size, num_true]. Received: shape {tuple(lab.shape)}"
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
    return cs.sampled_logits(w, b, lab, x, *sv, num_true, remove_accidental_hits)


def nce_loss(weights, biases, labels, inputs, num_sampled, num_classes, num_true=1,
             sampled_values=None, remove_accidental_hits=False, name="nce_loss"):  # fmt: skip
    """Noise-contrastive estimation loss per example (TF2's signature; see
    `keratron.compat.v1.nn.nce_loss`). Returns float32 [batch]."""
    logits, z = _logits("nce_loss", weights, biases, labels, inputs, num_sampled, num_classes,
                         num_true, sampled_values, remove_accidental_hits, None)  # fmt: skip
    return cs.nce_from_logits(logits, z)


def sampled_softmax_loss(weights, biases, labels, inputs, num_sampled, num_classes, num_true=1,
                         sampled_values=None, remove_accidental_hits=True, seed=None,
                         name="sampled_softmax_loss"):  # fmt: skip
    """Sampled softmax loss per example (TF2's signature; see
    `keratron.compat.v1.nn.sampled_softmax_loss`). Returns float32 [batch]."""
    logits, z = _logits("sampled_softmax_loss", weights, biases, labels, inputs, num_sampled,
                         num_classes, num_true, sampled_values, remove_accidental_hits,
                         seed)  # fmt: skip
    return cs.softmax_from_logits(logits, z)
