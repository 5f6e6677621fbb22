"""FFTs and signal framing (`keras.ops.math`): complex data travels as `(real, imag)` pairs,
as in Keras; `stft`/`istft` frame, window and transform on top of the FFT primitives.
"""

from __future__ import annotations

import numpy as np
import torch

from keratron.autodiff.tensor import Tensor
from keratron.ops._core import (
    Primitive,
    as_tensor,
    on_device_of,
)
from keratron.ops.elementwise import (
    _float,
    _promote,
    cast,
    divide,
    greater,
    multiply,
    square,
    where,
)
from keratron.ops.nn import _fold_p
from keratron.ops.reduction import sum
from keratron.ops.shaping import (
    _const,
    broadcast_to,
    get_item,
    pad,
    reshape,
    take_p,
    transpose,
)

__all__ = ["fft", "fft2", "ifft2", "rfft", "irfft", "stft", "istft", "extract_sequences"]

_ADJOINT_NORM = {"backward": "forward", "forward": "backward"}


def _fft_impl(re, im, axes, inverse, norm):
    z = torch.complex(re, im)
    fn = torch.fft.ifftn if inverse else torch.fft.fftn
    out = fn(z, dim=axes, norm=norm)
    return out.real.contiguous(), out.imag.contiguous()


def _fft_vjp(gs, re, im, out, axes, inverse, norm):
    # The DFT is linear in (re, im); its adjoint is the opposite transform with the scale
    # moved to the other side (unscaled forward <-> unscaled inverse).
    gr, gi = gs
    return _fft_p.bind(gr, gi, axes=axes, inverse=not inverse, norm=_ADJOINT_NORM[norm])


_fft_p = Primitive("fft", _fft_impl, _fft_vjp, multiple_results=True)


def _complex_pair(x, op, min_rank):
    if not isinstance(x, (tuple, list)) or len(x) != 2:
        raise ValueError(
            f"{op}: `x` must be a tuple (real, imag) of two tensors. Received: {type(x).__name__}"
        )
    re, im = as_tensor(x[0]), as_tensor(x[1])
    if not (re._value.dtype.is_floating_point and im._value.dtype.is_floating_point):
        raise ValueError(
            f"{op}: the real and imaginary parts must be float tensors. Received dtypes "
            f"{re.dtype} and {im.dtype}."
        )
    if re.shape != im.shape:
        raise ValueError(
            f"{op}: the real and imaginary parts must have the same shape. Received "
            f"{re.shape} and {im.shape}."
        )
    if re.ndim < min_rank:
        raise ValueError(f"{op}: expected rank >= {min_rank}. Received shape {re.shape}.")
    re, im = _promote(re, im)
    if re.dtype not in ("float32", "float64"):
        re, im = cast(re, "float32"), cast(im, "float32")
    return re, im


def fft(x):
    """Discrete Fourier transform along the last axis of a complex signal given as a
    `(real, imag)` pair.

    Returns:
        `(real, imag)` of the transform.

    Example:
        >>> re, im = keratron.ops.fft(([1.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]))
        >>> re.numpy()
        array([1., 1., 1., 1.], dtype=float32)
    """
    re, im = _complex_pair(x, "fft", 1)
    return _fft_p.bind(re, im, axes=(re.ndim - 1,), inverse=False, norm="backward")


def fft2(x):
    """2-D discrete Fourier transform over the last two axes of a `(real, imag)` pair.

    Example:
        >>> re, im = keratron.ops.fft2((keratron.ops.ones((2, 2)), keratron.ops.zeros((2, 2))))
        >>> re.numpy()
        array([[4., 0.],
               [0., 0.]], dtype=float32)
    """
    re, im = _complex_pair(x, "fft2", 2)
    return _fft_p.bind(re, im, axes=(re.ndim - 2, re.ndim - 1), inverse=False, norm="backward")


def ifft2(x):
    """Inverse 2-D discrete Fourier transform (scaled by 1/N) of a `(real, imag)` pair.

    Example:
        >>> re, im = keratron.ops.ifft2((keratron.ops.ones((2, 2)), keratron.ops.zeros((2, 2))))
        >>> re.numpy()
        array([[1., 0.],
               [0., 0.]], dtype=float32)
    """
    re, im = _complex_pair(x, "ifft2", 2)
    return _fft_p.bind(re, im, axes=(re.ndim - 2, re.ndim - 1), inverse=True, norm="backward")


def _fit_last(x: Tensor, n: int) -> Tensor:
    """Crops or zero-pads the last axis to length `n`."""
    m = x.shape[-1]
    if m > n:
        return get_item(x, (Ellipsis, slice(0, n)))
    if m < n:
        return pad(x, [(0, 0)] * (x.ndim - 1) + [(0, n - m)])
    return x


def _rfft_impl(x):
    out = torch.fft.rfft(x, dim=-1)
    return out.real.contiguous(), out.imag.contiguous()


def _rfft_vjp(gs, x, out):
    # rfft keeps the first n // 2 + 1 bins of the full DFT: its adjoint zero-fills the rest
    # and applies the adjoint DFT, of which only the real part reaches the real input.
    gr, gi = gs
    n = x.shape[-1]
    gr, gi = _fit_last(gr, n), _fit_last(gi, n)
    re, _ = _fft_p.bind(gr, gi, axes=(x.ndim - 1,), inverse=True, norm="forward")
    return (re,)


_rfft_p = Primitive("rfft", _rfft_impl, _rfft_vjp, multiple_results=True)


def _irfft_vjp(g, re, im, out, n):
    # irfft(z)[t] = (1/n) sum_k c_k Re(z_k e^{2 pi i k t / n}) with c_k = 2 except for the
    # zero (and, for even n, the Nyquist) bin: so d/dz_k is c_k / n times rfft(g)_k.
    gr, gi = _rfft_p.bind(g)
    m = re.shape[-1]
    c = np.full(m, 2.0 / n)
    c[0] = 1.0 / n
    if n % 2 == 0:
        c[-1] = 1.0 / n
    c = _const(c, g, dtype=g._value.dtype)
    return multiply(gr, c), multiply(gi, c)


_irfft_p = Primitive(
    "irfft",
    lambda re, im, n: torch.fft.irfft(torch.complex(re, im), n=n, dim=-1),
    _irfft_vjp,
)


def rfft(x, fft_length=None):
    """Fourier transform of a real signal along the last axis: the `fft_length // 2 + 1`
    non-negative frequencies. The signal is cropped or zero-padded to `fft_length`.

    Returns:
        `(real, imag)` of the transform.

    Example:
        >>> re, im = keratron.ops.rfft([1.0, 1.0, 1.0, 1.0])
        >>> re.numpy()
        array([4., 0., 0.], dtype=float32)
    """
    x = _float(x)
    if x.ndim < 1:
        raise ValueError("rfft: expected a tensor of rank >= 1. Received a scalar.")
    if x.dtype not in ("float32", "float64"):
        x = cast(x, "float32")
    n = x.shape[-1] if fft_length is None else int(fft_length)
    if n < 1:
        raise ValueError(f"rfft: fft_length must be positive. Received: {fft_length}")
    return _rfft_p.bind(_fit_last(x, n))


def irfft(x, fft_length=None):
    """Inverse of `rfft`: a real signal of length `fft_length` (default `2 * (m - 1)` for
    `m` input bins) from the non-negative frequencies `(real, imag)`.

    Example:
        >>> keratron.ops.irfft(([4.0, 0.0, 0.0], [0.0, 0.0, 0.0])).numpy()
        array([1., 1., 1., 1.], dtype=float32)
    """
    re, im = _complex_pair(x, "irfft", 1)
    n = 2 * (re.shape[-1] - 1) if fft_length is None else int(fft_length)
    if n < 1:
        raise ValueError(f"irfft: the output length must be positive. Received: {n}")
    m = n // 2 + 1
    return _irfft_p.bind(_fit_last(re, m), _fit_last(im, m), n=n)


def extract_sequences(x, sequence_length, sequence_stride):
    """Frames of `sequence_length` samples every `sequence_stride` samples along the last
    axis: `(..., L)` becomes `(..., 1 + (L - sequence_length) // sequence_stride,
    sequence_length)`.

    Example:
        >>> keratron.ops.extract_sequences(keratron.ops.arange(6), 3, 2).numpy()
        array([[0, 1, 2],
               [2, 3, 4]], dtype=int32)
    """
    x = as_tensor(x)
    length, stride = int(sequence_length), int(sequence_stride)
    if length < 1 or stride < 1:
        raise ValueError(
            "extract_sequences: sequence_length and sequence_stride must be positive. "
            f"Received {sequence_length} and {sequence_stride}."
        )
    if x.ndim < 1 or x.shape[-1] < length:
        raise ValueError(
            f"extract_sequences: the last axis of x (shape {x.shape}) must hold at least "
            f"sequence_length={length} samples."
        )
    num = 1 + (x.shape[-1] - length) // stride
    idx = np.arange(num)[:, None] * stride + np.arange(length)[None, :]
    return take_p.bind(x, _const(idx, x), axis=x.ndim - 1)


def _stft_window(window, sequence_length, dtype, op, like):
    if window is None:
        return None
    if isinstance(window, str):
        if window not in ("hann", "hamming"):
            raise ValueError(
                f"{op}: window must be 'hann', 'hamming', an array or None. "
                f"Received: window={window!r}"
            )
        fn = torch.hann_window if window == "hann" else torch.hamming_window
        w = fn(sequence_length, periodic=True, dtype=torch.float64)
        return _const(w.numpy(), like, dtype=dtype)
    w = cast(as_tensor(window), dtype)
    if w.shape != (sequence_length,):
        raise ValueError(
            f"{op}: the window must have shape ({sequence_length},). Received {w.shape}."
        )
    return w


def stft(x, sequence_length, sequence_stride, fft_length, window="hann", center=True):
    """Short-time Fourier transform along the last axis.

    Frames of `fft_length` samples every `sequence_stride` samples (after reflect-padding by
    `fft_length // 2` on both sides when `center`) are multiplied by the window (of length
    `sequence_length`, zero-padded to `fft_length` in the middle) and transformed by `rfft`.

    Returns:
        `(real, imag)`, each `(..., num_frames, fft_length // 2 + 1)`.

    Example:
        >>> re, im = keratron.ops.stft(keratron.ops.ones((16,)), 8, 4, 8)
        >>> re.shape
        (5, 5)
    """
    x = as_tensor(x)
    if x.dtype not in ("float32", "float64"):
        raise TypeError(f"stft: x must be float32 or float64. Received dtype {x.dtype}.")
    sequence_length, fft_length = int(sequence_length), int(fft_length)
    if fft_length < sequence_length:
        raise ValueError(
            f"stft: fft_length ({fft_length}) must be >= sequence_length ({sequence_length})."
        )
    win = _stft_window(window, sequence_length, x._value.dtype, "stft", x)
    if win is None:
        win = cast(on_device_of(as_tensor(np.ones(sequence_length)), x), x.dtype)
    lpad = (fft_length - sequence_length) // 2
    win = pad(win, [(lpad, fft_length - sequence_length - lpad)])
    if center:
        half = fft_length // 2
        x = pad(x, [(0, 0)] * (x.ndim - 1) + [(half, half)], mode="reflect")
    frames = extract_sequences(x, fft_length, sequence_stride)
    return rfft(multiply(frames, win))


def _overlap_add(frames: Tensor, stride: int) -> Tensor:
    """Sums frames (..., N, L) placed every `stride` samples: (..., stride * (N - 1) + L)."""
    *batch, n, length = frames.shape
    out_len = stride * (n - 1) + length
    flat = reshape(frames, (-1, n, length))
    cols = transpose(flat, (0, 2, 1))  # (B, L, N): fold's (batch, C * k, blocks) layout
    out = _fold_p.bind(
        cols,
        output_size=(1, out_len),
        kernel_size=(1, length),
        dilation=(1, 1),
        padding=(0, 0),
        stride=(1, stride),
    )
    return reshape(out, tuple(batch) + (out_len,))


def istft(
    x,
    sequence_length,
    sequence_stride,
    fft_length,
    length=None,
    window="hann",
    center=True,
):
    """Inverse short-time Fourier transform: `irfft` of each frame, windowed and
    overlap-added, normalized by the summed squared window (as Keras does).

    Args:
        x: `(real, imag)`, each `(..., num_frames, fft_length // 2 + 1)`.
        sequence_length: window length.
        sequence_stride: hop between frames.
        fft_length: frame length.
        length: output length (default: all samples, minus the centering pad).
        window: "hann", "hamming", an array of length `sequence_length`, or None.
        center: whether `stft` padded the signal by `fft_length // 2` on both sides.

    Example:
        >>> spec = keratron.ops.stft(keratron.ops.ones((16,)), 8, 4, 8)
        >>> keratron.ops.istft(spec, 8, 4, 8).shape
        (16,)
    """
    re, im = _complex_pair(x, "istft", 2)
    sequence_length, fft_length = int(sequence_length), int(fft_length)
    stride = int(sequence_stride)
    frames = irfft((re, im), fft_length)
    win = _stft_window(window, sequence_length, re._value.dtype, "istft", re)
    num = frames.shape[-2]
    expected = fft_length + stride * (num - 1)
    if win is not None:
        lpad = (fft_length - sequence_length) // 2
        w = pad(win, [(lpad, fft_length - sequence_length - lpad)])
        if sequence_length == fft_length and center:
            # The exact envelope: the overlap-added squared window at every sample.
            wsq = broadcast_to(square(w), (num, fft_length))
            denom = _overlap_add(wsq, stride)
            y = _overlap_add(multiply(frames, w), stride)
            nz = greater(denom, 1e-11)
            y = where(nz, divide(y, where(nz, denom, 1.0)), y)
            return _istft_trim(y, fft_length, center, length, expected)
        # The periodic envelope: squared window summed over the hops that overlap.
        overlaps = -(-fft_length // stride)
        wsq = pad(square(w), [(0, overlaps * stride - fft_length)])
        denom = sum(reshape(wsq, (overlaps, stride)), axis=0, keepdims=True)
        denom = reshape(broadcast_to(denom, (overlaps, stride)), (-1,))
        frames = multiply(frames, divide(w, get_item(denom, slice(0, fft_length))))
    y = _overlap_add(frames, stride)
    return _istft_trim(y, fft_length, center, length, expected)


def _istft_trim(y, fft_length, center, length, expected):
    start = fft_length // 2 if center else 0
    if length is not None:
        end = start + int(length)
    elif center:
        end = y.shape[-1] - fft_length // 2
    else:
        end = expected
    y = get_item(y, (Ellipsis, slice(start, end)))
    if length is not None and y.shape[-1] < int(length):
        y = _fit_last(y, int(length))
    return y
