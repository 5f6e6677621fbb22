"""Training checkpoints (the TensorFlow 2 guide): `tf.train.Checkpoint` of a model, its
optimizer, a step counter and the dataset iterator, managed by `tf.train.CheckpointManager`.

The toy data are the guide's (no download). The network starts from fixed weights, so the
losses are the same wherever the program runs. A second model, optimizer and iterator restore
the last checkpoint and train on from where the first stopped; `assert_consumed`,
`assert_existing_objects_matched` and `expect_partial` check what a restore matched; list and
dict attributes of a Checkpoint are tracked.
"""

import os
import tempfile

import numpy as np

import keratron.compat.v2 as tf

WORKDIR = tempfile.mkdtemp(prefix="tf2_checkpoints_")


class Net(tf.keras.Model):
    """A simple linear model."""

    def __init__(self):
        super().__init__()
        init = tf.keras.initializers.Constant(np.linspace(-1.0, 1.0, 5).astype("float32"))
        self.l1 = tf.keras.layers.Dense(5, kernel_initializer=init)

    def call(self, x):
        return self.l1(x)


def toy_dataset():
    inputs = tf.range(10.0)[:, None]
    labels = inputs * 5.0 + tf.range(5.0)[None, :]
    return tf.data.Dataset.from_tensor_slices(dict(x=inputs, y=labels)).repeat().batch(2)


def train_step(net, example, optimizer):
    """Trains `net` on `example` using `optimizer`."""
    with tf.GradientTape() as tape:
        output = net(example["x"])
        loss = tf.reduce_mean(tf.abs(output - example["y"]))
    variables = net.trainable_variables
    gradients = tape.gradient(loss, variables)
    optimizer.apply_gradients(zip(gradients, variables))
    return loss


def relative(path):
    return os.path.relpath(path, WORKDIR) if path else path


def train_and_checkpoint(net, manager, ckpt, iterator, opt, steps=25):
    ckpt.restore(manager.latest_checkpoint)
    if manager.latest_checkpoint:
        print(f"Restored from {relative(manager.latest_checkpoint)}")
    else:
        print("Initializing from scratch.")
    for _ in range(steps):
        example = next(iterator)
        loss = train_step(net, example, opt)
        ckpt.step.assign_add(1)
        if int(ckpt.step) % 10 == 0:
            save_path = manager.save()
            print(f"Saved checkpoint for step {int(ckpt.step)}: {relative(save_path)}")
            print(f"loss {loss.numpy():1.4f}")


def fresh(directory):
    net = Net()
    opt = tf.keras.optimizers.Adam(0.1)
    iterator = iter(toy_dataset())
    ckpt = tf.train.Checkpoint(step=tf.Variable(1), optimizer=opt, net=net, iterator=iterator)
    manager = tf.train.CheckpointManager(ckpt, directory, max_to_keep=3)
    return net, opt, iterator, ckpt, manager


directory = os.path.join(WORKDIR, "tf_ckpts")
net, opt, iterator, ckpt, manager = fresh(directory)
train_and_checkpoint(net, manager, ckpt, iterator, opt, steps=25)
print("checkpoints:", [relative(p) for p in manager.checkpoints])
print("kernel:", np.round(net.l1.kernel.numpy(), 4).tolist())

# Keras's own weight files (Keras 3 names them *.weights.h5).
weights_path = os.path.join(WORKDIR, "easy_checkpoint.weights.h5")
net.save_weights(weights_path)
copy = Net()
copy(tf.zeros((1, 1)))
copy.load_weights(weights_path)
same = [np.array_equal(a.numpy(), b.numpy()) for a, b in zip(copy.weights, net.weights)]
print("save_weights round trip:", same)

# A new model, optimizer and iterator pick up where the last checkpoint left off (step 20,
# iterator at its 19th batch), not where training stopped.
net2, opt2, iterator2, ckpt2, manager2 = fresh(directory)
train_and_checkpoint(net2, manager2, ckpt2, iterator2, opt2, steps=25)
print("checkpoints:", [relative(p) for p in manager2.checkpoints])
print("step:", int(ckpt2.step), "next x:", next(iterator2)["x"].numpy().ravel().tolist())

# What a restore matched.
net3 = Net()
net3(tf.zeros((1, 1)))
step3 = tf.Variable(0)
status = tf.train.Checkpoint(step=step3, net=net3).restore(manager2.latest_checkpoint)
status.assert_existing_objects_matched()
print("matched: step", int(step3), "bias", np.round(net3.l1.bias.numpy(), 4).tolist())
try:
    status.assert_consumed()
    print("assert_consumed: ok")
except AssertionError:
    print("assert_consumed: AssertionError (the optimizer's and iterator's values are unused)")
status.expect_partial()

# The checkpoint's keys.
reader = tf.train.load_checkpoint(manager2.latest_checkpoint)
keys = sorted(reader.get_variable_to_shape_map())
print("keys:", [k for k in keys if "step" in k or "save_counter" in k])
print("step value:", int(reader.get_tensor("step/.ATTRIBUTES/VARIABLE_VALUE")))

# List and dict tracking.
save = tf.train.Checkpoint()
save.listed = [tf.Variable(1.0)]
save.listed.append(tf.Variable(2.0))
save.mapped = {"one": save.listed[0]}
save.mapped["two"] = save.listed[1]
save_path = save.save(os.path.join(WORKDIR, "tf_list_example"))
restore = tf.train.Checkpoint()
v2 = tf.Variable(0.0)
assert 0.0 == v2.numpy()
restore.mapped = {"two": v2}
restore.restore(save_path)
print("restored from a dict:", float(v2.numpy()), relative(save_path))
