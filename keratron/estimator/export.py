"""Serving inputs and outputs for `Estimator.export_saved_model`.

A `serving_input_receiver_fn` runs while the serving graph is traced: it creates graph
inputs with `placeholder` (or through `build_raw_serving_input_receiver_fn`) and returns a
`ServingInputReceiver` saying which inputs the exported signature takes and which features
the `model_fn` receives. Shapes are static: a batch dimension given as None becomes the
export's batch size (`default_batch_size`, else 1), and the loaded model runs any batch by
splitting it into chunks of that size.

String values cannot live in tensors: a "string" placeholder is an int64 input that
receives 64-bit fingerprints of the strings (`keratron.feature_column.fingerprint`), and
string outputs (a classifier's class names) are vocabulary lookups applied to integer
outputs after the graph has run (`_HostLookup`); both are stored as data in the export.
"""

from __future__ import annotations

import threading

import numpy as np
import torch

from keratron.autodiff.dtypes import standardize_dtype, to_torch_dtype
from keratron.autodiff.tensor import Tensor

__all__ = [
    "ExportOutput",
    "PredictOutput",
    "ClassificationOutput",
    "RegressionOutput",
    "ServingInputReceiver",
    "TensorServingInputReceiver",
    "build_raw_serving_input_receiver_fn",
    "placeholder",
]

DEFAULT_SERVING_SIGNATURE_DEF_KEY = "serving_default"


class _HostLookup:
    """A string output: `vocabulary[ids]` computed on the host after the graph has run.

    Args:
        ids: an integer Tensor of the `model_fn`.
        vocabulary: the strings, indexed by id.
    """

    def __init__(self, ids: Tensor, vocabulary):
        if not isinstance(ids, Tensor):
            raise TypeError(f"_HostLookup: `ids` must be a Tensor. Received: {type(ids).__name__}")
        self.ids = ids
        self.vocabulary = tuple(str(v) for v in vocabulary)

    @property
    def shape(self):
        return self.ids.shape

    def apply(self, ids) -> np.ndarray:
        table = np.array([v.encode("utf-8") for v in self.vocabulary], dtype=object)
        return table[np.asarray(ids).astype(np.int64)]


class _ExportState(threading.local):
    def __init__(self):
        self.graph = None
        self.batch_size = 1
        self.placeholders = []


_export_state = _ExportState()


def placeholder(dtype, shape, name=None):
    """A serving-graph input; usable only inside a `serving_input_receiver_fn` while
    `export_saved_model` traces it.

    Args:
        dtype: a dtype name ("float32", "int64", ..., or "string" for strings, which the
            exported model receives as fingerprints).
        shape: the input's shape; a leading None is the batch dimension.
        name: optional name (informational).

    Raises:
        ValueError: outside an export, or when a non-leading dimension is None.

    Example:
        >>> def serving_input_receiver_fn():
        ...     x = keratron.estimator.export.placeholder("float32", (None, 4))
        ...     return keratron.estimator.export.ServingInputReceiver({"x": x}, {"x": x})
    """
    graph = _export_state.graph
    if graph is None:
        raise ValueError(
            "placeholder() can only be called inside a serving_input_receiver_fn while "
            "Estimator.export_saved_model traces it."
        )
    shape = tuple(shape)
    if any(d is None for d in shape[1:]):
        raise ValueError(
            f"placeholder: only the leading (batch) dimension may be None. Received: shape={shape}"
        )
    if shape and shape[0] is None:
        shape = (_export_state.batch_size,) + shape[1:]
    is_string = dtype in ("string", str, bytes)
    tdtype = torch.int64 if is_string else to_torch_dtype(standardize_dtype(dtype))
    t = graph.new_input(tuple(int(d) for d in shape), tdtype)
    _export_state.placeholders.append((t, "string" if is_string else standardize_dtype(tdtype)))
    return t


class ExportOutput:
    """Base class of the outputs of an exported signature."""

    @property
    def outputs(self) -> dict:
        raise TypeError(f"{type(self).__name__} does not define `outputs`.")


def _check_output(value, what):
    if not isinstance(value, (Tensor, _HostLookup)):
        raise TypeError(f"{what} must be a Tensor. Received: {type(value).__name__}")
    return value


class PredictOutput(ExportOutput):
    """A generic signature: a Tensor or a dict of named Tensors.

    Example:
        >>> probs = keratron.ops.softmax(keratron.ops.zeros((2, 3)))
        >>> output = keratron.estimator.export.PredictOutput({"probabilities": probs})
        >>> list(output.outputs)
        ['probabilities']
    """

    def __init__(self, outputs):
        if not isinstance(outputs, dict):
            outputs = {"output": outputs}
        for key, value in outputs.items():
            if not isinstance(key, str):
                raise TypeError(f"PredictOutput: keys must be strings. Received: {key!r}")
            _check_output(value, f"PredictOutput[{key!r}]")
        self._outputs = dict(outputs)

    @property
    def outputs(self) -> dict:
        return dict(self._outputs)


class ClassificationOutput(ExportOutput):
    """A classification signature: `scores` (float, per class) and/or `classes` (strings).

    Example:
        >>> probabilities = keratron.ops.softmax(keratron.ops.zeros((2, 3)))
        >>> output = keratron.estimator.export.ClassificationOutput(scores=probabilities)
        >>> output.outputs["scores"].shape
        (2, 3)
    """

    def __init__(self, scores=None, classes=None):
        if scores is None and classes is None:
            raise ValueError("ClassificationOutput: at least one of `scores` and `classes`.")
        if scores is not None:
            _check_output(scores, "ClassificationOutput `scores`")
            if not scores.dtype.startswith("float"):
                raise ValueError(
                    f"ClassificationOutput: `scores` must be a float tensor. Received dtype "
                    f"{scores.dtype}."
                )
        if classes is not None and not isinstance(classes, _HostLookup):
            raise ValueError(
                "ClassificationOutput: `classes` must be string valued (a class-name lookup). "
                f"Received: {type(classes).__name__}"
            )
        self.scores = scores
        self.classes = classes

    @property
    def outputs(self) -> dict:
        out = {}
        if self.scores is not None:
            out["scores"] = self.scores
        if self.classes is not None:
            out["classes"] = self.classes
        return out


class RegressionOutput(ExportOutput):
    """A regression signature: one float Tensor `value` (output key "outputs")."""

    def __init__(self, value):
        _check_output(value, "RegressionOutput `value`")
        if not value.dtype.startswith("float"):
            raise ValueError(
                f"RegressionOutput: `value` must be a float tensor. Received dtype {value.dtype}."
            )
        self.value = value

    @property
    def outputs(self) -> dict:
        return {"outputs": self.value}


def _as_dict(x, default_key, what):
    if isinstance(x, dict):
        out = dict(x)
    elif isinstance(x, Tensor):
        out = {default_key: x}
    else:
        raise TypeError(
            f"{what} must be a Tensor or a dict of Tensors. Received: {type(x).__name__}"
        )
    for key, value in out.items():
        if not isinstance(key, str):
            raise TypeError(f"{what}: keys must be strings. Received: {key!r}")
        if not isinstance(value, Tensor):
            raise TypeError(f"{what}[{key!r}] must be a Tensor. Received: {type(value).__name__}")
    return out


class ServingInputReceiver:
    """The result of a `serving_input_receiver_fn`.

    Args:
        features: a Tensor or dict of Tensors given to the `model_fn` (a single Tensor is
            wrapped as `{"feature": tensor}`, as TensorFlow does).
        receiver_tensors: the placeholders the exported signature takes (a single Tensor is
            named "input").
        receiver_tensors_alternatives: accepted for TensorFlow compatibility; unused.
    """

    def __init__(self, features, receiver_tensors, receiver_tensors_alternatives=None):
        self.features = _as_dict(features, "feature", "ServingInputReceiver `features`")
        self.receiver_tensors = _as_dict(
            receiver_tensors, "input", "ServingInputReceiver `receiver_tensors`"
        )
        self.receiver_tensors_alternatives = receiver_tensors_alternatives


class TensorServingInputReceiver(ServingInputReceiver):
    """Like `ServingInputReceiver`, but the `model_fn` receives `features` as one Tensor."""

    def __init__(self, features, receiver_tensors, receiver_tensors_alternatives=None):
        if not isinstance(features, Tensor):
            raise TypeError(
                "TensorServingInputReceiver: `features` must be a single Tensor. Received: "
                f"{type(features).__name__}"
            )
        super().__init__({"feature": features}, receiver_tensors, receiver_tensors_alternatives)
        self.features = features


def _spec_of(name, value):
    """(shape without batch, dtype name) of an example value or a symbolic input."""
    shape = getattr(value, "shape", None)
    dtype = getattr(value, "dtype", None)
    if shape is None or dtype is None:
        if isinstance(value, (list, tuple, int, float, np.generic)):
            a = np.asarray(value)
            shape, dtype = a.shape, a.dtype
        else:
            raise TypeError(
                f"build_raw_serving_input_receiver_fn: features[{name!r}] must be a Tensor, an "
                f"array or a symbolic input (keratron.Input). Received: {type(value).__name__}"
            )
    if isinstance(value, np.ndarray) and value.dtype.kind in "US":
        dtype = "string"
    elif not isinstance(dtype, str) or dtype != "string":
        dtype = standardize_dtype(dtype)
    shape = tuple(shape)
    if not shape:
        raise ValueError(
            f"build_raw_serving_input_receiver_fn: features[{name!r}] needs a batch dimension. "
            f"Received a scalar."
        )
    return shape[1:], dtype


def build_raw_serving_input_receiver_fn(features, default_batch_size=None):
    """A `serving_input_receiver_fn` whose signature takes the features themselves.

    Args:
        features: dict of feature name to an example Tensor / array or a symbolic input
            (its first dimension is the batch and is ignored), or one such value.
        default_batch_size: the batch size the serving graph is traced with (default 1;
            the loaded model splits other batch sizes into chunks of it).

    Example:
        >>> import tempfile
        >>> cols = [keratron.feature_column.numeric_column("x", shape=(4,))]
        >>> estimator = keratron.estimator.LinearRegressor(cols, model_dir=tempfile.mkdtemp())
        >>> _ = estimator.train(lambda: ({"x": np.ones((2, 4))}, np.ones((2, 1))), steps=1)
        >>> fn = keratron.estimator.export.build_raw_serving_input_receiver_fn(
        ...     {"x": np.zeros((1, 4), "float32")})
        >>> path = estimator.export_saved_model(tempfile.mkdtemp(), fn)
        >>> keratron.saved_model.load(path)(x=np.ones((3, 4), "float32"))["outputs"].shape
        (3, 1)
    """
    single = not isinstance(features, dict)
    specs = {
        name: _spec_of(name, value)
        for name, value in ({"feature": features} if single else features).items()
    }
    if default_batch_size is not None and (
        isinstance(default_batch_size, bool)
        or not isinstance(default_batch_size, int)
        or default_batch_size < 1
    ):
        raise ValueError(
            "build_raw_serving_input_receiver_fn: `default_batch_size` must be a positive int "
            f"or None. Received: {default_batch_size!r}"
        )

    def serving_input_receiver_fn():
        batch = default_batch_size
        tensors = {
            name: placeholder(dtype, (batch,) + shape, name=name)
            for name, (shape, dtype) in specs.items()
        }
        if single:
            return TensorServingInputReceiver(tensors["feature"], tensors)
        return ServingInputReceiver(tensors, tensors)

    return serving_input_receiver_fn
