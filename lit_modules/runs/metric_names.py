"""Names of the bookkeeping metrics every run logs (the losses keep their `train/` and `val/` names).

MLflow's run page groups a run's charts into sections named by the key's prefix, sorts the sections
alphabetically and puts unprefixed keys ("Model metrics") last. Learning rates and throughput therefore
have no prefix: the first charts a user sees are the losses (`train/`, `val/`), the bookkeeping follows.
"""

from __future__ import annotations

TOKENS_SEEN = "tokens_seen"
TOKENS_PER_S = "tokens_per_s"
STEP_TIME_S = "step_time_s"
MFU = "mfu"
TIMING = (TOKENS_PER_S, STEP_TIME_S, MFU)  # wall-clock measurements: they change with load, nothing else does


def learning_rate(group: str) -> str:
    """The learning-rate metric of one parameter group, e.g. `lr_mlp`."""
    return f"lr_{group}"


def current_name(key: str) -> str:
    """Today's name of a key logged by older code (`lr/mlp`, `perf/tokens_per_s`; the committed evidence
    store holds those): analysis and the goldens read both, only today's are written."""
    if key.startswith("lr/"):
        return learning_rate(key[len("lr/"):])
    if key.startswith("perf/"):
        return key[len("perf/"):]
    return key
