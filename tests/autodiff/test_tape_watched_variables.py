"""`GradientTape.watched_variables()` after the one `gradient` call of a non-persistent tape:
TensorFlow 2.20 still lists the variables read in the block then (and `reset` empties it)."""

import keratron


def test_watched_variables_survive_gradient_of_non_persistent_tape():
    x = keratron.Variable(2.0)
    with keratron.GradientTape() as tape:
        y = x * 3.0
    assert float(tape.gradient(y, x)) == 3.0
    assert tape.watched_variables() == (x,)  # TF: (x,) too
    tape.reset()
    assert tape.watched_variables() == ()
