"""Checkpoints carry a sha256 written atomically with them; every loader refuses a damaged one, in one sentence.

The loaders of a run's checkpoint are resume, evaluation, PC export, fine-tuning and init_from; a refused
load exits 2 and leaves the run's MLflow status as it was.
"""

import os
import shutil
import struct
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.helpers.runs import REPO, all_runs, mlflow_client, tiny_overrides
from lit_modules.config.errors import ConfigError
from lit_modules.train import run
from lit_modules.verified_checkpoint import (
    CheckpointError,
    checksum_path,
    commit_checkpoint,
    load_verified_checkpoint,
    verify_checkpoint,
)
from lit_modules.config.composition import compose_run_config


def checkpoint_of(runs_dir: Path, run_id: str) -> Path:
    return Path(mlflow_client(runs_dir).get_run(run_id).data.tags["checkpoint_dir"]) / "last.ckpt"


def flip_a_weight_bit(checkpoint: Path) -> None:
    """Flip one bit in the middle of the largest tensor record: the file keeps its size and still loads."""
    with zipfile.ZipFile(checkpoint) as archive:
        record = max(archive.infolist(), key=lambda info: info.file_size)
    with open(checkpoint, "r+b") as handle:
        handle.seek(record.header_offset + 26)  # local header: name and extra-field lengths
        name_len, extra_len = struct.unpack("<HH", handle.read(4))
        offset = record.header_offset + 30 + name_len + extra_len + record.file_size // 2
        handle.seek(offset)
        byte = handle.read(1)[0]
        handle.seek(offset)
        handle.write(bytes([byte ^ 0x10]))


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> tuple[Path, str]:
    runs_dir = tmp_path_factory.mktemp("finished") / "runs"
    result = run(compose_run_config(tiny_overrides(runs_dir, steps=10)))
    assert result.status == "FINISHED"
    return runs_dir, result.run_id


@pytest.fixture
def damaged(finished):
    """The finished run with one bit of its checkpoint flipped, restored afterwards."""
    runs_dir, run_id = finished
    checkpoint = checkpoint_of(runs_dir, run_id)
    original = checkpoint.read_bytes()
    flip_a_weight_bit(checkpoint)
    assert checkpoint.stat().st_size == len(original)
    yield runs_dir, run_id, checkpoint
    checkpoint.write_bytes(original)


def test_training_writes_a_sha256sum_line_that_matches_the_checkpoint(finished) -> None:
    runs_dir, run_id = finished
    checkpoint = checkpoint_of(runs_dir, run_id)
    sums = checksum_path(checkpoint).read_text()
    assert sums == f"{verify_checkpoint(checkpoint)}  last.ckpt\n"  # one line, the `sha256sum` format
    proc = subprocess.run(["sha256sum", "-c", sums_name(checkpoint)], cwd=checkpoint.parent,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_a_run_leaves_one_checkpoint_its_checksum_and_nothing_half_written(finished) -> None:
    runs_dir, run_id = finished
    folder = checkpoint_of(runs_dir, run_id).parent
    assert sorted(p.name for p in folder.iterdir()) == ["config.json", "last.ckpt", "last.ckpt.sha256", "owner.lock"]


def sums_name(checkpoint: Path) -> str:
    return checksum_path(checkpoint).name


class CrashAt(Exception):
    pass


@pytest.mark.parametrize("crash_at", range(4))
def test_a_crash_at_any_step_of_a_checkpoint_write_leaves_a_pair_that_agrees(tmp_path: Path, monkeypatch,
                                                                             crash_at: int) -> None:
    checkpoint = tmp_path / "last.ckpt"
    (tmp_path / "a.tmp").write_bytes(b"old checkpoint")
    commit_checkpoint(tmp_path / "a.tmp", checkpoint)
    (tmp_path / "b.tmp").write_bytes(b"new checkpoint, longer than the old one")

    replaces = []
    real_replace = os.replace

    def crashing_replace(src, dst):
        # The write makes three renames (checksum, checkpoint, checksum): crash before the n-th, or never.
        if len(replaces) == crash_at:
            raise CrashAt()
        replaces.append(dst)
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", crashing_replace)
    if crash_at < 3:
        with pytest.raises(CrashAt):
            commit_checkpoint(tmp_path / "b.tmp", checkpoint)
    else:
        commit_checkpoint(tmp_path / "b.tmp", checkpoint)
    monkeypatch.setattr(os, "replace", real_replace)
    verify_checkpoint(checkpoint)  # whatever last.ckpt holds now, its checksum accepts it
    expected = b"old checkpoint" if crash_at < 2 else b"new checkpoint, longer than the old one"
    assert checkpoint.read_bytes() == expected
    checkpoint.write_bytes(b"old checkpoinT")  # and a damaged file is still refused in that state
    with pytest.raises(CheckpointError, match="does not match its checksum"):
        verify_checkpoint(checkpoint)


def test_resume_refuses_a_truncated_checkpoint_in_one_sentence_and_the_run_stays_killed(runs_dir: Path):
    paused = run(compose_run_config(tiny_overrides(runs_dir, steps=20, **{"trainer.stop_after_steps": "10"})))
    client = mlflow_client(runs_dir)
    before = client.get_run(paused.run_id)
    assert before.info.status == "KILLED"
    checkpoint = checkpoint_of(runs_dir, paused.run_id)
    with open(checkpoint, "r+b") as handle:
        handle.truncate(checkpoint.stat().st_size // 2)
    proc = subprocess.run([sys.executable, "-m", "lit_modules.train", *tiny_overrides(runs_dir, steps=20),
                           f"resume={paused.run_id}"], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    (line,) = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert "does not match its checksum" in line and str(checkpoint) in line
    after = client.get_run(paused.run_id)
    assert after.info.status == "KILLED"  # not RUNNING, not FAILED
    assert after.data.tags["end_reason"] == before.data.tags["end_reason"]
    assert after.info.end_time == before.info.end_time


def test_a_same_size_bit_flip_is_refused_by_eval_export_finetune_and_init_from(damaged, tmp_path: Path,
                                                                                capsys) -> None:
    from lit_modules.evaluation.run_eval import main as eval_main
    from lit_modules.finetune import main as finetune_main
    from lit_modules.export.__main__ import main as export_main

    runs_dir, run_id, checkpoint = damaged
    client = mlflow_client(runs_dir)
    runs_before = len(all_runs(runs_dir))
    metrics_before = client.get_run(run_id).data.metrics
    assert eval_main([f"run={run_id}", f"runs_dir={runs_dir}"]) == 2
    assert export_main(["plain", str(checkpoint), str(tmp_path / "merged.pt")]) == 2
    assert not (tmp_path / "merged.pt").exists()
    assert finetune_main([f"base_run={run_id}", f"runs_dir={runs_dir}", "finetune.steps=2"]) == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    assert len(errors) == 3 and all("does not match its checksum" in line for line in errors)
    with pytest.raises(CheckpointError, match="does not match its checksum"):
        run(compose_run_config(tiny_overrides(runs_dir, steps=5, init_from=run_id)))
    assert len(all_runs(runs_dir)) == runs_before  # no fine-tune or init_from run was opened
    assert client.get_run(run_id).data.metrics == metrics_before  # nothing was written into the run
    assert client.get_run(run_id).info.status == "FINISHED"


def test_a_checkpoint_without_its_checksum_is_refused_with_how_to_accept_it(finished, tmp_path: Path) -> None:
    runs_dir, run_id = finished
    copy = tmp_path / "last.ckpt"
    shutil.copy(checkpoint_of(runs_dir, run_id), copy)
    with pytest.raises(CheckpointError, match=r"has no checksum file last\.ckpt\.sha256.*sha256sum last\.ckpt"):
        load_verified_checkpoint(copy)
    subprocess.run(f"sha256sum last.ckpt > {sums_name(copy)}", shell=True, cwd=tmp_path, check=True)
    assert "state_dict" in load_verified_checkpoint(copy)  # the documented way to vouch for a file works
    assert issubclass(CheckpointError, ConfigError)  # so every CLI reports it in one sentence with exit 2
