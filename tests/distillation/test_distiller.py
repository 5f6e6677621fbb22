"""keratron.distillation: Distiller and the distillation losses, checked against Keras 3.15
with the same weights and data (interop tests) and on their own."""

import json
import warnings

import numpy as np
import pytest

import keratron as kt
from keratron import distillation as ktd
from tests.conftest import require


def _data(n=24, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.random((n, 4)).astype("float32")
    return x, rng.integers(0, 3, n), rng.random((n, 2)).astype("float32")


def _sequential_pair(K, hidden=8):
    teacher = K.Sequential(
        [
            K.Input((4,)),
            K.layers.Dense(hidden, activation="relu", name="t1"),
            K.layers.Dense(3, name="t2"),
        ]
    )
    student = K.Sequential(
        [
            K.Input((4,)),
            K.layers.Dense(hidden, activation="tanh", name="s1"),
            K.layers.Dense(3, name="s2"),
        ]
    )
    return teacher, student


def _subclassed_pair(K):
    class Net(K.Model):
        def __init__(self, hidden, **kwargs):
            super().__init__(**kwargs)
            self.d1 = K.layers.Dense(hidden, activation="relu")
            self.d2 = K.layers.Dense(3)

        def call(self, x, training=None):
            return self.d2(self.d1(x))

    teacher, student = Net(8, name="teacher"), Net(4, name="student")
    teacher(np.zeros((1, 4), "float32"))
    student(np.zeros((1, 4), "float32"))
    return teacher, student


def _two_output_pair(K):
    def net(prefix):
        inputs = K.Input((4,))
        hidden = K.layers.Dense(8, activation="relu", name=prefix + "h")(inputs)
        normed = K.layers.BatchNormalization(name=prefix + "bn")(hidden)
        return K.Model(
            inputs,
            [
                K.layers.Dense(3, name=prefix + "a")(normed),
                K.layers.Dense(2, name=prefix + "b")(hidden),
            ],
        )

    return net("t"), net("s")


def _case(K, name):
    """(teacher, student, Distiller arguments, compile loss) for one configuration."""
    D = K.distillation
    if name == "logits_and_features":
        teacher, student = _sequential_pair(K)
        losses = [
            D.LogitsDistillation(temperature=2.0),
            D.FeatureDistillation(
                loss=K.losses.MeanSquaredError(), teacher_layer_name="t1", student_layer_name="s1"
            ),
        ]
        kwargs = {"distillation_loss_weights": [1.0, 0.5], "student_loss_weight": 0.3}
        return teacher, student, losses, kwargs, "sparse_categorical_crossentropy"
    if name == "kl_instance":
        teacher, student = _sequential_pair(K)
        losses = D.LogitsDistillation(temperature=4.0, loss=K.losses.KLDivergence())
        return teacher, student, losses, {}, "sparse_categorical_crossentropy"
    if name == "subclassed":
        teacher, student = _subclassed_pair(K)
        losses = D.LogitsDistillation(temperature=3.0, loss=K.losses.KLDivergence())
        kwargs = {"student_loss_weight": 0.4}
        loss = K.losses.SparseCategoricalCrossentropy(from_logits=True)
        return teacher, student, losses, kwargs, loss
    if name == "two_outputs":
        # Distillation only: Keras 3.15 on torch cannot apply a list of student losses (its
        # Distiller stores them as a TrackedList that torch's tree functions do not match).
        teacher, student = _two_output_pair(K)
        losses = [
            D.LogitsDistillation(temperature=2.0, loss=[K.losses.KLDivergence(), None]),
            D.FeatureDistillation(
                loss="cosine_similarity", teacher_layer_name="th", student_layer_name="sh"
            ),
            D.FeatureDistillation(loss=["mae", "mse"]),
        ]
        kwargs = {"distillation_loss_weights": [0.2, 0.3, 0.5], "student_loss_weight": 0.0}
        return teacher, student, losses, kwargs, "mse"
    if name == "student_only":
        teacher, student = _subclassed_pair(K)
        kwargs = {"student_loss_weight": 1.0}
        loss = K.losses.SparseCategoricalCrossentropy(from_logits=True)
        return teacher, student, D.FeatureDistillation(), kwargs, loss
    raise ValueError(name)


def _distiller(K, name, run_eagerly=False):
    teacher, student, losses, kwargs, loss = _case(K, name)
    distiller = K.distillation.Distiller(teacher, student, losses, **kwargs)
    metrics = None if name == "two_outputs" else ["accuracy"]
    distiller.compile(
        optimizer=K.optimizers.SGD(0.05), loss=loss, metrics=metrics, run_eagerly=run_eagerly
    )
    return distiller, teacher, student


CASES = ["logits_and_features", "kl_instance", "subclassed", "two_outputs", "student_only"]


# ---------------------------------------------------------------------------- Keras oracle
@pytest.mark.interop
@pytest.mark.parametrize("name", CASES)
def test_training_matches_keras(name):
    keras = require("keras")
    x, labels, targets = _data()
    y = [labels, targets] if name == "two_outputs" else labels
    theirs, their_teacher, their_student = _distiller(keras, name)
    ours, our_teacher, our_student = _distiller(kt, name)
    our_teacher.set_weights(their_teacher.get_weights())
    our_student.set_weights(their_student.get_weights())
    teacher_before = our_teacher.get_weights()

    hk = theirs.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0).history
    ho = ours.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0).history
    assert list(ho) == list(hk)
    for key in hk:
        np.testing.assert_allclose(ho[key], hk[key], rtol=1e-4, atol=1e-5, err_msg=key)
    for a, b in zip(our_student.get_weights(), their_student.get_weights()):
        np.testing.assert_allclose(a, b, atol=1e-5)
    for a, b in zip(our_teacher.get_weights(), teacher_before):
        np.testing.assert_array_equal(a, b)

    ek = theirs.evaluate(x, y, verbose=0, return_dict=True)
    eo = ours.evaluate(x, y, verbose=0, return_dict=True)
    assert list(eo) == list(ek)
    for key in ek:
        np.testing.assert_allclose(eo[key], ek[key], rtol=1e-4, atol=1e-5, err_msg=key)
    np.testing.assert_allclose(
        ours.predict(x, verbose=0)[0] if name == "two_outputs" else ours.predict(x, verbose=0),
        theirs.predict(x, verbose=0)[0] if name == "two_outputs" else theirs.predict(x, verbose=0),
        rtol=1e-4,
        atol=1e-5,
    )


@pytest.mark.interop
def test_structure_and_metric_names_match_keras():
    keras = require("keras")
    found = []
    for K in (keras, kt):
        distiller, _, _ = _distiller(K, "logits_and_features")
        found.append(
            (
                [type(layer).__name__ for layer in distiller.layers],
                distiller.metrics_names,
                [w.path.split("/", 1)[1] for w in distiller.trainable_weights],
                len(distiller.weights),
            )
        )
    assert found[0] == found[1]


@pytest.mark.interop
@pytest.mark.parametrize(
    "make_loss",
    [
        lambda K: K.distillation.LogitsDistillation(),
        lambda K: K.distillation.LogitsDistillation(temperature=5, loss=K.losses.KLDivergence()),
        lambda K: K.distillation.LogitsDistillation(loss="categorical_crossentropy"),
        lambda K: K.distillation.LogitsDistillation(loss=[K.losses.KLDivergence(), None, "mse"]),
        lambda K: K.distillation.FeatureDistillation(),
        lambda K: K.distillation.FeatureDistillation(loss=[None, "cosine_similarity", "mae"]),
        lambda K: K.distillation.FeatureDistillation(loss={"a": "mse", "b": None, "c": "huber"}),
    ],
)
def test_loss_values_match_keras(make_loss):
    keras = require("keras")
    rng = np.random.default_rng(7)
    teacher = [rng.standard_normal((6, 5)).astype("float32") for _ in range(3)]
    student = [rng.standard_normal((6, 5)).astype("float32") for _ in range(3)]
    structure = make_loss(kt).loss
    if isinstance(structure, dict):
        teacher, student = dict(zip("abc", teacher)), dict(zip("abc", student))
    elif not isinstance(structure, list):
        teacher, student = teacher[0], student[0]
    expected = keras.ops.convert_to_numpy(make_loss(keras).compute_loss(teacher, student))
    got = make_loss(kt).compute_loss(teacher, student)
    assert got.shape == ()
    np.testing.assert_allclose(np.asarray(got), expected, rtol=1e-5, atol=1e-6)


@pytest.mark.interop
def test_loss_configs_match_keras():
    keras = require("keras")
    for make in (
        lambda K: K.distillation.LogitsDistillation(temperature=2.5),
        lambda K: K.distillation.LogitsDistillation(loss=[K.losses.KLDivergence(), None]),
        lambda K: K.distillation.FeatureDistillation(
            loss=K.losses.MeanSquaredError(), teacher_layer_name="a", student_layer_name="b"
        ),
    ):
        assert make(kt).get_config() == make(keras).get_config()


@pytest.mark.interop
def test_loads_a_distiller_saved_by_keras(tmp_path):
    keras = require("keras")
    x, labels, _ = _data()
    theirs, _, _ = _distiller(keras, "logits_and_features")
    theirs.fit(x, labels, epochs=1, verbose=0)
    path = str(tmp_path / "distiller.keras")
    theirs.save(path)
    with pytest.warns(UserWarning, match="compile"):
        ours = kt.models.load_model(path)
    assert isinstance(ours, ktd.Distiller)
    assert ours.student_loss_weight == 0.3 and ours.distillation_loss_weights == [1.0, 0.5]
    first, second = ours.distillation_losses
    assert isinstance(first, ktd.LogitsDistillation) and first.temperature == 2.0
    assert isinstance(second, ktd.FeatureDistillation) and second.teacher_layer_name == "t1"
    np.testing.assert_allclose(ours.predict(x, verbose=0), theirs.predict(x, verbose=0), atol=1e-6)
    np.testing.assert_allclose(
        ours.teacher.predict(x, verbose=0), theirs.teacher.predict(x, verbose=0), atol=1e-6
    )


@pytest.mark.interop
def test_crossentropy_on_teacher_logits_matches_keras():
    keras = require("keras")
    x, labels, _ = _data()
    distillers = []
    for K in (keras, kt):
        teacher, student = _sequential_pair(K)
        losses = K.distillation.LogitsDistillation(
            loss=K.losses.CategoricalCrossentropy(from_logits=True)
        )
        distiller = K.distillation.Distiller(teacher, student, losses, student_loss_weight=0.0)
        distiller.compile(optimizer=K.optimizers.SGD(0.1), loss="mse")
        distillers.append((distiller, teacher, student))
    distillers[1][1].set_weights(distillers[0][1].get_weights())
    distillers[1][2].set_weights(distillers[0][2].get_weights())
    hk, ho = (
        d.fit(x, labels, batch_size=8, epochs=2, shuffle=False, verbose=0) for d, _, _ in distillers
    )
    np.testing.assert_allclose(ho.history["loss"], hk.history["loss"], rtol=1e-5)


# ---------------------------------------------------------------------------- on its own
def test_teacher_is_frozen_and_the_call_is_the_student():
    teacher, student = _sequential_pair(kt)
    distiller = ktd.Distiller(teacher, student, ktd.LogitsDistillation())
    assert not teacher.trainable and student.trainable
    assert [w.path for w in distiller.trainable_weights] == [w.path for w in student.weights]
    x, labels, _ = _data(8)
    np.testing.assert_allclose(np.asarray(distiller(x)), np.asarray(student(x)))
    assert distiller.distillation_losses[0].temperature == 3.0
    assert distiller.distillation_loss_weights == [1.0]


def test_compiled_and_eager_training_agree():
    x, labels, _ = _data()
    histories = []
    for eager in (False, True):
        distiller, teacher, student = _distiller(kt, "logits_and_features", run_eagerly=eager)
        teacher.set_weights([np.full_like(w, 0.1) for w in teacher.get_weights()])
        student.set_weights([np.full_like(w, -0.05) for w in student.get_weights()])
        history = distiller.fit(x, labels, batch_size=8, epochs=2, shuffle=False, verbose=0)
        histories.append(history.history)
    for key in histories[0]:
        np.testing.assert_allclose(histories[1][key], histories[0][key], rtol=1e-5, err_msg=key)


def test_loss_components_combine_with_the_weights():
    x, labels, _ = _data(12)
    distiller, teacher, student = _distiller(kt, "logits_and_features")
    logs = distiller.evaluate(x, labels, batch_size=12, verbose=0, return_dict=True)
    t_logits, s_logits = np.asarray(teacher(x)), np.asarray(student(x))
    t_hidden = np.asarray(teacher.get_layer("t1")(x))
    s_hidden = np.asarray(student.get_layer("s1")(x))
    student_loss = np.mean(kt.losses.sparse_categorical_crossentropy(labels, s_logits).numpy())
    kl = kt.losses.kl_divergence(t_logits / 2.0, s_logits / 2.0).numpy().mean()
    mse = np.mean((t_hidden - s_hidden) ** 2)
    distillation = 1.0 * kl + 0.5 * mse
    np.testing.assert_allclose(logs["student_loss"], student_loss, rtol=1e-5)
    np.testing.assert_allclose(logs["distillation_loss"], distillation, rtol=1e-5)
    np.testing.assert_allclose(logs["loss"], 0.3 * student_loss + 0.7 * distillation, rtol=1e-5)
    np.testing.assert_allclose(logs["total_loss"], logs["loss"], rtol=1e-6)


def test_one_student_loss_per_output():
    x, labels, targets = _data(12)
    teacher, student = _two_output_pair(kt)
    distiller = ktd.Distiller(teacher, student, ktd.FeatureDistillation(loss=["mse", None]))
    # Loss instances reduce to a mean each; Keras's formula sums what the losses return (the
    # per-sample values of loss functions, summed over the batch).
    distiller.compile(
        loss=[kt.losses.SparseCategoricalCrossentropy(), kt.losses.MeanAbsoluteError()]
    )
    logs = distiller.evaluate(x, [labels, targets], batch_size=12, verbose=0, return_dict=True)
    scores, values = (np.asarray(o) for o in student(x, training=False))
    expected = np.mean(kt.losses.sparse_categorical_crossentropy(labels, scores).numpy())
    expected += np.mean(np.abs(targets - values))
    np.testing.assert_allclose(logs["student_loss"], expected, rtol=1e-5)
    distiller.fit(x, [labels, targets], epochs=1, verbose=0)


def test_custom_distillation_loss():
    class MeanGap(ktd.DistillationLoss):
        def compute_loss(self, teacher_outputs, student_outputs, **kwargs):
            return kt.ops.mean(kt.ops.abs(teacher_outputs - student_outputs))

    class PerSample(ktd.DistillationLoss):
        def compute_loss(self, teacher_outputs, student_outputs, **kwargs):
            return kt.ops.mean(teacher_outputs - student_outputs, axis=-1)

    x, labels, _ = _data(8)
    teacher, student = _sequential_pair(kt)
    distiller = ktd.Distiller(teacher, student, MeanGap(), student_loss_weight=0.0)
    distiller.compile(loss="mse")
    gap = np.mean(np.abs(np.asarray(teacher(x)) - np.asarray(student(x))))
    np.testing.assert_allclose(distiller.evaluate(x, labels, verbose=0)[0], gap, rtol=1e-5)

    distiller = ktd.Distiller(teacher, student, PerSample(), student_loss_weight=0.5)
    distiller.compile(loss="mse")
    with pytest.raises(ValueError, match="non-scalar loss"):
        distiller.evaluate(x, np.zeros((8, 3), "float32"), verbose=0)
    with pytest.raises(NotImplementedError):
        ktd.DistillationLoss().compute_loss(x, x)


def test_config_round_trip_and_saving(tmp_path):
    x, labels, _ = _data()
    distiller, _, _ = _distiller(kt, "logits_and_features")
    distiller.fit(x, labels, epochs=1, verbose=0)
    config = json.loads(json.dumps(distiller.get_config()))
    assert config["distillation_losses"][0]["module"] == "keras.distillation"
    rebuilt = ktd.Distiller.from_config(config)
    assert rebuilt.student_loss_weight == 0.3
    assert [type(loss) for loss in rebuilt.distillation_losses] == [
        ktd.LogitsDistillation,
        ktd.FeatureDistillation,
    ]
    assert rebuilt(x[:2]).shape == (2, 3)

    path = str(tmp_path / "distiller.keras")
    distiller.save(path)
    with pytest.warns(UserWarning, match="compile"):
        loaded = kt.models.load_model(path)
    assert isinstance(loaded, ktd.Distiller) and not loaded.compiled
    np.testing.assert_allclose(loaded.predict(x, verbose=0), distiller.predict(x, verbose=0))
    assert not loaded.teacher.trainable
    loaded.compile(optimizer="sgd", loss="sparse_categorical_crossentropy")
    loaded.fit(x, labels, epochs=1, verbose=0)


def test_loss_config_round_trip():
    loss = ktd.LogitsDistillation(temperature=2.5, loss=[kt.losses.KLDivergence(), None])
    again = ktd.LogitsDistillation.from_config(json.loads(json.dumps(loss.get_config())))
    assert again.temperature == 2.5
    assert isinstance(again.loss[0], kt.losses.KLDivergence) and again.loss[1] is None
    feature = ktd.FeatureDistillation(loss={"a": "mse", "b": None}, teacher_layer_name="t")
    again = ktd.FeatureDistillation.from_config(feature.get_config())
    assert again.loss == {"a": kt.losses.mean_squared_error, "b": None}
    assert again.teacher_layer_name == "t" and again.student_layer_name is None
    config = kt.saving.serialize_keras_object(loss)
    assert isinstance(kt.saving.deserialize_keras_object(config), ktd.LogitsDistillation)


def test_argument_errors():
    teacher, student = _sequential_pair(kt)
    logits = ktd.LogitsDistillation()
    with pytest.raises(ValueError, match="Teacher must be"):
        ktd.Distiller("teacher", student, logits)
    with pytest.raises(ValueError, match="input shapes are incompatible"):
        ktd.Distiller(teacher, kt.Sequential([kt.Input((5,)), kt.layers.Dense(3)]), logits)
    with pytest.raises(ValueError, match="output shapes are incompatible"):
        ktd.Distiller(teacher, kt.Sequential([kt.Input((4,)), kt.layers.Dense(2)]), logits)
    with pytest.raises(ValueError, match="input dtypes must match"):
        other = kt.Sequential([kt.Input((4,), dtype="float16"), kt.layers.Dense(3)])
        ktd.Distiller(teacher, other, logits)
    with pytest.raises(ValueError, match="between 0.0 and 1.0"):
        ktd.Distiller(teacher, student, logits, student_loss_weight=1.5)
    with pytest.raises(ValueError, match="must be a number"):
        ktd.Distiller(teacher, student, logits, student_loss_weight="half")
    with pytest.raises(ValueError, match="cannot be `None`"):
        ktd.Distiller(teacher, student, None)
    with pytest.raises(ValueError, match=r"distillation_loss_weights \(1\) must match"):
        ktd.Distiller(teacher, student, [logits, logits], distillation_loss_weights=[1.0])
    with pytest.raises(ValueError, match="In teacher model: No such layer: nope"):
        ktd.Distiller(teacher, student, ktd.FeatureDistillation(teacher_layer_name="nope"))
    lazy = kt.Sequential([kt.layers.Dense(3)])
    with pytest.raises(ValueError, match="The student model"):
        ktd.Distiller(teacher, lazy, ktd.FeatureDistillation(student_layer_name="dense"))

    distiller = ktd.Distiller(teacher, student, logits)
    with pytest.raises(ValueError, match="'loss' cannot be `None`"):
        distiller.compile()
    with pytest.raises(ValueError, match="metrics must be a list or tuple"):
        distiller.compile(loss="mse", metrics="mae")


def test_distillation_loss_argument_errors():
    with pytest.raises(ValueError, match="temperature must be positive"):
        ktd.LogitsDistillation(temperature=0)
    with pytest.raises(ValueError, match="temperature must be a number"):
        ktd.LogitsDistillation(temperature="3")
    with pytest.raises(ValueError, match="At least one loss"):
        ktd.LogitsDistillation(loss=[None, None])
    with pytest.raises(ValueError, match="at least one non-`None`"):
        ktd.FeatureDistillation(loss=None)
    with pytest.raises(ValueError, match="Unknown loss function: 'nope'"):
        ktd.FeatureDistillation(loss="nope")
    loss = ktd.FeatureDistillation(loss=["mse", "mae"])
    with pytest.raises(ValueError, match="Loss structure mismatch"):
        loss.validate_outputs(np.zeros((2, 3)), np.zeros((2, 3)))
    with pytest.raises(ValueError):
        loss.validate_outputs([np.zeros((2, 3))] * 2, [np.zeros((2, 3))])


def test_loading_does_not_compile_silently():
    teacher, student = _sequential_pair(kt)
    distiller = ktd.Distiller(teacher, student, ktd.LogitsDistillation())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        distiller.compile_from_config({"optimizer": "sgd", "loss": None})
    assert not distiller.compiled
    assert any("compile()" in str(w.message) for w in caught)
