"""run_owner: the owner lock a training process holds, judging a RUNNING run's owner alive, dead or unknown, and ending dead ones."""

import os
import socket
import time
from types import SimpleNamespace

import pytest

from lit_modules.config.errors import ConfigError
from lit_modules.tracking import run_owner
from lit_modules.tracking.run_owner import OWNER_LOCK, Owner, end_dead_runs, end_if_dead, own_run, owner_of
from tests.helpers.stores import fresh_store

HOLDER = f"{socket.gethostname()} {os.getpid()}\n"


def running(client, checkpoint_dir=None, age_s: float = 0.0, **tags):
    """A RUNNING run started `age_s` ago, its checkpoint folder tagged (if given)."""
    if checkpoint_dir is not None:
        tags["checkpoint_dir"] = str(checkpoint_dir)
    return client.create_run("0", start_time=int((time.time() - age_s) * 1000), tags=tags)


def test_the_owner_holds_the_lock_naming_itself_and_a_probe_sees_it_alive_then_dead(tmp_path) -> None:
    folder = tmp_path / "checkpoints" / "r1"
    run = SimpleNamespace(info=SimpleNamespace(start_time=0))
    with own_run(folder, "r1"):
        assert (folder / OWNER_LOCK).read_text() == HOLDER
        assert owner_of(run, str(folder)) is Owner.ALIVE
    assert owner_of(run, str(folder)) is Owner.DEAD  # the lock is free: nobody trains it


def test_a_second_owner_is_refused_in_one_sentence_and_the_first_keeps_its_lock(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(run_owner, "CLAIM_WAIT_S", 0.1)
    with own_run(tmp_path, "r1"):
        with pytest.raises(ConfigError) as refused:
            with own_run(tmp_path, "r1"):
                pytest.fail("a second owner got the lock")
        assert str(refused.value) == (f"MLflow run r1 is being trained by another process right now "
                                      f"({HOLDER.strip()}); wait for it to end.")
        assert (tmp_path / OWNER_LOCK).read_text() == HOLDER
    with own_run(tmp_path, "r1"):  # released: the next owner gets it at once
        pass


def test_the_lock_is_released_when_the_block_raises(tmp_path) -> None:
    with pytest.raises(RuntimeError):
        with own_run(tmp_path, "r1"):
            raise RuntimeError("training failed")
    assert owner_of(SimpleNamespace(info=SimpleNamespace(start_time=0)), str(tmp_path)) is Owner.DEAD


def test_no_folder_to_look_in_is_unknown(tmp_path) -> None:
    run = SimpleNamespace(info=SimpleNamespace(start_time=0))
    assert owner_of(run, None) is Owner.UNKNOWN
    assert owner_of(run, "") is Owner.UNKNOWN
    assert owner_of(run, str(tmp_path / "not-made-yet")) is Owner.UNKNOWN


def test_a_folder_without_a_lock_is_alive_for_the_opening_grace_then_dead(tmp_path, monkeypatch) -> None:
    clock = SimpleNamespace(now=0.0)
    monkeypatch.setattr(run_owner, "time", SimpleNamespace(time=lambda: clock.now))
    run = SimpleNamespace(info=SimpleNamespace(start_time=1_000_000))  # ms: started at t = 1000 s
    for now, expected in [(1000.0, Owner.ALIVE), (1120.0, Owner.ALIVE), (1120.5, Owner.DEAD)]:
        clock.now = now
        assert owner_of(run, str(tmp_path)) is expected, now
    assert run_owner.OPENING_GRACE_S == 120.0


def test_a_lock_written_on_another_machine_is_unknown(tmp_path) -> None:
    (tmp_path / OWNER_LOCK).write_text("some-other-host 4242\n")
    assert owner_of(SimpleNamespace(info=SimpleNamespace(start_time=0)), str(tmp_path)) is Owner.UNKNOWN


def test_end_if_dead_ends_only_a_running_run_whose_owner_is_gone(tmp_path) -> None:
    client = fresh_store(tmp_path / "runs")
    dead = running(client, tmp_path / "dead", age_s=3600)
    (tmp_path / "dead").mkdir()
    assert end_if_dead(client, dead, str(tmp_path / "dead"), "a resume") is True
    ended = client.get_run(dead.info.run_id)
    assert ended.info.status == "KILLED"
    assert ended.data.tags["end_reason"] == "its process died without ending the run (no live owner; found by a resume)"

    killed = client.get_run(dead.info.run_id)  # not RUNNING now: never ended twice
    assert end_if_dead(client, killed, str(tmp_path / "dead"), "again") is False
    assert client.get_run(dead.info.run_id).data.tags["end_reason"].endswith("found by a resume)")
    alive = running(client, tmp_path / "alive", age_s=3600)
    with own_run(tmp_path / "alive", alive.info.run_id):
        assert end_if_dead(client, alive, str(tmp_path / "alive"), "a resume") is False
    assert client.get_run(alive.info.run_id).info.status == "RUNNING"


def test_end_dead_runs_ends_the_dead_matching_runs_and_returns_their_ids(tmp_path) -> None:
    client = fresh_store(tmp_path / "runs")
    for name in ("dead", "alive", "other"):
        (tmp_path / name).mkdir()
    dead = running(client, tmp_path / "dead", age_s=3600, config_hash="h1")
    alive = running(client, tmp_path / "alive", age_s=3600, config_hash="h1")
    elsewhere = running(client, None, age_s=3600, config_hash="h1")  # no folder tagged: unknown
    other = running(client, tmp_path / "other", age_s=3600, config_hash="h2")  # dead, but not asked about
    with own_run(tmp_path / "alive", alive.info.run_id):
        ended = end_dead_runs(client, ["0"], "tags.config_hash = 'h1'", "a rerun of its config")
    assert ended == [dead.info.run_id]
    status = {r.info.run_id: client.get_run(r.info.run_id).info.status for r in (dead, alive, elsewhere, other)}
    assert status == {dead.info.run_id: "KILLED", alive.info.run_id: "RUNNING", elsewhere.info.run_id: "RUNNING",
                      other.info.run_id: "RUNNING"}
