"""Tensor creation: zeros, ones, full, ranges and identity-like matrices (keras.ops names).

New tensors go to `keratron.config.default_device()`; the default float dtype is `floatx()`.
The `*_like` functions bind primitives (their output follows `x`'s shape, dtype and device),
so a traced graph sees them; the rest make constants.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from keratron import config
from keratron.autodiff.dtypes import standardize_dtype, to_torch_dtype
from keratron.autodiff.tensor import Tensor, convert_to_tensor
from keratron.ops._core import (
    Primitive,
    _concrete,
    as_tensor,
    canonical_axis,
)
from keratron.ops.elementwise import (
    abs,
    cast,
    equal,
    log10,
    logical_or,
    multiply,
    ones_like_p,
    power,
    sign,
    zeros_like_p,
)
from keratron.ops.reduction import (
    any as _any,
)
from keratron.ops.shaping import (
    broadcast_to,
    concatenate,
    expand_dims,
    get_item,
    moveaxis,
)

__all__ = [
    "zeros",
    "ones",
    "full",
    "empty",
    "zeros_like",
    "ones_like",
    "full_like",
    "empty_like",
    "arange",
    "linspace",
    "eye",
    "identity",
    "tri",
    "array",
]


def _dtype(dtype, default=None) -> torch.dtype:
    return to_torch_dtype(standardize_dtype(dtype if dtype is not None else default))


def _shape(shape, op) -> tuple:
    if isinstance(shape, Tensor):
        shape = shape.numpy().tolist()
    try:
        dims = (int(shape),) if np.ndim(shape) == 0 else tuple(int(d) for d in shape)
    except (TypeError, ValueError) as e:
        raise TypeError(
            f"{op}: `shape` must be an int or a sequence of ints. Received: shape={shape!r}"
        ) from e
    if any(d < 0 for d in dims):
        raise ValueError(f"{op}: `shape` must be non-negative. Received: shape={shape!r}")
    return dims


def _new(fn, shape, dtype, op, *args):
    return Tensor(fn(_shape(shape, op), *args, dtype=_dtype(dtype), device=config.default_device()))


def zeros(shape, dtype=None):
    """A tensor of zeros (dtype defaults to floatx).

    Example:
        >>> keratron.ops.zeros((2, 3)).shape
        (2, 3)
    """
    return _new(torch.zeros, shape, dtype, "zeros")


def ones(shape, dtype=None):
    """A tensor of ones (dtype defaults to floatx).

    Example:
        >>> keratron.ops.ones(2, dtype="int32").numpy()
        array([1, 1], dtype=int32)
    """
    return _new(torch.ones, shape, dtype, "ones")


def empty(shape, dtype=None):
    """An uninitialised tensor (dtype defaults to floatx).

    Example:
        >>> keratron.ops.empty((2, 3)).shape
        (2, 3)
    """
    return _new(torch.empty, shape, dtype, "empty")


def full(shape, fill_value, dtype=None):
    """A tensor of `shape` filled with `fill_value` (a scalar, or an array broadcast to
    `shape`); dtype defaults to floatx, as in Keras.

    Example:
        >>> keratron.ops.full((2,), 7, dtype="int32").numpy()
        array([7, 7], dtype=int32)
    """
    shp = _shape(shape, "full")
    td = _dtype(dtype)
    if isinstance(fill_value, (bool, int, float)):
        return Tensor(torch.full(shp, fill_value, dtype=td, device=config.default_device()))
    from keratron.ops.shaping import broadcast_to

    value = convert_to_tensor(fill_value, dtype=td, device=config.default_device())
    try:
        return broadcast_to(value, shp)
    except ValueError as e:
        raise ValueError(
            f"full: fill_value of shape {value.shape} cannot be broadcast to shape {shp}."
        ) from e


def _full_like_impl(x, fill_value, dtype):
    return torch.full_like(x, fill_value, dtype=dtype)


full_like_p = Primitive("full_like", _full_like_impl)
empty_like_p = Primitive("empty_like", lambda x, dtype: torch.empty_like(x, dtype=dtype))


def _scalar(v):
    if isinstance(v, (Tensor, np.ndarray, np.generic)) and np.size(v) == 1:
        return np.asarray(v).reshape(()).item()
    return v


def zeros_like(x, dtype=None):
    """Zeros with the shape (and by default the dtype) of `x`.

    Example:
        >>> keratron.ops.zeros_like([1, 2]).numpy()
        array([0, 0], dtype=int32)
    """
    x = as_tensor(x)
    if dtype is None or _dtype(dtype) is x._value.dtype:
        return zeros_like_p.bind(x)
    return full_like_p.bind(x, fill_value=0, dtype=_dtype(dtype))


def ones_like(x, dtype=None):
    """Ones with the shape (and by default the dtype) of `x`.

    Example:
        >>> keratron.ops.ones_like([1.0, 2.0]).numpy()
        array([1., 1.], dtype=float32)
    """
    x = as_tensor(x)
    if dtype is None or _dtype(dtype) is x._value.dtype:
        return ones_like_p.bind(x)
    return full_like_p.bind(x, fill_value=1, dtype=_dtype(dtype))


def full_like(x, fill_value, dtype=None):
    """`fill_value` (a scalar, or an array broadcast to `x`'s shape) with the shape and, by
    default, the dtype of `x`.

    Example:
        >>> keratron.ops.full_like([1, 2, 3], 2.5).numpy()
        array([2, 2, 2], dtype=int32)
    """
    x = as_tensor(x)
    td = x._value.dtype if dtype is None else _dtype(dtype)
    fill_value = _scalar(fill_value)
    if isinstance(fill_value, (bool, int, float)):
        if not td.is_floating_point and not td.is_complex and td is not torch.bool:
            fill_value = int(fill_value)  # numpy truncates a float fill for integer dtypes
        return full_like_p.bind(x, fill_value=fill_value, dtype=td)
    from keratron.ops.shaping import _with, broadcast_to

    value = convert_to_tensor(fill_value, dtype=td)
    value = _with(value, x)
    try:
        return broadcast_to(value, x.shape)
    except ValueError as e:
        raise ValueError(
            f"full_like: fill_value of shape {value.shape} cannot be broadcast to x's shape "
            f"{x.shape}."
        ) from e


def empty_like(x, dtype=None):
    """An uninitialised tensor with the shape (and by default the dtype) of `x`.

    Example:
        >>> keratron.ops.empty_like([1.0, 2.0]).shape
        (2,)
    """
    x = as_tensor(x)
    td = x._value.dtype if dtype is None else _dtype(dtype)
    return empty_like_p.bind(x, dtype=td)


def array(x, dtype=None):
    """A tensor from array-like `x` (as `convert_to_tensor`).

    Example:
        >>> keratron.ops.array([1, 2]).dtype
        'int32'
    """
    return convert_to_tensor(x, dtype=dtype)


def _number(v, op, arg):
    """A Python number from a scalar argument, and the dtype it implies (Keras's weak typing:
    Python and numpy ints give int32, floats give floatx; a tensor keeps its dtype)."""
    if isinstance(v, Tensor):
        if v.size != 1:
            raise ValueError(
                f"{op}: `{arg}` must be a scalar. Received a tensor of shape {v.shape}."
            )
        return v._value.reshape(()).item(), v.dtype
    if isinstance(v, (np.ndarray, np.generic)):
        if np.size(v) != 1:
            raise ValueError(f"{op}: `{arg}` must be a scalar. Received shape {np.shape(v)}.")
        v = np.asarray(v).reshape(()).item()
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise TypeError(f"{op}: `{arg}` must be a real number. Received: {arg}={v!r}")
    return v, "int32" if isinstance(v, int) else config.floatx()


def _result_dtype(dtypes) -> str:
    out = torch.int32
    for d in dtypes:
        out = torch.promote_types(out, to_torch_dtype(d))
    return standardize_dtype(out)


def arange(start, stop=None, step=None, dtype=None):
    """Evenly spaced values in [start, stop) (`arange(stop)` starts at 0; `step` defaults
    to 1). Integer arguments give int32, float arguments floatx.

    Example:
        >>> keratron.ops.arange(3, 7, 2).numpy()
        array([3, 5], dtype=int32)
    """
    args = [("start", start)]
    if stop is not None:
        args.append(("stop", stop))
    if step is not None:
        args.append(("step", step))
    vals = {name: _number(v, "arange", name) for name, v in args}
    if dtype is None:
        dtype = _result_dtype([d for _, d in vals.values()])
    lo, hi = (0, vals["start"][0]) if stop is None else (vals["start"][0], vals["stop"][0])
    st = vals["step"][0] if step is not None else 1
    if st == 0:
        raise ValueError("arange: `step` must not be zero. Received: step=0")
    td = _dtype(dtype)
    n = max(0, math.ceil((hi - lo) / st))
    dev = config.default_device()
    # numpy's rule, start + i * step, in int64 or float64 then cast (float32 results do not
    # drift over long ranges).
    exact = all(isinstance(v, int) for v in (lo, hi, st))
    v = torch.arange(n, dtype=torch.int64 if exact else torch.float64, device=dev) * st + lo
    return Tensor(v.to(td))


def linspace(start, stop, num=50, endpoint=True, retstep=False, dtype=None, axis=0):
    """`num` evenly spaced samples from `start` to `stop` (inclusive when `endpoint`).

    `start`/`stop` may be arrays: the samples then run along a new `axis`. With `retstep`,
    returns `(samples, step)`. Integer dtypes take the floor of the float samples, as numpy.

    Example:
        >>> keratron.ops.linspace(0.0, 1.0, 5).numpy()
        array([0.  , 0.25, 0.5 , 0.75, 1.  ], dtype=float32)
    """
    num = int(num)
    if num < 0:
        raise ValueError(f"linspace: `num` must be non-negative. Received: num={num}")
    dev = config.default_device()
    s = as_tensor(start)._value.to(device=dev, dtype=torch.float64)
    e = as_tensor(stop)._value.to(device=dev, dtype=torch.float64)
    try:
        s, e = torch.broadcast_tensors(s, e)
    except RuntimeError as err:
        raise ValueError(
            f"linspace: start of shape {tuple(s.shape)} and stop of shape {tuple(e.shape)} "
            "do not broadcast."
        ) from err
    if dtype is None:
        # Float arrays keep their precision; Python numbers and integers give floatx.
        dtype = config.floatx()
        for v in (start, stop):
            t = as_tensor(v)
            if t._value.is_floating_point():
                dtype = _result_dtype([dtype, t.dtype])
    td = _dtype(dtype)
    div = (num - 1) if endpoint else num
    delta = e - s
    step = delta / div if div > 0 else torch.full_like(delta, float("nan"))
    shape = (num,) + (1,) * s.dim()
    t = torch.arange(num, dtype=torch.float64, device=dev).reshape(shape)
    y = s + t * step if div > 0 else s + t * delta
    if endpoint and num > 1:
        y[-1] = e
    if not td.is_floating_point:
        y = torch.floor(y)
    out = Tensor(torch.movedim(y, 0, axis % (s.dim() + 1)).to(td))
    if retstep:
        return out, (step.item() if step.dim() == 0 else Tensor(step.to(td)))
    return out


def eye(N, M=None, k=0, dtype=None):
    """A 2-D tensor with ones on the k-th diagonal and zeros elsewhere.

    Example:
        >>> keratron.ops.eye(2, 3, k=1).numpy()
        array([[0., 1., 0.],
               [0., 0., 1.]], dtype=float32)
    """
    n = int(N)
    m = n if M is None else int(M)
    if n < 0 or m < 0:
        raise ValueError(f"eye: N and M must be non-negative. Received: N={N}, M={M}")
    k = 0 if k is None else int(k)
    dev = config.default_device()
    r = torch.arange(n, device=dev).reshape(-1, 1)
    c = torch.arange(m, device=dev).reshape(1, -1)
    return Tensor((c - r == k).to(_dtype(dtype)))


def identity(n, dtype=None):
    """The n x n identity matrix.

    Example:
        >>> keratron.ops.identity(2).numpy()
        array([[1., 0.],
               [0., 1.]], dtype=float32)
    """
    return eye(n, dtype=dtype)


def tri(N, M=None, k=0, dtype=None):
    """A 2-D tensor with ones at and below the k-th diagonal, zeros above.

    Example:
        >>> keratron.ops.tri(2, 3).numpy()
        array([[1., 0., 0.],
               [1., 1., 0.]], dtype=float32)
    """
    n = int(N)
    m = n if M is None else int(M)
    if n < 0 or m < 0:
        raise ValueError(f"tri: N and M must be non-negative. Received: N={N}, M={M}")
    dev = config.default_device()
    r = torch.arange(n, device=dev).reshape(-1, 1)
    c = torch.arange(m, device=dev).reshape(1, -1)
    return Tensor((c - r <= int(k)).to(_dtype(dtype)))


# ------------------------------------------------------------------ windows, log/geometric ranges
__all__ += ["hamming", "hanning", "blackman", "bartlett", "kaiser", "logspace", "geomspace"]


def _window(fn, m, op, **kw):
    m = int(m)
    if m < 0:
        raise ValueError(f"{op}: the window length must be non-negative. Received: {m}")
    w = fn(m, sym=True, dtype=torch.float64, **kw) if m else torch.zeros(0, dtype=torch.float64)
    dev = config.default_device()
    return Tensor(w.to(device=dev, dtype=to_torch_dtype(config.floatx())))


def hamming(x):
    """The symmetric Hamming window of length `x`.

    Example:
        >>> keratron.ops.hamming(3).numpy()
        array([0.08, 1.  , 0.08], dtype=float32)
    """
    return _window(torch.signal.windows.hamming, x, "hamming")


def hanning(x):
    """The symmetric Hann window of length `x`.

    Example:
        >>> keratron.ops.hanning(3).numpy()
        array([0., 1., 0.], dtype=float32)
    """
    return _window(torch.signal.windows.hann, x, "hanning")


def blackman(x):
    """The symmetric Blackman window of length `x`.

    Example:
        >>> keratron.ops.blackman(3).shape
        (3,)
    """
    return _window(torch.signal.windows.blackman, x, "blackman")


def bartlett(x):
    """The symmetric Bartlett (triangular, zero at the ends) window of length `x`.

    Example:
        >>> keratron.ops.bartlett(5).numpy()
        array([0. , 0.5, 1. , 0.5, 0. ], dtype=float32)
    """
    return _window(torch.signal.windows.bartlett, x, "bartlett")


def kaiser(x, beta):
    """The Kaiser window of length `x` with shape parameter `beta`.

    Example:
        >>> keratron.ops.kaiser(3, 0.0).numpy()
        array([1., 1., 1.], dtype=float32)
    """
    return _window(torch.signal.windows.kaiser, x, "kaiser", beta=float(beta))


def _space_dtype(start, stop, dtype):
    if dtype is not None:
        return standardize_dtype(dtype)
    d = config.floatx()
    for v in (start, stop):
        t = as_tensor(v)
        if t._value.dtype.is_floating_point and t.dtype == "float64":
            d = "float64"
    return d


def logspace(start, stop, num=50, endpoint=True, base=10, dtype=None, axis=0):
    """`base ** linspace(start, stop, num)`: samples evenly spaced on a log scale.

    Example:
        >>> keratron.ops.logspace(0.0, 2.0, 3).numpy()
        array([  1.,  10., 100.], dtype=float32)
    """
    out_dtype = _space_dtype(start, stop, dtype)
    exps = linspace(start, stop, num, endpoint=endpoint, dtype="float64", axis=axis)
    return cast(power(as_tensor(float(base), dtype="float64"), exps), out_dtype)


def geomspace(start, stop, num=50, endpoint=True, dtype=None, axis=0):
    """Samples evenly spaced on a log scale from `start` to `stop` (same sign, nonzero).

    Example:
        >>> keratron.ops.geomspace(1.0, 1000.0, 4).numpy()
        array([   1.,   10.,  100., 1000.], dtype=float32)
    """
    out_dtype = _space_dtype(start, stop, dtype)
    s = as_tensor(start, dtype="float64")
    e = as_tensor(stop, dtype="float64")
    if _concrete(s) and bool(_any(logical_or(equal(s, 0), equal(e, 0)))):
        raise ValueError("geomspace: `start` and `stop` must be nonzero.")
    sgn = sign(s)
    exps = linspace(log10(abs(s)), log10(abs(e)), num, endpoint=endpoint, dtype="float64")
    out = multiply(power(as_tensor(10.0, dtype="float64"), exps), sgn)
    if int(num) > 0:
        # numpy returns the end points exactly.
        first = expand_dims(s, 0)
        rest = get_item(out, slice(1, None))
        out = concatenate([broadcast_to(first, (1,) + tuple(s.shape)), rest], axis=0)
        if endpoint and int(num) > 1:
            last = expand_dims(broadcast_to(e, tuple(s.shape)), 0)
            out = concatenate([get_item(out, slice(0, -1)), last], axis=0)
    out = moveaxis(out, 0, canonical_axis(axis, out.ndim, "geomspace"))
    return cast(out, out_dtype)
