"""Local stand-ins for the datasets the keras-io guides download.

Numpy only, so that the same script runs under keratron and under Keras (to record the figure
Keras reaches). The digits are the UCI 8x8 digits that keratron ships
(`keratron/datasets/data/digits.csv.gz`), split exactly as `keratron.datasets.digits.load_data`
splits them; `load_mnist_like` scales them to MNIST's 28x28 uint8 format.
"""

import gzip
from pathlib import Path

import numpy as np

_DIGITS = Path(__file__).resolve().parents[2] / "keratron" / "datasets" / "data" / "digits.csv.gz"


def load_digits():
    """`(x_train, y_train), (x_test, y_test)`: uint8 8x8 images (0..16), uint8 labels."""
    with gzip.open(_DIGITS, "rt") as f:
        table = np.loadtxt(f, delimiter=",", dtype=np.int64, ndmin=2)
    x = table[:, :64].reshape(-1, 8, 8).astype(np.uint8)
    y = table[:, 64].astype(np.uint8)
    order = np.random.RandomState(1337).permutation(len(x))
    train, test = order[:1500], order[1500:]
    return (x[train], y[train]), (x[test], y[test])


def load_mnist_like():
    """The digits in MNIST's format: uint8 28x28 images with values 0..255 (3x upscale, 2px pad)."""
    (x_train, y_train), (x_test, y_test) = load_digits()

    def to_mnist(x):
        x = np.kron(x.astype(np.float32) * (255.0 / 16.0), np.ones((1, 3, 3), np.float32))
        return np.pad(x, ((0, 0), (2, 2), (2, 2))).round().astype(np.uint8)

    return (to_mnist(x_train), y_train), (to_mnist(x_test), y_test)


def load_imdb_like(num_words=20000, num_train=1000, num_test=300, max_length=100, seed=1337):
    """IMDB in `keras.datasets.imdb.load_data`'s format: reviews are lists of word indices.

    Index 1 starts each review and words start at index 3, as in Keras's loader. Words are drawn
    Zipf-like from the vocabulary; about one word in five is a sentiment word, from the label's
    own set of 50 (indices 20..69 positive, 70..119 negative) four times out of five, so a review
    is usually, but not always, told apart by counting them. Returns object arrays of lists and
    int64 labels, `(x_train, y_train), (x_test, y_test)`.
    """
    rng = np.random.RandomState(seed)
    ranks = np.arange(1, num_words - 3 + 1, dtype=np.float64)
    word_p = 1.0 / ranks
    word_p /= word_p.sum()

    def split(n):
        y = rng.randint(0, 2, size=n).astype(np.int64)
        reviews = []
        for label in y:
            length = rng.randint(max_length // 5, max_length + 1)
            words = 3 + rng.choice(num_words - 3, size=length, p=word_p)
            sentiment = rng.rand(length) < 0.2
            own = rng.rand(length) < 0.8
            polarity = np.where(own, label, 1 - label)
            sentiment_words = np.where(polarity == 1, 20, 70) + rng.randint(0, 50, size=length)
            words = np.where(sentiment, sentiment_words, words)
            reviews.append([1] + [int(w) for w in words])
        x = np.empty(n, dtype=object)
        x[:] = reviews
        return x, y

    return split(num_train), split(num_test)


def readucr_forda_like(split, num_samples=None, length=500, seed=1337):
    """FordA's `.tsv` split as the example's `readucr` returns it: `x` (n, length) float64
    series and `y` int labels in {-1, 1}.

    A class-1 series holds a short burst of a faster oscillation somewhere in it, on top of a
    noisy random-phase base wave that both classes share; the burst's amplitude varies, so that
    some series are hard to tell apart. Each series is standardised, as FordA's are.
    """
    num_samples = num_samples or (720 if split == "train" else 240)
    rng = np.random.RandomState(seed + (0 if split == "train" else 1))
    t = np.arange(length, dtype=np.float64)
    y = np.where(rng.rand(num_samples) < 0.5, -1, 1)
    x = np.empty((num_samples, length))
    for i in range(num_samples):
        base = np.sin(2 * np.pi * t / rng.uniform(40, 80) + rng.uniform(0, 2 * np.pi))
        series = base + rng.normal(0.0, 0.5, size=length)
        if y[i] == 1:
            start = rng.randint(0, length - length // 4)
            span = slice(start, start + length // 4)
            series[span] += rng.uniform(0.4, 1.5) * np.sin(2 * np.pi * t[span] / 6.0)
        x[i] = (series - series.mean()) / series.std()
    return x, y.astype(int)


def load_heart_like(num_rows=1000, seed=1337):
    """A table shaped like the Cleveland heart-disease CSV of the structured-data examples, as a
    dict of numpy columns (a dataframe's `dict(df)`).

    Integer-coded categories (`sex`, `cp`, `fbs`, `restecg`, `exang`, `ca`), numbers (`age`,
    `trestbps`, `chol`, `thalach`, `oldpeak`, `slope`), the string category `thal` ("fixed",
    "normal", "reversible") and the 0/1 `target`, drawn from a logistic model of the features
    with some categories pushing the odds up and others down.
    """
    rng = np.random.RandomState(seed)
    n = num_rows
    table = {
        "age": rng.normal(54, 9, n).round().astype(np.int64),
        "sex": (rng.rand(n) < 0.68).astype(np.int64),
        "cp": rng.choice(5, n, p=[0.05, 0.2, 0.25, 0.4, 0.1]).astype(np.int64),
        "trestbps": rng.normal(131, 17, n).round().astype(np.int64),
        "chol": rng.normal(246, 52, n).round().astype(np.int64),
        "fbs": (rng.rand(n) < 0.15).astype(np.int64),
        "restecg": rng.choice(3, n, p=[0.5, 0.05, 0.45]).astype(np.int64),
        "thalach": rng.normal(150, 23, n).round().astype(np.int64),
        "exang": (rng.rand(n) < 0.33).astype(np.int64),
        "oldpeak": rng.exponential(1.0, n).round(1),
        "slope": rng.choice([1, 2, 3], n, p=[0.45, 0.45, 0.1]).astype(np.int64),
        "ca": rng.choice(4, n, p=[0.58, 0.22, 0.13, 0.07]).astype(np.int64),
        "thal": rng.choice(["fixed", "normal", "reversible"], n, p=[0.07, 0.55, 0.38]),
    }
    logit = (
        -3.0
        + 0.04 * (table["age"] - 54)
        + 0.8 * table["sex"]
        + np.array([0.0, -0.8, -0.4, 1.2, 0.2])[table["cp"]]
        + 0.02 * (table["trestbps"] - 131)
        - 0.03 * (table["thalach"] - 150)
        + 1.0 * table["exang"]
        + 0.6 * table["oldpeak"]
        + 0.7 * table["ca"]
        + np.where(table["thal"] == "reversible", 1.3, np.where(table["thal"] == "fixed", 0.5, 0))
    )
    table["target"] = (rng.rand(n) < 1.0 / (1.0 + np.exp(-logit))).astype(np.int64)
    return table


def load_transfer_images(seed=1337):
    """Digits for the transfer-learning guide, as `source, train, validation, test` pairs.

    All 1,797 digits in MNIST's format (`load_mnist_like`), shuffled: the first 1,000 are the
    source task (grey 28x28 uint8 images, labels 0..9); the other 797 become colour images (each
    grey image times a random RGB tint in [0.4, 1]) labelled 1 for an odd digit and 0 for an even
    one, split 400 / 200 / 197 into training, validation and test sets.
    """
    (x_a, y_a), (x_b, y_b) = load_mnist_like()
    x = np.concatenate([x_a, x_b])
    y = np.concatenate([y_a, y_b]).astype(np.int64)
    rng = np.random.RandomState(seed)
    order = rng.permutation(len(x))
    x, y = x[order], y[order]
    source = (x[:1000], y[:1000])
    x, y = x[1000:], y[1000:] % 2
    tint = rng.uniform(0.4, 1.0, size=(len(x), 1, 1, 3))
    x = (x[..., None].astype(np.float32) * tint).round().astype(np.uint8)
    return source, (x[:400], y[:400]), (x[400:600], y[400:600]), (x[600:], y[600:])
