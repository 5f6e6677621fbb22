"""Random sampling, named and defaulted like `keras.random`, and `SeedGenerator`.

Every draw uses keratron's own `torch.Generator` objects, never torch's global generator, so
importing or using keratron leaves `torch.get_rng_state()` untouched. A draw is a pure function
of a (seed, counter) pair:

- an int `seed` always gives the pair (seed, 0): the same values on every call, as in Keras;
- a `SeedGenerator` gives (its seed, its counter) and then advances the counter, so successive
  calls differ but the whole sequence is reproducible;
- `seed=None` uses the global `SeedGenerator`, which `keratron.utils.set_random_seed` resets.

The pair is mixed into a 64-bit generator seed (splitmix64, so nearby seeds and counters give
unrelated streams) and a per-thread, per-device `torch.Generator` is re-seeded with it. A step
captured as a CUDA graph draws from a generator registered with the graph instead (normal,
uniform, truncated normal and dropout masks from a SeedGenerator or the global one), so each
replay draws fresh numbers; int-seeded draws keep a step uncaptured. The
sampling primitives are effects (`effect=True`): a graph compiler must never merge, fold or
drop them. They take the seed as a parameter (an int, a SeedGenerator or None, resolved when
the primitive runs), so a compiled step that replays them draws fresh values each time.
On the "meta" device (shape inference) nothing is drawn and no counter advances.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import numbers
import random as python_random
import threading

import numpy as np
import torch

from keratron import config
from keratron.autodiff import cuda_graphs
from keratron.autodiff.dtypes import is_float, is_int, standardize_dtype, to_torch_dtype
from keratron.autodiff.primitive import Primitive
from keratron.autodiff.tensor import Tensor, Variable
from keratron.ops.elementwise import add, cast, multiply, zeros_like_p
from keratron.ops.image import install_sampler as _install_image_sampler
from keratron.ops.utils import as_tensor, canonical_axis, pair

__all__ = [
    "SeedGenerator",
    "normal",
    "uniform",
    "truncated_normal",
    "randint",
    "shuffle",
    "dropout",
    "categorical",
    "gamma",
    "binomial",
    "beta",
]

_MASK64 = (1 << 64) - 1
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1


def _splitmix64(z: int) -> int:
    z = (z + 0x9E3779B97F4A7C15) & _MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
    return z ^ (z >> 31)


def _mix(seed: int, counter: int) -> int:
    # torch's CPU generator keeps only the low 32 bits of its seed, so the pair is hashed
    # (not concatenated) to make every bit of seed and counter matter.
    return _splitmix64(_splitmix64(seed & _MASK64) ^ (counter & _MASK64))


# ------------------------------------------------------------------------------ SeedGenerator
_seed_generator_names = itertools.count()
_state_lock = threading.Lock()


def make_default_seed() -> int:
    """A seed drawn from Python's `random`, so `set_random_seed` makes it reproducible."""
    return python_random.randint(1, int(1e9))


class SeedGenerator:
    """A stream of seeds: each random op that receives it draws different values.

    An int `seed` passed to a random op gives the same values on every call; a
    SeedGenerator advances on every call, and its whole sequence is fixed by its seed. Its
    state is a non-trainable int64 Variable `[seed, counter]` kept on the CPU (it is read on
    every draw; a device copy would force a synchronisation).

    Args:
        seed: int initial seed; None draws one from Python's `random`.
        name: optional name; defaults to "seed_generator", "seed_generator_1", ...

    Example:
        >>> gen = keratron.random.SeedGenerator(seed=42)
        >>> a = keratron.random.normal((2, 3), seed=gen)
        >>> b = keratron.random.normal((2, 3), seed=gen)  # different from a
    """

    def __init__(self, seed=None, name=None, **kwargs):
        if kwargs:
            raise ValueError(f"SeedGenerator: unrecognized keyword arguments: {sorted(kwargs)}")
        n = next(_seed_generator_names)
        self.name = name if name is not None else ("seed_generator" + (f"_{n}" if n else ""))
        self._initial_seed = seed
        if seed is None:
            seed = make_default_seed()
        if not isinstance(seed, numbers.Integral) or isinstance(seed, bool):
            raise ValueError(
                f"SeedGenerator: argument `seed` must be an integer. Received: seed={seed!r}"
            )
        seed = int(seed)
        if not _INT64_MIN <= seed <= _INT64_MAX:
            raise ValueError(
                f"SeedGenerator: argument `seed` must fit in 64 bits. Received: seed={seed}"
            )
        with config.device("cpu"):
            self.state = Variable(
                np.array([seed, 0], dtype=np.int64),
                dtype="int64",
                trainable=False,
                name="seed_generator_state",
            )

    def next(self, ordered=True) -> Tensor:
        """Returns the current `[seed, counter]` pair as a Tensor and advances the counter.

        `ordered` is accepted for Keras compatibility; the counter always advances by one.
        """
        del ordered
        current = Tensor(self.state._value.clone())
        self._next_key()
        return current

    def _next_key(self) -> int:
        # Read-and-advance is atomic, so threads sharing a generator never reuse a counter.
        with _state_lock:
            v = self.state._value
            seed, counter = v.tolist()
            v[1] = counter + 1
        return _mix(seed, counter)

    def get_config(self) -> dict:
        return {"seed": self._initial_seed, "name": self.name}

    @classmethod
    def from_config(cls, config):
        return cls(**config)

    def __repr__(self):
        seed, counter = self.state._value.tolist()
        return f"<SeedGenerator name={self.name}, seed={seed}, counter={counter}>"


_global_generator: SeedGenerator | None = None
_global_lock = threading.Lock()


def global_seed_generator() -> SeedGenerator:
    """The SeedGenerator that random ops use when `seed=None` (created on first use)."""
    global _global_generator
    with _global_lock:
        if _global_generator is None:
            _global_generator = SeedGenerator(name="global_seed_generator")
        return _global_generator


def reset_global_seed_generator() -> None:
    """Drops the global SeedGenerator; the next unseeded draw creates a new one from Python's
    `random` (used by `keratron.utils.set_random_seed`)."""
    global _global_generator
    with _global_lock:
        _global_generator = None


def _check_seed(seed, op: str):
    if seed is None or isinstance(seed, SeedGenerator):
        return seed
    if isinstance(seed, numbers.Integral) and not isinstance(seed, bool):
        return int(seed)
    raise ValueError(
        f"{op}: argument `seed` must be an int, a SeedGenerator or None. "
        f"Received: seed={seed!r} (of type {type(seed).__name__})"
    )


class _ThreadGenerators(threading.local):
    def __init__(self):
        self.by_device: dict[str, torch.Generator] = {}


_generators = _ThreadGenerators()


class _CaptureGenerators(threading.local):
    def __init__(self):
        self.by_device: dict[int, torch.Generator] | None = None


# While a CUDA graph captures a step on this thread: {CUDA device index: the graph's
# generator}.
_capturing = _CaptureGenerators()


def _generator(seed, device) -> torch.Generator:
    """Resolves `seed` (int / SeedGenerator / None) to a freshly seeded generator on `device`.

    Called only when a sampling primitive runs, so a replayed graph advances its
    SeedGenerators exactly as eager code does. While a CUDA graph captures a step, a draw
    from a SeedGenerator (or the global one) uses the graph's own registered generator
    instead, unseeded: each replay of the graph advances that generator's offset on the
    device, so every replay draws fresh numbers (the SeedGenerator's counter advances once,
    at capture).
    """
    if seed is None:
        key = global_seed_generator()._next_key()
    elif isinstance(seed, SeedGenerator):
        key = seed._next_key()
    else:
        key = _mix(seed, 0)
    dev = str(torch.device(device))
    captured = _capturing.by_device
    if captured is not None and torch.device(device).type == "cuda":
        gen = captured.get(_cuda_index(device))
        if gen is None or not isinstance(seed, (SeedGenerator, type(None))):
            raise RuntimeError(
                f"a random draw on {dev} (seed={seed!r}) while a CUDA graph captures a step "
                "has no graph-safe generator"
            )
        return gen
    gen = _generators.by_device.get(dev)
    if gen is None:
        gen = _generators.by_device[dev] = torch.Generator(device=dev)
    gen.manual_seed(key)
    return gen


def _is_meta(device) -> bool:
    return torch.device(device).type == "meta"


# ------------------------------------------------------------------------------ CUDA graphs
def _cuda_index(device) -> int:
    device = torch.device(device)
    return device.index if device.index is not None else torch.cuda.current_device()


def _capture_rule(params) -> str | None:
    if isinstance(params.get("seed"), (SeedGenerator, type(None))):
        return None
    return (
        "draws with a fixed int seed (the same numbers at every call), which a replayed "
        "graph cannot re-seed"
    )


@contextlib.contextmanager
def _graph_generator(graph, device, plan):
    """Capture hook: before a step with random draws is captured on CUDA, a generator seeded
    from the global SeedGenerator is registered with `graph` (each replay advances its
    offset), and the step's draws use it while the capture runs."""
    if plan is not None and not any(name in _GRAPH_SAFE for name in plan.nodes):
        yield None
        return
    index = _cuda_index(device)
    gen = torch.cuda.default_generators[index].clone_state()
    gen.manual_seed(global_seed_generator()._next_key())
    with torch.cuda.device(index):
        graph.register_generator_state(gen)
    previous = _capturing.by_device
    _capturing.by_device = {index: gen}
    try:
        yield gen
    finally:
        _capturing.by_device = previous


# ------------------------------------------------------------------------------ validation
def _check_shape(shape, op: str) -> tuple:
    if isinstance(shape, numbers.Integral):
        shape = (shape,)
    try:
        out = tuple(int(d) for d in shape)
    except (TypeError, ValueError):
        raise ValueError(
            f"{op}: argument `shape` must be a tuple of non-negative ints. Received: "
            f"shape={shape!r}"
        ) from None
    if any(d < 0 for d in out):
        raise ValueError(
            f"{op}: argument `shape` must be a tuple of non-negative ints. Received: "
            f"shape={shape!r}"
        )
    return out


def _float_dtype(dtype, op: str) -> torch.dtype:
    name = standardize_dtype(dtype)  # None -> floatx()
    if not is_float(name):
        raise ValueError(f"{op} requires a floating point `dtype`. Received: dtype={dtype!r}")
    return to_torch_dtype(name)


def _is_number(v) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, bool)


def _meta_like(*_, shape, dtype, **__):
    return torch.empty(shape, dtype=dtype, device="meta")


# ------------------------------------------------------------------------------ primitives
# Samplers without a tensor input run on their `device` param, the others on their input's
# device; every draw re-seeds a generator from `seed`.


def _normal_impl(*, shape, dtype, device, mean, stddev, seed):
    if _is_meta(device):
        return torch.empty(shape, dtype=dtype, device=device)
    return torch.normal(
        mean, stddev, size=shape, generator=_generator(seed, device), dtype=dtype, device=device
    )


normal_p = Primitive("random_normal", _normal_impl, abstract=_meta_like, effect=True)


def _uniform_impl(*, shape, dtype, device, minval, maxval, seed):
    out = torch.empty(shape, dtype=dtype, device=device)
    if _is_meta(device):
        return out
    return out.uniform_(minval, maxval, generator=_generator(seed, device))


uniform_p = Primitive("random_uniform", _uniform_impl, abstract=_meta_like, effect=True)

# Truncated normal by inversion: u ~ U(Phi(-2), Phi(2)) and z = Phi^-1(u) is a standard normal
# conditioned on |z| < 2, exactly, in one pass (no rejection loop with a data-dependent
# number of rounds).
_PHI_LO = 0.5 * (1.0 + math.erf(-2.0 / math.sqrt(2.0)))
_PHI_HI = 0.5 * (1.0 + math.erf(2.0 / math.sqrt(2.0)))


def _truncated_normal_impl(*, shape, dtype, device, mean, stddev, seed):
    if _is_meta(device):
        return torch.empty(shape, dtype=dtype, device=device)
    work = torch.float64 if dtype == torch.float64 else torch.float32
    u = torch.empty(shape, dtype=work, device=device)
    u.uniform_(_PHI_LO, _PHI_HI, generator=_generator(seed, device))
    z = torch.erfinv(u.mul_(2.0).sub_(1.0)).mul_(math.sqrt(2.0)).clamp_(-2.0, 2.0)
    return z.mul_(stddev).add_(mean).to(dtype)


truncated_normal_p = Primitive(
    "random_truncated_normal", _truncated_normal_impl, abstract=_meta_like, effect=True
)


def _randint_impl(*, shape, dtype, device, minval, maxval, seed):
    if _is_meta(device):
        return torch.empty(shape, dtype=dtype, device=device)
    return torch.randint(
        minval, maxval, shape, generator=_generator(seed, device), dtype=dtype, device=device
    )


randint_p = Primitive("random_randint", _randint_impl, abstract=_meta_like, effect=True)


def _dropout_mask_impl(x, *, shape, keep, seed):
    # The mask takes its device and dtype from `x` when it runs (under tracing `x` is only a
    # placeholder at record time). Kept entries hold 1 / keep, so dropout is one multiply.
    if x.is_meta:
        return torch.empty(shape, dtype=x.dtype, device=x.device)
    # `rand < keep` is a Bernoulli(keep) draw, and on CPU about twice as fast as bernoulli_.
    work = torch.float64 if x.dtype == torch.float64 else torch.float32
    u = torch.rand(shape, generator=_generator(seed, x.device), dtype=work, device=x.device)
    return (u < keep).to(x.dtype).div_(keep)


dropout_mask_p = Primitive(
    "random_dropout_mask",
    _dropout_mask_impl,
    abstract=lambda x, *, shape, **_: torch.empty(shape, dtype=x.dtype, device="meta"),
    effect=True,
)
# The samplers a captured graph replays with fresh numbers (those whose kernels draw from a
# generator without a host read); `_graph_generator` looks for their names in a plan.
_GRAPH_SAFE_SAMPLERS = (normal_p, uniform_p, truncated_normal_p, dropout_mask_p)
_GRAPH_SAFE = frozenset(p.name for p in _GRAPH_SAFE_SAMPLERS)
for _prim in _GRAPH_SAFE_SAMPLERS:
    cuda_graphs.register_capture_rule(_prim, _capture_rule)
cuda_graphs.register_capture_hook(_graph_generator)


def _permutation_impl(x, *, axis, seed):
    n = x.shape[axis]
    if x.is_meta:
        return torch.empty((n,), dtype=torch.int64, device=x.device)
    return torch.randperm(n, generator=_generator(seed, x.device), device=x.device)


permutation_p = Primitive(
    "random_permutation",
    _permutation_impl,
    abstract=lambda x, *, axis, **_: torch.empty(
        (x.shape[axis],), dtype=torch.int64, device="meta"
    ),
    effect=True,
)


# Deterministic gather/scatter along one axis by an index tensor (an input, so a traced graph
# keeps the permutation a value, not a constant).
def _take_axis_vjp(g, x, idx, out, axis):
    return put_axis_p.bind(g, idx, size=x.shape[axis], axis=axis), None


take_axis_p = Primitive(
    "random_take_axis", lambda x, idx, axis: x.index_select(axis, idx), _take_axis_vjp
)


def _put_axis_impl(g, idx, size, axis):
    shape = list(g.shape)
    shape[axis] = size
    return torch.zeros(shape, dtype=g.dtype, device=g.device).index_add_(axis, idx, g)


put_axis_p = Primitive(
    "random_put_axis",
    _put_axis_impl,
    lambda h, g, idx, out, size, axis: (take_axis_p.bind(h, idx, axis=axis), None),
)


def _categorical_impl(logits, *, num_samples, dtype, seed):
    n = logits.shape[0]
    if logits.is_meta:
        return torch.empty((n, num_samples), dtype=dtype, device="meta")
    work = logits if logits.dtype in (torch.float32, torch.float64) else logits.float()
    probs = torch.softmax(work, dim=-1)
    gen = _generator(seed, logits.device)
    return torch.multinomial(probs, num_samples, replacement=True, generator=gen).to(dtype)


categorical_p = Primitive(
    "random_categorical",
    _categorical_impl,
    abstract=lambda logits, *, num_samples, dtype, **_: torch.empty(
        (logits.shape[0], num_samples), dtype=dtype, device="meta"
    ),
    effect=True,
)


def _gamma_draw(alpha, gen):
    # torch's gamma sampler works in float32/float64 only.
    work = alpha if alpha.dtype in (torch.float32, torch.float64) else alpha.float()
    return torch._standard_gamma(work.contiguous(), generator=gen)


def _gamma_impl(alpha, *, shape, dtype, seed):
    if alpha.is_meta:
        return torch.empty(shape, dtype=dtype, device="meta")
    return _gamma_draw(alpha.expand(shape), _generator(seed, alpha.device)).to(dtype)


gamma_p = Primitive("random_gamma", _gamma_impl, abstract=_meta_like, effect=True)


def _beta_impl(a, b, *, shape, dtype, seed):
    if a.is_meta:
        return torch.empty(shape, dtype=dtype, device="meta")
    gen = _generator(seed, a.device)
    ga = _gamma_draw(a.expand(shape), gen)
    gb = _gamma_draw(b.expand(shape), gen)
    return (ga / (ga + gb)).to(dtype)


beta_p = Primitive("random_beta", _beta_impl, abstract=_meta_like, effect=True)


def _binomial_impl(counts, probs, *, shape, dtype, seed):
    if counts.is_meta:
        return torch.empty(shape, dtype=dtype, device="meta")
    c = counts.expand(shape).to(torch.float64 if dtype == torch.float64 else torch.float32)
    p = probs.expand(shape).to(c.dtype)
    return torch.binomial(c, p, generator=_generator(seed, counts.device)).to(dtype)


binomial_p = Primitive("random_binomial", _binomial_impl, abstract=_meta_like, effect=True)


# ------------------------------------------------------------------------------ public API
def _scale_shift(x, scale, shift):
    """x * scale + shift with array-valued parameters (differentiable in them)."""
    return add(multiply(x, scale), shift)


def normal(shape, mean=0.0, stddev=1.0, dtype=None, seed=None):
    """Draws from a normal distribution.

    Args:
        shape: shape of the result.
        mean: mean of the distribution (a number, or an array that broadcasts to `shape`).
        stddev: standard deviation (a number or an array).
        dtype: a floating dtype; defaults to `keratron.config.floatx()`.
        seed: an int (same values on every call), a `SeedGenerator`, or None (global).

    Returns:
        A Tensor of `shape` on `keratron.config.default_device()`.

    Example:
        >>> x = keratron.random.normal((2, 3), mean=1.0, stddev=0.5, seed=0)
        >>> x.shape
        (2, 3)
    """
    shape = _check_shape(shape, "normal")
    dtype = _float_dtype(dtype, "normal")
    seed = _check_seed(seed, "normal")
    device = config.default_device()
    if _is_number(mean) and _is_number(stddev):
        return normal_p.bind(
            shape=shape,
            dtype=dtype,
            device=device,
            mean=float(mean),
            stddev=float(stddev),
            seed=seed,
        )
    z = normal_p.bind(shape=shape, dtype=dtype, device=device, mean=0.0, stddev=1.0, seed=seed)
    return _scale_shift(z, stddev, mean)


def uniform(shape, minval=0.0, maxval=1.0, dtype=None, seed=None):
    """Draws uniformly from `[minval, maxval)`.

    Args:
        shape: shape of the result.
        minval: lower bound (inclusive); a number or an array.
        maxval: upper bound (exclusive); a number or an array.
        dtype: a floating dtype; defaults to `keratron.config.floatx()`.
        seed: an int, a `SeedGenerator`, or None (global).

    Example:
        >>> x = keratron.random.uniform((4,), minval=-1.0, maxval=1.0, seed=1)
    """
    shape = _check_shape(shape, "uniform")
    dtype = _float_dtype(dtype, "uniform")
    seed = _check_seed(seed, "uniform")
    device = config.default_device()
    if _is_number(minval) and _is_number(maxval):
        if not minval <= maxval:
            raise ValueError(
                f"uniform: `minval` must not exceed `maxval`. Received: minval={minval}, "
                f"maxval={maxval}"
            )
        return uniform_p.bind(
            shape=shape,
            dtype=dtype,
            device=device,
            minval=float(minval),
            maxval=float(maxval),
            seed=seed,
        )
    u = uniform_p.bind(shape=shape, dtype=dtype, device=device, minval=0.0, maxval=1.0, seed=seed)
    lo, hi = pair(minval, maxval)
    return _scale_shift(u, hi - lo, lo)


def truncated_normal(shape, mean=0.0, stddev=1.0, dtype=None, seed=None):
    """Draws from a normal distribution truncated to `mean ± 2 * stddev`.

    Values are those of a normal distribution conditioned on lying within two standard
    deviations of the mean (drawn by inversion, so every value is inside the bounds).

    Args:
        shape: shape of the result.
        mean: mean of the untruncated distribution (a number or an array).
        stddev: standard deviation of the untruncated distribution (a number or an array).
        dtype: a floating dtype; defaults to `keratron.config.floatx()`.
        seed: an int, a `SeedGenerator`, or None (global).

    Example:
        >>> x = keratron.random.truncated_normal((1000,), seed=3)
        >>> bool(abs(x.numpy()).max() <= 2.0)
        True
    """
    shape = _check_shape(shape, "truncated_normal")
    dtype = _float_dtype(dtype, "truncated_normal")
    seed = _check_seed(seed, "truncated_normal")
    device = config.default_device()
    if _is_number(mean) and _is_number(stddev):
        return truncated_normal_p.bind(
            shape=shape,
            dtype=dtype,
            device=device,
            mean=float(mean),
            stddev=float(stddev),
            seed=seed,
        )
    z = truncated_normal_p.bind(
        shape=shape, dtype=dtype, device=device, mean=0.0, stddev=1.0, seed=seed
    )
    return _scale_shift(z, stddev, mean)


def randint(shape, minval, maxval, dtype="int32", seed=None):
    """Draws integers uniformly from `[minval, maxval)`.

    Args:
        shape: shape of the result.
        minval: lowest value (inclusive), an int.
        maxval: upper bound (exclusive), an int greater than `minval`.
        dtype: an integer dtype; defaults to "int32".
        seed: an int, a `SeedGenerator`, or None (global).

    Example:
        >>> keratron.random.randint((3,), 0, 10, seed=0).dtype
        'int32'
    """
    shape = _check_shape(shape, "randint")
    name = standardize_dtype(dtype)
    if not is_int(name):
        raise ValueError(f"randint requires an integer `dtype`. Received: dtype={dtype!r}")
    for arg, v in (("minval", minval), ("maxval", maxval)):
        if not isinstance(v, numbers.Integral) or isinstance(v, bool):
            raise ValueError(f"randint: argument `{arg}` must be an int. Received: {arg}={v!r}")
    if not minval < maxval:
        raise ValueError(
            f"randint: `minval` must be less than `maxval`. Received: minval={minval}, "
            f"maxval={maxval}"
        )
    return randint_p.bind(
        shape=shape,
        dtype=to_torch_dtype(name),
        device=config.default_device(),
        minval=int(minval),
        maxval=int(maxval),
        seed=_check_seed(seed, "randint"),
    )


def shuffle(x, axis=0, seed=None):
    """Shuffles the slices of `x` along `axis` (one permutation for all of them).

    Differentiable in `x`: the gradient is permuted back.

    Args:
        x: the tensor to shuffle.
        axis: the axis whose slices are permuted; defaults to 0.
        seed: an int, a `SeedGenerator`, or None (global).

    Example:
        >>> x = keratron.ops.reshape(keratron.convert_to_tensor(list(range(6))), (3, 2))
        >>> keratron.random.shuffle(x, seed=0).shape
        (3, 2)
    """
    x = as_tensor(x)
    if x.ndim == 0:
        raise ValueError(
            "shuffle: argument `x` must have at least one dimension. Received a 0-d tensor."
        )
    axis = canonical_axis(axis, x.ndim, "shuffle")
    perm = permutation_p.bind(x, axis=axis, seed=_check_seed(seed, "shuffle"))
    return take_axis_p.bind(x, perm, axis=axis)


def dropout(inputs, rate, noise_shape=None, seed=None):
    """Zeroes entries at random with probability `rate` and scales the rest by 1 / (1 - rate).

    Computed as `inputs * mask / (1 - rate)` with a random 0/1 mask, so it is differentiable
    in `inputs` (the gradient is masked and scaled the same way).

    Args:
        inputs: the tensor to drop entries from.
        rate: probability of dropping an entry, in [0, 1].
        noise_shape: shape of the mask; it broadcasts to `inputs`' shape (use 1 to share the
            mask along an axis; None entries take `inputs`' size). Defaults to `inputs`' shape.
        seed: an int, a `SeedGenerator`, or None (global).

    Example:
        >>> x = keratron.ops.ones((4, 4))
        >>> y = keratron.random.dropout(x, rate=0.5, seed=0)  # entries are 0.0 or 2.0
    """
    x = as_tensor(inputs)
    if not _is_number(rate) or not 0.0 <= float(rate) <= 1.0:
        raise ValueError(
            f"dropout: argument `rate` must be a number in [0, 1]. Received: rate={rate!r}"
        )
    seed = _check_seed(seed, "dropout")
    if not x._value.dtype.is_floating_point:
        x = cast(x, config.floatx())
    if noise_shape is None:
        shape = x.shape
    else:
        noise_shape = tuple(noise_shape)
        if len(noise_shape) != x.ndim:
            raise ValueError(
                f"dropout: `noise_shape` must have one entry per dimension of `inputs` "
                f"{x.shape}. Received: noise_shape={noise_shape}"
            )
        shape = tuple(d if n is None else int(n) for n, d in zip(noise_shape, x.shape))
        if any(n not in (1, d) for n, d in zip(shape, x.shape)):
            raise ValueError(
                f"dropout: `noise_shape` must broadcast to the shape of `inputs` {x.shape} "
                f"(each entry 1 or the input's size). Received: noise_shape={noise_shape}"
            )
    rate = float(rate)
    if rate == 0.0:
        return x
    if rate == 1.0:
        return zeros_like_p.bind(x)
    mask = dropout_mask_p.bind(x, shape=shape, keep=1.0 - rate, seed=seed)
    return multiply(x, mask)


def categorical(logits, num_samples, dtype="int32", seed=None):
    """Draws class indices from the categorical distributions given by `logits`' rows.

    Args:
        logits: 2-D tensor `(batch_size, num_classes)` of unnormalised log-probabilities.
        num_samples: number of independent draws per row.
        dtype: integer dtype of the result; defaults to "int32".
        seed: an int, a `SeedGenerator`, or None (global).

    Returns:
        A Tensor of shape `(batch_size, num_samples)`.

    Example:
        >>> logits = keratron.convert_to_tensor([[0.0, 5.0], [5.0, 0.0]])
        >>> keratron.random.categorical(logits, 3, seed=0).shape
        (2, 3)
    """
    logits = as_tensor(logits)
    if logits.ndim != 2:
        raise ValueError(
            "categorical: `logits` must have shape (batch_size, num_classes). "
            f"Received: logits.shape={logits.shape}"
        )
    if not isinstance(num_samples, numbers.Integral) or num_samples < 0:
        raise ValueError(
            f"categorical: `num_samples` must be a non-negative int. Received: {num_samples!r}"
        )
    name = standardize_dtype(dtype)
    if not is_int(name):
        raise ValueError(f"categorical requires an integer `dtype`. Received: dtype={dtype!r}")
    if not logits._value.dtype.is_floating_point:
        logits = cast(logits, config.floatx())
    return categorical_p.bind(
        logits,
        num_samples=int(num_samples),
        dtype=to_torch_dtype(name),
        seed=_check_seed(seed, "categorical"),
    )


def _param_tensor(v, dtype, device) -> Tensor:
    t = as_tensor(v)
    if t._value.dtype != dtype or t.device != device:
        t = Tensor(t._value.to(device=device, dtype=dtype))
    return t


def _check_broadcast(op, arg, value, shape):
    try:
        ok = np.broadcast_shapes(tuple(value.shape), shape) == shape
    except ValueError:
        ok = False
    if not ok:
        raise ValueError(
            f"{op}: argument `{arg}` of shape {value.shape} does not broadcast to shape {shape}."
        )


def gamma(shape, alpha, dtype=None, seed=None):
    """Draws from a gamma distribution with concentration `alpha` (scale 1).

    Args:
        shape: shape of the result.
        alpha: concentration, a positive number or an array that broadcasts to `shape`.
        dtype: a floating dtype; defaults to `keratron.config.floatx()`.
        seed: an int, a `SeedGenerator`, or None (global).

    Example:
        >>> keratron.random.gamma((100,), alpha=2.0, seed=0).shape
        (100,)
    """
    shape = _check_shape(shape, "gamma")
    dtype = _float_dtype(dtype, "gamma")
    a = _param_tensor(alpha, dtype, config.default_device())
    _check_broadcast("gamma", "alpha", a, shape)
    return gamma_p.bind(a, shape=shape, dtype=dtype, seed=_check_seed(seed, "gamma"))


def beta(shape, alpha, beta, dtype=None, seed=None):
    """Draws from a beta distribution with parameters `alpha` and `beta`.

    Args:
        shape: shape of the result.
        alpha: first concentration (positive number or array broadcasting to `shape`).
        beta: second concentration (positive number or array).
        dtype: a floating dtype; defaults to `keratron.config.floatx()`.
        seed: an int, a `SeedGenerator`, or None (global).

    Example:
        >>> keratron.random.beta((10,), alpha=2.0, beta=5.0, seed=0).shape
        (10,)
    """
    shape = _check_shape(shape, "beta")
    dtype = _float_dtype(dtype, "beta")
    device = config.default_device()
    a = _param_tensor(alpha, dtype, device)
    b = _param_tensor(beta, dtype, device)
    _check_broadcast("beta", "alpha", a, shape)
    _check_broadcast("beta", "beta", b, shape)
    return beta_p.bind(a, b, shape=shape, dtype=dtype, seed=_check_seed(seed, "beta"))


def binomial(shape, counts, probabilities, dtype=None, seed=None):
    """Draws the number of successes in `counts` trials of success probability `probabilities`.

    Args:
        shape: shape of the result.
        counts: number of trials (a number or an array broadcasting to `shape`).
        probabilities: success probability per trial (a number or an array).
        dtype: a floating dtype for the counts drawn; defaults to `keratron.config.floatx()`.
        seed: an int, a `SeedGenerator`, or None (global).

    Example:
        >>> keratron.random.binomial((5,), counts=10, probabilities=0.5, seed=0).shape
        (5,)
    """
    shape = _check_shape(shape, "binomial")
    dtype = _float_dtype(dtype, "binomial")
    device = config.default_device()
    c = _param_tensor(counts, dtype, device)
    p = _param_tensor(probabilities, dtype, device)
    _check_broadcast("binomial", "counts", c, shape)
    _check_broadcast("binomial", "probabilities", p, shape)
    return binomial_p.bind(c, p, shape=shape, dtype=dtype, seed=_check_seed(seed, "binomial"))


def _image_normal(shape, **kwargs):
    # Resolves `normal` at each call, as the function-local import it replaces did, so that a
    # substituted `keratron.random.normal` is what the image ops draw with.
    return normal(shape, **kwargs)


# ops.image's random image ops (`elastic_transform`) draw through these; ops sits below random.
_install_image_sampler(check_seed=_check_seed, normal=_image_normal)
