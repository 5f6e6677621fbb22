#!/bin/bash
# On a GPU machine: the Triton test suite on CUDA tensors, with each kernel's first config
# (pinned) and then autotuned over every config. Logs go to $OUT (or ./gpu-logs).
OUT=${OUT:-gpu-logs}
mkdir -p "$OUT"
# The suite clears KERATRON_* (tests/conftest.py): KERATRON_TEST_<NAME> reaches it as
# KERATRON_<NAME>.
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 KERATRON_TEST_DEVICE=cuda
PYTEST="python3 -m pytest -q -p no:cacheprovider -n ${JOBS:-4} -m triton tests/triton_kernels"
KERATRON_TEST_TRITON_PIN=1 timeout ${T_PIN:-200} $PYTEST >"$OUT/tests_pinned.log" 2>&1
echo "pinned tests rc=$?"; grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/tests_pinned.log" | tail -20
# Whole-step CUDA graph tests (capture, replay, bitwise against uncaptured): their seconds come out of T_TUNED's.
timeout ${T_GRAPHS:=40} python3 -m pytest -q -p no:cacheprovider tests/autodiff/test_cuda_graphs.py >"$OUT/tests_cuda_graphs.log" 2>&1; echo "cuda graph tests rc=$?"; tail -15 "$OUT/tests_cuda_graphs.log"; T_TUNED=$(( ${T_TUNED:-300} - T_GRAPHS ))
timeout ${T_TUNED:-300} $PYTEST >"$OUT/tests_tuned.log" 2>&1
echo "autotuned tests rc=$?"; grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/tests_tuned.log" | tail -20
