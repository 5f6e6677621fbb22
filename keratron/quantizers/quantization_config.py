"""Quantization configs, as `keras.quantizers` has them: which quantizers `quantize(mode)`
uses for weights and activations, and the calibration settings of GPTQ and AWQ.

The configs are plain objects with Keras's arguments, validation and `get_config` dicts, so a
config written by Keras reads back here and the other way round.
"""

from __future__ import annotations

__all__ = [
    "QUANTIZATION_MODES",
    "QuantizationConfig",
    "Int8QuantizationConfig",
    "Int4QuantizationConfig",
    "Float8QuantizationConfig",
    "GPTQConfig",
    "AWQConfig",
    "validate_and_resolve_config",
]

QUANTIZATION_MODES = ("int8", "float8", "int4", "gptq", "awq")


def _serialize(obj):
    from keratron.quantizers.serialization import serialize

    return serialize(obj)


def _deserialize(config):
    from keratron.quantizers.serialization import deserialize

    return deserialize(config)


class QuantizationConfig:
    """Base class of quantization configs; subclasses define `mode`.

    Args:
        weight_quantizer: quantizer of the weights (None: the mode's default).
        activation_quantizer: quantizer of the activations (None: none).
    """

    def __init__(self, weight_quantizer=None, activation_quantizer=None):
        self.weight_quantizer = weight_quantizer
        self.activation_quantizer = activation_quantizer

    @property
    def mode(self):
        raise NotImplementedError(
            "QuantizationConfig is a base class: its subclasses define `mode`. Use "
            "Int8QuantizationConfig, Int4QuantizationConfig, Float8QuantizationConfig, "
            "GPTQConfig or AWQConfig."
        )

    def get_config(self):
        return {
            "weight_quantizer": _serialize(self.weight_quantizer),
            "activation_quantizer": _serialize(self.activation_quantizer),
        }

    @classmethod
    def from_config(cls, config):
        return cls(
            weight_quantizer=_deserialize(config.get("weight_quantizer")),
            activation_quantizer=_deserialize(config.get("activation_quantizer")),
        )

    @staticmethod
    def weight_quantizer_or_default(config, default):
        """`config`'s weight quantizer, or `default` when there is none."""
        if config is not None and config.weight_quantizer is not None:
            return config.weight_quantizer
        return default

    @staticmethod
    def activation_quantizer_or_default(config, default):
        """`config`'s activation quantizer (None included), or `default` without a config."""
        if config is not None:
            return config.activation_quantizer
        return default


class Int8QuantizationConfig(QuantizationConfig):
    """Int8 quantization config.

    Args:
        weight_quantizer: quantizer of the weights; its `output_dtype` must be int8.
        activation_quantizer: quantizer of the activations; `"default"` is
            `AbsMaxQuantizer()` (per row of the last axis).

    Raises:
        ValueError: if `weight_quantizer.output_dtype` is not int8.

    Example:
        >>> keratron.quantizers.Int8QuantizationConfig().mode
        'int8'
    """

    def __init__(self, weight_quantizer=None, activation_quantizer="default"):
        from keratron.quantizers.quantizers import AbsMaxQuantizer

        if activation_quantizer == "default":
            activation_quantizer = AbsMaxQuantizer()
        super().__init__(weight_quantizer, activation_quantizer)
        if weight_quantizer is not None and weight_quantizer.output_dtype != "int8":
            raise ValueError(
                "Int8QuantizationConfig requires a weight_quantizer with output_dtype='int8'. "
                f"Received: output_dtype={weight_quantizer.output_dtype}"
            )

    @property
    def mode(self):
        return "int8"


class Int4QuantizationConfig(QuantizationConfig):
    """Int4 quantization config (weights only by default).

    Args:
        weight_quantizer: quantizer of the weights: `value_range=(-8, 7)`, int8 output.
        activation_quantizer: quantizer of the activations; `"default"` is None.
        block_size: rows per group of sub-channel quantization (`ceil(input_dim /
            block_size)` groups); None or -1 quantizes per output channel. Sub-channel
            quantization takes no custom quantizers.

    Raises:
        ValueError: for a `block_size` that is not None, -1 or positive; custom quantizers
            with a positive `block_size`; a weight quantizer of another range or dtype.

    Example:
        >>> keratron.quantizers.Int4QuantizationConfig(block_size=64).get_config()["block_size"]
        64
    """

    def __init__(self, weight_quantizer=None, activation_quantizer="default", block_size=128):
        if activation_quantizer == "default":
            activation_quantizer = None
        super().__init__(weight_quantizer, activation_quantizer)
        if block_size is not None and block_size != -1 and block_size <= 0:
            raise ValueError(
                "Int4QuantizationConfig: `block_size` must be None, -1, or a positive integer. "
                f"Received: block_size={block_size}"
            )
        self.block_size = block_size
        sub_channel = block_size is not None and block_size > 0
        if sub_channel and (weight_quantizer is not None or activation_quantizer is not None):
            raise ValueError(
                "Int4QuantizationConfig: sub-channel quantization (block_size > 0) does not "
                "take custom quantizers. Set block_size to None or -1 for per-channel "
                f"quantization, or remove the quantizers. Received: block_size={block_size}"
            )
        if weight_quantizer is not None:
            if tuple(weight_quantizer.value_range) != (-8, 7):
                raise ValueError(
                    "Int4QuantizationConfig requires a weight_quantizer with "
                    f"value_range=(-8, 7). Received: value_range={weight_quantizer.value_range}"
                )
            if weight_quantizer.output_dtype != "int8":
                raise ValueError(
                    "Int4QuantizationConfig requires a weight_quantizer with "
                    f"output_dtype='int8'. Received: output_dtype={weight_quantizer.output_dtype}"
                )

    @property
    def mode(self):
        return "int4"

    def get_config(self):
        return {**super().get_config(), "block_size": self.block_size}

    @classmethod
    def from_config(cls, config):
        # Configs written before `block_size` existed were per-channel.
        return cls(
            weight_quantizer=_deserialize(config.get("weight_quantizer")),
            activation_quantizer=_deserialize(config.get("activation_quantizer")),
            block_size=config.get("block_size", None),
        )


class Float8QuantizationConfig(QuantizationConfig):
    """Float8 mixed-precision training config (it takes no quantizers).

    Example:
        >>> keratron.quantizers.Float8QuantizationConfig().mode
        'float8'
    """

    def __init__(self):
        super().__init__(None, None)

    @property
    def mode(self):
        return "float8"

    def get_config(self):
        return {}

    @classmethod
    def from_config(cls, config):
        return cls()


def _check_calibration(who, num_samples, sequence_length, group_size):
    if num_samples <= 0:
        raise ValueError(
            f"{who}: `num_samples` must be a positive integer. Received: num_samples={num_samples}"
        )
    if sequence_length <= 0:
        raise ValueError(
            f"{who}: `sequence_length` must be a positive integer. Received: "
            f"sequence_length={sequence_length}"
        )
    if group_size < -1 or group_size == 0:
        raise ValueError(
            f"{who}: `group_size` must be -1 (per channel) or a positive integer. Received: "
            f"group_size={group_size}"
        )


class GPTQConfig(QuantizationConfig):
    """GPTQ (post-training, Hessian-guided) quantization config.

    Args:
        dataset: calibration data (strings or token arrays); not saved in the config.
        tokenizer: callable that tokenizes string data; not saved in the config.
        weight_bits: bits per weight: 2, 3, 4 or 8.
        num_samples: calibration samples used.
        per_channel: one scale per output channel (else per tensor).
        sequence_length: tokens per calibration sample.
        hessian_damping: fraction of the mean Hessian diagonal added to it, in [0, 1].
        group_size: columns per group; -1 quantizes per channel.
        symmetric: symmetric quantization.
        activation_order: quantize columns in decreasing Hessian-diagonal order.
        quantization_layer_structure: `{"pre_block_layers": [...], "sequential_blocks":
            [...]}`, the layers calibration runs through.

    Raises:
        ValueError: for an argument out of its range.

    Example:
        >>> keratron.quantizers.GPTQConfig(None, None, weight_bits=8).dtype_policy_string()
        'gptq/8/128'
    """

    def __init__(
        self,
        dataset,
        tokenizer,
        *,
        weight_bits: int = 4,
        num_samples: int = 128,
        per_channel: bool = True,
        sequence_length: int = 512,
        hessian_damping: float = 0.01,
        group_size: int = 128,
        symmetric: bool = False,
        activation_order: bool = False,
        quantization_layer_structure: dict | None = None,
    ):
        super().__init__()
        if weight_bits not in (2, 3, 4, 8):
            raise ValueError(
                "GPTQConfig: `weight_bits` must be 2, 3, 4 or 8. Received: "
                f"weight_bits={weight_bits}"
            )
        _check_calibration("GPTQConfig", num_samples, sequence_length, group_size)
        if not 0 <= hessian_damping <= 1:
            raise ValueError(
                "GPTQConfig: `hessian_damping` must be between 0 and 1. Received: "
                f"hessian_damping={hessian_damping}"
            )
        self.dataset = dataset
        self.tokenizer = tokenizer
        self.num_samples = num_samples
        self.per_channel = per_channel
        self.sequence_length = sequence_length
        self.hessian_damping = hessian_damping
        self.weight_bits = weight_bits
        self.group_size = group_size
        self.symmetric = symmetric
        self.activation_order = activation_order
        self.quantization_layer_structure = quantization_layer_structure

    def get_config(self):
        # The dataset and tokenizer serve one calibration; they are not saved.
        return {
            "dataset": None,
            "tokenizer": None,
            "weight_bits": self.weight_bits,
            "num_samples": self.num_samples,
            "per_channel": self.per_channel,
            "sequence_length": self.sequence_length,
            "hessian_damping": self.hessian_damping,
            "group_size": self.group_size,
            "symmetric": self.symmetric,
            "activation_order": self.activation_order,
            "quantization_layer_structure": self.quantization_layer_structure,
        }

    @classmethod
    def from_config(cls, config):
        return cls(**config)

    @property
    def mode(self):
        return "gptq"

    def dtype_policy_string(self):
        """The quantized dtype policy name, `"gptq/<bits>/<group_size>"`."""
        return f"gptq/{self.weight_bits}/{self.group_size}"


class AWQConfig(QuantizationConfig):
    """AWQ (activation-aware weight quantization) config; AWQ quantizes to 4 bits.

    Args:
        dataset: calibration data (strings or token arrays); not saved in the config.
        tokenizer: callable that tokenizes string data; not saved in the config.
        weight_bits: bits per weight; only 4.
        num_samples: calibration samples used.
        sequence_length: tokens per calibration sample.
        group_size: columns per group; -1 quantizes per channel.
        num_grid_points: points of the grid search for per-channel scales.
        quantization_layer_structure: `{"pre_block_layers": [...], "sequential_blocks":
            [...]}`, the layers calibration runs through.

    Raises:
        ValueError: for an argument out of its range.

    Example:
        >>> keratron.quantizers.AWQConfig(None, None, group_size=-1).dtype_policy_string()
        'awq/4/-1'
    """

    def __init__(
        self,
        dataset,
        tokenizer,
        *,
        weight_bits: int = 4,
        num_samples: int = 128,
        sequence_length: int = 512,
        group_size: int = 128,
        num_grid_points: int = 20,
        quantization_layer_structure: dict | None = None,
    ):
        super().__init__()
        if weight_bits != 4:
            raise ValueError(
                f"AWQConfig: AWQ quantizes to 4 bits only. Received: weight_bits={weight_bits}"
            )
        _check_calibration("AWQConfig", num_samples, sequence_length, group_size)
        if num_grid_points <= 0:
            raise ValueError(
                "AWQConfig: `num_grid_points` must be a positive integer. Received: "
                f"num_grid_points={num_grid_points}"
            )
        self.dataset = dataset
        self.tokenizer = tokenizer
        self.weight_bits = weight_bits
        self.num_samples = num_samples
        self.sequence_length = sequence_length
        self.group_size = group_size
        self.num_grid_points = num_grid_points
        self.quantization_layer_structure = quantization_layer_structure

    @property
    def mode(self):
        return "awq"

    def dtype_policy_string(self):
        """The quantized dtype policy name, `"awq/<bits>/<group_size>"`."""
        return f"awq/{self.weight_bits}/{self.group_size}"

    def get_config(self):
        # The dataset and tokenizer serve one calibration; they are not saved.
        return {
            "dataset": None,
            "tokenizer": None,
            "weight_bits": self.weight_bits,
            "num_samples": self.num_samples,
            "sequence_length": self.sequence_length,
            "group_size": self.group_size,
            "num_grid_points": self.num_grid_points,
            "quantization_layer_structure": self.quantization_layer_structure,
        }

    @classmethod
    def from_config(cls, config):
        return cls(**config)


def _validate_mode(mode):
    if mode is not None and mode not in QUANTIZATION_MODES:
        raise ValueError(
            f"Invalid quantization mode. Expected one of {QUANTIZATION_MODES}. Received: "
            f"mode={mode}"
        )


def validate_and_resolve_config(mode, config):
    """The config a `quantize(mode, config=...)` call means.

    A string `config` is taken as the mode; a missing config is the mode's default (GPTQ and
    AWQ have none: they need calibration data).

    Raises:
        ValueError: for an unknown mode, a config that is not a `QuantizationConfig`, a mode
            that contradicts the config's, or GPTQ / AWQ without their config.

    Example:
        >>> keratron.quantizers.quantization_config.validate_and_resolve_config("int4", None).mode
        'int4'
    """
    if isinstance(config, str):
        mode, config = config, None
    _validate_mode(mode)
    if config is None:
        defaults = {
            "int8": Int8QuantizationConfig,
            "int4": Int4QuantizationConfig,
            "float8": Float8QuantizationConfig,
        }
        if mode in ("gptq", "awq"):
            name = "GPTQConfig" if mode == "gptq" else "AWQConfig"
            raise ValueError(
                f"For {mode.upper()}, you must pass a `{name}` object in the `config` argument."
            )
        if mode is None:
            raise ValueError("You must provide either `mode` or `config` to `quantize`.")
        return defaults[mode]()
    if not isinstance(config, QuantizationConfig):
        raise ValueError(
            "Argument `config` must be an instance of `QuantizationConfig`. Received: "
            f"config={config} (of type {type(config)})"
        )
    if mode is not None and config.mode != mode:
        raise ValueError(f"Contradictory arguments: mode='{mode}' but config.mode='{config.mode}'")
    _validate_mode(config.mode)
    required = {"gptq": GPTQConfig, "awq": AWQConfig}.get(config.mode)
    if required is not None and not isinstance(config, required):
        raise ValueError(
            f"Mode '{config.mode}' requires a valid `config` argument of type "
            f"`{required.__name__}`. Received: {type(config)}"
        )
    return config
