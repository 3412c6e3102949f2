"""The one-sentence error of the layers below config/: hf/ (a model folder) and data/ raise it.

It lives here, beside nothing, because hf/ sits below config/ (config/hf_start.py reads a folder) and both
config/data.py and data/ raise it: one home below all three keeps the folders acyclic.
"""


class DataError(Exception):
    """A data problem explained in one sentence that says what to do.

    Callers (the training entry point, `make setup`) print the message and exit
    without a traceback, so the message must stand on its own.
    """
