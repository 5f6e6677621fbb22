"""A whole model trained through the Triton kernels (interpreter) against the CPU fallback.

One functional model with a convolutional image branch (two Conv2D, so both conv gradients
are needed) and an Embedding(mask_zero) -> LSTM text branch, joined by Dense layers and a
from-logits sparse cross-entropy: three SGD steps from the same initial weights with the
"triton" backend and with the "fallback" backend must give the same weights.
"""

import contextlib

import numpy as np

import keratron as kt

STEPS = 3
BATCH = 3
# Every op with a Triton route that this model uses, forward and backward.
EXPECTED_OPS = (
    "matmul",
    "conv",
    "conv_grad_input",
    "conv_grad_filter",
    "lstm",
    "lstm_grad",
    "softmax_cross_entropy",
    "softmax_cross_entropy_grad",
)


@contextlib.contextmanager
def backend(name):
    previous = kt.config.kernel_backend()
    kt.config.set_kernel_backend(name)
    try:
        yield
    finally:
        kt.config.set_kernel_backend(previous)


def build_model():
    layers = kt.layers
    image = kt.Input((7, 9, 3), name="image")
    x = layers.Conv2D(5, 3, activation="relu", name="conv_a")(image)
    x = layers.Conv2D(4, 3, strides=2, padding="same", name="conv_b")(x)
    x = layers.Flatten()(x)
    x = layers.Dense(6, activation="tanh", name="image_dense")(x)
    text = kt.Input((11,), dtype="int32", name="text")
    t = layers.Embedding(17, 6, mask_zero=True, name="embed")(text)
    t = layers.LSTM(5, name="lstm")(t)
    joined = layers.Concatenate()([x, t])
    logits = layers.Dense(4, name="logits")(joined)
    return kt.Model([image, text], logits)


def make_data():
    rng = np.random.default_rng(3)
    images = rng.normal(size=(BATCH, 7, 9, 3)).astype("float32")
    text = rng.integers(1, 17, size=(BATCH, 11)).astype("int32")
    text[0, 8:] = 0  # padded tails: the LSTM sees a mask
    text[1, 5:] = 0
    labels = rng.integers(0, 4, size=(BATCH,)).astype("int32")
    return images, text, labels


def train(model, initial, data):
    """STEPS steps of SGD with momentum from `initial`; returns the final weights."""
    model.set_weights(initial)
    images, text, labels = data
    loss_fn = kt.losses.SparseCategoricalCrossentropy(from_logits=True)
    optimizer = kt.optimizers.SGD(learning_rate=0.2, momentum=0.5)
    losses = []
    for _ in range(STEPS):
        with kt.GradientTape() as tape:
            loss = loss_fn(labels, model([images, text], training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply(grads, model.trainable_variables)
        losses.append(float(loss))
    return [w.copy() for w in model.get_weights()], losses


def test_training_steps_match_the_fallback(triton_backend):
    # Built under the fallback: building runs the layers on shape-only (meta) tensors, which
    # no kernel handles and which the "triton" backend would reject.
    kt.utils.set_random_seed(5)
    with backend("fallback"):
        model = build_model()
    # Copies: get_weights' arrays may share memory with variables the optimizer updates.
    initial = [w.copy() for w in model.get_weights()]
    data = make_data()
    with backend("fallback"):
        ref_weights, ref_losses = train(model, initial, data)
    triton_backend.reset_launch_counts()
    weights, losses = train(model, initial, data)  # the fixture's "triton" backend
    counts = triton_backend.launch_counts()
    print("Triton launches per op:", dict(sorted(counts.items())))
    for op in EXPECTED_OPS:
        assert counts.get(op, 0) > 0, f"no Triton launch for {op}: {counts}"

    np.testing.assert_allclose(losses, ref_losses, rtol=2e-4)
    assert ref_losses[-1] < ref_losses[0]  # training moved the weights somewhere useful
    names = [v.path if hasattr(v, "path") else v.name for v in model.weights]
    assert len(weights) == len(ref_weights) == len(names)
    for name, w, ref, w0 in zip(names, weights, ref_weights, initial):
        scale = np.abs(ref).max()
        assert np.abs(w - ref).max() <= 2e-4 * scale, name
        # The updates themselves agree too, not only weights dominated by their start.
        step = ref - w0
        assert np.abs((w - w0) - step).max() <= 1e-4 * max(np.abs(step).max(), 1e-6), name


def fit(model, initial, data, name):
    """Three steps of `model.fit` (traced and compiled train steps) under backend `name`."""
    images, text, labels = data
    model.set_weights(initial)
    model.compile(
        optimizer=kt.optimizers.SGD(learning_rate=0.2, momentum=0.5),
        loss=kt.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    with backend(name):
        history = model.fit(
            [images, text], labels, batch_size=BATCH, epochs=STEPS, shuffle=False, verbose=0
        )
    return [w.copy() for w in model.get_weights()], history.history["loss"]


def test_fit_through_compiled_steps_matches_the_fallback(triton_backend):
    kt.utils.set_random_seed(6)
    with backend("fallback"):
        model = build_model()
    initial = [w.copy() for w in model.get_weights()]
    data = make_data()
    ref_weights, ref_losses = fit(model, initial, data, "fallback")
    triton_backend.reset_launch_counts()
    weights, losses = fit(model, initial, data, "triton")
    counts = triton_backend.launch_counts()
    print("Triton launches per op (fit):", dict(sorted(counts.items())))
    for op in EXPECTED_OPS:
        assert counts.get(op, 0) > 0, f"no Triton launch for {op}: {counts}"
    np.testing.assert_allclose(losses, ref_losses, rtol=2e-4)
    for v, w, ref in zip(model.weights, weights, ref_weights):
        assert np.abs(w - ref).max() <= 2e-4 * np.abs(ref).max(), v.path
