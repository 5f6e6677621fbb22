"""`DNNLinearCombinedClassifier` / `Regressor` ("wide and deep"): the sum of a linear model's
and a DNN's logits, each trained by its own optimizer."""

from __future__ import annotations

from keratron import activations
from keratron.estimator.canned.dnn import (
    check_dropout,
    check_features,
    check_hidden_units,
    dnn_logits,
)
from keratron.estimator.canned.head import SUM_OVER_BATCH_SIZE, Head
from keratron.estimator.canned.linear import linear_learning_rate, linear_logits
from keratron.estimator.canned.optimizers import get_optimizer_instance
from keratron.estimator.estimator import Estimator
from keratron.feature_column.dense_features import normalize_feature_columns

__all__ = ["DNNLinearCombinedClassifier", "DNNLinearCombinedRegressor"]

# TensorFlow's defaults for named optimizers here ("a historical artifact", in its words).
_DNN_LEARNING_RATE = 0.001
_LINEAR_LEARNING_RATE = 0.005


class _Combined(Estimator):
    def __init__(
        self,
        head,
        model_dir,
        linear_feature_columns,
        linear_optimizer,
        dnn_feature_columns,
        dnn_optimizer,
        dnn_hidden_units,
        dnn_activation_fn,
        dnn_dropout,
        config,
        warm_start_from,
        batch_norm,
        linear_sparse_combiner,
        what,
    ):
        if not linear_feature_columns and not dnn_feature_columns:
            raise ValueError(
                f"{what}: either `linear_feature_columns` or `dnn_feature_columns` must be given."
            )
        linear_columns = (
            normalize_feature_columns(linear_feature_columns, what)
            if linear_feature_columns
            else []
        )
        dnn_columns = (
            normalize_feature_columns(dnn_feature_columns, what) if dnn_feature_columns else []
        )
        if dnn_columns:
            dnn_hidden_units = check_hidden_units(dnn_hidden_units, what)
        dnn_dropout = check_dropout(dnn_dropout, what)
        act = (
            activations.get(dnn_activation_fn)
            if dnn_activation_fn is not None
            else activations.relu
        )
        linear_lr = linear_learning_rate(max(len(linear_columns), 1), cap=_LINEAR_LEARNING_RATE)

        def model_fn(features, labels, mode, config):
            check_features(features, what)
            logits, dnn_vars, linear_vars = None, [], []
            if dnn_columns:
                logits, dnn_vars = dnn_logits(
                    features,
                    mode,
                    head.logits_dimension,
                    dnn_hidden_units,
                    dnn_columns,
                    act,
                    dnn_dropout,
                    batch_norm,
                )
            if linear_columns:
                lin, linear_vars = linear_logits(
                    features, head.logits_dimension, linear_columns, linear_sparse_combiner
                )
                logits = lin if logits is None else logits + lin

            def train_op_fn(loss):
                ops_ = []
                if dnn_vars:
                    opt = get_optimizer_instance(dnn_optimizer, _DNN_LEARNING_RATE, what)
                    ops_.append(opt.minimize(loss, dnn_vars))
                if linear_vars:
                    opt = get_optimizer_instance(linear_optimizer, linear_lr, what)
                    ops_.append(opt.minimize(loss, linear_vars))
                return tuple(ops_)

            return head.create_estimator_spec(features, mode, logits, labels, train_op_fn)

        super().__init__(
            model_fn, model_dir=model_dir, config=config, warm_start_from=warm_start_from
        )
        self._head = head


class DNNLinearCombinedClassifier(_Combined):
    """A wide-and-deep classifier (`tf.estimator.DNNLinearCombinedClassifier`).

    Args:
        model_dir: the model directory.
        linear_feature_columns: columns of the linear part.
        linear_optimizer: default "Ftrl" with learning rate min(0.005, 1/sqrt(columns)).
        dnn_feature_columns: dense columns of the DNN part.
        dnn_optimizer: default "Adagrad" with learning rate 0.001.
        dnn_hidden_units: units per hidden layer.
        dnn_activation_fn: default relu.
        dnn_dropout: dropout probability while training.
        n_classes, weight_column, label_vocabulary, loss_reduction: as `DNNClassifier`.
        config, warm_start_from: as `Estimator`.
        batch_norm: batch normalization after each hidden layer.
        linear_sparse_combiner: "sum", "mean" or "sqrtn".

    Example:
        >>> import tempfile
        >>> wide = [keratron.feature_column.categorical_column_with_identity("id", num_buckets=3)]
        >>> deep = [keratron.feature_column.numeric_column("x")]
        >>> est = keratron.estimator.DNNLinearCombinedClassifier(
        ...     linear_feature_columns=wide, dnn_feature_columns=deep, dnn_hidden_units=[32],
        ...     model_dir=tempfile.mkdtemp())
        >>> features = {"id": np.array([[0], [2]]), "x": np.array([[0.5], [-0.5]])}
        >>> _ = est.train(lambda: (features, np.array([[0], [1]])), steps=2)
        >>> next(est.predict(lambda: features))["probabilities"].shape
        (2,)
    """

    def __init__(
        self,
        model_dir=None,
        linear_feature_columns=None,
        linear_optimizer="Ftrl",
        dnn_feature_columns=None,
        dnn_optimizer="Adagrad",
        dnn_hidden_units=None,
        dnn_activation_fn=activations.relu,
        dnn_dropout=None,
        n_classes=2,
        weight_column=None,
        label_vocabulary=None,
        config=None,
        warm_start_from=None,
        loss_reduction=SUM_OVER_BATCH_SIZE,
        batch_norm=False,
        linear_sparse_combiner="sum",
    ):
        what = "DNNLinearCombinedClassifier"
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
            model_dir,
            linear_feature_columns,
            linear_optimizer,
            dnn_feature_columns,
            dnn_optimizer,
            dnn_hidden_units,
            dnn_activation_fn,
            dnn_dropout,
            config,
            warm_start_from,
            batch_norm,
            linear_sparse_combiner,
            what,
        )


class DNNLinearCombinedRegressor(_Combined):
    """A wide-and-deep regressor (`tf.estimator.DNNLinearCombinedRegressor`); see
    `DNNLinearCombinedClassifier`.

    Example:
        >>> import tempfile
        >>> wide = [keratron.feature_column.categorical_column_with_identity("id", num_buckets=3)]
        >>> deep = [keratron.feature_column.numeric_column("x")]
        >>> est = keratron.estimator.DNNLinearCombinedRegressor(
        ...     linear_feature_columns=wide, dnn_feature_columns=deep, dnn_hidden_units=[32],
        ...     model_dir=tempfile.mkdtemp())
        >>> features = {"id": np.array([[0], [2]]), "x": np.array([[0.5], [-0.5]])}
        >>> _ = est.train(lambda: (features, np.array([[1.0], [-1.0]])), steps=2)
        >>> next(est.predict(lambda: features))["predictions"].shape
        (1,)
    """

    def __init__(
        self,
        model_dir=None,
        linear_feature_columns=None,
        linear_optimizer="Ftrl",
        dnn_feature_columns=None,
        dnn_optimizer="Adagrad",
        dnn_hidden_units=None,
        dnn_activation_fn=activations.relu,
        dnn_dropout=None,
        label_dimension=1,
        weight_column=None,
        config=None,
        warm_start_from=None,
        loss_reduction=SUM_OVER_BATCH_SIZE,
        batch_norm=False,
        linear_sparse_combiner="sum",
    ):
        what = "DNNLinearCombinedRegressor"
        head = Head(
            "regression",
            label_dimension=label_dimension,
            weight_column=weight_column,
            loss_reduction=loss_reduction,
            what=what,
        )
        super().__init__(
            head,
            model_dir,
            linear_feature_columns,
            linear_optimizer,
            dnn_feature_columns,
            dnn_optimizer,
            dnn_hidden_units,
            dnn_activation_fn,
            dnn_dropout,
            config,
            warm_start_from,
            batch_norm,
            linear_sparse_combiner,
            what,
        )
