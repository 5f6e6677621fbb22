"""text_dataset_from_directory, audio_dataset_from_directory and split_dataset against real
Keras: Keras runs on its TensorFlow backend in a child process
(tests/preprocessing/keras_file_datasets_oracle.py) over the same files, and every element,
printed line and class list is compared."""

import json
import os
import subprocess
import sys
import wave

import numpy as np
import pytest

import keratron
from tests.conftest import require
from tests.preprocessing import keras_file_datasets_oracle as oracle


def _write_wav(path, samples):
    with wave.open(str(path), "wb") as f:
        f.setnchannels(1)
        f.setsampwidth(2)
        f.setframerate(8000)
        f.writeframes(np.asarray(samples, dtype="<i2").tobytes())


def _make_tree(root):
    rng = np.random.default_rng(0)
    words = ["alpha", "beta", "gamma", "delta", "é ü", "x"]
    for folder, classes in (("text", "abc"), ("text2", "pq")):
        for c in classes:
            (root / folder / c).mkdir(parents=True)
            for i in range(3 + (ord(c) % 3)):
                text = " ".join(rng.choice(words, size=int(rng.integers(1, 6))))
                (root / folder / c / f"f{i}.txt").write_text(f"{c}{i} {text}", encoding="utf-8")
        (root / folder / ".hidden").mkdir()
        (root / folder / ".hidden" / "h.txt").write_text("never read")
    (root / "text" / "a" / "nested").mkdir()
    (root / "text" / "a" / "nested" / "deep.txt").write_text("nested file")
    (root / "text" / "b" / "notes.md").write_text("not a .txt file")
    (root / "flat").mkdir()
    for i in range(4):
        (root / "flat" / f"{i}.TXT").write_text(f"flat {i}")
    for c in ("no", "yes"):
        (root / "audio" / c).mkdir(parents=True)
        for i in range(4):
            length = int(rng.integers(20, 80))
            _write_wav(root / "audio" / c / f"clip{i}.wav", rng.integers(-32768, 32767, length))


@pytest.fixture(scope="module")
def expected(tmp_path_factory):
    require("keras")
    require("tensorflow")
    root = tmp_path_factory.mktemp("files")
    _make_tree(root)
    out = root / "keras.json"
    env = {**os.environ, "KERAS_BACKEND": "tensorflow", "TF_CPP_MIN_LOG_LEVEL": "3"}
    done = subprocess.run(
        [sys.executable, oracle.__file__, str(root), str(out)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    with open(out) as f:
        return root, json.load(f)


def _elements(ds):
    return json.loads(json.dumps([[oracle.encode(x) for x in e] for e in _raw(ds)]))


def _raw(ds):
    return [e if isinstance(e, tuple) else (e,) for e in ds.as_numpy_iterator()]


@pytest.mark.parametrize("name", sorted(oracle.CASES))
def test_matches_keras(expected, name, capsys):
    root, results = expected
    folder, kwargs = oracle.CASES[name]
    loader = (
        keratron.utils.audio_dataset_from_directory
        if folder == "audio"
        else keratron.utils.text_dataset_from_directory
    )
    capsys.readouterr()
    made = loader(str(root / folder), **kwargs)
    assert capsys.readouterr().out == results[name]["printed"]
    made = made if isinstance(made, (tuple, list)) else (made,)
    assert made[0].class_names == results[name]["class_names"]
    for ours, theirs, shuffled in zip(
        made, results[name]["datasets"], (kwargs.get("shuffle", True), False)
    ):
        ours = _elements(ours)
        if not shuffled or kwargs.get("subset") == "validation":
            assert ours == theirs
        else:
            # The training files match Keras's; the order within an epoch comes from the
            # dataset's own shuffle (TensorFlow's differs).
            assert _samples(ours) == _samples(theirs)


def _samples(elements):
    """The (text, label) rows of a list of batches, sorted."""
    rows = []
    for element in elements:
        n = element[0]["shape"][0]
        columns = [np.reshape(np.array(c["v"], dtype=object), (n, -1)).tolist() for c in element]
        rows += [json.dumps(row) for row in zip(*columns)]
    return sorted(rows)


@pytest.mark.parametrize("name", sorted(oracle.SPLITS))
def test_split_dataset_matches_keras(expected, name):
    _, results = expected
    kind, kwargs = oracle.SPLITS[name]
    left, right = keratron.utils.split_dataset(oracle.split_inputs()[kind], **kwargs)
    assert [_elements(left), _elements(right)] == results[name]["datasets"]


def test_a_split_that_rounds_to_no_validation_file_trains_on_every_file(tmp_path, capsys):
    # 4 files, validation_split=0.2: int(0.8) = 0 validation files. Training gets all four, as
    # the printed count says (slicing at -0 had given it none), and the validation subset,
    # empty, is a clear error, as with the image loader.
    _make_tree(tmp_path)
    text = keratron.utils.text_dataset_from_directory
    kwargs = dict(labels=None, validation_split=0.2, seed=1, batch_size=None)
    train = text(str(tmp_path / "flat"), subset="training", **kwargs)
    assert "Using 4 files for training." in capsys.readouterr().out
    assert sorted(train.file_paths) == sorted(str(p) for p in (tmp_path / "flat").iterdir())
    with pytest.raises(ValueError, match="No validation text files found"):
        text(str(tmp_path / "flat"), subset="both", **kwargs)


def test_bad_arguments(tmp_path):
    _make_tree(tmp_path)
    text = keratron.utils.text_dataset_from_directory
    with pytest.raises(ValueError, match="must provide a `seed`"):
        text(str(tmp_path / "text"), validation_split=0.2, subset="training")
    with pytest.raises(ValueError, match="exactly 2 class_names"):
        text(str(tmp_path / "text"), label_mode="binary", verbose=False)
    with pytest.raises(ValueError, match=r"class_names=\['z'\]"):
        text(str(tmp_path / "text"), class_names=["z"], verbose=False)
    with pytest.raises(ValueError, match="label_mode=sparse"):
        text(str(tmp_path / "text"), label_mode="sparse")
    audio = keratron.utils.audio_dataset_from_directory
    with pytest.raises(ValueError, match="ragged tensors"):
        audio(str(tmp_path / "audio"), ragged=True)
    with pytest.raises(ImportError, match="tensorflow_io"):
        audio(str(tmp_path / "audio"), sampling_rate=16000)
    with wave.open(str(tmp_path / "audio" / "no" / "wide.wav"), "wb") as f:
        f.setnchannels(1)
        f.setsampwidth(3)
        f.setframerate(8000)
        f.writeframes(b"\0" * 30)
    with pytest.raises(ValueError, match="16-bit WAV.*24-bit"):
        list(audio(str(tmp_path / "audio"), shuffle=False, verbose=False))
    split = keratron.utils.split_dataset
    with pytest.raises(ValueError, match="At least one of the `left_size`"):
        split(np.ones(4))
    with pytest.raises(ValueError, match="left_size=7"):
        split(np.ones(4), left_size=7)
    with pytest.raises(TypeError, match="split_dataset"):
        split({"a": np.ones(4)}, left_size=2)


def test_text_dataset_trains_a_model(tmp_path):
    _make_tree(tmp_path)
    ds = keratron.utils.text_dataset_from_directory(
        str(tmp_path / "text"), batch_size=4, seed=1, verbose=False
    )
    vectorize = keratron.layers.TextVectorization(max_tokens=20, output_sequence_length=6)
    vectorize.adapt(ds.map(lambda x, y: x))
    model = keratron.Sequential(
        [keratron.layers.Embedding(20, 4), keratron.layers.GlobalAveragePooling1D(),
         keratron.layers.Dense(3)]
    )  # fmt: skip
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    history = model.fit(ds.map(lambda x, y: (vectorize(x), y)), epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])
