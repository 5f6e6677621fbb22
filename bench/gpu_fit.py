"""Training throughput on a GPU: keratron's `fit` (Triton routes, then the torch/cuBLAS
fallback) next to the hand-written PyTorch eager loop, on the CUDA device.

Run on a machine with a GPU: `python bench/gpu_fit.py [--workloads mlp,cnn,lstm]`. Each line
gives samples/s, best of `--rounds` epochs after a warm-up epoch, and the final loss of each.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

os.environ.setdefault("KERATRON_DEVICE", "cuda")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402
import torch  # noqa: E402
import workloads as W  # noqa: E402


def keratron_rate(wl, x, y, backend, rounds):
    import keratron as kt

    kt.config.set_kernel_backend(backend)
    kt.utils.set_random_seed(0)
    model = W.build_keras_model(kt, wl)
    model.compile(optimizer=kt.optimizers.Adam(W.LEARNING_RATE), loss=W.keras_loss(kt, wl))
    model.fit(x, y, batch_size=wl.batch, epochs=1, verbose=0)
    best, loss = 0.0, None
    for _ in range(rounds):
        torch.cuda.synchronize()
        start = time.perf_counter()
        hist = model.fit(x, y, batch_size=wl.batch, epochs=1, verbose=0)
        torch.cuda.synchronize()
        best = max(best, len(x) / (time.perf_counter() - start))
        loss = hist.history["loss"][-1]
    kt.config.set_kernel_backend(None)
    if backend is None:  # "auto": say which implementation each measured call kept
        from collections import Counter

        from keratron.ops import _dispatch

        kept = Counter(f"{key[0]}:{choice}" for key, choice in _dispatch.kernel_choices().items())
        print(f"  {wl.name} auto kept {dict(sorted(kept.items()))}", flush=True)
        _dispatch.clear_kernel_choices()
    return best, loss


def torch_rate(wl, x, y, rounds):
    torch.manual_seed(0)
    model = W.build_torch_model(torch, wl).cuda()
    if x.ndim == 4:
        x = np.ascontiguousarray(x.transpose(0, 3, 1, 2))
    xt = torch.from_numpy(x.astype(np.int64) if wl.model == "lstm" else x).cuda()
    yt = torch.from_numpy(y).cuda()
    loss_fn = W.torch_loss(torch, wl)
    opt = torch.optim.Adam(model.parameters(), lr=W.LEARNING_RATE, foreach=True)

    def epoch():
        return W.torch_epoch(torch, model, opt, loss_fn, xt, yt, wl.batch)

    epoch()
    best, loss = 0.0, None
    for _ in range(rounds):
        torch.cuda.synchronize()
        start = time.perf_counter()
        loss = epoch()
        torch.cuda.synchronize()
        best = max(best, len(xt) / (time.perf_counter() - start))
    return best, loss


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", default="tiny,mlp,cnn,lstm")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("bench/gpu_fit.py: CUDA is not available on this machine", file=sys.stderr)
        return 1
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}")
    for name in args.workloads.split(","):
        wl = W.WORKLOADS[name]
        x, y = W.make_data(wl, wl.samples)
        cols = {}
        for label, fn, extra in (
            ("keratron-auto", keratron_rate, (None,)),
            ("keratron-triton", keratron_rate, ("triton",)),
            ("keratron-fallback", keratron_rate, ("fallback",)),
            ("torch", torch_rate, ()),
        ):
            try:
                rate, loss = fn(wl, x, y, *extra, args.rounds)
                cols[label] = f"{rate:10.0f}/s loss {loss:.4f}"
            except Exception as e:  # report and go on to the next column
                cols[label] = f"failed: {type(e).__name__}: {str(e)[:200]}"
        print(name, " | ".join(f"{k}={v}" for k, v in cols.items()), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
