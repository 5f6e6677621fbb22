"""`LinearClassifier` and `LinearRegressor`: one weight vector per feature column."""

from __future__ import annotations

import math

from keratron import ops
from keratron.estimator.canned.dnn import check_features
from keratron.estimator.canned.head import SUM_OVER_BATCH_SIZE, Head
from keratron.estimator.canned.optimizers import check_optimizer, get_optimizer_instance
from keratron.estimator.estimator import Estimator
from keratron.feature_column import CategoricalColumn, DenseColumn
from keratron.feature_column.dense_features import fingerprint_strings, normalize_feature_columns
from keratron.layers import Layer

__all__ = ["LinearClassifier", "LinearRegressor", "LinearModel", "linear_learning_rate"]

# TensorFlow's rule for a named optimizer: min(0.2, 1 / sqrt(number of feature columns)).
_LEARNING_RATE = 0.2


def linear_learning_rate(num_columns, cap=_LEARNING_RATE) -> float:
    return min(cap, 1.0 / math.sqrt(num_columns))


class LinearModel(Layer):
    """`sum_c weights_c . column_c + bias`, all weights starting at zero.

    Categorical columns (including bucketized ones) add the weight rows of their ids,
    combined per example by `sparse_combiner` ("sum", "mean" or "sqrtn"); dense columns add
    `x @ weights`. Variables: "<column name>/weights" and "bias_weights" under the layer
    (TensorFlow's "linear/linear_model/..." names inside the premade estimators).
    """

    def __init__(
        self, feature_columns, units=1, sparse_combiner="sum", name="linear_model", **kwargs
    ):
        super().__init__(name=name, **kwargs)
        if sparse_combiner not in ("sum", "mean", "sqrtn"):
            raise ValueError(
                "LinearModel: `sparse_combiner` must be 'sum', 'mean' or 'sqrtn'. Received: "
                f"{sparse_combiner!r}"
            )
        self._columns = normalize_feature_columns(feature_columns, "LinearModel")
        self.units = int(units)
        self.sparse_combiner = sparse_combiner
        self._weights = {}
        self._column_variables = {}

    def build(self, input_shape=None):
        for c in self._columns:
            rows = c.num_buckets if isinstance(c, CategoricalColumn) else c.output_dim
            w = self.add_weight(shape=(rows, self.units), initializer="zeros", name="weights")
            w.path = f"{self.path}/{c.name}/weights"
            self._weights[c.name] = w
            if not isinstance(c, CategoricalColumn) and hasattr(c, "create_variables"):
                self._column_variables[c.name] = c.create_variables(self)
        self.bias = self.add_weight(shape=(self.units,), initializer="zeros", name="bias_weights")
        self.built = True

    def _convert_inputs(self, x):
        return super()._convert_inputs(fingerprint_strings(x))

    def call(self, features):
        total = None
        for c in self._columns:
            w = self._weights[c.name]
            if isinstance(c, CategoricalColumn):
                ids = c.ids(features)
                valid = ops.cast(ops.greater_equal(ids, 0), "float32")
                rows = ops.take(w, ops.maximum(ids, 0), axis=0) * ops.expand_dims(valid, -1)
                part = ops.sum(rows, axis=1)
                if self.sparse_combiner != "sum":
                    count = ops.maximum(ops.sum(valid, axis=1, keepdims=True), 1.0)
                    part = part / (count if self.sparse_combiner == "mean" else ops.sqrt(count))
            elif isinstance(c, DenseColumn):
                part = ops.matmul(c.dense_tensor(features, self._column_variables.get(c.name)), w)
            total = part if total is None else total + part
        return total + self.bias


def linear_logits(features, units, feature_columns, sparse_combiner, prefix="linear"):
    from keratron.estimator.canned.dnn import prefix_paths

    model = LinearModel(feature_columns, units=units, sparse_combiner=sparse_combiner)
    logits = model(features)
    prefix_paths(model.variables, prefix)
    return logits, model.trainable_variables


class _Linear(Estimator):
    def __init__(
        self,
        head,
        feature_columns,
        model_dir,
        optimizer,
        config,
        warm_start_from,
        sparse_combiner,
        what,
    ):
        columns = normalize_feature_columns(feature_columns, what)
        if sparse_combiner not in ("sum", "mean", "sqrtn"):
            raise ValueError(
                f"{what}: `sparse_combiner` must be 'sum', 'mean' or 'sqrtn'. Received: "
                f"{sparse_combiner!r}"
            )
        lr = linear_learning_rate(len(columns))
        check_optimizer(optimizer, lr, what)

        def model_fn(features, labels, mode, config):
            check_features(features, what)
            logits, variables = linear_logits(
                features, head.logits_dimension, columns, sparse_combiner
            )

            def train_op_fn(loss):
                return get_optimizer_instance(optimizer, lr, what).minimize(loss, variables)

            return head.create_estimator_spec(features, mode, logits, labels, train_op_fn)

        super().__init__(
            model_fn, model_dir=model_dir, config=config, warm_start_from=warm_start_from
        )
        self._head = head


class LinearClassifier(_Linear):
    """A linear classifier over feature columns (`tf.estimator.LinearClassifier`).

    Args:
        feature_columns: numeric, bucketized, categorical, indicator or embedding columns.
        model_dir: the model directory.
        n_classes: number of classes.
        weight_column: a feature key or numeric_column of per-example weights.
        label_vocabulary: class names when labels are strings.
        optimizer: a name, an optimizer or a callable; default "Ftrl" with learning rate
            min(0.2, 1 / sqrt(number of columns)), as TensorFlow.
        config: a RunConfig.
        warm_start_from: a checkpoint, model directory or WarmStartSettings.
        loss_reduction: "sum_over_batch_size" (default) or "sum".
        sparse_combiner: how several ids of one example combine: "sum", "mean", "sqrtn".

    Example:
        >>> import tempfile
        >>> cols = [keratron.feature_column.numeric_column("x")]
        >>> clf = keratron.estimator.LinearClassifier(cols, model_dir=tempfile.mkdtemp())
        >>> features, labels = {"x": np.array([[-1.0], [1.0]])}, np.array([[0], [1]])
        >>> _ = clf.train(lambda: (features, labels), steps=5)
        >>> [int(p["class_ids"][0]) for p in clf.predict(lambda: features)]
        [0, 1]
    """

    def __init__(
        self,
        feature_columns,
        model_dir=None,
        n_classes=2,
        weight_column=None,
        label_vocabulary=None,
        optimizer="Ftrl",
        config=None,
        warm_start_from=None,
        loss_reduction=SUM_OVER_BATCH_SIZE,
        sparse_combiner="sum",
    ):
        what = "LinearClassifier"
        head = Head(
            "classification",
            n_classes=n_classes,
            weight_column=weight_column,
            label_vocabulary=label_vocabulary,
            loss_reduction=loss_reduction,
            what=what,
        )
        super().__init__(
            head,
            feature_columns,
            model_dir,
            optimizer,
            config,
            warm_start_from,
            sparse_combiner,
            what,
        )


class LinearRegressor(_Linear):
    """A linear regressor over feature columns (`tf.estimator.LinearRegressor`), trained on
    squared error; see `LinearClassifier` for the shared arguments.

    Example:
        >>> import tempfile
        >>> cols = [keratron.feature_column.numeric_column("x")]
        >>> reg = keratron.estimator.LinearRegressor(cols, model_dir=tempfile.mkdtemp())
        >>> features, labels = {"x": np.array([[1.0], [2.0]])}, np.array([[2.0], [4.0]])
        >>> _ = reg.train(lambda: (features, labels), steps=5)
        >>> [round(float(p["predictions"][0]), 2) for p in reg.predict(lambda: features)]
        [1.15, 1.72]
    """

    def __init__(
        self,
        feature_columns,
        model_dir=None,
        label_dimension=1,
        weight_column=None,
        optimizer="Ftrl",
        config=None,
        warm_start_from=None,
        loss_reduction=SUM_OVER_BATCH_SIZE,
        sparse_combiner="sum",
    ):
        what = "LinearRegressor"
        head = Head(
            "regression",
            label_dimension=label_dimension,
            weight_column=weight_column,
            loss_reduction=loss_reduction,
            what=what,
        )
        super().__init__(
            head,
            feature_columns,
            model_dir,
            optimizer,
            config,
            warm_start_from,
            sparse_combiner,
            what,
        )
