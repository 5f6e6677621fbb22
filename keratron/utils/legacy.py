"""`keras.utils.legacy`: tf.keras 2's `serialize_keras_object` / `deserialize_keras_object`.

They are defined in `keratron.legacy.saving`, on the saving floor above utils; utils does not
import that floor, so the top-level package installs them here (as it installs
`keratron.utils.serialize_keras_object`), one definition under both of Keras's paths.
"""

__all__: list = []
