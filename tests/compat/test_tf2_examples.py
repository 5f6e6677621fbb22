"""The TF2 guide programs in examples/tf2 run on keratron.compat.v2 and print what TensorFlow
2.20 (Keras 3.15.1) prints for the same program and data, recorded in tf2_examples_tf.json;
the `provenance` test reruns them under TensorFlow with only the imports changed (`make
test-extended`), and `make test` checks that neither a recording nor its program changed since
(`tests/provenance.py`).

The programs start from fixed weights and seeded NumPy data, so nothing depends on a random
draw of either framework: text and integers must match exactly, and printed floats within
`ATOL` (float32 sums over different orders; 0 where nothing is summed). Two exceptions, each
stated where it is checked: after its restart, checkpoints.py continues from the restored
model and optimizer as the guide describes, which TensorFlow 2.20 with Keras 3 does not do
(its unbuilt model is not given the saved values), so those three lines are compared with
TensorFlow's uninterrupted training; and `tf.estimator` left TensorFlow in 2.16, so the
premade estimator's figures are checked against the guide's claims.
"""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests import provenance
from tests.conftest import require_installed

HERE = os.path.dirname(__file__)
EXAMPLES = os.path.join(HERE, "..", "..", "examples", "tf2")
with open(os.path.join(HERE, "tf2_examples_tf.json")) as _f:
    TF = json.load(_f)

ATOL = {
    "eager_basics": 2e-4,
    "custom_gradient": 0.0,
    "checkpoints": 2e-4,
    "custom_train_step_in_tensorflow": 2e-4,
    "premade_estimator": 0.0,
}
# The fingerprint (tests/provenance.py) of each recording with its program and the converter, as
# `test_tensorflow_prints_the_recorded_figures` last passed on them.
CHECKED = {
    "checkpoints": "70433137e5730a65",
    "custom_gradient": "82a8b598237c61bd",
    "custom_train_step_in_tensorflow": "c8038cb112dc9dff",
    "eager_basics": "b540c478d95398a7",
    "premade_estimator": "d773593a0c5c3c75",
}
_FLOAT = re.compile(r"-?\d+\.\d+(?:e[-+]?\d+)?|nan|inf")


def _run(name, tensorflow=False, timeout=600):
    if tensorflow:
        cmd = [os.path.join(EXAMPLES, "run_with_tensorflow.py"), name]
    else:
        cmd = [os.path.join(EXAMPLES, name)]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", OMP_NUM_THREADS="1")
    out = subprocess.run([sys.executable, *cmd], cwd=EXAMPLES, env=env, capture_output=True,
                         text=True, timeout=timeout)  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout


def _assert_matches(got, want, atol):
    """Line by line: the text between floats equal, each float within `atol`."""
    got_lines, want_lines = got.strip().splitlines(), want.strip().splitlines()
    assert len(got_lines) == len(want_lines), got
    for g, w in zip(got_lines, want_lines):
        assert _FLOAT.split(g) == _FLOAT.split(w), (g, w)
        for a, b in zip(_FLOAT.findall(g), _FLOAT.findall(w)):
            assert a == b or abs(float(a) - float(b)) <= atol, (g, w)


def _resumed(tf_output):
    """TensorFlow's output with its resumed-run lines replaced by its uninterrupted ones."""
    lines = TF["checkpoints_uninterrupted"]
    return "\n".join(lines.get(line, line) for line in tf_output.splitlines())


@pytest.mark.parametrize(
    "name", ["eager_basics", "custom_gradient", "custom_train_step_in_tensorflow"]
)
def test_program_prints_what_tensorflow_prints(name):
    _assert_matches(_run(name + ".py"), TF[name], ATOL[name])


def test_checkpoints_resume_where_the_last_checkpoint_left_off():
    out = _run("checkpoints.py")
    _assert_matches(out, _resumed(TF["checkpoints"]), ATOL["checkpoints"])
    # Up to the first step after the restart both print the same, TensorFlow's own lines.
    tf_lines = TF["checkpoints"].splitlines()
    n = min(tf_lines.index(line) for line in TF["checkpoints_uninterrupted"] if line in tf_lines)
    assert n == 10 and out.splitlines()[:n] == tf_lines[:n]


@pytest.mark.slow
def test_premade_estimator_pipeline_and_guide_figures():
    lines = _run("premade_estimator.py").strip().splitlines()
    # TensorFlow 2.20 prints the input pipeline's lines, then that it has no tf.estimator.
    pipeline = TF["premade_estimator"].strip().splitlines()[:-1]
    assert TF["premade_estimator"].strip().splitlines()[-1].startswith("tf.estimator: not in")
    _assert_matches("\n".join(lines[: len(pipeline)]), "\n".join(pipeline), 0.0)
    (accuracy,) = [float(x.split()[-1]) for x in lines if x.startswith("Test set accuracy")]
    assert accuracy >= 0.9  # the guide reports 0.933 (real Iris, 5000 steps)
    assert "global step: 1000" in lines
    predicted = [re.match(r'Prediction is "(\w+)" \(([\d.]+)%\), expected "(\w+)"', x).groups()
                 for x in lines if x.startswith("Prediction")]  # fmt: skip
    assert [p[0] for p in predicted] == [p[2] for p in predicted] == [
        "Setosa", "Versicolor", "Virginica"
    ]  # fmt: skip
    assert all(float(p[1]) > 50.0 for p in predicted)


def _assert_checked(name):
    parts = (TF[name], ATOL[name], Path(EXAMPLES, name + ".py"),
             Path(EXAMPLES, "run_with_tensorflow.py"))  # fmt: skip
    provenance.assert_checked(
        CHECKED.get(name, ""), f"examples/tf2/{name}.py or its recording", "TensorFlow 2.20",
        *parts,
    )  # fmt: skip


@pytest.mark.parametrize("name", sorted(ATOL))
def test_recorded_figures_were_checked_on_this_program(name):
    _assert_checked(name)


@pytest.mark.interop
@pytest.mark.slow
@pytest.mark.provenance
@pytest.mark.parametrize("name", sorted(ATOL))
def test_tensorflow_prints_the_recorded_figures(name):
    _assert_checked(name)
    require_installed("tensorflow")
    _assert_matches(_run(name + ".py", tensorflow=True), TF[name], ATOL[name])
