"""keratron's Triton kernels next to torch (cuBLAS / cuDNN) on the shapes that matter.

For each hot primitive with a Triton route (matmul with its epilogue, conv, LSTM, softmax
cross-entropy forward and backward) it times the route and the primitive's torch
implementation (the CPU/CUDA fallback: cuBLAS, cuDNN or torch's own CUDA kernels) on the same
CUDA tensors, at MobileNet shapes (1x1 pointwise convolutions as GEMMs, depthwise 3x3),
InceptionV3 shapes, Dense layers and LSTM layers, and prints TFLOP/s, GB/s (the minimum
traffic: every input read once, every output written once) and the ratio torch time / Triton
time (above 1: the kernel is faster). Each case also reports the largest difference between
the two results, relative to the largest torch value. A kernel module that does not exist yet
is skipped with a note; a case its route does not support (NotImplementedError) is noted too.

The `lstm_cudnn` family times a whole LSTM layer, forward and backward, against torch's
`nn.LSTM` (cuDNN, one call per sequence) with the same weights: keratron's side is the input
projection (cuBLAS) plus the `lstm` route, then the `lstm_grad` route plus the projection's
gradient GEMMs. It prints both sides' milliseconds, the recurrence alone under each Triton
plan (whole sequence, and a launch per step), and the largest difference of the outputs and
of every gradient from cuDNN's.

Run on a machine with a GPU: `python bench/kernels_gpu.py [--dtype bfloat16] [--only matmul]
[--json times.json]`; `--json` also writes every case's times, which `python -m
tools.kernels_aot --measured times.json` prints beside the roofline of each case. Float32
runs with TF32 dots on both sides (cuBLAS, cuDNN) unless `--ieee`. It exits with a message
when CUDA is not available. On CPU, `--dry-run` checks the set-up instead, with no timing:
`--only lstm_cudnn --dry-run` the LSTM comparison's arithmetic (torch's own fallback standing
in for the routes), and the matmul, conv and xent families the launches each case's route
makes (recorded on meta tensors as on a 132-SM H100, no kernel run), so that a case a route
would decline (NotImplementedError) or a launcher that fails shows before a GPU run.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import keratron  # noqa: E402  (registers every primitive)
from keratron.autodiff.primitive import PRIMITIVES  # noqa: E402

DEVICE = "cuda"
_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def load_route(op: str):
    """The Triton route registered for primitive `op`, or None (with a note)."""
    route = PRIMITIVES[op].kernel if op in PRIMITIVES else None
    if route is None:
        print(f"  [skip] {op}: no Triton route is registered")
    return route


def _nbytes(*tensors) -> int:
    return sum(t.numel() * t.element_size() for t in tensors if isinstance(t, torch.Tensor))


def _flatten(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


# ------------------------------------------------------------------------------ cases
# A case is (label, primitive name, torch values, params, FLOPs), on DEVICE in `dtype`; each
# builder takes the problem's sizes and returns the forward case and, where the primitive has
# one, its backward cases.
def matmul_case(dtype, label, m, k, n, bias=True, activation=None):
    x = torch.randn(m, k, device=DEVICE, dtype=dtype)
    w = torch.randn(k, n, device=DEVICE, dtype=dtype) / k**0.5
    b = torch.randn(n, device=DEVICE, dtype=dtype) if bias else None
    # The backward pass is this primitive again on transposed views; forward only here.
    return [(label, "matmul", [x, w, b], dict(activation=activation), 2.0 * m * n * k)]


def conv_case(dtype, label, n, h, w, cin, kh, kw, cout, stride=1, groups=1, activation=None):
    x = torch.randn(n, h, w, cin, device=DEVICE, dtype=dtype)
    k = torch.randn(kh, kw, cin // groups, cout, device=DEVICE, dtype=dtype) / (kh * kw) ** 0.5
    b = torch.randn(cout, device=DEVICE, dtype=dtype)
    # TensorFlow's SAME padding, resolved into explicit pads as the Keras wrappers do.
    pads = []
    for size, ks in ((h, kh), (w, kw)):
        total = max((-(-size // stride) - 1) * stride + ks - size, 0)
        pads.append((total // 2, total - total // 2))
    geometry = dict(strides=(stride, stride), padding=tuple(pads), dilation=(1, 1), groups=groups)
    ho, wo = -(-h // stride), -(-w // stride)
    flops = 2.0 * n * ho * wo * cout * (cin // groups) * kh * kw
    g = torch.randn(n, ho, wo, cout, device=DEVICE, dtype=dtype)
    return [
        (label, "conv", [x, k, b], dict(geometry, activation=activation), flops),
        (
            label + " grad-input",
            "conv_grad_input",
            [g, k],
            dict(geometry, input_shape=tuple(x.shape)),
            flops,
        ),
        (
            label + " grad-filter",
            "conv_grad_filter",
            [x, g],
            dict(geometry, kernel_shape=tuple(k.shape)),
            flops,
        ),
    ]


def lstm_case(dtype, label, batch, steps, units):
    x_proj = torch.randn(batch, steps, 4 * units, device=DEVICE, dtype=dtype)
    h0 = torch.zeros(batch, units, device=DEVICE, dtype=dtype)
    c0 = torch.zeros(batch, units, device=DEVICE, dtype=dtype)
    kernel = torch.randn(units, 4 * units, device=DEVICE, dtype=dtype) / units**0.5
    params = dict(
        reverse=False, activation="tanh", recurrent_activation="sigmoid", zero_output_for_mask=False
    )
    # The recurrent products dominate: 2*B*U*4U per step forward, twice that backward.
    flops = 2.0 * steps * batch * units * 4 * units
    all_h, _, _, gates, cells = PRIMITIVES["lstm"].impl(x_proj, h0, c0, kernel, None, **params)
    g_all = torch.randn_like(all_h)
    grad_vals = [g_all, torch.zeros_like(h0), torch.zeros_like(c0), h0, c0, kernel, None]
    return [
        (label, "lstm", [x_proj, h0, c0, kernel, None], params, flops),
        (label + " backward", "lstm_grad", grad_vals + [all_h, gates, cells], params, 2 * flops),
    ]


def xent_case(dtype, label, rows, classes):
    x = torch.randn(rows, classes, device=DEVICE, dtype=dtype) * 3
    y = torch.randint(0, classes, (rows,), device=DEVICE)
    g = torch.ones(rows, device=DEVICE, dtype=dtype)
    probs = torch.softmax(x.float(), -1).to(dtype)
    sparse = {"sparse": True}
    return [
        (label, "softmax_cross_entropy", [x, y], sparse, 4.0 * rows * classes),
        (
            label + " grad",
            "softmax_cross_entropy_grad",
            [g, probs, y],
            sparse,
            2.0 * rows * classes,
        ),
    ]


def matmul_cases(dtype):
    c = matmul_case
    return [
        c(dtype, "Dense 128x784 @ 784x512 +relu", 128, 784, 512, activation="relu"),
        c(dtype, "Dense 128x512 @ 512x10", 128, 512, 10),
        c(dtype, "Dense 1024x4096 @ 4096x4096 +gelu", 1024, 4096, 4096, activation="gelu"),
        c(dtype, "MobileNet 1x1 112*112x32 @ 32x64", 112 * 112, 32, 64, activation="relu6"),
        c(dtype, "MobileNet 1x1 56*56x128 @ 128x128", 56 * 56, 128, 128, activation="relu6"),
        c(dtype, "MobileNet 1x1 14*14x512 @ 512x512", 14 * 14, 512, 512, activation="relu6"),
        c(dtype, "MobileNet 1x1 b32 7*7x1024 @ 1024x1024", 32 * 7 * 7, 1024, 1024),
        c(
            dtype,
            "InceptionV3 1x1 b32 35*35x192 @ 192x64",
            32 * 35 * 35,
            192,
            64,
            activation="relu",
        ),
        c(
            dtype,
            "InceptionV3 1x1 b32 17*17x768 @ 768x192",
            32 * 17 * 17,
            768,
            192,
            activation="relu",
        ),
        c(
            dtype,
            "InceptionV3 1x1 b32 8*8x2048 @ 2048x320",
            32 * 8 * 8,
            2048,
            320,
            activation="relu",
        ),
        c(dtype, "LSTM input projection 64*50x256 @ 256x1024", 64 * 50, 256, 1024),
        c(dtype, "LSTM recurrent step 64x256 @ 256x1024", 64, 256, 1024, bias=False),
        # Small M with K and N in the thousands: the launcher splits K.
        c(dtype, "LSTM recurrent step 64x1024 @ 1024x4096", 64, 1024, 4096, bias=False),
        c(dtype, "Dense 128x4096 @ 4096x1024 +relu", 128, 4096, 1024, activation="relu"),
    ]


def conv_cases(dtype):
    c = conv_case
    return [
        c(dtype, "MobileNet conv1 b32 3x3/2 224x224x3->32", 32, 224, 224, 3, 3, 3, 32, stride=2),
        c(dtype, "MobileNet dw b32 3x3 112x112x32", 32, 112, 112, 32, 3, 3, 32, groups=32),
        c(
            dtype,
            "MobileNet pw b32 1x1 112x112x32->64",
            32,
            112,
            112,
            32,
            1,
            1,
            64,
            activation="relu6",
        ),
        c(
            dtype,
            "MobileNet dw b32 3x3/2 28x28x256",
            32,
            28,
            28,
            256,
            3,
            3,
            256,
            stride=2,
            groups=256,
        ),
        c(
            dtype,
            "InceptionV3 b32 3x3 147x147x32->64",
            32,
            147,
            147,
            32,
            3,
            3,
            64,
            activation="relu",
        ),
        c(dtype, "InceptionV3 b32 5x5 35x35x48->64", 32, 35, 35, 48, 5, 5, 64, activation="relu"),
        c(
            dtype,
            "InceptionV3 b32 1x7 17x17x128->128",
            32,
            17,
            17,
            128,
            1,
            7,
            128,
            activation="relu",
        ),
        c(dtype, "InceptionV3 b32 3x3 8x8x448->384", 32, 8, 8, 448, 3, 3, 384, activation="relu"),
    ]


def lstm_cases(dtype):
    return [
        lstm_case(dtype, "LSTM b64 t50 u256", 64, 50, 256),
        lstm_case(dtype, "LSTM b32 t100 u128", 32, 100, 128),
        lstm_case(dtype, "LSTM b128 t20 u512", 128, 20, 512),
        lstm_case(dtype, "LSTM b64 t50 u32", 64, 50, 32),  # recurrent kernel on chip
        lstm_case(dtype, "LSTM b16 t20 u2048", 16, 20, 2048),  # a launch per step
    ]


LSTM_CUDNN_CASES = [("LSTM b64 t50 u256", 64, 50, 256), ("LSTM b32 t100 u128", 32, 100, 128)]
_LSTM_PARAMS = dict(
    reverse=False, activation="tanh", recurrent_activation="sigmoid", zero_output_for_mask=False
)


class LstmLayer:
    """One LSTM layer's operands on `device`, and its forward+backward three ways: keratron's
    routes (`ours`), the `lstm` primitive's torch implementation (`reference`), and torch's
    `nn.LSTM` under autograd (`cudnn`, cuDNN on CUDA). Input features = units; h0 = c0 = 0;
    the gradient of the sum of all outputs times a fixed random cotangent."""

    def __init__(self, dtype, batch, steps, units, device=DEVICE):
        gen = torch.Generator().manual_seed(0)
        self.shape = batch, steps, units
        self.module = torch.nn.LSTM(units, units, batch_first=True).to(device, dtype)
        self.x = torch.randn(batch, steps, units, generator=gen).to(device, dtype)
        self.g = torch.randn(batch, steps, units, generator=gen).to(device, dtype)
        m = self.module
        # torch's gate order (i, f, g, o) is Keras's (i, f, c, o): the weights transpose over.
        self.kernel = m.weight_ih_l0.detach().t().contiguous()
        self.recurrent = m.weight_hh_l0.detach().t().contiguous()
        self.bias = (m.bias_ih_l0 + m.bias_hh_l0).detach()
        self.h0 = torch.zeros(batch, units, device=device, dtype=dtype)

    def ours(self, lstm, lstm_grad):
        """Forward and backward through the routes `lstm` and `lstm_grad`; returns
        (all_h, dx, d kernel, d recurrent kernel, d bias)."""
        b, t, u = self.shape
        x2 = self.x.reshape(b * t, u)
        proj = torch.addmm(self.bias, x2, self.kernel).view(b, t, 4 * u)
        h0 = self.h0
        all_h, _, _, gates, cells = lstm(proj, h0, h0, self.recurrent, None, **_LSTM_PARAMS)
        dproj, _, _, drec = lstm_grad(self.g, h0, h0, h0, h0, self.recurrent, None, all_h,
                                      gates, cells, **_LSTM_PARAMS)  # fmt: skip
        dproj = dproj.reshape(b * t, 4 * u)
        dx = (dproj @ self.kernel.t()).view(b, t, u)
        return all_h, dx, x2.t() @ dproj, drec, dproj.sum(0)

    def reference(self):
        return self.ours(PRIMITIVES["lstm"].impl, PRIMITIVES["lstm_grad"].impl)

    def cudnn(self):
        """nn.LSTM forward and backward; returns what `ours` returns, in keratron's layouts."""
        m = self.module
        m.zero_grad(set_to_none=True)
        x = self.x.detach().requires_grad_(True)
        out, _ = m(x)
        out.backward(self.g)
        return (out.detach(), x.grad, m.weight_ih_l0.grad.t(), m.weight_hh_l0.grad.t(),
                m.bias_ih_l0.grad)  # fmt: skip


_GRAD_NAMES = ("all_h", "dx", "dkernel", "drecurrent", "dbias")


def _rel_errors(got, want) -> str:
    out = []
    for name, a, b in zip(_GRAD_NAMES, got, want):
        scale = float(b.abs().max()) or 1.0
        out.append(f"{name} {float((a.double() - b.double()).abs().max()) / scale:.1e}")
    return ", ".join(out)


@contextlib.contextmanager
def _lstm_plan(kernels, name):
    """Runs the LSTM routes under plan `name` ("resident", "streamed", "steps") whatever the
    size, by swapping the kernel module's `plan` for the scope. The routes' launch caches are
    emptied on entry and exit: a signature cached under one plan would replay it."""
    from keratron.triton_kernels._common import forget_launches

    original = kernels.plan
    kernels.plan = lambda units, dtype: name
    forget_launches()
    try:
        yield
    finally:
        kernels.plan = original
        forget_launches()


def _time_plan(layer, lstm, lstm_grad, do_bench) -> tuple:
    """(results, fwd+bwd ms, recurrence forward ms, recurrence backward ms) of `layer.ours`."""
    b, t, u = layer.shape
    h0, rec = layer.h0, layer.recurrent
    with torch.no_grad():
        got = layer.ours(lstm, lstm_grad)
        ms = do_bench(lambda: layer.ours(lstm, lstm_grad))
        proj = torch.randn(b, t, 4 * u, device=h0.device, dtype=h0.dtype)
        fwd = lstm(proj, h0, h0, rec, None, **_LSTM_PARAMS)
        ms_f = do_bench(lambda: lstm(proj, h0, h0, rec, None, **_LSTM_PARAMS))
        bwd_args = (layer.g, h0, h0, h0, h0, rec, None, fwd[0], fwd[3], fwd[4])
        ms_b = do_bench(lambda: lstm_grad(*bwd_args, **_LSTM_PARAMS))
    return got, ms, ms_f, ms_b


def lstm_cudnn_case(label, batch, steps, units, dtype, do_bench) -> None:
    """Prints one LstmLayer's timings: keratron (the plan its routes pick, then a launch per
    step), each called from the host and replayed as a CUDA graph, and cuDNN, each
    forward+backward in ms, their ratio, and the errors against cuDNN."""
    from keratron.triton_kernels import load

    layer = LstmLayer(dtype, batch, steps, units)
    lstm, lstm_grad = load_route("lstm"), load_route("lstm_grad")
    if lstm is None or lstm_grad is None:
        return
    kernels = load("_lstm")
    ms_cudnn = do_bench(layer.cudnn)
    want = layer.cudnn()
    print(f"  {label:<22} cuDNN nn.LSTM fwd+bwd {ms_cudnn:8.3f} ms")
    for name in dict.fromkeys([kernels.plan(units, dtype), "steps"]):
        with _lstm_plan(kernels, name):
            got, ms, ms_f, ms_b = _time_plan(layer, lstm, lstm_grad, do_bench)
        print(
            f"  {label:<22} keratron ({name:>8}) fwd+bwd {ms:8.3f} ms | cuDNN / keratron "
            f"{ms_cudnn / ms:5.2f} | recurrence fwd {ms_f:7.3f} ms bwd {ms_b:7.3f} ms"
        )
        print(f"  {'':<22} rel. err vs cuDNN: {_rel_errors(got, want)}")
        with _lstm_plan(kernels, name):
            graphed = _time_graphed(layer, lstm, lstm_grad, do_bench)
        if isinstance(graphed, str):
            print(f"  {label:<22} keratron ({name:>8}) in a CUDA graph: not captured ({graphed})")
        else:
            print(
                f"  {label:<22} keratron ({name:>8}) in a CUDA graph fwd+bwd {graphed:8.3f} ms | "
                f"cuDNN / keratron {ms_cudnn / graphed:5.2f}"
            )


def _time_graphed(layer, lstm, lstm_grad, do_bench):
    """ms of one replay of `layer.ours` captured as a CUDA graph (what a compiled `fit` step
    replays: the host launches nothing per kernel), or why the capture failed."""
    try:
        with torch.no_grad():
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for _ in range(2):
                    layer.ours(lstm, lstm_grad)
            torch.cuda.current_stream().wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                layer.ours(lstm, lstm_grad)
            return do_bench(graph.replay)
    except Exception as e:  # noqa: BLE001 - reported in the table, the run goes on
        return f"{type(e).__name__}: {str(e)[:120]}"


def lstm_cudnn_dry_run(dtype) -> int:
    """The comparison's set-up and arithmetic on CPU tensors: the primitive's torch
    implementation (what the routes are tested against) must match nn.LSTM."""
    worst = 0.0
    for label, batch, steps, units in LSTM_CUDNN_CASES:
        small = max(batch // 8, 1), max(steps // 10, 1), max(units // 16, 1)
        layer = LstmLayer(dtype, *small, device="cpu")
        got, want = layer.reference(), layer.cudnn()
        print(f"  {label} at b{small[0]} t{small[1]} u{small[2]}: {_rel_errors(got, want)}")
        for a, b in zip(got, want):
            worst = max(worst, float((a - b).abs().max()) / (float(b.abs().max()) or 1.0))
    print(f"  largest relative error {worst:.1e}")
    return 0 if worst < 1e-4 else 1


def xent_cases(dtype):
    return [
        xent_case(dtype, f"softmax-xent {rows}x{classes}", rows, classes)
        for rows, classes in ((128, 10), (256, 1000), (64, 50000), (4096, 32000))
    ]


# Family -> builder of a list of case lists (built lazily: one family's tensors at a time).
FAMILIES = {
    "matmul": matmul_cases,
    "conv": conv_cases,
    "lstm": lstm_cases,
    "xent": xent_cases,
    "lstm_cudnn": None,  # lstm_cudnn_case over LSTM_CUDNN_CASES
}


# ------------------------------------------------------------------------------ timing
def dry_run_case(label, op, vals, params, flops) -> bool:
    """Calls the route of one case on meta tensors while the launch specs record (as on a
    132-SM H100); prints the kernels it would launch. False when the route declines."""
    from keratron.triton_kernels._common import record_launches

    route = load_route(op)
    if route is None:
        return True
    with torch.no_grad(), record_launches(132) as launches:
        try:
            route(*vals, **params)
        except NotImplementedError as e:
            print(f"  [unsupported] {label}: {e}")
            return False
    kernels = []
    for kernel, _, meta in launches:
        tiles = [f"{k[6:]}{v}" for k, v in meta.items() if k.startswith("BLOCK_")]
        warps = f" w{meta['num_warps']} s{meta['num_stages']}" if "num_warps" in meta else ""
        kernels.append(f"{kernel.name}[{' '.join(tiles)}{warps}]")
    print(f"  {label:<46} {flops / 1e9:9.3f} GFLOP | {', '.join(kernels)}")
    return bool(launches)


def run_case(label, op, vals, params, flops, do_bench, results=None) -> None:
    route = load_route(op)
    if route is None:
        return
    impl = PRIMITIVES[op].impl
    with torch.no_grad():
        try:
            got = _flatten(route(*vals, **params))
        except NotImplementedError as e:
            print(f"  [unsupported] {label}: {e}")
            return
        ref = _flatten(impl(*vals, **params))
        floats = [(g, r) for g, r in zip(got, ref) if r.is_floating_point() and r.numel()]
        scale = max((float(r.abs().max()) for _, r in floats), default=0.0) or 1.0
        err = max((float((g.float() - r.float()).abs().max()) for g, r in floats), default=0.0)
        err /= scale
        ms_k = do_bench(lambda: route(*vals, **params))
        ms_t = do_bench(lambda: impl(*vals, **params))
    nbytes = _nbytes(*vals) + _nbytes(*ref)
    if results is not None:
        results.append(
            dict(op=op, case=_base_label(label), triton_us=ms_k * 1e3, torch_us=ms_t * 1e3)
        )
    print(
        f"  {label:<46} triton {flops / ms_k * 1e-9:8.2f} TFLOP/s {nbytes / ms_k * 1e-6:8.1f} GB/s"
        f" | torch {flops / ms_t * 1e-9:8.2f} TFLOP/s {nbytes / ms_t * 1e-6:8.1f} GB/s"
        f" | ratio {ms_t / ms_k:5.2f} | rel. err {err:.1e}"
    )


def _base_label(label: str) -> str:
    """The case label shared by a primitive's forward and backward (the roofline's key)."""
    for suffix in (" grad-input", " grad-filter", " backward", " grad"):
        if label.endswith(suffix):
            return label[: -len(suffix)]
    return label


def write_json(path: str, dtype: str, device: str, results: list) -> None:
    """Writes the times as `tools.kernels_aot --measured` reads them."""
    import json

    with open(path, "w") as f:
        json.dump(dict(device=device, dtype=dtype, results=results), f, indent=1)


def dry_run(dtype, families) -> int:
    """`dry_run_case` over every case of `families` (matmul, conv, xent) on meta tensors."""
    global DEVICE
    previous, DEVICE = DEVICE, "meta"
    ok = True
    try:
        for family in families:
            print(f"{family}:")
            for cases in FAMILIES[family](dtype):
                for case in cases:
                    ok = dry_run_case(*case) and ok
    finally:
        DEVICE = previous
    return 0 if ok else 1


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dtype", choices=sorted(_DTYPES), default="float32")
    parser.add_argument("--only", choices=sorted(FAMILIES), action="append", help="repeatable")
    parser.add_argument("--ieee", action="store_true", help="float32 products without TF32")
    parser.add_argument(
        "--dry-run", action="store_true", help="check the set-up on CPU (no timing)"
    )
    parser.add_argument("--json", help="also write the times to this JSON file")
    args = parser.parse_args(argv)
    if args.dry_run:
        if args.only == ["lstm_cudnn"]:
            return lstm_cudnn_dry_run(torch.float64)
        families = args.only or ["matmul", "conv", "xent"]
        if set(families) - {"matmul", "conv", "xent"}:
            parser.error(
                "--dry-run checks lstm_cudnn alone, or any of matmul, conv and xent. "
                f"Received: --only {families}"
            )
        return dry_run(_DTYPES[args.dtype], families)
    if not torch.cuda.is_available():
        print(
            "bench/kernels_gpu.py: CUDA is not available on this machine; these benchmarks "
            "time Triton kernels on a GPU. (On CPU the kernels are checked by the interpreter "
            "tests: TRITON_INTERPRET=1 pytest tests/triton_kernels.)",
            file=sys.stderr,
        )
        return 1
    from triton.testing import do_bench

    dtype = _DTYPES[args.dtype]
    # TF32 float32 products unless --ieee: one setting for the kernels and torch's cuBLAS /
    # cuDNN calls alike (the setter writes torch's TF32 flags too).
    keratron.config.set_float32_matmul_precision("ieee" if args.ieee else "tf32")
    print(f"{torch.cuda.get_device_name()}, {args.dtype}, torch {torch.__version__}")
    results = []
    for family in args.only or list(FAMILIES):
        print(f"{family}:")
        if family == "lstm_cudnn":
            for label, batch, steps, units in LSTM_CUDNN_CASES:
                lstm_cudnn_case(label, batch, steps, units, dtype, do_bench)
            continue
        for cases in FAMILIES[family](dtype):
            for case in cases:
                run_case(*case, do_bench, results)
        if args.json:  # after each family, so a run cut short keeps what it measured
            write_json(args.json, args.dtype, torch.cuda.get_device_name(), results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
