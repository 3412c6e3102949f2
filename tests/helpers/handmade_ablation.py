"""Hand-made ablations with known answers, built as the frames analysis.ablation.assemble takes (no store).

`handmade(values, ...)`: `values` maps an arm name (variants allowed, `snr@lr3e-3`) to its final val/loss per
seed; every run gets a val/loss curve ending at that value, a budget and a throughput."""

from __future__ import annotations

import pandas as pd

from analysis.ablation import SECONDS_PER_TOKEN, ParentRecord, assemble, typed_runs
from analysis.typed_tables import empty_token_gaps, typed_curves

PER_STEP = 512


def handmade(values: dict[str, list[float]], name: str = "handmade", claim: str | None = None,
             baseline: str = "baseline", params: dict[str, float] | None = None, tokens: float = 2_000_000,
             seconds_per_token: dict[str, float] | None = None, models: dict[str, str] | None = None):
    """An Ablation: one FINISHED run per (arm, seed); `params` maps an arm or a variant to its non-embedding count,
    `models` an arm or a variant to the model name its runs log (params.model.name; none logged otherwise)."""
    params, models = params or {}, models or {}
    rows, curves = [], []
    for i, (arm, per_seed) in enumerate(values.items()):
        variant = arm.partition("@")[2]
        non_embedding = params.get(arm, params.get(variant, 100_000))
        model = models.get(arm, models.get(variant))
        for seed, value in enumerate(per_seed):
            run_id = f"{i:02d}{seed:02d}".ljust(32, "0")
            rows.append({
                "run_id": run_id, "run_name": f"{arm}-{seed}", "status": "FINISHED",
                "start_time": pd.Timestamp("2026-01-01") + pd.Timedelta(seconds=10 * len(rows)), "end_time": pd.NaT,
                "params.ablation.baseline": baseline, "params.budget.params_non_embedding": str(non_embedding),
                "params.budget.params_total": str(int(non_embedding * 1.3)), "params.budget.total_tokens": str(tokens),
                "params.budget.tokens_per_step": str(PER_STEP),
                "tags.ablation.arm": arm, "tags.seed": str(seed), "tags.ablation.name": name,
                "metrics.val/loss": value,
                SECONDS_PER_TOKEN: (seconds_per_token or {}).get(arm, 1e-5) * (1 + 0.01 * seed),
                **({"params.model.name": model} if model else {}),
            })
            steps = [9, 19]
            curves.append(pd.DataFrame({"run_id": run_id, "key": "val/loss", "step": steps,
                                        "tokens_seen": [(s + 1) * PER_STEP * 1.0 for s in steps],
                                        "value": [value + 0.5, value]}))
    tags = {"ablation.name": name, "ablation.role": "parent", **({"ablation.claim": claim} if claim else {})}
    parent = ParentRecord("f" * 32, "FINISHED", f"ablate:{name}", tags, {"arms": ",".join(values)}, "handmade")
    runs = typed_runs(pd.DataFrame(rows))
    finetunes = typed_runs(pd.DataFrame(columns=["run_id", "run_name", "status", "start_time", "end_time"]))
    return assemble(parent, runs, typed_curves(pd.concat(curves, ignore_index=True)), finetunes,
                    empty_token_gaps(), [])


def toy_claim():
    """A claim with one check, val/loss lower is better, every arm expected better, at 20 TPP."""
    from analysis.claims import Check, Claim

    return Claim(preset="toy", paper="toy", statement="-", paper_scale="-", paper_tokens=None,
                 checks=(Check("val/loss", "lower", "-"),), default_expect="better", paper_tpp=20.0)


def three_weak_arms() -> dict[str, list[float]]:
    """Values of three arms 0.1 below the baseline, their seed spread giving each a raw paired-t p of ~0.03."""
    base = [3.0, 3.01, 3.02]
    weak = [b + d for b, d in zip(base, (-0.1 + 0.0309, -0.1, -0.1 - 0.0309))]
    return {"baseline": base, "a": weak, "b": weak, "c": weak}
