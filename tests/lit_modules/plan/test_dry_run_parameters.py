"""The dry run counts every parameter the run's model will have, the ones its techniques add included."""

import pytest

from lit_modules.build import build_model, build_techniques
from lit_modules.config.budget import compute_budget
from lit_modules.config.composition import compose_run_config
from lit_modules.config.validate import validate
from lit_modules.plan.dry_run import dry_run_report, technique_parameters


def _cfg(overrides):
    return validate(compose_run_config(overrides))


@pytest.mark.parametrize("overrides", [["lora=lora", "techniques.lora.from_scratch=true"], ["pc_layer=level4"]])
def test_the_added_parameters_are_those_the_built_model_has(overrides):
    cfg = _cfg(overrides)
    budget = compute_budget(cfg)
    model, _ = build_model(cfg, build_techniques(cfg))
    built = sum(p.numel() for p in model.parameters())
    added = technique_parameters(cfg, budget)
    assert added > 0 and budget.params_total + added == built
    text, _ = dry_run_report(cfg, budget)
    assert f"parameters   {built:,} with the techniques' own (+{added:,} that they add" in text


def test_no_technique_no_line():
    cfg = _cfg([])
    assert technique_parameters(cfg, compute_budget(cfg)) == 0
    assert "with the techniques' own" not in dry_run_report(cfg, compute_budget(cfg))[0]
