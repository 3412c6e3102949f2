"""LoRA as a run: composed from `lora=<variant>`, refused with one sentence where it cannot be exact, trained
from a finished run's weights (init_from and the fine-tune driver) with the base frozen, and merged for
evaluation and for a rebuild of the finished run."""

from __future__ import annotations

import pytest
import torch

from lit_modules.build import build_model
from lit_modules.config.composition import compose_run_config
from lit_modules.config.errors import ConfigError
from lit_modules.config.validate import validated
from lit_modules.finetune import finetune
from lit_modules.config.finetune_recipe import load_recipe
from lit_modules.rebuild import trained_model
from lit_modules.runs.finished import finished_run
from lit_modules.export.plain import export_plain, load_merged
from lit_modules.optim.build import build_optimizer
from lit_modules.techniques.lora.adapter import adapters
from lit_modules.train import run
from tests.helpers.runs import mlflow_client, tiny_overrides


@pytest.mark.parametrize("option,variant,alpha", [("lora", "lora", 16.0), ("rslora", "rslora", 16.0), ("pissa", "pissa", 8.0)])
def test_each_option_composes_its_variant(tmp_path, option, variant, alpha):
    cfg = compose_run_config(tiny_overrides(tmp_path, **{"lora": option, "seed": "3", "init_from": "a_run"}))
    node = cfg.techniques.lora
    assert (node.variant, node.alpha, node.rank, node.seed) == (variant, alpha, 8, 3)
    [technique] = validated(cfg).techniques
    assert technique.tags()["lora.variant"] == variant


@pytest.mark.parametrize(
    "extra,words",
    [
        ({"techniques.lora.rank": "65"}, "rank=65 exceeds"),
        ({"techniques.lora.targets": "[q_proj,w_in]"}, "Unknown techniques.lora.targets w_in"),
        ({"techniques.lora.variant": "dora"}, "variant must be one of lora, rslora, pissa"),
        ({"pc_layer": "level4"}, "already parametrized"),
        ({"techniques.lora.targets": "[attn_gate]"}, "match no Linear"),
        ({"init_from": "null"}, "pass init_from=<run id or checkpoint>"),
        ({"model": "tiny_moe"}, "on a mixture of experts' FFN"),
        ({"techniques.lora.decay": "maybe"}, "decay must be true or false, not 'maybe'"),
    ],
)
def test_bad_lora_settings_are_refused_in_one_sentence(tmp_path, extra, words):
    cfg = compose_run_config(tiny_overrides(tmp_path, **{"lora": "lora", "init_from": "a_run", **extra}))
    with pytest.raises(ConfigError, match=words):
        validated(cfg)
    assert not (tmp_path / "mlflow.db").exists()


@pytest.mark.parametrize("decay", [None, "true"])
def test_adapter_factors_take_no_weight_decay_unless_asked(tmp_path, decay):
    """make train keeps optim.weight_decay=0.1; the adapters (PiSSA's: the principal part of the weights) are
    out of it by default, as the fine-tune recipes train, and under it with techniques.lora.decay=true."""
    extra = {"lora": "pissa", "init_from": "a_run", **({"techniques.lora.decay": decay} if decay else {})}
    checked = validated(compose_run_config(tiny_overrides(tmp_path, **extra)))
    assert checked.config.optim.weight_decay == 0.1
    model, _ = build_model(checked.config, checked.techniques)
    optimizer = build_optimizer(model, checked.config.optim, [t.edit_param_groups for t in checked.techniques])
    groups = [g for g in optimizer.param_groups if g["family"].startswith("lora_")]
    assert sum(len(g["params"]) for g in groups) == 2 * len(adapters(model)) == 28
    assert {g["weight_decay"] for g in groups} == ({0.1} if decay else {0.0})
    assert all(g["name"].endswith(".no_decay") != bool(decay) for g in groups)
    tags = checked.techniques[0].tags()
    assert (tags["lora.decay"], tags["fidelity.lora.decay"]) == ("true" if decay else "false", "assumed")


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    runs_dir = tmp_path_factory.mktemp("lora") / "runs"
    result = run(compose_run_config(tiny_overrides(runs_dir, steps=10, seed="4")))
    assert result.status == "FINISHED"
    return runs_dir, result.run_id


def _model(runs_dir, run_id, for_inference=False):
    return trained_model(finished_run(mlflow_client(runs_dir), run_id).checkpoint, for_inference=for_inference)


def test_pissa_on_a_finished_run_trains_only_the_adapters_and_rebuilds_merged(base):
    runs_dir, base_id = base
    result = run(compose_run_config(tiny_overrides(runs_dir, steps=10, lora="pissa", init_from=base_id,
                                                   **{"techniques.lora.rank": "4"})))
    assert result.status == "FINISHED"
    base_model, trained = _model(runs_dir, base_id), _model(runs_dir, result.run_id)
    # Frozen: embeddings, norms and head are the base's; only the adapter factors moved.
    for name in ("tok_emb.weight", "lm_head.weight", "final_norm.weight", "layers.1.mlp_norm.weight"):
        assert torch.equal(trained.state_dict()[name], base_model.state_dict()[name])
    assert len(adapters(trained)) == 14
    merged = _model(runs_dir, result.run_id, for_inference=True)
    x = torch.randint(0, trained.cfg.vocab_size, (2, 16), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        torch.testing.assert_close(merged(x), trained(x), rtol=0, atol=1e-5)
        assert not torch.allclose(merged(x), base_model(x), atol=1e-4)  # the fine-tune changed the function
    assert not adapters(merged)
    # Export: a plain Llama with the base's keys, the same logits.
    checkpoint = finished_run(mlflow_client(runs_dir), result.run_id).checkpoint.path
    exported = load_merged(export_plain(str(checkpoint), runs_dir / "merged.pt"))
    assert set(exported.state_dict()) == set(base_model.state_dict())
    with torch.no_grad():
        torch.testing.assert_close(exported(x), trained(x), rtol=0, atol=1e-5)


def test_the_fine_tune_driver_adds_lora_to_the_base_config(base):
    runs_dir, base_id = base
    recipe = load_recipe("python_docs", {"steps": "4", "val_every_n_steps": "2"})
    result = finetune(base_id, recipe, runs_dir=str(runs_dir), overrides=["lora=rslora", "techniques.lora.rank=2"],
                      client=mlflow_client(runs_dir))
    assert result.status == "FINISHED"
    tags = mlflow_client(runs_dir).get_run(result.run_id).data.tags
    assert (tags["lora.variant"], tags["lora.rank"], tags["finetune.base_run_id"]) == ("rslora", "2", base_id)
    trained = _model(runs_dir, result.run_id)
    assert {a.rank for _, a in adapters(trained)} == {2}


def test_the_fine_tune_driver_refuses_an_unknown_technique_option():
    from lit_modules.finetune import check_run_overrides

    with pytest.raises(ConfigError, match="no lora 'dora'"):
        check_run_overrides(["lora=dora"])
    with pytest.raises(ConfigError, match="selects a config group, but a fine-tune keeps its base run's config"):
        check_run_overrides(["model=small"])  # other groups stay refused
    check_run_overrides(["lora=pissa", "wisca=lora_tensor", "techniques.lora.rank=4"])
