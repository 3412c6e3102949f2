"""An evidence protocol as data: its arms, rungs, blocks of cells, learning-rate grids, checks and budgets.

    spec = load_spec("wisca")                     # sweeps/evidence/protocol_file.py reads conf/evidence/wisca.yaml
    spec.resolve("g8_origin@x4")                  # ('g8_origin', 'x4'): the arm, at the rung x4
    spec.arm_words("g8_origin@x4")                # its Hydra overrides over the run preset, its name included

A cell is named `<arm>` or `<arm>@<rung>`: the arm's overrides (after the conf/arm/ arm it extends, if any),
then the rung's model and settings and the arm's own settings there, then `ablation.arm=<name>`: the name is derived,
never restated in a file. Every module of the driver reads these types; this one imports no other module
of sweeps/, so none of them imports it back.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from analysis.lr_tuning import LrTuning
from lit_modules.config.errors import ConfigError

# Run in this order: the primary pairs (the headline rung, or a smaller one where a pair there would not fit the
# headline's budget); the smaller rungs and secondary arms; the larger rungs.
STAGES = ("headline", "below", "scale")
ABLATE_SEEDS = (0, 1, 2, 3, 4)  # `make ablate EXP=<preset>`: every arm of the protocol on these seeds


@dataclass(frozen=True)
class Arm:
    """One arm: the conf/arm/ option it `extends` (None: the preset alone), its own Hydra `overrides` after it,
    and at a rung, overrides of its own there (`at`: rung -> overrides). A calibration control names the
    tuned arm whose rate it runs at (`rate_of`, at the cell's rung), times `rate_factor`."""

    name: str
    overrides: tuple[str, ...] = ()
    extends: str | None = None
    at: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    rate_of: str | None = None
    rate_factor: float = 1.0


@dataclass(frozen=True)
class Rung:
    """A model size: its cells run `model=<model>` and the rung's own `overrides` (a budget fixed per size)."""

    name: str
    model: str
    overrides: tuple[str, ...] = ()


@dataclass(frozen=True)
class Block:
    """Cells run together: every arm (a cell name, `<arm>[@<rung>]`) on every seed, in one stage."""

    arms: tuple[str, ...]
    seeds: tuple[int, ...]
    stage: str = "headline"


@dataclass(frozen=True)
class EvidenceSpec:
    paper: str
    preset: str  # the run preset every cell starts from (conf/experiment/<preset>.yaml)
    blocks: tuple[Block, ...]
    finetune: str | None = None
    finetune_eval: tuple[str, ...] = ()  # zero-shot tasks for every fine-tuned model (empty: none)
    checks: dict | None = None  # the declared families (analysis.families), hashed into the provenance
    lr_tuning: tuple[LrTuning, ...] = ()  # learning-rate grids of tuned arms (sweeps/lr_tuning.py)
    ablation_only: tuple[str, ...] = ()  # cells this protocol does not run (`make ablate` does), declared
    finetune_lr_tuning: LrTuning | None = None  # the fine-tune's rate grid (sweeps/finetune_tuning.py)
    arms: Mapping[str, Arm] = field(default_factory=dict)  # name -> arm (the preset's own arms included, as extensions of their files)
    rungs: Mapping[str, Rung] = field(default_factory=dict)  # rung name -> its model option and overrides
    budgets: Mapping[str, float] = field(default_factory=dict)  # stage (or "all") -> the minutes it may take
    ablate_seeds: tuple[int, ...] = ABLATE_SEEDS
    where: str = ""  # the file, for sentences
    whole: EvidenceSpec | None = field(default=None, compare=False, repr=False)  # before in_stages: the declaration

    def __post_init__(self) -> None:
        if not self.where:
            object.__setattr__(self, "where", f"conf/evidence/{self.paper}.yaml")

    # --- cells by name --------------------------------------------------------------------------------------

    def resolve(self, name: str) -> tuple[str, str | None]:
        """(arm, rung or None) of a cell name; ConfigError when it is neither `<arm>` nor `<arm>@<rung>`."""
        if name in self.arms:
            return name, None
        head, sep, rung = name.rpartition("@")
        if sep and head in self.arms and rung in self.rungs:
            return head, rung
        rungs = ", ".join(self.rungs) or "none declared"
        raise ConfigError(f"{self.where} names `{name}`, which is neither one of its arms ({', '.join(self.arms) or 'none'}) "
                          f"nor `<arm>@<rung>` with one of its rungs ({rungs}).")

    def arm_words(self, name: str, cell_name: str | None = None) -> list[str]:
        """The Hydra overrides (over the preset) that make the cell `name`: the file it extends, its own
        overrides, the rung's model and its settings there; named `cell_name` (default: `name`)."""
        arm_name, rung = self.resolve(name)
        arm = self.arms[arm_name]
        words = [f"+arm={arm.extends}"] if arm.extends else []
        words += arm.overrides
        if rung is not None:
            words += [f"model={self.rungs[rung].model}", *self.rungs[rung].overrides, *arm.at.get(rung, ())]
        return [*words, f"ablation.arm={cell_name or name}"]

    def rate_source(self, name: str) -> tuple[str, float] | None:
        """A control's cell (`origin_lr_quarter@l6`): the reference's cell at the same rung whose tuned rate it
        runs at (`origin@l6`) and the factor; None for a cell of any other arm."""
        arm_name, rung = self.resolve(name)
        arm = self.arms[arm_name]
        if arm.rate_of is None:
            return None
        return (f"{arm.rate_of}@{rung}" if rung is not None else arm.rate_of), arm.rate_factor

    def rated_cells(self, block: Block) -> set[str]:
        """The cells whose tuned rates the block's cells run at: its arms, and its controls' references."""
        return {*block.arms, *(source[0] for a in block.arms if (source := self.rate_source(a)) is not None)}

    def family(self, name: str) -> str:
        """The cell name without its rung (`g8_origin@tpp1.3@x4` -> `g8_origin@tpp1.3`); other names as given."""
        try:
            return self.resolve(name)[0]
        except ConfigError:
            return name

    def ablate_names(self) -> list[str]:
        """The cells of `make ablate EXP=<preset>`: every cell the blocks run, then the ablation-only ones."""
        return list(dict.fromkeys([*(a for b in self.blocks for a in b.arms), *self.ablation_only]))

    # --- counts and stages ----------------------------------------------------------------------------------

    def cells(self) -> int:
        return sum(len(b.arms) * len(b.seeds) for b in self.blocks)

    def cells_to_tune(self) -> int:
        return sum(len(t.arms) * len(t.grid) * len(t.tuning_seeds) for t in self.lr_tuning)

    def tuning_cells(self) -> set[str]:
        """The arm names of the tuning cells (`<arm>@lr<rate>`), at every rate a grid may grow to."""
        return {t.cell_arm(a, r) for t in self.lr_tuning for a in t.arms for r in t.lattice()}

    def stage_tunings(self, stage: str) -> list[LrTuning]:
        """The grids a stage tunes: each in the first stage that needs its rates (its arms' stage, or an earlier
        one whose controls run at a rate it chooses), so no grid runs twice."""
        def first(t: LrTuning) -> str | None:
            return next((s for s in STAGES for b in self.blocks
                         if b.stage == s and self.rated_cells(b) & set(t.arms)), None)

        return [t for t in self.lr_tuning if first(t) == stage]

    def in_stages(self, stages: list[str]) -> EvidenceSpec:
        """The same protocol with only the blocks (and tuning grids) of these stages, in stage order."""
        blocks = tuple(b for stage in STAGES if stage in stages for b in self.blocks if b.stage == stage)
        kept = {a for b in blocks for a in b.arms}
        rated = {c for b in blocks for c in self.rated_cells(b)}  # a kept control keeps its reference's grid
        ft = self.finetune_lr_tuning
        ft = replace(ft, arms=tuple(a for a in ft.arms if a in kept)) if ft is not None else None
        return replace(self, blocks=blocks, lr_tuning=tuple(t for t in self.lr_tuning if set(t.arms) & rated),
                       finetune_lr_tuning=ft if ft is not None and ft.arms else None, whole=self.declared())

    def declared(self) -> EvidenceSpec:
        """The whole protocol as its file declares it, whichever stages this call runs: what is checked and hashed."""
        return self.whole or self

    def at_recipe_size(self, recipe: str) -> EvidenceSpec:
        """The protocol under `recipe=<size>`, which sets the model: a cell at a rung (a CPU-ladder size) runs as
        its arm at the recipe's size (`g8_origin@tpp1.3@x4` -> `g8_origin@tpp1.3`), its checks and grids with it."""
        def mapped(arms) -> tuple[str, ...]:
            return tuple(self.family(a) for a in arms)

        blocks = tuple(replace(b, arms=mapped(b.arms)) for b in self.blocks)
        cells = [(a, s) for b in blocks for a in b.arms for s in b.seeds]
        twice = sorted({f"`{a}` seed {s}" for a, s in cells if cells.count((a, s)) > 1})
        if twice:
            raise ConfigError(f"Under recipe={recipe} {self.where}'s rung arms run as their family arms at the "
                              f"recipe's size, which would run {', '.join(twice)} twice.")
        checks = dict(self.checks or {})
        for part in ("primary", "added_after_data", "components"):  # the parts that name cells (analysis.families)
            if isinstance(checks.get(part), list):
                checks[part] = [{**e, **{k: self.family(str(e[k])) for k in ("arm", "reference", "without") if k in e}}
                                if isinstance(e, dict) else e for e in checks[part]]
        ft = self.finetune_lr_tuning
        # The declaration is what runs: the headline at the recipe's size (the CPU rungs would all map to one size).
        return replace(self, blocks=blocks, checks=checks or self.checks,
                       lr_tuning=tuple(replace(t, arms=mapped(t.arms)) for t in self.lr_tuning),
                       finetune_lr_tuning=replace(ft, arms=mapped(ft.arms)) if ft is not None else None, whole=None)


def stage_cells(blocks: tuple[Block, ...] | list[Block]) -> int:
    return sum(len(b.arms) * len(b.seeds) for b in blocks)
