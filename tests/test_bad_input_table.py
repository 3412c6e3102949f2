"""Bad input on the newer verbs and features, as a careless or hostile user types it: one parametrised test
over the table, each case a real command in its own process that must exit 2 with one line (`error: ...`, no
traceback) naming what was typed, leave nothing behind (its scratch folder, the trained run's folder and the
repository's runs/ as they were), and, where the refusal needs no training stack, say it before Lightning,
torch._dynamo, transformers or lm-eval load.

The cases cover Hugging Face import and export, recipes and the planner, the evidence protocols, reports, the
ledger, the GPU cost table, evaluation, resume and fine-tuning. The older entry points' own table is
tests/lit_modules/config/test_bad_input.py.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pytest

from tests.helpers.runs import REPO, tiny_overrides

UNKNOWN_ID = "0123456789abcdef0123456789abcdef"
HEAVY = ("lightning", "torch._dynamo", "transformers", "lm_eval")
# Runs `python -m <module> <words>` as __main__ and prints, at exit, which of HEAVY it loaded.
ANY_MAIN = ("import atexit, runpy, sys\n"
            f"atexit.register(lambda: print('HEAVY', ','.join(m for m in {HEAVY!r} if m in sys.modules)))\n"
            "module = sys.argv[2]; sys.argv = [module, *sys.argv[3:]]\n"
            "runpy.run_module(module, run_name='__main__', alter_sys=True)\n")


@dataclass(frozen=True)
class Bad:
    argv: tuple[str, ...]  # "-m", module, words: {s} scratch, {store} the trained run's runs_dir, {run} its id
    says: str  # a fragment of the one sentence
    prepare: Callable[[Path, dict], None] | None = None  # makes the case's input in its scratch folder
    light: bool = True  # refused before any of HEAVY loads


def _hf_copy(scratch: Path, made: dict) -> Path:
    return Path(shutil.copytree(made["hf"], scratch / "hf"))


def _cut(keep: Callable[[int], int]) -> Callable[[Path, dict], None]:
    def prepare(scratch: Path, made: dict) -> None:
        weights = _hf_copy(scratch, made) / "model.safetensors"
        data = weights.read_bytes()
        weights.write_bytes(data[:keep(len(data))])
    return prepare


def _hf_file(name: str, text: str) -> Callable[[Path, dict], None]:
    def prepare(scratch: Path, made: dict) -> None:
        (_hf_copy(scratch, made) / name).write_text(text)
    return prepare


def _vocab_as_text(scratch: Path, made: dict) -> None:
    config = _hf_copy(scratch, made) / "config.json"
    config.write_text(json.dumps({**json.loads(config.read_text()), "vocab_size": "259"}))


def _damaged_sidecar(scratch: Path, made: dict) -> None:
    folder = Path(shutil.copytree(made["checkpoint"], scratch / "ckpt"))
    (folder / "config.json").write_text('{"config": {"model": ')


def _a_file(scratch: Path, made: dict) -> None:
    (scratch / "a_file").write_text("not a folder")


HF = "init_from=hf:{s}/hf"
TRAIN, EVAL, EXPORT, FINETUNE = "lit_modules.train", "lit_modules.evaluation.run_eval", "lit_modules.export", \
    "lit_modules.finetune"
CASES = {
    # --- Hugging Face import: init_from=hf:<folder>, finetune base_run=hf:<folder> ---
    "hf_weights_cut_in_half": Bad(("-m", TRAIN, HF, "runs_dir={s}/runs"),
                                  "model.safetensors is not a complete safetensors file", _cut(lambda n: n // 2)),
    "hf_weights_last_100_bytes_cut": Bad(("-m", TRAIN, HF, "runs_dir={s}/runs"),
                                         "incomplete metadata, file not fully covered", _cut(lambda n: n - 100)),
    "hf_weights_file_empty": Bad(("-m", TRAIN, HF, "runs_dir={s}/runs"), "header too small", _cut(lambda n: 0)),
    "hf_config_is_a_list": Bad(("-m", TRAIN, HF, "runs_dir={s}/runs"), "config.json holds a JSON list",
                               _hf_file("config.json", "[1, 2]")),
    "hf_index_not_json": Bad(("-m", TRAIN, HF, "runs_dir={s}/runs"), "model.safetensors.index.json is not valid JSON",
                             _hf_file("model.safetensors.index.json", "{weight_map: ")),
    "hf_index_without_weight_map": Bad(("-m", TRAIN, HF, "runs_dir={s}/runs"), "has no weight_map",
                                       _hf_file("model.safetensors.index.json", '{"metadata": {}}')),
    "hf_vocab_size_as_text": Bad(("-m", TRAIN, HF, "runs_dir={s}/runs"), "lacks vocab_size (an integer)",
                                 _vocab_as_text),
    "hf_bpe_over_the_folders_tokenizer": Bad(("-m", TRAIN, HF, "tokenizer=bpe", "runs_dir={s}/runs"),
                                             "add tokenizer=pretrained", _hf_file("README.md", "copied")),
    "finetune_from_a_cut_short_folder": Bad(("-m", FINETUNE, "base_run=hf:{s}/hf", "runs_dir={s}/runs"),
                                            "is not a complete safetensors file", _cut(lambda n: n - 100)),
    # --- export ---
    "export_into_proc": Bad(("-m", EXPORT, "hf", "{run}", "/proc/llm-ablate-x", "--runs-dir", "{store}"),
                            "/proc/llm-ablate-x cannot be written: /proc takes no new folder"),
    "export_plain_into_proc": Bad(("-m", EXPORT, "plain", "{run}", "/proc/x.pt", "--runs-dir", "{store}"),
                                  "cannot be written: /proc takes no new folder"),
    "export_under_a_file": Bad(("-m", EXPORT, "hf", "{run}", "{s}/a_file/out", "--runs-dir", "{store}"),
                               "a_file is a file, not a folder", _a_file),
    "export_without_a_store_names_the_flag": Bad(("-m", EXPORT, "hf", "{run}", "{s}/out", "--runs-dir", "{s}/none"),
                                                 "pass --runs-dir <the folder the run was trained in>"),
    "export_an_id_the_store_lacks": Bad(("-m", EXPORT, "hf", UNKNOWN_ID, "{s}/out", "--runs-dir", "{store}"),
                                        f"{UNKNOWN_ID} is not a run in the MLflow store"),
    "export_a_checkpoint_with_a_damaged_config": Bad(("-m", EXPORT, "hf", "{s}/ckpt", "{s}/out"),
                                                     "config.json cannot be read as the run's config", _damaged_sidecar),
    "export_with_a_misspelled_flag": Bad(("-m", EXPORT, "hf", "{run}", "{s}/out", "--runs_dir", "{store}"),
                                         "unrecognized arguments: --runs_dir"),
    # --- recipes and the planner ---
    "dry_run_of_an_unknown_recipe": Bad(("-m", TRAIN, "recipe=llama_2b", "dry_run=true"),
                                        "There is no option 'llama_2b' in the config group 'recipe'"),
    "recipe_batch_that_does_not_divide": Bad(("-m", TRAIN, "recipe=llama_1b", "trainer.devices=1",
                                              "trainer.global_batch_tokens=1000", "dry_run=true"),
                                             "tokens on 1 device ("),
    "plan_for_an_unknown_gpu": Bad(("-m", TRAIN, "recipe=gpt2_124m", "plan.gpu=b200", "dry_run=true"),
                                   "plan.gpu=b200 is not a GPU the planner knows"),
    "plan_at_zero_mfu": Bad(("-m", TRAIN, "recipe=gpt2_124m", "plan.mfu=0", "dry_run=true"), "plan.mfu must be in (0, 1]"),
    "moe_preset_with_zero_experts": Bad(("-m", TRAIN, "model=tiny_moe", "model.n_experts=0", "runs_dir={s}/runs"),
                                        "model.n_experts=0 turns model=tiny_moe (4 experts) into a dense model"),
    # --- the GPU cost table ---
    "gpu_cost_unknown_gpu": Bad(("-m", "sweeps.gpu_cost", "gpu=nope"), "gpu=nope is not a GPU the planner knows"),
    "gpu_cost_mfu_not_a_number": Bad(("-m", "sweeps.gpu_cost", "mfu=forty"), "mfu=forty must be a number in (0, 1]"),
    "gpu_cost_zero_devices": Bad(("-m", "sweeps.gpu_cost", "devices=0"), "devices=0 must be a positive integer"),
    "gpu_cost_unknown_recipe": Bad(("-m", "sweeps.gpu_cost", "recipes=llama_7b"), "There is no recipe 'llama_7b'"),
    # --- evidence protocols ---
    "evidence_unknown_paper": Bad(("-m", "sweeps.evidence", "papers=adam", "runs_dir={s}/runs",
                                   "results_dir={s}/results", "ledger={s}/RESULTS.md"),
                                  "There is no evidence protocol 'adam'"),
    "evidence_unknown_stage": Bad(("-m", "sweeps.evidence", "papers=wisca", "stages=headline,tail",
                                   "runs_dir={s}/runs", "results_dir={s}/results", "ledger={s}/RESULTS.md"),
                                  "stages= names tail; the stages are headline, below, scale"),
    # Composed per cell by sweeps.ablate, whose progress lines import Lightning (callbacks.live_progress) first.
    "evidence_dry_run_not_a_flag": Bad(("-m", "sweeps.evidence", "papers=wisca", "dry_run=maybe",
                                        "runs_dir={s}/runs", "results_dir={s}/results", "ledger={s}/RESULTS.md"),
                                       "dry_run=maybe has the wrong type", light=False),
    # --- reports and the ledger ---
    "report_from_a_folder_that_is_no_export": Bad(("-m", "analysis.report", "FROM={s}"),
                                                  "is not an exported results folder"),
    "report_from_and_exp_together": Bad(("-m", "analysis.report", "FROM=results/wisca", "EXP=wisca"),
                                        "FROM=<results folder> reads exported files only"),
    "report_of_an_unknown_experiment": Bad(("-m", "analysis.report", "EXP=nope", "runs_dir={s}/runs"), "named 'nope'"),
    "ledger_of_a_folder_without_exports": Bad(("-m", "analysis.ledger", "results={s}", "out={s}/R.md"),
                                              "no exported results folder"),
    "ledger_into_an_unwritable_place": Bad(("-m", "analysis.ledger", "out=/proc/llm-ablate/RESULTS.md"),
                                           "/proc/llm-ablate"),
    # --- evaluation ---
    "eval_task_typo_gets_the_close_names": Bad(("-m", EVAL, "run={run}", "tasks=hellaswagg", "runs_dir={store}"),
                                               "tasks=hellaswagg names 'hellaswagg'"),
    "eval_malformed_local_task": Bad(("-m", EVAL, "run={run}", "tasks=local_bogus", "runs_dir={store}"),
                                     "'local_bogus' is not a local task"),
    "eval_empty_task_list": Bad(("-m", EVAL, "run={run}", "tasks=", "runs_dir={store}"), "tasks= lists nothing"),
    "eval_setting_out_of_range": Bad(("-m", EVAL, "run={run}", "batch_size=0", "runs_dir={store}"),
                                     "eval.batch_size is 0 but must be at least 1"),
    # --- resume and fine-tune ---
    "resume_unknown_id_without_a_store": Bad(("-m", TRAIN, f"resume={UNKNOWN_ID}", "runs_dir={s}/runs"),
                                             "the MLflow store does not exist yet"),
    "resume_unknown_id_in_the_store": Bad(("-m", TRAIN, f"resume={UNKNOWN_ID}", "runs_dir={store}"),
                                          "is neither a checkpoint file nor a known MLflow run id."),
    "finetune_unknown_base_without_a_store": Bad(("-m", FINETUNE, f"base_run={UNKNOWN_ID}", "runs_dir={s}/runs"),
                                                 "There is no MLflow store"),
}


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> dict:
    """One tiny trained run (its store and checkpoint folder) and its Hugging Face export."""
    from lit_modules.config.composition import compose_run_config
    from lit_modules.export.hf_export import export_hf
    from lit_modules.train import run

    root = tmp_path_factory.mktemp("bad_input_table")
    store = root / "runs"
    run_id = run(compose_run_config(tiny_overrides(store, steps=2))).run_id
    hf = export_hf(run_id, root / "hf", store)
    return {"store": store, "run": run_id, "checkpoint": store / "checkpoints" / run_id, "hf": hf}


def _listing(folder: Path) -> dict[str, tuple[int, int]]:
    """Every path under `folder` with its size and modification time: what a refusal must not change."""
    if not folder.exists():
        return {}
    return {str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns) for p in folder.rglob("*")}


def _snapshot(scratch: Path, made: dict) -> dict:
    return {"scratch": _listing(scratch), "store": _listing(made["store"]), "hf": _listing(made["hf"]),
            "repo_runs": (REPO / "runs").exists()}


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="the export cases need /proc, which takes no new folder")
@pytest.mark.parametrize("case", CASES.values(), ids=list(CASES))
def test_bad_input_is_one_sentence_exit_2_and_nothing_left(case: Bad, made: dict, tmp_path: Path) -> None:
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    if case.prepare is not None:
        case.prepare(scratch, made)
    words = [w.format(s=scratch, store=made["store"], run=made["run"]) for w in case.argv]
    before = _snapshot(scratch, made)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO)}
    env.pop("MLFLOW_TRACKING_URI", None)
    done = subprocess.run([sys.executable, "-c", ANY_MAIN, *words], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=300)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2, done.stderr[-3000:]
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr[-3000:]
    assert case.says in lines[0], lines[0]
    assert _snapshot(scratch, made) == before  # nothing made, nothing changed
    heavy = done.stdout.strip().splitlines()[-1]
    if case.light:
        assert heavy == "HEAVY", f"{heavy} loaded before the refusal"
