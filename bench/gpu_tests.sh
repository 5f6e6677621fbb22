#!/bin/bash
# On a GPU machine: the Triton test suite on CUDA tensors with each kernel's first config
# (pinned), the whole-step CUDA graph tests (capture, replay, bitwise against uncaptured) and
# fit/evaluate/predict on CUDA against CPU from the same weights, device placement, the
# compiled-against-eager interleavings (a schedule and loss scaling; batch norm under
# mixed_bfloat16) and the mixed-precision tests on CUDA, and,
# when T_TUNED is above 0, the Triton suite autotuned over every config. Everything goes to
# $OUT/tests.log (or ./gpu-logs/tests.log); failures and summaries are echoed.
OUT=${OUT:-gpu-logs}
mkdir -p "$OUT"
LOG="$OUT/tests.log"
: >"$LOG"
# The suite clears KERATRON_* (tests/conftest.py): KERATRON_TEST_<NAME> reaches it as
# KERATRON_<NAME>.
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 KERATRON_TEST_DEVICE=cuda
PYTEST="python3 -m pytest -q -p no:cacheprovider -m triton tests/triton_kernels"
summary() { grep -E "^(FAILED|ERROR)|passed|failed" "$LOG" | tail -${1:-20}; }
echo "== pinned" >>"$LOG"
KERATRON_TEST_TRITON_PIN=1 timeout ${T_PIN:-200} $PYTEST -n ${JOBS:-4} >>"$LOG" 2>&1
echo "pinned tests rc=$?"; summary
echo "== cuda graphs, fit on CUDA against CPU" >>"$LOG"
KERATRON_TEST_TRITON_PIN=1 timeout ${T_GRAPHS:-40} python3 -m pytest -q -p no:cacheprovider \
    tests/autodiff/test_cuda_graphs.py tests/models/test_cuda_fit_parity.py \
    tests/autodiff/test_device.py "tests/models/test_cached_state.py::test_random_interleaving_with_loss_scaling_and_a_schedule_matches_eager" \
    "tests/models/test_cached_state.py::test_random_interleaving_with_batch_norm_under_mixed_bfloat16_matches_eager" \
    tests/mixed_precision/test_mixed_precision.py "tests/ops/test_grad_nn.py::test_fused_batch_normalization_of_half_inputs_in_torchs_kernels" \
    >>"$LOG" 2>&1
echo "cuda graph and parity tests rc=$?"; tail -15 "$LOG"
if [ "${T_TUNED:-300}" -gt 0 ]; then
    echo "== autotuned" >>"$LOG"
    timeout ${T_TUNED:-300} $PYTEST -n ${JOBS:-4} >>"$LOG" 2>&1
    echo "autotuned tests rc=$?"; summary 10
fi
