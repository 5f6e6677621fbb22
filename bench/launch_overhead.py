"""Host time per Triton launch: each route's Python, from the primitive's route call to the
driver's launch.

Without a GPU (the default here) the routes run on CPU tensors under a stand-in for Triton's
CUDA driver (`keratron.triton_kernels._standin`): every kernel compiles for real for sm_90 on
its first call, autotuning takes the first config untimed, and the launcher records what it
would launch instead of launching. So the figure is the framework's host work per launch
without the driver call itself: once a signature is warm, the route's cache lookup (shapes,
strides, dtypes, devices, alignment, parameters), its output allocation and its prepared
launches (`_common.route_cache`); before that, argument checks, planning, binding and Triton's
autotuner and JIT dispatch. With `--device cuda` on a GPU the same calls
run end to end (real launches, synchronised once per repeat).

Each case is warmed up (compile, autotune, the first binding of its signature), then timed
timeit-style: the best of several repeats of many calls. Printed per case: microseconds per
route call, launches per call, microseconds per launch.

Run: `python bench/launch_overhead.py` (the first run compiles ~15 kernels, ~1 min; later runs
hit Triton's cache); `--cases matmul,xent` picks cases; `--number`/`--repeat` trade time for
stability.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import timeit

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

if os.environ.get("TRITON_INTERPRET") == "1":
    sys.exit("launch_overhead: unset TRITON_INTERPRET (it times compiled-kernel launches)")

import torch  # noqa: E402

from keratron import triton_kernels  # noqa: E402
from keratron.triton_kernels import conv2d, lstm, matmul, softmax_xent  # noqa: E402

_CONV = dict(strides=(1, 1), padding=((1, 1), (1, 1)), dilation=(1, 1))


def cases(device):
    """(name, call) pairs: small problems, where launch overhead is what a step pays."""
    g = torch.Generator().manual_seed(0)

    def randn(*shape, dtype=torch.float32):
        return torch.randn(*shape, generator=g, dtype=dtype).to(device)

    x, w, b = randn(32, 256), randn(256, 128), randn(128)
    xi, k, kd = randn(8, 16, 16, 16), randn(3, 3, 16, 32), randn(3, 3, 1, 16)
    gy = randn(8, 16, 16, 32)
    logits, labels = randn(64, 10), torch.randint(0, 10, (64,), generator=g).to(device)
    probs = torch.softmax(logits, -1)
    gl = randn(64)
    steps, units, batch = 8, 64, 32
    xp, h0, c0 = randn(batch, steps, 4 * units), randn(batch, units), randn(batch, units)
    rk = randn(units, 4 * units)
    lstm_args = dict(activation="tanh", recurrent_activation="sigmoid", zero_output_for_mask=False)
    all_h, _, _, gates, cells = lstm.forward_route(xp, h0, c0, rk, None, False, **lstm_args)
    g_all, g_h, g_c = randn(batch, steps, units), randn(batch, units), randn(batch, units)
    return [
        ("matmul 32x256x128 +bias relu", lambda: matmul.matmul_route(x, w, b, "relu")),
        ("conv 8x16x16x16 3x3x32", lambda: conv2d.conv_route(xi, k, None, groups=1,
                                                              activation=None, **_CONV)),
        ("conv_grad_input", lambda: conv2d.grad_input_route(gy, k, tuple(xi.shape), groups=1,
                                                             **_CONV)),
        ("conv_grad_filter", lambda: conv2d.grad_filter_route(xi, gy, tuple(k.shape), groups=1,
                                                               **_CONV)),
        ("depthwise 8x16x16x16 3x3", lambda: conv2d.conv_route(xi, kd, None, groups=16,
                                                                activation="relu6", **_CONV)),
        ("xent fwd 64x10 sparse", lambda: softmax_xent.forward_route(logits, labels, True)),
        ("xent bwd 64x10 sparse", lambda: softmax_xent.backward_route(gl, probs, labels, True)),
        ("lstm fwd T=8 U=64", lambda: lstm.forward_route(xp, h0, c0, rk, None, False,
                                                          **lstm_args)),
        ("lstm bwd T=8 U=64", lambda: lstm.backward_route(g_all, g_h, g_c, h0, c0, rk, None,
                                                           all_h, gates, cells, False,
                                                           **lstm_args)),
    ]  # fmt: skip


def measure(call, number: int, repeat: int, sync) -> tuple:
    """(us per call, launches per call), best of `repeat`."""
    triton_kernels.reset_launch_counts()
    call()
    sync()
    launches = sum(triton_kernels.launch_counts().values())
    best = float("inf")
    for _ in range(repeat):
        sync()
        best = min(best, timeit.timeit(call, number=number))
        sync()
    return best / number * 1e6, launches


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu", help="cpu (stand-in driver) or cuda")
    parser.add_argument("--cases", default="", help="comma-separated name prefixes")
    parser.add_argument(
        "--through-launcher",
        action="store_true",
        help="CPU: cached launches go through the launcher's Python call, not the C launcher",
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="after each case, cProfile's top functions by own time over --number calls",
    )
    parser.add_argument("--number", type=int, default=300, help="calls per repeat")
    parser.add_argument("--repeat", type=int, default=5, help="repeats (the best is kept)")
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    if device.type == "cuda":
        scope, sync = contextlib.nullcontext(), torch.cuda.synchronize
        where = torch.cuda.get_device_name(device)
    else:
        from keratron.triton_kernels import _standin

        direct = not args.through_launcher
        scope = _standin.stand_in_driver(record=False, direct=direct)
        sync = lambda: None  # noqa: E731
        how = "the C launcher's stand-in called directly" if direct else "through the launcher"
        where = f"CPU, stand-in driver (launches recorded, not run; {how})"
    wanted = [c for c in args.cases.split(",") if c]
    print(f"launch overhead on {where}; best of {args.repeat} x {args.number} calls")
    print(f"{'case':32s} {'us/call':>9s} {'launches':>9s} {'us/launch':>10s}")
    with scope:
        for name, call in cases(device):
            if wanted and not any(name.startswith(w) for w in wanted):
                continue
            us, launches = measure(call, args.number, args.repeat, sync)
            per = us / max(launches, 1)
            print(f"{name:32s} {us:9.1f} {launches:9d} {per:10.1f}", flush=True)
            if args.profile:
                profile(call, args.number, sync)


def profile(call, number: int, sync) -> None:
    """cProfile's top functions by own time over `number` calls (the profiler's own cost
    inflates every figure; the shares are what it shows)."""
    import cProfile
    import pstats

    profiler = cProfile.Profile()
    sync()
    profiler.enable()
    for _ in range(number):
        call()
    profiler.disable()
    sync()
    stats = pstats.Stats(profiler)
    rows = sorted(stats.stats.items(), key=lambda kv: -kv[1][2])[:8]
    for (file, line, fn), (_, calls, own, _, _) in rows:
        where = f"{os.path.basename(file)}:{line}" if line else file
        print(f"    {own / number * 1e6:7.2f} us own  {calls // number:3d}x  {fn} ({where})")


if __name__ == "__main__":
    main()
