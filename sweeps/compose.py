"""An alias of `lit_modules.config.composition.compose_run_config`, the one home of composition.

Kept so that code written against `sweeps.compose` (other branches' tests) still imports; new code imports
lit_modules.config.composition, and conf/ is located by lit_modules.config.files.
"""

from lit_modules.config.composition import compose_run_config

__all__ = ["compose_run_config"]
