"""Imbalanced classification: credit card fraud detection (keras-io example).

Synthetic transactions of the Kaggle set's shape (30 features, ~1% fraud), made with a fixed
seed, instead of the downloaded CSV.
"""

import numpy as np

import keratron as keras

# Synthetic data: 30 features; the frauds are shifted along a few directions
rng = np.random.RandomState(1337)
n = 20000
targets = (rng.random_sample(n) < 0.01).astype("uint8")
features = rng.normal(size=(n, 30)).astype("float32")
shift = np.zeros(30, "float32")
shift[[1, 3, 9, 13, 16]] = [2.0, -2.0, 1.6, -2.2, 1.8]
features[targets == 1] += shift
features[:, 29] = np.abs(features[:, 29]) * 80.0  # the "Amount" column
targets = targets.reshape(-1, 1)
print("features.shape:", features.shape)
print("targets.shape:", targets.shape)

# Prepare a validation set
num_val_samples = int(len(features) * 0.2)
train_features = features[:-num_val_samples]
train_targets = targets[:-num_val_samples]
val_features = features[-num_val_samples:]
val_targets = targets[-num_val_samples:]
print("Number of training samples:", len(train_features))
print("Number of validation samples:", len(val_features))

# Analyze class imbalance in the targets
counts = np.bincount(train_targets[:, 0])
print(
    f"Number of positive samples in training data: {counts[1]} "
    f"({100 * float(counts[1]) / len(train_targets):.2f}% of total)"
)
weight_for_0 = 1.0 / counts[0]
weight_for_1 = 1.0 / counts[1]

# Normalize the data using training set statistics
mean = np.mean(train_features, axis=0)
train_features -= mean
val_features -= mean
std = np.std(train_features, axis=0)
train_features /= std
val_features /= std

keras.utils.set_random_seed(1337)
model = keras.Sequential(
    [
        keras.Input(shape=train_features.shape[1:]),
        keras.layers.Dense(256, activation="relu"),
        keras.layers.Dense(256, activation="relu"),
        keras.layers.Dropout(0.3),
        keras.layers.Dense(256, activation="relu"),
        keras.layers.Dropout(0.3),
        keras.layers.Dense(1, activation="sigmoid"),
    ]
)
model.summary()

metrics = [
    keras.metrics.FalseNegatives(name="fn"),
    keras.metrics.FalsePositives(name="fp"),
    keras.metrics.TrueNegatives(name="tn"),
    keras.metrics.TruePositives(name="tp"),
    keras.metrics.Precision(name="precision"),
    keras.metrics.Recall(name="recall"),
]
model.compile(optimizer=keras.optimizers.Adam(1e-2), loss="binary_crossentropy", metrics=metrics)
class_weight = {0: weight_for_0, 1: weight_for_1}
model.fit(
    train_features,
    train_targets,
    batch_size=2048,
    epochs=10,
    verbose=0,
    validation_data=(val_features, val_targets),
    class_weight=class_weight,
)
logs = model.evaluate(val_features, val_targets, verbose=0, return_dict=True)
print(f"frauds caught: {int(logs['tp'])} of {int(logs['tp'] + logs['fn'])}")
print(f"val recall: {float(logs['recall']):.4f}")
