"""Read `conf/evidence/<name>.yaml` into an EvidenceSpec; a malformed protocol is one sentence (ConfigError).

    spec = load_spec("wisca")
    known_papers()                      # every protocol in conf/evidence/
    protocol_grid("evidence/wisca")     # the cells `make ablate EXP=evidence/wisca` runs: the protocol's

The format, field by field, is docs/evidence.md. This module only reads and checks the file: composing its
cells is sweeps/evidence/plan.py's.
"""

from __future__ import annotations

import math
import re

from omegaconf import OmegaConf

from lit_modules.config import files
from lit_modules.config.errors import ConfigError
from sweeps import lr_tuning
from sweeps.evidence.spec import ABLATE_SEEDS, STAGES, Arm, Block, EvidenceSpec, Rung
from sweeps.finetune_tuning import parse_finetune_tuning

SPEC_DIR = files.group_dir("evidence")  # the protocols (a test points this at its own folder)
KEYS = ("preset", "arms", "rungs", "blocks", "lr_tuning", "checks", "ablation_only", "ablate_seeds", "budgets",
        "finetune", "finetune_eval", "finetune_lr_tuning")
ARM_KEYS = ("extends", "overrides", "at", "rate_of", "rate_factor")
BLOCK_KEYS = ("arms", "seeds", "stage", "rung")
NAME = re.compile(r"[A-Za-z][A-Za-z0-9_.+-]*(@[A-Za-z0-9_.+-]+)*")  # a cell name is also a Hydra value


def known_papers() -> list[str]:
    return sorted(p.stem for p in SPEC_DIR.glob("*.yaml"))


def load_spec(paper: str) -> EvidenceSpec:
    path = SPEC_DIR / f"{paper}.yaml"
    if not path.is_file():
        raise ConfigError(f"There is no evidence protocol '{paper}' in conf/evidence/ (known: {', '.join(known_papers())}).")
    where = f"conf/evidence/{paper}.yaml"
    try:
        raw = OmegaConf.to_container(OmegaConf.load(path))
    except Exception as err:  # noqa: BLE001 - any YAML or OmegaConf error: one sentence naming the file
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise ConfigError(f"{where} is not a YAML file the driver can read ({first}).") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{where} is a mapping of {', '.join(KEYS)}.")
    unknown = set(raw) - set(KEYS)
    if unknown:
        raise ConfigError(f"{where} has unknown key(s) {', '.join(sorted(unknown))} (allowed: {', '.join(KEYS)}).")
    preset = raw.get("preset")
    if not preset or not raw.get("blocks"):
        raise ConfigError(f"{where} must name a 'preset' and at least one block.")
    if not files.has_option("experiment", str(preset)):
        raise ConfigError(f"{where}: {files.missing_option_sentence('experiment', str(preset), 'preset')}")
    arms = {**_preset_arms(str(preset)), **_arms(raw.get("arms"), where)}
    rungs = _rungs(raw.get("rungs"), where)
    bad_at = sorted({r for a in arms.values() for r in a.at} - set(rungs))
    if bad_at:
        raise ConfigError(f"{where}: an arm's `at` names rung(s) {', '.join(bad_at)}, which `rungs` does not declare.")
    tasks = raw.get("finetune_eval") or []
    if tasks and (not raw.get("finetune") or not isinstance(tasks, list)):
        raise ConfigError(f"{where}: finetune_eval is a list of tasks for the fine-tuned models, so it needs a "
                          "'finetune' recipe.")
    blocks = _blocks(raw["blocks"], where)
    spec = EvidenceSpec(paper, str(preset), blocks, raw.get("finetune"), tuple(str(t) for t in tasks), raw.get("checks"),
                        lr_tuning.parse_lr_tuning(raw.get("lr_tuning"), where, blocks),
                        tuple(str(a) for a in raw.get("ablation_only") or []),
                        parse_finetune_tuning(raw.get("finetune_lr_tuning"), where, blocks, raw.get("finetune")),
                        arms, rungs, _budgets(raw.get("budgets"), where), _seeds(raw.get("ablate_seeds"), where), where)
    for name in arms:  # `<arm>@<rung>` is the arm at the rung: its settings there go under the arm's `at`
        head, sep, rung = name.rpartition("@")
        if sep and head in arms and rung in rungs:
            raise ConfigError(f"{where} declares the arm `{name}`, which is `{head}` at the rung {rung}; give its "
                              f"settings there under `{head}`'s at: {{{rung}: [...]}}.")
    for name in spec.ablate_names():  # every cell names an arm, or an arm at a declared rung
        spec.resolve(name)
    _check_controls(spec)
    running = sorted(set(spec.ablation_only) & {a for b in blocks for a in b.arms})
    if running:
        raise ConfigError(f"{where} lists {', '.join(running)} under ablation_only and in a block; an arm either "
                          "runs in the protocol or is left to `make ablate`.")
    return spec


def protocol_of_preset(preset: str) -> EvidenceSpec | None:
    """The protocol whose `preset:` is this one (its cells are the preset's `make ablate` grid), if any."""
    for paper in known_papers():
        try:
            node = OmegaConf.load(SPEC_DIR / f"{paper}.yaml")
        except Exception:  # noqa: BLE001 - not this preset's protocol; reading it by name says what is wrong
            continue
        if OmegaConf.is_dict(node) and node.get("preset") == preset:
            return load_spec(paper)
    return None


def protocol_grid(preset: str) -> tuple[list[str], list[str], dict[str, list[str]]]:
    """`make ablate EXP=<preset>` of a preset that lists no arms: (the protocol's cells, its ablate_seeds, each
    cell's overrides), from the protocol whose run preset it is; ConfigError when none names it."""
    spec = protocol_of_preset(preset)
    if spec is None:
        raise ConfigError(f"The preset '{preset}' declares no arms (hydra.sweeper.params['+arm']) and no protocol "
                          "in conf/evidence/ names it.")
    names = spec.ablate_names()
    return names, [str(s) for s in spec.ablate_seeds], {name: spec.arm_words(name) for name in names}


def _preset_arms(preset: str) -> dict[str, Arm]:
    """The arms a preset lists itself (hydra.sweeper.params['+arm']), each extending its file, by short name."""
    params = OmegaConf.select(files.load_option("experiment", preset), "hydra.sweeper.params") or {}
    listed = [a.strip() for a in str(params.get("+arm", "")).split(",") if a.strip()]
    return {a.rsplit("/", 1)[-1]: Arm(a.rsplit("/", 1)[-1], extends=a) for a in listed}


def _words(value: object, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(w, str) and "=" in w for w in value):
        raise ConfigError(f"{where} is a list of Hydra overrides (key=value, group=option); got {value!r}.")
    return tuple(value)


def _arms(node: object, where: str) -> dict[str, Arm]:
    """`arms:` name -> a list of overrides, or {extends: <conf/arm option>, overrides: [...], at: {rung: [...]}}."""
    if node is None:
        return {}
    if not isinstance(node, dict):
        raise ConfigError(f"{where}: arms is a mapping of arm name -> its overrides (a list) or "
                          f"{{{', '.join(ARM_KEYS)}}}.")
    arms = {}
    for name, value in node.items():
        name = str(name)
        if not NAME.fullmatch(name):
            raise ConfigError(f"{where}: arm name '{name}' must start with a letter and hold letters, digits and "
                              "_ . + - (and @ before a variant).")
        if isinstance(value, dict):
            extra = set(value) - set(ARM_KEYS)
            if extra:
                raise ConfigError(f"{where} arm `{name}` has unknown key(s) {', '.join(sorted(map(str, extra)))} "
                                  f"(allowed: {', '.join(ARM_KEYS)}).")
            extends = value.get("extends")
            if extends is not None and not files.has_option("arm", str(extends)):
                raise ConfigError(f"{where} arm `{name}` extends '{extends}', which is not an arm file in conf/arm/.")
            at = value.get("at") or {}
            if not isinstance(at, dict):
                raise ConfigError(f"{where} arm `{name}`: at is a mapping of rung -> overrides.")
            arms[name] = Arm(name, _words(value.get("overrides"), f"{where} arm `{name}` overrides"),
                             str(extends) if extends is not None else None,
                             {str(r): _words(w, f"{where} arm `{name}` at {r}") for r, w in at.items()},
                             *_rate_of(value, f"{where} arm `{name}`"))
        else:
            arms[name] = Arm(name, _words(value, f"{where} arm `{name}`"))
    return arms


def _rate_of(value: dict, name: str) -> tuple[str | None, float]:
    """A control's `rate_of` (the arm whose tuned rate it runs at) and `rate_factor` (default 1.0)."""
    ref, factor = value.get("rate_of"), value.get("rate_factor", 1.0)
    if ref is None and "rate_factor" in value:
        raise ConfigError(f"{name} gives rate_factor without rate_of; the factor scales the tuned rate of the arm "
                          "rate_of names.")
    if isinstance(factor, bool) or not isinstance(factor, (int, float)) or not math.isfinite(factor) or factor <= 0:
        raise ConfigError(f"{name}: rate_factor is a positive number, the multiple of its reference's tuned rate "
                          f"it runs at (got {factor!r}).")
    return (str(ref) if ref is not None else None), float(factor)


def _check_controls(spec: EvidenceSpec) -> None:
    """Each control (an arm with `rate_of`) runs at a tuned rate of another arm, one that is not a control
    itself, at every rung where a block runs it; it is tuned by no grid and sets no tuned rate itself."""
    tuned = {a: t.key for t in spec.lr_tuning for a in t.arms}
    cells = list(dict.fromkeys(a for b in spec.blocks for a in b.arms))
    for arm in (a for a in spec.arms.values() if a.rate_of is not None):
        name, ref = f"{spec.where} arm `{arm.name}`", spec.arms.get(arm.rate_of)
        if ref is None:
            raise ConfigError(f"{name} takes its rate from `{arm.rate_of}` (rate_of), which is none of the protocol's "
                              f"arms ({', '.join(spec.arms)}).")
        if ref.rate_of is not None:
            raise ConfigError(f"{name} takes its rate from `{ref.name}`, which takes its own from `{ref.rate_of}`; "
                              "rate_of names a tuned arm, not another control.")
        own = sorted(c for c in tuned if spec.family(c) == arm.name)
        if own:
            raise ConfigError(f"{spec.where} lr_tuning tunes `{own[0]}`, but arm `{arm.name}` takes its rate from "
                              f"`{ref.name}` (rate_of); drop the control from the grid.")
        for cell in (c for c in cells if spec.family(c) == arm.name):
            source = spec.rate_source(cell)[0]
            if source not in tuned:
                raise ConfigError(f"{name} runs `{cell}` at `{source}`'s tuned rate (rate_of), but no lr_tuning "
                                  f"grid tunes `{source}`.")
            words = [*arm.overrides, *(w for ws in arm.at.values() for w in ws)]
            setting = [w for w in words if w.lstrip("+~").split("=", 1)[0] == tuned[source]]
            if setting:
                raise ConfigError(f"{name} sets {setting[0]}, but its {tuned[source]} is `{source}`'s tuned rate "
                                  "(rate_of); drop that override.")


def _rungs(node: object, where: str) -> dict[str, Rung]:
    """`rungs:` name -> a model option, or {model: <option>, overrides: [...]}; every rung of the CPU ladder
    (conf/ladder/cpu.yaml: model=ladder/<rung>) is known without a line."""
    from lit_modules.config.ladder import MODEL_GROUP, load_ladder

    group = MODEL_GROUP.removeprefix("model/")
    rungs = {r.name: Rung(r.name, f"{group}/{r.name}") for r in load_ladder().rungs}
    ladder = {r.model for r in rungs.values()}
    if node is None:
        return rungs
    if not isinstance(node, dict):
        raise ConfigError(f"{where}: rungs is a mapping of rung name -> its model option (or {{model, overrides}}).")
    for name, value in node.items():
        name = str(name)
        if not NAME.fullmatch(name) or "@" in name:
            raise ConfigError(f"{where}: rung name '{name}' must start with a letter and hold no '@'.")
        if isinstance(value, dict):
            if not {"model"} <= set(value) <= {"model", "overrides"}:
                raise ConfigError(f"{where} rung `{name}` names its 'model' (and may give 'overrides'); "
                                  f"it has {', '.join(map(str, value)) or 'nothing'}.")
            model, words = str(value["model"]), _words(value.get("overrides"), f"{where} rung `{name}` overrides")
        else:
            model, words = str(value), ()
        if not files.has_option("model", model) and model not in ladder:
            raise ConfigError(f"{where}: rung `{name}` runs model={model}, which is no model option "
                              f"({files.missing_option_sentence('model', model)})")
        rungs[name] = Rung(name, model, words)
    return rungs


def _blocks(node: object, where: str) -> tuple[Block, ...]:
    if not isinstance(node, list):
        raise ConfigError(f"{where}: blocks is a list of {{arms, seeds, stage, rung}}.")
    blocks = []
    for i, block in enumerate(node, 1):
        if (not isinstance(block, dict) or not {"arms", "seeds"} <= set(block) <= set(BLOCK_KEYS)
                or not block["arms"] or not block["seeds"]):
            raise ConfigError(f"{where} block {i} needs non-empty 'arms' and 'seeds' lists (and may name a 'stage' "
                              "and a 'rung').")
        stage = str(block.get("stage", "headline"))
        if stage not in STAGES:
            raise ConfigError(f"{where} block {i} has stage '{stage}'; the stages are {', '.join(STAGES)}.")
        rung = f"@{block['rung']}" if block.get("rung") is not None else ""
        try:
            seeds = tuple(int(s) for s in block["seeds"])
        except (TypeError, ValueError):
            raise ConfigError(f"{where} block {i}: seeds are integers (got {block['seeds']}).") from None
        blocks.append(Block(tuple(f"{a}{rung}" for a in block["arms"]), seeds, stage))
    seen: dict[tuple[str, int], int] = {}
    for i, block in enumerate(blocks, 1):
        for cell in ((a, s) for a in block.arms for s in block.seeds):
            if seen.setdefault(cell, i) != i:  # a stage's blocks run as one launch, where a cell is run once
                raise ConfigError(f"{where} runs `{cell[0]}` seed {cell[1]} in blocks {seen[cell]} and {i}; "
                                  "list each cell once.")
    return tuple(blocks)


def _budgets(node: object, where: str) -> dict[str, float]:
    if node is None:
        return {}
    if (not isinstance(node, dict) or not set(node) <= {*STAGES, "all"}
            or not all(isinstance(v, (int, float)) and v > 0 for v in node.values())):
        raise ConfigError(f"{where}: budgets maps a stage ({', '.join(STAGES)}) or 'all' (the stages run, "
                          "together) to the minutes it may take.")
    return {str(k): float(v) for k, v in node.items()}


def _seeds(node: object, where: str) -> tuple[int, ...]:
    if node is None:
        return ABLATE_SEEDS
    if not isinstance(node, list) or not node or not all(isinstance(s, int) for s in node):
        raise ConfigError(f"{where}: ablate_seeds is a non-empty list of integers.")
    return tuple(node)
