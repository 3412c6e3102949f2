"""The one exception type evaluation raises for problems a user can fix."""


class EvalError(Exception):
    """An evaluation problem explained in one sentence; entry points print it and exit 2, no traceback."""
