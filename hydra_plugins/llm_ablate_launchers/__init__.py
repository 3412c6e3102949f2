"""Hydra launchers of llm-ablate (Hydra loads launcher plugins only from the hydra_plugins package)."""
