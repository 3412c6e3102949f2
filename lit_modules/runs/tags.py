"""The tag vocabulary: the MLflow tags (and the few metrics) one layer writes and another reads.

Training writes them (lit_modules.train, the sweep drivers, the fine-tune), and resume, evaluation, the
plasticity pipeline and analysis find runs by them, so each key is spelled here once.
"""

# Nesting (MLflow's own): a grid cell, a sweep trial or a fine-tune points at its parent run.
PARENT = "mlflow.parentRunId"

# Every training run.
SEED = "seed"
CONFIG_HASH = "config_hash"  # lit_modules.config.identity.identity_of + repro.config_hash: the run's identity
CHECKPOINT_DIR = "checkpoint_dir"  # where last.ckpt, its checksum, config.json and the owner lock live
END_REASON = "end_reason"
RESUMED = "resumed"
# A run written into a store from a committed export (sweeps.evidence.restore): the exported run it stands for,
# and its measured seconds per token (the export keeps that number, not the throughput logs it came from).
RESTORED_FROM = "restored.run_id"
RESTORED_SECONDS_PER_TOKEN = "restored.seconds_per_token"

# Ablation grids (sweeps.ablate): the parent has ABLATION_ROLE = PARENT_ROLE; cells carry name, arm, claim.
ABLATION_NAME = "ablation.name"
ABLATION_ROLE = "ablation.role"
ABLATION_ARM = "ablation.arm"
ABLATION_CLAIM = "ablation.claim"

# Optuna sweeps (sweeps.optuna_sweep).
SWEEP_STUDY = "sweep.study"
SWEEP_ROLE = "sweep.role"
SWEEP_TRIAL = "sweep.trial_number"

# Hydra multiruns (lit_modules.train -m): their parent has MULTIRUN_ROLE = PARENT_ROLE.
MULTIRUN_ROLE = "multirun.role"

PARENT_ROLE = "parent"  # the value of ABLATION_ROLE / SWEEP_ROLE on a grid's or study's parent run
TRIAL_ROLE = "trial"

# Fine-tunes (lit_modules.finetune): nested under their base run, linked to its grid by tags.
FINETUNE_BASE = "finetune.base_run_id"
FINETUNE_RECIPE = "finetune.recipe"
FINETUNE_RECIPE_HASH = "finetune.recipe_hash"
# The recipe's settings but its rate (recipe_family): a protocol that tunes the fine-tune's rate per arm has one
# family of fine-tunes with several rates, tabulated together.
FINETUNE_RECIPE_FAMILY = "finetune.recipe_family"
FINETUNE_TARGET_DATA = "finetune.target_data"
FINETUNE_GRID_PARENT = "finetune.grid_parent_run_id"
FINETUNE_EVAL_TASKS = "finetune.eval_tasks"  # the zero-shot tasks a fine-tuned model was scored on (evidence)

# Metrics the fine-tune's probe logs and the plasticity table and claims read.
TARGET_LOSS_BEFORE = "finetune/target_loss_before"  # the base weights on the target's held-out split
TARGET_LOSS_AFTER = "finetune/target_loss_after"  # the fine-tuned weights, measured the same way
PLASTICITY = "finetune/plasticity"  # before - after (nats/token; larger = adapted more)
BASE_VAL_LOSS = "finetune/base_pretrain_val_loss"  # the base run's final pre-training val/loss
# Top-1 next-token accuracy on the same held-out targets: a target-corpus accuracy well above its floor,
# unlike 4-choice zero-shot tasks at this scale. Its floor is the most frequent target token's share (what a
# model that always predicts that token scores), logged with it.
TARGET_ACC_BEFORE = "finetune/target_acc_before"
TARGET_ACC_AFTER = "finetune/target_acc_after"
TARGET_ACC_FLOOR = "finetune/target_acc_majority"
