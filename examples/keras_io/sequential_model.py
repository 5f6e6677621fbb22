"""The Sequential model (keras-io guide `sequential_model`), on the bundled digits."""

import numpy as np
from _data import load_digits

import keratron as keras
from keratron import layers

keras.utils.set_random_seed(1337)

# Define Sequential model with 3 layers
model = keras.Sequential(
    [
        layers.Dense(2, activation="relu", name="layer1"),
        layers.Dense(3, activation="relu", name="layer2"),
        layers.Dense(4, name="layer3"),
    ]
)
# Call model on a test input
x = keras.ops.ones((3, 3))
y = model(x)
print("output shape:", tuple(y.shape))

# Incrementally with add(), and pop()
model = keras.Sequential(name="my_sequential")
model.add(layers.Dense(2, activation="relu", name="layer1"))
model.add(layers.Dense(3, activation="relu", name="layer2"))
model.add(layers.Dense(4, name="layer3"))
model.pop()
print("layers after pop:", len(model.layers))

# A model with no input shape has no weights until it is first called
layer = layers.Dense(3)
print("weights before build:", len(layer.weights))
x = keras.ops.ones((1, 4))
y = layer(x)
print("weights after build:", len(layer.weights))

# Specifying the input shape in advance, and summary()
model = keras.Sequential()
model.add(keras.Input(shape=(4,)))
model.add(layers.Dense(2, activation="relu"))
model.summary()

# A common debugging workflow: add() + summary()
model = keras.Sequential()
model.add(keras.Input(shape=(250, 250, 3)))
model.add(layers.Conv2D(32, 5, strides=2, activation="relu"))
model.add(layers.Conv2D(32, 3, activation="relu"))
model.add(layers.MaxPooling2D(3))
model.add(layers.Conv2D(32, 3, activation="relu"))
model.add(layers.GlobalMaxPooling2D())
model.add(layers.Dense(10))
print("conv stack output shape:", model.output_shape)

# Feature extraction with a Sequential model
initial_model = keras.Sequential(
    [
        keras.Input(shape=(250, 250, 3)),
        layers.Conv2D(32, 5, strides=2, activation="relu"),
        layers.Conv2D(32, 3, activation="relu", name="my_intermediate_layer"),
        layers.Conv2D(32, 3, activation="relu"),
    ]
)
feature_extractor = keras.Model(
    inputs=initial_model.inputs,
    outputs=initial_model.get_layer(name="my_intermediate_layer").output,
)
features = feature_extractor(np.ones((1, 250, 250, 3), dtype="float32"))
print("features shape:", tuple(features.shape))

# Training a Sequential model (the guide points to the training guide; digits instead of MNIST)
(x_train, y_train), (x_test, y_test) = load_digits()
x_train = x_train.reshape(-1, 64).astype("float32") / 16
x_test = x_test.reshape(-1, 64).astype("float32") / 16
model = keras.Sequential(
    [
        keras.Input(shape=(64,)),
        layers.Dense(64, activation="relu"),
        layers.Dense(64, activation="relu"),
        layers.Dense(10, activation="softmax"),
    ]
)
model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
model.fit(x_train, y_train, batch_size=32, epochs=10, verbose=0)
loss, acc = model.evaluate(x_test, y_test, verbose=0)
print(f"test accuracy: {acc:.4f}")
