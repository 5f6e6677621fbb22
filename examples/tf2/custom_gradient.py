"""`tf.custom_gradient` (the TensorFlow 2 guides' examples).

The numerically stable gradient of log(1 + exp(x)), a gradient clipped by norm on the backward
pass only, a custom gradient for a function that reads a variable (`grad_fn(..., variables=)`),
a straight-through estimator, second derivatives through a custom gradient, and a custom
gradient inside `tf.function`. Every figure printed is deterministic.
"""

import numpy as np

import keratron.compat.v2 as tf


def log1pexp_naive(x):
    return tf.math.log(1 + tf.exp(x))


def grad_of(fn, x):
    with tf.GradientTape() as tape:
        tape.watch(x)
        value = fn(x)
    return tape.gradient(value, x)


print("naive grad at 0:", grad_of(log1pexp_naive, tf.constant(0.0)).numpy())
print("naive grad at 100:", grad_of(log1pexp_naive, tf.constant(100.0)).numpy())


@tf.custom_gradient
def log1pexp(x):
    e = tf.exp(x)

    def grad(dy):
        return dy * (1 - 1 / (1 + e))

    return tf.math.log(1 + e), grad


print("stable grad at 0:", grad_of(log1pexp, tf.constant(0.0)).numpy())
print("stable grad at 100:", grad_of(log1pexp, tf.constant(100.0)).numpy())
xs = tf.constant([-3.0, 0.5, 2.0])
print("stable grads:", np.round(grad_of(log1pexp, xs).numpy(), 6).tolist())


@tf.custom_gradient
def clip_gradient_by_norm(x, norm):
    y = tf.identity(x)

    def grad_fn(dresult):
        return [tf.clip_by_norm(dresult, norm), None]

    return y, grad_fn


x = tf.constant([3.0, 4.0])
with tf.GradientTape() as tape:
    tape.watch(x)
    y = clip_gradient_by_norm(x, 1.0)
    loss = tf.reduce_sum(y * tf.constant([6.0, 8.0]))
print("forward unchanged:", y.numpy().tolist())
print("clipped grad:", np.round(tape.gradient(loss, x).numpy(), 6).tolist())
clipped = tf.clip_by_norm(tf.constant([[3.0, 4.0]]), 2.0)
print("clip_by_norm:", np.round(clipped.numpy(), 6).tolist())
clipped, gnorm = tf.clip_by_global_norm([tf.constant([3.0]), tf.constant([4.0])], 1.0)
print("clip_by_global_norm:", [round(float(c.numpy()[0]), 6) for c in clipped], float(gnorm))

weights = tf.Variable(tf.ones([2]))


@tf.custom_gradient
def linear_poly(x):
    poly = weights[1] * x + weights[0]

    def grad_fn(dpoly, variables):
        grad_xs = dpoly * weights[1]
        assert len(variables) == 1 and variables[0] is weights
        dy_dw = dpoly * tf.stack([x**1, x**0])
        return grad_xs, [tf.reduce_sum(tf.reshape(dy_dw, [2, -1]), axis=1)]

    return poly, grad_fn


x = tf.constant([1.0, 2.0, 3.0])
with tf.GradientTape(persistent=True) as tape:
    tape.watch(x)
    poly = linear_poly(x)
print("poly:", poly.numpy().tolist())
print("dpoly/dx:", tape.gradient(poly, x).numpy().tolist())
print("dpoly/dweights:", tape.gradient(poly, weights).numpy().tolist())
del tape


@tf.custom_gradient
def round_straight_through(x):
    return tf.round(x), lambda dy: dy


x = tf.Variable([0.2, 1.7, -2.6])
with tf.GradientTape() as tape:
    y = tf.reduce_sum(round_straight_through(x) * tf.constant([1.0, 2.0, 3.0]))
print("rounded sum:", float(y), "straight-through grad:", tape.gradient(y, x).numpy().tolist())


@tf.custom_gradient
def cube(x):
    def grad(dy):
        return dy * 3 * x * x

    return x * x * x, grad


x = tf.constant(2.0)
with tf.GradientTape() as outer:
    outer.watch(x)
    with tf.GradientTape() as inner:
        inner.watch(x)
        y = cube(x)
    dy_dx = inner.gradient(y, x)
print("cube:", float(y), "first:", float(dy_dx), "second:", float(outer.gradient(dy_dx, x)))


@tf.function
def stable_grads(x):
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = tf.reduce_sum(log1pexp(x))
    return tape.gradient(y, x)


print("in tf.function:", np.round(stable_grads(tf.constant([0.0, 100.0])).numpy(), 6).tolist())
