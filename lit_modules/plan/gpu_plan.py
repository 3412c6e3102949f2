"""The plan of a GPU run, made on any machine: ETA from the peak table at an assumed MFU, memory per device
under each layout (DDP, FSDP full shard) with and without activation checkpointing, and whether it fits.

ETA = training FLOPs (analytic, model/counting.py: 6N + attention per token, x the run's tokens)
      / (devices x dense bf16 peak x plan.mfu).
Activation checkpointing recomputes each block's forward once more: + (dense + attention) / 3 per token.
A layout fits when its estimate (config/memory.py) is within USABLE of the device's memory; the rest is
for what the estimate leaves out (CUDA context, NCCL buffers, allocator fragmentation, compile workspaces).
"""

from __future__ import annotations

from dataclasses import dataclass

from omegaconf import DictConfig

from lit_modules.config.budget import Budget, model_config, world_size
from lit_modules.config.errors import ConfigError
from lit_modules.config.memory import GIB, MemoryEstimate, estimate_memory, layout_of
from lit_modules.model.counting import flops_per_token
from lit_modules.plan.devices import GPUS, Gpu, gpu

USABLE = 0.9  # share of a device's memory a plan may fill


@dataclass(frozen=True)
class Placement:
    layout: str  # single | ddp | fsdp (config/memory.py)
    checkpointing: bool
    memory: MemoryEstimate
    refused: str | None = None  # why the run's techniques refuse this layout

    def label(self, world: int) -> str:
        name = {"single": "one device", "ddp": f"ddp x {world}", "fsdp": f"fsdp full shard x {world}"}
        return name[self.layout]


@dataclass(frozen=True)
class GpuPlan:
    gpu: Gpu
    world: int
    mfu: float
    seconds: float | None  # None: no peak for this precision
    seconds_checkpointed: float | None
    placements: tuple[Placement, ...]
    chosen: Placement  # the configured layout and checkpointing
    refusal: str | None  # one sentence when the configured placement does not fit

    @property
    def usable(self) -> float:
        return USABLE * self.gpu.memory_bytes

    def fits(self, placement: Placement) -> bool:
        return placement.memory.total <= self.usable

    @property
    def gpu_hours(self) -> float | None:
        seconds = self.seconds_checkpointed if self.chosen.checkpointing else self.seconds
        return None if seconds is None else seconds * self.world / 3600


def plan_gpu_run(cfg: DictConfig, budget: Budget) -> GpuPlan:
    device = gpu(cfg.plan.gpu)
    mfu = float(cfg.plan.mfu)
    if not 0 < mfu <= 1:
        raise ConfigError(f"plan.mfu must be in (0, 1] (a share of the peak, e.g. 0.4), not {cfg.plan.mfu}.")
    world = world_size(cfg)
    seconds, seconds_ckpt = _eta_seconds(cfg, budget, device, mfu, world)
    chosen_layout = layout_of(cfg)
    layouts = ["ddp" if world > 1 else "single", "fsdp"]
    fsdp_refused = _fsdp_refusal(cfg) if chosen_layout != "fsdp" else None
    placements = tuple(
        Placement(layout, ckpt, estimate_memory(cfg, budget, layout=layout, checkpointing=ckpt),
                  fsdp_refused if layout == "fsdp" else None)
        for layout in layouts for ckpt in (False, True))
    chosen = next(p for p in placements
                  if p.layout == chosen_layout and p.checkpointing == bool(cfg.trainer.activation_checkpointing))
    plan = GpuPlan(device, world, mfu, seconds, seconds_ckpt, placements, chosen, None)
    if plan.fits(chosen):
        return plan
    return GpuPlan(device, world, mfu, seconds, seconds_ckpt, placements, chosen, _refusal(cfg, budget, plan))


def _eta_seconds(cfg: DictConfig, budget: Budget, device: Gpu, mfu: float, world: int):
    peak = device.peak_flops(cfg.trainer.precision)
    if peak is None:
        return None, None
    fpt = flops_per_token(model_config(cfg.model), cfg.data.seq_len)
    rate = world * peak * mfu
    recompute = (fpt["dense"] + fpt["attention"]) / 3
    return fpt["total"] * budget.total_tokens / rate, (fpt["total"] + recompute) * budget.total_tokens / rate


def _fsdp_refusal(cfg: DictConfig) -> str | None:
    """The first sentence in which one of the run's techniques refuses trainer.strategy=fsdp, or None."""
    from lit_modules.config.technique_context import TechniqueContext, instantiate_techniques

    sharded = cfg.copy()
    sharded.trainer.strategy = "fsdp"
    techniques, _ = instantiate_techniques(sharded)
    context = TechniqueContext.of(sharded, techniques)
    for technique in techniques:
        said = [p for p in technique.problems(sharded, context) if "FSDP" in p or "fsdp" in p]
        if said:
            return said[0]
    return None


def _refusal(cfg: DictConfig, budget: Budget, plan: GpuPlan) -> str:
    chosen, world = plan.chosen, plan.world
    d = cfg.data
    fixes: list[str] = []

    def fits(layout: str, ckpt: bool, batch: int | None = None) -> MemoryEstimate | None:
        est = estimate_memory(cfg, budget, layout=layout, checkpointing=ckpt, batch_size=batch)
        return est if est.total <= plan.usable else None

    fsdp = next(p for p in plan.placements if p.layout == "fsdp" and p.checkpointing == chosen.checkpointing)
    can_shard = chosen.layout != "fsdp" and fsdp.refused is None
    checkpointed = None if chosen.checkpointing else fits(chosen.layout, True)
    sharded = fits("fsdp", chosen.checkpointing) if can_shard else None
    if checkpointed:
        fixes.append(f"trainer.activation_checkpointing=true (~{checkpointed.total / GIB:.1f} GiB)")
    if sharded:
        fixes.append(f"trainer.strategy=fsdp (~{sharded.total / GIB:.1f} GiB)")
    if can_shard and not chosen.checkpointing and not (checkpointed or sharded) and (both := fits("fsdp", True)):
        fixes.append(f"trainer.strategy=fsdp and trainer.activation_checkpointing=true (~{both.total / GIB:.1f} GiB)")
    target = cfg.trainer.global_batch_tokens
    for batch in range(d.batch_size - 1, 0, -1):
        if target is not None and target % (batch * d.seq_len * world):
            continue  # would break the recipe's global batch
        if est := fits(chosen.layout, chosen.checkpointing, batch):
            kept = "; accumulation keeps the global batch" if target is not None else ""
            fixes.append(f"data.batch_size={batch} (~{est.total / GIB:.1f} GiB{kept})")
            break
    larger = [g for g in sorted(GPUS.values(), key=lambda g: g.memory_mib)
              if g.memory_mib > plan.gpu.memory_mib and chosen.memory.total <= USABLE * g.memory_bytes]
    if larger:
        fixes.append(f"plan.gpu={larger[0].key} ({larger[0].label}, {larger[0].memory_bytes / GIB:.0f} GiB)")
    fix = ("it fits with " + " or ".join(fixes)) if fixes else (
        "neither checkpointing, FSDP, a smaller micro-batch nor a larger GPU makes it fit; use a smaller model")
    ckpt = "with" if chosen.checkpointing else "without"
    return (f"This plan does not fit: {cfg.model.name} at a micro-batch of {d.batch_size} x {d.seq_len} tokens needs "
            f"~{chosen.memory.total / GIB:.1f} GiB per {plan.gpu.label} under {chosen.label(world)} {ckpt} "
            f"activation checkpointing, more than the {plan.usable / GIB:.1f} GiB usable "
            f"({USABLE:.0%} of {plan.gpu.memory_bytes / GIB:.1f} GiB); {fix}.")
