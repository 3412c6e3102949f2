"""The config hash (the run's identity, lit_modules/config/identity.py identity_of) of every cell of the presets that
existed before the variants (LoRA, MoE, optimizers): new config fields must leave these unchanged, or every
finished evidence cell would be rerun instead of skipped.

    python -m tests.helpers.preset_hashes > tests/assets/preset_hashes.json   # record (on the old code)
"""

from __future__ import annotations

import json
import sys

from omegaconf import OmegaConf

from lit_modules.config.composition import compose_run_config
from lit_modules.config.validate import validated
from lit_modules.tracking import repro
from tests.helpers.runs import REPO

PRESETS = ("smoke", "wisca", "pc_layer", "mols", "small_init", "z_loss", "wd_plasticity", "evidence/wisca",
           "evidence/pc_layer", "evidence/mols", "evidence/small_init", "evidence/wd_plasticity")


def arms(preset: str) -> list[str]:
    """The preset's arms as recorded: its arm files, or for an evidence protocol's run preset its cells named
    as their arm files were before the protocol declared them (`evidence/<paper>/<cell>`)."""
    node = OmegaConf.load(REPO / "conf/experiment" / f"{preset}.yaml")
    if OmegaConf.select(node, "hydra.sweeper.params") is None:
        from sweeps.evidence.protocol_file import protocol_grid

        return [f"{preset}/{name}" for name in protocol_grid(preset)[0]]
    return str(node.hydra.sweeper.params["+arm"]).split(",")


def cell_hash(overrides: list[str]) -> str:
    from lit_modules.config.identity import identity_of

    cfg = validated(compose_run_config(overrides)).config
    return repro.config_hash(identity_of(OmegaConf.to_container(cfg, resolve=True)))


def cell_overrides(preset: str, arm: str) -> list[str]:
    if arm.startswith("evidence/"):  # a protocol's cell: the protocol's overrides make it
        from sweeps.evidence.protocol_file import protocol_grid

        return [f"experiment={preset}", *protocol_grid(preset)[2][arm.removeprefix(f"{preset}/")], "seed=0",
                "runs_dir=runs"]
    return [f"experiment={preset}", f"+arm={arm}", "seed=0", "runs_dir=runs"]


def record() -> dict[str, str]:
    return {f"{p} {a}": cell_hash(cell_overrides(p, a)) for p in PRESETS for a in arms(p)}


if __name__ == "__main__":
    json.dump(record(), sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")
