"""`ProgbarLogger`: a tqdm progress bar per epoch (verbose=1) or a line per epoch (verbose=2)."""

from __future__ import annotations

import sys
import time

from keratron.callbacks.callback import Callback
from keratron.config import is_interactive_logging_enabled
from keratron.utils.io_utils import print_msg

__all__ = ["ProgbarLogger"]


def _fmt(logs) -> str:
    parts = []
    for k, v in (logs or {}).items():
        try:
            v = float(v)
        except (TypeError, ValueError):
            continue
        parts.append(f"{k}: {v:.4f}" if abs(v) >= 1e-3 or v == 0 else f"{k}: {v:.4e}")
    return " - ".join(parts)


class ProgbarLogger(Callback):
    """Shows training progress: "Epoch i/N" and a tqdm bar with the running loss and metrics
    (verbose=1), or one summary line per epoch (verbose=2).

    With interactive logging disabled (`keratron.config.disable_interactive_logging()`), no
    live bar is drawn and every line goes to the `logging` logger "keratron" instead of stdout
    (verbose=1 then logs the per-epoch summary line).
    """

    def __init__(self, count_mode=None, stateful_metrics=None):
        super().__init__()
        self.verbose = 1
        self.epochs = 1
        self._bar = None
        self._mode = "train"
        self._start = 0.0

    def set_params(self, params):
        super().set_params(params)
        verbose = params.get("verbose", 1)
        self.verbose = 1 if verbose == "auto" else int(verbose)
        self.epochs = params.get("epochs", 1)

    def _open(self, total, desc=None):
        from tqdm.auto import tqdm

        self._close()
        self._start = time.time()
        if self.verbose == 1 and is_interactive_logging_enabled():
            self._bar = tqdm(
                total=total,
                desc=desc,
                unit="step",
                file=sys.stdout,
                dynamic_ncols=True,
                leave=True,
                bar_format="{n_fmt}/{total_fmt} {bar} {elapsed} {rate_fmt}{postfix}",
            )

    def _close(self):
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def on_epoch_begin(self, epoch, logs=None):
        if self.verbose:
            print_msg(f"Epoch {epoch + 1}/{self.epochs}")
        self._open(self.params.get("steps"))

    def on_train_batch_end(self, batch, logs=None):
        self._step(logs)

    def _step(self, logs):
        """Advances the bar by a batch. The running values are formatted only for a batch on
        which the bar redraws (tqdm's own test: `miniters` batches and `mininterval` seconds
        since its last redraw), so each redraw shows its batch's values: formatting them for
        every batch cost a small model's step a fifth of its time."""
        bar = self._bar
        if bar is None:
            return
        if (
            bar.n + 1 - bar.last_print_n >= bar.miniters
            and bar._time() - bar.last_print_t >= bar.mininterval
        ):
            bar.set_postfix_str(_fmt(logs), refresh=False)
        bar.update(1)

    def on_epoch_end(self, epoch, logs=None):
        if self._bar is not None:
            self._bar.set_postfix_str(_fmt(logs), refresh=True)
        self._close()
        if self.verbose == 2 or (self.verbose and not is_interactive_logging_enabled()):
            print_msg(f"{time.time() - self._start:.0f}s - {_fmt(logs)}")

    def on_test_begin(self, logs=None):
        if self.model is not None and getattr(self.model, "_in_fit", False):
            return  # validation inside fit: its results appear in the epoch line
        self._mode = "test"
        self._open(self.params.get("steps") if self.params.get("steps") else None)

    def on_test_batch_end(self, batch, logs=None):
        if self._mode == "test":
            self._step(logs)

    def on_test_end(self, logs=None):
        if self._mode == "test":
            if self._bar is not None:
                self._bar.set_postfix_str(_fmt(logs), refresh=True)
            self._close()
            if self.verbose == 2 or (self.verbose and not is_interactive_logging_enabled()):
                print_msg(_fmt(logs))
            self._mode = "train"

    def on_predict_begin(self, logs=None):
        self._mode = "predict"
        self._open(self.params.get("steps") if self.params.get("steps") else None)

    def on_predict_batch_end(self, batch, logs=None):
        if self._bar is not None:
            self._bar.update(1)

    def on_predict_end(self, logs=None):
        self._close()
        self._mode = "train"

    def on_train_end(self, logs=None):
        self._close()
