"""`python -m lit_modules.train --help`: the verb, its config groups and their options, read from conf/.

Hydra's own `--help` composes every option of every group (258 with the presets' nested groups) and costs
seconds before its first line; this lists the same groups from the files alone. Hydra's own stays reachable
as `--hydra-help`, and the composed config as `--cfg job`.
"""

from __future__ import annotations

from lit_modules.config import files

HELP_FLAGS = ("--help", "-h")
# conf/ folders another verb reads (not groups of a run's config): folder -> the verb.
OTHER_VERBS = {"evidence": "make evidence", "finetune": "make finetune / make plasticity", "sweep": "make sweep"}
USAGE = """\
train: one run, or a grid of runs (-m), composed from conf/ by Hydra; a bad config is refused in one
sentence (exit 2) before anything runs.

  python -m lit_modules.train [group=option ...] [key=value ...]     e.g. model=small optim.lr=1e-3
  python -m lit_modules.train dry_run=true ...                        sizes, FLOPs/token, budget, ETA, memory
  python -m lit_modules.train -m seed=0,1,2 optim.lr=1e-3,3e-3        a grid: every job composes first
  python -m lit_modules.train resume=<run id>                          continue a stopped run exactly
  python -m lit_modules.train --cfg job [overrides]                    print the composed config
  python -m lit_modules.train --hydra-help                             Hydra's own help (slow: it composes all)
"""


def _defaults() -> dict[str, str]:
    """group -> its default option, from conf/config.yaml's defaults list."""
    from omegaconf import OmegaConf

    chosen = {}
    for entry in OmegaConf.to_container(OmegaConf.load(files.CONF_DIR / "config.yaml")).get("defaults", []):
        if isinstance(entry, dict):
            ((group, option),) = entry.items()
            chosen[str(group).removeprefix("override /")] = "null" if option is None else str(option)
    return chosen


def help_text() -> str:
    """The usage, then each top-level group with its options (the default first, marked) and, for a group of
    presets' folders (arm/, experiment/), the folders it holds."""
    defaults = _defaults()
    lines = [USAGE, "Config groups (conf/<group>/<option>.yaml; * the default, null = off):"]
    folders = sorted(p.name for p in files.CONF_DIR.iterdir() if p.is_dir() and p.name != "hydra")
    for group in (g for g in folders if g not in OTHER_VERBS):
        options = files.options(group)
        default = defaults.get(group)
        marked = [f"{o}*" if o == default else o for o in options]
        if default == "null":
            marked.insert(0, "null*")
        nested = sorted(p.name for p in files.group_dir(group).iterdir() if p.is_dir())
        text = ", ".join(marked)
        if nested:
            text += ("; " if text else "") + "folders: " + ", ".join(f"{f}/" for f in nested)
        lines.append(f"  {group}: {text}")
    lines += ["", "An arm of a preset is added as +arm=<preset>/<arm> (the ablation grid does this per cell).",
              "Read by other verbs: " + "; ".join(f"{f}/ ({OTHER_VERBS[f]})" for f in folders if f in OTHER_VERBS) + ".",
              "Any schema key is an override (key=value); lit_modules/config/schema.py documents them."]
    return "\n".join(lines)
