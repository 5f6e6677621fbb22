"""`keras.utils.Progbar`: Keras's text progress bar, drawn in place on a terminal.

The output is Keras's, character for character: `12/50 ━━━━━━━━━━━━━━━━━━━━ 3s 80ms/step -
loss: 0.1234` (bold counts, a green done part and a grey rest; ANSI escapes), a line per
finished bar with `verbose=2`. Messages go through `print_msg`, so they are logged instead of
printed once interactive logging is disabled.
"""

from __future__ import annotations

import math
import os
import sys
import time

import numpy as np

from keratron.utils.io_utils import print_msg

__all__ = ["Progbar"]

_BOLD, _GREEN, _GREY, _RESET = "\x1b[1m", "\33[32m", "\33[37m", "\x1b[0m"


def _format_eta(eta: float) -> str:
    if eta > 3600:
        return f"{int(eta // 3600)}:{int((eta % 3600) // 60):02d}:{int(eta % 60):02d}"
    if eta > 60:
        return f"{int(eta // 60)}:{int(eta % 60):02d}"
    return f"{int(eta)}s"


def _format_time(time_per_unit: float, unit_name: str) -> str:
    if time_per_unit >= 1 or time_per_unit == 0:
        return f" {time_per_unit:.0f}s/{unit_name}"
    if time_per_unit >= 1e-3:
        return f" {time_per_unit * 1e3:.0f}ms/{unit_name}"
    return f" {time_per_unit * 1e6:.0f}us/{unit_name}"


class Progbar:
    """A text progress bar with running averages of the values it is given.

    Values named in `stateful_metrics` are shown as given; the others are averaged over the
    steps seen (weighted by the steps each update covers). Give at most one of
    `stateful_metrics` and `stateless_metrics` (then only those are averaged).

    Args:
        target: total number of steps, or None if unknown.
        width: width of the bar in characters.
        verbose: 0 (silent), 1 (a bar redrawn at most every `interval` seconds) or 2 (one
            line when the bar is finished).
        interval: minimum seconds between redraws.
        stateful_metrics: names of values shown as given.
        stateless_metrics: names of values averaged (all others shown as given).
        unit_name: what a step is called ("step", "sample").

    Example:
        >>> bar = keratron.utils.Progbar(3, verbose=2)
        >>> for i in range(3):  # doctest: +ELLIPSIS
        ...     bar.update(i + 1, values=[("loss", 1.0 / (i + 1))])
        3/3 - 0s - ...s/step - loss: 0.3333
    """

    def __init__(
        self,
        target,
        width=20,
        verbose=1,
        interval=0.05,
        stateful_metrics=None,
        stateless_metrics=None,
        unit_name="step",
    ):
        if stateful_metrics is not None and stateless_metrics is not None:
            raise ValueError(
                "Only one of `stateful_metrics` or `stateless_metrics` can be provided. "
                "`stateful_metrics` is used to make metrics stateless by default (with an "
                "exclusion list), while `stateless_metrics` is used to make metrics stateful "
                "by default (with an exclusion list)."
            )
        self.target = target
        self.width = width
        self.verbose = verbose
        self.interval = interval
        self.unit_name = unit_name
        if stateless_metrics is not None:
            self.stateful_metrics, self.stateless_metrics = None, set(stateless_metrics)
        else:
            self.stateful_metrics, self.stateless_metrics = set(stateful_metrics or ()), None
        # Redraw in place (backspaces and a carriage return) where the output is a terminal or
        # a notebook, and on a new line otherwise; Keras's test also accepts any POSIX system.
        self._dynamic_display = (
            (hasattr(sys.stdout, "isatty") and sys.stdout.isatty())
            or "ipykernel" in sys.modules
            or "posix" in sys.modules
            or "PYCHARM_HOSTED" in os.environ
        )
        self._seen_so_far = 0
        self._values = {}  # name -> [weighted sum, weight]
        self._values_order = []
        self._start = time.time()
        self._last_update = 0
        self._time_after_first_step = None
        self._prev_total_width = 0

    def _is_stateless(self, name) -> bool:
        if self.stateful_metrics is not None:
            return name not in self.stateful_metrics
        return name in self.stateless_metrics

    def update(self, current, values=None, finalize=None) -> None:
        """Moves the bar to step `current`.

        Args:
            current: the index of the current step.
            values: a list of `(name, value_for_last_step)` pairs.
            finalize: whether this is the bar's last update; by default
                `current >= target` (never when the target is unknown).
        """
        if finalize is None:
            finalize = self.target is not None and current >= self.target
        for name, value in values or []:
            if name not in self._values_order:
                self._values_order.append(name)
            if not self._is_stateless(name) or finalize:
                # A finalizing update carries epoch-level values: shown as given.
                self._values[name] = [value, 1]
            else:
                weight = max(current - self._seen_so_far, 1)
                if name not in self._values:
                    self._values[name] = [value * weight, weight]
                else:
                    self._values[name][0] += value * weight
                    self._values[name][1] += weight
        self._seen_so_far = current
        now = time.time()
        time_per_unit = self._estimate_step_duration(current, now)
        if self.verbose == 1:
            if now - self._last_update < self.interval and not finalize:
                return
            self._draw(current, now, time_per_unit, finalize)
        elif self.verbose == 2 and finalize and self.target is not None and self.target > 0:
            digits = int(math.log10(self.target)) + 1
            info = f"%{digits}d/%d" % (current, self.target)
            info += f" - {now - self._start:.0f}s -{_format_time(time_per_unit, self.unit_name)}"
            for name in self._values_order:
                avg = self._average(name)
                info += f" - {name}: {avg:.4f}" if avg > 1e-3 else f" - {name}: {avg:.4e}"
            print_msg(info + "\n", line_break=False)
        self._last_update = now

    def _average(self, name):
        total, count = self._values[name]
        if not isinstance(total, float):
            total = np.mean(total)
        return total / max(1, count)

    def _draw(self, current, now, time_per_unit, finalize):
        if self._dynamic_display:
            message = "\b" * self._prev_total_width + "\r"
        else:
            message = "\n"
        escapes = 0  # characters of ANSI escapes, which take no width on screen
        if self.target is not None and self.target > 0:
            digits = int(math.log10(self.target)) + 1
            bar = f"{_BOLD}{f'%{digits}d/%d' % (current, self.target)}{_RESET} "
            done = int(self.width * float(current) / self.target)
            escapes += 8
            if done > 0:
                bar += f"{_GREEN}{'━' * done}{_RESET}"
                escapes += 9
            bar += f"{_GREY}{'━' * (self.width - done)}{_RESET}"
            escapes += 9
        else:
            bar = f"{int(current):7d}/Unknown"
        if self.target is not None and self.target > 0 and not finalize:
            shown = _format_eta(time_per_unit * (self.target - current))
        else:
            shown = f"{now - self._start:.0f}s"
        info = f" {_BOLD}{shown}{_RESET}"
        escapes += 8
        info += _format_time(time_per_unit, self.unit_name)
        for name in self._values_order:
            avg = self._average(name)
            info += f" - {name}: {avg:.4f}" if abs(avg) > 1e-3 else f" - {name}: {avg:.4e}"
        total_width = len(bar) + len(info) - escapes
        message += bar + info
        if self._prev_total_width > total_width:
            message += " " * (self._prev_total_width - total_width)
        if finalize:
            message += "\n"
        print_msg(message, line_break=False)
        self._prev_total_width = total_width

    def add(self, n, values=None) -> None:
        """Advances the bar by `n` steps."""
        self.update(self._seen_so_far + n, values)

    def _estimate_step_duration(self, current, now) -> float:
        # The first step (often slow: tracing, warm-up) is left out once there are others.
        if not current:
            return 0
        if self._time_after_first_step is not None and current > 1:
            per_unit = (now - self._time_after_first_step) / (current - 1)
        else:
            per_unit = (now - self._start) / current
        if current == 1:
            self._time_after_first_step = now
        return per_unit
