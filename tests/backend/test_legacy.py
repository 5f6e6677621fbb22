"""keratron.backend's tf.keras 2 functions (`K.mean`, `K.sqrt`, ...) against tf.keras 2's own
(`tf_keras.backend`, the tf-keras package): the same values and dtypes for the same inputs.

The inputs go to keratron as numpy arrays (converted as a user's tensors would be) and to
tf.keras as TensorFlow tensors.
"""

import numpy as np
import pytest

import keratron
from keratron import backend as K
from tests.conftest import require

rng = np.random.default_rng(0)
X = rng.standard_normal((2, 3, 4)).astype("float32")
M = rng.standard_normal((3, 4)).astype("float32")
N = rng.standard_normal((4, 5)).astype("float32")
P = rng.random((4, 3)).astype("float32")  # probabilities-ish
T = (rng.random((4, 3)) > 0.5).astype("float32")  # binary targets
ONEHOT = np.eye(3, dtype="float32")[[0, 2, 1, 1]]
LABELS = np.array([0, 2, 1, 1], dtype="int32")
IMG = rng.standard_normal((2, 5, 6, 3)).astype("float32")
VOL = rng.standard_normal((1, 3, 4, 5, 2)).astype("float32")
SEQ = rng.standard_normal((2, 7, 3)).astype("float32")
BOOL = rng.random((3, 4)) > 0.5
W2 = rng.standard_normal((3, 3, 3, 4)).astype("float32")
_logits = rng.standard_normal((2, 6, 5)).astype("float32")
SOFTMAX = (np.exp(_logits) / np.exp(_logits).sum(-1, keepdims=True)).astype("float32")

# name, positional args, keyword args (numpy values: tf.keras gets them as tensors)
CASES = [
    ("abs", (X,), {}),
    ("all", (BOOL,), {"axis": 1}),
    ("any", (BOOL.astype("float32"),), {"axis": 0, "keepdims": True}),
    ("argmax", (X,), {}),
    ("argmin", (X,), {"axis": 1}),
    ("batch_dot", (M, M), {}),
    ("batch_dot", (X, X), {"axes": (2, 2)}),
    ("batch_dot", (X, np.swapaxes(X, 1, 2).copy()), {}),
    ("batch_dot", (X, M[:2, :3].reshape(2, 3)), {"axes": (1, 1)}),
    ("batch_flatten", (X,), {}),
    ("batch_normalization", (M, M[0], np.abs(M[1]), M[2], np.abs(M[0])), {}),
    ("bias_add", (IMG, M[0, :3]), {"data_format": "channels_last"}),
    ("bias_add", (np.moveaxis(IMG, -1, 1).copy(), M[0, :3]), {"data_format": "channels_first"}),
    ("binary_crossentropy", (T, P), {}),
    ("binary_crossentropy", (T, P - 0.5), {"from_logits": True}),
    ("binary_focal_crossentropy", (T, P), {}),
    ("binary_focal_crossentropy", (T, P - 0.5), {"from_logits": True, "gamma": 1.5}),
    ("binary_focal_crossentropy", (T, P), {"apply_class_balancing": True, "alpha": 0.4}),
    ("categorical_crossentropy", (ONEHOT, P), {}),
    ("categorical_crossentropy", (ONEHOT, P - 0.5), {"from_logits": True}),
    ("categorical_crossentropy", (ONEHOT.T.copy(), P.T.copy()), {"axis": 0}),
    ("categorical_focal_crossentropy", (ONEHOT, P), {}),
    ("categorical_focal_crossentropy", (ONEHOT, P - 0.5), {"from_logits": True, "gamma": 1.0}),
    ("sparse_categorical_crossentropy", (LABELS, P), {}),
    ("sparse_categorical_crossentropy", (LABELS, P - 0.5), {"from_logits": True}),
    ("sparse_categorical_crossentropy", (LABELS, P), {"ignore_class": 1}),
    ("cast", (X,), {"dtype": "int32"}),
    ("clip", (X, -0.5, 0.5), {}),
    ("clip", (X, 0.5, -0.5), {}),
    ("clip", (X, None, 0.2), {}),
    ("concatenate", ([M, M],), {"axis": 0}),
    ("conv1d", (SEQ, W2[0]), {"padding": "same"}),
    ("conv1d", (SEQ, W2[0]), {"padding": "causal", "dilation_rate": 2}),
    ("conv2d", (IMG, W2), {"strides": (2, 1), "padding": "same"}),
    ("conv2d", (IMG, W2), {"dilation_rate": (1, 2)}),
    (
        "conv2d_transpose",
        (IMG, np.swapaxes(W2, 2, 3)[..., :3].copy(), (2, 10, 12, 4)),
        {"strides": (2, 2), "padding": "same"},
    ),  # fmt: skip
    ("conv2d_transpose", (IMG, np.swapaxes(W2, 2, 3)[..., :3].copy(), (2, 7, 8, 4)), {}),
    (
        "conv2d_transpose",
        (IMG, np.swapaxes(W2, 2, 3)[..., :3].copy(), (2, 9, 11, 4)),
        {"strides": (2, 2), "padding": "same"},
    ),  # fmt: skip
    (
        "conv2d_transpose",
        (IMG, np.swapaxes(W2, 2, 3)[..., :3].copy(), (2, 12, 14, 4)),
        {"strides": (2, 2)},
    ),  # fmt: skip
    ("conv3d", (VOL, rng.standard_normal((2, 2, 2, 2, 3)).astype("float32")), {}),
    (
        "ctc_batch_cost",
        (
            np.array([[1, 2, 0], [3, 3, 1]], "int32"),
            SOFTMAX,
            np.array([[6], [5]], "int32"),
            np.array([[3], [2]], "int32"),
        ),
        {},
    ),  # fmt: skip
    ("cos", (X,), {}),
    ("count_params", (X,), {}),
    ("cumprod", (M,), {"axis": 1}),
    ("cumsum", (M,), {}),
    (
        "depthwise_conv2d",
        (IMG, rng.standard_normal((3, 3, 3, 2)).astype("float32")),
        {"padding": "same"},
    ),  # fmt: skip
    ("dot", (M, N), {}),
    ("dot", (X, N), {}),
    ("dot", (X, rng.standard_normal((3, 4, 2)).astype("float32")), {}),
    ("dtype", (X,), {}),
    ("elu", (X,), {}),
    ("elu", (X,), {"alpha": 0.5}),
    ("equal", (LABELS, 1), {}),
    ("exp", (X,), {}),
    ("expand_dims", (M,), {}),
    ("expand_dims", (M,), {"axis": 0}),
    ("flatten", (X,), {}),
    ("gather", (M, np.array([2, 0])), {}),
    ("greater", (X, 0.0), {}),
    ("greater_equal", (X, 0.1), {}),
    ("hard_sigmoid", (X * 4,), {}),
    ("in_top_k", (P, LABELS, 2), {}),
    ("int_shape", (X,), {}),
    ("l2_normalize", (M,), {"axis": -1}),
    ("l2_normalize", (M,), {}),
    ("less", (X, 0.0), {}),
    ("less_equal", (X, 0.0), {}),
    ("log", (P,), {}),
    ("max", (X,), {"axis": 1}),
    ("maximum", (X, 0.1), {}),
    ("mean", (X,), {"axis": [0, 2], "keepdims": True}),
    ("mean", (BOOL,), {"axis": 1}),
    ("min", (X,), {}),
    ("minimum", (X, 0.1), {}),
    ("ndim", (X,), {}),
    ("not_equal", (LABELS, 1), {}),
    ("one_hot", (LABELS, 4), {}),
    ("ones_like", (X,), {}),
    ("permute_dimensions", (X, (2, 0, 1)), {}),
    ("pool2d", (IMG, (2, 2)), {"strides": (2, 2)}),
    ("pool2d", (IMG, (3, 3)), {"strides": (1, 2), "padding": "same", "pool_mode": "avg"}),
    ("pool3d", (VOL, (2, 2, 2)), {"strides": (1, 1, 1), "pool_mode": "avg"}),
    ("pow", (P, 3), {}),
    ("prod", (M,), {"axis": 0}),
    ("relu", (X,), {}),
    ("relu", (X,), {"alpha": 0.1}),
    ("relu", (X,), {"max_value": 0.5}),
    ("relu", (X,), {"max_value": 6}),
    ("relu", (X,), {"alpha": 0.2, "max_value": 1.0, "threshold": 0.3}),
    ("relu", (X,), {"threshold": -0.2}),
    ("repeat", (M, 3), {}),
    ("repeat_elements", (X, 2, 1), {}),
    ("reshape", (X, (4, -1)), {}),
    ("resize_images", (IMG, 2, 3, "channels_last"), {}),
    ("resize_images", (np.moveaxis(IMG, -1, 1).copy(), 2, 2, "channels_first"), {}),
    ("resize_images", (IMG, 2, 2, "channels_last"), {"interpolation": "bilinear"}),
    ("resize_volumes", (VOL, 2, 1, 2, "channels_last"), {}),
    ("reverse", (X, 1), {}),
    ("reverse", (X, [0, 2]), {}),
    ("round", (X * 3,), {}),
    (
        "separable_conv2d",
        (
            IMG,
            rng.standard_normal((3, 3, 3, 2)).astype("float32"),
            rng.standard_normal((1, 1, 6, 4)).astype("float32"),
        ),
        {"padding": "same"},
    ),  # fmt: skip
    ("shape", (X,), {}),
    ("sigmoid", (X,), {}),
    ("sign", (X,), {}),
    ("sin", (X,), {}),
    ("softmax", (X,), {}),
    ("softmax", (X,), {"axis": 1}),
    ("softplus", (X,), {}),
    ("softsign", (X,), {}),
    ("spatial_2d_padding", (IMG,), {"padding": ((1, 0), (2, 3))}),
    ("spatial_2d_padding", (IMG,), {"data_format": "channels_first"}),
    ("spatial_3d_padding", (VOL,), {"padding": ((1, 0), (0, 2), (1, 1))}),
    ("sqrt", (X,), {}),
    ("square", (X,), {}),
    ("squeeze", (X[:, :1],), {"axis": 1}),
    ("stack", ([M, M],), {"axis": 1}),
    ("std", (X,), {"axis": 2}),
    ("sum", (X,), {"axis": (0, 1)}),
    ("switch", (BOOL, M, -M), {}),
    ("switch", (BOOL, np.stack([M, -M], -1), np.stack([-M, M], -1)), {}),
    ("switch", (np.array(True), M, -M), {}),
    ("tanh", (X,), {}),
    ("temporal_padding", (SEQ, (2, 1)), {}),
    ("tile", (M, (2, 1)), {}),
    ("transpose", (M,), {}),
    ("var", (X,), {}),
    ("zeros_like", (X,), {"dtype": "int32"}),
]


def _case_id(case):
    name, args, kwargs = case
    return name + "-" + "-".join(f"{k}={v}" for k, v in kwargs.items())


@pytest.fixture(scope="module")
def tf_keras():
    return require("tf_keras"), require("tensorflow")


def _to_tf(tf, value):
    if isinstance(value, np.ndarray):
        return tf.constant(value)
    if isinstance(value, list) and value and isinstance(value[0], np.ndarray):
        return [tf.constant(v) for v in value]
    return value


def _numpy(value):
    if hasattr(value, "numpy"):
        return np.asarray(value.numpy())
    return np.asarray(value)


@pytest.mark.interop
@pytest.mark.parametrize("case", CASES, ids=[_case_id(c) for c in CASES])
def test_matches_tf_keras(case, tf_keras):
    keras2, tf = tf_keras
    name, args, kwargs = case
    expected = getattr(keras2.backend, name)(*(_to_tf(tf, a) for a in args), **kwargs)
    got = getattr(K, name)(*args, **kwargs)
    if isinstance(expected, (str, int, tuple)) and not hasattr(expected, "numpy"):
        assert got == expected
        return
    want, have = _numpy(expected), _numpy(got)
    assert have.dtype == want.dtype, (have.dtype, want.dtype)
    assert have.shape == want.shape, (have.shape, want.shape)
    np.testing.assert_allclose(have, want, rtol=2e-5, atol=2e-5)


@pytest.mark.interop
def test_variables_and_their_values_as_tf_keras(tf_keras):
    keras2, _ = tf_keras
    K2 = keras2.backend
    for name, args in [("eye", (3,)), ("ones", ((2, 3),)), ("zeros", ((3,),))]:
        want, got = getattr(K2, name)(*args), getattr(K, name)(*args)
        assert isinstance(got, keratron.Variable)
        np.testing.assert_array_equal(K.get_value(got), K2.get_value(want))
        assert K.dtype(got) == K2.dtype(want)
    v, v2 = K.variable(M), K2.variable(M)
    for fn, value in [("update", N[:3, :4]), ("update_add", M), ("update_sub", 2 * M)]:
        getattr(K, fn)(v, value)
        getattr(K2, fn)(v2, value)
    K.moving_average_update(v, N[1:4, 1:5], 0.9)
    K2.moving_average_update(v2, N[1:4, 1:5], 0.9)
    np.testing.assert_allclose(K.eval(v), K2.eval(v2), rtol=1e-6)
    K.batch_set_value([(v, M * 3)])
    K2.batch_set_value([(v2, M * 3)])
    np.testing.assert_array_equal(K.batch_get_value([v])[0], K2.batch_get_value([v2])[0])
    assert K.count_params(v) == K2.count_params(v2) == 12


def test_set_value_changes_an_optimizer_learning_rate_during_fit():
    # The tf.keras idiom of a learning-rate callback: K.set_value(model.optimizer.lr, ...).
    model = keratron.Sequential([keratron.Input((2,)), keratron.layers.Dense(1)])
    model.compile(keratron.optimizers.SGD(0.5), "mse")
    seen = []

    class Halve(keratron.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            K.set_value(self.model.optimizer.learning_rate, 0.5 / 2**epoch)
            seen.append(float(K.get_value(self.model.optimizer.learning_rate)))

    model.fit(np.ones((4, 2)), np.ones((4, 1)), epochs=3, verbose=0, callbacks=[Halve()])
    assert seen == [0.5, 0.25, 0.125]


def test_a_custom_metric_written_with_backend_functions_trains_and_differentiates():
    def rmse(y_true, y_pred):
        return K.sqrt(K.mean(K.square(y_pred - y_true), axis=-1))

    x = rng.random((32, 3)).astype("float32")
    y = x @ np.array([[1.0], [-2.0], [0.5]], "float32")
    model = keratron.Sequential([keratron.Input((3,)), keratron.layers.Dense(1)])
    model.compile(keratron.optimizers.SGD(0.1), loss=rmse, metrics=[rmse])
    history = model.fit(x, y, epochs=20, batch_size=8, verbose=0).history
    assert history["loss"][-1] < history["loss"][0] / 2
    np.testing.assert_allclose(history["rmse"], history["loss"], rtol=1e-5)


def test_random_functions_shapes_dtypes_and_ranges():
    u = K.eval(K.random_uniform((2000,), -1.0, 3.0, seed=1))
    assert u.dtype == np.float32 and u.min() >= -1.0 and u.max() < 3.0
    n = K.eval(K.random_normal((4000,), 1.0, 2.0, seed=2))
    assert abs(n.mean() - 1.0) < 0.15 and abs(n.std() - 2.0) < 0.15
    t = K.eval(K.truncated_normal((4000,), 0.0, 1.0, seed=3))
    assert np.abs(t).max() <= 2.0
    b = K.eval(K.random_bernoulli((4000,), p=0.3, seed=4))
    assert set(np.unique(b)) <= {0.0, 1.0} and abs(b.mean() - 0.3) < 0.05
    assert isinstance(K.random_uniform_variable((2, 2), 0, 1, seed=5), keratron.Variable)
    d = K.eval(K.dropout(np.ones((4000,), "float32"), 0.25, seed=6))
    assert set(np.unique(d)) <= {0.0, np.float32(1 / 0.75)} and abs((d == 0).mean() - 0.25) < 0.05


def test_map_and_folds():
    np.testing.assert_allclose(K.eval(K.map_fn(lambda r: r * 2, M)), M * 2)
    np.testing.assert_allclose(K.eval(K.foldl(lambda a, r: a + r, M)), M.sum(0), rtol=1e-6)
    got = K.eval(K.foldr(lambda a, r: a * 0.5 + r, M, initializer=np.zeros(4, "float32")))
    want = np.zeros(4, "float32")
    for row in M[::-1]:
        want = want * 0.5 + row
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_errors_name_the_argument():
    with pytest.raises(ValueError, match="padding"):
        K.conv2d(IMG, W2, padding="full")
    with pytest.raises(ValueError, match="data_format"):
        K.bias_add(IMG, M[0, :3], data_format="nhwc")
    with pytest.raises(ValueError, match="repeat"):
        K.repeat(X, 2)


def test_backend_functions_build_a_functional_model_on_symbolic_inputs():
    # tf.keras 2 code applies K.* to a model's symbolic tensors between layers.
    inputs = keratron.Input((3,))
    features = K.concatenate(
        [K.square(inputs), K.expand_dims(K.mean(inputs, axis=-1)), K.relu(inputs, max_value=1.0)]
    )
    assert K.int_shape(features) == (None, 7) and K.dtype(features) == "float32"
    model = keratron.Model(inputs, features)
    x = rng.standard_normal((4, 3)).astype("float32")
    want = np.concatenate([x**2, x.mean(-1, keepdims=True), np.clip(x, 0, 1)], axis=-1)
    np.testing.assert_allclose(model.predict(x, verbose=0), want, rtol=1e-6)


def _ctc_probs():
    logits = np.random.default_rng(0).standard_normal((4, 9, 5)) * 2
    return (np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)).astype("float32")


@pytest.mark.interop
@pytest.mark.parametrize(
    "kwargs", [{}, {"greedy": False}, {"greedy": False, "beam_width": 100, "top_paths": 3}]
)
def test_ctc_decode_as_tf_keras(kwargs, tf_keras):
    keras2, tf = tf_keras
    probs, lengths = _ctc_probs(), np.array([9, 7, 4, 1], "int32")
    want_paths, want_log_prob = keras2.backend.ctc_decode(
        tf.constant(probs), tf.constant(lengths), **kwargs
    )
    paths, log_prob = K.ctc_decode(probs, lengths, **kwargs)
    assert len(paths) == len(want_paths) == kwargs.get("top_paths", 1)
    for got, want in zip(paths, want_paths):
        assert np.asarray(got).dtype == np.int64
        np.testing.assert_array_equal(np.asarray(got), want.numpy())
    np.testing.assert_allclose(np.asarray(log_prob), want_log_prob.numpy(), rtol=1e-5, atol=1e-5)


def test_ctc_decode_beam_paths_merge_repeated_labels_as_tensorflow_v1():
    # Class 0 twice with the blank (class 2) between: CTC decodes [0, 0]; tf.keras 2's beam
    # search (TensorFlow's v1 decoder, merge_repeated=True) reports [0], the greedy one [0, 0].
    probs = np.array([[[0.9, 0.05, 0.05], [0.05, 0.05, 0.9], [0.9, 0.05, 0.05]]], "float32")
    greedy, _ = K.ctc_decode(probs, np.array([3]))
    beam, _ = K.ctc_decode(probs, np.array([3]), greedy=False, beam_width=4)
    np.testing.assert_array_equal(np.asarray(greedy[0]), [[0, 0, -1]])
    np.testing.assert_array_equal(np.asarray(beam[0]), [[0, -1, -1]])
    with pytest.raises(ValueError, match="ctc_decode: y_pred must be"):
        K.ctc_decode(probs[0], np.array([3]))


# ------------------------------------------------------------------------------ K.rnn
RNN_X = rng.standard_normal((3, 6, 4)).astype("float32")
RNN_U = (rng.standard_normal((4, 5)) * 0.5).astype("float32")
RNN_W = (rng.standard_normal((5, 5)) * 0.5).astype("float32")
RNN_H0 = rng.standard_normal((3, 5)).astype("float32")
RNN_C = rng.standard_normal((3, 5)).astype("float32")  # a constant, as an attention's keys
# Sample 0 is masked at its first step, sample 1 in the middle, sample 2 nowhere.
RNN_MASK = np.array([[0, 1, 1, 0, 1, 1], [1, 1, 0, 0, 1, 1], [1] * 6], dtype=bool)


def _rnn_step(backend, u=RNN_U, w=RNN_W):
    """h' = tanh(x U + h W (+ the constant)); output h', states [h', 2 h']: a step function
    written against tf.keras 2's backend module, run by `backend`'s rnn (`u` and `w` as
    that backend's tensors)."""

    def step(x_t, states):
        h = backend.tanh(backend.dot(x_t, u) + backend.dot(states[0], w))
        if len(states) == 3:
            h = h + states[2]
        return h, [h, h * 2.0]

    return step


RNN_CASES = [
    {},
    {"go_backwards": True},
    {"mask": RNN_MASK},
    {"mask": RNN_MASK, "go_backwards": True},
    {"mask": RNN_MASK, "zero_output_for_mask": True},
    {"mask": RNN_MASK[:, :, None]},
    {"constants": [RNN_C]},
    {"time_major": True},
    {"time_major": True, "mask": np.ascontiguousarray(RNN_MASK.T)},
    {"return_all_outputs": False},
    {"input_length": np.array([6, 2, 4], "int32")},
    {"input_length": np.array([5, 2, 4], "int32"), "go_backwards": True},
    {"unroll": True},
]


@pytest.mark.interop
@pytest.mark.parametrize("kwargs", RNN_CASES, ids=lambda kw: ",".join(kw) or "plain")
def test_rnn_as_tf_keras(kwargs, tf_keras):
    keras2, tf = tf_keras
    x = np.ascontiguousarray(RNN_X.swapaxes(0, 1)) if kwargs.get("time_major") else RNN_X
    init = [RNN_H0, RNN_H0 * 0.5]
    want = keras2.backend.rnn(
        _rnn_step(keras2.backend, tf.constant(RNN_U), tf.constant(RNN_W)),
        tf.constant(x),
        [tf.constant(s) for s in init],
        **{k: _to_tf(tf, v) for k, v in kwargs.items()},
    )
    got = K.rnn(_rnn_step(K), x, init, **kwargs)
    (last, outputs, states), (want_last, want_outputs, want_states) = got, want
    np.testing.assert_allclose(np.asarray(last), want_last.numpy(), rtol=1e-5, atol=1e-6)
    assert np.asarray(outputs).shape == tuple(want_outputs.shape)
    np.testing.assert_allclose(np.asarray(outputs), want_outputs.numpy(), rtol=1e-5, atol=1e-6)
    assert isinstance(states, tuple) and len(states) == len(want_states) == 2
    for s, w in zip(states, want_states):
        np.testing.assert_allclose(np.asarray(s), w.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.interop
def test_rnn_nested_inputs_and_outputs_as_tf_keras(tf_keras):
    keras2, tf = tf_keras
    second = RNN_X[:, :, :2] * 3.0

    def step_of(backend, u, w):
        def step(x_t, states):
            a, b = x_t
            h = backend.tanh(backend.dot(a, u) + backend.dot(states[0], w))
            return (h, backend.sum(b, axis=-1, keepdims=True) + h[:, :1]), [h]

        return step

    want = keras2.backend.rnn(
        step_of(keras2.backend, tf.constant(RNN_U), tf.constant(RNN_W)),
        (tf.constant(RNN_X), tf.constant(second)),
        [tf.constant(RNN_H0)],
    )
    got = K.rnn(step_of(K, RNN_U, RNN_W), (RNN_X, second), [RNN_H0], mask=np.ones((3, 6), bool))
    for g, w in zip([*got[0], *got[1], *got[2]], [*want[0], *want[1], *want[2]]):
        np.testing.assert_allclose(np.asarray(g), w.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.interop
def test_rnn_gradients_as_tensorflow(tf_keras):
    keras2, tf = tf_keras
    u_tf, u = tf.Variable(RNN_U), keratron.Variable(RNN_U)

    def loss_of(backend, kernel, w, x, h0, mask):
        def step(x_t, states):
            h = backend.tanh(backend.dot(x_t, kernel) + backend.dot(states[0], w))
            return h, [h]

        _, outputs, _ = backend.rnn(step, x, [h0], mask=mask)
        return backend.sum(backend.square(outputs))

    with tf.GradientTape() as tape:
        want = loss_of(
            keras2.backend,
            u_tf,
            tf.constant(RNN_W),
            tf.constant(RNN_X),
            tf.constant(RNN_H0),
            tf.constant(RNN_MASK),
        )
    want_grad = tape.gradient(want, u_tf)
    with keratron.GradientTape() as tape:
        got = loss_of(K, u, RNN_W, RNN_X, RNN_H0, RNN_MASK)
    got_grad = tape.gradient(got, u)
    np.testing.assert_allclose(float(got), float(want), rtol=1e-5)
    np.testing.assert_allclose(np.asarray(got_grad), want_grad.numpy(), rtol=1e-4, atol=1e-5)


def test_rnn_errors_name_what():
    step = _rnn_step(K)
    with pytest.raises(ValueError, match="rnn: each input must have a batch axis"):
        K.rnn(step, RNN_X[:, 0], [RNN_H0])
    with pytest.raises(ValueError, match="rnn: the inputs have no time steps"):
        K.rnn(step, RNN_X[:, :0], [RNN_H0])


def _attention_model(keras):
    """The Bahdanau attention layer of a widely copied tf.keras 2 seq2seq script (its energy
    and context steps each run by `K.rnn`, the encoder outputs read from the closure), on two
    sequence inputs, then a Dense head."""
    K_ = keras.backend

    class AttentionLayer(keras.layers.Layer):
        def build(self, input_shape):
            enc, dec = input_shape
            self.W_a = self.add_weight(name="W_a", shape=(enc[2], enc[2]), initializer="uniform")
            self.U_a = self.add_weight(name="U_a", shape=(dec[2], enc[2]), initializer="uniform")
            self.V_a = self.add_weight(name="V_a", shape=(enc[2], 1), initializer="uniform")
            super().build(input_shape)

        def call(self, inputs):
            encoder_out_seq, decoder_out_seq = inputs

            def energy_step(inputs, states):
                w_a_dot_s = K_.dot(encoder_out_seq, self.W_a)
                u_a_dot_h = K_.expand_dims(K_.dot(inputs, self.U_a), 1)
                e_i = K_.squeeze(K_.dot(K_.tanh(w_a_dot_s + u_a_dot_h), self.V_a), axis=-1)
                e_i = K_.softmax(e_i)
                return e_i, [e_i]

            def context_step(inputs, states):
                c_i = K_.sum(encoder_out_seq * K_.expand_dims(inputs, -1), axis=1)
                return c_i, [c_i]

            fake_state_c = K_.sum(encoder_out_seq, axis=1)
            fake_state_e = K_.sum(encoder_out_seq, axis=2)
            _, e_outputs, _ = K_.rnn(energy_step, decoder_out_seq, [fake_state_e])
            _, c_outputs, _ = K_.rnn(context_step, e_outputs, [fake_state_c])
            return c_outputs

    enc = keras.Input((5, 4))
    dec = keras.Input((3, 6))
    context = AttentionLayer()([enc, dec])
    out = keras.layers.Dense(2)(keras.layers.Concatenate()([dec, context]))
    return keras.Model([enc, dec], out)


@pytest.mark.interop
def test_rnn_attention_layer_from_tf_keras_code(tf_keras):
    keras2, _ = tf_keras
    enc = rng.standard_normal((8, 5, 4)).astype("float32")
    dec = rng.standard_normal((8, 3, 6)).astype("float32")
    reference = _attention_model(keras2)
    model = _attention_model(keratron)
    model.set_weights(reference.get_weights())
    np.testing.assert_allclose(
        model.predict([enc, dec], verbose=0),
        reference.predict([enc, dec], verbose=0),
        rtol=1e-5,
        atol=1e-6,
    )
    model.compile(optimizer="adam", loss="mse")
    history = model.fit([enc, dec], np.zeros((8, 3, 2), "float32"), epochs=3, verbose=0)
    losses = history.history["loss"]
    assert losses[-1] < losses[0]
