"""Premade Estimators (the TensorFlow 2 guide): a `tf.estimator.DNNClassifier` on Iris-like
data, fed by `input_fn`s that return `tf.data.Dataset`s.

The flowers are synthetic, 150 per species drawn around the species means and spreads of
Fisher's Iris data from a seeded NumPy generator (no download), shuffled and split 360 / 90.
`tf.estimator` left TensorFlow in 2.16; under a TensorFlow without it the program prints the
input pipeline's figures and stops there.
"""

import numpy as np

import keratron.compat.v2 as tf

CSV_COLUMN_NAMES = ["SepalLength", "SepalWidth", "PetalLength", "PetalWidth", "Species"]
SPECIES = ["Setosa", "Versicolor", "Virginica"]
MEANS = [[5.006, 3.428, 1.462, 0.246], [5.936, 2.770, 4.260, 1.326], [6.588, 2.974, 5.552, 2.026]]
STDS = [[0.352, 0.379, 0.174, 0.105], [0.516, 0.314, 0.470, 0.198], [0.636, 0.322, 0.552, 0.275]]


def load_data(seed=0):
    rng = np.random.default_rng(seed)
    x = np.concatenate([rng.normal(m, s, size=(150, 4)) for m, s in zip(MEANS, STDS)])
    y = np.repeat(np.arange(3), 150)
    order = rng.permutation(len(y))
    x, y = np.round(np.abs(x[order]), 1).astype("float32"), y[order].astype("int32")
    split = int(0.8 * len(y))
    as_dict = lambda a: {name: a[:, i] for i, name in enumerate(CSV_COLUMN_NAMES[:4])}  # noqa: E731
    return (as_dict(x[:split]), y[:split]), (as_dict(x[split:]), y[split:])


(train, train_y), (test, test_y) = load_data()


def input_fn(features, labels, training=True, batch_size=256):
    """An input function for training or evaluating."""
    dataset = tf.data.Dataset.from_tensor_slices((dict(features), labels))
    if training:
        dataset = dataset.shuffle(1000).repeat()
    return dataset.batch(batch_size)


# The input pipeline (figures independent of any random draw).
features, labels = next(iter(input_fn(test, test_y, training=False, batch_size=4)))
print("feature keys:", sorted(features))
print("first batch:", [features[k].numpy().tolist() for k in sorted(features)])
print("first labels:", labels.numpy().tolist())
batches = [int(b[1].shape[0]) for b in input_fn(test, test_y, training=False, batch_size=32)]
print("eval batches:", batches)
my_feature_columns = [tf.feature_column.numeric_column(key=key) for key in sorted(train)]
print("feature columns:", [(c.key, tuple(c.shape)) for c in my_feature_columns])

if not hasattr(tf, "estimator"):
    print("tf.estimator: not in TensorFlow", tf.__version__)
    raise SystemExit(0)

classifier = tf.estimator.DNNClassifier(
    feature_columns=my_feature_columns,
    hidden_units=[30, 10],
    n_classes=3,
    config=tf.estimator.RunConfig(tf_random_seed=0),
)
classifier.train(input_fn=lambda: input_fn(train, train_y, training=True), steps=1000)
eval_result = classifier.evaluate(input_fn=lambda: input_fn(test, test_y, training=False))
print("Test set accuracy: {accuracy:0.3f}".format(**eval_result))
print("global step:", int(eval_result["global_step"]))

expected = ["Setosa", "Versicolor", "Virginica"]
predict_x = {
    "SepalLength": [5.1, 5.9, 6.9],
    "SepalWidth": [3.3, 3.0, 3.1],
    "PetalLength": [1.7, 4.2, 5.4],
    "PetalWidth": [0.5, 1.5, 2.1],
}


def predict_input_fn(features, batch_size=256):
    """An input function for prediction."""
    return tf.data.Dataset.from_tensor_slices(dict(features)).batch(batch_size)


predictions = classifier.predict(input_fn=lambda: predict_input_fn(predict_x))
for pred_dict, expec in zip(predictions, expected):
    class_id = pred_dict["class_ids"][0]
    probability = pred_dict["probabilities"][class_id]
    print(f'Prediction is "{SPECIES[class_id]}" ({100 * probability:.1f}%), expected "{expec}"')
