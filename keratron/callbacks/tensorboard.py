"""`TensorBoard`: epoch (and optionally batch) scalars, weight histograms and images, the
model's config and embedding projections, written as TensorBoard event files.

Events are written with the `tensorboard` package's event-file writer and summary protos, in
the layout Keras produces: scalars tagged `epoch_<name>` under `<log_dir>/train` and
`<log_dir>/validation`, histograms tagged `<weight path>/histogram` under `train`. The
`tensorboard` package is an optional dependency, imported at the first write.
"""

from __future__ import annotations

import os
import struct
import time
import types
import warnings
import zlib

import numpy as np

from keratron.callbacks.callback import Callback
from keratron.callbacks.monitor_callback import to_float
from keratron.utils.event_file import EventFile

__all__ = ["TensorBoard"]


def _import_tensorboard():
    try:
        from google.protobuf import text_format
        from tensorboard.compat.proto import event_pb2, summary_pb2
        from tensorboard.plugins.histogram import summary_v2 as histogram_summary
        from tensorboard.plugins.image import metadata as image_metadata
        from tensorboard.plugins.projector import projector_config_pb2
        from tensorboard.plugins.scalar import summary_v2 as scalar_summary
        from tensorboard.util import tensor_util
    except ImportError as e:
        raise ImportError(
            "The TensorBoard callback needs the `tensorboard` package, which is not "
            "installed. Install it with `pip install tensorboard` "
            "(or `pip install keratron[tensorboard]`)."
        ) from e
    return types.SimpleNamespace(
        text_format=text_format,
        event_pb2=event_pb2,
        summary_pb2=summary_pb2,
        histogram_pb=histogram_summary.histogram_pb,
        scalar_pb=scalar_summary.scalar_pb,
        image_metadata=image_metadata,
        projector_config_pb2=projector_config_pb2,
        tensor_util=tensor_util,
    )


def _png(image: np.ndarray) -> bytes:
    """PNG bytes of a uint8 image of shape (height, width, channels), channels 1, 3 or 4."""
    height, width, channels = image.shape
    color_type = {1: 0, 3: 2, 4: 6}[channels]  # grey, RGB, RGBA
    # Every scanline starts with filter type 0 (none).
    raw = b"".join(b"\x00" + image[row].tobytes() for row in range(height))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
        )

    header = struct.pack(">IIBBBBB", width, height, 8, color_type, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(raw))
        + chunk(b"IEND", b"")
    )


class _EventWriter:
    """One event file in one directory (a TensorBoard "run")."""

    def __init__(self, tb, logdir):
        self._tb = tb
        self._writer = EventFile(logdir, filename_suffix=".v2")

    def write(self, summary, step):
        event = self._tb.event_pb2.Event(wall_time=time.time(), step=int(step), summary=summary)
        self._writer.add_event(event)

    def scalar(self, tag, value, step):
        self.write(self._tb.scalar_pb(tag, np.float32(value)), step)

    def flush(self):
        self._writer.flush()

    def close(self):
        self._writer.close()


def _scalar_logs(logs) -> dict:
    """The entries of `logs` that are single numbers, as floats."""
    out = {}
    for name, value in (logs or {}).items():
        try:
            out[name] = to_float(value)
        except (TypeError, ValueError):
            continue
    return out


class TensorBoard(Callback):
    """Writes training logs for TensorBoard.

    Epoch logs become scalars `epoch_<name>` (with "learning_rate" added) in `log_dir/train`,
    and `val_*` logs become `epoch_<name>` in `log_dir/validation`; evaluation results are also
    written as `evaluation_<name>_vs_iterations`. View them with
    `tensorboard --logdir <log_dir>`. Needs the optional `tensorboard` package.

    Args:
        log_dir: directory of the event files. Defaults to "logs".
        histogram_freq: write a histogram of every weight each `histogram_freq` epochs
            (0: never).
        write_graph: write the model's config (Sequential and functional models) for
            TensorBoard's conceptual-graph view.
        write_images: with `histogram_freq`, also write weights as images.
        write_steps_per_second: also write the training speed in steps per second.
        update_freq: "epoch", "batch", or an integer `n`: besides the epoch scalars, write the
            batch logs as `batch_<name>` every `n` batches.
        profile_batch: must be 0; profiling is not available on this backend (as with Keras's
            torch backend).
        embeddings_freq: every `embeddings_freq` epochs, write the matrices of `Embedding`
            layers as TSV files that TensorBoard's projector reads (0: never).
        embeddings_metadata: a metadata file for the projector, or a dict from `Embedding`
            layer name to file.

    Raises:
        ImportError: if the `tensorboard` package is not installed.
        ValueError: for an invalid `update_freq`, `histogram_freq`, `embeddings_freq`, or a
            nonzero `profile_batch`.

    Example:
        >>> import os, shutil, tempfile
        >>> model = keratron.Sequential([keratron.Input((2,)), keratron.layers.Dense(1)])
        >>> model.compile(optimizer="sgd", loss="mse")
        >>> x, y = np.ones((4, 2)), np.zeros((4, 1))
        >>> tmp = tempfile.mkdtemp()
        >>> tensorboard = keratron.callbacks.TensorBoard(log_dir=tmp, histogram_freq=1)
        >>> history = model.fit(x, y, epochs=2, validation_data=(x, y),
        ...                     callbacks=[tensorboard], verbose=0)
        >>> sorted(os.listdir(tmp))  # the runs `tensorboard --logdir` shows
        ['train', 'validation']
        >>> shutil.rmtree(tmp)
    """

    def __init__(
        self,
        log_dir="logs",
        histogram_freq=0,
        write_graph=True,
        write_images=False,
        write_steps_per_second=False,
        update_freq="epoch",
        profile_batch=0,
        embeddings_freq=0,
        embeddings_metadata=None,
    ):
        super().__init__()
        self._tb_modules = None  # imported at the first write (see `_tb`)
        for arg, value in (
            ("histogram_freq", histogram_freq),
            ("embeddings_freq", embeddings_freq),
        ):
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(
                    f"TensorBoard: `{arg}` must be a non-negative integer. "
                    f"Received: {arg}={value!r}"
                )
        if update_freq == "batch":
            update_freq = 1
        if update_freq != "epoch" and (
            not isinstance(update_freq, int) or isinstance(update_freq, bool) or update_freq < 1
        ):
            raise ValueError(
                "TensorBoard: `update_freq` must be 'epoch', 'batch' or a positive integer. "
                f"Received: update_freq={update_freq!r}"
            )
        if profile_batch:
            raise ValueError(
                "TensorBoard: profiling is not available with keratron. "
                f"Received: profile_batch={profile_batch!r} (must be 0)"
            )
        self.log_dir = os.fspath(log_dir)
        self.histogram_freq = histogram_freq
        self.write_graph = write_graph
        self.write_images = write_images
        self.write_steps_per_second = write_steps_per_second
        self.update_freq = update_freq
        self.embeddings_freq = embeddings_freq
        self.embeddings_metadata = embeddings_metadata
        self._global_train_batch = 0
        self._global_test_batch = 0
        self._previous_epoch_iterations = 0.0
        self._epoch_start_time = 0.0
        self._batch_start_time = 0.0
        self._writers = {}
        self._train_dir = os.path.join(self.log_dir, "train")
        self._val_dir = os.path.join(self.log_dir, "validation")

    # ---------------------------------------------------------------- writers
    @property
    def _tb(self):
        # As in Keras, the callback is built without the `tensorboard` package; writing
        # (from `set_model` on) needs it.
        if self._tb_modules is None:
            self._tb_modules = _import_tensorboard()
        return self._tb_modules

    @property
    def _train_writer(self):
        if "train" not in self._writers:
            self._writers["train"] = _EventWriter(self._tb, self._train_dir)
        return self._writers["train"]

    @property
    def _val_writer(self):
        if "val" not in self._writers:
            self._writers["val"] = _EventWriter(self._tb, self._val_dir)
        return self._writers["val"]

    def _close_writers(self):
        for writer in self._writers.values():
            writer.close()
        # A later fit() opens fresh event files; TensorBoard reads every file in a run.
        self._writers = {}

    # ------------------------------------------------------------------ model
    def set_model(self, model):
        self._model = model
        self._writers = {}
        if self.write_graph:
            self._write_keras_model_summary()
        if self.embeddings_freq:
            self._configure_embeddings()

    def _write_keras_model_summary(self):
        # Only Sequential and functional models have a config that describes their graph.
        if type(self.model).__name__ not in ("Functional", "Sequential"):
            return
        try:
            json_string = self.model.to_json()
        except Exception as e:  # noqa: BLE001 -- a summary must never break training
            warnings.warn(f"Model failed to serialize as JSON. Ignoring... {e}", stacklevel=2)
            return
        tb = self._tb
        metadata = tb.summary_pb2.SummaryMetadata()
        metadata.plugin_data.plugin_name = "graph_keras_model"
        metadata.plugin_data.content = b"1"
        summary = tb.summary_pb2.Summary()
        summary.value.add(
            tag="keras", metadata=metadata, tensor=tb.tensor_util.make_tensor_proto(json_string)
        )
        self._train_writer.write(summary, step=0)
        self._train_writer.flush()

    def _embedding_layers(self):
        from keratron.layers import Embedding

        return [layer for layer in self.model.layers if isinstance(layer, Embedding)]

    def _configure_embeddings(self):
        config = self._tb.projector_config_pb2.ProjectorConfig()
        metadata = self.embeddings_metadata
        if isinstance(metadata, dict):
            metadata = dict(metadata)
        for layer in self._embedding_layers():
            embedding = config.embeddings.add()
            embedding.tensor_name = f"{layer.name}/embeddings"
            embedding.tensor_path = f"{layer.name}_embeddings.tsv"
            if isinstance(metadata, str):
                embedding.metadata_path = metadata
            elif isinstance(metadata, dict) and layer.name in metadata:
                embedding.metadata_path = metadata.pop(layer.name)
        if isinstance(metadata, dict) and metadata:
            raise ValueError(
                "TensorBoard: unrecognized `Embedding` layer names passed to the "
                f"`embeddings_metadata` argument: {sorted(metadata)}"
            )
        os.makedirs(self.log_dir, exist_ok=True)
        path = os.path.join(self.log_dir, "projector_config.pbtxt")
        with open(path, "w", encoding="utf-8") as f:
            f.write(self._tb.text_format.MessageToString(config))

    # ------------------------------------------------------------------ hooks
    def on_train_begin(self, logs=None):
        self._global_train_batch = 0
        self._previous_epoch_iterations = 0.0

    def on_train_end(self, logs=None):
        self._close_writers()

    def _should_write_batch(self) -> bool:
        return self.update_freq != "epoch" and self._global_train_batch % self.update_freq == 0

    def on_train_batch_begin(self, batch, logs=None):
        self._global_train_batch += 1
        if self.write_steps_per_second:
            self._batch_start_time = time.time()

    def on_train_batch_end(self, batch, logs=None):
        if not self._should_write_batch():
            return
        writer = self._train_writer
        step = self._global_train_batch
        if self.write_steps_per_second:
            elapsed = max(time.time() - self._batch_start_time, 1e-12)
            writer.scalar("batch_steps_per_second", 1.0 / elapsed, step)
        for name, value in _scalar_logs(logs).items():
            writer.scalar(f"batch_{name}", value, step)

    def on_test_batch_begin(self, batch, logs=None):
        self._global_test_batch += 1

    def on_test_end(self, logs=None):
        optimizer = getattr(self.model, "optimizer", None)
        if optimizer is None or not hasattr(optimizer, "iterations"):
            return
        step = int(to_float(optimizer.iterations))
        writer = self._val_writer
        for name, value in _scalar_logs(logs).items():
            writer.scalar(f"evaluation_{name}_vs_iterations", value, step)
        writer.flush()

    def on_epoch_begin(self, epoch, logs=None):
        if self.write_steps_per_second:
            self._previous_epoch_iterations = to_float(self.model.optimizer.iterations)
            self._epoch_start_time = time.time()

    def on_epoch_end(self, epoch, logs=None):
        self._log_epoch_metrics(epoch, logs)
        if self.histogram_freq and epoch % self.histogram_freq == 0:
            self._log_weights(epoch)
        if self.embeddings_freq and epoch % self.embeddings_freq == 0:
            self._log_embeddings(epoch)

    # ---------------------------------------------------------------- writing
    def _collect_learning_rate(self, logs):
        optimizer = getattr(self.model, "optimizer", None)
        optimizer = getattr(optimizer, "inner_optimizer", optimizer)
        inner = getattr(optimizer, "optimizers", None)
        if inner is not None:
            for opt in inner:
                logs[f"learning_rate_{opt.name}"] = to_float(opt.learning_rate)
        elif optimizer is not None and hasattr(optimizer, "learning_rate"):
            logs["learning_rate"] = to_float(optimizer.learning_rate)
        return logs

    def _log_epoch_metrics(self, epoch, logs):
        if not logs:
            return
        scalars = _scalar_logs(logs)
        train_logs = {k: v for k, v in scalars.items() if not k.startswith("val_")}
        val_logs = {k[len("val_") :]: v for k, v in scalars.items() if k.startswith("val_")}
        train_logs = self._collect_learning_rate(train_logs)
        if self.write_steps_per_second:
            elapsed = max(time.time() - self._epoch_start_time, 1e-12)
            steps = to_float(self.model.optimizer.iterations) - self._previous_epoch_iterations
            train_logs["steps_per_second"] = steps / elapsed
        # A run's writer is opened only when it has values: without validation data there is
        # no `validation` run (as in Keras).
        for run, values in (("train", train_logs), ("val", val_logs)):
            if values:
                writer = self._train_writer if run == "train" else self._val_writer
                for name, value in values.items():
                    writer.scalar(f"epoch_{name}", value, epoch)
                writer.flush()

    def _log_weights(self, epoch):
        writer = self._train_writer
        for layer in self.model.layers:
            for weight in layer.weights:
                name = weight.path.replace(":", "_")
                values = np.asarray(weight, dtype=np.float64)
                writer.write(self._tb.histogram_pb(f"{name}/histogram", values), epoch)
                if self.write_images:
                    self._log_weight_as_image(np.asarray(weight), f"{name}/image", epoch)
        writer.flush()

    def _log_weight_as_image(self, weight, tag, epoch):
        """Writes a bias as a column, a dense kernel as a matrix (wider than tall), and a 1-D
        convolution kernel as one image per input channel, as Keras does."""
        img = np.squeeze(weight)
        if img.ndim == 1:
            img = img.reshape(1, img.shape[0], 1, 1)
        elif img.ndim == 2:
            if img.shape[0] > img.shape[1]:
                img = img.T
            img = img.reshape(1, img.shape[0], img.shape[1], 1)
        elif img.ndim == 3:
            # channels_last kernels (width, in, out): one image per input channel.
            img = np.transpose(img, (2, 0, 1))
            img = img.reshape(img.shape[0], img.shape[1], img.shape[2], 1)
        if img.ndim != 4 or img.shape[-1] not in (1, 3, 4):
            return
        if np.issubdtype(img.dtype, np.floating):
            # Floats are read as intensities in [0, 1] and saturate outside it, as
            # tf.summary.image converts them.
            img = np.clip(img.astype(np.float64) * 255.5, 0, 255).astype(np.uint8)
        else:
            img = np.clip(img, 0, 255).astype(np.uint8)
        # At most three images per tag (tf.summary.image's max_outputs default).
        encoded = [_png(i) for i in img[:3]]
        tensor = [str(img.shape[2]).encode(), str(img.shape[1]).encode(), *encoded]
        tb = self._tb
        summary = tb.summary_pb2.Summary()
        summary.value.add(
            tag=tag,
            metadata=tb.image_metadata.create_summary_metadata(display_name=None, description=None),
            tensor=tb.tensor_util.make_tensor_proto(np.array(tensor, dtype=object)),
        )
        self._train_writer.write(summary, epoch)

    def _log_embeddings(self, epoch):
        for layer in self._embedding_layers():
            if not layer.weights:
                continue
            path = os.path.join(self.log_dir, f"{layer.name}_embeddings.tsv")
            np.savetxt(path, np.asarray(layer.weights[0]), delimiter="\t", fmt="%.7g")
