"""Legacy text helpers, as tf.keras's `keras.preprocessing.text`: `Tokenizer` and word hashing.

Keras 3 ships these (deprecated in favour of `TextVectorization`) for tf.keras scripts; they
work on Python strings and lists and return lists of ints or float64 numpy matrices.

Example:
    >>> tokenizer = keratron.preprocessing.text.Tokenizer()
    >>> tokenizer.fit_on_texts(["the cat sat", "the dog"])
    >>> tokenizer.texts_to_sequences(["the dog sat"])
    [[1, 4, 3]]
"""

from __future__ import annotations

import collections
import hashlib
import json
import warnings
from collections.abc import Callable, Iterable, Iterator

import numpy as np

__all__ = [
    "Tokenizer",
    "hashing_trick",
    "one_hot",
    "text_to_word_sequence",
    "tokenizer_from_json",
]

_FILTERS = '!"#$%&()*+,-./:;<=>?@[\\]^_`{|}~\t\n'
_MATRIX_MODES = ("binary", "count", "tfidf", "freq")


def text_to_word_sequence(
    input_text: str, filters: str = _FILTERS, lower: bool = True, split: str = " "
) -> list[str]:
    """Splits a text into a list of words.

    Every character of `filters` becomes a separator; empty words are dropped.

    Args:
        input_text: the text.
        filters: characters to remove (each is replaced by `split`).
        lower: whether to lowercase the text first.
        split: the word separator.

    Returns:
        The list of words.

    Raises:
        ValueError: if `split` is empty.

    Example:
        >>> keratron.preprocessing.text.text_to_word_sequence("The cat, the HAT!")
        ['the', 'cat', 'the', 'hat']
    """
    if not split:
        raise ValueError(
            f"text_to_word_sequence: `split` must be a non-empty string. Received: split={split!r}"
        )
    if lower:
        input_text = input_text.lower()
    input_text = input_text.translate(str.maketrans({c: split for c in filters}))
    return [word for word in input_text.split(split) if word]


def one_hot(
    input_text: str,
    n: int,
    filters: str = _FILTERS,
    lower: bool = True,
    split: str = " ",
    analyzer: Callable[[str], list[str]] | None = None,
) -> list[int]:
    """Encodes a text as a list of word indices in `[1, n)`, by Python's `hash`.

    Despite its name this is `hashing_trick(..., hash_function=hash)`: distinct words may
    share an index, and since Python salts `str` hashes per process (`PYTHONHASHSEED`), the
    indices change from one run to the next.

    Args:
        input_text: the text.
        n: size of the vocabulary; indices are in `[1, n - 1]`.
        filters: characters to remove (see `text_to_word_sequence`).
        lower: whether to lowercase the text first.
        split: the word separator.
        analyzer: optional function from a text to its words, replacing the splitting.

    Returns:
        One int per word.

    Example:
        >>> codes = keratron.preprocessing.text.one_hot("The cat sat on the mat", 50)
        >>> len(codes), codes[0] == codes[4], all(1 <= c < 50 for c in codes)
        (6, True, True)
    """
    return hashing_trick(
        input_text,
        n,
        hash_function=hash,
        filters=filters,
        lower=lower,
        split=split,
        analyzer=analyzer,
    )


def _md5(word: str) -> int:
    return int(hashlib.md5(word.encode()).hexdigest(), 16)


def hashing_trick(
    text: str,
    n: int,
    hash_function: Callable[[str], int] | str | None = None,
    filters: str = _FILTERS,
    lower: bool = True,
    split: str = " ",
    analyzer: Callable[[str], list[str]] | None = None,
) -> list[int]:
    """Encodes a text as a list of word indices in `[1, n)` by hashing each word.

    Index 0 is left free (it is the padding value of `pad_sequences`).

    Args:
        text: the text.
        n: the number of hash buckets; indices are `hash(word) % (n - 1) + 1`.
        hash_function: `None` for Python's `hash` (salted per process, so not stable across
            runs), `"md5"` for a stable hash, or a function from a string to an int.
        filters: characters to remove (see `text_to_word_sequence`).
        lower: whether to lowercase the text first.
        split: the word separator.
        analyzer: optional function from a text to its words, replacing the splitting.

    Returns:
        One int per word.

    Raises:
        ValueError: if `n` is less than 2, or `hash_function` is a string other than "md5".

    Example:
        >>> keratron.preprocessing.text.hashing_trick("Hello world hello", 10, "md5")
        [8, 9, 8]
    """
    if isinstance(hash_function, str):
        if hash_function != "md5":
            raise ValueError(
                "hashing_trick: `hash_function` must be None, 'md5' or a callable. "
                f"Received: hash_function={hash_function!r}"
            )
        hash_function = _md5
    elif hash_function is None:
        hash_function = hash
    if not isinstance(n, (int, np.integer)) or n < 2:
        raise ValueError(
            f"hashing_trick: `n` must be an integer of at least 2 (index 0 is reserved). "
            f"Received: n={n!r}"
        )
    if analyzer is None:
        words = text_to_word_sequence(text, filters=filters, lower=lower, split=split)
    else:
        words = analyzer(text)
    return [hash_function(word) % (n - 1) + 1 for word in words]


class Tokenizer:
    """Maps the words (or characters) of texts to integer indices, most frequent first.

    `fit_on_texts` counts the words; index 1 goes to the most frequent one (or to `oov_token`
    when it is given), ties keep the order of first appearance, and 0 is never used. Only the
    indices below `num_words` are kept when texts are converted.

    Args:
        num_words: keep only the `num_words - 1` most frequent words when converting texts
            (`None` keeps all of them); fitting always indexes every word.
        filters: characters removed from the texts (see `text_to_word_sequence`).
        lower: whether to lowercase the texts.
        split: the word separator.
        char_level: index characters instead of words.
        oov_token: if given, it takes index 1 and replaces out-of-vocabulary words in
            `texts_to_sequences` (otherwise they are dropped).
        analyzer: optional function from a text to its words, replacing the splitting.
        document_count: the number of texts already seen (set when loading a tokenizer).

    Attributes:
        word_counts: `OrderedDict` of word -> occurrences, in order of first appearance.
        word_docs: word -> number of texts containing it.
        index_docs: index -> number of texts containing it.
        word_index: word -> index.
        index_word: index -> word.

    Example:
        >>> tokenizer = keratron.preprocessing.text.Tokenizer(num_words=3, oov_token="?")
        >>> tokenizer.fit_on_texts(["a b b", "b c"])
        >>> tokenizer.word_index
        {'?': 1, 'b': 2, 'a': 3, 'c': 4}
        >>> tokenizer.texts_to_sequences(["b a d"])
        [[2, 1, 1]]
    """

    def __init__(
        self,
        num_words: int | None = None,
        filters: str = _FILTERS,
        lower: bool = True,
        split: str = " ",
        char_level: bool = False,
        oov_token: str | None = None,
        analyzer: Callable[[str], list[str]] | None = None,
        **kwargs,
    ):
        if "nb_words" in kwargs:
            warnings.warn(
                "The `nb_words` argument in `Tokenizer` has been renamed `num_words`.",
                stacklevel=2,
            )
            num_words = kwargs.pop("nb_words")
        document_count = kwargs.pop("document_count", 0)
        if kwargs:
            raise TypeError(f"Tokenizer: unrecognized keyword arguments. Received: {kwargs}")
        self.word_counts: collections.OrderedDict = collections.OrderedDict()
        self.word_docs: collections.defaultdict = collections.defaultdict(int)
        self.filters = filters
        self.split = split
        self.lower = lower
        self.num_words = num_words
        self.document_count = document_count
        self.char_level = char_level
        self.oov_token = oov_token
        self.index_docs: collections.defaultdict = collections.defaultdict(int)
        self.word_index: dict = {}
        self.index_word: dict = {}
        self.analyzer = analyzer

    def _tokens(self, text):
        # A list is taken as already tokenized, as with char_level a string is its characters.
        if self.char_level or isinstance(text, list):
            if self.lower:
                return [t.lower() for t in text] if isinstance(text, list) else text.lower()
            return text
        if self.analyzer is not None:
            return self.analyzer(text)
        return text_to_word_sequence(text, filters=self.filters, lower=self.lower, split=self.split)

    def fit_on_texts(self, texts: Iterable[str | list[str]]) -> None:
        """Counts the words of `texts` and rebuilds `word_index` from all counts so far.

        Args:
            texts: strings, or lists of strings taken as already-split words.
        """
        for text in texts:
            self.document_count += 1
            tokens = self._tokens(text)
            for token in tokens:
                self.word_counts[token] = self.word_counts.get(token, 0) + 1
            for token in set(tokens):
                self.word_docs[token] += 1
        # sorted() is stable: words of equal count keep their order of first appearance.
        by_count = sorted(self.word_counts.items(), key=lambda item: item[1], reverse=True)
        vocabulary = ([] if self.oov_token is None else [self.oov_token]) + [w for w, _ in by_count]
        self.word_index = dict(zip(vocabulary, range(1, len(vocabulary) + 1)))
        self.index_word = {index: word for word, index in self.word_index.items()}
        for word, count in self.word_docs.items():
            self.index_docs[self.word_index[word]] = count

    def fit_on_sequences(self, sequences: list[list[int]]) -> None:
        """Counts, for `tfidf` matrices, the documents each index appears in.

        Args:
            sequences: lists of word indices.
        """
        self.document_count += len(sequences)
        for sequence in sequences:
            for index in set(sequence):
                self.index_docs[index] += 1

    def texts_to_sequences(self, texts: Iterable[str | list[str]]) -> list[list[int]]:
        """Converts texts to lists of word indices.

        Words outside the vocabulary, or whose index is `num_words` or more, become the index
        of `oov_token`, or are dropped without one.

        Args:
            texts: strings, or lists of strings taken as already-split words.

        Returns:
            One list of ints per text.
        """
        return list(self.texts_to_sequences_generator(texts))

    def texts_to_sequences_generator(self, texts: Iterable[str | list[str]]) -> Iterator[list[int]]:
        """Yields `texts_to_sequences` one text at a time.

        Args:
            texts: strings, or lists of strings taken as already-split words.

        Yields:
            A list of ints per text.
        """
        oov_index = self.word_index.get(self.oov_token)
        for text in texts:
            sequence = []
            for token in self._tokens(text):
                index = self.word_index.get(token)
                if index is None:
                    if self.oov_token is not None:
                        sequence.append(oov_index)
                elif self.num_words and index >= self.num_words:
                    if oov_index is not None:
                        sequence.append(oov_index)
                else:
                    sequence.append(index)
            yield sequence

    def sequences_to_texts(self, sequences: Iterable[Iterable[int]]) -> list[str]:
        """Converts lists of word indices back to space-joined texts.

        Indices with no word, or of `num_words` or more, become `oov_token`, or are dropped
        without one.

        Args:
            sequences: lists of ints.

        Returns:
            One string per sequence.
        """
        return list(self.sequences_to_texts_generator(sequences))

    def sequences_to_texts_generator(self, sequences: Iterable[Iterable[int]]) -> Iterator[str]:
        """Yields `sequences_to_texts` one sequence at a time.

        Args:
            sequences: lists of ints.

        Yields:
            A string per sequence.
        """
        oov_index = self.word_index.get(self.oov_token)
        for sequence in sequences:
            words = []
            for index in sequence:
                word = self.index_word.get(index)
                if word is None:
                    if self.oov_token is not None:
                        words.append(self.index_word[oov_index])
                elif self.num_words and index >= self.num_words:
                    if oov_index is not None:
                        words.append(self.index_word[oov_index])
                else:
                    words.append(word)
            yield " ".join(words)

    def texts_to_matrix(self, texts: Iterable[str | list[str]], mode: str = "binary") -> np.ndarray:
        """Converts texts to a `(len(texts), num_words)` float64 matrix.

        Args:
            texts: strings, or lists of strings taken as already-split words.
            mode: one of "binary", "count", "tfidf", "freq" (see `sequences_to_matrix`).

        Returns:
            The matrix.
        """
        return self.sequences_to_matrix(self.texts_to_sequences(texts), mode=mode)

    def sequences_to_matrix(self, sequences: list[list[int]], mode: str = "binary") -> np.ndarray:
        """Converts lists of word indices to a `(len(sequences), num_words)` float64 matrix.

        Column `j` of row `i` holds, for index `j` in sequence `i`: 1 ("binary"), its count
        ("count"), its count over the sequence's length ("freq"), or
        `(1 + log(count)) * log(1 + document_count / (1 + documents containing j))` ("tfidf").
        Indices of `num_words` or more are ignored. Without `num_words` there are
        `len(word_index) + 1` columns.

        Args:
            sequences: lists of ints.
            mode: one of "binary", "count", "tfidf", "freq".

        Returns:
            The matrix.

        Raises:
            ValueError: if `mode` is unknown, if the tokenizer has neither `num_words` nor a
                fitted vocabulary, or for "tfidf" before any fitting.

        Example:
            >>> tokenizer = keratron.preprocessing.text.Tokenizer(num_words=4)
            >>> tokenizer.sequences_to_matrix([[1, 2, 2], [3, 9]], mode="count")
            array([[0., 1., 2., 0.],
                   [0., 0., 0., 1.]])
        """
        if mode not in _MATRIX_MODES:
            raise ValueError(
                f"Tokenizer.sequences_to_matrix: `mode` must be one of {_MATRIX_MODES}. "
                f"Received: mode={mode!r}"
            )
        if self.num_words:
            num_words = self.num_words
        elif self.word_index:
            num_words = len(self.word_index) + 1
        else:
            raise ValueError(
                "Tokenizer.sequences_to_matrix: specify a dimension (the `num_words` argument) "
                "or fit the tokenizer on some texts first. Received: num_words=None and an "
                "empty word_index"
            )
        if mode == "tfidf" and not self.document_count:
            raise ValueError(
                "Tokenizer.sequences_to_matrix: fit the tokenizer on some data before using "
                "mode='tfidf'. Received: document_count=0"
            )
        matrix = np.zeros((len(sequences), num_words))
        for row, sequence in enumerate(sequences):
            if not sequence:
                continue
            counts = collections.Counter(j for j in sequence if j < num_words)
            for j, count in counts.items():
                if mode == "count":
                    matrix[row, j] = count
                elif mode == "freq":
                    matrix[row, j] = count / len(sequence)
                elif mode == "binary":
                    matrix[row, j] = 1
                else:
                    tf = 1 + np.log(count)
                    idf = np.log(1 + self.document_count / (1 + self.index_docs.get(j, 0)))
                    matrix[row, j] = tf * idf
        return matrix

    def get_config(self) -> dict:
        """The tokenizer's settings and vocabulary; the dictionaries are JSON strings.

        Returns:
            A JSON-serializable dict (the `analyzer` function is not included).
        """
        return {
            "num_words": self.num_words,
            "filters": self.filters,
            "lower": self.lower,
            "split": self.split,
            "char_level": self.char_level,
            "oov_token": self.oov_token,
            "document_count": self.document_count,
            "word_counts": json.dumps(self.word_counts),
            "word_docs": json.dumps(self.word_docs),
            "index_docs": json.dumps(self.index_docs),
            "index_word": json.dumps(self.index_word),
            "word_index": json.dumps(self.word_index),
        }

    def to_json(self, **kwargs) -> str:
        """The tokenizer as a JSON string, for `tokenizer_from_json`.

        Args:
            **kwargs: passed to `json.dumps`.

        Returns:
            The JSON string.
        """
        return json.dumps(
            {"class_name": type(self).__name__, "config": self.get_config()}, **kwargs
        )


def tokenizer_from_json(json_string: str) -> Tokenizer:
    """Rebuilds a `Tokenizer` from `Tokenizer.to_json()` (keratron's or Keras's).

    Args:
        json_string: the JSON string.

    Returns:
        The tokenizer, with its vocabulary and counts.

    Raises:
        ValueError: if the JSON is not a tokenizer's.

    Example:
        >>> tokenizer = keratron.preprocessing.text.Tokenizer()
        >>> tokenizer.fit_on_texts(["b a b"])
        >>> keratron.preprocessing.text.tokenizer_from_json(tokenizer.to_json()).word_index
        {'b': 1, 'a': 2}
    """
    data = json.loads(json_string)
    if not isinstance(data, dict) or not isinstance(data.get("config"), dict):
        raise ValueError(
            "tokenizer_from_json: expected the JSON of `Tokenizer.to_json()`, an object with a "
            f"'config' object. Received: {json_string[:100]!r}"
        )
    config = dict(data["config"])
    word_counts = json.loads(config.pop("word_counts"))
    word_docs = json.loads(config.pop("word_docs"))
    index_docs = json.loads(config.pop("index_docs"))
    index_word = json.loads(config.pop("index_word"))
    word_index = json.loads(config.pop("word_index"))
    tokenizer = Tokenizer(**config)
    # The types of a fresh tokenizer, so that fitting it further works (JSON keys are strings).
    tokenizer.word_counts = collections.OrderedDict(word_counts)
    tokenizer.word_docs = collections.defaultdict(int, word_docs)
    tokenizer.index_docs = collections.defaultdict(int, {int(k): v for k, v in index_docs.items()})
    tokenizer.index_word = {int(k): v for k, v in index_word.items()}
    tokenizer.word_index = word_index
    return tokenizer
