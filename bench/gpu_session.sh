#!/bin/bash
# One call on a GPU machine: the Triton test suite on CUDA (bench/gpu_tests.sh), the kernel
# timings against torch (bench/kernels_gpu.py), an LSTM layer forward+backward against cuDNN's
# nn.LSTM (kernels_gpu.py --only lstm_cudnn), fit throughput (bench/gpu_fit.py) and the host
# time per Triton launch, end to end and with the CPU stand-in (bench/launch_overhead.py).
# The kernel timings run twice: float32 (TF32 dots on both sides) and bfloat16 (matmul, conv,
# softmax cross-entropy); each also writes $OUT/kernels_<dtype>.json, which
# `python -m tools.kernels_aot --roofline-only --measured <file>` prints beside the roofline.
# Logs go to $OUT (or ./gpu-logs); T_PIN, T_TUNED, T_KERN, T_BF16, T_LSTM, T_FIT and T_LAUNCH
# bound each part, and their defaults add up to 500 s (15 s more for the stand-in), under 9
# minutes in all.
OUT=${OUT:-gpu-logs}
export OUT
export T_PIN=${T_PIN:-110} T_TUNED=${T_TUNED:-110}
mkdir -p "$OUT"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
bash bench/gpu_tests.sh
timeout ${T_KERN:-100} python3 bench/kernels_gpu.py --json "$OUT/kernels_float32.json" \
    >"$OUT/kernels_f32.log" 2>&1
echo "kernels rc=$?"; cat "$OUT/kernels_f32.log"
timeout ${T_BF16:-40} python3 bench/kernels_gpu.py --dtype bfloat16 --only matmul --only xent \
    --only conv --json "$OUT/kernels_bfloat16.json" >"$OUT/kernels_bf16.log" 2>&1
echo "kernels bf16 rc=$?"; cat "$OUT/kernels_bf16.log"
timeout ${T_LSTM:-45} python3 bench/kernels_gpu.py --only lstm_cudnn >"$OUT/lstm_cudnn.log" 2>&1
echo "lstm vs cudnn rc=$?"; cat "$OUT/lstm_cudnn.log"
timeout ${T_FIT:-60} python3 bench/gpu_fit.py >"$OUT/fit.log" 2>&1
echo "fit rc=$?"; cat "$OUT/fit.log"
# Pinned configs: one compile per kernel; the launch path is the same at any config.
KERATRON_TRITON_PIN=1 timeout ${T_LAUNCH:-30} python3 bench/launch_overhead.py --device cuda \
    >"$OUT/launch_overhead.log" 2>&1
echo "launch overhead rc=$?"
KERATRON_TRITON_PIN=1 timeout 15 python3 bench/launch_overhead.py --device cpu \
    >>"$OUT/launch_overhead.log" 2>&1
echo "launch overhead (stand-in) rc=$?"; grep -v Warn "$OUT/launch_overhead.log"
