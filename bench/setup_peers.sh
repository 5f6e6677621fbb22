#!/bin/sh
# Builds .venv-peers, the interpreter for bench/run.py's keras3-tf and tf.keras columns:
# TensorFlow (CPU build), Keras 3 and tf-keras 2, pinned to releases that work together with
# numpy 2.x on Python 3.11. It is separate from .venv because TensorFlow and torch pin
# different versions of shared dependencies, and the benchmark must not disturb the project.
#
# Usage: sh bench/setup_peers.sh   (PYTHON, PEERS_VENV, PEERS_LOG may be set; run from the repo root)
# Exits 0 when the venv is ready (at once if it already holds these pins), 1 otherwise; the
# pip output and the reason go to bench/results/peers-setup.log, which bench/run.py quotes
# when it reports the peer columns as n/a.
set -u

PYTHON=${PYTHON:-python3}
VENV=${PEERS_VENV:-.venv-peers}
# tf-keras is installed without its dependencies: it asks for `tensorflow`, which would pull
# the full (CUDA-capable) TensorFlow wheel beside tensorflow-cpu, the same package twice.
PINS="tensorflow-cpu==2.20.0 keras==3.15.1"
NODEPS_PINS="tf-keras==2.20.1"
STAMP=$VENV/.installed-stamp
LOG=${PEERS_LOG:-bench/results/peers-setup.log}
WANT="$PINS $NODEPS_PINS"

# The keras3-jax column runs in the project's .venv, beside Keras 3 on torch: pyproject.toml's
# bench extra (jax[cpu]). If it cannot be installed, that column reads n/a.
JAX_LOG=$(dirname "$LOG")/jax-setup.log
if [ -x .venv/bin/python ] && ! .venv/bin/python -c "import jax" >/dev/null 2>&1; then
    mkdir -p "$(dirname "$LOG")"
    echo "Installing the bench extra (jax[cpu]) into .venv; log: $JAX_LOG"
    .venv/bin/python -m pip install -q -e '.[bench]' >"$JAX_LOG" 2>&1 \
        || echo "jax[cpu] did not install (see $JAX_LOG); keras3-jax will be n/a" >&2
fi

if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$WANT" ]; then
    exit 0
fi

mkdir -p "$(dirname "$LOG")"
echo "Setting up $VENV ($WANT); log: $LOG"
start=$(date +%s)
fail() {
    echo "peers venv setup failed: $1" >>"$LOG"
    echo "peers venv setup failed: $1 (see $LOG); keras3-tf and tf.keras will be n/a" >&2
    exit 1
}
: >"$LOG"
rm -f "$STAMP"
if [ ! -x "$VENV/bin/python" ]; then
    "$PYTHON" -m venv "$VENV" >>"$LOG" 2>&1 || fail "'$PYTHON -m venv $VENV' failed"
fi
PIP="$VENV/bin/python -m pip --disable-pip-version-check --timeout 60 --retries 2"
$PIP install -q --upgrade pip >>"$LOG" 2>&1 || fail "pip upgrade failed"
# shellcheck disable=SC2086
$PIP install -q $PINS >>"$LOG" 2>&1 || fail "pip install $PINS failed"
# shellcheck disable=SC2086
$PIP install -q --no-deps $NODEPS_PINS >>"$LOG" 2>&1 || fail "pip install $NODEPS_PINS failed"
TF_CPP_MIN_LOG_LEVEL=3 "$VENV/bin/python" -c "import tensorflow, keras, tf_keras" >>"$LOG" 2>&1 \
    || fail "the installed packages do not import together"
echo "$WANT" >"$STAMP"
size=$(du -sh "$VENV" | cut -f1)
echo "$VENV ready in $(($(date +%s) - start)) s, $size" | tee -a "$LOG"
