"""Mixed precision as Keras 3 has it: dtype policies, variable autocasting inside layer calls,
`LossScaleOptimizer`, training under "mixed_bfloat16" / "mixed_float16" on CPU, and parity
with real Keras 3 (torch backend): dtypes, loss-scale behaviour and files exchanged."""

from __future__ import annotations

import numpy as np
import pytest

import keratron
from keratron import layers
from tests.conftest import group_sizes, require

MP = keratron.mixed_precision


@pytest.fixture(autouse=True)
def _reset_policy():
    yield
    MP.set_global_policy(None)


@pytest.fixture(scope="module")
def keras():
    keras = require("keras")
    yield keras
    keras.mixed_precision.set_global_policy("float32")


def _half_kernels_on_cpu(dtype: str) -> bool:
    import torch

    try:
        a = torch.ones(2, 3, dtype=getattr(torch, dtype))
        torch.nn.functional.conv2d(torch.ones(1, 1, 3, 3, dtype=a.dtype), a[:1, :1, None, None])
        return float((a @ a.T).sum()) == 12.0
    except RuntimeError:
        return False


# ---------------------------------------------------------------------------- policies
def test_policy_dtypes_and_errors():
    p = MP.Policy("mixed_float16")
    assert MP.Policy is MP.DTypePolicy is keratron.DTypePolicy
    assert (p.name, p.compute_dtype, p.variable_dtype) == ("mixed_float16", "float16", "float32")
    b = MP.DTypePolicy("mixed_bfloat16")
    assert (b.compute_dtype, b.variable_dtype) == ("bfloat16", "float32")
    assert MP.DTypePolicy("float16").variable_dtype == "float16"
    assert MP.DTypePolicy().name == "float32"
    assert p.get_config() == {"name": "mixed_float16"}
    assert MP.DTypePolicy.from_config(p.get_config()) == p
    assert repr(p) == '<DTypePolicy "mixed_float16">'
    with pytest.raises(ValueError, match="mixed_foo"):
        MP.DTypePolicy("mixed_foo")
    with pytest.raises(TypeError, match="name"):
        MP.DTypePolicy(3)


def test_global_policy_and_config_functions():
    assert MP.global_policy().name == "float32"
    MP.set_global_policy("mixed_bfloat16")
    assert MP.global_policy() == MP.dtype_policy() == keratron.config.dtype_policy()
    assert keratron.config.dtype_policy().name == "mixed_bfloat16"
    dense = layers.Dense(2)
    keratron.config.set_dtype_policy("float32")
    assert MP.global_policy().name == "float32"
    # A layer keeps the policy it was created under.
    assert dense.dtype_policy.name == "mixed_bfloat16"
    assert layers.Dense(2).dtype_policy.name == "float32"


def test_layer_dtype_argument_accepts_policy_name_and_dict():
    for dtype in (
        "mixed_float16",
        MP.Policy("mixed_float16"),
        {"config": {"name": "mixed_float16"}},
    ):
        d = layers.Dense(2, dtype=dtype)
        assert d.dtype_policy == MP.Policy("mixed_float16")
        assert (d.dtype, d.compute_dtype, d.variable_dtype) == ("float32", "float16", "float32")
    d = layers.Dense(2, dtype="float64")
    assert (d.dtype, d.compute_dtype) == ("float64", "float64")
    assert d.get_config()["dtype"] == "float64"
    d.dtype_policy = "mixed_bfloat16"
    assert d.compute_dtype == "bfloat16"
    cfg = layers.Dense(2, dtype="mixed_bfloat16").get_config()
    assert cfg["dtype"]["config"] == {"name": "mixed_bfloat16"}
    assert layers.Dense.from_config(cfg).dtype_policy.name == "mixed_bfloat16"


def test_variables_autocast_inside_call_and_gradients_stay_float32():
    d = layers.Dense(3, dtype="mixed_bfloat16")
    x = np.ones((2, 4), "float32")
    with keratron.GradientTape() as tape:
        y = d(x)
        loss = keratron.ops.sum(keratron.ops.cast(y, "float32"))
    assert y.dtype == "bfloat16" and d.kernel.dtype == "float32"
    gk, gb = tape.gradient(loss, [d.kernel, d.bias])
    assert gk.dtype == "float32" and gb.dtype == "float32"
    np.testing.assert_allclose(gb.numpy(), [2.0, 2.0, 2.0])
    # Outside a layer call the variable reads as itself.
    assert keratron.ops.add(d.kernel, 0.0).dtype == "float32"


def test_autocast_scope_rules():
    from keratron.autodiff.tensor import autocast_dtype, autocast_scope

    v = keratron.Variable([1.0, 2.0])
    frozen = keratron.Variable([1.0], autocast=False)
    with autocast_scope("float16"):
        assert autocast_dtype() == "float16"
        assert keratron.ops.multiply(v, 2.0).dtype == "float16"
        assert keratron.ops.multiply(frozen, 2.0).dtype == "float32"
        with autocast_scope(None):
            assert keratron.ops.multiply(v, 2.0).dtype == "float32"
    assert autocast_dtype() is None
    with pytest.raises(ValueError, match="float"):
        with autocast_scope("int32"):
            pass


# ---------------------------------------------------------------------------- models
def _model(lib, seq_len=5):
    """Dense, Conv2D, BatchNormalization, LSTM, Embedding and a float32 softmax."""
    L = lib.layers
    img = lib.Input((6, 6, 2), name="img")
    tok = lib.Input((seq_len,), dtype="int32", name="tok")
    h = L.Conv2D(3, 3, name="conv")(img)
    h = L.BatchNormalization(name="bn")(h)
    h = L.Flatten(name="flat")(h)
    e = L.Embedding(11, 4, name="emb")(tok)
    e = L.LSTM(5, name="lstm")(e)
    h = L.Concatenate(name="cat")([h, e])
    h = L.Dense(4, name="dense")(h)
    out = L.Activation("softmax", dtype="float32", name="softmax")(h)
    return lib.Model([img, tok], out)


def _data(n=8, seed=0):
    rng = np.random.default_rng(seed)
    x = [rng.normal(size=(n, 6, 6, 2)).astype("float32"), rng.integers(0, 11, (n, 5))]
    return x, rng.integers(0, 4, n)


def _dtype_table(model):
    rows = {}
    for layer in model.layers:
        if type(layer).__name__ == "InputLayer":
            continue
        rows[layer.name] = (
            layer.dtype_policy.name,
            layer.compute_dtype,
            layer.variable_dtype,
            str(layer.dtype),
            [str(w.dtype).replace("torch.", "") for w in layer.weights],
            str(layer.output.dtype).replace("torch.", ""),
        )
    return rows


@pytest.mark.interop
@pytest.mark.parametrize("policy", ["mixed_bfloat16", "mixed_float16"])
def test_dtypes_match_keras(keras, policy):
    keras.mixed_precision.set_global_policy(policy)
    MP.set_global_policy(policy)
    try:
        km, tm = _model(keras), _model(keratron)
    finally:
        keras.mixed_precision.set_global_policy("float32")
    assert _dtype_table(tm) == _dtype_table(km)
    ours = _dtype_table(tm)
    assert ours["dense"][:3] == (policy, policy.split("_")[1], "float32")
    assert ours["softmax"][5] == "float32"
    x, _ = _data()
    if policy == "mixed_bfloat16" or _half_kernels_on_cpu("float16"):
        assert str(tm(x).dtype) == str(km(x).dtype).replace("torch.", "")


@pytest.mark.parametrize("run_eagerly", [False, True])
def test_mixed_bfloat16_fit_evaluate_predict(run_eagerly):
    MP.set_global_policy("mixed_bfloat16")
    keratron.utils.set_random_seed(1)
    model = _model(keratron)
    model.compile(
        "adam", "sparse_categorical_crossentropy", metrics=["accuracy"], run_eagerly=run_eagerly
    )
    x, y = _data(32)
    before = [w.copy() for w in model.get_weights()]
    history = model.fit(x, y, epochs=3, batch_size=8, verbose=0).history
    assert all(np.isfinite(history["loss"]))
    assert history["loss"][-1] < history["loss"][0]
    assert all(w.dtype == "float32" for w in model.weights)
    assert any(not np.array_equal(a, b) for a, b in zip(before, model.get_weights()))
    loss, acc = model.evaluate(x, y, verbose=0)
    assert np.isfinite(loss) and 0 <= acc <= 1
    p = model.predict(x, verbose=0)
    assert p.dtype == np.float32 and p.shape == (32, 4)
    np.testing.assert_allclose(p.sum(-1), 1.0, atol=1e-5)
    assert type(model.optimizer).__name__ == "Adam"  # no loss scaling for bfloat16


def test_mixed_bfloat16_compiled_matches_eager():
    MP.set_global_policy("mixed_bfloat16")
    x, y = _data(16)
    results = []
    for eager in (False, True):
        keratron.utils.set_random_seed(3)
        keratron.backend.clear_session()
        model = _model(keratron)
        model.compile("sgd", "sparse_categorical_crossentropy", run_eagerly=eager)
        model.fit(x, y, epochs=1, batch_size=8, verbose=0, shuffle=False)
        results.append((model.get_weights(), model.predict(x, verbose=0)))
    for a, b in zip(results[0][0], results[1][0]):
        np.testing.assert_allclose(a, b, atol=1e-2)
    np.testing.assert_allclose(results[0][1], results[1][1], atol=2e-2)


def test_a_mixed_bfloat16_step_groups_its_casts_with_the_same_bits(monkeypatch):
    # The compiled step casts the variables to bfloat16 and the gradients back in a few
    # multi-tensor calls (`group_casts`; one launch each on CUDA); weights after three steps
    # and predictions are those of the plan with one call per cast, bit for bit.
    from keratron.autodiff import passes
    from keratron.ops import elementwise

    sizes = group_sizes(monkeypatch)
    MP.set_global_policy("mixed_bfloat16")
    x, y = _data(24)
    results = []
    for grouped in (True, False):
        if not grouped:
            ungrouped = [p for p in passes.PASSES if p is not elementwise.group_casts]
            monkeypatch.setattr(passes, "PASSES", ungrouped)
        keratron.utils.set_random_seed(3)
        keratron.backend.clear_session()
        model = _model(keratron)
        model.compile("adam", "sparse_categorical_crossentropy")
        sizes.clear()
        model.fit(x, y, epochs=1, batch_size=8, verbose=0, shuffle=False)
        results.append((model.get_weights(), model.predict(x, verbose=0), list(sizes)))
    (w1, p1, calls), (w2, p2, no_calls) = results
    # 10 trainable variables: the largest group holds at least half their casts.
    assert calls and max(calls) >= 5 and not no_calls, (calls, no_calls)
    for a, b in zip(w1, w2):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(p1, p2)


@pytest.mark.parametrize("run_eagerly", [False, True])
def test_mixed_float16_wraps_optimizer_and_trains(run_eagerly):
    if not _half_kernels_on_cpu("float16"):
        pytest.skip("this torch build has no CPU float16 matmul/conv kernels")
    MP.set_global_policy("mixed_float16")
    keratron.utils.set_random_seed(2)
    model = _model(keratron)
    model.compile(
        keratron.optimizers.SGD(0.05), "sparse_categorical_crossentropy", run_eagerly=run_eagerly
    )
    opt = model.optimizer
    assert isinstance(opt, MP.LossScaleOptimizer) and opt.name == "loss_scale_optimizer"
    opt.dynamic_growth_steps = 2
    x, y = _data(32)
    history = model.fit(x, y, epochs=2, batch_size=8, verbose=0).history
    assert all(np.isfinite(history["loss"]))
    assert all(w.dtype == "float32" for w in model.weights)
    # Some of these float16 steps overflow at scales of 2**16 and more (and are skipped).
    scale = float(opt.dynamic_scale.numpy())
    assert scale != 2.0**15 and np.log2(scale) == int(np.log2(scale))
    assert 1 <= int(opt.iterations.numpy()) <= 8
    assert model.predict(x, verbose=0).dtype == np.float32
    # A small model that never overflows: 8 finite steps, doubling every 2, so the traced
    # step multiplied the loss by the live scale each time.
    small = keratron.Sequential([keratron.Input((3,)), layers.Dense(2)])
    small.compile(keratron.optimizers.SGD(0.01), "mse", run_eagerly=run_eagerly)
    small.optimizer.dynamic_growth_steps = 2
    xs = np.full((32, 3), 0.01, "float32")
    small.fit(xs, np.zeros((32, 2), "float32"), epochs=2, batch_size=8, verbose=0)
    assert float(small.optimizer.dynamic_scale.numpy()) == 2.0**15 * 2**4
    assert int(small.optimizer.iterations.numpy()) == 8
    plain = keratron.Sequential([layers.Dense(2)])
    plain.compile("sgd", "mse", auto_scale_loss=False)
    assert not isinstance(plain.optimizer, MP.LossScaleOptimizer)


@pytest.mark.parametrize("run_eagerly", [False, True])
def test_fit_skips_a_step_with_non_finite_gradients(run_eagerly):
    MP.set_global_policy("mixed_bfloat16")
    model = keratron.Sequential([keratron.Input((3,)), layers.Dense(2)])
    opt = MP.LossScaleOptimizer(keratron.optimizers.SGD(0.1), initial_scale=8.0)
    model.compile(opt, "mse", run_eagerly=run_eagerly)
    x = np.array([[1.0, np.inf, 0.0]] * 4, "float32")
    before = model.get_weights()
    model.fit(x, np.zeros((4, 2), "float32"), epochs=1, batch_size=4, verbose=0)
    for a, b in zip(before, model.get_weights()):
        np.testing.assert_array_equal(a, b)
    assert float(opt.dynamic_scale.numpy()) == 4.0
    assert int(opt.iterations.numpy()) == 0
    model.fit(np.ones((4, 3), "float32"), np.zeros((4, 2), "float32"), epochs=1, verbose=0)
    assert int(opt.iterations.numpy()) == 1 and int(opt.step_counter.numpy()) == 1


# ---------------------------------------------------------------------------- loss scaling
@pytest.mark.parametrize("inner", ["adam", "sgd_momentum"])
def test_loss_scaling_without_host_reads_matches_the_host_form(inner):
    """The form a CUDA graph replays (the skip decided on the device, state put back where
    the gradients are not finite) against the host form, on the test device: the same
    variables, slots, iterations, counter and scale after every step, through finite steps,
    growths of the scale and skipped steps (an inf, a NaN)."""
    import torch

    def make():
        w = [
            keratron.Variable(np.arange(6, dtype="float32").reshape(2, 3)),
            keratron.Variable(np.ones(3, "float32")),
        ]
        base = (
            keratron.optimizers.Adam(0.01, weight_decay=0.1)
            if inner == "adam"
            else keratron.optimizers.SGD(0.01, momentum=0.9)
        )
        opt = MP.LossScaleOptimizer(base, initial_scale=8.0, dynamic_growth_steps=2)
        opt.build(w)
        return w, opt

    (wa, host), (wb, dev) = make(), make()
    rng = np.random.default_rng(0)
    scales = []
    for step in range(7):
        grads = [8 * rng.standard_normal(v.shape).astype("float32") for v in wa]
        if step == 1:
            grads[0][0, 1] = np.inf
        if step == 4:
            grads[1][2] = np.nan
        device = wa[0]._value.device  # the gradients live where the variables do
        host._apply_scaled([torch.as_tensor(g, device=device) for g in grads], wa)
        dev._apply_scaled_on_device([torch.as_tensor(g, device=device) for g in grads], wb)
        assert len(host.variables) == len(dev.variables)
        for a, b in zip(wa + host.variables, wb + dev.variables):
            np.testing.assert_array_equal(a.numpy(), b.numpy())
        scales.append(float(host.dynamic_scale.numpy()))
    assert scales == [8.0, 4.0, 4.0, 8.0, 4.0, 4.0, 8.0]
    assert int(host.inner_optimizer.iterations.numpy()) == 5


def test_loss_scale_optimizer_defaults_config_and_errors():
    opt = MP.LossScaleOptimizer(keratron.optimizers.SGD())
    assert opt is not None and keratron.optimizers.LossScaleOptimizer is MP.LossScaleOptimizer
    cfg = opt.get_config()
    assert cfg["initial_scale"] == 2.0**15 and cfg["dynamic_growth_steps"] == 2000
    assert cfg["inner_optimizer"]["class_name"] == "SGD"
    assert float(opt.scale_loss(keratron.convert_to_tensor(2.0)).numpy()) == 2.0**16
    again = keratron.optimizers.deserialize(keratron.optimizers.serialize(opt))
    assert type(again) is MP.LossScaleOptimizer and again.get_config()["initial_scale"] == 2.0**15
    with pytest.raises(ValueError, match="dynamic=False"):
        MP.LossScaleOptimizer(keratron.optimizers.SGD(), dynamic=False)
    with pytest.raises(ValueError, match="clipnorm"):
        MP.LossScaleOptimizer(keratron.optimizers.SGD(), clipnorm=1.0)
    with pytest.raises(TypeError, match="inner_optimizer"):
        MP.LossScaleOptimizer("sgd")
    inner = keratron.optimizers.Adam(loss_scale_factor=4.0)
    MP.LossScaleOptimizer(inner)
    assert inner.loss_scale_factor is None


def _run_sequence(lib, grads_list, **kwargs):
    opt = lib.mixed_precision.LossScaleOptimizer(lib.optimizers.SGD(0.1, momentum=0.5), **kwargs)
    v = lib.Variable(np.ones(3, "float32"))
    rows = []
    for g in grads_list:
        opt.apply([lib.ops.convert_to_tensor(np.asarray(g, "float32"))], [v])
        rows.append(
            (
                np.asarray(lib.ops.convert_to_numpy(v)).tolist(),
                float(np.asarray(lib.ops.convert_to_numpy(opt.dynamic_scale))),
                int(np.asarray(lib.ops.convert_to_numpy(opt.step_counter))),
                int(np.asarray(lib.ops.convert_to_numpy(opt.iterations))),
            )
        )
    names = [v.path.split("/")[-1] for v in opt.variables]
    return rows, names


@pytest.mark.interop
def test_loss_scaling_matches_keras_on_overflow_and_growth(keras):
    inf, nan = np.inf, np.nan
    grads = [[8, 8, 8], [1, inf, 1], [8, 8, 8], [8, 8, 8], [8, 8, 8], [nan, 0, 0], [8, 8, 8]]
    theirs, their_names = _run_sequence(keras, grads, initial_scale=8.0, dynamic_growth_steps=3)
    ours, our_names = _run_sequence(keratron, grads, initial_scale=8.0, dynamic_growth_steps=3)
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a[0], b[0], rtol=1e-6)
        assert a[1:] == b[1:]
    assert ours[1][1] == 4.0 and ours[1][2] == 0  # overflow: skipped, halved
    assert ours[4][1] == 8.0  # three finite steps after it: doubled
    assert (
        our_names[:4]
        == their_names[:4]
        == ["iteration", "learning_rate", "step_counter", "dynamic_scale"]
    )
    assert len(our_names) == len(their_names)


@pytest.mark.interop
def test_keras_loss_scale_optimizer_config_loads(keras):
    k = keras.mixed_precision.LossScaleOptimizer(
        keras.optimizers.Adam(1e-3), initial_scale=1024.0, dynamic_growth_steps=10
    )
    ours = keratron.optimizers.deserialize(keras.optimizers.serialize(k))
    assert isinstance(ours, MP.LossScaleOptimizer)
    assert (ours.initial_scale, ours.dynamic_growth_steps) == (1024.0, 10)
    assert type(ours.inner_optimizer).__name__ == "Adam"
    back = keras.optimizers.deserialize(keratron.optimizers.serialize(ours))
    assert back.get_config()["initial_scale"] == 1024.0


# ---------------------------------------------------------------------------- files
def _small(lib):
    L = lib.layers
    inp = lib.Input((6, 6, 2))
    h = L.Conv2D(3, 3, name="conv")(inp)
    h = L.BatchNormalization(name="bn")(h)
    h = L.Flatten(name="flat")(h)
    h = L.Dense(4, name="dense")(h)
    return lib.Model(inp, L.Activation("softmax", dtype="float32", name="softmax")(h))


def _policies(model):
    return {layer.name: layer.dtype_policy.name for layer in model.layers[1:]}


@pytest.mark.interop
@pytest.mark.parametrize("fmt", ["keras", "h5"])
def test_models_exchanged_with_keras_keep_policies(keras, tmp_path, fmt):
    x = _data()[0][0]
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    try:
        km = _small(keras)
        km(x)
        kpath = str(tmp_path / f"k.{fmt}")
        km.save(kpath)
    finally:
        keras.mixed_precision.set_global_policy("float32")
    # Loaded here with the global policy at float32: the file's policies apply.
    tm = keratron.models.load_model(kpath)
    assert _policies(tm) == _policies(km)
    assert _policies(tm)["dense"] == "mixed_bfloat16" and _policies(tm)["softmax"] == "float32"
    assert all(w.dtype == "float32" for w in tm.weights)
    for a, b in zip(tm.get_weights(), km.get_weights()):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_allclose(
        tm.predict(x, verbose=0), keras.ops.convert_to_numpy(km(x)), atol=2e-2
    )
    tpath = str(tmp_path / f"t.{fmt}")
    tm.save(tpath)
    back = keras.models.load_model(tpath)
    assert _policies(back) == _policies(km)
    assert all(str(w.dtype) == "float32" for w in back.weights)


@pytest.mark.interop
@pytest.mark.parametrize("suffix", [".weights.h5", ".h5"])
def test_weights_exchanged_with_keras_under_a_policy(keras, tmp_path, suffix):
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    MP.set_global_policy("mixed_bfloat16")
    try:
        km, tm = _small(keras), _small(keratron)
    finally:
        keras.mixed_precision.set_global_policy("float32")
    x = _data()[0][0]
    km(x), tm(x)
    rng = np.random.default_rng(5)
    km.set_weights([rng.normal(size=w.shape).astype("float32") for w in km.get_weights()])
    path = str(tmp_path / f"k{suffix}")
    if suffix == ".h5":  # Keras 3 writes tf.keras's legacy layout only through this function
        import h5py
        from keras.src.legacy.saving import legacy_h5_format

        with h5py.File(path, "w") as f:
            legacy_h5_format.save_weights_to_hdf5_group(f, km)
    else:
        km.save_weights(path)
    tm.load_weights(path)
    assert all(w.dtype == "float32" for w in tm.weights)
    for a, b in zip(tm.get_weights(), km.get_weights()):
        np.testing.assert_array_equal(a, b)
    tm.set_weights([w * 0.5 for w in tm.get_weights()])
    tpath = str(tmp_path / f"t{suffix}")
    tm.save_weights(tpath)
    km.load_weights(tpath)
    for a, b in zip(tm.get_weights(), km.get_weights()):
        np.testing.assert_array_equal(a, b)


@pytest.mark.interop
def test_batch_norm_in_training_under_mixed_bfloat16_matches_keras(keras):
    # The bfloat16 activations go to torch's batch-norm kernels as they are (float32 inside,
    # float32 statistics); Keras casts them to float32 and back. Same inputs and weights: the
    # outputs agree to bfloat16's rounding, the moving statistics to float32's.
    from keratron.ops import batchnorm

    rng = np.random.default_rng(9)
    x = (rng.standard_normal((8, 6, 6, 16)) * 3 + 2).astype("float32")
    gamma = rng.uniform(0.5, 2, 16).astype("float32")
    beta = rng.standard_normal(16).astype("float32")
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    MP.set_global_policy("mixed_bfloat16")
    try:
        theirs, ours = keras.layers.BatchNormalization(), keratron.layers.BatchNormalization()
        for layer in (theirs, ours):
            layer.build(x.shape)
            layer.set_weights([gamma, beta, np.zeros(16, "float32"), np.ones(16, "float32")])
        xb = keratron.ops.cast(x, "bfloat16")
        calls = []
        real = batchnorm._bn_half
        batchnorm._bn_half = lambda *a: calls.append(a[0].dtype) or real(*a)
        try:
            y = ours(xb, training=True)
        finally:
            batchnorm._bn_half = real
        want = theirs(keras.ops.cast(x, "bfloat16"), training=True)
    finally:
        keras.mixed_precision.set_global_policy("float32")
    assert calls, "the half-precision kernel path was not taken"
    assert y.dtype == "bfloat16" and str(want.dtype).endswith("bfloat16")
    got = keratron.ops.cast(y, "float32").numpy()
    want = keras.ops.convert_to_numpy(keras.ops.cast(want, "float32"))
    np.testing.assert_allclose(got, want, rtol=1e-2, atol=2e-2)
    for a, b in zip(ours.weights, theirs.weights):
        assert a.dtype == "float32"
        np.testing.assert_allclose(
            np.asarray(a.numpy()), keras.ops.convert_to_numpy(b), rtol=1e-5, atol=1e-6
        )


@pytest.mark.interop
def test_batch_norm_inference_under_mixed_bfloat16_matches_keras_and_folds(keras):
    # In inference a bfloat16 batch is normalized in bfloat16 by per-channel factors computed
    # in float32 (Keras: in float32 throughout); after a convolution the compiler folds it
    # into the convolution's kernel and bias, as in float32.
    rng = np.random.default_rng(10)
    x = (rng.standard_normal((4, 9, 9, 6)) * 2).astype("float32")
    weights = [
        rng.uniform(0.5, 2, 12).astype("float32"),  # gamma
        rng.standard_normal(12).astype("float32"),  # beta
        rng.standard_normal(12).astype("float32"),  # moving mean
        rng.uniform(0.5, 3, 12).astype("float32"),  # moving variance
    ]
    kernel = (rng.standard_normal((3, 3, 6, 12)) / 5).astype("float32")

    def build(lib):
        inp = lib.Input((9, 9, 6))
        conv = lib.layers.Conv2D(12, 3, padding="same", use_bias=False)
        bn = lib.layers.BatchNormalization()
        model = lib.Model(inp, bn(conv(inp)))
        conv.set_weights([kernel])
        bn.set_weights(weights)
        return model

    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    MP.set_global_policy("mixed_bfloat16")
    try:
        theirs, ours = build(keras), build(keratron)
        want = keras.ops.convert_to_numpy(keras.ops.cast(theirs(x, training=False), "float32"))
        eager = ours(x, training=False)
        f = keratron.function(lambda v: ours(v, training=False))
        compiled = f(x)
        plan = f.get_concrete_graph(x).dump()
    finally:
        keras.mixed_precision.set_global_policy("float32")
    assert eager.dtype == compiled.dtype == "bfloat16"
    scale = np.abs(want).max()
    for got in (eager, compiled):
        got = keratron.ops.cast(got, "float32").numpy()
        np.testing.assert_allclose(got, want, rtol=2e-2, atol=2e-2 * scale)
    steps = [
        line.split(" = ")[1] for line in plan.splitlines() if " = " in line and " pre " not in line
    ]
    kernels = [s.split("(")[0] for s in steps]
    assert kernels == ["cast", "conv"], plan  # the input's cast, then the folded convolution
    (conv_step,) = [s for s in steps if "conv(" in s]
    assert ", None, strides" not in conv_step, plan  # the batch norm's shift is its bias
