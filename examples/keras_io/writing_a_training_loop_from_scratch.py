"""Writing a training loop from scratch in TensorFlow (keras-io guide), on the bundled digits.

The guide's TensorFlow form: `tf.GradientTape` for the gradients, `tf.data` batches, Keras
metrics updated by hand, the loop compiled with `tf.function`, and a layer's `add_loss`
collected in `model.losses`. `run_with_keras.py` runs it under TensorFlow and Keras.
"""

import time

import numpy as np
from _data import load_digits

import keratron as keras
import keratron.compat.v2 as tf

keras.utils.set_random_seed(1337)


def get_model():
    inputs = keras.Input(shape=(64,), name="digits")
    x1 = keras.layers.Dense(64, activation="relu")(inputs)
    x2 = keras.layers.Dense(64, activation="relu")(x1)
    outputs = keras.layers.Dense(10, name="predictions")(x2)
    return keras.Model(inputs=inputs, outputs=outputs)


batch_size = 32
(x_train, y_train), (x_test, y_test) = load_digits()
x_train = np.reshape(x_train, (-1, 64)).astype("float32") / 16
x_test = np.reshape(x_test, (-1, 64)).astype("float32") / 16
y_train, y_test = y_train.astype("int32"), y_test.astype("int32")
x_val, y_val = x_train[-300:], y_train[-300:]
x_train, y_train = x_train[:-300], y_train[:-300]

train_dataset = tf.data.Dataset.from_tensor_slices((x_train, y_train))
train_dataset = train_dataset.shuffle(buffer_size=1024).batch(batch_size)
val_dataset = tf.data.Dataset.from_tensor_slices((x_val, y_val)).batch(batch_size)

# An end-to-end eager loop.
model = get_model()
optimizer = keras.optimizers.Adam(learning_rate=1e-3)
loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
for epoch in range(2):
    print(f"Start of epoch {epoch}")
    for step, (x_batch_train, y_batch_train) in enumerate(train_dataset):
        with tf.GradientTape() as tape:
            logits = model(x_batch_train, training=True)
            loss_value = loss_fn(y_batch_train, logits)
        grads = tape.gradient(loss_value, model.trainable_weights)
        optimizer.apply(grads, model.trainable_weights)
        if step % 20 == 0:
            print(f"Training loss (for 1 batch) at step {step}: {float(loss_value):.4f}")

# Metrics, and the same steps compiled with tf.function.
model = get_model()
optimizer = keras.optimizers.Adam(learning_rate=1e-3)
train_acc_metric = keras.metrics.SparseCategoricalAccuracy()
val_acc_metric = keras.metrics.SparseCategoricalAccuracy()


@tf.function
def train_step(x, y):
    with tf.GradientTape() as tape:
        logits = model(x, training=True)
        loss_value = loss_fn(y, logits)
    grads = tape.gradient(loss_value, model.trainable_weights)
    optimizer.apply(grads, model.trainable_weights)
    train_acc_metric.update_state(y, logits)
    return loss_value


@tf.function
def test_step(x, y):
    val_logits = model(x, training=False)
    val_acc_metric.update_state(y, val_logits)


for epoch in range(10):
    start_time = time.time()
    for x_batch_train, y_batch_train in train_dataset:
        loss_value = train_step(x_batch_train, y_batch_train)
    train_acc = train_acc_metric.result()
    train_acc_metric.reset_state()
    for x_batch_val, y_batch_val in val_dataset:
        test_step(x_batch_val, y_batch_val)
    val_acc = val_acc_metric.result()
    val_acc_metric.reset_state()
    print(f"epoch {epoch}: train acc {float(train_acc):.4f}, val acc {float(val_acc):.4f}")
print(f"Time taken: {time.time() - start_time:.2f}s")

test_logits = model(x_test, training=False)
test_acc = tf.reduce_mean(
    tf.cast(tf.equal(tf.argmax(test_logits, axis=1, output_type=tf.int32), y_test), tf.float32)
)
print(f"test accuracy: {float(test_acc):.4f}")


# Losses a layer adds with add_loss are in model.losses, summed into the step's loss.
class ActivityRegularizationLayer(keras.layers.Layer):
    def call(self, inputs):
        self.add_loss(1e-2 * tf.reduce_sum(inputs))
        return inputs


inputs = keras.Input(shape=(64,), name="digits")
x = keras.layers.Dense(64, activation="relu")(inputs)
x = ActivityRegularizationLayer()(x)
x = keras.layers.Dense(64, activation="relu")(x)
outputs = keras.layers.Dense(10, name="predictions")(x)
model = keras.Model(inputs=inputs, outputs=outputs)
optimizer = keras.optimizers.Adam(learning_rate=1e-3)


@tf.function
def train_step_with_losses(x, y):
    with tf.GradientTape() as tape:
        logits = model(x, training=True)
        loss_value = loss_fn(y, logits)
        loss_value += sum(model.losses)
    grads = tape.gradient(loss_value, model.trainable_weights)
    optimizer.apply(grads, model.trainable_weights)
    return loss_value


for x_batch_train, y_batch_train in train_dataset:
    loss_value = train_step_with_losses(x_batch_train, y_batch_train)
print(f"loss with activity regularization: {float(loss_value):.4f}")
