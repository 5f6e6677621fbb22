"""Vocabulary lookup layers, as in Keras 3: `StringLookup` and `IntegerLookup`.

Both map tokens to indices through a host-side table (strings cannot live in tensors): index
0 is the mask token when `mask_token` is set and `output_mode="int"`, then `num_oov_indices`
OOV indices, then the vocabulary. `adapt` counts tokens and keeps the most frequent, ties
broken by the larger token first (Keras's `np.lexsort((tokens, counts))[::-1]`). Outputs are
int64 Tensors ("tf_idf": floatx), except `StringLookup(invert=True)`, which returns strings as
Keras on torch does (a list for 1-D input; nested lists otherwise).
"""

from __future__ import annotations

import collections
import math

import numpy as np

from keratron.autodiff.tensor import Tensor, convert_to_tensor
from keratron.config import floatx
from keratron.layers.hashing import HostLayer, as_host_array, encode_indices, hash_to_bins

__all__ = ["IntegerLookup", "StringLookup"]

_INT64_MAX = np.iinfo(np.int64).max


def _listify(x):
    if x is None:
        return None
    if isinstance(x, Tensor):
        x = x.numpy()
    if isinstance(x, np.ndarray):
        x = x.tolist()
    return [v.item() if isinstance(v, np.generic) else v for v in x]


def iter_batches(data, steps=None):
    """The batches of `adapt` data: an array-like is one batch (rank 1 made a column)."""
    if isinstance(data, (list, tuple, np.ndarray, Tensor)):
        a = as_host_array(data)
        yield a[:, None] if a.ndim == 1 else a
        return
    for i, batch in enumerate(data):
        if steps is not None and i >= steps:
            break
        yield as_host_array(batch[0] if isinstance(batch, tuple) else batch)


class IndexLookup(HostLayer):
    """The shared machinery of StringLookup and IntegerLookup (Keras's `IndexLookup`)."""

    def __init__(
        self,
        max_tokens,
        num_oov_indices,
        mask_token,
        oov_token,
        vocabulary_dtype,
        vocabulary=None,
        idf_weights=None,
        invert=False,
        output_mode="int",
        sparse=False,
        pad_to_max_tokens=False,
        oov_method="floormod",
        name=None,
        salt=None,
        **kwargs,
    ):
        cls = type(self).__name__
        if max_tokens is not None and max_tokens <= 1:
            raise ValueError(
                f"{cls}: if set, `max_tokens` must be greater than 1. "
                f"Received: max_tokens={max_tokens}"
            )
        if pad_to_max_tokens and max_tokens is None:
            raise ValueError(
                f"{cls}: if pad_to_max_tokens is True, must set `max_tokens`. "
                f"Received: max_tokens={max_tokens}"
            )
        if num_oov_indices < 0:
            raise ValueError(
                f"{cls}: `num_oov_indices` must be greater than or equal to 0. "
                f"Received: num_oov_indices={num_oov_indices}"
            )
        if oov_method not in ("floormod", "farmhash"):
            raise ValueError(
                f"{cls}: `oov_method` must be 'floormod' or 'farmhash'. "
                f"Received: oov_method={oov_method!r}"
            )
        if salt is not None:
            if vocabulary_dtype != "string" and oov_method != "farmhash":
                raise ValueError(
                    "`salt` can only be used when `oov_method='farmhash'`. "
                    f"Received: oov_method={oov_method}"
                )
            if isinstance(salt, (tuple, list)) and len(salt) == 2:
                salt = list(salt)
            elif isinstance(salt, int):
                salt = [salt, salt]
            else:
                raise ValueError(
                    f"The `salt` argument for `{cls}` can only be a tuple of 2 integers, or a "
                    f"single integer. Received: salt={salt}."
                )
        output_mode = {"binary": "multi_hot", "tf-idf": "tf_idf"}.get(output_mode, output_mode)
        if output_mode not in ("int", "one_hot", "multi_hot", "count", "tf_idf"):
            raise ValueError(
                f"{cls}: `output_mode` must be one of 'int', 'one_hot', 'multi_hot', 'count', "
                f"'tf_idf'. Received: output_mode={output_mode!r}"
            )
        if invert and output_mode != "int":
            raise ValueError(
                "`output_mode` must be `'int'` when `invert` is true. "
                f"Received: output_mode={output_mode}"
            )
        if sparse:
            raise ValueError(f"{cls}: keratron has no sparse tensors. Received: sparse=True")
        if idf_weights is not None and output_mode != "tf_idf":
            raise ValueError(
                "`idf_weights` should only be set if `output_mode` is `'tf_idf'`. "
                f"Received: idf_weights={idf_weights} and output_mode={output_mode}"
            )
        self._frozen_vocab_size = kwargs.pop("vocabulary_size", None)
        self._has_input_vocabulary = kwargs.pop("has_input_vocabulary", vocabulary is not None)
        kwargs.pop("trainable", None)
        kwargs.pop("dtype", None)
        kwargs.pop("autocast", None)
        if kwargs:
            raise ValueError(f"{cls}: unrecognized keyword argument(s): {kwargs}")
        super().__init__(name=name, autocast=False)
        self.invert = invert
        self.max_tokens = max_tokens
        self.num_oov_indices = num_oov_indices
        self.mask_token = mask_token
        self.oov_token = oov_token
        self.output_mode = output_mode
        self.sparse = sparse
        self.pad_to_max_tokens = pad_to_max_tokens
        self.vocabulary_dtype = vocabulary_dtype
        self.oov_method = oov_method
        self.salt = salt
        self.input_vocabulary = vocabulary if not isinstance(vocabulary, str) else None
        self.input_idf_weights = idf_weights
        self._tokens = []  # the vocabulary without special tokens
        self._index = {}
        self.idf_weights = None
        if output_mode == "tf_idf":
            if self._has_input_vocabulary and idf_weights is None:
                raise ValueError(
                    "When specifying the `vocabulary` argument, in TF-IDF output mode, the "
                    "`idf_weights` argument must also be provided."
                )
            if idf_weights is not None:
                self.idf_weights = np.asarray(idf_weights, dtype=floatx())
        if vocabulary is not None:
            self.set_vocabulary(vocabulary, idf_weights)
        self.reset_state()

    # ------------------------------------------------------------------ vocabulary
    def _oov_start_index(self):
        return 1 if self.mask_token is not None and self.output_mode == "int" else 0

    def _token_start_index(self):
        return self._oov_start_index() + self.num_oov_indices

    def _standardize_token(self, token):
        return token

    def vocabulary_size(self) -> int:
        """The vocabulary size, including the mask and OOV indices."""
        return len(self._tokens) + self._token_start_index()

    def get_vocabulary(self, include_special_tokens=True) -> list:
        """The vocabulary, in index order (with the mask and OOV tokens unless told not to)."""
        vocab = [self.oov_token] * self._token_start_index() + list(self._tokens)
        if self.mask_token is not None and self.output_mode == "int":
            vocab[0] = self.mask_token
        if not include_special_tokens:
            vocab = vocab[self._token_start_index() :]
        return vocab

    def set_vocabulary(self, vocabulary, idf_weights=None) -> None:
        """Sets the vocabulary (a list, array or text file path) and, for "tf_idf", the idf
        weights, replacing any vocabulary the layer had."""
        if self.output_mode == "tf_idf":
            if idf_weights is None:
                raise ValueError("`idf_weights` must be set if output_mode is 'tf_idf'.")
        elif idf_weights is not None:
            raise ValueError(
                "`idf_weights` should only be set if output_mode is `'tf_idf'`. Received: "
                f"output_mode={self.output_mode} and idf_weights={idf_weights}"
            )
        if isinstance(vocabulary, str):
            if self.output_mode == "tf_idf":
                raise ValueError(
                    "output_mode `'tf_idf'` does not support loading a vocabulary from file."
                )
            try:
                with open(vocabulary, encoding="utf-8") as f:
                    lines = f.read().splitlines()
            except FileNotFoundError as e:
                raise ValueError(f"Vocabulary file {vocabulary} does not exist.") from e
            vocabulary = lines if self.vocabulary_dtype == "string" else [int(v) for v in lines]
        vocabulary = [self._standardize_token(v) for v in as_host_array(vocabulary).tolist()]
        if not vocabulary:
            raise ValueError(f"Cannot set an empty vocabulary. Received: vocabulary={vocabulary}")
        token_start = self._token_start_index()
        special = [self.mask_token] * self._oov_start_index() + [
            self.oov_token
        ] * self.num_oov_indices
        found_special = vocabulary[:token_start] == special
        tokens = vocabulary[token_start:] if found_special else vocabulary
        repeated = [t for t, c in collections.Counter(tokens).items() if c > 1]
        if repeated:
            raise ValueError(
                "The passed vocabulary has at least one repeated term. Please uniquify your "
                f"dataset. The repeated terms are: {repeated}"
            )
        # The OOV token only matters for `invert`; elsewhere it may be a vocabulary term.
        for kind, tok in (
            ("mask", self.mask_token),
            ("OOV", self.oov_token if self.invert else None),
        ):
            if tok is not None and tok in tokens:
                raise ValueError(
                    f"Found reserved {kind} token at unexpected location in `vocabulary`. Note "
                    "that passed `vocabulary` does not need to include the OOV and mask tokens. "
                    "Either remove all mask and OOV tokens, or include them only at the start "
                    f"of the vocabulary in precisely this order: {special}. Received: "
                    f"{kind.lower()}_token={tok} at vocabulary index "
                    f"{len(vocabulary) - 1 - vocabulary[::-1].index(tok)}"
                )
        if self.max_tokens is not None and token_start + len(tokens) > self.max_tokens:
            raise ValueError(
                "Attempted to set a vocabulary larger than the maximum vocab size. Received "
                f"vocabulary size is {token_start + len(tokens)}; `max_tokens` is "
                f"{self.max_tokens}."
            )
        self._set_tokens(tokens)
        if self.output_mode == "tf_idf":
            idf = np.asarray(_listify(idf_weights), dtype="float64")
            if len(idf) != len(vocabulary):
                raise ValueError(
                    "`idf_weights` must be the same length as vocabulary. len(idf_weights) is "
                    f"{len(idf)}; len(vocabulary) is {len(vocabulary)}"
                )
            if idf.ndim != 1:
                raise ValueError("TF-IDF data must be a 1-index array.")
            front = 0 if found_special else token_start
            front_value = 0 if found_special else float(np.average(idf))
            back = 0
            if self.pad_to_max_tokens and self.max_tokens is not None:
                back = self.max_tokens - front - len(idf)
            idf = np.pad(idf, (front, back), constant_values=(front_value, 0))
            self.idf_weights = idf.astype(floatx())

    def _set_tokens(self, tokens):
        self._check_vocab_size_unchanged(len(tokens) + self._token_start_index())
        self._tokens = list(tokens)
        start = self._token_start_index()
        self._index = {t: start + i for i, t in enumerate(self._tokens)}
        self._frozen_vocab_size = self.vocabulary_size()

    def _check_vocab_size_unchanged(self, new_size):
        if self.output_mode == "int" or self.pad_to_max_tokens or not self.built:
            return
        if self._frozen_vocab_size is not None and new_size != self._frozen_vocab_size:
            raise RuntimeError(
                f"When using `output_mode={self.output_mode}` and `pad_to_max_tokens=False`, "
                "the vocabulary size cannot be changed after the layer is called. Old vocab "
                f"size is {self._frozen_vocab_size}, new vocab size is {new_size}"
            )

    # ------------------------------------------------------------------ adapt
    def adapt(self, data, steps=None) -> None:
        """Learns the vocabulary (and, for "tf_idf", idf weights) from `data`.

        Args:
            data: an array or list of tokens, a Tensor, or an iterable of batches such as a
                `keratron.data.Dataset`.
            steps: the number of batches to read from an iterable (default: all).
        """
        self.reset_state()
        for batch in iter_batches(data, steps):
            self.update_state(batch)
        self.finalize_state()

    def reset_state(self) -> None:
        self._token_counts = collections.Counter()
        self._document_counts = collections.Counter()
        self._num_documents = 0

    def update_state(self, data) -> None:
        if self._has_input_vocabulary:
            raise ValueError(
                f"Cannot adapt layer '{self.name}' after setting a static vocabulary via "
                "`vocabulary` argument or `set_vocabulary()` method."
            )
        if not isinstance(data, list):  # a list of documents: token lists of any lengths
            data = as_host_array(data)
            if data.ndim == 0:
                data = data[None]
            if data.ndim == 1:
                data = data[None]
            data = [row.reshape(-1).tolist() for row in data]
        for doc in data:
            doc = [self._standardize_token(t) for t in doc]
            self._token_counts.update(doc)
            if self.output_mode == "tf_idf":
                self._document_counts.update(set(doc))
        self._num_documents += len(data)

    def finalize_state(self) -> None:
        if self._has_input_vocabulary or not self._token_counts:
            return
        counts = self._token_counts
        for special in (self.mask_token, self.oov_token):
            if special is not None:
                counts.pop(special, None)
        tokens = list(counts)
        if self.vocabulary_dtype == "string":
            keys = np.array([t.encode("utf-8") for t in tokens], dtype=object)
        else:
            keys = np.array(tokens, dtype="int64")
        order = np.lexsort((keys, np.array([counts[t] for t in tokens])))[::-1]
        if self.max_tokens:
            order = order[: self.max_tokens - self._token_start_index()]
        tokens = [tokens[i] for i in order]
        self._set_tokens(tokens)
        if self.output_mode == "tf_idf":
            df = np.array([self._document_counts[t] for t in tokens], dtype="float64")
            idf = np.log(1 + self._num_documents / (1 + df))
            mean = float(np.mean(idf)) if idf.size else math.nan
            idf = np.pad(idf, (self._token_start_index(), 0), constant_values=mean)
            if self.pad_to_max_tokens and self.max_tokens is not None:
                idf = np.pad(idf, (0, self.max_tokens - idf.size))
            self.idf_weights = idf.astype(floatx())
        self.reset_state()

    # ------------------------------------------------------------------ call
    def _lookup(self, values: np.ndarray) -> np.ndarray:
        """Index lookup of a host array of tokens, with masking and OOV handling."""
        flat = values.reshape(-1)
        uniques, inverse = np.unique(flat, return_inverse=True) if flat.size else (flat, flat)
        n_oov = self.num_oov_indices
        default = self._oov_start_index() if n_oov == 1 else -1
        idx = np.array([self._index.get(u, default) for u in uniques.tolist()], dtype=np.int64)
        out = idx[inverse.reshape(-1)].reshape(values.shape) if flat.size else idx
        out = out.reshape(values.shape)
        mask = None
        if self.mask_token is not None:
            mask = values == self.mask_token
            out = np.where(mask, 0 if self.output_mode == "int" else _INT64_MAX, out)
        if n_oov == 0:
            missing = out == -1
            if missing.any():
                raise ValueError(
                    "When `num_oov_indices=0` all inputs should be in vocabulary, found OOV "
                    f"values {values[missing].tolist()}, consider setting `num_oov_indices=1`."
                )
        elif n_oov > 1:
            if self.vocabulary_dtype != "string" and self.oov_method != "farmhash":
                oov = np.mod(values.astype(np.int64), n_oov)
            else:
                oov = hash_to_bins(values, n_oov, self.salt)
            out = np.where(out == -1, oov + self._oov_start_index(), out)
        return out

    def _invert(self, values: np.ndarray):
        table = self.get_vocabulary()
        oov = self.oov_token
        start = self._token_start_index()
        size = len(table)

        def token(i):
            if self.mask_token is not None and i == 0:
                return self.mask_token
            return table[i] if start <= i < size else oov

        return np.vectorize(token, otypes=[object])(values.astype(np.int64))

    def _ensure_known_vocab_size(self):
        if self.output_mode == "int" or self.pad_to_max_tokens:
            return
        if self._frozen_vocab_size is None:
            raise RuntimeError(
                f"When using `output_mode={self.output_mode}` and `pad_to_max_tokens=False`, "
                "you must set the layer's vocabulary before calling it. Either pass a "
                "`vocabulary` argument to the layer, or call `adapt` with some sample data."
            )

    def _lookup_and_encode(self, values: np.ndarray) -> np.ndarray:
        self._ensure_known_vocab_size()
        if self.invert:
            return self._invert(values)
        lookups = self._lookup(values)
        if self.output_mode == "int":
            return lookups
        depth = self.max_tokens if self.pad_to_max_tokens else self._frozen_vocab_size
        mode = "count" if self.output_mode == "tf_idf" else self.output_mode
        out = encode_indices(lookups, mode, depth, "int64")
        if self.output_mode == "tf_idf":
            out = out.astype(floatx()) * self.idf_weights
        return out

    def call(self, inputs):
        values = as_host_array(inputs)
        if self.vocabulary_dtype != "string" and not self.invert:
            values = values.astype(np.int64)
        return convert_to_tensor(self._lookup_and_encode(values))

    def compute_output_shape(self, input_shape):
        input_shape = tuple(input_shape)
        if self.output_mode == "int":
            return input_shape
        depth = self.max_tokens if self.pad_to_max_tokens else self._frozen_vocab_size
        if self.output_mode == "one_hot":
            if len(input_shape) > 1 and input_shape[-1] == 1:
                return input_shape[:-1] + (depth,)
            return input_shape + (depth,)
        return input_shape[:-1] + (depth,)

    def _output_dtype(self):
        if self.invert:
            return self.vocabulary_dtype
        return floatx() if self.output_mode == "tf_idf" else "int64"

    def get_config(self):
        return {
            **super().get_config(),
            "invert": self.invert,
            "max_tokens": self.max_tokens,
            "num_oov_indices": self.num_oov_indices,
            "oov_token": self.oov_token,
            "mask_token": self.mask_token,
            "output_mode": self.output_mode,
            "sparse": self.sparse,
            "pad_to_max_tokens": self.pad_to_max_tokens,
            "vocabulary_dtype": self.vocabulary_dtype,
            "idf_weights": _listify(self.input_idf_weights),
            "vocabulary": _listify(self.input_vocabulary),
            "vocabulary_size": self._frozen_vocab_size,
            "oov_method": self.oov_method,
            "salt": self.salt,
        }


class StringLookup(IndexLookup):
    """Maps strings to integer indices from a vocabulary (given, or learned with `adapt`).

    Args:
        max_tokens: the largest vocabulary size, special tokens included (None: no limit).
        num_oov_indices: how many indices out-of-vocabulary tokens hash into (default 1).
        mask_token: a token that maps to 0 (and is dropped by the encoded modes).
        oov_token: the token `invert` gives for OOV indices (default "[UNK]").
        vocabulary: a list or array of strings, or a text file with one per line.
        idf_weights: for "tf_idf", the weights of the vocabulary's tokens.
        invert: map indices back to strings.
        output_mode: "int" (default), "one_hot", "multi_hot", "count" or "tf_idf".
        pad_to_max_tokens: encoded outputs have `max_tokens` columns.
        sparse: only False is accepted.
        encoding: the text encoding of byte inputs (kept in the config).
        salt: a keyed hash for OOV buckets (an int or a pair of ints).

    Example:
        >>> layer = keratron.layers.StringLookup(vocabulary=["a", "b", "c"])
        >>> layer(np.array([["a", "c"], ["d", "b"]])).numpy()
        array([[1, 3],
               [0, 2]])
    """

    def __init__(
        self,
        max_tokens=None,
        num_oov_indices=1,
        mask_token=None,
        oov_token="[UNK]",
        vocabulary=None,
        idf_weights=None,
        invert=False,
        output_mode="int",
        pad_to_max_tokens=False,
        sparse=False,
        encoding="utf-8",
        name=None,
        salt=None,
        **kwargs,
    ):
        kwargs.pop("vocabulary_dtype", None)
        self.encoding = encoding
        super().__init__(
            max_tokens=max_tokens,
            num_oov_indices=num_oov_indices,
            mask_token=mask_token,
            oov_token=oov_token,
            vocabulary=vocabulary,
            idf_weights=idf_weights,
            invert=invert,
            output_mode=output_mode,
            pad_to_max_tokens=pad_to_max_tokens,
            sparse=sparse,
            name=name,
            salt=salt,
            vocabulary_dtype="string",
            **kwargs,
        )

    def _standardize_token(self, token):
        return token.decode(self.encoding) if isinstance(token, bytes) else str(token)

    def call(self, inputs):
        values = as_host_array(inputs)
        out = self._lookup_and_encode(values)
        if self.invert:
            return out.tolist()
        return convert_to_tensor(out)

    def get_config(self):
        config = super().get_config()
        del config["vocabulary_dtype"]
        return {**config, "encoding": self.encoding}


class IntegerLookup(IndexLookup):
    """Maps integers to contiguous indices from a vocabulary (given, or learned with `adapt`).

    Args:
        max_tokens: the largest vocabulary size, special tokens included (None: no limit).
        num_oov_indices: how many indices out-of-vocabulary values map into (default 1).
        mask_token: a value that maps to 0 (and is dropped by the encoded modes).
        oov_token: the value `invert` gives for OOV indices (default -1).
        vocabulary: a list or array of ints, or a text file with one per line.
        vocabulary_dtype: only "int64".
        idf_weights: for "tf_idf", the weights of the vocabulary's tokens.
        invert: map indices back to vocabulary values.
        output_mode: "int" (default), "one_hot", "multi_hot", "count" or "tf_idf".
        sparse: only False is accepted.
        pad_to_max_tokens: encoded outputs have `max_tokens` columns.
        oov_method: "floormod" (default) or "farmhash" for OOV buckets.
        salt: a keyed hash for OOV buckets with "farmhash".

    Example:
        >>> layer = keratron.layers.IntegerLookup(vocabulary=[12, 36, 1138, 42])
        >>> layer(np.array([12, 1000, 42])).numpy()
        array([1, 0, 4])
    """

    def __init__(
        self,
        max_tokens=None,
        num_oov_indices=1,
        mask_token=None,
        oov_token=-1,
        vocabulary=None,
        vocabulary_dtype="int64",
        idf_weights=None,
        invert=False,
        output_mode="int",
        sparse=False,
        pad_to_max_tokens=False,
        oov_method="floormod",
        salt=None,
        name=None,
        **kwargs,
    ):
        if vocabulary_dtype != "int64":
            raise ValueError(
                "Only `vocabulary_dtype='int64'` is supported at this time. "
                f"Received: vocabulary_dtype={vocabulary_dtype}"
            )
        super().__init__(
            max_tokens=max_tokens,
            num_oov_indices=num_oov_indices,
            mask_token=mask_token,
            oov_token=oov_token,
            vocabulary=vocabulary,
            vocabulary_dtype=vocabulary_dtype,
            idf_weights=idf_weights,
            invert=invert,
            output_mode=output_mode,
            sparse=sparse,
            pad_to_max_tokens=pad_to_max_tokens,
            oov_method=oov_method,
            salt=salt,
            name=name,
            **kwargs,
        )

    def _standardize_token(self, token):
        return int(token)

    def call(self, inputs):
        out = super().call(inputs)
        if self.invert:
            return convert_to_tensor(np.asarray(out.numpy(), dtype=np.int64))
        return out

    def _invert(self, values):
        return super()._invert(values).astype(np.int64)

    def get_config(self):
        config = super().get_config()
        for key in ("oov_token", "mask_token"):
            if config[key] is not None:
                config[key] = int(config[key])
        if config["vocabulary"] is not None:
            config["vocabulary"] = [int(v) for v in config["vocabulary"]]
        return config
