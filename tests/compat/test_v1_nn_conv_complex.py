"""`tf.nn.depthwise_conv2d` and complex64 tensors in keratron.compat.v1, against torch (values
and gradients) and numpy."""

import numpy as np
import pytest
import torch

import keratron.compat.v1 as tf


@pytest.fixture
def graph():
    with tf.Graph().as_default() as g:
        yield g


@pytest.mark.parametrize("strides,padding,rate", [(1, "SAME", 1), (2, "VALID", 1), (1, "SAME", 2)])
def test_depthwise_conv2d_values_and_gradients_equal_torchs(graph, strides, padding, rate):
    rng = np.random.default_rng(0)
    xv = rng.normal(size=(2, 7, 6, 3)).astype(np.float32)
    kv = rng.normal(size=(3, 3, 3, 2)).astype(np.float32)
    gv = rng.normal(size=(2, 7, 6, 6)).astype(np.float32)  # cropped to the output's shape
    x, k = tf.placeholder(tf.float32, xv.shape), tf.placeholder(tf.float32, kv.shape)
    y = tf.nn.depthwise_conv2d(
        x, k, [1, strides, strides, 1], padding, rate=None if rate == 1 else [rate, rate]
    )
    with tf.Session() as sess:
        out = sess.run(y, {x: xv, k: kv})
        g = gv[:, : out.shape[1], : out.shape[2]]
        dx, dk = sess.run(tf.gradients(y, [x, k], grad_ys=g), {x: xv, k: kv})
    # torch: grouped conv2d (out channel c * 2 + m uses filter [:, :, c, m]), NCHW.
    tx = torch.tensor(xv.transpose(0, 3, 1, 2), requires_grad=True)
    tk = torch.tensor(kv.transpose(2, 3, 0, 1).reshape(6, 1, 3, 3), requires_grad=True)
    pad = rate if padding == "SAME" else 0
    ty = torch.nn.functional.conv2d(tx, tk, stride=strides, padding=pad, dilation=rate, groups=3)
    want = ty.detach().numpy().transpose(0, 2, 3, 1)
    assert out.shape == want.shape
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)
    ty.backward(torch.tensor(g.transpose(0, 3, 1, 2)))
    np.testing.assert_allclose(dx, tx.grad.numpy().transpose(0, 2, 3, 1), rtol=1e-5, atol=1e-5)
    dk_want = tk.grad.numpy().reshape(3, 2, 3, 3).transpose(2, 3, 0, 1)
    np.testing.assert_allclose(dk, dk_want, rtol=1e-5, atol=1e-4)


def test_depthwise_conv2d_rejects_nchw(graph):
    x = tf.placeholder(tf.float32, [1, 3, 4, 4])
    with pytest.raises(ValueError, match="NHWC"):
        tf.nn.depthwise_conv2d(x, tf.ones([3, 3, 3, 1]), [1, 1, 1, 1], "SAME", data_format="NCHW")


def test_complex64_constants_variables_and_abs(graph):
    z = np.array([[1 + 2j, -0.5j], [3.0, 0.25 - 1j]], np.complex64)
    c = tf.constant(z)
    v = tf.Variable(c)
    assert c.dtype == tf.complex64 and v.dtype.is_complex
    sq = v * v + c
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        got, mag = sess.run([sq, tf.abs(sq)])
    np.testing.assert_allclose(got, z * z + z, rtol=1e-6)
    assert mag.dtype == np.float32
    np.testing.assert_allclose(mag, np.abs(z * z + z), rtol=1e-6)
