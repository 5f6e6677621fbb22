"""Per-kernel GPU benchmarks: each Triton route against torch (cuBLAS, cuDNN or torch's own CUDA
kernels) at a few shapes, printing throughput and the ratio.

Usage, on a machine with a GPU, from the repository root:
`python -m tools.kernel_bench [matmul] [conv2d] [lstm] [softmax_xent]` (all by default).
`bench/kernels_gpu.py` is the fuller side-by-side benchmark.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import sys

import torch

__all__ = ["matmul", "conv2d", "lstm", "softmax_xent", "main"]


def _do_bench():
    if not torch.cuda.is_available():
        raise SystemExit("tools.kernel_bench: CUDA is not available.")
    from triton.testing import do_bench

    return do_bench


def matmul(
    shapes=((128, 784, 512), (12544, 32, 64), (1024, 1024, 1024), (64, 1024, 4096)),
    dtype=torch.float16,
):
    """Prints TFLOP/s of the kernel (bias + relu epilogue) and of torch for (M, K, N) shapes."""
    do_bench = _do_bench()
    from keratron.triton_kernels.matmul import matmul_route

    for m, k, n in shapes:
        x = torch.randn(m, k, device="cuda", dtype=dtype)
        w = torch.randn(k, n, device="cuda", dtype=dtype)
        b = torch.randn(n, device="cuda", dtype=dtype)
        ms = do_bench(lambda x=x, w=w, b=b: matmul_route(x, w, b, "relu"))
        ms_t = do_bench(lambda x=x, w=w, b=b: torch.relu(torch.addmm(b, x, w)))
        flops = 2.0 * m * n * k
        print(
            f"matmul {m}x{k} @ {k}x{n}: triton {flops / ms * 1e-9:.1f} TFLOP/s, "
            f"torch {flops / ms_t * 1e-9:.1f} TFLOP/s, ratio {ms_t / ms:.2f}"
        )


def conv2d(batch: int = 32, dtype: torch.dtype = torch.float16) -> list:
    """Times forward, grad-input and grad-filter against torch (cuDNN); prints ratios.

    Returns `(case, pass, triton_ms, torch_ms)` rows.
    """
    do_bench = _do_bench()
    from keratron.triton_kernels import conv2d as kernels

    # keratron.ops.conv the module (the package attribute of that name is the conv function).
    ref = importlib.import_module("keratron.ops.conv")

    # (name, H, W, C, F, k, stride, groups): ResNet and MobileNet hot spots.
    cases = [
        ("stem 3x3/2 3->32", 224, 224, 3, 32, 3, 2, 1),
        ("resnet 3x3 64->64", 56, 56, 64, 64, 3, 1, 1),
        ("pointwise 1x1 128->128", 56, 56, 128, 128, 1, 1, 1),
        ("depthwise 3x3 C=64", 112, 112, 64, 64, 3, 1, 64),
        ("depthwise 3x3/2 C=128", 112, 112, 128, 128, 3, 2, 128),
    ]
    rows = []
    for name, h, w, c, f, ks, s, groups in cases:
        x = torch.randn(batch, h, w, c, device="cuda", dtype=dtype)
        k = torch.randn(ks, ks, c // groups, f, device="cuda", dtype=dtype) * 0.1
        b = torch.randn(f, device="cuda", dtype=dtype)
        pads = tuple(ref.same_padding(n, ks, s) for n in (h, w))
        params = dict(strides=(s, s), padding=pads, dilation=(1, 1), groups=groups)
        y = ref._conv_impl(x, k, b, activation="relu", **params)
        g = torch.randn_like(y)
        in_shape = {"input_shape": tuple(x.shape)}
        k_shape = {"kernel_shape": tuple(k.shape)}
        passes = [
            ("fwd", kernels.conv_route, ref._conv_impl, (x, k, b), {"activation": "relu"}),
            ("dgrad", kernels.grad_input_route, ref._conv_grad_input_impl, (g, k), in_shape),
            ("wgrad", kernels.grad_filter_route, ref._conv_grad_filter_impl, (x, g), k_shape),
        ]
        for pname, ours, theirs, args, extra in passes:
            kwargs = dict(params, **extra)
            t_ours = do_bench(functools.partial(ours, *args, **kwargs))
            t_ref = do_bench(functools.partial(theirs, *args, **kwargs))
            rows.append((name, pname, t_ours, t_ref))
            print(
                f"{name:28s} {pname:6s} triton {t_ours:8.3f} ms  torch {t_ref:8.3f} ms  "
                f"speed-up {t_ref / t_ours:5.2f}x"
            )
    return rows


def _time_lstm(do_bench, fwd, bwd, inputs, cotangents, params):
    def forward():
        return fwd(*inputs, None, **params)

    def forward_backward():
        all_h, _, _, gates, cells = forward()
        return bwd(*cotangents, *inputs[1:], None, all_h, gates, cells, **params)

    return do_bench(forward), do_bench(forward_backward)


def lstm(shapes=((64, 100, 256), (32, 50, 512), (128, 20, 128)), dtype=torch.float32) -> list:
    """Times forward and forward+backward against the torch fallback.

    Args:
        shapes: (batch, time, units) triples.
        dtype: float32, float16 or bfloat16.

    Returns:
        A list of dicts: the shape and the milliseconds of each variant.
    """
    do_bench = _do_bench()
    from keratron.ops.rnn import _lstm_grad_impl, _lstm_impl
    from keratron.triton_kernels.lstm import backward_route, forward_route

    params = dict(reverse=False, activation="tanh", recurrent_activation="sigmoid",
                  zero_output_for_mask=False)  # fmt: skip
    gen = torch.Generator(device="cuda").manual_seed(0)

    def rand(*shape):
        return torch.randn(*shape, device="cuda", dtype=dtype, generator=gen) * 0.3

    rows = []
    for batch, steps, units in shapes:
        inputs = (rand(batch, steps, 4 * units), rand(batch, units), rand(batch, units),
                  rand(units, 4 * units))  # fmt: skip
        cotangents = (rand(batch, steps, units), rand(batch, units), rand(batch, units))
        row = {"batch": batch, "time": steps, "units": units}
        for name, fwd, bwd in (
            ("triton", forward_route, backward_route),
            ("torch", _lstm_impl, _lstm_grad_impl),
        ):
            row[f"{name}_fwd_ms"], row[f"{name}_fwd_bwd_ms"] = _time_lstm(
                do_bench, fwd, bwd, inputs, cotangents, params
            )
        print(
            f"B={batch} T={steps} U={units}: forward {row['triton_fwd_ms']:.3f} ms "
            f"(torch {row['torch_fwd_ms']:.3f}), forward+backward {row['triton_fwd_bwd_ms']:.3f} "
            f"ms (torch {row['torch_fwd_bwd_ms']:.3f})"
        )
        rows.append(row)
    return rows


def softmax_xent(shapes=((128, 10), (256, 1000), (64, 50000), (4096, 32000)), dtype=torch.float32):
    """Prints GB/s of the forward and backward kernels and of torch (sparse labels)."""
    do_bench = _do_bench()
    from keratron.triton_kernels.softmax_xent import backward_route, forward_route

    for rows, c in shapes:
        x = torch.randn(rows, c, device="cuda", dtype=dtype)
        y = torch.randint(0, c, (rows,), device="cuda")
        g = torch.ones(rows, device="cuda", dtype=dtype)
        probs = torch.softmax(x, -1)
        # Forward reads the logits twice when chunked; count the minimum (one read, one write).
        nbytes = 2 * x.numel() * x.element_size()
        ms = do_bench(lambda x=x, y=y: forward_route(x, y, True))
        ms_t = do_bench(
            lambda x=x, y=y: (
                torch.nn.functional.cross_entropy(x, y, reduction="none"),
                x.softmax(-1),
            )
        )
        msb = do_bench(lambda g=g, p=probs, y=y: backward_route(g, p, y, True))
        msb_t = do_bench(
            lambda g=g, p=probs, y=y, c=c: (
                g[:, None] * (p - torch.nn.functional.one_hot(y, c).to(p.dtype))
            )
        )
        print(
            f"softmax-xent {rows}x{c}: fwd {nbytes / ms * 1e-6:.0f} GB/s (torch "
            f"{nbytes / ms_t * 1e-6:.0f}, ratio {ms_t / ms:.2f}); bwd {nbytes / msb * 1e-6:.0f} "
            f"GB/s (torch {nbytes / msb_t * 1e-6:.0f}, ratio {msb_t / msb:.2f})"
        )


BENCHES = {"matmul": matmul, "conv2d": conv2d, "lstm": lstm, "softmax_xent": softmax_xent}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.kernel_bench", description=__doc__)
    parser.add_argument("kernels", nargs="*", help=f"any of {', '.join(BENCHES)} (default all)")
    args = parser.parse_args(argv)
    unknown = [k for k in args.kernels if k not in BENCHES]
    if unknown:
        parser.error(f"expected kernels from {list(BENCHES)}. Received: {unknown}")
    for name in args.kernels or BENCHES:
        BENCHES[name]()
    return 0


if __name__ == "__main__":
    sys.exit(main())
