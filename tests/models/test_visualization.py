"""plot_model / model_to_dot against real Keras. pydot is not a dependency, so both run on
the same stand-in pydot module that records the graph (nodes with their HTML labels, edges,
graph attributes); without pydot, both raise Keras's ImportError."""

import sys

import pytest

import keratron
from keratron.models import visualization
from tests.conftest import require


class _Graph:
    def __init__(self, kind, **attrs):
        self.kind, self.attrs = kind, dict(attrs)
        self.nodes, self.edges, self.subgraphs, self.written = [], [], [], None

    def set(self, key, value):
        self.attrs[key] = value

    def set_node_defaults(self, **attrs):
        self.attrs["node_defaults"] = attrs

    def add_node(self, node):
        self.nodes.append(node)

    def add_edge(self, edge):
        self.edges.append(edge)

    def get_edge(self, src, dst):
        return [e for e in self.edges if (e.src, e.dst) == (src, dst)]

    def add_subgraph(self, graph):
        self.subgraphs.append(graph)

    def write(self, path, format):
        self.written = (path, format)


class _Item:
    def __init__(self, *ids, **attrs):
        self.ids, self.attrs = ids, dict(attrs)
        self.src, self.dst = (ids + (None, None))[:2]

    def set(self, key, value):
        self.attrs[key] = value


class _FakePydot:
    PydotException = RuntimeError

    class Dot(_Graph):
        def __init__(self, **attrs):
            super().__init__("dot", **attrs)

        def create(self):
            return b""

    class Cluster(_Graph):
        def __init__(self, **attrs):
            super().__init__("cluster", **attrs)

    Node = Edge = _Item


def _describe(graph):
    """The recorded graph with object ids replaced by node positions."""
    ids = {}

    def collect(g):
        for n in g.nodes:
            ids[n.ids[0]] = len(ids)
        for sub in g.subgraphs:
            collect(sub)

    def render(g):
        return {
            "kind": g.kind,
            "attrs": {k: v for k, v in g.attrs.items() if k != "graph_name"},
            "nodes": [n.attrs for n in g.nodes],
            "edges": sorted((ids[e.src], ids[e.dst], e.attrs["penwidth"]) for e in g.edges),
            "subgraphs": [render(s) for s in g.subgraphs],
            "written": g.written,
        }

    collect(graph)
    return render(graph)


def _models(k):
    k.utils.set_random_seed(0)
    # Every name explicit: auto-names depend on what else the process has built.
    inner = k.Sequential(
        [
            k.Input((4,), name="inner_in"),
            k.layers.Dense(3, activation="relu", name="i1"),
            k.layers.Dense(2, name="i2"),
        ],
        name="inner",
    )
    a = k.Input((4,), name="a")
    b = k.Input((2,), name="b")
    h = k.layers.Dense(4, activation="tanh", name="d1")(a)
    frozen = k.layers.Dense(2, name="frozen")
    frozen.trainable = False
    y = k.layers.Concatenate(name="cat")([inner(h), frozen(b), b])
    functional = k.Model([a, b], k.layers.Dense(1, activation="sigmoid", name="out")(y), name="f")
    sequential = k.Sequential(
        [
            k.Input((5,), name="s_in"),
            k.layers.Dense(3, name="s1"),
            k.layers.Dropout(0.1, name="s2"),
        ],
        name="s",
    )
    return {"functional": functional, "sequential": sequential}


OPTIONS = [
    {},
    {"show_shapes": True, "show_dtype": True, "show_trainable": True},
    {"show_layer_activations": True, "show_layer_names": False, "rankdir": "LR", "dpi": 96},
    {"expand_nested": True, "show_shapes": True},
]


@pytest.mark.parametrize("options", OPTIONS, ids=lambda o: "-".join(o) or "defaults")
def test_model_to_dot_matches_keras(monkeypatch, options):
    keras = require("keras")
    from keras.src.utils import model_visualization

    for module in (visualization, model_visualization):
        monkeypatch.setattr(module, "pydot", _FakePydot)
    ours, theirs = _models(keratron), _models(keras)
    for name in ours:
        got = _describe(keratron.utils.model_to_dot(ours[name], **options))
        assert got == _describe(keras.utils.model_to_dot(theirs[name], **options)), name
        assert got["nodes"], name


def test_plot_model_writes_through_pydot(monkeypatch, tmp_path):
    monkeypatch.setattr(visualization, "pydot", _FakePydot)
    written = []
    monkeypatch.setattr(_FakePydot.Dot, "write", lambda self, p, format: written.append(format))
    model = _models(keratron)["sequential"]
    for name in ("m.png", "m.svg", "m"):
        keratron.utils.plot_model(model, to_file=str(tmp_path / name))
    assert written == ["png", "svg", "png"]
    with pytest.raises(ValueError, match="layer_range"):
        keratron.utils.plot_model(model, layer_range=["a", "b"])


def test_without_pydot_raises_as_keras(monkeypatch):
    keras = require("keras")
    from keras.src.utils import model_visualization

    monkeypatch.delitem(sys.modules, "IPython.core.magics.namespace", raising=False)
    messages = []
    for module, k in ((visualization, keratron), (model_visualization, keras)):
        monkeypatch.setattr(module, "pydot", None)
        model = _models(k)["sequential"]
        for fn in (k.utils.plot_model, k.utils.model_to_dot):
            with pytest.raises(ImportError) as err:
                fn(model)
            messages.append(str(err.value))
    assert messages[:2] == messages[2:]
    assert "pip install pydot" in messages[0]
    unbuilt = keratron.Sequential([keratron.layers.Dense(2)])
    with pytest.raises(ValueError, match="not yet been built"):
        keratron.utils.model_to_dot(unbuilt)


def test_without_graphviz_raises_as_keras(monkeypatch):
    keras = require("keras")
    from keras.src.utils import model_visualization

    class NoGraphviz(_FakePydot):
        class Dot(_FakePydot.Dot):
            def create(self):
                raise OSError("dot not found")

    monkeypatch.delitem(sys.modules, "IPython.core.magics.namespace", raising=False)
    messages = []
    for module, k in ((visualization, keratron), (model_visualization, keras)):
        monkeypatch.setattr(module, "pydot", NoGraphviz)
        with pytest.raises(ImportError) as err:
            k.utils.plot_model(_models(k)["sequential"])
        messages.append(str(err.value))
    assert messages[0] == messages[1] and "graphviz" in messages[0]
