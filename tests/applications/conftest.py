"""The applications' slow tests (every architecture variant against Keras, full-size models,
tf.keras 2's own writer) are also marked `extended`: `make test` leaves them to
`make test-extended`, so that the suite stays within its time on two cores."""

import pytest


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.get_closest_marker("slow") is not None and "applications" in item.path.parts:
            item.add_marker(pytest.mark.extended)
