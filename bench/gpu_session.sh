#!/bin/bash
# One call on a GPU machine: the Triton test suite on CUDA (pinned configs, then autotuned),
# the kernel benchmarks against torch, and fit throughput. Logs go to $OUT (or ./gpu-logs).
OUT=${OUT:-gpu-logs}
mkdir -p "$OUT"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
PYTEST="python3 -m pytest -q -p no:cacheprovider -m triton tests/triton_kernels"
KERATRON_DEVICE=cuda KERATRON_TRITON_PIN=1 timeout ${T_PIN:-200} $PYTEST >"$OUT/tests_pinned.log" 2>&1
echo "pinned tests rc=$?"; tail -25 "$OUT/tests_pinned.log"
timeout ${T_KERN:-200} python3 bench/kernels_gpu.py >"$OUT/kernels_f32.log" 2>&1
echo "kernels rc=$?"; cat "$OUT/kernels_f32.log"
timeout ${T_FIT:-120} python3 bench/gpu_fit.py >"$OUT/fit.log" 2>&1
echo "fit rc=$?"; cat "$OUT/fit.log"
