"""GroupQueryAttention and ReversibleEmbedding: layer-test helper, Keras parity on the same
weights (outputs, masks, attention scores, gradients), configs, errors."""

import numpy as np
import pytest

import keratron as kt
from tests.conftest import require
from tests.layers.layer_test import run_layer_test

L = kt.layers
R = np.random.default_rng(17)


@pytest.fixture(scope="module")
def keras():
    return require("keras")


def x32(*shape):
    return R.standard_normal(shape).astype("float32")


def _copy_weights(k_layer, o_layer):
    weights = [w + R.uniform(-0.3, 0.3, w.shape).astype(w.dtype) for w in k_layer.get_weights()]
    k_layer.set_weights(weights)
    o_layer.set_weights(weights)


def _paths(layer):
    """Weight paths without the layer's own (auto-numbered) name."""
    return [w.path.split("/", 1)[1] for w in layer.weights]


def _same_config(o_layer, k_layer):
    k_config, o_config = k_layer.get_config(), o_layer.get_config()
    assert o_config.keys() == k_config.keys()
    for key, value in k_config.items():
        if key not in ("name", "dtype"):
            assert o_config[key] == value, key


# ------------------------------------------------------------------------ GroupQueryAttention
GQA_KWARGS = [
    {"head_dim": 4, "num_query_heads": 4, "num_key_value_heads": 2},
    {"head_dim": 3, "num_query_heads": 6, "num_key_value_heads": 1, "use_gate": True},
    {
        "head_dim": 2,
        "num_query_heads": 2,
        "num_key_value_heads": 2,
        "use_bias": False,
        "sliding_window": 2,
    },
]


class GQAOnList(L.GroupQueryAttention):
    """GroupQueryAttention called on one [query, value] list, the input form
    `run_layer_test` passes (it calls a layer on a single argument)."""

    def build(self, input_shape):
        super().build(*input_shape)

    def call(self, inputs, training=None):
        return super().call(inputs[0], inputs[1], training=training)


@pytest.mark.parametrize("kwargs", GQA_KWARGS)
def test_gqa_layer(kwargs):
    n_weights = (4 + kwargs.get("use_gate", False)) * (2 if kwargs.get("use_bias", True) else 1)
    run_layer_test(
        GQAOnList,
        kwargs,
        input_shape=[(2, 5, 6), (2, 3, 6)],
        expected_output_shape=(2, 5, 6),
        expected_num_trainable_weights=n_weights,
    )


CALLS = [
    {},
    {"use_causal_mask": True},
    {"attention_mask": "random"},
    {"value_mask": "random", "query_mask": "random"},
    {"return_attention_scores": True, "use_causal_mask": True},
]


@pytest.mark.parametrize("kwargs", GQA_KWARGS)
@pytest.mark.parametrize("call", CALLS)
def test_gqa_matches_keras(keras, kwargs, call):
    import torch

    query, value = x32(2, 5, 6), x32(2, 4, 6)
    call = dict(call)
    for name, shape in [
        ("attention_mask", (2, 5, 4)),
        ("value_mask", (2, 4)),
        ("query_mask", (2, 5)),
    ]:
        if call.get(name) == "random":
            mask = R.random(shape) > 0.3
            if name == "attention_mask":
                # Every query row keeps one key inside the sliding window.
                mask[:, np.arange(5), np.minimum(np.arange(5), 3)] = True
            else:
                mask[..., 0] = True
            call[name] = mask
    k_layer = keras.layers.GroupQueryAttention(**kwargs)
    o_layer = L.GroupQueryAttention(**kwargs)
    k_layer(query, value)
    o_layer(query, value)
    assert [w.shape for w in o_layer.get_weights()] == [w.shape for w in k_layer.get_weights()]
    assert _paths(o_layer) == _paths(k_layer)
    _copy_weights(k_layer, o_layer)
    qt = torch.tensor(query, requires_grad=True)
    k_call = {k: torch.tensor(v) if isinstance(v, np.ndarray) else v for k, v in call.items()}
    k_out = k_layer(qt, torch.tensor(value), **k_call)
    qo = kt.ops.convert_to_tensor(query)
    with kt.GradientTape() as tape:
        tape.watch(qo)
        o_out = o_layer(qo, value, **call)
        first = o_out[0] if isinstance(o_out, tuple) else o_out
        loss = kt.ops.sum(kt.ops.square(first))
    if call.get("return_attention_scores"):
        np.testing.assert_allclose(o_out[1].numpy(), k_out[1].detach().numpy(), atol=1e-5)
        k_out = k_out[0]
    np.testing.assert_allclose(first.numpy(), k_out.detach().numpy(), atol=1e-4, rtol=1e-4)
    _same_config(o_layer, k_layer)
    if "query_mask" in call:
        # A masked query row attends to nothing: its output is constant (uniform weights),
        # so its true gradient is zero. Keras's torch backend masks with an additive -1e9,
        # which in float32 gives the same output but passes a gradient through the scores;
        # gradients are compared where no row is fully masked.
        return
    (k_out**2).sum().backward()
    grads = tape.gradient(loss, [qo, *o_layer.trainable_weights])
    np.testing.assert_allclose(grads[0].numpy(), qt.grad.numpy(), atol=1e-4, rtol=1e-3)
    for g, w in zip(grads[1:], k_layer.trainable_weights):
        np.testing.assert_allclose(g.numpy(), w.value.grad.numpy(), atol=1e-4, rtol=1e-3)


def test_gqa_keras_config_deserializes(keras):
    k_layer = keras.layers.GroupQueryAttention(4, 4, 2, use_gate=True, sliding_window=3)
    layer = L.deserialize(keras.layers.serialize(k_layer))
    assert isinstance(layer, L.GroupQueryAttention)
    assert layer.get_config()["sliding_window"] == 3 and layer.use_gate


def test_gqa_uses_input_masks(keras):
    tokens = np.array([[3, 1, 0, 0], [2, 5, 4, 0]])
    emb = L.Embedding(8, 6, mask_zero=True)
    gqa = L.GroupQueryAttention(3, 4, 2)
    h = emb(tokens)
    masked = gqa(h, h)
    explicit = gqa(h, h, query_mask=tokens != 0, value_mask=tokens != 0)
    np.testing.assert_allclose(masked.numpy(), explicit.numpy(), atol=1e-6)
    # Symbolic: the mask travels through a functional model too.
    inp = kt.layers.Input((4,), dtype="int32")
    e = emb(inp)
    model = kt.Model(inp, gqa(e, e))
    np.testing.assert_allclose(model(tokens).numpy(), masked.numpy(), atol=1e-6)


def test_gqa_errors():
    with pytest.raises(ValueError, match="divisible"):
        L.GroupQueryAttention(4, 6, 4)
    with pytest.raises(ValueError, match="sliding_window"):
        L.GroupQueryAttention(4, 4, 2, sliding_window=0)
    with pytest.raises(ValueError, match="head_dim"):
        L.GroupQueryAttention(0, 4, 2)
    with pytest.raises(ValueError, match="last dimension"):
        L.GroupQueryAttention(4, 4, 2)(x32(2, 3, 6), x32(2, 3, 5))


# ------------------------------------------------------------------------ ReversibleEmbedding
RE_KWARGS = [
    {"input_dim": 10, "output_dim": 4},
    {"input_dim": 10, "output_dim": 4, "tie_weights": False, "logit_soft_cap": 2.0},
    {"input_dim": 7, "output_dim": 3, "mask_zero": True, "reverse_dtype": "float64"},
]


@pytest.mark.parametrize("kwargs", RE_KWARGS)
def test_reversible_embedding_layer(kwargs):
    n = 1 if kwargs.get("tie_weights", True) else 2
    run_layer_test(
        L.ReversibleEmbedding,
        kwargs,
        input_data=R.integers(0, 7, (2, 5)),
        expected_output_shape=(2, 5, kwargs["output_dim"]),
        expected_num_trainable_weights=n,
        supports_masking=kwargs.get("mask_zero", False),
    )
    run_layer_test(
        L.ReversibleEmbedding,
        kwargs,
        input_data=x32(2, 5, kwargs["output_dim"]),
        call_kwargs={"reverse": True},
        expected_output_shape=(2, 5, kwargs["input_dim"]),
        expected_num_trainable_weights=n,
    )


@pytest.mark.parametrize("kwargs", RE_KWARGS)
def test_reversible_embedding_matches_keras(keras, kwargs):
    import torch

    ids = R.integers(0, 7, (2, 5))
    k_layer, o_layer = keras.layers.ReversibleEmbedding(**kwargs), L.ReversibleEmbedding(**kwargs)
    k_layer(ids)
    o_layer(ids)
    assert _paths(o_layer) == _paths(k_layer)
    _copy_weights(k_layer, o_layer)
    k_h, o_h = k_layer(ids), o_layer(ids)
    np.testing.assert_allclose(o_h.numpy(), k_h.detach().numpy(), atol=1e-6)
    if kwargs.get("mask_zero"):
        np.testing.assert_array_equal(o_h._keras_mask.numpy(), k_h._keras_mask.numpy())
    h = x32(2, 5, kwargs["output_dim"])
    k_logits = k_layer(torch.tensor(h), reverse=True)
    with kt.GradientTape() as tape:
        o_logits = o_layer(h, reverse=True)
        loss = kt.ops.sum(kt.ops.square(o_logits))
    assert o_logits.dtype == kwargs.get("reverse_dtype", "float32")
    np.testing.assert_allclose(o_logits.numpy(), k_logits.detach().numpy(), atol=1e-5)
    (k_logits**2).sum().backward()
    for g, w in zip(tape.gradient(loss, o_layer.trainable_weights), k_layer.trainable_weights):
        # Untied, the reverse pass does not use `embeddings`: no gradient in either.
        assert (g is None) == (w.value.grad is None)
        if g is not None:
            np.testing.assert_allclose(g.numpy(), w.value.grad.numpy(), atol=1e-4, rtol=1e-4)
    # keratron's Embedding configs leave out Keras's always-None `quantization_config`.
    k_config = {k: v for k, v in k_layer.get_config().items() if k != "quantization_config"}
    assert o_layer.get_config().keys() == k_config.keys()
    for key, value in k_config.items():
        if key not in ("name", "dtype"):
            assert o_layer.get_config()[key] == value, key


def test_reversible_embedding_errors():
    with pytest.raises(ValueError, match="logit_soft_cap"):
        L.ReversibleEmbedding(5, 2, logit_soft_cap=-1.0)
    layer = L.ReversibleEmbedding(5, 2)
    with pytest.raises(ValueError, match="output_dim"):
        layer(x32(2, 3), reverse=True)
