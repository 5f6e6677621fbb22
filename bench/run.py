"""Side-by-side training and inference benchmarks: keratron against PyTorch and Keras.

Each (workload, framework) measurement runs in a fresh process (bench/workloads.py) under
the right interpreter: the project's venv for keratron, torch, torch-compile, keras3-torch
and keras3-jax, and .venv-peers (made by bench/setup_peers.sh) for keras3-tf, tf.keras and
tf-compat-v1.
Every process gets the same thread budget (intra-op threads as given, one inter-op thread).
Frameworks take turns within a round, in an order that rotates from round to round, and the
best of the rounds is kept. One line per workload:

    mlp keratron=1234.5 torch=2345.6 keras3-torch=... keras3-tf=... tf.keras=... ratio=0.53

in samples per second of the timed epoch (higher is better); ratio is keratron over the best
other framework. Below it, the peak resident memory (ru_maxrss) of each framework's process.
A framework that cannot run shows `n/a`, and the reason is printed. The results also go to
bench/results/latest.json.

With `--co-runner 1,cores` each measurement also runs beside that many busy processes (a
Python loop each, started just before the measurement and stopped after it; `cores` is one per
CPU), the same for every framework, taking turns with the quiet run; the lines for that load
give each framework's speed and, in parentheses, its share of its own quiet speed.

Run: `python bench/run.py` (all workloads, 3 rounds); `--quick` for a fast smoke run;
`--check` to verify that every implementation trains and that model sizes agree.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)

from workloads import (  # noqa: E402
    FRAMEWORKS,
    PEER_FRAMEWORKS,
    RESULT_PREFIX,
    WORKLOADS,
    applies,
)

DEFAULT_WORKLOADS = ("tiny", "mlp", "cnn", "lstm", "predict", "tf1-mlp")
APPLICATION_WORKLOADS = ("mobilenet", "inception_v3", "mobilenet_train")
PEERS_VENV = os.path.join(REPO, ".venv-peers")
PEERS_LOG = os.path.join(HERE, "results", "peers-setup.log")
DEFAULT_JSON = os.path.join(HERE, "results", "latest.json")


def keratron_applications() -> list[str]:
    """The application workloads whose builder keratron.applications already provides."""
    sys.path.insert(0, REPO)
    try:
        import keratron.applications as apps
    except Exception:  # noqa: BLE001 - any failure means "not available yet"
        return []
    finally:
        sys.path.remove(REPO)
    return [w for w in APPLICATION_WORKLOADS if hasattr(apps, WORKLOADS[w].application)]


def peers_python() -> tuple[str | None, str | None]:
    """(interpreter, None) for the peers venv, or (None, why it cannot be used)."""
    python = os.path.join(PEERS_VENV, "bin", "python")
    if os.path.isfile(os.path.join(PEERS_VENV, ".installed-stamp")) and os.access(python, os.X_OK):
        return python, None
    reason = "peers venv .venv-peers is not set up (make bench runs bench/setup_peers.sh)"
    if os.path.isfile(PEERS_LOG):
        with open(PEERS_LOG, encoding="utf-8", errors="replace") as f:
            failures = [ln.strip() for ln in f if ln.startswith("peers venv setup failed")]
        if failures:
            reason = failures[-1]
    return None, reason


def child_env(threads: int, omp_passive: bool = False) -> dict:
    env = dict(os.environ)
    for var in ("KERAS_BACKEND", "TF_USE_LEGACY_KERAS", "PYTHONPATH", "OMP_WAIT_POLICY"):
        env.pop(var, None)
    if omp_passive:
        env["OMP_WAIT_POLICY"] = "PASSIVE"
    env.update(
        OMP_NUM_THREADS=str(threads),
        MKL_NUM_THREADS=str(threads),
        OPENBLAS_NUM_THREADS=str(threads),
        TF_NUM_INTRAOP_THREADS=str(threads),
        TF_NUM_INTEROP_THREADS="1",
        TF_CPP_MIN_LOG_LEVEL="2",
        CUDA_VISIBLE_DEVICES="",
        JAX_PLATFORMS="cpu",
        KERATRON_DEVICE="cpu",
    )
    return env


BUSY_LOOP = "while True: pass"


class CoRunners:
    """`n` busy processes (one Python loop each, as a CPU-bound job beside ours) for the
    duration of a `with` block; none when n is 0."""

    def __init__(self, n: int):
        self.n = n
        self.procs: list[subprocess.Popen] = []

    def __enter__(self):
        for _ in range(self.n):
            self.procs.append(
                subprocess.Popen(
                    [sys.executable, "-c", BUSY_LOOP],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            )
        if self.procs:
            time.sleep(0.3)  # past the interpreter's start: each one is spinning
        return self

    def __exit__(self, *exc):
        for proc in self.procs:
            proc.kill()
        for proc in self.procs:
            proc.wait()
        self.procs = []
        return False


def run_child(
    python: str, framework: str, workload: str, args, check: bool, co_runners: int = 0
) -> dict:
    """One measurement in a fresh process (beside `co_runners` busy processes); returns its
    record, with the peak RSS that the kernel reports for that child."""
    cmd = [python, os.path.join(HERE, "workloads.py"), "--framework", framework]
    cmd += ["--workload", workload, "--threads", str(args.threads), "--policy", args.policy]
    if args.quick or check:
        cmd.append("--quick")
    if check:
        cmd.append("--check")
    base = {"framework": framework, "workload": workload}
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, CoRunners(co_runners):
        proc = subprocess.Popen(
            cmd, stdout=out, stderr=err, env=child_env(args.threads, args.omp_passive), cwd=REPO
        )
        timed_out = threading.Event()

        def kill():
            timed_out.set()
            proc.kill()

        timer = threading.Timer(args.timeout, kill)
        timer.start()
        try:
            # wait4, not wait: its rusage is this one child's, so ru_maxrss is its own peak.
            _, status, usage = os.wait4(proc.pid, 0)
        finally:
            timer.cancel()
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout = out.read().decode(errors="replace")
        stderr = err.read().decode(errors="replace")
    record = None
    for line in stdout.splitlines():
        if line.startswith(RESULT_PREFIX):
            record = json.loads(line[len(RESULT_PREFIX) :])
    if proc.returncode != 0 or record is None:
        if timed_out.is_set():
            why = f"timed out after {args.timeout:g} s"
        elif proc.returncode < 0:
            why = f"killed by signal {-proc.returncode}"
        else:
            lines = [ln for ln in stderr.strip().splitlines() if ln.strip()]
            why = lines[-1] if lines else f"exit status {proc.returncode}, no result line"
        return {**base, "status": "failed", "reason": why}
    # Linux reports ru_maxrss in KiB.
    record["maxrss_mb"] = usage.ru_maxrss / 1024
    return record


def interpreters(frameworks) -> dict:
    """framework -> (python, None) or (None, reason)."""
    peers = peers_python()
    return {fw: peers if fw in PEER_FRAMEWORKS else (sys.executable, None) for fw in frameworks}


def fmt(value, digits=1) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def summarise(workload: str, frameworks, records: dict, quiet: dict | None = None) -> dict:
    """Best-of-rounds speed and peak memory per framework, and keratron's ratio; with `quiet`
    (the quiet run's summary), each framework's share of its quiet speed too."""
    summary = {"frameworks": {}, "ratio": None}
    for fw in frameworks:
        runs = records[fw]
        ok = [r for r in runs if r.get("status") == "ok"]
        entry = {"runs": runs}
        if ok:
            best = max(ok, key=lambda r: r["samples_per_s"])
            entry.update(
                status="ok",
                samples_per_s=best["samples_per_s"],
                maxrss_mb=max(r["maxrss_mb"] for r in ok),
                version=best.get("version"),
            )
        else:
            entry.update(status=runs[-1]["status"], reason=runs[-1].get("reason"))
        summary["frameworks"][fw] = entry
    if quiet is not None:
        for fw, entry in summary["frameworks"].items():
            base = quiet["frameworks"][fw].get("samples_per_s")
            if entry.get("samples_per_s") is not None and base:
                entry["of_quiet"] = entry["samples_per_s"] / base
    speeds = {fw: e.get("samples_per_s") for fw, e in summary["frameworks"].items()}
    peers = [v for fw, v in speeds.items() if fw != "keratron" and v is not None]
    if speeds.get("keratron") is not None and peers:
        summary["ratio"] = speeds["keratron"] / max(peers)
    return summary


def report_line(workload: str, frameworks, summary: dict, label: str = "") -> str:
    fws = summary["frameworks"]

    def speed(fw):
        share = fws[fw].get("of_quiet")
        return fmt(fws[fw].get("samples_per_s")) + ("" if share is None else f" ({share:.0%})")

    speeds = " ".join(f"{fw}={speed(fw)}" for fw in frameworks)
    lines = [f"{workload}{label} {speeds} ratio={fmt(summary['ratio'], 2)}"]
    rss = " ".join(f"{fw}={fmt(fws[fw].get('maxrss_mb'), 0)}" for fw in frameworks)
    lines.append(f"  peak RSS MB: {rss}")
    for fw in frameworks:
        if fws[fw]["status"] != "ok":
            lines.append(f"  {fw} {fws[fw]['status']}: {fws[fw].get('reason')}")
    return "\n".join(lines)


def busy_warning() -> str | None:
    """A warning when other work is already loading the machine. PyTorch's OpenMP threads
    spin while they wait for work, so on an oversubscribed CPU the torch-based columns
    (keratron, torch, keras3-torch) lose far more than TensorFlow's thread pool does."""
    try:
        load = os.getloadavg()[0]
    except OSError:
        return None
    cpus = os.cpu_count() or 1
    if load < 0.5 * cpus:
        return None
    return (
        f"# warning: load average {load:.1f} on {cpus} CPUs before starting; timings are "
        "noisy, torch-based ones most (OpenMP spin-waits): use a quiet machine, or "
        "--omp-passive to compare under load"
    )


def bench(args, workloads, frameworks) -> dict:
    paths = interpreters(frameworks)
    print(
        f"# samples/s of one timed epoch (higher is better), best of {args.rounds} round(s), "
        f"{args.threads} intra-op thread(s) per process{', quick' if args.quick else ''}"
        f"{', OMP_WAIT_POLICY=PASSIVE' if args.omp_passive else ''}"
        f"{', policy ' + args.policy if args.policy != 'float32' else ''}",
        flush=True,
    )
    if args.co_runner:
        print(f"# and beside {' and '.join(map(str, args.co_runner))} busy process(es)")
    warning = None if args.omp_passive else busy_warning()
    if warning:
        print(warning, flush=True)
    loads = [0, *args.co_runner]
    results = {}
    all_frameworks = frameworks
    for workload in workloads:
        frameworks = [fw for fw in all_frameworks if applies(fw, workload)]
        records = {(fw, n): [] for fw in frameworks for n in loads}
        for rnd in range(args.rounds):
            # Rotate who goes first, so no framework always runs on a cold (or warm) machine;
            # each framework's quiet and loaded runs take turns.
            k = rnd % len(frameworks)
            for fw in frameworks[k:] + frameworks[:k]:
                for n in loads if rnd % 2 == 0 else loads[::-1]:
                    python, reason = paths[fw]
                    runs = records[fw, n]
                    if python is None:
                        if not runs:
                            runs.append({"status": "n/a", "reason": reason})
                        continue
                    if runs and runs[-1].get("status") != "ok":
                        continue  # n/a or crashed: another round would say the same
                    runs.append(run_child(python, fw, workload, args, False, co_runners=n))
        quiet = summarise(workload, frameworks, {fw: records[fw, 0] for fw in frameworks})
        results[workload] = quiet
        print(report_line(workload, frameworks, quiet), flush=True)
        for n in args.co_runner:
            loaded = summarise(
                workload, frameworks, {fw: records[fw, n] for fw in frameworks}, quiet
            )
            quiet.setdefault("co_runner", {})[str(n)] = loaded
            label = f" +{n} busy"
            print(report_line(workload, frameworks, loaded, label), flush=True)
    return results


def check(args, workloads, frameworks) -> tuple[dict, bool]:
    """Quick run of each implementation: params, loss before/after one epoch. Returns the
    records and whether everything that ran was consistent."""
    paths = interpreters(frameworks)
    good = True
    results = {}
    print(f"{'workload':<17}{'framework':<14}{'params':>10}{'trainable':>11}  result")
    for workload in workloads:
        rows = {}
        for fw in (f for f in frameworks if applies(f, workload)):
            python, reason = paths[fw]
            rec = (
                {"status": "n/a", "reason": reason}
                if python is None
                else run_child(python, fw, workload, args, check=True)
            )
            rows[fw] = rec
            if rec.get("status") != "ok":
                note = f"{rec.get('status')}: {rec.get('reason')}"
                good &= rec.get("status") == "n/a"
            elif "loss_before" in rec:
                fell = rec["loss_after"] < rec["loss_before"]
                good &= fell
                note = (
                    f"loss {rec['loss_before']:.4f} -> {rec['loss_after']:.4f} "
                    f"{'falls' if fell else 'DOES NOT FALL'}"
                )
            else:
                note = f"output shape {tuple(rec['output_shape'])}"
            params = rec.get("params", "")
            trainable = rec.get("trainable_params", "")
            print(f"{workload:<17}{fw:<14}{params:>10}{trainable:>11}  {note}", flush=True)
        ok = [r for r in rows.values() if r.get("status") == "ok"]
        for key in ("params", "trainable_params", "output_shape"):
            values = {json.dumps(r.get(key)) for r in ok}
            if len(values) > 1:
                good = False
                print(f"  {workload}: {key} differ across frameworks: {sorted(values)}")
        results[workload] = rows
    print("check: all consistent" if good else "check: FAILED")
    return results, good


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--workloads",
        help=f"comma-separated, from {sorted(WORKLOADS)}; default: {','.join(DEFAULT_WORKLOADS)}"
        " plus the application workloads keratron.applications provides",
    )
    parser.add_argument(
        "--frameworks", default=",".join(FRAMEWORKS), help="comma-separated; default: all"
    )
    parser.add_argument("--rounds", type=int, default=3, help="the best round is kept")
    parser.add_argument("--quick", action="store_true", help="fewer samples and one round")
    parser.add_argument("--check", action="store_true", help="verify training and model sizes")
    parser.add_argument("--threads", type=int, default=2, help="intra-op threads per process")
    parser.add_argument(
        "--policy",
        default="float32",
        choices=("float32", "mixed_bfloat16"),
        help="dtype policy: Keras's global policy, torch.autocast to bfloat16 for the loops",
    )
    parser.add_argument(
        "--omp-passive",
        action="store_true",
        help="OMP_WAIT_POLICY=PASSIVE in every process (idle OpenMP threads sleep, not spin)",
    )
    parser.add_argument(
        "--co-runner",
        default="",
        metavar="N[,N...]",
        help="also run each measurement beside N busy processes ('cores': one per CPU), "
        "e.g. 1,cores; prints each framework's share of its quiet speed",
    )
    parser.add_argument("--timeout", type=float, default=1200, help="seconds per process")
    parser.add_argument("--json", default=DEFAULT_JSON, help="where to write the results")
    args = parser.parse_args(argv)

    if args.workloads:
        workloads = [w.strip() for w in args.workloads.split(",") if w.strip()]
    else:
        workloads = list(DEFAULT_WORKLOADS) + keratron_applications()
    frameworks = [f.strip() for f in args.frameworks.split(",") if f.strip()]
    for name, values, known in (
        ("workloads", workloads, WORKLOADS),
        ("frameworks", frameworks, FRAMEWORKS),
    ):
        unknown = [v for v in values if v not in known]
        if unknown or not values:
            parser.error(f"--{name}: expected names from {sorted(known)}, received {unknown}")
    try:
        args.co_runner = parse_co_runners(args.co_runner)
    except ValueError as e:
        parser.error(f"--co-runner: {e}")
    if args.quick:
        args.rounds = 1
    if args.rounds < 1:
        parser.error(f"--rounds: expected at least 1, received {args.rounds}")

    start = time.time()
    load_at_start = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    if args.check:
        results, good = check(args, workloads, frameworks)
    else:
        results, good = bench(args, workloads, frameworks), True
    meta = {
        "mode": "check" if args.check else "bench",
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "rounds": 1 if args.check else args.rounds,
        "quick": args.quick or args.check,
        "threads": args.threads,
        "policy": args.policy,
        "omp_wait_policy": "PASSIVE" if args.omp_passive else "default",
        "co_runners": args.co_runner,
        "loadavg_at_start": load_at_start,
        "machine": platform.machine(),
        "processor": _cpu_name(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "elapsed_s": round(time.time() - start, 1),
    }
    os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
    with open(args.json, "w", encoding="utf-8") as f:
        json.dump({"meta": meta, "results": results}, f, indent=1)
    return 0 if good else 1


def parse_co_runners(text: str) -> list[int]:
    """'1,cores' -> [1, os.cpu_count()]: how many busy processes each loaded run gets."""
    counts = []
    for item in filter(None, (t.strip() for t in text.split(","))):
        n = (os.cpu_count() or 1) if item == "cores" else int(item) if item.isdigit() else 0
        if n < 1:
            raise ValueError(f"expected positive integers or 'cores', received {item!r}")
        if n not in counts:
            counts.append(n)
    return counts


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


if __name__ == "__main__":
    sys.exit(main())
