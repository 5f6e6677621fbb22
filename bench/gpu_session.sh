#!/bin/bash
# One call on a GPU machine: the Triton test suite on CUDA (bench/gpu_tests.sh), the kernel
# timings against torch (bench/kernels_gpu.py) and fit throughput (bench/gpu_fit.py).
# Logs go to $OUT (or ./gpu-logs); T_PIN, T_TUNED, T_KERN and T_FIT bound each part, and
# their defaults add up to 440 s, so the whole call stays under 8 minutes.
OUT=${OUT:-gpu-logs}
export OUT
export T_PIN=${T_PIN:-110} T_TUNED=${T_TUNED:-150}
mkdir -p "$OUT"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
bash bench/gpu_tests.sh
timeout ${T_KERN:-120} python3 bench/kernels_gpu.py >"$OUT/kernels_f32.log" 2>&1
echo "kernels rc=$?"; cat "$OUT/kernels_f32.log"
timeout ${T_FIT:-60} python3 bench/gpu_fit.py >"$OUT/fit.log" 2>&1
echo "fit rc=$?"; cat "$OUT/fit.log"
