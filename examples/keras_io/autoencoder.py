"""Convolutional autoencoder for image denoising (keras-io example `autoencoder`).

On the digits in MNIST's format instead of MNIST.
"""

import numpy as np
from _data import load_mnist_like

import keratron as keras
from keratron import layers

keras.utils.set_random_seed(1337)


def preprocess(array):
    """Normalizes the supplied array and reshapes it."""
    array = array.astype("float32") / 255.0
    array = np.reshape(array, (len(array), 28, 28, 1))
    return array


def noise(array):
    """Adds random noise to each image in the supplied array."""
    noise_factor = 0.4
    noisy_array = array + noise_factor * np.random.normal(loc=0.0, scale=1.0, size=array.shape)
    return np.clip(noisy_array, 0.0, 1.0)


(train_data, _), (test_data, _) = load_mnist_like()
train_data = preprocess(train_data)
test_data = preprocess(test_data)
noisy_train_data = noise(train_data)
noisy_test_data = noise(test_data)

input = layers.Input(shape=(28, 28, 1))
# Encoder
x = layers.Conv2D(32, (3, 3), activation="relu", padding="same")(input)
x = layers.MaxPooling2D((2, 2), padding="same")(x)
x = layers.Conv2D(32, (3, 3), activation="relu", padding="same")(x)
x = layers.MaxPooling2D((2, 2), padding="same")(x)
# Decoder
x = layers.Conv2DTranspose(32, (3, 3), strides=2, activation="relu", padding="same")(x)
x = layers.Conv2DTranspose(32, (3, 3), strides=2, activation="relu", padding="same")(x)
x = layers.Conv2D(1, (3, 3), activation="sigmoid", padding="same")(x)

autoencoder = keras.Model(input, x)
autoencoder.compile(optimizer="adam", loss="binary_crossentropy")
autoencoder.summary()

# Train on clean images, then as a denoiser (noisy -> clean)
autoencoder.fit(
    x=train_data,
    y=train_data,
    epochs=2,
    batch_size=128,
    shuffle=True,
    validation_data=(test_data, test_data),
    verbose=0,
)
history = autoencoder.fit(
    x=noisy_train_data,
    y=train_data,
    epochs=3,
    batch_size=128,
    shuffle=True,
    validation_data=(noisy_test_data, test_data),
    verbose=0,
)
print(f"denoising val loss: {history.history['val_loss'][-1]:.4f}")
