"""Loss values against Keras 3 (same inputs, every reduction, with and without weights),
gradients by central differences, names, configs and identifier resolution."""

import numpy as np
import pytest

import keratron as kt
from tests.conftest import require
from tests.gradcheck import check_grads

keras = require("keras")

L = kt.losses
R = np.random.default_rng(7)
REDUCTIONS = ["sum_over_batch_size", "sum", "mean", "mean_with_sample_weight", "none", None]


def _np(x):
    return np.asarray(x.detach().cpu() if hasattr(x, "detach") else x)


def _close(ours, theirs, rtol=1e-6, atol=1e-7):
    np.testing.assert_allclose(np.asarray(ours), _np(theirs), rtol=rtol, atol=atol)


# -------------------------------------------------------------------- data generators
def reg(shape):
    return R.uniform(0.1, 2.0, shape).astype("float32"), R.normal(size=shape).astype("float32")


def pos(shape):
    return R.uniform(0.1, 2.0, shape).astype("float32"), R.uniform(0.1, 2.0, shape).astype(
        "float32"
    )


def binary(shape):
    return (
        R.integers(0, 2, shape).astype("float32"),
        R.uniform(0.02, 0.98, shape).astype("float32"),
    )


def signed(shape):
    return R.choice([-1.0, 1.0], shape).astype("float32"), R.normal(size=shape).astype("float32")


def probs(shape):
    p = R.uniform(0.05, 1.0, shape)
    p = p / p.sum(-1, keepdims=True)
    labels = np.eye(shape[-1])[R.integers(0, shape[-1], shape[:-1])]
    return labels.astype("float32"), p.astype("float32")


def dists(shape):
    t = R.uniform(0.05, 1.0, shape)
    p = R.uniform(0.05, 1.0, shape)
    return (t / t.sum(-1, keepdims=True)).astype("float32"), (p / p.sum(-1, keepdims=True)).astype(
        "float32"
    )


def logits(shape):
    labels = np.eye(shape[-1])[R.integers(0, shape[-1], shape[:-1])]
    return labels.astype("float32"), (3 * R.normal(size=shape)).astype("float32")


def bin_logits(shape):
    return R.integers(0, 2, shape).astype("float32"), (3 * R.normal(size=shape)).astype("float32")


# (class name, constructor kwargs, data generator, shapes)
CASES = [
    ("MeanSquaredError", {}, reg, [(4, 3), (2, 3, 5), (6,)]),
    ("MeanAbsoluteError", {}, reg, [(4, 3), (2, 3, 5)]),
    ("MeanAbsolutePercentageError", {}, reg, [(4, 3), (2, 3, 5)]),
    ("MeanSquaredLogarithmicError", {}, pos, [(4, 3), (2, 3, 5)]),
    ("Huber", {}, reg, [(4, 3), (2, 3, 5)]),
    ("Huber", {"delta": 0.3}, reg, [(4, 3)]),
    ("LogCosh", {}, reg, [(4, 3), (2, 3, 5)]),
    ("Hinge", {}, binary, [(4, 3), (2, 3, 5)]),
    ("Hinge", {}, signed, [(4, 3)]),
    ("SquaredHinge", {}, binary, [(4, 3)]),
    ("SquaredHinge", {}, signed, [(2, 3, 5)]),
    ("CategoricalHinge", {}, probs, [(4, 3), (2, 3, 5)]),
    ("KLDivergence", {}, dists, [(4, 3), (2, 3, 5)]),
    ("Poisson", {}, pos, [(4, 3), (2, 3, 5)]),
    ("CosineSimilarity", {}, reg, [(4, 3), (2, 3, 5)]),
    ("CosineSimilarity", {"axis": 0}, reg, [(4, 3)]),
    ("BinaryCrossentropy", {}, binary, [(4, 3), (2, 3, 5), (6, 1)]),
    ("BinaryCrossentropy", {"from_logits": True}, bin_logits, [(4, 3), (2, 3, 5)]),
    ("BinaryCrossentropy", {"label_smoothing": 0.2}, binary, [(4, 3)]),
    ("BinaryCrossentropy", {"from_logits": True, "label_smoothing": 0.1}, bin_logits, [(4, 3)]),
    ("BinaryCrossentropy", {"axis": 0}, binary, [(4, 3)]),
    ("BinaryFocalCrossentropy", {}, binary, [(4, 3), (2, 3, 5)]),
    ("BinaryFocalCrossentropy", {"from_logits": True, "gamma": 1.5}, bin_logits, [(4, 3)]),
    (
        "BinaryFocalCrossentropy",
        {"apply_class_balancing": True, "alpha": 0.4, "label_smoothing": 0.1},
        binary,
        [(4, 3)],
    ),
    ("CategoricalCrossentropy", {}, probs, [(4, 3), (2, 3, 5)]),
    ("CategoricalCrossentropy", {"from_logits": True}, logits, [(4, 3), (2, 3, 5)]),
    ("CategoricalCrossentropy", {"label_smoothing": 0.2}, probs, [(4, 3)]),
    ("CategoricalCrossentropy", {"from_logits": True, "label_smoothing": 0.1}, logits, [(4, 5)]),
    ("CategoricalCrossentropy", {"axis": 1, "from_logits": True}, logits, [(2, 3, 5)]),
    ("CategoricalFocalCrossentropy", {}, probs, [(4, 3)]),
    ("CategoricalFocalCrossentropy", {"from_logits": True, "gamma": 1.0}, logits, [(2, 3, 5)]),
    ("Dice", {}, binary, [(4, 3)]),
    ("Dice", {"axis": (1, 2)}, binary, [(2, 3, 5)]),
    ("Tversky", {"alpha": 0.3, "beta": 0.7}, binary, [(4, 3)]),
]


def _weights(values_shape, kind):
    """Weights for unreduced loss values of `values_shape`: one per sample (broadcast along
    other axes), or one per value ("per_step")."""
    if kind == "none":
        return None
    if kind == "per_sample":
        w_shape = values_shape[:1] + (1,) * (len(values_shape) - 1) if values_shape else ()
        return R.uniform(0.0, 2.0, w_shape).astype("float32")
    return R.uniform(0.0, 2.0, values_shape).astype("float32")


def _ids(case):
    name, kwargs, _, _ = case
    return name + ("-" + "-".join(f"{k}={v}" for k, v in kwargs.items()) if kwargs else "")


@pytest.mark.parametrize("case", CASES, ids=[_ids(c) for c in CASES])
def test_loss_matches_keras(case):
    name, kwargs, gen, shapes = case
    for shape in shapes:
        y_true, y_pred = gen(shape)
        values_shape = tuple(
            _np(getattr(keras.losses, name)(reduction=None, **kwargs)(y_true, y_pred)).shape
        )
        sw_kinds = ["none", "per_sample"] + (["per_step"] if len(values_shape) == 2 else [])
        for reduction in REDUCTIONS:
            ours = getattr(L, name)(reduction=reduction, **kwargs)
            theirs = getattr(keras.losses, name)(reduction=reduction, **kwargs)
            for kind in sw_kinds:
                sw = _weights(values_shape, kind)
                got = ours(y_true, y_pred, sample_weight=sw)
                want = theirs(y_true, y_pred, sample_weight=sw)
                assert got.shape == tuple(_np(want).shape), (name, shape, reduction, kind)
                _close(got, want)


FUNCTIONS = [
    ("mean_squared_error", {}, reg),
    ("mean_absolute_error", {}, reg),
    ("mean_absolute_percentage_error", {}, reg),
    ("mean_squared_logarithmic_error", {}, pos),
    ("huber", {"delta": 0.5}, reg),
    ("log_cosh", {}, reg),
    ("hinge", {}, binary),
    ("squared_hinge", {}, signed),
    ("categorical_hinge", {}, probs),
    ("kl_divergence", {}, dists),
    ("poisson", {}, pos),
    ("cosine_similarity", {"axis": -1}, reg),
    ("binary_crossentropy", {"from_logits": True, "label_smoothing": 0.1}, bin_logits),
    ("binary_focal_crossentropy", {"gamma": 3.0}, binary),
    ("categorical_crossentropy", {"label_smoothing": 0.3}, probs),
    ("categorical_focal_crossentropy", {"alpha": 0.5}, probs),
    ("dice", {}, binary),
    ("tversky", {"alpha": 0.2, "beta": 0.8}, binary),
]


@pytest.mark.parametrize("name,kwargs,gen", FUNCTIONS, ids=[f[0] for f in FUNCTIONS])
def test_loss_function_matches_keras(name, kwargs, gen):
    y_true, y_pred = gen((3, 4))
    got = getattr(L, name)(y_true, y_pred, **kwargs)
    want = getattr(keras.losses, name)(y_true, y_pred, **kwargs)
    assert got.shape == tuple(_np(want).shape)
    _close(got, want)


def test_large_logits_stay_finite():
    y_true, _ = logits((4, 3))
    y_pred = np.array([[1e4, -1e4, 0.0]] * 4, dtype="float32")
    for loss in (
        L.CategoricalCrossentropy(from_logits=True),
        L.BinaryCrossentropy(from_logits=True),
    ):
        assert np.isfinite(float(loss(y_true, y_pred)))


# -------------------------------------------------------------------- sparse and ignore_class
@pytest.mark.parametrize("from_logits", [False, True])
@pytest.mark.parametrize("label_shape", [(5,), (5, 1), (2, 3)])
def test_sparse_categorical_crossentropy_matches_keras(from_logits, label_shape):
    classes = 4
    y_true = R.integers(0, classes, label_shape)
    pred_shape = (label_shape[:-1] if label_shape[-1:] == (1,) else label_shape) + (classes,)
    y_pred = logits(pred_shape)[1] if from_logits else probs(pred_shape)[1]
    for reduction in REDUCTIONS:
        ours = L.SparseCategoricalCrossentropy(from_logits=from_logits, reduction=reduction)
        theirs = keras.losses.SparseCategoricalCrossentropy(
            from_logits=from_logits, reduction=reduction
        )
        sw = _weights(pred_shape[:-1], "per_sample")
        _close(ours(y_true, y_pred), theirs(y_true, y_pred))
        _close(ours(y_true, y_pred, sample_weight=sw), theirs(y_true, y_pred, sample_weight=sw))


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_sparse_ignore_class_matches_keras(reduction):
    y_true = np.array([[0, 3, 1], [2, 3, 3]])
    y_pred = logits((2, 3, 4))[1]
    ours = L.SparseCategoricalCrossentropy(from_logits=True, ignore_class=3, reduction=reduction)
    theirs = keras.losses.SparseCategoricalCrossentropy(
        from_logits=True, ignore_class=3, reduction=reduction
    )
    _close(ours(y_true, y_pred), theirs(y_true, y_pred))
    sw = R.uniform(0.5, 2.0, (2, 3)).astype("float32")
    _close(ours(y_true, y_pred, sample_weight=sw), theirs(y_true, y_pred, sample_weight=sw))
    # Ignored entries are zero, and the average runs over the 3 valid entries only.
    per_entry = L.sparse_categorical_crossentropy(y_true, y_pred, True, ignore_class=3)
    assert np.all(per_entry.numpy()[y_true == 3] == 0)


# -------------------------------------------------------------------- gradients
GRAD_CASES = [
    ("mse", lambda: L.MeanSquaredError(dtype="float64"), reg((3, 4))),
    ("huber", lambda: L.Huber(delta=0.7, dtype="float64"), reg((3, 4))),
    ("cce", lambda: L.CategoricalCrossentropy(dtype="float64"), probs((3, 4))),
    (
        "cce_logits_smoothing",
        lambda: L.CategoricalCrossentropy(from_logits=True, label_smoothing=0.1, dtype="float64"),
        logits((3, 4)),
    ),
    ("bce", lambda: L.BinaryCrossentropy(dtype="float64"), binary((3, 4))),
    (
        "bce_logits",
        lambda: L.BinaryCrossentropy(from_logits=True, dtype="float64"),
        bin_logits((3, 4)),
    ),
    (
        "scce_logits",
        lambda: L.SparseCategoricalCrossentropy(from_logits=True, dtype="float64"),
        (R.integers(0, 4, (3,)).astype("float64"), logits((3, 4))[1]),
    ),
]


@pytest.mark.parametrize("name,make,data", GRAD_CASES, ids=[g[0] for g in GRAD_CASES])
@pytest.mark.parametrize("weighted", [False, True])
def test_loss_gradient_wrt_y_pred(name, make, data, weighted):
    loss = make()
    y_true, y_pred = (np.asarray(a, dtype="float64") for a in data)
    sw = R.uniform(0.5, 1.5, (3,)) if weighted else None
    check_grads(lambda p: loss(y_true, p, sample_weight=sw), [y_pred], eps=1e-6, rtol=1e-5)


def test_gradient_matches_torch_autograd_for_mse_and_cce():
    import torch

    y_true, y_pred = logits((3, 4))
    for ours, ref in [
        (L.MeanSquaredError(), lambda p: ((p - torch.tensor(y_true)) ** 2).mean()),
        (
            L.CategoricalCrossentropy(from_logits=True),
            lambda p: torch.nn.functional.cross_entropy(p, torch.tensor(y_true)),
        ),
    ]:
        p = kt.convert_to_tensor(y_pred)
        with kt.GradientTape() as tape:
            tape.watch(p)
            value = ours(y_true, p)
        g = tape.gradient(value, p)
        tp = torch.tensor(y_pred, requires_grad=True)
        ref(tp).backward()
        np.testing.assert_allclose(g.numpy(), tp.grad.numpy(), rtol=1e-5, atol=1e-7)


# -------------------------------------------------------------------- base class, configs
def test_custom_loss_subclass_uses_base_reduction_and_weights():
    class MeanCube(L.Loss):
        def call(self, y_true, y_pred):
            return kt.ops.mean((y_pred - y_true) ** 3, axis=-1)

    loss = MeanCube(reduction="sum")
    value = loss([[0.0, 0.0], [0.0, 0.0]], [[1.0, 2.0], [1.0, 1.0]], sample_weight=[1.0, 2.0])
    assert float(value) == pytest.approx(4.5 * 1 + 1.0 * 2)
    assert loss.name.startswith("mean_cube")
    with pytest.raises(TypeError, match="call"):
        L.Loss()([1.0], [1.0])


def test_invalid_reduction_is_a_value_error():
    with pytest.raises(ValueError, match="reduction"):
        L.MeanSquaredError(reduction="average")


def test_dtype_policy_and_float64():
    loss = L.MeanSquaredError(dtype="float64")
    assert loss.dtype == "float64"
    assert loss([[1.0]], [[0.0]]).dtype == "float64"
    assert L.MeanSquaredError(dtype="mixed_float16").dtype == "float16"


CLASS_NAMES = [
    "MeanSquaredError",
    "MeanAbsoluteError",
    "MeanAbsolutePercentageError",
    "MeanSquaredLogarithmicError",
    "CosineSimilarity",
    "Huber",
    "LogCosh",
    "Hinge",
    "SquaredHinge",
    "CategoricalHinge",
    "KLDivergence",
    "Poisson",
    "BinaryCrossentropy",
    "BinaryFocalCrossentropy",
    "CategoricalCrossentropy",
    "CategoricalFocalCrossentropy",
    "SparseCategoricalCrossentropy",
    "Dice",
    "Tversky",
]


@pytest.mark.parametrize("name", CLASS_NAMES)
def test_default_name_and_config_match_keras(name):
    ours, theirs = getattr(L, name)(), getattr(keras.losses, name)()
    assert ours.name == theirs.name
    got, want = ours.get_config(), theirs.get_config()
    # Huber's delta and CosineSimilarity's axis are kept (Keras drops them); all else equal.
    extra = {"Huber": {"delta"}, "CosineSimilarity": {"axis"}}.get(name, set())
    assert set(got) - extra == set(want)
    assert {k: v for k, v in got.items() if k not in extra} == want
    again = type(ours).from_config(got)
    assert again.get_config() == got


def test_config_round_trip_keeps_arguments():
    loss = L.BinaryFocalCrossentropy(
        apply_class_balancing=True,
        alpha=0.3,
        gamma=1.0,
        from_logits=True,
        reduction="sum",
        name="bfc",
    )
    again = L.deserialize(L.serialize(loss))
    assert type(again) is L.BinaryFocalCrossentropy and again.get_config() == loss.get_config()
    assert L.deserialize(L.serialize(L.Huber(delta=2.5))).get_config()["delta"] == 2.5
    wrapper = L.LossFunctionWrapper(L.huber, delta=2.0, name="w")
    again = L.deserialize(L.serialize(wrapper))
    assert again.fn is L.huber and again.get_config() == wrapper.get_config()
    assert float(again([[0.0]], [[3.0]])) == pytest.approx(4.0)


def test_serialized_form_interoperates_with_keras():
    ours = L.CategoricalCrossentropy(from_logits=True, label_smoothing=0.1, reduction="sum")
    theirs = keras.losses.deserialize(L.serialize(ours))
    assert type(theirs).__name__ == "CategoricalCrossentropy"
    assert theirs.get_config() == ours.get_config()
    back = L.deserialize(keras.losses.serialize(theirs))
    assert back.get_config() == ours.get_config()
    assert L.deserialize(keras.losses.serialize(keras.losses.mean_squared_error)) is L.mse


def test_deserialize_tf_keras_2_config_and_custom_objects():
    legacy = {"class_name": "MeanSquaredError", "config": {"reduction": "auto", "name": "mse"}}
    loss = L.deserialize(legacy)
    assert loss.reduction == "sum_over_batch_size" and loss.name == "mse"

    def my_loss(y_true, y_pred):
        return kt.ops.mean(y_pred - y_true, axis=-1)

    assert L.deserialize(L.serialize(my_loss), custom_objects={"my_loss": my_loss}) is my_loss
    with pytest.raises(ValueError, match="my_loss"):
        L.deserialize(L.serialize(my_loss))


# -------------------------------------------------------------------- get
def test_get_resolves_every_keras_identifier():
    from keras.src.losses import ALL_OBJECTS_DICT as keras_names

    for name, obj in keras_names.items():
        if name == "LossFunctionWrapper":  # needs `fn`: not constructible by name
            with pytest.raises(TypeError):
                L.get(name)
            continue
        got = L.get(name)
        if isinstance(obj, type):
            assert type(got).__name__ == obj.__name__, name
        else:
            assert callable(got) and got.__name__ == obj.__name__, name
    with pytest.raises(ValueError, match="loss identifier"):
        L.get("not_a_loss")
    assert L.get(None) is None
    assert L.get(L.mse) is L.mse
    assert type(L.get({"class_name": "Huber", "config": {"delta": 3.0}})) is L.Huber
    assert L.get("kld") is L.kl_divergence and L.get("logcosh") is L.log_cosh


def test_resolve_loss_crossentropy_rules():
    assert L.resolve_loss("crossentropy", (8, 1), (8, 1)) is L.binary_crossentropy
    assert L.resolve_loss("ce", (8,), (8, 10)) is L.sparse_categorical_crossentropy
    assert L.resolve_loss("CE", (8, 1), (8, 10)) is L.sparse_categorical_crossentropy
    assert L.resolve_loss("crossentropy", (8, 10), (8, 10)) is L.categorical_crossentropy
    assert L.resolve_loss("mse", (8, 10), (8, 10)) is L.mean_squared_error


@pytest.mark.parametrize(
    "module", ["keratron.losses", "keratron.losses.loss", "keratron.losses.losses"]
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
