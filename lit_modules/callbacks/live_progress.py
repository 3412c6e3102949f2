"""One live progress line for a single run: step/total, tokens, loss, tokens/s and ETA.

    step 120/400 (30%) | 245,760 tokens | loss 2.314 | 3,210 tok/s | ETA 1m27s

On a terminal the line is rewritten in place; in a log (not a TTY) a new line is printed each time
another `every_percent` of the steps is done or `every_seconds` have passed, so a log file gets a few
dozen lines, not one per step. Work happens only on logging steps (`trainer.log_every_n_steps`), where
the loss was just logged anyway: every other step returns after one integer comparison.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

import lightning as L


def clock(seconds: float) -> str:
    """3s, 1m27s, 2h05m."""
    seconds = max(0, int(round(seconds)))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


class LiveProgress(L.Callback):
    def __init__(self, total_steps: int, tokens_per_step: int, stream: TextIO | None = None,
                 every_percent: float = 10.0, every_seconds: float = 60.0):
        self.total_steps = total_steps
        self.tokens_per_step = tokens_per_step
        self._stream = stream  # None: sys.stderr, looked up when written (a spawned rank pickles callbacks)
        self.every_percent = every_percent
        self.every_seconds = every_seconds
        self._every_n = 1
        self._last_step = -1
        self._started: tuple[float, int] | None = None  # (time, step) when this process began training
        self._printed: tuple[float, float] = (0.0, -1.0)  # (time, percent) of the last line in a log
        self._live = False

    @property
    def stream(self) -> TextIO:
        return sys.stderr if self._stream is None else self._stream

    @property
    def tty(self) -> bool:
        return bool(getattr(self.stream, "isatty", lambda: False)())

    def on_train_start(self, trainer: L.Trainer, pl_module) -> None:
        self._every_n = max(1, trainer.log_every_n_steps)
        self._started = (time.perf_counter(), trainer.global_step)

    def on_train_batch_end(self, trainer: L.Trainer, pl_module, outputs, batch, batch_idx: int) -> None:
        step = trainer.global_step
        if (step % self._every_n and step != self.total_steps) or step == self._last_step:
            return
        self._last_step = step
        if not trainer.is_global_zero or self._started is None:
            return
        now = time.perf_counter()
        if not self.tty and not self._due(now, step):
            return
        loss = trainer.callback_metrics.get("train/loss")
        self._write(self.line(step, now, None if loss is None else float(loss)))

    def on_train_end(self, trainer: L.Trainer, pl_module) -> None:
        if self._live:
            self.stream.write("\n")
            self.stream.flush()
            self._live = False

    def on_exception(self, trainer: L.Trainer, pl_module, exception: BaseException) -> None:
        self.on_train_end(trainer, pl_module)  # the error starts on a line of its own

    def _due(self, now: float, step: int) -> bool:
        last_time, last_percent = self._printed
        percent = 100.0 * step / max(1, self.total_steps)
        if step == self.total_steps or percent - last_percent >= self.every_percent or now - last_time >= self.every_seconds:
            self._printed = (now, percent)
            return True
        return False

    def line(self, step: int, now: float, loss: float | None) -> str:
        start_time, start_step = self._started
        elapsed = now - start_time
        rate = (step - start_step) / elapsed if elapsed > 0 and step > start_step else None
        parts = [f"step {step:,}/{self.total_steps:,} ({100 * step / max(1, self.total_steps):.0f}%)",
                 f"{step * self.tokens_per_step:,} tokens"]
        if loss is not None:
            parts.append(f"loss {loss:.3f}")
        if rate:
            parts.append(f"{rate * self.tokens_per_step:,.0f} tok/s")
            parts.append(f"ETA {clock((self.total_steps - step) / rate)}" if step < self.total_steps
                         else f"took {clock(elapsed)}")
        return " | ".join(parts)

    def _write(self, text: str) -> None:
        if self.tty:
            self.stream.write("\r" + text + "\x1b[K")  # erase what a longer previous line left
            self._live = True
        else:
            self.stream.write(text + "\n")
        self.stream.flush()
