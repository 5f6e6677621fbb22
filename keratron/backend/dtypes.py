"""`keras.backend.result_type`: Keras's dtype promotion, a least upper bound on JAX's lattice.

Python `int` and `float` are "weak" types: they take the precision of the other operand
(`result_type("bfloat16", int)` is bfloat16), and alone they become int32 / `floatx()`. As in
Keras on its torch and JAX backends, a 64-bit result is reported as its 32-bit counterpart
(int64 -> int32, float64 -> float32, uint64 -> uint32, complex128 -> complex64).
"""

from __future__ import annotations

import functools

from keratron import config
from keratron.autodiff.dtypes import standardize_dtype

__all__ = ["result_type"]

# Each dtype's immediate successors; "int" and "float" are the weak Python types.
_LATTICE = {
    "bool": ("int",),
    "uint8": ("int16", "uint16"),
    "uint16": ("int32", "uint32"),
    "uint32": ("int64", "uint64"),
    "uint64": ("float",),
    "int": ("uint8", "int8", "complex64"),
    "int8": ("int16",),
    "int16": ("int32",),
    "int32": ("int64",),
    "int64": ("float",),
    "float": ("bfloat16", "float16"),
    "bfloat16": ("float32",),
    "float16": ("float32",),
    "float32": ("float64", "complex64"),
    "float64": ("complex128",),
    "complex64": ("complex128",),
    "complex128": (),
}
_TO_32_BIT = {"int64": "int32", "uint64": "uint32", "float64": "float32", "complex128": "complex64"}
_FLOAT8 = ("float8_e4m3fn", "float8_e5m2")


def _upper_bounds() -> dict:
    bounds = {}
    for node in _LATTICE:
        seen, todo = {node}, [node]
        while todo:
            for succ in _LATTICE[todo.pop()]:
                if succ not in seen:
                    seen.add(succ)
                    todo.append(succ)
        bounds[node] = seen
    return bounds


_UPPER_BOUNDS = _upper_bounds()


@functools.lru_cache(maxsize=512)
def _least_upper_bound(nodes: frozenset) -> str:
    common = set.intersection(*(_UPPER_BOUNDS[n] for n in nodes))
    least = (common & nodes) or {c for c in common if common <= _UPPER_BOUNDS[c]}
    if len(least) != 1:
        raise ValueError(
            f"result_type: input dtypes {tuple(sorted(nodes))} have no implicit dtype promotion "
            "path. Try explicitly casting inputs to the desired output type."
        )
    return least.pop()


def _weak(dtype: str) -> str:
    if dtype == "bool":
        return dtype
    for kind in ("float", "int", "complex"):
        if kind in dtype:
            return kind
    raise ValueError(f"result_type: no weak form of dtype {dtype!r}.")


def _resolve_weak(dtype: str, precision: str) -> str:
    kind = "f" if dtype == "bfloat16" else dtype[:1]
    if kind == "b":
        return "bool"
    if kind == "i":
        return f"int{precision}"
    if kind == "u":
        return f"uint{precision}"
    return f"float{precision}"


def result_type(*dtypes) -> str:
    """The dtype that combining values of `dtypes` gives, by Keras's promotion rules.

    Args:
        *dtypes: dtypes in any spelling `standardize_dtype` reads, Python `int` / `float` /
            `bool`, or None (`floatx()`).

    Returns:
        The dtype's name; `floatx()` when no dtype is given.

    Raises:
        ValueError: for a float8 dtype (never promoted implicitly), or dtypes with no common
            promotion.

    Example:
        >>> keratron.backend.result_type("int32", "float16")
        'float16'
        >>> keratron.backend.result_type("bfloat16", int)
        'bfloat16'
    """
    if not dtypes:
        return config.floatx()
    for dtype in dtypes:
        if isinstance(dtype, str) and dtype in _FLOAT8:
            raise ValueError(
                "result_type: there is no implicit conversion from float8 dtypes to others; "
                f"cast explicitly. Received: dtypes={dtypes}"
            )
    args = [config.floatx() if d is None else d for d in dtypes]
    names = [standardize_dtype(d) for d in args]
    weak = [d is int or d is float for d in args]
    if len(names) == 1:
        out, out_weak = names[0], weak[0]
    elif len(set(names)) == 1 and not all(weak):
        out, out_weak = names[0], False
    elif all(weak):
        out, out_weak = _least_upper_bound(frozenset(names)), True
    else:
        out = _least_upper_bound(frozenset(_weak(n) if w else n for n, w in zip(names, weak)))
        out_weak = out in ("int", "float")
    if out != "bool" and out_weak:
        out = _resolve_weak(out, config.floatx()[-2:])
    return _TO_32_BIT.get(out, out)
