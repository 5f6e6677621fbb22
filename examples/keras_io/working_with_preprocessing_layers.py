"""Working with preprocessing layers (keras-io guide), in its backend-agnostic form.

The guide's examples with numpy arrays where the TensorFlow form used `tf.constant` and
`tf.data` pipelines (text is vectorized by calling the layer on the batch), leaving out the
end-to-end models that take strings as input (string tensors exist only in TensorFlow). The
normalization example trains on the bundled digits instead of CIFAR-10, and the image
augmentation example builds its ResNet50 without training it.
"""

import numpy as np
from _data import load_digits

import keratron as keras
from keratron import layers

keras.utils.set_random_seed(1337)

# The adapt() method
data = np.array([[0.1, 0.2, 0.3], [0.8, 0.9, 1.0], [1.5, 1.6, 1.7]])
layer = layers.Normalization()
layer.adapt(data)
normalized_data = keras.ops.convert_to_numpy(layer(data))

print(f"Features mean: {normalized_data.mean():.2f}")
print(f"Features std: {normalized_data.std():.2f}")

data = np.array(
    [
        "ξεῖν᾽, ἦ τοι μὲν ὄνειροι ἀμήχανοι ἀκριτόμυθοι",
        "γίγνοντ᾽, οὐδέ τι πάντα τελείεται ἀνθρώποισι.",
        "δοιαὶ γάρ τε πύλαι ἀμενηνῶν εἰσὶν ὀνείρων:",
        "αἱ μὲν γὰρ κεράεσσι τετεύχαται, αἱ δ᾽ ἐλέφαντι:",
        "τῶν οἳ μέν κ᾽ ἔλθωσι διὰ πριστοῦ ἐλέφαντος,",
        "οἵ ῥ᾽ ἐλεφαίρονται, ἔπε᾽ ἀκράαντα φέροντες:",
        "οἱ δὲ διὰ ξεστῶν κεράων ἔλθωσι θύραζε,",
        "οἵ ῥ᾽ ἔτυμα κραίνουσι, βροτῶν ὅτε κέν τις ἴδηται.",
    ]
)
layer = layers.TextVectorization()
layer.adapt(data)
vectorized_text = layer(data)
print("vectorized text:", keras.ops.convert_to_numpy(vectorized_text).tolist())

# Passing a vocabulary instead of adapting
vocab = ["a", "b", "c", "d"]
data = np.array([["a", "c", "d"], ["d", "z", "b"]])
layer = layers.StringLookup(vocabulary=vocab)
vectorized_data = layer(data)
print("string lookup:", keras.ops.convert_to_numpy(vectorized_data).tolist())

# Image data augmentation
data_augmentation = keras.Sequential(
    [
        layers.RandomFlip("horizontal"),
        layers.RandomRotation(0.1),
        layers.RandomZoom(0.1),
    ]
)
input_shape = (32, 32, 3)
classes = 10
images = np.random.randint(0, 256, size=(16,) + input_shape).astype("float32")
augmented = data_augmentation(images, training=True)
print("augmented batch:", tuple(augmented.shape))

inputs = keras.Input(shape=input_shape)
x = layers.Rescaling(1.0 / 255)(inputs)  # Rescale inputs
outputs = keras.applications.ResNet50(  # Add the rest of the model
    weights=None, input_shape=input_shape, classes=classes
)(x)
model = keras.Model(inputs, outputs)
print("ResNet50 parameters:", model.count_params())

# Normalizing numerical features
(x_train, y_train), (x_test, y_test) = load_digits()
x_train = x_train.reshape((len(x_train), -1)).astype("float32")
x_test = x_test.reshape((len(x_test), -1)).astype("float32")
input_shape = x_train.shape[1:]
classes = 10

# Create a Normalization layer and set its internal state using the training data
normalizer = layers.Normalization()
normalizer.adapt(x_train)

# Create a model that include the normalization layer
inputs = keras.Input(shape=input_shape)
x = normalizer(inputs)
outputs = layers.Dense(classes, activation="softmax")(x)
model = keras.Model(inputs, outputs)

# Train the model
model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
model.fit(x_train, y_train, epochs=10, verbose=0)
_, test_accuracy = model.evaluate(x_test, y_test, verbose=0)

# Encoding string categorical features via one-hot encoding
vocab = ["a", "b", "c"]
lookup = layers.StringLookup(vocabulary=vocab, output_mode="one_hot")
test_data = np.array(["a", "b", "c", "d", "e", ""])
encoded_data = lookup(test_data)
print("one-hot strings:", keras.ops.convert_to_numpy(encoded_data).tolist())

# Encoding integer categorical features via one-hot encoding
data = np.array([10, 20, 20, 10, 30, 0])
lookup = layers.IntegerLookup(output_mode="one_hot")
lookup.adapt(data)
test_data = np.array([10, 10, 20, 50, 60, 0])
encoded_data = lookup(test_data)
print("one-hot integers:", keras.ops.convert_to_numpy(encoded_data).tolist())

# Applying the hashing trick to an integer categorical feature
data = np.random.randint(0, 100000, size=(10000, 1))
hasher = layers.Hashing(num_bins=64, salt=1337)
encoder = layers.CategoryEncoding(num_tokens=64, output_mode="multi_hot")
encoded_data = encoder(hasher(data))
print("hashed:", tuple(encoded_data.shape))

# Encoding text as a sequence of token indices
adapt_data = np.array(
    [
        "The Brain is wider than the Sky",
        "For put them side by side",
        "The one the other will contain",
        "With ease and You beside",
    ]
)
text_vectorizer = layers.TextVectorization(output_mode="int")
text_vectorizer.adapt(adapt_data)
print(
    "Encoded text:",
    keras.ops.convert_to_numpy(text_vectorizer(["The Brain is deeper than the sea"])).tolist(),
)

inputs = keras.Input(shape=(None,), dtype="int64")
x = layers.Embedding(input_dim=text_vectorizer.vocabulary_size(), output_dim=16)(inputs)
x = layers.GRU(8)(x)
outputs = layers.Dense(1)(x)
model = keras.Model(inputs, outputs)

train_x = text_vectorizer(["The Brain is deeper than the sea", "for if they are held Blue to Blue"])
train_y = np.array([1.0, 0.0])
model.compile(optimizer="rmsprop", loss="mse")
model.fit(train_x, train_y, batch_size=2, verbose=0)
print(
    "Model output:",
    model.predict(text_vectorizer(["The one is the other will absorb"]), verbose=0).shape,
)

# Encoding text as a dense matrix of N-grams with multi-hot encoding
text_vectorizer = layers.TextVectorization(output_mode="multi_hot", ngrams=2)
text_vectorizer.adapt(adapt_data)
print(
    "Encoded bigrams:",
    keras.ops.convert_to_numpy(text_vectorizer(["The Brain is deeper than the sea"])).tolist(),
)

inputs = keras.Input(shape=(text_vectorizer.vocabulary_size(),))
outputs = layers.Dense(1)(inputs)
model = keras.Model(inputs, outputs)
model.compile(optimizer="rmsprop", loss="mse")
model.fit(
    text_vectorizer(["The Brain is deeper than the sea", "for if they are held Blue to Blue"]),
    train_y,
    verbose=0,
)

# Encoding text as a dense matrix of N-grams with TF-IDF weighting
text_vectorizer = layers.TextVectorization(output_mode="tf_idf", ngrams=2)
text_vectorizer.adapt(adapt_data)
tf_idf = keras.ops.convert_to_numpy(text_vectorizer(["The Brain is deeper than the sea"]))
print("TF-IDF:", np.round(tf_idf, 4).tolist())

print(f"test accuracy: {test_accuracy:.4f}")
