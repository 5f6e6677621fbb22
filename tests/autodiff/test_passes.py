"""The compiler knows primitives by their fields, shape rules run no kernel, and a compiled
plan can be read (dump) and debugged (tracebacks show the replay line)."""

import traceback

import numpy as np
import pytest
import torch

import keratron as kt
from keratron.autodiff import passes
from keratron.autodiff.primitive import PRIMITIVES, Primitive, device_route
from keratron.ops import _dispatch, convolution, rnn

ops = kt.ops


@pytest.fixture
def twin_add():
    """A primitive that adds, under another name, with add's compiler fields."""
    add = PRIMITIVES["add"]
    prim = Primitive(
        "test_twin_add",
        torch.add,
        inplace=add.inplace,
        commutative=add.commutative,
        fresh=add.fresh,
    )
    yield prim
    del PRIMITIVES["test_twin_add"]


def test_passes_find_the_inplace_form_by_field_not_name(twin_add):
    x = np.linspace(-1, 1, 6).astype("float32")

    @kt.function
    def f(x):
        return twin_add.bind(ops.exp(x), ops.exp(ops.negative(x)))

    compiled = f.get_concrete_graph(x)
    steps = compiled.dump().splitlines()
    assert any("add_(" in s and "[in place]" in s for s in steps), compiled.dump()
    np.testing.assert_allclose(f(x).numpy(), np.exp(x) + np.exp(-x), rtol=1e-6)

    # The same primitive without the fields: no in-place step.
    twin_add.inplace = None
    g = kt.function(lambda x: twin_add.bind(ops.exp(x), ops.exp(ops.negative(x))))
    plan = g.get_concrete_graph(x).dump()
    assert "add_(" not in plan and "test_twin_add(" in plan, plan


@pytest.mark.parametrize("activation", ["relu", "relu6"])
def test_an_activation_gradient_overwrites_a_dead_incoming_gradient(activation):
    # The gradient reaching the activation is the second convolution's input gradient, read
    # by nothing else: the activation's gradient is written over it.
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((2, 9, 9, 4)) * 4).astype("float32")
    k1 = rng.standard_normal((3, 3, 4, 8)).astype("float32")
    k2 = rng.standard_normal((3, 3, 8, 5)).astype("float32")
    g = rng.standard_normal((2, 5, 5, 5)).astype("float32")

    def step(x, k1, k2, g):
        with kt.GradientTape() as tape:
            tape.watch(x)
            z = ops.conv(getattr(ops, activation)(ops.conv(x, k1)), k2)
            loss = ops.sum(z * g)
        return tape.gradient(loss, x)

    args = [kt.ops.convert_to_tensor(a) for a in (x, k1, k2, g)]
    f = kt.function(step)
    got = f(*args).numpy()
    plan = f.get_concrete_graph(*args).dump()
    assert any(f"_{activation}_grad_(" in s and "[in place]" in s for s in plan.splitlines()), plan
    np.testing.assert_array_equal(got, step(*args).numpy())
    xt = torch.from_numpy(x.astype("float64")).permute(0, 3, 1, 2).requires_grad_()
    act = torch.relu if activation == "relu" else (lambda t: torch.clamp(t, 0, 6))
    w1, w2 = (torch.from_numpy(k.astype("float64")).permute(3, 2, 0, 1) for k in (k1, k2))
    z = torch.nn.functional.conv2d(act(torch.nn.functional.conv2d(xt, w1)), w2)
    (z * torch.from_numpy(g.astype("float64")).permute(0, 3, 1, 2)).sum().backward()
    want = xt.grad.permute(0, 2, 3, 1).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


def test_epilogue_fusion_finds_the_linear_primitive_by_field():
    x = np.random.default_rng(0).normal(size=(3, 4)).astype("float32")
    w = kt.Variable(np.random.default_rng(1).normal(size=(4, 5)).astype("float32"))
    f = kt.function(lambda x: ops.relu(ops.matmul(x, w)))
    plan = f.get_concrete_graph(x).dump()
    assert "relu(" not in plan and "activation='relu'" in plan, plan
    np.testing.assert_allclose(f(x).numpy(), np.maximum(x @ w.numpy(), 0), rtol=1e-5, atol=1e-6)


def _raise(*args, **kwargs):
    raise AssertionError("a shape rule ran a device route")


@pytest.mark.parametrize(
    "prim, avals, params",
    [
        (
            convolution.conv_p,
            [((2, 9, 7, 3), torch.float32), ((3, 3, 3, 5), torch.float32), None],
            dict(
                strides=(1, 1),
                padding=((1, 1), (1, 1)),
                dilation=(1, 1),
                groups=1,
                activation="relu",
            ),
        ),
        (
            rnn.lstm_onednn_p,
            [
                ((2, 5, 3), torch.float32),
                ((3, 16), torch.float32),
                ((4, 16), torch.float32),
                ((16,), torch.float32),
                ((2, 4), torch.float32),
                ((2, 4), torch.float32),
            ],
            dict(reverse=False),
        ),
    ],
    ids=["conv", "lstm_onednn"],
)
def test_shape_rules_never_run_a_device_route(prim, avals, params, monkeypatch):
    for device in list(prim.routes):
        monkeypatch.setitem(prim.routes, device, _raise)
    outs = prim.abstract_eval(avals, params)
    assert outs[0][0][0] == 2


def test_tracing_lstm_sequence_runs_no_onednn(monkeypatch):
    for prim in (rnn.lstm_onednn_p, rnn.lstm_onednn_grad_p):
        monkeypatch.setitem(prim.routes, "cpu", _raise)
    x = np.ones((2, 5, 3), "float32")
    k, rk = np.ones((3, 16), "float32"), np.ones((4, 16), "float32")
    h = np.zeros((2, 4), "float32")
    f = kt.function(lambda x: ops.lstm_sequence(x, k, rk, None, h, h)[0])
    f.get_concrete_graph(x)  # traced, not run


def test_lstm_reference_and_cpu_route_agree_forward_and_backward():
    rng = np.random.default_rng(0)

    def t(*shape):
        return torch.from_numpy(rng.normal(size=shape).astype("float32") * 0.5)

    x, k, rk, b, h0, c0 = t(3, 7, 5), t(5, 24), t(6, 24), t(24), t(3, 6), t(3, 6)
    for reverse in (False, True):
        ref = rnn.lstm_onednn_p.impl(x, k, rk, b, h0, c0, reverse)
        got = rnn.lstm_onednn_p.routes["cpu"](x, k, rk, b, h0, c0, reverse)
        for a, c in zip(ref[:3], got[:3]):
            torch.testing.assert_close(a, c, rtol=1e-5, atol=1e-5)
        g_all, g_h, g_c = t(3, 7, 6), t(3, 6), t(3, 6)
        args = (g_all, g_h, g_c, x, k, rk, b, h0, c0)
        ref_g = rnn.lstm_onednn_grad_p.impl(*args, *ref, reverse)
        got_g = rnn.lstm_onednn_grad_p.routes["cpu"](*args, *got, reverse)
        for a, c in zip(ref_g, got_g):
            torch.testing.assert_close(a, c, rtol=1e-4, atol=1e-4)


def test_traceback_shows_the_replay_line():
    state = {"fail": False}

    def impl(x):
        if state["fail"] and not x.is_meta:
            raise RuntimeError("deliberate failure")
        return x * 2

    prim = Primitive("test_flaky", impl)
    try:
        f = kt.function(lambda x: ops.exp(prim.bind(ops.exp(x))))
        x = np.ones(3, "float32")
        f(x)
        state["fail"] = True
        with pytest.raises(RuntimeError, match="deliberate") as info:
            f(x)
    finally:
        del PRIMITIVES["test_flaky"]
    frames = traceback.extract_tb(info.value.__traceback__)
    replay = [fr for fr in frames if fr.filename.startswith("<keratron.function replay")]
    assert replay, [fr.filename for fr in frames]
    assert replay[-1].line and "= f" in replay[-1].line, replay[-1]


def test_dump_lists_one_line_per_step_with_frees():
    x = np.ones((2, 3), "float32")
    f = kt.function(lambda x: ops.sum(ops.exp(x) * 3.0))
    compiled = f.get_concrete_graph(x)
    text = compiled.dump()
    lines = text.splitlines()
    assert lines[0].startswith("inputs: v")
    assert lines[-1].startswith("outputs: v")
    steps = [line for line in lines if line[:4].strip().isdigit()]
    assert len(steps) == len(compiled.steps) == compiled.num_nodes
    assert steps[0].split()[0] == "0" and "exp(" in steps[0]
    assert any("sum(" in s for s in steps)
    assert any("free v" in s for s in steps), text


def test_device_route_validates_its_arguments():
    with pytest.raises(TypeError, match="Primitive"):
        device_route("conv")
    with pytest.raises(ValueError, match="device"):
        device_route(convolution.conv_p, "tpu")


def _trace(fn, *shapes):
    """The graph of fn over float32 placeholders, with its output items and input slots."""
    from keratron.autodiff.tracing import Trace

    trace = Trace()
    tracers = [trace.placeholder(s, torch.float32) for s in shapes]
    with trace:
        out = fn(*tracers)
    graph = trace.graph
    items = [("slot", graph.slot(o)) for o in kt.autodiff.tree.flatten(out)]
    return graph, items, [graph.slot(t) for t in tracers]


def test_simplify_drops_shape_and_sign_round_trips():
    from keratron.ops import elementwise, shaping

    def f(x):
        return (
            ops.reshape(ops.reshape(x, (3, 2)), (2, 3)),  # a reshape of a reshape back: x
            elementwise.cast_p.bind(x, dtype=torch.float32),  # a cast to its own dtype
            shaping.broadcast_to_p.bind(x, shape=(2, 3)),  # a broadcast to its own shape
            ops.negative(ops.negative(x)),
            ops.subtract(x, 0.0),
        )

    graph, items, (x,) = _trace(f, (2, 3))
    items = passes.dce(graph, passes.simplify(graph, items))
    assert items == [("slot", x)] * 5 and graph.nodes == [], [n.prim for n in graph.nodes]


def test_simplify_drops_a_cast_back_from_an_exact_widening_only():
    from keratron.ops import elementwise

    cast = elementwise.cast_p.bind

    def f(x):
        half = cast(x, dtype=torch.bfloat16)
        return (
            cast(cast(half, dtype=torch.float32), dtype=torch.bfloat16),  # exact: half
            cast(cast(x, dtype=torch.float64), dtype=torch.float32),  # exact: x
            cast(cast(x, dtype=torch.bfloat16), dtype=torch.float32),  # rounds: kept
            cast(cast(x, dtype=torch.int32), dtype=torch.float32),  # truncates: kept
        )

    graph, items, (x,) = _trace(f, (2, 3))
    items = passes.dce(graph, passes.cse(graph, passes.simplify(graph, items)))
    half = items[0][1]
    assert items[1] == ("slot", x) and graph.avals[half][1] == torch.bfloat16
    assert sorted(str(n.params["dtype"]) for n in graph.nodes) == [
        "torch.bfloat16",
        "torch.float32",
        "torch.float32",
        "torch.int32",
    ]
    data = np.array([[0.1, -2.7, 3.3], [1e-3, 7.9, -0.5]], "float32")
    got = kt.function(f)(data)
    rounded = torch.tensor(data).bfloat16()
    np.testing.assert_array_equal(np.asarray(got[1]), data)
    np.testing.assert_array_equal(np.asarray(got[2]), rounded.float().numpy())
    np.testing.assert_array_equal(np.asarray(got[3]), data.astype("int32").astype("float32"))


def test_group_casts_joins_casts_of_one_kind_but_never_across_an_effect():
    from keratron.ops import elementwise

    cast = elementwise.cast_p.bind
    start = np.array([1.5, -2.25, 3.0], "float32")
    v = kt.Variable(start)

    def f(x):
        before = cast(v, dtype=torch.bfloat16)  # v as the call finds it
        xs = cast(x, dtype=torch.bfloat16)
        v.assign(ops.add(ops.multiply(v, 3.0), 0.001))
        after = cast(v, dtype=torch.bfloat16)  # the assigned value
        ys = cast(ops.exp(x), dtype=torch.bfloat16)
        chain = cast(cast(x, dtype=torch.float16), dtype=torch.float32)  # a cast of a cast
        return before, xs, after, ys, chain

    m = kt.Variable(np.array([[1.5, -2.25], [3.0, 0.1]], "float32"))

    def h(x):
        view = cast(ops.transpose(m, (1, 0)), dtype=torch.bfloat16)  # a view of m, cast
        xs = cast(x, dtype=torch.bfloat16)
        m.assign(ops.multiply(m, 3.0))
        ys = cast(ops.exp(x), dtype=torch.bfloat16)
        return view, xs, ys

    def g(x, z):
        # x's cast to float16 groups with q's where b first reads it; b, a cast of that cast,
        # would otherwise group with z's cast, which is read first, and run before it.
        a = cast(x, dtype=torch.float16)
        e = ops.exp(cast(z, dtype=torch.float32))
        q = cast(ops.negative(x), dtype=torch.float16)
        b = cast(a, dtype=torch.float32)
        return e, q, b

    compiled = kt.function(f)
    data = np.array([0.1, -2.7, 3.3], "float32")
    got = [np.asarray(kt.ops.cast(t, "float32")) for t in compiled(data)]
    bf16 = lambda a: torch.tensor(a).bfloat16().float().numpy()  # noqa: E731
    new_v = (torch.tensor(start) * 3.0 + 0.001).numpy()
    np.testing.assert_array_equal(got[0], bf16(start))
    np.testing.assert_array_equal(got[1], bf16(data))
    np.testing.assert_array_equal(got[2], bf16(new_v))
    np.testing.assert_array_equal(got[3], bf16(torch.exp(torch.tensor(data)).numpy()))
    np.testing.assert_array_equal(got[4], torch.tensor(data).half().float().numpy())
    np.testing.assert_array_equal(v.numpy(), new_v)

    v.assign(start)
    lines = compiled.get_concrete_graph(data).dump().splitlines()
    groups = [k for k, line in enumerate(lines) if "cast_group(" in line]
    (assign,) = [k for k, line in enumerate(lines) if "assign:" in line]
    assert len(groups) == 2 and groups[0] < assign < groups[1], "\n".join(lines)
    assert all(lines[k].count(", v") == 2 for k in groups), "\n".join(lines)  # two casts each
    assert sum("= cast(" in line for line in lines) == 2  # the chain's two casts stay casts

    m_start = m.numpy()
    view, xs, ys = kt.function(h)(data)
    exp = torch.exp(torch.tensor(data)).numpy()
    np.testing.assert_array_equal(kt.ops.cast(view, "float32").numpy(), bf16(m_start.T))
    np.testing.assert_array_equal(kt.ops.cast(ys, "float32").numpy(), bf16(exp))

    z = np.array([0.5, 1.25, -3.0], "float16")
    e, q, b = kt.function(g)(data, z)
    np.testing.assert_allclose(np.asarray(e), np.exp(z.astype("float32")), rtol=1e-6)
    np.testing.assert_array_equal(np.asarray(q), (-data).astype("float16"))
    np.testing.assert_array_equal(np.asarray(b), data.astype("float16").astype("float32"))


def test_simplify_drops_sums_over_size_one_axes_only():
    def f(x):
        return (
            ops.sum(x, axis=1, keepdims=True),  # (2, 1, 3): a sum of one element
            ops.sum(ops.sum(x), axis=None),  # the second sum reads a 0-d value
            ops.sum(x, axis=0, keepdims=True),  # (2 rows): a real sum, kept
        )

    graph, items, (x,) = _trace(f, (2, 1, 3))
    items = passes.dce(graph, passes.simplify(graph, items))
    assert items[0] == ("slot", x)
    assert [n.prim.name for n in graph.nodes] == ["sum", "sum"]  # the full sum, axis-0 sum
    assert items[1] == ("slot", graph.nodes[0].outputs[0])
    data = np.arange(6, dtype="float32").reshape(2, 1, 3) - 2.5
    compiled = kt.function(f)(data)
    for got, want in zip(compiled, (data, data.sum(), data.sum(axis=0, keepdims=True))):
        np.testing.assert_array_equal(np.asarray(got), want)


def test_fold_constants_computes_fills_from_the_input_type():
    from keratron.ops import elementwise

    graph, items, _ = _trace(
        lambda x: (elementwise.ones_like_p.bind(x), elementwise.zeros_like_p.bind(x)), (2, 3)
    )
    items = passes.fold_constants(graph, items)
    assert graph.nodes == []
    ones, zeros = (graph.consts[s] for _, s in items)
    like = dict(device=ones.device)  # the test device's
    assert torch.equal(ones, torch.ones(2, 3, **like))
    assert torch.equal(zeros, torch.zeros(2, 3, **like))


def test_simplify_runs_the_rule_a_primitive_carries_whatever_its_name():
    mul = PRIMITIVES["multiply"]
    twin = Primitive("test_twin_multiply", torch.mul, simplify=mul.simplify)
    try:
        graph, items, (x,) = _trace(lambda x: twin.bind(x, ops.ones((2, 3))), (2, 3))
        assert passes.simplify(graph, items) == [("slot", x)]
        twin.simplify = None
        graph, items, (x,) = _trace(lambda x: twin.bind(x, ops.ones((2, 3))), (2, 3))
        assert passes.simplify(graph, items) != [("slot", x)]
    finally:
        del PRIMITIVES["test_twin_multiply"]


@pytest.mark.parametrize("linear", ["matmul", "conv"])
def test_an_epilogue_is_not_folded_into_a_value_another_op_still_reads(linear):
    # linear -> per-channel scale -> bias: both fold into the call; the biased value is read
    # by relu *and* by the add, so relu must not become the call's epilogue (it did: the
    # fold counted the readers of the call's own result, 1, not those of the value it
    # replaced, and the add then read relu'd values; NASNet's cells are built this way).
    rng = np.random.default_rng(3)
    if linear == "matmul":
        x = rng.standard_normal((8, 5)).astype("float32")
        k = rng.standard_normal((5, 6)).astype("float32")

        def call(x):
            return ops.matmul(x, k)
    else:
        x = rng.standard_normal((2, 6, 6, 3)).astype("float32")
        k = rng.standard_normal((3, 3, 3, 6)).astype("float32")

        def call(x):
            return ops.conv(x, k)

    s = rng.uniform(0.5, 1.5, 6).astype("float32")
    b = rng.standard_normal(6).astype("float32")

    def f(x):
        z = call(x) * s + b
        return ops.relu(z) + z, ops.relu(call(x) * s) - call(x) * s

    got = kt.function(f)(x)
    want = f(x)
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-5, atol=1e-5)


def test_a_compiled_plan_calls_the_cpu_route_as_the_dispatcher_would():
    with kt.config.device("cpu"):  # on any test device: the route under test is the CPU's
        _check_the_cpu_route_in_a_plan()


def _check_the_cpu_route_in_a_plan():
    calls = []
    prim = Primitive("test_routed_scale", lambda x, factor: x * factor)

    @device_route(prim, "cpu")
    def _route(x, factor):
        calls.append("route")
        if factor == 3.0:
            raise NotImplementedError("not this factor")  # the reference runs instead
        return x * factor + 0.0

    try:
        x = np.arange(4, dtype="float32")
        for factor, want in ((2.0, x * 2), (3.0, x * 3)):
            f = kt.function(lambda x, factor=factor: prim.bind(x, factor=factor))
            calls.clear()
            np.testing.assert_array_equal(np.asarray(f(x)), want)  # traced and replayed
            n = len(calls)
            np.testing.assert_array_equal(np.asarray(f(x)), want)  # replayed
            assert calls[n:] == ["route"], calls
        # Values on another device (meta here) go through the dispatcher, not the route.
        step, before = _dispatch.bind(prim, {"factor": 2.0}), len(calls)
        assert step(torch.empty(3, device="meta")).is_meta and len(calls) == before
        # Under the "triton" backend the plan keeps the dispatcher (interpreted kernels).
        node = type("N", (), {"prim": prim, "params": {"factor": 2.0}, "inputs": [0]})()
        graph = type("G", (), {"avals": {0: ((4,), torch.float32)}})()
        kt.config.set_kernel_backend("triton")
        try:
            assert passes._kernel_call(graph, node).__name__ == "<lambda>"
        finally:
            kt.config.set_kernel_backend(None)
        assert passes._kernel_call(graph, node).__name__ == "call"
        # A primitive's `cpu_step` gets the step's input avals and the general call, and may
        # decline (None: the general call stays).
        seen = []
        prim.cpu_step = lambda avals, params, general: seen.append((avals, params, general))
        assert passes._kernel_call(graph, node).__name__ == "call"
        assert seen[0][:2] == ([((4,), torch.float32)], {"factor": 2.0})
        assert seen[0][2].__name__ == "call"
    finally:
        del PRIMITIVES["test_routed_scale"]


def test_an_optimize_pass_registered_late_still_runs_before_the_late_passes(monkeypatch):
    from keratron.ops import elementwise

    monkeypatch.setattr(passes, "PASSES", list(passes.PASSES))
    monkeypatch.setattr(passes, "LATE_PASSES", list(passes.LATE_PASSES))

    def rewrite(graph, outputs):
        return outputs

    def late_rewrite(graph, outputs):
        return outputs

    passes.register_pass(rewrite)
    passes.register_pass(late_rewrite, stage="late")
    names = [p.__name__ for p in passes.PASSES]
    assert names[-4:] == ["rewrite", "group_casts", "late_rewrite", "dce"]
    assert passes.LATE_PASSES == [elementwise.group_casts, late_rewrite]
    with pytest.raises(ValueError, match="'optimize', 'late' or 'prelude'"):
        passes.register_pass(rewrite, stage="early")
