"""Customizing Saving and Serialization (keras-io guide), in its backend-agnostic form.

The guide's hooks `save_assets` / `load_assets`, `get_build_config` / `build_from_config` and
`get_compile_config` / `compile_from_config`, each checked by a save and reload through a
`.keras` file (in a temporary folder). Its `save_own_variables` / `load_own_variables` section is
left out: it fails under Keras 3.15.1 itself (the layer's `my_variable` is tracked, so
`self.weights` lists it first and the guide's loading loop assigns the kernel's value to it). To
end with a figure, the custom-build model is then trained on a small synthetic task and
reloaded.
"""

import os
import tempfile

import numpy as np

import keratron as keras

keras.utils.set_random_seed(1337)
tmp = tempfile.mkdtemp()


# Assets saving customization
@keras.saving.register_keras_serializable(package="my_custom_package")
class LayerWithCustomAssets(keras.layers.Dense):
    def __init__(self, vocab=None, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.vocab = vocab

    def save_assets(self, inner_path):
        # Writes the vocab (sentence) to text file at save time.
        with open(os.path.join(inner_path, "vocabulary.txt"), "w") as f:
            f.write(self.vocab)

    def load_assets(self, inner_path):
        # Reads the vocab (sentence) from text file at load time.
        with open(os.path.join(inner_path, "vocabulary.txt")) as f:
            text = f.read()
        self.vocab = text.replace("<unk>", "little")


model = keras.Sequential([LayerWithCustomAssets(vocab="Mary had a <unk> lamb.", units=5)])

x = np.random.random((10, 10))
y = model(x)

model.save(os.path.join(tmp, "custom_assets_model.keras"))
restored_model = keras.models.load_model(os.path.join(tmp, "custom_assets_model.keras"))

np.testing.assert_string_equal(restored_model.layers[0].vocab, "Mary had a little lamb.")
print("restored vocab:", restored_model.layers[0].vocab)


# build and compile saving customization
@keras.saving.register_keras_serializable(package="my_custom_package")
class LayerWithCustomBuild(keras.layers.Layer):
    def __init__(self, units=32, **kwargs):
        super().__init__(**kwargs)
        self.units = units

    def call(self, inputs):
        return keras.ops.matmul(inputs, self.w) + self.b

    def get_config(self):
        return dict(units=self.units, **super().get_config())

    def build(self, input_shape, layer_init):
        # Note the overriding of `build()` to add an extra argument.
        # Therefore, we will need to manually call build with `layer_init` argument
        # before the first execution of `call()`.
        super().build(input_shape)
        self._input_shape = input_shape
        self.w = self.add_weight(
            shape=(input_shape[-1], self.units),
            initializer=layer_init,
        )
        self.b = self.add_weight(
            shape=(self.units,),
            initializer=layer_init,
        )
        self.layer_init = layer_init

    def get_build_config(self):
        build_config = {
            "layer_init": self.layer_init,
            "input_shape": self._input_shape,
        }  # Stores our initializer for `build()`
        return build_config

    def build_from_config(self, config):
        # Calls `build()` with the parameters in the configuration
        self.build(config["input_shape"], config["layer_init"])


custom_layer = LayerWithCustomBuild(units=16)
custom_layer.build(input_shape=(8,), layer_init="random_normal")

model = keras.Sequential(
    [
        custom_layer,
        keras.layers.Dense(1, activation="sigmoid"),
    ]
)

x = np.random.random((16, 8))
y = model(x)

model.save(os.path.join(tmp, "custom_build_model.keras"))
restored_model = keras.models.load_model(os.path.join(tmp, "custom_build_model.keras"))

np.testing.assert_equal(restored_model.layers[0].layer_init, "random_normal")
np.testing.assert_equal(restored_model.built, True)
print("custom build restored")


@keras.saving.register_keras_serializable(package="my_custom_package")
class ModelWithCustomCompile(keras.Model):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.dense = keras.layers.Dense(8, activation="relu")
        self.model_outputs = keras.layers.Dense(4, activation="sigmoid")

    def call(self, x):
        x = self.dense(x)
        return self.model_outputs(x)

    def compile(self, optimizer, loss_fn, metrics):
        super().compile(optimizer=optimizer, loss=loss_fn, metrics=metrics)
        self.model_optimizer = optimizer
        self.loss_fn = loss_fn
        self.loss_metrics = metrics

    def get_compile_config(self):
        # These parameters will be serialized at saving time.
        return {
            "model_optimizer": self.model_optimizer,
            "loss_fn": self.loss_fn,
            "metric": self.loss_metrics,
        }

    def compile_from_config(self, config):
        # Deserializes the compile parameters (important, since many are custom)
        optimizer = keras.utils.deserialize_keras_object(config["model_optimizer"])
        loss_fn = keras.utils.deserialize_keras_object(config["loss_fn"])
        metrics = keras.utils.deserialize_keras_object(config["metric"])

        # Calls compile with the deserialized parameters
        self.compile(optimizer=optimizer, loss_fn=loss_fn, metrics=metrics)


model = ModelWithCustomCompile()
model.compile(optimizer="SGD", loss_fn="mse", metrics=["mean_squared_error"])

x = np.random.random((4, 8))
y = np.random.random((4,))

model.fit(x, y, verbose=0)

model.save(os.path.join(tmp, "custom_compile_model.keras"))
restored_model = keras.models.load_model(os.path.join(tmp, "custom_compile_model.keras"))

np.testing.assert_equal(model.model_optimizer, restored_model.model_optimizer)
np.testing.assert_equal(model.loss_fn, restored_model.loss_fn)
np.testing.assert_equal(model.loss_metrics, restored_model.loss_metrics)
print("custom compile restored")

# A figure: the custom-build model trained on a small task, then reloaded
x_train = np.random.normal(size=(800, 8)).astype("float32")
y_train = (x_train[:, :4].sum(axis=1) > x_train[:, 4:].sum(axis=1)).astype("float32")
x_test = np.random.normal(size=(200, 8)).astype("float32")
y_test = (x_test[:, :4].sum(axis=1) > x_test[:, 4:].sum(axis=1)).astype("float32")

custom_layer = LayerWithCustomBuild(units=16)
custom_layer.build(input_shape=(8,), layer_init="random_normal")
model = keras.Sequential([custom_layer, keras.layers.Dense(1, activation="sigmoid")])
model.compile(optimizer="adam", loss="binary_crossentropy", metrics=["accuracy"])
model.fit(x_train, y_train, batch_size=32, epochs=5, verbose=0)
model.save(os.path.join(tmp, "trained_custom_build_model.keras"))
restored_model = keras.models.load_model(os.path.join(tmp, "trained_custom_build_model.keras"))
np.testing.assert_allclose(
    model.predict(x_test, verbose=0), restored_model.predict(x_test, verbose=0), rtol=1e-6
)
_, test_accuracy = restored_model.evaluate(x_test, y_test, verbose=0)
print(f"test accuracy: {test_accuracy:.4f}")
