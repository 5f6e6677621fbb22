"""Bidirectional LSTM on IMDB (keras-io example `bidirectional_lstm_imdb`).

On IMDB-shaped synthetic reviews (`_data.load_imdb_like`) instead of the IMDB download, with
shorter reviews, fewer of them and one epoch, so that it runs in seconds on a CPU.
"""

from _data import load_imdb_like

import keratron as keras
from keratron import layers

keras.utils.set_random_seed(1337)

max_features = 20000  # Only consider the top 20k words
maxlen = 80  # Only consider the first 80 words of each movie review

# Input for variable-length sequences of integers
inputs = keras.Input(shape=(None,), dtype="int32")
# Embed each integer in a 128-dimensional vector
x = layers.Embedding(max_features, 128)(inputs)
# Add 2 bidirectional LSTMs
x = layers.Bidirectional(layers.LSTM(64, return_sequences=True))(x)
x = layers.Bidirectional(layers.LSTM(64))(x)
# Add a classifier
outputs = layers.Dense(1, activation="sigmoid")(x)
model = keras.Model(inputs, outputs)
model.summary()

(x_train, y_train), (x_val, y_val) = load_imdb_like(num_words=max_features)
print(len(x_train), "Training sequences")
print(len(x_val), "Validation sequences")
# Use pad_sequence to standardize sequence length:
# this will truncate sequences longer than 80 words and zero-pad sequences shorter than 80 words.
x_train = keras.utils.pad_sequences(x_train, maxlen=maxlen)
x_val = keras.utils.pad_sequences(x_val, maxlen=maxlen)

model.compile(optimizer="adam", loss="binary_crossentropy", metrics=["accuracy"])
history = model.fit(
    x_train, y_train, batch_size=32, epochs=3, validation_data=(x_val, y_val), verbose=0
)
print(f"val accuracy: {history.history['val_accuracy'][-1]:.4f}")
