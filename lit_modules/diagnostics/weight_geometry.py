"""Weight geometry: stable rank and condensation (row-wise cosine similarity) of every Linear weight.

These are the two mechanistic metrics of "Small Initialization Matters for LLMs" (arXiv 2606.17945):
small initialization is said to make weight matrices first *condense* (rows align along a few shared
directions: low stable rank, high row similarity) and then *expand*. The exact summaries the paper
plots are UNCONFIRMED (shared/reference/papers.md section 2); we log the forms its notes name:

- stable rank     ||W||_F^2 / ||W||_2^2 (1 for a rank-one matrix, n for an orthogonal n x n one);
- condensation    C_ij = cos(W_i, W_j) over the rows of a Linear weight [out, in] (row i = the input
                  weights of output neuron i); summaries: mean |C_ij| over i != j, and the share of
                  pairs i != j with |C_ij| > 0.9; plus a heat-map of C for a few matrices.

`module.weight` is read, never the raw parameter, so a parametrized layer (e.g. the PC layer) is
measured by its effective weight. Metric names keep the module path, e.g.
`stable_rank/layers.0.attn.q_proj` and `stable_rank/mean/q`.
"""

from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from lit_modules.diagnostics.registry import DiagnosticContext, DiagnosticResult, register

CONDENSED_COS = 0.9  # |cos| above this counts a pair of rows as aligned
HEATMAP_MAX_ROWS = 256  # rows shown in a heat-map panel (the metrics always use every row)

# Module-path suffix -> family. The attention output gate is "attn_gate" so "gate" stays SwiGLU's gate.
_FAMILIES = {
    "attn.q_proj": "q",
    "attn.k_proj": "k",
    "attn.v_proj": "v",
    "attn.o_proj": "o",
    "attn.gate_proj": "attn_gate",
    "mlp.gate_proj": "gate",
    "mlp.up_proj": "up",
    "mlp.down_proj": "down",
    "lm_head": "head",
}


# --- pure math ------------------------------------------------------------------------------------


def stable_rank(weight: torch.Tensor) -> float:
    """||W||_F^2 / ||W||_2^2 from one SVD (float32); 0 for an all-zero matrix."""
    singular = torch.linalg.svdvals(weight.detach().float())
    top = singular[0].item() if singular.numel() else 0.0
    if top == 0.0:
        return 0.0
    return (singular.square().sum() / singular[0].square()).item()


def row_cosine_matrix(weight: torch.Tensor) -> torch.Tensor:
    """C_ij = cos(W_i, W_j) for the rows of `weight` [n, d] -> [n, n]; an all-zero row has cosine 0."""
    rows = F.normalize(weight.detach().float(), dim=1)
    return rows @ rows.T


def row_cosine_summary(
    weight: torch.Tensor, threshold: float = CONDENSED_COS, chunk_rows: int = 1024
) -> tuple[float, float]:
    """(mean |C_ij| over i != j, share of pairs i != j with |C_ij| > threshold) for the rows of `weight`.

    Works in row chunks so a wide matrix never materializes its full n x n similarity.
    """
    rows = F.normalize(weight.detach().float(), dim=1)
    n = rows.shape[0]
    if n < 2:
        raise ValueError(f"Row cosine similarity needs at least two rows; the matrix has {n}.")
    abs_sum = 0.0
    above = 0
    for start in range(0, n, chunk_rows):
        block = (rows[start : start + chunk_rows] @ rows.T).abs_()  # [c, n]
        local = torch.arange(block.shape[0], device=block.device)
        block[local, start + local] = 0.0  # drop the diagonal (a row with itself)
        abs_sum += block.double().sum().item()
        above += int((block > threshold).sum().item())
    pairs = n * (n - 1)  # ordered pairs; C is symmetric, so the means equal the unordered ones
    return abs_sum / pairs, above / pairs


# --- model walking --------------------------------------------------------------------------------


def _clean(name: str) -> str:
    """Drop wrapper prefixes (torch.compile's `_orig_mod.`) so names match the plain model's."""
    return name.replace("_orig_mod.", "")


def family_of(module_name: str) -> str | None:
    """The family of a Linear module path (q, k, v, o, attn_gate, gate, up, down, head) or None."""
    for suffix, family in _FAMILIES.items():
        if module_name == suffix or module_name.endswith("." + suffix):
            return family
    return None


def linear_weights(model: nn.Module, include_head: bool = True) -> dict[str, torch.Tensor]:
    """Effective weight of every Linear, keyed by its clean module path (e.g. `layers.0.attn.q_proj`)."""
    out: dict[str, torch.Tensor] = {}
    for name, module in model.named_modules():
        if not isinstance(module, nn.Linear):
            continue
        name = _clean(name)
        if family_of(name) == "head" and not include_head:
            continue
        out[name] = module.weight  # the parametrized (effective) weight where a parametrization exists
    return out


def _family_means(per_matrix: dict[str, float]) -> dict[str, float]:
    """Mean over the matrices of each family, plus `all` over the block matrices (head excluded)."""
    groups: dict[str, list[float]] = defaultdict(list)
    for name, value in per_matrix.items():
        family = family_of(name)
        if family is None:
            continue
        groups[family].append(value)
        if family != "head":
            groups["all"].append(value)
    return {family: sum(values) / len(values) for family, values in groups.items() if family != "head"}


# --- registered diagnostics -----------------------------------------------------------------------


@register("stable_rank")
def stable_rank_diagnostic(ctx: DiagnosticContext) -> DiagnosticResult:
    per_matrix = {name: stable_rank(w) for name, w in linear_weights(ctx.model).items()}
    metrics = {f"stable_rank/{name}": value for name, value in per_matrix.items()}
    metrics.update({f"stable_rank/mean/{fam}": value for fam, value in _family_means(per_matrix).items()})
    return DiagnosticResult(metrics=metrics)


@register("condensation")
def condensation_diagnostic(ctx: DiagnosticContext) -> DiagnosticResult:
    # The LM head is left out: its rows are vocabulary entries (up to ~1e5), not neurons.
    weights = linear_weights(ctx.model, include_head=False)
    mean_abs: dict[str, float] = {}
    share: dict[str, float] = {}
    for name, weight in weights.items():
        if weight.shape[0] < 2:
            continue
        mean_abs[name], share[name] = row_cosine_summary(weight)
    metrics = {f"condensation/mean_abs_cos/{n}": v for n, v in mean_abs.items()}
    share_key = f"condensation/share_gt_{CONDENSED_COS}"
    metrics.update({f"{share_key}/{n}": v for n, v in share.items()})
    metrics.update({f"condensation/mean_abs_cos/mean/{f}": v for f, v in _family_means(mean_abs).items()})
    metrics.update({f"{share_key}/mean/{f}": v for f, v in _family_means(share).items()})
    artifacts = []
    panels = {name: weights[name] for name in _heatmap_panels(weights)}
    if panels:
        path = Path(ctx.artifact_dir) / "condensation_heatmap.png"
        artifacts.append(_write_heatmap(panels, ctx.step, path))
    return DiagnosticResult(metrics=metrics, artifacts=artifacts)


# --- heat-map -------------------------------------------------------------------------------------


def _heatmap_panels(weights: dict[str, torch.Tensor]) -> list[str]:
    """q_proj and up_proj of the first and the last layer (when present)."""
    layers = sorted({int(n.split(".")[1]) for n in weights if n.startswith("layers.")})
    if not layers:
        return []
    wanted = []
    for layer in dict.fromkeys((layers[0], layers[-1])):
        wanted += [f"layers.{layer}.attn.q_proj", f"layers.{layer}.mlp.up_proj"]
    return [n for n in wanted if n in weights and weights[n].shape[0] >= 2]


def _display_order(weight: torch.Tensor) -> torch.Tensor:
    """Rows sorted by their projection on the top right-singular vector, so aligned rows sit together.

    Display only: the scalar metrics do not depend on row order.
    """
    rows = F.normalize(weight.detach().float(), dim=1)
    _, _, vh = torch.linalg.svd(rows, full_matrices=False)
    return torch.argsort(rows @ vh[0])


def _write_heatmap(panels: dict[str, torch.Tensor], step: int, path: Path) -> Path:
    """One PNG with a panel per matrix (Agg canvas, no pyplot global state)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    cols = 2
    n_rows = math.ceil(len(panels) / cols)
    fig = Figure(figsize=(4.2 * cols, 3.8 * n_rows))
    FigureCanvasAgg(fig)
    image = None
    for i, (name, weight) in enumerate(panels.items()):
        total = weight.shape[0]
        weight = weight[:HEATMAP_MAX_ROWS]
        order = _display_order(weight)
        cos = row_cosine_matrix(weight)[order][:, order].cpu().numpy()
        ax = fig.add_subplot(n_rows, cols, i + 1)
        image = ax.imshow(cos, cmap="RdBu_r", vmin=-1.0, vmax=1.0, interpolation="nearest")
        shown = f"first {cos.shape[0]} of {total}" if cos.shape[0] < total else str(total)
        ax.set_title(f"{name} ({shown} rows)", fontsize=9)
        ax.set_xticks([])
        ax.set_yticks([])
    fig.colorbar(image, ax=fig.axes, shrink=0.8, label="row cosine similarity")
    fig.suptitle(
        f"Row-wise cosine similarity at step {step} (rows sorted by top singular direction)", fontsize=10
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=80)
    return path
