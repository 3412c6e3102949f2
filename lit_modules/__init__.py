"""The platform's core: configs, model, training, tracking, evaluation (see the README)."""

import os

# MLflow 3 sends usage telemetry from background threads (and fetches its config over the network) as
# soon as it is imported. The platform runs offline and keeps a researcher's runs to themselves: off
# unless they opt in with MLFLOW_DISABLE_TELEMETRY=false.
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
