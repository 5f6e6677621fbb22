"""The Optimizer contract: iterations, learning rate, minimize, (de)serialization, gradient
filtering, errors, weight-decay exclusion, EMA, accumulation, dtype groups, tf.keras 2 spellings.
"""

import re
import warnings

import numpy as np
import pytest
import torch

import keratron as kt
from tests.conftest import require

O = kt.optimizers
ALL_NAMES = ["sgd", "adam", "adamw", "rmsprop", "adagrad", "adadelta", "adamax", "nadam", "ftrl"]


def t(x):
    return kt.convert_to_tensor(np.asarray(x, dtype="float32"))


def two_vars():
    a = kt.Variable(np.arange(6, dtype="float32").reshape(2, 3), name="kernel")
    b = kt.Variable(np.ones(3, dtype="float32"), name="bias")
    return a, b


@pytest.fixture(scope="module")
def keras():
    return require("keras")


# ---------------------------------------------------------------------- iterations, lr
def test_iterations_count_and_dtype():
    opt = O.Adam()
    a, b = two_vars()
    assert opt.iterations.dtype == "int64" and not opt.iterations.trainable
    for i in range(4):
        opt.apply([t(np.ones((2, 3))), t(np.ones(3))], [a, b])
        assert int(opt.iterations.numpy()) == i + 1
    opt.apply([])  # an empty gradient list is a no-op, as in Keras
    assert int(opt.iterations.numpy()) == 4
    assert opt.variables[0] is opt.iterations


def test_learning_rate_assignment_takes_effect():
    opt = O.SGD(learning_rate=0.1)
    w = kt.Variable([1.0])
    opt.apply([t([1.0])], [w])
    np.testing.assert_allclose(w.numpy(), [0.9], rtol=1e-6)
    lr_var = opt.learning_rate
    opt.learning_rate = 0.5
    assert opt.learning_rate is lr_var and opt.variables[1] is lr_var  # assigned in place
    assert float(opt.learning_rate.numpy()) == 0.5
    opt.apply([t([1.0])], [w])
    np.testing.assert_allclose(w.numpy(), [0.4], rtol=1e-6)
    assert opt.get_config()["learning_rate"] == 0.5


def test_learning_rate_schedule_and_callable():
    sched = O.schedules.ExponentialDecay(1.0, decay_steps=1, decay_rate=0.5)
    opt = O.SGD(learning_rate=sched)
    assert [v.name for v in opt.variables] == ["iteration"]  # no lr variable, as Keras
    w = kt.Variable([0.0])
    for _ in range(3):
        opt.apply([t([1.0])], [w])
    np.testing.assert_allclose(w.numpy(), [-1.75], rtol=1e-6)
    assert float(opt.learning_rate) == pytest.approx(0.125)
    with pytest.raises(TypeError, match="LearningRateSchedule"):
        opt.learning_rate = 0.1

    opt = O.SGD(learning_rate=lambda: 0.25)
    opt.apply([t([1.0])], [w])
    np.testing.assert_allclose(w.numpy(), [-2.0], rtol=1e-6)
    # A float replaces a callable with a fresh variable; a schedule replaces a variable.
    opt.learning_rate = 0.5
    assert float(opt.learning_rate.numpy()) == 0.5
    opt = O.SGD(0.1)
    opt.learning_rate = sched
    assert "learning_rate" not in [v.name for v in opt.variables]


def test_bad_learning_rate_names_optimizer():
    with pytest.raises(ValueError, match=r"Optimizer 'my_opt'.*learning_rate.*'fast'"):
        O.Adam(learning_rate="fast", name="my_opt")


# ---------------------------------------------------------------------- minimize
def test_minimize_with_callable_and_with_tape():
    w = kt.Variable(10.0)
    opt = O.RMSprop(learning_rate=0.1)
    opt.minimize(lambda: (w**2) / 2.0, [w])
    assert float(w.numpy()) == pytest.approx(9.683772, abs=1e-5)  # Keras's documented value

    v = kt.Variable([1.0, -2.0])
    opt = O.SGD(learning_rate=0.1)
    with kt.GradientTape() as tape:
        loss = kt.ops.sum(v * v)
    it = opt.minimize(loss, [v], tape=tape)
    np.testing.assert_allclose(v.numpy(), [0.8, -1.6], rtol=1e-6)
    assert it is opt.iterations and int(it.numpy()) == 1
    with pytest.raises(ValueError, match="`tape` is required"):
        opt.minimize(loss, [v])


def test_minimize_with_loss_scale_matches_unscaled():
    a, b = kt.Variable([1.0, 2.0]), kt.Variable([1.0, 2.0])
    O.SGD(0.1, loss_scale_factor=128.0).minimize(lambda: kt.ops.sum(a * a * a), [a])
    O.SGD(0.1).minimize(lambda: kt.ops.sum(b * b * b), [b])
    np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6)
    np.testing.assert_allclose(a.numpy(), [0.7, 0.8], rtol=1e-6)


def test_updates_are_not_recorded_on_tapes():
    w = kt.Variable([1.0, 2.0])
    opt = O.Adam(0.1)
    with kt.GradientTape() as tape:
        y = kt.ops.sum(w * w)
        n = len(tape._records)
        opt.apply([t([1.0, 1.0])], [w])
        assert len(tape._records) == n
    # Only the forward multiply contributes (the engine reads the variable's current storage).
    np.testing.assert_allclose(tape.gradient(y, w).numpy(), 2 * w.numpy())


# ---------------------------------------------------------------------- get / serialize
@pytest.mark.parametrize("name", ALL_NAMES + ["lion"])
def test_get_serialize_round_trip(name):
    opt = O.get(name)
    assert type(opt).__name__.lower() == name
    cfg = O.serialize(opt)
    assert cfg["class_name"] == type(opt).__name__ and cfg["module"] == "keras.optimizers"
    back = O.deserialize(cfg)
    assert type(back) is type(opt) and back.get_config() == opt.get_config()
    assert O.get(cfg).get_config() == opt.get_config()
    assert O.get(opt) is opt


def test_get_accepts_keras_spellings_and_rejects_others():
    assert isinstance(O.get("Adam"), O.Adam) and isinstance(O.get("RMSprop"), O.RMSprop)
    assert O.get(None) is None
    with pytest.raises(ValueError, match="Unknown optimizer: 'adamz'"):
        O.get("adamz")
    with pytest.raises(ValueError, match="Could not interpret optimizer identifier"):
        O.get(42)


def test_config_with_schedule_round_trips():
    opt = O.Adam(learning_rate=O.schedules.PolynomialDecay(0.1, 10), amsgrad=True, clipnorm=1.0)
    back = O.deserialize(O.serialize(opt))
    assert isinstance(back._learning_rate, O.schedules.PolynomialDecay)
    assert back.get_config() == opt.get_config()


@pytest.mark.interop
def test_configs_interchange_with_keras(keras):
    ours = O.Nadam(learning_rate=0.02, beta_1=0.8, global_clipnorm=2.0, name="n")
    theirs = keras.optimizers.deserialize(O.serialize(ours))
    assert type(theirs).__name__ == "Nadam" and theirs.get_config() == ours.get_config()
    k = keras.optimizers.AdamW(
        learning_rate=keras.optimizers.schedules.ExponentialDecay(0.1, 5, 0.9), weight_decay=0.01
    )
    back = O.deserialize(keras.optimizers.serialize(k))
    assert isinstance(back, O.AdamW)
    assert back.get_config()["learning_rate"]["config"] == k.get_config()["learning_rate"]["config"]
    assert back.weight_decay == 0.01


def test_tf_keras_2_config_and_spellings():
    # A tf.keras 2 h5 training_config optimizer entry.
    legacy = {
        "class_name": "Adam",
        "config": {
            "name": "Adam",
            "learning_rate": 0.01,
            "decay": 0.0,
            "beta_1": 0.9,
            "beta_2": 0.999,
            "epsilon": 1e-07,
            "amsgrad": False,
            "jit_compile": True,
            "is_legacy_optimizer": False,
        },
    }
    opt = O.deserialize(legacy)
    assert isinstance(opt, O.Adam) and opt.name == "Adam"
    assert float(opt.learning_rate.numpy()) == pytest.approx(0.01)

    with pytest.warns(DeprecationWarning, match="`lr`"):
        opt = O.SGD(lr=0.5)
    assert float(opt.learning_rate.numpy()) == 0.5

    # tf.keras 2 time-based decay: lr / (1 + decay * iterations).
    with pytest.warns(DeprecationWarning, match="`decay`"):
        opt = O.SGD(learning_rate=1.0, decay=1.0)
    w = kt.Variable([0.0])
    for _ in range(3):
        opt.apply([t([1.0])], [w])
    np.testing.assert_allclose(w.numpy(), [-(1.0 + 1 / 2 + 1 / 3)], rtol=1e-6)
    with pytest.warns(DeprecationWarning):
        assert O.SGD.from_config(opt.get_config())._legacy_decay == 1.0

    with pytest.raises(ValueError, match="not recognized.*momentom"):
        O.SGD(momentom=0.9)


# ---------------------------------------------------------------------- gradients and errors
def test_none_gradient_is_skipped():
    a, b = two_vars()
    b0 = b.numpy().copy()
    opt = O.Adam(0.1)
    with pytest.warns(UserWarning, match="Gradients do not exist for variables \\['bias'\\]"):
        opt.apply([t(np.ones((2, 3))), None], [a, b])
    np.testing.assert_array_equal(b.numpy(), b0)
    slots = {v.name: v.numpy() for v in opt.variables}
    assert np.all(slots["bias_momentum"] == 0) and np.all(slots["kernel_momentum"] != 0)
    with pytest.raises(ValueError, match="Optimizer 'adam.*no gradients provided"):
        opt.apply([None, None], [a, b])


def test_length_mismatch_names_the_optimizer():
    a, b = two_vars()
    opt = O.RMSprop(name="rms")
    with pytest.raises(ValueError, match=r"Optimizer 'rms' \(RMSprop\).*1 gradients for 2"):
        opt.apply([t(np.ones((2, 3)))], [a, b])
    opt.build([a, b])
    with pytest.raises(ValueError, match=r"Optimizer 'rms' \(RMSprop\).*3 gradients for 2"):
        opt.apply([t(np.ones((2, 3))), t(np.ones(3)), t(np.ones(3))])
    with pytest.raises(ValueError, match="'rms'.*unknown variable"):
        opt.apply([t(np.ones(3))], [kt.Variable(np.ones(3, "float32"))])
    with pytest.raises(ValueError, match="'rms'.*gradient for variable 'bias' has shape"):
        opt.apply([t(np.ones((2, 3))), t(np.ones(4))], [a, b])


def test_apply_without_variables_needs_a_build():
    with pytest.raises(ValueError, match="must already be built"):
        O.SGD().apply([t([1.0])])


def test_argument_validation():
    with pytest.raises(ValueError, match="only one of `clipnorm`"):
        O.SGD(clipnorm=1.0, clipvalue=1.0)
    with pytest.raises(ValueError, match="momentum"):
        O.SGD(momentum=1.5)
    with pytest.raises(ValueError, match="weight_decay"):
        O.AdamW(weight_decay=None)
    with pytest.raises(ValueError, match="gradient_accumulation_steps"):
        O.Adam(gradient_accumulation_steps=1)
    with pytest.raises(ValueError, match="l1_regularization_strength"):
        O.Ftrl(l1_regularization_strength=-1.0)


def test_apply_gradients_tf_keras_style_and_input_kinds():
    a, b = two_vars()
    opt = O.SGD(0.5)
    it = opt.apply_gradients(zip([np.ones((2, 3), "float32"), torch.ones(3)], [a, b]))
    assert it is opt.iterations
    np.testing.assert_allclose(b.numpy(), [0.5, 0.5, 0.5])
    np.testing.assert_allclose(a.numpy()[0], [-0.5, 0.5, 1.5])


def test_auto_names_follow_keras():
    assert re.fullmatch(r"rm_sprop(_\d+)?", O.RMSprop().name)
    first, second = O.Adamax(), O.Adamax()
    assert second.name != first.name and second.name.startswith("adamax")
    assert O.Adagrad(name="x").variables[0].path == "x/iteration"


# ---------------------------------------------------------------------- weight decay
@pytest.mark.interop
def test_exclude_from_weight_decay_matches_keras(keras):
    grads = [np.full((2, 3), 0.5, "float32"), np.full(3, -0.5, "float32")]
    a, b = two_vars()
    ka = keras.Variable(a.numpy(), name="kernel")
    kb = keras.Variable(b.numpy(), name="bias")
    ours, theirs = O.AdamW(0.1, weight_decay=0.5), keras.optimizers.AdamW(0.1, weight_decay=0.5)
    ours.exclude_from_weight_decay(var_names=["bias"])
    theirs.exclude_from_weight_decay(var_names=["bias"])
    for _ in range(2):
        ours.apply([t(g) for g in grads], [a, b])
        theirs.apply([keras.ops.convert_to_tensor(g) for g in grads], [ka, kb])
    np.testing.assert_allclose(a.numpy(), keras.ops.convert_to_numpy(ka), atol=1e-6)
    np.testing.assert_allclose(b.numpy(), keras.ops.convert_to_numpy(kb), atol=1e-6)


def test_exclude_from_weight_decay_by_variable():
    a, b = kt.Variable([1.0]), kt.Variable([1.0])
    opt = O.SGD(0.1, weight_decay=0.5)
    opt.exclude_from_weight_decay(var_list=[b])
    opt.apply([t([0.0]), t([0.0])], [a, b])
    np.testing.assert_allclose(a.numpy(), [0.95], rtol=1e-6)
    np.testing.assert_allclose(b.numpy(), [1.0])


# ---------------------------------------------------------------------- dtype/device groups
@pytest.mark.parametrize("name", ALL_NAMES)
def test_mixed_dtypes_update_like_separate_optimizers(name):
    rng = np.random.default_rng(3)
    x64 = rng.standard_normal(5)
    x32 = rng.standard_normal((2, 2)).astype("float32")
    g64 = [rng.standard_normal(5) for _ in range(2)]
    g32 = [rng.standard_normal((2, 2)).astype("float32") for _ in range(2)]
    mixed = [kt.Variable(x64, dtype="float64"), kt.Variable(x32)]
    alone64, alone32 = kt.Variable(x64, dtype="float64"), kt.Variable(x32)
    opt, o64, o32 = O.get(name), O.get(name), O.get(name)
    for i in range(2):
        opt.apply([kt.convert_to_tensor(g64[i]), kt.convert_to_tensor(g32[i])], mixed)
        o64.apply([kt.convert_to_tensor(g64[i])], [alone64])
        o32.apply([kt.convert_to_tensor(g32[i])], [alone32])
    assert mixed[0].dtype == "float64"
    np.testing.assert_allclose(mixed[0].numpy(), alone64.numpy(), rtol=1e-12)
    np.testing.assert_allclose(mixed[1].numpy(), alone32.numpy(), rtol=1e-6)
    assert not np.array_equal(mixed[0].numpy(), x64)


# ---------------------------------------------------------------------- extension points
def test_custom_update_step_subclass():
    class SignSGD(O.Optimizer):
        def __init__(self, learning_rate=0.1, **kwargs):
            super().__init__(learning_rate=learning_rate, **kwargs)

        def build(self, variables):
            if self.built:
                return
            super().build(variables)
            self.counts = self.add_optimizer_variables(variables, "count")

        def update_step(self, gradient, variable, learning_rate):
            self.assign_sub(variable, kt.ops.multiply(learning_rate, kt.ops.sign(gradient)))
            self.assign_add(self.counts[self._get_variable_index(variable)], 1.0)

    w = kt.Variable([1.0, -1.0], name="w")
    opt = SignSGD(name="sign")
    for _ in range(2):
        opt.apply([t([3.0, -0.2])], [w])
    np.testing.assert_allclose(w.numpy(), [0.8, -0.8], rtol=1e-6)
    assert [v.path for v in opt.variables][-1] == "sign/w_count"
    np.testing.assert_allclose(opt.variables[-1].numpy(), [2.0, 2.0])

    with pytest.raises(TypeError, match="must override `update_step"):
        O.Optimizer(learning_rate=0.1).apply([t([1.0])], [kt.Variable([1.0])])


def test_constraint_applies_after_update():
    w = kt.Variable([0.5, -0.5])
    w.constraint = lambda v: kt.ops.clip(v, 0.0, 1.0)
    O.SGD(1.0).apply([t([-1.0, 1.0])], [w])
    np.testing.assert_allclose(w.numpy(), [1.0, 0.0])


def test_ema_finalize_and_weights_io():
    w = kt.Variable([1.0], name="w")
    opt = O.SGD(0.1, use_ema=True, ema_momentum=0.5)
    for _ in range(3):
        opt.apply([t([1.0])], [w])
    # averages: step 0 copies w=0.9; then 0.5*0.9+0.5*0.8=0.85; 0.5*0.85+0.5*0.7=0.775
    np.testing.assert_allclose(w.numpy(), [0.7], rtol=1e-6)
    names = [v.name for v in opt.variables]
    assert names == ["iteration", "learning_rate", "w_average"]
    saved = opt.get_weights()
    store = {}
    opt.save_own_variables(store)
    opt.finalize_variable_values([w])
    np.testing.assert_allclose(w.numpy(), [0.775], rtol=1e-6)

    fresh = O.SGD(0.1, use_ema=True, ema_momentum=0.5)
    fresh.build([w])
    fresh.load_own_variables(store)
    for x, y in zip(fresh.get_weights(), saved):
        np.testing.assert_allclose(x, y)
    fresh.set_weights([np.array(7), np.array(0.2, "float32"), np.array([0.0], "float32")])
    assert int(fresh.iterations.numpy()) == 7
    with pytest.raises(ValueError, match="has shape"):
        fresh.set_weights([np.zeros(2)])


def test_gradient_accumulation_updates_every_n_steps():
    w = kt.Variable([0.0], name="w")
    opt = O.SGD(1.0, gradient_accumulation_steps=2)
    opt.apply([t([1.0])], [w])
    np.testing.assert_allclose(w.numpy(), [0.0])
    opt.apply([t([3.0])], [w])
    np.testing.assert_allclose(w.numpy(), [-2.0])  # mean of the two gradients
    assert int(opt.iterations.numpy()) == 1 and int(opt._iterations.numpy()) == 2
    assert opt.variables[2].name == "w_gradient_accumulator"


def test_slots_follow_variable_dtype():
    w = kt.Variable(np.ones(3), dtype="float64")
    opt = O.Adam()
    opt.build([w])
    assert [v.dtype for v in opt.variables] == ["int64", "float32", "float64", "float64"]
    assert all(not v.trainable for v in opt.variables)


def test_no_warnings_on_plain_use():
    a, b = two_vars()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        O.Nadam().apply([t(np.ones((2, 3))), t(np.ones(3))], [a, b])


@pytest.mark.parametrize(
    "module",
    [
        "keratron.optimizers",
        "keratron.optimizers.base_optimizer",
        "keratron.optimizers.sgd",
        "keratron.optimizers.adam",
        "keratron.optimizers.rmsprop",
        "keratron.optimizers.lion",
        "keratron.optimizers.schedules.learning_rate_schedule",
    ],
)
def test_docstring_examples_run(module):
    import doctest
    import importlib

    result = doctest.testmod(
        importlib.import_module(module),
        extraglobs={"keratron": kt},
        optionflags=doctest.NORMALIZE_WHITESPACE,
        verbose=False,
    )
    assert result.attempted > 0 and result.failed == 0


@pytest.mark.parametrize(
    "name, kw",
    [
        ("SGD", {"momentum": 0.9, "nesterov": True, "weight_decay": 0.1}),
        ("Adam", {"amsgrad": True, "clipnorm": 1.0}),
        ("RMSprop", {"centered": True, "momentum": 0.5, "global_clipnorm": 1.0}),
        ("Adagrad", {"clipvalue": 0.5}),
        ("Adadelta", {}),
        ("Adamax", {}),
        ("Nadam", {}),
        ("Ftrl", {"beta": 0.1, "l2_shrinkage_regularization_strength": 0.1}),
        ("Lion", {"use_ema": True, "ema_overwrite_frequency": 2}),
        ("AdamW", {"learning_rate": O.schedules.CosineDecay(0.1, 9, warmup_target=0.2)}),
    ],
)
def test_step_never_reads_device_values_on_host(name, kw):
    # Tensors on torch's "meta" device have no data: any .item() / float() in the step would
    # raise here, and on CUDA it would be a host synchronisation per step.
    a = kt.Variable(torch.zeros(3, 4, device="meta"), dtype="float32")
    b = kt.Variable(torch.zeros(4, device="meta"), dtype="float32")
    opt = getattr(O, name)(**kw)
    for _ in range(2):
        opt.apply([torch.ones(3, 4, device="meta"), torch.ones(4, device="meta")], [a, b])
    assert int(opt.iterations.numpy()) == 2


def test_tf_keras_2_lr_attribute():
    opt = O.SGD(0.1)
    with pytest.warns(DeprecationWarning, match=r"\.lr is deprecated"):
        assert opt.lr is opt.learning_rate
    with pytest.warns(DeprecationWarning):
        opt.lr = 0.3
    assert float(opt.learning_rate.numpy()) == pytest.approx(0.3)
    assert float(O.SGD(np.array(0.2)).learning_rate.numpy()) == pytest.approx(0.2)


def test_adam_takes_gradients_in_any_layout():
    # The fused CPU update walks flat memory: transposed and broadcast gradients must give
    # the same step as dense copies of them.
    g = np.arange(12, dtype="float32").reshape(4, 3) / 10 - 0.5
    views = [torch.tensor(g.T.copy()).t(), torch.tensor([0.25]).expand(3)]
    dense = [v.contiguous() for v in views]
    results = []
    for grads in (views, dense):
        a, b = kt.Variable(np.ones((4, 3), "float32")), kt.Variable(np.ones(3, "float32"))
        opt = O.Adam(0.1)
        for _ in range(2):
            opt.apply(grads, [a, b])
        results.append((a.numpy(), b.numpy()))
    assert not views[0].is_contiguous() and not views[1].is_contiguous()
    for got, want in zip(*results):
        np.testing.assert_array_equal(got, want)


def test_fresh_auto_names_restarts_and_then_restores_the_numbering():
    from keratron.optimizers.base_optimizer import fresh_auto_names

    O.Adam()  # whatever was built before, the block starts at "adam"
    before = O.Adam().name
    with fresh_auto_names():
        assert [O.Adam().name, O.Adam().name, O.SGD().name] == ["adam", "adam_1", "sgd"]
    after = O.Adam().name
    n = int(before.rsplit("_", 1)[1])
    assert after == f"adam_{n + 1}"
