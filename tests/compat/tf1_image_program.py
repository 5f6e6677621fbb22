"""The deterministic tf.image ops (and their gradients) in one TF1 program, run by
tests/compat/test_v1_image_queues.py under keratron and recorded under TensorFlow 2.20:

    KERAS_BACKEND=tensorflow python tests/compat/tf1_image_program.py tf \
        > tests/compat/tf1_image_tf.json

It prints a JSON object."""

import json
import sys

import numpy as np


def run(tf):
    IMG = ((np.arange(2 * 3 * 2, dtype=np.float32).reshape(2, 3, 2) * 7) % 11) / 10.0
    BATCH = np.stack([IMG, IMG[::-1] * 2.0])
    x = tf.constant(IMG)
    b = tf.constant(BATCH)
    I = tf.image  # noqa: E741, N806
    cases = {
        "std": I.per_image_standardization(x),
        "std_batch": I.per_image_standardization(b),
        "std_const": I.per_image_standardization(tf.ones([2, 2, 1])),
        "contrast": I.adjust_contrast(x, 1.7),
        "contrast_batch": I.adjust_contrast(b, 0.5),
        "brightness": I.adjust_brightness(x, 0.25),
        "flip": I.flip_left_right(b),
        "flip_ud": I.flip_up_down(x),
        "resize_bilinear": I.resize_images(x, [4, 5]),
        "resize_nearest": I.resize_images(b, [3, 2], method=I.ResizeMethod.NEAREST_NEIGHBOR),
        "crop_or_pad": I.resize_image_with_crop_or_pad(x, 3, 2),
    }
    wts = {
        k: np.cos(np.arange(np.prod(v.shape.as_list())))
        .reshape(v.shape.as_list())
        .astype(np.float32)
        for k, v in cases.items()
    }
    grads = {
        k + "_grad": tf.gradients(
            tf.reduce_sum(cases[k] * wts[k]), b if "batch" in k or k == "flip" else x
        )[0]
        for k in ("std", "std_batch", "resize_bilinear")
    }
    with tf.Session() as s:
        return {k: np.asarray(v).round(6).tolist() for k, v in s.run({**cases, **grads}).items()}


if __name__ == "__main__":
    if sys.argv[1] == "tf":
        import tensorflow.compat.v1 as tf

        tf.disable_v2_behavior()
    else:
        import keratron.compat.v1 as tf
    with tf.Graph().as_default():
        print(json.dumps(run(tf)))
