"""Attention layers: through `run_layer_test`, compared with real Keras (self- and
cross-attention, masks, causal masks, returned scores, attention axes), and their errors."""

import numpy as np
import pytest

import keratron as kt
from keratron.layers import attention
from tests.conftest import require
from tests.layers.layer_test import assert_matches_keras, run_layer_test

L = kt.layers
R = np.random.default_rng(9)


def x32(*shape):
    return R.standard_normal(shape).astype("float32")


@pytest.fixture(scope="module")
def keras():
    return require("keras")


def key_mask(batch, steps):
    m = np.ones((batch, steps), bool)
    m[0, -2:] = False
    m[-1, 0] = False
    return m


# ---------------------------------------------------------------------------------- Attention
@pytest.mark.parametrize(
    "kwargs, weights",
    [
        ({}, []),
        ({"use_scale": True}, [()]),
        ({"score_mode": "concat"}, [()]),
        ({"score_mode": "concat", "use_scale": True}, [(), ()]),
    ],
)
def test_attention_layer_test(kwargs, weights):
    run_layer_test(
        L.Attention,
        kwargs,
        input_shape=[(2, 3, 4), (2, 5, 4)],
        expected_output_shape=(2, 3, 4),
        expected_weight_shapes=weights,
        run_training_check=bool(weights),
    )


def test_additive_attention_layer_test():
    run_layer_test(
        L.AdditiveAttention,
        {},
        input_shape=[(2, 3, 4), (2, 5, 4), (2, 5, 4)],
        expected_output_shape=(2, 3, 4),
        expected_weight_shapes=[(4,)],
    )


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"use_scale": True},
        {"score_mode": "concat"},
        {"score_mode": "concat", "use_scale": True},
    ],
)
@pytest.mark.parametrize(
    "call_kwargs",
    [
        {},
        {"use_causal_mask": True},
        {"return_attention_scores": True},
        {"mask": "masks", "return_attention_scores": True},
        {"mask": "masks", "use_causal_mask": True},
    ],
)
def test_attention_matches_keras(keras, kwargs, call_kwargs):
    q, v, k = x32(3, 4, 5), x32(3, 4, 5), x32(3, 4, 5)
    for inputs in ([q, v, k], [q, v[:, :3]]):
        kw = dict(call_kwargs)
        if kw.get("mask") == "masks":
            kw["mask"] = [key_mask(3, 4)[::-1].copy(), key_mask(3, inputs[1].shape[1])]
        assert_matches_keras("Attention", kwargs, inputs, call_kwargs=kw)


@pytest.mark.parametrize("use_scale", [True, False])
def test_additive_attention_matches_keras(keras, use_scale):
    q, v = x32(2, 3, 4), x32(2, 5, 4)
    mask = [np.array([[1, 1, 0], [1, 1, 1]], bool), key_mask(2, 5)]
    assert_matches_keras(
        "AdditiveAttention",
        {"use_scale": use_scale},
        [q, v],
        call_kwargs={"mask": mask, "return_attention_scores": True},
    )


def test_attention_masks_and_dropout():
    q, v = x32(2, 3, 4), x32(2, 5, 4)
    q_mask = np.array([[1, 1, 0], [1, 1, 1]], bool)
    layer = L.Attention()
    out, scores = layer([q, v], mask=[q_mask, key_mask(2, 5)], return_attention_scores=True)
    np.testing.assert_array_equal(out.numpy()[0, 2], 0)  # masked query step
    np.testing.assert_allclose(scores.numpy()[0, :, -2:], 0, atol=1e-6)  # masked keys
    np.testing.assert_allclose(scores.numpy().sum(-1), 1, atol=1e-5)
    np.testing.assert_array_equal(out._keras_mask.numpy(), q_mask)
    dropped = L.Attention(dropout=0.5, seed=3)
    a = dropped([q, v], training=True).numpy()
    np.testing.assert_allclose(dropped([q, v]).numpy(), layer([q, v]).numpy(), atol=1e-6)
    assert not np.allclose(a, layer([q, v]).numpy())


def test_attention_errors():
    with pytest.raises(ValueError, match="score_mode"):
        L.Attention(score_mode="add")
    with pytest.raises(ValueError, match="`dropout`"):
        L.Attention(dropout=2.0)
    with pytest.raises(ValueError, match=r"list \[query, value\]"):
        L.Attention()(x32(2, 3, 4))
    with pytest.raises(ValueError, match="`mask` must be a list"):
        L.Attention()([x32(2, 3, 4), x32(2, 3, 4)], mask=np.ones((2, 3), bool))


def test_attention_config_keys_match_keras(keras):
    for name in ("Attention", "AdditiveAttention"):
        ours = getattr(L, name)(dropout=0.1).get_config()
        theirs = getattr(keras.layers, name)(dropout=0.1).get_config()
        assert set(ours) == set(theirs)


# ------------------------------------------------------------------------- MultiHeadAttention
class MHAOnList(L.MultiHeadAttention):
    """MultiHeadAttention called on one [query, value] list, the input form
    `run_layer_test` passes (it calls a layer on a single argument)."""

    def build(self, input_shape):
        super().build(*input_shape)

    def call(self, inputs, training=None):
        return super().call(inputs[0], inputs[1], training=training)


@pytest.mark.parametrize(
    "kwargs, q_shape, v_shape, out_shape, weight_shapes",
    [
        (
            {"num_heads": 2, "key_dim": 3},
            (2, 4, 6),
            None,
            (2, 4, 6),
            [(6, 2, 3), (2, 3)] * 3 + [(2, 3, 6), (6,)],
        ),
        (
            {"num_heads": 3, "key_dim": 2, "value_dim": 4, "use_bias": False},
            (2, 4, 6),
            (2, 5, 7),
            (2, 4, 6),
            [(6, 3, 2), (7, 3, 2), (7, 3, 4), (3, 4, 6)],
        ),
        (
            {"num_heads": 2, "key_dim": 3, "output_shape": (5,)},
            (2, 4, 6),
            None,
            (2, 4, 5),
            [(6, 2, 3), (2, 3)] * 3 + [(2, 3, 5), (5,)],
        ),
        (
            {"num_heads": 2, "key_dim": 2, "attention_axes": (1, 2)},
            (2, 3, 4, 5),
            None,
            (2, 3, 4, 5),
            [(5, 2, 2), (2, 2)] * 3 + [(2, 2, 5), (5,)],
        ),
        (
            {"num_heads": 2, "key_dim": 3, "use_gate": True},
            (2, 4, 6),
            None,
            (2, 4, 6),
            [(6, 2, 3), (2, 3)] * 4 + [(2, 3, 6), (6,)],
        ),
    ],
)
def test_mha_layer_test(kwargs, q_shape, v_shape, out_shape, weight_shapes):
    query = x32(*q_shape)
    inputs = [query, query if v_shape is None else x32(*v_shape)]
    layer = run_layer_test(
        MHAOnList,
        kwargs,
        input_data=inputs,
        expected_output_shape=out_shape,
        expected_weight_shapes=weight_shapes,
        supports_masking=True,
    )
    names = [w.path for w in layer.weights]
    expected = ["query", "key", "value", "attention_output"]
    if kwargs.get("use_gate"):
        expected.insert(2, "gate")
    # Keras's paths: "<the attention layer>/<sub-layer>/<weight>".
    assert {n.split("/")[0] for n in names} == {layer.name}
    assert [n.split("/")[1] for n in names[:: 1 if not kwargs.get("use_bias", True) else 2]] == (
        expected
    )


MHA_CASES = [
    # (init kwargs, query shape, value shape or None for self-attention, call kwargs)
    ({"num_heads": 2, "key_dim": 3}, (2, 4, 6), None, {}),
    ({"num_heads": 2, "key_dim": 3}, (2, 4, 6), None, {"use_causal_mask": True}),
    ({"num_heads": 2, "key_dim": 3}, (2, 4, 6), None, {"return_attention_scores": True}),
    (
        {"num_heads": 3, "key_dim": 2, "value_dim": 4},
        (2, 4, 6),
        (2, 5, 3),
        {"return_attention_scores": True},
    ),
    ({"num_heads": 2, "key_dim": 3, "use_bias": False}, (2, 4, 6), (2, 5, 6), {}),
    ({"num_heads": 2, "key_dim": 3, "output_shape": (2, 5)}, (2, 4, 6), (2, 5, 3), {}),
    (
        {"num_heads": 2, "key_dim": 3},
        (2, 5, 6),
        (2, 5, 3),
        {"use_causal_mask": True, "attention_mask": "mask"},
    ),
    (
        {"num_heads": 2, "key_dim": 3},
        (2, 4, 6),
        (2, 5, 3),
        {"attention_mask": "mask", "return_attention_scores": True},
    ),
    ({"num_heads": 2, "key_dim": 2, "attention_axes": (1, 2)}, (2, 3, 4, 5), None, {}),
    (
        {"num_heads": 2, "key_dim": 2, "attention_axes": 2},
        (2, 3, 4, 5),
        (2, 3, 2, 5),
        {"return_attention_scores": True},
    ),
    ({"num_heads": 2, "key_dim": 3, "use_gate": True}, (2, 4, 6), None, {"use_causal_mask": True}),
    ({"num_heads": 2, "key_dim": 3, "sliding_window": 2}, (2, 5, 6), None, {}),
]


@pytest.mark.parametrize("kwargs, q_shape, v_shape, call_kwargs", MHA_CASES)
def test_mha_matches_keras(keras, kwargs, q_shape, v_shape, call_kwargs):
    query = x32(*q_shape)
    value = query if v_shape is None else x32(*v_shape)
    call_kwargs = {"value": value, **call_kwargs}
    if call_kwargs.get("attention_mask") == "mask":
        mask = R.random((q_shape[0], q_shape[1], value.shape[1])) > 0.3
        mask[..., 0] = True  # no fully masked row
        call_kwargs["attention_mask"] = mask
    assert_matches_keras("MultiHeadAttention", kwargs, query, call_kwargs=call_kwargs)


def test_mha_cross_attention_with_key_matches_keras(keras):
    q, v, k = x32(2, 4, 6), x32(2, 5, 3), x32(2, 5, 7)
    assert_matches_keras(
        "MultiHeadAttention",
        {"num_heads": 2, "key_dim": 3},
        q,
        call_kwargs={"value": v, "key": k, "use_causal_mask": True},
    )


def test_mha_embedding_masks_match_keras(keras):
    """Query and value masks carried by the inputs (Embedding(mask_zero=True)) apply."""
    q_ids = np.array([[1, 2, 3, 0], [4, 1, 0, 0]], "int32")
    v_ids = np.array([[2, 0, 0, 0, 0], [1, 2, 3, 4, 5]], "int32")
    emb, k_emb = L.Embedding(6, 6, mask_zero=True), keras.layers.Embedding(6, 6, mask_zero=True)
    mha, k_mha = L.MultiHeadAttention(2, 3), keras.layers.MultiHeadAttention(2, 3)
    k_mha(k_emb(q_ids), k_emb(v_ids))
    mha(emb(q_ids), emb(v_ids))
    k_emb.set_weights(emb.get_weights())
    weights = [w + 0.2 for w in k_mha.get_weights()]
    k_mha.set_weights(weights)
    mha.set_weights(weights)
    out = mha(emb(q_ids), emb(v_ids))
    k_out = k_mha(k_emb(q_ids), k_emb(v_ids))
    k_np = keras.ops.convert_to_numpy(k_out)
    np.testing.assert_allclose(out.numpy(), k_np, atol=1e-5 * max(1, np.abs(k_np).max()))
    np.testing.assert_array_equal(out._keras_mask.numpy(), q_ids != 0)
    # Keras's two attention paths differ on fully masked (padded) query rows: uniform
    # weights in its fused path above, zero weights when the scores are returned.
    out, scores = mha(emb(q_ids), emb(v_ids), return_attention_scores=True)
    k_out, k_scores = k_mha(k_emb(q_ids), k_emb(v_ids), return_attention_scores=True)
    np.testing.assert_allclose(scores.numpy(), keras.ops.convert_to_numpy(k_scores), atol=1e-6)
    np.testing.assert_array_equal(scores.numpy()[0, :, 3], 0)
    k_np = keras.ops.convert_to_numpy(k_out)
    np.testing.assert_allclose(out.numpy(), k_np, atol=1e-5 * max(1, np.abs(k_np).max()))
    unmasked = mha(kt.ops.convert_to_tensor(emb(q_ids).numpy()), emb(v_ids).numpy())
    assert not np.allclose(unmasked.numpy(), out.numpy())


def test_mha_causal_scores_and_dropout():
    x = x32(2, 5, 6)
    mha = L.MultiHeadAttention(num_heads=2, key_dim=3)
    out, scores = mha(x, x, use_causal_mask=True, return_attention_scores=True)
    s = scores.numpy()
    assert s.shape == (2, 2, 5, 5)
    np.testing.assert_array_equal(s[..., np.triu_indices(5, 1)[0], np.triu_indices(5, 1)[1]], 0)
    np.testing.assert_allclose(s.sum(-1), 1, atol=1e-5)
    # A causal output at step t does not depend on later steps.
    x2 = x.copy()
    x2[:, 3:] += 1.0
    np.testing.assert_allclose(
        mha(x2, x2, use_causal_mask=True).numpy()[:, :3], out.numpy()[:, :3], atol=1e-5
    )
    drop = L.MultiHeadAttention(2, 3, dropout=0.5, seed=1)
    a = drop(x, x, training=True).numpy()
    b = drop(x, x, training=True).numpy()
    assert not np.allclose(a, b)
    np.testing.assert_array_equal(drop(x, x).numpy(), drop(x, x, training=False).numpy())


def test_mha_functional_and_symbolic_scores():
    q = L.Input((4, 6))
    v = L.Input((7, 3))
    out, scores = L.MultiHeadAttention(2, 5)(q, v, return_attention_scores=True)
    assert tuple(out.shape) == (None, 4, 6)
    assert tuple(scores.shape) == (None, 2, 4, 7)
    model = kt.Model([q, v], out)
    y = model([x32(3, 4, 6), x32(3, 7, 3)])
    assert tuple(y.shape) == (3, 4, 6)


def test_mha_regularizers_and_config_keys(keras):
    mha = L.MultiHeadAttention(2, 3, kernel_regularizer="l2", activity_regularizer="l1")
    x = x32(2, 4, 6)
    mha(x, x)
    # One kernel penalty per projection, one activity penalty per projection call.
    assert len(mha.losses) == 8
    ours = set(L.MultiHeadAttention(2, 3).get_config())
    theirs = set(keras.layers.MultiHeadAttention(2, 3).get_config())
    assert ours == theirs


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"num_heads": 0, "key_dim": 2}, r"`num_heads`.*num_heads=0"),
        ({"num_heads": 2, "key_dim": -1}, r"`key_dim`.*key_dim=-1"),
        ({"num_heads": 2, "key_dim": 2, "value_dim": 0}, r"`value_dim`"),
        ({"num_heads": 2, "key_dim": 2, "dropout": 1.5}, r"`dropout`"),
        ({"num_heads": 2, "key_dim": 2, "output_shape": "wide"}, r"`output_shape`"),
        ({"num_heads": 2, "key_dim": 2, "attention_axes": "last"}, r"`attention_axes`"),
        ({"num_heads": 2, "key_dim": 2, "sliding_window": 0}, r"`sliding_window`"),
        ({"num_heads": 2, "key_dim": 2, "dropout": 0.1, "flash_attention": True}, "flash"),
    ],
)
def test_mha_argument_errors(kwargs, match):
    with pytest.raises(ValueError, match=rf"MultiHeadAttention.*{match}"):
        L.MultiHeadAttention(**kwargs)


def test_mha_call_errors():
    mha = L.MultiHeadAttention(2, 3)
    with pytest.raises(ValueError, match="`value` and `key`"):
        mha(x32(2, 4, 6), x32(2, 5, 6), key=x32(2, 6, 6))
    with pytest.raises(ValueError, match="attention_axes"):
        L.MultiHeadAttention(2, 3, attention_axes=(2,))(x32(2, 4, 6), x32(2, 4, 6))
    flash = L.MultiHeadAttention(2, 3, flash_attention=True)
    with pytest.raises(ValueError, match="flash_attention"):
        flash(x32(2, 4, 6), x32(2, 4, 6), return_attention_scores=True)


def test_equation_builders():
    assert attention._projection_equation(2, 1, 2) == ("abc,cde->abde", "de", 4)
    assert attention._projection_equation(2, 2, 1)[0] == "abcd,cde->abe"
    dot, combine, rank = attention._attention_equations(4, (1,))
    assert (dot, combine, rank) == ("aecd,abcd->acbe", "acbe,aecd->abcd", 4)
    dot, combine, rank = attention._attention_equations(5, (1, 2))
    assert rank == 6 and dot == "afgde,abcde->adbcfg"
