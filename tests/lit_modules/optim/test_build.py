"""Parameter groups, weight-decay policies, schedules and the composite (Muon + AdamW) optimizer."""

import math

import pytest
import torch

from lit_modules.model import Llama, LlamaConfig
from lit_modules.optim.build import build_optimizer, build_schedule
from lit_modules.optim.composite import CompositeOptimizer
from lit_modules.optim.param_groups import build_group_specs, family_of
from lit_modules.optim.schedules import warmup_cosine, warmup_stable_decay
from lit_modules.config.schema import OptimConfig, ScheduleConfig


def model(**kw) -> Llama:
    torch.manual_seed(0)
    return Llama(LlamaConfig(vocab_size=50, d_model=32, n_layers=2, n_heads=4, n_kv_heads=2, d_ff=64, **kw))


@pytest.mark.parametrize("kw", [{}, {"tie_embeddings": True}, {"attn_gate": "headwise"}])
@pytest.mark.parametrize("policy", ["none", "norms_biases", "norms_biases_embeddings"])
def test_every_trainable_parameter_is_in_exactly_one_group(kw, policy) -> None:
    m = model(**kw)
    specs = build_group_specs(m, policy)
    seen = [id(p) for s in specs for p in s.params]
    assert len(seen) == len(set(seen)) == len({id(p) for p in m.parameters()})


def test_families_by_name() -> None:
    assert family_of("tok_emb.weight") == "emb"
    assert family_of("layers.0.attn.q_proj.weight") == "qk"
    assert family_of("layers.0.attn.k_proj.weight") == "qk"
    assert family_of("layers.0.attn.v_proj.weight") == "vo"
    assert family_of("layers.0.attn.o_proj.weight") == "vo"
    assert family_of("layers.1.attn.gate_proj.weight") == "attn_gate"
    assert family_of("layers.1.mlp.gate_proj.weight") == "mlp"
    assert family_of("layers.1.mlp_norm.weight") == "norm"
    assert family_of("final_norm.weight") == "norm"
    assert family_of("lm_head.weight") == "head"
    assert family_of("layers.0.mlp.up_proj.parametrizations.weight.original") == "mlp"


def decayed_names(policy: str) -> set[str]:
    m = model()
    return {n for s in build_group_specs(m, policy) if s.decayed for n in s.param_names}


def test_weight_decay_exclusion_policies_decay_exactly_the_intended_parameters() -> None:
    names = {n for n, _ in model().named_parameters()}
    norms = {n for n in names if "norm" in n}
    assert decayed_names("none") == names
    assert decayed_names("norms_biases") == names - norms
    assert decayed_names("norms_biases_embeddings") == names - norms - {"tok_emb.weight"}


def test_optimizer_groups_carry_decay_and_scale() -> None:
    opt = build_optimizer(model(), OptimConfig(weight_decay=0.3, wd_exclude="norms_biases"))
    by_name = {g["name"]: g for g in opt.param_groups}
    assert by_name["mlp"]["weight_decay"] == 0.3
    assert by_name["norm.no_decay"]["weight_decay"] == 0.0
    assert all(g["lr_scale"] == 1.0 for g in opt.param_groups)


def test_muon_gets_hidden_matrices_and_adamw_the_rest() -> None:
    opt = build_optimizer(model(), OptimConfig(name="muon"))
    assert isinstance(opt, CompositeOptimizer)
    muon, adam = opt.optimizers
    assert isinstance(muon, torch.optim.Muon) and isinstance(adam, torch.optim.AdamW)
    assert {g["family"] for g in muon.param_groups} == {"qk", "vo", "mlp"}
    assert {g["family"] for g in adam.param_groups} == {"emb", "norm", "head"}
    assert all(p.ndim == 2 for g in muon.param_groups for p in g["params"])


def test_composite_optimizer_steps_and_round_trips_its_state() -> None:
    m = model()
    opt = build_optimizer(m, OptimConfig(name="muon"))
    x = torch.randint(0, 50, (2, 8))
    m(x).logsumexp(-1).mean().backward()
    opt.step()
    state = opt.state_dict()
    twin = model()
    twin.load_state_dict(m.state_dict())
    opt2 = build_optimizer(twin, OptimConfig(name="muon"))
    opt2.load_state_dict(state)
    for a, b in zip(opt.optimizers, opt2.optimizers):
        sa, sb = a.state_dict()["state"], b.state_dict()["state"]
        assert sa.keys() == sb.keys()
        for k in sa:
            for key, value in sa[k].items():
                assert torch.equal(torch.as_tensor(value), torch.as_tensor(sb[k][key]))


def test_cosine_schedule_shape() -> None:
    total, warmup, floor = 100, 10, 0.1
    assert warmup_cosine(0, total, warmup, floor) == pytest.approx(0.1)
    assert warmup_cosine(9, total, warmup, floor) == pytest.approx(1.0)
    assert warmup_cosine(10, total, warmup, floor) == pytest.approx(1.0)
    assert warmup_cosine(55, total, warmup, floor) == pytest.approx(floor + (1 - floor) * 0.5)
    assert warmup_cosine(100, total, warmup, floor) == pytest.approx(floor)


def test_wsd_schedule_is_flat_then_decays_linearly() -> None:
    total, warmup = 100, 10
    assert warmup_stable_decay(50, total, warmup, 0.0, 0.2) == 1.0
    assert warmup_stable_decay(79, total, warmup, 0.0, 0.2) == 1.0
    assert warmup_stable_decay(90, total, warmup, 0.0, 0.2) == pytest.approx(0.5)
    assert warmup_stable_decay(100, total, warmup, 0.0, 0.2) == pytest.approx(0.0)


def test_group_lr_scale_is_applied_every_step() -> None:
    m = model()
    opt = build_optimizer(m, OptimConfig(lr=1.0))
    sched = build_schedule(opt, ScheduleConfig(name="constant", warmup_fraction=0.0), steps=10, warmup=0)
    mlp = next(g for g in opt.param_groups if g["name"] == "mlp")
    mlp["lr_scale"] = 0.25
    opt.step()
    sched.step()
    assert mlp["lr"] == pytest.approx(0.25)
    assert next(g for g in opt.param_groups if g["name"] == "qk")["lr"] == pytest.approx(1.0)
    assert math.isclose(sched.get_last_lr()[0], 1.0)


@pytest.mark.parametrize("name", ["adam_mini", "nadam", "lamb"])
def test_each_optimizer_trains_a_run_and_its_state_resumes(tmp_path, name) -> None:
    from lit_modules.config.composition import compose_run_config
    from lit_modules.train import run
    from tests.helpers.runs import tiny_overrides

    result = run(compose_run_config(tiny_overrides(tmp_path, steps=6, optim=name, **{"trainer.stop_after_steps": "3"})))
    assert result.status == "KILLED"
    resumed = run(compose_run_config(tiny_overrides(tmp_path, steps=6, optim=name, resume=result.run_id)))
    straight = run(compose_run_config(tiny_overrides(tmp_path / "straight", steps=6, optim=name)))
    assert resumed.status == straight.status == "FINISHED"
    assert resumed.metrics["val/loss"] == straight.metrics["val/loss"]  # exact resume with the optimizer's state


def test_adamw_is_fused_only_where_every_parameter_is_on_cuda() -> None:
    """On the CPU torch's default AdamW stays (the golden histories); CUDA parameters get the fused kernels."""
    from types import SimpleNamespace

    from lit_modules.optim.adamw import fused_on_cuda

    cpu = [{"params": [torch.nn.Parameter(torch.zeros(2))]}]
    assert fused_on_cuda(cpu) == {} and fused_on_cuda([]) == {}
    cuda = SimpleNamespace(is_cuda=True, is_floating_point=lambda: True)  # a CUDA parameter's two answers
    assert fused_on_cuda([{"params": [cuda, cuda]}]) == {"fused": True}
    assert fused_on_cuda([{"params": [cuda]}, *cpu]) == {}  # one CPU tensor and the fused step would refuse
    assert not build_optimizer(model(), OptimConfig()).defaults.get("fused")
    muon = build_optimizer(model(), OptimConfig(name="muon"))
    assert not any(o.defaults.get("fused") for o in muon.optimizers if isinstance(o, torch.optim.AdamW))
