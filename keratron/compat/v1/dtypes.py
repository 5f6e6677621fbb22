"""TensorFlow's dtype constants (`tf.float32`, ...), shared by `compat.v1` and `compat.v2`."""

from keratron.compat.v1.framework import as_dtype

float16 = as_dtype("float16")
bfloat16 = as_dtype("bfloat16")
float32 = as_dtype("float32")
float64 = as_dtype("float64")
int8 = as_dtype("int8")
int16 = as_dtype("int16")
int32 = as_dtype("int32")
int64 = as_dtype("int64")
uint8 = as_dtype("uint8")
uint16 = as_dtype("uint16")
bool = as_dtype("bool")  # noqa: A001
string = as_dtype("string")
complex64 = as_dtype("complex64")
complex128 = as_dtype("complex128")
