"""`keras.optimizers.legacy`: tf.keras 2's optimizer classes, which Keras 3 does not support.

As in Keras 3, the names exist (so that code importing them still imports) and constructing
any of them raises an ImportError that says what to use instead.
"""

__all__ = ["Adagrad", "Adam", "Ftrl", "Optimizer", "RMSprop", "SGD"]


class LegacyOptimizerWarning:
    """Stands for every `keras.optimizers.legacy` class; constructing it raises.

    Raises:
        ImportError: always, naming the Keras 2 route (`tf_keras`) and the Keras 3 optimizers.

    Example:
        >>> keratron.optimizers.legacy.Adam(learning_rate=0.1)
        Traceback (most recent call last):
        ImportError: `keras.optimizers.legacy` is not supported in Keras 3. ...
    """

    def __init__(self, *args, **kwargs):
        raise ImportError(
            "`keras.optimizers.legacy` is not supported in Keras 3. When using `tf.keras`, "
            "to continue using a `tf.keras.optimizers.legacy` optimizer, you can install the "
            "`tf_keras` package (Keras 2) and set the environment variable "
            "`TF_USE_LEGACY_KERAS=True` to configure TensorFlow to use `tf_keras` when "
            "accessing `tf.keras`. In keratron, use the optimizers of `keratron.optimizers` "
            "(the same names and arguments)."
        )


Adagrad = Adam = Ftrl = Optimizer = RMSprop = SGD = LegacyOptimizerWarning
