"""Figures recorded from Keras or TensorFlow, and the sources they were checked on.

Several tests compare keratron with figures that Keras 3.15.1 or TensorFlow 2.20 printed for the
same program (a keras-io script's accuracy, a TF1 program's numbers). Beside each, a test
marked `provenance` reruns the program under Keras or TensorFlow and checks that the recorded
figures are still what it prints: minutes of CPU, so `make test` leaves these reruns to
`make test-extended`. What `make test` checks instead is that nothing they depend on changed
since they last passed: each recorded figure is stored with the fingerprint of the figure and
of the sources it was checked on (`CHECKED` in its test module). Editing a program, its data,
the script that converts it for Keras or TensorFlow, or the figure itself changes the
fingerprint, and the fast test names the rerun to do and the fingerprint to record after it
passes; the provenance test checks the fingerprint too.
"""

import hashlib
from pathlib import Path


def fingerprint(*parts) -> str:
    """The first 16 hex digits of the sha256 of `parts` in order: a `Path` as its bytes, any
    other value as its repr (floats, strings and the dicts of recorded output alike)."""
    digest = hashlib.sha256()
    for part in parts:
        data = part.read_bytes() if isinstance(part, Path) else repr(part).encode()
        digest.update(len(data).to_bytes(8, "little"))
        digest.update(data)
    return digest.hexdigest()[:16]


def assert_checked(recorded: str, what: str, peer: str, *parts) -> None:
    """Fails unless `recorded` is the fingerprint of `parts`: `what` (its figures and sources)
    changed since its figures were last checked against `peer`."""
    now = fingerprint(*parts)
    assert now == recorded, (
        f"{what} changed since its recorded figures were last checked against {peer} "
        f"(fingerprint {recorded!r}, now {now!r}). Rerun the check under {peer} (`make "
        f"test-extended` runs the tests marked `provenance`), update the figures if they "
        f"moved, and once it passes record {now!r} in place of {recorded!r}."
    )
