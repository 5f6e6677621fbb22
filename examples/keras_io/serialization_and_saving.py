"""Save, serialize, and export models (keras-io guide `serialization_and_saving`)."""

import os
import tempfile

import numpy as np
from _data import load_digits

import keratron as keras

keras.utils.set_random_seed(1337)
tmp = tempfile.mkdtemp()
(x_train, y_train), (x_test, y_test) = load_digits()
x_train = x_train.reshape(-1, 64).astype("float32") / 16
x_test = x_test.reshape(-1, 64).astype("float32") / 16


def get_model():
    inputs = keras.Input(shape=(64,))
    x = keras.layers.Dense(64, activation="relu")(inputs)
    outputs = keras.layers.Dense(10)(x)
    model = keras.Model(inputs, outputs)
    model.compile(
        optimizer=keras.optimizers.Adam(),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    return model


model = get_model()
model.fit(x_train, y_train, epochs=5, batch_size=32, verbose=0)
path = os.path.join(tmp, "my_model.keras")
model.save(path)
reconstructed_model = keras.models.load_model(path)
np.testing.assert_allclose(
    model.predict(x_test, verbose=0), reconstructed_model.predict(x_test, verbose=0)
)
reconstructed_model.fit(x_train, y_train, epochs=1, verbose=0)


# Custom objects: registered, with get_config / from_config
@keras.saving.register_keras_serializable(package="my_package", name="custom_fn")
def custom_fn(x):
    return x**2


@keras.saving.register_keras_serializable(package="MyLayers")
class CustomLayer(keras.layers.Layer):
    def __init__(self, factor, **kwargs):
        super().__init__(**kwargs)
        self.factor = factor

    def call(self, x):
        return x * self.factor

    def get_config(self):
        config = super().get_config()
        config.update({"factor": self.factor})
        return config


@keras.saving.register_keras_serializable(package="my_package", name="MyDense")
class MyDense(keras.layers.Layer):
    def __init__(self, units, **kwargs):
        super().__init__(**kwargs)
        self.units = units

    def build(self, input_shape):
        self.w = self.add_weight(shape=(input_shape[-1], self.units), initializer="random_normal")
        self.b = self.add_weight(shape=(self.units,), initializer="zeros")

    def call(self, x):
        return keras.ops.matmul(x, self.w) + self.b

    def get_config(self):
        return {**super().get_config(), "units": self.units}


inputs = keras.Input(shape=(64,))
x = MyDense(32)(inputs)
x = CustomLayer(0.5)(x)
x = keras.layers.Activation(custom_fn)(x)
outputs = keras.layers.Dense(10)(x)
model = keras.Model(inputs, outputs)
model.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
model.fit(x_train, y_train, epochs=1, verbose=0)
model.save(os.path.join(tmp, "custom_model.keras"))
reloaded = keras.saving.load_model(os.path.join(tmp, "custom_model.keras"))
np.testing.assert_allclose(
    model.predict(x_test, verbose=0), reloaded.predict(x_test, verbose=0), atol=1e-6
)

# Config-only: get_config / from_config, clone_model, to_json / model_from_json
config = model.get_config()
new_model = keras.Model.from_config(config)
cloned = keras.models.clone_model(model)
json_config = model.to_json()
from_json = keras.models.model_from_json(json_config)
print("config round trips:", len(new_model.layers), len(cloned.layers), len(from_json.layers))

# Weights only: get_weights / set_weights, save_weights / load_weights
new_model.set_weights(model.get_weights())
np.testing.assert_allclose(
    model.predict(x_test, verbose=0), new_model.predict(x_test, verbose=0), atol=1e-6
)
model.save_weights(os.path.join(tmp, "model.weights.h5"))
from_json.load_weights(os.path.join(tmp, "model.weights.h5"))
np.testing.assert_allclose(
    model.predict(x_test, verbose=0), from_json.predict(x_test, verbose=0), atol=1e-6
)

acc = reconstructed_model.evaluate(x_test, y_test, verbose=0)[1]
print(f"test accuracy: {acc:.4f}")
