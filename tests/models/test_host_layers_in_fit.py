"""fit / evaluate / predict on a model that holds host-side preprocessing layers.

`StringLookup`, `IntegerLookup`, `TextVectorization`, `Hashing` and `HashedCrossing` compute on
numpy, so a traced step cannot run them; Keras runs such models (its torch backend is eager, its
TensorFlow backend has the layers as graph ops). The trainer steps these models eagerly.
"""

import numpy as np

import keratron as keras
from keratron import layers


def _lookup_model():
    code = keras.Input(shape=(1,), dtype="int64", name="code")
    amount = keras.Input(shape=(1,), name="amount")
    lookup = layers.IntegerLookup(output_mode="one_hot")
    lookup.adapt(np.array([10, 20, 30, 20, 10]))
    x = layers.concatenate([lookup(code), amount])
    output = layers.Dense(1, activation="sigmoid")(x)
    return keras.Model([code, amount], output)


def test_fit_evaluate_predict_with_integer_lookup_inside_the_model():
    keras.utils.set_random_seed(0)
    rng = np.random.RandomState(0)
    codes = rng.choice([10, 20, 30], size=(256, 1))
    amounts = rng.normal(size=(256, 1)).astype("float32")
    labels = (codes[:, 0] == 20).astype("float32")  # only the one-hot code tells the label
    model = _lookup_model()
    model.compile(optimizer=keras.optimizers.Adam(0.1), loss="binary_crossentropy")
    history = model.fit([codes, amounts], labels, batch_size=32, epochs=15, verbose=0)
    assert history.history["loss"][-1] < 0.1
    assert not model.run_eagerly  # the user's setting is left alone
    assert model.evaluate([codes, amounts], labels, verbose=0) < 0.1
    probe = model.predict([np.array([[10], [20], [30], [99]]), np.zeros((4, 1))], verbose=0)
    assert probe.shape == (4, 1)
    assert probe[1, 0] > 0.9 and probe[0, 0] < 0.1 and probe[2, 0] < 0.1
