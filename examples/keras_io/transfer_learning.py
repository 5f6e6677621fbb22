"""Transfer learning & fine-tuning (keras-io guide), in its backend-agnostic form.

The guide's sections on `trainable`, freezing and recursive freezing, then its end-to-end
workflow: a frozen base model called with `training=False` under a new head, trained, then
unfrozen and fine-tuned at a low learning rate. Instead of downloading an ImageNet Xception, the
script first trains a tiny convolutional base to classify 1,000 grey digits, then transfers it
to telling odd from even digits in colour images, on the other digits, in place of cats vs.
dogs (`_data.load_transfer_images`). Images are resized and augmented by layers inside the
model instead of in a `tf.data` pipeline; the head trains for 20 epochs and the fine-tuning for
3 (the guide: 2 and 1 on 9,305 images). As in the guide, `BinaryAccuracy` thresholds the logits
at 0.5. As in Keras 3, `fit`'s `training=True` overrides the `training=False` the base model was
called with, so once the base is unfrozen its BatchNormalization normalises by batch statistics
and updates its moving ones (keras-team/keras#20285), whatever the guide's comments say.
"""

import numpy as np
from _data import load_transfer_images

import keratron as keras
from keratron import layers

keras.utils.set_random_seed(1337)

# Freezing layers: understanding the trainable attribute
layer = keras.layers.Dense(3)
layer.build((None, 4))  # Create the weights

print("weights:", len(layer.weights))
print("trainable_weights:", len(layer.trainable_weights))
print("non_trainable_weights:", len(layer.non_trainable_weights))

layer = keras.layers.BatchNormalization()
layer.build((None, 4))  # Create the weights

print("weights:", len(layer.weights))
print("trainable_weights:", len(layer.trainable_weights))
print("non_trainable_weights:", len(layer.non_trainable_weights))

layer = keras.layers.Dense(3)
layer.build((None, 4))  # Create the weights
layer.trainable = False  # Freeze the layer

print("weights:", len(layer.weights))
print("trainable_weights:", len(layer.trainable_weights))
print("non_trainable_weights:", len(layer.non_trainable_weights))

# Make a model with 2 layers
layer1 = keras.layers.Dense(3, activation="relu")
layer2 = keras.layers.Dense(3, activation="sigmoid")
model = keras.Sequential([keras.Input(shape=(3,)), layer1, layer2])

# Freeze the first layer
layer1.trainable = False

# Keep a copy of the weights of layer1 for later reference
initial_layer1_weights_values = layer1.get_weights()

# Train the model
model.compile(optimizer="adam", loss="mse")
model.fit(np.random.random((2, 3)), np.random.random((2, 3)), verbose=0)

# Check that the weights of layer1 have not changed during training
final_layer1_weights_values = layer1.get_weights()
np.testing.assert_allclose(initial_layer1_weights_values[0], final_layer1_weights_values[0])
np.testing.assert_allclose(initial_layer1_weights_values[1], final_layer1_weights_values[1])

# Recursive setting of the trainable attribute
inner_model = keras.Sequential(
    [
        keras.Input(shape=(3,)),
        keras.layers.Dense(3, activation="relu"),
        keras.layers.Dense(3, activation="relu"),
    ]
)

model = keras.Sequential(
    [
        keras.Input(shape=(3,)),
        inner_model,
        keras.layers.Dense(3, activation="sigmoid"),
    ]
)

model.trainable = False  # Freeze the outer model

assert inner_model.trainable == False  # All layers in `model` are now frozen  # noqa: E712
assert inner_model.layers[0].trainable == False  # `trainable` is propagated recursively  # noqa: E712

# An end-to-end example: fine-tuning an image classification model
(source_x, source_y), (x_train, y_train), (x_val, y_val), (x_test, y_test) = load_transfer_images()
print(f"Number of training samples: {len(x_train)}")
print(f"Number of validation samples: {len(x_val)}")
print(f"Number of test samples: {len(x_test)}")

augmentation_layers = [
    layers.RandomFlip("horizontal"),
    layers.RandomRotation(0.1),
]


def data_augmentation(x):
    for layer in augmentation_layers:
        x = layer(x)
    return x


# The base model: a tiny convnet first trained to classify grey digits
base_model = keras.Sequential(
    [
        keras.Input(shape=(32, 32, 3)),
        layers.Conv2D(32, 3, strides=2, padding="same", use_bias=False),
        layers.BatchNormalization(),
        layers.ReLU(),
        layers.Conv2D(64, 3, strides=2, padding="same", activation="relu"),
        layers.Conv2D(128, 3, strides=2, padding="same", activation="relu"),
    ],
    name="base_model",
)
source_x = np.repeat(source_x[..., None], 3, axis=-1)
pretraining = keras.Sequential(
    [
        keras.Input(shape=(28, 28, 3)),
        keras.layers.Resizing(32, 32),
        keras.layers.Rescaling(scale=1 / 127.5, offset=-1),
        base_model,
        keras.layers.GlobalAveragePooling2D(),
        keras.layers.Dense(10),
    ]
)
pretraining.compile(
    optimizer="adam",
    loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    metrics=["accuracy"],
)
pretraining.fit(source_x, source_y, batch_size=32, epochs=10, verbose=0)

# Freeze the base_model
base_model.trainable = False

# Create new model on top
inputs = keras.Input(shape=(28, 28, 3))
x = keras.layers.Resizing(32, 32)(inputs)
x = data_augmentation(x)  # Apply random data augmentation

# Pre-trained weights require that input be scaled
# from (0, 255) to a range of (-1., +1.), the rescaling layer
# outputs: `(inputs * scale) + offset`
scale_layer = keras.layers.Rescaling(scale=1 / 127.5, offset=-1)
x = scale_layer(x)

# The base model contains batchnorm layers. We want to keep them in inference mode
# when we unfreeze the base model for fine-tuning, so we make sure that the
# base_model is running in inference mode here.
x = base_model(x, training=False)
x = keras.layers.GlobalAveragePooling2D()(x)
x = keras.layers.Dropout(0.2)(x)  # Regularize with dropout
outputs = keras.layers.Dense(1)(x)
model = keras.Model(inputs, outputs)

model.summary(show_trainable=True)

model.compile(
    optimizer=keras.optimizers.Adam(),
    loss=keras.losses.BinaryCrossentropy(from_logits=True),
    metrics=[keras.metrics.BinaryAccuracy()],
)

epochs = 20
print("Fitting the top layer of the model")
model.fit(x_train, y_train, batch_size=16, epochs=epochs, validation_data=(x_val, y_val), verbose=0)

# Do a round of fine-tuning of the entire model
# Unfreeze the base_model. Note that it keeps running in inference mode
# since we passed `training=False` when calling it. This means that
# the batchnorm layers will not update their batch statistics.
# This prevents the batchnorm layers from undoing all the training
# we've done so far.
base_model.trainable = True
model.summary(show_trainable=True)

model.compile(
    optimizer=keras.optimizers.Adam(1e-5),  # Low learning rate
    loss=keras.losses.BinaryCrossentropy(from_logits=True),
    metrics=[keras.metrics.BinaryAccuracy()],
)

epochs = 3
print("Fitting the end-to-end model")
model.fit(x_train, y_train, batch_size=16, epochs=epochs, validation_data=(x_val, y_val), verbose=0)

print("Test dataset evaluation")
_, test_accuracy = model.evaluate(x_test, y_test, verbose=0)
print(f"test accuracy: {test_accuracy:.4f}")
