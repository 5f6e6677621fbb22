"""Weight initializers, by name and class, with Keras 3's defaults and formulas."""

from __future__ import annotations

import math

import numpy as np
import torch

from keratron.autodiff.dtypes import standardize_dtype, to_torch_dtype
from keratron.autodiff.tensor import Tensor, convert_to_tensor

__all__ = [
    "Initializer",
    "Constant",
    "Zeros",
    "Ones",
    "RandomNormal",
    "RandomUniform",
    "TruncatedNormal",
    "VarianceScaling",
    "GlorotUniform",
    "GlorotNormal",
    "HeNormal",
    "HeUniform",
    "LecunNormal",
    "LecunUniform",
    "Orthogonal",
    "Identity",
    "STFT",
    "get",
    "serialize",
    "deserialize",
]


class Initializer:
    """Base class: `initializer(shape, dtype=None)` returns a Tensor."""

    def __call__(self, shape, dtype=None):
        raise NotImplementedError

    def get_config(self) -> dict:
        return {}

    @classmethod
    def from_config(cls, config):
        return cls(**config)


class Constant(Initializer):
    def __init__(self, value=0.0):
        self.value = value

    def __call__(self, shape, dtype=None):
        v = np.asarray(self.value)
        return convert_to_tensor(
            np.broadcast_to(v, tuple(shape)).copy(), dtype=standardize_dtype(dtype)
        )

    def get_config(self):
        v = self.value
        return {"value": v.tolist() if isinstance(v, np.ndarray) else v}


class Zeros(Initializer):
    def __call__(self, shape, dtype=None):
        return convert_to_tensor(np.zeros(tuple(shape)), dtype=standardize_dtype(dtype))


class Ones(Initializer):
    def __call__(self, shape, dtype=None):
        return convert_to_tensor(np.ones(tuple(shape)), dtype=standardize_dtype(dtype))


class _Seeded(Initializer):
    def __init__(self, seed=None):
        from keratron import random

        if seed is not None and not isinstance(seed, (int, np.integer, random.SeedGenerator)):
            raise ValueError(
                f"{type(self).__name__}: `seed` must be an int, a SeedGenerator or None. "
                f"Received: seed={seed!r}"
            )
        self.seed = seed
        # An int seed gives the same values on every call, as in Keras.
        self._generator = random.SeedGenerator(seed) if seed is None else None

    def _seed(self):
        from keratron import random

        if self._generator is not None:
            return self._generator
        return random.SeedGenerator(int(self.seed)) if not hasattr(self.seed, "next") else self.seed

    def get_config(self):
        return {"seed": self.seed if isinstance(self.seed, (int, type(None))) else None}


class RandomNormal(_Seeded):
    def __init__(self, mean=0.0, stddev=0.05, seed=None):
        super().__init__(seed)
        self.mean, self.stddev = mean, stddev

    def __call__(self, shape, dtype=None):
        from keratron import random

        return random.normal(
            shape, self.mean, self.stddev, dtype=standardize_dtype(dtype), seed=self._seed()
        )

    def get_config(self):
        return {"mean": self.mean, "stddev": self.stddev, **super().get_config()}


class RandomUniform(_Seeded):
    def __init__(self, minval=-0.05, maxval=0.05, seed=None):
        super().__init__(seed)
        self.minval, self.maxval = minval, maxval

    def __call__(self, shape, dtype=None):
        from keratron import random

        return random.uniform(
            shape, self.minval, self.maxval, dtype=standardize_dtype(dtype), seed=self._seed()
        )

    def get_config(self):
        return {"minval": self.minval, "maxval": self.maxval, **super().get_config()}


class TruncatedNormal(_Seeded):
    def __init__(self, mean=0.0, stddev=0.05, seed=None):
        super().__init__(seed)
        self.mean, self.stddev = mean, stddev

    def __call__(self, shape, dtype=None):
        from keratron import random

        return random.truncated_normal(
            shape, self.mean, self.stddev, dtype=standardize_dtype(dtype), seed=self._seed()
        )

    def get_config(self):
        return {"mean": self.mean, "stddev": self.stddev, **super().get_config()}


def compute_fans(shape, input_axes=None, output_axes=None):
    """(fan_in, fan_out) as Keras computes them; conv kernels count the receptive field, and
    explicit `input_axes`/`output_axes` (EinsumDense kernels) name the axes to multiply."""
    shape = tuple(shape)
    if input_axes is not None and output_axes is not None:
        return int(np.prod([shape[a] for a in input_axes])), int(
            np.prod([shape[a] for a in output_axes])
        )
    if len(shape) < 1:
        return 1, 1
    if len(shape) == 1:
        return shape[0], shape[0]
    if len(shape) == 2:
        return shape[0], shape[1]
    receptive = int(np.prod(shape[:-2]))
    return shape[-2] * receptive, shape[-1] * receptive


class VarianceScaling(_Seeded):
    def __init__(
        self,
        scale=1.0,
        mode="fan_in",
        distribution="truncated_normal",
        seed=None,
        input_axes=None,
        output_axes=None,
    ):
        super().__init__(seed)
        self.input_axes = input_axes
        self.output_axes = output_axes
        if scale <= 0.0:
            raise ValueError(f"VarianceScaling: `scale` must be positive. Received: scale={scale}")
        if mode not in ("fan_in", "fan_out", "fan_avg"):
            raise ValueError(
                "VarianceScaling: `mode` must be one of fan_in, fan_out, fan_avg. "
                f"Received: mode={mode!r}"
            )
        distribution = distribution.lower()
        if distribution == "normal":
            distribution = "truncated_normal"
        if distribution not in ("uniform", "truncated_normal", "untruncated_normal"):
            raise ValueError(
                "VarianceScaling: `distribution` must be one of uniform, truncated_normal, "
                f"untruncated_normal. Received: distribution={distribution!r}"
            )
        self.scale, self.mode, self.distribution = scale, mode, distribution

    def __call__(self, shape, dtype=None):
        from keratron import random

        fan_in, fan_out = compute_fans(shape, self.input_axes, self.output_axes)
        n = {"fan_in": fan_in, "fan_out": fan_out, "fan_avg": (fan_in + fan_out) / 2.0}[self.mode]
        scale = self.scale / max(1.0, n)
        dtype = standardize_dtype(dtype)
        if self.distribution == "truncated_normal":
            # 0.879... is the stddev of a unit normal truncated to [-2, 2].
            stddev = math.sqrt(scale) / 0.87962566103423978
            return random.truncated_normal(shape, 0.0, stddev, dtype=dtype, seed=self._seed())
        if self.distribution == "untruncated_normal":
            return random.normal(shape, 0.0, math.sqrt(scale), dtype=dtype, seed=self._seed())
        limit = math.sqrt(3.0 * scale)
        return random.uniform(shape, -limit, limit, dtype=dtype, seed=self._seed())

    def get_config(self):
        return {
            **super().get_config(),
            "scale": self.scale,
            "mode": self.mode,
            "distribution": self.distribution,
            "input_axes": self.input_axes,
            "output_axes": self.output_axes,
        }


def _preset(name, scale, mode, distribution):
    class Preset(VarianceScaling):
        def __init__(self, seed=None, input_axes=None, output_axes=None):
            super().__init__(
                scale=scale,
                mode=mode,
                distribution=distribution,
                seed=seed,
                input_axes=input_axes,
                output_axes=output_axes,
            )

        def get_config(self):
            return {
                "seed": self.seed if isinstance(self.seed, (int, type(None))) else None,
                "input_axes": self.input_axes,
                "output_axes": self.output_axes,
            }

    Preset.__name__ = Preset.__qualname__ = name
    return Preset


GlorotUniform = _preset("GlorotUniform", 1.0, "fan_avg", "uniform")
GlorotNormal = _preset("GlorotNormal", 1.0, "fan_avg", "truncated_normal")
HeNormal = _preset("HeNormal", 2.0, "fan_in", "truncated_normal")
HeUniform = _preset("HeUniform", 2.0, "fan_in", "uniform")
LecunNormal = _preset("LecunNormal", 1.0, "fan_in", "truncated_normal")
LecunUniform = _preset("LecunUniform", 1.0, "fan_in", "uniform")


class Orthogonal(_Seeded):
    def __init__(self, gain=1.0, seed=None):
        super().__init__(seed)
        self.gain = gain

    def __call__(self, shape, dtype=None):
        from keratron import random

        shape = tuple(shape)
        if len(shape) < 2:
            raise ValueError(
                f"Orthogonal initializer needs a shape of rank >= 2. Received: shape={shape}"
            )
        rows = int(np.prod(shape[:-1]))
        cols = shape[-1]
        a = random.normal((max(rows, cols), min(rows, cols)), dtype="float32", seed=self._seed())
        q, r = torch.linalg.qr(a._value)
        q = q * torch.sign(torch.diagonal(r))
        if rows < cols:
            q = q.T
        q = (self.gain * q).reshape(shape).to(to_torch_dtype(standardize_dtype(dtype)))
        return Tensor(q.contiguous())

    def get_config(self):
        return {"gain": self.gain, **super().get_config()}


class Identity(Initializer):
    def __init__(self, gain=1.0):
        self.gain = gain

    def __call__(self, shape, dtype=None):
        if len(shape) != 2:
            raise ValueError(
                f"Identity initializer needs a 2D shape. Received: shape={tuple(shape)}"
            )
        return convert_to_tensor(self.gain * np.eye(*shape), dtype=standardize_dtype(dtype))

    def get_config(self):
        # Keras writes an empty config for the default gain.
        return {} if self.gain == 1.0 else {"gain": self.gain}


# Windows `scipy.signal.get_window` gives, as numpy computes them (symmetric; the periodic
# ones are the symmetric window of n + 1 points without its last point).
_WINDOWS = {
    "hann": np.hanning,
    "hanning": np.hanning,
    "hamming": np.hamming,
    "blackman": np.blackman,
    "bartlett": np.bartlett,
    "boxcar": np.ones,
    "rectangular": np.ones,
}


def get_window(window: str, n: int, periodic: bool = False) -> np.ndarray:
    """The float64 window `scipy.signal.get_window(window, n, fftbins=periodic)` gives, for
    the windows named in `_WINDOWS`."""
    if window not in _WINDOWS:
        raise ValueError(
            f"Unknown window {window!r}: expected one of {sorted(_WINDOWS)}, an array, or None."
        )
    if n == 1:
        return np.ones(1)
    w = _WINDOWS[window](n + 1 if periodic else n)
    return np.asarray(w[:-1] if periodic else w, dtype=np.float64)


class STFT(Initializer):
    """Kernel of a short-time Fourier transform as a 1D convolution: shape
    `(frame_length, input_channels, fft_bins)` holding the real (cos) or imaginary (-sin)
    part of the DFT basis, multiplied by a window and divided by its scale.

    Args:
        side: "real" or "imag".
        window: a window name (see `get_window`), a 1D array of `frame_length` values, or None.
        scaling: "density" (divide by the window's L2 norm), "spectrum" (by its sum) or None.
        periodic: whether a named window is periodic (True) or symmetric (False).

    Example:
        >>> kernel = keratron.initializers.STFT("real")((8, 1, 5))
        >>> kernel.shape
        (8, 1, 5)
    """

    def __init__(self, side="real", window="hann", scaling="density", periodic=False):
        if side not in ("real", "imag"):
            raise ValueError(
                f"STFT initializer: argument `side` must be 'real' or 'imag'. Received: "
                f"side={side!r}"
            )
        if isinstance(window, str):
            get_window(window, 1)
        if scaling is not None and scaling not in ("density", "spectrum"):
            raise ValueError(
                "STFT initializer: argument `scaling` must be None, 'density' or 'spectrum'. "
                f"Received: scaling={scaling!r}"
            )
        self.side = side
        self.window = window
        self.scaling = scaling
        self.periodic = periodic

    def __call__(self, shape, dtype=None):
        if len(shape) != 3:
            raise ValueError(
                "STFT initializer needs a 3D shape (frame_length, input_channels, fft_bins). "
                f"Received: shape={tuple(shape)}"
            )
        frame_length, _, bins = shape
        time = np.arange(frame_length, dtype=np.float64).reshape(frame_length, 1, 1)
        freq = np.arange(bins, dtype=np.float64).reshape(1, 1, bins) / ((bins - 1) * 2)
        args = -2.0 * time * freq * np.pi
        kernel = np.cos(args) if self.side == "real" else np.sin(args)
        if self.window is not None:
            if isinstance(self.window, str):
                win = get_window(self.window, frame_length, self.periodic)
            else:
                win = np.asarray(self.window, dtype=np.float64)
            if win.shape != (frame_length,):
                raise ValueError(
                    f"STFT initializer: the window must have shape ({frame_length},). "
                    f"Received: window shape={win.shape}"
                )
            win = win.reshape(frame_length, 1, 1)
            scale = 1.0
            if self.scaling == "density":
                scale = np.sqrt(np.sum(np.square(win)))
            elif self.scaling == "spectrum":
                scale = np.sum(np.abs(win))
            kernel = kernel * win / scale
        kernel = np.broadcast_to(kernel, tuple(shape)).copy()
        return convert_to_tensor(kernel, dtype=standardize_dtype(dtype))

    def get_config(self):
        return {
            "side": self.side,
            "window": self.window,
            "periodic": self.periodic,
            "scaling": self.scaling,
        }


_ALIASES = {
    "zeros": Zeros,
    "zero": Zeros,
    "ones": Ones,
    "one": Ones,
    "constant": Constant,
    "random_normal": RandomNormal,
    "normal": RandomNormal,
    "random_uniform": RandomUniform,
    "uniform": RandomUniform,
    "truncated_normal": TruncatedNormal,
    "variance_scaling": VarianceScaling,
    "glorot_uniform": GlorotUniform,
    "glorot_normal": GlorotNormal,
    "he_normal": HeNormal,
    "he_uniform": HeUniform,
    "lecun_normal": LecunNormal,
    "lecun_uniform": LecunUniform,
    "orthogonal": Orthogonal,
    "identity": Identity,
    "stft": STFT,
}
_CLASSES = {c.__name__: c for c in set(_ALIASES.values())}


def get(identifier):
    """Resolves a name ("he_normal", "HeNormal"), a config dict, a class or an instance."""
    if identifier is None:
        return None
    if isinstance(identifier, Initializer) or (
        callable(identifier) and not isinstance(identifier, type)
    ):
        return identifier
    if isinstance(identifier, type) and issubclass(identifier, Initializer):
        return identifier()
    if isinstance(identifier, dict):
        return deserialize(identifier)
    if isinstance(identifier, str):
        cls = _ALIASES.get(identifier) or _CLASSES.get(identifier)
        if cls is None:
            raise ValueError(f"Could not interpret initializer identifier: {identifier!r}")
        return cls()
    raise ValueError(f"Could not interpret initializer identifier: {identifier!r}")


def serialize(initializer) -> dict | None:
    if initializer is None:
        return None
    return {
        "module": "keras.initializers",
        "class_name": type(initializer).__name__,
        "config": initializer.get_config(),
        "registered_name": None,
    }


def deserialize(config):
    name = config.get("class_name")
    cls = _CLASSES.get(name) or _ALIASES.get(name)
    if cls is None:
        from keratron.layers.serialization import lookup_custom

        cls = lookup_custom(name)
    if cls is None:
        raise ValueError(f"Unknown initializer class: {name!r}")
    return cls.from_config(config.get("config", {}))
