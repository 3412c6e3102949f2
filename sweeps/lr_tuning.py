"""The evidence protocol's learning-rate tuning: its declared grids, their tuning cells, each arm's rate.

    lr_tuning:                      # in conf/evidence/<paper>.yaml: a mapping, or a list of them (one per pair or rung)
      arms: [baseline, snr]         # arms the protocol's blocks run, variants included (baseline@x4)
      grid: [1.5e-3, 3e-3, 6e-3]    # optim.lr values, two or more
      tuning_seeds: [100, 101]      # none of them a seed a block runs these arms on
      metric: val/loss              # the final run metric the rate is chosen by (the default)
      key: optim.lr                 # the rate tuned (the default; optim.muon_lr: Muon's matrix rate)
      tiebreak_seeds: [102]         # run on every arm when two tuning seeds pick different rates (optional)
      extend: 2                     # a choice at an edge runs one more rate past it, up to 2 per side (optional)

Before the test cells of a stage, every tuned arm of that stage runs at every rate on the tuning seeds as the
cell `<arm>@lr<rate>` (an LR variant of the arm: the arm's overrides, `<key>=<rate>` and that name;
sweeps/evidence/plan.py lr_tuning_cells), and every tuned arm's cells of a stage run in ONE launch
(sweeps.ablate.run_together), so the launch's fixed cost is paid once per stage rather than once per arm or rate.
A tuning cell that finished, or that diverged (the same seed diverges again), is not run again, so an
interrupted protocol resumes here as everywhere. Each arm's rate is then read from the store by
analysis/lr_tuning.py's rule and its test cells run at it (`<key>=<rate>`, for that arm's cells only); an
arm whose grid is not complete runs no test cell and the protocol ends failed, saying which cells are missing.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from analysis.lr_tuning import LrTuning, chosen_rates, growth, rate_text, tuning_cells, tuning_table
from lit_modules.config.errors import ConfigError
from lit_modules.runs import tags

if TYPE_CHECKING:
    from sweeps.evidence.spec import Block

RATE_KEYS = ("optim.lr", "optim.muon_lr")  # the config fields a grid may tune
KEYS = ("arms", "grid", "tuning_seeds", "metric", "key", "tiebreak_seeds", "extend")
Launch = tuple[LrTuning, str, tuple[float, ...], tuple[int, ...]]  # (grid, arm, rates, seeds)
RunCells = Callable[[list[Launch]], int]  # runs these as one launch -> exit code


def parse_lr_tuning(node: object, where: str, blocks: tuple[Block, ...]) -> tuple[LrTuning, ...]:
    """The `lr_tuning:` node of a protocol, checked against its blocks; a bad one is one sentence (ConfigError)."""
    if node is None:
        return ()
    entries = [node] if isinstance(node, dict) else node
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise ConfigError(f"{where}: lr_tuning is a mapping of {', '.join(KEYS)} (or a list of them, one per pair).")
    block_arms = list(dict.fromkeys(a for b in blocks for a in b.arms))
    tunings, tuned_by = [], {}
    for i, entry in enumerate(entries, 1):
        name = f"{where} lr_tuning" + (f" {i}" if len(entries) > 1 else "")
        tuning = _entry(entry, name)
        for arm in tuning.arms:
            if arm not in block_arms:
                raise ConfigError(f"{name} tunes `{arm}`, which no block of the protocol runs "
                                  f"(its blocks run {', '.join(block_arms)}).")
            if arm in tuned_by:
                raise ConfigError(f"{name} tunes `{arm}`, which {tuned_by[arm]} tunes already: one grid per arm.")
            tuned_by[arm] = name
            shared = sorted({s for b in blocks if arm in b.arms for s in b.seeds}
                            & {*tuning.tuning_seeds, *tuning.tiebreak_seeds})
            if shared:
                raise ConfigError(f"{name}: tuning seed(s) {', '.join(map(str, shared))} are also test seeds of "
                                  f"`{arm}`; a rate chosen on the seeds it is tested on is biased upward, so tune on "
                                  "seeds no block runs it on.")
            clash = [tuning.cell_arm(arm, r) for r in tuning.lattice() if tuning.cell_arm(arm, r) in block_arms]
            if clash:
                raise ConfigError(f"{name} would run its tuning cells as `{clash[0]}`, an arm a block runs on test "
                                  "seeds too; drop that block's LR variant or the grid point.")
        stages = sorted({b.stage for b in blocks if set(b.arms) & set(tuning.arms)})
        if len(stages) > 1:
            raise ConfigError(f"{name} tunes arms of the stages {' and '.join(stages)}; one grid tunes arms of one "
                              "stage (declare one grid per rung).")
        tunings.append(tuning)
    return tuple(tunings)


def _entry(entry: dict, name: str) -> LrTuning:
    if not {"arms", "grid", "tuning_seeds"} <= set(entry) <= set(KEYS):
        raise ConfigError(f"{name} needs 'arms', 'grid' and 'tuning_seeds' (and may name a 'metric', a 'key', "
                          "'tiebreak_seeds' and 'extend'); "
                          f"it has {', '.join(map(str, entry)) or 'nothing'}.")
    arms, grid, seeds = entry["arms"], entry["grid"], entry["tuning_seeds"]
    if not all(isinstance(x, list) and x for x in (arms, grid, seeds)):
        raise ConfigError(f"{name}: arms, grid and tuning_seeds are non-empty lists.")
    try:
        rates, seeds = tuple(float(r) for r in grid), tuple(int(s) for s in seeds)
    except (TypeError, ValueError):
        raise ConfigError(f"{name}: grid holds learning rates and tuning_seeds integers (got {grid} and {seeds}).") from None
    if len(rates) < 2 or min(rates) <= 0 or len({rate_text(r) for r in rates}) != len(rates):
        raise ConfigError(f"{name}: grid needs two or more distinct positive learning rates (got {grid}).")
    if len(set(seeds)) != len(seeds) or len(set(arms)) != len(arms):
        raise ConfigError(f"{name}: an arm or a tuning seed is listed twice.")
    metric = str(entry.get("metric", "val/loss"))
    if "*" in metric or ":" in metric or metric == "speedup":
        raise ConfigError(f"{name}: metric is a final metric of the tuning runs, such as val/loss (got {metric}).")
    key = str(entry.get("key", RATE_KEYS[0]))
    if key not in RATE_KEYS:
        raise ConfigError(f"{name}: key is the rate tuned, one of {', '.join(RATE_KEYS)} (got {key}).")
    tiebreak, extend = entry.get("tiebreak_seeds") or [], entry.get("extend", 0)
    if (not isinstance(tiebreak, list) or not all(isinstance(t, int) and not isinstance(t, bool) for t in tiebreak)
            or len(set(tiebreak)) != len(tiebreak) or set(tiebreak) & set(seeds)):
        raise ConfigError(f"{name}: tiebreak_seeds is a list of distinct integer seeds, none of them a tuning seed "
                          f"(got {tiebreak}).")
    if isinstance(extend, bool) or not isinstance(extend, int) or not 0 <= extend <= 4:
        raise ConfigError(f"{name}: extend is how many rates a grid may add past an edge its arms chose, 0 to 4 "
                          f"(got {extend}).")
    return LrTuning(tuple(str(a) for a in arms), rates, seeds, metric, key, tuple(tiebreak), extend)


def refuse_rate_override(overrides: list[str], tunings: tuple[LrTuning, ...], where: str) -> None:
    """A command-line rate of a tuned key would set every cell's rate over the tuned ones."""
    keys = {t.key for t in tunings}
    for word in overrides:
        if word.lstrip("+~").split("=", 1)[0] in keys:
            raise ConfigError(f"{word} on the command line would set every cell's rate, but {where} tunes each "
                              "arm's own (lr_tuning); drop it.")


def launches(todo: pd.DataFrame) -> list[tuple[str, tuple[float, ...], tuple[int, ...]]]:
    """The tuning cells still to run (arm, rate, seed rows) as grids (arm, rates, seeds): one per arm when
    its cells are every rate x seed of it, else one per rate (a resumed grid reruns no finished cell)."""
    calls = []
    for arm, rows in todo.groupby("arm", sort=False):
        rates, seeds = tuple(dict.fromkeys(rows["rate"])), tuple(dict.fromkeys(int(s) for s in rows["seed"]))
        if len(rows) == len(rates) * len(seeds):
            calls.append((arm, rates, seeds))
        else:
            calls += [(arm, (rate,), tuple(int(s) for s in group["seed"]))
                      for rate, group in rows.groupby("rate", sort=False)]
    return calls


def store_runs(runs_dir: str, preset: str) -> pd.DataFrame:
    """The grid's cells as analysis/lr_tuning.py reads them (arm, seed, status, start_time, metrics.*,
    tags.end_reason); an empty frame for a store or grid that does not exist yet (none is created)."""
    from mlflow.tracking import MlflowClient

    from lit_modules.runs.search import ABLATION, children_filter, find_parent
    from lit_modules.tracking.store import resolve_tracking_uri

    uri = resolve_tracking_uri(None, runs_dir)
    if uri.startswith("sqlite:///") and not Path(uri.removeprefix("sqlite:///")).exists():
        return pd.DataFrame()
    client = MlflowClient(uri)
    parent = find_parent(client, preset, kinds=(ABLATION,))
    if parent is None:
        return pd.DataFrame()
    runs = client.search_runs([parent.info.experiment_id], filter_string=children_filter(parent.info.run_id),
                              max_results=10_000)
    return pd.DataFrame([{
        "arm": r.data.tags.get(tags.ABLATION_ARM), "seed": r.data.tags.get(tags.SEED), "status": r.info.status,
        "start_time": r.info.start_time, "tags.end_reason": r.data.tags.get(tags.END_REASON, ""),
        **{f"metrics.{k}": v for k, v in r.data.metrics.items()},
    } for r in runs if tags.FINETUNE_BASE not in r.data.tags])


def tune(paper: str, tunings: list[LrTuning], runs_dir: str, preset: str,
         run_cells: RunCells) -> tuple[int, dict[str, float], list[str]]:
    """Run the tuning cells not yet done (every grid's in one launch), grow the grids by their declared rules
    (tie-break seeds, edge extensions: analysis.lr_tuning.growth) and run again until none grows, then choose:
    (a stop code or 0, arm -> rate, arms with no rate)."""
    added: dict[int, tuple[set[float], set[int]]] = {i: (set(), set()) for i in range(len(tunings))}
    launched: set[tuple[str, float, int]] = set()  # a cell that failed once in this call is not tried again
    runs = store_runs(runs_dir, preset)
    for _ in range(1 + sum(len(t.tiebreak_seeds) + 2 * t.extend for t in tunings)):  # each pass adds something
        todo_launches: list[Launch] = []
        for i, tuning in enumerate(tunings):
            rates, seeds = (tuple(sorted(x)) for x in added[i])
            cells = tuning_cells(tuning, runs, rates, seeds)
            todo = cells[~cells["state"].isin(["finished", "diverged"])]
            fresh = [(a, r, s) not in launched for a, r, s in zip(todo["arm"], todo["rate"], todo["seed"])]
            todo = todo[pd.Series(fresh, index=todo.index, dtype=bool)]
            launched.update(zip(todo["arm"], todo["rate"], todo["seed"]))
            print(f"[{paper}] lr tuning {', '.join(tuning.arms)} over {', '.join(map(rate_text, sorted(set(cells['rate']))))} "
                  f"on seeds {', '.join(map(str, sorted(set(cells['seed']))))}: {len(todo)} of {len(cells)} tuning cells "
                  "to run", flush=True)
            todo_launches += [(tuning, arm, r, s) for arm, r, s in launches(todo)]
        if todo_launches:
            code = run_cells(todo_launches)
            if code == 2 or code > 128:  # refused, or stopped by a signal; a failed cell is judged below
                return code, {}, []
            runs = store_runs(runs_dir, preset)
        grew = False
        for i, tuning in enumerate(tunings):
            more_rates, more_seeds = growth(tuning, runs, *(tuple(sorted(x)) for x in added[i]))
            if more_rates or more_seeds:
                grew = True
                added[i][0].update(more_rates)
                added[i][1].update(more_seeds)
                why = (f"tuning seeds chose different rates: tie-break seed(s) {', '.join(map(str, more_seeds))}"
                       if more_seeds else f"a choice at the grid's edge: {', '.join(map(rate_text, more_rates))} added")
                print(f"[{paper}] lr tuning {', '.join(tuning.arms)}: {why}, for every arm of the grid", flush=True)
        if not grew:
            break
    chosen, undecided = {}, []
    for tuning in tunings:
        picked, none = announce_choices(f"[{paper}] lr tuning", tuning, tuning_table(tuning, runs),
                                        "runs its test cells at", "its test cells do not run")
        chosen.update(picked)
        undecided += none
    return 0, chosen, undecided


def announce_choices(prefix: str, tuning: LrTuning, table: pd.DataFrame, runs_at: str,
                     without: str) -> tuple[dict[str, float], list[str]]:
    """(arm -> its chosen rate, arms with none) of one grid's table, each arm's line printed (the ones without
    a rate on stderr, with the reason)."""
    picked, undecided = chosen_rates(table), []
    for arm in tuning.arms:
        rows = table[table["arm"] == arm]
        if arm in picked:
            best = rows[rows["chosen"].astype(bool)].iloc[0]
            print(f"{prefix}: `{arm}` {runs_at} {rate_text(picked[arm])} "
                  f"({tuning.metric} {best['final_loss']:.4f} over seeds {best['tuning_seeds']})", flush=True)
        else:
            undecided.append(arm)
            notes = "; ".join(f"{rate_text(r)}: {n}" for r, n in zip(rows["rate"], rows["note"]) if n)
            print(f"{prefix}: `{arm}` gets no rate ({notes}): {without}", file=sys.stderr, flush=True)
    return picked, undecided
