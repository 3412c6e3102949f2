"""The dry run's plan of a GPU run: device table, ETA, memory per strategy, and whether it fits."""
