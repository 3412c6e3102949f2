"""Bad input at every entry point: one sentence, exit code 2, before any compute, and nothing left behind.

The subprocess tests run the real commands (`make train|sweep|ablate|finetune` without Make) with
runs_dir in a tmp folder, which must not exist afterwards: no MLflow store, no Hydra folder, no run.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers.runs import REPO, tiny_overrides
from lit_modules.config.errors import ConfigError
from lit_modules.data import DataError
from lit_modules.train import run
from lit_modules.config.composition import compose_run_config

UNREACHABLE = "http://127.0.0.1:9"  # the discard port: nothing listens there


def cli(module: str, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", module, *args], cwd=REPO, capture_output=True, text=True,
                          timeout=180, env={**os.environ, **(env or {})})


def refusal(proc: subprocess.CompletedProcess, runs_dir: Path) -> str:
    """The one stderr line of a refused command, after checking the exit code and that nothing was made."""
    assert proc.returncode == 2, proc.stderr[-3000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr[-3000:]
    assert not runs_dir.exists(), sorted(str(p) for p in runs_dir.rglob("*"))
    return lines[0]


def options(group: str) -> str:
    return ", ".join(sorted(p.stem for p in (REPO / "conf" / group).glob("*.yaml")))


# --- item 5: Hydra/OmegaConf composition errors ----------------------------------------------------

COMPOSITION = [
    ("optim.lrr=1e-3", ["Unknown config key 'optim.lrr'", "not in the schema", "closest key is 'optim.lr'"]),
    ("trainer.max_steps=abc", ["trainer.max_steps=abc", "expects an integer"]),
    ("optim.lr=fast", ["optim.lr=fast", "expects a number"]),
    ("pc_layer=level9", ["'level9'", "'pc_layer'", options("pc_layer")]),
    ("model=bogus", ["'bogus'", "'model'", options("model")]),
    ("experiment=bogus", ["'bogus'", "'experiment'", options("experiment")]),
    ("wisca=qk_bogus", ["'qk_bogus'", "'wisca'", options("wisca")]),
    ("mols=bogus", ["'bogus'", "'mols'", options("mols")]),
]


@pytest.mark.parametrize("override,fragments", COMPOSITION, ids=[c[0] for c in COMPOSITION])
def test_composition_error_is_one_sentence_naming_the_key_and_what_is_allowed(override, fragments) -> None:
    with pytest.raises(ConfigError) as err:
        compose_run_config([override])
    message = str(err.value)
    assert "\n" not in message and message.endswith("."), message
    for fragment in fragments:
        assert fragment in message, message


def test_a_key_that_exists_only_with_a_group_option_says_which_group() -> None:
    with pytest.raises(ConfigError, match=r"wisca=<option>.*qk_vo_tensor"):
        compose_run_config(["techniques.wisca.every_n_steps=5"])


def test_every_multirun_job_is_composed_before_hydra_makes_a_folder() -> None:
    from lit_modules.config.composition import compose_multirun

    assert len(compose_multirun(["experiment=smoke"])) == 4  # the preset's 2 arms x 2 seeds
    assert len(compose_multirun(["seed=0,1,2", "optim.lr=1e-3,3e-3"])) == 6
    with pytest.raises(ConfigError, match="optim.lr=fast has the wrong type"):
        compose_multirun(["seed=0,1", "optim.lr=1e-3,fast"])


ENTRY_POINTS = [
    ("lit_modules.train", ["optim.lrr=1e-3", "runs_dir={runs}"], ["'optim.lrr'", "'optim.lr'"]),
    ("sweeps.optuna_sweep", ["pc_layer=level9", "sweep.runs_dir={runs}"], ["'level9'", options("pc_layer")]),
    ("sweeps.ablate", ["experiment=smoke", "trainer.max_steps=abc", "runs_dir={runs}"],
     ["trainer.max_steps=abc", "expects an integer"]),
    ("lit_modules.finetune", ["base_run=0123abcd", "optim.lr=fast", "runs_dir={runs}"],
     ["optim.lr=fast", "expects a number"]),
]


@pytest.mark.parametrize("module,args,fragments", ENTRY_POINTS, ids=[e[0] for e in ENTRY_POINTS])
def test_entry_point_refuses_a_composition_error_in_one_sentence(module, args, fragments, runs_dir: Path) -> None:
    line = refusal(cli(module, *[a.format(runs=runs_dir) for a in args]), runs_dir)
    for fragment in fragments:
        assert fragment in line, line


def test_multirun_with_a_bad_value_is_refused_before_hydra_makes_its_sweep_folder(runs_dir: Path) -> None:
    line = refusal(cli("lit_modules.train", "-m", "seed=0,1", "optim.lr=1e-3,fast", f"runs_dir={runs_dir}"),
                   runs_dir)
    assert "optim.lr=fast" in line


def test_multirun_with_one_impossible_job_is_refused_before_the_first_trains(runs_dir: Path) -> None:
    """Each value composes, the second job cannot run: the first job used to train and stay recorded."""
    line = refusal(cli("lit_modules.train", "-m", "model=tiny_moe", "model.experts_top_k=1,9", "regime=steps",
                       "trainer.max_steps=2", f"runs_dir={runs_dir}"), runs_dir)
    assert "experts_top_k must be between 1 and n_experts (4), got 9." in line


@pytest.mark.parametrize("override,sentence", [
    ("model.n_experts=1", "n_experts must be 0 (dense) or at least 2, got 1."),
    ("model.n_experts=0", "model.n_experts=0 turns model=tiny_moe (4 experts) into a dense model, since 0 means no "
                          "experts; choose a dense model preset for that, or set model.n_experts to at least 2."),
    ("optim.muon_adjust_lr=bogus", "optim.muon_adjust_lr must be one of original, match_rms_adamw, not 'bogus'."),
])
def test_newer_knobs_are_one_sentence_before_a_run_opens(override, sentence, runs_dir: Path) -> None:
    """n_experts=1 said two sentences (the top-k check against one expert too); n_experts=0 under the MoE preset
    trained a dense model without a word; a bad muon_adjust_lr was a ValueError from torch inside the opened run."""
    extra = ["model=tiny_moe"] if override.startswith("model.") else ["optim=muon"]
    with pytest.raises(ConfigError) as err:
        run(compose_run_config([*tiny_overrides(runs_dir, steps=2), *extra, override]))
    assert str(err.value) == sentence
    assert not runs_dir.exists()


# --- item 6: a held-out split too short for data.val_batches ----------------------------------------


def test_too_many_val_batches_are_refused_before_a_run_opens(runs_dir: Path) -> None:
    cfg = compose_run_config(tiny_overrides(runs_dir, steps=2, **{"data.val_batches": "4000"}))
    with pytest.raises(DataError, match="data.val_batches"):
        run(cfg)
    assert not runs_dir.exists()  # no MLflow store, no FAILED run, no checkpoint or artifact folder


# --- item 7: a tracking store that cannot be used ---------------------------------------------------


@pytest.fixture
def unreachable_server(monkeypatch) -> None:
    monkeypatch.setenv("MLFLOW_TRACKING_URI", UNREACHABLE)
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")  # so the unchecked code fails fast too


def test_unreachable_server_is_refused_in_seconds_before_data_is_built(unreachable_server, runs_dir, monkeypatch):
    from lit_modules import training_run

    def no_data(cfg):
        raise AssertionError("data was built before the store was checked")

    monkeypatch.setattr(training_run, "build_data", no_data)
    start = time.perf_counter()
    with pytest.raises(ConfigError, match="127.0.0.1:9 is unreachable") as err:
        run(compose_run_config(tiny_overrides(runs_dir)))
    assert time.perf_counter() - start < 30
    assert "\n" not in str(err.value)
    assert not runs_dir.exists()


def test_sqlite_store_under_a_file_is_refused(runs_dir: Path, tmp_path: Path, monkeypatch) -> None:
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{blocker}/store/mlflow.db")
    with pytest.raises(ConfigError, match="is a file, not a folder"):
        run(compose_run_config(tiny_overrides(runs_dir)))
    assert not runs_dir.exists() and blocker.read_text() == "not a folder"


def test_database_store_check_refuses_a_closed_port_without_showing_the_password() -> None:
    from lit_modules.runs import store_check

    # The port check alone: check_store asks for the database's driver first (see the driver tests below).
    with pytest.raises(ConfigError, match="unreachable") as err:
        store_check._check_port("postgresql://researcher:s3cret@127.0.0.1:9/mlflow", "127.0.0.1", 9, 2,
                                "The MLflow store", store_check.HINT)
    assert "s3cret" not in str(err.value) and "researcher:***@" in str(err.value)


def test_sweep_ablate_and_finetune_check_the_store_first(unreachable_server, runs_dir: Path, capsys) -> None:
    from lit_modules import finetune
    from sweeps import ablate, optuna_sweep

    commands = [
        (optuna_sweep.main, ["sweep.n_trials=1", f"sweep.runs_dir={runs_dir}"]),
        (ablate.main, ["experiment=smoke", f"runs_dir={runs_dir}"]),
        (finetune.main, ["base_run=0123abcd", f"runs_dir={runs_dir}"]),
    ]
    for main, argv in commands:
        assert main(argv) == 2, main.__module__
        errors = capsys.readouterr().err.strip().splitlines()
        assert len(errors) == 1 and "127.0.0.1:9 is unreachable" in errors[0], (main.__module__, errors)
    assert not runs_dir.exists()


# --- a store path the system will not make, a database without its driver, a lookup ---------

NO_PROC = pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc, which takes no new folder")
NO_DRIVER = pytest.mark.skipif(importlib.util.find_spec("psycopg") is not None,
                               reason="needs a machine set up without the PostgreSQL driver (make setup)")


@NO_PROC
def test_a_store_path_that_cannot_be_created_is_one_sentence_before_data(runs_dir: Path, monkeypatch) -> None:
    """Root passes os.access everywhere; /proc takes no folder all the same (the store lock's mkdir crashed)."""
    line = refusal(cli("lit_modules.train", *tiny_overrides(runs_dir, steps=2),
                       env={"MLFLOW_TRACKING_URI": "sqlite:////proc/nope/x.db"}), runs_dir)
    assert "sqlite:////proc/nope/x.db cannot be created: /proc takes no new folder" in line
    from lit_modules import training_run

    monkeypatch.setenv("MLFLOW_TRACKING_URI", "sqlite:////proc/nope/x.db")
    monkeypatch.setattr(training_run, "build_data", lambda cfg: pytest.fail("data was built before the store was checked"))
    with pytest.raises(ConfigError, match="cannot be created"):
        run(compose_run_config(tiny_overrides(runs_dir, steps=2)))
    assert not runs_dir.exists()


@NO_PROC
def test_the_store_lock_refuses_a_folder_it_cannot_make_in_one_sentence() -> None:
    from lit_modules.tracking.store import store_lock

    with pytest.raises(ConfigError, match="cannot be created or locked") as err:
        with store_lock("sqlite:////proc/nope/x.db"):
            pass
    assert "\n" not in str(err.value)


def test_the_store_check_leaves_no_probe_behind(tmp_path: Path) -> None:
    from lit_modules.runs.store_check import check_store

    check_store(f"sqlite:///{tmp_path}/new/mlflow.db")
    (tmp_path / "old.db").write_text("")
    check_store(f"sqlite:///{tmp_path}/old.db")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["old.db"]


@NO_DRIVER
def test_sweep_storage_without_its_driver_is_one_sentence_naming_setup_cluster(runs_dir: Path) -> None:
    line = refusal(cli("sweeps.optuna_sweep", "sweep.n_trials=1", f"sweep.runs_dir={runs_dir}",
                       "sweep.storage=postgresql+psycopg://researcher:s3cret@127.0.0.1:5432/optuna"), runs_dir)
    assert "The sweep storage postgresql+psycopg://researcher:***@127.0.0.1:5432/optuna needs the Python " \
           "driver 'psycopg'" in line and "make setup-cluster" in line and "s3cret" not in line


@NO_DRIVER
def test_a_postgresql_tracking_store_without_its_driver_is_one_sentence(runs_dir: Path) -> None:
    line = refusal(cli("lit_modules.train", *tiny_overrides(runs_dir, steps=2),
                       env={"MLFLOW_TRACKING_URI": "postgresql+psycopg://mlflow@127.0.0.1:5432/mlflow"}), runs_dir)
    assert "needs the Python driver 'psycopg'" in line and "make setup-cluster" in line


def test_sweep_storage_that_is_no_database_url_is_one_sentence(runs_dir: Path) -> None:
    line = refusal(cli("sweeps.optuna_sweep", "sweep.n_trials=1", f"sweep.runs_dir={runs_dir}",
                       "sweep.storage=http://127.0.0.1:9"), runs_dir)
    assert "is not a database URL SQLAlchemy knows" in line


def test_init_from_a_run_of_another_size_is_one_sentence(runs_dir: Path) -> None:
    """load_state_dict's multi-line size-mismatch RuntimeError used to end `lora=lora model=small` (rc 1)."""
    base = run(compose_run_config(tiny_overrides(runs_dir, steps=2)))
    with pytest.raises(ConfigError) as err:
        run(compose_run_config(tiny_overrides(runs_dir, steps=2, model="small", lora="lora", init_from=base.run_id)))
    assert "does not fit this model: tok_emb.weight is (259, 64) there and (259, 128) here" in str(err.value)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("key", ["resume", "init_from"])
def test_looking_up_an_unknown_run_id_creates_no_store(runs_dir: Path, key: str) -> None:
    line = refusal(cli("lit_modules.train", f"{key}={'0123456789abcdef' * 2}", f"runs_dir={runs_dir}"), runs_dir)
    assert "is neither a checkpoint file nor a known MLflow run id (the MLflow store does not exist yet" in line


# --- items 8 and 9: an impossible budget, and what a refusal or a dry run leaves behind --------------


def test_refused_budget_names_the_requested_tokens_and_leaves_nothing(runs_dir: Path) -> None:
    line = refusal(cli("lit_modules.train", "regime=tokens", "regime.tokens=100", f"runs_dir={runs_dir}"), runs_dir)
    assert "The token budget (100 tokens) is smaller than one optimizer step" in line


def test_dry_run_leaves_nothing_behind_and_says_nothing_about_mlflow(runs_dir: Path) -> None:
    proc = cli("lit_modules.train", "dry_run=true", f"runs_dir={runs_dir}")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "FLOPs/token" in proc.stdout
    assert "mlflow" not in (proc.stdout + proc.stderr).lower()
    assert not runs_dir.exists()
