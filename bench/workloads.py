"""Benchmark workloads, each written once per framework, and a runner for one measurement.

Every workload trains (or predicts) in float32 on the CPU. A training workload builds the
model, compiles it with Adam(1e-3), warms up on 4 batches (the same short fit, or the same
four hand-written steps for PyTorch), then times one epoch over all samples and reports
samples per second. A predict workload warms up on 4 batches and times one pass.

The Keras-API frameworks share one model definition, `build_keras_model`, written against
whichever module is passed in (keratron, Keras 3 on torch, JAX or TensorFlow, or tf-keras 2):
the same user script. The PyTorch column is a hand-written eager loop, the fastest thing most
users would write: `nn.Module`, `torch.optim.Adam(foreach=True)`, batches sliced from tensors
with a fresh permutation each epoch, and predict under `torch.inference_mode`. The
torch-compile column is the same loop with the module passed through `torch.compile`
(inductor, default mode): the warm-up batches compile it.

This file imports no framework at module level, so the peers venv (TensorFlow, no torch)
runs it too. bench/run.py starts it once per measurement:

    python bench/workloads.py --framework keratron --workload mlp [--quick] [--check]

It prints one line, `BENCH_RESULT {json}`, and exits 0 when the measurement ran or the
framework cannot run this workload ("status": "n/a" with a reason); a crash exits non-zero.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import resource
import sys
import time
from dataclasses import dataclass

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

FRAMEWORKS = (
    "keratron",
    "torch",
    "torch-compile",
    "keras3-torch",
    "keras3-jax",
    "keras3-tf",
    "tf.keras",
    "tf-compat-v1",
)
# Frameworks that need the TensorFlow venv (.venv-peers) rather than the project's .venv.
PEER_FRAMEWORKS = ("keras3-tf", "tf.keras", "tf-compat-v1")
WARMUP_BATCHES = 4
LEARNING_RATE = 1e-3
RESULT_PREFIX = "BENCH_RESULT "


@dataclass(frozen=True)
class Workload:
    """One benchmark: which model, train or predict, and how much data.

    Sample counts are multiples of the batch size, so no framework retraces or recompiles
    its step for a smaller last batch inside the timed epoch.
    """

    name: str
    model: str
    task: str  # "train", "predict", or "train-tf1" (a TF1 graph program: Session.run steps)
    samples: int
    batch: int
    quick_samples: int
    # Name of the keratron.applications builder the workload needs, if any.
    application: str | None = None


WORKLOADS = {
    w.name: w
    for w in (
        Workload("tiny", "tiny", "train", 8192, 32, 1024),
        Workload("mlp", "mlp", "train", 8192, 128, 1024),
        Workload("cnn", "cnn", "train", 2048, 128, 768),
        Workload("lstm", "lstm", "train", 1024, 64, 512),
        Workload("predict", "cnn", "predict", 2048, 128, 768),
        # The mlp model as a TF1 graph program (placeholders, get_variable, AdamOptimizer,
        # Session.run per batch): keratron.compat.v1 against TensorFlow's tf.compat.v1.
        Workload("tf1-mlp", "mlp", "train-tf1", 8192, 128, 1024),
        Workload("mobilenet", "mobilenet", "predict", 32, 8, 32, application="MobileNet"),
        # Training through BatchNormalization in training mode (27 layers), on logits.
        Workload("mobilenet_train", "mobilenet", "train", 32, 8, 16, application="MobileNet"),
        Workload("inception_v3", "inception_v3", "predict", 32, 8, 32, application="InceptionV3"),
    )
}

INPUT_SHAPES = {
    "tiny": (32,),
    "mlp": (784,),
    "cnn": (28, 28, 1),
    "lstm": (80,),
    "mobilenet": (224, 224, 3),
    "inception_v3": (299, 299, 3),
}
LSTM_VOCAB = 20000


class Unavailable(Exception):
    """This framework cannot run this workload here (reported as n/a, not as a failure)."""


# ----------------------------------------------------------------------------------------
# Data: numpy, generated from a fixed seed, identical for every framework. Targets come
# from a fixed random "teacher", so the models can learn them and the loss falls.


def make_data(wl: Workload, n: int) -> tuple[np.ndarray, np.ndarray | None]:
    """Inputs and targets for `n` samples of workload `wl` (channels_last images)."""
    rng = np.random.default_rng(0)
    shape = INPUT_SHAPES[wl.model]
    if wl.model == "tiny":
        x = rng.standard_normal((n, *shape), dtype=np.float32)
        teacher = rng.standard_normal((32, 10)).astype(np.float32) / np.sqrt(32.0)
        y = x @ teacher + 0.1 * rng.standard_normal((n, 10), dtype=np.float32)
        return x, y.astype(np.float32)
    if wl.model in ("mlp", "cnn"):
        x = rng.random((n, *shape), dtype=np.float32)
        teacher = rng.standard_normal((784, 10)).astype(np.float32)
        y = np.argmax((x.reshape(n, 784) - 0.5) @ teacher, axis=1).astype(np.int64)
        return x, y
    if wl.model == "lstm":
        # Zipf-distributed token ids, as in text; the label says whether the sequence holds
        # more even-numbered tokens than the median sequence does.
        x = ((rng.zipf(1.3, size=(n, 80)) - 1) % LSTM_VOCAB).astype(np.int32)
        score = (x % 2 == 0).sum(axis=1)
        y = (score > np.median(score)).astype(np.float32).reshape(n, 1)
        return x, y
    # Image classifiers: random pixels in [0, 1); random ImageNet labels to train on.
    x = rng.random((n, *shape), dtype=np.float32)
    return x, (rng.integers(0, 1000, n) if wl.task == "train" else None)


# ----------------------------------------------------------------------------------------
# Keras API: keratron, Keras 3 (torch or TensorFlow backend) and tf-keras 2.


def build_keras_model(keras, wl: Workload):
    """The workload's model through the Keras API of module `keras`."""
    layers = keras.layers
    if wl.application is not None:
        apps = getattr(keras, "applications", None)
        builder = getattr(apps, wl.application, None)
        if builder is None:
            raise Unavailable(f"{keras.__name__}.applications.{wl.application} does not exist")
        if wl.task == "train":  # logits, for the sparse cross-entropy from logits
            return builder(weights=None, classifier_activation=None)
        return builder(weights=None)
    if wl.model == "tiny":
        stack = [layers.Dense(10)]
    elif wl.model == "mlp":
        stack = [
            layers.Dense(512, activation="relu"),
            layers.Dense(512, activation="relu"),
            layers.Dense(10),
        ]
    elif wl.model == "cnn":
        stack = [
            layers.Conv2D(32, 3, activation="relu"),
            layers.Conv2D(64, 3, activation="relu"),
            layers.MaxPooling2D(2),
            layers.Flatten(),
            layers.Dense(128, activation="relu"),
            layers.Dense(10),
        ]
    elif wl.model == "lstm":
        stack = [
            layers.Embedding(LSTM_VOCAB, 128),
            layers.LSTM(128),
            layers.Dense(1, activation="sigmoid"),
        ]
    else:
        raise ValueError(f"build_keras_model: unknown model {wl.model!r}")
    dtype = "int32" if wl.model == "lstm" else "float32"
    return keras.Sequential([keras.Input(shape=INPUT_SHAPES[wl.model], dtype=dtype), *stack])


def keras_loss(keras, wl: Workload):
    if wl.model == "tiny":
        return "mean_squared_error"
    if wl.model == "lstm":
        return "binary_crossentropy"
    return keras.losses.SparseCategoricalCrossentropy(from_logits=True)


def keras_params(model) -> tuple[int, int]:
    """(all weights, trainable weights), counted as Keras's count_params does."""
    total = sum(int(np.prod(w.shape)) for w in model.weights)
    trainable = sum(int(np.prod(w.shape)) for w in model.trainable_weights)
    return total, trainable


# The dtype policy of this measurement ("float32" or "mixed_bfloat16"): the Keras APIs set
# it globally before building the model; the PyTorch loops run the model's forward and loss
# under torch.autocast to bfloat16 (weights and optimizer in float32, as Keras's policy).
POLICY = "float32"


def run_keras(keras, wl: Workload, x, y, check: bool) -> dict:
    if POLICY != "float32":
        keras.mixed_precision.set_global_policy(POLICY)
    model = build_keras_model(keras, wl)
    model.compile(
        optimizer=keras.optimizers.Adam(learning_rate=LEARNING_RATE), loss=keras_loss(keras, wl)
    )
    total, trainable = keras_params(model)
    result = {"params": total, "trainable_params": trainable}
    b = wl.batch
    warm = WARMUP_BATCHES * b
    if wl.task == "predict":
        model.predict(x[:warm], batch_size=b, verbose=0)
        start = time.perf_counter()
        out = model.predict(x, batch_size=b, verbose=0)
        result["seconds"] = time.perf_counter() - start
        result["output_shape"] = list(np.asarray(out).shape)
        return result
    if check:
        result["loss_before"] = float(model.evaluate(x, y, batch_size=b, verbose=0))
    model.fit(x[:warm], y[:warm], batch_size=b, epochs=1, verbose=0)
    start = time.perf_counter()
    history = model.fit(x, y, batch_size=b, epochs=1, verbose=0)
    result["seconds"] = time.perf_counter() - start
    result["train_loss"] = float(history.history["loss"][-1])
    if check:
        result["loss_after"] = float(model.evaluate(x, y, batch_size=b, verbose=0))
    return result


# ----------------------------------------------------------------------------------------
# TF1 graph programs: keratron.compat.v1 and TensorFlow's tf.compat.v1 run the same code.


def run_tf1(tf, wl: Workload, x, y, check: bool) -> dict:
    """The mlp model written as a TF1 program (Mechanics 101 style): a graph of placeholders
    and get_variable weights, AdamOptimizer.minimize, and one Session.run per batch of a
    shuffled epoch, the batches fed from numpy."""
    if wl.task != "train-tf1":
        raise Unavailable("a TF1 graph program is benchmarked on the tf1-* workloads only")
    graph = tf.Graph()
    with graph.as_default():
        tf.set_random_seed(0)
        images = tf.placeholder(tf.float32, [None, 784], name="images")
        labels = tf.placeholder(tf.int64, [None], name="labels")
        h = images
        for i, units in enumerate((512, 512, 10)):
            with tf.variable_scope(f"dense_{i}"):
                w = tf.get_variable(
                    "kernel", [h.shape[-1], units], initializer=tf.glorot_uniform_initializer()
                )
                b = tf.get_variable("bias", [units], initializer=tf.zeros_initializer())
                h = tf.matmul(h, w) + b
                if units != 10:
                    h = tf.nn.relu(h)
        loss = tf.reduce_mean(
            tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=h)
        )
        train_op = tf.train.AdamOptimizer(LEARNING_RATE).minimize(loss)
        init = tf.global_variables_initializer()
        total = sum(int(np.prod(v.shape.as_list())) for v in tf.trainable_variables())
    xf = x.reshape(len(x), 784)
    b = wl.batch
    rng = np.random.default_rng(1)
    result = {"params": total, "trainable_params": total}
    with tf.Session(graph=graph) as sess:
        sess.run(init)

        def mean_loss():
            return float(
                np.mean(
                    [
                        sess.run(loss, {images: xf[i : i + b], labels: y[i : i + b]})
                        for i in range(0, len(xf), b)
                    ]
                )
            )

        if check:
            result["loss_before"] = mean_loss()
        # The warm-up fetches what the timed loop fetches: a session prepares each new fetch
        # list once (keratron compiles its plan, TensorFlow makes its callable), and that
        # belongs to the warm-up, not to the timed epoch.
        for i in range(WARMUP_BATCHES):
            feed = {images: xf[i * b : (i + 1) * b], labels: y[i * b : (i + 1) * b]}
            sess.run([train_op, loss], feed)
        start = time.perf_counter()
        order = rng.permutation(len(xf))
        for i in range(0, len(xf), b):
            idx = order[i : i + b]
            _, value = sess.run([train_op, loss], {images: xf[idx], labels: y[idx]})
        result["seconds"] = time.perf_counter() - start
        result["train_loss"] = float(value)
        if check:
            result["loss_after"] = mean_loss()
    return result


# ----------------------------------------------------------------------------------------
# PyTorch: hand-written modules and an eager loop.


def build_torch_model(torch, wl: Workload):
    nn = torch.nn
    if wl.model == "tiny":
        return nn.Linear(32, 10)
    if wl.model == "mlp":
        return nn.Sequential(
            nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10)
        )
    if wl.model == "cnn":
        # NCHW, PyTorch's native layout; the data is transposed once before timing.
        return nn.Sequential(
            nn.Conv2d(1, 32, 3),
            nn.ReLU(),
            nn.Conv2d(32, 64, 3),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Flatten(),
            nn.Linear(12 * 12 * 64, 128),
            nn.ReLU(),
            nn.Linear(128, 10),
        )
    if wl.model == "lstm":

        class LSTMClassifier(nn.Module):
            def __init__(self):
                super().__init__()
                self.embedding = nn.Embedding(LSTM_VOCAB, 128)
                self.lstm = nn.LSTM(128, 128, batch_first=True)
                # nn.LSTM has two bias vectors where Keras has one: the second is held at
                # zero and frozen, so both models have the same weights to train.
                with torch.no_grad():
                    self.lstm.bias_hh_l0.zero_()
                self.lstm.bias_hh_l0.requires_grad_(False)
                self.dense = nn.Linear(128, 1)

            def forward(self, tokens):
                _, (h, _) = self.lstm(self.embedding(tokens))
                return torch.sigmoid(self.dense(h[-1]))

        return LSTMClassifier()
    if wl.model == "mobilenet":
        model = _torch_mobilenet(torch)
        return model[:-1] if wl.task == "train" else model  # logits to train on
    if wl.model == "inception_v3":
        return _torch_inception_v3(torch)
    raise ValueError(f"build_torch_model: unknown model {wl.model!r}")


def _torch_mobilenet(torch):
    """MobileNet v1 (alpha 1.0, 1000 classes), laid out as keras.applications.MobileNet."""
    nn = torch.nn

    def conv_bn(cin, cout, kernel, stride, groups=1):
        return [
            nn.Conv2d(cin, cout, kernel, stride, padding=kernel // 2, groups=groups, bias=False),
            # Keras's BatchNormalization defaults: epsilon 1e-3, momentum 0.99.
            nn.BatchNorm2d(cout, eps=1e-3, momentum=0.01),
            nn.ReLU6(),
        ]

    blocks = conv_bn(3, 32, 3, 2)
    plan = [(64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (512, 2)]
    plan += [(512, 1)] * 5 + [(1024, 2), (1024, 1)]
    cin = 32
    for cout, stride in plan:
        blocks += conv_bn(cin, cin, 3, stride, groups=cin) + conv_bn(cin, cout, 1, 1)
        cin = cout
    head = [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Dropout(1e-3), nn.Linear(1024, 1000)]
    return nn.Sequential(*blocks, *head, nn.Softmax(dim=1))


def _torch_inception_v3(torch):
    """Inception v3 (1000 classes, no auxiliary head), laid out as keras.applications'."""
    nn = torch.nn

    def conv_bn(cin, cout, kh, kw, stride=1, valid=False):
        bn = nn.BatchNorm2d(cout, eps=1e-3, momentum=0.01)
        bn.weight.requires_grad_(False)  # Keras builds these with scale=False: no gamma
        pad = 0 if valid else (kh // 2, kw // 2)
        conv = nn.Conv2d(cin, cout, (kh, kw), stride, pad, bias=False)
        return [conv, bn, nn.ReLU()]

    def chain(cin, *steps):
        """conv_bn layers in sequence; each step is (filters, kh, kw[, stride, valid])."""
        mods = []
        for step in steps:
            mods += conv_bn(cin, *step)
            cin = step[0]
        return nn.Sequential(*mods)

    class Concat(nn.Module):
        def __init__(self, *branches):
            super().__init__()
            self.branches = nn.ModuleList(branches)

        def forward(self, x):
            return torch.cat([branch(x) for branch in self.branches], dim=1)

    def avg_branch(cin, cout):
        # Keras's "same" average pooling divides by the valid cells only.
        pool = nn.AvgPool2d(3, 1, 1, count_include_pad=False)
        return nn.Sequential(pool, chain(cin, (cout, 1, 1)))

    def split(cin):
        return Concat(chain(cin, (384, 1, 3)), chain(cin, (384, 3, 1)))

    stem = [chain(3, (32, 3, 3, 2, True), (32, 3, 3, 1, True), (64, 3, 3)), nn.MaxPool2d(3, 2)]
    stem += [chain(64, (80, 1, 1, 1, True), (192, 3, 3, 1, True)), nn.MaxPool2d(3, 2)]
    blocks, cin = [], 192
    for pool_filters in (32, 64, 64):  # mixed0-2
        blocks.append(
            Concat(
                chain(cin, (64, 1, 1)),
                chain(cin, (48, 1, 1), (64, 5, 5)),
                chain(cin, (64, 1, 1), (96, 3, 3), (96, 3, 3)),
                avg_branch(cin, pool_filters),
            )
        )
        cin = 224 + pool_filters
    blocks.append(  # mixed3
        Concat(
            chain(cin, (384, 3, 3, 2, True)),
            chain(cin, (64, 1, 1), (96, 3, 3), (96, 3, 3, 2, True)),
            nn.MaxPool2d(3, 2),
        )
    )
    cin = 768
    for c in (128, 160, 160, 192):  # mixed4-7
        blocks.append(
            Concat(
                chain(cin, (192, 1, 1)),
                chain(cin, (c, 1, 1), (c, 1, 7), (192, 7, 1)),
                chain(cin, (c, 1, 1), (c, 7, 1), (c, 1, 7), (c, 7, 1), (192, 1, 7)),
                avg_branch(cin, 192),
            )
        )
    blocks.append(  # mixed8
        Concat(
            chain(cin, (192, 1, 1), (320, 3, 3, 2, True)),
            chain(cin, (192, 1, 1), (192, 1, 7), (192, 7, 1), (192, 3, 3, 2, True)),
            nn.MaxPool2d(3, 2),
        )
    )
    cin = 1280
    for _ in range(2):  # mixed9-10
        blocks.append(
            Concat(
                chain(cin, (320, 1, 1)),
                nn.Sequential(chain(cin, (384, 1, 1)), split(384)),
                nn.Sequential(chain(cin, (448, 1, 1), (384, 3, 3)), split(384)),
                avg_branch(cin, 192),
            )
        )
        cin = 2048
    head = [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(2048, 1000), nn.Softmax(dim=1)]
    return nn.Sequential(*stem, *blocks, *head)


def torch_params(model) -> tuple[int, int]:
    """(weights as Keras counts them, trainable weights): trainable parameters plus the
    BatchNorm moving statistics; frozen parameters (the LSTM's second bias) are left out."""
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    stats = sum(
        b.numel()
        for name, b in model.named_buffers()
        if name.endswith(("running_mean", "running_var"))
    )
    return trainable + stats, trainable


def torch_loss(torch, wl: Workload):
    """The workload's loss as a torch module (the same losses as `keras_loss`)."""
    return {"tiny": torch.nn.MSELoss(), "lstm": torch.nn.BCELoss()}.get(
        wl.model, torch.nn.CrossEntropyLoss()
    )


def _autocast(torch, device):
    """torch.autocast to bfloat16 under the mixed_bfloat16 policy, else a no-op scope."""
    enabled = POLICY == "mixed_bfloat16"
    return torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=enabled)


def torch_epoch(torch, model, opt, loss_fn, inputs, targets, batch: int) -> float:
    """One epoch of the hand-written loop over tensors on one device, batches drawn from a
    fresh permutation; returns the mean batch loss."""
    model.train()
    order = torch.randperm(inputs.shape[0], device=inputs.device)
    total = torch.zeros((), device=inputs.device)
    steps = 0
    for i in range(0, inputs.shape[0], batch):
        idx = order[i : i + batch]
        opt.zero_grad(set_to_none=True)
        with _autocast(torch, inputs.device):
            loss = loss_fn(model(inputs[idx]), targets[idx])
        loss.backward()
        opt.step()
        total += loss.detach()
        steps += 1
    return float(total) / steps


def run_torch(torch, wl: Workload, x, y, check: bool, compiled: bool = False) -> dict:
    module = build_torch_model(torch, wl)
    total, trainable = torch_params(module)
    result = {"params": total, "trainable_params": trainable}
    # torch.compile wraps the module; parameters, train()/eval() and the optimizer are shared.
    model = torch.compile(module) if compiled else module
    if x.ndim == 4:
        x = np.ascontiguousarray(x.transpose(0, 3, 1, 2))
    xt = torch.from_numpy(x.astype(np.int64) if wl.model == "lstm" else x)
    b = wl.batch
    n = xt.shape[0]
    warm = WARMUP_BATCHES * b

    if wl.task == "predict":
        model.eval()

        def predict(inputs):
            with torch.inference_mode(), _autocast(torch, inputs.device):
                outs = [model(inputs[i : i + b]) for i in range(0, inputs.shape[0], b)]
                return torch.cat(outs).float().numpy()

        predict(xt[:warm])
        start = time.perf_counter()
        out = predict(xt)
        result["seconds"] = time.perf_counter() - start
        result["output_shape"] = list(out.shape)
        return result

    yt = torch.from_numpy(y)
    loss_fn = torch_loss(torch, wl)
    params = [p for p in module.parameters() if p.requires_grad]
    opt = torch.optim.Adam(params, lr=LEARNING_RATE, foreach=True)

    def epoch(inputs, targets):
        return torch_epoch(torch, model, opt, loss_fn, inputs, targets, b)

    def evaluate():
        model.eval()
        with torch.no_grad():
            losses = [
                float(loss_fn(model(xt[i : i + b]), yt[i : i + b])) * len(yt[i : i + b])
                for i in range(0, n, b)
            ]
        return sum(losses) / n

    if check:
        result["loss_before"] = evaluate()
    epoch(xt[:warm], yt[:warm])
    start = time.perf_counter()
    result["train_loss"] = epoch(xt, yt)
    result["seconds"] = time.perf_counter() - start
    if check:
        result["loss_after"] = evaluate()
    return result


def run_torch_compile(torch, wl: Workload, x, y, check: bool) -> dict:
    return run_torch(torch, wl, x, y, check, compiled=True)


# ----------------------------------------------------------------------------------------
# One measurement in this process.


def _limit_threads(threads: int) -> None:
    """Same thread budget everywhere: `threads` intra-op, one inter-op."""
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = str(threads)
    os.environ["TF_NUM_INTRAOP_THREADS"] = str(threads)
    os.environ["TF_NUM_INTEROP_THREADS"] = "1"
    # CPU benchmarks: no framework may pick up a GPU on a machine that has one.
    os.environ["CUDA_VISIBLE_DEVICES"] = ""
    os.environ["KERATRON_DEVICE"] = "cpu"


def _set_torch_threads(torch, threads: int) -> None:
    torch.set_num_threads(threads)
    torch.set_num_interop_threads(1)


def _set_tf_threads(tf, threads: int) -> None:
    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(1)


def import_framework(framework: str, threads: int):
    """Imports `framework`, pins its threads, and returns (run function, module, version)."""
    _limit_threads(threads)
    if framework in ("torch", "torch-compile"):
        import torch

        _set_torch_threads(torch, threads)
        run = run_torch if framework == "torch" else run_torch_compile
        return run, torch, torch.__version__
    if framework == "keratron":
        # keratron first, as a user's script imports it: it chooses OpenMP's wait policy
        # before torch loads the runtime (keratron/_openmp.py).
        sys.path.insert(0, REPO)
        import keratron

        torch = sys.modules["torch"]
        _set_torch_threads(torch, threads)
        return run_keras, keratron, keratron.__version__
    if framework == "keras3-torch":
        os.environ["KERAS_BACKEND"] = "torch"
        import torch

        _set_torch_threads(torch, threads)
        import keras

        return run_keras, keras, f"{keras.__version__} (torch {torch.__version__})"
    if framework == "keras3-jax":
        # XLA's CPU client sizes its thread pool to the machine's cores (no per-process knob);
        # JAX runs on the CPU only.
        os.environ["KERAS_BACKEND"] = "jax"
        os.environ["JAX_PLATFORMS"] = "cpu"
        try:
            import jax
        except ImportError as e:
            raise Unavailable(
                f"jax is not importable by {sys.executable} (pip install -e '.[bench]'): {e}"
            ) from e
        import keras

        return run_keras, keras, f"{keras.__version__} (jax {jax.__version__})"
    if framework in PEER_FRAMEWORKS:
        try:
            import tensorflow as tf
        except ImportError as e:
            raise Unavailable(f"tensorflow is not importable by {sys.executable}: {e}") from e
        _set_tf_threads(tf, threads)
        if framework == "tf-compat-v1":
            tf.compat.v1.disable_eager_execution()
            return run_tf1, tf.compat.v1, f"tensorflow {tf.__version__}"
        if framework == "keras3-tf":
            os.environ["KERAS_BACKEND"] = "tensorflow"
            import keras
        else:
            os.environ["TF_USE_LEGACY_KERAS"] = "1"
            import tf_keras as keras
        return run_keras, keras, f"{keras.__version__} (tensorflow {tf.__version__})"
    raise ValueError(f"workloads: unknown framework {framework!r}; expected one of {FRAMEWORKS}")


def applies(framework: str, workload: str) -> bool:
    """Whether `framework` runs `workload`: the TF1 graph programs run on keratron.compat.v1
    and TensorFlow's tf.compat.v1, the Keras-API workloads on everything else."""
    if WORKLOADS[workload].task == "train-tf1":
        return framework in ("keratron", "tf-compat-v1")
    return framework != "tf-compat-v1"


def measure(
    framework: str, workload: str, quick: bool, check: bool, threads: int, policy="float32"
) -> dict:
    """Runs one measurement and returns its result record."""
    global POLICY
    POLICY = policy
    wl = WORKLOADS[workload]
    n = wl.quick_samples if quick else wl.samples
    record = {"framework": framework, "workload": workload, "samples": n, "batch": wl.batch}
    if policy != "float32":
        record["policy"] = policy
    try:
        if not applies(framework, workload):
            raise Unavailable(
                "the tf1-* workloads are TF1 graph programs (keratron.compat.v1 and "
                "tf-compat-v1); the other workloads use the Keras API"
            )
        if policy != "float32" and wl.task == "train-tf1":
            raise Unavailable("a TF1 graph program has no dtype policy")
        run, module, version = import_framework(framework, threads)
        if wl.task == "train-tf1" and framework == "keratron":
            # keratron runs both: its Keras API, and its compat.v1 for a TF1 program.
            run, module = run_tf1, importlib.import_module("keratron.compat.v1")
        record["version"] = version
        x, y = make_data(wl, n)
        record.update(run(module, wl, x, y, check))
        record["samples_per_s"] = n / record["seconds"]
        record["status"] = "ok"
    except Unavailable as e:
        record.update(status="n/a", reason=str(e))
    # Linux reports ru_maxrss in KiB.
    record["maxrss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return record


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description="Run one benchmark measurement.")
    parser.add_argument("--framework", required=True, choices=FRAMEWORKS)
    parser.add_argument("--workload", required=True, choices=sorted(WORKLOADS))
    parser.add_argument("--quick", action="store_true", help="fewer samples")
    parser.add_argument("--check", action="store_true", help="also report loss before/after")
    parser.add_argument("--threads", type=int, default=2, help="intra-op threads")
    parser.add_argument(
        "--policy", default="float32", choices=("float32", "mixed_bfloat16"), help="dtype policy"
    )
    args = parser.parse_args(argv)
    record = measure(
        args.framework, args.workload, args.quick, args.check, args.threads, args.policy
    )
    print(RESULT_PREFIX + json.dumps(record), flush=True)


if __name__ == "__main__":
    main()
