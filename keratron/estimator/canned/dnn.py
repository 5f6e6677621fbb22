"""`DNNClassifier` and `DNNRegressor`: feed-forward networks over feature columns."""

from __future__ import annotations

from keratron import activations, layers
from keratron.estimator.canned.head import SUM_OVER_BATCH_SIZE, Head
from keratron.estimator.canned.optimizers import check_optimizer, get_optimizer_instance
from keratron.estimator.estimator import Estimator
from keratron.estimator.mode_keys import ModeKeys
from keratron.feature_column.dense_features import DenseFeatures, normalize_feature_columns

__all__ = ["DNNClassifier", "DNNRegressor"]

# TensorFlow's default learning rate for a named optimizer of the DNN estimators.
_LEARNING_RATE = 0.05


def check_features(features, what):
    if not isinstance(features, dict):
        raise ValueError(
            f"{what}: features should be a dict of tensors keyed by feature name. Received: "
            f"{type(features).__name__}"
        )


def prefix_paths(variables, prefix):
    """Puts variables under `prefix/` (TensorFlow's "dnn/..." and "linear/..." names); done
    before the optimizer names its slots after them."""
    for v in variables:
        if not v.path.startswith(prefix + "/"):
            v.path = f"{prefix}/{v.path}"


def check_hidden_units(hidden_units, what):
    units = list(hidden_units or [])
    if not units or any(isinstance(u, bool) or not isinstance(u, int) or u < 1 for u in units):
        raise ValueError(
            f"{what}: `hidden_units` must be a non-empty list of positive ints. Received: "
            f"{hidden_units!r}"
        )
    return units


def check_dropout(dropout, what):
    if dropout is not None and not 0 <= dropout < 1:
        raise ValueError(f"{what}: `dropout` must be in [0, 1). Received: {dropout!r}")
    return dropout


def dnn_logits(
    features,
    mode,
    units,
    hidden_units,
    feature_columns,
    activation_fn,
    dropout,
    batch_norm,
    prefix="dnn",
):
    """Logits of the DNN tower, and its trainable variables (named under `prefix/`)."""
    training = mode == ModeKeys.TRAIN
    made = [DenseFeatures(feature_columns, name="input_from_feature_columns")]
    net = made[0](features)
    for i, n in enumerate(hidden_units):
        dense = layers.Dense(n, activation=activation_fn, name=f"hiddenlayer_{i}")
        made.append(dense)
        net = dense(net)
        if dropout and training:
            drop = layers.Dropout(dropout, name=f"dropout_{i}")
            made.append(drop)
            net = drop(net, training=True)
        if batch_norm:
            bn = layers.BatchNormalization(momentum=0.999, name=f"batchnorm_{i}")
            made.append(bn)
            net = bn(net, training=training)
    out = layers.Dense(units, name="logits")
    made.append(out)
    logits = out(net)
    variables = [v for layer in made for v in layer.variables]
    prefix_paths(variables, prefix)
    return logits, [v for layer in made for v in layer.trainable_variables]


class _DNN(Estimator):
    def __init__(
        self,
        head,
        hidden_units,
        feature_columns,
        model_dir,
        optimizer,
        activation_fn,
        dropout,
        config,
        warm_start_from,
        batch_norm,
        what,
    ):
        hidden_units = check_hidden_units(hidden_units, what)
        columns = normalize_feature_columns(feature_columns, what)
        dropout = check_dropout(dropout, what)
        activation_fn = (
            activations.get(activation_fn) if activation_fn is not None else activations.relu
        )
        check_optimizer(optimizer, _LEARNING_RATE, what)

        def model_fn(features, labels, mode, config):
            check_features(features, what)
            logits, variables = dnn_logits(
                features,
                mode,
                head.logits_dimension,
                hidden_units,
                columns,
                activation_fn,
                dropout,
                batch_norm,
            )

            def train_op_fn(loss):
                opt = get_optimizer_instance(optimizer, _LEARNING_RATE, what)
                return opt.minimize(loss, variables)

            return head.create_estimator_spec(features, mode, logits, labels, train_op_fn)

        super().__init__(
            model_fn, model_dir=model_dir, config=config, warm_start_from=warm_start_from
        )
        self._head = head


class DNNClassifier(_DNN):
    """A feed-forward classifier over feature columns (`tf.estimator.DNNClassifier`).

    Layers: `DenseFeatures` -> one Dense per entry of `hidden_units` (with
    `activation_fn`, optional dropout while training and batch normalization) -> a logits
    layer; variables are named "dnn/hiddenlayer_<i>/kernel", ..., "dnn/logits/bias".

    Args:
        hidden_units: units per hidden layer, e.g. `[10, 10]`.
        feature_columns: dense feature columns.
        model_dir: the model directory.
        n_classes: number of classes (2: one logit and sigmoid; more: softmax).
        weight_column: a feature key or numeric_column of per-example weights.
        label_vocabulary: class names when labels are strings.
        optimizer: a name (with learning rate 0.05), an optimizer or a callable; default
            "Adagrad".
        activation_fn: the hidden layers' activation (default relu).
        dropout: probability of dropping a hidden unit while training.
        config: a RunConfig.
        warm_start_from: a checkpoint, model directory or WarmStartSettings.
        loss_reduction: "sum_over_batch_size" (default) or "sum".
        batch_norm: batch normalization after each hidden layer.

    Example:
        >>> import tempfile
        >>> cols = [keratron.feature_column.numeric_column(k) for k in ["a", "b"]]
        >>> clf = keratron.estimator.DNNClassifier(hidden_units=[10, 10], feature_columns=cols,
        ...                                        n_classes=3, model_dir=tempfile.mkdtemp())
        >>> features = {"a": np.array([[0.0], [1.0], [2.0]]), "b": np.array([[1.0], [0.0], [1.0]])}
        >>> _ = clf.train(lambda: (features, np.array([[0], [1], [2]])), steps=2)
        >>> next(clf.predict(lambda: features))["probabilities"].shape
        (3,)
    """

    def __init__(
        self,
        hidden_units,
        feature_columns,
        model_dir=None,
        n_classes=2,
        weight_column=None,
        label_vocabulary=None,
        optimizer="Adagrad",
        activation_fn=activations.relu,
        dropout=None,
        config=None,
        warm_start_from=None,
        loss_reduction=SUM_OVER_BATCH_SIZE,
        batch_norm=False,
    ):
        what = "DNNClassifier"
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
            hidden_units,
            feature_columns,
            model_dir,
            optimizer,
            activation_fn,
            dropout,
            config,
            warm_start_from,
            batch_norm,
            what,
        )


class DNNRegressor(_DNN):
    """A feed-forward regressor over feature columns (`tf.estimator.DNNRegressor`), trained
    on squared error; see `DNNClassifier` for the shared arguments.

    Args:
        label_dimension: the number of regression targets per example.

    Example:
        >>> import tempfile
        >>> cols = [keratron.feature_column.numeric_column("x", shape=(3,))]
        >>> reg = keratron.estimator.DNNRegressor(hidden_units=[16], feature_columns=cols,
        ...                                       model_dir=tempfile.mkdtemp())
        >>> features, labels = {"x": np.ones((4, 3))}, np.ones((4, 1))
        >>> _ = reg.train(lambda: (features, labels), steps=2)
        >>> sorted(reg.evaluate(lambda: (features, labels)))
        ['average_loss', 'global_step', 'label/mean', 'loss', 'prediction/mean']
    """

    def __init__(
        self,
        hidden_units,
        feature_columns,
        model_dir=None,
        label_dimension=1,
        weight_column=None,
        optimizer="Adagrad",
        activation_fn=activations.relu,
        dropout=None,
        config=None,
        warm_start_from=None,
        loss_reduction=SUM_OVER_BATCH_SIZE,
        batch_norm=False,
    ):
        what = "DNNRegressor"
        head = Head(
            "regression",
            label_dimension=label_dimension,
            weight_column=weight_column,
            loss_reduction=loss_reduction,
            what=what,
        )
        super().__init__(
            head,
            hidden_units,
            feature_columns,
            model_dir,
            optimizer,
            activation_fn,
            dropout,
            config,
            warm_start_from,
            batch_norm,
            what,
        )
