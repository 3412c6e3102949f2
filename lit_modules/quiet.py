"""A clean terminal: the libraries' banners, known deprecation warnings and progress bars stay quiet.

Silenced: Lightning's start-up banners ("GPU available", "TPU available", the litlogger/litmodels tips)
and its "`Trainer.fit` stopped: `max_steps` reached" line (all INFO messages of its rank-zero logger;
its warnings still show), MLflow's two lines on creating a new store, lm-eval's INFO lines (about 14 per
evaluation; its warnings still show, but for a num_fewshot notice about a value the platform sets on
purpose), torch's `LeafSpec` FutureWarning (raised inside Lightning, nothing a user can change), and the
tqdm bars of `datasets` and lm-eval during evaluation. The platform prints its own progress instead
(lit_modules.callbacks.live_progress, the sweep and ablation drivers' lines).

tqdm reads its environment once, when it is first imported, so an entry point imports this module
before anything that imports tqdm (Lightning, Optuna, datasets); `TQDM_DISABLE=0` brings the bars back.
"""

from __future__ import annotations

import logging
import os
import warnings

os.environ.setdefault("TQDM_DISABLE", "1")
os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")

# Set by a driver that prints its own line per finished cell (sweeps.ablate): the cells then print none.
DRIVER_PRINTS_ENV = "LLM_ABLATE_DRIVER_PRINTS"

QUIET_LOGGERS = (
    "lightning.pytorch.utilities.rank_zero",  # GPU/TPU available, tips, `Trainer.fit` stopped
    "lightning.fabric.utilities.rank_zero",
    "lightning.pytorch.accelerators.cuda",  # LOCAL_RANK / CUDA_VISIBLE_DEVICES banner
    "mlflow.store.db.utils",  # "Creating initial MLflow database tables...", "Updating database tables"
    "lm_eval",  # ~14 INFO lines per evaluation ("Building contexts for ...", "Running loglikelihood requests")
)
KNOWN_WARNINGS = (
    (r"`isinstance\(treespec, LeafSpec\)` is deprecated", FutureWarning),
)


class _DropNumFewshotNotice(logging.Filter):
    """lm-eval warns "Overwriting default num_fewshot of <task> from None to 0" three times per evaluation,
    although the platform sets num_fewshot on purpose (always explicit): not a warning here."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("Overwriting default num_fewshot")


_NUM_FEWSHOT_NOTICE = _DropNumFewshotNotice()


def quiet_libraries() -> None:
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)
    logging.getLogger("lm_eval.evaluator").addFilter(_NUM_FEWSHOT_NOTICE)  # once: addFilter ignores a repeat
    for message, category in KNOWN_WARNINGS:
        warnings.filterwarnings("ignore", message=message, category=category)
