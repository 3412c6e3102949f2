"""Errors that mean "the user asked for something impossible": reported as one sentence, exit code 2."""


class ConfigError(ValueError):
    """An impossible or unknown configuration, found before any data is read or any run is opened."""


class EvalError(Exception):
    """An evaluation problem explained in one sentence; entry points print it and exit 2, no traceback.

    Here, not in evaluation/, because the eval config (config/evaluation.py) raises it too."""
