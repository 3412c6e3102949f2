"""Weight decay vs plasticity in one command: pre-train a lambda x regime x seed grid, fine-tune every base
with one fixed recipe, and tabulate base loss against plasticity.

    python -m sweeps.plasticity [experiment=wd_plasticity] [runs_dir=runs] [reports_dir=reports]
                                [finetune=python_docs] [finetune.<field>=value ...] [probes=true|false]
                                [pretrain=true|false] [launcher=local_parallel] [pre-training overrides ...]

(a) the pre-training grid runs through `sweeps.ablate.main` (one MLflow parent; cells already FINISHED are
    skipped on a rerun); `pretrain=false` goes straight to (b) on the newest parent of the preset;
(b) every FINISHED child of that parent without a FINISHED fine-tune under this recipe is fine-tuned
    (`lit_modules.finetune`), and, when the evaluation package's linear probes are importable, probed
    (per-layer accuracy on the base corpus's held-out documents, logged on the base run as `eval/probe/...`);
(c) per (regime, lambda): mean +/- sd over seeds of the base val/loss, the target loss before and after
    fine-tuning, plasticity, the train-validation gap and the attention pseudo-rank, written as Markdown and
    CSV to `<reports_dir>/<experiment>/plasticity/` (also logged on the parent run), with a per-regime
    statement of whether the lambda with the best base loss differs from the lambda with the most plasticity.

Any other key=value goes to the pre-training grid (e.g. `seed=0`, `trainer.max_steps=20` for a smoke run).
The train-validation gap of a base run is its final val/loss minus the mean of its last TRAIN_TAIL logged
train/loss values (one micro-batch each; diagnostics only see held-out data, so it is computed here).
"""

from __future__ import annotations

import math
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from mlflow.entities import Metric, Run
from mlflow.tracking import MlflowClient

from lit_modules.config.errors import ConfigError
from lit_modules.data import DataError
from lit_modules.finetune import (
    AFTER,
    BASE_TAG,
    BEFORE,
    DEFAULT_RECIPE,
    PLASTICITY,
    RECIPE_HASH_TAG,
    FinetuneRecipe,
    finetune,
    load_recipe,
    recipe_hash,
)
from lit_modules.tracking.store import tracking_uri
from lit_modules.tracking.uri_masking import mask_password

PARENT_TAG = "mlflow.parentRunId"
TRAIN_TAIL = 5  # logged train/loss values averaged for the train-validation gap
PSEUDO_RANK = "diag/attention_rank/{kind}/pseudo_rank_tau0.01"
PROBE_BEST = "eval/probe/best_acc"
PROBE_LAYER = re.compile(r"eval/probe/layer_(\d+)/acc")
# (column, header): the per-run quantities the table shows (summary.csv also has per-layer probe accuracy).
QUANTITIES = [
    ("base_val_loss", "base val/loss"),
    ("target_before", "target loss before"),
    ("target_after", "target loss after"),
    ("plasticity", "plasticity (before - after)"),
    ("train_val_gap", "train-val gap"),
    ("qk_pseudo_rank", "QK pseudo-rank (tau 0.01)"),
    ("ov_pseudo_rank", "OV pseudo-rank (tau 0.01)"),
    ("probe_best_acc", "probe acc (best layer)"),
]


@dataclass
class PipelineArgs:
    experiment: str = "wd_plasticity"
    runs_dir: str = "runs"
    reports_dir: str | None = None
    recipe: str = DEFAULT_RECIPE
    recipe_overrides: dict[str, str] = field(default_factory=dict)
    probes: bool = True
    pretrain: bool = True
    grid_argv: list[str] = field(default_factory=list)  # passed to sweeps.ablate.main besides experiment=


def _flag(key: str, value: str) -> bool:
    if value.lower() in ("true", "1", "yes"):
        return True
    if value.lower() in ("false", "0", "no"):
        return False
    raise ConfigError(f"{key} must be true or false, not '{value}'.")


def parse_args(argv: list[str]) -> PipelineArgs:
    args = PipelineArgs()
    for word in argv:
        key, sep, value = word.partition("=")
        if not sep:
            raise ConfigError(f"Arguments are key=value words; {word!r} is not one.")
        if key == "experiment":
            args.experiment = value
        elif key == "reports_dir":
            args.reports_dir = value
        elif key == "finetune":
            args.recipe = value
        elif key.startswith("finetune."):
            args.recipe_overrides[key.split(".", 1)[1]] = value
        elif key in ("probes", "pretrain"):
            setattr(args, key, _flag(key, value))
        else:
            if key == "runs_dir":
                args.runs_dir = value
            args.grid_argv.append(word)
    return args


# --- runs in the store ------------------------------------------------------------------------------


def find_parent(client: MlflowClient, experiment: str) -> Run | None:
    ids = [e.experiment_id for e in client.search_experiments()]
    if not ids:
        return None
    found = client.search_runs(
        ids, filter_string=f"tags.`ablation.name` = '{experiment}' and tags.`ablation.role` = 'parent'",
        order_by=["attributes.start_time DESC"], max_results=1,
    )
    return found[0] if found else None


def base_runs(client: MlflowClient, parent: Run) -> list[Run]:
    """FINISHED children of the grid parent, one per (arm, seed) (the newest), oldest first."""
    children = client.search_runs(
        [parent.info.experiment_id],
        filter_string=f"tags.`{PARENT_TAG}` = '{parent.info.run_id}' and attributes.status = 'FINISHED'",
        order_by=["attributes.start_time ASC"],
    )
    newest: dict[tuple[str, str], Run] = {}
    for run in children:
        if BASE_TAG in run.data.tags:
            continue
        newest[(run.data.tags.get("ablation.arm", run.info.run_id), run.data.tags.get("seed", ""))] = run
    return sorted(newest.values(), key=lambda r: r.info.start_time)


def finished_finetune(client: MlflowClient, base: Run, recipe: FinetuneRecipe) -> Run | None:
    """The newest FINISHED fine-tune of `base` under exactly these recipe settings (name and values)."""
    found = client.search_runs(
        [base.info.experiment_id],
        filter_string=f"tags.`{BASE_TAG}` = '{base.info.run_id}' "
        f"and tags.`{RECIPE_HASH_TAG}` = '{recipe_hash(recipe)}' and attributes.status = 'FINISHED'",
        order_by=["attributes.start_time DESC"], max_results=1,
    )
    return found[0] if found else None


# --- (b) fine-tunes and probes ----------------------------------------------------------------------


def finetune_all(client: MlflowClient, bases: list[Run], recipe: FinetuneRecipe, runs_dir: str) -> int:
    """Fine-tune every base lacking a FINISHED fine-tune under this recipe; returns how many failed."""
    failed = 0
    todo = [b for b in bases if finished_finetune(client, b, recipe) is None]
    print(f"fine-tuning {len(todo)} of {len(bases)} base runs with recipe '{recipe.name}'")
    for base in todo:
        label = f"{base.data.tags.get('ablation.arm', '?')} seed {base.data.tags.get('seed', '?')}"
        try:
            result = finetune(base.info.run_id, recipe, runs_dir, client=client)
            print(f"  {label}: {result.line()}")
            failed += result.status not in ("FINISHED", "SKIPPED")
        except Exception as err:  # noqa: BLE001 - one failing base must not stop the others
            reason = str(err).splitlines()[0] if str(err) else ""
            print(f"  {label}: fine-tune failed: {type(err).__name__}: {reason}", file=sys.stderr)
            failed += 1
    return failed


def probe_all(client: MlflowClient, bases: list[Run]) -> str:
    """Linear probes of every base not yet probed, via lit_modules.evaluation; returns a one-line status.

    Labels: which held-out document (play) a passage comes from; features: each layer's mean-pooled
    residual stream; metrics `eval/probe/layer_<i>/acc`, `.../best_acc`, `.../majority_acc` on the base run.
    """
    try:
        from lit_modules.evaluation.errors import EvalError
        from lit_modules.evaluation.probes import run_probes
        from lit_modules.evaluation.run_eval import load_run
    except ImportError as err:
        return f"linear probes skipped: the evaluation package is not available ({err})"
    from lit_modules.data.documents import iter_documents

    done = already = 0
    for base in bases:
        if PROBE_BEST in client.get_run(base.info.run_id).data.metrics:
            already += 1
            continue
        try:
            loaded = load_run(client, base.info.run_id)
            documents = list(iter_documents(loaded.corpus.heldout_path))
            seq_len = min(128, int(loaded.config.data.seq_len))  # never beyond the trained length
            result = run_probes(loaded.model, loaded.tokenizer, documents, seq_len=seq_len, device="cpu")
        except (EvalError, ConfigError, DataError) as err:
            return f"linear probes skipped: {err}"
        now = int(time.time() * 1000)
        metrics = [Metric(k, float(v), now, loaded.step) for k, v in result.metrics().items()]
        client.log_batch(base.info.run_id, metrics=metrics)
        done += 1
    return (f"linear probes (held-out document labels, per layer, `eval/probe/*` on the base runs): "
            f"{done} base runs probed now, {already} already had them")


# --- (c) the table ----------------------------------------------------------------------------------


def _metric(run: Run | None, key: str) -> float:
    value = run.data.metrics.get(key) if run is not None else None
    return float(value) if value is not None else float("nan")


def train_val_gap(client: MlflowClient, run: Run) -> float:
    history = sorted(client.get_metric_history(run.info.run_id, "train/loss"), key=lambda m: m.step)
    if not history:
        return float("nan")
    return _metric(run, "val/loss") - float(np.mean([m.value for m in history[-TRAIN_TAIL:]]))


def collect_rows(client: MlflowClient, bases: list[Run], recipe: FinetuneRecipe) -> pd.DataFrame:
    """One row per base run: its identity, its and its fine-tune's numbers, per-layer probe accuracies."""
    rows = []
    for base in bases:
        base = client.get_run(base.info.run_id)  # fresh: probes may have been logged since
        ft = finished_finetune(client, base, recipe)
        params = base.data.params
        row = {
            "run_id": base.info.run_id,
            "finetune_run_id": ft.info.run_id if ft else "",
            "arm": base.data.tags.get("ablation.arm", ""),
            "regime": params.get("regime.name", ""),
            "weight_decay": float(params.get("optim.weight_decay", "nan")),
            "seed": base.data.tags.get("seed", ""),
            "tokens": float(params.get("budget.total_tokens", "nan")),
            "base_val_loss": _metric(base, "val/loss"),
            "target_before": _metric(ft, BEFORE),
            "target_after": _metric(ft, AFTER),
            "plasticity": _metric(ft, PLASTICITY),
            "train_val_gap": train_val_gap(client, base),
            "qk_pseudo_rank": _metric(base, PSEUDO_RANK.format(kind="qk")),
            "ov_pseudo_rank": _metric(base, PSEUDO_RANK.format(kind="ov")),
            "probe_best_acc": _metric(base, PROBE_BEST),
        }
        for key, value in base.data.metrics.items():
            match = PROBE_LAYER.fullmatch(key)
            if match:
                row[f"probe_layer_{match.group(1)}_acc"] = float(value)
        rows.append(row)
    return pd.DataFrame(rows)


def summarize(rows: pd.DataFrame) -> pd.DataFrame:
    """Per (regime, weight_decay): n, and per quantity mean, sample sd (NaN for n = 1), min and max."""
    columns = [c for c, _ in QUANTITIES] + sorted(c for c in rows.columns if c.startswith("probe_layer_"))
    out = []
    for (regime, wd), group in rows.groupby(["regime", "weight_decay"], sort=True):
        entry = {"regime": regime, "weight_decay": wd, "n_seeds": len(group),
                 "tokens": float(group["tokens"].median())}
        for col in columns:
            values = group[col].dropna().to_numpy(dtype=float)
            entry[f"{col}_mean"] = float(values.mean()) if len(values) else float("nan")
            entry[f"{col}_sd"] = float(values.std(ddof=1)) if len(values) > 1 else float("nan")
            entry[f"{col}_min"] = float(values.min()) if len(values) else float("nan")
            entry[f"{col}_max"] = float(values.max()) if len(values) else float("nan")
        out.append(entry)
    return pd.DataFrame(out)


def _ranges_overlap(summary: pd.DataFrame, a: int, b: int, col: str) -> bool:
    lo_a, hi_a = summary.at[a, f"{col}_min"], summary.at[a, f"{col}_max"]
    lo_b, hi_b = summary.at[b, f"{col}_min"], summary.at[b, f"{col}_max"]
    return not (hi_a < lo_b or hi_b < lo_a)


# What "the most plastic lambda" means: the largest gain, and (the paper's post-SFT score) the lowest loss after.
DOWNSTREAM = (("plasticity", "max", "the most plasticity (before - after)"),
              ("target_after", "min", "the lowest target loss after fine-tuning"))


def _regime_statement(regime: str, group: pd.DataFrame, col: str, direction: str, label: str,
                      rows: pd.DataFrame | None = None) -> str:
    group = group.dropna(subset=["base_val_loss_mean", f"{col}_mean"])
    if len(group) < 2:
        return f"- {regime}: fewer than two lambdas with both a base loss and {label}; no comparison."
    best_base = group["base_val_loss_mean"].idxmin()
    best_down = group[f"{col}_mean"].idxmax() if direction == "max" else group[f"{col}_mean"].idxmin()
    lam_base, lam_down = group.at[best_base, "weight_decay"], group.at[best_down, "weight_decay"]
    if best_base == best_down:
        n = int(group["n_seeds"].min())
        return (f"- {regime}: the same lambda ({lam_base:g}) gives the lowest base val/loss and {label} "
                f"(means over {n}{'+' if n > 1 else ''} seed(s) per lambda): no decoupling seen.")
    n = int(min(group.at[best_base, "n_seeds"], group.at[best_down, "n_seeds"]))
    d_loss = group.at[best_down, "base_val_loss_mean"] - group.at[best_base, "base_val_loss_mean"]
    d_down = group.at[best_down, f"{col}_mean"] - group.at[best_base, f"{col}_mean"]
    text = (f"- {regime}: lambda {lam_base:g} has the lowest base val/loss, lambda {lam_down:g} {label}: they "
            f"DIFFER on the means. From {lam_base:g} to {lam_down:g}: base loss {d_loss:+.4f}, {col} "
            f"{d_down:+.4f} (nats/token)")
    if n < 2:
        return text + "; one seed per cell, so the seed spread is unknown: not evidence either way."
    sd = {lam: (group.at[i, "base_val_loss_sd"], group.at[i, f"{col}_sd"])
          for lam, i in ((lam_base, best_base), (lam_down, best_down))}
    text += f"; seed sd (base loss, {col}): " + "; ".join(
        f"lambda {lam:g}: {a:.4f}, {b:.4f}" for lam, (a, b) in sd.items()) + f"; n = {n} seeds. "
    overlap = (_ranges_overlap(group, best_base, best_down, "base_val_loss")
               or _ranges_overlap(group, best_base, best_down, col))
    if overlap:
        text += "The seed ranges overlap, so this ordering is within seed noise: not evidence of decoupling."
    else:
        text += ("The seed ranges of both quantities do not overlap, consistent with the paper's decoupling "
                 "at this scale (a small-n observation).")
    if rows is not None:
        text += " " + _paired_sentence(rows[rows["regime"] == regime], lam_base, lam_down, col)
    return text


def _paired_sentence(rows: pd.DataFrame, lam_base: float, lam_down: float, col: str) -> str:
    """Both differences (lambda_down - lambda_base) paired by seed: seeds share data order and init."""
    from analysis.stats import compare_paired

    def by_seed(lam: float, quantity: str) -> dict[str, float]:
        cell = rows[rows["weight_decay"] == lam]
        return dict(zip(cell["seed"].astype(str), cell[quantity].astype(float)))

    parts, significant = [], []
    for quantity in ("base_val_loss", col):
        c = compare_paired(by_seed(lam_down, quantity), by_seed(lam_base, quantity))
        if c.n < 2:
            return f"Paired by seed: only {c.n} seed(s) in both cells, no paired test."
        parts.append(f"{quantity} {c.mean_diff:+.4f} (95% bootstrap CI [{c.ci_low:+.4f}, {c.ci_high:+.4f}], "
                     f"paired t p = {c.p_t:.3g})")
        significant.append(c.p_t < 0.05 and c.ci_excludes_zero())
    verdict = ("both differences are significant (p < 0.05, CI excluding 0): decoupling at this scale"
               if all(significant) else "not both significant (p < 0.05 with a CI excluding 0): no evidence of "
               "decoupling at this scale")
    return f"Paired by seed (n = {c.n}), lambda {lam_down:g} - lambda {lam_base:g}: {'; '.join(parts)}; {verdict}."


def decoupling(summary: pd.DataFrame, rows: pd.DataFrame | None = None) -> list[str]:
    """Per regime and downstream measure: does argmin base loss differ from the best-downstream lambda, is
    that beyond the seed spread (min-max ranges disjoint), and, given the per-run rows, is each difference
    significant paired by seed?"""
    return [_regime_statement(regime, group, col, direction, label, rows)
            for regime, group in summary.groupby("regime", sort=True)
            for col, direction, label in DOWNSTREAM]


def _cell(mean: float, sd: float) -> str:
    if not math.isfinite(mean):
        return "–"
    return f"{mean:.4f} ± {sd:.4f}" if math.isfinite(sd) else f"{mean:.4f}"


def render(experiment: str, recipe: FinetuneRecipe, summary: pd.DataFrame, rows: pd.DataFrame,
           notes: list[str]) -> str:
    headers = ["regime", "lambda", "seeds", "tokens", *(h for _, h in QUANTITIES)]
    lines = [
        f"# {experiment}: weight decay vs plasticity",
        "",
        f"Fine-tuning recipe `{recipe.name}`: target `{recipe.data}`, lr {recipe.lr:g}, weight decay "
        f"{recipe.weight_decay:g}, {recipe.steps} steps x batch {recipe.batch_size}, {recipe.schedule} schedule.",
        "Losses in nats/token on held-out splits: base val/loss on the pre-training corpus; target loss on "
        "the fine-tuning corpus, before (base weights) and after fine-tuning. Plasticity = before - after. "
        f"Train-val gap = base val/loss - mean of the last {TRAIN_TAIL} logged train/loss values. Pseudo-rank: "
        "mean over heads and layers of #{sigma_i >= 0.01 sigma_1} (max = head_dim). "
        "Cells: mean ± sample sd over seeds (sd omitted for one seed).",
        "",
        "| " + " | ".join(headers) + " |",
        "|" + "|".join("---" for _ in headers) + "|",
    ]
    for _, r in summary.iterrows():
        cells = [str(r["regime"]), f"{r['weight_decay']:g}", str(int(r["n_seeds"])), f"{r['tokens']:,.0f}"]
        cells += [_cell(r[f"{c}_mean"], r[f"{c}_sd"]) for c, _ in QUANTITIES]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "## Is the best-loss lambda the most plastic one?", "", *decoupling(summary, rows), ""]
    missing = rows[rows["finetune_run_id"] == ""]
    if len(missing):
        cells = ", ".join(missing["arm"] + "/" + missing["seed"])
        lines.append(f"- {len(missing)} base run(s) have no finished fine-tune: {cells}.")
    lines += [f"- {note}" for note in notes]
    return "\n".join(lines) + "\n"


def write_outputs(out: Path, text: str, summary: pd.DataFrame, rows: pd.DataFrame) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    (out / "table.md").write_text(text)
    summary.to_csv(out / "summary.csv", index=False)
    rows.to_csv(out / "runs.csv", index=False)
    return out / "table.md"


def reports_root(reports_dir: str | None) -> Path:
    from analysis.report import reports_root as root

    return root(reports_dir)


# --- the command ------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    try:
        args = parse_args(sys.argv[1:] if argv is None else argv)
        recipe = load_recipe(args.recipe, args.recipe_overrides)
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    code = 0
    if args.pretrain:
        from sweeps.ablate import main as ablate

        code = ablate([f"experiment={args.experiment}", *args.grid_argv])
        if code == 2:
            return 2
    client = MlflowClient(tracking_uri(None, args.runs_dir))
    parent = find_parent(client, args.experiment)
    if parent is None:
        print(f"error: no pre-training grid of '{args.experiment}' in {mask_password(client.tracking_uri)}; "
              "run without pretrain=false first.", file=sys.stderr)
        return 2
    bases = base_runs(client, parent)
    if not bases:
        print(f"error: the grid parent {parent.info.run_id} has no FINISHED pre-training run to fine-tune.",
              file=sys.stderr)
        return 1
    failed = finetune_all(client, bases, recipe, args.runs_dir)
    notes = [probe_all(client, bases) if args.probes else "linear probes skipped (probes=false)"]
    print(notes[0])
    rows = collect_rows(client, bases, recipe)
    summary = summarize(rows)
    text = render(args.experiment, recipe, summary, rows, notes)
    path = write_outputs(reports_root(args.reports_dir) / args.experiment / "plasticity", text, summary, rows)
    client.log_artifacts(parent.info.run_id, str(path.parent), artifact_path="plasticity")
    print(text)
    print(f"table: {path} (+ summary.csv, runs.csv); grid parent {parent.info.run_id}")
    try:  # the ablation report again, now that fine-tune and probe metrics exist
        from analysis.report import write_report

        report = write_report(parent_run_id=parent.info.run_id, runs_dir=args.runs_dir,
                              reports_dir=args.reports_dir)
        print(f"report: {report}")
    except Exception as err:  # noqa: BLE001 - the table is this command's product; the report is extra
        print(f"ablation report not refreshed: {type(err).__name__}: {err}", file=sys.stderr)
    return 1 if (code or failed) else 0


if __name__ == "__main__":
    sys.exit(main())
