"""Metric results against Keras 3: the same three update_state batches (with sample weights
where Keras takes them), reset_state, names, configs, identifiers, tapes and tracing."""

import numpy as np
import pytest

import keratron as kt
from tests.conftest import require

keras = require("keras")

M = kt.metrics
R = np.random.default_rng(11)


def _np(x):
    return np.asarray(x.detach().cpu() if hasattr(x, "detach") else x)


def _close(ours, theirs, rtol=1e-6, atol=1e-7):
    np.testing.assert_allclose(np.asarray(ours), _np(theirs), rtol=rtol, atol=atol)


# -------------------------------------------------------------------- batch generators
def f32(a):
    return np.asarray(a, dtype="float32")


def regression(n=6, d=3):
    return f32(R.uniform(0.1, 2.0, (n, d))), f32(R.normal(size=(n, d)))


def positive(n=6, d=3):
    return f32(R.uniform(0.1, 2.0, (n, d))), f32(R.uniform(0.1, 2.0, (n, d)))


def binary(n=8, d=1):
    return f32(R.integers(0, 2, (n, d))), f32(R.uniform(0, 1, (n, d)))


def binary_flat(n=10):
    return f32(R.integers(0, 2, (n,))), f32(R.uniform(0, 1, (n,)))


def onehot(n=6, c=5):
    p = R.uniform(0.05, 1, (n, c))
    return f32(np.eye(c)[R.integers(0, c, n)]), f32(p / p.sum(-1, keepdims=True))


def sparse(n=6, c=5):
    p = R.uniform(0.05, 1, (n, c))
    return R.integers(0, c, (n,)), f32(p / p.sum(-1, keepdims=True))


def sparse_col(n=6, c=5):
    y, p = sparse(n, c)
    return y[:, None], p


def logits(n=6, c=5):
    return f32(np.eye(c)[R.integers(0, c, n)]), f32(2 * R.normal(size=(n, c)))


def sparse_logits(n=6, c=5):
    return R.integers(0, c, (n,)), f32(2 * R.normal(size=(n, c)))


def exact(n=8):
    y = R.integers(0, 3, (n, 1))
    p = np.where(R.uniform(size=(n, 1)) < 0.6, y, R.integers(0, 3, (n, 1)))
    return f32(y), f32(p)


def multilabel(n=8, c=3):
    return f32(R.integers(0, 2, (n, c))), f32(R.uniform(0, 1, (n, c)))


def sequences(n=3, t=4, c=5):
    p = R.uniform(0.05, 1, (n, t, c))
    return R.integers(0, c, (n, t)), f32(p / p.sum(-1, keepdims=True))


def per_sample(y_true):
    return f32(R.uniform(0.2, 2.0, (len(y_true),)))


# (class name, kwargs, generator, weights: True for per-sample weights)
CASES = [
    ("MeanSquaredError", {}, regression, True),
    ("MeanAbsoluteError", {}, regression, True),
    ("MeanAbsolutePercentageError", {}, regression, True),
    ("MeanSquaredLogarithmicError", {}, positive, True),
    ("RootMeanSquaredError", {}, regression, True),
    ("CosineSimilarity", {}, regression, True),
    ("CosineSimilarity", {"axis": 0}, regression, False),
    ("LogCoshError", {}, regression, True),
    ("R2Score", {}, regression, True),
    ("R2Score", {"class_aggregation": "variance_weighted_average"}, regression, False),
    ("R2Score", {"class_aggregation": None}, regression, True),
    ("R2Score", {"num_regressors": 2}, regression, False),
    ("Accuracy", {}, exact, True),
    ("BinaryAccuracy", {}, binary, True),
    ("BinaryAccuracy", {"threshold": 0.3}, binary, False),
    ("CategoricalAccuracy", {}, onehot, True),
    ("SparseCategoricalAccuracy", {}, sparse, True),
    ("SparseCategoricalAccuracy", {}, sparse_col, True),
    ("SparseCategoricalAccuracy", {}, sequences, True),
    ("TopKCategoricalAccuracy", {}, onehot, True),
    ("TopKCategoricalAccuracy", {"k": 2}, onehot, True),
    ("SparseTopKCategoricalAccuracy", {"k": 2}, sparse, True),
    ("SparseTopKCategoricalAccuracy", {"k": 3}, sparse_col, False),
    ("Hinge", {}, binary, True),
    ("SquaredHinge", {}, binary, True),
    ("CategoricalHinge", {}, onehot, True),
    ("KLDivergence", {}, onehot, True),
    ("Poisson", {}, positive, True),
    ("BinaryCrossentropy", {}, binary, True),
    ("BinaryCrossentropy", {"from_logits": True, "label_smoothing": 0.1}, logits, True),
    ("CategoricalCrossentropy", {}, onehot, True),
    ("CategoricalCrossentropy", {"from_logits": True, "label_smoothing": 0.2}, logits, True),
    ("SparseCategoricalCrossentropy", {}, sparse, True),
    ("SparseCategoricalCrossentropy", {"from_logits": True}, sparse_logits, True),
    ("SparseCategoricalCrossentropy", {"ignore_class": 2}, sequences, False),
    ("TruePositives", {}, binary, True),
    ("FalsePositives", {"thresholds": [0.2, 0.5, 0.9]}, binary, True),
    ("TrueNegatives", {}, binary_flat, True),
    ("FalseNegatives", {"thresholds": [0.0, 0.25, 0.5, 0.75, 1.0]}, binary, True),
    ("Precision", {}, binary, True),
    ("Precision", {"thresholds": [0.3, 0.6]}, binary_flat, True),
    ("Precision", {"top_k": 2}, multilabel, True),
    ("Precision", {"class_id": 1}, multilabel, True),
    ("Precision", {"top_k": 2, "class_id": 2, "thresholds": 0.4}, multilabel, False),
    ("Recall", {}, binary, True),
    ("Recall", {"thresholds": [0.0, 0.5, 1.0]}, binary_flat, True),
    ("Recall", {"top_k": 1}, multilabel, True),
    ("Recall", {"class_id": 0}, multilabel, True),
    ("AUC", {}, binary, True),
    ("AUC", {"num_thresholds": 17}, binary_flat, True),
    ("AUC", {"curve": "PR"}, binary, True),
    ("AUC", {"curve": "PR", "summation_method": "minoring"}, binary_flat, True),
    ("AUC", {"curve": "ROC", "summation_method": "majoring"}, binary_flat, False),
    ("AUC", {"curve": "PRGAIN"}, binary, True),
    ("AUC", {"thresholds": [0.1, 0.35, 0.5, 0.8]}, binary, True),
    ("AUC", {"thresholds": [0.25, 0.5, 0.75]}, binary_flat, True),
    ("AUC", {"multi_label": True}, multilabel, True),
    ("AUC", {"multi_label": True, "num_labels": 3, "curve": "PR"}, multilabel, False),
    ("AUC", {"multi_label": True, "label_weights": [0.2, 1.0, 0.5]}, multilabel, True),
    ("AUC", {"label_weights": [0.2, 1.0, 0.5]}, multilabel, True),
    ("AUC", {"from_logits": True}, logits, True),
    ("SensitivityAtSpecificity", {"specificity": 0.6}, binary, True),
    ("SpecificityAtSensitivity", {"sensitivity": 0.4, "num_thresholds": 1}, binary, True),
    ("PrecisionAtRecall", {"recall": 0.5}, binary_flat, True),
    ("RecallAtPrecision", {"precision": 0.5, "class_id": 1}, multilabel, True),
]


def _ids(case):
    name, kwargs, _, _ = case
    return name + ("-" + "-".join(f"{k}={v}" for k, v in kwargs.items()) if kwargs else "")


@pytest.mark.parametrize("case", CASES, ids=[_ids(c) for c in CASES])
def test_metric_matches_keras_over_three_batches(case):
    name, kwargs, gen, weighted = case
    # Auto-names ("precision_3") count per session: start both from a fresh one, so the paths
    # do not depend on what ran before in this process.
    kt.backend.clear_session()
    keras.backend.clear_session()
    ours = getattr(M, name)(**kwargs)
    theirs = getattr(keras.metrics, name)(**kwargs)
    for step in range(3):
        y_true, y_pred = gen()
        # The middle batch is unweighted: weighted and unweighted updates mix in one state.
        sw = per_sample(y_true) if weighted and step != 1 else None
        ours.update_state(y_true, y_pred, sample_weight=sw)
        theirs.update_state(y_true, y_pred, sample_weight=sw)
        _close(ours.result(), theirs.result())
    assert len(ours.variables) == len(theirs.variables)
    for v_ours, v_theirs in zip(ours.variables, theirs.variables):
        assert v_ours.path == v_theirs.path and v_ours.shape == tuple(v_theirs.shape)
        assert not v_ours.trainable
    ours.reset_state()
    theirs.reset_state()
    for v in ours.variables:
        assert not np.any(v.numpy())
    y_true, y_pred = gen()
    _close(ours(y_true, y_pred), theirs(y_true, y_pred))


def test_mean_and_sum_match_keras_with_weight_shapes():
    values = [f32(R.normal(size=(4, 3))) for _ in range(3)]
    weights = [f32(R.uniform(size=(4,))), None, f32(R.uniform(size=(4, 3)))]
    for cls in ("Mean", "Sum"):
        ours, theirs = getattr(M, cls)(), getattr(keras.metrics, cls)()
        for v, w in zip(values, weights):
            ours.update_state(v, sample_weight=w)
            theirs.update_state(v, sample_weight=w)
            _close(ours.result(), theirs.result())
        ours.update_state(2.5)
        theirs.update_state(2.5)
        _close(ours.result(), theirs.result())


def test_mean_metric_wrapper_matches_keras():
    ours = M.MeanMetricWrapper(M.binary_accuracy, threshold=0.7)
    theirs = keras.metrics.MeanMetricWrapper(keras.metrics.binary_accuracy, threshold=0.7)
    for _ in range(3):
        y_true, y_pred = binary()
        sw = per_sample(y_true)
        _close(ours(y_true, y_pred, sw), theirs(y_true, y_pred, sw))


def test_result_is_a_snapshot():
    m = M.Sum()
    m.update_state([1.0, 2.0])
    first = m.result()
    m.update_state([3.0])
    assert float(first) == 3.0 and float(m.result()) == 6.0
    counts = M.TruePositives(thresholds=[0.2, 0.8])
    counts.update_state([1, 1], [0.5, 0.9])
    before = counts.result().numpy().copy()
    counts.update_state([1], [0.9])
    np.testing.assert_array_equal(before, [2.0, 1.0])


def test_metric_functions_match_keras():
    y_true, y_pred = onehot()
    for name in ("categorical_accuracy", "top_k_categorical_accuracy"):
        _close(getattr(M, name)(y_true, y_pred), getattr(keras.metrics, name)(y_true, y_pred))
    y_true, y_pred = sparse()
    for name in ("sparse_categorical_accuracy", "sparse_top_k_categorical_accuracy"):
        _close(getattr(M, name)(y_true, y_pred), getattr(keras.metrics, name)(y_true, y_pred))
    y_true, y_pred = binary()
    _close(M.binary_accuracy(y_true, y_pred), keras.metrics.binary_accuracy(y_true, y_pred))
    ids = np.argsort(-y_pred[:, :1], axis=-1)  # one id per row, from_sorted_ids form
    labels = R.integers(0, 1, (len(ids),))
    _close(
        M.sparse_top_k_categorical_accuracy(labels, ids, k=1, from_sorted_ids=True),
        keras.metrics.sparse_top_k_categorical_accuracy(labels, ids, k=1, from_sorted_ids=True),
    )


def test_in_top_k_counts_ties_and_large_k():
    scores = [[0.1, 0.5, 0.5], [0.3, 0.2, 0.1]]
    np.testing.assert_array_equal(M.in_top_k([2, 2], scores, k=1).numpy(), [True, False])
    np.testing.assert_array_equal(M.in_top_k([0, 2], scores, k=5).numpy(), [True, True])


# -------------------------------------------------------------------- tapes and tracing
def test_updates_are_never_recorded_on_a_tape():
    y_true, y_pred = binary()
    p = kt.convert_to_tensor(y_pred)
    metrics = [M.AUC(), M.MeanSquaredError(), M.BinaryAccuracy(), M.Precision()]
    with kt.GradientTape(persistent=True) as tape:
        tape.watch(p)
        for m in metrics:
            m.update_state(y_true, p)
        assert tape._records == []  # nothing from the metric updates
        loss = kt.ops.sum(p * p)
    assert len(tape._records) == 2  # the loss's multiply and sum: recording still works
    np.testing.assert_allclose(tape.gradient(loss, p).numpy(), 2 * y_pred, rtol=1e-6)


def test_metric_updates_inside_a_traced_function_match_eager():
    traced_metrics = [M.AUC(), M.Mean(), M.SparseTopKCategoricalAccuracy(k=2), M.Precision()]
    eager_metrics = [M.AUC(), M.Mean(), M.SparseTopKCategoricalAccuracy(k=2), M.Precision()]

    def update(metrics, yb, pb, ys, ps):
        metrics[0].update_state(yb, pb)
        metrics[1].update_state(pb)
        metrics[2].update_state(ys, ps)
        metrics[3].update_state(yb, pb)
        return [m.result() for m in metrics]

    from keratron.autodiff.function import function

    step = function(lambda *a: update(traced_metrics, *a))
    for _ in range(3):
        yb, pb = binary_flat()
        ys, ps = sparse()
        args = [kt.convert_to_tensor(a) for a in (yb, pb, ys, ps)]
        traced = step(*args)
        eager = update(eager_metrics, *args)
        for t, e in zip(traced, eager):
            np.testing.assert_allclose(t.numpy(), e.numpy(), rtol=1e-6)
    assert step.trace_count == 1


# -------------------------------------------------------------------- names and configs
CONFIG_CASES = [c for c in CASES if c[0] not in ("R2Score",)] + [
    ("R2Score", {"num_regressors": 1}, None, None),
]


@pytest.mark.parametrize("case", CONFIG_CASES, ids=[_ids(c) for c in CONFIG_CASES])
def test_name_and_config_match_keras_and_round_trip(case):
    name, kwargs, _, _ = case
    ours = getattr(M, name)(name=f"my_{name.lower()}", **kwargs)
    theirs = getattr(keras.metrics, name)(name=f"my_{name.lower()}", **kwargs)
    got, want = ours.get_config(), {k: _plain(v) for k, v in theirs.get_config().items()}
    extra = {"axis"} if name == "CosineSimilarity" else set()  # Keras drops it
    assert {k: v for k, v in got.items() if k not in extra} == want
    again = M.deserialize(M.serialize(ours))
    assert type(again) is type(ours) and again.get_config() == got
    assert type(ours).from_config(got).get_config() == got


def _plain(v):
    if hasattr(v, "tolist"):
        return np.asarray(_np(v)).tolist()
    return v


def test_default_names_match_keras():
    for cls in M.ALL_OBJECTS:
        if cls in (M.Metric, M.MeanMetricWrapper) or cls.__name__ in (
            "SensitivityAtSpecificity",
            "SpecificityAtSensitivity",
            "PrecisionAtRecall",
            "RecallAtPrecision",
            "IoU",
            "MeanIoU",
            "OneHotIoU",
            "OneHotMeanIoU",
        ):
            continue
        ours, theirs = cls(), getattr(keras.metrics, cls.__name__)()
        base = theirs.name.rsplit("_", 1)[0] if theirs.name[-1].isdigit() else theirs.name
        assert ours.name == base or ours.name.startswith(base + "_"), cls.__name__


def test_keras_configs_deserialize_and_ours_load_in_keras():
    theirs = keras.metrics.AUC(curve="PR", num_thresholds=50, name="prauc")
    ours = M.deserialize(keras.metrics.serialize(theirs))
    assert type(ours) is M.AUC and ours.get_config() == theirs.get_config()
    back = keras.metrics.deserialize(M.serialize(M.Precision(thresholds=[0.3, 0.7], top_k=2)))
    assert back.get_config()["thresholds"] == [0.3, 0.7] and back.top_k == 2
    wrapper = M.deserialize(M.serialize(M.MeanMetricWrapper(kt.losses.mean_squared_error)))
    assert wrapper._fn is kt.losses.mean_squared_error


# -------------------------------------------------------------------- get, compile resolution
UNSUPPORTED: set[str] = set()
NEED_ARGS = {
    "MeanMetricWrapper",
    "mean_metric_wrapper",
    "SensitivityAtSpecificity",
    "sensitivity_at_specificity",
    "SpecificityAtSensitivity",
    "specificity_at_sensitivity",
    "PrecisionAtRecall",
    "precision_at_recall",
    "RecallAtPrecision",
    "recall_at_precision",
    "IoU",
    "io_u",
    "MeanIoU",
    "mean_io_u",
    "OneHotIoU",
    "one_hot_io_u",
    "OneHotMeanIoU",
    "one_hot_mean_io_u",
}


def test_get_resolves_every_keras_identifier():
    from keras.src.metrics import ALL_OBJECTS_DICT as keras_names

    for name, cls in keras_names.items():
        if name in UNSUPPORTED:
            with pytest.raises(ValueError, match="metric identifier"):
                M.get(name)
            continue
        if name in NEED_ARGS:
            with pytest.raises(TypeError):
                M.get(name)
            continue
        if name in ("Metric", "metric"):
            assert type(M.get(name)) is M.Metric
            continue
        assert type(M.get(name)).__name__ == cls.__name__, name
    with pytest.raises(ValueError, match="metric identifier"):
        M.get("acc")  # only compile resolves "acc", as in Keras 3
    assert M.get(None) is None
    assert M.get(M.binary_accuracy) is M.binary_accuracy
    assert type(M.get({"class_name": "AUC", "config": {"curve": "PR"}})) is M.AUC


SHAPES = [
    ((8, 1), (8, 1)),
    ((8,), (8, 1)),
    ((8,), (8, 10)),
    ((8, 1), (8, 10)),
    ((8, 10), (8, 10)),
    ((4, 6), (4, 6, 10)),
    ((4, 6, 10), (4, 6, 10)),
]


@pytest.mark.parametrize("identifier", ["accuracy", "acc", "Accuracy"])
@pytest.mark.parametrize("shapes", SHAPES)
def test_resolve_accuracy_follows_keras_compile(identifier, shapes):
    from keras.src.trainers.compile_utils import get_metric

    y_true, y_pred = (np.zeros(s, dtype="float32") for s in shapes)
    want = get_metric(identifier, y_true, y_pred)
    got = M.get_metric(identifier, "mse", shapes[0], shapes[1])
    assert type(got).__name__ == type(want).__name__ and got.name == want.name == identifier


def test_resolve_accuracy_with_binary_crossentropy_is_binary_accuracy():
    for loss in (
        "binary_crossentropy",
        kt.losses.binary_crossentropy,
        kt.losses.BinaryCrossentropy(from_logits=True),
        "bce",
    ):
        metric = M.resolve_accuracy("accuracy", loss, (8, 5), (8, 5))
        assert type(metric) is M.BinaryAccuracy
    assert type(M.resolve_accuracy("acc", "categorical_crossentropy", (8, 5), (8, 5))) is (
        M.CategoricalAccuracy
    )
    with pytest.raises(ValueError, match="y_true_shape"):
        M.resolve_accuracy("accuracy")


def test_get_metric_names_and_wraps_functions():
    from keras.src.trainers.compile_utils import get_metric

    for ident in ("mse", "mae", "binary_crossentropy", "auc", M.binary_accuracy):
        got = M.get_metric(ident, None, (4, 1), (4, 1))
        want = get_metric(
            ident if not callable(ident) else keras.metrics.binary_accuracy,
            np.zeros((4, 1)),
            np.zeros((4, 1)),
        )
        assert got.name == want.name and isinstance(got, M.Metric)


# -------------------------------------------------------------------- base class
def test_custom_metric_subclass_and_errors():
    class Count(M.Metric):
        def __init__(self, name="count", dtype=None):
            super().__init__(name=name, dtype=dtype)
            self.n = self.add_variable(shape=(), initializer="zeros", name="n")

        def update_state(self, values):
            self.n.assign_add(kt.ops.cast(kt.ops.size(values), self.dtype))

        def result(self):
            return kt.ops.copy(self.n)

    m = Count(dtype="float64")
    assert float(m([1, 2, 3])) == 3.0 and m.n.dtype == "float64"
    assert m.variables[0].path == "count/n"
    m.reset_state()
    assert float(m.result()) == 0.0

    class Forgot(M.Metric):
        def __init__(self):
            self.v = self.add_variable(shape=(), initializer="zeros")

    with pytest.raises(RuntimeError, match="super"):
        Forgot()
    with pytest.raises(ValueError, match="Threshold"):
        M.Precision(thresholds=[1.5])
    with pytest.raises(ValueError, match="num_thresholds"):
        M.AUC(num_thresholds=1)
    with pytest.raises(ValueError, match="curve"):
        M.AUC(curve="XY")


def test_loss_instance_as_metric_names_serializes_and_averages():
    from keras.src.trainers.compile_utils import get_metric

    ours = M.get_metric(kt.losses.Huber(delta=0.5, name="hub"))
    want = get_metric(keras.losses.Huber(delta=0.5, name="hub"), None, None)
    assert ours.name == want.name == "hub"
    y_true, y_pred = regression()
    _close(ours(y_true, y_pred), want(y_true, y_pred))
    again = M.deserialize(M.serialize(ours))
    assert type(again._fn) is kt.losses.Huber and again._fn.get_config()["delta"] == 0.5


@pytest.mark.parametrize(
    "module",
    [
        "keratron.metrics",
        "keratron.metrics.metric",
        "keratron.metrics.reduction_metrics",
        "keratron.metrics.accuracy_metrics",
        "keratron.metrics.regression_metrics",
        "keratron.metrics.probabilistic_metrics",
        "keratron.metrics.confusion_metrics",
    ],
)
def test_docstring_examples_run(module):
    import doctest
    import importlib

    result = doctest.testmod(
        importlib.import_module(module),
        extraglobs={"keratron": kt},
        optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE,
    )
    assert result.attempted > 0 and result.failed == 0
