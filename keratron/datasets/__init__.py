"""Small real data sets shipped inside the package (no download needed), and Keras's
download-and-cache loaders (mnist, fashion_mnist, cifar10, cifar100, imdb, reuters,
boston_housing, california_housing).

Each module has a `load_data()` returning NumPy arrays, as Keras's dataset modules do.
"""

from keratron.datasets import (
    boston_housing,
    california_housing,
    cifar10,
    cifar100,
    digits,
    fashion_mnist,
    imdb,
    iris,
    mnist,
    reuters,
)

__all__ = [
    "boston_housing",
    "california_housing",
    "cifar10",
    "cifar100",
    "digits",
    "fashion_mnist",
    "imdb",
    "iris",
    "mnist",
    "reuters",
]
