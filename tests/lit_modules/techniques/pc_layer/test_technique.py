"""PC layer technique: config checks, targets, optimizer groups (AdamW and Muon), refresh schedule,
merge for inference, and the analytic FLOPs overhead."""

import copy
from types import SimpleNamespace

import pytest
import torch
from omegaconf import OmegaConf

from lit_modules.model import InitConfig, Llama, LlamaConfig, init_weights
from lit_modules.optim.build import build_optimizer
from lit_modules.optim.param_groups import build_group_specs, family_of
from lit_modules.techniques.pc_layer import refresh as pc_refresh
from lit_modules.techniques.pc_layer.cost import pc_step_flops
from lit_modules.techniques.pc_layer import PCLayer
from lit_modules.techniques.pc_layer.technique import DEFAULT_TARGETS, is_pc_gamma
from lit_modules.techniques.pc_layer.merge import merge_pc
from lit_modules.techniques.pc_layer.parametrization import pc_modules, pc_of, refresh_all
from lit_modules.techniques.pc_layer.refresh import PowerIterationRefresh

CFG = {
    "vocab_size": 61,
    "d_model": 32,
    "n_layers": 2,
    "n_heads": 4,
    "n_kv_heads": 2,
    "d_ff": 96,
    "max_seq_len": 16,
}
ALL_SEVEN = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def _model(technique: PCLayer | None = None, seed: int = 0, **cfg) -> Llama:
    model = Llama(LlamaConfig(**{**CFG, **cfg}))
    init_weights(model, InitConfig(), generator=torch.Generator().manual_seed(seed))
    return technique.transform_model(model) if technique is not None else model


def _optim_cfg(name: str):
    return OmegaConf.create(
        {
            "name": name,
            "lr": 3e-3,
            "betas": [0.9, 0.95],
            "eps": 1e-8,
            "weight_decay": 0.1,
            "wd_exclude": "none",
            "grad_clip": 1.0,
            "muon_lr": 0.02,
            "muon_momentum": 0.95,
            "muon_adjust_lr": "match_rms_adamw",
        }
    )


# --- config checks --------------------------------------------------------------------------------


def test_defaults_are_the_released_ones():
    t = PCLayer()
    s = t.settings
    assert (s.level, s.recover_norm, s.learnable_gamma, s.power_iters, s.eps) == (4, True, True, 10, 1e-7)
    assert s.targets == ["gate_proj", "up_proj", "down_proj", "o_proj"] == list(DEFAULT_TARGETS)
    assert t.problems() == []


@pytest.mark.parametrize(
    "kwargs,fragment",
    [
        ({"level": 5}, "level must be one of"),
        ({"level": -1}, "level must be one of"),
        ({"targets": ["o_proj", "lm_head"]}, "Unknown techniques.pc_layer.targets lm_head"),
        ({"targets": []}, "non-empty list"),
        ({"targets": ["o_proj", "o_proj"]}, "twice"),
        ({"power_iters": 0}, "power_iters"),
        ({"eps": 0.0}, "eps must be a positive"),
        ({"recover_norm": "yes"}, "recover_norm must be true or false"),
    ],
)
def test_problems_are_one_sentence_each(kwargs, fragment):
    problems = PCLayer(**kwargs).problems()
    assert len(problems) == 1 and fragment in problems[0]
    assert problems[0].endswith(".")


def test_fsdp_is_refused():
    cfg = OmegaConf.create({"trainer": {"strategy": "fsdp"}})
    assert any("FSDP" in p for p in PCLayer().problems(cfg))


# --- model transform ------------------------------------------------------------------------------


def test_default_targets_are_ffn_and_o_proj_only():
    model = _model(PCLayer())
    names = sorted(n for n, _, _ in pc_modules(model))
    expected = sorted(
        f"layers.{i}.{p}"
        for i in range(2)
        for p in ("attn.o_proj", "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj")
    )
    assert names == expected


def test_attention_output_gate_is_not_mistaken_for_the_mlp_gate():
    model = _model(PCLayer(targets=["gate_proj"]), attn_gate="elementwise")
    assert sorted(n for n, _, _ in pc_modules(model)) == ["layers.0.mlp.gate_proj", "layers.1.mlp.gate_proj"]


def test_transform_keeps_the_initialized_raw_weights_and_is_deterministic():
    plain = _model()
    a, b = _model(PCLayer(targets=ALL_SEVEN)), _model(PCLayer(targets=ALL_SEVEN))
    raw = {n.replace(".parametrizations.weight.original", ".weight"): p for n, p in a.named_parameters()}
    for name, p in plain.named_parameters():
        assert torch.equal(raw[name], p)
    assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))


def test_parameter_names_keep_their_family():
    model = _model(PCLayer(targets=ALL_SEVEN))
    families = {n: family_of(n) for n, _ in model.named_parameters()}
    assert families["layers.0.mlp.up_proj.parametrizations.weight.original"] == "mlp"
    assert families["layers.0.mlp.up_proj.parametrizations.weight.0.gamma"] == "mlp"
    assert families["layers.1.attn.o_proj.parametrizations.weight.0.gamma"] == "vo"
    assert families["layers.1.attn.q_proj.parametrizations.weight.0.gamma"] == "qk"
    assert "other" not in families.values()


# --- optimizer groups -----------------------------------------------------------------------------


def test_gammas_get_groups_of_their_own():
    model = _model(PCLayer())
    specs = build_group_specs(model, "none")
    PCLayer().edit_param_groups(specs)
    by_name = {s.name: s for s in specs}
    assert set(by_name) >= {"mlp", "mlp.pc_gamma", "vo", "vo.pc_gamma"}
    assert all(p.ndim == 2 for p in by_name["mlp"].params + by_name["vo"].params)
    assert all(
        is_pc_gamma(n) for n in by_name["mlp.pc_gamma"].param_names + by_name["vo.pc_gamma"].param_names
    )
    assert by_name["mlp.pc_gamma"].family == "mlp" and by_name["mlp.pc_gamma"].decayed  # wd on all (release)
    total = sum(len(s.params) for s in specs)
    assert total == len(list(model.parameters()))


def test_adamw_gets_every_parameter_once():
    model = _model(PCLayer())
    opt = build_optimizer(model, _optim_cfg("adamw"), group_editors=[PCLayer().edit_param_groups])
    seen = [id(p) for g in opt.param_groups for p in g["params"]]
    assert sorted(seen) == sorted(id(p) for p in model.parameters())


def test_muon_updates_the_raw_weights_and_adamw_the_gammas():
    model = _model(PCLayer(level=2))
    opt = build_optimizer(model, _optim_cfg("muon"), group_editors=[PCLayer(level=2).edit_param_groups])
    muon, adam = opt.optimizers
    assert isinstance(muon, torch.optim.Muon)
    muon_ids = {id(p) for g in muon.param_groups for p in g["params"]}
    adam_ids = {id(p) for g in adam.param_groups for p in g["params"]}
    for name, p in model.named_parameters():
        hidden_matrix = p.ndim == 2 and family_of(name) in ("qk", "vo", "mlp")
        if hidden_matrix:
            assert id(p) in muon_ids, name  # including every `...parametrizations.weight.original`
        else:
            assert id(p) in adam_ids, name
    raw = [n for n, _ in model.named_parameters() if n.endswith(".original")]
    assert len(raw) == 8
    # One Muon step runs on the raw 2-D weights.
    x = torch.randint(0, CFG["vocab_size"], (2, 8))
    model(x).sum().backward()
    opt.step()


# --- refresh schedule -----------------------------------------------------------------------------


def test_refresh_runs_once_per_optimizer_step_and_not_on_resume(monkeypatch):
    calls = []
    monkeypatch.setattr(
        pc_refresh, "refresh_all",
        lambda model, iters, only_invalid=False, repair=True: calls.append((only_invalid, repair)),
    )
    cb = PowerIterationRefresh(power_iters=10)
    trainer = SimpleNamespace(global_step=0)
    cb.on_train_start(trainer, None)
    assert calls == [(False, True)]  # full refresh before training, invalid buffers repaired first
    # Gradient accumulation 3: global_step moves on every third micro-batch only.
    for micro in range(9):
        trainer.global_step = (micro + 1) // 3
        cb.on_train_batch_end(trainer, None, None, None, micro)
    assert calls == [(False, True)] + [(False, False)] * 3  # in the step: no validity screen (no host sync)
    resumed = PowerIterationRefresh()
    calls.clear()
    resumed.on_train_start(SimpleNamespace(global_step=7), None)
    assert calls == [(True, True)]  # only repairs invalid buffers; the checkpoint's u, v are kept


def test_refresh_all_converges_every_layer():
    model = _model(PCLayer(targets=ALL_SEVEN))
    refresh_all(model, 200)
    for name, module, pc in pc_modules(model):
        true_top = torch.linalg.svdvals(module.parametrizations.weight.original.detach().double())[0].item()
        assert pc.sigma(module.parametrizations.weight.original).item() == pytest.approx(
            true_top, rel=1e-3
        ), name


# --- merge ----------------------------------------------------------------------------------------


def _trained_like(level=4, targets=ALL_SEVEN):
    model = _model(PCLayer(level=level, targets=targets))
    refresh_all(model, 10)
    g = torch.Generator().manual_seed(5)
    with torch.no_grad():
        for _, _, pc in pc_modules(model):
            pc.gamma.fill_(0.5 + torch.rand(1, generator=g).item())  # gammas away from 1 matter
    return model.eval()


@pytest.mark.parametrize("level", [0, 2, 4])
def test_merged_and_unmerged_logits_agree(level):
    model = _trained_like(level)
    x = torch.randint(0, CFG["vocab_size"], (3, 16), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        before = model(x)
    merged = merge_pc(copy.deepcopy(model), refresh_iters=0)
    assert pc_modules(merged) == []
    with torch.no_grad():
        torch.testing.assert_close(merged(x), before, rtol=1e-5, atol=1e-5)


def test_merge_refreshes_first_and_includes_gamma():
    model = _trained_like(4)
    x = torch.randint(0, CFG["vocab_size"], (2, 16), generator=torch.Generator().manual_seed(1))
    reference = copy.deepcopy(model)
    refresh_all(reference, 100)  # what merge_pc does by default before merging
    merged = merge_pc(copy.deepcopy(model))
    with torch.no_grad():
        torch.testing.assert_close(merged(x), reference(x), rtol=1e-5, atol=1e-5)
        pc = pc_of(reference.layers[0].mlp.up_proj)
        no_gamma = pc.preconditioned(reference.layers[0].mlp.up_proj.parametrizations.weight.original)
        torch.testing.assert_close(
            merged.layers[0].mlp.up_proj.weight, no_gamma * pc.gamma, rtol=1e-6, atol=1e-7
        )
        assert abs(pc.gamma.item() - 1) > 0.01


def test_merging_a_deep_copy_leaves_the_original_working():
    model = _trained_like(4)
    x = torch.randint(0, CFG["vocab_size"], (2, 16))
    with torch.no_grad():
        before = model(x)
        merge_pc(copy.deepcopy(model), refresh_iters=0)
        torch.testing.assert_close(model(x), before, rtol=0, atol=0)
    assert len(pc_modules(model)) == 14


def test_prepare_for_inference_merges_after_a_refresh():
    model = _trained_like(4, targets=list(DEFAULT_TARGETS))
    reference = copy.deepcopy(model)
    refresh_all(reference, 100)
    prepared = PCLayer().prepare_for_inference(copy.deepcopy(model))
    assert pc_modules(prepared) == []
    x = torch.randint(0, CFG["vocab_size"], (2, 16))
    with torch.no_grad():
        torch.testing.assert_close(prepared(x), reference(x), rtol=1e-5, atol=1e-5)


def test_merged_state_dict_is_a_plain_llama():
    model = _trained_like(2, targets=list(DEFAULT_TARGETS))
    merged = merge_pc(copy.deepcopy(model))
    plain = Llama(LlamaConfig(**CFG))
    plain.load_state_dict(merged.state_dict())  # strict: same keys as the baseline, no u/v/gamma
    assert set(plain.state_dict()) == set(merged.state_dict())
    x = torch.randint(0, CFG["vocab_size"], (2, 16))
    with torch.no_grad():
        torch.testing.assert_close(plain(x), merged(x), rtol=0, atol=0)
    assert type(merged.layers[0].mlp.up_proj) is torch.nn.Linear  # the parametrized class is gone


# --- FLOPs ----------------------------------------------------------------------------------------


PAPER_271M = LlamaConfig(vocab_size=32000, d_model=1024, n_layers=16, n_heads=16, d_ff=2816, max_seq_len=8192)
PAPER_1B = LlamaConfig(vocab_size=32000, d_model=2048, n_layers=18, n_heads=16, d_ff=5632, max_seq_len=8192)


@pytest.mark.parametrize(
    "cfg,level,tokens,percent",
    [(PAPER_271M, 4, 8 * 8192, 3.4), (PAPER_1B, 4, 4 * 8192, 14.5), (PAPER_1B, 2, 4 * 8192, 10.7)],
)
def test_overhead_matches_papers_estimates(cfg, level, tokens, percent):
    flops = pc_step_flops(cfg, level, tokens)
    assert round(100 * flops["overhead"], 1) == percent


def test_overhead_by_hand_for_one_matrix():
    cfg = LlamaConfig(vocab_size=10, d_model=4, n_layers=1, n_heads=1, d_ff=8, max_seq_len=8)
    f = pc_step_flops(cfg, level=4, tokens_per_microbatch=1, targets=["up_proj"], power_iters=1)
    # up_proj 8 x 4: forward 4*8*16 + 2*3*64 = 896; x3 = 2688; power iteration 1 x 4*32 = 128.
    assert f["pc_per_microbatch"] == 2688 and f["power_iteration_per_step"] == 128
    assert pc_step_flops(cfg, level=0, tokens_per_microbatch=1)["pc_per_microbatch"] == 0


def test_bf16_autocast_forward_and_backward():
    model = _model(PCLayer(level=4))
    refresh_all(model, 10)
    x = torch.randint(0, CFG["vocab_size"], (2, 16))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        logits = model(x)
    logits.float().logsumexp(-1).mean().backward()
    assert logits.dtype == torch.bfloat16
    pc = pc_of(model.layers[0].mlp.up_proj)
    assert pc.u.dtype == torch.float32  # buffers stay fp32 under autocast
    assert (
        pc.gamma.grad is not None
        and model.layers[0].mlp.up_proj.parametrizations.weight.original.grad is not None
    )
