"""Spectral diagnostics of the block matrices: GMCN and singular-value histograms.

GMCN (PC layer paper, official `visualize/metrics_plotter.py`, papers.md section 4):
- per matrix, the modified condition number  sigma_1 / mean(bottom ceil(10 %) singular values);
- for a PC-parametrized matrix it is taken on the POST-PC spectrum without gamma (sg(sigma) p(W/sigma));
  GMCN is scale-invariant, so gamma would not change it anyway;
- global value = geometric mean over q, k, v, o, gate, up, down of every layer; the PC and non-PC
  matrices are also reported as separate groups.

Metrics: `gmcn/all`, `gmcn/pc`, `gmcn/no_pc` and the geometric mean per matrix kind,
`gmcn/kind/<q|k|v|o|gate|up|down>`. In a run without PC, `pc` / `no_pc` split by the PC layer's default
targets (o, gate, up, down vs q, k, v), like the official plots that group by layer name across runs.
`sv_hist` writes a PNG of the singular values (divided by each matrix's sigma_1) of the effective
weights, one panel per matrix kind.

The count of bottom values is ceil(n / 10) in exact integer arithmetic; the official code computes
ceil(0.1 * n) in floating point, which differs only when n is a multiple of 10 whose product rounds up
(e.g. n = 30 -> 4 there, 3 here); model widths (128, 1024, 2048, ...) are unaffected.
"""

from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path

import torch
from torch import nn

from lit_modules.diagnostics.registry import DiagnosticContext, DiagnosticResult, register

# Module-path suffix -> matrix kind: the seven matrices the paper's GMCN covers.
GMCN_KINDS = {
    "attn.q_proj": "q",
    "attn.k_proj": "k",
    "attn.v_proj": "v",
    "attn.o_proj": "o",
    "mlp.gate_proj": "gate",
    "mlp.up_proj": "up",
    "mlp.down_proj": "down",
}

# The PC layer's default targets (techniques/pc_layer.py DEFAULT_TARGETS): FFN + attention output.
DEFAULT_PC_KINDS = ("o", "gate", "up", "down")


# --- pure math ------------------------------------------------------------------------------------


def bottom_count(n: int, fraction_tenths: int = 1) -> int:
    """ceil(n * fraction_tenths / 10), at least 1."""
    return max(1, -(-n * fraction_tenths // 10))


def modified_condition_number(singular_values: torch.Tensor) -> float:
    """sigma_1 / mean of the smallest ceil(10 %) singular values; NaN when that mean is not positive."""
    values = singular_values.detach().double().flatten()
    values = values[torch.isfinite(values)]
    if values.numel() == 0:
        return float("nan")
    values = torch.sort(values, descending=True).values
    bottom = values[-bottom_count(values.numel()) :].mean().item()
    if not bottom > 0:
        return float("nan")
    return values[0].item() / bottom


def geometric_mean(values: list[float]) -> float:
    """exp(mean(log x)) over the finite positive values (NaN when there are none)."""
    kept = [v for v in values if math.isfinite(v) and v > 0]
    if not kept:
        return float("nan")
    return math.exp(sum(math.log(v) for v in kept) / len(kept))


def singular_values(weight: torch.Tensor) -> torch.Tensor:
    """Singular values in float64 (exact enough for condition numbers in the thousands)."""
    return torch.linalg.svdvals(weight.detach().double())


# --- effective weights ----------------------------------------------------------------------------


def kind_of(module_name: str) -> str | None:
    for suffix, kind in GMCN_KINDS.items():
        if module_name == suffix or module_name.endswith("." + suffix):
            return kind
    return None


def _pc_parametrization(module: nn.Module):
    """The module's PC parametrization (duck-typed: a parametrization with `preconditioned`), or None."""
    parametrizations = getattr(module, "parametrizations", None)
    if parametrizations is None or "weight" not in parametrizations:
        return None
    for p in parametrizations.weight:
        if hasattr(p, "preconditioned"):
            return p
    return None


def effective_weight(module: nn.Module, with_gamma: bool = True) -> tuple[torch.Tensor, bool]:
    """(weight the layer computes with, whether it is PC-parametrized).

    `module.weight` already is the effective weight of a parametrized Linear; `with_gamma=False` gives
    the post-PC weight without the learnable scalar (what GMCN is defined on).
    """
    pc = _pc_parametrization(module)
    if pc is None:
        return module.weight.detach(), False
    if with_gamma or getattr(pc, "gamma", None) is None:
        return module.weight.detach(), True
    return pc.preconditioned(module.parametrizations.weight.original).detach(), True


def block_matrices(model: nn.Module, with_gamma: bool = True) -> dict[str, tuple[str, torch.Tensor, bool]]:
    """module path -> (kind, effective weight, is PC) for the seven GMCN matrix kinds of every layer."""
    out = {}
    for name, module in model.named_modules():
        if not isinstance(module, nn.Linear):
            continue
        name = name.replace("_orig_mod.", "")
        kind = kind_of(name)
        if kind is not None:
            weight, is_pc = effective_weight(module, with_gamma)
            out[name] = (kind, weight, is_pc)
    return out


def gmcn_metrics(model: nn.Module) -> dict[str, float]:
    """`all`, `pc`, `no_pc` and `kind/<kind>` geometric means of the per-matrix condition numbers.

    As in the official plots, `pc` / `no_pc` split by which matrices PC touches, so a baseline run
    (no PC layer) reports the same split over the paper's default targets (o, gate, up, down) and the
    two runs compare like for like.
    """
    matrices = block_matrices(model, with_gamma=False)
    any_pc = any(is_pc for _, _, is_pc in matrices.values())
    groups: dict[str, list[float]] = defaultdict(list)
    for kind, weight, is_pc in matrices.values():
        value = modified_condition_number(singular_values(weight))
        in_pc_group = is_pc if any_pc else kind in DEFAULT_PC_KINDS
        groups["all"].append(value)
        groups["pc" if in_pc_group else "no_pc"].append(value)
        groups[f"kind/{kind}"].append(value)
    return {f"gmcn/{group}": geometric_mean(values) for group, values in groups.items()}


# --- registered diagnostics -----------------------------------------------------------------------


@register("gmcn")
def gmcn_diagnostic(ctx: DiagnosticContext) -> DiagnosticResult:
    return DiagnosticResult(metrics=gmcn_metrics(ctx.model))


@register("sv_hist")
def sv_hist_diagnostic(ctx: DiagnosticContext) -> DiagnosticResult:
    matrices = block_matrices(ctx.model, with_gamma=True)
    if not matrices:
        return DiagnosticResult()
    path = write_sv_histogram(matrices, ctx.step, Path(ctx.artifact_dir) / f"sv_hist_step{ctx.step:07d}.png")
    return DiagnosticResult(artifacts=[path])


def write_sv_histogram(matrices: dict[str, tuple[str, torch.Tensor, bool]], step: int, path: Path) -> Path:
    """One panel per matrix kind: histogram of sigma_i / sigma_1 pooled over layers (Agg, no pyplot)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    pooled: dict[str, list[torch.Tensor]] = defaultdict(list)
    pc_kinds: set[str] = set()
    for kind, weight, is_pc in matrices.values():
        s = singular_values(weight)
        if s.numel() and s[0] > 0:
            pooled[kind].append((s / s[0]).float())
        if is_pc:
            pc_kinds.add(kind)
    kinds = [k for k in GMCN_KINDS.values() if k in pooled]
    cols = min(4, len(kinds))
    rows = math.ceil(len(kinds) / cols)
    fig = Figure(figsize=(3.6 * cols, 2.8 * rows))
    FigureCanvasAgg(fig)
    for i, kind in enumerate(kinds):
        ax = fig.add_subplot(rows, cols, i + 1)
        values = torch.cat(pooled[kind]).numpy()
        ax.hist(values, bins=40, range=(0.0, 1.0), color="tab:orange" if kind in pc_kinds else "tab:blue")
        ax.set_title(f"{kind}{' (PC)' if kind in pc_kinds else ''}: {len(pooled[kind])} matrices", fontsize=9)
        ax.set_xlabel("sigma / sigma_1", fontsize=8)
        ax.tick_params(labelsize=7)
    fig.suptitle(f"Singular values of the effective weights at step {step}", fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=80)
    return path
