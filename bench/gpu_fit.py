"""Training (and InceptionV3 predict) throughput on a GPU: keratron's `fit` next to the
hand-written PyTorch eager loop and torch.compile, float32 and bfloat16, on the CUDA device.

Run on a machine with a GPU: `python bench/gpu_fit.py [--workloads ...] [--columns ...]
[--deadline S]`. Each line gives samples/s (best of `--rounds` epochs after a warm-up epoch)
and the last epoch's loss; a table follows. Cells run in priority order (keratron and the
eager loop on every workload first, then torch.compile and bfloat16, then keratron's
variants), and once `--deadline` seconds have passed the rest are skipped, so a bounded run
still gives the main figures; `--paired` runs each workload's columns back to back instead, in
the order `--columns` names them (precisions compared in the same state of the process).

Columns:
- keratron: `fit`, kernel backend "auto", CUDA graphs as configured (on by default);
- keratron-bf16: the same under the mixed_bfloat16 policy;
- keratron-tf32: the same with float32 products on TF32 tensor cores
  (`set_float32_matmul_precision("tf32")`; keratron's default is IEEE float32, while torch's
  eager convolutions use TF32 by default and its matmuls IEEE);
- keratron-nographs, keratron-fallback, keratron-triton: graphs off; the torch/cuBLAS/cuDNN
  fallback only; the Triton routes only (pinned to each kernel's first config, so a compile
  per kernel and no tuning);
- torch, torch-bf16: the eager loop (data already on the device), float32 and under
  torch.autocast(bfloat16);
- torch-ieee: the eager loop with TF32 off for cuDNN too (torch's default runs cuDNN
  convolutions and RNNs on TF32): float32 products as keratron's default computes them;
- torch-compile, torch-compile-ro: the same loop over torch.compile(model) in the default
  mode and in mode="reduce-overhead" (CUDA graphs).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
import warnings

# --dry-run: every cell on CPU at the workloads' quick sizes, one round (torch.compile and
# the Triton column left out), to check this script on a machine without a GPU.
DRY_RUN = "--dry-run" in sys.argv
DEVICE = "cpu" if DRY_RUN else "cuda"
os.environ.setdefault("KERATRON_DEVICE", DEVICE)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402
import torch  # noqa: E402
import workloads as W  # noqa: E402

# Training at the sizes of `make bench`, plus MobileNet training at batch 64 and InceptionV3
# predict at batch 32 (random pixels; labels from 1000 classes).
GPU_WORKLOADS = {
    **{n: W.WORKLOADS[n] for n in ("tiny", "mlp", "cnn", "lstm")},
    "inception-predict": W.Workload("inception-predict", "inception_v3", "predict", 512, 32, 64),
    "mobilenet-train": W.Workload("mobilenet-train", "mobilenet", "train", 640, 64, 128),
}
COLUMNS = (
    "keratron",
    "torch",
    "torch-compile-ro",
    "keratron-bf16",
    "torch-bf16",
    "torch-ieee",
    "keratron-tf32",
    "torch-compile",
    "keratron-nographs",
    "keratron-fallback",
    "keratron-triton",
)
# Which columns run in the first pass (every workload), then the second, then the third.
PASSES = (
    ("keratron", "torch"),
    ("torch-compile-ro", "keratron-bf16", "torch-bf16", "torch-ieee", "keratron-tf32"),
    ("torch-compile", "keratron-nographs", "keratron-fallback", "keratron-triton"),
)


def gpu_data(wl):
    n = wl.quick_samples if DRY_RUN else wl.samples
    if wl.model in ("mobilenet", "inception_v3"):
        rng = np.random.default_rng(0)
        x = rng.random((n, *W.INPUT_SHAPES[wl.model]), dtype=np.float32)
        return x, rng.integers(0, 1000, n).astype(np.int64)
    return W.make_data(wl, n)


def _sync():
    if not DRY_RUN:
        torch.cuda.synchronize()


def _timed(run, n, rounds):
    best, out = 0.0, None
    for _ in range(rounds):
        _sync()
        start = time.perf_counter()
        out = run()
        _sync()
        best = max(best, n / (time.perf_counter() - start))
    return best, out


def keratron_rate(wl, x, y, column, rounds):
    import keratron as kt

    backend = {"keratron-fallback": "fallback", "keratron-triton": "triton"}.get(column)
    kt.config.set_kernel_backend(backend)
    kt.config.set_cuda_graphs(column != "keratron-nographs")
    pinned = os.environ.get("KERATRON_TRITON_PIN")
    if column == "keratron-triton":
        os.environ["KERATRON_TRITON_PIN"] = "1"
    if column == "keratron-bf16":
        kt.mixed_precision.set_global_policy("mixed_bfloat16")
    torch_flags = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    if column == "keratron-tf32":
        kt.config.set_float32_matmul_precision("tf32")
    try:
        kt.utils.set_random_seed(0)
        if wl.model == "mobilenet":
            model = kt.applications.MobileNet(weights=None, classifier_activation=None)
        elif wl.model == "inception_v3":
            model = kt.applications.InceptionV3(weights=None)
        else:
            model = W.build_keras_model(kt, wl)
        if wl.task == "predict":
            model.predict(x[: 2 * wl.batch], batch_size=wl.batch, verbose=0)
            rate, out = _timed(
                lambda: model.predict(x, batch_size=wl.batch, verbose=0), len(x), rounds
            )
            return rate, float(np.asarray(out).mean())
        loss = W.keras_loss(kt, wl)
        if wl.model == "mobilenet":
            loss = kt.losses.SparseCategoricalCrossentropy(from_logits=True)
        model.compile(optimizer=kt.optimizers.Adam(W.LEARNING_RATE), loss=loss)
        model.fit(x, y, batch_size=wl.batch, epochs=1, verbose=0)
        rate, hist = _timed(
            lambda: model.fit(x, y, batch_size=wl.batch, epochs=1, verbose=0), len(x), rounds
        )
        return rate, hist.history["loss"][-1]
    finally:
        kt.config.set_kernel_backend(None)
        kt.config.set_cuda_graphs(True)
        kt.mixed_precision.set_global_policy("float32")
        kt.config.set_float32_matmul_precision(None)
        # the eager-loop columns run at torch's own defaults
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = torch_flags
        if pinned is None:
            os.environ.pop("KERATRON_TRITON_PIN", None)


def torch_model(wl):
    torch.manual_seed(0)
    model = W.build_torch_model(torch, wl)
    if wl.model == "mobilenet":  # logits, for CrossEntropyLoss
        model = torch.nn.Sequential(*list(model.children())[:-1])
    return model.to(DEVICE)


def torch_rate(wl, x, y, column, rounds):
    if column != "torch-ieee":
        return _torch_rate(wl, x, y, column, rounds)
    flags = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    try:
        return _torch_rate(wl, x, y, column, rounds)
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = flags


def _torch_rate(wl, x, y, column, rounds):
    module = torch_model(wl)
    model = module
    if column == "torch-compile":
        model = torch.compile(module)
    elif column == "torch-compile-ro":
        model = torch.compile(module, mode="reduce-overhead")
    autocast = (
        torch.autocast(DEVICE, dtype=torch.bfloat16)
        if column == "torch-bf16"
        else contextlib.nullcontext()
    )
    if x.ndim == 4:
        x = np.ascontiguousarray(x.transpose(0, 3, 1, 2))
    xt = torch.from_numpy(x.astype(np.int64) if wl.model == "lstm" else x).to(DEVICE)
    b = wl.batch
    if wl.task == "predict":
        model.eval()

        def predict():
            with torch.inference_mode(), autocast:
                outs = [model(xt[i : i + b]) for i in range(0, len(xt), b)]
                return torch.cat(outs).float().cpu().numpy()

        predict()
        rate, out = _timed(predict, len(xt), rounds)
        return rate, float(out.mean())
    yt = torch.from_numpy(y).to(DEVICE)
    loss_fn = W.torch_loss(torch, wl)
    params = [p for p in module.parameters() if p.requires_grad]
    opt = torch.optim.Adam(params, lr=W.LEARNING_RATE, foreach=True)

    def epoch():
        model.train()
        order = torch.randperm(len(xt), device=xt.device)
        total = torch.zeros((), device=xt.device)
        for i in range(0, len(xt), b):
            idx = order[i : i + b]
            opt.zero_grad(set_to_none=True)
            with autocast:
                loss = loss_fn(model(xt[idx]).float(), yt[idx])
            loss.backward()
            opt.step()
            total += loss.detach()
        return float(total) * b / len(xt)

    epoch()
    return _timed(epoch, len(xt), rounds)


def run_cell(wl, x, y, column, rounds):
    fn = keratron_rate if column.startswith("keratron") else torch_rate
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        start = time.perf_counter()
        try:
            rate, loss = fn(wl, x, y, column, rounds)
            cell = (rate, f"{rate:10.0f}/s loss {loss:.4f}")
        except Exception as e:  # report and go on to the next cell
            cell = (None, f"failed: {type(e).__name__}: {str(e)[:300]}")
    notes = sorted({str(w.message)[:240] for w in caught if column.startswith("keratron")})
    print(f"{wl.name:18s} {column:18s} {cell[1]}  ({time.perf_counter() - start:.0f} s)")
    for note in notes[:4]:
        print(f"    warning: {note}")
    if column == "keratron":  # which implementation "auto" kept, per primitive
        from collections import Counter

        from keratron.ops import _dispatch

        kept = Counter(f"{k[0]}:{c}" for k, c in _dispatch.kernel_choices().items())
        print(f"    auto kept {dict(sorted(kept.items()))}")
        _dispatch.clear_kernel_choices()
    sys.stdout.flush()
    return cell[0]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", default=",".join(GPU_WORKLOADS))
    parser.add_argument("--columns", default=",".join(COLUMNS))
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--deadline", type=float, default=float("inf"), help="seconds")
    parser.add_argument("--dry-run", action="store_true", help="on CPU, quick sizes")
    parser.add_argument(
        "--paired", action="store_true", help="each workload's columns back to back"
    )
    args = parser.parse_args(argv)
    if args.dry_run:
        args.rounds = 1
        args.columns = ",".join(
            c for c in args.columns.split(",") if "compile" not in c and c != "keratron-triton"
        )
    elif not torch.cuda.is_available():
        print("bench/gpu_fit.py: CUDA is not available on this machine", file=sys.stderr)
        return 1
    torch.backends.cudnn.benchmark = True
    device = "CPU (dry run)" if args.dry_run else torch.cuda.get_device_name()
    print(f"{device}, torch {torch.__version__}", flush=True)
    names = args.workloads.split(",")
    wanted = args.columns.split(",")
    data = {n: gpu_data(GPU_WORKLOADS[n]) for n in names}
    start = time.perf_counter()
    rates: dict = {}
    # --paired: each workload's cells back to back, in the order --columns gives them.
    passes = [[c for c in wanted]] if args.paired else PASSES
    for columns in passes:
        for name in names:
            for column in columns:
                if column not in wanted:
                    continue
                if time.perf_counter() - start > args.deadline:
                    rates[name, column] = "skipped"
                    continue
                wl = GPU_WORKLOADS[name]
                rates[name, column] = run_cell(wl, *data[name], column, args.rounds)
    shown = [c for c in COLUMNS if c in wanted]
    print("\n| workload | " + " | ".join(shown) + " | keratron / torch |")
    print("|---|" + "---:|" * (len(shown) + 1))
    for name in names:
        cells = []
        for c in shown:
            r = rates.get((name, c))
            cells.append(f"{r:,.0f}" if isinstance(r, float) else (r or "failed"))
        k, t = rates.get((name, "keratron")), rates.get((name, "torch"))
        ratio = f"{k / t:.2f}" if isinstance(k, float) and isinstance(t, float) else "-"
        print(f"| {name} | " + " | ".join(cells) + f" | {ratio} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
