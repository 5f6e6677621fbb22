"""keratron.function: tracing, symbolic gradients, graph passes, replay."""

import gc
import warnings

import numpy as np
import pytest

import keratron as kt
from keratron.autodiff import passes
from keratron.autodiff.function import function
from tests.gradcheck import check_grads

ops = kt.ops


def _mlp_step_body(w, b, x, y, lr=0.1):
    with kt.GradientTape() as tape:
        h = ops.tanh(ops.matmul(x, w) + b)
        loss = ops.mean(ops.square(h - y))
    gw, gb = tape.gradient(loss, [w, b])
    w.assign_sub(gw * lr)
    b.assign_sub(gb * lr)
    return loss, gw


def _vars(seed=0):
    rng = np.random.default_rng(seed)
    return (
        kt.Variable(rng.standard_normal((4, 3)).astype("float32"), name="w"),
        kt.Variable(rng.standard_normal(3).astype("float32"), name="b"),
    )


def _data(seed=1, n=5):
    rng = np.random.default_rng(seed)
    return (
        kt.convert_to_tensor(rng.standard_normal((n, 4)).astype("float32")),
        kt.convert_to_tensor(rng.standard_normal((n, 3)).astype("float32")),
    )


def test_traced_step_equals_eager_values_and_gradients():
    w1, b1 = _vars()
    w2, b2 = _vars()
    x, y = _data()
    step = function(lambda x, y: _mlp_step_body(w1, b1, x, y))
    for _ in range(4):
        l1, g1 = step(x, y)
        l2, g2 = _mlp_step_body(w2, b2, x, y)
        np.testing.assert_allclose(l1.numpy(), l2.numpy(), rtol=1e-6)
        np.testing.assert_allclose(g1.numpy(), g2.numpy(), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(w1.numpy(), w2.numpy(), rtol=1e-6)
    assert step.trace_count == 1


def test_body_runs_once_per_signature():
    calls = []

    @function
    def f(x, scale):
        calls.append(1)
        return ops.multiply(x, scale)

    a = kt.convert_to_tensor(np.ones((2, 3), "float32"))
    for _ in range(3):
        f(a, 2.0)
    assert len(calls) == 1 and f.trace_count == 1
    f(kt.convert_to_tensor(np.ones((4, 3), "float32")), 2.0)  # new shape
    f(a, 3.0)  # new Python constant
    assert len(calls) == 3 and f.trace_count == 3
    np.testing.assert_allclose(f(a, 3.0).numpy(), np.full((2, 3), 3.0))
    assert f.trace_count == 3


def test_retrace_warning_names_the_changing_argument():
    @function
    def f(x, n):
        return ops.multiply(x, n)

    x = kt.convert_to_tensor(np.ones(3, "float32"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for n in range(8):
            f(x, float(n))
    messages = [str(w.message) for w in caught]
    assert any("'n' keeps changing" in m for m in messages), messages


def test_variable_updates_take_effect_every_call():
    v = kt.Variable(0.0)

    @function
    def inc(x):
        v.assign_add(x)
        return v * 1.0

    one = kt.convert_to_tensor(1.0)
    outs = [float(inc(one)) for _ in range(5)]
    assert outs == [1.0, 2.0, 3.0, 4.0, 5.0]
    assert float(v.numpy()) == 5.0


def test_reads_after_an_assignment_see_the_new_value():
    v = kt.Variable(1.0)

    @function
    def f():
        before = v * 2.0
        v.assign(10.0)
        after = v * 2.0  # same op and input variable: must not be merged with `before`
        return before, after

    before, after = f()
    assert float(before) == 2.0 and float(after) == 20.0


def test_variables_created_on_first_trace_only():
    holder = []

    @function
    def f(x):
        holder.append(kt.Variable(np.ones(x.shape, "float32")))
        return x + holder[-1]

    f(kt.convert_to_tensor(np.ones(2, "float32")))
    with pytest.raises(ValueError, match="created variables on a call after its first trace"):
        f(kt.convert_to_tensor(np.ones(3, "float32")))


def test_python_if_on_traced_value_raises():
    @function
    def f(x):
        if ops.sum(x) > 0:
            return x
        return -x

    with pytest.raises(TypeError, match="Python control flow that depends on tensor values"):
        f(kt.convert_to_tensor(np.ones(2, "float32")))


def test_python_control_flow_on_static_values_is_unrolled():
    @function
    def f(x, n):
        for _ in range(n):
            x = x * 2.0
        return x

    out = f(kt.convert_to_tensor(np.ones(2, "float32")), 3)
    np.testing.assert_allclose(out.numpy(), [8.0, 8.0])


def test_dropout_draws_fresh_masks_each_call_and_each_site():
    gen = kt.random.SeedGenerator(7)

    @function
    def f(x):
        return kt.random.dropout(x, 0.5, seed=gen), kt.random.dropout(x, 0.5, seed=gen)

    x = kt.convert_to_tensor(np.ones((64,), "float32"))
    a1, b1 = f(x)
    a2, _ = f(x)
    assert not np.array_equal(a1.numpy(), b1.numpy())
    assert not np.array_equal(a1.numpy(), a2.numpy())


def _count_nodes_through_passes(fn, *args):
    """Traces fn and returns the node count before and after each pass."""
    from keratron.autodiff.tracing import Trace

    trace = Trace()
    graph = trace.graph
    tracers = [trace.placeholder(a._value.shape, a._value.dtype) for a in args]
    with trace:
        out = fn(*tracers)
    items = [("slot", graph.slot(o)) for o in kt.autodiff.tree.flatten(out)]
    counts = [("traced", len(graph.nodes))]
    for p in passes.PASSES:
        items = p(graph, items)
        counts.append((p.__name__, len(graph.nodes)))
    return dict(counts)


def test_pass_node_counts_on_a_fixed_graph():
    def f(x):
        y = ops.transpose(ops.transpose(x, (1, 0)), (1, 0))  # simplify: both go
        z = ops.add(ops.multiply(y, 1.0), 0.0)  # simplify: both go
        a = ops.exp(z)
        b = ops.exp(z)  # cse: merged into a
        ops.sin(x)  # dce: unused
        return ops.add(a, b)

    x = kt.convert_to_tensor(np.ones((2, 3), "float32"))
    counts = _count_nodes_through_passes(f, x)
    assert counts == {
        "traced": 8,
        "simplify": 5,  # the first transpose (now unused), exp, exp, sin, add
        "cse": 4,
        "fold_constants": 4,
        "resimplify": 4,
        "fuse_epilogues": 4,
        "gate_pooled_gradients": 4,
        "sum_pooled_gradients": 4,
        "pool_before_activation": 4,
        "fold_pads_into_convs": 4,
        "fuse_conv_max_pool": 4,
        "group_casts": 4,
        "dce": 2,  # exp, add
    }, counts


def test_epilogue_fusion_folds_bias_and_activation_into_matmul():
    def f(x, w, b):
        return ops.relu(ops.add(ops.matmul(x, w), b))

    x = kt.convert_to_tensor(np.ones((2, 3), "float32"))
    w = kt.convert_to_tensor(np.ones((3, 4), "float32"))
    b = kt.convert_to_tensor(np.ones(4, "float32"))
    counts = _count_nodes_through_passes(f, x, w, b)
    assert counts["traced"] == 3 and counts["fuse_epilogues"] == 1
    compiled = function(f)
    np.testing.assert_allclose(compiled(x, w, b).numpy(), np.full((2, 4), 4.0))


def test_constant_only_ops_are_computed_at_trace_time():
    @function
    def f(x):
        c = ops.exp(ops.ones((3,)))  # no tracer input: a constant
        return x + c

    cf = f.get_concrete_graph(kt.convert_to_tensor(np.zeros(3, "float32")))
    assert [n.prim.name for n in cf.graph.nodes] == ["add"]


def test_replay_never_binds_primitives_or_records_on_tapes(monkeypatch):
    w, b = _vars()
    x, y = _data()
    step = function(lambda x, y: _mlp_step_body(w, b, x, y))
    step(x, y)  # trace
    from keratron.autodiff import primitive, tape

    calls = []
    monkeypatch.setattr(primitive.Primitive, "bind", lambda *a, **k: calls.append(a))
    monkeypatch.setattr(tape, "record_primitive", lambda *a, **k: calls.append(a))
    step(x, y)
    assert calls == []


def test_traced_step_grows_no_memory():
    w, b = _vars()
    x, y = _data(n=64)
    step = function(lambda x, y: _mlp_step_body(w, b, x, y, lr=1e-3))
    for _ in range(20):
        step(x, y)
    gc.collect()

    def rss():
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * 4096

    before_objects = len(gc.get_objects())
    before = rss()
    for _ in range(1000):
        step(x, y)
    gc.collect()
    assert len(gc.get_objects()) <= before_objects + 50
    assert rss() - before < 8 * 2**20


def test_second_derivative_inside_function():
    @function
    def f(x):
        with kt.GradientTape() as outer:
            outer.watch(x)
            with kt.GradientTape() as inner:
                inner.watch(x)
                y = ops.tanh(x)
            g = inner.gradient(y, x)
        return outer.gradient(g, x)

    x = np.array([0.3, -1.2], "float32")
    t = np.tanh(x)
    np.testing.assert_allclose(f(kt.convert_to_tensor(x)).numpy(), -2 * t * (1 - t**2), rtol=1e-5)


def test_batchnorm_and_relu6_fold_into_the_conv_at_inference():
    rng = np.random.default_rng(0)
    model = kt.Sequential(
        [
            kt.Input((9, 7, 3)),
            kt.layers.Conv2D(5, 3, use_bias=False),
            kt.layers.BatchNormalization(),
            kt.layers.ReLU(6.0),
            kt.layers.DepthwiseConv2D(3, padding="same", use_bias=True),
            kt.layers.BatchNormalization(),
            kt.layers.Activation("relu"),
        ]
    )
    for layer in model.layers:
        layer.set_weights(
            [w + rng.uniform(0.5, 2.0, w.shape).astype("float32") for w in layer.get_weights()]
        )
    x = rng.standard_normal((2, 9, 7, 3)).astype("float32")
    eager = model(x, training=False).numpy()
    np.testing.assert_allclose(model.predict(x, verbose=0), eager, rtol=1e-5, atol=1e-5)
    step = function(lambda t: model(t, training=False))
    cf = step.get_concrete_graph(kt.convert_to_tensor(x))
    big = [n for n in cf.graph.nodes if n.outputs and cf.graph.avals[n.outputs[0]][0][0] == 2]
    assert [n.prim.name for n in big] == ["conv", "conv"], [n.prim.name for n in big]
    assert [n.params["activation"] for n in big] == ["relu6", "relu"]
    # The folding follows weight updates: the scaled kernel is recomputed on each call.
    model.layers[1].moving_variance.assign(np.full(5, 4.0, "float32"))
    np.testing.assert_allclose(
        step(kt.convert_to_tensor(x)).numpy(),
        model(x, training=False).numpy(),
        rtol=1e-5,
        atol=1e-5,
    )


def test_simplify_merges_exact_constant_scalings_and_constant_selects():
    def f(x):
        y = ops.negative(ops.multiply(ops.multiply(x, 2.0), 0.3))  # one multiply by -0.6
        z = ops.multiply(ops.multiply(x, 0.3), 0.7)  # neither factor a power of two: kept
        w = ops.where(ops.ones((), dtype="bool"), x, 0.0)  # an all-true select is x
        return y, z, w

    x = kt.convert_to_tensor(np.array([1.5, -2.25, 3.1], "float32"))
    counts = _count_nodes_through_passes(f, x)
    assert counts["traced"] == 6 and counts["dce"] == 3, counts
    got = function(f)(x)
    for g, w in zip(got, f(x)):
        np.testing.assert_array_equal(g.numpy(), w.numpy())


def test_variable_only_work_runs_once_until_a_variable_changes():
    w, b = _vars()
    x, _ = _data()

    def f(x):
        scaled = ops.multiply(ops.transpose(w, (1, 0)), 2.0)  # reads w only: the prelude
        return ops.matmul(x, ops.transpose(scaled, (1, 0))) + b, scaled

    def eager():
        return x.numpy() @ (2.0 * w.numpy()) + b.numpy()

    fn = function(f)
    compiled = fn.get_concrete_graph(x)
    assert compiled.prelude is not None and compiled.prelude.variables == [w]
    out, scaled = fn(x)
    cached = compiled._pre[0]
    np.testing.assert_allclose(out.numpy(), eager(), rtol=1e-5, atol=1e-5)
    out, _ = fn(x)
    assert compiled._pre[0] is cached  # reused: w did not change
    # The returned prelude value is a copy: writing into it leaves the cache intact.
    scaled._value.fill_(0.0)
    np.testing.assert_allclose(fn(x)[0].numpy(), eager(), rtol=1e-5, atol=1e-5)
    # Every way a variable changes invalidates what was computed from it.
    for change in (
        lambda: w.assign(w.numpy() + 1.0),
        lambda: w.assign_add(np.ones((4, 3), "float32")),
        lambda: w._value.mul_(0.5),
        lambda: setattr(w, "_value", w._value.clone() - 1.0),
    ):
        change()
        np.testing.assert_allclose(fn(x)[0].numpy(), eager(), rtol=1e-5, atol=1e-5)
        assert compiled._pre[0] is not cached
        cached = compiled._pre[0]
    b.assign(b.numpy() + 3.0)  # b is read after the prelude: nothing to invalidate
    np.testing.assert_allclose(fn(x)[0].numpy(), eager(), rtol=1e-5, atol=1e-5)
    assert compiled._pre[0] is cached


def test_a_function_that_writes_variables_has_no_prelude():
    w, b = _vars()
    x, y = _data()
    step = function(lambda x, y: _mlp_step_body(w, b, x, y))
    assert step.get_concrete_graph(x, y).prelude is None


def test_predict_follows_new_weights_with_batchnorm_folded_once():
    rng = np.random.default_rng(2)
    model = kt.Sequential(
        [
            kt.Input((6, 5, 3)),
            kt.layers.Conv2D(4, 3, use_bias=False),
            kt.layers.BatchNormalization(),
            kt.layers.Flatten(),
            kt.layers.Dense(2),
        ]
    )
    x = rng.standard_normal((3, 6, 5, 3)).astype("float32")
    first = model.predict(x, verbose=0)
    bn = model.layers[1]
    bn.set_weights([w + 0.5 for w in bn.get_weights()])
    second = model.predict(x, verbose=0)
    assert not np.allclose(first, second)
    np.testing.assert_allclose(second, model(x).numpy(), rtol=1e-5, atol=1e-5)
    model.compile("adam", "mse")
    model.fit(x, np.ones((3, 2), "float32"), verbose=0)
    np.testing.assert_allclose(model.predict(x, verbose=0), model(x).numpy(), rtol=1e-5, atol=1e-5)


def test_inference_convolutions_read_their_kernels_in_the_cpu_layout_once():
    import torch

    from keratron.ops.convolution import conv_kernel_layout_p

    rng = np.random.default_rng(4)
    k = rng.standard_normal((3, 2, 4, 5))
    laid = conv_kernel_layout_p.bind(kt.convert_to_tensor(k))._value
    np.testing.assert_array_equal(laid.numpy(), k)
    assert laid.permute(3, 2, 0, 1).is_contiguous(memory_format=torch.channels_last)
    check_grads(lambda k: conv_kernel_layout_p.bind(k), [k])

    model = kt.Sequential(
        [
            kt.Input((7, 6, 3)),
            kt.layers.Conv2D(4, 3),
            kt.layers.Conv2D(2, 1),  # 1x1: the GEMM reads the relaid kernel as a transpose
        ]
    )
    x = rng.standard_normal((2, 7, 6, 3)).astype("float32")
    np.testing.assert_allclose(model.predict(x, verbose=0), model(x).numpy(), rtol=1e-5, atol=1e-5)
    infer = function(lambda t: model(t, training=False))
    compiled = infer.get_concrete_graph(kt.convert_to_tensor(x))
    names = [n.prim.name for n in compiled.graph.nodes]
    assert names.count("conv_kernel_layout") == 2
    # The 3x3 kernel is prepacked in oneDNN's format for its input; the 1x1 GEMM's is not.
    layouts = [n for n in compiled.graph.nodes if n.prim.name == "conv_kernel_layout"]
    assert [bool(n.params) for n in layouts] == [True, False]
    assert max(i for i, n in enumerate(names) if n == "conv_kernel_layout") < (
        compiled.prelude.n_steps
    )

    def train(t):
        with kt.GradientTape() as tape:
            loss = ops.sum(ops.square(model(t, training=True)))
        grads = tape.gradient(loss, model.trainable_weights)
        for v, g in zip(model.trainable_weights, grads):
            v.assign_sub(0.01 * g)
        return loss

    step = function(train).get_concrete_graph(kt.convert_to_tensor(x))
    assert "conv_kernel_layout" not in [n.prim.name for n in step.graph.nodes if n.prim]

    # The layout follows the kernel backend: a function traced before the backend changed is
    # traced again (the Triton route takes the kernel as the layer stores it).
    before = kt.config.kernel_backend()
    try:
        kt.config.set_kernel_backend("triton")
        compiled = infer.get_concrete_graph(kt.convert_to_tensor(x))
    finally:
        kt.config.set_kernel_backend(before)
    assert infer.trace_count == 2
    assert "conv_kernel_layout" not in [n.prim.name for n in compiled.graph.nodes]


# An activation before a max-pool, and the pool's size, stride and padding.
pooled_activations = pytest.mark.parametrize(
    "activation, pool",
    [("relu", (2, 2, "valid")), ("relu6", (3, 2, "same")), ("relu", (3, 1, "same"))],
    ids=["relu-2x2", "relu6-3x3s2-same", "relu-3x3s1-same"],
)


@pooled_activations
def test_relu_gradient_gate_moves_before_the_max_pool_gradient(activation, pool):
    size, stride, padding = pool
    rng = np.random.default_rng(4)
    # Integers: ties inside pooling windows, and values at 0 and 6 where the gates switch.
    x = kt.convert_to_tensor(rng.integers(-3, 9, (2, 7, 6, 3)).astype("float32"))
    cot = kt.convert_to_tensor(rng.standard_normal((2, 7, 6, 3)).astype("float32"))
    act = ops.relu if activation == "relu" else ops.relu6

    def f(x):
        with kt.GradientTape() as tape:
            tape.watch(x)
            y = ops.max_pool(act(ops.multiply(x, cot)), size, stride, padding)
            loss = ops.sum(ops.multiply(y, y))
        return tape.gradient(loss, x)

    counts = _count_nodes_through_passes(f, x)
    assert counts["gate_pooled_gradients"] == counts["fuse_epilogues"] + 1, counts
    cf = function(f).get_concrete_graph(x)
    names = [n.prim.name for n in cf.graph.nodes]
    gate = names.index(f"{activation}_grad")
    assert names[gate + 1] == "max_pool_grad", names
    np.testing.assert_array_equal(function(f)(x).numpy(), f(x).numpy())


tree_flatten = kt.autodiff.tree.flatten


def _pooled_activation_cases():
    rng = np.random.default_rng(5)
    # Integers: ties inside windows, windows of only non-positive values, values at 0 and 6,
    # and a NaN, which both orders carry through to the pooled value.
    x = rng.integers(-4, 9, (2, 7, 6, 3)).astype("float32")
    x[0, 1, 1, 0] = np.nan
    cot = rng.standard_normal((2, 7, 6, 3)).astype("float32")
    return kt.convert_to_tensor(x), kt.convert_to_tensor(cot)


@pooled_activations
def test_activation_before_a_max_pool_moves_after_it(activation, pool):
    size, stride, padding = pool
    x, cot = _pooled_activation_cases()
    act = ops.relu if activation == "relu" else ops.relu6

    def infer(x):
        return ops.max_pool(act(ops.multiply(x, cot)), size, stride, padding)

    def grad(x):
        with kt.GradientTape() as tape:
            tape.watch(x)
            y = infer(x)
            loss = ops.sum(
                ops.multiply(ops.where(ops.isnan(y), 0.0, y), cot[:, : y.shape[1], : y.shape[2]])
            )
        return y, tape.gradient(loss, x)

    for f in (infer, grad):
        names = [n.prim.name for n in function(f).get_concrete_graph(x).graph.nodes]
        pool_at = names.index("max_pool")
        assert activation not in names[:pool_at] and names[pool_at + 1] == activation, names
        for traced, eager in zip(
            kt.autodiff.tree.flatten(function(f)(x)), kt.autodiff.tree.flatten(f(x))
        ):
            np.testing.assert_array_equal(traced.numpy(), eager.numpy())


def test_activation_moves_past_the_pool_only_when_nothing_else_reads_it():
    rng = np.random.default_rng(6)
    x = kt.convert_to_tensor(rng.standard_normal((2, 9, 8, 3)).astype("float32"))
    k = kt.convert_to_tensor(rng.standard_normal((3, 8)).astype("float32"))
    b = kt.convert_to_tensor(rng.standard_normal(8).astype("float32"))

    def dense_then_pool(x):
        return ops.max_pool(ops.relu(ops.add(ops.matmul(x, k), b)), 2)

    def also_returned(x):
        y = ops.relu(ops.add(ops.matmul(x, k), b))
        return ops.max_pool(y, 2), y

    def conv_then_pool(x):  # the convolution applies its epilogue as it writes: it stays
        # (in the pool it is fused with, on the CPU: conv_max_pool)
        return ops.max_pool(ops.relu(ops.conv(x, ops.reshape(k, (1, 1, 3, 8)))), 2)

    nodes = function(dense_then_pool).get_concrete_graph(x).graph.nodes
    matmul = next(n for n in nodes if n.prim.name == "matmul")
    assert matmul.params["activation"] is None and nodes[-1].prim.name == "relu"
    # The fused and the unfused product may round differently (the GEMM's blocking differs
    # by CPU): equal to float32 precision, not bitwise.
    np.testing.assert_allclose(
        function(dense_then_pool)(x).numpy(), dense_then_pool(x).numpy(), rtol=1e-5, atol=1e-6
    )
    for f in (also_returned, conv_then_pool):
        nodes = function(f).get_concrete_graph(x).graph.nodes
        linear = next(n for n in nodes if n.prim.name in ("matmul", "conv", "conv_max_pool"))
        assert linear.params["activation"] == "relu" and "relu" not in [n.prim.name for n in nodes]
        for traced, eager in zip(tree_flatten(function(f)(x)), tree_flatten(f(x))):
            np.testing.assert_allclose(traced.numpy(), eager.numpy(), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize(
    "pool, axis",
    [((2, 2, "valid"), (0, 1, 2)), ((3, 2, "same"), (1, 2)), ((3, 1, "same"), None)],
    ids=["2x2-bias", "3x3s2-same-spatial", "3x3s1-overlapping-all"],
)
def test_sums_of_a_pool_gradient_over_its_windows_sum_the_pooled_gradient(pool, axis):
    size, stride, padding = pool
    x, cot = _pooled_activation_cases()
    x = ops.where(ops.isnan(x), 0.0, x)

    def f(x):
        with kt.GradientTape() as tape:
            tape.watch(x)
            y = ops.max_pool(x, size, stride, padding)
            loss = ops.sum(ops.multiply(y, cot[:, : y.shape[1], : y.shape[2]]))
        grad = tape.gradient(loss, x)  # max_pool_grad(x, cot, indices)
        return grad, ops.sum(grad, axis=axis), ops.sum(grad, axis=(0, 3))

    graph = function(f).get_concrete_graph(x).graph
    prod = {s: n for n in graph.nodes for s in n.outputs}
    read = [prod.get(n.inputs[0]) for n in graph.nodes if n.prim.name == "sum"]
    # The window-covering sum reads the pooled gradient; the sum over batch and channels
    # (spatial axes kept) still reads the unpooled one.
    assert [r is not None and r.prim.name == "max_pool_grad" for r in read] == [False, True]
    for traced, eager in zip(function(f)(x), f(x)):
        np.testing.assert_allclose(traced.numpy(), eager.numpy(), rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------------------- methods
class _Scaler:
    def __init__(self, k):
        self.k = k

    @kt.function
    def apply(self, x):
        return x * self.k


def test_a_method_function_does_not_keep_its_instance_alive():
    import gc
    import weakref

    obj = _Scaler(3.0)
    np.testing.assert_allclose(obj.apply(kt.ops.ones((2,))).numpy(), [3.0, 3.0])
    ref = weakref.ref(obj)
    del obj
    gc.collect()
    assert ref() is None
    assert _Scaler.__dict__["apply"]._bound == {}


def test_equal_instances_get_their_own_bound_functions():
    class Same(_Scaler):
        def __eq__(self, other):
            return True

        __hash__ = None  # unhashable: a WeakKeyDictionary could not hold it

    a, b = Same(2.0), Same(5.0)
    x = kt.ops.ones((1,))
    assert float(a.apply(x)[0]) == 2.0 and float(b.apply(x)[0]) == 5.0
    assert a.apply is a.apply and a.apply is not b.apply


def test_instances_without_weak_references_still_bind():
    class Slotted:
        __slots__ = ("k",)

        def __init__(self, k):
            self.k = k

        @kt.function
        def apply(self, x):
            return x + self.k

    s = Slotted(1.0)
    assert float(s.apply(kt.ops.ones(()))) == 2.0
    assert s.apply is s.apply


# ---------------------------------------------------------------------------- arguments
def test_reduce_retracing_and_jit_compile_are_rejected_by_name():
    with pytest.raises(ValueError, match="reduce_retracing=True"):
        kt.function(lambda x: x, reduce_retracing=True)
    with pytest.raises(ValueError, match="jit_compile=True"):

        @kt.function(jit_compile=True)
        def f(x):
            return x

    assert kt.function(lambda x: x, jit_compile=False)(kt.ops.ones(())).shape == ()


def test_input_signature_accepts_any_size_for_a_none_dimension():
    from keratron.data import TensorSpec

    @kt.function(input_signature=[TensorSpec((None, 3), "float32")])
    def f(x):
        return kt.ops.sum(x, axis=1)

    assert f(kt.ops.ones((2, 3))).shape == (2,)
    assert f(np.ones((4, 3), "float32")).shape == (4,)
    assert f(x=kt.ops.ones((1, 3))).shape == (1,)
    np.testing.assert_allclose(f([[1.0, 2.0, 3.0]]).numpy(), [6.0])  # Python values convert


def test_input_signature_mismatches_are_clear_errors():
    from keratron.data import TensorSpec

    @kt.function(input_signature=[TensorSpec((None, 3), "float32")])
    def f(x):
        return x

    with pytest.raises(ValueError, match=r"argument 0 .*shape=\(None, 3\).*shape=\(2, 4\)"):
        f(kt.ops.ones((2, 4)))
    with pytest.raises(ValueError, match="dtype=float32.*dtype=int32"):
        f(kt.convert_to_tensor(np.ones((2, 3), "int32")))
    with pytest.raises(TypeError, match="input_signature of 1 inputs"):
        f(kt.ops.ones((2, 3)), kt.ops.ones((2, 3)))
    with pytest.raises(TypeError, match="input_signature must be a list"):
        kt.function(lambda x: x, input_signature=TensorSpec((3,), "float32"))
