"""Hydra plugins of llm-ablate: the cell launchers and the cell-list sweeper (Hydra loads plugins only from
the hydra_plugins package)."""
