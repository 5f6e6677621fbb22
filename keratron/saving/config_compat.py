"""Model configs between dialects: keratron's (Keras 3's) and tf.keras 2's.

`model.save("x.h5")` writes `model_config` in the tf.keras 2 dialect, which both tf.keras 2 and
Keras 3 read: plain dtype names, `batch_input_shape` on InputLayers, inbound nodes as
`[[layer_name, node_index, tensor_index, kwargs], ...]`, single inputs and outputs as lists.

Reading goes the other way: configs written by tf.keras 2, by Keras 3 (in `.h5` or `.keras`
files) or by keratron are brought to what keratron's layers take. Keys that a keratron layer
does not accept are dropped when they only switch a feature off (`None`, `False`) or are pure
performance hints (`implementation`); anything else is left for the layer to reject with a
clear error. Nothing from a config is ever evaluated.
"""

from __future__ import annotations

import copy
import inspect

__all__ = [
    "keras_build_configs",
    "to_tf_keras2",
    "normalize_config",
    "find_unsafe_entry",
    "training_config",
    "compile_args_from_training_config",
]

# Keys a Keras or tf.keras config may carry that only select an implementation.
_HINT_KEYS = {"implementation"}
# tf.keras 2 keys whose value means "the default" (DepthwiseConv2D inherits `groups` there).
_DEFAULT_VALUED = {"groups": 1}
# Keys tf.keras 2 writes for arguments a layer never uses (a separable convolution has depthwise
# and pointwise kernels, but tf.keras 2 also records the generic `kernel_*` arguments).
_UNUSED_BY_CLASS = {
    "SeparableConv1D": {"kernel_initializer", "kernel_regularizer", "kernel_constraint"},
    "SeparableConv2D": {"kernel_initializer", "kernel_regularizer", "kernel_constraint"},
}
# Optimizer config keys tf.keras 2 does not know; written only when they are set.
_KERAS3_ONLY_OPTIMIZER_KEYS = ("loss_scale_factor", "gradient_accumulation_steps")
# Short loss names written in full: Keras 3 cannot read "mse" back from a training_config
# (it resolves to a metric function); the full names read everywhere.
_LOSS_ALIASES = {
    "mse": "mean_squared_error",
    "MSE": "mean_squared_error",
    "mae": "mean_absolute_error",
    "MAE": "mean_absolute_error",
    "mape": "mean_absolute_percentage_error",
    "MAPE": "mean_absolute_percentage_error",
    "msle": "mean_squared_logarithmic_error",
    "MSLE": "mean_squared_logarithmic_error",
    "kld": "kl_divergence",
    "KLD": "kl_divergence",
    "kullback_leibler_divergence": "kl_divergence",
    "logcosh": "log_cosh",
}
# Optimizer arguments tf.keras 2's legacy optimizers do not take, with their "off" values.
_NEW_OPTIMIZER_ARGS = {
    "weight_decay": None,
    "clipnorm": None,
    "global_clipnorm": None,
    "clipvalue": None,
    "use_ema": False,
    "ema_momentum": 0.99,
    "ema_overwrite_frequency": None,
}
# tf.keras 2 optimizer config keys keratron's optimizers do not take.
_TF_KERAS_ONLY_OPTIMIZER_KEYS = ("jit_compile", "is_legacy_optimizer")


def _is_layer_dict(x) -> bool:
    return isinstance(x, dict) and "class_name" in x and isinstance(x.get("config"), (dict, list))


def _layer_class(data, custom_objects):
    from keratron.layers.layer import Layer
    from keratron.models.serialization import lookup_layer_class

    name = data.get("class_name")
    if not isinstance(name, str):
        return None
    try:
        cls = lookup_layer_class(name, data.get("registered_name"), custom_objects)
    except Exception:
        return None
    return cls if inspect.isclass(cls) and issubclass(cls, Layer) else None


# ------------------------------------------------------------------------------ writing
def keras_build_configs(data):
    """Rewrites every `build_config` the way Keras 3 writes them: `{"input_shape": shape}`
    for a layer built from one shape, `{"shapes_dict": {...}}` for several (keratron records
    them under the `build` argument names, which Keras's `build_from_config` ignores)."""
    if isinstance(data, list):
        return [keras_build_configs(v) for v in data]
    if not isinstance(data, dict):
        return data
    out = {k: keras_build_configs(v) for k, v in data.items()}
    build = out.get("build_config")
    if isinstance(build, dict) and build and "class_name" in out:
        if len(build) == 1 and "input_shape" not in build and "shapes_dict" not in build:
            out["build_config"] = {"input_shape": next(iter(build.values()))}
        elif len(build) > 1:
            out["build_config"] = {"shapes_dict": build}
    return out


def _policy_name(dtype):
    if isinstance(dtype, dict):
        inner = dtype.get("config") or {}
        return inner.get("name", "float32") if isinstance(inner, dict) else "float32"
    return dtype


def to_tf_keras2(data: dict) -> dict:
    """Converts a serialized layer or model (keratron's Keras 3 dialect) to tf.keras 2's.

    Example:
        >>> from keratron.saving.config_compat import to_tf_keras2
        >>> inputs = keratron.Input((3,))
        >>> model = keratron.Model(inputs, keratron.layers.Dense(2)(inputs))
        >>> config = to_tf_keras2(keratron.saving.serialize_keras_object(model))
        >>> config["class_name"], config["config"]["layers"][0]["config"]["batch_input_shape"]
        ('Functional', (None, 3))
    """
    return _legacy_layer(copy.deepcopy(data))


# Keras 3 config keys tf.keras 2 rejects, dropped when they hold the value that means "off".
_KERAS3_ONLY_KEYS = {
    "quantization_config": None,
    "lora_rank": None,
    "lora_alpha": None,
    "rms_scaling": False,
    "optional": False,
    "input_axes": None,  # initializers
    "output_axes": None,
}
# Per class: keys tf.keras 2 does not take (with their "off" value), and renamed keys.
_KERAS3_ONLY_BY_CLASS = {
    "LSTM": {"seed": None},
    "GRU": {"seed": None},
    "SimpleRNN": {"seed": None},
    "LSTMCell": {"seed": None},
    "GRUCell": {"seed": None},
    "SimpleRNNCell": {"seed": None},
}
_RENAMED_FOR_TF_KERAS = {"LeakyReLU": {"negative_slope": "alpha"}}


def _strip_keras3_keys(config: dict, class_name=None) -> dict:
    drop = dict(_KERAS3_ONLY_KEYS)
    drop.update(_KERAS3_ONLY_BY_CLASS.get(class_name, {}))
    out = {}
    for key, value in config.items():
        if key in drop and value is drop[key]:
            continue
        out[key] = value
    for old, new in _RENAMED_FOR_TF_KERAS.get(class_name, {}).items():
        if old in out:
            out[new] = out.pop(old)
    return out


def _legacy_layer(data: dict, nested: bool = False) -> dict:
    class_name = data["class_name"]
    registered = data.get("registered_name")
    if nested:
        # tf.keras 2.13+ writes layers nested in a config (Bidirectional's `layer`) in the
        # serialization_lib form, with their module; Keras 3 needs that to find them.
        out = {k: v for k, v in data.items() if k in ("module", "class_name", "registered_name")}
        out["config"] = data.get("config", {})
    else:
        # tf.keras 2 names registered custom classes by their registered name ("Pkg>Name").
        out = {"class_name": registered or class_name, "config": data.get("config", {})}
    config = out["config"]
    if isinstance(config, dict):
        graph = class_name in ("Functional", "Model") and "layers" in config
        sequential = class_name == "Sequential" and isinstance(config.get("layers"), list)
        config = {
            k: v if k == "layers" and (graph or sequential) else _legacy_value(v)
            for k, v in config.items()
        }
        if sequential:
            config["layers"] = [_legacy_layer(x) for x in config["layers"]]
        config = _strip_keras3_keys(config, class_name)
        if "dtype" in config:
            config["dtype"] = _policy_name(config["dtype"])
        if class_name == "InputLayer":
            if "batch_shape" in config:
                config["batch_input_shape"] = config.pop("batch_shape")
            config.setdefault("ragged", False)
        if graph:
            config = _legacy_functional(config)
        out["config"] = config
    return out


def _legacy_value(value):
    if _is_layer_dict(value) and _layer_class(value, None) is not None:
        return _legacy_layer(value, nested=True)
    if isinstance(value, dict) and isinstance(value.get("config"), dict):
        # Initializers, regularizers, constraints: same form, minus Keras 3-only keys.
        value = dict(value)
        value["config"] = _strip_keras3_keys(
            {k: _legacy_value(v) for k, v in value["config"].items()}
        )
        return value
    if isinstance(value, list) and value and all(_is_layer_dict(v) for v in value):
        return [_legacy_value(v) for v in value]
    return value


def _legacy_functional(config: dict) -> dict:
    # tf.keras 2 gives every nested model a node of its own (node 0), so its calls are
    # numbered from 1 there; tf.keras 2 cannot resolve a reference to node 0 of such a model.
    models = {
        x.get("name"): x.get("class_name")
        for x in config["layers"]
        if x.get("class_name") in ("Sequential", "Functional", "Model")
    }
    layers = []
    for layer_data in config["layers"]:
        converted = _legacy_layer({k: v for k, v in layer_data.items() if k != "inbound_nodes"})
        converted["name"] = layer_data.get("name", converted["config"].get("name"))
        nodes = [_legacy_node(node) for node in layer_data.get("inbound_nodes", [])]
        for node in nodes:
            for entry in node:
                if entry[0] in models:
                    entry[1] += 1
        converted["inbound_nodes"] = nodes
        layers.append(converted)
    config = dict(config)
    config["layers"] = layers
    for key in ("input_layers", "output_layers"):
        spec = config.get(key)
        if _is_tensor_spec(spec):
            config[key] = [spec]
        # keratron already numbers a nested Functional's calls from 1 in these specs.
        for entry in _tensor_specs(config.get(key)):
            if models.get(entry[0]) == "Sequential":
                entry[1] += 1
    return config


def _is_tensor_spec(x) -> bool:
    return isinstance(x, list) and len(x) == 3 and isinstance(x[0], str)


def _legacy_node(node):
    if isinstance(node, list):  # already [[name, node_index, tensor_index, kwargs], ...]
        return node

    def history(t):
        return list(t["config"]["keras_history"])

    def is_tensor(x):
        return isinstance(x, dict) and x.get("class_name") == "__keras_tensor__"

    def convert_kwargs(x):
        if is_tensor(x):
            return history(x)
        if isinstance(x, dict):
            return {k: convert_kwargs(v) for k, v in x.items()}
        if isinstance(x, list):
            return [convert_kwargs(v) for v in x]
        return x

    args = list(node.get("args", []))
    kwargs = convert_kwargs(dict(node.get("kwargs", {})))
    first = args[0] if args else None
    tensors = first if isinstance(first, list) else [first]
    if not tensors or not all(is_tensor(t) for t in tensors) or len(args) > 1:
        raise ValueError(
            "Saving to '.h5': a layer call with positional arguments other than its input "
            f"tensor(s) cannot be written in the tf.keras 2 config layout (node: {node!r}). "
            "Save in the '.keras' format instead."
        )
    return [history(t) + [kwargs] for t in tensors]


# ------------------------------------------------------------------------------ reading
def normalize_config(data, custom_objects=None):
    """A copy of a serialized model/layer config in any dialect, in the form keratron's
    deserializer takes (see the module docstring)."""
    return _normalize(copy.deepcopy(data), custom_objects)


def _normalize(value, custom_objects):
    if isinstance(value, list):
        return [_normalize(v, custom_objects) for v in value]
    if not isinstance(value, dict):
        return value
    if _is_layer_dict(value):
        build = value.get("build_config")
        if isinstance(build, dict) and isinstance(build.get("shapes_dict"), dict):
            value["build_config"] = dict(build["shapes_dict"])
        if value.get("class_name") == "Model" and isinstance(value.get("config"), dict):
            if "layers" in value["config"]:
                value["class_name"] = "Functional"
        cls = _layer_class(value, custom_objects)
        if cls is not None and isinstance(value["config"], dict):
            value["config"] = _normalize_layer_config(cls, value["config"], custom_objects)
            return value
    return {k: _normalize(v, custom_objects) for k, v in value.items()}


def _renumber_nested_model_nodes(config: dict) -> None:
    """tf.keras 2 gives a nested model built on an input a node of its own, so the calls of
    that model are numbered from 1 in tf.keras 2 configs (written as `[[name, node, tensor,
    kwargs], ...]`); keratron numbers them from 0. Renumbers references to such models."""
    layers = config["layers"]
    if not any(
        isinstance(x.get("inbound_nodes"), list)
        and x["inbound_nodes"]
        and isinstance(x["inbound_nodes"][0], list)
        for x in layers
    ):
        return  # not a tf.keras 2 config
    models = {
        x.get("name"): x.get("class_name")
        for x in layers
        if x.get("class_name") in ("Sequential", "Functional", "Model")
    }
    if not models:
        return
    used: dict = {}

    def entries():
        for layer in layers:
            for node in layer.get("inbound_nodes") or []:
                for entry in node if isinstance(node, list) else []:
                    if isinstance(entry, list) and len(entry) >= 3 and entry[0] in models:
                        yield entry

    for entry in entries():
        used[entry[0]] = min(used.get(entry[0], entry[1]), entry[1])
    for entry in entries():
        entry[1] -= used[entry[0]]
    # Output references: keratron's functional loader already counts a nested Functional's
    # calls from 1 there, so only nested Sequential models are renumbered.
    for spec in _tensor_specs(config.get("output_layers")):
        if models.get(spec[0]) == "Sequential" and spec[1] >= 1 and used.get(spec[0], 1) >= 1:
            spec[1] -= 1


def _tensor_specs(spec):
    if _is_tensor_spec(spec):
        yield spec
    elif isinstance(spec, list):
        for item in spec:
            yield from _tensor_specs(item)
    elif isinstance(spec, dict):
        for item in spec.values():
            yield from _tensor_specs(item)


def _accepted_arguments(cls) -> tuple[set, bool]:
    """Constructor argument names accepted along the class hierarchy, and whether a
    `**kwargs` is accepted with no known base to forward to (then anything goes)."""
    from keratron.layers.layer import ALLOWED_KWARGS, Layer

    names: set = set()
    for klass in cls.__mro__:
        init = klass.__dict__.get("__init__")
        if init is None:
            continue
        try:
            params = inspect.signature(init).parameters
        except (TypeError, ValueError):
            return names, True
        names.update(
            p.name
            for p in params.values()
            if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL) and p.name != "self"
        )
        if klass is Layer:
            names.update(ALLOWED_KWARGS)
            return names, False
        if not any(p.kind == p.VAR_KEYWORD for p in params.values()):
            return names, False
    return names, True


def _normalize_layer_config(cls, config: dict, custom_objects) -> dict:
    from keratron.models.functional import Functional
    from keratron.models.sequential import Sequential

    config = {k: _normalize(v, custom_objects) for k, v in config.items()}
    if isinstance(config.get("dtype"), dict):
        config["dtype"] = _policy_name(config["dtype"])
        name = str(config["dtype"])
        if "_" in name and not name.startswith("mixed_"):  # a quantized policy: its dtype
            config["dtype"] = name.split("_")[-1]
    if issubclass(cls, Functional) and isinstance(config.get("layers"), list):
        _renumber_nested_model_nodes(config)
    if issubclass(cls, (Functional, Sequential)):
        return config  # a graph config, not constructor arguments
    accepted, open_ended = _accepted_arguments(cls)
    if open_ended:
        return config
    unused = _UNUSED_BY_CLASS.get(cls.__name__, set())
    for key in list(config):
        if key in accepted:
            continue
        if key in unused:
            del config[key]
            continue
        value = config[key]
        benign = value is None or value is False or value == {} or value == []
        if benign or key in _HINT_KEYS or _DEFAULT_VALUED.get(key, object()) == value:
            del config[key]
    return config


def find_unsafe_entry(data, where="config"):
    """The location of the first entry that would run code from the file when loaded (a
    serialized Python lambda), or None."""
    if isinstance(data, dict):
        if data.get("class_name") == "__lambda__":
            return where
        for key, value in data.items():
            if key.endswith("_type") and value == "lambda":
                return f"{where}.{key[: -len('_type')]}"
            found = find_unsafe_entry(value, f"{where}.{key}")
            if found:
                return found
    elif isinstance(data, list):
        for i, value in enumerate(data):
            found = find_unsafe_entry(value, f"{where}[{i}]")
            if found:
                return found
    return None


# ------------------------------------------------------------------------ training config
def training_config(model) -> dict | None:
    """The `training_config` attribute of an `.h5` model file (tf.keras 2 dialect), or None
    for a model that was never compiled."""
    if not getattr(model, "compiled", False) or model.optimizer is None:
        return None
    compile_config = model.get_compile_config()
    optimizer = compile_config.get("optimizer") or {}
    optimizer_config = dict(optimizer.get("config", {})) if isinstance(optimizer, dict) else {}
    for key in _KERAS3_ONLY_OPTIMIZER_KEYS:
        if optimizer_config.get(key) is None:
            optimizer_config.pop(key, None)
    class_name = optimizer.get("class_name") if isinstance(optimizer, dict) else str(optimizer)
    if isinstance(optimizer, dict) and optimizer.get("registered_name"):
        class_name = optimizer["registered_name"]
    # tf.keras 2 reads a bare class name as its legacy optimizer, which takes only the classic
    # arguments; Keras 3 rejects tf.keras 2's "is_legacy_optimizer" marker. Arguments at their
    # "off" value are left out so that both read the config.
    for key, off in _NEW_OPTIMIZER_ARGS.items():
        if key in optimizer_config and optimizer_config[key] == off:
            del optimizer_config[key]

    def full_loss_names(value):
        if isinstance(value, str):
            return _LOSS_ALIASES.get(value, value)
        if isinstance(value, list):
            return [full_loss_names(v) for v in value]
        if isinstance(value, dict) and "class_name" not in value:
            return {k: full_loss_names(v) for k, v in value.items()}
        return value

    return {
        "loss": full_loss_names(compile_config.get("loss")),
        "metrics": compile_config.get("metrics"),
        "weighted_metrics": compile_config.get("weighted_metrics"),
        "loss_weights": compile_config.get("loss_weights"),
        "optimizer_config": {"class_name": class_name, "config": optimizer_config},
    }


def _metric_identifier(entry):
    """tf.keras 2 writes string metrics as `MeanMetricWrapper` configs; their `name` is the
    string the user passed ("mae", "accuracy")."""
    if isinstance(entry, dict) and entry.get("class_name") == "MeanMetricWrapper":
        config = entry.get("config") or {}
        return config.get("name") or config.get("fn")
    if isinstance(entry, dict) and "class_name" in entry:
        return entry
    if isinstance(entry, list):
        return [_metric_identifier(e) for e in entry]
    if isinstance(entry, dict):
        return {k: _metric_identifier(v) for k, v in entry.items()}
    return entry


def _unwrap_single_output(value, model):
    # tf.keras 2 nests metrics per output even for a single-output model: [["mae"]].
    outputs = getattr(model, "outputs", None) or []
    if isinstance(value, list) and len(value) == 1 and isinstance(value[0], list):
        if len(outputs) <= 1:
            return value[0]
    return value


def compile_args_from_training_config(config: dict, model, custom_objects=None) -> dict:
    """`compile()` keyword arguments from an `.h5` file's `training_config` (written by
    tf.keras 2, Keras 3 or keratron)."""
    from keratron import losses, metrics, optimizers

    optimizer_config = dict(config.get("optimizer_config") or {})
    class_name = str(optimizer_config.get("class_name", "rmsprop"))
    if class_name.startswith("Custom>"):
        class_name = class_name[len("Custom>") :]
    inner = dict(optimizer_config.get("config") or {})
    for key in _TF_KERAS_ONLY_OPTIMIZER_KEYS:
        inner.pop(key, None)
    optimizer = optimizers.deserialize(
        {"class_name": class_name, "config": inner}, custom_objects=custom_objects
    )

    def loss_of(value):
        if isinstance(value, dict) and "class_name" in value:
            return losses.deserialize(value)
        if isinstance(value, list):
            return [loss_of(v) for v in value]
        if isinstance(value, dict):
            return {k: loss_of(v) for k, v in value.items()}
        return value

    def metric_of(value):
        value = _metric_identifier(value)
        if isinstance(value, dict) and "class_name" in value:
            return metrics.deserialize(value)
        if isinstance(value, list):
            return [metric_of(v) for v in value]
        if isinstance(value, dict):
            return {k: metric_of(v) for k, v in value.items()}
        return value

    from keratron.layers import serialization as registry

    with registry.custom_object_scope(custom_objects or {}):
        return {
            "optimizer": optimizer,
            "loss": loss_of(config.get("loss")),
            "metrics": _unwrap_single_output(metric_of(config.get("metrics")), model),
            "weighted_metrics": _unwrap_single_output(
                metric_of(config.get("weighted_metrics")), model
            ),
            "loss_weights": config.get("loss_weights"),
        }
