"""tf.keras's legacy `preprocessing.text` and `preprocessing.sequence` helpers against Keras 3's
own (`keras.src.legacy.preprocessing`, which needs no TensorFlow): `Tokenizer` and its JSON,
word hashing, `TimeseriesGenerator`, `make_sampling_table` and `skipgrams`.

Both sides run in this process, so Python's salted `hash` (behind `one_hot`) and the global
`random` / `np.random` states are seeded alike before each call.
"""

import collections
import hashlib
import importlib
import random
import warnings

import numpy as np
import pytest

import keratron
from keratron.preprocessing import sequence as ours_sequence
from keratron.preprocessing import text as ours_text
from tests.conftest import require


@pytest.fixture(autouse=True)
def _restore_global_random():
    """These tests seed `random` and `np.random`; other tests in the process get their state
    back."""
    state, np_state = random.getstate(), np.random.get_state()
    yield
    random.setstate(state)
    np.random.set_state(np_state)


def _keras_text():
    require("keras")
    return importlib.import_module("keras.src.legacy.preprocessing.text")


def _keras_sequence():
    require("keras")
    return importlib.import_module("keras.src.legacy.preprocessing.sequence")


TEXTS = [
    "The cat sat on the mat.",
    "The dog ate my homework!",
    "A cat, a dog -- and THE bird?",
    "",
    "tabs\tand\nnewlines  and  double  spaces",
    "Ünïcödé wörds, çà et là; ÇA!",
    "repeat repeat repeat the the",
]
UNSEEN = ["the bird ate the unknown mat", "zebra quokka", "", "cat cat dog"]

# text_to_word_sequence kwargs
SPLIT_CASES = [
    pytest.param({}, id="defaults"),
    pytest.param({"lower": False}, id="no_lower"),
    pytest.param({"filters": ""}, id="no_filters"),
    pytest.param({"split": ","}, id="comma_split"),
    pytest.param({"split": "--"}, id="multichar_split"),
    pytest.param({"filters": "aeiou", "split": " "}, id="custom_filters"),
]


@pytest.mark.interop
def test_namespaces_match_tf_keras():
    require("keras")
    tf_keras = importlib.import_module("keras._tf_keras.keras.preprocessing")
    for ours, theirs in [
        (keratron.preprocessing.text, tf_keras.text),
        (keratron.preprocessing.sequence, tf_keras.sequence),
    ]:
        expected = {n for n in dir(theirs) if not n.startswith("_")}
        assert expected <= set(ours.__all__), expected - set(ours.__all__)
        assert all(hasattr(ours, n) for n in expected)
    assert "text" in keratron.preprocessing.__all__
    assert isinstance(
        ours_sequence.TimeseriesGenerator([0, 1], [0, 1], 1), keratron.utils.PyDataset
    )


@pytest.mark.interop
@pytest.mark.parametrize("kwargs", SPLIT_CASES)
@pytest.mark.parametrize("text", TEXTS + ["Hello, World--x y"])
def test_text_to_word_sequence_matches_keras(text, kwargs):
    expected = _keras_text().text_to_word_sequence(text, **kwargs)
    assert ours_text.text_to_word_sequence(text, **kwargs) == expected


def test_text_to_word_sequence_rejects_empty_split():
    with pytest.raises(ValueError, match="split"):
        ours_text.text_to_word_sequence("a b", split="")


HASH_CASES = [
    pytest.param("md5", id="md5"),
    pytest.param(None, id="python_hash"),
    pytest.param(lambda word: sum(map(ord, word)) * 31, id="callable"),
]


@pytest.mark.interop
@pytest.mark.parametrize("hash_function", HASH_CASES)
@pytest.mark.parametrize("n", [2, 3, 17, 1000])
@pytest.mark.parametrize("text", TEXTS)
def test_hashing_trick_matches_keras(text, n, hash_function):
    keras_text = _keras_text()
    expected = keras_text.hashing_trick(text, n, hash_function=hash_function)
    assert ours_text.hashing_trick(text, n, hash_function=hash_function) == expected
    for kwargs in ({"lower": False, "filters": ""}, {"analyzer": str.split}):
        expected = keras_text.hashing_trick(text, n, hash_function=hash_function, **kwargs)
        assert ours_text.hashing_trick(text, n, hash_function=hash_function, **kwargs) == expected


@pytest.mark.interop
@pytest.mark.parametrize("n", [2, 5, 50])
def test_one_hot_matches_keras(n):
    # Python's str hash is salted per process, but both sides run in this one.
    keras_text = _keras_text()
    for text in TEXTS:
        codes = ours_text.one_hot(text, n)
        assert codes == keras_text.one_hot(text, n)
        assert all(1 <= c < n for c in codes)
        assert len(codes) == len(keras_text.text_to_word_sequence(text))
        assert ours_text.one_hot(text, n, analyzer=list) == keras_text.one_hot(
            text, n, analyzer=list
        )


def test_md5_hashing_by_hand():
    words = ["alpha", "beta", "alpha", "gamma"]
    expected = [int(hashlib.md5(w.encode()).hexdigest(), 16) % 12 + 1 for w in words]
    assert ours_text.hashing_trick(" ".join(words), 13, hash_function="md5") == expected


@pytest.mark.parametrize("n", [0, 1, 2.5])
def test_hashing_trick_rejects_bad_n(n):
    with pytest.raises(ValueError, match=r"Received: n="):
        ours_text.hashing_trick("a b", n)


def test_hashing_trick_rejects_unknown_hash_name():
    with pytest.raises(ValueError, match="hash_function"):
        ours_text.hashing_trick("a b", 5, hash_function="sha1")


# Tokenizer kwargs
TOKENIZER_CASES = [
    pytest.param({}, id="defaults"),
    pytest.param({"num_words": 5}, id="num_words"),
    pytest.param({"num_words": 5, "oov_token": "<oov>"}, id="num_words_oov"),
    pytest.param({"oov_token": "<oov>"}, id="oov"),
    pytest.param({"oov_token": "the"}, id="oov_seen_in_texts"),
    pytest.param({"num_words": 1, "oov_token": "?"}, id="num_words_1_oov"),
    pytest.param({"char_level": True}, id="char_level"),
    pytest.param(
        {"char_level": True, "num_words": 8, "oov_token": "#"}, id="char_level_num_words_oov"
    ),
    pytest.param({"lower": False}, id="no_lower"),
    pytest.param({"filters": ".,!?", "split": "a"}, id="filters_split"),
    pytest.param({"analyzer": lambda s: s.split("e")}, id="analyzer"),
]
FIT_TEXTS = TEXTS + [["Already", "split", "words", "the"], ["cat", "CAT"]]
UNSEEN_TEXTS = UNSEEN + [["the", "quokka"]]


def _fitted(module, kwargs, texts=FIT_TEXTS):
    tokenizer = module.Tokenizer(**kwargs)
    tokenizer.fit_on_texts(texts)
    return tokenizer


def _state(tokenizer):
    return (
        list(tokenizer.word_counts.items()),
        dict(tokenizer.word_docs),
        dict(tokenizer.index_docs),
        tokenizer.word_index,
        tokenizer.index_word,
        tokenizer.document_count,
    )


@pytest.mark.interop
@pytest.mark.parametrize("kwargs", TOKENIZER_CASES)
def test_tokenizer_matches_keras(kwargs):
    keras_text = _keras_text()
    theirs, ours = _fitted(keras_text, kwargs), _fitted(ours_text, kwargs)
    assert _state(ours) == _state(theirs)
    assert isinstance(ours.word_counts, collections.OrderedDict)
    assert isinstance(ours.word_docs, collections.defaultdict)
    assert isinstance(ours.index_docs, collections.defaultdict)

    for texts in (FIT_TEXTS, UNSEEN_TEXTS):
        expected = theirs.texts_to_sequences(texts)
        assert ours.texts_to_sequences(texts) == expected
        assert list(ours.texts_to_sequences_generator(iter(texts))) == expected
    # Index 0 and 99 have no word: dropped, or the oov token.
    sequences = theirs.texts_to_sequences(FIT_TEXTS) + [[0, 1, 2, 3, 99, 4, 4], []]
    expected = theirs.sequences_to_texts(sequences)
    assert ours.sequences_to_texts(sequences) == expected
    assert list(ours.sequences_to_texts_generator(iter(sequences))) == expected

    for mode in ("binary", "count", "tfidf", "freq"):
        for texts in (FIT_TEXTS, UNSEEN_TEXTS):
            expected = theirs.texts_to_matrix(texts, mode=mode)
            got = ours.texts_to_matrix(texts, mode=mode)
            assert got.dtype == expected.dtype and got.shape == expected.shape
            np.testing.assert_allclose(got, expected, rtol=1e-12, atol=0)
        expected = theirs.sequences_to_matrix(sequences, mode=mode)
        np.testing.assert_allclose(ours.sequences_to_matrix(sequences, mode=mode), expected)

    assert ours.get_config() == theirs.get_config()
    assert ours.to_json() == theirs.to_json()
    assert ours.to_json(indent=2, sort_keys=True) == theirs.to_json(indent=2, sort_keys=True)


@pytest.mark.interop
def test_tokenizer_refits_and_fits_on_sequences_like_keras():
    keras_text = _keras_text()
    tokenizers = [m.Tokenizer(oov_token="<oov>") for m in (keras_text, ours_text)]
    for tokenizer in tokenizers:
        tokenizer.fit_on_texts(TEXTS[:3])
        tokenizer.fit_on_texts(TEXTS[3:])
        tokenizer.fit_on_sequences([[1, 2, 2, 3], [], [5, 40]])
    theirs, ours = tokenizers
    assert _state(ours) == _state(theirs)
    for mode in ("tfidf", "freq"):
        np.testing.assert_allclose(
            ours.texts_to_matrix(UNSEEN, mode=mode), theirs.texts_to_matrix(UNSEEN, mode=mode)
        )

    # A tokenizer fitted on sequences only: tfidf over num_words columns.
    tokenizers = [m.Tokenizer(num_words=6) for m in (keras_text, ours_text)]
    for tokenizer in tokenizers:
        tokenizer.fit_on_sequences([[1, 2, 2], [2, 5], [3]])
    sequences = [[1, 2, 2, 2], [5, 6, 7], [], [3, 3]]
    theirs, ours = tokenizers
    for mode in ("binary", "count", "tfidf", "freq"):
        np.testing.assert_allclose(
            ours.sequences_to_matrix(sequences, mode=mode),
            theirs.sequences_to_matrix(sequences, mode=mode),
        )


def test_sequences_to_matrix_by_hand():
    tokenizer = ours_text.Tokenizer(num_words=4)
    tokenizer.fit_on_sequences([[1, 2], [2], [3, 3]])  # index_docs: 1 -> 1, 2 -> 2, 3 -> 1
    sequences = [[1, 2, 2, 7], [3]]
    count = np.array([[0, 1, 2, 0], [0, 0, 0, 1]], dtype=float)
    np.testing.assert_array_equal(tokenizer.sequences_to_matrix(sequences, "count"), count)
    np.testing.assert_array_equal(tokenizer.sequences_to_matrix(sequences, "binary"), count > 0)
    freq = np.array([[0, 1 / 4, 2 / 4, 0], [0, 0, 0, 1]])
    np.testing.assert_allclose(tokenizer.sequences_to_matrix(sequences, "freq"), freq)
    idf = np.log(1 + 3 / (1 + np.array([0, 1, 2, 1])))
    tfidf = np.where(count > 0, (1 + np.log(np.maximum(count, 1))) * idf, 0)
    np.testing.assert_allclose(tokenizer.sequences_to_matrix(sequences, "tfidf"), tfidf)


@pytest.mark.interop
@pytest.mark.parametrize("kwargs", TOKENIZER_CASES)
def test_tokenizer_json_round_trips_with_keras(kwargs):
    keras_text = _keras_text()
    theirs, ours = _fitted(keras_text, kwargs), _fitted(ours_text, kwargs)
    from_keras = ours_text.tokenizer_from_json(theirs.to_json())
    from_ours = keras_text.tokenizer_from_json(ours.to_json())
    keras_reloaded = keras_text.tokenizer_from_json(theirs.to_json())
    assert isinstance(from_keras, ours_text.Tokenizer)
    assert _state(from_keras) == _state(keras_reloaded) == _state(from_ours)
    assert list(from_keras.word_counts) == list(theirs.word_counts)  # order kept
    # The analyzer is not saved (as in Keras), so compare the reloaded pair with each other.
    assert from_keras.texts_to_sequences(UNSEEN_TEXTS) == keras_reloaded.texts_to_sequences(
        UNSEEN_TEXTS
    )
    for mode in ("binary", "tfidf"):
        np.testing.assert_allclose(
            from_keras.texts_to_matrix(UNSEEN, mode=mode),
            keras_reloaded.texts_to_matrix(UNSEEN, mode=mode),
        )
    assert from_keras.to_json() == keras_reloaded.to_json() == from_ours.to_json()


def test_reloaded_tokenizer_can_be_fitted_further():
    tokenizer = ours_text.Tokenizer()
    tokenizer.fit_on_texts(["a b b"])
    reloaded = ours_text.tokenizer_from_json(tokenizer.to_json())
    reloaded.fit_on_texts(["c a"])
    assert reloaded.word_index == {"a": 1, "b": 2, "c": 3}
    assert dict(reloaded.word_docs) == {"a": 2, "b": 1, "c": 1}
    assert reloaded.document_count == 2


def test_tokenizer_from_json_rejects_other_json():
    with pytest.raises(ValueError, match="config"):
        ours_text.tokenizer_from_json('{"class_name": "Tokenizer"}')


@pytest.mark.interop
def test_tokenizer_errors_match_keras():
    keras_text = _keras_text()
    for module in (keras_text, ours_text):
        with pytest.raises(TypeError, match="foo"):
            module.Tokenizer(foo=1)
        with pytest.warns(UserWarning, match="nb_words"):
            assert module.Tokenizer(nb_words=7).num_words == 7
        with pytest.raises(ValueError, match="num_words"):
            module.Tokenizer().sequences_to_matrix([[1]])
        with pytest.raises(ValueError, match="tfidf"):
            module.Tokenizer(num_words=3).sequences_to_matrix([[1]], mode="tfidf")
        with pytest.raises(ValueError, match="mode"):
            _fitted(module, {}).sequences_to_matrix([[1]], mode="onehot")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ours_text.Tokenizer(num_words=7)
    with pytest.raises(ValueError, match="Received: mode='onehot'"):
        _fitted(ours_text, {}).texts_to_matrix(["x"], mode="onehot")


# TimeseriesGenerator kwargs besides data and targets
GENERATOR_CASES = [
    pytest.param({"length": 5}, id="defaults"),
    pytest.param({"length": 3, "batch_size": 4}, id="small_batches"),
    pytest.param({"length": 6, "sampling_rate": 2, "batch_size": 5}, id="sampling_rate"),
    pytest.param({"length": 7, "sampling_rate": 3, "batch_size": 3}, id="sampling_rate_uneven"),
    pytest.param({"length": 4, "stride": 3, "batch_size": 2}, id="stride"),
    pytest.param(
        {"length": 6, "sampling_rate": 2, "stride": 2, "batch_size": 4}, id="stride_sampling"
    ),
    pytest.param({"length": 3, "start_index": 10, "batch_size": 6}, id="start_index"),
    pytest.param({"length": 3, "end_index": 20, "batch_size": 4}, id="end_index"),
    pytest.param(
        {"length": 2, "start_index": 5, "end_index": 30, "stride": 4, "batch_size": 3},
        id="start_end",
    ),
    pytest.param({"length": 4, "start_index": 2, "end_index": 6}, id="single_sample"),
    pytest.param({"length": 5, "reverse": True, "batch_size": 7}, id="reverse"),
    pytest.param(
        {"length": 6, "sampling_rate": 2, "reverse": True, "batch_size": 8}, id="reverse_sampling"
    ),
    pytest.param({"length": 10, "batch_size": 30}, id="batch_equals_all"),
]


def _series():
    data = np.arange(40 * 3, dtype="float32").reshape(40, 3) / 7.0
    targets = np.arange(40) * 10
    return data, targets


@pytest.mark.interop
@pytest.mark.parametrize("kwargs", GENERATOR_CASES)
@pytest.mark.parametrize("as_lists", [False, True], ids=["arrays", "lists"])
def test_timeseries_generator_matches_keras(kwargs, as_lists):
    data, targets = _series()
    if as_lists:
        data, targets = data[:, 0].tolist(), targets.tolist()
    theirs = _keras_sequence().TimeseriesGenerator(data, targets, **kwargs)
    ours = ours_sequence.TimeseriesGenerator(data, targets, **kwargs)
    assert len(ours) == len(theirs) > 0
    for i in range(len(theirs)):
        (x, y), (ex, ey) = ours[i], theirs[i]
        assert x.dtype == ex.dtype and y.dtype == ey.dtype
        np.testing.assert_array_equal(x, ex)
        np.testing.assert_array_equal(y, ey)
    assert list(iter(ours))[-1][1].tolist() == theirs[len(theirs) - 1][1].tolist()


@pytest.mark.interop
@pytest.mark.parametrize("seed", [0, 7])
def test_timeseries_generator_shuffle_matches_keras(seed):
    data, targets = _series()
    batches = []
    for module in (_keras_sequence(), ours_sequence):
        generator = module.TimeseriesGenerator(
            data, targets, length=4, sampling_rate=2, shuffle=True, batch_size=6, end_index=35
        )
        np.random.seed(seed)
        batches.append([generator[i] for i in range(len(generator))])
    for (x, y), (ex, ey) in zip(*batches, strict=True):
        np.testing.assert_array_equal(x, ex)
        np.testing.assert_array_equal(y, ey)
        assert x.shape == (6, 2, 3) and ((4 <= y // 10) & (y // 10 <= 35)).all()


def test_timeseries_generator_by_hand():
    data = np.arange(20)[:, None] * 2
    generator = ours_sequence.TimeseriesGenerator(
        data, np.arange(20), length=4, sampling_rate=2, stride=3, start_index=1, batch_size=2
    )
    # Sample ends (rows) 5, 8, 11, 14, 17; each sample is data[row - 4 : row : 2].
    assert len(generator) == 3
    x, y = generator[1]
    np.testing.assert_array_equal(x, np.array([[[14], [18]], [[20], [24]]]))
    np.testing.assert_array_equal(y, [11, 14])
    x, y = generator[2]
    np.testing.assert_array_equal(x[:, :, 0], [[26, 30]])
    np.testing.assert_array_equal(y, [17])


@pytest.mark.interop
def test_timeseries_generator_errors_match_keras():
    keras_sequence = _keras_sequence()
    for module in (keras_sequence, ours_sequence):
        with pytest.raises(ValueError, match="same length"):
            module.TimeseriesGenerator(list(range(10)), list(range(9)), length=2)
        with pytest.raises(ValueError, match="end_index"):
            module.TimeseriesGenerator(list(range(10)), list(range(10)), length=10)
        with pytest.raises(ValueError, match="end_index"):
            module.TimeseriesGenerator(list(range(10)), list(range(10)), length=2, end_index=1)
        with pytest.raises(TypeError):
            module.TimeseriesGenerator(list(range(10)), list(range(10)), length=2, bogus=1)
    generator = ours_sequence.TimeseriesGenerator(list(range(10)), list(range(10)), 2, workers=3)
    assert generator.workers == 3
    with pytest.raises(ValueError, match=r"Received: len\(data\)=10, len\(targets\)=9"):
        ours_sequence.TimeseriesGenerator(list(range(10)), list(range(9)), length=2)


def test_model_fits_from_timeseries_generator():
    rng = np.random.default_rng(0)
    series = rng.normal(size=(300, 1)).astype("float32")
    # The target is the mean of the window the generator gives (the 6 steps before it).
    window_means = np.convolve(series[:, 0], np.ones(6) / 6, mode="full")[5:-1]
    targets = np.concatenate([np.zeros(6, "float32"), window_means[: 300 - 6]])
    np.testing.assert_allclose(targets[10], series[4:10, 0].mean(), rtol=1e-5)
    generator = ours_sequence.TimeseriesGenerator(series, targets, length=6, batch_size=32)
    model = keratron.Sequential(
        [keratron.Input((6, 1)), keratron.layers.Flatten(), keratron.layers.Dense(1)]
    )
    model.compile(optimizer=keratron.optimizers.Adam(0.05), loss="mse")
    history = model.fit(generator, epochs=15, verbose=0)
    losses = history.history["loss"]
    assert len(losses) == 15 and losses[-1] < 0.1 * losses[0]
    assert model.predict(generator, verbose=0).shape == (300 - 6, 1)
    assert model.evaluate(generator, verbose=0) < 0.1 * losses[0]


@pytest.mark.interop
@pytest.mark.parametrize("size", [1, 2, 10, 1000])
@pytest.mark.parametrize("sampling_factor", [1e-5, 1e-3, 0.5])
def test_make_sampling_table_matches_keras(size, sampling_factor):
    expected = _keras_sequence().make_sampling_table(size, sampling_factor)
    got = ours_sequence.make_sampling_table(size, sampling_factor)
    assert got.dtype == expected.dtype and got.shape == expected.shape == (size,)
    np.testing.assert_allclose(got, expected, rtol=1e-15)


def test_make_sampling_table_by_hand():
    rank = np.array([1.0, 1.0, 2.0, 3.0, 4.0])
    f = 1e-4 * (rank * (np.log(rank) + 0.577) + 0.5 - 1 / (12 * rank))
    np.testing.assert_allclose(ours_sequence.make_sampling_table(5, 1e-4), np.sqrt(f), rtol=1e-12)


# skipgrams kwargs besides the sequence and vocabulary size
SKIPGRAM_CASES = [
    pytest.param({"seed": 3}, id="defaults_seeded"),
    pytest.param({"window_size": 1, "seed": 11}, id="window_1"),
    pytest.param({"negative_samples": 0, "seed": 5}, id="no_negatives"),
    pytest.param({"negative_samples": 2.5, "seed": 2}, id="more_negatives"),
    pytest.param({"categorical": True, "window_size": 2, "seed": 9}, id="categorical"),
    pytest.param({"shuffle": False}, id="no_shuffle"),
    pytest.param({}, id="unseeded_shuffle"),
    pytest.param({"sampling_table": "table", "seed": 4}, id="sampling_table"),
    pytest.param({"sampling_table": "table", "shuffle": False}, id="sampling_table_no_shuffle"),
]
SKIPGRAM_SEQUENCES = [[1, 2, 3, 0, 4, 5, 2, 0, 0, 6, 1, 1], [], [0, 0], [7], list(range(1, 30))]


@pytest.mark.interop
# Keras draws the default seed with `random.randint(0, 10e6)`, a float bound.
@pytest.mark.filterwarnings("ignore:non-integer arguments to randrange:DeprecationWarning")
@pytest.mark.parametrize("kwargs", SKIPGRAM_CASES)
@pytest.mark.parametrize("global_seed", [0, 123])
def test_skipgrams_match_keras(kwargs, global_seed):
    keras_sequence = _keras_sequence()
    kwargs = dict(kwargs)
    if kwargs.get("sampling_table") == "table":
        kwargs["sampling_table"] = keras_sequence.make_sampling_table(30, sampling_factor=1e-3)
    for sequence in SKIPGRAM_SEQUENCES:
        random.seed(global_seed)
        expected = keras_sequence.skipgrams(sequence, 30, **kwargs)
        random.seed(global_seed)
        got = ours_sequence.skipgrams(sequence, 30, **kwargs)
        assert got == expected
    # Both drew the same numbers from `random`: its state afterwards is the same.
    random.seed(global_seed)
    keras_sequence.skipgrams(SKIPGRAM_SEQUENCES[0], 30, **kwargs)
    keras_next = random.random()
    random.seed(global_seed)
    ours_sequence.skipgrams(SKIPGRAM_SEQUENCES[0], 30, **kwargs)
    assert random.random() == keras_next


def test_skipgrams_by_hand():
    couples, labels = ours_sequence.skipgrams(
        [5, 0, 6, 7], 10, window_size=2, negative_samples=0, shuffle=False
    )
    assert couples == [[5, 6], [6, 5], [6, 7], [7, 6]]
    assert labels == [1, 1, 1, 1]
    couples, labels = ours_sequence.skipgrams(
        [5, 0, 6, 7], 10, window_size=2, negative_samples=1.5, categorical=True, seed=1
    )
    assert len(couples) == len(labels) == 4 + 6
    assert labels.count([0, 1]) == 4 and labels.count([1, 0]) == 6
    for couple, label in zip(couples, labels, strict=True):
        if label == [1, 0]:
            assert couple[0] in (5, 6, 7) and 1 <= couple[1] < 10
        else:
            assert couple in ([5, 6], [6, 5], [6, 7], [7, 6])
    again = ours_sequence.skipgrams(
        [5, 0, 6, 7], 10, window_size=2, negative_samples=0, categorical=True, seed=1
    )
    assert again == ours_sequence.skipgrams(
        [5, 0, 6, 7], 10, window_size=2, negative_samples=0, categorical=True, seed=1
    )
