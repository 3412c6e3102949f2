"""Moved to lit_modules.runs.store_check (runs/ reads stores below tracking/, issue 30). This name stays only for
sweeps/optuna_sweep.py, whose owner moves its import; nothing else may import it (tests/test_layers.py)."""

from lit_modules.runs.store_check import check_database_driver, check_store  # noqa: F401
