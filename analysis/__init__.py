"""Analysis: MLflow runs and run artifacts -> pandas tables, plots and reports (never imports the model)."""
