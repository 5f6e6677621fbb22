"""Hostile and broken files: declared shapes and dtypes checked before any data is read,
nothing half-loaded, zip bombs refused from the zip directory, every read failure naming the
file, unregistered class names refused, and the temporary files of killed saves cleaned up."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import tracemalloc
import zipfile

import h5py
import numpy as np
import pytest

import keratron
from keratron import layers


def _model(seed=0, units=3):
    model = keratron.Sequential(
        [
            keratron.Input((4,)),
            layers.Dense(5, name="d1"),
            layers.Dense(units, name="d2"),
        ],
        name="net",
    )
    rng = np.random.default_rng(seed)
    model.set_weights([rng.normal(size=tuple(w.shape)).astype("float32") for w in model.weights])
    return model


def _same(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)


def _datasets(path):
    """Paths of the datasets in an h5 file, in file order."""
    found = []
    with h5py.File(path, "r") as f:
        f.visititems(
            lambda name, obj: found.append(name) if isinstance(obj, h5py.Dataset) else None
        )
    return found


def _replace_dataset(path, name, **create):
    with h5py.File(path, "r+") as f:
        del f[name]
        f.create_dataset(name, **create)


def _rewrite_member(path, member, transform):
    """Rewrites one member of a zip archive through `transform(bytes) -> bytes`."""
    with zipfile.ZipFile(path) as zf:
        entries = [(info, zf.read(info)) for info in zf.infolist()]
    with zipfile.ZipFile(path, "w") as zf:
        for info, data in entries:
            zf.writestr(info, transform(data) if info.filename == member else data)


def _edit_keras_weights(path, tmp_path, edit):
    """Applies `edit(h5_path)` to the model.weights.h5 inside a .keras archive."""
    inner = str(tmp_path / "inner.weights.h5")

    def transform(data):
        with open(inner, "wb") as out:
            out.write(data)
        edit(inner)
        with open(inner, "rb") as f:
            return f.read()

    _rewrite_member(path, "model.weights.h5", transform)


def _last_weight(path):
    """The name of the dataset of the last layer's bias (written last by every format)."""
    return [n for n in _datasets(path) if "d2" in n or n.startswith("layers/dense_1")][-1]


# ------------------------------------------------------- defect 4: declared shapes trusted
@pytest.mark.parametrize("fmt", ["h5", "weights.h5"])
def test_huge_declared_shape_is_refused_before_reading(tmp_path, fmt):
    path = str(tmp_path / f"w.{fmt}")
    _model(0).save_weights(path)
    # A dataset declaring 10^6 x 10^6 float32 (3.6 TiB) that holds no data: the file is tiny.
    _replace_dataset(path, _datasets(path)[0], shape=(10**6, 10**6), dtype="f4")
    assert os.path.getsize(path) < 100_000
    target = _model(1)
    before = target.get_weights()
    tracemalloc.start()
    try:
        with pytest.raises(ValueError) as err:
            target.load_weights(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert path in str(err.value) and "1000000" in str(err.value)
    assert peak < 16 * 2**20
    _same(before, target.get_weights())


@pytest.mark.parametrize("fmt", ["h5", "weights.h5"])
@pytest.mark.parametrize("dtype", ["c8", "S4", "f16", [("a", "f4"), ("b", "f4")]])
def test_non_numeric_dtype_is_refused(tmp_path, fmt, dtype):
    path = str(tmp_path / f"w.{fmt}")
    _model(0).save_weights(path)
    name = _last_weight(path)
    with h5py.File(path, "r") as f:
        shape = f[name].shape
    _replace_dataset(path, name, shape=shape, dtype=np.dtype(dtype))
    target = _model(1)
    before = target.get_weights()
    with pytest.raises(ValueError, match="dtype") as err:
        target.load_weights(path)
    assert path in str(err.value)
    _same(before, target.get_weights())


# ------------------------------------------------------ defect 5: half-load on a wrong dtype
def _string_bias(path):
    name = _last_weight(path)
    with h5py.File(path, "r") as f:
        shape = f[name].shape
    _replace_dataset(path, name, data=np.full(shape, b"x", dtype="S1"))


@pytest.mark.parametrize("fmt", ["h5", "weights.h5", "keras"])
def test_string_dataset_of_the_right_shape_changes_nothing(tmp_path, fmt):
    path = str(tmp_path / f"w.{fmt}")
    source = _model(0)
    if fmt == "keras":
        source.save(path)
        _edit_keras_weights(path, tmp_path, _string_bias)
    else:
        source.save_weights(path)
        _string_bias(path)
    target = _model(1)
    before = target.get_weights()
    with pytest.raises(ValueError) as err:
        target.load_weights(path)
    assert path in str(err.value) and "dtype" in str(err.value)
    _same(before, target.get_weights())


@pytest.mark.parametrize("fmt", ["h5", "keras"])
def test_string_optimizer_state_fails_load_model_naming_the_file(tmp_path, fmt):
    path = str(tmp_path / f"m.{fmt}")
    model = _model(0)
    model.compile(optimizer="adam", loss="mse")
    model.fit(np.ones((4, 4), "float32"), np.ones((4, 3), "float32"), verbose=0)
    model.save(path)

    def corrupt(h5_path):
        names = [n for n in _datasets(h5_path) if "optimizer" in n or n.startswith("optimizer")]
        with h5py.File(h5_path, "r") as f:
            shape = f[names[-1]].shape
        _replace_dataset(h5_path, names[-1], data=np.full(shape, b"x", dtype="S1"))

    if fmt == "keras":
        _edit_keras_weights(path, tmp_path, corrupt)
    else:
        corrupt(path)
    with pytest.raises(ValueError) as err:
        keratron.models.load_model(path)
    assert path in str(err.value) and "dtype" in str(err.value)


# ---------------------------------------------------------------------- defect 6: zip bombs
def _bomb(path, member, size):
    """Replaces `member` of a .keras archive by `size` bytes of spaces, deflated about 1000:1
    (written in chunks: the test never holds the inflated bytes)."""
    with zipfile.ZipFile(path) as zf:
        entries = {name: zf.read(name) for name in zf.namelist()}
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in entries.items():
            if name != member:
                zf.writestr(name, data)
                continue
            info = zipfile.ZipInfo(name)
            info.compress_type = zipfile.ZIP_DEFLATED
            with zf.open(info, "w", force_zip64=True) as out:
                chunk = b" " * 2**20
                for _ in range(size // len(chunk)):
                    out.write(chunk)


def _peak_bytes(fn):
    tracemalloc.start()
    try:
        fn()
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return peak


@pytest.mark.parametrize(
    "load, member, size",
    [
        ("load_model", "config.json", 65 * 2**20),
        ("load_model", "model.weights.h5", 80 * 2**20),
        ("load_weights", "model.weights.h5", 80 * 2**20),
    ],
)
def test_zip_bomb_is_refused_from_the_directory(tmp_path, load, member, size):
    path = str(tmp_path / "bomb.keras")
    _model(0).save(path)
    _bomb(path, member, size)
    assert os.path.getsize(path) < size // 500
    target = _model(1)
    before = target.get_weights()
    errors = []

    def run():
        try:
            if load == "load_model":
                keratron.models.load_model(path)
            else:
                target.load_weights(path)
        except ValueError as e:
            errors.append(str(e))

    peak = _peak_bytes(run)
    assert errors and path in errors[0] and member in errors[0], errors
    assert "inflates to" in errors[0]
    assert peak < 16 * 2**20
    _same(before, target.get_weights())


def test_keras_archive_weights_limit_scales_with_the_model(tmp_path):
    """A legitimate archive of a model larger than the fixed overhead still loads."""
    model = keratron.Sequential([keratron.Input((2048,)), layers.Dense(8192)])  # 64 MiB
    path = str(tmp_path / "big.keras")
    model.save(path)
    other = keratron.Sequential([keratron.Input((2048,)), layers.Dense(8192)])
    other.load_weights(path)
    _same(model.get_weights(), other.get_weights())


# --------------------------------------------------------- defect 7: fixed-length strings
@pytest.mark.parametrize("kind", ["weights.h5", "w.h5", "m.h5"])
def test_string_attributes_are_fixed_length_and_datasets_checksummed(tmp_path, kind):
    path = str(tmp_path / f"x.{kind}")
    model = _model(0)
    model.compile(optimizer="adam", loss="mse")
    model.fit(np.ones((4, 4), "float32"), np.ones((4, 3), "float32"), verbose=0)
    if kind == "m.h5":
        model.save(path)
    else:
        model.save_weights(path)
    strings, checked = [], []

    def check(_, obj):
        for key in obj.attrs:
            info = h5py.check_string_dtype(obj.attrs.get_id(key).dtype)
            if info is not None:
                strings.append((obj.name, key, info.length))
        if isinstance(obj, h5py.Dataset) and obj.shape:
            checked.append(obj.fletcher32)

    with h5py.File(path, "r") as f:
        check("/", f)
        f.visititems(check)
    assert strings and all(length is not None for _, _, length in strings), strings
    assert checked and all(checked)


def test_flipped_bit_in_checksummed_data_is_an_error(tmp_path):
    path = str(tmp_path / "w.h5")
    _model(0).save_weights(path)
    with h5py.File(path, "r") as f:
        dataset = f[_datasets(path)[0]]
        offset = dataset.id.get_chunk_info(0).byte_offset
    with open(path, "r+b") as f:
        f.seek(offset + 3)
        byte = f.read(1)
        f.seek(offset + 3)
        f.write(bytes([byte[0] ^ 0x10]))
    target = _model(1)
    before = target.get_weights()
    with pytest.raises(ValueError) as err:
        target.load_weights(path)
    assert path in str(err.value)
    _same(before, target.get_weights())


# ----------------------------------------------------------- defect 8: stray temporary files
def _dead_pid():
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_next_save_removes_temporaries_of_killed_saves(tmp_path):
    path = tmp_path / "m.h5"
    old = time.time() - 60
    stale = [f".m.h5.{_dead_pid()}-abcd1234.tmp", ".m.h5.k2j4_x9z.tmp"]
    kept = [
        f".m.h5.{os.getpid()}-live0001.tmp",  # a writer that is still running
        ".other.h5.abcd1234.tmp",  # another target's
        ".m.h5.abcd1234.tmp.bak",  # not our pattern
        "m.h5.abcd1234.tmp",
    ]
    for name in stale + kept:
        (tmp_path / name).write_bytes(b"partial")
        os.utime(tmp_path / name, (old, old))
    # Last written after this save began (the clock says so): not a leftover of an earlier one.
    recent = f".m.h5.{_dead_pid()}-recent01.tmp"
    (tmp_path / recent).write_bytes(b"partial")
    os.utime(tmp_path / recent, (time.time() + 60, time.time() + 60))
    _model(0).save_weights(str(path))
    assert sorted(os.listdir(tmp_path)) == sorted(["m.h5", recent] + kept)


def test_killed_save_leftovers_are_removed_by_the_next_save(tmp_path):
    script = (
        "import os, sys\n"
        "import keratron\n"
        "from keratron import layers\n"
        "m = keratron.Sequential([keratron.Input((256,)), layers.Dense(512), layers.Dense(512)])\n"
        "sys.stdout.write('r'); sys.stdout.flush()\n"
        "while True:\n"
        f"    m.save({str(tmp_path / 'm.h5')!r})\n"
    )
    for _ in range(3):
        child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE)
        assert child.stdout.read(1) == b"r"
        time.sleep(0.3)
        child.kill()
        child.wait()
        child.stdout.close()
    _model(0).save(str(tmp_path / "m.h5"))
    assert os.listdir(tmp_path) == ["m.h5"]


# -------------------------------------------------------- defect 9: unwrapped read errors
@pytest.mark.parametrize("fmt", ["h5", "weights.h5", "keras"])
@pytest.mark.parametrize(
    "error, kind",
    [
        (ValueError("Insufficient precision in available types"), ValueError),
        (MemoryError("Unable to allocate 3.64 TiB"), MemoryError),
        (TypeError("Can't broadcast"), TypeError),
        (KeyError("vars"), ValueError),
        (OSError("Can't read data (wrong B-tree signature)"), ValueError),
        (RuntimeError("Unable to synchronously read"), ValueError),
    ],
)
def test_every_read_failure_names_the_file(tmp_path, monkeypatch, fmt, error, kind):
    path = str(tmp_path / f"w.{fmt}")
    model = _model(0)
    if fmt == "weights.h5":
        model.save_weights(path)
    else:
        model.save(path)  # a whole-model file: load_weights and load_model both read it
    target = _model(1)
    before = target.get_weights()

    def broken(self, *args, **kwargs):
        raise error

    monkeypatch.setattr(h5py.Dataset, "__getitem__", broken)
    with pytest.raises(kind) as err:
        target.load_weights(path)
    assert path in str(err.value) and str(error).strip("'") in str(err.value)
    _same(before, target.get_weights())
    if fmt != "weights.h5":
        with pytest.raises(kind) as err:
            keratron.models.load_model(path)
        assert path in str(err.value)


# ----------------------------------------------- defect 10: unregistered registered_name
def test_unregistered_registered_name_is_an_error(tmp_path):
    path = str(tmp_path / "m.keras")
    _model(0).save(path)

    def rename(data):
        config = json.loads(data)
        config["config"]["layers"][-1]["registered_name"] = "fuzzpkg>Dense"
        return json.dumps(config).encode()

    _rewrite_member(path, "config.json", rename)
    with pytest.raises(TypeError) as err:
        keratron.models.load_model(path)
    message = str(err.value)
    assert path in message and "fuzzpkg>Dense" in message
    assert "register_keras_serializable" in message
    # Registered, or given as a custom object, it loads.
    loaded = keratron.models.load_model(path, custom_objects={"fuzzpkg>Dense": layers.Dense})
    _same(_model(0).get_weights(), loaded.get_weights())
