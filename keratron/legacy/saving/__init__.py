"""`keras.legacy.saving`: tf.keras 2's `serialize_keras_object` / `deserialize_keras_object`."""

from keratron.legacy.saving.serialization import deserialize_keras_object, serialize_keras_object

__all__ = ["deserialize_keras_object", "serialize_keras_object"]
