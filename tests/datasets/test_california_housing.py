"""keras.datasets.california_housing, served from a local HTTP server (a small file in the
real layout) and compared with Keras's own loader reading the same file."""

import inspect

import numpy as np
import pytest

from keratron.datasets import california_housing
from tests.datasets.test_loaders import (  # noqa: F401 (server is a fixture)
    _assert_tree_equal,
    _keras_datasets,
    _npz,
    _publish,
    server,
)


def test_california_housing(server, monkeypatch):  # noqa: F811
    kd = _keras_datasets()
    source = inspect.getsource(kd.california_housing)
    for needle in (california_housing.FILE_HASH, "california_housing.npz"):
        assert needle in source
    assert inspect.signature(california_housing.load_data) == inspect.signature(
        kd.california_housing.load_data
    )
    rng = np.random.default_rng(7)
    x = rng.normal(size=(650, 8)).astype("float32")
    y = rng.uniform(2e4, 5e5, size=650).astype("float32")
    digest = _publish(server, "california_housing.npz", _npz(x=x, y=y))
    monkeypatch.setattr(california_housing, "ORIGIN_FOLDER", server.url)
    monkeypatch.setattr(california_housing, "FILE_HASH", digest)
    path = str(server.cache / "california_housing.npz")
    monkeypatch.setattr(kd.california_housing, "get_file", lambda *args, **kwargs: path)
    for args in [{}, {"version": "small"}, {"version": "small", "test_split": 0.3, "seed": 1}]:
        ours = california_housing.load_data(**args)
        _assert_tree_equal(ours, kd.california_housing.load_data(**args))
    assert ours[0][0].shape == (420, 8) and ours[1][1].shape == (180,)
    assert server.hits == ["/california_housing.npz"]  # downloaded once, then cached
    with pytest.raises(ValueError, match="Invalid `test_split` argument"):
        california_housing.load_data(test_split=1.0)
    with pytest.raises(ValueError, match="version=medium"):
        california_housing.load_data(version="medium")
