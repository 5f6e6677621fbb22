"""`keras.ops.math`: FFTs, signal framing, segment reductions and special functions, as Keras
3 names them."""

from keratron.ops.arrays import (  # noqa: F401
    cdist,
    in_top_k,
)
from keratron.ops.elementwise import (  # noqa: F401
    erf,
    erfc,
    erfinv,
    rsqrt,
    view_as_complex,
    view_as_real,
)
from keratron.ops.linalg import (  # noqa: F401
    logdet,
)
from keratron.ops.reduction import (  # noqa: F401
    logsumexp,
)
from keratron.ops.segment import (  # noqa: F401
    segment_max,
    segment_min,
    segment_prod,
    segment_sum,
)
from keratron.ops.signal import (  # noqa: F401
    extract_sequences,
    fft,
    fft2,
    ifft2,
    irfft,
    istft,
    rfft,
    stft,
)
from keratron.ops.sorting import (  # noqa: F401
    top_k,
)

__all__ = [
    "cdist",
    "erf",
    "erfc",
    "erfinv",
    "extract_sequences",
    "fft",
    "fft2",
    "ifft2",
    "in_top_k",
    "irfft",
    "istft",
    "logdet",
    "logsumexp",
    "rfft",
    "rsqrt",
    "segment_max",
    "segment_min",
    "segment_prod",
    "segment_sum",
    "stft",
    "top_k",
    "view_as_complex",
    "view_as_real",
]
