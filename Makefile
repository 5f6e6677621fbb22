# Every target sets up .venv itself on first use.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
PYTEST := $(PY) -m pytest -q -p no:cacheprovider
SEPARATE := --ignore=tests/triton_kernels --ignore=tests/aot
# The Triton convolution routes' examples launch kernels: the Triton suite runs them under the
# interpreter (tests/triton_kernels/test_conv2d.py), not the CPU doctest run.
KERNEL_EXAMPLES := --ignore=keratron/triton_kernels/conv2d.py --ignore=keratron/triton_kernels/_conv2d.py

.PHONY: demo test test-fast test-extended test-hermetic lint bench clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[dev,tensorboard,interop]'
	touch $(STAMP)

demo: $(STAMP)
	$(PY) examples/demo.py

# The main suite runs in parallel; the Triton interpreter suite needs its own process
# (TRITON_INTERPRET=1 must be set before triton is imported).
# The Triton interpreter suite and the ahead-of-time compile suite each need a process of
# their own (TRITON_INTERPRET must be set, or unset, before triton is imported).
# Then every docstring example of the package (with the suite's environment, -p
# tests.conftest), and a sample of the suite under a hostile ~/.keras and KERATRON_* variables.
test: $(STAMP)
	$(PYTEST) -n 2 -m "not triton and not aot and not extended and not provenance" $(SEPARATE) tests
	TRITON_INTERPRET=1 $(PYTEST) -n 2 -m triton tests/triton_kernels
	@if ls tests/aot/test_*.py >/dev/null 2>&1; then $(PYTEST) -m aot tests/aot; fi
	$(PYTEST) -n 2 -p tests.conftest --doctest-modules $(KERNEL_EXAMPLES) keratron
	PY=$(PY) .ci/hermetic_sample.sh

# Every architecture variant of keras.applications against Keras, the full-size models and
# tf.keras 2's own writer, and the reruns under Keras and TensorFlow of the programs whose
# figures the suite records (tests/provenance.py): about 20 minutes of CPU on top of make test.
test-extended: $(STAMP)
	$(PYTEST) -n 2 -m "extended or provenance" $(SEPARATE) tests

test-hermetic: $(STAMP)
	PY=$(PY) .ci/hermetic_sample.sh

test-fast: $(STAMP)
	$(PYTEST) -n 2 -m "not slow and not triton and not aot" $(SEPARATE) tests

# Style, then the layering of ARCHITECTURE.md: import-linter's contracts (pyproject.toml) and
# no import of another package's private names (tools/check_private_imports.py).
lint: $(STAMP)
	$(PY) -m ruff check keratron tests bench examples tools
	$(PY) -m ruff format --check keratron tests bench examples tools
	$(VENV)/bin/lint-imports --no-cache
	$(PY) tools/check_private_imports.py

# The keras3-tf and tf.keras columns need .venv-peers (TensorFlow); if it cannot be built,
# those columns read n/a and the others still run.
bench: $(STAMP)
	@PYTHON=$(PYTHON) sh bench/setup_peers.sh || echo "bench: continuing without .venv-peers"
	$(PY) bench/op_overhead.py
	$(PY) bench/run.py

clean:
	rm -rf $(VENV) build *.egg-info

# Every Triton kernel compiled ahead of time for sm_90 and sm_80 (no GPU needed): registers,
# spills, shared memory and occupancy per kernel config and target, then the roofline of the
# benchmark shapes on H100 SXM and PCIe. Compiles are cached; a second run reads the cache.
.PHONY: kernels-report
kernels-report: $(STAMP)
	env -u TRITON_INTERPRET $(PY) -m tools.kernels_aot
