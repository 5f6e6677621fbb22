#!/usr/bin/env bash
# A sample of the suite, run as a user whose settings contradict the suite's own: a
# ~/.keras/keras.json naming the torch backend, float16 and channels_first (a Keras-on-torch
# user), KERAS_BACKEND and KERAS_HOME in the environment, and a KERATRON_* variable for every
# setting keratron reads. tests/conftest.py gives the suite its own KERAS_HOME and clears
# them, so the sample passes as it does in a clean environment. Run by `make test`.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
PYTEST="$PY -m pytest -q -p no:cacheprovider"
hostile=$(mktemp -d)
trap 'rm -rf "$hostile"' EXIT
mkdir -p "$hostile/.keras"
echo '{"backend": "torch", "floatx": "float16", "image_data_format": "channels_first"}' \
    >"$hostile/.keras/keras.json"
export HOME="$hostile" KERAS_BACKEND=torch TF_USE_LEGACY_KERAS=1
unset KERAS_HOME
export KERATRON_DEVICE=cuda KERATRON_KERNELS=triton KERATRON_FLOAT32_PRECISION=tf32 \
    KERATRON_HOST_MEMORY_CACHE=1 KERATRON_TRITON_PIN=1
# As `make test` runs them: the main suite without TRITON_INTERPRET, the Triton suite with it.
env -u TRITON_INTERPRET $PYTEST tests/test_import_state.py tests/utils/test_host_memory.py \
    tests/layers/test_convolutional.py tests/saving/test_keras_interop.py
TRITON_INTERPRET=1 $PYTEST -m triton tests/triton_kernels/test_routes.py
