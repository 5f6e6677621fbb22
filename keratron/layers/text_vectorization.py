"""TextVectorization, as in Keras 3: standardize, split, n-grams, then a StringLookup.

The text is processed on the host (numpy / Python strings); the indices or encodings come out
as Tensors, as Keras's layer on the torch backend gives them.
"""

from __future__ import annotations

import re

import numpy as np

from keratron.autodiff.tensor import convert_to_tensor
from keratron.config import floatx
from keratron.layers.hashing import HostLayer, as_host_array
from keratron.layers.lookup import StringLookup, iter_batches

__all__ = ["TextVectorization"]

# Keras's DEFAULT_STRIP_REGEX.
_PUNCTUATION = re.compile(r'[!"#$%&()\*\+,-\./:;<=>?@\[\\\]^_`{|}~\']')


class TextVectorization(HostLayer):
    """Turns strings into token indices or bag-of-token encodings.

    Args:
        max_tokens: the largest vocabulary size, mask ("") and OOV ("[UNK]") included.
        standardize: "lower_and_strip_punctuation" (default), "lower", "strip_punctuation",
            None, or a callable on a numpy string array.
        split: "whitespace" (default), "character", None, or a callable on a list of strings.
        ngrams: None, an int n (1..n-grams) or a tuple of n-gram widths.
        output_mode: "int" (default), "multi_hot", "count" or "tf_idf".
        output_sequence_length: in "int" mode, pad or truncate each sequence to this length.
        pad_to_max_tokens: encoded outputs have `max_tokens` columns.
        vocabulary: a list of strings or a file path; idf_weights: for "tf_idf".
        sparse, ragged: only False is accepted (keratron has neither tensor kind).
        encoding: the text encoding of byte inputs.

    Example:
        >>> layer = keratron.layers.TextVectorization(output_sequence_length=3)
        >>> layer.adapt(["the cat sat", "the dog"])
        >>> layer(["the cat"]).numpy()
        array([[2, 5, 0]])
    """

    def __init__(
        self,
        max_tokens=None,
        standardize="lower_and_strip_punctuation",
        split="whitespace",
        ngrams=None,
        output_mode="int",
        output_sequence_length=None,
        pad_to_max_tokens=False,
        vocabulary=None,
        idf_weights=None,
        sparse=False,
        ragged=False,
        encoding="utf-8",
        name=None,
        **kwargs,
    ):
        if sparse or ragged:
            raise ValueError(
                "TextVectorization layer: keratron has no sparse or ragged tensors. "
                f"Received: sparse={sparse}, ragged={ragged}"
            )
        for arg, value, allowed in (
            ("standardize", standardize, ("lower_and_strip_punctuation", "lower")),
            ("split", split, ("whitespace", "character")),
        ):
            allowed = allowed + (("strip_punctuation",) if arg == "standardize" else ())
            if not (value is None or callable(value) or value in allowed):
                raise ValueError(
                    f"TextVectorization: `{arg}` must be one of {allowed}, None or a callable. "
                    f"Received: {arg}={value!r}"
                )
        output_mode = {"binary": "multi_hot", "tf-idf": "tf_idf"}.get(output_mode, output_mode)
        if output_mode not in ("int", "one_hot", "multi_hot", "count", "tf_idf"):
            raise ValueError(
                "TextVectorization: `output_mode` must be one of 'int', 'one_hot', "
                f"'multi_hot', 'count', 'tf_idf'. Received: output_mode={output_mode!r}"
            )
        if not (
            ngrams is None
            or isinstance(ngrams, int)
            or (isinstance(ngrams, tuple) and all(isinstance(n, int) for n in ngrams))
        ):
            raise ValueError(
                "`ngrams` must be None, an integer, or a tuple of integers. "
                f"Received: ngrams={ngrams}"
            )
        if output_mode == "int" and not (
            output_sequence_length is None or isinstance(output_sequence_length, int)
        ):
            raise ValueError(
                "`output_sequence_length` must be either None or an integer when "
                f"`output_mode` is 'int'. Received: output_sequence_length={output_sequence_length}"
            )
        if output_mode != "int" and output_sequence_length is not None:
            raise ValueError(
                "`output_sequence_length` must not be set if `output_mode` is not 'int'. "
                f"Received output_sequence_length={output_sequence_length}."
            )
        has_input_vocabulary = kwargs.pop("has_input_vocabulary", vocabulary is not None)
        vocabulary_size = kwargs.pop("vocabulary_size", None)
        kwargs.setdefault("autocast", False)
        super().__init__(name=name, **kwargs)
        self._standardize = standardize
        self._split = split
        self._ngrams_arg = ngrams
        self._ngrams = tuple(range(1, ngrams + 1)) if isinstance(ngrams, int) else ngrams
        self._ragged = ragged
        self._output_mode = output_mode
        self._output_sequence_length = output_sequence_length
        self._encoding = encoding
        self._lookup_layer = StringLookup(
            max_tokens=max_tokens,
            vocabulary=vocabulary,
            idf_weights=idf_weights,
            pad_to_max_tokens=pad_to_max_tokens,
            mask_token="",
            output_mode=output_mode,
            sparse=sparse,
            has_input_vocabulary=has_input_vocabulary,
            encoding=encoding,
            vocabulary_size=vocabulary_size,
        )

    # ------------------------------------------------------------------ text processing
    def _preprocess(self, inputs) -> list:
        """The token lists of a batch of strings (one list per string)."""
        values = as_host_array(inputs)
        if values.dtype != object:
            values = values.astype(str).astype(object)
        if self._split is not None and values.ndim > 1:
            if values.shape[-1] != 1:
                raise ValueError(
                    "When using `TextVectorization` to tokenize strings, the input rank must "
                    "be 1 or the last shape dimension must be 1. Received: "
                    f"inputs.shape={values.shape} with rank={values.ndim}"
                )
            values = values[..., 0]
        if self._standardize in ("lower", "lower_and_strip_punctuation"):
            values = np.vectorize(str.lower, otypes=[object])(values)
        if self._standardize in ("strip_punctuation", "lower_and_strip_punctuation"):
            values = np.vectorize(lambda s: _PUNCTUATION.sub("", s), otypes=[object])(values)
        if callable(self._standardize):
            values = np.asarray(self._standardize(values)).astype(object)
        if self._split is None:
            docs = [list(row) for row in (values if values.ndim > 1 else values[:, None])]
        elif self._split == "whitespace":
            docs = [s.split() for s in values.reshape(-1).tolist()]
        elif self._split == "character":
            docs = [list(s) for s in values.reshape(-1).tolist()]
        else:
            docs = [list(d) for d in self._split(values.reshape(-1).tolist())]
        if self._ngrams is not None:
            docs = [self._ngram_doc(d) for d in docs]
        return docs

    def _ngram_doc(self, tokens):
        out = []
        for width in self._ngrams:
            out += [" ".join(tokens[i : i + width]) for i in range(len(tokens) - width + 1)]
        return out

    # ------------------------------------------------------------------ vocabulary
    def adapt(self, data, batch_size=None, steps=None) -> None:
        """Learns the vocabulary from strings: a list or array, or a Dataset of batches."""
        self.reset_state()
        for batch in iter_batches(data, steps):
            self.update_state(batch)
        self.finalize_state()

    def update_state(self, data) -> None:
        self._lookup_layer.update_state(self._preprocess(data))

    def finalize_state(self) -> None:
        self._lookup_layer.finalize_state()

    def reset_state(self) -> None:
        self._lookup_layer.reset_state()

    def get_vocabulary(self, include_special_tokens=True) -> list:
        """The vocabulary in index order ("" and "[UNK]" first unless told not to)."""
        return self._lookup_layer.get_vocabulary(include_special_tokens)

    def vocabulary_size(self) -> int:
        return self._lookup_layer.vocabulary_size()

    def set_vocabulary(self, vocabulary, idf_weights=None) -> None:
        self._lookup_layer.set_vocabulary(vocabulary, idf_weights=idf_weights)

    # ------------------------------------------------------------------ call
    def call(self, inputs):
        docs = self._preprocess(inputs)
        lookup = self._lookup_layer
        if self._output_mode != "int":
            rows = [lookup._lookup_and_encode(np.array(d, dtype=object)) for d in docs]
            return convert_to_tensor(np.stack(rows))
        ids = [lookup._lookup(np.array(d, dtype=object)) for d in docs]
        length = self._output_sequence_length
        if length is None:
            length = max((len(i) for i in ids), default=0)
        out = np.zeros((len(ids), length), dtype=np.int64)
        for r, i in enumerate(ids):
            i = i[:length]
            out[r, : len(i)] = i
        return convert_to_tensor(out)

    def compute_output_shape(self, input_shape):
        if self._output_mode == "int":
            return (input_shape[0], self._output_sequence_length)
        if self._split is None:
            if len(input_shape) <= 1:
                input_shape = tuple(input_shape) + (1,)
        else:
            input_shape = tuple(input_shape) + (None,)
        return self._lookup_layer.compute_output_shape(input_shape)

    def _output_dtype(self):
        return floatx() if self._output_mode == "tf_idf" else "int64"

    def get_config(self):
        lookup = self._lookup_layer
        return {
            **super().get_config(),
            "max_tokens": lookup.max_tokens,
            "standardize": self._standardize,
            "split": self._split,
            "ngrams": self._ngrams_arg,
            "output_mode": self._output_mode,
            "output_sequence_length": self._output_sequence_length,
            "pad_to_max_tokens": lookup.pad_to_max_tokens,
            "sparse": lookup.sparse,
            "ragged": self._ragged,
            "vocabulary": lookup.get_config()["vocabulary"],
            "idf_weights": lookup.get_config()["idf_weights"],
            "encoding": self._encoding,
            "vocabulary_size": self.vocabulary_size(),
        }

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        if isinstance(config.get("ngrams"), list):
            config["ngrams"] = tuple(config["ngrams"])
        return cls(**config)
