"""Ops on symbolic tensors in a functional model (`x + 3.0`, `inputs + branch`, `ops.mean`):
Keras 3 lists them in `model.operations` and `summary()`, never in `model.layers`, and writes
them in configs as op classes (`keras.src.ops.numpy.Add`). Each check is against real Keras."""

import json

import numpy as np
import pytest

import keratron as kt
from keratron.layers.layer import TensorOpLayer
from tests.conftest import require

pytestmark = pytest.mark.interop


def _hard_swish(K):
    """MobileNetV3's hard-swish block: `x * relu6(x + 3) / 6` on a conv."""
    L = K.layers
    x = K.Input((6, 6, 3), name="image")
    h = L.Conv2D(4, 3, padding="same", name="conv")(x)
    gate = L.ReLU(6.0, name="relu6")(h + 3.0) * (1.0 / 6.0)
    y = L.Multiply(name="hard_swish")([h, gate])
    return K.Model(x, L.GlobalAveragePooling2D(name="pool")(y), name="hard_swish_net")


def _residual(K):
    """ConvNeXt's block: `inputs + branch` around a depthwise conv, norm and MLP."""
    L = K.layers
    x = K.Input((5, 5, 4), name="image")
    inputs = L.Conv2D(4, 1, name="stem")(x)
    b = L.DepthwiseConv2D(3, padding="same", name="dwconv")(inputs)
    b = L.LayerNormalization(epsilon=1e-6, name="norm")(b)
    b = L.Dense(8, activation="gelu", name="pw1")(b)
    b = L.Dense(4, name="pw2")(b)
    out = inputs + b
    return K.Model(x, L.Dense(2, name="head")(out - 1.0), name="residual_net")


def _indexed(K):
    """Indexing, division and `abs` on symbolic tensors (`GetItem`, `TrueDivide`, `Absolute`)."""
    L = K.layers
    x = K.Input((3, 4), name="seq")
    h = L.Dense(4, name="proj")(x)
    first, tail = h[:, 0], h[..., 1:, :2]
    y = L.Concatenate(name="concat")([abs(first) / 2.0, L.Flatten(name="flat")(tail)])
    return K.Model(x, L.Dense(1, name="head")(y), name="indexed_net")


def _ops_calls(K):
    """`keras.ops` functions called on symbolic tensors (`ops.mean`, `ops.nn.relu`,
    `ops.image.resize`, `ops.linalg.norm`, `ops.concatenate`, `ops.top_k`, `ops.where`), with
    positional, keyword and default arguments."""
    L, ops = K.layers, K.ops
    x = K.Input((4, 3), name="seq")
    h = L.Dense(3, name="proj")(x)
    pooled = ops.mean(h, 1)
    norms = ops.linalg.norm(ops.nn.relu(h), axis=-1)
    grid = ops.image.resize(ops.expand_dims(h, -1), (6, 5))
    values, _ = ops.top_k(h, k=2)
    both = ops.concatenate([pooled, norms, ops.sum(values, axis=1)], axis=-1)
    gated = ops.where(both > 0.0, both, ops.multiply(both, 0.1))
    y = L.Concatenate(name="concat")([gated, L.Flatten(name="flat")(grid)])
    return K.Model(x, L.Dense(2, name="head")(ops.add(y, 1.0)), name="ops_net")


def _mean_head_keras(keras):
    """A conv trunk with an `ops.mean` pooling head (built in Keras; keratron reads it)."""
    L = keras.layers
    x = keras.Input((4, 4, 3), name="image")
    h = L.Conv2D(5, 3, name="conv")(x)
    h = keras.ops.mean(h, axis=(1, 2))
    return keras.Model(x, L.Dense(2, name="head")(h / 2.0), name="mean_head")


def _both(builder):
    keras = require("keras")
    keras.backend.clear_session()
    kt.backend.clear_session()
    return builder(kt), builder(keras)


def _op_list(model):
    """(name, class, is a layer) of each operation, keratron's op nodes under Keras's class."""
    layer_ids = {id(layer) for layer in model.layers}
    return [
        (op.name, getattr(op, "keras_class_name", type(op).__name__), id(op) in layer_ids)
        for op in model.operations
    ]


def _assert_same_graph(ours, theirs):
    keras = require("keras")
    assert [layer.name for layer in ours.layers] == [layer.name for layer in theirs.layers]
    assert _op_list(ours) == _op_list(theirs)
    assert [isinstance(op, keras.layers.Layer) for op in theirs.operations] == [
        not isinstance(op, TensorOpLayer) for op in ours.operations
    ]
    assert ours.count_params() == theirs.count_params()
    assert [(w.path, tuple(w.shape)) for w in ours.weights] == [
        (w.path, tuple(w.shape)) for w in theirs.weights
    ]
    a, b = [], []
    ours.summary(print_fn=a.append, line_length=80)
    theirs.summary(print_fn=b.append, line_length=80)
    assert a == b, f"\n{a[0]}\n{b[0]}"


def _json(config):
    """A config as a file holds it (lists for tuples)."""
    return json.loads(json.dumps(config))


def _copy_weights(ours, theirs):
    theirs.set_weights([np.asarray(w) for w in ours.get_weights()])


def _same_outputs(ours, theirs, shape):
    x = np.random.default_rng(0).normal(size=(2, *shape)).astype("float32")
    np.testing.assert_allclose(
        np.asarray(ours(x)), theirs(x).detach().cpu().numpy(), rtol=1e-5, atol=1e-5
    )


@pytest.mark.parametrize("builder", [_hard_swish, _residual, _indexed, _ops_calls])
def test_layers_operations_summary_and_params_match_keras(builder):
    ours, theirs = _both(builder)
    _assert_same_graph(ours, theirs)
    ops = [name for name, _, is_layer in _op_list(theirs) if not is_layer]
    assert ops and all(isinstance(op, TensorOpLayer) for op in ours.operations if op.name in ops)
    # get_layer sees layers only, by name and by index, as Keras does.
    for i in range(len(theirs.layers)):
        assert ours.get_layer(index=i).name == theirs.get_layer(index=i).name
    with pytest.raises(ValueError, match=f"No such layer: {ops[0]}"):
        theirs.get_layer(ops[0])
    with pytest.raises(ValueError, match=f"No such layer: {ops[0]}"):
        ours.get_layer(ops[0])
    with pytest.raises(ValueError):
        ours.get_layer(index=len(theirs.layers))


@pytest.mark.parametrize("builder", [_hard_swish, _residual, _indexed, _ops_calls])
def test_config_matches_keras_and_round_trips(builder):
    keras = require("keras")
    ours, theirs = _both(builder)
    ours_config, theirs_config = _json(ours.get_config()), _json(theirs.get_config())
    # Op entries exactly as Keras writes them; every entry's class, module and inbound nodes.
    for mine, ref in zip(ours_config["layers"], theirs_config["layers"], strict=True):
        if ref["module"].startswith("keras.src.ops."):
            assert mine == ref
        else:
            keys = ("name", "class_name", "module", "inbound_nodes")
            assert {k: mine[k] for k in keys} == {k: ref[k] for k in keys}
    assert ours_config["input_layers"] == theirs_config["input_layers"]
    assert ours_config["output_layers"] == theirs_config["output_layers"]

    shape = theirs.input_shape[1:]
    rebuilt = kt.Model.from_config(ours_config)
    _assert_same_graph(rebuilt, theirs)
    assert _json(rebuilt.get_config()) == ours_config
    _copy_weights(ours, theirs)
    rebuilt.set_weights(ours.get_weights())
    _same_outputs(rebuilt, theirs, shape)
    # Keras reads keratron's config, and keratron reads Keras's.
    keras_from_ours = keras.Model.from_config(ours_config)
    _assert_same_graph(ours, keras_from_ours)
    ours_from_keras = kt.Model.from_config(theirs_config)
    _assert_same_graph(ours_from_keras, theirs)
    ours_from_keras.set_weights(ours.get_weights())
    _same_outputs(ours_from_keras, theirs, shape)


def test_keras_ops_mean_head_loads_as_an_operation(tmp_path):
    keras = require("keras")
    keras.backend.clear_session()
    theirs = _mean_head_keras(keras)
    config = _json(theirs.get_config())
    assert [e["class_name"] for e in config["layers"]] == [
        "InputLayer",
        "Conv2D",
        "Mean",
        "TrueDivide",
        "Dense",
    ]
    ours = kt.Model.from_config(config)
    _assert_same_graph(ours, theirs)
    mean = ours.operations[2]
    assert isinstance(mean, TensorOpLayer) and mean not in ours.layers
    assert _json(ours.get_config())["layers"][2] == config["layers"][2]
    ours.set_weights(theirs.get_weights())
    _same_outputs(ours, theirs, (4, 4, 3))
    # The whole .keras archive, then the weights by order through both .h5 layouts.
    theirs.save(tmp_path / "mean_head.keras")
    loaded = kt.models.load_model(tmp_path / "mean_head.keras")
    _assert_same_graph(loaded, theirs)
    _same_outputs(loaded, theirs, (4, 4, 3))


@pytest.mark.parametrize("filename", ["w.weights.h5", "w.h5"])
@pytest.mark.parametrize("builder", [_hard_swish, _residual])
def test_weight_files_load_by_order_in_keras(tmp_path, builder, filename):
    ours, theirs = _both(builder)
    ours.save_weights(tmp_path / filename)
    theirs.load_weights(tmp_path / filename)
    _same_outputs(ours, theirs, theirs.input_shape[1:])
    # And back: a file Keras writes (Keras 3 writes the legacy layout as a whole model) loads
    # into keratron's model.
    save = theirs.save_weights if filename.endswith(".weights.h5") else theirs.save
    save(tmp_path / ("k_" + filename))
    again = builder(kt)
    again.load_weights(tmp_path / ("k_" + filename))
    _same_outputs(again, theirs, theirs.input_shape[1:])


def test_keras_model_file_of_ops_round_trips(tmp_path):
    ours, theirs = _both(_residual)
    ours.save(tmp_path / "residual.keras")
    from_ours = require("keras").models.load_model(tmp_path / "residual.keras")
    _assert_same_graph(ours, from_ours)
    _same_outputs(ours, from_ours, (5, 5, 4))
    loaded = kt.models.load_model(tmp_path / "residual.keras")
    _assert_same_graph(loaded, theirs)
    _same_outputs(loaded, from_ours, (5, 5, 4))
