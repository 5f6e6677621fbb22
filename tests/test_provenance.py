"""The fingerprints that stand in for the reruns under Keras and TensorFlow in `make test`."""

import pytest

from tests import provenance


def test_a_fingerprint_changes_with_any_figure_or_source(tmp_path):
    script = tmp_path / "script.py"
    script.write_text("print('test accuracy: 0.95')\n")
    recorded = provenance.fingerprint(("test accuracy", 0.9529), script)
    assert recorded == provenance.fingerprint(("test accuracy", 0.9529), script)
    assert recorded != provenance.fingerprint(("test accuracy", 0.953), script)
    assert recorded != provenance.fingerprint(script, ("test accuracy", 0.9529))
    # Parts are delimited: moving text from one part to the next is a change.
    assert provenance.fingerprint("ab", "c") != provenance.fingerprint("a", "bc")
    script.write_text("print('test accuracy: 0.96')\n")
    assert recorded != provenance.fingerprint(("test accuracy", 0.9529), script)


def test_a_stale_fingerprint_names_the_rerun_and_the_new_value(tmp_path):
    program = tmp_path / "program.py"
    program.write_text("x = 1\n")
    recorded = provenance.fingerprint({"loss": 0.25}, program)
    provenance.assert_checked(recorded, "program.py", "TensorFlow 2.20", {"loss": 0.25}, program)
    program.write_text("x = 2\n")
    now = provenance.fingerprint({"loss": 0.25}, program)
    with pytest.raises(AssertionError, match="program.py changed") as info:
        provenance.assert_checked(
            recorded, "program.py", "TensorFlow 2.20", {"loss": 0.25}, program
        )
    assert now in str(info.value) and "make test-extended" in str(info.value)
