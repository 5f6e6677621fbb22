"""keras.utils's small helpers (Config, get_source_inputs, pack / unpack, standardize_dtype)
and keras.backend.result_type, each against real Keras."""

import itertools
import json

import numpy as np
import pytest

import keratron
from tests.conftest import require


def test_config_matches_keras():
    keras = require("keras")
    for module in (keratron, keras):
        config = module.utils.Config(learning_rate=0.1, momentum=0.9)
        config.use_ema = True
        config["seed"] = 123
        assert (config.seed, config["learning_rate"], len(config)) == (123, 0.1, 4)
        assert list(config) == ["learning_rate", "momentum", "seed", "use_ema"]
        assert json.loads(config.to_json()) == config.as_dict()
        assert "seed" in config and config.get("missing", 7) == 7
        with pytest.raises(AttributeError) as err:
            config.learning_rat  # noqa: B018
        if module is keratron:
            message = str(err.value)
        else:
            assert str(err.value) == message
        config.freeze()
        assert config.frozen
        for mutate in (
            lambda c: setattr(c, "x", 1),
            lambda c: c.__setitem__("x", 1),
            lambda c: c.pop("seed"),
            lambda c: c.update(x=1),
        ):
            with pytest.raises(ValueError, match="frozen"):
                mutate(config)
        config.unfreeze()
        del config["seed"]
        assert repr(config) == "<Config {'learning_rate': 0.1, 'momentum': 0.9, 'use_ema': True}>"
    assert message == "Unknown attribute: 'learning_rat'. Did you mean 'learning_rate'?"


def _source_positions(module):
    a, b, c = (module.Input((2,), name=n) for n in "abc")
    d = module.layers.Dense(2)
    h = module.layers.Add()([d(b), a])
    y = module.layers.Concatenate()([h, d(a), c])
    inputs = [a, b, c]

    def positions(t):
        sources = module.utils.get_source_inputs(t)
        return [next(i for i, s in enumerate(inputs) if s is x) for x in sources]

    return [positions(t) for t in (a, h, y)], module.utils.get_source_inputs("not a tensor")


def test_get_source_inputs_matches_keras():
    keras = require("keras")
    ours = _source_positions(keratron)
    assert ours == _source_positions(keras)
    assert ours[0] == [[0], [1, 0], [1, 0, 2]]
    assert keratron.utils.is_keras_tensor(keratron.Input((2,)))
    assert not keratron.utils.is_keras_tensor(np.ones(2))


@pytest.mark.parametrize("data", [1, (1,), (1, 2), [1, 2, 3], ((1, 2), 3), {"a": 1}, [np.ones(2)]])
def test_pack_unpack_match_keras(data):
    keras = require("keras")
    assert keratron.utils.unpack_x_y_sample_weight(data) == keras.utils.unpack_x_y_sample_weight(
        data
    )
    for args in ((data,), (data, 2), (data, 2, 3), (data, None, 3)):
        ours = keratron.utils.pack_x_y_sample_weight(*args)
        assert repr(ours) == repr(keras.utils.pack_x_y_sample_weight(*args))
    with pytest.raises(ValueError, match=r"unpack_x_y_sample_weight.*\(x, y, sample_weight\)"):
        keratron.utils.unpack_x_y_sample_weight((1, 2, 3, 4))


def test_standardize_dtype_matches_keras():
    keras = require("keras")
    for dtype in ("float32", "int8", np.float16, np.dtype("uint8"), "bool", float, bool, None):
        assert keratron.utils.standardize_dtype(dtype) == keras.utils.standardize_dtype(dtype)


DTYPES = [
    "bool",
    "uint8",
    "uint16",
    "uint32",
    "int8",
    "int16",
    "int32",
    "int64",
    "bfloat16",
    "float16",
    "float32",
    "float64",
    "complex64",
    int,
    float,
    bool,
    None,
]


def test_result_type_matches_keras():
    keras = require("keras")
    cases = [()] + [(d,) for d in DTYPES] + list(itertools.combinations_with_replacement(DTYPES, 2))
    cases += [("int8", "uint8", float), (int, float, "int16"), ("uint32", "int8", "float16")]
    for case in cases:
        try:
            expected = keras.backend.result_type(*case)
        except ValueError:
            with pytest.raises(ValueError, match="result_type"):
                keratron.backend.result_type(*case)
            continue
        assert keratron.backend.result_type(*case) == expected, case
    with pytest.raises(ValueError, match="float8"):
        keratron.backend.result_type("float8_e4m3fn", "float32")
