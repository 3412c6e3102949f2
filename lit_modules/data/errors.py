"""The one exception type the data layer raises for problems a user can fix."""


class DataError(Exception):
    """A data problem explained in one sentence that says what to do.

    Callers (the training entry point, `make setup`) print the message and exit
    without a traceback, so the message must stand on its own.
    """
