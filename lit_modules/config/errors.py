"""Errors that mean "the user asked for something impossible": reported as one sentence, exit code 2."""


class ConfigError(ValueError):
    """An impossible or unknown configuration, found before any data is read or any run is opened."""
