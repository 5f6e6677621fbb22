"""keratron.quantizers' configs and get / serialize / deserialize against Keras 3's dicts."""

import json

import numpy as np
import pytest

import keratron as kt
from keratron import quantizers as q
from keratron.quantizers.quantization_config import validate_and_resolve_config
from tests.conftest import require

pytestmark = pytest.mark.interop


def _keras():
    require("keras")
    import keras

    return keras


def _both(build):
    """The object `build(namespace)` makes with keratron's and with Keras's quantizers."""
    return build(q), build(_keras().quantizers)


CONFIGS = {
    "abs_max": lambda ns: ns.AbsMaxQuantizer(),
    "abs_max_axis": lambda ns: ns.AbsMaxQuantizer(axis=(0, 1), value_range=(-8, 7), epsilon=1e-3),
    "int8": lambda ns: ns.Int8QuantizationConfig(),
    "int8_custom": lambda ns: ns.Int8QuantizationConfig(
        weight_quantizer=ns.AbsMaxQuantizer(axis=0), activation_quantizer=None
    ),
    "int4": lambda ns: ns.Int4QuantizationConfig(),
    "int4_per_channel": lambda ns: ns.Int4QuantizationConfig(
        weight_quantizer=ns.AbsMaxQuantizer(value_range=(-8, 7)), block_size=None
    ),
    "int4_act": lambda ns: ns.Int4QuantizationConfig(
        activation_quantizer=ns.AbsMaxQuantizer(), block_size=-1
    ),
    "float8": lambda ns: ns.Float8QuantizationConfig(),
    "gptq": lambda ns: ns.GPTQConfig(dataset=["a b"], tokenizer=str.split),
    "gptq_args": lambda ns: ns.GPTQConfig(
        None,
        None,
        weight_bits=3,
        num_samples=8,
        per_channel=False,
        sequence_length=16,
        hessian_damping=0.5,
        group_size=-1,
        symmetric=True,
        activation_order=True,
    ),
    "awq": lambda ns: ns.AWQConfig(dataset=None, tokenizer=None),
    "awq_args": lambda ns: ns.AWQConfig(
        None, None, num_samples=4, sequence_length=8, group_size=32, num_grid_points=5
    ),
}


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_serialized_dict_is_keras(name):
    ours, theirs = _both(CONFIGS[name])
    keras = _keras()
    assert q.serialize(ours) == keras.quantizers.serialize(theirs)
    assert ours.get_config() == theirs.get_config()
    if hasattr(theirs, "mode"):
        assert ours.mode == theirs.mode


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_keras_dict_deserializes_and_round_trips(name):
    keras = _keras()
    theirs = CONFIGS[name](keras.quantizers)
    config = keras.quantizers.serialize(theirs)
    ours = q.deserialize(config)
    assert type(ours).__name__ == type(theirs).__name__
    assert q.serialize(ours) == config
    assert type(ours).from_config(ours.get_config()).get_config() == theirs.get_config()
    # And back: Keras reads what keratron writes (with its generic deserializer: Keras's
    # `quantizers.deserialize` returns the string "GPTQConfig" for a GPTQConfig dict, which is
    # not among its quantizer objects; keratron's returns the config).
    back = keras.saving.deserialize_keras_object(q.serialize(ours))
    assert back.get_config() == theirs.get_config()


@pytest.mark.parametrize("name", ["int8", "int4_per_channel", "gptq", "awq"])
def test_json_round_trip(name):
    ours = CONFIGS[name](q)
    loaded = q.deserialize(json.loads(json.dumps(q.serialize(ours))))
    assert type(loaded) is type(ours)
    assert json.dumps(loaded.get_config()) == json.dumps(ours.get_config())


def test_int4_config_without_block_size_is_per_channel_like_keras():
    keras = _keras()
    config = {"weight_quantizer": None, "activation_quantizer": None}
    ours = q.Int4QuantizationConfig.from_config(config)
    theirs = keras.quantizers.Int4QuantizationConfig.from_config(config)
    assert ours.block_size is None and theirs.block_size is None


INVALID = [
    lambda ns: ns.Int8QuantizationConfig(weight_quantizer=ns.AbsMaxQuantizer(output_dtype="int16")),
    lambda ns: ns.Int4QuantizationConfig(block_size=0),
    lambda ns: ns.Int4QuantizationConfig(block_size=-2),
    lambda ns: ns.Int4QuantizationConfig(weight_quantizer=ns.AbsMaxQuantizer(value_range=(-8, 7))),
    lambda ns: ns.Int4QuantizationConfig(weight_quantizer=ns.AbsMaxQuantizer(), block_size=None),
    lambda ns: ns.Int4QuantizationConfig(
        weight_quantizer=ns.AbsMaxQuantizer(value_range=(-8, 7), output_dtype="int16"),
        block_size=None,
    ),
    lambda ns: ns.GPTQConfig(None, None, weight_bits=5),
    lambda ns: ns.GPTQConfig(None, None, num_samples=0),
    lambda ns: ns.GPTQConfig(None, None, sequence_length=-1),
    lambda ns: ns.GPTQConfig(None, None, hessian_damping=1.5),
    lambda ns: ns.GPTQConfig(None, None, group_size=0),
    lambda ns: ns.AWQConfig(None, None, weight_bits=8),
    lambda ns: ns.AWQConfig(None, None, group_size=-3),
    lambda ns: ns.AWQConfig(None, None, num_grid_points=0),
]


@pytest.mark.parametrize("index", range(len(INVALID)))
def test_invalid_arguments_raise_as_in_keras(index):
    keras = _keras()
    with pytest.raises(ValueError):
        INVALID[index](keras.quantizers)
    with pytest.raises(ValueError):
        INVALID[index](q)


def test_base_config_has_no_mode():
    with pytest.raises(NotImplementedError, match="subclasses"):
        _ = q.QuantizationConfig().mode
    with pytest.raises(NotImplementedError, match="get_config"):
        q.Quantizer().get_config()


def test_quantizer_or_default_helpers_match_keras():
    keras = _keras()
    for ns in (q, keras.quantizers):
        custom = ns.AbsMaxQuantizer(axis=0)
        config = ns.Int8QuantizationConfig(weight_quantizer=custom, activation_quantizer=None)
        assert ns.QuantizationConfig.weight_quantizer_or_default(config, "d") is custom
        assert ns.QuantizationConfig.weight_quantizer_or_default(None, "d") == "d"
        assert ns.QuantizationConfig.activation_quantizer_or_default(config, "d") is None
        assert ns.QuantizationConfig.activation_quantizer_or_default(None, "d") == "d"


RESOLVE = [
    ("int8", None),
    ("int4", None),
    ("float8", None),
    (None, "int8"),
    (None, "int4"),
    ("int8", "int8"),
]


@pytest.mark.parametrize("mode,config", RESOLVE)
def test_validate_and_resolve_config_matches_keras(mode, config):
    _keras()
    from keras.src.quantizers.quantization_config import (
        validate_and_resolve_config as keras_resolve,
    )

    ours, theirs = validate_and_resolve_config(mode, config), keras_resolve(mode, config)
    assert type(ours).__name__ == type(theirs).__name__
    assert ours.get_config() == theirs.get_config()


@pytest.mark.parametrize(
    "mode,make",
    [
        ("gptq", None),
        ("awq", None),
        (None, None),
        ("int3", None),
        ("int8", lambda ns: ns.Int4QuantizationConfig()),
        (None, lambda ns: {"mode": "int8"}),
    ],
)
def test_validate_and_resolve_config_errors_match_keras(mode, make):
    keras = _keras()
    from keras.src.quantizers.quantization_config import (
        validate_and_resolve_config as keras_resolve,
    )

    with pytest.raises(ValueError):
        keras_resolve(mode, make and make(keras.quantizers))
    with pytest.raises(ValueError):
        validate_and_resolve_config(mode, make and make(q))


def test_gptq_and_awq_configs_resolve_to_themselves():
    for config in (q.GPTQConfig(None, None), q.AWQConfig(None, None)):
        assert validate_and_resolve_config(config.mode, config) is config
        assert validate_and_resolve_config(None, config) is config


# ------------------------------------------------------------------------------------------ get
@pytest.mark.parametrize(
    "identifier", ["AbsMaxQuantizer", "abs_max_quantizer", "Quantizer", "quantizer"]
)
def test_get_by_name_matches_keras(identifier):
    keras = _keras()
    ours, theirs = q.get(identifier), keras.quantizers.get(identifier)
    assert type(ours).__name__ == type(theirs).__name__
    assert ours.output_dtype == "int8"


def test_get_by_name_takes_keyword_arguments():
    quantizer = q.get("AbsMaxQuantizer", axis=0, value_range=(-8, 7))
    assert quantizer.axis == (0,) and quantizer.value_range == (-8, 7)


def test_get_dict_instance_and_none_match_keras():
    keras = _keras()
    config = keras.quantizers.serialize(keras.quantizers.AbsMaxQuantizer(axis=1))
    assert q.get(config).get_config() == keras.quantizers.get(config).get_config()
    instance = q.AbsMaxQuantizer()
    assert q.get(instance) is instance
    assert q.get(None) is None and keras.quantizers.get(None) is None


@pytest.mark.parametrize(
    "identifier",
    ["foo", "GPTQConfig", lambda ns: ns.serialize(ns.Int8QuantizationConfig()), 3],
)
def test_get_rejects_what_keras_rejects(identifier):
    keras = _keras()
    for ns in (keras.quantizers, q):
        ident = identifier(ns) if callable(identifier) else identifier
        with pytest.raises(ValueError, match="Could not interpret quantizer identifier"):
            ns.get(ident)


def test_custom_quantizer_round_trips_through_the_registry():
    @kt.saving.register_keras_serializable(package="QuantTests")
    class HalfQuantizer(q.Quantizer):
        def __init__(self, factor=0.5, output_dtype="int8"):
            super().__init__(output_dtype)
            self.factor = factor

        def __call__(self, x):
            return kt.ops.multiply(x, self.factor)

        def get_config(self):
            return {"factor": self.factor, "output_dtype": self.output_dtype}

    config = q.Int8QuantizationConfig(weight_quantizer=HalfQuantizer(0.25))
    serialized = q.serialize(config)
    weight = serialized["config"]["weight_quantizer"]
    assert weight["registered_name"] == "QuantTests>HalfQuantizer"
    assert weight["class_name"] == "HalfQuantizer"
    restored = q.deserialize(json.loads(json.dumps(serialized)))
    assert isinstance(restored.weight_quantizer, HalfQuantizer)
    assert restored.weight_quantizer.factor == 0.25
    np.testing.assert_allclose(restored.weight_quantizer(np.ones(2, "float32")).numpy(), 0.25)


def test_deserialize_errors_name_the_problem():
    with pytest.raises(ValueError, match="unknown quantizer class 'Nope'"):
        q.deserialize({"class_name": "Nope", "config": {}})
    with pytest.raises(ValueError, match="class_name"):
        q.deserialize("AbsMaxQuantizer")
    with pytest.raises(TypeError, match="get_config"):
        q.serialize(object())
