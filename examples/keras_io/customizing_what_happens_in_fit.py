"""Customizing what happens in fit() (keras-io guide), in its backend-agnostic form.

The backend-agnostic hooks: `compute_loss` and `test_step` written with `keras.ops`, with
metrics tracked by the model; on the bundled digits.
"""

from _data import load_digits

import keratron as keras
from keratron import layers, metrics, ops

keras.utils.set_random_seed(1337)


class CustomModel(keras.Model):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.loss_tracker = metrics.Mean(name="loss")
        self.mae_metric = metrics.MeanAbsoluteError(name="mae")
        self.acc_metric = metrics.SparseCategoricalAccuracy(name="acc")

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        # Cross-entropy on logits, plus the guide's small L2 term on the outputs.
        xent = ops.mean(keras.losses.sparse_categorical_crossentropy(y, y_pred, from_logits=True))
        return xent + 1e-4 * ops.mean(ops.square(y_pred))

    def test_step(self, data):
        x, y = data
        y_pred = self(x, training=False)
        loss = self.compute_loss(y=y, y_pred=y_pred, training=False)
        self.loss_tracker.update_state(loss)
        self.acc_metric.update_state(y, y_pred)
        self.mae_metric.update_state(ops.one_hot(y, 10), ops.softmax(y_pred))
        return {m.name: m.result() for m in self.metrics}

    @property
    def metrics(self):
        return [self.loss_tracker, self.mae_metric, self.acc_metric]


(x_train, y_train), (x_test, y_test) = load_digits()
x_train = x_train.reshape(1500, 64).astype("float32") / 16
x_test = x_test.reshape(297, 64).astype("float32") / 16

inputs = keras.Input(shape=(64,))
x = layers.Dense(64, activation="relu")(inputs)
x = layers.Dense(64, activation="relu")(x)
outputs = layers.Dense(10)(x)
model = CustomModel(inputs, outputs)
model.compile(optimizer="adam")
model.fit(x_train, y_train, batch_size=32, epochs=10, verbose=0)
logs = model.evaluate(x_test, y_test, verbose=0, return_dict=True)
print("evaluate logs:", sorted(logs))
print(f"test accuracy: {float(logs['acc']):.4f}")
