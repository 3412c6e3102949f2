"""The single run's live line: what it says, how often it prints in a log, and in place on a terminal."""

import io
from pathlib import Path
from types import SimpleNamespace

from lit_modules.callbacks.live_progress import LiveProgress, clock
from lit_modules.config.composition import compose_run_config
from lit_modules.train import run
from tests.helpers.runs import tiny_overrides


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_clock_and_the_line_say_step_tokens_loss_rate_and_eta() -> None:
    assert (clock(3), clock(87), clock(7500)) == ("3s", "1m27s", "2h05m")
    progress = LiveProgress(total_steps=400, tokens_per_step=2048)
    progress._started = (100.0, 0)
    line = progress.line(120, 112.0, 2.3141)  # 120 steps in 12 s: 10 steps/s, 280 left
    assert line == "step 120/400 (30%) | 245,760 tokens | loss 2.314 | 20,480 tok/s | ETA 28s"
    assert progress.line(400, 140.0, None).endswith("| took 40s")


def test_steps_between_logging_steps_read_nothing() -> None:
    """The per-step cost: off the logging cadence the callback returns before touching the trainer's metrics."""
    progress = LiveProgress(total_steps=100, tokens_per_step=8, stream=io.StringIO())
    progress._every_n, progress._started = 10, (0.0, 0)

    class NoMetrics:
        global_step, is_global_zero = 7, True

        @property
        def callback_metrics(self):
            raise AssertionError("read on a step that logs nothing")

    progress.on_train_batch_end(NoMetrics(), None, None, None, 0)
    assert progress.stream.getvalue() == ""


def test_a_log_gets_a_line_per_tenth_and_a_terminal_one_line_rewritten(runs_dir: Path, capsys) -> None:
    run(compose_run_config(tiny_overrides(runs_dir, steps=20)), progress=True)  # logs every 5 steps
    lines = capsys.readouterr().err.strip().splitlines()
    progress = [line for line in lines if line.startswith("step ")]
    assert [line.split(" | ")[0] for line in progress] == [
        "step 5/20 (25%)", "step 10/20 (50%)", "step 15/20 (75%)", "step 20/20 (100%)"]
    assert "loss " in progress[0] and progress[-1].split(" | ")[-1].startswith("took ")

    terminal = Terminal()
    tty = LiveProgress(total_steps=20, tokens_per_step=512, stream=terminal)
    trainer = SimpleNamespace(log_every_n_steps=5, global_step=0, is_global_zero=True, callback_metrics={})
    tty.on_train_start(trainer, None)
    for step in range(1, 21):
        trainer.global_step = step
        tty.on_train_batch_end(trainer, None, None, None, step)
    tty.on_train_end(trainer, None)
    written = terminal.getvalue()
    assert written.count("\r") == 4 and written.count("\n") == 1 and written.endswith("\n")
