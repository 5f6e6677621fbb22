"""`model.summary()`: Keras 3's layer table, drawn as plain text with box characters.

Keras draws the table with `rich`; this module lays it out the same way (column widths from
`positions`, shrunk evenly to fit `line_length`, words wrapped inside cells, a cell that is
one long word cut with "…") so that the text matches Keras's for the same model.
"""

from __future__ import annotations

import math
import re
import shutil

from keratron.utils.io_utils import print_msg

__all__ = ["print_summary", "count_params", "weight_memory_size", "readable_memory_size"]

# rich's HEAVY_HEAD box: top, header row, header/body rule, body row, row rule, bottom.
_TOP = ("┏", "━", "┳", "┓")
_HEAD = ("┃", "┃", "┃")
_HEAD_RULE = ("┡", "━", "╇", "┩")
_BODY = ("│", "│", "│")
_ROW_RULE = ("├", "─", "┼", "┤")
_BOTTOM = ("└", "─", "┴", "┘")


def count_params(weights) -> int:
    return int(sum(math.prod(w.shape) for w in weights))


def _dtype_bits(dtype: str) -> int:
    if dtype == "bool":
        return 1
    digits = re.findall(r"\d+", dtype)
    return int(digits[-1]) if digits else 32


def weight_memory_size(weights) -> float:
    """Bytes taken by the (distinct) weights."""
    unique = {id(w): w for w in weights}.values()
    return sum(math.prod(w.shape) * _dtype_bits(w.dtype) for w in unique) / 8


def readable_memory_size(size: float) -> str:
    """ "76.00 B", "1.50 KB", ... (Keras's units, powers of 1024)."""
    for unit in ["B", "KB", "MB", "GB", "TB"]:
        if size / 1024 < 1:
            return f"{size:.2f} {unit}"
        size /= 1024
    return f"{size:.2f} PB"


def _format_shape(shape) -> str:
    return "(" + ", ".join(str(d) for d in shape) + ")"


def _output_shape_text(layer) -> str:
    if layer._inbound_nodes:
        outputs = layer._inbound_nodes[-1].outputs
        shapes = [_format_shape(t.shape) for t in outputs]
        return shapes[0] if len(shapes) == 1 else str(shapes).replace("'", "")
    build_shapes = getattr(layer, "_build_shapes", None)
    if not build_shapes:
        return "?"
    try:
        shape = layer.compute_output_shape(**build_shapes)
    except Exception:  # a layer without shape inference shows "?", as in Keras
        return "?"
    flat = _flatten_shapes(shape)
    texts = [_format_shape(s) for s in flat]
    return texts[0] if len(texts) == 1 else str(texts).replace("'", "")


def _flatten_shapes(shape):
    if isinstance(shape, (list, tuple)) and all(d is None or isinstance(d, int) for d in shape):
        return [tuple(shape)]
    if isinstance(shape, dict):
        return [s for k in sorted(shape) for s in _flatten_shapes(shape[k])]
    return [s for v in shape for s in _flatten_shapes(v)]


# ---------------------------------------------------------------------- text layout
def _ratio_reduce(total, ratios, maximums, values):
    """Takes `total` away from `values` in proportion to `ratios` (rich's rule)."""
    ratios = [r if m else 0 for r, m in zip(ratios, maximums)]
    total_ratio = sum(ratios)
    if not total_ratio:
        return list(values)
    remaining, out = total, []
    for ratio, maximum, value in zip(ratios, maximums, values):
        if ratio and total_ratio > 0:
            cut = min(maximum, round(ratio * remaining / total_ratio))
            out.append(value - cut)
            remaining -= cut
            total_ratio -= ratio
        else:
            out.append(value)
    return out


def _column_widths(line_length, positions):
    """Cell widths (padding included) for a table `line_length` characters wide."""
    if all(p <= 1 for p in positions):
        edges = [int(p * line_length) for p in positions]
    else:
        edges = [int(p) for p in positions]
    widths, current = [], 0
    for edge in edges:
        width = edge - current
        if width < 4:
            raise ValueError("Insufficient console width to print summary.")
        widths.append(width)
        current += width
    cells = [w + 2 for w in widths]  # one space of padding on each side
    available = line_length - (len(cells) + 1)
    if sum(cells) > available:
        reduced = _ratio_reduce(sum(cells) - available, [1] * len(cells), cells, cells)
        cells = [min(c, r) for c, r in zip(cells, reduced)]
    return cells


def _wrap(text: str, width: int) -> list:
    """Greedy word wrap into lines of at most `width` characters (rich's `divide_line`); a
    word longer than the width keeps its own line and is cut with an ellipsis."""
    lines, line = [], ""
    for match in re.finditer(r"\s*\S+\s*", text):
        word = match.group(0)
        if width - len(line) >= len(word.rstrip()):
            line += word
        else:
            if line:
                lines.append(line)
            line = word
    lines.append(line)
    out = []
    for line in lines:
        if len(line) > width:
            line = line[: max(width, len(line.rstrip()))]
        if len(line) > width:
            line = line[: width - 1] + "…"
        out.append(line)
    return out


def _justify(line: str, width: int, how: str) -> str:
    line = line.rstrip()
    if how == "right":
        return line.rjust(width)
    if how == "center":
        excess = width - len(line)
        return " " * (excess // 2) + line + " " * (excess - excess // 2)
    return line.ljust(width)


def _render_row(cells, widths, aligns, edges):
    left, mid, right = edges
    wrapped = [_wrap(str(c), w - 2) for c, w in zip(cells, widths)]
    height = max(len(w) for w in wrapped)
    out = []
    for i in range(height):
        parts = []
        for lines, w, how in zip(wrapped, widths, aligns):
            text = lines[i] if i < len(lines) else ""
            parts.append(" " + _justify(text, w - 2, how) + " ")
        out.append(left + mid.join(parts) + right)
    return out


def _rule(widths, chars):
    left, fill, mid, right = chars
    return left + mid.join(fill * w for w in widths) + right


# ---------------------------------------------------------------------- the summary
def _is_sequential_like(model) -> bool:
    from keratron.models.functional import Functional

    if not isinstance(model, Functional):
        return True
    nodes = []
    for group in model._nodes_by_depth.values():
        if len(group) > 1 or (len(group) == 1 and len(group[0].arguments) > 1):
            return False
        nodes.extend(group)
    node_ids = {id(n) for n in nodes}
    for layer in model.layers:
        if sum(1 for n in layer._inbound_nodes if id(n) in node_ids) > 1:
            return False
    return True


def _layer_range_bounds(layers, layer_range):
    if layer_range is None:
        return 0, len(layers)
    if len(layer_range) != 2 or not all(isinstance(p, str) for p in layer_range):
        raise ValueError(
            "layer_range must be a list or tuple of two layer-name patterns. "
            f"Received: layer_range={layer_range!r}"
        )
    lower = [i for i, layer in enumerate(layers) if re.match(layer_range[0], layer.name)]
    upper = [i for i, layer in enumerate(layers) if re.match(layer_range[1], layer.name)]
    if not lower or not upper:
        raise ValueError(
            f"Passed layer_names do not match the layer names in the model. Received: {layer_range}"
        )
    if min(lower) > max(upper):
        return min(upper), max(lower) + 1
    return min(lower), max(upper) + 1


def summary_text(
    model,
    line_length=None,
    positions=None,
    expand_nested=False,
    show_trainable=False,
    layer_range=None,
) -> str:
    """The summary of `model` as one string (lines separated by newlines)."""
    from keratron.models.functional import Functional

    # As Keras: a functional model's rows are its operations, ops on tensors (`x + 3.0`) too.
    layers = model.operations if isinstance(model, Functional) else model.layers
    sequential_like = _is_sequential_like(model)
    relevant = set()
    if sequential_like:
        default_length, positions = 88, positions or [0.45, 0.80, 1.0]
        header = ["Layer (type)", "Output Shape", "Param #"]
        aligns = ["left", "left", "right"]
    else:
        default_length, positions = 108, positions or [0.3, 0.56, 0.74, 1.0]
        header = ["Layer (type)", "Output Shape", "Param #", "Connected to"]
        aligns = ["left", "left", "right", "left"]
        relevant = {id(n) for group in model._nodes_by_depth.values() for n in group}
    if show_trainable:
        default_length += 12
        positions = [p * 0.90 for p in positions] + [1.0]
        header.append("Trainable")
        aligns.append("center")
    default_length = min(default_length, shutil.get_terminal_size().columns - 4)
    line_length = line_length or default_length
    widths = _column_widths(line_length, positions)

    def connections(layer):
        parts = []
        for node in layer._inbound_nodes:
            if relevant and id(node) not in relevant:
                continue
            for x in node.arguments:
                op, node_index, tensor_index = x._keras_history
                parts.append(f"{op.name}[{node_index}][{tensor_index}]")
        return ", ".join(parts) or "-"

    def fields(layer, prefix):
        class_name = getattr(layer, "keras_class_name", type(layer).__name__)
        row = [f"{prefix}{layer.name} ({class_name})", _output_shape_text(layer)]
        if not layer.built:
            row.append("0 (unbuilt)")
        else:
            row.append(f"{layer.count_params():,}")
        if not sequential_like:
            row.append(connections(layer))
        if show_trainable:
            row.append(("Y" if layer.trainable else "N") if layer.weights else "-")
        return row

    def rows_for(layer, level=0):
        prefix = "   " * level + "└ " if level else ""
        rows = [fields(layer, prefix)]
        sub = getattr(layer, "layers", None)
        if expand_nested and sub:
            for inner in sub:
                rows.extend(rows_for(inner, level + 1))
        return rows

    lo, hi = _layer_range_bounds(layers, layer_range)
    body = [row for layer in layers[lo:hi] for row in rows_for(layer)]
    lines = [f'Model: "{model.name}"', _rule(widths, _TOP)]
    lines += _render_row(header, widths, aligns, _HEAD)
    lines.append(_rule(widths, _HEAD_RULE))
    for i, row in enumerate(body):
        if i:
            lines.append(_rule(widths, _ROW_RULE))
        lines += _render_row(row, widths, aligns, _BODY)
    lines.append(_rule(widths, _BOTTOM))

    trainable = model.trainable_weights
    non_trainable = model.non_trainable_weights
    optimizer = getattr(model, "optimizer", None)
    opt_vars = []
    if (
        getattr(model, "compiled", False)
        and optimizer is not None
        and getattr(optimizer, "built", False)
    ):
        opt_vars = list(optimizer.variables)
    t_count, t_size = count_params(trainable), weight_memory_size(trainable)
    n_count, n_size = count_params(non_trainable), weight_memory_size(non_trainable)
    o_count, o_size = count_params(opt_vars), weight_memory_size(opt_vars)
    total = t_count + n_count + o_count
    lines.append(f" Total params: {total:,} ({readable_memory_size(t_size + n_size + o_size)})")
    lines.append(f" Trainable params: {t_count:,} ({readable_memory_size(t_size)})")
    lines.append(f" Non-trainable params: {n_count:,} ({readable_memory_size(n_size)})")
    if opt_vars:
        lines.append(f" Optimizer params: {o_count:,} ({readable_memory_size(o_size)})")
    return "\n".join(lines) + "\n"


def print_summary(
    model,
    line_length=None,
    positions=None,
    print_fn=None,
    expand_nested=False,
    show_trainable=False,
    layer_range=None,
):
    """Prints `summary_text(model, ...)`, or passes it to `print_fn` in one call (Keras 3)."""
    text = summary_text(
        model,
        line_length=line_length,
        positions=positions,
        expand_nested=expand_nested,
        show_trainable=show_trainable,
        layer_range=layer_range,
    )
    if print_fn is None:
        print_msg(text, line_break=False)  # logged when interactive logging is off
    else:
        print_fn(text)
