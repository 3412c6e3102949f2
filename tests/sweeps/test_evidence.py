"""The evidence protocols: every cell composes and validates, at the papers' tokens-per-parameter regimes."""

from pathlib import Path

import pandas as pd
import pytest
from omegaconf import OmegaConf

from lit_modules.config.budget import compute_budget
from lit_modules.config.errors import ConfigError
from lit_modules.config.validate import validate
from lit_modules.config.composition import compose_run_config
from lit_modules.config.files import CONF_DIR
from analysis.claims import split_arm
from sweeps.evidence import protocol_file
from sweeps.evidence.args import EvidenceArgs, parse_args
from sweeps.evidence.driver import main
from sweeps.evidence.plan import check_all
from sweeps.evidence.protocol_file import known_papers, load_spec
from sweeps.wall_clock import WallClock

PAPERS = ["mols", "pc_layer", "small_init", "wd_plasticity", "wisca"]


def test_every_paper_has_a_protocol() -> None:
    assert known_papers() == PAPERS


@pytest.mark.slow
@pytest.mark.parametrize("paper", PAPERS)
def test_every_cell_of_every_stage_composes_and_validates(paper: str) -> None:
    check_all([load_spec(paper)], EvidenceArgs())   # ~20-30 s a protocol on the ladder: make test-slow


@pytest.mark.parametrize("paper", PAPERS)
def test_protocol_cells_compose_validate_and_every_arm_is_used(paper: str) -> None:
    spec = load_spec(paper)
    check_all([spec.in_stages(["headline"])], EvidenceArgs())   # the headline's cells; every stage's: slow above
    preset = OmegaConf.load(CONF_DIR / "experiment" / f"{spec.preset}.yaml")
    assert "hydra" not in preset  # the arms are the protocol's: one list, in conf/evidence/<paper>.yaml
    assert preset.ablation.claim == paper and preset.ablation.name == spec.preset
    used = {spec.family(a) for a in spec.ablate_names()}
    assert used == set(spec.arms)  # every declared arm runs somewhere, in a block or in `make ablate`
    running = {a for b in spec.blocks for a in b.arms}
    assert not running & set(spec.ablation_only)


@pytest.mark.parametrize("paper", PAPERS)
def test_cells_train_at_twenty_tokens_per_parameter_or_the_papers_140_or_1_3(paper: str) -> None:
    """Budgets are counted on the plain rung (ladder_tokens): an arm that adds weights (a gate) or drops some
    (GQA's fewer K/V heads) trains on the same tokens as its reference on that rung."""
    from lit_modules.config.ladder import load_ladder

    spec = load_spec(paper)
    for arm in {a for b in spec.blocks for a in b.arms}:
        cfg = validate(compose_run_config([f"experiment={spec.preset}", *spec.arm_words(arm)]))
        assert cfg.ablation.arm == arm  # the protocol names the cell
        budget = compute_budget(cfg)
        wanted = 140 if arm.startswith("tpp140") else 1.3 if "@tpp1.3" in arm else 20
        plain = load_ladder().rung(cfg.model.name)
        assert budget.requested_tokens == plain.tokens(wanted), arm
        # Whole steps: the run stops at the last full step, at most one step's tokens short of the regime.
        one_step = budget.tokens_per_step / plain.params_non_embedding
        on_plain = budget.total_tokens / plain.params_non_embedding
        assert wanted - one_step <= on_plain <= wanted + 0.05, (arm, on_plain)
        if budget.params_non_embedding == plain.params_non_embedding:  # the plain shape: its own TPP is the rule's
            assert wanted - one_step <= budget.tokens_per_param <= wanted + 0.05, (arm, budget.tokens_per_param)
        assert cfg.trainer.num_threads == 1  # the recorded thread count the results are reproduced with


def test_headline_arms_get_at_least_five_paired_seeds() -> None:
    headline = {"wisca": ["g8_origin", "g8_qk_vo_tensor", "g8_origin@tpp1.3", "g8_qk_vo_tensor@tpp1.3"],
                "small_init": ["baseline", "small", "small_eps_gate", "baseline_eps_gate"],
                "mols": ["bpe_baseline", "bpe_snr", "bpe_manual"], "pc_layer": ["adamw_baseline", "adamw_pc4",
                "muon_baseline", "muon_pc2"], "wd_plasticity": ["tpp20_wd0.1", "tpp20_wd0.5", "tpp140_wd0.1",
                                                                "tpp140_wd0.3"]}
    for paper, arms in headline.items():
        spec = load_spec(paper)
        for arm in arms:  # at the headline rung, l4
            seeds = {s for b in spec.blocks if f"{arm}@l4" in b.arms for s in b.seeds}
            assert len(seeds) >= 5, (paper, arm)
            assert seeds <= set(spec.checks["confirmatory_seeds"]), (paper, arm)


def test_bad_protocol_names_are_one_sentence() -> None:
    with pytest.raises(ConfigError, match="no evidence protocol 'bogus'.*known: mols"):
        load_spec("bogus")
    with pytest.raises(ConfigError, match="workers=0 must be a positive integer"):
        parse_args(["workers=0"])
    assert parse_args([]).papers == PAPERS


def test_evidence_runs_a_protocol_exports_it_and_writes_the_ledger(tmp_path: Path, monkeypatch) -> None:
    """The whole verb on a tiny protocol: cells (parallel), fine-tunes, export, report from files, ledger."""
    specs = tmp_path / "specs"
    specs.mkdir()
    (specs / "smoke.yaml").write_text(
        "preset: smoke\nfinetune: python_docs\nfinetune_eval: [local]\nblocks:\n"
        "  - {arms: [baseline, no_decay], seeds: [0, 1]}\n  - {arms: [no_decay], seeds: [2]}\n")
    monkeypatch.setattr(protocol_file, "SPEC_DIR", specs)
    results, ledger = tmp_path / "results", tmp_path / "RESULTS.md"
    argv = ["papers=smoke", f"runs_dir={tmp_path / 'runs'}", f"results_dir={results}", f"ledger={ledger}",
            "trainer.max_steps=6", "finetune.steps=4", "eval.local_items=10", "workers=2"]
    assert main(argv) == 0
    report = (results / "smoke" / "report.md").read_text()
    assert "provenance" in report.lower()
    assert (results / "smoke" / "data" / "runs.csv").is_file()
    assert "smoke" in ledger.read_text()
    # Every fine-tuned model was scored on its target corpus's local tasks, into its own run, and exported.
    tuned = pd.read_csv(results / "smoke" / "data" / "finetune_runs.csv")
    assert len(tuned) == 5 and (tuned["tags.finetune.eval_tasks"] == "local").all()
    acc = [c for c in tuned.columns if c.startswith("metrics.eval/") and c.endswith("/acc")]
    assert acc and all("python_docs" in c for c in acc) and tuned[acc].notna().all().all()
    # Everything finished: a second call runs no cell and no fine-tune, and the report is unchanged.
    assert main(argv) == 0
    assert (results / "smoke" / "report.md").read_text() == report  # provenance kept: the cells ran before


def test_wall_clock_adds_up_calls_and_resets_for_a_fresh_grid(tmp_path: Path) -> None:
    clock = WallClock(str(tmp_path), "wisca")
    assert clock.total() == 0.0
    clock.add(90.5)
    clock.add(30.25)
    assert clock.total() == 120.75 and WallClock(str(tmp_path), "wisca").total() == 120.75
    clock.reset()
    assert clock.total() == 0.0


@pytest.mark.slow  # 51 s; make test-slow (make test stays within its ~15 min)
def test_a_protocol_stopped_midway_and_resumed_reports_both_calls_wall_time(tmp_path: Path, monkeypatch) -> None:
    """A first call stopped after its first stage leaves no provenance but keeps its time; the call that
    finishes the grid records the sum, not only its own part."""
    import sweeps.ablate
    from analysis.provenance import read_provenance

    specs = tmp_path / "specs"
    specs.mkdir()
    (specs / "smoke.yaml").write_text(
        "preset: smoke\nblocks:\n  - {arms: [baseline, no_decay], seeds: [0]}\n"
        "  - {arms: [no_decay], seeds: [1], stage: below}\n")
    monkeypatch.setattr(protocol_file, "SPEC_DIR", specs)
    results = tmp_path / "results"
    argv = ["papers=smoke", "stages=headline,below", f"runs_dir={tmp_path / 'runs'}", f"results_dir={results}",
            f"ledger={tmp_path / 'RESULTS.md'}", "trainer.max_steps=6", "workers=1"]
    real = sweeps.ablate.run_together
    calls = []

    def stopped_in_the_second_stage(argvs):
        calls.append(argvs)
        return real(argvs) if len(calls) == 1 else 128 + 15  # SIGTERM during the second stage's launch

    monkeypatch.setattr(sweeps.ablate, "run_together", stopped_in_the_second_stage)
    assert main(argv) == 143
    assert len(calls[0]) == 1 and len(calls[1]) == 1  # one launch per stage
    assert read_provenance(results / "smoke") is None
    first = WallClock(str(tmp_path / "runs"), "smoke").total()
    assert first > 0

    monkeypatch.setattr(sweeps.ablate, "run_together", real)
    started = __import__("time").time()
    assert main(argv) == 0
    second = __import__("time").time() - started
    record = read_provenance(results / "smoke")
    assert first < record["wall_time_s"] <= first + second


def test_the_headline_stage_runs_unless_the_other_rungs_are_asked_for() -> None:
    """The ladder's rungs are their own stages: `make evidence` runs the headline rung's (l4) cells the primary
    verdicts rest on (every primary arm's, so the headline alone decides them); `below` runs the smaller rungs
    (l2, l3), `scale` the larger (l6); STAGES run in stage order whatever order they are named in."""
    assert parse_args([]).stages == ["headline"]
    assert parse_args(["STAGES=scale,headline"]).stages == ["scale", "headline"]
    for paper in ["mols", "pc_layer", "small_init", "wisca", "wd_plasticity"]:
        spec = load_spec(paper)
        headline = spec.in_stages(["headline"])
        every = spec.in_stages(["scale", "below", "headline"])
        assert headline.blocks and all(a.endswith("@l4") for b in headline.blocks for a in b.arms), paper
        order = [b.stage for b in every.blocks]
        assert order == sorted(order, key=["headline", "below", "scale"].index)  # stage order
        assert every.cells() == spec.cells()
        primary = {c["arm"] for c in spec.checks["primary"]}
        assert primary <= {a for b in headline.blocks for a in b.arms}, paper
        for stage, rungs in (("below", ("@l2", "@l3")), ("scale", ("@l6",))):
            arms = [a for b in spec.in_stages([stage]).blocks for a in b.arms]
            assert arms and all(a.endswith(rungs) for a in arms), (paper, stage)
    # Weight decay's 140-TPP pair stops at l4: at l6 it would read the corpus 2.6 times.
    scale = [a for b in load_spec("wd_plasticity").in_stages(["scale"]).blocks for a in b.arms]
    assert scale and not [a for a in scale if a.startswith("tpp140")]
    with pytest.raises(ConfigError, match="stages= names big; the stages are headline, below, scale"):
        parse_args(["stages=big"])


def test_a_block_with_an_unknown_stage_is_one_sentence(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "odd.yaml").write_text("preset: smoke\nblocks:\n  - {arms: [baseline], seeds: [0], stage: huge}\n")
    monkeypatch.setattr(protocol_file, "SPEC_DIR", tmp_path)
    with pytest.raises(ConfigError, match="block 1 has stage 'huge'; the stages are headline, below, scale"):
        load_spec("odd")


def test_a_cell_in_two_blocks_is_one_sentence(tmp_path: Path, monkeypatch) -> None:
    """A stage's blocks run as one launch, where a cell runs once: the overlap is refused when the spec is read,
    not when the stage is reached."""
    (tmp_path / "odd.yaml").write_text("preset: smoke\nblocks:\n  - {arms: [baseline, no_decay], seeds: [0, 1]}\n"
                                       "  - {arms: [no_decay], seeds: [1, 2]}\n")
    monkeypatch.setattr(protocol_file, "SPEC_DIR", tmp_path)
    with pytest.raises(ConfigError, match="runs `no_decay` seed 1 in blocks 1 and 2; list each cell once"):
        load_spec("odd")


def test_finetune_eval_needs_a_recipe_and_known_tasks_before_any_run(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(protocol_file, "SPEC_DIR", tmp_path)
    (tmp_path / "alone.yaml").write_text("preset: smoke\nfinetune_eval: [local]\nblocks:\n  - {arms: [baseline], seeds: [0]}\n")
    with pytest.raises(ConfigError, match="finetune_eval is a list of tasks for the fine-tuned models, so it needs"):
        load_spec("alone")
    (tmp_path / "odd.yaml").write_text("preset: smoke\nfinetune: python_docs\nfinetune_eval: [local_cloze_nowhere]\n"
                                      "blocks:\n  - {arms: [baseline], seeds: [0]}\n")
    with pytest.raises(ConfigError, match="odd.yaml finetune_eval: .*nowhere"):
        check_all([load_spec("odd")], EvidenceArgs())
    monkeypatch.undo()
    assert load_spec("wd_plasticity").finetune_eval == ("local",)


def test_an_arm_both_run_and_left_to_ablate_is_one_sentence(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "odd.yaml").write_text("preset: smoke\nablation_only: [baseline]\n"
                                       "blocks:\n  - {arms: [baseline], seeds: [0]}\n")
    monkeypatch.setattr(protocol_file, "SPEC_DIR", tmp_path)
    with pytest.raises(ConfigError, match="lists baseline under ablation_only and in a block"):
        load_spec("odd")


def restated_arms(paper: str) -> tuple[list[str], int]:
    """The protocol's arms whose cells compose to the config of their conf/arm/<paper>/ namesake (under the
    protocol's preset, with the protocol's name), and how many namesakes were compared. A namesake that does not
    validate under the preset (an older ablation's file with its own regime) is no config the arm could extend."""
    from lit_modules.config.identity import identity_of
    from lit_modules.tracking.repro import config_hash

    def hash_of(words: list[str]) -> str:
        cfg = validate(compose_run_config(words))
        return config_hash(identity_of(OmegaConf.to_container(cfg, resolve=True)))

    restated, checked = [], 0
    spec = load_spec(paper)
    for name, arm in spec.arms.items():
        twin = CONF_DIR / "arm" / paper / f"{name}.yaml"
        if arm.extends or not twin.is_file():
            continue
        try:
            theirs = hash_of([f"experiment={spec.preset}", f"+arm={paper}/{name}", f"ablation.arm={name}"])
        except ConfigError:
            continue
        checked += 1
        if hash_of([f"experiment={spec.preset}", *spec.arm_words(name)]) == theirs:
            restated.append(f"{paper}: `{name}` restates conf/arm/{paper}/{name}.yaml")
    return restated, checked


def test_no_protocol_arm_restates_an_arm_it_could_extend(tmp_path: Path, monkeypatch) -> None:
    """A protocol arm whose cells would compose to the config of its conf/arm/<paper>/ namesake extends that
    file (`extends:`) instead of saying it again."""
    found = [restated_arms(paper) for paper in PAPERS]
    assert sum(n for _, n in found) >= 1 and not [r for rs, _ in found for r in rs]
    # The check finds one: a protocol named smoke whose no_decay says conf/arm/smoke/no_decay.yaml again.
    (tmp_path / "smoke.yaml").write_text("preset: smoke\narms:\n  no_decay: [optim.weight_decay=0.0]\n"
                                         "blocks:\n  - {arms: [no_decay], seeds: [0]}\n")
    monkeypatch.setattr(protocol_file, "SPEC_DIR", tmp_path)
    assert restated_arms("smoke") == (["smoke: `no_decay` restates conf/arm/smoke/no_decay.yaml"], 1)


def test_no_arm_file_only_sets_the_model_size() -> None:
    """Arms at rungs are generated from the protocol (`<arm>@<rung>`): no file per rung in conf/arm/."""
    sizes = []
    for path in sorted((CONF_DIR / "arm").rglob("*.yaml")):
        node = OmegaConf.to_container(OmegaConf.load(path)) or {}
        defaults = [d for d in node.get("defaults") or [] if d != "_self_"]
        model = [d for d in defaults if isinstance(d, dict) and "override /model" in d]
        extends = [d for d in defaults if isinstance(d, str) and d.startswith("/arm/")]
        settings = {k for k in node if k not in ("defaults", "ablation")}
        if model and len(model) + len(extends) == len(defaults) and not settings:
            sizes.append(str(path.relative_to(CONF_DIR)))
    assert not (CONF_DIR / "arm" / "evidence").exists() and not sizes, sizes
