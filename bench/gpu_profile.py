"""Where a keratron `fit` (or `predict`) step spends its time on a GPU: the step's wall time
with and without CUDA graphs, then torch.profiler's table of the GPU kernels of one epoch
run without graphs (so each kernel shows by name), by GPU time.

Run on a machine with a GPU: `python bench/gpu_profile.py [--workloads lstm,...]
[--policy mixed_bfloat16]` (the workloads of bench/gpu_fit.py, under a Keras dtype policy).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

os.environ.setdefault("KERATRON_DEVICE", "cuda")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402
from gpu_fit import GPU_WORKLOADS, gpu_data  # noqa: E402


def build(kt, wl):
    import workloads as W

    kt.utils.set_random_seed(0)
    if wl.model == "mobilenet":
        model = kt.applications.MobileNet(weights=None, classifier_activation=None)
        loss = kt.losses.SparseCategoricalCrossentropy(from_logits=True)
    elif wl.model == "inception_v3":
        return kt.applications.InceptionV3(weights=None)
    else:
        model, loss = W.build_keras_model(kt, wl), W.keras_loss(kt, wl)
    model.compile(optimizer=kt.optimizers.Adam(W.LEARNING_RATE), loss=loss)
    return model


def epoch(model, wl, x, y):
    if wl.task == "predict":
        model.predict(x, batch_size=wl.batch, verbose=0)
    else:
        model.fit(x, y, batch_size=wl.batch, epochs=1, verbose=0)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", default="lstm,inception-predict,mobilenet-train")
    parser.add_argument("--rows", type=int, default=14)
    parser.add_argument("--policy", default="float32", help="e.g. mixed_bfloat16")
    args = parser.parse_args(argv)
    import keratron as kt

    kt.mixed_precision.set_global_policy(args.policy)

    for name in args.workloads.split(","):
        wl = GPU_WORKLOADS[name]
        x, y = gpu_data(wl)
        steps = len(x) // wl.batch
        for graphs in (True, False):
            kt.config.set_cuda_graphs(graphs)
            model = build(kt, wl)
            epoch(model, wl, x, y)
            torch.cuda.synchronize()
            start = time.perf_counter()
            epoch(model, wl, x, y)
            torch.cuda.synchronize()
            ms = (time.perf_counter() - start) * 1e3 / steps
            state = "on" if graphs else "off"
            print(f"{name} ({args.policy}): {ms:.2f} ms a step, CUDA graphs {state}")
        activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
        with torch.profiler.profile(activities=activities) as prof:
            epoch(model, wl, x, y)
            torch.cuda.synchronize()
        events = prof.key_averages()
        # The device's own events (kernels, copies): an op's row repeats its kernels' time.
        device_events = (e for e in events if e.device_type != torch.autograd.DeviceType.CPU)
        gpu_total = sum(e.self_device_time_total for e in device_events) / 1e3 / steps
        print(f"{name} ({args.policy}): GPU kernel time {gpu_total:.2f} ms a step (graphs off)")
        print(
            events.table(
                sort_by="self_device_time_total", row_limit=args.rows, max_name_column_width=60
            )
        )
        kt.config.set_cuda_graphs(True)
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
