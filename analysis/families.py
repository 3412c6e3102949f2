"""Which checks of a protocol are primary (the paper's claims, Holm-adjusted together) and which secondary.

Declared before the cells run, in the protocol file `conf/evidence/<paper>.yaml` (statistics.md:
families are chosen before the data are seen):

    checks:
      primary:                        # the paper's claims: one Holm family
        - {arm: adamw_pc4, metric: speedup}
        - {arm: snr, metric: val/loss, tuned: true}     # the tuned comparison of an LR-swept family
        - {arm: small_eps_gate@l4, metric: val/loss, reference: baseline_eps_gate@l4}   # against a named cell
      margins: {val/loss: 0.01}       # TOST margin of a "none" expectation, in the metric's units
      added_after_data:               # checks declared after their data were first seen: flagged
        - {arm: "*", metric: "finetune:eval/*/acc", note: "added after ..."}   # every arm
      components:                     # a recipe's parts: each one's own share, printed beside the headline
        - {arm: small_eps_gate, without: baseline_eps_gate, metric: val/loss, part: "small init (gamma 1)"}
      confirmatory_seeds: [200, 201, 202, 203, 204, 205, 206, 207]   # the primary verdicts' seeds, never used
                                      # before (analysis/seed_ranges.py refuses one any committed run used)
      controls:                       # calibration, at every rung both arms ran (analysis/controls.py)
        - {arm: baseline_init1, reference: baseline, metric: val/loss, kind: null}       # init.stream=1 only
        - {arm: baseline_lr_div4, reference: baseline, metric: val/loss, kind: positive} # a planted harm

`arm` is the arm as the grid names it, variant included (`adamw_pc4@x4` is the 4x rung's test). A primary
entry compares the arm with its reference as the claim defines it (report.yaml `references`, else the
baseline); one with `reference: <cell>` (never `tuned`) is a row of its own, that arm against that cell,
judged in the same family by the same rule (the paper's effect is the arm's against its usual reference, so
that row has no paper figure), and the arm's usual row stays as it was. Every other test the claim makes is
secondary: raw p, a 95% interval, words no stronger than "consistent with".
An ablation that is not an evidence protocol has no declaration: all its tests form one Holm family, and its
report says the family was not declared.

`checks_sha256` hashes the declaration with the claim's checks (metrics, directions, expectations, the
paper's effects) and the protocol's seeds per block and learning-rate grids, so the provenance of an export
can say what was declared when its cells ran. The provenance keeps the `checks:` node itself too, and a results
folder is judged by the families it recorded (`families_for(name, provenance)`), not by a later revision.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field, asdict
from pathlib import Path

from omegaconf import OmegaConf

from analysis.claims import Claim
from lit_modules.config import files
from lit_modules.config.errors import ConfigError

PROTOCOL_PREFIX = "evidence/"
KEYS = {"primary", "margins", "added_after_data", "components", "controls", "confirmatory_seeds"}
ENTRY_KEYS = {"arm", "metric", "tuned", "note", "reference"}
COMPONENT_KEYS = {"arm", "without", "metric", "part"}
CONTROL_KEYS = {"arm", "reference", "metric", "kind"}
CONTROL_KINDS = ("null", "positive")
ANY_ARM = "*"
RECORDED_CHECKS = "checks"  # the provenance key holding the `checks:` node its cells ran under


@dataclass(frozen=True)
class CheckKey:
    arm: str
    metric: str
    tuned: bool = False
    reference: str = ""  # a cell named in the declaration; "" is the claim's own reference for the arm

    def text(self) -> str:
        against = f" vs `{self.reference}`" if self.reference else ""
        return f"`{self.arm}`{' (tuned)' if self.tuned else ''}{against} on `{self.metric}`"

    def declared(self) -> dict:
        """The entry as hashed: `reference` only where given, so a declaration without one hashes as before."""
        return {k: v for k, v in asdict(self).items() if k != "reference" or v}


@dataclass(frozen=True)
class Component:
    """One part of a recipe arm: `arm` against `without` (the recipe minus that part) isolates the part's share."""

    arm: str
    without: str
    metric: str
    part: str


@dataclass(frozen=True)
class Control:
    """A calibration arm: `null` differs from `reference` only in a nuisance (no effect may be called), `positive`
    carries a planted harm on `metric` (it must be detected, on the harmful side)."""

    arm: str
    reference: str
    metric: str
    kind: str


@dataclass(frozen=True)
class Families:
    """A protocol's declaration; `declared` False: no protocol declares one (every test is primary)."""

    primary: tuple[CheckKey, ...] = ()
    margins: dict[str, float] = field(default_factory=dict)
    added_after_data: dict[CheckKey, str] = field(default_factory=dict)
    declared: bool = True
    source: str = ""
    components: tuple[Component, ...] = ()
    controls: tuple[Control, ...] = ()
    confirmatory_seeds: tuple[int, ...] = ()  # when declared, the primary checks are judged on these seeds only

    def is_primary(self, key: CheckKey) -> bool:
        return not self.declared or key in self.primary

    def margin(self, metric: str) -> float | None:
        return self.margins.get(metric)

    def late_note(self, key: CheckKey) -> str:
        """The note of a check declared after its data were seen (`arm: "*"`: every arm of that metric)."""
        return self.added_after_data.get(key) or self.added_after_data.get(CheckKey(ANY_ARM, key.metric, key.tuned), "")


UNDECLARED = Families(declared=False)


def protocol_path(ablation_name: str) -> Path | None:
    """conf/evidence/<paper>.yaml for an evidence grid (`evidence/<paper>`), else None."""
    if not ablation_name.startswith(PROTOCOL_PREFIX):
        return None
    path = files.group_dir("evidence") / f"{ablation_name[len(PROTOCOL_PREFIX):]}.yaml"
    return path if path.is_file() else None


def families_for(ablation_name: str, provenance: dict | None = None) -> Families:
    """A results folder's families: the `checks` its provenance recorded when its cells ran (a later revision
    of the protocol file does not re-judge data it did not declare), else the protocol file's as it is now."""
    if not ablation_name.startswith(PROTOCOL_PREFIX):
        return UNDECLARED
    where = f"conf/evidence/{ablation_name[len(PROTOCOL_PREFIX):]}.yaml"
    if provenance is not None and RECORDED_CHECKS in provenance:
        return parse_families(provenance[RECORDED_CHECKS], where)
    path = protocol_path(ablation_name)
    if path is None:
        return UNDECLARED
    raw = OmegaConf.to_container(OmegaConf.load(path)) or {}
    return parse_families(raw.get("checks"), where)


def parse_families(node: object, where: str) -> Families:
    """The `checks:` node of a protocol file; a malformed one is one sentence (ConfigError)."""
    if node is None:
        return Families(source=where)
    if not isinstance(node, dict) or not set(node) <= KEYS:
        raise ConfigError(f"{where}: 'checks' is a mapping of {', '.join(sorted(KEYS))}.")
    primary = tuple(_entry(e, where, "primary") for e in node.get("primary") or [])
    late = {_entry(e, where, "added_after_data"): str(e.get("note", "")) for e in node.get("added_after_data") or []}
    margins = node.get("margins") or {}
    if not isinstance(margins, dict) or not all(isinstance(v, (int, float)) and v > 0 for v in margins.values()):
        raise ConfigError(f"{where}: checks.margins maps a metric to a positive margin in its units.")
    components = tuple(_component(e, where) for e in node.get("components") or [])
    controls = tuple(_control(e, where) for e in node.get("controls") or [])
    seeds = node.get("confirmatory_seeds") or []
    if not isinstance(seeds, list) or not all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in seeds):
        raise ConfigError(f"{where}: checks.confirmatory_seeds is a list of seeds (integers >= 0); got {seeds!r}.")
    return Families(primary, {str(k): float(v) for k, v in margins.items()}, late, True, where, components, controls,
                    tuple(seeds))


def _control(entry: object, where: str) -> Control:
    if not isinstance(entry, dict) or set(entry) != CONTROL_KEYS or entry.get("kind") not in CONTROL_KINDS:
        raise ConfigError(f"{where}: every checks.controls entry names an 'arm', its 'reference', the 'metric' and "
                          f"a 'kind' ({' or '.join(CONTROL_KINDS)}); got {entry!r}.")
    return Control(*(str(entry[k]) for k in ("arm", "reference", "metric", "kind")))


def _component(entry: object, where: str) -> Component:
    if not isinstance(entry, dict) or set(entry) != COMPONENT_KEYS:
        raise ConfigError(f"{where}: every checks.components entry names an 'arm', the arm 'without' the part, "
                          f"the 'metric' and the 'part'; got {entry!r}.")
    return Component(*(str(entry[k]) for k in ("arm", "without", "metric", "part")))


def _entry(entry: object, where: str, part: str) -> CheckKey:
    if not isinstance(entry, dict) or not {"arm", "metric"} <= set(entry) <= ENTRY_KEYS:
        raise ConfigError(f"{where}: every checks.{part} entry names an 'arm' and a 'metric' "
                          f"(and may say 'tuned', name a 'reference' or give a 'note'); got {entry!r}.")
    reference = entry.get("reference")
    if reference is not None and (not isinstance(reference, str) or not reference or entry.get("tuned")):
        # a tuned check picks both sides' best rates by itself: a fixed reference cell has no place there
        raise ConfigError(f"{where}: a checks.{part} entry's 'reference' is one cell's name, on an entry that is "
                          f"not 'tuned'; got {entry!r}.")
    return CheckKey(str(entry["arm"]), str(entry["metric"]), bool(entry.get("tuned", False)), reference or "")


def validate_against(families: Families, claim: Claim, arms: list[str]) -> None:
    """Every declared check names one of the claim's metrics and an arm the protocol runs (before any cell)."""
    metrics = {c.metric for c in claim.checks}
    families_run = {a.partition("@")[0] for a in arms}
    for key in (*families.primary, *families.added_after_data):
        if key.metric not in metrics:
            raise ConfigError(f"{families.source}: check {key.text()} names a metric the claim '{claim.preset}' "
                              f"does not check (its checks: {', '.join(sorted(metrics))}).")
        if key.arm not in arms and key.arm != ANY_ARM and not (key.tuned and key.arm in families_run):
            raise ConfigError(f"{families.source}: check {key.text()} names an arm the protocol does not run "
                              f"(it runs {', '.join(arms)}).")
        if key.reference and (key.reference not in arms or key.reference == key.arm):
            raise ConfigError(f"{families.source}: check {key.text()} names a reference that is not another arm "
                              f"the protocol runs (it runs {', '.join(arms)}).")
    for c in families.components:
        missing = [a for a in (c.arm, c.without) if a not in arms]
        if missing or c.metric not in metrics:
            raise ConfigError(f"{families.source}: component '{c.part}' names "
                              + (f"an arm the protocol does not run ({', '.join(missing)})" if missing else
                                 f"a metric the claim '{claim.preset}' does not check ({c.metric})") + ".")
    for c in families.controls:
        missing = [a for a in (c.arm, c.reference) if a not in families_run]
        if missing:
            raise ConfigError(f"{families.source}: {c.kind} control `{c.arm}` names an arm the protocol does not run "
                              f"({', '.join(missing)}).")
    if families.confirmatory_seeds:
        from analysis.seed_ranges import confirmatory_problem

        problem = confirmatory_problem(families.confirmatory_seeds, families.source)
        if problem:
            raise ConfigError(problem)
    unknown = set(families.margins) - metrics
    if unknown:
        raise ConfigError(f"{families.source}: checks.margins names {', '.join(sorted(unknown))}, which the claim "
                          f"'{claim.preset}' does not check.")


def checks_sha256(families: Families, claim: Claim, protocol: dict | None = None) -> str:
    """One hash of what was declared: the families and the claim's checks and expectations, and the
    protocol's seeds and learning-rate grids when given (sweeps/evidence/declared.py declared_checks)."""
    payload = {
        "primary": [k.declared() for k in families.primary],
        "margins": families.margins,
        **({"confirmatory_seeds": list(families.confirmatory_seeds)} if families.confirmatory_seeds else {}),
        "checks": [asdict(c) for c in claim.checks],
        "expect": claim.expect, "default_expect": claim.default_expect, "references": claim.references,
        **({"protocol": protocol} if protocol is not None else {}),
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()


def declared_keys(families: Families) -> list[str]:
    """The primary checks as text, for the provenance record (what the cells ran under)."""
    return [k.text() for k in families.primary]
