"""Structured-config schema for a training run.

Every Hydra group maps onto one dataclass here (or one owned by the package it configures), so an
unknown key or a wrong type is rejected by OmegaConf before anything runs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from hydra.core.config_store import ConfigStore

from lit_modules.config.data import DataConfig, TokenizerConfig
from lit_modules.config.evaluation import EvalConfig
from lit_modules.model.config import LlamaConfig
from lit_modules.model.init_config import InitConfig


@dataclass
class OptimConfig:
    # A registered optimizer (lit_modules/optim/: adamw, muon, adam_mini, nadam, lamb, and any module that
    # registers one); the fields below are shared, but for the shipped optimizers' own, kept flat here.
    name: str = "adamw"
    lr: float = 3e-3
    betas: List[float] = field(default_factory=lambda: [0.9, 0.95])
    eps: float = 1e-8
    weight_decay: float = 0.1
    # Which parameters skip weight decay; papers disagree, so it is explicit per experiment.
    wd_exclude: str = "none"  # none | norms_biases | norms_biases_embeddings
    grad_clip: float = 1.0  # 0 disables clipping
    # The shipped optimizers' own settings, flat as every recorded run holds them; each optimizer's module
    # declares and checks its own (optim/muon.py MuonSettings, optim/lamb.py LambSettings).
    muon_lr: float = 0.02
    muon_momentum: float = 0.95
    muon_adjust_lr: str = "match_rms_adamw"  # torch.optim.Muon adjust_lr_fn: original | match_rms_adamw
    # LAMB only (conf/optim/lamb.yaml sets it): the trust ratio also on groups without weight decay (norms;
    # embeddings under norms_biases_embeddings), as the paper's Algorithm 2 reads; false skips them, as
    # NVIDIA apex (use_nvlamb=False) and TF-Addons (exclude_from_layer_adaptation) do. None: not LAMB.
    lamb_trust_no_decay: Optional[bool] = None
    # Any other optimizer's own settings, by name (its module's settings dataclass declares and checks them).
    settings: Dict[str, Any] = field(default_factory=dict)


# OptimConfig fields added after runs were recorded, at the value that means "not used": left out of a run's
# identity hash at that value (lit_modules/config/identity.py identity_of), as model.config.ADDED_DEFAULTS.
OPTIM_ADDED_DEFAULTS = {"lamb_trust_no_decay": None, "settings": {}}


@dataclass
class ScheduleConfig:
    name: str = "cosine"  # cosine | wsd | constant
    warmup_fraction: float = 0.05
    warmup_steps: Optional[int] = None  # overrides warmup_fraction when set
    min_lr_ratio: float = 0.1  # final LR as a fraction of the peak
    decay_fraction: float = 0.2  # wsd only: share of steps spent in the final decay


@dataclass
class RegimeConfig:
    name: str = "custom"
    tokens_per_param: Optional[float] = None  # e.g. 20 or 140
    tokens: Optional[int] = None  # explicit budget; exclusive with tokens_per_param
    param_count: str = "non_embedding"  # non_embedding | total: which count TPP multiplies


@dataclass
class TrainerConfig:
    accelerator: str = "cpu"  # cpu | gpu | auto
    devices: int = 1
    num_nodes: int = 1
    strategy: str = "auto"  # auto | ddp | ddp_spawn | ddp_fork | fsdp
    precision: str = "32-true"  # 32-true | bf16-mixed | 16-mixed | bf16-true
    max_steps: Optional[int] = None  # caps the budget; the schedule is laid out over the capped length
    stop_after_steps: Optional[int] = None  # pause here (checkpoint, run KILLED) without changing the schedule
    accumulate_grad_batches: int = 1
    val_every_n_steps: int = 100
    log_every_n_steps: int = 10
    checkpoint_every_n_steps: int = 500
    compile: bool = False
    num_threads: Optional[int] = None  # torch intra-op threads; None leaves torch's default
    divergence_factor: float = 0.0  # >0: fail the run when train loss exceeds factor x its initial value
    # Tokens per optimizer step; when set, accumulate_grad_batches is derived from it (config/global_batch.py),
    # so a recipe keeps its global batch on 1 GPU or 64.
    global_batch_tokens: Optional[int] = None
    # Recompute each block's activations in the backward pass instead of keeping them (activation_checkpointing.py).
    activation_checkpointing: bool = False


@dataclass
class PlanConfig:
    """What a dry run of a GPU config assumes (lit_modules/plan/): which GPU, and how well it is used."""

    gpu: str = "h100"  # a100 | a100_40gb | h100 | h200 (lit_modules/plan/devices.py)
    # Model FLOPs utilization the ETA assumes: an assumption, to be replaced by the figure `make gpu-check` measures
    # (results/gpu_check/<gpu>.json); not changed without such a measurement.
    mfu: float = 0.4


@dataclass
class LoggerConfig:
    tracking_uri: Optional[str] = None  # None: $MLFLOW_TRACKING_URI, else sqlite:///<runs_dir>/mlflow.db
    experiment: str = "runs"
    run_name: Optional[str] = None


@dataclass
class DiagnosticsConfig:
    names: List[str] = field(default_factory=list)  # registered diagnostics, see lit_modules/diagnostics
    every_n_steps: int = 0  # 0: only at the start and the end of training
    batch_size: int = 4  # held-out sequences the diagnostics see (the same ones every time)


@dataclass
class AblationConfig:
    """Set by experiment presets: which arm of which ablation this run is (tags, grouping, skipping)."""

    name: str = ""
    arm: str = ""
    baseline: str = "baseline"
    claim: str = ""  # the claim key (techniques/<name>/report.yaml) the grid tests; "" = the preset name
    skip_finished: bool = True  # a cell whose config hash already FINISHED under the parent is not rerun


@dataclass
class Config:
    model: LlamaConfig = field(default_factory=LlamaConfig)
    init: InitConfig = field(default_factory=InitConfig)
    data: DataConfig = field(default_factory=DataConfig)
    tokenizer: TokenizerConfig = field(default_factory=TokenizerConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    schedule: ScheduleConfig = field(default_factory=ScheduleConfig)
    regime: RegimeConfig = field(default_factory=RegimeConfig)
    trainer: TrainerConfig = field(default_factory=TrainerConfig)
    logger: LoggerConfig = field(default_factory=LoggerConfig)
    # Technique plug-ins: name -> node with a `_target_`; validated by instantiating them.
    techniques: Dict[str, Any] = field(default_factory=dict)
    diagnostics: DiagnosticsConfig = field(default_factory=DiagnosticsConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    ablation: AblationConfig = field(default_factory=AblationConfig)
    plan: PlanConfig = field(default_factory=PlanConfig)  # dry-run assumptions only: not the run's identity
    seed: int = 0
    dry_run: bool = False
    resume: Optional[str] = None  # checkpoint path or MLflow run id
    # Start a NEW run from another run's final weights (fine-tuning): checkpoint path or MLflow run id.
    init_from: Optional[str] = None
    runs_dir: str = "runs"
    parent_run_id: Optional[str] = None  # set by sweep drivers: the MLflow parent of this run
    tags: Dict[str, str] = field(default_factory=dict)


def register_schema() -> None:
    """Make the schema available to `conf/config.yaml` as the first defaults entry, every technique group it
    does not list (config/technique_groups.py), its resolvers, and the ladder's rungs as model options
    (`model=ladder/<rung>`, config/ladder.py)."""
    from lit_modules.config import files
    from lit_modules.config.ladder import register_ladder
    from lit_modules.config.resolvers import register_resolvers
    from lit_modules.config.technique_groups import register_technique_groups

    ConfigStore.instance().store(name="config_schema", node=Config)
    register_technique_groups(files.CONF_DIR)
    register_resolvers()
    register_ladder()
