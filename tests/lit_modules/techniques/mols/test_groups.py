"""Every trainable parameter lands in exactly one MoLS group; the callback applies multipliers to the
right torch groups (AdamW only under Muon), refreshes the current LR and handles weight decay."""

import itertools
from types import SimpleNamespace

import pytest
import torch

from lit_modules.model import Llama, LlamaConfig
from lit_modules.optim.build import build_optimizer
from lit_modules.optim.param_groups import build_group_specs
from lit_modules.optim.schedules import GroupScaledSchedule
from lit_modules.techniques.mols import MoLS
from lit_modules.techniques.mols.groups import FIXED, group_of, scaled_groups

CASES = list(
    itertools.product(
        ["none", "elementwise", "headwise"],
        [False, True],
        ["exclude", "own_group"],
        ["own", "qk", "vo", "mlp", "exclude"],
    )
)


def tiny_model(attn_gate: str = "none", tie: bool = False) -> Llama:
    torch.manual_seed(0)
    cfg = LlamaConfig(
        vocab_size=50,
        d_model=16,
        n_layers=2,
        n_heads=4,
        n_kv_heads=2,
        d_ff=24,
        max_seq_len=8,
        attn_gate=attn_gate,
        tie_embeddings=tie,
    )
    return Llama(cfg)


@pytest.mark.parametrize("attn_gate,tie,norm_policy,gate_group", CASES)
def test_every_trainable_parameter_is_in_exactly_one_group(attn_gate, tie, norm_policy, gate_group):
    model = tiny_model(attn_gate, tie)
    technique = MoLS(norm_policy=norm_policy, attn_gate_group=gate_group)
    seen: dict[int, str] = {}
    for spec in build_group_specs(model, "norms_biases"):
        group = technique.family_to_group(spec.family)
        assert group in set(technique.groups()) | {FIXED}
        for p in spec.params:
            assert id(p) not in seen, "a parameter in two groups"
            seen[id(p)] = group
    trainable = {id(p) for p in model.parameters() if p.requires_grad}
    assert set(seen) == trainable
    names = {n: seen[id(p)] for n, p in model.named_parameters()}
    assert names["tok_emb.weight"] == "emb"
    assert names["layers.0.attn.q_proj.weight"] == "qk" and names["layers.1.attn.k_proj.weight"] == "qk"
    assert names["layers.0.attn.o_proj.weight"] == "vo" and names["layers.0.mlp.down_proj.weight"] == "mlp"
    assert names["layers.0.attn_norm.weight"] == ("norm" if norm_policy == "own_group" else FIXED)
    if tie:
        assert model.lm_head.weight is model.tok_emb.weight and "head" not in set(seen.values())
    else:
        assert names["lm_head.weight"] == "head"
    if attn_gate != "none":
        expected = {"own": "attn_gate", "exclude": FIXED}.get(gate_group, gate_group)
        assert names["layers.0.attn.gate_proj.weight"] == expected


def test_unknown_families_stay_fixed():
    assert group_of("other") == FIXED


@pytest.mark.parametrize("family", ["router", "experts", "lora_qk", "lora_vo", "lora_attn_gate", "lora_mlp"])
def test_the_variants_families_are_groups_of_their_own_scaled_only_when_named(family):
    assert group_of(family) == family
    assert scaled_groups(["qk", family], "exclude", "vo") == ["qk", family]
    assert family not in scaled_groups(["qk", "vo"], "exclude", "vo")


def test_manual_multipliers_reach_adapter_groups():
    from lit_modules.techniques.lora import Lora

    model = Lora(rank=2).transform_loaded_model(tiny_model())
    optimizer = build_optimizer(model, SimpleNamespace(name="adamw", lr=1e-3, betas=[0.9, 0.95], eps=1e-8,
                                                       weight_decay=0.1, wd_exclude="none"))
    callback = MoLS(mode="manual", manual_scales={"lora_qk": 2.0, "lora_mlp": 0.5}).callback()
    callback.on_train_batch_start(fake_trainer(optimizer, 0), None, None, 0)
    assert {g["family"]: g["lr_scale"] for g in optimizer.param_groups} == {"lora_qk": 2.0, "lora_vo": 1.0,
                                                                              "lora_mlp": 0.5}


# --------------------------------------------------------------------- applying multipliers


def fake_trainer(optimizer, step: int) -> SimpleNamespace:
    return SimpleNamespace(
        optimizers=[optimizer],
        global_step=step,
        accumulate_grad_batches=1,
        logger=None,
        max_steps=100,
        log_every_n_steps=10,
    )


def apply_manual(optim_name: str, scales: dict, decay_follows_lr: bool, steps: int = 3):
    model = tiny_model()
    optim_cfg = SimpleNamespace(
        name=optim_name,
        lr=1e-3,
        muon_lr=0.02,
        muon_momentum=0.95,
        muon_adjust_lr="match_rms_adamw",
        betas=[0.9, 0.95],
        eps=1e-8,
        weight_decay=0.1,
        wd_exclude="norms_biases",
    )
    optimizer = build_optimizer(model, optim_cfg)
    schedule = GroupScaledSchedule(optimizer, lambda s: (s + 1) / 10)  # warmup-like, so lr changes every step
    callback = MoLS(mode="manual", manual_scales=scales, decay_follows_lr=decay_follows_lr).callback()
    for step in range(steps):
        callback.on_train_batch_start(fake_trainer(optimizer, step), None, None, 0)
        lrs = {g["name"]: g["lr"] for g in optimizer.param_groups}
        optimizer.step()
        schedule.step()
    return optimizer, lrs, callback


def test_manual_multipliers_reach_lr_scale_and_the_current_lr_under_adamw():
    scales = {"emb": 2.0, "qk": 0.5, "vo": 1.0, "mlp": 3.0, "head": 0.25}
    optimizer, lrs, _ = apply_manual("adamw", scales, decay_follows_lr=True)
    for g in optimizer.param_groups:
        expected = scales.get(g["family"], 1.0)
        assert g["lr_scale"] == expected
        assert lrs[g["name"]] == pytest.approx(1e-3 * (2 + 1) / 10 * expected)  # step 2: schedule(2) = 0.3
        assert g["weight_decay"] == (0.1 if g["name"] == g["family"] else 0.0)


def test_weight_decay_can_keep_lr_times_wd_unscaled():
    scales = {"emb": 2.0, "qk": 0.5, "vo": 1.0, "mlp": 4.0, "head": 1.0}
    optimizer, _, _ = apply_manual("adamw", scales, decay_follows_lr=False)
    for g in optimizer.param_groups:
        base = 0.1 if g["name"] == g["family"] else 0.0
        assert g["weight_decay"] == pytest.approx(base / scales.get(g["family"], 1.0))
        assert g["lr_scale"] * g["weight_decay"] == pytest.approx(base)


def test_under_muon_only_adamw_groups_are_scaled():
    scales = {"emb": 2.0, "qk": 0.5, "vo": 3.0, "mlp": 4.0, "head": 0.25}
    optimizer, _, _ = apply_manual("muon", scales, decay_follows_lr=True)
    muon, adam = optimizer.optimizers
    assert isinstance(muon, torch.optim.Muon)
    assert {g["family"] for g in muon.param_groups} >= {"qk", "vo", "mlp"}
    assert all(g["lr_scale"] == 1.0 for g in muon.param_groups)
    scaled = {g["family"]: g["lr_scale"] for g in adam.param_groups}
    assert scaled["emb"] == 2.0 and scaled["head"] == 0.25 and scaled["norm"] == 1.0


@pytest.mark.parametrize("optim_name", ["adam_mini", "nadam", "lamb"])
def test_manual_multipliers_scale_the_blocks_of_every_adam_family_optimizer(optim_name):
    # Adam-mini's per-block rates are its group's lr: MoLS scales them through lr_scale like AdamW's.
    scales = {"emb": 2.0, "qk": 0.5, "vo": 1.0, "mlp": 3.0, "head": 0.25}
    optimizer, lrs, _ = apply_manual(optim_name, scales, decay_follows_lr=True)
    for g in optimizer.param_groups:
        assert g["lr_scale"] == scales.get(g["family"], 1.0)
        assert lrs[g["name"]] == pytest.approx(1e-3 * 0.3 * scales.get(g["family"], 1.0))


def test_callback_state_round_trips():
    _, _, callback = apply_manual("adamw", {"emb": 2.0, "qk": 0.5}, decay_follows_lr=False)
    restored = MoLS().callback()
    restored.load_state_dict(callback.state_dict())
    assert restored.state_dict() == callback.state_dict()
    assert restored.alpha == {"emb": 2.0, "qk": 0.5} and restored.estimated
