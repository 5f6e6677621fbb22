"""On a GPU: `fit`, `evaluate` and `predict` of the same model from the same weights give what
they give on CPU (float32 throughout; the GPU step is a replayed CUDA graph under backend
"auto", so Triton kernels or cuBLAS/cuDNN, whichever measured faster). Skipped without CUDA;
`bench/gpu_tests.sh` runs it on a GPU machine. Also, on CPU, how `predict` gathers outputs
that stay on the GPU."""

import numpy as np
import pytest
import torch

import keratron

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")

L = keratron.layers


def _mlp():
    return [keratron.Input((64,)), L.Dense(128, activation="relu"), L.Dense(10)], (64,)


def _cnn():
    stack = [
        keratron.Input((12, 12, 2)),
        L.Conv2D(16, 3, activation="relu"),
        L.MaxPooling2D(2),
        L.DepthwiseConv2D(3, padding="same"),
        L.Flatten(),
        L.Dense(10),
    ]
    return stack, (12, 12, 2)


def _cnn_bn():
    # BatchNormalization in training: the fused primitive's CUDA forward (var_mean) and torch's
    # batch-norm backward kernel against the CPU forward (sums).
    stack = [
        keratron.Input((12, 12, 2)),
        L.Conv2D(16, 3, use_bias=False),
        L.BatchNormalization(),
        L.ReLU(),
        L.DepthwiseConv2D(3, padding="same", use_bias=False),
        L.BatchNormalization(momentum=0.9),
        L.ReLU(),
        L.GlobalAveragePooling2D(),
        L.Dense(10),
    ]
    return stack, (12, 12, 2)


def _lstm():
    return [keratron.Input((9,), dtype="int32"), L.Embedding(50, 16), L.LSTM(24), L.Dense(10)], None


@cuda
@pytest.mark.parametrize("make", [_mlp, _cnn, _cnn_bn, _lstm], ids=["mlp", "cnn", "cnn_bn", "lstm"])
def test_cuda_fit_matches_cpu(make):
    rng = np.random.default_rng(0)
    stack, shape = make()
    n = 256
    x = (
        rng.integers(0, 50, (n, 9)).astype("int32")
        if shape is None
        else rng.standard_normal((n, *shape)).astype("float32")
    )
    y = rng.integers(0, 10, n)
    keratron.utils.set_random_seed(0)
    cpu = keratron.Sequential(stack)
    with keratron.device("cuda"):
        gpu = keratron.Sequential(make()[0])
    gpu.set_weights(cpu.get_weights())
    results = []
    for model in (cpu, gpu):
        model.compile(
            optimizer=keratron.optimizers.Adam(1e-3),
            loss=keratron.losses.SparseCategoricalCrossentropy(from_logits=True),
            metrics=["accuracy"],
        )
        hist = model.fit(x, y, batch_size=32, epochs=3, verbose=0, shuffle=False)
        results.append(
            (
                hist.history["loss"],
                model.evaluate(x, y, batch_size=64, verbose=0),
                model.predict(x, batch_size=64, verbose=0),
                model.get_weights(),
            )
        )
    (loss_c, eval_c, pred_c, w_c), (loss_g, eval_g, pred_g, w_g) = results
    assert any(v.device.type == "cuda" for v in (w._value for w in gpu.weights))
    np.testing.assert_allclose(loss_g, loss_c, rtol=2e-3)
    np.testing.assert_allclose(eval_g, eval_c, rtol=2e-3, atol=2e-3)
    np.testing.assert_allclose(pred_g, pred_c, rtol=2e-3, atol=2e-3 * np.abs(pred_c).max())
    for a, b in zip(w_g, w_c):
        np.testing.assert_allclose(a, b, rtol=2e-3, atol=2e-3 * max(np.abs(b).max(), 1e-3))


def test_predict_outputs_kept_on_the_device_merge_like_host_arrays():
    """What `predict` does with GPU outputs (kept as tensors, one transfer at the end), run
    here on CPU tensors: the same arrays as converting each batch as it comes."""
    from keratron.models.trainer import _PredictOutputs

    rng = np.random.default_rng(0)
    batches = [
        {"a": rng.standard_normal((n, 3)).astype("float32"), "b": rng.integers(0, 9, (n,))}
        for n in (4, 4, 2)
    ]
    kept, host = _PredictOutputs(lambda v: True), _PredictOutputs(lambda v: False)
    for batch in batches:
        out = {k: keratron.convert_to_tensor(v) for k, v in batch.items()}
        kept.add(out)
        host.add(out)
    assert isinstance(kept.buckets[0][0], keratron.Tensor)
    assert isinstance(host.buckets[0][0], np.ndarray)
    got, want = kept.merged(), host.merged()
    for k in ("a", "b"):
        assert got[k].dtype == want[k].dtype and got[k].shape == (10,) + want[k].shape[1:]
        np.testing.assert_array_equal(got[k], want[k])
        np.testing.assert_array_equal(want[k], np.concatenate([b[k] for b in batches]))
