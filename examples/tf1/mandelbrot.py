# ruff: noqa: UP031, B007 (the tutorial's own %-formatting and loops)
"""TensorFlow's "Mandelbrot Set" tutorial (TF 1.x documentation): z <- z^2 + c on a grid of
complex64 points held in a Variable, updated with `tf.group` of `assign`s, counting for each
point the steps before it diverges. Only the import line, the grid (spacing 0.01 instead of
0.005) and the display differ from the original: `DisplayFractal` builds the tutorial's
colored image and saves it (with the counts) as .npy files in $TF1_EXAMPLE_OUT (a temporary
directory by default) instead of showing a JPEG in a notebook."""

import os
import tempfile

import numpy as np

import keratron.compat.v1 as tf

OUT = os.environ.get("TF1_EXAMPLE_OUT") or tempfile.mkdtemp(prefix="mandelbrot-")


def DisplayFractal(a):  # noqa: N802 (the tutorial's name)
    """Display an array of iteration counts as a colorful picture of a fractal."""
    a_cyclic = (6.28 * a / 20.0).reshape(list(a.shape) + [1])
    img = np.concatenate(
        [10 + 20 * np.cos(a_cyclic), 30 + 50 * np.sin(a_cyclic), 155 - 80 * np.cos(a_cyclic)], 2
    )
    img[a == a.max()] = 0
    a = img
    a = np.uint8(np.clip(a, 0, 255))
    np.save(os.path.join(OUT, "mandelbrot_image.npy"), a)


sess = tf.InteractiveSession()

# Use NumPy to create a 2D array of complex numbers
Y, X = np.mgrid[-1.3:1.3:0.01, -2:1:0.01]
Z = X + 1j * Y

xs = tf.constant(Z.astype(np.complex64))
zs = tf.Variable(xs)
ns = tf.Variable(tf.zeros_like(xs, tf.float32))

tf.global_variables_initializer().run()

# Compute the new values of z: z^2 + x
zs_ = zs * zs + xs

# Have we diverged with this new value?
not_diverged = tf.abs(zs_) < 4

# Operation to update the zs and the iteration count.
#
# Note: We keep computing zs after they diverge! This
#       is very wasteful! There are better, if a little
#       less simple, ways to do this.
#
step = tf.group(zs.assign(zs_), ns.assign_add(tf.cast(not_diverged, tf.float32)))

for i in range(200):
    step.run()

counts = ns.eval()
np.save(os.path.join(OUT, "mandelbrot_counts.npy"), counts)
DisplayFractal(counts)
print("grid", counts.shape, "dtype", xs.dtype.name)
print("points that never diverged: %d" % (counts == 200).sum())
