"""`keras.utils.FeatureSpace`: one-step preprocessing of structured data (a dict of feature
columns) into a single float vector or a dict of encoded features.

Each feature has a preprocessor (normalization, rescaling, discretization, integer or string
lookup, hashing, or none), learned by `adapt`; categorical features are one-hot (multi-hot)
encoded with `CategoryEncoding`, crosses hash pairs of preprocessed features with
`HashedCrossing`, and the results are concatenated in Keras's order (features by sorted
name, then crosses by sorted name).

Calling a FeatureSpace on a dict of arrays runs eagerly. Calling it on Keras tensors (as
`get_encoded_features` does with `get_inputs()`) records one functional-graph node, so an
end-to-end model can take the raw features; keratron has no string-typed symbolic tensors, so
that needs numeric features only (string features are encoded in the data pipeline, with
`dataset.map(lambda x, y: (feature_space(x), y))`).
"""

from __future__ import annotations

import numpy as np

from keratron import layers, ops
from keratron.autodiff import is_tensor
from keratron.data import Dataset
from keratron.layers import Layer
from keratron.layers.node import KerasTensor, Node
from keratron.saving import (
    deserialize_keras_object,
    register_keras_serializable,
    serialize_keras_object,
)
from keratron.utils.naming import unique_object_name

__all__ = ["Cross", "Feature", "FeatureSpace"]


class Cross:
    """A feature cross: the named features hashed together into `crossing_dim` bins."""

    def __init__(self, feature_names, crossing_dim, output_mode="one_hot"):
        if output_mode not in {"int", "one_hot"}:
            raise ValueError(
                "Invalid value for argument `output_mode`. Expected one of {'int', 'one_hot'}. "
                f"Received: output_mode={output_mode}"
            )
        self.feature_names = tuple(feature_names)
        self.crossing_dim = crossing_dim
        self.output_mode = output_mode

    @property
    def name(self) -> str:
        return "_X_".join(self.feature_names)

    def get_config(self) -> dict:
        return {
            "feature_names": self.feature_names,
            "crossing_dim": self.crossing_dim,
            "output_mode": self.output_mode,
        }

    @classmethod
    def from_config(cls, config):
        return cls(**config)


class Feature:
    """A feature: its input dtype, its preprocessor layer, and how its result is output
    ("int", "one_hot" or "float")."""

    def __init__(self, dtype, preprocessor, output_mode):
        if output_mode not in {"int", "one_hot", "float"}:
            raise ValueError(
                "Invalid value for argument `output_mode`. Expected one of {'int', 'one_hot', "
                f"'float'}}. Received: output_mode={output_mode}"
            )
        self.dtype = dtype
        if isinstance(preprocessor, dict):
            preprocessor = deserialize_keras_object(preprocessor)
        self.preprocessor = preprocessor
        self.output_mode = output_mode

    def get_config(self) -> dict:
        return {
            "dtype": self.dtype,
            "preprocessor": serialize_keras_object(self.preprocessor),
            "output_mode": self.output_mode,
        }

    @classmethod
    def from_config(cls, config):
        return cls(**config)


@register_keras_serializable(package="keratron")
class TFDIdentity(Layer):
    """The preprocessor of a plain "float" feature (Keras's name for it)."""

    def call(self, inputs):
        return inputs


def _as_array(x) -> np.ndarray:
    if hasattr(x, "numpy") and not isinstance(x, np.ndarray):
        x = x.numpy()
    array = np.asarray(x)
    if array.dtype.kind == "U":
        array = array.astype(object)
    return array


def _to_object(config_value, cls):
    if isinstance(config_value, dict) and config_value.get("class_name") == cls.__name__:
        return cls.from_config(config_value["config"])
    return config_value


class FeatureSpace(Layer):
    """Preprocesses and encodes a dict of structured-data features, as Keras's FeatureSpace.

    Args:
        features: a dict of feature name -> a feature type name ("float", "float_rescaled",
            "float_normalized", "float_discretized", "integer_categorical",
            "string_categorical", "integer_hashed", "string_hashed") or a `Feature` from the
            class methods (`FeatureSpace.float_normalized()`, ...).
        output_mode: "concat" (one float32 vector) or "dict" (a dict of encoded features).
        crosses: feature crosses: tuples of feature names, or `FeatureSpace.cross(...)`.
        crossing_dim: hash bins of a cross given as a tuple.
        hashing_dim: hash bins of the "*_hashed" feature types given by name.
        num_discretization_bins: bins of the "float_discretized" type given by name.
        name: the layer's name.

    Example:
        >>> fs = keratron.utils.FeatureSpace(
        ...     {"age": "float_normalized", "city": "string_categorical"})
        >>> fs.adapt({"age": [20.0, 40.0, 60.0], "city": ["a", "b", "a"]})
        >>> fs({"age": [40.0], "city": ["b"]}).shape
        (1, 4)
    """

    @classmethod
    def cross(cls, feature_names, crossing_dim, output_mode="one_hot"):
        return Cross(feature_names, crossing_dim, output_mode=output_mode)

    @classmethod
    def feature(cls, dtype, preprocessor, output_mode):
        return Feature(dtype, preprocessor, output_mode)

    @classmethod
    def float(cls, name=None):
        name = name or unique_object_name("float")
        return Feature("float32", TFDIdentity(name=f"{name}_preprocessor"), "float")

    @classmethod
    def float_rescaled(cls, scale=1.0, offset=0.0, name=None):
        name = name or unique_object_name("float_rescaled")
        preprocessor = layers.Rescaling(scale=scale, offset=offset, name=f"{name}_preprocessor")
        return Feature("float32", preprocessor, "float")

    @classmethod
    def float_normalized(cls, name=None):
        name = name or unique_object_name("float_normalized")
        preprocessor = layers.Normalization(axis=-1, name=f"{name}_preprocessor")
        return Feature("float32", preprocessor, "float")

    @classmethod
    def float_discretized(cls, num_bins, bin_boundaries=None, output_mode="one_hot", name=None):
        name = name or unique_object_name("float_discretized")
        preprocessor = layers.Discretization(
            num_bins=num_bins, bin_boundaries=bin_boundaries, name=f"{name}_preprocessor"
        )
        return Feature("float32", preprocessor, output_mode)

    @classmethod
    def integer_categorical(cls, max_tokens=None, num_oov_indices=1, output_mode="one_hot",
                            name=None):  # fmt: skip
        name = name or unique_object_name("integer_categorical")
        preprocessor = layers.IntegerLookup(
            name=f"{name}_preprocessor", max_tokens=max_tokens, num_oov_indices=num_oov_indices
        )
        return Feature("int32", preprocessor, output_mode)

    @classmethod
    def string_categorical(cls, max_tokens=None, num_oov_indices=1, output_mode="one_hot",
                           name=None):  # fmt: skip
        name = name or unique_object_name("string_categorical")
        preprocessor = layers.StringLookup(
            name=f"{name}_preprocessor", max_tokens=max_tokens, num_oov_indices=num_oov_indices
        )
        return Feature("string", preprocessor, output_mode)

    @classmethod
    def string_hashed(cls, num_bins, output_mode="one_hot", name=None):
        name = name or unique_object_name("string_hashed")
        return Feature(
            "string", layers.Hashing(name=f"{name}_preprocessor", num_bins=num_bins), output_mode
        )

    @classmethod
    def integer_hashed(cls, num_bins, output_mode="one_hot", name=None):
        name = name or unique_object_name("integer_hashed")
        return Feature(
            "int32", layers.Hashing(name=f"{name}_preprocessor", num_bins=num_bins), output_mode
        )

    def __init__(self, features, output_mode="concat", crosses=None, crossing_dim=32,
                 hashing_dim=32, num_discretization_bins=32, name=None):  # fmt: skip
        super().__init__(name=name)
        if not features:
            raise ValueError("The `features` argument cannot be None or empty.")
        self.crossing_dim = crossing_dim
        self.hashing_dim = hashing_dim
        self.num_discretization_bins = num_discretization_bins
        self.features = {n: self._standardize_feature(n, v) for n, v in features.items()}
        self.crosses = []
        for cross in crosses or ():
            cross = _to_object(cross, Cross)
            if not isinstance(cross, Cross):
                if not crossing_dim:
                    raise ValueError(
                        "When specifying `crosses`, the argument `crossing_dim` "
                        "(dimensionality of the crossing space) should be specified as well."
                    )
                if any(key not in self.features for key in cross):
                    raise ValueError(
                        "All features referenced in the `crosses` argument should be present "
                        f"in the `features` dict. Received unknown features: {cross}"
                    )
                cross = Cross(cross, crossing_dim=crossing_dim)
            self.crosses.append(cross)
        self.crosses_by_name = {c.name: c for c in self.crosses}
        if output_mode not in {"dict", "concat"}:
            raise ValueError(
                "Invalid value for argument `output_mode`. Expected one of {'dict', 'concat'}. "
                f"Received: output_mode={output_mode}"
            )
        self.output_mode = output_mode
        self.preprocessors = {n: f.preprocessor for n, f in self.features.items()}
        self.crossers = {c.name: layers.HashedCrossing(c.crossing_dim, name=c.name)
                         for c in self.crosses}  # fmt: skip
        self.one_hot_encoders = {}
        self.inputs = None
        self.encoded_features = None
        self._is_adapted = False
        self._sublayers_built = False

    def _standardize_feature(self, name, feature):
        if isinstance(feature, Feature):
            return feature
        if isinstance(feature, dict):
            return _to_object(feature, Feature)
        makers = {
            "float": lambda: self.float(name=name),
            "float_normalized": lambda: self.float_normalized(name=name),
            "float_rescaled": lambda: self.float_rescaled(name=name),
            "float_discretized": lambda: self.float_discretized(
                name=name, num_bins=self.num_discretization_bins
            ),
            "integer_categorical": lambda: self.integer_categorical(name=name),
            "string_categorical": lambda: self.string_categorical(name=name),
            "integer_hashed": lambda: self.integer_hashed(self.hashing_dim, name=name),
            "string_hashed": lambda: self.string_hashed(self.hashing_dim, name=name),
        }
        if feature not in makers:
            raise ValueError(f"Invalid feature type: {feature}")
        return makers[feature]()

    # ------------------------------------------------------------------ adapt
    def _list_adaptable_preprocessors(self) -> list:
        names = []
        for name in self.features:
            preprocessor = self.preprocessors[name]
            if isinstance(preprocessor, layers.Normalization):
                if getattr(preprocessor, "input_mean", None) is not None:
                    continue
            if hasattr(preprocessor, "adapt"):
                names.append(name)
        return names

    def adapt(self, dataset) -> None:
        """Learns the preprocessors' state (means, vocabularies) from `dataset`: a dict of
        arrays / lists, or a `keratron.data.Dataset` of such dicts (batched or not)."""
        if isinstance(dataset, dict):
            columns = {k: _as_array(v) for k, v in dataset.items()}
        elif isinstance(dataset, Dataset):
            parts = {}
            for element in dataset.as_numpy_iterator():
                for k, v in element.items():
                    parts.setdefault(k, []).append(np.asarray(v).reshape(-1, *np.shape(v)[1:]))
            columns = {k: np.concatenate(v) for k, v in parts.items()}
        else:
            raise ValueError(
                "`adapt()` can only be called on a keratron.data.Dataset or a dict of "
                f"arrays/lists. Received instead: {dataset} (of type {type(dataset)})"
            )
        for name in self._list_adaptable_preprocessors():
            column = columns[name]
            if column.ndim in (0, 1):
                column = column.reshape(-1, 1)
            if column.dtype.kind in "SO":
                column = np.vectorize(_text, otypes=[object])(column)
            self.preprocessors[name].adapt(column)
        self._is_adapted = True
        self._build_encoders()
        self.built = True

    def _check_if_adapted(self):
        if not self._is_adapted:
            if self._list_adaptable_preprocessors():
                raise ValueError(
                    "You need to call `.adapt(dataset)` on the FeatureSpace before you can "
                    "start using it."
                )
            self._is_adapted = True

    def _build_encoders(self):
        """Creates the one-hot encoders and checks the output modes (after adapt)."""
        if self._sublayers_built:
            return
        self._check_if_adapted()
        for name in self._feature_names():
            spec = self.features.get(name) or self.crosses_by_name[name]
            if spec.output_mode != "one_hot":
                if self.output_mode == "concat" and spec.output_mode == "int":
                    raise ValueError(
                        f"Cannot concatenate features because feature '{name}' has not been "
                        "encoded (it has an integer dtype). Consider using `output_mode='dict'`."
                    )
                continue
            preprocessor = self.preprocessors.get(name) or self.crossers.get(name)
            if isinstance(preprocessor, (layers.IntegerLookup, layers.StringLookup)):
                cardinality = preprocessor.vocabulary_size()
            elif isinstance(preprocessor, layers.CategoryEncoding):
                cardinality = preprocessor.num_tokens
            elif isinstance(
                preprocessor, (layers.Discretization, layers.HashedCrossing, layers.Hashing)
            ):
                cardinality = preprocessor.num_bins
            else:
                raise ValueError(
                    f"Feature '{name}' has `output_mode='one_hot'`. However it isn't a standard "
                    "feature and the dimensionality of its output space is not known, thus it "
                    "cannot be one-hot encoded. Try using `output_mode='int'`."
                )
            self.one_hot_encoders[name] = layers.CategoryEncoding(
                num_tokens=cardinality, output_mode="multi_hot"
            )
        self._sublayers_built = True

    def _feature_names(self) -> list:
        return sorted(self.features) + sorted(self.crosses_by_name)

    # ------------------------------------------------------------------ symbolic use
    def get_inputs(self) -> dict:
        """A dict of `Input`s, one per feature, for an end-to-end model (numeric features
        only: keratron has no string-typed symbolic tensors)."""
        self._build_encoders()
        if self.inputs is None:
            strings = [n for n, f in self.features.items() if f.dtype == "string"]
            if strings:
                raise ValueError(
                    f"FeatureSpace.get_inputs: features {strings} are strings, and keratron "
                    "has no string-typed symbolic inputs. Encode the data in its pipeline "
                    "instead (`dataset.map(lambda x, y: (feature_space(x), y))`) and build the "
                    "model on `get_encoded_features()`."
                )
            self.inputs = {
                n: layers.Input(shape=(1,), dtype=f.dtype, name=n) for n, f in self.features.items()
            }
        return self.inputs

    def get_encoded_features(self):
        """The encoded features as Keras tensors: of `get_inputs()` when every feature is
        numeric, else fresh `Input`s of the encoded shapes (to build the model that takes
        the encoded data).

        The lookups and hashes run on the host, as keratron's lookup layers do, so a model
        whose graph holds the FeatureSpace is called directly (`model(data)`) or compiled
        with `run_eagerly=True`; the usual split (encode in the data pipeline, train the
        model on the encoded features) compiles as any model.
        """
        self._build_encoders()
        if self.encoded_features is None:
            if all(f.dtype != "string" for f in self.features.values()):
                self.encoded_features = self(self.get_inputs())
            else:
                widths = self._encoded_widths()
                if self.output_mode == "concat":
                    self.encoded_features = layers.Input(shape=(sum(widths.values()),))
                else:
                    self.encoded_features = {
                        n: layers.Input(shape=(w,), dtype=self._encoded_dtype(n), name=n)
                        for n, w in widths.items()
                    }
        return self.encoded_features

    def _encoded_dtype(self, name) -> str:
        spec = self.features.get(name) or self.crosses_by_name[name]
        return "int64" if spec.output_mode == "int" else "float32"

    def _encoded_widths(self) -> dict:
        return {
            n: self.one_hot_encoders[n].num_tokens if n in self.one_hot_encoders else 1
            for n in self._feature_names()
        }

    def _symbolic_call(self, data):
        widths = self._encoded_widths()
        batch = next(iter(data.values())).shape[0]
        if self.output_mode == "concat":
            outputs = KerasTensor((batch, sum(widths.values())), "float32")
        else:
            outputs = {
                n: KerasTensor((batch, w), self._encoded_dtype(n)) for n, w in widths.items()
            }
        Node(self, (data,), {}, outputs)
        return outputs

    # ------------------------------------------------------------------ call
    def __call__(self, data):
        self._build_encoders()
        if not isinstance(data, dict):
            raise ValueError(
                f"A FeatureSpace can only be called with a dict. Received: data={data} (of type "
                f"{type(data)})"
            )
        if any(isinstance(v, KerasTensor) for v in data.values()):
            return self._symbolic_call(data)
        arrays, rebatched = {}, False
        for name, value in data.items():
            # Tensors stay tensors (a model's compiled step traces through here).
            x = value if is_tensor(value) else _as_array(value)
            if not is_tensor(x) and x.dtype.kind in "SO":
                x = np.vectorize(_text, otypes=[object])(x)
            if x.ndim == 0:
                rebatched = True
            if x.ndim in (0, 1):
                shape = (1, 1) if x.ndim == 0 else (x.shape[0], 1)
                x = ops.reshape(x, shape) if is_tensor(x) else x.reshape(shape)
            arrays[name] = x
        preprocessed = {n: self.preprocessors[n](arrays[n]) for n in self.features}
        crossed = {
            c.name: self.crossers[c.name]([preprocessed[n] for n in c.feature_names])
            for c in self.crosses
        }
        encoded = {}
        for name in self._feature_names():
            x = preprocessed[name] if name in preprocessed else crossed[name]
            if name in self.one_hot_encoders:
                x = self.one_hot_encoders[name](x)
            encoded[name] = x
        if self.output_mode == "concat":
            merged = ops.concatenate([ops.cast(x, "float32") for x in encoded.values()], axis=-1)
            return ops.squeeze(merged, axis=0) if rebatched else merged
        if rebatched:
            encoded = {
                n: ops.squeeze(x, axis=0) if x.ndim == 2 and x.shape[0] == 1 else x
                for n, x in encoded.items()
            }
        return encoded

    def call(self, data):
        return self(data)

    def get_config(self) -> dict:
        def wrap(obj):
            return {"class_name": type(obj).__name__, "config": obj.get_config()}

        return {
            "features": {n: wrap(f) for n, f in self.features.items()},
            "output_mode": self.output_mode,
            "crosses": [wrap(c) for c in self.crosses],
            "crossing_dim": self.crossing_dim,
            "hashing_dim": self.hashing_dim,
            "num_discretization_bins": self.num_discretization_bins,
            "name": self.name,
        }

    @classmethod
    def from_config(cls, config):
        return cls(**config)


def _text(value):
    return value.decode("utf-8") if isinstance(value, bytes) else value
