"""Learning rates chosen on tuning seeds: a protocol's declared grid, its tuning cells' names, and the choice.

    tuning = LrTuning(arms=("baseline", "snr"), grid=(1.5e-3, 3e-3, 6e-3), tuning_seeds=(100, 101))
    tuning.cell_arm("snr", 3e-3)          # 'snr@lr3e-3': a tuning cell is an LR variant of its arm
    cells = tuning_cells(tuning, runs)     # one row per (arm, rate, tuning seed): finished / diverged / ..., value
    table = tuning_table(tuning, runs)     # one row per (arm, rate): the mean final metric over the tuning seeds
    chosen_rates(table)                    # {'baseline': 0.006, 'snr': 0.003}

A protocol (`lr_tuning:` in conf/evidence/<paper>.yaml) runs every tuned arm at every grid rate on the tuning
seeds only; each arm's rate is the one with the best mean final metric over them (lower for a loss), and its
test cells run on the test seeds at that rate: a rate picked on the seeds it is then tested on is biased
upward (statistics.md). The driver (sweeps/lr_tuning.py) makes this choice from the store before the test
cells run; the report makes the same table from the exported runs (`runs` is a runs frame of either:
arm, seed, status, start_time, metrics.<metric>, tags.end_reason).

Two declared rules may grow a grid while it runs, the same way for every arm of it (so each arm of a pair gets
the same number of tuning cells):
- `tiebreak_seeds`: when two declared tuning seeds pick different rates for any arm, every arm runs every rate on
  these seeds too and the choice is made over all of them;
- `extend` (k): when an arm's choice is the grid's lowest or highest rate, one more rate is run beyond that edge,
  a step as wide as the grid's outermost one, up to k times per side; a rate that diverges there bounds the grid.
The rates and seeds a grid grew to are read back from the runs (they are named like every tuning cell), so the
report makes the same table from the exported runs alone.

A rate counts only when every tuning seed finished with a finite value. A seed that diverged (stopped by the
divergence guard, or finished at a non-finite value) rules its rate out: at that rate the arm does not
train. A seed missing or failed for another reason leaves the arm undecided: no rate is chosen from a
partial grid, since the missing cell might have been the best.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from analysis.ablation import better_direction
from analysis.claims import LR_VARIANT_PREFIX, VARIANT_SEP
from lit_modules.config.resolvers import rate_text  # the LR variants' spelling, shared with the run configs

__all__ = ["COLUMNS", "DIVERGED_REASON", "LrTuning", "chosen_rates", "declared_tunings", "rate_text", "tuning_cells",
           "tuning_table"]

DIVERGED_REASON = "DivergenceError"  # how the divergence guard's FAILED runs begin their end reason
COLUMNS = ("arm", "rate", "cell_arm", "metric", "tuning_seeds", "n", "final_loss", "per_seed", "chosen", "note")


@dataclass(frozen=True)
class LrTuning:
    """One declared grid: `arms` (as the protocol's blocks name them), each run at every `grid` rate of the
    config field `key` (optim.lr; optim.muon_lr for Muon's matrices) on `tuning_seeds`, chosen by the mean
    final `metric`."""

    arms: tuple[str, ...]
    grid: tuple[float, ...]
    tuning_seeds: tuple[int, ...]
    metric: str = "val/loss"
    key: str = "optim.lr"
    tiebreak_seeds: tuple[int, ...] = ()
    extend: int = 0

    def extension_rates(self) -> tuple[tuple[float, ...], tuple[float, ...]]:
        """(below, above) the declared grid, nearest first: `extend` steps of the outermost step's width on each
        side, at three significant digits (so a cell's name is a short rate)."""
        rates = sorted(self.grid)
        if self.extend <= 0 or len(rates) < 2:
            return (), ()
        low, high = rates[0] / rates[1], rates[-1] / rates[-2]
        return (tuple(float(f"{rates[0] * low ** k:.3g}") for k in range(1, self.extend + 1)),
                tuple(float(f"{rates[-1] * high ** k:.3g}") for k in range(1, self.extend + 1)))

    def lattice(self) -> tuple[float, ...]:
        """Every rate this grid may run: the declared ones and their extensions, ascending."""
        below, above = self.extension_rates()
        return tuple(sorted({*self.grid, *below, *above}))

    def cell_arm(self, arm: str, rate: float) -> str:
        return f"{arm}{VARIANT_SEP}{LR_VARIANT_PREFIX}{rate_text(rate)}"

    def cell_arm_interpolation(self, arm: str) -> str:
        """`cell_arm` as a run config's interpolation of its own rate (the rate_text resolver spells it alike)."""
        return f"{arm}{VARIANT_SEP}{LR_VARIANT_PREFIX}${{rate_text:${{{self.key}}}}}"

    def record(self) -> dict:
        """The declaration as provenance.json keeps it (and hashes it); the growth rules only when declared."""
        return {"arms": list(self.arms), "grid": list(self.grid), "tuning_seeds": list(self.tuning_seeds),
                "metric": self.metric, "key": self.key,
                **({"tiebreak_seeds": list(self.tiebreak_seeds)} if self.tiebreak_seeds else {}),
                **({"extend": self.extend} if self.extend else {})}

    @classmethod
    def from_record(cls, record: dict) -> LrTuning:
        return cls(tuple(record["arms"]), tuple(float(r) for r in record["grid"]),
                   tuple(int(s) for s in record["tuning_seeds"]), str(record.get("metric", "val/loss")),
                   str(record.get("key", "optim.lr")), tuple(int(s) for s in record.get("tiebreak_seeds") or ()),
                   int(record.get("extend", 0)))


def declared_tunings(provenance: dict | None) -> list[LrTuning]:
    """The pre-training grids, then the fine-tune's grid, as a results folder's provenance declares them."""
    record = provenance or {}
    finetune = [LrTuning.from_record(record["finetune_lr_tuning"])] if record.get("finetune_lr_tuning") else []
    return [LrTuning.from_record(r) for r in record.get("lr_tuning") or []] + finetune


def grown_to(tuning: LrTuning, runs: pd.DataFrame) -> tuple[tuple[float, ...], tuple[int, ...]]:
    """(rates, seeds) the grid ran: the declared ones, and each extension rate or tie-break seed some cell of an
    arm of the grid ran at (on its arms' names, in `runs`)."""
    rates, seeds = set(tuning.grid), set(tuning.tuning_seeds)
    if (tuning.extend or tuning.tiebreak_seeds) and "arm" in runs and len(runs):
        names = set(runs["arm"].astype(str))
        lattice = tuning.lattice()
        rates |= {r for r in lattice for a in tuning.arms if tuning.cell_arm(a, r) in names}
        cells = {tuning.cell_arm(a, r) for a in tuning.arms for r in lattice}
        of_grid = runs[runs["arm"].astype(str).isin(cells)]
        ran_seeds = set(of_grid["seed"].astype(str))
        seeds |= {s for s in tuning.tiebreak_seeds if str(s) in ran_seeds}
    return tuple(sorted(rates)), tuple(sorted(seeds))


def _cell_state(runs: pd.DataFrame, arm: str, seed: int, metric: str) -> tuple[str, float]:
    """('finished', value), ('diverged', nan) or (what else happened, nan) of one tuning cell: its newest
    FINISHED run, else its newest run."""
    rows = runs[(runs["arm"] == arm) & (runs["seed"].astype(str) == str(seed))] if "arm" in runs else runs
    if rows.empty:
        return "not run", math.nan
    rows = rows.sort_values("start_time", kind="stable")
    done = rows[rows["status"] == "FINISHED"]
    row = (done if len(done) else rows).iloc[-1]
    value = float(row.get(f"metrics.{metric}", math.nan))
    if row["status"] == "FINISHED":
        return ("finished", value) if math.isfinite(value) else ("diverged", math.nan)
    reason = str(row.get("tags.end_reason", "") or "")
    return ("diverged", math.nan) if reason.startswith(DIVERGED_REASON) else (str(row["status"]), math.nan)


def tuning_cells(tuning: LrTuning, runs: pd.DataFrame, more_rates: tuple[float, ...] = (),
                 more_seeds: tuple[int, ...] = ()) -> pd.DataFrame:
    """Long format, one row per (arm, rate, tuning seed) of the grid as it grew (and the rates and seeds the
    driver adds now): arm, rate, seed, state, value."""
    grown_rates, grown_seeds = grown_to(tuning, runs)
    rows = []
    for arm in tuning.arms:
        for rate in sorted({*grown_rates, *more_rates}):
            for seed in sorted({*grown_seeds, *more_seeds}):
                state, value = _cell_state(runs, tuning.cell_arm(arm, rate), seed, tuning.metric)
                rows.append({"arm": arm, "rate": rate, "seed": seed, "state": state, "value": value})
    return pd.DataFrame(rows, columns=["arm", "rate", "seed", "state", "value"])


def tuning_table(tuning: LrTuning, runs: pd.DataFrame) -> pd.DataFrame:
    """One row per (arm, rate), arms in declared order and rates ascending, with the choice marked."""
    return _table_of(tuning, tuning_cells(tuning, runs))


def _table_of(tuning: LrTuning, cells: pd.DataFrame) -> pd.DataFrame:
    better = better_direction(tuning.metric)
    seeds_text = ",".join(str(s) for s in sorted(set(cells["seed"])))
    rows = []
    for arm in tuning.arms:
        arm_rows, decided = [], True
        for rate in sorted(set(cells["rate"])):
            at = cells[(cells["arm"] == arm) & (cells["rate"] == rate)]
            finished = at[at["state"] == "finished"]
            decided &= bool(at["state"].isin(["finished", "diverged"]).all())
            arm_rows.append({
                "arm": arm, "rate": rate, "cell_arm": tuning.cell_arm(arm, rate), "metric": tuning.metric,
                "tuning_seeds": seeds_text, "n": len(finished),
                "final_loss": float(finished["value"].mean()) if len(finished) == len(at) else math.nan,
                "per_seed": ", ".join(f"{s}: {v:.4f}" for s, v in zip(finished["seed"], finished["value"])),
                "chosen": False,
                "note": "; ".join(f"seed {s} {st}" for s, st in zip(at["seed"], at["state"]) if st != "finished"),
            })
        rows += _choose(arm_rows, decided, better)
    return pd.DataFrame(rows, columns=list(COLUMNS))


def _choose(arm_rows: list[dict], decided: bool, better: str) -> list[dict]:
    """Mark the best eligible rate of one arm, when every cell of its grid is decided (finished or diverged)."""
    if not decided:
        for r in arm_rows:
            _add_note(r, "no rate chosen: the grid is not complete")
        return arm_rows
    eligible = [r for r in arm_rows if math.isfinite(r["final_loss"])]
    if not eligible:
        for r in arm_rows:
            _add_note(r, "no rate chosen: every rate diverged")
        return arm_rows
    pick = (min if better == "lower" else max)(eligible, key=lambda r: r["final_loss"])  # first of ties
    pick["chosen"] = True
    if len(arm_rows) > 1 and (pick is arm_rows[0] or pick is arm_rows[-1]):
        edge = "lowest" if pick is arm_rows[0] else "highest"
        _add_note(pick, f"the grid's {edge} rate: the best may lie beyond it")
    return arm_rows


def _add_note(row: dict, text: str) -> None:
    row["note"] = f"{row['note']}; {text}" if row["note"] else text


def seed_choices(tuning: LrTuning, cells: pd.DataFrame) -> dict[str, dict[int, float]]:
    """Arm -> {declared tuning seed: the rate it alone would pick, by the table's rule}, for arms whose every cell
    is decided."""
    out: dict[str, dict[int, float]] = {}
    for arm in tuning.arms:
        of_arm = cells[cells["arm"] == arm]
        if of_arm.empty or not of_arm["state"].isin(["finished", "diverged"]).all():
            continue
        picks = {seed: chosen_rates(_table_of(tuning, of_arm[of_arm["seed"] == seed])).get(arm)
                 for seed in tuning.tuning_seeds}
        out[arm] = {seed: rate for seed, rate in picks.items() if rate is not None}
    return out


def growth(tuning: LrTuning, runs: pd.DataFrame, rates: tuple[float, ...] = (),
           seeds: tuple[int, ...] = ()) -> tuple[tuple[float, ...], tuple[int, ...]]:
    """What the grid adds next under its declared rules, given the cells in `runs` and the rates and seeds already
    added (`rates`, `seeds`): ((), ()) when it is complete, undecided, or has nothing left to add. Tie-break seeds
    first (when declared seeds disagree for any arm), then one extension rate past each edge an arm chose."""
    cells = tuning_cells(tuning, runs, rates, seeds)
    if cells.empty or not cells["state"].isin(["finished", "diverged"]).all():
        return (), ()
    ran_seeds = set(cells["seed"])
    if tuning.tiebreak_seeds and not set(tuning.tiebreak_seeds) <= ran_seeds:
        if any(len(set(p.values())) > 1 for p in seed_choices(tuning, cells).values()):
            return (), tuple(s for s in tuning.tiebreak_seeds if s not in ran_seeds)
    below, above = tuning.extension_rates()
    ran = sorted(set(cells["rate"]))
    add = []
    picked = chosen_rates(_table_of(tuning, cells))
    for side, edge, beyond in (("low", ran[0], below), ("high", ran[-1], above)):
        if any(math.isclose(r, edge) for r in picked.values()):
            nxt = [r for r in beyond if r not in ran]
            if nxt and (side == "low" and nxt[0] < edge or side == "high" and nxt[0] > edge):
                add.append(nxt[0])
    return tuple(add), ()


def chosen_rates(table: pd.DataFrame) -> dict[str, float]:
    """Arm -> its chosen rate (arms with no choice are left out)."""
    if table.empty:
        return {}
    picked = table[table["chosen"].astype(bool)]
    return {str(a): float(r) for a, r in zip(picked["arm"], picked["rate"])}
