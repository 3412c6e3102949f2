"""Runs after training, as the tools that read them see them: the tag vocabulary, the store they live in,
a finished run with its verified checkpoint and recorded config, and the parent runs that group them.

    from lit_modules.runs import tags                  # the tag keys every layer writes and reads
    from lit_modules.runs.store import open_store      # an existing MLflow store (never creates one)
    from lit_modules.runs.finished import finished_run, RunCheckpoint
    from lit_modules.runs.search import find_parent, grid_bases

Importing this package is cheap: the model and Lightning load only when a run's model is rebuilt.
"""
