"""system_tags: MLflow's own fields (source, user, commit) and the one-paragraph description of what a run is."""

import getpass
import sys

import pytest
from omegaconf import OmegaConf

from lit_modules.config.budget import Budget
from lit_modules.technique_reports import TechniqueReport
from lit_modules.tracking import system_tags as st

BUDGET = Budget(params_total=139_968, params_non_embedding=106_816, tokens_per_step=512, total_tokens=10_240,
                steps=20, warmup_steps=1, flops_per_token=836_736.0, tokens_per_param=0.0959)
SCALE = "Scale: model `tiny` (106,816 non-embedding parameters), 10,240 tokens in 20 steps."
REPORTS = (TechniqueReport("wisca", {"paper": "Paper W"}), TechniqueReport("bare", None),
           TechniqueReport("evidence", {"paper": "Not this one"}))


@pytest.fixture
def reports(monkeypatch):
    monkeypatch.setattr(st, "technique_reports", lambda: REPORTS)


def config(ablation=None, tags=None, techniques=None, seed=3):
    return OmegaConf.create({
        "model": {"name": "tiny"}, "seed": seed, "tags": tags or {}, "techniques": techniques or {},
        "ablation": {"name": "", "arm": "", "baseline": "baseline", "claim": "", **(ablation or {})},
    })


def test_paper_of_reads_the_claim_key_then_its_last_part(reports) -> None:
    assert st.paper_of("wisca") == "Paper W"
    assert st.paper_of("evidence/wisca") == "Paper W"  # the folder's name, not the key's first part
    assert st.paper_of("bare") is None  # a report without a claim
    assert st.paper_of("evidence/nothing") is None


def test_paper_of_finds_a_real_technique_folder_by_an_evidence_key() -> None:
    assert st.paper_of("evidence/wisca") == st.paper_of("wisca")
    assert st.paper_of("wisca").startswith("WISCA")


def test_an_ablation_cell_names_its_grid_paper_arm_reference_and_seed(reports) -> None:
    cfg = config({"name": "evidence_grid", "arm": "snr", "claim": "evidence/wisca"}, techniques={"wisca": {"x": 1}})
    assert st.describe_run(cfg, BUDGET) == (
        "Cell of the ablation **evidence_grid** (Paper W): arm `snr` (reference `baseline`), seed 3. "
        f"{SCALE} Techniques: wisca.")


def test_an_ablation_cell_without_a_known_paper_has_no_parentheses(reports) -> None:
    cfg = config({"name": "homemade", "arm": "a"})
    assert st.describe_run(cfg, BUDGET) == (
        f"Cell of the ablation **homemade**: arm `a` (reference `baseline`), seed 3. {SCALE} Techniques: none.")


def test_a_sweep_trial_a_finetune_and_a_plain_run(reports) -> None:
    trial = config(tags={"sweep.study": "lr_wd", "sweep.trial_number": "7"})
    assert st.describe_run(trial, BUDGET).startswith("Trial 7 of the sweep **lr_wd**, seed 3. Scale:")
    finetune = config(tags={"finetune.base_run_id": "abc", "finetune.recipe": "sft"})
    assert st.describe_run(finetune, BUDGET).startswith("Fine-tune (recipe `sft`) of run abc. Scale:")
    assert st.describe_run(config(seed=0), BUDGET) == f"Run of `tiny`, seed 0. {SCALE} Techniques: none."
    named = config({"name": "grid"})  # a grid's name without an arm: not a cell
    assert st.describe_run(named, BUDGET).startswith("Run of `grid`, seed 3.")


def test_techniques_lists_only_those_switched_on_in_config_order(reports) -> None:
    cfg = config(techniques={"z_loss": {"coef": 1e-4}, "wisca": None, "pc_layer": {}})
    assert st.describe_run(cfg, BUDGET).endswith("Techniques: z_loss, pc_layer.")


def test_entry_point_is_relative_to_the_repository_or_the_bare_name_outside(monkeypatch, tmp_path) -> None:
    monkeypatch.setattr(sys, "argv", [str(st.REPO / "lit_modules" / "train.py"), "seed=1"])
    assert st.entry_point() == "lit_modules/train.py"
    monkeypatch.setattr(sys, "argv", [str(tmp_path / "elsewhere" / "script.py")])
    assert st.entry_point() == "script.py"


def test_user_is_unknown_when_the_system_has_no_name_for_it(monkeypatch) -> None:
    monkeypatch.setattr(getpass, "getuser", lambda: "alice")
    assert st.user() == "alice"

    def no_passwd_entry():
        raise KeyError("getpwuid(): uid not found: 1234")

    monkeypatch.setattr(getpass, "getuser", no_passwd_entry)
    assert st.user() == "unknown"


def test_system_tags_are_mlflows_five_fields(reports, monkeypatch) -> None:
    monkeypatch.setattr(sys, "argv", [str(st.REPO / "sweeps" / "ablate.py")])
    monkeypatch.setattr(getpass, "getuser", lambda: "alice")
    cfg = config(seed=0)
    assert st.system_tags(cfg, BUDGET, "0123abc") == {
        "mlflow.source.git.commit": "0123abc", "mlflow.source.name": "sweeps/ablate.py",
        "mlflow.source.type": "LOCAL", "mlflow.user": "alice", "mlflow.note.content": st.describe_run(cfg, BUDGET),
    }
