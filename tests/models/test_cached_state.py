"""State a compiled function derives from variables and keeps across calls (convolution
kernels relaid out for oneDNN, folded BatchNormalization, transposed weights) follows every
write to those variables: `fit` with any optimizer, `train_on_batch`, `set_weights`,
`load_weights` and `assign` all make the next `predict` see the new weights."""

import importlib
import threading

import numpy as np
import pytest
import torch

import keratron as kt

# Every optimizer keratron ships, each with a setting that moves the weights visibly in a few
# steps. The fused, multi-tensor and per-tensor update paths all appear here.
OPTIMIZERS = {
    "sgd": lambda: kt.optimizers.SGD(0.05),
    "sgd_momentum": lambda: kt.optimizers.SGD(0.05, momentum=0.9, nesterov=True),
    "adam": lambda: kt.optimizers.Adam(0.01),
    "adam_amsgrad": lambda: kt.optimizers.Adam(0.01, amsgrad=True),
    "adamw": lambda: kt.optimizers.AdamW(0.01),
    "nadam": lambda: kt.optimizers.Nadam(0.01),
    "adamax": lambda: kt.optimizers.Adamax(0.01),
    "rmsprop": lambda: kt.optimizers.RMSprop(0.01),
    "adagrad": lambda: kt.optimizers.Adagrad(0.1),
    "adadelta": lambda: kt.optimizers.Adadelta(10.0),
    "lion": lambda: kt.optimizers.Lion(0.01),
    "ftrl": lambda: kt.optimizers.Ftrl(0.1),
}


def _conv(filters, kernel_size, **kw):
    return lambda h: kt.layers.Conv2D(filters, kernel_size, **kw)(h)


# Each layer with a cached inference form, alone in a model whose other weights are plain.
LAYERS = {
    # oneDNN's blocked kernel layout, computed once per weight change
    "conv3x3": _conv(8, 3, padding="same", activation="relu"),
    # a 1x1 convolution over more than 2,048 output pixels runs on oneDNN
    "conv1x1_onednn": _conv(8, 1, activation="relu"),
    "depthwise": lambda h: kt.layers.DepthwiseConv2D(3, depth_multiplier=2, padding="same")(h),
    "separable": lambda h: kt.layers.SeparableConv2D(5, 3, padding="same", activation="relu")(h),
    # frozen BatchNormalization runs in inference mode: folded into the convolution before it
    "batchnorm_folded": lambda h: kt.layers.BatchNormalization(trainable=False)(
        _conv(4, 3, padding="same")(h)
    ),
    # a 1x1 convolution over fewer pixels is a GEMM on the kernel in channels_last order
    "conv1x1_gemm": lambda h: _conv(8, 1)(kt.layers.MaxPooling2D(4)(h)),
    "dense": lambda h: kt.layers.Dense(5, activation="relu")(kt.layers.Flatten()(h)),
}


def _model(layers=tuple(LAYERS), seed=0):
    """The given layer cases one after another on a (12, 12, 2) input, then Dense(3)."""
    kt.utils.set_random_seed(seed)
    inputs = kt.Input((12, 12, 2))
    h = inputs
    for name in layers:
        if name == "dense":
            continue
        h = LAYERS[name](h)
    if "dense" in layers:
        h = LAYERS["dense"](h)
    return kt.Model(inputs, kt.layers.Dense(3)(kt.layers.Flatten()(h)))


def _data(n=48, seed=0, image=(12, 12, 2)):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, *image)).astype("float32")
    y = rng.standard_normal((n, 3)).astype("float32")
    return x, y


def _direct(model, x):
    return model(x, training=False).numpy()


def _predict_fit_predict(model, optimizer):
    x, y = _data()
    model.compile(optimizer=optimizer, loss="mse")
    before = model.predict(x, batch_size=32, verbose=0)
    np.testing.assert_allclose(before, _direct(model, x), rtol=1e-5, atol=1e-5)
    model.fit(x, y, epochs=2, batch_size=16, verbose=0)
    after = model.predict(x, batch_size=32, verbose=0)
    assert np.abs(after - before).max() > 1e-3, "the weights did not move: the test shows nothing"
    np.testing.assert_allclose(after, _direct(model, x), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_predict_after_fit_sees_the_trained_weights(name):
    _predict_fit_predict(_model(), OPTIMIZERS[name]())


@pytest.mark.parametrize("layer", sorted(LAYERS))
def test_predict_after_fit_with_adam_sees_each_layers_new_weights(layer):
    # Adam's fused CPU kernel writes weights without bumping torch's version counter.
    _predict_fit_predict(_model((layer,)), kt.optimizers.Adam(0.01))


def test_a_write_outside_keratron_invalidates_the_cache_too():
    # Writing a variable's torch storage directly bumps torch's version counter only.
    x, _ = _data()
    model = _model()
    model.predict(x, batch_size=32, verbose=0)
    model.layers[1].kernel.value.value.mul_(-1.0)
    np.testing.assert_allclose(
        model.predict(x, batch_size=32, verbose=0), _direct(model, x), rtol=1e-5, atol=1e-5
    )


def _large_model(seed=0):
    """Values large enough (over memory_plan.MIN_BYTES at batch 32) for the compiled plan to
    keep their buffers across replays: the padded input, the relu convolution's output
    (oneDNN adding into a kept buffer), the second convolution's input gradient (at the fit
    batch of 16: 16x32x32x16 float32, 1 MiB), the max-pool output and gradient. The Dense(64)
    products (8.4M multiply-adds) run on oneDNN's inner product, which the interleaving then
    covers as well."""
    kt.utils.set_random_seed(seed)
    inputs = kt.Input((32, 32, 8))
    h = kt.layers.ZeroPadding2D(1)(inputs)
    h = kt.layers.Conv2D(16, 3, activation="relu")(h)
    h = kt.layers.Conv2D(8, 3, padding="same", activation="relu")(h)
    h = kt.layers.MaxPooling2D(2)(h)
    h = kt.layers.Dense(64, activation="relu")(kt.layers.Flatten()(h))
    return kt.Model(inputs, kt.layers.Dense(3)(h))


def _first_kernel(model):
    return next(layer.kernel for layer in model.layers if hasattr(layer, "kernel"))


def _interleave(
    seed,
    steps,
    tmp_path,
    make_model=_model,
    image=(12, 12, 2),
    optimizer=lambda: kt.optimizers.Adam(0.01),
    tol=(2e-4, 1e-5),
):
    """A random sequence of everything that reads or writes the weights, run on a compiled
    model and on an eager (`run_eagerly=True`) one from the same start; every output of the
    compiled model equals its own direct call and the eager model's output (to `tol`: against
    the eager model, and against its own direct call)."""
    rng = np.random.default_rng(seed)
    x, y = _data(40, seed, image)
    models = []
    for eager in (False, True):
        m = make_model(seed=seed)
        m.compile(optimizer=optimizer(), loss="mse", run_eagerly=eager)
        m.optimizer.build(m.trainable_variables)  # the saved file holds the optimizer's state
        models.append(m)
    compiled, eager = models
    eager.set_weights(compiled.get_weights())
    path = str(tmp_path / f"w{seed}.weights.h5")
    compiled.save_weights(path)
    actions = ["fit", "predict", "evaluate", "train_on_batch", "set_weights", "load", "assign"]
    done = []
    for _ in range(steps):
        action = actions[rng.integers(len(actions))]
        done.append(action)
        # Drawn once per step, so both models see the same change.
        scale = 1.0 + 0.1 * rng.standard_normal()
        delta = 0.1 * rng.standard_normal(_first_kernel(models[0]).shape).astype("float32")
        outs = []
        for m in models:
            if action == "fit":
                hist = m.fit(x, y, epochs=1, batch_size=16, shuffle=False, verbose=0)
                outs.append(hist.history["loss"])
            elif action == "predict":
                outs.append(m.predict(x, batch_size=32, verbose=0))
            elif action == "evaluate":
                outs.append(m.evaluate(x, y, batch_size=32, verbose=0))
            elif action == "train_on_batch":
                outs.append(m.train_on_batch(x[:16], y[:16]))
            elif action == "set_weights":
                m.set_weights([w * scale for w in m.get_weights()])
            elif action == "load":
                m.load_weights(path)
            else:
                _first_kernel(m).assign(_first_kernel(m).numpy() + delta)
        if outs:
            np.testing.assert_allclose(
                *outs, rtol=tol[0], atol=tol[0], err_msg=f"after {done} (seed {seed})"
            )
        # The compiled model's inference path against its own eager call, tightly.
        np.testing.assert_allclose(
            compiled.predict(x, batch_size=32, verbose=0),
            _direct(compiled, x),
            rtol=tol[1],
            atol=tol[1],
            err_msg=f"after {done} (seed {seed})",
        )


def test_random_interleaving_matches_the_eager_reference(tmp_path):
    _interleave(seed=7, steps=14, tmp_path=tmp_path)


def test_random_interleaving_with_kept_buffers_matches_the_eager_reference(tmp_path, monkeypatch):
    # The compiled plans keep large intermediate buffers across replays (memory_plan): the
    # same interleaving, on a model whose pad, convolution and max-pool values are kept.
    from keratron.autodiff import memory_plan

    kept_lists, kept_prims = [], set()
    make = memory_plan.kept_buffer_call

    def recording(graph, node, fallback, buffers_list):
        kept_lists.append(buffers_list)
        call = make(graph, node, fallback, buffers_list)
        if call is not None:
            kept_prims.add(node.prim.name)
        return call

    monkeypatch.setattr(memory_plan, "kept_buffer_call", recording)
    # predict and evaluate fuse the second convolution with its max pool (conv_max_pool): with
    # ~100 kB chunks, a batch of its 32 KB-per-image output runs in chunks of 3 and a remainder,
    # and its pooled output (8 KB an image) is kept from 64 KB on.
    convolution = importlib.import_module("keratron.ops.convolution")
    monkeypatch.setattr(convolution, "_CHUNK_BYTES", 100_000)
    monkeypatch.setattr(memory_plan, "MIN_BYTES", 1 << 16)
    _interleave(seed=3, steps=14, tmp_path=tmp_path, make_model=_large_model, image=(32, 32, 8))
    assert any(bufs for lst in kept_lists for bufs in lst), "no buffer was kept: shows nothing"
    assert "conv_grad_input" in kept_prims, kept_prims  # the CPU input-gradient route's buffer
    assert "conv_max_pool" in kept_prims, kept_prims  # the fused inference step's buffers


def _batchnorm_model(seed=0):
    """BatchNormalization in training (the fused batch-norm primitive, whose CPU forward writes
    its output into a kept buffer) after a convolution, and a frozen one (folded into the
    convolution before it in inference), on MobileNet's conv-BN-ReLU6 pattern."""
    kt.utils.set_random_seed(seed)
    inputs = kt.Input((32, 32, 8))
    h = kt.layers.Conv2D(16, 3, padding="same", use_bias=False)(inputs)
    h = kt.layers.ReLU(6.0)(kt.layers.BatchNormalization(momentum=0.9)(h))
    h = kt.layers.DepthwiseConv2D(3, padding="same", use_bias=False)(h)
    h = kt.layers.ReLU(6.0)(kt.layers.BatchNormalization(trainable=False)(h))
    h = kt.layers.GlobalAveragePooling2D()(h)
    return kt.Model(inputs, kt.layers.Dense(3)(h))


def test_random_interleaving_with_batch_norm_in_training_matches_the_eager_reference(
    tmp_path, monkeypatch
):
    from keratron.autodiff import memory_plan
    from keratron.ops import batchnorm

    kept_prims = set()
    make = memory_plan.kept_buffer_call

    def recording(graph, node, fallback, buffers_list):
        call = make(graph, node, fallback, buffers_list)
        if call is not None:
            kept_prims.add(node.prim.name)
        return call

    monkeypatch.setattr(memory_plan, "kept_buffer_call", recording)
    monkeypatch.setattr(memory_plan, "MIN_BYTES", 1 << 16)
    # The input gradient by chunks, eager and compiled alike, and kept in the compiled step.
    monkeypatch.setattr(batchnorm, "GRAD_BY_CHUNKS_BYTES", 1 << 16)
    _interleave(seed=5, steps=14, tmp_path=tmp_path, make_model=_batchnorm_model, image=(32, 32, 8))
    # The training forward's kept output, and the backward's.
    assert {"batch_norm", "batch_norm_grad"} <= kept_prims, kept_prims


def _branchy_model(seed=0):
    """A MobileNet-style (0, 1) pad before a stride-2 depthwise convolution (the compiler
    folds it: the prelude grows the kernel by a zero row and column), an Inception-style
    branch (SAME average pool beside a 1x1 convolution, concatenated: both kept buffers), and
    a Flatten -> Dense(256) whose weight gradient (4096x256) BLAS writes into a kept buffer."""
    kt.utils.set_random_seed(seed)
    inputs = kt.Input((32, 32, 8))
    h = kt.layers.ZeroPadding2D(((0, 1), (0, 1)))(inputs)
    h = kt.layers.DepthwiseConv2D(3, strides=2, activation="relu")(h)
    pooled = kt.layers.AveragePooling2D(3, strides=1, padding="same")(h)
    h = kt.layers.Concatenate()([pooled, kt.layers.Conv2D(8, 1, activation="relu")(h)])
    h = kt.layers.Dense(256, activation="relu")(kt.layers.Flatten()(h))
    return kt.Model(inputs, kt.layers.Dense(3)(h))


def test_random_interleaving_with_folded_pads_and_kept_branches_matches_eager(
    tmp_path, monkeypatch
):
    from keratron.autodiff import memory_plan

    convolution = importlib.import_module("keratron.ops.convolution")
    kept_prims, grown = set(), []
    make, fold = memory_plan.kept_buffer_call, convolution._folded_pad

    def recording(graph, node, fallback, buffers_list):
        call = make(graph, node, fallback, buffers_list)
        if call is not None:
            kept_prims.add(node.prim.name)
        return call

    def folding(graph, conv, pad, uses):
        before = fold(graph, conv, pad, uses)
        grown.extend(before or ())
        return before

    monkeypatch.setattr(memory_plan, "kept_buffer_call", recording)
    monkeypatch.setattr(convolution, "_folded_pad", folding)
    monkeypatch.setattr(memory_plan, "MIN_BYTES", 1 << 16)
    _interleave(seed=5, steps=14, tmp_path=tmp_path, make_model=_branchy_model, image=(32, 32, 8))
    assert grown, "no kernel grew: the pad fold was not exercised"
    assert {"avg_pool", "concatenate", "matmul"} <= kept_prims, kept_prims


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(12))
def test_random_interleaving_over_many_seeds(seed, tmp_path):
    _interleave(seed=100 + seed, steps=20, tmp_path=tmp_path)


@pytest.mark.parametrize(
    "device",
    [
        "cpu",
        pytest.param(
            "cuda",
            marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
        ),
    ],
)
def test_random_interleaving_with_loss_scaling_and_a_schedule_matches_eager(device, tmp_path):
    # The optimizer's learning rate follows `iterations` through a schedule, and loss scaling
    # decides each step whether to apply it: on CUDA the compiled steps replay as CUDA graphs,
    # with the schedule and the skip decided on the device, against eager steps that decide
    # on the host; `assign` and `set_weights` between them write what the graphs read.
    def optimizer():
        rates = kt.optimizers.schedules.PiecewiseConstantDecay([4, 8], [0.01, 0.005, 0.001])
        return kt.optimizers.LossScaleOptimizer(kt.optimizers.Adam(rates), initial_scale=64.0)

    with kt.device(device):  # the models, and the direct calls' inputs, on `device`
        _interleave(seed=11, steps=14, tmp_path=tmp_path, optimizer=optimizer)


def test_random_interleaving_with_batch_norm_under_mixed_bfloat16_matches_eager(
    tmp_path, monkeypatch
):
    # In bfloat16 the batch norm's training step runs torch's kernels on the half batch, and
    # in inference its per-channel factors (computed from the weights in the plan's prelude)
    # fold into the convolution before it: after every weight write the compiled model must
    # follow. The plans cast the variables in groups (`group_casts`), the inference ones in
    # the prelude. Tolerances are bfloat16's (a stale prelude moves outputs by ~10%).
    from tests.conftest import group_sizes

    groups = group_sizes(monkeypatch)
    kt.mixed_precision.set_global_policy("mixed_bfloat16")
    try:
        _interleave(
            seed=6,
            steps=14,
            tmp_path=tmp_path,
            make_model=_batchnorm_model,
            image=(32, 32, 8),
            tol=(3e-2, 3e-2),
        )
    finally:
        kt.mixed_precision.set_global_policy(None)
    assert groups and max(groups) >= 2  # the compiled plans ran grouped casts


def test_random_interleaving_with_predict_batches_on_threads_matches_eager(tmp_path, monkeypatch):
    # Beside busy processes (the free-core probe stands in here), predict runs its batches on
    # threads that replay the compiled plan concurrently, its kept buffers held by one thread
    # at a time: after every weight write both models must still follow.
    from keratron.utils import threads

    maps = []
    ordered_map = threads.ordered_map

    def counted(fn, items, workers):
        maps.append(workers)
        return ordered_map(fn, items, workers)

    monkeypatch.setattr(threads, "ordered_map", counted)
    monkeypatch.setattr(threads, "_cached_free_cores", lambda: 1)
    monkeypatch.setattr(threads, "_cached_other_threads", lambda: 0)
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        _interleave(seed=8, steps=14, tmp_path=tmp_path)
    finally:
        torch.set_num_threads(before)
    assert maps and set(maps) == {4}  # predict took the batch threads: twice the two


def test_random_interleaving_with_a_second_stream_matches_eager(
    tmp_path, monkeypatch, torch_threads
):
    # Every core busy (the probe stands in): fit's compiled step hands its weight gradients to
    # a second thread, from a second lowering of the plan with its own kept buffers and the
    # prelude's values shared with the first. Both must follow every weight write.
    from keratron.autodiff import memory_plan, side_stream
    from keratron.utils import threads

    ran = []
    run = side_stream._run

    def recorded(*args):
        ran.append(threading.current_thread().name)
        return run(*args)

    monkeypatch.setattr(side_stream, "_run", recorded)
    monkeypatch.setattr(threads, "_allowed_cores", lambda: 2)
    monkeypatch.setattr(threads, "_cached_free_cores", lambda: 1)
    monkeypatch.setattr(threads, "_cached_other_threads", lambda: 2)
    monkeypatch.setattr(memory_plan, "MIN_BYTES", 1 << 16)
    torch_threads(2)
    _interleave(seed=5, steps=14, tmp_path=tmp_path, make_model=_large_model, image=(32, 32, 8))
    assert ran and all(name.startswith("keratron-side") for name in ran)


def _small_dense_model(seed=0):
    """Products small enough (under linalg.MEASURED_GEMM_MACS) for the compiled plans to bind
    them to their BLAS call when they are built (`Primitive.cpu_step`); the loss tracker's
    result is `divide_no_nan` of its 0-d total and count."""
    kt.utils.set_random_seed(seed)
    inputs = kt.Input((12, 12, 2))
    h = kt.layers.Dense(16, activation="relu")(kt.layers.Flatten()(inputs))
    return kt.Model(inputs, kt.layers.Dense(3)(h))


def test_random_interleaving_of_a_small_dense_model_matches_the_eager_reference(
    tmp_path, monkeypatch
):
    from keratron.ops import linalg

    bound = []
    make = linalg.matmul_p.cpu_step

    def recording(avals, params, general):
        step = make(avals, params, general)
        bound.append(step is not None)
        return step

    monkeypatch.setattr(linalg.matmul_p, "cpu_step", recording)
    _interleave(seed=5, steps=16, tmp_path=tmp_path, make_model=_small_dense_model)
    assert any(bound), "no product of the small model was bound to its BLAS call"
