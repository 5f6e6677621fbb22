"""Audio layers (Keras's `layers/preprocessing`): STFTSpectrogram, a short-time Fourier
transform computed as a 1D convolution with (optionally trainable) DFT kernels, and
MelSpectrogram, a mel-scaled power spectrogram in decibels. Arguments, defaults, weights and
`get_config` keys follow Keras 3."""

from __future__ import annotations

import math
import warnings

import numpy as np

from keratron import config, ops
from keratron.config import standardize_data_format
from keratron.layers import initializers
from keratron.layers.layer import InputSpec, Layer
from keratron.layers.layer import who as _who

__all__ = ["STFTSpectrogram", "MelSpectrogram"]

_MODES = ("log", "magnitude", "psd", "real", "imag", "angle", "stft")
# HTK's mel scale: mel = 1127 * ln(1 + hz / 700).
_MEL_BREAK_FREQUENCY_HERTZ = 700.0
_MEL_HIGH_FREQUENCY_Q = 1127.0


def _positive_int(value, arg, who):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(
            f"{who}: argument `{arg}` must be a positive integer. Received: {arg}={value!r}"
        )
    return int(value)


class STFTSpectrogram(Layer):
    """Short-time Fourier transform of `(batch, time, channels)` signals, computed as a strided
    1D convolution with DFT kernels built by `keratron.initializers.STFT` (trainable, as in
    Keras).

    Args:
        mode: "log" (log magnitude), "magnitude", "psd" (one-sided power spectral density),
            "real", "imag", "angle" or "stft" (real and imaginary parts concatenated).
        frame_length: samples per frame (default 256).
        frame_step: samples between frames (default `frame_length // 2`).
        fft_length: FFT size, at least `frame_length` (default: the next power of two).
        window: a window name, a 1D array of `frame_length` values, or None.
        periodic: whether a named window is periodic.
        scaling: "density", "spectrum" or None (see `keratron.initializers.STFT`).
        padding: "valid" or "same" (of the convolution over time).
        expand_dims: if True, the output keeps a separate channel axis: `(batch, frames,
            bins, channels)` (channels_last) instead of `(batch, frames, channels * bins)`.
        data_format: "channels_last" or "channels_first".

    Example:
        >>> layer = keratron.layers.STFTSpectrogram(frame_length=8, frame_step=4)
        >>> layer(np.random.randn(2, 32, 1).astype("float32")).shape
        (2, 7, 5)
    """

    def __init__(
        self,
        mode="log",
        frame_length=256,
        frame_step=None,
        fft_length=None,
        window="hann",
        periodic=False,
        scaling="density",
        padding="valid",
        expand_dims=False,
        data_format=None,
        **kwargs,
    ):
        who = _who("STFTSpectrogram", kwargs)
        frame_length = _positive_int(frame_length, "frame_length", who)
        if frame_step is not None and (_positive_int(frame_step, "frame_step", who) > frame_length):
            raise ValueError(
                f"{who}: argument `frame_step` must be a positive integer not greater than "
                f"`frame_length`. Received: frame_step={frame_step}, "
                f"frame_length={frame_length}"
            )
        if fft_length is not None and _positive_int(fft_length, "fft_length", who) < frame_length:
            raise ValueError(
                f"{who}: argument `fft_length` must not be less than `frame_length`. "
                f"Received: fft_length={fft_length}, frame_length={frame_length}"
            )
        if fft_length is not None and (fft_length & -fft_length) != fft_length:
            warnings.warn(
                f"`fft_length` is recommended to be a power of two. Received "
                f"fft_length={fft_length}",
                stacklevel=2,
            )
        if mode not in _MODES:
            raise ValueError(
                f"{who}: argument `mode` must be one of {', '.join(_MODES)}. Received: "
                f"mode={mode!r}"
            )
        if scaling is not None and scaling not in ("density", "spectrum"):
            raise ValueError(
                f"{who}: argument `scaling` must be None, 'density' or 'spectrum'. Received: "
                f"scaling={scaling!r}"
            )
        if padding not in ("valid", "same"):
            raise ValueError(
                f"{who}: argument `padding` must be 'valid' or 'same'. Received: "
                f"padding={padding!r}"
            )
        if isinstance(window, str):
            initializers.get_window(window, 1)
        super().__init__(**kwargs)
        self.mode = mode
        self.frame_length = frame_length
        self.frame_step = frame_step
        self._frame_step = frame_step or frame_length // 2
        self.fft_length = fft_length
        self._fft_length = fft_length or 2 ** int(math.ceil(math.log2(frame_length)))
        self.window = window
        self.periodic = periodic
        self.scaling = scaling
        self.padding = padding
        self.expand_dims = expand_dims
        self.data_format = standardize_data_format(data_format)
        self.input_spec = InputSpec(ndim=3)

    def build(self, input_shape):
        shape = (self.frame_length, 1, self._fft_length // 2 + 1)
        if self.mode != "imag":
            self.real_kernel = self.add_weight(
                name="real_kernel",
                shape=shape,
                initializer=initializers.STFT("real", self.window, self.scaling, self.periodic),
            )
        if self.mode != "real":
            self.imag_kernel = self.add_weight(
                name="imag_kernel",
                shape=shape,
                initializer=initializers.STFT("imag", self.window, self.scaling, self.periodic),
            )
        self.built = True

    def _apply_conv(self, inputs, kernel):
        """Convolves every channel separately: `(batch, channels, bins, frames)`."""
        if self.data_format == "channels_last":
            _, steps, channels = inputs.shape
            x = ops.reshape(ops.transpose(inputs, (0, 2, 1)), (-1, steps, 1))
        else:
            _, channels, steps = inputs.shape
            x = ops.reshape(inputs, (-1, 1, steps))
        out = ops.conv(
            x,
            ops.cast(kernel, inputs.dtype),
            strides=self._frame_step,
            padding=self.padding,
            data_format=self.data_format,
        )
        if self.data_format == "channels_last":
            out = ops.transpose(out, (0, 2, 1))
        return ops.reshape(out, (-1, channels, out.shape[1], out.shape[2]))

    def _adjust_shapes(self, x):
        _, channels, bins, frames = x.shape
        if self.data_format == "channels_last":
            if self.expand_dims:
                return ops.transpose(x, (0, 3, 2, 1))
            return ops.transpose(ops.reshape(x, (-1, channels * bins, frames)), (0, 2, 1))
        if self.expand_dims:
            return ops.transpose(x, (0, 1, 3, 2))
        return ops.reshape(x, (-1, channels * bins, frames))

    def call(self, inputs):
        if inputs.dtype not in ("float16", "float32", "float64"):
            raise TypeError(
                f"Layer '{self.name}': inputs must be float16, float32 or float64. Received: "
                f"dtype={inputs.dtype}"
            )
        real = self._apply_conv(inputs, self.real_kernel) if self.mode != "imag" else None
        imag = self._apply_conv(inputs, self.imag_kernel) if self.mode != "real" else None
        if self.mode == "real":
            return self._adjust_shapes(real)
        if self.mode == "imag":
            return self._adjust_shapes(imag)
        if self.mode == "angle":
            return self._adjust_shapes(ops.arctan2(imag, real))
        if self.mode == "stft":
            return self._adjust_shapes(ops.concatenate([real, imag], axis=2))
        power = ops.add(ops.square(real), ops.square(imag))
        if self.mode == "psd":
            # One-sided: every bin but DC and Nyquist also carries its negative frequency.
            inner = ops.pad(power[:, :, 1:-1, :], ((0, 0), (0, 0), (1, 1), (0, 0)))
            return self._adjust_shapes(ops.add(power, inner))
        magnitude = self._adjust_shapes(ops.sqrt(ops.maximum(power, config.epsilon())))
        if self.mode == "magnitude":
            return magnitude
        return ops.log(ops.maximum(magnitude, config.epsilon()))

    def compute_output_shape(self, input_shape):
        if self.data_format == "channels_last":
            batch, steps, channels = input_shape
        else:
            batch, channels, steps = input_shape
        bins = self._fft_length // 2 + 1
        if self.mode == "stft":
            bins *= 2
        frames = None
        if steps is not None:
            if self.padding == "same":
                frames = -(-steps // self._frame_step)
            else:
                frames = (steps - self.frame_length) // self._frame_step + 1
        if self.expand_dims:
            if self.data_format == "channels_last":
                return (batch, frames, bins, channels)
            return (batch, channels, frames, bins)
        features = None if channels is None else channels * bins
        if self.data_format == "channels_last":
            return (batch, frames, features)
        return (batch, features, frames)

    def get_config(self):
        return {
            **super().get_config(),
            "mode": self.mode,
            "frame_length": self.frame_length,
            "frame_step": self.frame_step,
            "fft_length": self.fft_length,
            "window": self.window,
            "periodic": self.periodic,
            "scaling": self.scaling,
            "padding": self.padding,
            "data_format": self.data_format,
            "expand_dims": self.expand_dims,
        }


def _hertz_to_mel(hz):
    return _MEL_HIGH_FREQUENCY_Q * np.log(1.0 + hz / _MEL_BREAK_FREQUENCY_HERTZ)


def linear_to_mel_weight_matrix(
    num_mel_bins, num_spectrogram_bins, sampling_rate, lower_edge_hertz, upper_edge_hertz
) -> np.ndarray:
    """The `(num_spectrogram_bins, num_mel_bins)` matrix of triangular mel filters that
    TensorFlow's `linear_to_mel_weight_matrix` (and Keras's MelSpectrogram) builds, in
    float32 as they compute it (the DC bin gets no weight, as in HTK)."""
    f32 = np.float32
    linear = np.linspace(f32(0.0), f32(sampling_rate) / f32(2.0), num_spectrogram_bins, dtype=f32)
    bins_mel = _hertz_to_mel(linear[1:]).astype(f32)[:, None]
    edges = np.linspace(
        _hertz_to_mel(f32(lower_edge_hertz)),
        _hertz_to_mel(f32(upper_edge_hertz)),
        num_mel_bins + 2,
        dtype=f32,
    )
    lower, center, upper = edges[:-2][None], edges[1:-1][None], edges[2:][None]
    lower_slopes = (bins_mel - lower) / (center - lower)
    upper_slopes = (upper - bins_mel) / (upper - center)
    weights = np.maximum(f32(0.0), np.minimum(lower_slopes, upper_slopes))
    return np.pad(weights, ((1, 0), (0, 0))).astype(f32)


class MelSpectrogram(Layer):
    """Mel-scaled spectrogram of raw audio: `(batch, samples)` or `(samples,)` in,
    `(batch, num_mel_bins, frames)` out.

    The magnitude STFT (centred frames, `keratron.ops.stft`) is raised to `mag_exp`, mapped
    onto `num_mel_bins` triangular mel filters between `min_freq` and `max_freq`, and, with
    `power_to_db`, converted to decibels relative to `ref_power` and clipped at `top_db` below
    the maximum (over the whole batch, as Keras does).

    Args:
        fft_length: FFT size (default 2048).
        sequence_stride: samples between frames (default 512).
        sequence_length: window length (default `fft_length`).
        window: "hann", "hamming", or None.
        sampling_rate: samples per second (default 16000).
        num_mel_bins: mel bands (default 128).
        min_freq, max_freq: band limits in Hz (default 20 and `sampling_rate / 2`).
        power_to_db: whether to convert to decibels.
        top_db: dynamic range kept in decibels.
        mag_exp: exponent of the magnitude (2: power).
        min_power: floor of the power before the logarithm.
        ref_power: reference power of 0 dB.

    Example:
        >>> layer = keratron.layers.MelSpectrogram(fft_length=64, sequence_stride=32,
        ...                                        num_mel_bins=8)
        >>> layer(np.random.randn(2, 256).astype("float32")).shape
        (2, 8, 9)
    """

    def __init__(
        self,
        fft_length=2048,
        sequence_stride=512,
        sequence_length=None,
        window="hann",
        sampling_rate=16000,
        num_mel_bins=128,
        min_freq=20.0,
        max_freq=None,
        power_to_db=True,
        top_db=80.0,
        mag_exp=2.0,
        min_power=1e-10,
        ref_power=1.0,
        **kwargs,
    ):
        who = _who("MelSpectrogram", kwargs)
        fft_length = _positive_int(fft_length, "fft_length", who)
        sequence_stride = _positive_int(sequence_stride, "sequence_stride", who)
        sequence_length = _positive_int(sequence_length or fft_length, "sequence_length", who)
        num_mel_bins = _positive_int(num_mel_bins, "num_mel_bins", who)
        if fft_length < sequence_length:
            raise ValueError(
                f"{who}: argument `fft_length` must be greater than or equal to "
                f"`sequence_length`. Received: sequence_length={sequence_length}, "
                f"fft_length={fft_length}"
            )
        if window is not None and not isinstance(window, str):
            raise TypeError(
                f"{who}: argument `window` must be 'hann', 'hamming' or None. "
                f"Received: window={window!r}"
            )
        if window not in (None, "hann", "hamming"):
            raise ValueError(
                f"{who}: argument `window` must be 'hann', 'hamming' or None. "
                f"Received: window={window!r}"
            )
        super().__init__(**kwargs)
        self.fft_length = fft_length
        self.sequence_stride = sequence_stride
        self.sequence_length = sequence_length
        self.window = window
        self.sampling_rate = sampling_rate
        self.num_mel_bins = num_mel_bins
        self.min_freq = min_freq
        self.max_freq = max_freq or int(sampling_rate / 2)
        self.power_to_db = power_to_db
        self.top_db = top_db
        self.mag_exp = mag_exp
        self.min_power = min_power
        self.ref_power = ref_power
        self.built = True

    def call(self, inputs):
        dtype = self.compute_dtype if self.compute_dtype in ("float32", "float64") else "float32"
        x = ops.cast(inputs, dtype)
        real, imag = ops.stft(
            x,
            self.sequence_length,
            self.sequence_stride,
            self.fft_length,
            window=self.window,
            center=True,
        )
        spec = ops.power(ops.sqrt(ops.add(ops.square(real), ops.square(imag))), self.mag_exp)
        matrix = linear_to_mel_weight_matrix(
            self.num_mel_bins,
            spec.shape[-1],
            self.sampling_rate,
            self.min_freq,
            self.max_freq,
        )
        out = ops.tensordot(spec, ops.cast(ops.convert_to_tensor(matrix), dtype), axes=1)
        if self.power_to_db:
            out = self._dbscale(out)
        return ops.cast(ops.swapaxes(out, -1, -2), self.compute_dtype)

    def _dbscale(self, x):
        log_spec = ops.multiply(10.0, ops.log10(ops.maximum(x, self.min_power)))
        ref = 10.0 * math.log10(max(abs(self.ref_power), self.min_power))
        log_spec = ops.subtract(log_spec, ref)
        return ops.maximum(log_spec, ops.subtract(ops.max(log_spec), self.top_db))

    def compute_output_shape(self, input_shape):
        steps = input_shape[-1]
        frames = None
        if steps is not None:
            half = self.fft_length // 2
            frames = (steps + 2 * half - self.fft_length) // self.sequence_stride + 1
        return (*input_shape[:-1], self.num_mel_bins, frames)

    def get_config(self):
        return {
            **super().get_config(),
            "fft_length": self.fft_length,
            "sequence_stride": self.sequence_stride,
            "sequence_length": self.sequence_length,
            "window": self.window,
            "sampling_rate": self.sampling_rate,
            "num_mel_bins": self.num_mel_bins,
            "min_freq": self.min_freq,
            "max_freq": self.max_freq,
            "power_to_db": self.power_to_db,
            "top_db": self.top_db,
            "mag_exp": self.mag_exp,
            "min_power": self.min_power,
            "ref_power": self.ref_power,
        }
