"""Timeseries classification from scratch (keras-io example
`timeseries_classification_from_scratch`).

On FordA-shaped synthetic series (`_data.readucr_forda_like`) instead of the FordA download:
shorter series (128 steps), fewer of them, and 20 epochs instead of 500 with the callbacks'
patience scaled to match, so that it runs in seconds on a CPU. The checkpoint goes to a
temporary folder.
"""

import os
import tempfile

import numpy as np
from _data import readucr_forda_like

import keratron as keras

keras.utils.set_random_seed(1337)

x_train, y_train = readucr_forda_like("train", length=128)
x_test, y_test = readucr_forda_like("test", length=128)

x_train = x_train.reshape((x_train.shape[0], x_train.shape[1], 1))
x_test = x_test.reshape((x_test.shape[0], x_test.shape[1], 1))

num_classes = len(np.unique(y_train))

idx = np.random.permutation(len(x_train))
x_train = x_train[idx]
y_train = y_train[idx]

y_train[y_train == -1] = 0
y_test[y_test == -1] = 0


def make_model(input_shape):
    input_layer = keras.layers.Input(input_shape)

    conv1 = keras.layers.Conv1D(filters=64, kernel_size=3, padding="same")(input_layer)
    conv1 = keras.layers.BatchNormalization()(conv1)
    conv1 = keras.layers.ReLU()(conv1)

    conv2 = keras.layers.Conv1D(filters=64, kernel_size=3, padding="same")(conv1)
    conv2 = keras.layers.BatchNormalization()(conv2)
    conv2 = keras.layers.ReLU()(conv2)

    conv3 = keras.layers.Conv1D(filters=64, kernel_size=3, padding="same")(conv2)
    conv3 = keras.layers.BatchNormalization()(conv3)
    conv3 = keras.layers.ReLU()(conv3)

    gap = keras.layers.GlobalAveragePooling1D()(conv3)

    output_layer = keras.layers.Dense(num_classes, activation="softmax")(gap)

    return keras.models.Model(inputs=input_layer, outputs=output_layer)


model = make_model(input_shape=x_train.shape[1:])

epochs = 20
batch_size = 32
best_model = os.path.join(tempfile.mkdtemp(), "best_model.keras")

callbacks = [
    keras.callbacks.ModelCheckpoint(best_model, save_best_only=True, monitor="val_loss"),
    keras.callbacks.ReduceLROnPlateau(monitor="val_loss", factor=0.5, patience=5, min_lr=0.0001),
    keras.callbacks.EarlyStopping(monitor="val_loss", patience=10, verbose=1),
]
model.compile(
    optimizer="adam",
    loss="sparse_categorical_crossentropy",
    metrics=["sparse_categorical_accuracy"],
)
history = model.fit(
    x_train,
    y_train,
    batch_size=batch_size,
    epochs=epochs,
    callbacks=callbacks,
    validation_split=0.2,
    verbose=0,
)

model = keras.models.load_model(best_model)

test_loss, test_acc = model.evaluate(x_test, y_test, verbose=0)

print("Test accuracy", test_acc)
print("Test loss", test_loss)
print(f"test accuracy: {test_acc:.4f}")
