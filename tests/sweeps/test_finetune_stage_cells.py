"""Which finished cells a fine-tune stage fine-tunes: the test cells of the stages this call runs, never a rate
tuning cell, a fine-tune tuning base, or another stage's test cell (that stage's call fine-tunes it, at the rate
its arm got there)."""

from types import SimpleNamespace

from lit_modules.runs import tags
from sweeps import finetune_stage
from sweeps.evidence.protocol_file import load_spec


def _run(arm: str) -> SimpleNamespace:
    return SimpleNamespace(data=SimpleNamespace(tags={tags.ABLATION_ARM: arm}))


def test_a_stage_subset_call_fine_tunes_only_its_own_test_cells(monkeypatch) -> None:
    store = [_run(a) for a in ("tpp20_wd0.1@l2", "tpp140_wd0.3@l3", "tpp20_wd0.1@l4", "tpp20_wd0.5@l6",
                               "tpp20_wd0.1@l2@lr6e-3", "tpp20_wd0.1@l2@ft_tuning", "tpp20_wd0.1_init1@l2")]
    monkeypatch.setattr(finetune_stage, "grid_cells", lambda client, spec: store)
    spec = load_spec("wd_plasticity")
    below = [r.data.tags[tags.ABLATION_ARM] for r in finetune_stage.finished_test_cells(None, spec.in_stages(["below"]))]
    assert below == ["tpp20_wd0.1@l2", "tpp140_wd0.3@l3", "tpp20_wd0.1_init1@l2"]
    whole = [r.data.tags[tags.ABLATION_ARM] for r in finetune_stage.finished_test_cells(None, spec)]
    assert whole == ["tpp20_wd0.1@l2", "tpp140_wd0.3@l3", "tpp20_wd0.1@l4", "tpp20_wd0.5@l6", "tpp20_wd0.1_init1@l2"]
