"""Ranks from an outside launcher (torchrun's environment): the layout, and the trainer config that fits it."""

import pytest

from lit_modules.config.errors import ConfigError
from lit_modules.config.validate import validate
from lit_modules.distributed.ranks import Ranks, launch_problems, launched_ranks
from lit_modules.config.composition import compose_run_config

TORCHRUN_2 = {"RANK": "1", "LOCAL_RANK": "1", "WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "2", "GROUP_RANK": "0",
              "GROUP_WORLD_SIZE": "1"}


def test_the_layout_comes_from_torchruns_environment() -> None:
    assert launched_ranks("cpu", TORCHRUN_2) == Ranks(rank=1, local_rank=1, world_size=2, local_world_size=2)
    assert launched_ranks("cpu", {}) == Ranks()
    assert not Ranks().external and Ranks().is_zero and not Ranks(rank=1, world_size=2).is_zero


def test_one_process_decides_without_any_process_group() -> None:
    import torch.distributed as dist

    assert Ranks().decide(lambda: {"run_id": "abc"}) == {"run_id": "abc"}
    assert not dist.is_initialized()


def test_ddp_torchrun_takes_devices_and_nodes_from_torchrun(monkeypatch) -> None:
    for key, value in {**TORCHRUN_2, "LOCAL_WORLD_SIZE": "4", "WORLD_SIZE": "8", "GROUP_WORLD_SIZE": "2"}.items():
        monkeypatch.setenv(key, value)
    trainer = compose_run_config(["trainer=ddp_torchrun"]).trainer
    assert (trainer.devices, trainer.num_nodes, trainer.strategy) == (4, 2, "ddp")
    assert launch_problems(trainer, launched_ranks()) == []


def test_without_torchrun_ddp_torchrun_is_one_process() -> None:
    trainer = compose_run_config(["trainer=ddp_torchrun"]).trainer
    assert (trainer.devices, trainer.num_nodes) == (1, 1)


@pytest.mark.parametrize("trainer, fragment", [
    ("cpu", "trainer.devices=1 x trainer.num_nodes=1"),
    ("ddp", "trainer.strategy=ddp_spawn starts its own processes"),
])
def test_a_trainer_that_does_not_fit_the_launched_ranks_is_one_sentence(trainer, fragment, monkeypatch) -> None:
    for key, value in TORCHRUN_2.items():
        monkeypatch.setenv(key, value)
    with pytest.raises(ConfigError) as err:
        validate(compose_run_config([f"trainer={trainer}", "regime=steps", "trainer.max_steps=10"]))
    assert fragment in str(err.value) and "trainer=ddp_torchrun" in str(err.value)


def test_ddp_over_several_devices_without_a_launcher_points_at_torchrun() -> None:
    with pytest.raises(ConfigError) as err:
        validate(compose_run_config(["trainer=ddp", "trainer.strategy=ddp", "regime=steps", "trainer.max_steps=10"]))
    assert str(err.value) == ("trainer.strategy=ddp over 2 devices needs its ranks started by torchrun: torchrun "
                              "--nproc_per_node=2 -m lit_modules.train trainer=ddp_torchrun ... (or trainer=ddp, "
                              "which spawns them from this process).")


def _decide_in_rank(rank: int, port: int, results) -> None:
    import os

    import torch.distributed as dist

    os.environ.update({"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)})
    dist.init_process_group("gloo", rank=rank, world_size=2)
    ranks = Ranks(rank=rank, world_size=2)

    def refuse():
        raise ConfigError("resume=abc is not a known run")

    try:
        ranks.decide(refuse)
        results.put((rank, "no error"))
    except ConfigError as err:
        results.put((rank, f"ConfigError: {err}"))
    assert ranks.decide(lambda: 7) == 7  # the group still works after a shared refusal
    dist.destroy_process_group()


def test_an_error_on_rank_zero_is_raised_on_every_rank_instead_of_a_hang() -> None:
    import socket

    import torch.multiprocessing as mp

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    context = mp.get_context("spawn")
    results = context.Queue()
    workers = [context.Process(target=_decide_in_rank, args=(rank, port, results)) for rank in (0, 1)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=60)
    assert all(w.exitcode == 0 for w in workers), [w.exitcode for w in workers]
    got = dict(results.get(timeout=5) for _ in workers)
    assert got == {0: "ConfigError: resume=abc is not a known run", 1: "ConfigError: resume=abc is not a known run"}
