"""Customizing what happens in `fit()` with TensorFlow (keras-io guide), on synthetic data.

A Keras model overrides `train_step` with a `tf.GradientTape`: first with the compiled loss
and metrics (`compute_loss`, `self.metrics`), then at a lower level with its own loss tracker
and metric, then with sample weights, and with its own `test_step` for `evaluate()`. The
regression data come from a seeded NumPy generator and the models start from zero weights, so
every figure printed is the same wherever the program runs.
"""

import numpy as np

import keratron as keras
import keratron.compat.v2 as tf
from keratron import layers

rng = np.random.default_rng(0)
x = rng.random((1000, 32)).astype("float32")
y = (x @ rng.random((32, 1)) / 8 + 0.1 * rng.random((1000, 1))).astype("float32")
sw = rng.random((1000, 1)).astype("float32")


def make(model_class, **compile_kwargs):
    inputs = keras.Input(shape=(32,))
    outputs = layers.Dense(1, kernel_initializer="zeros")(inputs)
    model = model_class(inputs, outputs)
    model.compile(**compile_kwargs)
    return model


def report(label, history):
    for name, values in sorted(history.history.items()):
        print(label, name, [round(float(v), 4) for v in values])


# 1. train_step with the compiled loss and metrics.
class CustomModel(keras.Model):
    def train_step(self, data):
        x, y = data
        with tf.GradientTape() as tape:
            y_pred = self(x, training=True)
            loss = self.compute_loss(y=y, y_pred=y_pred)
        trainable_vars = self.trainable_variables
        gradients = tape.gradient(loss, trainable_vars)
        self.optimizer.apply(gradients, trainable_vars)
        for metric in self.metrics:
            if metric.name == "loss":
                metric.update_state(loss)
            else:
                metric.update_state(y, y_pred)
        return {m.name: m.result() for m in self.metrics}


model = make(CustomModel, optimizer="adam", loss="mse", metrics=["mae"])
report("compiled", model.fit(x, y, epochs=3, batch_size=32, shuffle=False, verbose=0))

# 2. Lower level: the model's own loss tracker and metric.
loss_tracker = keras.metrics.Mean(name="loss")
mae_metric = keras.metrics.MeanAbsoluteError(name="mae")


class LowLevelModel(keras.Model):
    def train_step(self, data):
        x, y = data
        with tf.GradientTape() as tape:
            y_pred = self(x, training=True)
            loss = keras.losses.mean_squared_error(y, y_pred)
        trainable_vars = self.trainable_variables
        gradients = tape.gradient(loss, trainable_vars)
        self.optimizer.apply(gradients, trainable_vars)
        loss_tracker.update_state(loss)
        mae_metric.update_state(y, y_pred)
        return {"loss": loss_tracker.result(), "mae": mae_metric.result()}

    @property
    def metrics(self):
        return [loss_tracker, mae_metric]


model = make(LowLevelModel, optimizer="adam")
report("low-level", model.fit(x, y, epochs=3, batch_size=32, shuffle=False, verbose=0))


# 3. Sample weights.
class WeightedModel(keras.Model):
    def train_step(self, data):
        if len(data) == 3:
            x, y, sample_weight = data
        else:
            sample_weight = None
            x, y = data
        with tf.GradientTape() as tape:
            y_pred = self(x, training=True)
            loss = self.compute_loss(y=y, y_pred=y_pred, sample_weight=sample_weight)
        trainable_vars = self.trainable_variables
        gradients = tape.gradient(loss, trainable_vars)
        self.optimizer.apply(gradients, trainable_vars)
        for metric in self.metrics:
            if metric.name == "loss":
                metric.update_state(loss)
            else:
                metric.update_state(y, y_pred, sample_weight=sample_weight)
        return {m.name: m.result() for m in self.metrics}


model = make(WeightedModel, optimizer="adam", loss="mse", metrics=["mae"])
report("weighted", model.fit(x, y, sample_weight=sw, epochs=3, shuffle=False, verbose=0))


# 4. A custom test_step.
class EvalModel(keras.Model):
    def test_step(self, data):
        x, y = data
        y_pred = self(x, training=False)
        loss = self.compute_loss(y=y, y_pred=y_pred)
        for metric in self.metrics:
            if metric.name == "loss":
                metric.update_state(loss)
            else:
                metric.update_state(y, y_pred)
        return {m.name: m.result() for m in self.metrics}


model = make(EvalModel, loss="mse", metrics=["mae"])
kernel = np.linspace(-0.5, 0.5, 32, dtype="float32")[:, None]
model.layers[-1].set_weights([kernel, np.array([0.25], dtype="float32")])
results = model.evaluate(x, y, batch_size=100, verbose=0, return_dict=True)
print("evaluate", {k: round(float(v), 4) for k, v in sorted(results.items())})
