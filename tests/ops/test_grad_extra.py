"""Gradient-check table for the differentiable ops of keratron.ops.extra and
keratron.ops.image.

Each row: (name, keratron fn, torch fn or None, float64 inputs[, check_grads options]).
Every row is checked by float64 central differences; rows with a torch fn are also checked
against torch.autograd (values and gradients). Decompositions with sign or order ambiguity
(qr, eigh, svd) are checked through functions that do not depend on those choices.
"""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import keratron as kt
from tests.gradcheck import check_against_torch, check_grads

ops = kt.ops
img = ops.image
R = np.random.default_rng(11)


def nrm(*shape):
    return R.standard_normal(shape)


def pos(*shape):
    return R.uniform(0.5, 2.0, shape)


def unit(*shape):
    return R.uniform(0.05, 0.95, shape)


def with_nans(*shape):
    x = nrm(*shape)
    x.flat[::5] = np.nan
    return x


def spd_t(a):
    return a @ a.mT + 3 * torch.eye(a.shape[-1], dtype=a.dtype)


def spd_k(a):
    return ops.matmul(a, ops.swapaxes(a, -1, -2)) + 3 * ops.eye(a.shape[-1], dtype=a.dtype)


def _t_nanvar(x, dim):
    n = (~x.isnan()).sum(dim, keepdim=True)
    m = torch.nansum(x, dim, keepdim=True) / n
    d = torch.where(x.isnan(), 0.0, x - m)
    return (d * d).sum(dim) / n.squeeze(dim)


def _t_sparsemax(z):
    zs = torch.sort(z, -1, descending=True).values
    cs = zs.cumsum(-1)
    k = torch.arange(1, z.shape[-1] + 1, dtype=z.dtype)
    support = (1 + k * zs) > cs
    kz = support.sum(-1, keepdim=True)
    tau = (torch.gather(cs, -1, kz - 1) - 1) / kz
    return torch.clamp(z - tau, min=0)


def _t_segment(reduce, data, ids, n):
    idx = torch.tensor(ids).reshape(-1, *([1] * (data.dim() - 1))).expand_as(data)
    out = torch.zeros((n,) + data.shape[1:], dtype=data.dtype)
    return out.scatter_reduce(0, idx, data, reduce, include_self=False)


def _t_cplx(fn):
    def f(re, im):
        z = fn(torch.complex(re, im))
        return z.real, z.imag

    return f


def _t_dpa(q, k, v):
    mask = torch.tensor(MASK)
    return F.scaled_dot_product_attention(
        q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), attn_mask=mask, enable_gqa=True
    ).transpose(1, 2)


MASK = R.random((1, 1, 3, 4)) > 0.3
MASK[..., 0] = True  # every query attends somewhere
SEG = [0, 2, 1, 1, 0]
CTC_T = np.array([[1, 2, 2], [3, 1, 0]])
HANN = torch.hann_window(8, periodic=True, dtype=torch.float64)
TRANSFORM = np.array([1.1, 0.23, -0.37, -0.13, 0.91, 0.71, 0.01, -0.02])

ROWS = [
    # ---------------------------------------------------------------- elementwise
    ("erfc", ops.erfc, torch.erfc, [nrm(5)]),
    ("cbrt", ops.cbrt, lambda x: torch.sign(x) * x.abs() ** (1 / 3), [pos(5) * np.sign(nrm(5))]),
    ("fmod", ops.fmod, torch.fmod, [nrm(5) * 3, pos(5)]),
    ("fabs", ops.fabs, torch.abs, [nrm(5)]),
    ("deg2rad", ops.deg2rad, torch.deg2rad, [nrm(5)]),
    ("rad2deg", ops.rad2deg, torch.rad2deg, [nrm(5)]),
    ("logaddexp2", ops.logaddexp2, torch.logaddexp2, [nrm(5), nrm(5)]),
    ("sinc", ops.sinc, torch.sinc, [np.append(nrm(4), 0.0)]),
    ("i0", ops.i0, torch.i0, [nrm(5)]),
    ("fmax", ops.fmax, torch.fmax, [nrm(6), np.append(nrm(5), np.nan)]),
    ("fmin", ops.fmin, torch.fmin, [np.append(nrm(5), np.nan), nrm(6)]),
    (
        "ldexp",
        lambda x: ops.ldexp(x, np.array([1, -2, 3])),
        lambda x: x * torch.tensor([2.0, 0.25, 8.0], dtype=x.dtype),
        [nrm(3)],
    ),
    # ---------------------------------------------------------------- statistics
    ("nansum", lambda x: ops.nansum(x, axis=1), lambda x: torch.nansum(x, 1), [with_nans(3, 4)]),
    ("nanmean", lambda x: ops.nanmean(x, axis=0), lambda x: torch.nanmean(x, 0), [with_nans(3, 4)]),
    ("nanvar", lambda x: ops.nanvar(x, axis=1), lambda x: _t_nanvar(x, 1), [with_nans(3, 4)]),
    (
        "nanstd",
        lambda x: ops.nanstd(x, axis=1),
        lambda x: _t_nanvar(x, 1).sqrt(),
        [with_nans(3, 4)],
    ),
    (
        "nanmax",
        lambda x: ops.nanmax(x, axis=1),
        lambda x: torch.where(x.isnan(), -torch.inf, x).amax(1),
        [with_nans(3, 4)],
    ),
    (
        "nanmin",
        lambda x: ops.nanmin(x, axis=1),
        lambda x: torch.where(x.isnan(), torch.inf, x).amin(1),
        [with_nans(3, 4)],
    ),
    (
        "nanprod",
        lambda x: ops.nanprod(x, axis=1),
        lambda x: torch.where(x.isnan(), 1.0, x).prod(1),
        [with_nans(3, 4)],
    ),
    (
        "nancumsum",
        lambda x: ops.nancumsum(x, axis=1),
        lambda x: torch.where(x.isnan(), 0.0, x).cumsum(1),
        [with_nans(3, 4)],
    ),
    (
        "nancumprod",
        lambda x: ops.nancumprod(x, axis=1),
        lambda x: torch.where(x.isnan(), 1.0, x).cumprod(1),
        [with_nans(3, 4)],
    ),
    ("ptp", lambda x: ops.ptp(x, axis=0), lambda x: x.amax(0) - x.amin(0), [nrm(3, 4)]),
    (
        "quantile",
        lambda x: ops.quantile(x, [0.1, 0.5, 0.8], axis=1),
        lambda x: torch.quantile(x, torch.tensor([0.1, 0.5, 0.8], dtype=x.dtype), dim=1),
        [nrm(3, 7)],
    ),
    (
        "quantile_midpoint",
        lambda x: ops.quantile(x, 0.3, method="midpoint"),
        lambda x: torch.quantile(x.reshape(-1), 0.3, interpolation="midpoint"),
        [nrm(3, 4)],
    ),
    (
        "percentile",
        lambda x: ops.percentile(x, 35, axis=0),
        lambda x: torch.quantile(x, 0.35, dim=0),
        [nrm(5, 3)],
    ),
    (
        "median",
        lambda x: ops.median(x, axis=-1),
        lambda x: torch.quantile(x, 0.5, dim=-1),
        [nrm(3, 6)],
    ),
    (
        "nanquantile",
        lambda x: ops.nanquantile(x, 0.4, axis=1),
        lambda x: torch.nanquantile(x, 0.4, dim=1),
        [with_nans(3, 6)],
    ),
    # ---------------------------------------------------------------- arrays
    (
        "append",
        lambda a, b: ops.append(a, b),
        lambda a, b: torch.cat([a.reshape(-1), b.reshape(-1)]),
        [nrm(2, 3), nrm(4)],
    ),
    ("diff", lambda x: ops.diff(x, 2, axis=0), lambda x: torch.diff(x, 2, dim=0), [nrm(5, 3)]),
    ("cross", ops.cross, lambda a, b: torch.linalg.cross(a, b), [nrm(4, 3), nrm(4, 3)]),
    (
        "cross_2d",
        lambda a, b: ops.cross(a, b),
        lambda a, b: a[:, 0] * b[:, 1] - a[:, 1] * b[:, 0],
        [nrm(4, 2), nrm(4, 2)],
    ),
    ("kron", ops.kron, torch.kron, [nrm(2, 3), nrm(3, 2)]),
    (
        "rot90",
        lambda x: ops.rot90(x, 3, (0, 2)),
        lambda x: torch.rot90(x, 3, (0, 2)),
        [nrm(2, 3, 4)],
    ),
    ("fliplr", ops.fliplr, torch.fliplr, [nrm(3, 4)]),
    ("flipud", ops.flipud, torch.flipud, [nrm(3, 4)]),
    ("hsplit", lambda x: ops.hsplit(x, 2)[1], lambda x: torch.hsplit(x, 2)[1], [nrm(3, 4)]),
    (
        "dstack",
        lambda a, b: ops.dstack([a, b]),
        lambda a, b: torch.dstack([a, b]),
        [nrm(3, 4), nrm(3, 4)],
    ),
    ("diagflat", lambda x: ops.diagflat(x, -1), lambda x: torch.diagflat(x, -1), [nrm(2, 2)]),
    (
        "trapezoid",
        lambda y, x: ops.trapezoid(y, x, axis=0),
        lambda y, x: torch.trapezoid(y, x, dim=0),
        [nrm(4, 3), np.cumsum(pos(4))],
    ),
    (
        "trapezoid_dx",
        lambda y: ops.trapezoid(y, dx=0.3),
        lambda y: torch.trapezoid(y, dx=0.3),
        [nrm(3, 5)],
    ),
    (
        "vander",
        lambda x: ops.vander(x, 4),
        lambda x: torch.linalg.vander(x, N=4).flip(-1),
        [pos(3)],
    ),
    (
        "select",
        lambda a, b: ops.select([a > 0, b > 0], [a, b], 0.5),
        lambda a, b: torch.where(a > 0, a, torch.where(b > 0, b, 0.5)),
        [nrm(6), nrm(6)],
    ),
    ("cdist", ops.cdist, torch.cdist, [nrm(2, 3, 4), nrm(2, 5, 4)]),
    ("corrcoef", ops.corrcoef, torch.corrcoef, [nrm(3, 6)]),
    (
        "correlate",
        lambda a, v: ops.correlate(a, v, "full"),
        lambda a, v: F.conv1d(a[None, None], v[None, None], padding=v.shape[0] - 1)[0, 0],
        [nrm(6), nrm(3)],
    ),
    (
        "bincount_weights",
        lambda w: ops.bincount(np.array([0, 2, 2, 1, 4]), weights=w),
        lambda w: torch.zeros(5, dtype=w.dtype).index_add(0, torch.tensor([0, 2, 2, 1, 4]), w),
        [nrm(5)],
    ),
    (
        "segment_sum",
        lambda d: ops.segment_sum(d, SEG, 3),
        lambda d: _t_segment("sum", d, SEG, 3),
        [nrm(5, 2)],
    ),
    (
        "segment_max",
        lambda d: ops.segment_max(d, SEG, 3),
        lambda d: _t_segment("amax", d, SEG, 3),
        [nrm(5, 2)],
    ),
    (
        "segment_min",
        lambda d: ops.segment_min(d, SEG, 3),
        lambda d: _t_segment("amin", d, SEG, 3),
        [nrm(5, 2)],
    ),
    (
        "segment_prod",
        lambda d: ops.segment_prod(d, SEG, 3),
        lambda d: _t_segment("prod", d, SEG, 3),
        [pos(5, 2)],
    ),
    # ---------------------------------------------------------------- linalg
    ("det", ops.det, torch.linalg.det, [nrm(2, 3, 3)]),
    ("slogdet", lambda x: ops.slogdet(x)[1], lambda x: torch.linalg.slogdet(x)[1], [nrm(3, 3)]),
    ("logdet", lambda a: ops.logdet(spd_k(a)), lambda a: torch.logdet(spd_t(a)), [nrm(3, 3)]),
    (
        "cholesky",
        lambda a: ops.cholesky(spd_k(a)),
        lambda a: torch.linalg.cholesky(spd_t(a)),
        [nrm(2, 3, 3)],
    ),
    (
        "cholesky_upper",
        lambda a: ops.cholesky(spd_k(a), upper=True),
        lambda a: torch.linalg.cholesky(spd_t(a), upper=True),
        [nrm(3, 3)],
    ),
    (
        "cholesky_inverse",
        lambda l: ops.cholesky_inverse(ops.tril(l) + 3 * ops.eye(3, dtype="float64")),
        lambda l: torch.cholesky_inverse(l.tril() + 3 * torch.eye(3, dtype=l.dtype)),
        [nrm(3, 3)],
    ),
    (
        "solve_triangular",
        lambda a, b: ops.solve_triangular(a, b, lower=True),
        lambda a, b: torch.linalg.solve_triangular(a.tril(), b, upper=False),
        [np.tril(nrm(3, 3)) + 3 * np.eye(3), nrm(3, 2)],
    ),
    (
        "solve_triangular_upper",
        lambda a, b: ops.solve_triangular(a, b),
        lambda a, b: torch.linalg.solve_triangular(a.triu(), b[:, None], upper=True)[:, 0],
        [np.triu(nrm(3, 3)) + 3 * np.eye(3), nrm(3)],
    ),
    ("qr_tall", ops.qr, torch.linalg.qr, [nrm(5, 3)]),
    (
        "qr_square_complete",
        lambda x: ops.qr(x, "complete"),
        lambda x: torch.linalg.qr(x, "complete"),
        [nrm(3, 3)],
    ),
    ("qr_wide", ops.qr, torch.linalg.qr, [nrm(2, 3, 5)]),
    (
        "eigh",
        lambda a: (lambda w, v: (w, v * v))(*ops.eigh(a + ops.swapaxes(a, -1, -2))),
        lambda a: (lambda w, v: (w, v * v))(*torch.linalg.eigh(a + a.mT)),
        [nrm(2, 4, 4)],
    ),
    (
        "svd_tall",
        lambda a: (lambda u, s, vh: (s, u * u, vh * vh, ops.matmul(u, vh)))(
            *ops.svd(a, full_matrices=False)
        ),
        lambda a: (lambda u, s, vh: (s, u * u, vh * vh, u @ vh))(
            *torch.linalg.svd(a, full_matrices=False)
        ),
        [nrm(5, 3)],
    ),
    (
        "svd_wide",
        lambda a: (lambda u, s, vh: (s, ops.matmul(u, vh)))(*ops.svd(a, full_matrices=False)),
        lambda a: (lambda u, s, vh: (s, u @ vh))(*torch.linalg.svd(a, full_matrices=False)),
        [nrm(3, 5)],
    ),
    (
        "svd_square_full",
        lambda a: (lambda u, s, vh: (s, u * u))(*ops.svd(a)),
        lambda a: (lambda u, s, vh: (s, u * u))(*torch.linalg.svd(a)),
        [nrm(3, 3)],
    ),
    ("svdvals", lambda a: ops.svd(a, compute_uv=False), torch.linalg.svdvals, [nrm(4, 3)]),
    ("pinv_tall", ops.pinv, torch.linalg.pinv, [nrm(5, 3)]),
    ("pinv_wide", ops.pinv, torch.linalg.pinv, [nrm(2, 4)]),
    ("lstsq", ops.lstsq, lambda a, b: torch.linalg.pinv(a) @ b, [nrm(5, 3), nrm(5, 2)]),
    # ---------------------------------------------------------------- fft, signal
    ("fft", lambda r, i: ops.fft((r, i)), _t_cplx(torch.fft.fft), [nrm(2, 6), nrm(2, 6)]),
    ("fft2", lambda r, i: ops.fft2((r, i)), _t_cplx(torch.fft.fft2), [nrm(3, 4), nrm(3, 4)]),
    ("ifft2", lambda r, i: ops.ifft2((r, i)), _t_cplx(torch.fft.ifft2), [nrm(3, 4), nrm(3, 4)]),
    ("rfft_even", ops.rfft, lambda x: (lambda z: (z.real, z.imag))(torch.fft.rfft(x)), [nrm(2, 6)]),
    (
        "rfft_odd_padded",
        lambda x: ops.rfft(x, 9),
        lambda x: (lambda z: (z.real, z.imag))(torch.fft.rfft(x, 9)),
        [nrm(7)],
    ),
    (
        "irfft",
        lambda r, i: ops.irfft((r, i)),
        lambda r, i: torch.fft.irfft(torch.complex(r, i)),
        [nrm(2, 5), nrm(2, 5)],
    ),
    (
        "irfft_odd",
        lambda r, i: ops.irfft((r, i), 7),
        lambda r, i: torch.fft.irfft(torch.complex(r, i), 7),
        [nrm(5), nrm(5)],
    ),
    (
        "stft",
        lambda x: ops.stft(x, 8, 4, 8),
        lambda x: (lambda z: (z.real, z.imag))(
            torch.stft(x, 8, 4, 8, window=HANN, return_complex=True).mT
        ),
        [nrm(2, 20)],
    ),
    (
        "istft",
        lambda r, i: ops.istft((r, i), 8, 4, 8),
        lambda r, i: torch.istft(torch.complex(r, i).mT, 8, 4, 8, window=HANN),
        [nrm(6, 5), nrm(6, 5)],
    ),
    (
        "extract_sequences",
        lambda x: ops.extract_sequences(x, 3, 2),
        lambda x: x.unfold(-1, 3, 2),
        [nrm(2, 9)],
    ),
    (
        "unfold",
        lambda x: ops.unfold(x, 2, padding=1, stride=2),
        lambda x: F.unfold(x, 2, padding=1, stride=2),
        [nrm(1, 2, 4, 5)],
    ),
    (
        "fold",
        lambda x: ops.fold(x, (3, 4), 2, padding=1),
        lambda x: F.fold(x, (3, 4), 2, padding=1),
        [nrm(1, 8, 20)],
    ),
    # ---------------------------------------------------------------- nn
    (
        "dot_product_attention",
        lambda q, k, v: ops.dot_product_attention(q, k, v, mask=MASK),
        _t_dpa,
        [nrm(1, 3, 4, 2), nrm(1, 4, 2, 2), nrm(1, 4, 2, 2)],
    ),
    (
        "dot_product_attention_bias_causal",
        lambda q, k, v, b: ops.dot_product_attention(q, k, v, bias=b, is_causal=True, scale=0.7),
        lambda q, k, v, b: F.scaled_dot_product_attention(
            q.transpose(1, 2),
            k.transpose(1, 2),
            v.transpose(1, 2),
            attn_mask=b + torch.where(torch.ones(3, 4, dtype=torch.bool).tril(), 0.0, -torch.inf),
            scale=0.7,
        ).transpose(1, 2),
        [nrm(1, 3, 2, 2), nrm(1, 4, 2, 2), nrm(1, 4, 2, 2), nrm(1, 2, 3, 4)],
    ),
    (
        "layer_normalization",
        lambda x, g, b: ops.layer_normalization(x, g, b),
        lambda x, g, b: F.layer_norm(x, (4,), g, b, 1e-7),
        [nrm(3, 4), nrm(4), nrm(4)],
    ),
    (
        "layer_normalization_axes",
        lambda x: ops.layer_normalization(x, axis=(0, 2)),
        lambda x: (
            (x - x.mean((0, 2), keepdim=True))
            / (x.var((0, 2), unbiased=False, keepdim=True) + 1e-7).sqrt()
        ),
        [nrm(2, 3, 4)],
    ),
    (
        "rms_normalization",
        lambda x, s: ops.rms_normalization(x, s),
        lambda x, s: F.rms_norm(x, (4,), s, 1e-7),
        [nrm(3, 4), nrm(4)],
    ),
    (
        "depth_to_space",
        lambda x: ops.depth_to_space(x, 2, "channels_first"),
        lambda x: F.pixel_shuffle(x, 2),
        [nrm(1, 8, 2, 3)],
    ),
    (
        "space_to_depth",
        lambda x: ops.space_to_depth(x, 2, "channels_first"),
        lambda x: F.pixel_unshuffle(x, 2),
        [nrm(1, 2, 4, 6)],
    ),
    (
        "adaptive_average_pool",
        lambda x: ops.adaptive_average_pool(x, (2, 3), "channels_first"),
        lambda x: F.adaptive_avg_pool2d(x, (2, 3)),
        [nrm(1, 2, 5, 7)],
    ),
    (
        "adaptive_max_pool",
        lambda x: ops.adaptive_max_pool(x, 3, "channels_first"),
        lambda x: F.adaptive_max_pool1d(x, 3),
        [nrm(2, 2, 7)],
    ),
    ("sparsemax", ops.sparsemax, _t_sparsemax, [nrm(3, 5)]),
    (
        "psnr",
        lambda a, b: ops.psnr(a, b, 2.0),
        lambda a, b: 20 * np.log10(2.0) - 10 * torch.log10(((a - b) ** 2).mean()),
        [unit(2, 3), unit(2, 3)],
    ),
    (
        "ctc_loss",
        lambda o: ops.ctc_loss(CTC_T, o, [3, 2], [6, 5]),
        lambda o: F.ctc_loss(
            o.log_softmax(-1).transpose(0, 1),
            torch.tensor(CTC_T),
            torch.tensor([6, 5]),
            torch.tensor([3, 2]),
            reduction="none",
        ),
        [nrm(2, 6, 4)],
    ),
    # ---------------------------------------------------------------- core
    (
        "associative_scan",
        lambda x: ops.associative_scan(ops.add, x, axis=1),
        lambda x: x.cumsum(1),
        [nrm(2, 7)],
    ),
    (
        "associative_scan_reverse",
        lambda x: ops.associative_scan(ops.multiply, x, reverse=True),
        lambda x: x.flip(0).cumprod(0).flip(0),
        [pos(5)],
    ),
    (
        "rearrange",
        lambda x: ops.rearrange(x, "b (h w) c -> (b c) w h", h=2),
        lambda x: x.reshape(2, 2, 3, 2).permute(0, 3, 2, 1).reshape(4, 3, 2),
        [nrm(2, 6, 2)],
    ),
    (
        "vectorize",
        lambda a, b: ops.vectorize(lambda u, v: ops.sum(u * v), signature="(n),(n)->()")(a, b),
        lambda a, b: (a * b).sum(-1),
        [nrm(3, 4), nrm(4)],
    ),
    # ---------------------------------------------------------------- image
    (
        "resize_bilinear",
        lambda x: img.resize(x, (3, 7), data_format="channels_first"),
        lambda x: F.interpolate(x, (3, 7), mode="bilinear"),
        [nrm(1, 2, 5, 4)],
    ),
    (
        "resize_bicubic",
        lambda x: img.resize(x, (6, 3), "bicubic", data_format="channels_first"),
        lambda x: F.interpolate(x, (6, 3), mode="bicubic"),
        [nrm(1, 1, 4, 5)],
    ),
    (
        "resize_antialias",
        lambda x: img.resize(x, (2, 3), antialias=True, data_format="channels_first"),
        lambda x: F.interpolate(x, (2, 3), mode="bilinear", antialias=True),
        [nrm(1, 1, 5, 7)],
    ),
    (
        "resize_nearest",
        lambda x: img.resize(x, (3, 7), "nearest", data_format="channels_first"),
        lambda x: F.interpolate(x, (3, 7), mode="nearest-exact"),
        [nrm(1, 2, 5, 4)],
    ),
    (
        "affine_transform",
        lambda x, t: img.affine_transform(x, t),
        None,
        [nrm(1, 4, 5, 2), TRANSFORM],
    ),
    (
        "affine_transform_reflect",
        lambda x: img.affine_transform(x, TRANSFORM, fill_mode="reflect"),
        None,
        [nrm(4, 5, 1)],
    ),
    (
        "perspective_transform",
        lambda x, e: img.perspective_transform(x, [[0, 0], [4, 0], [0, 3], [4, 3]], e),
        None,
        [nrm(4, 5, 1), np.array([[0.1, 0.2], [3.8, -0.1], [0.3, 3.1], [4.2, 2.7]])],
    ),
    (
        "map_coordinates",
        lambda x, c: img.map_coordinates(x, c, 1, "nearest"),
        None,
        [nrm(4, 5), R.uniform(-0.7, 4.6, (2, 6))],
    ),
    (
        "scale_and_translate",
        lambda x, s, t: img.scale_and_translate(x, (1, 3, 6, 2), s, t, (1, 2), "cubic"),
        None,
        [nrm(1, 4, 5, 2), np.array([0.7, 1.3]), np.array([0.2, -0.4])],
    ),
    (
        "rgb_to_grayscale",
        img.rgb_to_grayscale,
        lambda x: (x * torch.tensor([0.2989, 0.587, 0.114], dtype=x.dtype)).sum(-1, keepdim=True),
        [unit(2, 3, 3)],
    ),
    ("rgb_to_hsv", img.rgb_to_hsv, None, [unit(2, 3, 3)]),
    ("hsv_to_rgb", img.hsv_to_rgb, None, [unit(2, 3, 3)]),
    (
        "pad_images",
        lambda x: img.pad_images(x, 1, 0, 2, 1),
        lambda x: F.pad(x, (0, 0, 0, 1, 1, 2)),
        [nrm(3, 2, 2)],
    ),
    (
        "crop_images",
        lambda x: img.crop_images(x, 1, 0, target_height=2, right_cropping=1),
        lambda x: x[1:3, 0:2],
        [nrm(4, 3, 2)],
    ),
    ("extract_patches", lambda x: img.extract_patches(x, 2, 1), None, [nrm(1, 3, 4, 2)]),
    ("gaussian_blur", img.gaussian_blur, None, [nrm(1, 4, 4, 2)]),
    ("sobel_edges", img.sobel_edges, None, [nrm(1, 4, 4, 1)]),
    (
        "ssim",
        lambda a, b: img.ssim(a, b, filter_size=3),
        None,
        [unit(1, 5, 5, 2), unit(1, 5, 5, 2)],
    ),
]


@pytest.mark.parametrize("row", ROWS, ids=[r[0] for r in ROWS])
def test_grad_finite_differences(row):
    _, fn, _, args, *opts = row
    check_grads(fn, args, **(opts[0] if opts else {}))


TORCH_ROWS = [r for r in ROWS if r[2] is not None]


@pytest.mark.parametrize("row", TORCH_ROWS, ids=[r[0] for r in TORCH_ROWS])
def test_grad_against_torch(row):
    _, fn, torch_fn, args, *_ = row
    check_against_torch(fn, torch_fn, args)


@pytest.mark.parametrize(
    "name,fn,args",
    [
        ("erfc", ops.erfc, [nrm(4)]),
        ("sinc", ops.sinc, [nrm(4)]),
        ("logaddexp2", ops.logaddexp2, [nrm(4), nrm(4)]),
        ("det", ops.det, [nrm(3, 3)]),
        ("fft", lambda r, i: ops.fft((r, i)), [nrm(5), nrm(5)]),
        ("layer_normalization", ops.layer_normalization, [nrm(2, 4)]),
        ("sparsemax", ops.sparsemax, [nrm(2, 5)]),
        ("unfold", lambda x: ops.unfold(x, 2), [nrm(1, 1, 3, 3)]),
    ],
)
def test_second_order(name, fn, args):
    check_grads(fn, args, order=2)


def test_non_differentiable_cases_say_why():
    a = kt.Variable(nrm(5, 3))
    with kt.GradientTape() as tape:
        u, s, vh = ops.svd(a)
        loss = ops.sum(u)
    with pytest.raises(ValueError, match="full_matrices"):
        tape.gradient(loss, a)
    with kt.GradientTape() as tape:
        q, r = ops.qr(a, mode="complete")
        loss = ops.sum(q)
    with pytest.raises(ValueError, match="complete"):
        tape.gradient(loss, a)
