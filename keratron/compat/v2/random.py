"""`tf.random`: seeded draws over `keratron.random` (TF's argument names and dtypes)."""

from __future__ import annotations

from keratron import random as krandom
from keratron import utils
from keratron.compat.v2.ops import _dt

__all__ = ["normal", "set_seed", "truncated_normal", "uniform"]


def set_seed(seed: int) -> None:
    """`tf.random.set_seed`: seeds keratron's global generator (and Python's and numpy's)."""
    utils.set_random_seed(seed)


def normal(shape, mean=0.0, stddev=1.0, dtype="float32", seed=None, name=None):
    return krandom.normal(tuple(shape), mean=mean, stddev=stddev, dtype=_dt(dtype), seed=seed)


def truncated_normal(shape, mean=0.0, stddev=1.0, dtype="float32", seed=None, name=None):
    return krandom.truncated_normal(
        tuple(shape), mean=mean, stddev=stddev, dtype=_dt(dtype), seed=seed
    )


def uniform(shape, minval=0, maxval=None, dtype="float32", seed=None, name=None):
    """Floats in [minval, maxval) (maxval defaults to 1); integers need `maxval`, as in TF."""
    name_ = _dt(dtype)
    if name_.startswith(("int", "uint")):
        if maxval is None:
            raise ValueError(f"tf.random.uniform needs `maxval` for dtype {name_}. Received: None")
        return krandom.randint(tuple(shape), minval, maxval, dtype=name_, seed=seed)
    maxval = 1.0 if maxval is None else maxval
    return krandom.uniform(tuple(shape), minval=minval, maxval=maxval, dtype=name_, seed=seed)


from keratron.compat.v2.candidate_sampling import (  # noqa: E402
    log_uniform_candidate_sampler,
    uniform_candidate_sampler,
)

__all__ += ["log_uniform_candidate_sampler", "uniform_candidate_sampler"]
