# ruff: noqa: UP031, B007 (the tutorial's own %-formatting and loops)
"""TensorFlow's "Partial Differential Equations" tutorial (TF 1.x documentation): raindrops
on a square pond, u_tt = laplace(u) - damping * u_t stepped with Euler updates, the Laplacian
a `depthwise_conv2d` with a 3x3 kernel, the step a `tf.group` of two `assign`s fed `eps` and
`damping` by placeholder. Only the import line, the size (a 100 x 100 pond, 400 steps
instead of 500 x 500 and 1,000), a numpy seed for the raindrops and the display differ from
the original: `DisplayArray` saves the picture as .npy files in $TF1_EXAMPLE_OUT (a temporary
directory by default) instead of showing a JPEG in a notebook."""

import os
import tempfile

import numpy as np

import keratron.compat.v1 as tf

OUT = os.environ.get("TF1_EXAMPLE_OUT") or tempfile.mkdtemp(prefix="pde-")


def DisplayArray(a, rng=(0, 1)):  # noqa: N802 (the tutorial's name)
    """Display an array as a picture."""
    a = (a - rng[0]) / float(rng[1] - rng[0]) * 255
    a = np.uint8(np.clip(a, 0, 255))
    np.save(os.path.join(OUT, "pde_image.npy"), a)


sess = tf.InteractiveSession()


def make_kernel(a):
    """Transform a 2D array into a convolution kernel"""
    a = np.asarray(a)
    a = a.reshape(list(a.shape) + [1, 1])
    return tf.constant(a, dtype=1)


def simple_conv(x, k):
    """A simplified 2D convolution operation"""
    x = tf.expand_dims(tf.expand_dims(x, 0), -1)
    y = tf.nn.depthwise_conv2d(x, k, [1, 1, 1, 1], padding="SAME")
    return y[0, :, :, 0]


def laplace(x):
    """Compute the 2D laplacian of an array"""
    laplace_k = make_kernel([[0.5, 1.0, 0.5], [1.0, -6.0, 1.0], [0.5, 1.0, 0.5]])
    return simple_conv(x, laplace_k)


N = 100

# Initial Conditions -- some rain drops hit a pond

# Set everything to zero
u_init = np.zeros([N, N], dtype=np.float32)
ut_init = np.zeros([N, N], dtype=np.float32)

# Some rain drops hit a pond at random points
np.random.seed(0)
for n in range(40):
    a, b = np.random.randint(0, N, 2)
    u_init[a, b] = np.random.uniform()

DisplayArray(u_init, rng=[-0.1, 0.1])

# Parameters:
# eps -- time resolution
# damping -- wave damping
eps = tf.placeholder(tf.float32, shape=())
damping = tf.placeholder(tf.float32, shape=())

# Create variables for simulation state
U = tf.Variable(u_init)
Ut = tf.Variable(ut_init)

# Discretized PDE update rules
U_ = U + eps * Ut
Ut_ = Ut + eps * (laplace(U) - damping * Ut)

# Operation to update the state
step = tf.group(U.assign(U_), Ut.assign(Ut_))

# Initialize state to initial conditions
tf.global_variables_initializer().run()

# Run 400 steps of PDE
for i in range(400):
    # Step simulation
    step.run({eps: 0.03, damping: 0.04})
DisplayArray(U.eval(), rng=[-0.1, 0.1])

u = U.eval()
np.save(os.path.join(OUT, "pde_u.npy"), u)
print("pond", u.shape, "energy %.6f" % float((u**2).sum()))
