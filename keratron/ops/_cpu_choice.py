"""Kernel choices on the CPU that are measured on this machine, once per signature.

Where two CPU kernels compute the same value and which one is faster depends on the processor
(torch's BLAS GEMM against oneDNN's inner product: on one 2-core Intel machine oneDNN ran
128x784 @ 784x512 twice as fast, on another BLAS matched it and ran the weight gradients
x.T @ g twice as fast), a route asks `choose` instead of a fixed rule. The first call of a
signature (its shapes, layouts and torch's thread count) runs each candidate on the call's own
operands a few times, interleaved, and keeps the fastest; later calls look the choice up. The
route's fixed rule names the default, which keeps its place unless another candidate is
`_MARGIN` faster, so a noisy measurement does not move a choice for a few percent. This is
cuDNN's benchmark mode for the CPU routes; the CUDA routes measure their own choices in
`ops/_dispatch.py`.

`keratron.config.set_cpu_kernel_benchmark(False)` (or KERATRON_CPU_KERNEL_BENCHMARK=0) makes
every route take its fixed rule, so that the kernel a product runs on, and with it the
rounding of its result, does not depend on timing.
"""

from __future__ import annotations

import time

# Per candidate: one warm-up call (oneDNN builds its primitive on the first), then _ROUNDS
# rounds of `calls` calls each, the candidates interleaved within a round; a candidate's time
# is its best round.
_ROUNDS = 3
# Another candidate replaces the default only when it is at least this much faster.
_MARGIN = 0.9
# At most this many signatures are measured per route; past that, new ones take the fixed
# rule.
_MAX_SIGNATURES = 256

# And at most this many choices (measured or fixed) are remembered in all.
_MAX_REMEMBERED = 4096

_choices: dict[tuple, str] = {}
_measured_per_route: dict[str, int] = {}


def _best_round(fn, calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return time.perf_counter() - start


def measure(candidates: dict, default: str, calls: int, timer=None) -> str:
    """The name of the fastest of `candidates` (name -> zero-argument callable), `default`
    unless another is `_MARGIN` faster. `timer(fn, calls)` times one round (`_best_round`
    when None)."""
    timer = timer or _best_round
    for fn in candidates.values():
        fn()
    best = dict.fromkeys(candidates, float("inf"))
    names = list(candidates)
    for r in range(_ROUNDS):
        # Rotate the order each round so that no candidate always runs first (cold caches).
        for name in names[r % len(names) :] + names[: r % len(names)]:
            best[name] = min(best[name], timer(candidates[name], calls))
    fastest = min(best, key=best.get)
    if fastest != default and best[fastest] < _MARGIN * best[default]:
        return fastest
    return default


def choose(route: str, key: tuple, candidates, default, calls: int = 1) -> str:
    """The kernel `route` runs for signature `key` (which must hold everything the choice
    depends on). On the first call of `key`: `candidates()` gives a dict of name ->
    zero-argument callable to measure, or None where the signature is not measured, and
    `default()` names the fixed rule's kernel; later calls look the choice up. The caller
    asks `config.cpu_kernel_benchmark()` first and takes its fixed rule where it is off."""
    full = (route, *key)
    choice = _choices.get(full)
    if choice is not None:
        return choice
    fixed = default()
    seen = _measured_per_route.get(route, 0)
    if seen >= _MAX_SIGNATURES:
        return fixed
    found = candidates()
    if not found:
        if len(_choices) < _MAX_REMEMBERED:
            _choices[full] = fixed  # not measurable: the fixed rule, remembered
        return fixed
    _measured_per_route[route] = seen + 1
    choice = _choices[full] = measure(found, fixed, calls)
    return choice


def forget() -> None:
    """Drops every measured choice (the next call of each signature measures again)."""
    _choices.clear()
    _measured_per_route.clear()
