"""Token-level comparison of two runs on the same held-out tokens, binned by token difficulty.

OUR PROPOSAL, NOT THE PAPER'S DEFINITION. "Small Initialization Matters for LLMs" (arXiv 2606.17945)
reports a "symmetric probability gap" Delta_sym and token difficulty (average loss) and says the gains
concentrate on moderately-to-highly difficult tokens. Its exact definitions are UNCONFIRMED
(shared/reference/papers.md section 2). What this module computes, for run S (e.g. small init) against
run B (the baseline), token by token:

    Delta(t) = p_S(t) - p_B(t)                       probability gap of the true next token
    d(t)     = 1/2 * (-log p_S(t) - log p_B(t))      difficulty = the two runs' average loss, so that
                                                     neither run alone defines the bins ("symmetric")

and per difficulty bin: mean Delta, a percentile-bootstrap CI of that mean (fixed seed), the token
count and the fraction of tokens with Delta > 0. Bins are either the deciles of d (`bins="deciles"`,
D1 = easiest) or fixed bins of the geometric-mean probability exp(-d) = sqrt(p_S p_B)
(`bins="probability"`: <0.01, 0.01-0.1, 0.1-0.5, >0.5). Swapping S and B negates every mean Delta
and leaves the bins unchanged.

Caveat: the bootstrap resamples tokens independently; neighbouring tokens are correlated, so the
intervals are somewhat too narrow. Compare runs across seeds before trusting a small gap.

Input: one `token_logprobs.npz` per run with arrays `tokens` (int32) and `logprobs` (float32,
log p(token_t | prefix)), same shape. Command line:

    python -m analysis.token_gap S.npz B.npz --bins deciles --out token_gap   # writes .csv and .png
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

PROBABILITY_EDGES = (0.0, 0.01, 0.1, 0.5, 1.0)
PROBABILITY_LABELS = ("<0.01", "0.01-0.1", "0.1-0.5", ">0.5")
BIN_KINDS = ("deciles", "probability")
COLUMNS = (
    "bin", "count", "mean_delta", "ci_low", "ci_high", "frac_positive",
    "mean_difficulty", "difficulty_low", "difficulty_high",
)


@dataclass(frozen=True)
class TokenLogprobPair:
    """Per-token log-probabilities of run S and run B over one token sequence (all 1-D, same length)."""

    tokens: np.ndarray
    logp_s: np.ndarray
    logp_b: np.ndarray


def read_token_logprobs(path: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """(tokens, logprobs) of one `token_logprobs.npz`, flattened and checked."""
    path = Path(path)
    with np.load(path) as data:
        missing = {"tokens", "logprobs"} - set(data.files)
        if missing:
            raise ValueError(f"{path} lacks the array(s) {', '.join(sorted(missing))}.")
        tokens, logprobs = data["tokens"], data["logprobs"]
    if tokens.shape != logprobs.shape:
        raise ValueError(f"{path}: tokens {tokens.shape} and logprobs {logprobs.shape} differ in shape.")
    logprobs = logprobs.astype(np.float64).ravel()
    if not np.all(np.isfinite(logprobs)) or np.any(logprobs > 1e-6):
        raise ValueError(f"{path}: logprobs must be finite log-probabilities (<= 0).")
    return tokens.ravel(), np.minimum(logprobs, 0.0)


def load_token_logprobs(path_s: str | Path, path_b: str | Path) -> TokenLogprobPair:
    """Both runs' files; refuses them unless they score exactly the same token sequence."""
    tokens_s, logp_s = read_token_logprobs(path_s)
    tokens_b, logp_b = read_token_logprobs(path_b)
    if tokens_s.shape != tokens_b.shape or not np.array_equal(tokens_s, tokens_b):
        raise ValueError(
            f"The token sequences in {path_s} and {path_b} differ, so their per-token log-probabilities "
            "cannot be compared."
        )
    return TokenLogprobPair(tokens_s, logp_s, logp_b)


def _bin_members(difficulty: np.ndarray, bins: str) -> list[tuple[str, np.ndarray]]:
    """(label, token indices) per bin, easiest first."""
    if bins == "deciles":
        # Rank-based equal-count split: ties cannot empty a bin or merge two.
        order = np.argsort(difficulty, kind="stable")
        return [(f"D{i + 1}", idx) for i, idx in enumerate(np.array_split(order, 10))]
    if bins == "probability":
        p_geo = np.exp(-difficulty)
        # Descending probability = ascending difficulty, so list the high-probability bin first.
        groups = np.digitize(p_geo, PROBABILITY_EDGES[1:-1], right=False)  # 0: <0.01 ... 3: >=0.5
        order = reversed(range(len(PROBABILITY_LABELS)))
        return [(PROBABILITY_LABELS[g], np.flatnonzero(groups == g)) for g in order]
    raise ValueError(f"bins must be one of {', '.join(BIN_KINDS)}, not {bins!r}.")


def bootstrap_mean_ci(
    values: np.ndarray, rng: np.random.Generator, n_boot: int = 1000, level: float = 0.95
) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean (resampling values with replacement)."""
    n = values.shape[0]
    if n == 0:
        return float("nan"), float("nan")
    means = np.empty(n_boot)
    per_batch = max(1, 10_000_000 // n)  # bound memory: at most ~1e7 indices drawn at a time
    for start in range(0, n_boot, per_batch):
        stop = min(n_boot, start + per_batch)
        idx = rng.integers(0, n, size=(stop - start, n))
        means[start:stop] = values[idx].mean(axis=1)
    tail = (1.0 - level) / 2.0
    low, high = np.quantile(means, [tail, 1.0 - tail])
    return float(low), float(high)


def token_gap(
    logp_s: np.ndarray,
    logp_b: np.ndarray,
    bins: str = "deciles",
    n_boot: int = 1000,
    level: float = 0.95,
    seed: int = 0,
    include_all: bool = True,
) -> pd.DataFrame:
    """One row per difficulty bin (easiest first), plus an `all` row when include_all.

    Columns: bin, count, mean_delta, ci_low, ci_high (bootstrap CI of mean_delta), frac_positive
    (share of tokens with Delta > 0), mean_difficulty, difficulty_low, difficulty_high (nats).
    """
    logp_s = np.asarray(logp_s, dtype=np.float64).ravel()
    logp_b = np.asarray(logp_b, dtype=np.float64).ravel()
    if logp_s.shape != logp_b.shape:
        raise ValueError(f"The two runs score different numbers of tokens ({logp_s.size} vs {logp_b.size}).")
    if logp_s.size == 0:
        raise ValueError("There are no tokens to compare.")
    delta = np.exp(logp_s) - np.exp(logp_b)
    difficulty = -0.5 * (logp_s + logp_b)
    groups = _bin_members(difficulty, bins)
    if include_all:
        groups.append(("all", np.arange(delta.size)))
    rows = []
    for i, (label, idx) in enumerate(groups):
        rng = np.random.default_rng([seed, i])  # per-bin stream: one bin's CI does not depend on another's
        d, g = difficulty[idx], delta[idx]
        ci_low, ci_high = bootstrap_mean_ci(g, rng, n_boot, level)
        empty = idx.size == 0
        rows.append({
            "bin": label,
            "count": int(idx.size),
            "mean_delta": float("nan") if empty else float(g.mean()),
            "ci_low": ci_low,
            "ci_high": ci_high,
            "frac_positive": float("nan") if empty else float((g > 0).mean()),
            "mean_difficulty": float("nan") if empty else float(d.mean()),
            "difficulty_low": float("nan") if empty else float(d.min()),
            "difficulty_high": float("nan") if empty else float(d.max()),
        })
    return pd.DataFrame(rows, columns=list(COLUMNS))


def plot_token_gap(df: pd.DataFrame, path: str | Path, title: str = "run S vs run B") -> Path:
    """Mean Delta with its CI per bin (top) and the fraction of tokens with Delta > 0 (bottom), as PNG."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    bins = df[df["bin"] != "all"]
    x = np.arange(len(bins))
    fig = Figure(figsize=(max(6.0, 0.7 * len(bins) + 2.0), 6.0))
    FigureCanvasAgg(fig)
    top, bottom = fig.subplots(2, 1, sharex=True)
    mean = bins["mean_delta"].to_numpy()
    err = np.vstack([mean - bins["ci_low"].to_numpy(), bins["ci_high"].to_numpy() - mean])
    top.bar(x, mean, yerr=err, capsize=3, color=np.where(mean >= 0, "tab:blue", "tab:red"))
    top.axhline(0.0, color="black", linewidth=0.8)
    top.set_ylabel("mean Δ = p_S − p_B")
    top.set_title(
        f"Token probability gap by difficulty: {title}\n"
        "(binning is our proposal; the paper's Δ_sym is UNCONFIRMED)",
        fontsize=9,
    )
    bottom.bar(x, bins["frac_positive"].to_numpy(), color="tab:gray")
    bottom.axhline(0.5, color="black", linewidth=0.8, linestyle="--")
    bottom.set_ylim(0.0, 1.0)
    bottom.set_ylabel("fraction Δ > 0")
    bottom.set_xticks(x, [f"{b}\n(n={c})" for b, c in zip(bins["bin"], bins["count"])], fontsize=7)
    bottom.set_xlabel("difficulty bin, easiest → hardest (average loss of both runs)")
    fig.tight_layout()
    from analysis.plots import save_png

    return save_png(fig, path, dpi=100, crop=False)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description="Per-token probability gap of run S over run B, by difficulty."
    )
    parser.add_argument("run_s", help="token_logprobs.npz of run S (e.g. small init)")
    parser.add_argument("run_b", help="token_logprobs.npz of run B (the baseline)")
    parser.add_argument("--bins", choices=BIN_KINDS, default="deciles")
    parser.add_argument("--n-boot", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="token_gap", help="output path without suffix (.csv and .png)")
    args = parser.parse_args(argv)
    pair = load_token_logprobs(args.run_s, args.run_b)
    df = token_gap(pair.logp_s, pair.logp_b, bins=args.bins, n_boot=args.n_boot, seed=args.seed)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    df.to_csv(out.with_suffix(".csv"), index=False)
    plot_token_gap(df, out.with_suffix(".png"), title=f"{Path(args.run_s).name} vs {Path(args.run_b).name}")
    print(df.to_string(index=False))


if __name__ == "__main__":
    main()
