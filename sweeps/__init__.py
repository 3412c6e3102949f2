import lit_modules  # noqa: F401  first: it turns MLflow's telemetry off before mlflow loads
