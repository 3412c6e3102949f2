"""Compose a run's config with Hydra from the repository's `conf/` plus override strings.

The one home of composition (and of its error sentences) is lit_modules.config.composition; the sweep
drivers and tests import it from here as before.
"""

from lit_modules.config.composition import CONF_DIR, compose_run_config

__all__ = ["CONF_DIR", "compose_run_config"]
