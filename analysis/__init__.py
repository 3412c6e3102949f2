"""Analysis: MLflow runs and run artifacts -> pandas tables, plots and reports (never imports the model)."""

import lit_modules  # noqa: F401  first: it turns MLflow's telemetry off before mlflow loads
