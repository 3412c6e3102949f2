"""Moved to lit_modules.runs.uri_masking (runs/ reads stores below tracking/, issue 30). This name stays only for
sweeps/optuna_sweep.py, whose owner moves its import; nothing else may import it (tests/test_layers.py)."""

from lit_modules.runs.uri_masking import mask_password  # noqa: F401
