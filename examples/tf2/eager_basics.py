"""Eager execution basics (the TensorFlow 2.0 guide), with synthetic data.

Tensors and NumPy interop, Python control flow on tensor values, `tf.GradientTape` (persistent
tapes, higher-order gradients), a custom training loop for a linear model, `tf.Module` and a
`tf.keras.Model` subclass holding `tf.Variable`s, object-oriented metrics, and `tf.function`
with Python control flow. Every figure it prints is independent of random draws: the data come
from a seeded NumPy generator and the model starts from fixed weights.
"""

import numpy as np

import keratron.compat.v2 as tf

print("executing eagerly:", tf.executing_eagerly())

# Tensors and NumPy.
x = [[2.0]]
m = tf.matmul(x, x)
print("hello,", m.numpy())
a = tf.constant([[1, 2], [3, 4]])
print("a", a.numpy().tolist(), a.shape, a.dtype == tf.int32)
b = tf.add(a, 1)
print("b", b.numpy().tolist())
print("a * b", (a * b).numpy().tolist())
c = np.multiply(a, b)
print("np.multiply", type(c).__name__, c.tolist())
print("reduce_sum", int(tf.reduce_sum(a)), "matmul", tf.matmul(a, b).numpy().tolist())


# Dynamic control flow on eager values.
def fizzbuzz(max_num):
    counter = tf.constant(0)
    max_num = tf.convert_to_tensor(max_num)
    words = []
    for num in range(1, max_num.numpy() + 1):
        num = tf.constant(num)
        if int(num % 3) == 0 and int(num % 5) == 0:
            words.append("FizzBuzz")
        elif int(num % 3) == 0:
            words.append("Fizz")
        elif int(num % 5) == 0:
            words.append("Buzz")
        else:
            words.append(str(num.numpy()))
        counter += 1
    print("fizzbuzz", " ".join(words), "counter", int(counter))


fizzbuzz(15)

# Gradient tapes.
w = tf.Variable([[1.0]])
with tf.GradientTape() as tape:
    loss = w * w
print("d(w*w)/dw", tape.gradient(loss, w).numpy().tolist())

x = tf.ones((2, 2))
with tf.GradientTape() as t:
    t.watch(x)
    y = tf.reduce_sum(x)
    z = tf.multiply(y, y)
print("dz/dx", t.gradient(z, x).numpy().tolist())

x = tf.constant(3.0)
with tf.GradientTape(persistent=True) as t:
    t.watch(x)
    y = x * x
    z = y * y
print("persistent dz/dx", float(t.gradient(z, x)), "dy/dx", float(t.gradient(y, x)))
del t

x = tf.Variable(1.0)
with tf.GradientTape() as t:
    with tf.GradientTape() as t2:
        y = x * x * x
    dy_dx = t2.gradient(y, x)
d2y_dx2 = t.gradient(dy_dx, x)
print("dy/dx", float(dy_dx), "d2y/dx2", float(d2y_dx2))


def f(x, y):
    output = 1.0
    for i in range(y):
        if i > 1 and i < 5:
            output = tf.multiply(output, x)
    return output


def grad(x, y):
    with tf.GradientTape() as t:
        t.watch(x)
        out = f(x, y)
    return t.gradient(out, x)


x = tf.convert_to_tensor(2.0)
print("control-flow grads", float(grad(x, 6)), float(grad(x, 5)), float(grad(x, 4)))

x = tf.Variable(2.0)
with tf.GradientTape() as t:
    y = tf.constant(3.0) * tf.stop_gradient(x) + x
print("stop_gradient", float(t.gradient(y, x)))
with tf.GradientTape() as t:
    y = x * tf.constant(2.0)
print("unconnected", t.gradient(tf.constant(1.0), x), "watched", len(t.watched_variables()))


# A custom training loop for a linear model.
class Linear(tf.keras.Model):
    def __init__(self):
        super().__init__()
        self.W = tf.Variable(5.0, name="weight")
        self.B = tf.Variable(10.0, name="bias")

    def call(self, inputs):
        return inputs * self.W + self.B


rng = np.random.default_rng(0)
NUM_EXAMPLES = 2000
training_inputs = tf.constant(rng.normal(size=NUM_EXAMPLES).astype("float32"))
noise = tf.constant(rng.normal(size=NUM_EXAMPLES).astype("float32"))
training_outputs = training_inputs * 3 + 2 + noise


def loss(model, inputs, targets):
    error = model(inputs) - targets
    return tf.reduce_mean(tf.square(error))


def grad(model, inputs, targets):
    with tf.GradientTape() as tape:
        loss_value = loss(model, inputs, targets)
    return tape.gradient(loss_value, [model.W, model.B])


model = Linear()
optimizer = tf.keras.optimizers.SGD(learning_rate=0.01)
print(f"Initial loss: {float(loss(model, training_inputs, training_outputs)):.4f}")
for i in range(300):
    grads = grad(model, training_inputs, training_outputs)
    optimizer.apply_gradients(zip(grads, [model.W, model.B]))
    if i % 50 == 0:
        print(f"Loss at step {i:03d}: {float(loss(model, training_inputs, training_outputs)):.4f}")
print(f"Final loss: {float(loss(model, training_inputs, training_outputs)):.4f}")
print(f"W = {model.W.numpy():.4f}, B = {model.B.numpy():.4f}")


# Variables in modules.
class MyModuleOne(tf.Module):
    def __init__(self):
        self.v0 = tf.Variable(1.0)
        self.vs = [tf.Variable(x) for x in range(10)]


class MyOtherModule(tf.Module):
    def __init__(self):
        self.m = MyModuleOne()
        self.v = tf.Variable(10.0)


m = MyOtherModule()
print("module variables", len(m.variables), [float(v.numpy()) for v in m.variables][:3])


class Dense(tf.Module):
    def __init__(self, in_features, out_features, name=None):
        super().__init__(name=name)
        self.w = tf.Variable(tf.ones([in_features, out_features]), name="w")
        self.b = tf.Variable(tf.zeros([out_features]), name="b", trainable=False)

    def __call__(self, x):
        return tf.nn.relu(tf.matmul(x, self.w) + self.b)


layer = Dense(3, 2, name="dense_module")
print("module", layer.name, len(layer.trainable_variables), len(layer.variables))
print("module call", layer(tf.constant([[1.0, -2.0, 4.0]])).numpy().tolist())

# Object-oriented metrics.
m = tf.keras.metrics.Mean("loss")
m(0)
m(5)
print("mean", float(m.result()))
m([8, 9])
print("mean", float(m.result()))


# tf.function with Python control flow.
@tf.function
def square_if_positive(x):
    if x > 0:
        x = x * x
    else:
        x = x * 0
    return x


print("square_if_positive", int(square_if_positive(tf.constant(2))),
      int(square_if_positive(tf.constant(-2))))  # fmt: skip


@tf.function
def sum_even(items):
    s = 0
    for c in items:
        if c % 2 > 0:
            continue
        s += c
    return s


print("sum_even", int(sum_even(tf.constant([10, 12, 15, 20]))))


@tf.function
def dense_step(x, w):
    return tf.reduce_sum(tf.nn.relu(tf.matmul(x, w)))


print("traced", float(dense_step(tf.ones((2, 3)), tf.ones((3, 4)))))


@tf.function
def collatz(x):
    steps = tf.constant(0)
    while x > 1:
        x = tf.where(x % 2 == 0, x // 2, 3 * x + 1)
        steps += 1
    return steps


@tf.function
def sum_to(n):
    total = tf.constant(0)
    for i in tf.range(n):
        total += i
    return total


print("collatz(27)", int(collatz(tf.constant(27))), "sum_to(10)", int(sum_to(tf.constant(10))))
